/* commands.h — the command language: one parser for the TUI command line, `--commands FILE` in
 * headless runs, and replay.
 *
 *   pause | resume | quit | help | snapshot | eval
 *   step [N]                       run N steps (default 1) while paused
 *   set tau|lr|cf|alpha|beta|noise|bias-rate VALUE
 *   anneal KIND [TAU0|now [TAU1]] [s=S] [c=C] [min=T] [every=N] [gamma=G]
 *          KIND: const linear cosine exp sigmoid step; the new schedule runs from the current
 *          step to the end of training; `now` (or no TAU0) continues from the current tau
 *
 * Command files hold one command per line, each prefixed `at STEP` (applied when STEP steps
 * have been completed); blank lines and lines starting with # are ignored. */
#ifndef ML_APP_COMMANDS_H
#define ML_APP_COMMANDS_H

#include "core/records.h"

extern const char *const command_words[];   /* NULL-terminated */
extern const char *const param_words[];     /* NULL-terminated, index = CmdParam */
extern const char *const schedule_words[];  /* NULL-terminated */

/* Parses one command. Returns 0, or -1 with a one-line message in err. */
int command_parse(const char *line, TrainerCmd *cmd, char *err, size_t errn);

typedef struct {
    long step;
    TrainerCmd cmd;
} ScheduledCmd;

/* Reads a command file. On success *out (malloc'd, sorted by step, stable) and *n are set.
 * Errors name the file and line. */
int command_file_read(const char *path, ScheduledCmd **out, int *n, char *err, size_t errn);

#endif
