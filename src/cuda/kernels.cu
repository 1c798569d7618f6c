/* cuda/kernels.cu - the weight product and the elementwise kernels of the
 * decode path: matvec/matmul for every stored format, kv_b's two per-head
 * products of the absorbed attention, RMSNorm, RoPE, SwiGLU.
 * The arithmetic is cuda/cu_common.h's (shared with the CPU replay in
 * tests/unit/test_cuda_host.c); these kernels only map it onto threads.
 * Plain and checkable rather than clever: one warp per output row reading
 * it as coalesced 4-byte words, a shuffle sum, no shared memory. */
#include <cuda_runtime.h>

#include "cuda/cu_launch.h"

#define MV_WARPS 8    /* rows per block of the product */
#define MV_UNROLL 8   /* 4-byte words loaded by a lane before it uses them */

/* Row r of W times nj <= CU_NB activations Xj + j*W.cols, summed over the
 * warp: every lane gets acc[j]. The body of both products below. */
template <int FMT>
static __device__ void warp_row_products(const struct cu_wmat &W, int r, const float *Xj, int nj, int vec,
                                         float *acc)
{
    const int lane = threadIdx.x & 31;
    for (int j = 0; j < CU_NB; j++) acc[j] = 0.0f;
    if (vec) {
        /* MV_UNROLL words in flight per lane; each lane still takes its
         * words in the order k = lane, lane + 32, ... */
        const uint32_t *row32 = (const uint32_t *)(W.data + (long long)r * W.row_bytes);
        const int nch = cu_w_nchunks(&W);
        for (int k0 = lane; k0 < nch; k0 += 32 * MV_UNROLL) {
            uint32_t bits[MV_UNROLL];
            for (int q = 0; q < MV_UNROLL; q++) bits[q] = k0 + 32 * q < nch ? __ldg(row32 + k0 + 32 * q) : 0u;
            for (int q = 0; q < MV_UNROLL; q++)
                if (k0 + 32 * q < nch) cu_matvec_chunk(&W, FMT, r, k0 + 32 * q, bits[q], Xj, W.cols, nj, acc);
        }
    } else {
        cu_matvec_lane_elem(&W, FMT, r, lane, Xj, W.cols, nj, acc);
    }
    for (int j = 0; j < CU_NB; j++)
        for (int off = 16; off >= 1; off >>= 1) acc[j] += __shfl_xor_sync(0xFFFFFFFFu, acc[j], off);
}

template <int FMT>
static __global__ void __launch_bounds__(MV_WARPS * 32)
k_matmul(const __grid_constant__ struct cu_wmat W, const float *__restrict__ X, int n, float *__restrict__ Y, int vec)
{
    const int r = blockIdx.x * MV_WARPS + (threadIdx.x >> 5);
    if (r >= W.rows) return;   /* warp-uniform: the whole warp leaves */
    for (int j0 = 0; j0 < n; j0 += CU_NB) {
        const int nj = n - j0 < CU_NB ? n - j0 : CU_NB;
        float acc[CU_NB];
        warp_row_products<FMT>(W, r, X + (long long)j0 * W.cols, nj, vec, acc);
        if ((threadIdx.x & 31) == 0)
            for (int j = 0; j < nj; j++) Y[(long long)(j0 + j) * W.rows + r] = acc[j];
    }
}

/* W_UV per head (model/mla.c attend_absorbed): out[h * dv + k] = row
 * h*(dn+dv) + dn + k of kv_b . lat[h * r ..]; one warp per output. */
template <int FMT>
static __global__ void __launch_bounds__(MV_WARPS * 32)
k_absorb_out(const __grid_constant__ struct cu_wmat W, int H, int dn, int dv, const float *__restrict__ lat,
             float *__restrict__ out, int vec)
{
    const int o = blockIdx.x * MV_WARPS + (threadIdx.x >> 5);
    if (o >= H * dv) return;   /* warp-uniform */
    const int h = o / dv, k = o % dv;
    float acc[CU_NB];
    warp_row_products<FMT>(W, h * (dn + dv) + dn + k, lat + (long long)h * W.cols, 1, vec, acc);
    if ((threadIdx.x & 31) == 0) out[o] = acc[0];
}

/* W_UK^T per head: qa[h * r + j] = sum over i < dn of kv_b[h*(dn+dv) + i][j]
 * * q[h * (dn+dr) + i], in i order as model/mla.c sums; and the RoPE part
 * copied: qpe[h * dr + e] = q[h * (dn+dr) + dn + e]. One thread per output. */
static __global__ void k_absorb_q(const __grid_constant__ struct cu_wmat W, int H, int dn, int dv, int dr,
                                  const float *__restrict__ q, float *__restrict__ qa, float *__restrict__ qpe)
{
    const long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x, nqa = (long long)H * W.cols;
    if (idx < nqa) {
        const int h = (int)(idx / W.cols), j = (int)(idx % W.cols);
        const float *qh = q + (long long)h * (dn + dr);
        float a = 0.0f;
        for (int i = 0; i < dn; i++) a += qh[i] * cu_w_elem(&W, W.fmt, h * (dn + dv) + i, j);
        qa[idx] = a;
    } else if (idx < nqa + (long long)H * dr) {
        const long long k = idx - nqa;
        const int h = (int)(k / dr), e = (int)(k % dr);
        qpe[k] = q[(long long)h * (dn + dr) + dn + e];
    }
}

extern "C" int cu_launch_matmul(const struct cu_wmat *W, const float *X, int n, float *Y, void *stream)
{
    if (W->rows <= 0 || W->cols <= 0 || n <= 0) return (int)cudaErrorInvalidValue;
    /* the vector path's loads: words of W, float4 / float2 runs of X */
    const int vec = cu_wmat_vec_ok(W) && (uintptr_t)W->data % 4 == 0 && (uintptr_t)X % 16 == 0;
    dim3 grid((unsigned)((W->rows + MV_WARPS - 1) / MV_WARPS)), block(MV_WARPS * 32);
    cudaStream_t s = (cudaStream_t)stream;
    switch (W->fmt) {
    case QUANT_F32: k_matmul<QUANT_F32><<<grid, block, 0, s>>>(*W, X, n, Y, vec); break;
    case QUANT_BF16: k_matmul<QUANT_BF16><<<grid, block, 0, s>>>(*W, X, n, Y, vec); break;
    case QUANT_F16: k_matmul<QUANT_F16><<<grid, block, 0, s>>>(*W, X, n, Y, vec); break;
    case QUANT_Q8: k_matmul<QUANT_Q8><<<grid, block, 0, s>>>(*W, X, n, Y, vec); break;
    case QUANT_Q4: k_matmul<QUANT_Q4><<<grid, block, 0, s>>>(*W, X, n, Y, vec); break;
    case QUANT_Q4G32: k_matmul<QUANT_Q4G32><<<grid, block, 0, s>>>(*W, X, n, Y, vec); break;
    case QUANT_Q4G64: k_matmul<QUANT_Q4G64><<<grid, block, 0, s>>>(*W, X, n, Y, vec); break;
    case QUANT_Q4G128: k_matmul<QUANT_Q4G128><<<grid, block, 0, s>>>(*W, X, n, Y, vec); break;
    case QUANT_FP8B: k_matmul<QUANT_FP8B><<<grid, block, 0, s>>>(*W, X, n, Y, vec); break;
    default: return (int)cudaErrorInvalidValue;
    }
    return (int)cudaGetLastError();
}

extern "C" int cu_launch_absorb_q(const struct cu_wmat *W, int H, int dn, int dv, int dr, const float *q,
                                  float *qa, float *qpe, void *stream)
{
    if (H < 1 || dn < 1 || dv < 1 || dr < 0 || W->rows != H * (dn + dv) || (dr && !qpe))
        return (int)cudaErrorInvalidValue;
    const long long work = (long long)H * W->cols + (long long)H * dr;
    k_absorb_q<<<(unsigned)((work + 255) / 256), 256, 0, (cudaStream_t)stream>>>(*W, H, dn, dv, dr, q, qa, qpe);
    return (int)cudaGetLastError();
}

extern "C" int cu_launch_absorb_out(const struct cu_wmat *W, int H, int dn, int dv, const float *lat, float *out,
                                    void *stream)
{
    if (H < 1 || dn < 1 || dv < 1 || W->rows != H * (dn + dv)) return (int)cudaErrorInvalidValue;
    const int vec = cu_wmat_vec_ok(W) && (uintptr_t)W->data % 4 == 0 && (uintptr_t)lat % 16 == 0;
    dim3 grid((unsigned)((H * dv + MV_WARPS - 1) / MV_WARPS)), block(MV_WARPS * 32);
    cudaStream_t s = (cudaStream_t)stream;
    switch (W->fmt) {
    case QUANT_F32: k_absorb_out<QUANT_F32><<<grid, block, 0, s>>>(*W, H, dn, dv, lat, out, vec); break;
    case QUANT_BF16: k_absorb_out<QUANT_BF16><<<grid, block, 0, s>>>(*W, H, dn, dv, lat, out, vec); break;
    case QUANT_F16: k_absorb_out<QUANT_F16><<<grid, block, 0, s>>>(*W, H, dn, dv, lat, out, vec); break;
    case QUANT_Q8: k_absorb_out<QUANT_Q8><<<grid, block, 0, s>>>(*W, H, dn, dv, lat, out, vec); break;
    case QUANT_Q4: k_absorb_out<QUANT_Q4><<<grid, block, 0, s>>>(*W, H, dn, dv, lat, out, vec); break;
    case QUANT_Q4G32: k_absorb_out<QUANT_Q4G32><<<grid, block, 0, s>>>(*W, H, dn, dv, lat, out, vec); break;
    case QUANT_Q4G64: k_absorb_out<QUANT_Q4G64><<<grid, block, 0, s>>>(*W, H, dn, dv, lat, out, vec); break;
    case QUANT_Q4G128: k_absorb_out<QUANT_Q4G128><<<grid, block, 0, s>>>(*W, H, dn, dv, lat, out, vec); break;
    case QUANT_FP8B: k_absorb_out<QUANT_FP8B><<<grid, block, 0, s>>>(*W, H, dn, dv, lat, out, vec); break;
    default: return (int)cudaErrorInvalidValue;
    }
    return (int)cudaGetLastError();
}

/* The sum of v over the block (blockDim.x a multiple of 32, <= 1024); every
 * thread gets it. red holds 32 floats. */
static __device__ float block_sum(float v, float *red)
{
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    for (int off = 16; off >= 1; off >>= 1) v += __shfl_xor_sync(0xFFFFFFFFu, v, off);
    if (lane == 0) red[warp] = v;
    __syncthreads();
    float t = lane < nw ? red[lane] : 0.0f;
    for (int off = 16; off >= 1; off >>= 1) t += __shfl_xor_sync(0xFFFFFFFFu, t, off);
    __syncthreads();   /* red may be reused by the caller */
    return t;
}

#define NORM_THREADS 256

static __global__ void __launch_bounds__(NORM_THREADS)
k_rmsnorm(float *y, const float *x, const float *__restrict__ w, int d, float eps)
{
    __shared__ float red[32];
    const float *xr = x + (long long)blockIdx.x * d;
    float *yr = y + (long long)blockIdx.x * d;
    float ss = 0.0f;
    for (int i = threadIdx.x; i < d; i += blockDim.x) ss += xr[i] * xr[i];
    ss = block_sum(ss, red);
    const float inv = 1.0f / sqrtf(ss / (float)d + eps);
    /* each thread rewrites only the elements it read: y may be x */
    for (int i = threadIdx.x; i < d; i += blockDim.x) yr[i] = w[i] * (xr[i] * inv);
}

extern "C" int cu_launch_rmsnorm(float *y, const float *x, const float *weight, int n, int d, float eps,
                                 void *stream)
{
    if (n <= 0 || d <= 0) return (int)cudaErrorInvalidValue;
    k_rmsnorm<<<n, NORM_THREADS, 0, (cudaStream_t)stream>>>(y, x, weight, d, eps);
    return (int)cudaGetLastError();
}

static __global__ void k_rope(float *x, int n_vec, int half, long long ld, const int32_t *__restrict__ pos,
                       const float *__restrict__ inv_freq, float factor)
{
    long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (long long)n_vec * half) return;
    const int v = (int)(idx / half), i = (int)(idx % half);
    float *xv = x + v * ld;
    /* in double, as model_rope_apply computes cos and sin */
    const float angle = (float)pos[v] * inv_freq[i];
    const float cs = (float)cos((double)angle) * factor, sn = (float)sin((double)angle) * factor;
    const float x0 = xv[2 * i], x1 = xv[2 * i + 1];
    xv[2 * i] = x0 * cs - x1 * sn;
    xv[2 * i + 1] = x1 * cs + x0 * sn;
}

extern "C" int cu_launch_rope(float *x, int n_vec, int dr, long long ld, const int32_t *pos,
                              const float *inv_freq, float factor, void *stream)
{
    if (n_vec <= 0 || dr <= 0 || dr % 2) return (int)cudaErrorInvalidValue;
    const long long work = (long long)n_vec * (dr / 2);
    k_rope<<<(unsigned)((work + 255) / 256), 256, 0, (cudaStream_t)stream>>>(x, n_vec, dr / 2, ld, pos,
                                                                          inv_freq, factor);
    return (int)cudaGetLastError();
}

static __global__ void k_swiglu(float *g, const float *__restrict__ u, long long n)
{
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const float a = g[i];
    g[i] = a / (1.0f + expf(-a)) * u[i];
}

extern "C" int cu_launch_swiglu(float *g, const float *u, long long n, void *stream)
{
    if (n <= 0) return (int)cudaErrorInvalidValue;
    k_swiglu<<<(unsigned)((n + 255) / 256), 256, 0, (cudaStream_t)stream>>>(g, u, n);
    return (int)cudaGetLastError();
}

static __global__ void k_axpy(float *y, const float *__restrict__ x, float alpha, long long n)
{
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    y[i] += alpha * x[i];
}

extern "C" int cu_launch_axpy(float *y, const float *x, float alpha, long long n, void *stream)
{
    if (n <= 0) return (int)cudaErrorInvalidValue;
    k_axpy<<<(unsigned)((n + 255) / 256), 256, 0, (cudaStream_t)stream>>>(y, x, alpha, n);
    return (int)cudaGetLastError();
}
