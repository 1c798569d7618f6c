/* bench/matvec.c - weight-format kernel throughput, as ratios measured in one
 * run: the read-bandwidth probe (dev/readprobe.h: its variants with every
 * OpenMP thread, the best kept), then per format the matvec (decode) rate in GB/s of weight bytes
 * (data + scales) as a fraction of the probe, and the matmul (prefill) rate
 * in GFLOP/s for batches of 16 and 64, and the one-thread matvec rate on a
 * slice that stays in cache (the kernel's compute ceiling per core). Prints a markdown report on
 * stdout.
 *
 * The matvec matrix is sized per format to about 512 MiB of weights (many
 * times the last-level cache), cols = 7168 (DeepSeek-V3's hidden size), so
 * it streams from memory as a decode step does. Probe passes are interleaved
 * with each format's matvecs and the ratio is of the two medians, so load
 * from other processes that comes and goes affects both alike; the load
 * average is printed at start and end for the reader to judge. Weights are random bytes
 * shaped to valid, normal values; the rate does not depend on them.
 *
 * usage: matvec [--mib N | N] [--formats a,b,...]  (MiB per matvec matrix,
 * default 512; the formats measured, default all) */
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "base/util.h"
#include "cli/opts.h"
#include "quant/kernels.h"
#include "dev/peak.h"
#include "dev/readprobe.h"
#include "quant/qtensor.h"

static uint64_t rng = 0x243F6A8885A308D3ull;
static inline uint64_t next(void)
{
    rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
    return rng;
}

/* Random bytes that decode to normal values of moderate size. */
static void fill(enum quant_fmt f, uint8_t *p, size_t n)
{
    for (size_t i = 0; i + 8 <= n; i += 8) {
        uint64_t r = next();
        if (f == QUANT_F32) r = (r & 0x807FFFFF807FFFFFull) | 0x3C0000003C000000ull;
        else if (f == QUANT_BF16) r = (r & 0x807F807F807F807Full) | 0x3C003C003C003C00ull;
        else if (f == QUANT_F16) r = (r & 0x83FF83FF83FF83FFull) | 0x3800380038003800ull;
        else if (f == QUANT_FP8B) r = (r & 0xBFBFBFBFBFBFBFBFull) | 0x0808080808080808ull; /* E in 1..7: normal, no NaN */
        memcpy(p + i, &r, 8);
    }
}

static void cpu_model(char *out, size_t n)
{
    snprintf(out, n, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f))
        if (strncmp(line, "model name", 10) == 0) {
            char *c = strchr(line, ':');
            if (c) {
                snprintf(out, n, "%s", c + 2);
                out[strcspn(out, "\n")] = 0;
            }
            break;
        }
    fclose(f);
}

static void loadavg(char *out, size_t n)
{
    snprintf(out, n, "?");
    FILE *f = fopen("/proc/loadavg", "r");
    if (!f) return;
    if (fgets(out, (int)n, f)) out[strcspn(out, "\n")] = 0;
    fclose(f);
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    int mib_arg = 512;
    const char *only = NULL;
    const struct opt opts[] = {
        { "mib", 0, OPT_INT, &mib_arg, "MiB of weights per matvec matrix (default 512; also the one positional "
                                       "argument)", 1, 1 << 20 },
        { "formats", 0, OPT_STR, &only, "comma-separated formats to measure (default: all)" },
    };
    const struct opts_spec spec = { "matvec [--mib N | N] [--formats LIST]", "Weight-format kernel throughput as "
                                    "ratios measured in one run (a markdown report).", opts, 2 };
    char *pos[1];
    int npos, prc = opts_parse(&spec, argc - 1, argv + 1, pos, 1, &npos);
    if (prc) return prc > 0 ? 0 : 2;
    if (npos && opts_int_list("mib", pos[0], &mib_arg, 1, 1, 1 << 20) < 0) return 2;
    size_t mib = (size_t)mib_arg;
    struct quant_scratch qs = { 0 };   /* reused, as the forward reuses its run buffers' */
    char model[256];
    cpu_model(model, sizeof model);
    struct utsname u;
    uname(&u);
    int threads = omp_get_max_threads();
    enum quant_isa isa = quant_isa_best();

    char la[128];
    loadavg(la, sizeof la);
    printf("## Machine\n\n- CPU: %s (%ld logical CPUs online), %s %s\n- OpenMP threads: %d\n"
           "- kernel level: %s\n- /proc/loadavg at start: %s\n\n", model, sysconf(_SC_NPROCESSORS_ONLN),
           u.sysname, u.machine, threads, quant_isa_name(isa), la);
    fflush(stdout);

    struct quant_peak peak;
    quant_peak_measure(threads, 0, &peak);
    printf("## Compute peaks (same run, best of 3 passes of ~0.07 s)\n\n");
    quant_peak_print(&peak, stdout);
    printf("\n");
    fflush(stdout);

    /* The probe buffer stays allocated: each format's matvec timings are
     * interleaved with probe passes, so background load that comes and goes
     * hits both alike, and the ratio uses the medians of the two. */
    struct quant_read_probe rp;
    if (quant_read_probe_measure(0, 0, &rp)) { fprintf(stderr, "out of memory\n"); return 1; }
    const struct quant_read_probe_variant *bound = &rp.v[rp.best];
    char how[96];
    quant_read_probe_variant_name(bound, how, sizeof how);
    printf("## Read-bandwidth probe\n\n");
    quant_read_probe_print(&rp, stdout);
    printf("\nThe best variant (%s, **%.1f GB/s**) is the bound; each format below is compared with passes "
           "of it interleaved with its own matvecs.\n\n", how, bound->gbs);
    size_t pbytes = rp.bytes;
    uint64_t sink = 0;
    void *pbuf = quant_read_probe_buffer(pbytes, bound->huge);
    if (!pbuf) { fprintf(stderr, "out of memory\n"); return 1; }
    printf("## matvec (decode): y = W x, cols = 7168, ~%zu MiB of weights per matrix\n\n", mib);
    printf("| format | rows | weight bytes | ms / matvec (median) | GB/s | probe GB/s (same time) | of probe |\n");
    printf("|---|---:|---:|---:|---:|---:|---:|\n");
    fflush(stdout);

    const int cols = 7168;
    static const int all[] = { QUANT_F32, QUANT_BF16, QUANT_F16, QUANT_Q8, QUANT_Q4,
                               QUANT_Q4G32, QUANT_Q4G64, QUANT_Q4G128, QUANT_FP8B, QUANT_MXFP4 };
    int fmts[QUANT_FMT_COUNT], nf = 0;
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        const char *nm = quant_fmt_name(all[i]), *p = only;
        size_t len = strlen(nm);
        int want = !only;
        while (p && *p && !want) {
            want = !strncmp(p, nm, len) && (p[len] == ',' || !p[len]);
            p = strchr(p, ',');
            if (p) p++;
        }
        if (want) fmts[nf++] = all[i];
    }
    if (!nf) { fprintf(stderr, "matvec: --formats %s names no format\n", only); return 2; }
    double gflops[QUANT_FMT_COUNT][2] = { { 0 } }, incache[QUANT_FMT_COUNT] = { 0 };
    float *x = base_xalloc(64 * (size_t)cols * sizeof(float));
    for (size_t i = 0; i < 64 * (size_t)cols; i++) x[i] = (float)((int)(next() % 2001) - 1000) * 1e-3f;

    for (int fi = 0; fi < nf; fi++) {
        enum quant_fmt f = fmts[fi];
        size_t rb = quant_fmt_row_bytes(f, cols);
        int rows = (int)((mib << 20) / rb) / 128 * 128;
        size_t nd = quant_fmt_data_bytes(f, rows, cols), ns = quant_fmt_scale_count(f, rows, cols);
        int e8m0 = quant_fmt_traits(f)->scale_e8m0;
        uint8_t *d = base_xalloc(nd);
        float *s = ns ? base_xalloc(ns * sizeof(float)) : NULL;
        float *y = base_xalloc((size_t)64 * rows * sizeof(float));
        if (!d || (ns && !s) || !y) { fprintf(stderr, "out of memory\n"); return 1; }
        fill(f, d, nd);
        for (size_t i = 0; i < ns; i++) s[i] = 1e-3f * (float)(1 + next() % 100);
        if (e8m0)                       /* e8m0 bytes 2^-8 .. 2^-1 */
            for (size_t i = 0; i < ns; i++) ((uint8_t *)s)[i] = (uint8_t)(119 + next() % 8);
        struct qtensor W;
        if (quant_qtensor_wrap_raw(f, rows, cols, d, nd, s, quant_fmt_scale_bytes(f, rows, cols), &W, NULL)) return 1;

        double t[16], tp[16];
        int it = 0;
        quant_matvec(&W, x, y, &qs, NULL);                                  /* warm-up */
        for (; it < 16; it++) {
            tp[it] = quant_read_probe_pass(bound, pbuf, pbytes, &sink);
            double t0 = base_now_sec();
            quant_matvec(&W, x, y, &qs, NULL);
            t[it] = base_now_sec() - t0;
        }
        qsort(t, it, sizeof t[0], cmp_d);
        qsort(tp, it, sizeof tp[0], cmp_d);
        double med = t[it / 2], bytes = (double)nd + (double)quant_fmt_scale_bytes(f, rows, cols);
        double pbw = pbytes / tp[it / 2] / 1e9;
        printf("| %s | %d | %.0f MiB | %.2f | %.1f | %.1f | %.0f%% |\n", quant_fmt_name(f), rows,
               bytes / (1 << 20), med * 1e3, bytes / med / 1e9, pbw, 100 * bytes / med / 1e9 / pbw);
        fflush(stdout);

        /* prefill: a 4096 x 7168 slice of the same matrix, batches 16 and 64 */
        struct qtensor P = W;
        P.rows = rows < 4096 ? rows : 4096;
        for (int bi = 0; bi < 2; bi++) {
            int n = bi ? 64 : 16;
            quant_matmul(&P, x, n, y, &qs, NULL);
            double best = 1e30;
            for (int rep = 0; rep < 3; rep++) {
                double t0 = base_now_sec();
                quant_matmul(&P, x, n, y, &qs, NULL);
                double dt = base_now_sec() - t0;
                if (dt < best) best = dt;
            }
            gflops[fi][bi] = 2.0 * P.rows * cols * n / best / 1e9;
        }
        /* compute ceiling of one core: a 1 MiB slice that stays in cache, one
         * thread (no barrier waits on a busy machine), best of 200 */
        struct qtensor C = W;
        C.rows = (int)((1 << 20) / rb);
        double cbest = 1e30;
        omp_set_num_threads(1);
        for (int rep = 0; rep < 200; rep++) {
            double t0 = base_now_sec();
            quant_matvec(&C, x, y, &qs, NULL);
            double dt = base_now_sec() - t0;
            if (dt < cbest) cbest = dt;
        }
        omp_set_num_threads(threads);
        incache[fi] = quant_qtensor_bytes(&C) / cbest / 1e9;
        free(d);
        free(s);
        free(y);
    }
    printf("\n## matmul (prefill): Y = X Wᵀ, W 4096 x 7168, best of 3; and the matvec compute ceiling\n\n"
           "The last column is matvec on a 1 MiB slice of the same matrix (it stays in cache) on one\n"
           "thread, best of 200: what one core's kernel can consume when memory is not the limit.\n\n");
    printf("| format | GFLOP/s n=16 | GFLOP/s n=64 | in-cache matvec GB/s, 1 thread |\n|---|---:|---:|---:|\n");
    for (int fi = 0; fi < nf; fi++)
        printf("| %s | %.1f | %.1f | %.1f |\n", quant_fmt_name(fmts[fi]), gflops[fi][0], gflops[fi][1], incache[fi]);
    loadavg(la, sizeof la);
    printf("\n/proc/loadavg at end: %s\n", la);
    free(x);
    quant_read_probe_buffer_free(pbuf, pbytes);
    if (sink == 1) printf("\n");   /* keeps the probe's sums, and so its reads */
    quant_scratch_free(&qs);
    return 0;
}
