#include "mpi/diskrate.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/err.h"

#define BLOCK ((size_t)4 << 20)
#define MAX_FILES 256

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}

static int is_shard(const char *name)
{
    size_t n = strlen(name), k = strlen(".safetensors");
    return n > k && !strcmp(name + n - k, ".safetensors");
}

int mpi_disk_read_rate(const char *dir, double budget_bytes, double budget_s, double *bytes_per_s, int *cached,
                       struct colibri_err *err)
{
    DIR *d = opendir(dir);
    if (!d) return base_err_set(err, COLIBRI_EIO, "%s: cannot open the model directory to time its reads: %s",
                                dir, strerror(errno));
    char *paths[MAX_FILES];
    off_t sizes[MAX_FILES];     /* in blocks */
    int n = 0, rc = 0;
    off_t total = 0;
    struct dirent *de;
    while ((de = readdir(d)) && n < MAX_FILES) {
        if (!is_shard(de->d_name)) continue;
        struct stat st;
        size_t len = strlen(dir) + strlen(de->d_name) + 2;
        if (!(paths[n] = malloc(len))) { rc = base_err_set(err, COLIBRI_ENOMEM, "out of memory"); break; }
        snprintf(paths[n], len, "%s/%s", dir, de->d_name);
        if (stat(paths[n], &st) || st.st_size < (off_t)BLOCK) { free(paths[n]); continue; }
        sizes[n] = st.st_size / (off_t)BLOCK;   /* whole blocks */
        total += sizes[n];
        n++;
    }
    closedir(d);
    if (!rc && !n) rc = base_err_set(err, COLIBRI_EIO, "%s: no .safetensors file of 4 MiB or more to time reads "
                                     "from", dir);
    void *buf = NULL;
    if (!rc && posix_memalign(&buf, 4096, BLOCK)) rc = base_err_set(err, COLIBRI_ENOMEM, "out of memory");
    long long blocks = (long long)total, want = (long long)(budget_bytes / (double)BLOCK);
    if (want < 1) want = 1;
    if (want > blocks) want = blocks;
    double t0 = now_s(), read_bytes = 0;
    int through_cache = 0;
    /* read i of `want` takes block i * blocks / want of all the files' blocks in turn */
    for (long long i = 0; !rc && i < want && (i == 0 || now_s() - t0 < budget_s); i++) {
        off_t b = (off_t)(i * blocks / want);
        int f = 0;
        while (b >= sizes[f]) b -= sizes[f++];
        off_t at = b * (off_t)BLOCK;
        int fd = open(paths[f], O_RDONLY | O_CLOEXEC | O_DIRECT);
        if (fd < 0 && errno == EINVAL) {
            through_cache = 1;
            fd = open(paths[f], O_RDONLY | O_CLOEXEC);
        }
        if (fd < 0) {
            rc = base_err_set(err, COLIBRI_EIO, "%s: cannot open to time its reads: %s", paths[f], strerror(errno));
            break;
        }
        ssize_t got = pread(fd, buf, BLOCK, at);
        if (got < 0 && errno == EINVAL && !through_cache) {   /* O_DIRECT opened but refused on read */
            close(fd);
            through_cache = 1;
            fd = open(paths[f], O_RDONLY | O_CLOEXEC);
            got = fd < 0 ? -1 : pread(fd, buf, BLOCK, at);
        }
        if (got <= 0)
            rc = base_err_set(err, COLIBRI_EIO, "%s: read at %lld failed: %s", paths[f], (long long)at,
                              got < 0 ? strerror(errno) : "end of file");
        if (fd >= 0) close(fd);
        read_bytes += got > 0 ? (double)got : 0;
    }
    double dt = now_s() - t0;
    free(buf);
    for (int i = 0; i < n; i++) free(paths[i]);
    if (rc) return rc;
    *bytes_per_s = read_bytes / (dt > 1e-9 ? dt : 1e-9);
    if (cached) *cached = through_cache;
    return 0;
}
