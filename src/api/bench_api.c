/* api/bench_api.c - the benchmarks section of include/colibri_dev.h. */
#include <string.h>

#include "colibri.h"
#include "colibri_dev.h"
#include "dev/attn_bench.h"
#include "dev/attn_bench_dsa.h"
#include "dev/v4_attn_bench.h"

int colibri_bench_attention(const struct colibri_attn_bench_opts *opts, FILE *table, FILE *progress,
                            struct colibri_err *err)
{
    struct kv_attn_bench_opts o = { .threads = opts->threads, .r = opts->r ? opts->r : 512,
                                    .dr = opts->dr ? opts->dr : 64, .n_ctx = opts->n_ctx, .n_heads = opts->n_heads,
                                    .tiers = opts->tiers,
                                    .min_time = opts->min_time > 0 ? opts->min_time : 0.4,
                                    .with_int8 = opts->with_int8, .cpu_time = opts->cpu_time };
    static const int CTX[] = { 1024, 8192, 32768 }, HEADS[] = { 16, 128 };
    if (!o.n_ctx) {
        memcpy(o.ctx, CTX, sizeof CTX);
        o.n_ctx = 3;
    } else {
        memcpy(o.ctx, opts->ctx, sizeof(int) * (size_t)(o.n_ctx < KV_ATTN_BENCH_MAX_CTX ? o.n_ctx : KV_ATTN_BENCH_MAX_CTX));
    }
    if (!o.n_heads) {
        memcpy(o.heads, HEADS, sizeof HEADS);
        o.n_heads = 2;
    } else {
        memcpy(o.heads, opts->heads,
               sizeof(int) * (size_t)(o.n_heads < KV_ATTN_BENCH_MAX_HEADS ? o.n_heads : KV_ATTN_BENCH_MAX_HEADS));
    }
    if (opts->dsa_topk > 0) {
        const struct kv_attn_bench_dsa_opts d = { .topk = opts->dsa_topk, .n_heads = 64, .head_dim = 128,
                                                  .q_lora = 1536, .hidden = 7168 };
        return kv_attn_bench_dsa(&o, &d, table, progress, err);
    }
    return kv_attn_bench(&o, table, progress, err);
}

int colibri_bench_v4_attention(const struct colibri_attn_bench_opts *opts, const char *index_tier, int rounds,
                               FILE *table, FILE *progress, struct colibri_err *err)
{
    struct v4_attn_bench_opts o = { .threads = opts->threads, .tiers = opts->tiers, .index_tier = index_tier,
                                    .rounds = rounds, .min_time = opts->min_time };
    static const int CTX[] = { 4096, 32768, 131072, 1048576 };
    o.n_ctx = opts->n_ctx > 0 ? (opts->n_ctx < V4_ATTN_BENCH_MAX_CTX ? opts->n_ctx : V4_ATTN_BENCH_MAX_CTX) : 4;
    memcpy(o.ctx, opts->n_ctx > 0 ? opts->ctx : CTX, sizeof(int) * (size_t)o.n_ctx);
    return model_v4_attn_bench(&o, table, progress, err);
}
