/* dev/peak_avx512.c - the register-only loops of the compute-peak probe
 * (dev/peak.h) with AVX-512 instructions. Each iteration issues CHAINS
 * independent operations on loop-invariant register operands (REG_LOOP
 * below). The AMX
 * loops keep 4 accumulator tiles (tmm0-3) fed by 2 A (tmm4-5) and 2 B
 * (tmm6-7) tiles: a product reads the accumulator the product 4 before it
 * wrote, which covers the tile unit's latency; their results are stored and
 * summed into the sink too. */
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "quant/amx.h"
#include "dev/peak.h"

/* The register loops are written in assembly: with 24 accumulators in
 * intrinsics, GCC 12 copied VPDPBUSD's tied accumulator through spare
 * registers and spilled some of them to the stack, and the store-to-load
 * round trips held the probe to a third of the instruction's rate (333
 * against 951 G op/s on a Xeon with AMX). Here 16 accumulators sit in
 * zmm16-31, enough to cover a 4-6 cycle latency on 2-3 pipes. */
#define CHAINS 16
#define ACC_ZERO(r) "vpxord %%zmm" #r ", %%zmm" #r ", %%zmm" #r "\n\t"
#define ACC_OP(op, r) op " %[b], %[a], %%zmm" #r "\n\t"
#define ACC_ALL(M, ...)                                                                     \
    M(__VA_ARGS__, 16) M(__VA_ARGS__, 17) M(__VA_ARGS__, 18) M(__VA_ARGS__, 19)             \
    M(__VA_ARGS__, 20) M(__VA_ARGS__, 21) M(__VA_ARGS__, 22) M(__VA_ARGS__, 23)             \
    M(__VA_ARGS__, 24) M(__VA_ARGS__, 25) M(__VA_ARGS__, 26) M(__VA_ARGS__, 27)             \
    M(__VA_ARGS__, 28) M(__VA_ARGS__, 29) M(__VA_ARGS__, 30) M(__VA_ARGS__, 31)
#define ACC_ZERO_ONE(unused, r) ACC_ZERO(r)
#define ACC_CLOBBERS                                                                        \
    "xmm16", "xmm17", "xmm18", "xmm19", "xmm20", "xmm21", "xmm22", "xmm23", "xmm24",        \
    "xmm25", "xmm26", "xmm27", "xmm28", "xmm29", "xmm30", "xmm31"

/* `iters` iterations of CHAINS independent `op zmm_acc += f(a, b)`; the
 * asm is volatile, so nothing is dropped though no result is kept. */
#define REG_LOOP(op, a, b, iters)                                                           \
    do {                                                                                    \
        long n_ = (iters);                                                                  \
        if (n_ <= 0) break;                                                                 \
        __asm__ volatile(ACC_ALL(ACC_ZERO_ONE, 0)                                           \
                         "1:\n\t" ACC_ALL(ACC_OP, op) "dec %[n]\n\t"                        \
                         "jnz 1b\n\t"                                                       \
                         : [n] "+r"(n_)                                                     \
                         : [a] "v"(a), [b] "v"(b)                                           \
                         : "cc", ACC_CLOBBERS);                                             \
    } while (0)

static volatile float sink_f;
static volatile int sink_i;

static double fma_loop(long iters)
{
    __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
    REG_LOOP("vfmadd231ps", a, b, iters);
    return (double)iters * CHAINS;
}

static double bf16_loop(long iters)
{
    __m512i a = _mm512_set1_epi16(0x3F80), b = _mm512_set1_epi16(0x3380);   /* 1.0, 2^-24 */
    REG_LOOP("vdpbf16ps", a, b, iters);
    return (double)iters * CHAINS;
}

static double vnni_loop(long iters)
{
    __m512i a = _mm512_set1_epi8(3), b = _mm512_set1_epi8(-2);
    REG_LOOP("vpdpbusd", a, b, iters);
    return (double)iters * CHAINS;
}


/* The 4 accumulators' sum, read from memory after the loop. */
static float amx_sum_f(void)
{
    _Alignas(64) float c[4][16 * 16];
    _tile_stored(0, c[0], 64);
    _tile_stored(1, c[1], 64);
    _tile_stored(2, c[2], 64);
    _tile_stored(3, c[3], 64);
    float s = 0;
    for (int t = 0; t < 4; t++) for (int i = 0; i < 256; i++) s += c[t][i];
    return s;
}

static double amx_int8_loop(long iters)
{
    _Alignas(64) int8_t a[16 * 64], b[16 * 64];
    for (int i = 0; i < 16 * 64; i++) a[i] = (int8_t)(i % 7 - 3), b[i] = (int8_t)(i % 5 - 2);
    quant_amx_config_full();
    _tile_zero(0); _tile_zero(1); _tile_zero(2); _tile_zero(3);
    _tile_loadd(4, a, 64); _tile_loadd(5, b, 64);
    _tile_loadd(6, b, 64); _tile_loadd(7, a, 64);
    for (long it = 0; it < iters; it++) {
        _tile_dpbssd(0, 4, 6);
        _tile_dpbssd(1, 4, 7);
        _tile_dpbssd(2, 5, 6);
        _tile_dpbssd(3, 5, 7);
    }
    _Alignas(64) int32_t c[16 * 16];
    int s = 0;
    _tile_stored(0, c, 64); for (int i = 0; i < 256; i++) s += c[i];
    _tile_stored(1, c, 64); for (int i = 0; i < 256; i++) s += c[i];
    _tile_stored(2, c, 64); for (int i = 0; i < 256; i++) s += c[i];
    _tile_stored(3, c, 64); for (int i = 0; i < 256; i++) s += c[i];
    _tile_release();
    sink_i = s;
    return (double)iters * 4;
}

static double amx_bf16_loop(long iters)
{
    _Alignas(64) uint16_t a[16 * 32], b[16 * 32];
    for (int i = 0; i < 16 * 32; i++) a[i] = 0x3F80, b[i] = 0x3380;     /* 1.0, 2^-24 */
    quant_amx_config_full();
    _tile_zero(0); _tile_zero(1); _tile_zero(2); _tile_zero(3);
    _tile_loadd(4, a, 64); _tile_loadd(5, b, 64);
    _tile_loadd(6, b, 64); _tile_loadd(7, a, 64);
    for (long it = 0; it < iters; it++) {
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
    }
    sink_f = amx_sum_f();
    _tile_release();
    return (double)iters * 4;
}

double quant_peak_loop_avx512(enum quant_peak_kind k, long iters)
{
    switch (k) {
    case QUANT_PEAK_FP32_FMA: return fma_loop(iters);
    case QUANT_PEAK_BF16_DOT: return bf16_loop(iters);
    case QUANT_PEAK_INT8_DOT: return vnni_loop(iters);
    case QUANT_PEAK_AMX_INT8: return amx_int8_loop(iters);
    case QUANT_PEAK_AMX_BF16: return amx_bf16_loop(iters);
    default: return 0;
    }
}
