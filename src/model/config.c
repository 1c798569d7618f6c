#include "model/config.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/util.h"

/* Every number is checked as a double (finite, integral where it must be,
 * in range) before it is converted: converting an out-of-range double to an
 * integer is undefined behaviour, and an inf or NaN that reached the RoPE
 * tables or the norms would give a model that silently outputs nothing. */
#define CFG_MAX_SIZE 1e9

/* Reads an integer field in [lo, CFG_MAX_SIZE]; `required` fields must be
 * present. */
static int get_int_in(const cJSON *o, const char *key, int required, int dflt, double lo, int *out,
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
    if (!isfinite(d) || d < lo || d > CFG_MAX_SIZE)
        return base_err_set(err, COLIBRI_EFORMAT, "%s: field '%s' is %g, outside the range %g..%g", path, key, d, lo,
                       CFG_MAX_SIZE);
    if (d != floor(d)) return base_err_set(err, COLIBRI_EFORMAT, "%s: field '%s' is %g, not an integer", path, key, d);
    *out = (int)d;
    return 0;
}

static int get_int(const cJSON *o, const char *key, int required, int dflt, int *out, const char *path,
                   struct colibri_err *err)
{
    return get_int_in(o, key, required, dflt, 0, out, path, err);
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

static int get_bool(const cJSON *o, const char *key, int dflt)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (cJSON_IsBool(v)) return cJSON_IsTrue(v);
    return dflt;
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
    if (c->rope_mscale != 0 && c->rope_mscale_all_dim != 0)
        c->rope_attention_factor = (float)(yarn_mscale(factor, c->rope_mscale) / yarn_mscale(factor, c->rope_mscale_all_dim));
    else
        c->rope_attention_factor = (float)yarn_mscale(factor, 1.0);

    double low = floor(yarn_correction_dim(c->rope_beta_fast, dim, c->rope_theta, c->rope_original_max_pos));
    double high = ceil(yarn_correction_dim(c->rope_beta_slow, dim, c->rope_theta, c->rope_original_max_pos));
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
                             &c->rope_original_max_pos, path, err)))
            return rc;
        if ((rc = get_num(r, "beta_fast", 32.0, 0, 1, 1e6, &c->rope_beta_fast, path, err))) return rc;
        if ((rc = get_num(r, "beta_slow", 1.0, 0, 1, 1e6, &c->rope_beta_slow, path, err))) return rc;
        if ((rc = get_num(r, "mscale", 0.0, 0, 0, 1e3, &c->rope_mscale, path, err))) return rc;
        if ((rc = get_num(r, "mscale_all_dim", 0.0, 0, 0, 1e3, &c->rope_mscale_all_dim, path, err))) return rc;
    }
    if (get_bool(root, "rope_interleave", 1) != 1)
        return base_err_set(err, COLIBRI_EUNSUPPORTED,
                       "%s: rope_interleave=false (half-split RoPE in the main attention) is not supported", path);
    return 0;
}

int model_config_parse(const char *json, const char *path, struct model_config *c, struct colibri_err *err)
{
    memset(c, 0, sizeof *c);
    cJSON *root = cJSON_Parse(json);
    if (!root || !cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return base_err_set(err, COLIBRI_EFORMAT, "%s: not a JSON object", path);
    }
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
    if (strcmp(mt->valuestring, "deepseek_v3") && strcmp(mt->valuestring, "kimi_k2")) {
        rc = base_err_set(err, COLIBRI_EUNSUPPORTED,
                     "%s: model_type '%s' is not supported (supported: deepseek_v3, kimi_k2)", path, mt->valuestring);
        goto out;
    }
    snprintf(c->model_type, sizeof c->model_type, "%s", mt->valuestring);

#define INT_FIELD(name, req, dflt) \
    if ((rc = get_int(root, #name, req, dflt, &c->name, path, err))) goto out
    INT_FIELD(vocab_size, 1, 0);
    INT_FIELD(hidden_size, 1, 0);
    INT_FIELD(intermediate_size, 1, 0);
    INT_FIELD(moe_intermediate_size, 1, 0);
    INT_FIELD(num_hidden_layers, 1, 0);
    INT_FIELD(num_attention_heads, 1, 0);
    INT_FIELD(q_lora_rank, 0, 0);
    INT_FIELD(kv_lora_rank, 1, 0);
    INT_FIELD(qk_nope_head_dim, 1, 0);
    INT_FIELD(qk_rope_head_dim, 1, 0);
    INT_FIELD(v_head_dim, 1, 0);
    INT_FIELD(n_routed_experts, 0, 0);
    INT_FIELD(n_shared_experts, 0, 0);
    INT_FIELD(num_experts_per_tok, 0, 0);
    INT_FIELD(n_group, 0, 1);
    INT_FIELD(topk_group, 0, 1);
    INT_FIELD(first_k_dense_replace, 0, 0);
#undef INT_FIELD
    if ((rc = get_int_in(root, "max_position_embeddings", 0, 4096, 1, &c->max_position_embeddings, path, err)))
        goto out;
    int kv_heads;
    if ((rc = get_int(root, "num_key_value_heads", 0, c->num_attention_heads, &kv_heads, path, err))) goto out;
    if (kv_heads != c->num_attention_heads) {
        rc = base_err_set(err, COLIBRI_EUNSUPPORTED, "%s: num_key_value_heads %d != num_attention_heads %d", path, kv_heads,
                     c->num_attention_heads);
        goto out;
    }
    double d;
    if ((rc = get_num(root, "routed_scaling_factor", 1.0, 0, 1, 1e6, &d, path, err))) goto out;
    c->routed_scaling_factor = (float)d;
    /* at least FLT_MIN, so it stays positive as a float */
    if ((rc = get_num(root, "rms_norm_eps", 1e-6, 1.2e-38, 0, 1.0, &d, path, err))) goto out;
    c->rms_norm_eps = (float)d;
    c->norm_topk_prob = get_bool(root, "norm_topk_prob", 0);
    c->tie_word_embeddings = get_bool(root, "tie_word_embeddings", 0);
    c->attention_bias = get_bool(root, "attention_bias", 0);
    if (c->attention_bias) {
        rc = base_err_set(err, COLIBRI_EUNSUPPORTED, "%s: attention_bias=true is not supported", path);
        goto out;
    }
    if ((rc = parse_rope(root, c, path, err))) goto out;

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
        if (!c->n_group || c->n_routed_experts % c->n_group || c->n_routed_experts / c->n_group < 2 ||
            !c->topk_group || c->topk_group > c->n_group ||
            c->num_experts_per_tok > c->topk_group * (c->n_routed_experts / c->n_group)) {
            rc = base_err_set(err, COLIBRI_EFORMAT,
                         "%s: n_group %d / topk_group %d do not fit n_routed_experts %d with top-%d (need >= 2 experts "
                         "per group)", path, c->n_group, c->topk_group, c->n_routed_experts, c->num_experts_per_tok);
            goto out;
        }
    }
    derive_rope(c);
out:
    cJSON_Delete(root);
    return rc;
}

int model_config_load(const char *dir, struct model_config *cfg, struct colibri_err *err)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/config.json", dir);
    size_t len;
    char *text = base_read_file_all(path, &len);
    if (!text) return base_err_set(err, COLIBRI_EIO, "%s: cannot read: %s", path, strerror(errno));
    int rc = model_config_parse(text, path, cfg, err);
    free(text);
    return rc;
}
