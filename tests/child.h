/* child.h — a reader process for the tests that read a file while this process writes it: the
 * test binary re-executes itself (/proc/self/exe) with a mode flag, so the child starts with fresh
 * HDF5 state instead of inheriting the writer's open file through fork. The parent talks to it
 * over the child's stdin (to) and stdout (from). */
#ifndef ML_TESTS_CHILD_H
#define ML_TESTS_CHILD_H

#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct {
    pid_t pid;
    FILE *to, *from;
} Child;

/* Starts `/proc/self/exe ARGV0 FLAG FILE`. 0, or -1 if pipe/fork failed. */
static inline int child_start_mode(Child *c, const char *argv0, const char *flag, const char *file) {
    int in[2], out[2];
    if (pipe(in) || pipe(out)) return -1;
    fflush(stdout);
    c->pid = fork();
    if (c->pid < 0) return -1;
    if (c->pid == 0) {
        dup2(in[0], 0);
        dup2(out[1], 1);
        close(in[0]);
        close(in[1]);
        close(out[0]);
        close(out[1]);
        execl("/proc/self/exe", argv0, flag, file, (char *)NULL);
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    c->to = fdopen(in[1], "w");
    c->from = fdopen(out[0], "r");
    return 0;
}

/* Closes both pipes and waits: the child's exit status (128 if it did not exit normally). */
static inline int child_finish(Child *c) {
    fclose(c->to);
    fclose(c->from);
    int status = 0;
    waitpid(c->pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

#endif
