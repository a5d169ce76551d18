/* tui.h — the live training screen (`moelab train` on a terminal).
 *
 * tui_run takes an initialised Trainer and runs it on a trainer thread while the calling (UI)
 * thread owns ncurses and readline (README "The live screen"): panels with curves, the class x expert
 * heat map, expert load, the temperature plan, routing scalars, status bar, log, and a readline
 * command line speaking the command language of app/commands.h.
 *
 * The session writer (the only HDF5 user) is called ON THE TRAINER THREAD, inside the training
 * loop (core/trainer_loop.c trainer_run), where the model is consistent. */
#ifndef ML_APP_TUI_H
#define ML_APP_TUI_H

#include "app/cli/commands.h"
#include "core/trainer.h"
#include "datasets/dataset.h"
#include "app/cli/options.h"
#include "app/run/runsession.h"
#include "sessions/history.h"

typedef struct TuiHooks {
    /* The session writer's part of the loop's hooks (runsession_hooks): on_step, on_eval,
     * on_event, checkpoint and the checkpoint periods, called ON THE TRAINER THREAD; the worker
     * supplies the command source, the stop flag and the state (tui_worker.c). */
    TrainHooks sink;
    RunSession *rs; /* closed with the run's status when it ends (NULL: no session) */
    /* session folder shown in the status bar ("" or NULL: none); read by the UI thread */
    const char *session;
    /* commands to apply at their steps (sorted by step; copied by tui_run; ncmds may be 0).
     * When cmds is NULL, tui_run reads o->commands (`--commands FILE`) itself. Pass the caller's
     * already-read (and, for a resumed run, filtered) list to avoid reading the file twice. */
    const ScheduledCmd *cmds;
    int ncmds;
    /* the run's control socket (app/control.h) in this folder while the trainer runs (NULL or "":
     * none) */
    const char *control_dir;
    /* a resumed run: its history before the resume, shown in the panels from the start (NULL:
     * none). Steps after the resume step are not shown from it. */
    const SessionHistory *history;
} TuiHooks;

/* Runs the live screen until the run ends and the user leaves, or the user quits. `t` must be
 * initialised (trainer_init) and is trained from its current state; `ds` is the dataset it
 * trains on (class names); scheduled commands (hooks->cmds, else o->commands) are applied at
 * their steps as in headless runs.
 * Returns the process exit status: 0 (finished, or quit by the user), 1 (a run-time failure, or
 * the terminal could not be set up), 2 (bad --commands file), 130 / 143 (SIGINT / SIGTERM). */
int tui_run(const AppOptions *o, const Dataset *ds, Trainer *t, TuiHooks *hooks);

#endif
