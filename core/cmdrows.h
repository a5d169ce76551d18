/* cmdrows.h — the rows of the command language, one per command, in CmdKind order: the enum
 * (core/records.h) and the table of words, arguments and help (core/cmdtab.h) are both made from
 * them, so a new command is one row here plus what the trainer does with it (core/trainer_loop.c) and,
 * when it takes arguments, their parsing (app/cli/commands.c). Append: the kinds' values follow the
 * rows' order (TrainerEvent.cmd is stored by value in nothing persistent, but keep it stable). */
#ifndef ML_CMDROWS_H
#define ML_CMDROWS_H

/* X(kind, name, args, help, rule, layer, file): see CmdInfo. */
#define CMD_ROWS(X)                                                                                              \
    X(CMD_PAUSE, "pause", "", "pause the run (live screen, control socket)", 0, 0, 0)                            \
    X(CMD_RESUME, "resume", "", "resume a paused run", 0, 0, 0)                                                  \
    X(CMD_STEP, "step", "[N]", "run N steps (default 1) while paused", 0, 0, 0)                                  \
    X(CMD_SET, "set", "PARAM VALUE", "set a parameter from the next step on", 1, 1, 1)                           \
    X(CMD_ANNEAL, "anneal", "KIND [TAU0|now [TAU1]] [KEY=V ...]",                                                \
      "replace the temperature schedule from now to the end of training", 1, 1, 1)                               \
    X(CMD_SNAPSHOT, "snapshot", "", "write a checkpoint now", 1, 0, 1)                                           \
    X(CMD_EVAL, "eval", "", "evaluate on the test split now", 1, 0, 1)                                           \
    X(CMD_QUIT, "quit", "", "stop the run", 0, 0, 1)                                                             \
    X(CMD_HELP, "help", "", "the help overlay (live screen)", 0, 0, 0)                                           \
    X(CMD_ON_COLLAPSE, "on-collapse", "pause | off | COMMAND[; COMMAND...]",                                     \
      "the rule applied once at the next red collapse; off removes it", 0, 0, 0)

#endif
