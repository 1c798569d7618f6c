#include "base/arena.h"

#include <stdlib.h>

struct base_arena_chunk {
    struct base_arena_chunk *next;
    size_t used, cap;
    _Alignas(16) unsigned char mem[];
};

#define ARENA_CHUNK (64u << 10)

void *base_arena_alloc(struct base_arena *a, size_t n)
{
    n = (n + 15) & ~(size_t)15;
    if (a->limit && a->total + n > a->limit) return NULL;
    struct base_arena_chunk *c = a->head;
    if (!c || c->cap - c->used < n) {
        size_t cap = n > ARENA_CHUNK ? n : ARENA_CHUNK;
        if (!(c = malloc(sizeof *c + cap))) return NULL;
        c->next = a->head;
        c->used = 0;
        c->cap = cap;
        a->head = c;
    }
    void *p = c->mem + c->used;
    c->used += n;
    a->total += n;
    return p;
}

void base_arena_reset(struct base_arena *a)
{
    a->total = 0;
    if (!a->head) return;
    for (struct base_arena_chunk *c = a->head->next, *nx; c; c = nx) {
        nx = c->next;
        free(c);
    }
    a->head->next = NULL;
    a->head->used = 0;
}

void base_arena_free(struct base_arena *a)
{
    for (struct base_arena_chunk *c = a->head, *nx; c; c = nx) {
        nx = c->next;
        free(c);
    }
    a->head = NULL;
    a->total = 0;
}
