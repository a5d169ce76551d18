/* notify.h — alerts (`--notify CMD`): a run tells the outside world when its routing collapses,
 * a warning opens, an expert dies, the loss goes NaN, or the run ends. CMD runs through /bin/sh
 * as a child in its own process group with MOELAB_EVENT, MOELAB_SESSION, MOELAB_STEP and
 * MOELAB_TEXT in its environment; training never waits for it: children are reaped at the next
 * step record, one that outlives --notify-timeout is killed (SIGKILL to its group), and every exit
 * status is logged. At most one notification an episode: a collapse (or warning) alert is sent when
 * the first view turns red (yellow) and not again until the run's alarm has dropped below that
 * level; each expert death is its own alert. The child's stdout and stderr go to SESSION/notify.log
 * (/dev/null without a session), stdin is /dev/null, and it inherits no other descriptor; a SIGINT
 * or SIGTERM during notify_poll(wait = 1) kills the children and ends the wait. Launch-time only: the option is not stored in the session's command line, so a
 * resume, a replay, a commands file or the socket never run it. */
#ifndef ML_APP_NOTIFY_H
#define ML_APP_NOTIFY_H

#include "core/records.h"

#include <sys/types.h>

#define NOTIFY_MAX_KIDS 16

typedef enum { NOTIFY_COLLAPSE, NOTIFY_WARNING, NOTIFY_DEATH, NOTIFY_NAN, NOTIFY_FINISHED, NOTIFY_FAILED, NOTIFY_N } NotifyEvent;

typedef struct {
    pid_t pid;
    double t0;
    int ev; /* NotifyEvent */
    long step;
} NotifyKid;

typedef struct {
    const char *cmd;    /* NULL or "": off */
    double timeout;     /* seconds a notification may run before it is killed */
    const char *session; /* the session folder ("" for --no-session) */
    NotifyKid kid[NOTIFY_MAX_KIDS];
    int nkid;
    long last_step[NOTIFY_N]; /* the step of the kind's latest notification (-1: none) */
    int open[NOTIFY_N];       /* collapse, warning: notified, and the run's alarm has not dropped below
                               * that level since (one alert per episode, whichever view opened it) */
    int sent, killed, failed; /* counters (tests, the end-of-run line) */
    /* where the outcome lines go besides ml_log (the session's event log); may be NULL */
    void (*log)(void *user, long step, const char *text);
    void *user;
} Notifier;

/* "collapse", "warning", "expert-death", "nan", "finished", "failed" */
const char *notify_event_name(int ev);
void notify_init(Notifier *n, const char *cmd, double timeout, const char *session);
/* The event a trainer event stands for, or -1 (commands, epochs, revivals, checkpoints). */
int notify_event_of(const TrainerEvent *e);
/* Runs the command for event ev at step (text: one line, what happened). 0 if it started or was
 * a repeat of the same kind at the same step (an expert death never is: each is sent), -1 if it
 * could not start (logged). */
int notify_send(Notifier *n, int ev, long step, const char *text);
/* notify_send for a trainer event that stands for one; others are ignored. */
void notify_trainer_event(Notifier *n, const TrainerEvent *e);
/* The run's alarm level now (StepRecord.alarm: the most severe of any layer and view): a level
 * below red re-arms the collapse alert, below yellow the warning alert. */
void notify_alarm(Notifier *n, int level);
/* Reaps finished children and kills those past the timeout; wait = 1 waits (up to the timeout)
 * for all of them, as a run that ends does: a SIGINT or SIGTERM meanwhile kills them all (logged)
 * and returns, then is passed to the handler that was installed before. */
void notify_poll(Notifier *n, int wait);

#endif
