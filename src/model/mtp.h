/* model/mtp.h - drafting tokens with a model's own multi-token-prediction
 * layer (DeepSeek-V3's num_nextn_predict_layers; transformers' MtpLayer and
 * MtpModel in modeling_layers.py, which generate(use_mtp=True) drafts with).
 *
 * The draft for the token at position t+2 takes the main model's final
 * hidden state at t (after model.norm) and the token at t+1:
 *   x   = eh_proj(cat(enorm(embed(token[t+1])), hnorm(h[t])))   embedding first
 *   x   = the MTP decoder block (model.layers[L], MLA + MoE) at position t+1
 *   out = shared_head.norm(x);   logits = lm_head(out)            (the main lm_head)
 * Drafting further ahead with the one layer chains it: `out` of row t is the
 * h of row t+1, as MtpModel passes one MTP layer's output to the next.
 *
 * Cache: the MTP layer keeps its own KV rows (struct mtp_state), one per pair
 * (h[t], token[t+1]), at row t. HF rotates that pair at position t+1 and its
 * query at t+1 sees the pairs at 1..t+1; here row t is rotated at t and sees
 * rows 0..t, as every main layer's row does. RoPE scores depend only on the
 * distance between query and key, so the attention is the same function
 * (the oracle test, tests/unit/test_mtp.c, checks the logits against HF's).
 * Rows past what the caller has verified are simply rewritten later: the
 * cache keeps rows by position and the caller says how many are valid. */
#ifndef COLIBRI_MODEL_MTP_H
#define COLIBRI_MODEL_MTP_H

#include "model/forward.h"

struct mtp_state {
    struct fwd_state fs;        /* kv: the n_mtp MTP layers; kv_layer0 = num_hidden_layers; no run buffers */
    int cap;                    /* rows per MTP forward slice */
    int hidden;
    float *in;                  /* [cap][2 hidden]: eh_proj's input */
};

/* A state for a model with MTP layers (m->n_mtp > 0; EINVAL naming the model
 * otherwise), its cache in the given tier, for n_ctx rows. 0 or a negative
 * COLIBRI_E*. Free with model_mtp_state_free(). */
int  model_mtp_state_init(struct mtp_state *s, const struct model *m, int n_ctx, enum kv_tier tier, enum kv_rope_prec rope,
                    int int8_mode, const struct compute_ctx *cc, struct colibri_err *err);
void model_mtp_state_free(struct mtp_state *s);
int64_t model_mtp_state_bytes(const struct mtp_state *s);

/* MTP layer `layer` (0..n_mtp-1) over the pairs at rows row0..row0+n-1:
 * tokens[i] is token[t+1] and hidden[i] (hidden_size floats) is h[t] for
 * t = row0 + i. b: run buffers to compute in (a session's: nothing else runs
 * meanwhile). out: logits (vocab floats) of the last row, or of every row
 * with out->all_logits; hidden: `out` (after shared_head.norm) of the same
 * rows; either may be NULL. 0 or a negative COLIBRI_E*. */
int model_mtp_forward(const struct model *m, struct mtp_state *s, struct run_bufs *b, int layer, const int32_t *tokens,
                const float *hidden, int n, int row0, enum fwd_mode mode, const struct fwd_out *out,
                struct colibri_err *err);

#endif
