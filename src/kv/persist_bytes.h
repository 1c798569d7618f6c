/* kv/persist_bytes.h - little-endian field access shared by the KV file code
 * (persist.c, persist_hdr.c). Internal to kv/. */
#ifndef COLIBRI_KV_PERSIST_BYTES_H
#define COLIBRI_KV_PERSIST_BYTES_H

#include <stddef.h>
#include <stdint.h>

#include "colibri.h"
#include "io/file.h"

/* The count slots of every KV file version (kv/persist.c, docs/FORMATS.md):
 * a slot's 32 bytes, and the published count of a file (the valid slot with
 * the larger seq; COLIBRI_EFORMAT when neither is valid). */
void kv_slot_encode(uint8_t out[32], uint64_t seq, uint64_t count, uint64_t salt);
int  kv_read_slots(const struct io_fs *io, void *fh, const char *path, uint64_t salt, uint64_t *seq, uint64_t *count,
                   int *slot, struct colibri_err *err);

static inline void put16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); }
static inline void put32(uint8_t *p, uint32_t v) { for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> 8 * i); }
static inline void put64(uint8_t *p, uint64_t v) { for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> 8 * i); }
static inline uint16_t get16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static inline uint32_t get32(const uint8_t *p)
{
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--) v = v << 8 | p[i];
    return v;
}
static inline uint64_t get64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

static inline int all_zero(const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i]) return 0;
    return 1;
}

#endif
