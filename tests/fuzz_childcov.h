/* fuzz_childcov.h — for fuzz targets whose code under test runs in a forked child
 * (ml_run_isolated: the protected loaders of tests/fuzz_h5.c and tests/fuzz_session.c).
 * libFuzzer is guided by the coverage counters of this process, but on a protected call the work
 * happens in the child. The child's counters (the inline 8-bit counters clang places between the
 * linker symbols below) are copied to shared memory when its work returns
 * (ml_isolated_set_child_hook) and merged here: cov_begin() before the protected call,
 * cov_merge() after it; a child that crashes reports none. With FUZZ_STANDALONE both do nothing.
 * No function of this header (or of the including file: see NO_COV) is instrumented: the coverage
 * pass would add its own declarations of these symbols, clash with these and register no
 * counters. */
#ifndef MOELAB_FUZZ_CHILDCOV_H
#define MOELAB_FUZZ_CHILDCOV_H

#include <stdint.h>
#include <string.h>

#include "core/common.h"

#ifndef FUZZ_STANDALONE
#include <sys/mman.h>

#define NO_COV __attribute__((no_sanitize("coverage")))
extern uint8_t __start___sancov_cntrs[] __attribute__((weak));
extern uint8_t __stop___sancov_cntrs[] __attribute__((weak));
#define cov_start __start___sancov_cntrs
#define cov_stop __stop___sancov_cntrs
static uint8_t *child_cov;
static size_t n_cov;

NO_COV static void cov_to_parent(void) { memcpy(child_cov, cov_start, n_cov); }

NO_COV static void cov_setup(void) {
    static int done;
    if (done) return;
    done = 1;
    if (!cov_start || cov_stop <= cov_start) return;
    n_cov = (size_t)(cov_stop - cov_start);
    void *m = mmap(NULL, n_cov, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return;
    child_cov = m;
    ml_isolated_set_child_hook(cov_to_parent);
}

NO_COV static void cov_begin(void) {
    cov_setup();
    if (child_cov) memset(child_cov, 0, n_cov);
}

NO_COV static void cov_merge(void) {
    for (size_t i = 0; child_cov && i < n_cov; i++)
        if (child_cov[i] > cov_start[i]) cov_start[i] = child_cov[i];
}
#else
#define NO_COV
static void cov_begin(void) {}
static void cov_merge(void) {}
#endif

#endif
