/* serve/resp_store: what is kept, what is dropped for room (oldest first, by
 * count and by bytes), replacement by id, and the refusal of a text larger
 * than the whole store. The bounds are the header's constants. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "serve/resp_store.h"

static int has(struct resp_store *rs, const char *id, const char *want)
{
    char *t = serve_resp_store_get(rs, id);
    int ok = t && (!want || !strcmp(t, want));
    free(t);
    return ok;
}

static void test_count_bound(void)
{
    struct resp_store *rs = serve_resp_store_new();
    char id[32], text[32];
    for (int i = 0; i < RESP_STORE_MAX + 10; i++) {
        snprintf(id, sizeof id, "resp_%d", i);
        snprintf(text, sizeof text, "[%d]", i);
        CHECK(serve_resp_store_put(rs, id, text) == 0, "put %d", i);
    }
    for (int i = 0; i < 10; i++) {
        snprintf(id, sizeof id, "resp_%d", i);
        CHECK(!has(rs, id, NULL), "%s should have been dropped (the oldest)", id);
    }
    snprintf(id, sizeof id, "resp_%d", 10);
    CHECK(has(rs, id, "[10]"), "the oldest kept one");
    snprintf(id, sizeof id, "resp_%d", RESP_STORE_MAX + 9);
    snprintf(text, sizeof text, "[%d]", RESP_STORE_MAX + 9);
    CHECK(has(rs, id, text), "the newest");
    CHECK(serve_resp_store_put(rs, "resp_10", "new") == 0 && has(rs, "resp_10", "new"), "replaced by id");
    CHECK(!has(rs, "resp_x", NULL) && !serve_resp_store_get(NULL, "resp_10"), "unknown id, no store");
    serve_resp_store_free(rs);
}

static void test_byte_bound(void)
{
    struct resp_store *rs = serve_resp_store_new();
    size_t big = RESP_STORE_BYTES / 8;  /* eight fill it, with the ids a little over */
    char *text = malloc(big + 1);
    memset(text, 'x', big);
    text[big] = 0;
    char id[32];
    for (int i = 0; i < 10; i++) {
        snprintf(id, sizeof id, "big_%d", i);
        text[0] = (char)('0' + i);
        CHECK(serve_resp_store_put(rs, id, text) == 0, "put %d", i);
    }
    int kept = 0;
    for (int i = 0; i < 10; i++) {
        snprintf(id, sizeof id, "big_%d", i);
        kept += has(rs, id, NULL);
        if (i >= 3) CHECK(has(rs, id, NULL), "%s (among the newest seven)", id);
    }
    CHECK(kept == 7, "kept %d of 10 texts of 1/8 of the bound (7 fit with their ids)", kept);
    char *huge = malloc(RESP_STORE_BYTES + 1);
    memset(huge, 'y', RESP_STORE_BYTES);
    huge[RESP_STORE_BYTES] = 0;
    CHECK(serve_resp_store_put(rs, "huge", huge) == -1 && !has(rs, "huge", NULL) && has(rs, "big_9", NULL),
          "a text over the bound is refused and drops nothing");
    free(huge);
    free(text);
    serve_resp_store_free(rs);
}

int main(void)
{
    RUN_TEST(test_count_bound);
    RUN_TEST(test_byte_bound);
    return CHECK_SUMMARY();
}
