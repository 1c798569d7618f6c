/* cuda/cu_replay.h - the CUDA kernels replayed on the CPU, loop for loop:
 * each function computes what its kernel computes, with the kernel's split of
 * the work and its order of summation (warp = row, lanes, cu_warp_tree), from
 * the shared arithmetic of cuda/cu_common.h. Two users: the CPU replay test
 * (tests/unit/test_cuda_host.c) and the host device of model/backend.h
 * (cuda/replay_dev.c), which runs the forward's device executor on a machine
 * without a GPU.
 *
 * C only (gcc), header-only; pure except for the scratch replay_attend
 * allocates (it returns -1 when that fails, else 0). */
#ifndef COLIBRI_CUDA_CU_REPLAY_H
#define COLIBRI_CUDA_CU_REPLAY_H

#include <stdint.h>
#include <stdlib.h>

#include "cuda/cu_common.h"

/* cu_launch_matmul's choice of the word path (cuda/kernels.cu). */
static inline int cu_replay_vec(const struct cu_wmat *W, const float *X)
{
    return cu_wmat_vec_ok(W) && (uintptr_t)W->data % 4 == 0 && (uintptr_t)X % 16 == 0;
}

/* One warp's row product: lanes as k_matmul splits them (a lane's words
 * k = lane, lane + 32, ..., or its columns), summed in the shuffle's order.
 * out[j] for j < nj. */
static inline void cu_replay_row(const struct cu_wmat *W, int r, const float *X, long long ldx, int nj, int vec,
                                 float *out)
{
    float lanes[CU_NB][32];
    for (int lane = 0; lane < 32; lane++) {
        float acc[CU_NB] = { 0 };
        if (vec)
            for (int k = lane; k < cu_w_nchunks(W); k += 32)
                cu_matvec_chunk(W, W->fmt, r, k, cu_ld_u32(W->data + (size_t)r * W->row_bytes + 4 * (size_t)k), X,
                                ldx, nj, acc);
        else
            cu_matvec_lane_elem(W, W->fmt, r, lane, X, ldx, nj, acc);
        for (int j = 0; j < CU_NB; j++) lanes[j][lane] = acc[j];
    }
    for (int j = 0; j < nj; j++) out[j] = cu_warp_tree(lanes[j]);
}

/* k_matmul: Y[j * rows + r] = row r . X[j * cols ..], CU_NB activations per
 * pass. */
static inline void cu_replay_matmul(const struct cu_wmat *W, const float *X, int n, float *Y, int vec)
{
    for (int r = 0; r < W->rows; r++)
        for (int j0 = 0; j0 < n; j0 += CU_NB) {
            int nj = n - j0 < CU_NB ? n - j0 : CU_NB;
            float out[CU_NB];
            cu_replay_row(W, r, X + (size_t)j0 * W->cols, W->cols, nj, vec, out);
            for (int j = 0; j < nj; j++) Y[(size_t)(j0 + j) * W->rows + r] = out[j];
        }
}

/* k_absorb_q: thread (h, j) sums its dn terms in order; the RoPE query is
 * copied. */
static inline void cu_replay_absorb_q(const struct cu_wmat *W, int H, int dn, int dv, int dr, const float *q,
                                      float *qa, float *qpe)
{
    for (int h = 0; h < H; h++) {
        for (int j = 0; j < W->cols; j++) {
            float a = 0.0f;
            for (int i = 0; i < dn; i++) a += q[(size_t)h * (dn + dr) + i] * cu_w_elem(W, W->fmt, h * (dn + dv) + i, j);
            qa[(size_t)h * W->cols + j] = a;
        }
        for (int e = 0; e < dr; e++) qpe[(size_t)h * dr + e] = q[(size_t)h * (dn + dr) + dn + e];
    }
}

/* k_absorb_out: a warp per output row h*(dn+dv)+dn+k, activation lat + h*r. */
static inline void cu_replay_absorb_out(const struct cu_wmat *W, int H, int dn, int dv, const float *lat, float *out)
{
    const int r = W->cols, vec = cu_replay_vec(W, lat);
    for (int h = 0; h < H; h++)
        for (int k = 0; k < dv; k++)
            cu_replay_row(W, h * (dn + dv) + dn + k, lat + (size_t)h * r, r, 1, vec,
                          out + (size_t)h * dv + k);
}

/* k_rmsnorm: threads i < nthreads sum elements i, i + nthreads, ...; then
 * block_sum's two shuffle trees (per warp, then over the warps' sums). */
static inline void cu_replay_rmsnorm(float *y, const float *x, const float *w, int n, int d, float eps, int nthreads)
{
    float part[1024], red[32];
    for (int t = 0; t < n; t++) {
        const float *xr = x + (size_t)t * d;
        float *yr = y + (size_t)t * d;
        for (int i = 0; i < nthreads; i++) {
            float ss = 0.0f;
            for (int k = i; k < d; k += nthreads) ss += xr[k] * xr[k];
            part[i] = ss;
        }
        int nw = nthreads / 32;
        for (int wi = 0; wi < 32; wi++) red[wi] = wi < nw ? cu_warp_tree(part + 32 * wi) : 0.0f;
        float ss = cu_warp_tree(red);
        const float inv = 1.0f / sqrtf(ss / (float)d + eps);
        for (int i = 0; i < d; i++) yr[i] = w[i] * (xr[i] * inv);
    }
}

/* The rotation as k_attn_query / k_attn_merge do it, stage by stage. */
static inline void cu_replay_rot(const struct cu_kv_part *P, float *v, int inverse)
{
    if (!P->rot_blk) return;
    if (!inverse)
        for (int i = 0; i < P->dim; i++) v[i] *= P->sign[i];
    for (int h = 1; h < P->rot_blk; h <<= 1)
        for (int p = 0; p < P->dim / 2; p++) {
            int a, b;
            cu_fwht_pair(p, h, &a, &b);
            float x = v[a], y = v[b];
            v[a] = x + y;
            v[b] = x - y;
        }
    const float norm = 1.0f / sqrtf((float)P->rot_blk);
    for (int i = 0; i < P->dim; i++) v[i] *= inverse ? norm * P->sign[i] : norm;
}

/* The three attention kernels replayed: chunks and tiles as k_attn_partial
 * walks them (all heads in one group: grouping changes no arithmetic). */
static inline int cu_replay_attend(const struct cu_kv_layer *L, int T, int H, const float *q_lat, const float *q_rope,
                                   float scale, int n_chunks, float *out)
{
    const int r = L->lat.dim, dr = L->pe.dim, D = r + dr, TT = CU_ATTN_TT;
    float *qr = malloc((size_t)H * D * sizeof *qr), *tile = malloc((size_t)TT * D * sizeof *tile);
    float *pm = malloc((size_t)n_chunks * H * sizeof *pm), *pl = malloc((size_t)n_chunks * H * sizeof *pl);
    float *pacc = calloc((size_t)n_chunks * H * r, sizeof *pacc), S[CU_ATTN_TT];
    if (!qr || !tile || !pm || !pl || !pacc) {
        free(qr), free(tile), free(pm), free(pl), free(pacc);
        return -1;
    }
    for (int h = 0; h < H; h++) {
        memcpy(qr + (size_t)h * D, q_lat + (size_t)h * r, (size_t)r * sizeof *qr);
        cu_replay_rot(&L->lat, qr + (size_t)h * D, 0);
        if (dr) {
            memcpy(qr + (size_t)h * D + r, q_rope + (size_t)h * dr, (size_t)dr * sizeof *qr);
            cu_replay_rot(&L->pe, qr + (size_t)h * D + r, 0);
        }
    }
    for (int c = 0; c < n_chunks; c++) {
        int t_begin = (int)((long long)T * c / n_chunks), t_end = (int)((long long)T * (c + 1) / n_chunks);
        for (int h = 0; h < H; h++) {
            pm[c * H + h] = -INFINITY;
            pl[c * H + h] = 0.0f;
        }
        for (int t0 = t_begin; t0 < t_end; t0 += TT) {
            int nt = t_end - t0 < TT ? t_end - t0 : TT;
            for (int k = 0; k < nt * D; k++) {
                int t = k / D, i = k % D;
                const uint8_t *row = L->rows + (long long)(t0 + t) * L->row_bytes;
                tile[k] = i < r ? cu_kv_elem(&L->lat, row, i) : cu_kv_elem(&L->pe, row, i - r);
            }
            for (int h = 0; h < H; h++) {
                for (int t = 0; t < nt; t++) {
                    float lanes[32] = { 0 };
                    for (int i = 0; i < D; i++) lanes[i % 32] += qr[(size_t)h * D + i] * tile[t * D + i];
                    S[t] = cu_warp_tree(lanes) * scale;
                }
                float alpha = cu_softmax_tile(S, nt, pm + c * H + h, pl + c * H + h);
                float *acc = pacc + ((size_t)c * H + h) * r;
                for (int i = 0; i < r; i++) {
                    float a = acc[i] * alpha;
                    for (int t = 0; t < nt; t++) a += S[t] * tile[t * D + i];
                    acc[i] = a;
                }
            }
        }
    }
    for (int h = 0; h < H; h++) {
        float M = -INFINITY, sum = 0.0f;
        for (int c = 0; c < n_chunks; c++) M = fmaxf(M, pm[c * H + h]);
        for (int c = 0; c < n_chunks; c++) sum += pl[c * H + h] * cu_merge_weight(pm[c * H + h], M);
        float *o = out + (size_t)h * r;
        for (int i = 0; i < r; i++) {
            float a = 0.0f;
            for (int c = 0; c < n_chunks; c++) a += pacc[((size_t)c * H + h) * r + i] * cu_merge_weight(pm[c * H + h], M);
            o[i] = a / sum;
        }
        cu_replay_rot(&L->lat, o, 1);
    }
    free(qr), free(tile), free(pm), free(pl), free(pacc);
    return 0;
}

#endif
