/* cli/main.c - `colibri SUBCOMMAND ...`: finds the subcommand in one table and
 * runs it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include "cli/commands.h"
#include "cli/opts.h"
#include "colibri.h"

struct command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
};

static const struct command COMMANDS[] = {
    { "info",     cmd_info,     "print a model's family, sizes, parameters and KV bytes per token" },
    { "oracle",   cmd_oracle,   "check oracle fixtures (logits against Hugging Face transformers)" },
    { "tokenize", cmd_tokenize, "text to token ids as JSON (or --decode ids to text)" },
    { "run",      cmd_run,      "generate text from a prompt, streamed, then prefill/decode tokens/s" },
    { "chat",     cmd_chat,     "chat with a model in the terminal (the cache is kept between turns)" },
    { "bench",    cmd_bench,    "time prefill and decode (tokens/s) on a model" },
    { "serve",    cmd_serve,    "OpenAI-compatible HTTP server (completions, chat, SSE, slots with prefix reuse)" },
    { "eval",     cmd_eval,     "teacher-force a text: perplexity, top-1 and KL of each KV tier against f32" },
    { "convert",  cmd_convert,  "rewrite a checkpoint with chosen weight formats (sharded, resumable, verified)" },
    { "synth",    cmd_synth,    "write a random-weight model in real shapes (for benchmarks)" },
    { "kv",       cmd_kv,       "inspect or verify a KV-cache file (kv inspect FILE, kv verify FILE)" },
    { "trace",    cmd_trace,    "record a text's expert routing: overlap, reuse, cache policies against Belady" },
};
#define N_COMMANDS (sizeof COMMANDS / sizeof COMMANDS[0])

static void usage(FILE *f)
{
    fprintf(f, "usage: colibri COMMAND [options]   (colibri COMMAND --help for details)\n\ncommands:\n");
    for (size_t i = 0; i < N_COMMANDS; i++)
        fprintf(f, "  %-10s %s\n", COMMANDS[i].name, COMMANDS[i].summary);
}

/* libgomp's workers spin between parallel regions by default. When anything
 * else runs on the machine, a spinning worker holds a core the others need and
 * decode slows down several-fold (measured on 2 busy cores: 2.1 tok/s spinning,
 * 10.1 passive, v2-lite-shaped q4g64 model). Passive waiting alone puts a
 * futex wake on every region, and a decode token has hundreds: a short spin
 * first (GOMP_SPINCOUNT=1000) took 2-thread decode on an idle 2-core Xeon
 * from 47 to 63 tok/s and prefill of 512 tokens 1.08x, for 0.93x decode
 * beside one busy-looping process (2000 spins: 1.45x idle, 0.88x beside
 * it). The runtime reads these only at load, so colibri re-executes itself
 * once with OMP_WAIT_POLICY=passive (for runtimes that ignore GOMP_SPINCOUNT)
 * and GOMP_SPINCOUNT=1000 (libgomp's spin count overrides the policy),
 * unless the user chose a policy or a spin count. */
static void reexec_with_passive_wait(char **argv)
{
    if (opts_env_omp_policy_chosen()) return;
    if (setenv("OMP_WAIT_POLICY", "passive", 1) || setenv("GOMP_SPINCOUNT", "1000", 1)) return;
    execv("/proc/self/exe", argv);
    unsetenv("OMP_WAIT_POLICY");   /* exec failed: carry on with the default */
    unsetenv("GOMP_SPINCOUNT");
}

/* The kernel names a process after the file it executed, which for the
 * re-execution above is "exe"; ps, top and pgrep show that name, so it is set
 * back to the one the user ran (the basename of argv[0], as exec would). */
static void name_process(const char *argv0)
{
#ifdef __linux__
    const char *base = strrchr(argv0, '/');
    prctl(PR_SET_NAME, base ? base + 1 : argv0, 0, 0, 0);
#else
    (void)argv0;
#endif
}

int main(int argc, char **argv)
{
    reexec_with_passive_wait(argv);
    name_process(argv[0]);
    if (argc < 2) { usage(stderr); return 2; }
    if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "version")) {
#ifndef COLIBRI_COMMIT
#define COLIBRI_COMMIT "unknown"
#define COLIBRI_BUILD_FLAGS "unknown"
#endif
        printf("colibri %s (commit %s)\nkernels: %s on this CPU\nbuilt with: %s\n", COLIBRI_VERSION, COLIBRI_COMMIT,
               colibri_kernel_level(), COLIBRI_BUILD_FLAGS);
        return 0;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    for (size_t i = 0; i < N_COMMANDS; i++)
        if (!strcmp(argv[1], COMMANDS[i].name))
            return COMMANDS[i].run(argc - 2, argv + 2);
    fprintf(stderr, "colibri: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
