/* cli/generate.h - what `colibri run` and `colibri chat` print around the
 * library's generator (colibri_gen_run in include/colibri.h): the text as it
 * becomes final, and the closing line with tokens/s and why it stopped. */
#ifndef COLIBRI_CLI_GENERATE_H
#define COLIBRI_CLI_GENERATE_H

#include <stddef.h>
#include <stdio.h>

#include "base/strbuf.h"
#include "colibri.h"

/* The text sink of one generation: every piece is written to out at once
 * (flushed, so a terminal shows it as it comes) and, with keep, also kept in
 * text (the caller frees it). A piece that cannot be kept for lack of memory
 * sets text.failed; the stream is unaffected. */
struct gen_print {
    FILE *out;
    int keep;
    struct strbuf text;
};

/* colibri_gen_run's on_text for a struct gen_print. */
void gen_print_text(void *user, const char *text, size_t len);

/* "prefill N tok (C cached) in X s (Y tok/s), decode N tok in X s (Y tok/s),
 * stopped by WHY" to f. */
void gen_print_stats(FILE *f, const struct colibri_gen_stats *st);

/* With a streamed expert store, what it did over `tokens` tokens forwarded
 * in `seconds` of wall time: "experts: streamed, N acquisitions: H% found in
 * the cache, W% waited for a read in flight, M% missed; X MiB read from disk
 * (Y MiB per token), I/O wait Z% of the time; prefetch R reads, U% used;
 * next-layer prediction recall P%" to f (the last part only when predictions
 * ran). The three shares add up to 100%.
 * Nothing for a resident store. */
void gen_print_expert_stats(FILE *f, const colibri_model *m, uint64_t tokens, double seconds);
/* With a streamed expert store, a table of what each MoE layer read since
 * load: MiB read in all and by why (a miss, the layer's routing, the previous
 * layer's prediction), the unused reads' MiB and share of the layer's bytes
 * (a layer's experts are one size, so bytes follow reads), the prediction's
 * recall and precision and the share of steps that withheld its reads; then
 * the totals. Nothing for a resident store. */
void gen_print_expert_layers(FILE *f, const colibri_model *m);
/* The same from two snapshots (b - a). */
void gen_print_expert_delta(FILE *f, const struct colibri_expert_stats *a, const struct colibri_expert_stats *b,
                            uint64_t tokens, double seconds);

#endif
