/* kv/codec_polar.c - PolarQuant tiers (kvquant.md sec. 1) on the rotated row,
 * recursing to full depth with one radius per row.
 *
 * For n = 2^L values: level 1 turns the n/2 pairs (y[2i], y[2i+1]) into radii
 * and angles in [0, 2pi) (uniform density: uniform codebook); level l >= 2
 * turns pairs of level l-1 radii into angles in [0, pi/2] with density
 * proportional to sin^(2^(l-1)-1)(2 psi); the last radius is |y|. Angle
 * codebooks for l >= 2 come from 1-D k-means (Lloyd) on that exact density,
 * computed at init on a fine grid. Encoding quantizes each angle from the
 * exact radii; decoding expands the stored radius down the tree. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "kv/codec_impl.h"
#include "kv/kv_num.h"

#define KV_POLAR_GRID 16384

static int polar_level_bits(enum kv_tier t, int level)
{
    if (t == KV_TIER_POLAR4) return level == 1 ? 5 : level == 2 ? 4 : 3;
    return level == 1 ? 4 : 2;   /* polar3 */
}

static int ilog2(int n) { int L = 0; while ((1 << L) < n) L++; return L; }

static size_t polar_bits_total(enum kv_tier t, int dim)
{
    int L = ilog2(dim);
    size_t bits = 0;
    for (int l = 1; l <= L; l++) bits += (size_t)(dim >> l) * polar_level_bits(t, l);
    return bits;
}

size_t kv_polar4_row_bytes(int dim) { return (polar_bits_total(KV_TIER_POLAR4, dim) + 7) / 8 + 4; }
size_t kv_polar3_row_bytes(int dim) { return (polar_bits_total(KV_TIER_POLAR3, dim) + 7) / 8 + 4; }

/* Lloyd's algorithm for K points on [0, pi/2] under density ~ sin^m(2 psi),
 * using prefix sums of the weights on a midpoint grid. */
static void polar_kmeans(int m, int K, float *ang, float *thr)
{
    const int G = KV_POLAR_GRID;
    const double h = (M_PI / 2) / G;
    double *W = malloc((G + 1) * sizeof *W), *M = malloc((G + 1) * sizeof *M);
    if (!W || !M) {   /* fall back to a uniform codebook */
        for (int k = 0; k < K; k++) ang[k] = (float)((k + 0.5) * (M_PI / 2) / K);
        for (int k = 0; k + 1 < K; k++) thr[k] = 0.5f * (ang[k] + ang[k + 1]);
        free(W);
        free(M);
        return;
    }
    W[0] = M[0] = 0.0;
    for (int g = 0; g < G; g++) {
        double psi = (g + 0.5) * h;
        double s = sin(2 * psi);
        double w = s > 0 ? exp(m * log(s)) : 0.0;
        W[g + 1] = W[g] + w;
        M[g + 1] = M[g] + w * psi;
    }
    double c[32];
    /* start at the quantiles */
    for (int k = 0, g = 0; k < K; k++) {
        double target = W[G] * (k + 0.5) / K;
        while (g < G - 1 && W[g + 1] < target) g++;
        c[k] = (g + 0.5) * h;
    }
    for (int it = 0; it < 2000; it++) {
        double delta = 0.0;
        int lo = 0;
        for (int k = 0; k < K; k++) {
            int hi = G;
            if (k < K - 1) {
                double t = 0.5 * (c[k] + c[k + 1]);
                hi = (int)floor(t / h + 0.5);
                if (hi > G) hi = G;
                if (hi < lo) hi = lo;
            }
            double wsum = W[hi] - W[lo];
            if (wsum > 0) {
                double nc = (M[hi] - M[lo]) / wsum;
                delta = fmax(delta, fabs(nc - c[k]));
                c[k] = nc;
            }
            lo = hi;
        }
        if (delta < 1e-12) break;
    }
    for (int k = 0; k < K; k++) ang[k] = (float)c[k];
    for (int k = 0; k + 1 < K; k++) thr[k] = (float)(0.5 * (c[k] + c[k + 1]));
    free(W);
    free(M);
}

int kv_polar_init(struct kv_codec *c, struct colibri_err *err)
{
    struct kv_polar_tab *p = calloc(1, sizeof *p);
    if (!p) return base_err_set(err, COLIBRI_ENOMEM, "polar codebooks");
    p->L = ilog2(c->dim);
    size_t off = 0;
    for (int l = 1; l <= p->L; l++) {
        int b = polar_level_bits(c->tier, l), K = 1 << b;
        p->bits[l] = b;
        p->off[l] = off;
        off += (size_t)(c->dim >> l) * b;
        if (l == 1) {
            for (int k = 0; k < K; k++) p->ang[l][k] = (float)((k + 0.5) * 2 * M_PI / K);
        } else {
            polar_kmeans((1 << (l - 1)) - 1, K, p->ang[l], p->thr[l]);
        }
        for (int k = 0; k < K; k++) {
            p->cs[l][k] = cosf(p->ang[l][k]);
            p->sn[l][k] = sinf(p->ang[l][k]);
        }
    }
    p->off[p->L + 1] = off;
    c->polar = p;
    return 0;
}

void kv_polar_fini(struct kv_codec *c)
{
    free(c->polar);
    c->polar = NULL;
}

void kv_polar_encode(const struct kv_codec *c, float *y, uint8_t *out)
{
    const struct kv_polar_tab *p = c->polar;
    const int n = c->dim;
    size_t nb = (p->off[p->L + 1] + 7) / 8;
    double ss = 0.0;
    for (int i = 0; i < n; i++) ss += (double)y[i] * y[i];
    if (!(ss > 1e-60) || !isfinite(ss)) {       /* zero, NaN or inf row */
        memset(out, 0, nb + 4);
        return;
    }
    /* level 1: uniform angles on [0, 2pi); radii replace the pairs in y */
    {
        const int K = 1 << p->bits[1];
        size_t pos = p->off[1];
        for (int i = 0; i < n / 2; i++) {
            float a = y[2 * i], b = y[2 * i + 1];
            double psi = atan2((double)b, (double)a);
            if (psi < 0) psi += 2 * M_PI;
            int k = (int)floor(psi * K / (2 * M_PI));
            if (k >= K) k -= K;
            if (k < 0) k = 0;
            kv_bits_put(out, &pos, (unsigned)k, p->bits[1]);
            y[i] = (float)hypot(a, b);
        }
    }
    for (int l = 2; l <= p->L; l++) {
        const int K = 1 << p->bits[l], m = n >> l;
        size_t pos = p->off[l];
        for (int i = 0; i < m; i++) {
            float a = y[2 * i], b = y[2 * i + 1];
            float psi = (float)atan2((double)b, (double)a);
            int k = 0;
            while (k < K - 1 && psi > p->thr[l][k]) k++;
            kv_bits_put(out, &pos, (unsigned)k, p->bits[l]);
            y[i] = (float)hypot(a, b);
        }
    }
    kv_store_f32(out + nb, y[0]);
}

void kv_polar_decode(const struct kv_codec *c, const uint8_t *in, float *y)
{
    const struct kv_polar_tab *p = c->polar;
    size_t nb = (p->off[p->L + 1] + 7) / 8;
    y[0] = kv_load_f32(in + nb);
    for (int l = p->L; l >= 1; l--) {
        const int m = c->dim >> l, b = p->bits[l];
        for (int i = m - 1; i >= 0; i--) {
            size_t pos = p->off[l] + (size_t)i * b;
            unsigned k = kv_bits_get(in, &pos, b);
            float r = y[i];
            y[2 * i] = r * p->cs[l][k];
            y[2 * i + 1] = r * p->sn[l][k];
        }
    }
}
