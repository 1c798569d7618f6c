#include "io/st_write.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"

int st_write_header(FILE *f, const char *path, const struct st_out_tensor *t, int n, const char *const *meta,
                    int n_meta, struct colibri_err *err)
{
    cJSON *root = cJSON_CreateObject();
    if (n_meta > 0) {
        cJSON *m = cJSON_AddObjectToObject(root, "__metadata__");
        for (int i = 0; i < n_meta; i++) cJSON_AddStringToObject(m, meta[2 * i], meta[2 * i + 1]);
    }
    uint64_t off = 0;
    for (int i = 0; i < n; i++) {
        uint64_t want = st_dtype_size(t[i].dtype);
        for (int d = 0; d < t[i].ndim; d++) want *= (uint64_t)t[i].shape[d];
        if (want != t[i].nbytes) {
            cJSON_Delete(root);
            return base_err_set(err, COLIBRI_EINVAL, "%s: tensor '%s': %llu bytes given, dtype x shape is %llu", path,
                           t[i].name, (unsigned long long)t[i].nbytes, (unsigned long long)want);
        }
        cJSON *e = cJSON_AddObjectToObject(root, t[i].name);
        cJSON_AddStringToObject(e, "dtype", st_dtype_name(t[i].dtype));
        cJSON *shape = cJSON_AddArrayToObject(e, "shape");
        for (int d = 0; d < t[i].ndim; d++) cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)t[i].shape[d]));
        cJSON *offs = cJSON_AddArrayToObject(e, "data_offsets");
        cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)off));
        cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)(off + t[i].nbytes)));
        off += t[i].nbytes;
    }
    char *json = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    if (!json) return base_err_set(err, COLIBRI_ENOMEM, "%s: out of memory for the header", path);
    size_t len = strlen(json), padded = (len + 7) & ~(size_t)7;
    uint8_t le[8];
    for (int i = 0; i < 8; i++) le[i] = (uint8_t)((uint64_t)padded >> (8 * i));
    int bad = fwrite(le, 1, 8, f) != 8 || fwrite(json, 1, len, f) != len;
    for (size_t i = len; i < padded && !bad; i++) bad = fputc(' ', f) == EOF;
    free(json);
    if (bad) return base_err_set(err, COLIBRI_EIO, "%s: write failed: %s", path, strerror(errno));
    return 0;
}
