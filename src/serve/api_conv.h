/* serve/api_conv.h - the agent APIs on the chat engine: Anthropic's
 * Messages API (/v1/messages, anthropic.c) and OpenAI's Responses API
 * (/v1/responses, responses.c), each translated to and from the OpenAI
 * chat-completions wire format that oai.h parses and emits.
 *
 * A request body becomes a /v1/chat/completions body (every field either
 * carried over, or refused by name with the API's own error shape); the
 * chat response, its SSE chunks and its errors become the API's. Nothing
 * here touches a job: the translation is text to text, so the engine and
 * the OpenAI paths stay as they are. Thread-safe (pure functions, and a
 * stream's state belongs to its one response). */
#ifndef COLIBRI_SERVE_API_CONV_H
#define COLIBRI_SERVE_API_CONV_H

#include <stddef.h>

#include "base/strbuf.h"
#include "serve/oai.h"

enum serve_api { SERVE_API_OPENAI = 0, SERVE_API_ANTHROPIC, SERVE_API_RESPONSES };

/* A /v1/responses turn, from its request to its answer: the server's store
 * (set by the caller; NULL keeps nothing and knows no previous response),
 * the previous_response_id the request named ("" for none) and the
 * conversation the answer continues (a JSON array of chat messages without
 * the instructions, malloc'd; NULL when the request said store: false).
 * The answer keeps that conversation, its own output appended, under the
 * response's id. */
struct resp_store;
struct serve_api_turn {
    struct resp_store *store;
    char prev[96];
    char *conv;
};
void serve_api_turn_clear(struct serve_api_turn *t);

/* The chat-completions body (malloc'd, the caller's) for an API's request
 * body[0..len); *stream is set when the request streams. NULL with *e
 * filled on any problem. turn: the Responses API's (others: NULL). */
char *serve_api_request(enum serve_api api, const char *body, size_t len, int *stream, struct serve_api_turn *turn,
                        struct oai_error *e);

/* The API's response (malloc'd) for a chat completion's JSON. NULL when
 * out of memory. turn as for the request. */
char *serve_api_response(enum serve_api api, const char *chat_json, struct serve_api_turn *turn);

/* The API's error body (malloc'd) for e. */
char *serve_api_error(enum serve_api api, const struct oai_error *e);

/* A stream's translation: chat SSE chunks ("data: {...}\n\n", the last
 * "data: [DONE]\n\n") in, the API's events out; a chunk callback gets each
 * parsed chunk, NULL for [DONE]. n_prompt: the prompt's
 * tokens, for the first event. serve_api_stream_feed consumes the whole
 * chunks in *in and appends the events to *out. */
struct serve_api_stream {
    enum serve_api api;
    char model[128];
    int n_prompt, out_tokens;
    int cached_tokens;          /* the prompt tokens the slot reused (the chunks' usage) */
    int started, failed;        /* the first event is out; an error event ended it */
    int block, n_blocks, kind;  /* the open content block (kind 0: none) and how many were opened */
    int tool_index;             /* the chat tool_calls index of an open tool block */
    char finish[32];            /* the chat finish_reason */
    struct cJSON *acc;          /* Responses: the response object being built */
    struct strbuf cur;          /* Responses: the open item's text (or arguments) so far */
    int seq;                    /* Responses: the next event's sequence_number */
    char item_id[48];           /* Responses: the open item's id */
    struct serve_api_turn turn; /* Responses: what the request left for the answer */
};
struct cJSON;
/* turn (may be NULL) is moved into the stream: its conv is the stream's then. */
struct serve_api_stream *serve_api_stream_new(enum serve_api api, const char *model, int n_prompt,
                                              struct serve_api_turn *turn);
void serve_api_stream_feed(struct serve_api_stream *s, struct strbuf *in, struct strbuf *out);
void serve_api_stream_free(struct serve_api_stream *s);

/* A count from a chat reply's JSON number n (a token count, an index): n
 * rounded toward zero and clamped to [0, INT_MAX]; 0 for anything not a
 * finite number. The replies are the server's own, but a count is never
 * converted unchecked. */
int serve_api_count(const struct cJSON *n);

/* The pieces each API implements (anthropic.c, responses.c). */
char *serve_anthropic_request(const char *body, size_t len, int *stream, struct oai_error *e);
char *serve_anthropic_response(const char *chat_json);
char *serve_anthropic_error(const struct oai_error *e);
void serve_anthropic_stream_chunk(struct serve_api_stream *s, const struct cJSON *chunk, struct strbuf *out);
char *serve_responses_request(const char *body, size_t len, int *stream, struct serve_api_turn *turn,
                              struct oai_error *e);
char *serve_responses_response(const char *chat_json, struct serve_api_turn *turn);
void serve_responses_stream_chunk(struct serve_api_stream *s, const struct cJSON *chunk, struct strbuf *out);

#endif
