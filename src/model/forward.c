/* The forward pass: embed -> per layer [RMSNorm -> MLA -> RMSNorm -> MLP/MoE]
 * -> norm -> lm_head, as DeepseekV3ForCausalLM.forward reads (transformers
 * models/deepseek_v3/modeling_deepseek_v3.py). */
#include "model/forward.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "model/expert_store_stream.h"
#include "model/mixer_v4.h"

int fwd_state_init(struct fwd_state *st, const struct model *m, int n_ctx, int max_batch, enum kv_tier tier,
                   enum kv_rope_prec rope, int int8_mode, const struct compute_ctx *cc, struct colibri_err *err)
{
    int L = m->cfg.num_hidden_layers;
    struct kv_layer_spec *spec = calloc((size_t)(L > 0 ? L : 1), sizeof *spec);
    if (!spec) return base_err_set(err, COLIBRI_ENOMEM, "kv layer table");
    for (int l = 0; l < L; l++) spec[l].tier = tier, spec[l].rope = rope;
    int rc = model_fwd_state_init_layers(st, m, n_ctx, max_batch, spec, int8_mode, cc, err);
    free(spec);
    return rc;
}

int fwd_state_init_index(struct fwd_state *st, const struct model *m, int n_ctx, int max_batch, enum kv_tier tier,
                         enum kv_rope_prec rope, int int8_mode, enum kv_tier index_tier, const struct compute_ctx *cc,
                         struct colibri_err *err)
{
    int L = m->cfg.num_hidden_layers;
    struct kv_layer_spec *spec = calloc((size_t)(L > 0 ? L : 1), sizeof *spec);
    if (!spec) return base_err_set(err, COLIBRI_ENOMEM, "kv layer table");
    for (int l = 0; l < L; l++) spec[l].tier = tier, spec[l].rope = rope;
    int rc = model_cache_layout(m, index_tier, spec, err);
    if (!rc) rc = model_fwd_state_init_layers(st, m, n_ctx, max_batch, spec, int8_mode, cc, err);
    free(spec);
    return rc;
}

/* The token mixers' own per-session states (parts.h state_new). */
static int mixer_states_new(struct fwd_state *st, const struct model *m, int n_ctx, const struct kv_layer_spec *spec,
                            struct colibri_err *err)
{
    int L = m->cfg.num_hidden_layers;
    for (int l = 0; l < L; l++) {
        const struct token_mixer *tm = m->layers[l].parts.mixer;
        if (!tm->state_new) continue;
        if (!st->mixer_state && !(st->mixer_state = calloc((size_t)L, sizeof *st->mixer_state)))
            return base_err_set(err, COLIBRI_ENOMEM, "mixer state table");
        size_t bytes = 0;
        int rc = tm->state_new(m, l, n_ctx, &spec[l], &st->mixer_state[l], &bytes, err);
        if (rc) return rc;
        st->mixer_state_bytes += bytes;
    }
    return 0;
}

int model_fwd_state_init_layers(struct fwd_state *st, const struct model *m, int n_ctx, int max_batch,
                          const struct kv_layer_spec *layers, int int8_mode, const struct compute_ctx *cc,
                          struct colibri_err *err)
{
    const struct model_config *c = &m->cfg;
    memset(st, 0, sizeof *st);
    if (n_ctx <= 0) return base_err_set(err, COLIBRI_EINVAL, "context size %d must be positive", n_ctx);
    st->n_ctx = n_ctx;
    st->cc = *cc;
    st->model = m;
    if (max_batch <= 0) max_batch = FWD_DEFAULT_BATCH;
    if (max_batch > FWD_MAX_BATCH) max_batch = FWD_MAX_BATCH;
    if (max_batch > n_ctx) max_batch = n_ctx;
    /* each token mixer's parts of the row (a DSA index key: f32 unless the spec names a tier) */
    struct kv_layer_spec *spec = calloc((size_t)(c->num_hidden_layers > 0 ? c->num_hidden_layers : 1), sizeof *spec);
    if (!spec) return base_err_set(err, COLIBRI_ENOMEM, "kv layer table");
    memcpy(spec, layers, (size_t)c->num_hidden_layers * sizeof *spec);
    int rc = model_cache_layout(m, KV_TIER_F32, spec, err);
    if (!rc && c->kv_lora_rank > 0)
        rc = kv_cache_new_layers(spec, c->num_hidden_layers, c->kv_lora_rank, c->qk_rope_head_dim, n_ctx, &st->kv,
                                 err);
    if (!rc) rc = mixer_states_new(st, m, n_ctx, spec, err);
    if (!rc) rc = kv_scratch_new(cc->n_threads, &st->scratch, err);
    if (!rc && st->kv) {
        kv_scratch_set_int8(st->scratch, int8_mode);
        rc = kv_scratch_reserve(st->scratch, st->kv, c->num_attention_heads, err);
    }
    if (!rc) rc = run_bufs_init(&st->bufs, c, max_batch, cc, err);
    if (!rc) rc = model_v4_bufs_reserve(st->bufs.v4, c, spec, n_ctx, cc->n_threads, &st->bufs.bytes, err);
    free(spec);
    /* a DSA decode's scores and selected rows, at the longest context */
    if (!rc) rc = model_indexer_bufs_reserve(st->bufs.dsa, n_ctx, err);
    if (!rc && st->bufs.dsa)
        rc = kv_scratch_reserve_select(st->scratch, st->kv, c->index_topk < n_ctx ? c->index_topk : n_ctx, err);
    if (rc) fwd_state_free(st);
    return rc;
}

void fwd_state_free(struct fwd_state *st)
{
    for (int l = 0; st->mixer_state && l < st->model->cfg.num_hidden_layers; l++)
        if (st->mixer_state[l]) st->model->layers[l].parts.mixer->state_free(st->mixer_state[l]);
    free(st->mixer_state);
    kv_cache_free(st->kv);
    kv_scratch_free(st->scratch);
    run_bufs_free(&st->bufs);
    memset(st, 0, sizeof *st);
}

void model_fwd_state_reset_mixers(struct fwd_state *st)
{
    for (int l = 0; st->mixer_state && l < st->model->cfg.num_hidden_layers; l++)
        if (st->mixer_state[l]) st->model->layers[l].parts.mixer->state_reset(st->mixer_state[l]);
}

int64_t fwd_state_bytes(const struct fwd_state *st)
{
    return (int64_t)(st->kv ? kv_cache_token_bytes(st->kv) * (size_t)st->kv->capacity : 0) +
           (int64_t)kv_scratch_bytes(st->scratch) + (int64_t)st->bufs.bytes + (int64_t)st->mixer_state_bytes +
           (int64_t)st->bufs.qs.cap;
}

/* Checks a group's positions and token ids before anything is cached. */
static int check_group(const struct model *m, const struct fwd_group *g, const int32_t *tokens,
                       struct colibri_err *err)
{
    int V = m->cfg.vocab_size;
    if (g->n <= 0) return base_err_set(err, COLIBRI_EINVAL, "no tokens to process");
    if (g->pos0 < 0 || g->pos0 + g->n > g->st->n_ctx)
        return base_err_set(err, COLIBRI_ERANGE, "%d tokens after position %d exceed the context of %d tokens", g->n,
                       g->pos0, g->st->n_ctx);
    for (int s = 0; s < g->n; s++) {
        int32_t t = tokens[g->row0 + s];
        if (t < 0 || t >= V)
            return base_err_set(err, COLIBRI_ERANGE, "token id %d at index %d is out of range [0, %d)", t, s, V);
    }
    return 0;
}

static int layer_run(const struct fwd_exec *ex, const struct model *m, const struct fwd_group *sub, int n_sub, int li,
                     float *x, int n, enum fwd_mode mode, struct run_bufs *b, struct colibri_err *err)
{
    const struct layer_parts *p = &m->layers[li].parts;
    struct part_run pr = { m, sub, n_sub, li, mode, b, ex };
    return p->residual->forward(&pr, p, x, n, err);
}

int model_layer_forward(const struct model *m, const struct fwd_group *sub, int n_sub, int li, float *x, int n,
                        enum fwd_mode mode, struct run_bufs *b, struct colibri_err *err)
{
    return layer_run(&model_fwd_cpu, m, sub, n_sub, li, x, n, mode, b, err);
}

int model_cache_layout(const struct model *m, enum kv_tier index_tier, struct kv_layer_spec *layers,
                       struct colibri_err *err)
{
    for (int l = 0; l < m->cfg.num_hidden_layers; l++) {
        const struct token_mixer *tm = m->layers[l].parts.mixer;
        int rc = tm->cache_parts ? tm->cache_parts(&m->cfg, l, index_tier, &layers[l], err) : 0;
        if (rc) return rc;
    }
    return 0;
}

/* One slice of rows that fits the run buffers b: groups sub[0..n_sub) tile
 * rows [0, n) of tokens. Emitted rows (all, or the sub-groups flagged in
 * emit) get their logits and hidden state written contiguously at out;
 * with all_hidden every row's hidden state is written. */
static int forward_slice(const struct fwd_exec *ex, const struct model *m, const struct fwd_group *sub,
                         const int *emit, int n_sub, const int32_t *tokens, int n, enum fwd_mode mode,
                         struct run_bufs *b, float *logits, float *hidden, int all_logits, int all_hidden,
                         struct colibri_err *err)
{
    const struct model_config *c = &m->cfg;
    int hid = c->hidden_size, rc = 0, ns = c->hc_mult > 1 ? c->hc_mult : 1;
    float *x = b->x, *h = b->h, *y = b->y;
    /* each token's embedding in every residual stream */
    for (int s = 0; s < n && !rc; s++)
        for (int k = 0; k < ns && !rc; k++)
            rc = ex->ops->embed(ex, &m->embed, tokens[s], x + ((int64_t)s * ns + k) * hid, err);
    b->tok = tokens;
    /* experts that follow from the token ids alone start reading now, in
     * layer order, as far as the cache holds them all at once */
    int room = expert_store_stream_slots(m->experts);
    if (room <= 0) room = INT_MAX;
    for (int li = 0; li < c->num_hidden_layers && room > 0; li++) {
        const struct channel_mixer *f = m->layers[li].parts.ffn;
        if (f->tokens_known) f->tokens_known(m, li, tokens, n, &room);
    }

    for (int li = 0; li < c->num_hidden_layers && !rc; li++) rc = layer_run(ex, m, sub, n_sub, li, x, n, mode, b, err);
    if (rc || (!logits && !hidden)) return rc;
    const struct residual_scheme *rs = m->layers[0].parts.residual;
    if (rs->head && (rc = rs->head(m, x, n, x, err))) return rc;
    if (hidden && all_hidden) {
        memcpy(hidden, x, (size_t)n * hid * sizeof *hidden);
        hidden = NULL;
    }
    int k = n;
    const float *rows = x;
    if (!all_logits) {   /* the emitted rows in order: gathered into y unless they are x's first rows */
        int in_place = 1;
        k = 0;
        for (int g = 0; g < n_sub; g++)
            if (emit[g]) in_place &= sub[g].row0 + sub[g].n - 1 == k++;
        if (!in_place) {
            k = 0;
            for (int g = 0; g < n_sub; g++)
                if (emit[g])
                    memcpy(y + (int64_t)k++ * hid, x + (int64_t)(sub[g].row0 + sub[g].n - 1) * hid,
                           (size_t)hid * sizeof *y);
            rows = y;
        }
    }
    if (!k) return 0;
    if (hidden) memcpy(hidden, rows, (size_t)k * hid * sizeof *hidden);
    if (logits) {
        if ((rc = ex->ops->rmsnorm(ex, h, rows, m->final_norm, k, hid, c->rms_norm_eps, err))) return rc;
        return ex->ops->linear_host(ex, &m->lm_head, h, k, logits, &b->qs, err);
    }
    return 0;
}

static int forward_groups(const struct model *m, const struct fwd_group *grp, int n_grp, const int32_t *tokens,
                          enum fwd_mode mode, const struct fwd_out *out, struct colibri_err *err);

/* A checkpoint file truncated under the model faults its mapping, which then
 * reads zeros (io/mapguard.h): a forward that touched it, or any after it,
 * fails naming the file instead of returning what the zeros gave. */
int model_forward_groups(const struct model *m, const struct fwd_group *grp, int n_grp, const int32_t *tokens,
                         enum fwd_mode mode, const struct fwd_out *out, struct colibri_err *err)
{
    int rc = st_files_faulted(&m->st, err);
    if (!rc) rc = forward_groups(m, grp, n_grp, tokens, mode, out, err);
    if (!rc) rc = st_files_faulted(&m->st, err);
    return rc;
}

static int forward_groups(const struct model *m, const struct fwd_group *grp, int n_grp, const int32_t *tokens,
                          enum fwd_mode mode, const struct fwd_out *out, struct colibri_err *err)
{
    const struct model_config *c = &m->cfg;
    int n = 0, rc = 0, V = c->vocab_size, hid = c->hidden_size;
    if (n_grp <= 0) return base_err_set(err, COLIBRI_EINVAL, "no tokens to process");
    for (int g = 0; g < n_grp; g++) {
        if (grp[g].row0 != n) return base_err_set(err, COLIBRI_EINVAL, "forward groups must tile the rows in order");
        if ((rc = check_group(m, &grp[g], tokens, err))) return rc;
        for (int j = 0; j < g; j++)
            if (grp[j].st == grp[g].st) return base_err_set(err, COLIBRI_EINVAL, "forward groups %d and %d share a state", j, g);
        n += grp[g].n;
    }
    struct run_bufs *b = &grp[0].st->bufs;
    int all = out && out->all_logits, all_hidden = out && out->all_hidden;
    float *logits = out ? out->logits : NULL, *hidden = out ? out->hidden : NULL;
    /* a session's one-row decode on its device; everything else on the CPU */
    const struct fwd_exec *ex = &model_fwd_cpu;
    if (out && out->on_device && grp[0].st->dev && n_grp == 1 && n == 1 && mode == FWD_ABSORBED && !hidden) {
        ex = grp[0].st->dev;
        b = grp[0].st->dev_bufs;
    }
    /* slices of at most b->cap rows; a group longer than that is split, and
     * only the part holding its last row emits that row */
    int g = 0, done = 0, emitted = 0;   /* group g has `done` rows forwarded */
    while (g < n_grp && !rc) {
        struct fwd_group sub[b->cap];
        int emit[b->cap], n_sub = 0, rows = 0, n_emit = 0;
        int row_start = grp[g].row0 + done;
        while (g < n_grp && rows < b->cap) {
            int take = grp[g].n - done;
            if (take > b->cap - rows) take = b->cap - rows;
            sub[n_sub] = (struct fwd_group){ grp[g].st, rows, take, grp[g].pos0 + done };
            done += take;
            rows += take;
            emit[n_sub] = done == grp[g].n;
            n_emit += emit[n_sub];
            n_sub++;
            if (done == grp[g].n) { g++; done = 0; }
        }
        int64_t at = all ? row_start : emitted;
        int64_t hat = all_hidden ? row_start : at;
        rc = forward_slice(ex, m, sub, emit, n_sub, tokens + row_start, rows, mode, b,
                           logits ? logits + at * V : NULL, hidden ? hidden + hat * hid : NULL, all, all_hidden, err);
        emitted += n_emit;
    }
    return rc;
}

int model_forward(const struct model *m, struct fwd_state *st, const int32_t *tokens, int S, int pos0,
                  enum fwd_mode mode, const struct fwd_out *out, struct colibri_err *err)
{
    struct fwd_group g = { st, 0, S, pos0 };
    return model_forward_groups(m, &g, 1, tokens, mode, out, err);
}
