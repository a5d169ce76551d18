/* common.c — status messages, logging, the abort hook, aligned allocation and the clock.
 *
 * Error messages live in a thread-local buffer so that concurrent threads (trainer, UI) never
 * see each other's messages. The log sink is guarded by a mutex so that lines from different
 * threads are never interleaved and the sink can be swapped while others log. */
#define _POSIX_C_SOURCE 200809L

#include "common.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define ML_MSG_MAX 1024
#define ML_ALIGN 64

static _Thread_local char ml_err_buf[ML_MSG_MAX];

ml_status ml_fail(ml_status st, const char *fmt, ...)
{
    /* Format into a scratch buffer first: the arguments may include ml_last_error() itself
     * (e.g. to prefix a lower-level message), and vsnprintf must not write over its input. */
    char tmp[ML_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0)
        snprintf(tmp, sizeof tmp, "(unformattable error message)");
    /* Keep the message on one line. */
    for (char *p = tmp; *p; p++)
        if (*p == '\n' || *p == '\r')
            *p = ' ';
    memcpy(ml_err_buf, tmp, sizeof ml_err_buf);
    return st;
}

const char *ml_last_error(void)
{
    return ml_err_buf;
}

/* ---- logging */

static void ml_log_default(int level, const char *msg, void *user)
{
    (void)user;
    const char *tag = level >= 2 ? "error" : level == 1 ? "warning" : "info";
    fprintf(stderr, "moelab: %s: %s\n", tag, msg);
    fflush(stderr);
}

static pthread_mutex_t ml_log_mutex = PTHREAD_MUTEX_INITIALIZER;
static ml_log_fn ml_log_sink = ml_log_default;
static void *ml_log_user = NULL;

void ml_log_set(ml_log_fn fn, void *user)
{
    pthread_mutex_lock(&ml_log_mutex);
    ml_log_sink = fn ? fn : ml_log_default;
    ml_log_user = fn ? user : NULL;
    pthread_mutex_unlock(&ml_log_mutex);
}

void ml_log(int level, const char *fmt, ...)
{
    char msg[ML_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (n < 0)
        snprintf(msg, sizeof msg, "(unformattable log message)");
    pthread_mutex_lock(&ml_log_mutex);
    ml_log_sink(level, msg, ml_log_user);
    pthread_mutex_unlock(&ml_log_mutex);
}

/* ---- abort hook */

static _Atomic(ml_abort_fn) ml_abort_hook; /* zero-initialised: no hook */

void ml_abort_set(ml_abort_fn fn)
{
    atomic_store(&ml_abort_hook, fn);
}

void ml_abort(const char *file, int line, const char *expr)
{
    ml_abort_fn fn = atomic_load(&ml_abort_hook);
    if (fn) {
        fn(file, line, expr);
    } else {
        fprintf(stderr, "moelab: internal error: %s:%d: %s\n", file ? file : "?", line,
                expr ? expr : "?");
        fflush(stderr);
    }
    abort();
}

/* ---- memory */

void *ml_alloc(size_t bytes)
{
    /* Round up to whole cache lines (and give size 0 a valid, unique allocation) so vector
     * loops may touch the tail of the last line without leaving the allocation. */
    if (bytes > SIZE_MAX - ML_ALIGN)
        return NULL;
    size_t size = bytes == 0 ? ML_ALIGN : (bytes + ML_ALIGN - 1) / ML_ALIGN * ML_ALIGN;
    void *p = NULL;
    if (posix_memalign(&p, ML_ALIGN, size) != 0)
        return NULL;
    memset(p, 0, size);
    return p;
}

void ml_free(void *p)
{
    free(p);
}

/* ---- clock */

double ml_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}
