/* io/file.c - io_fs on the real file system (contract in io/file.h). */
#include "io/file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

struct posix_fh {
    int fd;
    int direct;
};

/* The refusal for a non-regular file of mode m, 0 for a regular one. */
static int not_regular(mode_t m)
{
    if (S_ISREG(m)) return 0;
    if (S_ISDIR(m)) return -EISDIR;
    if (S_ISFIFO(m)) return IO_EFIFO;
    if (S_ISCHR(m) || S_ISBLK(m)) return IO_EDEVICE;
    if (S_ISSOCK(m)) return IO_ESOCKET;
    if (S_ISLNK(m)) return IO_ELINK;
    return IO_EOTHER;
}

static int posix_open(const struct io_fs *fs, const char *path, int flags, void **fh)
{
    int write = flags & IO_OPEN_WRITE, create = write && (flags & IO_OPEN_CREATE);
    /* O_NONBLOCK: a FIFO without a writer would block the open; it is
     * refused below, and the flag dropped again for the regular file. */
    int oflags = (write ? O_RDWR : O_RDONLY) | O_CLOEXEC | O_NONBLOCK;
    if (create) oflags |= O_CREAT;
    if (create && (flags & IO_OPEN_EXCL)) oflags |= O_EXCL;
    if (flags & IO_OPEN_NOFOLLOW) oflags |= O_NOFOLLOW;
    if (flags & IO_OPEN_DIRECT) oflags |= O_DIRECT;
    int fd = open(path, oflags, 0644);
    if (fd < 0) {
        int e = errno;
        struct stat sb;
        /* O_NOFOLLOW's ELOOP means the path itself is a link */
        if (e == ELOOP && (flags & IO_OPEN_NOFOLLOW) && !lstat(path, &sb) && S_ISLNK(sb.st_mode)) return IO_ELINK;
        /* a device or socket may refuse the open itself: name the kind */
        if ((e == ENXIO || e == ENODEV || e == EOPNOTSUPP) && !stat(path, &sb) && not_regular(sb.st_mode))
            return not_regular(sb.st_mode);
        return -e;
    }
    struct stat sb;
    int rc = fstat(fd, &sb) ? -errno : not_regular(sb.st_mode);
    if (!rc && fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK)) rc = -errno;
    /* Lock before truncating, so a file another writer holds is never emptied. */
    if (!rc && write && flock(fd, LOCK_EX | LOCK_NB) != 0) rc = -(errno == EWOULDBLOCK ? EWOULDBLOCK : errno);
    if (!rc && create && ftruncate(fd, 0) != 0) rc = -errno;
    struct posix_fh *h = rc ? NULL : malloc(sizeof *h);
    if (!rc && !h) rc = -ENOMEM;
    if (rc) {
        close(fd);
        return rc;
    }
    h->fd = fd;
    h->direct = !!(flags & IO_OPEN_DIRECT);
    *fh = h;
    return 0;
}

static int posix_close(const struct io_fs *fs, void *fh)
{
    struct posix_fh *h = fh;
    int rc = close(h->fd) ? -errno : 0;   /* closing also drops the lock */
    free(h);
    return rc;
}

static int posix_read(const struct io_fs *fs, void *fh, void *buf, size_t n, uint64_t off, size_t *got)
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
        /* O_DIRECT reads whole blocks: a partial one is the end of the file */
        if (h->direct && (size_t)k % IO_DIRECT_ALIGN) break;
    }
    *got = done;
    return 0;
}

static int posix_write(const struct io_fs *fs, void *fh, const void *buf, size_t n, uint64_t off)
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

static int posix_sync(const struct io_fs *fs, void *fh)
{
    struct posix_fh *h = fh;
    return fsync(h->fd) ? -errno : 0;
}

static int posix_truncate(const struct io_fs *fs, void *fh, uint64_t size)
{
    struct posix_fh *h = fh;
    return ftruncate(h->fd, (off_t)size) ? -errno : 0;
}

static int posix_stat(const struct io_fs *fs, void *fh, struct io_stat *st)
{
    struct posix_fh *h = fh;
    struct stat sb;
    if (fstat(h->fd, &sb)) return -errno;
    st->size = (uint64_t)sb.st_size;
    st->mtime_ns = (int64_t)sb.st_mtim.tv_sec * 1000000000 + sb.st_mtim.tv_nsec;
    return 0;
}

static int posix_map(const struct io_fs *fs, void *fh, size_t n, const void **addr)
{
    struct posix_fh *h = fh;
    void *p = mmap(NULL, n, PROT_READ, MAP_PRIVATE, h->fd, 0);
    if (p == MAP_FAILED) return -errno;
    *addr = p;
    return 0;
}

static int posix_unmap(const struct io_fs *fs, const void *addr, size_t n)
{
    return munmap((void *)addr, n) ? -errno : 0;
}

static int posix_rename(const struct io_fs *fs, const char *from, const char *to)
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

static int posix_remove(const struct io_fs *fs, const char *path)
{
    return unlink(path) ? -errno : 0;
}

static const struct io_fs IO_FS_POSIX = {
    .open = posix_open, .close = posix_close, .read = posix_read, .write = posix_write,
    .sync = posix_sync, .truncate = posix_truncate, .stat = posix_stat, .map = posix_map,
    .unmap = posix_unmap, .rename = posix_rename, .remove = posix_remove,
};

const struct io_fs *io_fs_posix(void) { return &IO_FS_POSIX; }

const struct io_fs *io_fs_or_posix(const struct io_fs *fs) { return fs ? fs : &IO_FS_POSIX; }

int io_size(const struct io_fs *fs, void *fh, uint64_t *size)
{
    struct io_stat st;
    int rc = fs->stat(fs, fh, &st);
    if (!rc) *size = st.size;
    return rc;
}

const char *io_strerror(int rc)
{
    switch (rc) {
    case IO_EFIFO: return "a FIFO, not a regular file";
    case IO_EDEVICE: return "a device, not a regular file";
    case IO_ESOCKET: return "a socket, not a regular file";
    case IO_ELINK: return "a symbolic link (not followed here)";
    case IO_EOTHER: return "not a regular file";
    case -EISDIR: return "a directory, not a regular file";
    default: return strerror(-rc);
    }
}

int io_read_all(const struct io_fs *fs, const char *path, int flags, size_t max, char **buf, size_t *len)
{
    void *fh;
    int rc = fs->open(fs, path, flags, &fh);
    if (rc) return rc;
    struct io_stat st;
    char *b = NULL;
    size_t got = 0;
    if (!(rc = fs->stat(fs, fh, &st))) {
        if (st.size > max) rc = -EFBIG;
        else if (!(b = malloc((size_t)st.size + 1))) rc = -ENOMEM;
        else rc = fs->read(fs, fh, b, (size_t)st.size, 0, &got);
    }
    int crc = fs->close(fs, fh);
    if (!rc) rc = crc;
    if (rc) {
        free(b);
        return rc;
    }
    b[got] = 0;
    *buf = b;
    *len = got;
    return 0;
}
