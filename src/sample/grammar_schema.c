/* sample/grammar_schema.c - JSON Schema to GBNF (contract in grammar.h).
 *
 * The subset agents send (OpenAI structured outputs, Pydantic):
 *   type (a name or a list), properties + required (properties come in the
 *   listed order, the optional ones may be left out; no others are
 *   generated), additionalProperties (false, or alone as the schema of a
 *   map's values), items, minItems, maxItems, enum, const, anyOf, oneOf,
 *   allOf (of one schema, or object schemas merged: grammar_schema_allof.c), $ref to #/$defs/... or #/definitions/..., string
 *   minLength/maxLength, pattern (grammar_regex.c) and format date, time,
 *   date-time, uuid, email; integer and number minimum, maximum,
 *   exclusiveMinimum, exclusiveMaximum (grammar_schema_num.c) and
 *   multipleOf 1; annotations
 *   (title, description, default, examples, $schema, $id, $comment,
 *   deprecated, readOnly, writeOnly) are ignored.
 * Any other keyword is refused by name with its path. Whitespace between
 * tokens is bounded as llama.cpp's JSON grammar bounds it (one space, or a
 * newline and an indent of at most 20 blanks), so a model cannot fill its
 * budget with blank lines. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "base/err.h"
#include "base/strbuf.h"
#include "sample/grammar.h"
#include "sample/grammar_schema_parts.h"

struct conv {
    struct strbuf out;          /* the rules */
    int n_rules;
    const cJSON *root;
    struct colibri_err *err;
    int rc;
    /* $defs already given a rule: name -> rule number */
    const char *ref_name[256];
    int ref_rule[256];
    int n_refs;
    int depth;
    cJSON *keep;                /* merged allOf schemas, alive while rules may point into them */
};

static const char PRELUDE[] =
    "ws ::= ( \" \" | \"\\n\" [ \\t]{0,20} )?\n"
    "value ::= object | array | string | number | \"true\" | \"false\" | \"null\"\n"
    "object ::= \"{\" ws ( string ws \":\" ws value ws ( \",\" ws string ws \":\" ws value ws )* )? \"}\"\n"
    "array ::= \"[\" ws ( value ws ( \",\" ws value ws )* )? \"]\"\n"
    "string ::= \"\\\"\" char* \"\\\"\"\n"
    "char ::= [^\"\\\\\\x00-\\x1f] | \"\\\\\" ( [\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4} )\n"
    "number ::= integer ( \".\" [0-9]+ )? ( [eE] [-+]? [0-9]+ )?\n"
    "integer ::= \"-\"? ( \"0\" | [1-9] [0-9]{0,15} )\n"
    "boolean ::= \"true\" | \"false\"\n"
    "null ::= \"null\"\n"
    /* calendar dates of years 0001-9999: day 29 of February in leap years only (divisible by 4, and
     * centuries by 400), day 31 in the months that have it */
    "date ::= year \"-\" ( mon31 \"-\" ( day30 | \"31\" ) | mon30 \"-\" day30 | \"02-\" day28 ) | leap \"-02-29\"\n"
    "year ::= [0-9]{3} [1-9] | [0-9]{2} [1-9] \"0\" | [0-9] [1-9] \"00\" | [1-9] \"000\"\n"
    "leap ::= [0-9]{2} ( \"0\" [48] | [2468] [048] | [13579] [26] ) | ( \"0\" [48] | [2468] [048] | [13579] [26] ) \"00\"\n"
    "mon31 ::= \"0\" [13578] | \"1\" [02]\n"
    "mon30 ::= \"0\" [469] | \"11\"\n"
    "day28 ::= \"0\" [1-9] | \"1\" [0-9] | \"2\" [0-8]\n"
    "day30 ::= day28 | \"29\" | \"30\"\n"
    "time ::= ( [01] [0-9] | \"2\" [0-3] ) \":\" [0-5] [0-9] \":\" [0-5] [0-9] ( \".\" [0-9]{1,6} )? "
    "( \"Z\" | [+-] ( [01] [0-9] | \"2\" [0-3] ) \":\" [0-5] [0-9] )\n"
    "hex ::= [0-9a-fA-F]\n"
    "uuid ::= hex{8} \"-\" hex{4} \"-\" hex{4} \"-\" hex{4} \"-\" hex{12}\n"
    "email ::= [A-Za-z0-9._%+-]{1,64} \"@\" [A-Za-z0-9-]{1,63} ( \".\" [A-Za-z0-9-]{1,63} ){1,4}\n";

static int fail(struct conv *c, int code, const char *path, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int fail(struct conv *c, int code, const char *path, const char *fmt, ...)
{
    if (c->rc) return -1;
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    c->rc = base_err_set(c->err, code, "json_schema%s%s: %s", path[0] ? " at " : "", path, msg);
    return -1;
}

/* A GBNF string literal for the bytes of s. */
static void literal(struct strbuf *b, const char *s)
{
    base_sb_puts(b, "\"");
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') { char e[2] = { '\\', (char)*p }; base_sb_append(b, e, 2); }
        else if (*p == '\n') base_sb_puts(b, "\\n");
        else if (*p == '\r') base_sb_puts(b, "\\r");
        else if (*p == '\t') base_sb_puts(b, "\\t");
        else if (*p < 0x20) base_sb_appendf(b, "\\x%02x", *p);
        else base_sb_append(b, (const char *)p, 1);
    }
    base_sb_puts(b, "\"");
}

/* A JSON value as a fixed GBNF literal (enum, const). */
static int json_literal(struct conv *c, struct strbuf *b, const cJSON *v, const char *path)
{
    char *txt = cJSON_PrintUnformatted(v);
    if (!txt) return fail(c, COLIBRI_ENOMEM, path, "out of memory");
    literal(b, txt);
    free(txt);
    return 0;
}

static int new_rule(struct conv *c) { return c->n_rules++; }

static int schema_rule(struct conv *c, const cJSON *s, const char *path);

static const char *const IGNORED[] = { "title", "description", "default", "examples", "$schema", "$id", "$comment",
                                       "deprecated", "readOnly", "writeOnly", NULL };
static const char *const KNOWN[] = { "type", "properties", "required", "additionalProperties", "items", "minItems",
                                     "maxItems", "enum", "const", "anyOf", "oneOf", "allOf", "$ref", "$defs",
                                     "definitions", "minLength", "maxLength", "format", "pattern", "minimum",
                                     "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", NULL };

static int in_list(const char *const *l, const char *k)
{
    for (; *l; l++) if (!strcmp(*l, k)) return 1;
    return 0;
}

static int get_count(struct conv *c, const cJSON *s, const char *key, long dflt, long *out, const char *path)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(s, key);
    *out = dflt;
    if (!v) return 0;
    if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble > 1000 || v->valuedouble != (long)v->valuedouble)
        return fail(c, COLIBRI_EINVAL, path, "'%s' must be an integer in [0, 1000]", key);
    *out = (long)v->valuedouble;
    return 0;
}

/* "x{lo,hi}" for a rule x (hi < 0: unbounded). */
static void repeat(struct strbuf *b, const char *x, long lo, long hi)
{
    if (lo == 0 && hi < 0) base_sb_appendf(b, "%s*", x);
    else if (hi < 0) base_sb_appendf(b, "%s{%ld,}", x, lo);
    else base_sb_appendf(b, "%s{%ld,%ld}", x, lo, hi);
}

static int object_rule(struct conv *c, const cJSON *s, const char *path, struct strbuf *body)
{
    const cJSON *props = cJSON_GetObjectItemCaseSensitive(s, "properties");
    const cJSON *req = cJSON_GetObjectItemCaseSensitive(s, "required");
    const cJSON *addl = cJSON_GetObjectItemCaseSensitive(s, "additionalProperties");
    if (props && !cJSON_IsObject(props)) return fail(c, COLIBRI_EINVAL, path, "'properties' must be an object");
    if (req && !cJSON_IsArray(req)) return fail(c, COLIBRI_EINVAL, path, "'required' must be an array");
    const cJSON *r;
    cJSON_ArrayForEach(r, req) {
        if (!cJSON_IsString(r)) return fail(c, COLIBRI_EINVAL, path, "'required' must hold strings");
        if (!cJSON_GetObjectItemCaseSensitive(props, r->valuestring))
            return fail(c, COLIBRI_EUNSUPPORTED, path, "'required' names '%s', which is not in 'properties'",
                        r->valuestring);
    }
    if (!props || !props->child) {
        if (addl && cJSON_IsObject(addl)) {   /* a map: string -> schema */
            char p2[512];
            snprintf(p2, sizeof p2, "%s.additionalProperties", path);
            int v = schema_rule(c, addl, p2);
            if (v < 0) return -1;
            base_sb_appendf(body, "\"{\" ws ( string ws \":\" ws r%d ws ( \",\" ws string ws \":\" ws r%d ws )* )? \"}\"", v, v);
            return 0;
        }
        if (cJSON_IsFalse(addl)) { base_sb_puts(body, "\"{\" ws \"}\""); return 0; }
        base_sb_puts(body, "object");
        return 0;
    }
    if (addl && !cJSON_IsBool(addl))
        return fail(c, COLIBRI_EUNSUPPORTED, path, "'additionalProperties' as a schema beside 'properties'");
    int n = cJSON_GetArraySize(props);
    int *kv = malloc((size_t)n * sizeof *kv), *opt = malloc((size_t)n * sizeof *opt);
    if (!kv || !opt) { free(kv); free(opt); return fail(c, COLIBRI_ENOMEM, path, "out of memory"); }
    int i = 0;
    const cJSON *p;
    cJSON_ArrayForEach(p, props) {
        char p2[512];
        snprintf(p2, sizeof p2, "%s.properties.%s", path, p->string);
        int v = schema_rule(c, p, p2);
        if (v < 0) { free(kv); free(opt); return -1; }
        kv[i] = new_rule(c);
        base_sb_appendf(&c->out, "r%d ::= ", kv[i]);
        /* the key as JSON text, then as a GBNF literal */
        cJSON *ks = cJSON_CreateString(p->string);
        char *key = ks ? cJSON_PrintUnformatted(ks) : NULL;
        cJSON_Delete(ks);
        if (!key) { free(kv); free(opt); return fail(c, COLIBRI_ENOMEM, path, "out of memory"); }
        literal(&c->out, key);
        free(key);
        base_sb_appendf(&c->out, " ws \":\" ws r%d ws\n", v);
        int required = 0;
        cJSON_ArrayForEach(r, req) if (!strcmp(r->valuestring, p->string)) required = 1;
        opt[i] = !required;
        i++;
    }
    /* S_k: the rest after something was written (each with a leading comma);
     * R_k: the rest when nothing was written yet */
    int S = c->n_rules, R = S + n + 1;
    c->n_rules += 2 * (n + 1);
    for (int k = n; k >= 0; k--) {
        if (k == n) { base_sb_appendf(&c->out, "r%d ::= \nr%d ::= \n", S + k, R + k); continue; }
        if (opt[k]) {
            base_sb_appendf(&c->out, "r%d ::= \",\" ws r%d r%d | r%d\n", S + k, kv[k], S + k + 1, S + k + 1);
            base_sb_appendf(&c->out, "r%d ::= r%d r%d | r%d\n", R + k, kv[k], S + k + 1, R + k + 1);
        } else {
            base_sb_appendf(&c->out, "r%d ::= \",\" ws r%d r%d\n", S + k, kv[k], S + k + 1);
            base_sb_appendf(&c->out, "r%d ::= r%d r%d\n", R + k, kv[k], S + k + 1);
        }
    }
    base_sb_appendf(body, "\"{\" ws r%d \"}\"", R);
    free(kv);
    free(opt);
    return 0;
}

/* A bound keyword: absent, or a number (-1 with the error otherwise). */
static int get_bound(struct conv *c, const cJSON *s, const char *key, int excl, struct schema_bound *b, const char *path)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(s, key);
    if (!v) return 0;
    if (!cJSON_IsNumber(v)) return fail(c, COLIBRI_EINVAL, path, "'%s' must be a number", key);
    if (b->has && b->excl != excl) return fail(c, COLIBRI_EUNSUPPORTED, path, "both '%s' and its other form", key);
    *b = (struct schema_bound){ 1, excl, v->valuedouble };
    return 0;
}

/* integer and number, with minimum / maximum / exclusive* and multipleOf 1 */
static int number_body(struct conv *c, const cJSON *s, const char *type, const char *path, struct strbuf *body)
{
    int integer = !strcmp(type, "integer");
    struct schema_bound lo = { 0 }, hi = { 0 };
    if (get_bound(c, s, "minimum", 0, &lo, path) || get_bound(c, s, "exclusiveMinimum", 1, &lo, path) ||
        get_bound(c, s, "maximum", 0, &hi, path) || get_bound(c, s, "exclusiveMaximum", 1, &hi, path))
        return -1;
    const cJSON *mul = cJSON_GetObjectItemCaseSensitive(s, "multipleOf");
    if (mul) {
        if (!cJSON_IsNumber(mul) || mul->valuedouble <= 0) return fail(c, COLIBRI_EINVAL, path, "'multipleOf' must be a positive number");
        if (mul->valuedouble != 1)
            return fail(c, COLIBRI_EUNSUPPORTED, path, "'multipleOf' %g (only 1, a whole number)", mul->valuedouble);
        integer = 1;
    }
    if (!lo.has && !hi.has) { base_sb_puts(body, integer ? "integer" : "number"); return 0; }
    char why[160];
    if (sample_schema_number_range(body, integer, lo, hi, why, sizeof why))
        return fail(c, COLIBRI_EUNSUPPORTED, path, "bounds of a '%s': %s", type, why);
    return 0;
}

static int type_body(struct conv *c, const cJSON *s, const char *type, const char *path, struct strbuf *body)
{
    if (!strcmp(type, "object")) return object_rule(c, s, path, body);
    if (!strcmp(type, "array")) {
        const cJSON *items = cJSON_GetObjectItemCaseSensitive(s, "items");
        long lo, hi;
        if (get_count(c, s, "minItems", 0, &lo, path) || get_count(c, s, "maxItems", -1, &hi, path)) return -1;
        if (hi >= 0 && hi < lo) return fail(c, COLIBRI_EINVAL, path, "maxItems %ld < minItems %ld", hi, lo);
        char x[32] = "value";
        if (items) {
            char p2[512];
            snprintf(p2, sizeof p2, "%s.items", path);
            int v = schema_rule(c, items, p2);
            if (v < 0) return -1;
            snprintf(x, sizeof x, "r%d", v);
        }
        /* [ ] | [ x (, x){lo-1,hi-1} ] */
        int more = new_rule(c);
        base_sb_appendf(&c->out, "r%d ::= \",\" ws %s ws\n", more, x);
        char mr[32];
        snprintf(mr, sizeof mr, "r%d", more);
        base_sb_puts(body, "\"[\" ws ");
        if (hi == 0) { base_sb_puts(body, "\"]\""); return 0; }
        if (lo == 0) base_sb_puts(body, "( ");
        base_sb_appendf(body, "%s ws ", x);
        repeat(body, mr, lo > 0 ? lo - 1 : 0, hi < 0 ? -1 : hi - 1);
        if (lo == 0) base_sb_puts(body, " )?");
        base_sb_puts(body, " \"]\"");
        return 0;
    }
    if (!strcmp(type, "string")) {
        const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(s, "format"), *pat = cJSON_GetObjectItemCaseSensitive(s, "pattern");
        long lo, hi;
        if (get_count(c, s, "minLength", 0, &lo, path) || get_count(c, s, "maxLength", -1, &hi, path)) return -1;
        if (pat) {
            if (!cJSON_IsString(pat)) return fail(c, COLIBRI_EINVAL, path, "'pattern' must be a string");
            if (fmt || cJSON_GetObjectItemCaseSensitive(s, "minLength") || cJSON_GetObjectItemCaseSensitive(s, "maxLength"))
                return fail(c, COLIBRI_EUNSUPPORTED, path, "'pattern' beside 'format', 'minLength' or 'maxLength'");
            char why[256];
            base_sb_puts(body, "\"\\\"\" ");
            if (sample_regex_to_gbnf(body, pat->valuestring, why, sizeof why))
                return fail(c, COLIBRI_EUNSUPPORTED, path, "'pattern' %.200s: %s", pat->valuestring, why);
            base_sb_puts(body, " \"\\\"\"");
            return 0;
        }
        if (fmt) {
            if (!cJSON_IsString(fmt)) return fail(c, COLIBRI_EINVAL, path, "'format' must be a string");
            const char *f = fmt->valuestring;
            if (!strcmp(f, "date") || !strcmp(f, "time") || !strcmp(f, "uuid")) base_sb_appendf(body, "\"\\\"\" %s \"\\\"\"", f);
            else if (!strcmp(f, "date-time")) base_sb_puts(body, "\"\\\"\" date \"T\" time \"\\\"\"");
            else if (!strcmp(f, "email")) base_sb_puts(body, "\"\\\"\" email \"\\\"\"");
            else return fail(c, COLIBRI_EUNSUPPORTED, path, "unsupported string format '%s' (date, time, date-time, "
                             "uuid, email)", f);
            return 0;
        }
        if (hi >= 0 && hi < lo) return fail(c, COLIBRI_EINVAL, path, "maxLength %ld < minLength %ld", hi, lo);
        base_sb_puts(body, "\"\\\"\" ");
        repeat(body, "char", lo, hi);
        base_sb_puts(body, " \"\\\"\"");
        return 0;
    }
    if (!strcmp(type, "number") || !strcmp(type, "integer")) return number_body(c, s, type, path, body);
    if (!strcmp(type, "boolean") || !strcmp(type, "null")) {
        base_sb_append(body, type, strlen(type));
        return 0;
    }
    return fail(c, COLIBRI_EUNSUPPORTED, path, "unsupported type '%s'", type);
}

static int alternatives(struct conv *c, const cJSON *list, const char *key, const char *path, struct strbuf *body)
{
    if (!cJSON_IsArray(list) || !list->child) return fail(c, COLIBRI_EINVAL, path, "'%s' must be a non-empty array", key);
    int i = 0;
    const cJSON *a;
    cJSON_ArrayForEach(a, list) {
        char p2[512];
        snprintf(p2, sizeof p2, "%s.%s[%d]", path, key, i);
        int v = schema_rule(c, a, p2);
        if (v < 0) return -1;
        base_sb_appendf(body, "%sr%d", i ? " | " : "", v);
        i++;
    }
    return 0;
}

static int ref_rule(struct conv *c, const char *ref, const char *path)
{
    const char *name = NULL;
    const cJSON *defs = NULL;
    if (!strncmp(ref, "#/$defs/", 8)) { name = ref + 8; defs = cJSON_GetObjectItemCaseSensitive(c->root, "$defs"); }
    else if (!strncmp(ref, "#/definitions/", 14)) { name = ref + 14; defs = cJSON_GetObjectItemCaseSensitive(c->root, "definitions"); }
    else if (!strcmp(ref, "#")) name = "";
    else return fail(c, COLIBRI_EUNSUPPORTED, path, "unsupported $ref '%s' (#, #/$defs/NAME, #/definitions/NAME)", ref);
    for (int i = 0; i < c->n_refs; i++) if (!strcmp(c->ref_name[i], ref)) return c->ref_rule[i];
    const cJSON *target = name[0] ? cJSON_GetObjectItemCaseSensitive(defs, name) : c->root;
    if (!target) return fail(c, COLIBRI_EINVAL, path, "$ref '%s' points at nothing", ref);
    if (c->n_refs == 256) return fail(c, COLIBRI_EUNSUPPORTED, path, "more than 256 $refs");
    /* give the definition its rule number first, so a recursive schema refers back to it */
    int r = new_rule(c);
    c->ref_name[c->n_refs] = ref;
    c->ref_rule[c->n_refs++] = r;
    char p2[512];
    snprintf(p2, sizeof p2, "%s", ref);
    int v = schema_rule(c, target, p2);
    if (v < 0) return -1;
    base_sb_appendf(&c->out, "r%d ::= r%d\n", r, v);
    return r;
}

/* The number of a new rule matching schema s. */
static int schema_rule(struct conv *c, const cJSON *s, const char *path)
{
    if (c->rc) return -1;
    if (++c->depth > 64) return fail(c, COLIBRI_EUNSUPPORTED, path, "schema nested more than 64 deep");
    struct strbuf body = { 0 };
    int rc = 0;
    if (cJSON_IsTrue(s) || (cJSON_IsObject(s) && !s->child)) { base_sb_puts(&body, "value"); goto emit; }
    if (!cJSON_IsObject(s)) { rc = fail(c, COLIBRI_EINVAL, path, "a schema must be an object or true"); goto out; }
    const cJSON *k;
    cJSON_ArrayForEach(k, s)
        if (!in_list(KNOWN, k->string) && !in_list(IGNORED, k->string)) {
            rc = fail(c, COLIBRI_EUNSUPPORTED, path, "unsupported keyword '%s'", k->string);
            goto out;
        }
    const cJSON *ref = cJSON_GetObjectItemCaseSensitive(s, "$ref"), *en = cJSON_GetObjectItemCaseSensitive(s, "enum"),
                *cst = cJSON_GetObjectItemCaseSensitive(s, "const"), *ty = cJSON_GetObjectItemCaseSensitive(s, "type"),
                *any = cJSON_GetObjectItemCaseSensitive(s, "anyOf"), *one = cJSON_GetObjectItemCaseSensitive(s, "oneOf"),
                *all = cJSON_GetObjectItemCaseSensitive(s, "allOf");
    if (ref) {
        if (!cJSON_IsString(ref)) { rc = fail(c, COLIBRI_EINVAL, path, "'$ref' must be a string"); goto out; }
        int r = ref_rule(c, ref->valuestring, path);
        if (r < 0) { rc = -1; goto out; }
        base_sb_appendf(&body, "r%d", r);
    } else if (cst) {
        rc = json_literal(c, &body, cst, path);
    } else if (en) {
        if (!cJSON_IsArray(en) || !en->child) { rc = fail(c, COLIBRI_EINVAL, path, "'enum' must be a non-empty array"); goto out; }
        int i = 0;
        const cJSON *e;
        cJSON_ArrayForEach(e, en) {
            if (i++) base_sb_puts(&body, " | ");
            if ((rc = json_literal(c, &body, e, path))) goto out;
        }
    } else if (any || one) {
        rc = alternatives(c, any ? any : one, any ? "anyOf" : "oneOf", path, &body);
    } else if (all) {
        char p2[512];
        int v;
        if (cJSON_IsArray(all) && cJSON_GetArraySize(all) == 1 && !ty && !cJSON_GetObjectItemCaseSensitive(s, "properties") &&
            !cJSON_GetObjectItemCaseSensitive(s, "required") && !cJSON_GetObjectItemCaseSensitive(s, "additionalProperties")) {
            snprintf(p2, sizeof p2, "%s.allOf[0]", path);
            v = schema_rule(c, all->child, p2);
        } else {    /* several object schemas (or one beside the schema's own properties): one merged object */
            char why[256];
            cJSON *m = sample_schema_merge_allof(c->root, s, why, sizeof why);
            if (!m) { rc = fail(c, COLIBRI_EUNSUPPORTED, path, "'allOf': %s", why); goto out; }
            if (!c->keep) c->keep = cJSON_CreateArray();
            cJSON_AddItemToArray(c->keep, m);
            snprintf(p2, sizeof p2, "%s.allOf", path);
            v = schema_rule(c, m, p2);
        }
        if (v < 0) { rc = -1; goto out; }
        base_sb_appendf(&body, "r%d", v);
    } else if (cJSON_IsString(ty)) {
        rc = type_body(c, s, ty->valuestring, path, &body);
    } else if (cJSON_IsArray(ty) && ty->child) {
        int i = 0;
        const cJSON *t;
        cJSON_ArrayForEach(t, ty) {
            if (!cJSON_IsString(t)) { rc = fail(c, COLIBRI_EINVAL, path, "'type' must hold strings"); goto out; }
            if (i++) base_sb_puts(&body, " | ");
            base_sb_puts(&body, "( ");
            if ((rc = type_body(c, s, t->valuestring, path, &body))) goto out;
            base_sb_puts(&body, " )");
        }
    } else if (ty) {
        rc = fail(c, COLIBRI_EINVAL, path, "'type' must be a string or an array of strings");
    } else if (cJSON_GetObjectItemCaseSensitive(s, "properties")) {
        rc = type_body(c, s, "object", path, &body);
    } else {
        base_sb_puts(&body, "value");
    }
    if (rc) goto out;
emit:;
    int r = new_rule(c);
    base_sb_appendf(&c->out, "r%d ::= %s\n", r, body.s ? body.s : "");
    if (body.failed || c->out.failed) rc = fail(c, COLIBRI_ENOMEM, path, "out of memory");
    free(body.s);
    c->depth--;
    return rc ? -1 : r;
out:
    free(body.s);
    c->depth--;
    return -1;
}

const char *sample_grammar_json_rules(void) { return PRELUDE; }

int sample_grammar_json_schema_rules(const char *schema_json, const char *name, int *next_rule, char **gbnf,
                                     struct colibri_err *err)
{
    struct conv c = { .err = err, .n_rules = *next_rule };
    base_sb_puts(&c.out, "");
    if (!schema_json) {
        base_sb_appendf(&c.out, "%s ::= object\n", name);
    } else {
        cJSON *s = cJSON_ParseWithOpts(schema_json, NULL, 1);
        if (!s) { free(c.out.s); return base_err_set(err, COLIBRI_EINVAL, "json_schema: not valid JSON"); }
        c.root = s;
        int r = schema_rule(&c, s, "");
        if (r >= 0) base_sb_appendf(&c.out, "%s ::= r%d\n", name, r);
        cJSON_Delete(c.keep);
        cJSON_Delete(s);
        if (r < 0) { free(c.out.s); return c.rc ? c.rc : COLIBRI_EINVAL; }
    }
    if (c.out.failed) { free(c.out.s); return base_err_set(err, COLIBRI_ENOMEM, "json_schema: out of memory"); }
    *next_rule = c.n_rules;
    *gbnf = c.out.s;
    return 0;
}

int sample_grammar_from_json_schema(const char *schema_json, char **gbnf, struct colibri_err *err)
{
    int next = 0;
    char *rules = NULL;
    int rc = sample_grammar_json_schema_rules(schema_json, "root", &next, &rules, err);
    if (rc) return rc;
    size_t a = strlen(PRELUDE), b = strlen(rules);
    char *out = malloc(a + b + 1);
    if (!out) { free(rules); return base_err_set(err, COLIBRI_ENOMEM, "json_schema: out of memory"); }
    memcpy(out, PRELUDE, a);
    memcpy(out + a, rules, b + 1);
    free(rules);
    *gbnf = out;
    return 0;
}
