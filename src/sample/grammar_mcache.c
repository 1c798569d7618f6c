/* sample/grammar_mcache.c - the per-grammar mask cache (contract in
 * grammar_internal.h): what a stack top lets through, computed once per
 * grammar and shared by every state and thread that meets it.
 *
 * Entries are made outside the lock (a precompute can take tens of
 * milliseconds) and inserted under it; two threads making the same entry
 * keep the first. An entry is never changed or freed before the grammar, so
 * a reader needs the lock only to find it. Past GMC_MAX_ENTRIES keys or
 * GMC_MAX_BYTES of lists nothing new is kept and those stacks are walked, as
 * before the cache. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sample/grammar_internal.h"

#define GMC_MAX_ENTRIES 4096
#define GMC_MAX_BYTES ((size_t)64 << 20)
#define GMC_SLOTS 8192            /* twice GMC_MAX_ENTRIES: probes stay short */

struct gmc_slot { uint32_t key[GMC_DEPTH + 1], n; struct gmc_entry *e; };

struct gmc {
    pthread_mutex_t mu;
    struct gmc_slot *slot;
    uint32_t n, n_refused;
    int closed;                  /* an entry did not fit: nothing more is made */
    size_t bytes;
    double seconds;              /* spent making entries, CPU of the threads that made them */
};

int sample_grammar_mc_new(struct grammar *g)
{
    struct gmc *mc = calloc(1, sizeof *mc);
    if (!mc) return COLIBRI_ENOMEM;
    mc->slot = calloc(GMC_SLOTS, sizeof *mc->slot);
    if (!mc->slot || pthread_mutex_init(&mc->mu, NULL)) { free(mc->slot); free(mc); return COLIBRI_ENOMEM; }
    g->mc = mc;
    return 0;
}

static void entry_free(struct gmc_entry *e)
{
    if (!e) return;
    free(e->acc);
    free(e->acc_bits);
    free(e->cd);
    free(e);
}

void sample_grammar_mc_free(struct gmc *mc)
{
    if (!mc) return;
    for (uint32_t i = 0; i < GMC_SLOTS; i++) entry_free(mc->slot[i].e);
    free(mc->slot);
    pthread_mutex_destroy(&mc->mu);
    free(mc);
}

/* The slot holding key k[0..n), or the empty one where it goes. */
static struct gmc_slot *find(struct gmc *mc, const uint32_t *k, uint32_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (uint32_t i = 0; i < n; i++) h = (h ^ k[i]) * 1099511628211ull;
    for (uint32_t i = (uint32_t)(h ^ h >> 29) & (GMC_SLOTS - 1);; i = (i + 1) & (GMC_SLOTS - 1)) {
        struct gmc_slot *s = &mc->slot[i];
        if (!s->e || (s->n == n && !memcmp(s->key, k, n * sizeof *k))) return s;
    }
}

static double thread_cpu(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + t.tv_nsec * 1e-9;
}

const struct gmc_entry *sample_grammar_mc_get(const struct grammar *g, const uint32_t *key, uint32_t n, int bottom_null)
{
    struct gmc *mc = g->mc;
    if (!mc || n == 0 || n > GMC_DEPTH) return NULL;
    uint32_t k[GMC_DEPTH + 1];
    memcpy(k, key, n * sizeof *k);
    k[n] = bottom_null ? 1 : 0;
    pthread_mutex_lock(&mc->mu);
    struct gmc_slot *s = find(mc, k, n + 1);
    struct gmc_entry *e = s->e;
    int full = mc->closed || mc->n >= GMC_MAX_ENTRIES;
    pthread_mutex_unlock(&mc->mu);
    if (e || full) return e;
    double t0 = thread_cpu();
    struct gmc_entry *ne = calloc(1, sizeof *ne);
    if (!ne) return NULL;
    if (sample_grammar_mc_classify(g, key, n, bottom_null, ne)) { entry_free(ne); return NULL; }
    double dt = thread_cpu() - t0;
    pthread_mutex_lock(&mc->mu);
    s = find(mc, k, n + 1);
    if (!s->e && mc->n < GMC_MAX_ENTRIES && mc->bytes + ne->bytes <= GMC_MAX_BYTES) {
        memcpy(s->key, k, (n + 1) * sizeof *k);
        s->n = n + 1;
        s->e = ne;
        mc->n++;
        mc->n_refused += (uint32_t)ne->refused;
        mc->bytes += ne->bytes;
        mc->seconds += dt;
        ne = NULL;
    } else if (!s->e) {   /* over the limits: nothing more is kept */
        mc->closed = 1;
    }
    e = s->e;
    pthread_mutex_unlock(&mc->mu);
    entry_free(ne);
    return e;
}

void sample_grammar_mc_stats(const struct grammar *g, struct gmc_stats *out)
{
    *out = (struct gmc_stats){ 0 };
    struct gmc *mc = g->mc;
    if (!mc) return;
    pthread_mutex_lock(&mc->mu);
    *out = (struct gmc_stats){ mc->n, mc->n_refused, mc->bytes, mc->seconds };
    pthread_mutex_unlock(&mc->mu);
}
