/* model/shipped.c - MXFP4, FP8 with e8m0 scales and compressed-tensors int4
 * Linear weights as shipped (contract in model/shipped.h). */
#include "model/shipped.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/util.h"
#include "quant/half.h"
#include "quant/kernels.h"
#include "quant/mxfp4.h"

static const char *shape_str(const struct st_tensor *t, char *buf, size_t n)
{
    buf[0] = 0;
    for (int i = 0; i < t->ndim; i++)
        snprintf(buf + strlen(buf), n - strlen(buf), "%s%lld", i ? ", " : "", (long long)t->shape[i]);
    return buf;
}

static int is_2d(const struct st_tensor *t, int64_t r, int64_t c)
{
    return t->ndim == 2 && t->shape[0] == r && t->shape[1] == c;
}

/* "<m>.weight" -> "<m>.<suffix>" in out (n bytes); 0 if name has no .weight. */
static int sibling(const char *name, const char *suffix, char *out, size_t n)
{
    size_t len = strlen(name);
    if (len < 7 || strcmp(name + len - 7, ".weight")) return 0;
    snprintf(out, n, "%.*s.%s", (int)(len - 7), name, suffix);
    return 1;
}

/* The scale companion of `<m>.weight`: `<m>.scale` as DeepSeek ships it
 * (F8_E8M0 or U8 exponents, or F32 powers of two as dsv4-flash-base stores
 * them), else `<m>.weight_scale_inv` as transformers renames it (F8_E8M0 or
 * U8; an F32 one is a V3-style scale, not this encoding). NULL if neither;
 * the name looked for last is left in sname. *raw gets whichever sibling
 * exists, whatever its dtype, for messages. */
static const struct st_tensor *e8m0_scale(const struct model_shipped_src *s, const char *name, char *sname, size_t n,
                                          const struct st_tensor **raw)
{
    const struct st_tensor *sc = NULL;
    if (sibling(name, "scale", sname, n)) sc = s->find(s->ctx, sname);
    if (raw) *raw = sc;
    if (sc) return sc->dtype == ST_F8_E8M0 || sc->dtype == ST_U8 || sc->dtype == ST_F32 ? sc : NULL;
    snprintf(sname, n, "%s_scale_inv", name);
    sc = s->find(s->ctx, sname);
    if (raw) *raw = sc;
    return sc && (sc->dtype == ST_F8_E8M0 || sc->dtype == ST_U8) ? sc : NULL;
}

/* The e8m0 byte of an F32 scale that is a power of two 2^-127..2^127, else -1. */
static int f32_to_e8m0(const uint8_t *p)
{
    float v;
    memcpy(&v, p, 4);
    for (int e = 0; e < 255; e++)
        if (v == 2.0f * quant_e8m0_half((uint8_t)e)) return e;
    return -1;
}

/* The scales of sc (n values) as e8m0 bytes into out; -(index + 1) of the
 * first F32 value that is not a power of two. */
static int64_t scales_e8m0(const struct st_tensor *sc, int64_t n, uint8_t *out)
{
    const uint8_t *p = sc->data;
    if (sc->dtype != ST_F32) {
        memcpy(out, p, (size_t)n);
        return 0;
    }
    for (int64_t i = 0; i < n; i++) {
        int e = f32_to_e8m0(p + 4 * i);
        if (e < 0) return -(i + 1);
        out[i] = (uint8_t)e;
    }
    return 0;
}

static int not_pow2(const struct st_tensor *w, const struct st_tensor *sc, int64_t bad, struct colibri_err *err)
{
    float v;
    memcpy(&v, (const uint8_t *)sc->data + 4 * (-bad - 1), 4);
    return base_err_set(err, COLIBRI_EFORMAT, "tensor '%s' (the scales of '%s'): value %lld is %g, not a power of "
                        "two (scale_fmt ue8m0)", sc->name, w->name, (long long)(-bad - 1), v);
}

static const char *scale_problem(const struct st_tensor *raw, const struct st_tensor *sc)
{
    return !raw ? "missing" : !sc ? "of another dtype" : "of the wrong shape";
}

/* The scale's name for a message: the sibling found, else `<m>.scale`. */
static const char *scale_name(const struct st_tensor *w, const struct st_tensor *raw, char *buf, size_t n)
{
    if (raw) return raw->name;
    if (!sibling(w->name, "scale", buf, n)) snprintf(buf, n, "%s_scale_inv", w->name);
    return buf;
}

int model_shipped_is_mxfp4(const struct st_tensor *t)
{
    return t->dtype == ST_F4 || t->dtype == ST_I8 || t->dtype == ST_U8;
}

int model_shipped_mxfp4(const struct model_shipped_src *s, const struct st_tensor *t, int rows, int cols, struct qtensor *out,
                  struct colibri_err *err)
{
    char sname[600], sh[96];
    if (cols % QUANT_MX_BLOCK)
        return base_err_set(err, COLIBRI_EFORMAT, "tensor '%s': MXFP4 with %d columns (not a multiple of %d)", t->name,
                            cols, QUANT_MX_BLOCK);
    int ok = t->dtype == ST_F4 ? is_2d(t, rows, cols) : is_2d(t, rows, cols / 2);
    if (!ok)
        return base_err_set(err, COLIBRI_EFORMAT, "tensor '%s' is %s [%s]; as MXFP4 codes of a [%d, %d] weight it "
                            "needs F4 [%d, %d] or I8/U8 [%d, %d]", t->name, st_dtype_name(t->dtype),
                            shape_str(t, sh, sizeof sh), rows, cols, rows, cols, rows, cols / 2);
    const struct st_tensor *raw, *sc = e8m0_scale(s, t->name, sname, sizeof sname, &raw);
    int nb = cols / QUANT_MX_BLOCK;
    if (!sc || !is_2d(sc, rows, nb))
        return base_err_set(err, COLIBRI_EFORMAT, "tensor '%s' is %s MXFP4 codes but its scales '%s' are %s%s%s%s "
                            "(need F8_E8M0, U8 or F32 powers of two [%d, %d])", t->name, st_dtype_name(t->dtype),
                            scale_name(t, raw, sname, sizeof sname), scale_problem(raw, sc), raw ? " (" : "",
                            raw ? st_dtype_name(raw->dtype) : "", raw ? ")" : "", rows, nb);
    const void *e = sc->data;
    uint8_t *own = NULL;
    if (sc->dtype == ST_F32) {
        if (!(own = malloc((size_t)rows * nb))) return base_err_set(err, COLIBRI_ENOMEM, "tensor '%s': scales", t->name);
        int64_t bad = scales_e8m0(sc, (int64_t)rows * nb, own);
        if (bad) {
            free(own);
            return not_pow2(t, sc, bad, err);
        }
        e = own;
    }
    int rc = quant_qtensor_wrap_raw(QUANT_MXFP4, rows, cols, t->data, t->nbytes, e, (size_t)rows * nb, out, err);
    if (rc) {
        free(own);
        return base_err_prefix(err, rc, "tensor '%s'", t->name);
    }
    if (own) out->owned = QUANT_OWN_SCALES;
    if (s->n_params) *s->n_params += (int64_t)rows * cols - t->numel - sc->numel;
    return 0;
}

const struct st_tensor *model_shipped_fp8_e8m0_scale(const struct model_shipped_src *s, const struct st_tensor *t)
{
    char sname[600];
    return t->dtype == ST_F8_E4M3 ? e8m0_scale(s, t->name, sname, sizeof sname, NULL) : NULL;
}

int model_shipped_fp8_e8m0(const struct model_shipped_src *s, const struct st_tensor *t, int rows, int cols, struct qtensor *out,
                     struct colibri_err *err)
{
    char sname[600], sh[96];
    if (t->dtype != ST_F8_E4M3 || !is_2d(t, rows, cols))
        return base_err_set(err, COLIBRI_EFORMAT, "tensor '%s' is %s [%s]; as FP8 with block scales it needs F8_E4M3 "
                            "[%d, %d]", t->name, st_dtype_name(t->dtype), shape_str(t, sh, sizeof sh), rows, cols);
    const struct st_tensor *raw, *sc = e8m0_scale(s, t->name, sname, sizeof sname, &raw);
    int64_t br = (rows + QUANT_FP8B_BLOCK - 1) / QUANT_FP8B_BLOCK, bc = (cols + QUANT_FP8B_BLOCK - 1) / QUANT_FP8B_BLOCK;
    if (!sc || !is_2d(sc, br, bc))
        return base_err_set(err, COLIBRI_EFORMAT, "tensor '%s' is F8_E4M3 but its block scales '%s' are %s%s%s%s%s%s "
                            "(need F8_E8M0, U8 or F32 powers of two [%lld, %lld]: one per 128x128 block)", t->name,
                            scale_name(t, raw, sname, sizeof sname), scale_problem(raw, sc), raw ? " (" : "",
                            raw ? st_dtype_name(raw->dtype) : "", raw ? " [" : "", raw ? shape_str(raw, sh, sizeof sh) : "",
                            raw ? "])" : "", (long long)br, (long long)bc);
    float *f = malloc((size_t)(br * bc) * sizeof *f);
    uint8_t *e = malloc((size_t)(br * bc));
    if (!f || !e) {
        free(f);
        free(e);
        return base_err_set(err, COLIBRI_ENOMEM, "tensor '%s': scales", t->name);
    }
    int64_t bad = scales_e8m0(sc, br * bc, e);
    /* 2^(e-127) is twice quant_e8m0_half(e): exact (a power of two below 2^128) */
    for (int64_t i = 0; !bad && i < br * bc; i++) f[i] = 2.0f * quant_e8m0_half(e[i]);
    free(e);
    if (bad) {
        free(f);
        return not_pow2(t, sc, bad, err);
    }
    int rc = quant_qtensor_wrap(QUANT_FP8B, rows, cols, t->data, t->nbytes, f, (size_t)(br * bc), out, err);
    if (rc) {
        free(f);
        return base_err_prefix(err, rc, "tensor '%s'", t->name);
    }
    out->owned = QUANT_OWN_SCALES;
    return 0;
}

int model_shipped_v4_kind(const char *name, int expert_fp4)
{
    static const char *const FP8[] = { ".attn.wq_a.weight", ".attn.wq_b.weight", ".attn.wkv.weight",
                                       ".attn.wo_a.weight", ".attn.wo_b.weight", ".attn.indexer.wq_b.weight",
                                       ".ffn.shared_experts.w1.weight", ".ffn.shared_experts.w2.weight",
                                       ".ffn.shared_experts.w3.weight" };
    size_t n = strlen(name);
    if (strncmp(name, "model.", 6) ? !strncmp(name, "layers.", 7) : !strncmp(name + 6, "layers.", 7)) {
        const char *x = strstr(name, ".ffn.experts.");
        if (x && n > 10 && name[n - 10] == '.' && name[n - 9] == 'w' && !strcmp(name + n - 7, ".weight"))
            return expert_fp4 ? MODEL_SHIPPED_MXFP4 : MODEL_SHIPPED_FP8;
        for (size_t i = 0; i < sizeof FP8 / sizeof FP8[0]; i++) {
            size_t k = strlen(FP8[i]);
            if (n > k && !strcmp(name + n - k, FP8[i])) return MODEL_SHIPPED_FP8;
        }
    }
    return MODEL_SHIPPED_FLOAT;
}

static int int_at(const struct st_tensor *t, int i, int64_t *v)
{
    const uint8_t *p = (const uint8_t *)t->data;
    if (t->dtype == ST_I32) { int32_t x; memcpy(&x, p + 4 * i, 4); *v = x; return 1; }
    if (t->dtype == ST_I64) { int64_t x; memcpy(&x, p + 8 * i, 8); *v = x; return 1; }
    return 0;
}

/* The stored tensors of a compressed-tensors int4 Linear, checked. */
static int ct_int4_find(const struct model_shipped_src *s, const char *module, int rows, int cols,
                        const struct st_tensor **pp, const struct st_tensor **psc, const struct st_tensor **pshp,
                        struct colibri_err *err)
{
    char pn[600], sn[600], hn[600], sh[96];
    snprintf(pn, sizeof pn, "%s.weight_packed", module);
    snprintf(sn, sizeof sn, "%s.weight_scale", module);
    snprintf(hn, sizeof hn, "%s.weight_shape", module);
    const struct st_tensor *p = s->find(s->ctx, pn), *sc = s->find(s->ctx, sn), *shp = s->find(s->ctx, hn);
    const int G = 32, ng = (cols + G - 1) / G;
    if (!p) return base_err_set(err, COLIBRI_EFORMAT, "tensor '%s' is missing (module '%s' is a compressed-tensors "
                                "int4 Linear: not in quantization_config.ignore)", pn, module);
    if (cols % 8 || p->dtype != ST_I32 || !is_2d(p, rows, cols / 8))
        return base_err_set(err, COLIBRI_EFORMAT, "tensor '%s' is %s [%s]; a [%d, %d] weight packed eight per int32 "
                            "needs I32 [%d, %d]", pn, st_dtype_name(p->dtype), shape_str(p, sh, sizeof sh), rows, cols,
                            rows, cols / 8);
    if (!sc || (sc->dtype != ST_BF16 && sc->dtype != ST_F16 && sc->dtype != ST_F32) || !is_2d(sc, rows, ng))
        return base_err_set(err, COLIBRI_EFORMAT, "tensor '%s' is %s (need BF16, F16 or F32 [%d, %d]: one scale per "
                            "32 columns)", sn, !sc ? "missing" : "of the wrong dtype or shape", rows, ng);
    int64_t r0 = -1, c0 = -1;
    if (!shp || shp->numel != 2 || !int_at(shp, 0, &r0) || !int_at(shp, 1, &c0) || r0 != rows || c0 != cols)
        return base_err_set(err, COLIBRI_EFORMAT, "tensor '%s' is %s (need I32/I64 [2] = {%d, %d}; holds {%lld, %lld})",
                            hn, !shp ? "missing" : "not the weight's shape", rows, cols, (long long)r0, (long long)c0);
    *pp = p;
    *psc = sc;
    *pshp = shp;
    return 0;
}

void model_shipped_ct_int4_repack(const void *packed, const void *scales, int scale_dtype, int rows, int cols,
                                  void *data, float *f)
{
    const int B = QUANT_INT4_BLOCK, H = QUANT_INT4_BLOCK / 2, ng = (cols + 31) / 32;
    const size_t rb = quant_fmt_row_bytes(QUANT_Q4G32, cols), pb = (size_t)cols / 2;
    const uint8_t *pw = packed, *ps = scales;
    uint8_t *d = data;
    for (int r = 0; r < rows; r++) {
        /* word g's nibble i is element 8g+i: byte k holds elements 2k (low)
         * and 2k+1 (high), little-endian; a q4g32 block of 128 columns holds
         * columns 0-63 in the low nibbles of its 64 bytes, 64-127 in the high */
        const uint8_t *src = pw + (size_t)r * pb;
        uint8_t *row = d + (size_t)r * rb;
        int c0 = 0;
        for (; c0 + B <= cols; c0 += B) {
            /* out byte 2j: columns 2j and 64+2j, byte 2j+1: 2j+1 and 65+2j */
            const uint8_t *a = src + c0 / 2, *b = a + B / 4;
            uint8_t *blk = row + (size_t)(c0 / B) * H;
            uint8_t lo[B / 4], hi[B / 4];     /* two passes: each vectorizes */
            for (int j = 0; j < B / 4; j++) {
                lo[j] = (uint8_t)((a[j] & 0x0F) | (b[j] & 0x0F) << 4);
                hi[j] = (uint8_t)((a[j] >> 4) | (b[j] & 0xF0));
            }
            for (int j = 0; j < B / 4; j++) {
                blk[2 * j] = lo[j];
                blk[2 * j + 1] = hi[j];
            }
        }
        for (; c0 < cols; c0 += B) {
            uint8_t nib[QUANT_INT4_BLOCK];
            int n = cols - c0;
            for (int k = 0; k < n / 2; k++) {
                nib[2 * k] = src[c0 / 2 + k] & 0xF;
                nib[2 * k + 1] = src[c0 / 2 + k] >> 4;
            }
            for (int k = n; k < B; k++) nib[k] = 8;     /* padding: value 0 */
            uint8_t *blk = row + (size_t)(c0 / B) * H;
            for (int k = 0; k < H; k++) blk[k] = (uint8_t)(nib[k] | nib[H + k] << 4);
        }
        for (int g = 0; g < ng; g++) {
            size_t i = (size_t)r * ng + g;
            uint16_t h;
            if (scale_dtype == ST_F32) memcpy(&f[i], ps + 4 * i, 4);
            else {
                memcpy(&h, ps + 2 * i, 2);
                f[i] = scale_dtype == ST_BF16 ? quant_bf16_to_f32(h) : quant_f16_to_f32(h);
            }
        }
    }
}

int model_shipped_ct_int4_source(const struct model_shipped_src *s, const char *module, int rows, int cols,
                                 const struct st_tensor **packed, const struct st_tensor **scales,
                                 struct colibri_err *err)
{
    const struct st_tensor *shp;
    return ct_int4_find(s, module, rows, cols, packed, scales, &shp, err);
}

int model_shipped_ct_int4(const struct model_shipped_src *s, const char *module, int rows, int cols, int defer,
                          struct qtensor *out, struct colibri_err *err)
{
    const struct st_tensor *p, *sc, *shp;
    int rc = ct_int4_find(s, module, rows, cols, &p, &sc, &shp, err);
    if (rc) return rc;
    if (s->n_params) *s->n_params += (int64_t)rows * cols - p->numel - sc->numel - shp->numel;
    if (defer) {
        *out = (struct qtensor){ .fmt = QUANT_Q4G32, .rows = rows, .cols = cols, .owned = 1 };
        return 0;
    }
    const int ng = (cols + 31) / 32;
    size_t nd = quant_fmt_data_bytes(QUANT_Q4G32, rows, cols);
    uint8_t *d = base_xalloc(nd);
    float *f = base_xalloc((size_t)rows * ng * sizeof *f);
    if (!d || !f) {
        free(d);
        free(f);
        return base_err_set(err, COLIBRI_ENOMEM, "tensor '%s': %zu bytes for its q4g32 copy", p->name, nd);
    }
    model_shipped_ct_int4_repack(p->data, sc->data, sc->dtype, rows, cols, d, f);
    *out = (struct qtensor){ .fmt = QUANT_Q4G32, .rows = rows, .cols = cols, .data = d, .scales = f, .owned = 1 };
    return 0;
}

int model_shipped_v4_check(const struct st_tensor *t, int kind, struct colibri_err *err)
{
    int fl = t->dtype == ST_F32 || t->dtype == ST_BF16 || t->dtype == ST_F16;
    if (kind == MODEL_SHIPPED_MXFP4 && !model_shipped_is_mxfp4(t))
        return base_err_set(err, COLIBRI_EFORMAT, "tensor '%s' is %s, but expert_dtype 'fp4' stores the routed experts "
                            "as MXFP4 codes (I8/U8 [rows, cols/2] or F4) with a .scale", t->name,
                            st_dtype_name(t->dtype));
    if (kind == MODEL_SHIPPED_FLOAT && !fl)
        return base_err_set(err, COLIBRI_EFORMAT, "tensor '%s' is %s, but DeepSeek-V4's release layout "
                            "(quantization_config fp8) keeps it in BF16/F32", t->name, st_dtype_name(t->dtype));
    return 0;
}
