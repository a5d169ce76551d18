/* bench.h — what `moelab bench`'s two models (bench.c: the reference model's heads; bench_model.c:
 * the 64x64 backbone-MoE model and its dense twin) share, in bench_common.c: medians, the SGEMM
 * rate, the timed training and evaluation steps, the --profile table and the data-parallel
 * helpers for a bench under mpirun. */
#ifndef APP_BENCH_H
#define APP_BENCH_H

#include <stddef.h>
#include <stdint.h>

#include "core/model.h"
#include "core/optim.h"
#include "core/rng.h"

/* The median of v[0..n) (sorts v). */
double bench_median(double *v, int n);
/* Best-of-reps SGEMM rate of an n^3 product in GFLOP/s (0 when out of memory). */
double bench_sgemm_rate(int n, int reps);
/* Times `steps` training steps (forward, backward, update) on fixed random data; with m->prof.on
 * set, the loss and the update are timed into *upd (seconds, accumulated; NULL otherwise). */
double bench_time_steps(Model *m, Optimizer *o, const int32_t *labels, int B, int steps, Rng *rng, double *upd);
/* Times `steps` evaluation forward passes (running statistics, evaluation capacity). */
double bench_time_eval(Model *m, int B, int steps, Rng *rng);
/* `--profile`'s per-layer table of `steps` profiled training steps; kind "head"
 * or "model" and name label the table and its machine-readable `profile <kind>=<name>` line. */
void bench_profile_table(Model *m, Optimizer *opt, const int32_t *labels, int B, int steps, int threads, Rng *rng,
                         const char *kind, const char *name);

/* moelab bench under mpirun: every rank times its part of the batch and exchanges
 * gradients as a training run does. bench_dist_prepare: the local batch of *B (refused when the
 * ranks do not divide it: -1) and the gradient hook on m (after model_init); bench_dist_sgemm: the
 * machine's SGEMM rate, every rank's measured at once and summed; bench_dist_line: the ranks'
 * line (communication per step, bytes, overlap) and the machine-readable fields (stdout). */
int bench_dist_prepare(int *B);
void bench_dist_model(Model *m);
double bench_dist_sgemm(double mine);
void bench_dist_line(double step_ms, char *fields, size_t n);
void bench_dist_step_begin(Model *m);
void bench_dist_step_end(void);

#endif
