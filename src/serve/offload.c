/* serve/offload.c - the worker threads of offload.h: a ring of tasks under
 * one mutex, workers waiting on a condition variable. */
#include "serve/offload.h"

#include <pthread.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/err.h"

#define OFFLOAD_MAX_THREADS 16

struct task { offload_fn fn; void *arg; };

struct offload {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct task *ring;
    int cap, head, len;
    int quit;
    int nice;
    pthread_t th[OFFLOAD_MAX_THREADS];
    int n_th;
};

static void *worker(void *arg)
{
    struct offload *o = arg;
    if (o->nice > 0) {   /* this thread only: on Linux the nice value is per thread */
        id_t tid = (id_t)syscall(SYS_gettid);
        int now = getpriority(PRIO_PROCESS, tid);
        (void)setpriority(PRIO_PROCESS, tid, now + o->nice);
    }
    pthread_mutex_lock(&o->mu);
    for (;;) {
        while (!o->quit && o->len == 0) pthread_cond_wait(&o->cv, &o->mu);
        if (o->len == 0) break;     /* quit, and nothing left to run */
        struct task t = o->ring[o->head];
        o->head = (o->head + 1) % o->cap;
        o->len--;
        pthread_mutex_unlock(&o->mu);
        t.fn(t.arg);
        pthread_mutex_lock(&o->mu);
    }
    pthread_mutex_unlock(&o->mu);
    return NULL;
}

int serve_offload_new(int n_threads, int max_tasks, int nice, struct offload **out, struct colibri_err *err)
{
    if (n_threads < 1 || n_threads > OFFLOAD_MAX_THREADS || max_tasks < 1)
        return base_err_set(err, COLIBRI_EINVAL, "offload: %d threads (1..%d) and %d tasks (>= 1)", n_threads,
                            OFFLOAD_MAX_THREADS, max_tasks);
    struct offload *o = calloc(1, sizeof *o);
    if (!o || !(o->ring = calloc((size_t)max_tasks, sizeof *o->ring))) {
        free(o);
        return base_err_set(err, COLIBRI_ENOMEM, "offload: out of memory for %d tasks", max_tasks);
    }
    o->cap = max_tasks;
    o->nice = nice;
    pthread_mutex_init(&o->mu, NULL);
    pthread_cond_init(&o->cv, NULL);
    for (int i = 0; i < n_threads; i++) {
        if (pthread_create(&o->th[i], NULL, worker, o)) {
            serve_offload_free(o);
            return base_err_set(err, COLIBRI_ENOMEM, "offload: cannot start worker thread %d", i);
        }
        o->n_th++;
    }
    *out = o;
    return 0;
}

int serve_offload_submit(struct offload *o, offload_fn fn, void *arg)
{
    pthread_mutex_lock(&o->mu);
    int rc = 0;
    if (o->len == o->cap) rc = COLIBRI_ENOMEM;
    else {
        o->ring[(o->head + o->len) % o->cap] = (struct task){ fn, arg };
        o->len++;
        pthread_cond_signal(&o->cv);
    }
    pthread_mutex_unlock(&o->mu);
    return rc;
}

void serve_offload_free(struct offload *o)
{
    if (!o) return;
    pthread_mutex_lock(&o->mu);
    o->quit = 1;
    pthread_cond_broadcast(&o->cv);
    pthread_mutex_unlock(&o->mu);
    for (int i = 0; i < o->n_th; i++) pthread_join(o->th[i], NULL);
    pthread_mutex_destroy(&o->mu);
    pthread_cond_destroy(&o->cv);
    free(o->ring);
    free(o);
}
