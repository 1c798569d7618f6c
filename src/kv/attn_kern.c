/* kv/attn_kern.c - scalar reference kernels and the dispatch point. */
#include "kv/attn_kern.h"

#include <math.h>
#include <pthread.h>
#include <string.h>

float kv_expf(float x)
{
    if (!(x >= -87.0f)) return 0.0f;
    if (x > 88.0f) x = 88.0f;
    float n = rintf(x * 1.44269504088896341f);
    float r = fmaf(n, -0.693359375f, x);
    r = fmaf(n, 2.12194440e-4f, r);
    float p = 1.9875691500e-4f;
    p = fmaf(p, r, 1.3981999507e-3f);
    p = fmaf(p, r, 8.3334519073e-3f);
    p = fmaf(p, r, 4.1665795894e-2f);
    p = fmaf(p, r, 1.6666665459e-1f);
    p = fmaf(p, r, 5.0000001201e-1f);
    float r2 = r * r;
    float e = fmaf(p, r2, r) + 1.0f;
    uint32_t bits = (uint32_t)((int32_t)n + 127) << 23;
    float s;
    memcpy(&s, &bits, 4);
    return e * s;
}

static void scores_scalar(const float *qa, int da, const float *qb, int db, int ldq,
                          const float *a, size_t sa, const float *b, size_t sb, int n,
                          float scale, float *out, int ldo)
{
    for (int t = 0; t < n; t++)
        for (int h = 0; h < ldq; h++) {
            float s1 = 0.0f, s2 = 0.0f;
            for (int i = 0; i < da; i++) s1 = fmaf(qa[(size_t)i * ldq + h], a[t * sa + i], s1);
            for (int j = 0; j < db; j++) s2 = fmaf(qb[(size_t)j * ldq + h], b[t * sb + j], s2);
            out[(size_t)t * ldo + h] = (s1 + s2) * scale;
        }
}

static void accum_scalar(const float *p, int ldp, int H, const float *x, size_t sx,
                         int i0, int i1, int n, float *acc, int lda)
{
    for (int h = 0; h < H; h++)
        for (int t = 0; t < n; t++) {
            const float w = p[(size_t)t * ldp + h];
            const float *xt = x + t * sx;
            float *a = acc + (size_t)h * lda;
            for (int i = i0; i < i1; i++) a[i] = fmaf(w, xt[i], a[i]);
        }
}

static void colmax_scalar(const float *l, int ld, int Hp, int n, float *m)
{
    for (int t = 0; t < n; t++)
        for (int h = 0; h < Hp; h++) {
            float v = l[(size_t)t * ld + h];
            if (v > m[h]) m[h] = v;
        }
}

static void expsum_scalar(const float *l, int ld, const float *m, int Hp, int n,
                          float *p, float *sum)
{
    for (int t = 0; t < n; t++)
        for (int h = 0; h < Hp; h++) {
            float e = kv_expf(l[(size_t)t * ld + h] - m[h]);
            p[(size_t)t * ld + h] = e;
            sum[h] += e;
        }
}

static const struct kv_kern KV_KERN_SCALAR = {
    .name = "scalar",
    .scores = scores_scalar,
    .accum = accum_scalar,
    .colmax = colmax_scalar,
    .expsum = expsum_scalar,
};

const struct kv_kern *kv_kern_scalar(void) { return &KV_KERN_SCALAR; }

static const struct kv_kern *kv_kern_chosen;
static const struct kv_kern_q8 *kv_kern_q8_chosen;
static pthread_once_t kv_kern_once = PTHREAD_ONCE_INIT;

static void kv_kern_pick(void)
{
    kv_kern_chosen = &KV_KERN_SCALAR;
#if defined(__x86_64__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))
        kv_kern_chosen = &kv_kern_avx512;
    if (kv_kern_chosen == &kv_kern_avx512 && __builtin_cpu_supports("avx512vnni"))
        kv_kern_q8_chosen = &kv_kern_q8_avx512;
#endif
}

const struct kv_kern *kv_kern_get(void)
{
    pthread_once(&kv_kern_once, kv_kern_pick);
    return kv_kern_chosen;
}

const struct kv_kern_q8 *kv_kern_q8_get(void)
{
    pthread_once(&kv_kern_once, kv_kern_pick);
    return kv_kern_q8_chosen;
}

size_t kv_q8_work_bytes(int nmax, int r, int gs, int Hp)
{
    size_t n2 = ((size_t)nmax + 1) & ~(size_t)1;
    (void)gs;
    return (n2 / 2 * r + n2 / 2 * Hp + n2 + Hp) * 4 + 256;
}
