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
#include <sys/statfs.h>
#include <sys/sysmacros.h>
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
    if (fd < 0 && errno == ELOOP)
        return ml_fail(ML_ERR_IO,
                       "%s: the session lock file is a symbolic link, which moelab never follows: remove it (rm %s) if "
                       "no run uses this session, then start again",
                       path, path);
    if (fd < 0)
        return ml_fail(ML_ERR_IO, "%s: cannot open the session lock file: %s (check the folder's owner and mode)", path,
                       strerror(errno));
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return ml_fail(ML_ERR_IO, "%s: the session lock file is not a regular file: remove it if no run uses this session",
                       path);
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

/* Whether a process holds DIR/.lock, without taking it (a reader must never make a starting
 * writer fail): the kernel's table of locks, /proc/locks, lists every flock with its file's device
 * and inode. Falls back to a shared-lock probe where /proc is not mounted; -1 (cannot tell) on a
 * network or cluster file system, where the holder may be on another machine. */
int session_lock_held(const char *dir) {
    char path[H5U_PATH_MAX];
    if (h5u_path(path, sizeof path, dir, SESSION_LOCK_FILE) != ML_OK) return -1;
    struct stat sb;
    if (lstat(path, &sb) != 0) return errno == ENOENT ? 0 : -1;
    if (!S_ISREG(sb.st_mode)) return -1;
    /* a network or cluster file system: the writer may hold the lock from another machine, which
     * this kernel's table does not list */
    struct statfs fs;
    if (statfs(dir, &fs) != 0) return -1;
    switch ((unsigned long)fs.f_type) {
    case 0x6969UL:     /* NFS */
    case 0xFF534D42UL: /* CIFS */
    case 0xFE534D42UL: /* SMB2 */
    case 0x517BUL:     /* SMB */
    case 0x65735546UL: /* FUSE */
    case 0x0BD00BD0UL: /* Lustre */
    case 0x47504653UL: /* GPFS */
    case 0x19830326UL: /* BeeGFS */
    case 0x00C36400UL: /* Ceph */
    case 0x564C:       /* NCP */
    case 0x6B414653UL: /* AFS */
        return -1;
    default: break;
    }
    FILE *f = fopen("/proc/locks", "re");
    if (f) {
        char line[256];
        int held = 0;
        while (!held && fgets(line, sizeof line, f)) {
            /* "3: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF"; waiters have "->" after the number */
            char kind[16];
            unsigned maj, min;
            unsigned long ino;
            if (strstr(line, "->")) continue;
            if (sscanf(line, "%*d: %15s %*s %*s %*d %x:%x:%lu", kind, &maj, &min, &ino) == 4 &&
                !strcmp(kind, "FLOCK") && ino == (unsigned long)sb.st_ino && maj == major(sb.st_dev) &&
                min == minor(sb.st_dev))
                held = 1;
        }
        fclose(f);
        return held;
    }
    const int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0) return -1;
    int r;
    do r = flock(fd, LOCK_SH | LOCK_NB);
    while (r != 0 && errno == EINTR);
    const int e = errno;
    close(fd); /* releases the probe at once */
    return r == 0 ? 0 : e == EWOULDBLOCK ? 1 : -1;
}
