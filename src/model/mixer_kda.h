/* model/mixer_kda.h - GLM-5.3's KDA token mixer as a layer part
 * (model/parts.h: model_mixer_kda), Glm5NextTextLinearAttention: the
 * layer's projections (q/k/v, forget gate f_a/f_b, b, output gate g_a/g_b,
 * o_proj) around the core of model/kda.h.
 *
 * Its cache is a per-session state of fixed size per layer (token_mixer
 * state_new): the convolution's last linear_conv_kernel_dim - 1 inputs
 * (3 HD floats each) and the recurrent state (H x D x D floats), both f32,
 * not growing with the context. A group's rows run in slices of at most
 * KDA_CHUNK rows: a slice of several rows through the chunked form, one row
 * through the recurrent form (as transformers' prefill and decode), so the
 * bits depend on where a feed starts and stops. Such a state does not
 * rewind: it goes back only to a snapshot (model/parts.h snap_*), which
 * holds the whole state (model_kda_snap_bytes), and has no row arrays. Tensor names, the release's (transformers maps them
 * onto its modules): model.layers.N.self_attn.{q_proj,k_proj,v_proj,b_proj,
 * f_a_proj,f_b_proj,g_a_proj,g_b_proj,o_proj}.weight, {q,k,v}_conv1d.weight
 * [HD, 1, K], dt_bias, A_log, o_norm.weight. */
#ifndef COLIBRI_MODEL_MIXER_KDA_H
#define COLIBRI_MODEL_MIXER_KDA_H

#include <stddef.h>
#include <stdint.h>

#include "colibri.h"
#include "model/config.h"
#include "quant/qtensor.h"

struct kda_weights {
    struct qtensor q, k, v;         /* [HD, hidden] */
    struct qtensor fa, fb;          /* [D, hidden], [HD, D] */
    struct qtensor b;               /* [H, hidden] */
    struct qtensor ga, gb;          /* [D, hidden], [HD, D] */
    struct qtensor o;               /* [hidden, HD] */
    float *conv_w;                  /* [3 HD][K]: q, k, v's conv1d weights */
    size_t conv_floats;
    float *dt_bias, *a_log, *norm_w;
};

struct kda_bufs;

void model_kda_weights_free(struct kda_weights *w);
int64_t model_kda_weights_bytes(const struct kda_weights *w);

/* A session's KDA activations for up to min(cap, KDA_CHUNK) rows, the core's
 * heads on n_threads threads (NULL without KDA layers). */
int  model_kda_bufs_new(const struct model_config *c, int cap, int n_threads, struct kda_bufs **out, size_t *bytes);
void model_kda_bufs_free(struct kda_bufs *b);

/* Bytes of one KDA layer's per-session state. */
size_t model_kda_state_bytes(const struct model_config *c);
/* Bytes of one KDA layer's snapshot: its state and a 16-byte header. */
size_t model_kda_snap_bytes(const struct model_config *c);

#endif
