#include "io/safetensors.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/err.h"
#include "base/util.h"
#include "io/file.h"
#include "io/mapguard.h"

/* The header is JSON; real checkpoints have headers of a few MB at most. */
#define ST_MAX_HEADER (256u << 20)
/* model.safetensors.index.json: a weight_map of ~100k names fits many times */
#define ST_MAX_INDEX (256u << 20)
/* Shapes and offsets are JSON numbers: integers above 2^53 are not exact. */
#define ST_MAX_INT 9007199254740992.0

/* per_byte: elements per byte of a packed dtype (0 means 1). */
static const struct { const char *name; size_t size; int per_byte; } DTYPES[ST_DTYPE_COUNT] = {
    [ST_F32] = { "F32", 4, 0 },      [ST_BF16] = { "BF16", 2, 0 },
    [ST_F16] = { "F16", 2, 0 },      [ST_F8_E4M3] = { "F8_E4M3", 1, 0 },
    [ST_U8] = { "U8", 1, 0 },        [ST_I8] = { "I8", 1, 0 },
    [ST_I32] = { "I32", 4, 0 },      [ST_I64] = { "I64", 8, 0 },
    [ST_F8_E8M0] = { "F8_E8M0", 1, 0 }, [ST_F4] = { "F4", 1, 2 },
};

const char *st_dtype_name(enum st_dtype t) { return t < ST_DTYPE_COUNT ? DTYPES[t].name : "?"; }
size_t st_dtype_size(enum st_dtype t) { return t < ST_DTYPE_COUNT ? DTYPES[t].size : 0; }

static int dtype_from_name(const char *s, enum st_dtype *out)
{
    for (int i = 0; i < ST_DTYPE_COUNT; i++)
        if (!strcmp(s, DTYPES[i].name)) { *out = (enum st_dtype)i; return 1; }
    return 0;
}

static int cmp_tensor_name(const void *a, const void *b)
{
    return strcmp(((const struct st_tensor *)a)->name, ((const struct st_tensor *)b)->name);
}

struct span { uint64_t begin, end; const char *name; };
static int cmp_span(const void *a, const void *b)
{
    const struct span *x = a, *y = b;
    return x->begin < y->begin ? -1 : x->begin > y->begin ? 1 : (x->end > y->end) - (x->end < y->end);
}

static int grow(void **arr, int n, int *cap, size_t elem)
{
    if (n < *cap) return 0;
    int ncap = *cap ? 2 * *cap : 64;
    void *p = realloc(*arr, (size_t)ncap * elem);
    if (!p) return -1;
    *arr = p;
    *cap = ncap;
    return 0;
}

/* Parses one tensor entry of the header; `e` is the JSON value for `name`. */
static int parse_entry(const char *path, const char *name, const cJSON *e, uint64_t data_size,
                       struct st_tensor *t, struct colibri_err *err)
{
    if (!cJSON_IsObject(e))
        return base_err_set(err, COLIBRI_EFORMAT, "%s: tensor '%s': entry is not a JSON object", path, name);
    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(e, "dtype");
    const cJSON *sh = cJSON_GetObjectItemCaseSensitive(e, "shape");
    const cJSON *off = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
    if (!cJSON_IsString(dt))
        return base_err_set(err, COLIBRI_EFORMAT, "%s: tensor '%s': field 'dtype' missing or not a string", path, name);
    if (!dtype_from_name(dt->valuestring, &t->dtype))
        return base_err_set(err, COLIBRI_EUNSUPPORTED,
                       "%s: tensor '%s': dtype '%s' is not supported (supported: F32 BF16 F16 F8_E4M3 F8_E8M0 F4 U8 I8 I32 I64)",
                       path, name, dt->valuestring);
    if (!cJSON_IsArray(sh))
        return base_err_set(err, COLIBRI_EFORMAT, "%s: tensor '%s': field 'shape' missing or not an array", path, name);
    int nd = cJSON_GetArraySize(sh);
    if (nd > ST_MAX_DIMS)
        return base_err_set(err, COLIBRI_EUNSUPPORTED, "%s: tensor '%s': field 'shape' has %d dims (max %d)",
                       path, name, nd, ST_MAX_DIMS);
    t->ndim = nd;
    unsigned __int128 numel = 1;
    for (int i = 0; i < nd; i++) {
        const cJSON *d = cJSON_GetArrayItem(sh, i);
        /* checked as a double before the conversion, which is undefined out of range */
        if (!cJSON_IsNumber(d) || !(d->valuedouble >= 0 && d->valuedouble <= ST_MAX_INT) ||
            d->valuedouble != floor(d->valuedouble))
            return base_err_set(err, COLIBRI_EFORMAT,
                           "%s: tensor '%s': field 'shape'[%d] is not an integer in 0..2^53", path, name, i);
        t->shape[i] = (int64_t)d->valuedouble;
        numel *= (uint64_t)t->shape[i];
        if (numel > ((unsigned __int128)1 << 53))
            return base_err_set(err, COLIBRI_EFORMAT, "%s: tensor '%s': field 'shape' is too large", path, name);
    }
    t->numel = (int64_t)numel;
    if (!cJSON_IsArray(off) || cJSON_GetArraySize(off) != 2)
        return base_err_set(err, COLIBRI_EFORMAT, "%s: tensor '%s': field 'data_offsets' missing or not [begin, end]",
                       path, name);
    const cJSON *jb = cJSON_GetArrayItem(off, 0), *je = cJSON_GetArrayItem(off, 1);
    double b = cJSON_IsNumber(jb) ? jb->valuedouble : -1, en = cJSON_IsNumber(je) ? je->valuedouble : -1;
    if (!(b >= 0 && b <= ST_MAX_INT && en >= b && en <= ST_MAX_INT) || b != floor(b) || en != floor(en))
        return base_err_set(err, COLIBRI_EFORMAT,
                       "%s: tensor '%s': field 'data_offsets' is not [begin, end] with integers 0 <= begin <= end "
                       "<= 2^53", path, name);
    uint64_t ub = (uint64_t)b, ue = (uint64_t)en;
    if (ue > data_size)
        return base_err_set(err, COLIBRI_EFORMAT,
                       "%s: tensor '%s': field 'data_offsets' end %llu is past the data section (%llu bytes; file truncated?)",
                       path, name, (unsigned long long)ue, (unsigned long long)data_size);
    int per = DTYPES[t->dtype].per_byte ? DTYPES[t->dtype].per_byte : 1;
    if ((uint64_t)numel % (uint64_t)per)
        return base_err_set(err, COLIBRI_EFORMAT, "%s: tensor '%s': dtype %s packs %d elements per byte but the shape "
                            "holds %llu", path, name, DTYPES[t->dtype].name, per, (unsigned long long)numel);
    uint64_t want = (uint64_t)numel / (uint64_t)per * DTYPES[t->dtype].size;
    if (ue - ub != want)
        return base_err_set(err, COLIBRI_EFORMAT,
                       "%s: tensor '%s': field 'data_offsets' spans %llu bytes but dtype %s x shape needs %llu",
                       path, name, (unsigned long long)(ue - ub), DTYPES[t->dtype].name, (unsigned long long)want);
    t->nbytes = want;
    t->data = (const void *)(uintptr_t)ub; /* relative until the caller rebases it */
    return 0;
}

/* Maps `path` and appends its tensors to s (unsorted). */
static int add_file(struct st_set *s, const char *path, int *cap_tensors, struct colibri_err *err)
{
    const struct io_fs *io = io_fs_or_posix(s->io);
    void *fh;
    int rc = io->open(io, path, IO_OPEN_READ, &fh);
    if (rc) return base_err_set(err, COLIBRI_EIO, "%s: cannot open: %s", path, io_strerror(rc));
    struct io_stat stbuf;
    if ((rc = io->stat(io, fh, &stbuf))) {
        io->close(io, fh);
        return base_err_set(err, COLIBRI_EIO, "%s: cannot stat: %s", path, io_strerror(rc));
    }
    size_t size = (size_t)stbuf.size;
    if (size < 8) {
        io->close(io, fh);
        return base_err_set(err, COLIBRI_EFORMAT, "%s: file is %zu bytes, too short for the 8-byte header length", path, size);
    }
    const void *cmap = NULL;
    rc = io->map(io, fh, size, &cmap);
    io->close(io, fh);
    if (rc) return base_err_set(err, COLIBRI_EIO, "%s: cannot mmap: %s", path, io_strerror(rc));
    void *map = (void *)cmap;

    struct st_file *files = realloc(s->files, (size_t)(s->n_files + 1) * sizeof *files);
    if (!files) { io->unmap(io, map, size); return base_err_set(err, COLIBRI_ENOMEM, "%s: out of memory", path); }
    s->files = files;
    int fi = s->n_files++;
    files[fi] = (struct st_file){ .path = strdup(path), .map = map, .map_size = size };
    /* a truncation of the file while it is mapped becomes a fault this
     * process survives (st_mapping_sound reports it), not a SIGBUS kill;
     * with the guard table full the mapping is used unguarded */
    (void)io_mapguard_add(map, size, path);

    uint64_t hlen = 0;
    for (int i = 0; i < 8; i++) hlen |= (uint64_t)((const uint8_t *)map)[i] << (8 * i);
    if (hlen > size - 8 || hlen > ST_MAX_HEADER)
        return base_err_set(err, COLIBRI_EFORMAT,
                       "%s: header length %llu at offset 0 exceeds the file (%zu bytes; truncated or not safetensors)",
                       path, (unsigned long long)hlen, size);
    uint64_t data_size = size - 8 - hlen;
    const char *hdr = (const char *)map + 8;
    cJSON *root = cJSON_ParseWithLength(hdr, (size_t)hlen);
    if (!root || !cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return base_err_set(err, COLIBRI_EFORMAT, "%s: header (bytes 8..%llu) is not a JSON object", path,
                       (unsigned long long)(8 + hlen));
    }
    int first = s->n_tensors;
    for (const cJSON *e = root->child; e; e = e->next) {
        if (!strcmp(e->string, "__metadata__")) {
            /* JSON lets a key repeat; a second metadata object would replace
             * (and leak) the first, so the file is refused */
            if (files[fi].metadata) {
                rc = base_err_set(err, COLIBRI_EFORMAT, "%s: '__metadata__' appears twice in the header", path);
                break;
            }
            if (!cJSON_IsObject(e)) {
                rc = base_err_set(err, COLIBRI_EFORMAT, "%s: '__metadata__' is not a JSON object", path);
                break;
            }
            for (const cJSON *kv = e->child; kv; kv = kv->next)
                if (!cJSON_IsString(kv)) {
                    rc = base_err_set(err, COLIBRI_EFORMAT, "%s: __metadata__['%s'] is not a string", path, kv->string);
                    break;
                }
            if (rc) break;
            files[fi].metadata_json = cJSON_PrintUnformatted(e);
            files[fi].metadata = cJSON_Duplicate(e, 1);
            continue;
        }
        if (grow((void **)&s->tensors, s->n_tensors, cap_tensors, sizeof *s->tensors)) {
            rc = base_err_set(err, COLIBRI_ENOMEM, "%s: out of memory", path);
            break;
        }
        struct st_tensor *t = &s->tensors[s->n_tensors];
        memset(t, 0, sizeof *t);
        if ((rc = parse_entry(path, e->string, e, data_size, t, err))) break;
        t->name = strdup(e->string);
        t->file = fi;
        s->n_tensors++;
    }
    cJSON_Delete(root);
    if (rc) return rc;

    /* Overlap check within this file, then rebase offsets to pointers. */
    int n = s->n_tensors - first;
    struct span *sp = malloc((size_t)(n ? n : 1) * sizeof *sp);
    if (!sp) return base_err_set(err, COLIBRI_ENOMEM, "%s: out of memory", path);
    for (int i = 0; i < n; i++) {
        struct st_tensor *t = &s->tensors[first + i];
        sp[i] = (struct span){ (uint64_t)(uintptr_t)t->data, (uint64_t)(uintptr_t)t->data + t->nbytes, t->name };
    }
    if (n > 1) qsort(sp, (size_t)n, sizeof *sp, cmp_span);
    for (int i = 1; i < n; i++)
        if (sp[i].begin < sp[i - 1].end && sp[i].end > sp[i].begin) {
            rc = base_err_set(err, COLIBRI_EFORMAT, "%s: tensors '%s' and '%s' overlap (data_offsets %llu..%llu and %llu..%llu)",
                         path, sp[i - 1].name, sp[i].name, (unsigned long long)sp[i - 1].begin,
                         (unsigned long long)sp[i - 1].end, (unsigned long long)sp[i].begin,
                         (unsigned long long)sp[i].end);
            break;
        }
    free(sp);
    const uint8_t *base = (const uint8_t *)map + 8 + hlen;
    for (int i = first; i < s->n_tensors; i++)
        s->tensors[i].data = base + (uintptr_t)s->tensors[i].data;
    return rc;
}

static int finish_set(struct st_set *s, const char *what, struct colibri_err *err)
{
    if (s->n_tensors > 1) qsort(s->tensors, (size_t)s->n_tensors, sizeof *s->tensors, cmp_tensor_name);
    for (int i = 1; i < s->n_tensors; i++)
        if (!strcmp(s->tensors[i].name, s->tensors[i - 1].name))
            return base_err_set(err, COLIBRI_EFORMAT, "%s: tensor '%s' appears twice (in %s and %s)", what,
                           s->tensors[i].name, s->files[s->tensors[i - 1].file].path, s->files[s->tensors[i].file].path);
    return 0;
}

int st_open_file(const char *path, struct st_set *out, struct colibri_err *err)
{
    int cap = 0;
    int rc = add_file(out, path, &cap, err);
    if (!rc) rc = finish_set(out, path, err);
    if (rc) st_close(out);
    return rc;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static int open_index(const char *dir, const char *index_path, struct st_set *out, struct colibri_err *err)
{
    size_t len;
    char *text;
    int rc = io_read_all(io_fs_or_posix(out->io), index_path, IO_OPEN_READ, ST_MAX_INDEX, &text, &len);
    if (rc) return base_err_set(err, COLIBRI_EIO, "%s: cannot read: %s", index_path, io_strerror(rc));
    cJSON *root = cJSON_ParseWithLength(text, len);
    free(text);
    const cJSON *wm = root ? cJSON_GetObjectItemCaseSensitive(root, "weight_map") : NULL;
    if (!cJSON_IsObject(wm)) {
        cJSON_Delete(root);
        return base_err_set(err, COLIBRI_EFORMAT, "%s: not JSON with a 'weight_map' object", index_path);
    }
    /* Distinct shard names, in sorted order. */
    int n = 0;
    for (const cJSON *e = wm->child; e; e = e->next) n++;
    char **names = calloc((size_t)(n ? n : 1), sizeof *names);
    if (!names) {
        cJSON_Delete(root);
        return base_err_set(err, COLIBRI_ENOMEM, "%s: out of memory", index_path);
    }
    int nn = 0;
    for (const cJSON *e = wm->child; e; e = e->next) {
        if (!cJSON_IsString(e) || strchr(e->valuestring, '/') || !strcmp(e->valuestring, "..")) {
            rc = base_err_set(err, COLIBRI_EFORMAT, "%s: weight_map['%s'] is not a shard file name", index_path, e->string);
            break;
        }
        names[nn++] = e->valuestring;
    }
    if (!rc) {
        if (nn > 1) qsort(names, (size_t)nn, sizeof *names, cmp_str);
        int cap = 0;
        char path[4096];
        for (int i = 0; i < nn && !rc; i++) {
            if (i && !strcmp(names[i], names[i - 1])) continue;
            snprintf(path, sizeof path, "%s/%s", dir, names[i]);
            rc = add_file(out, path, &cap, err);
        }
    }
    if (!rc) rc = finish_set(out, index_path, err);
    /* Every tensor the index names must be in the shard it names, and vice versa. */
    for (const cJSON *e = wm->child; e && !rc; e = e->next) {
        const struct st_tensor *t = st_find(out, e->string);
        const char *shard = t ? strrchr(out->files[t->file].path, '/') + 1 : NULL;
        if (!t)
            rc = base_err_set(err, COLIBRI_EFORMAT, "%s: tensor '%s' is listed in weight_map but absent from shard %s",
                         index_path, e->string, e->valuestring);
        else if (strcmp(shard, e->valuestring))
            rc = base_err_set(err, COLIBRI_EFORMAT, "%s: tensor '%s' is listed in shard %s but found in %s", index_path,
                         e->string, e->valuestring, shard);
    }
    if (!rc && out->n_tensors != cJSON_GetArraySize(wm))
        rc = base_err_set(err, COLIBRI_EFORMAT, "%s: shards hold %d tensors but weight_map lists %d", index_path,
                     out->n_tensors, cJSON_GetArraySize(wm));
    free(names);
    cJSON_Delete(root);
    return rc;
}

int st_open_dir(const char *dir, struct st_set *out, struct colibri_err *err)
{
    char path[4096];
    struct stat stbuf;
    int rc;
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
    if (stat(path, &stbuf) == 0) {
        rc = open_index(dir, path, out, err);
    } else {
        snprintf(path, sizeof path, "%s/model.safetensors", dir);
        if (stat(path, &stbuf) != 0) {
            /* Fall back to the only *.safetensors in the directory. */
            DIR *d = opendir(dir);
            if (!d) return base_err_set(err, COLIBRI_EIO, "%s: cannot open directory: %s", dir, strerror(errno));
            int found = 0;
            struct dirent *de;
            while ((de = readdir(d))) {
                size_t l = strlen(de->d_name);
                if (l > 12 && !strcmp(de->d_name + l - 12, ".safetensors")) {
                    found++;
                    snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
                }
            }
            closedir(d);
            if (found != 1)
                return base_err_set(err, found ? COLIBRI_EFORMAT : COLIBRI_EIO,
                               "%s: %s (expected model.safetensors or model.safetensors.index.json)", dir,
                               found ? "several .safetensors files but no index" : "no .safetensors file");
        }
        int cap = 0;
        rc = add_file(out, path, &cap, err);
        if (!rc) rc = finish_set(out, path, err);
    }
    if (rc) st_close(out);
    return rc;
}

const struct st_tensor *st_find(const struct st_set *s, const char *name)
{
    struct st_tensor key = { .name = (char *)name };
    if (!s->n_tensors) return NULL;     /* bsearch wants a non-NULL array */
    return bsearch(&key, s->tensors, (size_t)s->n_tensors, sizeof key, cmp_tensor_name);
}

const char *st_tensor_meta(const struct st_set *s, const struct st_tensor *t, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(s->files[t->file].metadata, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

int st_files_sound(const struct st_set *s, struct colibri_err *err)
{
    for (int i = 0; i < s->n_files; i++) {
        const struct st_file *f = &s->files[i];
        char msg[COLIBRI_ERR_MSG_MAX];
        if (io_mapguard_faulted(f->map))
            return base_err_set(err, COLIBRI_EIO, "%s was truncated while in use (a read of its mapping failed); "
                                "restart the server with the model whole", f->path);
        if (io_mapguard_changed(f->map, msg, sizeof msg))
            return base_err_set(err, COLIBRI_EIO, "%s; restart the server with the model whole", msg);
    }
    return 0;
}

int st_files_faulted(const struct st_set *s, struct colibri_err *err)
{
    if (!io_mapguard_faults()) return 0;
    for (int i = 0; i < s->n_files; i++)
        if (io_mapguard_faulted(s->files[i].map))
            return base_err_set(err, COLIBRI_EIO, "%s was truncated while in use (a read of its mapping failed); "
                                "restart the server with the model whole", s->files[i].path);
    return 0;
}

void st_close(struct st_set *s)
{
    const struct io_fs *io = io_fs_or_posix(s->io);
    for (int i = 0; i < s->n_tensors; i++) free(s->tensors[i].name);
    for (int i = 0; i < s->n_files; i++) {
        io_mapguard_remove(s->files[i].map);
        if (s->files[i].map) io->unmap(io, s->files[i].map, s->files[i].map_size);
        free(s->files[i].path);
        free(s->files[i].metadata_json);
        cJSON_Delete(s->files[i].metadata);
    }
    free(s->tensors);
    free(s->files);
    memset(s, 0, sizeof *s);
}
