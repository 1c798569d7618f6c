/* kv/index.c - the lightning indexer's scores over cached index keys and the
 * top-k selection (kv/index.h). */
#include "kv/index.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/par.h"

/* The query is transposed once to qT[dI][nIp] (heads padded with zeros to a
 * multiple of KV_INDEX_HB), and KV_INDEX_KP keys at a time meet one vector of
 * KV_INDEX_HB heads per index value: a small GEMM whose accumulators stay in
 * registers. Each head's dot product sums over i in order; the heads' relu
 * terms are summed by the compiler's reduction (fixed per build). */
#define KV_INDEX_HB 16
#define KV_INDEX_KP 8   /* keys per pass (score_keys names its accumulators) */

/* score[j] for the n <= KV_INDEX_KP keys at k[j] (dI values each). */
static void score_keys(int nIp, int dI, const float *qT, const float *wp, float scale, const float *const *k, int n,
                       float *score)
{
    static const float zero[KV_INDEX_MAX_DIM];
    const float *k0 = k[0], *k1 = n > 1 ? k[1] : zero, *k2 = n > 2 ? k[2] : zero, *k3 = n > 3 ? k[3] : zero;
    const float *k4 = n > 4 ? k[4] : zero, *k5 = n > 5 ? k[5] : zero, *k6 = n > 6 ? k[6] : zero;
    const float *k7 = n > 7 ? k[7] : zero;
    float t[KV_INDEX_KP] = {0};
    for (int hb = 0; hb < nIp; hb += KV_INDEX_HB) {
        float a0[KV_INDEX_HB] = {0}, a1[KV_INDEX_HB] = {0}, a2[KV_INDEX_HB] = {0}, a3[KV_INDEX_HB] = {0};
        float a4[KV_INDEX_HB] = {0}, a5[KV_INDEX_HB] = {0}, a6[KV_INDEX_HB] = {0}, a7[KV_INDEX_HB] = {0};
        for (int i = 0; i < dI; i++) {
            const float *qv = qT + (size_t)i * nIp + hb;
            const float x0 = k0[i], x1 = k1[i], x2 = k2[i], x3 = k3[i], x4 = k4[i], x5 = k5[i], x6 = k6[i], x7 = k7[i];
#pragma omp simd
            for (int h = 0; h < KV_INDEX_HB; h++) {
                a0[h] = fmaf(x0, qv[h], a0[h]);
                a1[h] = fmaf(x1, qv[h], a1[h]);
                a2[h] = fmaf(x2, qv[h], a2[h]);
                a3[h] = fmaf(x3, qv[h], a3[h]);
                a4[h] = fmaf(x4, qv[h], a4[h]);
                a5[h] = fmaf(x5, qv[h], a5[h]);
                a6[h] = fmaf(x6, qv[h], a6[h]);
                a7[h] = fmaf(x7, qv[h], a7[h]);
            }
        }
        const float *wv = wp + hb;
        const float *acc[KV_INDEX_KP] = { a0, a1, a2, a3, a4, a5, a6, a7 };
        for (int j = 0; j < KV_INDEX_KP; j++) {
            float s = 0.0f;
#pragma omp simd reduction(+ : s)
            for (int h = 0; h < KV_INDEX_HB; h++) {
                float d = acc[j][h] * scale;
                s += wv[h] * (d > 0.0f ? d : 0.0f);
            }
            t[j] += s;
        }
    }
    for (int j = 0; j < n; j++) score[j] = t[j];
}

/* The scores of keys [t0, t0 + KV_INDEX_KP) (those below T): decoded into
 * this call's buffer unless read in place. */
static void score_pass(const struct kv_part *p, const uint8_t *base, size_t stride, int direct, int rotated, int t0,
                       int T, int nIp, int dI, const float *qT, const float *wp, float scale, float *score)
{
    float buf[KV_INDEX_KP][KV_INDEX_MAX_DIM];
    const float *k[KV_INDEX_KP] = { 0 };
    const int n = T - t0 < KV_INDEX_KP ? T - t0 : KV_INDEX_KP;
    if (direct) {
        for (int j = 0; j < n; j++) k[j] = (const float *)(base + (size_t)(t0 + j) * stride);
    } else if (!rotated) {
        /* the fastest decoder this CPU has (for an unrotated tier, the values themselves) */
        kv_codec_decode_rows(p->codec, base + (size_t)t0 * stride, stride, n, buf[0], KV_INDEX_MAX_DIM);
        for (int j = 0; j < n; j++) k[j] = buf[j];
    } else {
        for (int j = 0; j < n; j++) {
            kv_codec_decode(p->codec, base + (size_t)(t0 + j) * stride, buf[j]);
            k[j] = buf[j];
        }
    }
    score_keys(nIp, dI, qT, wp, scale, k, n, score + t0);
}

int kv_index_scores(const struct kv_cache *c, int layer, int T, int nI, const float *q, const float *w, float scale,
                    float *score, int n_threads, float *work, struct colibri_err *err)
{
    if (layer < 0 || layer >= c->n_layers || T < 1 || T > c->capacity || nI < 1 || nI > KV_INDEX_MAX_HEADS)
        return base_err_set(err, COLIBRI_EINVAL, "dsa index scores: layer %d, T %d, %d heads (cache %d x %d, at most %d "
                       "heads)", layer, T, nI, c->n_layers, c->capacity, KV_INDEX_MAX_HEADS);
    const struct kv_part *p = kv_cache_layer_part(c, layer, KV_PART_INDEX_KEY);
    if (!p || !p->bytes)
        return base_err_set(err, COLIBRI_EINVAL, "dsa index scores: layer %d of the kv cache has no index-key part",
                       layer);
    const int dI = p->dim;
    if (dI > KV_INDEX_MAX_DIM)
        return base_err_set(err, COLIBRI_EUNSUPPORTED, "dsa index scores: index_head_dim %d (at most %d)", dI,
                       KV_INDEX_MAX_DIM);
    const int nIp = (nI + KV_INDEX_HB - 1) / KV_INDEX_HB * KV_INDEX_HB;
    float *qT = work ? work : malloc(sizeof(float) * kv_index_scores_work(nI, dI));
    if (!qT) return base_err_set(err, COLIBRI_ENOMEM, "dsa index scores: %d x %d query", dI, nIp);
    float *wp = qT + (size_t)dI * nIp;
    memset(qT, 0, sizeof(float) * ((size_t)dI * nIp + nIp));
    for (int h = 0; h < nI; h++) {
        wp[h] = w[h];
        for (int i = 0; i < dI; i++) qT[(size_t)i * nIp + h] = q[(size_t)h * dI + i];
    }
    const uint8_t *base = kv_cache_row(c, layer, 0) + p->offset;
    const size_t stride = c->layer[layer].row_bytes;
    /* read in place when the f32 keys are aligned (the latent tier sets the offset) */
    const int direct = p->codec->tier == KV_TIER_F32 && ((uintptr_t)base | stride) % sizeof(float) == 0;
    const int rotated = kv_codec_rotated(p->codec);
    const int npass = (T + KV_INDEX_KP - 1) / KV_INDEX_KP;
    int nt = n_threads > 0 ? n_threads : omp_get_max_threads();
    /* every team the size of the others (libgomp allocates one whenever the
     * size changes, base/par.h) */
    if (npass <= 16) nt = 1;
    /* a region of one thread would allocate its team (base/par.h) */
    BASE_PAR_FOR_N(nt, for (int b = 0; b < npass; b++)
        score_pass(p, base, stride, direct, rotated, b * KV_INDEX_KP, T, nIp, dI, qT, wp, scale, score););
    if (!work) free(qT);
    return 0;
}

size_t kv_index_scores_work(int nI, int dI)
{
    const size_t nIp = (size_t)(nI + KV_INDEX_HB - 1) / KV_INDEX_HB * KV_INDEX_HB;
    return (size_t)dI * nIp + nIp;
}

void kv_index_scores_ref(int T, int nI, int dI, const float *keys, const float *q, const float *w, float scale,
                         float *score)
{
    for (int t = 0; t < T; t++) {
        float total = 0.0f;
        for (int h = 0; h < nI; h++) {
            float d = 0.0f;
            for (int i = 0; i < dI; i++) d = fmaf(q[(size_t)h * dI + i], keys[(size_t)t * dI + i], d);
            d *= scale;
            total += w[h] * (d > 0.0f ? d : 0.0f);
        }
        score[t] = total;
    }
}

int kv_index_sel_init(struct kv_index_sel *s, int max_rows, struct colibri_err *err)
{
    memset(s, 0, sizeof *s);
    if (max_rows < 1) return base_err_set(err, COLIBRI_EINVAL, "dsa selection: %d rows", max_rows);
    s->keys = malloc((size_t)max_rows * sizeof *s->keys);
    if (!s->keys) return base_err_set(err, COLIBRI_ENOMEM, "dsa selection: %d rows", max_rows);
    s->max_rows = max_rows;
    return 0;
}

void kv_index_sel_free(struct kv_index_sel *s)
{
    free(s->keys);
    memset(s, 0, sizeof *s);
}

/* A float's order as an unsigned integer (larger float, larger integer). */
static uint32_t order_bits(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u & 0x80000000u ? ~u : u | 0x80000000u;
}

/* Moves the k largest of a[0..n) to a[0..k) (any order): quickselect. The
 * keys are distinct (the position is in the low bits). */
static void select_largest(uint64_t *a, int n, int k)
{
    int lo = 0, hi = n - 1;
    while (lo < hi) {
        uint64_t x = a[lo], y = a[(lo + hi) / 2], z = a[hi];
        uint64_t pivot = x < y ? (y < z ? y : (x < z ? z : x)) : (x < z ? x : (y < z ? z : y));
        int i = lo, j = hi;
        while (i <= j) {
            while (a[i] > pivot) i++;
            while (a[j] < pivot) j--;
            if (i <= j) {
                uint64_t t = a[i];
                a[i] = a[j];
                a[j] = t;
                i++;
                j--;
            }
        }
        /* [lo, j] >= pivot >= [i, hi] */
        if (k - 1 <= j) hi = j;
        else if (k - 1 >= i) lo = i;
        else return;
    }
}

static int cmp_i32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

int kv_index_topk(struct kv_index_sel *s, const float *score, int T, int k, int32_t *pos,
                  struct colibri_err *err)
{
    if (T < 1 || T > s->max_rows || k < 1)
        return base_err_set(err, COLIBRI_EINVAL, "dsa selection: top %d of %d rows (room for %d)", k, T, s->max_rows);
    int n = k < T ? k : T;
    if (n == T) {
        for (int t = 0; t < T; t++) {
            if (isnan(score[t])) return base_err_set(err, COLIBRI_EINVAL, "dsa selection: the score of position %d is NaN", t);
            pos[t] = t;
        }
        return n;
    }
    for (int t = 0; t < T; t++) {
        if (isnan(score[t])) return base_err_set(err, COLIBRI_EINVAL, "dsa selection: the score of position %d is NaN", t);
        /* ties: the lower position has the larger key */
        s->keys[t] = (uint64_t)order_bits(score[t]) << 32 | (uint32_t)(0xffffffffu - (uint32_t)t);
    }
    select_largest(s->keys, T, n);
    for (int i = 0; i < n; i++) pos[i] = (int32_t)(0xffffffffu - (uint32_t)(s->keys[i] & 0xffffffffu));
    qsort(pos, (size_t)n, sizeof *pos, cmp_i32);
    return n;
}
