/* The decode on a compute device through model/backend.h (forward_dev.h). */
#include "model/forward_dev.h"

#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "model/moe.h"

/* Present only in binaries linked with the CUDA backend (make CUDA=1). */
extern const struct backend_ops backend_cuda_ops __attribute__((weak));

struct dev_mlp {
    struct backend_wmat *gate, *up, *down;
    int inter;                  /* gate's rows */
};

struct dev_layer {
    float *attn_norm, *mlp_norm, *q_a_norm, *kv_a_norm;
    struct backend_wmat *q_a, *q_b, *q, *kv_a, *kv_b, *o;
    struct dev_mlp dense, shared;
    struct backend_wmat *router;
    struct dev_mlp *experts;    /* [n_routed_experts] on an MoE layer */
};

struct model_dev {
    const struct backend_ops *ops;
    struct backend_dev *d;
    const struct model *m;
    struct dev_layer *L;        /* [num_hidden_layers] */
    float *final_norm, *inv_freq;
    struct backend_wmat *lm_head;
    /* device activations of one token */
    float *x, *h, *y, *q, *q_a, *kv_a, *qabs, *qpe, *lat, *attn, *g, *u, *res, *logits_e, *logits_v;
    int32_t *pos;               /* [H]: every head's position */
    /* host side */
    float *hx, *hlat, *hlog;    /* [hidden], [r + dr], [E] */
    int32_t *hpos;              /* [H] */
};

struct model_dev_kv {
    int n_layers, rows;         /* rows [0, rows) of every layer are on the device */
    struct backend_kv **kv;
};

int model_dev_ops(const char *name, const struct backend_ops **out, struct colibri_err *err)
{
    if (!strcmp(name, "host")) {
        *out = &model_backend_host_ops;
        return 0;
    }
    if (!strcmp(name, "cuda")) {
        if (!&backend_cuda_ops)
            return base_err_set(err, COLIBRI_EUNSUPPORTED, "--device cuda: this build has no CUDA backend "
                                "(make CUDA=1 cuda-forward builds build/cuda/colibri with it)");
        *out = &backend_cuda_ops;
        return 0;
    }
    return base_err_set(err, COLIBRI_EINVAL, "--device: unknown device '%s' (host, cuda)", name);
}

const char *model_dev_name(const struct model_dev *fd) { return fd->ops->dev_name(fd->d); }

static int up_vec(struct model_dev *fd, float **out, const float *src, size_t n, struct colibri_err *err)
{
    if (!(*out = fd->ops->alloc(fd->d, n * sizeof(float), err))) return err->code ? err->code : COLIBRI_ENOMEM;
    return fd->ops->upload(fd->d, *out, src, n * sizeof(float), err);
}

static int up_mat(struct model_dev *fd, struct backend_wmat **out, const struct qtensor *W, struct colibri_err *err)
{
    return W->rows ? fd->ops->wmat_upload(fd->d, W, out, err) : 0;
}

static int up_mlp(struct model_dev *fd, struct dev_mlp *out, const struct mlp_weights *w, struct colibri_err *err)
{
    out->inter = w->gate.rows;
    int rc = up_mat(fd, &out->gate, &w->gate, err);
    if (!rc) rc = up_mat(fd, &out->up, &w->up, err);
    if (!rc) rc = up_mat(fd, &out->down, &w->down, err);
    return rc;
}

static void free_mlp(struct model_dev *fd, struct dev_mlp *w)
{
    fd->ops->wmat_free(fd->d, w->gate);
    fd->ops->wmat_free(fd->d, w->up);
    fd->ops->wmat_free(fd->d, w->down);
}

/* Layer li's weights on the device; the routed experts through the store
 * (resident: acquiring reads nothing). */
static int up_layer(struct model_dev *fd, int li, struct colibri_err *err)
{
    const struct model *m = fd->m;
    const struct model_config *c = &m->cfg;
    const struct layer_weights *lw = &m->layers[li];
    const struct attn_weights *a = &lw->attn;
    struct dev_layer *L = &fd->L[li];
    int hid = c->hidden_size, rc;
    if ((rc = up_vec(fd, &L->attn_norm, lw->attn_norm, (size_t)hid, err)) ||
        (rc = up_vec(fd, &L->mlp_norm, lw->mlp_norm, (size_t)hid, err)) ||
        (rc = up_vec(fd, &L->kv_a_norm, a->kv_a_norm, (size_t)c->kv_lora_rank, err)) ||
        (c->q_lora_rank && (rc = up_vec(fd, &L->q_a_norm, a->q_a_norm, (size_t)c->q_lora_rank, err))) ||
        (rc = up_mat(fd, &L->q_a, &a->q_a, err)) || (rc = up_mat(fd, &L->q_b, &a->q_b, err)) ||
        (rc = up_mat(fd, &L->q, &a->q, err)) || (rc = up_mat(fd, &L->kv_a, &a->kv_a, err)) ||
        (rc = up_mat(fd, &L->kv_b, &a->kv_b, err)) || (rc = up_mat(fd, &L->o, &a->o, err)))
        return rc;
    if (!lw->is_moe) return up_mlp(fd, &L->dense, &lw->dense, err);
    if ((rc = up_mat(fd, &L->router, &lw->moe.router, err))) return rc;
    if (c->n_shared_experts && (rc = up_mlp(fd, &L->shared, &lw->moe.shared, err))) return rc;
    if (!(L->experts = calloc((size_t)c->n_routed_experts, sizeof *L->experts)))
        return base_err_set(err, COLIBRI_ENOMEM, "device expert table");
    for (int e = 0; e < c->n_routed_experts; e++) {
        const struct mlp_weights *ew;
        if ((rc = expert_store_acquire(m->experts, li, e, &ew, err))) return rc;
        rc = up_mlp(fd, &L->experts[e], ew, err);
        expert_store_release(m->experts, li, e);
        if (rc) return rc;
    }
    return 0;
}

void model_dev_free(struct model_dev *fd)
{
    if (!fd) return;
    const struct backend_ops *o = fd->ops;
    struct backend_dev *d = fd->d;
    if (d) {
        const struct model_config *c = &fd->m->cfg;
        for (int li = 0; fd->L && li < c->num_hidden_layers; li++) {
            struct dev_layer *L = &fd->L[li];
            o->free(d, L->attn_norm), o->free(d, L->mlp_norm), o->free(d, L->q_a_norm), o->free(d, L->kv_a_norm);
            o->wmat_free(d, L->q_a), o->wmat_free(d, L->q_b), o->wmat_free(d, L->q), o->wmat_free(d, L->kv_a);
            o->wmat_free(d, L->kv_b), o->wmat_free(d, L->o), o->wmat_free(d, L->router);
            free_mlp(fd, &L->dense);
            free_mlp(fd, &L->shared);
            for (int e = 0; L->experts && e < c->n_routed_experts; e++) free_mlp(fd, &L->experts[e]);
            free(L->experts);
        }
        float *bufs[] = { fd->final_norm, fd->inv_freq, fd->x, fd->h, fd->y, fd->q, fd->q_a, fd->kv_a, fd->qabs,
                          fd->qpe, fd->lat, fd->attn, fd->g, fd->u, fd->res, fd->logits_e, fd->logits_v };
        for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) o->free(d, bufs[i]);
        o->free(d, fd->pos);
        o->wmat_free(d, fd->lm_head);
        o->close(d);
    }
    free(fd->L);
    free(fd->hx), free(fd->hlat), free(fd->hlog), free(fd->hpos);
    free(fd);
}

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
    if (!fd) return base_err_set(err, COLIBRI_ENOMEM, "device decode state");
    fd->ops = ops;
    fd->m = m;
    int rc = ops->open(0, &fd->d, err);
    if (rc) {
        free(fd);
        return rc;
    }
    int H = c->num_attention_heads, dn = c->qk_nope_head_dim, dr = c->qk_rope_head_dim, dv = c->v_head_dim;
    int r = c->kv_lora_rank, hid = c->hidden_size, E = c->n_routed_experts > 0 ? c->n_routed_experts : 1;
    int inter = c->intermediate_size, mi = c->moe_intermediate_size * (c->n_shared_experts > 1 ? c->n_shared_experts : 1);
    if (mi > inter) inter = mi;
    if (c->moe_intermediate_size > inter) inter = c->moe_intermediate_size;
    fd->hx = malloc((size_t)hid * sizeof *fd->hx);
    fd->hlat = malloc((size_t)(r + dr) * sizeof *fd->hlat);
    fd->hlog = malloc((size_t)E * sizeof *fd->hlog);
    fd->hpos = malloc((size_t)H * sizeof *fd->hpos);
    fd->L = calloc((size_t)c->num_hidden_layers, sizeof *fd->L);
    if (!fd->hx || !fd->hlat || !fd->hlog || !fd->hpos || !fd->L) {
        model_dev_free(fd);
        return base_err_set(err, COLIBRI_ENOMEM, "device decode state");
    }
    struct { float **p; size_t n; } act[] = {
        { &fd->x, (size_t)hid }, { &fd->h, (size_t)hid }, { &fd->y, (size_t)hid },
        { &fd->q, (size_t)H * (dn + dr) }, { &fd->q_a, (size_t)(c->q_lora_rank ? c->q_lora_rank : 1) },
        { &fd->kv_a, (size_t)(r + dr) }, { &fd->qabs, (size_t)H * r }, { &fd->qpe, (size_t)H * dr },
        { &fd->lat, (size_t)H * r }, { &fd->attn, (size_t)H * dv }, { &fd->g, (size_t)inter },
        { &fd->u, (size_t)inter }, { &fd->res, (size_t)hid }, { &fd->logits_e, (size_t)E },
        { &fd->logits_v, (size_t)c->vocab_size },
    };
    for (size_t i = 0; i < sizeof act / sizeof *act && !rc; i++)
        if (!(*act[i].p = ops->alloc(fd->d, act[i].n * sizeof(float), err))) rc = COLIBRI_ENOMEM;
    if (!rc && !(fd->pos = ops->alloc(fd->d, (size_t)H * sizeof(int32_t), err))) rc = COLIBRI_ENOMEM;
    if (!rc) rc = up_vec(fd, &fd->final_norm, m->final_norm, (size_t)hid, err);
    if (!rc) rc = up_vec(fd, &fd->inv_freq, c->inv_freq, (size_t)dr / 2, err);
    if (!rc) rc = up_mat(fd, &fd->lm_head, &m->lm_head, err);
    for (int li = 0; li < c->num_hidden_layers && !rc; li++) rc = up_layer(fd, li, err);
    if (rc) {
        model_dev_free(fd);
        return rc;
    }
    *out = fd;
    return 0;
}

int model_dev_kv_new(struct model_dev *fd, const struct fwd_state *st, struct model_dev_kv **out, struct colibri_err *err)
{
    int L = fd->m->cfg.num_hidden_layers, rc = 0;
    if (st->kv_layer0 != 0 || st->kv->n_layers < L)
        return base_err_set(err, COLIBRI_EINVAL, "device kv: the state does not cache the model's layers");
    struct model_dev_kv *dk = calloc(1, sizeof *dk);
    if (dk) dk->kv = calloc((size_t)L, sizeof *dk->kv);
    if (!dk || !dk->kv) {
        free(dk);
        return base_err_set(err, COLIBRI_ENOMEM, "device kv table");
    }
    dk->n_layers = L;
    for (int li = 0; li < L && !rc; li++) rc = fd->ops->kv_upload(fd->d, st->kv, li, st->n_ctx, &dk->kv[li], err);
    if (rc) {
        model_dev_kv_free(fd, dk);
        return rc;
    }
    dk->rows = 0;   /* nothing written yet is trusted: rows are copied as steps need them */
    *out = dk;
    return 0;
}

void model_dev_kv_free(struct model_dev *fd, struct model_dev_kv *dk)
{
    if (!dk) return;
    for (int li = 0; li < dk->n_layers; li++) fd->ops->kv_free(fd->d, dk->kv[li]);
    free(dk->kv);
    free(dk);
}

void model_dev_kv_forget(struct model_dev_kv *dk, int pos)
{
    if (dk && pos < dk->rows) dk->rows = pos < 0 ? 0 : pos;
}

/* out = down(silu(gate x) * up x) (model_mlp_forward). */
static int dev_mlp(struct model_dev *fd, const struct dev_mlp *w, const float *x, float *out, struct colibri_err *err)
{
    const struct backend_ops *o = fd->ops;
    int rc;
    if ((rc = o->matmul(fd->d, w->gate, x, 1, fd->g, err)) || (rc = o->matmul(fd->d, w->up, x, 1, fd->u, err)) ||
        (rc = o->swiglu(fd->d, fd->g, fd->u, (size_t)w->inter, err)))
        return rc;
    return o->matmul(fd->d, w->down, fd->g, 1, out, err);
}

/* Attention of layer li for the normed input fd->h at position pos (rows <
 * pos on the device): the new cache row, then fd->y = o(attention). */
static int dev_attention(struct model_dev *fd, struct model_dev_kv *dk, struct fwd_state *st, int li, int pos,
                         struct colibri_err *err)
{
    const struct backend_ops *o = fd->ops;
    const struct model_config *c = &fd->m->cfg;
    const struct dev_layer *L = &fd->L[li];
    struct backend_dev *d = fd->d;
    int H = c->num_attention_heads, dn = c->qk_nope_head_dim, dr = c->qk_rope_head_dim, dv = c->v_head_dim;
    int r = c->kv_lora_rank, rc;
    if (c->q_lora_rank) {
        if ((rc = o->matmul(d, L->q_a, fd->h, 1, fd->q_a, err)) ||
            (rc = o->rmsnorm(d, fd->q_a, fd->q_a, L->q_a_norm, 1, c->q_lora_rank, c->latent_norm_eps, err)) ||
            (rc = o->matmul(d, L->q_b, fd->q_a, 1, fd->q, err)))
            return rc;
    } else if ((rc = o->matmul(d, L->q, fd->h, 1, fd->q, err))) {
        return rc;
    }
    if ((rc = o->matmul(d, L->kv_a, fd->h, 1, fd->kv_a, err)) ||
        (rc = o->rmsnorm(d, fd->kv_a, fd->kv_a, L->kv_a_norm, 1, r, c->latent_norm_eps, err)) ||
        (rc = o->rope(d, fd->kv_a + r, 1, dr, (size_t)dr, fd->pos, fd->inv_freq, c->rope_attention_factor, err)) ||
        (rc = o->rope(d, fd->q + dn, H, dr, (size_t)(dn + dr), fd->pos, fd->inv_freq, c->rope_attention_factor, err)))
        return rc;
    /* the row is encoded by the CPU's codec into the host cache, then copied */
    if ((rc = o->download(d, fd->hlat, fd->kv_a, (size_t)(r + dr) * sizeof(float), err)) ||
        (rc = kv_cache_write(st->kv, li, pos, fd->hlat, fd->hlat + r, err)) ||
        (rc = o->kv_write(d, dk->kv[li], st->kv, li, pos, 1, err)))
        return rc;
    if ((rc = o->absorb_q(d, L->kv_b, H, dn, dv, dr, fd->q, fd->qabs, fd->qpe, err)) ||
        (rc = o->attend(d, dk->kv[li], pos + 1, H, fd->qabs, fd->qpe, c->softmax_scale, fd->lat, err)) ||
        (rc = o->absorb_out(d, L->kv_b, H, dn, dv, fd->lat, fd->attn, err)))
        return rc;
    return o->matmul(d, L->o, fd->attn, 1, fd->y, err);
}

/* fd->y = MoE(fd->h) of layer li: shared experts, then each routed expert in
 * ascending order, weighted (moe_forward's order). */
static int dev_moe(struct model_dev *fd, int li, struct colibri_err *err)
{
    const struct backend_ops *o = fd->ops;
    const struct model_config *c = &fd->m->cfg;
    const struct dev_layer *L = &fd->L[li];
    int E = c->n_routed_experts, K = c->num_experts_per_tok, hid = c->hidden_size, rc;
    int idx[K];
    float wts[K];
    if ((rc = o->matmul(fd->d, L->router, fd->h, 1, fd->logits_e, err)) ||
        (rc = o->download(fd->d, fd->hlog, fd->logits_e, (size_t)E * sizeof(float), err)))
        return rc;
    moe_route(c, fd->hlog, fd->m->layers[li].moe.score_bias, idx, wts);
    for (int i = 1; i < K; i++)   /* ascending expert order, weights along */
        for (int j = i; j > 0 && idx[j - 1] > idx[j]; j--) {
            int ti = idx[j];
            float tw = wts[j];
            idx[j] = idx[j - 1], wts[j] = wts[j - 1];
            idx[j - 1] = ti, wts[j - 1] = tw;
        }
    if (c->n_shared_experts) {
        rc = dev_mlp(fd, &L->shared, fd->h, fd->y, err);
    } else {
        memset(fd->hx, 0, (size_t)hid * sizeof *fd->hx);
        rc = o->upload(fd->d, fd->y, fd->hx, (size_t)hid * sizeof *fd->hx, err);
    }
    for (int k = 0; k < K && !rc; k++)
        if (!(rc = dev_mlp(fd, &L->experts[idx[k]], fd->h, fd->res, err)))
            rc = o->axpy(fd->d, fd->y, fd->res, wts[k], (size_t)hid, err);
    return rc;
}

int model_dev_decode(struct model_dev *fd, struct model_dev_kv *dk, struct fwd_state *st, int32_t token, int pos,
                   float *logits, struct colibri_err *err)
{
    const struct backend_ops *o = fd->ops;
    const struct model *m = fd->m;
    const struct model_config *c = &m->cfg;
    struct backend_dev *d = fd->d;
    int hid = c->hidden_size, H = c->num_attention_heads, rc = 0;
    if (token < 0 || token >= c->vocab_size)
        return base_err_set(err, COLIBRI_ERANGE, "token id %d is out of range [0, %d)", token, c->vocab_size);
    if (pos < 0 || pos >= st->n_ctx)
        return base_err_set(err, COLIBRI_ERANGE, "1 token after position %d exceeds the context of %d tokens", pos,
                            st->n_ctx);
    /* rows the host cache gained since the device last saw it (a CPU prefill) */
    if (dk->rows > pos) dk->rows = pos;
    for (int li = 0; li < dk->n_layers && dk->rows < pos && !rc; li++)
        rc = o->kv_write(d, dk->kv[li], st->kv, li, dk->rows, pos - dk->rows, err);
    if (rc) return rc;
    dk->rows = pos;
    for (int h = 0; h < H; h++) fd->hpos[h] = pos;
    quant_dequant_rows(&m->embed, token, 1, fd->hx);
    if ((rc = o->upload(d, fd->x, fd->hx, (size_t)hid * sizeof(float), err)) ||
        (rc = o->upload(d, fd->pos, fd->hpos, (size_t)H * sizeof(int32_t), err)))
        return rc;
    for (int li = 0; li < c->num_hidden_layers && !rc; li++) {
        const struct dev_layer *L = &fd->L[li];
        if ((rc = o->rmsnorm(d, fd->h, fd->x, L->attn_norm, 1, hid, c->rms_norm_eps, err)) ||
            (rc = dev_attention(fd, dk, st, li, pos, err)) || (rc = o->axpy(d, fd->x, fd->y, 1.0f, (size_t)hid, err)) ||
            (rc = o->rmsnorm(d, fd->h, fd->x, L->mlp_norm, 1, hid, c->rms_norm_eps, err)))
            break;
        rc = m->layers[li].is_moe ? dev_moe(fd, li, err) : dev_mlp(fd, &L->dense, fd->h, fd->y, err);
        if (!rc) rc = o->axpy(d, fd->x, fd->y, 1.0f, (size_t)hid, err);
    }
    if (rc) return rc;
    dk->rows = pos + 1;
    if (!logits) return 0;
    if ((rc = o->rmsnorm(d, fd->h, fd->x, fd->final_norm, 1, hid, c->rms_norm_eps, err)) ||
        (rc = o->matmul(d, fd->lm_head, fd->h, 1, fd->logits_v, err)))
        return rc;
    return o->download(d, logits, fd->logits_v, (size_t)c->vocab_size * sizeof(float), err);
}
