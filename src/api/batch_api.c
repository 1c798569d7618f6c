/* api/batch_api.c - the "serving" section of include/colibri.h: what a server
 * needs beyond single-session use. */
#include <omp.h>

#include "colibri.h"

void colibri_thread_set_compute_threads(int n)
{
    if (n > 0) omp_set_num_threads(n);
}
