/* control.c — the control socket of a training run (see control.h). */
#define _GNU_SOURCE
#include "app/steer/control.h"
#include "app/cli/commands.h"
#include "app/steer/control_internal.h"
#include "core/cmdtab.h"

#include <errno.h>
#include <math.h>
#include <fcntl.h>
#include <poll.h>
#include <pwd.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>


// ---------------------------------------------------------------------------------------------
// the line protocol (pure)

ControlLineKind control_line_parse(const char *line, size_t len, TrainerCmd *cmd, char *err, size_t errn) {
    memset(cmd, 0, sizeof *cmd);
    if (len > 0 && line[len - 1] == '\r') len--;
    if (len > CONTROL_LINE_MAX) {
        snprintf(err, errn, "line longer than %d bytes", CONTROL_LINE_MAX);
        return CTL_LINE_ERROR;
    }
    for (size_t i = 0; i < len; i++) {
        const unsigned char ch = (unsigned char)line[i];
        if ((ch < 0x20 && ch != '\t') || ch == 0x7f) {
            snprintf(err, errn, "not a text line (byte 0x%02x at offset %zu)", ch, i);
            return CTL_LINE_ERROR;
        }
    }
    size_t a = 0, b = len;
    while (a < b && (line[a] == ' ' || line[a] == '\t')) a++;
    while (b > a && (line[b - 1] == ' ' || line[b - 1] == '\t')) b--;
    if (a == b) {
        snprintf(err, errn, "empty line");
        return CTL_LINE_ERROR;
    }
    char buf[CONTROL_LINE_MAX + 1];
    memcpy(buf, line + a, b - a);
    buf[b - a] = '\0';
    if (!strcmp(buf, "status")) return CTL_LINE_STATUS;
    if (!strcmp(buf, "detach")) return CTL_LINE_DETACH;
    if (!strcmp(buf, "readonly")) return CTL_LINE_READONLY;
    if (command_parse(buf, cmd, err, errn)) return CTL_LINE_ERROR;
    if (cmd->kind == CMD_HELP) return CTL_LINE_HELP;
    cmd->origin = CMD_FROM_SOCKET;
    return CTL_LINE_COMMAND;
}

int control_address(const char *dir, struct sockaddr_un *a, socklen_t *alen, int *dirfd) {
    memset(a, 0, sizeof *a);
    a->sun_family = AF_UNIX;
    *dirfd = -1;
    int n = snprintf(a->sun_path, sizeof a->sun_path, "%s/%s", dir, CONTROL_SOCKET_NAME);
    if (n < 0 || (size_t)n >= sizeof a->sun_path) { /* too long for sun_path: through the folder's fd */
        *dirfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (*dirfd < 0) return -1;
        n = snprintf(a->sun_path, sizeof a->sun_path, "/proc/self/fd/%d/%s", *dirfd, CONTROL_SOCKET_NAME);
    }
    *alen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + (size_t)n + 1);
    return 0;
}

// ---------------------------------------------------------------------------------------------
// the server

static double mono_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void logf_(ControlServer *s, int level, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void logf_(ControlServer *s, int level, const char *fmt, ...) {
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (s->ops.log) s->ops.log(s->ops.user, level, buf);
    else fprintf(stderr, "moelab train: %s\n", buf);
}

static void wake(ControlServer *s) {
    ssize_t r;
    do r = write(s->wake[1], "w", 1);
    while (r < 0 && errno == EINTR);
}

/* Appends a reply line to c (mutex held). A client whose replies pile up is dropped. */
void control_reply_locked(ControlClient *c, const char *fmt, ...) {
    if (c->fd < 0) return;
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line - 1, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if ((size_t)n > sizeof line - 2) n = (int)sizeof line - 2;
    for (int i = 0; i < n; i++)
        if (line[i] == '\n' || line[i] == '\r') line[i] = ' ';
    line[n++] = '\n';
    if (c->outlen + (size_t)n > sizeof c->out) { /* not reading its replies: dropped (the line
                                                    * being handled is still consumed by the caller) */
        c->closing = 1;
        return;
    }
    memcpy(c->out + c->outlen, line, (size_t)n);
    c->outlen += (size_t)n;
}

static void client_close(ControlClient *c) {
    if (c->fd >= 0) close(c->fd);
    c->fd = -1;
    c->inlen = c->outlen = 0;
    c->awaiting = 0;
    c->closing = 0;
    c->read_only = 0;
}

static void reply_status_locked(ControlServer *s, ControlClient *c) {
    const Status *t = &s->st;
    /* the routed layers after the fixed fields: " layers=moe2,head tau@moe2=0.3 collapsed@moe2=0 ..." */
    char lay[REC_MAX_LAYERS * (2 * REC_LAYER_NAME + 48) + 16] = "";
    size_t o = 0;
    if (t->nlayers > 0) {
        o += (size_t)snprintf(lay + o, sizeof lay - o, " layers=");
        for (int i = 0; i < t->nlayers && o < sizeof lay; i++)
            o += (size_t)snprintf(lay + o, sizeof lay - o, "%s%s", i ? "," : "", t->layer[i]);
        for (int i = 0; i < t->nlayers && o < sizeof lay; i++)
            o += (size_t)snprintf(lay + o, sizeof lay - o, " tau@%s=%.6g collapsed@%s=%d", t->layer[i], t->layer_tau[i],
                                  t->layer[i], t->layer_collapsed[i]);
    }
    control_reply_locked(c,
                 "ok step=%ld total=%ld epoch=%d epochs=%d epochs_done=%d state=%s tau=%.6g loss=%.6g acc=%.6g test_acc=%.6g "
                 "img_s=%.1f collapsed=%d alarm=%s pid=%ld session=%s%s%s%s",
                 /* epoch: the one in progress, as the screen counts it (1 during the first);
                  * epochs_done: the completed ones */
                 t->step, t->total, t->epoch < t->epochs ? t->epoch + 1 : t->epochs, t->epochs, t->epoch,
                 t->numeric  ? "paused-nan"
                 : t->paused ? "paused"
                             : "running",
                 t->tau, t->loss, t->acc, t->test_acc, t->img_s, t->collapsed,
                 t->alarm == ALARM_COLLAPSE ? "collapse" : t->alarm == ALARM_WARNING ? "warning" : "none", (long)getpid(),
                 s->dir, lay, t->alarm_text[0] ? " -- " : "", t->alarm_text);
}

/* One complete line from client c (mutex held). */
static void handle_line_locked(ControlServer *s, ControlClient *c, const char *line, size_t len) {
    TrainerCmd cmd;
    char err[512];
    switch (control_line_parse(line, len, &cmd, err, sizeof err)) {
    case CTL_LINE_ERROR: control_reply_locked(c, "error: %s", err); return;
    case CTL_LINE_STATUS: reply_status_locked(s, c); return;
    case CTL_LINE_DETACH:
        control_reply_locked(c, "ok bye");
        c->closing = 1;
        return;
    case CTL_LINE_HELP: {
        char words[256] = "";
        for (int i = 0; i < CMD_KIND_COUNT; i++)
            if (i != CMD_HELP) snprintf(words + strlen(words), sizeof words - strlen(words), "%s ", cmd_table[i].name);
        control_reply_locked(c, "ok commands: %sstatus detach readonly (see moelab help)", words);
        return;
    }
    case CTL_LINE_READONLY:
        c->read_only = 1;
        control_reply_locked(c, "ok read-only");
        return;
    case CTL_LINE_COMMAND: break;
    }
    if (c->read_only) {
        control_reply_locked(c, "error: read-only connection: '%s' refused (status, help and detach only)",
                             cmd_table[cmd.kind].name);
        return;
    }
    if (s->stop) {
        control_reply_locked(c, "error: the run has ended");
        return;
    }
    cmd.tag = ++s->next_tag;
    c->awaiting = cmd.tag; /* before the trainer can see it: its result finds this client */
    int queued;
    if (s->ops.submit) {
        pthread_mutex_unlock(&s->mu); /* the submit side takes its own lock */
        queued = s->ops.submit(s->ops.user, &cmd) == 0;
        pthread_mutex_lock(&s->mu);
    } else if (s->qn < CONTROL_QUEUE) {
        s->q[(s->qh + s->qn) % CONTROL_QUEUE] = cmd;
        s->qn++;
        pthread_cond_signal(&s->cv);
        queued = 1;
    } else {
        queued = 0;
    }
    if (!queued) {
        c->awaiting = 0;
        control_reply_locked(c, "error: command queue full, try again");
    }
}

/* Splits what a client sent into lines (mutex held). */
void control_client_lines_locked(ControlServer *s, ControlClient *c) {
    while (c->fd >= 0 && !c->awaiting && !c->closing && c->inlen > 0) {
        char *nl = memchr(c->in, '\n', c->inlen);
        if (!nl) {
            if (c->inlen > CONTROL_LINE_MAX + 1) { /* + 1: room for a CR before the newline */
                control_reply_locked(c, "error: line longer than %d bytes: closing the connection", CONTROL_LINE_MAX);
                c->closing = 1;
                c->inlen = 0;
            }
            return;
        }
        const size_t len = (size_t)(nl - c->in);
        c->last = mono_now();
        handle_line_locked(s, c, c->in, len);
        memmove(c->in, nl + 1, c->inlen - len - 1);
        c->inlen -= len + 1;
    }
}

static void accept_one(ControlServer *s) {
    const int fd = accept4(s->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return;
    struct ucred cr;
    socklen_t crn = sizeof cr;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &crn) != 0 || cr.uid != geteuid()) {
        const int known = crn == sizeof cr;
        logf_(s, 1, "control socket: refused a connection from uid %ld (pid %ld): only uid %ld may steer this run",
              known ? (long)cr.uid : -1L, known ? (long)cr.pid : -1L, (long)geteuid());
        static const char msg[] = "error: permission denied: only the owner of the run may steer it\n";
        ssize_t r = send(fd, msg, sizeof msg - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
        (void)r;
        close(fd);
        return;
    }
    pthread_mutex_lock(&s->mu);
    const double now = mono_now();
    int slot = -1, oldest = -1;
    for (int i = 0; i < CONTROL_MAX_CLIENTS && slot < 0; i++)
        if (s->cl[i].fd < 0) slot = i;
        else if (!s->cl[i].awaiting && (oldest < 0 || s->cl[i].last < s->cl[oldest].last)) oldest = i;
    if (slot < 0 && oldest >= 0) { /* full: the connection idle the longest makes room (the owner is never locked out) */
        ControlClient *o = &s->cl[oldest];
        s->evicted++;
        if (s->evicted == 1 || now - s->evict_logged >= CONTROL_EVICT_LOG_SEC) {
            if (s->evict_unlogged > 0)
                logf_(s, 1,
                      "control socket: %d connections: closed the one idle for %.0f s to make room for a new one "
                      "(and %ld more in the last %.0f s: a client reconnecting in a loop?)",
                      CONTROL_MAX_CLIENTS, now - o->last, s->evict_unlogged, now - s->evict_logged);
            else
                logf_(s, 1, "control socket: %d connections: closed the one idle for %.0f s to make room for a new one",
                      CONTROL_MAX_CLIENTS, now - o->last);
            s->evict_logged = now;
            s->evict_unlogged = 0;
        } else
            s->evict_unlogged++;
        control_reply_locked(o, "error: closed to make room for a new connection (this one was idle for %.0f s)", now - o->last);
        if (o->outlen) {
            ssize_t r = send(o->fd, o->out, o->outlen, MSG_NOSIGNAL | MSG_DONTWAIT);
            (void)r;
        }
        client_close(o);
        slot = oldest;
    }
    if (slot >= 0) {
        client_close(&s->cl[slot]);
        s->cl[slot].fd = fd;
        s->cl[slot].last = now;
        s->cl[slot].partial = 0;
        pthread_mutex_unlock(&s->mu);
        return;
    }
    pthread_mutex_unlock(&s->mu);
    static const char busy[] = "error: too many connections\n";
    ssize_t r = send(fd, busy, sizeof busy - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
    (void)r;
    close(fd);
}

static void client_read_locked(ControlServer *s, ControlClient *c) {
    for (;;) {
        const size_t room = sizeof c->in - c->inlen;
        if (room == 0) break;
        const ssize_t r = recv(c->fd, c->in + c->inlen, room, MSG_DONTWAIT);
        if (r > 0) {
            c->inlen += (size_t)r;
            control_client_lines_locked(s, c);
            if (c->awaiting || c->closing) break; /* the rest stays in the socket buffer */
            continue;
        }
        if (r < 0 && (errno == EINTR)) continue;
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
        /* end of file or error: a half line is never applied */
        if (c->inlen > 0 && !c->awaiting) control_reply_locked(c, "error: incomplete line (no newline) ignored");
        c->inlen = 0;
        c->closing = 1; /* closed after the reply to a request in flight */
        break;
    }
}

static void client_write_locked(ControlClient *c) {
    while (c->outlen > 0) {
        const ssize_t r = send(c->fd, c->out, c->outlen, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (r > 0) {
            memmove(c->out, c->out + r, c->outlen - (size_t)r);
            c->outlen -= (size_t)r;
            continue;
        }
        if (r < 0 && errno == EINTR) continue;
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
        client_close(c); /* the peer went away */
        return;
    }
    if (c->closing && !c->awaiting) client_close(c);
}

/* Closes the connections that hold a slot for nothing: an incomplete line older than
 * CONTROL_PARTIAL_SEC, or no complete line for CONTROL_IDLE_SEC (a request in flight keeps its
 * connection: its reply is coming). */
static void expire_clients(ControlServer *s) {
    pthread_mutex_lock(&s->mu);
    const double now = mono_now();
    for (int i = 0; i < CONTROL_MAX_CLIENTS; i++) {
        ControlClient *c = &s->cl[i];
        if (c->fd < 0 || c->awaiting || c->closing) continue;
        if (c->inlen == 0) c->partial = 0;
        else if (c->partial == 0) c->partial = now;
        if (c->partial > 0 && now - c->partial >= CONTROL_PARTIAL_SEC) {
            control_reply_locked(c, "error: incomplete line: no newline within %d s: closing the connection", CONTROL_PARTIAL_SEC);
            c->inlen = 0;
            c->closing = 1;
        } else if (now - c->last >= CONTROL_IDLE_SEC) {
            control_reply_locked(c, "error: idle for %d s: closing the connection", CONTROL_IDLE_SEC);
            c->closing = 1;
        }
        if (c->closing) client_write_locked(c);
    }
    pthread_mutex_unlock(&s->mu);
}

static void *server_main(void *arg) {
    ControlServer *s = arg;
    struct pollfd pf[CONTROL_MAX_CLIENTS + 2];
    int who[CONTROL_MAX_CLIENTS + 2];
    for (;;) {
        int n = 0;
        pthread_mutex_lock(&s->mu);
        const int stopping = s->stop;
        for (int i = 0; i < CONTROL_MAX_CLIENTS; i++) {
            ControlClient *c = &s->cl[i];
            if (c->fd < 0) continue;
            control_client_lines_locked(s, c); /* lines left after a reply arrived */
            client_write_locked(c);
            if (c->fd < 0) continue;
            short ev = 0;
            if (!c->awaiting && !c->closing && c->inlen < sizeof c->in) ev |= POLLIN;
            if (c->outlen) ev |= POLLOUT;
            if (!ev && c->closing) continue; /* a peer gone while its request is in flight: POLLHUP would spin */
            pf[n] = (struct pollfd){.fd = c->fd, .events = ev};
            who[n++] = i;
        }
        pthread_mutex_unlock(&s->mu);
        if (stopping) break;
        pf[n] = (struct pollfd){.fd = s->lfd, .events = POLLIN};
        who[n++] = -1;
        pf[n] = (struct pollfd){.fd = s->wake[0], .events = POLLIN};
        who[n++] = -2;
        const int pr = poll(pf, (nfds_t)n, 500);
        expire_clients(s);
        if (pr < 0 && errno != EINTR) break;
        if (pr <= 0) continue;
        for (int k = 0; k < n; k++) {
            if (!pf[k].revents) continue;
            if (who[k] == -2) {
                char buf[64];
                while (read(s->wake[0], buf, sizeof buf) > 0) {}
            } else if (who[k] == -1) {
                accept_one(s);
            } else {
                pthread_mutex_lock(&s->mu);
                ControlClient *c = &s->cl[who[k]];
                if (c->fd == pf[k].fd) {
                    if (pf[k].revents & (POLLIN | POLLHUP | POLLERR)) client_read_locked(s, c);
                    if (c->fd >= 0) client_write_locked(c);
                }
                pthread_mutex_unlock(&s->mu);
            }
        }
    }
    /* stopping: a last answer to everyone, written as far as the socket takes it */
    pthread_mutex_lock(&s->mu);
    for (int i = 0; i < CONTROL_MAX_CLIENTS; i++) {
        ControlClient *c = &s->cl[i];
        if (c->fd < 0) continue;
        if (c->awaiting) control_reply_locked(c, "error: the run has ended");
        c->awaiting = 0;
        client_write_locked(c);
        client_close(c);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

/* Is something listening on the socket at a? */
static int socket_alive(const struct sockaddr_un *a, socklen_t alen) {
    const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return 0;
    const int ok = connect(fd, (const struct sockaddr *)a, alen) == 0;
    close(fd);
    return ok;
}

ControlServer *control_start(const char *dir, const ControlOps *ops, char *err, size_t errn) {
    struct stat ds;
    if (stat(dir, &ds) != 0 || !S_ISDIR(ds.st_mode)) {
        snprintf(err, errn, "control socket: %s: not a folder", dir);
        return NULL;
    }
    if (ds.st_uid != geteuid()) {
        snprintf(err, errn, "control socket: %s belongs to uid %ld, not to this user: no socket (steering is off)", dir,
                 (long)ds.st_uid);
        return NULL;
    }
    ControlServer *s = calloc(1, sizeof *s);
    if (!s) {
        snprintf(err, errn, "control socket: out of memory");
        return NULL;
    }
    if (ops) s->ops = *ops;
    snprintf(s->dir, sizeof s->dir, "%s", dir);
    snprintf(s->path, sizeof s->path, "%s/%s", dir, CONTROL_SOCKET_NAME);
    s->lfd = -1;
    s->wake[0] = s->wake[1] = -1;
    for (int i = 0; i < CONTROL_MAX_CLIENTS; i++) s->cl[i].fd = -1;
    struct sockaddr_un a;
    socklen_t alen;
    int dfd;
    if (control_address(dir, &a, &alen, &dfd)) {
        snprintf(err, errn, "control socket: %s: %s", dir, strerror(errno));
        free(s);
        return NULL;
    }
    struct stat ls;
    if (lstat(s->path, &ls) == 0) {
        if (!S_ISSOCK(ls.st_mode)) {
            snprintf(err, errn, "control socket: %s exists and is not a socket: not replaced (steering is off)",
                     s->path);
            goto fail;
        }
        if (socket_alive(&a, alen)) {
            snprintf(err, errn, "control socket: %s: another process is listening on it (steering is off)", s->path);
            goto fail;
        }
        if (unlink(s->path) != 0 && errno != ENOENT) {
            snprintf(err, errn, "control socket: cannot remove the stale %s: %s", s->path, strerror(errno));
            goto fail;
        }
        logf_(s, 0, "control socket: replaced the stale %s left by an earlier run", s->path);
    }
    s->lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (s->lfd < 0) {
        snprintf(err, errn, "control socket: socket: %s", strerror(errno));
        goto fail;
    }
    const mode_t old = umask(0177); /* born 0600: no window in which others could connect */
    const int b = bind(s->lfd, (const struct sockaddr *)&a, alen);
    const int berr = errno;
    umask(old);
    if (b != 0) {
        snprintf(err, errn, "control socket: bind %s: %s", s->path, strerror(berr));
        goto fail;
    }
    chmod(s->path, 0600);
    struct stat me;
    if (lstat(s->path, &me) == 0) {
        s->dev = me.st_dev;
        s->ino = me.st_ino;
    }
    if (listen(s->lfd, 32) != 0 || pipe2(s->wake, O_NONBLOCK | O_CLOEXEC) != 0) {
        snprintf(err, errn, "control socket: listen %s: %s", s->path, strerror(errno));
        unlink(s->path);
        goto fail;
    }
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    sigset_t all, prev;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &prev); /* signals stay with the main thread */
    const int pc = pthread_create(&s->th, NULL, server_main, s);
    pthread_sigmask(SIG_SETMASK, &prev, NULL);
    if (pc) {
        snprintf(err, errn, "control socket: cannot start its thread");
        unlink(s->path);
        pthread_mutex_destroy(&s->mu);
        pthread_cond_destroy(&s->cv);
        goto fail;
    }
    s->started = 1;
    if (dfd >= 0) close(dfd);
    return s;
fail:
    if (dfd >= 0) close(dfd);
    if (s->lfd >= 0) close(s->lfd);
    if (s->wake[0] >= 0) close(s->wake[0]);
    if (s->wake[1] >= 0) close(s->wake[1]);
    free(s);
    return NULL;
}

void control_stop(ControlServer *s) {
    if (!s) return;
    pthread_mutex_lock(&s->mu);
    s->stop = 1;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    wake(s);
    pthread_join(s->th, NULL);
    struct stat me;
    if (lstat(s->path, &me) == 0 && me.st_dev == s->dev && me.st_ino == s->ino) unlink(s->path);
    close(s->lfd);
    close(s->wake[0]);
    close(s->wake[1]);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    free(s);
}

// ---------------------------------------------------------------------------------------------
// the training side

int control_take(ControlServer *s, TrainerCmd *c, int wait_ms) {
    if (!s) return 0;
    pthread_mutex_lock(&s->mu);
    if (s->qn == 0 && wait_ms > 0 && !s->stop) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += wait_ms / 1000;
        ts.tv_nsec += (long)(wait_ms % 1000) * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&s->cv, &s->mu, &ts);
    }
    int got = 0;
    if (s->qn > 0) {
        *c = s->q[s->qh];
        s->qh = (s->qh + 1) % CONTROL_QUEUE;
        s->qn--;
        got = 1;
    }
    pthread_mutex_unlock(&s->mu);
    return got;
}

/* The client waiting for tag (mutex held), or NULL (it left). */
ControlClient *control_awaiting_locked(ControlServer *s, long tag) {
    for (int i = 0; i < CONTROL_MAX_CLIENTS; i++)
        if (s->cl[i].fd >= 0 && s->cl[i].awaiting == tag) return &s->cl[i];
    return NULL;
}

void control_handed(ControlServer *s, const TrainerCmd *c) {
    if (!s) return;
    pthread_mutex_lock(&s->mu);
    if (s->pending) { /* the previous one produced no event (nothing to report): it was taken */
        ControlClient *w = control_awaiting_locked(s, s->pending);
        if (w) {
            control_reply_locked(w, "ok step=%ld", s->st.step);
            w->awaiting = 0;
        }
    }
    s->pending = c->tag;
    pthread_mutex_unlock(&s->mu);
    if (c->tag) wake(s);
}

void control_event(ControlServer *s, const TrainerEvent *e) {
    /* only a socket command's result answers the client waiting for one: a note of no command (a
     * run's start), a --commands file's or the screen's command must not take its reply */
    if (!s || e->origin != CMD_FROM_SOCKET || (e->kind != TEV_APPLIED && e->kind != TEV_FAILED && e->kind != TEV_NOTE))
        return;
    pthread_mutex_lock(&s->mu);
    const long tag = s->pending;
    s->pending = 0;
    ControlClient *w = tag ? control_awaiting_locked(s, tag) : NULL;
    if (w) {
        if (e->kind == TEV_FAILED) control_reply_locked(w, "error: %s", e->text);
        else if (e->kind == TEV_NOTE) control_reply_locked(w, "ok step=%ld note: %s", e->step, e->text);
        else control_reply_locked(w, "ok step=%ld %s", e->step, e->text);
        w->awaiting = 0;
    }
    pthread_mutex_unlock(&s->mu);
    if (w) wake(s);
}

void control_note_state(ControlServer *s, const TrainerState *st) {
    if (!s) return;
    pthread_mutex_lock(&s->mu);
    s->st.step = st->step;
    s->st.epoch = st->epoch;
    s->st.paused = st->paused;
    s->st.numeric = st->numeric;
    pthread_mutex_unlock(&s->mu);
}

void control_note_step(ControlServer *s, const StepRecord *r) {
    if (!s) return;
    pthread_mutex_lock(&s->mu);
    s->st.tau = r->tau;
    s->st.loss = r->loss;
    s->st.acc = r->acc;
    s->st.img_s = r->img_per_s;
    s->st.collapsed = r->collapsed;
    s->st.alarm = r->alarm;
    snprintf(s->st.alarm_text, sizeof s->st.alarm_text, "%s", r->alarm ? r->collapse_text : "");
    for (int i = 0; i < r->nlayers && i < s->st.nlayers; i++) {
        s->st.layer_tau[i] = r->layer[i].moe.tau;
        s->st.layer_collapsed[i] = r->layer[i].collapsed;
    }
    pthread_mutex_unlock(&s->mu);
}

void control_note_layers(ControlServer *s, const RunRecord *r) {
    if (!s) return;
    pthread_mutex_lock(&s->mu);
    s->st.nlayers = r->nlayers < REC_MAX_LAYERS ? r->nlayers : REC_MAX_LAYERS;
    for (int i = 0; i < s->st.nlayers; i++) {
        snprintf(s->st.layer[i], sizeof s->st.layer[i], "%s", r->layer[i].name);
        s->st.layer_tau[i] = NAN;
        s->st.layer_collapsed[i] = 0;
    }
    pthread_mutex_unlock(&s->mu);
}

void control_note_eval(ControlServer *s, const EvalRecord *r) {
    if (!s) return;
    pthread_mutex_lock(&s->mu);
    s->st.test_acc = r->test_acc;
    pthread_mutex_unlock(&s->mu);
}

void control_note_run(ControlServer *s, long total_steps, int epochs) {
    if (!s) return;
    pthread_mutex_lock(&s->mu);
    s->st.total = total_steps;
    s->st.epochs = epochs;
    pthread_mutex_unlock(&s->mu);
}

// ---------------------------------------------------------------------------------------------
// the client side

const char *control_uid_text(long uid, char *buf, size_t n) {
    char pwbuf[1024];
    struct passwd pw, *res = NULL;
    if (getpwuid_r((uid_t)uid, &pw, pwbuf, sizeof pwbuf, &res) == 0 && res) snprintf(buf, n, "uid %ld (%s)", uid, res->pw_name);
    else snprintf(buf, n, "uid %ld", uid);
    return buf;
}

int control_connect(const char *dir, long *owner) {
    if (owner) *owner = -1;
    struct sockaddr_un a;
    socklen_t alen;
    int dfd;
    if (control_address(dir, &a, &alen, &dfd)) return -1;
    const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        if (dfd >= 0) close(dfd);
        return -1;
    }
    int rc;
    do rc = connect(fd, (const struct sockaddr *)&a, alen);
    while (rc != 0 && errno == EINTR);
    const int e = errno;
    if (dfd >= 0) close(dfd);
    if (rc != 0) {
        close(fd);
        errno = e;
        return -1;
    }
    /* the listener's credentials (taken when it called listen): a socket in a folder someone else
     * controls may be served by another user's process, which must not see our commands */
    struct ucred cr;
    socklen_t crn = sizeof cr;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &crn) != 0 || crn != sizeof cr || cr.uid != geteuid()) {
        if (owner) *owner = crn == sizeof cr ? (long)cr.uid : -1;
        close(fd);
        errno = EPERM;
        return -1;
    }
    return fd;
}

int control_request(int fd, const char *line, char *reply, size_t n, int timeout_ms) {
    size_t len = strlen(line), off = 0;
    char *msg = malloc(len + 2);
    if (!msg) {
        snprintf(reply, n, "out of memory");
        return -1;
    }
    memcpy(msg, line, len);
    msg[len++] = '\n';
    while (off < len) {
        const ssize_t w = send(fd, msg + off, len - off, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            const int e = errno;
            free(msg);
            /* refused at once (another uid, too many connections): the reason may be waiting */
            const ssize_t r = recv(fd, reply, n - 1, MSG_DONTWAIT);
            if (r > 0) {
                reply[r] = 0;
                reply[strcspn(reply, "\n")] = 0;
                return 0;
            }
            snprintf(reply, n, "sending to the run: %s", strerror(e));
            return -1;
        }
        off += (size_t)w;
    }
    free(msg);
    size_t got = 0;
    for (;;) {
        struct pollfd pf = {.fd = fd, .events = POLLIN};
        const int pr = poll(&pf, 1, timeout_ms);
        if (pr < 0 && errno == EINTR) continue;
        if (pr == 0) {
            snprintf(reply, n, "no reply from the run within %.0f s", timeout_ms / 1000.0);
            return -1;
        }
        char ch;
        const ssize_t r = pr < 0 ? -1 : recv(fd, &ch, 1, 0);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            if (got > 0 && got < n) { /* a last line without newline (a refusal) */
                reply[got] = 0;
                return 0;
            }
            snprintf(reply, n, "the run closed the connection");
            return -1;
        }
        if (ch == '\n') break;
        if (got + 1 < n) reply[got++] = ch;
    }
    reply[got] = 0;
    return 0;
}
