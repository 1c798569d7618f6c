/* cuda/attn.cu - absorbed-MLA decode attention over a layer's cached rows,
 * read in their stored codes (cuda/cu_common.h's cu_kv_elem), never expanded
 * into a second copy of the cache. Flash decoding in three launches:
 *
 *  1. k_attn_query: each head's query moved into the code domain of the
 *     latent and RoPE parts (the codec's Hadamard rotation, when it has one),
 *     as kv_codec_prepare_query does on the CPU.
 *  2. k_attn_partial, one block per (group of CU_ATTN_HG heads, range of
 *     positions): tiles of CU_ATTN_TT rows are decoded once into shared
 *     memory and scored by every head of the group (one warp per
 *     (head, row) dot product), folded into a running max/sum
 *     (cu_softmax_tile) and a partial output in the code domain.
 *  3. k_attn_merge, one block per head: the ranges merged
 *     (cu_merge_weight), divided by the sum, unrotated once.
 *
 * Blocks of one range of positions are consecutive in launch order (the head
 * group is the fastest grid index), so the rows they share come from L2. All
 * shared memory is dynamic, sized by cu_attn_smem_bytes; every thread writes
 * only elements no other thread of its block reads before the next barrier. */
#include <cuda_runtime.h>

#include "cuda/cu_launch.h"

#define ATTN_THREADS 256

static size_t f32s(size_t n) { return n * sizeof(float); }

extern "C" size_t cu_attn_smem_bytes(int r, int dr)
{
    const size_t D = (size_t)r + dr;
    return f32s(CU_ATTN_HG * D) +          /* queries */
           f32s(CU_ATTN_TT * D) +          /* decoded tile */
           f32s(CU_ATTN_HG * (size_t)r) +  /* partial outputs */
           f32s(CU_ATTN_HG * CU_ATTN_TT) + /* logits, then weights */
           f32s(3 * CU_ATTN_HG);           /* max, sum, rescale factor */
}

/* Partials [n_chunks][H] max and sum, [n_chunks][H][r] outputs, then the
 * rotated queries [H][r + dr]. */
extern "C" size_t cu_attn_ws_bytes(int H, int r, int dr, int n_chunks)
{
    return f32s((size_t)n_chunks * H * (2 + (size_t)r)) + f32s((size_t)H * ((size_t)r + dr));
}

/* In-place Walsh-Hadamard transform of v[0..n) in blocks of blk, shared
 * memory, all threads of the block (kv_fwht's stages in its order). */
static __device__ void block_fwht(float *v, int n, int blk)
{
    for (int h = 1; h < blk; h <<= 1) {
        for (int p = threadIdx.x; p < n / 2; p += blockDim.x) {
            int a, b;
            cu_fwht_pair(p, h, &a, &b);
            const float x = v[a], y = v[b];
            v[a] = x + y;
            v[b] = x - y;
        }
        __syncthreads();
    }
}

/* qr[h] = [R_lat q_lat[h], R_pe q_rope[h]]: y = H D x / sqrt(blk) per block
 * (kv_rot_apply). One block per head; buf holds max(r, dr) floats. */
static __global__ void __launch_bounds__(ATTN_THREADS)
k_attn_query(const __grid_constant__ struct cu_kv_layer L, const float *__restrict__ q_lat, const float *__restrict__ q_rope,
             float *__restrict__ qr)
{
    extern __shared__ float buf[];
    const int h = blockIdx.x, r = L.lat.dim, dr = L.pe.dim, D = r + dr;
    for (int part = 0; part < 2; part++) {
        const struct cu_kv_part *P = part ? &L.pe : &L.lat;
        const int n = P->dim;
        if (n == 0) continue;
        const float *q = part ? q_rope + (long long)h * dr : q_lat + (long long)h * r;
        float *dst = qr + (long long)h * D + (part ? r : 0);
        if (!P->rot_blk) {
            for (int i = threadIdx.x; i < n; i += blockDim.x) dst[i] = q[i];
            continue;
        }
        for (int i = threadIdx.x; i < n; i += blockDim.x) buf[i] = q[i] * P->sign[i];
        __syncthreads();
        block_fwht(buf, n, P->rot_blk);
        const float norm = 1.0f / sqrtf((float)P->rot_blk);
        for (int i = threadIdx.x; i < n; i += blockDim.x) dst[i] = buf[i] * norm;
        __syncthreads();   /* buf is refilled by the next part */
    }
}

static __global__ void __launch_bounds__(ATTN_THREADS)
k_attn_partial(const __grid_constant__ struct cu_kv_layer L, int T, int H, const float *__restrict__ qr, float scale, int n_chunks,
               float *__restrict__ part_m, float *__restrict__ part_l, float *__restrict__ part_acc)
{
    extern __shared__ float sm[];
    const int r = L.lat.dim, dr = L.pe.dim, D = r + dr;
    const int h0 = blockIdx.x * CU_ATTN_HG, nh = H - h0 < CU_ATTN_HG ? H - h0 : CU_ATTN_HG;
    const int c = blockIdx.y;
    const int t_begin = (int)((long long)T * c / n_chunks), t_end = (int)((long long)T * (c + 1) / n_chunks);
    float *sq = sm;                                  /* [HG][D] */
    float *tile = sq + CU_ATTN_HG * D;               /* [TT][D] */
    float *acc = tile + CU_ATTN_TT * D;              /* [HG][r] */
    float *S = acc + CU_ATTN_HG * r;                 /* [HG][TT] */
    float *m = S + CU_ATTN_HG * CU_ATTN_TT, *l = m + CU_ATTN_HG, *alpha = l + CU_ATTN_HG;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, nwarps = blockDim.x >> 5;

    for (int k = tid; k < nh * D; k += blockDim.x) sq[k] = qr[(long long)h0 * D + k];
    for (int k = tid; k < nh * r; k += blockDim.x) acc[k] = 0.0f;
    for (int k = tid; k < CU_ATTN_HG; k += blockDim.x) {
        m[k] = -INFINITY;
        l[k] = 0.0f;
    }
    __syncthreads();

    for (int t0 = t_begin; t0 < t_end; t0 += CU_ATTN_TT) {
        const int nt = t_end - t0 < CU_ATTN_TT ? t_end - t0 : CU_ATTN_TT;
        /* decode the tile: consecutive threads, consecutive values of a row */
        for (int k = tid; k < nt * D; k += blockDim.x) {
            const int t = k / D, i = k % D;
            const uint8_t *row = L.rows + (long long)(t0 + t) * L.row_bytes;
            tile[k] = i < r ? cu_kv_elem(&L.lat, row, i) : cu_kv_elem(&L.pe, row, i - r);
        }
        __syncthreads();
        /* logits: one warp per (head, row) */
        for (int pr = warp; pr < nh * nt; pr += nwarps) {
            const int hh = pr / nt, t = pr % nt;
            const float *q = sq + hh * D, *x = tile + t * D;
            float s = 0.0f;
            for (int i = lane; i < D; i += 32) s += q[i] * x[i];
            for (int off = 16; off >= 1; off >>= 1) s += __shfl_xor_sync(0xFFFFFFFFu, s, off);
            if (lane == 0) S[hh * CU_ATTN_TT + t] = s * scale;
        }
        __syncthreads();
        for (int hh = tid; hh < nh; hh += blockDim.x)
            alpha[hh] = cu_softmax_tile(S + hh * CU_ATTN_TT, nt, m + hh, l + hh);
        __syncthreads();
        /* partial outputs: each thread owns fixed (head, column) elements */
        for (int k = tid; k < nh * r; k += blockDim.x) {
            const int hh = k / r, i = k % r;
            float a = acc[k] * alpha[hh];
            for (int t = 0; t < nt; t++) a += S[hh * CU_ATTN_TT + t] * tile[t * D + i];
            acc[k] = a;
        }
        __syncthreads();   /* tile and S are rewritten next */
    }

    for (int k = tid; k < nh; k += blockDim.x) {
        part_m[(long long)c * H + h0 + k] = m[k];
        part_l[(long long)c * H + h0 + k] = l[k];
    }
    for (int k = tid; k < nh * r; k += blockDim.x) part_acc[((long long)c * H + h0) * r + k] = acc[k];
}

/* out[h] = R_lat^T (sum_c w_c acc_c / sum_c w_c l_c): one block per head,
 * buf holds r floats. */
static __global__ void __launch_bounds__(ATTN_THREADS)
k_attn_merge(const __grid_constant__ struct cu_kv_layer L, int H, int n_chunks, const float *__restrict__ part_m,
             const float *__restrict__ part_l, const float *__restrict__ part_acc, float *__restrict__ out)
{
    extern __shared__ float buf[];
    const int h = blockIdx.x, r = L.lat.dim;
    float M = -INFINITY, sum = 0.0f;
    for (int c = 0; c < n_chunks; c++) M = fmaxf(M, part_m[(long long)c * H + h]);
    for (int c = 0; c < n_chunks; c++)
        sum += part_l[(long long)c * H + h] * cu_merge_weight(part_m[(long long)c * H + h], M);
    for (int i = threadIdx.x; i < r; i += blockDim.x) {
        float a = 0.0f;
        for (int c = 0; c < n_chunks; c++)
            a += part_acc[((long long)c * H + h) * r + i] * cu_merge_weight(part_m[(long long)c * H + h], M);
        buf[i] = a / sum;
    }
    __syncthreads();
    if (L.lat.rot_blk) {
        block_fwht(buf, r, L.lat.rot_blk);
        /* kv_rot_inverse: x = D H y / sqrt(blk) */
        const float norm = 1.0f / sqrtf((float)L.lat.rot_blk);
        for (int i = threadIdx.x; i < r; i += blockDim.x) buf[i] *= norm * L.lat.sign[i];
        __syncthreads();
    }
    for (int i = threadIdx.x; i < r; i += blockDim.x) out[(long long)h * r + i] = buf[i];
}

extern "C" int cu_launch_attend(const struct cu_kv_layer *L, int T, int H, const float *q_lat,
                                const float *q_rope, float scale, float *out, void *ws, int n_chunks,
                                int max_smem, void *stream)
{
    const int r = L->lat.dim, dr = L->pe.dim;
    if (T < 1 || H < 1 || r < 1 || n_chunks < 1 || n_chunks > T || n_chunks > 65535 || (dr && !q_rope))
        return (int)cudaErrorInvalidValue;
    const size_t smem = cu_attn_smem_bytes(r, dr);
    const size_t vbuf = f32s((size_t)(r > dr ? r : dr));
    if (smem > (size_t)max_smem || vbuf > (size_t)max_smem) return (int)cudaErrorInvalidValue;
    cudaStream_t s = (cudaStream_t)stream;
    int rc = (int)cudaFuncSetAttribute(k_attn_partial, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
    if (!rc) rc = (int)cudaFuncSetAttribute(k_attn_query, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)vbuf);
    if (!rc) rc = (int)cudaFuncSetAttribute(k_attn_merge, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)vbuf);
    if (rc) return rc;
    float *part_m = (float *)ws, *part_l = part_m + (size_t)n_chunks * H;
    float *part_acc = part_l + (size_t)n_chunks * H, *qr = part_acc + (size_t)n_chunks * H * r;
    k_attn_query<<<H, ATTN_THREADS, vbuf, s>>>(*L, q_lat, q_rope, qr);
    dim3 grid((unsigned)((H + CU_ATTN_HG - 1) / CU_ATTN_HG), (unsigned)n_chunks);
    k_attn_partial<<<grid, ATTN_THREADS, smem, s>>>(*L, T, H, qr, scale, n_chunks, part_m, part_l, part_acc);
    k_attn_merge<<<H, ATTN_THREADS, f32s((size_t)r), s>>>(*L, H, n_chunks, part_m, part_l, part_acc, out);
    return (int)cudaGetLastError();
}
