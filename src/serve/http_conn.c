/* serve/http_conn.c - connection deadlines, suspended waits, hang-ups and
 * lingering closes; see http_conn.h. */
#include "serve/http_conn.h"

#include <errno.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "base/err.h"
#include "serve/conn_admit.h"

#define WATCH_MS 50
#define MAX_LINGER 64           /* sockets drained at once; more are closed at once */
#define LINGER_BYTES (1 << 24)  /* most bytes drained from one socket */

struct conn {
    struct conn *prev, *next;
    int fd;
    double deadline;            /* monotonic seconds; 0 = none */
    int shut;                   /* shut down for missing its deadline */
    int linger;
    int evicted;                /* closed to make room: no longer counted in the admission table */
    struct admit_key key;       /* the client's key (conn_admit.h) */
    struct waiter *w;           /* the attached wait, or NULL */
};

struct drain { int fd; double until; size_t drained; };

struct conn_watch {
    pthread_mutex_t mu;
    pthread_cond_t cv;          /* wakes the watcher to quit */
    pthread_t thread;
    int quit, closing;
    double timeout_s, linger_s;
    struct conn *head;          /* every open connection */
    struct conn_admit *adm;     /* open connections per client key */
    struct drain lg[MAX_LINGER];
    int n_lg;
    struct pollfd *pfd;         /* watcher scratch */
    struct waiter **pw;
    size_t cap;
};

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

/* job on_change hook, under job->mu. */
static void waiter_wake(void *arg)
{
    struct waiter *w = arg;
    if (w->suspended) {
        w->suspended = 0;
        MHD_resume_connection(w->mc);
    }
}

/* Cancels w's job and wakes its connection; cw->mu held. */
static void waiter_cancel(struct waiter *w)
{
    serve_job_cancel(w->job);
    pthread_mutex_lock(&w->job->mu);
    waiter_wake(w);
    pthread_mutex_unlock(&w->job->mu);
}

/* Grows the scratch arrays to n entries; cw->mu held. 0 or -1. */
static int reserve(struct conn_watch *cw, size_t n)
{
    if (n <= cw->cap) return 0;
    size_t cap = cw->cap ? 2 * cw->cap : 256;
    while (cap < n) cap *= 2;
    struct pollfd *p = realloc(cw->pfd, cap * sizeof *p);
    if (!p) return -1;
    cw->pfd = p;
    struct waiter **q = realloc(cw->pw, cap * sizeof *q);
    if (!q) return -1;
    cw->pw = q;
    cw->cap = cap;
    return 0;
}

/* Reads and drops what a lingering socket has; 1 when it is done with. */
static int linger_step(struct drain *l, double now)
{
    char buf[16384];
    for (;;) {
        ssize_t n = recv(l->fd, buf, sizeof buf, MSG_DONTWAIT);
        if (n > 0) {
            l->drained += (size_t)n;
            if (l->drained > LINGER_BYTES) return 1;
            continue;
        }
        if (n == 0) return 1;
        if (errno == EINTR) continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK) return 1;
        return now > l->until;
    }
}

static void watch_once(struct conn_watch *cw)
{
    double now = now_s();
    size_t n = 0, n_conn = 0;
    for (struct conn *c = cw->head; c; c = c->next) n_conn++;
    int have = reserve(cw, n_conn) == 0;
    for (struct conn *c = cw->head; c; c = c->next) {
        if (c->deadline > 0 && now > c->deadline && !c->shut) {
            shutdown(c->fd, SHUT_RDWR);     /* libmicrohttpd sees the end and closes it */
            c->shut = 1;
        }
        if (have && c->w) {
            cw->pfd[n] = (struct pollfd){ .fd = c->fd, .events = POLLRDHUP };
            cw->pw[n++] = c->w;
        }
    }
    if (n && poll(cw->pfd, n, 0) > 0)
        for (size_t i = 0; i < n; i++)
            if (cw->pfd[i].revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) waiter_cancel(cw->pw[i]);
    for (int i = 0; i < cw->n_lg;) {
        if (linger_step(&cw->lg[i], now)) {
            close(cw->lg[i].fd);
            cw->lg[i] = cw->lg[--cw->n_lg];
        } else {
            i++;
        }
    }
}

static void *watch_main(void *arg)
{
    struct conn_watch *cw = arg;
    pthread_mutex_lock(&cw->mu);
    while (!cw->quit) {
        watch_once(cw);
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += WATCH_MS * 1000000L;
        if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
        pthread_cond_timedwait(&cw->cv, &cw->mu, &ts);
    }
    pthread_mutex_unlock(&cw->mu);
    return NULL;
}

int conn_watch_new(double timeout_s, double linger_s, const struct conn_limits *lim, struct conn_watch **out,
                   struct colibri_err *err)
{
    struct conn_watch *cw = calloc(1, sizeof *cw);
    if (!cw) return base_err_set(err, COLIBRI_ENOMEM, "out of memory");
    if (!(cw->adm = serve_admit_new(lim->limit, lim->per_key, lim->reserve))) {
        free(cw);
        return base_err_set(err, COLIBRI_ENOMEM, "out of memory");
    }
    pthread_mutex_init(&cw->mu, NULL);
    pthread_cond_init(&cw->cv, NULL);
    cw->timeout_s = timeout_s;
    cw->linger_s = linger_s;
    if (pthread_create(&cw->thread, NULL, watch_main, cw)) {
        pthread_mutex_destroy(&cw->mu);
        pthread_cond_destroy(&cw->cv);
        serve_admit_free(cw->adm);
        free(cw);
        return base_err_set(err, COLIBRI_EIO, "cannot start the connection watcher thread");
    }
    *out = cw;
    return 0;
}

/* Shuts down the connection idle longest (waiting for a request: between
 * requests, or one not yet received in full), which libmicrohttpd then
 * closes; it stops counting at once. 1 when there was one; cw->mu held. */
static int evict_idle(struct conn_watch *cw)
{
    struct conn *victim = NULL;
    for (struct conn *c = cw->head; c; c = c->next)
        if (c->deadline > 0 && !c->shut && !c->evicted && !c->w && (!victim || c->deadline < victim->deadline))
            victim = c;
    if (!victim) return 0;
    shutdown(victim->fd, SHUT_RDWR);
    victim->shut = victim->evicted = 1;
    serve_admit_remove(cw->adm, &victim->key);
    return 1;
}

int serve_conn_admit(struct conn_watch *cw, const struct sockaddr *sa, socklen_t len)
{
    struct admit_key k = serve_admit_key(sa, len);
    pthread_mutex_lock(&cw->mu);
    enum admit_verdict v = serve_admit_ask(cw->adm, &k);
    if (v == ADMIT_TABLE_FULL && evict_idle(cw)) v = serve_admit_ask(cw->adm, &k);
    pthread_mutex_unlock(&cw->mu);
    return v == ADMIT_YES;
}

void conn_watch_free(struct conn_watch *cw)
{
    if (!cw) return;
    pthread_mutex_lock(&cw->mu);
    cw->quit = 1;
    pthread_cond_signal(&cw->cv);
    pthread_mutex_unlock(&cw->mu);
    pthread_join(cw->thread, NULL);
    for (int i = 0; i < cw->n_lg; i++) close(cw->lg[i].fd);
    while (cw->head) {          /* only if the daemon failed to report a close */
        struct conn *c = cw->head;
        cw->head = c->next;
        if (c->w) c->w->conn = NULL;
        free(c);
    }
    free(cw->pfd);
    free(cw->pw);
    serve_admit_free(cw->adm);
    pthread_mutex_destroy(&cw->mu);
    pthread_cond_destroy(&cw->cv);
    free(cw);
}

struct conn *conn_open(struct conn_watch *cw, int fd, const struct sockaddr *sa, socklen_t len)
{
    struct conn *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->fd = fd;
    c->key = serve_admit_key(sa, len);
    pthread_mutex_lock(&cw->mu);
    if (serve_admit_add(cw->adm, &c->key)) {
        pthread_mutex_unlock(&cw->mu);
        free(c);
        return NULL;
    }
    c->deadline = now_s() + cw->timeout_s;
    if (serve_admit_over(cw->adm, &c->key)) {
        shutdown(fd, SHUT_RDWR);    /* admitted on another thread at the same moment: one too many */
        c->shut = 1;
    }
    c->next = cw->head;
    if (cw->head) cw->head->prev = c;
    cw->head = c;
    pthread_mutex_unlock(&cw->mu);
    return c;
}

void conn_close(struct conn_watch *cw, struct conn *c)
{
    if (!c) return;
    pthread_mutex_lock(&cw->mu);
    if (c->prev) c->prev->next = c->next;
    else cw->head = c->next;
    if (c->next) c->next->prev = c->prev;
    if (c->w) c->w->conn = NULL;
    if (!c->evicted) serve_admit_remove(cw->adm, &c->key);
    if (c->linger && !c->shut && cw->n_lg < MAX_LINGER && !cw->quit) {
        /* a second descriptor keeps the socket open after the daemon closes
         * its own; the FIN tells the client the response is complete */
        int d = dup(c->fd);
        if (d >= 0) {
            shutdown(d, SHUT_WR);
            cw->lg[cw->n_lg++] = (struct drain){ .fd = d, .until = now_s() + cw->linger_s };
        }
    }
    pthread_mutex_unlock(&cw->mu);
    free(c);
}

static void set_deadline(struct conn_watch *cw, struct conn *c, int due)
{
    if (!c) return;
    pthread_mutex_lock(&cw->mu);
    c->deadline = due ? now_s() + cw->timeout_s : 0;
    pthread_mutex_unlock(&cw->mu);
}

void conn_request_received(struct conn_watch *cw, struct conn *c) { set_deadline(cw, c, 0); }
void conn_request_done(struct conn_watch *cw, struct conn *c) { set_deadline(cw, c, 1); }

void conn_linger(struct conn_watch *cw, struct conn *c)
{
    if (!c) return;
    pthread_mutex_lock(&cw->mu);
    c->linger = 1;
    pthread_mutex_unlock(&cw->mu);
}

void waiter_attach(struct conn_watch *cw, struct waiter *w, struct MHD_Connection *mc, struct conn *c,
                   struct job *j)
{
    w->cw = cw;
    w->mc = mc;
    w->job = j;
    w->suspended = 0;
    pthread_mutex_lock(&j->mu);
    j->on_change = waiter_wake;
    j->on_change_arg = w;
    pthread_mutex_unlock(&j->mu);
    pthread_mutex_lock(&cw->mu);
    w->conn = c;
    if (c) c->w = w;
    if (cw->closing) serve_job_cancel(j);
    pthread_mutex_unlock(&cw->mu);
}

int waiter_wait(struct waiter *w, int seen)
{
    struct job *j = w->job;
    pthread_mutex_lock(&j->mu);
    int news = j->finish != JOB_RUNNING || serve_job_progress(j) > seen || atomic_load(&j->cancelled);
    if (!news) {
        w->suspended = 1;
        MHD_suspend_connection(w->mc);
    }
    pthread_mutex_unlock(&j->mu);
    return news;
}

void waiter_detach(struct waiter *w)
{
    if (!w->job) return;
    pthread_mutex_lock(&w->cw->mu);
    if (w->conn) w->conn->w = NULL;
    w->conn = NULL;
    pthread_mutex_unlock(&w->cw->mu);
    pthread_mutex_lock(&w->job->mu);
    w->job->on_change = NULL;
    w->job->on_change_arg = NULL;
    pthread_mutex_unlock(&w->job->mu);
    w->job = NULL;
}

void conn_watch_cancel_all(struct conn_watch *cw)
{
    pthread_mutex_lock(&cw->mu);
    cw->closing = 1;
    for (struct conn *c = cw->head; c; c = c->next)
        if (c->w) waiter_cancel(c->w);
    pthread_mutex_unlock(&cw->mu);
}
