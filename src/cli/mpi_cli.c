/* cli/mpi_cli.c - --mpi around a command (contract in mpi_cli.h). */
#include "cli/mpi_cli.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* What a rank's streamed store read while it served (rank 0's own is in
 * the command's "experts:" line). */
static void print_worker_reads(const colibri_model *m, int rank)
{
    struct colibri_model_info in;
    struct colibri_expert_stats es;
    if (!m) return;
    colibri_model_get_info(m, &in);
    if (strcmp(in.expert_store, "streamed")) return;
    colibri_model_expert_stats(m, &es);
    fprintf(stderr, "mpi: rank %d read %.1f MiB of its experts from disk (%llu acquisitions, %.1f%% in its cache)\n",
            rank, es.bytes_read / 1048576.0, (unsigned long long)es.acquires,
            es.acquires ? 100.0 * (double)(es.acquires - es.misses - es.waits) / (double)es.acquires : 0.0);
}

int cli_mpi_begin_dirs(const char *cmd, struct cli_mpi *cm, char *const *dirs, int n, struct colibri_model_opts *mo,
                       int *status)
{
    *status = 0;
    if (!cm->on) {
        if (cm->timeout_s > 0 || cm->rank0_experts != 1 || cm->weights) {
            fprintf(stderr, "colibri %s: --mpi-timeout, --mpi-rank0-experts and --mpi-weights need --mpi\n", cmd);
            *status = 2;
            return -1;
        }
        return 0;
    }
    struct colibri_err err = { 0 };
    struct colibri_mpi_opts o = { .timeout_s = cm->timeout_s, .no_rank0_experts = !cm->rank0_experts };
    double w[CLI_MPI_MAX_RANKS];
    if (cm->weights && !strcmp(cm->weights, "disk")) {
        o.disk_rate_dir = dirs[0];
    } else if (cm->weights) {
        const char *at = cm->weights;
        for (;;) {
            char *end;
            double v = strtod(at, &end);
            if (end == at || (*end && *end != ',') || !isfinite(v) || v < 0 || o.n_weights == CLI_MPI_MAX_RANKS) {
                fprintf(stderr, "colibri %s: --mpi-weights: '%s' is neither disk nor a list of at most %d numbers "
                                ">= 0, one per rank\n", cmd, cm->weights, CLI_MPI_MAX_RANKS);
                *status = 2;
                return -1;
            }
            w[o.n_weights++] = v;
            if (!*end) break;
            at = end + 1;
        }
        o.weights = w;
    }
    if (colibri_mpi_start(&o, &cm->p, &err)) {
        fprintf(stderr, "colibri %s: %s\n", cmd, err.msg);
        *status = 1;
        return -1;
    }
    mo->mpi = cm->p;
    int rank = colibri_mpi_rank(cm->p);
    if (rank == 0 && cm->weights) {
        fprintf(stderr, "mpi: expert shares weighted by %s:", o.disk_rate_dir ? "each rank's read rate" : "--mpi-weights");
        for (int r = 0; r < colibri_mpi_size(cm->p); r++) {
            double v = colibri_mpi_weight(cm->p, r);
            if (o.disk_rate_dir) fprintf(stderr, " rank %d %.0f MB/s", r, v / 1e6);
            else fprintf(stderr, " rank %d %g", r, v);
        }
        fputc('\n', stderr);
    }
    if (rank == 0) return 0;
    /* on through every model, as rank 0 goes on after a failed one */
    for (int i = 0; i < n; i++) {
        colibri_model *m = NULL;
        if (colibri_model_load(dirs[i], mo, &m, &err) || colibri_mpi_serve_experts(cm->p, m, &err)) {
            fprintf(stderr, "colibri %s: rank %d: %s: %s\n", cmd, rank, dirs[i], err.msg);
            *status = 1;
        }
        print_worker_reads(m, rank);
        colibri_model_free(m);
    }
    if (colibri_mpi_end(cm->p)) colibri_mpi_abort(*status ? *status : 1);
    cm->p = NULL;
    return 1;
}

int cli_mpi_begin(const char *cmd, struct cli_mpi *cm, const char *dir, struct colibri_model_opts *mo, int *status)
{
    char *dirs[1] = { (char *)dir };
    return cli_mpi_begin_dirs(cmd, cm, dirs, 1, mo, status);
}

int cli_mpi_end(struct cli_mpi *cm, int status)
{
    if (!cm->p) return status;
    if (colibri_mpi_end(cm->p)) colibri_mpi_abort(status ? status : 1);
    cm->p = NULL;
    return status;
}

void cli_mpi_print_stats(FILE *f, const colibri_model *m, const struct cli_mpi *cm)
{
    if (!cm->p || !m) return;
    for (int r = 0; r < colibri_mpi_size(cm->p); r++) {
        struct colibri_mpi_rank_stats st;
        if (colibri_mpi_stats(m, r, &st)) return;
        fprintf(f, "mpi: rank %d ran %llu experts", r, (unsigned long long)st.experts_run);
        if (r > 0) {
            fprintf(f, " in %llu layer requests: %.1f KiB sent, %.1f KiB received, waited %.3f s",
                    (unsigned long long)st.requests, st.bytes_sent / 1024.0, st.bytes_received / 1024.0, st.wait_s);
        }
        fputc('\n', f);
    }
}

static int span_ranks(const struct cli_mpi *cm)
{
    int n = cm->p ? colibri_mpi_size(cm->p) : 0;
    return n < CLI_MPI_MAX_RANKS ? n : CLI_MPI_MAX_RANKS;
}

void cli_mpi_span_begin(struct cli_mpi_span *sp, const colibri_model *m, const struct cli_mpi *cm)
{
    for (int r = 0; r < span_ranks(cm); r++)
        if (colibri_mpi_stats(m, r, &sp->at_begin[r])) sp->at_begin[r] = (struct colibri_mpi_rank_stats){ 0 };
}

void cli_mpi_span_end(struct cli_mpi_span *sp, const colibri_model *m, const struct cli_mpi *cm, int n_tokens)
{
    for (int r = 0; r < span_ranks(cm); r++) {
        struct colibri_mpi_rank_stats now, *b = &sp->at_begin[r], *s = &sp->sum[r];
        if (colibri_mpi_stats(m, r, &now)) continue;
        s->requests += now.requests - b->requests;
        s->bytes_sent += now.bytes_sent - b->bytes_sent;
        s->bytes_received += now.bytes_received - b->bytes_received;
        s->experts_run += now.experts_run - b->experts_run;
        s->wait_s += now.wait_s - b->wait_s;
    }
    if (span_ranks(cm)) sp->tokens += n_tokens;
}

void cli_mpi_span_print(FILE *f, const struct cli_mpi_span *sp, const struct cli_mpi *cm, const char *what)
{
    if (!sp->tokens) return;
    double n = (double)sp->tokens;
    for (int r = 0; r < span_ranks(cm); r++) {
        const struct colibri_mpi_rank_stats *s = &sp->sum[r];
        fprintf(f, "mpi rank %d per %s token: %.2f experts", r, what, s->experts_run / n);
        if (r == 0 && colibri_mpi_size(cm->p) > 1)
            fprintf(f, ", %.2f layer exchanges (round trips on rank 0's path)", s->requests / n);
        if (r > 0)
            fprintf(f, ", %.2f round trips, %.1f KiB sent, %.1f KiB received, rank 0 waited %.3f ms", s->requests / n,
                    s->bytes_sent / 1024.0 / n, s->bytes_received / 1024.0 / n, 1e3 * s->wait_s / n);
        fputc('\n', f);
    }
}
