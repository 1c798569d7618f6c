/* api/mtp_api.c - the MTP layer's draft logits over a whole sequence, for the
 * oracle check (colibri_dev.h, colibri_mtp_draft_logits). */
#include <stdlib.h>
#include <string.h>

#include "api/internal.h"
#include "base/err.h"
#include "colibri_dev.h"
#include "model/forward.h"
#include "model/mtp.h"
#include "model/norm.h"

int colibri_mtp_draft_logits(colibri_model *cm, const int32_t *tok, int S, int row_by_row, float *out,
                             struct colibri_err *err)
{
    const struct model *m = &cm->m;
    if (m->n_mtp < 1) return base_err_set(err, COLIBRI_EINVAL, "the model has no MTP layer");
    if (S < 2) return base_err_set(err, COLIBRI_EINVAL, "MTP draft logits need at least 2 tokens, got %d", S);
    int V = m->cfg.vocab_size, hid = m->cfg.hidden_size, rc;
    struct compute_ctx cc = base_compute_ctx_make(cm->n_threads);
    float *logits = malloc((size_t)V * sizeof *logits), *hidden = malloc((size_t)S * hid * sizeof *hidden);
    struct fwd_state st;
    struct mtp_state ms;
    int have_st = 0, have_ms = 0;
    if (!logits || !hidden) {
        rc = base_err_set(err, COLIBRI_ENOMEM, "MTP draft logits: out of memory");
        goto out;
    }
    if ((rc = fwd_state_init(&st, m, S, 0, KV_TIER_F32, KV_ROPE_DEFAULT, KV_INT8_OFF, &cc, err))) goto out;
    have_st = 1;
    if ((rc = model_mtp_state_init(&ms, m, S, KV_TIER_F32, KV_ROPE_DEFAULT, KV_INT8_OFF, &cc, err))) goto out;
    have_ms = 1;
    /* the main model's final hidden states (after model.norm), every row */
    struct fwd_out fo = { .logits = logits, .hidden = hidden, .all_hidden = 1 };
    if ((rc = model_forward(m, &st, tok, S, 0, FWD_EXPANDED, &fo, err))) goto out;
    model_rmsnorm(hidden, hidden, m->final_norm, S, hid, m->cfg.rms_norm_eps);
    if (!row_by_row) {
        struct fwd_out mo = { .logits = out, .all_logits = 1 };
        rc = model_mtp_forward(m, &ms, &st.bufs, 0, tok + 1, hidden, S - 1, 0, FWD_EXPANDED, &mo, err);
    } else {
        for (int t = 0; t + 1 < S && !rc; t++) {
            struct fwd_out o1 = { .logits = out + (int64_t)t * V };
            rc = model_mtp_forward(m, &ms, &st.bufs, 0, tok + t + 1, hidden + (int64_t)t * hid, 1, t, FWD_ABSORBED,
                                   &o1, err);
        }
    }
out:
    if (have_ms) model_mtp_state_free(&ms);
    if (have_st) fwd_state_free(&st);
    free(logits);
    free(hidden);
    return rc;
}
