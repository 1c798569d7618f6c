/* model/expert_store_stream.c - the streamed expert store: routed experts
 * read from the checkpoint on demand into a cache of slots under a byte
 * budget.
 *
 * Each expert is three matrices (gate, up, down), each a data extent and
 * optionally a scales extent in one of the checkpoint's files. A miss reads
 * the six extents with pread into one slot (every piece 64-byte aligned) and
 * wraps them as qtensors of the same format and shape as the resident store
 * would hold, so a streamed expert computes exactly what a resident one does.
 *
 * Eviction: least recently acquired slot that no forward holds (global LRU
 * over all layers). prefetch() asks the kernel to read the extents of the
 * named experts that are not cached (POSIX_FADV_WILLNEED, asynchronous); the
 * miss that follows then copies from the page cache.
 *
 * Files are checked against the size and mtime they had at start before every
 * read: a checkpoint changed on disk is an error naming the file, never a
 * silent misread. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/err.h"
#include "io/safetensors.h"
#include "model/expert_store.h"
#include "quant/format.h"

struct stream_extent {
    int file;
    uint64_t off;
    size_t bytes;
};

struct stream_expert {
    struct qtensor shape[3];            /* fmt, rows, cols (no data) */
    struct stream_extent data[3], scales[3];
    size_t bytes;                       /* in a slot, alignment included */
};

struct stream_slot {
    int idx;                            /* layer-major expert index, or -1 */
    int refs;
    uint64_t tick;
    uint8_t *buf;                       /* slot_bytes, allocated on first use */
    struct mlp_weights w;
};

struct stream_file {
    char *path;
    int fd;
    off_t size;
    struct timespec mtime;
};

struct stream_store {
    struct expert_store base;           /* first: the store is cast to it */
    struct stream_file *files;
    int n_files;
    struct stream_expert *ex;           /* [(n_layers - first) * E] */
    int *where;                         /* slot holding each expert, or -1 */
    struct stream_slot *slots;
    int n_slots;
    size_t slot_bytes;
    uint64_t tick;
    pthread_mutex_t mu;
};

static size_t al64(size_t n) { return (n + 63) & ~(size_t)63; }

static int n_index(const struct expert_store *s) { return (s->n_layers - s->first_moe_layer) * s->n_experts; }

static int check_file(const struct stream_file *f, struct colibri_err *err)
{
    struct stat st;
    if (fstat(f->fd, &st)) return base_err_set(err, COLIBRI_EIO, "%s: cannot stat: %s", f->path, strerror(errno));
    if (st.st_size != f->size || st.st_mtim.tv_sec != f->mtime.tv_sec || st.st_mtim.tv_nsec != f->mtime.tv_nsec)
        return base_err_set(err, COLIBRI_EIO, "%s changed on disk while in use (size %lld, was %lld); reload the model",
                       f->path, (long long)st.st_size, (long long)f->size);
    return 0;
}

static int read_extent(struct stream_store *s, const struct stream_extent *e, uint8_t *dst, struct colibri_err *err)
{
    const struct stream_file *f = &s->files[e->file];
    int rc = check_file(f, err);
    if (rc) return rc;
    size_t done = 0;
    while (done < e->bytes) {
        ssize_t n = pread(f->fd, dst + done, e->bytes - done, (off_t)(e->off + done));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0)
            return base_err_set(err, COLIBRI_EIO, "%s: %s reading %zu bytes at offset %llu", f->path,
                           n < 0 ? strerror(errno) : "short read", e->bytes - done,
                           (unsigned long long)(e->off + done));
        done += (size_t)n;
    }
    atomic_fetch_add_explicit(&s->base.bytes_read, e->bytes, memory_order_relaxed);
    return 0;
}

/* Reads expert idx into slot sl and wraps its matrices. */
static int fill_slot(struct stream_store *s, struct stream_slot *sl, int idx, struct colibri_err *err)
{
    const struct stream_expert *x = &s->ex[idx];
    if (!sl->buf && !(sl->buf = aligned_alloc(64, s->slot_bytes)))
        return base_err_set(err, COLIBRI_ENOMEM, "expert cache: %zu bytes for a slot", s->slot_bytes);
    uint8_t *p = sl->buf;
    struct qtensor *w[3] = { &sl->w.gate, &sl->w.up, &sl->w.down };
    for (int i = 0; i < 3; i++) {
        const struct qtensor *sh = &x->shape[i];
        uint8_t *data = p, *scales = NULL;
        int rc = read_extent(s, &x->data[i], data, err);
        p += al64(x->data[i].bytes);
        if (!rc && x->scales[i].bytes) {
            scales = p;
            rc = read_extent(s, &x->scales[i], scales, err);
            p += al64(x->scales[i].bytes);
        }
        if (!rc)
            rc = quant_qtensor_wrap(sh->fmt, sh->rows, sh->cols, data, x->data[i].bytes, (const float *)scales,
                                    x->scales[i].bytes / sizeof(float), w[i], err);
        if (rc) return rc;
    }
    return 0;
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
    int at = s->where[idx];
    if (at < 0) {
        /* the free slot, or the least recently used one that nobody holds */
        for (int i = 0; i < s->n_slots; i++) {
            const struct stream_slot *c = &s->slots[i];
            if (c->refs) continue;
            if (at < 0 || c->idx < 0 || (s->slots[at].idx >= 0 && c->tick < s->slots[at].tick)) at = i;
            if (c->idx < 0) break;
        }
        if (at < 0) {
            pthread_mutex_unlock(&s->mu);
            return base_err_set(err, COLIBRI_ENOMEM, "expert cache: all %d slots are in use (layer %d expert %d)",
                           s->n_slots, layer, expert);
        }
        struct stream_slot *sl = &s->slots[at];
        if (sl->idx >= 0) s->where[sl->idx] = -1;
        sl->idx = -1;
        atomic_fetch_add_explicit(&b->misses, 1, memory_order_relaxed);
        rc = fill_slot(s, sl, idx, err);
        if (rc) {
            pthread_mutex_unlock(&s->mu);
            return base_err_prefix(err, rc, "layer %d expert %d", layer, expert);
        }
        sl->idx = idx;
        s->where[idx] = at;
    }
    struct stream_slot *sl = &s->slots[at];
    sl->refs++;
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

static void stream_prefetch(struct expert_store *b, int layer, const int *experts, int n)
{
    struct stream_store *s = (struct stream_store *)b;
    atomic_fetch_add_explicit(&b->prefetch_hints, (uint64_t)n, memory_order_relaxed);
    for (int i = 0; i < n; i++) {
        int idx = (layer - b->first_moe_layer) * b->n_experts + experts[i];
        pthread_mutex_lock(&s->mu);
        int cached = s->where[idx] >= 0;
        pthread_mutex_unlock(&s->mu);
        if (cached) continue;
        const struct stream_expert *x = &s->ex[idx];
        for (int j = 0; j < 3; j++) {
            posix_fadvise(s->files[x->data[j].file].fd, (off_t)x->data[j].off, (off_t)x->data[j].bytes,
                          POSIX_FADV_WILLNEED);
            if (x->scales[j].bytes)
                posix_fadvise(s->files[x->scales[j].file].fd, (off_t)x->scales[j].off, (off_t)x->scales[j].bytes,
                              POSIX_FADV_WILLNEED);
        }
    }
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
    for (int i = 0; i < s->n_files; i++) {
        if (s->files[i].fd >= 0) close(s->files[i].fd);
        free(s->files[i].path);
    }
    for (int i = 0; s->slots && i < s->n_slots; i++) free(s->slots[i].buf);
    free(s->files);
    free(s->ex);
    free(s->where);
    free(s->slots);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

static const struct expert_store_ops STREAM_OPS = {
    .name = "streamed",
    .acquire = stream_acquire,
    .release = stream_release,
    .prefetch = stream_prefetch,
    .expert_bytes = stream_expert_bytes,
    .resident_bytes = stream_resident_bytes,
    .free = stream_free,
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

int expert_store_stream_new(const struct st_set *st, const struct expert_store *resident, int64_t budget, int min_slots,
                            struct expert_store **out, struct colibri_err *err)
{
    struct stream_store *s = calloc(1, sizeof *s);
    if (!s) return base_err_set(err, COLIBRI_ENOMEM, "expert store: out of memory");
    s->base = (struct expert_store){ .ops = &STREAM_OPS, .n_layers = resident->n_layers,
                                     .first_moe_layer = resident->first_moe_layer, .n_experts = resident->n_experts };
    pthread_mutex_init(&s->mu, NULL);
    int n = n_index(&s->base), rc = 0;
    s->ex = calloc((size_t)(n ? n : 1), sizeof *s->ex);
    s->where = malloc((size_t)(n ? n : 1) * sizeof *s->where);
    s->files = calloc((size_t)st->n_files, sizeof *s->files);
    if (!s->ex || !s->where || !s->files) {
        rc = base_err_set(err, COLIBRI_ENOMEM, "expert store: out of memory for %d experts", n);
        goto fail;
    }
    s->n_files = st->n_files;
    for (int f = 0; f < st->n_files; f++) s->files[f].fd = -1;
    for (int i = 0; i < n && !rc; i++) {
        int layer = s->base.first_moe_layer + i / s->base.n_experts, e = i % s->base.n_experts;
        const struct mlp_weights *w =
            expert_store_resident_slot((struct expert_store *)resident, layer, e);
        const struct qtensor *m[3] = { &w->gate, &w->up, &w->down };
        struct stream_expert *x = &s->ex[i];
        s->where[i] = -1;
        for (int j = 0; j < 3 && !rc; j++) {
            if (m[j]->owned) {
                rc = base_err_set(err, COLIBRI_EUNSUPPORTED,
                             "streaming experts needs them kept as stored (no --experts conversion at load, no fused "
                             "gate_up_proj layout); write such a checkpoint with colibri convert");
                break;
            }
            x->shape[j] = (struct qtensor){ .fmt = m[j]->fmt, .rows = m[j]->rows, .cols = m[j]->cols };
            size_t db = quant_fmt_data_bytes(m[j]->fmt, m[j]->rows, m[j]->cols);
            size_t sb = quant_fmt_scale_count(m[j]->fmt, m[j]->rows, m[j]->cols) * sizeof(float);
            rc = locate(st, m[j]->data, db, &x->data[j], err);
            if (!rc && sb) rc = locate(st, m[j]->scales, sb, &x->scales[j], err);
            x->bytes += al64(db) + al64(sb);
        }
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
    for (int i = 0; i < s->n_slots; i++) s->slots[i].idx = -1;
    for (int f = 0; f < st->n_files; f++) {
        struct stream_file *sf = &s->files[f];
        struct stat sb;
        if (!(sf->path = strdup(st->files[f].path))) {
            rc = base_err_set(err, COLIBRI_ENOMEM, "expert store: out of memory");
            goto fail;
        }
        if ((sf->fd = open(sf->path, O_RDONLY | O_CLOEXEC)) < 0 || fstat(sf->fd, &sb)) {
            rc = base_err_set(err, COLIBRI_EIO, "%s: cannot open for reading experts: %s", sf->path, strerror(errno));
            goto fail;
        }
        sf->size = sb.st_size;
        sf->mtime = sb.st_mtim;
    }
    *out = &s->base;
    return 0;
fail:
    stream_free(&s->base);
    return rc;
}

int expert_store_stream_slots(const struct expert_store *s)
{
    return s->ops == &STREAM_OPS ? ((const struct stream_store *)s)->n_slots : 0;
}
