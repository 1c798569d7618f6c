/* cli/generate.c - printing around the generator (contract in generate.h). */
#include "cli/generate.h"

#include <stdlib.h>
#include <string.h>

void gen_print_text(void *user, const char *text, size_t len)
{
    struct gen_print *p = user;
    fwrite(text, 1, len, p->out);
    fflush(p->out);
    if (!p->keep || p->oom) return;
    if (p->n + len + 1 > p->cap) {
        size_t cap = p->cap ? 2 * p->cap : 256;
        while (cap < p->n + len + 1) cap *= 2;
        char *np = realloc(p->text, cap);
        if (!np) { p->oom = 1; return; }
        p->text = np;
        p->cap = cap;
    }
    memcpy(p->text + p->n, text, len);
    p->n += len;
    p->text[p->n] = 0;
}

void gen_print_stats(FILE *f, const struct colibri_gen_stats *st)
{
    double pre = st->t_prefill > 0 ? st->n_prefilled / st->t_prefill : 0.0;
    double dec = st->t_generate > 0 ? st->n_generated / st->t_generate : 0.0;
    fprintf(f, "prefill %d tok (%d cached) in %.3f s (%.1f tok/s), decode %d tok in %.3f s (%.1f tok/s), "
            "stopped by %s\n", st->n_prefilled, st->n_cached, st->t_prefill, pre, st->n_generated, st->t_generate,
            dec, colibri_gen_end_name(st->end));
}

void gen_print_expert_stats(FILE *f, const colibri_model *m)
{
    struct colibri_expert_stats es;
    colibri_model_expert_stats(m, &es);
    if (!es.misses) return;
    struct colibri_model_info in;
    colibri_model_get_info(m, &in);
    fprintf(f, "experts: %s, %.1f%% of %llu acquisitions hit the cache, %.1f MiB read from disk\n", in.expert_store,
            100.0 * (double)(es.acquires - es.misses) / (double)es.acquires, (unsigned long long)es.acquires,
            es.bytes_read / 1048576.0);
}
