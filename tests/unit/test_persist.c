/* KV files (kv/persist.h): round trips in every tier, appends and
 * divergence, the golden file, truncation at every offset of the last two
 * records, bit flips in header, slots and records, every header field
 * changed, locking, files that are not KV files. */
#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "persist_fixture.h"

#define XXH_STATIC_LINKING_ONLY
#include <xxhash.h>

static const char *GOLDEN = "tests/kv/golden_f32.ckv";

/* Opens path for a cache of tier t; returns the rc, fills rep/cache/tokens. */
static int open_into(const char *path, struct kv_cache *c, int32_t *tok, struct kv_file_report *rep,
                     struct kv_file **f, struct colibri_err *err)
{
    struct kv_file_hdr want = fx_want(c);
    return kv_file_open(io_fs_posix(), path, &want, c, tok, c->capacity, rep, f, err);
}

static void test_roundtrip_every_tier(void)
{
    for (int t = 0; t < KV_TIER_COUNT; t++) {
        const char *path = fx_path("rt.ckv");
        fx_make_file(path, (enum kv_tier)t, 7, 1);
        struct kv_cache *c = fx_cache((enum kv_tier)t, 64);
        int32_t tok[64];
        struct kv_file_report rep;
        struct kv_file *f = NULL;
        struct colibri_err err = { 0 };
        int rc = open_into(path, c, tok, &rep, &f, &err);
        CHECK(rc == 0, "%s: %s", kv_tier_name(t), err.msg);
        CHECK(rep.restored == 7 && rep.kept == 7 && rep.published == 7 && rep.first_bad == -1 && !rep.created &&
                  !rep.upgraded,
              "%s: restored %llu kept %llu", kv_tier_name(t), (unsigned long long)rep.restored,
              (unsigned long long)rep.kept);
        CHECK(fx_cache_is(c, tok, 7, 1), "%s: rows differ after a round trip", kv_tier_name(t));
        size_t n;
        uint8_t *b = fx_read(path, &n);
        CHECK(n == KV_FILE_RECORDS + 7 * (KV_FILE_REC_EXTRA + FX_LAYERS * c->layer[0].row_bytes), "%s: %zu bytes",
              kv_tier_name(t), n);
        free(b);
        kv_file_close(f);
        kv_cache_free(c);
    }
}

/* Appending keeps the records already on disk byte for byte; divergence
 * shrinks the count and rewrites from there; truncating the cache shrinks. */
static void test_append_diverge_shrink(void)
{
    const char *path = fx_path("app.ckv");
    unlink(path);
    struct kv_cache *c = fx_cache(KV_TIER_TQ4, 64);
    int32_t tok[64];
    struct kv_file_report rep;
    struct kv_file *f = NULL;
    struct colibri_err err = { 0 };
    CHECK(open_into(path, c, tok, &rep, &f, &err) == 0 && rep.created, "%s", err.msg);
    fx_fill(c, tok, 0, 10, 1);
    CHECK(kv_file_save(f, c, tok, 6, &err) == 0, "%s", err.msg);
    size_t n1;
    uint8_t *b1 = fx_read(path, &n1);
    CHECK(kv_file_save(f, c, tok, 10, &err) == 0 && kv_file_count(f) == 10, "%s", err.msg);
    size_t n2;
    uint8_t *b2 = fx_read(path, &n2);
    size_t R = KV_FILE_REC_EXTRA + FX_LAYERS * c->layer[0].row_bytes;
    CHECK(n2 == KV_FILE_RECORDS + 10 * R, "%zu bytes", n2);
    CHECK(!memcmp(b1 + KV_FILE_RECORDS, b2 + KV_FILE_RECORDS, 6 * R), "records 0..5 changed by an append");
    /* Diverge at 4: positions 4.. get epoch 2. */
    fx_fill(c, tok, 4, 12, 2);
    CHECK(kv_file_save(f, c, tok, 12, &err) == 0 && kv_file_count(f) == 12, "%s", err.msg);
    size_t n3;
    uint8_t *b3 = fx_read(path, &n3);
    CHECK(!memcmp(b1 + KV_FILE_RECORDS, b3 + KV_FILE_RECORDS, 4 * R), "records 0..3 changed by a divergence");
    CHECK(memcmp(b2 + KV_FILE_RECORDS + 4 * R, b3 + KV_FILE_RECORDS + 4 * R, R), "record 4 not rewritten");
    /* Truncate the session to 5 and save: the file shrinks to 5 records. */
    CHECK(kv_file_save(f, c, tok, 5, &err) == 0 && kv_file_count(f) == 5, "%s", err.msg);
    kv_file_close(f);
    struct kv_file_verify v;
    CHECK(kv_file_verify(io_fs_posix(), path, &v, &err) == 0, "%s", err.msg);
    CHECK(v.published == 5 && v.valid == 5 && v.first_bad == -1 && v.file_bytes == KV_FILE_RECORDS + 5 * R,
          "published %llu valid %llu bytes %llu", (unsigned long long)v.published, (unsigned long long)v.valid,
          (unsigned long long)v.file_bytes);
    struct kv_cache *c2 = fx_cache(KV_TIER_TQ4, 64);
    int32_t tok2[64];
    CHECK(open_into(path, c2, tok2, &rep, &f, &err) == 0 && rep.restored == 5, "%s", err.msg);
    int ok = 1;
    for (int p = 0; p < 5; p++)
        for (int l = 0; l < FX_LAYERS; l++)
            ok &= !memcmp(kv_cache_row(c, l, p), kv_cache_row(c2, l, p), c->layer[l].row_bytes) && tok[p] == tok2[p];
    CHECK(ok, "restored rows differ from the saved cache");
    /* A restored file with a smaller max_tokens restores only that many. */
    kv_file_close(f);
    struct kv_file_hdr want = fx_want(c2);
    CHECK(kv_file_open(io_fs_posix(), path, &want, c2, tok2, 3, &rep, &f, &err) == 0 && rep.restored == 3 &&
              rep.kept == 5,
          "max_tokens 3: restored %llu kept %llu", (unsigned long long)rep.restored, (unsigned long long)rep.kept);
    kv_file_close(f);
    free(b1);
    free(b2);
    free(b3);
    kv_cache_free(c);
    kv_cache_free(c2);
}

/* The golden file: FORMATS.md made concrete. 3 positions of epoch 1, f32,
 * 2 layers, r 32, dr 16, salt FX_SALT. */
static void write_golden(const char *path)
{
    fx_make_file(path, KV_TIER_F32, 3, 1);
}

static void test_golden(void)
{
    const char *path = fx_path("golden.ckv");
    write_golden(path);
    size_t n, g;
    uint8_t *b = fx_read(path, &n), *gb = fx_read(GOLDEN, &g);
    CHECK(gb != NULL, "%s is missing (regenerate with test_persist --write-golden)", GOLDEN);
    CHECK(n == g && gb && !memcmp(b, gb, n), "the writer's output differs from %s (%zu vs %zu bytes)", GOLDEN, n, g);
    /* A few fields read back by hand, as FORMATS.md places them. */
    if (gb && g >= KV_FILE_RECORDS + 16) {
        CHECK(!memcmp(gb, "COLIBRKV", 8), "magic");
        CHECK(gb[8] == 1 && gb[9] == 0 && gb[10] == 1 && gb[11] == 0, "versions");
        CHECK(gb[88] == FX_LAYERS && gb[92] == FX_R && gb[96] == FX_DR, "dims");
        CHECK(!strcmp((const char *)gb + 104, "f32") && !strcmp((const char *)gb + 124, "f32"), "names");
        /* Created with slot A {seq 1, count 0}; the save of 3 published slot B {2, 3}. */
        CHECK(!memcmp(gb + 512, "KVCN", 4) && gb[512 + 8] == 1 && gb[512 + 16] == 0, "slot A");
        CHECK(!memcmp(gb + 1024, "KVCN", 4) && gb[1024 + 8] == 2 && gb[1024 + 16] == 3, "slot B");
        size_t R = 16 + FX_LAYERS * (FX_R + FX_DR) * 4;
        CHECK(g == KV_FILE_RECORDS + 3 * R, "size %zu", g);
        float x;
        memcpy(&x, gb + KV_FILE_RECORDS + R + 8, 4); /* record 1, layer 0, latent[0] */
        float want[FX_R];
        fx_values(1, 0, 1, want, FX_R);
        CHECK(x == want[0] && gb[KV_FILE_RECORDS + R] == 1, "record 1 layout");
        uint64_t sum = XXH64(gb + KV_FILE_RECORDS, R - 8, FX_SALT), got = 0;
        for (int i = 7; i >= 0; i--) got = got << 8 | gb[KV_FILE_RECORDS + R - 8 + i];
        CHECK(sum == got, "record 0 checksum");
    }
    /* And it reads back into the same rows. */
    struct kv_cache *c = fx_cache(KV_TIER_F32, 8);
    int32_t tok[8];
    struct kv_file_report rep;
    struct kv_file *f = NULL;
    struct colibri_err err = { 0 };
    const char *copy = fx_path("golden_copy.ckv");
    if (gb) fx_write(copy, gb, g);
    CHECK(open_into(copy, c, tok, &rep, &f, &err) == 0 && rep.restored == 3, "%s", err.msg);
    CHECK(fx_cache_is(c, tok, 3, 1), "golden rows");
    kv_file_close(f);
    kv_cache_free(c);
    free(b);
    free(gb);
}

/* A file with 6 records: truncated at every offset inside the last two.
 * Verify and open keep exactly the whole records before the cut. */
static void test_truncate_every_offset(void)
{
    const char *src = fx_path("trunc_src.ckv"), *path = fx_path("trunc.ckv");
    fx_make_file(src, KV_TIER_INT8R, 6, 1);
    size_t n;
    uint8_t *b = fx_read(src, &n);
    size_t R = (n - KV_FILE_RECORDS) / 6;
    int bad = 0;
    for (size_t off = KV_FILE_RECORDS + 4 * R; off <= n; off++) {
        uint64_t whole = (off - KV_FILE_RECORDS) / R;
        fx_write(path, b, off);
        struct kv_file_verify v;
        struct colibri_err err = { 0 };
        int rc = kv_file_verify(io_fs_posix(), path, &v, &err);
        if (rc || v.valid != whole || v.published != 6 || (whole < 6) != (v.first_bad == (int64_t)whole)) {
            if (bad++ < 5)
                CHECK(0, "verify at %zu: rc %d valid %llu first_bad %lld", off, rc, (unsigned long long)v.valid,
                      (long long)v.first_bad);
            continue;
        }
        struct kv_cache *c = fx_cache(KV_TIER_INT8R, 8);
        int32_t tok[8];
        struct kv_file_report rep;
        struct kv_file *f = NULL;
        rc = open_into(path, c, tok, &rep, &f, &err);
        int ok = rc == 0 && rep.kept == whole && rep.restored == whole && fx_cache_is(c, tok, (int)whole, 1);
        kv_file_close(f);
        /* After the open the file is sound and holds exactly the kept records. */
        ok = ok && kv_file_verify(io_fs_posix(), path, &v, &err) == 0 && v.published == whole &&
             v.valid == whole && v.first_bad == -1 && v.file_bytes == KV_FILE_RECORDS + whole * R;
        size_t m;
        uint8_t *after = fx_read(path, &m);
        ok = ok && m >= KV_FILE_RECORDS + whole * R &&
             !memcmp(after + KV_FILE_RECORDS, b + KV_FILE_RECORDS, whole * R);
        free(after);
        if (!ok && bad++ < 5) CHECK(0, "open at %zu: rc %d kept %llu (%s)", off, rc, (unsigned long long)rep.kept, err.msg);
        kv_cache_free(c);
    }
    CHECK(bad == 0, "%d offsets misbehaved", bad);
    free(b);
}

/* Every header byte flipped: refused, the file untouched. */
static void test_header_flips(void)
{
    const char *src = fx_path("hflip_src.ckv"), *path = fx_path("hflip.ckv");
    fx_make_file(src, KV_TIER_TQ3, 4, 1);
    size_t n;
    uint8_t *b = fx_read(src, &n);
    int bad = 0;
    for (int off = 0; off < KV_FILE_HDR_BYTES; off++) {
        b[off] ^= (uint8_t)(1u << (off % 8));
        fx_write(path, b, n);
        struct kv_file_verify v;
        struct colibri_err err = { 0 };
        int vrc = kv_file_verify(io_fs_posix(), path, &v, &err);
        struct kv_cache *c = fx_cache(KV_TIER_TQ3, 8);
        int32_t tok[8] = { 0 };
        struct kv_file_report rep;
        struct kv_file *f = NULL;
        int rc = open_into(path, c, tok, &rep, &f, &err);
        size_t m;
        uint8_t *after = fx_read(path, &m);
        int ok = vrc < 0 && rc < 0 && f == NULL && m == n && !memcmp(after, b, n) && tok[0] == 0 &&
                 strstr(err.msg, "left untouched");
        if (!ok && bad++ < 5) CHECK(0, "header byte %d: verify %d open %d: %s", off, vrc, rc, err.msg);
        free(after);
        kv_cache_free(c);
        b[off] ^= (uint8_t)(1u << (off % 8));
    }
    CHECK(bad == 0, "%d header bytes misbehaved", bad);
    free(b);
}

/* Slots: damage to the current slot falls back to the previous count; damage
 * to the other slot changes nothing. */
static void test_slot_flips(void)
{
    const char *src = fx_path("sflip_src.ckv"), *path = fx_path("sflip.ckv");
    unlink(src);
    struct kv_cache *c = fx_cache(KV_TIER_FP8, 16);
    int32_t tok[16];
    fx_fill(c, tok, 0, 6, 1);
    struct kv_file_report rep;
    struct kv_file *f = NULL;
    struct colibri_err err = { 0 };
    /* created: A {1, 0}; save 4: B {2, 4}; save 6: A {3, 6}. */
    CHECK(open_into(src, c, tok, &rep, &f, &err) == 0 && kv_file_save(f, c, tok, 4, &err) == 0 &&
              kv_file_save(f, c, tok, 6, &err) == 0,
          "%s", err.msg);
    kv_file_close(f);
    size_t n;
    uint8_t *b = fx_read(src, &n);
    int bad = 0;
    for (int s = 0; s < 2; s++) {
        int base = s ? KV_FILE_SLOT_B : KV_FILE_SLOT_A;
        for (int off = base; off < base + KV_FILE_SLOT_BYTES; off++) {
            b[off] ^= (uint8_t)(1u << (off % 8));
            fx_write(path, b, n);
            struct kv_cache *c2 = fx_cache(KV_TIER_FP8, 16);
            int32_t tok2[16];
            int rc = open_into(path, c2, tok2, &rep, &f, &err);
            uint64_t want = s == 0 ? 4 : 6;
            int ok = rc == 0 && rep.kept == want && fx_cache_is(c2, tok2, (int)want, 1);
            if (!ok && bad++ < 5) CHECK(0, "slot %c byte %d: rc %d kept %llu", "AB"[s], off, rc, (unsigned long long)rep.kept);
            kv_file_close(f);
            kv_cache_free(c2);
            b[off] ^= (uint8_t)(1u << (off % 8));
        }
    }
    CHECK(bad == 0, "%d slot bytes misbehaved", bad);
    kv_cache_free(c);
    free(b);
}

/* One bit flipped in each byte of the last two records: the damaged record
 * and everything after it are dropped, everything before kept. */
static void test_record_flips(void)
{
    const char *src = fx_path("rflip_src.ckv"), *path = fx_path("rflip.ckv");
    fx_make_file(src, KV_TIER_POLAR4, 6, 1);
    size_t n;
    uint8_t *b = fx_read(src, &n);
    size_t R = (n - KV_FILE_RECORDS) / 6;
    int bad = 0;
    for (size_t off = KV_FILE_RECORDS + 4 * R; off < n; off++) {
        uint64_t rec = (off - KV_FILE_RECORDS) / R;
        b[off] ^= (uint8_t)(1u << (off % 8));
        fx_write(path, b, n);
        struct kv_file_verify v;
        struct colibri_err err = { 0 };
        int vrc = kv_file_verify(io_fs_posix(), path, &v, &err);
        struct kv_cache *c = fx_cache(KV_TIER_POLAR4, 8);
        int32_t tok[8];
        struct kv_file_report rep;
        struct kv_file *f = NULL;
        int rc = open_into(path, c, tok, &rep, &f, &err);
        int ok = vrc == 0 && v.valid == rec && v.first_bad == (int64_t)rec && rc == 0 && rep.kept == rec &&
                 rep.restored == rec && rep.first_bad == (int64_t)rec && fx_cache_is(c, tok, (int)rec, 1) &&
                 strstr(rep.why, "record");
        kv_file_close(f);
        ok = ok && kv_file_verify(io_fs_posix(), path, &v, &err) == 0 && v.published == rec && v.first_bad == -1;
        if (!ok && bad++ < 5)
            CHECK(0, "record byte %zu: verify %d valid %llu, open %d kept %llu", off, vrc, (unsigned long long)v.valid,
                  rc, (unsigned long long)rep.kept);
        kv_cache_free(c);
        b[off] ^= (uint8_t)(1u << (off % 8));
    }
    CHECK(bad == 0, "%d record bytes misbehaved", bad);
    free(b);
}

/* Every header field changed (checksum recomputed, so only the field is
 * wrong): refused with the field's name in the message, file untouched. */
static void test_every_field_refused(void)
{
    static const struct { const char *name; int off, size; const char *text; } F[] = {
        { "magic", 0, 8, NULL },            { "read_version", 10, 2, NULL },  { "header_bytes", 12, 4, NULL },
        { "records_offset", 16, 8, NULL },  { "model", 32, 8, NULL },         { "weights", 40, 48, "experts=q4" },
        { "n_layers", 88, 4, NULL },        { "r", 92, 4, NULL },             { "dr", 96, 4, NULL },
        { "tier", 100, 4, NULL },           { "tier_name", 104, 16, "tq2" },  { "rope", 120, 4, NULL },
        { "rope_name", 124, 16, "fp8" },    { "latent_bits", 140, 4, NULL },  { "rope_bits", 144, 4, NULL },
        { "reserved", 148, 4, NULL },       { "latent_seed", 152, 8, NULL },  { "rope_seed", 160, 8, NULL },
        { "latent_bytes", 168, 4, NULL },   { "rope_bytes", 172, 4, NULL },   { "row_bytes", 176, 4, NULL },
        { "record_bytes", 180, 4, NULL },   { "codec_check", 184, 8, NULL },  { "reserved", 200, 8, NULL },
        { "header_checksum", 248, 8, NULL },
    };
    const char *src = fx_path("field_src.ckv"), *path = fx_path("field.ckv");
    fx_make_file(src, KV_TIER_TQ4, 3, 1);
    size_t n;
    uint8_t *b = fx_read(src, &n);
    for (size_t i = 0; i < sizeof F / sizeof F[0]; i++) {
        uint8_t *m = malloc(n);
        memcpy(m, b, n);
        if (F[i].text) {
            memset(m + F[i].off, 0, (size_t)F[i].size);
            memcpy(m + F[i].off, F[i].text, strlen(F[i].text));
        } else {
            m[F[i].off] += 1;   /* the low byte: always a different value */
        }
        if (strcmp(F[i].name, "header_checksum")) {
            uint64_t sum = XXH64(m, 248, 0);
            for (int k = 0; k < 8; k++) m[248 + k] = (uint8_t)(sum >> 8 * k);
        }
        fx_write(path, m, n);
        struct kv_cache *c = fx_cache(KV_TIER_TQ4, 8);
        int32_t tok[8];
        struct kv_file_report rep;
        struct kv_file *f = NULL;
        struct colibri_err err = { 0 };
        int rc = open_into(path, c, tok, &rep, &f, &err);
        size_t k;
        uint8_t *after = fx_read(path, &k);
        CHECK(rc < 0 && f == NULL, "%s changed: accepted", F[i].name);
        CHECK(strstr(err.msg, F[i].name) != NULL, "%s changed: message does not name it: %s", F[i].name, err.msg);
        CHECK(k == n && !memcmp(after, m, n), "%s changed: the file was modified", F[i].name);
        free(after);
        free(m);
        kv_file_close(f);
        kv_cache_free(c);
    }
    free(b);
}

/* The messages say how to reuse the file. */
static void test_refusal_messages(void)
{
    const char *path = fx_path("msg.ckv");
    fx_make_file(path, KV_TIER_TQ4, 3, 1);
    struct kv_cache *c = fx_cache(KV_TIER_Q4_0, 8);
    int32_t tok[8] = { 0 };
    struct kv_file_report rep;
    struct kv_file *f = NULL;
    struct colibri_err err = { 0 };
    size_t n0, n1;
    uint8_t *b0 = fx_read(path, &n0);
    int rc = open_into(path, c, tok, &rep, &f, &err);
    CHECK(rc == COLIBRI_EMISMATCH && strstr(err.msg, "saved with --kv tq4; run with --kv tq4 to reuse it"), "%d %s", rc,
          err.msg);
    uint8_t *b1 = fx_read(path, &n1);
    CHECK(n0 == n1 && !memcmp(b0, b1, n0) && tok[0] == 0, "refused file or cache modified");
    kv_cache_free(c);
    free(b0);
    free(b1);
    /* Another model. */
    c = fx_cache(KV_TIER_TQ4, 8);
    struct kv_file_hdr want = fx_want(c);
    want.model ^= 1;
    rc = kv_file_open(io_fs_posix(), path, &want, c, tok, 8, &rep, &f, &err);
    CHECK(rc == COLIBRI_EMISMATCH && strstr(err.msg, "model: saved by another model"), "%s", err.msg);
    want = fx_want(c);
    strcpy(want.weights, "experts=q4 dense=stored embed=stored");
    rc = kv_file_open(io_fs_posix(), path, &want, c, tok, 8, &rep, &f, &err);
    CHECK(rc == COLIBRI_EMISMATCH && strstr(err.msg, "weights: saved with weights 'experts=stored"), "%s", err.msg);
    kv_cache_free(c);
    /* A quantized file is never "upgraded" to f32. */
    c = fx_cache(KV_TIER_F32, 8);
    rc = open_into(path, c, tok, &rep, &f, &err);
    CHECK(rc == COLIBRI_EMISMATCH && strstr(err.msg, "--kv tq4"), "%s", err.msg);
    kv_cache_free(c);
}

/* Newer versions: an unknown read version is refused by name; an unknown
 * write version opens read-only. */
static void test_versions(void)
{
    const char *src = fx_path("ver_src.ckv"), *path = fx_path("ver.ckv");
    fx_make_file(src, KV_TIER_BF16, 3, 1);
    size_t n;
    uint8_t *b = fx_read(src, &n);
    for (int which = 0; which < 2; which++) {
        uint8_t *m = malloc(n);
        memcpy(m, b, n);
        /* read version 3 is the state files' (kv/persist_state.h): the first unknown is 4 */
        m[which ? 10 : 8] = which ? KV_STATE_VERSION + 1 : KV_FILE_VERSION + 1;
        uint64_t sum = XXH64(m, 248, 0);
        for (int k = 0; k < 8; k++) m[248 + k] = (uint8_t)(sum >> 8 * k);
        fx_write(path, m, n);
        struct kv_cache *c = fx_cache(KV_TIER_BF16, 8);
        int32_t tok[8];
        struct kv_file_report rep;
        struct kv_file *f = NULL;
        struct colibri_err err = { 0 };
        int rc = open_into(path, c, tok, &rep, &f, &err);
        if (which) {
            CHECK(rc == COLIBRI_EUNSUPPORTED && strstr(err.msg, "read_version 4"), "%d %s", rc, err.msg);
        } else {
            CHECK(rc == 0 && rep.read_only && rep.restored == 3 && fx_cache_is(c, tok, 3, 1), "%d %s", rc, err.msg);
            CHECK(f && kv_file_save(f, c, tok, 3, &err) == COLIBRI_EUNSUPPORTED, "saved a newer-write-version file");
        }
        size_t k;
        uint8_t *after = fx_read(path, &k);
        CHECK(k == n && !memcmp(after, m, n), "version %d file modified", which);
        free(after);
        free(m);
        kv_file_close(f);
        kv_cache_free(c);
    }
    free(b);
}

/* A FIFO at a KV path: verify and open are refused at once, naming it (run
 * in a child with an alarm: a FIFO without a writer used to block the open). */
static void test_fifo_refused(void)
{
    const char *path = fx_path("fifo.ckv");
    unlink(path);
    CHECK(mkfifo(path, 0644) == 0, "mkfifo %s", path);
    pid_t pid = fork();
    if (pid == 0) {
        alarm(5);
        struct colibri_err err = { 0 };
        struct kv_file_verify v;
        int ok = kv_file_verify(io_fs_posix(), path, &v, &err) == COLIBRI_EIO && strstr(err.msg, "FIFO");
        struct kv_cache *c = fx_cache(KV_TIER_F32, 8);
        int32_t tok[8];
        struct kv_file_report rep;
        struct kv_file *f = NULL;
        ok = ok && open_into(path, c, tok, &rep, &f, &err) != 0 && strstr(err.msg, "FIFO") && strstr(err.msg, path);
        if (!ok) fprintf(stderr, "  %s\n", err.msg);
        _exit(ok ? 0 : 1);
    }
    int st = 0;
    CHECK(pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0, "a FIFO: %s",
          WIFSIGNALED(st) ? "the open hung" : "not refused by name");
    unlink(path);
}

static void test_not_kv_files(void)
{
    const char *path = fx_path("text.ckv");
    const char *texts[] = { "", "hello", "COLIBRKV but far too short" };
    for (int i = 0; i < 3; i++) {
        fx_write(path, (const uint8_t *)texts[i], strlen(texts[i]));
        struct kv_cache *c = fx_cache(KV_TIER_F32, 8);
        int32_t tok[8];
        struct kv_file_report rep;
        struct kv_file *f = NULL;
        struct colibri_err err = { 0 };
        int rc = open_into(path, c, tok, &rep, &f, &err);
        size_t k;
        uint8_t *after = fx_read(path, &k);
        CHECK(rc == COLIBRI_EFORMAT && k == strlen(texts[i]) && !memcmp(after, texts[i], k), "'%s': %d %s", texts[i],
              rc, err.msg);
        free(after);
        kv_cache_free(c);
    }
    /* A header with no valid count slot is refused too. */
    const char *p2 = fx_path("noslot.ckv");
    fx_make_file(p2, KV_TIER_F32, 2, 1);
    size_t n;
    uint8_t *b = fx_read(p2, &n);
    b[KV_FILE_SLOT_A] ^= 1;
    b[KV_FILE_SLOT_B] ^= 1;
    fx_write(p2, b, n);
    struct kv_cache *c = fx_cache(KV_TIER_F32, 8);
    int32_t tok[8];
    struct kv_file_report rep;
    struct kv_file *f = NULL;
    struct colibri_err err = { 0 };
    CHECK(open_into(p2, c, tok, &rep, &f, &err) == COLIBRI_EFORMAT && strstr(err.msg, "count slots"), "%s", err.msg);
    kv_cache_free(c);
    free(b);
}

static uint64_t xorshift(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* Random damage (a small fuzzer, deterministic): bytes changed anywhere,
 * truncations, garbage appended, several at once. Never a crash; whatever
 * opens restores a prefix of the original positions, and verify agrees. */
static void test_random_damage(void)
{
    const char *src = fx_path("fuzz_src.ckv"), *path = fx_path("fuzz.ckv");
    fx_make_file(src, KV_TIER_TQ2, 6, 1);
    size_t n;
    uint8_t *b = fx_read(src, &n);
    uint8_t *m = malloc(n + 4096);
    uint64_t rng = 0x243f6a8885a308d3ull;
#define RND() xorshift(&rng)
    int bad = 0, opened = 0;
    for (int it = 0; it < 3000; it++) {
        memcpy(m, b, n);
        size_t len = n;
        int edits = 1 + (int)(RND() % 4);
        for (int e = 0; e < edits; e++) {
            switch (RND() % 4) {
            case 0: m[RND() % len] ^= (uint8_t)(1 + RND() % 255); break;               /* anywhere */
            case 1: if (len > KV_FILE_RECORDS) m[KV_FILE_RECORDS + RND() % (len - KV_FILE_RECORDS)] ^= 0x80; break;
            case 2: len = RND() % (len + 1); break;                                      /* truncate */
            default: {                                                                   /* append garbage */
                size_t add = RND() % 1000;
                for (size_t k = 0; k < add; k++) m[len + k] = (uint8_t)RND();
                len += add;
            }
            }
        }
        fx_write(path, m, len);
        struct kv_file_verify v;
        struct colibri_err err = { 0 };
        int vrc = kv_file_verify(io_fs_posix(), path, &v, &err);
        struct kv_cache *c = fx_cache(KV_TIER_TQ2, 8);
        int32_t tok[8];
        struct kv_file_report rep;
        struct kv_file *f = NULL;
        int rc = open_into(path, c, tok, &rep, &f, &err);
        kv_file_close(f);
        int ok = (rc == 0) == (vrc == 0);
        if (rc == 0) {
            opened++;
            ok = ok && rep.restored <= 6 && fx_cache_is(c, tok, (int)rep.restored, 1) && rep.kept == v.valid;
        }
        if (!ok && bad++ < 5) CHECK(0, "iteration %d: verify %d open %d restored %llu", it, vrc, rc, (unsigned long long)rep.restored);
        kv_cache_free(c);
    }
#undef RND
    CHECK(bad == 0, "%d damaged files misbehaved", bad);
    CHECK(opened > 100, "only %d of 3000 damaged files opened: the damage is too coarse to test trimming", opened);
    free(m);
    free(b);
}

static void test_lock(void)
{
    const char *path = fx_path("lock.ckv");
    fx_make_file(path, KV_TIER_F32, 2, 1);
    struct kv_cache *c = fx_cache(KV_TIER_F32, 8), *c2 = fx_cache(KV_TIER_F32, 8);
    int32_t tok[8], tok2[8];
    struct kv_file_report rep;
    struct kv_file *f = NULL, *g = NULL;
    struct colibri_err err = { 0 };
    CHECK(open_into(path, c, tok, &rep, &f, &err) == 0, "%s", err.msg);
    CHECK(open_into(path, c2, tok2, &rep, &g, &err) == COLIBRI_EIO && strstr(err.msg, "in use"), "%s", err.msg);
    kv_file_close(f);
    CHECK(open_into(path, c2, tok2, &rep, &g, &err) == 0, "%s", err.msg);
    kv_file_close(g);
    kv_cache_free(c);
    kv_cache_free(c2);
}

int main(int argc, char **argv)
{
    fx_setup();
    if (argc == 3 && !strcmp(argv[1], "--write-golden")) {
        write_golden(argv[2]);
        fx_teardown();
        return 0;
    }
    RUN_TEST(test_roundtrip_every_tier);
    RUN_TEST(test_append_diverge_shrink);
    RUN_TEST(test_golden);
    RUN_TEST(test_truncate_every_offset);
    RUN_TEST(test_header_flips);
    RUN_TEST(test_slot_flips);
    RUN_TEST(test_record_flips);
    RUN_TEST(test_every_field_refused);
    RUN_TEST(test_refusal_messages);
    RUN_TEST(test_versions);
    RUN_TEST(test_not_kv_files);
    RUN_TEST(test_fifo_refused);
    RUN_TEST(test_random_damage);
    RUN_TEST(test_lock);
    fx_teardown();
    return CHECK_SUMMARY();
}
