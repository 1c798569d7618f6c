/* check.h - the unit-test harness: CHECK() records failures, RUN_TEST() runs a
 * test function and counts it as passed when it recorded no failure, or as
 * skipped when it called SKIP() (something it needs is missing here; never a
 * pass), noting its wall time when a second or more, and CHECK_SUMMARY() prints "N passed, N failed" (", N skipped" when
 * any were) and gives main()'s exit code. Header-only; include it from
 * exactly one .c file per test binary. */
#ifndef COLIBRI_TEST_CHECK_H
#define COLIBRI_TEST_CHECK_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int check_failures, tests_passed, tests_failed, tests_skipped, check_skipping;

/* Marks the running test as skipped, saying why; it should return then. */
#define SKIP(...)                                                          \
    do {                                                                   \
        check_skipping = 1;                                                \
        printf("  skipped: ");                                             \
        printf(__VA_ARGS__);                                               \
        putchar('\n');                                                     \
    } while (0)

#define CHECK(cond, ...)                                                   \
    do {                                                                   \
        if (!(cond)) {                                                     \
            check_failures++;                                              \
            fprintf(stderr, "  %s:%d: CHECK(%s) failed: ", __FILE__,       \
                    __LINE__, #cond);                                      \
            fprintf(stderr, __VA_ARGS__);                                  \
            fputc('\n', stderr);                                           \
        }                                                                  \
    } while (0)

/* Whether a test runs its exhaustive sweeps (COLIBRI_TEST_FULL set and not
 * "0", as `make test-full` sets it) or its representative cases (`make test`). */
static inline int check_full(void)
{
    const char *e = getenv("COLIBRI_TEST_FULL");
    return e && *e && strcmp(e, "0") != 0;
}

/* Seconds on the monotonic clock, for RUN_TEST's note of slow tests. */
static inline double check_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* |a-b| <= tol * max(1, |b|) */
#define CHECK_NEAR(a, b, tol)                                              \
    CHECK(fabs((double)(a) - (double)(b)) <=                               \
              (tol) * fmax(1.0, fabs((double)(b))),                        \
          "%.9g vs %.9g (tol %g)", (double)(a), (double)(b), (double)(tol))

#define RUN_TEST(fn)                                                       \
    do {                                                                   \
        int before_ = check_failures;                                      \
        double t0_ = check_now();                                          \
        check_skipping = 0;                                                \
        fn();                                                              \
        double dt_ = check_now() - t0_;                                    \
        if (check_failures == before_ && check_skipping) {                 \
            tests_skipped++;                                               \
            printf("skip %s", #fn);                                        \
        } else if (check_failures == before_) {                            \
            tests_passed++;                                                \
            printf("ok   %s", #fn);                                        \
        } else {                                                           \
            tests_failed++;                                                \
            printf("FAIL %s", #fn);                                        \
        }                                                                  \
        if (dt_ >= 1.0) printf(" (%.1f s)", dt_);                          \
        putchar('\n');                                                     \
        fflush(stdout);                                                    \
    } while (0)

#define CHECK_SUMMARY()                                                    \
    ((tests_skipped ? printf("%d passed, %d failed, %d skipped\n",         \
                             tests_passed, tests_failed, tests_skipped)    \
                    : printf("%d passed, %d failed\n", tests_passed,       \
                             tests_failed)),                               \
     tests_failed ? 1 : 0)

#endif
