/* cli/cmd_tokenize.c - `colibri tokenize`: text to a JSON array of ids, or
 * (--decode) a JSON array of ids back to the exact bytes. --bench reports
 * encode throughput instead of printing ids. Uses only colibri.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/commands.h"
#include "cli/opts.h"
#include "cli/textio.h"
#include "colibri.h"

/* Parses "[1, 2, 3]" (whitespace allowed). Returns the count or -1. */
static long parse_ids(const char *s, int32_t **out)
{
    size_t cap = 64, n = 0;
    int32_t *ids = malloc(cap * sizeof *ids);
    const char *p = s;
    while (*p == ' ' || *p == '\n' || *p == '\t' || *p == '\r') p++;
    if (!ids || *p++ != '[') { free(ids); return -1; }
    for (;;) {
        while (*p == ' ' || *p == '\n' || *p == '\t' || *p == '\r' || *p == ',') p++;
        if (*p == ']') break;
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || v < 0 || v > INT32_MAX) { free(ids); return -1; }
        if (n == cap) {
            int32_t *nb = realloc(ids, 2 * cap * sizeof *ids);
            if (!nb) { free(ids); return -1; }
            ids = nb;
            cap *= 2;
        }
        ids[n++] = (int32_t)v;
        p = end;
    }
    *out = ids;
    return (long)n;
}

static double wall(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int cmd_tokenize(int argc, char **argv)
{
    struct { const char *dir, *text, *file; int decode, no_special, bench; } o = { .dir = "models/colibri-tiny" };
    const struct opt opts[] = {
        { "model", 'm', OPT_STR, &o.dir, "model directory (holds tokenizer.json); default models/colibri-tiny" },
        { "tokenizer", 0, OPT_STR, &o.dir, "directory holding tokenizer.json (same as -m)" },
        { "text", 'p', OPT_STR, &o.text, "the text (with --decode: a JSON array of ids); -p as for run's prompt" },
        { "file", 'f', OPT_STR, &o.file, "read the text from a file ('-' = stdin)" },
        { "decode", 0, OPT_FLAG, &o.decode, "decode a JSON array of ids back to the exact bytes" },
        { "no-special", 0, OPT_FLAG, &o.no_special, "no BOS/EOS, and special-token text stays plain text" },
        { "bench", 0, OPT_FLAG, &o.bench, "time the encoding and print MB/s instead of the ids" },
    };
    const struct opts_spec spec = {
        "colibri tokenize [-m DIR | --tokenizer DIR] (--text T | --file F) [--decode]",
        "Prints the ids of the text as a JSON array, BOS/EOS added as tokenizer_config.json says; "
        "invalid UTF-8 is replaced by U+FFFD with a warning. --decode prints the bytes of a JSON array of ids.",
        opts, sizeof opts / sizeof opts[0] };
    char *pos[1];
    int npos, rc = opts_parse(&spec, argc, argv, pos, 0, &npos);
    if (rc) return rc > 0 ? 0 : 2;
    if (!o.text == !o.file) {
        fprintf(stderr, "colibri tokenize: need exactly one of --text, --file\n");
        opts_usage(&spec, stderr);
        return 2;
    }

    size_t len = 0;
    char *owned = NULL;
    const char *text = o.text;
    if (o.file) {
        if (!(owned = cli_read_text(o.file, &len))) { perror(o.file); return 1; }
        text = owned;
    } else {
        len = strlen(text);
    }
    /* An empty text encodes as Hugging Face encodes it: [BOS] where
     * tokenizer_config.json adds one, else []. Empty ids are no JSON array. */
    if (len == 0 && o.decode) {
        fprintf(stderr, "colibri tokenize: the %s is empty: nothing to decode\n", o.file ? "file" : "text");
        free(owned);
        return 1;
    }

    struct colibri_err err = { 0 };
    colibri_tokenizer *tok = NULL;
    double t0 = wall();
    if (colibri_tokenizer_load(o.dir, &tok, &err)) {
        fprintf(stderr, "colibri tokenize: %s\n", err.msg);
        free(owned);
        return 1;
    }
    double t_load = wall() - t0;

    int status = 0;
    if (o.decode) {
        int32_t *ids = NULL;
        long n = parse_ids(text, &ids);
        char *out = NULL;
        size_t out_len = 0;
        if (n < 0) {
            fprintf(stderr, "colibri tokenize: --decode wants a JSON array of non-negative ids, like [1, 2]\n");
            status = 1;
        } else if (colibri_tokenizer_decode(tok, ids, (size_t)n, 0, &out, &out_len, &err)) {
            fprintf(stderr, "colibri tokenize: %s\n", err.msg);
            status = 1;
        } else {
            fwrite(out, 1, out_len, stdout);
        }
        free(out);
        free(ids);
    } else {
        unsigned flags = o.no_special ? COLIBRI_ENCODE_NO_PARSE_SPECIAL : COLIBRI_ENCODE_ADD_SPECIAL;
        int32_t *ids = NULL;
        size_t n = 0, replaced = 0;
        t0 = wall();
        rc = colibri_tokenizer_encode(tok, text, len, flags, &ids, &n, &replaced, &err);
        double dt = wall() - t0;
        if (rc) {
            fprintf(stderr, "colibri tokenize: %s\n", err.msg);
            status = 1;
        } else {
            if (replaced)
                fprintf(stderr, "colibri tokenize: warning: %zu invalid UTF-8 sequence%s replaced by U+FFFD\n",
                        replaced, replaced == 1 ? "" : "s");
            if (o.bench) {
                printf("load %.3f s; encoded %zu bytes into %zu tokens in %.3f s: %.2f MB/s\n", t_load, len, n,
                       dt, (double)len / 1e6 / (dt > 0 ? dt : 1e-9));
            } else {
                putchar('[');
                for (size_t i = 0; i < n; i++) printf(i ? ", %d" : "%d", ids[i]);
                printf("]\n");
            }
        }
        free(ids);
    }
    colibri_tokenizer_free(tok);
    free(owned);
    return status;
}
