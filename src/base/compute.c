#include "base/compute.h"

#include <omp.h>

struct compute_ctx base_compute_ctx_make(int n_threads)
{
    struct compute_ctx c = { n_threads > 0 ? n_threads : omp_get_max_threads() };
    if (c.n_threads < 1) c.n_threads = 1;
    return c;
}
