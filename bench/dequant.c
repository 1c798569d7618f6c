/* bench/dequant.c - row dequantization (quant_dequant_rows) per weight
 * format and kernel level, in Gelem/s: the absorbed decode dequantizes every
 * kv_b row it reads each token (model/mla.c), so this rate against the read
 * rate of the f32 copy decides whether the copy pays. One thread, rows of
 * 512 columns (the DeepSeek kv_lora_rank) one at a time, a 256-row matrix
 * that stays in cache; best of 20 passes. Prints a markdown table.
 *
 * usage: dequant */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "quant/format.h"
#include "quant/qtensor.h"

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int main(void)
{
    const int rows = 256, cols = 512;
    const enum quant_fmt fmts[] = { QUANT_BF16, QUANT_F16, QUANT_Q8, QUANT_Q4G32, QUANT_Q4G64, QUANT_FP8B };
    float *f = malloc(sizeof(float) * rows * cols), *out = malloc(sizeof(float) * rows * cols);
    if (!f || !out) return 1;
    srand(1);
    for (int i = 0; i < rows * cols; i++) f[i] = (float)rand() / (float)RAND_MAX - 0.5f;
    printf("| format |");
    for (int isa = 0; isa < QUANT_ISA_COUNT; isa++)
        if (quant_isa_available(isa)) printf(" %s |", quant_isa_name(isa));
    printf("\n|---|");
    for (int isa = 0; isa < QUANT_ISA_COUNT; isa++)
        if (quant_isa_available(isa)) printf("---|");
    printf("\n");
    for (size_t k = 0; k < sizeof fmts / sizeof *fmts; k++) {
        struct qtensor W;
        if (quant_qtensor_from_f32(fmts[k], rows, cols, f, &W, NULL)) return 1;
        printf("| %s |", quant_fmt_name(fmts[k]));
        for (int isa = 0; isa < QUANT_ISA_COUNT; isa++) {
            if (!quant_isa_available(isa)) continue;
            double best = 1e30;
            for (int rep = 0; rep < 20; rep++) {
                double t = now();
                for (int r = 0; r < rows; r++) quant_dequant_rows_isa(&W, r, 1, out + (size_t)r * cols, isa, NULL);
                t = now() - t;
                if (t < best) best = t;
            }
            printf(" %.2f |", (double)rows * cols / best * 1e-9);
        }
        printf("\n");
        quant_qtensor_free(&W);
    }
    free(f);
    free(out);
    return 0;
}
