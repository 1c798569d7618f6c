/* tok/tok_template.c - a model's Jinja chat template with the variables
 * transformers gives it (contract in tok_template.h). */
#include "tok/tok_template.h"

#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "tok/jinja.h"

struct tok_template {
    struct jinja_tpl *j;
    char *origin;
};

int tok_template_new(const char *src, size_t len, const char *origin, struct tok_template **out,
                     struct colibri_err *err)
{
    if (!src || !out) return base_err_set(err, COLIBRI_EINVAL, "chat template: NULL argument");
    struct tok_template *tt = calloc(1, sizeof *tt);
    if (!tt || !(tt->origin = strdup(origin ? origin : "chat template"))) {
        free(tt);
        return base_err_set(err, COLIBRI_ENOMEM, "chat template: out of memory");
    }
    int rc = jinja_compile(src, len, &tt->j, err);
    if (rc) {
        base_err_prefix(err, rc, "%s", tt->origin);
        tok_template_free(tt);
        return rc;
    }
    *out = tt;
    return 0;
}

void tok_template_free(struct tok_template *tt)
{
    if (!tt) return;
    jinja_free(tt->j);
    free(tt->origin);
    free(tt);
}

const char *tok_template_origin(const struct tok_template *tt) { return tt->origin; }

static int reserved(const char *k)
{
    return !strcmp(k, "messages") || !strcmp(k, "tools") || !strcmp(k, "add_generation_prompt");
}

int tok_template_render(const struct tok_template *tt, const struct tok *t, const cJSON *messages,
                        const cJSON *tools, const cJSON *kwargs, int add_gen, char **out, size_t *out_len,
                        struct colibri_err *err)
{
    if (!cJSON_IsArray(messages)) return base_err_set(err, COLIBRI_EINVAL, "chat: messages must be an array");
    if (tools && !cJSON_IsArray(tools) && !cJSON_IsNull(tools))
        return base_err_set(err, COLIBRI_EINVAL, "chat: tools must be an array");
    if (kwargs && !cJSON_IsObject(kwargs)) return base_err_set(err, COLIBRI_EINVAL, "chat: template variables must be an object");
    const cJSON *it;
    cJSON_ArrayForEach(it, kwargs)
        if (reserved(it->string))
            return base_err_set(err, COLIBRI_EINVAL, "chat: template variable '%s' is set by colibri itself", it->string);
    const cJSON *docs = kwargs ? cJSON_GetObjectItemCaseSensitive(kwargs, "documents") : NULL, *d;
    if (docs && !cJSON_IsNull(docs)) {   /* as transformers checks them */
        int good = cJSON_IsArray(docs);
        if (good) cJSON_ArrayForEach(d, docs) good = good && cJSON_IsObject(d);
        if (!good) return base_err_set(err, COLIBRI_EINVAL, "chat: documents must be a list of objects (title, text...)");
    }
    /* The context borrows the caller's items by reference (cJSON_CreateArrayReference
     * and friends), so nothing is copied and nothing of the caller's is freed. */
    cJSON *ctx = cJSON_CreateObject();
    int ok = ctx != NULL;
    ok = ok && cJSON_AddItemToObject(ctx, "messages", cJSON_CreateArrayReference(messages->child));
    ok = ok && cJSON_AddItemToObject(ctx, "tools", cJSON_IsArray(tools) ? cJSON_CreateArrayReference(tools->child)
                                                                         : cJSON_CreateNull());
    if (!(kwargs && cJSON_GetObjectItemCaseSensitive(kwargs, "documents")))   /* else it comes with them */
        ok = ok && cJSON_AddItemToObject(ctx, "documents", cJSON_CreateNull());
    ok = ok && cJSON_AddItemToObject(ctx, "add_generation_prompt", cJSON_CreateBool(add_gen));
    /* transformers passes the special-tokens map, then the caller's kwargs over it */
    cJSON_ArrayForEach(it, tok_special_tokens(t)) {
        if (!ok) break;
        if (!(kwargs && cJSON_GetObjectItemCaseSensitive(kwargs, it->string)))
            ok = cJSON_AddStringToObject(ctx, it->string, it->valuestring) != NULL;
    }
    cJSON_ArrayForEach(it, kwargs) {
        if (!ok) break;
        cJSON *ref = cJSON_IsObject(it) ? cJSON_CreateObjectReference(it->child)
                   : cJSON_IsArray(it) ? cJSON_CreateArrayReference(it->child) : cJSON_Duplicate(it, 0);
        ok = ref && cJSON_AddItemToObject(ctx, it->string, ref);
    }
    if (!ok) {
        cJSON_Delete(ctx);
        return base_err_set(err, COLIBRI_ENOMEM, "chat: out of memory");
    }
    int rc = jinja_render(tt->j, ctx, NULL, out, out_len, err);
    cJSON_Delete(ctx);
    if (rc) base_err_prefix(err, rc, "%s", tt->origin);
    return rc;
}

cJSON *tok_chat_msgs_json(const struct colibri_chat_msg *msgs, size_t n)
{
    cJSON *arr = cJSON_CreateArray();
    for (size_t i = 0; arr && i < n; i++) {
        cJSON *m = cJSON_CreateObject();
        if (!m || !cJSON_AddStringToObject(m, "role", msgs[i].role) ||
            !cJSON_AddStringToObject(m, "content", msgs[i].content ? msgs[i].content : "") ||
            !cJSON_AddItemToArray(arr, m)) {
            cJSON_Delete(m);
            cJSON_Delete(arr);
            return NULL;
        }
    }
    return arr;
}
