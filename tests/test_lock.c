/* test_lock.c — the session lock (sessions/lock.c, issue 13 item 3): a child process holds
 * DIR/.lock, the parent is refused with ML_ERR_STATE and the child's PID in the message, and gets
 * the lock once the child has exited (normally or by SIGKILL); a lock file left with a dead PID
 * is taken over; two locks inside one process conflict; a missing folder is not created; a FIFO
 * or a symbolic link named .lock is refused without blocking. Plain main, 0 if all pass. */
#define _GNU_SOURCE

#include "sessions/session.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"

/* The text of DIR/.lock ("" if unreadable). */
static void lock_text(const char *dir, char *buf, size_t n) {
    char p[1024];
    snprintf(p, sizeof p, "%s/%s", dir, SESSION_LOCK_FILE);
    buf[0] = 0;
    FILE *f = fopen(p, "r");
    if (!f) return;
    size_t r = fread(buf, 1, n - 1, f);
    buf[r] = 0;
    fclose(f);
}

typedef struct {
    pid_t pid;
    int go; /* write end: a byte (or EOF) tells the child to unlock and exit */
} Holder;

/* Forks a child that takes the lock on dir, reports 'L' (locked) or 'F' (failed), then waits for
 * the parent. Returns 0 once the child holds the lock. */
static int holder_start(Holder *h, const char *dir) {
    int ready[2], go[2];
    if (pipe(ready) || pipe(go)) return -1;
    fflush(stdout);
    h->pid = fork();
    if (h->pid < 0) return -1;
    if (h->pid == 0) {
        close(ready[0]);
        close(go[1]);
        SessionLock l;
        const char c = session_lock(dir, &l) == ML_OK ? 'L' : 'F';
        if (write(ready[1], &c, 1) != 1) _exit(2);
        char b;
        if (read(go[0], &b, 1) < 0) _exit(3);
        session_unlock(&l);
        _exit(c == 'L' ? 0 : 1);
    }
    close(ready[1]);
    close(go[0]);
    h->go = go[1];
    char c = 0;
    const ssize_t r = read(ready[0], &c, 1);
    close(ready[0]);
    return r == 1 && c == 'L' ? 0 : -1;
}

/* Lets the child exit (or SIGKILLs it) and reaps it: its exit status, 128 + signal if killed. */
static int holder_stop(Holder *h, int kill_it) {
    if (kill_it) kill(h->pid, SIGKILL);
    close(h->go);
    int status = 0;
    waitpid(h->pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int main(void) {
    char root[] = "/tmp/moelab-lock-XXXXXX";
    if (!mkdtemp(root)) {
        printf("FAIL mkdtemp: %s\n", strerror(errno));
        return 1;
    }
    char dir[256], want[512], txt[64];
    snprintf(dir, sizeof dir, "%s/S", root);
    mkdir(dir, 0777);

    /* 1. a child holds it: refused with its PID; after the child exits the parent gets it */
    Holder h;
    CHECK(holder_start(&h, dir) == 0, "child %d locks %s", (int)h.pid, dir);
    SessionLock l;
    memset(&l, 0, sizeof l);
    ml_status st = session_lock(dir, &l);
    snprintf(want, sizeof want, "session %s is in use by PID %d", dir, (int)h.pid);
    CHECK(st == ML_ERR_STATE && !strcmp(ml_last_error(), want) && !l.held, "second locker refused: ML_ERR_STATE \"%s\"",
          ml_last_error());
    lock_text(dir, txt, sizeof txt);
    CHECK(atol(txt) == (long)h.pid, "the refused attempt left the holder's PID in .lock (\"%.*s\")",
          (int)strcspn(txt, "\n"), txt);
    CHECK(holder_stop(&h, 0) == 0, "the child unlocks and exits");
    st = session_lock(dir, &l);
    lock_text(dir, txt, sizeof txt);
    CHECK(st == ML_OK && l.held && atol(txt) == (long)getpid(),
          "after the child exited the parent gets the lock, .lock says %ld", atol(txt));

    /* 2. inside one process: a second SessionLock on the same folder conflicts too */
    SessionLock l2;
    st = session_lock(dir, &l2);
    snprintf(want, sizeof want, "session %s is in use by PID %d", dir, (int)getpid());
    CHECK(st == ML_ERR_STATE && !strcmp(ml_last_error(), want), "a second lock in the same process: \"%s\"",
          ml_last_error());
    session_unlock(&l);
    CHECK(!l.held, "unlock clears the handle");
    session_unlock(&l); /* twice: no-op */
    st = session_lock(dir, &l2);
    CHECK(st == ML_OK, "after unlock it can be taken again");
    session_unlock(&l2);

    /* 3. a holder killed with SIGKILL: the kernel drops its flock, the PID it wrote is stale */
    CHECK(holder_start(&h, dir) == 0, "child %d locks again", (int)h.pid);
    const pid_t dead = h.pid;
    CHECK(holder_stop(&h, 1) == 128 + SIGKILL, "the child is SIGKILLed while holding the lock");
    lock_text(dir, txt, sizeof txt);
    st = session_lock(dir, &l);
    char after[64];
    lock_text(dir, after, sizeof after);
    CHECK(atol(txt) == (long)dead && st == ML_OK && atol(after) == (long)getpid(),
          "stale lock file of dead PID %ld is taken over (now %ld)", atol(txt), atol(after));
    session_unlock(&l);

    /* 4. a lock file with garbage / a PID nobody holds */
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, SESSION_LOCK_FILE);
    FILE *f = fopen(p, "w");
    if (f) {
        fputs("4194304999 not a pid at all, and longer than the PID text\n", f);
        fclose(f);
    }
    st = session_lock(dir, &l);
    lock_text(dir, txt, sizeof txt);
    char mine[32];
    snprintf(mine, sizeof mine, "%ld\n", (long)getpid());
    CHECK(st == ML_OK && !strcmp(txt, mine), "a left-over lock file is rewritten to exactly our PID");
    session_unlock(&l);

    /* 5. a missing folder is refused and not created; session_lock_create makes it */
    char missing[512];
    snprintf(missing, sizeof missing, "%s/nope/deeper", root);
    st = session_lock(missing, &l);
    struct stat sb;
    CHECK(st == ML_ERR_IO && strstr(ml_last_error(), "No such file") && stat(missing, &sb) != 0 && !l.held,
          "missing folder: ML_ERR_IO, nothing created: \"%s\"", ml_last_error());
    st = session_lock_create(missing, &l);
    CHECK(st == ML_OK && stat(missing, &sb) == 0 && S_ISDIR(sb.st_mode),
          "session_lock_create makes the folder and locks it");
    CHECK(holder_start(&h, missing) != 0, "a child cannot lock the new folder meanwhile");
    holder_stop(&h, 0);
    session_unlock(&l);

    /* 6. .lock as a FIFO or a symbolic link: refused, without blocking (alarm as a guard) */
    char d2[512], d3[512], lp[600];
    snprintf(d2, sizeof d2, "%s/F", root);
    snprintf(d3, sizeof d3, "%s/L", root);
    mkdir(d2, 0777);
    mkdir(d3, 0777);
    snprintf(lp, sizeof lp, "%s/%s", d2, SESSION_LOCK_FILE);
    const int fifo_ok = mkfifo(lp, 0666) == 0;
    alarm(20);
    st = session_lock(d2, &l);
    alarm(0);
    CHECK(fifo_ok && st == ML_ERR_IO && strstr(ml_last_error(), "not a regular file"),
          "a FIFO .lock is refused: \"%s\"", ml_last_error());
    snprintf(lp, sizeof lp, "%s/%s", d3, SESSION_LOCK_FILE);
    const int link_ok = symlink("/tmp/elsewhere-moelab-lock", lp) == 0;
    st = session_lock(d3, &l);
    CHECK(link_ok && st == ML_ERR_IO && access("/tmp/elsewhere-moelab-lock", F_OK) != 0 &&
              strstr(ml_last_error(), "is a symbolic link, which moelab never follows: remove it") &&
              !strstr(ml_last_error(), "Too many levels"),
          "a symbolic link .lock is refused (said so) and not followed: \"%s\"", ml_last_error());
    unlink(lp);

    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    if (system(cmd) != 0) printf("note: could not remove %s\n", root);
    printf("%s: %d failure(s)\n", n_failed ? "FAIL" : "PASS", n_failed);
    return n_failed ? 1 : 0;
}
