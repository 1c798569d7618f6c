/* kv/codec_tq.c - TurboQuant-mse tiers tq4/tq3/tq2 (kvquant.md sec. 1):
 * rotated row, one fixed Lloyd-Max codebook for N(0,1) scaled by |x|/sqrt(n),
 * no QJL residual. The stored norm is the plain |x|; the inner-product bias
 * correction 1/(1 - D_b) is c->gain, applied at decode. The codebook is
 * computed at init by fixed-point iteration on the exact normal density (the
 * same construction as the anchors' appendix), so no table is committed. */
#include <math.h>
#include <string.h>

#include "kv/codec_impl.h"
#include "kv/kv_num.h"

static size_t tq_row_bytes(int dim, int bits) { return (size_t)dim * bits / 8 + 4; }
size_t kv_tq4_row_bytes(int dim) { return tq_row_bytes(dim, 4); }
size_t kv_tq3_row_bytes(int dim) { return tq_row_bytes(dim, 3); }
size_t kv_tq2_row_bytes(int dim) { return tq_row_bytes(dim, 2); }

static double npdf(double x) { return exp(-0.5 * x * x) * 0.39894228040143267794; }
static double ncdf(double x) { return 0.5 * erfc(-x * 0.70710678118654752440); }

void kv_lloyd_max_gauss(int bits, float *level, float *thresh, double *mse)
{
    const int K = 1 << bits;
    double c[16], t[17];
    for (int k = 0; k < K; k++) c[k] = -3.0 + 6.0 * (k + 0.5) / K;
    for (int it = 0; it < 5000; it++) {
        t[0] = -INFINITY;
        t[K] = INFINITY;
        for (int k = 1; k < K; k++) t[k] = 0.5 * (c[k - 1] + c[k]);
        double delta = 0.0;
        for (int k = 0; k < K; k++) {
            double p = ncdf(t[k + 1]) - ncdf(t[k]);
            double m = (npdf(t[k]) - npdf(t[k + 1])) / p;
            delta = fmax(delta, fabs(m - c[k]));
            c[k] = m;
        }
        if (delta < 1e-13) break;
    }
    double keep = 0.0;   /* E[x * xhat] = E[xhat^2] at a centroid */
    for (int k = 0; k < K; k++) {
        double lo = k ? 0.5 * (c[k - 1] + c[k]) : -INFINITY;
        double hi = k < K - 1 ? 0.5 * (c[k] + c[k + 1]) : INFINITY;
        keep += (ncdf(hi) - ncdf(lo)) * c[k] * c[k];
    }
    for (int k = 0; k < K; k++) level[k] = (float)c[k];
    for (int k = 0; k + 1 < K; k++) thresh[k] = (float)(0.5 * (c[k] + c[k + 1]));
    if (mse) *mse = 1.0 - keep;
}

int kv_tq_init(struct kv_codec *c, struct colibri_err *err)
{
    c->bits = c->tier == KV_TIER_TQ4 ? 4 : c->tier == KV_TIER_TQ3 ? 3 : 2;
    double D;
    kv_lloyd_max_gauss(c->bits, c->level, c->thresh, &D);
    c->gain = (float)(1.0 / (1.0 - D));
    /* Snap the levels to multiples of level_max/127 so that a code is an int8
     * times one scale per row (the int8 dot-product path reads them that way).
     * This moves each level by at most level_max/254, which raises the MSE by
     * under 0.5% at 4 bits (the relMSE test holds it to the anchor). */
    const int K = 1 << c->bits;
    c->level_unit = c->level[K - 1] / 127.0f;
    for (int k = 0; k < K; k++) {
        c->level_q[k] = (int8_t)lrintf(c->level[k] / c->level_unit);
        c->level[k] = c->level_q[k] * c->level_unit;
    }
    for (int k = 0; k + 1 < K; k++) c->thresh[k] = 0.5f * (c->level[k] + c->level[k + 1]);
    return 0;
}

void kv_tq_encode(const struct kv_codec *c, float *y, uint8_t *out)
{
    const int n = c->dim, K = 1 << c->bits;
    double ss = 0.0;
    for (int i = 0; i < n; i++) ss += (double)y[i] * y[i];
    float norm = (float)sqrt(ss);
    size_t nb = (size_t)n * c->bits / 8;
    if (!(norm >= 1e-30f) || !isfinite(norm)) {   /* zero, tiny, inf or NaN row */
        memset(out, 0, nb + 4);
        return;
    }
    const float inv = sqrtf((float)n) / norm;
    size_t pos = 0;
    for (int i = 0; i < n; i++) {
        float u = y[i] * inv;
        unsigned idx = 0;
        while ((int)idx < K - 1 && u > c->thresh[idx]) idx++;
        kv_bits_put(out, &pos, idx, c->bits);
    }
    kv_store_f32(out + nb, norm);
}

void kv_tq_decode(const struct kv_codec *c, const uint8_t *in, float *y)
{
    const int n = c->dim;
    size_t nb = (size_t)n * c->bits / 8, pos = 0;
    const float s = c->gain * kv_load_f32(in + nb) / sqrtf((float)n);
    float lv[16];
    for (int k = 0; k < (1 << c->bits); k++) lv[k] = c->level[k] * s;
    for (int i = 0; i < n; i++) y[i] = lv[kv_bits_get(in, &pos, c->bits)];
}
