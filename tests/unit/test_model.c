/* Config parsing, model loading errors and session behaviour, using the
 * committed oracle fixture tests/oracle/deepseek_v3_tiny (run from the repo
 * root). Numerical agreement with HF is tests/cli/oracle.sh's job. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "colibri.h"
#include "model/config.h"

#define FIXTURE "tests/oracle/deepseek_v3_tiny"

static const char *BASE_CFG =
    "{\"model_type\":\"%s\",\"vocab_size\":64,\"hidden_size\":32,\"intermediate_size\":64,"
    "\"moe_intermediate_size\":16,\"num_hidden_layers\":2,\"num_attention_heads\":2,\"q_lora_rank\":null,"
    "\"kv_lora_rank\":16,\"qk_nope_head_dim\":8,\"qk_rope_head_dim\":8,\"v_head_dim\":8,"
    "\"n_routed_experts\":8,\"n_shared_experts\":1,\"num_experts_per_tok\":2,\"n_group\":2,\"topk_group\":1,"
    "\"first_k_dense_replace\":1,\"max_position_embeddings\":256%s}";

/* The base config with `from` replaced by `to` (both may be ""). */
static int parse_edit(const char *from, const char *to, struct model_config *c, struct colibri_err *err)
{
    char base[4096], buf[4096];
    snprintf(base, sizeof base, BASE_CFG, "deepseek_v3", "");
    char *at = from[0] ? strstr(base, from) : NULL;
    if (!at) { CHECK(0, "'%s' not in the base config", from); return -1; }
    snprintf(buf, sizeof buf, "%.*s%s%s", (int)(at - base), base, to, at + strlen(from));
    memset(err, 0, sizeof *err);
    return model_config_parse(buf, "config.json", c, err);
}

static int parse(const char *type, const char *extra, struct model_config *c, struct colibri_err *err)
{
    char buf[4096];
    snprintf(buf, sizeof buf, BASE_CFG, type, extra);
    memset(err, 0, sizeof *err);
    return model_config_parse(buf, "config.json", c, err);
}

static void test_config_rope_spellings_agree(void)
{
    struct model_config a, b;
    struct colibri_err err;
    CHECK(parse("deepseek_v3",
                ",\"rope_theta\":10000,\"rope_scaling\":{\"type\":\"yarn\",\"factor\":4,"
                "\"original_max_position_embeddings\":64,\"beta_fast\":32,\"beta_slow\":1,\"mscale\":1,"
                "\"mscale_all_dim\":1}", &a, &err) == 0, "%s", err.msg);
    CHECK(parse("kimi_k2",
                ",\"rope_parameters\":{\"rope_type\":\"yarn\",\"rope_theta\":10000,\"factor\":4,"
                "\"original_max_position_embeddings\":64,\"beta_fast\":32,\"beta_slow\":1,\"mscale\":1,"
                "\"mscale_all_dim\":1}", &b, &err) == 0, "%s", err.msg);
    CHECK(memcmp(a.inv_freq, b.inv_freq, sizeof a.inv_freq) == 0, "inv_freq differs between spellings");
    CHECK(a.softmax_scale == b.softmax_scale, "softmax scale differs");
    /* yarn with factor 4 and mscale_all_dim 1: scale = dqk^-0.5 * (1 + 0.1 ln 4)^2 */
    double m = 1.0 + 0.1 * log(4.0);
    CHECK_NEAR(a.softmax_scale, (1.0 / sqrt(16.0)) * m * m, 1e-6);
    CHECK(a.q_lora_rank == 0, "q_lora_rank null means none");
    /* The low-frequency end is interpolated by the factor, the high end kept. */
    CHECK_NEAR(a.inv_freq[0], 1.0, 1e-6);
    CHECK_NEAR(a.inv_freq[3], pow(10000.0, -6.0 / 8.0) / 4.0, 1e-6);
}

static void test_config_refusals(void)
{
    struct model_config c;
    struct colibri_err err;
    CHECK(parse("llama", "", &c, &err) == COLIBRI_EUNSUPPORTED && strstr(err.msg, "'llama'"), "%s", err.msg);
    /* rope_interleave false is implemented (half-split RoPE); a value other than a boolean is refused */
    CHECK(parse("deepseek_v3", ",\"rope_interleave\":\"no\"", &c, &err) == COLIBRI_EFORMAT &&
              strstr(err.msg, "rope_interleave"), "%s", err.msg);
    CHECK(parse("deepseek_v3", ",\"rope_scaling\":{\"type\":\"dynamic\",\"factor\":2}", &c, &err) ==
              COLIBRI_EUNSUPPORTED && strstr(err.msg, "dynamic"), "%s", err.msg);
    CHECK(parse_edit("\"n_group\":2", "\"n_group\":3", &c, &err) == COLIBRI_EFORMAT && strstr(err.msg, "n_group"), "%s",
          err.msg);
    CHECK(parse("deepseek_v3", ",\"num_key_value_heads\":1", &c, &err) == COLIBRI_EUNSUPPORTED, "%s", err.msg);
    memset(&err, 0, sizeof err);
    CHECK(model_config_parse("{\"model_type\":\"deepseek_v3\"}", "x/config.json", &c, &err) == COLIBRI_EFORMAT &&
              strstr(err.msg, "x/config.json") && strstr(err.msg, "'vocab_size'"), "%s", err.msg);
    CHECK(model_config_parse("not json", "config.json", &c, &err) == COLIBRI_EFORMAT, "garbage accepted");
    CHECK(parse_edit("\"hidden_size\":32", "\"hidden_size\":-5", &c, &err) == COLIBRI_EFORMAT, "negative size accepted");
}

/* A config with `extra` appended must be refused with EFORMAT and a message
 * holding both words (the field and its range). */
static void refused(const char *extra, const char *field, const char *range)
{
    struct model_config c;
    struct colibri_err err;
    int rc = parse("deepseek_v3", extra, &c, &err);
    CHECK(rc == COLIBRI_EFORMAT && strstr(err.msg, field) && strstr(err.msg, range), "%s: rc %d, '%s'", extra, rc,
          err.msg);
}

#define YARN(fields) ",\"rope_scaling\":{\"type\":\"yarn\",\"factor\":4," fields "}"

/* Every number is finite and in range before it is used or converted. */
static void test_config_number_ranges(void)
{
    refused(",\"rms_norm_eps\":1e400", "'rms_norm_eps'", "[1.2e-38, 1]");      /* parses as inf */
    refused(",\"rms_norm_eps\":-1e-6", "'rms_norm_eps'", "[1.2e-38, 1]");
    refused(",\"rms_norm_eps\":0", "'rms_norm_eps'", "finite number");
    refused(",\"rms_norm_eps\":1e-300", "'rms_norm_eps'", "[1.2e-38, 1]");     /* 0 as a float */
    refused(",\"routed_scaling_factor\":-2.5", "'routed_scaling_factor'", "(0, 1e+06]");
    refused(",\"routed_scaling_factor\":1e999", "'routed_scaling_factor'", "is inf");
    refused(",\"rope_theta\":1e400", "'rope_theta'", "(1, 1e+12]");
    refused(",\"rope_theta\":0.5", "'rope_theta'", "(1, 1e+12]");
    refused(YARN("\"original_max_position_embeddings\":0"), "'original_max_position_embeddings'", "1..16777216");
    refused(YARN("\"original_max_position_embeddings\":-64"), "'original_max_position_embeddings'", "1..16777216");
    refused(YARN("\"original_max_position_embeddings\":1e300"), "'original_max_position_embeddings'", "1..16777216");
    refused(YARN("\"original_max_position_embeddings\":64.5"), "'original_max_position_embeddings'",
            "not an integer");
    refused(YARN("\"beta_fast\":1e400"), "'beta_fast'", "(0, 1e+06]");
    refused(YARN("\"beta_slow\":0"), "'beta_slow'", "(0, 1e+06]");
    refused(YARN("\"mscale\":-1"), "'mscale'", "[0, 1000]");
    refused(YARN("\"mscale_all_dim\":1e400"), "'mscale_all_dim'", "[0, 1000]");
    refused(",\"rope_scaling\":{\"type\":\"yarn\",\"factor\":-4}", "'factor'", "(0, 1e+06]");
    struct model_config c;
    struct colibri_err err;
    CHECK(parse_edit("\"max_position_embeddings\":256", "\"max_position_embeddings\":0", &c, &err) ==
              COLIBRI_EFORMAT && strstr(err.msg, "'max_position_embeddings' is 0, outside the range 1..16777216"),
          "%s", err.msg);
    /* Python's json keeps the last of two equal keys, cJSON the first: refused rather than misread */
    refused(",\"max_position_embeddings\":0", "'max_position_embeddings' appears twice", "");
    refused(YARN("\"beta_fast\":32,\"beta_fast\":16"), "'beta_fast' appears twice", "");
    CHECK(parse_edit("\"vocab_size\":64", "\"vocab_size\":2e9", &c, &err) == COLIBRI_EFORMAT &&
              strstr(err.msg, "'vocab_size' is 2e+09, outside the range 0..16777216"), "%s", err.msg);
    CHECK(parse_edit("\"hidden_size\":32", "\"hidden_size\":1e400", &c, &err) == COLIBRI_EFORMAT &&
              strstr(err.msg, "'hidden_size' is inf"), "%s", err.msg);
    CHECK(parse_edit("\"hidden_size\":32", "\"hidden_size\":32.5", &c, &err) == COLIBRI_EFORMAT &&
              strstr(err.msg, "'hidden_size' is 32.5, not an integer"), "%s", err.msg);
    CHECK(parse_edit("\"hidden_size\":32", "\"hidden_size\":\"32\"", &c, &err) == COLIBRI_EFORMAT &&
              strstr(err.msg, "'hidden_size' is not a number"), "%s", err.msg);
    /* the edges are accepted */
    CHECK(parse("deepseek_v3", ",\"rms_norm_eps\":1,\"routed_scaling_factor\":2.5" YARN(
                    "\"original_max_position_embeddings\":1,\"beta_fast\":1e6,\"mscale\":0"), &c, &err) == 0,
          "%s", err.msg);
    CHECK(c.rope_original_max_pos == 1 && c.rms_norm_eps == 1.0f && c.routed_scaling_factor == 2.5f, "values kept");
}

static void test_session_errors(void)
{
    colibri_model *m = NULL;
    struct colibri_err err = { 0 };
    CHECK(colibri_model_load(FIXTURE, NULL, &m, &err) == 0, "%s", err.msg);
    if (!m) return;
    int V = colibri_model_vocab(m);
    colibri_session *s = NULL;
    struct colibri_session_opts so = { .n_ctx = 4 };
    CHECK(colibri_session_new(m, &so, &s, &err) == 0, "%s", err.msg);
    int32_t bad[2] = { 1, V };
    CHECK(colibri_session_prefill(s, bad, 2, NULL, 0, &err) == COLIBRI_ERANGE && strstr(err.msg, "out of range"),
          "%s", err.msg);
    CHECK(colibri_session_pos(s) == 0, "a failed prefill must cache nothing");
    int32_t neg = -1;
    CHECK(colibri_session_decode(s, neg, NULL, &err) == COLIBRI_ERANGE, "negative id accepted");
    int32_t five[5] = { 1, 2, 3, 4, 5 };
    CHECK(colibri_session_prefill(s, five, 5, NULL, 0, &err) == COLIBRI_ERANGE && strstr(err.msg, "context"),
          "%s", err.msg);
    CHECK(colibri_session_prefill(s, five, 4, NULL, 0, &err) == 0, "%s", err.msg);
    CHECK(colibri_session_decode(s, 1, NULL, &err) == COLIBRI_ERANGE, "decode past the context accepted");
    CHECK(colibri_session_truncate(s, 5, &err) == COLIBRI_EINVAL, "truncate beyond pos accepted");
    colibri_session_free(s);
    colibri_model_free(m);
}

/* Two sessions on one model interleaved give what each gives alone, and a
 * truncated session recomputes the same logits. */
static void test_sessions_share_model(void)
{
    colibri_model *m = NULL;
    struct colibri_err err = { 0 };
    if (colibri_model_load(FIXTURE, NULL, &m, &err)) { CHECK(0, "%s", err.msg); return; }
    int V = colibri_model_vocab(m);
    int32_t a[6] = { 5, 9, 200, 33, 7, 1 }, b[6] = { 100, 2, 3, 400, 11, 12 };
    float *la = malloc(V * sizeof *la), *lb = malloc(V * sizeof *lb), *ref = malloc(V * sizeof *ref);
    colibri_session *sa = NULL, *sb = NULL, *sr = NULL;
    colibri_session_new(m, NULL, &sa, &err);
    colibri_session_new(m, NULL, &sb, &err);
    colibri_session_new(m, NULL, &sr, &err);
    for (int i = 0; i < 6; i++) {
        colibri_session_decode(sa, a[i], la, &err);
        colibri_session_decode(sb, b[i], lb, &err);
    }
    colibri_session_prefill(sr, a, 6, ref, 0, &err);
    double d = 0;
    for (int v = 0; v < V; v++) d = fmax(d, fabs(la[v] - ref[v]));
    CHECK(d < 1e-4, "interleaved session differs from a lone prefill by %g", d);
    /* Truncate and re-feed the last two tokens: same logits as before. */
    CHECK(colibri_session_truncate(sr, 4, &err) == 0, "%s", err.msg);
    colibri_session_prefill(sr, a + 4, 2, lb, 0, &err);
    d = 0;
    for (int v = 0; v < V; v++) d = fmax(d, fabs(lb[v] - ref[v]));
    CHECK(d < 1e-5, "recompute after truncate differs by %g", d);
    colibri_session_free(sa);
    colibri_session_free(sb);
    colibri_session_free(sr);
    colibri_model_free(m);
    free(la); free(lb); free(ref);
}

/* A batched decode step gives every session exactly (bit for bit) the logits
 * its own decode gives, in f32 and in a quantized tier, and stops at a session
 * that cannot advance. */
static void batch_case(const char *tier)
{
    colibri_model *m = NULL;
    struct colibri_err err = { 0 };
    if (colibri_model_load(FIXTURE, NULL, &m, &err)) { CHECK(0, "%s", err.msg); return; }
    int V = colibri_model_vocab(m);
    enum { B = 3 };
    int32_t prompts[B][5] = { { 1, 2, 3, 4, 5 }, { 9, 8 }, { 300, 301, 302 } }, lens[B] = { 5, 2, 3 };
    int32_t next[B] = { 17, 250, 5 };
    colibri_session *bs[B], *solo[B];
    float *bl[B], *sl = malloc(V * sizeof *sl);
    struct colibri_session_opts so = { .n_ctx = 8, .kv_tier = tier };
    for (int i = 0; i < B; i++) {
        colibri_session_new(m, &so, &bs[i], &err);
        colibri_session_new(m, &so, &solo[i], &err);
        colibri_session_prefill(bs[i], prompts[i], lens[i], NULL, 0, &err);
        colibri_session_prefill(solo[i], prompts[i], lens[i], NULL, 0, &err);
        bl[i] = malloc(V * sizeof *bl[i]);
    }
    int done = -1;
    for (int step = 0; step < 2; step++) {
        CHECK(colibri_batch_decode(bs, next, B, bl, &done, &err) == 0 && done == B, "%s", err.msg);
        for (int i = 0; i < B; i++) {
            colibri_session_decode(solo[i], next[i], sl, &err);
            CHECK(memcmp(sl, bl[i], V * sizeof *sl) == 0, "%s: session %d step %d differs from a lone decode", tier,
                  i, step);
            CHECK(colibri_session_pos(bs[i]) == colibri_session_pos(solo[i]), "positions differ");
        }
    }
    /* Session 0 is now at 7 of 8 tokens: one more fits, then it is full. */
    CHECK(colibri_batch_decode(bs, next, B, bl, &done, &err) == 0, "%s", err.msg);
    colibri_session *order[B] = { bs[1], bs[0], bs[2] };
    int before = colibri_session_pos(bs[2]);
    CHECK(colibri_batch_decode(order, next, B, bl, &done, &err) == COLIBRI_ERANGE && done == 1 &&
              strstr(err.msg, "session 1"), "full session: rc done=%d %s", done, err.msg);
    CHECK(colibri_session_pos(bs[2]) == before, "a session after the failed one advanced");
    for (int i = 0; i < B; i++) {
        colibri_session_free(bs[i]);
        colibri_session_free(solo[i]);
        free(bl[i]);
    }
    free(sl);
    colibri_model_free(m);
}

static void test_batch_decode_equals_solo(void)
{
    batch_case("f32");
    batch_case("tq4");
}

int main(void)
{
    RUN_TEST(test_config_rope_spellings_agree);
    RUN_TEST(test_config_refusals);
    RUN_TEST(test_config_number_ranges);
    RUN_TEST(test_session_errors);
    RUN_TEST(test_sessions_share_model);
    RUN_TEST(test_batch_decode_equals_solo);
    return CHECK_SUMMARY();
}
