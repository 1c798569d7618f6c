/* test_sample.c - the sampler (greedy, temperature, top-k, top-p, min-p,
 * penalties, seeding) and stop strings over streamed text, through the
 * public API. Statistical checks use fixed seeds (so they cannot flake) and
 * compare frequencies with probabilities computed here from the logits. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "colibri.h"

static colibri_sampler *mk(struct colibri_sampler_opts o, int n)
{
    struct colibri_err err = { 0 };
    colibri_sampler *s = NULL;
    int rc = colibri_sampler_new(&o, n, &s, &err);
    CHECK(rc == 0, "sampler_new: %s", err.msg);
    return s;
}

static struct colibri_sampler_opts plain(float temp, uint64_t seed)
{
    struct colibri_sampler_opts o = colibri_sampler_default_opts();
    o.temperature = temp;
    o.top_k = 0;
    o.top_p = 1.0f;
    o.min_p = 0.0f;
    o.seed = seed;
    return o;
}

static void test_greedy(void)
{
    float l[6] = { 0.5f, 3.0f, -1.0f, 3.0f, 2.9f, -INFINITY };
    colibri_sampler *s = mk(plain(0.0f, 1), 6);
    CHECK(colibri_sampler_sample(s, l, NULL) == 1, "argmax, lowest id on a tie");
    CHECK(l[1] == 3.0f && l[3] == 3.0f, "logits untouched");
    colibri_sampler_free(s);
}

static void draw(colibri_sampler *s, const float *l, int n, int times, int *counts)
{
    memset(counts, 0, sizeof(int) * (size_t)n);
    for (int i = 0; i < times; i++) {
        int32_t t = colibri_sampler_sample(s, l, NULL);
        CHECK(t >= 0 && t < n, "token %d in range", t);
        if (t >= 0 && t < n) counts[t]++;
    }
}

static void test_seed_reproducible(void)
{
    float l[50];
    for (int i = 0; i < 50; i++) l[i] = (float)(i % 7) * 0.1f;
    colibri_sampler *a = mk(plain(1.0f, 42), 50), *b = mk(plain(1.0f, 42), 50), *c = mk(plain(1.0f, 43), 50);
    int same_ab = 1, same_ac = 1;
    int32_t first[200];
    for (int i = 0; i < 200; i++) {
        int32_t ta = colibri_sampler_sample(a, l, NULL), tb = colibri_sampler_sample(b, l, NULL);
        int32_t tc = colibri_sampler_sample(c, l, NULL);
        first[i] = ta;
        same_ab &= ta == tb;
        same_ac &= ta == tc;
    }
    CHECK(same_ab, "same seed, same tokens");
    CHECK(!same_ac, "another seed, other tokens");
    colibri_sampler_reset(a, 42);
    int same_again = 1;
    for (int i = 0; i < 200; i++) same_again &= colibri_sampler_sample(a, l, NULL) == first[i];
    CHECK(same_again, "reset to the seed replays the tokens");
    colibri_sampler_free(a);
    colibri_sampler_free(b);
    colibri_sampler_free(c);
}

/* Frequencies of N draws within 5 standard deviations of p. */
static void check_freq(const int *counts, const double *p, int n, int N, const char *what)
{
    for (int i = 0; i < n; i++) {
        double sd = sqrt(N * p[i] * (1 - p[i])) + 1e-9;
        CHECK(fabs(counts[i] - N * p[i]) <= 5 * sd + 0.5, "%s: id %d drawn %d times, expected %.1f", what, i,
              counts[i], N * p[i]);
    }
}

static void softmax(const float *l, int n, float temp, double *p)
{
    double m = -INFINITY, z = 0;
    for (int i = 0; i < n; i++) m = fmax(m, l[i] / temp);
    for (int i = 0; i < n; i++) z += (p[i] = exp(l[i] / temp - m));
    for (int i = 0; i < n; i++) p[i] /= z;
}

static void test_temperature(void)
{
    float l[4] = { 1.0f, 0.0f, -1.0f, 0.5f };
    double p[4];
    int counts[4];
    for (int k = 0; k < 2; k++) {
        float temp = k ? 2.0f : 0.7f;
        colibri_sampler *s = mk(plain(temp, 7), 4);
        draw(s, l, 4, 20000, counts);
        softmax(l, 4, temp, p);
        check_freq(counts, p, 4, 20000, temp > 1 ? "T=2" : "T=0.7");
        colibri_sampler_free(s);
    }
}

static void test_top_k(void)
{
    float l[6] = { 0.1f, 0.4f, 0.3f, 0.2f, 0.0f, 0.35f };
    struct colibri_sampler_opts o = plain(1.0f, 3);
    o.top_k = 3;   /* ids 1, 5, 2 */
    colibri_sampler *s = mk(o, 6);
    int counts[6];
    draw(s, l, 6, 20000, counts);
    CHECK(counts[0] == 0 && counts[3] == 0 && counts[4] == 0, "only the top 3 appear");
    float kept[3] = { 0.4f, 0.35f, 0.3f };
    double p[3];
    softmax(kept, 3, 1.0f, p);
    int c3[3] = { counts[1], counts[5], counts[2] };
    check_freq(c3, p, 3, 20000, "top-k renormalised");
    colibri_sampler_free(s);

    o.top_k = 1;
    s = mk(o, 6);
    draw(s, l, 6, 500, counts);
    CHECK(counts[1] == 500, "top_k=1 is greedy");
    colibri_sampler_free(s);
}

static void test_top_p_min_p(void)
{
    /* probabilities 0.5, 0.3, 0.15, 0.05 */
    float l[4] = { logf(0.5f), logf(0.3f), logf(0.15f), logf(0.05f) };
    struct colibri_sampler_opts o = plain(1.0f, 5);
    o.top_p = 0.75f;   /* 0.5 < 0.75 <= 0.8: ids 0 and 1 */
    colibri_sampler *s = mk(o, 4);
    int counts[4];
    draw(s, l, 4, 20000, counts);
    CHECK(counts[2] == 0 && counts[3] == 0, "top-p keeps the smallest set reaching the mass");
    double p2[2] = { 0.5 / 0.8, 0.3 / 0.8 };
    check_freq(counts, p2, 2, 20000, "top-p renormalised");
    colibri_sampler_free(s);

    o = plain(1.0f, 6);
    o.min_p = 0.2f;    /* drops p < 0.1: only id 3 */
    s = mk(o, 4);
    draw(s, l, 4, 20000, counts);
    CHECK(counts[3] == 0 && counts[2] > 0, "min-p drops p < min_p * p_max only");
    double p3[3] = { 0.5 / 0.95, 0.3 / 0.95, 0.15 / 0.95 };
    check_freq(counts, p3, 3, 20000, "min-p renormalised");
    colibri_sampler_free(s);
}

static void test_penalties(void)
{
    struct colibri_sampler_opts o = plain(0.0f, 1);
    o.repeat_penalty = 1.5f;
    colibri_sampler *s = mk(o, 3);
    float l[3] = { 2.0f, 1.9f, -5.0f };
    colibri_sampler_accept(s, 0);
    CHECK(colibri_sampler_sample(s, l, NULL) == 1, "repeat penalty divides a positive logit (2/1.5 < 1.9)");
    colibri_sampler_free(s);

    float neg[2] = { -1.0f, -1.2f };
    s = mk(o, 2);
    colibri_sampler_accept(s, 0);
    CHECK(colibri_sampler_sample(s, neg, NULL) == 1, "repeat penalty multiplies a negative logit (-1.5 < -1.2)");
    colibri_sampler_free(s);

    o = plain(0.0f, 1);
    o.presence_penalty = 0.5f;
    s = mk(o, 3);
    float m[3] = { 1.0f, 0.9f, 0.0f };
    colibri_sampler_accept(s, 0);
    colibri_sampler_accept(s, 0);
    CHECK(colibri_sampler_sample(s, m, NULL) == 1, "presence penalty");
    colibri_sampler_free(s);

    o = plain(0.0f, 1);
    o.frequency_penalty = 0.06f;
    s = mk(o, 3);
    colibri_sampler_accept(s, 0);
    CHECK(colibri_sampler_sample(s, m, NULL) == 0, "one occurrence: 1 - 0.06 > 0.9");
    colibri_sampler_accept(s, 0);
    CHECK(colibri_sampler_sample(s, m, NULL) == 1, "two occurrences: 1 - 0.12 < 0.9");
    colibri_sampler_free(s);

    o = plain(0.0f, 1);
    o.presence_penalty = 0.5f;
    o.repeat_last_n = 2;
    s = mk(o, 3);
    colibri_sampler_accept(s, 0);
    colibri_sampler_accept(s, 2);
    colibri_sampler_accept(s, 2);
    CHECK(colibri_sampler_sample(s, m, NULL) == 0, "token 0 fell out of the window of 2");
    colibri_sampler_free(s);
}

static void test_bad_opts(void)
{
    struct colibri_err err = { 0 };
    colibri_sampler *s = NULL;
    struct colibri_sampler_opts o = colibri_sampler_default_opts();
    o.top_p = -0.5f;
    CHECK(colibri_sampler_new(&o, 10, &s, &err) == COLIBRI_EINVAL && strstr(err.msg, "top_p"), "top_p: %s", err.msg);
    o = colibri_sampler_default_opts();
    o.min_p = 2.0f;
    CHECK(colibri_sampler_new(&o, 10, &s, &err) == COLIBRI_EINVAL && strstr(err.msg, "min_p"), "min_p: %s", err.msg);
    o = colibri_sampler_default_opts();
    o.repeat_penalty = 0.0f;
    CHECK(colibri_sampler_new(&o, 10, &s, &err) == COLIBRI_EINVAL && strstr(err.msg, "repeat_penalty"), "%s", err.msg);
    o = colibri_sampler_default_opts();
    CHECK(colibri_sampler_new(&o, 0, &s, &err) == COLIBRI_EINVAL, "n_vocab 0");
    CHECK(s == NULL, "out untouched on failure");
}

/* Feeds pieces, collects the output; returns the stop flag of the last feed. */
static int feed_all(colibri_stop *st, const char *const *pieces, int n, char *out)
{
    int r = 0;
    out[0] = 0;
    for (int i = 0; i < n; i++) {
        const char *o;
        size_t ol;
        r = colibri_stop_feed(st, pieces[i], strlen(pieces[i]), &o, &ol, NULL);
        strncat(out, o, ol);
    }
    return r;
}

/* logit_bias: added before everything else; the sampler keeps its own copy */
static void test_logit_bias(void)
{
    float l[5] = { 1.0f, 4.0f, 2.0f, 0.0f, -1.0f };
    struct colibri_logit_bias *b = malloc(2 * sizeof *b);
    b[0] = (struct colibri_logit_bias){ 1, -100.0f };
    b[1] = (struct colibri_logit_bias){ 4, 2.5f };
    struct colibri_sampler_opts o = plain(0.0f, 1);
    o.logit_bias = b;
    o.n_logit_bias = 2;
    colibri_sampler *s = mk(o, 5);
    free(b);   /* copied at creation */
    CHECK(colibri_sampler_sample(s, l, NULL) == 2, "id 1 banned: next best is 2");
    CHECK(l[1] == 4.0f, "logits untouched");
    colibri_sampler_free(s);
    struct colibri_logit_bias force = { 4, 100.0f };
    o = plain(1.5f, 7);
    o.logit_bias = &force;
    o.n_logit_bias = 1;
    s = mk(o, 5);
    int counts[5];
    draw(s, l, 5, 500, counts);
    CHECK(counts[4] == 500, "+100 forces id 4 at temperature 1.5: %d/500", counts[4]);
    colibri_sampler_free(s);
    struct colibri_err err = { 0 };
    struct colibri_logit_bias bad = { 5, 1.0f };
    o.logit_bias = &bad;
    CHECK(colibri_sampler_new(&o, 5, &s, &err) == COLIBRI_EINVAL && strstr(err.msg, "logit_bias token 5"),
          "out-of-vocabulary id: %s", err.msg);
    bad = (struct colibri_logit_bias){ 2, NAN };
    CHECK(colibri_sampler_new(&o, 5, &s, &err) == COLIBRI_EINVAL && strstr(err.msg, "not finite"), "NaN bias: %s",
          err.msg);
}

static void test_stop_strings(void)
{
    struct colibri_err err = { 0 };
    const char *stops[] = { "<|stop|>", "\n\nUser:", "" };
    colibri_stop *st = NULL;
    CHECK(colibri_stop_new(stops, 3, &st, &err) == 0, "%s", err.msg);
    char out[256];
    const char *p1[] = { "Hello wor", "ld<|st", "op|> more" };
    CHECK(feed_all(st, p1, 3, out) == 1 && !strcmp(out, "Hello world"), "split stop string: '%s'", out);
    const char *o;
    size_t ol;
    CHECK(colibri_stop_feed(st, "x", 1, &o, &ol, NULL) == 1 && ol == 0, "nothing after a stop");
    colibri_stop_free(st);

    /* held back while ambiguous, released when not a stop string */
    CHECK(colibri_stop_new(stops, 3, &st, &err) == 0, "%s", err.msg);
    CHECK(colibri_stop_feed(st, "abc<|s", 6, &o, &ol, NULL) == 0 && ol == 3 && !memcmp(o, "abc", 3), "held '<|s'");
    CHECK(colibri_stop_feed(st, "x", 1, &o, &ol, NULL) == 0 && ol == 4 && !memcmp(o, "<|sx", 4), "released");
    CHECK(colibri_stop_feed(st, "\n\nUs", 4, &o, &ol, NULL) == 0 && ol == 0, "held a second prefix");
    colibri_stop_flush(st, &o, &ol);
    CHECK(ol == 4 && !memcmp(o, "\n\nUs", 4), "flush gives back the held text");
    colibri_stop_free(st);

    /* byte by byte, and the earliest stop string wins */
    CHECK(colibri_stop_new(stops, 2, &st, &err) == 0, "%s", err.msg);
    const char *text = "one\n\nUser: two <|stop|>";
    char acc[64] = "";
    int stopped = 0;
    for (size_t i = 0; text[i] && !stopped; i++) {
        stopped = colibri_stop_feed(st, text + i, 1, &o, &ol, NULL);
        strncat(acc, o, ol);
    }
    CHECK(stopped && !strcmp(acc, "one"), "byte by byte: '%s'", acc);
    colibri_stop_free(st);

    CHECK(colibri_stop_new(NULL, 0, &st, &err) == 0, "no stop strings");
    CHECK(colibri_stop_feed(st, "abc", 3, &o, &ol, NULL) == 0 && ol == 3, "passes everything");
    colibri_stop_free(st);
}

int main(void)
{
    RUN_TEST(test_greedy);
    RUN_TEST(test_seed_reproducible);
    RUN_TEST(test_temperature);
    RUN_TEST(test_top_k);
    RUN_TEST(test_top_p_min_p);
    RUN_TEST(test_penalties);
    RUN_TEST(test_bad_opts);
    RUN_TEST(test_logit_bias);
    RUN_TEST(test_stop_strings);
    return CHECK_SUMMARY();
}
