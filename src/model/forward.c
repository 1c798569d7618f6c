/* The forward pass: embed -> per layer [RMSNorm -> MLA -> RMSNorm -> MLP/MoE]
 * -> norm -> lm_head. Each step names the Hugging Face code it mirrors
 * (transformers models/deepseek_v3/modeling_deepseek_v3.py). */
#include "model/forward.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/util.h"

/* The latent norms are built without the config's eps in HF (model-spec Q5). */
#define LATENT_NORM_EPS 1e-6f

int fwd_state_init(struct fwd_state *st, const struct model *m, int n_ctx, enum kv_tier tier,
                   enum kv_rope_prec rope, int int8_mode, struct colibri_err *err)
{
    const struct model_config *c = &m->cfg;
    memset(st, 0, sizeof *st);
    if (n_ctx <= 0) return err_set(err, COLIBRI_EINVAL, "context size %d must be positive", n_ctx);
    st->n_ctx = n_ctx;
    int rc = kv_cache_new(tier, rope, c->num_hidden_layers, c->kv_lora_rank, c->qk_rope_head_dim, n_ctx, &st->kv,
                          err);
    if (!rc) rc = kv_scratch_new(0, &st->scratch, err);
    if (!rc) kv_scratch_set_int8(st->scratch, int8_mode);
    if (rc) fwd_state_free(st);
    return rc;
}

void fwd_state_free(struct fwd_state *st)
{
    kv_cache_free(st->kv);
    kv_scratch_free(st->scratch);
    memset(st, 0, sizeof *st);
}

/* Cached rows of one layer as f32 arrays with strides (in floats). The f32
 * tier is read in place; other tiers are decoded into owned buffers. */
struct kv_rows {
    const float *lat, *rope;
    int64_t lat_stride, rope_stride;
    float *owned;
};

static int is_plain_f32(const struct kv_cache *kv)
{
    return kv->tier == KV_TIER_F32 && kv->rope == KV_ROPE_F32;
}

static int rows_get(const struct kv_cache *kv, int layer, int T, struct kv_rows *out, struct colibri_err *err)
{
    memset(out, 0, sizeof *out);
    if (is_plain_f32(kv)) {
        const float *base = (const float *)kv_cache_row(kv, layer, 0);
        out->lat = base;
        out->rope = base + kv->r;
        out->lat_stride = out->rope_stride = (int64_t)(kv->row_bytes / sizeof(float));
        return 0;
    }
    out->owned = malloc((size_t)T * (kv->r + kv->dr) * sizeof(float));
    if (!out->owned) return err_set(err, COLIBRI_ENOMEM, "out of memory decoding %d cached rows", T);
    float *lat = out->owned, *rope = out->owned + (int64_t)T * kv->r;
    int rc = kv_cache_read(kv, layer, 0, T, lat, rope, err);
    out->lat = lat;
    out->rope = rope;
    out->lat_stride = kv->r;
    out->rope_stride = kv->dr;
    return rc;
}

/* Interleaved RoPE (the checkpoint's pairing, model-spec §2.1): pairs
 * (x[2i], x[2i+1]) rotated by pos * inv_freq[i], cos and sin scaled by the yarn
 * attention factor. */
static void rope_apply(float *x, int dr, int pos, const struct model_config *c)
{
    for (int i = 0; i < dr / 2; i++) {
        float angle = (float)pos * c->inv_freq[i];
        float cs = (float)cos((double)angle) * c->rope_attention_factor;
        float sn = (float)sin((double)angle) * c->rope_attention_factor;
        float x0 = x[2 * i], x1 = x[2 * i + 1];
        x[2 * i] = x0 * cs - x1 * sn;
        x[2 * i + 1] = x1 * cs + x0 * sn;
    }
}

static void softmax_inplace(float *x, int n)
{
    float mx = x[0];
    for (int i = 1; i < n; i++) mx = x[i] > mx ? x[i] : mx;
    float sum = 0.0f;
    for (int i = 0; i < n; i++) { x[i] = expf(x[i] - mx); sum += x[i]; }
    float inv = 1.0f / sum;
    for (int i = 0; i < n; i++) x[i] *= inv;
}

static float silu(float x) { return x / (1.0f + expf(-x)); }

/* SwiGLU MLP over n rows: out = down(silu(gate(x)) * up(x)). */
static void mlp_forward(const struct mlp_weights *w, const float *x, int n, float *out)
{
    int inter = w->gate.rows;
    float *g = malloc((size_t)n * inter * sizeof *g), *u = malloc((size_t)n * inter * sizeof *u);
    linear(&w->gate, x, n, g);
    linear(&w->up, x, n, u);
    for (int64_t i = 0; i < (int64_t)n * inter; i++) g[i] = silu(g[i]) * u[i];
    linear(&w->down, g, n, out);
    free(g);
    free(u);
}

/* DeepseekV3TopkRouter + route_tokens_to_experts: sigmoid scores, bias for
 * selection only, top-2-sum group scores, -inf outside the kept groups, top-k,
 * weights from the unbiased scores normalized with +1e-20, times the routed
 * scaling factor. */
static void moe_route(const struct model_config *c, const float *logits, const float *bias, int *idx, float *wts)
{
    int E = c->n_routed_experts, G = c->n_group, per = E / G, K = c->num_experts_per_tok;
    float s[E], b[E], gscore[G];
    int gkeep[G];
    for (int e = 0; e < E; e++) {
        s[e] = 1.0f / (1.0f + expf(-logits[e]));
        b[e] = s[e] + bias[e];
    }
    for (int g = 0; g < G; g++) {
        float m1 = -INFINITY, m2 = -INFINITY;
        for (int e = g * per; e < (g + 1) * per; e++) {
            if (b[e] > m1) { m2 = m1; m1 = b[e]; }
            else if (b[e] > m2) m2 = b[e];
        }
        gscore[g] = m1 + m2;
        gkeep[g] = 0;
    }
    for (int k = 0; k < c->topk_group; k++) {
        int best = -1;
        for (int g = 0; g < G; g++)
            if (!gkeep[g] && (best < 0 || gscore[g] > gscore[best])) best = g;
        gkeep[best] = 1;
    }
    for (int e = 0; e < E; e++)
        if (!gkeep[e / per]) b[e] = -INFINITY;
    float sum = 0.0f;
    for (int k = 0; k < K; k++) {
        int best = -1;
        for (int e = 0; e < E; e++)
            if (b[e] != -INFINITY && (best < 0 || b[e] > b[best])) best = e;
        idx[k] = best;
        b[best] = -INFINITY;
        wts[k] = s[best];
        sum += s[best];
    }
    for (int k = 0; k < K; k++) {
        if (c->norm_topk_prob) wts[k] /= (sum + 1e-20f);
        wts[k] *= c->routed_scaling_factor;
    }
}

/* DeepseekV3MoE over n rows: routed experts (tokens grouped per expert so each
 * expert's weights are read once per batch) plus the shared experts. */
static void moe_forward(const struct model_config *c, const struct moe_weights *w, const float *x, int n,
                        float *out)
{
    int E = c->n_routed_experts, K = c->num_experts_per_tok, hid = c->hidden_size;
    float *logits = malloc((size_t)n * E * sizeof *logits);
    int *idx = malloc((size_t)n * K * sizeof *idx);
    float *wts = malloc((size_t)n * K * sizeof *wts);
    linear(&w->router, x, n, logits);
    for (int t = 0; t < n; t++) moe_route(c, logits + (int64_t)t * E, w->score_bias, idx + t * K, wts + t * K);

    if (c->n_shared_experts) mlp_forward(&w->shared, x, n, out);
    else memset(out, 0, (size_t)n * hid * sizeof *out);

    int *tok = malloc((size_t)n * K * sizeof *tok);
    float *tw = malloc((size_t)n * K * sizeof *tw);
    float *in = malloc((size_t)n * K * hid * sizeof *in), *res = malloc((size_t)n * K * hid * sizeof *res);
    for (int e = 0; e < E; e++) {
        int cnt = 0;
        for (int t = 0; t < n; t++)
            for (int k = 0; k < K; k++)
                if (idx[t * K + k] == e) {
                    tok[cnt] = t;
                    tw[cnt] = wts[t * K + k];
                    memcpy(in + (int64_t)cnt * hid, x + (int64_t)t * hid, (size_t)hid * sizeof *in);
                    cnt++;
                }
        if (!cnt) continue;
        mlp_forward(&w->experts[e], in, cnt, res);
        for (int j = 0; j < cnt; j++)
            for (int i = 0; i < hid; i++) out[(int64_t)tok[j] * hid + i] += tw[j] * res[(int64_t)j * hid + i];
    }
    free(tok); free(tw); free(in); free(res);
    free(logits); free(idx); free(wts);
}

/* Expanded MLA (DeepseekV3Attention.forward, eager): K and V are rebuilt for
 * every cached position from the latent, k_nope | v = kv_b(c). */
static void attend_expanded(const struct model_config *c, const struct attn_weights *w, const struct kv_rows *rows,
                            const float *q, int S, int pos0, float *o)
{
    int H = c->num_attention_heads, dn = c->qk_nope_head_dim, dr = c->qk_rope_head_dim, dv = c->v_head_dim;
    int r = c->kv_lora_rank, dqk = dn + dr, dkv = dn + dv, T = pos0 + S;
    float *kv = malloc((size_t)T * H * dkv * sizeof *kv);
    float *lat = malloc((size_t)T * r * sizeof *lat);
    for (int t = 0; t < T; t++) memcpy(lat + (int64_t)t * r, rows->lat + t * rows->lat_stride, (size_t)r * sizeof *lat);
    linear(&w->kv_b, lat, T, kv);
    free(lat);
#pragma omp parallel
    {
        float *p = malloc((size_t)T * sizeof *p);
#pragma omp for schedule(dynamic, 1)
        for (int sh = 0; sh < S * H; sh++) {
            int s = sh / H, h = sh % H, tn = pos0 + s + 1;
            const float *qn = q + (int64_t)s * H * dqk + h * dqk, *qp = qn + dn;
            for (int t = 0; t < tn; t++)
                p[t] = (dot_f32(qn, kv + (int64_t)t * H * dkv + h * dkv, dn) +
                        dot_f32(qp, rows->rope + t * rows->rope_stride, dr)) * c->softmax_scale;
            softmax_inplace(p, tn);
            float *oh = o + (int64_t)s * H * dv + h * dv;
            memset(oh, 0, (size_t)dv * sizeof *oh);
            for (int t = 0; t < tn; t++) {
                const float *v = kv + (int64_t)t * H * dkv + h * dkv + dn;
                for (int k = 0; k < dv; k++) oh[k] += p[t] * v[k];
            }
        }
        free(p);
    }
    free(kv);
}

/* Absorbed MLA (DeepSeek inference/model.py, attn_impl="absorb"):
 * q_abs = W_UK[h]ᵀ q_nope, scores against the latent, o = W_UV[h] Σ p c. */
static void attend_absorbed(const struct model_config *c, const struct attn_weights *w, const struct kv_rows *rows,
                            const float *q, int S, int pos0, float *o)
{
    int H = c->num_attention_heads, dn = c->qk_nope_head_dim, dr = c->qk_rope_head_dim, dv = c->v_head_dim;
    int r = c->kv_lora_rank, dqk = dn + dr, dkv = dn + dv;
#pragma omp parallel
    {
        float *p = malloc((size_t)(pos0 + S) * sizeof *p);
        float *qa = malloc((size_t)r * sizeof *qa), *ol = malloc((size_t)r * sizeof *ol);
#pragma omp for schedule(static)
        for (int sh = 0; sh < S * H; sh++) {
            int s = sh / H, h = sh % H, tn = pos0 + s + 1;
            const float *qn = q + (int64_t)s * H * dqk + h * dqk, *qp = qn + dn;
            const float *wuk = w->kv_b_f32 + (int64_t)h * dkv * r, *wuv = wuk + (int64_t)dn * r;
            memset(qa, 0, (size_t)r * sizeof *qa);
            for (int i = 0; i < dn; i++)
                for (int j = 0; j < r; j++) qa[j] += qn[i] * wuk[(int64_t)i * r + j];
            for (int t = 0; t < tn; t++)
                p[t] = (dot_f32(qa, rows->lat + t * rows->lat_stride, r) +
                        dot_f32(qp, rows->rope + t * rows->rope_stride, dr)) * c->softmax_scale;
            softmax_inplace(p, tn);
            memset(ol, 0, (size_t)r * sizeof *ol);
            for (int t = 0; t < tn; t++) {
                const float *ct = rows->lat + t * rows->lat_stride;
                for (int j = 0; j < r; j++) ol[j] += p[t] * ct[j];
            }
            float *oh = o + (int64_t)s * H * dv + h * dv;
            for (int k = 0; k < dv; k++) oh[k] = dot_f32(wuv + (int64_t)k * r, ol, r);
        }
        free(p); free(qa); free(ol);
    }
}

/* Absorbed MLA through kv_attend's native consumer (quantized tiers): the
 * absorbed queries of all heads go in, Σ p c per head comes out, and W_UV is
 * applied once per head. */
static int attend_absorbed_native(const struct model_config *c, const struct attn_weights *w, struct fwd_state *st,
                                  int li, const float *q, int S, int pos0, float *o, struct colibri_err *err)
{
    int H = c->num_attention_heads, dn = c->qk_nope_head_dim, dr = c->qk_rope_head_dim, dv = c->v_head_dim;
    int r = c->kv_lora_rank, dqk = dn + dr, dkv = dn + dv, rc = 0;
    const float *wkv = w->kv_b_f32;
    float *qa = malloc((size_t)H * r * sizeof *qa), *qp = malloc((size_t)H * dr * sizeof *qp);
    float *ol = malloc((size_t)H * r * sizeof *ol);
    if (!qa || !qp || !ol) {
        rc = err_set(err, COLIBRI_ENOMEM, "out of memory in decode attention");
        goto out;
    }
    for (int s = 0; s < S && !rc; s++) {
        for (int h = 0; h < H; h++) {
            const float *qn = q + (int64_t)s * H * dqk + h * dqk, *wuk = wkv + (int64_t)h * dkv * r;
            float *qah = qa + (int64_t)h * r;
            memset(qah, 0, (size_t)r * sizeof *qah);
            for (int i = 0; i < dn; i++)
                for (int j = 0; j < r; j++) qah[j] += qn[i] * wuk[(int64_t)i * r + j];
            memcpy(qp + (int64_t)h * dr, qn + dn, (size_t)dr * sizeof *qp);
        }
        rc = kv_attend(st->kv, li, pos0 + s + 1, H, qa, qp, c->softmax_scale, ol, st->scratch, err);
        for (int h = 0; h < H && !rc; h++) {
            const float *wuv = wkv + ((int64_t)h * dkv + dn) * r;
            float *oh = o + (int64_t)s * H * dv + h * dv;
            for (int k = 0; k < dv; k++) oh[k] = dot_f32(wuv + (int64_t)k * r, ol + (int64_t)h * r, r);
        }
    }
out:
    free(qa); free(qp); free(ol);
    return rc;
}

/* One MLA block over the n rows of normed input h, which belong to groups:
 * group g is rows [row0, row0 + n) of session state st at positions pos0...
 * Projections run over all rows at once (weights read once per batch); the
 * cache writes and the attention run per group. */
static int mla_forward(const struct model *m, const struct fwd_group *grp, int n_grp, int li, const float *h, int n,
                       enum fwd_mode mode, float *out, struct colibri_err *err)
{
    const struct model_config *c = &m->cfg;
    const struct attn_weights *w = &m->layers[li].attn;
    int H = c->num_attention_heads, dn = c->qk_nope_head_dim, dr = c->qk_rope_head_dim, dv = c->v_head_dim;
    int r = c->kv_lora_rank, dqk = dn + dr, rc = 0;
    float *q = malloc((size_t)n * H * dqk * sizeof *q);
    if (c->q_lora_rank) {
        float *qa = malloc((size_t)n * c->q_lora_rank * sizeof *qa);
        linear(&w->q_a, h, n, qa);
        rmsnorm(qa, qa, w->q_a_norm, n, c->q_lora_rank, LATENT_NORM_EPS);
        linear(&w->q_b, qa, n, q);
        free(qa);
    } else {
        linear(&w->q, h, n, q);
    }
    float *a = malloc((size_t)n * (r + dr) * sizeof *a);
    linear(&w->kv_a, h, n, a);
    float *o = malloc((size_t)n * H * dv * sizeof *o);
    for (int g = 0; g < n_grp && !rc; g++) {
        struct fwd_state *st = grp[g].st;
        int row0 = grp[g].row0, S = grp[g].n, pos0 = grp[g].pos0;
        float *qg = q + (int64_t)row0 * H * dqk, *og = o + (int64_t)row0 * H * dv;
        for (int s = 0; s < S && !rc; s++) {
            int pos = pos0 + s;
            float *lat = a + (int64_t)(row0 + s) * (r + dr), *rope = lat + r;
            rmsnorm(lat, lat, w->kv_a_norm, 1, r, LATENT_NORM_EPS);
            rope_apply(rope, dr, pos, c);
            rc = kv_cache_write(st->kv, li, pos, lat, rope, err);
            for (int hh = 0; hh < H; hh++) rope_apply(qg + (int64_t)s * H * dqk + hh * dqk + dn, dr, pos, c);
        }
        if (rc) break;
        if (mode == FWD_ABSORBED && !is_plain_f32(st->kv)) {
            rc = attend_absorbed_native(c, w, st, li, qg, S, pos0, og, err);
        } else {
            struct kv_rows rows;
            rc = rows_get(st->kv, li, pos0 + S, &rows, err);
            if (!rc && mode == FWD_ABSORBED) attend_absorbed(c, w, &rows, qg, S, pos0, og);
            else if (!rc) attend_expanded(c, w, &rows, qg, S, pos0, og);
            free(rows.owned);
        }
    }
    free(a);
    if (!rc) linear(&w->o, o, n, out);
    free(o);
    free(q);
    return rc;
}

/* Checks a group's positions and token ids before anything is cached. */
static int check_group(const struct model *m, const struct fwd_group *g, const int32_t *tokens,
                       struct colibri_err *err)
{
    int V = m->cfg.vocab_size;
    if (g->n <= 0) return err_set(err, COLIBRI_EINVAL, "no tokens to process");
    if (g->pos0 < 0 || g->pos0 + g->n > g->st->n_ctx)
        return err_set(err, COLIBRI_ERANGE, "%d tokens after position %d exceed the context of %d tokens", g->n,
                       g->pos0, g->st->n_ctx);
    for (int s = 0; s < g->n; s++) {
        int32_t t = tokens[g->row0 + s];
        if (t < 0 || t >= V)
            return err_set(err, COLIBRI_ERANGE, "token id %d at index %d is out of range [0, %d)", t, s, V);
    }
    return 0;
}

int model_forward_groups(const struct model *m, const struct fwd_group *grp, int n_grp, const int32_t *tokens,
                         enum fwd_mode mode, float *logits, int all_logits, struct colibri_err *err)
{
    const struct model_config *c = &m->cfg;
    int hid = c->hidden_size, n = 0, rc = 0;
    for (int g = 0; g < n_grp; g++) {
        if (grp[g].row0 != n) return err_set(err, COLIBRI_EINVAL, "forward groups must tile the rows in order");
        if ((rc = check_group(m, &grp[g], tokens, err))) return rc;
        n += grp[g].n;
    }
    if (n == 0) return err_set(err, COLIBRI_EINVAL, "no tokens to process");
    float *x = malloc((size_t)n * hid * sizeof *x), *h = malloc((size_t)n * hid * sizeof *h);
    float *y = malloc((size_t)n * hid * sizeof *y);
    if (!x || !h || !y) {
        free(x); free(h); free(y);
        return err_set(err, COLIBRI_ENOMEM, "out of memory for a batch of %d tokens", n);
    }
    for (int s = 0; s < n; s++) quant_dequant_rows(&m->embed, tokens[s], 1, x + (int64_t)s * hid);

    for (int li = 0; li < c->num_hidden_layers; li++) {
        const struct layer_weights *lw = &m->layers[li];
        rmsnorm(h, x, lw->attn_norm, n, hid, c->rms_norm_eps);
        if ((rc = mla_forward(m, grp, n_grp, li, h, n, mode, y, err))) break;
        for (int64_t i = 0; i < (int64_t)n * hid; i++) x[i] += y[i];
        rmsnorm(h, x, lw->mlp_norm, n, hid, c->rms_norm_eps);
        if (lw->is_moe) moe_forward(c, &lw->moe, h, n, y);
        else mlp_forward(&lw->dense, h, n, y);
        for (int64_t i = 0; i < (int64_t)n * hid; i++) x[i] += y[i];
    }
    if (logits && !rc) {
        if (all_logits) {
            rmsnorm(h, x, m->final_norm, n, hid, c->rms_norm_eps);
            linear(&m->lm_head, h, n, logits);
        } else {   /* the last row of each group */
            for (int g = 0; g < n_grp; g++)
                memcpy(y + (int64_t)g * hid, x + (int64_t)(grp[g].row0 + grp[g].n - 1) * hid, (size_t)hid * sizeof *y);
            rmsnorm(h, y, m->final_norm, n_grp, hid, c->rms_norm_eps);
            linear(&m->lm_head, h, n_grp, logits);
        }
    }
    free(x); free(h); free(y);
    return rc;
}

int model_forward(const struct model *m, struct fwd_state *st, const int32_t *tokens, int S, int pos0,
                  enum fwd_mode mode, float *logits, int all_logits, struct colibri_err *err)
{
    struct fwd_group g = { st, 0, S, pos0 };
    return model_forward_groups(m, &g, 1, tokens, mode, logits, all_logits, err);
}
