/* runsession.h — a training run's session on disk, shared by the headless runner and the TUI:
 * creates (or, for --resume, reopens) DIR/live.h5 and is a consumer of the training loop
 * (runsession_hooks): it appends every record and logged event and writes the checkpoints the
 * loop asks for. All calls happen on the thread that runs the loop (it alone touches HDF5). A
 * write error is reported once through ml_log and the run continues: nothing in memory is lost. */
#ifndef ML_APP_RUNSESSION_H
#define ML_APP_RUNSESSION_H

#include "core/trainer.h"
#include "app/cli/options.h"
#include "app/run/notify.h"
#include "sessions/session.h"

typedef struct {
    int active; /* a session is open */
    SessionWriter w;
    char dir[APP_PATH_MAX + 64];
    char session_id[40];
    SessionLock lock;
        /* one writer per session folder, held from open to finish */ /* /run@session_id, written into every checkpoint ("" for old sessions) */
    int ckpt_every;  /* epochs between checkpoints (0: only at the end) */
    long ckpt_steps; /* steps between checkpoints (0: off) */
    int keep;        /* checkpoints kept */
    double last_flush;
    int failed; /* a live.h5 write failed (reported once): nothing more is written */
    int ckpt_failed;     /* checkpoints that could not be written (each reported, skipped; later ones tried) */
    long ckpt_last_fail; /* step of the latest failed one (-1: none) */
    int ckpt_last_ok;    /* 1: the latest checkpoint attempt succeeded */
    Notifier notify;     /* --notify: alerts (off when its command is empty) */
    long last_step;      /* steps completed at the latest step record */
    const Trainer *trainer; /* the run's trainer (runsession_open): its step is the final one at finish */
} RunSession;

/* Joins argv into one shell-quoted command line. */
void command_line_join(char *buf, size_t n, int argc, char **argv);
/* The same into a malloc'd string of the size it needs (NULL when out of memory). */
char *command_line_join_alloc(int argc, char **argv);
/* Splits a command line written by command_line_join back into argv (malloc'd strings and
 * array; free with argv_free). Returns argc, or -1 on unbalanced quotes. */
int command_line_split(const char *line, char ***argv);
void argv_free(int argc, char **argv);
/* Resume and replay: the launch settings whose defaults have changed, as the session in dir was
 * written with, from its config JSON into o: the gate renormalisation (model.head.renorm;
 * sessions from before --renorm auto stored 1, on), the selection noise (model.head.noise), the
 * balancing-loss weight (model.head.alpha) and the temperature schedule (tau.*), which a command
 * line that did not give them took from the defaults of its day. Without a readable value o is
 * untouched. */
void runsession_stored_config(const char *dir, AppOptions *o);
/* The number of processes the session in dir trained on (config_json "ranks"; 1 when absent). */
int runsession_stored_ranks(const char *dir);
/* An extension (--resume DIR --epochs N) that stopped after live.h5 took it and before the
 * checkpoint of the extended run: DIR's /run has a launch_command_line and its newest valid
 * checkpoint is of a run of another length than `epochs` (the stored command line's). Returns
 * that checkpoint's epochs, or 0 (not such a session, or nothing to tell). */
int runsession_interrupted_extension(const char *dir, int epochs);

/* A session with no checkpoint file (no DIR/ckpt-<step>.h5: killed, or a rank died, before its first)
 * has nothing for --resume to continue from: writes into buf the advice that is true for it, "no
 * checkpoint was written: start it again with `rm DIR/live.h5 && moelab train ...`" (its stored
 * command line, with `mpirun -np N` for a run on N ranks), and returns 1. Returns 0 (buf "") when DIR holds a
 * checkpoint file or cannot be read. */
int runsession_restart_advice(const char *dir, char *buf, size_t n);

/* The folder new sessions go under and `moelab browse` lists by default: $MOELAB_SESSIONS when
 * set and not empty, else "runs" (relative to the current directory; never the source tree's
 * sessions/ folder). */
const char *sessions_root(void);

/* The event of every resume: "resume from ckpt-S.h5" at the step it continues from. */
#define RUNSESSION_RESUME_EVENT "resume from"
/* The event of `--resume DIR --epochs N`: "extend --epochs N (was M)" at the resume step. */
#define RUNSESSION_EXTEND_EVENT "extend --epochs"

/* Opens the session of a run: o->session (or a new ROOT/<dataset>-<head>-<time> folder, ROOT =
 * sessions_root())
 * unless o->no_session; commands_text (the --commands file, may be NULL) is stored with it so that
 * a resume needs no file. resume = 1: restores the newest valid checkpoint of o->session into t
 * and reopens live.h5 for appending; with o->extend_epochs it then extends the run to that many
 * epochs (trainer_extend; /run through session_open_append_ext, with the resume's other writes),
 * logs RUNSESSION_EXTEND_EVENT and writes a checkpoint of the extended run at once. Returns 0, or
 * -1 with ml_last_error() set. */
int runsession_open(RunSession *rs, const AppOptions *o, Trainer *t, const char *cmdline, const char *commands_text,
                    int resume);
/* The session's part of the loop's hooks: on_step, on_eval, on_event (events marked `logged` go
 * to the event log), checkpoint and the checkpoint periods; user = rs. With no session open
 * (--no-session) the record hooks are no-ops and checkpoint is NULL. */
void runsession_hooks(RunSession *rs, TrainHooks *h);
/* One line in the event log (e.g. "resume from ckpt-240.h5"). */
void runsession_event(RunSession *rs, long step, const char *text);
/* Closes live.h5 with status ("finished", "interrupted", "failed"); a finished or failed run sends
 * its --notify alert and waits (at most --notify-timeout) for the notifications still running. */
void runsession_finish(RunSession *rs, const char *status);

#endif
