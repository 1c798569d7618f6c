/* serve/serve_impl.h - the server object shared by serve.c (lifecycle) and
 * http.c (request handling). Internal to src/serve/.
 *
 * Everything here is written by serve_new() before the daemon starts and is
 * read-only afterwards, except the atomics and what sched/metrics guard
 * themselves. */
#ifndef COLIBRI_SERVE_IMPL_H
#define COLIBRI_SERVE_IMPL_H

#include <stdatomic.h>

#include "serve/cors.h"
#include "serve/metrics.h"
#include "serve/oai.h"
#include "serve/sched.h"
#include "serve/serve.h"
#include "serve/tls.h"

#define SERVE_ID_CAP 256        /* bytes of a model id, with its NUL */

struct MHD_Daemon;
struct conn_watch;
struct offload;

struct serve {
    struct serve_opts o;
    colibri_model *model;
    colibri_tokenizer *tok;
    char model_id[SERVE_ID_CAP];
    struct oai_model om;
    struct serve_cors cors;
    struct serve_tls tls;       /* HTTPS key and certificate (serve/tls.h); NULLs: plain HTTP */
    struct metrics met;
    struct sched *sched;
    struct MHD_Daemon *daemon;
    struct conn_watch *cw;      /* the daemon's connections (http_conn.h) */
    struct offload *prep;       /* prepares large generation requests off the event-loop threads (http.c) */
    struct resp_store *responses; /* /v1/responses kept for previous_response_id (resp_store.h) */
    int port;
    atomic_int stopping;        /* shutdown begun: no new requests */
    atomic_int inflight;        /* requests between their first call and their completion notice */
};

/* Starts the libmicrohttpd daemon on sv->o.host:port (http.c). */
int  http_start(struct serve *sv, struct colibri_err *err);
/* Stops accepting new connections (existing ones go on). */
void http_quiesce(struct serve *sv);
/* Closes every connection and joins the connection threads. */
void http_stop(struct serve *sv);

#endif
