/* tests/unit/fileio_fault.c - the fault-injecting kv_io layer (see fileio_fault.h).
 *
 * Each handle keeps the writes and truncations issued since its last sync as a
 * list of operations, in order; reads and size() replay them over the base
 * file, so the code under test sees its own writes. A sync applies them to the
 * base file and syncs it. A crash decides each pending operation's fate
 * (every open handle's), applies the survivors and turns every later call
 * into -EIO. */
#include "fileio_fault.h"

#include <errno.h>
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

struct kv_io_fault {
    struct kv_io io;
    const struct kv_io *base;
    struct kv_io_fault_opts o;
    int calls, syncs, tripped, crashed;
    uint64_t rng;
    struct fault_fh *open_list;
};

static uint64_t fault_rand(struct kv_io_fault *f)
{
    uint64_t z = (f->rng += 0x9e3779b97f4a7c15ull);   /* splitmix64 */
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Counts the call and says whether it must fail. */
static int fault_enter(struct kv_io_fault *f)
{
    f->calls++;
    if (f->crashed) return -EIO;
    if (f->o.fail_call && f->calls == f->o.fail_call) {
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

static int fault_apply(const struct kv_io *base, struct fault_fh *h, const struct fault_op *op)
{
    if (op->kind == FAULT_TRUNC) return base->truncate(base, h->base, op->off);
    return base->write(base, h->base, op->data, op->n, op->off);
}

/* Applies each pending op of every open handle according to the crash fate. */
static void fault_crash(struct kv_io_fault *f)
{
    for (struct fault_fh *h = f->open_list; h; h = h->next) {
        for (int i = 0; i < h->n_ops; i++) {
            struct fault_op *op = &h->ops[i];
            enum kv_io_fate fate = f->o.fate;
            if (fate == KV_FATE_RANDOM) fate = (enum kv_io_fate)(1 + fault_rand(f) % 4);
            if (op->kind == FAULT_TRUNC && fate != KV_FATE_KEEP) fate = KV_FATE_DROP;
            if (fate == KV_FATE_DROP || (op->kind == FAULT_WRITE && op->n == 0)) continue;
            if (fate == KV_FATE_TORN) op->n = (size_t)(fault_rand(f) % op->n);
            if (fate == KV_FATE_GARBLE) {
                int k = 1 + (int)(fault_rand(f) % 8);
                for (int j = 0; j < k; j++) op->data[fault_rand(f) % op->n] ^= (uint8_t)(1 + fault_rand(f) % 255);
            }
            fault_apply(f->base, h, op);
        }
        fault_ops_clear(h);
    }
    f->crashed = f->tripped = 1;
}

static int fault_open(const struct kv_io *io, const char *path, int flags, void **fh)
{
    struct kv_io_fault *f = io->ctx;
    int rc = fault_enter(f);
    if (rc) return rc;
    struct fault_fh *h = calloc(1, sizeof *h);
    if (!h) return -ENOMEM;
    if ((rc = f->base->open(f->base, path, flags, &h->base))) {
        free(h);
        return rc;
    }
    h->next = f->open_list;
    f->open_list = h;
    *fh = h;
    return 0;
}

static int fault_close(const struct kv_io *io, void *fh)
{
    struct kv_io_fault *f = io->ctx;
    struct fault_fh *h = fh;
    int rc = fault_enter(f);
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
    return rc ? rc : brc;
}

static int fault_size_of(struct kv_io_fault *f, struct fault_fh *h, uint64_t *size)
{
    int rc = f->base->size(f->base, h->base, size);
    if (rc) return rc;
    for (int i = 0; i < h->n_ops; i++) {
        const struct fault_op *op = &h->ops[i];
        if (op->kind == FAULT_TRUNC) *size = op->off;
        else if (op->off + op->n > *size) *size = op->off + op->n;
    }
    return 0;
}

static int fault_read(const struct kv_io *io, void *fh, void *buf, size_t n, uint64_t off, size_t *got)
{
    struct kv_io_fault *f = io->ctx;
    struct fault_fh *h = fh;
    int rc = fault_enter(f);
    if (rc) return rc;
    size_t bgot = 0;
    if ((rc = f->base->read(f->base, h->base, buf, n, off, &bgot))) return rc;
    memset((uint8_t *)buf + bgot, 0, n - bgot);
    uint64_t end;
    if ((rc = f->base->size(f->base, h->base, &end))) return rc;
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

static int fault_write(const struct kv_io *io, void *fh, const void *buf, size_t n, uint64_t off)
{
    struct kv_io_fault *f = io->ctx;
    int rc = fault_enter(f);
    return rc ? rc : fault_push(fh, FAULT_WRITE, off, buf, n);
}

static int fault_truncate(const struct kv_io *io, void *fh, uint64_t size)
{
    struct kv_io_fault *f = io->ctx;
    int rc = fault_enter(f);
    return rc ? rc : fault_push(fh, FAULT_TRUNC, size, NULL, 0);
}

static int fault_sync(const struct kv_io *io, void *fh)
{
    struct kv_io_fault *f = io->ctx;
    struct fault_fh *h = fh;
    int rc = fault_enter(f);
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

static int fault_size(const struct kv_io *io, void *fh, uint64_t *size)
{
    struct kv_io_fault *f = io->ctx;
    int rc = fault_enter(f);
    return rc ? rc : fault_size_of(f, fh, size);
}

static int fault_rename(const struct kv_io *io, const char *from, const char *to)
{
    struct kv_io_fault *f = io->ctx;
    int rc = fault_enter(f);
    return rc ? rc : f->base->rename(f->base, from, to);
}

int kv_io_fault_new(const struct kv_io *base, const struct kv_io_fault_opts *o, struct kv_io_fault **out,
                    const struct kv_io **io)
{
    struct kv_io_fault *f = calloc(1, sizeof *f);
    if (!f) return -ENOMEM;
    f->base = base;
    if (o) f->o = *o;
    f->rng = f->o.seed;
    f->io = (struct kv_io){ .open = fault_open, .close = fault_close, .read = fault_read,
                            .write = fault_write, .sync = fault_sync, .truncate = fault_truncate,
                            .size = fault_size, .rename = fault_rename, .ctx = f };
    *out = f;
    *io = &f->io;
    return 0;
}

void kv_io_fault_free(struct kv_io_fault *f)
{
    if (!f) return;
    while (f->open_list) fault_close(&f->io, f->open_list);
    free(f);
}

int kv_io_fault_calls(const struct kv_io_fault *f) { return f->calls; }
int kv_io_fault_syncs(const struct kv_io_fault *f) { return f->syncs; }
int kv_io_fault_tripped(const struct kv_io_fault *f) { return f->tripped; }
