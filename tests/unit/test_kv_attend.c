/* test_kv_attend.c - decode attention over a kv_cache: the f32 tier is
 * bit-identical to the plain reference loop (kv_attend_ref), and every tier's
 * native consumer (rotated query, code-domain scores and accumulation, one
 * unrotation) equals decode-then-attend (kv_attend_ref on kv_cache_read rows)
 * within 1e-5 relative, over T from 1 to 5000 and 1 to 128 heads, with one and
 * two threads. Also: the cache's shape checks and unwritten rows. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "kv/attend.h"
#include "kv/attn_kern.h"
#include "kv/cache.h"
#include "kv/rotate.h"

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static double urand(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return ((rng_state >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}
static float gauss(void)
{
    return (float)(sqrt(-2.0 * log(urand())) * cos(6.283185307179586 * urand()));
}

struct shape { int T, H, r, dr; };

/* Fills layer 1 of a 2-layer cache with T random rows (layer 0 gets other
 * rows, so a wrong layer offset shows). */
static struct kv_cache *filled(enum kv_tier t, enum kv_rope_prec rp, struct shape s, float amp)
{
    struct kv_cache *c = NULL;
    struct colibri_err err = {0};
    if (kv_cache_new(t, rp, 2, s.r, s.dr, s.T + 3, &c, &err)) {
        CHECK(0, "kv_cache_new: %s", err.msg);
        return NULL;
    }
    float *lat = malloc(sizeof(float) * s.r), *pe = malloc(sizeof(float) * (s.dr + 1));
    for (int layer = 0; layer < 2; layer++)
        for (int p = 0; p < s.T; p++) {
            for (int i = 0; i < s.r; i++) lat[i] = amp * gauss();
            for (int i = 0; i < s.dr; i++) pe[i] = amp * gauss();
            CHECK(kv_cache_write(c, layer, p, lat, pe, &err) == 0, "write: %s", err.msg);
        }
    free(lat);
    free(pe);
    return c;
}

/* decode-then-attend in double precision: the yardstick for the native
 * consumer (an f32 reference would add its own rounding, ~1e-5 relative once
 * a sharp softmax amplifies logit rounding) */
static void attend_ref_double(int T, int H, int r, int dr, const float *lat, const float *rope,
                              const float *q_lat, const float *q_rope, float scale, float *out)
{
    double *l = malloc(sizeof(double) * T), *acc = malloc(sizeof(double) * r);
    for (int h = 0; h < H; h++) {
        double m = -INFINITY, sum = 0;
        for (int t = 0; t < T; t++) {
            double d = 0;
            for (int i = 0; i < r; i++) d += (double)q_lat[h * r + i] * lat[(size_t)t * r + i];
            for (int j = 0; j < dr; j++) d += (double)q_rope[h * dr + j] * rope[(size_t)t * dr + j];
            l[t] = d * scale;
            m = fmax(m, l[t]);
        }
        for (int i = 0; i < r; i++) acc[i] = 0;
        for (int t = 0; t < T; t++) {
            double p = exp(l[t] - m);
            sum += p;
            for (int i = 0; i < r; i++) acc[i] += p * lat[(size_t)t * r + i];
        }
        for (int i = 0; i < r; i++) out[h * r + i] = (float)(acc[i] / sum);
    }
    free(l);
    free(acc);
}

/* max over heads of |out_h - ref_h|_inf / |ref_h|_inf */
static double head_rel_err(const float *out, const float *ref, int H, int r)
{
    double worst = 0;
    for (int h = 0; h < H; h++) {
        double e = 0, m = 0;
        for (int i = 0; i < r; i++) {
            e = fmax(e, fabs((double)out[h * r + i] - ref[h * r + i]));
            m = fmax(m, fabs((double)ref[h * r + i]));
        }
        worst = fmax(worst, m > 0 ? e / m : e);
    }
    return worst;
}

/* Runs kv_attend with 1 and 2 threads against kv_attend_ref on decoded rows;
 * returns the worst relative error, or -1 if the f32 tier is not bit-exact. */
static int use_int8;        /* run_case: kv_scratch_set_int8 mode */
static double int8_vs_ref8; /* run_case: worst error against the int8-query reference */

/* q[H][d] <- R^T round(R q) on `levels` steps per sign with one scale per
 * head, as the integer consumer sees the query: 127 (int8) for the int8 codes
 * and the int8 RoPE part, 2047 for fp8's int16 path. */
static void int8_query(const struct kv_rot *rot, float *q, int H, int d, float levels)
{
    for (int h = 0; h < H; h++) {
        float *y = q + (size_t)h * d, amax = 0;
        kv_rot_apply(rot, y);
        for (int i = 0; i < d; i++) amax = fmaxf(amax, fabsf(y[i]));
        for (int i = 0; i < d; i++) y[i] = (float)lrintf(y[i] * (levels / amax)) * (amax / levels);
        kv_rot_inverse(rot, y);
    }
}

static double run_case(enum kv_tier t, enum kv_rope_prec rp, struct shape s, float qamp)
{
    struct kv_cache *c = filled(t, rp, s, 1.0f);
    if (!c) return 1;
    float *ql = malloc(sizeof(float) * s.H * s.r), *qr = malloc(sizeof(float) * (s.H * s.dr + 1));
    float *lat = malloc(sizeof(float) * s.T * s.r), *pe = malloc(sizeof(float) * (s.T * s.dr + 1));
    float *ref = malloc(sizeof(float) * s.H * s.r), *out = malloc(sizeof(float) * s.H * s.r);
    for (int i = 0; i < s.H * s.r; i++) ql[i] = qamp * gauss();
    for (int i = 0; i < s.H * s.dr; i++) qr[i] = qamp * gauss();
    const float scale = 1.0f / sqrtf((float)(s.r + s.dr));
    struct colibri_err err = {0};
    CHECK(kv_cache_read(c, 1, 0, s.T, lat, pe, &err) == 0, "read: %s", err.msg);
    CHECK(kv_attend_ref(s.T, s.H, s.r, s.dr, lat, pe, ql, qr, scale, ref) == 0, "ref");
    float *refd = malloc(sizeof(float) * s.H * s.r);
    attend_ref_double(s.T, s.H, s.r, s.dr, lat, pe, ql, qr, scale, refd);
    float *ref8 = NULL;
    if (use_int8 == KV_INT8_QUERY8 && (kv_codec_q8_group(&c->layer[0].lat) || t == KV_TIER_FP8) && s.r % 32 == 0) {
        /* the same reference with the query the int8 consumer sees: rotated,
         * rounded to int8 with one scale per head, rotated back */
        float *q8 = malloc(sizeof(float) * s.H * s.r), *qr8 = malloc(sizeof(float) * (s.H * s.dr + 1));
        memcpy(q8, ql, sizeof(float) * s.H * s.r);
        memcpy(qr8, qr, sizeof(float) * s.H * s.dr);
        ref8 = malloc(sizeof(float) * s.H * s.r);
        int8_query(&c->layer[0].lat.rot, q8, s.H, s.r, t == KV_TIER_FP8 ? 2047.0f : 127.0f);
        if (s.dr % 16 == 0 && kv_codec_q8_group(&c->layer[0].pe) == s.dr)
            int8_query(&c->layer[0].pe.rot, qr8, s.H, s.dr, 127.0f);
        kv_attend_ref(s.T, s.H, s.r, s.dr, lat, pe, q8, qr8, scale, ref8);
        free(q8);
        free(qr8);
    }
    double worst = 0;
    float *out1 = malloc(sizeof(float) * s.H * s.r);
    /* 1, 2 and 3 threads: the same bits, every tier (the native path's
     * parts depend on T alone) */
    for (int nt = 1; nt <= 3; nt++) {
        struct kv_scratch *sc = NULL;
        CHECK(kv_scratch_new(nt, &sc, NULL) == 0, "scratch");
        kv_scratch_set_int8(sc, use_int8);
        for (int i = 0; i < s.H * s.r; i++) out[i] = NAN;
        CHECK(kv_attend(c, 1, s.T, s.H, ql, qr, scale, out, sc, &err) == 0, "attend: %s", err.msg);
        if (t == KV_TIER_F32 && c->layer[0].rope == KV_ROPE_F32) {
            CHECK(memcmp(out, ref, sizeof(float) * s.H * s.r) == 0,
                  "f32 tier bit-identical to the reference (T=%d H=%d r=%d threads=%d)",
                  s.T, s.H, s.r, nt);
        }
        worst = fmax(worst, head_rel_err(out, refd, s.H, s.r));
        if (ref8) int8_vs_ref8 = fmax(int8_vs_ref8, head_rel_err(out, ref8, s.H, s.r));
        if (nt == 1) memcpy(out1, out, sizeof(float) * s.H * s.r);
        else
            CHECK(memcmp(out, out1, sizeof(float) * s.H * s.r) == 0,
                  "%s T=%d H=%d r=%d: %d threads differ from 1", kv_tier_name(t), s.T, s.H, s.r, nt);
        kv_scratch_free(sc);
    }
    free(out1);
    free(ql);
    free(qr);
    free(lat);
    free(pe);
    free(ref);
    free(refd);
    free(ref8);
    free(out);
    kv_cache_free(c);
    return worst;
}

static const struct shape SHAPES[] = {
    {1, 1, 512, 64},   {2, 4, 512, 64},    {37, 16, 512, 64}, {37, 128, 32, 16},
    {1000, 4, 512, 64}, {1000, 128, 128, 32}, {5000, 16, 128, 32},
};

/* The opt-in integer consumers run the two largest shapes only in `make
 * test-full`: the exact consumer covers them in every run. */
static size_t int8_shapes(void)
{
    return sizeof SHAPES / sizeof *SHAPES - (check_full() ? 0 : 2);
}

static void test_native_equals_decode_then_attend(void)
{
    for (int t = 0; t < KV_TIER_COUNT; t++) {
        double worst = 0;
        for (size_t k = 0; k < sizeof SHAPES / sizeof *SHAPES; k++) {
            double e = run_case(t, KV_ROPE_DEFAULT, SHAPES[k], 1.0f);
            CHECK(e <= 1e-5, "%s T=%d H=%d r=%d: rel err %.3g", kv_tier_name(t), SHAPES[k].T,
                  SHAPES[k].H, SHAPES[k].r, e);
            worst = fmax(worst, e);
        }
        printf("  %-7s native vs decode-then-attend: max rel err %.3g\n", kv_tier_name(t), worst);
    }
}

static void test_rope_precisions(void)
{
    const struct shape s = {300, 16, 128, 32};
    for (int p = 0; p < KV_ROPE_COUNT; p++) {
        const enum kv_tier tiers[] = {KV_TIER_F32, KV_TIER_TQ4};
        for (int k = 0; k < 2; k++) {
            double e = run_case(tiers[k], p, s, 1.0f);
            CHECK(e <= 1e-5, "%s + rope %s: rel err %.3g", kv_tier_name(tiers[k]), kv_rope_name(p), e);
        }
    }
}

static void test_sharp_softmax(void)
{
    /* large logits: the running max moves often and most weights underflow */
    const struct shape s = {2000, 16, 128, 32};
    const enum kv_tier tiers[] = {KV_TIER_F32, KV_TIER_INT8R, KV_TIER_Q4_0, KV_TIER_TQ3};
    for (int k = 0; k < 4; k++) {
        double e = run_case(tiers[k], KV_ROPE_DEFAULT, s, 8.0f);
        CHECK(e <= 1e-5, "%s sharp softmax: rel err %.3g", kv_tier_name(tiers[k]), e);
    }
}

/* Widths that are not multiples of 16 take the scalar kernels; unrotated tiers
 * accept any width, and dr may be 0. */
static void test_odd_widths(void)
{
    const struct shape shapes[] = {{100, 5, 40, 8}, {70, 3, 24, 0}};
    const enum kv_tier tiers[] = {KV_TIER_F32, KV_TIER_BF16, KV_TIER_FP8};
    for (int k = 0; k < 2; k++)
        for (int j = 0; j < 3; j++) {
            double e = run_case(tiers[j], KV_ROPE_DEFAULT, shapes[k], 1.0f);
            CHECK(e <= 1e-5, "%s r=%d dr=%d: rel err %.3g", kv_tier_name(tiers[j]), shapes[k].r,
                  shapes[k].dr, e);
        }
}

/* A decode loop: one scratch, T growing by one per call, rows written as they
 * come; every step equals the reference on the rows so far. */
static void test_decode_loop_reuses_scratch(void)
{
    const enum kv_tier tiers[] = {KV_TIER_F32, KV_TIER_TQ4};
    const int r = 64, dr = 16, H = 4, N = 150;
    for (int k = 0; k < 2; k++) {
        struct kv_cache *c = NULL;
        struct kv_scratch *sc = NULL;
        CHECK(kv_cache_new(tiers[k], KV_ROPE_DEFAULT, 1, r, dr, N, &c, NULL) == 0, "cache");
        CHECK(kv_scratch_new(2, &sc, NULL) == 0, "scratch");
        float lat[64], pe[16], ql[4 * 64], qr[4 * 16], out[4 * 64], ref[4 * 64];
        float *rl = malloc(sizeof(float) * N * r), *rp = malloc(sizeof(float) * N * dr);
        int bad = 0;
        for (int T = 1; T <= N; T++) {
            for (int i = 0; i < r; i++) lat[i] = gauss();
            for (int i = 0; i < dr; i++) pe[i] = gauss();
            kv_cache_write(c, 0, T - 1, lat, pe, NULL);
            for (int i = 0; i < H * r; i++) ql[i] = gauss();
            for (int i = 0; i < H * dr; i++) qr[i] = gauss();
            kv_cache_read(c, 0, 0, T, rl, rp, NULL);
            kv_attend_ref(T, H, r, dr, rl, rp, ql, qr, 0.1f, ref);
            if (kv_attend(c, 0, T, H, ql, qr, 0.1f, out, sc, NULL)) bad++;
            else if (tiers[k] == KV_TIER_F32 ? memcmp(out, ref, sizeof out) != 0
                                             : head_rel_err(out, ref, H, r) > 1e-5) bad++;
        }
        CHECK(bad == 0, "%s: %d of %d steps differ", kv_tier_name(tiers[k]), bad, N);
        free(rl);
        free(rp);
        kv_scratch_free(sc);
        kv_cache_free(c);
    }
}

static void test_cache_shape_and_bounds(void)
{
    struct kv_cache *c = NULL;
    struct colibri_err err = {0};
    CHECK(kv_cache_new(KV_TIER_Q4_0, KV_ROPE_DEFAULT, 3, 512, 64, 10, &c, &err) == 0, "new");
    CHECK(c->layer[0].rope == KV_ROPE_INT8, "quantized tiers default to int8 rope");
    CHECK(kv_cache_row_bytes(c, 2) == 288 + 68, "q4_0 row: 288 + 68 bytes, got %zu", kv_cache_row_bytes(c, 2));
    CHECK(kv_cache_token_bytes(c) == 3 * (288 + 68), "token bytes");
    float lat[512], pe[64];
    CHECK(kv_cache_read(c, 2, 0, 10, NULL, NULL, &err) == 0, "read all");
    CHECK(kv_cache_read(c, 2, 5, 1, lat, pe, &err) == 0, "read one");
    int nz = 0;
    for (int i = 0; i < 512; i++) nz += lat[i] != 0;
    for (int i = 0; i < 64; i++) nz += pe[i] != 0;
    CHECK(nz == 0, "unwritten rows read as zeros");
    CHECK(kv_cache_write(c, 3, 0, lat, pe, &err) == COLIBRI_ERANGE, "layer out of range");
    CHECK(kv_cache_write(c, 0, 10, lat, pe, &err) == COLIBRI_ERANGE, "pos out of range");
    CHECK(kv_cache_read(c, 0, 8, 3, lat, NULL, &err) == COLIBRI_ERANGE, "read past capacity");
    struct kv_scratch *s = NULL;
    kv_scratch_new(1, &s, NULL);
    CHECK(kv_attend(c, 0, 0, 4, lat, pe, 1.0f, lat, s, &err) == COLIBRI_EINVAL, "T = 0 refused");
    CHECK(kv_attend(c, 0, 11, 4, lat, pe, 1.0f, lat, s, &err) == COLIBRI_EINVAL, "T > capacity");
    kv_scratch_free(s);
    kv_cache_free(c);
    CHECK(kv_cache_new(KV_TIER_F32, KV_ROPE_DEFAULT, 1, 512, 64, 4, &c, &err) == 0, "f32");
    CHECK(c->layer[0].rope == KV_ROPE_F32 && kv_cache_row_bytes(c, 0) == 576 * 4, "f32 row 2304 B");
    kv_cache_free(c);
}

/* The opt-in int8 consumer is an approximation: it must still follow
 * decode-then-attend closely (a fault in layouts or scales gives errors of
 * order 1), and match exactly where it does not apply. */
static void test_int8_consumer(void)
{
    const int have = kv_kern_q8_get() != NULL;
    printf("  int8 (VNNI) consumer %s\n", have ? "available" : "not available on this CPU");
    use_int8 = KV_INT8_QUERY8;
    for (int t = 0; t < KV_TIER_COUNT; t++) {
        double worst = 0;
        int8_vs_ref8 = 0;
        for (size_t k = 0; k < int8_shapes(); k++) {
            double e = run_case(t, KV_ROPE_DEFAULT, SHAPES[k], 1.0f);
            worst = fmax(worst, e);
        }
        /* sharp softmax: the int8 query's logit error is scaled up 8x */
        double sharp = run_case(t, KV_ROPE_DEFAULT, (struct shape){2000, 16, 128, 32}, 8.0f);
        const int int8_tier = kv_tier_row_bytes(t, 128) && (t == KV_TIER_FP8 || t == KV_TIER_INT8R ||
                              t == KV_TIER_Q4_0 || t == KV_TIER_TQ4 || t == KV_TIER_TQ3 || t == KV_TIER_TQ2);
        const int approx = have && int8_tier;
        printf("  %-7s int8 consumer vs decode-then-attend: max rel err %.3g (sharp softmax %.3g); "
               "vs the same with the int8 query: %.3g\n", kv_tier_name(t), worst, sharp, int8_vs_ref8);
        CHECK(worst <= (approx ? 5e-2 : 1e-5), "%s int8 consumer rel err %.3g", kv_tier_name(t), worst);
        CHECK(sharp <= (approx ? 0.3 : 1e-5), "%s int8 consumer, sharp softmax: rel err %.3g",
              kv_tier_name(t), sharp);
        /* fp8's int16 codes round each value to 1/2046 of the row's range,
         * which the query-only reference does not model (T = 1 shows 5e-4).
         * Without VNNI an int8 tier runs the exact consumer (worst above
         * holds it to 1e-5), so the int8-query reference does not apply. */
        if (approx || !int8_tier)
            CHECK(int8_vs_ref8 <= (!approx ? 1e-5 : t == KV_TIER_FP8 ? 1e-2 : 1e-3),
                  "%s int8 consumer vs int8-query reference %.3g", kv_tier_name(t), int8_vs_ref8);
    }
    for (int p = 0; p < KV_ROPE_COUNT; p++) {
        int8_vs_ref8 = 0;
        double e = run_case(KV_TIER_Q4_0, p, (struct shape){300, 16, 128, 32}, 1.0f);
        CHECK(e <= (have ? 8e-2 : 1e-5) && (!have || int8_vs_ref8 <= 1e-3),
              "q4_0 int8 consumer with rope %s: %.3g / %.3g", kv_rope_name(p), e, int8_vs_ref8);
    }
    use_int8 = KV_INT8_OFF;
}

/* With the two-part query the integer consumer is close to exact: what is
 * left is the 15-bit weights (and fp8's 11-bit codes). */
static void test_int8_two_part_query(void)
{
    const int have = kv_kern_q8_get() != NULL;
    use_int8 = KV_INT8_QUERY16;
    for (int t = 0; t < KV_TIER_COUNT; t++) {
        double worst = 0;
        for (size_t k = 0; k < int8_shapes(); k++)
            worst = fmax(worst, run_case(t, KV_ROPE_DEFAULT, SHAPES[k], 1.0f));
        double sharp = run_case(t, KV_ROPE_DEFAULT, (struct shape){2000, 16, 128, 32}, 8.0f);
        const int approx = have && (t == KV_TIER_FP8 || t == KV_TIER_INT8R || t == KV_TIER_Q4_0 ||
                                    t == KV_TIER_TQ4 || t == KV_TIER_TQ3 || t == KV_TIER_TQ2);
        printf("  %-7s two-part int8 query vs decode-then-attend: max rel err %.3g (sharp softmax %.3g)\n",
               kv_tier_name(t), worst, sharp);
        const double tol = !approx ? 1e-5 : t == KV_TIER_FP8 ? 1e-2 : 1e-3;
        CHECK(worst <= tol && sharp <= 5 * tol, "%s two-part query: %.3g / %.3g", kv_tier_name(t),
              worst, sharp);
    }
    use_int8 = KV_INT8_OFF;
}

/* kv_attend_select: all positions in order is kv_attend bit for bit; a
 * shuffled subset is attention over exactly those rows (for the f32 tier the
 * reference loop on them, bit for bit; for tq4 decode-then-attend within
 * 1e-5), whatever the order. Bad positions are refused by value. */
static void test_select_positions(void)
{
    const enum kv_tier tiers[] = { KV_TIER_F32, KV_TIER_TQ4 };
    struct shape sh = { 300, 16, 512, 64 };
    for (int ti = 0; ti < 2; ti++) {
        struct kv_cache *c = filled(tiers[ti], KV_ROPE_DEFAULT, sh, 1.0f);
        if (!c) continue;
        struct kv_scratch *s = NULL;
        struct colibri_err err = {0};
        CHECK(kv_scratch_new(2, &s, &err) == 0, "%s", err.msg);
        int H = sh.H, r = sh.r, dr = sh.dr, n = 77;
        float *q = malloc(sizeof(float) * H * r), *qr = malloc(sizeof(float) * H * dr);
        float *a = malloc(sizeof(float) * H * r), *b = malloc(sizeof(float) * H * r), *ref = malloc(sizeof(float) * H * r);
        for (int i = 0; i < H * r; i++) q[i] = 0.05f * gauss();
        for (int i = 0; i < H * dr; i++) qr[i] = 0.05f * gauss();
        int32_t all[300], sel[77];
        for (int i = 0; i < sh.T; i++) all[i] = i;
        CHECK(kv_attend(c, 1, sh.T, H, q, qr, 0.07f, a, s, &err) == 0, "%s", err.msg);
        CHECK(kv_attend_select(c, 1, all, sh.T, H, q, qr, 0.07f, b, s, &err) == 0, "%s", err.msg);
        CHECK(!memcmp(a, b, sizeof(float) * H * r), "%s: all positions differ from kv_attend", kv_tier_name(tiers[ti]));
        for (int i = 0; i < n; i++) sel[i] = (int32_t)((i * 97 + 31) % sh.T);   /* distinct, shuffled */
        float *lat = malloc(sizeof(float) * n * r), *pe = malloc(sizeof(float) * n * dr);
        for (int i = 0; i < n; i++)
            CHECK(kv_cache_read(c, 1, sel[i], 1, lat + (size_t)i * r, pe + (size_t)i * dr, &err) == 0, "%s", err.msg);
        CHECK(kv_attend_select(c, 1, sel, n, H, q, qr, 0.07f, b, s, &err) == 0, "%s", err.msg);
        if (tiers[ti] == KV_TIER_F32) {
            CHECK(kv_attend_ref(n, H, r, dr, lat, pe, q, qr, 0.07f, ref) == 0, "ref");
            CHECK(!memcmp(b, ref, sizeof(float) * H * r), "f32: selected rows differ from the reference on them");
        } else {
            attend_ref_double(n, H, r, dr, lat, pe, q, qr, 0.07f, ref);
            double e = head_rel_err(b, ref, H, r);
            CHECK(e < 1e-5, "tq4: selected rows vs decode-then-attend %g", e);
        }
        CHECK(memcmp(a, b, sizeof(float) * H * r) != 0, "a subset gives another result than all rows");
        int32_t bad[2] = { 3, sh.T + 3 };
        CHECK(kv_attend_select(c, 1, bad, 2, H, q, qr, 0.07f, b, s, &err) == COLIBRI_ERANGE &&
                  strstr(err.msg, "selected position"), "out-of-range position: %s", err.msg);
        free(lat); free(pe); free(q); free(qr); free(a); free(b); free(ref);
        kv_scratch_free(s);
        kv_cache_free(c);
    }
}

/* A row with an index-key part after latent and RoPE: the part has its own
 * place and codec, round-trips, and leaves the other parts' bytes alone. */
static void test_row_parts(void)
{
    struct kv_cache *c = NULL, *plain = NULL;
    struct colibri_err err = {0};
    struct kv_part_spec key = { KV_PART_INDEX_KEY, 128, KV_TIER_FP8 };
    CHECK(kv_cache_new_parts(KV_TIER_F32, KV_ROPE_DEFAULT, 2, 64, 16, &key, 1, 8, &c, &err) == 0, "%s", err.msg);
    CHECK(kv_cache_new(KV_TIER_F32, KV_ROPE_DEFAULT, 2, 64, 16, 8, &plain, &err) == 0, "%s", err.msg);
    if (!c || !plain) return;
    const struct kv_part *p = kv_cache_part(c, KV_PART_INDEX_KEY);
    CHECK(c->layer[1].n_parts == 3 && p && p->offset == plain->layer[1].row_bytes && p->bytes == 128 + 4 &&
              c->layer[1].row_bytes == plain->layer[1].row_bytes + p->bytes, "layout: %d parts, row %zu",
          c->layer[1].n_parts, c->layer[1].row_bytes);
    float lat[64], pe[16], k[128], back[128];
    for (int i = 0; i < 64; i++) lat[i] = gauss();
    for (int i = 0; i < 16; i++) pe[i] = gauss();
    static const float EXACT[7] = { -4, -2, -1, 0, 1, 2, 4 };   /* x * 448/4 is an e4m3 value */
    for (int i = 0; i < 128; i++) k[i] = EXACT[i % 7];
    CHECK(kv_cache_write(c, 1, 5, lat, pe, &err) == 0 && kv_cache_write(plain, 1, 5, lat, pe, &err) == 0, "%s", err.msg);
    CHECK(kv_cache_write_part(c, 1, 5, KV_PART_INDEX_KEY, k, &err) == 0, "%s", err.msg);
    CHECK(!memcmp(kv_cache_row(c, 1, 5), kv_cache_row(plain, 1, 5), plain->layer[1].row_bytes), "latent and RoPE bytes unchanged");
    CHECK(kv_cache_read_part(c, 1, 5, KV_PART_INDEX_KEY, back, &err) == 0, "%s", err.msg);
    double e = 0;
    for (int i = 0; i < 128; i++) e = fmax(e, fabs(back[i] - k[i]));
    CHECK(e < 1e-6, "index key round trip %g", e);
    CHECK(kv_cache_write_part(plain, 1, 5, KV_PART_INDEX_KEY, k, &err) == COLIBRI_EINVAL, "no such part refused");
    struct kv_part_spec twice[2] = { key, key };
    struct kv_cache *bad = NULL;
    CHECK(kv_cache_new_parts(KV_TIER_F32, KV_ROPE_DEFAULT, 2, 64, 16, twice, 2, 8, &bad, &err) == COLIBRI_EINVAL && !bad,
          "two index keys refused: %s", err.msg);
    kv_cache_free(c);
    kv_cache_free(plain);
}

int main(void)
{
    RUN_TEST(test_cache_shape_and_bounds);
    RUN_TEST(test_native_equals_decode_then_attend);
    RUN_TEST(test_odd_widths);
    RUN_TEST(test_decode_loop_reuses_scratch);
    RUN_TEST(test_rope_precisions);
    RUN_TEST(test_sharp_softmax);
    RUN_TEST(test_int8_consumer);
    RUN_TEST(test_int8_two_part_query);
    RUN_TEST(test_select_positions);
    RUN_TEST(test_row_parts);
    return CHECK_SUMMARY();
}
