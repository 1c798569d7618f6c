/* bench/memhog.c - holds RAM locked, so that the page cache can only keep
 * what is left: the memory limit a benchmark of the mmap path runs under
 * where there is no cgroup to give it one.
 *
 *   memhog [--size BYTES] [--leave BYTES] [--seconds N]
 *
 * With --size it locks that much, refusing when that would leave less than
 * `leave` bytes (default 6 GiB) of MemAvailable for everything else. Without
 * it, it locks all of MemAvailable but `leave`, and keeps it so: once a
 * second it locks 256 MiB chunks while MemAvailable is above leave + 128 MiB
 * (another process freed memory) and unlocks them while it is below
 * leave - 256 MiB (another process needs it), up to 4 GiB a second. It makes itself the kernel's
 * first OOM victim (oom_score_adj 1000), so another process's growth ends
 * the hog rather than that process. Locking needs root (or a large
 * RLIMIT_MEMLOCK). Prints "locked N MiB, MemAvailable M MiB" when done, then
 * holds until SIGINT/SIGTERM or `seconds` pass. The memory is anonymous:
 * the kernel frees it however the process ends. */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define CHUNK (256ull << 20)
#define MAX_CHUNKS 4096   /* 1 TiB */

static volatile sig_atomic_t stop;
static void *chunk[MAX_CHUNKS];
static uint64_t chunk_bytes[MAX_CHUNKS];

static void on_signal(int sig) { (void)sig; stop = 1; }

/* MemAvailable from /proc/meminfo, in bytes; 0 when unreadable. */
static uint64_t mem_available(void)
{
    FILE *f = fopen("/proc/meminfo", "r");
    char line[256];
    unsigned long long kb = 0;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1) break;
    if (f) fclose(f);
    return (uint64_t)kb << 10;
}

static int parse_size(const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    uint64_t mul = 1;
    if (*end == 'K' || *end == 'k') mul = 1ull << 10, end++;
    else if (*end == 'M' || *end == 'm') mul = 1ull << 20, end++;
    else if (*end == 'G' || *end == 'g') mul = 1ull << 30, end++;
    if (errno || end == s || *end || !(v > 0)) return -1;
    *out = (uint64_t)(v * (double)mul);
    return 0;
}

/* Maps, locks and writes b bytes into chunk n; 0, or -1 said on stderr. */
static int lock_chunk(int n, uint64_t b)
{
    void *p = mmap(NULL, b, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED || mlock(p, b)) {
        fprintf(stderr, "memhog: cannot lock %.0f MiB more: %s\n", b / 1048576.0, strerror(errno));
        if (p != MAP_FAILED) munmap(p, b);
        return -1;
    }
    memset(p, 1, b);   /* mlock faulted it in; writing keeps it from being a shared zero page */
    chunk[n] = p;
    chunk_bytes[n] = b;
    return 0;
}

int main(int argc, char **argv)
{
    uint64_t size = 0, leave = 6ull << 30;
    long seconds = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--size") && i + 1 < argc) {
            if (parse_size(argv[++i], &size)) { fprintf(stderr, "memhog: --size: '%s' is not a size\n", argv[i]); return 2; }
        } else if (!strcmp(argv[i], "--leave") && i + 1 < argc) {
            if (parse_size(argv[++i], &leave)) { fprintf(stderr, "memhog: --leave: '%s' is not a size\n", argv[i]); return 2; }
        } else if (!strcmp(argv[i], "--seconds") && i + 1 < argc) {
            char *end;
            seconds = strtol(argv[++i], &end, 10);
            if (*end || seconds <= 0) { fprintf(stderr, "memhog: --seconds: '%s' is not a positive count\n", argv[i]); return 2; }
        } else {
            fprintf(stderr, "usage: memhog [--size BYTES] [--leave BYTES] [--seconds N]\nmemhog: unknown argument '%s'\n", argv[i]);
            return 2;
        }
    }
    uint64_t avail = mem_available();
    int track = size == 0;
    if (track && avail > leave) size = avail - leave;
    if (!size) {
        fprintf(stderr, "memhog: MemAvailable %.0f MiB is below --leave %.0f MiB: nothing to lock\n",
                avail / 1048576.0, leave / 1048576.0);
        return 1;
    }
    if (avail < size + leave) {
        fprintf(stderr, "memhog: locking %.0f MiB would leave %.0f MiB of the %.0f MiB available; at least %.0f MiB "
                "must stay (--leave)\n", size / 1048576.0, avail > size ? (avail - size) / 1048576.0 : 0.0,
                avail / 1048576.0, leave / 1048576.0);
        return 1;
    }
    FILE *adj = fopen("/proc/self/oom_score_adj", "w");
    if (!adj || fputs("1000", adj) < 0 || fclose(adj)) {
        fprintf(stderr, "memhog: cannot set /proc/self/oom_score_adj to 1000\n");
        return 1;
    }
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    int n = 0;
    uint64_t locked = 0;
    while (locked < size && !stop && n < MAX_CHUNKS) {
        uint64_t b = size - locked < CHUNK ? size - locked : CHUNK;
        if (lock_chunk(n, b)) return 1;
        n++;
        locked += b;
    }
    printf("locked %.0f MiB, MemAvailable %.0f MiB%s\n", locked / 1048576.0, mem_available() / 1048576.0,
           track ? " (tracking)" : "");
    fflush(stdout);
    time_t t0 = time(NULL);
    while (!stop && (!seconds || time(NULL) - t0 < seconds)) {
        sleep(1);
        for (int step = 0; track && step < 16; step++) {   /* at most 4 GiB a second either way */
            uint64_t now = mem_available();
            if (now > leave + (128ull << 20) && n < MAX_CHUNKS) {
                if (lock_chunk(n, CHUNK)) return 1;
                n++;
            } else if (now + (256ull << 20) < leave && n > 0) {
                n--;
                munmap(chunk[n], chunk_bytes[n]);
            } else {
                break;
            }
        }
    }
    return 0;
}
