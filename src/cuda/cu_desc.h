/* cuda/cu_desc.h - host side (C only): the kernels' descriptors
 * (cuda/cu_common.h) made from the CPU's own structs, a weight matrix from a
 * qtensor and a KV part from its codec. The arrays they point to are given by
 * the caller: device copies in the CUDA backend, the CPU's own arrays in the
 * CPU replay of the kernels (tests/unit/test_cuda_host.c).
 *
 * A tier or format the kernels do not read (polar4/3) is refused with
 * COLIBRI_EUNSUPPORTED naming it. Header-only, pure. */
#ifndef COLIBRI_CUDA_CU_DESC_H
#define COLIBRI_CUDA_CU_DESC_H

#include "base/err.h"
#include "cuda/cu_common.h"
#include "kv/cache.h"
#include "kv/codec.h"
#include "quant/format.h"
#include "quant/qtensor.h"

/* The device kernels read every format but mxfp4 (its e8m0 scales are not
 * f32): COLIBRI_EUNSUPPORTED naming it. */
static inline int cu_fmt_check(const struct qtensor *W, struct colibri_err *err)
{
    if (quant_fmt_traits(W->fmt)->scale_e8m0)
        return base_err_set(err, COLIBRI_EUNSUPPORTED, "device backend: weight format %s is not implemented "
                            "on the device ([%d, %d] matrix)", quant_fmt_name(W->fmt), W->rows, W->cols);
    return 0;
}
/* W's shape and format with data/scales at the given arrays (W's own, or
 * device copies of them). */
static inline struct cu_wmat cu_wmat_of(const struct qtensor *W, const void *data, const float *scales)
{
    struct cu_wmat d;
    memset(&d, 0, sizeof d);
    d.fmt = (int)W->fmt;
    d.rows = W->rows;
    d.cols = W->cols;
    d.row_bytes = (long long)quant_fmt_row_bytes(W->fmt, W->cols);
    const struct quant_fmt_traits *t = quant_fmt_traits(W->fmt);
    if (W->fmt == QUANT_Q4) d.group = W->cols;
    else if (t->scale_kind == QUANT_SCALE_GROUP || t->scale_kind == QUANT_SCALE_BLOCK2D) d.group = t->group_cols;
    d.n_scale_cols = d.group ? (W->cols + d.group - 1) / d.group : 0;
    d.data = (const uint8_t *)data;
    d.scales = scales;
    return d;
}

/* 1 if the attention kernel reads this tier. */
static inline int cu_kv_tier_ok(enum kv_tier t) { return t <= KV_TIER_TQ2; }

/* The part of codec c at byte `offset` of a row; sign is where c->rot.sign's
 * dim values are (c's own, or a device copy); ignored when unrotated. */
static inline int cu_kv_part_of(const struct kv_codec *c, size_t offset, const float *sign,
                                struct cu_kv_part *out, struct colibri_err *err)
{
    memset(out, 0, sizeof *out);
    if (!cu_kv_tier_ok(c->tier))
        return base_err_set(err, COLIBRI_EUNSUPPORTED, "cuda attention: kv tier %s is not implemented "
                            "on the GPU (f32, bf16, fp8, int8r, q4_0, tq4/3/2 are)", kv_tier_name(c->tier));
    out->tier = (int)c->tier;
    out->dim = c->dim;
    out->offset = (int)offset;
    out->bits = c->bits;
    out->gain = c->gain;
    for (int k = 0; k < 16; k++) out->level[k] = c->level[k];
    out->rot_blk = c->rot.n ? c->rot.blk : 0;
    out->sign = c->rot.n ? sign : NULL;
    return 0;
}

#endif
