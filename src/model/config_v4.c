/* model/config_v4.c - DeepSeek-V4's config.json (DeepseekV4Config of
 * transformers 5.18.0), in both spellings:
 *
 *   official       compress_ratios (per layer 0 / 4 / 128), num_hash_layers,
 *                  compress_rate_csa / compress_rate_hca, qk_rope_head_dim,
 *                  rope_theta + compress_rope_theta + rope_scaling (yarn of
 *                  the compress rope)
 *   transformers   layer_types, mlp_layer_types, compress_rates {type: rate},
 *                  partial_rotary_factor, rope_parameters {main, compress}
 *
 * Each read as DeepseekV4Config.__post_init__ folds it. A key outside the
 * list below is refused by name (the list holds every field the class
 * reads, and the ones it stores without effect), and so is every value that
 * selects behaviour colibri does not implement. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <string.h>

#include "base/err.h"
#include "model/config.h"
#include "model/quant_config.h"
#include "model/v4_rope.h"

static const char *const KNOWN[] = {
    "model_type", "architectures", "vocab_size", "hidden_size", "moe_intermediate_size", "intermediate_size",
    "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "head_dim", "q_lora_rank",
    "num_experts_per_tok", "n_routed_experts", "n_shared_experts", "scoring_func", "norm_topk_prob",
    "routed_scaling_factor", "max_position_embeddings", "rope_theta", "layer_types", "compress_rates",
    "compress_rope_theta", "hc_mult", "hc_sinkhorn_iters", "hc_eps", "mlp_layer_types", "swiglu_limit",
    "sliding_window", "o_groups", "o_lora_rank", "index_n_heads", "index_head_dim", "index_topk",
    "num_nextn_predict_layers", "output_router_logits", "router_aux_loss_coef", "router_jitter_noise", "hidden_act",
    "initializer_range", "rms_norm_eps", "use_cache", "pad_token_id", "bos_token_id", "eos_token_id",
    "tie_word_embeddings", "rope_parameters", "partial_rotary_factor", "attention_bias", "mlp_bias",
    "attention_dropout", "dtype", "torch_dtype", "transformers_version", "quantization_config", "expert_dtype",
    /* the official spelling (folded in by __post_init__) */
    "compress_ratios", "compress_rate_csa", "compress_rate_hca", "num_hash_layers", "qk_rope_head_dim",
    "rope_scaling",
    /* stored by transformers, read by no V4 module */
    "topk_method", "n_group", "topk_group",
};

static int known_key(const char *k)
{
    for (size_t i = 0; i < sizeof KNOWN / sizeof KNOWN[0]; i++)
        if (!strcmp(KNOWN[i], k)) return 1;
    return 0;
}

static const char *const TYPE_NAMES[] = { "sliding_attention", "compressed_sparse_attention",
                                          "heavily_compressed_attention" };

/* layer_types, else compress_ratios, else transformers' default pattern. */
static int parse_layer_types(const cJSON *root, struct model_config *c, const char *path, struct colibri_err *err)
{
    int L = c->num_hidden_layers, rc;
    const cJSON *lt = cJSON_GetObjectItemCaseSensitive(root, "layer_types");
    const cJSON *cr = cJSON_GetObjectItemCaseSensitive(root, "compress_ratios");
    if (lt && !cJSON_IsNull(lt)) {
        if (!cJSON_IsArray(lt) || cJSON_GetArraySize(lt) < L)
            return base_err_set(err, COLIBRI_EFORMAT, "%s: field 'layer_types' must be a list of %d strings", path, L);
        int i = 0;
        for (const cJSON *e = lt->child; e && i < L; e = e->next, i++) {
            int t = -1;
            for (int k = 0; k < 3 && cJSON_IsString(e); k++)
                if (!strcmp(e->valuestring, TYPE_NAMES[k])) t = k;
            if (t < 0)
                return base_err_set(err, COLIBRI_EUNSUPPORTED, "%s: layer_types[%d] is not one of sliding_attention, "
                                    "compressed_sparse_attention, heavily_compressed_attention", path, i);
            c->v4_layer_type[i] = (unsigned char)t;
        }
    } else if (cr && !cJSON_IsNull(cr)) {
        if (!cJSON_IsArray(cr) || cJSON_GetArraySize(cr) < L)
            return base_err_set(err, COLIBRI_EFORMAT, "%s: field 'compress_ratios' must be a list of %d numbers", path,
                                L);
        int i = 0;
        for (const cJSON *e = cr->child; e && i < L; e = e->next, i++) {
            double v = cJSON_IsNumber(e) ? e->valuedouble : -1;
            if (v != 0 && v != 4 && v != 128)
                return base_err_set(err, COLIBRI_EUNSUPPORTED, "%s: compress_ratios[%d] is not 0, 4 or 128", path, i);
            c->v4_layer_type[i] = v == 0 ? MODEL_V4_SLIDING : v == 4 ? MODEL_V4_CSA : MODEL_V4_HCA;
        }
    } else {
        for (int i = 0; i < L; i++)
            c->v4_layer_type[i] = i < 2 ? MODEL_V4_HCA : ((i - 2) % 2 ? MODEL_V4_CSA : MODEL_V4_HCA);
    }
    int csa = 4, hca = 128;
    const cJSON *rates = cJSON_GetObjectItemCaseSensitive(root, "compress_rates");
    if (rates && !cJSON_IsNull(rates)) {
        if (!cJSON_IsObject(rates)) return base_err_set(err, COLIBRI_EFORMAT, "%s: compress_rates is not an object", path);
        for (const cJSON *e = rates->child; e; e = e->next)
            if (strcmp(e->string, TYPE_NAMES[1]) && strcmp(e->string, TYPE_NAMES[2]))
                return base_err_set(err, COLIBRI_EUNSUPPORTED, "%s: compress_rates key '%s' is not supported", path,
                                    e->string);
        if ((rc = model_cfg_int(rates, TYPE_NAMES[1], 0, csa, 1, 1 << 16, &csa, path, err)) ||
            (rc = model_cfg_int(rates, TYPE_NAMES[2], 0, hca, 1, 1 << 16, &hca, path, err)))
            return rc;
    }
    if ((rc = model_cfg_int(root, "compress_rate_csa", 0, csa, 1, 1 << 16, &csa, path, err)) ||
        (rc = model_cfg_int(root, "compress_rate_hca", 0, hca, 1, 1 << 16, &hca, path, err)))
        return rc;
    for (int i = 0; i < L; i++)
        c->compress_ratio[i] = c->v4_layer_type[i] == MODEL_V4_CSA ? csa : c->v4_layer_type[i] == MODEL_V4_HCA ? hca : 0;

    const cJSON *mt = cJSON_GetObjectItemCaseSensitive(root, "mlp_layer_types");
    if (mt && !cJSON_IsNull(mt)) {
        if (!cJSON_IsArray(mt) || cJSON_GetArraySize(mt) < L)
            return base_err_set(err, COLIBRI_EFORMAT, "%s: field 'mlp_layer_types' must be a list of %d strings", path,
                                L);
        int i = 0;
        for (const cJSON *e = mt->child; e && i < L; e = e->next, i++) {
            if (!cJSON_IsString(e) || (strcmp(e->valuestring, "hash_moe") && strcmp(e->valuestring, "moe")))
                return base_err_set(err, COLIBRI_EUNSUPPORTED, "%s: mlp_layer_types[%d] is not hash_moe or moe", path, i);
            c->hash_layer[i] = !strcmp(e->valuestring, "hash_moe");
        }
    } else {
        int n_hash;
        if ((rc = model_cfg_int(root, "num_hash_layers", 0, 3, 0, MODEL_MAX_LAYERS, &n_hash, path, err))) return rc;
        for (int i = 0; i < L; i++) c->hash_layer[i] = i < n_hash;
    }
    return 0;
}

/* The yarn fields of one rope dict into c (the compress rope). */
static int parse_yarn(const cJSON *r, struct model_config *c, int default_attn_factor, const char *path,
                      struct colibri_err *err)
{
    int rc, orig, truncate;
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(r, "factor");
    if (!cJSON_IsNumber(f) || !cJSON_GetObjectItemCaseSensitive(r, "original_max_position_embeddings"))
        return base_err_set(err, COLIBRI_EFORMAT, "%s: the yarn compress rope needs 'factor' and "
                            "'original_max_position_embeddings'", path);
    if ((rc = model_cfg_num(r, "factor", 1, 0, 1, 1e6, &c->v4_yarn_factor, path, err)) ||
        (rc = model_cfg_int(r, "original_max_position_embeddings", 1, 0, 1, MODEL_MAX_CONTEXT, &orig, path, err)) ||
        (rc = model_cfg_num(r, "beta_fast", 32, 0, 1, 1e6, &c->v4_yarn_beta_fast, path, err)) ||
        (rc = model_cfg_num(r, "beta_slow", 1, 0, 1, 1e6, &c->v4_yarn_beta_slow, path, err)) ||
        (rc = model_cfg_bool(r, "truncate", 1, &truncate, path, err)))
        return rc;
    c->v4_yarn_orig = orig;
    if (!truncate) return base_err_set(err, COLIBRI_EUNSUPPORTED, "%s: rope truncate=false is not supported", path);
    double ms, msa;
    if ((rc = model_cfg_num(r, "mscale", 0, 0, 0, 1e3, &ms, path, err)) ||
        (rc = model_cfg_num(r, "mscale_all_dim", 0, 0, 0, 1e3, &msa, path, err)))
        return rc;
    if (ms != 0 || msa != 0)
        return base_err_set(err, COLIBRI_EUNSUPPORTED, "%s: mscale / mscale_all_dim in the V4 compress rope are not "
                            "supported", path);
    const cJSON *af = cJSON_GetObjectItemCaseSensitive(r, "attention_factor");
    if (af && !cJSON_IsNull(af)) {
        if ((rc = model_cfg_num(r, "attention_factor", 1, 0, 1, 1e3, &c->v4_yarn_attn_factor, path, err))) return rc;
    } else {
        /* transformers sets 1.0 when it builds the compress rope from the flat spelling */
        c->v4_yarn_attn_factor = default_attn_factor ? 1.0 : -1.0;
    }
    c->v4_yarn = 1;
    return 0;
}

static int rope_type_of(const cJSON *r, const char *what, int *yarn, const char *path, struct colibri_err *err)
{
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(r, "rope_type");
    if (!cJSON_IsString(t)) t = cJSON_GetObjectItemCaseSensitive(r, "type");
    const char *v = cJSON_IsString(t) ? t->valuestring : "default";
    if (strcmp(v, "default") && strcmp(v, "yarn"))
        return base_err_set(err, COLIBRI_EUNSUPPORTED, "%s: %s rope type '%s' is not supported (default, yarn)", path,
                            what, v);
    *yarn = !strcmp(v, "yarn");
    return 0;
}

/* The main and compress ropes, and the rotated dims (qk_rope_head_dim). */
static int parse_ropes(const cJSON *root, struct model_config *c, const char *path, struct colibri_err *err)
{
    int rc, legacy_dr;
    double prf;
    if ((rc = model_cfg_int(root, "qk_rope_head_dim", 0, 0, 0, MODEL_MAX_ROPE_DIM, &legacy_dr, path, err)) ||
        (rc = model_cfg_num(root, "partial_rotary_factor", legacy_dr ? (double)legacy_dr / c->head_dim : 64.0 / 512.0,
                            0, 1, 1.0, &prf, path, err)))
        return rc;
    int dr = (int)(c->head_dim * prf);
    if (dr < 2 || dr % 2 || dr > MODEL_MAX_ROPE_DIM || dr > c->head_dim)
        return base_err_set(err, COLIBRI_EFORMAT, "%s: rotated dims head_dim * partial_rotary_factor = %d must be even, "
                            "2..%d", path, dr, MODEL_MAX_ROPE_DIM);
    c->qk_rope_head_dim = dr;
    double theta, ctheta;
    if ((rc = model_cfg_num(root, "rope_theta", 10000.0, 1.0, 1, 1e12, &theta, path, err)) ||
        (rc = model_cfg_num(root, "compress_rope_theta", 160000.0, 1.0, 1, 1e12, &ctheta, path, err)))
        return rc;
    const cJSON *rp = cJSON_GetObjectItemCaseSensitive(root, "rope_parameters");
    const cJSON *rs = cJSON_GetObjectItemCaseSensitive(root, "rope_scaling");
    const cJSON *main_r = cJSON_IsObject(rp) ? cJSON_GetObjectItemCaseSensitive(rp, "main") : NULL;
    const cJSON *comp_r = cJSON_IsObject(rp) ? cJSON_GetObjectItemCaseSensitive(rp, "compress") : NULL;
    int yarn;
    if (cJSON_IsObject(main_r) && cJSON_IsObject(comp_r)) {
        const cJSON *sub[2] = { main_r, comp_r };
        for (int k = 0; k < 2; k++) {
            double p;
            if ((rc = model_cfg_check_keys(sub[k], k ? "rope_parameters.compress" : "rope_parameters.main", path, err)) ||
                (rc = model_cfg_num(sub[k], "partial_rotary_factor", prf, 0, 1, 1.0, &p, path, err)))
                return rc;
            if ((int)(c->head_dim * p) != dr)
                return base_err_set(err, COLIBRI_EUNSUPPORTED, "%s: rope_parameters.%s.partial_rotary_factor %g differs "
                                    "from the config's %g", path, k ? "compress" : "main", p, prf);
        }
        if ((rc = model_cfg_num(main_r, "rope_theta", theta, 1.0, 1, 1e12, &c->v4_theta[0], path, err)) ||
            (rc = model_cfg_num(comp_r, "rope_theta", ctheta, 1.0, 1, 1e12, &c->v4_theta[1], path, err)) ||
            (rc = rope_type_of(main_r, "the main", &yarn, path, err)))
            return rc;
        if (yarn) return base_err_set(err, COLIBRI_EUNSUPPORTED, "%s: a yarn main rope is not supported", path);
        if ((rc = rope_type_of(comp_r, "the compress", &yarn, path, err))) return rc;
        if (yarn && (rc = parse_yarn(comp_r, c, 0, path, err))) return rc;
    } else {
        /* flat: rope_parameters or rope_scaling hold the compress rope's scaling */
        const cJSON *r = cJSON_IsObject(rp) ? rp : cJSON_IsObject(rs) ? rs : NULL;
        c->v4_theta[0] = theta;
        c->v4_theta[1] = ctheta;
        if (r) {
            if ((rc = rope_type_of(r, "the compress", &yarn, path, err))) return rc;
            if (yarn && (rc = parse_yarn(r, c, 1, path, err))) return rc;
        }
    }
    for (int k = 0; k < 2; k++) {
        struct v4_rope_params p = { .theta = c->v4_theta[k], .dr = dr };
        if (k == 1 && c->v4_yarn) {
            p.yarn = 1;
            p.factor = c->v4_yarn_factor;
            p.original_max_pos = c->v4_yarn_orig;
            p.beta_fast = c->v4_yarn_beta_fast;
            p.beta_slow = c->v4_yarn_beta_slow;
            p.has_attention_factor = c->v4_yarn_attn_factor >= 0;
            p.attention_factor = c->v4_yarn_attn_factor;
        }
        if ((rc = model_v4_rope_freqs(&p, c->v4_inv_freq[k], &c->v4_rope_scale[k], err)))
            return base_err_prefix(err, rc, "%s: %s rope", path, k ? "compress" : "main");
    }
    return 0;
}

/* The official release's quantization_config (model/quant_config.h reads
 * it again after this, into c->quant) and expert_dtype: FP8 e4m3 with ue8m0
 * 128x128 block scales, experts FP4 or FP8. Which tensor is stored how is
 * model/shipped.h's model_shipped_v4_kind. */
static int parse_quant(const cJSON *root, struct model_config *c, const char *path, struct colibri_err *err)
{
    static const char *const QC_KEYS[] = { "quant_method", "fmt", "scale_fmt", "activation_scheme",
                                           "weight_block_size" };
    const cJSON *qc = cJSON_GetObjectItemCaseSensitive(root, "quantization_config");
    const cJSON *ed = cJSON_GetObjectItemCaseSensitive(root, "expert_dtype");
    if (!qc || cJSON_IsNull(qc)) {
        if (ed && !cJSON_IsNull(ed))
            return base_err_set(err, COLIBRI_EUNSUPPORTED, "%s: expert_dtype without a quantization_config is not "
                                "supported (float checkpoints store every expert in the float dtype)", path);
        return 0;
    }
    struct model_quant_config q;
    int rc = model_quant_config_parse(qc, path, &q, err);
    if (rc) return rc;
    if (q.kind != MODEL_QUANT_FP8_BLOCK)
        return base_err_set(err, COLIBRI_EUNSUPPORTED, "%s: quantization_config.quant_method '%s' is not implemented "
                            "for deepseek_v4 (colibri reads 'fp8' as the official release ships it)", path,
                            cJSON_GetObjectItemCaseSensitive(qc, "quant_method")->valuestring);
    for (const cJSON *e = qc->child; e; e = e->next) {
        size_t k = 0;
        while (k < sizeof QC_KEYS / sizeof QC_KEYS[0] && strcmp(QC_KEYS[k], e->string)) k++;
        if (k == sizeof QC_KEYS / sizeof QC_KEYS[0])
            return base_err_set(err, COLIBRI_EUNSUPPORTED, "%s: quantization_config.%s is not read by colibri's "
                                "deepseek_v4 support (it would change which tensors are FP8)", path, e->string);
    }
    const cJSON *sf = cJSON_GetObjectItemCaseSensitive(qc, "scale_fmt");
    if (!cJSON_IsString(sf) || strcmp(sf->valuestring, "ue8m0"))
        return base_err_set(err, COLIBRI_EUNSUPPORTED, "%s: quantization_config.scale_fmt %s%s%s is not implemented "
                            "for deepseek_v4 (colibri reads 'ue8m0', the official release's)", path,
                            cJSON_IsString(sf) ? "'" : "", cJSON_IsString(sf) ? sf->valuestring : "(missing)",
                            cJSON_IsString(sf) ? "'" : "");
    const char *v;
    if ((rc = model_cfg_str(root, "expert_dtype", "fp8", &v, path, err))) return rc;
    if (strcmp(v, "fp4") && strcmp(v, "fp8"))
        return base_err_set(err, COLIBRI_EUNSUPPORTED, "%s: expert_dtype '%s' is not supported for deepseek_v4 (fp4: "
                            "e2m1 packed two per byte with ue8m0 1x32 scales; fp8: like the dense weights)", path, v);
    c->v4_expert_fp4 = !strcmp(v, "fp4");
    return 0;
}

int model_config_parse_v4(const cJSON *root, struct model_config *c, const char *path, struct colibri_err *err)
{
    int rc;
    for (const cJSON *e = root->child; e; e = e->next)
        if (!known_key(e->string))
            return base_err_set(err, COLIBRI_EUNSUPPORTED, "%s: field '%s' is not read by colibri's deepseek_v4 "
                                "support", path, e->string);
    if ((rc = parse_quant(root, c, path, err))) return rc;
    const struct { const char *key; int *dst; int required, dflt, lo, hi; } ints[] = {
        { "vocab_size", &c->vocab_size, 1, 0, 1, MODEL_MAX_VOCAB },
        { "hidden_size", &c->hidden_size, 1, 0, 1, MODEL_MAX_DIM },
        { "moe_intermediate_size", &c->moe_intermediate_size, 1, 0, 1, MODEL_MAX_DIM },
        { "num_hidden_layers", &c->num_hidden_layers, 1, 0, 1, MODEL_MAX_LAYERS },
        { "num_attention_heads", &c->num_attention_heads, 1, 0, 1, MODEL_MAX_HEADS },
        { "head_dim", &c->head_dim, 0, 512, 2, MODEL_MAX_DIM },
        { "q_lora_rank", &c->q_lora_rank, 0, 1024, 1, MODEL_MAX_DIM },
        { "n_routed_experts", &c->n_routed_experts, 0, 256, 1, MODEL_MAX_EXPERTS },
        { "num_experts_per_tok", &c->num_experts_per_tok, 0, 6, 1, 64 },
        { "n_shared_experts", &c->n_shared_experts, 0, 1, 0, MODEL_MAX_SHARED_EXPERTS },
        { "max_position_embeddings", &c->max_position_embeddings, 0, 1048576, 1, MODEL_MAX_CONTEXT },
        { "sliding_window", &c->sliding_window, 0, 128, 1, MODEL_MAX_CONTEXT },
        { "o_groups", &c->o_groups, 0, 8, 1, MODEL_MAX_HEADS },
        { "o_lora_rank", &c->o_lora_rank, 0, 1024, 1, MODEL_MAX_DIM },
        { "index_n_heads", &c->index_n_heads, 0, 64, 1, MODEL_MAX_HEADS },
        { "index_head_dim", &c->index_head_dim, 0, 128, 2, MODEL_MAX_DIM },
        { "index_topk", &c->index_topk, 0, 512, 1, MODEL_MAX_INDEX_TOPK },
        { "hc_mult", &c->hc_mult, 0, 4, 1, 16 },
        { "hc_sinkhorn_iters", &c->hc_sinkhorn_iters, 0, 20, 1, 1000 },
        { "num_nextn_predict_layers", &c->num_nextn_predict_layers, 0, 1, 0, MODEL_MAX_MTP_LAYERS },
    };
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++)
        if ((rc = model_cfg_int(root, ints[i].key, ints[i].required, ints[i].dflt, ints[i].lo, ints[i].hi, ints[i].dst,
                                path, err)))
            return rc;
    int kvh, inter, flag;
    if ((rc = model_cfg_int(root, "num_key_value_heads", 0, 1, 0, MODEL_MAX_HEADS, &kvh, path, err)) ||
        (rc = model_cfg_int(root, "intermediate_size", 0, c->moe_intermediate_size, 0, MODEL_MAX_DIM, &inter, path,
                            err)))
        return rc;
    if (kvh != 1)
        return base_err_set(err, COLIBRI_EUNSUPPORTED, "%s: num_key_value_heads %d is not supported for deepseek_v4 "
                            "(one shared KV head)", path, kvh);
    if (inter != c->moe_intermediate_size)
        return base_err_set(err, COLIBRI_EFORMAT, "%s: intermediate_size %d differs from moe_intermediate_size %d (%s "
                            "reads one for the other)", path, inter, c->moe_intermediate_size, "DeepseekV4Config");
    /* DeepseekV4SparseMoeBlock builds exactly one shared expert */
    if (c->n_shared_experts != 1)
        return base_err_set(err, COLIBRI_EUNSUPPORTED, "%s: n_shared_experts %d is not supported for deepseek_v4 (1)",
                            path, c->n_shared_experts);
    if (c->num_experts_per_tok > c->n_routed_experts)
        return base_err_set(err, COLIBRI_EFORMAT, "%s: num_experts_per_tok %d exceeds n_routed_experts %d", path,
                            c->num_experts_per_tok, c->n_routed_experts);
    if (c->num_attention_heads % c->o_groups)
        return base_err_set(err, COLIBRI_EFORMAT, "%s: o_groups %d does not divide num_attention_heads %d", path,
                            c->o_groups, c->num_attention_heads);
    double d;
    if ((rc = model_cfg_num(root, "routed_scaling_factor", 1.5, 0, 1, 1e6, &d, path, err))) return rc;
    c->routed_scaling_factor = (float)d;
    if ((rc = model_cfg_num(root, "rms_norm_eps", 1e-6, 1.2e-38, 0, 1.0, &d, path, err))) return rc;
    c->rms_norm_eps = (float)d;
    if ((rc = model_cfg_num(root, "hc_eps", 1e-6, 0, 0, 1.0, &d, path, err))) return rc;
    c->hc_eps = (float)d;
    if ((rc = model_cfg_num(root, "swiglu_limit", 10.0, 0, 0, 1e30, &d, path, err))) return rc;
    c->swiglu_limit = (float)d;
    if ((rc = model_cfg_num(root, "router_jitter_noise", 0, 0, 0, 1e6, &d, path, err))) return rc;
    if (d != 0)
        return base_err_set(err, COLIBRI_EUNSUPPORTED, "%s: router_jitter_noise %g is not supported (0)", path, d);
    if ((rc = model_cfg_bool(root, "norm_topk_prob", 1, &flag, path, err))) return rc;
    if (!flag)
        return base_err_set(err, COLIBRI_EUNSUPPORTED, "%s: norm_topk_prob=false is not supported for deepseek_v4 "
                            "(its routers always normalise)", path);
    const char *bools[] = { "attention_bias", "mlp_bias" };
    for (int i = 0; i < 2; i++) {
        if ((rc = model_cfg_bool(root, bools[i], 0, &flag, path, err))) return rc;
        if (flag) return base_err_set(err, COLIBRI_EUNSUPPORTED, "%s: %s=true is not supported", path, bools[i]);
    }
    if ((rc = model_cfg_bool(root, "tie_word_embeddings", 0, &c->tie_word_embeddings, path, err))) return rc;
    const char *v;
    if ((rc = model_cfg_str(root, "hidden_act", "silu", &v, path, err))) return rc;
    if (strcmp(v, "silu"))
        return base_err_set(err, COLIBRI_EUNSUPPORTED, "%s: hidden_act '%s' is not supported (silu)", path, v);
    if ((rc = model_cfg_str(root, "scoring_func", "sqrtsoftplus", &v, path, err))) return rc;
    if (strcmp(v, "sqrtsoftplus"))
        return base_err_set(err, COLIBRI_EUNSUPPORTED, "%s: scoring_func '%s' is not supported for deepseek_v4 "
                            "(sqrtsoftplus)", path, v);
    if ((rc = model_cfg_str(root, "topk_method", "noaux_tc", &v, path, err))) return rc;
    if (strcmp(v, "noaux_tc"))
        return base_err_set(err, COLIBRI_EUNSUPPORTED, "%s: topk_method '%s' is not supported for deepseek_v4", path, v);
    if ((rc = parse_layer_types(root, c, path, err)) || (rc = parse_ropes(root, c, path, err))) return rc;
    if (c->index_head_dim < c->qk_rope_head_dim)
        return base_err_set(err, COLIBRI_EFORMAT, "%s: index_head_dim %d is smaller than the rotated dims %d", path,
                            c->index_head_dim, c->qk_rope_head_dim);
    c->router_kind = MODEL_ROUTER_SQRTSOFTPLUS;
    c->residual_kind = MODEL_RESIDUAL_HYPER;
    c->attn_kind = MODEL_ATTN_V4;
    c->intermediate_size = c->moe_intermediate_size;
    c->norm_topk_prob = 1;
    c->n_group = c->topk_group = 1;
    c->first_k_dense_replace = 0;
    c->latent_norm_eps = c->rms_norm_eps;
    snprintf(c->rope_type, sizeof c->rope_type, "%s", c->v4_yarn ? "yarn" : "default");
    c->rope_theta = c->v4_theta[1];
    return 0;
}
