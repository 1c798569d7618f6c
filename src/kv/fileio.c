/* kv/fileio.c - kv_io on the real file system. */
#include "kv/fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

struct posix_fh {
    int fd;
};

static int posix_open(const struct kv_io *io, const char *path, int flags, void **fh)
{
    int oflags = (flags & KV_IO_WRITE) ? O_RDWR : O_RDONLY;
    if ((flags & KV_IO_WRITE) && (flags & KV_IO_CREATE)) oflags |= O_CREAT;
    int fd = open(path, oflags | O_CLOEXEC, 0644);
    if (fd < 0) return -errno;
    /* Lock before truncating, so a file another writer holds is never emptied. */
    if ((flags & KV_IO_WRITE) && flock(fd, LOCK_EX | LOCK_NB) != 0) {
        int e = errno;
        close(fd);
        return -(e == EWOULDBLOCK ? EWOULDBLOCK : e);
    }
    if ((flags & KV_IO_WRITE) && (flags & KV_IO_CREATE) && ftruncate(fd, 0) != 0) {
        int e = errno;
        close(fd);
        return -e;
    }
    struct posix_fh *h = malloc(sizeof *h);
    if (!h) {
        close(fd);
        return -ENOMEM;
    }
    h->fd = fd;
    *fh = h;
    return 0;
}

static int posix_close(const struct kv_io *io, void *fh)
{
    struct posix_fh *h = fh;
    int rc = close(h->fd) ? -errno : 0;   /* closing also drops the lock */
    free(h);
    return rc;
}

static int posix_read(const struct kv_io *io, void *fh, void *buf, size_t n, uint64_t off, size_t *got)
{
    struct posix_fh *h = fh;
    size_t done = 0;
    while (done < n) {
        ssize_t k = pread(h->fd, (char *)buf + done, n - done, (off_t)(off + done));
        if (k < 0) {
            if (errno == EINTR) continue;
            return -errno;
        }
        if (k == 0) break;
        done += (size_t)k;
    }
    *got = done;
    return 0;
}

static int posix_write(const struct kv_io *io, void *fh, const void *buf, size_t n, uint64_t off)
{
    struct posix_fh *h = fh;
    size_t done = 0;
    while (done < n) {
        ssize_t k = pwrite(h->fd, (const char *)buf + done, n - done, (off_t)(off + done));
        if (k < 0) {
            if (errno == EINTR) continue;
            return -errno;
        }
        done += (size_t)k;
    }
    return 0;
}

static int posix_sync(const struct kv_io *io, void *fh)
{
    struct posix_fh *h = fh;
    return fsync(h->fd) ? -errno : 0;
}

static int posix_truncate(const struct kv_io *io, void *fh, uint64_t size)
{
    struct posix_fh *h = fh;
    return ftruncate(h->fd, (off_t)size) ? -errno : 0;
}

static int posix_size(const struct kv_io *io, void *fh, uint64_t *size)
{
    struct posix_fh *h = fh;
    struct stat sb;
    if (fstat(h->fd, &sb)) return -errno;
    *size = (uint64_t)sb.st_size;
    return 0;
}

static int posix_rename(const struct kv_io *io, const char *from, const char *to)
{
    if (rename(from, to)) return -errno;
    /* The rename is durable only once the directory entry is. */
    char *dir = strdup(to);
    if (!dir) return -ENOMEM;
    char *slash = strrchr(dir, '/');
    if (slash == dir) slash[1] = 0;
    else if (slash) *slash = 0;
    else strcpy(dir, ".");
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    free(dir);
    if (fd < 0) return -errno;
    int rc = fsync(fd) ? -errno : 0;
    close(fd);
    return rc;
}

static const struct kv_io KV_IO_POSIX = {
    .open = posix_open, .close = posix_close, .read = posix_read, .write = posix_write,
    .sync = posix_sync, .truncate = posix_truncate, .size = posix_size, .rename = posix_rename,
};

const struct kv_io *kv_io_posix(void) { return &KV_IO_POSIX; }
