/* cli/main.c - `colibri SUBCOMMAND ...`: finds the subcommand in one table and
 * runs it. */
#include <stdio.h>
#include <string.h>

#include "cli/commands.h"

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
};
#define N_COMMANDS (sizeof COMMANDS / sizeof COMMANDS[0])

static void usage(FILE *f)
{
    fprintf(f, "usage: colibri COMMAND [options]   (colibri COMMAND --help for details)\n\ncommands:\n");
    for (size_t i = 0; i < N_COMMANDS; i++)
        fprintf(f, "  %-10s %s\n", COMMANDS[i].name, COMMANDS[i].summary);
}

int main(int argc, char **argv)
{
    if (argc < 2) { usage(stderr); return 2; }
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
