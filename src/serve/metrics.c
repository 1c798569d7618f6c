/* serve/metrics.c - counters and Prometheus text; see metrics.h. */
#include "serve/metrics.h"

#include <stdio.h>

#include "base/strbuf.h"

static const char *const EP_NAME[METRICS_EP_COUNT] = {
    [METRICS_EP_COMPLETIONS] = "completions", [METRICS_EP_CHAT] = "chat_completions",
    [METRICS_EP_MODELS] = "models", [METRICS_EP_HEALTH] = "health",
    [METRICS_EP_METRICS] = "metrics", [METRICS_EP_TOKENIZE] = "tokenize",
    [METRICS_EP_DETOKENIZE] = "detokenize", [METRICS_EP_PROPS] = "props", [METRICS_EP_SLOTS] = "slots",
    [METRICS_EP_PAGE] = "page", [METRICS_EP_OTHER] = "other",
};

/* Bucket upper bounds in seconds, METRICS_HIST_BUCKETS each, increasing:
 * from a millisecond (a token of a tiny model) to minutes (a long prompt on a
 * large model read from disk). */
static const struct {
    const char *name, *help;
    double bound[METRICS_HIST_BUCKETS];
} HIST[METRICS_H_COUNT] = {
    [METRICS_H_TTFT] = { "colibri_time_to_first_token_seconds",
                         "Time from a request's arrival to its first generated token.",
                         { 0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10,
                           20, 40, 80, 160 } },
    [METRICS_H_TPOT] = { "colibri_time_per_output_token_seconds",
                         "Time between two consecutive generated tokens of one request.",
                         { 0.001, 0.0025, 0.005, 0.0075, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5,
                           0.75, 1, 2.5, 5, 7.5, 20 } },
    [METRICS_H_E2E] = { "colibri_e2e_request_latency_seconds",
                        "Time from a request's arrival to its last token (requests that ran to a stop or length "
                        "limit).",
                        { 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 15, 20, 30, 40, 50, 60, 120, 240, 480,
                          960 } },
    [METRICS_H_QUEUE] = { "colibri_request_queue_time_seconds",
                          "Time from a request's arrival until a slot takes it.",
                          { 0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120, 240,
                            480, 960, 1920 } },
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
    atomic_init(&m->mtp_forwards, 0);
    atomic_init(&m->mtp_verify_forwards, 0);
    for (int i = 0; i < COLIBRI_GEN_MAX_DRAFT; i++) {
        atomic_init(&m->mtp_drafted[i], 0);
        atomic_init(&m->mtp_accepted[i], 0);
    }
    for (int h = 0; h < METRICS_H_COUNT; h++) {
        for (int i = 0; i <= METRICS_HIST_BUCKETS; i++) atomic_init(&m->hist[h].bucket[i], 0);
        atomic_init(&m->hist[h].sum_ns, 0);
    }
}

void serve_metrics_observe(struct metrics *m, enum metrics_hist h, double seconds)
{
    if (!(seconds > 0)) seconds = 0;    /* NaN too */
    if (seconds > 1e9) seconds = 1e9;   /* keeps the sum's nanoseconds in range */
    int i = 0;
    while (i < METRICS_HIST_BUCKETS && seconds > HIST[h].bound[i]) i++;
    atomic_fetch_add(&m->hist[h].bucket[i], 1);
    atomic_fetch_add(&m->hist[h].sum_ns, (uint64_t)(seconds * 1e9 + 0.5));
}

/* Cumulative buckets; the count is their total, so +Inf and _count agree
 * even while other threads observe. */
static void histogram(struct strbuf *b, const struct metrics_hist_data *d, int h)
{
    const char *name = HIST[h].name;
    base_sb_appendf(b, "# HELP %s %s\n# TYPE %s histogram\n", name, HIST[h].help, name);
    uint64_t cum = 0;
    for (int i = 0; i <= METRICS_HIST_BUCKETS; i++) {
        cum += atomic_load(&d->bucket[i]);
        if (i < METRICS_HIST_BUCKETS) base_sb_appendf(b, "%s_bucket{le=\"%g\"} %llu\n", name, HIST[h].bound[i],
                                                (unsigned long long)cum);
        else base_sb_appendf(b, "%s_bucket{le=\"+Inf\"} %llu\n", name, (unsigned long long)cum);
    }
    base_sb_appendf(b, "%s_sum %.9f\n%s_count %llu\n", name, atomic_load(&d->sum_ns) * 1e-9, name,
              (unsigned long long)cum);
}

void metrics_count_response(struct metrics *m, int http_status)
{
    int k = METRICS_ST_OTHER;
    for (int i = 0; i < METRICS_ST_OTHER; i++)
        if (ST[i].code == http_status) k = i;
    atomic_fetch_add(&m->responses[k], 1);
}

static void counter(struct strbuf *b, const char *name, const char *help, uint64_t v)
{
    base_sb_appendf(b, "# HELP %s %s\n# TYPE %s counter\n%s %llu\n", name, help, name, name, (unsigned long long)v);
}

static void gauge(struct strbuf *b, const char *name, const char *help, long long v)
{
    base_sb_appendf(b, "# HELP %s %s\n# TYPE %s gauge\n%s %lld\n", name, help, name, name, v);
}

char *metrics_render(const struct metrics *m, const struct metrics_gauges *g)
{
    struct strbuf b = { 0 };
    base_sb_appendf(&b, "# HELP colibri_requests_total HTTP requests received, by endpoint.\n"
                  "# TYPE colibri_requests_total counter\n");
    for (int i = 0; i < METRICS_EP_COUNT; i++)
        base_sb_appendf(&b, "colibri_requests_total{endpoint=\"%s\"} %llu\n", EP_NAME[i],
                  (unsigned long long)atomic_load(&m->requests[i]));
    base_sb_appendf(&b, "# HELP colibri_responses_total HTTP responses sent, by status code.\n"
                  "# TYPE colibri_responses_total counter\n");
    for (int i = 0; i < METRICS_ST_COUNT; i++)
        base_sb_appendf(&b, "colibri_responses_total{code=\"%s\"} %llu\n", ST[i].name,
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
    base_sb_appendf(&b, "# HELP colibri_forward_seconds_total Wall time inside forward passes, by phase.\n"
                  "# TYPE colibri_forward_seconds_total counter\n"
                  "colibri_forward_seconds_total{phase=\"prefill\"} %.6f\n"
                  "colibri_forward_seconds_total{phase=\"decode\"} %.6f\n",
              atomic_load(&m->prefill_ns) * 1e-9, atomic_load(&m->decode_ns) * 1e-9);
    gauge(&b, "colibri_queue_depth", "Requests waiting for a slot.", g->queue_depth);
    gauge(&b, "colibri_slots_busy", "Slots running a request.", g->slots_busy);
    gauge(&b, "colibri_slots", "Slots (sessions).", g->slots_total);
    gauge(&b, "colibri_kv_tokens", "Tokens held in the slots' KV caches.", (long long)g->kv_tokens);
    gauge(&b, "colibri_kv_bytes", "Bytes of KV cache in use (tokens x bytes per token).", (long long)g->kv_bytes);
    if (g->experts_streamed) {
        const struct colibri_expert_stats *e = &g->experts;
        counter(&b, "colibri_expert_acquires_total", "Routed-expert acquisitions by MoE layers.", e->acquires);
        counter(&b, "colibri_expert_misses_total", "Acquisitions that had to start a read (cache misses).", e->misses);
        counter(&b, "colibri_expert_waits_total", "Acquisitions that waited for a read already in flight.", e->waits);
        counter(&b, "colibri_expert_reads_total", "Experts read from disk (misses and prefetches).", e->reads);
        counter(&b, "colibri_expert_read_bytes_total", "Bytes read from disk by the expert store.", e->bytes_read);
        counter(&b, "colibri_expert_prefetch_reads_total", "Experts read because a prefetch or prediction named them.",
                e->prefetch_reads);
        counter(&b, "colibri_expert_prefetch_used_total", "Prefetched experts acquired before being evicted.",
                e->prefetch_used);
        counter(&b, "colibri_expert_predicted_total", "Routed experts of layers that had a next-layer prediction.",
                e->predicted);
        counter(&b, "colibri_expert_predicted_hits_total", "Of those, experts the prediction named (recall numerator).",
                e->predicted_hits);
        base_sb_appendf(&b, "# HELP colibri_expert_io_wait_seconds_total Time acquisitions spent waiting for reads.\n"
                      "# TYPE colibri_expert_io_wait_seconds_total counter\n"
                      "colibri_expert_io_wait_seconds_total %.6f\n", e->io_wait_ns * 1e-9);
    }
    if (g->mtp_drafts) {
        uint64_t vf = atomic_load(&m->mtp_verify_forwards), kept = 0;
        counter(&b, "colibri_mtp_forwards_total", "Decode forwards of drafting slots (one per slot per batched decode).",
                atomic_load(&m->mtp_forwards));
        counter(&b, "colibri_mtp_verify_forwards_total", "Of those, forwards that verified drafts; tokens per verify "
                "forward = (this + sum of colibri_mtp_accepted_total) / this.", vf);
        const char *const name[2] = { "colibri_mtp_drafted_total", "colibri_mtp_accepted_total" };
        const char *const help[2] = { "Drafts made by the MTP layer, by draft position (1 = the token after the "
                                      "pending one).", "Drafts kept (equal to the token drawn), by draft position; "
                                      "acceptance at a position = this / colibri_mtp_drafted_total." };
        for (int c = 0; c < 2; c++) {
            base_sb_appendf(&b, "# HELP %s %s\n# TYPE %s counter\n", name[c], help[c], name[c]);
            for (int i = 0; i < g->mtp_drafts && i < COLIBRI_GEN_MAX_DRAFT; i++) {
                uint64_t v = atomic_load(c ? &m->mtp_accepted[i] : &m->mtp_drafted[i]);
                if (c) kept += v;
                base_sb_appendf(&b, "%s{position=\"%d\"} %llu\n", name[c], i + 1, (unsigned long long)v);
            }
        }
        base_sb_appendf(&b, "# HELP colibri_mtp_tokens_per_verify Tokens per verify forward since start (0 before the "
                      "first).\n# TYPE colibri_mtp_tokens_per_verify gauge\ncolibri_mtp_tokens_per_verify %.4f\n",
                  vf ? (double)(vf + kept) / (double)vf : 0.0);
    }
    for (int h = 0; h < METRICS_H_COUNT; h++) histogram(&b, &m->hist[h], h);
    return b.failed ? NULL : b.s;
}
