/* model/expert_store_stream.c - the streamed expert store: routed experts
 * read from the checkpoint on demand into a cache of slots under a byte
 * budget.
 *
 * Each expert is three matrices (gate, up, down), each a data extent and
 * optionally a scales extent in one of the checkpoint's files. At start the
 * six extents are merged into as few ranges as the file layout allows
 * (extents of one file less than RANGE_GAP apart are one range; each range
 * widened to EXPERT_IO_ALIGN boundaries so it can be read with O_DIRECT). A
 * read puts the ranges at aligned places in one slot and wraps the matrices
 * as qtensors of the same format and shape as the resident store would hold,
 * at the same address alignment modulo a page as in the mapping, with the
 * same SwiGLU clip, so a streamed expert computes exactly what a resident
 * one does. A matrix the
 * loader rebuilt from another encoding has its stored arrays read instead,
 * and is rebuilt after them in the same slot by the reader thread that
 * completed the read (model/expert_store_stream.h).
 *
 * Reads run on expert_io's reader threads, many at once. A slot is EMPTY,
 * LOADING (a read in flight; the expert is already findable) or READY. An
 * acquire waits only for the expert it asks for: a hit returns at once, an
 * expert being read by a prefetch is promoted to the urgent queue and
 * waited for, a miss starts an urgent read and waits for it.
 *
 * Prefetch: prefetch() names experts a forward will acquire (routing known):
 * their reads start at once, urgent. predict() names experts it may acquire
 * (the next layer's router on this layer's hidden state): reads queued after
 * every urgent one. Neither evicts a slot held, being read, hinted in the
 * same call, or read by a prefetch and not yet acquired.
 *
 * Eviction: the least recently used slot that no forward holds (global over
 * all layers; a prefetch counts as a use), skipping pinned slots while any
 * other is evictable. Pinned: the hot set, experts named by
 * model_expert_stream_pin (learned from routing counts by the caller).
 *
 * Files are checked against the size and mtime they had at start before every
 * read: a checkpoint changed on disk is an error naming the file, never a
 * silent misread. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/err.h"
#include "io/safetensors.h"
#include "model/expert_hotset.h"
#include "model/expert_io.h"
#include "model/expert_store_stream.h"
#include "quant/format.h"

/* Extents closer than this in a file are read as one range (the gap is read
 * and dropped): fewer, larger reads. */
#define RANGE_GAP (256u << 10)
/* Reader threads: the queue depth the disk sees. */
#define STREAM_READERS 8

enum slot_state { SLOT_EMPTY, SLOT_LOADING, SLOT_READY, SLOT_FAILED };

struct stream_extent {
    int file;
    uint64_t off;
    size_t bytes;
};

struct stream_range {
    int file;
    uint64_t off;                       /* EXPERT_IO_ALIGN multiple */
    size_t bytes;                       /* EXPERT_IO_ALIGN multiple */
    size_t at;                          /* offset in the slot */
};

struct stream_expert {
    struct qtensor shape[3];            /* fmt, rows, cols (no data) */
    float clip;                         /* the resident expert's SwiGLU clip (mlp_weights.clip) */
    struct stream_extent data[3], scales[3];    /* what is read: stored arrays */
    size_t data_at[3], scales_at[3];    /* offsets in the slot */
    struct expert_stream_rebuild rb[3]; /* fn NULL: the matrix is used as read */
    size_t out_at[3], out_scales_at[3]; /* rebuilt matrices' offsets in the slot */
    struct stream_range range[6];
    int n_ranges;
    size_t bytes;                       /* slot bytes it needs */
};

struct stream_store;

struct stream_slot {
    struct stream_store *s;
    int idx;                            /* layer-major expert index, or -1 */
    int refs;
    enum slot_state state;
    int prefetched;                     /* read by a hint, not yet acquired; eviction spares it */
    int fresh;                          /* read and not yet acquired (a read wasted if evicted so) */
    enum expert_read_why why;           /* what asked for the slot's read */
    int pinned;
    uint64_t tick, hint;
    uint8_t *buf;                       /* slot_bytes, allocated on first use */
    struct mlp_weights w;
    struct expert_io_req req;
};

struct stream_store {
    struct expert_store base;           /* first: the store is cast to it */
    struct expert_io *io;
    struct stream_expert *ex;           /* [(n_layers - first) * E] */
    int *where;                         /* slot holding each expert, or -1 */
    uint32_t *uses;                     /* acquisitions of each expert (saturating) */
    unsigned char *pin;                 /* each expert: in the hot set */
    struct stream_slot *slots;
    struct expert_layer_counts *counts; /* [n_layers]: base.layer_counts */
    int n_slots;
    size_t slot_bytes;
    uint64_t tick, hint_gen;
    pthread_mutex_t mu;
    pthread_cond_t ready;
};

static int n_index(const struct expert_store *s) { return (s->n_layers - s->first_moe_layer) * s->n_experts; }

static uint64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* Reader thread: the expert's ranges are in the slot (or the read failed). */
static void slot_done(struct expert_io_req *q, void *user)
{
    struct stream_slot *sl = user;
    struct stream_store *s = sl->s;
    const struct stream_expert *x = &s->ex[sl->idx];
    int rc = q->rc;
    struct colibri_err err = { 0 };
    struct qtensor *w[3] = { &sl->w.gate, &sl->w.up, &sl->w.down };
    for (int i = 0; i < 3 && !rc; i++) {
        const struct qtensor *sh = &x->shape[i];
        if (x->rb[i].fn) {
            const void *src[2] = { sl->buf + x->data_at[i], x->scales[i].bytes ? sl->buf + x->scales_at[i] : NULL };
            x->rb[i].fn(src, x->rb[i].arg, sh->rows, sh->cols, sl->buf + x->out_at[i], sl->buf + x->out_scales_at[i]);
            size_t sb = quant_fmt_scale_bytes(sh->fmt, sh->rows, sh->cols);
            rc = quant_qtensor_wrap_raw(sh->fmt, sh->rows, sh->cols, sl->buf + x->out_at[i],
                                        quant_fmt_data_bytes(sh->fmt, sh->rows, sh->cols),
                                        sb ? sl->buf + x->out_scales_at[i] : NULL, sb, w[i], &err);
        } else {
            rc = quant_qtensor_wrap_raw(sh->fmt, sh->rows, sh->cols, sl->buf + x->data_at[i], x->data[i].bytes,
                                        x->scales[i].bytes ? sl->buf + x->scales_at[i] : NULL, x->scales[i].bytes,
                                        w[i], &err);
        }
        if (rc) snprintf(q->msg, sizeof q->msg, "%s", err.msg);
    }
    sl->w.clip = x->clip;
    pthread_mutex_lock(&s->mu);
    if (!rc) {
        sl->state = SLOT_READY;
    } else if (sl->refs) {
        sl->state = SLOT_FAILED;        /* the waiters take the message; the last one empties the slot */
        q->rc = rc;
    } else {
        s->where[sl->idx] = -1;
        sl->idx = -1;
        sl->state = SLOT_EMPTY;
        sl->prefetched = 0;
    }
    pthread_cond_broadcast(&s->ready);
    pthread_mutex_unlock(&s->mu);
}

/* Starts reading expert idx into slot sl (held lock; sl evictable); urgent
 * unless a prediction asked. */
static int start_read(struct stream_store *s, struct stream_slot *sl, int idx, enum expert_read_why why,
                      struct colibri_err *err)
{
    if (!sl->buf && !(sl->buf = aligned_alloc(EXPERT_IO_ALIGN, s->slot_bytes)))
        return base_err_set(err, COLIBRI_ENOMEM, "expert cache: %zu bytes for a slot", s->slot_bytes);
    if (sl->idx >= 0) s->where[sl->idx] = -1;
    const struct stream_expert *x = &s->ex[idx];
    sl->idx = idx;
    sl->state = SLOT_LOADING;
    sl->prefetched = 0;
    sl->fresh = 1;
    sl->why = why;
    sl->pinned = s->pin[idx];
    sl->tick = ++s->tick;
    s->where[idx] = (int)(sl - s->slots);
    struct expert_io_req *q = &sl->req;
    q->n_ranges = x->n_ranges;
    uint64_t bytes = 0;
    for (int i = 0; i < x->n_ranges; i++) {
        q->r[i] = (struct expert_io_range){ x->range[i].file, x->range[i].off, x->range[i].bytes,
                                            sl->buf + x->range[i].at, 1 };
        bytes += x->range[i].bytes;
    }
    q->done = slot_done;
    q->user = sl;
    struct expert_layer_counts *lc = &s->counts[s->base.first_moe_layer + idx / s->base.n_experts];
    atomic_fetch_add_explicit(&lc->reads[why], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&lc->bytes[why], bytes, memory_order_relaxed);
    atomic_fetch_add_explicit(&s->base.reads, 1, memory_order_relaxed);
    model_expert_io_submit(s->io, q, why != EXPERT_READ_PREDICTED);
    return 0;
}

/* The slot to read a new expert into: a free one, else the least recently
 * used evictable one (not held, not being read), pinned ones last. Level 0
 * (a hint) also spares slots hinted in this call and unused prefetches;
 * level 1 (an acquire) spares the hinted ones and takes unused prefetches
 * last; level 2 spares nothing else. -1 when none. */
static int pick_victim(struct stream_store *s, int level)
{
    int best = -1, best_rank = 0;
    for (int i = 0; i < s->n_slots; i++) {
        const struct stream_slot *c = &s->slots[i];
        if (c->refs || c->state == SLOT_LOADING || c->state == SLOT_FAILED) continue;
        if (c->state == SLOT_EMPTY) return i;
        if (level < 2 && c->hint == s->hint_gen) continue;
        if (level < 1 && c->prefetched) continue;
        int rank = c->pinned * 2 + c->prefetched;
        if (best < 0 || rank < best_rank || (rank == best_rank && c->tick < s->slots[best].tick)) {
            best = i;
            best_rank = rank;
        }
    }
    return best;
}

static int stream_acquire(struct expert_store *b, int layer, int expert, const struct mlp_weights **out,
                          struct colibri_err *err)
{
    struct stream_store *s = (struct stream_store *)b;
    int rc = expert_store_check(b, layer, expert, err);
    if (rc) return rc;
    int idx = (layer - b->first_moe_layer) * b->n_experts + expert;
    atomic_fetch_add_explicit(&b->acquires, 1, memory_order_relaxed);
    pthread_mutex_lock(&s->mu);
    int at, missed = 0;
    while ((at = s->where[idx]) < 0) {
        int v = pick_victim(s, 1);
        if (v < 0) v = pick_victim(s, 2);
        if (v >= 0) {
            atomic_fetch_add_explicit(&b->misses, 1, memory_order_relaxed);
            missed = 1;
            if ((rc = start_read(s, &s->slots[v], idx, EXPERT_READ_MISS, err))) {
                pthread_mutex_unlock(&s->mu);
                return rc;
            }
            continue;
        }
        int loading = 0;
        for (int i = 0; i < s->n_slots; i++) loading |= s->slots[i].state == SLOT_LOADING && !s->slots[i].refs;
        if (!loading) {
            pthread_mutex_unlock(&s->mu);
            return base_err_set(err, COLIBRI_ENOMEM, "expert cache: all %d slots are in use (layer %d expert %d)",
                                s->n_slots, layer, expert);
        }
        pthread_cond_wait(&s->ready, &s->mu);   /* a prefetch finishes: its slot becomes evictable */
    }
    struct stream_slot *sl = &s->slots[at];
    sl->refs++;
    if (s->uses[idx] < UINT32_MAX) s->uses[idx]++;
    if (sl->fresh) {
        if (sl->why != EXPERT_READ_MISS) atomic_fetch_add_explicit(&b->prefetch_used, 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&s->counts[layer].used[sl->why], 1, memory_order_relaxed);
    }
    sl->prefetched = 0;
    sl->fresh = 0;
    if (sl->state == SLOT_LOADING) {
        if (!missed) atomic_fetch_add_explicit(&b->waits, 1, memory_order_relaxed);
        model_expert_io_promote(s->io, &sl->req);
        uint64_t t0 = now_ns();
        while (sl->state == SLOT_LOADING) pthread_cond_wait(&s->ready, &s->mu);
        atomic_fetch_add_explicit(&b->io_wait_ns, now_ns() - t0, memory_order_relaxed);
    }
    if (sl->state == SLOT_FAILED) {
        rc = base_err_set(err, sl->req.rc ? sl->req.rc : COLIBRI_EIO, "layer %d expert %d: %s", layer, expert,
                          sl->req.msg);
        if (--sl->refs == 0) {
            s->where[sl->idx] = -1;
            sl->idx = -1;
            sl->state = SLOT_EMPTY;
        }
        pthread_mutex_unlock(&s->mu);
        return rc;
    }
    sl->tick = ++s->tick;
    *out = &sl->w;
    pthread_mutex_unlock(&s->mu);
    return 0;
}

static void stream_release(struct expert_store *b, int layer, int expert)
{
    struct stream_store *s = (struct stream_store *)b;
    int idx = (layer - b->first_moe_layer) * b->n_experts + expert;
    pthread_mutex_lock(&s->mu);
    int at = s->where[idx];
    if (at >= 0 && s->slots[at].refs > 0) s->slots[at].refs--;
    pthread_mutex_unlock(&s->mu);
}

/* Starts reads for the named experts not cached, as long as slots can be
 * taken without evicting what this call names or what a prefetch read and
 * nobody used yet. */
static void hint(struct stream_store *s, int layer, const int *experts, int n, int urgent)
{
    const struct expert_store *b = &s->base;
    if (layer < b->first_moe_layer || layer >= b->n_layers) return;
    pthread_mutex_lock(&s->mu);
    s->hint_gen++;
    for (int i = 0; i < n; i++) {
        if (experts[i] < 0 || experts[i] >= b->n_experts) continue;
        int at = s->where[(layer - b->first_moe_layer) * b->n_experts + experts[i]];
        if (at >= 0) {
            s->slots[at].hint = s->hint_gen;
            s->slots[at].tick = ++s->tick;
        }
    }
    if (urgent) {
        /* the layer's routing is known: its predicted experts not named now
         * were mispredicted, and evictable as any other */
        int lo = (layer - b->first_moe_layer) * b->n_experts, hi = lo + b->n_experts;
        for (int i = 0; i < s->n_slots; i++) {
            struct stream_slot *c = &s->slots[i];
            if (c->prefetched && c->idx >= lo && c->idx < hi && c->hint != s->hint_gen) c->prefetched = 0;
        }
    }
    for (int i = 0; i < n; i++) {
        if (experts[i] < 0 || experts[i] >= b->n_experts) continue;
        int idx = (layer - b->first_moe_layer) * b->n_experts + experts[i];
        if (s->where[idx] >= 0) continue;
        int v = pick_victim(s, 0);
        if (v < 0) break;
        struct colibri_err err = { 0 };
        if (start_read(s, &s->slots[v], idx, urgent ? EXPERT_READ_ROUTED : EXPERT_READ_PREDICTED, &err)) break;   /* no memory for a slot: acquire reports it */
        s->slots[v].prefetched = 1;
        s->slots[v].hint = s->hint_gen;
        atomic_fetch_add_explicit(&s->base.prefetch_reads, 1, memory_order_relaxed);
    }
    pthread_mutex_unlock(&s->mu);
}

static void stream_prefetch(struct expert_store *b, int layer, const int *experts, int n)
{
    atomic_fetch_add_explicit(&b->prefetch_hints, (uint64_t)n, memory_order_relaxed);
    hint((struct stream_store *)b, layer, experts, n, 1);
}

static void stream_predict(struct expert_store *b, int layer, const int *experts, int n)
{
    hint((struct stream_store *)b, layer, experts, n, 0);
}

static int64_t stream_expert_bytes(const struct expert_store *b, int layer, int expert)
{
    const struct stream_store *s = (const struct stream_store *)b;
    const struct stream_expert *x = &s->ex[(layer - b->first_moe_layer) * b->n_experts + expert];
    int64_t n = 0;
    for (int i = 0; i < 3; i++) n += (int64_t)(x->data[i].bytes + x->scales[i].bytes);
    return n;
}

static int64_t stream_resident_bytes(const struct expert_store *b)
{
    const struct stream_store *s = (const struct stream_store *)b;
    return (int64_t)s->n_slots * (int64_t)s->slot_bytes;
}

static void stream_free(struct expert_store *b)
{
    struct stream_store *s = (struct stream_store *)b;
    model_expert_io_free(s->io);   /* first: no reader touches a slot after this */
    for (int i = 0; s->slots && i < s->n_slots; i++) free(s->slots[i].buf);
    free(s->ex);
    free(s->where);
    free(s->uses);
    free(s->pin);
    free(s->counts);
    free(s->slots);
    pthread_cond_destroy(&s->ready);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

static int stream_cache_slots(const struct expert_store *b) { return ((const struct stream_store *)b)->n_slots; }

static int stream_direct(const struct expert_store *b)
{
    return model_expert_io_direct(((const struct stream_store *)b)->io, 0);
}

static int stream_uses(struct expert_store *b, uint32_t *out)
{
    struct stream_store *s = (struct stream_store *)b;
    int n = n_index(b);
    pthread_mutex_lock(&s->mu);
    memcpy(out, s->uses, (size_t)n * sizeof *out);
    pthread_mutex_unlock(&s->mu);
    return n;
}

static int stream_pin(struct expert_store *b, const uint32_t *counts)
{
    struct stream_store *s = (struct stream_store *)b;
    pthread_mutex_lock(&s->mu);
    int got = model_hotset_choose(counts, b->n_layers - b->first_moe_layer, b->n_experts,
                                  (int)(s->n_slots * HOTSET_MAX_SHARE), HOTSET_MIN_RATIO, s->pin);
    for (int i = 0; i < s->n_slots; i++)
        if (s->slots[i].idx >= 0) s->slots[i].pinned = s->pin[s->slots[i].idx];
    pthread_mutex_unlock(&s->mu);
    return got;
}

static int stream_ranges(const struct expert_store *b, int layer, int expert)
{
    if (layer < b->first_moe_layer || layer >= b->n_layers || expert < 0 || expert >= b->n_experts) return 0;
    const struct stream_store *s = (const struct stream_store *)b;
    return s->ex[(layer - b->first_moe_layer) * b->n_experts + expert].n_ranges;
}

static const struct expert_store_ops STREAM_OPS = {
    .name = "streamed",
    .start = model_expert_local_start,
    .finish = model_expert_local_finish,
    .predict = stream_predict,
    .free = stream_free,
    .acquire = stream_acquire,
    .release = stream_release,
    .prefetch = stream_prefetch,
    .expert_bytes = stream_expert_bytes,
    .resident_bytes = stream_resident_bytes,
    .cache_slots = stream_cache_slots,
    .uses = stream_uses,
    .pin = stream_pin,
    .ranges = stream_ranges,
    .direct = stream_direct,
};


/* Where a borrowed array lies in the checkpoint's files. */
static int locate(const struct st_set *st, const void *p, size_t bytes, struct stream_extent *e,
                  struct colibri_err *err)
{
    const uint8_t *q = p;
    for (int f = 0; f < st->n_files; f++) {
        const uint8_t *base = st->files[f].map;
        if (q >= base && q + bytes <= base + st->files[f].map_size) {
            *e = (struct stream_extent){ f, (uint64_t)(q - base), bytes };
            return 0;
        }
    }
    return base_err_set(err, COLIBRI_EUNSUPPORTED, "expert store: an expert's weights are not in the checkpoint's files");
}

static uint64_t align_down(uint64_t v) { return v & ~(uint64_t)(EXPERT_IO_ALIGN - 1); }
static uint64_t align_up(uint64_t v) { return align_down(v + EXPERT_IO_ALIGN - 1); }

/* Merges the expert's extents into aligned ranges and places them and the
 * matrices in a slot. */
static void plan_ranges(struct stream_expert *x)
{
    const struct stream_extent *e[6];
    size_t *at[6];
    int n = 0;
    for (int i = 0; i < 3; i++) {
        e[n] = &x->data[i];
        at[n++] = &x->data_at[i];
        if (x->scales[i].bytes) {
            e[n] = &x->scales[i];
            at[n++] = &x->scales_at[i];
        }
    }
    for (int i = 1; i < n; i++)   /* by file, then offset */
        for (int j = i; j > 0 && (e[j]->file < e[j - 1]->file ||
                                  (e[j]->file == e[j - 1]->file && e[j]->off < e[j - 1]->off)); j--) {
            const struct stream_extent *te = e[j];
            size_t *ta = at[j];
            e[j] = e[j - 1];
            at[j] = at[j - 1];
            e[j - 1] = te;
            at[j - 1] = ta;
        }
    x->n_ranges = 0;
    size_t slot = 0;
    for (int i = 0; i < n; i++) {
        uint64_t lo = align_down(e[i]->off), hi = align_up(e[i]->off + e[i]->bytes);
        struct stream_range *r = x->n_ranges ? &x->range[x->n_ranges - 1] : NULL;
        if (r && r->file == e[i]->file && lo <= r->off + r->bytes + RANGE_GAP && lo >= r->off) {
            if (hi > r->off + r->bytes) {
                slot += hi - (r->off + r->bytes);
                r->bytes = hi - r->off;
            }
        } else {
            r = &x->range[x->n_ranges++];
            *r = (struct stream_range){ e[i]->file, lo, hi - lo, slot };
            slot += hi - lo;
        }
        *at[i] = r->at + (e[i]->off - r->off);
    }
    for (int i = 0; i < 3; i++) {     /* rebuilt matrices after what is read, 64-byte aligned */
        if (!x->rb[i].fn) continue;
        const struct qtensor *sh = &x->shape[i];
        x->out_at[i] = (slot + 63) & ~(size_t)63;
        slot = x->out_at[i] + quant_fmt_data_bytes(sh->fmt, sh->rows, sh->cols);
        x->out_scales_at[i] = (slot + 63) & ~(size_t)63;
        slot = x->out_scales_at[i] + quant_fmt_scale_bytes(sh->fmt, sh->rows, sh->cols);
    }
    x->bytes = align_up(slot);          /* aligned_alloc's size */
}

int expert_store_stream_new(const struct st_set *st, const struct expert_store *resident, int64_t budget, int min_slots,
                            const struct expert_stream_sources *src, struct expert_store **out,
                            struct colibri_err *err)
{
    struct stream_store *s = calloc(1, sizeof *s);
    if (!s) return base_err_set(err, COLIBRI_ENOMEM, "expert store: out of memory");
    s->base = (struct expert_store){ .ops = &STREAM_OPS, .n_layers = resident->n_layers,
                                     .first_moe_layer = resident->first_moe_layer, .n_experts = resident->n_experts };
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->ready, NULL);
    int n = n_index(&s->base), rc = 0;
    s->ex = calloc((size_t)(n ? n : 1), sizeof *s->ex);
    s->where = malloc((size_t)(n ? n : 1) * sizeof *s->where);
    s->uses = calloc((size_t)(n ? n : 1), sizeof *s->uses);
    s->pin = calloc((size_t)(n ? n : 1), 1);
    s->counts = calloc((size_t)s->base.n_layers + 1, sizeof *s->counts);
    s->base.layer_counts = s->counts;
    if (!s->ex || !s->where || !s->uses || !s->pin || !s->counts) {
        rc = base_err_set(err, COLIBRI_ENOMEM, "expert store: out of memory for %d experts", n);
        goto fail;
    }
    for (int i = 0; i < n && !rc; i++) {
        int layer = s->base.first_moe_layer + i / s->base.n_experts, e = i % s->base.n_experts;
        const struct mlp_weights *w =
            expert_store_resident_slot((struct expert_store *)resident, layer, e);
        const struct qtensor *m[3] = { &w->gate, &w->up, &w->down };
        struct stream_expert *x = &s->ex[i];
        s->where[i] = -1;
        if (!w->gate.rows) continue;    /* a dense layer after the first MoE layer: no experts, never acquired */
        x->clip = w->clip;
        for (int j = 0; j < 3 && !rc; j++) {
            x->shape[j] = (struct qtensor){ .fmt = m[j]->fmt, .rows = m[j]->rows, .cols = m[j]->cols };
            if (m[j]->owned) {
                int got = src && src->rebuild ? src->rebuild(src->ctx, layer, e, j, &x->rb[j], err) : 0;
                if (got < 0) {
                    rc = got;
                    break;
                }
                if (!got) {
                    rc = base_err_set(err, COLIBRI_EUNSUPPORTED,
                                 "streaming experts needs them kept as stored (no --experts conversion at load, no "
                                 "fused gate_up_proj layout); write such a checkpoint with colibri convert, or keep "
                                 "the experts resident");
                    break;
                }
                rc = locate(st, x->rb[j].src[0], x->rb[j].src_bytes[0], &x->data[j], err);
                if (!rc && x->rb[j].src_bytes[1])
                    rc = locate(st, x->rb[j].src[1], x->rb[j].src_bytes[1], &x->scales[j], err);
                continue;
            }
            size_t db = quant_fmt_data_bytes(m[j]->fmt, m[j]->rows, m[j]->cols);
            size_t sb = quant_fmt_scale_bytes(m[j]->fmt, m[j]->rows, m[j]->cols);
            rc = locate(st, m[j]->data, db, &x->data[j], err);
            if (!rc && sb) rc = locate(st, m[j]->scales, sb, &x->scales[j], err);
        }
        if (rc) break;
        plan_ranges(x);
        if (x->bytes > s->slot_bytes) s->slot_bytes = x->bytes;
    }
    if (rc) goto fail;
    s->n_slots = s->slot_bytes ? (int)(budget / (int64_t)s->slot_bytes) : 0;
    if (s->n_slots < min_slots) {
        rc = base_err_set(err, COLIBRI_EINVAL,
                     "the RAM budget leaves %.1f MiB for routed experts; at least %d experts of %.2f MiB (%.1f MiB) "
                     "must fit", budget / 1048576.0, min_slots, s->slot_bytes / 1048576.0,
                     (double)min_slots * s->slot_bytes / 1048576.0);
        goto fail;
    }
    if (s->n_slots > n) s->n_slots = n;
    if (!(s->slots = calloc((size_t)s->n_slots, sizeof *s->slots))) {
        rc = base_err_set(err, COLIBRI_ENOMEM, "expert store: out of memory for %d slots", s->n_slots);
        goto fail;
    }
    for (int i = 0; i < s->n_slots; i++) {
        s->slots[i].s = s;
        s->slots[i].idx = -1;
    }
    const char **paths = malloc((size_t)(st->n_files > 0 ? st->n_files : 1) * sizeof *paths);
    if (!paths) {
        rc = base_err_set(err, COLIBRI_ENOMEM, "expert store: out of memory");
        goto fail;
    }
    for (int f = 0; f < st->n_files; f++) paths[f] = st->files[f].path;
    rc = model_expert_io_new(st->io, paths, st->n_files, STREAM_READERS, &s->base.bytes_read, &s->io, err);
    free(paths);
    if (rc) goto fail;
    *out = &s->base;
    return 0;
fail:
    stream_free(&s->base);
    return rc;
}

/* ---- the calls of model/expert_store_stream.h, on any store ---- */

int expert_store_stream_slots(const struct expert_store *store)
{
    const struct expert_store *s = expert_store_local(store);
    return s->ops->cache_slots ? s->ops->cache_slots(s) : 0;
}

int model_expert_stream_direct(const struct expert_store *store)
{
    const struct expert_store *s = expert_store_local(store);
    return s->ops->direct ? s->ops->direct(s) : 0;
}

int model_expert_stream_uses(struct expert_store *store, uint32_t *out)
{
    struct expert_store *s = expert_store_local(store);
    return s->ops->uses ? s->ops->uses(s, out) : 0;
}

int model_expert_stream_pin(struct expert_store *store, const uint32_t *counts)
{
    struct expert_store *s = expert_store_local(store);
    return s->ops->pin ? s->ops->pin(s, counts) : 0;
}

int model_expert_stream_ranges(const struct expert_store *store, int layer, int expert)
{
    const struct expert_store *s = expert_store_local(store);
    return s->ops->ranges ? s->ops->ranges(s, layer, expert) : 0;
}
