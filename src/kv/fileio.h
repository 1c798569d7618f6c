/* kv/fileio.h - the one interface through which KV-file code touches the
 * file system, so tests can break it.
 *
 * A struct kv_io is a table of function pointers plus a context. The POSIX
 * implementation (kv_io_posix) is what the engine uses; the tests wrap it in
 * a fault-injecting layer (tests/unit/fileio_fault.h, built only into the
 * tests) that fails chosen calls or "crashes" at a chosen sync.
 *
 * Every function returns 0 or a negative errno value; kv/persist.c turns those
 * into COLIBRI_E* codes with the path in the message. Paths are plain C
 * strings. A kv_io is read-only after setup.
 */
#ifndef COLIBRI_KV_FILEIO_H
#define COLIBRI_KV_FILEIO_H

#include <stddef.h>
#include <stdint.h>

enum kv_io_flags {
    KV_IO_READ   = 0,       /* read only, shared */
    KV_IO_WRITE  = 1 << 0,  /* read + write; takes an exclusive non-blocking lock (-EWOULDBLOCK if held) */
    KV_IO_CREATE = 1 << 1,  /* with WRITE: create if absent, truncate to 0 if present */
};

struct kv_io {
    /* *fh receives an opaque handle; release with close. */
    int (*open)(const struct kv_io *io, const char *path, int flags, void **fh);
    int (*close)(const struct kv_io *io, void *fh);
    /* Reads up to n bytes at off; *got < n only at end of file. */
    int (*read)(const struct kv_io *io, void *fh, void *buf, size_t n, uint64_t off, size_t *got);
    /* Writes all n bytes at off (the file grows as needed). */
    int (*write)(const struct kv_io *io, void *fh, const void *buf, size_t n, uint64_t off);
    /* Makes every earlier write and truncate of this file durable. */
    int (*sync)(const struct kv_io *io, void *fh);
    int (*truncate)(const struct kv_io *io, void *fh, uint64_t size);
    int (*size)(const struct kv_io *io, void *fh, uint64_t *size);
    /* Atomically replaces `to` by `from`, then syncs the directory holding them. */
    int (*rename)(const struct kv_io *io, const char *from, const char *to);
    void *ctx;
};

/* The real file system (pread/pwrite/fsync/ftruncate/flock/rename). Static;
 * never freed. */
const struct kv_io *kv_io_posix(void);

#endif
