/* api/peak_api.c - colibri_bench_peak and colibri_bench_read_bandwidth
 * (include/colibri_dev.h): the compute-peak probe of dev/peak.h as a
 * table, and its read probe as one figure. */
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include "colibri.h"
#include "colibri_dev.h"
#include "dev/peak.h"

int colibri_bench_peak(int threads, FILE *table, struct colibri_err *err)
{
    (void)err;
    struct quant_peak p;
    quant_peak_measure(threads, 0, &p);
    quant_peak_print(&p, table);
    return 0;
}

double colibri_bench_read_bandwidth(void)
{
    const size_t bytes = (size_t)1 << 30, n = bytes / sizeof(uint64_t);
    uint64_t *buf = aligned_alloc(64, bytes);
    if (!buf) return 0;
    #pragma omp parallel for
    for (size_t i = 0; i < n; i++) buf[i] = i;
    double best = 0;
    volatile unsigned long long sink = 0;
    for (int pass = 0; pass < 3; pass++) {
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        sink += quant_read_pass(buf, bytes);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double dt = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
        if (dt > 0 && bytes / dt / 1e9 > best) best = bytes / dt / 1e9;
    }
    (void)sink;     /* written so the passes' sums are not optimized away */
    free(buf);
    return best;
}
