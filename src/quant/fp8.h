/* quant/fp8.h - float8 e4m3fn (the "F8_E4M3" safetensors dtype) <-> f32.
 *
 * Contract:
 *  - Decoding is a lookup in a const 256-entry table (quant_fp8_e4m3_table),
 *    exact for every code: 0x00 = +0, 0x80 = -0, subnormals (E=0) are
 *    M/8 * 2^-6 (smallest 2^-9), max finite 0x7E = 448, 0x7F/0xFF = NaN.
 *  - Encoding (quant_fp8_e4m3_encode) is bit-exact round-to-nearest, ties to
 *    the even mantissa, subnormals included, a tie that carries into the next
 *    binade included. It saturates: every |x| > 448 (and +-inf) gives +-448
 *    (0x7E / 0xFE), never NaN. The sign of zero is kept (-0.0f -> 0x80).
 *    NaN encodes to 0x00 (+0): a NaN weight or activation is a bug upstream,
 *    and a zero keeps the damage local instead of poisoning every dot product.
 *  - Row helpers scale a row by one f32 scale = amax/448 (amax over the finite
 *    elements). A row whose amax is below QUANT_FP8_AMAX_MIN (all zeros, or
 *    tiny) gets scale 0 and all codes 0, and decodes to zeros.
 *  - Everything here is pure and thread-safe: no state, no allocation.
 */
#ifndef COLIBRI_QUANT_FP8_H
#define COLIBRI_QUANT_FP8_H

#include <stddef.h>
#include <stdint.h>

#define QUANT_FP8_E4M3_MAX 448.0f
/* Rows with amax below this are stored as scale 0 / codes 0 (decode to 0). */
#define QUANT_FP8_AMAX_MIN 1e-30f

/* code -> f32, exact. Index with the raw byte. */
extern const float quant_fp8_e4m3_table[256];

static inline float quant_fp8_e4m3_decode(uint8_t code)
{
    return quant_fp8_e4m3_table[code];
}

/* f32 -> code, RNE, saturating at +-448, NaN -> 0x00 (see the contract). */
uint8_t quant_fp8_e4m3_encode(float x);

/* Encodes x[0..n) as q[i] = encode(x[i] / scale) with scale = amax/448 and
 * returns the scale (0 for a zero/tiny row, whose codes are then all 0).
 * Infinite elements saturate to +-448 codes; NaN elements encode as 0. */
float quant_fp8_encode_row(const float *x, size_t n, uint8_t *q);

/* out[i] = decode(q[i]) * scale for i in [0, n). scale 0 gives zeros even for
 * NaN codes (a zero row never holds NaN codes: the encoder never emits them). */
void quant_fp8_decode_row(const uint8_t *q, size_t n, float scale, float *out);

#endif
