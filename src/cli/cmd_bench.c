/* colibri bench: prefill and decode speed of a model on random tokens. */
#include <stdio.h>
#include <sys/resource.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/commands.h"
#include "cli/generate.h"
#include "cli/mpi_cli.h"
#include "cli/opts.h"
#include "colibri.h"
#include "colibri_dev.h"

/* Seconds of wall time, or of the process's CPU time when cpu is set. */
static double now(int cpu)
{
    struct timespec ts;
    clock_gettime(cpu ? CLOCK_PROCESS_CPUTIME_ID : CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

/* "1024,8192" -> {1024, 8192}; the count, or -1 for anything else. */
static int parse_int_list(const char *s, int *out, int max)
{
    int n = 0;
    while (*s) {
        char *end;
        long v = strtol(s, &end, 10);
        if (end == s || v <= 0 || v > (1 << 24) || n == max || (*end && *end != ',')) return -1;
        out[n++] = (int)v;
        s = *end ? end + 1 : end;
    }
    return n;
}

/* mean, sample standard deviation, min and max of x[0..n) */
struct bench_stat { double mean, sd, min, max; };

static struct bench_stat stat_of(const double *x, int n)
{
    struct bench_stat s = { 0, 0, x[0], x[0] };
    for (int i = 0; i < n; i++) {
        s.mean += x[i] / n;
        if (x[i] < s.min) s.min = x[i];
        if (x[i] > s.max) s.max = x[i];
    }
    for (int i = 0; i < n && n > 1; i++) s.sd += (x[i] - s.mean) * (x[i] - s.mean) / (n - 1);
    s.sd = sqrt(s.sd);
    return s;
}

/* llama-bench's depth sweep: at each depth d (tokens already cached, not
 * timed), prefill n_prompt tokens and decode n_gen, reps times each; tok/s as
 * mean ± sd, min and max over the repetitions, as a markdown table or one
 * JSON object per depth. */
static int bench_depths(colibri_model *m, const char *dir, const int *depth, int nd, int n_prompt, int n_gen,
                        int reps, struct colibri_session_opts so, int cpu, int json, struct colibri_err *err)
{
    int V = colibri_model_vocab(m), rc = 0, dmax = 0;
    for (int i = 0; i < nd; i++) dmax = depth[i] > dmax ? depth[i] : dmax;
    int32_t *tok = malloc((size_t)(dmax + n_prompt + n_gen) * sizeof *tok);
    float *logits = malloc((size_t)V * sizeof *logits);
    double *pp = malloc((size_t)reps * sizeof *pp), *tg = malloc((size_t)reps * sizeof *tg);
    if (!tok || !logits || !pp || !tg) {
        snprintf(err->msg, sizeof err->msg, "out of memory for a depth of %d tokens", dmax);
        rc = COLIBRI_ENOMEM;
    }
    srand(1);
    for (int i = 0; !rc && i < dmax + n_prompt + n_gen; i++) tok[i] = rand() % V;
    if (!rc && !json)
        printf("| model | depth | prefill %d: tok/s mean ± sd | min | max | decode %d: tok/s mean ± sd | min | max |\n"
               "|---|---|---|---|---|---|---|---|\n", n_prompt, n_gen);
    for (int k = 0; k < nd && !rc; k++) {
        int d = depth[k];
        so.n_ctx = d + n_prompt + n_gen;
        for (int r = 0; r < reps && !rc; r++) {
            colibri_session *s = NULL;
            if ((rc = colibri_session_new(m, &so, &s, err))) break;
            if (d) rc = colibri_session_prefill(s, tok, d, NULL, 0, err);
            double t0 = now(cpu);
            if (!rc) rc = colibri_session_prefill(s, tok + d, n_prompt, logits, 0, err);
            double t1 = now(cpu);
            for (int i = 0; i < n_gen && !rc; i++) rc = colibri_session_decode(s, tok[d + n_prompt + i], logits, err);
            double t2 = now(cpu);
            colibri_session_free(s);
            pp[r] = n_prompt / (t1 - t0);
            tg[r] = n_gen / (t2 - t1);
        }
        if (rc) break;
        struct bench_stat a = stat_of(pp, reps), b = stat_of(tg, reps);
        if (json) {
            printf("{\"model\":\"");
            for (const char *c = dir; *c; c++)   /* a JSON string: quote, backslash and controls escaped */
                if (*c == '"' || *c == '\\') printf("\\%c", *c);
                else if ((unsigned char)*c < 0x20) printf("\\u%04x", (unsigned char)*c);
                else putchar(*c);
            printf("\",\"depth\":%d,\"n_prompt\":%d,\"n_gen\":%d,\"reps\":%d,\"timing\":\"%s\","
                   "\"prefill_tps\":{\"mean\":%.3f,\"sd\":%.3f,\"min\":%.3f,\"max\":%.3f},"
                   "\"decode_tps\":{\"mean\":%.3f,\"sd\":%.3f,\"min\":%.3f,\"max\":%.3f}}\n",
                   d, n_prompt, n_gen, reps, cpu ? "cpu" : "wall", a.mean, a.sd, a.min, a.max, b.mean, b.sd,
                   b.min, b.max);
        } else
            printf("| %s | %d | %.1f ± %.1f | %.1f | %.1f | %.1f ± %.1f | %.1f | %.1f |\n", dir, d, a.mean, a.sd,
                   a.min, a.max, b.mean, b.sd, b.min, b.max);
        fflush(stdout);
    }
    free(tok);
    free(logits);
    free(pp);
    free(tg);
    return rc;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *x, int n)
{
    qsort(x, (size_t)n, sizeof *x, cmp_double);
    return n % 2 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]);
}

/* --verify K: the verify step of speculative decoding (the pending token and
 * K drafts in one absorbed forward) against a single decode, interleaved step
 * by step at the same depth in two sessions (the verifying one is cut back
 * to one new token each step, as when every draft is rejected; its tokens
 * and its drafts are random streams of their own, never fed twice, so that
 * with streamed experts no row finds the experts another row read for it).
 * What a
 * forced acceptance pattern gives follows: with every draft kept a verify
 * yields K + 1 tokens, so the speed-up is at most (K + 1) x decode / verify,
 * less the MTP layer's K draft forwards (not in this figure). With streamed
 * experts the verify also reads the experts its extra rows route to. */
static int bench_verify(colibri_model *m, int K, int n_prompt, int n_gen, struct colibri_session_opts so, int cpu,
                        struct colibri_err *err)
{
    int V = colibri_model_vocab(m), rc = 0;
    int n_tok = n_prompt + n_gen + K + 1;
    int32_t *tok = malloc((size_t)(2 * n_tok + n_gen * K) * sizeof *tok), *tok_b = tok ? tok + n_tok : NULL;
    int32_t *drafts = tok ? tok + 2 * n_tok : NULL, vin[4];
    float *logits = malloc((size_t)(K + 1) * V * sizeof *logits);
    double *td = malloc((size_t)n_gen * sizeof *td), *tv = malloc((size_t)n_gen * sizeof *tv);
    colibri_session *a = NULL, *b = NULL;
    if (!tok || !logits || !td || !tv) rc = COLIBRI_ENOMEM;
    srand(1);
    for (int i = 0; !rc && i < 2 * n_tok + n_gen * K; i++) tok[i] = rand() % V;
    so.n_ctx = n_prompt + n_gen + K + 1;
    if (!rc) rc = colibri_session_new(m, &so, &a, err);
    if (!rc) rc = colibri_session_new(m, &so, &b, err);
    if (!rc) rc = colibri_session_prefill(a, tok, n_prompt, NULL, 0, err);
    if (!rc) rc = colibri_session_prefill(b, tok_b, n_prompt, NULL, 0, err);
    uint64_t read_d = 0, read_v = 0, acq_d = 0, acq_v = 0;
    for (int i = 0; i < n_gen && !rc; i++) {
        struct colibri_expert_stats e0, e1, e2;
        colibri_model_expert_stats(m, &e0);
        double t0 = now(cpu);
        rc = colibri_session_decode(a, tok[n_prompt + i], logits, err);
        double t1 = now(cpu);
        colibri_model_expert_stats(m, &e1);
        vin[0] = tok_b[n_prompt + i];
        memcpy(vin + 1, drafts + (int64_t)i * K, (size_t)K * sizeof *vin);
        if (!rc) rc = colibri_session_verify(b, vin, K + 1, logits, err);
        double t2 = now(cpu);
        colibri_model_expert_stats(m, &e2);
        if (!rc) rc = colibri_session_truncate(b, n_prompt + i + 1, err);
        td[i] = t1 - t0;
        tv[i] = t2 - t1;
        read_d += e1.bytes_read - e0.bytes_read;
        read_v += e2.bytes_read - e1.bytes_read;
        acq_d += e1.acquires - e0.acquires;
        acq_v += e2.acquires - e1.acquires;
    }
    if (!rc) {
        struct colibri_model_info in;
        colibri_model_get_info(m, &in);
        double d = median(td, n_gen), v = median(tv, n_gen);
        printf("verify %d+1 vs decode (%s store, %s time, depth %d..%d, %d steps interleaved): decode %.2f ms "
               "[%.2f, %.2f], verify %.2f ms [%.2f, %.2f] (medians [min, max]), verify/decode %.2fx; expert reads "
               "%.1f vs %.1f MiB per step; with every draft kept: at most %.2fx decode tok/s before the MTP "
               "layer's drafts\n", K, in.expert_store, cpu ? "cpu" : "wall", n_prompt, n_prompt + n_gen, n_gen,
               1e3 * d, 1e3 * td[0], 1e3 * td[n_gen - 1], 1e3 * v, 1e3 * tv[0], 1e3 * tv[n_gen - 1], v / d,
               read_v / 1048576.0 / n_gen, read_d / 1048576.0 / n_gen, (K + 1) * d / v);
        /* Resident, a step reads its distinct experts once (the kernels take
         * the rows routed to an expert together): the weight bytes a verify
         * touches against a decode's bound its cost where decode is
         * bandwidth-bound, whatever the kernels. */
        int n_exp = in.n_routed_experts * (in.n_moe_layers + in.n_mtp_layers);
        if (n_exp > 0 && in.n_moe_layers > 0 && acq_d > 0) {
            double per_exp = (double)in.expert_bytes / n_exp;
            double bd = (double)in.active_bytes, bv = bd + ((double)acq_v - (double)acq_d) / n_gen * per_exp;
            printf("weights touched per step: decode %.1f MiB (%.2f experts per MoE layer), verify %.1f MiB "
                   "(%.2f experts per MoE layer), verify/decode %.2fx: where decode is bandwidth-bound, every "
                   "draft kept gives at most %.2fx decode tok/s\n", bd / 1048576.0,
                   (double)acq_d / n_gen / in.n_moe_layers, bv / 1048576.0, (double)acq_v / n_gen / in.n_moe_layers,
                   bv / bd, (K + 1) * bd / bv);
        }
    } else if (rc == COLIBRI_ENOMEM && !err->msg[0]) {
        snprintf(err->msg, sizeof err->msg, "out of memory");
    }
    colibri_session_free(a);
    colibri_session_free(b);
    free(tok);
    free(logits);
    free(td);
    free(tv);
    return rc;
}

/* --mtp-accept: drafts forced to the reference greedy tokens (those of the
 * run without drafts), each right with probability q[j] at draft position j
 * given the ones before it were kept (a seeded stream, the same every run);
 * the MTP layer still makes its drafts first, so their cost is in. */
struct mtp_force {
    const int32_t *ref;         /* the tokens without drafts */
    int n_ref, n_prompt;
    double q[COLIBRI_GEN_MAX_DRAFT];
    uint64_t rng;
};

static void mtp_force_drafts(void *user, int pos, int32_t *drafts, int n)
{
    struct mtp_force *f = user;
    for (int j = 0; j < n; j++) {
        int i = pos + j - f->n_prompt;  /* generated token i sits at position n_prompt + i */
        int32_t want = i >= 0 && i < f->n_ref ? f->ref[i] : 0;
        f->rng = f->rng * 6364136223846793005ull + 1442695040888963407ull;
        if ((double)(f->rng >> 11) * 0x1.0p-53 >= f->q[j]) want = want ? want - 1 : 1;   /* a wrong one */
        drafts[j] = want;
    }
}

/* One greedy generation of n_gen tokens after prompt with n_draft drafts
 * (auto: draft_auto); *t its decode time (from the end of the prefill),
 * *st its counts, toks its tokens. End-of-generation ids are banned so that
 * every run makes n_gen tokens. */
static int mtp_run(colibri_model *m, const colibri_tokenizer *tok, struct colibri_session_opts so,
                   const int32_t *prompt, int n_prompt, int n_gen, int n_draft, int draft_auto, struct mtp_force *force,
                   int cpu, double *t, struct colibri_gen_stats *st, int32_t *toks, struct colibri_err *err)
{
    colibri_session *s = NULL;
    colibri_sampler *smp = NULL;
    colibri_gen *g = NULL;
    struct colibri_logit_bias ban[16];
    size_t n_ban = 0;
    for (int32_t id = 0; id < colibri_tokenizer_n_vocab(tok) && n_ban < 16; id++)
        if (colibri_tokenizer_is_eog(tok, id)) ban[n_ban++] = (struct colibri_logit_bias){ id, -1e30f };
    struct colibri_sampler_opts sopt = colibri_sampler_default_opts();
    sopt.temperature = 0;
    sopt.logit_bias = ban;
    sopt.n_logit_bias = n_ban;
    so.n_ctx = n_prompt + n_gen + COLIBRI_GEN_MAX_DRAFT + 1;
    int rc = colibri_session_new(m, &so, &s, err);
    if (!rc) rc = colibri_sampler_new(&sopt, colibri_model_vocab(m), &smp, err);
    if (!rc) rc = colibri_gen_new(m, s, tok, &g, err);
    struct colibri_gen_opts o = { .sampler = smp, .n_predict = n_gen, .n_draft = n_draft, .draft_auto = draft_auto,
                                  .draft_hook = force ? mtp_force_drafts : NULL, .draft_user = force };
    if (!rc) rc = colibri_gen_start(g, prompt, n_prompt, &o, err);
    while (!rc && colibri_gen_phase(g) == COLIBRI_GEN_PHASE_PREFILL)
        if ((rc = colibri_gen_prefill(g, 0, err)) > 0) rc = 0;
    double t0 = now(cpu);
    int n = 0;
    while (!rc && colibri_gen_phase(g) == COLIBRI_GEN_PHASE_SAMPLE) {
        struct colibri_gen_step step;
        if ((rc = colibri_gen_sample(g, &step, err))) break;
        if (step.n_tokens && n < n_gen) toks[n++] = step.tokens[0];
        if (colibri_gen_phase(g) == COLIBRI_GEN_PHASE_FEED) rc = colibri_gen_decode(g, err);
    }
    *t = now(cpu) - t0;
    if (!rc) colibri_gen_get_stats(g, st);
    colibri_gen_free(g);
    colibri_sampler_free(smp);
    colibri_session_free(s);
    return rc;
}

/* --mtp on|auto: greedy generation of -n tokens after -p random text ids,
 * with drafts and without, interleaved per repetition: decode tok/s of both
 * (median and range of -r), the ratio per repetition, tokens per decode
 * forward and drafts kept per draft position, and whether both gave the
 * same tokens (they must). Acceptance depends on the text: the model's own
 * greedy continuation of random ids is what is measured here. */
static int bench_mtp(colibri_model *m, const char *dir, int n_draft, int draft_auto, const double *accept, int n_prompt,
                     int n_gen, int reps, struct colibri_session_opts so, int cpu, struct colibri_err *err)
{
    colibri_tokenizer *tok = NULL;
    int rc = colibri_tokenizer_load(dir, &tok, err);
    if (rc) {
        char msg[sizeof err->msg];
        snprintf(msg, sizeof msg, "--mtp needs the model's tokenizer: %s", err->msg);
        snprintf(err->msg, sizeof err->msg, "%s", msg);
        return rc;
    }
    int32_t *prompt = malloc((size_t)n_prompt * sizeof *prompt);
    int32_t *ta = malloc((size_t)n_gen * sizeof *ta), *tb = malloc((size_t)n_gen * sizeof *tb);
    double *t_off = malloc((size_t)reps * sizeof *t_off), *t_on = malloc((size_t)reps * sizeof *t_on);
    double *ratio = malloc((size_t)reps * sizeof *ratio);
    if (!prompt || !ta || !tb || !t_off || !t_on || !ratio) rc = COLIBRI_ENOMEM;
    srand(1);
    for (int i = 0; !rc && i < n_prompt; i++) prompt[i] = rand() % colibri_tokenizer_n_vocab(tok);
    struct colibri_gen_stats st_off = { 0 }, st_on = { 0 }, sum = { 0 };
    int same = 1;
    for (int r = 0; r < reps && !rc; r++) {
        struct mtp_force force = { ta, n_gen, n_prompt, { 0 }, 12345 };
        if (accept) memcpy(force.q, accept, sizeof force.q);
        rc = mtp_run(m, tok, so, prompt, n_prompt, n_gen, 0, 0, NULL, cpu, &t_off[r], &st_off, ta, err);
        if (!rc) rc = mtp_run(m, tok, so, prompt, n_prompt, n_gen, n_draft, draft_auto, accept ? &force : NULL, cpu,
                              &t_on[r], &st_on, tb, err);
        if (rc) break;
        same &= !memcmp(ta, tb, (size_t)n_gen * sizeof *ta);
        ratio[r] = t_off[r] / t_on[r];
        sum.n_generated += st_on.n_generated;
        sum.n_forwards += st_on.n_forwards;
        sum.n_forwards_drafted += st_on.n_forwards_drafted;
        for (int j = 0; j < COLIBRI_GEN_MAX_DRAFT; j++) {
            sum.n_drafted[j] += st_on.n_drafted[j];
            sum.n_accepted[j] += st_on.n_accepted[j];
        }
    }
    if (!rc) {
        double off = median(t_off, reps), on = median(t_on, reps), q = median(ratio, reps);
        int kept = 0;
        for (int j = 0; j < COLIBRI_GEN_MAX_DRAFT; j++) kept += sum.n_accepted[j];
        if (accept)
            printf("mtp: drafts forced to the tokens without drafts, kept with probability %.2f / %.2f / %.2f at "
                   "draft position 1 / 2 / 3 given the ones before\n", accept[0], accept[1], accept[2]);
        printf("mtp %s --draft %d vs off (%s time, greedy, %d tokens after %d random ids, %d repetitions "
               "interleaved): decode %.2f tok/s [%.2f, %.2f] vs %.2f [%.2f, %.2f] (medians [min, max]); "
               "on/off %.3f [%.3f, %.3f]; same tokens: %s\n", draft_auto ? "auto" : "on", n_draft,
               cpu ? "cpu" : "wall", n_gen, n_prompt, reps, n_gen / on, n_gen / t_on[reps - 1], n_gen / t_on[0],
               n_gen / off, n_gen / t_off[reps - 1], n_gen / t_off[0], q, ratio[0], ratio[reps - 1],
               same ? "yes" : "NO");
        printf("mtp: %.2f tokens per decode forward, %.2f per verify forward (%d forwards, %d with drafts); drafts "
               "kept by position:", sum.n_forwards ? (double)(sum.n_generated - reps) / sum.n_forwards : 0.0,
               sum.n_forwards_drafted ? (double)(sum.n_forwards_drafted + kept) / sum.n_forwards_drafted : 0.0,
               sum.n_forwards, sum.n_forwards_drafted);
        for (int j = 0; j < COLIBRI_GEN_MAX_DRAFT && sum.n_drafted[j]; j++)
            printf(" %d/%d (%.0f%%)", sum.n_accepted[j], sum.n_drafted[j], 100.0 * sum.n_accepted[j] / sum.n_drafted[j]);
        printf("\n");
        if (!same) {   /* drafts must never change the output */
            snprintf(err->msg, sizeof err->msg, "--mtp: the tokens with drafts differ from those without");
            rc = -1;
        }
    } else if (rc == COLIBRI_ENOMEM && !err->msg[0]) {
        snprintf(err->msg, sizeof err->msg, "out of memory");
    }
    colibri_tokenizer_free(tok);
    free(prompt);
    free(ta);
    free(tb);
    free(t_off);
    free(t_on);
    free(ratio);
    return rc;
}

int cmd_bench(int argc, char **argv)
{
    const char *dir = "models/colibri-tiny";
    int n_prompt = 128, n_gen = 64, threads = 0, reps = 3, bw = 0, expert_layers = 0;
    struct colibri_model_opts mo = { 0 };
    struct cli_mpi cm = CLI_MPI_INIT;
    const char *kv = NULL, *kv_rope = NULL, *attn_ctx = "1024,8192,32768", *attn_heads = "16,128";
    int kv_int8 = 0, attn = 0, v4_attn = 0, v4_rounds = 5, peaks = 0, verify = 0, n_draft = 0;
    const char *v4_index = NULL;
    const char *mtp_mode = NULL, *mtp_accept = NULL;
    const char *depths = NULL, *output = NULL;
    struct colibri_attn_bench_opts ao = { 0 };
    float attn_min_time = 0.4f;
    const struct opt opts[] = {
        { "attn", 0, OPT_FLAG, &attn, "decode attention alone per KV tier vs f32 (no model needed); see below" },
        { "attn-ctx", 0, OPT_STR, &attn_ctx, "--attn contexts (default 1024,8192,32768)" },
        { "attn-heads", 0, OPT_STR, &attn_heads, "--attn head counts (default 16,128)" },
        { "attn-tiers", 0, OPT_STR, &ao.tiers, "--attn tiers (default all; f32 always first)" },
        { "attn-min-time", 0, OPT_FLOAT, &attn_min_time, "--attn seconds per tier per cell (default 0.4)", 0.01, 600 },
        { "attn-int8", 0, OPT_FLAG, &ao.with_int8, "--attn: also time the opt-in integer consumers" },
        { "attn-dsa", 0, OPT_INT, &ao.dsa_topk, "--attn: dense vs DeepSeek Sparse Attention with this top-k (e.g. 2048), "
                                                "indexer included, f32 and fp8 index keys, first --attn-heads count",
          1, 1 << 20 },
        { "v4-attn", 0, OPT_FLAG, &v4_attn, "DeepSeek-V4 decode attention alone per layer kind (sliding, CSA, HCA), "
                                            "tier and context at V4-Flash dims on synthetic state (no model, no "
                                            "prefill; --attn-ctx default 4096,32768,131072,1048576, --attn-tiers "
                                            "default f32,bf16,fp8,int8r, --attn-min-time per cell per round), "
                                            "and KV bytes per token per tier" },
        { "v4-index", 0, OPT_STR, &v4_index, "--v4-attn: the index keys' tier (f32 or fp8; default f32)" },
        { "v4-rounds", 0, OPT_INT, &v4_rounds, "--v4-attn: interleaved rounds per cell (default 5)", 1, 64 },
        { "cpu-time", 0, OPT_FLAG, &ao.cpu_time, "time by process CPU time, not wall time (for shared machines; with -t 1 it is the compute time)" },
        OPTS_KV_CACHE(kv, kv_rope, kv_int8),
        OPTS_WEIGHT_FORMATS(mo),
        OPTS_MODEL_MEMORY(mo),
        OPTS_BF16_ACT(mo.bf16_act),
        OPTS_MPI(cm),
        { "model", 'm', OPT_STR, &dir, "model directory; default models/colibri-tiny" },
        { "prompt", 'p', OPT_INT, &n_prompt, "prompt tokens to prefill (default 128)", 1, 1 << 20 },
        { "gen", 'n', OPT_INT, &n_gen, "tokens to decode one at a time (default 64)", 1, 1 << 20 },
        { "reps", 'r', OPT_INT, &reps, "repetitions; the best is reported (default 3)", 1, 100 },
        { "threads", 't', OPT_INT, &threads, "OpenMP threads (default: all cores)", 0, 1024 },
        { "bw", 0, OPT_FLAG, &bw, "also probe read bandwidth and compare decode with its bound" },
        { "expert-layers", 0, OPT_FLAG, &expert_layers, "with streamed experts (--ram), also print per MoE layer "
                                                        "what was read and why, and how much of it went unused" },
        { "depth", 'd', OPT_STR, &depths, "comma-separated depths: tokens cached before each prefill and decode "
                                          "(llama-bench's -d); prints a table over them" },
        { "output", 'o', OPT_STR, &output, "md (a table, the default with -d) or json (one object per depth)" },
        { "verify", 0, OPT_INT, &verify, "time the speculative verify forward of 1 + K tokens against single "
                                         "decodes, interleaved (K = 1..3; -p tokens first, -n steps)", 1, 3 },
        OPTS_MTP(mtp_mode, n_draft),
        { "mtp-accept", 0, OPT_STR, &mtp_accept, "with --mtp on: force drafts (the tokens without drafts, each "
                                                 "right with these probabilities at draft positions 1,2,3 given the "
                                                 "ones before, e.g. 0.57,0.46,0.42), for a model whose MTP layer is random" },
        { "peak", 0, OPT_FLAG, &peaks, "compute peaks of fp32 FMA, bf16 dot, int8 dot and the AMX int8/bf16 tiles, 1 and all threads, then every read-probe variant (no model needed)" },
    };
    const struct opts_spec spec = { "colibri bench [-m DIR] [-p N] [-n N] [-r N] [-t N] [--bw] [--kv TIER] [--experts FMT] [--dense FMT] "
        "[--embed FMT]\n       colibri bench --peak [-t N]\n       colibri bench --attn [--attn-ctx 1024,8192,32768] [--attn-heads 16,128] [--attn-dsa K] [--cpu-time]\n"
        "       colibri bench --v4-attn [--attn-ctx 4096,32768,131072,1048576] [--attn-tiers f32,bf16,fp8,int8r] [--v4-index f32|fp8] [-t N]",
                                    "Times prefill of N random tokens (expanded MLA, one batch) and decode of N "
                                    "tokens one at a time (absorbed MLA) and prints tokens/s (best of -r).\n"
                                    "--attn times decode attention alone per KV tier against f32 in the same run "
                                    "(DeepSeek-V3 dims: 512 latent + 64 RoPE) and prints a table of ms per token per "
                                    "layer and the ratio to f32.",
                                    opts, sizeof opts / sizeof opts[0] };
    char *pos[1];
    int npos, rc = opts_parse(&spec, argc, argv, pos, 0, &npos);
    if (rc) return rc > 0 ? 0 : 2;
    struct colibri_err err = { 0 };
    if (peaks) {
        if (colibri_bench_peak(threads, stdout, &err)) {
            fprintf(stderr, "colibri bench: %s\n", err.msg);
            return 1;
        }
        printf("\n");
        if (colibri_bench_read_bandwidth(stdout, NULL, 0) <= 0) {
            fprintf(stderr, "colibri bench: the read probe could not allocate its 1 GiB of buffers\n");
            return 1;
        }
        return 0;
    }
    if (v4_attn) {
        ao.threads = threads;
        ao.min_time = attn_min_time == 0.4f ? 0.05 : attn_min_time;
        ao.n_ctx = strcmp(attn_ctx, "1024,8192,32768") ? parse_int_list(attn_ctx, ao.ctx, 8) : 0;
        if (ao.n_ctx < 0) {
            fprintf(stderr, "colibri bench: --attn-ctx takes comma-separated positive integers\n");
            return 2;
        }
        if (colibri_bench_v4_attention(&ao, v4_index, v4_rounds, stdout, stderr, &err)) {
            fprintf(stderr, "colibri bench: %s\n", err.msg);
            return 1;
        }
        return 0;
    }
    if (attn) {
        ao.threads = threads;
        ao.min_time = attn_min_time;
        ao.n_ctx = parse_int_list(attn_ctx, ao.ctx, 8);
        ao.n_heads = parse_int_list(attn_heads, ao.heads, 4);
        if (ao.n_ctx <= 0 || ao.n_heads <= 0) {
            fprintf(stderr, "colibri bench: --attn-ctx / --attn-heads take comma-separated positive integers\n");
            return 2;
        }
        if (colibri_bench_attention(&ao, stdout, stderr, &err)) {
            fprintf(stderr, "colibri bench: %s\n", err.msg);
            return 1;
        }
        return 0;
    }
    int depth[32], nd = 0, json = 0;
    if (output && strcmp(output, "md") && strcmp(output, "json")) {
        fprintf(stderr, "colibri bench: --output '%s': expected md or json\n", output);
        return 2;
    }
    json = output && !strcmp(output, "json");
    if (depths && (nd = opts_int_list("depth", depths, depth, 32, 0, 1 << 24)) < 0) return 2;
    if (output && !depths) depth[nd++] = 0;
    colibri_model *m = NULL;
    mo.n_threads = threads;
    int mpi_status;
    if (cli_mpi_begin("bench", &cm, dir, &mo, &mpi_status)) return mpi_status;
    if (colibri_model_load(dir, &mo, &m, &err)) {
        fprintf(stderr, "colibri bench: %s\n", err.msg);
        return cli_mpi_end(&cm, 1);
    }
    if (verify) {
        struct colibri_session_opts vso = { .kv_tier = kv ? kv : opts_env_kv_tier(), .kv_rope = kv_rope,
                                            .kv_int8 = kv_int8 };
        rc = bench_verify(m, verify, n_prompt, n_gen, vso, ao.cpu_time, &err);
        if (rc) fprintf(stderr, "colibri bench: %s\n", err.msg);
        colibri_model_free(m);
        return rc ? 1 : 0;
    }
    if (mtp_mode && strcmp(mtp_mode, "off")) {
        struct colibri_model_info info;
        colibri_model_get_info(m, &info);
        int draft = 0, draft_auto = 0;
        if (opts_mtp(mtp_mode, n_draft, info.n_mtp_layers, &draft, &draft_auto)) {
            colibri_model_free(m);
            return 2;
        }
        struct colibri_session_opts mso = { .kv_tier = kv ? kv : opts_env_kv_tier(), .kv_rope = kv_rope,
                                            .kv_int8 = kv_int8 };
        double accept[COLIBRI_GEN_MAX_DRAFT] = { 0 };
        if (mtp_accept) {
            char *e = (char *)mtp_accept;
            for (int j = 0; j < COLIBRI_GEN_MAX_DRAFT && *e; j++) {
                accept[j] = strtod(e, &e);
                if (accept[j] < 0 || accept[j] > 1 || (*e && *e != ',')) break;
                if (*e == ',') e++;
            }
            if (*e || accept[0] < 0 || accept[0] > 1) {
                fprintf(stderr, "colibri bench: --mtp-accept '%s': expected up to %d probabilities 0..1, comma-separated\n",
                        mtp_accept, COLIBRI_GEN_MAX_DRAFT);
                colibri_model_free(m);
                return 2;
            }
        }
        rc = draft ? bench_mtp(m, dir, draft, draft_auto, mtp_accept ? accept : NULL, n_prompt, n_gen, reps, mso,
                               ao.cpu_time, &err)
                   : (snprintf(err.msg, sizeof err.msg, "--mtp %s: this model has no MTP layer", mtp_mode), -1);
        if (rc) fprintf(stderr, "colibri bench: %s\n", err.msg);
        colibri_model_free(m);
        return cli_mpi_end(&cm, rc ? 1 : 0);
    }
    if (nd) {
        struct colibri_session_opts dso = { .kv_tier = kv ? kv : opts_env_kv_tier(), .kv_rope = kv_rope,
                                            .kv_int8 = kv_int8 };
        rc = bench_depths(m, dir, depth, nd, n_prompt, n_gen, reps, dso, ao.cpu_time, json, &err);
        if (rc) fprintf(stderr, "colibri bench: %s\n", err.msg);
        colibri_model_free(m);
        return cli_mpi_end(&cm, rc ? 1 : 0);
    }
    int V = colibri_model_vocab(m);
    int32_t *tok = malloc((size_t)(n_prompt + n_gen) * sizeof *tok);
    srand(1);
    for (int i = 0; i < n_prompt + n_gen; i++) tok[i] = rand() % V;
    float *logits = malloc((size_t)V * sizeof *logits);
    struct colibri_session_opts so = { .n_ctx = n_prompt + n_gen, .kv_tier = kv ? kv : opts_env_kv_tier(),
                                       .kv_rope = kv_rope, .kv_int8 = kv_int8 };
    double best_pre = 1e30, best_dec = 1e30, wall = 0;
    struct colibri_model_info mi;
    colibri_model_get_info(m, &mi);
    int streamed = !strcmp(mi.expert_store, "streamed");
    struct cli_mpi_span dec_span = { 0 };
    for (int r = 0; r < reps && !rc; r++) {
        colibri_session *s = NULL;
        if ((rc = colibri_session_new(m, &so, &s, &err))) break;
        struct colibri_expert_stats e0, e1, e2;
        colibri_model_expert_stats(m, &e0);
        double w0 = now(0), t0 = now(ao.cpu_time);
        rc = colibri_session_prefill(s, tok, n_prompt, logits, 0, &err);
        double w1 = now(0), t1 = now(ao.cpu_time);
        colibri_model_expert_stats(m, &e1);
        cli_mpi_span_begin(&dec_span, m, &cm);
        for (int i = 0; i < n_gen && !rc; i++) rc = colibri_session_decode(s, tok[n_prompt + i], logits, &err);
        double w2 = now(0), t2 = now(ao.cpu_time);
        colibri_model_expert_stats(m, &e2);
        cli_mpi_span_end(&dec_span, m, &cm, n_gen);
        colibri_session_free(s);
        if (t1 - t0 < best_pre) best_pre = t1 - t0;
        if (t2 - t1 < best_dec) best_dec = t2 - t1;
        wall += w2 - w0;
        if (streamed && !rc) {   /* the first repetition starts with an empty expert cache */
            printf("repetition %d: prefill %.1f tok/s, decode %.2f tok/s (wall); decode ", r + 1,
                   n_prompt / (w1 - w0), n_gen / (w2 - w1));
            gen_print_expert_delta(stdout, &e1, &e2, (uint64_t)n_gen, w2 - w1);
        }
    }
    if (rc) fprintf(stderr, "colibri bench: %s\n", err.msg);
    else
        printf("model=%s prefill=%d tok in %.3f s (%.1f tok/s) decode=%d tok in %.3f s (%.1f tok/s)\n", dir,
               n_prompt, best_pre, n_prompt / best_pre, n_gen, best_dec, n_gen / best_dec);
    if (!rc) {
        /* what the model and one session say they hold, against the process's peak */
        struct colibri_model_info in;
        colibri_model_get_info(m, &in);
        colibri_session *s = NULL;
        int64_t sess = colibri_session_new(m, &so, &s, &err) ? 0 : colibri_session_bytes(s);
        colibri_session_free(s);
        struct rusage ru;
        getrusage(RUSAGE_SELF, &ru);
        double stated = (double)(in.resident_bytes + sess) / 1048576.0, peak = ru.ru_maxrss / 1024.0;
        printf("memory: model %.1f MiB (weights %.1f, of which routed experts %.1f, %s; f32 copies %.1f), session %.1f "
               "MiB; stated %.1f MiB, peak RSS %.1f MiB (stated/peak %.3f)\n",
               in.resident_bytes / 1048576.0, (in.weight_bytes - in.expert_bytes + in.expert_cache_bytes) / 1048576.0,
               in.expert_cache_bytes / 1048576.0, in.expert_store, in.copy_bytes / 1048576.0, sess / 1048576.0, stated,
               peak, stated / peak);
    }
    if (!rc) gen_print_expert_stats(stdout, m, (uint64_t)reps * (uint64_t)(n_prompt + n_gen), wall);   /* over every repetition */
    if (!rc && expert_layers) gen_print_expert_layers(stdout, m);
    if (!rc) cli_mpi_span_print(stdout, &dec_span, &cm, "decoded");
    if (!rc && bw) {
        struct colibri_model_info in;
        colibri_model_get_info(m, &in);
        char how[96] = "";
        double gbs = colibri_bench_read_bandwidth(NULL, how, sizeof how), bound = gbs * 1e9 / (double)in.active_bytes;
        double share = 100.0 * (n_gen / best_dec) / bound;
        printf("read bandwidth %.1f GB/s (the read probe's best: %s); %.2f MiB of weights per decoded token -> "
               "bound %.1f tok/s; decode reaches %.0f%% of it\n", gbs, how, in.active_bytes / 1048576.0, bound, share);
        if (share > 100.0)
            printf("warning: above 100%% of the bound: the read probe missed a faster way to read this machine's "
                   "memory (or the weights stayed in cache); this share is not a result\n");
    }
    free(tok);
    free(logits);
    colibri_model_free(m);
    return cli_mpi_end(&cm, rc ? 1 : 0);
}
