/* mpi/worker_mpi.c - a rank other than 0: reports its model load, then runs
 * the routed experts rank 0 sends it rows for, until told to stop.
 *
 * Each WORK (mpi/wire.h) names experts of one layer, the rows each takes
 * (refs into the distinct rows sent) and the rows; the answer holds each
 * expert's SwiGLU output rows, unweighted, in the same order. The rows an
 * expert gets are gathered in batch order, as the single-process loop
 * gathers them, and the kernels give a row the same bits whatever batch it
 * is in (quant/kernels.h), so rank 0 sums exactly what it would have
 * computed. A request that fails here (an expert's read) is answered with
 * the error; the loop goes on. */
#include <mpi.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/err.h"
#include "model/mlp.h"
#include "mpi/ranks.h"
#include "mpi/share.h"
#include "mpi/wire.h"

/* Between layers of one token the next request follows within the time rank
 * 0 needs for attention, so the loop spins that long before sleeping. */
#define IDLE_SPIN_S 2e-3
#define IDLE_SLEEP_NS 50000L

struct worker {
    struct mpi_share share;
    unsigned char *msg, *reply;
    size_t msg_cap, reply_cap;
    float *in, *g, *u;
    size_t rows_cap;
    struct quant_scratch qs;    /* the experts' products' working memory */
};

static int grow_rows(struct worker *wk, const struct model *m, int n, struct colibri_err *err)
{
    if ((size_t)n <= wk->rows_cap) return 0;
    size_t c = wk->rows_cap ? wk->rows_cap : 1, hid = m->cfg.hidden_size, inter = m->cfg.moe_intermediate_size;
    while (c < (size_t)n) c *= 2;
    float *in = realloc(wk->in, c * hid * sizeof *in);
    if (in) wk->in = in;
    float *g = in ? realloc(wk->g, c * inter * sizeof *g) : NULL;
    if (g) wk->g = g;
    float *u = g ? realloc(wk->u, c * inter * sizeof *u) : NULL;
    if (u) wk->u = u;
    if (!u) return base_err_set(err, COLIBRI_ENOMEM, "MPI worker: out of memory for %zu rows", c);
    wk->rows_cap = c;
    return 0;
}

/* Runs one WORK into wk->reply; its length, or 0 with err set. */
static size_t run_work(struct colibri_mpi *p, struct worker *wk, const struct model *m, size_t len,
                       struct colibri_err *err)
{
    const struct model_config *c = &m->cfg;
    struct mpi_wire_work w;
    if (mpi_wire_parse_work(wk->msg, len, c->hidden_size, c->n_routed_experts, m->experts->first_moe_layer,
                            c->num_hidden_layers, &w, err))
        return 0;
    int hid = w.h.hid, layer = w.h.layer;
    for (int j = 0; j < w.h.n_exp; j++) {
        int e = w.pairs[2 * j];
        if (mpi_share_owner(&wk->share, layer, e) != p->rank) {
            base_err_set(err, COLIBRI_EINVAL, "rank %d was sent layer %d's expert %d, which rank %d owns", p->rank,
                         layer, e, mpi_share_owner(&wk->share, layer, e));
            return 0;
        }
    }
    size_t bytes = mpi_wire_result_bytes(hid, w.n_refs);
    if (mpi_buf_grow(&wk->reply, &wk->reply_cap, bytes, err) || grow_rows(wk, m, w.h.n_rows, err)) return 0;
    int experts[w.h.n_exp > 0 ? w.h.n_exp : 1];
    for (int j = 0; j < w.h.n_exp; j++) experts[j] = w.pairs[2 * j];
    expert_store_prefetch(m->experts, layer, experts, w.h.n_exp);
    float *res = (float *)(wk->reply + MPI_WIRE_HEADER_BYTES);
    const int32_t *ref = w.refs;
    for (int j = 0; j < w.h.n_exp; j++) {
        int e = w.pairs[2 * j], cnt = w.pairs[2 * j + 1];
        for (int i = 0; i < cnt; i++)
            memcpy(wk->in + (int64_t)i * hid, w.rows + (int64_t)ref[i] * hid, (size_t)hid * sizeof(float));
        const struct mlp_weights *ew;
        if (expert_store_acquire(m->experts, layer, e, &ew, err)) return 0;
        int rc = model_mlp_forward(ew, wk->in, cnt, res, wk->g, wk->u, &wk->qs, err);
        expert_store_release(m->experts, layer, e);
        if (rc) return 0;
        res += (int64_t)cnt * hid;
        ref += cnt;
    }
    mpi_wire_put_header(wk->reply, &(struct mpi_wire_header){ MPI_WIRE_RESULT, w.h.seq, layer, hid,
                                                              (int32_t)w.n_refs, w.h.n_exp });
    return bytes;
}

/* Blocks (polling) until rank 0 sends; the message's length. */
static int next_message(struct colibri_mpi *p, struct worker *wk, size_t *len, struct colibri_err *err)
{
    MPI_Comm comm = *(MPI_Comm *)p->comm;
    double t0 = mpi_now();
    for (;;) {
        int flag = 0, n = 0;
        MPI_Status st;
        int rc = MPI_Iprobe(0, MPI_WIRE_TAG_WORK, comm, &flag, &st);
        if (rc != MPI_SUCCESS) return mpi_fail(p, rc, 0, "waiting for a request from", err);
        if (flag) {
            MPI_Get_count(&st, MPI_BYTE, &n);
            if ((rc = mpi_buf_grow(&wk->msg, &wk->msg_cap, n > 0 ? (size_t)n : 1, err))) return rc;
            if ((rc = MPI_Recv(wk->msg, n, MPI_BYTE, 0, MPI_WIRE_TAG_WORK, comm, MPI_STATUS_IGNORE)) != MPI_SUCCESS)
                return mpi_fail(p, rc, 0, "receiving a request from", err);
            *len = (size_t)n;
            return 0;
        }
        if (mpi_now() - t0 > IDLE_SPIN_S) nanosleep(&(struct timespec){ 0, IDLE_SLEEP_NS }, NULL);
    }
}

static int send_reply(struct colibri_mpi *p, const unsigned char *buf, size_t len, struct colibri_err *err)
{
    int rc = MPI_Send(buf, (int)len, MPI_BYTE, 0, MPI_WIRE_TAG_REPLY, *(MPI_Comm *)p->comm);
    return rc == MPI_SUCCESS ? 0 : mpi_fail(p, rc, 0, "answering", err);
}

int mpi_serve(struct colibri_mpi *p, const struct model *m, struct colibri_err *err)
{
    if (p->rank == 0) return base_err_set(err, COLIBRI_EINVAL, "MPI: rank 0 runs the model, it serves no experts");
    struct worker wk = { 0 };
    char msg[256];
    /* mpi_hello checked the weights; this can only run out of memory */
    if (mpi_share_init(&wk.share, p->size, p->rank0_experts, p->weights, m->cfg.n_routed_experts, msg, sizeof msg))
        return base_err_set(err, COLIBRI_ENOMEM, "%s", msg);
    int rc = 0;
    for (;;) {
        size_t len = 0;
        if ((rc = next_message(p, &wk, &len, err))) break;
        struct mpi_wire_header h;
        if ((rc = mpi_wire_get_header(wk.msg, len, &h, err))) break;
        if (h.kind == MPI_WIRE_STOP) break;
        struct colibri_err we = { 0 };
        size_t bytes = run_work(p, &wk, m, len, &we);
        if (!bytes) {
            unsigned char fail[MPI_WIRE_HEADER_BYTES + MPI_WIRE_MSG_MAX];
            size_t n = mpi_wire_put_text(fail, &(struct mpi_wire_header){ MPI_WIRE_FAIL, h.seq, h.layer, 0, 0, 0 },
                                         we.msg);
            if ((rc = send_reply(p, fail, n, err))) break;
            continue;
        }
        if ((rc = send_reply(p, wk.reply, bytes, err))) break;
    }
    mpi_share_free(&wk.share);
    free(wk.msg);
    free(wk.reply);
    free(wk.in);
    free(wk.g);
    free(wk.u);
    quant_scratch_free(&wk.qs);
    return rc;
}

/* The load report of a rank > 0 (rank 0's side is in rank0_mpi.c). */
int mpi_worker_hello(struct colibri_mpi *p, const struct model *m, const char *load_err, struct colibri_err *err)
{
    unsigned char buf[MPI_WIRE_HEADER_BYTES + MPI_WIRE_MSG_MAX];
    struct mpi_wire_header h = { MPI_WIRE_HELLO, 1, 0, 0, 0, 0 };
    if (m) h = (struct mpi_wire_header){ MPI_WIRE_HELLO, 0, m->cfg.num_hidden_layers, m->cfg.hidden_size,
                                         m->cfg.n_routed_experts, m->experts->first_moe_layer };
    size_t n = mpi_wire_put_text(buf, &h, m ? "" : load_err ? load_err : "failed");
    int rc = MPI_Send(buf, (int)n, MPI_BYTE, 0, MPI_WIRE_TAG_REPLY, *(MPI_Comm *)p->comm);
    return rc == MPI_SUCCESS ? 0 : mpi_fail(p, rc, 0, "reporting the model load to", err);
}
