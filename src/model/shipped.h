/* model/shipped.h - internal to model loading (weights.c): Linear weights in
 * the 4- and 8-bit encodings the labs ship, made into qtensors without
 * changing a value.
 *
 *  - MXFP4 (DeepSeek-V4's routed experts): `<m>.weight` holding e2m1 codes,
 *    two per byte, element 2i in the low nibble, as F4 [rows, cols] or as
 *    I8/U8 [rows, cols/2], and `<m>.scale` (or `<m>.weight_scale_inv`, the
 *    name transformers gives it), one e8m0 exponent per 32 columns, F8_E8M0
 *    or U8 [rows, cols/32]. Borrowed as an mxfp4 qtensor (the bytes
 *    are quant/format.h's mxfp4 layout).
 *  - FP8 e4m3 with e8m0 block scales (V4's dense weights): `<m>.weight`
 *    F8_E4M3 [rows, cols] and `<m>.scale` (or `<m>.weight_scale_inv`) F8_E8M0
 *    or U8 [ceil(rows/128), ceil(cols/128)]: the data borrowed as fp8b, the
 *    scales widened to their exact f32 powers of two (owned:
 *    QUANT_OWN_SCALES). An F32 `<m>.scale` holding powers of two (how
 *    dsv4-flash-base stores its ue8m0 scales) reads the same, for MXFP4
 *    too; any other F32 value is refused naming it. (An F32
 *    `<m>.weight_scale_inv` is the V3-style scale: not this encoding.)
 *  - compressed-tensors pack-quantized int4 (Kimi K2.x): `<m>.weight_packed`
 *    I32 [rows, cols/8] (element 8g+i in bits 4i..4i+3 of word g, holding
 *    q+8), `<m>.weight_scale` BF16/F16/F32 [rows, ceil(cols/32)],
 *    `<m>.weight_shape` I32/I64 [2] = {rows, cols}: repacked into a new q4g32
 *    (the same nibbles q+8 and the same scales, exact in f32), owned.
 * Every mismatch of dtype, shape or companion is COLIBRI_EFORMAT naming the
 * tensor, what it is and what is needed. */
#ifndef COLIBRI_MODEL_SHIPPED_H
#define COLIBRI_MODEL_SHIPPED_H

#include <stdint.h>

#include "colibri.h"
#include "io/safetensors.h"
#include "quant/qtensor.h"

/* How the loader finds (and marks as used) a companion tensor. */
struct model_shipped_src {
    const struct st_tensor *(*find)(void *ctx, const char *name);
    void *ctx;
    int64_t *n_params;      /* corrected to count rows x cols weights, not packed bytes or scales */
};

/* 1 if t (a Linear's `.weight`) is stored as MXFP4 codes (F4, I8, U8). */
int model_shipped_is_mxfp4(const struct st_tensor *t);

int model_shipped_mxfp4(const struct model_shipped_src *s, const struct st_tensor *t, int rows, int cols, struct qtensor *out,
                  struct colibri_err *err);

/* The e8m0 scale companion `<m>.scale` of an F8_E4M3 `<m>.weight`, or NULL. */
const struct st_tensor *model_shipped_fp8_e8m0_scale(const struct model_shipped_src *s, const struct st_tensor *t);

int model_shipped_fp8_e8m0(const struct model_shipped_src *s, const struct st_tensor *t, int rows, int cols, struct qtensor *out,
                     struct colibri_err *err);

/* How DeepSeek-V4's official release (quantization_config fp8, ue8m0)
 * stores the tensor `name` (official name, optionally under "model."), as
 * transformers 5.18 loads it: FP8 e4m3 with `.scale` for attn.wq_a, wq_b,
 * wkv, wo_a, wo_b, attn.indexer.wq_b and the shared expert's w1/w2/w3; the
 * routed experts' w1/w2/w3 MXFP4 when expert_fp4 (expert_dtype "fp4"),
 * else FP8; everything else float (BF16/F32): the embedding, head, norms,
 * router gate, hyper-connection mixers, attn_sink, and the compressors'
 * and indexer's wkv / wgate / weights_proj (DeepseekV4PreTrainedModel.
 * _keep_in_fp32_modules: they ship in BF16 with no scale). */
enum { MODEL_SHIPPED_FLOAT = 0, MODEL_SHIPPED_FP8, MODEL_SHIPPED_MXFP4 };
int model_shipped_v4_kind(const char *name, int expert_fp4);
/* 0 if t's dtype can be `kind` (-1: anything; FP8 is checked by
 * model_shipped_fp8_e8m0), else COLIBRI_EFORMAT naming t and what the
 * release stores it as. */
int model_shipped_v4_check(const struct st_tensor *t, int kind, struct colibri_err *err);

/* module: the Linear's name without ".weight". defer: check the stored
 * tensors and count the parameters, but leave out's data and scales NULL
 * (owned, q4g32): a routed expert the loader repacks only once it knows the
 * experts stay resident, or that the streamed store repacks as it reads. */
int model_shipped_ct_int4(const struct model_shipped_src *s, const char *module, int rows, int cols, int defer,
                          struct qtensor *out, struct colibri_err *err);
/* The stored tensors model_shipped_ct_int4 reads (`.weight_packed`,
 * `.weight_scale`), checked as it checks them: for the streamed store, which
 * reads their bytes and repacks them itself. */
int model_shipped_ct_int4_source(const struct model_shipped_src *s, const char *module, int rows, int cols,
                                 const struct st_tensor **packed, const struct st_tensor **scales,
                                 struct colibri_err *err);
/* The repack model_shipped_ct_int4 does: rows x cols weights packed eight
 * per int32 and their scales (scale_dtype: ST_BF16, ST_F16 or ST_F32) into
 * q4g32 data (quant_fmt_data_bytes(QUANT_Q4G32, rows, cols) bytes, padding
 * nibbles 0x8) and f32 scales [rows][ceil(cols/32)]. No alignment needed. */
void model_shipped_ct_int4_repack(const void *packed, const void *scales, int scale_dtype, int rows, int cols,
                                  void *data, float *f);

#endif
