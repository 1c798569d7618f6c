#include "model/convert.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "base/err.h"
#include "base/util.h"
#include "io/file_stdio.h"
#include "io/st_write.h"
#include "model/shipped.h"
#include "model/synth_glm53.h"
#include "quant/fp8.h"
#include "quant/qtensor.h"

enum item_kind { ITEM_COPY, ITEM_WEIGHT };

/* How a synthetic tensor's values are drawn (model_synth). */
enum gen_kind { GEN_NONE, GEN_LINEAR, GEN_EMBED, GEN_NORM, GEN_BIAS, GEN_TID2EID };

/* One source tensor and what it becomes: a byte copy, or a weight in `fmt`
 * (one or two output tensors). Synthetic items have no source and are drawn
 * from a seeded generator instead. */
struct item {
    const struct st_tensor *src;
    enum gen_kind gen;
    uint64_t seed;
    int release;            /* model/shipped.h MODEL_SHIPPED_FP8 / _MXFP4: written as DeepSeek-V4's release stores it */
    enum item_kind kind;
    int fmt, rows, cols;
    int shard;
    struct st_out_tensor out[2];
    int n_out;
    char names[2][520];
    uint64_t hash[2];
};

static int trunk_role_format(const struct convert_opts *o, const char *name)
{
    if (!strcmp(name, "model.embed_tokens.weight") || !strcmp(name, "lm_head.weight")) return o->fmt.embed_fmt;
    if (strstr(name, ".mlp.experts.")) return o->fmt.experts_fmt;
    if (strstr(name, ".mlp.shared_experts.")) return o->fmt.dense_fmt;
    /* DeepSeek-V4's official names (model/mixer_v4.c, moe_v4.c read them, optionally under "model.") */
    const char *v4 = strncmp(name, "model.", 6) ? name : name + 6;
    if (!strcmp(v4, "embed.weight") || !strcmp(v4, "head.weight")) return o->fmt.embed_fmt;
    if (!strncmp(v4, "layers.", 7) && strstr(v4, ".ffn.experts.")) return o->fmt.experts_fmt;
    if (!strncmp(v4, "layers.", 7) && strstr(v4, ".ffn.shared_experts.")) return o->fmt.dense_fmt;
    static const char *const dense[] = { ".self_attn.q_a_proj.weight", ".self_attn.q_b_proj.weight",
                                         ".self_attn.q_proj.weight", ".self_attn.kv_a_proj_with_mqa.weight",
                                         ".self_attn.kv_b_proj.weight", ".self_attn.o_proj.weight",
                                         ".mlp.gate_proj.weight", ".mlp.up_proj.weight", ".mlp.down_proj.weight",
                                         ".attn.wq_a.weight", ".attn.wq_b.weight", ".attn.wkv.weight",
                                         ".attn.wo_a.weight", ".attn.wo_b.weight", ".compressor.wkv.weight",
                                         ".compressor.wgate.weight", ".indexer.wq_b.weight",
                                         ".indexer.weights_proj.weight" };
    for (size_t i = 0; i < sizeof dense / sizeof dense[0]; i++) {
        size_t n = strlen(name), k = strlen(dense[i]);
        if (n > k && !strcmp(name + n - k, dense[i])) return o->fmt.dense_fmt;
    }
    return MODEL_FMT_AS_STORED;
}

/* The format a tensor is written in: its role's, or o->mtp_fmt (if set) for the
 * matrices of a layer past the trunk's n_trunk (an MTP layer). */
static int role_format(const struct convert_opts *o, const char *name, int n_trunk)
{
    int fmt = trunk_role_format(o, name), layer, end = 0;
    if (!o->mtp_set || sscanf(name, "model.layers.%d.%n", &layer, &end) != 1 || !end ||
        layer < n_trunk)
        return fmt;
    size_t n = strlen(name), k = strlen(".eh_proj.weight");
    return fmt != MODEL_FMT_AS_STORED || (n > k && !strcmp(name + n - k, ".eh_proj.weight")) ? o->mtp_fmt : fmt;
}

static int is_float_dtype(enum st_dtype d) { return d == ST_F32 || d == ST_BF16 || d == ST_F16 || d == ST_F8_E4M3; }

static const struct st_tensor *st_find_cb(void *ctx, const char *name) { return st_find(ctx, name); }

/* 1 if t is a Linear weight in model/shipped.h's MXFP4 or e8m0-scaled FP8
 * (with its `.scale` / `.weight_scale_inv` beside it in st). */
static int is_shipped(const struct st_set *st, const struct st_tensor *t)
{
    struct model_shipped_src s = { st_find_cb, (void *)st, NULL };
    size_t len = strlen(t->name);
    if (t->ndim != 2 || len < 7 || strcmp(t->name + len - 7, ".weight")) return 0;
    if (t->dtype == ST_F8_E4M3) return model_shipped_fp8_e8m0_scale(&s, t) != NULL;
    if (!model_shipped_is_mxfp4(t)) return 0;
    char sn[600];
    snprintf(sn, sizeof sn, "%.*s.scale", (int)(len - 7), t->name);
    if (st_find(st, sn)) return 1;
    snprintf(sn, sizeof sn, "%s_scale_inv", t->name);
    return st_find(st, sn) != NULL;
}

/* A shipped weight's exact f32 values (model/shipped.h reads it, every
 * check included; its dequantization is exact in f32). */
static int shipped_to_f32(const struct st_set *st, const struct st_tensor *t, int rows, int cols, float **out,
                          struct colibri_err *err)
{
    struct model_shipped_src s = { st_find_cb, (void *)st, NULL };
    struct qtensor q;
    int rc = model_shipped_is_mxfp4(t) ? model_shipped_mxfp4(&s, t, rows, cols, &q, err)
                                       : model_shipped_fp8_e8m0(&s, t, rows, cols, &q, err);
    if (rc) return rc;
    float *w = malloc((size_t)rows * cols * sizeof *w);
    if (!w) rc = base_err_set(err, COLIBRI_ENOMEM, "tensor '%s': out of memory", t->name);
    else quant_dequant_rows(&q, 0, rows, w);
    quant_qtensor_free(&q);
    *out = w;
    return rc;
}

/* Makes `it` a weight [rows, cols] written in fmt: the data tensor, and its
 * scales when the format has them. */
static void set_weight_outputs(struct item *it, const char *name, int rows, int cols, int fmt)
{
    it->kind = ITEM_WEIGHT;
    it->fmt = fmt;
    it->rows = rows;
    it->cols = cols;
    size_t data = quant_fmt_data_bytes(fmt, rows, cols);
    size_t ns = quant_fmt_scale_count(fmt, rows, cols);
    snprintf(it->names[0], sizeof it->names[0], "%s", name);
    struct st_out_tensor *d = &it->out[0];
    *d = (struct st_out_tensor){ it->names[0], ST_U8, 2, { rows, 0 }, data };
    if (fmt == QUANT_F32 || fmt == QUANT_BF16 || fmt == QUANT_F16 || fmt == QUANT_FP8B) {
        d->dtype = fmt == QUANT_F32 ? ST_F32 : fmt == QUANT_BF16 ? ST_BF16 : fmt == QUANT_F16 ? ST_F16 : ST_F8_E4M3;
        d->shape[1] = cols;
    } else {
        d->shape[1] = (int64_t)quant_fmt_row_bytes(fmt, cols);
    }
    it->n_out = 1;
    if (ns) {
        snprintf(it->names[1], sizeof it->names[1], "%s%s", name, fmt == QUANT_FP8B ? "_scale_inv" : "_scale");
        struct st_out_tensor *sc = &it->out[1];
        *sc = (struct st_out_tensor){ it->names[1], ST_F32, 1, { (int64_t)ns }, quant_fmt_scale_bytes(fmt, rows, cols) };
        if (quant_fmt_traits(fmt)->scale_e8m0) sc->dtype = ST_U8;
        if (fmt == QUANT_FP8B) {
            sc->ndim = 2;
            sc->shape[0] = (rows + 127) / 128;
            sc->shape[1] = (cols + 127) / 128;
        }
        it->n_out = 2;
    }
}

/* Decides each source tensor's fate. A weight whose format changes drops its
 * `_scale_inv` companion (it is folded into the conversion). */
static int make_plan(const struct st_set *st, const struct convert_opts *o, int n_trunk, struct item *items,
                     int *n_items, struct colibri_err *err)
{
    int n = 0;
    for (int i = 0; i < st->n_tensors; i++) {
        const struct st_tensor *t = &st->tensors[i];
        size_t len = strlen(t->name);
        if (len > 10 && !strcmp(t->name + len - 10, "_scale_inv")) {
            char wname[512];
            snprintf(wname, sizeof wname, "%.*s", (int)(len - 10), t->name);
            const struct st_tensor *w = st_find(st, wname);
            if (w && w->ndim == 2 && is_float_dtype(w->dtype) && role_format(o, wname, n_trunk) != MODEL_FMT_AS_STORED)
                continue;
        }
        /* a shipped weight's scales go with it: folded into a re-encoding, else copied */
        if ((len > 6 && !strcmp(t->name + len - 6, ".scale")) || (len > 10 && !strcmp(t->name + len - 10, "_scale_inv"))) {
            char wname[600];
            snprintf(wname, sizeof wname, "%.*s%s", (int)(len - (t->name[len - 1] == 'v' ? 10 : 6)), t->name,
                     t->name[len - 1] == 'v' ? "" : ".weight");
            const struct st_tensor *w = st_find(st, wname);
            if (w && is_shipped(st, w) && role_format(o, wname, n_trunk) != MODEL_FMT_AS_STORED) continue;
        }
        /* MXFP4 and e8m0-scaled FP8 are dequantized exactly and re-encoded (or copied as stored);
         * compressed-tensors int4 is not */
        int shipped = is_shipped(st, t);
        if (t->dtype == ST_F4 || (t->dtype == ST_I8 && strstr(t->name, ".weight") && !shipped) ||
            (len > 14 && !strcmp(t->name + len - 14, ".weight_packed")))
            return base_err_set(err, COLIBRI_EUNSUPPORTED,
                           "tensor '%s' is %s as shipped (MXFP4 without its scales, or compressed-tensors int4): "
                           "colibri loads it as it is; converting such a checkpoint is not implemented", t->name,
                           st_dtype_name(t->dtype));
        if (strstr(t->name, "colibri") || (t->dtype == ST_U8 && len > 6 && strstr(t->name, ".weight") && !shipped))
            return base_err_set(err, COLIBRI_EUNSUPPORTED,
                           "tensor '%s' looks already converted; convert from the original checkpoint", t->name);
        struct item *it = &items[n++];
        memset(it, 0, sizeof *it);
        it->src = t;
        int fmt = t->ndim == 2 && (is_float_dtype(t->dtype) || shipped) ? role_format(o, t->name, n_trunk)
                                                                        : MODEL_FMT_AS_STORED;
        if (fmt == MODEL_FMT_AS_STORED) {
            it->kind = ITEM_COPY;
            it->n_out = 1;
            snprintf(it->names[0], sizeof it->names[0], "%s", t->name);
            it->out[0] = (struct st_out_tensor){ it->names[0], t->dtype, t->ndim, { 0 }, t->nbytes };
            memcpy(it->out[0].shape, t->shape, sizeof t->shape);
            continue;
        }
        /* MXFP4 codes in I8 / U8 hold two columns a byte */
        int pack = shipped && (t->dtype == ST_I8 || t->dtype == ST_U8) ? 2 : 1;
        set_weight_outputs(it, t->name, (int)t->shape[0], (int)t->shape[1] * pack, fmt);
    }
    /* tensors whose size is not a multiple of 4 (a copied e8m0 block-scale
     * grid [1, 2]) go last, so that every f32 scale written after them stays
     * 4-byte aligned; a routed expert's tensors keep their place (one extent) */
    int m = 0;
    struct item tmp;
    for (int i = 0; i < n; i++) {
        const struct item *it = &items[i];
        int odd = it->n_out == 1 && it->out[0].nbytes % 4 && !strstr(it->names[0], ".experts.");
        if (odd) continue;
        if (i != m) {
            tmp = items[i];
            memmove(&items[m + 1], &items[m], (size_t)(i - m) * sizeof *items);
            items[m] = tmp;
        }
        m++;
    }
    for (int i = 0; i < n; i++)     /* each output names itself from its own item */
        for (int k = 0; k < items[i].n_out; k++) items[i].out[k].name = items[i].names[k];
    *n_items = n;
    return 0;
}

static uint64_t plan_hash(const struct item *items, int n, int shard, const struct convert_opts *o)
{
    XXH64_state_t *h = XXH64_createState();
    XXH64_reset(h, 0x636f6e76ull);
    /* the three formats only, as 12 bytes (what earlier versions hashed):
     * the load options after them do not change a conversion, and the
     * struct's padding must never reach a hash */
    const int fmts[3] = { o->fmt.experts_fmt, o->fmt.dense_fmt, o->fmt.embed_fmt };
    XXH64_update(h, fmts, sizeof fmts);
    /* hashed only when set, so that earlier conversions' shards are still kept */
    if (o->mtp_set) XXH64_update(h, &o->mtp_fmt, sizeof o->mtp_fmt);
    XXH64_update(h, &shard, sizeof shard);
    for (int i = 0; i < n; i++) {
        if (items[i].shard != shard) continue;
        const struct item *it = &items[i];
        if (!it->src) {
            XXH64_update(h, it->names[0], strlen(it->names[0]) + 1);
            XXH64_update(h, it->out[0].shape, sizeof it->out[0].shape);
            XXH64_update(h, &it->gen, sizeof it->gen);
            XXH64_update(h, &it->seed, sizeof it->seed);
            XXH64_update(h, &it->fmt, sizeof it->fmt);
            if (it->release) XXH64_update(h, &it->release, sizeof it->release);
            continue;
        }
        XXH64_update(h, it->src->name, strlen(it->src->name) + 1);
        XXH64_update(h, &it->src->dtype, sizeof it->src->dtype);
        XXH64_update(h, it->src->shape, sizeof it->src->shape);
        /* The source bytes' identity without reading them all: size and a
         * hash of the first and last 4 KiB. */
        size_t k = it->src->nbytes < 4096 ? it->src->nbytes : 4096;
        XXH64_update(h, it->src->data, k);
        XXH64_update(h, (const uint8_t *)it->src->data + it->src->nbytes - k, k);
        XXH64_update(h, &it->fmt, sizeof it->fmt);
    }
    uint64_t v = XXH64_digest(h);
    XXH64_freeState(h);
    return v;
}

/* Writes `bytes` and folds them into *hash. */
static int put(FILE *f, const void *p, size_t n, XXH64_state_t *h)
{
    XXH64_update(h, p, n);
    return fwrite(p, 1, n, f) == n ? 0 : -1;
}

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static double uniform01(uint64_t *x) { return ((splitmix64(x) >> 11) + 0.5) * (1.0 / 9007199254740992.0); }

/* Draws n values for a synthetic item: Linear weights N(0,1)/sqrt(fan_in),
 * embeddings N(0,1), norm weights U[0.5,1.5], correction biases U[0,0.3]
 * (the non-degenerate initialization of model-spec.md §7). */
static float *generate(const struct item *it, int64_t n)
{
    float *w = malloc((size_t)(n > 0 ? n : 1) * sizeof *w);
    if (!w) return NULL;
    uint64_t x = it->seed ^ XXH64(it->names[0], strlen(it->names[0]), 0);
    double sd = it->gen == GEN_LINEAR ? 1.0 / sqrt((double)it->cols) : 1.0;
    for (int64_t i = 0; i < n; i++) {
        if (it->gen == GEN_NORM) { w[i] = (float)(0.5 + uniform01(&x)); continue; }
        if (it->gen == GEN_BIAS) { w[i] = (float)(0.3 * uniform01(&x)); continue; }
        double u1 = uniform01(&x), u2 = uniform01(&x);
        w[i] = (float)(sd * sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
    }
    return w;
}

/* w [rows][cols] as DeepSeek's FP8: each 128x128 block scaled by the power
 * of two 2^ceil(log2(amax / 448)) (so no code saturates), e4m3 codes and
 * e8m0 exponents (2^(e - 127)). Held in a qtensor whose `scales` array holds
 * the exponent bytes, for writing only. */
static int fp8_ue8m0(int rows, int cols, const float *w, struct qtensor *q, struct colibri_err *err)
{
    int br = (rows + 127) / 128, bc = (cols + 127) / 128;
    uint8_t *d = malloc((size_t)rows * cols), *e = malloc((size_t)br * bc);
    if (!d || !e) {
        free(d);
        free(e);
        return base_err_set(err, COLIBRI_ENOMEM, "out of memory");
    }
    for (int bi = 0; bi < br; bi++)
        for (int bj = 0; bj < bc; bj++) {
            int r1 = bi * 128 + 128 < rows ? bi * 128 + 128 : rows, c1 = bj * 128 + 128 < cols ? bj * 128 + 128 : cols;
            float amax = 0;
            for (int r = bi * 128; r < r1; r++)
                for (int c = bj * 128; c < c1; c++) amax = fmaxf(amax, fabsf(w[(size_t)r * cols + c]));
            int x = amax > 0 ? (int)ceil(log2((double)amax / 448.0)) : -127;
            x = x < -126 ? -126 : x > 127 ? 127 : x;
            e[bi * bc + bj] = (uint8_t)(x + 127);
            float inv = (float)ldexp(1.0, -x);
            for (int r = bi * 128; r < r1; r++)
                for (int c = bj * 128; c < c1; c++)
                    d[(size_t)r * cols + c] = quant_fp8_e4m3_encode(w[(size_t)r * cols + c] * inv);
        }
    *q = (struct qtensor){ .fmt = QUANT_FP8B, .rows = rows, .cols = cols, .data = d, .scales = (const float *)e,
                           .owned = 1 };
    return 0;
}

static int write_item(FILE *f, const struct st_set *st, struct item *it, const char *path, struct colibri_err *err)
{
    XXH64_state_t *h = XXH64_createState();
    int rc = 0;
    if (it->gen == GEN_TID2EID) {
        /* a hash layer's table: each token's K distinct experts, uniform over 0..cols-1 */
        int64_t rows = it->out[0].shape[0], K = it->out[0].shape[1];
        int64_t *t = malloc((size_t)(rows * K) * sizeof *t);
        uint64_t x = it->seed ^ XXH64(it->names[0], strlen(it->names[0]), 0);
        XXH64_reset(h, 0);
        if (!t) rc = base_err_set(err, COLIBRI_ENOMEM, "%s: out of memory", path);
        for (int64_t r = 0; t && r < rows; r++)
            for (int64_t k = 0; k < K; k++) {
                int64_t e, j;
                do {
                    e = (int64_t)(splitmix64(&x) % (uint64_t)it->cols);
                    for (j = 0; j < k && t[r * K + j] != e; j++) {}
                } while (j < k);
                t[r * K + k] = e;
            }
        if (t && put(f, t, it->out[0].nbytes, h)) rc = base_err_set(err, COLIBRI_EIO, "%s: write failed", path);
        it->hash[0] = XXH64_digest(h);
        free(t);
    } else if (it->kind == ITEM_COPY && it->gen != GEN_NONE) {
        float *w = generate(it, (int64_t)(it->out[0].nbytes / 4));
        XXH64_reset(h, 0);
        if (!w) rc = base_err_set(err, COLIBRI_ENOMEM, "%s: out of memory", path);
        else if (put(f, w, it->out[0].nbytes, h)) rc = base_err_set(err, COLIBRI_EIO, "%s: write failed", path);
        it->hash[0] = XXH64_digest(h);
        free(w);
    } else if (it->kind == ITEM_COPY) {
        XXH64_reset(h, 0);
        if (put(f, it->src->data, it->src->nbytes, h)) rc = base_err_set(err, COLIBRI_EIO, "%s: write failed", path);
        it->hash[0] = XXH64_digest(h);
    } else {
        float *w;
        struct qtensor q;
        if (it->gen != GEN_NONE) {
            if (!(w = generate(it, (int64_t)it->rows * it->cols))) {
                rc = base_err_set(err, COLIBRI_ENOMEM, "%s: out of memory", path);
                goto out;
            }
        } else if ((rc = is_shipped(st, it->src) ? shipped_to_f32(st, it->src, it->rows, it->cols, &w, err)
                                                 : model_tensor_to_f32(st, it->src, it->rows, it->cols, &w, err))) {
            goto out;
        }
        rc = it->release == MODEL_SHIPPED_FP8 ? fp8_ue8m0(it->rows, it->cols, w, &q, err)
                                              : quant_qtensor_from_f32((enum quant_fmt)it->fmt, it->rows, it->cols, w,
                                                                       &q, err);
        free(w);
        if (rc) goto out;
        XXH64_reset(h, 0);
        if (put(f, q.data, it->out[0].nbytes, h)) rc = base_err_set(err, COLIBRI_EIO, "%s: write failed", path);
        it->hash[0] = XXH64_digest(h);
        if (!rc && it->n_out == 2) {
            XXH64_reset(h, 0);
            if (put(f, q.scales, it->out[1].nbytes, h)) rc = base_err_set(err, COLIBRI_EIO, "%s: write failed", path);
            it->hash[1] = XXH64_digest(h);
        }
        quant_qtensor_free(&q);
    }
out:
    XXH64_freeState(h);
    return rc;
}

/* 1 when both tensors belong to one routed expert ("...mlp.experts.E."):
 * a shard is never cut between them, so that every expert is one extent of
 * one file (name order already keeps its tensors together) and a streamed
 * store reads it in one piece (docs/FORMATS.md). */
static int same_expert(const char *a, const char *b)
{
    const char *ea = strstr(a, ".experts."), *eb = strstr(b, ".experts.");
    if (!ea || !eb || ea - a != eb - b) return 0;
    const char *da = strchr(ea + 9, '.'), *db = strchr(eb + 9, '.');
    return da && db && da - a == db - b && !strncmp(a, b, (size_t)(da - a));
}

/* A finished shard from an earlier run with the same plan is kept. */
static int shard_is_done(const char *path, const char *want_plan)
{
    struct st_set s = { 0 };
    struct colibri_err e;
    if (st_open_file(path, &s, &e)) return 0;
    const char *plan = s.n_tensors ? st_tensor_meta(&s, &s.tensors[0], "colibri.plan") : NULL;
    int ok = plan && !strcmp(plan, want_plan);
    st_close(&s);
    return ok;
}

static int write_shard(const struct io_fs *io, const char *dst, const char *fname, const struct st_set *st,
                       struct item *items, int n, int shard, const char *plan, struct progress *pr, uint64_t *done,
                       struct colibri_err *err)
{
    char path[4096], tmp[4200];
    snprintf(path, sizeof path, "%s/%s", dst, fname);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    int cap = 0;
    for (int i = 0; i < n; i++) cap += items[i].shard == shard ? items[i].n_out : 0;
    struct st_out_tensor *outs = malloc((size_t)(cap + 1) * sizeof *outs);
    const char **meta = malloc((size_t)(2 * cap + 2) * sizeof *meta);
    char (*keys)[600] = malloc((size_t)(cap + 1) * sizeof *keys);
    if (!outs || !meta || !keys) {
        free(outs); free(meta); free(keys);
        return base_err_set(err, COLIBRI_ENOMEM, "%s: out of memory", path);
    }
    int no = 0, n_meta = 1;
    meta[0] = "colibri.plan";
    meta[1] = plan;
    for (int i = 0; i < n; i++) {
        if (items[i].shard != shard) continue;
        for (int k = 0; k < items[i].n_out; k++) outs[no++] = items[i].out[k];
        if (items[i].out[0].dtype == ST_U8) {
            snprintf(keys[n_meta], 600, "colibri.fmt.%s", items[i].names[0]);
            meta[2 * n_meta] = keys[n_meta];
            meta[2 * n_meta + 1] = quant_fmt_name((enum quant_fmt)items[i].fmt);
            n_meta++;
        }
    }
    struct io_stdio *file = NULL;
    FILE *f = io_stdio_create(io, tmp, &file);
    int rc = f ? st_write_header(f, tmp, outs, no, meta, n_meta, err)
               : base_err_set(err, COLIBRI_EIO, "%s: cannot create: %s", tmp, strerror(errno));
    free(outs); free(meta); free(keys);
    if (!f) return rc;
    for (int i = 0; i < n && !rc; i++) {
        if (items[i].shard != shard) continue;
        rc = write_item(f, st, &items[i], tmp, err);
        for (int k = 0; k < items[i].n_out; k++) *done += items[i].out[k].nbytes;
        if (pr) base_progress_update(pr, *done);
    }
    if (!rc && io_stdio_commit(f, file)) rc = base_err_set(err, COLIBRI_EIO, "%s: flush failed: %s", tmp, strerror(errno));
    if (fclose(f) && !rc) rc = base_err_set(err, COLIBRI_EIO, "%s: close failed", tmp);
    int rn = rc ? 0 : io->rename(io, tmp, path);
    if (rn) rc = base_err_set(err, COLIBRI_EIO, "%s: rename failed: %s", path, strerror(-rn));
    if (rc) unlink(tmp);
    return rc;
}

/* Reads every written tensor back and compares its hash. */
static int verify_shard(const char *dst, const char *fname, const struct item *items, int n, int shard,
                        struct colibri_err *err)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dst, fname);
    struct st_set s = { 0 };
    int rc = st_open_file(path, &s, err);
    for (int i = 0; i < n && !rc; i++) {
        if (items[i].shard != shard) continue;
        for (int k = 0; k < items[i].n_out && !rc; k++) {
            const struct st_tensor *t = st_find(&s, items[i].names[k]);
            if (!t || t->nbytes != items[i].out[k].nbytes || XXH64(t->data, t->nbytes, 0) != items[i].hash[k])
                rc = base_err_set(err, COLIBRI_EIO, "%s: tensor '%s' did not read back as written", path, items[i].names[k]);
        }
    }
    st_close(&s);
    return rc;
}

static int copy_file(const struct io_fs *io, const char *src, const char *dst, const char *name, int required,
                     struct colibri_err *err)
{
    char a[4096], b[4096];
    snprintf(a, sizeof a, "%s/%s", src, name);
    snprintf(b, sizeof b, "%s/%s", dst, name);
    size_t len;
    char *buf = base_read_file_all(a, &len);
    if (!buf) return required ? base_err_set(err, COLIBRI_EIO, "%s: cannot read: %s", a, strerror(errno)) : 0;
    int rc = io_stdio_write_atomic(io, b, buf, len, err);
    free(buf);
    return rc;
}

/* Shards of an earlier conversion with another shard count are not part of
 * this container any more. */
static void remove_stale_shards(const char *dst, int n_shards)
{
    DIR *d = opendir(dst);
    if (!d) return;
    struct dirent *de;
    char keep[32], path[4096];
    snprintf(keep, sizeof keep, "-of-%05d.safetensors", n_shards);
    while ((de = readdir(d))) {
        int a, b;
        size_t len = strlen(de->d_name);
        if (sscanf(de->d_name, "model-%5d-of-%5d.safetensors", &a, &b) == 2 && len == 32 &&
            strcmp(de->d_name + 11, keep)) {
            snprintf(path, sizeof path, "%s/%s", dst, de->d_name);
            unlink(path);
        }
    }
    closedir(d);
}

static int write_index(const struct io_fs *io, const char *dst, const struct item *items, int n, int n_shards,
                       uint64_t total, struct colibri_err *err)
{
    cJSON *root = cJSON_CreateObject(), *meta = cJSON_AddObjectToObject(root, "metadata");
    cJSON_AddNumberToObject(meta, "total_size", (double)total);
    cJSON *wm = cJSON_AddObjectToObject(root, "weight_map");
    char fname[64];
    for (int i = 0; i < n; i++)
        for (int k = 0; k < items[i].n_out; k++) {
            snprintf(fname, sizeof fname, "model-%05d-of-%05d.safetensors", items[i].shard + 1, n_shards);
            cJSON_AddStringToObject(wm, items[i].names[k], fname);
        }
    char *json = cJSON_Print(root);
    cJSON_Delete(root);
    if (!json) return base_err_set(err, COLIBRI_ENOMEM, "%s: out of memory for the index", dst);
    char path[4096];
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", dst);
    int rc = io_stdio_write_atomic(io, path, json, strlen(json), err);
    free(json);
    return rc;
}

/* Assigns items to shards, writes (or keeps) every shard, the index and the
 * side files, and checks the result opens as a checkpoint. */
static int write_container(const char *src, const char *dst, const struct st_set *st, struct item *items, int n,
                           const struct convert_opts *o, struct convert_report *rep, struct colibri_err *err)
{
    int rc = 0;
    const struct io_fs *io = o->io ? o->io : io_fs_posix();
    if (mkdir(dst, 0755) && errno != EEXIST)
        return base_err_set(err, COLIBRI_EIO, "%s: cannot create directory: %s", dst, strerror(errno));
    uint64_t limit = o->shard_bytes ? o->shard_bytes : (4ull << 30), cur = 0, total = 0;
    int shard = 0;
    for (int i = 0; i < n; i++) {
        uint64_t b = items[i].out[0].nbytes + (items[i].n_out > 1 ? items[i].out[1].nbytes : 0);
        /* output names: a synthetic item has no source tensor */
        if (cur && cur + b > limit && !same_expert(items[i - 1].out[0].name, items[i].out[0].name)) { shard++; cur = 0; }
        items[i].shard = shard;
        cur += b;
        total += b;
    }
    int n_shards = shard + 1;
    struct progress pr;
    if (o->show_progress) base_progress_start(&pr, "writing", total);
    uint64_t done = 0;
    for (int s = 0; s < n_shards && !rc; s++) {
        char fname[64], plan[32];
        snprintf(fname, sizeof fname, "model-%05d-of-%05d.safetensors", s + 1, n_shards);
        snprintf(plan, sizeof plan, "%016llx", (unsigned long long)plan_hash(items, n, s, o));
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dst, fname);
        if (shard_is_done(path, plan)) {
            rep->shards_reused++;
            for (int i = 0; i < n; i++)
                if (items[i].shard == s) done += items[i].out[0].nbytes + (items[i].n_out > 1 ? items[i].out[1].nbytes : 0);
            if (o->show_progress) base_progress_update(&pr, done);
            continue;
        }
        rc = write_shard(io, dst, fname, st, items, n, s, plan, o->show_progress ? &pr : NULL, &done, err);
        if (!rc) rc = verify_shard(dst, fname, items, n, s, err);
    }
    if (o->show_progress) base_progress_end(&pr);
    if (!rc) rc = write_index(io, dst, items, n, n_shards, total, err);
    if (!rc) remove_stale_shards(dst, n_shards);
    if (!rc && src) rc = copy_file(io, src, dst, "config.json", 1, err);
    if (!rc && src) rc = copy_file(io, src, dst, "tokenizer.json", 0, err);
    if (!rc && src) rc = copy_file(io, src, dst, "tokenizer_config.json", 0, err);
    if (!rc && src) rc = copy_file(io, src, dst, "generation_config.json", 0, err);
    if (!rc) {
        /* The whole container must open as a checkpoint. */
        struct st_set check = { 0 };
        rc = st_open_dir(dst, &check, err);
        st_close(&check);
    }
    rep->shards = n_shards;
    rep->tensors = n;
    rep->bytes = total;
    return rc;
}

/* dst/config.json without quantization_config and expert_dtype: DeepSeek-V4's
 * loader holds every tensor of a config that declares the release's
 * encodings to the release layout, which a re-encoded tensor no longer
 * follows (the FP8 / FP4 tensors kept are still read by their dtype). */
static int drop_quant_config(const struct io_fs *io, const char *dst, struct colibri_err *err)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/config.json", dst);
    size_t len;
    char *buf = base_read_file_all(path, &len);
    cJSON *root = buf ? cJSON_ParseWithLength(buf, len) : NULL;
    free(buf);
    if (!root) return base_err_set(err, COLIBRI_EIO, "%s: cannot read back", path);
    cJSON_DeleteItemFromObjectCaseSensitive(root, "quantization_config");
    cJSON_DeleteItemFromObjectCaseSensitive(root, "expert_dtype");
    char *json = cJSON_Print(root);
    cJSON_Delete(root);
    if (!json) return base_err_set(err, COLIBRI_ENOMEM, "%s: out of memory", path);
    int rc = io_stdio_write_atomic(io, path, json, strlen(json), err);
    free(json);
    return rc;
}

int model_convert(const char *src, const char *dst, const struct convert_opts *o, struct convert_report *rep,
                  struct colibri_err *err)
{
    memset(rep, 0, sizeof *rep);
    struct model_config cfg;
    int rc = model_config_load(src, &cfg, err);
    if (rc) return rc;
    struct st_set st = { 0 };
    if ((rc = st_open_dir(src, &st, err))) return rc;
    struct item *items = calloc((size_t)st.n_tensors + 1, sizeof *items);
    int n = 0;
    if (!items) rc = base_err_set(err, COLIBRI_ENOMEM, "out of memory");
    if (!rc) rc = make_plan(&st, o, cfg.num_hidden_layers, items, &n, err);
    if (!rc) rc = write_container(src, dst, &st, items, n, o, rep, err);
    int reencoded = 0;
    for (int i = 0; i < n; i++) reencoded |= items[i].kind == ITEM_WEIGHT && is_shipped(&st, items[i].src);
    if (!rc && reencoded && cfg.attn_kind == MODEL_ATTN_V4 && cfg.quant.kind != MODEL_QUANT_NONE)
        rc = drop_quant_config(o->io ? o->io : io_fs_posix(), dst, err);
    free(items);
    st_close(&st);
    return rc;
}

/* Appends a synthetic item: a weight in the role's format (AS_STORED: bf16),
 * or an f32 vector (cols == 0). */
static void add_synth(struct item *items, int *n, const char *name, int rows, int cols, int fmt, enum gen_kind gen,
                      uint64_t seed)
{
    struct item *it = &items[(*n)++];
    memset(it, 0, sizeof *it);
    it->gen = gen;
    it->seed = seed;
    if (cols) {
        set_weight_outputs(it, name, rows, cols, fmt == MODEL_FMT_AS_STORED ? QUANT_BF16 : fmt);
        return;
    }
    it->kind = ITEM_COPY;
    it->n_out = 1;
    snprintf(it->names[0], sizeof it->names[0], "%s", name);
    it->out[0] = (struct st_out_tensor){ it->names[0], ST_F32, 1, { rows }, (uint64_t)rows * 4 };
}

/* model_synth_glm53's callback: counts (items NULL) or appends. */
struct glm53_sink {
    struct item *items;
    int n;
    uint64_t seed;
};

static void glm53_add(void *ctx, const char *name, int rows, int cols, int fmt, enum synth_draw draw)
{
    struct glm53_sink *s = ctx;
    const enum gen_kind g[] = { [SYNTH_LINEAR] = GEN_LINEAR, [SYNTH_NORM] = GEN_NORM, [SYNTH_BIAS] = GEN_BIAS,
                                [SYNTH_EMBED] = GEN_EMBED };
    if (s->items) add_synth(s->items, &s->n, name, rows, cols, fmt, g[draw], s->seed);
    else s->n++;
}

/* add_synth for DeepSeek-V4: with the release's quantization_config in the
 * config, the tensors it stores in FP8 / FP4 (model_shipped_v4_kind) are
 * written so: F8_E4M3 + `.scale` F8_E8M0 [ceil(rows/128), ceil(cols/128)],
 * or e2m1 codes I8 [rows, cols/2] + `.scale` F8_E8M0 [rows, cols/32]. */
static void add_v4(const struct model_config *c, struct item *items, int *n, const char *name, int rows, int cols,
                   int fmt, enum gen_kind gen, uint64_t seed)
{
    int k = cols && c->quant.kind == MODEL_QUANT_FP8_BLOCK ? model_shipped_v4_kind(name, c->v4_expert_fp4)
                                                           : MODEL_SHIPPED_FLOAT;
    if (k == MODEL_SHIPPED_FLOAT) {
        add_synth(items, n, name, rows, cols, fmt, gen, seed);
        return;
    }
    struct item *it = &items[(*n)++];
    add_synth(it, &(int){ 0 }, name, rows, cols, k == MODEL_SHIPPED_FP8 ? QUANT_FP8B : QUANT_MXFP4, gen, seed);
    it->release = k;
    size_t len = strlen(name);
    snprintf(it->names[1], sizeof it->names[1], "%.*s.scale", (int)(len - 7), name);
    if (k == MODEL_SHIPPED_FP8) {
        it->out[1] = (struct st_out_tensor){ it->names[1], ST_F8_E8M0, 2, { (rows + 127) / 128, (cols + 127) / 128 },
                                             (uint64_t)((rows + 127) / 128) * (uint64_t)((cols + 127) / 128) };
    } else {
        it->out[0].dtype = ST_I8;
        it->out[1] = (struct st_out_tensor){ it->names[1], ST_F8_E8M0, 2, { rows, cols / 32 },
                                             (uint64_t)rows * (uint64_t)(cols / 32) };
    }
}

/* DeepSeek-V4's tensors in the official checkpoint names (no "model."
 * prefix; model/mixer_v4.c, moe_v4.c and residual_hyper.c read them), each
 * shape as those loaders expect: the hyper-connection mixers, position
 * biases (ape) and router stay f32, a hash layer gets an I64 tid2eid. */
static int synth_v4_items(const struct model_config *c, const struct convert_opts *o, uint64_t seed,
                          struct item **out, int *n_out, struct colibri_err *err)
{
    int hid = c->hidden_size, E = c->n_routed_experts, L = c->num_hidden_layers, H = c->num_attention_heads;
    int D = c->head_dim, Q = c->q_lora_rank, GR = c->o_groups * c->o_lora_rank, I = c->moe_intermediate_size;
    int ns = c->hc_mult, mix = (2 + ns) * ns, Hi = c->index_n_heads, Di = c->index_head_dim;
    int ef = o->fmt.embed_fmt, df = o->fmt.dense_fmt, xf = o->fmt.experts_fmt, n = 0;
    struct item *items = calloc((size_t)(8 + (int64_t)L * (48 + 3 * (int64_t)E)), sizeof *items);
    if (!items) return base_err_set(err, COLIBRI_ENOMEM, "out of memory");
    char nm[512];
    add_v4(c, items, &n, "embed.weight", c->vocab_size, hid, ef, GEN_EMBED, seed);
    add_v4(c, items, &n, "head.weight", c->vocab_size, hid, ef, GEN_LINEAR, seed);
    add_v4(c, items, &n, "norm.weight", hid, 0, 0, GEN_NORM, seed);
    add_v4(c, items, &n, "hc_head_fn", ns, ns * hid, QUANT_F32, GEN_LINEAR, seed);
    add_v4(c, items, &n, "hc_head_base", ns, 0, 0, GEN_BIAS, seed);
    add_v4(c, items, &n, "hc_head_scale", 1, 0, 0, GEN_NORM, seed);
    for (int l = 0; l < L; l++) {
#define N(fmt_) (snprintf(nm, sizeof nm, "layers.%d." fmt_, l), nm)
        add_v4(c, items, &n, N("attn_norm.weight"), hid, 0, 0, GEN_NORM, seed);
        add_v4(c, items, &n, N("ffn_norm.weight"), hid, 0, 0, GEN_NORM, seed);
        add_v4(c, items, &n, N("hc_attn_fn"), mix, ns * hid, QUANT_F32, GEN_LINEAR, seed);
        add_v4(c, items, &n, N("hc_attn_base"), mix, 0, 0, GEN_BIAS, seed);
        add_v4(c, items, &n, N("hc_attn_scale"), 3, 0, 0, GEN_NORM, seed);
        add_v4(c, items, &n, N("hc_ffn_fn"), mix, ns * hid, QUANT_F32, GEN_LINEAR, seed);
        add_v4(c, items, &n, N("hc_ffn_base"), mix, 0, 0, GEN_BIAS, seed);
        add_v4(c, items, &n, N("hc_ffn_scale"), 3, 0, 0, GEN_NORM, seed);
        add_v4(c, items, &n, N("attn.wq_a.weight"), Q, hid, df, GEN_LINEAR, seed);
        add_v4(c, items, &n, N("attn.q_norm.weight"), Q, 0, 0, GEN_NORM, seed);
        add_v4(c, items, &n, N("attn.wq_b.weight"), H * D, Q, df, GEN_LINEAR, seed);
        add_v4(c, items, &n, N("attn.wkv.weight"), D, hid, df, GEN_LINEAR, seed);
        add_v4(c, items, &n, N("attn.kv_norm.weight"), D, 0, 0, GEN_NORM, seed);
        add_v4(c, items, &n, N("attn.wo_a.weight"), GR, H * D / c->o_groups, df, GEN_LINEAR, seed);
        add_v4(c, items, &n, N("attn.wo_b.weight"), hid, GR, df, GEN_LINEAR, seed);
        add_v4(c, items, &n, N("attn.attn_sink"), H, 0, 0, GEN_BIAS, seed);
        int type = c->v4_layer_type[l], r = c->compress_ratio[l];
        if (type != MODEL_V4_SLIDING) {
            /* a CSA compressor keeps two overlapping halves per entry, so twice the width */
            int w = type == MODEL_V4_CSA ? 2 * D : D;
            add_v4(c, items, &n, N("attn.compressor.wkv.weight"), w, hid, df, GEN_LINEAR, seed);
            add_v4(c, items, &n, N("attn.compressor.wgate.weight"), w, hid, df, GEN_LINEAR, seed);
            add_v4(c, items, &n, N("attn.compressor.ape"), r, w, QUANT_F32, GEN_LINEAR, seed);
            add_v4(c, items, &n, N("attn.compressor.norm.weight"), D, 0, 0, GEN_NORM, seed);
        }
        if (type == MODEL_V4_CSA) {
            add_v4(c, items, &n, N("attn.indexer.compressor.wkv.weight"), 2 * Di, hid, df, GEN_LINEAR, seed);
            add_v4(c, items, &n, N("attn.indexer.compressor.wgate.weight"), 2 * Di, hid, df, GEN_LINEAR, seed);
            add_v4(c, items, &n, N("attn.indexer.compressor.ape"), r, 2 * Di, QUANT_F32, GEN_LINEAR, seed);
            add_v4(c, items, &n, N("attn.indexer.compressor.norm.weight"), Di, 0, 0, GEN_NORM, seed);
            add_v4(c, items, &n, N("attn.indexer.wq_b.weight"), Hi * Di, Q, df, GEN_LINEAR, seed);
            add_v4(c, items, &n, N("attn.indexer.weights_proj.weight"), Hi, hid, df, GEN_LINEAR, seed);
        }
        add_v4(c, items, &n, N("ffn.gate.weight"), E, hid, QUANT_F32, GEN_LINEAR, seed);
        if (c->hash_layer[l]) {
            struct item *it = &items[n++];
            memset(it, 0, sizeof *it);
            *it = (struct item){ .gen = GEN_TID2EID, .seed = seed, .kind = ITEM_COPY, .cols = E, .n_out = 1 };
            snprintf(it->names[0], sizeof it->names[0], "layers.%d.ffn.gate.tid2eid", l);
            int64_t K = c->num_experts_per_tok;
            it->out[0] = (struct st_out_tensor){ it->names[0], ST_I64, 2, { c->vocab_size, K },
                                                 (uint64_t)c->vocab_size * (uint64_t)K * 8 };
        } else {
            add_v4(c, items, &n, N("ffn.gate.bias"), E, 0, 0, GEN_BIAS, seed);
        }
        for (int e = 0; e < E; e++) {
            snprintf(nm, sizeof nm, "layers.%d.ffn.experts.%d.w1.weight", l, e);
            add_v4(c, items, &n, nm, I, hid, xf, GEN_LINEAR, seed);
            snprintf(nm, sizeof nm, "layers.%d.ffn.experts.%d.w2.weight", l, e);
            add_v4(c, items, &n, nm, hid, I, xf, GEN_LINEAR, seed);
            snprintf(nm, sizeof nm, "layers.%d.ffn.experts.%d.w3.weight", l, e);
            add_v4(c, items, &n, nm, I, hid, xf, GEN_LINEAR, seed);
        }
        add_v4(c, items, &n, N("ffn.shared_experts.w1.weight"), I, hid, df, GEN_LINEAR, seed);
        add_v4(c, items, &n, N("ffn.shared_experts.w2.weight"), hid, I, df, GEN_LINEAR, seed);
        add_v4(c, items, &n, N("ffn.shared_experts.w3.weight"), I, hid, df, GEN_LINEAR, seed);
#undef N
    }
    *out = items;
    *n_out = n;
    return 0;
}

int model_synth(const char *dst, const char *config_json, const struct convert_opts *o, uint64_t seed,
                struct convert_report *rep, struct colibri_err *err)
{
    memset(rep, 0, sizeof *rep);
    struct model_config c;
    int rc = model_config_parse(config_json, "synthetic config", &c, err);
    if (rc) return rc;
    if (c.n_routed_experts > 0 && c.first_k_dense_replace >= c.num_hidden_layers)
        return base_err_set(err, COLIBRI_EINVAL,
                       "--layers %d: every layer of this preset up to there is dense (first_k_dense_replace), so the "
                       "model would have no MoE layer; use more layers", c.num_hidden_layers);
    if (mkdir(dst, 0755) && errno != EEXIST)
        return base_err_set(err, COLIBRI_EIO, "%s: cannot create directory: %s", dst, strerror(errno));
    char path[4096];
    snprintf(path, sizeof path, "%s/config.json", dst);
    if (c.attn_kind == MODEL_ATTN_GLM53) {
        struct glm53_sink s = { NULL, 0, seed };
        const struct model_load_opts *f = &o->fmt;
        model_synth_glm53(&c, f->embed_fmt, f->dense_fmt, f->experts_fmt, glm53_add, &s);
        if (!(s.items = calloc((size_t)s.n, sizeof *s.items))) return base_err_set(err, COLIBRI_ENOMEM, "out of memory");
        int n = s.n;
        s.n = 0;
        model_synth_glm53(&c, f->embed_fmt, f->dense_fmt, f->experts_fmt, glm53_add, &s);
        rc = io_stdio_write_atomic(o->io ? o->io : io_fs_posix(), path, config_json, strlen(config_json), err);
        if (!rc) rc = write_container(NULL, dst, NULL, s.items, n, o, rep, err);
        free(s.items);
        return rc;
    }
    if (c.residual_kind == MODEL_RESIDUAL_HYPER) {
        if (c.num_nextn_predict_layers)
            return base_err_set(err, COLIBRI_EUNSUPPORTED, "synth: an MTP layer for deepseek_v4 is not written");
        struct item *items = NULL;
        int n = 0;
        rc = synth_v4_items(&c, o, seed, &items, &n, err);
        if (!rc) rc = io_stdio_write_atomic(o->io ? o->io : io_fs_posix(), path, config_json, strlen(config_json), err);
        if (!rc) rc = write_container(NULL, dst, NULL, items, n, o, rep, err);
        free(items);
        return rc;
    }
    int H = c.num_attention_heads, hid = c.hidden_size, E = c.n_routed_experts;
    int dqk = c.qk_nope_head_dim + c.qk_rope_head_dim, L = c.num_hidden_layers, n_mtp = c.num_nextn_predict_layers;
    if (c.family->tensor_prefix)
        return base_err_set(err, COLIBRI_EUNSUPPORTED, "synth: %s's tensor names (under '%s') are not written",
                            c.family->model_type, c.family->tensor_prefix);
    if (n_mtp && c.dsa_kind != MODEL_DSA_NONE)
        return base_err_set(err, COLIBRI_EUNSUPPORTED, "synth: an MTP layer for a DSA model (%s) is not written",
                       c.family->model_type);
    int64_t cap = 8 + (int64_t)(L + n_mtp) * (29 + 3 * (int64_t)E);
    struct item *items = calloc((size_t)cap, sizeof *items);
    if (!items) return base_err_set(err, COLIBRI_ENOMEM, "out of memory");
    int n = 0, ef = o->fmt.embed_fmt, df = o->fmt.dense_fmt, xf = o->fmt.experts_fmt;
    char nm[512];
    add_synth(items, &n, "model.embed_tokens.weight", c.vocab_size, hid, ef, GEN_EMBED, seed);
    add_synth(items, &n, "model.norm.weight", hid, 0, 0, GEN_NORM, seed);
    add_synth(items, &n, "lm_head.weight", c.vocab_size, hid, ef, GEN_LINEAR, seed);
    /* layers L.. are the MTP layers (HF's names): a MoE block and the MTP's own tensors */
    for (int l = 0; l < L + n_mtp; l++) {
#define N(fmt_) (snprintf(nm, sizeof nm, "model.layers.%d." fmt_, l), nm)
#define NT(name_) (snprintf(nm, sizeof nm, "model.layers.%d.%s", l, name_), nm)
        add_synth(items, &n, N("input_layernorm.weight"), hid, 0, 0, GEN_NORM, seed);
        add_synth(items, &n, N("post_attention_layernorm.weight"), hid, 0, 0, GEN_NORM, seed);
        if (c.q_lora_rank) {
            add_synth(items, &n, N("self_attn.q_a_proj.weight"), c.q_lora_rank, hid, df, GEN_LINEAR, seed);
            add_synth(items, &n, N("self_attn.q_a_layernorm.weight"), c.q_lora_rank, 0, 0, GEN_NORM, seed);
            add_synth(items, &n, N("self_attn.q_b_proj.weight"), H * dqk, c.q_lora_rank, df, GEN_LINEAR, seed);
        } else {
            add_synth(items, &n, N("self_attn.q_proj.weight"), H * dqk, hid, df, GEN_LINEAR, seed);
        }
        add_synth(items, &n, N("self_attn.kv_a_proj_with_mqa.weight"), c.kv_lora_rank + c.qk_rope_head_dim, hid, df,
                  GEN_LINEAR, seed);
        add_synth(items, &n, N("self_attn.kv_a_layernorm.weight"), c.kv_lora_rank, 0, 0, GEN_NORM, seed);
        add_synth(items, &n, N("self_attn.kv_b_proj.weight"), H * (c.qk_nope_head_dim + c.v_head_dim),
                  c.kv_lora_rank, df, GEN_LINEAR, seed);
        add_synth(items, &n, N("self_attn.o_proj.weight"), hid, H * c.v_head_dim, df, GEN_LINEAR, seed);
        const struct model_tensor_names *tn = &c.family->names;
        if (c.dsa_kind != MODEL_DSA_NONE && l < L && c.indexer_full[l]) {
            /* the lightning indexer, as the family names it; weights_proj stays f32 like the router */
            int nI = c.index_n_heads, dI = c.index_head_dim;
            add_synth(items, &n, NT(tn->indexer_wq_b), nI * dI, c.q_lora_rank, df, GEN_LINEAR, seed);
            add_synth(items, &n, NT(tn->indexer_wk), dI, hid, df, GEN_LINEAR, seed);
            add_synth(items, &n, NT(tn->indexer_k_norm_weight), dI, 0, 0, GEN_NORM, seed);
            add_synth(items, &n, NT(tn->indexer_k_norm_bias), dI, 0, 0, GEN_BIAS, seed);
            add_synth(items, &n, NT(tn->indexer_weights_proj), nI, hid, QUANT_F32, GEN_LINEAR, seed);
        }
        if (l >= L) {
            add_synth(items, &n, N("enorm.weight"), hid, 0, 0, GEN_NORM, seed);
            add_synth(items, &n, N("hnorm.weight"), hid, 0, 0, GEN_NORM, seed);
            add_synth(items, &n, N("eh_proj.weight"), hid, 2 * hid, df, GEN_LINEAR, seed);
            add_synth(items, &n, N("shared_head.norm.weight"), hid, 0, 0, GEN_NORM, seed);
        }
        if (l < L && (l < c.first_k_dense_replace || c.mlp_dense[l])) {
            add_synth(items, &n, N("mlp.gate_proj.weight"), c.intermediate_size, hid, df, GEN_LINEAR, seed);
            add_synth(items, &n, N("mlp.up_proj.weight"), c.intermediate_size, hid, df, GEN_LINEAR, seed);
            add_synth(items, &n, N("mlp.down_proj.weight"), hid, c.intermediate_size, df, GEN_LINEAR, seed);
            continue;
        }
        add_synth(items, &n, N("mlp.gate.weight"), E, hid, QUANT_F32, GEN_LINEAR, seed);
        if (tn->router_bias) add_synth(items, &n, NT(tn->router_bias), E, 0, 0, GEN_BIAS, seed);
        int I = c.moe_intermediate_size, Is = I * c.n_shared_experts;
        for (int e = 0; e < E; e++) {
            char base[256];
            snprintf(base, sizeof base, "model.layers.%d.mlp.experts.%d", l, e);
            snprintf(nm, sizeof nm, "%s.gate_proj.weight", base);
            add_synth(items, &n, nm, I, hid, xf, GEN_LINEAR, seed);
            snprintf(nm, sizeof nm, "%s.up_proj.weight", base);
            add_synth(items, &n, nm, I, hid, xf, GEN_LINEAR, seed);
            snprintf(nm, sizeof nm, "%s.down_proj.weight", base);
            add_synth(items, &n, nm, hid, I, xf, GEN_LINEAR, seed);
        }
        if (Is) {
            add_synth(items, &n, N("mlp.shared_experts.gate_proj.weight"), Is, hid, df, GEN_LINEAR, seed);
            add_synth(items, &n, N("mlp.shared_experts.up_proj.weight"), Is, hid, df, GEN_LINEAR, seed);
            add_synth(items, &n, N("mlp.shared_experts.down_proj.weight"), hid, Is, df, GEN_LINEAR, seed);
        }
#undef N
#undef NT
    }
    rc = io_stdio_write_atomic(o->io ? o->io : io_fs_posix(), path, config_json, strlen(config_json), err);
    if (!rc) rc = write_container(NULL, dst, NULL, items, n, o, rep, err);
    free(items);
    return rc;
}
