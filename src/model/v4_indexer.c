/* model/v4_indexer.c - V4's lightning-indexer scores and top-k (see
 * v4_indexer.h), mirroring DeepseekV4IndexerScorer.forward and the selection
 * at the end of DeepseekV4Indexer.forward. */
#include "model/v4_indexer.h"

#include <math.h>
#include <string.h>

#include "base/err.h"

int model_v4_indexer_scores(const struct v4_indexer *ix, int pos, const float *q, const float *w, const float *keys,
                            int n_entries, float *qrot, float *score, struct colibri_err *err)
{
    const int H = ix->n_heads, hd = ix->head_dim;
    if (H < 1 || hd < 1 || n_entries < 0 || pos < 0)
        return base_err_set(err, COLIBRI_EINVAL, "model_v4_indexer_scores: %d heads of %d, %d entries, pos %d", H, hd,
                            n_entries, pos);
    if (ix->rope.dr < 0 || ix->rope.dr > hd || ix->rope.dr % 2)
        return base_err_set(err, COLIBRI_EINVAL, "model_v4_indexer_scores: rope dims %d for head_dim %d",
                            ix->rope.dr, hd);
    memcpy(qrot, q, sizeof(float) * H * hd);
    for (int h = 0; h < H; h++)
        if (ix->rope.dr) model_v4_rope_tail(qrot + (size_t)h * hd, hd, &ix->rope, pos, 0);
    const float softmax_scale = 1.0f / sqrtf((float)hd), w_scale = 1.0f / sqrtf((float)H);
    for (int s = 0; s < n_entries; s++) {
        const float *k = keys + (size_t)s * hd;
        double acc = 0;
        for (int h = 0; h < H; h++) {
            double d = 0;
            for (int i = 0; i < hd; i++) d += (double)qrot[(size_t)h * hd + i] * k[i];
            float r = d > 0 ? (float)d * softmax_scale : 0.0f;
            acc += (double)r * (w[h] * w_scale);
        }
        score[s] = (float)acc;
    }
    return 0;
}

int model_v4_indexer_select(const struct v4_indexer *ix, int pos, const float *score, int n_entries, int32_t *sel,
                            int *n_sel, struct colibri_err *err)
{
    if (ix->topk < 1 || ix->ratio < 1 || n_entries < 0 || pos < 0)
        return base_err_set(err, COLIBRI_EINVAL, "model_v4_indexer_select: topk %d, ratio %d, %d entries, pos %d",
                            ix->topk, ix->ratio, n_entries, pos);
    int vis = (pos + 1) / ix->ratio;
    if (vis > n_entries) vis = n_entries;
    const int k = vis < ix->topk ? vis : ix->topk;
    int n = 0;
    /* insertion into the descending list sel[0..n); strict '>' keeps the lower index on ties */
    for (int s = 0; s < vis; s++) {
        if (n == k && !(score[s] > score[sel[k - 1]])) continue;
        int p = n < k ? n++ : k - 1;
        while (p > 0 && score[s] > score[sel[p - 1]]) {
            sel[p] = sel[p - 1];
            p--;
        }
        sel[p] = s;
    }
    *n_sel = n;
    return 0;
}
