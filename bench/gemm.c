/* bench/gemm.c - prefill-shaped matmul throughput per weight format:
 * Y = X Wᵀ with W [rows x 7168] (DeepSeek-V3's hidden size) and a batch of n
 * activations, timed on the threads OMP_NUM_THREADS gives. Prints one line
 * per format: median, min and max GFLOP/s over the timed repetitions
 * (a multiply-add counts 2) and weight bytes read per second (the decode
 * figure when n = 1), by wall clock and by process CPU time (on a
 * shared machine, time-slicing by other processes inflates the wall clock
 * but not the CPU time; with several threads the CPU-time rate is per thread
 * and counts barrier waits as busy). Uses only the qtensor API, so the same source
 * builds against an older library for before/after runs in one script
 * (bench/gemm.sh), which also prints the compute peaks to divide by.
 *
 * The name "bf16act" times the opt-in bf16-activation product
 * (quant/bf16act.h) on bf16 weights on its default kernel (AMX tiles where
 * available), "bf16act-avx512" the same product on its VDPBF16PS kernel.
 * The name "read" in the format list times the read-bandwidth probe instead:
 * a sum over rows * 7168 * 2 bytes with every thread, 8 streams per thread
 * (the decode bound; list it between formats to interleave it with their
 * matvecs, n = 1).
 *
 * usage: gemm [n, default 256] [rows, default 1024] [reps, default 5] [formats, default all]
 *             [kernel level, default "best": scalar, avx2, avx512, avx512vbmi, amx, neon]
 *             [cols, default 7168; 2048 is a V3 down projection's and V2-Lite's hidden size] */
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/util.h"
#include "quant/format.h"
#include "quant/qtensor.h"
#ifndef GEMM_NO_BF16ACT             /* building against a library without it */
#include "quant/bf16act.h"
#endif

static uint64_t rng = 0x243F6A8885A308D3ull;
static inline uint64_t next(void)
{
    rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
    return rng;
}

static double cpu_sec(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The read probe: median rate of `reps` sums over a buffer of `bytes`.
 * Each thread sums its share as PROBE_STREAMS streams read side by side in
 * 64-byte vectors: one sequential scalar stream (the probe until
 * gemm-results-3) ran at 7-9 GB/s on an Ice Lake-SP guest whose bf16 matvec
 * streams 12-13, so it bounded nothing there; 1, 4 and 8 vector streams read
 * about 11, 15 and 16 GB/s. This is one variant of the library's read
 * probe (dev/readprobe.h, which keeps the fastest of several); the copy
 * keeps the bench building against older libraries (bench/gemm.sh). Being
 * one variant without software prefetch it reads below that bound (5.4-5.9
 * against 10.5-11.2 GB/s on a Zen 3 guest, issue 38), so a share of it reads
 * high; the summaries say so under their tables. */
#define PROBE_STREAMS 8
typedef uint64_t probe_vec __attribute__((vector_size(64)));

static void read_probe(size_t bytes, int reps)
{
    static volatile uint64_t sink;
    const size_t nv = bytes / sizeof(probe_vec);
    probe_vec *b = base_xalloc(nv * sizeof(probe_vec));
    if (!b) return;
    #pragma omp parallel for schedule(static)
    for (size_t i = 0; i < nv; i++) for (int k = 0; k < 8; k++) b[i][k] = i + k;
    double t[100], tc[100];
    for (int r = 0; r < reps; r++) {
        double t0 = base_now_sec(), c0 = cpu_sec();
        uint64_t sum = 0;
        #pragma omp parallel reduction(+ : sum)
        {
            int nt = omp_get_num_threads(), id = omp_get_thread_num();
            size_t per = nv / nt, v0 = per * id, len = (id == nt - 1 ? nv - v0 : per) / PROBE_STREAMS;
            probe_vec acc[PROBE_STREAMS] = { { 0 } };
            for (size_t i = 0; i < len; i++)
                for (int s = 0; s < PROBE_STREAMS; s++) acc[s] += b[v0 + s * len + i];
            for (int s = 0; s < PROBE_STREAMS; s++)
                for (int k = 0; k < 8; k++) sum += acc[s][k];
        }
        sink += sum;
        t[r] = base_now_sec() - t0;
        tc[r] = (cpu_sec() - c0) / omp_get_max_threads();
    }
    qsort(t, reps, sizeof t[0], cmp_d);
    qsort(tc, reps, sizeof tc[0], cmp_d);
    printf("read probe %.0f MiB threads=%d streams=%d | weight GB/s wall median %.1f cpu-time median %.1f\n",
           bytes / 1048576.0, omp_get_max_threads(), PROBE_STREAMS, bytes / t[reps / 2] / 1e9,
           bytes / tc[reps / 2] / 1e9);
    fflush(stdout);
    free(b);
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 256, rows = argc > 2 ? atoi(argv[2]) : 1024;
    int reps = argc > 3 ? atoi(argv[3]) : 5;
    char every_fmt[256];
    quant_fmt_names(every_fmt, sizeof every_fmt, ",");
    const char *list = argc > 4 ? argv[4] : every_fmt;
    const int cols = argc > 6 ? atoi(argv[6]) : 7168;
    int isa = quant_isa_best();
    if (argc > 5 && strcmp(argv[5], "best") != 0) {
        isa = -1;
        for (int i = 0; i < QUANT_ISA_COUNT; i++)
            if (strcmp(argv[5], quant_isa_name(i)) == 0) isa = i;
        if (isa < 0 || !quant_isa_available(isa)) { fprintf(stderr, "level %s not available\n", argv[5]); return 2; }
    }
    if (n <= 0 || rows <= 0 || cols <= 0 || reps <= 0 || reps > 100) { fprintf(stderr, "bad arguments\n"); return 2; }
    float *w = base_xalloc((size_t)rows * cols * sizeof(float)), *x = base_xalloc((size_t)n * cols * sizeof(float));
    float *y = base_xalloc((size_t)n * rows * sizeof(float));
    if (!w || !x || !y) { fprintf(stderr, "out of memory\n"); return 1; }
    for (size_t i = 0; i < (size_t)rows * cols; i++) w[i] = (float)((int)(next() % 2001) - 1000) * 1e-3f;
    for (size_t i = 0; i < (size_t)n * cols; i++) x[i] = (float)((int)(next() % 2001) - 1000) * 1e-3f;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", list);
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        if (strcmp(tok, "read") == 0) {
            read_probe((size_t)rows * cols * 2, reps);
            continue;
        }
        /* 1: the default bf16act kernel, 2: the VDPBF16PS one */
        int bf16act = strcmp(tok, "bf16act") == 0 ? 1 : strcmp(tok, "bf16act-avx512") == 0 ? 2 : 0;
        int f = bf16act ? QUANT_BF16 : quant_fmt_from_name(tok);
        if (f < 0) { fprintf(stderr, "unknown format %s\n", tok); return 2; }
        struct qtensor W;
        if (quant_qtensor_from_f32(f, rows, cols, w, &W, NULL)) return 1;
#ifdef GEMM_NO_BF16ACT
        if (bf16act) { fprintf(stderr, "bf16act not built\n"); return 2; }
#define PRODUCT() quant_matmul_isa(&W, x, n, y, isa, NULL)
#else
#define PRODUCT()                                                                                          \
    (bf16act == 1   ? quant_matmul_bf16act(&W, x, n, y, NULL)                                              \
     : bf16act == 2 ? quant_matmul_bf16act_kernel(&W, x, n, y, QUANT_BF16ACT_VDPBF16PS, NULL)              \
                    : quant_matmul_isa(&W, x, n, y, isa, NULL))
#endif
        if (PRODUCT()) return 1;                                     /* warm-up */
        double t[100], tc[100];
        for (int r = 0; r < reps; r++) {
            double t0 = base_now_sec(), c0 = cpu_sec();
            PRODUCT();
            t[r] = base_now_sec() - t0;
            tc[r] = (cpu_sec() - c0) / omp_get_max_threads();
        }
        qsort(t, reps, sizeof t[0], cmp_d);
        qsort(tc, reps, sizeof tc[0], cmp_d);
        double fl = 2.0 * rows * cols * n / 1e9;
        double gb = quant_qtensor_bytes(&W) / 1e9;
        printf("%s %s n=%d rows=%d threads=%d GFLOP/s wall median %.1f min %.1f max %.1f | cpu-time median %.1f max %.1f"
               " | weight GB/s wall median %.1f cpu-time median %.1f\n",
               quant_isa_name(isa), tok, n, rows, omp_get_max_threads(), fl / t[reps / 2], fl / t[reps - 1], fl / t[0],
               fl / tc[reps / 2], fl / tc[0], gb / t[reps / 2], gb / tc[reps / 2]);
        fflush(stdout);
        quant_qtensor_free(&W);
    }
    free(w); free(x); free(y);
    return 0;
}
