/* tok/tok_chat_v4.c - DeepSeek-V4's prompt format (contract in
 * tok_chat_v4.h): the request is checked, its messages merged and ordered
 * as encode_messages does (tool results into user turns, results in call
 * order, reasoning dropped before the last user turn), then each message is
 * rendered with what follows it deciding the assistant opening. */
#include "tok/tok_chat_v4.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/strbuf.h"
#include "tok/jinja.h"
#include "tok/jinja_internal.h"

#define BOS "<｜begin▁of▁sentence｜>"
#define EOS "<｜end▁of▁sentence｜>"
#define USER "<｜User｜>"
#define ASSISTANT "<｜Assistant｜>"
#define THINK "<think>"
#define UNTHINK "</think>"
#define DSML "｜DSML｜"

static const char EFFORT_MAX[] =
    "Reasoning Effort: Absolute maximum with no shortcuts permitted.\n"
    "You MUST be very thorough in your thinking and comprehensively decompose the problem to resolve the root "
    "cause, rigorously stress-testing your logic against all potential paths, edge cases, and adversarial "
    "scenarios.\n"
    "Explicitly write out your entire deliberation process, documenting every intermediate step, considered "
    "alternative, and rejected hypothesis to ensure absolutely no assumption is left unchecked.\n\n";

static const char TOOLS_HEAD[] =
    "## Tools\n\n"
    "You have access to a set of tools to help answer the user's question. You can invoke tools by writing a "
    "\"<" DSML "tool_calls>\" block like the following:\n\n"
    "<" DSML "tool_calls>\n"
    "<" DSML "invoke name=\"$TOOL_NAME\">\n"
    "<" DSML "parameter name=\"$PARAMETER_NAME\" string=\"true|false\">$PARAMETER_VALUE</" DSML "parameter>\n"
    "...\n"
    "</" DSML "invoke>\n"
    "<" DSML "invoke name=\"$TOOL_NAME2\">\n"
    "...\n"
    "</" DSML "invoke>\n"
    "</" DSML "tool_calls>\n\n"
    "String parameters should be specified as is and set `string=\"true\"`. For all other types (numbers, "
    "booleans, arrays, objects), pass the value in JSON format and set `string=\"false\"`.\n\n"
    "If thinking_mode is enabled (triggered by " THINK "), you MUST output your complete reasoning inside "
    THINK "..." UNTHINK " BEFORE any tool calls or final response.\n\n"
    "Otherwise, output directly after " UNTHINK " with tool calls or final response.\n\n"
    "### Available Tool Schemas\n\n";

static const char TOOLS_TAIL[] =
    "\n\nYou MUST strictly follow the above defined tool name and parameter schemas to invoke tool calls.\n";

/* ------------------------------------------------------ json.dumps */

static void json_str(struct strbuf *b, const char *s)
{
    base_sb_puts(b, "\"");
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        switch (*p) {
        case '"': base_sb_puts(b, "\\\""); break;
        case '\\': base_sb_puts(b, "\\\\"); break;
        case '\n': base_sb_puts(b, "\\n"); break;
        case '\r': base_sb_puts(b, "\\r"); break;
        case '\t': base_sb_puts(b, "\\t"); break;
        case '\b': base_sb_puts(b, "\\b"); break;
        case '\f': base_sb_puts(b, "\\f"); break;
        default:
            if (*p < 0x20) base_sb_appendf(b, "\\u%04x", *p);
            else base_sb_append(b, (const char *)p, 1);
        }
    }
    base_sb_puts(b, "\"");
}

static void json_float(struct strbuf *b, double d)
{
    char tmp[64];
    if (isinf(d)) base_sb_puts(b, d < 0 ? "-Infinity" : "Infinity");
    else if (isnan(d)) base_sb_puts(b, "NaN");
    else { jfloat_repr(d, tmp, sizeof tmp); base_sb_puts(b, tmp); }
}

/* json.loads makes a literal with '.', 'e' or 'E' a float, any other an int
 * of any size (so "-0" is 0). */
static void json_number(struct strbuf *b, const cJSON *v)
{
    const char *lit = v->valuestring;
    if (lit) {
        if (strpbrk(lit, ".eE")) { json_float(b, strtod(lit, NULL)); return; }
        const char *digits = lit + (*lit == '-');
        if (strspn(digits, "0") == strlen(digits)) { base_sb_puts(b, "0"); return; }
        base_sb_puts(b, lit);
        return;
    }
    double d = v->valuedouble;
    if (isfinite(d) && d == floor(d) && fabs(d) < 9007199254740992.0) base_sb_appendf(b, "%lld", (long long)d);
    else json_float(b, d);
}

void tok_chat_v4_json(struct strbuf *b, const cJSON *v)
{
    if (cJSON_IsNull(v) || !v) { base_sb_puts(b, "null"); return; }
    if (cJSON_IsTrue(v)) { base_sb_puts(b, "true"); return; }
    if (cJSON_IsFalse(v)) { base_sb_puts(b, "false"); return; }
    if (cJSON_IsNumber(v)) { json_number(b, v); return; }
    if (cJSON_IsString(v)) { json_str(b, v->valuestring ? v->valuestring : ""); return; }
    int obj = cJSON_IsObject(v), first = 1;
    base_sb_puts(b, obj ? "{" : "[");
    for (const cJSON *c = v->child; c; c = c->next) {
        const cJSON *val = c;
        if (obj) {
            /* a Python dict: a repeated key keeps its first place and its last value */
            int seen = 0;
            for (const cJSON *p = v->child; p != c && !seen; p = p->next) seen = !strcmp(p->string, c->string);
            if (seen) continue;
            for (const cJSON *q = c->next; q; q = q->next)
                if (!strcmp(q->string, c->string)) val = q;
        }
        if (!first) base_sb_puts(b, ", ");
        first = 0;
        if (obj) { json_str(b, c->string); base_sb_puts(b, ": "); }
        tok_chat_v4_json(b, val);
    }
    base_sb_puts(b, obj ? "}" : "]");
}

/* ------------------------------------------------------ the request */

enum role { R_SYSTEM, R_USER, R_ASSISTANT, R_TOOL };

/* One part of a user turn: a text, or a tool result with its call's id. */
struct part { int tool; const char *text, *id; };

/* A merged message: a user turn holds parts[0..n_parts). */
struct msg {
    enum role role;
    const char *content, *reasoning;
    const cJSON *calls;         /* assistant: its tool_calls array, or NULL */
    const cJSON *tools;         /* system: the request's tools it renders, or NULL */
    struct part *parts;
    int n_parts;
};

struct opts { int thinking, drop, effort_max; };

static const char *str_or_null(const cJSON *o, const char *k, int *bad)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    if (!v || cJSON_IsNull(v)) return NULL;
    if (!cJSON_IsString(v)) { *bad = 1; return NULL; }
    return v->valuestring;
}

static int check_calls(const cJSON *calls, int i, struct colibri_err *err)
{
    if (!cJSON_IsArray(calls)) return base_err_set(err, COLIBRI_EINVAL, "chat: message %d: tool_calls is not an array", i);
    int k = 0;
    for (const cJSON *c = calls->child; c; c = c->next, k++) {
        const cJSON *fn = cJSON_GetObjectItemCaseSensitive(c, "function");
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(fn, "name");
        const cJSON *args = cJSON_GetObjectItemCaseSensitive(fn, "arguments");
        if (!cJSON_IsObject(fn) || !cJSON_IsString(name) || !cJSON_IsString(args))
            return base_err_set(err, COLIBRI_EINVAL, "chat: message %d: tool_calls[%d] needs function.name and "
                                "function.arguments, both strings (the arguments as OpenAI's JSON text)", i, k);
    }
    return 0;
}

static int get_bool(const cJSON *v, const char *name, int *out, struct colibri_err *err)
{
    if (cJSON_IsNull(v)) return 0;
    if (!cJSON_IsBool(v))
        return base_err_set(err, COLIBRI_EINVAL, "chat: the deepseek_v4 variable '%s' must be true or false", name);
    *out = cJSON_IsTrue(v);
    return 0;
}

static int parse_vars(const cJSON *vars, struct opts *o, struct colibri_err *err)
{
    int think = -1, enable = -1;
    *o = (struct opts){ .drop = 1 };
    for (const cJSON *v = vars ? vars->child : NULL; v; v = v->next) {
        int rc = 0;
        if (!strcmp(v->string, "thinking")) rc = get_bool(v, v->string, &think, err);
        else if (!strcmp(v->string, "enable_thinking")) rc = get_bool(v, v->string, &enable, err);
        else if (!strcmp(v->string, "drop_thinking")) rc = get_bool(v, v->string, &o->drop, err);
        else if (!strcmp(v->string, "reasoning_effort")) {
            if (cJSON_IsString(v) && !strcmp(v->valuestring, "max")) o->effort_max = 1;
            else if (!cJSON_IsNull(v) && !(cJSON_IsString(v) && !strcmp(v->valuestring, "high")))
                rc = base_err_set(err, COLIBRI_EINVAL, "chat: the deepseek_v4 variable 'reasoning_effort' must be "
                                  "\"high\", \"max\" or null");
        } else {
            rc = base_err_set(err, COLIBRI_EUNSUPPORTED, "chat: the deepseek_v4 format takes no variable '%s' "
                              "(it takes thinking, enable_thinking, reasoning_effort, drop_thinking)", v->string);
        }
        if (rc) return rc;
    }
    if (think >= 0 && enable >= 0 && think != enable)
        return base_err_set(err, COLIBRI_EINVAL, "chat: the deepseek_v4 variables 'thinking' and 'enable_thinking' "
                            "disagree");
    o->thinking = think > 0 || enable > 0;
    return 0;
}

static int check_tools(const cJSON *tools, struct colibri_err *err)
{
    int k = 0;
    for (const cJSON *t = tools->child; t; t = t->next, k++)
        if (!cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(t, "function")))
            return base_err_set(err, COLIBRI_EINVAL, "chat: tools[%d] has no 'function' object", k);
    return 0;
}

/* The call order of the last assistant turn with calls: the index of the
 * last call with id `id`, 0 when none has it (encode's dict lookup). */
static int call_order(const cJSON *calls, const char *id)
{
    int k = 0, found = 0;
    for (const cJSON *c = calls ? calls->child : NULL; c; c = c->next, k++) {
        const cJSON *cid = cJSON_GetObjectItemCaseSensitive(c, "id");
        if (!cJSON_IsString(cid) || !cid->valuestring[0])
            cid = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(c, "function"), "id");
        if (cJSON_IsString(cid) && cid->valuestring[0] && !strcmp(cid->valuestring, id)) found = k;
    }
    return found;
}

/* sort_tool_results_by_call_order: a turn's tool results (more than one)
 * stably sorted by their calls' order, in the places results held. */
static void order_results(struct msg *m, int n)
{
    const cJSON *calls = NULL;
    for (int i = 0; i < n; i++) {
        if (m[i].role == R_ASSISTANT && m[i].calls && cJSON_GetArraySize(m[i].calls)) calls = m[i].calls;
        if (m[i].role != R_USER || !calls) continue;
        int nt = 0;
        for (int p = 0; p < m[i].n_parts; p++) nt += m[i].parts[p].tool;
        if (nt < 2) continue;
        struct part *res = malloc((size_t)nt * sizeof *res);
        int *key = malloc((size_t)nt * sizeof *key);
        if (!res || !key) { free(res); free(key); continue; }   /* the caller's strbuf reports memory */
        int t = 0;
        for (int p = 0; p < m[i].n_parts; p++)
            if (m[i].parts[p].tool) { res[t] = m[i].parts[p]; key[t] = call_order(calls, res[t].id); t++; }
        for (int a = 1; a < nt; a++)    /* insertion sort: stable */
            for (int b = a; b > 0 && key[b - 1] > key[b]; b--) {
                struct part tp = res[b]; res[b] = res[b - 1]; res[b - 1] = tp;
                int tk = key[b]; key[b] = key[b - 1]; key[b - 1] = tk;
            }
        t = 0;
        for (int p = 0; p < m[i].n_parts; p++) if (m[i].parts[p].tool) m[i].parts[p] = res[t++];
        free(res);
        free(key);
    }
}

/* merge_tool_messages over the request's messages (and the tools' system
 * message): m (room for n + 1) and parts (room for n). *nm: merged count. */
static int merge(const cJSON *messages, const cJSON *tools, struct msg *m, struct part *parts, int *nm,
                 struct colibri_err *err)
{
    int n = 0, np = 0, i = 0;
    const cJSON *first = messages->child;
    int tools_first = tools && first && cJSON_IsString(cJSON_GetObjectItemCaseSensitive(first, "role")) &&
                      !strcmp(cJSON_GetObjectItemCaseSensitive(first, "role")->valuestring, "system");
    if (tools && !tools_first) m[n++] = (struct msg){ .role = R_SYSTEM, .content = "", .tools = tools };
    for (const cJSON *o = first; o; o = o->next, i++) {
        if (!cJSON_IsObject(o)) return base_err_set(err, COLIBRI_EINVAL, "chat: message %d is not an object", i);
        for (const cJSON *f = o->child; f; f = f->next) {
            static const char *const KNOWN[] = { "role", "content", "reasoning_content", "tool_calls",
                                                 "tool_call_id", "name" };
            int known = 0;
            for (size_t k = 0; k < sizeof KNOWN / sizeof *KNOWN && !known; k++) known = !strcmp(f->string, KNOWN[k]);
            if (!known)
                return base_err_set(err, COLIBRI_EUNSUPPORTED, "chat: message %d: the deepseek_v4 format has no "
                                    "place for '%s'", i, f->string);
        }
        const cJSON *role = cJSON_GetObjectItemCaseSensitive(o, "role");
        const char *r = cJSON_IsString(role) ? role->valuestring : NULL;
        int bad = 0;
        const char *content = str_or_null(o, "content", &bad);
        if (bad) return base_err_set(err, COLIBRI_EUNSUPPORTED, "chat: message %d: the deepseek_v4 format renders "
                                     "only string (or null) content", i);
        const char *reasoning = str_or_null(o, "reasoning_content", &bad);
        const char *call_id = str_or_null(o, "tool_call_id", &bad);
        if (bad) return base_err_set(err, COLIBRI_EINVAL, "chat: message %d: reasoning_content and tool_call_id "
                                     "must be strings", i);
        const cJSON *calls = cJSON_GetObjectItemCaseSensitive(o, "tool_calls");
        if (cJSON_IsNull(calls)) calls = NULL;
        if (!r || (strcmp(r, "system") && strcmp(r, "user") && strcmp(r, "assistant") && strcmp(r, "tool")))
            return base_err_set(err, COLIBRI_EINVAL, "chat: message %d has role '%s' (expected system, user, "
                                "assistant or tool)", i, r ? r : "(null)");
        if (calls && strcmp(r, "assistant"))
            return base_err_set(err, COLIBRI_EINVAL, "chat: message %d: only an assistant message has tool_calls", i);
        if (calls && check_calls(calls, i, err)) return err->code;
        struct msg *last = n ? &m[n - 1] : NULL;
        if (!strcmp(r, "tool") || !strcmp(r, "user")) {
            int tool = r[0] == 't';
            /* DeepSeek's encoder renders a null result as "None" */
            if (tool && !content && cJSON_GetObjectItemCaseSensitive(o, "content"))
                return base_err_set(err, COLIBRI_EINVAL, "chat: message %d: a tool result's content is null", i);
            parts[np] = (struct part){ .tool = tool, .text = content ? content : "", .id = call_id ? call_id : "" };
            if (last && last->role == R_USER) last->n_parts++;
            else m[n++] = (struct msg){ .role = R_USER, .parts = &parts[np], .n_parts = 1 };
            np++;
            continue;
        }
        m[n++] = (struct msg){ .role = r[0] == 's' ? R_SYSTEM : R_ASSISTANT, .content = content,
                               .reasoning = reasoning, .calls = calls,
                               .tools = tools && tools_first && i == 0 ? tools : NULL };
    }
    *nm = n;
    return 0;
}

/* ------------------------------------------------------ rendering */

/* encode_arguments_to_dsml: one parameter line per argument. 0, or
 * COLIBRI_EINVAL when the arguments are JSON but not an object. */
static int add_arguments(struct strbuf *b, const char *args, int i, int k, struct colibri_err *err)
{
    const char *end = NULL;
    size_t n = strlen(args);
    cJSON *probe = cJSON_ParseWithLengthOpts(args, n, &end, 0);
    int whole = probe && strspn(end, " \t\n\r") == (size_t)(args + n - end);
    cJSON_Delete(probe);
    cJSON *v = whole ? tok_jinja_json_parse(args, n) : NULL;
    if (whole && !v) return base_err_set(err, COLIBRI_ENOMEM, "chat: out of memory");
    if (!v) {   /* not JSON: the text itself, as one string argument */
        base_sb_appendf(b, "<" DSML "parameter name=\"arguments\" string=\"true\">%s</" DSML "parameter>", args);
        return 0;
    }
    if (!cJSON_IsObject(v)) {
        cJSON_Delete(v);
        return base_err_set(err, COLIBRI_EINVAL, "chat: message %d: tool_calls[%d].function.arguments is JSON but "
                            "not an object", i, k);
    }
    int first = 1;
    for (const cJSON *c = v->child; c; c = c->next) {
        const cJSON *val = c;
        int seen = 0;
        for (const cJSON *p = v->child; p != c && !seen; p = p->next) seen = !strcmp(p->string, c->string);
        if (seen) continue;
        for (const cJSON *q = c->next; q; q = q->next) if (!strcmp(q->string, c->string)) val = q;
        if (!first) base_sb_puts(b, "\n");
        first = 0;
        int is_str = cJSON_IsString(val);
        base_sb_appendf(b, "<" DSML "parameter name=\"%s\" string=\"%s\">", c->string, is_str ? "true" : "false");
        if (is_str) base_sb_puts(b, val->valuestring);
        else tok_chat_v4_json(b, val);
        base_sb_puts(b, "</" DSML "parameter>");
    }
    cJSON_Delete(v);
    return 0;
}

static int render_calls(struct strbuf *b, const cJSON *calls, int i, struct colibri_err *err)
{
    if (!calls || !calls->child) return 0;
    base_sb_puts(b, "\n\n<" DSML "tool_calls>\n");
    int k = 0;
    for (const cJSON *c = calls->child; c; c = c->next, k++) {
        const cJSON *fn = cJSON_GetObjectItemCaseSensitive(c, "function");
        if (k) base_sb_puts(b, "\n");
        base_sb_appendf(b, "<" DSML "invoke name=\"%s\">\n", cJSON_GetObjectItemCaseSensitive(fn, "name")->valuestring);
        int rc = add_arguments(b, cJSON_GetObjectItemCaseSensitive(fn, "arguments")->valuestring, i, k, err);
        if (rc) return rc;
        base_sb_puts(b, "\n</" DSML "invoke>");
    }
    base_sb_puts(b, "\n</" DSML "tool_calls>");
    return 0;
}

static int render_all(struct strbuf *b, const struct msg *m, int n, const struct opts *o, struct colibri_err *err)
{
    int has_tools = 0, last_user = -1;
    for (int i = 0; i < n; i++) {
        has_tools |= m[i].tools != NULL;
        if (m[i].role == R_USER) last_user = i;
    }
    int drop = o->drop && !has_tools;   /* tool conversations keep every turn's reasoning */
    base_sb_puts(b, BOS);
    for (int i = 0; i < n; i++) {
        if (i == 0 && o->thinking && o->effort_max) base_sb_puts(b, EFFORT_MAX);
        switch (m[i].role) {
        case R_SYSTEM:
            base_sb_puts(b, m[i].content ? m[i].content : "");
            if (m[i].tools) {
                base_sb_puts(b, "\n\n");
                base_sb_puts(b, TOOLS_HEAD);
                int k = 0;
                for (const cJSON *t = m[i].tools->child; t; t = t->next, k++) {
                    if (k) base_sb_puts(b, "\n");
                    tok_chat_v4_json(b, cJSON_GetObjectItemCaseSensitive(t, "function"));
                }
                base_sb_puts(b, TOOLS_TAIL);
            }
            break;
        case R_USER:
            base_sb_puts(b, USER);
            for (int p = 0; p < m[i].n_parts; p++) {
                if (p) base_sb_puts(b, "\n\n");
                if (m[i].parts[p].tool) base_sb_puts(b, "<tool_result>");
                base_sb_puts(b, m[i].parts[p].text);
                if (m[i].parts[p].tool) base_sb_puts(b, "</tool_result>");
            }
            break;
        case R_ASSISTANT:
            /* reasoning before the last user turn is dropped (when drop) */
            if (o->thinking && (!drop || i > last_user)) {
                base_sb_puts(b, m[i].reasoning ? m[i].reasoning : "");
                base_sb_puts(b, UNTHINK);
            }
            base_sb_puts(b, m[i].content ? m[i].content : "");
            if (render_calls(b, m[i].calls, i, err)) return err->code;
            base_sb_puts(b, EOS);
            break;
        default:
            break;
        }
        /* the assistant opening follows a user turn that ends the
         * conversation or that an assistant turn follows */
        if (i + 1 < n && m[i + 1].role != R_ASSISTANT) continue;
        if (m[i].role != R_USER) continue;
        base_sb_puts(b, ASSISTANT);
        base_sb_puts(b, o->thinking && (!drop || i >= last_user) ? THINK : UNTHINK);
    }
    return 0;
}

int tok_chat_v4_render(const cJSON *messages, const cJSON *tools, const cJSON *vars, int add_gen, char **out,
                       size_t *out_len, struct colibri_err *err)
{
    if (!cJSON_IsArray(messages)) return base_err_set(err, COLIBRI_EINVAL, "chat: messages are not a JSON array");
    if (tools && !cJSON_IsArray(tools)) return base_err_set(err, COLIBRI_EINVAL, "chat: tools are not a JSON array");
    if (tools && !tools->child) tools = NULL;
    struct opts o;
    int rc = parse_vars(vars, &o, err);
    if (rc || (tools && (rc = check_tools(tools, err)))) return rc;
    int n_in = cJSON_GetArraySize(messages), n = 0;
    struct msg *m = calloc((size_t)n_in + 1, sizeof *m);
    struct part *parts = calloc((size_t)n_in + 1, sizeof *parts);
    if (!m || !parts) {
        free(m);
        free(parts);
        return base_err_set(err, COLIBRI_ENOMEM, "chat: out of memory");
    }
    struct strbuf b = { 0 };
    if (!(rc = merge(messages, tools, m, parts, &n, err))) {
        if (!add_gen && n && m[n - 1].role == R_USER)
            rc = base_err_set(err, COLIBRI_EINVAL, "chat: the deepseek_v4 format always opens the assistant's turn "
                              "after a final user or tool message (DeepSeek's encoder has no add_generation_prompt)");
    }
    if (!rc) {
        order_results(m, n);
        rc = render_all(&b, m, n, &o, err);
    }
    free(m);
    free(parts);
    if (!rc && (b.failed || base_sb_puts(&b, ""))) rc = base_err_set(err, COLIBRI_ENOMEM, "chat: out of memory");
    if (rc) { base_sb_free(&b); return rc; }
    *out = b.s;
    *out_len = b.n;
    return 0;
}
