/* KV files through thousands of simulated crashes: random save scripts
 * (growing, shrinking, diverging caches) run through the fault layer, which
 * "crashes" at a random sync with a random fate for the unsynced writes
 * (keep, drop, tear, garble, or each one at random). After every crash the
 * file must verify clean and reopen to the state before the failed save, the
 * state after it, or its divergence prefix; never anything else. Then a
 * random bit of the surviving file is flipped and the file reopened: it may
 * be refused or keep fewer records, but what it restores must be a prefix of
 * one of those states. Counts are printed; a misread fails the test. */
#include <time.h>

#include "check.h"
#include "io_fault.h"
#include "persist_fixture.h"

#define CAP 24
#define STEPS 5
#define TRIALS 13000

struct script {
    int n[STEPS];               /* positions held after step k (n[0] = 0: the open) */
    int d[STEPS];               /* where step k diverges from step k-1 */
    int ep[STEPS][CAP];         /* epoch of each position after step k */
};

static uint64_t rng_next(uint64_t *s)
{
    *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
    return *s;
}

static void make_script(struct script *sc, uint64_t *rng)
{
    memset(sc, 0, sizeof *sc);
    for (int k = 1; k < STEPS; k++) {
        int prev = sc->n[k - 1];
        int n = (int)(rng_next(rng) % (CAP + 1));
        int d = prev < n ? prev : n;
        if (d && rng_next(rng) % 2) d = (int)(rng_next(rng) % (uint64_t)(d + 1));   /* diverge early */
        sc->n[k] = n;
        sc->d[k] = d;
        for (int p = 0; p < n; p++) sc->ep[k][p] = p < d ? sc->ep[k - 1][p] : k + 1;
    }
}

static void fill(struct kv_cache *c, int32_t *tok, const int *ep, int n)
{
    for (int p = 0; p < n; p++) fx_fill(c, tok, p, p + 1, ep[p]);
}

/* Runs the script; returns the step that failed (STEPS if none). */
static int run(const struct io_fs *io, const char *path, const struct script *sc)
{
    struct kv_cache *c = fx_cache(KV_TIER_BF16, CAP);
    int32_t tok[CAP];
    struct kv_file_hdr want = fx_want(c);
    struct kv_file_report rep;
    struct kv_file *f = NULL;
    int k = 0;
    if (kv_file_open(io, path, &want, c, tok, CAP, &rep, &f, NULL) == 0) {
        for (k = 1; k < STEPS; k++) {
            fill(c, tok, sc->ep[k], sc->n[k]);
            if (kv_file_save(f, c, tok, sc->n[k], NULL)) break;
        }
    }
    kv_file_close(f);
    kv_cache_free(c);
    return k;
}

/* 1 when cache rows and tokens [0, n) are those of epochs ep. */
static int holds(const struct kv_cache *c, const int32_t *tok, const int *ep, int n)
{
    struct kv_cache *ref = fx_cache(KV_TIER_BF16, CAP);
    int32_t rt[CAP];
    fill(ref, rt, ep, n);
    int ok = 1;
    for (int p = 0; p < n && ok; p++) {
        ok = tok[p] == rt[p];
        for (int l = 0; l < c->n_layers && ok; l++) ok = !memcmp(kv_cache_row(c, l, p), kv_cache_row(ref, l, p), c->layer[l].row_bytes);
    }
    kv_cache_free(ref);
    return ok;
}

/* Opens path; -1 when refused, else the restored count, with the cache and
 * tokens in *c / tok. */
static int reopen(const char *path, struct kv_cache **c, int32_t *tok)
{
    *c = fx_cache(KV_TIER_BF16, CAP);
    struct kv_file_hdr want = fx_want(*c);
    struct kv_file_report rep;
    struct kv_file *f = NULL;
    int rc = kv_file_open(io_fs_posix(), path, &want, *c, tok, CAP, &rep, &f, NULL);
    kv_file_close(f);
    return rc ? -1 : (int)rep.restored;
}

static int counts[6];           /* crashes per fate; [5] = runs that did not reach their crash */

static void test_crash_at_scale(void)
{
    const char *path = fx_path("scale.ckv"), *flipped = fx_path("flipped.ckv");
    uint64_t rng = 0x243F6A8885A308D3ull;
    int crashes = 0, bad = 0, flips = 0, flip_refused = 0, flip_shorter = 0, misreads = 0;
    clock_t t0 = clock();
    for (int trial = 0; trial < TRIALS; trial++) {
        struct script sc;
        make_script(&sc, &rng);
        unlink(path);
        struct io_fault_opts o = { .crash_sync = 1 + (int)(rng_next(&rng) % 12),
                                   .fate = (enum io_fate)(rng_next(&rng) % 5), .seed = rng_next(&rng) };
        struct io_fault *fl;
        const struct io_fs *io;
        io_fault_new(io_fs_posix(), &o, &fl, &io);
        int k = run(io, path, &sc);
        int tripped = io_fault_tripped(fl);
        io_fault_free(fl);
        if (!tripped) {
            counts[5]++;
            continue;
        }
        crashes++;
        counts[o.fate]++;
        if (access(path, F_OK) != 0) {          /* only a crash while creating it leaves no file */
            if (k != 0 && bad++ < 5) CHECK(0, "trial %d: no file after a crash in step %d", trial, k);
            continue;
        }
        struct kv_file_verify v;
        struct colibri_err err = { 0 };
        if (kv_file_verify(io_fs_posix(), path, &v, &err) || v.first_bad != -1) {
            if (bad++ < 5) CHECK(0, "trial %d (step %d, fate %d): not sound: %s%s", trial, k, o.fate, err.msg, v.why);
            continue;
        }
        struct kv_cache *c;
        int32_t tok[CAP];
        int n = reopen(path, &c, tok), ok = 0;
        for (int s = k - 1; s <= k && !ok && n >= 0; s++) {
            if (s < 0 || s >= STEPS) continue;
            int allowed = n == sc.n[s] || (s == k && n == sc.d[k]);
            ok = allowed && holds(c, tok, sc.ep[s], n);
        }
        kv_cache_free(c);
        if (!ok) {
            if (bad++ < 5) CHECK(0, "trial %d: crash in step %d (fate %d, sync %d) left %d records, not a state of "
                                 "step %d or %d", trial, k, o.fate, o.crash_sync, n, k - 1, k);
            continue;
        }
        /* one flipped bit in the surviving file */
        size_t len;
        uint8_t *b = fx_read(path, &len);
        if (!b || !len) {
            free(b);
            continue;
        }
        /* every other flip lands in a count slot, where the choice of count is made */
        size_t bit = (size_t)(rng_next(&rng) % (len * 8));
        if (trial % 2 && len >= KV_FILE_SLOT_B + KV_FILE_SLOT_BYTES)
            bit = 8 * (trial % 4 == 1 ? KV_FILE_SLOT_A : KV_FILE_SLOT_B) +
                  (size_t)(rng_next(&rng) % (8 * KV_FILE_SLOT_BYTES));
        b[bit / 8] ^= (uint8_t)(1u << (bit % 8));
        fx_write(flipped, b, len);
        free(b);
        flips++;
        int m = reopen(flipped, &c, tok);
        if (m < 0) {
            flip_refused++;
        } else {
            int pre = 0;
            for (int s = k - 1; s <= k && !pre; s++)
                if (s >= 0 && s < STEPS) pre = m <= sc.n[s] && holds(c, tok, sc.ep[s], m);
            if (!pre) {
                if (misreads++ < 5)
                    CHECK(0, "trial %d: bit %zu of %zu flipped: %d records restored, not a prefix of step %d or %d",
                          trial, bit, len * 8, m, k - 1, k);
            } else if (m < n) {
                flip_shorter++;
            }
        }
        kv_cache_free(c);
    }
    printf("  %d simulated crashes (random %d, keep %d, drop %d, torn %d, garbled %d; %d scripts ended before "
           "their crash), %d bad; %d bit flips: %d refused, %d kept fewer records, %d misreads; %.1f s CPU\n",
           crashes, counts[0], counts[1], counts[2], counts[3], counts[4], counts[5], bad, flips, flip_refused,
           flip_shorter, misreads, (double)(clock() - t0) / CLOCKS_PER_SEC);
    CHECK(crashes >= 10000, "only %d crashes simulated", crashes);
    for (int f = 0; f < 5; f++) CHECK(counts[f] > 1000, "fate %d crashed only %d times", f, counts[f]);
    CHECK(bad == 0, "%d of %d crashes left a bad file", bad, crashes);
    CHECK(misreads == 0, "%d of %d bit flips misread", misreads, flips);
}

int main(void)
{
    (void)fx_make_file;         /* fixture helpers this binary does not need */
    (void)fx_cache_is;
    fx_setup();
    RUN_TEST(test_crash_at_scale);
    fx_teardown();
    return CHECK_SUMMARY();
}
