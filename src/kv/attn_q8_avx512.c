/* kv/attn_q8_avx512.c - the int8 dot-product consumer (AVX-512 VNNI): row
 * decoders to the u8 tile, query quantization, scores and accumulation with
 * vpdpbusd (64 multiply-adds per instruction against 16 for an f32 FMA).
 * Contract and layouts: kv/attn_kern.h (struct kv_kern_q8). */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "kv/attn_kern.h"
#include "kv/kv_num.h"

/* GCC 12 copies the accumulator of the VNNI intrinsics around (and spills
 * under pressure); the tied asm operand keeps it in place. acc += a(u8) . b(s8)
 * per 4 bytes, and acc += a(s16) . b(s16) per 2 words. */
static inline __m512i dpbusd(__m512i acc, __m512i a, __m512i b)
{
    __asm__("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(a), "v"(b));
    return acc;
}
static inline __m512i dpwssd(__m512i acc, __m512i a, __m512i b)
{
    __asm__("vpdpwssd %2, %1, %0" : "+v"(acc) : "v"(a), "v"(b));
    return acc;
}

/* ---------------------------------------------------------- row decoders */

static void q8_int8r(const struct kv_codec *c, const uint8_t *in, size_t stride, int n,
                     uint8_t *u, float *s)
{
    const int r = c->dim;
    const __m512i k80 = _mm512_set1_epi8((char)0x80);
    for (int t = 0; t < n; t++) {
        const uint8_t *row = in + (size_t)t * stride;
        uint8_t *o = u + (size_t)t * r;
        int i = 0;
        for (; i + 64 <= r; i += 64)
            _mm512_storeu_si512(o + i, _mm512_xor_si512(_mm512_loadu_si512(row + i), k80));
        for (; i < r; i++) o[i] = row[i] ^ 0x80;
        s[t] = kv_load_f32(row + r);
    }
}

static void q8_q4_0(const struct kv_codec *c, const uint8_t *in, size_t stride, int n,
                    uint8_t *u, float *s)
{
    const int r = c->dim, G = r / 32;
    const __m128i k15 = _mm_set1_epi8(15), k120 = _mm_set1_epi8(120), k136 = _mm_set1_epi8((char)136);
    for (int t = 0; t < n; t++) {
        const uint8_t *blk = in + (size_t)t * stride;
        uint8_t *o = u + (size_t)t * r;
        for (int g = 0; g < G; g++, blk += 18, o += 32) {
            uint16_t dh;
            memcpy(&dh, blk, 2);
            const float d = _cvtsh_ss(dh);
            __m128i q = _mm_loadu_si128((const __m128i *)(blk + 2));
            __m128i lo = _mm_and_si128(q, k15), hi = _mm_and_si128(_mm_srli_epi16(q, 4), k15);
            /* d = signed absmax / -8 is often negative: keep scales >= 0 (the
             * weights are unsigned) by storing -code with -d */
            const __m128i neg = _mm_set1_epi8(d < 0 ? (char)0xff : 0);
            lo = _mm_blendv_epi8(_mm_add_epi8(lo, k120), _mm_sub_epi8(k136, lo), neg);
            hi = _mm_blendv_epi8(_mm_add_epi8(hi, k120), _mm_sub_epi8(k136, hi), neg);
            s[(size_t)t * G + g] = fabsf(d);
            _mm_storeu_si128((__m128i *)o, lo);
            _mm_storeu_si128((__m128i *)(o + 16), hi);
        }
    }
}

static void q8_tq(const struct kv_codec *c, const uint8_t *in, size_t stride, int n,
                  uint8_t *u, float *s)
{
    const int b = c->bits, r = c->dim;
    const size_t nb = (size_t)r * b / 8;
    int32_t lq[16] = {0};
    for (int k = 0; k < (1 << b); k++) lq[k] = c->level_q[k] + 128;
    const __m512i lut = _mm512_loadu_si512(lq);
    const __m512i sh_lo = _mm512_setr_epi64(0, b, 2 * b, 3 * b, 4 * b, 5 * b, 6 * b, 7 * b);
    const __m512i sh_hi = _mm512_add_epi64(sh_lo, _mm512_set1_epi64(8 * b));
    const __m256i mask = _mm256_set1_epi32((1 << b) - 1);
    for (int t = 0; t < n; t++) {
        const uint8_t *row = in + (size_t)t * stride;
        uint8_t *o = u + (size_t)t * r;
        s[t] = c->gain * kv_load_f32(row + nb) / sqrtf((float)r) * c->level_unit;
        for (int i = 0; i < r; i += 16) {
            uint64_t w;
            memcpy(&w, row + (size_t)i * b / 8, 8);
            __m512i vw = _mm512_set1_epi64((long long)w);
            __m256i lo = _mm256_and_si256(_mm512_cvtepi64_epi32(_mm512_srlv_epi64(vw, sh_lo)), mask);
            __m256i hi = _mm256_and_si256(_mm512_cvtepi64_epi32(_mm512_srlv_epi64(vw, sh_hi)), mask);
            __m512i idx = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
            _mm_storeu_si128((__m128i *)(o + i), _mm512_cvtepi32_epi8(_mm512_permutexvar_epi32(idx, lut)));
        }
    }
}

/* fp8 rows as int16 codes with one scale per row: the exact e4m3 value times
 * 1023/448, rounded (|code| <= 1023, so that int32 sums of 512 products with
 * an 11-bit query, or of 64 rows with 14-bit weights, cannot overflow). The
 * rounding adds ~1e-6 relative MSE to fp8's 7e-4. */
static void q16_fp8(const struct kv_codec *c, const uint8_t *in, size_t stride, int n,
                    uint8_t *u, float *s)
{
    const int r = c->dim;
    const __m512 k = _mm512_set1_ps(0x1p120f * (1023.0f / 448.0f));
    for (int t = 0; t < n; t++) {
        const uint8_t *row = in + (size_t)t * stride;
        int16_t *o = (int16_t *)(u + (size_t)t * r * 2);
        s[t] = kv_load_f32(row + r) * (448.0f / 1023.0f);
        for (int i = 0; i < r; i += 16) {
            __m512i b = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(row + i)));
            __m512i mag = _mm512_slli_epi32(_mm512_and_si512(b, _mm512_set1_epi32(0x7f)), 20);
            __m512i v = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_castsi512_ps(mag), k));
            __mmask16 neg = _mm512_test_epi32_mask(b, _mm512_set1_epi32(0x80));
            v = _mm512_mask_sub_epi32(v, neg, _mm512_setzero_si512(), v);
            _mm256_storeu_si256((__m256i *)(o + i), _mm512_cvtepi32_epi16(v));
        }
    }
}

/* ------------------------------------------------------------------ query */

static void q8_quant_query(const float *qT, int r, int Hp, int gs, int8_t *q8T, float *sq,
                           int32_t *qsum)
{
    const int G = r / gs;
    for (int h = 0; h < Hp; h++) {
        float amax = 0.0f;
        for (int i = 0; i < r; i++) {
            const float a = fabsf(qT[(size_t)i * Hp + h]);
            amax = a > amax ? a : amax;
        }
        const float inv = amax > 0 ? 127.0f / amax : 0.0f;
        sq[h] = amax / 127.0f;
        for (int g = 0; g < G; g++) {
            int32_t sum = 0;
            for (int i = g * gs; i < (g + 1) * gs; i++) {
                int v = (int)lrintf(qT[(size_t)i * Hp + h] * inv);
                q8T[(size_t)(i / 4) * Hp * 4 + h * 4 + i % 4] = (int8_t)v;
                sum += v;
            }
            qsum[(size_t)g * Hp + h] = sum;
        }
    }
}

/* ----------------------------------------------------------------- scores */

#define KV_Q8R 8

/* Rows t..t+7 against 32 heads (NB = 2) or 16 (NB = 1) from h0, int32
 * accumulators in named registers (GCC spills arrays of vectors); the
 * per-group f32 sums go through S so that nothing else stays live. */
#define KV_Z(j) __m512i a##j = _mm512_setzero_si512(), b##j = a##j
#define KV_DP(j) do { int32_t w_; memcpy(&w_, ur + (size_t)(j) * r + i, 4);           \
                      const __m512i wv_ = _mm512_set1_epi32(w_);                          \
                      a##j = dpbusd(a##j, wv_, q0);                           \
                      if (NB == 2) b##j = dpbusd(b##j, wv_, q1); } while (0)
#define KV_OUT(j, acc, hb) do {                                                          \
        float *o_ = S + (size_t)(t + (j)) * Hp + h0 + 16 * (hb);                          \
        __m512 v_ = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(acc, corr##hb)),    \
                                  _mm512_set1_ps(s[(size_t)(t + (j)) * G + g]));          \
        _mm512_storeu_ps(o_, g ? _mm512_add_ps(_mm512_loadu_ps(o_), v_) : v_); } while (0)
static inline __attribute__((always_inline)) void
q8_scores_blk(int NB, const int8_t *q8T, const float *sq, const int32_t *qsum, int r, int gs,
              int Hp, int h0, const uint8_t *u, const float *s, int t, const float *R,
              float scale, float *S)
{
    const int G = r / gs;
    for (int g = 0; g < G; g++) {
        KV_Z(0); KV_Z(1); KV_Z(2); KV_Z(3); KV_Z(4); KV_Z(5); KV_Z(6); KV_Z(7);
        const uint8_t *ur = u + (size_t)t * r + g * gs;
        const int8_t *q = q8T + (size_t)(g * gs / 4) * Hp * 4 + h0 * 4;
        for (int i = 0; i < gs; i += 4, q += Hp * 4) {
            const __m512i q0 = _mm512_loadu_si512(q);
            const __m512i q1 = NB == 2 ? _mm512_loadu_si512(q + 64) : q0;
            KV_DP(0); KV_DP(1); KV_DP(2); KV_DP(3); KV_DP(4); KV_DP(5); KV_DP(6); KV_DP(7);
        }
        const __m512i corr0 = _mm512_slli_epi32(_mm512_loadu_si512(qsum + (size_t)g * Hp + h0), 7);
        KV_OUT(0, a0, 0); KV_OUT(1, a1, 0); KV_OUT(2, a2, 0); KV_OUT(3, a3, 0);
        KV_OUT(4, a4, 0); KV_OUT(5, a5, 0); KV_OUT(6, a6, 0); KV_OUT(7, a7, 0);
        if (NB == 2) {
            const __m512i corr1 = _mm512_slli_epi32(_mm512_loadu_si512(qsum + (size_t)g * Hp + h0 + 16), 7);
            KV_OUT(0, b0, 1); KV_OUT(1, b1, 1); KV_OUT(2, b2, 1); KV_OUT(3, b3, 1);
            KV_OUT(4, b4, 1); KV_OUT(5, b5, 1); KV_OUT(6, b6, 1); KV_OUT(7, b7, 1);
        }
    }
    const __m512 vscale = _mm512_set1_ps(scale);
    for (int b = 0; b < NB; b++) {
        const __m512 vq = _mm512_loadu_ps(sq + h0 + 16 * b);
        for (int j = 0; j < KV_Q8R; j++) {
            size_t o = (size_t)(t + j) * Hp + h0 + 16 * b;
            _mm512_storeu_ps(S + o, _mm512_mul_ps(_mm512_fmadd_ps(_mm512_loadu_ps(S + o), vq,
                                                                  (R ? _mm512_loadu_ps(R + o) : _mm512_setzero_ps())), vscale));
        }
    }
}
#undef KV_Z
#undef KV_DP
#undef KV_OUT

static void q8_scores(const int8_t *q8T, const float *sq, const int32_t *qsum, int r, int gs,
                      int Hp, const uint8_t *u, const float *s, int n, const float *R,
                      float scale, float *S)
{
    const int G = r / gs;
    const __m512 vscale = _mm512_set1_ps(scale);
    int t = 0;
    for (; t + KV_Q8R <= n; t += KV_Q8R) {
        int h0 = 0;
        for (; h0 + 32 <= Hp; h0 += 32)
            q8_scores_blk(2, q8T, sq, qsum, r, gs, Hp, h0, u, s, t, R, scale, S);
        for (; h0 < Hp; h0 += 16)
            q8_scores_blk(1, q8T, sq, qsum, r, gs, Hp, h0, u, s, t, R, scale, S);
    }
    for (; t < n; t++)
        for (int h0 = 0; h0 < Hp; h0 += 16) {
            __m512 f = _mm512_setzero_ps();
            for (int g = 0; g < G; g++) {
                __m512i a = _mm512_setzero_si512();
                const uint8_t *ur = u + (size_t)t * r + g * gs;
                const int8_t *q = q8T + (size_t)(g * gs / 4) * Hp * 4 + h0 * 4;
                for (int i = 0; i < gs; i += 4, q += Hp * 4) {
                    int32_t w;
                    memcpy(&w, ur + i, 4);
                    a = dpbusd(a, _mm512_set1_epi32(w), _mm512_loadu_si512(q));
                }
                const __m512i corr = _mm512_slli_epi32(_mm512_loadu_si512(qsum + (size_t)g * Hp + h0), 7);
                f = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(a, corr)),
                                    _mm512_set1_ps(s[(size_t)t * G + g]), f);
            }
            size_t o = (size_t)t * Hp + h0;
            _mm512_storeu_ps(S + o, _mm512_mul_ps(_mm512_fmadd_ps(f, _mm512_loadu_ps(sq + h0),
                                                                  (R ? _mm512_loadu_ps(R + o) : _mm512_setzero_ps())), vscale));
        }
}

/* int16 query for int16 codes: q16T[(i / 2) * Hp * 2 + h * 2 + i % 2], one
 * scale per head, |q| <= 2047. */
static void q16_quant_query(const float *qT, int r, int Hp, int16_t *q16T, float *sq)
{
    for (int h = 0; h < Hp; h++) {
        float amax = 0.0f;
        for (int i = 0; i < r; i++) amax = fmaxf(amax, fabsf(qT[(size_t)i * Hp + h]));
        const float inv = amax > 0 ? 2047.0f / amax : 0.0f;
        sq[h] = amax / 2047.0f;
        for (int i = 0; i < r; i++)
            q16T[(size_t)(i / 2) * Hp * 2 + h * 2 + i % 2] = (int16_t)lrintf(qT[(size_t)i * Hp + h] * inv);
    }
}

/* S[t][h] = (sq[h] * s[t] * (q16 . code16) + R[t][h]) * scale, 8 rows x 16
 * heads of int32 in registers. */
static void q16_scores(const int16_t *q16T, const float *sq, int r, int Hp, const uint8_t *u,
                       const float *s, int n, const float *R, float scale, float *S)
{
    const __m512 vscale = _mm512_set1_ps(scale);
    const size_t rb = (size_t)r * 2;
    int t = 0;
    for (; t < n; t += KV_Q8R) {
        const int nr = n - t < KV_Q8R ? n - t : KV_Q8R;
        const uint8_t *ur = u + (size_t)t * rb;
        for (int h0 = 0; h0 < Hp; h0 += 16) {
            __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
            const int16_t *q = q16T + (size_t)h0 * 2;
            if (nr == KV_Q8R) {
                for (int i = 0; i < r; i += 2, q += Hp * 2) {
                    const __m512i qv = _mm512_loadu_si512(q);
                    int32_t w;
#define KV_DP(j) (memcpy(&w, ur + (size_t)(j) * rb + 2 * i, 4), a##j = dpwssd(a##j, _mm512_set1_epi32(w), qv))
                    KV_DP(0); KV_DP(1); KV_DP(2); KV_DP(3); KV_DP(4); KV_DP(5); KV_DP(6); KV_DP(7);
#undef KV_DP
                }
            } else {
                for (int i = 0; i < r; i += 2, q += Hp * 2) {
                    const __m512i qv = _mm512_loadu_si512(q);
                    int32_t w;
                    memcpy(&w, ur + 2 * i, 4);
                    a0 = dpwssd(a0, _mm512_set1_epi32(w), qv);
                    if (nr > 1) { memcpy(&w, ur + rb + 2 * i, 4); a1 = dpwssd(a1, _mm512_set1_epi32(w), qv); }
                    if (nr > 2) { memcpy(&w, ur + 2 * rb + 2 * i, 4); a2 = dpwssd(a2, _mm512_set1_epi32(w), qv); }
                    if (nr > 3) { memcpy(&w, ur + 3 * rb + 2 * i, 4); a3 = dpwssd(a3, _mm512_set1_epi32(w), qv); }
                    if (nr > 4) { memcpy(&w, ur + 4 * rb + 2 * i, 4); a4 = dpwssd(a4, _mm512_set1_epi32(w), qv); }
                    if (nr > 5) { memcpy(&w, ur + 5 * rb + 2 * i, 4); a5 = dpwssd(a5, _mm512_set1_epi32(w), qv); }
                    if (nr > 6) { memcpy(&w, ur + 6 * rb + 2 * i, 4); a6 = dpwssd(a6, _mm512_set1_epi32(w), qv); }
                }
            }
            const __m512 vq = _mm512_loadu_ps(sq + h0);
            const __m512i acc[KV_Q8R] = {a0, a1, a2, a3, a4, a5, a6, a7};
            for (int j = 0; j < nr; j++) {
                size_t o = (size_t)(t + j) * Hp + h0;
                __m512 v = _mm512_mul_ps(_mm512_cvtepi32_ps(acc[j]), _mm512_mul_ps(vq, _mm512_set1_ps(s[t + j])));
                _mm512_storeu_ps(S + o, _mm512_mul_ps(_mm512_add_ps(v, R ? _mm512_loadu_ps(R + o) : _mm512_setzero_ps()), vscale));
            }
        }
    }
}

/* -------------------------------------------------------------- accumulate */

/* The weights have a wide range (softmax tails), so they get 15 bits: the
 * accumulation uses int16 pairs (vpdpwssd, 32 multiply-adds per instruction)
 * with the codes as int16, two rows interleaved per lane. Codes with one scale
 * per 32 columns (q4_0, |code| <= 8) are brought to one scale per row first
 * (code * s_g / s_max * 248, within 1/4000 of the row's largest value), so
 * that every row needs one weight per head, not one per group; their weights
 * then get 14 bits, so that 64 rows of products stay below 2^31. */
static void q8_accum(const float *P, int Hp, int H, const uint8_t *u, const float *s, int n,
                     int r, int gs, float *acc, uint8_t *work)
{
    /* gs == 0: u holds int16 codes (|code| <= 1023), one scale per row */
    const int code16 = gs == 0;
    if (code16) gs = r;
    const int G = r / gs, n2 = (n + 1) & ~1, T2 = n2 / 2;
    int32_t *vT = (int32_t *)work;                        /* [T2][r] (code t, code t+1) */
    int32_t *w16 = vT + (size_t)T2 * r;                   /* [T2][Hp] (w t, w t+1) */
    float *srow = (float *)(w16 + (size_t)T2 * Hp);       /* [n2] one scale per row */
    float *ws = srow + n2;                                /* [Hp] */
    const __m128i k80 = _mm_set1_epi8((char)0x80);
    const __m512i lo16 = _mm512_set1_epi32(0xffff);

    for (int t = 0; t < n2; t++) {
        if (t >= n) { srow[t] = 0.0f; continue; }
        if (G == 1) { srow[t] = s[t]; continue; }
        float m = 0.0f;
        for (int g = 0; g < G; g++) m = s[(size_t)t * G + g] > m ? s[(size_t)t * G + g] : m;
        srow[t] = m / 248.0f;
    }
    for (int t2 = 0; t2 < T2 && code16; t2++) {
        const int16_t *ra = (const int16_t *)u + (size_t)(2 * t2) * r;
        const int16_t *rb = 2 * t2 + 1 < n ? ra + r : NULL;
        for (int i = 0; i < r; i += 16) {
            __m512i a = _mm512_cvtepi16_epi32(_mm256_loadu_si256((const __m256i *)(ra + i)));
            __m512i b = rb ? _mm512_cvtepi16_epi32(_mm256_loadu_si256((const __m256i *)(rb + i)))
                           : _mm512_setzero_si512();
            _mm512_storeu_si512(vT + (size_t)t2 * r + i,
                                _mm512_or_si512(_mm512_and_si512(a, lo16), _mm512_slli_epi32(b, 16)));
        }
    }
    for (int t2 = 0; t2 < T2 && !code16; t2++) {
        const uint8_t *ra = u + (size_t)(2 * t2) * r;
        const uint8_t *rb = 2 * t2 + 1 < n ? ra + r : NULL;
        for (int i = 0; i < r; i += 16) {
            __m512i a = _mm512_cvtepi8_epi32(_mm_xor_si128(_mm_loadu_si128((const __m128i *)(ra + i)), k80));
            __m512i b = rb ? _mm512_cvtepi8_epi32(_mm_xor_si128(_mm_loadu_si128((const __m128i *)(rb + i)), k80))
                           : _mm512_setzero_si512();
            if (G > 1) {
                const int g = i / gs, t = 2 * t2;
                const float fa = srow[t] > 0 ? s[(size_t)t * G + g] / srow[t] : 0.0f;
                const float fb = rb && srow[t + 1] > 0 ? s[(size_t)(t + 1) * G + g] / srow[t + 1] : 0.0f;
                a = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_cvtepi32_ps(a), _mm512_set1_ps(fa)));
                b = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_cvtepi32_ps(b), _mm512_set1_ps(fb)));
            }
            _mm512_storeu_si512(vT + (size_t)t2 * r + i,
                                _mm512_or_si512(_mm512_and_si512(a, lo16), _mm512_slli_epi32(b, 16)));
        }
    }
    /* weights: w = P * srow / ws with ws = pmax[h] * smax / 32767 (an upper
     * bound of the tile's weights, so no second pass over them) */
    float smax = 0.0f;
    for (int t = 0; t < n; t++) smax = srow[t] > smax ? srow[t] : smax;
    const float sinv = smax > 0 ? 1.0f / smax : 0.0f;
    const float wmax = G > 1 || code16 ? 16383.0f : 32767.0f;
    for (int h0 = 0; h0 < Hp; h0 += 16) {
        __m512 m = _mm512_setzero_ps();
        for (int t = 0; t < n; t++) m = _mm512_max_ps(m, _mm512_loadu_ps(P + (size_t)t * Hp + h0));
        __mmask16 live = H - h0 >= 16 ? 0xffff : H - h0 <= 0 ? 0 : (__mmask16)((1u << (H - h0)) - 1);
        __mmask16 pos = _mm512_cmp_ps_mask(m, _mm512_setzero_ps(), _CMP_GT_OQ) & live;
        const __m512 vp = _mm512_maskz_div_ps(pos, _mm512_set1_ps(wmax), m);
        _mm512_storeu_ps(ws + h0, _mm512_maskz_mul_ps(pos, m, _mm512_set1_ps(smax / wmax)));
        for (int t2 = 0; t2 < T2; t2++) {
            __m512i wv[2];
            for (int k = 0; k < 2; k++) {
                int t = 2 * t2 + k;
                if (t >= n) { wv[k] = _mm512_setzero_si512(); continue; }
                __m512 w = _mm512_mul_ps(_mm512_mul_ps(_mm512_loadu_ps(P + (size_t)t * Hp + h0), vp),
                                         _mm512_set1_ps(srow[t] * sinv));
                w = _mm512_min_ps(_mm512_max_ps(w, _mm512_setzero_ps()), _mm512_set1_ps(wmax));
                wv[k] = _mm512_cvtps_epi32(w);
            }
            _mm512_storeu_si512(w16 + (size_t)t2 * Hp + h0,
                                _mm512_or_si512(wv[0], _mm512_slli_epi32(wv[1], 16)));
        }
    }
    /* acc[h][i] += ws[h] * sum_t w16 * code: 8 heads x 32 columns of int32 in
     * registers over the tile */
    for (int h0 = 0; h0 < Hp && h0 < H; h0 += 8) {
        const int32_t *wg = w16 + h0;
        for (int i = 0; i < r; i += 32) {
            __m512i c00 = _mm512_setzero_si512(), c01 = c00, c10 = c00, c11 = c00, c20 = c00,
                    c21 = c00, c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00,
                    c60 = c00, c61 = c00, c70 = c00, c71 = c00;
            for (int t2 = 0; t2 < T2; t2++) {
                const int32_t *xv = vT + (size_t)t2 * r + i;
                const __m512i x0 = _mm512_loadu_si512(xv), x1 = _mm512_loadu_si512(xv + 16);
                const int32_t *wt = wg + (size_t)t2 * Hp;
#define KV_DP(h) (c##h##0 = dpwssd(c##h##0, _mm512_set1_epi32(wt[h]), x0), \
                  c##h##1 = dpwssd(c##h##1, _mm512_set1_epi32(wt[h]), x1))
                KV_DP(0); KV_DP(1); KV_DP(2); KV_DP(3); KV_DP(4); KV_DP(5); KV_DP(6); KV_DP(7);
#undef KV_DP
            }
#define KV_ST(h) do {                                                                        \
        float *a = acc + (size_t)(h0 + (h)) * r + i;                                         \
        const __m512 sc = _mm512_set1_ps(ws[h0 + (h)]);                                      \
        _mm512_storeu_ps(a, _mm512_fmadd_ps(_mm512_cvtepi32_ps(c##h##0), sc, _mm512_loadu_ps(a))); \
        _mm512_storeu_ps(a + 16, _mm512_fmadd_ps(_mm512_cvtepi32_ps(c##h##1), sc, _mm512_loadu_ps(a + 16))); \
    } while (0)
            KV_ST(0); KV_ST(1); KV_ST(2); KV_ST(3); KV_ST(4); KV_ST(5); KV_ST(6); KV_ST(7);
#undef KV_ST
        }
    }
}

const struct kv_kern_q8 kv_kern_q8_avx512 = {
    .decode = {
        [KV_TIER_INT8R] = q8_int8r,
        [KV_TIER_Q4_0] = q8_q4_0,
        [KV_TIER_TQ4] = q8_tq,
        [KV_TIER_TQ3] = q8_tq,
        [KV_TIER_TQ2] = q8_tq,
    },
    .decode16 = {
        [KV_TIER_FP8] = q16_fp8,
    },
    .quant_query = q8_quant_query,
    .scores = q8_scores,
    .accum = q8_accum,
    .quant_query16 = q16_quant_query,
    .scores16 = q16_scores,
};
