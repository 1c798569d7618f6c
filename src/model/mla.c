#include "model/mla.h"

#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/par.h"
#include "model/indexer.h"
#include "model/linear.h"
#include "model/loader.h"
#include "model/norm.h"
#include "model/rope.h"
#include "quant/format.h"

int mla_prefill_absorbed(const struct model_config *c, int S, int pos0)
{
    if (pos0 == 0) return 0;
    /* multiply-adds per head: the expanded form rebuilds k_nope | v for all T
     * rows and scores/sums over dn + dr + dv; the absorbed form absorbs W_UK
     * and W_UV per token and scores/sums over r + dr + r */
    double T = (double)pos0 + S, r = c->kv_lora_rank, dn = c->qk_nope_head_dim, dr = c->qk_rope_head_dim,
           dv = c->v_head_dim;
    double expanded = T * r * (dn + dv) + S * T * (dn + dr + dv);
    double absorbed = S * r * (dn + dv) + S * T * (2 * r + dr);
    return absorbed < expanded;
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

/* Query rows per task of the expanded attention (attend_expanded). */
#define MLA_QROWS 16
/* Keys prefetched this many positions ahead in the expanded attention. */
#ifndef MLA_KEY_AHEAD
#define MLA_KEY_AHEAD 4
#endif

/* A task's probability rows are T + 16 floats apart: at T a multiple of
 * 1024 the rows of a block fell 4 KiB apart, on one L1 set. */
static int64_t exp_p_stride(int T) { return (int64_t)T + 16; }

/* A thread's share of exp_p: its task's probability rows, then a copy of
 * the task's query rows (MLA_QROWS x dqk, contiguous). */
static size_t exp_thread_floats(int T, int dqk)
{
    return (size_t)MLA_QROWS * (size_t)exp_p_stride(T) + (size_t)MLA_QROWS * dqk;
}

/* Expanded MLA over the group's rows [0, pos0 + S): K and V are rebuilt for
 * every cached position from the latent as the cache holds it. */
static int attend_expanded(const struct model_config *c, const struct attn_weights *w, struct fwd_state *st,
                           int li, const float *q, int S, int pos0, const struct mla_sel *sel, float *o,
                           struct run_bufs *b, struct colibri_err *err)
{
    int H = c->num_attention_heads, dn = c->qk_nope_head_dim, dr = c->qk_rope_head_dim, dv = c->v_head_dim;
    int r = c->kv_lora_rank, dqk = dn + dr, dkv = dn + dv, T = pos0 + S, nt = b->n_threads, rc;
    const struct kv_cache *kv = st->kv;
    if ((rc = run_bufs_grow(b, &b->exp_kv, &b->exp_kv_cap, (size_t)T * H * dkv, err)) ||
        (rc = run_bufs_grow(b, &b->exp_p, &b->exp_p_cap, (size_t)nt * exp_thread_floats(T, dqk), err)))
        return rc;
    const float *lat, *rope;
    int64_t rope_stride;
    const struct kv_layer *L = &kv->layer[li];
    if (L->tier == KV_TIER_F32 && L->rope == KV_ROPE_F32) {
        /* read in place; the latents are gathered for the kv_b product */
        const float *base = (const float *)kv_cache_row(kv, li, 0);
        int64_t stride = (int64_t)(L->row_bytes / sizeof(float));
        if ((rc = run_bufs_grow(b, &b->exp_lat, &b->exp_lat_cap, (size_t)T * r, err))) return rc;
        for (int t = 0; t < T; t++) memcpy(b->exp_lat + (int64_t)t * r, base + t * stride, (size_t)r * sizeof(float));
        lat = b->exp_lat;
        rope = base + r;
        rope_stride = stride;
    } else {
        if ((rc = run_bufs_grow(b, &b->exp_rows, &b->exp_rows_cap, (size_t)T * (r + dr), err))) return rc;
        float *l = b->exp_rows, *p = b->exp_rows + (int64_t)T * r;
        if ((rc = kv_cache_read(kv, li, 0, T, l, p, err))) return rc;
        lat = l;
        rope = p;
        rope_stride = dr;
    }
    float *kvx = b->exp_kv;
    if (quant_fmt_traits(w->kv_b.fmt)->int8_act) {
        /* the absorbed decode multiplies the latent in f32 by kv_b's f32
         * values; rounding the latent to int8 here, as the int8 kernels
         * would, makes prefill a different function (bench/prefill-decode.md) */
        const float *f = w->kv_b_f32;
        size_t nf = (size_t)w->kv_b.rows * w->kv_b.cols;
        if (!f) {
            if ((rc = run_bufs_grow(b, &b->exp_kvb, &b->exp_kvb_cap, nf, err))) return rc;
            quant_dequant_rows(&w->kv_b, 0, w->kv_b.rows, b->exp_kvb);
            f = b->exp_kvb;
        }
        struct qtensor wf;
        if ((rc = quant_qtensor_wrap(QUANT_F32, w->kv_b.rows, w->kv_b.cols, f, nf * sizeof(float), NULL, 0, &wf, err)))
            return rc;
        if ((rc = model_linear(&wf, lat, T, kvx, &b->qs, err))) return rc;
    } else if ((rc = model_linear(&w->kv_b, lat, T, kvx, &b->qs, err))) {
        return rc;
    }
    /* A task is one head and up to MLA_QROWS consecutive query rows: each
     * key and value row is read once for the block (from L1) rather than
     * once per query row, and the head's rows stay in L2 across its tasks
     * (at 512 tokens, per-row tasks in row-major order re-read every
     * head's K and V from L3 for each query: 44% of a V2-Lite prefill).
     * Every score, softmax and output is computed in the same sequence as
     * one row alone, so the bits do not depend on the blocking. */
    const int nblk = (S + MLA_QROWS - 1) / MLA_QROWS;
#pragma omp parallel num_threads(nt)
    {
        float *pbase = b->exp_p + (int64_t)omp_get_thread_num() * (int64_t)exp_thread_floats(T, dqk);
        float *qloc = pbase + (int64_t)MLA_QROWS * exp_p_stride(T);
#pragma omp for schedule(dynamic, 1)
        for (int task = 0; task < H * nblk; task++) {
            int h = task / nblk, s0 = task % nblk * MLA_QROWS;
            int ns = S - s0 < MLA_QROWS ? S - s0 : MLA_QROWS;
            float *p[MLA_QROWS];
            int tn[MLA_QROWS], tmax = 0;
            for (int i = 0; i < ns; i++) {
                p[i] = pbase + (int64_t)i * exp_p_stride(T);
                /* DSA: only the selected positions (all <= the row's own) */
                tn[i] = sel ? sel->n[s0 + i] : pos0 + s0 + i + 1;
                tmax = tn[i] > tmax ? tn[i] : tmax;
            }
            if (sel) {
                /* each row has its own positions: one row at a time */
                for (int i = 0; i < ns; i++) {
                    const int32_t *ts = sel->pos + (int64_t)(s0 + i) * sel->stride;
                    const float *qn = q + (int64_t)(s0 + i) * H * dqk + h * dqk, *qp = qn + dn;
                    for (int j = 0; j < tn[i]; j++) {
                        int t = ts[j];
                        p[i][j] = (model_dot_f32(qn, kvx + (int64_t)t * H * dkv + h * dkv, dn) +
                                   model_dot_f32(qp, rope + t * rope_stride, dr)) * c->softmax_scale;
                    }
                    softmax_inplace(p[i], tn[i]);
                    float *oh = o + (int64_t)(s0 + i) * H * dv + h * dv;
                    memset(oh, 0, (size_t)dv * sizeof *oh);
                    for (int j = 0; j < tn[i]; j++) {
                        const float *v = kvx + (int64_t)ts[j] * H * dkv + h * dkv + dn;
                        float pt = p[i][j];
#pragma omp simd
                        for (int k = 0; k < dv; k++) oh[k] += pt * v[k];
                    }
                }
                continue;
            }
            /* causal: row i sees positions [0, tn[i]), tn rising with i.
             * The block's query rows are copied side by side: in place they
             * are H * dqk floats apart, a multiple of 4 KiB for DeepSeek's
             * shapes, so all 16 fell on one L1 set and evicted each other
             * on every key. */
            const float *qn[MLA_QROWS], *qr[MLA_QROWS];
            for (int i = 0; i < ns; i++) {
                float *ql = qloc + (int64_t)i * dqk;
                memcpy(ql, q + (int64_t)(s0 + i) * H * dqk + h * dqk, (size_t)dqk * sizeof *ql);
                qn[i] = ql;
                qr[i] = ql + dn;
            }
            int i0 = 0;     /* the first row that sees position t */
            for (int t = 0; t < tmax; t++) {
                const float *kn = kvx + (int64_t)t * H * dkv + h * dkv, *kr = rope + t * rope_stride;
                /* a head's key rows are H * dkv floats apart, a stride the
                 * hardware prefetchers do not follow: fetch the key
                 * MLA_KEY_AHEAD positions on (the loads of each key waited
                 * on the last-level cache: 28% of a 2048-token prefill) */
                if (t + MLA_KEY_AHEAD < tmax) {
                    const char *pn = (const char *)(kn + (int64_t)MLA_KEY_AHEAD * H * dkv);
                    const char *pr = (const char *)(kr + (int64_t)MLA_KEY_AHEAD * rope_stride);
                    for (int l = 0; l < dn * (int)sizeof(float); l += 64) __builtin_prefetch(pn + l);
                    for (int l = 0; l < dr * (int)sizeof(float); l += 64) __builtin_prefetch(pr + l);
                }
                float dnope[MLA_QROWS], drope[MLA_QROWS];
                while (tn[i0] <= t) i0++;
                model_dot_f32_multi(qn + i0, ns - i0, kn, dn, dnope + i0);
                model_dot_f32_multi(qr + i0, ns - i0, kr, dr, drope + i0);
                for (int i = i0; i < ns; i++) p[i][t] = (dnope[i] + drope[i]) * c->softmax_scale;
            }
            float *oh[MLA_QROWS];
            for (int i = 0; i < ns; i++) {
                softmax_inplace(p[i], tn[i]);
                oh[i] = o + (int64_t)(s0 + i) * H * dv + h * dv;
            }
            model_weighted_sum_multi((const float *const *)p, tn, ns, kvx + h * dkv + dn, (int64_t)H * dkv, dv, oh);
        }
    }
    return 0;
}

/* Row `row` of kv_b in f32 (one row of a head's W_UK or W_UV): the tensor
 * itself when f32, the load-time copy when there is one, else dequantized
 * into buf (r floats, in L1 while it is used). */
static const float *kv_b_row(const struct attn_weights *w, int row, float *buf)
{
    int64_t off = (int64_t)row * w->kv_b.cols;
    if (w->kv_b.fmt == QUANT_F32) return (const float *)w->kv_b.data + off;
    if (w->kv_b_f32) return w->kv_b_f32 + off;
    quant_dequant_rows(&w->kv_b, row, 1, buf);
    return buf;
}

/* Head h's absorbed query: q_nope (qn, dn values) through its W_UK into qah
 * (r values), the RoPE part copied to qph; rowbuf holds r floats. */
static void absorb_query(const struct attn_weights *w, const float *qn, int h, int dn, int dr, int dkv, int r,
                         float *qah, float *qph, float *rowbuf)
{
    memset(qah, 0, (size_t)r * sizeof *qah);
    /* lanes over j: each qah[j] keeps its sequence of multiplies and
     * adds (the scalar loop, which GCC left unvectorized at -O2, was
     * 9% of a V2-Lite decode) */
    for (int i = 0; i < dn; i++) {
        const float *wuk = kv_b_row(w, h * dkv + i, rowbuf);
#pragma omp simd
        for (int j = 0; j < r; j++) qah[j] += qn[i] * wuk[j];
    }
    memcpy(qph, qn + dn, (size_t)dr * sizeof *qph);
}

/* Absorbed MLA (DeepSeek inference/model.py, attn_impl="absorb") through the
 * attention door: the absorbed queries of all heads go in, Σ p c per head
 * comes out, W_UV is applied per head. One token at a time. */
int model_mla_attend_absorbed(const struct model_config *c, const struct attn_weights *w, struct fwd_state *st,
                              int li, const float *q, int S, int pos0, const struct mla_sel *sel, float *o,
                              struct run_bufs *b, struct colibri_err *err)
{
    int H = c->num_attention_heads, dn = c->qk_nope_head_dim, dr = c->qk_rope_head_dim, dv = c->v_head_dim;
    int r = c->kv_lora_rank, dqk = dn + dr, dkv = dn + dv, rc = 0, nt = b->n_threads;
    float *qa = b->abs_q, *qp = b->abs_qpe, *ol = b->abs_lat;
    for (int s = 0; s < S && !rc; s++) {
        /* a region of one thread would allocate its team (base/par.h) */
        BASE_PAR_FOR_N(nt, for (int h = 0; h < H; h++)
            absorb_query(w, q + (int64_t)s * H * dqk + h * dqk, h, dn, dr, dkv, r, qa + (int64_t)h * r,
                         qp + (int64_t)h * dr, b->kvb_row + (int64_t)omp_get_thread_num() * r););
        /* DSA reads the selected rows only; a selection of every row is kv_attend itself */
        if (sel && sel->n[s] < pos0 + s + 1)
            rc = kv_attend_select(st->kv, li, sel->pos + (int64_t)s * sel->stride, sel->n[s], H, qa, qp,
                                  c->softmax_scale, ol, st->scratch, err);
        else
            rc = kv_attend(st->kv, li, pos0 + s + 1, H, qa, qp, c->softmax_scale, ol, st->scratch, err);
        if (rc) break;
        BASE_PAR_FOR_N(nt, for (int h = 0; h < H; h++) {
            float *rowbuf = b->kvb_row + (int64_t)omp_get_thread_num() * r;
            float *oh = o + (int64_t)s * H * dv + h * dv;
            for (int k = 0; k < dv; k++)
                oh[k] = model_dot_f32(kv_b_row(w, h * dkv + dn + k, rowbuf), ol + (int64_t)h * r, r);
        });
    }
    return rc;
}

int model_mla_cache_row(const struct model_config *c, const float *kv_a_norm, struct fwd_state *st, int kl, int pos,
                        float *kv_a, float *q, struct colibri_err *err)
{
    int H = c->num_attention_heads, dn = c->qk_nope_head_dim, dr = c->qk_rope_head_dim, r = c->kv_lora_rank;
    int dqk = dn + dr;
    float *lat = kv_a, *rope = lat + r;
    model_rmsnorm(lat, lat, kv_a_norm, 1, r, c->latent_norm_eps);
    /* one position's angles serve its key and every head's query (their
     * double cos and sin, once per vector, were 5% of a 2-thread prefill,
     * on one thread) */
    float cs[MODEL_MAX_ROPE_DIM / 2], sn[MODEL_MAX_ROPE_DIM / 2];
    model_rope_angles(dr, pos, c, cs, sn);
    model_rope_rotate_cfg(c, rope, dr, cs, sn);
    int rc = kv_cache_write(st->kv, kl, pos, lat, rope, err);
    float scale = model_rope_query_scale(c, pos);
    for (int hh = 0; hh < H; hh++) model_rope_rotate_cfg(c, q + hh * dqk + dn, dr, cs, sn);
    if (scale != 1.0f)
        for (int i = 0; i < H * dqk; i++) q[i] *= scale;
    return rc;
}

/* Layer li's MLA over the rows of pr's groups; with_indexer: the DSA
 * indexer picks each row's positions (its projections run for all rows at
 * once, its selection per group). */
static int mla_run(const struct part_run *pr, const float *h, int n, float *out, int with_indexer,
                   struct colibri_err *err)
{
    const struct model *m = pr->m;
    const struct model_config *c = &m->cfg;
    int li = pr->li;
    const struct attn_weights *w = &m->layers[li].attn;
    struct run_bufs *b = pr->b;
    int H = c->num_attention_heads, dn = c->qk_nope_head_dim, dr = c->qk_rope_head_dim, dv = c->v_head_dim;
    int r = c->kv_lora_rank, dqk = dn + dr, rc = 0;
    const struct fwd_exec *ex = pr->ex;
    float *q = b->q, *a = b->kv_a, *o = b->attn;
    if (c->q_lora_rank) {
        if ((rc = ex->ops->linear(ex, &w->q_a, h, n, b->q_a, &b->qs, err)) ||
            (rc = ex->ops->rmsnorm(ex, b->q_a, b->q_a, w->q_a_norm, n, c->q_lora_rank, c->latent_norm_eps, err)) ||
            (rc = ex->ops->linear(ex, &w->q_b, b->q_a, n, q, &b->qs, err)))
            return rc;
    } else if ((rc = ex->ops->linear(ex, &w->q, h, n, q, &b->qs, err))) {
        return rc;
    }
    if ((rc = ex->ops->linear(ex, &w->kv_a, h, n, a, &b->qs, err))) return rc;
    struct indexer_bufs *ib = with_indexer ? b->dsa : NULL;
    if (with_indexer && !ib) return base_err_set(err, COLIBRI_EINVAL, "layer %d: DSA attention without indexer buffers", li);
    if (ib && (rc = model_indexer_project(&w->indexer, h, b->q_a, n, ib, &b->qs, err))) return rc;
    for (int g = 0; g < pr->n_grp && !rc; g++) {
        const struct fwd_group *gr = &pr->grp[g];
        struct fwd_state *st = gr->st;
        int row0 = gr->row0, S = gr->n, pos0 = gr->pos0, kl = li - st->kv_layer0;
        float *qg = q + (int64_t)row0 * H * dqk, *og = o + (int64_t)row0 * H * dv;
        struct mla_sel sel = { 0 }, *selp = NULL;
        if (ib) {
            if ((rc = model_indexer_select(c, &w->indexer, kl, st->kv, row0, S, pos0, ib, b->n_threads, err))) break;
            sel = (struct mla_sel){ ib->sel + (int64_t)row0 * ib->k_max, ib->n_sel + row0, ib->k_max };
            selp = &sel;
        }
        for (int s = 0; s < S && !rc; s++)
            rc = ex->ops->mla_row(ex, c, w->kv_a_norm, st, kl, pos0 + s, a + (int64_t)(row0 + s) * (r + dr),
                                  qg + (int64_t)s * H * dqk, err);
        if (rc) break;
        if (pr->mode == FWD_ABSORBED || (st->absorbed_prefill && mla_prefill_absorbed(c, S, pos0)))
            rc = ex->ops->attend_absorbed(ex, c, w, st, kl, qg, S, pos0, selp, og, b, err);
        else
            rc = attend_expanded(c, w, st, kl, qg, S, pos0, selp, og, b, err);
    }
    if (!rc) rc = ex->ops->linear(ex, &w->o, o, n, out, &b->qs, err);
    return rc;
}

static int mla_dense_forward(const struct part_run *pr, const float *in, int n, float *out, struct colibri_err *err)
{
    return mla_run(pr, in, n, out, 0, err);
}

static int mla_dsa_forward(const struct part_run *pr, const float *in, int n, float *out, struct colibri_err *err)
{
    return mla_run(pr, in, n, out, 1, err);
}

static int indexer_mat(void *ctx, const char *name, int rows, int cols, int keep_f32, struct qtensor *w,
                       struct colibri_err *err)
{
    const struct model_loader *L = ctx;
    return model_loader_mat(L, name, rows, cols, keep_f32 ? MODEL_ROLE_F32 : MODEL_ROLE_DENSE, w, err);
}

static int indexer_vec(void *ctx, const char *name, int n, float **out, struct colibri_err *err)
{
    const struct model_loader *L = ctx;
    return model_loader_vec(L, name, n, out, err);
}

/* DeepseekV3Attention's tensors (q_a/q_a_layernorm/q_b, or q_proj without
 * q_lora; kv_a_proj_with_mqa, kv_a_layernorm, kv_b_proj, o_proj), the DSA
 * indexer's when the layer has one, and kv_b's f32 copy when asked for. */
static int mla_load(const struct model_loader *L, int li, struct layer_weights *lw, struct colibri_err *err)
{
    const struct model *m = model_loader_model(L);
    const struct model_config *c = &m->cfg;
    struct attn_weights *a = &lw->attn;
    int hid = c->hidden_size, H = c->num_attention_heads, dqk = c->qk_nope_head_dim + c->qk_rope_head_dim, rc;
    char p[64], name[256];
    snprintf(p, sizeof p, "model.layers.%d.self_attn", li);
#define NAME(fmt) (snprintf(name, sizeof name, "%s." fmt, p), name)
    if (c->q_lora_rank) {
        if ((rc = model_loader_mat(L, NAME("q_a_proj.weight"), c->q_lora_rank, hid, MODEL_ROLE_DENSE, &a->q_a, err)) ||
            (rc = model_loader_vec(L, NAME("q_a_layernorm.weight"), c->q_lora_rank, &a->q_a_norm, err)) ||
            (rc = model_loader_mat(L, NAME("q_b_proj.weight"), H * dqk, c->q_lora_rank, MODEL_ROLE_DENSE, &a->q_b, err)))
            return rc;
    } else if ((rc = model_loader_mat(L, NAME("q_proj.weight"), H * dqk, hid, MODEL_ROLE_DENSE, &a->q, err))) {
        return rc;
    }
    if ((rc = model_loader_mat(L, NAME("kv_a_proj_with_mqa.weight"), c->kv_lora_rank + c->qk_rope_head_dim, hid,
                               MODEL_ROLE_DENSE, &a->kv_a, err)) ||
        (rc = model_loader_vec(L, NAME("kv_a_layernorm.weight"), c->kv_lora_rank, &a->kv_a_norm, err)) ||
        (rc = model_loader_mat(L, NAME("kv_b_proj.weight"), H * (c->qk_nope_head_dim + c->v_head_dim),
                               c->kv_lora_rank, MODEL_ROLE_DENSE, &a->kv_b, err)) ||
        (rc = model_loader_mat(L, NAME("o_proj.weight"), hid, H * c->v_head_dim, MODEL_ROLE_DENSE, &a->o, err)))
        return rc;
#undef NAME
    const struct indexer_tensor_io io = { (void *)L, indexer_mat, indexer_vec };
    if ((rc = model_indexer_load(&a->indexer, c, li, &io, err))) return rc;
    if (a->kv_b.fmt != QUANT_F32 && m->fmt.kv_b_f32) {
        a->kv_b_f32 = malloc((size_t)a->kv_b.rows * a->kv_b.cols * sizeof(float));
        if (!a->kv_b_f32) return base_err_set(err, COLIBRI_ENOMEM, "%s: out of memory for kv_b in f32", p);
        quant_dequant_rows(&a->kv_b, 0, a->kv_b.rows, a->kv_b_f32);
    }
    return 0;
}

const struct token_mixer model_mixer_mla = { "mla", mla_load, mla_dense_forward, NULL };
const struct token_mixer model_mixer_mla_dsa = { "mla+dsa", mla_load, mla_dsa_forward, model_indexer_kv_layer };
