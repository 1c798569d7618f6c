/* cuda/cu_kv.h - a KV layer's rows on a device, written once for both
 * drivers of cuda/ through their own operations table (alloc, upload, free):
 * the handle, the checks and the copies are the same whether the memory is a
 * GPU's (cuda/backend_cuda.c) or the host's (cuda/replay_dev.c); only where
 * the bytes live differs.
 *
 * Contract: the handle holds the layer's first T rows as stored, their codec
 * descriptors (cuda/cu_desc.h) with the rotation signs copied beside them;
 * cuda_kv_write copies later rows in (the host cache stays the
 * reference). Errors name the device, the layer and the rows. */
#ifndef COLIBRI_CUDA_CU_KV_H
#define COLIBRI_CUDA_CU_KV_H

#include "cuda/cu_desc.h"
#include "model/backend.h"

struct backend_kv {
    struct cu_kv_layer L;       /* rows and signs point to the device's copies */
    int T;
    void *rows;
    float *sign_lat, *sign_pe;
};

int cuda_kv_upload(const struct backend_ops *ops, struct backend_dev *d, const struct kv_cache *c, int layer, int T,
                   struct backend_kv **out, struct colibri_err *err);
void cuda_kv_free(const struct backend_ops *ops, struct backend_dev *d, struct backend_kv *kv);
int cuda_kv_write(const struct backend_ops *ops, struct backend_dev *d, struct backend_kv *kv,
                  const struct kv_cache *c, int layer, int t0, int n, struct colibri_err *err);

#endif
