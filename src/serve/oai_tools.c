/* serve/oai_tools.c - tools on /v1/chat/completions, the request side
 * (contract in oai.h): the conversation (with assistant tool_calls, tool
 * results and reasoning_content) and the tool list go to the model's chat
 * template as they are; tool_choice "required" or a named function becomes a
 * grammar (oai_tool_grammar.c). The reply side is oai_reply.c. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "serve/oai.h"

#define BAD "invalid_request_error"

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

struct named { const char *name; int i; };

static int cmp_named(const void *pa, const void *pb)
{
    const struct named *a = pa, *b = pb;
    int c = strcmp(a->name, b->name);
    return c ? c : (a->i > b->i) - (a->i < b->i);
}

/* Two tools of one name: the first tool that repeats an earlier name and
 * that name's first tool, found by sorting the names (a list of thousands
 * compared pairwise took seconds). 0, or -1 with *e filled. */
static int check_names_unique(const cJSON *tools, int n, struct oai_error *e)
{
    if (n < 2) return 0;
    struct named *v = malloc((size_t)n * sizeof *v);
    if (!v) { oai_error_set(e, 500, "server_error", NULL, NULL, "out of memory for %d tools", n); return -1; }
    int k = 0;
    for (const cJSON *t = tools->child; t; t = t->next, k++)
        v[k] = (struct named){ opt(opt(t, "function"), "name")->valuestring, k };
    qsort(v, (size_t)n, sizeof *v, cmp_named);
    int first = -1, second = n;
    for (int a = 0; a + 1 < n; a++)   /* v[a] starts a run of one name when a == 0 or the name changes */
        if ((a == 0 || strcmp(v[a - 1].name, v[a].name)) && !strcmp(v[a].name, v[a + 1].name) && v[a + 1].i < second) {
            first = v[a].i;
            second = v[a + 1].i;
        }
    int rc = 0;
    if (first >= 0) {
        char msg[256];
        snprintf(msg, sizeof msg, "'tools[%d]' and 'tools[%d]' are both named '%s'", first, second,
                 opt(opt(cJSON_GetArrayItem(tools, first), "function"), "name")->valuestring);
        rc = bad(e, "tools", msg);
    }
    free(v);
    return rc;
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
        const char *nm = name->valuestring;
        size_t n = strlen(nm);
        if (n > 64 || strspn(nm, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-") != n) {
            snprintf(msg, sizeof msg, "'tools[%d].function.name' must be 1 to 64 of a-z, A-Z, 0-9, '_', '.', '-'", i);
            return bad(e, "tools", msg);
        }
    }
    return check_names_unique(tools, i, e);
}

/* tool_choice: *require when a call must be made, *only the function named
 * (NULL: any). 0, or -1 with *e filled. */
static int parse_tool_choice(const cJSON *choice, const cJSON *tools, int *use_tools, int *require, const char **only,
                             struct oai_error *e)
{
    char msg[256];
    *require = 0;
    *only = NULL;
    if (!choice) return 0;
    if (cJSON_IsString(choice) && !strcmp(choice->valuestring, "none")) { *use_tools = 0; return 0; }
    if (cJSON_IsString(choice) && !strcmp(choice->valuestring, "auto")) return 0;
    if (cJSON_IsString(choice) && !strcmp(choice->valuestring, "required")) *require = 1;
    else {
        const cJSON *type = opt(choice, "type"), *fn = opt(choice, "function");
        const cJSON *name = cJSON_IsObject(fn) ? opt(fn, "name") : NULL;
        if (!cJSON_IsObject(choice) || !cJSON_IsString(type) || strcmp(type->valuestring, "function") ||
            !cJSON_IsString(name))
            return bad(e, "tool_choice", "'tool_choice' must be \"none\", \"auto\", \"required\" or "
                                         "{\"type\": \"function\", \"function\": {\"name\": string}}");
        *require = 1;
        *only = name->valuestring;
    }
    if (!*use_tools) return bad(e, "tool_choice", "'tool_choice' requires a call, but 'tools' is empty or absent");
    if (*only) {
        for (const cJSON *t = tools->child; t; t = t->next)
            if (!strcmp(opt(opt(t, "function"), "name")->valuestring, *only)) return 0;
        snprintf(msg, sizeof msg, "'tool_choice' names the function '%.64s', which is not in 'tools'", *only);
        return bad(e, "tool_choice", msg);
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

/* The messages for the template: msgs[0..n) with the fields a struct
 * colibri_chat_msg cannot carry taken from root's messages. args_objects:
 * each tool call's arguments string parsed into its JSON value (a string
 * that is not JSON is a 400 naming the message and the call). NULL with *e
 * filled on any problem. */
static cJSON *template_messages(const cJSON *root, const struct colibri_chat_msg *msgs, int n, int args_objects,
                                struct oai_error *e)
{
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
            if (check_tool_calls(calls, i, e)) { cJSON_Delete(arr); return NULL; }
            cJSON *dup = cJSON_GetArraySize(calls) ? cJSON_Duplicate(calls, 1) : NULL;
            int k = 0;
            for (cJSON *c = dup && args_objects ? dup->child : NULL; c; c = c->next, k++) {
                cJSON *fn = cJSON_GetObjectItemCaseSensitive(c, "function");
                /* checked here, then given to the template as the client's own
                 * text, so 2.0 stays a float there (the library keeps number
                 * literals; printing a parsed value would write 2) */
                const char *args = cJSON_GetObjectItemCaseSensitive(fn, "arguments")->valuestring, *end = NULL;
                cJSON *parsed = cJSON_ParseWithOpts(args, &end, 1);
                cJSON *val = parsed ? cJSON_CreateRaw(args) : NULL;
                cJSON_Delete(parsed);
                if (!val) {
                    char msg[256];
                    snprintf(msg, sizeof msg, "'messages[%d].tool_calls[%d].function.arguments' is not valid JSON; "
                             "this model's chat template needs the arguments as an object", i, k);
                    cJSON_Delete(dup);
                    cJSON_Delete(arr);
                    bad(e, "messages", msg);
                    return NULL;
                }
                cJSON_ReplaceItemInObjectCaseSensitive(fn, "arguments", val);
            }
            if (dup) cJSON_AddItemToObject(o, "tool_calls", dup);
        }
        static const char *const STR_FIELDS[] = { "tool_call_id", "name", "reasoning_content" };
        for (int k = 0; k < 3; k++) {
            const cJSON *v = opt(src, STR_FIELDS[k]);
            if (!v) continue;
            if (!cJSON_IsString(v)) {
                char msg[128];
                snprintf(msg, sizeof msg, "'messages[%d].%s' must be a string", i, STR_FIELDS[k]);
                cJSON_Delete(arr);
                bad(e, "messages", msg);
                return NULL;
            }
            cJSON_AddStringToObject(o, STR_FIELDS[k], v->valuestring);
        }
    }
    if (!arr) oai_error_set(e, 500, "server_error", NULL, NULL, "out of memory");
    return arr;
}

/* Renders the template over messages (as built by template_messages) and
 * tools_json, with the template keyword arguments kwargs_json (or NULL).
 * 0, or the library's code with err filled. */
static int render(const struct oai_model *m, cJSON *messages, const char *tools_json, const char *kwargs_json,
                  char **text, size_t *len, struct colibri_err *err)
{
    char *mj = cJSON_PrintUnformatted(messages);
    if (!mj) return base_err_set(err, COLIBRI_ENOMEM, "out of memory");
    int r = colibri_chat_render_json(m->tok, mj, tools_json, kwargs_json, 1, text, len, err);
    free(mj);
    return r;
}

/* JSON text skipping over valid JSON (cJSON has parsed it): whitespace, a
 * string from its opening quote, any value. */
static const char *skip_ws(const char *p, const char *e)
{
    while (p < e && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')) p++;
    return p;
}

static const char *skip_string(const char *p, const char *e)
{
    for (p++; p < e && *p != '"'; p++) if (*p == '\\') p++;
    return p < e ? p + 1 : e;
}

static const char *skip_value(const char *p, const char *e)
{
    if (p < e && *p == '"') return skip_string(p, e);
    int depth = 0;
    while (p < e) {
        if (*p == '"') { p = skip_string(p, e); continue; }
        if (*p == '{' || *p == '[') depth++;
        else if (*p == '}' || *p == ']') { if (depth-- == 0) return p; if (!depth) return p + 1; }
        else if (!depth && (*p == ',' || *p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')) return p;
        p++;
    }
    return e;
}

/* The source text of the top-level member key of the JSON object
 * body[0..len) (the first, as cJSON finds it), or NULL. */
static const char *member_text(const char *body, size_t len, const char *key, size_t *n)
{
    const char *p = skip_ws(body, body + len), *e = body + len;
    if (p >= e || *p != '{') return NULL;
    for (p++;;) {
        p = skip_ws(p, e);
        if (p >= e || *p != '"') return NULL;
        const char *k = p + 1;
        p = skip_string(p, e);
        size_t kn = (size_t)(p - 1 - k);
        p = skip_ws(p, e);
        if (p >= e || *p != ':') return NULL;
        const char *v = skip_ws(p + 1, e);
        p = skip_value(v, e);
        if (kn == strlen(key) && !memcmp(k, key, kn)) { *n = (size_t)(p - v); return v; }
        p = skip_ws(p, e);
        if (p >= e || *p != ',') return NULL;
        p++;
    }
}

/* chat_template_kwargs (vLLM's and SGLang's name): an object whose every key
 * reaches the template as a variable, as apply_chat_template's **kwargs do
 * ({"thinking": true}, {"enable_thinking": false}, documents). The names
 * the server sets itself are refused by name. *out: its JSON text as the
 * client sent it (so 2.0 stays a float), or NULL. */
static int template_kwargs(const struct oai_model *m, const cJSON *root, const char *body, size_t body_len, char **out,
                           struct oai_error *e)
{
    const cJSON *kw = opt(root, "chat_template_kwargs");
    *out = NULL;
    if (!kw) return 0;
    if (!cJSON_IsObject(kw)) return bad(e, "chat_template_kwargs", "'chat_template_kwargs' must be an object");
    static const char *const SET[] = { "messages", "tools", "add_generation_prompt" };
    for (const cJSON *it = kw->child; it; it = it->next)
        for (size_t k = 0; k < sizeof SET / sizeof *SET; k++)
            if (!strcmp(it->string, SET[k])) {
                oai_error_set(e, 400, BAD, NULL, "chat_template_kwargs",
                              "'chat_template_kwargs.%s' is set by the server itself", SET[k]);
                return -1;
            }
    for (const cJSON *it = kw->child; it; it = it->next)
        if (colibri_tokenizer_chat_reads(m->tok, it->string) == 0) {
            oai_error_set(e, 400, BAD, NULL, "chat_template_kwargs",
                          "'chat_template_kwargs.%.64s': the chat template (%s) never reads '%.64s', so it would "
                          "have no effect", it->string, colibri_tokenizer_chat_origin(m->tok), it->string);
            return -1;
        }
    if (!kw->child) return 0;
    size_t n = 0;
    const char *src = body ? member_text(body, body_len, "chat_template_kwargs", &n) : NULL;
    if (src && n && *src == '{') {
        if ((*out = malloc(n + 1))) { memcpy(*out, src, n); (*out)[n] = 0; }
    } else {
        *out = cJSON_PrintUnformatted(kw);
    }
    if (!*out) {
        oai_error_set(e, 500, "server_error", NULL, NULL, "out of memory");
        return -1;
    }
    return 0;
}

/* The first bytes of s that any template writes as they are (up to a
 * character a template might escape), at most cap: *n of them. */
static const char *plain_prefix(const char *s, size_t cap, size_t *n)
{
    size_t k = 0;
    while (s[k] && k < cap && !strchr("\"\\\n\r\t<>&'", s[k])) k++;
    *n = k;
    return s;
}

/* A template that leaves a tool call or a tool result of the history out of
 * the prompt would drop it silently: each call's name and the start of each
 * result must appear in the rendered text. 0, or -1 with *e filled. */
static int check_rendered(const cJSON *root, const char *text, size_t len, struct oai_error *e)
{
    const cJSON *msgs = opt(root, "messages");
    int i = 0;
    for (const cJSON *m = msgs ? msgs->child : NULL; m; m = m->next, i++) {
        const cJSON *calls = opt(m, "tool_calls"), *role = opt(m, "role"), *content = opt(m, "content");
        int k = 0;
        for (const cJSON *c = calls ? calls->child : NULL; c; c = c->next, k++) {
            const cJSON *name = opt(opt(c, "function"), "name");
            if (!cJSON_IsString(name) || memmem(text, len, name->valuestring, strlen(name->valuestring))) continue;
            oai_error_set(e, 400, BAD, NULL, "messages",
                          "the chat template leaves messages[%d].tool_calls[%d] ('%.64s') out of the prompt; serve "
                          "with --chat-template naming a template that renders tool calls", i, k, name->valuestring);
            return -1;
        }
        if (!cJSON_IsString(role) || strcmp(role->valuestring, "tool") || !cJSON_IsString(content)) continue;
        size_t n;
        const char *s = plain_prefix(content->valuestring, 64, &n);
        if (!n || memmem(text, len, s, n)) continue;
        oai_error_set(e, 400, BAD, NULL, "messages",
                      "the chat template leaves the tool result messages[%d] out of the prompt; serve with "
                      "--chat-template naming a template that renders tool results", i);
        return -1;
    }
    return 0;
}

/* reasoning_effort (OpenAI's): the template's own switch gets it, a
 * variable reasoning_effort as it is (gpt-oss), else thinking or
 * enable_thinking (DeepSeek-V3.1 and later, Qwen3, GLM) off for "none" and
 * "minimal" and on otherwise; chat_template_kwargs that set the same
 * variable win. A template without a switch refuses it by name. *kj (the
 * kwargs text or NULL) gets the variable. 0, or -1 with *e filled. */
static int reasoning_effort(const struct oai_model *m, const cJSON *root, char **kj, struct oai_error *e)
{
    const cJSON *eff = opt(root, "reasoning_effort");
    if (!eff) return 0;
    static const char *const LEVELS[] = { "none", "minimal", "low", "medium", "high" };
    int level = -1;
    for (int i = 0; i < 5; i++) if (cJSON_IsString(eff) && !strcmp(eff->valuestring, LEVELS[i])) level = i;
    if (level < 0) return bad(e, "reasoning_effort", "'reasoning_effort' must be none, minimal, low, medium or high");
    static const char *const VARS[] = { "reasoning_effort", "thinking", "enable_thinking" };
    int v = 0;
    while (v < 3 && colibri_tokenizer_chat_reads(m->tok, VARS[v]) != 1) v++;
    if (v == 3) {
        oai_error_set(e, 400, BAD, NULL, "reasoning_effort", "'reasoning_effort': the chat template (%s) has no "
                      "reasoning switch (a variable reasoning_effort, thinking or enable_thinking)",
                      colibri_tokenizer_chat_origin(m->tok));
        return -1;
    }
    const cJSON *kw = opt(root, "chat_template_kwargs");
    if (cJSON_GetObjectItemCaseSensitive(kw, VARS[v])) return 0;
    char add[64];
    if (v == 0) snprintf(add, sizeof add, "\"%s\": \"%s\"", VARS[v], LEVELS[level]);
    else snprintf(add, sizeof add, "\"%s\": %s", VARS[v], level < 2 ? "false" : "true");
    size_t n = *kj ? strlen(*kj) : 0;
    char *out = malloc(n + strlen(add) + 4);
    if (!out) { oai_error_set(e, 500, "server_error", NULL, NULL, "out of memory"); return -1; }
    if (*kj) {      /* an object with members: the new one goes before its closing brace */
        char *close = strrchr(*kj, '}');
        size_t k = close ? (size_t)(close - *kj) : n;
        sprintf(out, "%.*s, %s}", (int)k, *kj, add);
    } else {
        sprintf(out, "{%s}", add);
    }
    free(*kj);
    *kj = out;
    return 0;
}

/* The tools as the client wrote them (so a template's tojson, or
 * DeepSeek-V4's json.dumps, prints 2.0 as 2.0), else as cJSON prints them.
 * NULL when out of memory. */
static char *tools_text(const cJSON *tools, const char *body, size_t body_len)
{
    size_t n = 0;
    const char *src = body ? member_text(body, body_len, "tools", &n) : NULL;
    if (!src || !n || *src != '[') return cJSON_PrintUnformatted(tools);
    char *t = malloc(n + 1);
    if (t) { memcpy(t, src, n); t[n] = 0; }
    return t;
}

static int has_tool_calls(const cJSON *messages)
{
    for (const cJSON *o = messages->child; o; o = o->next)
        if (cJSON_GetObjectItemCaseSensitive(o, "tool_calls")) return 1;
    return 0;
}

int oai_render_chat(const struct oai_model *m, const struct cJSON *root, const char *body, size_t body_len,
                    const struct colibri_chat_msg *msgs, int n, struct job_params *p, char **text, size_t *len,
                    struct oai_error *e)
{
    const cJSON *tools = opt(root, "tools"), *choice = opt(root, "tool_choice"), *par = opt(root, "parallel_tool_calls");
    if (tools && check_tools(tools, e)) return -1;
    int use_tools = tools && cJSON_GetArraySize(tools) > 0;
    int require = 0;
    const char *only = NULL;
    if (parse_tool_choice(choice, tools, &use_tools, &require, &only, e)) return -1;
    if (par && !cJSON_IsBool(par)) return bad(e, "parallel_tool_calls", "'parallel_tool_calls' must be a boolean");
    /* without a grammar nothing stops a second call; with one, one call is what it allows */
    if (par && cJSON_IsFalse(par) && use_tools && !require)
        return bad(e, "parallel_tool_calls", "'parallel_tool_calls': false is supported by colibri only with a "
                                             "tool_choice that requires a call (\"required\" or a named function)");
    if (require && p->grammar)
        return bad(e, "tool_choice", "give 'response_format' (or 'grammar') or a 'tool_choice' that requires a call, "
                                     "not both");
    if (use_tools && p->stream && p->logprobs)
        return bad(e, "logprobs", "'logprobs' with streamed tool calls is not supported by colibri");
    char *kj = NULL;
    if (template_kwargs(m, root, body, body_len, &kj, e) || reasoning_effort(m, root, &kj, e)) {
        free(kj);
        return -1;
    }
    cJSON *arr = template_messages(root, msgs, n, 0, e);
    if (!arr) { free(kj); return -1; }
    char *tj = use_tools ? tools_text(tools, body, body_len) : NULL;
    struct colibri_err err = { 0 };
    int r = use_tools && !tj ? base_err_set(&err, COLIBRI_ENOMEM, "out of memory")
                             : render(m, arr, tj, kj, text, len, &err);
    /* OpenAI clients send tool-call arguments as a JSON string; templates
     * written for transformers' documented form (GLM-4.5 and later,
     * Qwen3-Coder) iterate them as a mapping and fail on a string. The rule,
     * vLLM's form applied only where it is needed: when the template fails
     * on a conversation with tool calls, it is rendered again with each
     * call's arguments parsed into their JSON value. Templates that take the
     * string keep getting it unchanged; DeepSeek-V4's built-in format takes
     * only the string, so its refusals stand as they are. */
    if (r && r != COLIBRI_ENOMEM && has_tool_calls(arr) && strcmp(colibri_tokenizer_chat_name(m->tok), "deepseek_v4")) {
        cJSON *objs = template_messages(root, msgs, n, 1, e);
        if (!objs) {
            cJSON_Delete(arr);
            free(tj);
            free(kj);
            return -1;
        }
        struct colibri_err err2 = { 0 };
        int r2 = render(m, objs, tj, kj, text, len, &err2);
        cJSON_Delete(objs);
        if (!r2) r = 0;
        else if (r2 != COLIBRI_ENOMEM) {
            char both[sizeof err.msg];
            snprintf(both, sizeof both, "%s (and with the tool-call arguments as objects: %s)", err.msg, err2.msg);
            memcpy(err.msg, both, sizeof both);
        } else r = r2;
    }
    cJSON_Delete(arr);
    free(kj);
    if (r) free(tj);
    else p->tools_json = tj;    /* the reply's GLM / Qwen3-Coder arguments are typed by it */
    if (r) {
        oai_error_set(e, r == COLIBRI_ENOMEM ? 500 : 400, r == COLIBRI_ENOMEM ? "server_error" : BAD, NULL,
                      use_tools && r == COLIBRI_EUNSUPPORTED ? "tools" : "messages", "the chat template failed: %s",
                      err.msg);
        return -1;
    }
    if (check_rendered(root, *text, *len, e)) {
        free(*text);
        *text = NULL;
        free(p->tools_json);
        p->tools_json = NULL;
        return -1;
    }
    p->parse_tools = use_tools;
    p->tools_required = require;
    /* thinking templates (R1, V3.1 with thinking) open the reasoning in the prompt itself */
    const char *end = *text + *len;
    while (end > *text && (end[-1] == '\n' || end[-1] == ' ')) end--;
    p->think_open = end - *text >= 7 && !memcmp(end - 7, "<think>", 7);
    if (require && serve_oai_tool_grammar(m, tools, only, !(par && cJSON_IsFalse(par)), p->think_open, &p->grammar, e)) {
        free(*text);
        *text = NULL;
        return -1;
    }
    return 0;
}
