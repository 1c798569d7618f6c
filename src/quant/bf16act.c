/* quant/bf16act.c - the driver of quant/bf16act.h: round the activations to
 * bf16 once, then hand row blocks and batch slices to the kernel, in
 * parallel over row blocks as quant_matmul does. */
#include "quant/bf16act.h"

#include <omp.h>
#include <stdlib.h>

#include "base/err.h"
#include "base/util.h"

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

int quant_matmul_bf16act(const struct qtensor *W, const float *X, int n, float *Y,
                         struct colibri_err *err)
{
    if (W->fmt != QUANT_BF16)
        return base_err_set(err, COLIBRI_EUNSUPPORTED, "quant: the bf16-activation product needs bf16 weights, "
                       "got %s [%d, %d]", quant_fmt_name(W->fmt), W->rows, W->cols);
    if (n <= 0) return base_err_set(err, COLIBRI_EINVAL, "quant: batch of %d activations", n);
    if (!quant_bf16act_available())
        return base_err_set(err, COLIBRI_EUNSUPPORTED, "quant: the bf16-activation product needs AVX-512 BF16 "
                       "(VDPBF16PS), which this CPU lacks");
#if defined(__x86_64__)
    const int rows = W->rows, cols = W->cols, cols_pad = (cols + 31) / 32 * 32;
    int jb = (int)(SLICE_BYTES / ((size_t)cols_pad * 2)) / 4 * 4;
    if (jb < 4) jb = 4;
    if (jb > n) jb = n;
    const int RB = QUANT_BF16ACT_ROWS, nblocks = (rows + RB - 1) / RB;
    int nt = omp_in_parallel() ? 1 : omp_get_max_threads();
    size_t per_thread = (size_t)RB * jb * 16;          /* floats of accumulators */
    uint16_t *xb = base_xalloc((size_t)n * cols_pad * sizeof *xb);
    float *scratch = base_xalloc((size_t)nt * per_thread * sizeof(float));
    if (!xb || !scratch) {
        free(xb);
        free(scratch);
        return base_err_set(err, COLIBRI_ENOMEM, "quant: cannot allocate the bf16 product's buffers for [%d, %d] x %d",
                       rows, cols, n);
    }
    for (int j = 0; j < n; j++)
        quant_bf16act_round_avx512(X + (size_t)j * cols, cols, cols_pad, xb + (size_t)j * cols_pad);
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
    free(xb);
    return 0;
#else
    return COLIBRI_EUNSUPPORTED;
#endif
}
