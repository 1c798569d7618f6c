/* serve/oai_format.c - structured output: response_format (json_object,
 * json_schema) and llama-server's `grammar` field become a grammar the
 * job's sampler is constrained by (contract in oai.h). A schema or grammar
 * colibri cannot compile is a 400 naming the problem. */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "serve/oai.h"

#define BAD "invalid_request_error"

static int compile_fail(struct oai_error *e, const char *param, int rc, const struct colibri_err *err)
{
    if (rc == COLIBRI_ENOMEM) return -!!oai_error_set(e, 500, "server_error", NULL, NULL, "out of memory");
    return -!!oai_error_set(e, 400, BAD, NULL, param, "%s", err->msg);
}

int oai_parse_format(const struct oai_model *m, const struct cJSON *root, struct job_params *p,
                     struct oai_error *e)
{
    const cJSON *rf = cJSON_GetObjectItemCaseSensitive(root, "response_format");
    const cJSON *gr = cJSON_GetObjectItemCaseSensitive(root, "grammar");
    if (cJSON_IsNull(rf)) rf = NULL;
    if (cJSON_IsNull(gr)) gr = NULL;
    struct colibri_err err = { 0 };
    if (gr) {
        if (!cJSON_IsString(gr)) return -!!oai_error_set(e, 400, BAD, NULL, "grammar", "'grammar' must be a GBNF string");
        const cJSON *t = rf ? cJSON_GetObjectItemCaseSensitive(rf, "type") : NULL;
        if (rf && !(cJSON_IsString(t) && !strcmp(t->valuestring, "text")))
            return -!!oai_error_set(e, 400, BAD, NULL, "grammar", "give 'grammar' or 'response_format', not both");
        int rc = colibri_grammar_new(m->tok, gr->valuestring, strlen(gr->valuestring), &p->grammar, &err);
        return rc ? compile_fail(e, "grammar", rc, &err) : 0;
    }
    if (!rf) return 0;
    if (!cJSON_IsObject(rf))
        return -!!oai_error_set(e, 400, BAD, NULL, "response_format", "'response_format' must be an object");
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(rf, "type");
    if (!cJSON_IsString(type))
        return -!!oai_error_set(e, 400, BAD, NULL, "response_format", "'response_format.type' must be a string");
    const char *ty = type->valuestring;
    if (!strcmp(ty, "text")) return 0;
    if (!strcmp(ty, "json_object")) {
        int rc = colibri_grammar_from_json_schema(m->tok, NULL, &p->grammar, &err);
        return rc ? compile_fail(e, "response_format", rc, &err) : 0;
    }
    if (strcmp(ty, "json_schema"))
        return -!!oai_error_set(e, 400, BAD, NULL, "response_format",
                                "'response_format.type' is '%s'; expected text, json_object or json_schema", ty);
    const cJSON *js = cJSON_GetObjectItemCaseSensitive(rf, "json_schema");
    const cJSON *schema = cJSON_IsObject(js) ? cJSON_GetObjectItemCaseSensitive(js, "schema") : NULL;
    if (!cJSON_IsObject(js))
        return -!!oai_error_set(e, 400, BAD, NULL, "response_format", "'response_format.json_schema' must be an object");
    char *txt = schema ? cJSON_PrintUnformatted(schema) : NULL;
    if (schema && !txt) return -!!oai_error_set(e, 500, "server_error", NULL, NULL, "out of memory");
    /* no schema: any JSON value would do; an object is what clients expect */
    int rc = colibri_grammar_from_json_schema(m->tok, txt, &p->grammar, &err);
    free(txt);
    return rc ? compile_fail(e, "response_format", rc, &err) : 0;
}
