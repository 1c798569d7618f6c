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
 * EUNSUPPORTED for experts converted at load. Reads run on reader threads
 * (model/expert_io.h), many in flight, O_DIRECT where the file system allows;
 * an acquire waits only for its own expert. */
struct st_set;
int expert_store_stream_new(const struct st_set *st, const struct expert_store *resident, int64_t budget,
                            int min_slots, struct expert_store **out, struct colibri_err *err);
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
