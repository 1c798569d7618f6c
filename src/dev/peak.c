/* dev/peak.c - the compute-peak probe's driver (dev/peak.h): checks the
 * CPU for each instruction, calibrates an iteration count to the wanted
 * time, and times the per-ISA loop on 1 and on all threads. */
#include "dev/peak.h"

#include <assert.h>
#include <omp.h>
#include <stdint.h>
#include <time.h>

#include "quant/amx.h"


static const struct { const char *name; int ops; } KINDS[QUANT_PEAK_COUNT] = {
    [QUANT_PEAK_FP32_FMA] = { "fp32 FMA (vfmadd231ps zmm)", 32 },
    [QUANT_PEAK_BF16_DOT] = { "bf16 dot (vdpbf16ps zmm)", 64 },
    [QUANT_PEAK_INT8_DOT] = { "int8 dot (vpdpbusd zmm)", 128 },
    [QUANT_PEAK_AMX_INT8] = { "amx-int8 tile (tdpbssd)", 16 * 16 * 64 * 2 },
    [QUANT_PEAK_AMX_BF16] = { "amx-bf16 tile (tdpbf16ps)", 16 * 16 * 32 * 2 },
};

int quant_peak_ops_per_insn(enum quant_peak_kind k)
{
    return (int)k >= 0 && k < QUANT_PEAK_COUNT ? KINDS[k].ops : 0;
}

const char *quant_peak_name(enum quant_peak_kind k)
{
    return (int)k >= 0 && k < QUANT_PEAK_COUNT ? KINDS[k].name : "?";
}

static int kind_available(enum quant_peak_kind k)
{
#if defined(__x86_64__)
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("avx512f")) return 0;
    switch (k) {
    case QUANT_PEAK_FP32_FMA: return 1;
    case QUANT_PEAK_BF16_DOT: return __builtin_cpu_supports("avx512bf16");
    case QUANT_PEAK_INT8_DOT: return __builtin_cpu_supports("avx512vnni");
    case QUANT_PEAK_AMX_INT8: return quant_amx_available(QUANT_AMX_INT8);
    case QUANT_PEAK_AMX_BF16: return quant_amx_available(QUANT_AMX_BF16);
    default: return 0;
    }
#else
    (void)k;
    return 0;
#endif
}

static double run_loop(enum quant_peak_kind k, long iters)
{
#if defined(__x86_64__)
    return quant_peak_loop_avx512(k, iters);
#else
    (void)k;
    (void)iters;
    return 0;
#endif
}

static double thread_cpu_sec(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

/* G op/s of kind k on nt threads: best of 3 passes of `iters` iterations per
 * thread. Each thread's rate is its instructions over its own CPU time, so
 * time-slicing by other processes on a shared machine does not count; a
 * pass's rate is the sum over its threads. */
static double time_kind(enum quant_peak_kind k, int nt, long iters)
{
    double best = 0;
    for (int pass = 0; pass < 3; pass++) {
        double rate = 0;
        #pragma omp parallel num_threads(nt) reduction(+ : rate)
        {
            double t0 = thread_cpu_sec(), insns = run_loop(k, iters), dt = thread_cpu_sec() - t0;
            rate += dt > 0 ? insns * KINDS[k].ops / dt / 1e9 : 0;
        }
        if (rate > best) best = rate;
    }
    return best;
}

void quant_peak_measure(int threads, double seconds, struct quant_peak *out)
{
    if (threads <= 0) threads = omp_get_max_threads();
    if (seconds <= 0) seconds = 0.2;
    out->threads = threads;
    for (int k = 0; k < QUANT_PEAK_COUNT; k++) {
        out->one[k] = out->all[k] = 0;
        if (!kind_available(k)) continue;
        /* calibrate on one thread: grow the count until a pass takes 20 ms */
        long iters = 1 << 12;
        for (;;) {
            double t0 = thread_cpu_sec();
            run_loop(k, iters);
            double dt = thread_cpu_sec() - t0;
            if (dt > 0.02 || iters > (1L << 40)) {
                iters = (long)(iters * (seconds / 3) / (dt > 0 ? dt : 1e-3)) + 1;
                break;
            }
            iters *= 4;
        }
        out->one[k] = time_kind(k, 1, iters);
        out->all[k] = time_kind(k, threads, iters);
    }
}

void quant_peak_print(const struct quant_peak *p, FILE *f)
{
    fprintf(f, "| instruction | G op/s, 1 thread | G op/s, %d threads | ops per instruction |\n"
               "|---|---:|---:|---:|\n", p->threads);
    for (int k = 0; k < QUANT_PEAK_COUNT; k++) {
        if (p->one[k] <= 0) {
            fprintf(f, "| %s | not available | not available | %d |\n", KINDS[k].name, KINDS[k].ops);
            continue;
        }
        fprintf(f, "| %s | %.1f | %.1f | %d |\n", KINDS[k].name, p->one[k], p->all[k], KINDS[k].ops);
    }
}
