/* model/expert_hotset.c - the hot set's state file (layout in expert_hotset.h). */
#include "model/expert_hotset.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "base/err.h"
#include "io/file.h"

#define HOT_MAGIC "CLBHOTS1"
#define HOT_HEAD 24

static void put32(uint8_t *p, uint32_t v) { for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i)); }
static void put64(uint8_t *p, uint64_t v) { for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i)); }
static uint32_t get32(const uint8_t *p) { uint32_t v = 0; for (int i = 3; i >= 0; i--) v = v << 8 | p[i]; return v; }
static uint64_t get64(const uint8_t *p) { uint64_t v = 0; for (int i = 7; i >= 0; i--) v = v << 8 | p[i]; return v; }

static int mkdirs(char *path)
{
    for (char *p = path + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        int bad = mkdir(path, 0755) && errno != EEXIST;
        *p = '/';
        if (bad) return -1;
    }
    return mkdir(path, 0755) && errno != EEXIST ? -1 : 0;
}

int model_hotset_dir(const char *dir, char *out, size_t n, struct colibri_err *err)
{
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    if (dir && *dir) snprintf(out, n, "%s", dir);
    else if (xdg && *xdg) snprintf(out, n, "%s/colibri", xdg);
    else if (home && *home) snprintf(out, n, "%s/.cache/colibri", home);
    else return base_err_set(err, COLIBRI_EIO, "no state directory: set --state-dir, XDG_CACHE_HOME or HOME");
    return 0;
}

void model_hotset_path(const char *dir, uint64_t fingerprint, char *out, size_t n)
{
    snprintf(out, n, "%s/experts-%016llx.hot", dir, (unsigned long long)fingerprint);
}

int model_hotset_load(const struct io_fs *fs, const char *path, uint64_t fingerprint, int L, int E, uint32_t *counts,
                      struct colibri_err *err)
{
    size_t want = HOT_HEAD + 4 * (size_t)L * (size_t)E + 8, got = 0;
    char *text = NULL;
    int e = io_read_all(io_fs_or_posix(fs), path, IO_OPEN_READ | IO_OPEN_NOFOLLOW, want, &text, &got);
    if (e == -ENOENT) {
        err->code = COLIBRI_EIO;
        err->msg[0] = 0;
        return COLIBRI_EIO;
    }
    if (e == -EFBIG)
        return base_err_set(err, COLIBRI_EFORMAT, "%s: more than the %zu bytes expected for %d layers x %d experts",
                            path, want, L, E);
    if (e) return base_err_set(err, COLIBRI_EIO, "%s: cannot read: %s", path, io_strerror(e));
    const uint8_t *b = (const uint8_t *)text;
    int rc = 0;
    if (got != want)
        rc = base_err_set(err, COLIBRI_EFORMAT, "%s: %zu bytes, expected %zu for %d layers x %d experts", path, got,
                          want, L, E);
    else if (memcmp(b, HOT_MAGIC, 8))
        rc = base_err_set(err, COLIBRI_EFORMAT, "%s: not a colibri hot-set file (magic)", path);
    else if (get64(b + want - 8) != XXH64(b, want - 8, 0))
        rc = base_err_set(err, COLIBRI_EFORMAT, "%s: checksum mismatch (damaged)", path);
    else if (get64(b + 8) != fingerprint || get32(b + 16) != (uint32_t)L || get32(b + 20) != (uint32_t)E)
        rc = base_err_set(err, COLIBRI_EMISMATCH, "%s: from another model (fingerprint %016llx, %u x %u experts)",
                          path, (unsigned long long)get64(b + 8), get32(b + 16), get32(b + 20));
    if (!rc)
        for (size_t i = 0; i < (size_t)L * (size_t)E; i++) counts[i] = get32(b + HOT_HEAD + 4 * i);
    free(text);
    return rc;
}

/* Writes n bytes to a new temporary tmp, syncs it and renames it over path;
 * 0 or a negative io_fs code. */
static int write_replace(const struct io_fs *io, const char *tmp, const char *path, const uint8_t *b, size_t n)
{
    /* never through a link or into a file someone else put there */
    const int flags = IO_OPEN_WRITE | IO_OPEN_CREATE | IO_OPEN_EXCL | IO_OPEN_NOFOLLOW;
    void *fh;
    int e = io->open(io, tmp, flags, &fh);
    if (e == -EEXIST) {
        /* left by a process of this pid that died mid-save: the name is ours */
        io->remove(io, tmp);
        e = io->open(io, tmp, flags, &fh);
    }
    if (e) return e;
    e = io->write(io, fh, b, n, 0);
    if (!e) e = io->sync(io, fh);
    int c = io->close(io, fh);
    if (!e) e = c;
    if (!e) e = io->rename(io, tmp, path);
    if (e) io->remove(io, tmp);
    return e;
}

int model_hotset_save(const struct io_fs *fs, const char *path, uint64_t fingerprint, int L, int E,
                      const uint32_t *counts, struct colibri_err *err)
{
    size_t n = HOT_HEAD + 4 * (size_t)L * (size_t)E + 8;
    uint8_t *b = malloc(n);
    char tmp[4200];
    if (!b) return base_err_set(err, COLIBRI_ENOMEM, "%s: out of memory", path);
    memcpy(b, HOT_MAGIC, 8);
    put64(b + 8, fingerprint);
    put32(b + 16, (uint32_t)L);
    put32(b + 20, (uint32_t)E);
    for (size_t i = 0; i < (size_t)L * (size_t)E; i++) put32(b + HOT_HEAD + 4 * i, counts[i]);
    put64(b + n - 8, XXH64(b, n - 8, 0));
    snprintf(tmp, sizeof tmp, "%s", path);
    char *slash = strrchr(tmp, '/');
    if (slash && slash != tmp) {
        *slash = 0;
        if (mkdirs(tmp)) {
            int e = errno;
            free(b);
            return base_err_set(err, COLIBRI_EIO, "state directory %s: cannot create: %s", tmp, strerror(e));
        }
    }
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    int e = write_replace(io_fs_or_posix(fs), tmp, path, b, n), rc = 0;
    if (e) rc = base_err_set(err, COLIBRI_EIO, "%s: cannot write (through %s): %s", path, tmp, io_strerror(e));
    free(b);
    return rc;
}

int model_hotset_choose(const uint32_t *counts, int L, int E, int max_pins, double min_ratio, unsigned char *pin)
{
    int n = L * E, got = 0;
    memset(pin, 0, (size_t)n);
    double *floor_of = malloc((size_t)(L > 0 ? L : 1) * sizeof *floor_of);
    if (!floor_of) return 0;   /* no hot set: plain LRU, still exact */
    for (int l = 0; l < L; l++) {
        double sum = 0;
        for (int e = 0; e < E; e++) sum += counts[l * E + e];
        floor_of[l] = min_ratio * sum / E;
    }
    /* O(n * max_pins) is fine for the few thousand experts of a checkpoint */
    for (; got < max_pins; got++) {
        int best = -1;
        for (int i = 0; i < n; i++)
            if (!pin[i] && counts[i] && counts[i] >= floor_of[i / E] && (best < 0 || counts[i] > counts[best]))
                best = i;
        if (best < 0) break;
        pin[best] = 1;
    }
    free(floor_of);
    return got;
}
