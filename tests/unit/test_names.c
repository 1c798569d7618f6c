/* The name lists built from the traits tables (weight formats, KV tiers, RoPE
 * precisions): each list holds every table entry exactly once, in table
 * order, and nothing else; the public colibri_*_names give the same lists;
 * the joiner behaves like snprintf when the buffer is short. */
#include <string.h>

#include "base/util.h"
#include "check.h"
#include "colibri.h"
#include "kv/codec.h"
#include "quant/format.h"

/* Splits list at sep into tok[], returning the count (at most max). */
static int split(char *list, const char *sep, char **tok, int max)
{
    int n = 0;
    char *save = NULL;
    for (char *t = strtok_r(list, sep, &save); t && n < max; t = strtok_r(NULL, sep, &save)) tok[n++] = t;
    return n;
}

static void test_weight_format_list_is_the_table(void)
{
    char list[512], *tok[64];
    size_t len = quant_fmt_names(list, sizeof list, " ");
    CHECK(len == strlen(list) && len > 0, "length %zu vs strlen %zu", len, strlen(list));
    int n = split(list, " ", tok, 64), k = 0;
    for (int f = 0; f < QUANT_FMT_COUNT; f++) {
        if (!quant_fmt_valid(f)) continue;
        CHECK(k < n && !strcmp(tok[k], quant_fmt_name((enum quant_fmt)f)), "format %d '%s' is entry %d of the list",
              f, quant_fmt_name((enum quant_fmt)f), k);
        k++;
    }
    CHECK(n == k, "list has %d names, the table %d", n, k);
    for (int i = 0; i < n; i++)
        CHECK(quant_fmt_from_name(tok[i]) >= 0, "'%s' in the list is not a format name", tok[i]);
    CHECK(k >= 9 && quant_fmt_from_name("q4g64") == QUANT_Q4G64, "table holds the nine formats");
}

static void test_kv_tier_list_is_the_table(void)
{
    char list[512], *tok[64];
    size_t len = kv_tier_names(list, sizeof list, ",");
    CHECK(len == strlen(list), "length %zu vs strlen %zu", len, strlen(list));
    int n = split(list, ",", tok, 64);
    CHECK(n == KV_TIER_COUNT, "list has %d names, the table %d", n, (int)KV_TIER_COUNT);
    for (int t = 0; t < KV_TIER_COUNT && t < n; t++) {
        CHECK(!strcmp(tok[t], kv_tier_name((enum kv_tier)t)), "tier %d: '%s' vs '%s'", t, tok[t],
              kv_tier_name((enum kv_tier)t));
        CHECK(kv_tier_from_name(tok[t]) == t, "'%s' parses back to %d", tok[t], t);
    }
}

static void test_kv_rope_list_is_the_table(void)
{
    char list[256], *tok[16];
    kv_rope_names(list, sizeof list, " ");
    int n = split(list, " ", tok, 16);
    CHECK(n == KV_ROPE_COUNT, "list has %d names, the table %d", n, (int)KV_ROPE_COUNT);
    for (int p = 0; p < KV_ROPE_COUNT && p < n; p++)
        CHECK(kv_rope_from_name(tok[p]) == p, "'%s' parses back to %d", tok[p], p);
}

static void test_public_lists_equal_internal(void)
{
    char a[512], b[512];
    quant_fmt_names(a, sizeof a, ", ");
    colibri_weight_format_names(b, sizeof b, ", ");
    CHECK(!strcmp(a, b), "'%s' vs '%s'", a, b);
    kv_tier_names(a, sizeof a, " ");
    colibri_kv_tier_names(b, sizeof b, " ");
    CHECK(!strcmp(a, b), "'%s' vs '%s'", a, b);
    kv_rope_names(a, sizeof a, "|");
    colibri_kv_rope_names(b, sizeof b, "|");
    CHECK(!strcmp(a, b), "'%s' vs '%s'", a, b);
}

static const char *abc_name(int i)
{
    static const char *const N[] = { "ab", NULL, "cde", "f" };
    return N[i];
}

static void test_join_like_snprintf(void)
{
    char buf[16];
    CHECK(base_join_names(buf, sizeof buf, ", ", 4, abc_name) == 10 && !strcmp(buf, "ab, cde, f"),
          "NULL entry skipped: '%s'", buf);
    memset(buf, 'x', sizeof buf);
    CHECK(base_join_names(buf, 6, ", ", 4, abc_name) == 10 && !strcmp(buf, "ab, c"), "cut at n - 1: '%s'", buf);
    memset(buf, 'x', sizeof buf);
    CHECK(base_join_names(buf, 1, ",", 4, abc_name) == 8 && buf[0] == 0, "n = 1: empty string");
    buf[0] = 'x';
    CHECK(base_join_names(buf, 0, ",", 4, abc_name) == 8 && buf[0] == 'x', "n = 0 writes nothing");
    CHECK(base_join_names(buf, sizeof buf, ",", 0, abc_name) == 0 && buf[0] == 0, "empty list");
}

int main(void)
{
    RUN_TEST(test_weight_format_list_is_the_table);
    RUN_TEST(test_kv_tier_list_is_the_table);
    RUN_TEST(test_kv_rope_list_is_the_table);
    RUN_TEST(test_public_lists_equal_internal);
    RUN_TEST(test_join_like_snprintf);
    return CHECK_SUMMARY();
}
