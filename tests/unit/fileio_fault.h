/* tests/unit/fileio_fault.h - a fault-injecting kv_io layer (kv/fileio.h) for
 * the crash and I/O-error tests; linked into the test programs only, never
 * into libcolibri.
 *
 * It wraps another kv_io and can
 *  - fail the Nth call (counting every call), once or from then on, and
 *  - "crash" at the Nth sync: the writes and truncations issued since the
 *    file's last sync are each kept, dropped, torn (a prefix kept) or garbled
 *    (bytes changed), chosen by a seeded RNG or forced; every later call fails
 *    with -EIO, as if the process had died.
 * Until a file is synced, the layer holds its writes in memory (reads and size
 * see them), which is what makes dropping them possible. Its counters change
 * with each call: one thread per fault layer.
 */
#ifndef COLIBRI_TESTS_FILEIO_FAULT_H
#define COLIBRI_TESTS_FILEIO_FAULT_H

#include <stdint.h>

#include "kv/fileio.h"

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

struct kv_io_fault;

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
