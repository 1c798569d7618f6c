/* libFuzzer harness: DeepSeek-V4's text side. The input is both a request
 * and a reply: as JSON, {"messages": ..., "tools": ..., "variables": ...}
 * goes to the built-in V4 format (src/tok/tok_chat_v4.c), which must render
 * or refuse saying why; as text, it is a model reply whose DSML tool calls
 * the server reads (oai_parse_tool_calls), and whose streaming view at every
 * cut must stay within the text.
 * Nothing may crash or leak. */
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "serve/oai.h"
#include "tok/jinja.h"
#include "tok/tok_chat_v4.h"

static void render(const uint8_t *data, size_t size)
{
    cJSON *req = tok_jinja_json_parse((const char *)data, size);
    if (!cJSON_IsObject(req)) { cJSON_Delete(req); return; }
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(req, "messages");
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(req, "tools");
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(req, "variables");
    char *out = NULL;
    size_t len = 0;
    struct colibri_err err = { 0 };
    int rc = tok_chat_v4_render(m, cJSON_IsNull(t) ? NULL : t, cJSON_IsObject(v) ? v : NULL, size & 1, &out, &len,
                                &err);
    if (rc && (!err.msg[0] || out)) abort();
    if (!rc && (!out || strlen(out) != len)) abort();
    free(out);
    cJSON_Delete(req);
}

static void reply(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    if (!s) return;
    memcpy(s, data, size);
    s[size] = 0;
    size_t n = strlen(s);
    cJSON *calls = NULL;
    char *content = NULL;
    int nc = oai_parse_tool_calls(s, NULL, &calls, &content);
    if (nc < 0 || (nc > 0 && (!calls || !content)) || cJSON_GetArraySize(calls) != nc) abort();
    for (size_t cut = 0; cut <= n; cut += 1 + n / 64) {
        struct oai_tool_view v;
        if (serve_oai_tool_view(s, cut, cut == n, NULL, &v)) continue;
        if (v.text_end > cut) abort();
        serve_oai_tool_view_free(&v);
    }
    cJSON_Delete(calls);
    free(content);
    free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    render(data, size);
    reply(data, size);
    return 0;
}
