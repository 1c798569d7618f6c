#include "model/linear.h"

#include <assert.h>

#include "quant/bf16act.h"
#ifdef __AVX512F__
#include <immintrin.h>

#include "quant/transpose_avx512.h"
#endif

/* The order model_dot_f32 defines (linear.h): lanes of DOT_LANES. */
#define DOT_LANES 16

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

void model_linear(const struct qtensor *W, const float *x, int n, float *y)
{
    /* the opt-in bf16-activation product for every n, so a batched row still
     * equals the same row alone; if its buffers cannot be allocated this
     * falls through to the f32 product, as quant_matmul falls back to the
     * scalar level */
    if (W->act_bf16 && quant_matmul_bf16act(W, x, n, y, NULL) == 0) return;
    if (n == 1) quant_matvec(W, x, y);
    else quant_matmul(W, x, n, y);
}
