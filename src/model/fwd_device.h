/* model/fwd_device.h - the forward's executor on a compute device: the ops
 * of model/fwd_ops.h over a driver of model/backend.h (struct backend_ops:
 * the GPU's, cuda/backend_cuda.c, or the CPU replay of its kernels,
 * cuda/replay_dev.c), so that a session's one-row absorbed decode runs the
 * one forward (model/forward.c) on the device. There is no second forward:
 * this file maps the forward's operations onto the driver's.
 *
 * A model_dev holds the model's weights on the device, uploaded once at
 * model_dev_new in their stored formats (all of them, routed experts
 * included), and a map from each host tensor and norm vector the forward
 * passes to its device copy (sorted once; a lookup is a binary search, no
 * allocation). A model_dev_kv is one session's side: the device run buffers
 * of one row, the host buffers its routing reads, and a device mirror of the
 * session's KV cache.
 *
 * What stays on the host: the embedding row (dequantized, uploaded), the
 * routing of each MoE layer (the router's logits are downloaded and the
 * forward's moe_route picks the experts), and the encoding of each new cache
 * row: the normed, rotated latent is downloaded, written into the session's
 * host cache by kv_cache_write (the CPU's codec), and the mirror's rows of
 * that layer not yet copied, the new one included, are copied up before the
 * attention reads them. So the host cache always holds every row, whatever
 * path wrote it (a CPU prefill, a restored file), and the mirror follows it.
 *
 * Refused by name at model_dev_new: DSA models, streamed experts (the device
 * needs them all resident), qk_rope_head_dim < 2; the caller (api/) refuses
 * MPI experts, --bf16-act and MTP drafting. Every forward but a one-row
 * absorbed decode that asks for the device (fwd_out.on_device) runs on the
 * CPU over the same host cache.
 *
 * The result is not bit-identical to the CPU decode (the kernels sum in
 * their own order); tests/unit/test_forward_dev.c bounds the difference on
 * the replay device, tests/cuda/forward_dev.sh on the GPU. A device handle
 * is not thread-safe: sessions of one model_dev decode one at a time. */
#ifndef COLIBRI_MODEL_FWD_DEVICE_H
#define COLIBRI_MODEL_FWD_DEVICE_H

#include "colibri.h"
#include "model/backend.h"
#include "model/forward.h"
#include "model/model.h"

struct model_dev;
struct model_dev_kv;

/* Opens device 0 of ops and uploads m's weights (main layers). */
int model_dev_new(const struct model *m, const struct backend_ops *ops, struct model_dev **out, struct colibri_err *err);
void model_dev_free(struct model_dev *fd);
const char *model_dev_name(const struct model_dev *fd);

/* The session side for state st: its device buffers and the mirror of its
 * cache (every layer at its capacity; tiers the device does not read are
 * refused by name); st->dev and st->dev_bufs point into it until
 * model_dev_kv_free(fd, dk, st). */
int model_dev_kv_new(struct model_dev *fd, struct fwd_state *st, struct model_dev_kv **out, struct colibri_err *err);
void model_dev_kv_free(struct model_dev *fd, struct model_dev_kv *dk, struct fwd_state *st);
/* The host rows at positions >= pos may change (truncation, a rollback, a
 * restore): the next decode copies them again. dk may be NULL. */
void model_dev_kv_forget(struct model_dev_kv *dk, int pos);

#endif
