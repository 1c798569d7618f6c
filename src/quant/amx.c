/* quant/amx.c - the AMX availability check of quant/amx.h. */
#include "quant/amx.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#if defined(__x86_64__) && defined(__linux__)
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
/* From the Linux uapi (asm/prctl.h); spelled out for older headers. */
#define AMX_ARCH_REQ_XCOMP_PERM 0x1023
#define AMX_XFEATURE_XTILEDATA 18
#endif

static struct {
    int ok[2];
    char why[2][160];
} amx_state;
static pthread_once_t amx_once = PTHREAD_ONCE_INIT;

#if defined(__x86_64__) && defined(__linux__)
static void amx_check(void)
{
    unsigned a, b, c, d;
    int tile = 0, bits[2] = { 0, 0 };
    if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
        tile = d >> 24 & 1;
        bits[QUANT_AMX_INT8] = d >> 25 & 1;
        bits[QUANT_AMX_BF16] = d >> 22 & 1;
    }
    int osxsave = __get_cpuid(1, &a, &b, &c, &d) && (c >> 27 & 1);
    unsigned long long xcr0 = 0;
    if (osxsave) {
        unsigned lo, hi;
        __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
        xcr0 = (unsigned long long)hi << 32 | lo;
    }
    static char msg[120];
    const char *why;
    if (!tile) why = "the CPU lacks AMX-TILE";
    else if ((xcr0 >> 17 & 3) != 3) why = "the OS has not enabled the AMX tile state (XCR0 bits 17-18)";
    else if (syscall(SYS_arch_prctl, AMX_ARCH_REQ_XCOMP_PERM, AMX_XFEATURE_XTILEDATA) != 0) {
        snprintf(msg, sizeof msg, "the kernel refused the AMX tile state (arch_prctl XCOMP_PERM: %s)",
                 strerror(errno));
        why = msg;
    } else why = NULL;
    for (int u = 0; u < 2; u++) {
        const char *w = why ? why : bits[u] ? NULL : u == QUANT_AMX_INT8 ? "the CPU lacks AMX-INT8"
                                                                          : "the CPU lacks AMX-BF16";
        amx_state.ok[u] = w == NULL;
        snprintf(amx_state.why[u], sizeof amx_state.why[u], "%s", w ? w : "");
    }
}
#else
static void amx_check(void)
{
    for (int u = 0; u < 2; u++)
        snprintf(amx_state.why[u], sizeof amx_state.why[u], "AMX is only used on x86-64 Linux");
}
#endif

int quant_amx_available(enum quant_amx_unit unit)
{
    pthread_once(&amx_once, amx_check);
    return (unsigned)unit < 2 && amx_state.ok[unit];
}

const char *quant_amx_why_not(enum quant_amx_unit unit)
{
    pthread_once(&amx_once, amx_check);
    return (unsigned)unit < 2 ? amx_state.why[unit] : "unknown AMX unit";
}
