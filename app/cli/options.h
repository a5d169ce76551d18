/* options.h — command-line options shared by `train`, `bench` and (later) `sweep`: one table of
 * long options that fills a TrainConfig and the dataset spec, with strict value checking. */
#ifndef ML_APP_OPTIONS_H
#define ML_APP_OPTIONS_H

#include "core/config.h"

#define APP_PATH_MAX 4096 /* longest path an option takes (longer ones are refused, never cut) */

typedef struct {
    TrainConfig train;
    char dataset[APP_PATH_MAX];
    int headless;
    int no_mouse; /* --no-mouse: the live screen ignores the mouse (launch-time only) */
    int dry_run;
    int quiet;
    int steps;                   /* bench: timed steps */
    int repeat;                  /* bench: repetitions (median reported) */
    char heads[64];              /* bench: comma list of heads */
    char bench_model[32];        /* bench: reference | backbone-moe | backbone-ffn */
    int profile;                 /* bench: --profile, the per-layer time table */
    int scaling;                 /* bench: --scaling, also time 1 thread and print the speed-up */
    char commands[APP_PATH_MAX]; /* --commands FILE */
    int coarse;                  /* --labels coarse */
    char session[APP_PATH_MAX];  /* --session DIR ("" = sessions/<dataset>-<head>-<time>) */
    int no_session;              /* --no-session */
    int private_run;             /* --private: the session folder is 0700 */
    char resume[APP_PATH_MAX];   /* --resume DIR */
    int extend_epochs;           /* --resume DIR --epochs N: the run extended to N epochs (0: not) */
    int ckpt_every;              /* --ckpt-every N epochs (default 1; 0 = only at the end) */
    long ckpt_steps;             /* --ckpt-steps N (default 0 = off) */
    int keep;                    /* --keep N checkpoints (default 3) */
    char on_collapse[224];       /* --on-collapse: "pause", commands, or "" (none) */
    char notify[2048];           /* --notify CMD: alerts through /bin/sh ("" = off; app/notify.h) */
    double notify_timeout;       /* --notify-timeout S (30) */
} AppOptions;

void app_options_defaults(AppOptions *o);
/* Parses argv[first..] into *o. Returns 0 on success, 1 if --help was printed, -1 on a bad
 * option (message printed to stderr). `cmd` names the subcommand in messages and help. */
int app_options_parse(AppOptions *o, int argc, char **argv, const char *cmd);
void app_options_help(const char *cmd);
/* Launch-time options (--notify, --notify-timeout, --no-mouse) belong to one process, never to a session: the
 * stored command line leaves them out, so a resume, a replay or a sweep's comparison never sees
 * them. The argv entries that argv[i] starts (2: "--notify CMD", 1: "--notify=CMD"), 0 if none. */
int app_option_launch_only(int argc, char **argv, int i);
/* `moelab bench --model backbone-moe|backbone-ffn` (app/bench_model.c); returns the exit status. */
int bench_backbone_model(const AppOptions *o);
/* One row of the option table as --help shows it (for the man page and the shell completion). */
typedef struct {
    const char *name;           /* without "--" */
    const char *group;          /* heading of its group (NULL: none) */
    const char *const *choices; /* the words a choice option takes, NULL-terminated; NULL if free */
    int takes_value;            /* 0 for a flag */
    char metavar[512];          /* "N", "dw|std", or "" for a flag */
    char text[2048];            /* help text with the default, as in --help */
} AppOptionInfo;
/* The option named by the len bytes at name (without "--"): 1 if it takes a value, 0 for a flag,
 * -1 if there is none (the sweep's comparison of command lines). */
int app_option_takes_value(const char *name, size_t len);
/* Row i: 0 visible, 1 hidden (accepted, not in --help), -1 past the end. */
int app_option_info(int i, AppOptionInfo *out);

#endif
