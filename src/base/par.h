/* base/par.h - a parallel loop that costs nothing when it runs on one thread.
 *
 * libgomp allocates a team on every entry to a parallel region of one thread
 * (an `if` clause that is false, num_threads(1), or a region nested in
 * another), and frees it at the end: one malloc per call of every small
 * product and norm on the decode path. It keeps the last team of more
 * threads, but only for a region of the same size: regions on the token
 * path use either the calling thread alone or the compute context's
 * threads. BASE_PAR_FOR runs the loop in a
 * region only when par is true and on the calling thread otherwise, so the
 * loop's statements, and their bits, are the same either way. The loop (the
 * macro's last argument) must hold no #pragma; a loop that needs one goes in
 * a function. */
#ifndef COLIBRI_BASE_PAR_H
#define COLIBRI_BASE_PAR_H

#include <omp.h>

#define BASE_PAR_FOR(par, ...)                                                                                      \
    do {                                                                                                            \
        if (par) {                                                                                                  \
            _Pragma("omp parallel for schedule(static)") __VA_ARGS__                                                \
        } else {                                                                                                    \
            __VA_ARGS__                                                                                             \
        }                                                                                                           \
    } while (0)

/* The same over nt threads (nt <= 1: the calling thread). */
#define BASE_PAR_FOR_N(nt, ...)                                                                                     \
    do {                                                                                                            \
        const int base_par_nt_ = (nt);                                                                              \
        if (base_par_nt_ > 1) {                                                                                     \
            _Pragma("omp parallel for schedule(static) num_threads(base_par_nt_)") __VA_ARGS__                      \
        } else {                                                                                                    \
            __VA_ARGS__                                                                                             \
        }                                                                                                           \
    } while (0)

#endif
