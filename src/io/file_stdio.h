/* io/file_stdio.h - a stdio FILE whose writes go through an io_fs (glibc's
 * fopencookie), so a writer can stay stdio code (the safetensors writer,
 * convert's copies) while every byte reaches the disk through the interface
 * the crash tests break; and the atomic whole-file write built on it. */
#ifndef COLIBRI_IO_FILE_STDIO_H
#define COLIBRI_IO_FILE_STDIO_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "colibri.h"
#include "io/file.h"

/* The FILE's cookie: which io_fs and handle, and the next write offset. */
struct io_stdio {
    const struct io_fs *io;
    void *fh;
    uint64_t off;
};

/* Creates (or truncates) path for writing; NULL with errno set on failure.
 * fclose() closes the handle and frees *out. */
FILE *io_stdio_create(const struct io_fs *io, const char *path, struct io_stdio **out);

/* Flushes f and makes it durable; 0 or -1 with errno set. */
int io_stdio_commit(FILE *f, struct io_stdio *k);

/* Writes len bytes to path atomically: temp file, sync, rename (which syncs
 * the directory). 0 or COLIBRI_EIO naming the path. */
int io_stdio_write_atomic(const struct io_fs *io, const char *path, const void *buf, size_t len,
                          struct colibri_err *err);

#endif
