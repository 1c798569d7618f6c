/* serve/sched.c - slots, prefix reuse, the queue and the scheduler thread;
 * see sched.h. Each slot's generation runs in the library's generator
 * (colibri_gen_*); this file batches the generators' decode steps into one
 * colibri_batch_decode and turns their steps into job events.
 *
 * Invariants (scheduler thread):
 *  (1) A busy slot's generator is in phase PREFILL (prompt chunks left),
 *      SAMPLE (its logits hold the distribution of the next token) or FEED
 *      (a token was sampled and emitted and waits for the iteration's
 *      batched decode). A free slot's generator is in any phase; the next
 *      job starts it anew.
 *  (2) A job is in at most one place: the queue or one slot. The scheduler's
 *      reference is dropped exactly when it leaves that place. */
#include "serve/sched.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/err.h"
#include "base/util.h"
#include "serve/offload.h"

/* Threads sampling the slots whose jobs have a grammar: a mask can cost more
 * than a decode step, so those slots sample beside the step, not in it. */
#define SCHED_SAMPLE_THREADS 2
#define SCHED_SAMPLE_NICE 10    /* and yield the CPU to the batched step */

struct slot {
    colibri_session *sess;
    colibri_kv_file *kvf;       /* NULL without --kv-dir (or after a failed save) */
    colibri_gen *gen;           /* bound to sess */
    colibri_sampler *smp;       /* the running job's */
    struct job *job;            /* NULL when free; written under sched.mu */
    uint64_t last_used;
    double t_last_token;        /* when the running job's latest token was emitted */
    int pos_seen;               /* the session's cached tokens after the last iteration; under sched.mu */
    int waiting;                /* holds a later choice that waits for a sibling's prefill (not started) */
    struct colibri_gen_stats counted;   /* the running job's draft counts already in the metrics */
    /* Sampling on the offload pool (the job has a grammar): while in_flight
     * only the pool's worker touches gen, its session and sampler; the
     * scheduler takes the step once ready is set (release/acquire). */
    struct sched *owner;
    int in_flight;
    atomic_int ready;
    int step_rc;
    struct colibri_gen_step step;
    struct colibri_err step_err;
};

struct sched {
    colibri_model *model;
    const colibri_tokenizer *tok;
    struct sched_opts o;
    struct metrics *met;
    int n_vocab;                /* the model's */
    int64_t kv_bytes_per_token;
    struct slot *slots;
    uint64_t use_clock;

    pthread_mutex_t mu;         /* guards everything below */
    pthread_cond_t cv;
    struct job **queue;         /* FIFO ring of max_queue */
    int q_head, q_len;
    int n_busy;
    int n_grammar;              /* busy slots whose job has a grammar (at most o.grammar_slots) */
    int64_t kv_tokens;
    int closed, quit;
    pthread_t thread;
    int thread_started;
    struct offload *pool;
};

/* ------------------------------------------------------------ text output */

/* A malloc'd NUL-terminated copy of text[0..n) for a job event, its length
 * in *len. A generated U+0000 (a byte-level token for byte 0) becomes U+FFFD:
 * every response carries text through cJSON, whose strings end at the first
 * NUL, so it would silently cut off the rest of the reply (and of a stream
 * chunk, by as much as the chunk happened to hold). */
static char *event_text(const char *text, size_t n, size_t *len)
{
    size_t nul = 0;
    for (size_t i = 0; i < n; i++) nul += text[i] == 0;
    char *p = malloc(n + 2 * nul + 1), *q = p;
    if (!p) return NULL;
    for (size_t i = 0; i < n; i++) {
        if (text[i]) *q++ = text[i];
        else q = memcpy(q, "\xEF\xBF\xBD", 3), q += 3;
    }
    *q = 0;
    *len = (size_t)(q - p);
    return p;
}

/* log-softmax of the chosen token and the n_top most likely tokens. */
static void fill_logprobs(const float *logits, int V, struct job_event *ev, int n_top)
{
    float mx = logits[0];
    for (int i = 1; i < V; i++) mx = logits[i] > mx ? logits[i] : mx;
    double sum = 0;
    for (int i = 0; i < V; i++) sum += exp((double)logits[i] - mx);
    float lse = mx + (float)log(sum);
    ev->logprob = logits[ev->id] - lse;
    ev->n_top = 0;
    for (int i = 0; i < V && n_top > 0; i++) {
        float v = logits[i];
        if (ev->n_top == n_top && v <= logits[ev->top_id[n_top - 1]]) continue;
        int k = ev->n_top < n_top ? ev->n_top++ : n_top - 1;
        while (k > 0 && logits[ev->top_id[k - 1]] < v) {
            ev->top_id[k] = ev->top_id[k - 1];
            k--;
        }
        ev->top_id[k] = i;
    }
    for (int k = 0; k < ev->n_top; k++) ev->top_lp[k] = logits[ev->top_id[k]] - lse;
}

/* ------------------------------------------------------------ slot steps */

/* Adds the running generation's draft counts since the last call to the
 * metrics. */
static void count_drafts(struct sched *s, struct slot *sl)
{
    if (!s->o.n_draft) return;
    struct colibri_gen_stats st, *c = &sl->counted;
    colibri_gen_get_stats(sl->gen, &st);
    atomic_fetch_add(&s->met->mtp_forwards, (uint64_t)(st.n_forwards - c->n_forwards));
    atomic_fetch_add(&s->met->mtp_verify_forwards, (uint64_t)(st.n_forwards_drafted - c->n_forwards_drafted));
    for (int i = 0; i < COLIBRI_GEN_MAX_DRAFT; i++) {
        atomic_fetch_add(&s->met->mtp_drafted[i], (uint64_t)(st.n_drafted[i] - c->n_drafted[i]));
        atomic_fetch_add(&s->met->mtp_accepted[i], (uint64_t)(st.n_accepted[i] - c->n_accepted[i]));
    }
    *c = st;
}

static void slot_release(struct sched *s, struct slot *sl)
{
    colibri_sampler_free(sl->smp);
    sl->smp = NULL;
    if (sl->kvf) {
        struct colibri_err err = { 0 };
        if (colibri_kv_file_save(sl->kvf, &err)) {
            base_log_msg("serve", "slot %d: cannot save its KV file, going on without it: %s", (int)(sl - s->slots),
                    err.msg);
            colibri_kv_file_close(sl->kvf);
            sl->kvf = NULL;
        }
    }
    struct job *j = sl->job;
    pthread_mutex_lock(&s->mu);
    sl->job = NULL;
    s->n_busy--;
    s->n_grammar -= j->p.grammar != NULL;
    pthread_mutex_unlock(&s->mu);
    sl->last_used = ++s->use_clock;
    job_release(j);
}

static void slot_fail(struct sched *s, struct slot *sl, int status, const char *msg)
{
    job_fail(sl->job, status, msg);
    slot_release(s, sl);
}

/* Publishes the end of the slot's generation: the text it held back until
 * the end (tail, from the last step; none when cancelled) and the finish. */
static void slot_finish(struct sched *s, struct slot *sl, const char *tail, size_t tail_len)
{
    struct job *j = sl->job;
    struct colibri_gen_stats st;
    count_drafts(s, sl);
    colibri_gen_get_stats(sl->gen, &st);
    enum job_finish fin = JOB_FIN_LENGTH;
    if (st.end == COLIBRI_GEN_END_EOS || st.end == COLIBRI_GEN_END_STOP) fin = JOB_FIN_STOP;
    if (st.end == COLIBRI_GEN_END_CANCELLED) {
        fin = JOB_FIN_CANCELLED;
        atomic_fetch_add(&s->met->cancelled, 1);
    } else {
        struct job_event ev = { .id = -1 };
        if (tail_len && (ev.text = event_text(tail, tail_len, &ev.len))) job_push(j, &ev);
        atomic_fetch_add(&s->met->finished, 1);
    }
    /* observed before job_finish wakes the handler, so that a client that
     * has its reply finds the request in /metrics */
    if (fin != JOB_FIN_CANCELLED) serve_metrics_observe(s->met, METRICS_H_E2E, base_now_sec() - j->t_submit);
    job_finish(j, fin, st.n_cached, st.n_generated);
    slot_release(s, sl);
}

static int job_cancelled(void *user)
{
    struct job *j = user;
    return atomic_load(&j->cancelled);
}

/* 1 when a slot other than sl runs a choice of j's request that is still
 * prefilling its prompt. */
static int sibling_prefilling(const struct sched *s, const struct slot *sl, const struct job *j)
{
    for (int i = 0; i < s->o.n_slots; i++) {
        const struct slot *o = &s->slots[i];
        if (o != sl && o->job && !o->waiting && !o->in_flight && !strcmp(o->job->id, j->id) &&
            colibri_gen_phase(o->gen) == COLIBRI_GEN_PHASE_PREFILL)
            return 1;
    }
    return 0;
}

/* The positions of j's prompt a session can keep: its common prefix, less
 * the last prompt token (it runs again for its logits), back to where the
 * session can resume (a DeepSeek-V4 state: its latest snapshot there). */
static int reusable(const colibri_session *ss, const struct job *j)
{
    int lcp = colibri_session_common_prefix(ss, j->prompt, j->n_prompt);
    if (lcp > j->n_prompt - 1) lcp = j->n_prompt - 1;
    return colibri_session_resume_point(ss, lcp);
}

/* A later choice of a request (index > 0) shares the prompt its siblings
 * prefilled: the rows of the longest common prefix any other slot holds
 * (busy or free) are copied into sl's session when that beats what sl
 * holds. Byte-copied rows give exactly what prefilling them would, so this
 * changes the time, never the text. A copy that fails (it cannot between
 * slots of one server) is logged and the prompt prefilled as usual. */
static void share_prefix(struct sched *s, struct slot *sl, const struct job *j)
{
    int own = reusable(sl->sess, j);
    int best = own, from = -1;
    for (int i = 0; i < s->o.n_slots; i++) {
        if (&s->slots[i] == sl || s->slots[i].in_flight) continue;
        int lcp = reusable(s->slots[i].sess, j);
        if (lcp > best) best = lcp, from = i;
    }
    if (from < 0 || best <= own) return;
    struct colibri_err err = { 0 };
    if (colibri_session_copy_prefix(sl->sess, s->slots[from].sess, best, &err))
        base_log_msg("serve", "slot %d: cannot copy slot %d's prompt rows, prefilling them: %s", (int)(sl - s->slots),
                     from, err.msg);
}

static void slot_begin(struct sched *s, struct slot *sl, struct job *j);

/* Gives job j to slot sl. A later choice whose sibling still prefills the
 * same prompt waits for it (sched_main starts it), so that the prompt is
 * computed once; anything else begins now. */
static void slot_assign(struct sched *s, struct slot *sl, struct job *j)
{
    double now = base_now_sec();
    pthread_mutex_lock(&j->mu);
    j->t_start = now;
    pthread_mutex_unlock(&j->mu);
    serve_metrics_observe(s->met, METRICS_H_QUEUE, now - j->t_submit);
    sl->t_last_token = 0;
    sl->waiting = j->index > 0 && sibling_prefilling(s, sl, j);
    if (!sl->waiting) slot_begin(s, sl, j);
}

/* Starts j in sl: its sampler, then the generator's start (prefix reuse). */
static void slot_begin(struct sched *s, struct slot *sl, struct job *j)
{
    struct colibri_err err = { 0 };
    sl->waiting = 0;
    if (colibri_model_check(s->model, &err)) {   /* a changed checkpoint: refused, naming the file */
        slot_fail(s, sl, 503, err.msg);
        return;
    }
    if (j->index > 0) share_prefix(s, sl, j);
    struct colibri_sampler_opts so = job_sampler_opts(&j->p);
    /* OpenAI's penalties count the completion's tokens only: the prompt stays out of the history */
    struct colibri_gen_opts go = { .n_predict = j->p.max_tokens, .stops = (const char *const *)j->p.stop,
                                   .n_stops = (size_t)j->p.n_stop, .repair_utf8 = 1, .cancel = job_cancelled,
                                   .cancel_user = j, .n_draft = s->o.n_draft, .draft_auto = s->o.draft_auto };
    int rc = colibri_sampler_new(&so, s->n_vocab, &sl->smp, &err);
    go.sampler = sl->smp;
    if (!rc) rc = colibri_gen_start(sl->gen, j->prompt, j->n_prompt, &go, &err);
    if (rc) {
        slot_fail(s, sl, 500, err.msg);
        return;
    }
    struct colibri_gen_stats st;
    colibri_gen_get_stats(sl->gen, &st);
    sl->counted = st;
    atomic_fetch_add(&s->met->prompt_tokens, (uint64_t)j->n_prompt);
    atomic_fetch_add(&s->met->prompt_tokens_cached, (uint64_t)st.n_cached);
    pthread_mutex_lock(&j->mu);     /* known now; the log of a request that ends early shows it */
    j->n_cached = st.n_cached;
    pthread_mutex_unlock(&j->mu);
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* One prefill chunk, so that other slots keep decoding meanwhile. */
static void slot_prefill(struct sched *s, struct slot *sl)
{
    struct colibri_err err = { 0 };
    uint64_t t0 = now_ns();
    int rc = colibri_gen_prefill(sl->gen, s->o.prefill_chunk, &err);
    atomic_fetch_add(&s->met->prefill_ns, now_ns() - t0);
    if (rc < 0) slot_fail(s, sl, 500, err.msg);
    else if (colibri_gen_phase(sl->gen) == COLIBRI_GEN_PHASE_DONE) slot_finish(s, sl, NULL, 0);
}

/* Emits what one colibri_gen_sample gave (rc, st, err); the generator
 * leaves the token pending for the batched decode unless the generation ends
 * here, or, after a verify whose draft it equals, stays in phase SAMPLE for
 * the next row. Returns 1 while the slot goes on sampling. */
static int slot_emit(struct sched *s, struct slot *sl, int rc, struct colibri_gen_step st,
                     const struct colibri_err *err)
{
    struct job *j = sl->job;
    if (rc) { slot_fail(s, sl, 500, err->msg); return 0; }
    atomic_fetch_add(&s->met->generated_tokens, (uint64_t)st.n_tokens);
    double now = base_now_sec();
    if (st.n_tokens == 0) {
        /* nothing sampled: no token time */
    } else if (sl->t_last_token == 0) {
        pthread_mutex_lock(&j->mu);
        j->t_first = now;
        pthread_mutex_unlock(&j->mu);
        serve_metrics_observe(s->met, METRICS_H_TTFT, now - j->t_submit);
    } else {
        serve_metrics_observe(s->met, METRICS_H_TPOT, now - sl->t_last_token);
    }
    sl->t_last_token = now;
    /* One event per token (a step holds one); an end-of-generation token
     * has no text and no event. */
    if (st.n_tokens == 1 && st.end != COLIBRI_GEN_END_EOS) {
        struct job_event ev = { .id = st.tokens[0] };
        if (j->p.logprobs) fill_logprobs(st.logits, s->n_vocab, &ev, j->p.n_top);
        ev.text = event_text(st.text, st.len, &ev.len);
        if (!ev.text || job_push(j, &ev)) { slot_fail(s, sl, 500, "out of memory"); return 0; }
    }
    if (st.end != COLIBRI_GEN_END_NONE) {
        slot_finish(s, sl, st.tail, st.tail_len);
        return 0;
    }
    return colibri_gen_phase(sl->gen) == COLIBRI_GEN_PHASE_SAMPLE;
}

/* Samples and emits one token (see slot_emit). */
static int slot_sample_one(struct sched *s, struct slot *sl)
{
    struct colibri_err err = { 0 };
    struct colibri_gen_step st;
    int rc = colibri_gen_sample(sl->gen, &st, &err);
    return slot_emit(s, sl, rc, st, &err);
}

/* Every token the slot's logits give now: one, or with drafts the kept ones
 * and the sampler's own after them, each emitted as it is drawn. */
static void slot_sample(struct sched *s, struct slot *sl)
{
    while (slot_sample_one(s, sl)) {}
    if (sl->job) count_drafts(s, sl);
}

/* On a pool worker: the slot's sample, kept for the scheduler, which is
 * woken to emit it. */
static void offloaded_sample(void *arg)
{
    struct slot *sl = arg;
    sl->step_err = (struct colibri_err){ 0 };
    sl->step_rc = colibri_gen_sample(sl->gen, &sl->step, &sl->step_err);
    atomic_store_explicit(&sl->ready, 1, memory_order_release);
    pthread_mutex_lock(&sl->owner->mu);
    pthread_cond_signal(&sl->owner->cv);
    pthread_mutex_unlock(&sl->owner->mu);
}

/* Hands the slot's next sample to the pool; samples here if the pool's
 * queue is full (it holds one task per slot, so it is not). */
static void slot_offload(struct sched *s, struct slot *sl)
{
    atomic_store_explicit(&sl->ready, 0, memory_order_relaxed);
    sl->in_flight = 1;
    if (serve_offload_submit(s->pool, offloaded_sample, sl)) {
        sl->in_flight = 0;
        slot_sample(s, sl);
    }
}

/* 1 when a slot other than sl holds a job: only then can sl's sampling hold
 * anyone back. A slot alone samples on the scheduler thread (no handoff:
 * one client's constrained requests cost what they did); a job arriving
 * meanwhile waits for at most that one sample. */
static int others_busy(const struct sched *s, const struct slot *sl)
{
    for (int i = 0; i < s->o.n_slots; i++)
        if (&s->slots[i] != sl && s->slots[i].job) return 1;
    return 0;
}

/* The scheduler's part of an offloaded sample once ready: emit it, and hand
 * off the next one while a verify's rows remain. 1 if it was ready. */
static int slot_collect(struct sched *s, struct slot *sl)
{
    if (!atomic_load_explicit(&sl->ready, memory_order_acquire)) return 0;
    sl->in_flight = 0;
    if (slot_emit(s, sl, sl->step_rc, sl->step, &sl->step_err)) slot_offload(s, sl);
    else if (sl->job) count_drafts(s, sl);
    return 1;
}

/* Feeds every pending token (and with drafts, each slot's drafts) in one
 * batched decode step; returns how many slots it fed. A slot whose decode
 * fails is failed; the slots after it keep their pending token for the next
 * iteration. */
static int decode_pending(struct sched *s)
{
    colibri_gen *gen[64];
    struct slot *who[64];
    int n = 0;
    for (int i = 0; i < s->o.n_slots; i++) {
        struct slot *sl = &s->slots[i];
        if (!sl->job || sl->in_flight || colibri_gen_pending(sl->gen, NULL) != 1) continue;
        gen[n] = sl->gen;
        who[n++] = sl;
    }
    if (n == 0) return 0;
    struct colibri_err err = { 0 };
    int done = 0;
    uint64_t t0 = now_ns();
    int rc = colibri_gen_batch_decode(gen, n, &done, &err);
    atomic_fetch_add(&s->met->decode_ns, now_ns() - t0);
    atomic_fetch_add(&s->met->decode_calls, 1);
    if (rc && done < n) slot_fail(s, who[done], 500, err.msg);
    return n;
}

/* 1 when an offloaded sample is ready or no slot waits for one. Called
 * with mu held. */
static int offload_settled(const struct sched *s)
{
    int waiting = 0;
    for (int i = 0; i < s->o.n_slots; i++) {
        const struct slot *sl = &s->slots[i];
        if (!sl->in_flight) continue;
        if (atomic_load_explicit(&sl->ready, memory_order_acquire)) return 1;
        waiting = 1;
    }
    return !waiting;
}

/* ------------------------------------------------------------ the thread */

/* The free slot that keeps the most of j's prompt (reusable); ties go to
 * the least recently used. Called with mu held. */
static struct slot *pick_slot(struct sched *s, const struct job *j)
{
    struct slot *best = NULL;
    int best_lcp = -1;
    for (int i = 0; i < s->o.n_slots; i++) {
        struct slot *sl = &s->slots[i];
        if (sl->job) continue;
        int lcp = reusable(sl->sess, j);
        if (lcp > best_lcp || (lcp == best_lcp && sl->last_used < best->last_used)) {
            best = sl;
            best_lcp = lcp;
        }
    }
    return best;
}

/* Whether job j may take a slot now: a job with a grammar waits while
 * grammar_slots of them run, so that requests whose every token may cost a
 * mask cannot hold every slot; the jobs queued after it pass it meanwhile.
 * Called with mu held. */
static int may_start(const struct sched *s, const struct job *j)
{
    return !j->p.grammar || s->n_grammar < s->o.grammar_slots || atomic_load(&j->cancelled);
}

/* The queue's k-th job (0: the oldest). Called with mu held. */
static struct job *queue_at(const struct sched *s, int k)
{
    return s->queue[(s->q_head + k) % s->o.max_queue];
}

/* Takes the queue's k-th job out, the older ones moving up one place.
 * Called with mu held. */
static struct job *queue_take(struct sched *s, int k)
{
    struct job *j = queue_at(s, k);
    for (int i = k; i > 0; i--) s->queue[(s->q_head + i) % s->o.max_queue] = queue_at(s, i - 1);
    s->q_head = (s->q_head + 1) % s->o.max_queue;
    s->q_len--;
    return j;
}

/* 1 when a queued job may take a free slot now. Called with mu held. */
static int queue_ready(const struct sched *s)
{
    if (s->n_busy >= s->o.n_slots) return 0;
    for (int k = 0; k < s->q_len; k++)
        if (may_start(s, queue_at(s, k))) return 1;
    return 0;
}

static void *sched_main(void *arg)
{
    struct sched *s = arg;
    colibri_thread_set_compute_threads(s->o.n_threads);
    for (;;) {
        struct slot *assign_sl[64];
        struct job *assign_j[64];
        int n_assign = 0;
        pthread_mutex_lock(&s->mu);
        while (!s->quit && s->n_busy == 0 && s->q_len == 0) pthread_cond_wait(&s->cv, &s->mu);
        if (s->quit && s->n_busy == 0 && s->q_len == 0) {
            pthread_mutex_unlock(&s->mu);
            break;
        }
        for (int k = 0; k < s->q_len && s->n_busy < s->o.n_slots && n_assign < 64;) {
            if (!may_start(s, queue_at(s, k))) { k++; continue; }
            struct job *j = queue_take(s, k);
            if (atomic_load(&j->cancelled)) {
                job_finish(j, JOB_FIN_CANCELLED, 0, 0);
                atomic_fetch_add(&s->met->cancelled, 1);
                job_release(j);
                continue;
            }
            struct slot *sl = pick_slot(s, j);
            sl->job = j;        /* reserve; slot_assign completes it */
            s->n_busy++;
            s->n_grammar += j->p.grammar != NULL;
            assign_sl[n_assign] = sl;
            assign_j[n_assign++] = j;
        }
        pthread_mutex_unlock(&s->mu);

        for (int i = 0; i < n_assign; i++) slot_assign(s, assign_sl[i], assign_j[i]);
        int stepped = 0, worked = n_assign > 0;
        for (int i = 0; i < s->o.n_slots; i++) {
            struct slot *sl = &s->slots[i];
            if (!sl->job) continue;
            stepped = 1;
            if (sl->in_flight) {
                worked |= slot_collect(s, sl);
                continue;
            }
            if (sl->waiting) {
                if (job_cancelled(sl->job)) {
                    job_finish(sl->job, JOB_FIN_CANCELLED, 0, 0);
                    atomic_fetch_add(&s->met->cancelled, 1);
                    slot_release(s, sl);
                    sl->waiting = 0;
                } else if (!sibling_prefilling(s, sl, sl->job)) {
                    slot_begin(s, sl, sl->job);
                }
                worked = 1;
                continue;       /* it steps from the next iteration on */
            }
            enum colibri_gen_phase ph = colibri_gen_phase(sl->gen);
            worked |= ph == COLIBRI_GEN_PHASE_PREFILL || ph == COLIBRI_GEN_PHASE_SAMPLE;
            if (ph == COLIBRI_GEN_PHASE_PREFILL) slot_prefill(s, sl);
            else if (ph == COLIBRI_GEN_PHASE_SAMPLE && sl->job->p.grammar && others_busy(s, sl)) slot_offload(s, sl);
            else if (ph == COLIBRI_GEN_PHASE_SAMPLE) slot_sample(s, sl);
        }
        worked |= decode_pending(s) > 0;
        if (stepped && worked) atomic_fetch_add(&s->met->steps, 1);
        int pos[64];
        int64_t kv = 0;
        for (int i = 0; i < s->o.n_slots; i++) {
            const struct slot *sl = &s->slots[i];
            kv += pos[i] = sl->in_flight ? sl->pos_seen : colibri_session_pos(sl->sess);
        }
        pthread_mutex_lock(&s->mu);
        /* only offloaded samples are pending: sleep until one is ready or a job arrives */
        if (!worked)
            while (!s->quit && !queue_ready(s) && !offload_settled(s))
                pthread_cond_wait(&s->cv, &s->mu);
        s->kv_tokens = kv;
        for (int i = 0; i < s->o.n_slots; i++) s->slots[i].pos_seen = pos[i];
        pthread_mutex_unlock(&s->mu);
        if (stepped && s->o.step_delay_ms > 0) {
            struct timespec ts = { s->o.step_delay_ms / 1000, (long)(s->o.step_delay_ms % 1000) * 1000000L };
            nanosleep(&ts, NULL);
        }
    }
    return NULL;
}

/* ------------------------------------------------------------ public */

/* Opens (or creates) slot i's KV file and restores it into the slot. */
static int open_kv_file(struct sched *s, int i, struct colibri_err *err)
{
    struct slot *sl = &s->slots[i];
    if (mkdir(s->o.kv_dir, 0755) && errno != EEXIST)
        return base_err_set(err, COLIBRI_EIO, "--kv-dir %s: %s", s->o.kv_dir, strerror(errno));
    char path[4096];
    snprintf(path, sizeof path, "%s/slot-%02d.ckv", s->o.kv_dir, i);
    struct colibri_kv_info info;
    int rc = colibri_kv_file_open(sl->sess, path, &sl->kvf, &info, err);
    if (rc) return rc;
    sl->pos_seen = colibri_session_pos(sl->sess);
    s->kv_tokens += sl->pos_seen;
    if (info.restored || info.trimmed || info.upgraded)
        base_log_msg("serve", "slot %d: %s: restored %d cached tokens%s%s%s", i, path, info.restored,
                info.upgraded ? " (re-encoded to this tier)" : "", info.message[0] ? "; " : "", info.message);
    return 0;
}

int sched_new(colibri_model *m, const colibri_tokenizer *t, const struct sched_opts *o, struct metrics *met,
              struct sched **out, struct colibri_err *err)
{
    if (o->n_slots < 1 || o->n_slots > 64 || o->n_ctx < 2 || o->max_queue < 1)
        return base_err_set(err, COLIBRI_EINVAL, "scheduler: slots must be 1..64, ctx >= 2, queue >= 1 (got %d, %d, %d)",
                       o->n_slots, o->n_ctx, o->max_queue);
    struct sched *s = calloc(1, sizeof *s);
    if (!s) goto oom;
    s->model = m;
    s->tok = t;
    s->o = *o;
    if (s->o.prefill_chunk <= 0) s->o.prefill_chunk = 256;
    if (s->o.grammar_slots <= 0) s->o.grammar_slots = o->n_slots > 1 ? o->n_slots / 2 : 1;
    if (s->o.grammar_slots > o->n_slots) s->o.grammar_slots = o->n_slots;
    s->met = met;
    s->n_vocab = colibri_model_vocab(m);
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    s->queue = calloc((size_t)o->max_queue, sizeof *s->queue);
    s->slots = calloc((size_t)o->n_slots, sizeof *s->slots);
    if (!s->queue || !s->slots) goto oom_free;
    struct colibri_session_opts so = { .n_ctx = o->n_ctx, .kv_tier = o->kv_tier, .kv_rope = o->kv_rope,
                                       .kv_int8 = o->kv_int8, .kv_snapshot_every = o->kv_snapshot_every,
                                       .kv_snapshots = o->kv_snapshots };
    for (int i = 0; i < o->n_slots; i++) {
        struct slot *sl = &s->slots[i];
        int rc = colibri_session_new(m, &so, &sl->sess, err);
        if (!rc) rc = colibri_gen_new(m, sl->sess, t, &sl->gen, err);
        if (!rc && o->kv_dir) rc = open_kv_file(s, i, err);
        if (rc) { sched_free(s); return rc; }
        s->kv_bytes_per_token = colibri_session_kv_token_bytes(sl->sess);
    }
    for (int i = 0; i < o->n_slots; i++) s->slots[i].owner = s;
    int prc = serve_offload_new(SCHED_SAMPLE_THREADS, o->n_slots, SCHED_SAMPLE_NICE, &s->pool, err);
    if (prc) { sched_free(s); return prc; }
    if (pthread_create(&s->thread, NULL, sched_main, s)) {
        sched_free(s);
        return base_err_set(err, COLIBRI_ENOMEM, "scheduler: cannot start its thread");
    }
    s->thread_started = 1;
    *out = s;
    return 0;
oom_free:
    sched_free(s);
oom:
    return base_err_set(err, COLIBRI_ENOMEM, "scheduler: out of memory");
}

enum sched_submit_result sched_submit(struct sched *s, struct job *j)
{
    return serve_sched_submit_n(s, &j, 1);
}

enum sched_submit_result serve_sched_submit_n(struct sched *s, struct job *const *jobs, int n)
{
    pthread_mutex_lock(&s->mu);
    enum sched_submit_result r = SCHED_OK;
    if (s->closed) r = SCHED_CLOSED;
    else if (s->q_len + n > s->o.max_queue) r = SCHED_FULL;
    else {
        for (int i = 0; i < n; i++) {
            job_retain(jobs[i]);
            s->queue[(s->q_head + s->q_len) % s->o.max_queue] = jobs[i];
            s->q_len++;
        }
        pthread_cond_signal(&s->cv);
    }
    pthread_mutex_unlock(&s->mu);
    return r;
}

void sched_gauges(struct sched *s, struct metrics_gauges *g)
{
    pthread_mutex_lock(&s->mu);
    g->queue_depth = s->q_len;
    g->slots_busy = s->n_busy;
    g->slots_total = s->o.n_slots;
    g->kv_tokens = s->kv_tokens;
    g->kv_bytes = s->kv_tokens * s->kv_bytes_per_token;
    g->mtp_drafts = s->o.n_draft;
    pthread_mutex_unlock(&s->mu);
}

int serve_sched_slots(struct sched *s, struct sched_slot_state *out, int cap)
{
    pthread_mutex_lock(&s->mu);
    int n = s->o.n_slots < cap ? s->o.n_slots : cap;
    for (int i = 0; i < n; i++) {
        const struct slot *sl = &s->slots[i];
        struct sched_slot_state *o = &out[i];
        *o = (struct sched_slot_state){ .id = i, .n_ctx = s->o.n_ctx, .cached_tokens = sl->pos_seen };
        if (sl->job) {
            o->processing = 1;
            o->n_prompt = sl->job->n_prompt;
            pthread_mutex_lock(&sl->job->mu);
            for (int k = 0; k < sl->job->n_ev; k++) o->n_generated += sl->job->ev[k].id >= 0;
            pthread_mutex_unlock(&sl->job->mu);
        }
    }
    pthread_mutex_unlock(&s->mu);
    return n;
}

void sched_close(struct sched *s)
{
    pthread_mutex_lock(&s->mu);
    s->closed = 1;
    pthread_mutex_unlock(&s->mu);
}

int sched_busy(struct sched *s)
{
    pthread_mutex_lock(&s->mu);
    int n = s->n_busy + s->q_len;
    pthread_mutex_unlock(&s->mu);
    return n;
}

void sched_cancel_all(struct sched *s)
{
    pthread_mutex_lock(&s->mu);
    for (int i = 0; i < s->q_len; i++) atomic_store(&s->queue[(s->q_head + i) % s->o.max_queue]->cancelled, 1);
    for (int i = 0; i < s->o.n_slots; i++)
        if (s->slots[i].job) atomic_store(&s->slots[i].job->cancelled, 1);
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

void sched_free(struct sched *s)
{
    if (!s) return;
    if (s->thread_started) {
        sched_cancel_all(s);
        pthread_mutex_lock(&s->mu);
        s->closed = 1;
        s->quit = 1;
        pthread_cond_signal(&s->cv);
        pthread_mutex_unlock(&s->mu);
        pthread_join(s->thread, NULL);
    }
    serve_offload_free(s->pool);  /* idle: the thread ended with no slot busy */
    if (s->slots)
        for (int i = 0; i < s->o.n_slots; i++) {
            colibri_kv_file_close(s->slots[i].kvf);
            colibri_gen_free(s->slots[i].gen);
            colibri_sampler_free(s->slots[i].smp);
            colibri_session_free(s->slots[i].sess);
        }
    free(s->slots);
    free(s->queue);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    free(s);
}
