/* model/v4_compress.c - V4's compressors (see v4_compress.h), mirroring the
 * window softmax of DeepseekV4HCACompressor / DeepseekV4CSACompressor /
 * DeepseekV4Indexer.forward. Both forms call block_entry(), so they agree
 * by construction; the tests hold each to transformers. */
#include "model/v4_compress.h"

#include <math.h>
#include <string.h>

#include "base/err.h"

int model_v4_compress_width(const struct v4_compressor *c) { return c->overlap ? 2 * c->head_dim : c->head_dim; }

static int check(const struct v4_compressor *c, const char *what, struct colibri_err *err)
{
    if (c->ratio < 1 || c->head_dim < 1)
        return base_err_set(err, COLIBRI_EINVAL, "%s: ratio %d, head_dim %d", what, c->ratio, c->head_dim);
    if (c->rope.dr < 0 || c->rope.dr > c->head_dim || c->rope.dr % 2)
        return base_err_set(err, COLIBRI_EINVAL, "%s: rope dims %d for head_dim %d (even, at most head_dim)", what,
                            c->rope.dr, c->head_dim);
    if (!c->position_bias || !c->norm_w || (c->rope.dr && !c->rope.inv_freq))
        return base_err_set(err, COLIBRI_EINVAL, "%s: position_bias, norm weight or rope frequencies missing", what);
    return 0;
}

/* The entry of block b from its tokens' kv and gate (cur_*, [ratio][width])
 * and, with overlap, the previous block's (prev_*, NULL for block 0; only
 * their Ca, the first head_dim values of each row, is read). */
static void block_entry(const struct v4_compressor *c, const float *prev_kv, const float *prev_gate,
                        const float *cur_kv, const float *cur_gate, int b, float *out)
{
    const int R = c->ratio, hd = c->head_dim, W = model_v4_compress_width(c);
    const int cb = c->overlap ? hd : 0; /* where the block's own series starts */
    const float *pb = c->position_bias;
    const int has_prev = c->overlap && prev_kv;
    for (int ch = 0; ch < hd; ch++) {
        /* logits rounded to f32 as torch adds the bias in f32; max first as its softmax does */
        float mx = -INFINITY;
        for (int j = 0; j < R; j++) {
            if (has_prev) mx = fmaxf(mx, prev_gate[(size_t)j * W + ch] + pb[(size_t)j * W + ch]);
            mx = fmaxf(mx, cur_gate[(size_t)j * W + cb + ch] + pb[(size_t)j * W + cb + ch]);
        }
        double den = 0, num = 0;
        for (int j = 0; j < R; j++) {
            if (has_prev) {
                float g = prev_gate[(size_t)j * W + ch] + pb[(size_t)j * W + ch];
                double p = exp((double)g - mx);
                den += p;
                num += p * prev_kv[(size_t)j * W + ch];
            }
            float g = cur_gate[(size_t)j * W + cb + ch] + pb[(size_t)j * W + cb + ch];
            double p = exp((double)g - mx);
            den += p;
            num += p * cur_kv[(size_t)j * W + cb + ch];
        }
        out[ch] = (float)(num / den);
    }
    double ss = 0;
    for (int ch = 0; ch < hd; ch++) ss += (double)out[ch] * out[ch];
    float inv = 1.0f / sqrtf((float)(ss / hd) + c->norm_eps);
    for (int ch = 0; ch < hd; ch++) out[ch] = c->norm_w[ch] * (out[ch] * inv);
    if (c->rope.dr) model_v4_rope_tail(out, hd, &c->rope, b * R, 0);
}

int model_v4_compress_bulk(const struct v4_compressor *c, int n_tokens, const float *kv, const float *gate,
                           float *entries, struct colibri_err *err)
{
    int rc = check(c, "model_v4_compress_bulk", err);
    if (rc) return rc;
    if (n_tokens < 0) return base_err_set(err, COLIBRI_EINVAL, "model_v4_compress_bulk: %d tokens", n_tokens);
    const size_t blk = (size_t)c->ratio * model_v4_compress_width(c);
    for (int b = 0; b < n_tokens / c->ratio; b++)
        block_entry(c, b ? kv + (b - 1) * blk : NULL, b ? gate + (b - 1) * blk : NULL, kv + b * blk,
                    gate + b * blk, b, entries + (size_t)b * c->head_dim);
    return 0;
}

size_t model_v4_compress_state_floats(const struct v4_compressor *c)
{
    return (size_t)2 * (c->overlap ? 2 : 1) * c->ratio * model_v4_compress_width(c);
}

void model_v4_compress_state_init(const struct v4_compressor *c, struct v4_compress_state *s, float *mem)
{
    s->n_buf = 0;
    s->n_entries = 0;
    s->kv = mem;
    s->gate = mem + model_v4_compress_state_floats(c) / 2;
}

int model_v4_compress_push(const struct v4_compressor *c, struct v4_compress_state *s, const float *kv,
                           const float *gate, float *entry, int *emitted, struct colibri_err *err)
{
    int rc = check(c, "model_v4_compress_push", err);
    if (rc) return rc;
    const int W = model_v4_compress_width(c);
    const size_t blk = (size_t)c->ratio * W;
    /* with overlap the blocks alternate between two halves, so the closed
     * block's Ca is still there when the next block closes */
    const size_t cur = c->overlap ? (size_t)(s->n_entries & 1) * blk : 0, prev = c->overlap ? blk - cur : 0;
    memcpy(s->kv + cur + (size_t)s->n_buf * W, kv, sizeof(float) * W);
    memcpy(s->gate + cur + (size_t)s->n_buf * W, gate, sizeof(float) * W);
    *emitted = 0;
    if (++s->n_buf < c->ratio) return 0;
    const int b = s->n_entries;
    block_entry(c, b ? s->kv + prev : NULL, b ? s->gate + prev : NULL, s->kv + cur, s->gate + cur, b, entry);
    s->n_buf = 0;
    s->n_entries++;
    *emitted = 1;
    return 0;
}
