/* serve/responses.c - OpenAI's Responses API (/v1/responses) over the chat
 * engine (contract in api_conv.h). */
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "serve/api_conv.h"

char *serve_responses_request(const char *body, size_t len, int *stream, struct oai_error *e)
{
    (void)body; (void)len; *stream = 0;
    oai_error_set(e, 501, "invalid_request_error", NULL, NULL, "/v1/responses is not implemented yet");
    return NULL;
}

char *serve_responses_response(const char *chat_json) { return strdup(chat_json); }

void serve_responses_stream_chunk(struct serve_api_stream *s, const struct cJSON *chunk, struct strbuf *out)
{
    (void)s; (void)chunk; (void)out;
}
