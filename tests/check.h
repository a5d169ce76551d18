/* check.h — the check() helper shared by the dataset tests (header-only): prints one
 * "ok  " / "FAIL" line per check and counts them in n_checks / n_failed. */
#ifndef ML_TEST_CHECK_H
#define ML_TEST_CHECK_H

#include <stdarg.h>
#include <stdio.h>

static int n_checks, n_failed;

static int check(int ok, const char *fmt, ...) __attribute__((format(printf, 2, 3), unused));
static int check(int ok, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    printf("%s ", ok ? "ok  " : "FAIL");
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    n_checks++;
    if (!ok) n_failed++;
    return ok;
}

#endif
