/* io/file_stdio.c - stdio FILEs that write through an io_fs (see
 * file_stdio.h). */
#include "io/file_stdio.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"

static ssize_t stdio_write(void *c, const char *buf, size_t n)
{
    struct io_stdio *k = c;
    int rc = k->io->write(k->io, k->fh, buf, n, k->off);
    if (rc) {
        errno = -rc;
        return -1;
    }
    k->off += n;
    return (ssize_t)n;
}

static int stdio_close(void *c)
{
    struct io_stdio *k = c;
    int rc = k->io->close(k->io, k->fh);
    free(k);
    if (rc) errno = -rc;
    return rc ? -1 : 0;
}

/* Creates (or truncates) path for writing; NULL with errno set on failure. */
FILE *io_stdio_create(const struct io_fs *io, const char *path, struct io_stdio **out)
{
    struct io_stdio *k = calloc(1, sizeof *k);
    if (!k) return NULL;
    int rc = io->open(io, path, IO_OPEN_WRITE | IO_OPEN_CREATE, &k->fh);
    if (rc) {
        free(k);
        errno = rc < -4095 ? EINVAL : -rc;   /* io_fs's non-regular-file codes are no errno */
        return NULL;
    }
    k->io = io;
    FILE *f = fopencookie(k, "w", (cookie_io_functions_t){ .write = stdio_write, .close = stdio_close });
    if (!f) {
        io->close(io, k->fh);
        free(k);
        return NULL;
    }
    *out = k;
    return f;
}

/* Flushes f and makes it durable; 0 or -1 with errno set. */
int io_stdio_commit(FILE *f, struct io_stdio *k)
{
    if (fflush(f)) return -1;
    int rc = k->io->sync(k->io, k->fh);
    if (rc) errno = -rc;
    return rc ? -1 : 0;
}

/* Writes len bytes to path atomically: temp file, sync, rename (which syncs
 * the directory). */
int io_stdio_write_atomic(const struct io_fs *io, const char *path, const void *buf, size_t len,
                          struct colibri_err *err)
{
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    struct io_stdio *k;
    FILE *f = io_stdio_create(io, tmp, &k);
    int bad = !f || fwrite(buf, 1, len, f) != len || io_stdio_commit(f, k);
    if (f && fclose(f)) bad = 1;
    int rc = bad ? -errno : io->rename(io, tmp, path);
    if (rc) return base_err_set(err, COLIBRI_EIO, "%s: cannot write: %s", path, strerror(-rc ? -rc : EIO));
    return 0;
}

