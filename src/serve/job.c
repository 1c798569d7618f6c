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

/* Wakes whoever waits on j, and on its group; called with j->mu held.
 * ended: j's finish was set just now. */
static void changed(struct job *j, int ended)
{
    pthread_cond_broadcast(&j->cv);
    if (j->on_change) j->on_change(j->on_change_arg);
    struct job *g = j->group;
    if (!g) return;
    pthread_mutex_lock(&g->mu);
    g->n_changes++;
    if (ended && ++g->n_done == g->n_choices && g->finish == JOB_RUNNING) {
        /* the group's finish: an error if a choice failed, cancelled if one
         * was, else STOP (each choice keeps its own reason) */
        enum job_finish fin = JOB_FIN_STOP;
        for (int i = 0; i < g->n_choices; i++) {
            const struct job *c = g->choice[i];
            if (c == j) continue;   /* its mu is ours; the rest are read as set (they ended earlier) */
            if (c->finish == JOB_FIN_CANCELLED && fin == JOB_FIN_STOP) fin = JOB_FIN_CANCELLED;
        }
        if (j->finish == JOB_FIN_CANCELLED && fin == JOB_FIN_STOP) fin = JOB_FIN_CANCELLED;
        g->finish = fin;
        g->t_end = base_now_sec();
    }
    if (ended && j->finish == JOB_FIN_ERROR && g->finish != JOB_FIN_ERROR) {
        g->finish = JOB_FIN_ERROR;  /* the first failure answers for the request */
        g->err_status = j->err_status;
        snprintf(g->err_msg, sizeof g->err_msg, "%s", j->err_msg);
        g->t_end = base_now_sec();
    }
    pthread_cond_broadcast(&g->cv);
    if (g->on_change) g->on_change(g->on_change_arg);
    pthread_mutex_unlock(&g->mu);
}

void job_retain(struct job *j) { atomic_fetch_add(&j->refs, 1); }

void job_release(struct job *j)
{
    if (!j || atomic_fetch_sub(&j->refs, 1) != 1) return;
    for (int i = 0; i < j->n_choices; i++) {
        struct job *c = j->choice[i];
        pthread_mutex_lock(&c->mu);     /* after this no change of c reaches j */
        c->group = NULL;
        pthread_mutex_unlock(&c->mu);
        job_release(c);
    }
    free(j->choice);
    for (int i = 0; i < j->n_ev; i++) free(j->ev[i].text);
    for (int i = 0; i < j->p.n_stop; i++) free(j->p.stop[i]);
    free(j->p.logit_bias);
    free(j->p.tools_json);
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
    changed(j, 0);
    pthread_mutex_unlock(&j->mu);
    return 0;
}

void job_finish(struct job *j, enum job_finish fin, int n_cached, int n_gen)
{
    pthread_mutex_lock(&j->mu);
    int ended = j->finish == JOB_RUNNING;
    if (ended) {
        j->finish = fin;
        j->n_cached = n_cached;
        j->n_gen = n_gen;
        j->t_end = base_now_sec();
    }
    changed(j, ended);
    pthread_mutex_unlock(&j->mu);
}

void job_fail(struct job *j, int http_status, const char *msg)
{
    pthread_mutex_lock(&j->mu);
    int ended = j->finish == JOB_RUNNING;
    if (ended) {
        j->finish = JOB_FIN_ERROR;
        j->err_status = http_status;
        snprintf(j->err_msg, sizeof j->err_msg, "%s", msg);
        j->t_end = base_now_sec();
    }
    changed(j, ended);
    pthread_mutex_unlock(&j->mu);
}

int serve_job_add_choice(struct job *g)
{
    struct job **nc = realloc(g->choice, (size_t)(g->n_choices + 1) * sizeof *nc);
    if (!nc) return COLIBRI_ENOMEM;
    g->choice = nc;
    struct job *c = job_new(g->kind);
    if (!c) return COLIBRI_ENOMEM;
    c->p = g->p;
    memset(c->p.stop, 0, sizeof c->p.stop);
    c->p.n_stop = 0;
    c->p.logit_bias = NULL;
    c->p.grammar = NULL;
    c->p.tools_json = NULL;
    memcpy(c->id, g->id, sizeof c->id);
    c->created = g->created;
    c->t_submit = g->t_submit;
    c->index = g->n_choices;
    c->p.seed = g->p.seed + (uint64_t)c->index;
    c->n_prompt = g->n_prompt;
    c->prompt = malloc((size_t)(g->n_prompt ? g->n_prompt : 1) * sizeof *c->prompt);
    if (c->prompt) memcpy(c->prompt, g->prompt, (size_t)g->n_prompt * sizeof *c->prompt);
    int ok = c->prompt != NULL;
    for (int i = 0; ok && i < g->p.n_stop; i++) ok = (c->p.stop[c->p.n_stop++] = strdup(g->p.stop[i])) != NULL;
    if (ok && g->p.tools_json) ok = (c->p.tools_json = strdup(g->p.tools_json)) != NULL;
    if (ok && g->p.n_logit_bias) {
        size_t bytes = (size_t)g->p.n_logit_bias * sizeof *c->p.logit_bias;
        ok = (c->p.logit_bias = malloc(bytes)) != NULL;
        if (ok) memcpy(c->p.logit_bias, g->p.logit_bias, bytes);
    }
    if (!ok) {
        job_release(c);             /* frees what was copied (a NULL stop string included) */
        return COLIBRI_ENOMEM;
    }
    c->p.grammar = colibri_grammar_share(g->p.grammar);
    c->group = g;
    g->choice[g->n_choices++] = c;
    return 0;
}

void serve_job_cancel(struct job *j)
{
    atomic_store(&j->cancelled, 1);
    for (int i = 0; i < j->n_choices; i++) atomic_store(&j->choice[i]->cancelled, 1);
}

int serve_job_progress(const struct job *j) { return j->n_ev + j->n_changes; }

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
