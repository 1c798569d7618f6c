/* Loading model weights from safetensors into f32 matrices, checking that every
 * tensor the config implies is present with the shape it implies. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/err.h"
#include "base/util.h"
#include "model/expert_store_stream.h"
#include "model/loader.h"
#include "model/mixer_glm53_mla.h"
#include "model/mixer_v4.h"
#include "model/model.h"
#include "model/shipped.h"
#include "quant/fp8.h"
#include "quant/half.h"

struct loader {
    struct st_set *st;
    const char *dir;
    struct model *m;
    unsigned char *used;        /* [st->n_tensors]: 1 once a table entry consumed the tensor */
};

/* st_find of a name as the parts spell it ("model.layers.0...",
 * "lm_head.weight"), under the family's tensor_prefix when it has one (a
 * wrapper's language model: "language_model.model.layers.0...") or its
 * model_prefix; a name that already carries the prefix is found as it is. */
static const struct st_tensor *loader_lookup(const struct loader *L, const char *name)
{
    const struct model_family *f = L->m->cfg.family;
    const char *pre = f ? f->tensor_prefix : NULL;
    int mp = f && f->model_prefix && !strncmp(name, "model.", 6);
    /* a name already under the prefix (a companion named from the tensor found: `<w>_scale_inv`) */
    if (mp && !strncmp(name, f->model_prefix, strlen(f->model_prefix))) mp = 0;
    if (pre && !strncmp(name, pre, strlen(pre))) pre = NULL;
    if (!pre && !mp) return st_find(L->st, name);
    char full[600];
    snprintf(full, sizeof full, "%s%s", mp ? f->model_prefix : pre, mp ? name + 6 : name);
    return st_find(L->st, full);
}

/* loader_lookup, marking what it finds as consumed (every lookup that finds
 * a tensor loads it, or fails the load). */
static const struct st_tensor *loader_find(struct loader *L, const char *name)
{
    const struct st_tensor *t = loader_lookup(L, name);
    if (t && L->used) L->used[t - L->st->tensors] = 1;
    return t;
}

#define ROLE_DENSE MODEL_ROLE_DENSE
#define ROLE_EXPERT MODEL_ROLE_EXPERT
#define ROLE_EMBED MODEL_ROLE_EMBED
#define ROLE_F32 MODEL_ROLE_F32

int model_tensor_to_f32(const struct st_set *st, const struct st_tensor *t, int64_t rows, int64_t cols, float **out,
                        struct colibri_err *err)
{
    float *w = malloc((size_t)(rows * cols > 0 ? rows * cols : 1) * sizeof *w);
    if (!w) return base_err_set(err, COLIBRI_ENOMEM, "tensor '%s': out of memory (%lld x %lld)", t->name,
                           (long long)rows, (long long)cols);
    const uint8_t *p = t->data;
    int64_t n = rows * cols;
    switch (t->dtype) {
    case ST_F32: memcpy(w, p, (size_t)n * 4); break;
    case ST_BF16:
        for (int64_t i = 0; i < n; i++) {
            w[i] = quant_bf16_to_f32((uint16_t)(p[2 * i] | (p[2 * i + 1] << 8)));
        }
        break;
    case ST_F16:
        for (int64_t i = 0; i < n; i++) w[i] = quant_f16_to_f32((uint16_t)(p[2 * i] | (p[2 * i + 1] << 8)));
        break;
    case ST_F8_E4M3: {
        char sname[512];
        snprintf(sname, sizeof sname, "%s_scale_inv", t->name);
        const struct st_tensor *s = st_find(st, sname);
        int64_t br = (rows + 127) / 128, bc = (cols + 127) / 128;
        if (!s || s->dtype != ST_F32 || s->numel != br * bc) {
            free(w);
            return base_err_set(err, COLIBRI_EFORMAT,
                           "tensor '%s' is F8_E4M3 but '%s' is %s (need F32 [%lld, %lld])", t->name, sname,
                           !s ? "missing" : "the wrong dtype or shape", (long long)br, (long long)bc);
        }
        const float *sc = s->data;
        for (int64_t i = 0; i < rows; i++)
            for (int64_t j = 0; j < cols; j++) {
                float scale;
                memcpy(&scale, (const uint8_t *)sc + 4 * ((i / 128) * bc + j / 128), 4);
                w[i * cols + j] = quant_fp8_e4m3_decode(p[i * cols + j]) * scale;
            }
        break;
    }
    default:
        free(w);
        return base_err_set(err, COLIBRI_EUNSUPPORTED, "tensor '%s': dtype %s cannot be used as a weight", t->name,
                       st_dtype_name(t->dtype));
    }
    *out = w;
    return 0;
}

/* Finds `name` and checks it has shape [rows, cols] (cols = 0: a vector [rows]). */
static int find_shaped(struct loader *L, const char *name, int64_t rows, int64_t cols, const struct st_tensor **out,
                       struct colibri_err *err)
{
    const struct st_tensor *t = loader_find(L, name);
    if (!t) return base_err_set(err, COLIBRI_EFORMAT, "%s: tensor '%s' is missing", L->dir, name);
    /* a depthwise Conv1d weight [rows, 1, cols] (GLM-5.3's KDA) reads as [rows, cols] */
    int ok = cols ? (t->ndim == 2 || (t->ndim == 3 && t->shape[1] == 1)) && t->shape[0] == rows &&
                        t->shape[t->ndim - 1] == cols : (t->ndim == 1 && t->shape[0] == rows);
    if (!ok) {
        char got[128] = "";
        for (int i = 0; i < t->ndim; i++)
            snprintf(got + strlen(got), sizeof got - strlen(got), "%s%lld", i ? ", " : "", (long long)t->shape[i]);
        return cols ? base_err_set(err, COLIBRI_EFORMAT, "%s: tensor '%s' has shape [%s], config implies [%lld, %lld]",
                              L->dir, name, got, (long long)rows, (long long)cols)
                    : base_err_set(err, COLIBRI_EFORMAT, "%s: tensor '%s' has shape [%s], config implies [%lld]", L->dir,
                              name, got, (long long)rows);
    }
    *out = t;
    return 0;
}

/* DeepSeek-V4 with the release's quantization_config: model_shipped_v4_kind, else -1. */
static int v4_kind(const struct loader *L, const char *name)
{
    const struct model_config *c = &L->m->cfg;
    return c->attn_kind == MODEL_ATTN_V4 && c->quant.kind == MODEL_QUANT_FP8_BLOCK
               ? model_shipped_v4_kind(name, c->v4_expert_fp4) : -1;
}

/* Loads a vector or matrix as f32. */
static int load(struct loader *L, const char *name, int64_t rows, int64_t cols, float **out,
                struct colibri_err *err)
{
    const struct st_tensor *t;
    int rc = find_shaped(L, name, rows, cols, &t, err);
    if (!rc) rc = model_shipped_v4_check(t, v4_kind(L, name), err);
    return rc ? rc : model_tensor_to_f32(L->st, t, rows, cols ? cols : 1, out, err);
}

static int target_format(const struct loader *L, enum model_weight_role role, const struct st_tensor *t)
{
    int want = role == ROLE_EXPERT ? L->m->fmt.experts_fmt
             : role == ROLE_DENSE  ? L->m->fmt.dense_fmt
             : role == ROLE_EMBED  ? L->m->fmt.embed_fmt : QUANT_F32;
    if (want != MODEL_FMT_AS_STORED) return want;
    return t->dtype == ST_BF16 ? QUANT_BF16 : t->dtype == ST_F16 ? QUANT_F16
         : t->dtype == ST_F8_E4M3 ? QUANT_FP8B : QUANT_F32;
}

/* Borrows an F8_E4M3 weight and its block scales from the mapping, as shipped. */
static int wrap_fp8(struct loader *L, const struct st_tensor *t, int rows, int cols, struct qtensor *w,
                    struct colibri_err *err)
{
    char sname[512];
    snprintf(sname, sizeof sname, "%s_scale_inv", t->name);
    const struct st_tensor *s = loader_find(L, sname);
    size_t want = quant_fmt_scale_count(QUANT_FP8B, rows, cols);
    if (!s || s->dtype != ST_F32 || (size_t)s->numel != want)
        return base_err_set(err, COLIBRI_EFORMAT, "tensor '%s' is F8_E4M3 but '%s' is %s (need F32, %zu values)", t->name,
                       sname, !s ? "missing" : "the wrong dtype or shape", want);
    if ((uintptr_t)s->data % sizeof(float))
        return base_err_set(err, COLIBRI_EFORMAT, "tensor '%s': data offset is not 4-byte aligned", sname);
    int rc = quant_qtensor_wrap(QUANT_FP8B, rows, cols, t->data, t->nbytes, s->data, want, w, err);
    return rc ? base_err_prefix(err, rc, "tensor '%s'", t->name) : 0;
}

/* stored in the format the role asks for: kept (moved into *w) when that is
 * its own format or "as stored", else dequantized and quantized again (and
 * stored freed). */
static int keep_or_convert(struct loader *L, struct qtensor *stored, enum model_weight_role role, const char *name,
                           struct qtensor *w, struct colibri_err *err)
{
    int want = role == ROLE_EXPERT ? L->m->fmt.experts_fmt : role == ROLE_DENSE ? L->m->fmt.dense_fmt
             : role == ROLE_EMBED ? L->m->fmt.embed_fmt : QUANT_F32;
    if (want == MODEL_FMT_AS_STORED || want == (int)stored->fmt) {
        *w = *stored;
        return 0;
    }
    int rows = stored->rows, cols = stored->cols;
    float *f = malloc((size_t)rows * cols * sizeof *f);
    if (!f) {
        quant_qtensor_free(stored);
        return base_err_set(err, COLIBRI_ENOMEM, "tensor '%s': out of memory", name);
    }
    quant_dequant_rows(stored, 0, rows, f);
    quant_qtensor_free(stored);
    int rc = quant_qtensor_from_f32((enum quant_fmt)want, rows, cols, f, w, err);
    free(f);
    return rc;
}

static int is_shaped(const struct st_tensor *t, int64_t rows, int64_t cols)
{
    return t->ndim == 2 && t->shape[0] == rows && t->shape[1] == cols;
}

/* A weight packed by `colibri convert`: U8 [rows, row bytes] + F32 `<name>_scale`,
 * its format named in the file's metadata (model/convert.h). Borrowed from the
 * mapping when the role keeps it, else dequantized and quantized again. */
static int load_packed(struct loader *L, const struct st_tensor *t, const char *fmt_name, int rows, int cols,
                       enum model_weight_role role, struct qtensor *w, struct colibri_err *err)
{
    int fmt = quant_fmt_from_name(fmt_name);
    if (fmt < 0)
        return base_err_set(err, COLIBRI_EUNSUPPORTED, "%s: tensor '%s': unknown packed format '%s' in metadata", L->dir,
                       t->name, fmt_name);
    size_t rb = quant_fmt_row_bytes(fmt, cols), n_scales = quant_fmt_scale_count(fmt, rows, cols);
    int e8m0 = quant_fmt_traits(fmt)->scale_e8m0;
    if (t->dtype != ST_U8 || t->ndim != 2 || t->shape[0] != rows || (size_t)t->shape[1] != rb)
        return base_err_set(err, COLIBRI_EFORMAT, "%s: tensor '%s': packed %s needs U8 [%d, %zu]", L->dir, t->name,
                       fmt_name, rows, rb);
    const void *scales = NULL;
    if (n_scales) {
        char sname[512];
        snprintf(sname, sizeof sname, "%s_scale", t->name);
        const struct st_tensor *s = loader_find(L, sname);
        enum st_dtype sd = e8m0 ? ST_U8 : ST_F32;
        if (!s || s->dtype != sd || (size_t)s->numel != n_scales)
            return base_err_set(err, COLIBRI_EFORMAT, "%s: tensor '%s' is %s (need %s with %zu values)", L->dir, sname,
                           !s ? "missing" : "the wrong dtype or size", st_dtype_name(sd), n_scales);
        if ((uintptr_t)s->data % quant_fmt_scale_size(fmt))
            return base_err_set(err, COLIBRI_EFORMAT, "%s: tensor '%s': data is not 4-byte aligned", L->dir, sname);
        scales = s->data;
    }
    struct qtensor stored;
    /* the parameter count counted the packed bytes and the scales as
     * elements: what they hold is rows x cols weights */
    L->m->n_params += (int64_t)rows * cols - t->numel - (int64_t)n_scales;
    int rc = quant_qtensor_wrap_raw(fmt, rows, cols, t->data, t->nbytes, scales,
                                    n_scales * quant_fmt_scale_size(fmt), &stored, err);
    if (rc) return base_err_prefix(err, rc, "tensor '%s'", t->name);
    return keep_or_convert(L, &stored, role, t->name, w, err);
}

static const struct st_tensor *shipped_find(void *ctx, const char *name)
{
    return loader_find(ctx, name);
}

/* A routed expert's matrix in compressed-tensors int4 is repacked only once
 * the experts are known to stay resident (ct_int4_materialize), so that a
 * model streamed under --ram never holds every expert's q4g32 copy at load;
 * not when --experts converts it (conversion needs the values now). */
static int ct_int4_deferred(const struct model *m, const char *name, enum model_weight_role role)
{
    int layer, expert, n = 0, want = m->fmt.experts_fmt;
    if (role != MODEL_ROLE_EXPERT || (want != MODEL_FMT_AS_STORED && want != QUANT_Q4G32)) return 0;
    if (sscanf(name, "model.layers.%d.mlp.experts.%d.%n", &layer, &expert, &n) != 2 || !n) return 0;
    return layer >= 0 && layer < m->cfg.num_hidden_layers;
}

/* A Linear weight in a shipped encoding (model/shipped.h) when `name` is
 * one: 1 with *stored made, 0 if it is not, or a negative error. */
static int load_shipped(struct loader *L, const char *name, const struct st_tensor *t, int rows, int cols,
                        enum model_weight_role role, struct qtensor *stored, struct colibri_err *err)
{
    struct model_shipped_src src = { shipped_find, L, &L->m->n_params };
    const struct model_quant_config *q = &L->m->cfg.quant;
    size_t len = strlen(name);
    /* compressed-tensors quantizes Linear modules: not the embedding, not the
     * router (a parameter of its own module in every family's modeling) */
    if (q->kind == MODEL_QUANT_CT_INT4 && len > 7 && !strcmp(name + len - 7, ".weight") &&
        strcmp(name, "model.embed_tokens.weight") && !(len >= 16 && !strcmp(name + len - 16, ".mlp.gate.weight"))) {
        char module[512];
        const char *pre = L->m->cfg.family->tensor_prefix;
        snprintf(module, sizeof module, "%s%.*s", pre ? pre : "", (int)(len - 7), name);
        int ig = model_quant_ignored(q, module, err);
        if (ig < 0) return ig;
        if (!ig) {
            /* the ignore list names whole modules; the finder adds the prefix itself */
            int rc = model_shipped_ct_int4(&src, module + (pre ? strlen(pre) : 0), rows, cols,
                                           ct_int4_deferred(L->m, name, role), stored, err);
            return rc ? base_err_prefix(err, rc, "%s", L->dir) : 1;
        }
    }
    if (!t) return 0;
    int v4 = v4_kind(L, name), rc = model_shipped_v4_check(t, v4, err);
    if (rc || v4 == MODEL_SHIPPED_FP8) {
        if (!rc) rc = model_shipped_fp8_e8m0(&src, t, rows, cols, stored, err);
        return rc ? base_err_prefix(err, rc, "%s", L->dir) : 1;
    }
    if (model_shipped_is_mxfp4(t)) {
        rc = model_shipped_mxfp4(&src, t, rows, cols, stored, err);
        return rc ? base_err_prefix(err, rc, "%s", L->dir) : 1;
    }
    if (model_shipped_fp8_e8m0_scale(&src, t)) {
        if (!is_shaped(t, rows, cols))
            return base_err_set(err, COLIBRI_EFORMAT, "%s: tensor '%s' is not [%d, %d]", L->dir, name, rows, cols);
        rc = model_shipped_fp8_e8m0(&src, t, rows, cols, stored, err);
        return rc ? base_err_prefix(err, rc, "%s", L->dir) : 1;
    }
    (void)role;
    return 0;
}

/* Loads a Linear weight [rows, cols] in the format its role asks for. */
static int load_mat(struct loader *L, const char *name, int rows, int cols, enum model_weight_role role,
                    struct qtensor *w, struct colibri_err *err)
{
    const struct st_tensor *t = loader_find(L, name);
    char key[600];
    /* convert and synth key the format by the tensor's name in the file,
     * the family's prefix included */
    snprintf(key, sizeof key, "colibri.fmt.%s", t ? t->name : name);
    const char *packed = t ? st_tensor_meta(L->st, t, key) : NULL;
    if (packed) return load_packed(L, t, packed, rows, cols, role, w, err);
    struct qtensor stored;
    int rc = load_shipped(L, name, t, rows, cols, role, &stored, err);
    if (rc < 0) return rc;
    if (rc) return keep_or_convert(L, &stored, role, name, w, err);
    rc = find_shaped(L, name, rows, cols, &t, err);
    if (rc) return rc;
    int fmt = target_format(L, role, t);
    if (fmt == QUANT_FP8B && t->dtype == ST_F8_E4M3) return wrap_fp8(L, t, rows, cols, w, err);
    /* kept as stored: borrowed from the mapping, so the weights are in memory
     * once (a converted copy would sit beside the mapped pages) */
    int elem = t->dtype == ST_F32 ? 4 : t->dtype == ST_BF16 || t->dtype == ST_F16 ? 2 : 0;
    int same = (t->dtype == ST_F32 && fmt == QUANT_F32) || (t->dtype == ST_BF16 && fmt == QUANT_BF16) ||
               (t->dtype == ST_F16 && fmt == QUANT_F16);
    if (same && (uintptr_t)t->data % (uintptr_t)elem == 0) {
        rc = quant_qtensor_wrap((enum quant_fmt)fmt, rows, cols, t->data, t->nbytes, NULL, 0, w, err);
        return rc ? base_err_prefix(err, rc, "tensor '%s'", name) : 0;
    }
    float *f;
    if ((rc = model_tensor_to_f32(L->st, t, rows, cols, &f, err))) return rc;
    rc = quant_qtensor_from_f32((enum quant_fmt)fmt, rows, cols, f, w, err);
    free(f);
    return rc ? base_err_prefix(err, rc, "tensor '%s'", name) : 0;
}

static int load_mlp(struct loader *L, const char *prefix, int inter, enum model_weight_role role,
                    struct mlp_weights *mlp, struct colibri_err *err)
{
    char name[512];
    int hid = L->m->cfg.hidden_size, rc;
    snprintf(name, sizeof name, "%s.gate_proj.weight", prefix);
    if ((rc = load_mat(L, name, inter, hid, role, &mlp->gate, err))) return rc;
    snprintf(name, sizeof name, "%s.up_proj.weight", prefix);
    if ((rc = load_mat(L, name, inter, hid, role, &mlp->up, err))) return rc;
    snprintf(name, sizeof name, "%s.down_proj.weight", prefix);
    if (L->m->cfg.swiglu_clip_all) mlp->clip = L->m->cfg.swiglu_limit; /* GLM-5.3: every SwiGLU */
    return load_mat(L, name, hid, inter, role, &mlp->down, err);
}

/* transformers v5 fused layout: gate_up_proj [E, 2I, hid] (gate rows first),
 * down_proj [E, hid, I]. */
static int load_fused_experts(struct loader *L, const char *prefix, int li, struct colibri_err *err)
{
    const struct model_config *c = &L->m->cfg;
    int E = c->n_routed_experts, I = c->moe_intermediate_size, hid = c->hidden_size;
    char name[512];
    snprintf(name, sizeof name, "%s.experts.gate_up_proj", prefix);
    const struct st_tensor *gu = loader_find(L, name);
    snprintf(name, sizeof name, "%s.experts.down_proj", prefix);
    const struct st_tensor *dn = loader_find(L, name);
    if (!gu || !dn || gu->ndim != 3 || dn->ndim != 3 || gu->shape[0] != E || gu->shape[1] != 2 * I ||
        gu->shape[2] != hid || dn->shape[0] != E || dn->shape[1] != hid || dn->shape[2] != I ||
        gu->dtype == ST_F8_E4M3 || dn->dtype == ST_F8_E4M3)
        return base_err_set(err, COLIBRI_EFORMAT,
                       "%s: layer '%s': routed experts missing (neither %s.experts.0.gate_proj.weight nor fused "
                       "gate_up_proj [%d, %d, %d] / down_proj [%d, %d, %d])",
                       L->dir, prefix, prefix, E, 2 * I, hid, E, hid, I);
    float *guf, *dnf;
    int rc = model_tensor_to_f32(L->st, gu, (int64_t)E * 2 * I, hid, &guf, err);
    if (rc) return rc;
    if ((rc = model_tensor_to_f32(L->st, dn, (int64_t)E * hid, I, &dnf, err))) { free(guf); return rc; }
    int fmt = target_format(L, ROLE_EXPERT, gu);
    for (int e = 0; e < E && !rc; e++) {
        struct mlp_weights *x = expert_store_resident_slot(L->m->experts, li, e);
        if (c->swiglu_clip_all) x->clip = c->swiglu_limit;
        if ((rc = quant_qtensor_from_f32(fmt, I, hid, guf + (int64_t)e * 2 * I * hid, &x->gate, err)) ||
            (rc = quant_qtensor_from_f32(fmt, I, hid, guf + ((int64_t)e * 2 * I + I) * hid, &x->up, err)) ||
            (rc = quant_qtensor_from_f32(fmt, hid, I, dnf + (int64_t)e * hid * I, &x->down, err)))
            break;
    }
    free(guf);
    free(dnf);
    return rc;
}

static int io_has(void *ctx, const char *name) { return loader_find(ctx, name) != NULL; }

static int io_mat(void *ctx, const char *name, int rows, int cols, enum model_weight_role role, struct qtensor *w,
                  struct colibri_err *err)
{
    return load_mat(ctx, name, rows, cols, role, w, err);
}

static int io_vec(void *ctx, const char *name, int n, float **out, struct colibri_err *err)
{
    return load(ctx, name, n, 0, out, err);
}

static int io_mlp(void *ctx, const char *prefix, int inter, enum model_weight_role role, struct mlp_weights *mlp,
                  struct colibri_err *err)
{
    return load_mlp(ctx, prefix, inter, role, mlp, err);
}

static int io_i64(void *ctx, const char *name, int64_t rows, int64_t cols, int64_t **out, struct colibri_err *err)
{
    struct loader *L = ctx;
    const struct st_tensor *t;
    int rc = find_shaped(L, name, rows, cols, &t, err);
    if (rc) return rc;
    if (t->dtype != ST_I64 && t->dtype != ST_I32)
        return base_err_set(err, COLIBRI_EFORMAT, "%s: tensor '%s' is %s, not I64 or I32", L->dir, name,
                            st_dtype_name(t->dtype));
    int64_t n = rows * (cols ? cols : 1), *v = malloc((size_t)(n ? n : 1) * sizeof *v);
    if (!v) return base_err_set(err, COLIBRI_ENOMEM, "tensor '%s': out of memory", name);
    for (int64_t i = 0; i < n; i++) {
        if (t->dtype == ST_I64) memcpy(&v[i], (const char *)t->data + i * 8, 8);
        else {
            int32_t x;
            memcpy(&x, (const char *)t->data + i * 4, 4);
            v[i] = x;
        }
    }
    *out = v;
    return 0;
}

static int io_routed_experts(void *ctx, const char *prefix, int li, struct colibri_err *err)
{
    struct loader *L = ctx;
    const struct model_config *c = &L->m->cfg;
    char name[512];
    char packed[512];
    snprintf(name, sizeof name, "%s.experts.0.gate_proj.weight", prefix);
    /* per-expert tensors (compressed-tensors names them .weight_packed) */
    snprintf(packed, sizeof packed, "%s.experts.0.gate_proj.weight_packed", prefix);
    if (!loader_find(L, name) && !loader_lookup(L, packed)) return load_fused_experts(L, prefix, li, err);
    for (int e = 0; e < c->n_routed_experts; e++) {
        snprintf(name, sizeof name, "%s.experts.%d", prefix, e);
        int rc = load_mlp(L, name, c->moe_intermediate_size, ROLE_EXPERT, expert_store_resident_slot(L->m->experts, li, e),
                          err);
        if (rc) return rc;
    }
    return 0;
}

/* Layer li through its parts: the residual scheme's norms, the token
 * mixer's and the channel mixer's weights. */
static int load_layer(struct loader *L, int li, struct colibri_err *err)
{
    struct layer_weights *lw = &L->m->layers[li];
    model_layer_parts(&L->m->cfg, li, &lw->parts);
    lw->is_moe = lw->parts.ffn->routed;
    const struct layer_parts *p = &lw->parts;
    const struct model_loader io = { L->m, L, io_has, io_mat, io_vec, io_mlp, io_routed_experts, io_i64 };
    int rc = p->residual->load(&io, li, lw, err);
    if (!rc) rc = p->mixer->load(&io, li, lw, err);
    if (!rc) rc = p->ffn->load(&io, li, lw, err);
    return rc;
}

/* Reads one byte of every page of a borrowed tensor, so its mapped pages are
 * in memory before the first forward. */
/* Reads one byte of every page of a borrowed tensor, so its mapped pages are
 * in memory before the first forward; *done counts the bytes for progress. */
static void touch_range(const void *data, size_t n, uint64_t *sum, uint64_t *done, struct progress *pr)
{
    const uint8_t *p = data;
    for (size_t i = 0; p && i < n; i += 4096) *sum += p[i];
    *done += n;
    if (pr) base_progress_update(pr, *done);
}

static void touch_borrowed(const struct qtensor *w, uint64_t *sum, uint64_t *done, struct progress *pr)
{
    if (!w->rows || w->owned) return;
    touch_range(w->data, quant_fmt_data_bytes(w->fmt, w->rows, w->cols), sum, done, NULL);
    touch_range(w->scales, quant_fmt_scale_bytes(w->fmt, w->rows, w->cols), sum, done, pr);
}

static void touch_mlp(const struct mlp_weights *x, uint64_t *sum, uint64_t *done, struct progress *pr)
{
    if (!x) return;   /* a streamed expert: not in memory until used */
    touch_borrowed(&x->gate, sum, done, pr);
    touch_borrowed(&x->up, sum, done, pr);
    touch_borrowed(&x->down, sum, done, pr);
}

/* The resident store's promise: every weight in memory after load. Weights
 * borrowed from the mapping are faulted in now when the model fits in well
 * under the machine's memory (with progress and MB/s for models of 1 GiB and
 * more); a larger model stays mapped on demand (the OS reads pages as the
 * forward touches them), and the stated resident bytes are then an upper
 * bound. */
static void prefault(const struct model *m)
{
    struct model_bytes b;
    model_bytes(m, &b);
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    double ram = pages > 0 && page > 0 ? (double)pages * page : 0;
    if (ram > 0 && (double)b.resident > 0.8 * ram) {
        base_log_msg("info", "the model holds %.1f GiB, more than 80%% of this machine's %.1f GiB: weights stay mapped "
                "and are read from disk as they are used", b.resident / 1073741824.0, ram / 1073741824.0);
        return;
    }
    const struct model_config *c = &m->cfg;
    uint64_t sum = 0, done = 0;
    struct progress pr, *prp = NULL;
    if (b.dense + b.experts >= (1ll << 30)) {
        base_progress_start(&pr, "reading weights", (uint64_t)(b.dense + b.experts));
        pr.bytes = 1;
        prp = &pr;
    }
    touch_borrowed(&m->embed, &sum, &done, prp);
    if (!m->lm_head_tied) touch_borrowed(&m->lm_head, &sum, &done, prp);
    for (int li = 0; li < c->num_hidden_layers + m->n_mtp; li++) {
        const struct layer_weights *lw = &m->layers[li];
        const struct attn_weights *a = &lw->attn;
        const struct qtensor *at[] = { &a->q_a, &a->q_b, &a->q, &a->kv_a, &a->kv_b, &a->o, &a->indexer.wq_b,
                                       &a->indexer.wk, &a->indexer.weights_proj };
        for (int i = 0; i < 9; i++) touch_borrowed(at[i], &sum, &done, prp);
        touch_mlp(&lw->dense, &sum, &done, prp);
        touch_mlp(&lw->moe.shared, &sum, &done, prp);
        if (lw->is_moe)
            for (int e = 0; e < c->n_routed_experts; e++)
                touch_mlp(expert_store_resident_slot(m->experts, li, e), &sum, &done, prp);
    }
    for (int i = 0; i < m->n_mtp; i++) touch_borrowed(&m->mtp[i].eh_proj, &sum, &done, prp);
    if (prp) base_progress_end(prp);
    volatile uint64_t sink = sum;   /* keeps the reads */
    (void)sink;
}

static const struct st_tensor *stream_find(void *ctx, const char *name)
{
    return st_find(ctx, name);
}

/* The compressed-tensors module of routed expert (layer, expert)'s matrix
 * (0 gate, 1 up, 2 down), with the family's tensor_prefix, as load_shipped
 * names it. */
static void ct_expert_module(const struct model *m, int layer, int expert, int matrix, char *out, size_t n)
{
    static const char *const proj[3] = { "gate_proj", "up_proj", "down_proj" };
    const char *pre = m->cfg.family->tensor_prefix;
    snprintf(out, n, "%smodel.layers.%d.mlp.experts.%d.%s", pre ? pre : "", layer, expert, proj[matrix]);
}

/* Repacks the routed experts ct_int4_deferred left empty, for a model
 * whose experts stay resident. */
static int ct_int4_materialize(struct model *m, const char *dir, struct colibri_err *err)
{
    if (m->cfg.quant.kind != MODEL_QUANT_CT_INT4 || !m->experts) return 0;
    struct model_shipped_src src = { stream_find, &m->st, NULL };
    for (int l = m->experts->first_moe_layer; l < m->experts->n_layers; l++)
        for (int e = 0; e < m->experts->n_experts; e++) {
            struct mlp_weights *w = expert_store_resident_slot(m->experts, l, e);
            struct qtensor *q[3] = { w ? &w->gate : NULL, w ? &w->up : NULL, w ? &w->down : NULL };
            for (int j = 0; j < 3; j++) {
                if (!q[j] || q[j]->data || !q[j]->rows || q[j]->fmt != QUANT_Q4G32) continue;
                char module[160];
                ct_expert_module(m, l, e, j, module, sizeof module);
                int rc = model_shipped_ct_int4(&src, module, q[j]->rows, q[j]->cols, 0, q[j], err);
                if (rc) return base_err_prefix(err, rc, "%s", dir);
            }
        }
    return 0;
}

static void ct_int4_rebuild(const void *const src[2], int scale_dtype, int rows, int cols, void *data, void *scales)
{
    model_shipped_ct_int4_repack(src[0], src[1], scale_dtype, rows, cols, data, scales);
}

/* The streamed store's question for a routed-expert matrix the loader
 * repacked (compressed-tensors int4): its stored tensors, named as
 * moe_ffn_load and io_routed_experts name them. */
static int stream_rebuild(void *ctx, int layer, int expert, int matrix, struct expert_stream_rebuild *out,
                          struct colibri_err *err)
{
    struct model *m = ctx;
    if (m->cfg.quant.kind != MODEL_QUANT_CT_INT4) return 0;
    const struct mlp_weights *w = expert_store_resident_slot(m->experts, layer, expert);
    const struct qtensor *q = matrix == 0 ? &w->gate : matrix == 1 ? &w->up : &w->down;
    if (q->fmt != QUANT_Q4G32) return 0;
    char module[160];
    ct_expert_module(m, layer, expert, matrix, module, sizeof module);
    int ig = model_quant_ignored(&m->cfg.quant, module, err);
    if (ig) return ig < 0 ? ig : 0;
    struct model_shipped_src src = { stream_find, &m->st, NULL };
    const struct st_tensor *p, *sc;
    int rc = model_shipped_ct_int4_source(&src, module, q->rows, q->cols, &p, &sc, err);
    if (rc) return rc;
    *out = (struct expert_stream_rebuild){ { p->data, sc->data }, { p->nbytes, sc->nbytes }, sc->dtype,
                                           ct_int4_rebuild };
    return 1;
}

/* Resident when the weights fit the budget (--ram, or 80% of the machine's
 * memory when none is given), else routed experts streamed from the files
 * with what the budget leaves after everything else. */
static int choose_expert_store(struct model *m, struct colibri_err *err)
{
    struct model_bytes b;
    model_bytes(m, &b);
    int64_t fixed = b.dense + b.copies + b.small, ram = m->fmt.ram_bytes;
    int automatic = 0;
    if (!ram) {
        long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
        double phys = pages > 0 && page > 0 ? (double)pages * page : 0;
        if (!(phys > 0 && (double)b.resident > 0.8 * phys)) return 0;
        ram = (int64_t)(0.7 * phys);
        automatic = 1;
    }
    if (ram >= b.resident || m->cfg.num_hidden_layers <= m->cfg.first_k_dense_replace) return 0;
    int64_t largest = 0;
    for (int l = m->experts->first_moe_layer; l < m->experts->n_layers; l++)
        for (int e = 0; e < m->experts->n_experts; e++) {
            int64_t x = model_expert_bytes(m->experts, l, e);
            largest = x > largest ? x : largest;
        }
    if (ram <= fixed)
        return base_err_set(err, COLIBRI_EINVAL,
                       "--ram %.1f MiB: the weights other than routed experts need %.1f MiB; with one token's %d "
                       "experts at least %.1f MiB", ram / 1048576.0, fixed / 1048576.0, m->cfg.num_experts_per_tok,
                       (fixed + (int64_t)m->cfg.num_experts_per_tok * largest) / 1048576.0);
    struct expert_store *s;
    const struct expert_stream_sources src = { stream_rebuild, m };
    int rc = expert_store_stream_new(&m->st, m->experts, ram - fixed, m->cfg.num_experts_per_tok, &src, &s, err);
    if (rc && automatic && rc == COLIBRI_EUNSUPPORTED) {
        base_log_msg("info", "the model holds %.1f GiB, more than 80%% of this machine's memory; its experts cannot be "
                "streamed (%s)", b.resident / 1073741824.0, err->msg);
        return 0;
    }
    if (rc) return base_err_prefix(err, rc, "--ram %.1f MiB", ram / 1048576.0);
    expert_store_free(m->experts);
    m->experts = s;
    base_log_msg("info", "routed experts streamed: a cache of %d experts (%.1f MiB) under a budget of %.1f MiB%s; "
            "%.1f MiB of experts on disk", expert_store_stream_slots(s), model_expert_resident_bytes(s) / 1048576.0,
            ram / 1048576.0, automatic ? " (70% of this machine's memory)" : "", b.experts_total / 1048576.0);
    return 0;
}

/* The name without the family's tensor_prefix (with a model_prefix: "model."
 * + the rest, in out), or NULL when it lacks it. */
static const char *unprefixed(const struct model_config *c, const char *name, char *out, size_t n)
{
    const char *mp = c->family ? c->family->model_prefix : NULL;
    if (mp) {
        if (strncmp(name, mp, strlen(mp))) return NULL;
        snprintf(out, n, "model.%s", name + strlen(mp));
        return out;
    }
    const char *pre = c->family ? c->family->tensor_prefix : NULL;
    if (!pre) return name;
    return strncmp(name, pre, strlen(pre)) ? NULL : name + strlen(pre);
}

/* The first of the '|'-separated spellings in alts that the checkpoint has
 * (else the first, for the message that it is missing), into out. */
static void spelled(struct loader *L, const char *alts, char *out, size_t n)
{
    const char *p = alts;
    while (*p) {
        const char *bar = strchr(p, '|');
        size_t len = bar ? (size_t)(bar - p) : strlen(p);
        snprintf(out, n, "%.*s", (int)len, p);
        if (st_find(L->st, out)) return;
        if (!bar) break;
        p = bar + 1;
    }
    const char *bar = strchr(alts, '|');
    snprintf(out, n, "%.*s", (int)(bar ? (size_t)(bar - alts) : strlen(alts)), alts);
}

/* The layer index of "model.layers.N.<rest>", or -1. */
static int tensor_layer(const char *name)
{
    const char *pre = "model.layers.";
    size_t n = strlen(pre);
    if (!name || strncmp(name, pre, n) || name[n] < '0' || name[n] > '9') return -1;
    long li = 0;
    const char *q = name + n;
    for (; *q >= '0' && *q <= '9' && li < 1000000; q++) li = li * 10 + (*q - '0');
    return *q == '.' ? (int)li : -1;
}

/* 1 when t is the scale of a consumed weight: "<w>_scale_inv" (fp8 blocks)
 * or "<w>_scale" (packed by colibri convert), read with <w>. */
static int is_scale_of_used(const struct loader *L, const struct st_tensor *t)
{
    static const char *const suffix[] = { "_scale_inv", "_scale" };
    size_t len = strlen(t->name);
    for (int i = 0; i < 2; i++) {
        size_t k = strlen(suffix[i]);
        char base[512];
        if (len <= k || len - k >= sizeof base || strcmp(t->name + len - k, suffix[i])) continue;
        memcpy(base, t->name, len - k);
        base[len - k] = 0;
        const struct st_tensor *w = st_find(L->st, base);
        if (w && L->used[w - L->st->tensors]) return 1;
    }
    return 0;
}

/* Every checkpoint tensor must have been consumed by a table entry: a tensor
 * nothing reads means the config does not describe the checkpoint (a
 * mislabelled model_type would otherwise load with, say, its indexer
 * ignored). The MTP layers (num_hidden_layers .. + num_nextn_predict_layers
 * - 1) are accepted and named once in the log, as they are not loaded; so
 * are the tensors under the family's skip_prefixes (a wrapper's vision
 * tower) and zero-element tensors, which transformers saves for a part a
 * config sizes to nothing (shared experts with n_shared_experts 0). */
static int refuse_unused(const struct loader *L, struct colibri_err *err)
{
    const struct model_config *c = &L->m->cfg;
    int n_mtp = 0, n_skip = 0, n_empty = 0, n_unloaded = 0;
    char un[600];
    const char *unloaded = c->family->names.mtp_unloaded;
    for (int i = 0; i < L->st->n_tensors; i++) {
        const struct st_tensor *t = &L->st->tensors[i];
        if (L->used[i] || is_scale_of_used(L, t)) continue;
        if (t->numel == 0) {
            n_empty++;
            continue;
        }
        if (unloaded && !strncmp(t->name, unloaded, strlen(unloaded))) {
            n_unloaded++;
            continue;
        }
        int skip = 0;
        for (int k = 0; k < 4 && c->family && c->family->skip_prefixes[k] && !skip; k++)
            skip = !strncmp(t->name, c->family->skip_prefixes[k], strlen(c->family->skip_prefixes[k]));
        if (skip) {
            n_skip++;
            continue;
        }
        int li = tensor_layer(unprefixed(c, t->name, un, sizeof un));
        if (li >= c->num_hidden_layers && li < c->num_hidden_layers + c->num_nextn_predict_layers) {
            n_mtp++;
            continue;
        }
        return base_err_set(err, COLIBRI_EFORMAT,
                            "%s: tensor '%s' is not used by model_type %s with this config (is the model_type or "
                            "num_hidden_layers / num_nextn_predict_layers wrong?)", L->dir, t->name, c->model_type);
    }
    if (n_unloaded)
        snprintf(L->m->mtp_left_out, sizeof L->m->mtp_left_out, "drafting with %s's MTP module (%s*) is not "
                 "implemented", c->model_type, unloaded);
    if (n_unloaded)
        base_log_msg("info", "%s* (%d tensors): the MTP module, not loaded (drafting with it is not implemented for "
                     "%s)", unloaded, n_unloaded, c->model_type);
    if (c->num_nextn_predict_layers > 0 && !c->family->has_mtp)
        snprintf(L->m->mtp_left_out, sizeof L->m->mtp_left_out, "drafting with %s's MTP layer (%slayers.%d.*, %d "
                 "tensors) is not implemented", c->model_type, c->family->model_prefix ? c->family->model_prefix
                 : "model.", c->num_hidden_layers, n_mtp);
    if (n_mtp)
        base_log_msg("info", "layers %d..%d (%d tensors): MTP layer, not loaded", c->num_hidden_layers,
                     c->num_hidden_layers + c->num_nextn_predict_layers - 1, n_mtp);
    if (n_skip)
        base_log_msg("info", "%d tensors of parts colibri does not run (%s...: image inputs are refused), not loaded",
                     n_skip, c->family->skip_prefixes[0]);
    if (n_empty) base_log_msg("info", "%d zero-element tensors (parts this config sizes to nothing)", n_empty);
    return 0;
}

/* MTP layers to load: those the config declares (num_nextn_predict_layers)
 * that the checkpoint has tensors for, model.layers.L.* onwards. A config
 * that declares them for a checkpoint without them (converters often drop
 * the layer) loads the main model only, said once. */
static int mtp_layers_present(const struct model *m)
{
    const struct model_config *c = &m->cfg;
    /* a family whose MTP layers are recognised but not run (GLM-5.3): refuse_unused names them */
    if (m->fmt.skip_mtp || c->num_nextn_predict_layers <= 0 || !c->family->has_mtp) return 0;
    int n = 0;
    for (; n < c->num_nextn_predict_layers; n++) {
        char p[64];
        int len = snprintf(p, sizeof p, "%smodel.layers.%d.", c->family->tensor_prefix ? c->family->tensor_prefix : "",
                           c->num_hidden_layers + n), found = 0;
        for (int i = 0; i < m->st.n_tensors && !found; i++) found = !strncmp(m->st.tensors[i].name, p, (size_t)len);
        if (!found) break;
    }
    if (n < c->num_nextn_predict_layers)
        base_log_msg("info", "config.json declares %d MTP layer(s) (num_nextn_predict_layers); the checkpoint has "
                "tensors for %d (model.layers.%d.* onwards): speculative decoding %s", c->num_nextn_predict_layers, n,
                c->num_hidden_layers + n, n ? "drafts with those" : "is unavailable");
    return n;
}

/* Bits per weight of a loaded Linear (the format's storage bits). */
static int qtensor_bits(const struct qtensor *w) { return w->rows ? quant_fmt_traits(w->fmt)->bits : 32; }

/* MTP layer i: its decoder block (a MoE block whatever first_k_dense_replace
 * says, as HF's get_mtp_config sets it), enorm, hnorm, eh_proj,
 * shared_head.norm; shared_head.head and embed_tokens when present must have
 * the main model's shapes. Drafts from a layer quantized below 8 bits are
 * rarely accepted, so that is said by tensor name. */
static int load_mtp(struct loader *L, int i, struct colibri_err *err)
{
    struct model *m = L->m;
    const struct model_config *c = &m->cfg;
    int li = c->num_hidden_layers + i, hid = c->hidden_size, rc;
    struct mtp_weights *w = &m->mtp[i];
    char name[256];
    const struct st_tensor *t;
    if (!c->n_routed_experts || !c->num_experts_per_tok)
        return base_err_set(err, COLIBRI_EFORMAT, "%s: MTP layer %d is a MoE block but the config has no routed experts "
                       "(n_routed_experts %d, num_experts_per_tok %d)", L->dir, li, c->n_routed_experts,
                       c->num_experts_per_tok);
    if ((rc = load_layer(L, li, err))) return rc;
#define NAME(fmt) (snprintf(name, sizeof name, "model.layers.%d." fmt, li), name)
    if ((rc = load(L, NAME("enorm.weight"), hid, 0, &w->enorm, err)) ||
        (rc = load(L, NAME("hnorm.weight"), hid, 0, &w->hnorm, err)) ||
        (rc = load_mat(L, NAME("eh_proj.weight"), hid, 2 * hid, ROLE_DENSE, &w->eh_proj, err)) ||
        (rc = load(L, NAME("shared_head.norm.weight"), hid, 0, &w->head_norm, err)))
        return rc;
    if (loader_find(L, NAME("shared_head.head.weight")) &&
        (rc = find_shaped(L, name, c->vocab_size, hid, &t, err)))
        return rc;
    if (loader_find(L, NAME("embed_tokens.weight")) && (rc = find_shaped(L, name, c->vocab_size, hid, &t, err)))
        return rc;
    const struct layer_weights *lw = &m->layers[li];
    const struct attn_weights *a = &lw->attn;
    const struct mlp_weights *e0 = expert_store_resident_slot(m->experts, li, 0);
    const struct { const char *what; const struct qtensor *q; } ws[] = {
        { "eh_proj", &w->eh_proj }, { "self_attn.q_a_proj", &a->q_a }, { "self_attn.q_b_proj", &a->q_b },
        { "self_attn.q_proj", &a->q }, { "self_attn.kv_a_proj_with_mqa", &a->kv_a },
        { "self_attn.kv_b_proj", &a->kv_b }, { "self_attn.o_proj", &a->o },
        { "mlp.shared_experts.gate_proj", &lw->moe.shared.gate }, { "mlp.experts.0.gate_proj", &e0->gate },
    };
    for (size_t k = 0; k < sizeof ws / sizeof ws[0]; k++)
        if (qtensor_bits(ws[k].q) < 8)
            base_log_msg("warn", "MTP layer %d: model.layers.%d.%s.weight is %s (%d bits per weight): drafts from an "
                    "MTP layer below 8 bits are rarely accepted; keep it at 8 bits or more", li, li, ws[k].what,
                    quant_fmt_traits(ws[k].q->fmt)->name, qtensor_bits(ws[k].q));
#undef NAME
    return 0;
}

int model_load(const char *dir, const struct model_load_opts *opts, struct model *m, struct colibri_err *err)
{
    memset(m, 0, sizeof *m);
    m->fmt = opts ? *opts : (struct model_load_opts){ MODEL_FMT_AS_STORED, MODEL_FMT_AS_STORED, MODEL_FMT_AS_STORED, 0, 0, 0 };
    int rc = model_config_load(dir, &m->cfg, err);
    if (rc) return rc;
    struct loader L = { .st = &m->st, .dir = dir, .m = m };
    m->st.io = m->fmt.io;
    if ((rc = st_open_dir(dir, &m->st, err))) return rc;
    if (!(L.used = calloc((size_t)m->st.n_tensors + 1, 1))) {
        rc = base_err_set(err, COLIBRI_ENOMEM, "out of memory");
        goto fail;
    }
    const struct model_config *c = &m->cfg;
    for (int i = 0; i < m->st.n_tensors; i++) {
        m->n_params += m->st.tensors[i].numel;
        m->bytes_by_dtype[m->st.tensors[i].dtype] += (int64_t)m->st.tensors[i].nbytes;
    }
    const struct model_tensor_names *nm = &c->family->names;
    char embed_name[256], norm_name[256], head_name[256];
    spelled(&L, nm->embed ? nm->embed : "model.embed_tokens.weight", embed_name, sizeof embed_name);
    spelled(&L, nm->final_norm ? nm->final_norm : "model.norm.weight", norm_name, sizeof norm_name);
    spelled(&L, nm->lm_head ? nm->lm_head : "lm_head.weight", head_name, sizeof head_name);
    if ((rc = load_mat(&L, embed_name, c->vocab_size, c->hidden_size, ROLE_EMBED, &m->embed, err)))
        goto fail;
    if ((rc = load(&L, norm_name, c->hidden_size, 0, &m->final_norm, err))) goto fail;
    if (!c->tie_word_embeddings || loader_find(&L, head_name)) {
        if ((rc = load_mat(&L, head_name, c->vocab_size, c->hidden_size, ROLE_EMBED, &m->lm_head, err)))
            goto fail;
    } else {
        m->lm_head = m->embed;
        m->lm_head_tied = 1;
    }
    int n_mtp = mtp_layers_present(m);
    if (!(m->layers = calloc((size_t)(c->num_hidden_layers + n_mtp), sizeof *m->layers)) ||
        (n_mtp && !(m->mtp = calloc((size_t)n_mtp, sizeof *m->mtp)))) {
        rc = base_err_set(err, COLIBRI_ENOMEM, "out of memory");
        goto fail;
    }
    m->n_mtp = n_mtp;
    int first_moe = c->first_k_dense_replace < c->num_hidden_layers ? c->first_k_dense_replace : c->num_hidden_layers;
    if ((rc = expert_store_resident_new(c->num_hidden_layers + n_mtp, first_moe, c->n_routed_experts, &m->experts,
                                        err)))
        goto fail;
    struct progress pr;
    base_progress_start(&pr, "loading", (uint64_t)c->num_hidden_layers);
    for (int li = 0; li < c->num_hidden_layers; li++) {
        if ((rc = load_layer(&L, li, err))) goto fail;
        if (c->num_hidden_layers >= 8) base_progress_update(&pr, (uint64_t)li + 1);
    }
    if (c->num_hidden_layers >= 8) base_progress_end(&pr);
    const struct residual_scheme *rs = m->layers[0].parts.residual;
    if (rs->head_load) {
        const struct model_loader io = { m, &L, io_has, io_mat, io_vec, io_mlp, io_routed_experts, io_i64 };
        if ((rc = rs->head_load(&io, -1, NULL, err))) goto fail;
    }
    for (int i = 0; i < n_mtp; i++)
        if ((rc = load_mtp(&L, i, err))) {
            /* the MTP layer only drafts: a checkpoint whose MTP layer is
             * incomplete or malformed still runs, without it */
            base_log_msg("warn", "%s; the MTP layer is left out (no speculative decoding)", err->msg);
            struct model_load_opts again = m->fmt;
            again.skip_mtp = 1;
            char why[sizeof m->mtp_left_out];
            snprintf(why, sizeof why, "%s", err->msg);
            free(L.used);
            model_free(m);
            if ((rc = model_load(dir, &again, m, err))) return rc;
            snprintf(m->mtp_left_out, sizeof m->mtp_left_out, "%s", why);
            return 0;
        }
    rc = refuse_unused(&L, err);
    free(L.used);
    L.used = NULL;
    if (rc) goto fail;
    struct expert_store *resident = m->experts;
    if ((rc = choose_expert_store(m, err))) goto fail;
    if (m->experts == resident && (rc = ct_int4_materialize(m, L.dir, err))) goto fail;
    if (!m->fmt.lazy_load) prefault(m);
    return 0;
fail:
    free(L.used);
    model_free(m);
    return rc;
}

static void free_mlp(struct mlp_weights *x)
{
    quant_qtensor_free(&x->gate);
    quant_qtensor_free(&x->up);
    quant_qtensor_free(&x->down);
}

void model_free(struct model *m)
{
    if (m->layers) {
        for (int li = 0; li < m->cfg.num_hidden_layers + m->n_mtp; li++) {
            struct layer_weights *lw = &m->layers[li];
            struct attn_weights *a = &lw->attn;
            free(lw->attn_norm); free(lw->mlp_norm);
            quant_qtensor_free(&a->q_a); quant_qtensor_free(&a->q_b); quant_qtensor_free(&a->q);
            free(a->q_a_norm);
            quant_qtensor_free(&a->kv_a); free(a->kv_a_norm);
            quant_qtensor_free(&a->kv_b); quant_qtensor_free(&a->o);
            free(a->kv_b_f32);
            model_indexer_free(&a->indexer);
            free_mlp(&lw->dense);
            quant_qtensor_free(&lw->moe.router);
            free(lw->moe.score_bias);
            free_mlp(&lw->moe.shared);
            for (int k = 0; k < 2; k++) {
                quant_qtensor_free(&lw->hc_fn[k]);
                free(lw->hc_base[k]);
                free(lw->hc_scale[k]);
            }
            model_v4_attn_weights_free(lw->v4, m->cfg.o_groups); model_glm53_layer_free(lw);
            free(lw->tid2eid);
        }
        free(m->layers);
    }
    for (int i = 0; m->mtp && i < m->n_mtp; i++) {
        free(m->mtp[i].enorm);
        free(m->mtp[i].hnorm);
        free(m->mtp[i].head_norm);
        quant_qtensor_free(&m->mtp[i].eh_proj);
    }
    free(m->mtp);
    expert_store_free(m->experts);
    if (!m->lm_head_tied) quant_qtensor_free(&m->lm_head);
    quant_qtensor_free(&m->hc_head_fn);
    free(m->hc_head_base);
    free(m->hc_head_scale);
    quant_qtensor_free(&m->embed);
    free(m->final_norm);
    st_close(&m->st);
    memset(m, 0, sizeof *m);
}
