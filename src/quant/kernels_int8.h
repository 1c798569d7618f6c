/* quant/kernels_int8.h - internal: the block-exact int8 kernels of q8 / q4 /
 * q4gG on AVX-512 VNNI (kernels_int8_avx512.c), the int8 formats of the
 * avx512 level; the amx level takes their matvec and has its own prefill on
 * tiles with the same numerics, so both levels give the same bits.
 *
 * Numerics: the weights are taken as signed int8 (q8 bytes as stored, int4
 * nibbles minus 8), multiplied by the int8 activations of each 32-column
 * block exactly in int32, and each output is one f32 chain over the blocks
 * b = 0, 1, .. of the row (up to the last block holding a column):
 *     q8, q4   y = s_row * (.. fma(float(isum_1), xs_1, fma(float(isum_0), xs_0, 0)))
 *     q4gG     y = .. fma(float(isum_1), s_g(1) * xs_1, fma(float(isum_0), s_g(0) * xs_0, 0))
 * with isum_b the block's exact dot product, xs_b its activation scale and
 * s_g(b) the weight group scale covering it. An integer sum is the same in
 * any order, so every kernel computing isum_b its own way (VPDPBUSD lanes
 * reduced by a tree, VPDPBUSD with one row per lane, a tile product) and then
 * running that chain gives the same bits: a batched column equals the
 * matvec bit for bit.
 *
 * The kernels read a->q / xs and the block sums a->qsum (act_int8 and
 * act_qsum in their table entry); the slices need nothing packed.
 */
#ifndef COLIBRI_QUANT_KERNELS_INT8_H
#define COLIBRI_QUANT_KERNELS_INT8_H

#include "quant/kernels.h"

/* The group scale index of 32-column block b for group size G. */
static inline int quant_int8_group_of(int b, int G)
{
    return G == 32 ? b : G == 64 ? b / 2 : b / 4;
}

#define QUANT_INT8_DECLARE(name)                                                           \
    void quant_int8_rows_##name(const struct qtensor *W, int r0, int r1,                   \
                                const struct quant_act *a, int j0, int nj, float *Y);      \
    void quant_int8_slice_##name(const struct qtensor *W, int r0, int r1,                  \
                                 const struct quant_act *a, int j0, int nj, float *Y,      \
                                 void *scratch);
QUANT_INT8_DECLARE(q8)
QUANT_INT8_DECLARE(q4)
QUANT_INT8_DECLARE(q4g32)
QUANT_INT8_DECLARE(q4g64)
QUANT_INT8_DECLARE(q4g128)
#undef QUANT_INT8_DECLARE

#endif
