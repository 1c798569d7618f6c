/* KV files in version 2 (per-layer layouts and rows with more than two
 * parts): round trips, which layouts write version 1 instead, refusals that
 * name the layer and part, every part-table field changed, and the
 * single-layout header fields a version-2 file must leave at 0. The crash
 * and fault tests run version 2 too (test_persist_crash.c). */
#include <string.h>

#include "check.h"
#include "persist_fixture.h"

#define XXH_STATIC_LINKING_ONLY
#include <xxhash.h>

static int open_as(const char *path, const char *layout, struct kv_cache **c, int32_t *tok,
                   struct kv_file_report *rep, struct kv_file **f, struct colibri_err *err)
{
    *c = fx_cache_spec(layout, 16);
    struct kv_file_hdr want = fx_want(*c);
    return kv_file_open(io_fs_posix(), path, &want, *c, tok, 16, rep, f, err);
}

static void put_le(uint8_t *p, uint64_t v, int n) { for (int i = 0; i < n; i++) p[i] = (uint8_t)(v >> 8 * i); }

/* Recomputes the table checksum (header 200) and the header checksum. */
static void reseal(uint8_t *b)
{
    uint32_t tb = (uint32_t)(b[192] | b[193] << 8 | b[194] << 16 | (uint32_t)b[195] << 24);
    put_le(b + 200, XXH64(b + KV_FILE_RECORDS, tb, 0), 8);
    put_le(b + 248, XXH64(b, 248, 0), 8);
}

static void test_v2_round_trip(void)
{
    static const struct { const char *layout; int version; } L[] = {
        { "int8r@1:rope=f32", 2 }, { "fp8@0:int8r+key", 2 }, { "tq3+key", 2 }, { "int8r@1:int8r", 1 },
        { "bf16@0-1:rope=int8", 1 },
    };
    for (size_t i = 0; i < sizeof L / sizeof L[0]; i++) {
        const char *path = fx_path("v2.ckv");
        fx_make_file_spec(path, L[i].layout, 7, 1);
        struct kv_file_verify v;
        struct colibri_err err = { 0 };
        CHECK(kv_file_verify(io_fs_posix(), path, &v, &err) == 0 && v.valid == 7 && v.first_bad == -1, "%s: %s",
              L[i].layout, err.msg);
        CHECK(v.hdr.read_version == L[i].version && v.hdr.write_version == L[i].version, "%s: version %u, want %d",
              L[i].layout, v.hdr.read_version, L[i].version);
        struct kv_cache *ref = fx_cache_spec(L[i].layout, 1);
        size_t R = KV_FILE_REC_EXTRA + kv_cache_token_bytes(ref);
        uint64_t off = L[i].version == 2 ? 8192 : KV_FILE_RECORDS;
        CHECK(v.hdr.records_offset == off && v.hdr.record_bytes == R && v.file_bytes == off + 7 * R,
              "%s: offset %llu, record %u (want %zu), %llu bytes", L[i].layout, (unsigned long long)v.hdr.records_offset,
              v.hdr.record_bytes, R, (unsigned long long)v.file_bytes);
        kv_cache_free(ref);
        struct kv_cache *c;
        int32_t tok[16];
        struct kv_file_report rep;
        struct kv_file *f = NULL;
        CHECK(open_as(path, L[i].layout, &c, tok, &rep, &f, &err) == 0 && !rep.upgraded && rep.restored == 7, "%s: %s",
              L[i].layout, err.msg);
        CHECK(fx_cache_is(c, tok, 7, 1), "%s: rows differ after the round trip", L[i].layout);
        /* append and diverge in place, as version 1 does */
        fx_fill(c, tok, 4, 10, 2);
        CHECK(f && kv_file_save(f, c, tok, 10, &err) == 0, "%s: save %s", L[i].layout, err.msg);
        kv_file_close(f);
        kv_cache_free(c);
        CHECK(open_as(path, L[i].layout, &c, tok, &rep, &f, &err) == 0 && rep.restored == 10, "%s: %s", L[i].layout,
              err.msg);
        struct kv_cache *want = fx_cache_like(c, 16);
        int32_t wt[16];
        fx_fill(want, wt, 0, 4, 1);
        fx_fill(want, wt, 4, 10, 2);
        int same = !memcmp(tok, wt, sizeof(int32_t) * 10);
        for (int l = 0; l < FX_LAYERS; l++)
            same &= !memcmp(kv_cache_row(c, l, 0), kv_cache_row(want, l, 0), 10 * kv_cache_row_bytes(c, l));
        CHECK(same, "%s: rows after divergence", L[i].layout);
        kv_file_close(f);
        kv_cache_free(c);
        kv_cache_free(want);
    }
}

/* The file's layout and the session's differ: refused, the message names
 * the layer, the part and the --kv that reuses the file; file untouched. */
static void test_v2_refusals(void)
{
    static const struct { const char *file, *session, *msg; } R[] = {
        { "int8r@1:rope=f32", "int8r",
          "layer 1 rope part: saved as f32, this session has int8; saved with --kv int8r@1:rope=f32; run with --kv "
          "int8r@1:rope=f32 to reuse it" },
        { "int8r", "int8r@1:rope=f32", "layer 1 rope part: saved as int8, this session has f32; saved with --kv int8r;" },
        { "fp8@0:int8r", "fp8", "layer 0 latent part: saved as int8r, this session has fp8; saved with --kv int8r@1:fp8;" },
        { "int8r+key", "int8r",
          "layer 1 part 2: the file's rows hold index_key of 16 values there, this model's nothing; run the model" },
        { "int8r", "int8r+key", "layer 1 part 2: the file's rows hold nothing there, this model's index_key of 16" },
        { "int8r+key", "tq4@1:int8r+key", "layer 0 latent part: saved as int8r, this session has tq4" },
        { "tq4@1:int8r+key", "f32+key", "layer 0 latent part: saved as tq4, this session has f32" },
    };
    for (size_t i = 0; i < sizeof R / sizeof R[0]; i++) {
        const char *path = fx_path("refuse.ckv");
        fx_make_file_spec(path, R[i].file, 3, 1);
        size_t n0, n1;
        uint8_t *b0 = fx_read(path, &n0);
        struct kv_cache *c;
        int32_t tok[16] = { 0 };
        struct kv_file_report rep;
        struct kv_file *f = NULL;
        struct colibri_err err = { 0 };
        int rc = open_as(path, R[i].session, &c, tok, &rep, &f, &err);
        CHECK(rc == COLIBRI_EMISMATCH && strstr(err.msg, R[i].msg), "%s -> %s: %d %s", R[i].file, R[i].session, rc,
              err.msg);
        uint8_t *b1 = fx_read(path, &n1);
        CHECK(n0 == n1 && !memcmp(b0, b1, n0) && tok[0] == 0, "%s -> %s: refused file or cache modified", R[i].file,
              R[i].session);
        kv_file_close(f);
        kv_cache_free(c);
        free(b0);
        free(b1);
    }
}

/* Each field of a part-table entry (layer 1: its header and its RoPE part;
 * layer 1's index key) changed, the table and header checksums recomputed
 * so that only the field is wrong: refused naming the layer and the field,
 * file untouched. */
static void test_v2_table_fields(void)
{
    const char *src = fx_path("tsrc.ckv"), *path = fx_path("tfield.ckv");
    fx_make_file_spec(src, "int8r@1:rope=f32+key", 3, 1);
    size_t n;
    uint8_t *b = fx_read(src, &n);
    const size_t l1 = KV_FILE_RECORDS + KV_FILE_LAYER_BYTES, rope = l1 + 16 + KV_FILE_PART_BYTES,
                 key = l1 + 16 + 2 * KV_FILE_PART_BYTES, unused = l1 + 16 + 3 * KV_FILE_PART_BYTES;
    static const char *const ANY = "layer 1";
    const struct { const char *what; size_t off; int size; const char *msg; } F[] = {
        { "n_parts", l1, 4, "layer 1 part 3: kind 0 (this place holds index_key; n_parts 4)" },         { "row_bytes", l1 + 4, 4, "layer 1: row_bytes" },
        { "reserved", l1 + 8, 8, "layer 1: reserved" },    { "kind", rope, 4, "layer 1 part 1: kind" },
        { "codec", rope + 4, 4, "layer 1 rope part: bytes" }, { "dim", rope + 8, 4, "layer 1 rope part: dim" },
        { "bits", rope + 12, 4, "layer 1 rope part: bits" }, { "bytes", rope + 16, 4, "layer 1 rope part: bytes" },
        { "offset", rope + 20, 4, "layer 1 rope part: offset" }, { "seed", rope + 24, 8, "layer 1 rope part: seed" },
        { "check", rope + 32, 8, "layer 1 rope part: check" }, { "key dim", key + 8, 4, "layer 1 index_key part: bytes" },
        { "key codec", key + 4, 4, ANY },                  { "unused slot", unused + 5, 1, "unused part slot 3" },
    };
    for (size_t i = 0; i < sizeof F / sizeof F[0]; i++) {
        uint8_t *m = malloc(n);
        memcpy(m, b, n);
        m[F[i].off] += 1;
        reseal(m);
        fx_write(path, m, n);
        struct kv_cache *c;
        int32_t tok[16];
        struct kv_file_report rep;
        struct kv_file *f = NULL;
        struct colibri_err err = { 0 };
        int rc = open_as(path, "int8r@1:rope=f32+key", &c, tok, &rep, &f, &err);
        size_t k;
        uint8_t *after = fx_read(path, &k);
        CHECK(rc < 0 && !f, "%s changed: accepted", F[i].what);
        CHECK(strstr(err.msg, F[i].msg) != NULL, "%s changed: message does not name it: %s", F[i].what, err.msg);
        CHECK(k == n && !memcmp(after, m, n), "%s changed: the file was modified", F[i].what);
        free(after);
        free(m);
        kv_file_close(f);
        kv_cache_free(c);
    }
    /* a damaged table, header intact */
    uint8_t *m = malloc(n);
    memcpy(m, b, n);
    m[rope + 8] ^= 4;
    fx_write(path, m, n);
    struct kv_file_verify v;
    struct colibri_err err = { 0 };
    CHECK(kv_file_verify(io_fs_posix(), path, &v, &err) == COLIBRI_EFORMAT && strstr(err.msg, "table_checksum"), "%s",
          err.msg);
    /* the single-layout fields, the table size and the records offset */
    const struct { const char *name; int off; } H[] = {
        { "latent_bits", 140 }, { "rope_seed", 160 }, { "row_bytes", 176 }, { "codec_check", 184 },
        { "table_bytes", 192 }, { "records_offset", 17 }, { "reserved", 196 }, { "reserved", 210 },
    };
    for (size_t i = 0; i < sizeof H / sizeof H[0]; i++) {
        memcpy(m, b, n);
        m[H[i].off] += 1;
        put_le(m + 248, XXH64(m, 248, 0), 8);
        fx_write(path, m, n);
        memset(&err, 0, sizeof err);
        CHECK(kv_file_verify(io_fs_posix(), path, &v, &err) == COLIBRI_EFORMAT && strstr(err.msg, H[i].name), "%s: %s",
              H[i].name, err.msg);
    }
    free(m);
    free(b);
}

/* kv inspect's layout line, and a newer write version opens read-only. */
static void test_v2_stat_and_versions(void)
{
    const char *path = fx_path("stat.ckv");
    fx_make_file_spec(path, "fp8@0:int8r@1:rope=f32+key", 3, 1);
    struct kv_file_verify v;
    struct colibri_err err = { 0 };
    CHECK(kv_file_verify(io_fs_posix(), path, &v, &err) == 0, "%s", err.msg);
    char opt[160];
    kv_file_layout_options(&v.hdr, opt, sizeof opt);
    /* two layers, one layout each: the first is the base */
    CHECK(!strcmp(opt, "--kv int8r@1:fp8:rope=f32"), "'%s'", opt);
    CHECK(!strcmp(v.hdr.tier_name, "int8r") || !strcmp(v.hdr.tier_name, "fp8"), "base tier %s", v.hdr.tier_name);
    size_t n;
    uint8_t *b = fx_read(path, &n);
    b[8] = KV_FILE_VERSION + 1;
    put_le(b + 248, XXH64(b, 248, 0), 8);
    fx_write(path, b, n);
    struct kv_cache *c;
    int32_t tok[16];
    struct kv_file_report rep;
    struct kv_file *f = NULL;
    CHECK(open_as(path, "fp8@0:int8r@1:rope=f32+key", &c, tok, &rep, &f, &err) == 0 && rep.read_only &&
              rep.restored == 3 && fx_cache_is(c, tok, 3, 1), "%s", err.msg);
    CHECK(f && kv_file_save(f, c, tok, 3, &err) == COLIBRI_EUNSUPPORTED, "saved a newer-write-version file");
    kv_file_close(f);
    kv_cache_free(c);
    free(b);
}

int main(void)
{
    fx_setup();
    RUN_TEST(test_v2_round_trip);
    RUN_TEST(test_v2_refusals);
    RUN_TEST(test_v2_table_fields);
    RUN_TEST(test_v2_stat_and_versions);
    fx_teardown();
    return CHECK_SUMMARY();
}
