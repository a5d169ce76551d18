/* lock.c — one writer per session folder: an exclusive flock(2) on DIR/.lock, held for as long as
 * the writer's file descriptor is open (see session.h, "session lock").
 *
 * Why flock and not the PID text: the kernel drops a flock when its last descriptor closes,
 * whatever the holder died of (SIGKILL included), so a stale DIR/.lock never blocks anyone; the
 * PID written into the file is only there for the refusal message. The file is never unlinked:
 * unlinking a lock file while another process has it open and is about to flock it would let two
 * processes hold "the" lock on two different inodes. */
#define _GNU_SOURCE

#include "session.h"
#include "h5util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* The PID text of an open lock file (0 if empty or unreadable). The holder writes it right after
 * taking the lock, so an empty file is retried for up to ~100 ms. */
static long read_holder(int fd) {
    for (int attempt = 0; attempt < 20; attempt++) {
        char buf[32];
        const ssize_t r = pread(fd, buf, sizeof buf - 1, 0);
        if (r > 0) {
            buf[r] = 0;
            char *end;
            const long pid = strtol(buf, &end, 10);
            if (end != buf && pid > 0) return pid;
        }
        const struct timespec ts = {0, 5 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    return 0;
}

ml_status session_lock(const char *dir, SessionLock *l) {
    l->fd = -1;
    l->held = 0;
    if (!dir || !dir[0]) return ml_fail(ML_ERR_ARG, "session lock: empty session directory name");
    struct stat sb;
    if (stat(dir, &sb) != 0) return ml_fail(ML_ERR_IO, "%s: cannot lock the session: %s", dir, strerror(errno));
    if (!S_ISDIR(sb.st_mode)) return ml_fail(ML_ERR_IO, "%s: cannot lock the session: not a directory", dir);
    char path[H5U_PATH_MAX];
    ml_status st = h5u_path(path, sizeof path, dir, SESSION_LOCK_FILE);
    if (st != ML_OK) return st;
    /* O_NOFOLLOW: never lock (or create) through a symbolic link; O_NONBLOCK: a FIFO named .lock
     * must not block the open (it is refused just below) */
    const int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0644);
    if (fd < 0) return ml_fail(ML_ERR_IO, "%s: cannot open the session lock file: %s", path, strerror(errno));
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return ml_fail(ML_ERR_IO, "%s: the session lock file is not a regular file", path);
    }
    int r;
    do r = flock(fd, LOCK_EX | LOCK_NB);
    while (r != 0 && errno == EINTR);
    if (r != 0) {
        const int e = errno;
        if (e == EWOULDBLOCK) {
            const long pid = read_holder(fd);
            close(fd);
            if (pid > 0) return ml_fail(ML_ERR_STATE, "session %s is in use by PID %ld", dir, pid);
            return ml_fail(ML_ERR_STATE, "session %s is in use by another process", dir);
        }
        close(fd);
        return ml_fail(ML_ERR_IO, "%s: cannot lock: %s", path, strerror(e));
    }
    /* ours: replace whatever PID a dead holder left */
    char txt[32];
    const int n = snprintf(txt, sizeof txt, "%ld\n", (long)getpid());
    if (ftruncate(fd, 0) != 0 || pwrite(fd, txt, (size_t)n, 0) != n) {
        const int e = errno;
        close(fd); /* releases the lock */
        return ml_fail(ML_ERR_IO, "%s: cannot write the holder's PID: %s", path, strerror(e));
    }
    l->fd = fd;
    l->held = 1;
    return ML_OK;
}

ml_status session_lock_create(const char *dir, SessionLock *l) {
    l->fd = -1;
    l->held = 0;
    ml_status st = h5u_mkdirs(dir);
    return st != ML_OK ? st : session_lock(dir, l);
}

void session_unlock(SessionLock *l) {
    if (!l || !l->held) return;
    /* empty the PID while still holding the lock, then release it with the descriptor */
    if (ftruncate(l->fd, 0) != 0) { /* nothing to do: the PID text is only informative */
    }
    close(l->fd);
    l->fd = -1;
    l->held = 0;
}
