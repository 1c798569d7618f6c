/* quant/kernels_ref.c - the scalar reference kernels: every format, pure f32
 * (decode each weight exactly, multiply by the f32 activation, accumulate in
 * f32 within a scale group, then apply the group's scale). Every faster
 * kernel is tested against these. Also the reference int8 activation
 * quantizer used by the SIMD levels. */
#include <math.h>
#include <string.h>

#include "quant/fp8.h"
#include "quant/half.h"
#include "quant/kernels.h"
#include "quant/mxfp4.h"

static const uint8_t *row_ptr(const struct qtensor *W, int r)
{
    return (const uint8_t *)W->data + (size_t)r * quant_fmt_row_bytes(W->fmt, W->cols);
}

static float dot_f32(const struct qtensor *W, int r, const float *x)
{
    const uint8_t *p = row_ptr(W, r);
    float acc = 0.0f;
    for (int c = 0; c < W->cols; c++) {
        float w;
        memcpy(&w, p + 4 * (size_t)c, 4);
        acc += w * x[c];
    }
    return acc;
}

static float dot_bf16(const struct qtensor *W, int r, const float *x)
{
    const uint8_t *p = row_ptr(W, r);
    float acc = 0.0f;
    for (int c = 0; c < W->cols; c++) {
        uint16_t h;
        memcpy(&h, p + 2 * (size_t)c, 2);
        acc += quant_bf16_to_f32(h) * x[c];
    }
    return acc;
}

static float dot_f16(const struct qtensor *W, int r, const float *x)
{
    const uint8_t *p = row_ptr(W, r);
    float acc = 0.0f;
    for (int c = 0; c < W->cols; c++) {
        uint16_t h;
        memcpy(&h, p + 2 * (size_t)c, 2);
        acc += quant_f16_to_f32(h) * x[c];
    }
    return acc;
}

static float dot_q8(const struct qtensor *W, int r, const float *x)
{
    const int8_t *p = (const int8_t *)row_ptr(W, r);
    float acc = 0.0f;
    for (int c = 0; c < W->cols; c++) acc += (float)p[c] * x[c];
    return acc * W->scales[r];
}

static float dot_q4_g(const struct qtensor *W, int r, const float *x, int g)
{
    const uint8_t *p = row_ptr(W, r);
    int ng = (W->cols + g - 1) / g;
    const float *s = W->scales + (size_t)r * ng;
    float acc = 0.0f;
    for (int gi = 0; gi < ng; gi++) {
        int c1 = (gi + 1) * g < W->cols ? (gi + 1) * g : W->cols;
        float part = 0.0f;
        for (int c = gi * g; c < c1; c++) part += (float)quant_int4_get(p, c) * x[c];
        acc += part * s[gi];
    }
    return acc;
}

static float dot_q4(const struct qtensor *W, int r, const float *x) { return dot_q4_g(W, r, x, W->cols); }
static float dot_q4g32(const struct qtensor *W, int r, const float *x) { return dot_q4_g(W, r, x, 32); }
static float dot_q4g64(const struct qtensor *W, int r, const float *x) { return dot_q4_g(W, r, x, 64); }
static float dot_q4g128(const struct qtensor *W, int r, const float *x) { return dot_q4_g(W, r, x, 128); }

static float dot_fp8b(const struct qtensor *W, int r, const float *x)
{
    const uint8_t *p = row_ptr(W, r);
    const int B = QUANT_FP8B_BLOCK;
    int nbc = (W->cols + B - 1) / B;
    const float *s = W->scales + (size_t)(r / B) * nbc;
    float acc = 0.0f;
    for (int bc = 0; bc < nbc; bc++) {
        int c1 = (bc + 1) * B < W->cols ? (bc + 1) * B : W->cols;
        float part = 0.0f;
        for (int c = bc * B; c < c1; c++) part += quant_fp8_e4m3_table[p[c]] * x[c];
        acc += part * s[bc];
    }
    return acc;
}

/* Twice each e2m1 value times x, summed in f32 per 32-column block, then
 * times half the block scale (so the products are those of to_f32's
 * weights, times 2 exactly). */
static float dot_mxfp4(const struct qtensor *W, int r, const float *x)
{
    const uint8_t *p = row_ptr(W, r);
    int nb = (W->cols + QUANT_MX_BLOCK - 1) / QUANT_MX_BLOCK;
    const uint8_t *e = W->scales_e8m0 + (size_t)r * nb;
    float acc = 0.0f;
    for (int b = 0; b < nb; b++) {
        int c1 = (b + 1) * QUANT_MX_BLOCK < W->cols ? (b + 1) * QUANT_MX_BLOCK : W->cols;
        float part = 0.0f;
        for (int c = b * QUANT_MX_BLOCK; c < c1; c++)
            part += quant_e2m1_twice_f32[c % 2 ? p[c / 2] >> 4 : p[c / 2] & 0xF] * x[c];
        acc += part * quant_e8m0_half(e[b]);
    }
    return acc;
}

#define REF_ROWS(name)                                                              \
    static void rows_##name(const struct qtensor *W, int r0, int r1,                \
                            const struct quant_act *a, int j0, int nj, float *Y)    \
    {                                                                               \
        for (int r = r0; r < r1; r++)                                               \
            for (int j = j0; j < j0 + nj; j++)                                      \
                Y[(size_t)j * W->rows + r] = dot_##name(W, r, a->x + (size_t)j * a->cols); \
    }
REF_ROWS(f32)
REF_ROWS(bf16)
REF_ROWS(f16)
REF_ROWS(q8)
REF_ROWS(q4)
REF_ROWS(q4g32)
REF_ROWS(q4g64)
REF_ROWS(q4g128)
REF_ROWS(fp8b)
REF_ROWS(mxfp4)

float quant_act_prep_ref(const float *x, int cols, int cols_pad,
                         int8_t *q, float *xs, float *xsum, int32_t *qsum)
{
    float total = 0.0f;
    for (int b = 0; b * QUANT_ACT_BLOCK < cols_pad; b++) {
        int c0 = b * QUANT_ACT_BLOCK;
        int c1 = c0 + QUANT_ACT_BLOCK < cols ? c0 + QUANT_ACT_BLOCK : cols;
        float amax = 0.0f;
        for (int c = c0; c < c1; c++) amax = fmaxf(amax, fabsf(x[c]));
        float s = amax / 127.0f, inv = amax > 0.0f ? 127.0f / amax : 0.0f;
        int sum = 0;
        for (int c = c0; c < c0 + QUANT_ACT_BLOCK; c++) {
            int v = c < c1 ? (int)lrintf(x[c] * inv) : 0;
            v = v > 127 ? 127 : v < -127 ? -127 : v;
            q[c] = (int8_t)v;
            sum += v;
        }
        xs[b] = s;
        xsum[b] = s * (float)sum;
        if (qsum) qsum[b] = sum;
        total += xsum[b];
    }
    return total;
}

void quant_act_tile16(const struct quant_act *a, int g, int8_t *qt, float *xst)
{
    for (int b = 0; b < a->nblk; b++)
        for (int t = 0; t < QUANT_TILE_NJ; t++) {
            int j = g * QUANT_TILE_NJ + t;
            for (int kk = 0; kk < QUANT_ACT_BLOCK / 4; kk++) {
                int8_t *d = qt + (size_t)b * 512 + 64 * kk + 4 * t;
                if (j < a->n) memcpy(d, a->q + (size_t)j * a->cols_pad + 32 * b + 4 * kk, 4);
                else memset(d, 0, 4);
            }
            xst[(size_t)b * QUANT_TILE_NJ + t] = j < a->n ? a->xs[(size_t)j * a->nblk + b] : 0.0f;
        }
}

void quant_act_lanes(const float *x, int n, int cols, int g, float *out)
{
    for (int h = 0; h < 2; h++)
        for (int l = 0; l < 16; l++) {
            float *o = out + (size_t)QUANT_LANE_NR * quant_lane_first(cols, h, l);
            for (int k = 0; k < quant_lane_steps(cols, h); k++, o += QUANT_LANE_NR) {
                int c = quant_lane_col(cols, h, l, k);
                for (int i = 0; i < QUANT_LANE_NR; i++) {
                    int j = g * QUANT_LANE_NR + i;
                    o[i] = j < n && c < cols ? x[(size_t)j * cols + c] : 0.0f;
                }
            }
        }
}

const struct quant_isa_table quant_isa_ref = {
    .k = {
        [QUANT_F32] = { rows_f32, 0 },
        [QUANT_BF16] = { rows_bf16, 0 },
        [QUANT_F16] = { rows_f16, 0 },
        [QUANT_Q8] = { rows_q8, 0 },
        [QUANT_Q4] = { rows_q4, 0 },
        [QUANT_Q4G32] = { rows_q4g32, 0 },
        [QUANT_Q4G64] = { rows_q4g64, 0 },
        [QUANT_Q4G128] = { rows_q4g128, 0 },
        [QUANT_FP8B] = { rows_fp8b, 0 },
        [QUANT_MXFP4] = { rows_mxfp4, 0 },
    },
    .act_prep = quant_act_prep_ref,
};
