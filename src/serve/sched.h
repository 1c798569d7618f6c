/* serve/sched.h - slots, the wait queue and the scheduler thread.
 *
 * A slot is one colibri_session and the generator (colibri_gen) bound to it.
 * A submitted job waits in a FIFO; when a slot is free the scheduler gives the
 * job to the free slot whose cached tokens share the longest prefix with the
 * job's prompt, as far back as the session can resume there (a DeepSeek-V4
 * state: its latest snapshot within the prefix, colibri_session_resume_point;
 * ties: the least recently used); the generator keeps that prefix and
 * prefills only the rest, in chunks, so that other slots keep
 * decoding meanwhile. Each scheduler iteration advances every busy slot by one
 * step (a prefill chunk or one generated token): continuous batching, the
 * tokens of all decoding slots fed in one batched forward
 * (colibri_gen_batch_decode). With drafts (n_draft), each slot adds the
 * drafts of its MTP layer to that forward (1 + its drafts rows), keeps the
 * ones its sampler agrees with and emits each kept token as its own event in
 * the same iteration; the output is the one without drafts.
 *
 * Jobs with a grammar hold at most grammar_slots slots at once: one beyond
 * that stays in the queue, and the jobs queued after it that may start pass
 * it, so constrained requests (whose every token may cost a mask) never hold
 * every slot.
 *
 * The choices of one request (n > 1; jobs sharing an id, job.h) are queued
 * together and run in slots of their own. A later choice that finds a
 * sibling still prefilling the prompt waits for it, then copies the rows of
 * the prompt from whichever slot holds the most of it
 * (colibri_session_copy_prefix) and prefills only its last token, so the
 * prompt is computed once; its text is what a prefill of its own gives.
 *
 * With a KV directory, slot i opens DIR/slot-<i>.ckv at creation (restoring
 * the cache and its token ids, so a restarted server reuses prefixes; a
 * DeepSeek-V4 slot's is a version-3 state file, kv/persist_state.h) and
 * saves it each time the slot finishes a request; a slot whose save fails
 * goes on without a file (logged).
 *
 * Threads: sched_submit, sched_gauges, sched_close, sched_cancel_all and
 * sched_busy may be called from any thread. Everything about slots runs on the
 * scheduler thread only. The model and tokenizer must outlive the scheduler. */
#ifndef COLIBRI_SERVE_SCHED_H
#define COLIBRI_SERVE_SCHED_H

#include "colibri.h"
#include "serve/job.h"
#include "serve/metrics.h"

struct sched_opts {
    int n_slots;
    int n_ctx;                  /* tokens per slot */
    const char *kv_tier;        /* NULL = f32 */
    const char *kv_rope;        /* NULL = the tier's default */
    int kv_int8;                /* see colibri_session_opts */
    int kv_snapshot_every, kv_snapshots;   /* see colibri_session_opts */
    const char *kv_dir;         /* NULL, or where slot i keeps its cache in slot-<i>.ckv */
    int max_queue;              /* waiting jobs before sched_submit says full */
    int step_delay_ms;          /* sleep after each busy iteration */
    int prefill_chunk;          /* prompt tokens per slot per iteration */
    int n_threads;              /* compute threads of the scheduler thread (0 = default) */
    int n_draft;                /* speculative decoding with the MTP layer: drafts per slot per step (0: off) */
    int draft_auto;             /* with n_draft: each slot drafts only while it pays (colibri_gen_opts) */
    int grammar_slots;          /* slots jobs with a grammar may hold at once (0: half the slots, at least 1) */
};

struct sched;

/* Creates the slots' sessions and starts the scheduler thread. met (counters)
 * must outlive the scheduler. */
int  sched_new(colibri_model *m, const colibri_tokenizer *t, const struct sched_opts *o, struct metrics *met,
               struct sched **out, struct colibri_err *err);

enum sched_submit_result { SCHED_OK = 0, SCHED_FULL = 1, SCHED_CLOSED = 2 };
/* Queues j (taking a reference of its own). The job must be fully parsed. */
enum sched_submit_result sched_submit(struct sched *s, struct job *j);
/* Queues jobs[0..n) in order, all or none (a request's choices: FULL when
 * the queue lacks room for all n). */
enum sched_submit_result serve_sched_submit_n(struct sched *s, struct job *const *jobs, int n);

void sched_gauges(struct sched *s, struct metrics_gauges *g);

/* One slot as GET /slots shows it. */
struct sched_slot_state {
    int id, processing;         /* processing: a request holds the slot */
    int n_ctx;                  /* tokens the slot holds at most */
    int cached_tokens;          /* tokens in its KV cache after the last scheduler iteration */
    int n_prompt, n_generated;  /* the running request's (0 when idle) */
};
/* Fills out[0..n) for the first n = min(slots, cap) slots; returns n. */
int  serve_sched_slots(struct sched *s, struct sched_slot_state *out, int cap);
/* Refuses later submissions (SCHED_CLOSED); queued and running jobs go on. */
void sched_close(struct sched *s);
/* Number of jobs queued or running. */
int  sched_busy(struct sched *s);
/* Marks every queued and running job cancelled. */
void sched_cancel_all(struct sched *s);
/* Cancels whatever is left, joins the thread, frees the sessions. */
void sched_free(struct sched *s);

#endif
