/* quant/bf16act.h - an opt-in product for bf16 weights that also rounds the
 * activations to bf16, so the dot products run on bf16 instructions: AMX
 * TDPBF16PS tiles where this process may use them (quant/amx.h), else
 * VDPBF16PS (AVX-512 BF16), which does twice the multiply-adds per
 * instruction of the f32 FMA path that quant_matmul takes for bf16 weights.
 * It is not the default because the numbers differ: each activation is
 * rounded to bf16 (to nearest even, a relative error of at most 2^-9), and
 * both instructions flush denormal inputs and results to zero. Bound against
 * the exact product of the weights with the f32 activations, per output,
 * S = sum_j |w_j x_j| (denormal activations read as zero):
 *     2^-8 * S  +  d * 2^-24 * S  (+ denormal flushes)
 * where d is the length of the output's chain of f32 additions (each rounds
 * by at most 2^-24; the products of two bf16 are exact in f32), which
 * depends on the kernel and cols:
 *   VDPBF16PS: one f32 lane per output and column residue takes 2 products
 *     per 32 columns in column order, then 16 lanes are summed in 4 levels:
 *     d = 2 * ceil(cols / 32) + 4 (136 at cols = 2100, 452 at 7168);
 *   TDPBF16PS: per chunk of QUANT_BF16ACT_AMX_CHUNK = 128 columns, one C
 *     element starts at zero and takes its 128 products in column order
 *     (if the unit rounds after each; fewer roundings only lower it); the
 *     chunk sums are added in column order:
 *     d = 128 + ceil(cols / 128) (145 at cols = 2100, 184 at 7168).
 * (The 2^-8 covers the activation rounding's 2^-9 and, with room to spare,
 * the second-order terms.)
 * Each output's operations do not depend on the batch or its split, so a
 * column of a batch equals the same product with n = 1, bit for bit, for
 * either kernel; n = 1 takes the same kernel as a batch.
 * Parallelism follows quant_matmul (OpenMP over row blocks, serial when
 * called inside a parallel region). */
#ifndef COLIBRI_QUANT_BF16ACT_H
#define COLIBRI_QUANT_BF16ACT_H

#include <stdint.h>

#include "colibri.h"
#include "quant/qtensor.h"

/* 1 if this machine can run quant_matmul_bf16act (AVX-512 F/BW + BF16). */
int quant_bf16act_available(void);

/* Y[n][rows] = bf16(X)[n][cols] · Wᵀ for a bf16 W, on the default kernel
 * (QUANT_BF16ACT_BEST). COLIBRI_EUNSUPPORTED for another format or a CPU
 * without AVX-512 BF16 (the message says which); COLIBRI_EINVAL for n <= 0;
 * COLIBRI_ENOMEM (Y untouched). */
int quant_matmul_bf16act(const struct qtensor *W, const float *X, int n, float *Y,
                         struct colibri_err *err);

/* The kernels, for tests and benchmarks to pick one. */
enum quant_bf16act_kernel {
    QUANT_BF16ACT_BEST,         /* AMX if available, else VDPBF16PS */
    QUANT_BF16ACT_VDPBF16PS,    /* AVX-512 BF16 */
    QUANT_BF16ACT_AMX,          /* TDPBF16PS; needs quant_amx_available(QUANT_AMX_BF16) too */
};

/* 1 if quant_matmul_bf16act_kernel can run kernel k here. */
int quant_bf16act_kernel_available(enum quant_bf16act_kernel k);

/* quant_matmul_bf16act on kernel k; COLIBRI_EUNSUPPORTED (with the reason)
 * where k is not available. */
int quant_matmul_bf16act_kernel(const struct qtensor *W, const float *X, int n, float *Y,
                                enum quant_bf16act_kernel k, struct colibri_err *err);

/* The kernel (bf16act_avx512.c), for bf16act.c only: rows [r0, r1) of the
 * bf16 matrix Wd ([rows][cols]) times the nx bf16 activations xb
 * ([nx][cols_pad], cols_pad = cols rounded up to 32, zeros past cols) into
 * Y[j * rows + r]. r1 - r0 <= QUANT_BF16ACT_ROWS; scratch holds
 * QUANT_BF16ACT_ROWS * nx * 16 floats, 64-byte aligned (the accumulators
 * of output (r, j) rest at vector (r - r0) * nx + j between column blocks). */
#define QUANT_BF16ACT_ROWS 16
/* out[cols_pad] = x[cols] rounded to bf16 (nearest even, denormals to zero),
 * zeros past cols; cols_pad a multiple of 32. */
void quant_bf16act_round_avx512(const float *x, int cols, int cols_pad, uint16_t *out);
void quant_bf16act_rows_avx512(const uint16_t *Wd, int rows, int cols, int r0, int r1,
                               const uint16_t *xb, int cols_pad, int nx, float *Y, float *scratch);
/* The lane slice of the same kernel (bf16act_avx512.c), for batches of
 * QUANT_BF16ACT_LANE_MIN or more in GCC builds (it adds each output's 16
 * lane sums in the order of GCC's _mm512_reduce_add_ps, which the rows
 * kernel uses): the same bits as quant_bf16act_rows_avx512. The activations
 * go in groups of 8 (quant_bf16act_lanes_pack: group g into out, 4 * cols_pad
 * dwords, zeros past n); a call takes rows [r0, r1), at most
 * QUANT_BF16ACT_LANE_ROWS, and every activation, with
 * quant_bf16act_lanes_scratch(cols_pad) bytes of scratch, 64-byte aligned. */
/* Below 32 the panel's transpose costs what the wider tile saves (Zen 5,
 * 2048 x 7168, 1 thread: n = 16 134-140 GFLOP/s against 141-145 on the
 * rows kernel, n = 32 158-178 against 159-180, n = 64 195-279 against
 * 160-233). */
#define QUANT_BF16ACT_LANE_MIN 32
#define QUANT_BF16ACT_LANE_ROWS 48
void quant_bf16act_lanes_pack(const uint16_t *xb, int n, int cols_pad, int g, uint32_t *out);
size_t quant_bf16act_lanes_scratch(int cols_pad);
void quant_bf16act_lanes_avx512(const uint16_t *Wd, int rows, int cols, int cols_pad, int r0, int r1,
                                const uint32_t *xl, int n, float *Y, void *scratch);


/* The AMX kernel (bf16act_amx_avx512.c), for bf16act.c only. Columns per
 * accumulation chunk (the bound above); a multiple of 32 dividing the
 * kernel's column block (256). Measured, 1 thread, rounds interleaved:
 * 128 ran prefill (n = 512, W 2048 x 7168) at 835 GFLOP/s and decode
 * (W 32768 x 7168) at 15.7 GB/s; 256 at 1005 GFLOP/s but 14.5 GB/s, below
 * the VDPBF16PS kernel's 15.2; each chunk end drains the tile unit and
 * costs 4 tile stores and 64 vector adds per 2 x 2 tiles. Decode decides. */
#define QUANT_BF16ACT_AMX_CHUNK 128
/* bf16 elements per packed B tile (16 rows x 32). */
#define QUANT_BF16ACT_AMX_TILE_ELEMS 512
/* panel = the nx activations X ([nx][cols] f32), rounded to bf16 as
 * quant_bf16act_round_avx512 does, as TDPBF16PS B tiles: per 16 tokens
 * (nxp, a multiple of 16, >= nx; tokens past nx and columns past cols zero)
 * and per 32 columns one 16 x 16 tile of column pairs (row k2: pair k2 of
 * each token), tiles [token tile][column step], 1 KiB each; panel 64-byte
 * aligned. */
void quant_bf16act_amx_pack(const float *X, int cols, int cols_pad, int nx, int nxp, uint16_t *panel);
/* Rows [r_begin, r_end) (r_begin a multiple of 32; r_end too, or = rows)
 * times the packed activations into Y[t * rows + r] for t < nx; sums holds
 * 32 * nxp floats. Loads its own tile configuration and releases it. */
void quant_bf16act_amx_rows(const uint16_t *Wd, int rows, int cols, int r_begin, int r_end, const uint16_t *panel,
                            int cols_pad, int nx, int nxp, float *Y, float *sums);

#endif
