/* main.c — moelab's entry point: dispatches the subcommands through their table (subcommands.c). */
#include "app/cli/app.h"
#include "sessions/dataset_h5.h"

#include <stdio.h>
#include <string.h>

static void usage(FILE *f) {
    fprintf(f,
            "moelab %s — a workbench for sparse Mixture-of-Experts routing in image classification\n\n"
            "usage: moelab [COMMAND] [options]\n\n"
            "commands:\n",
            MOELAB_VERSION);
    for (const AppCommand *c = app_commands; c->name; c++) fprintf(f, "  %-10s %s\n", c->name, c->summary);
    fprintf(f, "\n"
               "With no command, moelab opens the live screen training the reference MoE model on\n"
               "the default dataset (Fashion-MNIST when installed, else synthetic data); without a\n"
               "terminal it trains headless with one line per epoch. moelab --man prints the man page,\n"
               "moelab --bash-completion the bash completion script.\n");
}

int main(int argc, char **argv) {
    dataset_set_h5_loader(dataset_h5_load);
    if (argc < 2) return cmd_train(argc, argv);
    const char *c = argv[1];
    /* --version / -V everywhere: after a subcommand too (`moelab train -V`) */
    if (argc == 3 && c[0] != '-' && (!strcmp(argv[2], "--version") || !strcmp(argv[2], "-V"))) {
        printf("moelab %s\n", MOELAB_VERSION);
        return 0;
    }
    for (const AppCommand *sc = app_commands; sc->name; sc++)
        if (sc->run && !strcmp(c, sc->name)) return sc->run(argc - 1, argv + 1);
    if (strcmp(c, "help") == 0 || strcmp(c, "--help") == 0 || strcmp(c, "-h") == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(c, "version") == 0 || strcmp(c, "--version") == 0 || strcmp(c, "-V") == 0) {
        printf("moelab %s\n", MOELAB_VERSION);
        return 0;
    }
    if (strcmp(c, "--man") == 0) return cmd_manpage();
    if (strcmp(c, "--bash-completion") == 0) return cmd_bash_completion();
    if (c[0] == '-') return cmd_train(argc, argv);
    fprintf(stderr, "moelab: unknown command '%s'\n", c); /* no subcommand to name */
    usage(stderr);
    return 2;
}
