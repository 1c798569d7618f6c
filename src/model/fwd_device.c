/* The forward's executor on a compute device (model/fwd_device.h). */
#include "model/fwd_device.h"

#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "model/fwd_ops.h"

/* A host tensor or vector of the model and its device copy. */
struct dev_entry {
    const void *host;
    void *dev;                  /* struct backend_wmat * or float * */
    int is_mat;
};

struct model_dev {
    const struct backend_ops *ops;
    struct backend_dev *d;
    const struct model *m;
    struct dev_entry *map;      /* sorted by host */
    int n_map, cap_map;
    float *inv_freq;            /* device [dr / 2] */
};

struct model_dev_kv {
    struct model_dev *fd;
    struct fwd_exec exec;       /* the device ops, ctx this */
    struct run_bufs b;          /* activations on the device; routing on the host */
    float *logits;              /* device [max(vocab, E)]: linear_host's product */
    int32_t *dpos;              /* device [H]: every head's position */
    int pos_up;                 /* the position dpos holds (-1: none) */
    float *hx, *hlat, *hzero;   /* host [hidden], [r + dr], [hidden] zeros */
    int32_t *hpos;              /* host [H] */
    int n_layers;
    int *rows;                  /* [n_layers]: rows [0, rows[l]) of layer l are on the device */
    struct backend_kv **kv;     /* [n_layers] */
};

static int cmp_entry(const void *a, const void *b)
{
    const struct dev_entry *x = a, *y = b;
    return x->host < y->host ? -1 : x->host > y->host;
}

static const struct dev_entry *lookup(const struct model_dev *fd, const void *host)
{
    struct dev_entry key = { host, NULL, 0 };
    return bsearch(&key, fd->map, (size_t)fd->n_map, sizeof key, cmp_entry);
}

static int add_entry(struct model_dev *fd, const void *host, void *dev, int is_mat, struct colibri_err *err)
{
    if (fd->n_map == fd->cap_map) {
        int cap = fd->cap_map ? 2 * fd->cap_map : 256;
        struct dev_entry *p = realloc(fd->map, (size_t)cap * sizeof *p);
        if (!p) return base_err_set(err, COLIBRI_ENOMEM, "device weight map of %d entries", cap);
        fd->map = p;
        fd->cap_map = cap;
    }
    fd->map[fd->n_map++] = (struct dev_entry){ host, dev, is_mat };
    return 0;
}

static int up_vec(struct model_dev *fd, const float *src, size_t n, struct colibri_err *err)
{
    float *p = fd->ops->alloc(fd->d, n * sizeof(float), err);
    if (!p) return err->code ? err->code : COLIBRI_ENOMEM;
    int rc = add_entry(fd, src, p, 0, err);
    if (rc) {
        fd->ops->free(fd->d, p);
        return rc;
    }
    return fd->ops->upload(fd->d, p, src, n * sizeof(float), err);
}

static int up_mat(struct model_dev *fd, const struct qtensor *W, struct colibri_err *err)
{
    if (!W->rows) return 0;
    struct backend_wmat *w = NULL;
    int rc = fd->ops->wmat_upload(fd->d, W, &w, err);
    if (!rc && (rc = add_entry(fd, W, w, 1, err))) fd->ops->wmat_free(fd->d, w);
    return rc;
}

static int up_mlp(struct model_dev *fd, const struct mlp_weights *w, struct colibri_err *err)
{
    int rc = up_mat(fd, &w->gate, err);
    if (!rc) rc = up_mat(fd, &w->up, err);
    if (!rc) rc = up_mat(fd, &w->down, err);
    return rc;
}

/* Layer li's weights; the routed experts through the store (resident:
 * acquiring reads nothing, and the slot it returns is where the forward's
 * expert loop finds the same tensors). */
static int up_layer(struct model_dev *fd, int li, struct colibri_err *err)
{
    const struct model *m = fd->m;
    const struct model_config *c = &m->cfg;
    const struct layer_weights *lw = &m->layers[li];
    const struct attn_weights *a = &lw->attn;
    int hid = c->hidden_size, rc;
    if ((rc = up_vec(fd, lw->attn_norm, (size_t)hid, err)) || (rc = up_vec(fd, lw->mlp_norm, (size_t)hid, err)) ||
        (rc = up_vec(fd, a->kv_a_norm, (size_t)c->kv_lora_rank, err)) ||
        (c->q_lora_rank && (rc = up_vec(fd, a->q_a_norm, (size_t)c->q_lora_rank, err))) ||
        (rc = up_mat(fd, &a->q_a, err)) || (rc = up_mat(fd, &a->q_b, err)) || (rc = up_mat(fd, &a->q, err)) ||
        (rc = up_mat(fd, &a->kv_a, err)) || (rc = up_mat(fd, &a->kv_b, err)) || (rc = up_mat(fd, &a->o, err)))
        return rc;
    if (!lw->is_moe) return up_mlp(fd, &lw->dense, err);
    if ((rc = up_mat(fd, &lw->moe.router, err))) return rc;
    if (c->n_shared_experts && (rc = up_mlp(fd, &lw->moe.shared, err))) return rc;
    for (int e = 0; e < c->n_routed_experts; e++) {
        const struct mlp_weights *ew;
        if ((rc = expert_store_acquire(m->experts, li, e, &ew, err))) return rc;
        rc = up_mlp(fd, ew, err);
        expert_store_release(m->experts, li, e);
        if (rc) return rc;
    }
    return 0;
}

void model_dev_free(struct model_dev *fd)
{
    if (!fd) return;
    if (fd->d) {
        for (int i = 0; i < fd->n_map; i++) {
            if (fd->map[i].is_mat) fd->ops->wmat_free(fd->d, fd->map[i].dev);
            else fd->ops->free(fd->d, fd->map[i].dev);
        }
        fd->ops->free(fd->d, fd->inv_freq);
        fd->ops->close(fd->d);
    }
    free(fd->map);
    free(fd);
}

const char *model_dev_name(const struct model_dev *fd) { return fd->ops->dev_name(fd->d); }

int model_dev_new(const struct model *m, const struct backend_ops *ops, struct model_dev **out, struct colibri_err *err)
{
    const struct model_config *c = &m->cfg;
    if (c->dsa_kind != MODEL_DSA_NONE)
        return base_err_set(err, COLIBRI_EUNSUPPORTED, "--device %s: DeepSeek Sparse Attention models are not "
                            "wired to the device yet", ops->name);
    if (c->first_k_dense_replace < c->num_hidden_layers && strcmp(m->experts->ops->name, "resident"))
        return base_err_set(err, COLIBRI_EUNSUPPORTED, "--device %s: the routed experts are %s (the device needs "
                            "them all resident: raise --ram)", ops->name, m->experts->ops->name);
    if (c->rope_half_split || c->llama4_beta != 0)
        return base_err_set(err, COLIBRI_EUNSUPPORTED, "--device %s: %s is not wired to the device yet", ops->name,
                            c->rope_half_split ? "half-split RoPE (rope_interleave false)" : "the Llama 4 query scale");
    if (c->qk_rope_head_dim < 2)
        return base_err_set(err, COLIBRI_EUNSUPPORTED, "--device %s: qk_rope_head_dim %d", ops->name,
                            c->qk_rope_head_dim);
    struct model_dev *fd = calloc(1, sizeof *fd);
    if (!fd) return base_err_set(err, COLIBRI_ENOMEM, "device model state");
    fd->ops = ops;
    fd->m = m;
    int rc = ops->open(0, &fd->d, err);
    if (rc) {
        free(fd);
        return rc;
    }
    size_t nf = (size_t)c->qk_rope_head_dim / 2;
    if (!(fd->inv_freq = ops->alloc(fd->d, nf * sizeof(float), err))) rc = err->code ? err->code : COLIBRI_ENOMEM;
    if (!rc) rc = ops->upload(fd->d, fd->inv_freq, c->inv_freq, nf * sizeof(float), err);
    if (!rc) rc = up_vec(fd, m->final_norm, (size_t)c->hidden_size, err);
    if (!rc) rc = up_mat(fd, &m->lm_head, err);
    for (int li = 0; li < c->num_hidden_layers && !rc; li++) rc = up_layer(fd, li, err);
    if (rc) {
        model_dev_free(fd);
        return rc;
    }
    qsort(fd->map, (size_t)fd->n_map, sizeof *fd->map, cmp_entry);
    *out = fd;
    return 0;
}

/* ---- the operations (model/fwd_ops.h) ---- */

static struct model_dev_kv *sess(const struct fwd_exec *ex) { return ex->ctx; }

static const struct backend_wmat *wmat_of(struct model_dev *fd, const struct qtensor *W, struct colibri_err *err)
{
    const struct dev_entry *e = lookup(fd, W);
    if (!e || !e->is_mat)
        base_err_set(err, COLIBRI_EINVAL, "--device %s: a [%d, %d] weight of the forward is not on the device",
                     fd->ops->name, W->rows, W->cols);
    return e && e->is_mat ? e->dev : NULL;
}

static const float *vec_of(struct model_dev *fd, const float *v, struct colibri_err *err)
{
    const struct dev_entry *e = lookup(fd, v);
    if (!e || e->is_mat)
        base_err_set(err, COLIBRI_EINVAL, "--device %s: a norm vector of the forward is not on the device",
                     fd->ops->name);
    return e && !e->is_mat ? e->dev : NULL;
}

static int dev_linear(const struct fwd_exec *ex, const struct qtensor *W, const float *x, int n, float *y,
                      struct quant_scratch *qs, struct colibri_err *err)
{
    struct model_dev *fd = sess(ex)->fd;
    const struct backend_wmat *w = wmat_of(fd, W, err);
    return w ? fd->ops->matmul(fd->d, w, x, n, y, err) : COLIBRI_EINVAL;
}

static int dev_linear_host(const struct fwd_exec *ex, const struct qtensor *W, const float *x, int n, float *y,
                           struct quant_scratch *qs, struct colibri_err *err)
{
    struct model_dev_kv *s = sess(ex);
    struct model_dev *fd = s->fd;
    const struct model_config *c = &fd->m->cfg;
    int most = c->vocab_size > c->n_routed_experts ? c->vocab_size : c->n_routed_experts;
    if ((int64_t)n * W->rows > most)
        return base_err_set(err, COLIBRI_EINVAL, "--device %s: %d x %d outputs for the host (at most %d)",
                            fd->ops->name, n, W->rows, most);
    int rc = dev_linear(ex, W, x, n, s->logits, qs, err);
    return rc ? rc : fd->ops->download(fd->d, y, s->logits, (size_t)n * W->rows * sizeof(float), err);
}

static int dev_rmsnorm(const struct fwd_exec *ex, float *y, const float *x, const float *w, int n, int d, float eps,
                       struct colibri_err *err)
{
    struct model_dev *fd = sess(ex)->fd;
    const float *dw = vec_of(fd, w, err);
    return dw ? fd->ops->rmsnorm(fd->d, y, x, dw, n, d, eps, err) : COLIBRI_EINVAL;
}

static int dev_add(const struct fwd_exec *ex, float *x, const float *y, int64_t n, struct colibri_err *err)
{
    struct model_dev *fd = sess(ex)->fd;
    return fd->ops->axpy(fd->d, x, y, 1.0f, (size_t)n, err);
}

static int dev_zero(const struct fwd_exec *ex, float *x, int64_t n, struct colibri_err *err)
{
    struct model_dev_kv *s = sess(ex);
    if (n > s->fd->m->cfg.hidden_size)
        return base_err_set(err, COLIBRI_EINVAL, "--device %s: zeroing %lld values (one row at most)",
                            s->fd->ops->name, (long long)n);
    return s->fd->ops->upload(s->fd->d, x, s->hzero, (size_t)n * sizeof(float), err);
}

static int dev_swiglu(const struct fwd_exec *ex, float *g, const float *u, int64_t n, float limit,
                      struct colibri_err *err)
{
    if (limit > 0)
        return base_err_set(err, COLIBRI_EUNSUPPORTED, "the device's SwiGLU has no clipping (swiglu_limit %g)", limit);
    struct model_dev *fd = sess(ex)->fd;
    return fd->ops->swiglu(fd->d, g, u, (size_t)n, err);
}

static int dev_embed(const struct fwd_exec *ex, const struct qtensor *E, int32_t token, float *x,
                     struct colibri_err *err)
{
    struct model_dev_kv *s = sess(ex);
    quant_dequant_rows(E, token, 1, s->hx);
    return s->fd->ops->upload(s->fd->d, x, s->hx, (size_t)E->cols * sizeof(float), err);
}

/* The norm and RoPE on the device; the row encoded by the host cache's codec
 * (kv_cache_write), then the layer's rows the mirror lacks copied up. */
static int dev_mla_row(const struct fwd_exec *ex, const struct model_config *c, const float *kv_a_norm,
                       struct fwd_state *st, int kl, int pos, float *kv_a, float *q, struct colibri_err *err)
{
    struct model_dev_kv *s = sess(ex);
    struct model_dev *fd = s->fd;
    const struct backend_ops *o = fd->ops;
    int H = c->num_attention_heads, dn = c->qk_nope_head_dim, dr = c->qk_rope_head_dim, r = c->kv_lora_rank, rc;
    const float *dnorm = vec_of(fd, kv_a_norm, err);
    if (!dnorm) return COLIBRI_EINVAL;
    if (kl < 0 || kl >= s->n_layers)
        return base_err_set(err, COLIBRI_EINVAL, "--device %s: cache layer %d of %d", o->name, kl, s->n_layers);
    if (s->pos_up != pos) {
        for (int h = 0; h < H; h++) s->hpos[h] = pos;
        if ((rc = o->upload(fd->d, s->dpos, s->hpos, (size_t)H * sizeof(int32_t), err))) return rc;
        s->pos_up = pos;
    }
    if ((rc = o->rmsnorm(fd->d, kv_a, kv_a, dnorm, 1, r, c->latent_norm_eps, err)) ||
        (rc = o->rope(fd->d, kv_a + r, 1, dr, (size_t)dr, s->dpos, fd->inv_freq, c->rope_attention_factor, err)) ||
        (rc = o->rope(fd->d, q + dn, H, dr, (size_t)(dn + dr), s->dpos, fd->inv_freq, c->rope_attention_factor, err)) ||
        (rc = o->download(fd->d, s->hlat, kv_a, (size_t)(r + dr) * sizeof(float), err)) ||
        (rc = kv_cache_write(st->kv, kl, pos, s->hlat, s->hlat + r, err)))
        return rc;
    int from = s->rows[kl] < pos ? s->rows[kl] : pos;
    if ((rc = o->kv_write(fd->d, s->kv[kl], st->kv, kl, from, pos + 1 - from, err))) return rc;
    s->rows[kl] = pos + 1;
    return 0;
}

static int dev_attend_absorbed(const struct fwd_exec *ex, const struct model_config *c, const struct attn_weights *w,
                               struct fwd_state *st, int kl, const float *q, int S, int pos0,
                               const struct mla_sel *sel, float *o, struct run_bufs *b, struct colibri_err *err)
{
    struct model_dev_kv *s = sess(ex);
    struct model_dev *fd = s->fd;
    const struct backend_ops *ops = fd->ops;
    int H = c->num_attention_heads, dn = c->qk_nope_head_dim, dr = c->qk_rope_head_dim, dv = c->v_head_dim, rc;
    if (sel || S != 1)
        return base_err_set(err, COLIBRI_EUNSUPPORTED, "--device %s: attention of %d rows%s", ops->name, S,
                            sel ? " over a DSA selection" : "");
    if (kl < 0 || kl >= s->n_layers || s->rows[kl] < pos0 + 1)
        return base_err_set(err, COLIBRI_EINVAL, "--device %s: cache layer %d has %d rows on the device, %d read",
                            ops->name, kl, kl >= 0 && kl < s->n_layers ? s->rows[kl] : 0, pos0 + 1);
    const struct backend_wmat *kvb = wmat_of(fd, &w->kv_b, err);
    if (!kvb) return COLIBRI_EINVAL;
    if ((rc = ops->absorb_q(fd->d, kvb, H, dn, dv, dr, q, b->abs_q, b->abs_qpe, err)) ||
        (rc = ops->attend(fd->d, s->kv[kl], pos0 + 1, H, b->abs_q, b->abs_qpe, c->softmax_scale, b->abs_lat, err)))
        return rc;
    return ops->absorb_out(fd->d, kvb, H, dn, dv, b->abs_lat, o, err);
}

static int dev_expert_add(const struct fwd_exec *ex, float *out, const int *tok, const float *tw, const float *res,
                          int cnt, int hid, struct colibri_err *err)
{
    struct model_dev *fd = sess(ex)->fd;
    int rc = 0;
    for (int i = 0; i < cnt && !rc; i++)
        rc = fd->ops->axpy(fd->d, out + (int64_t)tok[i] * hid, res + (int64_t)i * hid, tw[i], (size_t)hid, err);
    return rc;
}

static const struct fwd_ops dev_ops = {
    .name = "device",
    .linear = dev_linear,
    .linear_host = dev_linear_host,
    .rmsnorm = dev_rmsnorm,
    .add = dev_add,
    .zero = dev_zero,
    .swiglu = dev_swiglu,
    .embed = dev_embed,
    .mla_row = dev_mla_row,
    .attend_absorbed = dev_attend_absorbed,
    .expert_add = dev_expert_add,
};

/* ---- a session's side ---- */

/* The device buffers of run_bufs that a one-row decode touches, and their sizes. */
#define DEV_BUFS(X, c, H, dn, dr, dv, r, hid, inter)                                                              \
    X(x, hid) X(h, hid) X(y, hid) X(q, (H) * ((dn) + (dr))) X(q_a, (c)->q_lora_rank ? (c)->q_lora_rank : 1)        \
    X(kv_a, (r) + (dr)) X(attn, (H) * (dv)) X(abs_q, (H) * (r)) X(abs_qpe, (H) * (dr)) X(abs_lat, (H) * (r))         \
    X(mlp_g, inter) X(mlp_u, inter) X(moe_in, hid) X(moe_res, hid)

void model_dev_kv_free(struct model_dev *fd, struct model_dev_kv *dk, struct fwd_state *st)
{
    if (!dk) return;
    if (st && st->dev == &dk->exec) st->dev = NULL, st->dev_bufs = NULL;
    const struct backend_ops *o = fd->ops;
    for (int li = 0; dk->kv && li < dk->n_layers; li++) o->kv_free(fd->d, dk->kv[li]);
    struct run_bufs *b = &dk->b;
#define FREE_DEV(f, n) o->free(fd->d, b->f);
    DEV_BUFS(FREE_DEV, c, 0, 0, 0, 0, 0, 0, 0)
#undef FREE_DEV
    o->free(fd->d, dk->logits);
    o->free(fd->d, dk->dpos);
    free(b->moe_logits), free(b->moe_idx), free(b->moe_wts), free(b->moe_tok), free(b->moe_tw);
    free(b->moe_used), free(b->moe_list), free(b->moe_pred), free(b->moe_pred_prec), free(b->moe_pred_read);
    free(dk->hx), free(dk->hlat), free(dk->hzero), free(dk->hpos);
    free(dk->rows);
    free(dk->kv);
    free(dk);
}

int model_dev_kv_new(struct model_dev *fd, struct fwd_state *st, struct model_dev_kv **out, struct colibri_err *err)
{
    const struct model_config *c = &fd->m->cfg;
    const struct backend_ops *o = fd->ops;
    int L = c->num_hidden_layers, rc = 0;
    if (st->kv_layer0 != 0 || st->kv->n_layers < L)
        return base_err_set(err, COLIBRI_EINVAL, "device kv: the state does not cache the model's layers");
    int H = c->num_attention_heads, dn = c->qk_nope_head_dim, dr = c->qk_rope_head_dim, dv = c->v_head_dim;
    int r = c->kv_lora_rank, hid = c->hidden_size, E = c->n_routed_experts > 0 ? c->n_routed_experts : 1;
    int K = c->num_experts_per_tok > 0 ? c->num_experts_per_tok : 1;
    int inter = c->intermediate_size, mi = c->moe_intermediate_size * (c->n_shared_experts > 1 ? c->n_shared_experts : 1);
    if (mi > inter) inter = mi;
    if (c->moe_intermediate_size > inter) inter = c->moe_intermediate_size;
    int most = c->vocab_size > E ? c->vocab_size : E;
    struct model_dev_kv *dk = calloc(1, sizeof *dk);
    if (!dk) return base_err_set(err, COLIBRI_ENOMEM, "device session state");
    dk->fd = fd;
    dk->n_layers = L;
    dk->pos_up = -1;
    struct run_bufs *b = &dk->b;
    b->cap = 1;
    b->n_threads = 1;
    b->moe_pred_layer[0] = b->moe_pred_layer[1] = -1;
    b->moe_logits = malloc((size_t)E * sizeof *b->moe_logits);
    b->moe_idx = malloc((size_t)K * sizeof *b->moe_idx);
    b->moe_wts = malloc((size_t)K * sizeof *b->moe_wts);
    b->moe_tok = malloc(sizeof *b->moe_tok);
    b->moe_tw = malloc(sizeof *b->moe_tw);
    b->moe_used = malloc((size_t)E);
    b->moe_list = malloc((size_t)E * sizeof *b->moe_list);
    b->moe_pred = malloc(2 * (size_t)E);
    b->moe_pred_prec = malloc((size_t)L * K * sizeof *b->moe_pred_prec);
    b->moe_pred_read = malloc((size_t)E * sizeof *b->moe_pred_read);
    dk->hx = malloc((size_t)hid * sizeof *dk->hx);
    dk->hlat = malloc((size_t)(r + dr) * sizeof *dk->hlat);
    dk->hzero = calloc((size_t)hid, sizeof *dk->hzero);
    dk->hpos = malloc((size_t)H * sizeof *dk->hpos);
    dk->rows = calloc((size_t)L, sizeof *dk->rows);
    dk->kv = calloc((size_t)L, sizeof *dk->kv);
    if (!b->moe_logits || !b->moe_idx || !b->moe_wts || !b->moe_tok || !b->moe_tw || !b->moe_used || !b->moe_list ||
        !b->moe_pred || !b->moe_pred_prec || !b->moe_pred_read || !dk->hx || !dk->hlat || !dk->hzero || !dk->hpos || !dk->rows || !dk->kv) {
        model_dev_kv_free(fd, dk, NULL);
        return base_err_set(err, COLIBRI_ENOMEM, "device session state");
    }
    for (int l = 0; l < L * K; l++) b->moe_pred_prec[l] = 1.0f;
#define ALLOC_DEV(f, n) \
    if (!rc && !(b->f = o->alloc(fd->d, (size_t)(n) * sizeof(float), err))) rc = err->code ? err->code : COLIBRI_ENOMEM;
    DEV_BUFS(ALLOC_DEV, c, H, dn, dr, dv, r, hid, inter)
#undef ALLOC_DEV
    if (!rc && !(dk->logits = o->alloc(fd->d, (size_t)most * sizeof(float), err))) rc = COLIBRI_ENOMEM;
    if (!rc && !(dk->dpos = o->alloc(fd->d, (size_t)H * sizeof(int32_t), err))) rc = COLIBRI_ENOMEM;
    for (int li = 0; li < L && !rc; li++) rc = o->kv_upload(fd->d, st->kv, li, st->n_ctx, &dk->kv[li], err);
    if (rc) {
        model_dev_kv_free(fd, dk, NULL);
        return rc;
    }
    /* nothing written yet is trusted: rows are copied as decodes need them */
    dk->exec = (struct fwd_exec){ &dev_ops, dk };
    st->dev = &dk->exec;
    st->dev_bufs = b;
    *out = dk;
    return 0;
}

void model_dev_kv_forget(struct model_dev_kv *dk, int pos)
{
    if (!dk) return;
    if (pos < 0) pos = 0;
    for (int li = 0; li < dk->n_layers; li++)
        if (dk->rows[li] > pos) dk->rows[li] = pos;
}
