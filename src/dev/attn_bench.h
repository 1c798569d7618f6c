/* dev/attn_bench.h - the decode-attention benchmark: one kv_attend() call (one
 * token through one layer's absorbed MLA) per KV tier, against f32 in the
 * same run, tiers taking turns call by call so load changes on a shared
 * machine hit every tier of a cell alike; each keeps its best time. Tiers with
 * an integer form (fp8, int8r, q4_0, tq*) are also timed with the opt-in
 * integer consumer (two-part and plain int8 query). Rows are i.i.d. Gaussian:
 * the time does not depend on the values. */
#ifndef COLIBRI_KV_ATTN_BENCH_H
#define COLIBRI_KV_ATTN_BENCH_H

#include <stdio.h>

#include "colibri.h"

#define KV_ATTN_BENCH_MAX_CTX 8
#define KV_ATTN_BENCH_MAX_HEADS 4

struct kv_attn_bench_opts {
    int threads;                /* <= 0: OpenMP's default */
    int r, dr;                  /* latent and RoPE widths (DeepSeek-V3: 512, 64) */
    int ctx[KV_ATTN_BENCH_MAX_CTX], n_ctx;
    int heads[KV_ATTN_BENCH_MAX_HEADS], n_heads;
    const char *tiers;          /* comma-separated (NULL: every tier); f32 is added first when absent */
    double min_time;            /* seconds per tier per cell at least */
    int with_int8;              /* also time the integer consumers */
    int cpu_time;               /* process CPU time instead of the wall clock */
};

/* Writes a markdown table (with the machine) to `table`; progress lines to
 * `progress` (may be NULL). 0, or COLIBRI_EINVAL naming a bad option. */
int kv_attn_bench(const struct kv_attn_bench_opts *o, FILE *table, FILE *progress, struct colibri_err *err);

/* What the attention benchmarks share (this file and attn_bench_dsa.c). */
/* Process CPU seconds: with one thread this leaves out the time the thread
 * spends preempted, which on a shared machine dominates wall-clock minima. */
double kv_attn_bench_cpu_sec(void);
/* A standard normal draw from a xorshift state. */
float kv_attn_bench_gauss(uint64_t *rng);
/* The CPU's model name from /proc/cpuinfo, or "unknown CPU". */
void kv_attn_bench_cpu_model(char *buf, size_t n);

#endif
