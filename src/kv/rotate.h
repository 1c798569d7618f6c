/* kv/rotate.h - the randomized Hadamard rotation used by the rotated KV tiers.
 *
 * Contract:
 *  - A struct kv_rot rotates vectors of n floats in independent blocks of `blk`
 *    floats (blk = n for a full-width rotation; q4_0 uses blk = min(n, 256)).
 *    Within a block: y = H * D * x / sqrt(blk), with H the Sylvester
 *    Walsh-Hadamard matrix and D = diag(s), s[i] = +-1 drawn from a fixed
 *    64-bit seed (splitmix64). The matrix is orthonormal: kv_rot_inverse()
 *    (x = D * H * y / sqrt(blk)) undoes kv_rot_apply() up to rounding.
 *  - n and blk must be powers of two (blk divides n). Other widths are refused
 *    by kv_rot_init() with COLIBRI_EUNSUPPORTED and a message naming the width:
 *    they are never padded or silently zeroed. (MLA widths in use are powers of
 *    two: r = 32/128/512, dr = 16/32/64.)
 *  - The signs depend only on (n, blk, seed): a cache written with one seed can
 *    be read by any process that rebuilds the rotation with the same seed
 *    (persistence records the seed).
 *  - A kv_rot is read-only after init and may be shared across threads.
 */
#ifndef COLIBRI_KV_ROTATE_H
#define COLIBRI_KV_ROTATE_H

#include <stdint.h>

#include "colibri.h"

struct kv_rot {
    int n;          /* vector width */
    int blk;        /* rotation block width (power of two, divides n) */
    uint64_t seed;
    float *sign;    /* n entries, +1 or -1; owned */
};

/* 1 if n is a power of two >= 1. */
int kv_is_pow2(int n);

/* Fills *r (signs allocated, release with kv_rot_free). 0 or a negative
 * COLIBRI_E* code; *r is zeroed on failure. */
int kv_rot_init(struct kv_rot *r, int n, int blk, uint64_t seed, struct colibri_err *err);
void kv_rot_free(struct kv_rot *r);

/* In place, x has r->n floats. */
void kv_rot_apply(const struct kv_rot *r, float *x);
void kv_rot_inverse(const struct kv_rot *r, float *x);

/* Unnormalized in-place Walsh-Hadamard transform of n (power of two) floats. */
void kv_fwht(float *x, int n);

#endif
