/* colibri_dev.h - developer tools built on the colibri library: synthetic
 * models, the attention and compute-peak benchmarks and the oracle check
 * against Hugging Face fixtures. They exist to test and measure colibri, not to run a model, so
 * they are kept out of the embedding API (include/colibri.h); the colibri CLI
 * (synth, bench --attn, oracle) and the benchmark programs include this.
 *
 * The conventions of colibri.h hold here too: 0 or a negative COLIBRI_E*
 * code, the message in the caller's struct colibri_err, out-parameters
 * untouched on failure. Not thread-safe unless stated.
 */
#ifndef COLIBRI_DEV_H
#define COLIBRI_DEV_H

#include <stdint.h>
#include <stdio.h>

#include "colibri.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------- synthetic models */

/* Writes a model with random weights in the shapes of a preset ("v2-lite":
 * DeepSeek-V2-Lite's 27 layers, hidden 2048, 64 experts top-6, kv_lora 512,
 * with the V3 router; "v3": DeepSeek-V3's; "tiny": a small one for tests),
 * n_layers overriding the preset's layer count when > 0, with n_mtp (0 or
 * 1) MTP layers after them under HF's names (model.layers.{n_layers}.*: a
 * MoE block, enorm, hnorm, eh_proj, shared_head.norm; config
 * num_nextn_predict_layers; not for the DSA presets), in the formats of opts
 * (NULL: bf16), as a container like colibri_convert's. */
int colibri_synth(const char *dst_dir, const char *preset, int n_layers, int n_mtp, const struct colibri_model_opts *opts,
                  uint64_t seed, int show_progress, struct colibri_convert_report *rep, struct colibri_err *err);

/* --------------------------------------------------------- routing trace */

/* Forwards tokens[0..n) one at a time (n capped at the context) and records
 * each MoE layer's routed experts and the next-layer prediction's; writes
 * markdown tables to out: per layer the adjacent-token overlap of the routed
 * experts, the reuse-distance distribution (in tokens) and the prediction's
 * recall; per budget (experts in a cache shared by all layers; NULL/0: 10%,
 * 25%, 50%, 75% of all) the hit rate of LRU, LFU, Belady's optimum, the
 * streamed store's policy (LRU with a learned hot set) and that policy with
 * next-layer prefetch (dev/expert_trace.h defines each). The model's
 * output and store are unchanged; no other forward may run meanwhile. */
int colibri_trace_routing(colibri_model *m, const int32_t *tokens, int n, const int *budgets, int n_budgets,
                          FILE *out, struct colibri_err *err);

/* ------------------------------------------------------------ benchmarks */

/* The forward a speculative decode verifies its drafts with: tokens[0..n)
 * after the session's cached tokens in one absorbed forward (each row the
 * bits colibri_session_decode would give), logits (NULL, or n x vocab
 * floats) for every row; the session then holds all n. For benchmarks of
 * the verify step against single decodes (colibri bench --verify). */
int colibri_session_verify(colibri_session *s, const int32_t *tokens, int n, float *logits, struct colibri_err *err);

/* Decode attention alone, per KV tier against f32 in the same run: one
 * absorbed-MLA attention call (one token, one layer) over T cached rows of
 * r latent + dr RoPE values, H heads. Writes a markdown table (time per token
 * per layer, ratio to f32, bytes per row, the machine) to `table`, progress
 * to `progress` (may be NULL). Zeroed fields take the defaults: DeepSeek-V3
 * dims (512 + 64), contexts 1k/8k/32k, 16 and 128 heads, every tier, 0.4 s
 * per cell. */
struct colibri_attn_bench_opts {
    int threads;
    int r, dr;
    int ctx[8], n_ctx;
    int heads[4], n_heads;
    const char *tiers;
    double min_time;
    int with_int8;              /* also time the opt-in integer consumers */
    int cpu_time;               /* process CPU time instead of wall clock */
    /* > 0: dense against DeepSeek Sparse Attention with this top-k instead
     * (heads[0] heads; the indexer at DeepSeek-V3.2 dims: 64 heads x 128,
     * projections from 1536 and 7168 values), every tier, f32 and fp8 index
     * keys; see dev/attn_bench_dsa.h */
    int dsa_topk;
};
int colibri_bench_attention(const struct colibri_attn_bench_opts *opts, FILE *table, FILE *progress,
                            struct colibri_err *err);

/* DeepSeek-V4's decode attention alone (dev/v4_attn_bench.h): per layer kind
 * (sliding, CSA, HCA), tier (opts->tiers; NULL: f32,bf16,fp8,int8r) and
 * context (opts->ctx; none: 4096 .. 1048576) at V4-Flash dims on synthetic
 * state, against the sliding layer's cost; index keys in index_tier (f32 or
 * fp8); rounds interleaved, medians and ranges; then KV bytes per token per
 * tier at V4-Flash and V4-Pro. Writes markdown to table. */
int colibri_bench_v4_attention(const struct colibri_attn_bench_opts *opts, const char *index_tier, int rounds,
                               FILE *table, FILE *progress, struct colibri_err *err);

/* Compute peaks of the instructions the weight kernels use (fp32 FMA, bf16
 * dot, int8 dot), in G op/s on 1 and on `threads` threads (0: all), each
 * thread timed by its own CPU time, about 0.2 s per probe; writes a markdown
 * table to `table`. Instructions this CPU
 * lacks are reported as not available. */
int colibri_bench_peak(int threads, FILE *table, struct colibri_err *err);

/* Read bandwidth in GB/s with every OpenMP thread, the bound of a decode
 * that reads its weights from memory: the fastest of the read probe's
 * variants (1-16 streams per thread, with and without software prefetch,
 * 4 KiB and huge pages; best of three passes each over 512 MiB). The
 * winning variant is named in how[how_n] and, with `table`, every variant
 * is written there as a markdown table (either may be NULL). 0 when the
 * buffers cannot be allocated. */
double colibri_bench_read_bandwidth(FILE *table, char *how, size_t how_n);

/* ---------------------------------------------------------- verification */

/* Checks one oracle fixture directory (config.json, model.safetensors,
 * reference.json, reference.safetensors as tools/make_oracle.py writes them)
 * against Hugging Face's outputs: teacher-forced argmax agreement at positions
 * whose reference top-2 margin exceeds the fixture's tolerance, the greedy
 * continuation, the largest |logit difference| of prefill against HF, and of
 * token-by-token absorbed decode against prefill. */
struct colibri_oracle_result {
    char name[128];
    int tf_agree, tf_total;     /* argmax agreement over confident positions */
    int gen_agree, gen_total;   /* greedy tokens reproduced (matching prefix) */
    double max_dlogit;          /* prefill vs HF, all sequences */
    double decode_dlogit;       /* absorbed decode vs expanded prefill */
    /* a fixture with the MTP layer's draft logits (mtp_logits.<i>): their
     * rows checked, and the largest |difference| of the whole-sequence
     * (expanded) and the row-by-row (absorbed) drafts against HF's */
    int mtp_rows;
    double mtp_dlogit;
    int pass;                   /* tf and gen complete, every delta <= 1e-4 */
    /* XXH64 chained over every logits row colibri computed, in order (prefill
     * rows, then decode rows, then the generation's): equal digests mean
     * bit-identical logits (to compare runs that must agree exactly). */
    uint64_t logits_digest;
};
/* mopts (may be NULL) loads the fixture with other weight formats; kv_tier and
 * kv_rope (may be NULL) run it on a quantized KV cache. */
/* The MTP layer's draft logits over a sequence as an oracle fixture stores
 * them: row t (0..S-2) drafts the token at t+2 from the main model's final
 * hidden state at t and token t+1; out[(S-1) * vocab]. All rows in one
 * expanded forward, or (row_by_row) one absorbed forward per row, on an f32
 * cache whatever the sessions use. EINVAL
 * when the model has no MTP layer. */
int colibri_mtp_draft_logits(colibri_model *cm, const int32_t *tok, int S, int row_by_row, float *out,
                             struct colibri_err *err);

int colibri_oracle_check(const char *fixture_dir, const struct colibri_model_opts *mopts,
                         const char *kv_tier, const char *kv_rope,
                         struct colibri_oracle_result *res, struct colibri_err *err);

#ifdef __cplusplus
}
#endif
#endif
