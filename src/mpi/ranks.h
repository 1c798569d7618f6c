/* mpi/ranks.h - the MPI job behind colibri_mpi (include/colibri.h): starting
 * and ending it, rank 0's expert store over the ranks (model.experts,
 * model/expert_store.h), and the serving loop of the ranks that own experts.
 *
 * Built with MPI=1 from comm_mpi.c, rank0_mpi.c and worker_mpi.c; without
 * MPI, off.c gives each function as COLIBRI_EUNSUPPORTED saying how to build
 * it, so callers need no #ifdef. This header does not include <mpi.h>.
 *
 * Lifetime, on every rank alike: mpi_job_start; then per model: load it,
 * mpi_hello (a rank > 0 reports its load to rank 0, rank 0 collects every
 * report and makes its store), run it (rank 0) or mpi_serve (the others),
 * free the model (rank 0's store then sends STOP); finally mpi_job_end.
 *
 * Faults: rank 0 never blocks in MPI. Each wait polls its request against a
 * deadline (timeout_s per MoE layer), and a rank that misses it, answers
 * with something malformed or makes MPI fail marks the job faulted: that
 * request and every later one fail with COLIBRI_EIO naming the rank, and
 * mpi_job_end refuses to finalize (MPI_Finalize would wait for the rank). */
#ifndef COLIBRI_MPI_RANKS_H
#define COLIBRI_MPI_RANKS_H

#include "colibri.h"
#include "model/model.h"

struct colibri_mpi {
    int rank, size;
    double timeout_s;           /* per answer */
    int rank0_experts;          /* rank 0 owns a share */
    double *weights;            /* [size] weights of the shares (mpi/share.h), or NULL: equal */
    int faulted;                /* a rank failed: do not finalize */
    int handshakes;             /* rank 0: mpi_hello calls so far */
    char fault[256];            /* what failed, naming the rank */
    void *comm;                 /* the job's communicator (an MPI_Comm, owned) */
};

int mpi_job_start(const struct colibri_mpi_opts *o, struct colibri_mpi **out, struct colibri_err *err);
/* Frees p; 0 after MPI_Finalize, COLIBRI_EIO (not finalized) when faulted.
 * Rank 0 that ends before any model handshake (its command failed early)
 * first takes the other ranks' reports and stops them, as a failed load of
 * its own would, so that every rank reaches MPI_Finalize. */
int mpi_job_end(struct colibri_mpi *p);
_Noreturn void mpi_job_abort(int code);

/* After this rank's model load (m = NULL and load_err set when it failed):
 * a rank > 0 sends its report and returns 0 (or an MPI error). Rank 0 waits
 * for every report (at most 10 * timeout_s), checks each rank loaded a model
 * of m's shape, and on success (m loaded, every rank ready) makes *out: an
 * expert store ("mpi") running each layer's routed experts on the ranks
 * that own them, rank 0's share on m->experts, which it then owns (it is
 * to replace m->experts; freeing it sends STOP to every rank unless
 * faulted, then frees m's store). Otherwise it sends STOP to the ranks that
 * loaded and returns the error naming the rank (or 0 with *out NULL when
 * only its own load failed, which the caller reports). *out is NULL on a
 * rank > 0. */
int mpi_hello(struct colibri_mpi *p, const struct model *m, const char *load_err, struct expert_store **out,
              struct colibri_err *err);
/* Rank `rank`'s counters in s, a store mpi_hello made (NULL: EINVAL, the
 * model was loaded without --mpi). */
int mpi_store_stats(const struct expert_store *s, int rank, struct colibri_mpi_rank_stats *out,
                    struct colibri_err *err);

/* A rank > 0: serves rank 0's requests on m until STOP (0). */
int mpi_serve(struct colibri_mpi *p, const struct model *m, struct colibri_err *err);

/* ---- between the MPI files (comm_mpi.c), not built without MPI ---- */

/* Seconds on the monotonic clock. */
double mpi_now(void);
/* Waits for the MPI_Request *request (a request to or from `rank`) by
 * testing it until it completes or the clock passes deadline: 0, or
 * COLIBRI_EIO naming the rank, `what` and the wait (and the job is marked
 * faulted). Polls without blocking: spins briefly, then sleeps 50 us between
 * tests, so a waiting rank leaves the cores to the others. *bytes (may be
 * NULL) gets a receive's length. */
int mpi_wait_request(struct colibri_mpi *p, void *request, int rank, double deadline, const char *what,
                     int *bytes, struct colibri_err *err);
/* COLIBRI_EIO for MPI return code rc of `what` with `rank`, naming both and
 * MPI's text; marks the job faulted. */
int mpi_fail(struct colibri_mpi *p, int rc, int rank, const char *what, struct colibri_err *err);
/* A rank > 0's load report (mpi_hello's side there). */
int mpi_worker_hello(struct colibri_mpi *p, const struct model *m, const char *load_err, struct colibri_err *err);
/* Marks the job faulted with err's message (kept for later requests) and
 * returns code. */
int mpi_fault(struct colibri_mpi *p, int code, struct colibri_err *err);

#endif
