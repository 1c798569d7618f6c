#include "model/config.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/err.h"
#include "base/util.h"

/* Every number is checked as a double (finite, integral where it must be,
 * in range) before it is converted: converting an out-of-range double to an
 * integer is undefined behaviour, and an inf or NaN that reached the RoPE
 * tables or the norms would give a model that silently outputs nothing.
 * Integer fields have the upper bounds config.h states (MODEL_MAX_*), so a
 * count no model means is refused by name before anything is sized by it. */

/* Reads an integer field in [lo, hi]; `required` fields must be present. */
static int get_int_in(const cJSON *o, const char *key, int required, int dflt, double lo, double hi, int *out,
                      const char *path, struct colibri_err *err)
{
    const cJSON *v = o ? cJSON_GetObjectItemCaseSensitive(o, key) : NULL;
    if (!v || cJSON_IsNull(v)) {
        if (required) return base_err_set(err, COLIBRI_EFORMAT, "%s: field '%s' is missing", path, key);
        *out = dflt;
        return 0;
    }
    if (!cJSON_IsNumber(v)) return base_err_set(err, COLIBRI_EFORMAT, "%s: field '%s' is not a number", path, key);
    double d = v->valuedouble;
    if (!isfinite(d) || d < lo || d > hi)
        return base_err_set(err, COLIBRI_EFORMAT, "%s: field '%s' is %g, outside the range %.0f..%.0f", path,
                            key, d, lo, hi);
    if (d != floor(d)) return base_err_set(err, COLIBRI_EFORMAT, "%s: field '%s' is %g, not an integer", path, key, d);
    *out = (int)d;
    return 0;
}

/* Reads a number field that must be finite and in [lo, hi], or in (lo, hi]
 * when lo_open. */
static int get_num(const cJSON *o, const char *key, double dflt, double lo, int lo_open, double hi, double *out,
                   const char *path, struct colibri_err *err)
{
    const cJSON *v = o ? cJSON_GetObjectItemCaseSensitive(o, key) : NULL;
    if (!v || cJSON_IsNull(v)) { *out = dflt; return 0; }
    if (!cJSON_IsNumber(v)) return base_err_set(err, COLIBRI_EFORMAT, "%s: field '%s' is not a number", path, key);
    double d = v->valuedouble;
    if (!isfinite(d) || (lo_open ? d <= lo : d < lo) || d > hi)
        return base_err_set(err, COLIBRI_EFORMAT, "%s: field '%s' is %g; it must be a finite number in %c%g, %g]", path,
                       key, d, lo_open ? '(' : '[', lo, hi);
    *out = d;
    return 0;
}

#define CFG_MAX_KEYS 4096        /* real configs have under a hundred */

/* Refuses an object with too many keys or one key twice (Python's json
 * keeps the last of two equal keys, cJSON the first: we would read another
 * value than transformers does). o may be NULL. */
static int check_keys(const cJSON *o, const char *what, const char *path, struct colibri_err *err)
{
    if (!cJSON_IsObject(o)) return 0;
    int n = cJSON_GetArraySize(o);
    if (n > CFG_MAX_KEYS)
        return base_err_set(err, COLIBRI_EFORMAT, "%s: %s has %d fields; more than %d is not a model config", path, what,
                       n, CFG_MAX_KEYS);
    for (const cJSON *a = o->child; a; a = a->next)
        for (const cJSON *b = a->next; b; b = b->next)
            if (a->string && b->string && !strcmp(a->string, b->string))
                return base_err_set(err, COLIBRI_EFORMAT, "%s: field '%s' appears twice in %s", path, a->string, what);
    return 0;
}

/* A boolean field: true or false, or dflt when absent or null. Anything
 * else ("yes", 1) is refused: reading it as the default would silently run
 * another model than the one the file describes. */
static int get_bool(const cJSON *o, const char *key, int dflt, int *out, const char *path, struct colibri_err *err)
{
    const cJSON *v = o ? cJSON_GetObjectItemCaseSensitive(o, key) : NULL;
    if (!v || cJSON_IsNull(v)) { *out = dflt; return 0; }
    if (!cJSON_IsBool(v))
        return base_err_set(err, COLIBRI_EFORMAT, "%s: field '%s' must be true or false, got %s", path, key,
                            cJSON_IsString(v) ? "a string" : cJSON_IsNumber(v) ? "a number" : "another JSON type");
    *out = cJSON_IsTrue(v);
    return 0;
}

static double yarn_mscale(double scale, double m)
{
    return scale <= 1.0 ? 1.0 : 0.1 * m * log(scale) + 1.0;
}

static double yarn_correction_dim(double n_rot, int dim, double base, double max_pos)
{
    return (dim * log(max_pos / (n_rot * 2.0 * M_PI))) / (2.0 * log(base));
}

/* Inverse frequencies and cos/sin factor, as HF's _compute_default_rope_parameters
 * and _compute_yarn_parameters compute them (fp32 frequencies). */
static void derive_rope(struct model_config *c)
{
    int dim = c->qk_rope_head_dim, half = dim / 2;
    for (int i = 0; i < half; i++) {
        float pos_freq = powf((float)c->rope_theta, (float)(2 * i) / (float)dim);
        c->inv_freq[i] = 1.0f / pos_freq;
    }
    c->rope_attention_factor = 1.0f;
    c->softmax_scale = 1.0f / sqrtf((float)(c->qk_nope_head_dim + c->qk_rope_head_dim));
    if (strcmp(c->rope_type, "yarn") != 0) return;

    double factor = c->rope_factor;
    if (c->rope_attention_factor_cfg > 0)
        c->rope_attention_factor = (float)c->rope_attention_factor_cfg;
    else if (c->rope_mscale != 0 && c->rope_mscale_all_dim != 0)
        c->rope_attention_factor = (float)(yarn_mscale(factor, c->rope_mscale) / yarn_mscale(factor, c->rope_mscale_all_dim));
    else
        c->rope_attention_factor = (float)yarn_mscale(factor, 1.0);

    double low = yarn_correction_dim(c->rope_beta_fast, dim, c->rope_theta, c->rope_original_max_pos);
    double high = yarn_correction_dim(c->rope_beta_slow, dim, c->rope_theta, c->rope_original_max_pos);
    if (!c->rope_no_truncate) {
        low = floor(low);
        high = ceil(high);
    }
    if (low < 0) low = 0;
    if (high > dim - 1) high = dim - 1;
    if (low == high) high += 0.001;
    for (int i = 0; i < half; i++) {
        float pos_freq = powf((float)c->rope_theta, (float)(2 * i) / (float)dim);
        float extrap = 1.0f / pos_freq, interp = 1.0f / ((float)factor * pos_freq);
        float ramp = ((float)i - (float)low) / (float)(high - low);
        ramp = ramp < 0 ? 0 : ramp > 1 ? 1 : ramp;
        float extrap_factor = 1.0f - ramp;
        c->inv_freq[i] = interp * (1.0f - extrap_factor) + extrap * extrap_factor;
    }
    if (c->rope_mscale_all_dim != 0) {
        double m = yarn_mscale(factor, c->rope_mscale_all_dim);
        c->softmax_scale = (float)(c->softmax_scale * m * m);
    }
}

/* Every key of rope_scaling / rope_parameters is one colibri reads, or one
 * transformers ignores for these families (max_position_embeddings, which
 * Mistral4Config writes there); any other is refused by name, so a RoPE
 * variant is never silently run as another. */
static int check_rope_keys(const cJSON *r, const struct model_config *c, const char *path, struct colibri_err *err)
{
    static const char *const known[] = { "rope_type", "type", "rope_theta", "factor",
                                         "original_max_position_embeddings", "beta_fast", "beta_slow", "mscale",
                                         "mscale_all_dim", "truncate", "attention_factor", "partial_rotary_factor",
                                         "max_position_embeddings" };
    if (!r) return 0;
    for (const cJSON *k = r->child; k; k = k->next) {
        int ok = c->family->reads_llama4_scale && !strcmp(k->string, "llama_4_scaling_beta");
        for (size_t i = 0; i < sizeof known / sizeof known[0] && !ok; i++) ok = !strcmp(k->string, known[i]);
        if (!ok)
            return base_err_set(err, COLIBRI_EUNSUPPORTED, "%s: RoPE parameter '%s' is not supported for %s", path,
                                k->string, c->model_type);
    }
    return 0;
}

static int parse_rope(const cJSON *root, struct model_config *c, const char *path, struct colibri_err *err)
{
    const cJSON *rp = cJSON_GetObjectItemCaseSensitive(root, "rope_parameters");
    const cJSON *rs = cJSON_GetObjectItemCaseSensitive(root, "rope_scaling");
    const cJSON *r = cJSON_IsObject(rp) ? rp : cJSON_IsObject(rs) ? rs : NULL;
    int rc;
    double theta_top;
    if ((rc = get_num(root, "rope_theta", 10000.0, 1.0, 1, 1e12, &theta_top, path, err))) return rc;
    if ((rc = get_num(r, "rope_theta", theta_top, 1.0, 1, 1e12, &c->rope_theta, path, err))) return rc;

    const cJSON *type = r ? cJSON_GetObjectItemCaseSensitive(r, "rope_type") : NULL;
    if (!cJSON_IsString(type) && r) type = cJSON_GetObjectItemCaseSensitive(r, "type");
    snprintf(c->rope_type, sizeof c->rope_type, "%s", cJSON_IsString(type) ? type->valuestring : "default");
    if (strcmp(c->rope_type, "default") && strcmp(c->rope_type, "yarn"))
        return base_err_set(err, COLIBRI_EUNSUPPORTED, "%s: rope type '%s' is not supported (default, yarn)", path,
                       c->rope_type);
    if (!strcmp(c->rope_type, "yarn")) {
        if ((rc = get_num(r, "factor", 0, 0, 1, 1e6, &c->rope_factor, path, err))) return rc;
        if (c->rope_factor <= 0)
            return base_err_set(err, COLIBRI_EFORMAT, "%s: yarn rope needs a positive 'factor'", path);
        /* the correction dims take logs of max_pos / beta: both must be positive */
        if ((rc = get_int_in(r, "original_max_position_embeddings", 0, c->max_position_embeddings, 1,
                             MODEL_MAX_CONTEXT, &c->rope_original_max_pos, path, err)))
            return rc;
        if ((rc = get_num(r, "beta_fast", 32.0, 0, 1, 1e6, &c->rope_beta_fast, path, err))) return rc;
        if ((rc = get_num(r, "beta_slow", 1.0, 0, 1, 1e6, &c->rope_beta_slow, path, err))) return rc;
        if ((rc = get_num(r, "mscale", 0.0, 0, 0, 1e3, &c->rope_mscale, path, err))) return rc;
        if ((rc = get_num(r, "mscale_all_dim", 0.0, 0, 0, 1e3, &c->rope_mscale_all_dim, path, err))) return rc;
        int truncate;
        if ((rc = get_bool(r, "truncate", 1, &truncate, path, err))) return rc;
        c->rope_no_truncate = !truncate;
        if ((rc = get_num(r, "attention_factor", 0.0, 0, 1, 1e3, &c->rope_attention_factor_cfg, path, err)))
            return rc;
    }
    if ((rc = check_rope_keys(r, c, path, err))) return rc;
    /* transformers' V3.2 and GLM-5 attention ignore the field (interleaved) */
    int interleave = 1;
    if (c->family->reads_rope_interleave && (rc = get_bool(root, "rope_interleave", 1, &interleave, path, err)))
        return rc;
    c->rope_half_split = !interleave;
    if (c->family->reads_llama4_scale) {
        double beta;
        const cJSON *b = r ? cJSON_GetObjectItemCaseSensitive(r, "llama_4_scaling_beta") : NULL;
        if (!cJSON_IsNumber(b) || !c->rope_original_max_pos)
            return base_err_set(err, COLIBRI_EFORMAT, "%s: %s needs rope_parameters.llama_4_scaling_beta and "
                                "original_max_position_embeddings (the query scale reads both)", path, c->model_type);
        if ((rc = get_num(r, "llama_4_scaling_beta", 0, 0, 0, 1e3, &beta, path, err))) return rc;
        c->llama4_beta = (float)beta;
        c->llama4_max_pos = c->rope_original_max_pos;
    }
    return 0;
}

/* The family table: one row per model_type; every difference between the
 * families is a column here (config.h, struct model_family), read from the
 * transformers modeling and configuration files named by hf_class. */
#define V3_ROUTER_BIAS "mlp.gate.e_score_correction_bias"
#define INDEXER_NAMES                                                                                         \
    .indexer_wq_b = "self_attn.indexer.wq_b.weight", .indexer_wk = "self_attn.indexer.wk.weight",             \
    .indexer_k_norm_weight = "self_attn.indexer.k_norm.weight",                                               \
    .indexer_k_norm_bias = "self_attn.indexer.k_norm.bias",                                                   \
    .indexer_weights_proj = "self_attn.indexer.weights_proj.weight"
/* DeepseekV3Config's (and DeepseekV32Config's) defaults */
#define V3_DEFAULTS(max_pos)                                                                                 \
    { .n_group = 8, .topk_group = 4, .first_k_dense_replace = 3, .norm_topk_prob = 1,                       \
      .max_position_embeddings = (max_pos), .routed_scaling_factor = 2.5, .rms_norm_eps = 1e-6 }
static const struct model_family FAMILIES[] = {
    { .model_type = "deepseek_v3", .hf_class = "DeepseekV3ForCausalLM", .router_kind = MODEL_ROUTER_SIGMOID_NOAUX_TC,
      .scoring_func = "sigmoid", .topk_method_default = "noaux_tc", .reads_rope_interleave = 1, .has_mtp = 1,
      .latent_norm_eps = 1e-6f, .defaults = V3_DEFAULTS(4096), .names = { .router_bias = V3_ROUTER_BIAS } },
    { .model_type = "kimi_k2", .hf_class = "DeepseekV3ForCausalLM", .router_kind = MODEL_ROUTER_SIGMOID_NOAUX_TC,
      .scoring_func = "sigmoid", .topk_method_default = "noaux_tc", .reads_rope_interleave = 1, .has_mtp = 1,
      .latent_norm_eps = 1e-6f, .defaults = V3_DEFAULTS(4096), .names = { .router_bias = V3_ROUTER_BIAS } },
    { .model_type = "deepseek_v32", .hf_class = "DeepseekV32ForCausalLM", .router_kind = MODEL_ROUTER_SIGMOID_NOAUX_TC,
      .scoring_func = "sigmoid", .topk_method_default = "noaux_tc", .reads_mlp_layer_types = 1,
      .dsa_kind = MODEL_DSA_V32, .indexer_rope_interleaved = 0, .q_lora_required = 1, .has_mtp = 1,
      .latent_norm_eps = 1e-6f, .defaults = V3_DEFAULTS(163840),
      .fingerprint = MODEL_FP_DSA, .names = { .router_bias = V3_ROUTER_BIAS, INDEXER_NAMES } },
    { .model_type = "glm_moe_dsa", .hf_class = "GlmMoeDsaForCausalLM", .router_kind = MODEL_ROUTER_SIGMOID_NOAUX_TC,
      .scoring_func = "sigmoid", .topk_method_default = "noaux_tc", .reads_mlp_layer_types = 1,
      .dsa_kind = MODEL_DSA_GLM5, .indexer_rope_interleaved = 1, .q_lora_required = 1, .has_mtp = 1,
      .latent_norm_eps = 1e-6f,
      .defaults = { .n_group = 1, .topk_group = 1, .first_k_dense_replace = 3, .norm_topk_prob = 1,
                    .max_position_embeddings = 202752, .routed_scaling_factor = 2.5, .rms_norm_eps = 1e-5 },
      .fingerprint = MODEL_FP_DSA, .names = { .router_bias = V3_ROUTER_BIAS, INDEXER_NAMES } },
    { .model_type = "deepseek_v2", .hf_class = "DeepseekV2ForCausalLM", .router_kind = -1,
      .scoring_func = "softmax", .topk_method_default = "greedy", .latent_norm_eps = 1e-6f,
      /* n_group / topk_group have no default there (group_limited_greedy requires them) */
      .defaults = { .n_group = 1, .topk_group = 1, .first_k_dense_replace = 0, .norm_topk_prob = 0,
                    .max_position_embeddings = 2048, .routed_scaling_factor = 1.0, .rms_norm_eps = 1e-6 },
      .fingerprint = MODEL_FP_ROUTER, .names = { .router_bias = NULL } },
    /* Kimi K2.5 / K2.6: the text model of a multimodal wrapper */
    { .model_type = "kimi_k25", .hf_class = "Kimi_K25ForConditionalGeneration",
      .router_kind = MODEL_ROUTER_SIGMOID_NOAUX_TC, .scoring_func = "sigmoid", .topk_method_default = "noaux_tc",
      .reads_rope_interleave = 1, .has_mtp = 1, .latent_norm_eps = 1e-6f, .defaults = V3_DEFAULTS(4096),
      .text_config = 1, .tensor_prefix = "language_model.", .skip_prefixes = { "vision_tower.", "mm_projector." },
      .names = { .router_bias = V3_ROUTER_BIAS } },
    /* Mistral Small 4: V3 attention, Llama 4's query scale, a softmax router */
    { .model_type = "mistral4", .hf_class = "Mistral4ForCausalLM", .router_kind = MODEL_ROUTER_SOFTMAX_TOP2_GROUPS,
      .scoring_func = "softmax", .topk_method_default = NULL, .reads_rope_interleave = 1,
      .reads_llama4_scale = 1, .rope_fraction_of_qk_head = 1, .latent_norm_eps = 1e-6f,
      .defaults = { .n_group = 1, .topk_group = 1, .first_k_dense_replace = 0, .norm_topk_prob = 1,
                    .max_position_embeddings = 1048576, .routed_scaling_factor = 1.0, .rms_norm_eps = 1e-6 },
      .fingerprint = MODEL_FP_ROUTER, .names = { .router_bias = NULL } },
    /* GLM-4.7-Flash: V3 attention, GLM-4.5's MoE, dense layers anywhere */
    { .model_type = "glm4_moe_lite", .hf_class = "Glm4MoeLiteForCausalLM",
      .router_kind = MODEL_ROUTER_SIGMOID_NOAUX_TC, .scoring_func = "sigmoid", .topk_method_default = "noaux_tc",
      .reads_rope_interleave = 1, .reads_mlp_layer_types = 1, .mlp_layer_types_anywhere = 1, .has_mtp = 1,
      .latent_norm_eps = 1e-6f,
      .defaults = { .n_group = 1, .topk_group = 1, .first_k_dense_replace = 1, .norm_topk_prob = 1,
                    .max_position_embeddings = 202752, .routed_scaling_factor = 1.8, .rms_norm_eps = 1e-5 },
      .names = { .router_bias = V3_ROUTER_BIAS } },
    /* official names first, then transformers' save_pretrained spelling */
    { .model_type = "deepseek_v4", .hf_class = "DeepseekV4ForCausalLM", .router_kind = MODEL_ROUTER_SQRTSOFTPLUS,
      .scoring_func = "sqrtsoftplus", .latent_norm_eps = 1e-6f, .has_mtp = 1,
      .defaults = { .n_group = 1, .topk_group = 1, .first_k_dense_replace = 0, .norm_topk_prob = 1,
                    .max_position_embeddings = 1048576, .routed_scaling_factor = 1.5, .rms_norm_eps = 1e-6 },
      .fingerprint = MODEL_FP_V4,
      .names = { .embed = "embed.weight|model.embed_tokens.weight", .final_norm = "norm.weight|model.norm.weight",
                 .lm_head = "head.weight|lm_head.weight", .mtp_unloaded = "mtp." },
      .parse = model_config_parse_v4 },
    /* GLM-5.3: the text model of a multimodal wrapper (model.language_model.*,
     * the vision tower model.visual.* skipped); KDA layers, hyper-connections */
    { .model_type = "glm5_next", .hf_class = "Glm5NextForConditionalGeneration",
      .router_kind = MODEL_ROUTER_SIGMOID_NOAUX_TC, .scoring_func = "sigmoid", .latent_norm_eps = 1e-6f,
      .defaults = { .n_group = 1, .topk_group = 1, .first_k_dense_replace = 0, .norm_topk_prob = 1,
                    .max_position_embeddings = 1048576, .routed_scaling_factor = 2.5, .rms_norm_eps = 1e-5 },
      .fingerprint = MODEL_FP_ROUTER, .model_prefix = "model.language_model.", .skip_prefixes = { "model.visual." },
      .names = { .router_bias = V3_ROUTER_BIAS }, .parse = model_config_parse_glm53 },
};
#define N_FAMILIES ((int)(sizeof FAMILIES / sizeof FAMILIES[0]))

const struct model_family *model_family_find(const char *model_type)
{
    for (int i = 0; i < N_FAMILIES; i++)
        if (!strcmp(FAMILIES[i].model_type, model_type)) return &FAMILIES[i];
    return NULL;
}

/* "deepseek_v3, kimi_k2, ..." for messages. */
static void family_list(char *out, size_t n)
{
    out[0] = 0;
    for (int i = 0; i < N_FAMILIES; i++)
        snprintf(out + strlen(out), n - strlen(out), "%s%s", i ? ", " : "", FAMILIES[i].model_type);
}

/* A string field: *out is its value, or dflt when absent or null; a value of
 * another JSON type is refused. */
static int get_str(const cJSON *o, const char *key, const char *dflt, const char **out, const char *path,
                   struct colibri_err *err)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!v || cJSON_IsNull(v)) { *out = dflt; return 0; }
    if (!cJSON_IsString(v)) return base_err_set(err, COLIBRI_EFORMAT, "%s: field '%s' is not a string", path, key);
    *out = v->valuestring;
    return 0;
}

/* The fields that select behaviour (router, activation, biases): a value
 * colibri does not implement is refused naming field and value. */
static int parse_behaviour(const cJSON *root, struct model_config *c, const char *path, struct colibri_err *err)
{
    const struct model_family *f = c->family;
    const char *v;
    int rc;
    if ((rc = get_str(root, "hidden_act", "silu", &v, path, err))) return rc;
    if (strcmp(v, "silu"))
        return base_err_set(err, COLIBRI_EUNSUPPORTED, "%s: hidden_act '%s' is not supported (silu)", path, v);
    if ((rc = get_str(root, "scoring_func", f->scoring_func, &v, path, err))) return rc;
    if (strcmp(v, f->scoring_func))
        return base_err_set(err, COLIBRI_EUNSUPPORTED, "%s: scoring_func '%s' is not supported for %s (%s)", path, v,
                            f->model_type, f->scoring_func);
    if ((rc = get_str(root, "topk_method", f->topk_method_default, &v, path, err))) return rc;
    if (f->router_kind >= 0 && !f->topk_method_default) {
        c->router_kind = f->router_kind;    /* the family's router reads no topk_method (transformers deletes it) */
    } else if (f->router_kind >= 0) {
        if (strcmp(v, f->topk_method_default))
            return base_err_set(err, COLIBRI_EUNSUPPORTED, "%s: topk_method '%s' is not supported for %s (%s)", path,
                                v, f->model_type, f->topk_method_default);
        c->router_kind = f->router_kind;
    } else if (!strcmp(v, "greedy")) {
        c->router_kind = MODEL_ROUTER_SOFTMAX_GREEDY;
    } else if (!strcmp(v, "group_limited_greedy")) {
        c->router_kind = MODEL_ROUTER_SOFTMAX_GROUP_LIMITED;
        /* transformers has no default group count for this method */
        const cJSON *g = cJSON_GetObjectItemCaseSensitive(root, "n_group");
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(root, "topk_group");
        if (!cJSON_IsNumber(g) || !cJSON_IsNumber(t))
            return base_err_set(err, COLIBRI_EFORMAT, "%s: topk_method 'group_limited_greedy' needs n_group and "
                                "topk_group", path);
    } else {
        return base_err_set(err, COLIBRI_EUNSUPPORTED,
                            "%s: topk_method '%s' is not supported for %s (greedy, group_limited_greedy)", path, v,
                            f->model_type);
    }
    int flag;
    if ((rc = get_bool(root, "norm_topk_prob", 0, &flag, path, err))) return rc;
    if ((c->router_kind == MODEL_ROUTER_SOFTMAX_GREEDY || c->router_kind == MODEL_ROUTER_SOFTMAX_GROUP_LIMITED) &&
        flag)
        return base_err_set(err, COLIBRI_EUNSUPPORTED,
                            "%s: norm_topk_prob=true is not supported for %s (%s ignores it, DeepSeek's code applies "
                            "it: the two disagree)", path, f->model_type, f->hf_class);
    /* transformers' rope init rotates int(head_dim * partial_rotary_factor)
     * dims, head_dim being qk_rope_head_dim or (Mistral 4) the whole query
     * head: colibri rotates qk_rope_head_dim, so the product must give it */
    const char *holders[] = { NULL, "rope_parameters", "rope_scaling" };
    int base = c->qk_rope_head_dim + (f->rope_fraction_of_qk_head ? c->qk_nope_head_dim : 0);
    for (int i = 0; i < 3; i++) {
        const cJSON *o = holders[i] ? cJSON_GetObjectItemCaseSensitive(root, holders[i]) : root;
        double prf;
        if (!cJSON_IsObject(o) || !base) continue;  /* zero dims: refused with the sizes */
        if ((rc = get_num(o, "partial_rotary_factor", (double)c->qk_rope_head_dim / base, 0, 1, 1.0, &prf, path,
                          err)))
            return rc;
        if ((int)(base * prf) != c->qk_rope_head_dim)
            return base_err_set(err, COLIBRI_EUNSUPPORTED, "%s: partial_rotary_factor %g rotates %d dims, not "
                                "qk_rope_head_dim %d (not supported)", path, prf, (int)(base * prf),
                                c->qk_rope_head_dim);
    }
    if ((rc = get_bool(root, "mlp_bias", 0, &flag, path, err))) return rc;
    if (flag)
        return base_err_set(err, COLIBRI_EUNSUPPORTED, "%s: mlp_bias=true is not supported", path);
    int freq;
    if ((rc = get_int_in(root, "moe_layer_freq", 0, 1, 0, MODEL_MAX_LAYERS, &freq, path, err))) return rc;
    if (freq != 1)
        return base_err_set(err, COLIBRI_EUNSUPPORTED,
                            "%s: moe_layer_freq %d is not supported (1: every layer from first_k_dense_replace on is "
                            "MoE)", path, freq);
    return 0;
}

/* An array field of strings with one entry per layer; NULL when absent or
 * null. */
static int get_layer_list(const cJSON *root, const char *key, int n_layers, const cJSON **out, const char *path,
                          struct colibri_err *err)
{
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(root, key);
    *out = NULL;
    if (!a || cJSON_IsNull(a)) return 0;
    if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) != n_layers)
        return base_err_set(err, COLIBRI_EFORMAT, "%s: field '%s' must be a list of %d strings (one per layer)", path,
                            key, n_layers);
    int i = 0;
    for (const cJSON *e = a->child; e; e = e->next, i++)
        if (!cJSON_IsString(e))
            return base_err_set(err, COLIBRI_EFORMAT, "%s: field '%s'[%d] is not a string", path, key, i);
    *out = a;
    return 0;
}

/* mlp_layer_types (V3.2, GLM-5, GLM-4.7-Flash): the per-layer dense/sparse
 * pattern that transformers follows instead of first_k_dense_replace. V3.2
 * and GLM-5 must have a dense prefix; a family with mlp_layer_types_anywhere
 * may put dense layers anywhere, and without the field has its config
 * class's pattern: the first layer dense. first_k_dense_replace becomes the
 * first MoE layer (the expert store starts there). */
static int parse_mlp_layer_types(const cJSON *root, struct model_config *c, const char *path,
                                 struct colibri_err *err)
{
    const cJSON *a;
    int rc = get_layer_list(root, "mlp_layer_types", c->num_hidden_layers, &a, path, err);
    int anywhere = c->family->mlp_layer_types_anywhere;
    if (!rc && !a && anywhere) {
        memset(c->mlp_dense, 0, sizeof c->mlp_dense);
        c->mlp_dense[0] = 1;
        c->first_k_dense_replace = c->num_hidden_layers > 1 ? 1 : c->num_hidden_layers;
    }
    if (rc || !a) return rc;
    int i = 0, n_dense = 0, seen_sparse = 0;
    for (const cJSON *e = a->child; e; e = e->next, i++) {
        c->mlp_dense[i] = !strcmp(e->valuestring, "dense");
        if (!strcmp(e->valuestring, "sparse")) {
            if (!seen_sparse) c->first_k_dense_replace = i;
            seen_sparse = 1;
        } else if (!strcmp(e->valuestring, "dense")) {
            if (seen_sparse && !anywhere)
                return base_err_set(err, COLIBRI_EUNSUPPORTED,
                                    "%s: mlp_layer_types: dense layer %d after a sparse one is not supported (dense "
                                    "layers must come first)", path, i);
            n_dense++;
        } else {
            return base_err_set(err, COLIBRI_EUNSUPPORTED, "%s: mlp_layer_types[%d] '%s' is not supported (dense, "
                                "sparse)", path, i, e->valuestring);
        }
    }
    if (!anywhere) c->first_k_dense_replace = n_dense;
    else if (!seen_sparse) c->first_k_dense_replace = c->num_hidden_layers;
    return 0;
}

/* GLM-5's indexer_types, as GlmMoeDsaConfig derives it: the list itself, else
 * index_topk_pattern ("FFS..." or a list), else index_topk_freq /
 * index_skip_topk_offset (layer i is full when max(i - offset + 1, 0) is a
 * multiple of freq). */
static int parse_indexer_types(const cJSON *root, struct model_config *c, const char *path, struct colibri_err *err)
{
    int L = c->num_hidden_layers, rc;
    const cJSON *a;
    if ((rc = get_layer_list(root, "indexer_types", L, &a, path, err))) return rc;
    const cJSON *pat = a ? NULL : cJSON_GetObjectItemCaseSensitive(root, "index_topk_pattern");
    if (a || cJSON_IsArray(pat)) {
        const char *key = a ? "indexer_types" : "index_topk_pattern";
        if (!a && (rc = get_layer_list(root, key, L, &a, path, err))) return rc;
        int i = 0;
        for (const cJSON *e = a->child; e; e = e->next, i++) {
            if (strcmp(e->valuestring, "full") && strcmp(e->valuestring, "shared"))
                return base_err_set(err, COLIBRI_EUNSUPPORTED, "%s: %s[%d] '%s' is not supported (full, shared)", path,
                                    key, i, e->valuestring);
            c->indexer_full[i] = !strcmp(e->valuestring, "full");
        }
    } else if (pat && !cJSON_IsNull(pat)) {
        if (!cJSON_IsString(pat) || (int)strlen(pat->valuestring) != L)
            return base_err_set(err, COLIBRI_EFORMAT, "%s: field 'index_topk_pattern' must be %d letters F or S", path,
                                L);
        for (int i = 0; i < L; i++) {
            char ch = pat->valuestring[i];
            if (ch != 'F' && ch != 'S')
                return base_err_set(err, COLIBRI_EFORMAT, "%s: index_topk_pattern[%d] is '%c', not F or S", path, i,
                                    ch);
            c->indexer_full[i] = ch == 'F';
        }
    } else {
        int freq, offset;
        if ((rc = get_int_in(root, "index_topk_freq", 0, 1, 0, MODEL_MAX_LAYERS, &freq, path, err)) ||
            (rc = get_int_in(root, "index_skip_topk_offset", 0, 2, 0, MODEL_MAX_LAYERS, &offset, path, err)))
            return rc;
        if (freq < 1) freq = 1;
        for (int i = 0; i < L; i++) {
            int d = i - offset + 1;
            c->indexer_full[i] = (d > 0 ? d : 0) % freq == 0;
        }
    }
    if (!c->indexer_full[0])
        return base_err_set(err, COLIBRI_EFORMAT,
                            "%s: indexer_types: layer 0 is 'shared', but a shared layer reuses an earlier full "
                            "layer's selection", path);
    return 0;
}

/* The DSA fields (index_*, the per-layer indexer pattern) and layer_types. */
static int parse_dsa(const cJSON *root, struct model_config *c, const char *path, struct colibri_err *err)
{
    const struct model_family *f = c->family;
    c->dsa_kind = f->dsa_kind;
    if (f->dsa_kind == MODEL_DSA_NONE || !c->num_hidden_layers) return 0;   /* zero layers: refused below */
    const cJSON *a;
    int rc = get_layer_list(root, "layer_types", c->num_hidden_layers, &a, path, err);
    if (rc) return rc;
    int i = 0;
    for (const cJSON *e = a ? a->child : NULL; e; e = e->next, i++)
        if (strcmp(e->valuestring, "indexed_attention"))
            return base_err_set(err, COLIBRI_EUNSUPPORTED, "%s: layer_types[%d] '%s' is not supported "
                                "(indexed_attention)", path, i, e->valuestring);
    int dflt_heads = f->dsa_kind == MODEL_DSA_GLM5 ? 32 : 64;   /* the configuration classes' defaults */
    if ((rc = get_int_in(root, "index_n_heads", 0, dflt_heads, 1, MODEL_MAX_HEADS, &c->index_n_heads, path, err)) ||
        (rc = get_int_in(root, "index_head_dim", 0, 128, 1, MODEL_MAX_DIM, &c->index_head_dim, path, err)) ||
        (rc = get_int_in(root, "index_topk", 0, 2048, 1, MODEL_MAX_INDEX_TOPK, &c->index_topk, path, err)))
        return rc;
    if (c->index_head_dim < c->qk_rope_head_dim)
        return base_err_set(err, COLIBRI_EFORMAT, "%s: index_head_dim %d is smaller than qk_rope_head_dim %d (the "
                            "indexer rotates its first qk_rope_head_dim dims)", path, c->index_head_dim,
                            c->qk_rope_head_dim);
    c->indexer_rope_interleaved = f->indexer_rope_interleaved;
    if (f->dsa_kind == MODEL_DSA_GLM5) return parse_indexer_types(root, c, path, err);
    memset(c->indexer_full, 1, (size_t)c->num_hidden_layers);
    return 0;
}

/* num_nextn_predict_layers (transformers also reads num_mtp_layers); 0 for
 * a family without MTP, whose checkpoints have no layers past the last. */
static int parse_mtp(const cJSON *root, struct model_config *c, const char *path, struct colibri_err *err)
{
    if (!c->family->has_mtp) return 0;
    const char *key = cJSON_GetObjectItemCaseSensitive(root, "num_nextn_predict_layers") ? "num_nextn_predict_layers"
                                                                                          : "num_mtp_layers";
    return get_int_in(root, key, 0, 0, 0, MODEL_MAX_MTP_LAYERS, &c->num_nextn_predict_layers, path, err);
}

/* A wrapper's text_config (Kimi K2.5): the object the model's fields are
 * read from, whose model_type must be one transformers builds a DeepSeek-V3
 * text model for (absent: deepseek_v3, as Kimi_K25Config). */
static int text_config(const cJSON *top, const cJSON **out, const char *path, struct colibri_err *err)
{
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(top, "text_config");
    if (!cJSON_IsObject(t))
        return base_err_set(err, COLIBRI_EFORMAT, "%s: field 'text_config' (the language model's config) is missing",
                            path);
    const cJSON *mt = cJSON_GetObjectItemCaseSensitive(t, "model_type");
    if (mt && !(cJSON_IsString(mt) && (!strcmp(mt->valuestring, "deepseek_v3") || !strcmp(mt->valuestring, "kimi_k2"))))
        return base_err_set(err, COLIBRI_EUNSUPPORTED, "%s: text_config.model_type '%s' is not supported (deepseek_v3, "
                            "kimi_k2)", path, cJSON_IsString(mt) ? mt->valuestring : "(not a string)");
    *out = t;
    return check_keys(t, "text_config", path, err);
}

int model_config_parse(const char *json, const char *path, struct model_config *c, struct colibri_err *err)
{
    memset(c, 0, sizeof *c);
    cJSON *top = cJSON_Parse(json);
    if (!top || !cJSON_IsObject(top)) {
        cJSON_Delete(top);
        return base_err_set(err, COLIBRI_EFORMAT, "%s: not a JSON object", path);
    }
    const cJSON *root = top;
    int rc = 0;
    if ((rc = check_keys(root, "the top level", path, err)) ||
        (rc = check_keys(cJSON_GetObjectItemCaseSensitive(root, "rope_scaling"), "rope_scaling", path, err)) ||
        (rc = check_keys(cJSON_GetObjectItemCaseSensitive(root, "rope_parameters"), "rope_parameters", path, err)))
        goto out;
    const cJSON *mt = cJSON_GetObjectItemCaseSensitive(root, "model_type");
    if (!cJSON_IsString(mt)) {
        rc = base_err_set(err, COLIBRI_EFORMAT, "%s: field 'model_type' is missing", path);
        goto out;
    }
    if (!(c->family = model_family_find(mt->valuestring))) {
        char list[256];
        family_list(list, sizeof list);
        rc = base_err_set(err, COLIBRI_EUNSUPPORTED, "%s: model_type '%s' is not supported (supported: %s)", path,
                          mt->valuestring, list);
        goto out;
    }
    snprintf(c->model_type, sizeof c->model_type, "%s", mt->valuestring);
    c->latent_norm_eps = c->family->latent_norm_eps;
    if (c->family->text_config &&
        ((rc = text_config(top, &root, path, err)) ||
         (rc = check_keys(cJSON_GetObjectItemCaseSensitive(root, "rope_scaling"), "rope_scaling", path, err)) ||
         (rc = check_keys(cJSON_GetObjectItemCaseSensitive(root, "rope_parameters"), "rope_parameters", path, err))))
        goto out;
    c->hc_mult = 1;
    if (c->family->parse) {
        rc = c->family->parse(root, c, path, err);
        if (!rc) {
            const cJSON *qc = cJSON_GetObjectItemCaseSensitive(root, "quantization_config");
            if ((rc = check_keys(qc, "quantization_config", path, err)) ||
                (rc = model_quant_config_parse(qc, path, &c->quant, err)))
                goto out;
        }
        goto out;
    }

    const struct model_family_defaults *fam = &c->family->defaults;
    /* required fields have no default; lo is 0 where zero has a meaning
     * (no low-rank query, no experts) or is refused below with the others */
    const struct { const char *key; int *dst; int required, dflt, lo, hi; } ints[] = {
        { "vocab_size", &c->vocab_size, 1, 0, 0, MODEL_MAX_VOCAB },
        { "hidden_size", &c->hidden_size, 1, 0, 0, MODEL_MAX_DIM },
        { "intermediate_size", &c->intermediate_size, 1, 0, 0, MODEL_MAX_DIM },
        { "moe_intermediate_size", &c->moe_intermediate_size, 1, 0, 0, MODEL_MAX_DIM },
        { "num_hidden_layers", &c->num_hidden_layers, 1, 0, 0, MODEL_MAX_LAYERS },
        { "num_attention_heads", &c->num_attention_heads, 1, 0, 0, MODEL_MAX_HEADS },
        { "q_lora_rank", &c->q_lora_rank, 0, 0, 0, MODEL_MAX_DIM },
        { "kv_lora_rank", &c->kv_lora_rank, 1, 0, 0, MODEL_MAX_DIM },
        { "qk_nope_head_dim", &c->qk_nope_head_dim, 1, 0, 0, MODEL_MAX_DIM },
        { "qk_rope_head_dim", &c->qk_rope_head_dim, 1, 0, 0, MODEL_MAX_ROPE_DIM },
        { "v_head_dim", &c->v_head_dim, 1, 0, 0, MODEL_MAX_DIM },
        { "n_routed_experts", &c->n_routed_experts, 0, 0, 0, MODEL_MAX_EXPERTS },
        { "n_shared_experts", &c->n_shared_experts, 0, 0, 0, MODEL_MAX_SHARED_EXPERTS },
        { "num_experts_per_tok", &c->num_experts_per_tok, 0, 0, 0, MODEL_MAX_EXPERTS },
        { "n_group", &c->n_group, 0, fam->n_group, 0, MODEL_MAX_EXPERTS },
        { "topk_group", &c->topk_group, 0, fam->topk_group, 0, MODEL_MAX_EXPERTS },
        { "first_k_dense_replace", &c->first_k_dense_replace, 0, fam->first_k_dense_replace, 0, MODEL_MAX_LAYERS },
        { "max_position_embeddings", &c->max_position_embeddings, 0, fam->max_position_embeddings, 1,
          MODEL_MAX_CONTEXT },
    };
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++)
        if ((rc = get_int_in(root, ints[i].key, ints[i].required, ints[i].dflt, ints[i].lo, ints[i].hi, ints[i].dst,
                             path, err)))
            goto out;
    int kv_heads;
    if ((rc = get_int_in(root, "num_key_value_heads", 0, c->num_attention_heads, 0, MODEL_MAX_HEADS, &kv_heads, path,
                         err)))
        goto out;
    if (kv_heads != c->num_attention_heads) {
        rc = base_err_set(err, COLIBRI_EUNSUPPORTED, "%s: num_key_value_heads %d != num_attention_heads %d", path, kv_heads,
                     c->num_attention_heads);
        goto out;
    }
    double d;
    if ((rc = get_num(root, "routed_scaling_factor", fam->routed_scaling_factor, 0, 1, 1e6, &d, path, err))) goto out;
    c->routed_scaling_factor = (float)d;
    /* at least FLT_MIN, so it stays positive as a float */
    if ((rc = get_num(root, "rms_norm_eps", fam->rms_norm_eps, 1.2e-38, 0, 1.0, &d, path, err))) goto out;
    c->rms_norm_eps = (float)d;
    if ((rc = get_bool(root, "norm_topk_prob", fam->norm_topk_prob, &c->norm_topk_prob, path, err)) ||
        /* a wrapper's own field decides (Kimi_K25Config: true unless given) */
        (rc = get_bool(top, "tie_word_embeddings", c->family->text_config, &c->tie_word_embeddings, path, err)) ||
        (rc = get_bool(root, "attention_bias", 0, &c->attention_bias, path, err)))
        goto out;
    if (c->attention_bias) {
        rc = base_err_set(err, COLIBRI_EUNSUPPORTED, "%s: attention_bias=true is not supported", path);
        goto out;
    }
    if (c->family->q_lora_required && !c->q_lora_rank) {
        rc = base_err_set(err, COLIBRI_EFORMAT, "%s: %s needs q_lora_rank (null is not a %s)", path, c->model_type,
                          c->family->hf_class);
        goto out;
    }
    if ((rc = parse_behaviour(root, c, path, err))) goto out;
    if (c->family->reads_mlp_layer_types && (rc = parse_mlp_layer_types(root, c, path, err))) goto out;
    if ((rc = parse_mtp(root, c, path, err))) goto out;
    if ((rc = parse_rope(root, c, path, err))) goto out;
    if ((rc = parse_dsa(root, c, path, err))) goto out;

    /* Consistency: these would otherwise become out-of-bounds reads later. */
    if (c->qk_rope_head_dim % 2 || c->qk_rope_head_dim > MODEL_MAX_ROPE_DIM || c->qk_rope_head_dim == 0) {
        rc = base_err_set(err, COLIBRI_EFORMAT, "%s: field 'qk_rope_head_dim' = %d must be even, 2..%d", path,
                     c->qk_rope_head_dim, MODEL_MAX_ROPE_DIM);
        goto out;
    }
    if (!c->vocab_size || !c->hidden_size || !c->num_hidden_layers || !c->num_attention_heads ||
        !c->kv_lora_rank || !c->v_head_dim) {
        rc = base_err_set(err, COLIBRI_EFORMAT, "%s: a size field is zero (vocab, hidden, layers, heads, kv_lora_rank, "
                     "v_head_dim must be positive)", path);
        goto out;
    }
    if (c->first_k_dense_replace > c->num_hidden_layers) c->first_k_dense_replace = c->num_hidden_layers;
    if (c->first_k_dense_replace < c->num_hidden_layers) {
        if (!c->n_routed_experts || !c->num_experts_per_tok || c->num_experts_per_tok > c->n_routed_experts) {
            rc = base_err_set(err, COLIBRI_EFORMAT, "%s: MoE layers need 1 <= num_experts_per_tok (%d) <= n_routed_experts (%d)",
                         path, c->num_experts_per_tok, c->n_routed_experts);
            goto out;
        }
        /* top-2-sum group scores need two experts per group, max scores one */
        int min_per = c->router_kind == MODEL_ROUTER_SIGMOID_NOAUX_TC ||
                      c->router_kind == MODEL_ROUTER_SOFTMAX_TOP2_GROUPS ? 2 : 1;
        if (c->router_kind == MODEL_ROUTER_SOFTMAX_GREEDY) {
            /* no groups: transformers' greedy top-k ignores n_group and topk_group */
        } else if (!c->n_group || c->n_routed_experts % c->n_group || c->n_routed_experts / c->n_group < min_per ||
            !c->topk_group || c->topk_group > c->n_group ||
            c->num_experts_per_tok > c->topk_group * (c->n_routed_experts / c->n_group)) {
            rc = base_err_set(err, COLIBRI_EFORMAT,
                         "%s: n_group %d / topk_group %d do not fit n_routed_experts %d with top-%d (need >= %d experts "
                         "per group)", path, c->n_group, c->topk_group, c->n_routed_experts, c->num_experts_per_tok,
                         min_per);
            goto out;
        }
    }
    const cJSON *qc = cJSON_GetObjectItemCaseSensitive(top, "quantization_config");
    if (!qc) qc = cJSON_GetObjectItemCaseSensitive(root, "quantization_config");
    if ((rc = check_keys(qc, "quantization_config", path, err)) ||
        (rc = model_quant_config_parse(qc, path, &c->quant, err)))
        goto out;
    derive_rope(c);
out:
    cJSON_Delete(top);
    return rc;
}

int model_config_fingerprint_text(const struct model_config *c, char *out, size_t n)
{
    int k = snprintf(out, n,
                     "model_type=%s;vocab_size=%d;hidden_size=%d;intermediate_size=%d;moe_intermediate_size=%d;"
                     "num_hidden_layers=%d;num_attention_heads=%d;q_lora_rank=%d;kv_lora_rank=%d;"
                     "qk_nope_head_dim=%d;qk_rope_head_dim=%d;v_head_dim=%d;n_routed_experts=%d;"
                     "n_shared_experts=%d;num_experts_per_tok=%d;n_group=%d;topk_group=%d;"
                     "first_k_dense_replace=%d;routed_scaling_factor=%.9g;norm_topk_prob=%d;rms_norm_eps=%.9g;"
                     "max_position_embeddings=%d;tie_word_embeddings=%d;attention_bias=%d;rope_type=%s;"
                     "rope_theta=%.9g;rope_factor=%.9g;rope_original_max_pos=%d;rope_beta_fast=%.9g;"
                     "rope_beta_slow=%.9g;rope_mscale=%.9g;rope_mscale_all_dim=%.9g;",
                     c->model_type, c->vocab_size, c->hidden_size, c->intermediate_size, c->moe_intermediate_size,
                     c->num_hidden_layers, c->num_attention_heads, c->q_lora_rank, c->kv_lora_rank,
                     c->qk_nope_head_dim, c->qk_rope_head_dim, c->v_head_dim, c->n_routed_experts,
                     c->n_shared_experts, c->num_experts_per_tok, c->n_group, c->topk_group,
                     c->first_k_dense_replace, (double)c->routed_scaling_factor, c->norm_topk_prob,
                     (double)c->rms_norm_eps, c->max_position_embeddings, c->tie_word_embeddings,
                     c->attention_bias, c->rope_type, c->rope_theta, c->rope_factor, c->rope_original_max_pos,
                     c->rope_beta_fast, c->rope_beta_slow, c->rope_mscale, c->rope_mscale_all_dim);
    unsigned groups = c->family ? c->family->fingerprint : 0;
#define APPEND(...) \
    (k += (k >= 0 && (size_t)k < n) ? snprintf(out + k, n - (size_t)k, __VA_ARGS__) : 0)
    if (groups & MODEL_FP_ROUTER) APPEND("router_kind=%d;", c->router_kind);
    if (groups & MODEL_FP_V4) {
        APPEND("head_dim=%d;sliding_window=%d;o_groups=%d;o_lora_rank=%d;hc_mult=%d;hc_sinkhorn_iters=%d;hc_eps=%.9g;"
               "swiglu_limit=%.9g;index_n_heads=%d;index_head_dim=%d;index_topk=%d;theta=%.9g,%.9g;yarn=%d,%.9g,%.9g,"
               "%.9g,%.9g,%.9g;layers=", c->head_dim, c->sliding_window, c->o_groups, c->o_lora_rank, c->hc_mult,
               c->hc_sinkhorn_iters, (double)c->hc_eps, (double)c->swiglu_limit, c->index_n_heads, c->index_head_dim,
               c->index_topk, c->v4_theta[0], c->v4_theta[1], c->v4_yarn, c->v4_yarn_factor, c->v4_yarn_orig,
               c->v4_yarn_beta_fast, c->v4_yarn_beta_slow, c->v4_yarn_attn_factor);
        for (int i = 0; i < c->num_hidden_layers && i < MODEL_MAX_LAYERS; i++)
            APPEND("%d%s,", c->compress_ratio[i], c->hash_layer[i] ? "h" : "");
        APPEND(";");
    }
    if (groups & MODEL_FP_DSA) {
        APPEND("dsa_kind=%d;index_n_heads=%d;index_head_dim=%d;index_topk=%d;indexer_rope_interleaved=%d;"
               "indexer_full=", c->dsa_kind, c->index_n_heads, c->index_head_dim, c->index_topk,
               c->indexer_rope_interleaved);
        for (int i = 0; i < c->num_hidden_layers && i < MODEL_MAX_LAYERS; i++) APPEND("%d", c->indexer_full[i]);
        APPEND(";");
    }
    /* what only newer families or fields change, hashed only when it
     * differs from what every earlier model had, so their fingerprints stay */
    if (c->rope_half_split) APPEND("rope_interleave=0;");
    if (c->rope_no_truncate) APPEND("rope_truncate=0;");
    if (c->rope_attention_factor_cfg > 0) APPEND("rope_attention_factor=%.9g;", c->rope_attention_factor_cfg);
    if (c->llama4_beta != 0) APPEND("llama4_beta=%.9g;llama4_max_pos=%d;", (double)c->llama4_beta, c->llama4_max_pos);
    int later_dense = 0;
    for (int i = c->first_k_dense_replace; i < c->num_hidden_layers && i < MODEL_MAX_LAYERS; i++)
        later_dense |= c->mlp_dense[i];
    if (later_dense) {
        APPEND("mlp_dense=");
        for (int i = 0; i < c->num_hidden_layers && i < MODEL_MAX_LAYERS; i++) APPEND("%d", c->mlp_dense[i]);
        APPEND(";");
    }
#undef APPEND
    return k < 0 ? 0 : (size_t)k < n ? k : (int)n - 1;
}

int model_cfg_int(const cJSON *o, const char *key, int required, int dflt, double lo, double hi, int *out,
                  const char *path, struct colibri_err *err)
{
    return get_int_in(o, key, required, dflt, lo, hi, out, path, err);
}

int model_cfg_num(const cJSON *o, const char *key, double dflt, double lo, int lo_open, double hi, double *out,
                  const char *path, struct colibri_err *err)
{
    return get_num(o, key, dflt, lo, lo_open, hi, out, path, err);
}

int model_cfg_bool(const cJSON *o, const char *key, int dflt, int *out, const char *path, struct colibri_err *err)
{
    return get_bool(o, key, dflt, out, path, err);
}

int model_cfg_str(const cJSON *o, const char *key, const char *dflt, const char **out, const char *path,
                  struct colibri_err *err)
{
    return get_str(o, key, dflt, out, path, err);
}

int model_cfg_check_keys(const cJSON *o, const char *what, const char *path, struct colibri_err *err)
{
    return check_keys(o, what, path, err);
}

int model_config_load(const char *dir, struct model_config *cfg, struct colibri_err *err)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/config.json", dir);
    size_t len;
    char *text = base_read_file_all(path, &len);
    if (!text) {
        /* name what is wrong with the path the user gave before the file inside it */
        int e = errno;
        struct stat st;
        if (stat(dir, &st))
            return base_err_set(err, COLIBRI_EIO, "%s: cannot open the model directory: %s", dir, strerror(errno));
        if (!S_ISDIR(st.st_mode))
            return base_err_set(err, COLIBRI_EINVAL, "%s: not a directory; give the model's directory (it holds "
                                "config.json and the safetensors files)", dir);
        if (e == ENOENT)
            return base_err_set(err, COLIBRI_EIO, "%s: no config.json here; not a Hugging Face model directory", dir);
        return base_err_set(err, COLIBRI_EIO, "%s: cannot read: %s", path, strerror(e));
    }
    int rc = model_config_parse(text, path, cfg, err);
    free(text);
    return rc;
}
