/* term.c — terminal setup, restore on every exit path, signals (see term.h). */
#define _GNU_SOURCE
#include "app/term/term.h"

#include <errno.h>
#include <langinfo.h>
#include <locale.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

#include "core/common.h"

// ---------------------------------------------------------------------------------------------
// process-wide state (one screen at a time)

static int g_on;            /* curses is in its program mode */
static int g_mouse;         /* term_mouse_on asked for mouse reports */
static const char *g_who = "moelab";
static struct sigaction g_old_abrt;
static int g_abrt_set;

static volatile sig_atomic_t g_signal;
static volatile sig_atomic_t g_signal_count;
static volatile int g_wake_fd = -1;

static int g_stderr_saved = -1;
static FILE *g_stderr_tmp;
static char g_stderr_who[64];

// ---------------------------------------------------------------------------------------------
// stderr capture

void term_stderr_capture(const char *who) {
    fflush(stderr);
    snprintf(g_stderr_who, sizeof g_stderr_who, "%s", who);
    g_stderr_tmp = tmpfile();
    if (!g_stderr_tmp) return;
    g_stderr_saved = dup(STDERR_FILENO);
    if (g_stderr_saved < 0 || dup2(fileno(g_stderr_tmp), STDERR_FILENO) < 0) {
        if (g_stderr_saved >= 0) close(g_stderr_saved);
        g_stderr_saved = -1;
        fclose(g_stderr_tmp);
        g_stderr_tmp = NULL;
    }
}

/* Puts stderr back and prints what was written to it during the session. Idempotent. */
static void stderr_release(void) {
    if (g_stderr_saved < 0) return;
    fflush(stderr);
    dup2(g_stderr_saved, STDERR_FILENO);
    close(g_stderr_saved);
    g_stderr_saved = -1;
    if (!g_stderr_tmp) return;
    long size = 0;
    if (fseek(g_stderr_tmp, 0, SEEK_END) == 0) size = ftell(g_stderr_tmp);
    if (size > 0) {
        rewind(g_stderr_tmp);
        fprintf(stderr, "%s: messages written to stderr during the session:\n", g_stderr_who);
        char buf[4096];
        size_t k;
        while ((k = fread(buf, 1, sizeof buf, g_stderr_tmp)) > 0) fwrite(buf, 1, k, stderr);
        fflush(stderr);
    }
    fclose(g_stderr_tmp);
    g_stderr_tmp = NULL;
}

// ---------------------------------------------------------------------------------------------
// restore

/* Mouse reports off: 1006 (SGR), 1002 and 1000. */
static void mouse_off(void) {
    if (!g_mouse) return;
    g_mouse = 0;
    static const char off[] = "\033[?1006l\033[?1002l\033[?1000l";
    fflush(stdout);
    ssize_t r = write(STDOUT_FILENO, off, sizeof off - 1);
    (void)r;
}

void term_restore(void) {
    if (g_on) mouse_off();
    if (g_on && !isendwin()) endwin();
    g_on = 0;
    stderr_release();
}

static void on_atexit(void) { term_restore(); }

/* ML_ASSERT: the terminal first, then the message on the real stderr (ml_abort aborts next). */
static void on_ml_abort(const char *file, int line, const char *expr) {
    term_restore();
    fprintf(stderr, "%s: internal error: %s:%d: %s\n", g_who, file ? file : "?", line, expr ? expr : "?");
    fflush(stderr);
}

/* abort() and a failed assert(): the terminal back, then the default action (SA_RESETHAND).
 * endwin is not async-signal-safe; on this path the process is dying anyway (htop's fail()). */
static void on_sigabrt(int sig) {
    (void)sig;
    term_restore();
}

SCREEN *term_open(const char *who, const TermModes *m, int *utf8, const char *hint) {
    static int atexit_done;
    setlocale(LC_ALL, "");
    if (utf8) *utf8 = !strcmp(nl_langinfo(CODESET), "UTF-8");
    g_who = who;
    if (!atexit_done) {
        atexit(on_atexit);
        atexit_done = 1;
    }
    SCREEN *scr = newterm(NULL, stdout, stdin);
    if (!scr) {
        stderr_release();
        fprintf(stderr, "%s: cannot open the terminal '%s'%s%s\n", who, getenv("TERM") ? getenv("TERM") : "",
                hint && *hint ? " " : "", hint ? hint : "");
        return NULL;
    }
    g_on = 1;
    ml_abort_set(on_ml_abort);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigabrt;
    sa.sa_flags = SA_RESETHAND;
    sigemptyset(&sa.sa_mask);
    g_abrt_set = sigaction(SIGABRT, &sa, &g_old_abrt) == 0;
    cbreak();
    noecho();
    nonl();
    /* Ctrl-S and Ctrl-Q are keys, not flow control: with IXON on, Ctrl-S stops the terminal's
     * output and the screen freezes until Ctrl-Q (the user sees a hung program). ncurses keeps
     * this as the program's mode (def_prog_mode) and restores the shell's at endwin. */
    struct termios tio;
    if (tcgetattr(fileno(stdin), &tio) == 0) {
        tio.c_iflag &= ~(tcflag_t)(IXON | IXOFF);
        if (tcsetattr(fileno(stdin), TCSANOW, &tio) == 0) def_prog_mode();
    }
    if (!m->intrflush) intrflush(stdscr, FALSE);
    keypad(stdscr, m->keypad ? TRUE : FALSE);
    if (m->nodelay) nodelay(stdscr, TRUE);
    if (m->escdelay > 0) set_escdelay(m->escdelay);
    curs_set(m->cursor);
    return scr;
}

void term_close(SCREEN *scr) {
    term_restore();
    ml_abort_set(NULL);
    if (g_abrt_set) sigaction(SIGABRT, &g_old_abrt, NULL);
    g_abrt_set = 0;
    if (scr) delscreen(scr);
}

// ---------------------------------------------------------------------------------------------
// the mouse

void term_mouse_on(void) {
    if (!g_on) return;
    mouseinterval(0); /* presses and releases as they come: double clicks are timed by the screens */
    mousemask(BUTTON1_PRESSED | BUTTON1_RELEASED | BUTTON2_PRESSED | BUTTON3_PRESSED | BUTTON4_PRESSED |
                  BUTTON5_PRESSED,
              NULL);
    /* press/release reports (1000) in SGR form (1006), whatever the terminal description says:
     * without keypad (readline) they arrive as bytes and are parsed here */
    static const char on[] = "\033[?1000h\033[?1006h";
    fflush(stdout);
    ssize_t r = write(STDOUT_FILENO, on, sizeof on - 1);
    (void)r;
    g_mouse = 1;
}

int term_mouse_sgr(const char *seq, TermMouse *m) {
    int b, x, y, used = 0;
    char fin;
    if (seq[0] != '<' || sscanf(seq + 1, "%d;%d;%d%c%n", &b, &x, &y, &fin, &used) != 4 || seq[1 + used] != '\0')
        return 0;
    if ((fin != 'M' && fin != 'm') || x < 1 || y < 1 || (b & 32)) return 0; /* motion: not used */
    const int base = b & ~(4 | 8 | 16);                                   /* shift, meta, ctrl */
    if (base == 64 || base == 65) {
        if (fin == 'm') return 0;
        m->button = base == 64 ? 4 : 5;
    } else if (base <= 2) {
        m->button = base;
    } else {
        return 0;
    }
    m->x = x - 1;
    m->y = y - 1;
    m->press = fin == 'M';
    return 1;
}

int term_mouse_curses(TermMouse *m) {
    MEVENT e;
    if (getmouse(&e) != OK) return 0;
    m->x = e.x;
    m->y = e.y;
    m->press = 1;
    if (e.bstate & BUTTON1_PRESSED) m->button = 0;
    else if (e.bstate & BUTTON1_RELEASED) {
        m->button = 0;
        m->press = 0;
    } else if (e.bstate & BUTTON2_PRESSED) m->button = 1;
    else if (e.bstate & BUTTON3_PRESSED) m->button = 2;
    else if (e.bstate & BUTTON4_PRESSED) m->button = 4;
    else if (e.bstate & BUTTON5_PRESSED) m->button = 5;
    else return 0;
    return 1;
}

static void give_back(TermMouseParser *p, int *out, int *nout) {
    for (int i = 0; i < p->n; i++) out[i] = (unsigned char)p->buf[i];
    *nout = p->n;
    p->n = 0;
}

int term_mouse_feed(TermMouseParser *p, int c, TermMouse *m, int *out, int *nout) {
    *nout = 0;
    static const char head[] = "\033[<";
    if (p->n < 3) {
        if (c >= 0 && c < 256 && c == (unsigned char)head[p->n]) {
            p->buf[p->n++] = (char)c;
            return 0;
        }
        give_back(p, out, nout);
        out[(*nout)++] = c;
        return -1;
    }
    if ((c >= '0' && c <= '9') || c == ';') {
        if (p->n < (int)sizeof p->buf - 2) {
            p->buf[p->n++] = (char)c;
            return 0;
        }
    } else if (c == 'M' || c == 'm') {
        p->buf[p->n++] = (char)c;
        p->buf[p->n] = '\0';
        const int ok = term_mouse_sgr(p->buf + 2, m);
        p->n = 0;
        return ok ? 1 : 0;
    }
    give_back(p, out, nout); /* not a report after all */
    out[(*nout)++] = c;
    return -1;
}

void term_mouse_flush(TermMouseParser *p, int *out, int *nout) {
    *nout = 0;
    if (p->n >= 3) return; /* inside a report: the rest is on its way */
    give_back(p, out, nout);
}

// ---------------------------------------------------------------------------------------------
// signals

static void on_signal(int sig) {
    const int saved = errno;
    g_signal = sig;
    g_signal_count++;
    if (g_wake_fd >= 0) {
        ssize_t r = write(g_wake_fd, "s", 1);
        (void)r;
    }
    errno = saved;
}

void term_signals_catch(TermSignals *s, int wake_fd) {
    g_wake_fd = wake_fd;
    g_signal = 0;
    g_signal_count = 0;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &s->oi);
    sigaction(SIGTERM, &sa, &s->ot);
    sigaction(SIGHUP, &sa, &s->oh);
    s->caught = 1;
}

void term_signals_restore(TermSignals *s) {
    if (s->caught) {
        sigaction(SIGINT, &s->oi, NULL);
        sigaction(SIGTERM, &s->ot, NULL);
        sigaction(SIGHUP, &s->oh, NULL);
    }
    s->caught = 0;
    g_wake_fd = -1;
}

int term_signal(void) { return g_signal; }

int term_signal_take(void) {
    const int sig = g_signal;
    g_signal = 0;
    return sig;
}

int term_signal_count(void) { return g_signal_count; }

// ---------------------------------------------------------------------------------------------
// the test hook

void term_test_abort(const char *name) {
    const char *e = getenv("MOELAB_TEST_ABORT");
    if (!e) return;
    const size_t n = strlen(name);
    if (strncmp(e, name, n)) return;
    if (!strcmp(e + n, ":abort")) abort();
    ML_ASSERT(e[n] != '\0' && "MOELAB_TEST_ABORT asks this screen to fail an assertion");
}
