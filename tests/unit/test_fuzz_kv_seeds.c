/* The version-2 seeds of fuzz_kv (tests/fuzz/corpus/kv/v2_*.bin), made from
 * the persist fixture's files: each file is checked to be a version-2 file
 * of 3 valid records whose [FUZZ_KV_GAP_AT, +FUZZ_KV_GAP) bytes are zero,
 * then packed (tests/fuzz/fuzz_kv_input.h) behind its mode byte and checked
 * to fit -max_len=8192 and to equal the committed seed, so a format change
 * that leaves the seeds stale fails here. After such a change, rewrite them:
 *     build/tests/test_fuzz_kv_seeds --write tests/fuzz/corpus/kv */
#include <string.h>

#include "check.h"
#include "persist_fixture.h"
#include "../fuzz/fuzz_kv_input.h"

#define SEED_DIR "tests/fuzz/corpus/kv"
#define MAX_LEN 8192 /* tools/fuzz.sh */

/* The index of a layout in fuzz_kv_layouts, as writer-mode bits. */
static uint8_t layers_mode(const char *layout)
{
    for (size_t i = 0; i < FUZZ_KV_N_LAYOUTS; i++)
        if (!strcmp(fuzz_kv_layouts[i], layout))
            return (uint8_t)(FUZZ_KV_WRITER | FUZZ_KV_LAYERS | i << FUZZ_KV_CACHE_SHIFT);
    fprintf(stderr, "%s is not in fuzz_kv_layouts\n", layout);
    exit(1);
}

static void test_v2_seeds(const char *write_dir)
{
    const struct { const char *name, *file; uint8_t mode; } S[] = {
        { "v2_f32key_raw", "f32+key", FUZZ_KV_PACKED },
        { "v2_f32key_resealed", "f32+key", FUZZ_KV_PACKED | FUZZ_KV_RESEAL },
        { "v2_f32key_open_tq3key", "f32+key", FUZZ_KV_PACKED | layers_mode("tq3+key") },
        { "v2_f32key_open_polar3key", "f32+key", FUZZ_KV_PACKED | layers_mode("polar3@1:rope=f32+key") },
        { "v2_f32key_open_f32", "f32+key", FUZZ_KV_PACKED | FUZZ_KV_WRITER | KV_TIER_F32 << FUZZ_KV_CACHE_SHIFT },
        { "v2_int8rrope_open_same", "int8r@1:rope=f32", FUZZ_KV_PACKED | layers_mode("int8r@1:rope=f32") },
        { "v2_int8rrope_open_int8r", "int8r@1:rope=f32",
          FUZZ_KV_PACKED | FUZZ_KV_WRITER | KV_TIER_INT8R << FUZZ_KV_CACHE_SHIFT },
        { "v2_fp8int8rkey_open_same", "fp8@0:int8r+key", FUZZ_KV_PACKED | layers_mode("fp8@0:int8r+key") },
        { "v2_bf16f32_open_same", "bf16@0:f32", FUZZ_KV_PACKED | FUZZ_KV_RESEAL | layers_mode("bf16@0:f32") },
    };
    for (size_t i = 0; i < sizeof S / sizeof S[0]; i++) {
        const char *path = fx_path("seed.ckv");
        fx_make_file_spec(path, S[i].file, 3, 1);
        struct kv_file_verify v;
        struct colibri_err err = { 0 };
        CHECK(kv_file_verify(io_fs_posix(), path, &v, &err) == 0 && v.valid == 3 && v.hdr.read_version == 2 &&
                  v.hdr.records_offset == FUZZ_KV_GAP_AT + FUZZ_KV_GAP,
              "%s: not a version-2 file of 3 records at %d: %s", S[i].name, FUZZ_KV_GAP_AT + FUZZ_KV_GAP, err.msg);
        size_t n;
        uint8_t *b = fx_read(path, &n);
        int gap_zero = n > FUZZ_KV_GAP_AT + FUZZ_KV_GAP;
        for (size_t k = FUZZ_KV_GAP_AT; gap_zero && k < FUZZ_KV_GAP_AT + FUZZ_KV_GAP; k++) gap_zero = !b[k];
        CHECK(gap_zero, "%s: the packed gap holds data", S[i].name);
        size_t m = 1 + n - FUZZ_KV_GAP;
        CHECK(m <= MAX_LEN, "%s: %zu bytes, more than fuzz.sh's -max_len=%d", S[i].name, m, MAX_LEN);
        uint8_t *seed = malloc(m);
        seed[0] = S[i].mode;
        memcpy(seed + 1, b, FUZZ_KV_GAP_AT);
        memcpy(seed + 1 + FUZZ_KV_GAP_AT, b + FUZZ_KV_GAP_AT + FUZZ_KV_GAP, n - FUZZ_KV_GAP_AT - FUZZ_KV_GAP);
        char out[320];
        snprintf(out, sizeof out, "%s/%s.bin", write_dir ? write_dir : SEED_DIR, S[i].name);
        if (write_dir) {
            fx_write(out, seed, m);
        } else {
            size_t k;
            uint8_t *have = fx_read(out, &k);
            CHECK(have && k == m && !memcmp(have, seed, m),
                  "%s is missing or differs from what this build writes; rewrite the seeds with "
                  "build/tests/test_fuzz_kv_seeds --write " SEED_DIR, out);
            free(have);
        }
        free(seed);
        free(b);
    }
}

static const char *write_dir;
static void test_v2_seeds_run(void) { test_v2_seeds(write_dir); }

int main(int argc, char **argv)
{
    if (argc == 3 && !strcmp(argv[1], "--write")) {
        write_dir = argv[2];
    } else if (argc != 1) {
        fprintf(stderr, "usage: %s [--write DIR]\n", argv[0]);
        return 2;
    }
    fx_setup();
    RUN_TEST(test_v2_seeds_run);
    fx_teardown();
    return CHECK_SUMMARY();
}
