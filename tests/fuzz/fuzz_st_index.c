/* libFuzzer harness: model.safetensors.index.json (st_open_dir). The input
 * is the index; the directory also holds two fixed shards, a.safetensors
 * (tensors "x", "y") and b.safetensors ("z"). */
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "io/safetensors.h"

static void write_shard(const char *name, const char *header, size_t data_bytes)
{
    size_t n = strlen(header), total = 8 + n + data_bytes;
    uint8_t *f = calloc(1, total);
    if (!f) abort();
    for (int i = 0; i < 8; i++) f[i] = (uint8_t)((uint64_t)n >> (8 * i));
    memcpy(f + 8, header, n);
    fuzz_write(NULL, name, f, total, NULL, 0);
    free(f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int ready;
    if (!ready) {
        write_shard("a.safetensors", "{\"x\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,16]},"
                                     "\"y\":{\"dtype\":\"BF16\",\"shape\":[4],\"data_offsets\":[16,24]}}", 24);
        write_shard("b.safetensors", "{\"__metadata__\":{\"format\":\"pt\"},"
                                     "\"z\":{\"dtype\":\"I8\",\"shape\":[3],\"data_offsets\":[0,3]}}", 3);
        ready = 1;
    }
    fuzz_write(NULL, "model.safetensors.index.json", data, size, NULL, 0);
    struct st_set s = { 0 };
    struct colibri_err err = { 0 };
    if (st_open_dir(fuzz_dir(), &s, &err) == 0) {
        if (s.n_tensors > 3) abort();      /* only the shards' tensors can be listed */
    } else if (!err.msg[0]) {
        abort();
    }
    st_close(&s);
    return 0;
}
