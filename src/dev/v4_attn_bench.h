/* dev/v4_attn_bench.h - DeepSeek-V4's decode attention alone, per layer
 * kind (sliding window only, CSA, HCA), KV tier and context, on synthetic
 * state at V4-Flash dims (64 heads sharing one 512-value KV head, RoPE 64,
 * window 128, CSA ratio 4 with the indexer's 64 x 128 keys and top-512,
 * HCA ratio 128), without a prefill: the window ring and the compressed
 * entries and index keys a context of that length holds are filled with
 * Gaussian rows in the tier, then one token's attention (index scores, top-k,
 * decoding of the attended rows, the attention over them) is timed through
 * the functions model/mixer_v4.c calls. The projections and compressors,
 * whose cost does not grow with the context, are left out. Cells take
 * turns round by round (a shared machine's load hits every cell alike);
 * each reports the median and range of its rounds. Also writes the KV bytes
 * per token of every tier at V4-Flash and V4-Pro layer counts. CSA entries
 * beyond 65536 rows are stored once and the selection wraps onto them
 * (the rows read per token are the same number, 512). */
#ifndef COLIBRI_DEV_V4_ATTN_BENCH_H
#define COLIBRI_DEV_V4_ATTN_BENCH_H

#include <stdio.h>

#include "colibri.h"

#define V4_ATTN_BENCH_MAX_CTX 8

struct v4_attn_bench_opts {
    int threads;                /* <= 0: OpenMP's default */
    int ctx[V4_ATTN_BENCH_MAX_CTX], n_ctx;
    const char *tiers;          /* comma-separated (NULL: f32,bf16,fp8,int8r) */
    const char *index_tier;     /* f32 or fp8 (NULL: f32) */
    int rounds;                 /* rounds per cell (>= 1) */
    double min_time;            /* seconds per cell per round at least */
};

int model_v4_attn_bench(const struct v4_attn_bench_opts *o, FILE *table, FILE *progress, struct colibri_err *err);

#endif
