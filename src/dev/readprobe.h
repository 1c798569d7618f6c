/* dev/readprobe.h - the read-bandwidth probe: the bound every "share of the
 * read bound" in `colibri bench --bw`, bench/matvec and bench/ divides by.
 *
 * A decode that streams its weights can go no faster than the best
 * streaming read this machine sustains, so the probe looks for that best:
 * it times a family of read loops over the same buffer and keeps the
 * fastest. What varies is what limits one core's read rate on the CPUs
 * this runs on (Zen 3/4/5, Ice Lake/Sapphire Rapids): the number of
 * sequential streams each thread keeps in flight (the hardware
 * prefetchers track a bounded number), a software prefetch ahead of each
 * stream, and the page size behind the buffer (4 KiB pages cost a TLB walk
 * every 4 KiB; transparent huge pages do not). A single variant
 * under-reads: 8 streams over 4 KiB pages measured 15 GB/s on a Zen 4
 * guest where a multi-stream probe measured 24.6.
 *
 * Contract:
 *  - Every OpenMP thread reads its contiguous share of the buffer; a
 *    variant's figure is bytes / wall time of its best pass.
 *  - The figure is a lower bound of the machine's read bandwidth (any
 *    kernel that reads faster shows the probe missed a variant): a decode
 *    reported above 100% of it is a probe bug, never a result.
 *  - Allocates its buffers (2 x bytes/2, mmap) per call and frees them;
 *    returns 0 or COLIBRI_ENOMEM. */
#ifndef COLIBRI_DEV_READPROBE_H
#define COLIBRI_DEV_READPROBE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define QUANT_READ_PROBE_MAX 30

struct quant_read_probe_variant {
    int streams;        /* sequential streams per thread */
    int prefetch;       /* software prefetch distance ahead of each stream, bytes (0: none) */
    int huge;           /* 1: buffer advised for transparent huge pages */
    double gbs;         /* best pass, GB/s (1e9 bytes) */
};

struct quant_read_probe {
    int threads;
    size_t bytes;                                  /* read per pass */
    int n;
    struct quant_read_probe_variant v[QUANT_READ_PROBE_MAX];
    int best;                                      /* index of the fastest */
};

/* Times every variant (`passes` passes each, <= 0: 3) over `bytes` (<= 0:
 * 1 GiB) with the current OpenMP thread count. */
int quant_read_probe_measure(size_t bytes, int passes, struct quant_read_probe *out);

/* A buffer of `bytes` (a multiple of 64) on 4 KiB pages or advised for huge
 * pages, written by the OpenMP threads that will read it (NULL: out of
 * memory); freed by quant_read_probe_buffer_free. */
void *quant_read_probe_buffer(size_t bytes, int huge);
void quant_read_probe_buffer_free(void *buf, size_t bytes);

/* One pass of variant v over buf (from quant_read_probe_buffer) with every OpenMP
 * thread: its wall seconds. The sum of what it read is added to *sink for
 * the caller to keep, so the reads are not optimized away. */
double quant_read_probe_pass(const struct quant_read_probe_variant *v, const void *buf, size_t bytes, uint64_t *sink);

/* "4 streams, prefetch 1024 B, huge pages" */
void quant_read_probe_variant_name(const struct quant_read_probe_variant *v, char *buf, size_t n);

/* A markdown table of every variant, the best marked. */
void quant_read_probe_print(const struct quant_read_probe *p, FILE *f);

#endif
