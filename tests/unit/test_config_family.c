/* The family table (model/config.h): what each model_type selects, the
 * refusals of config values colibri does not implement, the DSA and MTP
 * fields, and the fingerprint text's per-family groups. Expected values come
 * from the transformers 5.18 modeling/configuration files, not from the code
 * under test (GLM-5 indexer patterns: GlmMoeDsaConfig's own output for the
 * same fields). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "colibri.h"
#include "model/config.h"

/* A small config of `type` with `extra` fields appended. */
static const char *BASE =
    "{\"model_type\":\"%s\",\"vocab_size\":64,\"hidden_size\":32,\"intermediate_size\":64,"
    "\"moe_intermediate_size\":16,\"num_hidden_layers\":%d,\"num_attention_heads\":2,\"q_lora_rank\":%s,"
    "\"kv_lora_rank\":16,\"qk_nope_head_dim\":8,\"qk_rope_head_dim\":8,\"v_head_dim\":8,"
    "\"n_routed_experts\":8,\"n_shared_experts\":1,\"num_experts_per_tok\":2,\"n_group\":2,\"topk_group\":1,"
    "\"first_k_dense_replace\":1,\"max_position_embeddings\":256%s}";

static int parse_n(const char *type, int layers, const char *q_lora, const char *extra, struct model_config *c,
                   struct colibri_err *err)
{
    char buf[8192];
    snprintf(buf, sizeof buf, BASE, type, layers, q_lora, extra);
    memset(err, 0, sizeof *err);
    return model_config_parse(buf, "config.json", c, err);
}

static int parse(const char *type, const char *extra, struct model_config *c, struct colibri_err *err)
{
    return parse_n(type, 4, "24", extra, c, err);
}

/* `extra` on `type` is refused with rc and a message holding both words. */
static void refused(const char *type, const char *extra, int want_rc, const char *w1, const char *w2)
{
    struct model_config c;
    struct colibri_err err;
    int rc = parse(type, extra, &c, &err);
    CHECK(rc == want_rc && strstr(err.msg, w1) && strstr(err.msg, w2), "%s %s: rc %d, '%s'", type, extra, rc,
          err.msg);
}

static void test_family_rows(void)
{
    struct model_config c;
    struct colibri_err err;
    const char *types[] = { "deepseek_v3", "kimi_k2", "deepseek_v32", "glm_moe_dsa", "deepseek_v2" };
    const int router[] = { MODEL_ROUTER_SIGMOID_NOAUX_TC, MODEL_ROUTER_SIGMOID_NOAUX_TC, MODEL_ROUTER_SIGMOID_NOAUX_TC,
                           MODEL_ROUTER_SIGMOID_NOAUX_TC, MODEL_ROUTER_SOFTMAX_GREEDY };
    const int dsa[] = { MODEL_DSA_NONE, MODEL_DSA_NONE, MODEL_DSA_V32, MODEL_DSA_GLM5, MODEL_DSA_NONE };
    for (int i = 0; i < 5; i++) {
        CHECK(parse(types[i], "", &c, &err) == 0, "%s: %s", types[i], err.msg);
        CHECK(c.family && !strcmp(c.family->model_type, types[i]), "%s: family row", types[i]);
        CHECK(c.router_kind == router[i], "%s: router %d", types[i], c.router_kind);
        CHECK(c.dsa_kind == dsa[i], "%s: dsa %d", types[i], c.dsa_kind);
        /* every modeling file builds q_a/kv_a_layernorm with the RMSNorm default */
        CHECK(c.latent_norm_eps == 1e-6f, "%s: latent eps %g", types[i], (double)c.latent_norm_eps);
        CHECK(c.num_nextn_predict_layers == 0, "%s: no MTP by default", types[i]);
    }
    /* the V3 router needs the correction bias tensor name, V2 has none */
    CHECK(model_family_find("deepseek_v3")->names.router_bias != NULL, "v3 bias name");
    CHECK(model_family_find("deepseek_v2")->names.router_bias == NULL, "v2 has no correction bias");
    CHECK(!strcmp(model_family_find("deepseek_v32")->names.indexer_wq_b, "self_attn.indexer.wq_b.weight"), "v32 wq_b");
    CHECK(model_family_find("deepseek_v3")->names.indexer_wk == NULL, "v3 has no indexer");
    CHECK(model_family_find("llama") == NULL, "llama is no family");

    /* GLM-5: rms_norm_eps 1e-5 leaves the latent norms at 1e-6 */
    CHECK(parse("glm_moe_dsa", ",\"rms_norm_eps\":1e-5,\"rope_theta\":1000000", &c, &err) == 0, "%s", err.msg);
    CHECK(c.rms_norm_eps == 1e-5f && c.latent_norm_eps == 1e-6f, "glm eps %g / %g", (double)c.rms_norm_eps,
          (double)c.latent_norm_eps);
    CHECK(!strcmp(c.rope_type, "default") && c.rope_theta == 1e6, "glm rope");
    /* the configuration classes' defaults: V3.2 64 indexer heads, GLM-5 32 */
    CHECK(c.index_n_heads == 32 && c.index_head_dim == 128 && c.index_topk == 2048, "glm index defaults %d %d %d",
          c.index_n_heads, c.index_head_dim, c.index_topk);
    CHECK(c.indexer_rope_interleaved == 1, "glm indexer RoPE interleaved");
    CHECK(parse("deepseek_v32", ",\"index_n_heads\":4,\"index_head_dim\":16,\"index_topk\":6", &c, &err) == 0,
          "%s", err.msg);
    CHECK(c.index_n_heads == 4 && c.index_head_dim == 16 && c.index_topk == 6 && c.indexer_rope_interleaved == 0,
          "v32 index fields");
    CHECK(c.indexer_full[0] && c.indexer_full[1] && c.indexer_full[2] && c.indexer_full[3], "v32: all full");
    CHECK(parse("deepseek_v32", "", &c, &err) == 0 && c.index_n_heads == 64, "v32 default heads %d", c.index_n_heads);
    CHECK(parse("deepseek_v3", "", &c, &err) == 0 && !c.indexer_full[0], "v3: no indexer");

    /* deepseek_v2 topk_method selects the router */
    CHECK(parse("deepseek_v2", ",\"topk_method\":\"group_limited_greedy\",\"scoring_func\":\"softmax\"", &c, &err) ==
              0 && c.router_kind == MODEL_ROUTER_SOFTMAX_GROUP_LIMITED, "%s", err.msg);
    CHECK(parse("deepseek_v2", ",\"topk_method\":\"greedy\"", &c, &err) == 0 &&
              c.router_kind == MODEL_ROUTER_SOFTMAX_GREEDY, "%s", err.msg);
    /* V3's own spellings of its router are accepted */
    CHECK(parse("deepseek_v3", ",\"topk_method\":\"noaux_tc\",\"scoring_func\":\"sigmoid\",\"hidden_act\":\"silu\"",
                &c, &err) == 0, "%s", err.msg);
}

static void test_behaviour_refusals(void)
{
    refused("deepseek_v3", ",\"scoring_func\":\"softmax\"", COLIBRI_EUNSUPPORTED, "scoring_func", "'softmax'");
    refused("deepseek_v3", ",\"topk_method\":\"greedy\"", COLIBRI_EUNSUPPORTED, "topk_method", "'greedy'");
    refused("kimi_k2", ",\"topk_method\":\"group_limited_greedy\"", COLIBRI_EUNSUPPORTED, "topk_method",
            "'group_limited_greedy'");
    refused("deepseek_v3", ",\"hidden_act\":\"gelu\"", COLIBRI_EUNSUPPORTED, "hidden_act", "'gelu'");
    refused("deepseek_v2", ",\"hidden_act\":\"relu\"", COLIBRI_EUNSUPPORTED, "hidden_act", "'relu'");
    refused("deepseek_v2", ",\"scoring_func\":\"sigmoid\"", COLIBRI_EUNSUPPORTED, "scoring_func", "'sigmoid'");
    refused("deepseek_v2", ",\"topk_method\":\"noaux_tc\"", COLIBRI_EUNSUPPORTED, "topk_method", "'noaux_tc'");
    refused("deepseek_v2", ",\"norm_topk_prob\":true", COLIBRI_EUNSUPPORTED, "norm_topk_prob", "deepseek_v2");
    refused("deepseek_v3", ",\"mlp_bias\":true", COLIBRI_EUNSUPPORTED, "mlp_bias", "true");
    refused("deepseek_v3", ",\"moe_layer_freq\":2", COLIBRI_EUNSUPPORTED, "moe_layer_freq", "2");
    refused("deepseek_v3", ",\"hidden_act\":7", COLIBRI_EFORMAT, "hidden_act", "not a string");
    refused("deepseek_v32", ",\"mlp_layer_types\":[\"dense\",\"sparse\",\"dense\",\"sparse\"]", COLIBRI_EUNSUPPORTED,
            "mlp_layer_types", "dense layer 2");
    refused("deepseek_v32", ",\"mlp_layer_types\":[\"dense\",\"sparse\"]", COLIBRI_EFORMAT, "mlp_layer_types",
            "list of 4");
    refused("glm_moe_dsa", ",\"mlp_layer_types\":[\"dense\",\"moe\",\"sparse\",\"sparse\"]", COLIBRI_EUNSUPPORTED,
            "mlp_layer_types[1]", "'moe'");
    refused("deepseek_v32", ",\"layer_types\":[\"indexed_attention\",\"sliding_attention\",\"indexed_attention\","
            "\"indexed_attention\"]", COLIBRI_EUNSUPPORTED, "layer_types[1]", "'sliding_attention'");
    refused("glm_moe_dsa", ",\"indexer_types\":[\"shared\",\"full\",\"full\",\"full\"]", COLIBRI_EFORMAT,
            "layer 0", "shared");
    refused("glm_moe_dsa", ",\"indexer_types\":[\"full\",\"half\",\"full\",\"full\"]", COLIBRI_EUNSUPPORTED,
            "indexer_types[1]", "'half'");
    refused("glm_moe_dsa", ",\"index_topk_pattern\":\"FSX\"", COLIBRI_EFORMAT, "index_topk_pattern", "4 letters");
    refused("deepseek_v32", ",\"index_head_dim\":4", COLIBRI_EFORMAT, "index_head_dim 4", "qk_rope_head_dim 8");
    refused("deepseek_v32", ",\"index_topk\":0", COLIBRI_EFORMAT, "'index_topk'", "1..");
    refused("deepseek_v3", ",\"num_nextn_predict_layers\":17", COLIBRI_EFORMAT, "num_nextn_predict_layers", "0..16");
    refused("deepseek_v3", ",\"partial_rotary_factor\":0.5", COLIBRI_EUNSUPPORTED, "partial_rotary_factor", "0.5");
    refused("glm_moe_dsa", ",\"rope_parameters\":{\"rope_type\":\"default\",\"rope_theta\":1e6,"
            "\"partial_rotary_factor\":0.5}", COLIBRI_EUNSUPPORTED, "partial_rotary_factor", "0.5");

    struct model_config c;
    struct colibri_err err;
    /* group-limited routing without the groups: transformers has no default for them */
    char cfg[4096];
    snprintf(cfg, sizeof cfg, BASE, "deepseek_v2", 4, "null", ",\"topk_method\":\"group_limited_greedy\"");
    char *g = strstr(cfg, ",\"n_group\":2,\"topk_group\":1");
    memmove(g, g + strlen(",\"n_group\":2,\"topk_group\":1"), strlen(g + strlen(",\"n_group\":2,\"topk_group\":1")) + 1);
    memset(&err, 0, sizeof err);
    CHECK(model_config_parse(cfg, "config.json", &c, &err) == COLIBRI_EFORMAT && strstr(err.msg, "n_group"), "%s",
          err.msg);
    /* V3.2 and GLM-5 have no q_proj: q_lora_rank is mandatory */
    CHECK(parse_n("deepseek_v32", 4, "null", "", &c, &err) == COLIBRI_EFORMAT && strstr(err.msg, "q_lora_rank"), "%s",
          err.msg);
    CHECK(parse_n("deepseek_v3", MODEL_MAX_LAYERS + 1, "24", "", &c, &err) == COLIBRI_EFORMAT &&
              strstr(err.msg, "num_hidden_layers") && strstr(err.msg, "0..1024"), "%s", err.msg);
    /* transformers ignores rope_interleave outside DeepseekV3 and its kin (V3.2 and GLM-5 always interleave the
     * MLA's RoPE); DeepseekV3Attention takes apply_rotary_pos_emb (rotate_half) when it is false */
    CHECK(parse("deepseek_v32", ",\"rope_interleave\":false", &c, &err) == 0 && !c.rope_half_split, "%s", err.msg);
    CHECK(parse("deepseek_v3", ",\"rope_interleave\":false", &c, &err) == 0 && c.rope_half_split, "%s", err.msg);
    /* an unknown model_type names the supported ones */
    CHECK(parse("llama", "", &c, &err) == COLIBRI_EUNSUPPORTED && strstr(err.msg, "glm_moe_dsa") &&
              strstr(err.msg, "deepseek_v2"), "%s", err.msg);
}

/* The small config of `type` with field `key`'s value replaced by `val`
 * (text up to the next ',' or '}'), parsed. */
static int parse_swapped(const char *type, const char *key, const char *val, struct model_config *c,
                         struct colibri_err *err)
{
    char buf[8192], out[8192], pat[64];
    snprintf(buf, sizeof buf, BASE, type, 4, "24", "");
    snprintf(pat, sizeof pat, "\"%s\":", key);
    char *at = strstr(buf, pat);
    if (!at) return -1000;
    at += strlen(pat);
    char *end = at + strcspn(at, ",}");
    snprintf(out, sizeof out, "%.*s%s%s", (int)(at - buf), buf, val, end);
    memset(err, 0, sizeof *err);
    return model_config_parse(out, "config.json", c, err);
}

/* Every count and size is bounded by what a model can mean (config.h's
 * MODEL_MAX_*), refused naming field, value and the allowed range before
 * anything is sized by it; a value at the bound still parses (where the
 * other fields allow it). */
static void test_field_bounds(void)
{
    struct model_config c;
    struct colibri_err err;
    const struct { const char *key, *val, *range; } over[] = {
        { "vocab_size", "16777217", "0..16777216" },
        { "hidden_size", "65537", "0..65536" },
        { "intermediate_size", "1e9", "0..65536" },
        { "moe_intermediate_size", "100000", "0..65536" },
        { "num_attention_heads", "1025", "0..1024" },
        { "q_lora_rank", "1e9", "0..65536" },
        { "kv_lora_rank", "65537", "0..65536" },
        { "qk_nope_head_dim", "1e7", "0..65536" },
        { "qk_rope_head_dim", "258", "0..256" },
        { "v_head_dim", "70000", "0..65536" },
        { "n_routed_experts", "1e9", "0..4096" },
        { "n_routed_experts", "4097", "0..4096" },
        { "n_shared_experts", "65", "0..64" },
        { "num_experts_per_tok", "5000", "0..4096" },
        { "n_group", "1e9", "0..4096" },
        { "topk_group", "4097", "0..4096" },
        { "first_k_dense_replace", "2000", "0..1024" },
        { "max_position_embeddings", "1e9", "1..16777216" },
    };
    for (size_t i = 0; i < sizeof over / sizeof over[0]; i++) {
        int rc = parse_swapped("deepseek_v3", over[i].key, over[i].val, &c, &err);
        char quoted[64];
        snprintf(quoted, sizeof quoted, "'%s'", over[i].key);
        CHECK(rc == COLIBRI_EFORMAT && strstr(err.msg, quoted) && strstr(err.msg, over[i].range), "%s=%s: rc %d '%s'",
              over[i].key, over[i].val, rc, err.msg);
    }
    refused("deepseek_v32", ",\"index_topk\":1000000000", COLIBRI_EFORMAT, "'index_topk' is 1e+09", "1..65536");
    refused("deepseek_v32", ",\"index_topk\":65537", COLIBRI_EFORMAT, "'index_topk'", "1..65536");
    refused("deepseek_v32", ",\"index_n_heads\":1025", COLIBRI_EFORMAT, "'index_n_heads'", "1..1024");
    refused("deepseek_v32", ",\"index_head_dim\":65537", COLIBRI_EFORMAT, "'index_head_dim'", "1..65536");
    refused("glm_moe_dsa", ",\"index_topk_freq\":1e9", COLIBRI_EFORMAT, "'index_topk_freq'", "0..1024");
    refused("deepseek_v3", ",\"num_key_value_heads\":1e9", COLIBRI_EFORMAT, "'num_key_value_heads'", "0..1024");
    refused("deepseek_v3", ",\"rope_scaling\":{\"type\":\"yarn\",\"factor\":4,"
            "\"original_max_position_embeddings\":1e9}", COLIBRI_EFORMAT, "'original_max_position_embeddings'",
            "1..16777216");
    /* at the bound: accepted */
    CHECK(parse("deepseek_v32", ",\"index_topk\":65536", &c, &err) == 0 && c.index_topk == 65536, "%s", err.msg);
    CHECK(parse_swapped("deepseek_v3", "n_routed_experts", "4096", &c, &err) == 0 && c.n_routed_experts == 4096, "%s",
          err.msg);
    CHECK(parse_swapped("deepseek_v3", "max_position_embeddings", "16777216", &c, &err) == 0, "%s", err.msg);
    /* experts >= num_experts_per_tok */
    CHECK(parse_swapped("deepseek_v3", "num_experts_per_tok", "9", &c, &err) == COLIBRI_EFORMAT &&
              strstr(err.msg, "num_experts_per_tok (9) <= n_routed_experts (8)"), "%s", err.msg);
}

/* Booleans are JSON true or false (null: the default); a string or number
 * is refused by name instead of silently taking the default. */
static void test_strict_booleans(void)
{
    struct model_config c;
    struct colibri_err err;
    const char *keys[] = { "norm_topk_prob", "tie_word_embeddings", "attention_bias", "mlp_bias", "rope_interleave" };
    const char *vals[] = { "\"yes\"", "1", "0", "\"false\"", "[]" };
    for (int k = 0; k < 5; k++)
        for (int v = 0; v < 5; v++) {
            char extra[128], quoted[64];
            snprintf(extra, sizeof extra, ",\"%s\":%s", keys[k], vals[v]);
            snprintf(quoted, sizeof quoted, "'%s'", keys[k]);
            refused("deepseek_v3", extra, COLIBRI_EFORMAT, quoted, "must be true or false");
        }
    /* V2 rejects norm_topk_prob=true; a non-boolean there is refused as such too */
    refused("deepseek_v2", ",\"norm_topk_prob\":\"yes\"", COLIBRI_EFORMAT, "'norm_topk_prob'", "true or false");
    CHECK(parse("deepseek_v3", ",\"norm_topk_prob\":false", &c, &err) == 0 && c.norm_topk_prob == 0, "%s", err.msg);
    CHECK(parse("deepseek_v3", ",\"norm_topk_prob\":null", &c, &err) == 0 && c.norm_topk_prob == 1, "%s", err.msg);
    CHECK(parse("deepseek_v3", ",\"tie_word_embeddings\":true", &c, &err) == 0 && c.tie_word_embeddings == 1, "%s",
          err.msg);
}

/* GlmMoeDsaConfig(num_hidden_layers=..., ...).indexer_types, run with
 * transformers 5.18, for each spelling. */
static void test_glm_indexer_patterns(void)
{
    struct model_config c;
    struct colibri_err err;
    CHECK(parse_n("glm_moe_dsa", 6, "24", ",\"index_topk_freq\":2,\"index_skip_topk_offset\":2", &c, &err) == 0, "%s",
          err.msg);
    const unsigned char f6[] = { 1, 1, 0, 1, 0, 1 };   /* full full shared full shared full */
    CHECK(!memcmp(c.indexer_full, f6, 6), "freq 2 offset 2");
    CHECK(parse_n("glm_moe_dsa", 7, "24", ",\"index_topk_freq\":3", &c, &err) == 0, "%s", err.msg);
    const unsigned char f7[] = { 1, 1, 0, 0, 1, 0, 0 };
    CHECK(!memcmp(c.indexer_full, f7, 7), "freq 3, default offset 2");
    CHECK(parse("glm_moe_dsa", ",\"index_topk_pattern\":\"FSFS\"", &c, &err) == 0, "%s", err.msg);
    const unsigned char f4[] = { 1, 0, 1, 0 };
    CHECK(!memcmp(c.indexer_full, f4, 4), "pattern FSFS");
    CHECK(parse("glm_moe_dsa", ",\"indexer_types\":[\"full\",\"full\",\"shared\",\"full\"]", &c, &err) == 0, "%s",
          err.msg);
    const unsigned char l4[] = { 1, 1, 0, 1 };
    CHECK(!memcmp(c.indexer_full, l4, 4), "explicit list");
    CHECK(parse("glm_moe_dsa", "", &c, &err) == 0 && !memcmp(c.indexer_full, "\1\1\1\1", 4), "default all full");
    /* mlp_layer_types overrides first_k_dense_replace (the models read only it) */
    CHECK(parse("deepseek_v32", ",\"mlp_layer_types\":[\"dense\",\"dense\",\"sparse\",\"sparse\"]", &c, &err) == 0 &&
              c.first_k_dense_replace == 2, "%s / %d", err.msg, c.first_k_dense_replace);
    /* num_mtp_layers is transformers' other name for num_nextn_predict_layers */
    CHECK(parse("deepseek_v3", ",\"num_mtp_layers\":1", &c, &err) == 0 && c.num_nextn_predict_layers == 1, "%s",
          err.msg);
    CHECK(parse("glm_moe_dsa", ",\"num_nextn_predict_layers\":1", &c, &err) == 0 && c.num_nextn_predict_layers == 1,
          "%s", err.msg);
    /* DeepSeek-V2 has no MTP module: the field means nothing there */
    CHECK(parse("deepseek_v2", ",\"num_nextn_predict_layers\":1", &c, &err) == 0 && c.num_nextn_predict_layers == 0,
          "%s", err.msg);
}

/* Fields config.json leaves out take the configuration class's default
 * (DeepseekV3Config(), DeepseekV32Config(), GlmMoeDsaConfig(),
 * DeepseekV2Config() printed with transformers 5.18), not one shared guess. */
static void test_family_defaults(void)
{
    static const char *MIN =
        "{\"model_type\":\"%s\",\"vocab_size\":64,\"hidden_size\":32,\"intermediate_size\":64,"
        "\"moe_intermediate_size\":16,\"num_hidden_layers\":4,\"num_attention_heads\":2,\"q_lora_rank\":24,"
        "\"kv_lora_rank\":16,\"qk_nope_head_dim\":8,\"qk_rope_head_dim\":8,\"v_head_dim\":8,"
        "\"n_routed_experts\":16,\"n_shared_experts\":1,\"num_experts_per_tok\":4}";
    struct { const char *type; int n_group, topk_group, first_dense, norm, max_pos; float scale, eps; } want[] = {
        { "deepseek_v3", 8, 4, 3, 1, 4096, 2.5f, 1e-6f },
        { "kimi_k2", 8, 4, 3, 1, 4096, 2.5f, 1e-6f },
        { "deepseek_v32", 8, 4, 3, 1, 163840, 2.5f, 1e-6f },
        { "glm_moe_dsa", 1, 1, 3, 1, 202752, 2.5f, 1e-5f },
        { "deepseek_v2", 1, 1, 0, 0, 2048, 1.0f, 1e-6f },
        /* Glm4MoeLiteConfig: mlp_layer_types defaults to one dense layer, then sparse */
        { "glm4_moe_lite", 1, 1, 1, 1, 202752, 1.8f, 1e-5f },
    };
    for (int i = 0; i < 6; i++) {
        char buf[2048];
        struct model_config c;
        struct colibri_err err = { 0 };
        snprintf(buf, sizeof buf, MIN, want[i].type);
        CHECK(model_config_parse(buf, "config.json", &c, &err) == 0, "%s: %s", want[i].type, err.msg);
        CHECK(c.n_group == want[i].n_group && c.topk_group == want[i].topk_group &&
                  c.first_k_dense_replace == want[i].first_dense && c.norm_topk_prob == want[i].norm &&
                  c.max_position_embeddings == want[i].max_pos && c.routed_scaling_factor == want[i].scale &&
                  c.rms_norm_eps == want[i].eps,
              "%s: groups %d/%d dense %d norm %d max_pos %d scale %g eps %g", want[i].type, c.n_group, c.topk_group,
              c.first_k_dense_replace, c.norm_topk_prob, c.max_position_embeddings, (double)c.routed_scaling_factor,
              (double)c.rms_norm_eps);
    }
}

static void test_fingerprint_groups(void)
{
    struct model_config c;
    struct colibri_err err;
    char t[4096];
    CHECK(parse("deepseek_v3", "", &c, &err) == 0, "%s", err.msg);
    int n = model_config_fingerprint_text(&c, t, sizeof t);
    CHECK(n == (int)strlen(t) && !strstr(t, "router_kind") && !strstr(t, "dsa_kind"), "v3: base text only: %s", t);
    CHECK(!strncmp(t, "model_type=deepseek_v3;vocab_size=64;", 37), "v3 text starts with the base fields");
    const char *tail = "rope_mscale_all_dim=0;";
    CHECK(n > (int)strlen(tail) && !strcmp(t + n - strlen(tail), tail), "v3 text ends with the base fields: %s", t);
    CHECK(parse("deepseek_v2", ",\"topk_method\":\"group_limited_greedy\"", &c, &err) == 0, "%s", err.msg);
    model_config_fingerprint_text(&c, t, sizeof t);
    CHECK(strstr(t, ";router_kind=2;") != NULL, "v2 router: %s", t);
    CHECK(parse("glm_moe_dsa", ",\"index_topk_pattern\":\"FSFS\",\"index_topk\":6", &c, &err) == 0, "%s", err.msg);
    model_config_fingerprint_text(&c, t, sizeof t);
    CHECK(strstr(t, "dsa_kind=2;") && strstr(t, "index_topk=6;") && strstr(t, "indexer_full=1010;"), "glm: %s", t);
    /* a short buffer truncates, NUL-terminated */
    n = model_config_fingerprint_text(&c, t, 16);
    CHECK(n == 15 && strlen(t) == 15, "truncated to %d", n);
}

/* The 2026 rows (Mistral4Config, Glm4MoeLiteConfig, Kimi_K25Config of
 * transformers 5.18) and the yarn fields older configs leave out. */
static void test_2026_rows(void)
{
    struct model_config c;
    struct colibri_err err;
    const char *m4 = ",\"rope_parameters\":{\"type\":\"yarn\",\"rope_theta\":10000.0,\"factor\":4.0,"
                     "\"original_max_position_embeddings\":16,\"max_position_embeddings\":256,"
                     "\"llama_4_scaling_beta\":0.1,\"partial_rotary_factor\":0.5},\"rope_interleave\":false,"
                     "\"topk_method\":\"whatever\"";
    /* head_dim = 8 + 8: Mistral4Config's partial_rotary_factor 0.5 rotates qk_rope_head_dim; topk_method is
     * deleted by Mistral4TopkRouter */
    CHECK(parse("mistral4", m4, &c, &err) == 0, "%s", err.msg);
    CHECK(c.router_kind == MODEL_ROUTER_SOFTMAX_TOP2_GROUPS && c.rope_half_split && c.llama4_beta == 0.1f &&
              c.llama4_max_pos == 16, "mistral4: router %d half %d beta %g max %d", c.router_kind, c.rope_half_split,
          (double)c.llama4_beta, c.llama4_max_pos);
    refused("mistral4", ",\"rope_parameters\":{\"rope_type\":\"yarn\",\"factor\":4.0,"
            "\"original_max_position_embeddings\":16}", COLIBRI_EFORMAT, "llama_4_scaling_beta", "mistral4");
    /* the scale is not read where transformers ignores it */
    refused("deepseek_v3", ",\"rope_parameters\":{\"rope_type\":\"default\",\"llama_4_scaling_beta\":0.1}",
            COLIBRI_EUNSUPPORTED, "RoPE parameter 'llama_4_scaling_beta'", "deepseek_v3");
    refused("deepseek_v3", ",\"rope_scaling\":{\"type\":\"yarn\",\"factor\":4.0,\"low_freq_factor\":1.0}",
            COLIBRI_EUNSUPPORTED, "'low_freq_factor'", "not supported");

    /* Glm4MoeLiteDecoderLayer: mlp_layer_types alone decides, dense anywhere */
    CHECK(parse("glm4_moe_lite", ",\"mlp_layer_types\":[\"dense\",\"sparse\",\"dense\",\"sparse\"]", &c,
                &err) == 0, "%s", err.msg);
    CHECK(c.first_k_dense_replace == 1 && c.mlp_dense[0] && !c.mlp_dense[1] && c.mlp_dense[2] && !c.mlp_dense[3],
          "glm4_moe_lite pattern: first MoE %d", c.first_k_dense_replace);
    char t[4096];
    model_config_fingerprint_text(&c, t, sizeof t);
    CHECK(strstr(t, ";mlp_dense=1010;") != NULL, "glm4_moe_lite fingerprint: %s", t);
    refused("glm4_moe_lite", ",\"mlp_layer_types\":[\"dense\",\"sparse\",\"moe\",\"sparse\"]",
            COLIBRI_EUNSUPPORTED, "mlp_layer_types[2]", "'moe'");

    /* Kimi_K25Config: the text model is text_config (kimi_k2 or deepseek_v3), tie_word_embeddings its own */
    const char *k25 = "{\"model_type\":\"kimi_k25\",%s\"text_config\":{\"model_type\":\"%s\",\"vocab_size\":64,"
                      "\"hidden_size\":32,\"intermediate_size\":64,\"moe_intermediate_size\":16,"
                      "\"num_hidden_layers\":2,\"num_attention_heads\":2,\"q_lora_rank\":24,\"kv_lora_rank\":16,"
                      "\"qk_nope_head_dim\":8,\"qk_rope_head_dim\":8,\"v_head_dim\":8,\"n_routed_experts\":8,"
                      "\"num_experts_per_tok\":2,\"n_group\":1,\"topk_group\":1,\"tie_word_embeddings\":false},"
                      "\"vision_config\":{\"hidden_size\":16}}";
    char buf[4096];
    snprintf(buf, sizeof buf, k25, "", "kimi_k2");
    CHECK(model_config_parse(buf, "config.json", &c, &err) == 0, "%s", err.msg);
    CHECK(c.hidden_size == 32 && c.n_routed_experts == 8 && c.tie_word_embeddings == 1 && c.family &&
              !strcmp(c.family->tensor_prefix, "language_model."), "kimi_k25: hidden %d tie %d", c.hidden_size,
          c.tie_word_embeddings);
    snprintf(buf, sizeof buf, k25, "\"tie_word_embeddings\":false,", "deepseek_v3");
    CHECK(model_config_parse(buf, "config.json", &c, &err) == 0 && !c.tie_word_embeddings, "%s", err.msg);
    snprintf(buf, sizeof buf, k25, "", "qwen3");
    CHECK(model_config_parse(buf, "config.json", &c, &err) == COLIBRI_EUNSUPPORTED && strstr(err.msg, "qwen3") &&
              strstr(err.msg, "text_config.model_type"), "%s", err.msg);

    /* yarn's truncate and attention_factor (_compute_yarn_parameters) */
    const char *y = ",\"rope_parameters\":{\"rope_type\":\"yarn\",\"factor\":4.0,"
                    "\"original_max_position_embeddings\":4096%s}";
    char e1[512];
    snprintf(e1, sizeof e1, y, "");
    CHECK(parse("deepseek_v3", e1, &c, &err) == 0, "%s", err.msg);
    float rounded = c.inv_freq[2], factor = c.rope_attention_factor;
    model_config_fingerprint_text(&c, t, sizeof t);
    CHECK(!strstr(t, "rope_truncate") && !strstr(t, "rope_attention_factor="), "default yarn fingerprint: %s", t);
    snprintf(e1, sizeof e1, y, ",\"truncate\":false");
    CHECK(parse("deepseek_v3", e1, &c, &err) == 0, "%s", err.msg);
    /* dim 8, base 10000: the correction range is 1.31..2.81 (rounded 1..3); frequency 2's ramp is
     * (2 - 1.3088) / (2.8135 - 1.3088) = 0.4594 instead of 0.5 */
    double ext = pow(10000.0, -4.0 / 8), lo = 8 * log(4096 / (32 * 2 * M_PI)) / (2 * log(10000.0)),
           hi = 8 * log(4096 / (1 * 2 * M_PI)) / (2 * log(10000.0)), ramp = (2 - lo) / (hi - lo);
    double want = ext / 4 * ramp + ext * (1 - ramp);
    CHECK(fabs(c.inv_freq[2] - want) < 1e-6 * want && fabs(rounded - (ext / 4 * 0.5 + ext * 0.5)) < 1e-6 * want,
          "truncate false: inv_freq[2] %.8g want %.8g (rounded %.8g)", (double)c.inv_freq[2], want, (double)rounded);
    model_config_fingerprint_text(&c, t, sizeof t);
    CHECK(strstr(t, ";rope_truncate=0;") != NULL, "fingerprint: %s", t);
    snprintf(e1, sizeof e1, y, ",\"attention_factor\":1.3");
    CHECK(parse("deepseek_v3", e1, &c, &err) == 0 && c.rope_attention_factor == 1.3f && factor != 1.3f, "%s %g",
          err.msg, (double)c.rope_attention_factor);
    snprintf(e1, sizeof e1, y, ",\"truncate\":0");
    refused("deepseek_v3", e1, COLIBRI_EFORMAT, "'truncate'", "true or false");
}

int main(void)
{
    RUN_TEST(test_family_rows);
    RUN_TEST(test_behaviour_refusals);
    RUN_TEST(test_field_bounds);
    RUN_TEST(test_strict_booleans);
    RUN_TEST(test_glm_indexer_patterns);
    RUN_TEST(test_family_defaults);
    RUN_TEST(test_fingerprint_groups);
    RUN_TEST(test_2026_rows);
    return CHECK_SUMMARY();
}
