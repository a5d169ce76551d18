/* ctl.c — `moelab ctl SESSION COMMAND...`: one command to a running session's control socket, for
 * scripts. Prints the reply line; exit 0 on `ok`, 1 when the run refused the command (or this
 * user), 2 on bad usage, 3 when no run is listening on the session. */
#include "app/cli/app.h"
#include "app/steer/control.h"
#include "core/cmdtab.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void usage(FILE *f) {
    char words[256];
    size_t len = 0;
    words[0] = '\0';
    for (int k = 0; k < CMD_KIND_COUNT && len < sizeof words; k++) /* the command table, but the overlay's help */
        if (k != CMD_HELP) len += (size_t)snprintf(words + len, sizeof words - len, "%s%s", len ? ", " : "", cmd_table[k].name);
    fprintf(f, "usage: moelab ctl SESSION COMMAND...\n\n"
               "Sends one command to the run training in the session folder SESSION (through its\n"
               "control socket SESSION/control.sock) and prints the reply, e.g.\n"
               "  moelab ctl runs/a set tau 0.3      moelab ctl runs/a pause      moelab ctl runs/a status\n"
               "COMMAND is the command language of the live screen (%s)\n"
               "or `status`. Exit status: 0 ok, 1 the command was refused, 2 bad usage, 3 no run is\n"
               "listening on SESSION.\n",
            words);
}

int cmd_ctl(int argc, char **argv) {
    if (argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        usage(stdout);
        return 0;
    }
    if (argc < 3) {
        fprintf(stderr, "moelab ctl: need a session folder and a command\n");
        usage(stderr);
        return 2;
    }
    const char *dir = argv[1];
    size_t len = 0;
    for (int i = 2; i < argc; i++) len += strlen(argv[i]) + 1;
    if (len > CONTROL_LINE_MAX) {
        fprintf(stderr, "moelab ctl: the command is longer than %d bytes\n", CONTROL_LINE_MAX);
        return 2;
    }
    char line[CONTROL_LINE_MAX + 1] = "";
    for (int i = 2; i < argc; i++) {
        if (strchr(argv[i], '\n')) {
            fprintf(stderr, "moelab ctl: one command per call (the command holds a newline)\n");
            return 2;
        }
        strcat(line, argv[i]);
        if (i + 1 < argc) strcat(line, " ");
    }
    struct stat st;
    if (stat(dir, &st) != 0) {
        if (errno == ENOENT || errno == ENOTDIR) fprintf(stderr, "moelab ctl: %s: no such session folder\n", dir);
        else fprintf(stderr, "moelab ctl: %s: %s\n", dir, strerror(errno));
        return 3;
    }
    if (!S_ISDIR(st.st_mode)) { /* it exists: say what it is, not that it is missing */
        const char *b = strrchr(dir, '/');
        b = b ? b + 1 : dir;
        if (!strcmp(b, "live.h5"))
            fprintf(stderr, "moelab ctl: %s: a session file: give its folder (%.*s)\n", dir,
                    b == dir ? 1 : (int)(b - dir - 1), b == dir ? "." : dir);
        else
            fprintf(stderr, "moelab ctl: %s: not a session folder (%s; give the folder that holds live.h5)\n", dir,
                    S_ISREG(st.st_mode)    ? "a regular file"
                    : S_ISFIFO(st.st_mode) ? "a FIFO"
                    : S_ISSOCK(st.st_mode) ? "a socket"
                                           : "not a folder");
        return 3;
    }
    long owner = -1;
    const int fd = control_connect(dir, &owner);
    if (fd < 0) {
        const int e = errno;
        if (e == EPERM) {
            char who[160], me[160];
            fprintf(stderr,
                    "moelab ctl: %s/%s: the process listening there runs as %s, not as you (%s): nothing was sent; "
                    "only the run's owner can steer it (ask them, or check who put that socket there)\n",
                    dir, CONTROL_SOCKET_NAME, control_uid_text(owner, who, sizeof who),
                    control_uid_text((long)geteuid(), me, sizeof me));
            return 1;
        }
        if (e == EACCES) {
            fprintf(stderr, "moelab ctl: %s/%s: permission denied (only the run's owner can steer it)\n", dir,
                    CONTROL_SOCKET_NAME);
            return 1;
        }
        fprintf(stderr, "moelab ctl: %s: no run is listening (%s); `moelab browse %s` shows the saved session\n", dir,
                strerror(e), dir);
        return 3;
    }
    char reply[2048];
    const int rc = control_request(fd, line, reply, sizeof reply, 120000);
    close(fd);
    if (rc) {
        fprintf(stderr, "moelab ctl: %s: %s\n", dir, reply);
        return 3;
    }
    printf("%s\n", reply);
    return !strncmp(reply, "ok", 2) ? 0 : 1;
}
