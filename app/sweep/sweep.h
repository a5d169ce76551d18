/* sweep.h — `moelab sweep`: multi-seed experiments over a grid of configurations, the paper's
 * presets, effect sizes against the matching dense baseline, parallel runs (--jobs), sharding
 * (--shard, --collect) and MPI ranks. See app/sweep.c (sweep_internal.h lists the other files)
 * and the README section "Sweeps". */
#ifndef ML_APP_SWEEP_H
#define ML_APP_SWEEP_H

#include <stddef.h>

/* The subcommand (argv[0] = "sweep"). Returns the exit status: 0 when every run of the grid
 * this process was given finished, 1 when some failed or were interrupted, 2 on bad usage. */
int cmd_sweep(int argc, char **argv);
/* The presets' names joined by sep ("hidden-size|topk-rho|..."), from the one table in
 * sweep_presets.c (`sweep --help`, the bash completion of --preset). */
void sweep_preset_names(char *buf, size_t n, const char *sep);

#endif
