/* bench/attn.c - decode attention alone, per KV tier against f32 in the same
 * run (the work is kv_attn_bench in src/dev/attn_bench.c; `colibri bench
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

#include "cli/opts.h"
#include "dev/attn_bench.h"

int main(int argc, char **argv)
{
    struct kv_attn_bench_opts o = { .threads = 2, .r = 512, .dr = 64, .ctx = { 1024, 4096, 8192, 32768 },
                                    .n_ctx = 4, .heads = { 16, 128 }, .n_heads = 2,
                                    .tiers = NULL,   /* every tier */
                                    .min_time = 0.4, .with_int8 = 1 };
    const char *out_path = NULL, *ctx = NULL, *heads = NULL;
    int no_int8 = 0;
    float min_time = (float)o.min_time;
    const struct opt opts[] = {
        { "threads", 0, OPT_INT, &o.threads, "OpenMP threads (default 2)", 1, 1024 },
        { "tiers", 0, OPT_STR, &o.tiers, "comma-separated KV tiers (default: all, f32 first)" },
        { "ctx", 0, OPT_STR, &ctx, "comma-separated cached-token counts (default 1024,4096,8192,32768)" },
        { "heads", 0, OPT_STR, &heads, "comma-separated head counts (default 16,128)" },
        { "r", 0, OPT_INT, &o.r, "latent width (default 512)", 1, 1 << 16 },
        { "dr", 0, OPT_INT, &o.dr, "RoPE width (default 64)", 1, 1 << 12 },
        { "min-time", 0, OPT_FLOAT, &min_time, "seconds per cell (default 0.4)", 1e-4, 3600 },
        { "out", 0, OPT_STR, &out_path, "write the table to FILE instead of stdout" },
        { "no-int8", 0, OPT_FLAG, &no_int8, "leave out the opt-in integer consumers" },
        { "cpu-time", 0, OPT_FLAG, &o.cpu_time, "time by process CPU time instead of the wall clock" },
    };
    const struct opts_spec spec = {
        "attn [--threads N] [--tiers a,b] [--ctx n,m] [--heads n,m] [--r R] [--dr DR] [--min-time S] "
        "[--out FILE] [--no-int8] [--cpu-time]",
        "Decode attention alone, per KV tier against f32 in the same run (a markdown table).",
        opts, sizeof opts / sizeof opts[0] };
    char *pos[1];
    int npos, rc = opts_parse(&spec, argc - 1, argv + 1, pos, 0, &npos);
    if (rc) return rc > 0 ? 0 : 2;
    if (ctx && (o.n_ctx = opts_int_list("ctx", ctx, o.ctx, KV_ATTN_BENCH_MAX_CTX, 1, 1 << 24)) < 0) return 2;
    if (heads && (o.n_heads = opts_int_list("heads", heads, o.heads, KV_ATTN_BENCH_MAX_HEADS, 1, 1 << 12)) < 0)
        return 2;
    o.min_time = min_time;
    if (no_int8) o.with_int8 = 0;
    FILE *f = out_path ? fopen(out_path, "w") : stdout;
    if (!f) { perror(out_path); return 1; }
    struct colibri_err err = { 0 };
    rc = kv_attn_bench(&o, f, stderr, &err);
    if (rc) fprintf(stderr, "attn: %s\n", err.msg);
    if (f != stdout) fclose(f);
    return rc ? 1 : 0;
}
