/* test_serve_ops: the server's operator-facing pure parts without HTTP: the
 * --cors origin list, the latency histograms' Prometheus text, the request
 * log line (fields, escaping) and the /tokenize, /detokenize and /slots
 * bodies with the small test tokenizer. */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "serve/cors.h"
#include "serve/info.h"
#include "serve/metrics.h"
#include "serve/reqlog.h"

static void test_cors(void)
{
    struct serve_cors c;
    struct colibri_err err = { 0 };
    CHECK(serve_cors_parse(NULL, &c, &err) == 0 && !c.enabled, "off by default");
    CHECK(serve_cors_allow(&c, "http://a.test") == NULL, "off: nothing allowed");
    CHECK(serve_cors_parse("http://a.test, https://b.test:8443/", &c, &err) == 0 && c.n == 2, "%s", err.msg);
    const char *a = serve_cors_allow(&c, "https://b.test:8443");
    CHECK(a && !strcmp(a, "https://b.test:8443"), "listed origin (trailing slash dropped)");
    CHECK(serve_cors_allow(&c, "http://b.test:8443") == NULL, "scheme differs");
    CHECK(serve_cors_allow(&c, NULL) == NULL, "no Origin header");
    CHECK(serve_cors_parse("*", &c, &err) == 0 && !strcmp(serve_cors_allow(&c, "http://x"), "*"), "any");
    const char *bad[] = { "ftp://a.test", "http://a.test/path", "a.test", ",", "http://", "http://a.test,*x" };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        memset(&err, 0, sizeof err);
        CHECK(serve_cors_parse(bad[i], &c, &err) == COLIBRI_EINVAL && strstr(err.msg, "--cors"), "'%s' accepted",
              bad[i]);
    }
}

static void test_histograms(void)
{
    struct metrics m;
    metrics_init(&m);
    serve_metrics_observe(&m, METRICS_H_TTFT, 0.003);     /* in (0.001, 0.005] */
    serve_metrics_observe(&m, METRICS_H_TTFT, 0.005);     /* bounds are inclusive */
    serve_metrics_observe(&m, METRICS_H_TTFT, 1000);      /* above every bound */
    serve_metrics_observe(&m, METRICS_H_TTFT, -1);        /* clock step: counts as 0 */
    struct metrics_gauges g = { .slots_total = 2 };
    char *s = metrics_render(&m, &g);
    CHECK(s != NULL, "render");
    if (!s) return;
    const char *name = "colibri_time_to_first_token_seconds";
    char want[256];
    snprintf(want, sizeof want, "# TYPE %s histogram\n%s_bucket{le=\"0.001\"} 1\n%s_bucket{le=\"0.005\"} 3\n", name,
             name, name);
    CHECK(strstr(s, want) != NULL, "first buckets:\n%s", want);
    snprintf(want, sizeof want, "%s_bucket{le=\"160\"} 3\n%s_bucket{le=\"+Inf\"} 4\n%s_sum 1000.008000000\n"
             "%s_count 4\n", name, name, name, name);
    CHECK(strstr(s, want) != NULL, "last bucket, sum and count:\n%s", want);
    CHECK(strstr(s, "colibri_e2e_request_latency_seconds_count 0\n") != NULL, "empty histogram");
    CHECK(strstr(s, "# TYPE colibri_slots gauge\ncolibri_slots 2\n") != NULL, "gauge without _total");
    CHECK(strstr(s, "colibri_slots_total") == NULL, "old gauge name");
    free(s);
}

static colibri_tokenizer *tok;

static void test_reqlog(void)
{
    struct serve_reqlog r = { .method = "GET", .path = "/x\n[serve] forged \\", .status = 404, .t_arrival = 1.0,
                              .t_done = 1.0025 };
    char *s = serve_reqlog_format(&r);
    CHECK(s && !strcmp(s, "GET /x\\x0a[serve]\\x20forged\\x20\\x5c 404 total_ms=2.5"), "escaped: %s", s);
    free(s);
    struct job *j = job_new(JOB_COMPLETION);
    int32_t prompt[] = { 1, 2, 3 };
    j->prompt = malloc(sizeof prompt);
    memcpy(j->prompt, prompt, sizeof prompt);
    j->n_prompt = 3;
    j->t_submit = 10.0;
    j->t_first = 10.25;
    struct job_event ev = { .id = 7, .text = strdup("hi \"x\""), .len = 6 };
    job_push(j, &ev);
    job_finish(j, JOB_FIN_LENGTH, 2, 1);
    r = (struct serve_reqlog){ .method = "POST", .path = "/v1/completions", .status = 200, .job = j,
                               .t_arrival = 9.5, .t_done = 11.0, .tok = tok };
    s = serve_reqlog_format(&r);
    CHECK(s && !strcmp(s, "POST /v1/completions 200 in=3 cached=2 out=1 finish=length ttft_ms=250.0 "
                          "total_ms=1500.0"), "generation: %s", s);
    free(s);
    r.log_texts = 1;
    s = serve_reqlog_format(&r);
    CHECK(s && strstr(s, " prompt=\"") && strstr(s, " reply=\"hi \\\"x\\\"\""), "texts: %s", s);
    free(s);
    job_release(j);
}

static const struct oai_model *model(void)
{
    static struct oai_model m;
    m = (struct oai_model){ .id = "tiny", .tok = tok, .n_vocab = 3003, .n_ctx = 64, .n_ctx_model = 128 };
    return &m;
}

/* The body must be refused with status 400 naming param. */
static void refused(int detok, const char *body, const char *param, const char *words)
{
    struct oai_error e = { 0 };
    char *out = NULL;
    int rc = detok ? serve_info_detokenize(model(), body, strlen(body), &out, &e)
                   : serve_info_tokenize(model(), body, strlen(body), &out, &e);
    CHECK(rc == -1 && !out && e.status == 400 && !strcmp(e.param, param) && (!words || strstr(e.msg, words)),
          "%s: rc %d status %d param '%s' (%s)", body, rc, e.status, e.param, e.msg);
    free(out);
}

static void test_tokenize(void)
{
    const char *text = "hello world";
    char body[256], *out = NULL;
    struct oai_error e = { 0 };
    snprintf(body, sizeof body, "{\"content\": \"%s\"}", text);
    CHECK(serve_info_tokenize(model(), body, strlen(body), &out, &e) == 0, "%s", e.msg);
    int32_t *ids = NULL;
    size_t n = 0;
    colibri_tokenizer_encode(tok, text, strlen(text), 0, &ids, &n, NULL, NULL);
    cJSON *o = cJSON_Parse(out ? out : "");
    const cJSON *t = cJSON_GetObjectItem(o, "tokens");
    CHECK(t && cJSON_GetArraySize(t) == (int)n, "count");
    for (size_t i = 0; t && i < n && i < (size_t)cJSON_GetArraySize(t); i++)
        CHECK(cJSON_GetArrayItem(t, (int)i)->valueint == ids[i], "id %zu", i);
    char *detok = cJSON_PrintUnformatted(t), dbody[1024];
    snprintf(dbody, sizeof dbody, "{\"tokens\": %s}", detok ? detok : "[]");
    free(out);
    out = NULL;
    CHECK(serve_info_detokenize(model(), dbody, strlen(dbody), &out, &e) == 0, "%s", e.msg);
    CHECK(out && !strcmp(out, "{\"content\":\"hello world\"}"), "round trip: %s", out);
    free(out);
    free(detok);
    free(ids);
    cJSON_Delete(o);
    refused(0, "{bad", "", "not valid JSON");
    refused(0, "{}", "content", "missing");
    refused(0, "{\"content\": [1]}", "content", "string");
    refused(0, "{\"content\": \"a\", \"add_special\": 1}", "add_special", "boolean");
    refused(0, "{\"content\": \"a\\u0000b\"}", "", "NUL");
    refused(1, "{\"tokens\": [0, 99999]}", "tokens", "'tokens[1]'");
    refused(1, "{\"tokens\": [0.5]}", "tokens", "'tokens[0]'");
    refused(1, "{\"tokens\": {}}", "tokens", "array");
    refused(1, "{\"tokens\": [1] } x", "", "after its JSON value");
}

static void test_slots_json(void)
{
    struct sched_slot_state st[2] = { { .id = 0, .n_ctx = 64, .cached_tokens = 5 },
                                      { .id = 1, .processing = 1, .n_ctx = 64, .cached_tokens = 9, .n_prompt = 4,
                                        .n_generated = 3 } };
    char *s = serve_info_slots_json(st, 2);
    CHECK(s && !strcmp(s, "[{\"id\":0,\"state\":\"idle\",\"is_processing\":false,\"n_ctx\":64,\"cached_tokens\":5},"
                          "{\"id\":1,\"state\":\"processing\",\"is_processing\":true,\"n_ctx\":64,"
                          "\"cached_tokens\":9,\"n_prompt_tokens\":4,\"n_decoded\":3}]"), "%s", s);
    free(s);
    s = serve_info_model_json(model());
    CHECK(s && strstr(s, "\"context_length\":128") && strstr(s, "\"max_model_len\":64"), "%s", s);
    free(s);
}

int main(void)
{
    RUN_TEST(test_cors);
    RUN_TEST(test_histograms);
    RUN_TEST(test_slots_json);
    struct colibri_err err = { 0 };
    if (colibri_tokenizer_load("tests/tok/small", &tok, &err)) {
        CHECK(0, "tests/tok/small: %s", err.msg);
    } else {
        RUN_TEST(test_reqlog);
        RUN_TEST(test_tokenize);
        colibri_tokenizer_free(tok);
    }
    return CHECK_SUMMARY();
}
