/* quant/half.h - portable scalar f16 / bf16 <-> f32 conversions (bit
 * manipulation, no compiler extensions). Rounding is to nearest even; NaN
 * stays NaN (quiet), overflow goes to infinity. Pure inline functions. */
#ifndef COLIBRI_QUANT_HALF_H
#define COLIBRI_QUANT_HALF_H

#include <stdint.h>
#include <string.h>

static inline float quant_bits_f32(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
static inline uint32_t quant_f32_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }

static inline float quant_bf16_to_f32(uint16_t h) { return quant_bits_f32((uint32_t)h << 16); }

static inline uint16_t quant_f32_to_bf16(float f)
{
    uint32_t u = quant_f32_bits(f);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)((u >> 16) | 0x40);  /* quiet NaN */
    u += 0x7FFFu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

static inline float quant_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t e = (h >> 10) & 0x1Fu, m = h & 0x3FFu;
    if (e == 0x1F) return quant_bits_f32(sign | 0x7F800000u | (m << 13));
    if (e == 0) {
        /* zero or subnormal: m * 2^-24, exact in f32 */
        float v = (float)m * 0x1p-24f;
        return sign ? -v : v;
    }
    return quant_bits_f32(sign | ((e + 112u) << 23) | (m << 13));
}

static inline uint16_t quant_f32_to_f16(float f)
{
    uint32_t u = quant_f32_bits(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    u &= 0x7FFFFFFFu;
    if (u > 0x7F800000u) return sign | 0x7E00u;                   /* NaN */
    if (u >= 0x477FF000u) return sign | 0x7C00u;                  /* rounds to >= 65520: inf */
    int e = (int)(u >> 23) - 127;
    if (e >= -14) {                                               /* normal f16 */
        uint32_t t = ((uint32_t)(e + 15) << 23) | (u & 0x7FFFFFu);
        return sign | (uint16_t)((t + 0xFFFu + ((t >> 13) & 1u)) >> 13);
    }
    if (e < -25) return sign;                                     /* < 2^-25: rounds to 0 */
    /* subnormal f16 in units of 2^-24: m * 2^(e-23+24) = m >> (-1-e) */
    uint32_t m = (u & 0x7FFFFFu) | 0x800000u;
    unsigned s = (unsigned)(-1 - e);                              /* 14 .. 24 */
    return sign | (uint16_t)((m + (1u << (s - 1)) - 1u + ((m >> s) & 1u)) >> s);
}

#endif
