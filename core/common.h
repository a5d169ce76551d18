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
#define ML_ASSERT(x) do { if (!(x)) ml_abort(__FILE__, __LINE__, #x); } while (0)

/* 64-byte aligned, zeroed allocation (NULL on failure) and its matching free. */
void *ml_alloc(size_t bytes);
void ml_free(void *p);

/* Monotonic wall clock in seconds. */
double ml_now(void);

#endif
