/* quant/bf16act.c - the driver of quant/bf16act.h: round the activations to
 * bf16 once, then hand row blocks and batch slices to the chosen kernel
 * (VDPBF16PS, or TDPBF16PS after packing each slice into B tiles), in
 * parallel over row blocks as quant_matmul does. */
#include "quant/bf16act.h"

#include <omp.h>
#include <stdlib.h>

#include "base/err.h"
#include "base/util.h"
#include "quant/amx.h"

/* bf16 activation bytes per slice of a batch (half of a 1 MiB L2). */
#define SLICE_BYTES (512u << 10)

int quant_bf16act_available(void)
{
#if defined(__x86_64__)
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512bf16");
#else
    return 0;
#endif
}

int quant_bf16act_kernel_available(enum quant_bf16act_kernel k)
{
    switch (k) {
    case QUANT_BF16ACT_BEST:
    case QUANT_BF16ACT_VDPBF16PS: return quant_bf16act_available();
    case QUANT_BF16ACT_AMX: return quant_bf16act_available() && quant_amx_available(QUANT_AMX_BF16);
    default: return 0;
    }
}

#if defined(__x86_64__)
static int run_vdpbf16ps(const struct qtensor *W, const uint16_t *xb, int n, int cols_pad, float *Y,
                         struct colibri_err *err)
{
    const int rows = W->rows, cols = W->cols;
    int jb = (int)(SLICE_BYTES / ((size_t)cols_pad * 2)) / 4 * 4;
    if (jb < 4) jb = 4;
    if (jb > n) jb = n;
    const int RB = QUANT_BF16ACT_ROWS, nblocks = (rows + RB - 1) / RB;
    int nt = omp_in_parallel() ? 1 : omp_get_max_threads();
    size_t per_thread = (size_t)RB * jb * 16;          /* floats of accumulators */
    float *scratch = base_xalloc((size_t)nt * per_thread * sizeof(float));
    if (!scratch)
        return base_err_set(err, COLIBRI_ENOMEM, "quant: cannot allocate the bf16 product's buffers for [%d, %d] x %d",
                       rows, cols, n);
    for (int s0 = 0; s0 < n; s0 += jb) {
        int nx = n - s0 < jb ? n - s0 : jb;
        int par = nt > 1 && nblocks > 1;
        #pragma omp parallel for schedule(static) num_threads(nt) if (par)
        for (int b = 0; b < nblocks; b++) {
            int r0 = b * RB, r1 = r0 + RB < rows ? r0 + RB : rows;
            float *sc = scratch + (size_t)(par ? omp_get_thread_num() : 0) * per_thread;
            quant_bf16act_rows_avx512(W->data, rows, cols, r0, r1, xb + (size_t)s0 * cols_pad, cols_pad,
                                      nx, Y + (size_t)s0 * rows, sc);
        }
    }
    free(scratch);
    return 0;
}

#if !defined(__clang__)
/* Batches of QUANT_BF16ACT_LANE_MIN or more on the lane slice: the
 * activations packed once, then blocks of QUANT_BF16ACT_LANE_ROWS rows in
 * parallel, each thread with its own panel. A thread whose scratch cannot
 * be allocated goes through the rows kernel (the same bits). */
static int run_lanes(const struct qtensor *W, const uint16_t *xb, int n, int cols_pad, float *Y,
                     struct colibri_err *err)
{
    const int rows = W->rows, cols = W->cols, ng = (n + 7) / 8, RB = QUANT_BF16ACT_LANE_ROWS;
    const int nblocks = (rows + RB - 1) / RB;
    const size_t per = (size_t)4 * cols_pad;     /* dwords per group of 8 */
    uint32_t *xl = base_xalloc((size_t)ng * per * sizeof *xl);
    if (!xl)
        return base_err_set(err, COLIBRI_ENOMEM, "quant: cannot allocate the bf16 product's buffers for [%d, %d] x %d",
                       rows, cols, n);
    int par = !omp_in_parallel() && omp_get_max_threads() > 1, failed = 0;
    #pragma omp parallel if (par) reduction(| : failed)
    {
        #pragma omp for schedule(static)
        for (int g = 0; g < ng; g++) quant_bf16act_lanes_pack(xb, n, cols_pad, g, xl + (size_t)g * per);
        void *scratch = aligned_alloc(64, (quant_bf16act_lanes_scratch(cols_pad) + 63) / 64 * 64);
        float *acc = scratch ? NULL : aligned_alloc(64, (size_t)QUANT_BF16ACT_ROWS * n * 16 * sizeof(float));
        #pragma omp for schedule(static)
        for (int b = 0; b < nblocks; b++) {
            int r0 = b * RB, r1 = r0 + RB < rows ? r0 + RB : rows;
            if (scratch) {
                quant_bf16act_lanes_avx512(W->data, rows, cols, cols_pad, r0, r1, xl, n, Y, scratch);
            } else if (acc) {
                for (int r = r0; r < r1; r += QUANT_BF16ACT_ROWS)
                    quant_bf16act_rows_avx512(W->data, rows, cols, r, r + QUANT_BF16ACT_ROWS < r1 ? r + QUANT_BF16ACT_ROWS : r1,
                                              xb, cols_pad, n, Y, acc);
            } else {
                failed = 1;
            }
        }
        free(scratch);
        free(acc);
    }
    free(xl);
    if (failed)
        return base_err_set(err, COLIBRI_ENOMEM, "quant: cannot allocate the bf16 product's buffers for [%d, %d] x %d",
                       rows, cols, n);
    return 0;
}
#endif

/* Tokens per slice on the AMX kernel: a multiple of 32 whose packed
 * activations for a 256-column block (32 KiB) stay in L1. */
#define AMX_SLICE 64

/* The activations are rounded and packed per slice, so the buffer stays
 * small whatever the batch. */
static int run_amx(const struct qtensor *W, const float *X, int n, int cols_pad, float *Y,
                   struct colibri_err *err)
{
    const int rows = W->rows, cols = W->cols, nblocks = (rows + 31) / 32;
    int jb = n < AMX_SLICE ? n : AMX_SLICE, jbp = (jb + 15) / 16 * 16;
    int nt = omp_in_parallel() ? 1 : omp_get_max_threads();
    if (nt > nblocks) nt = nblocks;
    uint16_t *panel = base_xalloc((size_t)jbp * cols_pad * sizeof *panel);
    float *sums = base_xalloc((size_t)nt * 32 * jbp * sizeof *sums);
    if (!panel || !sums) {
        free(panel);
        free(sums);
        return base_err_set(err, COLIBRI_ENOMEM, "quant: cannot allocate the bf16 product's buffers for [%d, %d] x %d",
                       rows, cols, n);
    }
    for (int s0 = 0; s0 < n; s0 += jb) {
        int nx = n - s0 < jb ? n - s0 : jb, nxp = (nx + 15) / 16 * 16;
        #pragma omp parallel num_threads(nt) if (nt > 1)
        {
            /* the threads pack the slice's token tiles, then (after the loop's
             * barrier) each runs a contiguous run of 32-row blocks */
            #pragma omp for schedule(static)
            for (int tt = 0; tt < nxp / 16; tt++)
                quant_bf16act_amx_pack(X + (size_t)(s0 + 16 * tt) * cols, cols, cols_pad,
                                       nx - 16 * tt < 16 ? nx - 16 * tt : 16, 16,
                                       panel + (size_t)tt * (cols_pad / 32) * QUANT_BF16ACT_AMX_TILE_ELEMS);
            int t = omp_get_thread_num(), nth = omp_get_num_threads();
            int b0 = (int)((long)nblocks * t / nth), b1 = (int)((long)nblocks * (t + 1) / nth);
            int r0 = b0 * 32, r1 = b1 * 32 < rows ? b1 * 32 : rows;
            if (r0 < r1)
                quant_bf16act_amx_rows(W->data, rows, cols, r0, r1, panel, cols_pad, nx, nxp, Y + (size_t)s0 * rows,
                                       sums + (size_t)t * 32 * jbp);
        }
    }
    free(panel);
    free(sums);
    return 0;
}
#endif

int quant_matmul_bf16act_kernel(const struct qtensor *W, const float *X, int n, float *Y,
                                enum quant_bf16act_kernel k, struct colibri_err *err)
{
    if (W->fmt != QUANT_BF16)
        return base_err_set(err, COLIBRI_EUNSUPPORTED, "quant: the bf16-activation product needs bf16 weights, "
                       "got %s [%d, %d]", quant_fmt_name(W->fmt), W->rows, W->cols);
    if (n <= 0) return base_err_set(err, COLIBRI_EINVAL, "quant: batch of %d activations", n);
    if (!quant_bf16act_available())
        return base_err_set(err, COLIBRI_EUNSUPPORTED, "quant: the bf16-activation product needs AVX-512 BF16 "
                       "(VDPBF16PS), which this CPU lacks");
    if (k == QUANT_BF16ACT_BEST) k = quant_amx_available(QUANT_AMX_BF16) ? QUANT_BF16ACT_AMX : QUANT_BF16ACT_VDPBF16PS;
    if (k == QUANT_BF16ACT_AMX && !quant_amx_available(QUANT_AMX_BF16))
        return base_err_set(err, COLIBRI_EUNSUPPORTED, "quant: the AMX bf16-activation kernel is not available: %s",
                       quant_amx_why_not(QUANT_AMX_BF16));
    if (k != QUANT_BF16ACT_AMX && k != QUANT_BF16ACT_VDPBF16PS)
        return base_err_set(err, COLIBRI_EINVAL, "quant: unknown bf16-activation kernel %d", (int)k);
#if defined(__x86_64__)
    const int cols = W->cols, cols_pad = (cols + 31) / 32 * 32;
    if (k == QUANT_BF16ACT_AMX) return run_amx(W, X, n, cols_pad, Y, err);
    uint16_t *xb = base_xalloc((size_t)n * cols_pad * sizeof *xb);
    if (!xb)
        return base_err_set(err, COLIBRI_ENOMEM, "quant: cannot allocate the bf16 product's buffers for [%d, %d] x %d",
                       W->rows, cols, n);
    for (int j = 0; j < n; j++)
        quant_bf16act_round_avx512(X + (size_t)j * cols, cols, cols_pad, xb + (size_t)j * cols_pad);
#if !defined(__clang__)
    int rc = n >= QUANT_BF16ACT_LANE_MIN ? run_lanes(W, xb, n, cols_pad, Y, err)
                                         : run_vdpbf16ps(W, xb, n, cols_pad, Y, err);
#else
    int rc = run_vdpbf16ps(W, xb, n, cols_pad, Y, err);
#endif
    free(xb);
    return rc;
#else
    return COLIBRI_EUNSUPPORTED;
#endif
}

int quant_matmul_bf16act(const struct qtensor *W, const float *X, int n, float *Y,
                         struct colibri_err *err)
{
    return quant_matmul_bf16act_kernel(W, X, n, Y, QUANT_BF16ACT_BEST, err);
}
