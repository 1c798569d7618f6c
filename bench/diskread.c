/* bench/diskread.c - the disk's O_DIRECT read rate for expert-sized reads at
 * a given queue depth: the bound a streamed expert store is measured against.
 *
 *   diskread [--size BYTES] [--qd N] [--total BYTES] [--seed N] FILE...
 *
 * qd threads each read `size` bytes at random EXPERT_IO_ALIGN-aligned offsets
 * of the files (O_DIRECT, bypassing the page cache) until `total` bytes are
 * read in all; prints "qd N size S: X MB/s (GB read in T s)". */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define ALIGN 4096

struct job {
    const int *fds;
    const off_t *sizes;
    int n_files;
    size_t size;
    _Atomic long long *left;
    uint64_t seed;
    int failed;
};

static uint64_t next_rand(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static void *reader(void *arg)
{
    struct job *j = arg;
    uint8_t *buf = aligned_alloc(ALIGN, j->size);
    if (!buf) { j->failed = 1; return NULL; }
    while (atomic_fetch_sub(j->left, (long long)j->size) > 0) {
        int f = (int)(next_rand(&j->seed) % (uint64_t)j->n_files);
        uint64_t span = (uint64_t)(j->sizes[f] - (off_t)j->size) / ALIGN;
        off_t off = (off_t)((span ? next_rand(&j->seed) % span : 0) * ALIGN);
        size_t done = 0;
        while (done < j->size) {
            ssize_t n = pread(j->fds[f], buf + done, j->size - done, off + (off_t)done);
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) {
                fprintf(stderr, "diskread: %s\n", n ? strerror(errno) : "short read");
                j->failed = 1;
                free(buf);
                return NULL;
            }
            done += (size_t)n;
        }
    }
    free(buf);
    return NULL;
}

int main(int argc, char **argv)
{
    size_t size = 24u << 20;
    long long total = 2ll << 30;
    int qd = 1, nf = 0;
    uint64_t seed = 1;
    int fds[64];
    off_t sizes[64];
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--size") && i + 1 < argc) size = (size_t)strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--qd") && i + 1 < argc) qd = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--total") && i + 1 < argc) total = strtoll(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--seed") && i + 1 < argc) seed = strtoull(argv[++i], NULL, 10);
        else if (nf < 64) {
            struct stat st;
            if ((fds[nf] = open(argv[i], O_RDONLY | O_DIRECT)) < 0 || fstat(fds[nf], &st)) {
                fprintf(stderr, "diskread: %s: %s\n", argv[i], strerror(errno));
                return 1;
            }
            sizes[nf++] = st.st_size;
        }
    }
    size = (size + ALIGN - 1) / ALIGN * ALIGN;
    if (!nf || qd < 1 || qd > 256 || !size) {
        fprintf(stderr, "usage: diskread [--size BYTES] [--qd N] [--total BYTES] [--seed N] FILE...\n");
        return 2;
    }
    for (int i = 0; i < nf; i++)
        if (sizes[i] < (off_t)size) {
            fprintf(stderr, "diskread: file %d is smaller than one read\n", i + 1);
            return 2;
        }
    _Atomic long long left = total;
    struct job *jobs = calloc((size_t)qd, sizeof *jobs);
    pthread_t *th = calloc((size_t)qd, sizeof *th);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 0; i < qd; i++) {
        jobs[i] = (struct job){ fds, sizes, nf, size, &left, seed * 7919 + (uint64_t)i * 104729 + 1, 0 };
        pthread_create(&th[i], NULL, reader, &jobs[i]);
    }
    int failed = 0;
    for (int i = 0; i < qd; i++) {
        pthread_join(th[i], NULL);
        failed |= jobs[i].failed;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double s = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    long long reads = (total + (long long)size - 1) / (long long)size, read = reads * (long long)size;
    printf("qd %d size %zu: %.0f MB/s (%.2f GB in %.2f s)\n", qd, size, read / s / 1e6, read / 1e9, s);
    free(jobs);
    free(th);
    return failed;
}
