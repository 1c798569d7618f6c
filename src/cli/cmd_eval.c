/* colibri eval: what each KV tier costs, measured by teacher forcing a text.
 *
 * The text is encoded with the model's tokenizer (no special tokens added) and
 * cut into non-overlapping windows of N tokens (the short tail is dropped).
 * Window w runs as its own sequence [BOS] + w[0..N-2], so the logits at
 * position i predict w[i] and all N tokens are scored - the method of
 * tools/hf_ppl.py, so the f32 line's ppl is comparable with Hugging Face's.
 * Each tier runs the same windows; top-1 agreement and KL(f32 || tier) are
 * against the f32-cache run of the same window. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/opts.h"
#include "cli/textio.h"
#include "colibri.h"

#define EVAL_MAX_TIERS 16

struct tier_stats {
    char name[32];
    int64_t bytes_per_token;
    double nll, kl_sum;
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

/* "tq4/bf16+int8" -> tier "tq4", rope "bf16", integer decode attention
 * mode 1 ("+int16": 2); missing parts are NULL / 0 (the tier's defaults). */
static void split_tier(const char *name, struct colibri_session_opts *so, char *buf, size_t n)
{
    snprintf(buf, n, "%s", name);
    char *plus = strchr(buf, '+');
    so->kv_int8 = 0;
    if (plus) {
        so->kv_int8 = !strcmp(plus + 1, "int8") ? 1 : !strcmp(plus + 1, "int16") ? 2 : -1;
        *plus = 0;
    }
    char *slash = strchr(buf, '/');
    so->kv_rope = slash ? slash + 1 : NULL;
    if (slash) *slash = 0;
    so->kv_tier = buf;
}

/* Logits for every position of one window: one prefill (expanded MLA on the
 * cached rows), or with decode the first token prefilled and the rest decoded
 * one at a time (absorbed MLA through the tier's native consumer). */
static int run_window(colibri_model *m, const char *name, int N, const int32_t *in, int decode, float *logits,
                      int64_t *bytes_per_token, struct colibri_err *err)
{
    char buf[64];
    struct colibri_session_opts so = { .n_ctx = N };
    split_tier(name, &so, buf, sizeof buf);
    colibri_session *s = NULL;
    int rc = colibri_session_new(m, &so, &s, err);
    if (!rc && !decode) rc = colibri_session_prefill(s, in, N, logits, 1, err);
    if (!rc && decode) {
        int V = colibri_model_vocab(m);
        rc = colibri_session_prefill(s, in, 1, logits, 0, err);
        for (int p = 1; p < N && !rc; p++) rc = colibri_session_decode(s, in[p], logits + (int64_t)p * V, err);
    }
    if (!rc) *bytes_per_token = colibri_session_kv_token_bytes(s);
    colibri_session_free(s);
    return rc;
}

int cmd_eval(int argc, char **argv)
{
    const char *dir = "models/colibri-tiny", *text_path = NULL, *tiers_arg = "f32,fp8,int8r,q4_0,tq4,tq3,tq2,polar4";
    int N = 512, max_windows = 0, threads = 0, decode = 0;
    struct colibri_model_opts mo = { 0 };
    const struct opt opts[] = {
        { "model", 'm', OPT_STR, &dir, "model directory with tokenizer.json; default models/colibri-tiny" },
        { "text", 0, OPT_STR, &text_path, "UTF-8 text file to teacher-force (required)" },
        { "kv", 0, OPT_STR, &tiers_arg, "comma-separated KV tiers, each TIER[/ROPE][+int8|+int16] (tq4/bf16: RoPE "
                                        "part in bf16); f32 is always run first as the reference" },
        { "ctx", 'c', OPT_INT, &N, "window length in tokens (default 512)", 2, 1 << 20 },
        { "max-windows", 0, OPT_INT, &max_windows, "evaluate at most this many windows (0: all)", 0, 1 << 30 },
        { "decode", 0, OPT_FLAG, &decode, "decode token by token (absorbed MLA, the tiers' native consumers; "
                                          "entries TIER+int8 / TIER+int16 use integer dot products) instead of "
                                          "one prefill per window" },
        { "threads", 't', OPT_INT, &threads, "OpenMP threads (default: all cores)", 0, 1024 },
        OPTS_WEIGHT_FORMATS(mo),
        OPTS_KV_B_COPY(mo),
    };
    const struct opts_spec spec = {
        "colibri eval [-m DIR] --text FILE [--kv f32,fp8,...] [--ctx N] [--max-windows N]",
        "Teacher-forces FILE in windows of N tokens ([BOS] + N-1 tokens, all N scored, as tools/hf_ppl.py)\n"
        "and prints one line per KV tier:\n"
        "  kv=NAME bytes_per_token=B top1=A kl_mean=K kl_p99=P ppl=X dppl=+Y%\n"
        "B: cache bytes per token over all layers; A: top-1 agreement with the f32-cache run;\n"
        "K, P: mean and 99th percentile of KL(f32 || tier) in nats; X: perplexity; Y: its change vs f32.",
        opts, sizeof opts / sizeof opts[0] };
    char *pos[1];
    int npos, rc = opts_parse(&spec, argc, argv, pos, 0, &npos);
    if (rc) return rc > 0 ? 0 : 2;
    if (!text_path) {
        fprintf(stderr, "colibri eval: --text FILE is required (see --help)\n");
        return 2;
    }

    /* Tier list: f32 first, then the others in the order given. */
    struct tier_stats tiers[EVAL_MAX_TIERS];
    int nt = 1;
    memset(tiers, 0, sizeof tiers);
    strcpy(tiers[0].name, "f32");
    char list[512];
    snprintf(list, sizeof list, "%s", tiers_arg);
    for (char *tk = strtok(list, ","); tk; tk = strtok(NULL, ",")) {
        if (!strcmp(tk, "f32")) continue;
        if (nt == EVAL_MAX_TIERS) {
            fprintf(stderr, "colibri eval: --kv: at most %d tiers\n", EVAL_MAX_TIERS);
            return 2;
        }
        snprintf(tiers[nt++].name, sizeof tiers[0].name, "%s", tk);
    }

    struct colibri_err err = { 0 };
    colibri_model *m = NULL;
    colibri_tokenizer *tok = NULL;
    mo.n_threads = threads;
    if (colibri_model_load(dir, &mo, &m, &err) || colibri_tokenizer_load(dir, &tok, &err)) {
        fprintf(stderr, "colibri eval: %s\n", err.msg);
        colibri_model_free(m);
        return 1;
    }
    /* Validate every tier name before the long run starts. */
    for (int i = 0; i < nt; i++) {
        char buf[64];
        struct colibri_session_opts so = { .n_ctx = 1 };
        split_tier(tiers[i].name, &so, buf, sizeof buf);
        colibri_session *s = NULL;
        if (colibri_session_new(m, &so, &s, &err)) {
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
    fprintf(stderr, "colibri eval: %s: %zu tokens, %lld windows of %d, %d tiers\n", text_path, n_ids,
            (long long)n_win, N, nt);

    int V = colibri_model_vocab(m);
    float *ref = malloc((size_t)N * V * sizeof *ref), *lg = malloc((size_t)N * V * sizeof *lg);
    double *lp = malloc((size_t)V * sizeof *lp), *lq = malloc((size_t)V * sizeof *lq);
    int32_t *in = malloc((size_t)N * sizeof *in);
    for (int i = 0; i < nt; i++) tiers[i].kl = malloc((size_t)(n_win * N) * sizeof(float));
    for (int64_t w = 0; w < n_win && !rc; w++) {
        const int32_t *win = ids + w * N;
        in[0] = bos;
        memcpy(in + 1, win, (size_t)(N - 1) * sizeof *in);
        for (int i = 0; i < nt && !rc; i++) {
            float *out = i == 0 ? ref : lg;
            if ((rc = run_window(m, tiers[i].name, N, in, decode, out, &tiers[i].bytes_per_token, &err))) break;
            struct tier_stats *ts = &tiers[i];
            for (int p = 0; p < N; p++) {
                const float *a = ref + (int64_t)p * V, *b = out + (int64_t)p * V;
                log_softmax(b, V, lq);
                ts->nll -= lq[win[p]];
                double kl = 0;
                if (i > 0) {
                    log_softmax(a, V, lp);
                    for (int v = 0; v < V; v++) kl += exp(lp[v]) * (lp[v] - lq[v]);
                }
                ts->kl[ts->n] = (float)(kl > 0 ? kl : 0);
                ts->kl_sum += kl > 0 ? kl : 0;
                ts->top1 += argmax(a, V) == argmax(b, V);
                ts->n++;
            }
        }
        fprintf(stderr, "\rcolibri eval: window %lld/%lld", (long long)(w + 1), (long long)n_win);
    }
    fprintf(stderr, "\n");
    if (rc) {
        fprintf(stderr, "colibri eval: %s\n", err.msg);
        rc = 1;
    } else {
        double ppl0 = exp(tiers[0].nll / tiers[0].n);
        for (int i = 0; i < nt; i++) {
            struct tier_stats *ts = &tiers[i];
            qsort(ts->kl, (size_t)ts->n, sizeof(float), cmp_float);
            double p99 = ts->kl[(int64_t)(0.99 * (ts->n - 1))];
            double ppl = exp(ts->nll / ts->n);
            printf("kv=%s bytes_per_token=%lld top1=%.4f kl_mean=%.3g kl_p99=%.3g ppl=%.4f dppl=%+.2f%%\n", ts->name,
                   (long long)ts->bytes_per_token, (double)ts->top1 / ts->n, ts->kl_sum / ts->n, p99, ppl,
                   100.0 * (ppl / ppl0 - 1.0));
        }
    }
    for (int i = 0; i < nt; i++) free(tiers[i].kl);
    free(ref); free(lg); free(lp); free(lq); free(in); free(ids);
out:
    colibri_tokenizer_free(tok);
    colibri_model_free(m);
    return rc;
}
