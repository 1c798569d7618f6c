/* libFuzzer harness: a safetensors file (st_open_file). First input byte:
 * even - the rest is the whole file; odd - the rest is the JSON header, and
 * the harness adds the 8-byte length and a 4 KiB data section, so mutations
 * reach the tensor entries instead of mostly breaking the length. Every
 * accepted tensor is read end to end (ASan checks the bounds). */
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "io/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    char path[512];
    if (data[0] & 1) {
        size_t n = size - 1, total = 8 + n + 4096;
        uint8_t *f = calloc(1, total);
        if (!f) return 0;
        for (int i = 0; i < 8; i++) f[i] = (uint8_t)((uint64_t)n >> (8 * i));
        memcpy(f + 8, data + 1, n);
        fuzz_write(NULL, "x.safetensors", f, total, path, sizeof path);
        free(f);
    } else {
        fuzz_write(NULL, "x.safetensors", data + 1, size - 1, path, sizeof path);
    }
    struct st_set s = { 0 };
    struct colibri_err err = { 0 };
    if (st_open_file(path, &s, &err) == 0) {
        volatile uint8_t sum = 0;
        for (int i = 0; i < s.n_tensors; i++) {
            const struct st_tensor *t = &s.tensors[i];
            if (st_find(&s, t->name) != t) abort();
            for (size_t b = 0; b < t->nbytes; b++) sum ^= ((const uint8_t *)t->data)[b];
        }
        (void)sum;              /* read only so that ASan checks every byte is mapped */
    } else if (!err.msg[0]) {
        abort();
    }
    st_close(&s);
    return 0;
}
