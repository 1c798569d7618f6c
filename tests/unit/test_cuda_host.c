/* test_cuda_host.c - the CUDA kernels' arithmetic on the CPU, in plain `make
 * test` (no GPU, no nvcc): the shared decoders of cuda/cu_common.h against the
 * CPU's own (bit for bit), a replay of the matvec kernel's warp (every lane's
 * chunks or columns, then the shuffle tree's order) and of the attention
 * kernel's flash decoding (query rotation, tiles, online softmax, merge,
 * unrotation) against the CPU kernels within the tolerances of cuda_check.h,
 * the descriptors' refusals, and the comparison itself catching a planted
 * error. What only a GPU can check (the kernels' thread mapping, shared
 * memory, launches) is tests/cuda/test_cuda.c's, run by `make test-cuda`. */
#include "check.h"
#include "cuda_check.h"

#include "cuda/cu_desc.h"
#include "cuda/cu_replay.h"
#include "kv/kv_num.h"
#include "quant/fp8.h"
#include "quant/half.h"

static int same_float(float a, float b) { return a == b || (a != a && b != b); }

static void test_fp8_f16_bf16_decoders(void)
{
    int bad = 0;
    for (int b = 0; b < 256; b++)
        if (!same_float(cu_fp8((uint32_t)b), quant_fp8_e4m3_table[b]) && bad++ < 3)
            CHECK(0, "fp8 %#x: %g vs %g", b, cu_fp8((uint32_t)b), quant_fp8_e4m3_table[b]);
    for (uint32_t h = 0; h < 65536; h++) {
        if (!same_float(cu_f16(h), kv_f16_to_f32((uint16_t)h)) && bad++ < 3) CHECK(0, "f16 %#x", h);
        if (!same_float(cu_f16(h), quant_f16_to_f32((uint16_t)h)) && bad++ < 3) CHECK(0, "f16 (quant) %#x", h);
        if (!same_float(cu_bf16(h), quant_bf16_to_f32((uint16_t)h)) && bad++ < 3) CHECK(0, "bf16 %#x", h);
    }
    CHECK(bad == 0, "%d codes decode differently", bad);
}

static const int FMTS[] = { QUANT_F32, QUANT_BF16, QUANT_F16, QUANT_Q8, QUANT_Q4, QUANT_Q4G32, QUANT_Q4G64,
                            QUANT_Q4G128, QUANT_FP8B };
#define NFMTS ((int)(sizeof FMTS / sizeof FMTS[0]))
/* odd shapes, partial int4 blocks and groups, partial fp8b blocks (rows and
 * columns), shapes whose rows are 16-byte aligned (the chunk path) */
static const int SHAPES[][2] = { { 1, 1 }, { 3, 31 }, { 17, 100 }, { 33, 129 }, { 130, 200 }, { 129, 257 },
                                 { 5, 1000 }, { 40, 256 }, { 7, 1024 }, { 131, 384 } };
#define NSHAPES ((int)(sizeof SHAPES / sizeof SHAPES[0]))

/* make test replays half the shapes, one of each kind (degenerate, odd,
 * partial int4 groups and fp8b blocks both ways, aligned rows with and
 * without a partial row block); make test-full replays them all */
static int shape_on(int si)
{
    static const int quick[NSHAPES] = { 1, 1, 0, 0, 0, 1, 0, 1, 0, 1 };
    return check_full() || quick[si];
}

static void test_weight_elements(void)
{
    struct cc_rng g = { 0x1234567ull };
    for (int fi = 0; fi < NFMTS; fi++)
        for (int si = 0; si < NSHAPES; si++)
            for (int raw = 0; raw < 2 && shape_on(si); raw++) {
                int f = FMTS[fi], rows = SHAPES[si][0], cols = SHAPES[si][1], bad = 0;
                struct qtensor W;
                void *mem;
                float *smem;
                cc_tensor(&g, f, rows, cols, raw, &W, &mem, &smem);
                struct cu_wmat d = cu_wmat_of(&W, W.data, W.scales);
                float *ref = malloc((size_t)cols * sizeof *ref);
                for (int r = 0; r < rows; r++) {
                    quant_dequant_rows(&W, r, 1, ref);
                    for (int c = 0; c < cols; c++) {
                        float got = cu_w_elem(&d, f, r, c);
                        /* code * scale rounded once on either side */
                        if (!(fabsf(got - ref[c]) <= 1.2e-7f * fabsf(ref[c])) && bad++ < 3)
                            CHECK(0, "%s [%d,%d] (%d,%d): %g vs %g", quant_fmt_name(f), rows, cols, r, c, got, ref[c]);
                    }
                }
                CHECK(bad == 0, "%s [%d,%d]%s: %d elements differ", quant_fmt_name(f), rows, cols, raw ? " raw" : "",
                      bad);
                free(ref);
                quant_qtensor_free(&W);
                free(mem);
                free(smem);
            }
}

static void test_matvec_replay(void)
{
    struct cc_rng g = { 0xfeedull };
    static const int batches[] = { 1, 3, 6 };   /* within one pass, and across CU_NB */
    int vec_cases = 0;
    for (int fi = 0; fi < NFMTS; fi++)
        for (int si = 0; si < NSHAPES; si++)
            for (int raw = 0; raw < 2 && shape_on(si); raw++) {
                int f = FMTS[fi], rows = SHAPES[si][0], cols = SHAPES[si][1];
                struct qtensor W;
                void *mem;
                float *smem;
                cc_tensor(&g, f, rows, cols, raw, &W, &mem, &smem);
                struct cu_wmat d = cu_wmat_of(&W, W.data, W.scales);
                for (int bi = 0; bi < 3; bi++) {
                    int n = batches[bi];
                    float *X = cc_vec(&g, (size_t)n * cols, 3.0f);
                    if (cols > 40) memset(X, 0, 32 * sizeof *X);   /* an all-zero activation block */
                    float *Y = malloc((size_t)n * rows * sizeof *Y), *ref = malloc((size_t)n * rows * sizeof *ref);
                    double *mag = malloc((size_t)n * rows * sizeof *mag);
                    CHECK(cc_ref_product(&W, X, n, ref, mag) == 0, "reference");
                    for (int vec = 0; vec < 2; vec++) {
                        /* the word path only where the launcher takes it */
                        if (vec && !(cu_wmat_vec_ok(&d) && (uintptr_t)d.data % 4 == 0 && (uintptr_t)X % 16 == 0))
                            continue;
                        vec_cases += vec;
                        cu_replay_matmul(&d, X, n, Y, vec);
                        char what[96];
                        snprintf(what, sizeof what, "%s [%d,%d] n=%d%s %s", quant_fmt_name(f), rows, cols, n,
                                 raw ? " raw" : "", vec ? "words" : "elements");
                        int bad = cc_tol_check(Y, ref, mag, (size_t)n * rows, CC_TOL_MATVEC, what, NULL);
                        CHECK(bad == 0, "%s: %d outputs out of tolerance", what, bad);
                    }
                    free(X);
                    free(Y);
                    free(ref);
                    free(mag);
                }
                quant_qtensor_free(&W);
                free(mem);
                free(smem);
            }
    CHECK(vec_cases > 50, "only %d cases took the word path", vec_cases);
}

/* k_absorb_q and k_absorb_out replayed against model/mla.c's loops. */
static void test_absorb_replay(void)
{
    struct cc_rng g = { 0xab5ull };
    /* (H, dn, dv, dr, r): DeepSeek-V3's head widths at 4 heads; odd ones with
     * r % 4 != 0 (the element path) */
    static const int cases[][5] = { { 4, 128, 128, 64, 512 }, { 3, 16, 24, 8, 64 }, { 2, 5, 7, 0, 37 } };
    for (int fi = 0; fi < NFMTS; fi++)
        for (int ci = 0; ci < 3; ci++) {
            int f = FMTS[fi], H = cases[ci][0], dn = cases[ci][1], dv = cases[ci][2], dr = cases[ci][3], r = cases[ci][4];
            struct qtensor W;
            void *mem;
            float *smem;
            cc_tensor(&g, f, H * (dn + dv), r, ci == 1, &W, &mem, &smem);
            struct cu_wmat d = cu_wmat_of(&W, W.data, W.scales);
            float *q = cc_vec(&g, (size_t)H * (dn + dr), 2.0f), *lat = cc_vec(&g, (size_t)H * r, 2.0f);
            float *qa = malloc((size_t)H * r * sizeof *qa), *qa_ref = malloc((size_t)H * r * sizeof *qa);
            float *qpe = malloc((size_t)H * (dr + 1) * sizeof *qpe), *qpe_ref = malloc((size_t)H * (dr + 1) * sizeof *qpe);
            float *out = malloc((size_t)H * dv * sizeof *out), *out_ref = malloc((size_t)H * dv * sizeof *out);
            double *mq = malloc((size_t)H * r * sizeof *mq), *mo = malloc((size_t)H * dv * sizeof *mo);
            cc_ref_absorb(&W, H, dn, dv, dr, q, qa_ref, qpe_ref, mq, lat, out_ref, mo);
            for (int h = 0; h < H; h++) {
                for (int j = 0; j < r; j++) {   /* k_absorb_q's thread (h, j) */
                    float a = 0.0f;
                    for (int i = 0; i < dn; i++) a += q[(size_t)h * (dn + dr) + i] * cu_w_elem(&d, f, h * (dn + dv) + i, j);
                    qa[(size_t)h * r + j] = a;
                }
                for (int e = 0; e < dr; e++) qpe[(size_t)h * dr + e] = q[(size_t)h * (dn + dr) + dn + e];
                /* k_absorb_out's warps: rows h*(dn+dv) + dn + k, activation lat + h*r */
                int vec = cu_wmat_vec_ok(&d) && (uintptr_t)d.data % 4 == 0 && (uintptr_t)lat % 16 == 0;
                for (int k = 0; k < dv; k++) {
                    float lanes[32];
                    for (int lane = 0; lane < 32; lane++) {
                        float acc[CU_NB] = { 0 };
                        int row = h * (dn + dv) + dn + k;
                        if (vec)
                            for (int c = lane; c < cu_w_nchunks(&d); c += 32)
                                cu_matvec_chunk(&d, f, row, c, cu_ld_u32(d.data + (size_t)row * d.row_bytes + 4 * (size_t)c),
                                                lat + (size_t)h * r, r, 1, acc);
                        else
                            cu_matvec_lane_elem(&d, f, row, lane, lat + (size_t)h * r, r, 1, acc);
                        lanes[lane] = acc[0];
                    }
                    out[(size_t)h * dv + k] = cu_warp_tree(lanes);
                }
            }
            char what[80];
            snprintf(what, sizeof what, "absorb %s H=%d dn=%d dv=%d r=%d", quant_fmt_name(f), H, dn, dv, r);
            CHECK(cc_tol_check(qa, qa_ref, mq, (size_t)H * r, CC_TOL_MATVEC, what, NULL) == 0, "%s: W_UK", what);
            CHECK(cc_tol_check(out, out_ref, mo, (size_t)H * dv, CC_TOL_MATVEC, what, NULL) == 0, "%s: W_UV", what);
            CHECK(dr == 0 || memcmp(qpe, qpe_ref, (size_t)H * dr * sizeof *qpe) == 0, "%s: RoPE query copied", what);
            free(q), free(lat), free(qa), free(qa_ref), free(qpe), free(qpe_ref), free(out), free(out_ref), free(mq), free(mo);
            quant_qtensor_free(&W);
            free(mem);
            free(smem);
        }
}

static void test_kv_elements(void)
{
    struct cc_rng g = { 0xabcdefull };
    static const int dims[][2] = { { 512, 64 }, { 64, 16 }, { 256, 32 } };
    for (int ti = 0; ti < CC_N_KV_TIERS; ti++)
        for (int di = 0; di < 3; di++) {
            int t = cc_kv_tiers[ti], r = dims[di][0], dr = dims[di][1], T = 9, bad = 0;
            struct kv_cache *c = cc_cache(&g, t, r, dr, T);
            CHECK(c != NULL, "cache %s %d/%d", kv_tier_name(t), r, dr);
            if (!c) continue;
            const struct kv_layer *lay = &c->layer[0];
            struct cu_kv_part pl, pp;
            CHECK(cu_kv_part_of(&lay->lat, kv_cache_layer_part(c, 0, KV_PART_LATENT)->offset, lay->lat.rot.sign, &pl,
                                NULL) == 0, "latent part");
            CHECK(cu_kv_part_of(&lay->pe, kv_cache_layer_part(c, 0, KV_PART_ROPE)->offset, lay->pe.rot.sign, &pp,
                                NULL) == 0, "rope part");
            float *y = malloc((size_t)r * sizeof *y), *yp = malloc((size_t)dr * sizeof *yp);
            for (int p = 0; p < T; p++) {
                const uint8_t *row = lay->data + (size_t)p * lay->row_bytes;
                kv_codec_decode_rot(&lay->lat, row + kv_cache_layer_part(c, 0, KV_PART_LATENT)->offset, y);
                kv_codec_decode_rot(&lay->pe, row + kv_cache_layer_part(c, 0, KV_PART_ROPE)->offset, yp);
                for (int i = 0; i < r; i++)
                    if (!same_float(cu_kv_elem(&pl, row, i), y[i]) && bad++ < 3)
                        CHECK(0, "%s latent row %d [%d]: %g vs %g", kv_tier_name(t), p, i, cu_kv_elem(&pl, row, i), y[i]);
                for (int i = 0; i < dr; i++)
                    if (!same_float(cu_kv_elem(&pp, row, i), yp[i]) && bad++ < 3)
                        CHECK(0, "%s rope row %d [%d]", kv_tier_name(t), p, i);
            }
            CHECK(bad == 0, "%s %d/%d: %d values decode differently", kv_tier_name(t), r, dr, bad);
            free(y);
            free(yp);
            kv_cache_free(c);
        }
}

static void test_attend_replay(void)
{
    struct cc_rng g = { 0x5eedull };
    /* (r, dr, T, H, chunks): partial tiles, one row per chunk, heads past a group */
    static const int cases[][5] = { { 512, 64, 100, 3, 3 }, { 64, 16, 37, 17, 5 }, { 256, 32, 16, 2, 1 },
                                    { 128, 32, 200, 4, 200 }, { 128, 0, 70, 5, 2 } };
    for (int ti = 0; ti < CC_N_KV_TIERS; ti++)
        for (int ci = 0; ci < 5; ci++) {
            int t = cc_kv_tiers[ti], r = cases[ci][0], dr = cases[ci][1], T = cases[ci][2], H = cases[ci][3];
            struct kv_cache *c = cc_cache(&g, t, r, dr, T);
            CHECK(c != NULL, "cache");
            if (!c) continue;
            const struct kv_layer *lay = &c->layer[0];
            struct cu_kv_layer L;
            cu_kv_part_of(&lay->lat, kv_cache_layer_part(c, 0, KV_PART_LATENT)->offset, lay->lat.rot.sign, &L.lat, NULL);
            cu_kv_part_of(&lay->pe, kv_cache_layer_part(c, 0, KV_PART_ROPE)->offset, lay->pe.rot.sign, &L.pe, NULL);
            L.row_bytes = (long long)lay->row_bytes;
            L.rows = lay->data;
            float *ql = cc_vec(&g, (size_t)H * r, 1.0f), *qp = cc_vec(&g, (size_t)H * (dr ? dr : 1), 1.0f);
            float *out = malloc((size_t)H * r * sizeof *out), *ref = malloc((size_t)H * r * sizeof *ref);
            double *mag = malloc((size_t)H * r * sizeof *mag);
            float scale = 1.0f / sqrtf((float)(r + dr)) * 2.0f;
            CHECK(cc_ref_attend(c, T, H, ql, qp, scale, ref, mag) == 0, "reference");
            CHECK(cu_replay_attend(&L, T, H, ql, qp, scale, cases[ci][4], out) == 0, "replay scratch");
            char what[80];
            snprintf(what, sizeof what, "%s r=%d dr=%d T=%d H=%d", kv_tier_name(t), r, dr, T, H);
            int bad = cc_tol_check(out, ref, mag, (size_t)H * r, CC_TOL_ATTEND, what, NULL);
            CHECK(bad == 0, "%s: %d outputs out of tolerance", what, bad);
            free(ql);
            free(qp);
            free(out);
            free(ref);
            free(mag);
            kv_cache_free(c);
        }
}

static void test_descriptors(void)
{
    struct kv_cache *c = NULL;
    CHECK(kv_cache_new(KV_TIER_POLAR4, KV_ROPE_DEFAULT, 1, 64, 16, 4, &c, NULL) == 0, "polar4 cache");
    if (c) {
        struct cu_kv_part p;
        struct colibri_err err = { 0 };
        CHECK(cu_kv_part_of(&c->layer[0].lat, 0, NULL, &p, &err) == COLIBRI_EUNSUPPORTED, "polar4 refused");
        CHECK(strstr(err.msg, "polar4") != NULL, "the refusal names the tier: %s", err.msg);
        kv_cache_free(c);
    }
    /* the group and scale layout the kernels index with */
    float w[3 * 200];
    for (int i = 0; i < 600; i++) w[i] = (float)(i % 11) - 5.0f;
    static const int fmts[] = { QUANT_Q4, QUANT_Q4G32, QUANT_Q4G64, QUANT_Q4G128, QUANT_FP8B, QUANT_Q8 };
    static const int group[] = { 200, 32, 64, 128, 128, 0 }, nsc[] = { 1, 7, 4, 2, 2, 0 };
    for (int k = 0; k < 6; k++) {
        struct qtensor W;
        CHECK(quant_qtensor_from_f32(fmts[k], 3, 200, w, &W, NULL) == 0, "make");
        struct cu_wmat d = cu_wmat_of(&W, W.data, W.scales);
        CHECK(d.group == group[k] && d.n_scale_cols == nsc[k], "%s: group %d, %d scales per row", quant_fmt_name(fmts[k]),
              d.group, d.n_scale_cols);
        CHECK(d.row_bytes == (long long)quant_fmt_row_bytes(fmts[k], 200), "row bytes");
        quant_qtensor_free(&W);
    }
}

/* The comparison every CUDA test makes catches what it must. */
static void test_tolerance_check(void)
{
    float ref[4] = { 1.0f, -2.0f, 0.0f, 3.0f }, got[4];
    double mag[4] = { 10.0, 10.0, 0.0, 10.0 }, worst;
    memcpy(got, ref, sizeof got);
    CHECK(cc_tol_check(got, ref, mag, 4, 1e-5, "same", &worst) == 0 && worst == 0, "equal arrays pass");
    got[1] = -2.0f + 5e-5f;                       /* half the tolerance of 1e-4 */
    CHECK(cc_tol_check(got, ref, mag, 4, 1e-5, "within", &worst) == 0 && worst > 0.3 && worst < 0.7,
          "an error of half the tolerance passes (ratio %g)", worst);
    got[1] = -2.0f + 2e-4f;                       /* twice the tolerance */
    CHECK(cc_tol_check(got, ref, mag, 4, 1e-5, "planted (expected)", &worst) == 1 && worst > 1.5,
          "an error of twice the tolerance is caught");
    got[1] = ref[1];
    got[2] = 1e-20f;                              /* sum|terms| 0: only 0 is right */
    CHECK(cc_tol_check(got, ref, mag, 4, 1e-5, "planted zero (expected)", NULL) == 1, "a nonzero for a zero is caught");
    got[2] = 0.0f;
    got[3] = NAN;
    CHECK(cc_tol_check(got, ref, mag, 4, 1e-5, "planted NaN (expected)", &worst) == 1 && isinf(worst), "NaN is caught");
}

int main(void)
{
    if (!check_full()) printf("  weights: %d of %d shapes (make test-full: all)\n", 5, NSHAPES);
    RUN_TEST(test_fp8_f16_bf16_decoders);
    RUN_TEST(test_weight_elements);
    RUN_TEST(test_matvec_replay);
    RUN_TEST(test_absorb_replay);
    RUN_TEST(test_kv_elements);
    RUN_TEST(test_attend_replay);
    RUN_TEST(test_descriptors);
    RUN_TEST(test_tolerance_check);
    return CHECK_SUMMARY();
}
