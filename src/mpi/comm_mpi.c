/* mpi/comm_mpi.c - the MPI job: start, end, abort, and the waits with a
 * deadline that every exchange of rank 0 goes through. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/err.h"
#include "mpi/diskrate.h"
#include "mpi/ranks.h"
#include "mpi/share.h"

#define DEFAULT_TIMEOUT_S 60.0
/* Spinning keeps the answer to a decode step's layer within microseconds;
 * past this the waiter sleeps between tests, which costs at most a sleep's
 * length in latency and no core. */
#define SPIN_S 200e-6
#define SLEEP_NS 50000L

static MPI_Comm comm_of(const struct colibri_mpi *p) { return *(const MPI_Comm *)p->comm; }

double mpi_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

int mpi_fault(struct colibri_mpi *p, int code, struct colibri_err *err)
{
    if (!p->faulted) {
        p->faulted = 1;
        snprintf(p->fault, sizeof p->fault, "%s", err ? err->msg : "an MPI exchange failed");
    }
    return code;
}

int mpi_fail(struct colibri_mpi *p, int rc, int rank, const char *what, struct colibri_err *err)
{
    char text[MPI_MAX_ERROR_STRING] = "";
    int n = 0;
    MPI_Error_string(rc, text, &n);
    base_err_set(err, COLIBRI_EIO, "MPI: %s rank %d failed: %s", what, rank, text);
    return mpi_fault(p, COLIBRI_EIO, err);
}

int mpi_wait_request(struct colibri_mpi *p, void *request, int rank, double deadline, const char *what,
                     int *bytes, struct colibri_err *err)
{
    MPI_Request *req = request;
    double t0 = mpi_now();
    for (;;) {
        int done = 0;
        MPI_Status st;
        int rc = MPI_Test(req, &done, &st);
        if (rc != MPI_SUCCESS) return mpi_fail(p, rc, rank, what, err);
        if (done) {
            if (bytes) MPI_Get_count(&st, MPI_BYTE, bytes);
            return 0;
        }
        double t = mpi_now();
        if (t > deadline) {
            base_err_set(err, COLIBRI_EIO, "MPI: rank %d did not answer (%s) within %.3g s: it died or stopped "
                         "responding", rank, what, t - t0);
            return mpi_fault(p, COLIBRI_EIO, err);
        }
        if (t - t0 > SPIN_S) nanosleep(&(struct timespec){ 0, SLEEP_NS }, NULL);
    }
}

/* p->weights from o: the weights given, or every rank's timed read rate
 * (a rank whose timing failed sends -1, so that all ranks fail alike). */
static int share_weights(struct colibri_mpi *p, const struct colibri_mpi_opts *o, struct colibri_err *err)
{
    if (!o->weights && !o->disk_rate_dir) return 0;
    if (o->weights && o->n_weights != p->size)
        return base_err_set(err, COLIBRI_EINVAL, "MPI: %d share weights for %d ranks: give one per rank",
                            o->n_weights, p->size);
    if (!(p->weights = calloc((size_t)p->size, sizeof *p->weights)))
        return base_err_set(err, COLIBRI_ENOMEM, "out of memory");
    if (o->weights) {
        memcpy(p->weights, o->weights, (size_t)p->size * sizeof *p->weights);
    } else {
        double mine = -1;
        struct colibri_err own = { 0 };
        if (mpi_disk_read_rate(o->disk_rate_dir, 256.0 * (1 << 20), 2.0, &mine, NULL, &own)) mine = -1;
        MPI_Request req;
        int rc = MPI_Iallgather(&mine, 1, MPI_DOUBLE, p->weights, 1, MPI_DOUBLE, comm_of(p), &req);
        if (rc != MPI_SUCCESS) return mpi_fail(p, rc, p->rank, "gathering the disk read rates at", err);
        double deadline = mpi_now() + 10 * p->timeout_s;
        for (int done = 0; !done;) {
            if ((rc = MPI_Test(&req, &done, MPI_STATUS_IGNORE)) != MPI_SUCCESS)
                return mpi_fail(p, rc, p->rank, "gathering the disk read rates at", err);
            if (!done && mpi_now() > deadline) {
                base_err_set(err, COLIBRI_EIO, "MPI: the ranks' disk read rates did not all arrive within %.3g s: "
                             "a rank died or stopped responding", 10 * p->timeout_s);
                return mpi_fault(p, COLIBRI_EIO, err);
            }
            if (!done) nanosleep(&(struct timespec){ 0, SLEEP_NS }, NULL);
        }
        if (own.msg[0]) return base_err_set(err, COLIBRI_EIO, "MPI: rank %d: %s", p->rank, own.msg);
        for (int r = 0; r < p->size; r++)
            if (p->weights[r] < 0)
                return base_err_set(err, COLIBRI_EIO, "MPI: rank %d could not time its reads of %s", r,
                                    o->disk_rate_dir);
    }
    char msg[256];
    struct mpi_share check;
    if (mpi_share_init(&check, p->size, p->rank0_experts, p->weights, 1, msg, sizeof msg))
        return base_err_set(err, COLIBRI_EINVAL, "%s", msg);
    mpi_share_free(&check);
    return 0;
}

int mpi_job_start(const struct colibri_mpi_opts *o, struct colibri_mpi **out, struct colibri_err *err)
{
    int inited = 0, provided = 0;
    MPI_Initialized(&inited);
    if (inited) return base_err_set(err, COLIBRI_EINVAL, "MPI: already started in this process");
    /* rank 0 forwards from whichever thread runs a session (serialized by the hook's lock) */
    if (MPI_Init_thread(NULL, NULL, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS)
        return base_err_set(err, COLIBRI_EIO, "MPI: MPI_Init_thread failed");
    if (provided < MPI_THREAD_SERIALIZED) {
        MPI_Finalize();
        return base_err_set(err, COLIBRI_EUNSUPPORTED, "MPI: the library gives thread level %d, colibri needs "
                            "MPI_THREAD_SERIALIZED (%d)", provided, MPI_THREAD_SERIALIZED);
    }
    struct colibri_mpi *p = calloc(1, sizeof *p);
    MPI_Comm *comm = malloc(sizeof *comm);
    if (!p || !comm) {
        free(p);
        free(comm);
        MPI_Finalize();
        return base_err_set(err, COLIBRI_ENOMEM, "out of memory");
    }
    /* errors come back as codes to report, naming the rank, instead of aborting the job */
    MPI_Comm_dup(MPI_COMM_WORLD, comm);
    MPI_Comm_set_errhandler(*comm, MPI_ERRORS_RETURN);
    MPI_Comm_rank(*comm, &p->rank);
    MPI_Comm_size(*comm, &p->size);
    p->comm = comm;
    p->timeout_s = o && o->timeout_s > 0 ? o->timeout_s : DEFAULT_TIMEOUT_S;
    p->rank0_experts = !(o && o->no_rank0_experts);
    int rc = o ? share_weights(p, o, err) : 0;
    if (rc) {
        /* every rank fails here alike (the same weights, or the same gathered rates) */
        int faulted = p->faulted;
        free(p->weights);
        free(p);
        if (!faulted) {     /* MPI_Finalize would wait for a rank that is gone */
            MPI_Comm_free(comm);
            MPI_Finalize();
        }
        free(comm);
        return rc;
    }
    *out = p;
    return 0;
}

int mpi_job_end(struct colibri_mpi *p)
{
    if (!p) return 0;
    if (p->rank == 0 && p->size > 1 && !p->handshakes && !p->faulted) {
        struct expert_store *s = NULL;
        struct colibri_err e = { 0 };
        mpi_hello(p, NULL, NULL, &s, &e);
    }
    int faulted = p->faulted;
    if (!faulted) {
        MPI_Comm c = comm_of(p);
        MPI_Comm_free(&c);
        MPI_Finalize();
    }
    free(p->comm);
    free(p->weights);
    free(p);
    return faulted ? COLIBRI_EIO : 0;
}

_Noreturn void mpi_job_abort(int code)
{
    MPI_Abort(MPI_COMM_WORLD, code);
    abort();    /* MPI_Abort does not return; if it did, the job must still end */
}
