/* serve/oai_tool_grammar.c - tool_choice "required" and a named function,
 * enforced by constrained decoding (contract in oai.h).
 *
 * The syntax is the one the model's own chat template writes assistant tool
 * calls in, found by rendering a probe conversation holding one call (and no
 * tool list, so the name appears only where the call is rendered) and
 * looking for each syntax's markers; a template that renders no tool calls
 * gets DeepSeek-V3's (the family colibri serves), one that renders them in
 * a syntax colibri does not know is refused by name. The grammar is the whole
 * reply: the section of calls (one call when parallel_tool_calls is false),
 * each with a function name from the request's tools (or the named one) and
 * arguments matching that tool's `parameters` schema (the JSON-Schema
 * subset of grammar_schema.c; no schema: any JSON object). GLM's,
 * Qwen3-Coder's and DeepSeek-V4's (DSML) calls write each argument as a
 * tagged key and value instead of a JSON object: there the properties come in the schema's order, the
 * required ones always and the others optionally (none when the tool has no
 * properties); a "string"-typed value is raw text that holds none of the
 * closing tags the reply parser looks for (oai_reply.c), any other value
 * the JSON of the property's schema, as the parser types them. A prompt that
 * opens a <think> block lets the reasoning come first. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sample/grammar.h"
#include "serve/oai.h"
#include "base/strbuf.h"

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
    [OAI_TOOLS_GLM] = { "", "\"<tool_call>\"", "\"\\n\"?", "\"</tool_call>\"", "\"\\n\"?", "" },
    [OAI_TOOLS_QWEN3_CODER] = { "", "\"<tool_call>\\n<function=\"", "\">\\n\"", "\"</function>\\n</tool_call>\"",
                                "\"\\n\"", "" },
    [OAI_TOOLS_DEEPSEEK_V4] = { "\"\\n\\n<｜DSML｜tool_calls>\\n\"", "\"<｜DSML｜invoke name=\\\"\"", "\"\\\">\\n\"",
                                "\"</｜DSML｜invoke>\"", "\"\\n\"", "\"\\n</｜DSML｜tool_calls>\"" },
};

/* GLM's and Qwen3-Coder's argument tags (GBNF literals around the key, then
 * around the value) and the closing tags a raw value must not hold. */
static const struct {
    const char *key_open, *key_close, *value_close, *no[2];
    const char *key_close_str;  /* before a "string"-typed value, when it differs (DSML) */
} XML_ARG[OAI_TOOLS_COUNT] = {
    /* GLM-4.6 writes a newline after the name, the key and the value,
     * GLM-4.5 only after the key, GLM-4.7 none: each is optional */
    [OAI_TOOLS_GLM] = { "\"<arg_key>\"", "\"</arg_key>\" \"\\n\"? \"<arg_value>\"", "\"</arg_value>\" \"\\n\"?",
                        { "/arg_value>", "/tool_call>" } },
    [OAI_TOOLS_QWEN3_CODER] = { "\"<parameter=\"", "\">\\n\"", "\"\\n</parameter>\\n\"",
                                { "/parameter>", "/tool_call>" } },
    /* DeepSeek-V4 marks a value string="true" (raw text) or "false" (JSON);
     * its raw text has a rule of its own (text_rule) */
    [OAI_TOOLS_DEEPSEEK_V4] = { "\"<｜DSML｜parameter name=\\\"\"", "\"\\\" string=\\\"false\\\">\"",
                                "\"</｜DSML｜parameter>\\n\"", { NULL, NULL }, "\"\\\" string=\\\"true\\\">\"" },
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
    if (strstr(text, "<tool_call>probe_fn<arg_key>") || strstr(text, "<tool_call>probe_fn\n<arg_key>")) s = OAI_TOOLS_GLM;
    else if (strstr(text, "<tool_call>\n<function=probe_fn>\n<parameter=")) s = OAI_TOOLS_QWEN3_CODER;
    else if (strstr(text, "<arg_key>")) *unsupported = "a GLM-like <tool_call>NAME<arg_key>... colibri does not know";
    else if (strstr(text, "<function=probe_fn>")) *unsupported = "a Qwen3-Coder-like <function=NAME> colibri does not know";
    else if (strstr(text, "function<｜tool▁sep｜>probe_fn")) s = OAI_TOOLS_DEEPSEEK_V3;
    else if (strstr(text, "probe_fn<｜tool▁sep｜>")) s = OAI_TOOLS_DEEPSEEK_V31;
    else if (strstr(text, "<|tool_call_begin|>functions.probe_fn:")) s = OAI_TOOLS_KIMI;
    else if (strstr(text, "<tool_call>\n{\"name\": \"probe_fn\"")) s = OAI_TOOLS_HERMES;
    else if (strstr(text, "<｜DSML｜invoke name=\"probe_fn\">\n<｜DSML｜parameter name=\"")) s = OAI_TOOLS_DEEPSEEK_V4;
    else if (strstr(text, "probe_fn")) *unsupported = "one colibri does not know";
    free(text);
    return s;
}

static int fail(struct oai_error *e, const char *param, const char *fmt, const char *a, const char *b)
{
    oai_error_set(e, 400, BAD, NULL, param, fmt, a, b ? b : "");
    return -1;
}

/* Appends s[0..n) as a GBNF string literal. */
static void gbnf_literal(struct strbuf *b, const char *s, size_t n)
{
    base_sb_puts(b, "\"");
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '"' || s[i] == '\\') base_sb_appendf(b, "\\%c", s[i]);
        else if (s[i] == '\n') base_sb_puts(b, "\\n");
        else base_sb_append(b, s + i, 1);
    }
    base_sb_puts(b, "\"");
}

/* The alternatives after a run of '<' in a raw value that no[] (closing tags
 * less their '<', which none holds again) cannot follow: into brk, a prefix
 * of a tag (pre[0..d)) then a character that leaves all of them; into end, a
 * prefix the value may stop at (the tag that follows the value begins anew
 * at its own '<'). */
static void text_alts(struct strbuf *brk, struct strbuf *end, const char *const no[2], char *pre, size_t d)
{
    char next[2];
    int k = 0;
    for (int w = 0; w < 2; w++)
        if (strlen(no[w]) > d && !strncmp(no[w], pre, d) && !memchr(next, no[w][d], (size_t)k)) next[k++] = no[w][d];
    base_sb_puts(brk, brk->n ? " | " : "");
    if (d) gbnf_literal(brk, pre, d);
    base_sb_puts(brk, " [^");
    for (int c = 0; c < k; c++) base_sb_appendf(brk, "%s%c", strchr("\\]^-", next[c]) ? "\\" : "", next[c]);
    base_sb_puts(brk, "<]");
    if (d) {
        base_sb_puts(end, end->n ? " | " : "");
        gbnf_literal(end, pre, d);
    }
    for (int c = 0; c < k; c++) {
        pre[d] = next[c];
        if (strlen(no[0]) != d + 1 && strlen(no[1]) != d + 1) text_alts(brk, end, no, pre, d + 1);
    }
}

/* The rule xtext: raw text holding none of the syntax's closing tags. */
static void text_rule(struct strbuf *g, enum oai_tool_syntax syn)
{
    if (syn == OAI_TOOLS_DEEPSEEK_V4) {
        /* DeepSeek's parser ends a value at the first </｜DSML｜parameter>:
         * the text holds no "</｜" (text_alts spells classes by the byte,
         * which cannot hold the multi-byte ｜) */
        base_sb_puts(g, "xtext ::= ( [^<] | \"<\"+ [^/<] | \"<\"+ \"/\" [^｜] )* \"<\"*\n");
        return;
    }
    struct strbuf brk = { 0 }, end = { 0 };
    char pre[32];
    text_alts(&brk, &end, XML_ARG[syn].no, pre, 0);
    base_sb_appendf(g, "xtext ::= ( [^<] | \"<\"+ ( %s ) )* ( \"<\"+ ( %s )? )?\n", brk.s ? brk.s : "", end.s ? end.s : "");
    if (brk.failed || end.failed) g->failed = 1;
    base_sb_free(&brk);
    base_sb_free(&end);
}

/* Tool i's (k-th allowed) arguments in GLM's or Qwen3-Coder's tags, as the
 * rest of rule fn-k (into fns, rules after it into rules): each property in
 * the schema's order, optional unless required. 0, or -1 with *e filled. */
static int xml_args(enum oai_tool_syntax syn, const cJSON *params, int i, int k, const char *name, int *next_rule,
                    struct strbuf *fns, struct strbuf *rules, struct oai_error *e)
{
    const cJSON *props = cJSON_GetObjectItemCaseSensitive(params, "properties");
    const cJSON *req = cJSON_GetObjectItemCaseSensitive(params, "required"), *r;
    char where[300];
    snprintf(where, sizeof where, "'tools[%d].function.parameters' (%s)", i, name);
    cJSON_ArrayForEach(r, req)
        if (cJSON_IsString(r) && !cJSON_GetObjectItemCaseSensitive(props, r->valuestring))
            return fail(e, "tools", "%s: required '%s' is not in its properties, which this model's tool-call "
                        "syntax needs to name each argument", where, r->valuestring);
    int j = 0;
    for (const cJSON *p = props ? props->child : NULL; p; p = p->next, j++) {
        const char *key = p->string;
        size_t n = strlen(key);
        for (size_t c = 0; c < n; c++)
            if (strchr(syn == OAI_TOOLS_DEEPSEEK_V4 ? "<>\"" : "<>", key[c]) || (unsigned char)key[c] < 0x20)
                return fail(e, "tools", "%s: property '%s' holds a character ('<', '>', a control, or in DSML "
                            "'\"') that this model's tool-call syntax cannot carry in a key", where, key);
        if (!n || key[0] == ' ' || key[n - 1] == ' ')
            return fail(e, "tools", "%s: property '%s' is empty or starts or ends with a blank, which this "
                        "model's tool-call syntax cannot carry in a key", where, key);
        int required = 0;
        cJSON_ArrayForEach(r, req) required |= cJSON_IsString(r) && !strcmp(r->valuestring, key);
        base_sb_appendf(fns, " xarg-%d-%d%s", k, j, required ? "" : "?");
        base_sb_appendf(rules, "xarg-%d-%d ::= %s ", k, j, XML_ARG[syn].key_open);
        gbnf_literal(rules, key, n);
        const cJSON *ty = cJSON_GetObjectItemCaseSensitive(p, "type");
        int text = cJSON_IsString(ty) && !strcmp(ty->valuestring, "string");
        base_sb_appendf(rules, " %s ", text && XML_ARG[syn].key_close_str ? XML_ARG[syn].key_close_str
                                                                          : XML_ARG[syn].key_close);
        if (text) {                         /* the parser keeps it as text */
            const cJSON *cst = cJSON_GetObjectItemCaseSensitive(p, "const"), *en = cJSON_GetObjectItemCaseSensitive(p, "enum");
            const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(p, "format"), *v;
            const cJSON *lo = cJSON_GetObjectItemCaseSensitive(p, "minLength"), *hi = cJSON_GetObjectItemCaseSensitive(p, "maxLength");
            if (cJSON_IsString(cst)) gbnf_literal(rules, cst->valuestring, strlen(cst->valuestring));
            else if (en) {
                int m = 0;
                base_sb_puts(rules, "(");
                cJSON_ArrayForEach(v, en) if (cJSON_IsString(v)) {
                    base_sb_puts(rules, m++ ? " | " : " ");
                    gbnf_literal(rules, v->valuestring, strlen(v->valuestring));
                }
                if (!m) return fail(e, "tools", "%s: property '%s' is a string with no string in its enum", where, key);
                base_sb_puts(rules, " )");
            } else if (cJSON_IsString(fmt))     /* grammar_schema.c checked the format is one of these */
                base_sb_puts(rules, !strcmp(fmt->valuestring, "date-time") ? "date \"T\" time" : fmt->valuestring);
            else if (cJSON_IsNumber(lo) || cJSON_IsNumber(hi)) {
                /* counted in characters, so without '<' (text_rule's units span several) */
                base_sb_appendf(rules, "[^<]{%ld,", cJSON_IsNumber(lo) ? (long)lo->valuedouble : 0L);
                if (cJSON_IsNumber(hi)) base_sb_appendf(rules, "%ld", (long)hi->valuedouble);
                base_sb_puts(rules, "}");
            } else base_sb_puts(rules, "xtext");
        } else {                            /* the parser reads it as JSON: the JSON of its schema */
            cJSON *sub = cJSON_Duplicate(p, 1);
            static const char *const DEFS[] = { "$defs", "definitions" };
            for (int d = 0; d < 2 && sub; d++) {
                const cJSON *defs = cJSON_GetObjectItemCaseSensitive(params, DEFS[d]);
                if (defs && !cJSON_GetObjectItemCaseSensitive(sub, DEFS[d]))
                    cJSON_AddItemToObject(sub, DEFS[d], cJSON_Duplicate(defs, 1));
            }
            char *txt = sub ? cJSON_PrintUnformatted(sub) : NULL, *vr = NULL, vname[48];
            cJSON_Delete(sub);
            snprintf(vname, sizeof vname, "xval-%d-%d", k, j);
            struct colibri_err err = { 0 };
            int rc = txt ? sample_grammar_json_schema_rules(txt, vname, next_rule, &vr, &err) : COLIBRI_ENOMEM;
            free(txt);
            if (rc == COLIBRI_ENOMEM) return -!!oai_error_set(e, 500, "server_error", NULL, NULL, "out of memory");
            if (rc) return fail(e, "tools", "%s: %s", where, err.msg);
            /* the templates write an untyped enum's strings raw, which the parser
             * keeps as text where they do not parse as JSON (not in DSML, whose
             * string="false" text must be JSON) */
            base_sb_appendf(rules, "( %s", vname);
            const cJSON *en = syn == OAI_TOOLS_DEEPSEEK_V4 ? NULL : cJSON_GetObjectItemCaseSensitive(p, "enum"), *v;
            cJSON_ArrayForEach(v, en) {
                cJSON *as_json = cJSON_IsString(v) ? cJSON_Parse(v->valuestring) : NULL;
                if (cJSON_IsString(v) && !as_json && v->valuestring[0] && !strstr(v->valuestring, "</")) {
                    base_sb_puts(rules, " | ");
                    gbnf_literal(rules, v->valuestring, strlen(v->valuestring));
                }
                cJSON_Delete(as_json);
            }
            base_sb_appendf(rules, " ) %s\n%s", XML_ARG[syn].value_close, vr);
            free(vr);
            continue;
        }
        base_sb_appendf(rules, " %s\n", XML_ARG[syn].value_close);
    }
    return 0;
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
    struct strbuf g = { 0 };
    base_sb_puts(&g, sample_grammar_json_rules());
    if (think_open) base_sb_puts(&g, "think ::= ( [^<] | \"<\" [^/] )* \"</think>\" [\\n]{0,2}\n");
    base_sb_appendf(&g, "root ::= %s %s call", think_open ? "think" : "", SYNTAX[syn].open);
    if (parallel) base_sb_appendf(&g, " ( %s call )*", SYNTAX[syn].sep);
    base_sb_appendf(&g, " %s\ncall ::= %s (", SYNTAX[syn].close, SYNTAX[syn].call_open);
    int next_rule = 0, k = 0, i = 0;
    struct strbuf fns = { 0 };
    base_sb_puts(&fns, "");
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
            base_sb_free(&g);
            base_sb_free(&fns);
            if (rc == COLIBRI_ENOMEM) return -!!oai_error_set(e, 500, "server_error", NULL, NULL, "out of memory");
            char msg[300];
            snprintf(msg, sizeof msg, "'tools[%d].function.parameters' (%s)", i, name);
            return fail(e, "tools", "%s: %s", msg, err.msg);
        }
        /* names are [A-Za-z0-9_.-] (oai_tools.c checks), so they need no escaping */
        base_sb_appendf(&g, "%s fn-%d", k ? " |" : "", k);
        if (XML_ARG[syn].key_open) {        /* GLM / Qwen3-Coder: tagged arguments (the rules checked the schema) */
            struct strbuf xr = { 0 };
            base_sb_appendf(&fns, "fn-%d ::= \"%s\" %s", k, name, SYNTAX[syn].name_end);
            rc = xml_args(syn, params, i, k, name, &next_rule, &fns, &xr, e);
            base_sb_appendf(&fns, "\n%s", xr.s ? xr.s : "");
            if (xr.failed) fns.failed = 1;
            base_sb_free(&xr);
        } else base_sb_appendf(&fns, "fn-%d ::= \"%s\" %s args-%d\n%s", k, name, SYNTAX[syn].name_end, k, rules);
        free(rules);
        if (rc) { base_sb_free(&g); base_sb_free(&fns); return -1; }
        k++;
    }
    base_sb_appendf(&g, " ) %s\n%s", SYNTAX[syn].call_close, fns.s ? fns.s : "");
    if (fns.failed) g.failed = 1;
    base_sb_free(&fns);
    if (XML_ARG[syn].key_open) text_rule(&g, syn);
    if (g.failed) { base_sb_free(&g); return -!!oai_error_set(e, 500, "server_error", NULL, NULL, "out of memory"); }
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
