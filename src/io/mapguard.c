/* io/mapguard.c - the SIGBUS guard of io/mapguard.h. The table is the
 * process's, as a signal handler's state must be: entries are claimed under
 * a mutex and published to the handler by an atomic store of their range. */
#include "io/mapguard.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

struct guard {
    _Atomic uintptr_t lo, hi;   /* [lo, hi) mapped; lo 0: the entry is free */
    _Atomic int faulted;
    char path[512];
    struct stat at_map;
};

/* The process's guards, as a signal handler's state must be. */
static struct {
    struct guard tab[IO_MAPGUARD_MAX];
    _Atomic uint64_t faults;
    uintptr_t page;
    struct sigaction prev;      /* the SIGBUS handler before ours */
    pthread_mutex_t mu;         /* claims and frees entries; the handler takes no lock */
    int installed;
} mapguard = { .mu = PTHREAD_MUTEX_INITIALIZER };

static void on_sigbus(int sig, siginfo_t *si, void *uc)
{
    int saved = errno;
    uintptr_t a = (uintptr_t)si->si_addr;
    for (int i = 0; i < IO_MAPGUARD_MAX; i++) {
        uintptr_t lo = atomic_load(&mapguard.tab[i].lo), hi = atomic_load(&mapguard.tab[i].hi);
        if (!lo || a < lo || a >= hi) continue;
        uintptr_t from = a & ~(mapguard.page - 1), to = (hi + mapguard.page - 1) & ~(mapguard.page - 1);
        if (mmap((void *)from, to - from, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == MAP_FAILED)
            break;
        atomic_store(&mapguard.tab[i].faulted, 1);
        atomic_fetch_add(&mapguard.faults, 1);
        errno = saved;
        return;
    }
    errno = saved;
    /* not a guarded mapping: what would have happened without the guard */
    if (mapguard.prev.sa_flags & SA_SIGINFO) {
        if (mapguard.prev.sa_sigaction) { mapguard.prev.sa_sigaction(sig, si, uc); return; }
    } else if (mapguard.prev.sa_handler != SIG_DFL && mapguard.prev.sa_handler != SIG_IGN) {
        mapguard.prev.sa_handler(sig);
        return;
    }
    signal(sig, SIG_DFL);   /* delivered on return: the process ends as it would have */
    raise(sig);
}

static int install(void)
{
    if (mapguard.installed) return 0;
    long pg = sysconf(_SC_PAGESIZE);
    mapguard.page = pg > 0 ? (uintptr_t)pg : 4096;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_sigbus;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGBUS, &sa, &mapguard.prev)) return -1;
    mapguard.installed = 1;
    return 0;
}

int io_mapguard_add(const void *addr, size_t n, const char *path)
{
    if (!addr || !n) return -1;
    pthread_mutex_lock(&mapguard.mu);
    int rc = install();
    int slot = -1;
    for (int i = 0; !rc && i < IO_MAPGUARD_MAX && slot < 0; i++)
        if (!atomic_load(&mapguard.tab[i].lo)) slot = i;
    if (slot >= 0) {
        struct guard *g = &mapguard.tab[slot];
        snprintf(g->path, sizeof g->path, "%s", path);
        if (stat(path, &g->at_map)) memset(&g->at_map, 0, sizeof g->at_map);
        atomic_store(&g->faulted, 0);
        atomic_store(&g->hi, (uintptr_t)addr + n);
        atomic_store(&g->lo, (uintptr_t)addr);
    }
    pthread_mutex_unlock(&mapguard.mu);
    return slot >= 0 ? 0 : -1;
}

static struct guard *find(const void *addr)
{
    for (int i = 0; i < IO_MAPGUARD_MAX; i++)
        if (atomic_load(&mapguard.tab[i].lo) == (uintptr_t)addr) return &mapguard.tab[i];
    return NULL;
}

void io_mapguard_remove(const void *addr)
{
    if (!addr) return;
    pthread_mutex_lock(&mapguard.mu);
    struct guard *g = find(addr);
    if (g) atomic_store(&g->lo, 0);
    pthread_mutex_unlock(&mapguard.mu);
}

uint64_t io_mapguard_faults(void) { return atomic_load(&mapguard.faults); }

int io_mapguard_faulted(const void *addr)
{
    if (!atomic_load(&mapguard.faults)) return 0;
    struct guard *g = find(addr);
    return g && atomic_load(&g->faulted);
}

int io_mapguard_changed(const void *addr, char *msg, size_t cap)
{
    pthread_mutex_lock(&mapguard.mu);
    struct guard *g = find(addr);
    int changed = 0;
    if (g && g->at_map.st_ino) {
        struct stat now;
        if (stat(g->path, &now)) {
            changed = 1;
            snprintf(msg, cap, "%s: cannot stat it any more (%s)", g->path, strerror(errno));
        } else if (now.st_dev == g->at_map.st_dev && now.st_ino == g->at_map.st_ino &&
                   (now.st_size != g->at_map.st_size || now.st_mtim.tv_sec != g->at_map.st_mtim.tv_sec ||
                    now.st_mtim.tv_nsec != g->at_map.st_mtim.tv_nsec)) {
            changed = 1;
            snprintf(msg, cap, "%s changed on disk while in use (size %lld bytes, was %lld)", g->path,
                     (long long)now.st_size, (long long)g->at_map.st_size);
        }
    }
    pthread_mutex_unlock(&mapguard.mu);
    return changed;
}
