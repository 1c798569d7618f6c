/* serve/oai_reply.c - the model's reply on /v1/chat/completions (contract
 * in oai.h): DeepSeek's reasoning split, and the tool-call syntaxes of
 * DeepSeek-V3 / R1, DeepSeek-V3.1, Kimi K2 and Hermes/Qwen (<tool_call>
 * JSON) found in it, whole or (streaming) as far as it has come. A reply
 * that does not parse stays content: never an error. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve/oai.h"

static char *trim_dup(const char *a, const char *b);

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

/* One call between begin and end markers, or 0 if it does not parse. */
static int parse_one(const char *fmt, const char *a, const char *b, struct call *c)
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
        free(c->id);
        c->name = c->args = c->id = NULL;
        return 0;
    }
    return 1;
}

static const struct { const char *fmt, *section, *begin, *end; } SYNTAX[] = {
    { "deepseek", "<｜tool▁calls▁begin｜>", "<｜tool▁call▁begin｜>", "<｜tool▁call▁end｜>" },
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

int oai_parse_tool_calls(const char *text, struct cJSON **calls_out, char **content_out)
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
            if (!parse_one(SYNTAX[s].fmt, a, b, &c)) { ok = 0; break; }
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
        if (!ok || !n) { cJSON_Delete(arr); return 0; }   /* left as content */
        *content_out = trim_dup(text, sec);
        *calls_out = arr;
        return n;
    }
    return 0;
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
 * always for Hermes calls, whose arguments are re-serialized when whole). */
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

int serve_oai_tool_view(const char *s, size_t n, int final, struct oai_tool_view *v)
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
        if (z ? !parse_one(SYNTAX[k].fmt, a, z, &c) : !partial_call(SYNTAX[k].fmt, a, lim, final, &c)) break;
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
