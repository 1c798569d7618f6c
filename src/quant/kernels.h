/* quant/kernels.h - internal: the interface between qtensor.c (the driver)
 * and the per-ISA kernel files. Not part of the quant API.
 *
 * A kernel computes Y[j][r] = row r of W · activation j for r in [r0, r1)
 * and j in [j0, j0+nj), nj <= QUANT_NB, writing Y[j * W->rows + r]. It reads
 * the activations from a struct quant_act prepared once per call of the
 * driver: always the f32 rows, plus, when the kernel asks for them, int8
 * copies quantized per block of 32 (act_int8) and packed copies for its
 * slice kernel (act_pack, act_tile16). Kernels are pure and re-entrant; the
 * driver splits rows among threads.
 *
 * Invariant: an output's bits do not depend on nj, j0, r0 or r1 (a kernel
 * that tiles rows or activations keeps each output's own sequence of
 * operations), so quant_matmul gives each column exactly what quant_matvec
 * gives it, however the batch and rows are split. test_quant checks it.
 */
#ifndef COLIBRI_QUANT_KERNELS_H
#define COLIBRI_QUANT_KERNELS_H

#include <assert.h>
#include <stdint.h>

#include "quant/qtensor.h"

/* Activations a kernel handles per call (register blocking in matmul). */
#define QUANT_NB 4
/* Elements per int8 activation block (one scale each). */
#define QUANT_ACT_BLOCK 32

struct quant_act {
    int n, cols;
    const float *x;         /* [n][cols] */
    /* int8 form, present when the kernel set asks for it: */
    int cols_pad;           /* cols rounded up to QUANT_INT4_BLOCK */
    int nblk;               /* cols_pad / QUANT_ACT_BLOCK */
    const int8_t *q;        /* [n][cols_pad], zero past cols */
    const float *xs;        /* [n][nblk] block scale: x ~ q * xs */
    const float *xsum;      /* [n][nblk] xs * sum of the block's q */
    const float *xsum_all;  /* [n] sum over the row of xsum */
    /* f32 copies packed by the kernel's act_pack, when it has one (and the
     * batch is at least QUANT_SLICE_MIN): group g (activations
     * QUANT_LANE_NR g ..) at xl + g * quant_act_pack_stride(cols). */
    const float *xl;
    /* int8 activations in AMX B-tile order, when the kernel asks for them
     * (act_tile16) and the batch takes the slice path: group g of
     * QUANT_TILE_NJ activations (QUANT_TILE_NJ g ..), 32-column block b:
     * qt + (g * nblk + b) * 512 holds 8 rows of 64 bytes, row kk holding
     * for each activation t of the group its bytes of columns 32b + 4kk ..
     * 32b + 4kk + 3 at 64 kk + 4 t; xst + (g * nblk + b) * 16 holds their
     * block scales xs. Activations past n read as zero. */
    const int8_t *qt;
    const float *xst;
    /* When the kernel asks for them (act_qsum), every activation: the
     * integer sum of each block's q, [n][nblk]. */
    const int32_t *qsum;
};
/* Activations per AMX B tile (qt / xst groups). */
#define QUANT_TILE_NJ 16

typedef void (*quant_rows_fn)(const struct qtensor *W, int r0, int r1,
                              const struct quant_act *a, int j0, int nj, float *Y);

/* Quantizes one activation row: q[cols_pad], xs[nblk], xsum[nblk], and,
 * unless qsum is NULL, each block's integer sum of q into qsum[nblk];
 * returns the sum of xsum. */
typedef float (*quant_act_prep_fn)(const float *x, int cols, int cols_pad,
                                   int8_t *q, float *xs, float *xsum, int32_t *qsum);

/* Prefill over a whole activation slice: Y[j][r] for r in [r0, r1) and j in
 * [j0, j0+nj), any nj >= QUANT_SLICE_MIN, r1 - r0 <= quant_slice_rows(cols),
 * with the same outputs, bit for bit, as rows() (the kernels.h invariant).
 * scratch: quant_slice_scratch_bytes(cols) bytes, 64-byte aligned, owned by
 * the calling thread for the call (a kernel widens its row block's weights
 * into it once and runs every activation of the slice over that panel). */
typedef void (*quant_slice_fn)(const struct qtensor *W, int r0, int r1,
                               const struct quant_act *a, int j0, int nj, float *Y,
                               void *scratch);

/* Packs activations QUANT_LANE_NR g .. of x[n][cols] into out (at most
 * quant_act_pack_stride(cols) floats), zeros past n. */
typedef void (*quant_act_pack_fn)(const float *x, int n, int cols, int g, float *out);

struct quant_kernel {
    quant_rows_fn rows;     /* NULL: no kernel at this level */
    int act_int8;           /* reads a->q / xs / xsum */
    quant_slice_fn slice;   /* NULL: prefill calls rows() per QUANT_NB activations */
    quant_act_pack_fn act_pack;     /* slice() reads a->xl packed by it */
    int act_qsum;           /* rows() and slice() read a->qsum */
    int act_tile16;         /* slice() reads a->qt / xst (quant_act_tile16)
                             * with j0 a multiple of QUANT_TILE_NJ */
};

/* The lane order. The one-row float loop (kernels_avx512.c) gives an output
 * 32 independent sums: lane l of acc0 (h = 0) or acc1 (h = 1) sums, in the
 * order of its steps k, the products of column quant_lane_col(cols, h, l, k)
 * (acc0 takes the first 16 columns of every 32-column step and the tail
 * (cols % 32), acc1 the second 16), and a fixed reduction tree adds the 32.
 * A kernel that keeps, for a fixed lane, one output per vector element (16
 * rows) can run those sums with broadcast activations. Lane (h, l) has
 * quant_lane_steps(cols, h) steps and starts at step quant_lane_first(cols,
 * h, l) of the 16 * ceil(cols / 16) steps of a row. QUANT_LANE_NR: the
 * activations stored together per step in a->xl. */
#define QUANT_LANE_NR 8
static inline int quant_lane_steps(int cols, int h)
{
    return h ? cols / 32 : cols / 32 + (cols % 32 + 15) / 16;
}
/* Lanes are stored in the order (0, i), (1, i), (0, i+8), (1, i+8) for
 * i = 0..7, the order in which the reduction tree pairs them, so a kernel
 * that runs them in that order reads one stream. */
static inline int quant_lane_first(int cols, int h, int l)
{
    int p = 4 * (l % 8) + 2 * (l / 8) + h;
    return (p + 1) / 2 * quant_lane_steps(cols, 0) + p / 2 * quant_lane_steps(cols, 1);
}
static inline int quant_lane_col(int cols, int h, int l, int k)
{
    int nfull = cols / 32;
    return h ? 32 * k + 16 + l : k < nfull ? 32 * k + l : 32 * nfull + 16 * (k - nfull) + l;
}
/* Activations 8g .. 8g+7 of x[n][cols] in the lane order: step s of a row
 * (lane (h, l), step k) holds at out[8 s + i] activation 8g + i's column
 * quant_lane_col(cols, h, l, k), zero past cols and past n. */
void quant_act_lanes(const float *x, int n, int cols, int g, float *out);
/* Packs group g of the int8 activations of a (a->q / xs) into qt
 * (nblk * 512 bytes) and xst (nblk * 16 floats), the order of a->qt. */
void quant_act_tile16(const struct quant_act *a, int g, int8_t *qt, float *xst);
/* Floats per packed group of QUANT_LANE_NR activations (a->xl). */
static inline size_t quant_act_pack_stride(int cols)
{
    return (size_t)QUANT_LANE_NR * ((size_t)(cols + 63) / 64 * 64);
}

/* Slices with fewer activations go through rows(): the panel's widening
 * costs more than it saves on a few activations. */
#define QUANT_SLICE_MIN 8
/* The f32 panel of a slice call's rows takes at most this much of the L2
 * (1.25 MiB per core on Ice Lake-SP, 1 MiB on Zen 4), the rest is left to
 * the activations passing through. */
#define QUANT_SLICE_PANEL_BYTES (640u << 10)
/* Rows per slice call: three vectors of 16 (the lane kernels' register
 * tile); kernels that keep rows per vector lane sub-block them to fit the
 * panel budget. */
static inline int quant_slice_rows(int cols)
{
    (void)cols;
    return 48;
}
/* Scratch of a slice call: the panel (rows x cols rounded up to 64, f32),
 * a row scale per 128 columns, and 288 KiB of resting accumulators. */
static inline size_t quant_slice_scratch_bytes(int cols)
{
    size_t rows = (size_t)quant_slice_rows(cols);
    return rows * ((size_t)(cols + 63) / 64 * 64) * sizeof(float) +
           (rows * ((size_t)(cols + 127) / 128) * sizeof(float) + 63) / 64 * 64 + (288u << 10);
}

/* Row `row` of W in f32, exactly the format's to_f32 (format.c) bit for bit,
 * NaN codes included (the absorbed decode dequantizes kv_b rows per token
 * with it when no f32 copy is kept). */
typedef void (*quant_dequant_fn)(const struct qtensor *W, int row, float *out);

struct quant_isa_table {
    struct quant_kernel k[QUANT_FMT_COUNT];
    quant_act_prep_fn act_prep;     /* NULL: use the reference's */
    quant_dequant_fn dequant[QUANT_FMT_COUNT];  /* NULL: the next lower level's, at the bottom to_f32 */
};

extern const struct quant_isa_table quant_isa_ref;
#if defined(__x86_64__)
extern const struct quant_isa_table quant_isa_avx2;
extern const struct quant_isa_table quant_isa_avx512;
extern const struct quant_isa_table quant_isa_avx512vbmi;
extern const struct quant_isa_table quant_isa_amx;
#endif
#if defined(__aarch64__)
extern const struct quant_isa_table quant_isa_neon;
#endif

/* The reference activation quantizer (round to nearest even, scale
 * amax/127, blocks with amax 0 get scale 0). */
float quant_act_prep_ref(const float *x, int cols, int cols_pad,
                         int8_t *q, float *xs, float *xsum, int32_t *qsum);

/* The table for a level, NULL if unavailable. Filled once (dispatch.c). */
const struct quant_isa_table *quant_isa_table(enum quant_isa isa);

/* int4 helpers: the nibble of element `col` in a row (layout in format.h). */
static inline int quant_int4_get(const uint8_t *row, int col)
{
    uint8_t b = row[(col / QUANT_INT4_BLOCK) * (QUANT_INT4_BLOCK / 2) + (col % (QUANT_INT4_BLOCK / 2))];
    return ((col % QUANT_INT4_BLOCK) < QUANT_INT4_BLOCK / 2 ? (b & 0xF) : (b >> 4)) - 8;
}

#endif
