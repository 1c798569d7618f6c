/* cuda/cu_common.h - the arithmetic the CUDA kernels share with the CPU: the
 * descriptors of a device weight matrix and a device KV layer (plain data),
 * and the functions that decode their stored bytes, written once for both
 * compilers. nvcc compiles them as __host__ __device__ into the kernels;
 * gcc compiles them as static inline C into tests/unit/test_cuda_host.c,
 * which checks them (and a CPU replay of each kernel's loop) against the CPU
 * kernels in plain `make test`, on a machine without a GPU.
 *
 * Layouts are the CPU's, byte for byte: quant/format.h for weights, kv/codec.h
 * for KV rows. Every multi-byte value is read byte by byte (little-endian), so
 * no access depends on the alignment of a row, except the weight product's
 * vector path, taken only where rows and activations line up
 * (cu_wmat_vec_ok).
 *
 * No allocation, no state: pure functions of their arguments. */
#ifndef COLIBRI_CUDA_CU_COMMON_H
#define COLIBRI_CUDA_CU_COMMON_H

#include <math.h>
#include <stdint.h>
#include <string.h>

/* The ids of the weight formats and KV tiers are their owners' (plain C
 * headers that nvcc reads too). */
#include "kv/tier_id.h"
#include "quant/fmt_id.h"

#if defined(__CUDACC__)
#define CU_HD static inline __host__ __device__
#else
#define CU_HD static inline
#endif

/* Activations one warp multiplies with each row per pass over it. */
#define CU_NB 4
/* Attention: heads per block (each decoded row is read once per group of
 * heads) and positions decoded and scored together. */
#define CU_ATTN_HG 16
#define CU_ATTN_TT 16

/* A [rows, cols] weight matrix in its stored format (quant/format.h). */
struct cu_wmat {
    int fmt, rows, cols;
    int group;              /* columns per scale: q4gG G, q4 cols, fp8b 128; 0 otherwise */
    int n_scale_cols;       /* scales per row (q4gG: ceil(cols/G)), per block row (fp8b) */
    long long row_bytes;
    const uint8_t *data;    /* rows * row_bytes */
    const float *scales;    /* NULL for f32 / bf16 / f16 */
};

/* One part of a KV row (kv/codec.h) as the attention kernel reads it. */
struct cu_kv_part {
    int tier, dim;
    int offset;             /* byte offset of the part in the row */
    int bits;               /* tq: bits per index */
    float gain;             /* tq: the codec's gain */
    float level[16];        /* tq: the codec's levels (already snapped) */
    int rot_blk;            /* 0: unrotated; else the Hadamard block width */
    const float *sign;      /* rot_blk > 0: dim signs (+-1) */
};

struct cu_kv_layer {
    struct cu_kv_part lat, pe;  /* latent (dim r) and RoPE (dim dr, may be 0) */
    long long row_bytes;
    const uint8_t *rows;        /* T rows of row_bytes, position 0 first */
};

CU_HD float cu_bits_f32(uint32_t u)
{
#if defined(__CUDA_ARCH__)
    return __uint_as_float(u);
#else
    float f;
    memcpy(&f, &u, 4);
    return f;
#endif
}

CU_HD uint32_t cu_ld_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
CU_HD uint32_t cu_ld_u16(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8; }
CU_HD float cu_ld_f32(const uint8_t *p) { return cu_bits_f32(cu_ld_u32(p)); }

CU_HD float cu_bf16(uint32_t h) { return cu_bits_f32(h << 16); }

/* IEEE binary16 -> f32, exact (quant/half.h, kv/kv_num.h). */
CU_HD float cu_f16(uint32_t h)
{
    uint32_t sign = (h & 0x8000u) << 16, e = (h >> 10) & 0x1Fu, m = h & 0x3FFu;
    if (e == 0) {
        float v = (float)m * (1.0f / 16777216.0f);
        return sign ? -v : v;
    }
    if (e == 31) return cu_bits_f32(sign | 0x7F800000u | (m << 13));
    return cu_bits_f32(sign | ((e + 112u) << 23) | (m << 13));
}

/* e4m3fn -> f32, exact; equals quant_fp8_e4m3_table (0x7F/0xFF are NaN). */
CU_HD float cu_fp8(uint32_t b)
{
    uint32_t e = (b >> 3) & 0xFu, m = b & 7u;
    float v;
    if (e == 15 && m == 7) v = cu_bits_f32(0x7FC00000u);
    else if (e == 0) v = (float)m * (1.0f / 512.0f);              /* M/8 * 2^-6 */
    else v = cu_bits_f32(((e + 120u) << 23) | (m << 20));        /* (1+M/8) * 2^(E-7) */
    return b & 0x80u ? -v : v;
}

/* ---- weights ---- */

/* The scale of element (r, c); 1 for unscaled formats. */
CU_HD float cu_w_scale(const struct cu_wmat *W, int fmt, int r, int c)
{
    switch (fmt) {
    case QUANT_Q8: case QUANT_Q4:
        return W->scales[r];
    case QUANT_Q4G32: case QUANT_Q4G64: case QUANT_Q4G128:
        return W->scales[(long long)r * W->n_scale_cols + c / W->group];
    case QUANT_FP8B:
        return W->scales[(long long)(r / 128) * W->n_scale_cols + c / 128];
    default:
        return 1.0f;
    }
}

/* Element (r, c), c < cols, decoded and scaled: what quant_dequant_rows gives
 * up to the one rounding of code * scale. fmt is W->fmt, passed apart so that
 * a kernel instantiated per format folds the switches away. */
CU_HD float cu_w_elem(const struct cu_wmat *W, int fmt, int r, int c)
{
    const uint8_t *p = W->data + (long long)r * W->row_bytes;
    switch (fmt) {
    case QUANT_F32: return cu_ld_f32(p + 4LL * c);
    case QUANT_BF16: return cu_bf16(cu_ld_u16(p + 2LL * c));
    case QUANT_F16: return cu_f16(cu_ld_u16(p + 2LL * c));
    case QUANT_Q8: return (float)(int8_t)p[c] * cu_w_scale(W, fmt, r, c);
    case QUANT_FP8B: return cu_fp8(p[c]) * cu_w_scale(W, fmt, r, c);
    default: {   /* int4: byte j of a 128-block holds element j (low) and j+64 (high) */
        uint32_t b = p[(c / 128) * 64 + (c % 64)];
        int q = (int)((c % 128) < 64 ? (b & 0xFu) : (b >> 4)) - 8;
        return (float)q * cu_w_scale(W, fmt, r, c);
    }
    }
}

/* The vector path of the product reads a row as 4-byte words, word k by
 * lane k % 32 (so a warp's load is 128 contiguous bytes), and the activations
 * as float4 / float2 runs that line up with the word's columns. It needs rows
 * of whole words and activation rows of whole float4s (cols % 4 == 0; the
 * launcher also checks the base addresses); cu_matvec_lane_elem covers the
 * rest. */
CU_HD int cu_wmat_vec_ok(const struct cu_wmat *W) { return W->row_bytes % 4 == 0 && W->cols % 4 == 0; }

/* Words per row on the vector path. */
CU_HD int cu_w_nchunks(const struct cu_wmat *W) { return (int)(W->row_bytes / 4); }

/* Word k (bytes 4k..4k+3 of row r, little-endian in `bits`), decoded and
 * scaled into w[]: w[0..n_lo) are columns c_lo.., w[4..4+n_hi) columns c_hi..
 * (int4's high nibbles; n_hi = 0 otherwise). A run is wholly inside or wholly
 * past cols (cols % 4 == 0 and runs start at multiples of their length);
 * runs past cols (int4 padding) get scale 0 and the caller skips them. */
CU_HD void cu_w_chunk(const struct cu_wmat *W, int fmt, int r, int k, uint32_t bits, float *w, int *c_lo,
                      int *n_lo, int *c_hi, int *n_hi)
{
    *c_hi = 0;
    *n_hi = 0;
    switch (fmt) {
    case QUANT_F32:
        *c_lo = k;
        *n_lo = 1;
        w[0] = cu_bits_f32(bits);
        return;
    case QUANT_BF16: case QUANT_F16:
        *c_lo = 2 * k;
        *n_lo = 2;
        w[0] = fmt == QUANT_BF16 ? cu_bf16(bits & 0xFFFFu) : cu_f16(bits & 0xFFFFu);
        w[1] = fmt == QUANT_BF16 ? cu_bf16(bits >> 16) : cu_f16(bits >> 16);
        return;
    case QUANT_Q8: case QUANT_FP8B: {
        /* 4 columns inside one scale block (4 divides 128) */
        *c_lo = 4 * k;
        *n_lo = 4;
        float s = cu_w_scale(W, fmt, r, 4 * k);
        for (int e = 0; e < 4; e++) {
            uint32_t b = (bits >> (8 * e)) & 0xFFu;
            w[e] = (fmt == QUANT_Q8 ? (float)(int8_t)(uint8_t)b : cu_fp8(b)) * s;
        }
        return;
    }
    default: {
        /* int4: word k is bytes 4*(k%16).. of 128-block k/16, so columns
         * blk*128 + jb + e (low nibbles) and blk*128 + 64 + jb + e (high);
         * 4 columns never straddle a group (G >= 32) */
        int c0 = (k / 16) * 128 + (k % 16) * 4, c1 = c0 + 64;
        *c_lo = c0;
        *n_lo = 4;
        *c_hi = c1;
        *n_hi = 4;
        float s0 = c0 < W->cols ? cu_w_scale(W, fmt, r, c0) : 0.0f;
        float s1 = c1 < W->cols ? cu_w_scale(W, fmt, r, c1) : 0.0f;
        for (int e = 0; e < 4; e++) {
            uint32_t b = (bits >> (8 * e)) & 0xFFu;
            w[e] = (float)((int)(b & 0xFu) - 8) * s0;
            w[4 + e] = (float)((int)(b >> 4) - 8) * s1;
        }
        return;
    }
    }
}

/* n (1, 2 or 4) activations at p into v[]: one float / float2 / float4 load
 * on the device (p is aligned to n floats: see cu_wmat_vec_ok). */
CU_HD void cu_x_run(const float *p, int n, float *v)
{
#if defined(__CUDA_ARCH__)
    if (n == 4) {
        float4 t = __ldg((const float4 *)p);
        v[0] = t.x, v[1] = t.y, v[2] = t.z, v[3] = t.w;
    } else if (n == 2) {
        float2 t = __ldg((const float2 *)p);
        v[0] = t.x, v[1] = t.y;
    } else {
        v[0] = __ldg(p);
    }
#else
    for (int e = 0; e < n; e++) v[e] = p[e];
#endif
}

/* What lane `lane` of the warp that owns row r adds up, on the element path,
 * for nj <= CU_NB activations X + j*ldx (j < nj): acc[j] over columns
 * c = lane, lane+32, ... The kernel sums acc over the 32 lanes in
 * cu_warp_tree's order; the CPU replay calls this for every lane. */
CU_HD void cu_matvec_lane_elem(const struct cu_wmat *W, int fmt, int r, int lane, const float *X, long long ldx,
                               int nj, float *acc)
{
    for (int c = lane; c < W->cols; c += 32) {
        float w = cu_w_elem(W, fmt, r, c);
        for (int j = 0; j < CU_NB; j++)
            if (j < nj) acc[j] += w * X[j * ldx + c];
    }
}

/* The vector path's work on word k of row r (its bytes in `bits`): a lane
 * calls it for k = lane, lane+32, ... in that order. */
CU_HD void cu_matvec_chunk(const struct cu_wmat *W, int fmt, int r, int k, uint32_t bits, const float *X,
                           long long ldx, int nj, float *acc)
{
    float w[8], x[4];
    int c_lo, n_lo, c_hi, n_hi;
    cu_w_chunk(W, fmt, r, k, bits, w, &c_lo, &n_lo, &c_hi, &n_hi);
    for (int j = 0; j < CU_NB; j++) {
        if (j >= nj) continue;
        const float *xj = X + j * ldx;
        float a = 0.0f;
        if (c_lo < W->cols) {
            cu_x_run(xj + c_lo, n_lo, x);
            for (int e = 0; e < n_lo; e++) a += w[e] * x[e];
        }
        if (n_hi && c_hi < W->cols) {
            cu_x_run(xj + c_hi, n_hi, x);
            for (int e = 0; e < n_hi; e++) a += w[4 + e] * x[e];
        }
        acc[j] += a;
    }
}

/* ---- KV rows ---- */

/* Value i of a part in the code domain: exactly kv_codec_decode_rot()'s
 * element i (f32, bf16, fp8, int8r, q4_0, tq4/3/2). */
CU_HD float cu_kv_elem(const struct cu_kv_part *P, const uint8_t *row, int i)
{
    const uint8_t *p = row + P->offset;
    switch (P->tier) {
    case KV_TIER_F32: return cu_ld_f32(p + 4LL * i);
    case KV_TIER_BF16: return cu_bf16(cu_ld_u16(p + 2LL * i));
    case KV_TIER_FP8: return cu_fp8(p[i]) * cu_ld_f32(p + P->dim);
    case KV_TIER_INT8R: return (float)(int8_t)p[i] * cu_ld_f32(p + P->dim);
    case KV_TIER_Q4_0: {
        /* blocks of [fp16 d][16 bytes]: low nibble element j, high j + 16 */
        const uint8_t *blk = p + (i / 32) * 18;
        int j = i % 32;
        uint32_t b = blk[2 + (j % 16)];
        int q = (int)(j < 16 ? (b & 15u) : (b >> 4)) - 8;
        return (float)q * cu_f16(cu_ld_u16(blk));
    }
    default: {   /* tq: LSB-first bit stream of indices, then the f32 norm */
        long long pos = (long long)i * P->bits, nb = (long long)P->dim * P->bits / 8;
        uint32_t w = p[pos >> 3];
        if ((pos & 7) + P->bits > 8) w |= (uint32_t)p[(pos >> 3) + 1] << 8;
        uint32_t idx = (w >> (pos & 7)) & ((1u << P->bits) - 1u);
        float s = P->gain * cu_ld_f32(p + nb) / sqrtf((float)P->dim);
        return P->level[idx] * s;
    }
    }
}

/* ---- online softmax (flash decoding) ---- */

/* Folds a tile's logits s[0..n) into the running max *m and sum *l of one
 * head: s[t] becomes its weight exp(s[t] - m_new), and the return value is
 * the factor the head's partial output must be multiplied by first. */
CU_HD float cu_softmax_tile(float *s, int n, float *m, float *l)
{
    float mt = *m;
    for (int t = 0; t < n; t++) mt = s[t] > mt ? s[t] : mt;
    /* a head that has only seen -inf has nothing to rescale */
    float alpha = *m == -INFINITY ? 0.0f : expf(*m - mt), sum = 0.0f;
    for (int t = 0; t < n; t++) {
        s[t] = mt == -INFINITY ? 0.0f : expf(s[t] - mt);
        sum += s[t];
    }
    *l = *l * alpha + sum;
    *m = mt;
    return alpha;
}

/* The weight of a chunk's partial (max mc) in the merged result (max M). */
CU_HD float cu_merge_weight(float mc, float M) { return mc == -INFINITY ? 0.0f : expf(mc - M); }

/* The Walsh-Hadamard butterfly of pair p (0 <= p < n/2) at stride h: the
 * indices it combines. Same pairs in the same stage order as kv_fwht. */
CU_HD void cu_fwht_pair(int p, int h, int *a, int *b)
{
    *a = (p / h) * (2 * h) + (p % h);
    *b = *a + h;
}

/* ---- the warp's sum ---- */

/* The order in which __shfl_xor_sync sums 32 lanes (offsets 16, 8, 4, 2, 1):
 * the CPU replay uses it to reproduce the device's sum. v[] is overwritten;
 * every lane ends with the same value, returned. */
CU_HD float cu_warp_tree(float *v)
{
    float t[32];
    for (int off = 16; off >= 1; off >>= 1) {
        for (int l = 0; l < 32; l++) t[l] = v[l] + v[l ^ off];
        for (int l = 0; l < 32; l++) v[l] = t[l];
    }
    return v[0];
}

#endif
