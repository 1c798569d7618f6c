/* kv/codec_int.c - integer tiers on rotated rows: int8r (one f32 scale per
 * row) and q4_0 (ggml blocks of 32 with an fp16 scale, after an FWHT in blocks
 * of 256). Rows arrive here already rotated (see codec_impl.h). */
#include <assert.h>
#include <math.h>
#include <string.h>

#include "kv/codec_impl.h"
#include "kv/kv_num.h"

/* [dim x int8][f32 scale = amax/127] */
size_t kv_int8r_row_bytes(int dim) { return (size_t)dim + 4; }

void kv_int8r_encode(const struct kv_codec *c, float *y, uint8_t *out)
{
    float amax = 0.0f;
    for (int i = 0; i < c->dim; i++) {
        float a = fabsf(y[i]);
        if (a > amax) amax = a;           /* NaN compares false: ignored */
    }
    if (!(amax >= 1e-30f) || !isfinite(amax)) {
        /* zero or tiny rows decode to zero; an infinite amax has no usable
         * scale either, and a zero row keeps the damage local */
        memset(out, 0, (size_t)c->dim + 4);
        return;
    }
    float scale = amax / 127.0f, inv = 127.0f / amax;
    for (int i = 0; i < c->dim; i++) {
        float v = y[i] * inv;
        long q = isnan(v) ? 0 : lroundf(v);
        if (q > 127) q = 127;
        if (q < -127) q = -127;
        out[i] = (uint8_t)(int8_t)q;
    }
    kv_store_f32(out + c->dim, scale);
}

void kv_int8r_decode(const struct kv_codec *c, const uint8_t *in, float *y)
{
    float scale = kv_load_f32(in + c->dim);
    for (int i = 0; i < c->dim; i++) y[i] = (float)(int8_t)in[i] * scale;
}

struct kv_blk_q4_0 {
    uint16_t d;        /* fp16 */
    uint8_t qs[16];
};
static_assert(sizeof(struct kv_blk_q4_0) == 2 + 32 / 2, "q4_0: fp16 scale + 32 nibbles");

size_t kv_q4_0_row_bytes(int dim) { return (size_t)dim / 32 * sizeof(struct kv_blk_q4_0); }

/* ggml quantize_row_q4_0_ref, block by block. */
void kv_q4_0_encode(const struct kv_codec *c, float *y, uint8_t *out)
{
    for (int b = 0; b < c->dim / 32; b++) {
        const float *x = y + 32 * b;
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < 32; j++) {
            if (amax < fabsf(x[j])) {
                amax = fabsf(x[j]);
                max = x[j];
            }
        }
        /* an infinite value has no usable scale: the block is stored as zero */
        const float d = isfinite(max) ? max / -8 : 0.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        struct kv_blk_q4_0 blk;
        blk.d = kv_f32_to_f16(d);
        for (int j = 0; j < 16; j++) {
            /* ggml truncates x*id + 8.5 (>= 0.5 for finite input) and caps at 15;
             * the clamp first keeps NaN and inf defined (they become 0 / 15) */
            float v0 = x[j] * id + 8.5f, v1 = x[16 + j] * id + 8.5f;
            int q0 = !(v0 >= 0.0f) ? 0 : v0 >= 15.0f ? 15 : (int)v0;
            int q1 = !(v1 >= 0.0f) ? 0 : v1 >= 15.0f ? 15 : (int)v1;
            blk.qs[j] = (uint8_t)(q0 | (q1 << 4));
        }
        memcpy(out + b * sizeof blk, &blk, sizeof blk);
    }
}

void kv_q4_0_decode(const struct kv_codec *c, const uint8_t *in, float *y)
{
    for (int b = 0; b < c->dim / 32; b++) {
        struct kv_blk_q4_0 blk;
        memcpy(&blk, in + b * sizeof blk, sizeof blk);
        float d = kv_f16_to_f32(blk.d);
        for (int j = 0; j < 16; j++) {
            y[32 * b + j] = (float)((blk.qs[j] & 15) - 8) * d;
            y[32 * b + 16 + j] = (float)((blk.qs[j] >> 4) - 8) * d;
        }
    }
}
