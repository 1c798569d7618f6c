/* api/spec.c - a session's side of speculative decoding with the model's MTP
 * layer (model/mtp.h): the MTP cache kept in step with the session's, drafts,
 * and the verify forward. What is kept is decided by the generator
 * (api/generate.c), which owns the sampler.
 *
 * State, for a session at position P (tokens [0, P) cached):
 *  (1) MTP rows [0, rows) are computed from the session's tokens and hidden
 *      states (rows <= P - 1; row t needs the token at t + 1); rows past
 *      `rows` may hold drafts' rows, rewritten when computed again.
 *  (2) hid[0..n_h) are the main model's final-normed hidden states at
 *      positions h_pos.., with h_pos + n_h == P whenever n_h > 0.
 *  (3) a deferred prefill (auto drafting) computes no MTP rows: d_hid[0..n_d)
 *      keeps the final-normed hidden states at positions d_pos.. (the last
 *      SPEC_DEFER_W the prefills gave), and the first draft computes their
 *      rows; rows before d_pos stay stale. Then, while auto decodes without
 *      drafts, each forward without drafts moves the hidden states of (2)
 *      into the window before it overwrites them, so a later probe's draft
 *      sees the last SPEC_DEFER_W positions' rows too, not stale ones.
 * Anything that moves the session without this file (truncation, a KV file,
 * a batched decode) breaks (2); spec_sync() then drops what no longer holds,
 * and rows that cannot be computed are skipped (stale). */
#include <stdlib.h>
#include <string.h>

#include "api/internal.h"
#include "base/err.h"
#include "colibri_dev.h"
#include "model/mtp.h"
#include "model/norm.h"

/* (3): the prompt positions whose MTP rows a deferred prefill keeps for the
 * first draft. It bounds the memory (SPEC_DEFER_W hidden states) and the
 * MTP pass a probe pays; the drafts see this much of the prompt. */
#define SPEC_DEFER_W 32

struct session_spec {
    struct mtp_state ms;
    int rows;                   /* (1) */
    int h_pos, n_h, h_cap;      /* (2); h_cap rows allocated */
    float *hid;                 /* [h_cap][hidden] */
    float *chain;               /* [hidden]: the MTP output a chained draft takes */
    float *dlogits;             /* [vocab] */
    float *pair_h;              /* [COLIBRI_GEN_MAX_DRAFT + 1][hidden]: rows to pair */
    int32_t pair_t[COLIBRI_GEN_MAX_DRAFT + 1];
    int d_pos, n_d;             /* (3) */
    int defer;                  /* (3): the last prefill was deferred (auto drafting) */
    float *d_hid;               /* [SPEC_DEFER_W][hidden], allocated by the first deferred prefill */
};

void colibri_spec_free(struct session_spec *sp)
{
    if (!sp) return;
    model_mtp_state_free(&sp->ms);
    free(sp->hid);
    free(sp->chain);
    free(sp->dlogits);
    free(sp->pair_h);
    free(sp->d_hid);
    free(sp);
}

int64_t colibri_spec_bytes(const struct session_spec *sp)
{
    if (!sp) return 0;
    int64_t hid = sp->ms.hidden;
    return model_mtp_state_bytes(&sp->ms) + (int64_t)sizeof(float) * hid * (sp->h_cap + 1 + COLIBRI_GEN_MAX_DRAFT + 1 +
                                                                    (sp->d_hid ? SPEC_DEFER_W : 0));
}

int colibri_spec_enable(colibri_session *s, struct colibri_err *err)
{
    if (s->spec) return 0;
    const struct model *m = &s->model->m;
    if (s->dev_kv)
        return base_err_set(err, COLIBRI_EUNSUPPORTED, "--mtp: drafting is not wired to the device (--device): "
                            "decode without drafts");
    if (m->n_mtp <= 0 && m->mtp_left_out[0])
        return base_err_set(err, COLIBRI_EUNSUPPORTED, "drafting needs the model's MTP layer: it was left out at "
                            "load: %s", m->mtp_left_out);
    if (m->n_mtp <= 0)
        return base_err_set(err, COLIBRI_EUNSUPPORTED, "drafting needs the model's MTP layer: this model has none%s",
                       m->cfg.num_nextn_predict_layers ? " loaded (config.json declares it, the checkpoint has no "
                                                         "tensors for it)"
                                                       : " (num_nextn_predict_layers is 0)");
    struct session_spec *sp = calloc(1, sizeof *sp);
    if (!sp) return base_err_set(err, COLIBRI_ENOMEM, "MTP state: out of memory");
    int hid = m->cfg.hidden_size, V = m->cfg.vocab_size;
    /* the MTP layer comes after the last main layer: its rows take that layer's layout */
    const struct kv_layer *last = &s->st.kv->layer[s->st.kv->n_layers - 1];
    int rc = model_mtp_state_init(&sp->ms, m, s->st.n_ctx, last->tier, last->rope, KV_INT8_OFF, &s->st.cc, err);
    if (rc) { free(sp); return rc; }
    sp->h_cap = COLIBRI_GEN_MAX_DRAFT + 1;
    sp->hid = malloc((size_t)sp->h_cap * hid * sizeof *sp->hid);
    sp->chain = malloc((size_t)hid * sizeof *sp->chain);
    sp->dlogits = malloc((size_t)V * sizeof *sp->dlogits);
    sp->pair_h = malloc((size_t)(COLIBRI_GEN_MAX_DRAFT + 1) * hid * sizeof *sp->pair_h);
    if (!sp->hid || !sp->chain || !sp->dlogits || !sp->pair_h) {
        colibri_spec_free(sp);
        return base_err_set(err, COLIBRI_ENOMEM, "MTP state: out of memory");
    }
    s->spec = sp;
    return 0;
}

/* Restores (1) and (2) after the session moved without this file. */
static void spec_sync(colibri_session *s)
{
    struct session_spec *sp = s->spec;
    int P = s->pos;
    if (sp->n_h && sp->h_pos + sp->n_h > P) sp->n_h = P > sp->h_pos ? P - sp->h_pos : 0;
    if (sp->n_h && sp->h_pos + sp->n_h != P) sp->n_h = 0;
    if (sp->rows > (P > 0 ? P - 1 : 0)) sp->rows = P > 0 ? P - 1 : 0;
    if (sp->n_d && sp->d_pos + sp->n_d > P) sp->n_d = P > sp->d_pos ? P - sp->d_pos : 0;
}

/* (3): appends the hidden states h[0..c) at positions pos0.. to the window. */
static int defer_keep(struct session_spec *sp, const float *h, int pos0, int c, struct colibri_err *err)
{
    int hid = sp->ms.hidden, W = SPEC_DEFER_W;
    if (!sp->d_hid && !(sp->d_hid = malloc((size_t)W * hid * sizeof *sp->d_hid)))
        return base_err_set(err, COLIBRI_ENOMEM, "MTP state: out of memory for %d hidden states", W);
    if (sp->n_d && sp->d_pos + sp->n_d > pos0) sp->n_d = pos0 > sp->d_pos ? pos0 - sp->d_pos : 0;
    if (sp->n_d && sp->d_pos + sp->n_d != pos0) sp->n_d = 0;   /* not contiguous: the older ones go stale */
    if (c > W) {
        h += (int64_t)(c - W) * hid;
        pos0 += c - W;
        c = W;
    }
    int drop = sp->n_d + c - W;
    if (drop > 0) {
        memmove(sp->d_hid, sp->d_hid + (int64_t)drop * hid, (size_t)(sp->n_d - drop) * hid * sizeof *sp->d_hid);
        sp->d_pos += drop;
        sp->n_d -= drop;
    }
    if (!sp->n_d) sp->d_pos = pos0;
    memcpy(sp->d_hid + (int64_t)sp->n_d * hid, h, (size_t)c * hid * sizeof *h);
    sp->n_d += c;
    return 0;
}

/* (3): before a forward without drafts overwrites (2), under auto. Keeping
 * is best effort: without memory the rows stay stale (lossless either way). */
static void defer_keep_hid(struct session_spec *sp)
{
    if (sp->defer && sp->n_h > 0) (void)defer_keep(sp, sp->hid, sp->h_pos, sp->n_h, NULL);
}

static int grow_hid(struct session_spec *sp, int rows, struct colibri_err *err)
{
    if (rows <= sp->h_cap) return 0;
    float *p = realloc(sp->hid, (size_t)rows * sp->ms.hidden * sizeof *p);
    if (!p) return base_err_set(err, COLIBRI_ENOMEM, "MTP state: out of memory for %d hidden states", rows);
    sp->hid = p;
    sp->h_cap = rows;
    return 0;
}

/* MTP rows t = row0..row0+n-1 from tokens[i] (the token at t + 1) and
 * hidden[i] (h at t); out as in model_mtp_forward. */
static int mtp_rows(colibri_session *s, const int32_t *tokens, const float *hidden, int n, int row0,
                    const struct fwd_out *out, struct colibri_err *err)
{
    return model_mtp_forward(&s->model->m, &s->spec->ms, &s->st.bufs, 0, tokens, hidden, n, row0,
                       n > 1 ? FWD_EXPANDED : FWD_ABSORBED, out, err);
}

int colibri_spec_prefill(colibri_session *s, const int32_t *tokens, int n, float *logits, int defer,
                         struct colibri_err *err)
{
    struct session_spec *sp = s->spec;
    const struct model *m = &s->model->m;
    int hid = m->cfg.hidden_size, rc = 0;
    spec_sync(s);
    sp->defer = defer;
    /* slices of the run buffers' rows: the prefill is the same function
     * however it is split (model/mla.h), and the hidden states of a slice
     * are all this holds */
    int cap = s->st.bufs.cap;
    for (int done = 0; done < n && !rc; done += cap) {
        int k = n - done < cap ? n - done : cap, a = s->pos;
        int have_prev = sp->n_h > 0;   /* h at a - 1, from the last slice or step */
        /* buffer row 0: h at a - 1 (when known), rows 1..k: the slice's */
        if (have_prev) memmove(sp->hid, sp->hid + (int64_t)(sp->n_h - 1) * hid, (size_t)hid * sizeof *sp->hid);
        if ((rc = grow_hid(sp, k + 1, err))) break;
        struct fwd_out out = { .logits = done + k == n ? logits : NULL, .hidden = sp->hid + hid, .all_hidden = 1 };
        if ((rc = model_forward(m, &s->st, tokens + done, k, a, FWD_EXPANDED, &out, err))) break;
        memcpy(s->tokens + a, tokens + done, (size_t)k * sizeof *tokens);
        s->pos += k;
        model_rmsnorm(sp->hid + hid, sp->hid + hid, m->final_norm, k, hid, m->cfg.rms_norm_eps);
        /* pairs (h[t], token[t + 1]) for t = first..a + k - 2 */
        int first = have_prev ? a - 1 : a;
        if (first < sp->rows) first = sp->rows;   /* never: rows <= a - 1 */
        int npair = a + k - 1 - first;
        if (defer) {
            /* buffer row r is position a - 1 + r; the last (P - 1) is also (2)'s */
            if ((rc = defer_keep(sp, sp->hid + (int64_t)(have_prev ? 0 : 1) * hid, have_prev ? a - 1 : a,
                                 have_prev ? k + 1 : k, err)))
                break;
        } else if (npair > 0) {
            const float *h0 = sp->hid + (int64_t)(first - (a - 1)) * hid;   /* buffer row r: position a - 1 + r */
            rc = mtp_rows(s, s->tokens + first + 1, h0, npair, first, NULL, err);
            if (rc) break;
        }
        if (!defer) sp->rows = a + k - 1;
        memmove(sp->hid, sp->hid + (int64_t)k * hid, (size_t)hid * sizeof *sp->hid);
        sp->h_pos = a + k - 1;
        sp->n_h = 1;
    }
    if (rc) sp->n_h = 0;
    return rc;
}

static int argmax_below(const float *x, int n)
{
    int b = 0;
    for (int i = 1; i < n; i++) if (x[i] > x[b]) b = i;
    return b;
}

int colibri_spec_draft(colibri_session *s, int32_t x, int k, int n_text, int32_t *drafts, struct colibri_err *err)
{
    struct session_spec *sp = s->spec;
    const struct model *m = &s->model->m;
    int hid = m->cfg.hidden_size, P = s->pos, rc;
    spec_sync(s);
    if (k > s->st.n_ctx - P - 1) k = s->st.n_ctx - P - 1;   /* the verify feeds positions P..P+k */
    if (k <= 0 || !sp->n_h) return 0;
    if (sp->n_d) {
        /* (3): the deferred rows, up to the pairs below (t = h_pos..) */
        int nr = (sp->d_pos + sp->n_d < sp->h_pos ? sp->d_pos + sp->n_d : sp->h_pos) - sp->d_pos;
        if (nr > 0 && (rc = mtp_rows(s, s->tokens + sp->d_pos + 1, sp->d_hid, nr, sp->d_pos, NULL, err))) return rc;
        sp->n_d = 0;
    }
    /* the pairs not yet computed: t = h_pos..P-1 (earlier ones are stale) */
    int first = sp->h_pos, npair = P - first;
    if (npair > COLIBRI_GEN_MAX_DRAFT + 1) return base_err_set(err, COLIBRI_EINVAL, "MTP: %d rows behind", npair);
    for (int i = 0; i < npair; i++) {
        int t = first + i;
        sp->pair_t[i] = t + 1 < P ? s->tokens[t + 1] : x;
        memcpy(sp->pair_h + (int64_t)i * hid, sp->hid + (int64_t)(t - sp->h_pos) * hid, (size_t)hid * sizeof(float));
    }
    struct fwd_out out = { .logits = sp->dlogits, .hidden = sp->chain };
    if ((rc = mtp_rows(s, sp->pair_t, sp->pair_h, npair, first, &out, err))) return rc;
    sp->rows = P;
    drafts[0] = argmax_below(sp->dlogits, n_text);
    for (int j = 1; j < k; j++) {
        /* row P + j - 1: (the MTP output of the row before, draft j - 1) */
        memcpy(sp->pair_h, sp->chain, (size_t)hid * sizeof(float));
        if ((rc = mtp_rows(s, &drafts[j - 1], sp->pair_h, 1, P + j - 1, &out, err))) return rc;
        drafts[j] = argmax_below(sp->dlogits, n_text);
    }
    return k;
}

int colibri_spec_verify(colibri_session *s, int32_t x, const int32_t *drafts, int k, float *logits, struct colibri_err *err)
{
    struct session_spec *sp = s->spec;
    const struct model *m = &s->model->m;
    int hid = m->cfg.hidden_size, P = s->pos;
    int32_t in[COLIBRI_GEN_MAX_DRAFT + 1];
    if (k < 0 || k > COLIBRI_GEN_MAX_DRAFT) return base_err_set(err, COLIBRI_EINVAL, "MTP: %d drafts", k);
    spec_sync(s);
    if (k == 0) defer_keep_hid(sp);
    in[0] = x;
    memcpy(in + 1, drafts, (size_t)k * sizeof *in);
    /* absorbed, as colibri_session_decode: each row gets the bits a decode
     * of it would (the kernels are batch invariant, MLA's absorbed form runs
     * row by row) */
    struct fwd_out out = { .logits = logits, .hidden = sp->hid, .all_logits = 1, .all_hidden = 1 };
    int rc = model_forward(m, &s->st, in, k + 1, P, FWD_ABSORBED, &out, err);
    if (rc) { sp->n_h = 0; return rc; }
    model_rmsnorm(sp->hid, sp->hid, m->final_norm, k + 1, hid, m->cfg.rms_norm_eps);
    memcpy(s->tokens + P, in, (size_t)(k + 1) * sizeof *in);
    s->pos += k + 1;
    sp->h_pos = P;
    sp->n_h = k + 1;
    return 0;
}

int colibri_session_verify(colibri_session *s, const int32_t *tokens, int n, float *logits, struct colibri_err *err)
{
    struct fwd_out out = { .logits = logits, .all_logits = 1 };
    int rc = model_forward(&s->model->m, &s->st, tokens, n, s->pos, FWD_ABSORBED, &out, err);
    if (rc) return rc;
    memcpy(s->tokens + s->pos, tokens, (size_t)n * sizeof *tokens);
    s->pos += n;
    return 0;
}

void colibri_spec_keep(colibri_session *s, int pos0, int n)
{
    struct session_spec *sp = s->spec;
    if (pos0 + n < s->pos) s->pos = pos0 + n;
    model_dev_kv_forget(s->dev_kv, pos0 + n);
    if (sp && sp->h_pos == pos0 && n <= sp->n_h) sp->n_h = n;
    if (sp) spec_sync(s);
}

int colibri_spec_verify_batch(colibri_session *const *s, const int32_t *const *in, const int *n_in, int n,
                              float *const *logits, int *n_done, struct colibri_err *err)
{
    *n_done = 0;
    if (n <= 0) return 0;
    const struct model *m = &s[0]->model->m;
    int V = m->cfg.vocab_size, hid = m->cfg.hidden_size, rows = 0, ok = 0, rc = 0;
    for (int i = 0; i < n; i++) {
        if (&s[i]->model->m != m)
            return base_err_set(err, COLIBRI_EINVAL, "batch decode: session %d belongs to another model", i);
        if (n_in[i] < 1 || n_in[i] > COLIBRI_GEN_MAX_DRAFT + 1)
            return base_err_set(err, COLIBRI_EINVAL, "batch decode: session %d feeds %d tokens", i, n_in[i]);
    }
    /* the sessions that can advance: ids in range and room for their rows */
    for (; ok < n; ok++) {
        int bad = s[ok]->pos + n_in[ok] > s[ok]->st.n_ctx;
        for (int j = 0; j < n_in[ok]; j++) bad |= in[ok][j] < 0 || in[ok][j] >= V;
        if (bad) break;
        rows += n_in[ok];
    }
    struct fwd_group *grp = malloc((size_t)(ok ? ok : 1) * sizeof *grp);
    int32_t *tok = malloc((size_t)(rows ? rows : 1) * sizeof *tok);
    float *lg = malloc((size_t)(rows ? rows : 1) * V * sizeof *lg);
    float *hs = malloc((size_t)(rows ? rows : 1) * hid * sizeof *hs);
    if (!grp || !tok || !lg || !hs) {
        rc = base_err_set(err, COLIBRI_ENOMEM, "batch decode: out of memory for %d rows", rows);
        goto out;
    }
    for (int i = 0, r = 0; i < ok; i++) {
        if (s[i]->spec) {
            spec_sync(s[i]);
            if (n_in[i] == 1) defer_keep_hid(s[i]->spec);
        }
        grp[i] = (struct fwd_group){ &s[i]->st, r, n_in[i], s[i]->pos };
        memcpy(tok + r, in[i], (size_t)n_in[i] * sizeof *tok);
        r += n_in[i];
    }
    /* absorbed and batch invariant: every row gets the bits a decode of its
     * session alone would (as colibri_spec_verify and colibri_batch_decode) */
    struct fwd_out fo = { .logits = lg, .hidden = hs, .all_logits = 1, .all_hidden = 1 };
    if (ok && (rc = model_forward_groups(m, grp, ok, tok, FWD_ABSORBED, &fo, err))) {
        for (int i = 0; i < ok; i++)
            if (s[i]->spec) s[i]->spec->n_h = 0;
        goto out;
    }
    for (int i = 0, r = 0; i < ok; i++) {
        colibri_session *si = s[i];
        int k = n_in[i], P = si->pos;
        if (logits[i]) memcpy(logits[i], lg + (int64_t)r * V, (size_t)k * V * sizeof *lg);
        struct session_spec *sp = si->spec;
        if (sp && !grow_hid(sp, k, NULL)) {
            model_rmsnorm(sp->hid, hs + (int64_t)r * hid, m->final_norm, k, hid, m->cfg.rms_norm_eps);
            sp->h_pos = P;
            sp->n_h = k;
        } else if (sp) {
            sp->n_h = 0;   /* no room for the hidden states: the next drafts wait (lossless either way) */
        }
        memcpy(si->tokens + P, in[i], (size_t)k * sizeof *in[i]);
        si->pos += k;
        r += k;
    }
    *n_done = ok;
    if (ok < n) {
        rc = s[ok]->pos + n_in[ok] > s[ok]->st.n_ctx
                 ? base_err_set(err, COLIBRI_ERANGE, "the context of %d tokens is full", s[ok]->st.n_ctx)
                 : base_err_set(err, COLIBRI_ERANGE, "a token id is out of range [0, %d)", V);
        base_err_prefix(err, rc, "batch decode, session %d of %d", ok, n);
    }
out:
    free(grp);
    free(tok);
    free(lg);
    free(hs);
    return rc;
}
