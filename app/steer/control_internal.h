/* control_internal.h — the control server's state (app/steer/control.c), shared with the tests
 * that play a client in-process (tests/test_control.c, tests/fuzz_control.c: no sockets, no
 * threads). Nothing else includes it. */
#ifndef ML_APP_CONTROL_INTERNAL_H
#define ML_APP_CONTROL_INTERNAL_H

#include <pthread.h>
#include <stddef.h>
#include <sys/types.h>

#include "app/steer/control.h"

#define OUT_MAX 8192 /* reply bytes waiting for a slow reader before it is dropped */

typedef struct {
    int fd; /* -1: free slot */
    char in[CONTROL_LINE_MAX + 2];
    size_t inlen;
    char out[OUT_MAX];
    size_t outlen;
    long awaiting; /* tag of the request in flight (0: none) */
    int closing;   /* close once out is written */
    int read_only; /* said `readonly`: commands of the command language are refused */
    double last;   /* monotonic seconds: accepted, or its last complete line */
    double partial; /* monotonic seconds since which it holds an incomplete line (0: none) */
} ControlClient;

typedef struct {
    long step, total;
    int epoch, epochs, paused, numeric;
    double tau, loss, acc, test_acc, img_s;
    int collapsed; /* a red collapse in any routed layer, at the last step record */
    int alarm;     /* AlarmLevel of the last step record */
    char alarm_text[256]; /* its message (collapse_format: the banner's and the log's) */
    int nlayers;   /* routed layers (0: a dense run) */
    char layer[REC_MAX_LAYERS][REC_LAYER_NAME];
    double layer_tau[REC_MAX_LAYERS]; /* each layer's temperature at the last step record */
    int layer_collapsed[REC_MAX_LAYERS];
} Status;

struct ControlServer {
    ControlOps ops;
    char dir[4096];
    char path[4200];
    dev_t dev;
    ino_t ino;
    int lfd;
    int wake[2];
    pthread_t th;
    int started;
    pthread_mutex_t mu; /* clients, queue, status, pending */
    pthread_cond_t cv;  /* the queue got a command (control_take) */
    int stop;
    ControlClient cl[CONTROL_MAX_CLIENTS];
    long next_tag;
    long pending; /* tag handed to the trainer whose result is the next result event */
    TrainerCmd q[CONTROL_QUEUE];
    int qh, qn;
    Status st;
    /* "closed the one idle" lines: at most one per CONTROL_EVICT_LOG_SEC, the others counted into
     * the next (a reconnect flood printed thousands a second) */
    long evicted;          /* connections closed to make room, in all */
    long evict_unlogged;   /* of them since the last line */
    double evict_logged;   /* mono_now() of the last line */
};
#define CONTROL_EVICT_LOG_SEC 10.0

/* One client's complete lines: each is parsed and queued or answered (mu held). */
void control_client_lines_locked(ControlServer *s, ControlClient *c);
/* The client waiting for the result of request `tag`, or NULL (mu held). */
ControlClient *control_awaiting_locked(ControlServer *s, long tag);
/* Appends one reply line to c's output (mu held). */
void control_reply_locked(ControlClient *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
