/* tests/fuzz/fuzz_kv_input.h - the input encoding of fuzz_kv, shared by the
 * harness and by the program that writes its version-2 seeds
 * (tests/unit/test_fuzz_kv_seeds.c), so both agree on it.
 *
 * Input = one mode byte, then the file, in one of two spellings:
 *   plain   the file's bytes as they are
 *   packed  (FUZZ_KV_PACKED) the file without the FUZZ_KV_GAP zero bytes at
 *           FUZZ_KV_GAP_AT, which the harness puts back. A version-2 file's
 *           records start at 8192 (docs/FORMATS.md "KV files"), so even an
 *           empty one is longer than the -max_len=8192 of tools/fuzz.sh;
 *           with the golden's 2 layers its part table ends at 4448 and
 *           nothing in [4608, 8192) is ever read, so packed files with
 *           records fit.
 * Mode bits: FUZZ_KV_RESEAL, FUZZ_KV_WRITER, the writer's cache in bits
 * 2..5 (FUZZ_KV_CACHE_SHIFT), FUZZ_KV_LAYERS (that index picks a per-layer
 * layout from the harness's table instead of a uniform tier),
 * FUZZ_KV_PACKED. */
#ifndef COLIBRI_FUZZ_KV_INPUT_H
#define COLIBRI_FUZZ_KV_INPUT_H

#define FUZZ_KV_RESEAL      0x01
#define FUZZ_KV_WRITER      0x02
#define FUZZ_KV_CACHE_SHIFT 2
#define FUZZ_KV_CACHE_MASK  0x0f
#define FUZZ_KV_LAYERS      0x40
#define FUZZ_KV_PACKED      0x80

#define FUZZ_KV_GAP_AT      4608
#define FUZZ_KV_GAP         3584

/* The per-layer layouts of the FUZZ_KV_LAYERS writer (--kv spellings,
 * kv/layout.h; "+key" adds an index key of FUZZ_KV_KEY values to layer 1,
 * f32 when that layer's latent is f32, else fp8), picked by the cache index
 * mod their count. */
#define FUZZ_KV_KEY 16
static const char *const fuzz_kv_layouts[] = {
    "f32+key", "int8r@1:rope=f32", "fp8@0:int8r+key", "tq3+key", "bf16@0:f32", "polar3@1:rope=f32+key",
};
#define FUZZ_KV_N_LAYOUTS (sizeof fuzz_kv_layouts / sizeof fuzz_kv_layouts[0])

#endif
