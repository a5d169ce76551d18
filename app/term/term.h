/* term.h — the terminal of the three full-screen subcommands (the live screen, `moelab attach`,
 * `moelab browse`), set up and given back in one place: newterm on stdout/stdin in the caller's
 * modes, the terminal restored on every way out (a normal return, exit() through atexit, an
 * ML_ASSERT through the abort hook, abort() or a failed assert() through SIGABRT), SIGINT /
 * SIGTERM / SIGHUP turned into a flag (and a byte on a wake pipe), and the stderr capture of the
 * live screen. UI thread only; one screen at a time (the state is process-wide). */
#ifndef ML_APP_TERM_H
#define ML_APP_TERM_H

#include <curses.h>
#include <signal.h>

/* The input modes a screen wants (cbreak, noecho and nonl always). */
typedef struct {
    int keypad;    /* 1: curses decodes function keys (browse); 0: readline gets raw bytes */
    int nodelay;   /* 1: getch on stdscr never waits */
    int escdelay;  /* > 0: set_escdelay (ms) */
    int cursor;    /* curs_set */
    int intrflush; /* 0: intrflush(stdscr, FALSE) */
} TermModes;

/* setlocale, then newterm on stdout/stdin in modes m; *utf8 tells whether the locale is UTF-8.
 * `who` ("moelab browse") prefixes the messages of the failure paths. Installs the restore on
 * every exit path (atexit once per process, the ML_ASSERT abort hook, a SIGABRT handler). NULL
 * with a message naming $TERM and `hint` (may be "") when the terminal cannot be opened. */
SCREEN *term_open(const char *who, const TermModes *m, int *utf8, const char *hint);
/* endwin if the screen is on, then the stderr capture is given back (idempotent; also the
 * atexit and abort paths). */
void term_restore(void);
/* term_restore, the abort hook and the SIGABRT handler removed, delscreen(scr) (may be NULL). */
void term_close(SCREEN *scr);

/* SIGINT, SIGTERM and SIGHUP set the pending signal and write one byte to wake_fd (-1: none)
 * until term_signals_restore puts the saved handlers back. */
typedef struct {
    struct sigaction oi, ot, oh;
    int caught;
} TermSignals;
void term_signals_catch(TermSignals *s, int wake_fd);
void term_signals_restore(TermSignals *s);
int term_signal(void);       /* the last signal caught, 0 when none */
int term_signal_take(void);  /* the same, and clears it */
int term_signal_count(void); /* signals caught since term_signals_catch */

/* stderr into a temporary file while the screen is open; term_restore writes it back to the
 * real stderr after the line "`who`: messages written to stderr during the session:". */
void term_stderr_capture(const char *who);

/* ---- the mouse (on by default; --no-mouse): clicks and the wheel as SGR (1006) reports.
 * term_mouse_on asks the terminal for press/release and wheel reports in SGR form (and, with
 * keypad, lets curses decode them where the terminal description knows them: KEY_MOUSE);
 * term_restore turns the reports off again on every way out. */
typedef struct {
    int button; /* 0 left, 1 middle, 2 right, 4 wheel up, 5 wheel down */
    int x, y;   /* the cell, 0-based */
    int press;  /* 1 press (a wheel notch is a press), 0 release */
} TermMouse;
void term_mouse_on(void);
/* An SGR report after its ESC [ : "<B;X;YM" (press) or "...m" (release), NUL-terminated. 1 and
 * *m filled for a press or release of a button or a wheel notch, 0 for anything else (a motion
 * report, not a report at all). */
int term_mouse_sgr(const char *seq, TermMouse *m);
/* After KEY_MOUSE from curses (keypad on): getmouse into *m. 1, or 0 when it is not a button or
 * wheel event. */
int term_mouse_curses(TermMouse *m);

/* Raw input (keypad off: the live screen and attach, where readline takes the bytes): finds the
 * SGR reports in the byte stream and gives every other byte back in order. */
typedef struct {
    char buf[32];
    int n;
} TermMouseParser;
/* Feeds byte c. Returns 1: a report ended, *m filled; 0: c is held (a report may be starting);
 * -1: the held bytes and c are keys, in out[0 .. *nout) (at most 33). A report of another kind
 * (motion) is swallowed (returns 0 at its end with nothing held). */
int term_mouse_feed(TermMouseParser *p, int c, TermMouse *m, int *out, int *nout);
/* No more input came: the bytes held (a lone Esc, an unfinished sequence) are keys; *nout of
 * them in out. A report already past its "ESC [ <" stays held for the next read. */
void term_mouse_flush(TermMouseParser *p, int *out, int *nout);

/* The test hook behind tests/t_termrestore.sh: when $MOELAB_TEST_ABORT names this screen
 * ("train", "attach", "browse"), fails an ML_ASSERT; "NAME:abort" calls abort() instead (the
 * SIGABRT path of a plain assert()). Call it once the first frame is drawn. */
void term_test_abort(const char *name);

#endif
