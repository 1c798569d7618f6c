/* cli/mpi_cli.h - --mpi for the commands that run a model: the options, the
 * serving loop the ranks other than 0 run instead of the command, and the end
 * of the job. */
#ifndef COLIBRI_CLI_MPI_CLI_H
#define COLIBRI_CLI_MPI_CLI_H

#include <stdio.h>

#include "colibri.h"

struct cli_mpi {
    int on;                     /* --mpi */
    float timeout_s;            /* --mpi-timeout (0: the library's default) */
    int rank0_experts;          /* --mpi-rank0-experts, 1 unless set */
    const char *weights;        /* --mpi-weights: "disk" or W0,W1,... (NULL: equal shares) */
    colibri_mpi *p;
};
#define CLI_MPI_INIT { 0, 0.0f, 1, NULL, NULL }

#define OPTS_MPI(cm)                                                                                             \
    { "mpi", 0, OPT_FLAG, &(cm).on, "expert parallelism over MPI (a colibri built with make MPI=1, launched by "  \
      "mpirun -np N): rank 0 runs the model, the routed experts of each layer are shared out over the ranks; "   \
      "same output" },                                                                                           \
    { "mpi-timeout", 0, OPT_FLOAT, &(cm).timeout_s, "with --mpi: seconds to wait for a rank's answer to one "     \
      "layer before failing, naming it (default 60)", 0, 86400 },                                                \
    { "mpi-rank0-experts", 0, OPT_INT, &(cm).rank0_experts, "with --mpi: 1 rank 0 owns a share of the routed "   \
      "experts too (default), 0 only ranks 1..N-1 do", 0, 1 },                                                 \
    { "mpi-weights", 0, OPT_STR, &(cm).weights, "with --mpi: each rank's share of every layer's routed experts in " \
      "proportion to W0,W1,... (one per rank), or to each rank's read rate of the model files timed at start "   \
      "(disk: for experts streamed under --ram); default equal shares; same output either way" }

/* With --mpi: starts MPI and sets mo->mpi. On rank 0 returns 0 (the command
 * goes on; also without --mpi). On any other rank it loads the model of dir
 * with mo, serves rank 0 until rank 0 frees it, ends MPI and returns 1 with
 * *status the exit status. -1 after printing an error (status 1 or 2). */
int cli_mpi_begin(const char *cmd, struct cli_mpi *cm, const char *dir, struct colibri_model_opts *mo,
                  int *status);
/* The same for a command that loads the models of dirs[0..n) one after
 * another, going on after one fails (rank 0 must try each of them, in that
 * order). */
int cli_mpi_begin_dirs(const char *cmd, struct cli_mpi *cm, char *const *dirs, int n, struct colibri_model_opts *mo,
                       int *status);
/* For rank 0, after every model is freed: ends MPI and returns status; a job
 * that lost a rank is aborted instead (MPI_Finalize would wait for it), with
 * status (1 if 0): then it does not return. */
int cli_mpi_end(struct cli_mpi *cm, int status);
/* One line per rank: the experts it ran, and what rank 0 exchanged with it.
 * Nothing without --mpi. */
void cli_mpi_print_stats(FILE *f, const colibri_model *m, const struct cli_mpi *cm);

/* What rank 0 exchanged with each rank over a span of tokens (the decode of
 * a benchmark), summed over the spans measured. */
#define CLI_MPI_MAX_RANKS 64
struct cli_mpi_span {
    struct colibri_mpi_rank_stats at_begin[CLI_MPI_MAX_RANKS], sum[CLI_MPI_MAX_RANKS];
    long long tokens;
};
void cli_mpi_span_begin(struct cli_mpi_span *sp, const colibri_model *m, const struct cli_mpi *cm);
void cli_mpi_span_end(struct cli_mpi_span *sp, const colibri_model *m, const struct cli_mpi *cm, int n_tokens);
/* Per rank > 0, per token of the spans: requests (round trips), bytes each
 * way, seconds rank 0 waited. Nothing without --mpi. */
void cli_mpi_span_print(FILE *f, const struct cli_mpi_span *sp, const struct cli_mpi *cm, const char *what);

#endif
