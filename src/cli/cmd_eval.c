/* colibri eval: what a KV tier, a weight configuration or the decode path
 * costs, measured by teacher forcing a text.
 *
 * The text is encoded with the model's tokenizer (no special tokens added) and
 * cut into non-overlapping windows of N tokens (the short tail is dropped).
 * Window w runs as its own sequence [BOS] + w[0..N-2], so the logits at
 * position i predict w[i] and all N tokens are scored - the method of
 * tools/hf_ppl.py, so the reference line's ppl is comparable with Hugging
 * Face's.
 *
 * The reference is the weights as stored, an f32 cache and one prefill per
 * window (the path that matches Hugging Face). Each entry of --kv runs the
 * same windows with the weight formats given (--experts/--dense/--embed) and
 * through prefill or, with --decode, token by token; top-1 agreement, KL
 * (reference || entry) and the largest |logit difference| are against the
 * reference run of the same window, as llama-perplexity's
 * --kl-divergence-base is used. --base same takes the reference with the
 * weight formats given instead, which isolates the KV tier or, with --decode,
 * the decode path from the weights' own error. --bf16-act counts as a weight
 * configuration: its lines are against the default (f32-activation) products. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/commands.h"
#include "cli/mpi_cli.h"
#include "cli/opts.h"
#include "cli/textio.h"
#include "colibri.h"

#define EVAL_MAX_RUNS 17

/* One output line: a KV tier on a model (weights) through one path. */
struct eval_run {
    char tier[64];
    colibri_model *m;
    int decode;
    int64_t bytes_per_token;
    double nll, kl_sum, max_dlogit;
    int64_t n, top1;
    float *kl;          /* one per scored token, for the percentile */
};

static int cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

/* log-softmax of logits[V] into out[V], in double for the sums. */
static void log_softmax(const float *logits, int V, double *out)
{
    double mx = logits[0];
    for (int v = 1; v < V; v++) mx = logits[v] > mx ? logits[v] : mx;
    double sum = 0;
    for (int v = 0; v < V; v++) sum += exp((double)logits[v] - mx);
    double lse = mx + log(sum);
    for (int v = 0; v < V; v++) out[v] = (double)logits[v] - lse;
}

static int argmax(const float *x, int n)
{
    int b = 0;
    for (int i = 1; i < n; i++) if (x[i] > x[b]) b = i;
    return b;
}

/* "tq4/bf16@1:rope=f32+int8" -> tier "tq4@1:rope=f32" (per-layer entries
 * stay with the tier, kv/layout.h), rope "bf16", integer decode attention
 * mode 1 ("+int16": 2); missing parts are NULL / 0 (the tier's defaults).
 * buf holds the tier, rope the RoPE name. */
static void split_tier(const char *name, struct colibri_session_opts *so, char *buf, size_t n, char *rope,
                       size_t rope_n)
{
    char tmp[128];
    snprintf(tmp, sizeof tmp, "%s", name);
    char *plus = strchr(tmp, '+');
    so->kv_int8 = 0;
    if (plus) {
        so->kv_int8 = !strcmp(plus + 1, "int8") ? 1 : !strcmp(plus + 1, "int16") ? 2 : -1;
        *plus = 0;
    }
    char *at = strchr(tmp, '@');
    const char *layers = "";
    if (at) {
        layers = at + 1;
        *at = 0;
    }
    char *slash = strchr(tmp, '/');
    so->kv_rope = NULL;
    if (slash) {
        *slash = 0;
        snprintf(rope, rope_n, "%s", slash + 1);
        so->kv_rope = rope;
    }
    snprintf(buf, n, "%s%s%s", tmp, at ? "@" : "", layers);
    so->kv_tier = buf;
}

/* Logits for every position of one window: one prefill (expanded MLA on the
 * cached rows), or with decode the first token prefilled and the rest decoded
 * one at a time (absorbed MLA through the tier's native consumer). */
static int run_window(struct eval_run *r, int N, const int32_t *in, float *logits, struct colibri_err *err)
{
    char buf[128], rope[32];
    struct colibri_session_opts so = { .n_ctx = N };
    split_tier(r->tier, &so, buf, sizeof buf, rope, sizeof rope);
    colibri_session *s = NULL;
    int rc = colibri_session_new(r->m, &so, &s, err);
    if (!rc && !r->decode) rc = colibri_session_prefill(s, in, N, logits, 1, err);
    if (!rc && r->decode) {
        int V = colibri_model_vocab(r->m);
        rc = colibri_session_prefill(s, in, 1, logits, 0, err);
        for (int p = 1; p < N && !rc; p++) rc = colibri_session_decode(s, in[p], logits + (int64_t)p * V, err);
    }
    if (!rc) r->bytes_per_token = colibri_session_kv_token_bytes(s);
    colibri_session_free(s);
    return rc;
}

/* Scores one window of run r (logits out) against the reference logits ref;
 * lp, lq are V doubles of scratch. */
static void score_window(struct eval_run *r, int is_ref, const float *ref, const float *out, const int32_t *win,
                         int N, int V, double *lp, double *lq)
{
    for (int p = 0; p < N; p++) {
        const float *a = ref + (int64_t)p * V, *b = out + (int64_t)p * V;
        log_softmax(b, V, lq);
        r->nll -= lq[win[p]];
        double kl = 0;
        if (!is_ref) {
            log_softmax(a, V, lp);
            for (int v = 0; v < V; v++) {
                kl += exp(lp[v]) * (lp[v] - lq[v]);
                double d = fabs((double)a[v] - (double)b[v]);
                if (d > r->max_dlogit) r->max_dlogit = d;
            }
        }
        if (kl < 0) kl = 0;     /* rounding of two equal distributions */
        r->kl[r->n] = (float)kl;
        r->kl_sum += kl;
        r->top1 += argmax(a, V) == argmax(b, V);
        r->n++;
    }
}

/* "q4g64/q8/stored" for --experts q4g64 --dense q8, "stored" for none. */
static void weights_name(const struct colibri_model_opts *mo, char *buf, size_t n)
{
    const char *act = mo->bf16_act ? "+bf16act" : "";
    if (!mo->experts_fmt && !mo->dense_fmt && !mo->embed_fmt) {
        snprintf(buf, n, "stored%s", act);
        return;
    }
    snprintf(buf, n, "%s/%s/%s%s", mo->experts_fmt ? mo->experts_fmt : "stored",
             mo->dense_fmt ? mo->dense_fmt : "stored", mo->embed_fmt ? mo->embed_fmt : "stored", act);
}

int cmd_eval(int argc, char **argv)
{
    char every_tier[256];
    colibri_kv_tier_names(every_tier, sizeof every_tier, ",");
    const char *dir = "models/colibri-tiny", *text_path = NULL, *tiers_arg = every_tier;
    const char *base = "stored";
    int N = 512, max_windows = 0, threads = 0, decode = 0;
    struct colibri_model_opts mo = { 0 };
    struct cli_mpi cm = CLI_MPI_INIT;
    const struct opt opts[] = {
        { "model", 'm', OPT_STR, &dir, "model directory with tokenizer.json; default models/colibri-tiny" },
        { "text", 0, OPT_STR, &text_path, "UTF-8 text file to teacher-force (required)" },
        { "kv", 0, OPT_STR, &tiers_arg, "comma-separated KV tiers, each TIER[/ROPE][@LAYERS:SETTING...][+int8|+int16] "
                                        "(tq4/bf16: RoPE part in bf16; int8r@1:rope=f32: layer 1's RoPE part in "
                                        "f32, as --kv of the other commands); f32 is always run (default: every tier)" },
        { "ctx", 'c', OPT_INT, &N, "window length in tokens (default 512)", 2, 1 << 20 },
        { "max-windows", 0, OPT_INT, &max_windows, "evaluate at most this many windows (0: all)", 0, 1 << 30 },
        { "decode", 0, OPT_FLAG, &decode, "decode token by token (absorbed MLA, the tiers' native consumers; "
                                          "entries TIER+int8 / TIER+int16 use integer dot products) instead of "
                                          "one prefill per window; the reference stays a prefill" },
        { "base", 0, OPT_STR, &base, "reference weights: stored (default) or same (the weight formats given, "
                                     "to measure a KV tier or the decode path alone)" },
        { "threads", 't', OPT_INT, &threads, "OpenMP threads (default: all cores)", 0, 1024 },
        OPTS_WEIGHT_FORMATS(mo),
        OPTS_MODEL_MEMORY(mo),
        OPTS_BF16_ACT(mo.bf16_act),
        OPTS_MPI(cm),
    };
    const struct opts_spec spec = {
        "colibri eval [-m DIR] --text FILE [--kv f32,fp8,...] [--experts F --dense F --embed F] [--bf16-act] [--decode]\n"
        "       [--base stored|same] [--ctx N] [--max-windows N]",
        "Teacher-forces FILE in windows of N tokens ([BOS] + N-1 tokens, all N scored, as tools/hf_ppl.py)\n"
        "and prints the reference (stored weights, f32 cache, prefill), then one line per KV tier with the\n"
        "weight formats given:\n"
        "  weights=W kv=NAME mode=M bytes_per_token=B top1=A kl_mean=K kl_p99=P max_dlogit=D ppl=X dppl=+Y%\n"
        "W: experts/dense/embed formats (stored: as in the checkpoint; +bf16act: --bf16-act); M: prefill or decode; B: cache bytes\n"
        "per token over all layers; A: top-1 agreement with the reference; K, P: mean and 99th percentile of\n"
        "KL(reference || line) in nats; D: largest |logit difference|; X: perplexity; Y: its change vs the\n"
        "reference. Two models are loaded when the reference weights differ from the line's.",
        opts, sizeof opts / sizeof opts[0] };
    char *pos[1];
    int npos, rc = opts_parse(&spec, argc, argv, pos, 0, &npos);
    if (rc) return rc > 0 ? 0 : 2;
    if (!text_path) {
        fprintf(stderr, "colibri eval: --text FILE is required (see --help)\n");
        return 2;
    }
    int base_same = !strcmp(base, "same");
    if (!base_same && strcmp(base, "stored")) {
        fprintf(stderr, "colibri eval: --base: '%s' is neither stored nor same\n", base);
        return 2;
    }
    int reweighted = mo.experts_fmt || mo.dense_fmt || mo.embed_fmt || mo.bf16_act;
    if (base_same && !reweighted && !decode) {
        fprintf(stderr, "colibri eval: --base same compares the stored weights with themselves; give a weight "
                        "format (--experts, --dense, --embed) or --decode\n");
        return 2;
    }

    if (cm.on && reweighted && !base_same) {
        /* the other ranks serve the experts of one model at a time */
        fprintf(stderr, "colibri eval: --mpi runs one model, and a reference in the stored weights beside the "
                        "weight formats given is a second one: add --base same, or run without --mpi\n");
        return 2;
    }

    struct colibri_err err = { 0 };
    colibri_model *m = NULL, *m_ref = NULL;
    colibri_tokenizer *tok = NULL;
    struct colibri_model_opts mo_ref = { .n_threads = threads, .kv_b_f32 = mo.kv_b_f32, .ram = mo.ram };
    mo.n_threads = threads;
    int mpi_status;
    if (cli_mpi_begin("eval", &cm, dir, &mo, &mpi_status)) return mpi_status;
    if (colibri_model_load(dir, &mo, &m, &err) || colibri_tokenizer_load(dir, &tok, &err) ||
        colibri_tokenizer_check_model(tok, m, &err)) {
        fprintf(stderr, "colibri eval: %s\n", err.msg);
        colibri_model_free(m);
        return cli_mpi_end(&cm, 1);
    }
    if (reweighted && !base_same && colibri_model_load(dir, &mo_ref, &m_ref, &err)) {
        fprintf(stderr, "colibri eval: reference model: %s\n", err.msg);
        rc = 1;
        goto out;
    }
    if (!m_ref) m_ref = m;
    char wname[96], wname_ref[96];
    weights_name(&mo, wname, sizeof wname);
    weights_name(base_same ? &mo : &mo_ref, wname_ref, sizeof wname_ref);

    /* Runs: the reference first, then f32 and the tiers in the order given;
     * an entry that is the reference's own configuration is not run twice. */
    struct eval_run runs[EVAL_MAX_RUNS];
    int nr = 1;
    memset(runs, 0, sizeof runs);
    snprintf(runs[0].tier, sizeof runs[0].tier, "f32");
    runs[0].m = m_ref;
    char list[512];
    snprintf(list, sizeof list, "f32,%s", tiers_arg);
    int f32_seen = 0;
    for (char *tk = strtok(list, ","); tk; tk = strtok(NULL, ",")) {
        if (!strcmp(tk, "f32") && f32_seen++) continue;
        if (!strcmp(tk, "f32") && m == m_ref && !decode) continue;
        if (nr == EVAL_MAX_RUNS) {
            fprintf(stderr, "colibri eval: --kv: at most %d tiers\n", EVAL_MAX_RUNS - 2);
            rc = 2;
            goto out;
        }
        if (strlen(tk) >= sizeof runs[0].tier) {
            fprintf(stderr, "colibri eval: --kv: '%s' is too long for a tier name\n", tk);
            rc = 2;
            goto out;
        }
        snprintf(runs[nr].tier, sizeof runs[0].tier, "%s", tk);
        runs[nr].m = m;
        runs[nr].decode = decode;
        nr++;
    }
    /* Validate every tier name before the long run starts. */
    for (int i = 0; i < nr; i++) {
        char buf[128], rope[32];
        struct colibri_session_opts so = { .n_ctx = 1 };
        split_tier(runs[i].tier, &so, buf, sizeof buf, rope, sizeof rope);
        colibri_session *s = NULL;
        if (colibri_session_new(runs[i].m, &so, &s, &err)) {
            fprintf(stderr, "colibri eval: %s\n", err.msg);
            rc = 2;
            goto out;
        }
        colibri_session_free(s);
    }
    size_t got;
    char *text = cli_read_text(text_path, &got);
    if (!text) {
        fprintf(stderr, "colibri eval: cannot read %s\n", text_path);
        rc = 1;
        goto out;
    }
    int32_t *ids = NULL;
    size_t n_ids = 0, n_bad = 0;
    rc = colibri_tokenizer_encode(tok, text, got, 0, &ids, &n_ids, &n_bad, &err);
    free(text);
    if (rc) {
        fprintf(stderr, "colibri eval: %s: %s\n", text_path, err.msg);
        rc = 1;
        goto out;
    }
    if (n_bad) fprintf(stderr, "colibri eval: %s: %zu invalid UTF-8 sequences replaced by U+FFFD\n", text_path, n_bad);
    int bos = colibri_tokenizer_bos(tok);
    if (bos < 0) bos = 0;
    int64_t n_win = (int64_t)n_ids / N;
    if (max_windows && n_win > max_windows) n_win = max_windows;
    if (n_win == 0) {
        fprintf(stderr, "colibri eval: %s has %zu tokens, fewer than one window of %d\n", text_path, n_ids, N);
        free(ids);
        rc = 1;
        goto out;
    }
    fprintf(stderr, "colibri eval: %s: %zu tokens, %lld windows of %d, %d runs\n", text_path, n_ids,
            (long long)n_win, N, nr);

    int V = colibri_model_vocab(m);
    float *ref = malloc((size_t)N * V * sizeof *ref), *lg = malloc((size_t)N * V * sizeof *lg);
    double *lp = malloc((size_t)V * sizeof *lp), *lq = malloc((size_t)V * sizeof *lq);
    int32_t *in = malloc((size_t)N * sizeof *in);
    int oom = !ref || !lg || !lp || !lq || !in;
    for (int i = 0; i < nr; i++) oom |= !(runs[i].kl = malloc((size_t)(n_win * N) * sizeof(float)));
    if (oom) {
        fprintf(stderr, "colibri eval: out of memory for %lld windows of %d tokens\n", (long long)n_win, N);
        rc = 1;
    }
    int tty = isatty(2);
    for (int64_t w = 0; w < n_win && !rc; w++) {
        const int32_t *win = ids + w * N;
        in[0] = bos;
        memcpy(in + 1, win, (size_t)(N - 1) * sizeof *in);
        for (int i = 0; i < nr && !rc; i++) {
            float *out = i == 0 ? ref : lg;
            if ((rc = run_window(&runs[i], N, in, out, &err))) break;
            score_window(&runs[i], i == 0, ref, out, win, N, V, lp, lq);
        }
        if (tty) fprintf(stderr, "\rcolibri eval: window %lld/%lld", (long long)(w + 1), (long long)n_win);
        else if ((w + 1) % (n_win >= 10 ? n_win / 10 : 1) == 0 || w + 1 == n_win)   /* a log file gets lines */
            fprintf(stderr, "colibri eval: window %lld/%lld\n", (long long)(w + 1), (long long)n_win);
    }
    if (tty) fprintf(stderr, "\n");
    if (rc > 0) {
        /* out of memory, reported above */
    } else if (rc) {
        fprintf(stderr, "colibri eval: %s\n", err.msg);
        rc = 1;
    } else {
        double ppl0 = exp(runs[0].nll / runs[0].n);
        for (int i = 0; i < nr; i++) {
            struct eval_run *r = &runs[i];
            qsort(r->kl, (size_t)r->n, sizeof(float), cmp_float);
            double p99 = r->kl[(int64_t)(0.99 * (r->n - 1))];
            double ppl = exp(r->nll / r->n);
            printf("weights=%s kv=%s mode=%s bytes_per_token=%lld top1=%.4f kl_mean=%.3g kl_p99=%.3g "
                   "max_dlogit=%.3g ppl=%.4f dppl=%+.2f%%\n",
                   i == 0 ? wname_ref : wname, r->tier, r->decode ? "decode" : "prefill",
                   (long long)r->bytes_per_token, (double)r->top1 / r->n, r->kl_sum / r->n, p99, r->max_dlogit,
                   ppl, 100.0 * (ppl / ppl0 - 1.0));
        }
    }
    for (int i = 0; i < nr; i++) free(runs[i].kl);
    free(ref); free(lg); free(lp); free(lq); free(in); free(ids);
out:
    if (!rc) cli_mpi_print_stats(stderr, m, &cm);
    colibri_tokenizer_free(tok);
    if (m_ref != m) colibri_model_free(m_ref);
    colibri_model_free(m);
    return cli_mpi_end(&cm, rc);
}
