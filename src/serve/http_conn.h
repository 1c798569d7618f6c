/* serve/http_conn.h - the server's connections between accept and close:
 * request deadlines, waiting for a job without holding a thread, noticing
 * clients that went away, and closing after a refused upload without a reset.
 * Internal to src/serve/ (used by http.c).
 *
 * The HTTP daemon runs a few event-loop threads; a request that waits for its
 * job suspends its connection (libmicrohttpd's suspend/resume) instead of
 * blocking one of them. The job's on_change hook resumes it. Connections
 * are admitted by client (conn_admit.h: per address or IPv6 /64, with a
 * share of the table kept for clients not yet seen); when the table is full
 * the connection idle longest is shut down to make room. One watcher
 * thread, every WATCH_MS:
 *   - shuts down connections whose current request is not fully received by
 *     its deadline (a client that trickles its headers or body one byte at a
 *     time would otherwise hold the connection for ever: libmicrohttpd's own
 *     timeout only counts idle time);
 *   - polls suspended connections for a hang-up and cancels their job;
 *   - drains, then closes, sockets kept open after a 413 so the client reads
 *     the response instead of a reset.
 *
 * Locking: the watch's mutex is taken before a job's mu, never after it. The
 * on_change hook runs under the job's mu and takes no other lock of ours.
 * All functions are thread-safe. */
#ifndef COLIBRI_SERVE_HTTP_CONN_H
#define COLIBRI_SERVE_HTTP_CONN_H

#include <sys/socket.h>

#include "colibri.h"
#include "serve/job.h"

struct MHD_Connection;
struct conn_watch;
struct conn;

/* A request waiting for its job on a suspended connection. Embedded in the
 * request's (or the stream's) state; `suspended` is under job->mu, `conn`
 * under the watch's mutex. */
struct waiter {
    struct conn_watch *cw;
    struct MHD_Connection *mc;
    struct conn *conn;          /* NULL once the connection closed or detached */
    struct job *job;            /* not owned; NULL when not attached */
    int suspended;
};

/* Connections admitted (serve/conn_admit.h): `limit` open in all, per_key
 * from one client (IPv4 address or IPv6 /64), `reserve` of the limit kept
 * for clients holding none. */
struct conn_limits { int limit, per_key, reserve; };

/* Starts the watcher thread. timeout_s bounds how long one request may take
 * to arrive; linger_s how long a refused upload is drained after its 413. */
int  conn_watch_new(double timeout_s, double linger_s, const struct conn_limits *lim, struct conn_watch **out,
                    struct colibri_err *err);
/* Stops the watcher and closes lingering sockets. Every conn must be closed. */
void conn_watch_free(struct conn_watch *cw);

/* 1 when a connection from peer sa may be accepted (the accept policy):
 * its client is under its own limit and the table has room for it, made
 * if need be by shutting down the connection idle longest (no request in
 * progress); 0 to refuse it. */
int  serve_conn_admit(struct conn_watch *cw, const struct sockaddr *sa, socklen_t len);
/* A new connection on fd from peer sa, counted for its client; its first
 * request is due within the timeout. NULL when out of memory (the caller
 * closes the connection). */
struct conn *conn_open(struct conn_watch *cw, int fd, const struct sockaddr *sa, socklen_t len);
/* The connection is closing (fd still open). Keeps fd's socket open a while
 * when conn_linger() was called, then frees c. */
void conn_close(struct conn_watch *cw, struct conn *c);
/* The current request arrived in full: no deadline while it is handled. */
void conn_request_received(struct conn_watch *cw, struct conn *c);
/* The response was sent: the next request is due within the timeout. */
void conn_request_done(struct conn_watch *cw, struct conn *c);
/* The response refuses a body that is left unread: drain it after close. */
void conn_linger(struct conn_watch *cw, struct conn *c);

/* Attaches w (for connection mc, its conn c) to job j: on_change and the
 * hang-up poll now wake it. */
void waiter_attach(struct conn_watch *cw, struct waiter *w, struct MHD_Connection *mc, struct conn *c,
                   struct job *j);
/* 1 when j's progress (serve_job_progress: events, or a group's changes) is past
 * `seen`, or j is finished or cancelled (the
 * caller goes on); else suspends the connection and returns 0 (the caller
 * returns to libmicrohttpd and is called again once j changes). Must be
 * called from the connection's handler or content reader. */
int  waiter_wait(struct waiter *w, int seen);
/* Detaches w: j no longer wakes it. Idempotent. */
void waiter_detach(struct waiter *w);
/* Cancels every attached job and resumes its connection; later attaches
 * come back cancelled. Called before the daemon stops. */
void conn_watch_cancel_all(struct conn_watch *cw);

#endif
