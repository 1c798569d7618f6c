#include "kv/cache.h"

#include <stdlib.h>
#include <string.h>

#include "base/err.h"

int kv_cache_new(enum kv_tier tier, enum kv_rope_prec rope, int n_layers, int r, int dr,
                 int capacity, struct kv_cache **out, struct colibri_err *err)
{
    return kv_cache_new_parts(tier, rope, n_layers, r, dr, NULL, 0, capacity, out, err);
}

int kv_cache_new_parts(enum kv_tier tier, enum kv_rope_prec rope, int n_layers, int r, int dr,
                       const struct kv_part_spec *extra, int n_extra, int capacity, struct kv_cache **out,
                       struct colibri_err *err)
{
    if (n_extra < 0 || n_extra > KV_PARTS_MAX - 2 || (n_extra && !extra))
        return base_err_set(err, COLIBRI_EINVAL, "kv cache: %d extra row parts (at most %d)", n_extra, KV_PARTS_MAX - 2);
    if ((unsigned)tier >= KV_TIER_COUNT)
        return base_err_set(err, COLIBRI_EINVAL, "kv cache: unknown tier %d", (int)tier);
    if (rope == KV_ROPE_DEFAULT) rope = kv_rope_default(tier);
    if ((unsigned)rope >= KV_ROPE_COUNT)
        return base_err_set(err, COLIBRI_EINVAL, "kv cache: unknown rope precision %d", (int)rope);
    if (n_layers <= 0 || r <= 0 || dr < 0 || capacity <= 0)
        return base_err_set(err, COLIBRI_EINVAL,
                       "kv cache: bad shape n_layers=%d r=%d dr=%d capacity=%d",
                       n_layers, r, dr, capacity);
    struct kv_cache *c = calloc(1, sizeof *c);
    if (!c) return base_err_set(err, COLIBRI_ENOMEM, "kv cache struct");
    c->tier = tier;
    c->rope = rope;
    c->n_layers = n_layers;
    c->r = r;
    c->dr = dr;
    c->capacity = capacity;
    int rc = kv_codec_init(&c->lat, tier, r, KV_SEED_LATENT, err);
    if (rc) {
        base_err_prefix(err, rc, "kv cache latent (kv_lora_rank %d)", r);
        kv_cache_free(c);
        return rc;
    }
    if (dr > 0) {
        rc = kv_codec_init(&c->pe, kv_rope_tier(rope), dr, KV_SEED_ROPE, err);
        if (rc) {
            base_err_prefix(err, rc, "kv cache rope part %s (qk_rope_head_dim %d)",
                       kv_rope_name(rope), dr);
            kv_cache_free(c);
            return rc;
        }
    }
    c->lat_bytes = c->lat.row_bytes;
    c->rope_bytes = dr > 0 ? c->pe.row_bytes : 0;
    c->parts[0] = (struct kv_part){ KV_PART_LATENT, r, &c->lat, 0, c->lat_bytes };
    c->parts[1] = (struct kv_part){ KV_PART_ROPE, dr, &c->pe, c->lat_bytes, c->rope_bytes };
    c->n_parts = 2;
    c->row_bytes = c->lat_bytes + c->rope_bytes;
    for (int i = 0; i < n_extra; i++) {
        if (extra[i].kind != KV_PART_INDEX_KEY || extra[i].dim <= 0 || kv_cache_part(c, extra[i].kind)) {
            kv_cache_free(c);
            return base_err_set(err, COLIBRI_EINVAL, "kv cache: extra part %d (kind %d, %d values) is not a new index key",
                           i, (int)extra[i].kind, extra[i].dim);
        }
        if ((rc = kv_codec_init(&c->extra[i], extra[i].tier, extra[i].dim, KV_SEED_ROPE + 1 + (uint64_t)i, err))) {
            base_err_prefix(err, rc, "kv cache index-key part (%d values)", extra[i].dim);
            kv_cache_free(c);
            return rc;
        }
        c->parts[c->n_parts++] = (struct kv_part){ extra[i].kind, extra[i].dim, &c->extra[i], c->row_bytes,
                                                   c->extra[i].row_bytes };
        c->row_bytes += c->extra[i].row_bytes;
    }
    size_t total = (size_t)n_layers * (size_t)capacity * c->row_bytes;
    c->data = calloc(1, total);
    if (!c->data) {
        size_t row = c->row_bytes;
        kv_cache_free(c);
        return base_err_set(err, COLIBRI_ENOMEM, "kv cache: %zu bytes (%d layers x %d tokens x %zu B)",
                       total, n_layers, capacity, row);
    }
    *out = c;
    return 0;
}

void kv_cache_free(struct kv_cache *c)
{
    if (!c) return;
    kv_codec_free(&c->lat);
    kv_codec_free(&c->pe);
    for (int i = 0; i < KV_PARTS_MAX - 2; i++) kv_codec_free(&c->extra[i]);
    free(c->data);
    free(c);
}

int kv_cache_write(struct kv_cache *c, int layer, int pos, const float *latent,
                   const float *rope, struct colibri_err *err)
{
    if (layer < 0 || layer >= c->n_layers || pos < 0 || pos >= c->capacity)
        return base_err_set(err, COLIBRI_ERANGE, "kv cache write: layer %d pos %d outside %d x %d",
                       layer, pos, c->n_layers, c->capacity);
    uint8_t *row = kv_cache_row(c, layer, pos);
    kv_codec_encode(&c->lat, latent, row);
    if (c->dr > 0) kv_codec_encode(&c->pe, rope, row + c->lat_bytes);
    return 0;
}

int kv_cache_read(const struct kv_cache *c, int layer, int pos0, int n, float *latent_out,
                  float *rope_out, struct colibri_err *err)
{
    if (layer < 0 || layer >= c->n_layers || pos0 < 0 || n < 0 || pos0 > c->capacity - n)
        return base_err_set(err, COLIBRI_ERANGE, "kv cache read: layer %d rows %d..%d outside %d x %d",
                       layer, pos0, pos0 + n - 1, c->n_layers, c->capacity);
    for (int t = 0; t < n; t++) {
        const uint8_t *row = kv_cache_row(c, layer, pos0 + t);
        if (latent_out) kv_codec_decode(&c->lat, row, latent_out + (size_t)t * c->r);
        if (rope_out && c->dr > 0)
            kv_codec_decode(&c->pe, row + c->lat_bytes, rope_out + (size_t)t * c->dr);
    }
    return 0;
}

size_t kv_cache_row_bytes(const struct kv_cache *c) { return c->row_bytes; }
size_t kv_cache_token_bytes(const struct kv_cache *c) { return c->row_bytes * (size_t)c->n_layers; }

const struct kv_part *kv_cache_part(const struct kv_cache *c, enum kv_part_kind kind)
{
    for (int i = 0; i < c->n_parts; i++)
        if (c->parts[i].kind == kind) return &c->parts[i];
    return NULL;
}

/* The part of `kind` at row (layer, pos), checked; what = "read" or "write". */
static int part_at(const struct kv_cache *c, int layer, int pos, enum kv_part_kind kind, const char *what,
                   const struct kv_part **p, struct colibri_err *err)
{
    *p = kv_cache_part(c, kind);
    if (!*p || !(*p)->bytes)
        return base_err_set(err, COLIBRI_EINVAL, "kv cache %s: the row has no part of kind %d", what, (int)kind);
    if (layer < 0 || layer >= c->n_layers || pos < 0 || pos >= c->capacity)
        return base_err_set(err, COLIBRI_ERANGE, "kv cache %s: layer %d pos %d outside %d x %d", what, layer, pos,
                       c->n_layers, c->capacity);
    return 0;
}

int kv_cache_write_part(struct kv_cache *c, int layer, int pos, enum kv_part_kind kind, const float *values,
                        struct colibri_err *err)
{
    const struct kv_part *p;
    int rc = part_at(c, layer, pos, kind, "write", &p, err);
    if (!rc) kv_codec_encode(p->codec, values, kv_cache_row(c, layer, pos) + p->offset);
    return rc;
}

int kv_cache_read_part(const struct kv_cache *c, int layer, int pos, enum kv_part_kind kind, float *values,
                       struct colibri_err *err)
{
    const struct kv_part *p;
    int rc = part_at(c, layer, pos, kind, "read", &p, err);
    if (!rc) kv_codec_decode(p->codec, kv_cache_row(c, layer, pos) + p->offset, values);
    return rc;
}
