/* test_serve_v4: DeepSeek-V4's text through the server.
 * tests/tok/chat/deepseek_v4.json (tools/make_v4_text_golden.py) holds
 * requests with DeepSeek's encoder's rendering, and assistant turns as the
 * model writes them with what DeepSeek's own parser
 * (parse_message_from_completion_text) reads from them. Checked: a chat
 * request (tools, chat_template_kwargs) becomes the encoder's prompt; each
 * reply, cut into events, gives the parser's reasoning, content and tool
 * calls through the non-streamed response and, reassembled, through the
 * stream; malformed DSML stays content; tool_choice "required" / named is a
 * grammar in DSML that takes the encoder's calls and refuses others. The
 * model directory is the small test tokenizer with a config.json naming
 * deepseek_v4 (the format needs no V4 token). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include <unistd.h>

#include "base/strbuf.h"
#include "base/util.h"
#include "check.h"
#include "sample/grammar.h"
#include "serve/job.h"
#include "serve/oai.h"
#include "tok/jinja.h"
#include "tok/tok_chat_v4.h"

static const struct oai_model MODEL = { .id = "v4", .n_vocab = 1000, .n_ctx = 4096, .n_ctx_model = 4096,
                                        .reasoning_deepseek = 1, .n_slots = 1 };

/* A finished chat job whose reply is text, in events of 1 to 7 bytes that
 * never cut a UTF-8 character (as the detokenizer gives them). */
static struct job *reply_job(const char *text, int think_open)
{
    struct job *j = job_new(JOB_CHAT);
    j->p.parse_tools = 1;
    j->p.think_open = think_open;
    j->p.stream = 1;
    snprintf(j->id, sizeof j->id, "chatcmpl-test");
    size_t n = strlen(text), at = 0;
    for (int k = 0; at < n; k++) {
        size_t len = 1 + (size_t)(k * 5 % 7);
        if (at + len > n) len = n - at;
        while (at + len < n && ((unsigned char)text[at + len] & 0xC0) == 0x80) len++;
        struct job_event ev = { .id = k, .text = strndup(text + at, len), .len = len };
        job_push(j, &ev);
        at += len;
    }
    return j;
}

/* What a client reassembles from the SSE chunks in s. */
struct got { struct strbuf reasoning, content; char *name[4], *args[4]; int n_calls; char finish[32]; };

static void reassemble(const char *s, struct got *g)
{
    memset(g, 0, sizeof *g);
    base_sb_puts(&g->reasoning, "");
    base_sb_puts(&g->content, "");
    for (const char *p = s; (p = strstr(p, "data: ")); ) {
        p += 6;
        const char *e = strstr(p, "\n\n");
        if (!e) break;
        cJSON *o = cJSON_ParseWithLength(p, (size_t)(e - p));
        p = e;
        const cJSON *c = cJSON_GetArrayItem(cJSON_GetObjectItem(o, "choices"), 0);
        const cJSON *d = cJSON_GetObjectItem(c, "delta"), *v, *fr = cJSON_GetObjectItem(c, "finish_reason");
        if (cJSON_IsString(fr)) snprintf(g->finish, sizeof g->finish, "%s", fr->valuestring);
        if (cJSON_IsString(v = cJSON_GetObjectItem(d, "reasoning_content"))) base_sb_puts(&g->reasoning, v->valuestring);
        if (cJSON_IsString(v = cJSON_GetObjectItem(d, "content"))) base_sb_puts(&g->content, v->valuestring);
        cJSON_ArrayForEach(v, cJSON_GetObjectItem(d, "tool_calls")) {
            int i = cJSON_GetObjectItem(v, "index")->valueint;
            const cJSON *fn = cJSON_GetObjectItem(v, "function"), *nm = cJSON_GetObjectItem(fn, "name");
            const cJSON *ar = cJSON_GetObjectItem(fn, "arguments");
            if (i < 0 || i >= 4) continue;
            if (i >= g->n_calls) g->n_calls = i + 1;
            if (cJSON_IsString(nm)) { free(g->name[i]); g->name[i] = strdup(nm->valuestring); }
            if (cJSON_IsString(ar)) {
                size_t a = g->args[i] ? strlen(g->args[i]) : 0, b = strlen(ar->valuestring);
                g->args[i] = realloc(g->args[i], a + b + 1);
                memcpy(g->args[i] + a, ar->valuestring, b + 1);
            }
        }
        cJSON_Delete(o);
    }
}

static void got_free(struct got *g)
{
    base_sb_free(&g->reasoning);
    base_sb_free(&g->content);
    for (int i = 0; i < 4; i++) { free(g->name[i]); free(g->args[i]); }
}

/* s trimmed of ASCII blanks (the server trims reasoning and content). */
static int same_trimmed(const char *got, const char *want)
{
    const char *b = " \n\r\t";
    size_t ga = strspn(got, b), wa = strspn(want, b), gn = strlen(got), wn = strlen(want);
    while (gn > ga && strchr(b, got[gn - 1])) gn--;
    while (wn > wa && strchr(b, want[wn - 1])) wn--;
    return gn - ga == wn - wa && !memcmp(got + ga, want + wa, gn - ga);
}

static void test_replies(void)
{
    size_t n = 0;
    char *text = base_read_file_all("tests/tok/chat/deepseek_v4.json", &n);
    cJSON *doc = text ? cJSON_ParseWithLength(text, n) : NULL;
    free(text);
    CHECK(doc != NULL, "tests/tok/chat/deepseek_v4.json");
    const cJSON *r;
    int count = 0;
    cJSON_ArrayForEach(r, cJSON_GetObjectItem(doc, "replies")) {
        const char *name = cJSON_GetObjectItem(r, "name")->valuestring;
        const char *reply = cJSON_GetObjectItem(r, "reply")->valuestring;
        const char *want_r = cJSON_GetObjectItem(r, "reasoning_content")->valuestring;
        const char *want_c = cJSON_GetObjectItem(r, "content")->valuestring;
        const cJSON *want_calls = cJSON_GetObjectItem(r, "tool_calls");
        int think = cJSON_IsTrue(cJSON_GetObjectItem(r, "thinking")), nw = cJSON_GetArraySize(want_calls);
        count++;

        /* the whole response */
        struct job *j = reply_job(reply, think);
        job_finish(j, JOB_FIN_STOP, 0, j->n_ev);
        pthread_mutex_lock(&j->mu);
        char *resp = oai_response(&MODEL, j);
        pthread_mutex_unlock(&j->mu);
        cJSON *o = cJSON_Parse(resp);
        const cJSON *c = cJSON_GetArrayItem(cJSON_GetObjectItem(o, "choices"), 0);
        const cJSON *msg = cJSON_GetObjectItem(c, "message");
        const cJSON *rc = cJSON_GetObjectItem(msg, "reasoning_content"), *cc = cJSON_GetObjectItem(msg, "content");
        const cJSON *calls = cJSON_GetObjectItem(msg, "tool_calls");
        CHECK(think ? cJSON_IsString(rc) && same_trimmed(rc->valuestring, want_r) : !rc, "%s: reasoning_content %s",
              name, cJSON_IsString(rc) ? rc->valuestring : "(none)");
        CHECK(cJSON_IsString(cc) ? same_trimmed(cc->valuestring, want_c) : cJSON_IsNull(cc) && !want_c[0] && nw,
              "%s: content %s", name, cJSON_IsString(cc) ? cc->valuestring : "null");
        CHECK(cJSON_GetArraySize(calls) == nw, "%s: %d tool calls, DeepSeek's parser finds %d", name,
              cJSON_GetArraySize(calls), nw);
        for (int i = 0; i < nw && i < cJSON_GetArraySize(calls); i++) {
            const cJSON *fn = cJSON_GetObjectItem(cJSON_GetArrayItem(calls, i), "function");
            const cJSON *w = cJSON_GetArrayItem(want_calls, i);
            CHECK(!strcmp(cJSON_GetObjectItem(fn, "name")->valuestring, cJSON_GetObjectItem(w, "name")->valuestring) &&
                  !strcmp(cJSON_GetObjectItem(fn, "arguments")->valuestring,
                          cJSON_GetObjectItem(w, "arguments")->valuestring),
                  "%s: call %d is %s(%s), DeepSeek's parser reads %s(%s)", name, i,
                  cJSON_GetObjectItem(fn, "name")->valuestring, cJSON_GetObjectItem(fn, "arguments")->valuestring,
                  cJSON_GetObjectItem(w, "name")->valuestring, cJSON_GetObjectItem(w, "arguments")->valuestring);
        }
        CHECK(!strcmp(cJSON_GetObjectItem(c, "finish_reason")->valuestring, nw ? "tool_calls" : "stop"),
              "%s: finish_reason %s", name, cJSON_GetObjectItem(c, "finish_reason")->valuestring);

        /* the stream, event by event, reassembles to the same */
        struct job *s = reply_job("", think);
        struct strbuf out = { 0 };
        size_t chars = 0;
        pthread_mutex_lock(&s->mu);
        oai_stream_start(&out, &MODEL, s);
        pthread_mutex_unlock(&s->mu);
        for (int i = 0; i < j->n_ev; i++) {
            struct job_event ev = { .id = i, .text = strdup(j->ev[i].text), .len = j->ev[i].len };
            job_push(s, &ev);
            pthread_mutex_lock(&s->mu);
            oai_stream_events(&out, &MODEL, s, i, i + 1, &chars);
            pthread_mutex_unlock(&s->mu);
        }
        job_finish(s, JOB_FIN_STOP, 0, s->n_ev);
        pthread_mutex_lock(&s->mu);
        oai_stream_end(&out, &MODEL, s);
        pthread_mutex_unlock(&s->mu);
        struct got g;
        reassemble(out.s ? out.s : "", &g);
        CHECK(!strcmp(g.reasoning.s, cJSON_IsString(rc) ? rc->valuestring : ""), "%s: streamed reasoning '%s'", name,
              g.reasoning.s);
        CHECK(!strcmp(g.content.s, cJSON_IsString(cc) ? cc->valuestring : ""), "%s: streamed content '%s'", name,
              g.content.s);
        CHECK(g.n_calls == nw, "%s: %d streamed calls", name, g.n_calls);
        for (int i = 0; i < nw && i < g.n_calls && i < 4; i++) {
            const cJSON *fn = cJSON_GetObjectItem(cJSON_GetArrayItem(calls, i), "function");
            CHECK(g.name[i] && g.args[i] && !strcmp(g.name[i], cJSON_GetObjectItem(fn, "name")->valuestring) &&
                  !strcmp(g.args[i], cJSON_GetObjectItem(fn, "arguments")->valuestring),
                  "%s: streamed call %d %s(%s)", name, i, g.name[i] ? g.name[i] : "", g.args[i] ? g.args[i] : "");
        }
        CHECK(!strcmp(g.finish, nw ? "tool_calls" : "stop"), "%s: streamed finish_reason %s", name, g.finish);
        got_free(&g);
        base_sb_free(&out);
        job_release(s);
        cJSON_Delete(o);
        free(resp);
        job_release(j);
    }
    CHECK(count >= 5, "%d replies", count);
    cJSON_Delete(doc);
}

/* DSML the parser must not take (it stays content): each breaks one rule of
 * DeepSeek's parser. */
static void test_malformed(void)
{
    static const char *const BAD[] = {
        /* no closing invoke */
        "\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"f\">\n<｜DSML｜parameter name=\"a\" string=\"true\">x"
        "</｜DSML｜parameter>\n</｜DSML｜tool_calls>",
        /* string is neither true nor false */
        "\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"f\">\n<｜DSML｜parameter name=\"a\" string=\"yes\">x"
        "</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>",
        /* a repeated parameter */
        "\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"f\">\n<｜DSML｜parameter name=\"a\" string=\"true\">x"
        "</｜DSML｜parameter>\n<｜DSML｜parameter name=\"a\" string=\"true\">y</｜DSML｜parameter>\n</｜DSML｜invoke>\n"
        "</｜DSML｜tool_calls>",
        /* a non-string value that is not JSON */
        "\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"f\">\n<｜DSML｜parameter name=\"a\" string=\"false\">{x"
        "</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>",
        /* text between parameters */
        "\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"f\">\n<｜DSML｜parameter name=\"a\" string=\"true\">x"
        "</｜DSML｜parameter> and \n</｜DSML｜invoke>\n</｜DSML｜tool_calls>",
        /* no name line */
        "\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>",
    };
    for (size_t b = 0; b < sizeof BAD / sizeof *BAD; b++) {
        cJSON *calls = NULL;
        char *content = NULL;
        CHECK(oai_parse_tool_calls(BAD[b], NULL, &calls, &content) == 0 && !calls, "malformed DSML %zu parsed", b);
        cJSON_Delete(calls);
        free(content);
        struct oai_tool_view v;
        CHECK(!serve_oai_tool_view(BAD[b], strlen(BAD[b]), 1, NULL, &v) && v.n == 0, "malformed DSML %zu in the view", b);
        serve_oai_tool_view_free(&v);
    }
}

/* The small tokenizer in a model directory whose config.json names
 * deepseek_v4, in a temporary folder. */
static char model_dir[64];
static colibri_tokenizer *tok;

static int make_model(void)
{
    snprintf(model_dir, sizeof model_dir, "/tmp/colibri_v4serve_XXXXXX");
    if (!mkdtemp(model_dir)) return -1;
    char cwd[2048], src[4200], dst[4200];
    if (!getcwd(cwd, sizeof cwd)) return -1;
    static const char *const FILES[] = { "tokenizer.json", "tokenizer_config.json" };
    for (int i = 0; i < 2; i++) {
        snprintf(src, sizeof src, "%s/tests/tok/small/%s", cwd, FILES[i]);
        snprintf(dst, sizeof dst, "%s/%s", model_dir, FILES[i]);
        if (symlink(src, dst)) return -1;
    }
    snprintf(dst, sizeof dst, "%s/config.json", model_dir);
    FILE *f = fopen(dst, "w");
    if (!f) return -1;
    fputs("{\"model_type\": \"deepseek_v4\"}\n", f);
    if (fclose(f)) return -1;
    struct colibri_err err = { 0 };
    return colibri_tokenizer_load(model_dir, &tok, &err);
}

static void remove_model(void)
{
    static const char *const FILES[] = { "tokenizer.json", "tokenizer_config.json", "config.json" };
    char p[4200];
    for (int i = 0; i < 3; i++) {
        snprintf(p, sizeof p, "%s/%s", model_dir, FILES[i]);
        unlink(p);
    }
    rmdir(model_dir);
    colibri_tokenizer_free(tok);
}

static struct oai_model served(void)
{
    struct oai_model m = MODEL;
    m.tok = tok;
    m.n_vocab = colibri_tokenizer_n_vocab(tok);
    m.n_ctx = m.n_ctx_model = 1 << 16;
    return m;
}

/* The conversation `name` of the golden file as a chat request body (its
 * variables as chat_template_kwargs), and the encoder's rendering. */
static char *request_of(const cJSON *doc, const char *name, const char **want)
{
    const cJSON *c;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(doc, "chats")) {
        if (strcmp(cJSON_GetObjectItem(c, "name")->valuestring, name)) continue;
        *want = cJSON_GetObjectItem(c, "rendered")->valuestring;
        struct strbuf b = { 0 };
        base_sb_puts(&b, "{\"messages\": ");
        tok_chat_v4_json(&b, cJSON_GetObjectItem(c, "messages"));
        if (!cJSON_IsNull(cJSON_GetObjectItem(c, "tools"))) {
            base_sb_puts(&b, ", \"tools\": ");
            tok_chat_v4_json(&b, cJSON_GetObjectItem(c, "tools"));
        }
        base_sb_puts(&b, ", \"chat_template_kwargs\": ");
        tok_chat_v4_json(&b, cJSON_GetObjectItem(c, "variables"));
        base_sb_puts(&b, ", \"max_tokens\": 8}");
        return b.s;
    }
    return NULL;
}

/* Requests through oai_parse: the job's prompt is the encoder's rendering
 * (tools with their float literals, thinking from chat_template_kwargs), and
 * a thinking prompt leaves the reasoning open for the reply. */
static void test_requests(void)
{
    size_t n = 0;
    char *text = base_read_file_all("tests/tok/chat/deepseek_v4.json", &n);
    cJSON *doc = text ? tok_jinja_json_parse(text, n) : NULL;
    free(text);
    struct oai_model m = served();
    static const char *const CASES[] = { "tools_think", "tools_json_values", "multi_turn_think_drop", "user_chat",
                                         "tools_results_reordered", "system_think_max" };
    for (size_t i = 0; i < sizeof CASES / sizeof *CASES; i++) {
        const char *want = NULL;
        char *body = request_of(doc, CASES[i], &want);
        CHECK(body != NULL, "%s in the golden file", CASES[i]);
        if (!body) continue;
        struct oai_error e = { 0 };
        struct job *j = oai_parse(&m, JOB_CHAT, body, strlen(body), &e);
        CHECK(j != NULL, "%s: %s", CASES[i], e.msg);
        if (j) {
            char *prompt = NULL;
            size_t len = 0;
            struct colibri_err err = { 0 };
            CHECK(!colibri_tokenizer_decode(tok, j->prompt, (size_t)j->n_prompt, 0, &prompt, &len, &err) &&
                  len == strlen(want) && !memcmp(prompt, want, len), "%s: the prompt is not the encoder's", CASES[i]);
            size_t wn = strlen(want);
            int open = wn >= 7 && !strcmp(want + wn - 7, "<think>");
            CHECK(j->p.think_open == open, "%s: think_open %d", CASES[i], j->p.think_open);
            free(prompt);
            job_release(j);
        }
        free(body);
    }
    /* refused by name, with nothing about the mapping retry other templates get */
    static const char BAD[] = "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}, {\"role\": \"assistant\", "
        "\"content\": \"\", \"tool_calls\": [{\"id\": \"a\", \"type\": \"function\", \"function\": {\"name\": \"f\", "
        "\"arguments\": \"{}\"}}]}, {\"role\": \"tool\", \"tool_call_id\": \"a\", \"content\": \"1\"}], "
        "\"chat_template_kwargs\": {\"foo\": 1}}";
    struct oai_error e = { 0 };
    struct job *j = oai_parse(&m, JOB_CHAT, BAD, strlen(BAD), &e);
    CHECK(!j && e.status == 400 && strstr(e.msg, "'foo'") && !strstr(e.msg, "objects"), "unknown variable: %s", e.msg);
    if (j) job_release(j);
    cJSON_Delete(doc);
}

/* 1 when the grammar takes text whole (and then allows end of generation). */
static int grammar_takes(const colibri_grammar *g, const char *text)
{
    int32_t *ids = NULL;
    size_t n = 0;
    struct colibri_err err = { 0 };
    if (colibri_tokenizer_encode(tok, text, strlen(text), 0, &ids, &n, NULL, &err)) return -1;
    struct grammar_state *st = NULL;
    int ok = !sample_grammar_state_new(g->g, &st, &err);
    for (size_t i = 0; ok && i < n; i++) ok = !sample_grammar_accept(st, ids[i]);
    if (ok) ok = sample_grammar_allows(st, colibri_tokenizer_eos(tok));
    sample_grammar_state_free(st);
    free(ids);
    return ok;
}

static const char TOOLS[] =
    "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"parameters\":{\"type\":\"object\","
    "\"properties\":{\"city\":{\"type\":\"string\"},\"unit\":{\"type\":\"string\",\"enum\":[\"celsius\","
    "\"fahrenheit\"]}},\"required\":[\"city\"]}}},"
    "{\"type\":\"function\",\"function\":{\"name\":\"calc\",\"parameters\":{\"type\":\"object\","
    "\"properties\":{\"expr\":{\"type\":\"string\"},\"precision\":{\"type\":\"number\"},"
    "\"vars\":{\"type\":\"object\"},\"exact\":{\"type\":[\"boolean\",\"null\"]}},\"required\":[\"expr\"]}}},"
    "{\"type\":\"function\",\"function\":{\"name\":\"now\"}}]";

#define CALL(name, params) "<｜DSML｜invoke name=\"" name "\">\n" params "</｜DSML｜invoke>"
#define PARAM(k, s, v) "<｜DSML｜parameter name=\"" k "\" string=\"" s "\">" v "</｜DSML｜parameter>\n"
#define CALLS(body) "\n\n<｜DSML｜tool_calls>\n" body "\n</｜DSML｜tool_calls>"

/* tool_choice required / named: the grammar in DSML (found by rendering a
 * probe call with the model's format) takes the encoder's calls (the golden
 * replies) and refuses what the schema or DeepSeek's parser would not. */
static void test_tool_grammar(void)
{
    struct oai_model m = served();
    cJSON *tools = cJSON_Parse(TOOLS);
    colibri_grammar *par = NULL, *gthink = NULL, *one = NULL, *named = NULL;
    struct oai_error e = { 0 };
    CHECK(!serve_oai_tool_grammar(&m, tools, NULL, 1, 0, &par, &e) &&
          !serve_oai_tool_grammar(&m, tools, NULL, 1, 1, &gthink, &e) &&
          !serve_oai_tool_grammar(&m, tools, NULL, 0, 0, &one, &e) &&
          !serve_oai_tool_grammar(&m, tools, "calc", 1, 0, &named, &e), "grammars: %s", e.msg);
    size_t n = 0;
    char *text = base_read_file_all("tests/tok/chat/deepseek_v4.json", &n);
    cJSON *doc = text ? cJSON_ParseWithLength(text, n) : NULL;
    free(text);
    const cJSON *r;
    int taken = 0;
    cJSON_ArrayForEach(r, cJSON_GetObjectItem(doc, "replies")) {
        const char *name = cJSON_GetObjectItem(r, "name")->valuestring, *reply = cJSON_GetObjectItem(r, "reply")->valuestring;
        int calls = cJSON_GetArraySize(cJSON_GetObjectItem(r, "tool_calls"));
        int think = cJSON_IsTrue(cJSON_GetObjectItem(r, "thinking"));
        int content = cJSON_GetObjectItem(r, "content")->valuestring[0] != 0;
        if (!par || !gthink) break;
        int want = calls > 0 && !content;
        CHECK(grammar_takes(think ? gthink : par, reply) == want, "%s: the grammar %s it", name,
              want ? "refuses" : "takes");
        taken += want;
    }
    CHECK(taken >= 2, "%d golden replies taken", taken);
    if (par && one && named) {
        static const char TWO[] = CALLS(CALL("now", "") "\n" CALL("get_weather", PARAM("city", "true", "Oslo")));
        CHECK(grammar_takes(par, TWO) == 1 && grammar_takes(one, TWO) == 0, "two calls");
        CHECK(grammar_takes(named, TWO) == 0, "a call other than the named one");
        static const char CALC[] = CALLS(CALL("calc", PARAM("expr", "true", "a <b> </x") PARAM("precision", "false", "2.5")
                                                      PARAM("exact", "false", "null")));
        CHECK(grammar_takes(named, CALC) == 1, "the named call with raw '<' in a string");
        static const char *const BAD[] = {
            CALLS(CALL("get_weather", PARAM("unit", "true", "celsius"))),                       /* city is required */
            CALLS(CALL("get_weather", PARAM("city", "true", "Oslo") PARAM("unit", "true", "kelvin"))),
            CALLS(CALL("get_weather", PARAM("city", "false", "Oslo"))),                         /* a string is "true" */
            CALLS(CALL("calc", PARAM("expr", "true", "1") PARAM("precision", "true", "2.5"))),  /* a number is "false" */
            CALLS(CALL("calc", PARAM("precision", "false", "2.5") PARAM("expr", "true", "1"))), /* the schema's order */
            CALLS(CALL("get_weather", PARAM("city", "true", "a</｜DSML｜parameter>b"))),
            CALLS(CALL("nope", "")),
            "Sure." CALLS(CALL("now", "")),
        };
        for (size_t b = 0; b < sizeof BAD / sizeof *BAD; b++)
            CHECK(grammar_takes(par, BAD[b]) == 0, "taken: %s", BAD[b]);
        CHECK(grammar_takes(par, CALLS(CALL("now", ""))) == 1, "a call without arguments");
    }
    colibri_grammar_free(par);
    colibri_grammar_free(gthink);
    colibri_grammar_free(one);
    colibri_grammar_free(named);
    cJSON_Delete(tools);
    cJSON_Delete(doc);
}

int main(void)
{
    RUN_TEST(test_replies);
    RUN_TEST(test_malformed);
    if (make_model()) {
        printf("  cannot make the test model directory\n");
        return 1;
    }
    RUN_TEST(test_requests);
    RUN_TEST(test_tool_grammar);
    remove_model();
    return CHECK_SUMMARY();
}
