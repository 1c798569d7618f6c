/* kv/codec_plain.c - the unrotated tiers: f32 (the reference), bf16 and fp8
 * (e4m3 + one f32 scale per row, through quant/fp8.h). */
#include <string.h>

#include "kv/codec_impl.h"
#include "kv/kv_num.h"
#include "quant/fp8.h"

size_t kv_f32_row_bytes(int dim) { return (size_t)dim * 4; }

void kv_f32_encode(const struct kv_codec *c, float *y, uint8_t *out)
{
    memcpy(out, y, (size_t)c->dim * 4);
}

void kv_f32_decode(const struct kv_codec *c, const uint8_t *in, float *y)
{
    memcpy(y, in, (size_t)c->dim * 4);
}

size_t kv_bf16_row_bytes(int dim) { return (size_t)dim * 2; }

void kv_bf16_encode(const struct kv_codec *c, float *y, uint8_t *out)
{
    for (int i = 0; i < c->dim; i++) {
        uint16_t h = kv_f32_to_bf16(y[i]);
        memcpy(out + 2 * i, &h, 2);
    }
}

void kv_bf16_decode(const struct kv_codec *c, const uint8_t *in, float *y)
{
    for (int i = 0; i < c->dim; i++) {
        uint16_t h;
        memcpy(&h, in + 2 * i, 2);
        y[i] = kv_bf16_to_f32(h);
    }
}

/* [dim x e4m3][f32 scale] */
size_t kv_fp8_row_bytes(int dim) { return (size_t)dim + 4; }

void kv_fp8_encode(const struct kv_codec *c, float *y, uint8_t *out)
{
    float scale = quant_fp8_encode_row(y, (size_t)c->dim, out);
    kv_store_f32(out + c->dim, scale);
}

void kv_fp8_decode(const struct kv_codec *c, const uint8_t *in, float *y)
{
    quant_fp8_decode_row(in, (size_t)c->dim, kv_load_f32(in + c->dim), y);
}
