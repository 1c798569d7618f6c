/* The tokenizer's word cache (tok/tok_map.h): words of no bytes and words
 * that encode to no ids (a tiktoken vocabulary without some single bytes
 * drops them) are cached and found like any other, and what get returns
 * points into the cache's arrays, never at NULL (fuzz_tiktoken found
 * pointer arithmetic on the still-NULL id array for such a word). */
#include <stdint.h>

#include "check.h"
#include "tok/tok_map.h"

static void test_empty_words(void)
{
    struct tok_wordcache c;
    CHECK(tok_wordcache_init(&c, 4) == 0, "init");
    const int32_t *ids = NULL;
    /* first put of a fresh cache: a word with no ids */
    CHECK(tok_wordcache_put(&c, "Hello", 5, NULL, 0) == 0, "put of a word with no ids");
    CHECK(tok_wordcache_get(&c, "Hello", 5, &ids) == 0 && ids != NULL, "get: %p", (const void *)ids);
    /* a word of no bytes */
    const int32_t one[1] = { 7 };
    CHECK(tok_wordcache_put(&c, "", 0, one, 1) == 0, "put of the empty word");
    ids = NULL;
    CHECK(tok_wordcache_get(&c, "", 0, &ids) == 1 && ids && ids[0] == 7, "get of the empty word");
    CHECK(tok_wordcache_get(&c, "Hello", 5, &ids) == 0, "the first word is still there");
    CHECK(tok_wordcache_get(&c, "Hell", 4, &ids) == -1, "a prefix is not cached");
    tok_wordcache_free(&c);
    /* the same on a cache emptied by reaching max_entries */
    CHECK(tok_wordcache_init(&c, 1) == 0, "init");
    const int32_t two[2] = { 1, 2 };
    CHECK(tok_wordcache_put(&c, "ab", 2, two, 2) == 0 && tok_wordcache_put(&c, "x", 1, NULL, 0) == 0, "puts");
    CHECK(tok_wordcache_get(&c, "ab", 2, &ids) == -1, "emptied at max_entries");
    CHECK(tok_wordcache_get(&c, "x", 1, &ids) == 0 && ids != NULL, "get after emptying");
    tok_wordcache_free(&c);
}

int main(void)
{
    RUN_TEST(test_empty_words);
    return CHECK_SUMMARY();
}
