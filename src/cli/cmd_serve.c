/* colibri serve: the OpenAI-compatible HTTP server (src/serve/). This file
 * only parses options, handles signals and prints; the server is serve.h. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "cli/commands.h"
#include "cli/mpi_cli.h"
#include "cli/opts.h"
#include "colibri.h"
#include "serve/serve.h"

int cmd_serve(int argc, char **argv)
{
    struct serve_opts so = { .model_dir = "models/colibri-tiny", .host = "127.0.0.1", .port = 8080, .n_slots = 4,
                             .max_queue = 64, .drain_s = 30, .timeout_s = SERVE_TIMEOUT_S,
                             .max_conns = SERVE_MAX_CONNS, .max_conns_per_addr = SERVE_MAX_CONNS_PER_ADDR };
    const char *kv = NULL, *kv_dir = NULL, *api_key_file = NULL;
    int max_body_kib = 4096, drain = 30, n_predict = 0, seed = -1;
    float temp = -1;
    struct cli_mpi cm = CLI_MPI_INIT;
    const struct opt opts[] = {
        { "model", 'm', OPT_STR, &so.model_dir, "model directory (config.json, safetensors, tokenizer.json); "
                                                "default models/colibri-tiny" },
        OPTS_CHAT_TEMPLATE(so.chat_template),
        { "reasoning-format", 0, OPT_STR, &so.reasoning_format, "deepseek (default): a reply's <think>...</think> "
                                                                 "goes to reasoning_content (streamed too); none: "
                                                                 "left in content" },
        { "host", 0, OPT_STR, &so.host, "address or host name to listen on (default 127.0.0.1; 0.0.0.0 or :: for all)" },
        { "port", 0, OPT_INT, &so.port, "TCP port (default 8080; 0 = any free port, printed at start)", 0, 65535 },
        { "slots", 0, OPT_INT, &so.n_slots, "sessions generating at once (default 4)", 1, 64 },
        { "grammar-slots", 0, OPT_INT, &so.grammar_slots, "slots that requests with a grammar (grammar, "
                                                          "response_format, tool_choice required) may hold at once; "
                                                          "more wait in the queue while others pass them (default: "
                                                          "half the slots, at least 1)", 0, 64 },
        { "ctx", 'c', OPT_INT, &so.n_ctx, "context tokens per slot (default min(model context, 4096))", 0, 1 << 24 },
        { "kv", 0, OPT_STR, &kv, "KV-cache tier of every slot: " OPTS_LIST_KV_TIERS " "
                                 "(default f32; env aliases KV8=1, KV_TQ=N, KV_TQ_POLAR=1); per layer: "
                                 "TIER@LAYERS:SETTING..., e.g. int8r@1:rope=f32" },
        { "kv-rope", 0, OPT_STR, &so.kv_rope, "precision of the cached RoPE part: " OPTS_LIST_KV_ROPES " (default per tier)" },
        { "kv-int8", 0, OPT_INT, &so.kv_int8, "decode attention with integer dot products on int8/int4/fp8 tiers: 0 exact "
                                              "(default), 1 int8 query, 2 16-bit query", 0, 2 },
        OPTS_KV_SNAPSHOT(so.kv_snapshot_every, so.kv_snapshots),
        { "kv-dir", 0, OPT_STR, &kv_dir, "keep each slot's KV cache in DIR/slot-NN.ckv: restored at start, saved "
                                         "after each request (same model, weights and --kv to reuse)" },
        { "api-key-file", 0, OPT_STR, &api_key_file, "read the API key from the first line of FILE (unlike --api-key, "
                                                     "not visible to other users in ps)" },
        { "api-key", 0, OPT_STR, &so.api_key, "require 'Authorization: Bearer KEY' on /v1/* and /metrics "
                                              "(default: $COLIBRI_API_KEY, else none)" },
        { "alias", 0, OPT_STR, &so.alias, "the model id clients use (in 'model' and /v1/models; default: the "
                                          "model directory's name)" },
        { "served-model-name", 0, OPT_STR, &so.alias, "the same as --alias" },
        { "cors", 0, OPT_STR, &so.cors, "let browser pages from these origins call the server: '*' or a comma "
                                        "list like http://localhost:3000 (default: none, no CORS headers)" },
        { "ssl-key-file", 0, OPT_STR, &so.ssl_key_file, "serve HTTPS with this PEM private key (with "
                                                         "--ssl-cert-file; default: plain HTTP)" },
        { "ssl-cert-file", 0, OPT_STR, &so.ssl_cert_file, "the PEM certificate (chain) of --ssl-key-file" },
        { "log-prompts", 0, OPT_FLAG, &so.log_prompts, "also log each request's prompt and reply text (default: "
                                                       "tokens and times only)" },
        { "queue", 0, OPT_INT, &so.max_queue, "requests waiting for a slot before 429 (default 64)", 1, 65536 },
        { "max-body", 0, OPT_INT, &max_body_kib, "largest request body in KiB before 413 (default 4096)", 1,
          1 << 20 },
        { "timeout", 0, OPT_INT, &so.timeout_s, "seconds a client may take to send a whole request, or stay idle "
                                                "(default 10)", 1, 3600 },
        { "max-conns", 0, OPT_INT, &so.max_conns, "open connections in all (default 2048, less if the descriptor "
                                                  "limit is lower); an eighth is kept for new clients, and when "
                                                  "full the connection idle longest is closed", 1, 1 << 20 },
        { "max-conns-per-addr", 0, OPT_INT, &so.max_conns_per_addr, "open connections from one client (an IPv4 "
                                                                    "address or an IPv6 /64), more are refused "
                                                                    "(default 256)", 1, 1 << 20 },
        { "threads", 't', OPT_INT, &so.n_threads, "compute threads (default: OpenMP's)", 0, 4096 },
        { "ram", 0, OPT_STR, &so.ram, "most memory for weights, e.g. 12G: routed experts that do not fit are streamed "
                                      "from disk (same output)" },
        { "state-dir", 0, OPT_STR, &so.state_dir, "where streamed experts keep the routing counts of their hot set "
                                                  "(default $XDG_CACHE_HOME/colibri or ~/.cache/colibri; none: off)" },
        OPTS_BF16_ACT(so.bf16_act),
        { "drain", 0, OPT_INT, &drain, "on SIGTERM, seconds to let running requests finish before cancelling "
                                       "them (default 30)", 0, 86400 },
        OPTS_MPI(cm),
        OPTS_MTP(so.mtp, so.n_draft),
        { "temp", 0, OPT_FLOAT, &temp, "default temperature of requests that give none (default 1, as OpenAI's)",
          0, 2 },
        { "n-predict", 'n', OPT_INT, &n_predict, "default max_tokens of requests that give none (default: the rest "
                                                 "of the context)", 0, 1 << 24 },
        { "seed", 0, OPT_INT, &seed, "default seed of requests that give none (default -1: a new one per request)",
          -1, 2147483647 },
        { "step-delay-ms", 0, OPT_INT, &so.step_delay_ms, "sleep after each scheduler step (testing aid; default 0)",
          0, 10000 },
    };
    const struct opts_spec spec = {
        "colibri serve [-m DIR] [--host ADDR] [--port N] [--slots N] [--ctx N] [--kv TIER] [--kv-dir DIR] "
        "[--api-key KEY] [--alias NAME] [--cors ORIGINS]",
        "Serves the model over HTTP with the OpenAI API: GET /v1/models and /v1/models/{id},\n"
        "POST /v1/completions, POST /v1/chat/completions (streaming or not); llama-server's\n"
        "POST /tokenize and /detokenize, GET /props and /slots; GET /health, GET /metrics\n"
        "(Prometheus, with latency histograms). Every GET answers HEAD; OPTIONS answers CORS\n"
        "preflights when --cors is given. GET / is a web chat page. One line per request goes to stderr.\n"
        "Requests go to the free slot whose cache shares the longest prefix with the prompt;\n"
        "busy slots advance together in one batched forward per scheduler step. SIGTERM or SIGINT stops\n"
        "accepting, lets running requests finish (--drain), and exits 0.",
        opts, sizeof opts / sizeof opts[0] };
    char *pos[1];
    int npos, rc = opts_parse(&spec, argc, argv, pos, 0, &npos);
    if (rc) return rc > 0 ? 0 : 2;
    so.kv_tier = kv ? kv : opts_env_kv_tier();
    so.kv_dir = kv_dir;
    so.defaults = (struct oai_defaults){ .has_temp = temp >= 0, .temp = temp, .has_max_tokens = n_predict > 0,
                                         .max_tokens = n_predict, .has_seed = seed >= 0, .seed = seed };
    char key_buf[4096];
    if (api_key_file) {
        if (so.api_key) {
            fprintf(stderr, "colibri serve: --api-key and --api-key-file both given; use one\n");
            return 2;
        }
        FILE *kf = fopen(api_key_file, "r");
        size_t n = kf ? fread(key_buf, 1, sizeof key_buf - 1, kf) : 0;
        int bad = !kf || ferror(kf) || (n == sizeof key_buf - 1 && !feof(kf));
        if (kf) fclose(kf);
        while (n && (key_buf[n - 1] == '\n' || key_buf[n - 1] == '\r')) n--;
        key_buf[n] = 0;
        if (bad || !n || strchr(key_buf, '\n')) {
            fprintf(stderr, "colibri serve: --api-key-file %s: %s\n", api_key_file,
                    !kf ? strerror(errno) : bad ? "unreadable or longer than 4095 bytes" : "must hold one non-empty line");
            return 2;
        }
        so.api_key = key_buf;
    }
    if (!so.api_key) so.api_key = opts_env_api_key();
    so.max_body = (size_t)max_body_kib * 1024;
    so.drain_s = drain;

    /* Signals are taken synchronously by this thread (sigwait); every server
     * thread inherits the blocked mask, so none of them is interrupted. */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);
    /* under mpirun the other ranks inherit the blocked mask: a SIGTERM that
     * mpirun forwards to them all leaves them serving until rank 0, draining,
     * frees its model and tells them to stop */
    struct colibri_model_opts mo = { .n_threads = so.n_threads, .ram = so.ram, .bf16_act = so.bf16_act };
    int mpi_status;
    if (cli_mpi_begin("serve", &cm, so.model_dir, &mo, &mpi_status)) return mpi_status;
    so.mpi = cm.p;

    /* room for the connections, where the hard limit allows */
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
        rl.rlim_cur < (rlim_t)so.max_conns + 256) {
        rlim_t want = (rlim_t)so.max_conns + 256;
        rl.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > want ? want : rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    struct colibri_err err = { 0 };
    serve *sv = NULL;
    if (serve_new(&so, &sv, &err)) {
        fprintf(stderr, "colibri serve: %s\n", err.msg);
        return cli_mpi_end(&cm, 1);
    }
    fprintf(stderr, "colibri serve: model '%s' from %s, %d slots, listening on %s://%s%s%s:%d\n",
            serve_model_id(sv), so.model_dir, so.n_slots, so.ssl_key_file ? "https" : "http", strchr(so.host, ':') ? "[" : "", so.host,
            strchr(so.host, ':') ? "]" : "", serve_port(sv));
    fflush(stderr);
    int sig = 0;
    sigwait(&set, &sig);
    fprintf(stderr, "colibri serve: %s: no new requests; finishing running ones (up to %d s)\n",
            sig == SIGTERM ? "SIGTERM" : "SIGINT", drain);
    fflush(stderr);
    serve_shutdown(sv);
    serve_free(sv);
    fprintf(stderr, "colibri serve: stopped\n");
    return cli_mpi_end(&cm, 0);
}
