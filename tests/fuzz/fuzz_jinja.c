/* libFuzzer harness: the Jinja2 interpreter for chat templates
 * (src/tok/jinja*.c). The input is a template; what compiles is rendered
 * with a fixed conversation (system, user, assistant with a tool call, tool
 * result), tools and the usual flags, under tight limits. Every refusal must
 * say why; nothing may crash, leak or run unbounded. */
#include <stdlib.h>
#include <string.h>

#include "tok/jinja.h"

static const char *CTX =
    "{\"messages\":[{\"role\":\"system\",\"content\":\"Be brief.\"},{\"role\":\"user\",\"content\":\"Hi <b>\"},"
    "{\"role\":\"assistant\",\"content\":\"\",\"tool_calls\":[{\"type\":\"function\",\"function\":{\"name\":\"f\","
    "\"arguments\":{\"x\":1}}}]},{\"role\":\"tool\",\"content\":\"42\"},{\"role\":\"user\",\"content\":[1,2]}],"
    "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":{\"type\":\"object\"}}}],"
    "\"add_generation_prompt\":true,\"bos_token\":\"<s>\",\"eos_token\":\"</s>\",\"enable_thinking\":false}";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static cJSON *ctx;
    if (!ctx && !(ctx = cJSON_Parse(CTX))) abort();
    struct colibri_err err = { 0 };
    struct jinja_tpl *t = NULL;
    if (jinja_compile((const char *)data, size, &t, &err)) {
        if (!err.msg[0]) abort();
        return 0;
    }
    struct jinja_limits lim = jinja_default_limits();
    lim.max_output = 1 << 16;
    lim.max_memory = 1 << 22;
    lim.max_steps = 200000;
    char *out = NULL;
    size_t n = 0;
    if (jinja_render(t, ctx, &lim, &out, &n, &err)) {
        if (!err.msg[0]) abort();
    } else if (!out || strlen(out) > n || n > lim.max_output) {
        abort();
    }
    free(out);
    jinja_free(t);
    return 0;
}
