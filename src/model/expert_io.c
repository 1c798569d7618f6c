/* model/expert_io.c - reader threads over a checkpoint's files (contract in
 * expert_io.h). */
#include "model/expert_io.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/util.h"
#include "io/file.h"

_Static_assert(EXPERT_IO_ALIGN == IO_DIRECT_ALIGN, "expert ranges are aligned for io_fs's O_DIRECT reads");

struct io_file {
    char *path;
    void *fh, *fh_direct;       /* fh_direct NULL when O_DIRECT is not used */
    _Atomic int direct_ok;
    struct io_stat at_open;     /* size and mtime */
};

struct io_list { struct expert_io_req *head, *tail; };

struct expert_io {
    const struct io_fs *fs;
    struct io_file *files;
    int n_files;
    pthread_t *threads;
    int n_threads;
    pthread_mutex_t mu;
    pthread_cond_t work;
    struct io_list urgent, prefetch;
    int stop;
    _Atomic uint64_t *bytes_read;
};

static void list_push(struct io_list *l, struct expert_io_req *q)
{
    q->next = NULL;
    q->prev = l->tail;
    if (l->tail) l->tail->next = q;
    else l->head = q;
    l->tail = q;
}

static void list_remove(struct io_list *l, struct expert_io_req *q)
{
    if (q->prev) q->prev->next = q->next;
    else l->head = q->next;
    if (q->next) q->next->prev = q->prev;
    else l->tail = q->prev;
    q->prev = q->next = NULL;
}

static struct io_list *list_of(struct expert_io *io, struct expert_io_req *q)
{
    return q->queue == 2 ? &io->urgent : &io->prefetch;
}

static int check_file(const struct expert_io *io, const struct io_file *f, char *msg, size_t n)
{
    struct io_stat st;
    int rc = io->fs->stat(io->fs, f->fh, &st);
    if (rc) {
        snprintf(msg, n, "%s: cannot stat: %s", f->path, io_strerror(rc));
        return COLIBRI_EIO;
    }
    if (st.size != f->at_open.size || st.mtime_ns != f->at_open.mtime_ns) {
        snprintf(msg, n, "%s changed on disk while in use (size %llu, was %llu); reload the model", f->path,
                 (unsigned long long)st.size, (unsigned long long)f->at_open.size);
        return COLIBRI_EIO;
    }
    return 0;
}

/* Reads bytes at off into dst; with direct, through fh_direct unless the
 * file system refused it before (then, or on EINVAL now, through the page
 * cache). Stops at the end of the file. */
static int read_piece(struct expert_io *io, struct io_file *f, uint64_t off, size_t bytes, uint8_t *dst, int direct,
                      char *msg, size_t n)
{
    int rc = check_file(io, f, msg, n);
    if (rc) return rc;
    size_t want = off >= f->at_open.size ? 0 : (size_t)(f->at_open.size - off);
    if (want > bytes) want = bytes;
    if (!want) return 0;
    size_t got = 0;
    int use_direct = direct && f->fh_direct && atomic_load_explicit(&f->direct_ok, memory_order_relaxed);
    /* O_DIRECT reads whole blocks: the aligned length, though the end of the
     * file may lie inside the last block */
    if (use_direct) rc = io->fs->read(io->fs, f->fh_direct, dst, bytes, off, &got);
    if (use_direct && rc == -EINVAL) {
        if (atomic_exchange(&f->direct_ok, 0))
            base_log_msg("info", "%s: O_DIRECT read refused (%s); reading it through the page cache", f->path,
                         io_strerror(rc));
        use_direct = 0;
    }
    if (!use_direct) rc = io->fs->read(io->fs, f->fh, dst, want, off, &got);
    if (rc || got < want) {
        snprintf(msg, n, "%s: %s reading %zu bytes at offset %llu", f->path, rc ? io_strerror(rc) : "short read",
                 want - got, (unsigned long long)(off + got));
        return COLIBRI_EIO;
    }
    atomic_fetch_add_explicit(io->bytes_read, want, memory_order_relaxed);
    return 0;
}

static void *reader_main(void *arg)
{
    struct expert_io *io = arg;
    pthread_mutex_lock(&io->mu);
    for (;;) {
        while (!io->stop && !io->urgent.head && !io->prefetch.head) pthread_cond_wait(&io->work, &io->mu);
        if (io->stop) break;
        struct expert_io_req *q = io->urgent.head ? io->urgent.head : io->prefetch.head;
        /* claim the next piece of q; the last one claimed takes q off its queue */
        const struct expert_io_range *r = &q->r[q->cur_range];
        uint64_t poff = q->cur_off;
        size_t plen = r->bytes - (size_t)poff;
        if (plen > EXPERT_IO_PIECE) plen = EXPERT_IO_PIECE;
        q->cur_off += plen;
        if (q->cur_off >= r->bytes) {
            q->cur_range++;
            q->cur_off = 0;
        }
        if (q->cur_range >= q->n_ranges) {
            list_remove(list_of(io, q), q);
            q->queue = 0;
        }
        int failed = q->rc != 0;
        pthread_mutex_unlock(&io->mu);

        char msg[sizeof q->msg];
        int rc = failed ? 0 : read_piece(io, &io->files[r->file], r->off + poff, plen, r->dst + poff, r->direct,
                                         msg, sizeof msg);

        pthread_mutex_lock(&io->mu);
        if (rc && !q->rc) {
            q->rc = rc;
            memcpy(q->msg, msg, sizeof msg);
        }
        if (--q->left == 0) {
            pthread_mutex_unlock(&io->mu);
            q->done(q, q->user);
            pthread_mutex_lock(&io->mu);
        }
    }
    pthread_mutex_unlock(&io->mu);
    return NULL;
}

void model_expert_io_submit(struct expert_io *io, struct expert_io_req *q, int urgent)
{
    int pieces = 0;
    for (int i = 0; i < q->n_ranges; i++) pieces += (int)((q->r[i].bytes + EXPERT_IO_PIECE - 1) / EXPERT_IO_PIECE);
    q->rc = 0;
    q->msg[0] = 0;
    if (!pieces) {
        q->done(q, q->user);
        return;
    }
    pthread_mutex_lock(&io->mu);
    q->cur_range = 0;
    q->cur_off = 0;
    q->left = pieces;
    q->queue = urgent ? 2 : 1;
    list_push(list_of(io, q), q);
    pthread_cond_broadcast(&io->work);
    pthread_mutex_unlock(&io->mu);
}

void model_expert_io_promote(struct expert_io *io, struct expert_io_req *q)
{
    pthread_mutex_lock(&io->mu);
    if (q->queue == 1) {
        list_remove(&io->prefetch, q);
        q->queue = 2;
        list_push(&io->urgent, q);
    }
    pthread_mutex_unlock(&io->mu);
}

int model_expert_io_direct(const struct expert_io *io, int file)
{
    const struct io_file *f = &io->files[file];
    return f->fh_direct && atomic_load_explicit(&f->direct_ok, memory_order_relaxed);
}

void model_expert_io_free(struct expert_io *io)
{
    if (!io) return;
    pthread_mutex_lock(&io->mu);
    io->stop = 1;
    pthread_cond_broadcast(&io->work);
    pthread_mutex_unlock(&io->mu);
    for (int i = 0; i < io->n_threads; i++) pthread_join(io->threads[i], NULL);
    for (int i = 0; io->files && i < io->n_files; i++) {
        if (io->files[i].fh) io->fs->close(io->fs, io->files[i].fh);
        if (io->files[i].fh_direct) io->fs->close(io->fs, io->files[i].fh_direct);
        free(io->files[i].path);
    }
    free(io->files);
    free(io->threads);
    pthread_cond_destroy(&io->work);
    pthread_mutex_destroy(&io->mu);
    free(io);
}

int model_expert_io_new(const struct io_fs *fs, const char *const *paths, int n_files, int n_threads,
                        _Atomic uint64_t *bytes_read, struct expert_io **out, struct colibri_err *err)
{
    struct expert_io *io = calloc(1, sizeof *io);
    if (!io) return base_err_set(err, COLIBRI_ENOMEM, "expert reads: out of memory");
    io->fs = io_fs_or_posix(fs);
    pthread_mutex_init(&io->mu, NULL);
    pthread_cond_init(&io->work, NULL);
    io->bytes_read = bytes_read;
    int rc = 0;
    if (!(io->files = calloc((size_t)(n_files ? n_files : 1), sizeof *io->files)) ||
        !(io->threads = calloc((size_t)(n_threads ? n_threads : 1), sizeof *io->threads))) {
        rc = base_err_set(err, COLIBRI_ENOMEM, "expert reads: out of memory");
        goto fail;
    }
    io->n_files = n_files;
    for (int i = 0; i < n_files; i++) {
        struct io_file *f = &io->files[i];
        if (!(f->path = strdup(paths[i]))) {
            rc = base_err_set(err, COLIBRI_ENOMEM, "expert reads: out of memory");
            goto fail;
        }
        int e = io->fs->open(io->fs, f->path, IO_OPEN_READ, &f->fh);
        if (e) f->fh = NULL;
        if (e || (e = io->fs->stat(io->fs, f->fh, &f->at_open))) {
            rc = base_err_set(err, COLIBRI_EIO, "%s: cannot open for reading experts: %s", f->path, io_strerror(e));
            goto fail;
        }
        if ((e = io->fs->open(io->fs, f->path, IO_OPEN_READ | IO_OPEN_DIRECT, &f->fh_direct))) {
            f->fh_direct = NULL;
            base_log_msg("info", "%s: no O_DIRECT (%s); experts are read through the page cache", f->path,
                         io_strerror(e));
        }
        atomic_store(&f->direct_ok, f->fh_direct != NULL);
    }
    for (int i = 0; i < n_threads; i++) {
        if (pthread_create(&io->threads[i], NULL, reader_main, io)) {
            rc = base_err_set(err, COLIBRI_ENOMEM, "expert reads: cannot start reader thread %d of %d", i + 1,
                              n_threads);
            goto fail;
        }
        io->n_threads = i + 1;
    }
    *out = io;
    return 0;
fail:
    model_expert_io_free(io);
    return rc;
}
