/* model/synth_glm53.h - the tensors of a synthetic GLM-5.3 checkpoint (colibri
 * synth): every name and shape the glm5_next loaders read (the release's
 * names under model.language_model.*, lm_head.weight at the top), each handed
 * to the writer's callback with the kind of values to draw. Model/convert.c
 * writes them. */
#ifndef COLIBRI_MODEL_SYNTH_GLM53_H
#define COLIBRI_MODEL_SYNTH_GLM53_H

#include "model/config.h"

/* What to draw: a Linear weight (rows x cols), a norm weight (near 1), a bias
 * (near 0), the embedding. */
enum synth_draw { SYNTH_LINEAR, SYNTH_NORM, SYNTH_BIAS, SYNTH_EMBED };

/* fmt: the role's weight format (convert_opts.fmt: embed, dense, experts) or
 * QUANT_F32 for what the loaders keep in f32; cols 0: an f32 vector. */
typedef void (*synth_add_fn)(void *ctx, const char *name, int rows, int cols, int fmt, enum synth_draw draw);

/* Calls add once per tensor of config c; returns how many. */
int model_synth_glm53(const struct model_config *c, int embed_fmt, int dense_fmt, int experts_fmt, synth_add_fn add,
                      void *ctx);

#endif
