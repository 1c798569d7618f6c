/* serve/metrics.h - the server's counters, latency histograms and their
 * Prometheus text form.
 *
 * Counters and histogram buckets are atomics, bumped from any thread without
 * a lock. Gauges (queue depth, busy slots, cached KV tokens) are not stored
 * here: the caller samples them from the scheduler when rendering. Counter
 * names end in _total, gauge names never do, histograms have the
 * _bucket/_sum/_count series of the text format. */
#ifndef COLIBRI_SERVE_METRICS_H
#define COLIBRI_SERVE_METRICS_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "colibri.h"

enum metrics_endpoint {
    METRICS_EP_COMPLETIONS = 0,
    METRICS_EP_CHAT,
    METRICS_EP_MODELS,
    METRICS_EP_HEALTH,
    METRICS_EP_METRICS,
    METRICS_EP_TOKENIZE,
    METRICS_EP_DETOKENIZE,
    METRICS_EP_PROPS,
    METRICS_EP_SLOTS,
    METRICS_EP_PAGE,
    METRICS_EP_OTHER,
    METRICS_EP_COUNT
};

/* Response status classes counted separately: the codes this server sends. */
enum metrics_status {
    METRICS_ST_200 = 0, METRICS_ST_400, METRICS_ST_401, METRICS_ST_404, METRICS_ST_405,
    METRICS_ST_413, METRICS_ST_429, METRICS_ST_500, METRICS_ST_503, METRICS_ST_OTHER,
    METRICS_ST_COUNT
};

/* Latency histograms, in seconds. Each has its own bucket bounds (metrics.c). */
enum metrics_hist {
    METRICS_H_TTFT = 0,         /* request arrival to its first token */
    METRICS_H_TPOT,             /* between two consecutive tokens of one request */
    METRICS_H_E2E,              /* arrival to the last token, requests that ran to a stop or length limit */
    METRICS_H_QUEUE,            /* arrival to a slot taking the request */
    METRICS_H_COUNT
};

#define METRICS_HIST_BUCKETS 20

/* Observations per bucket (not cumulative: bucket[i] counts values in
 * (bound[i-1], bound[i]], bucket[METRICS_HIST_BUCKETS] those above the last
 * bound) and their sum in nanoseconds. */
struct metrics_hist_data {
    atomic_uint_fast64_t bucket[METRICS_HIST_BUCKETS + 1];
    atomic_uint_fast64_t sum_ns;
};

struct metrics {
    atomic_uint_fast64_t requests[METRICS_EP_COUNT];
    atomic_uint_fast64_t responses[METRICS_ST_COUNT];
    atomic_uint_fast64_t prompt_tokens, prompt_tokens_cached, generated_tokens;
    atomic_uint_fast64_t cancelled, finished;
    atomic_uint_fast64_t steps;                 /* scheduler iterations that did work */
    atomic_uint_fast64_t prefill_ns, decode_ns; /* wall time inside forward passes */
    atomic_uint_fast64_t decode_calls;          /* batched decode calls (one per step) */
    /* speculative decoding (--mtp on|auto): decode forwards of drafting
     * slots, those that verified drafts, and drafts made and kept per draft
     * position (0-based) */
    atomic_uint_fast64_t mtp_forwards, mtp_verify_forwards;
    atomic_uint_fast64_t mtp_drafted[COLIBRI_GEN_MAX_DRAFT], mtp_accepted[COLIBRI_GEN_MAX_DRAFT];
    struct metrics_hist_data hist[METRICS_H_COUNT];
};

/* Sampled gauges, filled by the caller. */
struct metrics_gauges {
    int queue_depth, slots_busy, slots_total;
    int64_t kv_tokens, kv_bytes;
    int experts_streamed;                       /* the expert counters below are rendered */
    int mtp_drafts;                             /* --draft N of a drafting server: the mtp counters are rendered */
    struct colibri_expert_stats experts;        /* since load */
};

void metrics_init(struct metrics *m);
void metrics_count_response(struct metrics *m, int http_status);
/* Adds one observation of `seconds` (negative counts as 0) to histogram h.
 * Thread-safe. */
void serve_metrics_observe(struct metrics *m, enum metrics_hist h, double seconds);

/* Renders everything as Prometheus text exposition format into a new
 * malloc'd NUL-terminated string (NULL when out of memory). */
char *metrics_render(const struct metrics *m, const struct metrics_gauges *g);

#endif
