/* kv/attn_kern_avx512.c - AVX-512 versions of the attention kernels and the
 * row decoders, bit-identical to the scalar ones in attn_kern.c / codec_*.c
 * (same fmaf order, same exp polynomial, same per-element products).
 * Most of the decode time is spent in scores() and accum(): heads sit in the
 * lanes of scores() (each cached value is broadcast once to 16 heads) and the
 * row values sit in the lanes of accum() (each weight is broadcast once). */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "kv/attn_kern.h"
#include "kv/codec_impl.h"
#include "kv/kv_num.h"

static inline __m512 exp512(__m512 x)
{
    __mmask16 ok = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-87.0f), _CMP_GE_OQ);
    x = _mm512_min_ps(x, _mm512_set1_ps(88.0f));
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fmadd_ps(n, _mm512_set1_ps(-0.693359375f), x);
    r = _mm512_fmadd_ps(n, _mm512_set1_ps(2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.9875691500e-4f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
    __m512 r2 = _mm512_mul_ps(r, r);
    __m512 e = _mm512_add_ps(_mm512_fmadd_ps(p, r2, r), _mm512_set1_ps(1.0f));
    __m512i bits = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
    return _mm512_maskz_mul_ps(ok, e, _mm512_castsi512_ps(bits));
}

#define KV_SR 8   /* rows per scores() register block */

static void scores_avx512(const float *qa, int da, const float *qb, int db, int ldq,
                          const float *a, size_t sa, const float *b, size_t sb, int n,
                          float scale, float *out, int ldo)
{
    const __m512 vs = _mm512_set1_ps(scale);
    int t = 0;
    for (; t + KV_SR <= n; t += KV_SR) {
        const float *ar = a + t * sa, *br = b ? b + t * sb : NULL;
        for (int h0 = 0; h0 < ldq; h0 += 16) {
            __m512 c0 = _mm512_setzero_ps(), c1 = c0, c2 = c0, c3 = c0, c4 = c0, c5 = c0, c6 = c0, c7 = c0;
            const float *q = qa + h0;
            for (int i = 0; i < da; i++, q += ldq) {
                __m512 v = _mm512_loadu_ps(q);
                c0 = _mm512_fmadd_ps(v, _mm512_set1_ps(ar[i]), c0);
                c1 = _mm512_fmadd_ps(v, _mm512_set1_ps(ar[sa + i]), c1);
                c2 = _mm512_fmadd_ps(v, _mm512_set1_ps(ar[2 * sa + i]), c2);
                c3 = _mm512_fmadd_ps(v, _mm512_set1_ps(ar[3 * sa + i]), c3);
                c4 = _mm512_fmadd_ps(v, _mm512_set1_ps(ar[4 * sa + i]), c4);
                c5 = _mm512_fmadd_ps(v, _mm512_set1_ps(ar[5 * sa + i]), c5);
                c6 = _mm512_fmadd_ps(v, _mm512_set1_ps(ar[6 * sa + i]), c6);
                c7 = _mm512_fmadd_ps(v, _mm512_set1_ps(ar[7 * sa + i]), c7);
            }
            __m512 d0 = _mm512_setzero_ps(), d1 = d0, d2 = d0, d3 = d0, d4 = d0, d5 = d0, d6 = d0, d7 = d0;
            q = qb ? qb + h0 : NULL;
            for (int j = 0; j < db; j++, q += ldq) {
                __m512 v = _mm512_loadu_ps(q);
                d0 = _mm512_fmadd_ps(v, _mm512_set1_ps(br[j]), d0);
                d1 = _mm512_fmadd_ps(v, _mm512_set1_ps(br[sb + j]), d1);
                d2 = _mm512_fmadd_ps(v, _mm512_set1_ps(br[2 * sb + j]), d2);
                d3 = _mm512_fmadd_ps(v, _mm512_set1_ps(br[3 * sb + j]), d3);
                d4 = _mm512_fmadd_ps(v, _mm512_set1_ps(br[4 * sb + j]), d4);
                d5 = _mm512_fmadd_ps(v, _mm512_set1_ps(br[5 * sb + j]), d5);
                d6 = _mm512_fmadd_ps(v, _mm512_set1_ps(br[6 * sb + j]), d6);
                d7 = _mm512_fmadd_ps(v, _mm512_set1_ps(br[7 * sb + j]), d7);
            }
            float *o = out + (size_t)t * ldo + h0;
            _mm512_storeu_ps(o, _mm512_mul_ps(_mm512_add_ps(c0, d0), vs));
            _mm512_storeu_ps(o + ldo, _mm512_mul_ps(_mm512_add_ps(c1, d1), vs));
            _mm512_storeu_ps(o + 2 * ldo, _mm512_mul_ps(_mm512_add_ps(c2, d2), vs));
            _mm512_storeu_ps(o + 3 * ldo, _mm512_mul_ps(_mm512_add_ps(c3, d3), vs));
            _mm512_storeu_ps(o + 4 * ldo, _mm512_mul_ps(_mm512_add_ps(c4, d4), vs));
            _mm512_storeu_ps(o + 5 * ldo, _mm512_mul_ps(_mm512_add_ps(c5, d5), vs));
            _mm512_storeu_ps(o + 6 * ldo, _mm512_mul_ps(_mm512_add_ps(c6, d6), vs));
            _mm512_storeu_ps(o + 7 * ldo, _mm512_mul_ps(_mm512_add_ps(c7, d7), vs));
        }
    }
    for (; t < n; t++) {
        const float *ar = a + t * sa, *br = b ? b + t * sb : NULL;
        for (int h0 = 0; h0 < ldq; h0 += 16) {
            __m512 c = _mm512_setzero_ps(), d = c;
            for (int i = 0; i < da; i++)
                c = _mm512_fmadd_ps(_mm512_loadu_ps(qa + (size_t)i * ldq + h0), _mm512_set1_ps(ar[i]), c);
            for (int j = 0; j < db; j++)
                d = _mm512_fmadd_ps(_mm512_loadu_ps(qb + (size_t)j * ldq + h0), _mm512_set1_ps(br[j]), d);
            _mm512_storeu_ps(out + (size_t)t * ldo + h0, _mm512_mul_ps(_mm512_add_ps(c, d), vs));
        }
    }
}

/* 8 heads x 32 columns of acc in 16 named registers, t ascending (GCC keeps
 * an array of __m512 on the stack, so the block is spelled out). */
static void accum_8x32(const float *p, int ldp, const float *x, size_t sx, int n,
                       float *acc, int lda)
{
#define KV_LD(h) __m512 a##h##0 = _mm512_loadu_ps(acc + (size_t)(h) * lda), \
                        a##h##1 = _mm512_loadu_ps(acc + (size_t)(h) * lda + 16)
    KV_LD(0); KV_LD(1); KV_LD(2); KV_LD(3); KV_LD(4); KV_LD(5); KV_LD(6); KV_LD(7);
#undef KV_LD
    for (int t = 0; t < n; t++) {
        const __m512 x0 = _mm512_loadu_ps(x + t * sx), x1 = _mm512_loadu_ps(x + t * sx + 16);
        const float *pt = p + (size_t)t * ldp;
#define KV_FMA(h) do { const __m512 w = _mm512_set1_ps(pt[h]);  \
                       a##h##0 = _mm512_fmadd_ps(w, x0, a##h##0); \
                       a##h##1 = _mm512_fmadd_ps(w, x1, a##h##1); } while (0)
        KV_FMA(0); KV_FMA(1); KV_FMA(2); KV_FMA(3); KV_FMA(4); KV_FMA(5); KV_FMA(6); KV_FMA(7);
#undef KV_FMA
    }
#define KV_ST(h) do { _mm512_storeu_ps(acc + (size_t)(h) * lda, a##h##0); \
                      _mm512_storeu_ps(acc + (size_t)(h) * lda + 16, a##h##1); } while (0)
    KV_ST(0); KV_ST(1); KV_ST(2); KV_ST(3); KV_ST(4); KV_ST(5); KV_ST(6); KV_ST(7);
#undef KV_ST
}

/* Any nh <= 8 heads x nv (1 or 2) x 16 columns: tails, not the hot loop. */
static void accum_blk(int nh, int nv, const float *p, int ldp, const float *x, size_t sx,
                      int n, float *acc, int lda)
{
    __m512 r[8][2];
    for (int h = 0; h < nh; h++)
        for (int v = 0; v < nv; v++) r[h][v] = _mm512_loadu_ps(acc + (size_t)h * lda + 16 * v);
    for (int t = 0; t < n; t++) {
        for (int v = 0; v < nv; v++) {
            const __m512 xv = _mm512_loadu_ps(x + t * sx + 16 * v);
            for (int h = 0; h < nh; h++)
                r[h][v] = _mm512_fmadd_ps(_mm512_set1_ps(p[(size_t)t * ldp + h]), xv, r[h][v]);
        }
    }
    for (int h = 0; h < nh; h++)
        for (int v = 0; v < nv; v++) _mm512_storeu_ps(acc + (size_t)h * lda + 16 * v, r[h][v]);
}

static void accum_avx512(const float *p, int ldp, int H, const float *x, size_t sx,
                         int i0, int i1, int n, float *acc, int lda)
{
    for (int h0 = 0; h0 < H; h0 += 8) {
        const int nh = H - h0 < 8 ? H - h0 : 8;
        const float *ph = p + h0;
        float *ah = acc + (size_t)h0 * lda;
        int i = i0;
        if (nh == 8)
            for (; i + 32 <= i1; i += 32) accum_8x32(ph, ldp, x + i, sx, n, ah + i, lda);
        for (; i + 32 <= i1; i += 32) accum_blk(nh, 2, ph, ldp, x + i, sx, n, ah + i, lda);
        for (; i + 16 <= i1; i += 16) accum_blk(nh, 1, ph, ldp, x + i, sx, n, ah + i, lda);
        for (; i < i1; i++)
            for (int h = 0; h < nh; h++)
                for (int t = 0; t < n; t++)
                    ah[(size_t)h * lda + i] = __builtin_fmaf(ph[(size_t)t * ldp + h], x[t * sx + i],
                                                             ah[(size_t)h * lda + i]);
    }
}

static void colmax_avx512(const float *l, int ld, int Hp, int n, float *m)
{
    for (int h0 = 0; h0 < Hp; h0 += 16) {
        __m512 v = _mm512_loadu_ps(m + h0);
        for (int t = 0; t < n; t++) v = _mm512_max_ps(_mm512_loadu_ps(l + (size_t)t * ld + h0), v);
        _mm512_storeu_ps(m + h0, v);
    }
}

static void expsum_avx512(const float *l, int ld, const float *m, int Hp, int n,
                          float *p, float *sum)
{
    for (int h0 = 0; h0 < Hp; h0 += 16) {
        const __m512 vm = _mm512_loadu_ps(m + h0);
        __m512 s = _mm512_loadu_ps(sum + h0);
        for (int t = 0; t < n; t++) {
            __m512 e = exp512(_mm512_sub_ps(_mm512_loadu_ps(l + (size_t)t * ld + h0), vm));
            _mm512_storeu_ps(p + (size_t)t * ld + h0, e);
            s = _mm512_add_ps(s, e);
        }
        _mm512_storeu_ps(sum + h0, s);
    }
}

/* ---------------------------------------------------------- row decoders */

static void rows_bf16(const struct kv_codec *c, const uint8_t *in, size_t stride, int n,
                      float *out, size_t ldo)
{
    for (int t = 0; t < n; t++) {
        const uint8_t *r = in + (size_t)t * stride;
        float *o = out + (size_t)t * ldo;
        int i = 0;
        for (; i + 16 <= c->dim; i += 16) {
            __m512i v = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(r + 2 * i)));
            _mm512_storeu_ps(o + i, _mm512_castsi512_ps(_mm512_slli_epi32(v, 16)));
        }
        for (; i < c->dim; i++) {
            uint16_t h;
            memcpy(&h, r + 2 * i, 2);
            o[i] = kv_bf16_to_f32(h);
        }
    }
}

/* e4m3 without NaN codes (the encoder never writes them): the 7 magnitude
 * bits shifted into an f32 exponent/mantissa and scaled by 2^120 give the
 * exact value, subnormals included. */
static void rows_fp8(const struct kv_codec *c, const uint8_t *in, size_t stride, int n,
                     float *out, size_t ldo)
{
    const __m512 k120 = _mm512_set1_ps(0x1p120f);
    for (int t = 0; t < n; t++) {
        const uint8_t *r = in + (size_t)t * stride;
        float *o = out + (size_t)t * ldo;
        const float scale = kv_load_f32(r + c->dim);
        if (scale == 0.0f) {
            memset(o, 0, (size_t)c->dim * sizeof *o);
            continue;
        }
        const __m512 vs = _mm512_set1_ps(scale);
        int i = 0;
        for (; i + 16 <= c->dim; i += 16) {
            __m512i b = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(r + i)));
            __m512i mag = _mm512_slli_epi32(_mm512_and_si512(b, _mm512_set1_epi32(0x7f)), 20);
            __m512i sgn = _mm512_slli_epi32(_mm512_and_si512(b, _mm512_set1_epi32(0x80)), 24);
            __m512 v = _mm512_mul_ps(_mm512_castsi512_ps(mag), k120);
            v = _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(v), sgn));
            _mm512_storeu_ps(o + i, _mm512_mul_ps(v, vs));
        }
        for (; i < c->dim; i++) {
            uint8_t b = r[i];
            float v = kv_bits_f32((uint32_t)(b & 0x7f) << 20) * 0x1p120f;
            o[i] = (b & 0x80 ? -v : v) * scale;
        }
    }
}

static void rows_int8r(const struct kv_codec *c, const uint8_t *in, size_t stride, int n,
                       float *out, size_t ldo)
{
    for (int t = 0; t < n; t++) {
        const uint8_t *r = in + (size_t)t * stride;
        float *o = out + (size_t)t * ldo;
        const float scale = kv_load_f32(r + c->dim);
        const __m512 vs = _mm512_set1_ps(scale);
        int i = 0;
        for (; i + 16 <= c->dim; i += 16) {
            __m512i v = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(r + i)));
            _mm512_storeu_ps(o + i, _mm512_mul_ps(_mm512_cvtepi32_ps(v), vs));
        }
        for (; i < c->dim; i++) o[i] = (float)(int8_t)r[i] * scale;
    }
}

static void rows_q4_0(const struct kv_codec *c, const uint8_t *in, size_t stride, int n,
                      float *out, size_t ldo)
{
    const __m512i k15 = _mm512_set1_epi32(15), k8 = _mm512_set1_epi32(8);
    for (int t = 0; t < n; t++) {
        const uint8_t *r = in + (size_t)t * stride;
        float *o = out + (size_t)t * ldo;
        for (int b = 0; b < c->dim / 32; b++, r += 18, o += 32) {
            uint16_t dh;
            memcpy(&dh, r, 2);
            const __m512 d = _mm512_set1_ps(kv_f16_to_f32(dh));
            __m512i q = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(r + 2)));
            __m512i lo = _mm512_sub_epi32(_mm512_and_si512(q, k15), k8);
            __m512i hi = _mm512_sub_epi32(_mm512_srli_epi32(q, 4), k8);
            _mm512_storeu_ps(o, _mm512_mul_ps(_mm512_cvtepi32_ps(lo), d));
            _mm512_storeu_ps(o + 16, _mm512_mul_ps(_mm512_cvtepi32_ps(hi), d));
        }
    }
}

/* 16 indices of b bits = 2b bytes, read as one 64-bit word (the row's norm
 * follows the indices, so the over-read stays inside the row). */
static void rows_tq(const struct kv_codec *c, const uint8_t *in, size_t stride, int n,
                    float *out, size_t ldo)
{
    const int b = c->bits, dim = c->dim;
    const size_t nb = (size_t)dim * b / 8;
    __m512i sh_lo = _mm512_setr_epi64(0, b, 2 * b, 3 * b, 4 * b, 5 * b, 6 * b, 7 * b);
    __m512i sh_hi = _mm512_add_epi64(sh_lo, _mm512_set1_epi64(8 * b));
    const __m256i mask = _mm256_set1_epi32((1 << b) - 1);
    for (int t = 0; t < n; t++) {
        const uint8_t *r = in + (size_t)t * stride;
        float *o = out + (size_t)t * ldo;
        const float s = c->gain * kv_load_f32(r + nb) / sqrtf((float)dim);  /* as kv_tq_decode */
        float lv[16] = {0};
        for (int k = 0; k < (1 << b); k++) lv[k] = c->level[k] * s;
        const __m512 lut = _mm512_loadu_ps(lv);
        if (dim % 16 == 0 && nb >= 4) {
            for (int i = 0; i < dim; i += 16) {
                uint64_t w;
                memcpy(&w, r + (size_t)i * b / 8, 8);
                __m512i vw = _mm512_set1_epi64((long long)w);
                __m256i lo = _mm256_and_si256(_mm512_cvtepi64_epi32(_mm512_srlv_epi64(vw, sh_lo)), mask);
                __m256i hi = _mm256_and_si256(_mm512_cvtepi64_epi32(_mm512_srlv_epi64(vw, sh_hi)), mask);
                __m512i idx = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
                _mm512_storeu_ps(o + i, _mm512_permutexvar_ps(idx, lut));
            }
        } else {
            size_t pos = 0;
            for (int i = 0; i < dim; i++) o[i] = lv[kv_bits_get(r, &pos, b)];
        }
    }
}

/* 16 indices of b <= 5 bits starting at bit `pos`: two 64-bit reads of 8 * b
 * (+7) bits each (the row's radius follows the indices, so a read never
 * leaves the row). */
static inline __m512i polar_idx16(const uint8_t *row, size_t pos, int b, __m512i sh)
{
    __m256i half[2];
    for (int k = 0; k < 2; k++, pos += (size_t)8 * b) {
        uint64_t w;
        memcpy(&w, row + pos / 8, 8);
        w >>= pos % 8;
        half[k] = _mm512_cvtepi64_epi32(_mm512_srlv_epi64(_mm512_set1_epi64((long long)w), sh));
    }
    __m512i idx = _mm512_inserti64x4(_mm512_castsi256_si512(half[0]), half[1], 1);
    return _mm512_and_si512(idx, _mm512_set1_epi32((1 << b) - 1));
}

/* The tree expansion of kv_polar_decode, 16 angles at a time, level by level
 * into a second buffer (the same products, so the same bits). */
static void rows_polar(const struct kv_codec *c, const uint8_t *in, size_t stride, int n,
                       float *out, size_t ldo)
{
    const struct kv_polar_tab *p = c->polar;
    const size_t nb = (p->off[p->L + 1] + 7) / 8;
    const __m512i ilo = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
    const __m512i ihi = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
    float bufa[KV_DIM_MAX / 2], bufb[KV_DIM_MAX / 2];
    for (int t = 0; t < n; t++) {
        const uint8_t *row = in + (size_t)t * stride;
        float *o = out + (size_t)t * ldo, *v = bufa, *w = bufb;
        v[0] = kv_load_f32(row + nb);
        for (int l = p->L; l >= 1; l--) {
            const int m = c->dim >> l, b = p->bits[l];
            float *dst = l == 1 ? o : w;
            int i = 0;
            if (m >= 16) {
                const __m512i sh = _mm512_setr_epi64(0, b, 2 * b, 3 * b, 4 * b, 5 * b, 6 * b, 7 * b);
                const __m512 c0 = _mm512_loadu_ps(p->cs[l]), c1 = _mm512_loadu_ps(p->cs[l] + 16);
                const __m512 s0 = _mm512_loadu_ps(p->sn[l]), s1 = _mm512_loadu_ps(p->sn[l] + 16);
                for (; i + 16 <= m; i += 16) {
                    __m512i idx = polar_idx16(row, p->off[l] + (size_t)i * b, b, sh);
                    __m512 cv = _mm512_permutex2var_ps(c0, idx, c1), sv = _mm512_permutex2var_ps(s0, idx, s1);
                    __m512 r = _mm512_loadu_ps(v + i);
                    __m512 x = _mm512_mul_ps(r, cv), y = _mm512_mul_ps(r, sv);
                    _mm512_storeu_ps(dst + 2 * i, _mm512_permutex2var_ps(x, ilo, y));
                    _mm512_storeu_ps(dst + 2 * i + 16, _mm512_permutex2var_ps(x, ihi, y));
                }
            }
            for (; i < m; i++) {
                size_t pos = p->off[l] + (size_t)i * b;
                unsigned k = kv_bits_get(row, &pos, b);
                dst[2 * i] = v[i] * p->cs[l][k];
                dst[2 * i + 1] = v[i] * p->sn[l][k];
            }
            float *tmp = v;
            v = dst;
            w = tmp;
        }
    }
}

const struct kv_kern kv_kern_avx512 = {
    .name = "avx512",
    .scores = scores_avx512,
    .accum = accum_avx512,
    .colmax = colmax_avx512,
    .expsum = expsum_avx512,
    .rows = {
        [KV_TIER_BF16] = rows_bf16,
        [KV_TIER_FP8] = rows_fp8,
        [KV_TIER_INT8R] = rows_int8r,
        [KV_TIER_Q4_0] = rows_q4_0,
        [KV_TIER_TQ4] = rows_tq,
        [KV_TIER_TQ3] = rows_tq,
        [KV_TIER_TQ2] = rows_tq,
        [KV_TIER_POLAR4] = rows_polar,
        [KV_TIER_POLAR3] = rows_polar,
    },
};
