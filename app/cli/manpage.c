/* manpage.c — the moelab(1) man page and the bash completion script, both generated from the
 * tables --help uses: the subcommand table (subcommands.c; main.c dispatches through it) and the option
 * table of options.c (app_option_info). The build runs `moelab --man` and `moelab
 * --bash-completion` to write moelab.1 and moelab.bash; `cmake --install` installs them. */
#include "app/cli/app.h"
#include "app/sweep/sweep.h"
#include "app/cli/options.h"
#include "core/cmdtab.h"

#include <stdio.h>
#include <string.h>

/* roff text: backslashes and leading dots/quotes escaped, '-' as \- */
static void roff(FILE *f, const char *s) {
    if (*s == '.' || *s == '\'') fputs("\\&", f);
    for (; *s; s++) {
        if (*s == '\\') fputs("\\e", f);
        else if (*s == '-') fputs("\\-", f);
        else fputc(*s, f);
    }
}

int cmd_manpage(void) {
    FILE *f = stdout;
    fprintf(f, ".TH MOELAB 1 \"\" \"moelab %s\" \"User Commands\"\n", MOELAB_VERSION);
    fputs(".SH NAME\nmoelab \\- a workbench for sparse Mixture\\-of\\-Experts routing in image classification\n", f);
    fputs(".SH SYNOPSIS\n", f);
    for (const AppCommand *c = app_commands; c->name; c++) {
        fputs(".B moelab\n", f);
        fprintf(f, ".B %s\n", c->name);
        if (c->synopsis[0]) {
            fputs(".RI \"", f);
            roff(f, c->synopsis);
            fputs("\"\n", f);
        }
        fputs(".br\n", f);
    }
    fputs(".SH DESCRIPTION\nmoelab trains a small CNN with a dense or Mixture\\-of\\-Experts head on the CPU, shows\n"
          "its routing live (loss and accuracy, class x expert heatmap, expert load, temperature plan,\n"
          "collapse warnings), saves sessions to HDF5 and compares runs. With no command it opens the\n"
          "live screen training the reference MoE model on the default dataset (Fashion\\-MNIST when\n"
          "installed, else synthetic data); without a terminal it trains headless.\n",
          f);
    fputs(".SH COMMANDS\n", f);
    for (const AppCommand *c = app_commands; c->name; c++) {
        fprintf(f, ".TP\n.B %s\n", c->name);
        roff(f, c->summary);
        fputs("\n", f);
    }
    fputs(".SH OPTIONS\nOptions of\n.BR train ,\n.B bench\nand\n.B sweep\n(the same table as\n"
          ".BR \"moelab train \\-\\-help\" ).\n",
          f);
    const char *group = NULL;
    AppOptionInfo in;
    for (int i = 0, v; (v = app_option_info(i, &in)) >= 0; i++) {
        if (v) continue;
        if (in.group != group && in.group) {
            group = in.group;
            fputs(".SS ", f);
            roff(f, group);
            fputs("\n", f);
        }
        fputs(".TP\n\\fB\\-\\-", f);
        roff(f, in.name);
        fputs("\\fR", f);
        if (in.metavar[0]) {
            fputs(" \\fI", f);
            roff(f, in.metavar);
            fputs("\\fR", f);
        }
        fputs("\n", f);
        roff(f, in.text);
        fputs("\n", f);
    }
    fputs(".SH COMMAND LANGUAGE\nTyped on the live screen, in\n.B moelab attach\nand\n.BR \"moelab ctl\" ,\n"
          "or given per line as\n.I at STEP COMMAND\nin a\n.B \\-\\-commands\nfile; applied at the next step boundary.\n",
          f);
    for (int k = 0; k < CMD_KIND_COUNT; k++) {
        char u[320];
        fputs(".TP\n\\fB", f);
        roff(f, cmd_usage(k, u, sizeof u));
        fputs("\\fR\n", f);
        roff(f, cmd_table[k].help);
        fputs(cmd_table[k].rule ? " (allowed in an on\\-collapse rule)\n" : "\n", f);
    }
    fputs(".SH ENVIRONMENT\n.TP\n.B MOELAB_SESSIONS\nthe folder new sessions go under and\n.B moelab browse\n"
          "lists by default (default: runs/ of the current directory).\n.TP\n.B MOELAB_DATA\n"
          "where named datasets are looked up (default: /usr/share/datasets).\n.TP\n.B NO_COLOR\n"
          "no colours on the live screen and in the browser, whatever the config file's theme.\n",
          f);
    fputs(".SH FILES\n.TP\n.I runs/<dataset>\\-<head>\\-<time>/live.h5\nthe history of a run (HDF5, SWMR).\n"
          ".TP\n.I runs/<dataset>\\-<head>\\-<time>/ckpt\\-<step>.h5\ncheckpoints: PyTorch state_dict names and "
          "shapes.\n.TP\n.I $XDG_CONFIG_HOME/moelab/config\n(else ~/.config/moelab/config) the screens' "
          "settings: theme, mouse, hidden panels, smoothing;\n.B moelab config \\-\\-init\nwrites a commented one.\n",
          f);
    fputs(".SH EXIT STATUS\n0 success, 1 a run\\-time failure, 2 bad usage.\n", f);
    fputs(".SH SEE ALSO\n.nh\nThe documentation installed in share/doc/moelab/ under the installation prefix "
          "(/usr/local/share/doc/moelab by default): README.md, the user guide (the screens and keys, the command "
          "language, sweeps and presets, the science in brief); sessions/README.md, the file formats (live.h5, "
          "checkpoints, sweep.h5, the CSV export, imported datasets) with h5py and PyTorch examples; "
          "tests/README.md, the tests and benchmarks.\n",
          f);
    return ferror(f) ? 1 : 0;
}

/* a bash word list (the words are option names and choices: no quoting needed) */
static void words(FILE *f, const char *const *w) {
    for (int i = 0; w && w[i]; i++) fprintf(f, "%s%s", i ? " " : "", w[i]);
}

int cmd_bash_completion(void) {
    FILE *f = stdout;
    fputs("# bash completion for moelab, generated by `moelab --bash-completion` from its option tables\n", f);
    fputs("_moelab() {\n    local cur prev cmd i\n    COMPREPLY=()\n    cur=${COMP_WORDS[COMP_CWORD]}\n"
          "    prev=${COMP_WORDS[COMP_CWORD-1]}\n    cmd=\n"
          "    for ((i = 1; i < COMP_CWORD; i++)); do\n"
          "        case ${COMP_WORDS[i]} in -*) ;; *) cmd=${COMP_WORDS[i]}; break ;; esac\n    done\n",
          f);
    fputs("    local commands=\"", f);
    for (const AppCommand *c = app_commands; c->name; c++) fprintf(f, "%s%s", c == app_commands ? "" : " ", c->name);
    fputs("\"\n    local train_opts=\"", f);
    AppOptionInfo in;
    for (int i = 0, v, first = 1; (v = app_option_info(i, &in)) >= 0; i++)
        if (!v) fprintf(f, "%s--%s", first ? "" : " ", in.name), first = 0;
    fputs(" --help\"\n", f);
    /* the value of an option: its choices, a file or folder, or nothing to offer */
    fputs("    case $prev in\n", f);
    for (int i = 0, v; (v = app_option_info(i, &in)) >= 0; i++) {
        if (v || !in.takes_value) continue;
        if (in.choices) {
            fprintf(f, "        --%s) COMPREPLY=($(compgen -W \"", in.name);
            words(f, in.choices);
            fputs("\" -- \"$cur\")); return ;;\n", f);
        } else if (strstr(in.metavar, "DIR") || strstr(in.metavar, "FILE") || strstr(in.metavar, "SPEC"))
            fprintf(f, "        --%s) COMPREPLY=($(compgen -f -- \"$cur\")); return ;;\n", in.name);
        else fprintf(f, "        --%s) return ;;\n", in.name);
    }
    /* sweep's own values: the preset names from the preset table, the budgets */
    char presets[512];
    sweep_preset_names(presets, sizeof presets, " ");
    fprintf(f, "        --preset) COMPREPLY=($(compgen -W \"%s\" -- \"$cur\")); return ;;\n", presets);
    fputs("        --budget) COMPREPLY=($(compgen -W \"quick medium paper\" -- \"$cur\")); return ;;\n", f);
    fputs("    esac\n", f);
    fputs("    if [ -z \"$cmd\" ]; then\n"
          "        if [[ $cur == -* ]]; then COMPREPLY=($(compgen -W \"$train_opts --version\" -- \"$cur\"))\n"
          "        else COMPREPLY=($(compgen -W \"$commands\" -- \"$cur\")); fi\n        return\n    fi\n",
          f);
    /* train-option subcommands; the others' own options are read from their --help */
    fputs("    local opts\n    case $cmd in\n", f);
    fputs("        train|bench) opts=$train_opts ;;\n", f);
    fputs(
        "        *) opts=$(\"${COMP_WORDS[0]}\" \"$cmd\" --help 2>/dev/null | grep -oE -- '--[a-z][a-z0-9-]*' | sort -u)\n"
        "           [ \"$cmd\" = sweep ] && opts=\"$opts $train_opts\" ;;\n",
        f);
    fputs("    esac\n", f);
    fputs("    if [[ $cur == -* ]]; then COMPREPLY=($(compgen -W \"$opts\" -- \"$cur\"))\n", f);
    fputs(
        "    elif [ \"$cmd\" = data ] && [ \"$i\" = $((COMP_CWORD - 1)) ]; then COMPREPLY=($(compgen -W \"info import\" -- "
        "\"$cur\"))\n",
        f);
    fputs("    else COMPREPLY=($(compgen -f -- \"$cur\")); fi\n}\ncomplete -o filenames -F _moelab moelab\n", f);
    return ferror(f) ? 1 : 0;
}
