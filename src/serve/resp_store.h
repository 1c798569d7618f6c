/* serve/resp_store.h - the responses /v1/responses keeps, so that a request
 * naming previous_response_id continues that conversation (responses.c).
 *
 * In memory only, bounded: at most RESP_STORE_MAX entries and
 * RESP_STORE_BYTES bytes of text; putting one more drops the oldest first
 * (a restart forgets them all). Each entry is a response id and a text (the
 * conversation as a JSON array of chat messages). Thread-safe. Internal to
 * src/serve/. */
#ifndef COLIBRI_SERVE_RESP_STORE_H
#define COLIBRI_SERVE_RESP_STORE_H

#include <stddef.h>

#define RESP_STORE_MAX 1024
#define RESP_STORE_BYTES ((size_t)64 << 20)

struct resp_store;

/* NULL when out of memory. */
struct resp_store *serve_resp_store_new(void);
void serve_resp_store_free(struct resp_store *rs);

/* Keeps a copy of text under id (replacing one of the same id). 0, or -1
 * when out of memory or the text alone exceeds RESP_STORE_BYTES (nothing
 * kept). */
int serve_resp_store_put(struct resp_store *rs, const char *id, const char *text);

/* A malloc'd copy of the text kept under id (the caller frees it), or NULL
 * when none is (never stored, dropped for room, or rs is NULL). */
char *serve_resp_store_get(struct resp_store *rs, const char *id);

#endif
