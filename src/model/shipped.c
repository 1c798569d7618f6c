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

/* The e8m0 companion of `<m>.weight`: `<m>.scale` as DeepSeek ships it, or
 * `<m>.weight_scale_inv` as transformers renames it; F8_E8M0 or U8. The name
 * looked for last is left in sname. */
static const struct st_tensor *e8m0_scale(const struct model_shipped_src *s, const char *name, char *sname, size_t n)
{
    const struct st_tensor *sc = NULL;
    if (sibling(name, "scale", sname, n)) sc = s->find(s->ctx, sname);
    if (!sc) {
        snprintf(sname, n, "%s_scale_inv", name);
        sc = s->find(s->ctx, sname);
    }
    return sc && (sc->dtype == ST_F8_E8M0 || sc->dtype == ST_U8) ? sc : NULL;
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
    const struct st_tensor *sc = e8m0_scale(s, t->name, sname, sizeof sname);
    int nb = cols / QUANT_MX_BLOCK;
    if (!sc || !is_2d(sc, rows, nb))
        return base_err_set(err, COLIBRI_EFORMAT, "tensor '%s' is %s MXFP4 codes but its scales (.scale or "
                            ".weight_scale_inv) are %s (need F8_E8M0 or U8 [%d, %d])", t->name,
                            st_dtype_name(t->dtype), !sc ? "missing or not e8m0" : "of the wrong shape", rows, nb);
    int rc = quant_qtensor_wrap_raw(QUANT_MXFP4, rows, cols, t->data, t->nbytes, sc->data, sc->nbytes, out, err);
    if (rc) return base_err_prefix(err, rc, "tensor '%s'", t->name);
    if (s->n_params) *s->n_params += (int64_t)rows * cols - t->numel - sc->numel;
    return 0;
}

const struct st_tensor *model_shipped_fp8_e8m0_scale(const struct model_shipped_src *s, const struct st_tensor *t)
{
    char sname[600];
    return t->dtype == ST_F8_E4M3 ? e8m0_scale(s, t->name, sname, sizeof sname) : NULL;
}

int model_shipped_fp8_e8m0(const struct model_shipped_src *s, const struct st_tensor *t, int rows, int cols, struct qtensor *out,
                     struct colibri_err *err)
{
    const struct st_tensor *sc = model_shipped_fp8_e8m0_scale(s, t);
    int64_t br = (rows + QUANT_FP8B_BLOCK - 1) / QUANT_FP8B_BLOCK, bc = (cols + QUANT_FP8B_BLOCK - 1) / QUANT_FP8B_BLOCK;
    char sh[96];
    if (!sc || !is_2d(sc, br, bc))
        return base_err_set(err, COLIBRI_EFORMAT, "tensor '%s' is F8_E4M3 with e8m0 block scales %s%s%s (need F8_E8M0 "
                            "[%lld, %lld])", t->name, sc ? "of shape [" : "missing", sc ? shape_str(sc, sh, sizeof sh) : "",
                            sc ? "]" : "", (long long)br, (long long)bc);
    float *f = malloc((size_t)(br * bc) * sizeof *f);
    if (!f) return base_err_set(err, COLIBRI_ENOMEM, "tensor '%s': scales", t->name);
    const uint8_t *e = sc->data;
    /* 2^(e-127) is twice quant_e8m0_half(e): exact (a power of two below 2^128) */
    for (int64_t i = 0; i < br * bc; i++) f[i] = 2.0f * quant_e8m0_half(e[i]);
    int rc = quant_qtensor_wrap(QUANT_FP8B, rows, cols, t->data, t->nbytes, f, (size_t)(br * bc), out, err);
    if (rc) {
        free(f);
        return base_err_prefix(err, rc, "tensor '%s'", t->name);
    }
    out->owned = QUANT_OWN_SCALES;
    return 0;
}

static int int_at(const struct st_tensor *t, int i, int64_t *v)
{
    const uint8_t *p = (const uint8_t *)t->data;
    if (t->dtype == ST_I32) { int32_t x; memcpy(&x, p + 4 * i, 4); *v = x; return 1; }
    if (t->dtype == ST_I64) { int64_t x; memcpy(&x, p + 8 * i, 8); *v = x; return 1; }
    return 0;
}

int model_shipped_ct_int4(const struct model_shipped_src *s, const char *module, int rows, int cols, struct qtensor *out,
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
    struct qtensor q;
    size_t nd = quant_fmt_data_bytes(QUANT_Q4G32, rows, cols), rb = quant_fmt_row_bytes(QUANT_Q4G32, cols);
    uint8_t *d = base_xalloc(nd);
    float *f = base_xalloc((size_t)rows * ng * sizeof *f);
    if (!d || !f) {
        free(d);
        free(f);
        return base_err_set(err, COLIBRI_ENOMEM, "tensor '%s': %zu bytes for its q4g32 copy", pn, nd);
    }
    memset(d, 0x88, nd);                                /* padding nibbles: value 0 */
    const uint8_t *pw = p->data, *ps = sc->data;
    for (int r = 0; r < rows; r++) {
        uint8_t *row = d + (size_t)r * rb;
        for (int c = 0; c < cols; c++) {
            uint32_t w;
            memcpy(&w, pw + ((size_t)r * (cols / 8) + c / 8) * 4, 4);
            uint8_t nib = (uint8_t)(w >> (4 * (c % 8)) & 0xF);
            uint8_t *b = row + (c / QUANT_INT4_BLOCK) * (QUANT_INT4_BLOCK / 2) + c % (QUANT_INT4_BLOCK / 2);
            *b = c % QUANT_INT4_BLOCK < QUANT_INT4_BLOCK / 2 ? (uint8_t)((*b & 0xF0) | nib) : (uint8_t)((*b & 0x0F) | nib << 4);
        }
        for (int g = 0; g < ng; g++) {
            size_t i = (size_t)r * ng + g;
            uint16_t h;
            if (sc->dtype == ST_F32) memcpy(&f[i], ps + 4 * i, 4);
            else {
                memcpy(&h, ps + 2 * i, 2);
                f[i] = sc->dtype == ST_BF16 ? quant_bf16_to_f32(h) : quant_f16_to_f32(h);
            }
        }
    }
    q = (struct qtensor){ .fmt = QUANT_Q4G32, .rows = rows, .cols = cols, .data = d, .scales = f, .owned = 1 };
    *out = q;
    if (s->n_params) *s->n_params += (int64_t)rows * cols - p->numel - sc->numel - shp->numel;
    return 0;
}
