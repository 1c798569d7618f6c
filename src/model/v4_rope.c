/* model/v4_rope.c - V4's partial interleaved RoPE (see v4_rope.h). */
#include "model/v4_rope.h"

#include <math.h>

#include "base/err.h"

static double yarn_mscale(double scale, double m) { return scale <= 1.0 ? 1.0 : 0.1 * m * log(scale) + 1.0; }

static double correction_dim(double n_rot, int dim, double base, double max_pos)
{
    return (dim * log(max_pos / (n_rot * 2.0 * M_PI))) / (2.0 * log(base));
}

int model_v4_rope_freqs(const struct v4_rope_params *p, float *inv_freq, float *scale, struct colibri_err *err)
{
    const int dim = p->dr, half = dim / 2;
    if (dim < 2 || dim % 2 || half > V4_ROPE_MAX_PAIRS || !(p->theta > 1))
        return base_err_set(err, COLIBRI_EINVAL, "model_v4_rope_freqs: rope dims %d (even, 2..%d), theta %g", dim,
                            2 * V4_ROPE_MAX_PAIRS, p->theta);
    if (p->yarn && (!(p->factor > 0) || !(p->original_max_pos > 0)))
        return base_err_set(err, COLIBRI_EINVAL, "model_v4_rope_freqs: yarn factor %g, original_max_position %g",
                            p->factor, p->original_max_pos);
    /* f32 as torch: base ** (arange(0, dim, 2).float() / dim) */
    for (int i = 0; i < half; i++) inv_freq[i] = 1.0f / powf((float)p->theta, (float)(2 * i) / (float)dim);
    *scale = 1.0f;
    if (!p->yarn) return 0;
    if (p->has_attention_factor)
        *scale = (float)p->attention_factor;
    else if (p->mscale != 0 && p->mscale_all_dim != 0)
        *scale = (float)(yarn_mscale(p->factor, p->mscale) / yarn_mscale(p->factor, p->mscale_all_dim));
    else
        *scale = (float)yarn_mscale(p->factor, 1.0);
    const double bf = p->beta_fast != 0 ? p->beta_fast : 32, bs = p->beta_slow != 0 ? p->beta_slow : 1;
    double low = floor(correction_dim(bf, dim, p->theta, p->original_max_pos));
    double high = ceil(correction_dim(bs, dim, p->theta, p->original_max_pos));
    if (low < 0) low = 0;
    if (high > dim - 1) high = dim - 1;
    if (low == high) high += 0.001;
    for (int i = 0; i < half; i++) {
        float pos_freq = powf((float)p->theta, (float)(2 * i) / (float)dim);
        float extrap = 1.0f / pos_freq, interp = 1.0f / ((float)p->factor * pos_freq);
        float ramp = ((float)i - (float)low) / (float)(high - low);
        ramp = ramp < 0 ? 0 : ramp > 1 ? 1 : ramp;
        float ef = 1.0f - ramp;
        inv_freq[i] = interp * (1.0f - ef) + extrap * ef;
    }
    return 0;
}

void model_v4_rope_tail(float *x, int dim, const struct v4_rope *r, int pos, int inverse)
{
    float *t = x + dim - r->dr;
    for (int i = 0; i < r->dr / 2; i++) {
        /* the angle is rounded to f32 first, as torch's f32 product gives it */
        float a = (float)pos * r->inv_freq[i];
        float c = cosf(a) * r->scale, s = sinf(a) * r->scale;
        if (inverse) s = -s;
        float x0 = t[2 * i], x1 = t[2 * i + 1];
        t[2 * i] = x0 * c - x1 * s;
        t[2 * i + 1] = x1 * c + x0 * s;
    }
}
