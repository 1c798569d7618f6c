/* serve/serve.h - `colibri serve`: an OpenAI-compatible HTTP server over the
 * public API (include/colibri.h) only.
 *
 * A server owns: one model and its tokenizer (loaded by serve_new), N slots
 * (one colibri_session each), a FIFO of requests waiting for a slot, one
 * scheduler thread that steps every busy slot once per iteration, and a
 * libmicrohttpd daemon (one thread per connection) that parses requests,
 * queues them and streams their output. Modules:
 *   http.c      libmicrohttpd glue: routing, auth, body limit, SSE, disconnects
 *   oai_parse.c OpenAI request JSON -> struct job (errors name the field)
 *   oai_emit.c  struct job events -> OpenAI response JSON / SSE chunks
 *   sched.c     slots, prefix reuse, queue, the scheduler thread
 *   job.c       one request's shared state between its HTTP thread and the scheduler
 *   metrics.c   counters, latency histograms and the Prometheus text of GET /metrics
 *   info.c      /v1/models, /tokenize, /detokenize, /props and /slots bodies
 *   cors.c      the --cors origins
 *   reqlog.c    the log line of each request
 *   chat_page.html  the web chat page at GET /, compiled in
 *
 * Lifetime: serve_new() loads and binds; serving runs on internal threads until
 * serve_shutdown(), which stops accepting, lets in-flight requests finish (up
 * to opts.drain_s seconds, then cancels them) and joins every thread. Then
 * serve_free(). serve_shutdown() must be called from one thread (not a signal
 * handler); every other function here is called from that same thread too. */
#ifndef COLIBRI_SERVE_H
#define COLIBRI_SERVE_H

#include <stddef.h>

#include "colibri.h"
#include "serve/oai.h"

/* Connection defaults. Idle connections cost no thread, so the limits are
 * about descriptors and memory (about 130 KiB at most per connection): one
 * client (an IPv4 address or an IPv6 /64) may hold an eighth of them, enough
 * for a 64-client benchmark or a reverse proxy's pool, not enough to shut
 * others out; an eighth of the table is kept for clients holding none, and
 * when it is full the connection idle longest makes room (serve/conn_admit.h). */
#define SERVE_TIMEOUT_S 10
#define SERVE_MAX_CONNS 2048
#define SERVE_MAX_CONNS_PER_ADDR 256
#define SERVE_CONNS_RESERVED_DIV 8

struct serve_opts {
    const char *model_dir;      /* config.json + safetensors + tokenizer.json */
    const char *chat_template;  /* NULL, or a Jinja file used instead of the model's template */
    const char *reasoning_format; /* "deepseek" (NULL: the default) or "none" */
    const char *host;           /* IPv4 or IPv6 address, or a name (its first address) */
    int port;                   /* 0 = any free port (see serve_port) */
    int n_slots;                /* sessions decoding at once */
    int grammar_slots;          /* of those, held by requests with a grammar at most (0: half, at least 1) */
    int n_ctx;                  /* tokens per slot; 0 = min(model context, 4096) */
    const char *kv_tier;        /* KV-cache tier name (NULL = f32), see colibri_session_opts */
    const char *kv_rope;        /* its RoPE part's precision (NULL = the tier's default) */
    int kv_int8;                /* integer decode attention mode, see colibri_session_opts */
    int kv_snapshot_every, kv_snapshots;   /* DeepSeek-V4 state snapshots, see colibri_session_opts (0: default) */
    const char *kv_dir;         /* NULL, or a directory of per-slot KV files (created if absent) */
    int max_queue;              /* requests waiting for a slot before 429 */
    size_t max_body;            /* request body bytes before 413 */
    int timeout_s;              /* seconds for a request to arrive, or idle; 0 = SERVE_TIMEOUT_S */
    int max_conns;              /* open connections in all; 0 = SERVE_MAX_CONNS (less if the fd limit is lower) */
    int max_conns_per_addr;     /* open connections from one client (IPv4 address, IPv6 /64); 0 = SERVE_MAX_CONNS_PER_ADDR */
    const char *api_key;        /* NULL or "" = no auth */
    const char *alias;          /* the model id clients send; NULL = the model directory's last component */
    const char *cors;           /* NULL = no CORS; "*" or comma-separated origins (serve/cors.h) */
    const char *ssl_key_file;   /* HTTPS: the PEM private key and certificate files, both or neither (serve/tls.h) */
    const char *ssl_cert_file;
    int log_prompts;            /* the per-request log line also holds prompt and reply text */
    int n_threads;              /* 0 = OpenMP default */
    const char *ram;            /* weights budget (colibri_model_opts.ram), or NULL */
    const char *state_dir;      /* colibri_model_opts.state_dir, or NULL */
    int bf16_act;               /* colibri_model_opts.bf16_act */
    colibri_mpi *mpi;           /* expert parallelism (colibri_model_opts.mpi), or NULL */
    int step_delay_ms;          /* sleep per scheduler iteration (tests, demos) */
    const char *mtp;            /* speculative decoding with the model's MTP layer: NULL/"off", "on" or "auto" */
    int n_draft;                /* drafts per step with mtp on|auto (0: 2) */
    struct oai_defaults defaults; /* a request's sampling defaults (--temp, -n, --seed) */
    double drain_s;             /* shutdown: wait this long for in-flight work */
};

typedef struct serve serve;

/* Loads the model and tokenizer, creates the slots, starts the scheduler and
 * binds host:port. On failure nothing is left running. */
int  serve_new(const struct serve_opts *opts, serve **out, struct colibri_err *err);
/* The bound port (useful with opts.port == 0). */
int  serve_port(const serve *sv);
/* The model id served on /v1/models (opts.alias, else the model directory's
 * last component). */
const char *serve_model_id(const serve *sv);
/* Stops accepting, drains or cancels in-flight requests, joins threads. */
void serve_shutdown(serve *sv);
void serve_free(serve *sv);

#endif
