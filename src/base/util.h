/* base/util.h - small shared helpers: aligned allocation, wall-clock time,
 * logging to stderr, and a terminal progress bar. Nothing model-specific. */
#ifndef COLIBRI_BASE_UTIL_H
#define COLIBRI_BASE_UTIL_H

#include <stddef.h>
#include <stdint.h>

/* 64-byte aligned, zero-filled; NULL on failure or size 0. Free with free(). */
void *base_xalloc(size_t size);

/* Monotonic seconds. */
double base_now_sec(void);

/* Log to stderr with a level tag; quiet below the level set at start-up.
 * The level lives in the caller's options; this only formats. */
void base_log_msg(const char *tag, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Progress bar on stderr when stderr is a terminal; otherwise a line every
 * 10%. `label` is printed before the bar. */
struct progress { const char *label; uint64_t total, last_shown; double t0; int tty; int bytes; };
/* With p->bytes set after start, done and total are bytes: the line also
 * shows GiB done of the total and the rate in MB/s. */
void base_progress_start(struct progress *p, const char *label, uint64_t total);
void base_progress_update(struct progress *p, uint64_t done);
void base_progress_end(struct progress *p);

/* Reads a whole file into a NUL-terminated malloc'd buffer; NULL on error
 * (errno set). *len receives the byte count (without the NUL). */
char *base_read_file_all(const char *path, size_t *len);

/* Writes name(0), ..., name(count - 1) joined by sep into buf[n] as snprintf
 * would: NUL-terminated when n > 0, cut at n - 1 bytes. A NULL name (a
 * retired table entry) is skipped. Returns the length of the whole list, so
 * a result >= n means buf was too small. For the name lists of traits tables. */
size_t base_join_names(char *buf, size_t n, const char *sep, int count, const char *(*name)(int i));

#endif
