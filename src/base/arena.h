/* base/arena.h - a bump allocator: many small allocations freed at once.
 *
 * Memory comes in chunks of at least 64 KiB; every allocation is 16-byte
 * aligned and lives until base_arena_reset() or base_arena_free(). An arena
 * may have a byte limit (what it hands out, not what it holds). A zeroed
 * struct is an empty arena. Not thread-safe: one arena per user. */
#ifndef COLIBRI_BASE_ARENA_H
#define COLIBRI_BASE_ARENA_H

#include <stddef.h>

struct base_arena_chunk;

struct base_arena {
    struct base_arena_chunk *head;
    size_t total;               /* bytes handed out since the last reset */
    size_t limit;               /* 0: none */
};

/* n bytes (contents undefined), or NULL past the limit or out of memory. */
void *base_arena_alloc(struct base_arena *a, size_t n);
/* Forgets every allocation and keeps one chunk for reuse. */
void base_arena_reset(struct base_arena *a);
/* Frees everything; the arena is empty (its limit kept). */
void base_arena_free(struct base_arena *a);

#endif
