/* The read probe (dev/readprobe.h) reads every byte of its buffer once in
 * every variant: a pass's sum over a buffer of 64-bit words written 0, 1,
 * 2, ... is n(n-1)/2, with 1 and 2 threads and sizes that leave a tail
 * after the streams' equal shares (a variant that skipped or re-read a
 * tail would report a rate for bytes it did not read). */
#include <omp.h>
#include <stdint.h>

#include "check.h"
#include "dev/readprobe.h"

static void test_every_variant_reads_every_word(void)
{
    static const size_t vectors[] = { 1, 17, 1000, 4099 };   /* 64-byte vectors per buffer */
    static const int streams[] = { 1, 2, 4, 8, 16 }, prefetch[] = { 0, 1024, 4096 };
    for (int threads = 1; threads <= 2; threads++) {
        omp_set_num_threads(threads);
        for (size_t vi = 0; vi < sizeof vectors / sizeof *vectors; vi++) {
            const size_t bytes = vectors[vi] * 64, n = bytes / 8;
            for (int huge = 0; huge < 2; huge++) {
                void *buf = quant_read_probe_buffer(bytes, huge);
                CHECK(buf != NULL, "quant_read_probe_buffer(%zu)", bytes);
                if (!buf) return;
                for (size_t s = 0; s < sizeof streams / sizeof *streams; s++)
                    for (size_t p = 0; p < sizeof prefetch / sizeof *prefetch; p++) {
                        struct quant_read_probe_variant v = { streams[s], prefetch[p], huge, 0 };
                        uint64_t sum = 0;
                        double dt = quant_read_probe_pass(&v, buf, bytes, &sum);
                        CHECK(sum == (uint64_t)n * (n - 1) / 2 && dt >= 0,
                              "%d threads, %zu bytes, %d streams, prefetch %d: sum %llu, want %llu", threads,
                              bytes, v.streams, v.prefetch, (unsigned long long)sum,
                              (unsigned long long)n * (n - 1) / 2);
                    }
                quant_read_probe_buffer_free(buf, bytes);
            }
        }
    }
}

static void test_measure_names_a_best(void)
{
    struct quant_read_probe p;
    omp_set_num_threads(1);
    CHECK(quant_read_probe_measure((size_t)8 << 20, 1, &p) == 0, "quant_read_probe_measure");
    CHECK(p.n == 30 && p.best >= 0 && p.best < p.n, "n %d best %d", p.n, p.best);
    for (int i = 0; i < p.n; i++) CHECK(p.v[i].gbs > 0 && p.v[i].gbs <= p.v[p.best].gbs, "variant %d", i);
}

int main(void)
{
    RUN_TEST(test_every_variant_reads_every_word);
    RUN_TEST(test_measure_names_a_best);
    return CHECK_SUMMARY();
}
