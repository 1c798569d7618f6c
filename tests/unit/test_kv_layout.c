/* test_kv_layout.c - per-layer cache layouts: a layer of a mixed cache holds
 * exactly the bytes a uniform cache of that layer's tier holds, and attention
 * over it is bit-identical to attention over that uniform cache; a uniform
 * spec gives the addresses of the plain constructor; index keys in some
 * layers only. And the --kv spelling (kv/layout.h): what it parses to, what
 * it refuses by name, and that kv_layout_options names a layout that parses
 * back to it. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "kv/attend.h"
#include "kv/cache.h"
#include "kv/layout.h"

#define NL 4
#define R 64
#define DR 32
#define CAP 40

static float val(int l, int p, int i) { return (float)(((l * 977 + p * 131 + i * 37) % 1999) - 999) / 300.0f; }

static void fill(struct kv_cache *c, int n)
{
    float lat[R], pe[DR];
    for (int l = 0; l < c->n_layers; l++)
        for (int p = 0; p < n; p++) {
            for (int i = 0; i < R; i++) lat[i] = val(l, p, i);
            for (int i = 0; i < DR; i++) pe[i] = val(l, p + 1000, i);
            kv_cache_write(c, l, p, lat, pe, NULL);
        }
}

/* Layers 0..3 as f32, int8r with f32 RoPE, fp8, tq4: each layer's rows and
 * attention equal those of a uniform cache of the same layout. */
static void test_mixed_layers_match_uniform(void)
{
    struct kv_layer_spec spec[NL] = {
        { .tier = KV_TIER_F32, .rope = KV_ROPE_DEFAULT },
        { .tier = KV_TIER_INT8R, .rope = KV_ROPE_F32 },
        { .tier = KV_TIER_FP8, .rope = KV_ROPE_DEFAULT },
        { .tier = KV_TIER_TQ4, .rope = KV_ROPE_BF16 },
    };
    struct colibri_err err = { 0 };
    struct kv_cache *c = NULL;
    CHECK(kv_cache_new_layers(spec, NL, R, DR, CAP, &c, &err) == 0, "%s", err.msg);
    if (!c) return;
    CHECK(!c->uniform, "a mixed cache is not uniform");
    fill(c, CAP);
    struct kv_scratch *s = NULL;
    kv_scratch_new(1, &s, NULL);
    size_t token = 0;
    const int H = 5;
    float q[H * R], qr[H * DR], o1[H * R], o2[H * R];
    for (int i = 0; i < H * R; i++) q[i] = val(7, i, 3) * 0.3f;
    for (int i = 0; i < H * DR; i++) qr[i] = val(8, i, 5) * 0.3f;
    for (int l = 0; l < NL; l++) {
        struct kv_cache *u = NULL;
        CHECK(kv_cache_new(spec[l].tier, spec[l].rope, NL, R, DR, CAP, &u, &err) == 0, "%s", err.msg);
        if (!u) continue;
        fill(u, CAP);
        token += kv_cache_row_bytes(u, l);
        CHECK(kv_cache_row_bytes(c, l) == kv_cache_row_bytes(u, l), "layer %d row bytes %zu vs %zu", l,
              kv_cache_row_bytes(c, l), kv_cache_row_bytes(u, l));
        CHECK(!memcmp(kv_cache_row(c, l, 0), kv_cache_row(u, l, 0), (size_t)CAP * kv_cache_row_bytes(u, l)),
              "layer %d rows differ from the uniform %s cache", l, kv_tier_name(spec[l].tier));
        CHECK(kv_layer_same_layout(&c->layer[l], &u->layer[l]), "layer %d layout", l);
        CHECK(kv_attend(c, l, CAP, H, q, qr, 0.1f, o1, s, &err) == 0 && kv_attend(u, l, CAP, H, q, qr, 0.1f, o2, s, &err) == 0,
              "%s", err.msg);
        CHECK(!memcmp(o1, o2, sizeof o1), "layer %d attention differs from the uniform cache's", l);
        int32_t pos[3] = { 7, 2, 30 };
        CHECK(kv_attend_select(c, l, pos, 3, H, q, qr, 0.1f, o1, s, &err) == 0 &&
                  kv_attend_select(u, l, pos, 3, H, q, qr, 0.1f, o2, s, &err) == 0 && !memcmp(o1, o2, sizeof o1),
              "layer %d selected attention", l);
        kv_cache_free(u);
    }
    CHECK(kv_cache_token_bytes(c) == token, "token bytes %zu, the layers' sum %zu", kv_cache_token_bytes(c), token);
    /* layer 2's block starts right after layers 0 and 1 */
    CHECK(kv_cache_row(c, 2, 0) == c->data + (size_t)CAP * (kv_cache_row_bytes(c, 0) + kv_cache_row_bytes(c, 1)),
          "layer-major blocks");
    CHECK(kv_cache_part(c, KV_PART_LATENT) == NULL, "no cache-wide part in a mixed cache");
    kv_scratch_free(s);
    kv_cache_free(c);
}

/* A uniform spec is the plain constructor, address for address. */
static void test_uniform_spec_is_plain(void)
{
    struct kv_layer_spec spec[NL];
    for (int l = 0; l < NL; l++) spec[l] = (struct kv_layer_spec){ .tier = KV_TIER_TQ3, .rope = KV_ROPE_DEFAULT };
    struct kv_cache *a = NULL, *b = NULL;
    CHECK(kv_cache_new_layers(spec, NL, R, DR, CAP, &a, NULL) == 0 &&
              kv_cache_new(KV_TIER_TQ3, KV_ROPE_DEFAULT, NL, R, DR, CAP, &b, NULL) == 0, "new");
    if (!a || !b) return;
    CHECK(a->uniform && b->uniform, "uniform");
    size_t rb = kv_cache_row_bytes(b, 0);
    for (int l = 0; l < NL; l++)
        CHECK(kv_cache_row(a, l, 3) - a->data == (ptrdiff_t)(((size_t)l * CAP + 3) * rb), "layer %d offset", l);
    kv_cache_free(a);
    kv_cache_free(b);
}

/* Index keys in layers 1 and 3 only (layers that share another's selection
 * carry none): each layer's part list says so, reads and writes follow it. */
static void test_index_key_some_layers(void)
{
    struct kv_layer_spec spec[NL];
    for (int l = 0; l < NL; l++) spec[l] = (struct kv_layer_spec){ .tier = KV_TIER_INT8R, .rope = KV_ROPE_DEFAULT };
    spec[1].n_extra = spec[3].n_extra = 1;
    spec[1].extra[0] = spec[3].extra[0] = (struct kv_part_spec){ KV_PART_INDEX_KEY, 32, KV_TIER_FP8 };
    struct kv_cache *c = NULL;
    struct colibri_err err = { 0 };
    CHECK(kv_cache_new_layers(spec, NL, R, DR, CAP, &c, &err) == 0, "%s", err.msg);
    if (!c) return;
    CHECK(!c->uniform && kv_cache_part(c, KV_PART_INDEX_KEY) == NULL, "not uniform");
    CHECK(kv_cache_layer_part(c, 0, KV_PART_INDEX_KEY) == NULL && kv_cache_layer_part(c, 1, KV_PART_INDEX_KEY),
          "part lists per layer");
    CHECK(kv_cache_row_bytes(c, 1) == kv_cache_row_bytes(c, 0) + 32 + 4, "index key bytes");
    float k[32] = { 0 }, back[32];
    k[3] = 2.0f;
    CHECK(kv_cache_write_part(c, 3, 9, KV_PART_INDEX_KEY, k, &err) == 0, "%s", err.msg);
    CHECK(kv_cache_read_part(c, 3, 9, KV_PART_INDEX_KEY, back, &err) == 0 && back[3] == 2.0f, "round trip");
    CHECK(kv_cache_write_part(c, 2, 9, KV_PART_INDEX_KEY, k, &err) == COLIBRI_EINVAL && strstr(err.msg, "layer 2"),
          "layer without the part refused by layer: %s", err.msg);
    kv_cache_free(c);
}

static void test_parse(void)
{
    struct kv_layer_spec s[6];
    struct colibri_err err = { 0 };
    CHECK(kv_layout_parse("int8r@1:rope=f32", KV_ROPE_DEFAULT, 6, s, &err) == 0, "%s", err.msg);
    for (int l = 0; l < 6; l++)
        CHECK(s[l].tier == KV_TIER_INT8R && s[l].rope == (l == 1 ? KV_ROPE_F32 : KV_ROPE_INT8) && !s[l].n_extra,
              "int8r@1:rope=f32 layer %d: %d/%d", l, s[l].tier, s[l].rope);
    CHECK(kv_layout_parse("fp8@0-1:int8r@1:rope=f32", KV_ROPE_DEFAULT, 6, s, &err) == 0, "%s", err.msg);
    CHECK(s[0].tier == KV_TIER_INT8R && s[1].tier == KV_TIER_INT8R && s[2].tier == KV_TIER_FP8 &&
              s[0].rope == KV_ROPE_INT8 && s[1].rope == KV_ROPE_F32 && s[5].rope == KV_ROPE_INT8,
          "fp8@0-1:int8r@1:rope=f32");
    /* a layer's own tier sets its default RoPE; --kv-rope overrides the default */
    CHECK(kv_layout_parse("f32@2-3:fp8:rope=bf16@5:tq4", KV_ROPE_DEFAULT, 6, s, &err) == 0, "%s", err.msg);
    CHECK(s[0].rope == KV_ROPE_F32 && s[2].tier == KV_TIER_FP8 && s[3].rope == KV_ROPE_BF16 && s[5].rope == KV_ROPE_INT8,
          "defaults per layer tier");
    CHECK(kv_layout_parse("f32@5:tq4", KV_ROPE_BF16, 6, s, &err) == 0 && s[0].rope == KV_ROPE_BF16 &&
              s[5].rope == KV_ROPE_BF16, "--kv-rope applies to every layer without rope=");
    static const struct { const char *spec, *needle; } BAD[] = {
        { "int9", "unknown KV tier 'int9'" },
        { "int9@1:rope=f32", "unknown KV tier 'int9'" },
        { "int8r@6:rope=f32", "layer 6 is outside the model's layers 0-5" },
        { "int8r@2-9:fp8", "layer 9 is outside" },
        { "int8r@3-1:fp8", "range is empty" },
        { "int8r@1:rope=f16", "unknown RoPE precision 'f16'" },
        { "int8r@1:int7", "unknown KV tier 'int7'" },
        { "int8r@1", "is not LAYERS:SETTING" },
        { "int8r@1:", "is not LAYERS:SETTING" },
        { "int8r@:fp8", "is not LAYERS:SETTING" },
        { "int8r@x:fp8", "is not LAYERS:SETTING" },
        { "int8r@", "is not LAYERS:SETTING" },
        { "int8r@0-2:fp8@1:tq4", "layer 1's latent tier is set twice (@0-2:fp8 and @1:tq4)" },
        { "int8r@1:rope=f32@0-5:rope=bf16", "layer 1's RoPE precision is set twice" },
        { "int8r@1:fp8:tq4", "sets the latent tier twice" },
        { "int8r@1::fp8", "empty or overlong setting" },
        { "int8r@1:fp8:", "ends in ':'" },
    };
    for (size_t i = 0; i < sizeof BAD / sizeof BAD[0]; i++) {
        err.msg[0] = 0;
        int rc = kv_layout_parse(BAD[i].spec, KV_ROPE_DEFAULT, 6, s, &err);
        CHECK(rc == COLIBRI_EINVAL && strstr(err.msg, BAD[i].needle), "'%s': %d '%s'", BAD[i].spec, rc, err.msg);
    }
    /* entries that touch different parts of one layer are no overlap */
    CHECK(kv_layout_parse("fp8@0-2:int8r@1:rope=f32@1:rope=f32", KV_ROPE_DEFAULT, 6, s, &err) == COLIBRI_EINVAL,
          "the same setting twice is still an overlap");
}

/* kv_layout_options names each layout so that it parses back to itself. */
static void test_options_round_trip(void)
{
    static const struct { const char *spec, *rope, *want; } CASES[] = {
        { "int8r", NULL, "--kv int8r" },
        { "int8r@1:rope=f32", NULL, "--kv int8r@1:rope=f32" },
        { "fp8@0-1:int8r@1:rope=f32", NULL, "--kv fp8@0:int8r@1:int8r:rope=f32" },
        { "tq4", "bf16", "--kv tq4 --kv-rope bf16" },
        { "f32@3:fp8", NULL, "--kv f32@3:fp8" },
        { "f32@3-5:fp8", "int8", NULL },
        { "bf16@0-3:f32", NULL, NULL },
    };
    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) {
        struct kv_layer_spec s[6], back[6];
        enum kv_tier t[6];
        enum kv_rope_prec r[6];
        enum kv_rope_prec g = CASES[i].rope ? (enum kv_rope_prec)kv_rope_from_name(CASES[i].rope) : KV_ROPE_DEFAULT;
        CHECK(kv_layout_parse(CASES[i].spec, g, 6, s, NULL) == 0, "%s", CASES[i].spec);
        for (int l = 0; l < 6; l++) t[l] = s[l].tier, r[l] = s[l].rope;
        char name[128], kv[96], kr[16] = "";
        kv_layout_options(t, r, 6, name, sizeof name);
        if (CASES[i].want) CHECK(!strcmp(name, CASES[i].want), "%s: '%s'", CASES[i].spec, name);
        CHECK(sscanf(name, "--kv %95s --kv-rope %15s", kv, kr) >= 1, "%s", name);
        enum kv_rope_prec g2 = kr[0] ? (enum kv_rope_prec)kv_rope_from_name(kr) : KV_ROPE_DEFAULT;
        CHECK(kv_layout_parse(kv, g2, 6, back, NULL) == 0, "'%s' does not parse", name);
        for (int l = 0; l < 6; l++)
            CHECK(back[l].tier == s[l].tier && back[l].rope == s[l].rope, "%s -> '%s': layer %d", CASES[i].spec, name, l);
    }
    char small[8];
    enum kv_tier t[2] = { KV_TIER_TQ4, KV_TIER_F32 };
    enum kv_rope_prec r[2] = { KV_ROPE_INT8, KV_ROPE_F32 };
    size_t len = kv_layout_options(t, r, 2, small, sizeof small);
    CHECK(len == strlen("--kv tq4@1:f32") && strlen(small) == sizeof small - 1, "cut: %zu '%s'", len, small);
}

int main(void)
{
    RUN_TEST(test_mixed_layers_match_uniform);
    RUN_TEST(test_uniform_spec_is_plain);
    RUN_TEST(test_index_key_some_layers);
    RUN_TEST(test_parse);
    RUN_TEST(test_options_round_trip);
    return CHECK_SUMMARY();
}
