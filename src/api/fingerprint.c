/* api/fingerprint.c - the model fingerprint that KV files carry (api/internal.h). */
#include <stdio.h>
#include <string.h>

#include <xxhash.h>

#include "api/internal.h"

/* docs/FORMATS.md, "Model fingerprint": config fields as `key=value;`, then
 * each tensor's name, dtype, shape and first bytes (routed experts: no data). */
uint64_t colibri_api_model_fingerprint(const struct model *m)
{
    const struct model_config *c = &m->cfg;
    char cfg[4096];
    int n = model_config_fingerprint_text(c, cfg, sizeof cfg);
    XXH3_state_t *st = XXH3_createState();
    if (!st) return 0;
    XXH3_64bits_reset(st);
    XXH3_64bits_update(st, cfg, (size_t)n);
    for (int i = 0; i < m->st.n_tensors; i++) {
        const struct st_tensor *t = &m->st.tensors[i];
        char line[512];
        int k = snprintf(line, sizeof line, "%s;%s;%d;", t->name, st_dtype_name(t->dtype), t->ndim);
        for (int d = 0; d < t->ndim && k < (int)sizeof line - 24; d++)
            k += snprintf(line + k, sizeof line - (size_t)k, "%s%lld", d ? "," : "", (long long)t->shape[d]);
        k += snprintf(line + k, sizeof line - (size_t)k, ";");
        XXH3_64bits_update(st, line, (size_t)k < sizeof line ? (size_t)k : sizeof line - 1);
        if (!strstr(t->name, ".experts.") && t->data)
            XXH3_64bits_update(st, t->data, t->nbytes < 256 ? (size_t)t->nbytes : 256);
    }
    uint64_t h = XXH3_64bits_digest(st);
    XXH3_freeState(st);
    return h;
}
