/* kv/fileio.h - the one interface through which KV-file code touches the
 * file system, so tests can break it.
 *
 * A struct kv_io is a table of function pointers plus a context. The POSIX
 * implementation (kv_io_posix) is what the engine uses; the fault layer
 * (kv_io_fault_*) wraps another kv_io and can
 *  - fail the Nth call (counting every call), once or from then on, and
 *  - "crash" at the Nth sync: the writes and truncations issued since the
 *    file's last sync are each kept, dropped, torn (a prefix kept) or garbled
 *    (bytes changed), chosen by a seeded RNG or forced; every later call fails
 *    with -EIO, as if the process had died.
 * Until a file is synced, the fault layer holds its writes in memory (reads
 * and size see them), which is what makes dropping them possible.
 *
 * Every function returns 0 or a negative errno value; kv/persist.c turns those
 * into COLIBRI_E* codes with the path in the message. Paths are plain C
 * strings. A kv_io is read-only after setup, but the fault layer's counters
 * change with each call: one thread per fault layer.
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

/* ---- fault layer (tests) ---- */

enum kv_io_fate {
    KV_FATE_RANDOM = 0,     /* each unsynced operation: one of the four below, by the RNG */
    KV_FATE_KEEP   = 1,     /* applied as issued */
    KV_FATE_DROP   = 2,     /* never reaches the file */
    KV_FATE_TORN   = 3,     /* a write keeps only a random prefix */
    KV_FATE_GARBLE = 4,     /* a write lands with some bytes changed */
};

struct kv_io_fault_opts {
    int fail_call;          /* 1-based call to fail with -EIO; 0 = none */
    int fail_persist;       /* 1: every call after fail_call fails too */
    int crash_sync;         /* 1-based sync call at which to crash; 0 = none */
    enum kv_io_fate fate;   /* what happens to unsynced operations at the crash */
    uint64_t seed;          /* RNG for KV_FATE_RANDOM, TORN and GARBLE */
};

struct kv_io_fault;         /* fileio_fault.c */

/* Wraps base. Free with kv_io_fault_free() after every handle opened through
 * it is closed. *io points into the returned object. */
int  kv_io_fault_new(const struct kv_io *base, const struct kv_io_fault_opts *o,
                     struct kv_io_fault **out, const struct kv_io **io);
void kv_io_fault_free(struct kv_io_fault *f);
/* Calls made so far (every operation counts), syncs so far, and whether the
 * injected failure or crash has happened. */
int kv_io_fault_calls(const struct kv_io_fault *f);
int kv_io_fault_syncs(const struct kv_io_fault *f);
int kv_io_fault_tripped(const struct kv_io_fault *f);

#endif
