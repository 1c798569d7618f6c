/* check.h - the unit-test harness: CHECK() records failures, RUN_TEST() runs a
 * test function and counts it as passed when it recorded no failure, and
 * CHECK_SUMMARY() prints "N passed, N failed" and gives main()'s exit code.
 * Header-only; include it from exactly one .c file per test binary. */
#ifndef COLIBRI_TEST_CHECK_H
#define COLIBRI_TEST_CHECK_H

#include <math.h>
#include <stdio.h>

static int check_failures, tests_passed, tests_failed;

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

/* |a-b| <= tol * max(1, |b|) */
#define CHECK_NEAR(a, b, tol)                                              \
    CHECK(fabs((double)(a) - (double)(b)) <=                               \
              (tol) * fmax(1.0, fabs((double)(b))),                        \
          "%.9g vs %.9g (tol %g)", (double)(a), (double)(b), (double)(tol))

#define RUN_TEST(fn)                                                       \
    do {                                                                   \
        int before_ = check_failures;                                      \
        fn();                                                              \
        if (check_failures == before_) {                                   \
            tests_passed++;                                                \
            printf("ok   %s\n", #fn);                                      \
        } else {                                                           \
            tests_failed++;                                                \
            printf("FAIL %s\n", #fn);                                      \
        }                                                                  \
        fflush(stdout);                                                    \
    } while (0)

#define CHECK_SUMMARY()                                                    \
    (printf("%d passed, %d failed\n", tests_passed, tests_failed),         \
     tests_failed ? 1 : 0)

#endif
