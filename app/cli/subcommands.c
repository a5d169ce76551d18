/* subcommands.c — the table of moelab's subcommands (see app.h): name, summary, synopsis, whether
 * it takes the train options, and the function that runs it. main.c dispatches through it and
 * prints `moelab --help` from it; manpage.c writes the man page's SYNOPSIS and COMMANDS and the
 * bash completion's command list from it. A new subcommand is one row here (and its cmd_*). */
#include "app/cli/app.h"
#include "app/cli/config.h"

#include <stddef.h>

const AppCommand app_commands[] = {
    {"train", "train a model (moelab train --help lists every option)", "[options]", 1, cmd_train},
    {"bench", "training speed of the reference model vs the OpenBLAS SGEMM rate", "[options]", 1, cmd_bench},
    {"data", "dataset info and import (moelab data --help)", "info PATH | import SRC OUT.h5 [--size N]", 0, cmd_data},
    {"replay", "re-run a session with its recorded commands and compare the results", "DIR [--session NEWDIR]", 0, cmd_replay},
    {"export", "write a session's history, routing, t-SNE samples and configuration as CSV", "DIR --csv OUTDIR", 0, cmd_export},
    {"browse", "saved sessions: list, scrub epochs, compare runs, t-SNE (moelab browse --help)",
     "[DIR | SESSION_DIR | FILE.h5 | sweep.h5] [--list]", 0, cmd_browse},
    {"sweep", "multi-seed experiments, the paper's presets, MoE-vs-dense effect sizes (moelab sweep --help)",
     "[train options] --vary KEY=V1,V2,... --seeds N --out DIR", 1, cmd_sweep},
    {"attach", "the live screen of a run training in another process, steering it or, with --read-only, only watching it",
     "[--read-only] [--no-mouse] SESSION | SWEEP_DIR", 0, cmd_attach},
    {"ctl", "send one command to a running session (moelab ctl SESSION COMMAND...)", "SESSION COMMAND...", 0, cmd_ctl},
    {"plot", "paper figures (PDF, SVG, PNG) of a session, 2-8 sessions or a sweep (moelab plot --help)",
     "SESSION | SWEEP [SESSION ...] [--out DIR] [--format pdf|svg|png|all] [--epoch N]", 0, cmd_plot},
    {"probe", "batch-composition probe: a checkpoint's test predictions in batches of different make-up",
     "batch SESSION [--epoch N]", 0, cmd_probe},
    {"config", "the screens' settings file: theme, mouse, panels, smoothing (moelab config --help)",
     "[--init [--force] | --path]", 0, cmd_config},
    {"help", "this text", "", 0, NULL},
    {"version", "print the version", "", 0, NULL},
    {NULL, NULL, NULL, 0, NULL},
};
