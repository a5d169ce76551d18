/* app.h — the subcommands of the moelab executable. Each returns the process exit status. */
#ifndef ML_APP_H
#define ML_APP_H

int cmd_train(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_data(int argc, char **argv);
int cmd_replay(int argc, char **argv);
int cmd_export(int argc, char **argv);
int cmd_sweep(int argc, char **argv);  /* app/sweep/sweep.c */
int cmd_ctl(int argc, char **argv);    /* app/steer/ctl.c */
int cmd_attach(int argc, char **argv); /* app/steer/attach.c */
int cmd_browse(int argc, char **argv); /* app/browse/browse.c */
int cmd_plot(int argc, char **argv);   /* app/plot/plot.c */
int cmd_probe(int argc, char **argv);  /* app/run/probe.c */

/* The subcommands, in the order of `moelab --help` (app/cli/subcommands.c; NULL name ends it):
 * main dispatches through it, --help, the man page and the bash completion list it. */
typedef struct {
    const char *name, *summary, *synopsis;
    int train_options;                 /* takes the train option table */
    int (*run)(int argc, char **argv); /* argv[0] is the subcommand; NULL: help / version (main) */
} AppCommand;
extern const AppCommand app_commands[];
int cmd_manpage(void);         /* `moelab --man`: moelab(1) in roff, from the tables */
int cmd_bash_completion(void); /* `moelab --bash-completion`: the bash completion script */

#endif
