/* quant/peak_avx512.c - the register-only loops of the compute-peak probe
 * (quant/peak.h) with AVX-512 instructions. Each iteration issues CHAINS
 * independent operations; 24 chains cover a 4-6 cycle latency on 2-4 pipes.
 * The operands are loop-invariant registers and the accumulators are summed
 * into a volatile sink, so the compiler keeps every operation. */
#include <immintrin.h>

#include "quant/peak.h"

#define CHAINS 24

static volatile float sink_f;
static volatile int sink_i;

static double fma_loop(long iters)
{
    __m512 acc[CHAINS];
    for (int i = 0; i < CHAINS; i++) acc[i] = _mm512_set1_ps((float)i * 1e-3f);
    __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
    for (long it = 0; it < iters; it++) {
        __asm__ volatile("" : "+v"(a), "+v"(b));
#pragma GCC unroll 32
        for (int i = 0; i < CHAINS; i++) acc[i] = _mm512_fmadd_ps(acc[i], a, b);
    }
    __m512 s = acc[0];
    for (int i = 1; i < CHAINS; i++) s = _mm512_add_ps(s, acc[i]);
    sink_f = _mm512_reduce_add_ps(s);
    return (double)iters * CHAINS;
}

static double bf16_loop(long iters)
{
    __m512 acc[CHAINS];
    for (int i = 0; i < CHAINS; i++) acc[i] = _mm512_set1_ps((float)i * 1e-3f);
    __m512bh a = (__m512bh)_mm512_set1_epi16(0x3F80), b = (__m512bh)_mm512_set1_epi16(0x3380);
    for (long it = 0; it < iters; it++) {
        __asm__ volatile("" : "+v"(a), "+v"(b));
#pragma GCC unroll 32
        for (int i = 0; i < CHAINS; i++) acc[i] = _mm512_dpbf16_ps(acc[i], a, b);
    }
    __m512 s = acc[0];
    for (int i = 1; i < CHAINS; i++) s = _mm512_add_ps(s, acc[i]);
    sink_f = _mm512_reduce_add_ps(s);
    return (double)iters * CHAINS;
}

static double vnni_loop(long iters)
{
    __m512i acc[CHAINS];
    for (int i = 0; i < CHAINS; i++) acc[i] = _mm512_set1_epi32(i);
    __m512i a = _mm512_set1_epi8(3), b = _mm512_set1_epi8(-2);
    for (long it = 0; it < iters; it++) {
        __asm__ volatile("" : "+v"(a), "+v"(b));
#pragma GCC unroll 32
        for (int i = 0; i < CHAINS; i++) acc[i] = _mm512_dpbusd_epi32(acc[i], a, b);
    }
    __m512i s = acc[0];
    for (int i = 1; i < CHAINS; i++) s = _mm512_add_epi32(s, acc[i]);
    sink_i = _mm512_reduce_add_epi32(s);
    return (double)iters * CHAINS;
}

double quant_peak_loop_avx512(enum quant_peak_kind k, long iters)
{
    switch (k) {
    case QUANT_PEAK_FP32_FMA: return fma_loop(iters);
    case QUANT_PEAK_BF16_DOT: return bf16_loop(iters);
    case QUANT_PEAK_INT8_DOT: return vnni_loop(iters);
    default: return 0;
    }
}
