/* tests/unit/io_fault.c - the fault-injecting io_fs layer (see io_fault.h).
 *
 * Each handle keeps the writes and truncations issued since its last sync as a
 * list of operations, in order; reads and stat() replay them over the base
 * file, so the code under test sees its own writes. A sync applies them to the
 * base file and syncs it. A crash decides each pending operation's fate
 * (every open handle's), applies the survivors and turns every later call
 * into -EIO. */
#include "io_fault.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

enum fault_op_kind { FAULT_WRITE, FAULT_TRUNC };

struct fault_op {
    enum fault_op_kind kind;
    uint64_t off;           /* write offset, or the new size */
    size_t n;
    uint8_t *data;          /* owned copy of the written bytes */
};

struct fault_fh {
    void *base;
    struct fault_op *ops;
    int n_ops, cap;
    struct fault_fh *next;  /* open handles of this layer */
};

struct io_fault {
    struct io_fs io;
    const struct io_fs *base;
    struct io_fault_opts o;
    pthread_mutex_t mu;
    int calls, counted, syncs, tripped, crashed;
    uint64_t rng;
    struct fault_fh *open_list;
};

static uint64_t fault_rand(struct io_fault *f)
{
    uint64_t z = (f->rng += 0x9e3779b97f4a7c15ull);   /* splitmix64 */
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Counts a call of kind op and says whether it must fail (lock held). */
static int fault_enter(struct io_fault *f, unsigned op)
{
    f->calls++;
    if (!f->o.fail_only || (f->o.fail_only & op)) f->counted++;
    if (f->crashed) return -EIO;
    if (f->o.fail_call && f->counted == f->o.fail_call && (!f->o.fail_only || (f->o.fail_only & op))) {
        f->tripped = 1;
        return -EIO;
    }
    if (f->o.fail_persist && f->tripped) return -EIO;
    return 0;
}

static void fault_ops_clear(struct fault_fh *h)
{
    for (int i = 0; i < h->n_ops; i++) free(h->ops[i].data);
    h->n_ops = 0;
}

static int fault_push(struct fault_fh *h, enum fault_op_kind kind, uint64_t off, const void *buf, size_t n)
{
    if (h->n_ops == h->cap) {
        int cap = h->cap ? 2 * h->cap : 16;
        struct fault_op *ops = realloc(h->ops, (size_t)cap * sizeof *ops);
        if (!ops) return -ENOMEM;
        h->ops = ops;
        h->cap = cap;
    }
    struct fault_op *op = &h->ops[h->n_ops];
    op->kind = kind;
    op->off = off;
    op->n = n;
    op->data = NULL;
    if (kind == FAULT_WRITE && n) {
        if (!(op->data = malloc(n))) return -ENOMEM;
        memcpy(op->data, buf, n);
    }
    h->n_ops++;
    return 0;
}

static int fault_apply(const struct io_fs *base, struct fault_fh *h, const struct fault_op *op)
{
    if (op->kind == FAULT_TRUNC) return base->truncate(base, h->base, op->off);
    return base->write(base, h->base, op->data, op->n, op->off);
}

/* Applies each pending op of every open handle according to the crash fate. */
static void fault_crash(struct io_fault *f)
{
    for (struct fault_fh *h = f->open_list; h; h = h->next) {
        for (int i = 0; i < h->n_ops; i++) {
            struct fault_op *op = &h->ops[i];
            enum io_fate fate = f->o.fate;
            if (fate == IO_FATE_RANDOM) fate = (enum io_fate)(1 + fault_rand(f) % 4);
            if (op->kind == FAULT_TRUNC && fate != IO_FATE_KEEP) fate = IO_FATE_DROP;
            if (fate == IO_FATE_DROP || (op->kind == FAULT_WRITE && op->n == 0)) continue;
            if (fate == IO_FATE_TORN) op->n = (size_t)(fault_rand(f) % op->n);
            if (fate == IO_FATE_GARBLE) {
                int k = 1 + (int)(fault_rand(f) % 8);
                for (int j = 0; j < k; j++) op->data[fault_rand(f) % op->n] ^= (uint8_t)(1 + fault_rand(f) % 255);
            }
            fault_apply(f->base, h, op);
        }
        fault_ops_clear(h);
    }
    f->crashed = f->tripped = 1;
}

static int fault_open(const struct io_fs *io, const char *path, int flags, void **fh)
{
    struct io_fault *f = io->ctx;
    pthread_mutex_lock(&f->mu);
    int rc = fault_enter(f, IO_OP_OPEN);
    struct fault_fh *h = rc ? NULL : calloc(1, sizeof *h);
    if (!rc && !h) rc = -ENOMEM;
    if (!rc && (rc = f->base->open(f->base, path, flags, &h->base))) {
        free(h);
        h = NULL;
    }
    if (h) {
        h->next = f->open_list;
        f->open_list = h;
        *fh = h;
    }
    pthread_mutex_unlock(&f->mu);
    return rc;
}

static int fault_close(const struct io_fs *io, void *fh)
{
    struct io_fault *f = io->ctx;
    struct fault_fh *h = fh;
    pthread_mutex_lock(&f->mu);
    int rc = fault_enter(f, IO_OP_CLOSE);
    /* A close that is not a crash leaves unsynced writes in the page cache,
     * where a later reader sees them. */
    for (int i = 0; !f->crashed && i < h->n_ops; i++) fault_apply(f->base, h, &h->ops[i]);
    fault_ops_clear(h);
    free(h->ops);
    for (struct fault_fh **p = &f->open_list; *p; p = &(*p)->next)
        if (*p == h) {
            *p = h->next;
            break;
        }
    int brc = f->base->close(f->base, h->base);
    free(h);
    pthread_mutex_unlock(&f->mu);
    return rc ? rc : brc;
}

static int fault_stat_of(struct io_fault *f, struct fault_fh *h, struct io_stat *st)
{
    int rc = f->base->stat(f->base, h->base, st);
    if (rc) return rc;
    for (int i = 0; i < h->n_ops; i++) {
        const struct fault_op *op = &h->ops[i];
        if (op->kind == FAULT_TRUNC) st->size = op->off;
        else if (op->off + op->n > st->size) st->size = op->off + op->n;
    }
    return 0;
}

/* Reads with the pending writes laid over the base file's bytes (lock held). */
static int fault_read_over(struct io_fault *f, struct fault_fh *h, void *buf, size_t n, uint64_t off, size_t *got)
{
    size_t bgot = 0;
    int rc = f->base->read(f->base, h->base, buf, n, off, &bgot);
    if (rc) return rc;
    memset((uint8_t *)buf + bgot, 0, n - bgot);
    uint64_t end;
    if ((rc = io_size(f->base, h->base, &end))) return rc;
    for (int i = 0; i < h->n_ops; i++) {
        const struct fault_op *op = &h->ops[i];
        if (op->kind == FAULT_TRUNC) {
            if (op->off < off + n) {
                uint64_t from = op->off > off ? op->off - off : 0;
                memset((uint8_t *)buf + from, 0, n - from);
            }
            end = op->off;
            continue;
        }
        uint64_t lo = op->off > off ? op->off : off;
        uint64_t hi = op->off + op->n < off + n ? op->off + op->n : off + n;
        if (lo < hi) memcpy((uint8_t *)buf + (lo - off), op->data + (lo - op->off), hi - lo);
        if (op->off + op->n > end) end = op->off + op->n;
    }
    *got = end <= off ? 0 : (end - off < n ? (size_t)(end - off) : n);
    return 0;
}

static int fault_read(const struct io_fs *io, void *fh, void *buf, size_t n, uint64_t off, size_t *got)
{
    struct io_fault *f = io->ctx;
    struct fault_fh *h = fh;
    pthread_mutex_lock(&f->mu);
    int rc = fault_enter(f, IO_OP_READ);
    if (!rc && h->n_ops) rc = fault_read_over(f, h, buf, n, off, got);
    int plain = !rc && !h->n_ops;
    pthread_mutex_unlock(&f->mu);
    /* nothing pending: the base layer's read as it is, outside the lock */
    return plain ? f->base->read(f->base, h->base, buf, n, off, got) : rc;
}

static int fault_write(const struct io_fs *io, void *fh, const void *buf, size_t n, uint64_t off)
{
    struct io_fault *f = io->ctx;
    pthread_mutex_lock(&f->mu);
    int rc = fault_enter(f, IO_OP_WRITE);
    if (!rc) rc = fault_push(fh, FAULT_WRITE, off, buf, n);
    pthread_mutex_unlock(&f->mu);
    return rc;
}

static int fault_truncate(const struct io_fs *io, void *fh, uint64_t size)
{
    struct io_fault *f = io->ctx;
    pthread_mutex_lock(&f->mu);
    int rc = fault_enter(f, IO_OP_TRUNCATE);
    if (!rc) rc = fault_push(fh, FAULT_TRUNC, size, NULL, 0);
    pthread_mutex_unlock(&f->mu);
    return rc;
}

static int fault_sync_locked(struct io_fault *f, struct fault_fh *h)
{
    int rc = fault_enter(f, IO_OP_SYNC);
    if (rc) return rc;
    f->syncs++;
    if (f->o.crash_sync && f->syncs == f->o.crash_sync) {
        fault_crash(f);
        return -EIO;
    }
    for (int i = 0; i < h->n_ops; i++)
        if ((rc = fault_apply(f->base, h, &h->ops[i]))) break;
    fault_ops_clear(h);
    return rc ? rc : f->base->sync(f->base, h->base);
}

static int fault_sync(const struct io_fs *io, void *fh)
{
    struct io_fault *f = io->ctx;
    pthread_mutex_lock(&f->mu);
    int rc = fault_sync_locked(f, fh);
    pthread_mutex_unlock(&f->mu);
    return rc;
}

static int fault_stat(const struct io_fs *io, void *fh, struct io_stat *st)
{
    struct io_fault *f = io->ctx;
    pthread_mutex_lock(&f->mu);
    int rc = fault_enter(f, IO_OP_STAT);
    if (!rc) rc = fault_stat_of(f, fh, st);
    pthread_mutex_unlock(&f->mu);
    return rc;
}

/* A mapping shows the base file: pending writes are not in it. */
static int fault_map(const struct io_fs *io, void *fh, size_t n, const void **addr)
{
    struct io_fault *f = io->ctx;
    struct fault_fh *h = fh;
    pthread_mutex_lock(&f->mu);
    int rc = fault_enter(f, IO_OP_MAP);
    if (!rc) rc = f->base->map(f->base, h->base, n, addr);
    pthread_mutex_unlock(&f->mu);
    return rc;
}

static int fault_unmap(const struct io_fs *io, const void *addr, size_t n)
{
    struct io_fault *f = io->ctx;
    pthread_mutex_lock(&f->mu);
    int rc = fault_enter(f, IO_OP_UNMAP);
    /* the mapping is released even when the call is made to fail */
    int brc = f->base->unmap(f->base, addr, n);
    pthread_mutex_unlock(&f->mu);
    return rc ? rc : brc;
}

static int fault_rename(const struct io_fs *io, const char *from, const char *to)
{
    struct io_fault *f = io->ctx;
    pthread_mutex_lock(&f->mu);
    int rc = fault_enter(f, IO_OP_RENAME);
    if (!rc) rc = f->base->rename(f->base, from, to);
    pthread_mutex_unlock(&f->mu);
    return rc;
}

static int fault_remove(const struct io_fs *io, const char *path)
{
    struct io_fault *f = io->ctx;
    pthread_mutex_lock(&f->mu);
    int rc = fault_enter(f, IO_OP_REMOVE);
    if (!rc) rc = f->base->remove(f->base, path);
    pthread_mutex_unlock(&f->mu);
    return rc;
}

int io_fault_new(const struct io_fs *base, const struct io_fault_opts *o, struct io_fault **out,
                 const struct io_fs **io)
{
    struct io_fault *f = calloc(1, sizeof *f);
    if (!f) return -ENOMEM;
    f->base = base;
    if (o) f->o = *o;
    f->rng = f->o.seed;
    pthread_mutex_init(&f->mu, NULL);
    f->io = (struct io_fs){ .open = fault_open, .close = fault_close, .read = fault_read,
                            .write = fault_write, .sync = fault_sync, .truncate = fault_truncate,
                            .stat = fault_stat, .map = fault_map, .unmap = fault_unmap,
                            .rename = fault_rename, .remove = fault_remove, .ctx = f };
    *out = f;
    *io = &f->io;
    return 0;
}

void io_fault_free(struct io_fault *f)
{
    if (!f) return;
    while (f->open_list) fault_close(&f->io, f->open_list);
    pthread_mutex_destroy(&f->mu);
    free(f);
}

/* The counters change on reader threads: read them under the lock. */
static int fault_get(const struct io_fault *f, const int *v)
{
    pthread_mutex_lock((pthread_mutex_t *)&f->mu);
    int x = *v;
    pthread_mutex_unlock((pthread_mutex_t *)&f->mu);
    return x;
}

int io_fault_calls(const struct io_fault *f) { return fault_get(f, &f->calls); }
int io_fault_counted(const struct io_fault *f) { return fault_get(f, &f->counted); }
int io_fault_syncs(const struct io_fault *f) { return fault_get(f, &f->syncs); }
int io_fault_tripped(const struct io_fault *f) { return fault_get(f, &f->tripped); }
