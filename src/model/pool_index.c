/* model/pool_index.c - GLM-5.3's pooled DSA selection (contract in
 * pool_index.h). */
#include "model/pool_index.h"

#include <math.h>
#include <stddef.h>

int model_pool_index_max_sel(const struct pool_index *pi)
{
    return pi->topk + (pi->tail ? pi->kpool - 1 : 0);
}

void model_pool_index_key(const struct pool_index *pi, const float *keys, const float *gates, float *out)
{
    const int P = pi->kpool, D = pi->head_dim;
    for (int d = 0; d < D; d++) {
        float mx = -INFINITY;
        for (int j = 0; j < P; j++) {
            float l = gates[(size_t)j * D + d] + pi->ape[(size_t)j * D + d];
            if (l > mx) mx = l;
        }
        float sum = 0, acc = 0;
        for (int j = 0; j < P; j++) sum += expf(gates[(size_t)j * D + d] + pi->ape[(size_t)j * D + d] - mx);
        for (int j = 0; j < P; j++) {
            float p = expf(gates[(size_t)j * D + d] + pi->ape[(size_t)j * D + d] - mx) / sum;
            acc += p * keys[(size_t)j * D + d];
        }
        out[d] = acc;
    }
}

int model_pool_index_select(const struct pool_index *pi, int pos, const float *q, const float *w,
                            const float *pool_keys, int n_pools, float *score, int *order, int32_t *sel)
{
    const int P = pi->kpool, D = pi->head_dim, H = pi->n_heads;
    const float scale = 1.0f / sqrtf((float)D);
    int vis = (pos + 1) / P; /* complete pools whose last position is <= pos */
    if (vis > n_pools) vis = n_pools;
    for (int p = 0; p < vis; p++) {
        const float *k = pool_keys + (size_t)p * D;
        float s = 0;
        for (int h = 0; h < H; h++) {
            const float *qh = q + (size_t)h * D;
            float dot = 0;
            for (int d = 0; d < D; d++) dot += qh[d] * k[d];
            dot *= scale;
            s += w[h] * (dot > 0 ? dot : 0);
        }
        score[p] = s;
    }
    int want = pi->topk / P < vis ? pi->topk / P : vis;
    /* partial selection sort: the best `want`, ties to the lower pool */
    for (int p = 0; p < vis; p++) order[p] = p;
    for (int i = 0; i < want; i++) {
        int best = i;
        for (int j = i + 1; j < vis; j++)
            if (score[order[j]] > score[order[best]] ||
                (score[order[j]] == score[order[best]] && order[j] < order[best]))
                best = j;
        int t = order[i];
        order[i] = order[best];
        order[best] = t;
    }
    /* ascending pool order, then the tail */
    for (int i = 1; i < want; i++)
        for (int j = i; j > 0 && order[j - 1] > order[j]; j--) {
            int t = order[j];
            order[j] = order[j - 1];
            order[j - 1] = t;
        }
    int n = 0;
    for (int i = 0; i < want; i++)
        for (int j = 0; j < P; j++) sel[n++] = order[i] * P + j;
    if (pi->tail) {
        int tc = (pos + 1) % P;
        for (int t = pos + 1 - tc; t <= pos; t++) sel[n++] = t;
    }
    return n;
}
