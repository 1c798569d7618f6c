/* model/config_glm53.c - GLM-5.3's config.json (Glm5NextConfig of
 * transformers 5.18.0, model_type glm5_next): the text model's fields from
 * text_config (or, in a flat text-only config, from the top level), read as
 * Glm5NextTextConfig.__post_init__ folds them (layer_types,
 * indexer_types or index_topk_pattern / index_topk_freq /
 * index_skip_topk_offset, linear_attn_config). The vision tower's config is
 * accepted and not read: its tensors are skipped at load and image or video
 * inputs do not exist for colibri. A key outside the lists below is refused
 * by name, and so is every value that selects behaviour colibri does not
 * implement. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <string.h>

#include "base/err.h"
#include "model/config.h"
#include "model/kda.h"
#include "model/quant_config.h"

static const char *const TOP[] = {
    "model_type", "architectures", "text_config", "vision_config", "image_token_id", "video_token_id",
    "image_start_token_id", "image_end_token_id", "video_start_token_id", "video_end_token_id",
    "tie_word_embeddings", "dtype", "torch_dtype", "transformers_version", "quantization_config", "pad_token_id",
    "bos_token_id", "eos_token_id", "use_cache",
};

static const char *const TEXT[] = {
    "model_type", "architectures", "vocab_size", "hidden_size", "intermediate_size", "moe_intermediate_size",
    "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "n_shared_experts", "n_routed_experts",
    "routed_scaling_factor", "kv_lora_rank", "q_lora_rank", "qk_rope_head_dim", "v_head_dim", "qk_nope_head_dim",
    "n_group", "topk_group", "num_experts_per_tok", "norm_topk_prob", "hidden_act", "max_position_embeddings",
    "initializer_range", "rms_norm_eps", "use_cache", "pad_token_id", "bos_token_id", "eos_token_id",
    "tie_word_embeddings", "mlp_layer_types", "attention_bias", "attention_dropout", "index_topk", "index_head_dim",
    "index_n_heads", "head_dim", "layer_types", "indexer_types", "index_topk_pattern", "index_topk_freq",
    "index_skip_topk_offset", "swiglu_limit", "linear_head_dim", "linear_num_heads", "linear_conv_kernel_dim",
    "linear_lower_bound", "linear_attn_config", "hc_mult", "hc_eps", "hc_sinkhorn_iters", "output_router_logits",
    "router_aux_loss_coef", "index_kpool", "index_kpool_always_select_tail", "dtype", "torch_dtype",
    "transformers_version", "quantization_config", "qk_head_dim", "num_local_experts",
    /* GLM-5's config keys a GLM-5.3 release may carry: stored by transformers, read by no
     * Glm5Next text module (NoPE: no rope; mlp_layer_types, not first_k_dense_replace) */
    "rope_theta", "rope_parameters", "rope_scaling", "partial_rotary_factor", "rope_interleave",
    "first_k_dense_replace", "moe_layer_freq", "ep_size", "num_nextn_predict_layers", "scoring_func", "topk_method",
};

static int known(const char *const *list, size_t n, const char *k)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(list[i], k)) return 1;
    return 0;
}

/* A list of num_hidden_layers strings, each one of `a` / `b` (1 for b). */
static int str_list(const cJSON *o, const char *key, int L, const char *a, const char *b, const char *alias_a,
                    unsigned char *out, const char *path, struct colibri_err *err)
{
    const cJSON *lt = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsArray(lt) || cJSON_GetArraySize(lt) < L)
        return base_err_set(err, COLIBRI_EFORMAT, "%s: field '%s' must be a list of %d strings", path, key, L);
    int i = 0;
    for (const cJSON *e = lt->child; e && i < L; e = e->next, i++) {
        if (cJSON_IsString(e) && (!strcmp(e->valuestring, a) || (alias_a && !strcmp(e->valuestring, alias_a))))
            out[i] = 0;
        else if (cJSON_IsString(e) && !strcmp(e->valuestring, b))
            out[i] = 1;
        else
            return base_err_set(err, COLIBRI_EFORMAT, "%s: %s[%d] is %s%s%s (want '%s' or '%s')", path, key, i,
                                cJSON_IsString(e) ? "'" : "", cJSON_IsString(e) ? e->valuestring : "not a string",
                                cJSON_IsString(e) ? "'" : "", a, b);
    }
    return 0;
}

/* The KDA fields, from linear_attn_config when present (its keys win). */
static int parse_linear(const cJSON *t, struct model_config *c, const char *path, struct colibri_err *err)
{
    int rc;
    if ((rc = model_cfg_int(t, "linear_head_dim", 0, 128, 1, KDA_MAX_HEAD_DIM, &c->linear_head_dim, path, err)) ||
        (rc = model_cfg_int(t, "linear_num_heads", 0, 64, 1, MODEL_MAX_HEADS, &c->linear_num_heads, path, err)) ||
        (rc = model_cfg_int(t, "linear_conv_kernel_dim", 0, 4, 1, KDA_MAX_CONV, &c->linear_conv_k, path, err)))
        return rc;
    const cJSON *lb = cJSON_GetObjectItemCaseSensitive(t, "linear_lower_bound");
    c->linear_bounded = !lb || !cJSON_IsNull(lb);
    double d = -5.0;
    if (lb && !cJSON_IsNull(lb) && (rc = model_cfg_num(t, "linear_lower_bound", -5.0, -1e6, 0, 0, &d, path, err)))
        return rc;
    const cJSON *la = cJSON_GetObjectItemCaseSensitive(t, "linear_attn_config");
    if (la && !cJSON_IsNull(la)) {
        if (!cJSON_IsObject(la))
            return base_err_set(err, COLIBRI_EFORMAT, "%s: field 'linear_attn_config' must be an object", path);
        static const char *const LA[] = { "head_dim", "num_heads", "short_conv_kernel_size", "gate_lower_bound",
                                          "safe_gate", "kda_layers", "full_attn_layers" };
        for (const cJSON *e = la->child; e; e = e->next)
            if (!known(LA, sizeof LA / sizeof LA[0], e->string))
                return base_err_set(err, COLIBRI_EUNSUPPORTED, "%s: linear_attn_config.%s is not read by colibri", path,
                                    e->string);
        if ((rc = model_cfg_int(la, "head_dim", 0, c->linear_head_dim, 1, KDA_MAX_HEAD_DIM, &c->linear_head_dim, path,
                                err)) ||
            (rc = model_cfg_int(la, "num_heads", 0, c->linear_num_heads, 1, MODEL_MAX_HEADS, &c->linear_num_heads,
                                path, err)) ||
            (rc = model_cfg_int(la, "short_conv_kernel_size", 0, c->linear_conv_k, 1, KDA_MAX_CONV, &c->linear_conv_k,
                                path, err)))
            return rc;
        const cJSON *g = cJSON_GetObjectItemCaseSensitive(la, "gate_lower_bound");
        if (g) {
            c->linear_bounded = !cJSON_IsNull(g);
            if (c->linear_bounded &&
                (rc = model_cfg_num(la, "gate_lower_bound", -5.0, -1e6, 0, 0, &d, path, err)))
                return rc;
        }
        int safe;
        if ((rc = model_cfg_bool(la, "safe_gate", 1, &safe, path, err))) return rc;
        if (safe && !c->linear_bounded) c->linear_bounded = 1, d = -5.0;
    }
    if (c->linear_bounded && !(d < 0))
        return base_err_set(err, COLIBRI_EFORMAT, "%s: linear_lower_bound %g must be negative", path, d);
    c->linear_lower_bound = (float)d;
    return 0;
}

/* indexer_types, else index_topk_pattern, else the freq / offset schedule. */
static int parse_indexer(const cJSON *t, struct model_config *c, const char *path, struct colibri_err *err)
{
    int L = c->num_hidden_layers, rc;
    unsigned char shared[MODEL_MAX_LAYERS];
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(t, "indexer_types");
    const cJSON *pat = cJSON_GetObjectItemCaseSensitive(t, "index_topk_pattern");
    if (it && !cJSON_IsNull(it)) {
        if ((rc = str_list(t, "indexer_types", L, "full", "shared", NULL, shared, path, err))) return rc;
    } else if (cJSON_IsString(pat)) {
        if ((int)strlen(pat->valuestring) < L)
            return base_err_set(err, COLIBRI_EFORMAT, "%s: index_topk_pattern has %zu letters, want %d", path,
                                strlen(pat->valuestring), L);
        for (int i = 0; i < L; i++) {
            char ch = pat->valuestring[i];
            if (ch != 'F' && ch != 'S')
                return base_err_set(err, COLIBRI_EFORMAT, "%s: index_topk_pattern[%d] is '%c' (want F or S)", path, i,
                                    ch);
            shared[i] = ch == 'S';
        }
    } else if (pat && !cJSON_IsNull(pat)) {
        if ((rc = str_list(t, "index_topk_pattern", L, "full", "shared", NULL, shared, path, err))) return rc;
    } else {
        int freq, off;
        if ((rc = model_cfg_int(t, "index_topk_freq", 0, 1, -MODEL_MAX_LAYERS, MODEL_MAX_LAYERS, &freq, path, err)) ||
            (rc = model_cfg_int(t, "index_skip_topk_offset", 0, 2, -MODEL_MAX_LAYERS, MODEL_MAX_LAYERS, &off, path,
                                err)))
            return rc;
        if (freq < 1) freq = 1;
        for (int i = 0; i < L; i++) shared[i] = ((i - off + 1 > 0 ? i - off + 1 : 0) % freq) != 0;
    }
    for (int i = 0; i < L; i++) c->indexer_full[i] = !shared[i];
    return 0;
}

int model_config_parse_glm53(const cJSON *top, struct model_config *c, const char *path, struct colibri_err *err)
{
    for (const cJSON *e = top->child; e; e = e->next)
        if (!known(TOP, sizeof TOP / sizeof TOP[0], e->string) && !known(TEXT, sizeof TEXT / sizeof TEXT[0], e->string))
            return base_err_set(err, COLIBRI_EUNSUPPORTED, "%s: field '%s' is not read by colibri's glm5_next support",
                                path, e->string);
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(top, "text_config");
    if (t && !cJSON_IsNull(t)) {
        if (!cJSON_IsObject(t))
            return base_err_set(err, COLIBRI_EFORMAT, "%s: field 'text_config' must be an object", path);
        const cJSON *mt = cJSON_GetObjectItemCaseSensitive(t, "model_type");
        if (mt && !(cJSON_IsString(mt) && !strcmp(mt->valuestring, "glm5_next_text")))
            return base_err_set(err, COLIBRI_EUNSUPPORTED, "%s: text_config.model_type '%s' is not supported "
                                "(glm5_next_text)", path, cJSON_IsString(mt) ? mt->valuestring : "(not a string)");
        for (const cJSON *e = t->child; e; e = e->next)
            if (!known(TEXT, sizeof TEXT / sizeof TEXT[0], e->string))
                return base_err_set(err, COLIBRI_EUNSUPPORTED, "%s: text_config.%s is not read by colibri's "
                                    "glm5_next support", path, e->string);
    } else {
        t = top; /* a flat text-only config */
    }
    /* quantization_config is read at the top level (model/config.c reads it again after this hook), where
     * transformers reads it; one inside text_config would be ignored by both, so it is refused */
    const cJSON *tqc = t != top ? cJSON_GetObjectItemCaseSensitive(t, "quantization_config") : NULL;
    if (tqc && !cJSON_IsNull(tqc))
        return base_err_set(err, COLIBRI_EUNSUPPORTED, "%s: text_config.quantization_config: transformers reads the "
                            "quantization_config at the top level of config.json, not in text_config", path);
    int rc = model_quant_config_parse(cJSON_GetObjectItemCaseSensitive(top, "quantization_config"), path, &c->quant,
                                      err);
    if (rc) return rc;
    /* the FP8 release: which Linears are F8_E4M3 + weight_scale_inv is read from the checkpoint's dtypes */
    if (c->quant.kind != MODEL_QUANT_NONE && c->quant.kind != MODEL_QUANT_FP8_BLOCK)
        return base_err_set(err, COLIBRI_EUNSUPPORTED, "%s: quantization_config: only GLM-5.3's FP8 release "
                            "(quant_method fp8, 128x128 blocks) is implemented for glm5_next", path);
    const struct { const char *key; int *dst; int required, dflt, lo, hi; } ints[] = {
        { "vocab_size", &c->vocab_size, 0, 154880, 1, MODEL_MAX_VOCAB },
        { "hidden_size", &c->hidden_size, 0, 4096, 1, MODEL_MAX_DIM },
        { "intermediate_size", &c->intermediate_size, 0, 12288, 1, MODEL_MAX_DIM },
        { "moe_intermediate_size", &c->moe_intermediate_size, 0, 2048, 1, MODEL_MAX_DIM },
        { "num_hidden_layers", &c->num_hidden_layers, 0, 45, 1, MODEL_MAX_LAYERS },
        { "num_attention_heads", &c->num_attention_heads, 0, 64, 1, MODEL_MAX_HEADS },
        { "n_shared_experts", &c->n_shared_experts, 0, 1, 0, MODEL_MAX_SHARED_EXPERTS },
        { "n_routed_experts", &c->n_routed_experts, 0, 288, 1, MODEL_MAX_EXPERTS },
        { "kv_lora_rank", &c->kv_lora_rank, 0, 512, 1, MODEL_MAX_DIM },
        { "q_lora_rank", &c->q_lora_rank, 0, 1536, 1, MODEL_MAX_DIM },
        { "qk_rope_head_dim", &c->qk_rope_head_dim, 0, 0, 0, 0 },
        { "v_head_dim", &c->v_head_dim, 0, 256, 1, MODEL_MAX_DIM },
        { "qk_nope_head_dim", &c->qk_nope_head_dim, 0, 256, 1, MODEL_MAX_DIM },
        { "n_group", &c->n_group, 0, 1, 1, MODEL_MAX_EXPERTS },
        { "topk_group", &c->topk_group, 0, 1, 1, MODEL_MAX_EXPERTS },
        { "num_experts_per_tok", &c->num_experts_per_tok, 0, 8, 1, 64 },
        { "max_position_embeddings", &c->max_position_embeddings, 0, 1048576, 1, MODEL_MAX_CONTEXT },
        { "index_topk", &c->index_topk, 0, 2048, 1, MODEL_MAX_INDEX_TOPK },
        { "index_head_dim", &c->index_head_dim, 0, 128, 1, MODEL_MAX_DIM },
        { "index_n_heads", &c->index_n_heads, 0, 32, 1, MODEL_MAX_HEADS },
        { "hc_mult", &c->hc_mult, 0, 4, 1, 16 },
        { "hc_sinkhorn_iters", &c->hc_sinkhorn_iters, 0, 20, 1, 1000 },
    };
    int flag;
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++)
        if ((rc = model_cfg_int(t, ints[i].key, ints[i].required, ints[i].dflt, ints[i].lo, ints[i].hi, ints[i].dst,
                                path, err)))
            return rc;
    int kvh, kpool;
    if ((rc = model_cfg_int(t, "num_key_value_heads", 0, c->num_attention_heads, 1, MODEL_MAX_HEADS, &kvh, path, err)) ||
        (rc = model_cfg_int(t, "index_kpool", 0, 16, 1, MODEL_MAX_INDEX_TOPK, &kpool, path, err)))
        return rc;
    if (kvh != c->num_attention_heads)
        return base_err_set(err, COLIBRI_EFORMAT, "%s: num_key_value_heads %d differs from num_attention_heads %d", path,
                            kvh, c->num_attention_heads);
    if (c->index_topk % kpool)
        return base_err_set(err, COLIBRI_EFORMAT, "%s: index_topk %d is not a multiple of index_kpool %d", path,
                            c->index_topk, kpool);
    if (c->num_experts_per_tok > c->n_routed_experts || c->n_routed_experts % c->n_group ||
        c->topk_group > c->n_group)
        return base_err_set(err, COLIBRI_EFORMAT, "%s: num_experts_per_tok %d / n_routed_experts %d / n_group %d / "
                            "topk_group %d do not fit together", path, c->num_experts_per_tok, c->n_routed_experts,
                            c->n_group, c->topk_group);
    double d;
    if ((rc = model_cfg_num(t, "routed_scaling_factor", 2.5, 0, 1, 1e6, &d, path, err))) return rc;
    c->routed_scaling_factor = (float)d;
    if ((rc = model_cfg_num(t, "rms_norm_eps", 1e-5, 1.2e-38, 0, 1.0, &d, path, err))) return rc;
    c->rms_norm_eps = (float)d;
    if ((rc = model_cfg_num(t, "hc_eps", 1e-6, 0, 0, 1.0, &d, path, err))) return rc;
    c->hc_eps = (float)d;
    if ((rc = model_cfg_num(t, "swiglu_limit", 10.0, 0, 0, 1e30, &d, path, err))) return rc;
    c->swiglu_limit = (float)d;
    if ((rc = model_cfg_num(t, "attention_dropout", 0, 0, 0, 1, &d, path, err))) return rc;
    if ((rc = model_cfg_bool(t, "norm_topk_prob", 1, &c->norm_topk_prob, path, err))) return rc;
    if ((rc = model_cfg_bool(t, "attention_bias", 0, &flag, path, err))) return rc;
    if (flag) return base_err_set(err, COLIBRI_EUNSUPPORTED, "%s: attention_bias=true is not supported", path);
    if ((rc = model_cfg_bool(top, "tie_word_embeddings", 0, &c->tie_word_embeddings, path, err))) return rc;
    const char *v;
    const struct { const char *key, *want; } strs[] = {
        { "hidden_act", "silu" }, { "scoring_func", "sigmoid" }, { "topk_method", "noaux_tc" } };
    for (size_t i = 0; i < sizeof strs / sizeof strs[0]; i++) {
        if ((rc = model_cfg_str(t, strs[i].key, strs[i].want, &v, path, err))) return rc;
        if (strcmp(v, strs[i].want))
            return base_err_set(err, COLIBRI_EUNSUPPORTED, "%s: %s '%s' is not supported for glm5_next (%s)", path,
                                strs[i].key, v, strs[i].want);
    }
    /* the MTP layers (model.layers.L.* onwards, which transformers skips) are
     * recognised and not loaded */
    int n_mtp;
    if ((rc = model_cfg_int(t, "num_nextn_predict_layers", 0, 0, 0, MODEL_MAX_MTP_LAYERS, &n_mtp, path, err)))
        return rc;

    int L = c->num_hidden_layers;
    unsigned char kda[MODEL_MAX_LAYERS], sparse[MODEL_MAX_LAYERS];
    const cJSON *lt = cJSON_GetObjectItemCaseSensitive(t, "layer_types");
    if (lt && !cJSON_IsNull(lt)) {
        unsigned char idx[MODEL_MAX_LAYERS];
        if ((rc = str_list(t, "layer_types", L, "indexed_attention", "linear_attention", "full_attention", idx, path,
                           err)))
            return rc;
        memcpy(kda, idx, (size_t)L);
    } else {
        for (int i = 0; i < L; i++) kda[i] = i % 4 != 3;
    }
    const cJSON *mt = cJSON_GetObjectItemCaseSensitive(t, "mlp_layer_types");
    if (mt && !cJSON_IsNull(mt)) {
        if ((rc = str_list(t, "mlp_layer_types", L, "dense", "sparse", NULL, sparse, path, err))) return rc;
    } else {
        for (int i = 0; i < L; i++) sparse[i] = i >= 3;
    }
    if ((rc = parse_linear(t, c, path, err)) || (rc = parse_indexer(t, c, path, err))) return rc;
    int tail;
    if ((rc = model_cfg_bool(t, "index_kpool_always_select_tail", 1, &tail, path, err))) return rc;
    for (int i = 0; i < L; i++) {
        c->kda_layer[i] = kda[i];
        c->mlp_dense[i] = !sparse[i];
        if (kda[i]) continue;
        /* Glm5NextTextModel hands a layer's selection to the next layer only */
        if (!c->indexer_full[i] && (i == 0 || kda[i - 1] || !c->indexer_full[i - 1]))
            return base_err_set(err, COLIBRI_EFORMAT, "%s: layer %d is a shared indexed layer, but layer %d is not a "
                                "full indexed layer whose selection it could reuse (transformers refuses it too)", path,
                                i, i - 1);
        /* without the tail rule a query before its first complete pool selects
         * nothing, and transformers then attends uniformly over every key */
        if (!tail)
            return base_err_set(err, COLIBRI_EUNSUPPORTED, "%s: index_kpool_always_select_tail=false is not supported "
                                "(indexed layers)", path);
    }
    for (int i = 0; i < L; i++)
        if (kda[i]) c->indexer_full[i] = 0;
    c->index_kpool = kpool;
    c->index_kpool_tail = tail;
    c->glm53_kv_lora_rank = c->kv_lora_rank;
    c->dsa_kind = MODEL_DSA_NONE;
    c->router_kind = MODEL_ROUTER_SIGMOID_NOAUX_TC;
    c->residual_kind = MODEL_RESIDUAL_HYPER;
    c->attn_kind = MODEL_ATTN_GLM53;
    c->hc_glm53 = 1;
    c->swiglu_clip_all = 1;
    c->first_k_dense_replace = 0;
    c->num_nextn_predict_layers = n_mtp;
    /* the indexed layers keep their latents in their own state: no shared KV cache */
    c->kv_lora_rank = 0;
    c->qk_rope_head_dim = 0;
    c->latent_norm_eps = c->rms_norm_eps;
    snprintf(c->rope_type, sizeof c->rope_type, "default");
    c->rope_theta = 10000.0;
    return 0;
}
