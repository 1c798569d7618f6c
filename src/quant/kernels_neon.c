/* quant/kernels_neon.c - NEON kernels for aarch64 (baseline ARMv8-A: no
 * dotprod, no bf16 extension needed). Built only on aarch64. No aarch64
 * hardware was at hand: test_quant and test_quant_mxfp4 pass on these
 * kernels cross-compiled (aarch64-linux-gnu-gcc 12) and run under qemu-user
 * (tools/cross_neon.sh), which checks results, not speed; their speed is
 * unmeasured.
 *
 * Float formats widen to f32 and use FMA (fp8b through f16: sign-extend,
 * shift left 7, clear bit 14, x 2^8 folded into the block scale). q8 / q4*
 * multiply signed weights by the int8 activations (blocks of 32) with
 * widening multiplies (vmull_s8) and pairwise accumulation into int32: no
 * offset is needed. Column tails that do not fill a vector are scalar.
 * mxfp4 looks each nibble up as twice its e2m1 value (TBL), an integer in
 * [-12, 12], and multiplies it by the int8 activations the same way, exactly;
 * each 32-column block's int32 lane sums take one rescale by the activation
 * scale times 2^(e-128). Its rows are whole 16-byte blocks and the
 * activations are zero past cols, so it has no tail.
 */
#include <arm_neon.h>
#include <assert.h>
#include <string.h>

#include "quant/fp8.h"
#include "quant/half.h"
#include "quant/kernels.h"
#include "quant/mxfp4.h"

#define INLINE static inline __attribute__((always_inline))

static_assert(QUANT_NB == 4, "the kernel switches cover nj = 1..4");

static const uint8_t *row_ptr(const struct qtensor *W, int r)
{
    return (const uint8_t *)W->data + (size_t)r * quant_fmt_row_bytes(W->fmt, W->cols);
}

#define NJ_SWITCH(call)                                   \
    switch (nj) {                                         \
    case 1: call(1); break;                               \
    case 2: call(2); break;                               \
    case 3: call(3); break;                               \
    default: call(4); break;                              \
    }

/* ------------------------------------------------------ f32 / bf16 / f16 */

INLINE float32x4_t load_w4(int fmt, const uint8_t *p, int c)
{
    if (fmt == QUANT_F32) return vld1q_f32((const float *)(p + 4 * (size_t)c));
    uint16x4_t h = vld1_u16((const uint16_t *)(p + 2 * (size_t)c));
    if (fmt == QUANT_F16) return vcvt_f32_f16(vreinterpret_f16_u16(h));
    return vreinterpretq_f32_u32(vshll_n_u16(h, 16));
}

INLINE float scalar_w(int fmt, const uint8_t *p, int c)
{
    if (fmt == QUANT_F32) { float w; memcpy(&w, p + 4 * (size_t)c, 4); return w; }
    uint16_t h;
    memcpy(&h, p + 2 * (size_t)c, 2);
    return fmt == QUANT_F16 ? quant_f16_to_f32(h) : quant_bf16_to_f32(h);
}

INLINE void rows_float4(int fmt, const struct qtensor *W, int r0, int r1,
                        const struct quant_act *a, int j0, int NJ, float *Y)
{
    const int cols = W->cols;
    const float *x[QUANT_NB];
    for (int j = 0; j < NJ; j++) x[j] = a->x + (size_t)(j0 + j) * cols;
    for (int r = r0; r < r1; r++) {
        const uint8_t *p = row_ptr(W, r);
        float32x4_t acc0[QUANT_NB], acc1[QUANT_NB];
        for (int j = 0; j < NJ; j++) acc0[j] = acc1[j] = vdupq_n_f32(0.0f);
        int c = 0;
        for (; c + 8 <= cols; c += 8) {
            float32x4_t w0 = load_w4(fmt, p, c), w1 = load_w4(fmt, p, c + 4);
            for (int j = 0; j < NJ; j++) {
                acc0[j] = vfmaq_f32(acc0[j], w0, vld1q_f32(x[j] + c));
                acc1[j] = vfmaq_f32(acc1[j], w1, vld1q_f32(x[j] + c + 4));
            }
        }
        for (int j = 0; j < NJ; j++) {
            float y = vaddvq_f32(vaddq_f32(acc0[j], acc1[j]));
            for (int t = c; t < cols; t++) y += scalar_w(fmt, p, t) * x[j][t];
            Y[(size_t)(j0 + j) * W->rows + r] = y;
        }
    }
}

static void rows_f32(const struct qtensor *W, int r0, int r1, const struct quant_act *a, int j0, int nj, float *Y)
{
#define C(NJ) rows_float4(QUANT_F32, W, r0, r1, a, j0, NJ, Y)
    NJ_SWITCH(C)
#undef C
}
static void rows_bf16(const struct qtensor *W, int r0, int r1, const struct quant_act *a, int j0, int nj, float *Y)
{
#define C(NJ) rows_float4(QUANT_BF16, W, r0, r1, a, j0, NJ, Y)
    NJ_SWITCH(C)
#undef C
}
static void rows_f16(const struct qtensor *W, int r0, int r1, const struct quant_act *a, int j0, int nj, float *Y)
{
#define C(NJ) rows_float4(QUANT_F16, W, r0, r1, a, j0, NJ, Y)
    NJ_SWITCH(C)
#undef C
}

/* ------------------------------------------------------------------ fp8b */

INLINE void rows_fp8b_nj(const struct qtensor *W, int r0, int r1,
                         const struct quant_act *a, int j0, int NJ, float *Y)
{
    const int cols = W->cols, B = QUANT_FP8B_BLOCK, nbc = (cols + B - 1) / B;
    const int16x8_t keep = vdupq_n_s16((short)0xBF80);
    const float *x[QUANT_NB];
    for (int j = 0; j < NJ; j++) x[j] = a->x + (size_t)(j0 + j) * cols;
    for (int r = r0; r < r1; r++) {
        const uint8_t *p = row_ptr(W, r);
        const float *s = W->scales + (size_t)(r / B) * nbc;
        float32x4_t acc[QUANT_NB];
        float tail[QUANT_NB] = { 0 };
        for (int j = 0; j < NJ; j++) acc[j] = vdupq_n_f32(0.0f);
        for (int bc = 0; bc < nbc; bc++) {
            int c0 = bc * B, c1 = c0 + B < cols ? c0 + B : cols, c = c0;
            float32x4_t b0[QUANT_NB], b1[QUANT_NB];
            for (int j = 0; j < NJ; j++) b0[j] = b1[j] = vdupq_n_f32(0.0f);
            for (; c + 8 <= c1; c += 8) {
                int16x8_t h = vandq_s16(vshlq_n_s16(vmovl_s8(vld1_s8((const int8_t *)(p + c))), 7), keep);
                float16x8_t hf = vreinterpretq_f16_s16(h);
                float32x4_t wl = vcvt_f32_f16(vget_low_f16(hf)), wh = vcvt_high_f32_f16(hf);
                for (int j = 0; j < NJ; j++) {
                    b0[j] = vfmaq_f32(b0[j], wl, vld1q_f32(x[j] + c));
                    b1[j] = vfmaq_f32(b1[j], wh, vld1q_f32(x[j] + c + 4));
                }
            }
            float sc = s[bc] * 256.0f;
            for (int j = 0; j < NJ; j++) {
                acc[j] = vfmaq_n_f32(acc[j], vaddq_f32(b0[j], b1[j]), sc);
                float t = 0.0f;
                for (int u = c; u < c1; u++) t += quant_fp8_e4m3_table[p[u]] * x[j][u];
                tail[j] += t * s[bc];
            }
        }
        for (int j = 0; j < NJ; j++) Y[(size_t)(j0 + j) * W->rows + r] = vaddvq_f32(acc[j]) + tail[j];
    }
}

static void rows_fp8b(const struct qtensor *W, int r0, int r1, const struct quant_act *a, int j0, int nj, float *Y)
{
#define C(NJ) rows_fp8b_nj(W, r0, r1, a, j0, NJ, Y)
    NJ_SWITCH(C)
#undef C
}

/* ------------------------------------------------------------- q8 / q4* */

INLINE int32x4_t dot16(int32x4_t acc, int8x16_t w, int8x16_t x)
{
    acc = vpadalq_s16(acc, vmull_s8(vget_low_s8(w), vget_low_s8(x)));
    return vpadalq_s16(acc, vmull_high_s8(w, x));
}

/* INT4: 1 for the q4 family, 0 for q8. G: group size, 0 = per row. */
INLINE void rows_int_nj(const struct qtensor *W, int r0, int r1, const struct quant_act *a,
                        int j0, int NJ, float *Y, int INT4, int G)
{
    const int cols = W->cols, nchunk = (cols + 31) / 32;
    const int ng = G ? (cols + G - 1) / G : 1;
    const uint8x16_t m4 = vdupq_n_u8(0x0F);
    const int8x16_t eight = vdupq_n_s8(8);
    const int8_t *q[QUANT_NB];
    const float *xs[QUANT_NB];
    for (int j = 0; j < NJ; j++) {
        q[j] = a->q + (size_t)(j0 + j) * a->cols_pad;
        xs[j] = a->xs + (size_t)(j0 + j) * a->nblk;
    }
    for (int r = r0; r < r1; r++) {
        const uint8_t *p = row_ptr(W, r);
        const float *s = G ? W->scales + (size_t)r * ng : W->scales + r;
        float32x4_t acc[QUANT_NB];
        for (int j = 0; j < NJ; j++) acc[j] = vdupq_n_f32(0.0f);
        for (int ch = 0; ch < nchunk; ch++) {
            int8x16_t w0, w1;
            if (INT4) {
                /* chunks 0,1 of block k are the low nibbles of bytes
                 * 0-31 / 32-63, chunks 2,3 the high nibbles */
                int k = ch / 4, cc = ch % 4;
                const uint8_t *b = p + 64 * (size_t)k + 32 * (cc & 1);
                uint8x16_t v0 = vld1q_u8(b), v1 = vld1q_u8(b + 16);
                if (cc < 2) { v0 = vandq_u8(v0, m4); v1 = vandq_u8(v1, m4); }
                else { v0 = vshrq_n_u8(v0, 4); v1 = vshrq_n_u8(v1, 4); }
                w0 = vsubq_s8(vreinterpretq_s8_u8(v0), eight);
                w1 = vsubq_s8(vreinterpretq_s8_u8(v1), eight);
            } else {
                int n = cols - 32 * ch;
                if (n >= 32) {
                    w0 = vld1q_s8((const int8_t *)p + 32 * (size_t)ch);
                    w1 = vld1q_s8((const int8_t *)p + 32 * (size_t)ch + 16);
                } else {
                    int8_t tmp[32] = { 0 };
                    memcpy(tmp, p + 32 * (size_t)ch, (size_t)n);
                    w0 = vld1q_s8(tmp);
                    w1 = vld1q_s8(tmp + 16);
                }
            }
            float w = G ? s[ch * 32 / G] : 1.0f;
            for (int j = 0; j < NJ; j++) {
                const int8_t *xq = q[j] + 32 * (size_t)ch;
                int32x4_t d = dot16(dot16(vdupq_n_s32(0), w0, vld1q_s8(xq)), w1, vld1q_s8(xq + 16));
                acc[j] = vfmaq_n_f32(acc[j], vcvtq_f32_s32(d), w * xs[j][ch]);
            }
        }
        for (int j = 0; j < NJ; j++) {
            float dot = vaddvq_f32(acc[j]);
            Y[(size_t)(j0 + j) * W->rows + r] = G ? dot : s[0] * dot;
        }
    }
}

#define INT_KERNEL(name, INT4, G)                                                        \
    static void rows_##name(const struct qtensor *W, int r0, int r1,                     \
                            const struct quant_act *a, int j0, int nj, float *Y)         \
    {                                                                                    \
        switch (nj) {                                                                    \
        case 1: rows_int_nj(W, r0, r1, a, j0, 1, Y, INT4, G); break;                    \
        case 2: rows_int_nj(W, r0, r1, a, j0, 2, Y, INT4, G); break;                    \
        case 3: rows_int_nj(W, r0, r1, a, j0, 3, Y, INT4, G); break;                    \
        default: rows_int_nj(W, r0, r1, a, j0, 4, Y, INT4, G); break;                   \
        }                                                                                \
    }
INT_KERNEL(q8, 0, 0)
INT_KERNEL(q4, 1, 0)
INT_KERNEL(q4g32, 1, 32)
INT_KERNEL(q4g64, 1, 64)
INT_KERNEL(q4g128, 1, 128)

/* ------------------------------------------------------------------ mxfp4 */

INLINE void rows_mxfp4_nj(const struct qtensor *W, int r0, int r1, const struct quant_act *a,
                          int j0, int NJ, float *Y)
{
    const int nb = (W->cols + QUANT_MX_BLOCK - 1) / QUANT_MX_BLOCK;
    const uint8x16_t m4 = vdupq_n_u8(0x0F);
    const int8x16_t lut = vld1q_s8(quant_e2m1_twice);
    const int8_t *q[QUANT_NB];
    const float *xs[QUANT_NB];
    for (int j = 0; j < NJ; j++) {
        q[j] = a->q + (size_t)(j0 + j) * a->cols_pad;
        xs[j] = a->xs + (size_t)(j0 + j) * a->nblk;
    }
    for (int r = r0; r < r1; r++) {
        const uint8_t *p = row_ptr(W, r), *e = W->scales_e8m0 + (size_t)r * nb;
        float32x4_t acc[QUANT_NB];
        for (int j = 0; j < NJ; j++) acc[j] = vdupq_n_f32(0.0f);
        for (int b = 0; b < nb; b++) {
            uint8x16_t v = vld1q_u8(p + (size_t)b * (QUANT_MX_BLOCK / 2));
            uint8x16_t lo = vandq_u8(v, m4), hi = vshrq_n_u8(v, 4);
            /* elements in column order: low, high nibble of each byte */
            int8x16_t w0 = vqtbl1q_s8(lut, vzip1q_u8(lo, hi)), w1 = vqtbl1q_s8(lut, vzip2q_u8(lo, hi));
            float h = quant_e8m0_half(e[b]);
            for (int j = 0; j < NJ; j++) {
                const int8_t *xq = q[j] + (size_t)b * QUANT_MX_BLOCK;
                int32x4_t d = dot16(dot16(vdupq_n_s32(0), w0, vld1q_s8(xq)), w1, vld1q_s8(xq + 16));
                acc[j] = vfmaq_n_f32(acc[j], vcvtq_f32_s32(d), h * xs[j][b]);
            }
        }
        for (int j = 0; j < NJ; j++) Y[(size_t)(j0 + j) * W->rows + r] = vaddvq_f32(acc[j]);
    }
}

static void rows_mxfp4(const struct qtensor *W, int r0, int r1, const struct quant_act *a, int j0, int nj, float *Y)
{
#define C(NJ) rows_mxfp4_nj(W, r0, r1, a, j0, NJ, Y)
    NJ_SWITCH(C)
#undef C
}

const struct quant_isa_table quant_isa_neon = {
    .k = {
        [QUANT_F32] = { rows_f32, 0 },
        [QUANT_BF16] = { rows_bf16, 0 },
        [QUANT_F16] = { rows_f16, 0 },
        [QUANT_Q8] = { rows_q8, 1 },
        [QUANT_Q4] = { rows_q4, 1 },
        [QUANT_Q4G32] = { rows_q4g32, 1 },
        [QUANT_Q4G64] = { rows_q4g64, 1 },
        [QUANT_Q4G128] = { rows_q4g128, 1 },
        [QUANT_FP8B] = { rows_fp8b, 0 },
        [QUANT_MXFP4] = { rows_mxfp4, 1 },
    },
    .act_prep = NULL,
};
