/* Loading a tiktoken.model is linear in the file: a 4 MB piece loads in a
 * fraction of a second (splitting every piece by hashing each prefix and
 * suffix took time square in the longest piece: 1.28 MB took 43 s, 4 MB
 * would take minutes). The test never times strictly: an alarm of 60 s ends
 * a quadratic load as a failure. Beside it, the merges that the splits make
 * are checked by what they encode: "ab" (rank 256) and "abc" (rank 257,
 * split ab + c) are merged as tiktoken merges them, lowest rank first. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "colibri.h"

#define LONG_BYTES (4u << 20)

static void b64_line(FILE *f, const unsigned char *s, size_t n, int rank)
{
    static const char A[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for (size_t i = 0; i < n; i += 3) {
        unsigned x = (unsigned)s[i] << 16 | (i + 1 < n ? (unsigned)s[i + 1] << 8 : 0) | (i + 2 < n ? s[i + 2] : 0);
        fputc(A[x >> 18 & 63], f);
        fputc(A[x >> 12 & 63], f);
        fputc(i + 1 < n ? A[x >> 6 & 63] : '=', f);
        fputc(i + 2 < n ? A[x & 63] : '=', f);
    }
    fprintf(f, " %d\n", rank);
}

static void test_long_piece_loads_linearly(void)
{
    char dir[128], path[256];
    snprintf(dir, sizeof dir, "/tmp/colibri_test_tiktoken_%d", (int)getpid());
    mkdir(dir, 0700);
    snprintf(path, sizeof path, "%s/tiktoken.model", dir);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL, "%s", path);
    if (!f) return;
    for (int c = 0; c < 256; c++) {
        unsigned char b = (unsigned char)c;
        b64_line(f, &b, 1, c);
    }
    b64_line(f, (const unsigned char *)"ab", 2, 256);
    b64_line(f, (const unsigned char *)"abc", 3, 257);
    /* rank 258: "ab" then 4 MB of 'c', whose prefixes ab, abc are pieces */
    unsigned char *big = malloc(LONG_BYTES);
    memset(big, 'c', LONG_BYTES);
    memcpy(big, "ab", 2);
    b64_line(f, big, LONG_BYTES, 258);
    fclose(f);

    alarm(60);   /* a quadratic load ends here as a failure, not a hang */
    colibri_tokenizer *t = NULL;
    struct colibri_err err = { 0 };
    int rc = colibri_tokenizer_load(dir, &t, &err);
    alarm(0);
    CHECK(rc == 0, "%s: %s", dir, err.msg);
    if (!rc) {
        CHECK(colibri_tokenizer_n_vocab(t) == 259 + 256 + 2, "n_vocab %d", colibri_tokenizer_n_vocab(t));
        const struct { const char *text; int32_t want[2]; } cases[] = { { "abcab", { 257, 256 } },
                                                                      { "abcc", { 257, 'c' } } };
        for (int i = 0; i < 2; i++) {
            int32_t *ids = NULL;
            size_t n = 0;
            rc = colibri_tokenizer_encode(t, cases[i].text, strlen(cases[i].text), 0, &ids, &n, NULL, &err);
            CHECK(rc == 0 && n == 2 && ids[0] == cases[i].want[0] && ids[1] == cases[i].want[1],
                  "%s: rc %d, %zu ids [%d %d]", cases[i].text, rc, n, n > 0 ? ids[0] : -1, n > 1 ? ids[1] : -1);
            free(ids);
        }
        int32_t id = 258;
        char *dec = NULL;
        size_t dlen = 0;
        rc = colibri_tokenizer_decode(t, &id, 1, 0, &dec, &dlen, &err);
        CHECK(rc == 0 && dlen == LONG_BYTES && !memcmp(dec, big, LONG_BYTES), "rank 258 decodes to %zu bytes", dlen);
        free(dec);
    }
    colibri_tokenizer_free(t);
    free(big);
    unlink(path);
    rmdir(dir);
}

int main(void)
{
    RUN_TEST(test_long_piece_loads_linearly);
    return CHECK_SUMMARY();
}
