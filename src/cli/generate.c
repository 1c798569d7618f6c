/* cli/generate.c - printing around the generator (contract in generate.h). */
#include "cli/generate.h"

#include <stdlib.h>
#include <string.h>

void gen_print_text(void *user, const char *text, size_t len)
{
    struct gen_print *p = user;
    fwrite(text, 1, len, p->out);
    fflush(p->out);
    if (p->keep) base_sb_append(&p->text, text, len);
}

void gen_print_stats(FILE *f, const struct colibri_gen_stats *st)
{
    double pre = st->t_prefill > 0 ? st->n_prefilled / st->t_prefill : 0.0;
    double dec = st->t_generate > 0 ? st->n_generated / st->t_generate : 0.0;
    fprintf(f, "prefill %d tok (%d cached) in %.3f s (%.1f tok/s), decode %d tok in %.3f s (%.1f tok/s), "
            "stopped by %s\n", st->n_prefilled, st->n_cached, st->t_prefill, pre, st->n_generated, st->t_generate,
            dec, colibri_gen_end_name(st->end));
    if (!st->n_forwards_drafted) return;
    /* the first token comes from the prefill's logits */
    fprintf(f, "mtp: %.2f tokens per decode forward (%d forwards, %d with drafts); drafts kept by position:",
            st->n_forwards ? (double)(st->n_generated - 1) / st->n_forwards : 0.0, st->n_forwards,
            st->n_forwards_drafted);
    for (int i = 0; i < COLIBRI_GEN_MAX_DRAFT && st->n_drafted[i]; i++)
        fprintf(f, " %d/%d (%.0f%%)", st->n_accepted[i], st->n_drafted[i], 100.0 * st->n_accepted[i] / st->n_drafted[i]);
    fputc('\n', f);
}

void gen_print_expert_delta(FILE *f, const struct colibri_expert_stats *a, const struct colibri_expert_stats *b,
                            uint64_t tokens, double seconds)
{
    double acq = (double)(b->acquires - a->acquires), reads = (double)(b->bytes_read - a->bytes_read);
    double pre = (double)(b->prefetch_reads - a->prefetch_reads), pred = (double)(b->predicted - a->predicted);
    double wait = (double)(b->io_wait_ns - a->io_wait_ns) * 1e-9;
    double miss = (double)(b->misses - a->misses), waits = (double)(b->waits - a->waits);
    fprintf(f, "experts: streamed, %.0f acquisitions: %.1f%% found in the cache, %.1f%% waited for a read in flight, "
            "%.1f%% missed; %.1f MiB read from disk (%.2f MiB per token), I/O wait %.1f%% of the time; prefetch %.0f "
            "reads, %.1f%% used",
            acq, acq > 0 ? 100.0 * (acq - miss - waits) / acq : 0.0, acq > 0 ? 100.0 * waits / acq : 0.0,
            acq > 0 ? 100.0 * miss / acq : 0.0, reads / 1048576.0,
            tokens ? reads / 1048576.0 / (double)tokens : 0.0, seconds > 0 ? 100.0 * wait / seconds : 0.0, pre,
            pre > 0 ? 100.0 * (double)(b->prefetch_used - a->prefetch_used) / pre : 0.0);
    double n_read = (double)(b->reads - a->reads), unused = pre - (double)(b->prefetch_used - a->prefetch_used);
    if (n_read > 0) fprintf(f, " (unused: %.1f%% of the experts read)", 100.0 * unused / n_read);
    if (pred > 0)
        fprintf(f, "; next-layer prediction recall %.1f%%", 100.0 * (double)(b->predicted_hits - a->predicted_hits) / pred);
    double steps = (double)(b->predict_steps - a->predict_steps);
    if (steps > 0)
        fprintf(f, ", its reads withheld on %.1f%% of layer steps (precision below the gate)",
                100.0 * (double)(b->predict_withheld - a->predict_withheld) / steps);
    fprintf(f, "\n");
}

/* Unused bytes of one why: its bytes times its share of reads not used. */
static double unused_bytes(const struct colibri_expert_layer_stats *l, int w)
{
    return l->reads[w] ? (double)l->bytes[w] * (double)(l->reads[w] - l->used[w]) / (double)l->reads[w] : 0.0;
}

void gen_print_expert_layers(FILE *f, const colibri_model *m)
{
    struct colibri_model_info in;
    colibri_model_get_info(m, &in);
    if (strcmp(in.expert_store, "streamed")) return;
    const double MiB = 1048576.0;
    struct colibri_expert_layer_stats t = { 0 };
    double tu[3] = { 0 };
    fprintf(f, "| layer | MiB read | miss / routed / predicted | unused MiB: routed / predicted | unused %% of bytes | "
               "prediction recall | predicted reads used | withheld steps |\n|---|---|---|---|---|---|---|---|\n");
    for (int li = 0; li <= in.n_layers; li++) {
        struct colibri_expert_layer_stats l;
        double u[3];
        if (li < in.n_layers) {
            colibri_model_expert_layer_stats(m, li, &l);
            if (!l.reads[0] && !l.reads[1] && !l.reads[2] && !l.predict_steps) continue;
            for (int w = 0; w < 3; w++) {
                t.reads[w] += l.reads[w];
                t.bytes[w] += l.bytes[w];
                t.used[w] += l.used[w];
                tu[w] += u[w] = unused_bytes(&l, w);
            }
            t.predicted += l.predicted;
            t.predicted_hits += l.predicted_hits;
            t.predict_steps += l.predict_steps;
            t.predict_withheld += l.predict_withheld;
        } else {   /* the totals: each layer's unused bytes summed */
            l = t;
            memcpy(u, tu, sizeof u);
        }
        double all = (double)(l.bytes[0] + l.bytes[1] + l.bytes[2]);
        char name[16];
        snprintf(name, sizeof name, li < in.n_layers ? "%d" : "all", li);
        fprintf(f, "| %s | %.1f | %.1f / %.1f / %.1f | %.1f / %.1f | %.1f%% | ", name, all / MiB, l.bytes[0] / MiB,
                l.bytes[1] / MiB, l.bytes[2] / MiB, u[1] / MiB, u[2] / MiB,
                all > 0 ? 100.0 * (u[0] + u[1] + u[2]) / all : 0.0);
        if (l.predicted) fprintf(f, "%.1f%% | ", 100.0 * l.predicted_hits / l.predicted);
        else fprintf(f, "- | ");
        if (l.reads[2]) fprintf(f, "%llu of %llu | ", (unsigned long long)l.used[2], (unsigned long long)l.reads[2]);
        else fprintf(f, "0 | ");
        if (l.predict_steps) fprintf(f, "%.1f%% |\n", 100.0 * l.predict_withheld / l.predict_steps);
        else fprintf(f, "- |\n");
    }
}

void gen_print_expert_stats(FILE *f, const colibri_model *m, uint64_t tokens, double seconds)
{
    struct colibri_model_info in;
    colibri_model_get_info(m, &in);
    if (strcmp(in.expert_store, "streamed")) return;
    struct colibri_expert_stats zero = { 0 }, es;
    colibri_model_expert_stats(m, &es);
    gen_print_expert_delta(f, &zero, &es, tokens, seconds);
}
