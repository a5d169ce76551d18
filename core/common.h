/* common.h — status codes, error messages, assertions and logging for every moelab module.
 *
 * The core never exits and never prints: functions return an ml_status and leave a one-line,
 * thread-local message in ml_last_error(). Logging goes through a callback the application sets
 * (stderr by default, a ring buffer in the TUI). Programmer errors go through ML_ASSERT, which
 * calls an abort hook that the application may set (to restore the terminal first). */
#ifndef ML_COMMON_H
#define ML_COMMON_H

#include <stddef.h>
#include <stdint.h>

typedef enum {
    ML_OK = 0,
    ML_ERR_IO = -1,      /* a file could not be opened, read or written */
    ML_ERR_FORMAT = -2,  /* a file's contents are malformed or truncated */
    ML_ERR_ARG = -3,     /* a bad option, value or command */
    ML_ERR_NOMEM = -4,   /* an allocation failed */
    ML_ERR_NUMERIC = -5, /* NaN or inf where a finite number is required */
    ML_ERR_STATE = -6,   /* an operation that is not valid now */
} ml_status;

/* Sets the thread-local error message (printf-style) and returns `st`, so that callers can write
 * `return ml_fail(ML_ERR_IO, "%s: cannot open: %s", path, strerror(errno));`. */
ml_status ml_fail(ml_status st, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The last message set by ml_fail on this thread ("" if none). */
const char *ml_last_error(void);

/* Logging: level 0 = info, 1 = warning, 2 = error. The default sink prints to stderr. */
typedef void (*ml_log_fn)(int level, const char *msg, void *user);
void ml_log_set(ml_log_fn fn, void *user);
void ml_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Abort hook for broken invariants (a bug, never bad input). */
typedef void (*ml_abort_fn)(const char *file, int line, const char *expr);
void ml_abort_set(ml_abort_fn fn);
void ml_abort(const char *file, int line, const char *expr) __attribute__((noreturn));
#define ML_ASSERT(x)                                \
    do {                                            \
        if (!(x)) ml_abort(__FILE__, __LINE__, #x); \
    } while (0)

/* 64-byte aligned, zeroed allocation (NULL on failure) and its matching free. */
void *ml_alloc(size_t bytes);
void ml_free(void *p);

/* Monotonic wall clock in seconds. */
double ml_now(void);

/* GEMM time accounting for `moelab bench --profile`: the layer kernels call ML_SGEMM (cblas_sgemm's
 * arguments) instead of cblas_sgemm; while ml_gemm_timing is set on the calling thread, the wall
 * time inside the call is added to ml_gemm_seconds. Thread-local: OpenBLAS threads the product
 * internally, so the caller's thread sees each call whole. */
extern _Thread_local int ml_gemm_timing;
extern _Thread_local double ml_gemm_seconds;
#define ML_SGEMM(...)                             \
    do {                                          \
        if (ml_gemm_timing) {                     \
            const double ml_t0_ = ml_now();       \
            cblas_sgemm(__VA_ARGS__);             \
            ml_gemm_seconds += ml_now() - ml_t0_; \
        } else {                                  \
            cblas_sgemm(__VA_ARGS__);             \
        }                                         \
    } while (0)

/* Runs fn(ctx, order[i]) (fn(ctx, i) when order is NULL) for i in [0, n), each item whole on one
 * OpenMP thread, the items taken one at a time in the given order (put the largest first). For
 * independent products too small to thread well (a moe head's experts on ~32 rows each): BLAS
 * calls inside run single-threaded, so an item's results do not depend on the thread count.
 * Under `bench --profile` the loop's wall time is credited to GEMM in the proportion of the
 * threads' busy time they spent inside ML_SGEMM. ml_par_items_worth says whether n items are
 * enough to keep every thread busy (and we are not already inside a parallel region). */
int ml_par_items_worth(int n);
void ml_par_items(int n, const int *order, void (*fn)(void *ctx, int i), void *ctx);

/* ---- running risky work in a child process
 *
 * ml_run_isolated(fn, arg, timeout_ms, &res) forks; the child (stdout and stderr sent to
 * /dev/null) runs fn(arg) and reports its status and ml_last_error() through a pipe, then
 * _exit()s. A crash, an abort (a sanitizer report included) or a hang of fn stays in the child:
 * the parent sees it in res. Use it for work on untrusted input that a third-party library might
 * crash on (libhdf5 on corrupted metadata); anything fn computes is lost with the child except
 * its status and message. fn must not rely on other threads (only the calling thread is copied
 * by fork) and must not use OpenMP. fork and pipe failures are reported, not worked around:
 * the caller decides whether to do the work in-process. */
typedef enum {
    ML_ISOLATED_OK = 0,   /* fn returned ML_OK */
    ML_ISOLATED_FAILED,   /* fn returned an error: res.status and res.msg are fn's */
    ML_ISOLATED_SIGNALED, /* the child died of a signal (res.signal): a crash or an abort */
    ML_ISOLATED_EXITED,   /* the child exited without reporting (res.exit_code), e.g. ASan's exit 1 */
    ML_ISOLATED_TIMEOUT,  /* no report within timeout_ms: the child was killed */
    ML_ISOLATED_NO_CHILD, /* pipe() or fork() failed (res.msg says which): fn did not run */
} ml_isolated_outcome;

typedef struct {
    ml_isolated_outcome outcome;
    ml_status status; /* fn's return value (ML_ISOLATED_OK and _FAILED) */
    int signal;       /* ML_ISOLATED_SIGNALED */
    int exit_code;    /* ML_ISOLATED_EXITED (-1 if the status could not be collected) */
    char msg[512];    /* fn's ml_last_error() (ML_ISOLATED_FAILED) or why there was no child */
} MlIsolated;

/* For test harnesses: `hook` (NULL: none) runs in every child after fn returned, before the
 * report is sent; tests/fuzz_h5.c copies the child's coverage counters to shared memory with it,
 * so that libFuzzer sees what the child executed. */
void ml_isolated_set_child_hook(void (*hook)(void));

/* Runs fn(arg) in a child process and waits at most timeout_ms (<= 0: no limit) for it;
 * returns res->outcome. The calling thread waits; the child is reaped in every case (killed
 * first on a timeout). Not async-signal-safe. */
ml_isolated_outcome ml_run_isolated(ml_status (*fn)(void *arg), void *arg, int timeout_ms, MlIsolated *res);

#endif
