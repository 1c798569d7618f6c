#include "kv/rotate.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"

int kv_is_pow2(int n) { return n > 0 && (n & (n - 1)) == 0; }

static uint64_t splitmix64(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

int kv_rot_init(struct kv_rot *r, int n, int blk, uint64_t seed, struct colibri_err *err)
{
    memset(r, 0, sizeof *r);
    if (!kv_is_pow2(n))
        return base_err_set(err, COLIBRI_EUNSUPPORTED,
                       "kv rotation: width %d is not a power of two (the Hadamard "
                       "rotation needs 2^k values per row; use the f32, bf16 or fp8 "
                       "tier for this model)", n);
    if (!kv_is_pow2(blk) || blk > n)
        return base_err_set(err, COLIBRI_EINVAL,
                       "kv rotation: block %d must be a power of two <= width %d", blk, n);
    r->sign = malloc((size_t)n * sizeof *r->sign);
    if (!r->sign) return base_err_set(err, COLIBRI_ENOMEM, "kv rotation: %d signs", n);
    uint64_t s = seed;
    uint64_t bits = 0;
    for (int i = 0; i < n; i++) {
        if ((i & 63) == 0) bits = splitmix64(&s);
        r->sign[i] = (bits >> (i & 63)) & 1 ? -1.0f : 1.0f;
    }
    r->n = n;
    r->blk = blk;
    r->seed = seed;
    return 0;
}

void kv_rot_free(struct kv_rot *r)
{
    if (!r) return;
    free(r->sign);
    memset(r, 0, sizeof *r);
}

void kv_fwht(float *x, int n)
{
    for (int h = 1; h < n; h <<= 1)
        for (int i = 0; i < n; i += h << 1)
            for (int j = i; j < i + h; j++) {
                float a = x[j], b = x[j + h];
                x[j] = a + b;
                x[j + h] = a - b;
            }
}

void kv_rot_apply(const struct kv_rot *r, float *x)
{
    const float norm = 1.0f / sqrtf((float)r->blk);
    for (int i = 0; i < r->n; i++) x[i] *= r->sign[i];
    for (int b = 0; b < r->n; b += r->blk) kv_fwht(x + b, r->blk);
    for (int i = 0; i < r->n; i++) x[i] *= norm;
}

void kv_rot_inverse(const struct kv_rot *r, float *x)
{
    const float norm = 1.0f / sqrtf((float)r->blk);
    for (int b = 0; b < r->n; b += r->blk) kv_fwht(x + b, r->blk);
    for (int i = 0; i < r->n; i++) x[i] *= norm * r->sign[i];
}
