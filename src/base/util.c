#include "base/util.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

void *base_xalloc(size_t size)
{
    if (size == 0) return NULL;
    size_t rounded = (size + 63) & ~(size_t)63;
    void *p = aligned_alloc(64, rounded);
    if (p) memset(p, 0, rounded);
    return p;
}

double base_now_sec(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* One line, one write: stderr is unbuffered, and the tag, the message and
 * the newline written apart interleave with other processes writing to the
 * same pipe (the ranks of an MPI job: "[info] " of one rank ended up in
 * front of another rank's line). A write of up to PIPE_BUF bytes to a pipe is
 * atomic; longer lines are formatted into the heap, still written once. */
void base_log_msg(const char *tag, const char *fmt, ...)
{
    char small[1024], *line = small;
    va_list ap;
    va_start(ap, fmt);
    int head = snprintf(small, sizeof small, "[%s] ", tag);
    if (head < 0) head = 0;
    if ((size_t)head >= sizeof small) head = (int)sizeof small - 1;
    va_list ap2;
    va_copy(ap2, ap);
    int body = vsnprintf(small + head, sizeof small - (size_t)head, fmt, ap);
    if (body < 0) body = 0;
    size_t len = (size_t)head + (size_t)body;
    if (len + 1 >= sizeof small) {
        char *big = malloc(len + 2);
        if (big) {
            memcpy(big, small, (size_t)head);
            vsnprintf(big + head, (size_t)body + 1, fmt, ap2);
            line = big;
        } else {
            len = sizeof small - 2;     /* cut to what fits rather than lose the line */
        }
    }
    va_end(ap2);
    va_end(ap);
    line[len] = '\n';
    fwrite(line, 1, len + 1, stderr);
    if (line != small) free(line);
}

void base_progress_start(struct progress *p, const char *label, uint64_t total)
{
    p->label = label;
    p->total = total ? total : 1;
    p->last_shown = 0;
    p->t0 = base_now_sec();
    p->tty = isatty(2);
}

void base_progress_update(struct progress *p, uint64_t done)
{
    if (p->tty) {
        int width = 30, filled = (int)(width * done / p->total);
        fprintf(stderr, "\r%s [", p->label);
        for (int i = 0; i < width; i++) fputc(i < filled ? '#' : ' ', stderr);
        double dt = base_now_sec() - p->t0;
        fprintf(stderr, "] %3d%% %.1fs", (int)(100 * done / p->total), dt);
        if (p->bytes)
            fprintf(stderr, " %.2f/%.2f GiB %.0f MB/s", done / 1073741824.0, p->total / 1073741824.0,
                    dt > 0 ? done / 1e6 / dt : 0.0);
        fflush(stderr);
    } else {
        uint64_t decile = 10 * done / p->total;
        if (decile > p->last_shown) {
            p->last_shown = decile;
            double dt = base_now_sec() - p->t0;
            if (p->bytes)
                fprintf(stderr, "%s: %d%% (%.1fs, %.2f GiB, %.0f MB/s)\n", p->label, (int)(10 * decile), dt,
                        done / 1073741824.0, dt > 0 ? done / 1e6 / dt : 0.0);
            else
                fprintf(stderr, "%s: %d%% (%.1fs)\n", p->label, (int)(10 * decile), dt);
        }
    }
}

void base_progress_end(struct progress *p)
{
    if (p->tty) fputc('\n', stderr);
}

char *base_read_file_all(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap + 1);
    while (buf) {
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (n < cap) break;
        char *bigger = realloc(buf, 2 * cap + 1);
        if (!bigger) { free(buf); buf = NULL; break; }
        buf = bigger;
        cap *= 2;
    }
    int bad = ferror(f);
    fclose(f);
    if (!buf || bad) { free(buf); return NULL; }
    buf[n] = 0;
    if (len) *len = n;
    return buf;
}

static void append(char *buf, size_t n, size_t *len, const char *s)
{
    size_t m = strlen(s);
    if (*len + 1 < n) {
        size_t c = m < n - 1 - *len ? m : n - 1 - *len;
        memcpy(buf + *len, s, c);
        buf[*len + c] = 0;
    }
    *len += m;
}

size_t base_join_names(char *buf, size_t n, const char *sep, int count, const char *(*name)(int i))
{
    size_t len = 0;
    int first = 1;
    if (n) buf[0] = 0;
    for (int i = 0; i < count; i++) {
        const char *s = name(i);
        if (!s) continue;
        if (!first) append(buf, n, &len, sep);
        append(buf, n, &len, s);
        first = 0;
    }
    return len;
}
