/* kv/codec.h - one codec per KV cache tier, behind one interface.
 *
 * A codec turns a row of `dim` floats (an MLA latent row, or a RoPE row) into a
 * fixed number of bytes and back. Tiers are an enum with a traits table
 * (codec.c); the per-tier code lives in codec_plain.c (f32, bf16, fp8),
 * codec_int.c (int8r, q4_0), codec_tq.c (tq4/3/2) and codec_polar.c
 * (polar4/3). See docs/kvquant.md for the algorithms and anchors.
 *
 * Domains. Rotated tiers quantize y = R x (R = kv/rotate.h, orthonormal, fixed
 * seed). decode() returns x-hat = R^T y-hat; decode_rot() returns y-hat, the
 * "code domain". Because R is orthonormal, q . x-hat = (R q) . y-hat and
 * sum_t w_t x-hat_t = R^T sum_t w_t y-hat_t: the native consumer rotates the
 * query once, works on y-hat, and unrotates the accumulated output once.
 *
 * Reconstruction. decode() gives what attention consumes. For the tq tiers it
 * includes the inner-product bias correction 1/(1 - D_b) (kvquant.md sec. 6,
 * idea 1), so x-hat = gain * (MSE reconstruction) and E<q, x-hat> = <q, x>;
 * kv_codec_gain() returns that factor (1 for every other tier), so a
 * distortion test divides it out to compare with the MSE anchors.
 *
 * Row layouts (little-endian, no padding, rows need no alignment):
 *   f32    dim x f32
 *   bf16   dim x bf16 (round to nearest even; NaN kept as a quiet NaN)
 *   fp8    dim x e4m3 (quant/fp8.h) + f32 scale (amax/448; 0 for a zero row)
 *   int8r  dim x int8 of the rotated row (round half away, +-127)
 *          + f32 scale (amax/127)
 *   q4_0   rotation in blocks of min(dim, 256); then dim/32 ggml blocks of
 *          [fp16 d][16 B nibbles]: d = signed absmax / -8, q = min(15,
 *          (int)(x/d + 8.5)), low nibble = element j, high = element j + 16
 *   tqB    dim x B-bit Lloyd-Max N(0,1) indices (LSB-first bit stream)
 *          + f32 norm |x|; y-hat_i = gain * norm / sqrt(dim) * level[idx], the
 *          levels snapped to an int8 grid (level_max / 127 steps)
 *   polarB PolarQuant on the rotated row with full-depth recursion and one
 *          radius per row: level 1 angles (pairs of values) uniform on [0, 2pi),
 *          levels >= 2 (pairs of radii) from 1-D k-means on the exact density
 *          ~ sin^(2^(l-1)-1)(2 psi) computed at init; bits per level
 *          polar4 = [5,4,3,3,...] (4.28 bpe at dim 512), polar3 = [4,2,2,...]
 *          (3.03 bpe); angle indices as one LSB-first bit stream, level 1
 *          first, + f32 radius.
 *
 * Ownership: kv_codec_init() allocates (rotation signs, tables); release with
 * kv_codec_free(). A codec is read-only after init and may be used from any
 * number of threads at once.
 */
#ifndef COLIBRI_KV_CODEC_H
#define COLIBRI_KV_CODEC_H

#include <stddef.h>
#include <stdint.h>

#include "colibri.h"
#include "kv/rotate.h"
#include "kv/tier_id.h"

/* Precision of the RoPE part of a cache row (--kv-rope). int8 is the int8r
 * codec on the dr values (its own rotation). */
enum kv_rope_prec {
    KV_ROPE_DEFAULT = -1,   /* the tier's default, see kv_rope_default() */
    KV_ROPE_F32  = 0,
    KV_ROPE_BF16 = 1,
    KV_ROPE_FP8  = 2,
    KV_ROPE_INT8 = 3,
    KV_ROPE_COUNT
};

/* Widest row a codec accepts (stack buffers are sized by it). */
#define KV_DIM_MAX 4096

struct kv_polar_tab;       /* codec_polar.c */
struct kv_codec_traits;    /* codec.c */

struct kv_codec {
    enum kv_tier tier;
    int dim;
    size_t row_bytes;
    float gain;                 /* decode() = gain x MSE reconstruction */
    struct kv_rot rot;          /* rot.n == 0 for unrotated tiers */
    int bits;                   /* tq: bits per index */
    float level[16];            /* tq: Lloyd-Max levels for N(0,1), ascending,
                                   snapped to level_q[k] * level_unit */
    int8_t level_q[16];         /* tq: the levels in int8 units (max 127) */
    float level_unit;
    float thresh[15];           /* tq: decision thresholds between levels */
    struct kv_polar_tab *polar; /* polar: per-level codebooks; owned */
    const struct kv_codec_traits *t;
};

/* Name <-> enum ("f32", "bf16", "fp8", "int8r", "q4_0", "tq4", "tq3", "tq2",
 * "polar4", "polar3"). kv_tier_from_name returns -1 for an unknown name. */
const char *kv_tier_name(enum kv_tier t);
int kv_tier_from_name(const char *name);
/* "f32", "bf16", "fp8", "int8"; -1 for unknown. */
const char *kv_rope_name(enum kv_rope_prec p);
int kv_rope_from_name(const char *name);
/* Every tier's (RoPE precision's) name in enum order joined by sep, written
 * to buf[n] as snprintf would; returns the length of the whole list (a result
 * >= n means buf was too small). */
size_t kv_tier_names(char *buf, size_t n, const char *sep);
size_t kv_rope_names(char *buf, size_t n, const char *sep);
/* The tier a RoPE precision is encoded with (f32, bf16, fp8, int8r). */
enum kv_tier kv_rope_tier(enum kv_rope_prec p);
/* Default RoPE precision for a latent tier: f32 for f32, bf16 for bf16, int8
 * for every quantized tier (rotated int8 is 12x more accurate than fp8 at the
 * same 1 B/value; see kv/README in cache.h). */
enum kv_rope_prec kv_rope_default(enum kv_tier t);

/* Bytes of one encoded row of `dim` values, or 0 if the tier cannot take that
 * width (see kv_codec_init for the message). */
size_t kv_tier_row_bytes(enum kv_tier t, int dim);

/* Builds a codec for rows of `dim` values. `seed` fixes the rotation signs
 * (ignored by unrotated tiers). 0 or a negative COLIBRI_E* code with a message
 * naming the tier and width; *c is zeroed on failure. */
int kv_codec_init(struct kv_codec *c, enum kv_tier t, int dim, uint64_t seed,
                  struct colibri_err *err);
void kv_codec_free(struct kv_codec *c);

/* 1 if the tier stores a rotated row (decode_rot differs from decode). */
int kv_codec_rotated(const struct kv_codec *c);
float kv_codec_gain(const struct kv_codec *c);
/* Tiers whose code is an int8 times a scale (int8r, q4_0, tq*): the columns
 * sharing one scale (dim for one per row, 32 for q4_0); 0 for the others. */
int kv_codec_q8_group(const struct kv_codec *c);

/* Reference semantics: x[dim] -> out[row_bytes] and back. */
void kv_codec_encode(const struct kv_codec *c, const float *x, uint8_t *out);
void kv_codec_decode(const struct kv_codec *c, const uint8_t *in, float *x);
/* Code-domain reconstruction y-hat (= decode for unrotated tiers). */
void kv_codec_decode_rot(const struct kv_codec *c, const uint8_t *in, float *y);
/* n rows at in + t*stride -> out + t*ldo (code domain), using the fastest
 * decoder this CPU has; equal to kv_codec_decode_rot row by row (bit-exact). */
void kv_codec_decode_rows(const struct kv_codec *c, const uint8_t *in, size_t stride,
                          int n, float *out, size_t ldo);

/* ---- native consumer: rows are read in the code domain, never unrotated ----
 * Heads are padded to ldq, a multiple of 16; padded heads must be zero in q.
 *
 * prepare_query: qT[i * ldq + h] = (R q_h)[i] for h < H (q is [H][dim]),
 *   0 for H <= h < ldq.
 * score: s[t * ldq + h] = sum_i qT[i * ldq + h] * y-hat_t[i] for n rows at
 *   rows + t*stride (each row decoded once for all heads). tile must hold
 *   n * dim floats.
 * accumulate: acc[h * dim + i] += sum_t w[t * ldq + h] * y-hat_t[i] for h < H.
 * finish: acc[h] <- R^T acc[h] for h < H (the one unrotation per step). */
void kv_codec_prepare_query(const struct kv_codec *c, int H, const float *q,
                            float *qT, int ldq);
void kv_codec_score(const struct kv_codec *c, const float *qT, int ldq,
                    const uint8_t *rows, size_t stride, int n, float *s, float *tile);
void kv_codec_accumulate(const struct kv_codec *c, const float *w, int ldq, int H,
                         const uint8_t *rows, size_t stride, int n, float *acc,
                         float *tile);
void kv_codec_finish(const struct kv_codec *c, int H, float *acc);

#endif
