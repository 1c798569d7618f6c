/* test_serve_agents.c - what agents hit first: a tool-call reply cut by
 * max_tokens keeps its complete calls and never leaks markup into content. */
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "check.h"
#include "serve/oai.h"

#define CALL(args) "<｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n" args "\n```<｜tool▁call▁end｜>"

static void test_tool_calls_cut(void)
{
    /* two complete calls, the third cut inside its arguments */
    const char *cut = "Sure.<｜tool▁calls▁begin｜>" CALL("{\"city\": \"Paris\"}") "\n" CALL("{\"city\": \"Rome\"}")
                      "\n<｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{\"city\": \"Ber";
    cJSON *calls = NULL;
    char *content = NULL;
    CHECK(oai_parse_tool_calls(cut, NULL, &calls, &content) == 0 && !calls, "a cut reply is not whole calls");
    int n = serve_oai_tool_calls_cut(cut, NULL, &calls, &content);
    CHECK(n == 2 && cJSON_GetArraySize(calls) == 2, "complete calls kept: %d", n);
    const cJSON *f = cJSON_GetObjectItem(cJSON_GetArrayItem(calls, 1), "function");
    const cJSON *a = cJSON_GetObjectItem(f, "arguments");
    CHECK(cJSON_IsString(a) && !strcmp(a->valuestring, "{\"city\": \"Rome\"}"), "second call's arguments");
    CHECK(content && !strcmp(content, "Sure."), "content is the text before the section: '%s'", content ? content : "");
    cJSON_Delete(calls);
    free(content);
    /* cut before any call is complete: no calls, and still no markup */
    const char *early = "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_wea";
    n = serve_oai_tool_calls_cut(early, NULL, &calls, &content);
    CHECK(n == 0 && calls && content && !content[0], "nothing complete: %d '%s'", n, content ? content : "");
    cJSON_Delete(calls);
    free(content);
    /* no section at all: nothing */
    n = serve_oai_tool_calls_cut("plain text", NULL, &calls, &content);
    CHECK(n == 0 && !calls && !content, "plain text has no section");
}

int main(void)
{
    RUN_TEST(test_tool_calls_cut);
    return CHECK_SUMMARY();
}
