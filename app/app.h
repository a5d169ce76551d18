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

#endif
