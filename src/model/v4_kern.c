/* model/v4_kern.c - V4 attention and indexer scores over many heads, on
 * threads, with the bits of v4_attn.c / v4_indexer.c (see v4_kern.h).
 * Lanes of a vector are heads: each lane is one head's own double sum in
 * index order, so no sum is reassociated. */
#include "model/v4_kern.h"

#include <math.h>
#include <omp.h>
#include <string.h>

#include "base/err.h"
#include "base/par.h"
#include "model/linear.h"

typedef double v4df __attribute__((vector_size(32)));
typedef float v8sf_u __attribute__((vector_size(32), aligned(4)));   /* may sit anywhere a float does */

#define HB V4_KERN_HEADS   /* heads per attention task: two vectors */

static size_t align64(size_t n) { return (n + 63) & ~(size_t)63; }

size_t model_v4_attn_work_bytes(int head_dim, int n_rows)
{
    return align64((size_t)head_dim * HB * sizeof(double)) + align64((size_t)HB * (n_rows > 0 ? n_rows : 1) * sizeof(float));
}

static const float *key_row(const float *win, int n_win, const float *comp, const int32_t *sel, int j, int hd)
{
    return j < n_win ? win + (size_t)j * hd : comp + (size_t)(sel ? sel[j - n_win] : j - n_win) * hd;
}

static inline v4df bcast(double d) { return (v4df){ d, d, d, d }; }

/* o[i] += p * k[i]: each element its own multiply and add, as the scalar
 * loop (written with vectors since o and k may alias for the compiler). */
static void axpy(float *o, float p, const float *k, int n)
{
    const v8sf_u pv = { p, p, p, p, p, p, p, p };
    int i = 0;
    for (; i + 8 <= n; i += 8) *(v8sf_u *)(o + i) = *(const v8sf_u *)(o + i) + pv * *(const v8sf_u *)(k + i);
    for (; i < n; i++) o[i] += p * k[i];
}

/* Heads h0 .. h0 + nb of one query (nb <= HB). */
static void attn_block(const struct v4_attn *a, int pos, const float *q, const float *win, int n_win,
                       const float *comp, const int32_t *sel, int n_sel, float *out, int h0, int nb, void *work)
{
    const int hd = a->head_dim, n = n_win + n_sel;
    const float scale = 1.0f / sqrtf((float)hd);
    v4df *qd = work;                                      /* [hd][2]: 8 heads' q[i] per row */
    double *qs = work;
    float *sc = (float *)((char *)work + align64((size_t)hd * HB * sizeof(double)));   /* [HB][n] */
    for (int i = 0; i < hd; i++)
        for (int b = 0; b < HB; b++) qs[(size_t)i * HB + b] = b < nb ? (double)q[(size_t)(h0 + b) * hd + i] : 0.0;
    int j = 0;
    for (; j + 1 < n; j += 2) {
        const float *k0 = key_row(win, n_win, comp, sel, j, hd), *k1 = key_row(win, n_win, comp, sel, j + 1, hd);
        v4df a00 = bcast(0), a01 = bcast(0), a10 = bcast(0), a11 = bcast(0);
        for (int i = 0; i < hd; i++) {
            const v4df x0 = qd[2 * i], x1 = qd[2 * i + 1], d0 = bcast(k0[i]), d1 = bcast(k1[i]);
            a00 += x0 * d0;
            a01 += x1 * d0;
            a10 += x0 * d1;
            a11 += x1 * d1;
        }
        for (int b = 0; b < nb; b++) {
            sc[(size_t)b * n + j] = (float)(b < 4 ? a00[b] : a01[b - 4]) * scale;
            sc[(size_t)b * n + j + 1] = (float)(b < 4 ? a10[b] : a11[b - 4]) * scale;
        }
    }
    for (; j < n; j++) {
        const float *k0 = key_row(win, n_win, comp, sel, j, hd);
        v4df a00 = bcast(0), a01 = bcast(0);
        for (int i = 0; i < hd; i++) {
            const v4df d0 = bcast(k0[i]);
            a00 += qd[2 * i] * d0;
            a01 += qd[2 * i + 1] * d0;
        }
        for (int b = 0; b < nb; b++) sc[(size_t)b * n + j] = (float)(b < 4 ? a00[b] : a01[b - 4]) * scale;
    }
    double den[HB];
    for (int b = 0; b < nb; b++) {
        float *s = sc + (size_t)b * n, mx = a->sinks[h0 + b];
        for (int t = 0; t < n; t++) mx = fmaxf(mx, s[t]);
        den[b] = exp((double)a->sinks[h0 + b] - mx);
        for (int t = 0; t < n; t++) den[b] += s[t] = (float)exp((double)s[t] - mx);
        memset(out + (size_t)(h0 + b) * hd, 0, (size_t)hd * sizeof *out);
    }
    for (int t = 0; t < n; t++) {
        const float *k = key_row(win, n_win, comp, sel, t, hd);
        for (int b = 0; b < nb; b++) {
            axpy(out + (size_t)(h0 + b) * hd, (float)(sc[(size_t)b * n + t] / den[b]), k, hd);
        }
    }
    for (int b = 0; a->rope.dr && b < nb; b++) model_v4_rope_tail(out + (size_t)(h0 + b) * hd, hd, &a->rope, pos, 1);
}

int model_v4_attn_query_mt(const struct v4_attn *a, int pos, const float *q, const float *win, int n_win,
                           const float *comp, const int32_t *sel, int n_sel, float *out, void *work,
                           size_t work_stride, int n_threads, struct colibri_err *err)
{
    if (a->n_heads < 1 || a->head_dim < 1 || a->window < 1 || n_win < 0 || n_win > a->window || n_win > pos + 1 ||
        n_sel < 0 || !a->sinks || a->rope.dr < 0 || a->rope.dr > a->head_dim || a->rope.dr % 2 ||
        (a->rope.dr && !a->rope.inv_freq))
        return base_err_set(err, COLIBRI_EINVAL,
                            "model_v4_attn_query_mt: %d heads of %d, %d window rows at pos %d (window %d), %d "
                            "entries, rope dims %d%s", a->n_heads, a->head_dim, n_win, pos, a->window, n_sel,
                            a->rope.dr, a->sinks ? "" : ", sinks missing");
    if (work_stride < model_v4_attn_work_bytes(a->head_dim, n_win + n_sel))
        return base_err_set(err, COLIBRI_EINVAL, "model_v4_attn_query_mt: %zu bytes of work per thread for %d rows "
                            "(want %zu)", work_stride, n_win + n_sel, model_v4_attn_work_bytes(a->head_dim, n_win + n_sel));
    const int nblk = (a->n_heads + HB - 1) / HB;
    int nt = n_threads < nblk ? n_threads : nblk;
    if ((int64_t)a->n_heads * (n_win + n_sel) * a->head_dim < MODEL_PAR_MIN_ELEMS || omp_in_parallel()) nt = 1;
    BASE_PAR_FOR_N(nt, for (int t = 0; t < nblk; t++) {
        int h0 = t * HB, nb = a->n_heads - h0 < HB ? a->n_heads - h0 : HB;
        attn_block(a, pos, q, win, n_win, comp, sel, n_sel, out, h0, nb,
                   (char *)work + (size_t)omp_get_thread_num() * work_stride);
    });
    return 0;
}

/* ---- the indexer ---- */

#define IH 16   /* heads per pass over a key: four vectors */

static int heads_padded(int n_heads) { return (n_heads + IH - 1) / IH * IH; }

size_t model_v4_index_work_bytes(int n_heads, int head_dim)
{
    return align64((size_t)V4_KERN_KEYS * head_dim * sizeof(float)) + align64((size_t)2 * heads_padded(n_heads) * sizeof(double));
}

size_t model_v4_index_shared_bytes(int n_heads, int head_dim)
{
    return align64((size_t)head_dim * heads_padded(n_heads) * sizeof(double));
}

/* dd[h] = sum_i qT[i][h] * k[i] in index order, for two keys at once. */
static void index_dots(const double *qT, int Hp, int hd, const float *k0, const float *k1, double *dd0, double *dd1)
{
    for (int h0 = 0; h0 < Hp; h0 += IH) {
        v4df a0[4] = { bcast(0), bcast(0), bcast(0), bcast(0) }, a1[4] = { bcast(0), bcast(0), bcast(0), bcast(0) };
        for (int i = 0; i < hd; i++) {
            const v4df *x = (const v4df *)(qT + (size_t)i * Hp + h0);
            const v4df d0 = bcast(k0[i]), d1 = bcast(k1[i]);
            for (int v = 0; v < 4; v++) {
                a0[v] += x[v] * d0;
                a1[v] += x[v] * d1;
            }
        }
        for (int v = 0; v < 4; v++)
            for (int l = 0; l < 4; l++) {
                dd0[h0 + 4 * v + l] = a0[v][l];
                dd1[h0 + 4 * v + l] = a1[v][l];
            }
    }
}

static float index_sum(const double *dd, const float *w, int H, float softmax_scale, float w_scale)
{
    double acc = 0;
    for (int h = 0; h < H; h++) {
        float r = dd[h] > 0 ? (float)dd[h] * softmax_scale : 0.0f;
        acc += (double)r * (w[h] * w_scale);
    }
    return (float)acc;
}

/* Entries s0 .. s0 + n (n <= V4_KERN_KEYS). */
static void index_block(const struct v4_indexer *ix, const float *w, const struct kv_codec *codec,
                        const uint8_t *keys, int s0, int n, const double *qT, float *score, void *work)
{
    const int H = ix->n_heads, hd = ix->head_dim, Hp = heads_padded(H);
    const float softmax_scale = 1.0f / sqrtf((float)hd), w_scale = 1.0f / sqrtf((float)H);
    float *slab = work;
    double *dd = (double *)((char *)work + align64((size_t)V4_KERN_KEYS * hd * sizeof(float)));
    const float *k;
    if (codec->tier == KV_TIER_F32) {
        k = (const float *)(keys + (size_t)s0 * codec->row_bytes);
    } else {
        for (int s = 0; s < n; s++) kv_codec_decode(codec, keys + (size_t)(s0 + s) * codec->row_bytes, slab + (size_t)s * hd);
        k = slab;
    }
    for (int s = 0; s < n; s += 2) {
        const float *k0 = k + (size_t)s * hd, *k1 = s + 1 < n ? k0 + hd : k0;
        index_dots(qT, Hp, hd, k0, k1, dd, dd + Hp);
        score[s0 + s] = index_sum(dd, w, H, softmax_scale, w_scale);
        if (s + 1 < n) score[s0 + s + 1] = index_sum(dd + Hp, w, H, softmax_scale, w_scale);
    }
}

int model_v4_index_scores_mt(const struct v4_indexer *ix, int pos, const float *q, const float *w,
                             const struct kv_codec *codec, const uint8_t *keys, int n_entries, float *qrot,
                             float *score, void *shared, void *work, size_t work_stride, int n_threads,
                             struct colibri_err *err)
{
    const int H = ix->n_heads, hd = ix->head_dim;
    if (H < 1 || hd < 1 || n_entries < 0 || pos < 0 || ix->rope.dr < 0 || ix->rope.dr > hd || ix->rope.dr % 2 ||
        codec->dim != hd)
        return base_err_set(err, COLIBRI_EINVAL, "model_v4_index_scores_mt: %d heads of %d, %d entries, pos %d, rope "
                            "dims %d, keys of %d", H, hd, n_entries, pos, ix->rope.dr, codec->dim);
    if (work_stride < model_v4_index_work_bytes(H, hd))
        return base_err_set(err, COLIBRI_EINVAL, "model_v4_index_scores_mt: %zu bytes of work per thread (want %zu)",
                            work_stride, model_v4_index_work_bytes(H, hd));
    memcpy(qrot, q, sizeof(float) * H * hd);
    for (int h = 0; h < H; h++)
        if (ix->rope.dr) model_v4_rope_tail(qrot + (size_t)h * hd, hd, &ix->rope, pos, 0);
    const int Hp = heads_padded(H);
    double *qT = shared;
    for (int i = 0; i < hd; i++)
        for (int h = 0; h < Hp; h++) qT[(size_t)i * Hp + h] = h < H ? (double)qrot[(size_t)h * hd + i] : 0.0;
    const int nblk = (n_entries + V4_KERN_KEYS - 1) / V4_KERN_KEYS;
    int nt = n_threads < nblk ? n_threads : nblk;
    if ((int64_t)n_entries * H * hd < MODEL_PAR_MIN_ELEMS || omp_in_parallel()) nt = 1;
    BASE_PAR_FOR_N(nt, for (int t = 0; t < nblk; t++) {
        int s0 = t * V4_KERN_KEYS, n = n_entries - s0 < V4_KERN_KEYS ? n_entries - s0 : V4_KERN_KEYS;
        index_block(ix, w, codec, keys, s0, n, qT, score, (char *)work + (size_t)omp_get_thread_num() * work_stride);
    });
    return 0;
}
