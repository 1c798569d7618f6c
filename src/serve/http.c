/* serve/http.c - libmicrohttpd glue: routing, auth, the body size limit,
 * connection limits, CORS, JSON and SSE responses, the request log.
 *
 * Every GET endpoint answers HEAD too (libmicrohttpd sends the headers of
 * the GET answer without its body). OPTIONS on a known path answers 204 with
 * an Allow header; with --cors and an allowed Origin it is a CORS preflight
 * answer, and every answer to an allowed origin carries
 * Access-Control-Allow-Origin. Without --cors no Access-Control-* header is
 * ever sent. Preflights, /health and the chat page at / need no API key.
 *
 * The daemon runs HTTP_THREADS event-loop threads (epoll), so an idle or
 * slow connection costs a socket and a little memory, not a thread. No
 * handler blocks: a non-streaming request that waits for its job, and a
 * stream waiting for its next token, suspend their connection until the job
 * changes (http_conn.h). A client that closes its side while suspended is
 * noticed by the connection watcher, which cancels its job (freeing its slot
 * at the scheduler's next step). A failed write (the other way a disconnect
 * shows up during a stream) ends the response, and its free callback cancels
 * the job.
 *
 * A generation request whose body is over PREP_INLINE_MAX is prepared (JSON
 * parse, chat template, tokenization: seconds for a chat with thousands of
 * tools) on PREP_THREADS worker threads (serve/offload.h) while its
 * connection is suspended, so the event-loop threads go on reading and
 * answering every other connection meanwhile; smaller ones, cheap to
 * prepare, are prepared on the event-loop thread and never wait behind a
 * large one.
 *
 * Limits: --max-conns connections in all and --max-conns-per-addr from one
 * address (more are closed at accept); each request must arrive in full
 * within --timeout seconds of the connection being ready for it, and an idle
 * connection is closed after as long. */
#include <arpa/inet.h>
#include <netdb.h>
#include <errno.h>
#include <microhttpd.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <sys/resource.h>
#include <sys/socket.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/err.h"
#include "base/util.h"
#include "serve/api_conv.h"
#include "serve/http_conn.h"
#include "serve/info.h"
#include "serve/offload.h"
#include "serve/page.h"
#include "serve/reqlog.h"
#include "serve/serve_impl.h"

#define HTTP_THREADS 4
#define PREP_THREADS 2
#define PREP_INLINE_MAX (32 * 1024) /* bodies up to this are prepared on the event-loop thread */
#define PREP_QUEUE 256              /* requests waiting for a prep thread; past it, prepared inline */
#define PREP_NICE 10                /* large requests yield the CPU to the rest */
#define LINGER_S 2.0            /* how long an unread body is drained after an early answer */
#define TRIM_AFTER_BODY (256 * 1024)    /* a body this large is followed by a heap trim (trim_heap) */

enum route {
    R_NONE = 0, R_PAGE, R_HEALTH, R_MODELS, R_MODEL, R_METRICS, R_PROPS, R_SLOTS, R_TOKENIZE, R_DETOKENIZE,
    R_COMPLETIONS, R_CHAT, R_MESSAGES, R_RESPONSES, R_EMBEDDINGS, R_COUNT
};

/* Per-request state, from the first call of the access handler to the
 * completion notification. */
struct req {
    enum route route;
    char *url;                  /* a copy of the path, for routes with an argument and the log */
    char method[16];
    double t_arrival;           /* base_now_sec() at the first call */
    int status;                 /* of the response queued, 0 before */
    const char *allow;          /* the path's methods, for a 405's Allow header */
    enum route options;         /* OPTIONS on this path's route (R_NONE otherwise) */
    struct job *log_job;        /* a generation's job for the log line: one reference */
    struct conn *conn;          /* NULL if its registration failed */
    struct strbuf body;
    int received;               /* the body is complete */
    int body_announced;         /* Content-Length > 0 or Transfer-Encoding */
    struct job *job;            /* a non-streaming generation: one reference */
    struct waiter w;
    /* preparation on a prep thread: the connection is suspended from the
     * handoff until prep_run resumes it; prep_job (one reference) or
     * prep_err is its result */
    enum { PREP_NONE = 0, PREP_RUNNING, PREP_DONE } prep;
    struct serve *sv;
    struct MHD_Connection *mc;
    enum job_kind prep_kind;
    struct job *prep_job;
    struct oai_error prep_err;
    double t_body;              /* when it was handed off: the job's submit time */
    enum serve_api api;         /* the wire format of the answer (api_conv.h) */
    struct serve_api_turn turn; /* /v1/responses: what the request leaves for the answer */
};

/* A streaming response's state, owned by its content reader. */
struct stream {
    struct serve *sv;
    struct job *job;            /* one reference */
    struct waiter w;
    struct strbuf out;
    int next_ev, started, done;
    size_t chars;
    /* a group (n > 1): per choice, the events sent, the text length sent
     * (code points) and whether its finish chunk went out */
    int *c_next, *c_ended;
    size_t *c_chars;
    /* another API's stream: the chat chunks go to raw, its events to out */
    struct serve_api_stream *conv;
    struct strbuf raw;
};

/* Where a stream's chat chunks go. */
static struct strbuf *chunks(struct stream *st) { return st->conv ? &st->raw : &st->out; }

/* ------------------------------------------------------------ responses */

/* Access-Control-Allow-Origin for an allowed Origin (nothing without --cors). */
static void add_cors(struct serve *sv, struct MHD_Connection *c, struct MHD_Response *r)
{
    const char *origin = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Origin");
    const char *allow = serve_cors_allow(&sv->cors, origin);
    if (!allow) return;
    MHD_add_response_header(r, "Access-Control-Allow-Origin", allow);
    if (strcmp(allow, "*")) MHD_add_response_header(r, "Vary", "Origin");
}

/* Queues r (the caller destroys it) and records its status. */
static enum MHD_Result queue(struct serve *sv, struct req *rq, struct MHD_Connection *c, int status,
                             struct MHD_Response *r)
{
    add_cors(sv, c, r);
    enum MHD_Result ret = MHD_queue_response(c, (unsigned)status, r);
    if (ret == MHD_YES) rq->status = status;
    metrics_count_response(&sv->met, status);
    return ret;
}

static enum MHD_Result respond_n(struct serve *sv, struct req *rq, struct MHD_Connection *c, int status,
                                 const char *ctype, const char *body, size_t n)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(n, (void *)body, MHD_RESPMEM_MUST_COPY);
    if (!r) return MHD_NO;
    if (ctype) MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
    if (status == 401) MHD_add_response_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer");
    if (status == 405 && rq->allow) MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, rq->allow);
    /* the body may be partly unread: do not try to find the next request in it */
    if (status == 413) MHD_add_response_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
    enum MHD_Result ret = queue(sv, rq, c, status, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result respond(struct serve *sv, struct req *rq, struct MHD_Connection *c, int status,
                               const char *ctype, const char *body)
{
    return respond_n(sv, rq, c, status, ctype, body, strlen(body));
}

static enum MHD_Result respond_json(struct serve *sv, struct req *rq, struct MHD_Connection *c, int status,
                                    char *owned_json)
{
    if (!owned_json) return respond(sv, rq, c, 500, "application/json",
                                    "{\"error\":{\"message\":\"out of memory\",\"type\":\"server_error\"}}");
    enum MHD_Result r = respond(sv, rq, c, status, "application/json", owned_json);
    free(owned_json);
    return r;
}

static enum MHD_Result respond_error(struct serve *sv, struct req *rq, struct MHD_Connection *c,
                                     const struct oai_error *e)
{
    return respond_json(sv, rq, c, e->status, serve_api_error(rq->api, e));
}

/* ------------------------------------------------------------ jobs */

static void job_error(const struct job *j, struct oai_error *e)
{
    if (j->finish == JOB_FIN_CANCELLED)
        oai_error_set(e, 503, "server_error", NULL, NULL, "the request was cancelled: the server is shutting down");
    else oai_error_set(e, j->err_status ? j->err_status : 500, "server_error", NULL, NULL, "%s", j->err_msg);
}

/* ------------------------------------------------------------ streaming */

/* The next chunks of a group's stream: each choice's new events, and its
 * finish chunk once it ended, in choice order; then, when every choice has
 * ended, the usage and [DONE]. The group's mu is not held while the choices
 * are read (a choice's mu comes first, job.h). */
static void stream_group(struct stream *st)
{
    struct job *g = st->job;
    const struct oai_model *m = &st->sv->om;
    pthread_mutex_lock(&g->mu);
    st->next_ev = serve_job_progress(g);
    enum job_finish fin = g->finish;
    pthread_mutex_unlock(&g->mu);
    if (fin == JOB_FIN_ERROR || fin == JOB_FIN_CANCELLED) {
        struct oai_error e;
        pthread_mutex_lock(&g->mu);
        job_error(g, &e);
        pthread_mutex_unlock(&g->mu);
        oai_stream_error(chunks(st), &e);
        st->done = 1;
        return;
    }
    for (int i = 0; i < g->n_choices; i++) {
        struct job *c = g->choice[i];
        pthread_mutex_lock(&c->mu);
        oai_stream_events(chunks(st), m, c, st->c_next[i], c->n_ev, &st->c_chars[i]);
        st->c_next[i] = c->n_ev;
        if (c->finish != JOB_RUNNING && !st->c_ended[i]) {
            serve_oai_stream_finish(chunks(st), m, c);
            st->c_ended[i] = 1;
        }
        pthread_mutex_unlock(&c->mu);
    }
    if (fin != JOB_RUNNING) {       /* every choice ended (their chunks are out) */
        pthread_mutex_lock(&g->mu);
        oai_stream_end(chunks(st), m, g);
        pthread_mutex_unlock(&g->mu);
        st->done = 1;
    }
}

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    struct stream *st = cls;
    struct job *j = st->job;
    const struct oai_model *m = &st->sv->om;
    for (;;) {
        if (st->conv && st->raw.n) serve_api_stream_feed(st->conv, &st->raw, &st->out);
        if (st->out.failed || st->raw.failed) return MHD_CONTENT_READER_END_WITH_ERROR;
        if (st->out.n > 0) {
            size_t k = st->out.n < max ? st->out.n : max;
            memcpy(buf, st->out.s, k);
            base_sb_consume(&st->out, k);
            return (ssize_t)k;
        }
        if (st->done && !st->raw.n) return MHD_CONTENT_READER_END_OF_STREAM;
        if (!st->started) {
            st->started = 1;
            if (!j->n_choices) oai_stream_start(chunks(st), m, j);
            for (int i = 0; i < j->n_choices; i++) oai_stream_start(chunks(st), m, j->choice[i]);
            continue;
        }
        if (!waiter_wait(&st->w, st->next_ev)) return 0;    /* suspended until j changes */
        if (j->n_choices) {
            pthread_mutex_lock(&j->mu);
            int gone = j->finish == JOB_RUNNING && serve_job_progress(j) == st->next_ev;
            pthread_mutex_unlock(&j->mu);
            if (gone) return MHD_CONTENT_READER_END_WITH_ERROR;    /* cancelled: the client is gone */
            stream_group(st);
            continue;
        }
        pthread_mutex_lock(&j->mu);
        if (j->finish == JOB_RUNNING && j->n_ev == st->next_ev) {   /* cancelled: the client is gone */
            pthread_mutex_unlock(&j->mu);
            return MHD_CONTENT_READER_END_WITH_ERROR;
        }
        oai_stream_events(chunks(st), m, j, st->next_ev, j->n_ev, &st->chars);
        st->next_ev = j->n_ev;
        if (j->finish != JOB_RUNNING) {
            if (j->finish == JOB_FIN_STOP || j->finish == JOB_FIN_LENGTH) oai_stream_end(chunks(st), m, j);
            else {
                struct oai_error e;
                job_error(j, &e);
                oai_stream_error(chunks(st), &e);
            }
            st->done = 1;
        }
        pthread_mutex_unlock(&j->mu);
    }
}

static void stream_free(void *cls)
{
    struct stream *st = cls;
    waiter_detach(&st->w);
    serve_job_cancel(st->job);        /* no-op when finished; frees the slots when not */
    job_release(st->job);
    base_sb_free(&st->out);
    base_sb_free(&st->raw);
    serve_api_stream_free(st->conv);
    free(st->c_next);
    free(st->c_ended);
    free(st->c_chars);
    free(st);
}

/* ------------------------------------------------------------ endpoints */

/* The answer to a finished (or cancelled) non-streaming job. */
static enum MHD_Result finish_generate(struct serve *sv, struct MHD_Connection *c, struct req *rq)
{
    struct job *j = rq->job;
    struct oai_error e;
    pthread_mutex_lock(&j->mu);
    enum MHD_Result ret;
    if (j->finish == JOB_FIN_STOP || j->finish == JOB_FIN_LENGTH) {
        char *s = oai_response(&sv->om, j);
        pthread_mutex_unlock(&j->mu);
        if (s && rq->api) {
            char *t = serve_api_response(rq->api, s, &rq->turn);
            free(s);
            s = t;
        }
        ret = respond_json(sv, rq, c, 200, s);
    } else if (j->finish == JOB_RUNNING) {
        pthread_mutex_unlock(&j->mu);
        ret = MHD_NO;           /* cancelled: the client is gone, close without a response */
    } else {
        job_error(j, &e);
        pthread_mutex_unlock(&j->mu);
        ret = respond_error(sv, rq, c, &e);
    }
    return ret;
}

/* On a prep thread: the request's job, then its connection resumed (the
 * handler runs again and finds prep DONE). */
static void prep_run(void *arg)
{
    struct req *rq = arg;
    rq->prep_job = oai_parse(&rq->sv->om, rq->prep_kind, rq->body.s ? rq->body.s : "", rq->body.n, &rq->prep_err);
    rq->prep = PREP_DONE;
    MHD_resume_connection(rq->mc);
}

/* Hands a large body's preparation to the prep threads: 1 when handed off
 * (the connection is suspended until done), 0 to prepare it here. */
static int prep_handoff(struct serve *sv, struct MHD_Connection *c, struct req *rq, enum job_kind kind)
{
    if (!sv->prep || rq->body.n <= PREP_INLINE_MAX) return 0;
    rq->sv = sv;
    rq->mc = c;
    rq->prep_kind = kind;
    rq->t_body = base_now_sec();
    rq->prep = PREP_RUNNING;
    MHD_suspend_connection(c);
    if (!serve_offload_submit(sv->prep, prep_run, rq)) return 1;
    rq->prep = PREP_NONE;
    MHD_resume_connection(c);
    return 0;
}

static enum MHD_Result do_generate_body(struct serve *sv, struct MHD_Connection *c, struct req *rq,
                                        enum job_kind kind, const char *body, size_t body_len)
{
    struct oai_error e;
    double t_arrival = base_now_sec();
    struct job *j;
    if (rq->prep == PREP_DONE) {
        t_arrival = rq->t_body;
        j = rq->prep_job;
        rq->prep_job = NULL;
        e = rq->prep_err;
    } else if (body == rq->body.s && prep_handoff(sv, c, rq, kind)) {
        return MHD_YES;     /* only the request's own body goes to a prep thread: it outlives the handoff */
    } else {
        j = oai_parse(&sv->om, kind, body, body_len, &e);
    }
    if (!j) return respond_error(sv, rq, c, &e);
    j->t_submit = t_arrival;
    job_retain(j);
    rq->log_job = j;
    /* n > 1: j becomes a group of n choice jobs, each run in its own slot */
    for (int i = 0; j->p.n > 1 && i < j->p.n; i++)
        if (serve_job_add_choice(j)) {
            job_release(j);
            oai_error_set(&e, 500, "server_error", NULL, NULL, "out of memory");
            return respond_error(sv, rq, c, &e);
        }
    enum sched_submit_result sr = j->n_choices ? serve_sched_submit_n(sv->sched, j->choice, j->n_choices)
                                               : sched_submit(sv->sched, j);
    if (sr != SCHED_OK) {
        job_release(j);
        if (sr == SCHED_FULL)
            oai_error_set(&e, 429, "server_busy", "queue_full", NULL,
                          "every slot is busy and the queue is full (%d waiting); retry later", sv->o.max_queue);
        else oai_error_set(&e, 503, "server_error", NULL, NULL, "the server is shutting down");
        return respond_error(sv, rq, c, &e);
    }
    if (j->p.stream) {
        struct stream *st = calloc(1, sizeof *st);
        if (!st) {
            serve_job_cancel(j);
            job_release(j);
            return MHD_NO;
        }
        st->sv = sv;
        st->job = j;
        if (rq->api && !(st->conv = serve_api_stream_new(rq->api, sv->om.id, j->n_prompt, &rq->turn))) {
            stream_free(st);
            return MHD_NO;
        }
        if (j->n_choices) {
            st->c_next = calloc((size_t)j->n_choices, sizeof *st->c_next);
            st->c_ended = calloc((size_t)j->n_choices, sizeof *st->c_ended);
            st->c_chars = calloc((size_t)j->n_choices, sizeof *st->c_chars);
            if (!st->c_next || !st->c_ended || !st->c_chars) {
                stream_free(st);
                return MHD_NO;
            }
        }
        waiter_attach(sv->cw, &st->w, c, rq->conn, j);
        struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, stream_read, st,
                                                                   stream_free);
        if (!r) {
            stream_free(st);
            return MHD_NO;
        }
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
        MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
        enum MHD_Result ret = queue(sv, rq, c, MHD_HTTP_OK, r);
        MHD_destroy_response(r);
        return ret;
    }
    rq->job = j;
    waiter_attach(sv->cw, &rq->w, c, rq->conn, j);
    if (!waiter_wait(&rq->w, INT32_MAX)) return MHD_YES;   /* suspended: called again when j changes */
    return finish_generate(sv, c, rq);
}

static enum MHD_Result do_generate(struct serve *sv, struct MHD_Connection *c, struct req *rq, enum job_kind kind)
{
    return do_generate_body(sv, c, rq, kind, rq->body.s ? rq->body.s : "", rq->body.n);
}

/* /v1/messages and /v1/responses: the body translated to a chat request,
 * the answer back to the API's format (api_conv.h). */
static enum MHD_Result do_api(struct serve *sv, struct MHD_Connection *c, struct req *rq, enum serve_api api)
{
    struct oai_error e;
    int stream = 0;
    rq->api = api;
    rq->turn.store = sv->responses;
    char *chat = serve_api_request(api, rq->body.s ? rq->body.s : "", rq->body.n, &stream,
                                   api == SERVE_API_RESPONSES ? &rq->turn : NULL, &e);
    if (!chat) return respond_error(sv, rq, c, &e);
    enum MHD_Result r = do_generate_body(sv, c, rq, JOB_CHAT, chat, strlen(chat));
    free(chat);
    return r;
}

static enum MHD_Result do_messages(struct serve *sv, struct MHD_Connection *c, struct req *rq)
{
    return do_api(sv, c, rq, SERVE_API_ANTHROPIC);
}

static enum MHD_Result do_responses(struct serve *sv, struct MHD_Connection *c, struct req *rq)
{
    return do_api(sv, c, rq, SERVE_API_RESPONSES);
}

/* /v1/embeddings: a 501 that says why, rather than a bare 404. */
static enum MHD_Result do_embeddings(struct serve *sv, struct MHD_Connection *c, struct req *rq)
{
    struct oai_error e;
    oai_error_set(&e, 501, "invalid_request_error", "unsupported_endpoint", NULL,
                  "/v1/embeddings is not supported by colibri: it serves generative (causal LM) models, which have "
                  "no embedding head; use a dedicated embedding model server");
    return respond_error(sv, rq, c, &e);
}

static enum MHD_Result do_metrics(struct serve *sv, struct MHD_Connection *c, struct req *rq)
{
    struct metrics_gauges g;
    sched_gauges(sv->sched, &g);
    struct colibri_model_info in;
    colibri_model_get_info(sv->model, &in);
    g.experts_streamed = !strcmp(in.expert_store, "streamed");
    colibri_model_expert_stats(sv->model, &g.experts);
    char *s = metrics_render(&sv->met, &g);
    if (!s) return MHD_NO;
    enum MHD_Result r = respond(sv, rq, c, 200, "text/plain; version=0.0.4", s);
    free(s);
    return r;
}

static enum MHD_Result do_completions(struct serve *sv, struct MHD_Connection *c, struct req *rq)
{
    return do_generate(sv, c, rq, JOB_COMPLETION);
}

static enum MHD_Result do_chat(struct serve *sv, struct MHD_Connection *c, struct req *rq)
{
    return do_generate(sv, c, rq, JOB_CHAT);
}

static enum MHD_Result do_models(struct serve *sv, struct MHD_Connection *c, struct req *rq)
{
    return respond_json(sv, rq, c, 200, serve_info_models_json(&sv->om));
}

/* GET /v1/models/{id}: the id may hold slashes ("org/name"). */
static enum MHD_Result do_model(struct serve *sv, struct MHD_Connection *c, struct req *rq)
{
    const char *id = rq->url + strlen("/v1/models/");
    if (strcmp(id, sv->om.id)) {
        struct oai_error e;
        oai_error_set(&e, 404, "invalid_request_error", "model_not_found", "model",
                      "The model '%.200s' does not exist; this server serves '%s'", id, sv->om.id);
        return respond_error(sv, rq, c, &e);
    }
    return respond_json(sv, rq, c, 200, serve_info_model_json(&sv->om));
}

static enum MHD_Result do_props(struct serve *sv, struct MHD_Connection *c, struct req *rq)
{
    struct serve_info_props p = { .model_path = sv->o.model_dir, .n_slots = sv->o.n_slots,
                                  .kv_tier = sv->o.kv_tier ? sv->o.kv_tier : "f32", .kv_rope = sv->o.kv_rope,
                                  .build = serve_page_build_info() };
    return respond_json(sv, rq, c, 200, serve_info_props_json(&sv->om, &p));
}

static enum MHD_Result do_slots(struct serve *sv, struct MHD_Connection *c, struct req *rq)
{
    struct sched_slot_state st[64];
    int n = serve_sched_slots(sv->sched, st, 64);
    return respond_json(sv, rq, c, 200, serve_info_slots_json(st, n));
}

static enum MHD_Result do_tokenize(struct serve *sv, struct MHD_Connection *c, struct req *rq)
{
    struct oai_error e;
    char *out;
    if (serve_info_tokenize(&sv->om, rq->body.s ? rq->body.s : "", rq->body.n, &out, &e))
        return respond_error(sv, rq, c, &e);
    return respond_json(sv, rq, c, 200, out);
}

static enum MHD_Result do_detokenize(struct serve *sv, struct MHD_Connection *c, struct req *rq)
{
    struct oai_error e;
    char *out;
    if (serve_info_detokenize(&sv->om, rq->body.s ? rq->body.s : "", rq->body.n, &out, &e))
        return respond_error(sv, rq, c, &e);
    return respond_json(sv, rq, c, 200, out);
}

static enum MHD_Result do_page(struct serve *sv, struct MHD_Connection *c, struct req *rq)
{
    size_t n;
    const char *html = serve_page_html(&n);
    return respond_n(sv, rq, c, 200, "text/html; charset=utf-8", html, n);
}

static enum MHD_Result do_health(struct serve *sv, struct MHD_Connection *c, struct req *rq)
{
    if (atomic_load(&sv->stopping))
        return respond(sv, rq, c, 503, "application/json", "{\"status\":\"stopping\"}");
    struct colibri_err err = { 0 };
    if (colibri_model_check(sv->model, &err)) {   /* generations would fail: say so */
        struct oai_error e;
        oai_error_set(&e, 503, "model_changed", NULL, NULL, "%s", err.msg);
        return respond_error(sv, rq, c, &e);
    }
    return respond(sv, rq, c, 200, "application/json", "{\"status\":\"ok\"}");
}

struct route_def {
    const char *path, *method;  /* a GET route answers HEAD too */
    int prefix;                 /* path is a prefix: the rest is an argument, not empty */
    enum metrics_endpoint ep;
    int auth;                   /* needs the API key when one is set */
    enum MHD_Result (*handle)(struct serve *sv, struct MHD_Connection *c, struct req *rq);
};

static const struct route_def ROUTES[R_COUNT] = {
    [R_NONE] = { "", "", 0, METRICS_EP_OTHER, 0, NULL },
    [R_PAGE] = { "/", "GET", 0, METRICS_EP_PAGE, 0, do_page },
    [R_HEALTH] = { "/health", "GET", 0, METRICS_EP_HEALTH, 0, do_health },
    [R_MODELS] = { "/v1/models", "GET", 0, METRICS_EP_MODELS, 1, do_models },
    [R_MODEL] = { "/v1/models/", "GET", 1, METRICS_EP_MODELS, 1, do_model },
    [R_METRICS] = { "/metrics", "GET", 0, METRICS_EP_METRICS, 1, do_metrics },
    [R_PROPS] = { "/props", "GET", 0, METRICS_EP_PROPS, 1, do_props },
    [R_SLOTS] = { "/slots", "GET", 0, METRICS_EP_SLOTS, 1, do_slots },
    [R_TOKENIZE] = { "/tokenize", "POST", 0, METRICS_EP_TOKENIZE, 1, do_tokenize },
    [R_DETOKENIZE] = { "/detokenize", "POST", 0, METRICS_EP_DETOKENIZE, 1, do_detokenize },
    [R_COMPLETIONS] = { "/v1/completions", "POST", 0, METRICS_EP_COMPLETIONS, 1, do_completions },
    [R_CHAT] = { "/v1/chat/completions", "POST", 0, METRICS_EP_CHAT, 1, do_chat },
    [R_MESSAGES] = { "/v1/messages", "POST", 0, METRICS_EP_OTHER, 1, do_messages },
    [R_RESPONSES] = { "/v1/responses", "POST", 0, METRICS_EP_OTHER, 1, do_responses },
    [R_EMBEDDINGS] = { "/v1/embeddings", "POST", 0, METRICS_EP_OTHER, 1, do_embeddings },
};

/* ------------------------------------------------------------ dispatch */

/* Equal-time comparison, so the key cannot be guessed byte by byte. */
static int key_equal(const char *a, const char *b)
{
    size_t na = strlen(a), nb = strlen(b);
    unsigned diff = (unsigned)(na ^ nb);
    for (size_t i = 0; i < na; i++) diff |= (unsigned char)a[i] ^ (unsigned char)b[i % (nb ? nb : 1)];
    return diff == 0;
}

static int authorized(const struct serve *sv, struct MHD_Connection *c)
{
    if (!sv->o.api_key || !sv->o.api_key[0]) return 1;
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    const char *x = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "x-api-key");   /* Anthropic's clients */
    if (x && key_equal(x, sv->o.api_key)) return 1;
    if (!h || strncasecmp(h, "Bearer ", 7)) return 0;
    h += 7;
    while (*h == ' ') h++;
    return key_equal(h, sv->o.api_key);
}

static int path_matches(const struct route_def *r, const char *url)
{
    size_t n = strlen(r->path);
    return r->prefix ? !strncmp(url, r->path, n) && url[n] : !strcmp(url, r->path);
}

/* The route for url, or R_NONE; *path_route is the route of the path
 * whatever the method (R_NONE for an unknown path), to tell a wrong method
 * from an unknown path. */
static enum route find_route(const char *url, const char *method, enum route *path_route)
{
    *path_route = R_NONE;
    for (int i = 1; i < R_COUNT; i++)
        if (path_matches(&ROUTES[i], url)) {
            *path_route = (enum route)i;
            const char *m = ROUTES[i].method;
            if (!strcmp(method, m) || (!strcmp(m, "GET") && !strcmp(method, "HEAD"))) return (enum route)i;
        }
    return R_NONE;
}

static const char *allowed_methods(enum route r)
{
    return !strcmp(ROUTES[r].method, "GET") ? "GET, HEAD, OPTIONS" : "POST, OPTIONS";
}

/* OPTIONS on a known path: the methods, and with an allowed Origin the CORS
 * preflight headers (the request headers a browser asks for are allowed:
 * the API key and the content type are all this server reads). */
static enum MHD_Result answer_options(struct serve *sv, struct MHD_Connection *c, struct req *rq, enum route r)
{
    struct MHD_Response *res = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
    if (!res) return MHD_NO;
    const char *methods = allowed_methods(r);
    MHD_add_response_header(res, MHD_HTTP_HEADER_ALLOW, methods);
    const char *origin = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Origin");
    if (serve_cors_allow(&sv->cors, origin)) {
        const char *want = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Access-Control-Request-Headers");
        MHD_add_response_header(res, "Access-Control-Allow-Methods", methods);
        MHD_add_response_header(res, "Access-Control-Allow-Headers",
                                want && want[0] ? want : "Authorization, Content-Type");
        MHD_add_response_header(res, "Access-Control-Max-Age", "600");
    }
    enum MHD_Result ret = queue(sv, rq, c, 204, res);
    MHD_destroy_response(res);
    return ret;
}

/* An error answered before the body is read. */
static enum MHD_Result refuse_early(struct serve *sv, struct MHD_Connection *c, struct req *rq,
                                    const struct oai_error *e)
{
    if (rq->body_announced) conn_linger(sv->cw, rq->conn);
    return respond_error(sv, rq, c, e);
}

/* Checks that need no body: route, auth, declared size. A response queued
 * here ends the request (libmicrohttpd then closes the connection if a body
 * was announced and not read). */
static enum MHD_Result first_call(struct serve *sv, struct MHD_Connection *c, struct req *rq, const char *url,
                                  const char *method)
{
    struct oai_error e;
    enum route path_route;
    if (!(rq->url = strdup(url))) return MHD_NO;
    snprintf(rq->method, sizeof rq->method, "%s", method);
    rq->t_arrival = base_now_sec();
    rq->route = find_route(url, method, &path_route);
    rq->api = rq->route == R_MESSAGES ? SERVE_API_ANTHROPIC : rq->route == R_RESPONSES ? SERVE_API_RESPONSES
                                                                                      : SERVE_API_OPENAI;
    atomic_fetch_add(&sv->met.requests[ROUTES[rq->route ? rq->route : path_route].ep], 1);
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    rq->conn = ci ? ci->socket_context : NULL;
    const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    char *end = NULL;
    errno = 0;
    unsigned long long n = cl ? strtoull(cl, &end, 10) : 0;
    int sized = cl && !errno && end != cl;
    /* an answer queued now leaves the body unread: the close lingers so
     * that a client still sending it reads the answer, not a reset */
    if ((sized && n > 0) || MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_TRANSFER_ENCODING))
        rq->body_announced = 1;
    if (rq->route == R_NONE && path_route != R_NONE && !strcmp(method, "OPTIONS")) {
        rq->options = path_route;   /* answered once the request is in, so the connection stays open */
        return MHD_YES;
    }
    if (rq->route == R_NONE) {
        if (path_route != R_NONE) {
            rq->allow = allowed_methods(path_route);
            oai_error_set(&e, 405, "invalid_request_error", NULL, NULL, "%.15s is not allowed on %.200s (only %s)",
                          method, url, rq->allow);
        } else {
            oai_error_set(&e, 404, "invalid_request_error", NULL, NULL, "unknown endpoint %.15s %.200s", method,
                          url);
        }
        return refuse_early(sv, c, rq, &e);
    }
    if (ROUTES[rq->route].auth && !authorized(sv, c)) {
        oai_error_set(&e, 401, "invalid_request_error", "invalid_api_key", NULL,
                      "missing or wrong API key: send the header 'Authorization: Bearer KEY'");
        return refuse_early(sv, c, rq, &e);
    }
    if (sized && n > sv->o.max_body) {
        oai_error_set(&e, 413, "invalid_request_error", NULL, NULL,
                      "the request body (%llu bytes) is over the limit of %zu bytes", n, sv->o.max_body);
        return refuse_early(sv, c, rq, &e);
    }
    return MHD_YES;
}

/* Sends e and closes, in the middle of a body. libmicrohttpd cannot queue a
 * response then, only close the connection, so the few bytes of the answer
 * are written to the socket directly (nothing else writes to it before a
 * response is queued), and the close lingers so the client can read them. */
static void refuse_upload(struct serve *sv, struct MHD_Connection *c, struct req *rq, const struct oai_error *e)
{
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    char *json = serve_api_error(rq->api, e);
    if (!ci || !json) {
        free(json);
        return;
    }
    struct strbuf b = { 0 };
    base_sb_appendf(&b, "HTTP/1.1 %d %s\r\nConnection: close\r\nContent-Type: application/json\r\n"
                  "Content-Length: %zu\r\n\r\n%s", e->status, e->status == 413 ? "Content Too Large" : "Error",
              strlen(json), json);
    free(json);
    if (!b.failed && send(ci->connect_fd, b.s, b.n, MSG_NOSIGNAL | MSG_DONTWAIT) == (ssize_t)b.n) {
        conn_linger(sv->cw, rq->conn);
        metrics_count_response(&sv->met, e->status);
        rq->status = e->status;
    }
    base_sb_free(&b);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *upload, size_t *upload_size, void **ctx)
{
    struct serve *sv = cls;
    struct req *rq = *ctx;
    if (!rq) {
        if (!(rq = calloc(1, sizeof *rq))) return MHD_NO;
        *ctx = rq;
        atomic_fetch_add(&sv->inflight, 1);
        return first_call(sv, c, rq, url, method);
    }
    struct oai_error e;
    if (*upload_size) {
        if (rq->body.n + *upload_size > sv->o.max_body) {
            /* a body of undeclared size (chunked) is cut where it passes the
             * limit, so an endless upload cannot hold the connection */
            base_sb_free(&rq->body);
            *upload_size = 0;
            oai_error_set(&e, 413, "invalid_request_error", NULL, NULL,
                          "the request body is over the limit of %zu bytes", sv->o.max_body);
            refuse_upload(sv, c, rq, &e);
            return MHD_NO;
        }
        base_sb_append(&rq->body, upload, *upload_size);
        *upload_size = 0;
        return MHD_YES;
    }
    if (rq->job) {              /* resumed: the job changed */
        if (!waiter_wait(&rq->w, INT32_MAX)) return MHD_YES;
        return finish_generate(sv, c, rq);
    }
    if (!rq->received) {
        rq->received = 1;
        conn_request_received(sv->cw, rq->conn);
    }
    if (rq->body.failed) {
        oai_error_set(&e, 500, "server_error", NULL, NULL, "out of memory reading the request body");
        return respond_error(sv, rq, c, &e);
    }
    if (rq->options) return answer_options(sv, c, rq, rq->options);
    if (atomic_load(&sv->stopping) && rq->route != R_HEALTH && rq->route != R_METRICS) {
        oai_error_set(&e, 503, "server_error", NULL, NULL, "the server is shutting down");
        return respond_error(sv, rq, c, &e);
    }
    return ROUTES[rq->route].handle ? ROUTES[rq->route].handle(sv, c, rq) : MHD_NO;
}

/* Called once the response is fully sent (or the connection failed). */
/* Gives the heap's free pages back to the system. The request's transient
 * memory (the body, its cJSON tree, the rendered template, the token
 * buffers) is freed into the malloc arena of the HTTP thread that parsed
 * it, and glibc keeps a thread arena's free pages: a few 1.7 MB chat bodies
 * kept 100+ MB each (tools/rss_probe.py, bench/rss-results.md). */
static void trim_heap(void)
{
#ifdef __GLIBC__
    malloc_trim(0);
#endif
}

static void on_completed(void *cls, struct MHD_Connection *c, void **ctx, enum MHD_RequestTerminationCode why)
{
    struct serve *sv = cls;
    struct req *rq = *ctx;
    if (!rq) return;
    int large = rq->body.cap >= TRIM_AFTER_BODY;
    waiter_detach(&rq->w);
    job_release(rq->prep_job);     /* prepared, then refused (the server is stopping) */
    if (rq->job) {
        serve_job_cancel(rq->job);    /* no-op when finished; frees the slots when not */
        job_release(rq->job);
    }
    if (rq->url) {
        struct serve_reqlog lr = { .method = rq->method, .path = rq->url, .status = rq->status, .job = rq->log_job,
                                   .t_arrival = rq->t_arrival, .t_done = base_now_sec(), .tok = sv->tok,
                                   .log_texts = sv->o.log_prompts };
        serve_reqlog_write(&lr);
    }
    job_release(rq->log_job);
    free(rq->url);
    conn_request_done(sv->cw, rq->conn);
    atomic_fetch_sub(&sv->inflight, 1);
    base_sb_free(&rq->body);
    serve_api_turn_clear(&rq->turn);
    free(rq);
    *ctx = NULL;
    if (large) trim_heap();
}

/* ------------------------------------------------------------ daemon */

static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode code)
{
    struct serve *sv = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        const union MHD_ConnectionInfo *ca = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
        struct sockaddr_storage peer;
        memset(&peer, 0, sizeof peer);
        if (ca && ca->client_addr)
            memcpy(&peer, ca->client_addr, ca->client_addr->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
                                                                                  : sizeof(struct sockaddr_in));
        /* unregistered (out of memory), it only lacks the arrival deadline */
        *socket_context = ci ? conn_open(sv->cw, ci->connect_fd, (struct sockaddr *)&peer, sizeof peer) : NULL;
    } else if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
        conn_close(sv->cw, *socket_context);
        *socket_context = NULL;
    }
}

/* libmicrohttpd's accept policy: the client's share (http_conn.h). */
static enum MHD_Result on_accept(void *cls, const struct sockaddr *addr, socklen_t addrlen)
{
    struct serve *sv = cls;
    return serve_conn_admit(sv->cw, addr, addrlen) ? MHD_YES : MHD_NO;
}

/* The connection limit, lowered to what the descriptor limit allows (with
 * room for model, KV and log files). */
static unsigned conn_limit(int want)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < (rlim_t)want + 128)
        return rl.rlim_cur > 256 ? (unsigned)(rl.rlim_cur - 128) : 128;
    return (unsigned)want;
}

int http_start(struct serve *sv, struct colibri_err *err)
{
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof ss);
    unsigned flags = MHD_USE_AUTO_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME;
    struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE }, *ai;
    int gai = getaddrinfo(sv->o.host, NULL, &hints, &ai);
    if (gai) return base_err_set(err, COLIBRI_EINVAL, "--host '%s': %s", sv->o.host, gai_strerror(gai));
    memcpy(&ss, ai->ai_addr, ai->ai_addrlen);
    freeaddrinfo(ai);
    if (ss.ss_family == AF_INET) {
        ((struct sockaddr_in *)&ss)->sin_port = htons((uint16_t)sv->o.port);
    } else if (ss.ss_family == AF_INET6) {
        ((struct sockaddr_in6 *)&ss)->sin6_port = htons((uint16_t)sv->o.port);
        flags |= MHD_USE_IPv6;
    } else {
        return base_err_set(err, COLIBRI_EINVAL, "--host '%s' is neither an IPv4 nor an IPv6 address", sv->o.host);
    }
    int timeout_s = sv->o.timeout_s > 0 ? sv->o.timeout_s : SERVE_TIMEOUT_S;
    /* libmicrohttpd's own limit leaves room for connections shut down to
     * make room that it has not closed yet; ours is the one that counts */
    int want = sv->o.max_conns > 0 ? sv->o.max_conns : SERVE_MAX_CONNS, slack = want / 16 > 16 ? want / 16 : 16;
    unsigned mhd_limit = conn_limit(want + slack);
    struct conn_limits lim = { .limit = (int)mhd_limit > slack + 1 ? (int)mhd_limit - slack : 1,
                               .per_key = sv->o.max_conns_per_addr > 0 ? sv->o.max_conns_per_addr
                                                                       : SERVE_MAX_CONNS_PER_ADDR };
    lim.reserve = lim.limit / SERVE_CONNS_RESERVED_DIV;
    int rc = conn_watch_new(timeout_s, LINGER_S, &lim, &sv->cw, err);
    if (!rc) rc = serve_offload_new(PREP_THREADS, PREP_QUEUE, PREP_NICE, &sv->prep, err);
    if (rc) {
        conn_watch_free(sv->cw);
        sv->cw = NULL;
        return rc;
    }
    struct MHD_OptionItem tls[] = { { MHD_OPTION_HTTPS_MEM_KEY, 0, sv->tls.key },
                                    { MHD_OPTION_HTTPS_MEM_CERT, 0, sv->tls.cert }, { MHD_OPTION_END, 0, NULL } };
    if (sv->tls.key) flags |= MHD_USE_TLS;
    sv->daemon = MHD_start_daemon(flags, (uint16_t)sv->o.port, on_accept, sv, on_request, sv,
                                  MHD_OPTION_ARRAY, sv->tls.key ? tls : tls + 2,
                                  MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
                                  MHD_OPTION_THREAD_POOL_SIZE, (unsigned)HTTP_THREADS,
                                  MHD_OPTION_NOTIFY_COMPLETED, on_completed, sv,
                                  MHD_OPTION_NOTIFY_CONNECTION, on_connection, sv,
                                  MHD_OPTION_CONNECTION_LIMIT, mhd_limit,
                                  MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)timeout_s,
                                  MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)(128 * 1024),
                                  MHD_OPTION_LISTEN_BACKLOG_SIZE, (unsigned)1024,
                                  MHD_OPTION_END);
    if (!sv->daemon) {
        serve_offload_free(sv->prep);
        sv->prep = NULL;
        conn_watch_free(sv->cw);
        sv->cw = NULL;
        return base_err_set(err, COLIBRI_EIO, "cannot listen on %s port %d (in use, or not an address of this machine%s)",
                       sv->o.host, sv->o.port, sv->tls.key ? "; or --ssl-key-file and --ssl-cert-file are not a "
                       "key and a certificate that GnuTLS takes, or not a matching pair" : "");
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(sv->daemon, MHD_DAEMON_INFO_BIND_PORT);
    sv->port = di ? di->port : sv->o.port;
    return 0;
}

void http_quiesce(struct serve *sv)
{
    if (!sv->daemon) return;
    MHD_socket fd = MHD_quiesce_daemon(sv->daemon);
    if (fd != MHD_INVALID_SOCKET) close(fd);
}

void http_stop(struct serve *sv)
{
    if (!sv->daemon) return;
    /* the daemon must not stop with a connection suspended: the requests
     * being prepared finish and resume theirs first */
    serve_offload_free(sv->prep);
    sv->prep = NULL;
    conn_watch_cancel_all(sv->cw);
    MHD_stop_daemon(sv->daemon);
    sv->daemon = NULL;
    conn_watch_free(sv->cw);
    sv->cw = NULL;
}
