/* kv/attn_kern.h - the arithmetic kernels of decode attention, one table per
 * ISA (scalar in attn_kern.c, AVX-512 in attn_kern_avx512.c), chosen once from
 * CPUID by kv_kern_get() (the kv module's only dispatch point).
 *
 * Layouts: queries are transposed with heads in lanes, qT[i * ldq + h], ldq a
 * multiple of 16; scores and weights are t-major, s[t * ld + h]. Every kernel
 * fixes its summation order so that the AVX-512 table gives the same bits as
 * the scalar one (and as kv_attend_ref): each dot product is fmaf() over its
 * index ascending from 0, each sum over tokens runs over t ascending.
 * All kernels are pure and thread-safe on disjoint outputs. */
#ifndef COLIBRI_KV_ATTN_KERN_H
#define COLIBRI_KV_ATTN_KERN_H

#include <stddef.h>
#include <stdint.h>

#include "kv/codec.h"

typedef void (*kv_decode_rows_fn)(const struct kv_codec *c, const uint8_t *in,
                                  size_t stride, int n, float *out, size_t ldo);

struct kv_kern {
    const char *name;
    /* out[t*ldo + h] = (sum_i qa[i*ldq+h] a[t*sa+i] + sum_j qb[j*ldq+h] b[t*sb+j])
     * * scale for t < n, h < ldq; db may be 0 (b unused). */
    void (*scores)(const float *qa, int da, const float *qb, int db, int ldq,
                   const float *a, size_t sa, const float *b, size_t sb, int n,
                   float scale, float *out, int ldo);
    /* acc[h*lda + i] += sum_t p[t*ldp + h] x[t*sx + i] (fmaf, t ascending) for
     * h < H, i0 <= i < i1. */
    void (*accum)(const float *p, int ldp, int H, const float *x, size_t sx,
                  int i0, int i1, int n, float *acc, int lda);
    /* m[h] = max(m[h], max_t l[t*ld + h]) for h < Hp (multiple of 16). */
    void (*colmax)(const float *l, int ld, int Hp, int n, float *m);
    /* p[t*ld + h] = kv_expf(l[t*ld + h] - m[h]) (in place allowed, p == l) and
     * sum[h] += p (t ascending) for h < Hp. */
    void (*expsum)(const float *l, int ld, const float *m, int Hp, int n, float *p,
                   float *sum);
    /* Bit-exact equivalents of kv_codec_decode_rot over n rows, by tier; NULL
     * where this ISA has none. */
    kv_decode_rows_fn rows[KV_TIER_COUNT];
};

/* The int8 dot-product (VNNI) consumer, opt-in (kv_scratch_set_int8): rows of
 * the tiers whose code is an int8 times a per-row or per-32 scale (int8r,
 * q4_0, tq*) are scored against an int8 copy of the rotated query (one scale
 * per head, vpdpbusd) and accumulated with int16 weights (one scale per head
 * and tile, vpdpwssd; per-32 scales are folded into int16 codes first). It is an approximation of the native consumer (~1e-3
 * relative, most of it from the int8 query), not bit-compatible with it.
 *
 * fp8 takes the same path with int16 codes and an int16 query (vpdpwssd).
 *
 * Tile layouts: u[t * r + i] = code + 128 (u8), s[t * G + g] = scale of group
 * g (G = r / gs; gs = r for a per-row scale, 32 for q4_0).
 * q8T[(i / 4) * Hp * 4 + h * 4 + i % 4] = int8 query, sq[h] its scale,
 * qsum[g * Hp + h] = sum of the int8 query over group g. */
struct kv_kern_q8 {
    void (*decode[KV_TIER_COUNT])(const struct kv_codec *c, const uint8_t *in, size_t stride,
                                  int n, uint8_t *u, float *s);
    void (*quant_query)(const float *qT, int r, int Hp, int gs, int8_t *q8T, float *sq,
                        int32_t *qsum);
    /* S[t * Hp + h] = (sq[h] * sum_g s[t][g] * (q8 . code)_g + R[t * Hp + h]) * scale
     * (R may be NULL: 0) */
    void (*scores)(const int8_t *q8T, const float *sq, const int32_t *qsum, int r, int gs,
                   int Hp, const uint8_t *u, const float *s, int n, const float *R,
                   float scale, float *S);
    /* acc[h * r + i] += sum_t P[t * Hp + h] * s[t][g(i)] * code[t][i] for h < H
     * (rows h in [H, Hp) of acc are scratch), n <= 64 (int32 sums of 64 rows
     * of 15-bit weights and codes stay below 2^31). work: kv_q8_work_bytes(). */
    void (*accum)(const float *P, int Hp, int H, const uint8_t *u, const float *s, int n,
                  int r, int gs, float *acc, uint8_t *work);
    /* fp8: int16 codes instead (u holds n x r int16, |code| <= 1023, one scale
     * per row; accum takes them with gs = 0) scored against an int16 query
     * (q16T[(i / 2) * Hp * 2 + h * 2 + i % 2], |q| <= 2047) with vpdpwssd. */
    void (*decode16[KV_TIER_COUNT])(const struct kv_codec *c, const uint8_t *in, size_t stride,
                                    int n, uint8_t *u, float *s);
    void (*quant_query16)(const float *qT, int r, int Hp, int16_t *q16T, float *sq);
    void (*scores16)(const int16_t *q16T, const float *sq, int r, int Hp, const uint8_t *u,
                     const float *s, int n, const float *R, float scale, float *S);
};
/* Bytes of accum's work buffer for n <= nmax rows. */
size_t kv_q8_work_bytes(int nmax, int r, int gs, int Hp);
/* NULL without AVX-512 VNNI. */
const struct kv_kern_q8 *kv_kern_q8_get(void);
#if defined(__x86_64__)
extern const struct kv_kern_q8 kv_kern_q8_avx512;
#endif

/* The table for this CPU (AVX-512 F/BW/VL/DQ when present, else scalar). */
const struct kv_kern *kv_kern_get(void);
const struct kv_kern *kv_kern_scalar(void);
#if defined(__x86_64__)
extern const struct kv_kern kv_kern_avx512;
#endif

/* exp(x) for x <= 0 as used by attention (relative error < 2e-7, 0 below -87,
 * NaN -> 0). Same bits in the AVX-512 kernels. */
float kv_expf(float x);

#endif
