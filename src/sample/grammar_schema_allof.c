/* sample/grammar_schema_allof.c - allOf of object schemas merged into one
 * (contract in grammar_schema_parts.h).
 *
 * An instance of allOf [A, B, ...] must be valid under each member. For
 * object schemas, the schema-to-grammar compiler generates only listed
 * properties, so the merge is exact when: each property's schema is the
 * same wherever it is listed; a property is generated only if every
 * member with additionalProperties false lists it (such a member rejects
 * the others); and required is the union. Anything else cannot be merged
 * without intersecting two schemas, and is refused by name. */
#include <stdio.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "sample/grammar_schema_parts.h"

static const char *const OBJECT_KEYS[] = { "type", "properties", "required", "additionalProperties", "allOf", "$defs",
                                           "definitions", "title", "description", "default", "examples", "$schema",
                                           "$id", "$comment", "deprecated", "readOnly", "writeOnly", NULL };

static int in_list(const char *const *l, const char *k)
{
    for (; *l; l++) if (!strcmp(*l, k)) return 1;
    return 0;
}

/* s with $ref (to #/$defs/ or #/definitions/) followed, or NULL. */
static const cJSON *resolve(const cJSON *root, const cJSON *s)
{
    for (int hops = 0; hops < 16 && cJSON_IsObject(s); hops++) {
        const cJSON *ref = cJSON_GetObjectItemCaseSensitive(s, "$ref");
        if (!ref) return s;
        if (!cJSON_IsString(ref)) return NULL;
        const char *r = ref->valuestring;
        if (!strncmp(r, "#/$defs/", 8)) s = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(root, "$defs"), r + 8);
        else if (!strncmp(r, "#/definitions/", 14))
            s = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(root, "definitions"), r + 14);
        else return NULL;
    }
    return cJSON_IsObject(s) && !cJSON_GetObjectItemCaseSensitive(s, "$ref") ? s : NULL;
}

/* Whether member m is an object schema this merge takes; why says not. */
static int mergeable(const cJSON *m, const char *what, char *why, size_t why_n)
{
    const cJSON *k;
    cJSON_ArrayForEach(k, m)
        if (!in_list(OBJECT_KEYS, k->string) || (!strcmp(k->string, "allOf") && strcmp(what, "the schema"))) {
            snprintf(why, why_n, "%s has '%s' (only object schemas of properties, required and "
                     "additionalProperties true/false merge)", what, k->string);
            return 0;
        }
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(m, "type"), *a = cJSON_GetObjectItemCaseSensitive(m, "additionalProperties");
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(m, "properties"), *r = cJSON_GetObjectItemCaseSensitive(m, "required");
    if (t && !(cJSON_IsString(t) && !strcmp(t->valuestring, "object"))) {
        snprintf(why, why_n, "%s is not of type object", what);
        return 0;
    }
    if (a && !cJSON_IsBool(a)) {
        snprintf(why, why_n, "%s has 'additionalProperties' as a schema", what);
        return 0;
    }
    if ((p && !cJSON_IsObject(p)) || (r && !cJSON_IsArray(r))) {
        snprintf(why, why_n, "%s: 'properties' must be an object and 'required' an array", what);
        return 0;
    }
    const cJSON *x;
    cJSON_ArrayForEach(x, r) if (!cJSON_IsString(x)) {
        snprintf(why, why_n, "%s: 'required' must hold strings", what);
        return 0;
    }
    return 1;
}

static int listed(const cJSON *arr, const char *name)
{
    const cJSON *x;
    cJSON_ArrayForEach(x, arr) if (cJSON_IsString(x) && !strcmp(x->valuestring, name)) return 1;
    return 0;
}

cJSON *sample_schema_merge_allof(const cJSON *root, const cJSON *s, char *why, size_t why_n)
{
    const cJSON *all = cJSON_GetObjectItemCaseSensitive(s, "allOf");
    int n = cJSON_GetArraySize(all);
    if (!cJSON_IsArray(all) || n == 0 || n > 64) {
        snprintf(why, why_n, "'allOf' must be an array of 1 to 64 schemas");
        return NULL;
    }
    const cJSON *mem[65];
    int k = 0;
    const cJSON *a;
    cJSON_ArrayForEach(a, all) {
        char what[48];
        snprintf(what, sizeof what, "allOf[%d]", k);
        if (!(mem[k] = resolve(root, a))) {
            snprintf(why, why_n, "%s is not an object schema (or its $ref cannot be followed)", what);
            return NULL;
        }
        if (!mergeable(mem[k++], what, why, why_n)) return NULL;
    }
    if (!mergeable(s, "the schema", why, why_n)) return NULL;
    mem[k++] = s;    /* the schema's own properties beside allOf count as one more member */

    cJSON *out = cJSON_CreateObject(), *props = cJSON_CreateObject(), *req = cJSON_CreateArray();
    cJSON_AddStringToObject(out, "type", "object");
    cJSON_AddItemToObject(out, "properties", props);
    cJSON_AddItemToObject(out, "required", req);
    int closed = 0;
    for (int i = 0; i < k; i++) {
        closed |= cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(mem[i], "additionalProperties"));
        const cJSON *p;
        cJSON_ArrayForEach(p, cJSON_GetObjectItemCaseSensitive(mem[i], "properties")) {
            const cJSON *have = cJSON_GetObjectItemCaseSensitive(props, p->string);
            if (have) {
                if (!cJSON_Compare(have, p, 1)) {
                    snprintf(why, why_n, "property '%.100s' has different schemas in two members", p->string);
                    cJSON_Delete(out);
                    return NULL;
                }
                continue;
            }
            int allowed = 1;    /* by every member that closes its properties */
            for (int j = 0; j < k; j++)
                if (cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(mem[j], "additionalProperties")) &&
                    !cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(mem[j], "properties"), p->string))
                    allowed = 0;
            if (allowed) cJSON_AddItemToObject(props, p->string, cJSON_Duplicate(p, 1));
        }
    }
    for (int i = 0; i < k; i++) {
        const cJSON *r;
        cJSON_ArrayForEach(r, cJSON_GetObjectItemCaseSensitive(mem[i], "required")) {
            if (listed(req, r->valuestring)) continue;
            if (!cJSON_GetObjectItemCaseSensitive(props, r->valuestring)) {
                int anywhere = 0;
                for (int j = 0; j < k; j++)
                    anywhere |= cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(mem[j], "properties"),
                                                                 r->valuestring) != NULL;
                if (anywhere)
                    snprintf(why, why_n, "'%.100s' is required, but a member with additionalProperties false "
                             "does not list it (no instance can be valid)", r->valuestring);
                else snprintf(why, why_n, "'required' names '%.100s', which no member lists in 'properties'", r->valuestring);
                cJSON_Delete(out);
                return NULL;
            }
            cJSON_AddItemToArray(req, cJSON_CreateString(r->valuestring));
        }
    }
    if (closed) cJSON_AddFalseToObject(out, "additionalProperties");
    return out;
}
