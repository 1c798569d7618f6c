/* dev/readprobe.c - the read-bandwidth probe (dev/readprobe.h): read loops
 * with 1-16 streams per thread, with and without a software prefetch, over
 * a buffer on 4 KiB pages and one advised for huge pages; the passes of
 * every variant interleaved so a load that comes and goes touches them all
 * alike. */
#include "dev/readprobe.h"

#include <omp.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

#include "base/util.h"
#include "colibri.h"

typedef uint64_t probe_vec __attribute__((vector_size(64)));

/* Sums `len` vectors of each of S streams (stream s starts at b + s*len),
 * prefetching `pf` bytes ahead of each stream. At most 8 accumulators, so
 * 16 streams share them in pairs (the adds are not what limits a read). */
#define READ_STREAMS_FN(S)                                                                     \
    static uint64_t read_streams_##S(const probe_vec *b, size_t len, size_t pf)               \
    {                                                                                          \
        enum { NACC = S < 8 ? S : 8 };                                                         \
        probe_vec acc[NACC];                                                                   \
        memset(acc, 0, sizeof acc);                                                            \
        const size_t pfv = pf / sizeof(probe_vec);                                             \
        if (pfv) {                                                                             \
            for (size_t i = 0; i < len; i++)                                                   \
                for (int s = 0; s < S; s++) {                                                  \
                    __builtin_prefetch(b + s * len + i + pfv, 0, 3);                           \
                    acc[s % NACC] += b[s * len + i];                                           \
                }                                                                              \
        } else {                                                                               \
            for (size_t i = 0; i < len; i++)                                                   \
                for (int s = 0; s < S; s++) acc[s % NACC] += b[s * len + i];                   \
        }                                                                                      \
        uint64_t sum = 0;                                                                      \
        for (int s = 0; s < NACC; s++)                                                         \
            for (int k = 0; k < 8; k++) sum += acc[s][k];                                      \
        return sum;                                                                            \
    }

READ_STREAMS_FN(1)
READ_STREAMS_FN(2)
READ_STREAMS_FN(4)
READ_STREAMS_FN(8)
READ_STREAMS_FN(16)

static const int STREAMS[] = { 1, 2, 4, 8, 16 };
static const int PREFETCH[] = { 0, 1024, 4096 };
_Static_assert(2 * (sizeof STREAMS / sizeof *STREAMS) * (sizeof PREFETCH / sizeof *PREFETCH) <= QUANT_READ_PROBE_MAX,
               "every variant has a slot in struct quant_read_probe");

static uint64_t read_streams(int streams, const probe_vec *b, size_t len, size_t pf)
{
    switch (streams) {
    case 1: return read_streams_1(b, len, pf);
    case 2: return read_streams_2(b, len, pf);
    case 4: return read_streams_4(b, len, pf);
    case 8: return read_streams_8(b, len, pf);
    default: return read_streams_16(b, len, pf);
    }
}

double quant_read_probe_pass(const struct quant_read_probe_variant *v, const void *buffer, size_t bytes, uint64_t *sink)
{
    const probe_vec *buf = buffer;
    const size_t nv = bytes / sizeof(probe_vec);
    uint64_t sum = 0;
    double t0 = base_now_sec();
    #pragma omp parallel reduction(+ : sum)
    {
        const size_t nt = (size_t)omp_get_num_threads(), id = (size_t)omp_get_thread_num();
        const size_t per = nv / nt, v0 = per * id, mine = id == nt - 1 ? nv - v0 : per;
        const size_t len = mine / (size_t)v->streams;
        sum += read_streams(v->streams, buf + v0, len, (size_t)v->prefetch);
        for (size_t i = v0 + len * (size_t)v->streams; i < v0 + mine; i++)
            for (int k = 0; k < 8; k++) sum += buf[i][k];
    }
    double dt = base_now_sec() - t0;
    *sink += sum;
    return dt;
}

void *quant_read_probe_buffer(size_t bytes, int huge)
{
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return NULL;
#ifdef MADV_HUGEPAGE
    (void)madvise(p, bytes, huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);   /* advice: a kernel without THP ignores it */
#endif
    uint64_t *w = p;
    const size_t n = bytes / sizeof *w;
    #pragma omp parallel for
    for (size_t i = 0; i < n; i++) w[i] = i;    /* first touch by the threads that will read */
    return p;
}

void quant_read_probe_buffer_free(void *buf, size_t bytes)
{
    if (buf) munmap(buf, bytes);
}

int quant_read_probe_measure(size_t bytes, int passes, struct quant_read_probe *out)
{
    memset(out, 0, sizeof *out);
    if (bytes == 0) bytes = (size_t)1 << 30;
    if (passes <= 0) passes = 3;
    const size_t half = bytes / 2 / sizeof(probe_vec) * sizeof(probe_vec);
    void *buf[2] = { quant_read_probe_buffer(half, 0), quant_read_probe_buffer(half, 1) };
    if (!buf[0] || !buf[1]) {
        for (int h = 0; h < 2; h++)
            if (buf[h]) quant_read_probe_buffer_free(buf[h], half);
        return COLIBRI_ENOMEM;
    }
    out->threads = omp_get_max_threads();
    out->bytes = half;
    for (int h = 0; h < 2; h++)
        for (size_t s = 0; s < sizeof STREAMS / sizeof *STREAMS; s++)
            for (size_t p = 0; p < sizeof PREFETCH / sizeof *PREFETCH; p++)
                out->v[out->n++] = (struct quant_read_probe_variant){ STREAMS[s], PREFETCH[p], h, 0 };
    uint64_t sink = 0;
    for (int pass = 0; pass < passes; pass++)
        for (int i = 0; i < out->n; i++) {
            struct quant_read_probe_variant *v = &out->v[i];
            double dt = quant_read_probe_pass(v, buf[v->huge], half, &sink);
            if (dt > 0 && (double)half / dt / 1e9 > v->gbs) v->gbs = (double)half / dt / 1e9;
        }
    for (int i = 0; i < out->n; i++)
        if (out->v[i].gbs > out->v[out->best].gbs) out->best = i;
    for (int h = 0; h < 2; h++) quant_read_probe_buffer_free(buf[h], half);
    volatile uint64_t keep = sink;   /* so the passes' sums, and their reads, are not optimized away */
    (void)keep;
    return 0;
}

void quant_read_probe_variant_name(const struct quant_read_probe_variant *v, char *buf, size_t n)
{
    char pf[32] = "no prefetch";
    if (v->prefetch) snprintf(pf, sizeof pf, "prefetch %d B", v->prefetch);
    snprintf(buf, n, "%d stream%s, %s, %s", v->streams, v->streams == 1 ? "" : "s", pf,
             v->huge ? "huge pages" : "4 KiB pages");
}

void quant_read_probe_print(const struct quant_read_probe *p, FILE *f)
{
    fprintf(f, "| read variant (%d thread%s, %.0f MiB per pass) | GB/s |\n|---|---:|\n", p->threads,
            p->threads == 1 ? "" : "s", p->bytes / 1048576.0);
    for (int i = 0; i < p->n; i++) {
        char name[96];
        quant_read_probe_variant_name(&p->v[i], name, sizeof name);
        fprintf(f, "| %s%s | %.1f |\n", name, i == p->best ? " (best: the bound)" : "", p->v[i].gbs);
    }
}
