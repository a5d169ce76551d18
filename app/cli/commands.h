/* commands.h — the command language: one parser for the TUI command line, `--commands FILE` in
 * headless runs, and replay.
 *
 *   pause | resume | quit | help | snapshot | eval
 *   step [N]                       run N steps (default 1) while paused
 *   set PARAM VALUE                PARAM: a word of CMD_PARAMS (core/params.h)
 *   anneal KIND [TAU0|now [TAU1]] [KEY=V ...]
 *          KIND: a temperature kind, KEY: an anneal key (the tables TAU_KINDS and TAU_KEYS in
 *          core/tau.h); the new schedule runs from the current step to the end of training;
 *          `now` (or no TAU0) continues from the current tau
 *   on-collapse pause | off | COMMAND[; COMMAND...]
 *          the rule applied once when the collapse flag first fires (any view): pause the run,
 *          or apply the commands (set, anneal, eval, snapshot); `off` removes it
 *
 * The words, their arguments and help lines are one table (CMD_ROWS in core/cmdtab.h).
 *
 * Command files hold one command per line, each prefixed `at STEP` (applied when STEP steps
 * have been completed); blank lines and lines starting with # are ignored. */
#ifndef ML_APP_COMMANDS_H
#define ML_APP_COMMANDS_H

#include "core/records.h"

/* Parses one command; a `#` starts a comment (the event log writes the origin as "  # socket").
 * Returns 0, or -1 with a one-line message in err. */
int command_parse(const char *line, TrainerCmd *cmd, char *err, size_t errn);

/* Parses a rule's commands "set tau 2; set alpha 0.05" into out[0..max) (origin CMD_FROM_RULE):
 * their number, or -1 with a message in err. Only set, anneal, eval and snapshot. */
int command_rule_parse(const char *text, TrainerCmd *out, int max, char *err, size_t errn);

typedef struct {
    long step;
    TrainerCmd cmd;
} ScheduledCmd;

/* Reads a command file. On success *out (malloc'd, sorted by step, stable) and *n are set.
 * Errors name the file and line. */
int command_file_read(const char *path, ScheduledCmd **out, int *n, char *err, size_t errn);
/* The text of a command file (a regular file, no NUL, at most 64 MiB) into *text (malloc'd). */
int command_file_load(const char *path, char **text, char *err, size_t errn);
/* Parses command-file text (`name` for messages). Lines of any length; a command itself is at
 * most 400 characters. Sorted by step, stable, in O(n log n). */
int command_text_parse(const char *text, const char *name, ScheduledCmd **out, int *n, char *err, size_t errn);

#endif
