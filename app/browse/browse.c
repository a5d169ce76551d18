/* browse.c — `moelab browse [DIR | FILE.h5 | sweep.h5]`: the session browser.
 *
 * Three screens on one ncurses terminal:
 *   LIST     the sessions under DIR (or a sweep's runs): sortable, filterable, two can be marked;
 *   SESSION  one session read from live.h5 into the live screen's panels (views/), with an epoch
 *            scrubber moving every panel to one evaluation; `t` shows a t-SNE map of that
 *            evaluation's saved test features; a running session is re-read every second (SWMR);
 *   COMPARE  two sessions: curves overlaid, heatmaps side by side at the same epoch, B - A table.
 *
 * The UI thread alone calls ncurses and reads HDF5 (through sessions/); t-SNE runs on a worker
 * thread that only sees plain arrays (core/tsne.c) and can be cancelled. Without a terminal (or
 * with --list) the list is printed as text instead. */
#define _GNU_SOURCE
#include "app/cli/config.h"
#include "app/browse/browse.h"
#include "app/browse/browse_internal.h"
#include "app/cli/app.h"
#include "app/live/history_feed.h"
#include "app/term/term.h"

#include <errno.h>
#include <float.h>
#include <jansson.h>
#include <langinfo.h>
#include <limits.h>
#include <locale.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/tsne.h"
#include "app/run/runsession.h" /* provides: sessions_root */
#include "sessions/sweep_h5.h"
#include "views/draw.h"
#include "views/panels.h"
#include "views/view.h"
#include "app/plot/plot.h"

// ---------------------------------------------------------------------------------------------
// plain output and the entry point

static void print_list(BrowseList *l, const char *filter) {
    static const int w[BCOL_COUNT] = {-28, -14, -8, -11, -8, 6, 6, 6, -11, -9, -16};
    for (int c = 0; c < BCOL_COUNT; c++) printf("%*s ", w[c], browse_col_name(c));
    printf("\n");
    for (int i = 0; i < l->n; i++) {
        const BrowseEntry *e = &l->e[i];
        if (!browse_entry_match(e, filter)) continue;
        char cells[BCOL_COUNT][64];
        browse_entry_cells(e, cells);
        for (int c = 0; c < BCOL_COUNT; c++) printf("%*s ", w[c], cells[c]);
        printf("\n");
        if (e->err[0]) printf("    %s: %s\n", e->ok ? "note" : "cannot read", e->err);
    }
}

static void usage(FILE *f) {
    fprintf(
        f,
        "usage: moelab browse [DIR | SESSION_DIR | FILE.h5 | sweep.h5] [--list] [--sort COLUMN] [--reverse] [--filter TEXT]\n"
        "                     [--no-mouse]\n\n"
        "Browses saved sessions (default DIR: $MOELAB_SESSIONS, else runs/). A folder holding\n"
        "live.h5, or an .h5 session file, opens that session directly; a sweep.h5 lists the\n"
        "sweep's runs. Without a terminal, or with --list, prints the list instead. COLUMN: name\n"
        "dataset head experts schedule best last epochs status alarms created (alarms: episodes by\n"
        "severity from the event log, 2C 1W 1D = collapses, warnings, expert deaths; schedule: the last\n"
        "temperature plan in force, KIND* after a live anneal, tau=V after set tau). Keys: ? in the browser.\n"
        "--filter TEXT: as / in the list (any column's text, a configuration value or KEY=VALUE such as\n"
        "tau.kind=cosine; a leading ! keeps the sessions that do not match).\n"
        "The mouse (off with --no-mouse): a click opens a list entry, focuses a panel or moves the epoch\n"
        "cursor on the scrubber, a double click zooms a panel, the wheel scrolls the list or a panel.\n");
}

static int is_session_dir(const char *p) {
    char f[1200];
    struct stat sb;
    snprintf(f, sizeof f, "%s/live.h5", p);
    return stat(f, &sb) == 0 && S_ISREG(sb.st_mode);
}

/* The command line of `moelab browse`. */
typedef struct {
    const char *root; /* DIR, SESSION_DIR, FILE.h5 or sweep.h5 (default: sessions_root()) */
    int given;        /* root was on the command line */
    const char *filter;
    int list_only, sort_col, reverse;
    int no_mouse;
} BrowseArgs;

/* Parses argv into a: -1 to go on, else the exit status (0 after --help, 2 on bad usage). */
static int parse_args(int argc, char **argv, BrowseArgs *a) {
    memset(a, 0, sizeof *a);
    a->filter = "";
    a->sort_col = BCOL_CREATED;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        }
        if (!strcmp(argv[i], "--list")) a->list_only = 1;
        else if (!strcmp(argv[i], "--reverse")) a->reverse = 1;
        else if (!strcmp(argv[i], "--no-mouse")) a->no_mouse = 1;
        else if (!strcmp(argv[i], "--sort") && i + 1 < argc) {
            a->sort_col = browse_col_parse(argv[++i]);
            if (a->sort_col < 0) {
                fprintf(stderr, "moelab browse: unknown column '%s'\n", argv[i]);
                usage(stderr);
                return 2;
            }
        } else if (!strcmp(argv[i], "--filter") && i + 1 < argc) a->filter = argv[++i];
        else if (argv[i][0] == '-') {
            fprintf(stderr, "moelab browse: unknown option '%s'\n", argv[i]);
            usage(stderr);
            return 2;
        } else if (!a->root) a->root = argv[i];
        else {
            fprintf(stderr, "moelab browse: one folder or file only\n");
            return 2;
        }
    }
    a->given = a->root != NULL;
    if (!a->root) a->root = sessions_root();
    return -1;
}

/* What root is: *is_h5 for an .h5 file, *direct for one session (a folder holding live.h5, or a
 * file that is not a sweep.h5). 0, or 1 (with a message) when root cannot be read. */
static int inspect_root(const char *root, int given, int *is_h5, int *direct) {
    struct stat sb;
    if (stat(root, &sb) != 0) {
        fprintf(
            stderr, "moelab browse: %s: %s%s\n", root, strerror(errno),
            given
                ? ""
                : " (moelab train writes sessions under $MOELAB_SESSIONS, else runs/ of the folder it runs in; give the "
                  "folder to browse)");
        return 1;
    }
    const size_t rl = strlen(root);
    *is_h5 = S_ISREG(sb.st_mode) && rl > 3 && !strcmp(root + rl - 3, ".h5");
    *direct = is_session_dir(root) || (S_ISREG(sb.st_mode) && !*is_h5);
    SessionInfo probe;
    /* a session file, not a sweep (read in a child first: one that crashes the HDF5 library is
     * taken as a session, and browse_load reports it) */
    if (*is_h5 && (session_probe(root, SESSION_PROBE_INFO) != ML_OK || session_read_info(root, &probe) == ML_OK))
        *direct = 1;
    return 0;
}

/* --list (or no terminal) on one session: its row of the list. */
static void print_session(const char *root) {
    BrowseList l = {0};
    BrowseEntry e;
    memset(&e, 0, sizeof e);
    snprintf(e.name, sizeof e.name, "%s", root);
    snprintf(e.path, sizeof e.path, "%s", root);
    browse_entry_read(&e, (double)time(NULL));
    l.e = &e;
    l.n = 1;
    print_list(&l, "");
}

/* Reads what the browser starts from: checks that the one session given reads, or scans the list
 * (and a sweep.h5's summary). With print (--list, or no terminal) prints the list instead of
 * browsing it. Returns -1 to open the screen, else the exit status. */
static int browse_load(Browser *b, const BrowseArgs *a, int is_h5, int direct, int print) {
    if (direct) {
        /* one session: check it reads before opening the screen */
        SessionInfo i;
        if (session_probe(a->root, SESSION_PROBE_INFO) != ML_OK || session_read_info(a->root, &i) != ML_OK) {
            fprintf(stderr, "moelab browse: %s\n", ml_last_error());
            return 1;
        }
        if (print) {
            print_session(a->root);
            return 0;
        }
        return -1;
    }
    if (browse_list_scan(&b->list, a->root)) {
        fprintf(stderr, "moelab browse: %s\n", ml_last_error());
        return 1;
    }
    browse_list_sort(&b->list, a->sort_col, a->reverse);
    if (is_h5 && sweep_h5_read(a->root, &b->sweep) == ML_OK) b->have_sweep = 1;
    if (!print) return -1;
    print_list(&b->list, a->filter);
    int damaged = 0;
    for (int i = 0; i < b->list.n; i++) damaged += !b->list.e[i].ok;
    printf("%d sessions, %d unreadable\n", b->list.n, damaged);
    return 0;
}

/* Opens the terminal in the browser's modes, with its theme and help overlay. NULL (with a
 * message) when the terminal cannot be opened. */
static SCREEN *screen_open(Browser *b) {
    static const TermModes modes = {.keypad = 1, .nodelay = 1, .escdelay = 25, .cursor = 0, .intrflush = 1};
    ui_config_load("moelab browse"); /* theme, panels, smoothing: before the screen opens */
    SCREEN *scr = term_open("moelab browse", &modes, &b->utf8, "(use --list)");
    if (!scr) return NULL;
    theme_init(&b->theme, b->utf8, 0);
    memset(&b->help_ctx, 0, sizeof b->help_ctx);
    b->help_ctx.theme = &b->theme;
    b->help_ctx.browse = 1;
    view_init(&b->help, &view_help_class, &b->help_ctx);
    if (b->mouse) term_mouse_on();
    return scr;
}

/* The first screen: the session given (0, or -1 with the terminal restored and a message when
 * it does not open), or the list. */
static int screen_first(Browser *b, const char *root, int direct) {
    if (direct) {
        b->direct = 1;
        if (browse_open_session(b, root, root)) {
            term_restore();
            fprintf(stderr, "moelab browse: %s\n", b->msg);
            return -1;
        }
    } else {
        browse_list_rows(b);
        b->list_read_at = ml_now();
    }
    return 0;
}

/* Handles the keys waiting; 1 if one of them quits. */
static int read_keys(Browser *b) {
    for (int guard = 0; guard < 1024; guard++) {
        const int c = browse_read_key(&b->mev);
        if (c == ERR) break;
        if (browse_handle_key(b, c)) return 1;
    }
    return 0;
}

/* On the list screen, every LIST_REFRESH_SEC: the running sessions' rows follow their progress
 * (r rescans everything). */
static void list_follow_running(Browser *b) {
    if (b->screen == SCR_LIST && ml_now() - b->list_read_at > LIST_REFRESH_SEC) {
        const double t0 = ml_now();
        for (int i = 0; i < b->list.n; i++)
            if (!strcmp(b->list.e[i].status, "running")) {
                browse_entry_read(&b->list.e[i], (double)time(NULL));
                b->dirty = 1;
            }
        b->list_read_at = ml_now() + 4 * (ml_now() - t0);
    }
}

/* The event loop: draws, waits for keys, polls the t-SNE worker and re-reads running sessions
 * until a key quits, a signal arrives or the terminal hangs up. Returns the exit status. */
static int browse_loop(Browser *b) {
    b->dirty = 1;
    for (;;) {
        const int sig = term_signal();
        if (sig) return sig == SIGINT ? 0 : 128 + sig;
        if (b->dirty) {
            browse_render(b);
            term_test_abort("browse");
            b->dirty = 0;
        }
        struct pollfd pf = {.fd = STDIN_FILENO, .events = POLLIN};
        const int timeout = b->job.running ? 100 : 250;
        const int pr = poll(&pf, 1, timeout);
        if (pr < 0 && errno != EINTR) return 0;
        if (pr > 0 && (pf.revents & (POLLHUP | POLLERR | POLLNVAL))) return 128 + SIGHUP;
        if (read_keys(b)) return 0;
        browse_tsne_poll(b);
        browse_session_refresh(b);
        list_follow_running(b);
    }
}

/* Stops the t-SNE worker, frees the views and closes the terminal. */
static void screen_close(Browser *b, SCREEN *scr) {
    browse_job_stop(&b->job);
    browse_loaded_free(&b->a);
    browse_loaded_free(&b->b);
    browse_multi_free(b);
    view_free(&b->help);
    view_free(&b->tsne);
    view_free(&b->diff);
    term_close(scr);
}

static void browser_free(Browser *b) {
    browse_list_free(&b->list);
    if (b->have_sweep) sweep_summary_free(&b->sweep);
    free(b->rows);
    free(b);
}

int cmd_browse(int argc, char **argv) {
    BrowseArgs a;
    int rc = parse_args(argc, argv, &a);
    if (rc >= 0) return rc;
    const int tty = isatty(STDIN_FILENO) && isatty(STDOUT_FILENO);
    int is_h5, direct;
    if (inspect_root(a.root, a.given, &is_h5, &direct)) return 1;
    Browser *b = calloc(1, sizeof *b);
    if (!b) {
        fprintf(stderr, "moelab browse: out of memory\n");
        return 1;
    }
    b->root = a.root;
    b->sort_col = a.sort_col;
    b->sort_rev = a.reverse;
    b->job.ev = -1;
    b->mouse = !a.no_mouse && ui_config_load("moelab browse")->mouse; /* --no-mouse or mouse = off */
    b->click_panel = -1;
    snprintf(b->filter, sizeof b->filter, "%s", a.filter);
    rc = browse_load(b, &a, is_h5, direct, !tty || a.list_only);
    if (rc >= 0) {
        browser_free(b);
        return rc;
    }

    // ---- the screen
    SCREEN *scr = screen_open(b);
    if (!scr) {
        browser_free(b);
        return 1;
    }
    TermSignals sigs = {0};
    term_signals_catch(&sigs, -1);
    rc = screen_first(b, a.root, direct) ? 1 : browse_loop(b);
    screen_close(b, scr);
    term_signals_restore(&sigs);
    browser_free(b);
    return rc;
}
