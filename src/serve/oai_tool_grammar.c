/* serve/oai_tool_grammar.c - tool_choice "required" and a named function,
 * enforced by constrained decoding (contract in oai.h).
 *
 * The syntax is the one the model's own chat template writes assistant tool
 * calls in, found by rendering a probe conversation holding one call (and no
 * tool list, so the name appears only where the call is rendered) and
 * looking for each syntax's markers; a template that renders no tool calls
 * gets DeepSeek-V3's (the family colibri serves), one that renders them in
 * another syntax is refused by name. The grammar is the whole
 * reply: the section of calls (one call when parallel_tool_calls is false),
 * each with a function name from the request's tools (or the named one) and
 * arguments matching that tool's `parameters` schema (the JSON-Schema
 * subset of grammar_schema.c; no schema: any JSON object). A prompt that
 * opens a <think> block lets the reasoning come first. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sample/grammar.h"
#include "serve/oai.h"
#include "serve/sbuf.h"

#define BAD "invalid_request_error"

/* GBNF fragments around each call; the name goes between call_open and
 * name_end as a literal. */
static const struct {
    const char *open, *call_open, *name_end, *call_close, *sep, *close;
} SYNTAX[OAI_TOOLS_COUNT] = {
    [OAI_TOOLS_DEEPSEEK_V3] = { "\"<｜tool▁calls▁begin｜>\"", "\"<｜tool▁call▁begin｜>function<｜tool▁sep｜>\"",
                                "\"\\n```json\\n\"", "\"\\n```<｜tool▁call▁end｜>\"", "\"\\n\"",
                                "\"<｜tool▁calls▁end｜>\"" },
    [OAI_TOOLS_DEEPSEEK_V31] = { "\"<｜tool▁calls▁begin｜>\"", "\"<｜tool▁call▁begin｜>\"", "\"<｜tool▁sep｜>\"",
                                 "\"<｜tool▁call▁end｜>\"", "", "\"<｜tool▁calls▁end｜>\"" },
    [OAI_TOOLS_KIMI] = { "\"<|tool_calls_section_begin|>\"", "\"<|tool_call_begin|>functions.\"",
                         "\":\" [0-9]{1,3} \"<|tool_call_argument_begin|>\"", "\"<|tool_call_end|>\"", "",
                         "\"<|tool_calls_section_end|>\"" },
    [OAI_TOOLS_HERMES] = { "", "\"<tool_call>\\n{\\\"name\\\": \\\"\"", "\"\\\", \\\"arguments\\\": \"",
                           "\"}\\n</tool_call>\"", "\"\\n\"", "" },
};

static enum oai_tool_syntax tool_syntax_of(const struct oai_model *m, const char **unsupported)
{
    /* templates disagree on the shape of a call in the history: content null
     * or "", arguments the OpenAI string or a mapping (as transformers'
     * templates take them); the first probe that renders is read. The id is
     * Kimi's functions.NAME:IDX, which Moonshot's own Kimi-K2-Thinking
     * template writes in place of the name. */
    static const char *const PROBES[] = {
        "null,\"tool_calls\":[{\"id\":\"functions.probe_fn:0\",\"type\":\"function\","
        "\"function\":{\"name\":\"probe_fn\",\"arguments\":\"{\\\"q\\\":1}\"}}]",
        "\"\",\"tool_calls\":[{\"id\":\"functions.probe_fn:0\",\"type\":\"function\","
        "\"function\":{\"name\":\"probe_fn\",\"arguments\":\"{\\\"q\\\":1}\"}}]",
        "\"\",\"tool_calls\":[{\"id\":\"functions.probe_fn:0\",\"type\":\"function\","
        "\"function\":{\"name\":\"probe_fn\",\"arguments\":{\"q\":1}}}]",
    };
    *unsupported = NULL;
    enum oai_tool_syntax s = OAI_TOOLS_DEEPSEEK_V3;
    char *text = NULL;
    for (size_t k = 0; k < sizeof PROBES / sizeof *PROBES && !text; k++) {
        char msgs[512];
        snprintf(msgs, sizeof msgs, "[{\"role\":\"user\",\"content\":\"x\"},{\"role\":\"assistant\",\"content\":%s}]",
                 PROBES[k]);
        size_t len = 0;
        struct colibri_err err = { 0 };
        if (colibri_chat_render_json(m->tok, msgs, NULL, NULL, 0, &text, &len, &err)) text = NULL;
    }
    if (!text) return s;    /* renders no call at all */
    if (strstr(text, "<arg_key>")) *unsupported = "GLM's <tool_call>NAME<arg_key>...";
    else if (strstr(text, "<function=probe_fn>")) *unsupported = "Qwen3-Coder's <function=NAME>";
    else if (strstr(text, "function<｜tool▁sep｜>probe_fn")) s = OAI_TOOLS_DEEPSEEK_V3;
    else if (strstr(text, "probe_fn<｜tool▁sep｜>")) s = OAI_TOOLS_DEEPSEEK_V31;
    else if (strstr(text, "<|tool_call_begin|>functions.probe_fn:")) s = OAI_TOOLS_KIMI;
    else if (strstr(text, "<tool_call>\n{\"name\": \"probe_fn\"")) s = OAI_TOOLS_HERMES;
    else if (strstr(text, "probe_fn")) *unsupported = "one colibri does not know";
    free(text);
    return s;
}

static int fail(struct oai_error *e, const char *param, const char *fmt, const char *a, const char *b)
{
    oai_error_set(e, 400, BAD, NULL, param, fmt, a, b ? b : "");
    return -1;
}

int serve_oai_tool_gbnf(const struct oai_model *m, const cJSON *tools, const char *only, int parallel, int think_open,
                        char **out, struct oai_error *e)
{
    *out = NULL;
    const char *unsupported;
    enum oai_tool_syntax syn = tool_syntax_of(m, &unsupported);
    if (unsupported)
        return fail(e, "tool_choice", "'tool_choice' that requires a call cannot be enforced for this model's "
                    "tool-call syntax (%s)%s", unsupported, NULL);
    struct sbuf g = { 0 };
    sb_puts(&g, sample_grammar_json_rules());
    if (think_open) sb_puts(&g, "think ::= ( [^<] | \"<\" [^/] )* \"</think>\" [\\n]{0,2}\n");
    sb_printf(&g, "root ::= %s %s call", think_open ? "think" : "", SYNTAX[syn].open);
    if (parallel) sb_printf(&g, " ( %s call )*", SYNTAX[syn].sep);
    sb_printf(&g, " %s\ncall ::= %s (", SYNTAX[syn].close, SYNTAX[syn].call_open);
    int next_rule = 0, k = 0, i = 0;
    struct sbuf fns = { 0 };
    sb_puts(&fns, "");
    for (const cJSON *t = tools->child; t; t = t->next, i++) {
        const cJSON *fn = cJSON_GetObjectItemCaseSensitive(t, "function");
        const char *name = cJSON_GetObjectItemCaseSensitive(fn, "name")->valuestring;
        if (only && strcmp(name, only)) continue;
        const cJSON *params = cJSON_GetObjectItemCaseSensitive(fn, "parameters");
        char *schema = params && !cJSON_IsNull(params) ? cJSON_PrintUnformatted(params) : NULL, *rules = NULL;
        char rule[32];
        snprintf(rule, sizeof rule, "args-%d", k);
        struct colibri_err err = { 0 };
        int rc = params && !cJSON_IsNull(params) && !schema ? COLIBRI_ENOMEM
               : sample_grammar_json_schema_rules(schema, rule, &next_rule, &rules, &err);
        free(schema);
        if (rc) {
            sb_free(&g);
            sb_free(&fns);
            if (rc == COLIBRI_ENOMEM) return -!!oai_error_set(e, 500, "server_error", NULL, NULL, "out of memory");
            char msg[300];
            snprintf(msg, sizeof msg, "'tools[%d].function.parameters' (%s)", i, name);
            return fail(e, "tools", "%s: %s", msg, err.msg);
        }
        /* names are [A-Za-z0-9_.-] (oai_tools.c checks), so they need no escaping */
        sb_printf(&g, "%s fn-%d", k ? " |" : "", k);
        sb_printf(&fns, "fn-%d ::= \"%s\" %s args-%d\n%s", k, name, SYNTAX[syn].name_end, k, rules);
        free(rules);
        k++;
    }
    sb_printf(&g, " ) %s\n%s", SYNTAX[syn].call_close, fns.s ? fns.s : "");
    sb_free(&fns);
    if (g.failed) { sb_free(&g); return -!!oai_error_set(e, 500, "server_error", NULL, NULL, "out of memory"); }
    *out = g.s;
    return 0;
}

int serve_oai_tool_grammar(const struct oai_model *m, const cJSON *tools, const char *only, int parallel, int think_open,
                           colibri_grammar **out, struct oai_error *e)
{
    *out = NULL;
    char *gbnf = NULL;
    if (serve_oai_tool_gbnf(m, tools, only, parallel, think_open, &gbnf, e)) return -1;
    struct colibri_err err = { 0 };
    int rc = colibri_grammar_new(m->tok, gbnf, strlen(gbnf), out, &err);
    free(gbnf);
    if (rc == COLIBRI_ENOMEM) return -!!oai_error_set(e, 500, "server_error", NULL, NULL, "out of memory");
    if (rc) return fail(e, "tools", "the tool-call grammar does not compile: %s%s", err.msg, NULL);
    return 0;
}
