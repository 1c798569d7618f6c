/* model/runstate.h - the activation buffers of one forward pass (llama2.c's
 * RunState): allocated once for up to `cap` rows, reused by every forward.
 *
 * Everything a forward over n <= cap rows needs is here, so the decode path
 * makes no allocation call after the first token (tests/unit/test_noalloc.c).
 * The products' working memory grows to the largest product run and is kept.
 * Two buffers depend on the number of cached positions T rather than on the
 * rows and grow on demand (checked, geometric, kept): the expanded prefill's
 * K/V rows and the decoded cache rows it reads for a quantized tier (and an
 * MTP verify, which takes that form). The absorbed decode never touches them.
 *
 * A run_bufs is used by one forward at a time (not thread-safe); sessions own
 * one each. */
#ifndef COLIBRI_MODEL_RUNSTATE_H
#define COLIBRI_MODEL_RUNSTATE_H

#include <stddef.h>

#include "base/compute.h"
#include "colibri.h"
#include "model/config.h"
#include "quant/qtensor.h"

struct indexer_bufs;
struct v4_bufs;
struct kda_bufs;
struct glm53_mla_bufs;

struct run_bufs {
    int cap;                    /* rows a forward may carry */
    int n_threads;              /* per-thread parts are sized for this many */
    float *x;                   /* [cap][hc_mult][hidden]: the residual streams */
    float *h, *y;               /* [cap][hidden]: normed input, block output */
    const int32_t *tok;         /* the token ids of the rows being forwarded (hash routing) */
    float *hc_post, *hc_comb;   /* [cap][hc_mult], [cap][hc_mult^2]: hyper-connection mixes (else NULL) */
    struct v4_bufs *v4;         /* a V4 token mixer's activations (NULL without one) */
    struct kda_bufs *kda;       /* KDA token mixers' activations (NULL without them) */
    struct glm53_mla_bufs *glm53_mla;   /* GLM-5.3 indexed layers' activations and selection */
    float *q;                   /* [cap][H * (dn + dr)] */
    float *q_a;                 /* [cap][q_lora_rank] */
    float *kv_a;                /* [cap][r + dr]: latent and k_pe as projected */
    float *attn;                /* [cap][H * dv] */
    /* absorbed attention, one row at a time */
    float *abs_q, *abs_qpe, *abs_lat;   /* [H][r], [H][dr], [H][r] */
    float *kvb_row;             /* [n_threads][r]: a kv_b row dequantized to f32 */
    /* MLPs and MoE */
    float *mlp_g, *mlp_u;       /* [cap][max intermediate] */
    float *moe_logits;          /* [cap][E] */
    int *moe_idx;               /* [cap][K] */
    float *moe_wts;             /* [cap][K] */
    int *moe_tok;               /* [cap] */
    float *moe_tw;              /* [cap] */
    float *moe_in, *moe_res;    /* [cap][hidden] */
    unsigned char *moe_used;    /* [E] */
    int *moe_list;              /* [E] */
    /* next-layer predictions pending, slot li % 2 for layer li: layer li's
     * prediction is made during layer li - 1, before layer li + 1's is made
     * during layer li and before layer li's routing scores it */
    unsigned char *moe_pred;    /* [2][E]: experts predicted for layer moe_pred_layer[slot] */
    int moe_pred_layer[2];      /* -1: no prediction pending */
    int moe_pred_n[2];          /* experts in that prediction */
    /* [num_hidden_layers][K]: each layer's running precision of its predicted
     * experts of rank k (model/moe.h) */
    float *moe_pred_prec;
    int *moe_pred_read;         /* [E]: the predicted experts whose reads the gate lets through */
    /* expanded prefill, grown on demand */
    float *exp_kv;   size_t exp_kv_cap;     /* [T][H * (dn + dv)] */
    float *exp_lat;  size_t exp_lat_cap;    /* [T][r] */
    float *exp_rows; size_t exp_rows_cap;   /* [T][r + dr] decoded cache rows */
    float *exp_p;    size_t exp_p_cap;      /* per thread: [16][T + 16] softmax rows, [16][dqk] query rows (mla.c) */
    float *exp_kvb;  size_t exp_kvb_cap;    /* kv_b in f32 when there is no copy (see mla.c) */
    struct indexer_bufs *dsa;   /* DSA indexer activations and selection (NULL without DSA) */
    /* the products' working memory (quant/qtensor.h): grows to the largest
     * product run, then is reused; fwd_state_bytes counts it, `bytes` not */
    struct quant_scratch qs;
    size_t bytes;               /* allocated so far */
};

/* Sizes every fixed buffer for `cap` rows of model config c. 0 or
 * COLIBRI_ENOMEM naming the size; *b is zeroed on failure. */
int  run_bufs_init(struct run_bufs *b, const struct model_config *c, int cap, const struct compute_ctx *cc,
                   struct colibri_err *err);
void run_bufs_free(struct run_bufs *b);

/* Makes *buf hold at least n floats (contents not kept). 0 or COLIBRI_ENOMEM. */
int run_bufs_grow(struct run_bufs *b, float **buf, size_t *cap, size_t n, struct colibri_err *err);

#endif
