/* kv/persist.c - KV files (docs/FORMATS.md, "KV files"): count slots,
 * records, opening (validate, trim, restore, upgrade), saving (append,
 * shrink, rewrite) and verifying. The header and part table are
 * kv/persist_hdr.c.
 *
 *   count slot (at 512 and 1024): 0 "KVCN", 4 u32 0, 8 u64 seq, 16 u64 count,
 *     24 u64 XXH64(slot[0,24), salt)
 *   record i (at records_offset + i*R): 0 u32 i, 4 i32 token, 8 rows
 *     (layer-major, each layer's row_bytes), R-8 u64 XXH64(record[0,R-8), salt)
 *
 * The invariants are numbered in kv/persist.h; comments below cite them. */
#include "kv/persist.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define XXH_STATIC_LINKING_ONLY
#include <xxhash.h>

#include "base/err.h"
#include "kv/persist_bytes.h"

#define KV_BATCH_BYTES (4u << 20)   /* records are read and written in batches of about this */

struct kv_file {
    const struct io_fs *io;
    void *fh;
    char *path;
    struct kv_file_hdr hdr;     /* the file on disk */
    struct kv_file_hdr want;    /* the caller's cache; == hdr except while an upgrade is pending */
    int upgrade_pending;
    int read_only;
    int failed;                 /* a write, sync or truncate failed: what the slots say is unknown */
    uint64_t count;             /* published records */
    uint64_t seq;               /* seq of the slot holding count */
    int slot;                   /* 0: A, 1: B */
    uint64_t size;              /* file bytes */
    uint64_t *sums;             /* checksum of record i, i < count */
    uint64_t sums_cap;
    uint8_t *buf;               /* one batch of records */
    size_t buf_bytes;
};

static int io_err(struct colibri_err *err, int rc, const char *what, const char *path)
{
    return base_err_set(err, COLIBRI_EIO, "kv file %s: %s: %s", path, what, io_strerror(rc));
}

/* ---------------------------------------------------------- count slots */

void kv_slot_encode(uint8_t out[KV_FILE_SLOT_BYTES], uint64_t seq, uint64_t count, uint64_t salt)
{
    memset(out, 0, KV_FILE_SLOT_BYTES);
    memcpy(out, "KVCN", 4);
    put64(out + 8, seq);
    put64(out + 16, count);
    put64(out + 24, XXH64(out, 24, salt));
}

static int slot_decode(const uint8_t in[KV_FILE_SLOT_BYTES], uint64_t salt, uint64_t *seq, uint64_t *count)
{
    if (memcmp(in, "KVCN", 4) || !all_zero(in + 4, 4) || XXH64(in, 24, salt) != get64(in + 24)) return 0;
    *seq = get64(in + 8);
    *count = get64(in + 16);
    return *seq > 0;
}

static uint64_t slot_off(int slot) { return slot ? KV_FILE_SLOT_B : KV_FILE_SLOT_A; }

/* The published count: the valid slot with the larger seq. EFORMAT when
 * neither is valid (a state no crash produces: the file is refused). */
int kv_read_slots(const struct io_fs *io, void *fh, const char *path, uint64_t salt, uint64_t *seq, uint64_t *count,
                  int *slot, struct colibri_err *err)
{
    uint64_t s[2] = { 0, 0 }, c[2] = { 0, 0 };
    int ok[2];
    for (int i = 0; i < 2; i++) {
        uint8_t b[KV_FILE_SLOT_BYTES];
        size_t got = 0;
        int rc = io->read(io, fh, b, sizeof b, slot_off(i), &got);
        if (rc) return io_err(err, rc, "reading the count slots", path);
        ok[i] = got == sizeof b && slot_decode(b, salt, &s[i], &c[i]);
    }
    if (!ok[0] && !ok[1])
        return base_err_set(err, COLIBRI_EFORMAT, "count slots: neither slot A (512) nor B (1024) is valid");
    *slot = ok[1] && (!ok[0] || s[1] > s[0]);
    *seq = s[*slot];
    *count = c[*slot];
    return 0;
}

/* -------------------------------------------------------------- records */

static uint64_t rec_offset(const struct kv_file_hdr *h, uint64_t i) { return h->records_offset + i * h->record_bytes; }

/* Records wholly or partly present in a file of `size` bytes. */
static uint64_t recs_present(const struct kv_file_hdr *h, uint64_t size)
{
    return size > h->records_offset ? (size - h->records_offset) / h->record_bytes : 0;
}

/* Record i of cache + tokens into out[record_bytes]; returns its checksum. */
static uint64_t rec_build(const struct kv_cache *c, const int32_t *tokens, uint64_t i, uint64_t salt, uint8_t *out)
{
    put32(out, (uint32_t)i);
    put32(out + 4, (uint32_t)tokens[i]);
    size_t body = 8;
    for (int l = 0; l < c->n_layers; l++) {
        memcpy(out + body, kv_cache_row(c, l, (int)i), c->layer[l].row_bytes);
        body += c->layer[l].row_bytes;
    }
    uint64_t sum = XXH64(out, body, salt);
    put64(out + body, sum);
    return sum;
}

/* The checksum record i would have, without building it. */
static uint64_t rec_sum(const struct kv_cache *c, const int32_t *tokens, uint64_t i, uint64_t salt)
{
    uint8_t head[8];
    put32(head, (uint32_t)i);
    put32(head + 4, (uint32_t)tokens[i]);
    XXH64_state_t st;
    XXH64_reset(&st, salt);
    XXH64_update(&st, head, 8);
    for (int l = 0; l < c->n_layers; l++) XXH64_update(&st, kv_cache_row(c, l, (int)i), c->layer[l].row_bytes);
    return XXH64_digest(&st);
}

static int buf_reserve(uint8_t **buf, size_t *have, size_t need, struct colibri_err *err)
{
    if (*have >= need) return 0;
    uint8_t *b = realloc(*buf, need);
    if (!b) return base_err_set(err, COLIBRI_ENOMEM, "kv file: %zu bytes for a batch of records", need);
    *buf = b;
    *have = need;
    return 0;
}

static uint64_t batch_records(const struct kv_file_hdr *h)
{
    uint64_t n = KV_BATCH_BYTES / h->record_bytes;
    return n ? n : 1;
}

/* Writes records [from, to) of cache + tokens; sums[i] gets each checksum. */
static int write_records(const struct io_fs *io, void *fh, const char *path, const struct kv_file_hdr *h,
                         const struct kv_cache *c, const int32_t *tokens, uint64_t from, uint64_t to,
                         uint64_t *sums, uint8_t **buf, size_t *buf_bytes, struct colibri_err *err)
{
    uint64_t per = batch_records(h);
    for (uint64_t i = from; i < to; i += per) {
        uint64_t n = to - i < per ? to - i : per;
        int rc = buf_reserve(buf, buf_bytes, n * h->record_bytes, err);
        if (rc) return rc;
        for (uint64_t k = 0; k < n; k++) sums[i + k] = rec_build(c, tokens, i + k, h->salt, *buf + k * h->record_bytes);
        if ((rc = io->write(io, fh, *buf, n * h->record_bytes, rec_offset(h, i))))
            return io_err(err, rc, "writing records", path);
    }
    return 0;
}

/* Called for each valid record in order; nonzero stops the walk with that code. */
typedef int (*rec_use_fn)(void *ctx, uint64_t i, const uint8_t *rec, uint64_t sum, struct colibri_err *err);

struct walk_result {
    uint64_t kept;
    int64_t first_bad;
    char why[256];
};

/* Invariants (4) and (5): reads records [0, published) until the first that
 * is missing, short, misplaced or fails its checksum. */
static int walk_records(const struct io_fs *io, void *fh, const char *path, const struct kv_file_hdr *h,
                        uint64_t published, uint64_t size, rec_use_fn use, void *ctx, struct walk_result *w,
                        struct colibri_err *err)
{
    memset(w, 0, sizeof *w);
    w->first_bad = -1;
    uint64_t R = h->record_bytes;
    uint64_t present = recs_present(h, size);
    uint64_t n = published < present ? published : present;
    uint64_t per = batch_records(h);
    uint8_t *buf = NULL;
    size_t have = 0;
    int rc = 0;
    for (uint64_t i = 0; i < n && !rc; i += per) {
        uint64_t m = n - i < per ? n - i : per;
        if ((rc = buf_reserve(&buf, &have, m * R, err))) break;
        size_t got = 0;
        if ((rc = io->read(io, fh, buf, m * R, rec_offset(h, i), &got))) {
            rc = io_err(err, rc, "reading records", path);
            break;
        }
        if (got < m * R) m = got / R;   /* the file shrank under us: what is left is a torn tail */
        for (uint64_t k = 0; k < m; k++) {
            const uint8_t *rec = buf + k * R;
            uint64_t sum = XXH64(rec, R - 8, h->salt);
            if (get32(rec) != (uint32_t)(i + k)) {
                w->first_bad = (int64_t)(i + k);
                snprintf(w->why, sizeof w->why, "record %llu: position field says %u",
                         (unsigned long long)(i + k), get32(rec));
            } else if (sum != get64(rec + R - 8)) {
                w->first_bad = (int64_t)(i + k);
                snprintf(w->why, sizeof w->why, "record %llu: checksum mismatch (damaged record)",
                         (unsigned long long)(i + k));
            }
            if (w->first_bad >= 0) break;
            if (use && (rc = use(ctx, i + k, rec, sum, err))) break;
            w->kept = i + k + 1;
        }
        if (w->first_bad >= 0 || m < (n - i < per ? n - i : per)) break;
    }
    free(buf);
    if (rc) return rc;
    if (w->first_bad < 0 && w->kept < published) {
        w->first_bad = (int64_t)w->kept;
        uint64_t have_bytes = size > rec_offset(h, w->kept) ? size - rec_offset(h, w->kept) : 0;
        snprintf(w->why, sizeof w->why, "record %llu: the file ends %s (torn tail; %llu of %llu published records present)",
                 (unsigned long long)w->kept, have_bytes ? "inside it" : "before it", (unsigned long long)w->kept,
                 (unsigned long long)published);
    }
    return 0;
}

/* ---------------------------------------------------------------- state */

#ifndef NDEBUG
/* The in-memory side of the invariants in kv/persist.h. */
static void kv_file_check(const struct kv_file *f)
{
    assert(f->fh && f->path);
    assert(f->slot == 0 || f->slot == 1);
    assert(f->seq >= 1);
    uint64_t rec = KV_FILE_REC_EXTRA;
    for (uint32_t l = 0; l < f->hdr.n_layers; l++) rec += f->hdr.layer[l].row_bytes;
    assert(f->hdr.record_bytes == rec);
    /* (4)/(5): every published record exists in the file (a damaged file
     * may be shorter than the header block when nothing is published). */
    assert(f->count == 0 || f->size >= rec_offset(&f->hdr, f->count));
    assert(f->count <= f->sums_cap || f->upgrade_pending || f->read_only);
    /* Only an all-f32 file is ever upgraded. */
    for (uint32_t l = 0; f->upgrade_pending && l < f->hdr.n_layers; l++)
        for (uint32_t i = 0; i < f->hdr.layer[l].n_parts; i++) assert(f->hdr.layer[l].part[i].codec == KV_TIER_F32);
    assert(f->upgrade_pending || f->read_only || f->hdr.tier == f->want.tier);
}
#else
static void kv_file_check(const struct kv_file *f) { (void)f; }
#endif

static int sums_reserve(struct kv_file *f, uint64_t n, struct colibri_err *err)
{
    if (n <= f->sums_cap) return 0;
    uint64_t cap = f->sums_cap ? f->sums_cap : 256;
    while (cap < n) cap *= 2;
    uint64_t *s = realloc(f->sums, cap * sizeof *s);
    if (!s) return base_err_set(err, COLIBRI_ENOMEM, "kv file: record checksums for %llu records", (unsigned long long)n);
    f->sums = s;
    f->sums_cap = cap;
    return 0;
}

/* Invariant (2): the other slot, seq + 1, then sync. */
static int publish(struct kv_file *f, uint64_t count, struct colibri_err *err)
{
    uint8_t b[KV_FILE_SLOT_BYTES];
    int slot = f->slot ^ 1;
    kv_slot_encode(b, f->seq + 1, count, f->hdr.salt);
    int rc = f->io->write(f->io, f->fh, b, sizeof b, slot_off(slot));
    if (!rc) rc = f->io->sync(f->io, f->fh);
    if (rc) return io_err(err, rc, "publishing the record count", f->path);
    f->slot = slot;
    f->seq++;
    f->count = count;
    kv_file_check(f);
    return 0;
}

static int shrink_to(struct kv_file *f, uint64_t end, struct colibri_err *err)
{
    if (f->size <= end) return 0;
    int rc = f->io->truncate(f->io, f->fh, end);
    if (!rc) rc = f->io->sync(f->io, f->fh);
    if (rc) return io_err(err, rc, "truncating after the last kept record", f->path);
    f->size = end;
    return 0;
}

/* Invariant (7): PATH.tmp gets header, records [0, n), sync, slot A, sync,
 * then is renamed over PATH. *fh_out is the new file, open and locked. */
static int rewrite(const struct io_fs *io, const char *path, const struct kv_file_hdr *h, const struct kv_cache *c,
                   const int32_t *tokens, uint64_t n, uint64_t *sums, uint8_t **buf, size_t *buf_bytes,
                   void **fh_out, struct colibri_err *err)
{
    size_t plen = strlen(path);
    char *tmp = malloc(plen + 5);
    if (!tmp) return base_err_set(err, COLIBRI_ENOMEM, "kv file: out of memory");
    memcpy(tmp, path, plen);
    memcpy(tmp + plen, ".tmp", 5);
    void *fh = NULL;
    int rc = io->open(io, tmp, IO_OPEN_WRITE | IO_OPEN_CREATE, &fh);
    if (rc) {
        rc = io_err(err, rc, "creating", tmp);
        free(tmp);
        return rc;
    }
    uint8_t *head = calloc(1, h->records_offset);
    if (!head) rc = base_err_set(err, COLIBRI_ENOMEM, "kv file: out of memory");
    if (!rc) {
        kv_file_hdr_encode(h, head);
        if (h->table_bytes) kv_file_table_encode(h, head + KV_FILE_RECORDS);
        if ((rc = io->write(io, fh, head, h->records_offset, 0))) rc = io_err(err, rc, "writing the header", tmp);
    }
    if (!rc && n) rc = write_records(io, fh, tmp, h, c, tokens, 0, n, sums, buf, buf_bytes, err);
    if (!rc && (rc = io->sync(io, fh))) rc = io_err(err, rc, "syncing records", tmp);
    if (!rc) {
        uint8_t slot[KV_FILE_SLOT_BYTES];
        kv_slot_encode(slot, 1, n, h->salt);
        if ((rc = io->write(io, fh, slot, sizeof slot, KV_FILE_SLOT_A)) || (rc = io->sync(io, fh)))
            rc = io_err(err, rc, "publishing the record count", tmp);
    }
    if (!rc && (rc = io->rename(io, tmp, path))) rc = io_err(err, rc, "renaming the new file over", path);
    free(head);
    free(tmp);
    if (rc) {
        io->close(io, fh);
        return rc;
    }
    *fh_out = fh;
    return 0;
}

/* ----------------------------------------------------------------- open */

struct restore_ctx {
    struct kv_file *f;
    struct kv_cache *cache;
    int32_t *tokens;
    uint64_t max;
    uint64_t restored;
    int upgrade;
    struct kv_codec *codecs;    /* the file's codecs for an upgrade, [n_layers][KV_PARTS_MAX] */
    float *x;                   /* the widest part's values */
};

static int restore_one(void *vctx, uint64_t i, const uint8_t *rec, uint64_t sum, struct colibri_err *err)
{
    struct restore_ctx *r = vctx;
    const struct kv_file_hdr *h = &r->f->hdr;
    r->f->sums[i] = sum;
    if (i >= r->max) return 0;
    r->tokens[i] = (int32_t)get32(rec + 4);
    const uint8_t *row = rec + 8;
    for (uint32_t l = 0; l < h->n_layers; row += h->layer[l].row_bytes, l++) {
        if (!r->upgrade) {
            memcpy(kv_cache_row(r->cache, (int)l, (int)i), row, h->layer[l].row_bytes);
            continue;
        }
        for (uint32_t k = 0; k < h->layer[l].n_parts; k++) {
            const struct kv_file_part *p = &h->layer[l].part[k];
            if (!p->dim) continue;
            kv_codec_decode(&r->codecs[l * KV_PARTS_MAX + k], row + p->offset, r->x);
            int rc = kv_cache_write_part(r->cache, (int)l, (int)i, (enum kv_part_kind)p->kind, r->x, err);
            if (rc) return rc;
        }
    }
    r->restored = i + 1;
    return 0;
}

/* The file's codecs, one per (layer, part), for re-encoding its f32 rows. */
static int upgrade_codecs(struct restore_ctx *r, struct colibri_err *err)
{
    const struct kv_file_hdr *h = &r->f->hdr;
    uint32_t widest = 1;
    if (!(r->codecs = calloc((size_t)h->n_layers * KV_PARTS_MAX, sizeof *r->codecs)))
        return base_err_set(err, COLIBRI_ENOMEM, "kv file: out of memory");
    for (uint32_t l = 0; l < h->n_layers; l++)
        for (uint32_t k = 0; k < h->layer[l].n_parts; k++) {
            const struct kv_file_part *p = &h->layer[l].part[k];
            if (!p->dim) continue;
            if (p->dim > widest) widest = p->dim;
            int rc = kv_codec_init(&r->codecs[l * KV_PARTS_MAX + k], (enum kv_tier)p->codec, (int)p->dim, p->seed, err);
            if (rc) return rc;
        }
    if (!(r->x = malloc((size_t)widest * sizeof *r->x))) return base_err_set(err, COLIBRI_ENOMEM, "kv file: out of memory");
    return 0;
}

static void upgrade_codecs_free(struct restore_ctx *r)
{
    for (uint32_t l = 0; r->codecs && l < r->f->hdr.n_layers; l++)
        for (int k = 0; k < KV_PARTS_MAX; k++) kv_codec_free(&r->codecs[l * KV_PARTS_MAX + k]);
    free(r->codecs);
    free(r->x);
}

/* Version 2: the part table after the header, into h->layer. */
static int read_table(const struct io_fs *io, void *fh, const char *path, struct kv_file_hdr *h,
                      struct colibri_err *err)
{
    if (!h->table_bytes) return 0;
    uint8_t *t = malloc(h->table_bytes);
    if (!t) return base_err_set(err, COLIBRI_ENOMEM, "kv file: out of memory");
    size_t got = 0;
    int rc = io->read(io, fh, t, h->table_bytes, KV_FILE_RECORDS, &got);
    if (rc) rc = io_err(err, rc, "reading the part table", path);
    else if (got < h->table_bytes)
        rc = base_err_set(err, COLIBRI_EFORMAT, "part table: the file ends inside it (%zu of %u bytes)", got,
                          h->table_bytes);
    else rc = kv_file_table_decode(t, h, err);
    free(t);
    return rc;
}

static struct kv_file *file_new(const struct io_fs *io, const char *path, struct colibri_err *err)
{
    struct kv_file *f = calloc(1, sizeof *f);
    if (f && !(f->path = strdup(path))) {
        free(f);
        f = NULL;
    }
    if (!f) base_err_set(err, COLIBRI_ENOMEM, "kv file: out of memory");
    else f->io = io;
    return f;
}

/* Invariant (8): an unreadable file is reported and left alone. */
static int refuse(struct colibri_err *err, int rc, const char *path)
{
    char msg[COLIBRI_ERR_MSG_MAX];
    snprintf(msg, sizeof msg, "%s", err ? err->msg : "");
    return base_err_set(err, rc, "kv file %s: %s; the file was left untouched (delete it to start a new one)", path, msg);
}

static int open_create(struct kv_file *f, const struct kv_file_hdr *want, struct kv_file_report *rep,
                       struct colibri_err *err)
{
    int rc = rewrite(f->io, f->path, want, NULL, NULL, 0, NULL, &f->buf, &f->buf_bytes, &f->fh, err);
    if (rc) return rc;
    f->hdr = f->want = *want;
    f->seq = 1;
    f->slot = 0;
    f->count = 0;
    f->size = want->records_offset;
    rep->created = 1;
    if ((rc = sums_reserve(f, 1, err))) return rc;
    kv_file_check(f);
    return 0;
}

int kv_file_open(const struct io_fs *io, const char *path, const struct kv_file_hdr *want, struct kv_cache *cache,
                 int32_t *tokens, int max_tokens, struct kv_file_report *rep, struct kv_file **out,
                 struct colibri_err *err)
{
    memset(rep, 0, sizeof *rep);
    rep->first_bad = -1;
    if (max_tokens < 0 || max_tokens > cache->capacity) max_tokens = cache->capacity;
    struct kv_file *f = file_new(io, path, err);
    if (!f) return COLIBRI_ENOMEM;
    f->want = *want;
    int rc = io->open(io, path, IO_OPEN_WRITE, &f->fh);
    if (rc == -ENOENT) {
        if ((rc = open_create(f, want, rep, err))) goto fail;
        *out = f;
        return 0;
    }
    if (rc == -EACCES || rc == -EROFS || rc == -EPERM) {
        /* Not writable: restore from it, never write it. */
        f->read_only = 1;
        rc = io->open(io, path, IO_OPEN_READ, &f->fh);
    }
    if (rc == -EWOULDBLOCK) {
        rc = base_err_set(err, COLIBRI_EIO, "kv file %s: in use by another process (locked); the file was left untouched", path);
        goto fail;
    }
    if (rc) {
        rc = io_err(err, rc, "opening", path);
        goto fail;
    }

    uint8_t head[KV_FILE_HDR_BYTES];
    size_t got = 0;
    if ((rc = io->read(io, f->fh, head, sizeof head, 0, &got))) {
        rc = io_err(err, rc, "reading the header", path);
        goto fail;
    }
    if (got < sizeof head) {
        rc = base_err_set(err, COLIBRI_EFORMAT,
                     "kv file %s: %zu bytes, shorter than a header: not a colibri KV file; it was left untouched "
                     "(delete it to start a new one)",
                     path, got);
        goto fail;
    }
    if ((rc = kv_file_hdr_decode(head, &f->hdr, err)) || (rc = read_table(io, f->fh, path, &f->hdr, err))) {
        rc = refuse(err, rc, path);
        goto fail;
    }
    char why[512];
    enum kv_file_match m = kv_file_hdr_match(&f->hdr, want, why, sizeof why);
    if (m == KV_FILE_OTHER) {
        rc = base_err_set(err, COLIBRI_EMISMATCH, "kv file %s: %s; the file was left untouched", path, why);
        goto fail;
    }
    if (f->hdr.write_version > KV_FILE_VERSION) f->read_only = 1;
    if ((rc = kv_read_slots(io, f->fh, path, f->hdr.salt, &f->seq, &f->count, &f->slot, err))) {
        rc = refuse(err, rc, path);
        goto fail;
    }
    if ((rc = io_size(io, f->fh, &f->size))) {
        rc = io_err(err, rc, "reading the size", path);
        goto fail;
    }
    rep->published = f->count;

    struct restore_ctx r = { .f = f, .cache = cache, .tokens = tokens, .max = (uint64_t)max_tokens,
                             .upgrade = m == KV_FILE_UPGRADE };
    uint64_t present = recs_present(&f->hdr, f->size);
    if ((rc = sums_reserve(f, (f->count < present ? f->count : present) + 1, err))) goto fail;
    if (r.upgrade) rc = upgrade_codecs(&r, err);
    struct walk_result w;
    if (!rc) rc = walk_records(io, f->fh, path, &f->hdr, f->count, f->size, restore_one, &r, &w, err);
    upgrade_codecs_free(&r);
    if (rc) goto fail;

    rep->kept = w.kept;
    rep->restored = r.restored;
    rep->first_bad = w.first_bad;
    rep->upgraded = r.upgrade;
    rep->read_only = f->read_only;
    snprintf(rep->why, sizeof rep->why, "%s", w.why);
    uint64_t end = rec_offset(&f->hdr, w.kept);
    rep->tail_bytes = f->size > end ? f->size - end : 0;
    if (r.upgrade) {
        /* The old file stays as it is until the rewrite replaces it (7). */
        f->upgrade_pending = 1;
        if (w.kept < f->count) f->count = w.kept;
    } else if (!f->read_only) {
        /* (5): publish what was kept, then drop everything after it. */
        if (w.kept < f->count && (rc = publish(f, w.kept, err))) goto fail;
        if ((rc = shrink_to(f, end, err))) goto fail;
    } else if (w.kept < f->count) {
        f->count = w.kept;
    }
    kv_file_check(f);
    *out = f;
    return 0;
fail:
    kv_file_close(f);
    return rc;
}

/* ----------------------------------------------------------------- save */

static int save_append(struct kv_file *f, const struct kv_cache *c, const int32_t *tokens, uint64_t n,
                       struct colibri_err *err);

/* 1 if the cache has the shape and every layer's part layout of header w. */
static int cache_is_want(const struct kv_cache *c, const struct kv_file_hdr *w)
{
    if ((uint32_t)c->n_layers != w->n_layers || (uint32_t)c->r != w->r || (uint32_t)c->dr != w->dr) return 0;
    for (int l = 0; l < c->n_layers; l++) {
        const struct kv_layer *L = &c->layer[l];
        const struct kv_file_layer *fl = &w->layer[l];
        if ((uint32_t)L->n_parts != fl->n_parts || (uint32_t)L->row_bytes != fl->row_bytes) return 0;
        for (int i = 0; i < L->n_parts; i++) {
            uint32_t codec = L->parts[i].kind == KV_PART_ROPE ? (uint32_t)kv_rope_tier(L->rope) : (uint32_t)L->parts[i].codec->tier;
            if ((uint32_t)L->parts[i].kind != fl->part[i].kind || codec != fl->part[i].codec) return 0;
        }
    }
    return 1;
}

int kv_file_save(struct kv_file *f, const struct kv_cache *c, const int32_t *tokens, int n, struct colibri_err *err)
{
    if (f->read_only)
        return base_err_set(err, COLIBRI_EUNSUPPORTED, "kv file %s: opened read-only (%s); not saved", f->path,
                       f->hdr.write_version > KV_FILE_VERSION ? "written by a newer colibri" : "not writable");
    if (f->failed)
        return base_err_set(err, COLIBRI_EIO, "kv file %s: an earlier write failed; close and reopen it to save again",
                       f->path);
    if (n < 0 || n > c->capacity)
        return base_err_set(err, COLIBRI_EINVAL, "kv file %s: cannot save %d positions of a %d-position cache", f->path, n,
                       c->capacity);
    if (!cache_is_want(c, &f->want))
        return base_err_set(err, COLIBRI_EINVAL, "kv file %s: the cache (%s, %d layers) is not the one the file was opened for (%s)",
                       f->path, kv_tier_name(c->layer[0].tier), c->n_layers, f->want.tier_name);
    int rc = sums_reserve(f, (uint64_t)n + 1, err);
    if (rc) return rc;
    if (f->upgrade_pending) {
        void *fh = NULL;
        if ((rc = rewrite(f->io, f->path, &f->want, c, tokens, (uint64_t)n, f->sums, &f->buf, &f->buf_bytes, &fh, err)))
            return rc;
        f->io->close(f->io, f->fh);
        f->fh = fh;
        f->hdr = f->want;
        f->upgrade_pending = 0;
        f->count = (uint64_t)n;
        f->seq = 1;
        f->slot = 0;
        f->size = rec_offset(&f->hdr, (uint64_t)n);
        kv_file_check(f);
        return 0;
    }
    rc = save_append(f, c, tokens, (uint64_t)n, err);
    /* After a failed write the file is still sound on disk, but a slot may
     * hold a count this object does not know: only a reopen may write again. */
    if (rc) f->failed = 1;
    kv_file_check(f);
    return rc;
}

static int save_append(struct kv_file *f, const struct kv_cache *c, const int32_t *tokens, uint64_t n,
                       struct colibri_err *err)
{
    int rc;
    /* The longest prefix already on disk, byte for byte. */
    uint64_t d = 0, lim = f->count < (uint64_t)n ? f->count : (uint64_t)n;
    while (d < lim && rec_sum(c, tokens, d, f->hdr.salt) == f->sums[d]) d++;
    /* (3): a shorter count is durable before anything past it changes. */
    if (d < f->count && (rc = publish(f, d, err))) return rc;
    if (n > d) {
        rc = write_records(f->io, f->fh, f->path, &f->hdr, c, tokens, d, n, f->sums, &f->buf, &f->buf_bytes, err);
        uint64_t end = rec_offset(&f->hdr, n);
        if (f->size < end) f->size = end;   /* even a failed write may have grown it */
        /* (1): records durable, then published. */
        if (!rc && (rc = f->io->sync(f->io, f->fh))) rc = io_err(err, rc, "syncing records", f->path);
        if (!rc) rc = publish(f, n, err);
        if (rc) return rc;
    }
    return shrink_to(f, rec_offset(&f->hdr, n), err);
}

uint64_t kv_file_count(const struct kv_file *f) { return f->count; }

void kv_file_close(struct kv_file *f)
{
    if (!f) return;
    if (f->fh) f->io->close(f->io, f->fh);
    free(f->path);
    free(f->sums);
    free(f->buf);
    free(f);
}

/* --------------------------------------------------------------- verify */

int kv_file_verify(const struct io_fs *io, const char *path, struct kv_file_verify *v, struct colibri_err *err)
{
    memset(v, 0, sizeof *v);
    v->first_bad = -1;
    void *fh = NULL;
    int rc = io->open(io, path, IO_OPEN_READ, &fh);
    if (rc) return io_err(err, rc, "opening", path);
    uint8_t head[KV_FILE_HDR_BYTES];
    size_t got = 0;
    if ((rc = io_size(io, fh, &v->file_bytes)) || (rc = io->read(io, fh, head, sizeof head, 0, &got))) {
        rc = io_err(err, rc, "reading the header", path);
    } else if (got < sizeof head) {
        rc = base_err_set(err, COLIBRI_EFORMAT, "kv file %s: %zu bytes, shorter than a header: not a colibri KV file", path, got);
    } else if ((rc = kv_file_hdr_decode(head, &v->hdr, err)) || (rc = read_table(io, fh, path, &v->hdr, err))) {
        base_err_prefix(err, rc, "kv file %s", path);
    } else {
        int slot;
        v->read_only = v->hdr.write_version > KV_FILE_VERSION;
        rc = kv_read_slots(io, fh, path, v->hdr.salt, &v->seq, &v->published, &slot, err);
        if (rc) base_err_prefix(err, rc, "kv file %s", path);
        struct walk_result w;
        if (!rc && !(rc = walk_records(io, fh, path, &v->hdr, v->published, v->file_bytes, NULL, NULL, &w, err))) {
            v->valid = w.kept;
            v->first_bad = w.first_bad;
            snprintf(v->why, sizeof v->why, "%s", w.why);
            uint64_t present = recs_present(&v->hdr, v->file_bytes);
            uint64_t end = rec_offset(&v->hdr, v->published < present ? v->published : present);
            v->tail_bytes = v->published <= present && v->file_bytes > end ? v->file_bytes - end : 0;
        }
    }
    io->close(io, fh);
    return rc;
}
