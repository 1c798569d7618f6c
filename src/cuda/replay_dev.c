/* cuda/replay_dev.c - a test device of model/backend.h, named "host": buffers
 * are host memory and each operation is the CPU replay of its CUDA kernel
 * (cuda/cu_replay.h: the kernel's split of the work and order of summation),
 * on weights and KV rows copied as stored, exactly as the CUDA backend lays
 * them out (cuda/cu_desc.h). It is slow (one thread, lane by lane) and exists
 * to test the forward's device executor (model/fwd_device.h) where there is
 * no GPU; it is built into every binary (no CUDA runtime needed). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "cuda/cu_desc.h"
#include "cuda/cu_replay.h"
#include "model/backend.h"
#include "cuda/cu_kv.h"
#include "cuda/devices.h"

/* The attention splits T positions as the CUDA backend does on an H200
 * (132 SMs: attn_chunks of cuda/backend_cuda.c), so that the replay walks
 * the same chunks; k_rmsnorm's block is 256 threads. */
#define HOST_N_SM 132
#define HOST_NORM_THREADS 256

struct backend_dev {
    char name[64];
};

struct backend_wmat {
    struct cu_wmat w;           /* data and scales point to the copies */
    void *data;
    float *scales;
    size_t bytes;
};

/* 64-byte aligned, as cudaMalloc's memory is at least 256-byte aligned: the
 * replay then takes the word path wherever the kernel would. */
static void *host_mem(size_t bytes)
{
    size_t n = (bytes + 63) / 64 * 64;
    return aligned_alloc(64, n ? n : 64);
}

static int host_open(int ordinal, struct backend_dev **out, struct colibri_err *err)
{
    if (ordinal != 0) return base_err_set(err, COLIBRI_EINVAL, "host device: device %d does not exist (1 found)", ordinal);
    struct backend_dev *d = calloc(1, sizeof *d);
    if (!d) return base_err_set(err, COLIBRI_ENOMEM, "host device: handle");
    snprintf(d->name, sizeof d->name, "host (CPU replay of the CUDA kernels)");
    *out = d;
    return 0;
}

static void host_close(struct backend_dev *d) { free(d); }

static const char *host_name(const struct backend_dev *d) { return d->name; }

static void *host_alloc(struct backend_dev *d, size_t bytes, struct colibri_err *err)
{
    void *p = host_mem(bytes);
    if (!p) base_err_set(err, COLIBRI_ENOMEM, "host device: allocating %zu bytes", bytes);
    return p;
}

static void host_free(struct backend_dev *d, void *p) { free(p); }

static int host_copy(struct backend_dev *d, void *dst, const void *src, size_t bytes, struct colibri_err *err)
{
    memcpy(dst, src, bytes);
    return 0;
}

static int host_wmat_upload(struct backend_dev *d, const struct qtensor *W, struct backend_wmat **out,
                            struct colibri_err *err)
{
    int rc = cu_fmt_check(W, err);
    if (rc) return rc;
    size_t db = quant_fmt_data_bytes(W->fmt, W->rows, W->cols);
    size_t ns = quant_fmt_scale_count(W->fmt, W->rows, W->cols);
    struct backend_wmat *w = calloc(1, sizeof *w);
    if (w) w->data = host_mem(db);
    if (w && ns) w->scales = host_mem(ns * sizeof(float));
    if (!w || !w->data || (ns && !w->scales)) {
        if (w) free(w->data), free(w->scales);
        free(w);
        return base_err_set(err, COLIBRI_ENOMEM, "host device: %zu bytes of weights", db + ns * sizeof(float));
    }
    memcpy(w->data, W->data, db);
    if (ns) memcpy(w->scales, W->scales, ns * sizeof(float));
    w->w = cu_wmat_of(W, w->data, w->scales);
    w->bytes = db + ns * sizeof(float);
    *out = w;
    return 0;
}

static void host_wmat_free(struct backend_dev *d, struct backend_wmat *w)
{
    if (!w) return;
    free(w->data);
    free(w->scales);
    free(w);
}

static int host_matmul(struct backend_dev *d, const struct backend_wmat *W, const float *dX, int n, float *dY,
                       struct colibri_err *err)
{
    if (n < 1) return base_err_set(err, COLIBRI_EINVAL, "host matmul: %d activations", n);
    cu_replay_matmul(&W->w, dX, n, dY, cu_replay_vec(&W->w, dX));
    return 0;
}

static int absorb_shape(const struct backend_wmat *kv_b, int H, int dn, int dv, int dr, struct colibri_err *err)
{
    if (H < 1 || dn < 1 || dv < 1 || dr < 0 || (long long)kv_b->w.rows != (long long)H * (dn + dv))
        return base_err_set(err, COLIBRI_EINVAL, "host absorb: kv_b has %d rows, %d heads x (%d + %d) given",
                            kv_b->w.rows, H, dn, dv);
    return 0;
}

static int host_absorb_q(struct backend_dev *d, const struct backend_wmat *kv_b, int H, int dn, int dv, int dr,
                         const float *dq, float *dqa, float *dqpe, struct colibri_err *err)
{
    int rc = absorb_shape(kv_b, H, dn, dv, dr, err);
    if (rc) return rc;
    if (dr && !dqpe) return base_err_set(err, COLIBRI_EINVAL, "host absorb: no RoPE query buffer");
    cu_replay_absorb_q(&kv_b->w, H, dn, dv, dr, dq, dqa, dqpe);
    return 0;
}

static int host_absorb_out(struct backend_dev *d, const struct backend_wmat *kv_b, int H, int dn, int dv,
                           const float *dlat, float *dout, struct colibri_err *err)
{
    int rc = absorb_shape(kv_b, H, dn, dv, 0, err);
    if (rc) return rc;
    cu_replay_absorb_out(&kv_b->w, H, dn, dv, dlat, dout);
    return 0;
}

static int host_rmsnorm(struct backend_dev *d, float *dy, const float *dx, const float *dweight, int n, int dim,
                        float eps, struct colibri_err *err)
{
    if (n < 1 || dim < 1) return base_err_set(err, COLIBRI_EINVAL, "host rmsnorm: %d rows of %d", n, dim);
    cu_replay_rmsnorm(dy, dx, dweight, n, dim, eps, HOST_NORM_THREADS);
    return 0;
}

/* k_rope's arithmetic (cos and sin in double, as model_rope_apply). */
static int host_rope(struct backend_dev *d, float *dx, int n_vec, int dr, size_t ld, const int32_t *dpos,
                     const float *dinv_freq, float factor, struct colibri_err *err)
{
    if (n_vec < 1 || dr < 2 || dr % 2 || ld < (size_t)dr)
        return base_err_set(err, COLIBRI_EINVAL, "host rope: %d vectors of %d (stride %zu)", n_vec, dr, ld);
    for (int v = 0; v < n_vec; v++) {
        float *xv = dx + (size_t)v * ld;
        for (int i = 0; i < dr / 2; i++) {
            const float angle = (float)dpos[v] * dinv_freq[i];
            const float cs = (float)cos((double)angle) * factor, sn = (float)sin((double)angle) * factor;
            const float x0 = xv[2 * i], x1 = xv[2 * i + 1];
            xv[2 * i] = x0 * cs - x1 * sn;
            xv[2 * i + 1] = x1 * cs + x0 * sn;
        }
    }
    return 0;
}

static int host_swiglu(struct backend_dev *d, float *dg, const float *du, size_t n, struct colibri_err *err)
{
    if (n < 1) return base_err_set(err, COLIBRI_EINVAL, "host swiglu: no values");
    for (size_t i = 0; i < n; i++) dg[i] = dg[i] / (1.0f + expf(-dg[i])) * du[i];
    return 0;
}

static int host_axpy(struct backend_dev *d, float *dy, const float *dx, float alpha, size_t n, struct colibri_err *err)
{
    if (n < 1) return base_err_set(err, COLIBRI_EINVAL, "host axpy: no values");
    for (size_t i = 0; i < n; i++) dy[i] += alpha * dx[i];
    return 0;
}

/* The KV layer's rows in host memory: cuda/cu_kv.c through this table. */
static int host_kv_upload(struct backend_dev *d, const struct kv_cache *c, int layer, int T, struct backend_kv **out,
                          struct colibri_err *err)
{
    return cuda_kv_upload(&cuda_replay_ops, d, c, layer, T, out, err);
}

static void host_kv_free(struct backend_dev *d, struct backend_kv *kv)
{
    cuda_kv_free(&cuda_replay_ops, d, kv);
}

static int host_kv_write(struct backend_dev *d, struct backend_kv *kv, const struct kv_cache *c, int layer, int t0,
                         int n, struct colibri_err *err)
{
    return cuda_kv_write(&cuda_replay_ops, d, kv, c, layer, t0, n, err);
}

/* attn_chunks of cuda/backend_cuda.c at HOST_N_SM. */
static int host_chunks(int T, int H)
{
    int groups = (H + CU_ATTN_HG - 1) / CU_ATTN_HG;
    int want = (8 * HOST_N_SM + groups - 1) / groups, most = T / 128;
    int n = want < most ? want : most;
    return n < 1 ? 1 : n > 65535 ? 65535 : n;
}

static int host_attend(struct backend_dev *d, const struct backend_kv *kv, int T, int H, const float *dq_lat,
                       const float *dq_rope, float scale, float *dout, struct colibri_err *err)
{
    if (T < 1 || T > kv->T || H < 1)
        return base_err_set(err, COLIBRI_EINVAL, "host attention: %d rows (%d uploaded), %d heads", T, kv->T, H);
    if (kv->L.pe.dim && !dq_rope) return base_err_set(err, COLIBRI_EINVAL, "host attention: no RoPE query");
    if (cu_replay_attend(&kv->L, T, H, dq_lat, dq_rope, scale, host_chunks(T, H), dout))
        return base_err_set(err, COLIBRI_ENOMEM, "host attention: scratch");
    return 0;
}

const struct backend_ops cuda_replay_ops = {
    .name = "host",
    .open = host_open,
    .close = host_close,
    .dev_name = host_name,
    .alloc = host_alloc,
    .free = host_free,
    .upload = host_copy,
    .download = host_copy,
    .wmat_upload = host_wmat_upload,
    .wmat_free = host_wmat_free,
    .matmul = host_matmul,
    .absorb_q = host_absorb_q,
    .absorb_out = host_absorb_out,
    .rmsnorm = host_rmsnorm,
    .rope = host_rope,
    .swiglu = host_swiglu,
    .axpy = host_axpy,
    .kv_upload = host_kv_upload,
    .kv_free = host_kv_free,
    .kv_write = host_kv_write,
    .attend = host_attend,
};
