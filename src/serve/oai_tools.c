/* serve/oai_tools.c - tools on /v1/chat/completions (contract in oai.h):
 * the conversation (with assistant tool_calls, tool results and
 * reasoning_content) and the tool list go to the model's chat template as
 * they are, and the model's reply is searched for the tool-call syntaxes of
 * DeepSeek-V3 / R1, DeepSeek-V3.1, Kimi K2 and Hermes/Qwen (<tool_call>
 * JSON). A reply that does not parse stays content: never an error. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve/oai.h"

#define BAD "invalid_request_error"

static char *trim_dup(const char *a, const char *b);

static const cJSON *opt(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return v && !cJSON_IsNull(v) ? v : NULL;
}

static int bad(struct oai_error *e, const char *param, const char *msg)
{
    oai_error_set(e, 400, BAD, NULL, param, "%s", msg);
    return -1;
}

static int check_tools(const cJSON *tools, struct oai_error *e)
{
    char msg[256];
    if (!cJSON_IsArray(tools)) return bad(e, "tools", "'tools' must be an array");
    int i = 0;
    for (const cJSON *t = tools->child; t; t = t->next, i++) {
        const cJSON *type = opt(t, "type"), *fn = opt(t, "function");
        const cJSON *name = fn ? opt(fn, "name") : NULL, *params = fn ? opt(fn, "parameters") : NULL;
        const char *why = !cJSON_IsObject(t) ? "must be an object"
                        : !cJSON_IsString(type) || strcmp(type->valuestring, "function") ? "needs \"type\": \"function\""
                        : !cJSON_IsObject(fn) ? "needs a 'function' object"
                        : !cJSON_IsString(name) || !name->valuestring[0] ? "needs 'function.name', a non-empty string"
                        : params && !cJSON_IsObject(params) ? "'function.parameters' must be an object" : NULL;
        if (why) { snprintf(msg, sizeof msg, "'tools[%d]' %s", i, why); return bad(e, "tools", msg); }
    }
    return 0;
}

static int check_tool_calls(const cJSON *calls, int i, struct oai_error *e)
{
    char msg[256];
    if (!cJSON_IsArray(calls)) {
        snprintf(msg, sizeof msg, "'messages[%d].tool_calls' must be an array", i);
        return bad(e, "messages", msg);
    }
    int k = 0;
    for (const cJSON *c = calls->child; c; c = c->next, k++) {
        const cJSON *fn = opt(c, "function");
        const cJSON *name = fn ? opt(fn, "name") : NULL, *args = fn ? opt(fn, "arguments") : NULL;
        if (!cJSON_IsObject(fn) || !cJSON_IsString(name) || !cJSON_IsString(args)) {
            snprintf(msg, sizeof msg, "'messages[%d].tool_calls[%d]' needs function.name and function.arguments "
                     "(a JSON string)", i, k);
            return bad(e, "messages", msg);
        }
    }
    return 0;
}

int oai_render_chat(const struct oai_model *m, const struct cJSON *root, const struct colibri_chat_msg *msgs, int n,
                    struct job_params *p, char **text, size_t *len, struct oai_error *e)
{
    const cJSON *tools = opt(root, "tools"), *choice = opt(root, "tool_choice"), *par = opt(root, "parallel_tool_calls");
    if (tools && check_tools(tools, e)) return -1;
    int use_tools = tools && cJSON_GetArraySize(tools) > 0;
    if (choice) {
        if (cJSON_IsString(choice) && !strcmp(choice->valuestring, "none")) use_tools = 0;
        else if (!(cJSON_IsString(choice) && !strcmp(choice->valuestring, "auto")))
            return bad(e, "tool_choice", "'tool_choice' may be \"auto\" or \"none\"; \"required\" and a named "
                                         "function are not supported by colibri");
    }
    if (par && cJSON_IsFalse(par) && use_tools)
        return bad(e, "parallel_tool_calls", "'parallel_tool_calls': false is not supported by colibri");
    if (use_tools && p->stream)
        return bad(e, "stream", "streaming with tools is not supported by colibri; send \"stream\": false");
    cJSON *arr = cJSON_CreateArray();
    const cJSON *src = cJSON_GetObjectItemCaseSensitive(root, "messages")->child;
    for (int i = 0; arr && i < n; i++, src = src->next) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddItemToArray(arr, o);
        cJSON_AddStringToObject(o, "role", msgs[i].role);
        if (msgs[i].content) cJSON_AddStringToObject(o, "content", msgs[i].content);
        else cJSON_AddNullToObject(o, "content");
        const cJSON *calls = opt(src, "tool_calls");
        if (calls) {
            if (check_tool_calls(calls, i, e)) { cJSON_Delete(arr); return -1; }
            if (cJSON_GetArraySize(calls)) cJSON_AddItemToObject(o, "tool_calls", cJSON_Duplicate(calls, 1));
        }
        static const char *const STR_FIELDS[] = { "tool_call_id", "name", "reasoning_content" };
        for (int k = 0; k < 3; k++) {
            const cJSON *v = opt(src, STR_FIELDS[k]);
            if (!v) continue;
            if (!cJSON_IsString(v)) {
                char msg[128];
                snprintf(msg, sizeof msg, "'messages[%d].%s' must be a string", i, STR_FIELDS[k]);
                cJSON_Delete(arr);
                return bad(e, "messages", msg);
            }
            cJSON_AddStringToObject(o, STR_FIELDS[k], v->valuestring);
        }
    }
    char *mj = arr ? cJSON_PrintUnformatted(arr) : NULL, *tj = use_tools ? cJSON_PrintUnformatted(tools) : NULL;
    cJSON_Delete(arr);
    if (!mj || (use_tools && !tj)) {
        free(mj);
        free(tj);
        oai_error_set(e, 500, "server_error", NULL, NULL, "out of memory");
        return -1;
    }
    struct colibri_err err = { 0 };
    int r = colibri_chat_render_json(m->tok, mj, tj, NULL, 1, text, len, &err);
    free(mj);
    free(tj);
    if (r) {
        oai_error_set(e, r == COLIBRI_ENOMEM ? 500 : 400, r == COLIBRI_ENOMEM ? "server_error" : BAD, NULL,
                      use_tools && r == COLIBRI_EUNSUPPORTED ? "tools" : "messages", "the chat template failed: %s",
                      err.msg);
        return -1;
    }
    p->parse_tools = use_tools;
    /* thinking templates (R1, V3.1 with thinking) open the reasoning in the prompt itself */
    const char *end = *text + *len;
    while (end > *text && (end[-1] == '\n' || end[-1] == ' ')) end--;
    p->think_open = end - *text >= 7 && !memcmp(end - 7, "<think>", 7);
    return 0;
}

int oai_split_reasoning(const char *text, int think_open, char **reasoning, char **content)
{
    *reasoning = *content = NULL;
    const char *r = text;
    while (*r == ' ' || *r == '\n') r++;
    int opened = !strncmp(r, "<think>", 7);
    if (!opened && !think_open) return 0;
    if (opened) r += 7;
    const char *close = strstr(r, "</think>");
    if (!close) {   /* cut off while reasoning: all of it is reasoning */
        *reasoning = trim_dup(r, r + strlen(r));
        *content = strdup("");
    } else {
        *reasoning = trim_dup(r, close);
        const char *c = close + 8;
        while (*c == '\n' || *c == ' ') c++;
        *content = strdup(c);
    }
    if (!*reasoning || !*content) { free(*reasoning); free(*content); *reasoning = *content = NULL; return 0; }
    return 1;
}

/* ------------------------------------------------------------ reply parsing */

struct call { char *name, *args; };

static char *dup_n(const char *s, size_t n)
{
    char *d = malloc(n + 1);
    if (d) { memcpy(d, s, n); d[n] = 0; }
    return d;
}

static char *trim_dup(const char *a, const char *b)
{
    while (a < b && (*a == ' ' || *a == '\n' || *a == '\r' || *a == '\t')) a++;
    while (b > a && (b[-1] == ' ' || b[-1] == '\n' || b[-1] == '\r' || b[-1] == '\t')) b--;
    return dup_n(a, (size_t)(b - a));
}

static int valid_json_object(const char *s)
{
    cJSON *j = cJSON_Parse(s);
    int ok = cJSON_IsObject(j);
    cJSON_Delete(j);
    return ok;
}

/* One call between begin and end markers, or 0 if it does not parse. */
static int parse_one(const char *fmt, const char *a, const char *b, struct call *c)
{
    c->name = c->args = NULL;
    if (!strcmp(fmt, "deepseek")) {
        static const char SEP[] = "<｜tool▁sep｜>";
        const char *sep = strstr(a, SEP);
        if (!sep || sep >= b) return 0;
        const char *rest = sep + strlen(SEP);
        if (sep - a == 8 && !memcmp(a, "function", 8)) {   /* V3 / R1: function<sep>NAME\n```json\nARGS\n``` */
            const char *nl = memchr(rest, '\n', (size_t)(b - rest));
            const char *open = nl ? strstr(nl, "```json") : NULL;
            const char *close = open ? strstr(open + 7, "```") : NULL;
            if (!nl || !open || !close || close > b) return 0;
            c->name = trim_dup(rest, nl);
            c->args = trim_dup(open + 7, close);
        } else {                                             /* V3.1: NAME<sep>ARGS */
            c->name = trim_dup(a, sep);
            c->args = trim_dup(rest, b);
        }
    } else if (!strcmp(fmt, "kimi")) {                      /* functions.NAME:IDX<|tool_call_argument_begin|>ARGS */
        static const char ARG[] = "<|tool_call_argument_begin|>";
        const char *arg = strstr(a, ARG);
        if (!arg || arg >= b) return 0;
        const char *id0 = a, *dot = memchr(a, '.', (size_t)(arg - a)), *colon = NULL;
        for (const char *q = arg; q > id0; q--) if (q[-1] == ':') { colon = q - 1; break; }
        if (!dot || !colon || colon < dot) return 0;
        c->name = trim_dup(dot + 1, colon);
        c->args = trim_dup(arg + strlen(ARG), b);
    } else {                                                /* hermes: {"name": ..., "arguments": {...}} */
        char *body = trim_dup(a, b);
        cJSON *j = body ? cJSON_Parse(body) : NULL;
        free(body);
        const cJSON *nm = cJSON_GetObjectItemCaseSensitive(j, "name"), *ar = cJSON_GetObjectItemCaseSensitive(j, "arguments");
        if (cJSON_IsString(nm) && cJSON_IsObject(ar)) {
            c->name = strdup(nm->valuestring);
            c->args = cJSON_PrintUnformatted(ar);
        }
        cJSON_Delete(j);
    }
    if (!c->name || !c->args || !c->name[0] || !valid_json_object(c->args)) {
        free(c->name);
        free(c->args);
        c->name = c->args = NULL;
        return 0;
    }
    return 1;
}

static const struct { const char *fmt, *section, *begin, *end; } SYNTAX[] = {
    { "deepseek", "<｜tool▁calls▁begin｜>", "<｜tool▁call▁begin｜>", "<｜tool▁call▁end｜>" },
    { "kimi", "<|tool_calls_section_begin|>", "<|tool_call_begin|>", "<|tool_call_end|>" },
    { "hermes", "<tool_call>", "<tool_call>", "</tool_call>" },
};

int oai_parse_tool_calls(const char *text, struct cJSON **calls_out, char **content_out)
{
    *calls_out = NULL;
    *content_out = NULL;
    for (size_t s = 0; s < sizeof SYNTAX / sizeof *SYNTAX; s++) {
        const char *sec = strstr(text, SYNTAX[s].section);
        if (!sec) continue;
        cJSON *arr = cJSON_CreateArray();
        const char *p = sec;
        int n = 0, ok = 1;
        while (ok && (p = strstr(p, SYNTAX[s].begin))) {
            const char *a = p + strlen(SYNTAX[s].begin), *b = strstr(a, SYNTAX[s].end);
            if (!b) { ok = 0; break; }
            struct call c;
            if (!parse_one(SYNTAX[s].fmt, a, b, &c)) { ok = 0; break; }
            cJSON *tc = cJSON_CreateObject(), *fn = cJSON_CreateObject();
            char id[32];
            snprintf(id, sizeof id, "call_%d", n);
            cJSON_AddStringToObject(tc, "id", id);
            cJSON_AddStringToObject(tc, "type", "function");
            cJSON_AddStringToObject(fn, "name", c.name);
            cJSON_AddStringToObject(fn, "arguments", c.args);
            cJSON_AddItemToObject(tc, "function", fn);
            cJSON_AddItemToArray(arr, tc);
            free(c.name);
            free(c.args);
            n++;
            p = b + strlen(SYNTAX[s].end);
        }
        if (!ok || !n) { cJSON_Delete(arr); return 0; }   /* left as content */
        *content_out = trim_dup(text, sec);
        *calls_out = arr;
        return n;
    }
    return 0;
}
