/* bench/v4_attn_kern.c - one V4 query's attention at V4-Flash dims (64
 * heads x 512, RoPE 64) over N key rows: the one-head reference loop of
 * model/v4_attn.c (what the mixer ran before model/v4_kern.h) against the
 * many-head kernel on T threads, interleaved round by round; medians and
 * ranges in ms. The two give the same bits (tests/unit/test_v4_kern.c).
 *
 *   build/bench/v4_attn_kern [N=128] [T=1] [ROUNDS=7] */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/util.h"
#include "model/v4_kern.h"

static int cmp_dbl(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    enum { H = 64, HD = 512, DR = 64, REPS = 5 };
    int n = argc > 1 ? atoi(argv[1]) : 128, nt = argc > 2 ? atoi(argv[2]) : 1, rounds = argc > 3 ? atoi(argv[3]) : 7;
    if (n < 1 || nt < 1 || rounds < 1 || rounds > 64) {
        fprintf(stderr, "usage: v4_attn_kern [N] [T] [ROUNDS <= 64]\n");
        return 2;
    }
    float inv[DR / 2], sinks[H];
    for (int i = 0; i < DR / 2; i++) inv[i] = powf(1e4f, -2.0f * i / DR);
    for (int i = 0; i < H; i++) sinks[i] = 0.1f * (i % 7);
    const int W = n < 128 ? n : 128;
    struct v4_attn a = { H, HD, W, 1e-6f, sinks, NULL, { DR, inv, 1.0f } };
    float *q = malloc(sizeof(float) * H * HD), *rows = malloc(sizeof(float) * (size_t)n * HD);
    float *out = malloc(sizeof(float) * H * HD), *sc = malloc(sizeof(float) * (size_t)n);
    size_t st = model_v4_attn_work_bytes(HD, n);
    void *work = aligned_alloc(64, st * (size_t)nt);
    if (!q || !rows || !out || !sc || !work) return 1;
    srand(1);
    for (int i = 0; i < H * HD; i++) q[i] = rand() / (float)RAND_MAX - 0.5f;
    for (size_t i = 0; i < (size_t)n * HD; i++) rows[i] = rand() / (float)RAND_MAX - 0.5f;
    struct colibri_err err = { 0 };
    double tr[64], tm[64];
    for (int r = 0; r < rounds; r++) {
        double t0 = base_now_sec();
        for (int k = 0; k < REPS; k++)
            model_v4_attn_query(&a, 100000, q, rows, W, rows + (size_t)W * HD, NULL, n - W, out, sc, &err);
        double t1 = base_now_sec();
        for (int k = 0; k < REPS; k++)
            model_v4_attn_query_mt(&a, 100000, q, rows, W, rows + (size_t)W * HD, NULL, n - W, out, work, st, nt, &err);
        double t2 = base_now_sec();
        tr[r] = (t1 - t0) / REPS * 1e3;
        tm[r] = (t2 - t1) / REPS * 1e3;
    }
    qsort(tr, (size_t)rounds, sizeof *tr, cmp_dbl);
    qsort(tm, (size_t)rounds, sizeof *tm, cmp_dbl);
    printf("rows=%d threads=%d one-head loop %.3f [%.3f-%.3f] ms, many-head kernel %.3f [%.3f-%.3f] ms, ratio %.1f\n", n,
           nt, tr[rounds / 2], tr[0], tr[rounds - 1], tm[rounds / 2], tm[0], tm[rounds - 1], tr[rounds / 2] / tm[rounds / 2]);
    free(q), free(rows), free(out), free(sc), free(work);
    return 0;
}
