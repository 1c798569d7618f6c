/* sample/sample.h - choosing the next token from logits, and stop strings.
 *
 * A struct sampler owns everything that changes while it samples: its RNG
 * (xoshiro256**, seeded through splitmix64 from opts.seed), the history of
 * accepted tokens for the penalties, and scratch buffers. There is no global
 * state, so any number of samplers may run side by side (one thread each),
 * and the same seed + options + logits always give the same tokens.
 * The order of operations is documented with struct colibri_sampler_opts in
 * include/colibri.h.
 *
 * struct sample_stop matches stop strings on text that arrives in pieces:
 * it emits everything that can no longer be the start of a stop string and
 * holds back the rest.
 */
#ifndef COLIBRI_SAMPLE_H
#define COLIBRI_SAMPLE_H

#include <stddef.h>
#include <stdint.h>

#include "base/strbuf.h"
#include "colibri.h"

struct sample_rng { uint64_t s[4]; };
void     sample_rng_seed(struct sample_rng *r, uint64_t seed);
uint64_t sample_rng_next(struct sample_rng *r);
double   sample_rng_uniform(struct sample_rng *r);   /* [0, 1) with 53 bits */

struct cand;
struct sampler {
    struct colibri_sampler_opts o;
    int32_t n_vocab;
    struct sample_rng rng;
    int32_t *hist;              /* ring of the last `hist_cap` accepted tokens */
    size_t hist_cap, hist_n, hist_pos;
    struct cand *cand;          /* n_vocab scratch: (logit, id) pairs */
    int32_t *idx;               /* n_vocab scratch: candidate ids */
    uint32_t *count;            /* n_vocab scratch: occurrences in the window */
    struct colibri_logit_bias *bias; /* own copy of o.logit_bias (o.logit_bias points here) */
    struct grammar_state *gst;  /* with o.grammar: where its text is */
    uint8_t *allowed;           /* n_vocab scratch for the grammar's mask */
    float *base;                /* n_vocab scratch: logits after bias and penalties */
    int32_t pending;            /* the last token sampled, not yet accepted (-1: none) */
    int32_t n_grammar;          /* the grammar's vocabulary (ids past it never allowed) */
};

/* Checks the options (COLIBRI_EINVAL names the bad one) and allocates. */
int  sample_init(struct sampler *s, const struct colibri_sampler_opts *o, int32_t n_vocab,
                 struct colibri_err *err);
void sample_free(struct sampler *s);
/* The chosen id; logits (n_vocab floats) are not modified. With a grammar:
 * COLIBRI_EINVAL when it allows no token. */
int32_t sample_next(struct sampler *s, const float *logits);
void sample_accept(struct sampler *s, int32_t token);
void sample_reset(struct sampler *s, uint64_t seed);

struct sample_stop {
    char **stops;
    size_t n_stops, max_len;
    struct strbuf held;         /* text not yet shown */
    struct strbuf out;          /* last output */
    int stopped;
};
int  sample_stop_init(struct sample_stop *st, const char *const *stops, size_t n, struct colibri_err *err);
void sample_stop_free(struct sample_stop *st);
/* See colibri_stop_feed(). */
int  sample_stop_feed(struct sample_stop *st, const char *text, size_t len, const char **out,
                      size_t *out_len, struct colibri_err *err);
void sample_stop_flush(struct sample_stop *st, const char **out, size_t *out_len);

#endif
