/* bench/mpi_pingpong.c - the round trip of one MPI message between ranks 0
 * and 1, as Open MPI's transport gives it: how bench/mpi-results.md checked
 * the delay link (tools/delaylink.c) from MPI's side.
 *
 *   mpicc -O2 -o build/mpi/tools/mpi_pingpong bench/mpi_pingpong.c
 *   mpirun -np 2 [transport options] build/mpi/tools/mpi_pingpong [BYTES]
 *
 * 2000 blocking round trips of BYTES (default 1024); rank 0 prints the
 * median, 10th and 90th percentile in microseconds. */
#define _POSIX_C_SOURCE 200809L
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define ROUNDS 2000

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size, bytes = argc > 1 ? atoi(argv[1]) : 1024;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size < 2 || bytes < 1) {
        if (rank == 0) fprintf(stderr, "mpi_pingpong: needs 2 ranks and BYTES >= 1\n");
        MPI_Finalize();
        return 2;
    }
    char *buf = calloc((size_t)bytes, 1);
    double *us = malloc(ROUNDS * sizeof *us);
    if (!buf || !us) MPI_Abort(MPI_COMM_WORLD, 1);
    for (int i = 0; i < ROUNDS; i++) {
        double t0 = now_s();
        if (rank == 0) {
            MPI_Send(buf, bytes, MPI_BYTE, 1, 0, MPI_COMM_WORLD);
            MPI_Recv(buf, bytes, MPI_BYTE, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else if (rank == 1) {
            MPI_Recv(buf, bytes, MPI_BYTE, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(buf, bytes, MPI_BYTE, 0, 0, MPI_COMM_WORLD);
        }
        us[i] = (now_s() - t0) * 1e6;
    }
    if (rank == 0) {
        qsort(us, ROUNDS, sizeof *us, cmp_double);
        printf("mpi ping-pong %d bytes: median %.0f us, p10 %.0f, p90 %.0f\n", bytes, us[ROUNDS / 2],
               us[ROUNDS / 10], us[ROUNDS * 9 / 10]);
    }
    free(buf);
    free(us);
    MPI_Finalize();
    return 0;
}
