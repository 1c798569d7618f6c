/* cuda/backend_cuda.c - model/backend.h on CUDA: the device, its buffers and
 * one stream, weights and KV rows copied as stored, and the calls into the
 * kernel launchers (cuda/cu_launch.h). Compiled only by `make CUDA=1`. */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "cuda/cu_desc.h"
#include "cuda/cu_launch.h"
#include "model/backend.h"
#include "cuda/cu_kv.h"

struct backend_dev {
    int ordinal, n_sm, max_smem;
    cudaStream_t stream;
    void *ws;               /* attention workspace */
    size_t ws_bytes;
    char name[160];
};

struct backend_wmat {
    struct cu_wmat w;       /* data and scales point to device copies */
    size_t bytes;
};

static int cuda_fail(struct colibri_err *err, int rc, const char *what)
{
    cudaError_t e = (cudaError_t)rc;
    return base_err_set(err, e == cudaErrorMemoryAllocation ? COLIBRI_ENOMEM : COLIBRI_EIO, "cuda: %s: %s (%s)",
                        what, cudaGetErrorString(e), cudaGetErrorName(e));
}

int backend_device_count(char *why, size_t why_n)
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        if (why && why_n) snprintf(why, why_n, "cudaGetDeviceCount: %s", cudaGetErrorString(e));
        (void)cudaGetLastError();   /* the error is not sticky: clear it */
        return 0;
    }
    if (n == 0 && why && why_n) snprintf(why, why_n, "the driver reports no CUDA device");
    return n;
}

int backend_open(int ordinal, struct backend_dev **out, struct colibri_err *err)
{
    char why[256];
    int n = backend_device_count(why, sizeof why);
    if (n == 0) return base_err_set(err, COLIBRI_EUNSUPPORTED, "cuda: no usable device (%s)", why);
    if (ordinal < 0 || ordinal >= n)
        return base_err_set(err, COLIBRI_EINVAL, "cuda: device %d does not exist (%d found)", ordinal, n);
    struct backend_dev *d = calloc(1, sizeof *d);
    if (!d) return base_err_set(err, COLIBRI_ENOMEM, "cuda: device handle");
    struct cudaDeviceProp p;
    int rc = (int)cudaSetDevice(ordinal);
    if (!rc) rc = (int)cudaGetDeviceProperties(&p, ordinal);
    if (!rc) rc = (int)cudaStreamCreateWithFlags(&d->stream, cudaStreamNonBlocking);
    if (rc) {
        free(d);
        return cuda_fail(err, rc, "opening the device");
    }
    d->ordinal = ordinal;
    d->n_sm = p.multiProcessorCount;
    d->max_smem = (int)p.sharedMemPerBlockOptin;
    snprintf(d->name, sizeof d->name, "%s, sm_%d%d, %d SMs, %.1f GiB", p.name, p.major, p.minor, p.multiProcessorCount,
             (double)p.totalGlobalMem / (1024.0 * 1024 * 1024));
    *out = d;
    return 0;
}

void backend_close(struct backend_dev *d)
{
    if (!d) return;
    cudaFree(d->ws);
    cudaStreamDestroy(d->stream);
    free(d);
}

const char *backend_name(const struct backend_dev *d) { return d->name; }

void *backend_alloc(struct backend_dev *d, size_t bytes, struct colibri_err *err)
{
    void *p = NULL;
    int rc = (int)cudaMalloc(&p, bytes ? bytes : 1);
    if (rc) {
        char what[64];
        snprintf(what, sizeof what, "allocating %zu bytes", bytes);
        cuda_fail(err, rc, what);
        return NULL;
    }
    return p;
}

void backend_free(struct backend_dev *d, void *dptr)
{
    (void)d;
    if (dptr) cudaFree(dptr);
}

int backend_upload(struct backend_dev *d, void *dst, const void *src, size_t bytes, struct colibri_err *err)
{
    int rc = (int)cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, d->stream);
    if (!rc) rc = (int)cudaStreamSynchronize(d->stream);   /* src may be reused at once */
    return rc ? cuda_fail(err, rc, "copying to the device") : 0;
}

int backend_download(struct backend_dev *d, void *dst, const void *dsrc, size_t bytes, struct colibri_err *err)
{
    int rc = (int)cudaMemcpyAsync(dst, dsrc, bytes, cudaMemcpyDeviceToHost, d->stream);
    if (!rc) rc = (int)cudaStreamSynchronize(d->stream);
    return rc ? cuda_fail(err, rc, "copying from the device (or an earlier kernel)") : 0;
}

int backend_sync(struct backend_dev *d, struct colibri_err *err)
{
    int rc = (int)cudaStreamSynchronize(d->stream);
    return rc ? cuda_fail(err, rc, "running the queued kernels") : 0;
}

/* *dst = a device copy of src[bytes]; 0 or the error. */
static int alloc_copy(struct backend_dev *d, void **dst, const void *src, size_t bytes, struct colibri_err *err)
{
    int rc = (int)cudaMalloc(dst, bytes ? bytes : 1);
    if (rc) {
        *dst = NULL;
        char what[64];
        snprintf(what, sizeof what, "allocating %zu bytes", bytes);
        return cuda_fail(err, rc, what);
    }
    return backend_upload(d, *dst, src, bytes, err);
}

int backend_copy(struct backend_dev *d, void *ddst, const void *dsrc, size_t bytes, struct colibri_err *err)
{
    int rc = (int)cudaMemcpyAsync(ddst, dsrc, bytes, cudaMemcpyDeviceToDevice, d->stream);
    return rc ? cuda_fail(err, rc, "device to device copy") : 0;
}

int backend_wmat_upload(struct backend_dev *d, const struct qtensor *W, struct backend_wmat **out,
                        struct colibri_err *err)
{
    int rc = cu_fmt_check(W, err);
    if (rc) return rc;
    size_t db = quant_fmt_data_bytes(W->fmt, W->rows, W->cols);
    size_t ns = quant_fmt_scale_count(W->fmt, W->rows, W->cols);
    struct backend_wmat *w = calloc(1, sizeof *w);
    if (!w) return base_err_set(err, COLIBRI_ENOMEM, "cuda: weight handle");
    void *data = NULL, *scales = NULL;
    rc = alloc_copy(d, &data, W->data, db, err);
    if (!rc && ns) rc = alloc_copy(d, &scales, W->scales, ns * sizeof(float), err);
    if (rc) {
        backend_free(d, data);
        backend_free(d, scales);
        free(w);
        return rc;
    }
    w->w = cu_wmat_of(W, data, scales);
    w->bytes = db + ns * sizeof(float);
    *out = w;
    return 0;
}

void backend_wmat_free(struct backend_dev *d, struct backend_wmat *w)
{
    if (!w) return;
    backend_free(d, (void *)w->w.data);
    backend_free(d, (void *)w->w.scales);
    free(w);
}

size_t backend_wmat_bytes(const struct backend_wmat *w) { return w->bytes; }

int backend_matmul(struct backend_dev *d, const struct backend_wmat *W, const float *dX, int n, float *dY,
                   struct colibri_err *err)
{
    if (n < 1) return base_err_set(err, COLIBRI_EINVAL, "cuda matmul: %d activations", n);
    int rc = cu_launch_matmul(&W->w, dX, n, dY, d->stream);
    return rc ? cuda_fail(err, rc, "matmul launch") : 0;
}

static int absorb_shape(const struct backend_wmat *kv_b, int H, int dn, int dv, int dr, struct colibri_err *err)
{
    if (H < 1 || dn < 1 || dv < 1 || dr < 0 || (long long)kv_b->w.rows != (long long)H * (dn + dv))
        return base_err_set(err, COLIBRI_EINVAL, "cuda absorb: kv_b has %d rows, %d heads x (%d + %d) given",
                            kv_b->w.rows, H, dn, dv);
    return 0;
}

int backend_absorb_q(struct backend_dev *d, const struct backend_wmat *kv_b, int H, int dn, int dv, int dr,
                     const float *dq, float *dqa, float *dqpe, struct colibri_err *err)
{
    int rc = absorb_shape(kv_b, H, dn, dv, dr, err);
    if (rc) return rc;
    if (dr && !dqpe) return base_err_set(err, COLIBRI_EINVAL, "cuda absorb: no RoPE query buffer");
    rc = cu_launch_absorb_q(&kv_b->w, H, dn, dv, dr, dq, dqa, dqpe, d->stream);
    return rc ? cuda_fail(err, rc, "absorbed query launch") : 0;
}

int backend_absorb_out(struct backend_dev *d, const struct backend_wmat *kv_b, int H, int dn, int dv,
                       const float *dlat, float *dout, struct colibri_err *err)
{
    int rc = absorb_shape(kv_b, H, dn, dv, 0, err);
    if (rc) return rc;
    rc = cu_launch_absorb_out(&kv_b->w, H, dn, dv, dlat, dout, d->stream);
    return rc ? cuda_fail(err, rc, "absorbed output launch") : 0;
}

int backend_rmsnorm(struct backend_dev *d, float *dy, const float *dx, const float *dweight, int n, int dim,
                    float eps, struct colibri_err *err)
{
    if (n < 1 || dim < 1) return base_err_set(err, COLIBRI_EINVAL, "cuda rmsnorm: %d rows of %d", n, dim);
    int rc = cu_launch_rmsnorm(dy, dx, dweight, n, dim, eps, d->stream);
    return rc ? cuda_fail(err, rc, "rmsnorm launch") : 0;
}

int backend_rope(struct backend_dev *d, float *dx, int n_vec, int dr, size_t ld, const int32_t *dpos,
                 const float *dinv_freq, float factor, struct colibri_err *err)
{
    if (n_vec < 1 || dr < 2 || dr % 2 || ld < (size_t)dr)
        return base_err_set(err, COLIBRI_EINVAL, "cuda rope: %d vectors of %d (stride %zu)", n_vec, dr, ld);
    int rc = cu_launch_rope(dx, n_vec, dr, (long long)ld, dpos, dinv_freq, factor, d->stream);
    return rc ? cuda_fail(err, rc, "rope launch") : 0;
}

int backend_swiglu(struct backend_dev *d, float *dg, const float *du, size_t n, struct colibri_err *err)
{
    if (n < 1) return base_err_set(err, COLIBRI_EINVAL, "cuda swiglu: no values");
    int rc = cu_launch_swiglu(dg, du, (long long)n, d->stream);
    return rc ? cuda_fail(err, rc, "swiglu launch") : 0;
}

int backend_axpy(struct backend_dev *d, float *dy, const float *dx, float alpha, size_t n, struct colibri_err *err)
{
    if (n < 1) return base_err_set(err, COLIBRI_EINVAL, "cuda axpy: no values");
    int rc = cu_launch_axpy(dy, dx, alpha, (long long)n, d->stream);
    return rc ? cuda_fail(err, rc, "axpy launch") : 0;
}

/* The KV layer's rows in device memory: cuda/cu_kv.c through this device's table. */
int backend_kv_upload(struct backend_dev *d, const struct kv_cache *c, int layer, int T, struct backend_kv **out,
                      struct colibri_err *err)
{
    return cuda_kv_upload(&backend_cuda_ops, d, c, layer, T, out, err);
}

void backend_kv_free(struct backend_dev *d, struct backend_kv *kv)
{
    cuda_kv_free(&backend_cuda_ops, d, kv);
}

int backend_kv_write(struct backend_dev *d, struct backend_kv *kv, const struct kv_cache *c, int layer, int t0, int n,
                     struct colibri_err *err)
{
    return cuda_kv_write(&backend_cuda_ops, d, kv, c, layer, t0, n, err);
}

/* Ranges of positions per head group: about 8 blocks per SM in all, none
 * shorter than 128 rows, so that the merge stays small next to the scan. */
static int attn_chunks(const struct backend_dev *d, int T, int H)
{
    int groups = (H + CU_ATTN_HG - 1) / CU_ATTN_HG;
    int want = (8 * d->n_sm + groups - 1) / groups, most = T / 128;
    int n = want < most ? want : most;
    if (n < 1) n = 1;
    if (n > 65535) n = 65535;
    return n;
}

int backend_attend(struct backend_dev *d, const struct backend_kv *kv, int T, int H, const float *dq_lat,
                   const float *dq_rope, float scale, float *dout, struct colibri_err *err)
{
    if (T < 1 || T > kv->T || H < 1)
        return base_err_set(err, COLIBRI_EINVAL, "cuda attention: %d rows (%d uploaded), %d heads", T, kv->T, H);
    if (kv->L.pe.dim && !dq_rope) return base_err_set(err, COLIBRI_EINVAL, "cuda attention: no RoPE query");
    const int r = kv->L.lat.dim, dr = kv->L.pe.dim;
    if (cu_attn_smem_bytes(r, dr) > (size_t)d->max_smem)
        return base_err_set(err, COLIBRI_EUNSUPPORTED, "cuda attention: widths %d + %d need %zu bytes of shared "
                            "memory per block, the device has %d", r, dr, cu_attn_smem_bytes(r, dr), d->max_smem);
    const int nc = attn_chunks(d, T, H);
    size_t need = cu_attn_ws_bytes(H, r, dr, nc);
    if (need > d->ws_bytes) {
        backend_free(d, d->ws);
        d->ws_bytes = 0;
        int rc = (int)cudaMalloc(&d->ws, need);
        if (rc) {
            d->ws = NULL;
            return cuda_fail(err, rc, "attention workspace");
        }
        d->ws_bytes = need;
    }
    int rc = cu_launch_attend(&kv->L, T, H, dq_lat, dq_rope, scale, dout, d->ws, nc, d->max_smem, d->stream);
    return rc ? cuda_fail(err, rc, "attention launch") : 0;
}

const struct backend_ops backend_cuda_ops = {
    .name = "cuda",
    .open = backend_open,
    .close = backend_close,
    .dev_name = backend_name,
    .alloc = backend_alloc,
    .free = backend_free,
    .upload = backend_upload,
    .download = backend_download,
    .wmat_upload = backend_wmat_upload,
    .wmat_free = backend_wmat_free,
    .matmul = backend_matmul,
    .absorb_q = backend_absorb_q,
    .absorb_out = backend_absorb_out,
    .rmsnorm = backend_rmsnorm,
    .rope = backend_rope,
    .swiglu = backend_swiglu,
    .axpy = backend_axpy,
    .kv_upload = backend_kv_upload,
    .kv_free = backend_kv_free,
    .kv_write = backend_kv_write,
    .attend = backend_attend,
};
