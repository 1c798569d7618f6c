/* kv/attend.h - absorbed-MLA decode attention over one layer of a kv_cache
 * (model-spec.md sec. 3): for every head h and cached token t < T
 *
 *   logit[h][t] = (q_lat[h] . c[t] + q_rope[h] . k_pe[t]) * scale
 *   p[h][t]     = softmax over t (f32, max-subtracted)
 *   out_lat[h]  = sum_t p[h][t] c[t]
 *
 * Contract:
 *  - Each layer is read with its own row layout (kv/cache.h).
 *  - A layer with f32 latent and f32 RoPE: the result is bit-identical to kv_attend_ref() on
 *    the cached rows (same fmaf order per dot product and per token sum, same
 *    kv_expf), whatever the thread count or CPU. Work is split so that every
 *    (head, token) sum keeps its order: scores by rows, softmax by heads,
 *    accumulation by output columns.
 *  - Every other latent/RoPE combination runs the native consumer: the query is
 *    rotated once per head, each cached row is decoded once per call (a tile of
 *    rows at a time, in the code domain) and used by all heads through small
 *    GEMMs, rows are split into a fixed number of parts that threads share
 *    out, with a flash-decoding merge in part order (per part max, sum and
 *    partial output), and the output is unrotated once per head. The parts
 *    depend on T alone, so the result is the same whatever the thread count.
 *    It equals kv_attend_ref() on kv_cache_read() rows to ~1e-6 relative.
 *  - q_lat is [H][r], q_rope is [H][dr] (may be NULL when dr == 0), out_lat is
 *    [H][r]. T >= 1 rows starting at position 0 are read (kv_attend), or
 *    the rows at selected positions (kv_attend_select).
 *  - This is the one door to attention over the cache: the model's decode
 *    (every tier, f32 included) and its absorbed prefill call it.
 *  - The scratch holds the working memory and the thread count; it grows on
 *    demand, is owned by the caller and must not be shared by concurrent calls.
 *    The cache is only read: concurrent calls with different scratches are fine.
 */
#ifndef COLIBRI_KV_ATTEND_H
#define COLIBRI_KV_ATTEND_H

#include "colibri.h"
#include "kv/cache.h"

struct kv_scratch;

/* n_threads <= 0: OpenMP's default. Free with kv_scratch_free(). */
int kv_scratch_new(int n_threads, struct kv_scratch **out, struct colibri_err *err);
void kv_scratch_free(struct kv_scratch *s);
/* Bytes the scratch holds now. */
size_t kv_scratch_bytes(const struct kv_scratch *s);
/* Opt-in integer dot-product consumer (AVX-512 VNNI) for int8r, q4_0, tq*
 * and fp8. Codes are read as integers times a scale and the softmax weights
 * become 14-15-bit integers per head and tile. The rotated query is
 *  - KV_INT8_QUERY8: one int8 copy per head (fastest; ~1e-2 relative from
 *    decode-then-attend, up to ~1e-1 under a very sharp softmax),
 *  - KV_INT8_QUERY16: int8 plus an int8 copy of what it missed (twice the
 *    scoring work; ~1e-4 relative),
 * fp8 always uses an 11-bit int16 query (~1e-3). See bench/attn-results.md for
 * the speed. Ignored by the other tiers and without VNNI. Off by default. */
enum kv_int8_mode { KV_INT8_OFF = 0, KV_INT8_QUERY8 = 1, KV_INT8_QUERY16 = 2 };
void kv_scratch_set_int8(struct kv_scratch *s, int mode);
/* 1 if kv_scratch_set_int8() changes how kv_attend reads this cache. */
int kv_attend_int8_applies(const struct kv_cache *c);

int kv_attend(const struct kv_cache *c, int layer, int T, int H, const float *q_lat,
              const float *q_rope, float scale, float *out_lat, struct kv_scratch *s,
              struct colibri_err *err);

/* The same over selected rows only: pos[0..n) are cache positions (any
 * order, each < capacity), attended as if they were rows 0..n-1 (DSA passes
 * its top-k here). Same numerics as kv_attend on those rows. */
int kv_attend_select(const struct kv_cache *c, int layer, const int32_t *pos, int n, int H, const float *q_lat,
                     const float *q_rope, float scale, float *out_lat, struct kv_scratch *s,
                     struct colibri_err *err);

/* Grows the scratch once for attention with H heads over up to the cache's
 * capacity, so that decode does not allocate as T grows. */
int kv_scratch_reserve(struct kv_scratch *s, const struct kv_cache *c, int H, struct colibri_err *err);
/* The same for kv_attend_select of up to n rows of any layer of c. */
int kv_scratch_reserve_select(struct kv_scratch *s, const struct kv_cache *c, int n, struct colibri_err *err);

/* The plain reference loop on f32 rows lat[T][r], rope[T][dr], one head at a
 * time: s1 = fmaf over i of q_lat*c, s2 likewise over the RoPE part,
 * logit = (s1 + s2) * scale, m = max, p = kv_expf(logit - m), sum over t in
 * order, acc[i] = fmaf(p, c[i], acc[i]) over t in order, out = acc / sum.
 * 0, or COLIBRI_ENOMEM. Single-threaded. */
int kv_attend_ref(int T, int H, int r, int dr, const float *lat, const float *rope,
                  const float *q_lat, const float *q_rope, float scale, float *out_lat);

#endif
