/* cmdtab.h — the command language's words, one row per command (core/cmdrows.h, which also makes
 * the CmdKind enum of core/records.h):
 * its name, its arguments, a help line, whether an --on-collapse rule may contain it and whether it
 * takes an @layer suffix. The parser (app/cli/commands.c), readline completion
 * (app/term/tui_cmdline.c), the help overlay (views/view_help.c), the control socket's `help`
 * reply (app/steer/control.c), `--commands` in --help and the man page's COMMAND LANGUAGE section
 * (which tests/t_readme.sh holds the README's table against) all come from it.
 * Adding a command: its row in core/cmdrows.h (its CmdKind comes with it), its arguments in
 * command_parse (when it takes any) and what the trainer does with it (core/trainer_loop.c). */
#ifndef ML_CMDTAB_H
#define ML_CMDTAB_H

#include <stddef.h>

#include "records.h"

#define CMD_KIND_COUNT CMD_KIND_COUNT_

typedef struct {
    const char *name; /* the word typed */
    const char *args; /* its arguments, "" for none; PARAM and [KEY=V ...] are expanded by cmd_usage */
    const char *help; /* one line: what it does */
    int rule;         /* 1: may be part of an on-collapse rule */
    int layer;        /* 1: takes an @layer suffix (a routing knob or the temperature of one layer) */
    int file;         /* 1: listed among the --commands FILE commands in --help */
} CmdInfo;

extern const CmdInfo cmd_table[CMD_KIND_COUNT];
extern const char *const cmd_words[];      /* the names in CmdKind order, NULL-terminated */
extern const char *const cmd_rule_words[]; /* what an on-collapse rule starts with: pause, off, the rule commands */

/* The CmdKind of a command word (case as typed; "exit" is quit), or -1. */
int cmd_find(const char *word);
/* "name args" with PARAM as the `set` parameters (a|b|c) and [KEY=V ...] as the anneal keys. */
const char *cmd_usage(int kind, char *buf, size_t n);

#endif
