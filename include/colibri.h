/* colibri.h - the public C API of colibri, an inference engine for the
 * DeepSeek-V3 family (MLA attention + DeepSeekMoE).
 *
 * Conventions (stated once, true for every function below unless it says
 * otherwise):
 *  - Functions return 0 (COLIBRI_OK) or a negative COLIBRI_E* code. On failure
 *    they fill the caller-supplied `struct colibri_err` (which may be NULL) with
 *    a message naming the file, tensor, field or offset at fault, and leave
 *    their out-parameters untouched.
 *  - Objects come in new/free pairs; *_free(NULL) is a no-op.
 *  - A model is read-only after load and may be shared by any number of
 *    sessions on any threads. A session is not thread-safe: one thread at a
 *    time per session.
 */
#ifndef COLIBRI_H
#define COLIBRI_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum colibri_status {
    COLIBRI_OK           = 0,
    COLIBRI_EINVAL       = -1,  /* bad argument or bad input value */
    COLIBRI_EIO          = -2,  /* a file could not be opened, read or written */
    COLIBRI_ENOMEM       = -3,
    COLIBRI_EFORMAT      = -4,  /* a file is malformed (header, JSON, offsets) */
    COLIBRI_EUNSUPPORTED = -5,  /* well-formed but not supported (dtype, model type) */
    COLIBRI_ERANGE       = -6,  /* token id out of range, context full */
    COLIBRI_EMISMATCH    = -7,  /* a file belongs to another model / tier */
};

#define COLIBRI_ERR_MSG_MAX 1024
struct colibri_err {
    int  code;
    char msg[COLIBRI_ERR_MSG_MAX];
};

/* A short name for a status code ("EINVAL", ...); never NULL. */
const char *colibri_status_name(int code);

/* ---------------------------------------------------------------- models */

typedef struct colibri_model colibri_model;

struct colibri_model_opts {
    int n_threads;              /* 0 = OpenMP default */
};

/* Loads a Hugging Face model directory (config.json + *.safetensors, single or
 * sharded). Release with colibri_model_free(). */
int  colibri_model_load(const char *dir, const struct colibri_model_opts *opts,
                        colibri_model **out, struct colibri_err *err);
void colibri_model_free(colibri_model *m);

struct colibri_model_info {
    const char *family;         /* "deepseek_v3" or "kimi_k2" */
    int n_layers, n_dense_layers, n_moe_layers;
    int hidden, vocab, n_heads;
    int n_routed_experts, n_shared_experts, n_experts_per_tok;
    int kv_lora_rank, qk_rope_head_dim, q_lora_rank;
    int max_position_embeddings;
    int64_t n_params;           /* every tensor's element count, summed */
    int64_t bytes_by_dtype[16]; /* indexed by safetensors dtype, see names */
    const char *dtype_names[16];
    int64_t kv_bytes_per_token; /* latent + rope, f32, all layers */
};
void colibri_model_get_info(const colibri_model *m, struct colibri_model_info *info);

/* -------------------------------------------------------------- sessions */

typedef struct colibri_session colibri_session;

struct colibri_session_opts {
    int n_ctx;                  /* 0 = the model's max_position_embeddings */
};

int  colibri_session_new(colibri_model *m, const struct colibri_session_opts *opts,
                         colibri_session **out, struct colibri_err *err);
void colibri_session_free(colibri_session *s);

/* Feeds n tokens after the current position (expanded MLA, one batch).
 * If logits is non-NULL it receives n x vocab floats when all_logits is set,
 * else only the last position's vocab floats. */
int colibri_session_prefill(colibri_session *s, const int32_t *tokens, int n,
                            float *logits, int all_logits, struct colibri_err *err);

/* Feeds one token with absorbed MLA; logits (vocab floats) may be NULL. */
int colibri_session_decode(colibri_session *s, int32_t token, float *logits,
                           struct colibri_err *err);

/* Number of tokens in the session's cache. */
int colibri_session_pos(const colibri_session *s);

/* Forgets every cached token at position >= n (n <= pos). */
int colibri_session_truncate(colibri_session *s, int n, struct colibri_err *err);

int colibri_model_vocab(const colibri_model *m);

/* ---------------------------------------------------------- verification */

/* Checks one oracle fixture directory (config.json, model.safetensors,
 * reference.json, reference.safetensors as tools/make_oracle.py writes them)
 * against Hugging Face's outputs: teacher-forced argmax agreement at positions
 * whose reference top-2 margin exceeds the fixture's tolerance, the greedy
 * continuation, the largest |logit difference| of prefill against HF, and of
 * token-by-token absorbed decode against prefill. */
struct colibri_oracle_result {
    char name[128];
    int tf_agree, tf_total;     /* argmax agreement over confident positions */
    int gen_agree, gen_total;   /* greedy tokens reproduced (matching prefix) */
    double max_dlogit;          /* prefill vs HF, all sequences */
    double decode_dlogit;       /* absorbed decode vs expanded prefill */
    int pass;                   /* tf and gen complete, both deltas <= 1e-4 */
};
int colibri_oracle_check(const char *fixture_dir, struct colibri_oracle_result *res,
                         struct colibri_err *err);

#ifdef __cplusplus
}
#endif
#endif
