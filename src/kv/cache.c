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
    if (n_layers <= 0)
        return base_err_set(err, COLIBRI_EINVAL, "kv cache: bad shape n_layers=%d r=%d dr=%d capacity=%d", n_layers, r,
                            dr, capacity);
    struct kv_layer_spec *spec = calloc((size_t)n_layers, sizeof *spec);
    if (!spec) return base_err_set(err, COLIBRI_ENOMEM, "kv cache: layer table");
    for (int l = 0; l < n_layers; l++) {
        spec[l].tier = tier;
        spec[l].rope = rope;
        spec[l].n_extra = n_extra;
        for (int i = 0; i < n_extra; i++) spec[l].extra[i] = extra[i];
    }
    int rc = kv_cache_new_layers(spec, n_layers, r, dr, capacity, out, err);
    free(spec);
    return rc;
}

/* Builds layer l's codecs and part list from its spec; sizes only, no rows. */
static int layer_init(struct kv_layer *L, const struct kv_layer_spec *sp, int l, int r, int dr,
                      struct colibri_err *err)
{
    enum kv_rope_prec rope = sp->rope == KV_ROPE_DEFAULT ? kv_rope_default(sp->tier) : sp->rope;
    if ((unsigned)sp->tier >= KV_TIER_COUNT)
        return base_err_set(err, COLIBRI_EINVAL, "kv cache layer %d: unknown tier %d", l, (int)sp->tier);
    if ((unsigned)rope >= KV_ROPE_COUNT)
        return base_err_set(err, COLIBRI_EINVAL, "kv cache layer %d: unknown rope precision %d", l, (int)rope);
    if (sp->n_extra < 0 || sp->n_extra > KV_PARTS_MAX - 2)
        return base_err_set(err, COLIBRI_EINVAL, "kv cache layer %d: %d extra row parts (at most %d)", l, sp->n_extra,
                            KV_PARTS_MAX - 2);
    L->tier = sp->tier;
    L->rope = rope;
    int rc = kv_codec_init(&L->lat, sp->tier, r, KV_SEED_LATENT, err);
    if (rc) return base_err_prefix(err, rc, "kv cache layer %d latent (kv_lora_rank %d)", l, r);
    if (dr > 0 && (rc = kv_codec_init(&L->pe, kv_rope_tier(rope), dr, KV_SEED_ROPE, err)))
        return base_err_prefix(err, rc, "kv cache layer %d rope part %s (qk_rope_head_dim %d)", l, kv_rope_name(rope), dr);
    L->lat_bytes = L->lat.row_bytes;
    L->rope_bytes = dr > 0 ? L->pe.row_bytes : 0;
    L->parts[0] = (struct kv_part){ KV_PART_LATENT, r, &L->lat, 0, L->lat_bytes };
    L->parts[1] = (struct kv_part){ KV_PART_ROPE, dr, &L->pe, L->lat_bytes, L->rope_bytes };
    L->n_parts = 2;
    L->row_bytes = L->lat_bytes + L->rope_bytes;
    for (int i = 0; i < sp->n_extra; i++) {
        const struct kv_part_spec *x = &sp->extra[i];
        int dup = 0;
        for (int k = 0; k < L->n_parts; k++) dup |= L->parts[k].kind == x->kind;
        if (x->kind != KV_PART_INDEX_KEY || x->dim <= 0 || dup)
            return base_err_set(err, COLIBRI_EINVAL,
                                "kv cache layer %d: extra part %d (kind %d, %d values) is not a new index key", l, i,
                                (int)x->kind, x->dim);
        if ((rc = kv_codec_init(&L->extra[i], x->tier, x->dim, KV_SEED_ROPE + 1 + (uint64_t)i, err)))
            return base_err_prefix(err, rc, "kv cache layer %d index-key part (%d values)", l, x->dim);
        L->parts[L->n_parts++] = (struct kv_part){ x->kind, x->dim, &L->extra[i], L->row_bytes, L->extra[i].row_bytes };
        L->row_bytes += L->extra[i].row_bytes;
    }
    return 0;
}

int kv_layer_same_layout(const struct kv_layer *a, const struct kv_layer *b)
{
    if (a->n_parts != b->n_parts || a->row_bytes != b->row_bytes) return 0;
    for (int i = 0; i < a->n_parts; i++) {
        const struct kv_part *p = &a->parts[i], *q = &b->parts[i];
        if (p->kind != q->kind || p->dim != q->dim || p->offset != q->offset || p->bytes != q->bytes) return 0;
        if (p->bytes && (p->codec->tier != q->codec->tier || p->codec->rot.seed != q->codec->rot.seed)) return 0;
    }
    return 1;
}

int kv_cache_new_layers(const struct kv_layer_spec *spec, int n_layers, int r, int dr, int capacity,
                        struct kv_cache **out, struct colibri_err *err)
{
    if (!spec || n_layers <= 0 || r <= 0 || dr < 0 || capacity <= 0)
        return base_err_set(err, COLIBRI_EINVAL, "kv cache: bad shape n_layers=%d r=%d dr=%d capacity=%d", n_layers, r,
                            dr, capacity);
    struct kv_cache *c = calloc(1, sizeof *c);
    if (!c || !(c->layer = calloc((size_t)n_layers, sizeof *c->layer))) {
        free(c);
        return base_err_set(err, COLIBRI_ENOMEM, "kv cache struct");
    }
    c->n_layers = n_layers;
    c->r = r;
    c->dr = dr;
    c->capacity = capacity;
    c->uniform = 1;
    for (int l = 0; l < n_layers; l++) {
        int rc = layer_init(&c->layer[l], &spec[l], l, r, dr, err);
        if (rc) {
            kv_cache_free(c);
            return rc;
        }
        c->token_bytes += c->layer[l].row_bytes;
        c->uniform &= kv_layer_same_layout(&c->layer[l], &c->layer[0]);
    }
    size_t total = (size_t)capacity * c->token_bytes;
    c->data = calloc(1, total);
    if (!c->data) {
        size_t tok = c->token_bytes;
        kv_cache_free(c);
        return base_err_set(err, COLIBRI_ENOMEM, "kv cache: %zu bytes (%d layers x %d tokens, %zu B per token)", total,
                            n_layers, capacity, tok);
    }
    uint8_t *p = c->data;
    for (int l = 0; l < n_layers; l++) {
        c->layer[l].data = p;
        p += (size_t)capacity * c->layer[l].row_bytes;
    }
    *out = c;
    return 0;
}

void kv_cache_free(struct kv_cache *c)
{
    if (!c) return;
    for (int l = 0; c->layer && l < c->n_layers; l++) {
        struct kv_layer *L = &c->layer[l];
        kv_codec_free(&L->lat);
        kv_codec_free(&L->pe);
        for (int i = 0; i < KV_PARTS_MAX - 2; i++) kv_codec_free(&L->extra[i]);
    }
    free(c->layer);
    free(c->data);
    free(c);
}

int kv_cache_write(struct kv_cache *c, int layer, int pos, const float *latent,
                   const float *rope, struct colibri_err *err)
{
    if (layer < 0 || layer >= c->n_layers || pos < 0 || pos >= c->capacity)
        return base_err_set(err, COLIBRI_ERANGE, "kv cache write: layer %d pos %d outside %d x %d",
                       layer, pos, c->n_layers, c->capacity);
    const struct kv_layer *L = &c->layer[layer];
    uint8_t *row = kv_cache_row(c, layer, pos);
    kv_codec_encode(&L->lat, latent, row);
    if (c->dr > 0) kv_codec_encode(&L->pe, rope, row + L->lat_bytes);
    return 0;
}

int kv_cache_read(const struct kv_cache *c, int layer, int pos0, int n, float *latent_out,
                  float *rope_out, struct colibri_err *err)
{
    if (layer < 0 || layer >= c->n_layers || pos0 < 0 || n < 0 || pos0 > c->capacity - n)
        return base_err_set(err, COLIBRI_ERANGE, "kv cache read: layer %d rows %d..%d outside %d x %d",
                       layer, pos0, pos0 + n - 1, c->n_layers, c->capacity);
    const struct kv_layer *L = &c->layer[layer];
    for (int t = 0; t < n; t++) {
        const uint8_t *row = kv_cache_row(c, layer, pos0 + t);
        if (latent_out) kv_codec_decode(&L->lat, row, latent_out + (size_t)t * c->r);
        if (rope_out && c->dr > 0)
            kv_codec_decode(&L->pe, row + L->lat_bytes, rope_out + (size_t)t * c->dr);
    }
    return 0;
}

size_t kv_cache_row_bytes(const struct kv_cache *c, int layer) { return c->layer[layer].row_bytes; }
size_t kv_cache_token_bytes(const struct kv_cache *c) { return c->token_bytes; }

const struct kv_part *kv_cache_layer_part(const struct kv_cache *c, int layer, enum kv_part_kind kind)
{
    if (layer < 0 || layer >= c->n_layers) return NULL;
    const struct kv_layer *L = &c->layer[layer];
    for (int i = 0; i < L->n_parts; i++)
        if (L->parts[i].kind == kind) return &L->parts[i];
    return NULL;
}

const struct kv_part *kv_cache_part(const struct kv_cache *c, enum kv_part_kind kind)
{
    return c->uniform ? kv_cache_layer_part(c, 0, kind) : NULL;
}

/* The part of `kind` at row (layer, pos), checked; what = "read" or "write". */
static int part_at(const struct kv_cache *c, int layer, int pos, enum kv_part_kind kind, const char *what,
                   const struct kv_part **p, struct colibri_err *err)
{
    if (layer < 0 || layer >= c->n_layers || pos < 0 || pos >= c->capacity)
        return base_err_set(err, COLIBRI_ERANGE, "kv cache %s: layer %d pos %d outside %d x %d", what, layer, pos,
                       c->n_layers, c->capacity);
    *p = kv_cache_layer_part(c, layer, kind);
    if (!*p || !(*p)->bytes)
        return base_err_set(err, COLIBRI_EINVAL, "kv cache %s: layer %d's row has no part of kind %d", what, layer,
                            (int)kind);
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
