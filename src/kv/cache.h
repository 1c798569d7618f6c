/* kv/cache.h - the MLA latent KV cache: for every layer and token position one
 * row = a list of parts, each a fixed number of values under its own codec:
 * [latent (r values, the layer's tier)][RoPE part (dr values, the layer's
 * RoPE precision)][further parts, e.g. a DSA index key]. The latent and RoPE
 * parts are always parts 0 and 1 (dr may be 0); what attention reads is
 * described by the part list, so a third part changes no reader of the first
 * two.
 *
 * Layouts are per layer: each layer has its own latent tier, RoPE precision
 * and extra parts (struct kv_layer), so a model can keep the layers that
 * matter wider (`--kv int8r@1:rope=f32`, kv/layout.h) or give an index key to
 * some layers only. A cache whose layers all share one layout is "uniform";
 * kv_cache_new and kv_cache_new_parts build those, with exactly the bytes
 * and addresses a single-layout cache has always had.
 *
 * Contract:
 *  - The cache stores rows by (layer, position) and nothing else: which
 *    positions are valid (length, truncation) is the session's business.
 *    Rows never written read back as zeros.
 *  - Rows are fixed-size per layer and self-contained (scales and norms
 *    inside), laid out layer-major: layer l's block of capacity rows starts
 *    after the blocks of layers 0..l-1, row (l, p) is at layer[l].data + p *
 *    layer[l].row_bytes (for a uniform cache: data + (l * capacity + p) *
 *    row_bytes). The rotation seeds are fixed constants recorded in the
 *    codecs, so a saved row is readable by any process that builds a cache
 *    with the same layer layouts and widths (kv/persist writes these rows as
 *    they are).
 *  - kv_cache_write is not thread-safe against other writes/reads of the same
 *    row; reads (kv_cache_read, kv_attend) of a cache may run concurrently.
 *
 * Tier and RoPE default: the RoPE part of a quantized tier defaults to int8
 * (rotated, one f32 scale per row): at dr = 64 it costs the same 68 B as fp8
 * and measures relMSE 3.5e-5 against 6.3e-4 for fp8 and 2.8e-6 for bf16 (128
 * B) on Gaussian rows (test_kv prints and checks this). One byte per value is
 * also what keeps fp8 <= 0.26x and tq4 <= 0.15x the f32 row; bf16 RoPE would
 * be a third of a 4-bit row. The f32 and bf16 tiers keep RoPE at their own
 * precision. What int8 RoPE costs on a real model, and which layers carry
 * it, is measured by `colibri eval` (bench/kv-floor.md).
 */
#ifndef COLIBRI_KV_CACHE_H
#define COLIBRI_KV_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "colibri.h"
#include "kv/codec.h"

#define KV_SEED_LATENT 0x636f6c6962726931ull   /* "colibri1" */
#define KV_SEED_ROPE   0x636f6c6962726932ull   /* "colibri2" */

/* What a row part holds. Latent and RoPE parts are what MLA attention reads;
 * an index key is what a DSA indexer scores (kept beside the row so that it
 * is saved, truncated and restored with it). */
enum kv_part_kind { KV_PART_LATENT = 0, KV_PART_ROPE = 1, KV_PART_INDEX_KEY = 2 };
#define KV_PARTS_MAX 4

struct kv_part {
    enum kv_part_kind kind;
    int dim;                      /* values */
    const struct kv_codec *codec; /* owned by the cache */
    size_t offset, bytes;         /* place in the row */
};

/* A part to add after latent and RoPE (kv_cache_new_parts). */
struct kv_part_spec {
    enum kv_part_kind kind;
    int dim;
    enum kv_tier tier;
};

/* What one layer's row holds (kv_cache_new_layers). */
struct kv_layer_spec {
    enum kv_tier tier;            /* latent */
    enum kv_rope_prec rope;       /* KV_ROPE_DEFAULT: kv_rope_default(tier) */
    int n_extra;                  /* parts after latent and RoPE, <= KV_PARTS_MAX - 2 */
    struct kv_part_spec extra[KV_PARTS_MAX - 2];
};

/* One layer's row layout and rows. */
struct kv_layer {
    enum kv_tier tier;            /* latent tier */
    enum kv_rope_prec rope;       /* resolved, never KV_ROPE_DEFAULT */
    struct kv_codec lat;          /* latent codec (width r) */
    struct kv_codec pe;           /* RoPE codec (width dr) */
    size_t lat_bytes, rope_bytes; /* encoded sizes of the two parts */
    size_t row_bytes;             /* sum of the parts' bytes */
    int n_parts;                  /* >= 2 */
    struct kv_part parts[KV_PARTS_MAX];
    struct kv_codec extra[KV_PARTS_MAX - 2]; /* codecs of parts 2.. */
    uint8_t *data;                /* capacity rows, inside the cache's block */
};

struct kv_cache {
    int n_layers, r, dr, capacity;
    int uniform;                  /* every layer has layer[0]'s layout */
    struct kv_layer *layer;       /* [n_layers]; owned */
    size_t token_bytes;           /* sum of the layers' row bytes */
    uint8_t *data;                /* every layer's block; owned */
};

/* Allocates a zeroed uniform cache (pages are committed as rows are
 * written). rope = KV_ROPE_DEFAULT picks kv_rope_default(tier). 0 or a
 * negative COLIBRI_E* code (EUNSUPPORTED with a message naming the width for
 * a width the tier cannot take, ENOMEM naming the byte count). Free with
 * kv_cache_free(). */
int kv_cache_new(enum kv_tier tier, enum kv_rope_prec rope, int n_layers, int r, int dr,
                 int capacity, struct kv_cache **out, struct colibri_err *err);
/* The same with further parts after latent and RoPE in every layer (n_extra
 * <= 2). */
int kv_cache_new_parts(enum kv_tier tier, enum kv_rope_prec rope, int n_layers, int r, int dr,
                       const struct kv_part_spec *extra, int n_extra, int capacity, struct kv_cache **out,
                       struct colibri_err *err);
/* A cache with layer l laid out as spec[l] (n_layers entries). Errors name
 * the layer. */
int kv_cache_new_layers(const struct kv_layer_spec *spec, int n_layers, int r, int dr, int capacity,
                        struct kv_cache **out, struct colibri_err *err);
void kv_cache_free(struct kv_cache *c);

/* The part of a kind in a layer, or NULL. */
const struct kv_part *kv_cache_layer_part(const struct kv_cache *c, int layer, enum kv_part_kind kind);
/* The part of a kind when every layer has it in the same place and codec
 * (a uniform cache), else NULL: per-layer readers use kv_cache_layer_part. */
const struct kv_part *kv_cache_part(const struct kv_cache *c, enum kv_part_kind kind);
/* Encodes values[part dim] into part `kind` of row (layer, pos) / decodes it. */
int kv_cache_write_part(struct kv_cache *c, int layer, int pos, enum kv_part_kind kind, const float *values,
                        struct colibri_err *err);
int kv_cache_read_part(const struct kv_cache *c, int layer, int pos, enum kv_part_kind kind, float *values,
                       struct colibri_err *err);

/* Encodes latent[r] and rope[dr] into row (layer, pos). */
int kv_cache_write(struct kv_cache *c, int layer, int pos, const float *latent,
                   const float *rope, struct colibri_err *err);

/* Decodes rows pos0 .. pos0+n-1 of a layer to f32: latent_out[n][r],
 * rope_out[n][dr] (either may be NULL). This is the reconstruction attention
 * sees (kv_codec_decode). */
int kv_cache_read(const struct kv_cache *c, int layer, int pos0, int n, float *latent_out,
                  float *rope_out, struct colibri_err *err);

/* Bytes of one row of a layer (one token), and of one token over all layers. */
size_t kv_cache_row_bytes(const struct kv_cache *c, int layer);
size_t kv_cache_token_bytes(const struct kv_cache *c);

/* 1 if two layers have the same parts, codecs and sizes. */
int kv_layer_same_layout(const struct kv_layer *a, const struct kv_layer *b);

/* Address of row (layer, pos), no bounds check (for kv/attend and persistence). */
static inline uint8_t *kv_cache_row(const struct kv_cache *c, int layer, int pos)
{
    return c->layer[layer].data + (size_t)pos * c->layer[layer].row_bytes;
}

#endif
