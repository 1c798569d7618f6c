/* io/safetensors.h - strict reading of safetensors checkpoints.
 *
 * Opens one .safetensors file, or a model directory (a single
 * model.safetensors, or shards listed in model.safetensors.index.json), maps
 * every file read-only and validates the whole header before any tensor is
 * handed out: header length within the file, JSON well-formed, every entry has a
 * known dtype, a shape and data_offsets in bounds, dtype size x shape = byte
 * length (F4: half a byte per element, an even count), no two tensors overlap, no name appears twice (across shards too), and
 * the index's weight_map agrees with the shards. Every error names the file,
 * the tensor and the field.
 *
 * The mapped data stays valid until st_close(). Not thread-safe to open/close
 * concurrently; reading tensor data from many threads is fine. */
#ifndef COLIBRI_IO_SAFETENSORS_H
#define COLIBRI_IO_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "colibri.h"

enum st_dtype {
    ST_F32 = 0,
    ST_BF16 = 1,
    ST_F16 = 2,
    ST_F8_E4M3 = 3,
    ST_U8 = 4,
    ST_I8 = 5,
    ST_I32 = 6,
    ST_I64 = 7,
    ST_F8_E8M0 = 8,     /* power-of-two scales 2^(e-127), 0xFF NaN (OCP MX) */
    ST_F4 = 9,          /* e2m1, two per byte (element 2i in the low nibble); the
                         * shape counts elements, so bytes = numel / 2 */
    ST_DTYPE_COUNT
};

#define ST_MAX_DIMS 8

struct st_tensor {
    char *name;
    enum st_dtype dtype;
    int ndim;
    int64_t shape[ST_MAX_DIMS];
    int64_t numel;
    uint64_t nbytes;
    const void *data;       /* into the file's mapping; not aligned in general */
    int file;               /* index into st_set.files */
};

struct cJSON;
struct st_file {
    char *path;
    void *map;
    size_t map_size;
    char *metadata_json;    /* the "__metadata__" object printed as JSON, or NULL */
    struct cJSON *metadata; /* the same, parsed (string values only), or NULL */
};

struct io_fs;
struct st_set {
    /* Every file is opened, mapped and read through io (io/file.h; NULL: the
     * real file system). Set it before opening; st_close zeroes it with
     * the rest. */
    const struct io_fs *io;
    struct st_file *files;
    int n_files;
    struct st_tensor *tensors;  /* sorted by name */
    int n_tensors;
};

const char *st_dtype_name(enum st_dtype t);
size_t st_dtype_size(enum st_dtype t);

/* COLIBRI_EIO naming the file when a read of one of s's mappings faulted
 * (the file was truncated while mapped; the rest of that mapping reads
 * zeros since, io/mapguard.h): anything computed from it is wrong. One
 * atomic load while no mapping of the process ever faulted. */
int st_files_faulted(const struct st_set *s, struct colibri_err *err);
/* st_files_faulted, or a file rewritten in place since it was mapped (its
 * size or mtime changed, same inode): a stat per file. */
int st_files_sound(const struct st_set *s, struct colibri_err *err);

/* Opens a single safetensors file into *out (which must be zeroed). */
int st_open_file(const char *path, struct st_set *out, struct colibri_err *err);

/* Opens a model directory: model.safetensors.index.json when present, else
 * model.safetensors, else the only *.safetensors file in the directory. */
int st_open_dir(const char *dir, struct st_set *out, struct colibri_err *err);

/* NULL when absent. */
const struct st_tensor *st_find(const struct st_set *s, const char *name);

/* The string value of `key` in the __metadata__ of the file holding tensor t,
 * or NULL. Valid until st_close(). */
const char *st_tensor_meta(const struct st_set *s, const struct st_tensor *t, const char *key);

void st_close(struct st_set *s);

#endif
