/* kv/kv_num.h - small number-format helpers shared by the kv codecs: bf16 and
 * fp16 conversions (round to nearest even), unaligned f32 load/store and an
 * LSB-first bit stream. Header-only, pure. Internal to kv/. */
#ifndef COLIBRI_KV_NUM_H
#define COLIBRI_KV_NUM_H

#include <math.h>
#include <stdint.h>
#include <string.h>

static inline uint32_t kv_f32_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline float kv_bits_f32(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

static inline float kv_load_f32(const uint8_t *p) { float f; memcpy(&f, p, 4); return f; }
static inline void kv_store_f32(uint8_t *p, float f) { memcpy(p, &f, 4); }

static inline uint16_t kv_f32_to_bf16(float f)
{
    uint32_t u = kv_f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);  /* quiet NaN */
    u += 0x7fffu + ((u >> 16) & 1);
    return (uint16_t)(u >> 16);
}
static inline float kv_bf16_to_f32(uint16_t h) { return kv_bits_f32((uint32_t)h << 16); }

/* IEEE half, round to nearest even, overflow to inf. */
static inline uint16_t kv_f32_to_f16(float f)
{
    uint32_t x = kv_f32_bits(f);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) return (uint16_t)(sign | 0x7e00u);
    if (ax >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);          /* >= 65520: inf */
    if (ax < 0x38800000u) {                                             /* subnormal half */
        float a = kv_bits_f32(ax);
        /* a * 2^24 rounded to integer (RNE via the FPU's default mode) */
        return (uint16_t)(sign | (uint32_t)lrintf(a * 16777216.0f));
    }
    uint32_t mant_odd = (ax >> 13) & 1;
    ax += 0xfffu + mant_odd;
    return (uint16_t)(sign | ((ax - 0x38000000u) >> 13));
}
static inline float kv_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t e = (h >> 10) & 0x1f, m = h & 0x3ffu;
    if (e == 0) {
        float v = (float)m * (1.0f / 16777216.0f);
        return sign ? -v : v;
    }
    if (e == 31) return kv_bits_f32(sign | 0x7f800000u | (m << 13));
    return kv_bits_f32(sign | ((e + 112) << 23) | (m << 13));
}

/* LSB-first bit stream: value v (nbits <= 8) at bit offset *pos. The buffer
 * must be zeroed before writing. */
static inline void kv_bits_put(uint8_t *buf, size_t *pos, unsigned v, int nbits)
{
    size_t p = *pos;
    uint32_t w = (uint32_t)v << (p & 7);
    buf[p >> 3] |= (uint8_t)w;
    if ((p & 7) + (size_t)nbits > 8) buf[(p >> 3) + 1] |= (uint8_t)(w >> 8);
    *pos = p + (size_t)nbits;
}
static inline unsigned kv_bits_get(const uint8_t *buf, size_t *pos, int nbits)
{
    size_t p = *pos;
    uint32_t w = buf[p >> 3];
    if ((p & 7) + (size_t)nbits > 8) w |= (uint32_t)buf[(p >> 3) + 1] << 8;
    *pos = p + (size_t)nbits;
    return (w >> (p & 7)) & ((1u << nbits) - 1);
}

#endif
