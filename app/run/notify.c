/* notify.c — alerts: `--notify CMD` run through /bin/sh, never blocking training (notify.h). */
#define _GNU_SOURCE
#include "notify.h"

#include "core/common.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static const char *const names[NOTIFY_N] = {"collapse", "warning", "expert-death", "nan", "finished", "failed"};

const char *notify_event_name(int ev) { return ev >= 0 && ev < NOTIFY_N ? names[ev] : "?"; }

void notify_init(Notifier *n, const char *cmd, double timeout, const char *session) {
    memset(n, 0, sizeof *n);
    n->cmd = cmd && cmd[0] ? cmd : NULL;
    n->timeout = timeout > 0 ? timeout : 30;
    n->session = session ? session : "";
    for (int i = 0; i < NOTIFY_N; i++) n->last_step[i] = -1;
}

int notify_event_of(const TrainerEvent *e) {
    switch (e->kind) {
    case TEV_NUMERIC: return NOTIFY_NAN;
    case TEV_COLLAPSE:
        if (!strncmp(e->text, "expert death", 12)) return NOTIFY_DEATH;
        if (!strncmp(e->text, "collapse", 8)) return NOTIFY_COLLAPSE;
        if (!strncmp(e->text, "warning", 7)) return NOTIFY_WARNING;
        return -1; /* a revival: good news waits for the morning */
    default: return -1;
    }
}

static void say(Notifier *n, long step, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void say(Notifier *n, long step, const char *fmt, ...) {
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    ml_log(0, "%s", line);
    if (n->log) n->log(n->user, step, line);
}

/* one environment entry "KEY=value" (value cut to a line, newlines made spaces) */
static char *env_entry(const char *key, const char *val) {
    const size_t k = strlen(key), v = strlen(val);
    char *s = malloc(k + v + 2);
    if (!s) return NULL;
    memcpy(s, key, k);
    s[k] = '=';
    for (size_t i = 0; i < v; i++) s[k + 1 + i] = val[i] == '\n' || val[i] == '\r' ? ' ' : val[i];
    s[k + 1 + v] = 0;
    return s;
}

/* The notification's stdout and stderr: SESSION/notify.log opened for appending (owner-only: an
 * output may hold a webhook's address) with a header line, close-on-exec here (the child gets it
 * as 1 and 2); -1 without a session or when it cannot be opened (the child then writes to
 * /dev/null). */
static int open_output(const Notifier *n, int ev, long step) {
    if (!n->session || !n->session[0]) return -1;
    char path[4200];
    if (snprintf(path, sizeof path, "%s/notify.log", n->session) >= (int)sizeof path) return -1;
    const int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0600);
    if (fd < 0) return -1;
    char when[64] = "";
    const time_t now = time(NULL);
    struct tm tmv;
    if (localtime_r(&now, &tmv)) strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", &tmv);
    char head[160];
    const int k = snprintf(head, sizeof head, "--- notify %s, step %ld, %s\n", names[ev], step, when);
    if (k > 0 && write(fd, head, (size_t)k) < 0) { /* a full disk: the command still runs */
    }
    return fd;
}

int notify_send(Notifier *n, int ev, long step, const char *text) {
    if (!n->cmd || ev < 0 || ev >= NOTIFY_N) return 0;
    /* the other views of the same episode; but each expert death is its own alert, and two experts
     * (or one in each of two layers) can die at the same step */
    if (ev != NOTIFY_DEATH && n->last_step[ev] == step) return 0;
    n->last_step[ev] = step;
    notify_poll(n, 0);
    if (n->nkid == NOTIFY_MAX_KIDS) {
        n->failed++;
        say(n, step, "notify %s: not sent, %d notifications still running", names[ev], NOTIFY_MAX_KIDS);
        return -1;
    }
    /* the environment: ours without any MOELAB_ variable of the same names, then the event's */
    size_t ne = 0;
    while (environ[ne]) ne++;
    char **envp = calloc(ne + 5, sizeof *envp);
    char stepbuf[32];
    snprintf(stepbuf, sizeof stepbuf, "%ld", step);
    char *own[4] = {env_entry("MOELAB_EVENT", names[ev]), env_entry("MOELAB_SESSION", n->session),
                    env_entry("MOELAB_STEP", stepbuf), env_entry("MOELAB_TEXT", text ? text : "")};
    int rc = -1;
    if (envp && own[0] && own[1] && own[2] && own[3]) {
        size_t j = 0;
        for (size_t i = 0; i < ne; i++) {
            const char *e = environ[i];
            if (!strncmp(e, "MOELAB_EVENT=", 13) || !strncmp(e, "MOELAB_SESSION=", 15) ||
                !strncmp(e, "MOELAB_STEP=", 12) || !strncmp(e, "MOELAB_TEXT=", 12))
                continue;
            envp[j++] = environ[i];
        }
        for (int i = 0; i < 4; i++) envp[j++] = own[i];
        envp[j] = NULL;
        posix_spawnattr_t at;
        posix_spawn_file_actions_t fa;
        posix_spawnattr_init(&at);
        posix_spawn_file_actions_init(&fa);
        /* its own process group (killed whole on a timeout); stdin from /dev/null, so a command that
         * reads never takes the terminal; default signal dispositions */
        sigset_t none, all;
        sigemptyset(&none);
        sigfillset(&all);
        posix_spawnattr_setpgroup(&at, 0);
        posix_spawnattr_setsigmask(&at, &none);
        posix_spawnattr_setsigdefault(&at, &all);
        posix_spawnattr_setflags(&at, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
        posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
        /* stdout and stderr: the session's notify.log (a header line per notification), never
         * moelab's own (the live screen, a pipe a reader waits on); every other descriptor
         * (live.h5, the lock, the control socket, the terminal) closed */
        const int out = open_output(n, ev, step);
        if (out >= 0) {
            posix_spawn_file_actions_adddup2(&fa, out, 1);
            posix_spawn_file_actions_adddup2(&fa, out, 2);
        } else {
            posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
            posix_spawn_file_actions_adddup2(&fa, 1, 2);
        }
        posix_spawn_file_actions_addclosefrom_np(&fa, 3);
        char *argv[] = {"sh", "-c", (char *)n->cmd, NULL};
        pid_t pid;
        const int err = posix_spawn(&pid, "/bin/sh", &fa, &at, argv, envp);
        posix_spawn_file_actions_destroy(&fa);
        posix_spawnattr_destroy(&at);
        if (out >= 0) close(out);
        if (err) {
            n->failed++;
            say(n, step, "notify %s: cannot start /bin/sh: %s", names[ev], strerror(err));
        } else {
            NotifyKid *k = &n->kid[n->nkid++];
            k->pid = pid;
            k->t0 = ml_now();
            k->ev = ev;
            k->step = step;
            n->sent++;
            rc = 0;
        }
    } else {
        n->failed++;
        say(n, step, "notify %s: out of memory", names[ev]);
    }
    for (int i = 0; i < 4; i++) free(own[i]);
    free(envp);
    return rc;
}

void notify_trainer_event(Notifier *n, const TrainerEvent *e) {
    const int ev = notify_event_of(e);
    if (ev < 0) return;
    if (ev == NOTIFY_COLLAPSE || ev == NOTIFY_WARNING) {
        if (n->open[ev]) return; /* another view of the episode already told */
        n->open[ev] = 1;
    }
    notify_send(n, ev, e->step, e->text);
}

void notify_alarm(Notifier *n, int level) {
    if (level < 2) n->open[NOTIFY_COLLAPSE] = 0;
    if (level < 1) n->open[NOTIFY_WARNING] = 0;
}

static volatile sig_atomic_t g_wait_signal;
static void on_wait_signal(int sig) { g_wait_signal = sig; }

/* A SIGINT / SIGTERM while the run waits for its notifications: each is killed with its group and
 * the log says so. */
static void kill_all(Notifier *n, int sig) {
    for (int i = 0; i < n->nkid; i++) {
        NotifyKid *k = &n->kid[i];
        int st;
        kill(-k->pid, SIGKILL);
        kill(k->pid, SIGKILL);
        waitpid(k->pid, &st, 0);
        n->killed++;
        n->failed++;
        say(n, k->step, "notify %s: killed after %.1f s (%s while the run waited for it)", names[k->ev],
            ml_now() - k->t0, sig == SIGINT ? "SIGINT" : "SIGTERM");
    }
    n->nkid = 0;
}

void notify_poll(Notifier *n, int wait) {
    const double until = ml_now() + n->timeout;
    /* waiting: SIGINT / SIGTERM end the wait (the run's own handlers would only note them and the
     * process would hold its session lock up to --notify-timeout longer) */
    struct sigaction sa, old_int, old_term;
    const int hook = wait && n->nkid > 0;
    if (hook) {
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_wait_signal;
        sigemptyset(&sa.sa_mask);
        g_wait_signal = 0;
        sigaction(SIGINT, &sa, &old_int);
        sigaction(SIGTERM, &sa, &old_term);
    }
    while (n->nkid > 0) {
        for (int i = 0; i < n->nkid;) {
            NotifyKid *k = &n->kid[i];
            int st;
            const pid_t r = waitpid(k->pid, &st, WNOHANG);
            const double dt = ml_now() - k->t0;
            int done = 0;
            if (r == k->pid) {
                done = 1;
                if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
                    say(n, k->step, "notify %s: sent (exit 0, %.1f s)", names[k->ev], dt);
                else if (WIFEXITED(st)) {
                    n->failed++;
                    say(n, k->step, "notify %s: the command failed (exit %d, %.1f s)", names[k->ev], WEXITSTATUS(st),
                        dt);
                } else {
                    n->failed++;
                    say(n, k->step, "notify %s: the command died of signal %d", names[k->ev],
                        WIFSIGNALED(st) ? WTERMSIG(st) : 0);
                }
            } else if (r < 0 && errno == ECHILD) {
                done = 1; /* reaped elsewhere (a SIGCHLD handler): nothing to say */
            } else if (dt > n->timeout) {
                kill(-k->pid, SIGKILL);
                kill(k->pid, SIGKILL);
                waitpid(k->pid, &st, 0);
                done = 1;
                n->killed++;
                n->failed++;
                say(n, k->step, "notify %s: killed after %.0f s (--notify-timeout)", names[k->ev], n->timeout);
            }
            if (done) n->kid[i] = n->kid[--n->nkid];
            else i++;
        }
        if (!wait || n->nkid == 0) break;
        if (g_wait_signal) {
            kill_all(n, g_wait_signal);
            break;
        }
        if (ml_now() > until + 1) break; /* cannot happen: the timeout kills them first */
        struct timespec ts = {0, 20 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    if (hook) {
        sigaction(SIGINT, &old_int, NULL);
        sigaction(SIGTERM, &old_term, NULL);
        const int sig = g_wait_signal;
        const struct sigaction *o = sig == SIGINT ? &old_int : &old_term;
        /* the run's own handler still hears of it (a headless run notes the signal) */
        if (sig && !(o->sa_flags & SA_SIGINFO) && o->sa_handler != SIG_DFL && o->sa_handler != SIG_IGN)
            o->sa_handler(sig);
    }
}
