/* serve/serve.c - the server's lifecycle: load, start, drain, stop; see
 * serve.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/err.h"
#include "base/util.h"
#include "serve/resp_store.h"
#include "serve/serve_impl.h"

/* The last non-empty path component of dir, as the model id. */
static void model_id_from_dir(const char *dir, char *out, size_t cap)
{
    size_t n = strlen(dir);
    while (n > 1 && dir[n - 1] == '/') n--;
    size_t b = n;
    while (b > 0 && dir[b - 1] != '/') b--;
    snprintf(out, cap, "%.*s", (int)(n - b), dir + b);
    if (!out[0]) snprintf(out, cap, "colibri");
}

/* A model id clients can send back: printable, without spaces, not empty. */
static int check_alias(const char *alias, struct colibri_err *err)
{
    if (!alias) return 0;
    size_t n = strlen(alias);
    if (n == 0 || n >= SERVE_ID_CAP)
        return base_err_set(err, COLIBRI_EINVAL, "--alias must be 1 to %d bytes long, got %zu", SERVE_ID_CAP - 1, n);
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)alias[i] <= ' ' || alias[i] == 0x7f)
            return base_err_set(err, COLIBRI_EINVAL, "--alias '%s': byte %zu is a space or a control character", alias,
                           i);
    return 0;
}

int serve_new(const struct serve_opts *opts, serve **out, struct colibri_err *err)
{
    struct serve *sv = calloc(1, sizeof *sv);
    if (!sv) return base_err_set(err, COLIBRI_ENOMEM, "out of memory");
    sv->o = *opts;
    atomic_init(&sv->stopping, 0);
    atomic_init(&sv->inflight, 0);
    metrics_init(&sv->met);
    if (!(sv->responses = serve_resp_store_new())) {
        free(sv);
        return base_err_set(err, COLIBRI_ENOMEM, "out of memory");
    }
    int rc = check_alias(opts->alias, err);
    if (!rc) rc = serve_cors_parse(opts->cors, &sv->cors, err);
    if (!rc) rc = serve_tls_load(opts->ssl_key_file, opts->ssl_cert_file, &sv->tls, err);
    if (rc) goto fail;
    struct colibri_model_opts mo = { .n_threads = opts->n_threads, .ram = opts->ram, .state_dir = opts->state_dir,
                                     .mpi = opts->mpi, .bf16_act = opts->bf16_act };
    rc = colibri_model_load(opts->model_dir, &mo, &sv->model, err);
    if (rc) goto fail;
    rc = colibri_tokenizer_load(opts->model_dir, &sv->tok, err);
    if (rc) {
        base_err_prefix(err, rc, "%s: the server needs the model's tokenizer", opts->model_dir);
        goto fail;
    }
    if ((rc = colibri_tokenizer_check_model(sv->tok, sv->model, err))) goto fail;
    if (opts->chat_template) {
        size_t len;
        char *src = base_read_file_all(opts->chat_template, &len);
        if (!src) {
            rc = base_err_set(err, COLIBRI_EIO, "--chat-template %s: cannot read it (colibri takes a Jinja template "
                              "file here, not a built-in name like llama.cpp's chatml: a model without a template of "
                              "its own gets the built-in its tokens name, deepseek_v3, kimi_k2 or glm)",
                              opts->chat_template);
            goto fail;
        }
        rc = colibri_tokenizer_set_chat_template(sv->tok, src, len, opts->chat_template, err);
        free(src);
        if (rc) goto fail;
    }
    struct colibri_model_info info;
    colibri_model_get_info(sv->model, &info);
    int n_ctx = opts->n_ctx;
    if (n_ctx <= 0) n_ctx = info.max_position_embeddings < 4096 ? info.max_position_embeddings : 4096;
    if (n_ctx > info.max_position_embeddings) {
        rc = base_err_set(err, COLIBRI_EINVAL, "--ctx %d is more than the model's context (%d tokens)", n_ctx,
                     info.max_position_embeddings);
        goto fail;
    }
    sv->o.n_ctx = n_ctx;
    if (opts->alias) snprintf(sv->model_id, sizeof sv->model_id, "%s", opts->alias);
    else model_id_from_dir(opts->model_dir, sv->model_id, sizeof sv->model_id);
    int reasoning = !opts->reasoning_format || !strcmp(opts->reasoning_format, "deepseek");
    if (!reasoning && strcmp(opts->reasoning_format, "none")) {
        rc = base_err_set(err, COLIBRI_EINVAL, "--reasoning-format '%s': expected none or deepseek", opts->reasoning_format);
        goto fail;
    }
    sv->om = (struct oai_model){ .reasoning_deepseek = reasoning, .id = sv->model_id, .tok = sv->tok,
                                 .n_vocab = info.vocab, .n_ctx = n_ctx, .n_ctx_model = info.max_position_embeddings,
                                 .created = (long)time(NULL), .n_slots = opts->n_slots,
                                 .max_queue = opts->max_queue, .dflt = opts->defaults };
    int n_draft = 0, draft_auto = 0;
    if (opts->mtp && strcmp(opts->mtp, "off")) {
        int on = !strcmp(opts->mtp, "on");
        draft_auto = !strcmp(opts->mtp, "auto");
        if (!on && !draft_auto) {
            rc = base_err_set(err, COLIBRI_EINVAL, "--mtp '%s': expected on, off or auto", opts->mtp);
            goto fail;
        }
        if (opts->n_draft < 0 || opts->n_draft > COLIBRI_GEN_MAX_DRAFT) {
            rc = base_err_set(err, COLIBRI_EINVAL, "--draft %d: drafts per step are 1 to %d", opts->n_draft,
                         COLIBRI_GEN_MAX_DRAFT);
            goto fail;
        }
        if (info.n_mtp_layers <= 0 && on) {
            rc = base_err_set(err, COLIBRI_EUNSUPPORTED, "--mtp on: drafting needs the model's MTP layer: this model "
                         "has none%s", info.n_mtp_declared ? " loaded (config.json declares it, the checkpoint lacks "
                         "it)" : " (num_nextn_predict_layers is 0)");
            goto fail;
        }
        /* auto on a model without an MTP layer serves without drafts, as colibri run does */
        if (info.n_mtp_layers > 0) n_draft = opts->n_draft ? opts->n_draft : 2;
        else draft_auto = 0;
    }
    struct sched_opts so = { .n_slots = opts->n_slots, .n_ctx = n_ctx, .kv_tier = opts->kv_tier, .kv_rope = opts->kv_rope, .kv_int8 = opts->kv_int8, .kv_snapshot_every = opts->kv_snapshot_every, .kv_snapshots = opts->kv_snapshots, .kv_dir = opts->kv_dir, .max_queue = opts->max_queue,
                             .step_delay_ms = opts->step_delay_ms, .n_threads = opts->n_threads,
                             .n_draft = n_draft, .draft_auto = draft_auto, .grammar_slots = opts->grammar_slots };
    rc = sched_new(sv->model, sv->tok, &so, &sv->met, &sv->sched, err);
    if (rc) goto fail;
    rc = http_start(sv, err);
    if (rc) goto fail;
    *out = sv;
    return 0;
fail:
    serve_free(sv);
    return rc;
}

int serve_port(const serve *sv) { return sv->port; }
const char *serve_model_id(const serve *sv) { return sv->model_id; }

static void sleep_ms(int ms)
{
    struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
    nanosleep(&ts, NULL);
}

static double seconds_since(const struct timespec *t0)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (t.tv_sec - t0->tv_sec) + (t.tv_nsec - t0->tv_nsec) * 1e-9;
}

/* Nothing queued or generating, and every response fully sent. */
static int drained(serve *sv)
{
    return sched_busy(sv->sched) == 0 && atomic_load(&sv->inflight) == 0;
}

void serve_shutdown(serve *sv)
{
    if (!sv || atomic_exchange(&sv->stopping, 1)) return;
    sched_close(sv->sched);
    http_quiesce(sv);
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    while (!drained(sv) && seconds_since(&t0) < sv->o.drain_s) sleep_ms(20);
    if (!drained(sv)) {
        /* cancelled streams still send an error chunk and [DONE]: give them
         * a moment; a client that does not read cannot hold us longer */
        sched_cancel_all(sv->sched);
        clock_gettime(CLOCK_MONOTONIC, &t0);
        while (!drained(sv) && seconds_since(&t0) < 5) sleep_ms(10);
    }
    http_stop(sv);
}

void serve_free(serve *sv)
{
    if (!sv) return;
    if (sv->daemon) http_stop(sv);
    sched_free(sv->sched);
    serve_resp_store_free(sv->responses);
    serve_tls_free(&sv->tls);
    colibri_tokenizer_free(sv->tok);
    colibri_model_free(sv->model);
    free(sv);
}
