/* tests/fuzz/fuzz_util.h - helpers shared by the libFuzzer harnesses: the
 * parsers under test read files, so inputs are written to a per-process
 * scratch directory. Harnesses run from the repository root (seed files
 * such as tests/tok/small are found from there). Not thread-safe. */
#ifndef COLIBRI_FUZZ_UTIL_H
#define COLIBRI_FUZZ_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The scratch directory (created on first use, removed at exit). */
static inline const char *fuzz_dir(void);

static char fuzz_dir_path[256];

static inline void fuzz_dir_cleanup(void)
{
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", fuzz_dir_path);
    if (fuzz_dir_path[0] && system(cmd)) { /* best effort */ }
}

static inline const char *fuzz_dir(void)
{
    if (!fuzz_dir_path[0]) {
        const char *tmp = getenv("TMPDIR");
        snprintf(fuzz_dir_path, sizeof fuzz_dir_path, "%s/colibri-fuzz-XXXXXX", tmp ? tmp : "/tmp");
        if (!mkdtemp(fuzz_dir_path)) abort();
        atexit(fuzz_dir_cleanup);
    }
    return fuzz_dir_path;
}

/* Writes n bytes to dir/name (dir NULL = the scratch directory); the path
 * goes to out. Aborts on failure: the harness cannot go on without it. */
static inline void fuzz_write(const char *dir, const char *name, const void *p, size_t n, char *out, size_t cap)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir ? dir : fuzz_dir(), name);
    FILE *f = fopen(path, "wb");
    if (!f || (n && fwrite(p, 1, n, f) != n) || fclose(f)) abort();
    if (out) snprintf(out, cap, "%s", path);
}

/* A file's whole contents (malloc'd, NUL-terminated), or abort. */
static inline char *fuzz_slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "fuzz: cannot read %s (run from the repository root)\n", path);
        abort();
    }
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)len + 1);
    if (!s || fread(s, 1, (size_t)len, f) != (size_t)len) abort();
    fclose(f);
    s[len] = 0;
    *n = (size_t)len;
    return s;
}

#endif
