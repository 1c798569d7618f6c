/* bench/ct_repack.c - the cost of repacking one compressed-tensors int4
 * expert into q4g32 (model_shipped_ct_int4_repack, what the streamed store
 * does on a reader thread after each read) against the time its bytes take
 * to read at a given disk rate. Kimi K2 shapes by default: gate and up
 * [2048, 7168], down [7168, 2048], bf16 scales per 32. One thread, best and
 * median of 15 repacks of one expert (its output is 31 MB, past the caches),
 * in this thread's CPU time.
 *
 * usage: ct_repack [READ_GB_PER_S (default 3)] [HIDDEN INTER] */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "io/safetensors.h"
#include "model/shipped.h"
#include "quant/format.h"

/* this thread's CPU time: on a loaded machine the wall time counts others' turns */
static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    double gbps = argc > 1 ? atof(argv[1]) : 3.0;
    int hid = argc > 3 ? atoi(argv[2]) : 7168, inter = argc > 3 ? atoi(argv[3]) : 2048;
    const int shape[3][2] = { { inter, hid }, { inter, hid }, { hid, inter } };
    void *pk[3], *sc[3], *d[3];
    float *f[3];
    size_t read_bytes = 0;
    srand(1);
    for (int m = 0; m < 3; m++) {
        int r = shape[m][0], c = shape[m][1];
        size_t pb = (size_t)r * c / 2, sb = (size_t)r * (c / 32) * 2;
        pk[m] = malloc(pb);
        sc[m] = malloc(sb);
        d[m] = malloc(quant_fmt_data_bytes(QUANT_Q4G32, r, c));
        f[m] = malloc((size_t)r * (c / 32) * sizeof(float));
        if (!pk[m] || !sc[m] || !d[m] || !f[m]) return 1;
        for (size_t i = 0; i < pb; i++) ((uint8_t *)pk[m])[i] = (uint8_t)rand();
        for (size_t i = 0; i < sb / 2; i++) ((uint16_t *)sc[m])[i] = (uint16_t)(0x3C00 + rand() % 256);
        read_bytes += pb + sb;
    }
    double t[15];
    for (int k = 0; k < 15; k++) {
        double t0 = now();
        for (int m = 0; m < 3; m++)
            model_shipped_ct_int4_repack(pk[m], sc[m], ST_BF16, shape[m][0], shape[m][1], d[m], f[m]);
        t[k] = now() - t0;
    }
    qsort(t, 15, sizeof t[0], cmp);
    double rd = (double)read_bytes / (gbps * 1e9);
    printf("expert [%d x %d] x2 + [%d x %d]: %.1f MB read; repack best %.2f ms, median %.2f ms CPU (%.2f GB/s of input);"
           " its read at %.1f GB/s %.2f ms: repack / read = %.2f\n",
           inter, hid, hid, inter, read_bytes / 1e6, t[0] * 1e3, t[7] * 1e3, read_bytes / t[7] / 1e9, gbps, rd * 1e3,
           t[7] / rd);
    return 0;
}
