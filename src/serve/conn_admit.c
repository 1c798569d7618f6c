/* serve/conn_admit.c - connection counts per client key and the admission
 * rule; see conn_admit.h. */
#include "serve/conn_admit.h"

#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>

/* Open addressing with linear probing; a key whose count drops to zero is
 * removed by backward-shift deletion, so the table holds only live keys and
 * never needs tombstones. */
struct admit_slot { struct admit_key k; int count; };   /* count 0: empty */

struct conn_admit {
    int limit, per_key, reserve, n_open;
    struct admit_slot *slot;
    size_t cap, n_keys;         /* cap a power of two, at least twice n_keys */
};

struct admit_key serve_admit_key(const struct sockaddr *sa, socklen_t len)
{
    struct admit_key k;
    memset(&k, 0, sizeof k);
    if (sa && sa->sa_family == AF_INET && len >= (socklen_t)sizeof(struct sockaddr_in)) {
        k.family = 4;
        memcpy(k.bytes, &((const struct sockaddr_in *)sa)->sin_addr, 4);
    } else if (sa && sa->sa_family == AF_INET6 && len >= (socklen_t)sizeof(struct sockaddr_in6)) {
        const uint8_t *b = ((const struct sockaddr_in6 *)sa)->sin6_addr.s6_addr;
        static const uint8_t MAPPED[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
        if (!memcmp(b, MAPPED, 12)) {
            k.family = 4;
            memcpy(k.bytes, b + 12, 4);
        } else {
            k.family = 6;
            memcpy(k.bytes, b, 8);
        }
    }
    return k;
}

static int key_eq(const struct admit_key *a, const struct admit_key *b)
{
    return a->family == b->family && !memcmp(a->bytes, b->bytes, sizeof a->bytes);
}

static size_t key_home(const struct admit_key *k, size_t cap)
{
    uint64_t h = k->family;
    for (int i = 0; i < 8; i++) h = (h ^ k->bytes[i]) * 0x100000001B3ull;
    return (size_t)((h * 0x9E3779B97F4A7C15ull) >> 20) & (cap - 1);
}

/* The slot holding k, or the empty slot where it would go. */
static size_t find(const struct conn_admit *a, const struct admit_key *k)
{
    size_t j = key_home(k, a->cap);
    while (a->slot[j].count && !key_eq(&a->slot[j].k, k)) j = (j + 1) & (a->cap - 1);
    return j;
}

struct conn_admit *serve_admit_new(int limit, int per_key, int reserve)
{
    struct conn_admit *a = calloc(1, sizeof *a);
    if (!a) return NULL;
    a->limit = limit > 0 ? limit : 1;
    a->per_key = per_key > 0 ? per_key : 1;
    a->reserve = reserve < 0 ? 0 : reserve < a->limit ? reserve : a->limit - 1;
    a->cap = 64;
    if (!(a->slot = calloc(a->cap, sizeof *a->slot))) { free(a); return NULL; }
    return a;
}

void serve_admit_free(struct conn_admit *a)
{
    if (!a) return;
    free(a->slot);
    free(a);
}

int serve_admit_count(const struct conn_admit *a, const struct admit_key *k) { return a->slot[find(a, k)].count; }
int serve_admit_open(const struct conn_admit *a) { return a->n_open; }

int serve_admit_over(const struct conn_admit *a, const struct admit_key *k)
{
    return serve_admit_count(a, k) > a->per_key || a->n_open > a->limit;
}

enum admit_verdict serve_admit_ask(const struct conn_admit *a, const struct admit_key *k)
{
    int held = serve_admit_count(a, k);
    if (held >= a->per_key) return ADMIT_KEY_FULL;
    int room = held ? a->limit - a->reserve : a->limit;
    return a->n_open < room ? ADMIT_YES : ADMIT_TABLE_FULL;
}

static int grow(struct conn_admit *a)
{
    struct admit_slot *old = a->slot;
    size_t old_cap = a->cap;
    struct admit_slot *ns = calloc(2 * old_cap, sizeof *ns);
    if (!ns) return -1;
    a->slot = ns;
    a->cap = 2 * old_cap;
    for (size_t i = 0; i < old_cap; i++)
        if (old[i].count) a->slot[find(a, &old[i].k)] = old[i];
    free(old);
    return 0;
}

int serve_admit_add(struct conn_admit *a, const struct admit_key *k)
{
    size_t j = find(a, k);
    if (!a->slot[j].count) {
        if (2 * (a->n_keys + 1) > a->cap) {
            if (grow(a)) return -1;
            j = find(a, k);
        }
        a->slot[j].k = *k;
        a->n_keys++;
    }
    a->slot[j].count++;
    a->n_open++;
    return 0;
}

void serve_admit_remove(struct conn_admit *a, const struct admit_key *k)
{
    size_t j = find(a, k);
    if (!a->slot[j].count) return;
    a->n_open--;
    if (--a->slot[j].count) return;
    a->n_keys--;
    /* backward-shift: move later entries of the probe run into the hole */
    for (size_t i = j, m = (j + 1) & (a->cap - 1); a->slot[m].count; m = (m + 1) & (a->cap - 1)) {
        size_t home = key_home(&a->slot[m].k, a->cap);
        /* m's entry may move to i when i lies cyclically in [home, m) */
        if (((m - home) & (a->cap - 1)) >= ((m - i) & (a->cap - 1))) {
            a->slot[i] = a->slot[m];
            a->slot[m].count = 0;
            i = m;
        }
    }
}
