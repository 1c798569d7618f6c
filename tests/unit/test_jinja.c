/* test_jinja.c - the Jinja interpreter (src/tok/jinja*.c) against goldens
 * rendered by transformers' apply_chat_template code (tests/tok/chat/, made by
 * tools/make_chat_golden.py), plus refusals, errors and hostile templates. */
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "base/util.h"
#include "check.h"
#include "tok/jinja.h"

static char *render_str(const char *tpl, const char *ctx_json, int *rc, char *msg, size_t cap)
{
    struct colibri_err err = { 0 };
    struct jinja_tpl *t = NULL;
    char *out = NULL;
    size_t len = 0;
    *rc = jinja_compile(tpl, strlen(tpl), &t, &err);
    if (!*rc) {
        cJSON *ctx = ctx_json ? tok_jinja_json_parse(ctx_json, strlen(ctx_json)) : NULL;
        *rc = jinja_render(t, ctx, NULL, &out, &len, &err);
        cJSON_Delete(ctx);
    }
    jinja_free(t);
    if (msg) snprintf(msg, cap, "%s", *rc ? err.msg : "");
    return out;
}

/* The day tools/make_chat_golden.py renders on (noon UTC, the same date in
 * nearly every time zone): templates that print today's date with
 * strftime_now (granite_3_3, gpt_oss) hold it in their goldens. */
#define GOLDEN_NOW 1796126400   /* 2026-12-01 12:00:00 UTC */

/* each golden file: every case renders byte for byte, or fails where transformers failed */
static void golden_file(const char *name)
{
    struct jinja_limits lim = jinja_default_limits();
    lim.now = GOLDEN_NOW;
    char path[512];
    size_t len;
    snprintf(path, sizeof path, "tests/tok/chat/%s.json", name);
    char *js = base_read_file_all(path, &len);
    CHECK(js, "%s missing", path);
    if (!js) return;
    cJSON *doc = tok_jinja_json_parse(js, len);
    free(js);
    CHECK(doc, "%s: bad JSON", path);
    if (!doc) return;
    snprintf(path, sizeof path, "tests/tok/chat/%s.jinja", name);
    char *src = base_read_file_all(path, &len);
    CHECK(src, "%s missing", path);
    struct colibri_err err = { 0 };
    struct jinja_tpl *t = NULL;
    int rc = src ? jinja_compile(src, len, &t, &err) : -1;
    CHECK(rc == 0, "%s: %s", name, err.msg);
    const cJSON *cases = cJSON_GetObjectItemCaseSensitive(doc, "cases"), *c;
    int n = 0, n_ok = 0;
    cJSON_ArrayForEach(c, cases) {
        if (rc) break;
        n++;
        const char *cname = cJSON_GetObjectItemCaseSensitive(c, "name")->valuestring;
        const cJSON *exp = cJSON_GetObjectItemCaseSensitive(c, "expected");
        char *out = NULL;
        size_t olen = 0;
        int r = jinja_render(t, cJSON_GetObjectItemCaseSensitive(c, "context"), &lim, &out, &olen, &err);
        if (exp) {
            int same = !r && olen == strlen(exp->valuestring) && !memcmp(out, exp->valuestring, olen);
            CHECK(same, "%s/%s: %s\n--- got ---\n%s\n--- expected ---\n%s", name, cname, r ? err.msg : "differs",
                  r ? "" : out, exp->valuestring);
            n_ok += same;
        } else {
            CHECK(r != 0, "%s/%s: transformers refused (%s) but colibri rendered", name, cname,
                  cJSON_GetObjectItemCaseSensitive(c, "error")->valuestring);
            n_ok += r != 0;
        }
        free(out);
    }
    CHECK(n > 0, "%s: no cases", name);
    printf("     %s: %d/%d cases\n", name, n_ok, n);
    jinja_free(t);
    free(src);
    cJSON_Delete(doc);
}

static const char *const GOLDEN[] = {
    "deepseek_v3", "deepseek_v3_1", "deepseek_r1", "deepseek_r1_qwen", "kimi_k2", "glm_4_6", "glm_4_7_flash",
    "qwen3", "qwen3_coder", "qwq", "smollm3", "gpt_oss", "granite_3_3", "mistral_nemo",
    "kimi_k2_thinking_moonshotai", "glm_4_5",
    /* written for colibri: numbers, Unicode case, |indent, repr, documents */
    "probe_numbers", "probe_case", "probe_indent", "probe_repr", "probe_documents", NULL };

static void test_goldens(void)
{
    for (int i = 0; GOLDEN[i]; i++) golden_file(GOLDEN[i]);
}

/* llama.cpp's copies of these use what transformers cannot run either
 * (list.append is refused by its sandbox) or a filter it does not have
 * (from_json): colibri refuses them at load, naming the construct. */
static void test_refused_templates(void)
{
    static const struct { const char *name, *needle; } R[] = {
        { "deepseek_v3_2", "unsupported filter 'from_json'" },
        { "kimi_k2_instruct", "unsupported method 'append'" },
        { "kimi_k2_thinking", "unsupported method 'append'" },
    };
    for (size_t i = 0; i < sizeof R / sizeof *R; i++) {
        char path[256];
        size_t len;
        snprintf(path, sizeof path, "tests/tok/chat/%s.jinja", R[i].name);
        char *src = base_read_file_all(path, &len);
        CHECK(src, "%s missing", path);
        if (!src) continue;
        struct colibri_err err = { 0 };
        struct jinja_tpl *t = NULL;
        int rc = jinja_compile(src, len, &t, &err);
        CHECK(rc == COLIBRI_EUNSUPPORTED && strstr(err.msg, R[i].needle) && strstr(err.msg, "line "),
              "%s: rc %d, %s", R[i].name, rc, err.msg);
        jinja_free(t);
        free(src);
    }
}

/* one-line templates, each a construct, rendered by transformers' environment */
static void test_snippets(void)
{
    size_t len;
    char *js = base_read_file_all("tests/tok/chat/snippets.json", &len);
    CHECK(js, "tests/tok/chat/snippets.json missing");
    if (!js) return;
    cJSON *doc = tok_jinja_json_parse(js, len);
    free(js);
    const cJSON *ctx = cJSON_GetObjectItemCaseSensitive(doc, "context"), *c;
    int n = 0;
    cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(doc, "cases")) {
        const char *src = cJSON_GetObjectItemCaseSensitive(c, "template")->valuestring;
        const cJSON *exp = cJSON_GetObjectItemCaseSensitive(c, "expected");
        struct colibri_err err = { 0 };
        struct jinja_tpl *t = NULL;
        char *out = NULL;
        size_t olen = 0;
        int rc = jinja_compile(src, strlen(src), &t, &err);
        if (!rc) rc = jinja_render(t, ctx, NULL, &out, &olen, &err);
        if (exp) CHECK(!rc && olen == strlen(exp->valuestring) && !memcmp(out, exp->valuestring, olen),
                       "%s\n  got      %s\n  expected %s", src, rc ? err.msg : out, exp->valuestring);
        else CHECK(rc && err.msg[0], "%s: transformers failed (%s), colibri rendered '%s'", src,
                   cJSON_GetObjectItemCaseSensitive(c, "error")->valuestring, out ? out : "");
        free(out);
        jinja_free(t);
        n++;
    }
    CHECK(n >= 40, "only %d snippets", n);
    cJSON_Delete(doc);
}

/* what templates cannot do to the process: each is an error, never a crash or a hang */
static void test_hostile(void)
{
    static const struct { const char *tpl, *needle; } H[] = {
        { "{% for i in range(100000000) %}{% endfor %}", "memory" },
        { "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", "nested more than" },
        { "{{ 'x' * 100000000000 }}", "exceed" },
        { "{% set ns = namespace(s='xxxxxxxxxxxxxxxx') %}{% for i in range(40) %}{% set ns.s = ns.s + ns.s %}{% endfor %}", "exceed" },
        { "{% for i in range(30) %}{% for j in range(30) %}{% for k in range(30) %}{% for m in range(30) %}"
          "{% for q in range(30) %}{% endfor %}{% endfor %}{% endfor %}{% endfor %}{% endfor %}", "memory" },
        { "{{ 9223372036854775807 + 1 }}", "overflow" },
        { "{{ 2 ** 64 }}", "overflow" },
        { "{% include 'x.j' %}", "unsupported statement '{% include %}'" },
        { "{% extends 'base' %}", "unsupported statement '{% extends %}'" },
        { "{% call foo() %}x{% endcall %}", "unsupported statement '{% call %}'" },
        { "{% for x in l recursive %}{% endfor %}", "recursive" },
        { "{{ x|frobnicate }}", "unsupported filter 'frobnicate'" },
        { "{{ x is prime }}", "unsupported test 'prime'" },
        { "{{ l.pop() }}", "unsupported method 'pop'" },
        { "{% if x %}never closed", "never closed" },
        { "{% endif %}", "unexpected" },
        { "{{ 'unterminated }}", "unterminated string" },
        { "{% break %}", "outside a for loop" },
        { "{{ (((((((((( 1 ))))))))) }}", "unbalanced" },
        { "{{ '%s' % 1 }}", "printf-style" },
        { "{{ 1234567890123456789012345678901234567890123456789012345678901234.5 }}", "longer than 63" },
        { "{{ 1.0e0000000000000000000000000000000000000000000000000000000000000001 }}", "longer than 63" },
    };
    for (size_t i = 0; i < sizeof H / sizeof *H; i++) {
        int rc;
        char msg[1024];
        char *out = render_str(H[i].tpl, "{\"l\": [1]}", &rc, msg, sizeof msg);
        CHECK(rc != 0 && strstr(msg, H[i].needle), "%s: rc %d, '%s' (want '%s')", H[i].tpl, rc, msg, H[i].needle);
        free(out);
    }
    /* nesting deeper than the parser allows */
    char deep[4096];
    size_t k = 0;
    k += (size_t)snprintf(deep + k, sizeof deep - k, "{{ ");
    for (int i = 0; i < 600; i++) deep[k++] = '(';
    deep[k++] = '1';
    for (int i = 0; i < 600; i++) deep[k++] = ')';
    snprintf(deep + k, sizeof deep - k, " }}");
    int rc;
    char msg[1024];
    char *out = render_str(deep, NULL, &rc, msg, sizeof msg);
    CHECK(rc == COLIBRI_EUNSUPPORTED && strstr(msg, "nested more than"), "deep parens: %d %s", rc, msg);
    free(out);
    /* a template error message reaches the caller, with the line */
    out = render_str("a\n{{ raise_exception('Only user and assistant roles') }}", NULL, &rc, msg, sizeof msg);
    CHECK(rc == COLIBRI_EINVAL && strstr(msg, "line 2") && strstr(msg, "template error: Only user and assistant roles"),
          "raise_exception: %d %s", rc, msg);
    free(out);
}

/* smaller limits are honoured (a server may render with tighter ones) */
static void test_limits(void)
{
    struct colibri_err err = { 0 };
    struct jinja_tpl *t = NULL;
    const char *src = "{% for i in range(1000) %}abcdefgh{% endfor %}";
    CHECK(jinja_compile(src, strlen(src), &t, &err) == 0, "%s", err.msg);
    struct jinja_limits lim = jinja_default_limits();
    char *out = NULL;
    size_t len = 0;
    CHECK(jinja_render(t, NULL, &lim, &out, &len, &err) == 0 && len == 8000, "default limits: %s", err.msg);
    free(out);
    out = NULL;
    lim.max_output = 4000;
    CHECK(jinja_render(t, NULL, &lim, &out, &len, &err) == COLIBRI_EINVAL && strstr(err.msg, "4000"), "%s", err.msg);
    CHECK(out == NULL, "out untouched on failure");
    lim = jinja_default_limits();
    lim.max_steps = 1000;
    CHECK(jinja_render(t, NULL, &lim, &out, &len, &err) == COLIBRI_EINVAL && strstr(err.msg, "1000 steps"), "%s", err.msg);
    lim = jinja_default_limits();
    lim.max_memory = 1 << 16;
    CHECK(jinja_render(t, NULL, &lim, &out, &len, &err) != 0, "memory limit not honoured");
    jinja_free(t);
}

int main(void)
{
    RUN_TEST(test_goldens);
    RUN_TEST(test_refused_templates);
    RUN_TEST(test_snippets);
    RUN_TEST(test_hostile);
    RUN_TEST(test_limits);
    return CHECK_SUMMARY();
}
