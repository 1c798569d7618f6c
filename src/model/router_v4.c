/* model/router_v4.c - DeepSeek-V4's sqrtsoftplus top-k and hash routers (see
 * router_v4.h), mirroring DeepseekV4TopKRouter.forward and
 * DeepseekV4HashRouter.forward after their gate linear. */
#include "model/router_v4.h"

#include <math.h>

#include "base/err.h"

float model_router_v4_sqrtsoftplus(float v)
{
    /* torch.nn.functional.softplus with beta 1 and threshold 20 */
    float sp = v > 20.0f ? v : log1pf(expf(v));
    return sqrtf(sp);
}

/* weight[i] = score(idx[i]) normalised over the k chosen, times scaling. */
static void chosen_weights(const float *logits, const int32_t *idx, int k, float scaling, float *weight)
{
    double s = 0;
    for (int i = 0; i < k; i++) s += weight[i] = model_router_v4_sqrtsoftplus(logits[idx[i]]);
    float denom = (float)s + 1e-20f;
    for (int i = 0; i < k; i++) weight[i] = weight[i] / denom * scaling;
}

static int check_k(int n_experts, int k, const char *what, struct colibri_err *err)
{
    if (n_experts < 1 || k < 1 || k > n_experts || k > ROUTER_V4_MAX_K)
        return base_err_set(err, COLIBRI_EINVAL, "%s: top-%d of %d experts (k 1..min(experts, %d))", what, k,
                            n_experts, ROUTER_V4_MAX_K);
    return 0;
}

int model_router_v4_topk(const float *logits, const float *bias, int n_experts, int k, float routed_scaling,
                         int32_t *idx, float *weight, struct colibri_err *err)
{
    int rc = check_k(n_experts, k, "model_router_v4_topk", err);
    if (rc) return rc;
    /* insertion into a descending list of k; strict '>' keeps the lower index on ties */
    float best[ROUTER_V4_MAX_K];
    int n = 0;
    for (int e = 0; e < n_experts; e++) {
        float v = model_router_v4_sqrtsoftplus(logits[e]) + (bias ? bias[e] : 0.0f);
        if (n == k && !(v > best[k - 1])) continue;
        int p = n < k ? n++ : k - 1;
        while (p > 0 && v > best[p - 1]) {
            best[p] = best[p - 1];
            idx[p] = idx[p - 1];
            p--;
        }
        best[p] = v;
        idx[p] = e;
    }
    chosen_weights(logits, idx, k, routed_scaling, weight);
    return 0;
}

int model_router_v4_hash(const float *logits, int n_experts, const int64_t *tid2eid, int vocab, int k, int token,
                         float routed_scaling, int32_t *idx, float *weight, struct colibri_err *err)
{
    int rc = check_k(n_experts, k, "model_router_v4_hash", err);
    if (rc) return rc;
    if (token < 0 || token >= vocab)
        return base_err_set(err, COLIBRI_ERANGE, "model_router_v4_hash: token %d outside the tid2eid table of %d rows",
                            token, vocab);
    const int64_t *row = tid2eid + (int64_t)token * k;
    for (int i = 0; i < k; i++) {
        if (row[i] < 0 || row[i] >= n_experts)
            return base_err_set(err, COLIBRI_ERANGE, "model_router_v4_hash: tid2eid[%d][%d] = %lld, experts 0..%d",
                                token, i, (long long)row[i], n_experts - 1);
        idx[i] = (int32_t)row[i];
    }
    chosen_weights(logits, idx, k, routed_scaling, weight);
    return 0;
}
