/* bench/attn.c - decode attention alone, per KV tier against f32 in the same
 * run (the work is kv_attn_bench in src/kv/attn_bench.c; `colibri bench
 * --attn` runs the same). DeepSeek-V3 dims by default (r = 512 latent + dr =
 * 64 RoPE), contexts 1k/4k/8k/32k, 16 and 128 heads, 2 threads.
 *
 *   build/bench/attn [--threads N] [--tiers f32,tq4,...] [--ctx 1024,8192]
 *                    [--heads 16,128] [--r 512] [--dr 64] [--min-time S] [--out FILE]
 *                    [--no-int8] [--cpu-time]
 * --cpu-time times calls by process CPU time instead of the wall clock (use it
 * with --threads 1 on a machine shared with other work).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kv/attn_bench.h"

static int parse_list(const char *s, int *out, int max)
{
    int n = 0;
    while (s && *s && n < max) {
        out[n++] = atoi(s);
        s = strchr(s, ',');
        if (s) s++;
    }
    return n;
}

int main(int argc, char **argv)
{
    struct kv_attn_bench_opts o = { .threads = 2, .r = 512, .dr = 64, .ctx = { 1024, 4096, 8192, 32768 },
                                    .n_ctx = 4, .heads = { 16, 128 }, .n_heads = 2,
                                    .tiers = "f32,bf16,fp8,int8r,q4_0,tq4,tq3,tq2,polar4,polar3",
                                    .min_time = 0.4, .with_int8 = 1 };
    const char *out_path = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--threads") && v) o.threads = atoi(v), i++;
        else if (!strcmp(a, "--tiers") && v) o.tiers = v, i++;
        else if (!strcmp(a, "--ctx") && v) o.n_ctx = parse_list(v, o.ctx, KV_ATTN_BENCH_MAX_CTX), i++;
        else if (!strcmp(a, "--heads") && v) o.n_heads = parse_list(v, o.heads, KV_ATTN_BENCH_MAX_HEADS), i++;
        else if (!strcmp(a, "--r") && v) o.r = atoi(v), i++;
        else if (!strcmp(a, "--dr") && v) o.dr = atoi(v), i++;
        else if (!strcmp(a, "--min-time") && v) o.min_time = atof(v), i++;
        else if (!strcmp(a, "--out") && v) out_path = v, i++;
        else if (!strcmp(a, "--no-int8")) o.with_int8 = 0;
        else if (!strcmp(a, "--cpu-time")) o.cpu_time = 1;
        else {
            fprintf(stderr, "usage: %s [--threads N] [--tiers a,b] [--ctx n,m] [--heads n,m] "
                            "[--r R] [--dr DR] [--min-time S] [--out FILE] [--no-int8] [--cpu-time]\n", argv[0]);
            return 2;
        }
    }
    FILE *f = out_path ? fopen(out_path, "w") : stdout;
    if (!f) { perror(out_path); return 1; }
    struct colibri_err err = { 0 };
    int rc = kv_attn_bench(&o, f, stderr, &err);
    if (rc) fprintf(stderr, "attn: %s\n", err.msg);
    if (f != stdout) fclose(f);
    return rc ? 1 : 0;
}
