/* model/v4_compress.h - DeepSeek-V4's KV compressors (DeepseekV4HCACompressor,
 * DeepseekV4CSACompressor, and the indexer's own compressor inside
 * DeepseekV4Indexer), in f32, after their two projections.
 *
 * Per token the caller gives kv = kv_proj(x) and gate = gate_proj(x), each
 * `width` values: width = head_dim for HCA (no overlap), 2 * head_dim for CSA
 * and the indexer (overlap: the first head_dim values are the series Ca that
 * feeds the NEXT block's entry, the last head_dim the series Cb of the
 * token's own block). Every `ratio` tokens close a block b (tokens
 * b*ratio .. b*ratio + ratio - 1), which emits one entry of head_dim values:
 *
 *   g[j][c] = gate[j][c] + position_bias[j % ratio][c]
 *   HCA:      slots = block b's tokens, channel c
 *   overlap:  slots = block b-1's tokens on channel c (their Ca; none for
 *             b = 0) and block b's tokens on channel head_dim + c (their Cb)
 *   e[c]   = sum over slots of softmax_slots(g)[j] * kv[j]   (per channel)
 *   entry  = RMSNorm(e) * norm_w  (eps norm_eps), then RoPE (v4_rope.h) on
 *            its last rope.dr values at position b * ratio
 *
 * A query at position p may see entries b < (p + 1) / ratio
 * (model_v4_compress_visible); later ones are masked out of its attention.
 *
 * Two forms that give the same entries: the bulk form for a prefill from
 * position 0, and the incremental form that takes one token at a time, keeps
 * the partial block (and, with overlap, the last closed block) in a state the
 * caller owns, and emits the block's entry when its last token arrives.
 * Nothing allocates; functions return 0 or COLIBRI_EINVAL naming the bad
 * value. Reentrant (the state is the caller's). */
#ifndef COLIBRI_MODEL_V4_COMPRESS_H
#define COLIBRI_MODEL_V4_COMPRESS_H

#include <stddef.h>

#include "colibri.h"
#include "model/v4_rope.h"

struct v4_compressor {
    int ratio;                  /* tokens per entry: compress rate (4 CSA, 128 HCA) */
    int head_dim;               /* entry width */
    int overlap;                /* 1: CSA / indexer layout (width 2 * head_dim); 0: HCA */
    float norm_eps;             /* kv_norm's (config rms_norm_eps) */
    const float *position_bias; /* [ratio][width] */
    const float *norm_w;        /* [head_dim] kv_norm.weight */
    struct v4_rope rope;        /* the "compress" rope; rope.dr <= head_dim */
};

/* Values per token of kv and of gate: head_dim, or 2 * head_dim with overlap. */
int model_v4_compress_width(const struct v4_compressor *c);

/* Entries a query at position pos may attend to. */
static inline int model_v4_compress_visible(int pos, int ratio) { return (pos + 1) / ratio; }

/* Bulk: tokens 0 .. n_tokens-1 (kv, gate [n_tokens][width]) -> entries
 * [n_tokens / ratio][head_dim]; a trailing partial block emits nothing. */
int model_v4_compress_bulk(const struct v4_compressor *c, int n_tokens, const float *kv, const float *gate,
                           float *entries, struct colibri_err *err);

/* The incremental state: tokens of the open block and, with overlap, the
 * previous block's (both raw kv / gate), and the entries emitted so far. */
struct v4_compress_state {
    int n_buf;        /* tokens in the open block, 0 .. ratio-1 */
    int n_entries;    /* entries emitted: the open block is block n_entries */
    float *kv, *gate; /* [2][ratio][width] with overlap, else [ratio][width]: caller's memory */
};

/* Floats the state's buffers need (kv and gate together). */
size_t model_v4_compress_state_floats(const struct v4_compressor *c);

/* An empty state at position 0 over mem (model_v4_compress_state_floats(c) floats). */
void model_v4_compress_state_init(const struct v4_compressor *c, struct v4_compress_state *s, float *mem);

/* Appends the next token's kv and gate [width]. When it closes a block,
 * writes the block's entry to entry [head_dim] and sets *emitted = 1; else
 * *emitted = 0 and entry is untouched. */
int model_v4_compress_push(const struct v4_compressor *c, struct v4_compress_state *s, const float *kv,
                           const float *gate, float *entry, int *emitted, struct colibri_err *err);

#endif
