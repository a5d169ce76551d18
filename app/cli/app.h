/* app.h — the subcommands of the moelab executable. Each returns the process exit status. */
#ifndef ML_APP_H
#define ML_APP_H

int cmd_train(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_data(int argc, char **argv);
int cmd_replay(int argc, char **argv);
int cmd_export(int argc, char **argv);
int cmd_sweep(int argc, char **argv);  /* app/sweep.c */
int cmd_ctl(int argc, char **argv);    /* app/ctl.c */
int cmd_attach(int argc, char **argv); /* app/attach.c */

/* The subcommands, in the order of `moelab --help` (app/manpage.c; NULL name ends it). */
typedef struct {
    const char *name, *summary, *synopsis;
    int train_options; /* takes the train option table */
} AppCommand;
extern const AppCommand app_commands[];
int cmd_manpage(void);         /* `moelab --man`: moelab(1) in roff, from the tables */
int cmd_bash_completion(void); /* `moelab --bash-completion`: the bash completion script */

#endif
