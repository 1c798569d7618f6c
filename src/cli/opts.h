/* cli/opts.h - command-line options as one table per command.
 *
 * Each option is one row: long name, optional short letter, type, destination,
 * and help text. opts_parse() fills the destinations and collects positional
 * arguments; `--help` prints the table. Values are validated here (integers
 * and numbers must parse completely and lie within [min, max]), so a command
 * never sees a half-parsed value. */
#ifndef COLIBRI_CLI_OPTS_H
#define COLIBRI_CLI_OPTS_H

#include <stdio.h>

enum opt_type { OPT_FLAG, OPT_INT, OPT_FLOAT, OPT_STR };

struct opt {
    const char *name;       /* without leading dashes: "model" for --model */
    char short_name;        /* 'm' for -m, or 0 */
    enum opt_type type;
    void *dest;             /* int* for FLAG/INT, float* for FLOAT, const char** for STR */
    const char *help;
    double min, max;        /* bounds for INT/FLOAT (ignored when min == max == 0) */
};

struct opts_spec {
    const char *usage;      /* "colibri info -m DIR" */
    const char *summary;    /* one paragraph */
    const struct opt *opts;
    int n_opts;
};

/* Returns 0 on success, 1 if --help was printed (caller exits 0), or -1 after
 * printing an error naming the bad option (caller exits 2). Positional
 * arguments go to pos[0..*n_pos) (at most max_pos, more is an error). */
int opts_parse(const struct opts_spec *spec, int argc, char **argv, char **pos, int max_pos, int *n_pos);

void opts_usage(const struct opts_spec *spec, FILE *f);

/* The environment, read here and nowhere else in colibri.
 *
 * opts_env_kv_tier: the KV tier named by the aliases KV8=1 (fp8), KV_TQ=N
 * (tqN, N = 2..4) and KV_TQ_POLAR=1 (polarN, N from KV_TQ, default 4), or
 * NULL when none is set. An --kv option given on the command line wins. A
 * malformed value is reported on stderr and ignored.
 * opts_env_api_key: COLIBRI_API_KEY or NULL.
 * opts_env_omp_policy_chosen: 1 when the user set OMP_WAIT_POLICY or
 * GOMP_SPINCOUNT. */
const char *opts_env_kv_tier(void);
const char *opts_env_api_key(void);
int opts_env_omp_policy_chosen(void);

#endif
