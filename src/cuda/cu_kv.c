/* cuda/cu_kv.c - see cu_kv.h. */
#include <stdint.h>
#include <stdlib.h>

#include "base/err.h"
#include "cuda/cu_kv.h"

/* The codec's rotation signs copied to the device (NULL when unrotated). */
static int copy_signs(const struct backend_ops *ops, struct backend_dev *d, const struct kv_codec *c, float **out,
                      struct colibri_err *err)
{
    *out = NULL;
    if (!c->rot.n) return 0;
    size_t bytes = (size_t)c->dim * sizeof(float);
    if (!(*out = ops->alloc(d, bytes, err))) return COLIBRI_ENOMEM;
    return ops->upload(d, *out, c->rot.sign, bytes, err);
}

int cuda_kv_upload(const struct backend_ops *ops, struct backend_dev *d, const struct kv_cache *c, int layer, int T,
                   struct backend_kv **out, struct colibri_err *err)
{
    if (layer < 0 || layer >= c->n_layers || T < 1 || T > c->capacity)
        return base_err_set(err, COLIBRI_EINVAL, "%s kv upload: layer %d of %d, %d rows of %d", ops->name, layer,
                            c->n_layers, T, c->capacity);
    const struct kv_layer *lay = &c->layer[layer];
    const struct kv_part *pl = kv_cache_layer_part(c, layer, KV_PART_LATENT);
    const struct kv_part *pr = kv_cache_layer_part(c, layer, KV_PART_ROPE);
    struct backend_kv *kv = calloc(1, sizeof *kv);
    if (!kv) return base_err_set(err, COLIBRI_ENOMEM, "%s: kv handle", ops->name);
    size_t bytes = (size_t)T * lay->row_bytes;
    int rc = cu_kv_part_of(&lay->lat, pl->offset, NULL, &kv->L.lat, err);
    if (!rc && c->dr) rc = cu_kv_part_of(&lay->pe, pr->offset, NULL, &kv->L.pe, err);
    if (!rc) rc = copy_signs(ops, d, &lay->lat, &kv->sign_lat, err);
    if (!rc && c->dr) rc = copy_signs(ops, d, &lay->pe, &kv->sign_pe, err);
    if (!rc && !(kv->rows = ops->alloc(d, bytes, err))) rc = COLIBRI_ENOMEM;
    if (!rc) rc = ops->upload(d, kv->rows, lay->data, bytes, err);
    if (rc) {
        cuda_kv_free(ops, d, kv);
        return rc;
    }
    kv->L.lat.sign = kv->sign_lat;
    kv->L.pe.sign = kv->sign_pe;
    kv->L.row_bytes = (long long)lay->row_bytes;
    kv->L.rows = kv->rows;
    kv->T = T;
    *out = kv;
    return 0;
}

void cuda_kv_free(const struct backend_ops *ops, struct backend_dev *d, struct backend_kv *kv)
{
    if (!kv) return;
    if (kv->rows) ops->free(d, kv->rows);
    if (kv->sign_lat) ops->free(d, kv->sign_lat);
    if (kv->sign_pe) ops->free(d, kv->sign_pe);
    free(kv);
}

int cuda_kv_write(const struct backend_ops *ops, struct backend_dev *d, struct backend_kv *kv,
                  const struct kv_cache *c, int layer, int t0, int n, struct colibri_err *err)
{
    if (layer < 0 || layer >= c->n_layers || t0 < 0 || n < 1 || t0 + n > kv->T ||
        (long long)c->layer[layer].row_bytes != kv->L.row_bytes)
        return base_err_set(err, COLIBRI_EINVAL, "%s kv write: rows %d..%d of layer %d (%d uploaded)", ops->name, t0,
                            t0 + n - 1, layer, kv->T);
    return ops->upload(d, (uint8_t *)kv->rows + (size_t)t0 * kv->L.row_bytes, kv_cache_row(c, layer, t0),
                       (size_t)n * kv->L.row_bytes, err);
}
