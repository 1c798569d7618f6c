/* bench/grammar.c - what constrained decoding costs: decode tokens/s on a
 * model with no grammar, with json_object, with a JSON schema and (--gbnf) a
 * grammar from a file (bench/tool_call.gbnf: what tool_choice "required"
 * compiles for two tools), through the public API. Each round runs every mode once (interleaved, so machine noise
 * hits them alike) from the same prompt: prefill, then up to --n tokens with
 * the given sampler, stopping early at an end token (each mode's token count
 * is reported; rates are per token). Prints per mode the median and range of
 * decode tokens/s over the rounds, the median time per token spent in the
 * sampler (mask included), that time as a share of the median time per
 * token (the figure that says what the grammar costs, being far less noisy
 * than the ratio of rates on a shared machine), and the ratio of decode
 * rates to the unconstrained run.
 *
 *   make build/bench/grammar
 *   build/bench/grammar [-m DIR] [--n 128] [--rounds 7] [--threads T] [--temp 0.8] [--gbnf FILE]
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "colibri.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmpd(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static const char *SCHEMA =
    "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"},\"age\":{\"type\":\"integer\"},"
    "\"tags\":{\"type\":\"array\",\"items\":{\"type\":\"string\"}},\"ok\":{\"type\":\"boolean\"}},"
    "\"required\":[\"name\",\"age\",\"tags\",\"ok\"]}";

int main(int argc, char **argv)
{
    const char *dir = "models/colibri-tiny";
    int n_gen = 128, rounds = 7, threads = 0;
    float temp = 0.8f;
    const char *gbnf_path = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-m") && i + 1 < argc) dir = argv[++i];
        else if (!strcmp(argv[i], "--n") && i + 1 < argc) n_gen = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) rounds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--temp") && i + 1 < argc) temp = (float)atof(argv[++i]);
        else if (!strcmp(argv[i], "--gbnf") && i + 1 < argc) gbnf_path = argv[++i];
        else {
            fprintf(stderr, "usage: %s [-m DIR] [--n N] [--rounds R] [--threads T] [--temp T] [--gbnf FILE]\n", argv[0]);
            return 2;
        }
    }
    struct colibri_err err = { 0 };
    colibri_tokenizer *tok = NULL;
    colibri_model *m = NULL;
    colibri_session *s = NULL;
    struct colibri_model_opts mo = { .n_threads = threads };
    if (colibri_tokenizer_load(dir, &tok, &err) || colibri_model_load(dir, &mo, &m, &err) ||
        colibri_session_new(m, NULL, &s, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    colibri_grammar *gobj = NULL, *gsch = NULL, *gfile = NULL;
    if (colibri_grammar_from_json_schema(tok, NULL, &gobj, &err) ||
        colibri_grammar_from_json_schema(tok, SCHEMA, &gsch, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    if (gbnf_path) {
        FILE *f = fopen(gbnf_path, "rb");
        static char buf[1 << 20];
        size_t n = f ? fread(buf, 1, sizeof buf, f) : 0;
        if (f) fclose(f);
        if (!n || colibri_grammar_new(tok, buf, n, &gfile, &err)) {
            fprintf(stderr, "%s: %s\n", gbnf_path, n ? err.msg : "cannot read");
            return 1;
        }
    }
    int n_modes = gfile ? 4 : 3;
    struct colibri_chat_msg msg = { "user", "Describe a bird as a JSON object." };
    char *text = NULL;
    size_t len = 0;
    int32_t *prompt = NULL;
    size_t n_prompt = 0;
    if (colibri_chat_render(tok, &msg, 1, 1, &text, &len, &err) ||
        colibri_tokenizer_encode(tok, text, len, 0, &prompt, &n_prompt, NULL, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    int vocab = colibri_model_vocab(m), n_text = colibri_tokenizer_n_vocab(tok);
    float *logits = malloc((size_t)vocab * sizeof *logits);
    const char *names[4] = { "none", "json_object", "json_schema", gbnf_path };
    const colibri_grammar *gs[4] = { NULL, gobj, gsch, gfile };
    double *rate = calloc((size_t)(4 * rounds), sizeof *rate), *samp = calloc((size_t)(4 * rounds), sizeof *samp);
    int ntok[4] = { 0 };
    for (int r = 0; r < rounds; r++)
        for (int k = 0; k < n_modes; k++) {
            struct colibri_sampler_opts so = colibri_sampler_default_opts();
            so.temperature = temp;
            so.seed = (uint64_t)r + 1;
            so.grammar = gs[k];
            colibri_sampler *smp = NULL;
            if (colibri_sampler_new(&so, vocab, &smp, &err) || colibri_session_truncate(s, 0, &err) ||
                colibri_session_prefill(s, prompt, (int)n_prompt, logits, 0, &err)) {
                fprintf(stderr, "%s\n", err.msg);
                return 1;
            }
            double t0 = now(), ts = 0;
            int i;
            for (i = 0; i < n_gen; i++) {
                for (int v = n_text; v < vocab; v++) logits[v] = -INFINITY;
                double a = now();
                int32_t t = colibri_sampler_sample(smp, logits, &err);
                ts += now() - a;
                if (t < 0) { fprintf(stderr, "%s: %s\n", names[k], err.msg); return 1; }
                colibri_sampler_accept(smp, t);
                if (colibri_tokenizer_is_eog(tok, t)) break;
                if (colibri_session_decode(s, t, logits, &err)) { fprintf(stderr, "%s\n", err.msg); return 1; }
            }
            int n = i > 0 ? i : 1;
            rate[k * rounds + r] = n / (now() - t0);
            samp[k * rounds + r] = ts / n;
            if (r == 0) ntok[k] = i;
            colibri_sampler_free(smp);
        }
    printf("model %s, prompt %zu tokens, up to %d generated, temperature %g, %d rounds\n\n", dir, n_prompt, n_gen,
           (double)temp, rounds);
    printf("| grammar | tokens (round 1) | decode tok/s median [min, max] | sampler us/token | "
           "sampler share of a token | rate vs none |\n");
    printf("|---|---|---|---|---|---|\n");
    double base = 0;
    for (int k = 0; k < n_modes; k++) {
        qsort(rate + k * rounds, (size_t)rounds, sizeof *rate, cmpd);
        qsort(samp + k * rounds, (size_t)rounds, sizeof *samp, cmpd);
        double med = rate[k * rounds + rounds / 2];
        if (k == 0) base = med;
        double su = samp[k * rounds + rounds / 2];
        printf("| %s | %d | %.0f [%.0f, %.0f] | %.1f | %.1f%% | %.3f |\n", names[k], ntok[k], med, rate[k * rounds],
               rate[k * rounds + rounds - 1], su * 1e6, 100.0 * su * med, med / base);
    }
    free(rate); free(samp); free(logits); free(prompt); free(text);
    colibri_grammar_free(gobj); colibri_grammar_free(gsch); colibri_grammar_free(gfile);
    colibri_session_free(s); colibri_model_free(m); colibri_tokenizer_free(tok);
    return 0;
}
