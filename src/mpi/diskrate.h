/* mpi/diskrate.h - a rank's read rate of a model's files, which weighs its
 * share of the routed experts when every rank streams them (mpi/share.h).
 *
 * Reads blocks of 4 MiB spread evenly over the *.safetensors files of a
 * directory, one after another, with O_DIRECT (the page cache would give
 * the rate of RAM; a file system without O_DIRECT is read through the
 * cache, and the rate says so), until `budget_bytes` are read or
 * `budget_s` seconds pass (at least one block). Plain POSIX: built with and
 * without MPI. */
#ifndef COLIBRI_MPI_DISKRATE_H
#define COLIBRI_MPI_DISKRATE_H

#include "colibri.h"

/* *bytes_per_s: the rate; *cached (may be NULL): 1 when O_DIRECT was
 * refused. 0, or COLIBRI_EIO naming the directory or file. */
int mpi_disk_read_rate(const char *dir, double budget_bytes, double budget_s, double *bytes_per_s, int *cached,
                       struct colibri_err *err);

#endif
