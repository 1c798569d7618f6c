/* quant/dispatch.c - the one place that reads CPUID for quant/: which kernel
 * levels this machine can run, filled once (pthread_once) into a table of
 * per-format kernels, each level falling back per format to the next lower
 * level that has a kernel.
 *
 * A new level is an enum value in qtensor.h, a table of the formats it
 * implements, its cpu_has() test (for AMX: quant/amx.h, CPUID plus the
 * XTILEDATA permission), and its place in order[] and lower_of(); every
 * format it lacks falls back to the level below. */
#include <pthread.h>
#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include "quant/amx.h"
#include "quant/kernels.h"

/* The once-filled dispatch state: per level, availability and the effective
 * kernels (a format missing at a level takes the lower level's kernel). */
static struct {
    int available[QUANT_ISA_COUNT];
    struct quant_isa_table eff[QUANT_ISA_COUNT];
    enum quant_isa best;
} quant_dispatch;
static pthread_once_t quant_dispatch_once = PTHREAD_ONCE_INIT;

static const struct quant_isa_table *native_table(enum quant_isa isa)
{
    switch (isa) {
    case QUANT_ISA_SCALAR: return &quant_isa_ref;
#if defined(__x86_64__)
    case QUANT_ISA_AVX2: return &quant_isa_avx2;
    case QUANT_ISA_AVX512: return &quant_isa_avx512;
    case QUANT_ISA_AVX512VBMI: return &quant_isa_avx512vbmi;
    case QUANT_ISA_AMX: return &quant_isa_amx;
#endif
#if defined(__aarch64__)
    case QUANT_ISA_NEON: return &quant_isa_neon;
#endif
    default: return NULL;
    }
}

#if defined(__x86_64__)
/* F16C (CPUID.1:ECX bit 29) read directly: clang's __builtin_cpu_supports
 * does not know "f16c". */
static int cpu_has_f16c(void)
{
    unsigned a, b, c, d;
    return __get_cpuid(1, &a, &b, &c, &d) && (c >> 29 & 1);
}
#endif

static int cpu_has(enum quant_isa isa)
{
    switch (isa) {
    case QUANT_ISA_SCALAR: return 1;
#if defined(__x86_64__)
    case QUANT_ISA_AVX2:
        __builtin_cpu_init();
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && cpu_has_f16c();
    case QUANT_ISA_AVX512:
        __builtin_cpu_init();
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
               __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
               __builtin_cpu_supports("avx512vnni") && cpu_has_f16c();
    case QUANT_ISA_AVX512VBMI:
        __builtin_cpu_init();
        return __builtin_cpu_supports("avx512vbmi");
    case QUANT_ISA_AMX: return quant_amx_available(QUANT_AMX_INT8);
#endif
#if defined(__aarch64__)
    case QUANT_ISA_NEON: return 1;      /* baseline on aarch64 */
#endif
    default: return 0;
    }
}

/* The level below isa in its own family (NEON and AVX2 sit on scalar). */
static enum quant_isa lower_of(enum quant_isa isa)
{
    return isa == QUANT_ISA_AMX ? QUANT_ISA_AVX512VBMI
         : isa == QUANT_ISA_AVX512VBMI ? QUANT_ISA_AVX512
         : isa == QUANT_ISA_AVX512 ? QUANT_ISA_AVX2 : QUANT_ISA_SCALAR;
}

static void dispatch_fill(void)
{
    /* each level after the one it falls back to */
    const enum quant_isa order[] = { QUANT_ISA_SCALAR, QUANT_ISA_AVX2, QUANT_ISA_NEON,
                                     QUANT_ISA_AVX512, QUANT_ISA_AVX512VBMI, QUANT_ISA_AMX };
    quant_dispatch.best = QUANT_ISA_SCALAR;
    for (size_t i = 0; i < sizeof order / sizeof order[0]; i++) {
        enum quant_isa isa = order[i];
        const struct quant_isa_table *t = native_table(isa);
        if (!t || !cpu_has(isa)) continue;
        if (isa != QUANT_ISA_SCALAR && !quant_dispatch.available[lower_of(isa)]) continue;
        struct quant_isa_table *e = &quant_dispatch.eff[isa];
        const struct quant_isa_table *lo = isa == QUANT_ISA_SCALAR ? t : &quant_dispatch.eff[lower_of(isa)];
        for (int f = 0; f < QUANT_FMT_COUNT; f++) e->k[f] = t->k[f].rows ? t->k[f] : lo->k[f];
        e->act_prep = t->act_prep ? t->act_prep : lo->act_prep;
        for (int f = 0; f < QUANT_FMT_COUNT; f++)
            e->dequant[f] = t->dequant[f] ? t->dequant[f] : isa == QUANT_ISA_SCALAR ? quant_fmt_traits(f)->to_f32
                                                                                      : lo->dequant[f];
        quant_dispatch.available[isa] = 1;
        quant_dispatch.best = isa;
    }
}

static void dispatch_init(void)
{
    pthread_once(&quant_dispatch_once, dispatch_fill);
}

const struct quant_isa_table *quant_isa_table(enum quant_isa isa)
{
    dispatch_init();
    if ((int)isa < 0 || isa >= QUANT_ISA_COUNT || !quant_dispatch.available[isa]) return NULL;
    return &quant_dispatch.eff[isa];
}

enum quant_isa quant_isa_best(void)
{
    dispatch_init();
    return quant_dispatch.best;
}

int quant_isa_available(enum quant_isa isa)
{
    return quant_isa_table(isa) != NULL;
}

const char *quant_isa_name(enum quant_isa isa)
{
    static const char *const names[QUANT_ISA_COUNT] = {
        [QUANT_ISA_SCALAR] = "scalar", [QUANT_ISA_AVX2] = "avx2",
        [QUANT_ISA_AVX512] = "avx512", [QUANT_ISA_NEON] = "neon",
        [QUANT_ISA_AVX512VBMI] = "avx512vbmi", [QUANT_ISA_AMX] = "amx",
    };
    return (int)isa >= 0 && isa < QUANT_ISA_COUNT ? names[isa] : "?";
}
