/* bench/restore.c - restoring an N-token prefix from a KV file vs recomputing
 * it (prefill), per KV tier, through the public API only. For each N and tier:
 * prefill N random tokens (chunks of 512, as a long prompt would be fed), save
 * the cache to a KV file, then time colibri_kv_file_open() into a fresh
 * session (fingerprint, header checks, reading and checksumming every record,
 * copying rows into the cache). Prints a markdown table: prefill seconds,
 * save seconds (with its fsyncs), restore seconds, the ratio prefill/restore,
 * and bytes on disk per token. Best of --reps for each time. The file is read
 * from the page cache (just written): a restore from a cold disk adds the
 * file's size over the disk's read bandwidth. A second table gives the bytes
 * per token a file takes at DeepSeek-V3 dimensions (61 layers, r 512, dr 64,
 * each tier's default RoPE precision), from the format: 16 + 61 x row bytes.
 *
 *   make build/bench/restore   (the Makefile's bench/%.c rule)
 *   build/bench/restore [-m DIR] [--n 512,4096] [--tiers f32,tq4,...] [--reps R]
 *                       [--dir TMPDIR] [--threads T] [--cpu-time] [--out FILE]
 * --cpu-time times by process CPU time (use it with --threads 1 on a machine
 * shared with other work; the save's fsync wait is then not counted).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli/opts.h"
#include "colibri.h"
#include "kv/codec.h"

static int cpu_time;   /* --cpu-time: process CPU time instead of the wall clock */

static double now(void)
{
    struct timespec ts;
    clock_gettime(cpu_time ? CLOCK_PROCESS_CPUTIME_ID : CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int die(const char *what, const struct colibri_err *err)
{
    fprintf(stderr, "restore: %s: %s\n", what, err->msg);
    exit(1);
}

static void cpu_name(char *out, size_t n)
{
    snprintf(out, n, "unknown CPU");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, "model name", 10)) {
            char *c = strchr(line, ':');
            if (c) {
                c += 2;
                c[strcspn(c, "\n")] = 0;
                snprintf(out, n, "%s", c);
            }
            break;
        }
    fclose(f);
}

int main(int argc, char **argv)
{
    char every_tier[256];
    colibri_kv_tier_names(every_tier, sizeof every_tier, ",");
    const char *dir = "models/colibri-tiny", *tiers_arg = every_tier;
    const char *tmpdir = "/tmp", *out_path = NULL, *ns_arg = NULL;
    int ns[8] = { 512, 4096 }, n_ns = 2, reps = 3, threads = 0;
    const struct opt opts[] = {
        { "model", 'm', OPT_STR, &dir, "model directory (default models/colibri-tiny)" },
        { "n", 0, OPT_STR, &ns_arg, "comma-separated prefix lengths in tokens (default 512,4096)" },
        { "tiers", 0, OPT_STR, &tiers_arg, "comma-separated KV tiers (default: all)" },
        { "reps", 0, OPT_INT, &reps, "best of R timings (default 3)", 1, 1000 },
        { "dir", 0, OPT_STR, &tmpdir, "directory for the KV files (default /tmp)" },
        { "threads", 0, OPT_INT, &threads, "OpenMP threads (default: all cores)", 0, 1024 },
        { "out", 0, OPT_STR, &out_path, "write the tables to FILE instead of stdout" },
        { "cpu-time", 0, OPT_FLAG, &cpu_time, "time by process CPU time instead of the wall clock" },
    };
    const struct opts_spec spec = {
        "restore [-m DIR] [--n 512,4096] [--tiers f32,tq4,...] [--reps R] [--dir TMPDIR] [--threads T] "
        "[--cpu-time] [--out FILE]",
        "Restoring an N-token prefix from a KV file vs prefilling it, per KV tier (markdown tables).",
        opts, sizeof opts / sizeof opts[0] };
    char *pos[1];
    int npos, prc = opts_parse(&spec, argc - 1, argv + 1, pos, 0, &npos);
    if (prc) return prc > 0 ? 0 : 2;
    if (ns_arg && (n_ns = opts_int_list("n", ns_arg, ns, 8, 1, 1 << 24)) < 0) return 2;
    struct colibri_err err = { 0 };
    colibri_model *m = NULL;
    struct colibri_model_opts mo = { .n_threads = threads };
    if (colibri_model_load(dir, &mo, &m, &err)) die(dir, &err);
    struct colibri_model_info mi;
    colibri_model_get_info(m, &mi);
    int V = colibri_model_vocab(m);

    char tiers[16][16];
    int n_tiers = 0;
    for (const char *s = tiers_arg; *s && n_tiers < 16;) {
        size_t l = strcspn(s, ",");
        snprintf(tiers[n_tiers++], sizeof tiers[0], "%.*s", (int)l, s);
        s += l + (s[l] == ',');
    }

    char cpu[256], table[16384];
    cpu_name(cpu, sizeof cpu);
    int tl = snprintf(table, sizeof table,
                      "model: %s (%d layers, kv_lora_rank %d, rope %d, %.2f M parameters); %s, %d threads, %s\n\n"
                      "| N | tier | prefill s | save s | restore s | prefill / restore | bytes/token on disk |\n"
                      "|---:|---|---:|---:|---:|---:|---:|\n",
                      dir, mi.n_layers, mi.kv_lora_rank, mi.qk_rope_head_dim, mi.n_params / 1e6, cpu,
                      threads > 0 ? threads : (int)sysconf(_SC_NPROCESSORS_ONLN),
                      cpu_time ? "process CPU time" : "wall clock");
    fputs(table, stdout);
    fflush(stdout);

    char path[512];
    snprintf(path, sizeof path, "%s/colibri_restore_bench_%d.ckv", tmpdir, (int)getpid());
    for (int a = 0; a < n_ns; a++) {
        int N = ns[a];
        int32_t *tok = malloc((size_t)N * sizeof *tok);
        srand(1);
        for (int i = 0; i < N; i++) tok[i] = rand() % V;
        for (int t = 0; t < n_tiers; t++) {
            struct colibri_session_opts so = { .n_ctx = N + 1, .kv_tier = tiers[t] };
            double best_pre = 1e30, best_save = 1e30, best_res = 1e30;
            long long bytes = 0;
            for (int r = 0; r < reps; r++) {
                colibri_session *s = NULL;
                colibri_kv_file *f = NULL;
                unlink(path);
                if (colibri_session_new(m, &so, &s, &err)) die(tiers[t], &err);
                if (colibri_kv_file_open(s, path, &f, NULL, &err)) die("create", &err);
                double t0 = now();
                for (int i = 0; i < N; i += 512) {
                    int k = N - i < 512 ? N - i : 512;
                    if (colibri_session_prefill(s, tok + i, k, NULL, 0, &err)) die("prefill", &err);
                }
                double t1 = now();
                if (colibri_kv_file_save(f, &err)) die("save", &err);
                double t2 = now();
                colibri_kv_file_close(f);
                colibri_session_free(s);
                struct stat sb;
                if (stat(path, &sb) == 0) bytes = (long long)sb.st_size;
                /* Restore several times per rep: it is short. */
                for (int k = 0; k < 3; k++) {
                    colibri_session *s2 = NULL;
                    colibri_kv_file *f2 = NULL;
                    struct colibri_kv_info info;
                    if (colibri_session_new(m, &so, &s2, &err)) die(tiers[t], &err);
                    double t3 = now();
                    if (colibri_kv_file_open(s2, path, &f2, &info, &err)) die("restore", &err);
                    double t4 = now();
                    if (info.restored != N) {
                        fprintf(stderr, "restore: %s: restored %d of %d\n", tiers[t], info.restored, N);
                        return 1;
                    }
                    colibri_kv_file_close(f2);
                    colibri_session_free(s2);
                    if (t4 - t3 < best_res) best_res = t4 - t3;
                }
                if (t1 - t0 < best_pre) best_pre = t1 - t0;
                if (t2 - t1 < best_save) best_save = t2 - t1;
            }
            char row[256];
            snprintf(row, sizeof row, "| %d | %s | %.3f | %.4f | %.5f | %.0fx | %.1f |\n", N, tiers[t], best_pre,
                     best_save, best_res, best_pre / best_res, (double)(bytes - 4096) / N);
            fputs(row, stdout);
            fflush(stdout);
            tl += snprintf(table + tl, sizeof table - (size_t)tl, "%s", row);
        }
        free(tok);
    }
    unlink(path);
    colibri_model_free(m);

    tl += snprintf(table + tl, sizeof table - (size_t)tl,
                   "\nBytes per token on disk at DeepSeek-V3 dimensions (61 layers, r 512, dr 64):\n\n"
                   "| tier | rope | bytes/token | vs f32 |\n|---|---|---:|---:|\n");
    size_t f32_bytes = 16 + 61 * (kv_tier_row_bytes(KV_TIER_F32, 512) + kv_tier_row_bytes(KV_TIER_F32, 64));
    for (int t = 0; t < KV_TIER_COUNT; t++) {
        enum kv_rope_prec rp = kv_rope_default((enum kv_tier)t);
        size_t b = 16 + 61 * (kv_tier_row_bytes((enum kv_tier)t, 512) + kv_tier_row_bytes(kv_rope_tier(rp), 64));
        tl += snprintf(table + tl, sizeof table - (size_t)tl, "| %s | %s | %zu | %.3f |\n", kv_tier_name((enum kv_tier)t),
                       kv_rope_name(rp), b, (double)b / (double)f32_bytes);
    }
    fputs(strstr(table, "\nBytes per token"), stdout);
    if (out_path) {
        FILE *f = fopen(out_path, "w");
        if (!f) {
            perror(out_path);
            return 1;
        }
        fputs(table, f);
        fclose(f);
    }
    return 0;
}
