/* base/compute.h - the compute context: what a forward pass may use to run.
 *
 * Today a thread count; a device (CUDA) will join it. It is passed down
 * explicitly (session -> forward -> attention) instead of being read from
 * OpenMP's global state, so two sessions in one process may use different
 * thread counts and a library user never has their OpenMP settings changed
 * behind their back. Plain data, copied freely. */
#ifndef COLIBRI_BASE_COMPUTE_H
#define COLIBRI_BASE_COMPUTE_H

struct compute_ctx {
    int n_threads;              /* >= 1 */
};

/* n_threads <= 0 picks the number of threads OpenMP would use by default. */
struct compute_ctx base_compute_ctx_make(int n_threads);

#endif
