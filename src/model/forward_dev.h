/* model/forward_dev.h - the decode on a compute device: one token through the
 * operations of model/backend.h, in the CPU decode's order (model/forward.c
 * with FWD_ABSORBED): embed -> per layer [RMSNorm -> q (q_a, q_a_norm, q_b)
 * and kv_a -> kv_a_norm, RoPE -> cache row -> absorbed attention (kv_b's
 * products, attention over the KV codes) -> o -> residual; RMSNorm -> dense
 * MLP, or MoE (router, routing on the host, shared experts, then the routed
 * experts in ascending order, each weighted) -> residual] -> norm -> lm_head.
 *
 * What stays on the host: the embedding row (uploaded), the routing of each
 * MoE layer (its router logits are downloaded and moe_route picks the
 * experts), and the encoding of each new cache row: the normed, rotated
 * latent is downloaded, written into the session's host cache by
 * kv_cache_write (the CPU's codec), and that row is copied to the device.
 * So the host cache always holds every row, whatever path wrote it (a CPU
 * prefill, a restored file), and the device copy of a layer is brought up
 * to date from it before a step reads it.
 *
 * Weights are uploaded once, at model_dev_new, in their stored formats (all
 * of them, routed experts included: a streamed expert store is refused by
 * name, as are DSA models, the MTP layers' use and MPI experts). A model_dev
 * runs one step at a time (its activations are one set): one thread.
 *
 * The result is not bit-identical to the CPU decode (the kernels sum in
 * their own order); tests/unit/test_forward_dev.c bounds the difference on
 * the "host" device, tests/cuda/forward_dev.sh on the GPU. */
#ifndef COLIBRI_MODEL_FORWARD_DEV_H
#define COLIBRI_MODEL_FORWARD_DEV_H

#include "colibri.h"
#include "model/backend.h"
#include "model/forward.h"
#include "model/model.h"

struct model_dev;
struct model_dev_kv;

/* The device named `name` ("host"; "cuda" in a build with the CUDA backend,
 * refused by name otherwise): its ops, or COLIBRI_EUNSUPPORTED / EINVAL
 * naming what is wrong. */
int model_dev_ops(const char *name, const struct backend_ops **out, struct colibri_err *err);

/* Opens device 0 of ops and uploads m's weights (main layers). */
int model_dev_new(const struct model *m, const struct backend_ops *ops, struct model_dev **out, struct colibri_err *err);
void model_dev_free(struct model_dev *fd);
const char *model_dev_name(const struct model_dev *fd);

/* The device copy of st's cache (every layer at its capacity; tiers the
 * device does not read are refused by name). */
int model_dev_kv_new(struct model_dev *fd, const struct fwd_state *st, struct model_dev_kv **out, struct colibri_err *err);
void model_dev_kv_free(struct model_dev *fd, struct model_dev_kv *dk);
/* The host rows at positions >= pos may change (truncation, a rollback, a
 * restore): the next step copies them again. */
void model_dev_kv_forget(struct model_dev_kv *dk, int pos);

/* Decodes `token` at position pos (rows < pos cached in st's host cache) on
 * the device: the new row goes into st's cache and dk; logits (vocab floats)
 * may be NULL. */
int model_dev_decode(struct model_dev *fd, struct model_dev_kv *dk, struct fwd_state *st, int32_t token, int pos,
                   float *logits, struct colibri_err *err);

#endif
