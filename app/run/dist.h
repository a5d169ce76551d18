/* dist.h — one run on several processes: `mpirun -np N moelab train ...` (or srun) trains one run
 * on N ranks, each a full replica of the model taking 1/N of every global batch (README "One run on
 * many machines"). This file is the MPI side: core/dist.h's TrainComm implemented with MPI, the
 * start-up handshake, and the trainer hooks that make every rank take the same decisions.
 *
 * Rank 0 is the run as a one-process run knows it: it parses the options, owns the session
 * (live.h5, checkpoints, lock, control socket) and the output. It sends the resolved options to the
 * other ranks (the followers), which train without a session or output; every command, stop and
 * checkpoint decision of rank 0 is broadcast at the step boundary it happens at. Without MPI (not
 * built with it, or not started by mpirun/srun) every function here is a no-op and no MPI call is
 * made. */
#ifndef APP_DIST_H
#define APP_DIST_H

#include "app/cli/options.h"
#include "core/trainer.h"

/* MPI_Init when started by mpirun or srun with more than one rank; returns the number of ranks
 * (1: no data parallelism, nothing else here does anything). Call once, before anything else. */
int dist_init(void);
int dist_rank(void);
int dist_size(void);
/* The collectives for trainer_init_dist (NULL with one rank). */
const TrainComm *dist_comm(void);
/* A subcommand that trains (train, replay) under MPI: dist_init, then rank 0 runs run(argc, argv)
 * and the others follow it (receive the options, train as rank 0 says); dist_finish; the exit
 * status. */
int dist_main(int (*run)(int argc, char **argv), int argc, char **argv);
/* Rank 0: the options every rank trains with (before the trainer is built); then, once the
 * session is open (ok = 0: it is not, every rank stops), whether it resumed (its state is sent). */
void dist_send_options(const AppOptions *o);
void dist_send_start(Trainer *t, int ok, int resumed);
/* Rank 0: the run's hooks, wrapped so that every rank sees the same commands, stops and
 * checkpoint results at the same step boundary. */
void dist_wrap_hooks(TrainHooks *h);
/* Rank 0: fn(text, step, user) is called once when a rank on this machine dies while rank 0 waits
 * for it in an exchange (text: "rank R (pid P on HOST) died at step S"; S: the steps done), to
 * record it in the session; the process then exits with status 1 (mpirun ends the job). A rank on
 * another machine cannot be watched: mpirun ends the job and the session stays as it was. */
typedef void (*DistLostFn)(const char *text, long step, void *user);
void dist_on_rank_lost(DistLostFn fn, void *user);
/* The communication so far: seconds blocked in exchanges, bytes sent per step, the exchange time
 * hidden behind the backward pass (fraction), steps. */
void dist_comm_stats(double *wait_s, double *bytes_per_step, double *hidden, long *steps);
void dist_comm_reset(void); /* the totals above start again (a benchmark's timed rounds) */
/* A command whose ranks all run the same code (moelab bench): no options or start messages. */
void dist_no_handshake(void);
/* MPI_Finalize (rank 0 first tells followers still waiting that there is no run). */
void dist_finish(void);

#endif
