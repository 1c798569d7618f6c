/* quant/qtensor.c - qtensor lifetime (make, wrap, free) and the driver of the
 * products: prepare the activations once, then hand row blocks to the
 * dispatched kernel, in parallel over row blocks when it is worth it. */
#include "quant/qtensor.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/par.h"
#include "base/util.h"
#include "quant/kernels.h"

/* Rows per unit of parallel work: small enough to balance two to a few dozen
 * threads on decode-sized matrices, large enough to amortize a kernel call. */
#define QUANT_ROW_BLOCK 16
/* Below this many weight elements x activations a parallel region costs more
 * than it saves. */
#define QUANT_PAR_MIN_WORK (1u << 16)
/* Activation bytes per slice of a batch: a share of the last-level cache
 * (32 MiB on the machines measured), shared by all threads. */
#define QUANT_ACT_SLICE_BYTES (8u << 20)

static int check_shape(enum quant_fmt fmt, int rows, int cols, struct colibri_err *err)
{
    if (!quant_fmt_valid(fmt))
        return base_err_set(err, COLIBRI_EINVAL, "quant: unknown weight format id %d", (int)fmt);
    if (rows <= 0 || cols <= 0)
        return base_err_set(err, COLIBRI_EINVAL, "quant: bad shape [%d, %d] for %s", rows, cols,
                       quant_fmt_name(fmt));
    return 0;
}

int quant_qtensor_from_f32(enum quant_fmt fmt, int rows, int cols, const float *w,
                           struct qtensor *out, struct colibri_err *err)
{
    int rc = check_shape(fmt, rows, cols, err);
    if (rc) return rc;
    size_t nd = quant_fmt_data_bytes(fmt, rows, cols);
    size_t ns = quant_fmt_scale_bytes(fmt, rows, cols);
    void *data = base_xalloc(nd);
    void *scales = ns ? base_xalloc(ns) : NULL;
    if (!data || (ns && !scales)) {
        free(data);
        free(scales);
        return base_err_set(err, COLIBRI_ENOMEM, "quant: cannot allocate %zu bytes for a [%d, %d] %s tensor",
                       nd + ns, rows, cols, quant_fmt_name(fmt));
    }
    quant_fmt_traits(fmt)->from_f32(w, rows, cols, data, scales);
    *out = (struct qtensor){ .fmt = fmt, .rows = rows, .cols = cols, .data = data,
                             .scales = scales, .owned = 1 };
    return 0;
}

int quant_qtensor_wrap(enum quant_fmt fmt, int rows, int cols,
                       const void *data, size_t data_bytes,
                       const float *scales, size_t n_scales,
                       struct qtensor *out, struct colibri_err *err)
{
    int rc = check_shape(fmt, rows, cols, err);
    if (rc) return rc;
    size_t nd = quant_fmt_data_bytes(fmt, rows, cols);
    size_t ns = quant_fmt_scale_count(fmt, rows, cols);
    if (!data || data_bytes != nd)
        return base_err_set(err, COLIBRI_EINVAL, "quant: %s [%d, %d] needs %zu data bytes, got %zu%s",
                       quant_fmt_name(fmt), rows, cols, nd, data_bytes, data ? "" : " (NULL)");
    if (quant_fmt_traits(fmt)->scale_e8m0)
        return base_err_set(err, COLIBRI_EINVAL, "quant: %s scales are e8m0 bytes, not floats "
                            "(quant_qtensor_wrap_raw)", quant_fmt_name(fmt));
    if (n_scales != ns || (ns && !scales))
        return base_err_set(err, COLIBRI_EINVAL, "quant: %s [%d, %d] needs %zu scales, got %zu%s",
                       quant_fmt_name(fmt), rows, cols, ns, n_scales,
                       ns && !scales ? " (NULL)" : "");
    *out = (struct qtensor){ .fmt = fmt, .rows = rows, .cols = cols, .data = data,
                             .scales = ns ? scales : NULL, .owned = 0 };
    return 0;
}

int quant_qtensor_wrap_raw(enum quant_fmt fmt, int rows, int cols,
                           const void *data, size_t data_bytes,
                           const void *scales, size_t scale_bytes,
                           struct qtensor *out, struct colibri_err *err)
{
    int rc = check_shape(fmt, rows, cols, err);
    if (rc) return rc;
    size_t nd = quant_fmt_data_bytes(fmt, rows, cols);
    size_t ns = quant_fmt_scale_bytes(fmt, rows, cols);
    if (!data || data_bytes != nd)
        return base_err_set(err, COLIBRI_EINVAL, "quant: %s [%d, %d] needs %zu data bytes, got %zu%s",
                       quant_fmt_name(fmt), rows, cols, nd, data_bytes, data ? "" : " (NULL)");
    if (scale_bytes != ns || (ns && !scales))
        return base_err_set(err, COLIBRI_EINVAL, "quant: %s [%d, %d] needs %zu bytes of scales, got %zu%s",
                       quant_fmt_name(fmt), rows, cols, ns, scale_bytes, ns && !scales ? " (NULL)" : "");
    if (ns && (uintptr_t)scales % quant_fmt_scale_size(fmt))
        return base_err_set(err, COLIBRI_EINVAL, "quant: %s [%d, %d] scales are not %zu-byte aligned",
                       quant_fmt_name(fmt), rows, cols, quant_fmt_scale_size(fmt));
    *out = (struct qtensor){ .fmt = fmt, .rows = rows, .cols = cols, .data = data, .owned = 0 };
    out->scales_e8m0 = ns ? scales : NULL;
    return 0;
}

int quant_qtensor_convert(const struct qtensor *src, enum quant_fmt fmt,
                          struct qtensor *out, struct colibri_err *err)
{
    int rc = check_shape(fmt, src->rows, src->cols, err);
    if (rc) return rc;
    const int rows = src->rows, cols = src->cols, slab = QUANT_FP8B_BLOCK;
    size_t nd = quant_fmt_data_bytes(fmt, rows, cols);
    size_t ns = quant_fmt_scale_bytes(fmt, rows, cols);
    uint8_t *data = base_xalloc(nd);
    uint8_t *scales = ns ? base_xalloc(ns) : NULL;
    int nslab = (rows + slab - 1) / slab, failed = 0;
    if (data && (!ns || scales)) {
        /* Every format's arrays are row-major in whole 128-row slabs, so slab
         * k's data starts at row 128k and its scales after those of 128k rows. */
        int par = !omp_in_parallel() && nslab > 1;
        #pragma omp parallel if (par) reduction(| : failed)
        {
            float *buf = malloc((size_t)slab * cols * sizeof(float));
            if (!buf) failed = 1;
            #pragma omp for schedule(dynamic)
            for (int k = 0; k < nslab; k++) {
                if (!buf) continue;
                int r0 = k * slab, n = rows - r0 < slab ? rows - r0 : slab;
                quant_dequant_rows(src, r0, n, buf);
                quant_fmt_traits(fmt)->from_f32(buf, n, cols, data + (size_t)r0 * quant_fmt_row_bytes(fmt, cols),
                                                scales ? scales + quant_fmt_scale_bytes(fmt, r0, cols) : NULL);
            }
            free(buf);
        }
    }
    if (!data || (ns && !scales) || failed) {
        free(data);
        free(scales);
        return base_err_set(err, COLIBRI_ENOMEM, "quant: cannot allocate for converting [%d, %d] %s to %s",
                       rows, cols, quant_fmt_name(src->fmt), quant_fmt_name(fmt));
    }
    *out = (struct qtensor){ .fmt = fmt, .rows = rows, .cols = cols, .data = data, .owned = 1 };
    out->scales_e8m0 = scales;
    return 0;
}

size_t quant_qtensor_bytes(const struct qtensor *W)
{
    return quant_fmt_data_bytes(W->fmt, W->rows, W->cols) +
           quant_fmt_scale_bytes(W->fmt, W->rows, W->cols);
}

void quant_qtensor_free(struct qtensor *W)
{
    if (!W) return;
    if (W->owned == 1) free((void *)W->data);
    if (W->owned) free((void *)W->scales);
    memset(W, 0, sizeof *W);
}

void quant_dequant_rows(const struct qtensor *W, int row0, int nrows, float *out)
{
    quant_dequant_fn f = quant_isa_table(quant_isa_best())->dequant[W->fmt];
    for (int i = 0; i < nrows; i++) f(W, row0 + i, out + (size_t)i * W->cols);
}

int quant_dequant_rows_isa(const struct qtensor *W, int row0, int nrows, float *out, enum quant_isa isa,
                           struct colibri_err *err)
{
    const struct quant_isa_table *t = quant_isa_table(isa);
    if (!t)
        return base_err_set(err, COLIBRI_EUNSUPPORTED, "quant: kernel level %s not available on this machine",
                            quant_isa_name(isa));
    for (int i = 0; i < nrows; i++) t->dequant[W->fmt](W, row0 + i, out + (size_t)i * W->cols);
    return 0;
}

/* Activations [s0, s1) of a batch through the kernel's slice(): row blocks
 * of quant_slice_rows in parallel, thread i with panel i of `panels` (each
 * `panel` bytes, as many as the region can have threads). */
static void slice_with(const struct quant_kernel *k, const struct qtensor *W,
                       const struct quant_act *a, int s0, int s1, float *Y, uint8_t *panels, size_t panel)
{
    int rb = quant_slice_rows(W->cols), nblocks = (W->rows + rb - 1) / rb;
    int par = !omp_in_parallel() && omp_get_max_threads() > 1 && nblocks > 1 &&
              (double)W->rows * W->cols * (s1 - s0) >= QUANT_PAR_MIN_WORK;
    if (!par) {
        for (int b = 0; b < nblocks; b++) {
            int r0 = b * rb, r1 = r0 + rb < W->rows ? r0 + rb : W->rows;
            k->slice(W, r0, r1, a, s0, s1 - s0, Y, panels);
        }
        return;
    }
    #pragma omp parallel
    {
        void *scratch = panels + (size_t)omp_get_thread_num() * panel;
        #pragma omp for schedule(static)
        for (int b = 0; b < nblocks; b++) {
            int r0 = b * rb, r1 = r0 + rb < W->rows ? r0 + rb : W->rows;
            k->slice(W, r0, r1, a, s0, s1 - s0, Y, scratch);
        }
    }
}

static size_t al64(size_t n) { return (n + 63) & ~(size_t)63; }

/* Where a product's parts lie in its scratch (offsets from the start; a
 * size of 0: the product has no such part). */
struct mm_plan {
    size_t act, act_bytes;      /* int8 activations, scales and sums */
    size_t xl, xl_bytes;        /* f32 activations in lane order */
    size_t tb, tb_bytes;        /* int8 activations in tile order */
    size_t panels, panel;       /* slice panels, one per thread */
    size_t total;
};

static struct mm_plan plan_of(const struct quant_kernel *k, const struct qtensor *W, int n)
{
    struct mm_plan p = { 0 };
    size_t at = 0;
    int cols_pad = (W->cols + QUANT_INT4_BLOCK - 1) / QUANT_INT4_BLOCK * QUANT_INT4_BLOCK;
    size_t nblk = (size_t)cols_pad / QUANT_ACT_BLOCK;
    if (k->act_int8) {
        size_t nq = (size_t)n * cols_pad, nf = (size_t)n * nblk, ni = k->act_qsum ? nf : 0;
        p.act = at;
        p.act_bytes = nq + (2 * nf + (size_t)n) * sizeof(float) + ni * sizeof(int32_t);
        at += al64(p.act_bytes);
    }
    if (k->act_pack && n >= QUANT_SLICE_MIN) {
        size_t ng = (size_t)(n + QUANT_LANE_NR - 1) / QUANT_LANE_NR;
        p.xl = at;
        p.xl_bytes = ng * quant_act_pack_stride(W->cols) * sizeof(float);
        at += al64(p.xl_bytes);
    }
    if (k->act_tile16 && n >= QUANT_SLICE_MIN) {
        size_t ng = (size_t)(n + QUANT_TILE_NJ - 1) / QUANT_TILE_NJ;
        p.tb = at;
        p.tb_bytes = ng * (nblk * 512 + nblk * QUANT_TILE_NJ * sizeof(float));
        at += al64(p.tb_bytes);
    }
    if (k->slice && n >= QUANT_SLICE_MIN) {
        int nt = omp_in_parallel() ? 1 : omp_get_max_threads();
        p.panels = at;
        p.panel = al64(quant_slice_scratch_bytes(W->cols));
        at += (size_t)(nt > 1 ? nt : 1) * p.panel;
    }
    p.total = at;
    return p;
}

/* Y = X·Wᵀ with the kernels of table t, the parts of plan p in buf (as
 * base_xalloc gave them: the activation parts zeroed first). */
static void matmul_with(const struct qtensor *W, const float *X, int n, float *Y,
                        const struct quant_isa_table *t, const struct mm_plan *p, uint8_t *buf)
{
    const struct quant_kernel *k = &t->k[W->fmt];
    struct quant_act a = { .n = n, .cols = W->cols, .x = X };
    if (k->act_int8) {
        a.cols_pad = (W->cols + QUANT_INT4_BLOCK - 1) / QUANT_INT4_BLOCK * QUANT_INT4_BLOCK;
        a.nblk = a.cols_pad / QUANT_ACT_BLOCK;
        size_t nq = (size_t)n * a.cols_pad, nf = (size_t)n * a.nblk;
        /* one part: q, xs, xsum, xsum_all, and the block sums (act_qsum) */
        size_t ni = k->act_qsum ? nf : 0;
        uint8_t *ab = buf + p->act;
        memset(ab, 0, al64(p->act_bytes));
        float *xs = (float *)(ab + nq), *xsum = xs + nf, *all = xsum + nf;
        int32_t *qsum = ni ? (int32_t *)(all + n) : NULL;
        int8_t *q = (int8_t *)ab;
        a.q = q;
        a.xs = xs;
        a.xsum = xsum;
        a.xsum_all = all;
        a.qsum = qsum;
        BASE_PAR_FOR(!omp_in_parallel() && (double)n * W->cols >= QUANT_PAR_MIN_WORK, for (int j = 0; j < n; j++) {
            all[j] = t->act_prep(X + (size_t)j * W->cols, W->cols, a.cols_pad,
                                 q + (size_t)j * a.cols_pad, xs + (size_t)j * a.nblk,
                                 xsum + (size_t)j * a.nblk, qsum ? qsum + (size_t)j * a.nblk : NULL);
        });
    }
    if (p->xl_bytes) {
        size_t per = quant_act_pack_stride(W->cols);
        int ng = (n + QUANT_LANE_NR - 1) / QUANT_LANE_NR;
        float *xl = (float *)(buf + p->xl);
        memset(xl, 0, al64(p->xl_bytes));
        BASE_PAR_FOR(!omp_in_parallel() && (double)n * W->cols >= QUANT_PAR_MIN_WORK,
                     for (int g = 0; g < ng; g++) k->act_pack(X, n, W->cols, g, xl + (size_t)g * per););
        a.xl = xl;
    }
    if (p->tb_bytes) {
        int ng = (n + QUANT_TILE_NJ - 1) / QUANT_TILE_NJ;
        size_t qb = (size_t)a.nblk * 512;
        int8_t *qt = (int8_t *)(buf + p->tb);
        memset(qt, 0, al64(p->tb_bytes));
        float *xst = (float *)(qt + (size_t)ng * qb);
        BASE_PAR_FOR(!omp_in_parallel() && (double)n * W->cols >= QUANT_PAR_MIN_WORK, for (int g = 0; g < ng; g++)
            quant_act_tile16(&a, g, qt + (size_t)g * qb, xst + (size_t)g * a.nblk * QUANT_TILE_NJ););
        a.qt = qt;
        a.xst = xst;
    }
    /* Activations go in slices of jb that stay in the last-level cache
     * while every row block passes over them (a row block's weights stay in
     * L2 across the slice; the kernels block columns so a tile's activations
     * sit in L1); the weights are read from memory once per slice, so once in
     * all for decode and for batches up to a slice. Slices of half an L2
     * (512 KiB) re-read the f32-activation formats' weights every 16
     * activations and made their prefill 20-30% slower. */
    size_t act_row = k->act_int8 ? (size_t)a.cols_pad : (size_t)W->cols * sizeof(float);
    /* whole groups of the lane order (QUANT_LANE_NR, a multiple of QUANT_NB)
     * or of the tile order (QUANT_TILE_NJ) */
    int grp = k->act_tile16 ? QUANT_TILE_NJ : QUANT_LANE_NR;
    int jb = (int)(QUANT_ACT_SLICE_BYTES / act_row) / grp * grp;
    if (jb < grp) jb = grp;
    int nblocks = (W->rows + QUANT_ROW_BLOCK - 1) / QUANT_ROW_BLOCK;
    for (int s0 = 0; s0 < n; s0 += jb) {
        int s1 = s0 + jb < n ? s0 + jb : n;
        if (k->slice && s1 - s0 >= QUANT_SLICE_MIN && (!k->act_pack || a.xl) && (!k->act_tile16 || a.qt)) {
            slice_with(k, W, &a, s0, s1, Y, buf + p->panels, p->panel);
            continue;
        }
        int par = !omp_in_parallel() && omp_get_max_threads() > 1 && nblocks > 1 &&
                  (double)W->rows * W->cols * (s1 - s0) >= QUANT_PAR_MIN_WORK;
        BASE_PAR_FOR(par, for (int b = 0; b < nblocks; b++) {
            int r0 = b * QUANT_ROW_BLOCK;
            int r1 = r0 + QUANT_ROW_BLOCK < W->rows ? r0 + QUANT_ROW_BLOCK : W->rows;
            for (int j0 = s0; j0 < s1; j0 += QUANT_NB)
                k->rows(W, r0, r1, &a, j0, s1 - j0 < QUANT_NB ? s1 - j0 : QUANT_NB, Y);
        });
    }
}

int quant_scratch_reserve(struct quant_scratch *s, size_t bytes, struct colibri_err *err)
{
    if (bytes <= s->cap) return 0;
    size_t want = s->cap + s->cap / 2 > bytes ? s->cap + s->cap / 2 : bytes;
    want = al64(want);
    void *p = aligned_alloc(64, want);
    if (!p) return base_err_set(err, COLIBRI_ENOMEM, "quant: cannot allocate %zu bytes of product scratch", want);
    free(s->buf);
    s->buf = p;
    s->cap = want;
    return 0;
}

void quant_scratch_free(struct quant_scratch *s)
{
    if (!s) return;
    free(s->buf);
    s->buf = NULL;
    s->cap = 0;
}

static int matmul_at(const struct qtensor *W, const float *X, int n, float *Y, const struct quant_isa_table *t,
                     struct quant_scratch *s, struct colibri_err *err)
{
    struct mm_plan p = plan_of(&t->k[W->fmt], W, n);
    struct quant_scratch own = { 0 };
    struct quant_scratch *use = s ? s : &own;
    int rc = p.total ? quant_scratch_reserve(use, p.total, err) : 0;
    if (rc) return base_err_set(err, rc, "quant: cannot allocate %zu bytes of activations for %s [%d, %d] x %d",
                                p.total, quant_fmt_name(W->fmt), W->rows, W->cols, n);
    matmul_with(W, X, n, Y, t, &p, use->buf);
    quant_scratch_free(&own);
    return 0;
}

int quant_matmul_isa(const struct qtensor *W, const float *X, int n, float *Y,
                     enum quant_isa isa, struct colibri_err *err)
{
    const struct quant_isa_table *t = quant_isa_table(isa);
    if (n <= 0) return base_err_set(err, COLIBRI_EINVAL, "quant: batch of %d activations", n);
    if (!t)
        return base_err_set(err, COLIBRI_EUNSUPPORTED, "quant: kernel level %s not available on this machine",
                       quant_isa_name(isa));
    return matmul_at(W, X, n, Y, t, NULL, err);
}

int quant_matmul(const struct qtensor *W, const float *X, int n, float *Y, struct quant_scratch *s,
                 struct colibri_err *err)
{
    if (n <= 0) return 0;
    return matmul_at(W, X, n, Y, quant_isa_table(quant_isa_best()), s, err);
}

int quant_matvec(const struct qtensor *W, const float *x, float *y, struct quant_scratch *s, struct colibri_err *err)
{
    return quant_matmul(W, x, 1, y, s, err);
}
