/* mpi/off.c - the build without MPI: every entry point of mpi/ranks.h says
 * how to get one that works. */
#include "mpi/ranks.h"

#include <stdlib.h>

#include "base/err.h"

#define MPI_OFF(err) base_err_set(err, COLIBRI_EUNSUPPORTED, "this colibri was built without MPI: build it with " \
                                  "`make MPI=1` (Open MPI: apt-get install libopenmpi-dev openmpi-bin)")

int mpi_job_start(const struct colibri_mpi_opts *o, struct colibri_mpi **out, struct colibri_err *err)
{
    return MPI_OFF(err);
}

int mpi_job_end(struct colibri_mpi *p) { return 0; }

_Noreturn void mpi_job_abort(int code) { abort(); }

int mpi_hello(struct colibri_mpi *p, const struct model *m, const char *load_err, struct expert_store **out,
              struct colibri_err *err)
{
    return MPI_OFF(err);
}

int mpi_store_stats(const struct expert_store *s, int rank, struct colibri_mpi_rank_stats *out,
                    struct colibri_err *err)
{
    return MPI_OFF(err);
}

int mpi_serve(struct colibri_mpi *p, const struct model *m, struct colibri_err *err) { return MPI_OFF(err); }
