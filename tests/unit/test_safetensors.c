/* Strict safetensors reading: valid files open, every malformed file is refused
 * with a message that names the problem, and nothing crashes. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "io/safetensors.h"
#include "io_fault.h"

static char tmpdir[256];

/* Writes an 8-byte LE header length, the header, then `data`. */
static void write_st(const char *path, const char *header, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    uint64_t len = strlen(header);
    uint8_t le[8];
    for (int i = 0; i < 8; i++) le[i] = (uint8_t)(len >> (8 * i));
    fwrite(le, 1, 8, f);
    fwrite(header, 1, len, f);
    if (n) fwrite(data, 1, n, f);
    fclose(f);
}

static int open_expect(const char *path, int code, const char *needle)
{
    struct st_set s = { 0 };
    struct colibri_err err = { 0 };
    int rc = st_open_file(path, &s, &err);
    st_close(&s);
    CHECK(rc == code, "%s: rc %d want %d (%s)", path, rc, code, err.msg);
    if (needle) CHECK(strstr(err.msg, needle) != NULL, "message '%s' lacks '%s'", err.msg, needle);
    return rc;
}

static void test_valid_file(void)
{
    char path[512];
    snprintf(path, sizeof path, "%s/ok.safetensors", tmpdir);
    float data[6] = { 1, 2, 3, 4, 5, 6 };
    uint16_t bf[2] = { 0x3f80, 0xc000 }; /* 1.0, -2.0 */
    uint8_t buf[28];
    memcpy(buf, data, 24);
    memcpy(buf + 24, bf, 4);
    write_st(path,
             "{\"__metadata__\":{\"format\":\"pt\"},\"a\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]},"
             "\"b\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[24,28]}}",
             buf, sizeof buf);
    struct st_set s = { 0 };
    struct colibri_err err = { 0 };
    CHECK(st_open_file(path, &s, &err) == 0, "%s", err.msg);
    const struct st_tensor *a = st_find(&s, "a"), *b = st_find(&s, "b");
    CHECK(a && a->dtype == ST_F32 && a->ndim == 2 && a->shape[0] == 2 && a->shape[1] == 3, "tensor a");
    CHECK(a && ((const float *)a->data)[5] == 6.0f, "tensor a data");
    CHECK(b && b->dtype == ST_BF16 && b->numel == 2, "tensor b");
    CHECK(st_find(&s, "c") == NULL, "absent tensor found");
    CHECK(s.files[0].metadata_json && strstr(s.files[0].metadata_json, "pt"), "metadata kept");
    st_close(&s);
}

static void test_every_truncation(void)
{
    char path[512], cut[512];
    snprintf(path, sizeof path, "%s/ok.safetensors", tmpdir);
    snprintf(cut, sizeof cut, "%s/cut.safetensors", tmpdir);
    FILE *f = fopen(path, "rb");
    uint8_t whole[4096];
    size_t n = fread(whole, 1, sizeof whole, f);
    fclose(f);
    for (size_t len = 0; len < n; len++) {
        f = fopen(cut, "wb");
        fwrite(whole, 1, len, f);
        fclose(f);
        struct st_set s = { 0 };
        struct colibri_err err = { 0 };
        int rc = st_open_file(cut, &s, &err);
        st_close(&s);
        CHECK(rc != 0, "truncated at %zu bytes of %zu was accepted", len, n);
        CHECK(strstr(err.msg, "cut.safetensors") != NULL, "message names the file: %s", err.msg);
    }
}

static void test_malformed_headers(void)
{
    char path[512];
    snprintf(path, sizeof path, "%s/bad.safetensors", tmpdir);
    uint8_t zeros[64] = { 0 };
    write_st(path, "{\"a\":{\"dtype\":\"F64\",\"shape\":[2],\"data_offsets\":[0,16]}}", zeros, 16);
    open_expect(path, COLIBRI_EUNSUPPORTED, "F64");
    write_st(path, "{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", zeros, 16);
    open_expect(path, COLIBRI_EFORMAT, "'a'");
    write_st(path, "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                   "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", zeros, 16);
    open_expect(path, COLIBRI_EFORMAT, "overlap");
    write_st(path, "{\"a\":{\"dtype\":\"F32\",\"shape\":[8],\"data_offsets\":[0,32]}}", zeros, 16);
    open_expect(path, COLIBRI_EFORMAT, "past the data section");
    write_st(path, "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]", zeros, 16);
    open_expect(path, COLIBRI_EFORMAT, "not a JSON object");
    write_st(path, "{\"a\":{\"shape\":[2],\"data_offsets\":[0,8]}}", zeros, 16);
    open_expect(path, COLIBRI_EFORMAT, "dtype");
    write_st(path, "{\"a\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}", zeros, 16);
    open_expect(path, COLIBRI_EFORMAT, "shape");
    write_st(path, "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,0]}}", zeros, 16);
    open_expect(path, COLIBRI_EFORMAT, "data_offsets");
    write_st(path, "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                   "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]}}", zeros, 16);
    open_expect(path, COLIBRI_EFORMAT, "twice");
    write_st(path, "[1,2,3]", zeros, 0);
    open_expect(path, COLIBRI_EFORMAT, "JSON");
    /* numbers checked as doubles before any conversion (out of range is undefined behaviour) */
    write_st(path, "{\"a\":{\"dtype\":\"F32\",\"shape\":[1e300],\"data_offsets\":[0,8]}}", zeros, 16);
    open_expect(path, COLIBRI_EFORMAT, "'shape'[0] is not an integer in 0..2^53");
    write_st(path, "{\"a\":{\"dtype\":\"F32\",\"shape\":[1e400],\"data_offsets\":[0,8]}}", zeros, 16);
    open_expect(path, COLIBRI_EFORMAT, "'shape'[0] is not an integer in 0..2^53");
    write_st(path, "{\"a\":{\"dtype\":\"F32\",\"shape\":[2, 1.5],\"data_offsets\":[0,8]}}", zeros, 16);
    open_expect(path, COLIBRI_EFORMAT, "'shape'[1] is not an integer");
    write_st(path, "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,1e300]}}", zeros, 16);
    open_expect(path, COLIBRI_EFORMAT, "'data_offsets' is not [begin, end]");
    write_st(path, "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[-1e300,8]}}", zeros, 16);
    open_expect(path, COLIBRI_EFORMAT, "'data_offsets' is not [begin, end]");
    write_st(path, "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[\"0\",8]}}", zeros, 16);
    open_expect(path, COLIBRI_EFORMAT, "'data_offsets' is not [begin, end]");
    write_st(path, "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0.5,8.5]}}", zeros, 16);
    open_expect(path, COLIBRI_EFORMAT, "'data_offsets' is not [begin, end]");
    /* 2^31 x 2^31 F32 elements are 2^64 bytes: that wraps to 0 in 64 bits and would match [0, 0] */
    write_st(path, "{\"a\":{\"dtype\":\"F32\",\"shape\":[2147483648,2147483648],\"data_offsets\":[0,0]}}",
             zeros, 16);
    open_expect(path, COLIBRI_EFORMAT, "'shape' is too large");
    /* no tensors at all: opens as an empty set */
    write_st(path, "{}", zeros, 0);
    open_expect(path, 0, NULL);
    write_st(path, "{\"__metadata__\":{\"format\":\"pt\"}}", zeros, 0);
    open_expect(path, 0, NULL);
    /* found by fuzz_safetensors: a repeated key must not replace (and leak) the first */
    write_st(path, "{\"__metadata__\":{\"format\":\"pt\"},\"__metadata__\":{\"format\":\"pt\"}}", zeros, 0);
    open_expect(path, COLIBRI_EFORMAT, "'__metadata__' appears twice");
    /* F4 packs two elements per byte: [3, 4] is 6 bytes, an odd count is refused */
    write_st(path, "{\"a\":{\"dtype\":\"F4\",\"shape\":[3,4],\"data_offsets\":[0,12]}}", zeros, 16);
    open_expect(path, COLIBRI_EFORMAT, "needs 6");
    write_st(path, "{\"a\":{\"dtype\":\"F4\",\"shape\":[3],\"data_offsets\":[0,2]}}", zeros, 16);
    open_expect(path, COLIBRI_EFORMAT, "packs 2 elements per byte");
    {
        struct st_set s = { 0 };
        struct colibri_err e = { 0 };
        write_st(path, "{\"a\":{\"dtype\":\"F4\",\"shape\":[3,4],\"data_offsets\":[0,6]},"
                       "\"s\":{\"dtype\":\"F8_E8M0\",\"shape\":[3,1],\"data_offsets\":[6,9]}}", zeros, 16);
        CHECK(st_open_file(path, &s, &e) == 0, "F4 + F8_E8M0: %s", e.msg);
        const struct st_tensor *a = st_find(&s, "a"), *sc = st_find(&s, "s");
        CHECK(a && a->dtype == ST_F4 && a->numel == 12 && a->nbytes == 6, "F4 [3,4]: 12 elements in 6 bytes");
        CHECK(sc && sc->dtype == ST_F8_E8M0 && sc->nbytes == 3, "F8_E8M0: a byte each");
        st_close(&s);
    }
    /* Header length larger than the file. */
    FILE *f = fopen(path, "wb");
    uint8_t le[12] = { 0xff, 0xff, 0, 0, 0, 0, 0, 0, '{', '}', ' ', ' ' };
    fwrite(le, 1, sizeof le, f);
    fclose(f);
    open_expect(path, COLIBRI_EFORMAT, "header length");
    snprintf(path, sizeof path, "%s/does-not-exist.safetensors", tmpdir);
    open_expect(path, COLIBRI_EIO, "does-not-exist");
}

/* Random byte flips in a valid file never crash the reader. */
static void test_garbled_bytes(void)
{
    char path[512], bad[512];
    snprintf(path, sizeof path, "%s/ok.safetensors", tmpdir);
    snprintf(bad, sizeof bad, "%s/garbled.safetensors", tmpdir);
    FILE *f = fopen(path, "rb");
    uint8_t whole[4096];
    size_t n = fread(whole, 1, sizeof whole, f);
    fclose(f);
    srand(7);
    for (int iter = 0; iter < 500; iter++) {
        uint8_t copy[4096];
        memcpy(copy, whole, n);
        int flips = 1 + rand() % 3;
        for (int k = 0; k < flips; k++) copy[rand() % n] ^= (uint8_t)(1 + rand() % 255);
        f = fopen(bad, "wb");
        fwrite(copy, 1, n, f);
        fclose(f);
        struct st_set s = { 0 };
        struct colibri_err err = { 0 };
        if (st_open_file(bad, &s, &err) == 0) {
            /* Accepted: then every tensor must lie inside the mapping. */
            for (int i = 0; i < s.n_tensors; i++) {
                const uint8_t *lo = s.files[0].map, *hi = lo + s.files[0].map_size;
                const uint8_t *p = s.tensors[i].data;
                CHECK(p >= lo && p + s.tensors[i].nbytes <= hi, "tensor outside the file after flips");
            }
        } else {
            CHECK(err.msg[0] != 0, "failure without a message");
        }
        st_close(&s);
    }
}

static void test_sharded_index(void)
{
    char dir[512], path[600];
    snprintf(dir, sizeof dir, "%s/sharded", tmpdir);
    mkdir(dir, 0755);
    float d[2] = { 1, 2 };
    snprintf(path, sizeof path, "%s/s1.safetensors", dir);
    write_st(path, "{\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", d, 8);
    snprintf(path, sizeof path, "%s/s2.safetensors", dir);
    write_st(path, "{\"y\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", d, 8);
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
    FILE *f = fopen(path, "w");
    fputs("{\"weight_map\":{\"x\":\"s1.safetensors\",\"y\":\"s2.safetensors\"}}", f);
    fclose(f);
    struct st_set s = { 0 };
    struct colibri_err err = { 0 };
    CHECK(st_open_dir(dir, &s, &err) == 0, "%s", err.msg);
    CHECK(s.n_files == 2 && st_find(&s, "x") && st_find(&s, "y"), "both shards read");
    st_close(&s);

    /* every file call of the sharded open failing in turn (io_fault.h): the
     * index's open, stat, read and close and each shard's open, stat and
     * map fail the open by name; a shard's close after mapping and the
     * unmaps at st_close cannot */
    struct io_fault *fl;
    const struct io_fs *fs;
    CHECK(io_fault_new(io_fs_posix(), NULL, &fl, &fs) == 0, "fault layer");
    s = (struct st_set){ .io = fs };
    CHECK(st_open_dir(dir, &s, &err) == 0, "%s", err.msg);
    st_close(&s);
    int calls = io_fault_calls(fl), refused = 0;
    io_fault_free(fl);
    CHECK(calls == 14, "index 4 calls, shards 4 each, 2 unmaps: %d", calls);
    for (int n = 1; n <= calls; n++) {
        struct io_fault_opts o = { .fail_call = n };
        CHECK(io_fault_new(io_fs_posix(), &o, &fl, &fs) == 0, "fault layer");
        s = (struct st_set){ .io = fs };
        memset(&err, 0, sizeof err);
        int rc = st_open_dir(dir, &s, &err);
        CHECK(rc ? rc == COLIBRI_EIO && strstr(err.msg, dir) && strstr(err.msg, "Input/output error")
                 : s.n_files == 2 && st_find(&s, "y") && !memcmp(st_find(&s, "y")->data, d, 8),
              "call %d failed: rc %d: %s", n, rc, err.msg);
        refused += rc != 0;
        st_close(&s);
        CHECK(io_fault_tripped(fl), "call %d of %d was made", n, calls);
        io_fault_free(fl);
    }
    CHECK(refused == 10, "%d of %d failed calls refused the open, want 10", refused, calls);

    f = fopen(path, "w");   /* the index names a tensor that is not there */
    fputs("{\"weight_map\":{\"x\":\"s1.safetensors\",\"y\":\"s2.safetensors\",\"z\":\"s2.safetensors\"}}", f);
    fclose(f);
    memset(&err, 0, sizeof err);
    CHECK(st_open_dir(dir, &s, &err) == COLIBRI_EFORMAT && strstr(err.msg, "'z'"), "missing tensor: %s", err.msg);
    st_close(&s);

    f = fopen(path, "w");   /* a tensor filed under the wrong shard */
    fputs("{\"weight_map\":{\"x\":\"s2.safetensors\",\"y\":\"s2.safetensors\"}}", f);
    fclose(f);
    memset(&err, 0, sizeof err);
    CHECK(st_open_dir(dir, &s, &err) != 0 && strstr(err.msg, "'x'"), "wrong shard: %s", err.msg);
    st_close(&s);

    snprintf(path, sizeof path, "%s/s2.safetensors", dir);   /* duplicate across shards */
    write_st(path, "{\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", d, 8);
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
    f = fopen(path, "w");
    fputs("{\"weight_map\":{\"x\":\"s1.safetensors\",\"y\":\"s2.safetensors\"}}", f);
    fclose(f);
    memset(&err, 0, sizeof err);
    CHECK(st_open_dir(dir, &s, &err) != 0 && strstr(err.msg, "twice"), "duplicate: %s", err.msg);
    st_close(&s);
}

int main(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/colibri-test-st-XXXXXX");
    if (!mkdtemp(tmpdir)) return 1;
    RUN_TEST(test_valid_file);
    RUN_TEST(test_every_truncation);
    RUN_TEST(test_malformed_headers);
    RUN_TEST(test_garbled_bytes);
    RUN_TEST(test_sharded_index);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    if (system(cmd)) fprintf(stderr, "could not remove %s\n", tmpdir);
    return CHECK_SUMMARY();
}
