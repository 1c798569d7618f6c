/* libFuzzer harness: KV files of both versions, read through an in-memory
 * io_fs. First input byte (tests/fuzz/fuzz_kv_input.h has the bits):
 *   bit 0  "reseal": before reading, recompute the part table's checksum
 *          (version 2), the header checksum, both count slots' checksums and
 *          every whole record's checksum from the (mutated) bytes, so
 *          mutations get past the checksums and reach the field checks and
 *          the record paths; clear: read the bytes as they are
 *   bit 1  also open the file as a writer would (kv_file_open: validate,
 *          restore into a cache, trim) and save it back, with a cache of the
 *          geometry and identity of tests/kv/golden_f32.ckv whose layout
 *          bits 2..5 pick: a uniform tier (mod the tier count), or with
 *          bit 6 a per-layer layout of fuzz_kv_layouts (mod their count), so
 *          all-f32 files are upgraded (decoded and re-encoded) into the
 *          other layouts and the rest restored or refused
 *   bit 7  "packed": the file is the input without the zero gap that puts a
 *          version-2 file's records at 8192, so those fit in -max_len=8192
 * Always: kv_file_hdr_decode and kv_file_verify (header, part table, count
 * slots, record walk). Layout: docs/FORMATS.md "KV files". Version-2 seeds:
 * tests/unit/test_fuzz_kv_seeds.c. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "fuzz_kv_input.h"
#include "kv/cache.h"
#include "kv/layout.h"
#include "kv/persist.h"

/* One in-memory file; writes grow it. Paths ending in ".tmp" (a rewrite's
 * scratch file) cannot be opened, so a rewrite fails cleanly. */
struct mem { uint8_t *p; size_t n, cap; };

static int m_open(const struct io_fs *io, const char *path, int flags, void **fh)
{
    size_t l = strlen(path);
    if (l >= 4 && !strcmp(path + l - 4, ".tmp")) return -EIO;
    struct mem *m = io->ctx;
    if (flags & IO_OPEN_CREATE) m->n = 0;
    *fh = m;
    return 0;
}
static int m_close(const struct io_fs *io, void *fh) { return 0; }
static int m_read(const struct io_fs *io, void *fh, void *buf, size_t n, uint64_t off, size_t *got)
{
    const struct mem *m = fh;
    size_t k = off >= m->n ? 0 : m->n - off < n ? m->n - off : n;
    if (k) memcpy(buf, m->p + off, k);
    *got = k;
    return 0;
}
static int m_reserve(struct mem *m, uint64_t size)
{
    if (size > (64u << 20)) return -EFBIG;
    if (size <= m->cap) return 0;
    size_t cap = m->cap ? m->cap : 4096;
    while (cap < size) cap *= 2;
    uint8_t *p = realloc(m->p, cap);
    if (!p) return -ENOMEM;
    m->p = p;
    m->cap = cap;
    return 0;
}
static int m_write(const struct io_fs *io, void *fh, const void *buf, size_t n, uint64_t off)
{
    struct mem *m = fh;
    int rc = m_reserve(m, off + n);
    if (rc) return rc;
    if (off > m->n) memset(m->p + m->n, 0, off - m->n);
    memcpy(m->p + off, buf, n);
    if (off + n > m->n) m->n = off + n;
    return 0;
}
static int m_sync(const struct io_fs *io, void *fh) { return 0; }
static int m_truncate(const struct io_fs *io, void *fh, uint64_t size)
{
    struct mem *m = fh;
    int rc = m_reserve(m, size);
    if (rc) return rc;
    if (size > m->n) memset(m->p + m->n, 0, size - m->n);
    m->n = size;
    return 0;
}
static int m_stat(const struct io_fs *io, void *fh, struct io_stat *st)
{
    *st = (struct io_stat){ .size = ((const struct mem *)fh)->n };
    return 0;
}
static int m_rename(const struct io_fs *io, const char *from, const char *to) { return -EIO; }

static uint64_t rd64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}
static uint32_t rd32(const uint8_t *p) { return p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }
static void wr64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static void reseal(uint8_t *f, size_t n)
{
    if (n < KV_FILE_HDR_BYTES) return;
    /* version 2: the part table's checksum is inside the header's */
    uint32_t table = rd32(f + 192);
    if (f[10] >= 2 && n >= KV_FILE_RECORDS && table <= n - KV_FILE_RECORDS)
        wr64(f + 200, XXH64(f + KV_FILE_RECORDS, table, 0));
    wr64(f + 248, XXH64(f, 248, 0));
    uint64_t salt = rd64(f + 24);
    const size_t slots[2] = { KV_FILE_SLOT_A, KV_FILE_SLOT_B };
    for (int s = 0; s < 2; s++)
        if (slots[s] + KV_FILE_SLOT_BYTES <= n) wr64(f + slots[s] + 24, XXH64(f + slots[s], 24, salt));
    uint32_t rec = rd32(f + 180);
    uint64_t start = rd64(f + 16);
    if (rec <= KV_FILE_REC_EXTRA - 8 || rec > n || start > n) return;
    for (size_t off = start; off + rec <= n; off += rec) wr64(f + off + rec - 8, XXH64(f + off, rec - 8, salt));
}

/* A cache of the golden's geometry laid out as fuzz_kv_layouts[i]. */
static int layers_cache(size_t i, struct kv_cache **c, struct colibri_err *err)
{
    char name[64];
    snprintf(name, sizeof name, "%s", fuzz_kv_layouts[i % FUZZ_KV_N_LAYOUTS]);
    char *plus = strstr(name, "+key");
    if (plus) *plus = 0;
    struct kv_layer_spec spec[2];
    int rc = kv_layout_parse(name, KV_ROPE_DEFAULT, 2, spec, err);
    if (rc) return rc;
    if (plus) {
        spec[1].n_extra = 1;
        spec[1].extra[0] = (struct kv_part_spec){ KV_PART_INDEX_KEY, FUZZ_KV_KEY,
                                                  spec[1].tier == KV_TIER_F32 ? KV_TIER_F32 : KV_TIER_FP8 };
    }
    return kv_cache_new_layers(spec, 2, 32, 16, 8, c, err);
}

/* Opens f as a writer with a cache of the layout `mode` picks, then saves
 * what it restored. */
static void open_and_save(struct mem *m, const struct io_fs *io, uint8_t mode)
{
    struct kv_cache *c = NULL;
    struct colibri_err err = { 0 };
    unsigned pick = (mode >> FUZZ_KV_CACHE_SHIFT) & FUZZ_KV_CACHE_MASK;
    int rc = mode & FUZZ_KV_LAYERS ? layers_cache(pick, &c, &err)
                                   : kv_cache_new((enum kv_tier)(pick % KV_TIER_COUNT), KV_ROPE_DEFAULT, 2, 32, 16, 8, &c, &err);
    if (rc) abort(); /* the harness's own layouts must build */
    struct kv_file_hdr want;
    /* the identity tests/unit/persist_fixture.h gives the golden file */
    if (kv_file_hdr_for(c, 0x6d6f64656c31ull, "experts=stored dense=stored embed=stored", 0x73616c7431ull, &want,
                        &err)) {
        kv_cache_free(c);
        return;
    }
    int32_t tok[8];
    struct kv_file_report rep;
    struct kv_file *f = NULL;
    memset(&err, 0, sizeof err);
    if (kv_file_open(io, "fuzz.ckv", &want, c, tok, 8, &rep, &f, &err) == 0) {
        if (rep.restored > 8 || rep.restored > rep.kept || rep.kept > rep.published) abort();
        kv_file_save(f, c, tok, (int)rep.restored, &err);
        kv_file_close(f);
    } else if (!err.msg[0]) {
        abort();
    }
    kv_cache_free(c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    size_t n = size - 1;
    const uint8_t *in = data + 1;
    size_t gap = (data[0] & FUZZ_KV_PACKED) && n > FUZZ_KV_GAP_AT ? FUZZ_KV_GAP : 0;
    struct mem m = { calloc(1, n + gap ? n + gap : 1), n + gap, n + gap ? n + gap : 1 };
    if (!m.p) return 0;
    if (gap) {
        memcpy(m.p, in, FUZZ_KV_GAP_AT);
        memcpy(m.p + FUZZ_KV_GAP_AT + gap, in + FUZZ_KV_GAP_AT, n - FUZZ_KV_GAP_AT);
        n += gap;
    } else if (n) {
        memcpy(m.p, in, n);
    }
    if (data[0] & FUZZ_KV_RESEAL) reseal(m.p, n);
    const struct io_fs io = { .open = m_open, .close = m_close, .read = m_read, .write = m_write, .sync = m_sync,
                              .truncate = m_truncate, .stat = m_stat, .rename = m_rename, .ctx = &m };
    struct colibri_err err = { 0 };
    if (n >= KV_FILE_HDR_BYTES) {
        struct kv_file_hdr h;
        if (kv_file_hdr_decode(m.p, &h, &err) && !err.msg[0]) abort();
    }
    struct kv_file_verify v;
    memset(&err, 0, sizeof err);
    if (kv_file_verify(&io, "fuzz.ckv", &v, &err) == 0) {
        /* what the walk reports must fit the file */
        if (v.valid > v.published) abort();
        if (v.first_bad >= 0 && (uint64_t)v.first_bad != v.valid) abort();
        if (v.valid && v.hdr.records_offset + v.valid * (uint64_t)v.hdr.record_bytes > n) abort();
    } else if (!err.msg[0]) {
        abort();
    }
    if (data[0] & FUZZ_KV_WRITER) open_and_save(&m, &io, data[0]);
    free(m.p);
    return 0;
}
