/* The MTP layer's forward (MtpLayer.forward in transformers'
 * modeling_layers.py, with MtpModel._project_to_logits). */
#include "model/mtp.h"

#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "model/linear.h"
#include "model/norm.h"

/* eh_proj's input is sliced to this many rows, so the state holds
 * 2 * hidden floats per row for a few rows rather than for a prefill's. */
#define MTP_SLICE 64

int model_mtp_state_init(struct mtp_state *s, const struct model *m, int n_ctx, enum kv_tier tier, enum kv_rope_prec rope,
                   int int8_mode, const struct compute_ctx *cc, struct colibri_err *err)
{
    const struct model_config *c = &m->cfg;
    memset(s, 0, sizeof *s);
    if (m->n_mtp <= 0)
        return base_err_set(err, COLIBRI_EINVAL, "the model has no MTP layer (num_nextn_predict_layers %d, none loaded)",
                       c->num_nextn_predict_layers);
    if (n_ctx <= 0) return base_err_set(err, COLIBRI_EINVAL, "context size %d must be positive", n_ctx);
    s->fs.n_ctx = n_ctx;
    s->fs.cc = *cc;
    s->fs.kv_layer0 = c->num_hidden_layers;
    s->cap = MTP_SLICE;
    s->hidden = c->hidden_size;
    int rc = kv_cache_new(tier, rope, m->n_mtp, c->kv_lora_rank, c->qk_rope_head_dim, n_ctx, &s->fs.kv, err);
    if (!rc) rc = kv_scratch_new(cc->n_threads, &s->fs.scratch, err);
    if (!rc) {
        kv_scratch_set_int8(s->fs.scratch, int8_mode);
        rc = kv_scratch_reserve(s->fs.scratch, s->fs.kv, c->num_attention_heads, err);
    }
    if (!rc && !(s->in = malloc((size_t)s->cap * 2 * c->hidden_size * sizeof *s->in)))
        rc = base_err_set(err, COLIBRI_ENOMEM, "MTP state: out of memory");
    if (rc) model_mtp_state_free(s);
    return rc;
}

void model_mtp_state_free(struct mtp_state *s)
{
    fwd_state_free(&s->fs);
    free(s->in);
    memset(s, 0, sizeof *s);
}

int64_t model_mtp_state_bytes(const struct mtp_state *s)
{
    return fwd_state_bytes(&s->fs) + (s->in ? (int64_t)s->cap * 2 * s->hidden * (int64_t)sizeof(float) : 0);
}

int model_mtp_forward(const struct model *m, struct mtp_state *s, struct run_bufs *b, int layer, const int32_t *tokens,
                const float *hidden, int n, int row0, enum fwd_mode mode, const struct fwd_out *out,
                struct colibri_err *err)
{
    const struct model_config *c = &m->cfg;
    int hid = c->hidden_size, V = c->vocab_size, li = c->num_hidden_layers + layer, rc = 0;
    if (layer < 0 || layer >= m->n_mtp)
        return base_err_set(err, COLIBRI_EINVAL, "MTP layer %d: the model has %d", layer, m->n_mtp);
    if (n <= 0 || row0 < 0 || row0 + n > s->fs.n_ctx)
        return base_err_set(err, COLIBRI_ERANGE, "MTP rows %d..%d outside the context of %d", row0, row0 + n - 1,
                       s->fs.n_ctx);
    for (int i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= V)
            return base_err_set(err, COLIBRI_ERANGE, "MTP: token id %d at index %d is out of range [0, %d)", tokens[i],
                           i, V);
    const struct mtp_weights *w = &m->mtp[layer];
    int all = out && out->all_logits, cap = s->cap < b->cap ? s->cap : b->cap;
    float *x = b->x, *h = b->h;
    for (int done = 0; done < n && !rc; done += cap) {
        int k = n - done < cap ? n - done : cap;
        for (int i = 0; i < k; i++) {
            float *in = s->in + (int64_t)i * 2 * hid;
            quant_dequant_rows(&m->embed, tokens[done + i], 1, h);
            model_rmsnorm(in, h, w->enorm, 1, hid, c->rms_norm_eps);
            model_rmsnorm(in + hid, hidden + (int64_t)(done + i) * hid, w->hnorm, 1, hid, c->rms_norm_eps);
        }
        if ((rc = model_linear(&w->eh_proj, s->in, k, x, &b->qs, err))) break;
        struct fwd_group g = { &s->fs, 0, k, row0 + done };
        if ((rc = model_layer_forward(m, &g, 1, li, x, k, mode, b, err))) break;
        int last = done + k == n;
        if (!out || (!all && !last)) continue;
        const float *rows = all ? x : x + (int64_t)(k - 1) * hid;
        int nr = all ? k : 1;
        int64_t at = all ? done : 0;
        model_rmsnorm(h, rows, w->head_norm, nr, hid, c->rms_norm_eps);
        if (out->hidden) memcpy(out->hidden + at * hid, h, (size_t)nr * hid * sizeof *h);
        if (out->logits) rc = model_linear(&m->lm_head, h, nr, out->logits + at * V, &b->qs, err);
    }
    return rc;
}
