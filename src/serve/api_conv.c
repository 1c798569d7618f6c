/* serve/api_conv.c - dispatch between the agent APIs' translations, and the
 * SSE chunk splitting their streams share (contract in api_conv.h). */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "serve/api_conv.h"

void serve_api_turn_clear(struct serve_api_turn *t)
{
    if (!t) return;
    free(t->conv);
    t->conv = NULL;
}

int serve_api_count(const cJSON *n)
{
    if (!cJSON_IsNumber(n) || !isfinite(n->valuedouble) || n->valuedouble < 1) return 0;
    return n->valuedouble >= (double)INT_MAX ? INT_MAX : (int)n->valuedouble;
}

char *serve_api_request(enum serve_api api, const char *body, size_t len, int *stream, struct serve_api_turn *turn,
                        struct oai_error *e)
{
    if (api == SERVE_API_ANTHROPIC) return serve_anthropic_request(body, len, stream, e);
    if (api == SERVE_API_RESPONSES) return serve_responses_request(body, len, stream, turn, e);
    oai_error_set(e, 500, "server_error", NULL, NULL, "no translation for this API");
    return NULL;
}

char *serve_api_response(enum serve_api api, const char *chat_json, struct serve_api_turn *turn)
{
    if (api == SERVE_API_ANTHROPIC) return serve_anthropic_response(chat_json);
    if (api == SERVE_API_RESPONSES) return serve_responses_response(chat_json, turn);
    return strdup(chat_json);
}

char *serve_api_error(enum serve_api api, const struct oai_error *e)
{
    return api == SERVE_API_ANTHROPIC ? serve_anthropic_error(e) : oai_error_json(e);
}

struct serve_api_stream *serve_api_stream_new(enum serve_api api, const char *model, int n_prompt,
                                              struct serve_api_turn *turn)
{
    struct serve_api_stream *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    if (turn) {
        s->turn = *turn;
        turn->conv = NULL;
    }
    s->api = api;
    snprintf(s->model, sizeof s->model, "%s", model ? model : "");
    s->n_prompt = n_prompt;
    s->block = -1;
    return s;
}

void serve_api_stream_feed(struct serve_api_stream *s, struct strbuf *in, struct strbuf *out)
{
    size_t used = 0;
    while (used < in->n) {
        char *end = memmem(in->s + used, in->n - used, "\n\n", 2);
        if (!end) break;
        const char *line = in->s + used;
        size_t n = (size_t)(end - line);
        used = (size_t)(end - in->s) + 2;
        if (n < 6 || memcmp(line, "data: ", 6) || s->failed) continue;
        cJSON *chunk = NULL;
        if (!(n == 12 && !memcmp(line + 6, "[DONE]", 6))) {
            chunk = cJSON_ParseWithLength(line + 6, n - 6);
            if (!chunk) { out->failed = 1; continue; }
        }
        if (s->api == SERVE_API_ANTHROPIC) serve_anthropic_stream_chunk(s, chunk, out);
        else serve_responses_stream_chunk(s, chunk, out);
        cJSON_Delete(chunk);
    }
    base_sb_consume(in, used);
}

void serve_api_stream_free(struct serve_api_stream *s)
{
    if (!s) return;
    cJSON_Delete(s->acc);
    base_sb_free(&s->cur);
    serve_api_turn_clear(&s->turn);
    free(s);
}
