/* serve/metrics.h - the server's counters and their Prometheus text form.
 *
 * Counters are atomics, bumped from any thread without a lock. Gauges (queue
 * depth, busy slots, cached KV tokens) are not stored here: the caller samples
 * them from the scheduler when rendering. */
#ifndef COLIBRI_SERVE_METRICS_H
#define COLIBRI_SERVE_METRICS_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

enum metrics_endpoint {
    METRICS_EP_COMPLETIONS = 0,
    METRICS_EP_CHAT,
    METRICS_EP_MODELS,
    METRICS_EP_HEALTH,
    METRICS_EP_METRICS,
    METRICS_EP_OTHER,
    METRICS_EP_COUNT
};

/* Response status classes counted separately: the codes this server sends. */
enum metrics_status {
    METRICS_ST_200 = 0, METRICS_ST_400, METRICS_ST_401, METRICS_ST_404, METRICS_ST_405,
    METRICS_ST_413, METRICS_ST_429, METRICS_ST_500, METRICS_ST_503, METRICS_ST_OTHER,
    METRICS_ST_COUNT
};

struct metrics {
    atomic_uint_fast64_t requests[METRICS_EP_COUNT];
    atomic_uint_fast64_t responses[METRICS_ST_COUNT];
    atomic_uint_fast64_t prompt_tokens, prompt_tokens_cached, generated_tokens;
    atomic_uint_fast64_t cancelled, finished;
    atomic_uint_fast64_t steps;                 /* scheduler iterations that did work */
    atomic_uint_fast64_t prefill_ns, decode_ns; /* wall time inside forward passes */
    atomic_uint_fast64_t decode_calls;          /* batched decode calls (one per step) */
};

/* Sampled gauges, filled by the caller. */
struct metrics_gauges {
    int queue_depth, slots_busy, slots_total;
    int64_t kv_tokens, kv_bytes;
};

void metrics_init(struct metrics *m);
void metrics_count_response(struct metrics *m, int http_status);

/* Renders everything as Prometheus text exposition format into a new
 * malloc'd NUL-terminated string (NULL when out of memory). */
char *metrics_render(const struct metrics *m, const struct metrics_gauges *g);

#endif
