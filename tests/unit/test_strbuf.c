/* test_strbuf.c - base/strbuf.h: appends that cross the first allocation and
 * many doublings, against text built independently with snprintf into a
 * fixed array; appendf's formatting; reserve leaving room for exactly what it
 * promised; consume and clear; and an allocation failure, which frees the
 * buffer, returns COLIBRI_ENOMEM and makes every later call fail. */
#include <stdint.h>
#include <string.h>

#include "base/strbuf.h"
#include "check.h"
#include "colibri.h"

static char want[1 << 16];

static void test_append_grows(void)
{
    struct strbuf b = { 0 };
    size_t w = 0;
    int rc = 0;
    for (int i = 0; i < 3000; i++) {
        rc |= base_sb_appendf(&b, "%d,", i);
        w += (size_t)snprintf(want + w, sizeof want - w, "%d,", i);
        if (i % 7 == 0) {
            rc |= base_sb_append(&b, "ab\0c", 4);   /* bytes, NUL included */
            memcpy(want + w, "ab\0c", 4);
            w += 4;
        }
    }
    CHECK(rc == 0 && !b.failed, "rc %d failed %d", rc, b.failed);
    CHECK(b.n == w && !memcmp(b.s, want, w), "%zu bytes, want %zu", b.n, w);
    CHECK(b.s[b.n] == 0 && b.cap > b.n, "NUL-terminated within cap");
    CHECK(base_sb_puts(&b, "end") == 0 && b.n == w + 3 && !strcmp(b.s + w, "end"), "puts");
    base_sb_free(&b);
    CHECK(!b.s && !b.n && !b.cap && !b.failed, "free zeroes");
}

static void test_appendf_formats(void)
{
    struct strbuf b = { 0 };
    char big[1000];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = 0;
    base_sb_appendf(&b, "[%5.2f|%-4s|%llx]", 3.14159, "a", 0xabcdefULL);
    CHECK(!strcmp(b.s, "[ 3.14|a   |abcdef]"), "'%s'", b.s);
    base_sb_appendf(&b, "%s%s", big, big);   /* one append larger than the buffer so far */
    CHECK(b.n == 19 + 2 * 999 && b.s[19] == 'x' && b.s[b.n - 1] == 'x' && !b.s[b.n], "n %zu", b.n);
    base_sb_free(&b);
}

static void test_reserve_consume_clear(void)
{
    struct strbuf b = { 0 };
    CHECK(base_sb_reserve(&b, 1000) == 0 && b.cap >= 1001, "cap %zu", b.cap);
    char *s = b.s;
    for (int i = 0; i < 100; i++) base_sb_append(&b, "0123456789", 10);
    CHECK(b.s == s && b.n == 1000, "reserved room used without reallocating");
    base_sb_consume(&b, 995);
    CHECK(b.n == 5 && !strcmp(b.s, "56789"), "consume: '%s'", b.s);
    base_sb_clear(&b);
    CHECK(b.n == 0 && b.s == s && b.s[0] == 0, "clear keeps the allocation");
    base_sb_free(&b);
}

static void test_out_of_memory(void)
{
    struct strbuf b = { 0 };
    base_sb_puts(&b, "kept until the failure");
    /* a size whose n + extra + 1 wraps: refused without an allocation */
    CHECK(base_sb_reserve(&b, SIZE_MAX - 4) == COLIBRI_ENOMEM, "wrapping reserve");
    CHECK(b.failed && !b.s && !b.n && !b.cap, "freed and marked failed");
    CHECK(base_sb_puts(&b, "x") == COLIBRI_ENOMEM && base_sb_appendf(&b, "%d", 1) == COLIBRI_ENOMEM && !b.s,
          "later calls fail");
    base_sb_clear(&b);
    CHECK(!b.failed && base_sb_puts(&b, "again") == 0 && !strcmp(b.s, "again"), "clear starts over");
    base_sb_free(&b);
#if !defined(__SANITIZE_ADDRESS__)   /* ASan aborts on such a request instead of returning NULL */
    base_sb_puts(&b, "x");
    CHECK(base_sb_reserve(&b, (size_t)1 << 62) == COLIBRI_ENOMEM && b.failed && !b.s, "realloc failing");
    base_sb_free(&b);
#endif
}

int main(void)
{
    RUN_TEST(test_append_grows);
    RUN_TEST(test_appendf_formats);
    RUN_TEST(test_reserve_consume_clear);
    RUN_TEST(test_out_of_memory);
    return CHECK_SUMMARY();
}
