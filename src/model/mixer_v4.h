/* model/mixer_v4.h - DeepSeek-V4's token mixer (DeepseekV4Attention with its
 * compressors and lightning indexer, transformers 5.18.0) as a layer part
 * (model/parts.h: model_mixer_v4), and the tensor names the V4 parts share.
 *
 * Per token at position pos, from the normed input x:
 *   q_res = q_norm(wq_a x); q = wq_b q_res, per-head unweighted RMSNorm, RoPE
 *   kv    = kv_norm(wkv x), RoPE               -> the window ring
 *   CSA / HCA layers: the compressor (v4_compress.h) takes wkv/wgate of x and
 *     emits an entry every `ratio` tokens; CSA layers also run the indexer's
 *     compressor and score q_idx = indexer.wq_b q_res against its keys
 *     (v4_indexer.h) to select top-k entries; HCA layers see every entry
 *   attention over window + entries with sinks (v4_attn.h), then the grouped
 *   output projection wo_a (o_groups blocks) and wo_b.
 * The sliding layers rotate with the "main" rope, CSA / HCA layers with the
 * "compress" one (config.h v4_inv_freq).
 *
 * The layer's per-session state (token_mixer.state_new) is a ring of the
 * last sliding_window kv rows, the compressed entries, the compressors'
 * open blocks and the indexer's keys, sized at session start for its n_ctx,
 * and advanced one position at a time in order, so a prefill and
 * token-by-token decode do the same arithmetic per token (a prefill chunk's
 * attentions then run together, a row per thread, each row reading only
 * what its own position saw). It cannot be
 * rewound: a position other than the next is refused by name. The ring and
 * the entries are plain arrays of rows [rows][row_bytes], each row the
 * head_dim values (RoPE part included) encoded whole by the layer's KV tier
 * (kv/codec.h; f32 by default, whose rows are the floats); the indexer's
 * keys [rows][row_bytes] likewise in the index tier (f32 or fp8, --kv-index,
 * as DSA's). Attention reads f32 rows in place and decodes the others to
 * f32 first (the decoded rows then take f32's arithmetic).
 * It goes back to a snapshot (parts.h snap_*): the window's rows, the open
 * blocks and the counts; the entries and keys are append-only, kept in place
 * below them.
 *
 * Tensor names: the official spelling ("layers.N.attn.wq_a.weight", ...);
 * each is also found under "model." (transformers' save_pretrained), and
 * the attention's kv norm as attn.kv_norm or attn.norm. */
#ifndef COLIBRI_MODEL_MIXER_V4_H
#define COLIBRI_MODEL_MIXER_V4_H

#include <stddef.h>
#include <stdint.h>

#include "colibri.h"
#include "kv/cache.h"
#include "model/config.h"
#include "quant/qtensor.h"

struct model_loader;

struct v4_compressor_weights {
    struct qtensor wkv, wgate;  /* [width][hidden], width = dim (HCA) or 2 * dim (overlap) */
    float *ape;                 /* position bias [ratio][width] */
    float *norm;                /* [dim] */
};

struct v4_attn_weights {
    struct qtensor wq_a, wq_b, wkv, wo_b;
    struct qtensor *wo_a;       /* [o_groups] blocks of [o_lora_rank][heads * head_dim / o_groups] */
    float *q_norm, *kv_norm, *sinks;
    struct v4_compressor_weights comp;  /* CSA / HCA layers */
    struct v4_compressor_weights icomp; /* the indexer's (CSA layers) */
    struct qtensor idx_wq_b, idx_wproj; /* [index heads * index_head_dim][q_lora_rank], [index heads][hidden] */
};

void model_v4_attn_weights_free(struct v4_attn_weights *w, int o_groups);

/* Bytes of layer li's V4 mixer matrices (all read for every token: the
 * compressors and the indexer run on each one); *small grows by its f32
 * vectors (norms, sinks, position biases). */
int64_t model_v4_attn_bytes(const struct v4_attn_weights *w, const struct model_config *c, int li, int64_t *small);

/* The checkpoint's spelling of an official name (printf-style): the name
 * itself when present, else "model." + name when that is, else the name. */
void model_v4_name(const struct model_loader *L, char *out, size_t n, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* The V4 mixer's activations for up to cap rows (*out NULL for a config
 * without V4 layers); *bytes grows by what it allocates. 0 or COLIBRI_ENOMEM. */
struct v4_bufs;
int  model_v4_bufs_new(const struct model_config *c, int cap, struct v4_bufs **out, size_t *bytes);
/* Sizes b (NULL: nothing) for a session of n_ctx positions whose layers are
 * laid out as spec[num_hidden_layers]: the attention's per-thread work for
 * n_threads, and a tile to decode the attended rows into when a layer's
 * tier is not f32. 0, or COLIBRI_ENOMEM naming the size. */
int  model_v4_bufs_reserve(struct v4_bufs *b, const struct model_config *c, const struct kv_layer_spec *spec, int n_ctx,
                           int n_threads, size_t *bytes, struct colibri_err *err);
void model_v4_bufs_free(struct v4_bufs *b);

#endif
