/* cli/generate.h - the generation loop shared by `colibri run` and `colibri
 * chat`, on top of include/colibri.h only: reuse the session's cached prefix,
 * prefill the rest of the prompt, then sample, stream and decode token by
 * token until an end-of-generation id, a stop string, the token limit or a
 * full context. Text goes to `out` as it is generated, never half a UTF-8
 * character. */
#ifndef COLIBRI_CLI_GENERATE_H
#define COLIBRI_CLI_GENERATE_H

#include <stdio.h>

#include "colibri.h"

struct gen_stats {
    int n_prompt;               /* prompt tokens */
    int n_prefilled;            /* of which prefilled now (the rest was cached) */
    int n_gen;                  /* tokens generated (decode steps) */
    double t_prefill, t_decode; /* seconds */
    const char *why;            /* "eos", "stop string", "limit", "context full" */
};

/* Generates up to n_predict tokens after prompt[0..n_prompt) in session s.
 * The generated text is written to out and, if text is non-NULL, returned
 * in *text (malloc'd, NUL-terminated; free with free()). A prompt that does
 * not fit the context leaves the session untouched and is COLIBRI_ERANGE with
 * both numbers. */
int gen_run(colibri_session *s, const colibri_tokenizer *tok, colibri_sampler *smp, colibri_stop *stop,
            int vocab, const int32_t *prompt, int n_prompt, int n_predict, FILE *out, char **text,
            struct gen_stats *st, struct colibri_err *err);

/* "prefill N tok (C cached) in X s (Y tok/s), decode N tok in X s (Y tok/s),
 * stopped by WHY" to f. */
void gen_print_stats(FILE *f, const struct gen_stats *st);

#endif
