/* model/backend.h - the device seam of the decode path: what a compute device
 * (today CUDA, src/cuda/backend_cuda.c, built by `make CUDA=1`) implements so
 * that the model's operations can run on it: weights resident in their stored
 * formats and their products (kv_b's per-head ones of the absorbed attention
 * too), RMSNorm, RoPE, SwiGLU, absorbed-MLA decode attention over a KV layer
 * read in its codes, and device buffers.
 *
 * Contract:
 *  - The CPU path (quant/, model/, kv/) is the reference: every operation
 *    here computes what its CPU counterpart named below computes, to within
 *    the tolerance tests/cuda/test_cuda.c states for it (relative to the sum
 *    of the absolute terms, as the CPU kernel tests do). None of them is
 *    bit-identical to the CPU.
 *  - Pointers marked `d` are device memory from backend_alloc (or inside a
 *    backend_wmat / backend_kv); everything else is host memory.
 *  - Operations are queued in order on the device's one stream; results are
 *    ready after backend_download or backend_sync, which also report the
 *    first failure of a queued kernel.
 *  - Every function returns 0 or a negative COLIBRI_E* code with a message:
 *    COLIBRI_EUNSUPPORTED when there is no usable device or an input the
 *    device does not implement (named), COLIBRI_ENOMEM naming the bytes,
 *    COLIBRI_EIO with the driver's message for a device failure.
 *  - A device handle is not thread-safe; use one per thread.
 *  - This is the driver interface: the forward never calls it directly; its
 *    device executor (model/fwd_device.h) maps the forward's operations
 *    (model/fwd_ops.h) onto a struct backend_ops.
 *  - Two drivers implement it, both in cuda/, each as a table of these
 *    functions (struct backend_ops, below): "cuda" (the free functions
 *    declared here, and backend_cuda_ops; only in `make CUDA=1`'s binaries)
 *    and "host" (cuda/replay_dev.c, always built: buffers are host memory
 *    and each operation is the CPU replay of its CUDA kernel,
 *    cuda/cu_replay.h, so the executor is tested without a GPU);
 *    cuda/devices.h finds one by name.
 */
#ifndef COLIBRI_MODEL_BACKEND_H
#define COLIBRI_MODEL_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "colibri.h"
#include "kv/cache.h"
#include "quant/qtensor.h"

struct backend_dev;
struct backend_wmat;   /* a weight matrix on the device, in its stored format */
struct backend_kv;     /* rows of one KV layer on the device, in their codes */

/* The number of usable devices (0 when there is no driver or no GPU: *why
 * then says which, in `why_n` bytes). Never fails otherwise. */
int backend_device_count(char *why, size_t why_n);
/* Opens device `ordinal`. */
int backend_open(int ordinal, struct backend_dev **out, struct colibri_err *err);
void backend_close(struct backend_dev *d);
/* "NVIDIA H200, sm_90, 132 SMs, 139.8 GiB" */
const char *backend_name(const struct backend_dev *d);

void *backend_alloc(struct backend_dev *d, size_t bytes, struct colibri_err *err);
void backend_free(struct backend_dev *d, void *dptr);
int backend_upload(struct backend_dev *d, void *dst, const void *src, size_t bytes, struct colibri_err *err);
/* Waits for the queued work, then copies. */
int backend_download(struct backend_dev *d, void *dst, const void *dsrc, size_t bytes, struct colibri_err *err);
int backend_sync(struct backend_dev *d, struct colibri_err *err);
/* Device to device, queued. */
int backend_copy(struct backend_dev *d, void *ddst, const void *dsrc, size_t bytes, struct colibri_err *err);

/* Copies W (data and scales, as stored) to the device. */
int backend_wmat_upload(struct backend_dev *d, const struct qtensor *W, struct backend_wmat **out,
                        struct colibri_err *err);
void backend_wmat_free(struct backend_dev *d, struct backend_wmat *w);
size_t backend_wmat_bytes(const struct backend_wmat *w);
/* dY[j * rows + r] = W row r . dX[j * cols ..] for j < n: quant_matmul. */
int backend_matmul(struct backend_dev *d, const struct backend_wmat *W, const float *dX, int n, float *dY,
                   struct colibri_err *err);

/* The absorbed MLA decode's products with kv_b ([H*(dn+dv), r] on the device,
 * any stored format), as model/mla.c's attend_absorbed computes them for one
 * token: dqa[h][j] = sum_{i<dn} kv_b[h*(dn+dv)+i][j] * dq[h*(dn+dr)+i]
 * (W_UK^T q_nope) and dqpe[h][e] = dq[h*(dn+dr)+dn+e]; then, after
 * backend_attend, dout[h*dv+k] = kv_b[h*(dn+dv)+dn+k] . dlat[h*r ..] (W_UV). */
int backend_absorb_q(struct backend_dev *d, const struct backend_wmat *kv_b, int H, int dn, int dv, int dr,
                     const float *dq, float *dqa, float *dqpe, struct colibri_err *err);
int backend_absorb_out(struct backend_dev *d, const struct backend_wmat *kv_b, int H, int dn, int dv,
                       const float *dlat, float *dout, struct colibri_err *err);

/* model_rmsnorm: n rows of width dim; dy may equal dx; dweight[dim]. */
int backend_rmsnorm(struct backend_dev *d, float *dy, const float *dx, const float *dweight, int n, int dim,
                    float eps, struct colibri_err *err);
/* model_rope_apply on n_vec vectors dx + v*ld (dr values, even) at positions
 * dpos[v]; dinv_freq[dr/2] and factor from the model config. */
int backend_rope(struct backend_dev *d, float *dx, int n_vec, int dr, size_t ld, const int32_t *dpos,
                 const float *dinv_freq, float factor, struct colibri_err *err);
/* dg[i] = silu(dg[i]) * du[i] for i < n (model/mlp.c). */
int backend_swiglu(struct backend_dev *d, float *dg, const float *du, size_t n, struct colibri_err *err);

/* dy[i] += alpha * dx[i] for i < n (the residual adds, a routed expert's
 * weighted add: model_expert_batch_add). */
int backend_axpy(struct backend_dev *d, float *dy, const float *dx, float alpha, size_t n, struct colibri_err *err);

/* Copies rows 0..T-1 of `layer` of c as stored, with what its codecs need
 * (rotation signs). Tiers without a GPU reader (polar4/3) are refused by
 * name. */
int backend_kv_upload(struct backend_dev *d, const struct kv_cache *c, int layer, int T, struct backend_kv **out,
                      struct colibri_err *err);
void backend_kv_free(struct backend_dev *d, struct backend_kv *kv);
/* Copies rows t0..t0+n-1 of `layer` of c as stored over the same rows of kv
 * (t0 + n <= the rows uploaded; c has the layout kv was uploaded from). */
int backend_kv_write(struct backend_dev *d, struct backend_kv *kv, const struct kv_cache *c, int layer, int t0, int n,
                     struct colibri_err *err);
/* kv_attend over the uploaded rows 0..T-1 (T <= the rows uploaded):
 * dq_lat [H][r], dq_rope [H][dr], dout [H][r]. */
int backend_attend(struct backend_dev *d, const struct backend_kv *kv, int T, int H, const float *dq_lat,
                   const float *dq_rope, float scale, float *dout, struct colibri_err *err);

/* A device as a table of the functions above (same contracts), so that one
 * build can hold two: model/fwd_device.c runs the forward's ops on it. */
struct backend_ops {
    const char *name;           /* "host", "cuda" */
    int (*open)(int ordinal, struct backend_dev **out, struct colibri_err *err);
    void (*close)(struct backend_dev *d);
    const char *(*dev_name)(const struct backend_dev *d);
    void *(*alloc)(struct backend_dev *d, size_t bytes, struct colibri_err *err);
    void (*free)(struct backend_dev *d, void *dptr);
    int (*upload)(struct backend_dev *d, void *dst, const void *src, size_t bytes, struct colibri_err *err);
    int (*download)(struct backend_dev *d, void *dst, const void *dsrc, size_t bytes, struct colibri_err *err);
    int (*wmat_upload)(struct backend_dev *d, const struct qtensor *W, struct backend_wmat **out,
                       struct colibri_err *err);
    void (*wmat_free)(struct backend_dev *d, struct backend_wmat *w);
    int (*matmul)(struct backend_dev *d, const struct backend_wmat *W, const float *dX, int n, float *dY,
                  struct colibri_err *err);
    int (*absorb_q)(struct backend_dev *d, const struct backend_wmat *kv_b, int H, int dn, int dv, int dr,
                    const float *dq, float *dqa, float *dqpe, struct colibri_err *err);
    int (*absorb_out)(struct backend_dev *d, const struct backend_wmat *kv_b, int H, int dn, int dv,
                      const float *dlat, float *dout, struct colibri_err *err);
    int (*rmsnorm)(struct backend_dev *d, float *dy, const float *dx, const float *dweight, int n, int dim,
                   float eps, struct colibri_err *err);
    int (*rope)(struct backend_dev *d, float *dx, int n_vec, int dr, size_t ld, const int32_t *dpos,
                const float *dinv_freq, float factor, struct colibri_err *err);
    int (*swiglu)(struct backend_dev *d, float *dg, const float *du, size_t n, struct colibri_err *err);
    int (*axpy)(struct backend_dev *d, float *dy, const float *dx, float alpha, size_t n, struct colibri_err *err);
    int (*kv_upload)(struct backend_dev *d, const struct kv_cache *c, int layer, int T, struct backend_kv **out,
                     struct colibri_err *err);
    void (*kv_free)(struct backend_dev *d, struct backend_kv *kv);
    int (*kv_write)(struct backend_dev *d, struct backend_kv *kv, const struct kv_cache *c, int layer, int t0, int n,
                    struct colibri_err *err);
    int (*attend)(struct backend_dev *d, const struct backend_kv *kv, int T, int H, const float *dq_lat,
                  const float *dq_rope, float scale, float *dout, struct colibri_err *err);
};

/* The CUDA device (cuda/backend_cuda.c): defined only in the binaries of
 * `make CUDA=1` that link the backend (cuda/devices.c looks for it). */
extern const struct backend_ops backend_cuda_ops;

#endif
