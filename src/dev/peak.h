/* dev/peak.h - compute-peak probe: how many arithmetic operations per second
 * this machine's cores retire for the instructions the kernels are built on,
 * measured, so a kernel's rate can be stated as a fraction of its
 * instruction's peak (and a decode rate as a fraction of the read bound).
 *
 * Each probe runs a loop of independent register-only operations (enough
 * chains to cover the instruction's latency on every pipe), on 1 thread and
 * on `threads` OpenMP threads, and keeps the best of a few timed passes.
 * Each thread is timed by its own CPU time (so on a shared machine the
 * figure is what a core does while it runs this process, not diluted by
 * time-slicing); the all-threads figure is the sum over the threads.
 * Operations are counted as a multiply and an add per multiply-add:
 *   fp32 FMA   VFMADD231PS zmm   16 lanes x 2        = 32 FLOP per instruction
 *   bf16 dot   VDPBF16PS zmm     16 lanes x 2 pairs x 2 = 64 FLOP
 *   int8 dot   VPDPBUSD zmm      16 lanes x 4 pairs x 2 = 128 OP
 *   AMX int8   TDPBSSD           16 x 16 x 64 x 2       = 32768 OP
 *   AMX bf16   TDPBF16PS         16 x 16 x 32 x 2       = 16384 FLOP
 * The AMX probes run on full 16-row x 64-byte tiles: four accumulator tiles
 * updated in turn from two A and two B tiles (each operand tile feeds two
 * products), so no product waits on the previous one's result; each
 * thread loads its own tile configuration and releases it after.
 * A probe whose instruction this machine lacks, or whose AMX unit this
 * process may not use (quant/amx.h), reports 0 (not measured). */
#ifndef COLIBRI_QUANT_PEAK_H
#define COLIBRI_QUANT_PEAK_H

#include <stddef.h>
#include <stdio.h>

enum quant_peak_kind {
    QUANT_PEAK_FP32_FMA,
    QUANT_PEAK_BF16_DOT,
    QUANT_PEAK_INT8_DOT,
    QUANT_PEAK_AMX_INT8,
    QUANT_PEAK_AMX_BF16,
    QUANT_PEAK_COUNT
};

struct quant_peak {
    int threads;                            /* the all-threads count measured */
    double one[QUANT_PEAK_COUNT];           /* G op/s, 1 thread (0: not available) */
    double all[QUANT_PEAK_COUNT];           /* G op/s, `threads` threads */
};

/* Operations per instruction and the instruction's name, per kind. */
int quant_peak_ops_per_insn(enum quant_peak_kind k);
const char *quant_peak_name(enum quant_peak_kind k);

/* Measures every kind on 1 and `threads` threads (<= 0: omp_get_max_threads),
 * about `seconds` per kind and thread count (<= 0: 0.2). */
void quant_peak_measure(int threads, double seconds, struct quant_peak *out);

/* Writes a markdown table of *p to f. */
void quant_peak_print(const struct quant_peak *p, FILE *f);

/* The per-ISA loop: runs `iters` iterations of one kind's loop on the calling
 * thread and returns the instructions executed (0 if the kind is not built
 * for this ISA). Defined in peak_avx512.c; exposed for peak.c only. */
double quant_peak_loop_avx512(enum quant_peak_kind k, long iters);

#endif
