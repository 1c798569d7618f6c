#include "model/linear.h"

#include <assert.h>
#include <string.h>

#include "quant/bf16act.h"
#ifdef __AVX512F__
#include <immintrin.h>

#include "quant/transpose_avx512.h"
#endif

/* The order model_dot_f32 defines (linear.h): lanes of DOT_LANES. */
#define DOT_LANES 16
/* model_weighted_sum_multi's register block: 16 rows x 16 columns. Each
 * pass over the value rows serves every row of the block, so a 16-row task
 * reads each value row once per 16 columns: V2-Lite q4g64 prefill of 2048
 * tokens (1 thread, 4 rounds) 297 tok/s against 291 for 8 rows x 32 and
 * 275 for 4 x 64. */
#define WSUM_ROWS 16

float model_dot_f32(const float *a, const float *b, int n)
{
    float acc[DOT_LANES] = { 0 };
    int i = 0;
    for (; i + DOT_LANES <= n; i += DOT_LANES)
        for (int l = 0; l < DOT_LANES; l++) acc[l] += a[i + l] * b[i + l];
    for (; i < n; i++) acc[0] += a[i] * b[i];
    float s = 0.0f;
    for (int l = 0; l < DOT_LANES; l++) s += acc[l];
    return s;
}

void model_dot_f32_multi(const float *const *a, int na, const float *b, int n, float *out)
{
#ifdef __AVX512F__
    static_assert(DOT_LANES == 16, "one lane per element of a 512-bit vector");
    for (; na > 0; na -= 16, a += 16, out += 16) {
        const int m = na < 16 ? na : 16;
        /* all 16 sums in registers (a short block repeats its last row) */
        const float *ap[16];
        __m512 acc[16];
        _Pragma("GCC unroll 16")
        for (int j = 0; j < 16; j++) {
            ap[j] = a[j < m ? j : m - 1];
            acc[j] = _mm512_setzero_ps();
        }
        int i = 0;
        for (; i + 16 <= n; i += 16) {
            const __m512 bv = _mm512_loadu_ps(b + i);
            _Pragma("GCC unroll 16")
            for (int j = 0; j < 16; j++) acc[j] = _mm512_add_ps(acc[j], _mm512_mul_ps(_mm512_loadu_ps(ap[j] + i), bv));
        }
        float lane0[16];
        for (int j = 0; j < m; j++) {
            lane0[j] = _mm512_cvtss_f32(acc[j]);
            for (int t = i; t < n; t++) lane0[j] += a[j][t] * b[t];
        }
        /* lane l of every sum in one vector, then the lanes in order */
        __m512i T[16];
        quant_transpose16x16_epi32((const __m512i *)acc, T);
        __m512 s = _mm512_add_ps(_mm512_setzero_ps(), _mm512_maskz_loadu_ps((__mmask16)((1u << m) - 1), lane0));
        for (int l = 1; l < 16; l++) s = _mm512_add_ps(s, _mm512_castsi512_ps(T[l]));
        _mm512_mask_storeu_ps(out, (__mmask16)((1u << m) - 1), s);
    }
#else
    for (int j = 0; j < na; j++) out[j] = model_dot_f32(a[j], b, n);
#endif
}

void model_weighted_sum_multi(const float *const *w, const int *tn, int nw, const float *v, int64_t vstride, int n,
                              float *const *out)
{
#ifdef __AVX512F__
    /* WSUM_ROWS rows x 16 columns of sums in registers while t runs: each
     * pass over t reads the value rows' 16 columns once for all the rows of
     * the block */
    enum { R = WSUM_ROWS };
    for (int i0 = 0; i0 < nw; i0 += R) {
        const int m = nw - i0 < R ? nw - i0 : R;
        const float *wr[R];
        int tr[R], tmax = 0;
        for (int j = 0; j < R; j++) {
            wr[j] = w[i0 + (j < m ? j : m - 1)];
            tr[j] = j < m ? tn[i0 + j] : 0;
            tmax = tr[j] > tmax ? tr[j] : tmax;
        }
        for (int c = 0; c < n; c += 16) {
            const __mmask16 mk = (__mmask16)(n - c >= 16 ? 0xFFFF : (1u << (n - c)) - 1);
            __m512 acc[R];
            _Pragma("GCC unroll 16")
            for (int j = 0; j < R; j++) acc[j] = _mm512_setzero_ps();
            for (int t = 0; t < tmax; t++) {
                const float *vt = v + (int64_t)t * vstride + c;
                /* rows vstride apart defeat the hardware prefetchers (the
                 * attention's value rows): fetch this chunk 4 rows on */
                if (t + 4 < tmax) __builtin_prefetch(vt + 4 * vstride);
                const __m512 vv = _mm512_maskz_loadu_ps(mk, vt);
                _Pragma("GCC unroll 16")
                for (int j = 0; j < R; j++) {
                    if (t >= tr[j]) continue;
                    acc[j] = _mm512_add_ps(acc[j], _mm512_mul_ps(_mm512_set1_ps(wr[j][t]), vv));
                }
            }
            /* constant bounds, so the sums need no address */
            _Pragma("GCC unroll 16")
            for (int j = 0; j < R; j++)
                if (j < m) _mm512_mask_storeu_ps(out[i0 + j] + c, mk, acc[j]);
        }
    }
#else
    for (int i = 0; i < nw; i++) {
        memset(out[i], 0, (size_t)n * sizeof *out[i]);
        for (int t = 0; t < tn[i]; t++) {
            const float pt = w[i][t], *vt = v + (int64_t)t * vstride;
            float *o = out[i];
#pragma omp simd
            for (int k = 0; k < n; k++) o[k] += pt * vt[k];
        }
    }
#endif
}

int model_linear(const struct qtensor *W, const float *x, int n, float *y, struct quant_scratch *s,
                 struct colibri_err *err)
{
    /* the opt-in bf16-activation product for every n, so a batched row still
     * equals the same row alone */
    if (W->act_bf16) return quant_matmul_bf16act(W, x, n, y, err);
    return quant_matmul(W, x, n, y, s, err);
}
