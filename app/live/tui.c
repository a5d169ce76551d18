/* tui.c — the live training screen: terminal setup and teardown, the UI event loop, keys, layout
 * and drawing of the views, and the wiring to the trainer thread (tui_worker.c) and the readline
 * command line (tui_cmdline.c). The design (README "The live screen"):
 *
 *   - this (UI) thread alone calls ncurses and readline; the trainer thread alone touches the
 *     Trainer; commands go one way through a queue, immutable record copies the other way;
 *   - one loop: poll(stdin, wake pipe) -> drain the worker -> keys -> draw at most every
 *     the config's refresh, 0.1 s (each view werase/draw/wnoutrefresh, the command line last, one doupdate);
 *   - SIGINT / SIGTERM / SIGHUP only set a flag and write to the wake pipe (self-pipe); SIGWINCH
 *     is ncurses' (KEY_RESIZE);
 *   - nothing prints over the screen: stderr goes to a temporary file for the session and is
 *     printed after endwin; core log messages go to the log panel.
 * The trainer thread's hooks (TuiHooks) are the session writer's place. */
#include "app/live/tui.h"
#include "app/cli/commands.h"
#include "app/cli/config.h"
#include "app/live/history_feed.h"
#include "app/term/screen.h"
#include "app/term/term.h"
#include "app/term/tui_cmdline.h"
#include "app/live/tui_worker.h"

#include <errno.h>
#include <fcntl.h>
#include <langinfo.h>
#include <locale.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "views/draw.h"
#include "views/panels.h"
#include "views/view.h"

#define IDLE_FRAME_SEC 0.5 /* clock refresh when nothing happens */
#define RATE_WINDOW 3.0    /* seconds of history for images/s */
#define RATE_N 64

typedef struct {
    const AppOptions *o;
    const Dataset *ds;
    Trainer *t;
    TuiHooks *hooks;
    TuiWorker w;
    WorkerDrain d;
    int wake[2]; /* non-blocking pipe: trainer and signal handlers -> UI */
    SCREEN *screen;
    ViewCtx ctx;
    Screen scr; /* panels, help, theme, layout, focus / zoom (app/screen.h) */
    TermMouseParser mp; /* mouse reports among the keys (app/term/term.h) */
    int confirm_quit, swallow;
    double frame_sec;         /* the config file's refresh (0.1 s) */
    const UiConfig *cfg;      /* the config file (app/cli/config.h) */
    int dirty, data_pending;
    double next_frame, last_frame, t_open;
    WorkerState st;   /* as of the last drain */
    int pause_target; /* -1, or the pause state we asked for and have not seen yet */
    int leaving;      /* quit asked: exit once the worker is done */
    int done_seen, terminal_lost;
    int ran;                                     /* the trainer thread was started */
    int nsched;                                  /* scheduled commands handed to the worker */
    TermSignals sigs;                            /* handlers to restore at exit */
    int exit_code;
    double rate_t[RATE_N], rate_busy[RATE_N];
    long rate_step[RATE_N];
    int rate_n, rate_head;
    double img_per_s;
    long step0;
    char hist_path[1024];
    EvalRecord last_eval;
    int have_eval;
} Tui;

/* ml_log sink: any thread -> the worker's event queue -> the log panel. */
static void log_sink(int level, const char *msg, void *user) { worker_log(user, level, msg); }

// ---------------------------------------------------------------------------------------------
// logging into the log view (UI thread)

static void ui_log(Tui *ui, int level, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void ui_log(Tui *ui, int level, const char *fmt, ...) {
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    const ViewMsg m = {.kind = VIEW_MSG_LOG, .level = level, .text = buf};
    view_update(&ui->scr.ps.v[PANEL_LOG], &m);
    ui->dirty = 1;
}

static void broadcast(Tui *ui, const ViewMsg *m) { panels_update(&ui->scr.ps, m); }

// ---------------------------------------------------------------------------------------------
// commands (UI thread)

static int send_cmd(Tui *ui, const TrainerCmd *c) {
    if (ui->st.done) {
        ui_log(ui, VIEW_LOG_WARN, "'%s': the run is over (q to exit)", c->text);
        return -1;
    }
    if (worker_send(&ui->w, c)) {
        ui_log(ui, VIEW_LOG_ERROR, "'%s': command queue full, try again", c->text);
        return -1;
    }
    return 0;
}

static void send_text(Tui *ui, const char *text) {
    TrainerCmd c;
    char err[256];
    if (command_parse(text, &c, err, sizeof err) == 0) send_cmd(ui, &c);
}

/* Leaves the screen: at once if the run is over, else after the trainer stopped (status
 * "interrupted"; the quit command is logged as an event). */
static void request_quit(Tui *ui) {
    ui->leaving = 1;
    ui->dirty = 1;
    if (ui->st.done) return;
    TrainerCmd c;
    char err[64];
    if (command_parse("quit", &c, err, sizeof err) || worker_send(&ui->w, &c)) worker_request_stop(&ui->w);
}

static void toggle_pause(Tui *ui) {
    const int paused = ui->pause_target >= 0 ? ui->pause_target : ui->st.run.paused;
    send_text(ui, paused ? "resume" : "pause");
    ui->pause_target = !paused;
}

static void on_line(char *line, void *user) {
    Tui *ui = user;
    if (!line) { /* Ctrl-D on an empty line: like q */
        if (ui->st.done) request_quit(ui);
        else ui->confirm_quit = 1;
        ui->dirty = 1;
        return;
    }
    char *p = line;
    while (*p == ' ' || *p == '\t') p++;
    size_t len = strlen(p);
    while (len > 0 && (p[len - 1] == ' ' || p[len - 1] == '\t')) p[--len] = '\0';
    if (!*p) {
        free(line);
        return;
    }
    cmdline_history_add(p);
    TrainerCmd c;
    char err[256];
    if (screen_log_filter(&ui->scr, p)) {
        /* `/text`: the log's filter (app/term/screen.c) */
    } else if (command_parse(p, &c, err, sizeof err)) {
        ui_log(ui, VIEW_LOG_ERROR, "error: %s", err);
    } else if (c.kind == CMD_HELP) {
        ui->scr.help_on = 1;
    } else if (c.kind == CMD_QUIT) {
        request_quit(ui);
    } else if (send_cmd(ui, &c) == 0) {
        if (c.kind == CMD_PAUSE) ui->pause_target = 1;
        if (c.kind == CMD_RESUME) ui->pause_target = 0;
    }
    ui->dirty = 1;
    free(line);
}

static void on_cmdline_msg(int level, const char *text, void *user) {
    ui_log(user, level >= 2 ? VIEW_LOG_ERROR : level == 1 ? VIEW_LOG_WARN : VIEW_LOG_INFO, "%s", text);
}

// ---------------------------------------------------------------------------------------------
// worker output -> views

static void drain(Tui *ui) {
    worker_drain(&ui->w, &ui->d);
    WorkerDrain *d = &ui->d;
    for (int i = 0; i < d->nsteps; i++) {
        const ViewMsg m = {.kind = VIEW_MSG_STEP, .step = &d->steps[i]};
        broadcast(ui, &m);
    }
    for (int i = 0; i < d->nevals; i++) {
        const ViewMsg m = {.kind = VIEW_MSG_EVAL, .eval = &d->evals[i]};
        broadcast(ui, &m);
        ui->last_eval = d->evals[i];
        ui->last_eval.moe.class_expert = NULL;
        ui->have_eval = 1;
    }
    for (int i = 0; i < d->nevents; i++) {
        const WorkerEvent *ev = &d->events[i];
        switch (ev->kind) {
        case WEV_APPLIED:
            ui_log(ui, VIEW_LOG_CMD, "[step %ld] %s", ev->step, ev->text);
            if (ev->has_plan) panels_plan(&ui->scr.ps, &ev->plan, ev->step, ev->layer);
            if (ev->cmd == CMD_RESUME) view_banner_set_note(&ui->scr.ps.v[PANEL_BANNER], NULL);
            if (ev->cmd == CMD_PAUSE && !strncmp(ev->text, "rule: ", 6)) { /* the on-collapse rule paused it */
                /* "rule: pause (on-collapse at step N: MESSAGE)": the message, the same as the log's */
                const char *msg = strstr(ev->text, ": COLLAPSE");
                msg = msg ? msg + 2 : ev->text + 6;
                const size_t ml = strlen(msg) - (msg[0] && msg[strlen(msg) - 1] == ')' && msg != ev->text + 6);
                char note[512];
                snprintf(note, sizeof note, "PAUSED by --on-collapse at step %ld: %.*s. `resume` continues", ev->step,
                         (int)(ml < 400 ? ml : 400), msg);
                view_banner_set_note(&ui->scr.ps.v[PANEL_BANNER], note);
            }
            break;
        case WEV_FAILED: ui_log(ui, VIEW_LOG_ERROR, "[step %ld] error: %s", ev->step, ev->text); break;
        case WEV_INFO: ui_log(ui, VIEW_LOG_INFO, "%s", ev->text); break;
        case WEV_WARN: ui_log(ui, VIEW_LOG_WARN, "%s", ev->text); break;
        case WEV_ERROR: ui_log(ui, VIEW_LOG_ERROR, "%s", ev->text); break;
        case WEV_EPOCH: ui_log(ui, VIEW_LOG_EPOCH, "%s", ev->text); break;
        case WEV_NUMERIC: {
            ui_log(ui, VIEW_LOG_ERROR, "[step %ld] %s", ev->step, ev->text);
            ui_log(ui, VIEW_LOG_WARN,
                   "training PAUSED: lower the LR (set lr 0.01) or change tau, then resume; or q to quit");
            char note[512];
            snprintf(note, sizeof note,
                     "NaN/inf loss at step %ld: training paused. Try `set lr 0.01` then `resume` (or q to quit)",
                     ev->step + 1);
            view_banner_set_note(&ui->scr.ps.v[PANEL_BANNER], note);
            break;
        }
        }
    }
    if (d->nsteps || d->nevals || d->nevents) ui->dirty = 1;
    if (d->st.run.step != ui->st.run.step || d->st.run.paused != ui->st.run.paused || d->st.done != ui->st.done ||
        d->st.run.steps_left != ui->st.run.steps_left)
        ui->dirty = 1;
    ui->st = d->st;
    if (ui->pause_target >= 0 && ui->st.run.paused == ui->pause_target) ui->pause_target = -1;
    if (ui->st.done && !ui->done_seen) {
        ui->done_seen = 1;
        if (!strcmp(ui->st.status, "finished"))
            ui_log(ui, VIEW_LOG_EPOCH, "training finished after %ld steps: press q to exit", ui->st.run.step);
        else ui_log(ui, VIEW_LOG_WARN, "training %s at step %ld", ui->st.status, ui->st.run.step);
        if (!strcmp(ui->st.status, "failed") && ui->exit_code == 0) ui->exit_code = 1;
    }
}

/* Images/s over the last RATE_WINDOW seconds of busy (training) time. */
static void rate_sample(Tui *ui, double now) {
    const int i = (ui->rate_head + ui->rate_n) % RATE_N;
    ui->rate_t[i] = now;
    ui->rate_busy[i] = ui->st.run.busy;
    ui->rate_step[i] = ui->st.run.step;
    if (ui->rate_n < RATE_N) ui->rate_n++;
    else ui->rate_head = (ui->rate_head + 1) % RATE_N;
    while (ui->rate_n > 2 && now - ui->rate_t[ui->rate_head] > RATE_WINDOW) {
        ui->rate_head = (ui->rate_head + 1) % RATE_N;
        ui->rate_n--;
    }
    const int o = ui->rate_head;
    const double db = ui->st.run.busy - ui->rate_busy[o];
    const long ds = ui->st.run.step - ui->rate_step[o];
    if (db > 0.05 && ds > 0) ui->img_per_s = ds * (double)ui->ctx.batch / db;
}

static void fill_status(Tui *ui, RunStatus *rs, char *note, size_t noten) {
    memset(rs, 0, sizeof *rs);
    const WorkerState *s = &ui->st;
    note[0] = '\0';
    if (s->done) {
        rs->state = !strcmp(s->status, "finished") ? "FINISHED" : !strcmp(s->status, "failed") ? "FAILED" : "STOPPED";
        rs->state_role = !strcmp(s->status, "failed") ? TH_BANNER : TH_RUNNING;
        snprintf(note, noten, "q to exit");
    } else if (ui->leaving) {
        rs->state = "STOPPING";
        rs->state_role = TH_PAUSED;
        snprintf(note, noten, "finishing the step%s",
                 ui->hooks && ui->hooks->sink.checkpoint ? " and the final checkpoint" : "");
    } else if (s->run.numeric) {
        rs->state = "PAUSED (NaN)";
        rs->state_role = TH_BANNER;
    } else if (s->run.paused && s->run.collapse && s->run.steps_left == 0) {
        rs->state = "PAUSED (collapse)";
        rs->state_role = TH_BANNER;
    } else if (s->run.paused && s->run.steps_left > 0) {
        rs->state = "STEPPING";
        rs->state_role = TH_PAUSED;
    } else if (s->run.paused) {
        rs->state = "PAUSED";
        rs->state_role = TH_PAUSED;
    } else {
        rs->state = "RUNNING";
        rs->state_role = TH_RUNNING;
    }
    rs->step = s->run.step;
    rs->epoch = s->run.epoch;
    rs->img_per_s = ui->img_per_s;
    const long done = s->run.step - ui->step0;
    if (done > 0 && !s->done) {
        const double per_step = s->run.busy / done;
        const double per_eval = s->run.evals > 0 ? s->run.eval_seconds / s->run.evals : 0.0;
        rs->eta = (ui->ctx.total_steps - s->run.step) * per_step + (ui->ctx.epochs - s->run.epoch) * per_eval;
    } else {
        rs->eta = s->done ? 0.0 : -1.0;
    }
    rs->elapsed = ml_now() - ui->t_open;
    rs->session = ui->hooks && ui->hooks->session ? ui->hooks->session : "";
    rs->note = note;
}

// ---------------------------------------------------------------------------------------------
// drawing

static void draw_cmdline(WINDOW *w, void *user) {
    Tui *ui = user;
    if (ui->confirm_quit) {
        screen_confirm(w, &ui->scr, "Quit training? The run stops after the current step. (y/n) ");
        return;
    }
    const char *hint = ui->st.done ? "q: exit" : "type a command, ? for help";
    cmdline_draw(hint);
}

static void render(Tui *ui) {
    RunStatus rs;
    char note[160], small[96];
    fill_status(ui, &rs, note, sizeof note);
    const ViewMsg sm = {.kind = VIEW_MSG_STATUS, .status = &rs};
    broadcast(ui, &sm);
    snprintf(small, sizeof small, "%s  step %ld/%ld", rs.state, rs.step, ui->ctx.total_steps);
    screen_render(&ui->scr, small, draw_cmdline, ui);
}

// ---------------------------------------------------------------------------------------------
// keys

static int focused_view_key(Tui *ui, int c) {
    if (c == 'm' && ui->scr.ps.have[PANEL_CURVES]) return view_on_key(&ui->scr.ps.v[PANEL_CURVES], c); /* smoothing */
    if (panels_key(&ui->scr.ps, ui->scr.focus, c)) return 1; /* [ ] layer or scroll, { } scroll */
    if (c != 'l') return 0;
    if (ui->scr.focus < 0 || !ui->scr.ps.have[ui->scr.focus]) return 0;
    return view_on_key(&ui->scr.ps.v[ui->scr.focus], c);
}

static void handle_key(Tui *ui, int c) {
    if (c == KEY_RESIZE) {
        ui->dirty = 1;
        render(ui);
        return;
    }
    if (ui->swallow) { /* the rest of an escape sequence whose ESC closed the help */
        if (ui->swallow == 1 && (c == '[' || c == 'O')) {
            ui->swallow = 2;
            return;
        }
        if (ui->swallow == 2) {
            if (c >= 0x40 && c <= 0x7e) ui->swallow = 0;
            return;
        }
        ui->swallow = 0;
    }
    if (c == 12) { /* Ctrl-L */
        clearok(curscr, TRUE);
        ui->scr.force_clear = 1;
        ui->dirty = 1;
        return;
    }
    if (ui->confirm_quit) {
        ui->confirm_quit = 0;
        ui->dirty = 1;
        if (c == 'y' || c == 'Y') {
            request_quit(ui);
            return;
        }
        if (c == 'n' || c == 'N' || c == 27 || c == 'q' || c == 7) return;
        cmdline_feed('q'); /* the user was typing a command that starts with q ("quit") */
        cmdline_feed(c);
        return;
    }
    if (ui->scr.help_on) {
        if (c == 27 || c == '?' || c == 'q') {
            ui->scr.help_on = 0;
            ui->dirty = 1;
            if (c == 27) ui->swallow = 1;
        }
        return;
    }
    if (cmdline_idle()) {
        switch (c) {
        case ' ':
            toggle_pause(ui);
            ui->dirty = 1;
            return;
        case '\t': {
            ui->scr.focus = screen_next_focus(&ui->scr.ps, ui->scr.lay.cols, ui->scr.lay.lines, ui->scr.focus);
            ui->dirty = 1;
            return;
        }
        case 'z':
            ui->scr.zoom = !ui->scr.zoom;
            ui->dirty = 1;
            return;
        case '?':
            ui->scr.help_on = 1;
            ui->dirty = 1;
            return;
        case 'q':
            if (ui->st.done) request_quit(ui);
            else ui->confirm_quit = 1;
            ui->dirty = 1;
            return;
        case 'n':
        case 'N':
            if (screen_log_key(&ui->scr, c)) {
                ui->dirty = 1;
                return;
            }
            break;
        default:
            if (focused_view_key(ui, c)) {
                ui->dirty = 1;
                return;
            }
        }
    }
    cmdline_feed(c);
    if (cmdline_popup_changed()) ui->dirty = 1; /* the completion popup opened or closed */
}

/* A key, or a byte of a mouse report (a click or a wheel notch on a panel: app/term/screen.c). */
static void handle_input(Tui *ui, int c) {
    if (!ui->scr.mouse) {
        handle_key(ui, c);
        return;
    }
    TermMouse m;
    int out[40], n = 0;
    const int r = term_mouse_feed(&ui->mp, c, &m, out, &n);
    if (r == 1 && !ui->confirm_quit && screen_mouse(&ui->scr, &m, ml_now())) ui->dirty = 1;
    for (int i = 0; i < n; i++) handle_key(ui, out[i]);
}

static void read_keys(Tui *ui) {
    WINDOW *cw = cmdline_window_get();
    if (!cw) return;
    for (int guard = 0; guard < 4096; guard++) {
        const int c = wgetch(cw);
        if (c == ERR) break;
        handle_input(ui, c);
        if (cmdline_window_get() != cw) break; /* a resize made it again */
    }
    int out[40], n = 0;
    term_mouse_flush(&ui->mp, out, &n); /* a lone Esc */
    for (int i = 0; i < n; i++) handle_key(ui, out[i]);
    ui->swallow = 0;
}

static void handle_signal(Tui *ui) {
    const int sig = term_signal_take();
    if (!sig) return;
    if (term_signal_count() >= 3 && ui->leaving) {
        /* the user insists: the trainer thread is stuck in a long step or hook */
        term_restore();
        fprintf(stderr, "moelab train: forced exit (signal %d while stopping)\n", sig);
        _exit(128 + sig);
    }
    ui_log(ui, VIEW_LOG_WARN, "%s: stopping after the current step%s",
           sig == SIGINT    ? "interrupted (Ctrl-C)"
           : sig == SIGTERM ? "SIGTERM"
                            : "SIGHUP",
           sig == SIGINT ? " (Ctrl-C twice more forces an exit)" : "");
    if (!ui->leaving) ui->exit_code = 128 + sig;
    ui->leaving = 1;
    worker_request_stop(&ui->w);
    ui->dirty = 1;
}

// ---------------------------------------------------------------------------------------------
// setup

/* The views' run description from the run record (app/live/history_feed.c), with the trainer's
 * temperature plan. */
static void fill_ctx(Tui *ui) {
    RunRecord rr;
    trainer_describe(ui->t, &rr);
    run_view_ctx(&rr, &ui->scr.theme, &ui->ctx);
    ui->ctx.plan = ui->t->tau;
}

static int make_views(Tui *ui) {
    if (panels_init(&ui->scr.ps, &ui->ctx)) return -1;
    return view_init(&ui->scr.help, &view_help_class, &ui->ctx);
}

static void free_views(Tui *ui) {
    screen_drop_windows(&ui->scr.ps);
    panels_free(&ui->scr.ps);
    view_free(&ui->scr.help);
}

static int pipe_nonblock(int fd[2]) {
    if (pipe(fd)) return -1;
    for (int i = 0; i < 2; i++) {
        fcntl(fd[i], F_SETFL, fcntl(fd[i], F_GETFL) | O_NONBLOCK);
        fcntl(fd[i], F_SETFD, FD_CLOEXEC);
    }
    return 0;
}

static void print_summary(const Tui *ui) {
    const WorkerState *s = &ui->st;
    char el[32];
    fmt_duration(el, sizeof el, ml_now() - ui->t_open);
    printf("moelab: training %s at step %ld/%ld (epoch %d/%d) after %s\n", s->status[0] ? s->status : "stopped",
           s->run.step, ui->ctx.total_steps, s->run.epoch, ui->ctx.epochs, el);
    if (ui->have_eval) {
        const EvalRecord *e = &ui->last_eval;
        printf("  last evaluation (epoch %d, step %ld): train loss %.4f acc %.2f%%  test loss %.4f acc %.2f%%",
               e->epoch, e->step, e->train_loss, 100 * e->train_acc, e->test_loss, 100 * e->test_acc);
        if (e->has_moe)
            printf("  I(class;expert) %.3f nats  dead %d/%d%s", e->moe.mutual_info, e->moe.dead_experts, e->moe.experts,
                   e->collapsed ? "  COLLAPSE" : "");
        printf("\n");
    }
    if (s->steps_dropped)
        printf("  (the screen skipped %ld step records; the hooks got every one)\n", s->steps_dropped);
    fflush(stdout);
}

/* Everything that can fail with a plain message, before the screen opens: the scheduled
 * commands, the wake pipe, the worker and its drain buffers. 0, or the exit status. */
static int tui_prepare(Tui *ui) {
    const TuiHooks *hooks = ui->hooks;
    const AppOptions *o = ui->o;
    ScheduledCmd *sched = NULL;
    int nsched = 0;
    if (hooks->cmds) {
        if (hooks->ncmds > 0) {
            sched = malloc(sizeof *sched * hooks->ncmds);
            if (!sched) {
                fprintf(stderr, "moelab train: out of memory\n");
                return 1;
            }
            memcpy(sched, hooks->cmds, sizeof *sched * hooks->ncmds);
            nsched = hooks->ncmds;
        }
    } else if (o && o->commands[0]) {
        char err[600];
        if (command_file_read(o->commands, &sched, &nsched, err, sizeof err)) {
            fprintf(stderr, "moelab train: %s\n", err);
            return 2;
        }
    }
    if (pipe_nonblock(ui->wake)) {
        fprintf(stderr, "moelab train: pipe: %s\n", strerror(errno));
        free(sched);
        return 1;
    }
    if (worker_init(&ui->w, ui->t, ui->hooks, ui->wake[1], sched, nsched)) {
        fprintf(stderr, "moelab train: out of memory\n");
        close(ui->wake[0]);
        close(ui->wake[1]);
        return 1;
    }
    if (worker_drain_init(&ui->d, &ui->w)) {
        fprintf(stderr, "moelab train: out of memory\n");
        worker_free(&ui->w);
        close(ui->wake[0]);
        close(ui->wake[1]);
        return 1;
    }
    ui->nsched = nsched;
    ui->st = ui->w.st;
    fill_ctx(ui);
    return 0;
}

/* Opens the terminal, the views and the command line. 0, or -1 (message printed; the screen
 * is closed again when the views could not be made: call tui_teardown). */
static int tui_open_screen(Tui *ui, int *utf8) {
    static const TermModes modes = {.keypad = 0, .cursor = 1, .intrflush = 0};
    term_stderr_capture("moelab train");
    ui->screen = term_open("moelab train", &modes, utf8, "(use --headless)");
    if (!ui->screen) return -2;
    theme_init(&ui->scr.theme, *utf8, 0);
    ui->scr.mouse = !ui->o->no_mouse && ui_config_load("moelab train")->mouse; /* --no-mouse or mouse = off */
    ui->scr.click_panel = -1;
    if (ui->scr.mouse) term_mouse_on();
    if (make_views(ui)) {
        term_restore();
        fprintf(stderr, "moelab train: out of memory\n");
        return -1;
    }
    cmdline_init("moelab> ", on_line, on_cmdline_msg, ui);
    { /* completion after `@`: the run's routed layers */
        static RunRecord rr;
        trainer_describe(ui->t, &rr);
        const char *names[REC_MAX_LAYERS];
        for (int i = 0; i < rr.nlayers; i++) names[i] = rr.layer[i].name;
        cmdline_set_layers(names, rr.nlayers);
    }
    ml_log_set(log_sink, &ui->w);
    char err[1200];
    if (cmdline_history_path(ui->hist_path, sizeof ui->hist_path))
        ui_log(ui, VIEW_LOG_WARN, "history: neither XDG_STATE_HOME nor HOME is set; history is not saved");
    else if (cmdline_history_open(ui->hist_path, err, sizeof err)) ui_log(ui, VIEW_LOG_WARN, "%s", err);
    return 0;
}

/* The greeting lines, the signal handlers (self-pipe) and the trainer thread. */
static void tui_start(Tui *ui, int utf8) {
    ui_log(ui, VIEW_LOG_INFO, "moelab %s: %s, %s, %s; %d epochs x %ld steps, batch %d (%s%s)", MOELAB_VERSION,
           ui->ctx.dataset, ui->ctx.model, ui->ctx.head, ui->ctx.epochs, ui->ctx.steps_per_epoch, ui->ctx.batch,
           theme_describe(&ui->scr.theme), utf8 ? "" : ", ASCII");
    if (ui->nsched)
        ui_log(ui, VIEW_LOG_INFO, "%d scheduled commands will be applied at their steps%s%s", ui->nsched,
               ui->hooks->cmds ? "" : " from ", ui->hooks->cmds ? "" : ui->o->commands);
    ui_log(ui, VIEW_LOG_INFO, "? for help; space pauses; type commands below (set tau 0.3, anneal exp now 0.05, ...)");
    for (int i = 0; i < ui->cfg->nproblems && i < CONFIG_PROBLEMS_MAX; i++)
        ui_log(ui, VIEW_LOG_WARN, "config %s", ui->cfg->problem[i]);
    if (ui->hooks->history) { /* a resumed run: its history before the resume step (app/history_feed.c) */
        HistoryFed fed = {0};
        history_feed(ui->hooks->history, &ui->scr.ps, &fed, ui->t->step, NULL);
        ui_log(ui, VIEW_LOG_INFO, "resumed at step %ld: %ld step records and %d evaluations before it", ui->t->step,
               fed.steps, fed.evals);
    }
    term_signals_catch(&ui->sigs, ui->wake[1]);
    ui->t_open = ml_now();
    if (worker_start(&ui->w)) {
        ui_log(ui, VIEW_LOG_ERROR, "cannot start the trainer thread");
        ui->exit_code = 1;
        ui->st.done = 1;
        ui->leaving = 1;
    } else {
        ui->ran = 1;
    }
}

/* The UI loop: poll the terminal and the wake pipe, drain, draw at most every frame_sec. */
static void tui_loop(Tui *ui) {
    ui->dirty = 1;
    ui->next_frame = 0.0;
    render(ui);
    term_test_abort("train");
    while (!(ui->leaving && ui->st.done)) {
        if (term_signal()) handle_signal(ui);
        double now = ml_now();
        int timeout;
        if (ui->dirty || ui->data_pending) timeout = (int)ceil((ui->next_frame - now) * 1000.0);
        else timeout = (int)ceil((ui->last_frame + IDLE_FRAME_SEC - now) * 1000.0);
        if (timeout < 0) timeout = 0;
        if (ui->leaving && timeout > 50) timeout = 50;
        struct pollfd fds[2] = {{.fd = STDIN_FILENO, .events = POLLIN}, {.fd = ui->wake[0], .events = POLLIN}};
        const int nfd = ui->terminal_lost ? 1 : 2;
        struct pollfd *pf = ui->terminal_lost ? &fds[1] : fds;
        const int pr = poll(pf, nfd, timeout);
        if (pr < 0 && errno != EINTR) break;
        if (pr > 0 && (fds[1].revents & POLLIN)) {
            char buf[256];
            while (read(ui->wake[0], buf, sizeof buf) > 0) {}
            ui->data_pending = 1;
        }
        if (!ui->terminal_lost && pr > 0 && (fds[0].revents & (POLLHUP | POLLERR | POLLNVAL))) {
            /* the terminal went away: stop cleanly, draw nothing more */
            ui->terminal_lost = 1;
            ui->leaving = 1;
            if (!ui->exit_code) ui->exit_code = 128 + SIGHUP;
            worker_request_stop(&ui->w);
        }
        if (term_signal()) handle_signal(ui);
        if (!ui->terminal_lost) read_keys(ui);
        now = ml_now();
        if (now >= ui->next_frame) {
            drain(ui);
            ui->data_pending = 0;
            rate_sample(ui, now);
            if (now - ui->last_frame >= IDLE_FRAME_SEC) ui->dirty = 1;
            if (ui->dirty && !ui->terminal_lost) {
                render(ui);
                ui->last_frame = now;
                ui->next_frame = now + ui->frame_sec;
            }
            ui->dirty = 0;
        }
    }
    drain(ui);
}

/* Thread, readline, screen, stderr, signal handlers; the summary; every buffer. */
static void tui_teardown(Tui *ui) {
    if (!ui->st.done) worker_request_stop(&ui->w);
    worker_join(&ui->w);
    ui->st = ui->w.st;
    ml_log_set(NULL, NULL);
    cmdline_history_close();
    cmdline_free();
    free_views(ui);
    term_close(ui->screen);
    ui->screen = NULL;
    term_signals_restore(&ui->sigs);
    if (ui->ran) print_summary(ui);
    worker_drain_free(&ui->d);
    worker_free(&ui->w);
    close(ui->wake[0]);
    close(ui->wake[1]);
}

int tui_run(const AppOptions *o, const Dataset *ds, Trainer *t, TuiHooks *hooks) {
    TuiHooks no_hooks;
    memset(&no_hooks, 0, sizeof no_hooks);
    Tui *ui = calloc(1, sizeof *ui);
    if (!ui) {
        fprintf(stderr, "moelab train: out of memory\n");
        return 1;
    }
    ui->o = o;
    ui->ds = ds;
    ui->t = t;
    ui->hooks = hooks ? hooks : &no_hooks;
    ui->scr.focus = PANEL_CURVES;
    ui->pause_target = -1;
    ui->wake[0] = ui->wake[1] = -1;
    ui->step0 = t->step;
    int rc = tui_prepare(ui);
    if (rc) {
        free(ui);
        return rc;
    }
    ui->cfg = ui_config_load("moelab train"); /* theme, panels, smoothing: before the screen opens */
    ui->frame_sec = ui->cfg->refresh;
    int utf8 = 0;
    const int so = tui_open_screen(ui, &utf8);
    if (so == -2) {
        worker_drain_free(&ui->d);
        worker_free(&ui->w);
        close(ui->wake[0]);
        close(ui->wake[1]);
        free(ui);
        return 1;
    }
    rc = 1;
    if (so == 0) {
        tui_start(ui, utf8);
        tui_loop(ui);
        rc = ui->exit_code;
    }
    tui_teardown(ui);
    free(ui);
    return rc;
}
