/* quant/mxfp4.h - the two element types of OCP MXFP4 (the "mxfp4" weight
 * format, quant/format.h): e2m1 codes and e8m0 block scales.
 *
 * Contract:
 *  - An e2m1 code is a nibble s e1 e0 m: magnitudes 0, 0.5, 1, 1.5, 2, 3, 4, 6
 *    for codes 0..7, bit 3 the sign (0x8 is -0). Twice a value is an integer
 *    in [-12, 12] (quant_e2m1_twice), which is what the integer kernels use.
 *  - An e8m0 byte e is the scale 2^(e - 127); 0xFF is NaN. quant_e8m0_half
 *    gives half of it, 2^(e - 128), exactly in f32 (subnormal for e <= 1), so
 *    a weight is exactly quant_e2m1_twice[code] * quant_e8m0_half(e).
 *  - Encoding (quant_mxfp4_encode_block) follows the OCP MX v1.0 rule: the
 *    block exponent is floor(log2(amax)) - 2 (2 = e2m1's largest exponent),
 *    clamped to the e8m0 range; each value divided by the scale is rounded to
 *    the nearest e2m1, ties to the even code, saturating at +-6, keeping the
 *    sign of zero. An all-zero block gets e = 0 and +0 codes.
 *  - Pure, no state.
 */
#ifndef COLIBRI_QUANT_MXFP4_H
#define COLIBRI_QUANT_MXFP4_H

#include <math.h>
#include <stdint.h>

#include "quant/half.h"

/* Elements per e8m0 scale. */
#define QUANT_MX_BLOCK 32

/* Twice the e2m1 value of each code. */
static const int8_t quant_e2m1_twice[16] = { 0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12 };
/* The same as f32, -0 for code 0x8. */
static const float quant_e2m1_twice_f32[16] = { 0.0f, 1.0f, 2.0f, 3.0f, 4.0f, 6.0f, 8.0f, 12.0f,
                                                -0.0f, -1.0f, -2.0f, -3.0f, -4.0f, -6.0f, -8.0f, -12.0f };

/* 2^(e - 128) in f32; NaN for e = 0xFF. */
static inline float quant_e8m0_half(uint8_t e)
{
    if (e == 0xFF) return quant_bits_f32(0x7FC00000u);
    return quant_bits_f32(e >= 2 ? (uint32_t)(e - 1) << 23 : 0x00400000u >> (1 - e));
}

/* The e2m1 code of v (already divided by the block scale), RNE, saturating. */
static inline uint8_t quant_e2m1_encode(float v)
{
    float a = fabsf(v);
    uint8_t m = a <= 0.25f ? 0 : a < 0.75f ? 1 : a <= 1.25f ? 2 : a < 1.75f ? 3
              : a <= 2.5f ? 4 : a < 3.5f ? 5 : a <= 5.0f ? 6 : 7;
    return (uint8_t)(m | (signbit(v) ? 8 : 0));
}

/* Encodes w[0..n) (n <= 32) into n e2m1 codes (one per byte of codes[]) and
 * returns the block's e8m0 byte. */
static inline uint8_t quant_mxfp4_encode_block(const float *w, int n, uint8_t *codes)
{
    float amax = 0.0f;
    for (int i = 0; i < n; i++) amax = fmaxf(amax, fabsf(w[i]));
    int e = 0;
    if (amax > 0.0f) {
        int ex;
        (void)frexpf(amax, &ex);            /* amax = m 2^ex, m in [0.5, 1) */
        e = ex - 1 - 2 + 127;
        e = e < 0 ? 0 : e > 254 ? 254 : e;
    }
    for (int i = 0; i < n; i++) codes[i] = quant_e2m1_encode(ldexpf(w[i], 127 - e));
    return (uint8_t)e;
}

#endif
