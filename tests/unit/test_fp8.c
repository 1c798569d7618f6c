/* test_fp8.c - e4m3fn decode table and the RNE encoder, checked against an
 * independent slow reference (nearest of all decoded codes, ties to the even
 * code) and against the format definition written out by hand. */
#include "check.h"
#include "quant/fp8.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* From the spec, by formula: S EEEE MMM, bias 7. Independent of the table. */
static double spec_value(int code)
{
    int s = code >> 7, e = (code >> 3) & 15, m = code & 7;
    double v = e == 0 ? ldexp(m / 8.0, -6) : ldexp(1.0 + m / 8.0, e - 7);
    return s ? -v : v;
}

/* Slow reference encoder: the nearest non-NaN magnitude code (0x00..0x7E),
 * ties to the code with an even mantissa (low bit 0); |x| > 448 saturates. */
static uint8_t ref_encode(float xf)
{
    if (isnan(xf)) return 0;
    double x = xf;
    uint8_t sign = signbit(xf) ? 0x80 : 0;
    double a = fabs(x);
    if (a > 448.0) return sign | 0x7E;
    int best = 0;
    double bd = INFINITY;
    for (int c = 0; c <= 0x7E; c++) {
        double d = fabs(spec_value(c) - a);
        if (d < bd || (d == bd && (c & 1) == 0)) { bd = d; best = c; }
    }
    return sign | (uint8_t)best;
}

static float bits_f(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
static uint32_t f_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }

static void test_table_matches_spec(void)
{
    for (int c = 0; c < 256; c++) {
        float t = quant_fp8_e4m3_decode((uint8_t)c);
        if ((c & 0x7F) == 0x7F) {
            CHECK(isnan(t), "code 0x%02x should be NaN", c);
            continue;
        }
        CHECK((double)t == spec_value(c), "code 0x%02x: %g vs %g", c, t, spec_value(c));
    }
    CHECK(quant_fp8_e4m3_decode(0x7E) == 448.0f, "max");
    CHECK(quant_fp8_e4m3_decode(0x01) == 0x1p-9f, "min subnormal");
    CHECK(quant_fp8_e4m3_decode(0x08) == 0x1p-6f, "min normal");
    CHECK(signbit(quant_fp8_e4m3_decode(0x80)) && quant_fp8_e4m3_decode(0x80) == 0.0f, "-0");
}

static void test_roundtrip_all_codes(void)
{
    for (int c = 0; c < 256; c++) {
        if ((c & 0x7F) == 0x7F) continue;             /* NaN codes */
        float v = quant_fp8_e4m3_decode((uint8_t)c);
        uint8_t back = quant_fp8_e4m3_encode(v);
        CHECK(back == c, "code 0x%02x -> %g -> 0x%02x", c, v, back);
    }
}

/* Every midpoint between adjacent magnitudes is a tie; one ulp either side
 * is not. Covers the subnormal ties, the subnormal->normal carry (0x07|0x08)
 * and each binade's carry (0x.7 -> next exponent). */
static void test_ties_every_binade(void)
{
    for (int c = 0; c < 0x7E; c++) {
        float lo = quant_fp8_e4m3_decode((uint8_t)c);
        float hi = quant_fp8_e4m3_decode((uint8_t)(c + 1));
        float mid = (float)(((double)lo + (double)hi) / 2);
        CHECK((double)mid == ((double)lo + (double)hi) / 2, "midpoint exact");
        uint8_t want = (c & 1) ? (uint8_t)(c + 1) : (uint8_t)c;
        CHECK(quant_fp8_e4m3_encode(mid) == want, "tie %g (0x%02x|0x%02x) -> 0x%02x",
              mid, c, c + 1, quant_fp8_e4m3_encode(mid));
        CHECK(quant_fp8_e4m3_encode(-mid) == (0x80 | want), "negative tie %g", -mid);
        float below = nextafterf(mid, 0.0f), above = nextafterf(mid, INFINITY);
        CHECK(quant_fp8_e4m3_encode(below) == c, "below tie %g", below);
        CHECK(quant_fp8_e4m3_encode(above) == c + 1, "above tie %g", above);
    }
    /* Named carry cases, written out: 248 is between 240 (0x77) and 256
     * (0x78); 7.5*2^-9 between 0x07 and 0x08 (the first normal). */
    CHECK(quant_fp8_e4m3_encode(248.0f) == 0x78, "binade carry");
    CHECK(quant_fp8_e4m3_encode(7.5f * 0x1p-9f) == 0x08, "subnormal->normal carry");
    CHECK(quant_fp8_e4m3_encode(0.5f * 0x1p-9f) == 0x00, "half of min subnormal ties to 0");
    CHECK(quant_fp8_e4m3_encode(1.5f * 0x1p-9f) == 0x02, "1.5 ulp ties to 2");
    CHECK(quant_fp8_e4m3_encode(nextafterf(0.5f * 0x1p-9f, 1.0f)) == 0x01, "just above half");
}

static void test_saturation_nan_zero(void)
{
    CHECK(quant_fp8_e4m3_encode(448.0f) == 0x7E, "448");
    CHECK(quant_fp8_e4m3_encode(nextafterf(448.0f, INFINITY)) == 0x7E, "448+ulp");
    CHECK(quant_fp8_e4m3_encode(464.0f) == 0x7E, "464 (would tie to 480)");
    CHECK(quant_fp8_e4m3_encode(480.0f) == 0x7E, "480");
    CHECK(quant_fp8_e4m3_encode(1e30f) == 0x7E, "1e30");
    CHECK(quant_fp8_e4m3_encode(INFINITY) == 0x7E, "+inf");
    CHECK(quant_fp8_e4m3_encode(-INFINITY) == 0xFE, "-inf");
    CHECK(quant_fp8_e4m3_encode(-1000.0f) == 0xFE, "-1000");
    CHECK(quant_fp8_e4m3_encode(NAN) == 0x00, "NaN");
    CHECK(quant_fp8_e4m3_encode(-NAN) == 0x00, "-NaN");
    CHECK(quant_fp8_e4m3_encode(0.0f) == 0x00, "+0");
    CHECK(quant_fp8_e4m3_encode(-0.0f) == 0x80, "-0");
    CHECK(quant_fp8_e4m3_encode(FLT_MIN) == 0x00, "FLT_MIN");
    CHECK(quant_fp8_e4m3_encode(-FLT_MIN) == 0x80, "-FLT_MIN keeps sign");
    CHECK(quant_fp8_e4m3_encode(bits_f(1)) == 0x00, "f32 denormal");
    CHECK(quant_fp8_e4m3_encode(-1e-20f) == 0x80, "tiny negative -> -0");
}

static uint32_t rng_state = 12345;
static uint32_t rng(void)
{
    rng_state ^= rng_state << 13; rng_state ^= rng_state >> 17; rng_state ^= rng_state << 5;
    return rng_state;
}

static void test_vs_reference(void)
{
    int bad = 0;
    /* Random bit patterns with exponents around the e4m3 range, plus fully
     * random patterns. */
    for (int i = 0; i < 200000; i++) {
        uint32_t u = rng();
        if (i & 1) {
            uint32_t e = 127 - 14 + rng() % 26;       /* 2^-14 .. 2^11 */
            u = (u & 0x807FFFFFu) | (e << 23);
        }
        float x = bits_f(u);
        uint8_t got = quant_fp8_e4m3_encode(x), want = ref_encode(x);
        if (got != want && bad++ < 10)
            CHECK(got == want, "x=%a (0x%08x): got 0x%02x want 0x%02x", x, f_bits(x), got, want);
    }
    CHECK(bad == 0, "%d mismatches vs reference", bad);
}

static void test_rows(void)
{
    float z[37] = {0}, out[37];
    uint8_t q[37];
    memset(q, 0xAA, sizeof q);
    CHECK(quant_fp8_encode_row(z, 37, q) == 0.0f, "zero row scale 0");
    int nz = 0;
    for (int i = 0; i < 37; i++) nz += q[i] != 0;
    CHECK(nz == 0, "zero row codes 0");
    quant_fp8_decode_row(q, 37, 0.0f, out);
    for (int i = 0; i < 37; i++) CHECK(out[i] == 0.0f, "zero row decodes 0");

    float tiny[5] = {1e-35f, -1e-38f, 0, 0, 1e-31f};
    uint8_t qt[5];
    CHECK(quant_fp8_encode_row(tiny, 5, qt) == 0.0f, "tiny row scale 0");
    for (int i = 0; i < 5; i++) CHECK(qt[i] == 0, "tiny row codes 0");

    float x[300];
    uint8_t qx[300];
    for (int i = 0; i < 300; i++) x[i] = ((int)(rng() % 20001) - 10000) * 1e-3f;
    x[17] = -12.5f;                                   /* the amax */
    float s = quant_fp8_encode_row(x, 300, qx);
    CHECK(s == 12.5f / 448.0f, "scale = amax/448: %g", s);
    CHECK(qx[17] == 0xFE, "amax element -> -448 code, got 0x%02x", qx[17]);
    float y[300];
    quant_fp8_decode_row(qx, 300, s, y);
    for (int i = 0; i < 300; i++) {
        /* Relative spacing of e4m3 is 2^-3 per binade: error <= 2^-4 |x|
         * above the subnormal range, <= 2^-10 * s below it. */
        double bound = fmax(fabs(x[i]) * 0x1p-4, 0x1p-10 * s) * 1.0001;
        CHECK(fabs((double)y[i] - x[i]) <= bound, "i=%d %g vs %g", i, y[i], x[i]);
    }

    float w[4] = {1.0f, NAN, -INFINITY, 2.0f};
    uint8_t qw[4];
    float sw = quant_fp8_encode_row(w, 4, qw);
    CHECK(sw == 2.0f / 448.0f, "non-finite ignored for amax: %g", sw);
    CHECK(qw[1] == 0x00 && qw[2] == 0xFE && qw[3] == 0x7E, "NaN->0, -inf saturates");
}

int main(void)
{
    RUN_TEST(test_table_matches_spec);
    RUN_TEST(test_roundtrip_all_codes);
    RUN_TEST(test_ties_every_binade);
    RUN_TEST(test_saturation_nan_zero);
    RUN_TEST(test_vs_reference);
    RUN_TEST(test_rows);
    return CHECK_SUMMARY();
}
