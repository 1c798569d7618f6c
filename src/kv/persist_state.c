/* kv/persist_state.c - KV files of version 3 (see persist_state.h and
 * docs/FORMATS.md):
 *
 *   header (256): 0 "COLIBRKV", 8 u16 write_version 3, 10 u16 read_version 3,
 *     12 u32 256, 16 u64 records_offset, 24 u64 salt, 32 u64 model,
 *     40 char[48] weights, 88 u32 n_layers, 92 u32 table_bytes,
 *     96 u64 snap_bytes, 104 char[16] tier, 120 u64 table_checksum,
 *     128 char[16] index_tier, 144..247 zero, 248 u64 XXH64(header[0,248), 0)
 *   count slots at 512 and 1024 (kv/persist.c): the published chunk count
 *   layer table at 4096: n_layers x 32: kind, snap_bytes, n_arrays, 0,
 *     then (row_bytes, ratio) x 2 (zero for arrays >= n_arrays)
 *   chunk k at records_offset + the sizes of chunks < k: 0 "KV3C",
 *     4 u32 k, 8 u64 p0, 16 u64 p1, 24 u64 bytes, 32 i32 tokens[p1-p0] (to a
 *     multiple of 8), rows (layer-major, array by array: rows
 *     [p0/ratio, p1/ratio)), the snapshot at p1 (snap_bytes), zeros to a
 *     multiple of 8, u64 XXH64(chunk[0, bytes-8), salt) */
#include "kv/persist_state.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define XXH_STATIC_LINKING_ONLY
#include <xxhash.h>

#include "base/err.h"
#include "kv/persist_bytes.h"

struct chunk {
    uint64_t p0, p1, off, bytes;
};

struct kv_state_file {
    const struct io_fs *io;
    void *fh;
    char *path;
    struct kv_state_hdr hdr;
    int read_only, failed;
    uint64_t seq;
    int slot;
    struct chunk *ch;           /* the published chunks */
    uint64_t n, cap;
    int32_t *tokens;            /* the file's tokens [0, end of the last chunk) */
    uint64_t tok_cap;
};

static uint64_t align8(uint64_t n) { return (n + 7) & ~(uint64_t)7; }

static int io_err(struct colibri_err *err, int rc, const char *what, const char *path)
{
    return base_err_set(err, COLIBRI_EIO, "kv file %s: %s: %s", path, what, io_strerror(rc));
}

static uint64_t rows_bytes(const struct kv_state_hdr *h, uint64_t p0, uint64_t p1)
{
    uint64_t b = 0;
    for (uint32_t l = 0; l < h->n_layers; l++)
        for (uint32_t a = 0; a < h->layer[l].n_arrays; a++)
            b += (p1 / h->layer[l].ratio[a] - p0 / h->layer[l].ratio[a]) * h->layer[l].row_bytes[a];
    return b;
}

static uint64_t chunk_bytes(const struct kv_state_hdr *h, uint64_t p0, uint64_t p1)
{
    return align8(align8(KV_STATE_CHUNK_HEAD + 4 * (p1 - p0)) + rows_bytes(h, p0, p1) + h->snap_bytes) + 8;
}

/* ---------------------------------------------------------------- header */

int kv_state_hdr_finish(struct kv_state_hdr *h, struct colibri_err *err)
{
    if (h->n_layers == 0 || h->n_layers > KV_FILE_LAYERS_MAX)
        return base_err_set(err, COLIBRI_EINVAL, "kv state file: %u layers (1 to %d)", h->n_layers, KV_FILE_LAYERS_MAX);
    h->write_version = h->read_version = KV_STATE_VERSION;
    h->table_bytes = h->n_layers * KV_STATE_LAYER_BYTES;
    h->records_offset = KV_FILE_RECORDS + ((uint64_t)h->table_bytes + KV_FILE_RECORDS - 1) / KV_FILE_RECORDS * KV_FILE_RECORDS;
    h->snap_bytes = 0;
    for (uint32_t l = 0; l < h->n_layers; l++) {
        const struct kv_state_layer *y = &h->layer[l];
        if (y->n_arrays > KV_STATE_ARRAYS)
            return base_err_set(err, COLIBRI_EINVAL, "kv state file: layer %u has %u row arrays", l, y->n_arrays);
        for (uint32_t a = 0; a < y->n_arrays; a++)
            if (!y->ratio[a] || !y->row_bytes[a])
                return base_err_set(err, COLIBRI_EINVAL, "kv state file: layer %u array %u: ratio %u, %u bytes per row",
                                    l, a, y->ratio[a], y->row_bytes[a]);
        h->snap_bytes += y->snap_bytes;
    }
    if (strnlen(h->weights, KV_FILE_WEIGHTS_MAX) >= KV_FILE_WEIGHTS_MAX || strnlen(h->tier, KV_FILE_NAME_MAX) >= KV_FILE_NAME_MAX ||
        strnlen(h->index_tier, KV_FILE_NAME_MAX) >= KV_FILE_NAME_MAX)
        return base_err_set(err, COLIBRI_EINVAL, "kv state file: the weights label or a tier name is too long");
    return 0;
}

static void table_encode(const struct kv_state_hdr *h, uint8_t *out)
{
    memset(out, 0, h->table_bytes);
    for (uint32_t l = 0; l < h->n_layers; l++) {
        uint8_t *e = out + (size_t)l * KV_STATE_LAYER_BYTES;
        const struct kv_state_layer *y = &h->layer[l];
        put32(e, y->kind);
        put32(e + 4, y->snap_bytes);
        put32(e + 8, y->n_arrays);
        for (uint32_t a = 0; a < y->n_arrays; a++) {
            put32(e + 16 + 8 * a, y->row_bytes[a]);
            put32(e + 20 + 8 * a, y->ratio[a]);
        }
    }
}

/* Header and layer table, head[records_offset]. */
static void head_encode(struct kv_state_hdr *h, uint8_t *head)
{
    memset(head, 0, h->records_offset);
    table_encode(h, head + KV_FILE_RECORDS);
    h->table_checksum = XXH64(head + KV_FILE_RECORDS, h->table_bytes, 0);
    memcpy(head, KV_FILE_MAGIC, 8);
    put16(head + 8, h->write_version);
    put16(head + 10, h->read_version);
    put32(head + 12, KV_FILE_HDR_BYTES);
    put64(head + 16, h->records_offset);
    put64(head + 24, h->salt);
    put64(head + 32, h->model);
    memcpy(head + 40, h->weights, strnlen(h->weights, KV_FILE_WEIGHTS_MAX - 1));
    put32(head + 88, h->n_layers);
    put32(head + 92, h->table_bytes);
    put64(head + 96, h->snap_bytes);
    memcpy(head + 104, h->tier, strnlen(h->tier, KV_FILE_NAME_MAX - 1));
    put64(head + 120, h->table_checksum);
    memcpy(head + 128, h->index_tier, strnlen(h->index_tier, KV_FILE_NAME_MAX - 1));
    put64(head + 248, XXH64(head, 248, 0));
}

static int text_ok(const uint8_t *p, size_t n)
{
    size_t len = strnlen((const char *)p, n);
    return len < n && all_zero(p + len, n - len);
}

/* The 256 header bytes: a version-3 header, or the refusal naming the field. */
static int hdr_decode(const uint8_t *in, struct kv_state_hdr *h, struct colibri_err *err)
{
    memset(h, 0, sizeof *h);
    if (memcmp(in, KV_FILE_MAGIC, 8))
        return base_err_set(err, COLIBRI_EFORMAT, "magic: not a colibri KV file (no \"%s\" at offset 0)", KV_FILE_MAGIC);
    h->write_version = get16(in + 8);
    h->read_version = get16(in + 10);
    if (h->read_version > KV_STATE_VERSION)
        return base_err_set(err, COLIBRI_EUNSUPPORTED, "read_version %u: written by a newer colibri (this build reads "
                            "version %d)", h->read_version, KV_STATE_VERSION);
    if (h->read_version >= 1 && h->read_version < KV_STATE_VERSION)
        return base_err_set(err, COLIBRI_EMISMATCH, "read_version %u: a file of cache rows (another model's); this "
                            "model's attention state (DeepSeek-V4, GLM-5.3) is kept in version %d files", h->read_version,
                            KV_STATE_VERSION);
    if (h->read_version != KV_STATE_VERSION || h->write_version < KV_STATE_VERSION)
        return base_err_set(err, COLIBRI_EFORMAT, "read_version %u / write_version %u", h->read_version,
                            h->write_version);
    if (XXH64(in, 248, 0) != get64(in + 248))
        return base_err_set(err, COLIBRI_EFORMAT, "header_checksum: header bytes [0, 248) do not match it (damaged header)");
    if (get32(in + 12) != KV_FILE_HDR_BYTES)
        return base_err_set(err, COLIBRI_EFORMAT, "header_bytes %u (must be %d)", get32(in + 12), KV_FILE_HDR_BYTES);
    if (!all_zero(in + 144, 104)) return base_err_set(err, COLIBRI_EFORMAT, "reserved: bytes 144..247 are not zero");
    if (!text_ok(in + 40, KV_FILE_WEIGHTS_MAX) || !text_ok(in + 104, KV_FILE_NAME_MAX) ||
        !text_ok(in + 128, KV_FILE_NAME_MAX))
        return base_err_set(err, COLIBRI_EFORMAT, "weights, tier or index_tier: not a NUL-padded string");
    h->records_offset = get64(in + 16);
    h->salt = get64(in + 24);
    h->model = get64(in + 32);
    memcpy(h->weights, in + 40, KV_FILE_WEIGHTS_MAX);
    h->n_layers = get32(in + 88);
    h->table_bytes = get32(in + 92);
    h->snap_bytes = get64(in + 96);
    memcpy(h->tier, in + 104, KV_FILE_NAME_MAX);
    h->table_checksum = get64(in + 120);
    memcpy(h->index_tier, in + 128, KV_FILE_NAME_MAX);
    if (h->n_layers == 0 || h->n_layers > KV_FILE_LAYERS_MAX)
        return base_err_set(err, COLIBRI_EFORMAT, "n_layers %u (1 to %d)", h->n_layers, KV_FILE_LAYERS_MAX);
    struct kv_state_hdr t = *h;
    kv_state_hdr_finish(&t, NULL);
    if (h->table_bytes != t.table_bytes || h->records_offset != t.records_offset)
        return base_err_set(err, COLIBRI_EFORMAT, "table_bytes %u / records_offset %llu (%u layers have %u / %llu)",
                            h->table_bytes, (unsigned long long)h->records_offset, h->n_layers, t.table_bytes,
                            (unsigned long long)t.records_offset);
    return 0;
}

static int table_decode(const uint8_t *in, struct kv_state_hdr *h, struct colibri_err *err)
{
    if (XXH64(in, h->table_bytes, 0) != h->table_checksum)
        return base_err_set(err, COLIBRI_EFORMAT, "table_checksum: the layer table does not match it (damaged)");
    uint64_t sum = 0;
    for (uint32_t l = 0; l < h->n_layers; l++) {
        const uint8_t *e = in + (size_t)l * KV_STATE_LAYER_BYTES;
        struct kv_state_layer *y = &h->layer[l];
        y->kind = get32(e);
        y->snap_bytes = get32(e + 4);
        y->n_arrays = get32(e + 8);
        if (y->n_arrays > KV_STATE_ARRAYS || get32(e + 12))
            return base_err_set(err, COLIBRI_EFORMAT, "layer %u: n_arrays %u (0 to %d) or reserved not zero", l,
                                y->n_arrays, KV_STATE_ARRAYS);
        for (uint32_t a = 0; a < KV_STATE_ARRAYS; a++) {
            uint32_t rb = get32(e + 16 + 8 * a), ra = get32(e + 20 + 8 * a);
            if (a < y->n_arrays ? !rb || !ra : rb || ra)
                return base_err_set(err, COLIBRI_EFORMAT, "layer %u array %u: row_bytes %u, ratio %u", l, a, rb, ra);
            y->row_bytes[a] = rb;
            y->ratio[a] = ra;
        }
        sum += y->snap_bytes;
    }
    if (sum != h->snap_bytes)
        return base_err_set(err, COLIBRI_EFORMAT, "snap_bytes %llu: the layers' sum to %llu",
                            (unsigned long long)h->snap_bytes, (unsigned long long)sum);
    return 0;
}

/* The first difference between the file's layout and the session's, or 0. */
static int hdr_match(const struct kv_state_hdr *f, const struct kv_state_hdr *w, struct colibri_err *err)
{
    if (f->model != w->model)
        return base_err_set(err, COLIBRI_EMISMATCH, "model: the file is of another model (fingerprint %016llx, this "
                            "model's %016llx)", (unsigned long long)f->model, (unsigned long long)w->model);
    if (strcmp(f->weights, w->weights))
        return base_err_set(err, COLIBRI_EMISMATCH, "weights: saved with \"%s\", this model is loaded with \"%s\"",
                            f->weights, w->weights);
    if (strcmp(f->tier, w->tier))
        return base_err_set(err, COLIBRI_EMISMATCH, "tier: saved with --kv %s; run with --kv %s to reuse it", f->tier,
                            f->tier);
    /* An empty index_tier in a file whose session has index keys is a file
     * written before the field existed: its index-key rows are f32 or fp8,
     * whose row sizes differ, so the row_bytes check below still decides. */
    if (f->index_tier[0] && strcmp(f->index_tier, w->index_tier)) {
        if (!w->index_tier[0])
            return base_err_set(err, COLIBRI_EMISMATCH, "index_tier: saved with --kv-index %s, but this model keeps no "
                                "index keys (another layout)", f->index_tier);
        return base_err_set(err, COLIBRI_EMISMATCH, "index_tier: saved with --kv-index %s; this session runs "
                            "--kv-index %s (run with --kv-index %s to reuse it)", f->index_tier, w->index_tier,
                            f->index_tier);
    }
    if (f->n_layers != w->n_layers)
        return base_err_set(err, COLIBRI_EMISMATCH, "n_layers: the file has %u, this model %u", f->n_layers, w->n_layers);
    for (uint32_t l = 0; l < f->n_layers; l++) {
        const struct kv_state_layer *a = &f->layer[l], *b = &w->layer[l];
        const char *what = a->kind != b->kind ? "kind" : a->snap_bytes != b->snap_bytes ? "snap_bytes"
                         : a->n_arrays != b->n_arrays ? "n_arrays" : NULL;
        for (uint32_t i = 0; !what && i < a->n_arrays; i++)
            what = a->row_bytes[i] != b->row_bytes[i] ? "row_bytes" : a->ratio[i] != b->ratio[i] ? "ratio" : NULL;
        if (what)
            return base_err_set(err, COLIBRI_EMISMATCH, "layer %u: its %s differs from this session's (another "
                                "layout or cache tier)", l, what);
    }
    return 0;
}

/* ---------------------------------------------------------------- chunks */

static int chunk_push(struct kv_state_file *f, struct chunk c, const int32_t *tokens, struct colibri_err *err)
{
    if (f->n == f->cap) {
        uint64_t cap = f->cap ? 2 * f->cap : 16;
        struct chunk *p = realloc(f->ch, cap * sizeof *p);
        if (!p) return base_err_set(err, COLIBRI_ENOMEM, "kv file: out of memory");
        f->ch = p;
        f->cap = cap;
    }
    if (c.p1 > f->tok_cap) {
        uint64_t cap = c.p1 * 2;
        int32_t *p = realloc(f->tokens, cap * sizeof *p);
        if (!p) return base_err_set(err, COLIBRI_ENOMEM, "kv file: out of memory");
        f->tokens = p;
        f->tok_cap = cap;
    }
    memcpy(f->tokens + c.p0, tokens, (c.p1 - c.p0) * sizeof *tokens);
    f->ch[f->n++] = c;
    return 0;
}

static uint64_t chunks_end(const struct kv_state_file *f)
{
    return f->n ? f->ch[f->n - 1].off + f->ch[f->n - 1].bytes : f->hdr.records_offset;
}

static int publish(struct kv_state_file *f, uint64_t count, struct colibri_err *err)
{
    uint8_t b[KV_FILE_SLOT_BYTES];
    int slot = f->slot ^ 1;
    kv_slot_encode(b, f->seq + 1, count, f->hdr.salt);
    int rc = f->io->write(f->io, f->fh, b, sizeof b, slot ? KV_FILE_SLOT_B : KV_FILE_SLOT_A);
    if (!rc) rc = f->io->sync(f->io, f->fh);
    if (rc) {
        f->failed = 1;
        return io_err(err, rc, "publishing the chunk count", f->path);
    }
    f->slot = slot;
    f->seq++;
    return 0;
}

/* Chunk [p0, p1) of m with the snapshot snap into buf (chunk_bytes). */
static void chunk_build(const struct kv_state_hdr *h, uint64_t k, uint64_t p0, uint64_t p1,
                        const struct kv_state_mem *m, const uint8_t *snap, uint8_t *buf)
{
    uint64_t bytes = chunk_bytes(h, p0, p1);
    memset(buf, 0, bytes);
    memcpy(buf, "KV3C", 4);
    put32(buf + 4, (uint32_t)k);
    put64(buf + 8, p0);
    put64(buf + 16, p1);
    put64(buf + 24, bytes);
    for (uint64_t i = p0; i < p1; i++) put32(buf + KV_STATE_CHUNK_HEAD + 4 * (i - p0), (uint32_t)m->tokens[i]);
    uint8_t *o = buf + align8(KV_STATE_CHUNK_HEAD + 4 * (p1 - p0));
    for (uint32_t l = 0; l < h->n_layers; l++)
        for (uint32_t a = 0; a < h->layer[l].n_arrays; a++) {
            uint64_t r0 = p0 / h->layer[l].ratio[a], r1 = p1 / h->layer[l].ratio[a], rb = h->layer[l].row_bytes[a];
            memcpy(o, m->rows[l][a] + r0 * rb, (r1 - r0) * rb);
            o += (r1 - r0) * rb;
        }
    memcpy(o, snap, h->snap_bytes);
    put64(buf + bytes - 8, XXH64(buf, bytes - 8, h->salt));
}

/* Chunk k read at off (up to avail bytes of file): 0 and its range when
 * sound, else 1 with why set. */
static int chunk_check(const struct kv_state_hdr *h, const uint8_t *head, uint64_t k, uint64_t prev_p1,
                       uint64_t avail, uint64_t *p0, uint64_t *p1, uint64_t *bytes, char *why, size_t why_n)
{
    if (avail < KV_STATE_CHUNK_HEAD) return snprintf(why, why_n, "chunk %llu is missing or cut short", (unsigned long long)k), 1;
    *p0 = get64(head + 8);
    *p1 = get64(head + 16);
    *bytes = get64(head + 24);
    if (memcmp(head, "KV3C", 4) || get32(head + 4) != k || *p0 != prev_p1 || *p1 <= *p0 || *p1 > INT32_MAX ||
        *bytes != chunk_bytes(h, *p0, *p1))
        return snprintf(why, why_n, "chunk %llu: its head is not chunk %llu from position %llu (misplaced or damaged)",
                        (unsigned long long)k, (unsigned long long)k, (unsigned long long)prev_p1), 1;
    if (*bytes > avail)
        return snprintf(why, why_n, "chunk %llu (positions %llu..%llu) is cut short", (unsigned long long)k,
                        (unsigned long long)*p0, (unsigned long long)*p1), 1;
    return 0;
}

/* Copies a sound chunk into m when it fits; 1 when it does not. */
static int chunk_restore(const struct kv_state_hdr *h, const uint8_t *buf, uint64_t p0, uint64_t p1,
                         const struct kv_state_mem *m)
{
    if (p1 > (uint64_t)m->max_tokens) return 1;
    for (uint32_t l = 0; l < h->n_layers; l++)
        for (uint32_t a = 0; a < h->layer[l].n_arrays; a++)
            if (p1 / h->layer[l].ratio[a] > m->cap[l][a]) return 1;
    for (uint64_t i = p0; i < p1; i++) m->tokens[i] = (int32_t)get32(buf + KV_STATE_CHUNK_HEAD + 4 * (i - p0));
    const uint8_t *o = buf + align8(KV_STATE_CHUNK_HEAD + 4 * (p1 - p0));
    for (uint32_t l = 0; l < h->n_layers; l++)
        for (uint32_t a = 0; a < h->layer[l].n_arrays; a++) {
            uint64_t r0 = p0 / h->layer[l].ratio[a], r1 = p1 / h->layer[l].ratio[a], rb = h->layer[l].row_bytes[a];
            memcpy(m->rows[l][a] + r0 * rb, o, (r1 - r0) * rb);
            o += (r1 - r0) * rb;
        }
    return 0;
}

/* ------------------------------------------------------------------ open */

/* Invariant (7): PATH.tmp gets the header and table, sync, slot A (count
 * 0), sync, and is renamed over PATH; f->fh is then the new file. */
static int create(struct kv_state_file *f, struct colibri_err *err)
{
    size_t plen = strlen(f->path);
    char *tmp = malloc(plen + 5);
    uint8_t *head = malloc(f->hdr.records_offset);
    int rc = 0;
    void *fh = NULL;
    if (!tmp || !head) rc = base_err_set(err, COLIBRI_ENOMEM, "kv file: out of memory");
    if (!rc) {
        memcpy(tmp, f->path, plen);
        memcpy(tmp + plen, ".tmp", 5);
        if ((rc = f->io->open(f->io, tmp, IO_OPEN_WRITE | IO_OPEN_CREATE, &fh))) rc = io_err(err, rc, "creating", tmp);
    }
    if (!rc) {
        uint8_t slot[KV_FILE_SLOT_BYTES];
        head_encode(&f->hdr, head);
        kv_slot_encode(slot, 1, 0, f->hdr.salt);
        if ((rc = f->io->write(f->io, fh, head, f->hdr.records_offset, 0)) || (rc = f->io->sync(f->io, fh)) ||
            (rc = f->io->write(f->io, fh, slot, sizeof slot, KV_FILE_SLOT_A)) || (rc = f->io->sync(f->io, fh)))
            rc = io_err(err, rc, "writing the header", tmp);
        else if ((rc = f->io->rename(f->io, tmp, f->path))) rc = io_err(err, rc, "renaming the new file over", f->path);
        if (rc) f->io->close(f->io, fh);
        else f->fh = fh;
    }
    free(tmp);
    free(head);
    f->seq = 1;
    f->slot = 0;
    return rc;
}

/* Reads and checks the header and table of an open file into f->hdr. */
static int read_head(struct kv_state_file *f, const struct kv_state_hdr *want, struct colibri_err *err)
{
    uint8_t in[KV_FILE_HDR_BYTES];
    size_t got = 0;
    int rc = f->io->read(f->io, f->fh, in, sizeof in, 0, &got);
    if (rc) return io_err(err, rc, "reading the header", f->path);
    /* a short file is named by its first bytes: not a KV file at all, or one cut short */
    if (got < 8 || memcmp(in, KV_FILE_MAGIC, 8))
        return base_err_set(err, COLIBRI_EFORMAT, "magic: not a colibri KV file (no \"%s\" at offset 0)", KV_FILE_MAGIC);
    if (got < sizeof in)
        return base_err_set(err, COLIBRI_EFORMAT, "the header is cut short (%zu of %d bytes)", got, KV_FILE_HDR_BYTES);
    if ((rc = hdr_decode(in, &f->hdr, err))) return rc;
    uint8_t *t = malloc(f->hdr.table_bytes);
    if (!t) return base_err_set(err, COLIBRI_ENOMEM, "kv file: out of memory");
    rc = f->io->read(f->io, f->fh, t, f->hdr.table_bytes, KV_FILE_RECORDS, &got);
    if (rc) rc = io_err(err, rc, "reading the layer table", f->path);
    else if (got < f->hdr.table_bytes) rc = base_err_set(err, COLIBRI_EFORMAT, "the layer table is cut short");
    else rc = table_decode(t, &f->hdr, err);
    free(t);
    if (!rc && want) rc = hdr_match(&f->hdr, want, err);
    if (!rc) f->read_only = f->hdr.write_version > KV_STATE_VERSION;
    return rc;
}

/* Walks the published chunks (invariant 5), restoring those that fit m. */
static int walk(struct kv_state_file *f, uint64_t count, uint64_t size, const struct kv_state_mem *m,
                kv_state_snap_fn on_snap, void *ctx, struct kv_state_report *rep, struct colibri_err *err)
{
    uint64_t off = f->hdr.records_offset, prev = 0;
    int fits = 1, rc = 0;
    uint8_t *buf = NULL;
    size_t have = 0;
    for (uint64_t k = 0; k < count && !rc; k++) {
        uint8_t head[KV_STATE_CHUNK_HEAD];
        size_t got = 0;
        uint64_t p0 = 0, p1 = 0, bytes = 0;
        if ((rc = f->io->read(f->io, f->fh, head, sizeof head, off, &got))) { rc = io_err(err, rc, "reading", f->path); break; }
        if (chunk_check(&f->hdr, head, k, prev, got < sizeof head ? got : size - off, &p0, &p1, &bytes, rep->why,
                        sizeof rep->why)) {
            rep->first_bad = (int64_t)k;
            break;
        }
        if (bytes > have) {
            uint8_t *p = realloc(buf, bytes);
            if (!p) { rc = base_err_set(err, COLIBRI_ENOMEM, "kv file: out of memory for a chunk of %llu bytes", (unsigned long long)bytes); break; }
            buf = p;
            have = bytes;
        }
        if ((rc = f->io->read(f->io, f->fh, buf, bytes, off, &got))) { rc = io_err(err, rc, "reading", f->path); break; }
        if (got < bytes || XXH64(buf, bytes - 8, f->hdr.salt) != get64(buf + bytes - 8)) {
            snprintf(rep->why, sizeof rep->why, "chunk %llu (positions %llu..%llu) fails its checksum",
                     (unsigned long long)k, (unsigned long long)p0, (unsigned long long)p1);
            rep->first_bad = (int64_t)k;
            break;
        }
        if (fits) fits = m && !chunk_restore(&f->hdr, buf, p0, p1, m);
        if (fits) {
            rc = on_snap(ctx, p1, buf + align8(KV_STATE_CHUNK_HEAD + 4 * (p1 - p0)) + rows_bytes(&f->hdr, p0, p1), err);
            rep->restored = k + 1;
            rep->positions = p1;
        }
        if (!rc) {
            int32_t *t = malloc((p1 - p0) * sizeof *t);
            if (!t) { rc = base_err_set(err, COLIBRI_ENOMEM, "kv file: out of memory"); break; }
            for (uint64_t i = p0; i < p1; i++) t[i - p0] = (int32_t)get32(buf + KV_STATE_CHUNK_HEAD + 4 * (i - p0));
            rc = chunk_push(f, (struct chunk){ p0, p1, off, bytes }, t, err);
            free(t);
        }
        prev = p1;
        off += bytes;
    }
    free(buf);
    rep->kept = f->n;
    return rc;
}

static void file_free(struct kv_state_file *f)
{
    if (!f) return;
    if (f->fh) f->io->close(f->io, f->fh);
    free(f->path);
    free(f->ch);
    free(f->tokens);
    free(f);
}

int kv_state_open(const struct io_fs *io, const char *path, const struct kv_state_hdr *want,
                  const struct kv_state_mem *m, kv_state_snap_fn on_snap, void *ctx, struct kv_state_report *rep,
                  struct kv_state_file **out, struct colibri_err *err)
{
    memset(rep, 0, sizeof *rep);
    rep->first_bad = -1;
    struct kv_state_file *f = calloc(1, sizeof *f);
    if (!f || !(f->path = strdup(path))) {
        free(f);
        return base_err_set(err, COLIBRI_ENOMEM, "kv file: out of memory");
    }
    f->io = io;
    int rc = io->open(io, path, IO_OPEN_WRITE, &f->fh);
    if (rc == -ENOENT) {
        f->fh = NULL;
        f->hdr = *want;
        if ((rc = create(f, err))) goto fail;
        rep->created = 1;
        *out = f;
        return 0;
    }
    if (rc) {
        f->fh = NULL;
        rc = rc == -EWOULDBLOCK ? base_err_set(err, COLIBRI_EIO, "kv file %s: another process holds it", path)
                                : io_err(err, rc, "opening", path);
        goto fail;
    }
    uint64_t size = 0, count = 0;
    if ((rc = read_head(f, want, err)) || (rc = kv_read_slots(io, f->fh, path, f->hdr.salt, &f->seq, &count, &f->slot, err))) {
        char msg[COLIBRI_ERR_MSG_MAX];
        snprintf(msg, sizeof msg, "%s", err ? err->msg : "");
        rc = base_err_set(err, rc, "kv file %s: %s; the file was left untouched (delete it to start a new one)", path, msg);
        goto fail;
    }
    if ((rc = io_size(io, f->fh, &size))) { rc = io_err(err, rc, "reading the size", path); goto fail; }
    rep->published = count;
    rep->read_only = f->read_only;
    if ((rc = walk(f, count, size, m, on_snap, ctx, rep, err))) goto fail;
    /* invariant (5): a writer publishes what it kept and drops the rest */
    if (!f->read_only && f->n < count && (rc = publish(f, f->n, err))) goto fail;
    if (!f->read_only && size > chunks_end(f)) {
        if ((rc = io->truncate(io, f->fh, chunks_end(f))) || (rc = io->sync(io, f->fh))) {
            rc = io_err(err, rc, "truncating after the last kept chunk", path);
            goto fail;
        }
    }
    *out = f;
    return 0;
fail:
    file_free(f);
    return rc;
}

/* ------------------------------------------------------------------ save */

int kv_state_save(struct kv_state_file *f, const struct kv_state_mem *m, const int *pos, const uint8_t *const *snap,
                  int n_snaps, struct colibri_err *err)
{
    if (f->read_only) return 0;
    if (f->failed)
        return base_err_set(err, COLIBRI_EIO, "kv file %s: an earlier write failed; close and reopen it to save again",
                            f->path);
    uint64_t n = n_snaps > 0 ? (uint64_t)pos[n_snaps - 1] : 0, j = 0;
    while (j < f->n && f->ch[j].p1 <= n &&
           !memcmp(f->tokens + f->ch[j].p0, m->tokens + f->ch[j].p0, (f->ch[j].p1 - f->ch[j].p0) * sizeof *m->tokens))
        j++;
    int rc;
    /* invariant (3): the shorter count is durable before anything past it is overwritten */
    if (j < f->n) {
        if ((rc = publish(f, j, err))) return rc;
        f->n = j;
    }
    uint64_t count0 = f->n;
    uint8_t *buf = NULL;
    size_t have = 0;
    rc = 0;
    for (int i = 0; i < n_snaps && !rc; i++) {
        uint64_t p0 = f->n ? f->ch[f->n - 1].p1 : 0, p1 = (uint64_t)pos[i], off = chunks_end(f);
        if (p1 <= p0) continue;
        uint64_t bytes = chunk_bytes(&f->hdr, p0, p1);
        if (bytes > have) {
            uint8_t *q = realloc(buf, bytes);
            if (!q) {
                rc = base_err_set(err, COLIBRI_ENOMEM, "kv file: out of memory for a chunk of %llu bytes",
                                  (unsigned long long)bytes);
                break;
            }
            buf = q;
            have = bytes;
        }
        chunk_build(&f->hdr, f->n, p0, p1, m, snap[i], buf);
        if ((rc = f->io->write(f->io, f->fh, buf, bytes, off))) {
            f->failed = 1;
            rc = io_err(err, rc, "writing a chunk", f->path);
            break;
        }
        rc = chunk_push(f, (struct chunk){ p0, p1, off, bytes }, m->tokens + p0, err);
    }
    free(buf);
    /* invariant (1): the chunks are durable before the count that publishes them */
    if (!rc && f->n > count0 && (rc = f->io->sync(f->io, f->fh))) {
        f->failed = 1;
        rc = io_err(err, rc, "syncing chunks", f->path);
    }
    if (!rc && f->n > count0) rc = publish(f, f->n, err);
    if (rc) f->n = count0;
    return rc;
}

uint64_t kv_state_count(const struct kv_state_file *f) { return f->n; }

int kv_state_verify(const struct io_fs *io, const char *path, struct kv_state_verify *v, struct colibri_err *err)
{
    memset(v, 0, sizeof *v);
    v->first_bad = -1;
    struct kv_state_file *f = calloc(1, sizeof *f);
    if (!f || !(f->path = strdup(path))) {
        free(f);
        return base_err_set(err, COLIBRI_ENOMEM, "kv file: out of memory");
    }
    f->io = io;
    int rc = io->open(io, path, IO_OPEN_READ, &f->fh);
    if (rc) {
        f->fh = NULL;
        file_free(f);
        return io_err(err, rc, "opening", path);
    }
    uint64_t count = 0;
    struct kv_state_report rep = { .first_bad = -1 };
    rc = read_head(f, NULL, err);
    if (!rc) rc = kv_read_slots(io, f->fh, path, f->hdr.salt, &f->seq, &count, &f->slot, err);
    if (!rc && (rc = io_size(io, f->fh, &v->file_bytes))) rc = io_err(err, rc, "reading the size", path);
    if (!rc) rc = walk(f, count, v->file_bytes, NULL, NULL, NULL, &rep, err);
    if (!rc) {
        v->hdr = f->hdr;
        v->published = count;
        v->kept = f->n;
        v->positions = f->n ? f->ch[f->n - 1].p1 : 0;
        v->first_bad = rep.first_bad;
        v->tail_bytes = v->file_bytes > chunks_end(f) ? v->file_bytes - chunks_end(f) : 0;
        v->read_only = f->read_only;
        snprintf(v->why, sizeof v->why, "%s", rep.why);
    }
    file_free(f);
    return rc;
}

void kv_state_close(struct kv_state_file *f) { file_free(f); }
