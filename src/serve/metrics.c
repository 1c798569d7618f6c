/* serve/metrics.c - counters and Prometheus text; see metrics.h. */
#include "serve/metrics.h"

#include <stdio.h>

#include "serve/sbuf.h"

static const char *const EP_NAME[METRICS_EP_COUNT] = {
    [METRICS_EP_COMPLETIONS] = "completions", [METRICS_EP_CHAT] = "chat_completions",
    [METRICS_EP_MODELS] = "models", [METRICS_EP_HEALTH] = "health",
    [METRICS_EP_METRICS] = "metrics", [METRICS_EP_OTHER] = "other",
};

static const struct { int code; const char *name; } ST[METRICS_ST_COUNT] = {
    [METRICS_ST_200] = { 200, "200" }, [METRICS_ST_400] = { 400, "400" },
    [METRICS_ST_401] = { 401, "401" }, [METRICS_ST_404] = { 404, "404" },
    [METRICS_ST_405] = { 405, "405" }, [METRICS_ST_413] = { 413, "413" },
    [METRICS_ST_429] = { 429, "429" }, [METRICS_ST_500] = { 500, "500" },
    [METRICS_ST_503] = { 503, "503" }, [METRICS_ST_OTHER] = { 0, "other" },
};

void metrics_init(struct metrics *m)
{
    for (int i = 0; i < METRICS_EP_COUNT; i++) atomic_init(&m->requests[i], 0);
    for (int i = 0; i < METRICS_ST_COUNT; i++) atomic_init(&m->responses[i], 0);
    atomic_init(&m->prompt_tokens, 0);
    atomic_init(&m->prompt_tokens_cached, 0);
    atomic_init(&m->generated_tokens, 0);
    atomic_init(&m->cancelled, 0);
    atomic_init(&m->finished, 0);
    atomic_init(&m->steps, 0);
    atomic_init(&m->prefill_ns, 0);
    atomic_init(&m->decode_ns, 0);
    atomic_init(&m->decode_calls, 0);
}

void metrics_count_response(struct metrics *m, int http_status)
{
    int k = METRICS_ST_OTHER;
    for (int i = 0; i < METRICS_ST_OTHER; i++)
        if (ST[i].code == http_status) k = i;
    atomic_fetch_add(&m->responses[k], 1);
}

static void counter(struct sbuf *b, const char *name, const char *help, uint64_t v)
{
    sb_printf(b, "# HELP %s %s\n# TYPE %s counter\n%s %llu\n", name, help, name, name, (unsigned long long)v);
}

static void gauge(struct sbuf *b, const char *name, const char *help, long long v)
{
    sb_printf(b, "# HELP %s %s\n# TYPE %s gauge\n%s %lld\n", name, help, name, name, v);
}

char *metrics_render(const struct metrics *m, const struct metrics_gauges *g)
{
    struct sbuf b = { 0 };
    sb_printf(&b, "# HELP colibri_requests_total HTTP requests received, by endpoint.\n"
                  "# TYPE colibri_requests_total counter\n");
    for (int i = 0; i < METRICS_EP_COUNT; i++)
        sb_printf(&b, "colibri_requests_total{endpoint=\"%s\"} %llu\n", EP_NAME[i],
                  (unsigned long long)atomic_load(&m->requests[i]));
    sb_printf(&b, "# HELP colibri_responses_total HTTP responses sent, by status code.\n"
                  "# TYPE colibri_responses_total counter\n");
    for (int i = 0; i < METRICS_ST_COUNT; i++)
        sb_printf(&b, "colibri_responses_total{code=\"%s\"} %llu\n", ST[i].name,
                  (unsigned long long)atomic_load(&m->responses[i]));
    counter(&b, "colibri_prompt_tokens_total", "Prompt tokens of admitted requests.",
            atomic_load(&m->prompt_tokens));
    counter(&b, "colibri_prompt_tokens_cached_total", "Prompt tokens reused from a slot's cache (not recomputed).",
            atomic_load(&m->prompt_tokens_cached));
    counter(&b, "colibri_generated_tokens_total", "Tokens generated.", atomic_load(&m->generated_tokens));
    counter(&b, "colibri_requests_finished_total", "Generations that ran to a stop or length limit.",
            atomic_load(&m->finished));
    counter(&b, "colibri_requests_cancelled_total", "Generations cancelled (client gone or shutdown).",
            atomic_load(&m->cancelled));
    counter(&b, "colibri_scheduler_steps_total", "Scheduler iterations that advanced at least one slot.",
            atomic_load(&m->steps));
    counter(&b, "colibri_decode_calls_total", "Batched decode calls (one per step with generating slots).",
            atomic_load(&m->decode_calls));
    sb_printf(&b, "# HELP colibri_forward_seconds_total Wall time inside forward passes, by phase.\n"
                  "# TYPE colibri_forward_seconds_total counter\n"
                  "colibri_forward_seconds_total{phase=\"prefill\"} %.6f\n"
                  "colibri_forward_seconds_total{phase=\"decode\"} %.6f\n",
              atomic_load(&m->prefill_ns) * 1e-9, atomic_load(&m->decode_ns) * 1e-9);
    gauge(&b, "colibri_queue_depth", "Requests waiting for a slot.", g->queue_depth);
    gauge(&b, "colibri_slots_busy", "Slots running a request.", g->slots_busy);
    gauge(&b, "colibri_slots_total", "Slots (sessions).", g->slots_total);
    gauge(&b, "colibri_kv_tokens", "Tokens held in the slots' KV caches.", (long long)g->kv_tokens);
    gauge(&b, "colibri_kv_bytes", "Bytes of KV cache in use (tokens x bytes per token).", (long long)g->kv_bytes);
    return b.failed ? NULL : b.s;
}
