/* The many-head, threaded V4 attention and indexer (model/v4_kern.h) give
 * the bits of the one-head loops of model/v4_attn.c and model/v4_indexer.c
 * (held to transformers by test_v4_parts), at every thread count, with
 * partial head blocks, an odd row count and a selection; and the indexer
 * over fp8 keys gives the one-head loop's bits on the keys decoded. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "kv/codec.h"
#include "model/v4_attn.h"
#include "model/v4_indexer.h"
#include "model/v4_kern.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static float frand(void)
{
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((rng >> 40) / (double)(1ull << 24)) * 2.0f - 1.0f;
}
static void fill(float *x, size_t n, float s)
{
    for (size_t i = 0; i < n; i++) x[i] = frand() * s;
}

static void test_attention_bits(void)
{
    enum { H = 20, HD = 64, W = 8, NE = 51, DR = 16 };
    float inv[DR / 2], sinks[H], kvw[HD];
    for (int i = 0; i < DR / 2; i++) inv[i] = powf(10000.0f, -2.0f * i / DR);
    fill(sinks, H, 1.0f);
    fill(kvw, HD, 1.0f);
    struct v4_attn a = { H, HD, W, 1e-6f, sinks, kvw, { DR, inv, 1.0f } };
    float *q = malloc(sizeof(float) * H * HD), *win = malloc(sizeof(float) * W * HD);
    float *ent = malloc(sizeof(float) * NE * HD), *ref = malloc(sizeof(float) * H * HD);
    float *out = malloc(sizeof(float) * H * HD), *scratch = malloc(sizeof(float) * (W + NE));
    fill(q, (size_t)H * HD, 2.0f);
    fill(win, (size_t)W * HD, 1.0f);
    fill(ent, (size_t)NE * HD, 1.0f);
    const int32_t sel[5] = { 40, 3, 17, 50, 8 };
    size_t stride = model_v4_attn_work_bytes(HD, W + NE);
    void *work = aligned_alloc(64, stride * 3);
    struct colibri_err err = { 0 };
    const struct { int n_win, pos, n_sel; const int32_t *sel; } cases[] = {
        { W, 100, NE, NULL }, { W - 1, 6, 5, sel }, { 3, 2, 0, NULL }, { W, 300, 5, sel },
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        CHECK(!model_v4_attn_query(&a, cases[c].pos, q, win, cases[c].n_win, ent, cases[c].sel, cases[c].n_sel, ref,
                                   scratch, &err), "%s", err.msg);
        for (int nt = 1; nt <= 3; nt++) {
            memset(out, 0xff, sizeof(float) * H * HD);
            CHECK(!model_v4_attn_query_mt(&a, cases[c].pos, q, win, cases[c].n_win, ent, cases[c].sel, cases[c].n_sel,
                                          out, work, stride, nt, &err), "%s", err.msg);
            CHECK(!memcmp(out, ref, sizeof(float) * H * HD), "case %zu, %d threads: bits differ from the one-head loop",
                  c, nt);
        }
    }
    CHECK(model_v4_attn_query_mt(&a, 100, q, win, W, ent, NULL, NE, out, work, stride - 64, 1, &err) == COLIBRI_EINVAL,
          "too little work accepted");
    free(q), free(win), free(ent), free(ref), free(out), free(scratch), free(work);
}

static void test_indexer_bits(void)
{
    enum { H = 20, HD = 32, NE = 151, DR = 8 };
    float inv[DR / 2];
    for (int i = 0; i < DR / 2; i++) inv[i] = powf(10000.0f, -2.0f * i / DR);
    struct v4_indexer ix = { H, HD, 4, 4, { DR, inv, 1.0f } };
    float *q = malloc(sizeof(float) * H * HD), w[H], *keys = malloc(sizeof(float) * NE * HD);
    float *dec = malloc(sizeof(float) * NE * HD), *qrot = malloc(sizeof(float) * H * HD);
    float ref[NE], score[NE];
    fill(q, (size_t)H * HD, 1.0f);
    fill(w, H, 1.0f);
    fill(keys, (size_t)NE * HD, 1.0f);
    size_t stride = model_v4_index_work_bytes(H, HD);
    void *work = aligned_alloc(64, stride * 3), *shared = aligned_alloc(64, model_v4_index_shared_bytes(H, HD));
    struct colibri_err err = { 0 };
    const enum kv_tier tiers[] = { KV_TIER_F32, KV_TIER_FP8 };
    for (int t = 0; t < 2; t++) {
        struct kv_codec kc;
        CHECK(!kv_codec_init(&kc, tiers[t], HD, 1, &err), "%s", err.msg);
        uint8_t *enc = malloc(kc.row_bytes * NE);
        for (int s = 0; s < NE; s++) {
            kv_codec_encode(&kc, keys + (size_t)s * HD, enc + (size_t)s * kc.row_bytes);
            kv_codec_decode(&kc, enc + (size_t)s * kc.row_bytes, dec + (size_t)s * HD);
        }
        CHECK(!model_v4_indexer_scores(&ix, 777, q, w, dec, NE, qrot, ref, &err), "%s", err.msg);
        for (int nt = 1; nt <= 3; nt++) {
            memset(score, 0xff, sizeof score);
            CHECK(!model_v4_index_scores_mt(&ix, 777, q, w, &kc, enc, NE, qrot, score, shared, work, stride, nt, &err),
                  "%s", err.msg);
            CHECK(!memcmp(score, ref, sizeof ref), "%s keys, %d threads: bits differ from the one-head loop",
                  kv_tier_name(tiers[t]), nt);
        }
        free(enc);
        kv_codec_free(&kc);
    }
    free(q), free(keys), free(dec), free(qrot), free(work), free(shared);
}

int main(void)
{
    RUN_TEST(test_attention_bits);
    RUN_TEST(test_indexer_bits);
    return CHECK_SUMMARY();
}
