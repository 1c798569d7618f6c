/* api/peak_api.c - colibri_bench_peak and colibri_bench_read_bandwidth
 * (include/colibri_dev.h): the compute-peak probe of dev/peak.h as a
 * table, and the read probe of dev/readprobe.h as its best figure. */

#include "colibri.h"
#include "colibri_dev.h"
#include "dev/peak.h"
#include "dev/readprobe.h"

int colibri_bench_peak(int threads, FILE *table, struct colibri_err *err)
{
    (void)err;
    struct quant_peak p;
    quant_peak_measure(threads, 0, &p);
    quant_peak_print(&p, table);
    return 0;
}

double colibri_bench_read_bandwidth(FILE *table, char *how, size_t how_n)
{
    struct quant_read_probe p;
    if (quant_read_probe_measure(0, 0, &p)) return 0;
    if (how && how_n) quant_read_probe_variant_name(&p.v[p.best], how, how_n);
    if (table) quant_read_probe_print(&p, table);
    return p.v[p.best].gbs;
}
