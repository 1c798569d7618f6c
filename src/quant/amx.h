/* quant/amx.h - whether this process may run Intel AMX tile instructions.
 *
 * Three conditions, all checked once (pthread_once) and cached:
 *   1. CPUID leaf 7 says AMX-TILE, and AMX-INT8 / AMX-BF16 per unit;
 *   2. the OS enabled the tile state (XCR0 bits 17 TILECFG and 18 TILEDATA);
 *   3. Linux granted this process the 8 KiB XTILEDATA state
 *      (arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA), Linux >= 5.16):
 *      without it the first tile load raises SIGILL.
 * The permission is per process, so it covers every thread, including
 * OpenMP workers started before it was granted. The tile configuration
 * (LDTILECFG) is per thread: each kernel loads its own and releases it. */
#ifndef COLIBRI_QUANT_AMX_H
#define COLIBRI_QUANT_AMX_H

enum quant_amx_unit {
    QUANT_AMX_INT8,     /* TDPBSSD / TDPBUSD ... */
    QUANT_AMX_BF16,     /* TDPBF16PS */
};

/* 1 if the unit can run in this process now (the permission requested on the
 * first call), else 0. Thread-safe. */
int quant_amx_available(enum quant_amx_unit unit);

#if defined(__AMX_TILE__) || defined(__AMXTILE__)     /* GCC, clang */
#include <immintrin.h>
#include <stdint.h>
#include <string.h>
/* Loads a configuration (palette 1) with all 8 tiles 16 rows x 64 bytes,
 * for the calling thread. For the files built with the AMX flags. */
static inline void quant_amx_config_full(void)
{
    _Alignas(64) uint8_t cfg[64];
    memset(cfg, 0, sizeof cfg);
    cfg[0] = 1;
    for (int t = 0; t < 8; t++) {
        cfg[16 + 2 * t] = 64;           /* bytes per row, 16 bits little-endian */
        cfg[48 + t] = 16;               /* rows */
    }
    /* GCC 12's _tile_loadconfig tells the compiler it reads 8 bytes, so the
     * stores above could be dropped as dead (and LDTILECFG faults): make
     * them visible first. */
    __asm__ volatile("" : : "r"(cfg) : "memory");
    _tile_loadconfig(cfg);
}
#endif

/* Why the last check said no, for messages ("the CPU lacks AMX-INT8", "the
 * kernel refused XTILEDATA (arch_prctl: ...)"); "" when available. */
const char *quant_amx_why_not(enum quant_amx_unit unit);

#endif
