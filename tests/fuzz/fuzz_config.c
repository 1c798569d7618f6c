/* libFuzzer harness: config.json (model_config_parse) of every family,
 * DeepSeek-V4 and GLM-5.3 included. The input is the file. */
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
        /* what later code relies on after a successful parse: GLM-5.3 has no
         * RoPE (its attention is NoPE MLA and KDA), DeepSeek-V4 keeps its
         * two bases' frequencies apart, the rest use inv_freq */
        const char *mt = c.family->model_type;
        int rope_free = !strcmp(mt, "glm5_next"), v4 = !strcmp(mt, "deepseek_v4");
        if (c.qk_rope_head_dim < 0 || c.qk_rope_head_dim % 2 || (!rope_free && c.qk_rope_head_dim == 0) ||
            (rope_free && c.qk_rope_head_dim != 0) || !(c.rms_norm_eps > 0))
            abort();
        for (int k = 0; k < (v4 ? 2 : 1); k++)
            for (int i = 0; i < c.qk_rope_head_dim / 2; i++) {
                float f = v4 ? c.v4_inv_freq[k][i] : c.inv_freq[i];
                if (!(f == f) || f <= 0) abort();   /* NaN or nonpositive */
            }
    } else if (!err.msg[0]) {
        abort();                /* every refusal says why */
    }
    free(s);
    return 0;
}
