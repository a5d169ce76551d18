/* tui_worker.h — the trainer thread of the live screen and the queues between it and the UI.
 *
 * The worker thread alone touches the Trainer (and calls the TuiHooks). Between two steps it
 * applies the commands queued by the UI (mutex + condvar; it blocks on the condvar while paused),
 * runs a step, evaluates at each epoch end, and publishes immutable copies of its records into
 * bounded queues: StepRecords (the oldest are dropped if the UI falls behind), EvalRecords (with
 * their class x expert counts deep-copied; the t-SNE arrays are not copied) and events (applied
 * or failed commands with the tau plan after them, log lines, NaN pauses). After publishing it
 * writes one byte to the UI's wake pipe, only if the UI has drained since the last byte, so a
 * burst of records costs one wake-up. The UI copies everything out with worker_drain. */
#ifndef ML_APP_TUI_WORKER_H
#define ML_APP_TUI_WORKER_H

#include <pthread.h>
#include <stdatomic.h>

#include "app/cli/commands.h"
#include "app/steer/control.h"
#include "app/live/tui.h"

#define WORKER_STEPQ 4096 /* StepRecords buffered for the UI */
#define WORKER_EVALQ 8    /* EvalRecords buffered for the UI */
#define WORKER_EVQ 256    /* events buffered for the UI */
#define WORKER_CMDQ 64    /* commands waiting for a step boundary */

typedef enum {
    WEV_APPLIED, /* a command took effect (text = its normalised form) */
    WEV_FAILED,  /* a command was rejected by the trainer (text = message) */
    WEV_INFO,    /* log lines (core ml_log, notes) */
    WEV_WARN,
    WEV_ERROR,
    WEV_NUMERIC, /* a NaN/inf loss paused the run (text = message) */
    WEV_EPOCH,   /* an evaluation finished (text = the epoch line) */
} WorkerEventKind;

typedef struct {
    WorkerEventKind kind;
    long step;   /* steps completed when it happened */
    double wall; /* seconds since the Unix epoch */
    CmdKind cmd; /* WEV_APPLIED / WEV_FAILED */
    char text[384];
    int has_plan; /* set/anneal: the temperature plan after the command */
    TauPlan plan;
    int layer; /* has_plan: the routed layer whose plan it is (TrainerEvent.layer; -1: every layer) */
} WorkerEvent;

typedef struct {
    TrainerState run; /* the loop's state (step, epoch, paused, steps left, NaN pause, times) */
    int stop_requested;
    int waiting;        /* blocked on the condvar right now */
    int done;           /* the thread has finished (the session is closed) */
    char status[32];    /* "finished", "interrupted", "failed" once done */
    long steps_dropped; /* StepRecords dropped because the UI fell behind */
} WorkerState;

typedef struct {
    Trainer *t;
    const TuiHooks *hooks;
    pthread_t thread;
    int started;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int wake_fd; /* write end of the UI's non-blocking wake pipe */
    atomic_int wake_pending;
    /* UI -> trainer */
    TrainerCmd cmdq[WORKER_CMDQ];
    int cq_head, cq_n;
    ScheduledCmd *sched; /* --commands FILE (owned), sorted by step */
    int nsched, next_sched;
    /* trainer -> UI */
    StepRecord *sq; /* (WORKER_STEPQ) */
    int sq_head, sq_n;
    EvalRecord eq[WORKER_EVALQ];
    int *eq_counts; /* (WORKER_EVALQ, ce_size) deep copies of class_expert and each layer's, packed */
    int ce_size;    /* classes * (top-level experts + every routed layer's experts) */
    int eq_head, eq_n;
    WorkerEvent *evq; /* (WORKER_EVQ) */
    int ev_head, ev_n;
    WorkerState st;
    ControlServer *ctl; /* the run's control socket (NULL: none); stopped when the run ends */
} TuiWorker;

/* What one drain hands to the UI (buffers sized for the worker's queues). */
typedef struct {
    StepRecord *steps;
    int nsteps;
    EvalRecord evals[WORKER_EVALQ];
    int *eval_counts; /* (WORKER_EVALQ, ce_size) */
    int nevals;
    WorkerEvent *events;
    int nevents;
    WorkerState st;
} WorkerDrain;

/* Allocates the queues and, when hooks->control_dir is set, starts the run's control socket
 * (its commands go through worker_send, like the screen's; a failure is a warning in the log).
 * sched (may be NULL) is taken over. 0, or -1 (out of memory). */
int worker_init(TuiWorker *w, Trainer *t, const TuiHooks *hooks, int wake_fd, ScheduledCmd *sched, int nsched);
/* Starts the thread with every signal blocked in it. 0, or -1. */
int worker_start(TuiWorker *w);
/* Queues a command for the next step boundary (origin CMD_FROM_SCREEN unless set). 0, or -1 if
 * the queue is full. Any thread. */
int worker_send(TuiWorker *w, const TrainerCmd *c);
/* Asks the thread to stop at the next step boundary (status "interrupted"); wakes it if paused. */
void worker_request_stop(TuiWorker *w);
/* Waits for the thread (after it set done). */
void worker_join(TuiWorker *w);
void worker_free(TuiWorker *w);
/* Thread-safe log line from any thread (the core's ml_log sink in the live screen). */
void worker_log(TuiWorker *w, int level, const char *msg);

int worker_drain_init(WorkerDrain *d, const TuiWorker *w);
void worker_drain_free(WorkerDrain *d);
/* Moves everything published since the last drain into d and copies the state. UI thread. */
void worker_drain(TuiWorker *w, WorkerDrain *d);

#endif
