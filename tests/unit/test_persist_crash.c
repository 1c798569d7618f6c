/* KV files under failure: the fault-injecting I/O layer (fail the Nth call;
 * crash at the Nth sync keeping, dropping, tearing or garbling unsynced
 * writes), writers killed with SIGKILL, and f32 -> quantized upgrades with the
 * old file intact until the rename. */
#include <errno.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>

#include "check.h"
#include "io_fault.h"
#include "persist_fixture.h"

#define CAP 32

/* A cache whose position p holds epoch ep[p]. */
static void fill_epochs(struct kv_cache *c, int32_t *tok, const int *ep, int n)
{
    for (int p = 0; p < n; p++) fx_fill(c, tok, p, p + 1, ep[p]);
}

/* 1 if cache rows/tokens [0, n) are those of epochs ep. */
static int cache_is_epochs(const struct kv_cache *c, const int32_t *tok, const int *ep, int n)
{
    struct kv_cache *ref = fx_cache_like(c, CAP);
    int32_t rt[CAP];
    fill_epochs(ref, rt, ep, n);
    int ok = 1;
    for (int p = 0; p < n && ok; p++) {
        ok = tok[p] == rt[p];
        for (int l = 0; l < c->n_layers && ok; l++) ok = !memcmp(kv_cache_row(c, l, p), kv_cache_row(ref, l, p), c->layer[l].row_bytes);
    }
    kv_cache_free(ref);
    return ok;
}

/* The script: after step k the session holds n[k] positions of epochs
 * state[k]; d[k] is where step k diverges from step k-1. */
#define STEPS 6
static const int SN[STEPS] = { 0, 3, 7, 9, 4, 10 };
static const int SD[STEPS] = { 0, 0, 3, 5, 4, 4 };
static int state_epoch(int k, int p)
{
    /* step 3 rewrites 5.. with epoch 2; step 5 rewrites 4.. with epoch 3 */
    if (k >= 5 && p >= 4) return 3;
    if (k >= 3 && p >= 5) return 2;
    return 1;
}

/* Runs the script through io; returns the step that failed (STEPS if none). */
static int run_script(const struct io_fs *io, const char *path, const char *layout)
{
    struct kv_cache *c = fx_cache_spec(layout, CAP);
    int32_t tok[CAP];
    struct kv_file_hdr want = fx_want(c);
    struct kv_file_report rep;
    struct kv_file *f = NULL;
    struct colibri_err err = { 0 };
    int k = 0;
    if (kv_file_open(io, path, &want, c, tok, CAP, &rep, &f, &err) == 0) {
        for (k = 1; k < STEPS; k++) {
            int ep[CAP];
            for (int p = 0; p < SN[k]; p++) ep[p] = state_epoch(k, p);
            fill_epochs(c, tok, ep, SN[k]);
            if (kv_file_save(f, c, tok, SN[k], &err)) break;
        }
    }
    kv_file_close(f);
    kv_cache_free(c);
    return k;
}

/* After a failure in step k, the file at path (if any) must be sound and hold
 * step k-1's state, step k's, or step k's divergence prefix. */
static int state_ok(const char *path, const char *layout, int k, char *why, size_t why_n)
{
    struct kv_file_verify v;
    struct colibri_err err = { 0 };
    if (access(path, F_OK) != 0) {
        snprintf(why, why_n, "no file");
        return k == 0;
    }
    if (kv_file_verify(io_fs_posix(), path, &v, &err)) {
        snprintf(why, why_n, "verify: %s", err.msg);
        return 0;
    }
    if (v.first_bad != -1) {
        snprintf(why, why_n, "published record %lld is bad: %s", (long long)v.first_bad, v.why);
        return 0;
    }
    struct kv_cache *c = fx_cache_spec(layout, CAP);
    int32_t tok[CAP];
    struct kv_file_report rep;
    struct kv_file *f = NULL;
    struct kv_file_hdr want = fx_want(c);
    int rc = kv_file_open(io_fs_posix(), path, &want, c, tok, CAP, &rep, &f, &err);
    int ok = 0;
    if (rc) {
        snprintf(why, why_n, "open: %s", err.msg);
    } else {
        int n = (int)rep.restored;
        for (int s = k - 1; s <= k && !ok; s++) {
            if (s < 0 || s >= STEPS) continue;
            int allowed = n == SN[s] || (s == k && n == SD[k]);
            int ep[CAP];
            for (int p = 0; p < n && p < CAP; p++) ep[p] = state_epoch(s, p);
            ok = allowed && n <= CAP && cache_is_epochs(c, tok, ep, n);
        }
        if (!ok) snprintf(why, why_n, "holds %d records, not a state of step %d or %d", n, k - 1, k);
    }
    kv_file_close(f);
    kv_cache_free(c);
    return ok;
}

/* Fail the Nth call, for every N the script makes; in version 1 (a uniform
 * tq4 cache) and version 2 (per-layer RoPE, an index key in layer 1). */
static void fail_every_call(const char *layout)
{
    const char *path = fx_path("failn.ckv");
    unlink(path);
    struct io_fault *fl;
    const struct io_fs *io;
    io_fault_new(io_fs_posix(), NULL, &fl, &io);
    CHECK(run_script(io, path, layout) == STEPS, "%s: clean run failed", layout);
    int calls = io_fault_calls(fl);
    io_fault_free(fl);
    CHECK(calls > 20, "only %d calls", calls);
    int bad = 0;
    for (int n = 1; n <= calls; n++) {
        unlink(path);
        struct io_fault_opts o = { .fail_call = n, .fail_persist = 1 };
        io_fault_new(io_fs_posix(), &o, &fl, &io);
        int k = run_script(io, path, layout);
        int tripped = io_fault_tripped(fl);
        io_fault_free(fl);
        char why[300];
        if (!tripped || k == STEPS) continue;   /* a close failing after the last step */
        if (!state_ok(path, layout, k, why, sizeof why) && bad++ < 5)
            CHECK(0, "%s: fail call %d (step %d): %s", layout, n, k, why);
    }
    CHECK(bad == 0, "%s: %d failing calls left a bad file", layout, bad);
}

static void test_fail_every_call(void)
{
    fail_every_call("tq4");
    fail_every_call("int8r@1:rope=f32+key");
}

/* Crash at the Nth sync, for every N and every fate; versions 1 and 2. */
static void crash_every_sync(const char *layout)
{
    const char *path = fx_path("crash.ckv");
    unlink(path);
    struct io_fault *fl;
    const struct io_fs *io;
    io_fault_new(io_fs_posix(), NULL, &fl, &io);
    run_script(io, path, layout);
    int syncs = io_fault_syncs(fl);
    io_fault_free(fl);
    CHECK(syncs >= 10, "only %d syncs", syncs);
    int bad = 0, runs = 0;
    for (int n = 1; n <= syncs; n++) {
        for (int fate = IO_FATE_RANDOM; fate <= IO_FATE_GARBLE; fate++) {
            for (uint64_t seed = 1; seed <= (fate == IO_FATE_RANDOM ? 6u : fate >= IO_FATE_TORN ? 3u : 1u); seed++) {
                unlink(path);
                struct io_fault_opts o = { .crash_sync = n, .fate = (enum io_fate)fate, .seed = seed * 7919 + n };
                io_fault_new(io_fs_posix(), &o, &fl, &io);
                int k = run_script(io, path, layout);
                io_fault_free(fl);
                char why[300];
                runs++;
                if (!state_ok(path, layout, k, why, sizeof why) && bad++ < 5)
                    CHECK(0, "%s: crash at sync %d, fate %d, seed %llu (step %d): %s", layout, n, fate,
                          (unsigned long long)seed, k, why);
            }
        }
    }
    CHECK(bad == 0, "%s: %d of %d crashes left a bad file", layout, bad, runs);
}

static void test_crash_every_sync(void)
{
    crash_every_sync("int8r");
    crash_every_sync("fp8@0:int8r:rope=bf16+key");
}

/* The writer child: appends positions of epoch 1 in growing steps, with an
 * occasional shrink, forever. */
static void writer_child(const char *path)
{
    struct kv_cache *c = fx_cache(KV_TIER_F32, 256);
    int32_t tok[256];
    fx_fill(c, tok, 0, 256, 1);
    struct kv_file_hdr want = fx_want(c);
    struct kv_file_report rep;
    struct kv_file *f = NULL;
    if (kv_file_open(io_fs_posix(), path, &want, c, tok, 256, &rep, &f, NULL)) _exit(3);
    int n = (int)rep.restored;
    for (unsigned i = 1;; i++) {
        n = i % 7 == 0 ? n / 2 : n + 1 + (int)(i % 5);
        if (n > 256) n = 8;
        if (kv_file_save(f, c, tok, n, NULL)) _exit(4);
    }
}

/* SIGKILL at random moments: every surviving file opens and holds a prefix
 * of what was written. */
static void test_sigkill_writers(void)
{
    const char *path = fx_path("killed.ckv");
    unlink(path);
    srand(12345);
    int iters = 0, bad = 0, files = 0;
    struct timespec start, now;
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (; iters < 300; iters++) {
        if (iters % 50 == 0) unlink(path);    /* sometimes from creation on */
        pid_t pid = fork();
        if (pid == 0) writer_child(path);
        struct timespec d = { 0, (long)(rand() % 4000) * 1000L };
        nanosleep(&d, NULL);
        kill(pid, SIGKILL);
        int st;
        waitpid(pid, &st, 0);
        if (WIFEXITED(st)) {
            CHECK(0, "writer exited with %d instead of being killed", WEXITSTATUS(st));
            bad++;
            break;
        }
        if (access(path, F_OK) == 0) {
            files++;
            struct kv_cache *c = fx_cache(KV_TIER_F32, 256);
            int32_t tok[256];
            struct kv_file_hdr want = fx_want(c);
            struct kv_file_report rep;
            struct kv_file *f = NULL;
            struct colibri_err err = { 0 };
            int rc = kv_file_open(io_fs_posix(), path, &want, c, tok, 256, &rep, &f, &err);
            int ok = rc == 0 && rep.first_bad == -1 && fx_cache_is(c, tok, (int)rep.restored, 1);
            if (!ok && bad++ < 5)
                CHECK(0, "after kill %d: rc %d (%s), kept %llu of %llu: %s", iters, rc, err.msg,
                      (unsigned long long)rep.kept, (unsigned long long)rep.published, rep.why);
            kv_file_close(f);
            kv_cache_free(c);
        }
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (now.tv_sec - start.tv_sec > 25) break;   /* bounded on a slow (or sanitized) build */
    }
    printf("  %d kills, %d files checked\n", iters, files);
    CHECK(iters >= 100 && files >= iters / 2, "only %d kills, %d files", iters, files);
    CHECK(bad == 0, "%d bad files", bad);
}

/* f32 file -> a session of each other tier: rows re-encoded in memory equal
 * the tier's own encoding of the f32 values; the file is untouched until the
 * save, which rewrites it in the new tier. */
static void test_upgrade_every_tier(void)
{
    for (int t = 1; t < KV_TIER_COUNT; t++) {
        const char *path = fx_path("up.ckv");
        fx_make_file(path, KV_TIER_F32, 9, 1);
        size_t n0;
        uint8_t *b0 = fx_read(path, &n0);
        struct kv_cache *c = fx_cache((enum kv_tier)t, CAP);
        int32_t tok[CAP];
        struct kv_file_hdr want = fx_want(c);
        struct kv_file_report rep;
        struct kv_file *f = NULL;
        struct colibri_err err = { 0 };
        int rc = kv_file_open(io_fs_posix(), path, &want, c, tok, CAP, &rep, &f, &err);
        CHECK(rc == 0 && rep.upgraded && rep.restored == 9, "%s: %d %s", kv_tier_name(t), rc, err.msg);
        CHECK(fx_cache_is(c, tok, 9, 1), "%s: upgraded rows differ from the tier's encoding", kv_tier_name(t));
        size_t n1;
        uint8_t *b1 = fx_read(path, &n1);
        CHECK(n0 == n1 && !memcmp(b0, b1, n0), "%s: the f32 file changed before the save", kv_tier_name(t));
        /* The session goes on: two more positions, then the save rewrites. */
        fx_fill(c, tok, 9, 12, 1);
        CHECK(f && kv_file_save(f, c, tok, 11, &err) == 0, "%s: %s", kv_tier_name(t), err.msg);
        CHECK(f && kv_file_save(f, c, tok, 12, &err) == 0, "%s: append after rewrite: %s", kv_tier_name(t), err.msg);
        kv_file_close(f);
        struct kv_file_verify v;
        CHECK(kv_file_verify(io_fs_posix(), path, &v, &err) == 0 && v.hdr.tier == (uint32_t)t && v.valid == 12 &&
                  v.first_bad == -1,
              "%s: after the rewrite: tier %u valid %llu", kv_tier_name(t), v.hdr.tier, (unsigned long long)v.valid);
        struct kv_cache *c2 = fx_cache((enum kv_tier)t, CAP);
        int32_t tok2[CAP];
        rc = kv_file_open(io_fs_posix(), path, &want, c2, tok2, CAP, &rep, &f, &err);
        CHECK(rc == 0 && !rep.upgraded && rep.restored == 12 && fx_cache_is(c2, tok2, 12, 1), "%s: reopen %d %s",
              kv_tier_name(t), rc, err.msg);
        kv_file_close(f);
        CHECK(access(fx_path("up.ckv.tmp"), F_OK) != 0, "%s: temporary file left behind", kv_tier_name(t));
        kv_cache_free(c);
        kv_cache_free(c2);
        free(b0);
        free(b1);
    }
}

/* The upgrade's rewrite under failures: fail each call, crash at each sync.
 * The path always names the old file byte for byte, or the complete new one. */
static int upgrade_run(const struct io_fs *io, const char *path, const char *layout)
{
    struct kv_cache *c = fx_cache_spec(layout, CAP);
    int32_t tok[CAP];
    struct kv_file_hdr want = fx_want(c);
    struct kv_file_report rep;
    struct kv_file *f = NULL;
    struct colibri_err err = { 0 };
    int rc = kv_file_open(io, path, &want, c, tok, CAP, &rep, &f, &err);
    if (!rc) rc = kv_file_save(f, c, tok, 9, &err);
    kv_file_close(f);
    kv_cache_free(c);
    return rc;
}

static int old_or_new(const char *path, const uint8_t *old, size_t n_old, const char *layout)
{
    size_t n;
    uint8_t *b = fx_read(path, &n);
    int ok = b && n == n_old && !memcmp(b, old, n);
    free(b);
    if (ok) return 1;
    struct kv_file_verify v;
    struct colibri_err err = { 0 };
    if (kv_file_verify(io_fs_posix(), path, &v, &err) || v.valid != 9 || v.first_bad != -1) return 0;
    struct kv_cache *c = fx_cache_spec(layout, CAP);
    int32_t tok[CAP];
    struct kv_file_hdr want = fx_want(c);
    struct kv_file_report rep;
    struct kv_file *f = NULL;
    /* the new file is in the session's layout: reopened as it is, no upgrade */
    ok = kv_file_open(io_fs_posix(), path, &want, c, tok, CAP, &rep, &f, &err) == 0 && !rep.upgraded &&
         rep.restored == 9 && fx_cache_is(c, tok, 9, 1);
    kv_file_close(f);
    kv_cache_free(c);
    return ok;
}

/* From an all-f32 file (version 1, or version 2 with an index key) to
 * quantized layouts, uniform (version 1) and per-layer (version 2). */
static void test_upgrade_under_faults(void)
{
    static const struct { const char *from, *to; } UP[] = {
        { "f32", "tq4" }, { "f32", "fp8" }, { "f32", "polar3" }, { "f32", "int8r@1:rope=f32" },
        { "f32+key", "tq4@0:fp8+key" },
    };
    const char *path = fx_path("upf.ckv");
    for (size_t ti = 0; ti < sizeof UP / sizeof UP[0]; ti++) {
        const char *to = UP[ti].to;
        fx_make_file_spec(path, UP[ti].from, 9, 1);
        size_t n_old;
        uint8_t *old = fx_read(path, &n_old);
        struct io_fault *fl;
        const struct io_fs *io;
        io_fault_new(io_fs_posix(), NULL, &fl, &io);
        CHECK(upgrade_run(io, path, to) == 0, "%s: clean upgrade failed", to);
        int calls = io_fault_calls(fl), syncs = io_fault_syncs(fl);
        io_fault_free(fl);
        CHECK(old_or_new(path, NULL, 0, to), "%s: the clean upgrade's file", to);
        int bad = 0;
        for (int n = 1; n <= calls + syncs; n++) {
            fx_write(path, old, n_old);
            struct io_fault_opts o = { .fail_persist = 1, .seed = (uint64_t)n };
            if (n <= calls) o.fail_call = n;
            else o.crash_sync = n - calls, o.fate = IO_FATE_RANDOM;
            io_fault_new(io_fs_posix(), &o, &fl, &io);
            upgrade_run(io, path, to);
            io_fault_free(fl);
            if (!old_or_new(path, old, n_old, to) && bad++ < 3)
                CHECK(0, "%s: %s %d: the path names neither the old nor the new file", to,
                      n <= calls ? "failed call" : "crash at sync", n <= calls ? n : n - calls);
        }
        CHECK(bad == 0, "%s: %d runs broke the file", to, bad);
        free(old);
    }
}

int main(void)
{
    fx_setup();
    RUN_TEST(test_fail_every_call);
    RUN_TEST(test_crash_every_sync);
    RUN_TEST(test_upgrade_every_tier);
    RUN_TEST(test_upgrade_under_faults);
    RUN_TEST(test_sigkill_writers);
    fx_teardown();
    return CHECK_SUMMARY();
}
