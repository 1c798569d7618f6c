/* test_quant_mxfp4.c - the mxfp4 format written out independently of
 * quant/mxfp4.h: every code under every kind of e8m0 scale decoded bit for
 * bit (sign of zero included) at every level, the OCP block scale and
 * round-to-nearest-even e2m1 on chosen values, and every level's product
 * against a double reference of the same int8 activations (the products are
 * exact per block, so only the f32 accumulation may differ). test_quant runs
 * mxfp4 through the generic format x level tests as well. */
#include "check.h"
#include "quant/kernels.h"
#include "quant/qtensor.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng_s = 0x2545F4914F6CDD1Dull;
static uint32_t rnd(void)
{
    rng_s ^= rng_s << 13; rng_s ^= rng_s >> 7; rng_s ^= rng_s << 17;
    return (uint32_t)(rng_s >> 16);
}

/* An e2m1 code by its fields: sign bit 3, exponent bits 2..1, mantissa bit
 * 0; exponent 0 is subnormal (m * 0.5), else (1 + m/2) 2^(E-1). */
static double e2m1_value(int code)
{
    int s = code >> 3 & 1, E = code >> 1 & 3, m = code & 1;
    double mag = E == 0 ? m * 0.5 : (1.0 + m * 0.5) * ldexp(1.0, E - 1);
    return s ? -mag : mag;
}

static float want_value(int code, int e)
{
    if (e == 255) return NAN;
    float v = (float)(e2m1_value(code) * ldexp(1.0, e - 127));
    return code & 8 ? -fabsf(v) : v;       /* code 0x8 is -0 */
}

/* Element c of a row: byte c/2, low nibble for even c. */
static int code_at(const uint8_t *row, int c)
{
    return c % 2 ? row[c / 2] >> 4 : row[c / 2] & 0xF;
}

/* Every code at every column position, under scales that are normal,
 * subnormal in f32 (e = 0, 1), huge and NaN; 200 columns end in a partial
 * block. Compared by bits at every level. */
static void test_layout_all_codes(void)
{
    static const uint8_t es[] = { 127, 0, 1, 2, 126, 128, 200, 254, 255, 90 };
    const int rows = 10, cols = 200, nb = 7;
    uint8_t *d = malloc(quant_fmt_data_bytes(QUANT_MXFP4, rows, cols));
    uint8_t e[10 * 7];
    size_t rb = quant_fmt_row_bytes(QUANT_MXFP4, cols);
    CHECK(rb == 112, "row bytes");
    for (size_t i = 0; i < rows * rb; i++) d[i] = (uint8_t)(i * 37 + i / 5);
    for (int r = 0; r < rows; r++)
        for (int b = 0; b < nb; b++) e[r * nb + b] = es[(r + b) % 10];
    d[0] = 0x08;                                    /* element 0 = +0 (low), 1 = -0 (high) */
    d[1] = 0x80;                                    /* element 2 = +0, 3 = -0 */
    struct qtensor W;
    CHECK(quant_qtensor_wrap_raw(QUANT_MXFP4, rows, cols, d, rows * rb, e, sizeof e, &W, NULL) == 0, "wrap");
    float *out = malloc(sizeof(float) * rows * cols);
    int levels = 0;
    for (int isa = 0; isa < QUANT_ISA_COUNT; isa++) {
        if (!quant_isa_available(isa)) continue;
        levels++;
        CHECK(quant_dequant_rows_isa(&W, 0, rows, out, isa, NULL) == 0, "dequant");
        int bad = 0;
        for (int r = 0; r < rows; r++)
            for (int c = 0; c < cols; c++) {
                float want = want_value(code_at(d + r * rb, c), e[r * nb + c / 32]), got = out[r * cols + c];
                if (isnan(want) ? !isnan(got) : memcmp(&want, &got, 4) != 0) {
                    if (bad++ < 3)
                        CHECK(0, "%s (%d,%d) code %x e %d: %g, want %g", quant_isa_name(isa), r, c,
                              code_at(d + r * rb, c), e[r * nb + c / 32], got, want);
                }
            }
        CHECK(bad == 0, "%s: %d of %d values differ from the layout", quant_isa_name(isa), bad, rows * cols);
        CHECK(!signbit(out[1]) && signbit(out[0]) && !signbit(out[2]) && signbit(out[3]), "%s: signs of zero",
              quant_isa_name(isa));
    }
    CHECK(levels > 0, "a level ran");
    free(out);
    free(d);
}

/* The OCP rule on chosen blocks: X = 2^(floor(log2 amax) - 2), ties to the
 * even code, saturation at 6, the sign of zero kept. */
static void test_encode(void)
{
    float w[32] = { 0 }, out[32];
    /* amax 7: exponent floor(log2 7) - 2 = 0, e = 127; 7 saturates to 6 */
    const float v[] = { 7.0f, -3.0f, 0.75f, 0.25f, -0.1f, 5.0f, 1.25f, 1.75f, 2.5f, 3.5f, -0.0f, 0.26f, 0.74f, -5.01f };
    const int want_code[] = { 0x7, 0xD, 0x2, 0x0, 0x8, 0x6, 0x2, 0x4, 0x4, 0x6, 0x8, 0x1, 0x1, 0xF };
    const int n = (int)(sizeof v / sizeof v[0]);
    memcpy(w, v, sizeof v);
    /* a second row scaled by 2^-40: the same codes, e = 87 */
    float w2[64];
    for (int i = 0; i < 32; i++) { w2[i] = w[i]; w2[32 + i] = ldexpf(w[i], -40); }
    struct qtensor W;
    CHECK(quant_qtensor_from_f32(QUANT_MXFP4, 2, 32, w2, &W, NULL) == 0, "quantize");
    const uint8_t *d = W.data;
    CHECK(W.scales_e8m0[0] == 127 && W.scales_e8m0[1] == 87, "e8m0: %d %d (want 127 87)", W.scales_e8m0[0],
          W.scales_e8m0[1]);
    for (int r = 0; r < 2; r++)
        for (int i = 0; i < n; i++)
            CHECK(code_at(d + 16 * r, i) == want_code[i], "row %d value %g: code %x, want %x", r, v[i],
                  code_at(d + 16 * r, i), want_code[i]);
    quant_dequant_rows(&W, 0, 1, out);
    CHECK(out[0] == 6.0f && out[1] == -3.0f && signbit(out[4]) && out[4] == 0.0f, "decoded");
    quant_qtensor_free(&W);
    /* amax exactly a power of two (4 -> X = 1), an all-zero block, a block
     * whose amax is below the smallest scale's range (clamped to e = 0) */
    float z[96] = { 0 };
    z[0] = 4.0f; z[1] = 0.5f;
    z[64] = 0x1p-140f;
    CHECK(quant_qtensor_from_f32(QUANT_MXFP4, 1, 96, z, &W, NULL) == 0, "quantize");
    d = W.data;
    CHECK(W.scales_e8m0[0] == 127 && code_at(d, 0) == 6 && code_at(d, 1) == 1, "amax 4: e %d codes %x %x",
          W.scales_e8m0[0], code_at(d, 0), code_at(d, 1));
    CHECK(W.scales_e8m0[1] == 0 && d[16] == 0, "zero block: e = 0, +0 codes");
    CHECK(W.scales_e8m0[2] == 0 && code_at(d, 64) == 0, "tiny block clamps to e = 0: e %d code %x",
          W.scales_e8m0[2], code_at(d, 64));
    quant_qtensor_free(&W);
}

/* y at each level against sum over blocks of (sum_k 2w_k q_k) * xs * 2^(e-128)
 * in double, with q, xs the reference activation quantizer's (int8 levels)
 * or against the f32 activations (scalar level); the difference allowed is
 * f32 accumulation only: (terms in a chain + 8) ulps of the sum of |terms|. */
static void test_products_exact(void)
{
    static const int shapes[][2] = { { 7, 32 }, { 33, 200 }, { 16, 2048 }, { 5, 4100 } };
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        int rows = shapes[si][0], cols = shapes[si][1], n = 5, nb = (cols + 31) / 32;
        size_t rb = quant_fmt_row_bytes(QUANT_MXFP4, cols);
        uint8_t *d = malloc(rows * rb), *e = malloc((size_t)rows * nb);
        for (size_t i = 0; i < rows * rb; i++) d[i] = (uint8_t)rnd();
        for (int i = 0; i < rows * nb; i++) e[i] = (uint8_t)(110 + rnd() % 30);
        float *X = malloc(sizeof(float) * n * cols), *Y = malloc(sizeof(float) * n * rows);
        for (int i = 0; i < n * cols; i++) X[i] = ((float)(rnd() % 20001) - 10000.0f) * 1e-4f * (i % 97 == 0 ? 50 : 1);
        int cols_pad = (cols + 127) / 128 * 128, nblk = cols_pad / 32;
        int8_t *q = malloc((size_t)n * cols_pad);
        float *xs = malloc(sizeof(float) * n * nblk), *xsum = malloc(sizeof(float) * n * nblk);
        for (int j = 0; j < n; j++)
            quant_act_prep_ref(X + (size_t)j * cols, cols, cols_pad, q + (size_t)j * cols_pad, xs + (size_t)j * nblk,
                               xsum + (size_t)j * nblk, NULL);
        struct qtensor W;
        CHECK(quant_qtensor_wrap_raw(QUANT_MXFP4, rows, cols, d, rows * rb, e, (size_t)rows * nb, &W, NULL) == 0, "wrap");
        for (int isa = 0; isa < QUANT_ISA_COUNT; isa++) {
            if (!quant_isa_available(isa)) continue;
            int int8 = quant_isa_table(isa)->k[QUANT_MXFP4].act_int8;
            CHECK(quant_matmul_isa(&W, X, n, Y, isa, NULL) == 0, "matmul");
            int bad = 0;
            for (int r = 0; r < rows; r++)
                for (int j = 0; j < n; j++) {
                    double ref = 0, mag = 0;
                    for (int b = 0; b < nb; b++) {
                        double h = ldexp(1.0, e[r * nb + b] - 128), blk = 0;
                        for (int c = 32 * b; c < cols && c < 32 * b + 32; c++) {
                            double w2 = 2 * e2m1_value(code_at(d + r * rb, c));
                            double xv = int8 ? (double)q[(size_t)j * cols_pad + c] * xs[(size_t)j * nblk + b]
                                             : X[(size_t)j * cols + c];
                            blk += w2 * xv;
                            mag += fabs(w2 * xv * h);
                        }
                        ref += blk * h;
                    }
                    double got = Y[(size_t)j * rows + r], tol = (nb + 8) * 0x1p-24 * mag + 1e-30;
                    if (!(fabs(got - ref) <= tol) && bad++ < 3)
                        CHECK(0, "%s [%d,%d] r=%d j=%d: %.9g, want %.9g (tol %g)", quant_isa_name(isa), rows, cols,
                              r, j, got, ref, tol);
                }
            CHECK(bad == 0, "%s [%d,%d]: %d outputs off the exact product", quant_isa_name(isa), rows, cols, bad);
        }
        free(d); free(e); free(X); free(Y); free(q); free(xs); free(xsum);
    }
}

/* wrap_raw's checks, and quant_qtensor_wrap refusing e8m0 scales as floats. */
static void test_wrap(void)
{
    uint8_t d[2 * 32] = { 0 }, e[4] = { 127, 127, 127, 127 };
    float f[4] = { 0 };
    struct qtensor W;
    struct colibri_err err = { 0 };
    CHECK(quant_qtensor_wrap_raw(QUANT_MXFP4, 2, 64, d, 64, e, 4, &W, &err) == 0, "ok: %s", err.msg);
    CHECK(W.scales_e8m0 == e && !W.owned, "borrowed");
    CHECK(quant_qtensor_wrap_raw(QUANT_MXFP4, 2, 64, d, 64, e, 3, &W, &err) == COLIBRI_EINVAL &&
          strstr(err.msg, "4 bytes of scales"), "short scales: %s", err.msg);
    CHECK(quant_qtensor_wrap(QUANT_MXFP4, 2, 64, d, 64, f, 4, &W, &err) == COLIBRI_EINVAL &&
          strstr(err.msg, "e8m0"), "floats refused: %s", err.msg);
    CHECK(quant_qtensor_wrap_raw(QUANT_Q4G32, 1, 64, d, 64, (uint8_t *)f + 1, 8, &W, &err) == COLIBRI_EINVAL,
          "misaligned f32 scales");
}

int main(void)
{
    RUN_TEST(test_layout_all_codes);
    RUN_TEST(test_encode);
    RUN_TEST(test_products_exact);
    RUN_TEST(test_wrap);
    return CHECK_SUMMARY();
}
