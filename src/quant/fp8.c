/* quant/fp8.c - float8 e4m3fn table decode and bit-exact RNE encode. */
#include "quant/fp8.h"

#include <math.h>
#include <string.h>

/* value(E, M) = (8 + M) * 2^(E - 10) for E >= 1, M * 2^-9 for E = 0.
 * Written as constant expressions so the table is built by the compiler. */
#define FP8_V(e, m) ((e) == 0 ? (float)(m) * 0x1p-9f \
                              : (float)(8 + (m)) * (float)(1 << (e)) * 0x1p-10f)
#define FP8_ROW(s, e) s FP8_V(e, 0), s FP8_V(e, 1), s FP8_V(e, 2), s FP8_V(e, 3), \
                      s FP8_V(e, 4), s FP8_V(e, 5), s FP8_V(e, 6), s FP8_V(e, 7)
/* E = 15, M = 7 is NaN in e4m3fn (no infinities). */
#define FP8_ROW15(s) s FP8_V(15, 0), s FP8_V(15, 1), s FP8_V(15, 2), s FP8_V(15, 3), \
                     s FP8_V(15, 4), s FP8_V(15, 5), s FP8_V(15, 6), s NAN
#define FP8_HALF(s) FP8_ROW(s, 0), FP8_ROW(s, 1), FP8_ROW(s, 2), FP8_ROW(s, 3),   \
                    FP8_ROW(s, 4), FP8_ROW(s, 5), FP8_ROW(s, 6), FP8_ROW(s, 7),   \
                    FP8_ROW(s, 8), FP8_ROW(s, 9), FP8_ROW(s, 10), FP8_ROW(s, 11), \
                    FP8_ROW(s, 12), FP8_ROW(s, 13), FP8_ROW(s, 14), FP8_ROW15(s)

const float quant_fp8_e4m3_table[256] = { FP8_HALF(+), FP8_HALF(-) };

/* Rounds the f32 bit pattern `u` (sign cleared) right by `s` bits, to nearest
 * with ties to even. s in [1, 31]. A carry out of the kept mantissa bits
 * lands in the exponent field, which is exactly the next binade. */
static inline uint32_t fp8_rne_shift(uint32_t u, unsigned s)
{
    uint32_t half_minus_1 = (1u << (s - 1)) - 1u;
    return (u + half_minus_1 + ((u >> s) & 1u)) >> s;
}

uint8_t quant_fp8_e4m3_encode(float x)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    uint8_t sign = (uint8_t)((u >> 24) & 0x80u);
    u &= 0x7FFFFFFFu;
    if (u > 0x7F800000u) return 0x00;                 /* NaN -> +0 */
    if (u > 0x43E00000u) return sign | 0x7E;          /* |x| > 448 (incl. inf) */
    int e = (int)(u >> 23) - 127;                     /* unbiased f32 exponent */
    if (e >= -6) {
        /* Normal e4m3: rebias the exponent (127 -> 7) and drop 20 mantissa
         * bits. |x| <= 448 cannot round past 0x7E. */
        uint32_t t = ((uint32_t)(e + 7) << 23) | (u & 0x7FFFFFu);
        return sign | (uint8_t)fp8_rne_shift(t, 20);
    }
    if (u < 0x00800000u) return sign;                 /* f32 zero/subnormal: < 2^-126 */
    /* Subnormal e4m3, in units of 2^-9: value = m * 2^(e-23) = m * 2^(e-14)
     * units, m the 24-bit significand. q = 8 is 2^-6, code 0x08: the carry
     * into the first normal binade is the same integer. */
    uint32_t m = (u & 0x7FFFFFu) | 0x800000u;
    unsigned s = (unsigned)(14 - e);                  /* >= 21 since e <= -7 */
    if (s > 31) return sign;                          /* < 2^-17: rounds to 0 */
    return sign | (uint8_t)fp8_rne_shift(m, s);
}

float quant_fp8_encode_row(const float *x, size_t n, uint8_t *q)
{
    float amax = 0.0f;
    for (size_t i = 0; i < n; i++) {
        float a = fabsf(x[i]);
        if (a > amax && a != INFINITY) amax = a;      /* NaN compares false */
    }
    if (!(amax >= QUANT_FP8_AMAX_MIN)) {
        memset(q, 0, n);
        return 0.0f;
    }
    float scale = amax / QUANT_FP8_E4M3_MAX;
    float inv = QUANT_FP8_E4M3_MAX / amax;
    for (size_t i = 0; i < n; i++) q[i] = quant_fp8_e4m3_encode(x[i] * inv);
    return scale;
}

void quant_fp8_decode_row(const uint8_t *q, size_t n, float scale, float *out)
{
    if (scale == 0.0f) {
        memset(out, 0, n * sizeof *out);
        return;
    }
    for (size_t i = 0; i < n; i++) out[i] = quant_fp8_e4m3_table[q[i]] * scale;
}
