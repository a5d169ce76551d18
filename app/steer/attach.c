/* attach.c — `moelab attach SESSION | SWEEP_DIR`: the live screen of a run that trains in another
 * process (headless under nohup, tmux, a Slurm job), steering it through its control socket.
 *
 *   - the panels are the live screen's (views/), fed from the session's live.h5 (SWMR reads,
 *     app/history_feed.c): the whole history at once, then every second what the run appended
 *     (only the new rows are read: session_follow_poll);
 *   - the command line (readline, as on the live screen) sends each line to DIR/control.sock and
 *     shows the reply in the log; `status` is asked every second for the status bar;
 *   - q (empty command line) detaches and leaves the run going; `quit` stops the run after a y/n;
 *   - --read-only: a viewer only: the connection says `readonly` first (the run then refuses
 *     every command from it), and this side sends none: a typed command, space (pause) and `quit`
 *     are refused in the log with a message, and the screen keeps following; q still detaches;
 *   - several attachers at once are fine (each has its own connection and reads live.h5);
 *   - a session nobody is training: say so and offer `moelab browse`;
 *   - a folder of sessions (a sweep): list its runs with state, epoch, accuracy and ETA, and
 *     attach to the one chosen.
 * This process never writes the session; only the UI thread exists. */
#define _GNU_SOURCE
#include "app/cli/config.h"
#include "app/cli/app.h"
#include "app/browse/browse.h"
#include "app/cli/commands.h"
#include "app/steer/control.h"
#include "app/run/runsession.h"
#include "app/live/history_feed.h"
#include "app/term/screen.h"
#include "app/term/term.h"
#include "app/term/tui_cmdline.h"

#include <errno.h>
#include <langinfo.h>
#include <locale.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "views/draw.h"
#include "views/plot.h"
#include "views/panels.h"
#include "views/view.h"

#define RELOAD_SEC 1.0 /* live.h5 re-read period */
#define STATUS_SEC 1.0 /* `status` request period */
#define MAX_INFLIGHT 32
#define Q_DETACH_SEC 0.4 /* q on an empty line detaches when no key follows within this time */

enum { REQ_STATUS, REQ_COMMAND, REQ_HELLO };

typedef struct {
    const char *dir;
    SessionHistory h0;  /* the first load: the views' class names point into it */
    SessionHistory cur; /* a whole re-read after the follower lost the file (else h0 is followed) */
    int have_cur;
    SessionFollow *follow; /* appends the new rows of live.h5 to the followed history */
    HistoryFed fed;
    TauSchedule base;
    ViewCtx ctx;
    Screen scr; /* panels, help, theme, layout, focus / zoom (app/screen.h) */
    int fd;     /* the control socket (-1 once the run went away) */
    char in[8192];
    size_t inlen;
    int req[MAX_INFLIGHT]; /* kinds of the requests waiting for a reply, in order */
    char req_text[MAX_INFLIGHT][256];
    int rq_head, rq_n;
    int status_wait;
    /* from the last `status` reply */
    long step, total;
    int epoch, epochs, paused;
    long run_pid; /* the training process (ctl status pid=; 0 until known) */
    double img_s, tau;
    char state[24];
    int run_ended;
    int read_only; /* --read-only: no command is ever sent */
    TermMouseParser mp;
    int confirm_quit, leave;
    double q_at; /* > 0: q pressed on an empty line at this time; detach unless more keys follow */
    double next_reload, next_status, t_open;
    int dirty;
} Attach;

static void alog(Attach *a, int level, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void alog(Attach *a, int level, const char *fmt, ...) {
    char buf[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (a->scr.ps.have[PANEL_LOG]) {
        const ViewMsg m = {.kind = VIEW_MSG_LOG, .level = level, .text = buf};
        view_update(&a->scr.ps.v[PANEL_LOG], &m);
    }
    a->dirty = 1;
}

// ---------------------------------------------------------------------------------------------
// the socket

static void run_gone(Attach *a, const char *why) {
    if (a->fd >= 0) close(a->fd);
    a->fd = -1;
    a->rq_n = 0;
    a->status_wait = 0;
    if (!a->run_ended) alog(a, VIEW_LOG_WARN, "the run is no longer listening (%s): q to leave", why);
    a->run_ended = 1;
    snprintf(a->state, sizeof a->state, "ENDED");
}

static int send_request(Attach *a, int kind, const char *text) {
    if (a->fd < 0) {
        alog(a, VIEW_LOG_WARN, "'%s': the run is not listening any more", text);
        return -1;
    }
    if (a->rq_n == MAX_INFLIGHT) {
        alog(a, VIEW_LOG_ERROR, "'%s': too many requests waiting for the run, try again", text);
        return -1;
    }
    char line[CONTROL_LINE_MAX + 2];
    const int n = snprintf(line, sizeof line, "%s\n", text);
    for (int off = 0; off < n;) {
        const ssize_t w = send(a->fd, line + off, (size_t)(n - off), MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            run_gone(a, strerror(errno));
            return -1;
        }
        off += (int)w;
    }
    const int i = (a->rq_head + a->rq_n) % MAX_INFLIGHT;
    a->req[i] = kind;
    snprintf(a->req_text[i], sizeof a->req_text[i], "%s", text);
    a->rq_n++;
    if (kind == REQ_STATUS) a->status_wait = 1;
    return 0;
}

static void parse_status(Attach *a, const char *r) {
    const char *p;
    if ((p = strstr(r, "step="))) a->step = atol(p + 5);
    if ((p = strstr(r, "total="))) a->total = atol(p + 6);
    if ((p = strstr(r, " epochs_done="))) a->epoch = atoi(p + 13); /* completed epochs */
    else if ((p = strstr(r, " epoch="))) a->epoch = atoi(p + 7);   /* a run from before epochs_done */
    if ((p = strstr(r, "epochs="))) a->epochs = atoi(p + 7);
    if ((p = strstr(r, "tau="))) a->tau = atof(p + 4);
    if ((p = strstr(r, "img_s="))) a->img_s = atof(p + 6);
    if ((p = strstr(r, " pid="))) a->run_pid = atol(p + 5);
    if ((p = strstr(r, "state="))) {
        char s[24] = "";
        sscanf(p + 6, "%23s", s);
        a->paused = strncmp(s, "paused", 6) == 0;
        snprintf(a->state, sizeof a->state, "%s",
                 !strcmp(s, "paused-nan") ? "PAUSED (NaN)"
                 : a->paused              ? "PAUSED"
                                          : "RUNNING");
    }
}

static void on_reply(Attach *a, const char *r) {
    if (a->rq_n == 0) {
        alog(a, VIEW_LOG_WARN, "run: %s", r);
        return;
    }
    const int i = a->rq_head;
    a->rq_head = (a->rq_head + 1) % MAX_INFLIGHT;
    a->rq_n--;
    if (a->req[i] == REQ_HELLO) { /* a run from before `readonly`: this side still sends nothing */
        if (strncmp(r, "ok", 2))
            alog(a, VIEW_LOG_WARN, "the run does not know read-only connections (%s); this viewer sends it no command", r);
        return;
    }
    if (a->req[i] == REQ_STATUS) {
        a->status_wait = 0;
        if (!strncmp(r, "ok", 2)) parse_status(a, r);
        a->dirty = 1;
        return;
    }
    const int ok = !strncmp(r, "ok", 2);
    alog(a, ok ? VIEW_LOG_CMD : VIEW_LOG_ERROR, "%s -> %s", a->req_text[i], r);
}

static void read_socket(Attach *a) {
    while (a->fd >= 0) {
        if (a->inlen == sizeof a->in) a->inlen = 0; /* a reply longer than the buffer: drop it */
        const ssize_t r = recv(a->fd, a->in + a->inlen, sizeof a->in - a->inlen, MSG_DONTWAIT);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
        if (r <= 0) {
            run_gone(a, r == 0 ? "it closed the connection" : strerror(errno));
            break;
        }
        a->inlen += (size_t)r;
        char *nl;
        while ((nl = memchr(a->in, '\n', a->inlen))) {
            *nl = 0;
            on_reply(a, a->in);
            const size_t used = (size_t)(nl - a->in) + 1;
            memmove(a->in, nl + 1, a->inlen - used);
            a->inlen -= used;
        }
    }
}

// ---------------------------------------------------------------------------------------------
// live.h5

/* What the run appended since the last look: the follower reads only the new rows (SWMR refresh
 * of each dataset, sessions/follow.c); when it cannot (no follower yet, the file replaced, rows
 * dropped by a resume, a read caught mid-write) the whole file is re-read and followed from there. */
static void reload(Attach *a) {
    SessionHistory *h = a->have_cur ? &a->cur : &a->h0;
    if (!a->follow || session_follow_poll(a->follow, h, NULL) != ML_OK) {
        session_follow_close(a->follow);
        a->follow = NULL;
        SessionHistory nh;
        if (session_history_load(a->dir, &nh) != ML_OK) return; /* a write in progress: next time */
        if (a->have_cur) session_history_free(&a->cur);
        a->cur = nh; /* (h0 stays: the views' class names point into it) */
        a->have_cur = 1;
        h = &a->cur;
        a->follow = session_follow_open(h);
    }
    const SessionHistory *nh = h;
    if (a->fed.steps > nh->nsteps) a->fed.steps = nh->nsteps; /* rows dropped by a resume */
    if (a->fed.evals > nh->nevals) a->fed.evals = nh->nevals;
    if (a->fed.events > nh->nevents) a->fed.events = nh->nevents;
    if (history_feed(nh, &a->scr.ps, &a->fed, -1, &a->base)) a->dirty = 1;
    if (a->run_ended)
        snprintf(a->state, sizeof a->state, "%s", !strcmp(nh->info.status, "finished") ? "FINISHED" : "ENDED");
    if (nh->nsteps > 0 && a->fd < 0) a->step = nh->steps[nh->nsteps - 1].step;
}

// ---------------------------------------------------------------------------------------------
// drawing (the live screen's layout)

static void draw_cmdline(WINDOW *w, void *user) {
    Attach *a = user;
    if (a->confirm_quit) {
        screen_confirm(w, &a->scr, "Stop the run? It stops after the current step and writes its checkpoint. (y/n) ");
        return;
    }
    cmdline_draw(a->fd < 0        ? "the run has ended: q leaves"
                 : a->read_only ? "read-only: commands are refused; q detaches, ? help"
                                : "commands go to the run; q detaches, ? help");
}

static void fill_status(Attach *a, RunStatus *rs, char *note, size_t noten) {
    memset(rs, 0, sizeof *rs);
    rs->state = a->state[0] ? a->state : "ATTACHING";
    rs->state_role = a->paused ? TH_PAUSED : TH_RUNNING;
    rs->step = a->step;
    rs->epoch = a->epoch;
    rs->img_per_s = a->img_s;
    rs->eta = a->img_s > 0 && a->total > a->step && a->fd >= 0 && !a->paused
                  ? (a->total - a->step) * (double)(a->ctx.batch > 0 ? a->ctx.batch : 1) / a->img_s
                  : -1.0;
    rs->elapsed = ml_now() - a->t_open;
    rs->session = a->dir;
    /* the run's process, not this screen's (several attachers share one run) */
    if (a->run_pid > 0) snprintf(note, noten, "attached%s to pid %ld", a->read_only ? " read-only" : "", a->run_pid);
    else snprintf(note, noten, "attached%s", a->read_only ? " read-only" : "");
    rs->note = note;
}

static void render(Attach *a) {
    RunStatus rs;
    char note[96], small[96];
    fill_status(a, &rs, note, sizeof note);
    const ViewMsg sm = {.kind = VIEW_MSG_STATUS, .status = &rs};
    panels_update(&a->scr.ps, &sm);
    snprintf(small, sizeof small, "%s  step %ld/%ld", rs.state, rs.step, a->total);
    screen_render(&a->scr, small, draw_cmdline, a);
}

// ---------------------------------------------------------------------------------------------
// input

/* --read-only: what would have changed the run is said in the log and not sent. */
static void refuse(Attach *a, const char *what) {
    alog(a, VIEW_LOG_ERROR, "read-only: %s refused (attached with --read-only: no commands, no pause, no quit of the run; q detaches)", what);
}

static void on_line(char *line, void *user) {
    Attach *a = user;
    if (!line) {
        a->leave = 1;
        return;
    }
    char *p = line;
    while (*p == ' ' || *p == '\t') p++;
    size_t len = strlen(p);
    while (len > 0 && (p[len - 1] == ' ' || p[len - 1] == '\t')) p[--len] = 0;
    if (*p) {
        cmdline_history_add(p);
        TrainerCmd c;
        char err[256];
        if (screen_log_filter(&a->scr, p)) {
            /* `/text`: the log's filter (app/term/screen.c) */
        } else if (!strcmp(p, "detach")) a->leave = 1;
        else if (!strcmp(p, "status")) send_request(a, REQ_COMMAND, p);
        else if (command_parse(p, &c, err, sizeof err)) alog(a, VIEW_LOG_ERROR, "error: %s", err);
        else if (c.kind == CMD_HELP) a->scr.help_on = 1;
        else if (a->read_only) {
            char what[300];
            snprintf(what, sizeof what, "'%s'", p);
            refuse(a, what);
        } else if (c.kind == CMD_QUIT) a->confirm_quit = 1;
        else send_request(a, REQ_COMMAND, c.text);
    }
    a->dirty = 1;
    free(line);
}

static void on_cmdline_msg(int level, const char *text, void *user) {
    alog(user, level >= 2 ? VIEW_LOG_ERROR : level == 1 ? VIEW_LOG_WARN : VIEW_LOG_INFO, "%s", text);
}

static void handle_key(Attach *a, int c) {
    a->dirty = 1;
    if (c == KEY_RESIZE) return;
    if (c == 12) {
        clearok(curscr, TRUE);
        a->scr.force_clear = 1;
        return;
    }
    if (a->confirm_quit) {
        a->confirm_quit = 0;
        if (c == 'y' || c == 'Y') send_request(a, REQ_COMMAND, "quit");
        return;
    }
    if (a->scr.help_on) {
        if (c == 27 || c == '?' || c == 'q') a->scr.help_on = 0;
        return;
    }
    if (a->q_at > 0) { /* more keys right after q: a command that starts with q (`quit`) */
        a->q_at = 0;
        cmdline_feed('q');
        cmdline_feed(c);
        return;
    }
    if (cmdline_idle()) {
        switch (c) {
        case 'q': a->q_at = ml_now(); return;
        case '?': a->scr.help_on = 1; return;
        case 'z': a->scr.zoom = !a->scr.zoom; return;
        case ' ':
            if (a->read_only) refuse(a, a->paused ? "resume (space)" : "pause (space)");
            else send_request(a, REQ_COMMAND, a->paused ? "resume" : "pause");
            return;
        case '\t': {
            a->scr.focus = screen_next_focus(&a->scr.ps, a->scr.lay.cols, a->scr.lay.lines, a->scr.focus);
            return;
        }
        case '[':
        case ']':
        case '{':
        case '}':
            if (panels_key(&a->scr.ps, a->scr.focus, c)) return;
            break;
        case 'n':
        case 'N':
            if (screen_log_key(&a->scr, c)) return;
            break;
        case 'l':
            if (a->scr.focus >= 0 && a->scr.ps.have[a->scr.focus] && view_on_key(&a->scr.ps.v[a->scr.focus], c)) return;
            break;
        default: break;
        }
    }
    cmdline_feed(c);
}

/* A key, or a byte of a mouse report (a click or a wheel notch on a panel: app/term/screen.c). */
static void handle_input(Attach *a, int c) {
    if (!a->scr.mouse) {
        handle_key(a, c);
        return;
    }
    TermMouse m;
    int out[40], n = 0;
    const int r = term_mouse_feed(&a->mp, c, &m, out, &n);
    if (r == 1 && !a->confirm_quit && screen_mouse(&a->scr, &m, ml_now())) a->dirty = 1;
    for (int i = 0; i < n; i++) handle_key(a, out[i]);
}

// ---------------------------------------------------------------------------------------------
// the session screen

static int attach_session(const char *dir, int read_only, int mouse) {
    long owner = -1;
    const int fd = control_connect(dir, &owner);
    if (fd < 0) {
        const int e = errno;
        if (e == EPERM) {
            char who[160], me[160];
            fprintf(stderr,
                    "moelab attach: %s/%s: the process listening there runs as %s, not as you (%s): not attaching; "
                    "only the run's owner can attach (check who put that socket there)\n",
                    dir, CONTROL_SOCKET_NAME, control_uid_text(owner, who, sizeof who),
                    control_uid_text((long)geteuid(), me, sizeof me));
            return 1;
        }
        if (e == EACCES) {
            fprintf(stderr, "moelab attach: %s/%s: permission denied (only the run's owner can attach)\n", dir,
                    CONTROL_SOCKET_NAME);
            return 1;
        }
        SessionInfo info;
        if (session_probe(dir, SESSION_PROBE_INFO) != ML_OK) {
            fprintf(stderr, "moelab attach: %s is not running (no run listening on %s/%s) and %s\n", dir, dir,
                    CONTROL_SOCKET_NAME, ml_last_error());
            return 1;
        }
        const int saved = session_read_info(dir, &info) == ML_OK;
        const int held = saved && !strcmp(info.status, "running") ? session_lock_held(dir) : -1;
        char adv[APP_PATH_MAX * 2 + 200];
        if (held == 0 && runsession_restart_advice(dir, adv, sizeof adv)) /* nothing to resume */
            fprintf(stderr,
                    "moelab attach: %s is not running: no run listens on %s/%s and no process holds its lock (its "
                    "status still says running: the run was killed or crashed); %s\n",
                    dir, dir, CONTROL_SOCKET_NAME, adv);
        else if (held == 0) /* the status was never updated: the lock says no writer is alive */
            fprintf(stderr,
                    "moelab attach: %s is not running: no run listens on %s/%s and no process holds its lock (its "
                    "status still says running: the run was killed or crashed); `moelab train --resume %s` "
                    "continues it from its last checkpoint\n",
                    dir, dir, CONTROL_SOCKET_NAME, dir);
        else if (held == 1)
            fprintf(stderr,
                    "moelab attach: %s: a process holds the session (its lock) but no run listens on %s/%s (a "
                    "resume or an older moelab without the socket?); try again in a moment\n",
                    dir, dir, CONTROL_SOCKET_NAME);
        else
            fprintf(stderr, "moelab attach: %s is not running (no run listening on %s/%s%s%s)\n", dir, dir,
                    CONTROL_SOCKET_NAME, saved ? "; its status is " : "", saved ? info.status : "");
        if (saved && isatty(STDIN_FILENO) && isatty(STDOUT_FILENO)) {
            fprintf(stderr, "open it in the session browser (moelab browse %s)? [y/N] ", dir);
            char ans[16] = "";
            if (fgets(ans, sizeof ans, stdin) && (ans[0] == 'y' || ans[0] == 'Y')) {
                char *av[] = {"browse", (char *)dir, NULL};
                return cmd_browse(2, av);
            }
        } else {
            fprintf(stderr, "moelab browse %s shows the saved session\n", dir);
        }
        return 3;
    }
    if (!isatty(STDIN_FILENO) || !isatty(STDOUT_FILENO)) {
        fprintf(stderr, "moelab attach: needs a terminal (for scripts: moelab ctl %s COMMAND)\n", dir);
        close(fd);
        return 2;
    }
    Attach *a = calloc(1, sizeof *a);
    if (!a) {
        close(fd);
        fprintf(stderr, "moelab attach: out of memory\n");
        return 1;
    }
    a->dir = dir;
    a->fd = fd;
    a->read_only = read_only;
    if (read_only) send_request(a, REQ_HELLO, "readonly"); /* before anything else: the run refuses commands from now on */
    a->scr.focus = PANEL_CURVES;
    /* the initial load in a child first (a file that crashes the HDF5 library gives a message);
     * the follow of the running run afterwards reads only the new rows, in process */
    if (session_probe(dir, SESSION_PROBE_HISTORY) != ML_OK || session_history_load(dir, &a->h0) != ML_OK) {
        fprintf(stderr, "moelab attach: %s\n", ml_last_error());
        close(fd);
        free(a);
        return 1;
    }
    static const TermModes modes = {.keypad = 0, .cursor = 1, .intrflush = 0};
    int utf8 = 0;
    ui_config_load("moelab attach"); /* theme, panels, smoothing: before the screen opens */
    SCREEN *scr = term_open("moelab attach", &modes, &utf8, "");
    if (!scr) {
        session_history_free(&a->h0);
        close(fd);
        free(a);
        return 1;
    }
    theme_init(&a->scr.theme, utf8, 0);
    a->scr.mouse = mouse && ui_config_load("moelab attach")->mouse; /* --no-mouse or mouse = off */
    a->scr.click_panel = -1;
    if (a->scr.mouse) term_mouse_on();
    history_view_ctx(&a->h0, &a->scr.theme, &a->ctx, &a->base);
    int rc = 0;
    if (panels_init(&a->scr.ps, &a->ctx) || view_init(&a->scr.help, &view_help_class, &a->ctx)) {
        term_restore();
        fprintf(stderr, "moelab attach: out of memory\n");
        rc = 1;
        goto out;
    }
    cmdline_init("moelab> ", on_line, on_cmdline_msg, a);
    char hist[1024], err[1200];
    if (!cmdline_history_path(hist, sizeof hist) && cmdline_history_open(hist, err, sizeof err))
        alog(a, VIEW_LOG_WARN, "%s", err);
    alog(a, VIEW_LOG_INFO, "attached%s to %s: %ld steps and %d evaluations so far; q detaches (the run goes on)",
         read_only ? " read-only" : "", dir,
         a->h0.nsteps > 0 ? a->h0.steps[a->h0.nsteps - 1].step : 0L, a->h0.nevals);
    history_feed(&a->h0, &a->scr.ps, &a->fed, -1, &a->base);
    a->follow = session_follow_open(&a->h0); /* NULL: the first reload re-reads */
    a->step = a->h0.nsteps > 0 ? a->h0.steps[a->h0.nsteps - 1].step : 0;
    a->total = a->h0.total_steps;
    TermSignals sigs = {0};
    term_signals_catch(&sigs, -1);
    a->t_open = ml_now();
    a->next_reload = a->t_open + RELOAD_SEC;
    a->next_status = 0;
    a->dirty = 1;
    double last_draw = 0;
    while (!a->leave && !term_signal()) {
        const double now = ml_now();
        if (a->q_at > 0 && now - a->q_at > Q_DETACH_SEC) break; /* q alone: detach */
        if (now >= a->next_status && a->fd >= 0 && !a->status_wait) {
            send_request(a, REQ_STATUS, "status");
            a->next_status = now + STATUS_SEC;
        }
        if (now >= a->next_reload) {
            reload(a);
            a->next_reload = now + RELOAD_SEC;
        }
        if (a->dirty || now - last_draw > 0.5) {
            render(a);
            term_test_abort("attach");
            last_draw = now;
            a->dirty = 0;
        }
        struct pollfd pf[2] = {{.fd = STDIN_FILENO, .events = POLLIN}, {.fd = a->fd, .events = POLLIN}};
        const int pr = poll(pf, a->fd >= 0 ? 2 : 1, a->q_at > 0 ? 50 : 100);
        if (pr < 0 && errno != EINTR) break;
        if (pr > 0 && (pf[0].revents & (POLLHUP | POLLERR | POLLNVAL))) break; /* the terminal went away */
        if (pr > 0 && a->fd >= 0 && pf[1].revents) read_socket(a);
        WINDOW *cw = cmdline_window_get();
        if (pr > 0 && (pf[0].revents & POLLIN) && cw)
            for (int guard = 0; guard < 4096 && !a->leave; guard++) {
                const int c = wgetch(cw);
                if (c == ERR) break;
                handle_input(a, c);
                if (cmdline_window_get() != cw) break;
            }
        if (pr > 0 && (pf[0].revents & POLLIN)) {
            int out[40], n = 0;
            term_mouse_flush(&a->mp, out, &n); /* a lone Esc */
            for (int i = 0; i < n && !a->leave; i++) handle_key(a, out[i]);
        }
    }
    term_signals_restore(&sigs);
    cmdline_history_close();
    cmdline_free();
out:
    screen_drop_windows(&a->scr.ps);
    panels_free(&a->scr.ps);
    if (a->scr.help.cls) view_free(&a->scr.help);
    term_close(scr);
    if (a->fd >= 0) {
        static const char bye[] = "detach\n";
        ssize_t w = send(a->fd, bye, sizeof bye - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
        (void)w;
        close(a->fd);
    }
    if (!rc)
        printf("moelab attach: %s %s at step %ld\n", a->run_ended ? "the run ended:" : "detached from", dir, a->step);
    session_follow_close(a->follow);
    if (a->have_cur) session_history_free(&a->cur);
    session_history_free(&a->h0);
    free(a);
    return rc;
}

// ---------------------------------------------------------------------------------------------
// a folder of sessions (a sweep)

static int is_session(const char *dir) {
    char p[4200];
    struct stat st;
    snprintf(p, sizeof p, "%s/live.h5", dir);
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

/* Seconds per step from the wall times of a session's step rows (< 0: unknown). */
static double seconds_per_step(const char *dir, long *last_step, long *total) {
    SessionHistory h;
    if (session_probe(dir, SESSION_PROBE_HISTORY) != ML_OK || session_history_load(dir, &h) != ML_OK) return -1;
    double r = -1;
    *total = h.total_steps;
    *last_step = h.nsteps > 0 ? h.steps[h.nsteps - 1].step : 0;
    if (h.nsteps >= 2 && h.steps[h.nsteps - 1].step > h.steps[0].step)
        r = (h.step_wall[h.nsteps - 1] - h.step_wall[0]) / (double)(h.steps[h.nsteps - 1].step - h.steps[0].step);
    session_history_free(&h);
    return r;
}

/* DIR/sweep.plan ("trains N", "jobs J", written by moelab sweep): 0s when absent or unreadable. */
static void read_sweep_plan(const char *dir, int *trains, int *jobs) {
    char p[4200], line[128];
    snprintf(p, sizeof p, "%s/sweep.plan", dir);
    *trains = *jobs = 0;
    FILE *f = fopen(p, "r");
    if (!f) return;
    while (fgets(line, sizeof line, f)) {
        int v;
        if (sscanf(line, "trains %d", &v) == 1 && v > 0 && v < 1000000) *trains = v;
        else if (sscanf(line, "jobs %d", &v) == 1 && v > 0 && v < 100000) *jobs = v;
    }
    fclose(f);
}

/* the runs in the order of their names, numbers by value (seed=2 before seed=10) */
static int run_name_cmp(const void *x, const void *y) {
    return strverscmp(((const BrowseEntry *)x)->name, ((const BrowseEntry *)y)->name);
}

static int attach_sweep(const char *dir, int read_only, int mouse) {
    BrowseList l = {0};
    if (browse_list_scan(&l, dir) != 0) {
        fprintf(stderr, "moelab attach: %s\n", ml_last_error());
        return 1;
    }
    if (l.n > 1) qsort(l.e, (size_t)l.n, sizeof *l.e, run_name_cmp); /* readdir's order is none */
    if (l.n == 0) {
        fprintf(stderr, "moelab attach: %s holds no session (no live.h5 in it or below)\n", dir);
        browse_list_free(&l);
        return 1;
    }
    printf("%-3s %-36s %-11s %9s %8s %8s %10s\n", "#", "run", "state", "epoch", "acc %", "best %", "ETA");
    double sweep_left = 0, rate_sum = 0, longest_left = 0, steps_sum = 0;
    int nsteps_known = 0;
    int nrate = 0, running = 0, pending_steps_unknown = 0;
    long pending_steps = 0;
    int *live = calloc((size_t)l.n, sizeof *live);
    for (int i = 0; i < l.n; i++) {
        BrowseEntry *e = &l.e[i];
        const int fd = e->ok && !strcmp(e->status, "running") ? control_connect(e->path, NULL) : -1;
        if (fd >= 0) close(fd);
        live[i] = fd >= 0;
        long last = 0, total = 0;
        const double sps = e->ok ? seconds_per_step(e->path, &last, &total) : -1;
        char eta[32] = "-";
        const char *state = live[i] ? "running" : !strcmp(e->status, "running") ? "not listening" : e->status;
        if (live[i] && sps > 0 && total > last) {
            fmt_duration(eta, sizeof eta, sps * (double)(total - last));
            sweep_left += sps * (double)(total - last);
            if (sps * (double)(total - last) > longest_left) longest_left = sps * (double)(total - last);
            running++;
        }
        if (e->ok && total > 0) {
            steps_sum += total;
            nsteps_known++;
        }
        if (sps > 0) {
            rate_sum += sps;
            nrate++;
        }
        if (!live[i] && strcmp(e->status, "finished") && e->ok && total > last) pending_steps += total - last;
        if (!e->ok) pending_steps_unknown++;
        char ep[24], acc[16] = "-", best[16] = "-";
        snprintf(ep, sizeof ep, "%d/%d", e->ok ? e->info.last_epoch : 0, e->ok ? e->info.epochs : 0);
        if (e->ok && !isnan(e->info.last_test_acc)) snprintf(acc, sizeof acc, "%.2f", 100 * e->info.last_test_acc);
        if (e->ok && !isnan(e->info.best_test_acc)) snprintf(best, sizeof best, "%.2f", 100 * e->info.best_test_acc);
        printf("%-3d %-36.36s %-11.11s %9s %8s %8s %10s\n", i + 1, e->name, state, ep, acc, best, eta);
    }
    /* the sweep: the work left (the running runs' remaining steps, the unfinished runs' steps at
     * the mean pace, and the runs not started yet, each at the mean run's measured time) shared by
     * the sweep's parallel runs (DIR/sweep.plan: trains N, jobs J; without it, the runs going now),
     * and never less than the longest running run's own remaining time */
    int trains = 0, jobs = 0;
    read_sweep_plan(dir, &trains, &jobs);
    const int not_started = trains > l.n ? trains - l.n : 0;
    if (running > 0) {
        char s[32];
        const double sps_mean = nrate ? rate_sum / nrate : 0;
        const double work = sweep_left + sps_mean * (double)pending_steps + (nsteps_known ? steps_sum / nsteps_known : 0) * sps_mean * not_started;
        int lanes = jobs > 0 ? jobs : running;
        if (lanes < running) lanes = running;
        double eta = work / lanes;
        if (eta < longest_left) eta = longest_left;
        fmt_duration(s, sizeof s, eta);
        char extra[96] = "";
        if (not_started > 0)
            snprintf(extra, sizeof extra, " (%d run%s not started yet, each at the mean run's time)", not_started,
                     not_started == 1 ? "" : "s");
        else if (pending_steps_unknown && trains == 0)
            snprintf(extra, sizeof extra, " (runs not started yet are not counted)");
        printf("sweep: %d running, ETA %s%s\n", running, s, extra);
    } else {
        printf("sweep: no run is training now\n");
    }
    int rc = 0;
    if (running > 0 && isatty(STDIN_FILENO) && isatty(STDOUT_FILENO)) {
        printf("attach to run # (Enter: none): ");
        fflush(stdout);
        char ans[32] = "";
        if (fgets(ans, sizeof ans, stdin)) {
            const int k = atoi(ans);
            if (k >= 1 && k <= l.n && live[k - 1]) rc = attach_session(l.e[k - 1].path, read_only, mouse);
            else if (k) {
                fprintf(stderr, "moelab attach: run %d is not running\n", k);
                rc = 1;
            }
        }
    }
    free(live);
    browse_list_free(&l);
    return rc;
}

int cmd_attach(int argc, char **argv) {
    static const char usage[] = "usage: moelab attach [--read-only] [--no-mouse] SESSION | SWEEP_DIR\n";
    if (argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        printf("%s\n"
               "The live screen of a run training in another process (headless, nohup, tmux, a\n"
               "cluster job), read from SESSION/live.h5 with its whole history; commands typed\n"
               "below go to the run through SESSION/control.sock. q detaches (the run goes on),\n"
               "`quit` stops the run after a confirmation. SWEEP_DIR: a folder of sessions (a\n"
               "sweep): lists its runs with state, epoch, accuracy and ETA, and attaches to one.\n\n"
               "  --read-only  watch only: no commands, no pause, no quit of the run (a typed\n"
               "               command is refused on the screen, and the run refuses any from\n"
               "               this connection); q still detaches\n"
               "  --no-mouse   ignore the mouse (on by default: a click focuses a panel, a\n"
               "               double click zooms it, the wheel scrolls it)\n",
               usage);
        return 0;
    }
    const char *dir = NULL;
    int read_only = 0, mouse = 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--read-only")) read_only = 1;
        else if (!strcmp(argv[i], "--no-mouse")) mouse = 0;
        else if (argv[i][0] == '-' && argv[i][1]) {
            fprintf(stderr, "moelab attach: unknown option '%s'\n%s", argv[i], usage);
            return 2;
        } else if (!dir) dir = argv[i];
        else {
            fprintf(stderr, "%s", usage);
            return 2;
        }
    }
    if (!dir) {
        fprintf(stderr, "%s", usage);
        return 2;
    }
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        fprintf(stderr, "moelab attach: %s: no such session folder\n", dir);
        return 2;
    }
    if (!is_session(dir)) return attach_sweep(dir, read_only, mouse);
    return attach_session(dir, read_only, mouse);
}
