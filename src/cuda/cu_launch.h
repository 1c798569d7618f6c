/* cuda/cu_launch.h - the kernel launchers (kernels.cu, attn.cu), callable from
 * C. Every pointer argument is device memory; every launcher is asynchronous
 * on `stream` (a cudaStream_t, NULL for the default stream) and returns 0 or
 * the cudaError_t of the launch (the caller turns it into a colibri error,
 * backend_cuda.c). Shapes are checked by the caller; the launchers only
 * refuse what their launch geometry cannot take (returned as
 * cudaErrorInvalidValue, 1). */
#ifndef COLIBRI_CUDA_CU_LAUNCH_H
#define COLIBRI_CUDA_CU_LAUNCH_H

#include <stddef.h>
#include <stdint.h>

#include "cuda/cu_common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Y[j * rows + r] = row r of W . X[j * cols ..] for j < n: one warp per row,
 * CU_NB activations per pass over the row (quant/kernels.h's product). */
int cu_launch_matmul(const struct cu_wmat *W, const float *X, int n, float *Y, void *stream);

/* The absorbed MLA decode's per-head products with kv_b [H*(dn+dv), r]
 * (model/mla.c attend_absorbed): qa[h][j] = sum_{i<dn} kv_b[h*(dn+dv)+i][j]
 * q[h*(dn+dr)+i] with qpe[h][e] = q[h*(dn+dr)+dn+e] (qpe may be NULL when
 * dr == 0); out[h*dv+k] = kv_b[h*(dn+dv)+dn+k] . lat[h*r ..]. */
int cu_launch_absorb_q(const struct cu_wmat *W, int H, int dn, int dv, int dr, const float *q, float *qa,
                       float *qpe, void *stream);
int cu_launch_absorb_out(const struct cu_wmat *W, int H, int dn, int dv, const float *lat, float *out,
                         void *stream);

/* model_rmsnorm: n rows of width d; y may equal x. */
int cu_launch_rmsnorm(float *y, const float *x, const float *weight, int n, int d, float eps, void *stream);

/* model_rope_apply on n_vec vectors x + v*ld of dr values (dr even), vector v
 * at position pos[v]; inv_freq[dr/2], factor = rope_attention_factor. */
int cu_launch_rope(float *x, int n_vec, int dr, long long ld, const int32_t *pos, const float *inv_freq,
                   float factor, void *stream);

/* g[i] = silu(g[i]) * u[i] for i < n (model/mlp.c). */
int cu_launch_swiglu(float *g, const float *u, long long n, void *stream);

/* y[i] += alpha * x[i] for i < n. */
int cu_launch_axpy(float *y, const float *x, float alpha, long long n, void *stream);

/* Absorbed-MLA decode attention (kv/attend.h's contract) over rows 0..T-1 of
 * L: q_lat [H][r], q_rope [H][dr] (NULL when dr == 0), out [H][r]. The work
 * is split into n_chunks ranges of positions (1 <= n_chunks <= T) per group of
 * CU_ATTN_HG heads, each with its own online softmax, then merged per head;
 * ws holds cu_attn_ws_bytes(). max_smem is the device's opt-in shared memory
 * per block (the kernel needs cu_attn_smem_bytes()). */
size_t cu_attn_ws_bytes(int H, int r, int dr, int n_chunks);
size_t cu_attn_smem_bytes(int r, int dr);
int cu_launch_attend(const struct cu_kv_layer *L, int T, int H, const float *q_lat, const float *q_rope,
                     float scale, float *out, void *ws, int n_chunks, int max_smem, void *stream);

#ifdef __cplusplus
}
#endif

#endif
