/* mpi/rank0_mpi.c - rank 0's side of expert parallelism: the expert store
 * "mpi" (model/expert_store.h) that sends each MoE layer's rows to the ranks
 * owning their experts, runs rank 0's share on the store it wraps (the one
 * rank 0 loaded) and sums what comes back; and the load handshake.
 *
 * Per layer (start, then finish after the shared experts):
 *   1. per owning rank r > 0: the distinct rows its experts need, packed in
 *      one WORK message (mpi/wire.h); its reply buffer posted (Irecv) before
 *      the send (Isend), so neither side waits on the other;
 *   2. the prefetch hint for the experts rank 0 owns;
 *   -- the shared experts run here, the owners work meanwhile --
 *   3. rank 0's own experts, each one's output rows into its own buffer,
 *      testing the requests between experts so MPI moves the messages on;
 *   4. each owner's reply, waited for against the deadline and checked;
 *   5. the sum: for each routed expert in ascending order,
 *      model_expert_batch_add(out, its rows, its output rows) whichever rank ran
 *      it: the local loop's operations in its order, so the same bits.
 * The lock is held from start to finish: one layer's exchange at a time.
 * The store takes no prediction (no predict op): rank 0's own store would
 * start reading experts that other ranks own. */
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "model/mlp.h"
#include "model/expert_store.h"
#include "mpi/ranks.h"
#include "mpi/share.h"
#include "mpi/wire.h"

struct owner {
    unsigned char *send, *recv;
    size_t send_cap, recv_cap;
    MPI_Request sreq, rreq;
    int busy;                   /* requests posted this layer */
    int got, got_bytes;         /* the answer arrived, its length */
    int n_exp;                  /* this layer's experts owned here */
    int64_t n_res;              /* their output rows */
    const float *res;           /* [n_res][hid] once the reply is checked */
    int64_t cursor;             /* rows summed so far */
    struct colibri_mpi_rank_stats st;
};

struct remote {
    struct expert_store base;   /* first: the store is cast to it */
    struct expert_store *store; /* rank 0's own (owned): its share runs there */
    struct colibri_mpi *p;
    pthread_mutex_t lock;
    int seq, hid, n_experts;
    struct mpi_share share;     /* who owns each expert */
    double deadline;            /* of this layer's answers */
    struct owner *own;          /* [size]; own[0]: rank 0's share, computed here */
    /* scratch, grown on demand (decode reuses it without allocating) */
    int *tok, *row_of, *mine;   /* [rows], [rows], [E] */
    float *tw;                  /* [rows] */
    float *in, *g, *u, *res0;   /* [rows][hid], [rows][inter] x2, rank 0's output rows */
    struct quant_scratch qs;    /* its experts' products' working memory */
    size_t rows_cap, res0_cap, inter;
};

/* Row scratch for a batch of n rows. */
static int grow_rows(struct remote *r, int n, struct colibri_err *err)
{
    if ((size_t)n <= r->rows_cap) return 0;
    size_t c = r->rows_cap ? r->rows_cap : 1;
    while (c < (size_t)n) c *= 2;
    int *tok = realloc(r->tok, c * sizeof *tok);
    if (tok) r->tok = tok;
    int *row_of = tok ? realloc(r->row_of, c * sizeof *row_of) : NULL;
    if (row_of) r->row_of = row_of;
    float *tw = row_of ? realloc(r->tw, c * sizeof *tw) : NULL;
    if (tw) r->tw = tw;
    float *in = tw ? realloc(r->in, c * r->hid * sizeof *in) : NULL;
    if (in) r->in = in;
    float *g = in ? realloc(r->g, c * r->inter * sizeof *g) : NULL;
    if (g) r->g = g;
    float *u = g ? realloc(r->u, c * r->inter * sizeof *u) : NULL;
    if (u) r->u = u;
    if (!u) return base_err_set(err, COLIBRI_ENOMEM, "MPI: out of memory for %zu rows of scratch", c);
    r->rows_cap = c;
    return 0;
}

static void progress(struct remote *r)
{
    for (int w = 1; w < r->p->size; w++) {
        struct owner *o = &r->own[w];
        if (!o->busy) continue;
        int done = 0;
        MPI_Status st;
        if (o->sreq != MPI_REQUEST_NULL) MPI_Test(&o->sreq, &done, MPI_STATUS_IGNORE);
        if (!o->got && MPI_Test(&o->rreq, &done, &st) == MPI_SUCCESS && done) {
            o->got = 1;
            MPI_Get_count(&st, MPI_BYTE, &o->got_bytes);
        }
    }
}

/* Packs rank w's WORK for this layer into its send buffer; returns its bytes (0 on error). */
static size_t pack_work(struct remote *r, int w, const struct expert_batch *rb, struct colibri_err *err)
{
    struct owner *o = &r->own[w];
    int n = rb->n, hid = r->hid;
    for (int t = 0; t < n; t++) r->row_of[t] = -1;
    for (int j = 0; j < rb->n_used; j++) {
        int e = rb->list[j];
        if (mpi_share_owner(&r->share, rb->layer, e) != w) continue;
        int cnt = model_expert_batch_rows(rb, e, r->tok, r->tw);
        for (int i = 0; i < cnt; i++) r->row_of[r->tok[i]] = 0;
    }
    int n_rows = 0;
    for (int t = 0; t < n; t++)
        if (!r->row_of[t]) r->row_of[t] = n_rows++ + 1;   /* slot + 1 */
    size_t bytes = mpi_wire_work_bytes(hid, n_rows, o->n_exp, o->n_res);
    if (mpi_buf_grow(&o->send, &o->send_cap, bytes, err)) return 0;
    mpi_wire_put_header(o->send, &(struct mpi_wire_header){ MPI_WIRE_WORK, r->seq, rb->layer, hid, n_rows, o->n_exp });
    int32_t *pairs = (int32_t *)(o->send + MPI_WIRE_HEADER_BYTES), *refs = pairs + 2 * o->n_exp;
    int np = 0;
    for (int j = 0; j < rb->n_used; j++) {
        int e = rb->list[j];
        if (mpi_share_owner(&r->share, rb->layer, e) != w) continue;
        int cnt = model_expert_batch_rows(rb, e, r->tok, r->tw);
        pairs[2 * np] = e;
        pairs[2 * np + 1] = cnt;
        np++;
        for (int i = 0; i < cnt; i++) *refs++ = r->row_of[r->tok[i]] - 1;
    }
    float *rows = (float *)refs;
    for (int t = 0; t < n; t++)
        if (r->row_of[t] > 0)
            memcpy(rows + (int64_t)(r->row_of[t] - 1) * hid, rb->x + (int64_t)t * hid, (size_t)hid * sizeof *rows);
    return bytes;
}

static int remote_start(struct expert_store *base, const struct expert_batch *rb, struct colibri_err *err)
{
    struct remote *r = (struct remote *)base;
    struct colibri_mpi *p = r->p;
    MPI_Comm comm = *(MPI_Comm *)p->comm;
    pthread_mutex_lock(&r->lock);
    int rc = 0;
    if (p->faulted) {
        rc = base_err_set(err, COLIBRI_EIO, "MPI: the job lost a rank earlier: %s", p->fault);
        goto fail;
    }
    if ((rc = grow_rows(r, rb->n, err))) goto fail;
    r->seq++;
    for (int w = 0; w < p->size; w++) {
        struct owner *o = &r->own[w];
        o->busy = o->n_exp = o->got = o->got_bytes = 0;
        o->n_res = o->cursor = 0;
        o->res = NULL;
        o->sreq = o->rreq = MPI_REQUEST_NULL;
    }
    int n_local = 0;
    for (int j = 0; j < rb->n_used; j++) {
        int e = rb->list[j], w = mpi_share_owner(&r->share, rb->layer, e);
        r->own[w].n_exp++;
        r->own[w].n_res += model_expert_batch_rows(rb, e, r->tok, r->tw);
        if (!w) r->mine[n_local++] = e;
    }
    r->deadline = mpi_now() + p->timeout_s;
    int exchanged = 0;
    for (int w = 1; w < p->size; w++) {
        struct owner *o = &r->own[w];
        if (!o->n_exp) continue;
        size_t bytes = pack_work(r, w, rb, err);
        if (!bytes) { rc = COLIBRI_ENOMEM; goto fail; }
        size_t want = mpi_wire_result_bytes(r->hid, o->n_res);
        if (want < MPI_WIRE_HEADER_BYTES + MPI_WIRE_MSG_MAX) want = MPI_WIRE_HEADER_BYTES + MPI_WIRE_MSG_MAX;
        if ((rc = mpi_buf_grow(&o->recv, &o->recv_cap, want, err))) goto fail;
        if (want > (size_t)1 << 31 || bytes > (size_t)1 << 31) {
            rc = base_err_set(err, COLIBRI_EINVAL, "MPI: layer %d's message for rank %d is %zu bytes, over MPI's "
                              "int count: forward fewer rows at a time", rb->layer, w, want > bytes ? want : bytes);
            goto fail;
        }
        int e1 = MPI_Irecv(o->recv, (int)want, MPI_BYTE, w, MPI_WIRE_TAG_REPLY, comm, &o->rreq);
        if (e1 != MPI_SUCCESS) { rc = mpi_fail(p, e1, w, "posting the receive from", err); goto fail; }
        o->busy = 1;
        if ((e1 = MPI_Isend(o->send, (int)bytes, MPI_BYTE, w, MPI_WIRE_TAG_WORK, comm, &o->sreq)) != MPI_SUCCESS) {
            rc = mpi_fail(p, e1, w, "sending layer rows to", err);
            goto fail;
        }
        o->st.requests++;
        o->st.bytes_sent += bytes;
        o->st.experts_run += (uint64_t)o->n_exp;
        exchanged = 1;
    }
    /* rank 0's requests: the layers that waited on another rank, one round trip each on its path */
    r->own[0].st.requests += (uint64_t)exchanged;
    expert_store_prefetch(r->store, rb->layer, r->mine, n_local);
    return 0;   /* finish() unlocks */
fail:
    /* requests posted for some ranks and not others: their answers would meet the next layer's */
    for (int w = 1; w < p->size; w++)
        if (r->own[w].busy) { mpi_fault(p, rc, err); break; }
    pthread_mutex_unlock(&r->lock);
    return rc;
}

/* Rank 0's own experts of this layer, each one's output rows after the previous one's. */
static int run_local(struct remote *r, const struct expert_batch *rb, struct colibri_err *err)
{
    struct owner *o = &r->own[0];
    size_t need = (size_t)o->n_res * r->hid * sizeof(float);
    int rc = mpi_buf_grow(&r->res0, &r->res0_cap, need ? need : 1, err);
    if (rc) return rc;
    int64_t off = 0;
    for (int j = 0; j < rb->n_used; j++) {
        int e = rb->list[j];
        if (mpi_share_owner(&r->share, rb->layer, e)) continue;
        int cnt = model_expert_batch_rows(rb, e, r->tok, r->tw);
        for (int i = 0; i < cnt; i++)
            memcpy(r->in + (int64_t)i * r->hid, rb->x + (int64_t)r->tok[i] * r->hid, (size_t)r->hid * sizeof(float));
        const struct mlp_weights *ew;
        if ((rc = expert_store_acquire(r->store, rb->layer, e, &ew, err))) return rc;
        rc = model_mlp_forward(ew, r->in, cnt, r->res0 + off * r->hid, r->g, r->u, &r->qs, err);
        expert_store_release(r->store, rb->layer, e);
        if (rc) return rc;
        off += cnt;
        progress(r);
    }
    o->res = r->res0;
    o->st.experts_run += (uint64_t)o->n_exp;
    return 0;
}

/* Waits for rank w's answer and send; checks the answer. */
static int collect(struct remote *r, int w, const struct expert_batch *rb, struct colibri_err *err)
{
    struct owner *o = &r->own[w];
    int rc = 0;
    double t0 = mpi_now();
    char what[64];
    snprintf(what, sizeof what, "layer %d's experts", rb->layer);
    if (!o->got && !(rc = mpi_wait_request(r->p, &o->rreq, w, r->deadline, what, &o->got_bytes, err))) o->got = 1;
    if (!rc) rc = mpi_wait_request(r->p, &o->sreq, w, r->deadline, what, NULL, err);
    o->st.wait_s += mpi_now() - t0;
    if (rc) return rc;
    int bytes = o->got_bytes;
    o->busy = 0;
    o->st.bytes_received += (uint64_t)bytes;
    rc = mpi_wire_parse_result(o->recv, (size_t)bytes, w, r->seq, rb->layer, r->hid, o->n_res, o->n_exp, &o->res,
                               err);
    /* a malformed answer means the ranks disagree on the protocol: nothing later can be trusted */
    if (rc == COLIBRI_EFORMAT) return mpi_fault(r->p, rc, err);
    return rc;
}

static int remote_finish(struct expert_store *base, const struct expert_batch *rb, float *out,
                         struct colibri_err *err)
{
    struct remote *r = (struct remote *)base;
    struct colibri_mpi *p = r->p;
    progress(r);
    int rc = r->own[0].n_exp ? run_local(r, rb, err) : 0;
    struct colibri_err later = { 0 };
    /* every posted answer is taken even after a local failure, so the next layer starts clean */
    for (int w = 1; w < p->size; w++) {
        if (!r->own[w].busy) continue;
        int rw = collect(r, w, rb, rc ? &later : err);
        if (rw && !rc) rc = rw;
        if (p->faulted) break;  /* a rank is gone: the job ends, no point waiting for the others */
    }
    if (!rc) {
        for (int j = 0; j < rb->n_used; j++) {
            int e = rb->list[j], w = mpi_share_owner(&r->share, rb->layer, e);
            struct owner *o = &r->own[w];
            int cnt = model_expert_batch_rows(rb, e, r->tok, r->tw);
            model_expert_batch_add(out, r->tok, r->tw, o->res + o->cursor * r->hid, cnt, r->hid);
            o->cursor += cnt;
        }
    }
    pthread_mutex_unlock(&r->lock);
    return rc;
}

/* Rank w's load report, waited for until deadline; *serving tells whether
 * it loaded (and is now in its serving loop). m NULL (rank 0's own load
 * failed): only the report is taken. */
static int hello_from(struct colibri_mpi *p, int w, const struct model *m, double deadline, int *serving,
                      struct colibri_err *err)
{
    unsigned char buf[MPI_WIRE_HEADER_BYTES + MPI_WIRE_MSG_MAX];
    MPI_Request req;
    *serving = 0;
    int bytes = 0, rc = MPI_Irecv(buf, sizeof buf, MPI_BYTE, w, MPI_WIRE_TAG_REPLY, *(MPI_Comm *)p->comm, &req);
    if (rc != MPI_SUCCESS) return mpi_fail(p, rc, w, "posting the receive of the load report of", err);
    if ((rc = mpi_wait_request(p, &req, w, deadline, "loading the model", &bytes, err))) return rc;
    struct mpi_wire_header h;
    if ((rc = mpi_wire_get_header(buf, (size_t)bytes, &h, err)) || h.kind != MPI_WIRE_HELLO) {
        base_err_set(err, COLIBRI_EFORMAT, "MPI: rank %d sent no load report (message kind %d)", w,
                     rc ? -1 : h.kind);
        return mpi_fault(p, COLIBRI_EFORMAT, err);
    }
    if (h.seq) return base_err_set(err, COLIBRI_EIO, "MPI: rank %d could not load the model: %s", w,
                                   mpi_wire_text(buf, (size_t)bytes));
    *serving = 1;
    if (!m) return 0;
    const struct model_config *c = &m->cfg;
    if (h.layer != c->num_hidden_layers || h.hid != c->hidden_size || h.n_rows != c->n_routed_experts ||
        h.n_exp != m->experts->first_moe_layer)
        return base_err_set(err, COLIBRI_EMISMATCH, "MPI: rank %d loaded another model: %d layers, hidden %d, %d "
                            "experts from layer %d; rank 0's has %d, %d, %d from %d", w, h.layer, h.hid, h.n_rows,
                            h.n_exp, c->num_hidden_layers, c->hidden_size, c->n_routed_experts,
                            m->experts->first_moe_layer);
    return 0;
}

/* STOP to every rank w in [1, size) with serving[w] (NULL: all): they leave
 * their serving loop. A rank whose load failed is not in one, and a STOP
 * would wait for its next model's loop. */
static void send_stop(struct colibri_mpi *p, const int *serving)
{
    unsigned char buf[MPI_WIRE_HEADER_BYTES];
    mpi_wire_put_header(buf, &(struct mpi_wire_header){ MPI_WIRE_STOP, 0, 0, 0, 0, 0 });
    double deadline = mpi_now() + p->timeout_s;
    for (int w = 1; w < p->size && !p->faulted; w++) {
        if (serving && !serving[w]) continue;
        MPI_Request req;
        struct colibri_err e = { 0 };
        if (MPI_Isend(buf, sizeof buf, MPI_BYTE, w, MPI_WIRE_TAG_WORK, *(MPI_Comm *)p->comm, &req) == MPI_SUCCESS)
            mpi_wait_request(p, &req, w, deadline, "being told to stop", NULL, &e);
    }
}

static struct expert_store *remote_local(const struct expert_store *base)
{
    return ((const struct remote *)base)->store;
}

/* Sends STOP to every rank (unless faulted), then frees rank 0's store. */
static void remote_free(struct expert_store *base)
{
    struct remote *r = (struct remote *)base;
    send_stop(r->p, NULL);
    for (int w = 0; w < r->p->size; w++) {
        struct owner *o = &r->own[w];
        /* a request to a rank that stopped answering may still be writing into its buffers */
        if (o->busy) continue;
        free(o->send);
        free(o->recv);
    }
    free(r->own);
    free(r->mine);
    mpi_share_free(&r->share);
    free(r->tok);
    free(r->row_of);
    free(r->tw);
    free(r->in);
    free(r->g);
    free(r->u);
    quant_scratch_free(&r->qs);
    free(r->res0);
    pthread_mutex_destroy(&r->lock);
    expert_store_free(r->store);
    free(r);
}

static const struct expert_store_ops REMOTE_OPS = {
    .name = "mpi",
    .start = remote_start,
    .finish = remote_finish,
    .free = remote_free,
    .local = remote_local,
};

int mpi_hello(struct colibri_mpi *p, const struct model *m, const char *load_err, struct expert_store **out,
              struct colibri_err *err)
{
    *out = NULL;
    char msg[256];
    struct mpi_share check;
    if (mpi_share_init(&check, p->size, p->rank0_experts, p->weights, 1, msg, sizeof msg))
        return base_err_set(err, COLIBRI_EINVAL, "%s", msg);
    mpi_share_free(&check);
    if (p->rank > 0) return mpi_worker_hello(p, m, load_err, err);
    p->handshakes++;
    double deadline = mpi_now() + 10 * p->timeout_s;
    int rc = 0, serving[p->size];
    struct colibri_err first = { 0 };
    for (int w = 0; w < p->size; w++) serving[w] = 0;
    for (int w = 1; w < p->size && !p->faulted; w++) {
        struct colibri_err e = { 0 };
        int rw = hello_from(p, w, m, deadline, &serving[w], &e);
        if (rw && !rc) { rc = rw; first = e; }
    }
    if (!m && !p->faulted) rc = 0;     /* rank 0's own failure is the caller's to report */
    if (rc || !m || p->faulted) {
        send_stop(p, serving);
        if (rc && err) *err = first;
        return rc;
    }
    struct remote *r = calloc(1, sizeof *r);
    if (!r || !(r->own = calloc((size_t)p->size, sizeof *r->own)) ||
        !(r->mine = calloc((size_t)m->cfg.n_routed_experts, sizeof *r->mine)) ||
        mpi_share_init(&r->share, p->size, p->rank0_experts, p->weights, m->cfg.n_routed_experts, msg, sizeof msg)) {
        if (r) free(r->own);
        if (r) free(r->mine);
        free(r);
        send_stop(p, serving);
        return base_err_set(err, COLIBRI_ENOMEM, "out of memory");
    }
    r->base = (struct expert_store){ .ops = &REMOTE_OPS, .n_layers = m->experts->n_layers,
                                     .first_moe_layer = m->experts->first_moe_layer,
                                     .n_experts = m->experts->n_experts };
    r->store = m->experts;
    r->p = p;
    pthread_mutex_init(&r->lock, NULL);
    r->hid = m->cfg.hidden_size;
    r->n_experts = m->cfg.n_routed_experts;
    r->inter = (size_t)m->cfg.moe_intermediate_size;
    *out = &r->base;
    return 0;
}

int mpi_store_stats(const struct expert_store *base, int rank, struct colibri_mpi_rank_stats *out,
                    struct colibri_err *err)
{
    const struct remote *r = (const struct remote *)base;
    if (!r) return base_err_set(err, COLIBRI_EINVAL, "MPI statistics: the model was loaded without --mpi");
    if (rank < 0 || rank >= r->p->size)
        return base_err_set(err, COLIBRI_EINVAL, "MPI statistics: rank %d outside [0, %d)", rank, r->p->size);
    *out = r->own[rank].st;
    return 0;
}
