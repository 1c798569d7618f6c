/* model/quant_config.h - config.json's `quantization_config`: which of the
 * shipped weight encodings a checkpoint declares, read strictly.
 *
 * Implemented:
 *  - quant_method "fp8" with weight_block_size [128, 128] (DeepSeek-V3/R1,
 *    V3.2; V4's "scale_fmt": "ue8m0" too): F8_E4M3 weights with 128x128 block
 *    scales, read as fp8b (model/shipped.h). fmt, if given, must be "e4m3";
 *    activation_scheme, if given, "dynamic" (colibri keeps activations in
 *    f32/int8 anyway).
 *  - quant_method "compressed-tensors", format "pack-quantized", one config
 *    group of 4-bit symmetric int weights, strategy "group", group_size 32,
 *    static, no activation or KV-cache quantization, quantization_status
 *    "compressed" (Kimi K2-Thinking / K2.5 / K2.6): Linear modules not in
 *    `ignore` are stored as weight_packed / weight_scale / weight_shape and
 *    loaded as q4g32 (model/shipped.h).
 * Anything else is refused with COLIBRI_EUNSUPPORTED naming the field and
 * value (always the quant_method for an unknown method). No
 * quantization_config means plain float weights.
 *
 * Ignore entries are module names matched exactly, or "re:<regex>" matched
 * as Python's re.match does (anchored at the start only); the regex is POSIX
 * extended with \d read as [0-9]. */
#ifndef COLIBRI_MODEL_QUANT_CONFIG_H
#define COLIBRI_MODEL_QUANT_CONFIG_H

#include "colibri.h"

enum model_quant_kind {
    MODEL_QUANT_NONE = 0,
    MODEL_QUANT_FP8_BLOCK,      /* quant_method fp8, 128x128 blocks */
    MODEL_QUANT_CT_INT4,        /* compressed-tensors pack-quantized int4, group 32 */
};

/* Room for the ignore patterns (each NUL-terminated, back to back). */
#define MODEL_QUANT_IGNORE_BYTES 16384

struct model_quant_config {
    int kind;                   /* enum model_quant_kind */
    int group_size;             /* CT_INT4: columns per scale (32) */
    int n_ignore;
    char ignore[MODEL_QUANT_IGNORE_BYTES];
};

struct cJSON;
/* Reads qc (config.json's quantization_config; NULL: none) into *out.
 * `path` is only used in messages. */
int model_quant_config_parse(const struct cJSON *qc, const char *path, struct model_quant_config *out,
                             struct colibri_err *err);

/* 1 if module (e.g. "model.layers.1.self_attn.q_a_proj") matches an ignore
 * entry, 0 if not; COLIBRI_EFORMAT if a regex does not compile (naming it). */
int model_quant_ignored(const struct model_quant_config *q, const char *module, struct colibri_err *err);

#endif
