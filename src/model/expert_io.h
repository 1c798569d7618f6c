/* model/expert_io.h - the streamed store's reads: a checkpoint's files opened
 * for direct I/O and a pool of reader threads, so that many reads are in
 * flight at once.
 *
 * A request is a list of ranges (file, offset, bytes, destination) that the
 * caller fills; the pool splits each range into pieces of at most
 * EXPERT_IO_PIECE bytes and its threads read the pieces in parallel. When the
 * last piece is read the pool calls the request's done callback from a
 * reader thread, without holding the pool's lock. Two queues: urgent
 * (someone waits) before prefetch (speculative); a queued request can be
 * promoted.
 *
 * Every file access goes through an io_fs (io/file.h), so tests can fail a
 * chosen read; the direct reads go straight into the destination (no copy).
 *
 * Direct I/O: each file is also opened with O_DIRECT. A range given with
 * `direct` set must start at a multiple of EXPERT_IO_ALIGN in the file, have
 * a length that is a multiple of it, and a destination aligned to it; it is
 * then read with O_DIRECT, bypassing the page cache. Where the file system
 * refuses (tmpfs, some network file systems) the file is read through the
 * page cache instead, and the reason is logged once. A range that reaches
 * past the end of the file is read up to the end.
 *
 * Every read first checks the file's size and mtime against those it had at
 * open: a checkpoint changed on disk fails the request with the file's name,
 * as does a short read or an I/O error (file and offset named).
 *
 * Threads: submit/promote may be called from any thread. */
#ifndef COLIBRI_MODEL_EXPERT_IO_H
#define COLIBRI_MODEL_EXPERT_IO_H

#include <stddef.h>
#include <stdint.h>

#include "colibri.h"

#define EXPERT_IO_ALIGN 4096
#define EXPERT_IO_PIECE (4u << 20)
#define EXPERT_IO_MAX_RANGES 8

struct expert_io;

struct expert_io_range {
    int file;
    uint64_t off;
    size_t bytes;
    uint8_t *dst;
    int direct;                 /* aligned as described above */
};

struct expert_io_req {
    /* the caller's */
    int n_ranges;
    struct expert_io_range r[EXPERT_IO_MAX_RANGES];
    void (*done)(struct expert_io_req *q, void *user);   /* rc and msg set */
    void *user;
    /* set before done is called */
    int rc;
    char msg[256];
    /* the pool's */
    int queue;                  /* 0 not queued, 1 prefetch, 2 urgent */
    int cur_range, left;
    uint64_t cur_off;
    struct expert_io_req *prev, *next;
};

struct io_fs;
/* Opens the files through fs (NULL: the real file system; it must outlive
 * the pool), read-only, plus O_DIRECT where allowed, and starts n_threads
 * readers. bytes_read is incremented as pieces are read. */
int model_expert_io_new(const struct io_fs *fs, const char *const *paths, int n_files, int n_threads,
                        _Atomic uint64_t *bytes_read, struct expert_io **out, struct colibri_err *err);
/* Queues q (not already queued or in flight); urgent goes first. */
void model_expert_io_submit(struct expert_io *io, struct expert_io_req *q, int urgent);
/* Moves q to the urgent queue if it is still waiting in the prefetch queue. */
void model_expert_io_promote(struct expert_io *io, struct expert_io_req *q);
/* 1 when the file is read with O_DIRECT, 0 through the page cache. */
int model_expert_io_direct(const struct expert_io *io, int file);
/* Waits for the readers to finish what they hold, drops what is queued
 * (without calling done), stops the threads and closes the files. */
void model_expert_io_free(struct expert_io *io);

#endif
