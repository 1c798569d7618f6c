/* libFuzzer harness: KV files (kv_file_hdr_decode, kv_file_verify: header,
 * count slots, record walk) read through an in-memory kv_io.
 * First input byte: bit 0 set - "reseal": before reading, the harness
 * recomputes the header checksum, both count slots' checksums and every
 * whole record's checksum from the (mutated) bytes, so mutations get past
 * the checksums and reach the field checks and the record paths; clear -
 * the bytes are read as they are. Layout: docs/FORMATS.md "KV files". */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "kv/persist.h"

struct mem { const uint8_t *p; size_t n; };

static int m_open(const struct kv_io *io, const char *path, int flags, void **fh)
{
    if (flags & KV_IO_WRITE) return -EROFS;
    *fh = io->ctx;
    return 0;
}
static int m_close(const struct kv_io *io, void *fh) { return 0; }
static int m_read(const struct kv_io *io, void *fh, void *buf, size_t n, uint64_t off, size_t *got)
{
    const struct mem *m = fh;
    size_t k = off >= m->n ? 0 : m->n - off < n ? m->n - off : n;
    if (k) memcpy(buf, m->p + off, k);
    *got = k;
    return 0;
}
static int m_write(const struct kv_io *io, void *fh, const void *buf, size_t n, uint64_t off) { return -EROFS; }
static int m_sync(const struct kv_io *io, void *fh) { return -EROFS; }
static int m_truncate(const struct kv_io *io, void *fh, uint64_t size) { return -EROFS; }
static int m_size(const struct kv_io *io, void *fh, uint64_t *size)
{
    *size = ((const struct mem *)fh)->n;
    return 0;
}
static int m_rename(const struct kv_io *io, const char *from, const char *to) { return -EROFS; }

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
    wr64(f + 248, XXH64(f, 248, 0));
    uint64_t salt = rd64(f + 24);
    const size_t slots[2] = { KV_FILE_SLOT_A, KV_FILE_SLOT_B };
    for (int s = 0; s < 2; s++)
        if (slots[s] + KV_FILE_SLOT_BYTES <= n) wr64(f + slots[s] + 24, XXH64(f + slots[s], 24, salt));
    uint32_t rec = rd32(f + 180);
    if (rec <= KV_FILE_REC_EXTRA - 8 || rec > n) return;
    for (size_t off = KV_FILE_RECORDS; off + rec <= n; off += rec) wr64(f + off + rec - 8, XXH64(f + off, rec - 8, salt));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    size_t n = size - 1;
    uint8_t *f = malloc(n ? n : 1);
    if (!f) return 0;
    memcpy(f, data + 1, n);
    if (data[0] & 1) reseal(f, n);
    struct mem m = { f, n };
    const struct kv_io io = { m_open, m_close, m_read, m_write, m_sync, m_truncate, m_size, m_rename, &m };
    struct colibri_err err = { 0 };
    if (n >= KV_FILE_HDR_BYTES) {
        struct kv_file_hdr h;
        if (kv_file_hdr_decode(f, &h, &err) && !err.msg[0]) abort();
    }
    struct kv_file_verify v;
    memset(&err, 0, sizeof err);
    if (kv_file_verify(&io, "fuzz.ckv", &v, &err) == 0) {
        /* what the walk reports must fit the file */
        if (v.valid > v.published) abort();
        if (v.first_bad >= 0 && (uint64_t)v.first_bad != v.valid) abort();
        if (v.valid && KV_FILE_RECORDS + v.valid * (uint64_t)v.hdr.record_bytes > n) abort();
    } else if (!err.msg[0]) {
        abort();
    }
    free(f);
    return 0;
}
