/* serve/job.h - one generation request, shared between the HTTP thread that
 * received it and the scheduler thread that runs it.
 *
 * The request part (kind, params, prompt) is written by oai_parse.c before the
 * job is submitted and read-only afterwards. The output part (events, done,
 * finish reason, error) is appended by the scheduler under `mu` and read by
 * the HTTP thread under `mu`; `cv` is signalled on every change, and the
 * HTTP side's `on_change` hook (if set) is called, still under `mu`, so an
 * event-driven server can wake the connection that waits. `cancelled` is set
 * by the HTTP side (client gone, shutdown) and polled by the scheduler.
 *
 * Reference counted: job_new() returns one reference (the HTTP side's); the
 * scheduler takes another when the job is submitted. The last job_release()
 * frees it.
 *
 * A request for n > 1 choices is a group: a job that is never submitted,
 * holding n choice jobs (serve_job_add_choice), each submitted and run as a job
 * of its own (its own sampler, seed, slot and events). Every change of a
 * choice also changes the group: the group's n_changes counts them (so a
 * waiter on the group wakes) and its finish is set when the last choice
 * ends. Locking: a choice's mu is taken before its group's, never after; so
 * whoever reads the choices does not hold the group's mu. The group holds a
 * reference to each choice; a choice points back at its group (no
 * reference; cleared, under the choice's mu, when the group is freed). */
#ifndef COLIBRI_SERVE_JOB_H
#define COLIBRI_SERVE_JOB_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "colibri.h"

#define JOB_MAX_STOP 4
#define JOB_MAX_TOP 20

enum job_kind { JOB_COMPLETION = 0, JOB_CHAT = 1 };

enum job_finish { JOB_RUNNING = 0, JOB_FIN_STOP, JOB_FIN_LENGTH, JOB_FIN_CANCELLED, JOB_FIN_ERROR };

struct job_params {
    int max_tokens;
    int n;                      /* choices asked for (1..slots); > 1 makes the job a group */
    float temperature, top_p, presence_penalty, frequency_penalty;
    uint64_t seed;
    int stream, include_usage;
    int logprobs;               /* completions: 0/1 (with n_top); chat: 0/1 */
    int n_top;                  /* alternatives per token, 0..JOB_MAX_TOP */
    char *stop[JOB_MAX_STOP];
    int n_stop;
    /* extensions llama-server and vLLM accept (oai_sampling.c) */
    int top_k;                  /* 0 = off */
    float min_p;                /* 0 = off */
    float repeat_penalty;       /* 1 = off */
    struct colibri_logit_bias *logit_bias;   /* malloc'd, owned by the job */
    int n_logit_bias;
    colibri_grammar *grammar;   /* structured output (oai_format.c); owned, NULL = none */
    int parse_tools;            /* chat with tools: look for tool calls in the reply */
    int tools_required;         /* tool_choice required or named: a grammar makes the reply calls */
    char *tools_json;           /* the request's tools (owned, NULL without), for typing parsed arguments */
    int think_open;             /* the chat prompt ends inside <think>: the reply starts with reasoning */
};

/* The sampler options of a job's parameters (the penalties look at the
 * whole generated text, as the OpenAI API describes them). */
struct colibri_sampler_opts job_sampler_opts(const struct job_params *p);

/* One generated token (id >= 0) or trailing text released at the end (id < 0). */
struct job_event {
    int32_t id;
    float logprob;
    int n_top;
    int32_t top_id[JOB_MAX_TOP];
    float top_lp[JOB_MAX_TOP];
    char *text;                 /* valid UTF-8, NUL-terminated, may be "" */
    size_t len;
};

struct job {
    /* request: read-only once submitted */
    enum job_kind kind;
    struct job_params p;
    int32_t *prompt;
    int n_prompt;
    char id[40];                /* "cmpl-..." or "chatcmpl-..."; one id for a group and its choices */
    long created;               /* unix seconds */
    int index;                  /* the choice's index in its request (0 outside a group) */
    int n_choices;              /* a group: its choices; 0 for a job that runs itself */
    struct job **choice;        /* a group's choices, one reference each */

    /* output: under mu */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct job_event *ev;
    int n_ev, cap_ev;
    enum job_finish finish;     /* JOB_RUNNING until done */
    int n_cached;               /* prompt tokens reused from the slot's cache (set when a slot takes the job) */
    int n_gen;                  /* tokens sampled (an end-of-generation token included) */
    int err_status;             /* HTTP status for JOB_FIN_ERROR */
    char err_msg[256];
    /* Times (base_now_sec(), monotonic seconds; 0 = not yet). t_submit is written
     * by the HTTP side before the job is submitted; the rest under mu by the
     * scheduler: t_start when a slot takes the job, t_first when its first
     * token is sampled, t_end by job_finish / job_fail. */
    double t_submit, t_start, t_first, t_end;

    struct job *group;          /* under mu: the group a choice belongs to (not a reference), or NULL */
    int n_changes;              /* a group: changes of its choices so far (wakes its waiters) */
    int n_done;                 /* a group: choices ended */

    /* under mu: called after every change of the output part; set and
     * cleared by the HTTP side, must not block or take other job locks */
    void (*on_change)(void *arg);
    void *on_change_arg;

    atomic_int cancelled;
    atomic_int refs;
};

/* A new job with one reference, or NULL when out of memory. */
struct job *job_new(enum job_kind kind);
void job_retain(struct job *j);
void job_release(struct job *j);

/* Makes g (a parsed request) a group by appending its next choice: a copy
 * of g's request (its own copies of the prompt, stop strings and logit bias;
 * the grammar shared) with index i = g->n_choices and seed g's + i, so that
 * choice 0 samples as the request with n = 1 would. Before anything is
 * submitted. 0 or COLIBRI_ENOMEM. */
int serve_job_add_choice(struct job *g);
/* Marks j cancelled, and a group's choices too. Any thread, no lock taken. */
void serve_job_cancel(struct job *j);
/* What a waiter compares to see that j changed: events of a job, changes of
 * a group's choices. Under j->mu. */
int serve_job_progress(const struct job *j);

/* Scheduler side (each takes mu and signals cv). job_push takes ownership of
 * ev->text (malloc'd). Returns 0 or COLIBRI_ENOMEM. job_finish and job_fail
 * stamp t_end. */
int  job_push(struct job *j, struct job_event *ev);
void job_finish(struct job *j, enum job_finish fin, int n_cached, int n_gen);
void job_fail(struct job *j, int http_status, const char *msg);

/* "stop", "length", ... as OpenAI names finish reasons. */
const char *job_finish_name(enum job_finish f);

#endif
