/* io/file.h - the one interface through which colibri touches the files
 * whose failures matter, so tests can break it: KV files (kv/persist.c),
 * converted checkpoints (model/convert.c), safetensors (io/safetensors.c:
 * open, map, the index), the streamed expert reads (model/expert_io.c: pread
 * and O_DIRECT) and the hot set's state file (model/expert_hotset.c).
 * (config.json, tokenizer files and chat templates are still read with
 * base_read_file_all.)
 *
 * A struct io_fs is a table of function pointers plus a context. The POSIX
 * implementation (io_fs_posix) is what the engine uses; the tests wrap it in
 * a fault-injecting layer (tests/unit/io_fault.h, built only into the tests)
 * that fails chosen calls or "crashes" at a chosen sync.
 *
 * Every function returns 0 or a negative errno value (or one of the IO_E*
 * codes below); callers turn those into COLIBRI_E* codes with the path in the
 * message (io_strerror names the cause). Paths are plain C strings. An io_fs
 * is read-only after setup; io_fs_posix's functions may be called from many
 * threads at once (on distinct handles, or reads on one handle).
 *
 * Only regular files are opened: a directory, FIFO, socket or device at the
 * path is refused without blocking (a FIFO with no writer would otherwise
 * hang the open forever).
 */
#ifndef COLIBRI_IO_FILE_H
#define COLIBRI_IO_FILE_H

#include <stddef.h>
#include <stdint.h>

enum io_open_flags {
    IO_OPEN_READ     = 0,       /* read only, shared */
    IO_OPEN_WRITE    = 1 << 0,  /* read + write; takes an exclusive non-blocking lock (-EWOULDBLOCK if held) */
    IO_OPEN_CREATE   = 1 << 1,  /* with WRITE: create if absent, truncate to 0 if present */
    IO_OPEN_EXCL     = 1 << 2,  /* with WRITE|CREATE: -EEXIST when the path exists (a link included) */
    IO_OPEN_NOFOLLOW = 1 << 3,  /* a symbolic link at the path is refused (IO_ELINK), never followed */
    /* Reads bypass the page cache (O_DIRECT): offsets, lengths and buffers
     * must be multiples of IO_DIRECT_ALIGN. -EINVAL where the file system
     * refuses it, at open or at a read. */
    IO_OPEN_DIRECT   = 1 << 4,
};

#define IO_DIRECT_ALIGN 4096

/* Refusals of a path that is not a regular file (below every errno value). */
enum {
    IO_EFIFO   = -5001,
    IO_EDEVICE = -5002,         /* a character or block device */
    IO_ESOCKET = -5003,
    IO_ELINK   = -5004,         /* a symbolic link, with IO_OPEN_NOFOLLOW */
    IO_EOTHER  = -5005,         /* any other kind of non-regular file */
};
/* Directories are refused with -EISDIR. */

struct io_stat {
    uint64_t size;
    int64_t mtime_ns;           /* modification time, ns since the epoch */
};

struct io_fs {
    /* *fh receives an opaque handle; release with close. */
    int (*open)(const struct io_fs *fs, const char *path, int flags, void **fh);
    int (*close)(const struct io_fs *fs, void *fh);
    /* Reads up to n bytes at off; *got < n only at the end of the file. */
    int (*read)(const struct io_fs *fs, void *fh, void *buf, size_t n, uint64_t off, size_t *got);
    /* Writes all n bytes at off (the file grows as needed). */
    int (*write)(const struct io_fs *fs, void *fh, const void *buf, size_t n, uint64_t off);
    /* Makes every earlier write and truncate of this file durable. */
    int (*sync)(const struct io_fs *fs, void *fh);
    int (*truncate)(const struct io_fs *fs, void *fh, uint64_t size);
    int (*stat)(const struct io_fs *fs, void *fh, struct io_stat *st);
    /* Maps the first n (> 0) bytes read-only and private; the mapping outlives
     * the handle. Release with unmap. */
    int (*map)(const struct io_fs *fs, void *fh, size_t n, const void **addr);
    int (*unmap)(const struct io_fs *fs, const void *addr, size_t n);
    /* Atomically replaces `to` by `from`, then syncs the directory holding them. */
    int (*rename)(const struct io_fs *fs, const char *from, const char *to);
    /* Removes the directory entry at path (a link itself, not its target). */
    int (*remove)(const struct io_fs *fs, const char *path);
    void *ctx;
};

/* The real file system (open/pread/pwrite/fsync/ftruncate/flock/mmap/rename).
 * Static; never freed. */
const struct io_fs *io_fs_posix(void);

/* fs, or io_fs_posix() when fs is NULL. */
const struct io_fs *io_fs_or_posix(const struct io_fs *fs);

/* The file's size through fs->stat. */
int io_size(const struct io_fs *fs, void *fh, uint64_t *size);

/* The cause an io_fs code stands for ("a FIFO, not a regular file", or
 * strerror's text for an errno value). Static storage. */
const char *io_strerror(int rc);

/* Reads the whole file at path (opened with `flags`, IO_OPEN_READ plus
 * IO_OPEN_NOFOLLOW at most) into a malloc'd buffer with a NUL after its
 * *len bytes; -EFBIG when it holds more than max bytes. */
int io_read_all(const struct io_fs *fs, const char *path, int flags, size_t max, char **buf, size_t *len);

#endif
