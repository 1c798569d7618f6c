/* bench/pagecache.c - how much of some files the page cache holds, and
 * dropping it: for benchmarks that must start cold where drop_caches is not
 * allowed.
 *
 *   pagecache [--evict] FILE...
 *
 * With --evict, asks the kernel to drop each file's cached pages
 * (posix_fadvise POSIX_FADV_DONTNEED; pages mapped by a running process or
 * dirty stay). Then prints, per file and in all, the bytes resident in the
 * page cache (mincore over a read-only mapping) and exits 1 when --evict
 * left more than 1% of them resident. */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* Resident bytes of fd's first `size` bytes; -1 on failure. */
static long long resident(int fd, off_t size)
{
    if (!size) return 0;
    long page = sysconf(_SC_PAGESIZE);
    void *p = mmap(NULL, (size_t)size, PROT_READ, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) return -1;
    size_t pages = ((size_t)size + (size_t)page - 1) / (size_t)page;
    unsigned char *v = malloc(pages);
    long long n = -1;
    if (v && !mincore(p, (size_t)size, v)) {
        n = 0;
        for (size_t i = 0; i < pages; i++) n += v[i] & 1;
        n *= page;
    }
    free(v);
    munmap(p, (size_t)size);
    return n;
}

int main(int argc, char **argv)
{
    int evict = 0, first = 1;
    if (argc > 1 && !strcmp(argv[1], "--evict")) evict = 1, first = 2;
    if (first >= argc) {
        fprintf(stderr, "usage: pagecache [--evict] FILE...\n");
        return 2;
    }
    long long total = 0, cached = 0;
    for (int i = first; i < argc; i++) {
        int fd = open(argv[i], O_RDONLY);
        struct stat st;
        if (fd < 0 || fstat(fd, &st)) {
            perror(argv[i]);
            return 2;
        }
        if (evict && posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED)) {
            fprintf(stderr, "%s: posix_fadvise DONTNEED failed\n", argv[i]);
            return 2;
        }
        long long r = resident(fd, st.st_size);
        close(fd);
        if (r < 0) {
            fprintf(stderr, "%s: mincore failed\n", argv[i]);
            return 2;
        }
        printf("%s: %.1f of %.1f MiB in the page cache\n", argv[i], r / 1048576.0, st.st_size / 1048576.0);
        total += st.st_size;
        cached += r;
    }
    printf("all: %.1f of %.1f MiB in the page cache (%.1f%%)\n", cached / 1048576.0, total / 1048576.0,
           total ? 100.0 * cached / total : 0.0);
    return evict && cached * 100 > total ? 1 : 0;
}
