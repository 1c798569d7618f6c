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
