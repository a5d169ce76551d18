/* tui.h — the live training screen (`moelab train` on a terminal).
 *
 * tui_run takes an initialised Trainer and runs it on a trainer thread while the calling (UI)
 * thread owns ncurses and readline (STYLE.md section 3): panels with curves, the class x expert
 * heat map, expert load, the temperature plan, routing scalars, status bar, log, and a readline
 * command line speaking the command language of app/commands.h.
 *
 * TuiHooks are called ON THE TRAINER THREAD, between steps, where the model is consistent: the
 * session writer (the only HDF5 user) hangs there. Every callback may be NULL. */
#ifndef ML_APP_TUI_H
#define ML_APP_TUI_H

#include "commands.h"
#include "core/trainer.h"
#include "datasets/dataset.h"
#include "options.h"

typedef struct TuiHooks {
    /* every published StepRecord (every log_every steps) */
    void (*on_step)(const StepRecord *r, void *user);
    /* every evaluation: after each epoch and for the `eval` command (arrays valid during the call) */
    void (*on_eval)(const EvalRecord *r, void *user);
    /* every command the trainer applied, with the step it took effect at, the wall-clock time
     * (seconds since the Unix epoch) and its normalised text (e.g. "set tau 0.3") */
    void (*on_event)(long step, double wall, const char *text, void *user);
    /* the `snapshot` command; returns ML_OK or an error (ml_fail message shown in the log).
     * Without it, `snapshot` only logs that there is no session. */
    ml_status (*on_snapshot)(Trainer *t, void *user);
    /* once, when the run ends: status "finished", "interrupted" (q, quit, Ctrl-C, SIGTERM) or
     * "failed"; a final checkpoint belongs here */
    void (*on_finish)(Trainer *t, const char *status, void *user);
    /* at every step boundary, after the queued commands were applied and before the step (e.g.
     * periodic checkpoints); non-zero stops the run ("interrupted") */
    int (*before_step)(Trainer *t, void *user);
    void *user;
    /* session folder shown in the status bar ("" or NULL: none); read by the UI thread */
    const char *session;
    /* commands to apply at their steps (sorted by step; copied by tui_run; ncmds may be 0).
     * When cmds is NULL, tui_run reads o->commands (`--commands FILE`) itself. Pass the caller's
     * already-read (and, for a resumed run, filtered) list to avoid reading the file twice. */
    const ScheduledCmd *cmds;
    int ncmds;
} TuiHooks;

/* Runs the live screen until the run ends and the user leaves, or the user quits. `t` must be
 * initialised (trainer_init) and is trained from its current state; `ds` is the dataset it
 * trains on (class names); scheduled commands (hooks->cmds, else o->commands) are applied at
 * their steps as in headless runs.
 * Returns the process exit status: 0 (finished, or quit by the user), 1 (a run-time failure, or
 * the terminal could not be set up), 2 (bad --commands file), 130 / 143 (SIGINT / SIGTERM). */
int tui_run(const AppOptions *o, const Dataset *ds, Trainer *t, TuiHooks *hooks);

#endif
