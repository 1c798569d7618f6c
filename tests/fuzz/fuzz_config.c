/* libFuzzer harness: config.json (model_config_parse). The input is the file. */
#include <stdlib.h>
#include <string.h>

#include "model/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    if (!s) return 0;
    memcpy(s, data, size);
    s[size] = 0;
    struct model_config c;
    struct colibri_err err = { 0 };
    if (model_config_parse(s, "config.json", &c, &err) == 0) {
        /* what later code relies on after a successful parse */
        if (c.qk_rope_head_dim <= 0 || c.qk_rope_head_dim % 2 || c.rms_norm_eps <= 0) abort();
        for (int i = 0; i < c.qk_rope_head_dim / 2; i++)
            if (!(c.inv_freq[i] == c.inv_freq[i]) || c.inv_freq[i] <= 0) abort();   /* NaN or nonpositive */
    } else if (!err.msg[0]) {
        abort();                /* every refusal says why */
    }
    free(s);
    return 0;
}
