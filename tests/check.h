/* check.h — the checks every test shares (header-only): CHECK(cond, fmt, ...) and check(ok, fmt,
 * ...) print one "PASS  " / "FAIL  " line per check and count them in n_checks / n_failed (a
 * test returns n_failed ? 1 : 0); with CHECK_QUIET defined before the include, CHECK prints only
 * the failures (tests that make thousands of checks). near(a, b, tol): |a - b| <= tol max(1, |b|).
 * A test that cannot run here exits CHECK_SKIP (77), which ctest reports as skipped. */
#ifndef ML_TEST_CHECK_H
#define ML_TEST_CHECK_H

#include <math.h>
#include <stdarg.h>
#include <stdio.h>

#define CHECK_SKIP 77

static int n_checks, n_failed;

static int check(int ok, const char *fmt, ...) __attribute__((format(printf, 2, 3), unused));
static int check(int ok, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    printf("%s ", ok ? "PASS " : "FAIL ");
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    fflush(stdout);
    n_checks++;
    if (!ok) n_failed++;
    return ok;
}

#ifdef CHECK_QUIET
#define CHECK_PASS_LINE_ 0
#else
#define CHECK_PASS_LINE_ 1
#endif
#define CHECK(cond, ...)                                          \
    do {                                                          \
        n_checks++;                                               \
        if (cond) {                                               \
            if (CHECK_PASS_LINE_) {                               \
                printf("PASS  ");                                 \
                printf(__VA_ARGS__);                              \
                printf("\n");                                     \
            }                                                     \
        } else {                                                  \
            n_failed++;                                           \
            printf("FAIL  ");                                     \
            printf(__VA_ARGS__);                                  \
            printf("  [%s:%d]\n", __FILE__, __LINE__);            \
        }                                                         \
        fflush(stdout);                                           \
    } while (0)

static int near(double a, double b, double tol) __attribute__((unused));
static int near(double a, double b, double tol) { return fabs(a - b) <= tol * fmax(1.0, fabs(b)); }

#endif
