/* model/expert_store_stream.h - the streamed expert store and the calls of a
 * store that caches experts (model/expert_store.h's optional ops).
 *
 * Each call goes to expert_store_local(s) and answers 0 for a store without
 * the op (a resident store): callers never ask which store they hold. */
#ifndef COLIBRI_MODEL_EXPERT_STORE_STREAM_H
#define COLIBRI_MODEL_EXPERT_STORE_STREAM_H

#include <stdint.h>

#include "colibri.h"
#include "model/expert_store.h"

/* A store that reads each expert from the checkpoint's files on demand, into
 * a cache of at most `budget` bytes (slots of the largest expert's size,
 * alignment included), least recently used slot evicted first. Built from a resident store whose
 * experts are borrowed from the mapping of st (kept as stored): their
 * formats, shapes and file extents; the resident store can be freed after.
 * EINVAL when fewer than min_slots experts fit, naming the minimum;
 * EUNSUPPORTED for experts converted at load that src (may be NULL) cannot
 * rebuild. Reads run on reader threads (model/expert_io.h), many in flight,
 * O_DIRECT where the file system allows; an acquire waits only for its own
 * expert.
 *
 * Rebuilt matrices: a matrix the resident store owns because the loader
 * rebuilt it from another stored encoding (compressed-tensors int4 repacked
 * into q4g32, model/shipped.h) is streamed when src->rebuild names the stored
 * arrays it came from: the store reads those, and the reader thread that
 * finished the read rebuilds the matrix in the slot with the loader's own
 * function (so it holds the resident matrix's bytes) before the expert is
 * ready. */
struct st_set;
struct expert_stream_rebuild {
    const void *src[2];         /* the stored arrays, in st's mapping */
    size_t src_bytes[2];        /* 0: no second array */
    int arg;                    /* passed to fn */
    /* writes the matrix (the resident one's format and shape) from copies of
     * src[] into data (quant_fmt_data_bytes) and scales (quant_fmt_scale_bytes) */
    void (*fn)(const void *const src[2], int arg, int rows, int cols, void *data, void *scales);
};
struct expert_stream_sources {
    /* matrix 0 gate, 1 up, 2 down of (layer, expert): 1 with *out filled, 0
     * when it cannot be rebuilt, or a negative error */
    int (*rebuild)(void *ctx, int layer, int expert, int matrix, struct expert_stream_rebuild *out,
                   struct colibri_err *err);
    void *ctx;
};
int expert_store_stream_new(const struct st_set *st, const struct expert_store *resident, int64_t budget,
                            int min_slots, const struct expert_stream_sources *src, struct expert_store **out,
                            struct colibri_err *err);
/* Cache slots (0: the store keeps no cache). */
int expert_store_stream_slots(const struct expert_store *s);
/* Copies each expert's acquisition count (layer-major, [(n_layers -
 * first_moe_layer) * n_experts]) to out; returns that count, 0 without a
 * cache. */
int model_expert_stream_uses(struct expert_store *s, uint32_t *out);
/* The hot set: pins the most used experts by counts (same indexing; at most
 * half the slots, only counts > 0); a pinned slot is evicted only when no
 * other is evictable. Returns how many are pinned (0 without a cache). */
int model_expert_stream_pin(struct expert_store *s, const uint32_t *counts);
/* The reads (ranges) one expert takes: 1 when its tensors are one extent of
 * one file (colibri's containers); 0 for a store that does not read or an
 * expert outside the store. */
int model_expert_stream_ranges(const struct expert_store *s, int layer, int expert);
/* 1 when the store reads with O_DIRECT (its first file), else 0. */
int model_expert_stream_direct(const struct expert_store *s);

#endif
