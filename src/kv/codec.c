/* kv/codec.c - the tier traits table and the tier-independent codec
 * operations (rotation, row loops, native consumer built on the kernels in
 * kv/attn_kern.h). Per-tier code lives in codec_*.c. */
#include "kv/codec.h"

#include <assert.h>
#include <string.h>

#include "base/err.h"
#include "base/util.h"
#include "kv/attn_kern.h"
#include "kv/codec_impl.h"

static const struct kv_codec_traits KV_TRAITS[KV_TIER_COUNT] = {
    [KV_TIER_F32]    = { .name = "f32", .rot = KV_ROT_NONE, .dim_multiple = 1,
                         .row_bytes = kv_f32_row_bytes, .encode = kv_f32_encode,
                         .decode_rot = kv_f32_decode },
    [KV_TIER_BF16]   = { .name = "bf16", .rot = KV_ROT_NONE, .dim_multiple = 1,
                         .row_bytes = kv_bf16_row_bytes, .encode = kv_bf16_encode,
                         .decode_rot = kv_bf16_decode },
    [KV_TIER_FP8]    = { .name = "fp8", .rot = KV_ROT_NONE, .dim_multiple = 1,
                         .row_bytes = kv_fp8_row_bytes, .encode = kv_fp8_encode,
                         .decode_rot = kv_fp8_decode },
    [KV_TIER_INT8R]  = { .name = "int8r", .rot = KV_ROT_FULL, .dim_multiple = 1, .q8_group = -1,
                         .row_bytes = kv_int8r_row_bytes, .encode = kv_int8r_encode,
                         .decode_rot = kv_int8r_decode },
    [KV_TIER_Q4_0]   = { .name = "q4_0", .rot = KV_ROT_256, .dim_multiple = 32, .q8_group = 32,
                         .row_bytes = kv_q4_0_row_bytes, .encode = kv_q4_0_encode,
                         .decode_rot = kv_q4_0_decode },
    [KV_TIER_TQ4]    = { .name = "tq4", .rot = KV_ROT_FULL, .dim_multiple = 8, .q8_group = -1,
                         .row_bytes = kv_tq4_row_bytes, .init = kv_tq_init,
                         .encode = kv_tq_encode, .decode_rot = kv_tq_decode },
    [KV_TIER_TQ3]    = { .name = "tq3", .rot = KV_ROT_FULL, .dim_multiple = 8, .q8_group = -1,
                         .row_bytes = kv_tq3_row_bytes, .init = kv_tq_init,
                         .encode = kv_tq_encode, .decode_rot = kv_tq_decode },
    [KV_TIER_TQ2]    = { .name = "tq2", .rot = KV_ROT_FULL, .dim_multiple = 8, .q8_group = -1,
                         .row_bytes = kv_tq2_row_bytes, .init = kv_tq_init,
                         .encode = kv_tq_encode, .decode_rot = kv_tq_decode },
    [KV_TIER_POLAR4] = { .name = "polar4", .rot = KV_ROT_FULL, .dim_multiple = 2,
                         .row_bytes = kv_polar4_row_bytes, .init = kv_polar_init,
                         .fini = kv_polar_fini, .encode = kv_polar_encode,
                         .decode_rot = kv_polar_decode },
    [KV_TIER_POLAR3] = { .name = "polar3", .rot = KV_ROT_FULL, .dim_multiple = 2,
                         .row_bytes = kv_polar3_row_bytes, .init = kv_polar_init,
                         .fini = kv_polar_fini, .encode = kv_polar_encode,
                         .decode_rot = kv_polar_decode },
};

static const char *const KV_ROPE_NAMES[KV_ROPE_COUNT] = {
    [KV_ROPE_F32] = "f32", [KV_ROPE_BF16] = "bf16", [KV_ROPE_FP8] = "fp8",
    [KV_ROPE_INT8] = "int8",
};
static const enum kv_tier KV_ROPE_TIERS[KV_ROPE_COUNT] = {
    [KV_ROPE_F32] = KV_TIER_F32, [KV_ROPE_BF16] = KV_TIER_BF16,
    [KV_ROPE_FP8] = KV_TIER_FP8, [KV_ROPE_INT8] = KV_TIER_INT8R,
};

const char *kv_tier_name(enum kv_tier t)
{
    return (unsigned)t < KV_TIER_COUNT ? KV_TRAITS[t].name : "?";
}

int kv_tier_from_name(const char *name)
{
    for (int t = 0; t < KV_TIER_COUNT; t++)
        if (name && strcmp(name, KV_TRAITS[t].name) == 0) return t;
    return -1;
}

const char *kv_rope_name(enum kv_rope_prec p)
{
    return (unsigned)p < KV_ROPE_COUNT ? KV_ROPE_NAMES[p] : "?";
}

int kv_rope_from_name(const char *name)
{
    for (int p = 0; p < KV_ROPE_COUNT; p++)
        if (name && strcmp(name, KV_ROPE_NAMES[p]) == 0) return p;
    return -1;
}

static const char *tier_name_at(int t) { return KV_TRAITS[t].name; }
static const char *rope_name_at(int p) { return KV_ROPE_NAMES[p]; }

size_t kv_tier_names(char *buf, size_t n, const char *sep)
{
    return base_join_names(buf, n, sep, KV_TIER_COUNT, tier_name_at);
}

size_t kv_rope_names(char *buf, size_t n, const char *sep)
{
    return base_join_names(buf, n, sep, KV_ROPE_COUNT, rope_name_at);
}

enum kv_tier kv_rope_tier(enum kv_rope_prec p)
{
    return (unsigned)p < KV_ROPE_COUNT ? KV_ROPE_TIERS[p] : KV_TIER_F32;
}

enum kv_rope_prec kv_rope_default(enum kv_tier t)
{
    if (t == KV_TIER_F32) return KV_ROPE_F32;
    if (t == KV_TIER_BF16) return KV_ROPE_BF16;
    return KV_ROPE_INT8;
}

static int kv_dim_ok(enum kv_tier t, int dim)
{
    const struct kv_codec_traits *tr = &KV_TRAITS[t];
    if (dim <= 0 || dim > KV_DIM_MAX || dim % tr->dim_multiple) return 0;
    if (tr->rot != KV_ROT_NONE && !kv_is_pow2(dim)) return 0;
    return 1;
}

size_t kv_tier_row_bytes(enum kv_tier t, int dim)
{
    if ((unsigned)t >= KV_TIER_COUNT || !kv_dim_ok(t, dim)) return 0;
    return KV_TRAITS[t].row_bytes(dim);
}

int kv_codec_init(struct kv_codec *c, enum kv_tier t, int dim, uint64_t seed,
                  struct colibri_err *err)
{
    memset(c, 0, sizeof *c);
    if ((unsigned)t >= KV_TIER_COUNT)
        return base_err_set(err, COLIBRI_EINVAL, "kv codec: unknown tier %d", (int)t);
    const struct kv_codec_traits *tr = &KV_TRAITS[t];
    if (dim <= 0 || dim > KV_DIM_MAX)
        return base_err_set(err, COLIBRI_EUNSUPPORTED, "kv tier %s: row width %d out of range 1..%d",
                       tr->name, dim, KV_DIM_MAX);
    if (dim % tr->dim_multiple)
        return base_err_set(err, COLIBRI_EUNSUPPORTED, "kv tier %s: row width %d is not a multiple of %d",
                       tr->name, dim, tr->dim_multiple);
    if (tr->rot != KV_ROT_NONE) {
        int blk = tr->rot == KV_ROT_256 && dim > 256 ? 256 : dim;
        int rc = kv_rot_init(&c->rot, dim, blk, seed, err);
        if (rc) return base_err_prefix(err, rc, "kv tier %s", tr->name);
    }
    c->tier = t;
    c->dim = dim;
    c->row_bytes = tr->row_bytes(dim);
    c->gain = 1.0f;
    c->t = tr;
    if (tr->init) {
        int rc = tr->init(c, err);
        if (rc) {
            kv_codec_free(c);
            return base_err_prefix(err, rc, "kv tier %s, width %d", tr->name, dim);
        }
    }
    return 0;
}

void kv_codec_free(struct kv_codec *c)
{
    if (!c) return;
    if (c->t && c->t->fini) c->t->fini(c);
    kv_rot_free(&c->rot);
    memset(c, 0, sizeof *c);
}

int kv_codec_rotated(const struct kv_codec *c) { return c->rot.n != 0; }

int kv_codec_q8_group(const struct kv_codec *c)
{
    return c->t->q8_group < 0 ? c->dim : c->t->q8_group;
}
float kv_codec_gain(const struct kv_codec *c) { return c->gain; }

void kv_codec_encode(const struct kv_codec *c, const float *x, uint8_t *out)
{
    float y[KV_DIM_MAX];
    memcpy(y, x, (size_t)c->dim * sizeof *y);
    if (c->rot.n) kv_rot_apply(&c->rot, y);
    memset(out, 0, c->row_bytes);
    c->t->encode(c, y, out);
}

void kv_codec_decode_rot(const struct kv_codec *c, const uint8_t *in, float *y)
{
    c->t->decode_rot(c, in, y);
}

void kv_codec_decode(const struct kv_codec *c, const uint8_t *in, float *x)
{
    c->t->decode_rot(c, in, x);
    if (c->rot.n) kv_rot_inverse(&c->rot, x);
}

void kv_codec_decode_rows(const struct kv_codec *c, const uint8_t *in, size_t stride,
                          int n, float *out, size_t ldo)
{
    kv_decode_rows_fn f = kv_kern_get()->rows[c->tier];
    if (f) {
        f(c, in, stride, n, out, ldo);
        return;
    }
    for (int t = 0; t < n; t++) c->t->decode_rot(c, in + (size_t)t * stride, out + (size_t)t * ldo);
}

void kv_codec_prepare_query(const struct kv_codec *c, int H, const float *q,
                            float *qT, int ldq)
{
    assert(ldq % 16 == 0 && H <= ldq);
    float y[KV_DIM_MAX];
    memset(qT, 0, (size_t)c->dim * ldq * sizeof *qT);
    for (int h = 0; h < H; h++) {
        memcpy(y, q + (size_t)h * c->dim, (size_t)c->dim * sizeof *y);
        if (c->rot.n) kv_rot_apply(&c->rot, y);
        for (int i = 0; i < c->dim; i++) qT[(size_t)i * ldq + h] = y[i];
    }
}

void kv_codec_score(const struct kv_codec *c, const float *qT, int ldq,
                    const uint8_t *rows, size_t stride, int n, float *s, float *tile)
{
    kv_codec_decode_rows(c, rows, stride, n, tile, c->dim);
    kv_kern_get()->scores(qT, c->dim, NULL, 0, ldq, tile, c->dim, NULL, 0, n, 1.0f, s, ldq);
}

void kv_codec_accumulate(const struct kv_codec *c, const float *w, int ldq, int H,
                         const uint8_t *rows, size_t stride, int n, float *acc,
                         float *tile)
{
    kv_codec_decode_rows(c, rows, stride, n, tile, c->dim);
    kv_kern_get()->accum(w, ldq, H, tile, c->dim, 0, c->dim, n, acc, c->dim);
}

void kv_codec_finish(const struct kv_codec *c, int H, float *acc)
{
    if (!c->rot.n) return;
    for (int h = 0; h < H; h++) kv_rot_inverse(&c->rot, acc + (size_t)h * c->dim);
}
