/* api/peak_api.c - colibri_bench_peak (include/colibri_dev.h): the compute-peak
 * probe of quant/peak.h as a table. */
#include "colibri.h"
#include "colibri_dev.h"
#include "quant/peak.h"

int colibri_bench_peak(int threads, FILE *table, struct colibri_err *err)
{
    (void)err;
    struct quant_peak p;
    quant_peak_measure(threads, 0, &p);
    quant_peak_print(&p, table);
    return 0;
}
