/* serve/oai_reply.c - the model's reply on /v1/chat/completions (contract
 * in oai.h): DeepSeek's reasoning split, and the tool-call syntaxes of
 * DeepSeek-V3 / R1, DeepSeek-V3.1, DeepSeek-V4 (DSML), Kimi K2, Hermes/Qwen
 * (<tool_call> JSON), GLM (<tool_call>NAME<arg_key>...) and Qwen3-Coder
 * (<tool_call><function=NAME>...) found in it, whole or (streaming) as far as
 * it has come. A reply that does not parse stays content: never an error. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/strbuf.h"
#include "serve/oai.h"
#include "tok/tok_chat_v4.h"

static char *trim_dup(const char *a, const char *b);
static int is_blank(char c);

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

/* id: the call's own id where the syntax writes one (Kimi's
 * functions.NAME:IDX, which its templates render back), else NULL. */
struct call { char *name, *args, *id; };

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

/* The JSON type a tool's schema gives parameter `key` of function `name`
 * ("string", ...), or NULL when tools_json (the request's tools, or NULL)
 * says nothing about it. *doc holds what the result points into. */
static const char *param_type(const char *tools_json, const char *name, const char *key, cJSON **doc)
{
    if (!tools_json) return NULL;
    if (!*doc && !(*doc = cJSON_Parse(tools_json))) return NULL;
    const cJSON *t;
    cJSON_ArrayForEach(t, *doc) {
        const cJSON *fn = cJSON_GetObjectItemCaseSensitive(t, "function");
        const cJSON *nm = cJSON_GetObjectItemCaseSensitive(fn, "name");
        if (!cJSON_IsString(nm) || strcmp(nm->valuestring, name)) continue;
        const cJSON *props = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(fn, "parameters"),
                                                              "properties");
        const cJSON *ty = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(props, key), "type");
        return cJSON_IsString(ty) ? ty->valuestring : NULL;
    }
    return NULL;
}

/* Adds key = the text v[0..n) to obj. The templates write a string value as
 * it is and any other value as JSON, so a parameter the schema types
 * "string" stays text, and any other value that parses as JSON takes that
 * value (else it is text). 0, or -1 when out of memory. */
static int add_value(cJSON *obj, const char *key, const char *v, size_t n, const char *type)
{
    char *text = dup_n(v, n);
    if (!text) return -1;
    cJSON *val = type && !strcmp(type, "string") ? NULL : cJSON_Parse(text);
    if (!val) val = cJSON_CreateString(text);
    free(text);
    return val && cJSON_AddItemToObject(obj, key, val) ? 0 : -1;
}

/* The XML-like calls inside <tool_call>...</tool_call> (body, trimmed):
 * Qwen3-Coder's <function=NAME><parameter=KEY>\nVALUE\n</parameter>...</function>
 * and GLM's NAME<arg_key>KEY</arg_key><arg_value>VALUE</arg_value>...
 * (blanks between the tags), their values typed by the request's tools. */
static int xml_call(const char *body, const char *tools_json, struct call *c)
{
    cJSON *obj = cJSON_CreateObject(), *doc = NULL;
    const char *p = body;
    int qwen = !strncmp(p, "<function=", 10), ok = obj != NULL;
    const char *name_end = qwen ? strchr(p + 10, '>') : strstr(p, "<arg_key>");
    if (qwen && name_end) c->name = trim_dup(p + 10, name_end), p = name_end + 1;
    else if (!qwen) c->name = trim_dup(p, name_end ? name_end : p + strlen(p)), p = name_end ? name_end : "";
    ok = ok && c->name && c->name[0] && !strpbrk(c->name, "<>\n");
    static const char *const TAGS[2][4] = { { "<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>" },
                                            { "<parameter=", ">", "", "</parameter>" } };
    const char *const *tag = TAGS[qwen];
    while (ok) {
        while (is_blank(*p)) p++;
        if (strncmp(p, tag[0], strlen(tag[0]))) break;
        const char *k0 = p + strlen(tag[0]), *k1 = strstr(k0, tag[1]);
        if (!k1) { ok = 0; break; }
        const char *v0 = k1 + strlen(tag[1]);
        if (!qwen) {
            while (is_blank(*v0)) v0++;
            if (strncmp(v0, tag[2], strlen(tag[2]))) { ok = 0; break; }
            v0 += strlen(tag[2]);
        } else if (*v0 == '\n') v0++;
        const char *v1 = strstr(v0, tag[3]);
        if (!v1) { ok = 0; break; }
        p = v1 + strlen(tag[3]);
        if (qwen && v1 > v0 && v1[-1] == '\n') v1--;
        char *key = trim_dup(k0, k1);
        ok = key && key[0] && add_value(obj, key, v0, (size_t)(v1 - v0), param_type(tools_json, c->name, key, &doc)) == 0;
        free(key);
    }
    if (qwen && ok) {
        while (is_blank(*p)) p++;
        ok = !strncmp(p, "</function>", 11);
        p += ok ? 11 : 0;
    }
    while (ok && is_blank(*p)) p++;
    ok = ok && !*p;                 /* nothing but the calls' tags */
    if (ok) c->args = cJSON_PrintUnformatted(obj);
    cJSON_Delete(obj);
    cJSON_Delete(doc);
    return ok;
}

/* A DeepSeek-V4 call after "<｜DSML｜invoke", up to its end marker b:
 *  name="NAME">\n, then parameters, each
 * <｜DSML｜parameter name="K" string="true|false">V</｜DSML｜parameter>\n.
 * The arguments are built as DeepSeek's parser (encoding_dsv4.py) builds
 * them: {"K": V, ...} with a string value as Python's json.dumps writes it
 * and any other value as the model wrote it (the caller checks that the
 * result is a JSON object); a repeated key fails, as there. */
static int dsml_call(const char *a, const char *b, struct call *c)
{
    static const char P[] = "<｜DSML｜parameter name=\"", PE[] = "</｜DSML｜parameter>", ST[] = "\" string=\"";
    const char *p = a;
    while (p < b && is_blank(*p)) p++;
    if ((size_t)(b - p) < 6 || memcmp(p, "name=\"", 6)) return 0;
    const char *n0 = p + 6, *n1 = memmem(n0, (size_t)(b - n0), "\">\n", 3);
    if (!n1) return 0;
    p = n1 + 3;
    struct strbuf args = { 0 };
    base_sb_puts(&args, "{");
    cJSON *seen = cJSON_CreateObject();
    int ok = seen != NULL, k = 0;
    for (; ok && (size_t)(b - p) > strlen(P) && !memcmp(p, P, strlen(P)); k++) {
        const char *k0 = p + strlen(P), *k1 = memmem(k0, (size_t)(b - k0), ST, strlen(ST));
        const char *t = k1 ? k1 + strlen(ST) : NULL, *v0 = NULL;
        int is_str = t && (size_t)(b - t) >= 6 && !memcmp(t, "true\">", 6);
        if (is_str) v0 = t + 6;
        else if (t && (size_t)(b - t) >= 7 && !memcmp(t, "false\">", 7)) v0 = t + 7;
        const char *v1 = v0 ? memmem(v0, (size_t)(b - v0), PE, strlen(PE)) : NULL;
        char *key = v1 ? dup_n(k0, (size_t)(k1 - k0)) : NULL, *val = key ? dup_n(v0, (size_t)(v1 - v0)) : NULL;
        ok = val && !cJSON_GetObjectItemCaseSensitive(seen, key) && cJSON_AddNullToObject(seen, key);
        if (ok) {
            cJSON *ks = cJSON_CreateString(key), *vs = is_str ? cJSON_CreateString(val) : NULL;
            ok = ks && (vs || !is_str);
            if (ok) {
                base_sb_puts(&args, k ? ", " : "");
                tok_chat_v4_json(&args, ks);
                base_sb_puts(&args, ": ");
                if (is_str) tok_chat_v4_json(&args, vs);
                else base_sb_puts(&args, val);
            }
            cJSON_Delete(ks);
            cJSON_Delete(vs);
            p = v1 + strlen(PE);
            ok = ok && p < b && *p++ == '\n';
        }
        free(key);
        free(val);
    }
    if (ok && !k && p < b && *p == '\n') p++;   /* a call without arguments: name="NAME">\n\n */
    ok = ok && p == b;
    cJSON_Delete(seen);
    base_sb_puts(&args, "}");
    if (!ok || args.failed) { base_sb_free(&args); return 0; }
    c->name = dup_n(n0, (size_t)(n1 - n0));
    c->args = args.s;
    return 1;
}

/* One call between begin and end markers, or 0 if it does not parse. */
static int parse_one(const char *fmt, const char *a, const char *b, const char *tools_json, struct call *c)
{
    c->name = c->args = c->id = NULL;
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
    } else if (!strcmp(fmt, "dsml")) {
        if (!dsml_call(a, b, c)) return 0;
    } else if (!strcmp(fmt, "kimi")) {                      /* functions.NAME:IDX<|tool_call_argument_begin|>ARGS */
        static const char ARG[] = "<|tool_call_argument_begin|>";
        const char *arg = strstr(a, ARG);
        if (!arg || arg >= b) return 0;
        const char *id0 = a, *dot = memchr(a, '.', (size_t)(arg - a)), *colon = NULL;
        for (const char *q = arg; q > id0; q--) if (q[-1] == ':') { colon = q - 1; break; }
        if (!dot || !colon || colon < dot) return 0;
        c->name = trim_dup(dot + 1, colon);
        c->args = trim_dup(arg + strlen(ARG), b);
        c->id = trim_dup(a, arg);
    } else {                                                /* hermes: {"name": ..., "arguments": {...}} */
        char *body = trim_dup(a, b);
        if (body && body[0] != '{') {                       /* GLM's or Qwen3-Coder's tags */
            xml_call(body, tools_json, c);
            free(body);
            goto check;
        }
        cJSON *j = body ? cJSON_Parse(body) : NULL;
        free(body);
        const cJSON *nm = cJSON_GetObjectItemCaseSensitive(j, "name"), *ar = cJSON_GetObjectItemCaseSensitive(j, "arguments");
        if (cJSON_IsString(nm) && cJSON_IsObject(ar)) {
            c->name = strdup(nm->valuestring);
            c->args = cJSON_PrintUnformatted(ar);
        }
        cJSON_Delete(j);
    }
check:
    if (!c->name || !c->args || !c->name[0] || !valid_json_object(c->args)) {
        free(c->name);
        free(c->args);
        free(c->id);
        c->name = c->args = c->id = NULL;
        return 0;
    }
    return 1;
}

static const struct { const char *fmt, *section, *begin, *end; } SYNTAX[] = {
    { "deepseek", "<｜tool▁calls▁begin｜>", "<｜tool▁call▁begin｜>", "<｜tool▁call▁end｜>" },
    { "dsml", "<｜DSML｜tool_calls>", "<｜DSML｜invoke", "</｜DSML｜invoke>" },
    { "kimi", "<|tool_calls_section_begin|>", "<|tool_call_begin|>", "<|tool_call_end|>" },
    { "hermes", "<tool_call>", "<tool_call>", "</tool_call>" },
};
#define N_SYNTAX (int)(sizeof SYNTAX / sizeof *SYNTAX)

/* The syntax whose section marker comes first in s[0..n), *at that marker;
 * -1 when there is none. */
static int first_section(const char *s, size_t n, const char **at)
{
    int best = -1;
    *at = NULL;
    for (int k = 0; k < N_SYNTAX; k++) {
        const char *p = memmem(s, n, SYNTAX[k].section, strlen(SYNTAX[k].section));
        if (p && (!*at || p < *at)) { *at = p; best = k; }
    }
    return best;
}

/* cut: the reply was cut by max_tokens; the calls before the first one
 * that is incomplete or does not parse are kept, and the section's text
 * never becomes content. */
static int parse_calls(const char *text, const char *tools_json, int cut, struct cJSON **calls_out, char **content_out)
{
    *calls_out = NULL;
    *content_out = NULL;
    const char *sec;
    int s = first_section(text, strlen(text), &sec);
    if (s >= 0) {
        cJSON *arr = cJSON_CreateArray();
        const char *p = sec;
        int n = 0, ok = 1;
        while (ok && (p = strstr(p, SYNTAX[s].begin))) {
            const char *a = p + strlen(SYNTAX[s].begin), *b = strstr(a, SYNTAX[s].end);
            if (!b) { ok = 0; break; }
            struct call c;
            if (!parse_one(SYNTAX[s].fmt, a, b, tools_json, &c)) { ok = 0; break; }
            cJSON *tc = cJSON_CreateObject(), *fn = cJSON_CreateObject();
            char id[32];
            snprintf(id, sizeof id, "call_%d", n);
            cJSON_AddStringToObject(tc, "id", c.id ? c.id : id);
            cJSON_AddStringToObject(tc, "type", "function");
            cJSON_AddStringToObject(fn, "name", c.name);
            cJSON_AddStringToObject(fn, "arguments", c.args);
            cJSON_AddItemToObject(tc, "function", fn);
            cJSON_AddItemToArray(arr, tc);
            free(c.name);
            free(c.args);
            free(c.id);
            n++;
            p = b + strlen(SYNTAX[s].end);
        }
        if (!cut && (!ok || !n)) { cJSON_Delete(arr); return 0; }   /* left as content */
        *content_out = trim_dup(text, sec);
        *calls_out = arr;
        return n;
    }
    return 0;
}

int oai_parse_tool_calls(const char *text, const char *tools_json, struct cJSON **calls, char **content)
{
    return parse_calls(text, tools_json, 0, calls, content);
}

int serve_oai_tool_calls_cut(const char *text, const char *tools_json, struct cJSON **calls, char **content)
{
    return parse_calls(text, tools_json, 1, calls, content);
}

/* ------------------------------------------------------------ streaming view */

/* The longest proper prefix of marker that s[0..n) ends with. */
static size_t held_prefix(const char *s, size_t n, const char *marker)
{
    size_t m = strlen(marker);
    for (size_t h = m - 1; h > 0; h--)
        if (n >= h && !memcmp(s + n - h, marker, h)) return h;
    return 0;
}

static int is_blank(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

/* [*a, *b) up to `marker` if it is there, trimmed of blanks; else without
 * a tail that may still become the marker (unless final) and the blanks
 * before it. */
static void final_part(const char **a, const char **b, const char *marker, int final)
{
    while (*a < *b && is_blank(**a)) (*a)++;
    const char *at = memmem(*a, (size_t)(*b - *a), marker, strlen(marker));
    if (at) *b = at;
    else if (!final) *b -= held_prefix(*a, (size_t)(*b - *a), marker);
    while (*b > *a && is_blank((*b)[-1])) (*b)--;
}

/* A call whose end marker has not come yet: its name once complete, and the
 * part of its arguments that is final. 0 while the name is incomplete (and
 * always for Hermes and DSML calls, whose arguments are built when whole). */
static int partial_call(const char *fmt, const char *a, const char *lim, int final, struct call *c)
{
    const char *name0 = NULL, *name1 = NULL, *arg0 = NULL, *end_marker = NULL;
    size_t rest = (size_t)(lim - a);
    c->id = NULL;
    if (!strcmp(fmt, "deepseek")) {
        static const char V3[] = "function<｜tool▁sep｜>", SEP[] = "<｜tool▁sep｜>";
        size_t v3 = strlen(V3);
        if (rest < v3 && !memcmp(a, V3, rest)) return 0;      /* V3 or a V3.1 name: not known yet */
        if (rest >= v3 && !memcmp(a, V3, v3)) {
            name0 = a + v3;
            if (!(name1 = memchr(name0, '\n', (size_t)(lim - name0)))) return 0;
            const char *open = memmem(name1, (size_t)(lim - name1), "```json", 7);
            arg0 = open ? open + 7 : lim;
            end_marker = "```";
        } else {
            if (!(name1 = memmem(a, rest, SEP, strlen(SEP)))) return 0;
            name0 = a;
            arg0 = name1 + strlen(SEP);
            end_marker = "<｜tool▁call▁end｜>";
        }
    } else if (!strcmp(fmt, "kimi")) {
        static const char ARG[] = "<|tool_call_argument_begin|>";
        const char *arg = memmem(a, rest, ARG, strlen(ARG)), *colon = NULL;
        if (!arg) return 0;
        name0 = memchr(a, '.', (size_t)(arg - a));
        for (const char *q = arg; q > a; q--) if (q[-1] == ':') { colon = q - 1; break; }
        if (!name0 || !colon || colon < name0) return 0;
        name0++;
        name1 = colon;
        arg0 = arg + strlen(ARG);
        end_marker = "<|tool_call_end|>";
        if (!(c->id = trim_dup(a, arg))) return 0;
    } else {
        return 0;
    }
    c->name = trim_dup(name0, name1);
    const char *arg1 = lim;
    final_part(&arg0, &arg1, end_marker, final);
    c->args = dup_n(arg0, (size_t)(arg1 - arg0));
    if (!c->name || !c->args || !c->name[0]) {
        free(c->name);
        free(c->args);
        free(c->id);
        c->name = c->args = c->id = NULL;
        return 0;
    }
    return 1;
}

static int view_push(struct oai_tool_view *v, struct call *c)
{
    struct oai_tool_view_call *nc = realloc(v->call, (size_t)(v->n + 1) * sizeof *nc);
    if (!nc) { free(c->name); free(c->args); free(c->id); return COLIBRI_ENOMEM; }
    v->call = nc;
    v->call[v->n++] = (struct oai_tool_view_call){ c->name, c->args, strlen(c->args), c->id };
    return 0;
}

int serve_oai_tool_view(const char *s, size_t n, int final, const char *tools_json, struct oai_tool_view *v)
{
    *v = (struct oai_tool_view){ 0 };
    const char *sec;
    int k = first_section(s, n, &sec);
    size_t end = k >= 0 ? (size_t)(sec - s) : n;
    if (k < 0 && !final)
        for (int q = 0; q < N_SYNTAX; q++) {
            size_t h = held_prefix(s, n, SYNTAX[q].section);
            if (n - h < end) end = n - h;
        }
    if (k >= 0 || !final)
        while (end > 0 && is_blank(s[end - 1])) end--;
    v->text_end = end;
    if (k < 0) return 0;
    const char *p = sec, *lim = s + n;
    size_t bl = strlen(SYNTAX[k].begin), el = strlen(SYNTAX[k].end);
    while ((p = memmem(p, (size_t)(lim - p), SYNTAX[k].begin, bl))) {
        const char *a = p + bl, *z = memmem(a, (size_t)(lim - a), SYNTAX[k].end, el);
        struct call c;
        if (z ? !parse_one(SYNTAX[k].fmt, a, z, tools_json, &c) : !partial_call(SYNTAX[k].fmt, a, lim, final, &c)) break;
        if (view_push(v, &c)) { serve_oai_tool_view_free(v); return COLIBRI_ENOMEM; }
        if (!z) break;
        p = z + el;
    }
    return 0;
}

void serve_oai_tool_view_free(struct oai_tool_view *v)
{
    for (int i = 0; i < v->n; i++) { free(v->call[i].name); free(v->call[i].args); free(v->call[i].id); }
    free(v->call);
    *v = (struct oai_tool_view){ 0 };
}
