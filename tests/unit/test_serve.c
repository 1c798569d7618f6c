/* test_serve: the server's pure parts without HTTP — the response buffer,
 * the Prometheus text, and OpenAI request parsing (field named in each
 * error, context arithmetic) with the small test tokenizer. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "base/strbuf.h"
#include "check.h"
#include "sample/grammar.h"
#include "serve/metrics.h"
#include "serve/oai.h"

static void test_metrics_text(void)
{
    struct metrics m;
    metrics_init(&m);
    atomic_fetch_add(&m.requests[METRICS_EP_CHAT], 3);
    atomic_fetch_add(&m.generated_tokens, 42);
    metrics_count_response(&m, 429);
    metrics_count_response(&m, 418);
    struct metrics_gauges g = { .queue_depth = 2, .slots_busy = 1, .slots_total = 4, .kv_tokens = 10,
                                .kv_bytes = 1000 };
    char *s = metrics_render(&m, &g);
    CHECK(s != NULL, "render");
    if (!s) return;
    CHECK(strstr(s, "colibri_requests_total{endpoint=\"chat_completions\"} 3\n") != NULL, "requests");
    CHECK(strstr(s, "colibri_responses_total{code=\"429\"} 1\n") != NULL, "429");
    CHECK(strstr(s, "colibri_responses_total{code=\"other\"} 1\n") != NULL, "other codes");
    CHECK(strstr(s, "# TYPE colibri_generated_tokens_total counter\ncolibri_generated_tokens_total 42\n"), "tokens");
    CHECK(strstr(s, "colibri_queue_depth 2\n") && strstr(s, "colibri_kv_bytes 1000\n"), "gauges");
    free(s);
}

static colibri_tokenizer *tok;

static struct job *parse(enum job_kind kind, const char *body, struct oai_error *e)
{
    struct oai_model m = { .id = "tiny", .tok = tok, .n_vocab = 3003, .n_ctx = 64 };
    memset(e, 0, sizeof *e);
    return oai_parse(&m, kind, body, strlen(body), e);
}

/* The request must fail with status and name param. */
static void refused(enum job_kind kind, const char *body, int status, const char *param)
{
    struct oai_error e;
    struct job *j = parse(kind, body, &e);
    CHECK(!j && e.status == status && !strcmp(e.param, param), "%s: status %d param '%s' (%s)", body, e.status,
          e.param, e.msg);
    job_release(j);
}

static void test_parse_errors(void)
{
    refused(JOB_COMPLETION, "{bad", 400, "");
    refused(JOB_COMPLETION, "[1]", 400, "");
    refused(JOB_COMPLETION, "{\"max_tokens\": 3}", 400, "prompt");
    refused(JOB_COMPLETION, "{\"prompt\": [1, 2], \"max_tokens\": -1}", 400, "max_tokens");
    refused(JOB_COMPLETION, "{\"prompt\": [1, 2], \"max_tokens\": 1.5}", 400, "max_tokens");
    refused(JOB_COMPLETION, "{\"prompt\": [1, 2], \"max_tokens\": \"3\"}", 400, "max_tokens");
    refused(JOB_COMPLETION, "{\"prompt\": [1, 2], \"max_tokens\": 63}", 400, "max_tokens"); /* 2 + 63 > 64 */
    refused(JOB_COMPLETION, "{\"prompt\": [1, 3003]}", 400, "prompt");
    refused(JOB_COMPLETION, "{\"prompt\": [1, 2], \"temperature\": 3}", 400, "temperature");
    refused(JOB_COMPLETION, "{\"prompt\": [1, 2], \"n\": 2}", 400, "n");
    refused(JOB_COMPLETION, "{\"prompt\": [1, 2], \"stop\": [\"a\", 1]}", 400, "stop");
    refused(JOB_COMPLETION, "{\"prompt\": [1, 2], \"model\": \"other\"}", 404, "model");
    refused(JOB_COMPLETION, "{\"prompt\": [\"a\", \"b\"]}", 400, "prompt");
    refused(JOB_CHAT, "{\"messages\": []}", 400, "messages");
    refused(JOB_CHAT, "{\"messages\": \"hi\"}", 400, "messages");
    refused(JOB_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": 5}]}", 400, "messages");
    {
        /* an image part is refused naming it (a Kimi K2.5 runs as its language model only) */
        struct oai_error e;
        struct job *j = parse(JOB_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"text\", "
                              "\"text\": \"what is this\"}, {\"type\": \"image_url\", \"image_url\": {\"url\": "
                              "\"data:,\"}}]}]}", &e);
        CHECK(!j && e.status == 400 && strstr(e.msg, "content[1]") && strstr(e.msg, "'image_url'") &&
                  strstr(e.msg, "image and video inputs are not supported"), "%d %s", e.status, e.msg);
        job_release(j);
    }
    refused(JOB_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"top_logprobs\": 2}", 400,
            "top_logprobs");
}

/* Tools of one name are refused naming the first tool that repeats an
 * earlier name and that name's first tool (b at 1 and 3, before a at 0 and 5). */
static void test_parse_duplicate_tools(void)
{
    static const char *names[] = { "a", "b", "c", "b", "d", "a" };
    char body[2048] = "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"tools\": [";
    for (int i = 0; i < 6; i++) {
        size_t n = strlen(body);
        snprintf(body + n, sizeof body - n, "%s{\"type\": \"function\", \"function\": {\"name\": \"%s\"}}",
                 i ? ", " : "", names[i]);
    }
    strcat(body, "]}");
    struct oai_error e;
    struct job *j = parse(JOB_CHAT, body, &e);
    CHECK(!j && e.status == 400 && !strcmp(e.param, "tools") && strstr(e.msg, "'tools[1]' and 'tools[3]' are both named 'b'"),
          "status %d param '%s': %s", e.status, e.param, e.msg);
    job_release(j);
}

/* A number literal beyond a double's range (cJSON parses it to inf) is
 * refused as out of range with the allowed range, not as a non-number. */
static void test_parse_number_out_of_range(void)
{
    const struct { const char *body, *param, *words; } cases[] = {
        { "{\"prompt\": [1, 2], \"temperature\": 1e999999999}", "temperature", "must be between 0 and 2" },
        { "{\"prompt\": [1, 2], \"top_p\": -1e999}", "top_p", "must be between 0 and 1" },
        { "{\"prompt\": [1, 2], \"presence_penalty\": 1e400}", "presence_penalty", "must be between -2 and 2" },
        { "{\"prompt\": [1, 2], \"max_tokens\": 1e999}", "max_tokens", "out of range" },
        { "{\"prompt\": [1, 2], \"seed\": -1e999}", "seed", "out of range" },
        { "{\"prompt\": [1, 2], \"min_p\": 1e999}", "min_p", "out of range: it must be in [0, 1]" },
        { "{\"prompt\": [1, 2], \"top_k\": -1e999}", "top_k", "out of range" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct oai_error e;
        struct job *j = parse(JOB_COMPLETION, cases[i].body, &e);
        CHECK(!j && e.status == 400 && !strcmp(e.param, cases[i].param) && strstr(e.msg, cases[i].words) &&
                  strstr(e.msg, "out of range") && !strstr(e.msg, "got a number"),
              "%s: status %d param '%s' (%s)", cases[i].body, e.status, e.param, e.msg);
        job_release(j);
    }
}

/* A body of n bytes (NULs allowed) must fail with status 400 and a message
 * holding `words`. */
static void refused_bytes(const char *body, size_t n, const char *words)
{
    struct oai_model m = { .id = "tiny", .tok = tok, .n_vocab = 3003, .n_ctx = 64 };
    struct oai_error e;
    memset(&e, 0, sizeof e);
    struct job *j = oai_parse(&m, JOB_COMPLETION, body, n, &e);
    CHECK(!j && e.status == 400 && strstr(e.msg, words), "%.*s: status %d (%s)", (int)n, body, e.status, e.msg);
    job_release(j);
}

static void test_parse_whole_body(void)
{
    static const char two[] = "{\"prompt\": [1, 2]} {\"prompt\": [3]}";
    refused_bytes(two, sizeof two - 1, "data after its JSON value, at byte 19");
    static const char brace[] = "{\"prompt\": [1, 2]}}";
    refused_bytes(brace, sizeof brace - 1, "data after its JSON value, at byte 18");
    static const char nul[] = "{\"prompt\": [1, 2]}\0junk";
    refused_bytes(nul, sizeof nul - 1, "data after its JSON value, at byte 18");
    static const char esc_model[] = "{\"prompt\": [1, 2], \"model\": \"tiny\\u0000evil\"}";
    refused_bytes(esc_model, sizeof esc_model - 1, "'\\u0000' at byte 33");
    static const char esc_stop[] = "{\"prompt\": [1, 2], \"stop\": \"\\u0000\"}";
    refused_bytes(esc_stop, sizeof esc_stop - 1, "'\\u0000'");
    static const char esc_prompt[] = "{\"prompt\": \"hello\\u0000 world\"}";
    refused_bytes(esc_prompt, sizeof esc_prompt - 1, "'\\u0000'");
    static const char raw_nul[] = "{\"prompt\": \"hello\0 world\"}";
    refused_bytes(raw_nul, sizeof raw_nul - 1, "control character 0x00 at byte 17");
    static const char raw_ctl[] = "{\"prompt\": \"a\x01\"}";
    refused_bytes(raw_ctl, sizeof raw_ctl - 1, "control character 0x01");
    /* still accepted: trailing whitespace, an escaped backslash before "u0000", other escapes */
    struct oai_error e;
    struct job *j = parse(JOB_COMPLETION, "{\"prompt\": [1, 2]}\r\n \t", &e);
    CHECK(j != NULL, "trailing whitespace: %s", e.msg);
    job_release(j);
    j = parse(JOB_COMPLETION, "{\"prompt\": \"a\\\\u0000b\\u0001\", \"stop\": \"\\n\"}", &e);
    CHECK(j != NULL, "escaped backslash then u0000: %s", e.msg);
    CHECK(j && j->p.n_stop == 1 && !strcmp(j->p.stop[0], "\n"), "the stop string");
    job_release(j);
}

static void test_parse_ok(void)
{
    struct oai_error e;
    struct job *j = parse(JOB_COMPLETION, "{\"model\": \"tiny\", \"prompt\": [[5, 6, 7]], \"max_tokens\": 61, "
                                          "\"temperature\": 0, \"stop\": \"x\", \"logprobs\": 2, \"seed\": 9, "
                                          "\"stream\": true, \"user\": \"ignored\"}", &e);
    CHECK(j != NULL, "%s", e.msg);
    if (!j) return;
    CHECK(j->n_prompt == 3 && j->prompt[0] == 5 && j->prompt[2] == 7, "prompt ids");
    CHECK(j->p.max_tokens == 61 && j->p.temperature == 0 && j->p.stream == 1, "options");
    CHECK(j->p.n_stop == 1 && !strcmp(j->p.stop[0], "x") && j->p.logprobs && j->p.n_top == 2, "stop, logprobs");
    CHECK(j->p.seed == 9 && !strncmp(j->id, "cmpl-", 5), "seed, id");
    job_release(j);
    /* without max_tokens, the rest of the context */
    j = parse(JOB_COMPLETION, "{\"prompt\": [1, 2, 3, 4]}", &e);
    CHECK(j && j->p.max_tokens == 60, "default max_tokens %d", j ? j->p.max_tokens : -1);
    job_release(j);
    /* a text prompt goes through the tokenizer (with BOS) */
    j = parse(JOB_COMPLETION, "{\"prompt\": \"hello world\", \"max_tokens\": 2}", &e);
    CHECK(j && j->n_prompt >= 2 && j->prompt[0] == colibri_tokenizer_bos(tok), "text prompt: %s", e.msg);
    job_release(j);
    /* an empty text prompt is [BOS], as OpenAI accepts it and Hugging Face encodes it */
    j = parse(JOB_COMPLETION, "{\"prompt\": \"\", \"max_tokens\": 2}", &e);
    CHECK(j && j->n_prompt == 1 && j->prompt[0] == colibri_tokenizer_bos(tok), "empty prompt: %s", e.msg);
    job_release(j);
    j = parse(JOB_COMPLETION, "{\"prompt\": [\"\"], \"max_tokens\": 2}", &e);
    CHECK(j && j->n_prompt == 1 && j->prompt[0] == colibri_tokenizer_bos(tok), "empty prompt[0]: %s", e.msg);
    job_release(j);
}

/* A tokenizer that adds no BOS still answers an empty text prompt from BOS. */
static void test_parse_empty_prompt_no_add_bos(void)
{
    char dir[] = "/tmp/test_serve_XXXXXX", path[256], src[4096];
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    CHECK(realpath("tests/tok/small/tokenizer.json", src) != NULL, "realpath");
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    CHECK(symlink(src, path) == 0, "symlink");
    snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL, "%s", path);
    if (f) {
        fputs("{\"add_bos_token\": false, \"bos_token\": \"<|bos|>\"}", f);
        fclose(f);
    }
    colibri_tokenizer *t = NULL;
    struct colibri_err err = { 0 };
    CHECK(colibri_tokenizer_load(dir, &t, &err) == 0, "%s: %s", dir, err.msg);
    if (t) {
        int32_t *ids = NULL;
        size_t n = 9;
        CHECK(colibri_tokenizer_encode(t, "", 0, COLIBRI_ENCODE_ADD_SPECIAL, &ids, &n, NULL, &err) == 0 && n == 0,
              "the tokenizer adds no BOS: %zu ids", n);
        free(ids);
        struct oai_model m = { .id = "tiny", .tok = t, .n_vocab = 3003, .n_ctx = 64 };
        struct oai_error e = { 0 };
        const char *body = "{\"prompt\": \"\", \"max_tokens\": 2}";
        struct job *j = oai_parse(&m, JOB_COMPLETION, body, strlen(body), &e);
        CHECK(j && j->n_prompt == 1 && j->prompt[0] == colibri_tokenizer_bos(t) && j->prompt[0] >= 0,
              "empty prompt: %s", e.msg);
        job_release(j);
        colibri_tokenizer_free(t);
    }
    unlink(path);
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    unlink(path);
    rmdir(dir);
}

/* Random byte edits of valid bodies: every result is a job or an error with
 * a status and a message; nothing crashes or leaks (run under ASan by make
 * check). */
static void test_parse_fuzz(void)
{
    static const char *const seeds[] = {
        "{\"model\": \"tiny\", \"prompt\": [[5, 6, 7]], \"max_tokens\": 3, \"stop\": [\"a\", \"b\"], \"logprobs\": 2}",
        "{\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": \"hi\"}]}], "
        "\"logprobs\": true, \"top_logprobs\": 3, \"stream\": true, \"stream_options\": {\"include_usage\": true}}",
        "{\"prompt\": \"hello \\u00e9 world\", \"temperature\": 0.5, \"top_p\": 0.9, \"seed\": -3}",
    };
    uint64_t x = 0x9E3779B97F4A7C15ull;
    char buf[512];
    int n_ok = 0, n_err = 0;
    for (int it = 0; it < 3000; it++) {
        const char *seed = seeds[it % 3];
        size_t n = strlen(seed);
        memcpy(buf, seed, n);
        int edits = 1 + it % 4;
        for (int e = 0; e < edits; e++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            size_t pos = (size_t)(x >> 8) % n;
            static const char alphabet[] = "{}[]\":,0123456789-.eE\\ntfal\x80\xff ";
            buf[pos] = alphabet[(x >> 40) % (sizeof alphabet - 1)];
            if ((x & 0xff) < 16 && n > 2) n--;      /* sometimes truncate */
        }
        buf[n] = 0;
        struct oai_error err;
        struct job *j = parse(it % 3 == 1 ? JOB_CHAT : JOB_COMPLETION, buf, &err);
        if (j) {
            CHECK(j->n_prompt > 0 && j->p.max_tokens >= 1 && j->n_prompt + j->p.max_tokens <= 64, "accepted job out of bounds");
            n_ok++;
        } else {
            CHECK(err.status >= 400 && err.msg[0], "error without status or message");
            n_err++;
        }
        job_release(j);
    }
    CHECK(n_ok > 0 && n_err > 0, "fuzz covered only one outcome (%d ok, %d errors)", n_ok, n_err);
}

/* Streamed tool calls: at every prefix of a reply, the view's text and each
 * call's arguments are prefixes of what the next prefix gives (so deltas
 * never take back what was sent), and the final view is the whole parse. */
static void test_tool_view_prefixes(void)
{
    static const char *const REPLIES[] = {
        "Let me check.\n<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n"
        "{\"city\": \"Paris\", \"q\": \"a`b\"}\n```<｜tool▁call▁end｜>\n<｜tool▁call▁begin｜>function<｜tool▁sep｜>"
        "get_time\n```json\n{}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
        "Ok.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{\"city\": \"<Oslo>\"}<｜tool▁call▁end｜>"
        "<｜tool▁calls▁end｜>",
        "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>"
        "{\"city\": \"Lima\"}<|tool_call_end|><|tool_calls_section_end|>",
        "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}}\n</tool_call>",
        "just text, with a < and a <tool",
    };
    static const int N_CALLS[] = { 2, 1, 1, 1, 0 };
    for (size_t r = 0; r < sizeof REPLIES / sizeof *REPLIES; r++) {
        const char *s = REPLIES[r];
        size_t n = strlen(s);
        struct oai_tool_view prev = { 0 };
        for (size_t k = 0; k <= n; k++) {
            char *pre = strndup(s, k);
            struct oai_tool_view v;
            int fin = k == n;
            CHECK(pre && !serve_oai_tool_view(pre, k, fin, NULL, &v), "reply %zu: view failed", r);
            CHECK(v.text_end >= prev.text_end && v.text_end <= k, "reply %zu at %zu: text_end %zu after %zu", r, k,
                  v.text_end, prev.text_end);
            CHECK(v.n >= prev.n, "reply %zu at %zu: %d calls after %d", r, k, v.n, prev.n);
            for (int i = 0; i < prev.n && i < v.n; i++) {
                CHECK(!strcmp(v.call[i].name, prev.call[i].name), "reply %zu at %zu: call %d renamed", r, k, i);
                CHECK(v.call[i].args_len >= prev.call[i].args_len &&
                      !memcmp(v.call[i].args, prev.call[i].args, prev.call[i].args_len),
                      "reply %zu at %zu: call %d arguments '%s' do not extend '%s'", r, k, i, v.call[i].args,
                      prev.call[i].args);
            }
            serve_oai_tool_view_free(&prev);
            prev = v;
            free(pre);
        }
        struct cJSON *calls = NULL;
        char *content = NULL;
        int nc = oai_parse_tool_calls(s, NULL, &calls, &content);
        CHECK(nc == N_CALLS[r] && prev.n == nc, "reply %zu: %d calls parsed, %d in the view", r, nc, prev.n);
        for (int i = 0; i < nc && i < prev.n; i++) {
            const struct cJSON *fn = cJSON_GetObjectItem(cJSON_GetArrayItem(calls, i), "function");
            CHECK(!strcmp(cJSON_GetObjectItem(fn, "name")->valuestring, prev.call[i].name) &&
                  !strcmp(cJSON_GetObjectItem(fn, "arguments")->valuestring, prev.call[i].args),
                  "reply %zu call %d: view %s(%s) vs parse", r, i, prev.call[i].name, prev.call[i].args);
        }
        size_t want_text = nc ? strlen(content ? content : "") : n;
        CHECK(prev.text_end == want_text && !memcmp(s, content && nc ? content : s, want_text),
              "reply %zu: text ends at %zu, want %zu", r, prev.text_end, want_text);
        cJSON_Delete(calls);
        free(content);
        serve_oai_tool_view_free(&prev);
    }
}

/* tool_choice required / named: for each syntax, with the template that
 * writes it, the grammar takes exactly the replies made of calls to the
 * allowed functions with arguments valid for their schemas, and what it takes
 * parses back into those calls. */
static const char TOOLS_JSON[] =
    "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"parameters\":{\"type\":\"object\","
    "\"properties\":{\"city\":{\"type\":\"string\"},\"unit\":{\"enum\":[\"c\",\"f\"]}},\"required\":[\"city\",\"unit\"]}}},"
    "{\"type\":\"function\",\"function\":{\"name\":\"get_time\",\"parameters\":{\"type\":\"object\","
    "\"properties\":{\"tz\":{\"type\":\"integer\"}},\"required\":[\"tz\"]}}}]";

/* 1 when the grammar takes text whole (and then allows end of generation). */
static int grammar_takes(const colibri_tokenizer *t, const colibri_grammar *g, const char *text)
{
    int32_t *ids = NULL;
    size_t n = 0;
    struct colibri_err err = { 0 };
    if (colibri_tokenizer_encode(t, text, strlen(text), 0, &ids, &n, NULL, &err)) return -1;
    struct grammar_state *st = NULL;
    int ok = !sample_grammar_state_new(g->g, &st, &err);
    for (size_t i = 0; ok && i < n; i++) ok = !sample_grammar_accept(st, ids[i]);
    if (ok) ok = sample_grammar_allows(st, colibri_tokenizer_eos(t));
    sample_grammar_state_free(st);
    free(ids);
    return ok;
}

/* The reply text of calls (name, args) in syntax s. */
static void calls_text(enum oai_tool_syntax s, const char *const *names, const char *const *args, int n,
                       const char *prefix, struct strbuf *b)
{
    b->n = 0;
    base_sb_puts(b, prefix + (prefix[0] == '@'));
    static const char *const OPEN[] = { "<｜tool▁calls▁begin｜>", "<｜tool▁calls▁begin｜>",
                                        "<|tool_calls_section_begin|>", "", "", "" };
    static const char *const CLOSE[] = { "<｜tool▁calls▁end｜>", "<｜tool▁calls▁end｜>", "<|tool_calls_section_end|>",
                                         "", "", "" };
    base_sb_puts(b, OPEN[s]);
    for (int i = 0; i < n; i++) {
        if (s == OAI_TOOLS_DEEPSEEK_V3)
            base_sb_appendf(b, "%s<｜tool▁call▁begin｜>function<｜tool▁sep｜>%s\n```json\n%s\n```<｜tool▁call▁end｜>",
                      i ? "\n" : "", names[i], args[i]);
        else if (s == OAI_TOOLS_DEEPSEEK_V31)
            base_sb_appendf(b, "<｜tool▁call▁begin｜>%s<｜tool▁sep｜>%s<｜tool▁call▁end｜>", names[i], args[i]);
        else if (s == OAI_TOOLS_KIMI)
            base_sb_appendf(b, "<|tool_call_begin|>functions.%s:%d<|tool_call_argument_begin|>%s<|tool_call_end|>", names[i],
                      i, args[i]);
        else if (s == OAI_TOOLS_HERMES)
            base_sb_appendf(b, "%s<tool_call>\n{\"name\": \"%s\", \"arguments\": %s}\n</tool_call>", i ? "\n" : "", names[i],
                      args[i]);
        else {      /* GLM / Qwen3-Coder tags as their templates write them: strings raw, other values as JSON */
            int glm = s != OAI_TOOLS_QWEN3_CODER;
            const char *nl = prefix[0] == '@' ? "" : "\n";    /* GLM-4.7's form without the newlines */
            if (glm) base_sb_appendf(b, "%s<tool_call>%s%s", i ? nl : "", names[i], nl);
            else base_sb_appendf(b, "%s<tool_call>\n<function=%s>\n", i ? "\n" : "", names[i]);
            cJSON *a = cJSON_Parse(args[i]), *v;
            cJSON_ArrayForEach(v, a) {
                char *js = cJSON_IsString(v) ? NULL : cJSON_PrintUnformatted(v);
                const char *val = js ? js : v->valuestring;
                if (glm) base_sb_appendf(b, "<arg_key>%s</arg_key>%s<arg_value>%s</arg_value>%s", v->string, nl, val, nl);
                else base_sb_appendf(b, "<parameter=%s>\n%s\n</parameter>\n", v->string, val);
                free(js);
            }
            cJSON_Delete(a);
            base_sb_puts(b, glm ? "</tool_call>" : "</function>\n</tool_call>");
        }
    }
    base_sb_puts(b, CLOSE[s]);
}

static char *read_text(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    struct strbuf b = { 0 };
    char buf[4096];
    size_t k;
    while ((k = fread(buf, 1, sizeof buf, f)) > 0) base_sb_append(&b, buf, k);
    fclose(f);
    return b.s;
}

static void test_tool_grammar_each_syntax(void)
{
    static const struct { const char *tmpl; enum oai_tool_syntax s; } CASES[] = {
        { "tests/tok/chat/deepseek_v3.jinja", OAI_TOOLS_DEEPSEEK_V3 },
        { "tests/tok/chat/deepseek_v3_1.jinja", OAI_TOOLS_DEEPSEEK_V31 },
        { "tests/tok/chat/kimi_k2.jinja", OAI_TOOLS_KIMI },
        { "tests/tok/chat/kimi_k2_thinking_moonshotai.jinja", OAI_TOOLS_KIMI },
        { "tests/tok/chat/qwen3.jinja", OAI_TOOLS_HERMES },
        { "tests/tok/chat/glm_4_5.jinja", OAI_TOOLS_GLM },
        { "tests/tok/chat/glm_4_6.jinja", OAI_TOOLS_GLM },
        { "tests/tok/chat/glm_4_7_flash.jinja", OAI_TOOLS_GLM },
        { "tests/tok/chat/qwen3_coder.jinja", OAI_TOOLS_QWEN3_CODER },
        { NULL, OAI_TOOLS_DEEPSEEK_V3 },      /* a template that renders no calls: DeepSeek-V3's */
    };
    static const char *const NAMES[] = { "get_weather", "get_time" };
    static const char *const ARGS[] = { "{\"city\": \"Paris\", \"unit\": \"c\"}", "{\"tz\": -5}" };
    static const char *const W_ONLY[] = { "get_weather" }, *const T_ONLY[] = { "get_time" };
    static const char *const BAD_ARGS[] = { "{\"city\": 3, \"unit\": \"c\"}", "{\"city\": \"Paris\"}",
                                            "{\"city\": \"Paris\", \"unit\": \"k\"}" };
    /* in tags, a number is a valid string: the order and a tz that is no integer are wrong instead */
    static const char *const BAD_XML_ARGS[] = { "{\"unit\": \"c\", \"city\": \"Paris\"}", "{\"city\": \"Paris\"}",
                                                "{\"city\": \"Paris\", \"unit\": \"k\"}" };
    cJSON *tools = cJSON_Parse(TOOLS_JSON);
    struct strbuf b = { 0 };
    for (size_t c = 0; c < sizeof CASES / sizeof *CASES; c++) {
        colibri_tokenizer *t = NULL;
        struct colibri_err err = { 0 };
        CHECK(!colibri_tokenizer_load("tests/tok/small", &t, &err), "%s", err.msg);
        if (!t) continue;
        const char *tname = CASES[c].tmpl ? CASES[c].tmpl : "no calls";
        char *src = CASES[c].tmpl ? read_text(CASES[c].tmpl)
                                  : strdup("{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}");
        CHECK(src && !colibri_tokenizer_set_chat_template(t, src, strlen(src), tname, &err), "%s: %s", tname, err.msg);
        free(src);
        struct oai_model m = { .id = "tiny", .tok = t, .n_vocab = 3003, .n_ctx = 64 };
        struct oai_error e = { 0 };
        colibri_grammar *par = NULL, *one = NULL, *named = NULL, *think = NULL;
        CHECK(!serve_oai_tool_grammar(&m, tools, NULL, 1, 0, &par, &e) &&
              !serve_oai_tool_grammar(&m, tools, NULL, 0, 0, &one, &e) &&
              !serve_oai_tool_grammar(&m, tools, "get_time", 0, 0, &named, &e) &&
              !serve_oai_tool_grammar(&m, tools, NULL, 0, 1, &think, &e), "%s: %s", tname, e.msg);
        if (par && one && named && think) {
            enum oai_tool_syntax s = CASES[c].s;
            calls_text(s, NAMES, ARGS, 2, "", &b);
            CHECK(grammar_takes(t, par, b.s) == 1, "%s: two calls refused: %s", tname, b.s);
            CHECK(grammar_takes(t, one, b.s) == 0, "%s: two calls taken by the one-call grammar", tname);
            cJSON *calls = NULL;
            char *content = NULL;
            CHECK(oai_parse_tool_calls(b.s, TOOLS_JSON, &calls, &content) == 2, "%s: does not parse back: %s", tname, b.s);
            for (int i = 0; i < 2 && calls; i++) {
                const cJSON *fn = cJSON_GetObjectItem(cJSON_GetArrayItem(calls, i), "function");
                CHECK(!strcmp(cJSON_GetObjectItem(fn, "name")->valuestring, NAMES[i]), "%s: call %d", tname, i);
                cJSON *got = cJSON_Parse(cJSON_GetObjectItem(fn, "arguments")->valuestring), *want = cJSON_Parse(ARGS[i]);
                CHECK(cJSON_Compare(got, want, 1), "%s: call %d arguments %s", tname, i,
                      cJSON_GetObjectItem(fn, "arguments")->valuestring);
                cJSON_Delete(got);
                cJSON_Delete(want);
            }
            cJSON_Delete(calls);
            free(content);
            calls_text(s, W_ONLY, ARGS, 1, "", &b);
            CHECK(grammar_takes(t, one, b.s) == 1, "%s: one call refused: %s", tname, b.s);
            CHECK(grammar_takes(t, named, b.s) == 0, "%s: get_weather taken when get_time is named", tname);
            CHECK(grammar_takes(t, one, "Sure.") == 0, "%s: text instead of a call taken", tname);
            calls_text(s, T_ONLY, ARGS + 1, 1, "", &b);
            CHECK(grammar_takes(t, named, b.s) == 1, "%s: the named call refused: %s", tname, b.s);
            int xml = s >= OAI_TOOLS_GLM;
            for (int k = 0; k < 3; k++) {
                calls_text(s, W_ONLY, (xml ? BAD_XML_ARGS : BAD_ARGS) + k, 1, "", &b);
                CHECK(grammar_takes(t, par, b.s) == 0, "%s: invalid arguments taken: %s", tname, b.s);
            }
            if (s == OAI_TOOLS_GLM) {   /* and GLM-4.7's form, without newlines */
                calls_text(s, NAMES, ARGS, 2, "@", &b);
                CHECK(grammar_takes(t, par, b.s) == 1, "%s: calls without newlines refused: %s", tname, b.s);
            }
            if (xml) {  /* raw text: '<' and other closing tags pass, the ones the parser ends a call or value at do not */
                static const char *const HTML[] = { "{\"city\": \"<b>P</b> <</x\", \"unit\": \"f\"}" };
                calls_text(s, W_ONLY, HTML, 1, "", &b);
                CHECK(grammar_takes(t, par, b.s) == 1, "%s: a string with tags refused: %s", tname, b.s);
                CHECK(oai_parse_tool_calls(b.s, TOOLS_JSON, &calls, &content) == 1 &&
                      strstr(cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetArrayItem(calls, 0), "function"),
                                                 "arguments")->valuestring, "<b>P</b> <</x"), "%s: %s", tname, b.s);
                cJSON_Delete(calls);
                free(content);
                static const char *const CUT[] = { "{\"city\": \"a</tool_call>b\", \"unit\": \"f\"}",
                                                   "{\"city\": \"a</arg_value>b\", \"unit\": \"f\"}",
                                                   "{\"city\": \"a</parameter>b\", \"unit\": \"f\"}" };
                for (int k = 0; k < 3; k++) {
                    calls_text(s, W_ONLY, CUT + k, 1, "", &b);
                    CHECK(grammar_takes(t, par, b.s) == (k == (s == OAI_TOOLS_QWEN3_CODER ? 1 : 2)),
                          "%s: closing tag in a string: %s", tname, b.s);
                }
            }
            calls_text(s, W_ONLY, ARGS, 1, "I should look it up.</think>\n\n", &b);
            CHECK(grammar_takes(t, think, b.s) == 1, "%s: reasoning then a call refused: %s", tname, b.s);
        }
        colibri_grammar_free(par);
        colibri_grammar_free(one);
        colibri_grammar_free(named);
        colibri_grammar_free(think);
        colibri_tokenizer_free(t);
    }
    /* templates whose call syntax colibri does not know are refused by name; and in
     * tags, a key the syntax cannot carry or a required key that is no property */
    static const char *const REFUSED[][3] = {
        { "{% for m in messages %}{% if m.tool_calls %}{% for tc in m.tool_calls %}<tool_call>{{ tc.function.name }} "
          "<arg_key>q</arg_key></tool_call>{% endfor %}{% endif %}{% endfor %}", TOOLS_JSON, "GLM-like" },
        { "{% for m in messages %}{% if m.tool_calls %}{% for tc in m.tool_calls %}<function={{ tc.function.name }}>"
          "</function>{% endfor %}{% endif %}{% endfor %}", TOOLS_JSON, "Qwen3-Coder-like" },
        { "tests/tok/chat/glm_4_6.jinja", "[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":"
          "{\"type\":\"object\",\"properties\":{\"a>b\":{\"type\":\"string\"}}}}}]", "'a>b'" },
        { "tests/tok/chat/qwen3_coder.jinja", "[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":"
          "{\"type\":\"object\",\"properties\":{},\"required\":[\"x\"]}}}]", "'x'" },
    };
    for (int r = 0; r < 4; r++) {
        colibri_tokenizer *t = NULL;
        struct colibri_err err = { 0 };
        char *src = r >= 2 ? read_text(REFUSED[r][0]) : strdup(REFUSED[r][0]);
        cJSON *tl = cJSON_Parse(REFUSED[r][1]);
        if (colibri_tokenizer_load("tests/tok/small", &t, &err) || !src ||
            colibri_tokenizer_set_chat_template(t, src, strlen(src), "refused", &err)) {
            CHECK(0, "%d: %s", r, err.msg);
        } else {
            struct oai_model m = { .id = "tiny", .tok = t, .n_vocab = 3003, .n_ctx = 64 };
            struct oai_error e = { 0 };
            colibri_grammar *g = NULL;
            CHECK(serve_oai_tool_grammar(&m, tl, NULL, 1, 0, &g, &e) && e.status == 400 &&
                  strstr(e.msg, REFUSED[r][2]), "%d: %d %s", r, e.status, e.msg);
            colibri_grammar_free(g);
        }
        cJSON_Delete(tl);
        free(src);
        colibri_tokenizer_free(t);
    }
    base_sb_free(&b);
    cJSON_Delete(tools);
}

/* Templates that iterate tool-call arguments as a mapping (GLM-4.6,
 * GLM-4.7-Flash, Qwen3-Coder) get OpenAI's string arguments parsed: the
 * server's prompt for a conversation with string arguments is byte for byte
 * what transformers renders for the same conversation with dict arguments
 * (the goldens' dict_args cases; these templates use no bos/eos token). */
static void test_tool_args_as_objects(void)
{
    static const char *const TEMPLATES[] = { "glm_4_6", "glm_4_7_flash", "qwen3_coder" };
    static const char *const CASES[] = { "tool_round", "tool_pending" };
    for (int t = 0; t < 3; t++) {
        char path[256];
        snprintf(path, sizeof path, "tests/tok/chat/%s.jinja", TEMPLATES[t]);
        char *src = read_text(path);
        snprintf(path, sizeof path, "tests/tok/chat/%s.json", TEMPLATES[t]);
        char *gold_text = read_text(path);
        cJSON *gold = gold_text ? cJSON_Parse(gold_text) : NULL;
        colibri_tokenizer *tk = NULL;
        struct colibri_err err = { 0 };
        if (!src || !gold || colibri_tokenizer_load("tests/tok/small", &tk, &err) ||
            colibri_tokenizer_set_chat_template(tk, src, strlen(src), path, &err)) {
            CHECK(0, "%s: %s", TEMPLATES[t], err.msg);
            goto next;
        }
        struct oai_model m = { .id = "tiny", .tok = tk, .n_vocab = 3003, .n_ctx = 4096 };
        for (int c = 0; c < 2; c++) {
            char str_name[64], dict_name[64];
            snprintf(str_name, sizeof str_name, "%s_str_args", CASES[c]);
            snprintf(dict_name, sizeof dict_name, "%s_dict_args", CASES[c]);
            const cJSON *str_ctx = NULL, *want = NULL, *k;
            cJSON_ArrayForEach(k, cJSON_GetObjectItem(gold, "cases")) {
                const char *nm = cJSON_GetObjectItem(k, "name")->valuestring;
                if (!strcmp(nm, str_name)) str_ctx = cJSON_GetObjectItem(k, "context");
                if (!strcmp(nm, dict_name)) want = cJSON_GetObjectItem(k, "expected");
            }
            if (!str_ctx || !cJSON_IsString(want)) { CHECK(0, "%s: no %s / %s golden", TEMPLATES[t], str_name, dict_name); continue; }
            CHECK(cJSON_IsTrue(cJSON_GetObjectItem(str_ctx, "add_generation_prompt")), "%s: golden without a generation prompt", str_name);
            cJSON *body = cJSON_CreateObject();
            cJSON_AddItemToObject(body, "messages", cJSON_Duplicate(cJSON_GetObjectItem(str_ctx, "messages"), 1));
            cJSON_AddItemToObject(body, "tools", cJSON_Duplicate(cJSON_GetObjectItem(str_ctx, "tools"), 1));
            cJSON_AddNumberToObject(body, "max_tokens", 1);
            char *bs = cJSON_PrintUnformatted(body);
            struct oai_error e = { 0 };
            struct job *j = oai_parse(&m, JOB_CHAT, bs, strlen(bs), &e);
            CHECK(j, "%s/%s: %s", TEMPLATES[t], str_name, e.msg);
            char *txt = NULL;
            size_t n = 0;
            if (j && !colibri_tokenizer_decode(tk, j->prompt, (size_t)j->n_prompt, 0, &txt, &n, &err))
                CHECK(n == strlen(want->valuestring) && !memcmp(txt, want->valuestring, n),
                      "%s/%s: the prompt differs from transformers' dict-arguments rendering:\n%.*s\n---\n%s",
                      TEMPLATES[t], str_name, (int)n, txt, want->valuestring);
            free(txt);
            job_release(j);
            /* an arguments string that is not JSON: 400 naming the message and the call */
            cJSON *msgs = cJSON_GetObjectItem(body, "messages"), *mm;
            int bad_i = 0;
            cJSON_ArrayForEach(mm, msgs) {
                cJSON *calls = cJSON_GetObjectItem(mm, "tool_calls");
                if (calls) {
                    cJSON *fn = cJSON_GetObjectItem(cJSON_GetArrayItem(calls, cJSON_GetArraySize(calls) - 1), "function");
                    cJSON_ReplaceItemInObject(fn, "arguments", cJSON_CreateString("{\"city\": Par"));
                    break;
                }
                bad_i++;
            }
            free(bs);
            bs = cJSON_PrintUnformatted(body);
            j = oai_parse(&m, JOB_CHAT, bs, strlen(bs), &e);
            char where[96];
            snprintf(where, sizeof where, "'messages[%d].tool_calls[%d].function.arguments' is not valid JSON", bad_i,
                     c == 0 ? 1 : 0);
            CHECK(!j && e.status == 400 && strstr(e.msg, where), "%s/%s bad arguments: %d %s", TEMPLATES[t], str_name,
                  e.status, e.msg);
            job_release(j);
            free(bs);
            cJSON_Delete(body);
        }
    next:
        colibri_tokenizer_free(tk);
        cJSON_Delete(gold);
        free(gold_text);
        free(src);
    }
}

/* GLM's and Qwen3-Coder's calls parse back into the calls they were
 * rendered from: the assistant's calls in transformers' renderings (the
 * goldens' dict_args cases) give the same names and arguments, typed by the
 * request's tools (a string stays a string, top_k an integer). */
static void test_xml_calls_parse_back(void)
{
    static const struct { const char *name, *start, *stop; } T[] = {
        { "glm_4_5", "<tool_call>", "<|observation|>" }, { "glm_4_6", "<tool_call>", "<|observation|>" },
        { "glm_4_7_flash", "<tool_call>", "<|observation|>" },
        { "qwen3_coder", "<tool_call>\n<function=", "<|im_end|>" },
    };
    static const char *const CASES[] = { "tool_round_dict_args", "tool_pending_dict_args" };
    for (size_t t = 0; t < sizeof T / sizeof *T; t++) {
        char path[128];
        snprintf(path, sizeof path, "tests/tok/chat/%s.json", T[t].name);
        char *text = read_text(path);
        cJSON *gold = text ? cJSON_Parse(text) : NULL, *k;
        int seen = 0;
        cJSON_ArrayForEach(k, cJSON_GetObjectItem(gold, "cases")) {
            const char *cname = cJSON_GetObjectItem(k, "name")->valuestring;
            if (strcmp(cname, CASES[0]) && strcmp(cname, CASES[1])) continue;
            const cJSON *ctx = cJSON_GetObjectItem(k, "context"), *m, *want = NULL;
            cJSON_ArrayForEach(m, cJSON_GetObjectItem(ctx, "messages"))
                if (cJSON_GetObjectItem(m, "tool_calls")) want = cJSON_GetObjectItem(m, "tool_calls");
            const char *exp = cJSON_GetObjectItem(k, "expected")->valuestring;
            /* the assistant's calls: after the system prompt's own example of the format */
            const char *call = strstr(exp, "<|user|>") ? strstr(strstr(exp, "<|user|>"), T[t].start)
                                                       : strstr(strstr(exp, "<|im_start|>assistant"), T[t].start);
            const char *stop = call ? strstr(call, T[t].stop) : NULL;
            if (!want || !call || !stop) { CHECK(0, "%s/%s: no calls in the golden", T[t].name, cname); continue; }
            char *seg = strndup(call, (size_t)(stop - call));
            char *tools = cJSON_PrintUnformatted(cJSON_GetObjectItem(ctx, "tools"));
            cJSON *calls = NULL;
            char *content = NULL;
            int n = oai_parse_tool_calls(seg, tools, &calls, &content);
            CHECK(n == cJSON_GetArraySize(want), "%s/%s: %d calls from %s", T[t].name, cname, n, seg);
            for (int i = 0; i < n && i < cJSON_GetArraySize(want); i++) {
                const cJSON *gf = cJSON_GetObjectItem(cJSON_GetArrayItem(calls, i), "function");
                const cJSON *wf = cJSON_GetObjectItem(cJSON_GetArrayItem(want, i), "function");
                cJSON *args = cJSON_Parse(cJSON_GetObjectItem(gf, "arguments")->valuestring);
                CHECK(!strcmp(cJSON_GetObjectItem(gf, "name")->valuestring, cJSON_GetObjectItem(wf, "name")->valuestring) &&
                      cJSON_Compare(args, cJSON_GetObjectItem(wf, "arguments"), 1),
                      "%s/%s call %d: %s %s", T[t].name, cname, i, cJSON_GetObjectItem(gf, "name")->valuestring,
                      cJSON_GetObjectItem(gf, "arguments")->valuestring);
                cJSON_Delete(args);
            }
            /* streamed views of it only ever show whole calls, the same ones */
            struct oai_tool_view v;
            for (size_t cut = 1; cut <= strlen(seg); cut++) {
                int fin = cut == strlen(seg);
                if (serve_oai_tool_view(seg, cut, fin, tools, &v)) { CHECK(0, "view"); break; }
                for (int i = 0; i < v.n && i < n; i++) {
                    const cJSON *gf = cJSON_GetObjectItem(cJSON_GetArrayItem(calls, i), "function");
                    CHECK(!strcmp(v.call[i].args, cJSON_GetObjectItem(gf, "arguments")->valuestring),
                          "%s/%s: view at %zu: %s", T[t].name, cname, cut, v.call[i].args);
                }
                CHECK(!fin || v.n == n, "%s/%s: final view has %d calls", T[t].name, cname, v.n);
                serve_oai_tool_view_free(&v);
            }
            /* without the schema a value that looks like JSON takes that type; with it, a string stays one */
            if (!strcmp(T[t].name, "glm_4_6") && !strcmp(cname, CASES[1])) {
                const char *glm = "<tool_call>search\n<arg_key>query</arg_key>\n<arg_value>42</arg_value>\n</tool_call>";
                cJSON *c2 = NULL;
                char *ct2 = NULL;
                CHECK(oai_parse_tool_calls(glm, tools, &c2, &ct2) == 1 &&
                      !strcmp(cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetArrayItem(c2, 0), "function"), "arguments")->valuestring,
                              "{\"query\":\"42\"}"), "string typed by the schema");
                cJSON_Delete(c2);
                free(ct2);
                CHECK(oai_parse_tool_calls(glm, NULL, &c2, &ct2) == 1 &&
                      !strcmp(cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetArrayItem(c2, 0), "function"), "arguments")->valuestring,
                              "{\"query\":42}"), "no schema: JSON value");
                cJSON_Delete(c2);
                free(ct2);
                static const char *const BAD[] = { "<tool_call>search<arg_key>q</arg_key>x</tool_call>",
                                                   "<tool_call>search<arg_key>q</arg_key><arg_value>1</tool_call>",
                                                   "<tool_call>\n<function=search>\n<parameter=q>\n1\n</parameter>\n</tool_call>",
                                                   "<tool_call>se arch<arg_key>q</arg_key><arg_value>1</arg_value>junk</tool_call>" };
                for (int b = 0; b < 4; b++) {
                    CHECK(oai_parse_tool_calls(BAD[b], tools, &c2, &ct2) == 0, "malformed call parsed: %s", BAD[b]);
                    cJSON_Delete(c2);
                    free(ct2);
                }
            }
            seen++;
            cJSON_Delete(calls);
            free(content);
            free(tools);
            free(seg);
        }
        CHECK(seen == 2, "%s: %d cases", T[t].name, seen);
        cJSON_Delete(gold);
        free(text);
    }
}

/* Kimi's calls keep the model's own id (functions.NAME:IDX), whole and
 * streamed, so that a conversation sent back renders the call as the model
 * wrote it under Moonshot's Kimi-K2-Thinking template, which writes ids. */
static void test_kimi_call_ids_round_trip(void)
{
    const char *reply = "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0"
                        "<|tool_call_argument_begin|>{\"city\": \"Paris\"}<|tool_call_end|><|tool_calls_section_end|>";
    cJSON *calls = NULL;
    char *content = NULL;
    CHECK(oai_parse_tool_calls(reply, NULL, &calls, &content) == 1, "the Kimi call does not parse");
    const cJSON *id = cJSON_GetObjectItem(cJSON_GetArrayItem(calls, 0), "id");
    CHECK(cJSON_IsString(id) && !strcmp(id->valuestring, "functions.get_weather:0"), "id %s",
          cJSON_IsString(id) ? id->valuestring : "?");
    struct oai_tool_view v;
    for (size_t cut = 60; cut <= strlen(reply); cut += 20) {   /* partial views name the same id */
        CHECK(!serve_oai_tool_view(reply, cut, cut == strlen(reply), NULL, &v), "view");
        CHECK(v.n == 0 || (v.call[0].id && !strcmp(v.call[0].id, "functions.get_weather:0")), "view id at %zu", cut);
        serve_oai_tool_view_free(&v);
    }
    char *src = read_text("tests/tok/chat/kimi_k2_thinking_moonshotai.jinja");
    colibri_tokenizer *tk = NULL;
    struct colibri_err err = { 0 };
    if (!src || !calls || colibri_tokenizer_load("tests/tok/small", &tk, &err) ||
        colibri_tokenizer_set_chat_template(tk, src, strlen(src), "kimi_k2_thinking_moonshotai", &err)) {
        CHECK(0, "setup: %s", err.msg);
    } else {
        cJSON *body = cJSON_CreateObject(), *msgs = cJSON_AddArrayToObject(body, "messages"), *m;
        cJSON_AddItemToArray(msgs, m = cJSON_CreateObject());
        cJSON_AddStringToObject(m, "role", "user");
        cJSON_AddStringToObject(m, "content", "Weather in Paris?");
        cJSON_AddItemToArray(msgs, m = cJSON_CreateObject());
        cJSON_AddStringToObject(m, "role", "assistant");
        cJSON_AddStringToObject(m, "content", "");
        cJSON_AddItemToObject(m, "tool_calls", cJSON_Duplicate(calls, 1));
        cJSON_AddItemToArray(msgs, m = cJSON_CreateObject());
        cJSON_AddStringToObject(m, "role", "tool");
        cJSON_AddStringToObject(m, "tool_call_id", id->valuestring);
        cJSON_AddStringToObject(m, "content", "18C");
        char *bs = cJSON_PrintUnformatted(body);
        struct oai_model mo = { .id = "tiny", .tok = tk, .n_vocab = 3003, .n_ctx = 4096 };
        struct oai_error e = { 0 };
        struct job *j = oai_parse(&mo, JOB_CHAT, bs, strlen(bs), &e);
        char *txt = NULL;
        size_t n = 0;
        CHECK(j && !colibri_tokenizer_decode(tk, j->prompt, (size_t)j->n_prompt, 0, &txt, &n, &err), "%s", e.msg);
        CHECK(txt && strstr(txt, "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0"
                                 "<|tool_call_argument_begin|>{\"city\": \"Paris\"}<|tool_call_end|>") &&
              strstr(txt, "## Return of functions.get_weather:0"), "rendered history: %s", txt ? txt : "");
        free(txt);
        job_release(j);
        free(bs);
        cJSON_Delete(body);
    }
    colibri_tokenizer_free(tk);
    free(src);
    cJSON_Delete(calls);
    free(content);
}

/* The golden case `name` of tests/tok/chat/TEMPLATE.json: its context (or
 * NULL) and expected text (NULL when transformers refused it). */
static const cJSON *golden_case(const cJSON *gold, const char *name, const char **want)
{
    const cJSON *k;
    *want = NULL;
    cJSON_ArrayForEach(k, cJSON_GetObjectItem(gold, "cases"))
        if (!strcmp(cJSON_GetObjectItem(k, "name")->valuestring, name)) {
            const cJSON *x = cJSON_GetObjectItem(k, "expected");
            *want = cJSON_IsString(x) ? x->valuestring : NULL;
            return cJSON_GetObjectItem(k, "context");
        }
    return NULL;
}

/* The server's prompt for a chat request body under template `tmpl`, as text
 * (NULL on a refusal, with *e filled). */
static char *serve_prompt(colibri_tokenizer *tk, const char *body, struct oai_error *e)
{
    struct oai_model m = { .id = "tiny", .tok = tk, .n_vocab = 3003, .n_ctx = 4096 };
    struct job *j = oai_parse(&m, JOB_CHAT, body, strlen(body), e);
    char *txt = NULL;
    size_t n = 0;
    struct colibri_err err = { 0 };
    if (j && colibri_tokenizer_decode(tk, j->prompt, (size_t)j->n_prompt, 0, &txt, &n, &err)) txt = NULL;
    job_release(j);
    return txt;
}

/* chat_template_kwargs reach the template as apply_chat_template's **kwargs
 * do (over the special tokens too), numbers as the client wrote them; so do
 * tool-call arguments parsed for a template that needs a mapping: the
 * server's prompts equal transformers' renderings (probe_numbers with
 * scale=2.0 and dict arguments, DeepSeek-V3.1 with thinking=True). */
static void test_chat_template_kwargs(void)
{
    static const struct { const char *tmpl, *str_case, *dict_case, *kwargs; } C[] = {
        { "probe_numbers", "tool_args_str_scale=2.0", "tool_args_dict_scale=2.0", "{\"scale\": 2.0}" },
        { "deepseek_v3_1", "user_only_thinking=True", "user_only_thinking=True",
          "{\"thinking\": true, \"bos_token\": \"<｜begin▁of▁sentence｜>\"}" },
    };
    for (size_t c = 0; c < sizeof C / sizeof *C; c++) {
        char path[256];
        snprintf(path, sizeof path, "tests/tok/chat/%s.jinja", C[c].tmpl);
        char *src = read_text(path);
        snprintf(path, sizeof path, "tests/tok/chat/%s.json", C[c].tmpl);
        char *gold_text = read_text(path);
        cJSON *gold = gold_text ? cJSON_Parse(gold_text) : NULL;
        colibri_tokenizer *tk = NULL;
        struct colibri_err err = { 0 };
        const char *want = NULL, *unused;
        const cJSON *ctx = gold ? golden_case(gold, C[c].str_case, &unused) : NULL;
        if (gold) golden_case(gold, C[c].dict_case, &want);
        if (!src || !ctx || !want || colibri_tokenizer_load("tests/tok/small", &tk, &err) ||
            colibri_tokenizer_set_chat_template(tk, src, strlen(src), path, &err)) {
            CHECK(0, "%s: %s", C[c].tmpl, err.msg);
        } else {
            char *msgs = cJSON_PrintUnformatted(cJSON_GetObjectItem(ctx, "messages"));
            const cJSON *tools = cJSON_GetObjectItem(ctx, "tools");
            char *tj = cJSON_IsArray(tools) ? cJSON_PrintUnformatted(tools) : NULL;
            char body[16384];
            snprintf(body, sizeof body, "{\"messages\": %s,%s%s%s \"max_tokens\": 1, \"chat_template_kwargs\": %s}",
                     msgs, tj ? " \"tools\": " : "", tj ? tj : "", tj ? "," : "", C[c].kwargs);
            struct oai_error e = { 0 };
            char *got = serve_prompt(tk, body, &e);
            CHECK(got && !strcmp(got, want), "%s/%s: %s\n--- got ---\n%s\n--- expected ---\n%s", C[c].tmpl,
                  C[c].str_case, got ? "differs" : e.msg, got ? got : "", want);
            free(got);
            free(msgs);
            free(tj);
        }
        colibri_tokenizer_free(tk);
        cJSON_Delete(gold);
        free(gold_text);
        free(src);
    }
    /* refused by name: not an object, a variable the server sets itself */
    static const struct { const char *kw, *needle; } R[] = {
        { "[1]", "'chat_template_kwargs' must be an object" },
        { "{\"messages\": []}", "'chat_template_kwargs.messages' is set by the server" },
        { "{\"add_generation_prompt\": false}", "'chat_template_kwargs.add_generation_prompt'" },
        { "{\"documents\": [1]}", "documents must be a list of objects" },
    };
    colibri_tokenizer *tk = NULL;
    struct colibri_err err = { 0 };
    char *src = read_text("tests/tok/chat/probe_documents.jinja");
    if (!src || colibri_tokenizer_load("tests/tok/small", &tk, &err) ||
        colibri_tokenizer_set_chat_template(tk, src, strlen(src), "probe_documents", &err))
        CHECK(0, "probe_documents: %s", err.msg);
    for (size_t r = 0; tk && r < sizeof R / sizeof *R; r++) {
        char body[256];
        snprintf(body, sizeof body, "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"max_tokens\": 1, "
                 "\"chat_template_kwargs\": %s}", R[r].kw);
        struct oai_error e = { 0 };
        char *got = serve_prompt(tk, body, &e);
        CHECK(!got && e.status == 400 && strstr(e.msg, R[r].needle), "%s: %d %s", R[r].kw, e.status, e.msg);
        free(got);
    }
    /* and documents given this way reach the template */
    char body[256];
    snprintf(body, sizeof body, "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"max_tokens\": 1, "
             "\"chat_template_kwargs\": {\"documents\": [{\"title\": \"T\", \"text\": \"body 2.0\"}]}}");
    struct oai_error e = { 0 };
    char *got = tk ? serve_prompt(tk, body, &e) : NULL;
    CHECK(got && strstr(got, "<doc 0 title=\"T\">body 2.0</doc>"), "documents: %s", got ? got : e.msg);
    free(got);
    colibri_tokenizer_free(tk);
    free(src);
}

int main(void)
{
    RUN_TEST(test_metrics_text);
    RUN_TEST(test_tool_view_prefixes);
    RUN_TEST(test_tool_grammar_each_syntax);
    RUN_TEST(test_tool_args_as_objects);
    RUN_TEST(test_kimi_call_ids_round_trip);
    RUN_TEST(test_xml_calls_parse_back);
    struct colibri_err err = { 0 };
    if (colibri_tokenizer_load("tests/tok/small", &tok, &err)) {
        CHECK(0, "tests/tok/small: %s", err.msg);
    } else {
        RUN_TEST(test_parse_errors);
    RUN_TEST(test_parse_duplicate_tools);
    RUN_TEST(test_parse_number_out_of_range);
        RUN_TEST(test_parse_ok);
        RUN_TEST(test_parse_whole_body);
        RUN_TEST(test_parse_empty_prompt_no_add_bos);
        RUN_TEST(test_parse_fuzz);
        RUN_TEST(test_chat_template_kwargs);
        colibri_tokenizer_free(tok);
    }
    return CHECK_SUMMARY();
}
