/* common.c — status messages, logging, the abort hook, aligned allocation and the clock.
 *
 * Error messages live in a thread-local buffer so that concurrent threads (trainer, UI) never
 * see each other's messages. The log sink is guarded by a mutex so that lines from different
 * threads are never interleaved and the sink can be swapped while others log. ml_run_isolated
 * runs a function in a forked child and reports how the child ended. */
#define _POSIX_C_SOURCE 200809L

#include "common.h"

#include <errno.h>
#include <omp.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define ML_MSG_MAX 1024
#define ML_ALIGN 64

static _Thread_local char ml_err_buf[ML_MSG_MAX];

ml_status ml_fail(ml_status st, const char *fmt, ...) {
    /* Format into a scratch buffer first: the arguments may include ml_last_error() itself
     * (e.g. to prefix a lower-level message), and vsnprintf must not write over its input. */
    char tmp[ML_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0) snprintf(tmp, sizeof tmp, "(unformattable error message)");
    /* Keep the message on one line. */
    for (char *p = tmp; *p; p++)
        if (*p == '\n' || *p == '\r') *p = ' ';
    memcpy(ml_err_buf, tmp, sizeof ml_err_buf);
    return st;
}

const char *ml_last_error(void) { return ml_err_buf; }

/* ---- logging */

static void ml_log_default(int level, const char *msg, void *user) {
    (void)user;
    const char *tag = level >= 2 ? "error" : level == 1 ? "warning" : "info";
    fprintf(stderr, "moelab: %s: %s\n", tag, msg);
    fflush(stderr);
}

static pthread_mutex_t ml_log_mutex = PTHREAD_MUTEX_INITIALIZER;
static ml_log_fn ml_log_sink = ml_log_default;
static void *ml_log_user = NULL;

void ml_log_set(ml_log_fn fn, void *user) {
    pthread_mutex_lock(&ml_log_mutex);
    ml_log_sink = fn ? fn : ml_log_default;
    ml_log_user = fn ? user : NULL;
    pthread_mutex_unlock(&ml_log_mutex);
}

void ml_log(int level, const char *fmt, ...) {
    char msg[ML_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (n < 0) snprintf(msg, sizeof msg, "(unformattable log message)");
    pthread_mutex_lock(&ml_log_mutex);
    ml_log_sink(level, msg, ml_log_user);
    pthread_mutex_unlock(&ml_log_mutex);
}

/* ---- abort hook */

static _Atomic(ml_abort_fn) ml_abort_hook; /* zero-initialised: no hook */

void ml_abort_set(ml_abort_fn fn) { atomic_store(&ml_abort_hook, fn); }

void ml_abort(const char *file, int line, const char *expr) {
    ml_abort_fn fn = atomic_load(&ml_abort_hook);
    if (fn) {
        fn(file, line, expr);
    } else {
        fprintf(stderr, "moelab: internal error: %s:%d: %s\n", file ? file : "?", line, expr ? expr : "?");
        fflush(stderr);
    }
    abort();
}

/* ---- memory */

void *ml_alloc(size_t bytes) {
    /* Round up to whole cache lines (and give size 0 a valid, unique allocation) so vector
     * loops may touch the tail of the last line without leaving the allocation. */
    if (bytes > SIZE_MAX - ML_ALIGN) return NULL;
    size_t size = bytes == 0 ? ML_ALIGN : (bytes + ML_ALIGN - 1) / ML_ALIGN * ML_ALIGN;
    void *p = NULL;
    if (posix_memalign(&p, ML_ALIGN, size) != 0) return NULL;
    memset(p, 0, size);
    return p;
}

void ml_free(void *p) { free(p); }

/* ---- clock */

_Thread_local int ml_gemm_timing;
_Thread_local double ml_gemm_seconds;

double ml_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int ml_par_items_worth(int n) {
    const int t = omp_get_max_threads();
    return t > 1 && n >= t && !omp_in_parallel();
}

void ml_par_items(int n, const int *order, void (*fn)(void *ctx, int i), void *ctx) {
    const int timing = ml_gemm_timing;
    const double t0 = timing ? ml_now() : 0.0;
    double gemm = 0.0, busy = 0.0;
#pragma omp parallel reduction(+ : gemm, busy)
    {
        const int was = ml_gemm_timing;
        const double g0 = ml_gemm_seconds, b0 = timing ? ml_now() : 0.0;
        ml_gemm_timing = timing;
#pragma omp for schedule(dynamic, 1) nowait
        for (int i = 0; i < n; i++) fn(ctx, order ? order[i] : i);
        if (timing) {
            busy += ml_now() - b0;
            gemm += ml_gemm_seconds - g0;
        }
        ml_gemm_seconds = g0; /* each thread's own tally is left as it was */
        ml_gemm_timing = was;
    }
    if (timing && busy > 0.0) ml_gemm_seconds += (ml_now() - t0) * (gemm / busy);
}

/* ---- isolated child processes */

/* Provided by the sanitizer runtimes (ASan, UBSan, libFuzzer builds); absent otherwise. */
extern void __sanitizer_set_death_callback(void (*callback)(void)) __attribute__((weak));

typedef struct {
    int32_t status;
    char msg[sizeof(((MlIsolated *)0)->msg)];
} IsolatedReport;

static void (*_Atomic isolated_child_hook)(void);

void ml_isolated_set_child_hook(void (*hook)(void)) { atomic_store(&isolated_child_hook, hook); }

static int write_all(int fd, const void *buf, size_t n) {
    const char *p = buf;
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

static void __attribute__((noreturn)) isolated_child(int wfd, ml_status (*fn)(void *), void *arg) {
    /* Nothing from the child may reach the terminal (a TUI's screen, a fuzzer's log). */
    int devnull = open("/dev/null", O_RDWR);
    if (devnull >= 0) {
        dup2(devnull, STDOUT_FILENO);
        dup2(devnull, STDERR_FILENO);
        if (devnull > STDERR_FILENO) close(devnull);
    }
    /* A crash here is the parent's to report: the handlers the parent installed (a TUI's terminal
     * restorer, libFuzzer's crash-file writer, which would save the parent's current input as a
     * crash of its own) must not run in the child. The kernel's default action kills the child
     * with the signal, which is what the parent reads. */
    const int crash_signals[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT, SIGTRAP, SIGSYS};
    for (size_t i = 0; i < sizeof crash_signals / sizeof crash_signals[0]; i++) signal(crash_signals[i], SIG_DFL);
    signal(SIGPIPE, SIG_DFL);
    if (__sanitizer_set_death_callback) __sanitizer_set_death_callback(NULL);
    IsolatedReport rep;
    memset(&rep, 0, sizeof rep);
    ml_err_buf[0] = 0;
    ml_status st = fn(arg);
    void (*hook)(void) = atomic_load(&isolated_child_hook);
    if (hook) hook();
    rep.status = st;
    if (st != ML_OK) {
        size_t l = strnlen(ml_err_buf, sizeof rep.msg - 1);
        memcpy(rep.msg, ml_err_buf, l);
        rep.msg[l] = 0;
    }
    _exit(write_all(wfd, &rep, sizeof rep) == 0 ? (st == ML_OK ? 0 : 1) : 2);
}

ml_isolated_outcome ml_run_isolated(ml_status (*fn)(void *arg), void *arg, int timeout_ms, MlIsolated *res) {
    memset(res, 0, sizeof *res);
    res->exit_code = -1;
    int fd[2];
    if (pipe(fd) != 0) {
        snprintf(res->msg, sizeof res->msg, "pipe: %s", strerror(errno));
        return res->outcome = ML_ISOLATED_NO_CHILD;
    }
    /* another thread's fork+exec must not keep the write end open (the parent waits for EOF) */
    fcntl(fd[0], F_SETFD, FD_CLOEXEC);
    fcntl(fd[1], F_SETFD, FD_CLOEXEC);
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(res->msg, sizeof res->msg, "fork: %s", strerror(errno));
        close(fd[0]);
        close(fd[1]);
        return res->outcome = ML_ISOLATED_NO_CHILD;
    }
    if (pid == 0) {
        close(fd[0]);
        isolated_child(fd[1], fn, arg);
    }
    close(fd[1]);
    IsolatedReport rep;
    size_t got = 0;
    int timed_out = 0;
    const double t0 = ml_now();
    for (;;) {
        int wait_ms = -1;
        if (timeout_ms > 0) {
            wait_ms = timeout_ms - (int)((ml_now() - t0) * 1000.0);
            if (wait_ms <= 0) {
                timed_out = 1;
                break;
            }
        }
        struct pollfd pf = {.fd = fd[0], .events = POLLIN};
        int pr = poll(&pf, 1, wait_ms);
        if (pr < 0 && errno == EINTR) continue;
        if (pr < 0) break;
        if (pr == 0) continue; /* the deadline is checked at the top */
        ssize_t r = read(fd[0], (char *)&rep + got, sizeof rep - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0 || (got += (size_t)r) >= sizeof rep)
            break; /* EOF (the child ended), an error, or the whole report */
    }
    close(fd[0]);
    if (timed_out) kill(pid, SIGKILL);
    int wst = 0;
    pid_t w;
    while ((w = waitpid(pid, &wst, 0)) < 0 && errno == EINTR) {}
    if (timed_out) return res->outcome = ML_ISOLATED_TIMEOUT;
    if (w == pid && WIFSIGNALED(wst)) {
        res->signal = WTERMSIG(wst);
        return res->outcome = ML_ISOLATED_SIGNALED;
    }
    /* (w < 0: SIGCHLD ignored by the application, the status is gone; the report decides) */
    int code = w == pid && WIFEXITED(wst) ? WEXITSTATUS(wst) : -1;
    if (got == sizeof rep && (code < 0 || code == (rep.status == ML_OK ? 0 : 1))) {
        res->status = (ml_status)rep.status;
        if (rep.status != ML_OK) {
            memcpy(res->msg, rep.msg, sizeof res->msg);
            res->msg[sizeof res->msg - 1] = 0;
        }
        return res->outcome = rep.status == ML_OK ? ML_ISOLATED_OK : ML_ISOLATED_FAILED;
    }
    res->exit_code = code;
    return res->outcome = ML_ISOLATED_EXITED;
}
