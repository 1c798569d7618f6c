/* test_dsa.c - DeepSeek Sparse Attention: the index scores over cached keys
 * against the plain reference loop, the top-k selection against a sort, the
 * indexer's two RoPE pairings against each other, sparse attention through
 * the door reading only the selected rows (unselected rows poisoned, every
 * tier and integer mode), and the fp8 index-key tier measured against the f32
 * one on the HF fixtures. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "colibri.h"
#include "kv/attend.h"
#include "kv/cache.h"
#include "io/file.h"
#include "kv/index.h"
#include "kv/persist.h"
#include "model/forward.h"
#include "model/indexer.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static double urand(void)
{
    rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
    return ((rng >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}
static float gauss(void) { return (float)(sqrt(-2.0 * log(urand())) * cos(6.283185307179586 * urand())); }

/* A 2-layer cache (latent tier `tier`) whose rows carry an index key of dI
 * values in `key_tier`; layer 1 filled with T random rows and keys. */
static struct kv_cache *keyed_cache(enum kv_tier tier, enum kv_tier key_tier, int r, int dr, int dI, int T)
{
    struct kv_cache *c = NULL;
    struct colibri_err err = {0};
    struct kv_part_spec key = { KV_PART_INDEX_KEY, dI, key_tier };
    if (kv_cache_new_parts(tier, KV_ROPE_DEFAULT, 2, r, dr, &key, 1, T, &c, &err)) {
        CHECK(0, "kv_cache_new_parts %s: %s", kv_tier_name(tier), err.msg);
        return NULL;
    }
    float *lat = malloc(sizeof(float) * r), *pe = malloc(sizeof(float) * (dr + 1)), *k = malloc(sizeof(float) * dI);
    for (int l = 0; l < 2; l++)
        for (int p = 0; p < T; p++) {
            for (int i = 0; i < r; i++) lat[i] = gauss();
            for (int i = 0; i < dr; i++) pe[i] = gauss();
            for (int i = 0; i < dI; i++) k[i] = gauss();
            CHECK(kv_cache_write(c, l, p, lat, pe, &err) == 0 &&
                      kv_cache_write_part(c, l, p, KV_PART_INDEX_KEY, k, &err) == 0, "%s", err.msg);
        }
    free(lat); free(pe); free(k);
    return c;
}

/* kv_index_scores equals the reference loop on the keys as the cache
 * decodes them (f32 keys in place, fp8 keys decoded in rows, rotated int8r
 * keys unrotated; latent tiers that move the key to an unaligned offset), and
 * does not depend on the thread count. */
static void test_scores(void)
{
    const enum kv_tier lat_tiers[] = { KV_TIER_F32, KV_TIER_FP8, KV_TIER_TQ3, KV_TIER_POLAR3 };
    const enum kv_tier key_tiers[] = { KV_TIER_F32, KV_TIER_FP8, KV_TIER_INT8R };
    const int T = 300, nI = 8, dI = 64, r = 64, dr = 16;
    float q[8 * 64], w[8], *keys = malloc(sizeof(float) * T * dI), *ref = malloc(sizeof(float) * T);
    float *a = malloc(sizeof(float) * T), *b = malloc(sizeof(float) * T);
    for (int i = 0; i < nI * dI; i++) q[i] = gauss();
    for (int h = 0; h < nI; h++) w[h] = gauss();
    struct colibri_err err = {0};
    for (int li = 0; li < 4; li++)
        for (int ki = 0; ki < 3; ki++) {
            struct kv_cache *c = keyed_cache(lat_tiers[li], key_tiers[ki], r, dr, dI, T);
            if (!c) continue;
            for (int t = 0; t < T; t++) kv_cache_read_part(c, 1, t, KV_PART_INDEX_KEY, keys + (size_t)t * dI, &err);
            kv_index_scores_ref(T, nI, dI, keys, q, w, 0.125f, ref);
            CHECK(kv_index_scores(c, 1, T, nI, q, w, 0.125f, a, 1, NULL, &err) == 0, "%s", err.msg);
            CHECK(kv_index_scores(c, 1, T, nI, q, w, 0.125f, b, 4, NULL, &err) == 0, "%s", err.msg);
            CHECK(!memcmp(a, b, sizeof(float) * T), "latent %s, keys %s: 1 and 4 threads differ",
                  kv_tier_name(lat_tiers[li]), kv_tier_name(key_tiers[ki]));
            double worst = 0, scale = 0;
            int zeros = 0;
            for (int t = 0; t < T; t++) {
                worst = fmax(worst, fabs((double)a[t] - ref[t]));
                scale = fmax(scale, fabs(ref[t]));
                zeros += ref[t] == 0.0f;
            }
            CHECK(worst <= 1e-5 * scale, "latent %s, keys %s: |scores - ref| %g (scale %g)", kv_tier_name(lat_tiers[li]),
                  kv_tier_name(key_tiers[ki]), worst, scale);
            CHECK(zeros < T / 2, "relu leaves some scores non-zero (%d zeros)", zeros);
            kv_cache_free(c);
        }
    struct kv_cache *plain = NULL;
    CHECK(kv_cache_new(KV_TIER_F32, KV_ROPE_DEFAULT, 1, r, dr, 8, &plain, &err) == 0, "%s", err.msg);
    if (plain)
        CHECK(kv_index_scores(plain, 0, 4, nI, q, w, 1.0f, a, 1, NULL, &err) == COLIBRI_EINVAL && strstr(err.msg, "index-key"),
              "a cache without index keys is refused: %s", err.msg);
    kv_cache_free(plain);
    free(keys); free(ref); free(a); free(b);
}

/* Top-k against a full sort by (score descending, position ascending), with
 * many ties; k >= T selects everything; NaN is refused by position. */
static void test_topk(void)
{
    struct kv_index_sel s;
    struct colibri_err err = {0};
    CHECK(kv_index_sel_init(&s, 1000, &err) == 0, "%s", err.msg);
    float *sc = malloc(sizeof(float) * 1000);
    int32_t *pos = malloc(sizeof(int32_t) * 1000), *want = malloc(sizeof(int32_t) * 1000);
    unsigned char *in = malloc(1000);
    const int Ts[] = { 1, 2, 17, 300, 1000 }, ks[] = { 1, 5, 16, 299, 2048 };
    for (int ti = 0; ti < 5; ti++)
        for (int kk = 0; kk < 5; kk++) {
            int T = Ts[ti], k = ks[kk];
            for (int t = 0; t < T; t++) sc[t] = (float)floor(gauss() * 4.0) * (urand() < 0.2 ? -1.0f : 1.0f);
            /* reference: repeatedly take the best remaining (ties: lower position) */
            memset(in, 0, 1000);
            int n = k < T ? k : T;
            for (int i = 0; i < n; i++) {
                int b = -1;
                for (int t = 0; t < T; t++)
                    if (!in[t] && (b < 0 || sc[t] > sc[b])) b = t;
                in[b] = 1;
            }
            int m = 0;
            for (int t = 0; t < T; t++) if (in[t]) want[m++] = t;
            int got = kv_index_topk(&s, sc, T, k, pos, &err);
            CHECK(got == n && !memcmp(pos, want, sizeof(int32_t) * (size_t)n), "T %d k %d: got %d, want %d", T, k,
                  got, n);
        }
    sc[7] = NAN;
    CHECK(kv_index_topk(&s, sc, 20, 4, pos, &err) == COLIBRI_EINVAL && strstr(err.msg, "position 7"), "NaN: %s",
          err.msg);
    CHECK(kv_index_topk(&s, sc, 1001, 4, pos, &err) == COLIBRI_EINVAL, "more rows than room");
    kv_index_sel_free(&s);
    free(sc); free(pos); free(want); free(in);
}

/* The half-split pairing (V3.2) is the interleaved one (GLM-5) on the values
 * laid out as pairs (x[i], x[i + dr/2]). */
static void test_rope_pairings(void)
{
    struct model_config c;
    memset(&c, 0, sizeof c);
    const int dr = 16;
    for (int i = 0; i < dr / 2; i++) c.inv_freq[i] = powf(10000.0f, -2.0f * i / dr);
    c.rope_attention_factor = 1.0f;
    float x[16], y[16], back[16];
    for (int pos = 0; pos < 300; pos += 37) {
        for (int i = 0; i < dr; i++) x[i] = gauss();
        for (int i = 0; i < dr / 2; i++) {
            y[2 * i] = x[i];
            y[2 * i + 1] = x[i + dr / 2];
        }
        c.indexer_rope_interleaved = 0;
        model_indexer_rope(x, dr, pos, &c);
        c.indexer_rope_interleaved = 1;
        model_indexer_rope(y, dr, pos, &c);
        for (int i = 0; i < dr / 2; i++) {
            back[i] = y[2 * i];
            back[i + dr / 2] = y[2 * i + 1];
        }
        CHECK(!memcmp(x, back, sizeof x), "pos %d: half-split differs from interleaved on paired values", pos);
    }
}

/* Sparse attention reads the selected rows only: after every other row of the
 * layer is overwritten with 0xff bytes (NaN in f32, garbage codes and scales
 * elsewhere), kv_attend_select gives the same bits, for every tier and
 * integer mode; poisoning one selected row does change the result. */
static void test_unselected_rows_unread(void)
{
    const int T = 200, H = 16, r = 64, dr = 16, n = 37;
    float *q = malloc(sizeof(float) * H * r), *qr = malloc(sizeof(float) * H * dr);
    float *a = malloc(sizeof(float) * H * r), *b = malloc(sizeof(float) * H * r);
    for (int i = 0; i < H * r; i++) q[i] = 0.1f * gauss();
    for (int i = 0; i < H * dr; i++) qr[i] = 0.1f * gauss();
    int32_t sel[37];
    unsigned char chosen[200] = {0};
    for (int i = 0; i < n; i++) {
        sel[i] = (int32_t)((i * 53 + 11) % T);
        chosen[sel[i]] = 1;
    }
    struct colibri_err err = {0};
    for (int tier = 0; tier < KV_TIER_COUNT; tier++)
        for (int mode = KV_INT8_OFF; mode <= KV_INT8_QUERY16; mode++) {
            struct kv_cache *c = keyed_cache((enum kv_tier)tier, KV_TIER_F32, r, dr, 32, T);
            struct kv_scratch *s = NULL;
            if (!c || kv_scratch_new(2, &s, &err)) {
                kv_cache_free(c);
                continue;
            }
            kv_scratch_set_int8(s, mode);
            if (mode && !kv_attend_int8_applies(c)) {
                kv_scratch_free(s);
                kv_cache_free(c);
                continue;
            }
            CHECK(kv_attend_select(c, 1, sel, n, H, q, qr, 0.08f, a, s, &err) == 0, "%s", err.msg);
            for (int t = 0; t < T; t++)
                if (!chosen[t]) memset(kv_cache_row(c, 1, t), 0xff, c->layer[1].row_bytes);
            CHECK(kv_attend_select(c, 1, sel, n, H, q, qr, 0.08f, b, s, &err) == 0, "%s", err.msg);
            CHECK(!memcmp(a, b, sizeof(float) * H * r), "%s int8 mode %d: an unselected row was read",
                  kv_tier_name((enum kv_tier)tier), mode);
            memset(kv_cache_row(c, 1, sel[5]), 0xff, c->layer[1].lat_bytes);
            CHECK(kv_attend_select(c, 1, sel, n, H, q, qr, 0.08f, b, s, &err) == 0, "%s", err.msg);
            CHECK(memcmp(a, b, sizeof(float) * H * r) != 0, "%s int8 mode %d: a poisoned selected row changed nothing",
                  kv_tier_name((enum kv_tier)tier), mode);
            kv_scratch_free(s);
            kv_cache_free(c);
        }
    free(q); free(qr); free(a); free(b);
}

/* A DSA model's decode reads no cache row outside the selection: two states
 * prefill the same 40 tokens; the first decodes a token and keeps its last
 * layer's selection (16 of 41 positions); in the second, every other row of
 * that layer has its latent and RoPE bytes overwritten with 0xff (NaN in f32)
 * before decoding the same token: the logits have the same bits. Poisoning a
 * selected row instead changes them. */
static void test_decode_reads_selected_rows(void)
{
    struct model m;
    struct colibri_err err = {0};
    if (model_load("tests/oracle/deepseek_v32_tiny", NULL, &m, &err)) {
        CHECK(0, "%s", err.msg);
        return;
    }
    const int N = 40, V = m.cfg.vocab_size, L = m.cfg.num_hidden_layers - 1;
    int32_t tok[41];
    for (int i = 0; i <= N; i++) tok[i] = (int32_t)((i * 131 + 7) % V);
    float *a = malloc(sizeof(float) * V), *b = malloc(sizeof(float) * V);
    struct fwd_state st[3];
    struct compute_ctx cc = { .n_threads = 2 };
    int ok = 1;
    for (int k = 0; k < 3; k++) {
        ok &= fwd_state_init(&st[k], &m, N + 1, 0, KV_TIER_F32, KV_ROPE_DEFAULT, KV_INT8_OFF, &cc, &err) == 0;
        struct fwd_out none = {0};
        ok &= ok && model_forward(&m, &st[k], tok, N, 0, FWD_EXPANDED, &none, &err) == 0;
    }
    CHECK(ok, "%s", err.msg);
    struct fwd_out oa = { .logits = a }, ob = { .logits = b };
    if (ok && model_forward(&m, &st[0], tok + N, 1, N, FWD_ABSORBED, &oa, &err) == 0) {
        const struct indexer_bufs *ib = st[0].bufs.dsa;
        unsigned char chosen[41] = {0};
        for (int j = 0; j < ib->n_sel[0]; j++) chosen[ib->sel[j]] = 1;
        CHECK(ib->n_sel[0] == m.cfg.index_topk && ib->n_sel[0] < N + 1, "selected %d of %d", ib->n_sel[0], N + 1);
        size_t poison = st[1].kv->layer[L].lat_bytes + st[1].kv->layer[L].rope_bytes;   /* not the index key */
        int first_chosen = -1;
        for (int t = 0; t <= N; t++) {
            if (!chosen[t]) memset(kv_cache_row(st[1].kv, L, t), 0xff, poison);
            else if (first_chosen < 0 && t < N) first_chosen = t;
        }
        CHECK(model_forward(&m, &st[1], tok + N, 1, N, FWD_ABSORBED, &ob, &err) == 0, "%s", err.msg);
        CHECK(!memcmp(a, b, sizeof(float) * V), "an unselected row of layer %d was read", L);
        memset(kv_cache_row(st[2].kv, L, first_chosen), 0xff, poison);
        CHECK(model_forward(&m, &st[2], tok + N, 1, N, FWD_ABSORBED, &ob, &err) == 0, "%s", err.msg);
        CHECK(memcmp(a, b, sizeof(float) * V) != 0, "poisoning selected row %d changed nothing", first_chosen);
    } else {
        CHECK(0, "decode: %s", err.msg);
    }
    for (int k = 0; k < 3; k++) fwd_state_free(&st[k]);
    free(a);
    free(b);
    model_free(&m);
}

/* KV files hold the index keys: a session that restores a DSA model's 30
 * cached positions from a file (f32 keys, and fp8 keys) decodes the next
 * token to the same logit bits as one that prefilled them; a file whose rows
 * have no index key (same model fingerprint, written from a cache without
 * them) is refused naming the index key. */
static void test_kv_file_index_keys(void)
{
    const char *dirs[] = { "tests/oracle/deepseek_v32_tiny", "tests/oracle/glm5_tiny" };
    const char *key_tiers[] = { NULL, "fp8" };
    char path[64], plain_path[64];
    snprintf(path, sizeof path, "/tmp/colibri-test-dsa-%d.ckv", (int)getpid());
    snprintf(plain_path, sizeof plain_path, "/tmp/colibri-test-dsa-plain-%d.ckv", (int)getpid());
    for (int d = 0; d < 2; d++) {
        struct colibri_err err = {0};
        colibri_model *m = NULL;
        struct colibri_model_opts mo = {0};
        if (colibri_model_load(dirs[d], &mo, &m, &err)) {
            CHECK(0, "%s: %s", dirs[d], err.msg);
            continue;
        }
        const int N = 30, V = colibri_model_vocab(m);
        int32_t tok[31];
        for (int i = 0; i <= N; i++) tok[i] = (int32_t)((i * 977 + 13) % V);
        float *a = malloc(sizeof(float) * V), *b = malloc(sizeof(float) * V);
        for (int k = 0; k < 2; k++) {
            struct colibri_session_opts so = { .n_ctx = N + 1, .kv_index = key_tiers[k] };
            colibri_session *s = NULL;
            colibri_kv_file *f = NULL;
            unlink(path);
            int rc = colibri_session_new(m, &so, &s, &err);
            rc = rc ? rc : colibri_kv_file_open(s, path, &f, NULL, &err);
            rc = rc ? rc : colibri_session_prefill(s, tok, N, NULL, 0, &err);
            rc = rc ? rc : colibri_kv_file_save(f, &err);
            rc = rc ? rc : colibri_session_decode(s, tok[N], a, &err);
            colibri_kv_file_close(f);
            colibri_session_free(s);
            CHECK(rc == 0, "%s write: %s", dirs[d], err.msg);
            struct colibri_kv_info info;
            s = NULL;
            f = NULL;
            rc = colibri_session_new(m, &so, &s, &err);
            rc = rc ? rc : colibri_kv_file_open(s, path, &f, &info, &err);
            CHECK(rc || info.restored == N, "restored %d of %d", info.restored, N);
            rc = rc ? rc : colibri_session_decode(s, tok[N], b, &err);
            CHECK(rc == 0 && !memcmp(a, b, sizeof(float) * V), "%s keys %s: restored decode differs (%s)", dirs[d],
                  key_tiers[k] ? key_tiers[k] : "f32", err.msg);
            colibri_kv_file_close(f);
            colibri_session_free(s);
        }
        /* the same model's file, rows without index keys */
        struct kv_file_verify v;
        struct kv_cache *plain = NULL;
        struct kv_file *pf = NULL;
        struct kv_file_report rep;
        struct kv_file_hdr want;
        int32_t ptok[31] = {0};
        unlink(plain_path);
        int rc = kv_file_verify(io_fs_posix(), path, &v, &err);
        rc = rc ? rc : kv_cache_new(KV_TIER_F32, KV_ROPE_DEFAULT, v.hdr.n_layers, v.hdr.r, v.hdr.dr, N + 1, &plain, &err);
        rc = rc ? rc : kv_file_hdr_for(plain, v.hdr.model, v.hdr.weights, 7, &want, &err);
        rc = rc ? rc : kv_file_open(io_fs_posix(), plain_path, &want, plain, ptok, N + 1, &rep, &pf, &err);
        rc = rc ? rc : kv_file_save(pf, plain, ptok, 4, &err);
        kv_file_close(pf);
        kv_cache_free(plain);
        CHECK(rc == 0, "plain file: %s", err.msg);
        colibri_session *s = NULL;
        colibri_kv_file *f = NULL;
        struct colibri_session_opts so = { .n_ctx = N + 1 };
        rc = colibri_session_new(m, &so, &s, &err);
        CHECK(rc == 0, "%s", err.msg);
        rc = rc ? rc : colibri_kv_file_open(s, plain_path, &f, NULL, &err);
        CHECK(rc != 0 && strstr(err.msg, "nothing there, this model's index_key"),
              "%s: a file without index keys: rc %d, %s", dirs[d], rc, err.msg);
        colibri_kv_file_close(f);
        colibri_session_free(s);
        free(a);
        free(b);
        colibri_model_free(m);
    }
    unlink(path);
    unlink(plain_path);
}

/* The selection with fp8 index keys against f32 keys on Gaussian keys,
 * queries and head weights (T 8192, top 512, 64 heads x 128, the shipped
 * widths): the mean overlap is printed; a broken fp8 path would overlap by
 * about k/T = 6%. */
static void test_fp8_selection_overlap(void)
{
    const int T = 8192, nI = 64, dI = 128, K = 512, Q = 8;
    struct kv_cache *c[2] = {0};
    struct colibri_err err = {0};
    for (int v = 0; v < 2; v++) {
        struct kv_part_spec ks = { KV_PART_INDEX_KEY, dI, v ? KV_TIER_FP8 : KV_TIER_F32 };
        CHECK(kv_cache_new_parts(KV_TIER_F32, KV_ROPE_DEFAULT, 1, 16, 0, &ks, 1, T, &c[v], &err) == 0, "%s", err.msg);
    }
    float *k = malloc(sizeof(float) * dI), *q = malloc(sizeof(float) * nI * dI), w[64];
    float *s0 = malloc(sizeof(float) * T), *s1 = malloc(sizeof(float) * T);
    int32_t *p0 = malloc(sizeof(int32_t) * K), *p1 = malloc(sizeof(int32_t) * K);
    struct kv_index_sel sel;
    CHECK(kv_index_sel_init(&sel, T, &err) == 0, "%s", err.msg);
    double overlap = 0;
    for (int t = 0; c[0] && c[1] && t < T; t++) {
        for (int i = 0; i < dI; i++) k[i] = gauss();
        for (int v = 0; v < 2; v++) kv_cache_write_part(c[v], 0, t, KV_PART_INDEX_KEY, k, &err);
    }
    for (int qi = 0; c[0] && c[1] && qi < Q; qi++) {
        for (int i = 0; i < nI * dI; i++) q[i] = gauss();
        for (int h = 0; h < nI; h++) w[h] = gauss();
        CHECK(kv_index_scores(c[0], 0, T, nI, q, w, 1.0f / sqrtf((float)dI), s0, 2, NULL, &err) == 0 &&
                  kv_index_scores(c[1], 0, T, nI, q, w, 1.0f / sqrtf((float)dI), s1, 2, NULL, &err) == 0, "%s", err.msg);
        int n0 = kv_index_topk(&sel, s0, T, K, p0, &err), n1 = kv_index_topk(&sel, s1, T, K, p1, &err), same = 0;
        for (int a = 0, b = 0; a < n0 && b < n1;) {
            if (p0[a] == p1[b]) same++, a++, b++;
            else if (p0[a] < p1[b]) a++;
            else b++;
        }
        overlap += (double)same / K / Q;
    }
    printf("  fp8 vs f32 index keys, Gaussian, T %d top %d: mean selection overlap %.4f\n", T, K, overlap);
    CHECK(overlap > 0.9, "fp8 keys select %.3f of the f32 keys' positions", overlap);
    kv_index_sel_free(&sel);
    kv_cache_free(c[0]);
    kv_cache_free(c[1]);
    free(k); free(q); free(s0); free(s1); free(p0); free(p1);
}

/* The fp8 index-key tier (one e4m3 per value, an f32 scale per row: 4 + dI
 * bytes) against the exact f32 keys on the DSA fixtures, prefill and decode:
 * top-1 agreement and mean KL(f32 || fp8) over every position. Measured and
 * printed; the check is only that both run and produce finite logits. */
static void test_fp8_index_keys(void)
{
    const char *dirs[] = { "tests/oracle/deepseek_v32_tiny", "tests/oracle/glm5_tiny" };
    for (int d = 0; d < 2; d++) {
        struct model m;
        struct colibri_err err = {0};
        if (model_load(dirs[d], NULL, &m, &err)) {
            CHECK(0, "%s: %s", dirs[d], err.msg);
            continue;
        }
        const int N = 90, V = m.cfg.vocab_size;
        int32_t tok[90];
        for (int i = 0; i < N; i++) tok[i] = (int32_t)((i * 7919 + 101) % V);   /* fixed: the printed numbers stay */
        float *lg[2] = { malloc(sizeof(float) * N * V), malloc(sizeof(float) * N * V) };
        size_t key_bytes[2] = {0};
        for (int decode = 0; decode < 2; decode++) {
            for (int k = 0; k < 2; k++) {
                struct fwd_state st;
                struct compute_ctx cc = { .n_threads = 2 };
                int rc = fwd_state_init_index(&st, &m, N, 0, KV_TIER_F32, KV_ROPE_DEFAULT, KV_INT8_OFF,
                                              k ? KV_TIER_FP8 : KV_TIER_F32, &cc, &err);
                CHECK(rc == 0, "%s", err.msg);
                if (rc) continue;
                key_bytes[k] = kv_cache_layer_part(st.kv, 0, KV_PART_INDEX_KEY)->bytes;
                struct fwd_out out = { .logits = lg[k], .all_logits = 1 };
                if (!decode) {
                    rc = model_forward(&m, &st, tok, N, 0, FWD_EXPANDED, &out, &err);
                } else {
                    for (int p = 0; p < N && !rc; p++) {
                        out.logits = lg[k] + (size_t)p * V;
                        rc = model_forward(&m, &st, tok + p, 1, p, FWD_ABSORBED, &out, &err);
                    }
                }
                CHECK(rc == 0, "%s", err.msg);
                fwd_state_free(&st);
            }
            int agree = 0, finite = 1;
            double kl = 0;
            for (int p = 0; p < N; p++) {
                const float *x = lg[0] + (size_t)p * V, *y = lg[1] + (size_t)p * V;
                int ax = 0, ay = 0;
                double mx = -INFINITY, my = -INFINITY, sx = 0, sy = 0, e = 0;
                for (int v = 0; v < V; v++) {
                    if (!isfinite(y[v])) finite = 0;
                    if (x[v] > x[ax]) ax = v;
                    if (y[v] > y[ay]) ay = v;
                    mx = fmax(mx, x[v]);
                    my = fmax(my, y[v]);
                }
                agree += ax == ay;
                for (int v = 0; v < V; v++) { sx += exp(x[v] - mx); sy += exp(y[v] - my); }
                for (int v = 0; v < V; v++) {
                    double px = exp(x[v] - mx) / sx;
                    e += px * ((x[v] - mx - log(sx)) - (y[v] - my - log(sy)));
                }
                kl += e / N;
            }
            CHECK(finite, "%s: fp8 index keys give non-finite logits", dirs[d]);
            CHECK(key_bytes[0] == 4 * (size_t)m.cfg.index_head_dim && key_bytes[1] == 4 + (size_t)m.cfg.index_head_dim,
                  "index key bytes %zu (f32) %zu (fp8)", key_bytes[0], key_bytes[1]);
            printf("  %s %s: fp8 index keys vs f32: top-1 agreement %d/%d, mean KL %.3g nats (key %zu B vs %zu B)\n",
                   dirs[d] + 13, decode ? "decode" : "prefill", agree, N, kl, key_bytes[1], key_bytes[0]);
        }
        free(lg[0]);
        free(lg[1]);
        model_free(&m);
    }
}

int main(void)
{
    RUN_TEST(test_scores);
    RUN_TEST(test_topk);
    RUN_TEST(test_rope_pairings);
    RUN_TEST(test_unselected_rows_unread);
    RUN_TEST(test_decode_reads_selected_rows);
    RUN_TEST(test_kv_file_index_keys);
    RUN_TEST(test_fp8_selection_overlap);
    RUN_TEST(test_fp8_index_keys);
    return CHECK_SUMMARY();
}
