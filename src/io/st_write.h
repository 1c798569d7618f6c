/* io/st_write.h - writing safetensors files.
 *
 * A file is written in two steps: st_write_header() lays out the tensors in
 * the order given (offsets assigned consecutively, header padded with spaces
 * to a multiple of 8 bytes so every tensor starts 8-byte aligned when its
 * predecessors' sizes are multiples of 8 — sizes that are not leave later
 * tensors less aligned, which readers must tolerate), then the caller writes
 * each tensor's bytes in that same order. The caller owns the FILE and makes
 * the write atomic (temp file, fsync, rename). */
#ifndef COLIBRI_IO_ST_WRITE_H
#define COLIBRI_IO_ST_WRITE_H

#include <stdint.h>
#include <stdio.h>

#include "colibri.h"
#include "io/safetensors.h"

struct st_out_tensor {
    const char *name;
    enum st_dtype dtype;
    int ndim;
    int64_t shape[ST_MAX_DIMS];
    uint64_t nbytes;        /* must equal dtype size x shape */
};

/* metadata: NULL, or key/value string pairs meta[2*i], meta[2*i+1], i < n_meta. */
int st_write_header(FILE *f, const char *path, const struct st_out_tensor *t, int n,
                    const char *const *meta, int n_meta, struct colibri_err *err);

#endif
