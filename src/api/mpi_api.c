/* api/mpi_api.c - the colibri_mpi_* calls of include/colibri.h, over mpi/
 * (which, built without MPI, refuses each of them by name). */
#include "api/internal.h"
#include "base/err.h"
#include "mpi/ranks.h"

int colibri_mpi_start(const struct colibri_mpi_opts *opts, colibri_mpi **out, struct colibri_err *err)
{
    if (!out) return base_err_set(err, COLIBRI_EINVAL, "colibri_mpi_start: out is required");
    return mpi_job_start(opts, out, err);
}

int colibri_mpi_rank(const colibri_mpi *p) { return p ? p->rank : 0; }
int colibri_mpi_size(const colibri_mpi *p) { return p ? p->size : 1; }
double colibri_mpi_weight(const colibri_mpi *p, int rank)
{
    return p && p->weights && rank >= 0 && rank < p->size ? p->weights[rank] : 0;
}

int colibri_mpi_serve_experts(colibri_mpi *p, colibri_model *m, struct colibri_err *err)
{
    if (!p || !m) return base_err_set(err, COLIBRI_EINVAL, "colibri_mpi_serve_experts: p and m are required");
    return mpi_serve(p, &m->m, err);
}

int colibri_mpi_stats(const colibri_model *m, int rank, struct colibri_mpi_rank_stats *out)
{
    if (!m || !out) return COLIBRI_EINVAL;
    return mpi_store_stats(m->mpi_experts, rank, out, NULL);
}

int colibri_mpi_end(colibri_mpi *p) { return mpi_job_end(p); }

_Noreturn void colibri_mpi_abort(int code) { mpi_job_abort(code); }

int colibri_api_mpi_attach(colibri_model *cm, colibri_mpi *p, int load_rc, const struct colibri_err *load_err,
                   struct colibri_err *err)
{
    struct expert_store *s = NULL;
    int rc = mpi_hello(p, load_rc ? NULL : &cm->m, load_rc ? load_err->msg : NULL, &s, err);
    if (!rc && s) cm->m.experts = s, cm->mpi_experts = s;
    return rc;
}
