/* test_quant_config.c - quantization_config: the implemented encodings
 * accepted (DeepSeek-V3's fp8, V4's fp8 with ue8m0 scales, Kimi K2's
 * compressed-tensors int4 as its config.json ships it), every other method,
 * format, bit width, asymmetry, strategy and group size refused by name, and
 * the ignore list matched as compressed-tensors matches it. */
#include "check.h"
#include "model/quant_config.h"

#include <cjson/cJSON.h>
#include <string.h>

/* Kimi-K2-Thinking's quantization_config, with one field replaced when
 * key is not NULL (its JSON value val). */
static const char *KIMI =
    "{\"config_groups\":{\"group_0\":{\"input_activations\":null,\"output_activations\":null,"
    "\"targets\":[\"Linear\"],\"weights\":{\"actorder\":null,\"block_structure\":null,\"dynamic\":false,"
    "\"group_size\":32,\"num_bits\":4,\"observer\":\"minmax\",\"observer_kwargs\":{},\"strategy\":\"group\","
    "\"symmetric\":true,\"type\":\"int\"}}},\"format\":\"pack-quantized\",\"ignore\":[\"lm_head\","
    "\"re:.*self_attn.*\",\"re:.*shared_experts.*\",\"re:.*mlp\\\\.(gate|up|gate_up|down)_proj.*\","
    "\"re:model\\\\.layers\\\\.\\\\d+\\\\.mlp\\\\.experts\\\\.7\\\\..*\"],"
    "\"kv_cache_scheme\":null,\"quant_method\":\"compressed-tensors\",\"quantization_status\":\"compressed\"}";

static int parse(const char *json, struct model_quant_config *q, struct colibri_err *e)
{
    cJSON *j = cJSON_Parse(json);
    CHECK(j != NULL, "test JSON parses: %s", json);
    int rc = model_quant_config_parse(j, "config.json", q, e);
    cJSON_Delete(j);
    return rc;
}

/* KIMI with the weights field `key` set to the JSON `val` (in the group's
 * weights when inner, else at the top level). */
static int parse_kimi_with(int inner, const char *key, const char *val, struct colibri_err *e)
{
    static struct model_quant_config q;
    cJSON *j = cJSON_Parse(KIMI), *v = cJSON_Parse(val);
    cJSON *o = inner ? cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "config_groups"), "group_0"),
                                           "weights")
                     : j;
    cJSON_ReplaceItemInObject(o, key, v);
    int rc = model_quant_config_parse(j, "config.json", &q, e);
    cJSON_Delete(j);
    return rc;
}

static void test_accepted(void)
{
    static struct model_quant_config q;
    struct colibri_err e = { 0 };
    CHECK(model_quant_config_parse(NULL, "c", &q, &e) == 0 && q.kind == MODEL_QUANT_NONE, "no config");
    CHECK(parse("{\"quant_method\":\"fp8\",\"fmt\":\"e4m3\",\"activation_scheme\":\"dynamic\","
                "\"weight_block_size\":[128,128]}", &q, &e) == 0 && q.kind == MODEL_QUANT_FP8_BLOCK,
          "DeepSeek-V3 fp8: %s", e.msg);
    CHECK(parse("{\"quant_method\":\"fp8\",\"fmt\":\"e4m3\",\"scale_fmt\":\"ue8m0\",\"activation_scheme\":\"dynamic\","
                "\"weight_block_size\":[128,128]}", &q, &e) == 0 && q.kind == MODEL_QUANT_FP8_BLOCK,
          "V4 fp8 with ue8m0 scales: %s", e.msg);
    CHECK(parse(KIMI, &q, &e) == 0 && q.kind == MODEL_QUANT_CT_INT4 && q.group_size == 32 && q.n_ignore == 5,
          "Kimi K2 compressed-tensors: %s", e.msg);
    static const struct { const char *m; int hit; } mods[] = {
        { "lm_head", 1 },
        { "model.layers.3.self_attn.q_a_proj", 1 },
        { "model.layers.0.mlp.gate_proj", 1 },
        { "model.layers.0.mlp.down_proj", 1 },
        { "model.layers.1.mlp.shared_experts.up_proj", 1 },
        { "model.layers.1.mlp.experts.0.gate_proj", 0 },
        { "model.layers.1.mlp.experts.17.down_proj", 0 },
        { "model.layers.12.mlp.experts.7.up_proj", 1 },       /* \d+ read as [0-9]+ */
        { "model.lm_head", 0 },                                /* exact names are whole names */
        { "xmodel.layers.1.mlp.experts.7.up_proj", 0 },        /* re.match is anchored at the start */
    };
    for (size_t i = 0; i < sizeof mods / sizeof mods[0]; i++)
        CHECK(model_quant_ignored(&q, mods[i].m, &e) == mods[i].hit, "%s ignored: want %d", mods[i].m, mods[i].hit);
}

static void test_refused(void)
{
    static struct model_quant_config q;
    struct colibri_err e = { 0 };
    static const struct { const char *json, *says; } top[] = {
        { "{\"quant_method\":\"awq\",\"bits\":4}", "quant_method 'awq'" },
        { "{\"quant_method\":\"gptq\"}", "quant_method 'gptq'" },
        { "{\"quant_method\":\"mxfp4\"}", "quant_method 'mxfp4'" },
        { "{\"quant_method\":\"bitsandbytes\",\"load_in_4bit\":true}", "quant_method 'bitsandbytes'" },
        { "{\"bits\":4}", "quant_method" },
        { "{\"quant_method\":\"fp8\",\"weight_block_size\":[1,128]}", "weight_block_size" },
        { "{\"quant_method\":\"fp8\"}", "weight_block_size" },
        { "{\"quant_method\":\"fp8\",\"fmt\":\"e5m2\",\"weight_block_size\":[128,128]}", "fmt 'e5m2'" },
        { "{\"quant_method\":\"fp8\",\"activation_scheme\":\"static\",\"weight_block_size\":[128,128]}",
          "activation_scheme 'static'" },
    };
    for (size_t i = 0; i < sizeof top / sizeof top[0]; i++) {
        CHECK(parse(top[i].json, &q, &e) == COLIBRI_EUNSUPPORTED && strstr(e.msg, top[i].says),
              "%s: refused naming '%s' (%s)", top[i].json, top[i].says, e.msg);
    }
    static const struct { int inner; const char *key, *val, *says; } ct[] = {
        { 0, "format", "\"float-quantized\"", "format 'float-quantized'" },
        { 0, "format", "\"mxfp4-pack-quantized\"", "format 'mxfp4-pack-quantized'" },
        { 0, "format", "\"naive-quantized\"", "format 'naive-quantized'" },
        { 0, "quantization_status", "\"frozen\"", "quantization_status 'frozen'" },
        { 0, "kv_cache_scheme", "{\"num_bits\":8}", "kv_cache_scheme" },
        { 1, "num_bits", "8", "num_bits 8" },
        { 1, "num_bits", "2", "num_bits 2" },
        { 1, "symmetric", "false", "asymmetric" },
        { 1, "strategy", "\"channel\"", "strategy 'channel'" },
        { 1, "strategy", "\"tensor\"", "strategy 'tensor'" },
        { 1, "group_size", "128", "group_size 128" },
        { 1, "type", "\"float\"", "type 'float'" },
        { 1, "dynamic", "true", "dynamic" },
        { 1, "actorder", "\"group\"", "actorder" },
    };
    for (size_t i = 0; i < sizeof ct / sizeof ct[0]; i++)
        CHECK(parse_kimi_with(ct[i].inner, ct[i].key, ct[i].val, &e) == COLIBRI_EUNSUPPORTED &&
                  strstr(e.msg, ct[i].says), "%s = %s: refused naming '%s' (%s)", ct[i].key, ct[i].val, ct[i].says, e.msg);
    /* activation quantization in the group */
    cJSON *j = cJSON_Parse(KIMI);
    cJSON *g = cJSON_GetObjectItem(cJSON_GetObjectItem(j, "config_groups"), "group_0");
    cJSON_ReplaceItemInObject(g, "input_activations", cJSON_Parse("{\"num_bits\":8,\"type\":\"int\"}"));
    CHECK(model_quant_config_parse(j, "c", &q, &e) == COLIBRI_EUNSUPPORTED && strstr(e.msg, "activations"),
          "activation quantization refused: %s", e.msg);
    cJSON_Delete(j);
    /* a regex that does not compile is refused at parse time, naming it */
    CHECK(parse_kimi_with(0, "ignore", "[\"re:(unclosed\"]", &e) == COLIBRI_EFORMAT && strstr(e.msg, "(unclosed"),
          "bad regex: %s", e.msg);
}

int main(void)
{
    RUN_TEST(test_accepted);
    RUN_TEST(test_refused);
    return CHECK_SUMMARY();
}
