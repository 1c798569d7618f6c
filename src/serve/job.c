/* serve/job.c - a request's shared state; see job.h. */
#include "serve/job.h"

#include "base/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct job *job_new(enum job_kind kind)
{
    struct job *j = calloc(1, sizeof *j);
    if (!j) return NULL;
    j->kind = kind;
    pthread_mutex_init(&j->mu, NULL);
    pthread_cond_init(&j->cv, NULL);
    atomic_init(&j->cancelled, 0);
    atomic_init(&j->refs, 1);
    return j;
}

/* Wakes whoever waits on j; called with j->mu held. */
static void changed(struct job *j)
{
    pthread_cond_broadcast(&j->cv);
    if (j->on_change) j->on_change(j->on_change_arg);
}

void job_retain(struct job *j) { atomic_fetch_add(&j->refs, 1); }

void job_release(struct job *j)
{
    if (!j || atomic_fetch_sub(&j->refs, 1) != 1) return;
    for (int i = 0; i < j->n_ev; i++) free(j->ev[i].text);
    for (int i = 0; i < j->p.n_stop; i++) free(j->p.stop[i]);
    free(j->p.logit_bias);
    colibri_grammar_free(j->p.grammar);
    free(j->ev);
    free(j->prompt);
    pthread_mutex_destroy(&j->mu);
    pthread_cond_destroy(&j->cv);
    free(j);
}

int job_push(struct job *j, struct job_event *ev)
{
    pthread_mutex_lock(&j->mu);
    if (j->n_ev == j->cap_ev) {
        int cap = j->cap_ev ? 2 * j->cap_ev : 64;
        struct job_event *nev = realloc(j->ev, (size_t)cap * sizeof *nev);
        if (!nev) {
            pthread_mutex_unlock(&j->mu);
            free(ev->text);
            return COLIBRI_ENOMEM;
        }
        j->ev = nev;
        j->cap_ev = cap;
    }
    j->ev[j->n_ev++] = *ev;
    changed(j);
    pthread_mutex_unlock(&j->mu);
    return 0;
}

void job_finish(struct job *j, enum job_finish fin, int n_cached, int n_gen)
{
    pthread_mutex_lock(&j->mu);
    if (j->finish == JOB_RUNNING) {
        j->finish = fin;
        j->n_cached = n_cached;
        j->n_gen = n_gen;
        j->t_end = base_now_sec();
    }
    changed(j);
    pthread_mutex_unlock(&j->mu);
}

void job_fail(struct job *j, int http_status, const char *msg)
{
    pthread_mutex_lock(&j->mu);
    if (j->finish == JOB_RUNNING) {
        j->finish = JOB_FIN_ERROR;
        j->err_status = http_status;
        snprintf(j->err_msg, sizeof j->err_msg, "%s", msg);
        j->t_end = base_now_sec();
    }
    changed(j);
    pthread_mutex_unlock(&j->mu);
}

const char *job_finish_name(enum job_finish f)
{
    static const char *const names[] = {
        [JOB_RUNNING] = "running", [JOB_FIN_STOP] = "stop", [JOB_FIN_LENGTH] = "length",
        [JOB_FIN_CANCELLED] = "cancelled", [JOB_FIN_ERROR] = "error",
    };
    return names[f];
}

struct colibri_sampler_opts job_sampler_opts(const struct job_params *p)
{
    struct colibri_sampler_opts so = colibri_sampler_default_opts();
    so.temperature = p->temperature;
    so.top_k = p->top_k;
    so.top_p = p->top_p;
    so.min_p = p->min_p;
    so.repeat_penalty = p->repeat_penalty > 0 ? p->repeat_penalty : 1;
    so.presence_penalty = p->presence_penalty;
    so.frequency_penalty = p->frequency_penalty;
    int penalized = p->presence_penalty != 0 || p->frequency_penalty != 0 || so.repeat_penalty != 1;
    so.repeat_last_n = penalized ? -1 : 0;
    so.seed = p->seed;
    so.logit_bias = p->logit_bias;
    so.n_logit_bias = (size_t)p->n_logit_bias;
    so.grammar = p->grammar;
    return so;
}
