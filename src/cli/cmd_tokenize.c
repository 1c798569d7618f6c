/* cli/cmd_tokenize.c - `colibri tokenize`: text to a JSON array of ids, or
 * (--decode) a JSON array of ids back to the exact bytes. --bench reports
 * encode throughput instead of printing ids. Uses only colibri.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/commands.h"
#include "colibri.h"

struct tok_opts {
    const char *dir, *text, *file;
    int decode, no_special, bench;
};

enum opt_kind { OPT_STR, OPT_FLAG };
struct opt_row {
    const char *name, *alias;
    enum opt_kind kind;
    size_t field;               /* offset in struct tok_opts */
    const char *help;
};

#define FIELD(f) offsetof(struct tok_opts, f)
static const struct opt_row OPTS[] = {
    { "--model", "-m", OPT_STR, FIELD(dir), "model directory (holds tokenizer.json)" },
    { "--tokenizer", NULL, OPT_STR, FIELD(dir), "directory holding tokenizer.json (same as -m)" },
    { "--text", "-t", OPT_STR, FIELD(text), "the text (with --decode: a JSON array of ids)" },
    { "--file", "-f", OPT_STR, FIELD(file), "read the text from a file ('-' = stdin)" },
    { "--decode", NULL, OPT_FLAG, FIELD(decode), "decode a JSON array of ids to text" },
    { "--no-special", NULL, OPT_FLAG, FIELD(no_special), "no BOS/EOS, and special-token text stays text" },
    { "--bench", NULL, OPT_FLAG, FIELD(bench), "time the encoding, print MB/s instead of ids" },
};
#define N_OPTS (sizeof OPTS / sizeof OPTS[0])

static void usage(FILE *f)
{
    fprintf(f, "usage: colibri tokenize (-m DIR | --tokenizer DIR) (--text T | --file F) [--decode]\n\n");
    for (size_t i = 0; i < N_OPTS; i++)
        fprintf(f, "  %-4s %-14s %s\n", OPTS[i].alias ? OPTS[i].alias : "", OPTS[i].name, OPTS[i].help);
}

static int parse(int argc, char **argv, struct tok_opts *o)
{
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) { usage(stdout); return 1; }
        const struct opt_row *r = NULL;
        for (size_t k = 0; k < N_OPTS && !r; k++)
            if (!strcmp(argv[i], OPTS[k].name) || (OPTS[k].alias && !strcmp(argv[i], OPTS[k].alias)))
                r = &OPTS[k];
        if (!r) { fprintf(stderr, "colibri tokenize: unknown option '%s'\n", argv[i]); usage(stderr); return 2; }
        if (r->kind == OPT_FLAG) { *(int *)((char *)o + r->field) = 1; continue; }
        if (i + 1 >= argc) { fprintf(stderr, "colibri tokenize: %s needs a value\n", argv[i]); return 2; }
        *(const char **)((char *)o + r->field) = argv[++i];
    }
    if (!o->dir || (!o->text == !o->file)) {
        fprintf(stderr, "colibri tokenize: need -m/--tokenizer DIR and exactly one of --text, --file\n");
        usage(stderr);
        return 2;
    }
    return 0;
}

static char *read_input(const char *path, size_t *len)
{
    FILE *f = strcmp(path, "-") ? fopen(path, "rb") : stdin;
    if (!f) return NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap + 1);
    while (buf) {
        n += fread(buf + n, 1, cap - n, f);
        if (n < cap) break;
        char *nb = realloc(buf, 2 * cap + 1);
        if (!nb) { free(buf); buf = NULL; break; }
        buf = nb;
        cap *= 2;
    }
    if (f != stdin) fclose(f);
    if (buf) { buf[n] = 0; *len = n; }
    return buf;
}

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
    struct tok_opts o = { 0 };
    int rc = parse(argc, argv, &o);
    if (rc) return rc == 1 ? 0 : rc;

    size_t len = 0;
    char *owned = NULL;
    const char *text = o.text;
    if (o.file) {
        if (!(owned = read_input(o.file, &len))) { perror(o.file); return 1; }
        text = owned;
    } else {
        len = strlen(text);
    }
    if (len == 0) {
        fprintf(stderr, "colibri tokenize: the %s is empty: nothing to %s\n", o.file ? "file" : "text",
                o.decode ? "decode" : "tokenize");
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
