/* tests/unit/io_fault.h - a fault-injecting io_fs layer (io/file.h) for
 * the crash and I/O-error tests; linked into the test programs only, never
 * into libcolibri.
 *
 * It wraps another io_fs and can
 *  - fail the Nth call (counting every call, or only the kinds named in
 *    fail_only, e.g. the Nth read), once or from then on, and
 *  - "crash" at the Nth sync: the writes and truncations issued since the
 *    file's last sync are each kept, dropped, torn (a prefix kept) or garbled
 *    (bytes changed), chosen by a seeded RNG or forced; every later call fails
 *    with -EIO, as if the process had died.
 * Until a file is synced, the layer holds its writes in memory (reads and
 * stat see them), which is what makes dropping them possible. Mappings and
 * reads of files without pending writes pass through to the base layer's
 * bytes (no copy). A mutex guards the counters and the pending writes, so
 * reader threads (model/expert_io.c) may share one layer.
 */
#ifndef COLIBRI_TESTS_IO_FAULT_H
#define COLIBRI_TESTS_IO_FAULT_H

#include <stdint.h>

#include "io/file.h"

enum io_fate {
    IO_FATE_RANDOM = 0,     /* each unsynced operation: one of the four below, by the RNG */
    IO_FATE_KEEP   = 1,     /* applied as issued */
    IO_FATE_DROP   = 2,     /* never reaches the file */
    IO_FATE_TORN   = 3,     /* a write keeps only a random prefix */
    IO_FATE_GARBLE = 4,     /* a write lands with some bytes changed */
};

/* The calls fail_only can select. */
enum io_fault_op {
    IO_OP_OPEN = 1 << 0, IO_OP_CLOSE = 1 << 1, IO_OP_READ = 1 << 2, IO_OP_WRITE = 1 << 3,
    IO_OP_SYNC = 1 << 4, IO_OP_TRUNCATE = 1 << 5, IO_OP_STAT = 1 << 6, IO_OP_MAP = 1 << 7,
    IO_OP_UNMAP = 1 << 8, IO_OP_RENAME = 1 << 9, IO_OP_REMOVE = 1 << 10,
};

struct io_fault_opts {
    int fail_call;          /* 1-based call to fail with -EIO; 0 = none */
    unsigned fail_only;     /* io_fault_op bits: only these calls count for fail_call; 0 = every call */
    int fail_persist;       /* 1: every call after fail_call fails too */
    int crash_sync;         /* 1-based sync call at which to crash; 0 = none */
    enum io_fate fate;      /* what happens to unsynced operations at the crash */
    uint64_t seed;          /* RNG for IO_FATE_RANDOM, TORN and GARBLE */
};

struct io_fault;

/* Wraps base. Free with io_fault_free() after every handle opened through
 * it is closed. *io points into the returned object. */
int  io_fault_new(const struct io_fs *base, const struct io_fault_opts *o,
                  struct io_fault **out, const struct io_fs **io);
void io_fault_free(struct io_fault *f);
/* Calls made so far (every operation counts), calls of the fail_only kinds
 * so far, syncs so far, and whether the injected failure or crash has
 * happened. */
int io_fault_calls(const struct io_fault *f);
int io_fault_counted(const struct io_fault *f);
int io_fault_syncs(const struct io_fault *f);
int io_fault_tripped(const struct io_fault *f);

#endif
