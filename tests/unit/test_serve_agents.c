/* test_serve_agents.c - what agents hit first: a tool-call reply cut by
 * max_tokens keeps its complete calls and never leaks markup into content;
 * the bundled model's template renders tools, tool calls (content null or
 * "") and tool results as transformers renders them
 * (tests/tok/chat/tiny_tools.json). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "check.h"
#include "serve/job.h"
#include "serve/oai.h"

#define CALL(args) "<｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n" args "\n```<｜tool▁call▁end｜>"

static void test_tool_calls_cut(void)
{
    /* two complete calls, the third cut inside its arguments */
    const char *cut = "Sure.<｜tool▁calls▁begin｜>" CALL("{\"city\": \"Paris\"}") "\n" CALL("{\"city\": \"Rome\"}")
                      "\n<｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{\"city\": \"Ber";
    cJSON *calls = NULL;
    char *content = NULL;
    CHECK(oai_parse_tool_calls(cut, NULL, &calls, &content) == 0 && !calls, "a cut reply is not whole calls");
    int n = serve_oai_tool_calls_cut(cut, NULL, &calls, &content);
    CHECK(n == 2 && cJSON_GetArraySize(calls) == 2, "complete calls kept: %d", n);
    const cJSON *f = cJSON_GetObjectItem(cJSON_GetArrayItem(calls, 1), "function");
    const cJSON *a = cJSON_GetObjectItem(f, "arguments");
    CHECK(cJSON_IsString(a) && !strcmp(a->valuestring, "{\"city\": \"Rome\"}"), "second call's arguments");
    CHECK(content && !strcmp(content, "Sure."), "content is the text before the section: '%s'", content ? content : "");
    cJSON_Delete(calls);
    free(content);
    /* cut before any call is complete: no calls, and still no markup */
    const char *early = "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_wea";
    n = serve_oai_tool_calls_cut(early, NULL, &calls, &content);
    CHECK(n == 0 && calls && content && !content[0], "nothing complete: %d '%s'", n, content ? content : "");
    cJSON_Delete(calls);
    free(content);
    /* no section at all: nothing */
    n = serve_oai_tool_calls_cut("plain text", NULL, &calls, &content);
    CHECK(n == 0 && !calls && !content, "plain text has no section");
}

static void test_tiny_renders_tools(void)
{
    FILE *f = fopen("tests/tok/chat/tiny_tools.json", "rb");
    CHECK(f != NULL, "tests/tok/chat/tiny_tools.json");
    if (!f) return;
    static char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    cJSON *doc = cJSON_Parse(buf);
    colibri_tokenizer *tk = NULL;
    struct colibri_err err = { 0 };
    CHECK(doc && colibri_tokenizer_load("models/colibri-tiny", &tk, &err) == 0, "setup: %s", err.msg);
    const cJSON *c;
    int k = 0;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(doc, "cases")) {
        if (!tk) break;
        char *mj = cJSON_PrintUnformatted(cJSON_GetObjectItem(c, "messages"));
        char *tj = cJSON_PrintUnformatted(cJSON_GetObjectItem(c, "tools"));
        const char *want = cJSON_GetObjectItem(c, "expected")->valuestring;
        char *out = NULL;
        size_t len = 0;
        int r = colibri_chat_render_json(tk, mj, tj, NULL, 1, &out, &len, &err);
        CHECK(r == 0 && len == strlen(want) && !memcmp(out, want, len), "%s: %s\n--- got ---\n%s\n--- want ---\n%s",
              cJSON_GetObjectItem(c, "name")->valuestring, r ? err.msg : "differs", out ? out : "", want);
        free(out);
        free(mj);
        free(tj);
        k++;
    }
    CHECK(k == 3, "%d cases", k);
    colibri_tokenizer_free(tk);
    cJSON_Delete(doc);
}

static char *prompt_of(colibri_tokenizer *tk, const char *body, struct oai_error *e)
{
    struct oai_model m = { .id = "tiny", .tok = tk, .n_vocab = colibri_tokenizer_n_vocab(tk), .n_ctx = 4096 };
    struct job *j = oai_parse(&m, JOB_CHAT, body, strlen(body), e);
    char *txt = NULL;
    size_t n = 0;
    struct colibri_err err = { 0 };
    if (j && colibri_tokenizer_decode(tk, j->prompt, (size_t)j->n_prompt, 0, &txt, &n, &err)) txt = NULL;
    job_release(j);
    return txt;
}

/* Thinking switches take effect or are refused by name: a kwarg the
 * template never reads, reasoning_effort without a switch (the bundled
 * template); on DeepSeek-V3.1's template reasoning_effort sets thinking
 * (the prompt opens <think>, as transformers renders thinking=True), and
 * "none" leaves it closed. */
static void test_thinking_switches(void)
{
    colibri_tokenizer *tk = NULL;
    struct colibri_err err = { 0 };
    if (colibri_tokenizer_load("models/colibri-tiny", &tk, &err)) { CHECK(0, "%s", err.msg); return; }
    struct oai_error e = { 0 };
    const char *U = "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"max_tokens\": 1, ";
    char body[512];
    snprintf(body, sizeof body, "%s\"chat_template_kwargs\": {\"thinking\": true}}", U);
    char *got = prompt_of(tk, body, &e);
    CHECK(!got && e.status == 400 && strstr(e.msg, "'chat_template_kwargs.thinking'") && strstr(e.msg, "never reads"),
          "bundled template, thinking: %d %s", e.status, e.msg);
    free(got);
    snprintf(body, sizeof body, "%s\"reasoning_effort\": \"high\"}", U);
    got = prompt_of(tk, body, &e);
    CHECK(!got && e.status == 400 && !strcmp(e.param, "reasoning_effort"), "bundled, reasoning_effort: %s", e.msg);
    free(got);
    FILE *f = fopen("tests/tok/chat/deepseek_v3_1.jinja", "rb");
    static char src[1 << 16];
    size_t n = f ? fread(src, 1, sizeof src - 1, f) : 0;
    if (f) fclose(f);
    src[n] = 0;
    CHECK(n && !colibri_tokenizer_set_chat_template(tk, src, n, "deepseek_v3_1.jinja", &err), "%s", err.msg);
    static const struct { const char *extra; int think; } C[] = {
        { "\"reasoning_effort\": \"high\"}", 1 }, { "\"reasoning_effort\": \"none\"}", 0 },
        { "\"chat_template_kwargs\": {\"thinking\": true}}", 1 }, { "\"max_completion_tokens\": 1}", 0 },
        { "\"reasoning_effort\": \"low\", \"chat_template_kwargs\": {\"thinking\": false}}", 0 },
    };
    for (size_t i = 0; i < sizeof C / sizeof *C; i++) {
        snprintf(body, sizeof body, "%s%s", U, C[i].extra);
        got = prompt_of(tk, body, &e);
        size_t L = got ? strlen(got) : 0;
        int think = L >= 7 && !strcmp(got + L - 7, "<think>");
        CHECK(got && think == C[i].think, "%s: %s", C[i].extra, got ? got : e.msg);
        free(got);
    }
    snprintf(body, sizeof body, "%s\"reasoning_effort\": \"max\"}", U);
    got = prompt_of(tk, body, &e);
    CHECK(!got && e.status == 400 && strstr(e.msg, "none, minimal, low, medium or high"), "%s", e.msg);
    free(got);
    colibri_tokenizer_free(tk);
}

int main(void)
{
    RUN_TEST(test_thinking_switches);
    RUN_TEST(test_tiny_renders_tools);
    RUN_TEST(test_tool_calls_cut);
    return CHECK_SUMMARY();
}
