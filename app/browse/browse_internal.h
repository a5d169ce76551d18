/* browse_internal.h — the state of the session browser shared by its files (app/browse/browse.c
 * the entry point and loop, browse_session.c, browse_tsne.c, browse_draw.c, browse_keys.c). Nothing
 * outside app/browse/ includes it. UI thread only, except TsneJob's worker. */
#ifndef ML_APP_BROWSE_INTERNAL_H
#define ML_APP_BROWSE_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "app/browse/browse.h"
#include "app/live/history_feed.h"
#include "app/term/term.h"
#include "sessions/sweep_h5.h"
#include "views/draw.h"
#include "views/panels.h"
#include "views/view.h"

#define REFRESH_SEC 1.0      /* a running session is re-read this often */
#define LIST_REFRESH_SEC 5.0 /* the list's statuses */

enum { SCR_LIST, SCR_SESSION, SCR_COMPARE, SCR_MULTI };
#define MARK_MAX VIEW_MULTI_MAX /* sessions that can be marked for a comparison */

/* One loaded session with its views. */
typedef struct {
    SessionHistory h;
    ViewCtx ctx;
    TauSchedule base; /* launch temperature schedule */
    int have_base;
    Panels ps;             /* the live screen's panels (views/panels.c) */
    HistoryFed fed;        /* what of h the panels have seen */
    SessionFollow *follow; /* a running session: appends the rows its writer adds (sessions/follow.c) */
    int loaded;
    char name[512];
    int *drops; /* (nevals, K, E) the primary layer's drops per class x expert, which h's evaluations
                 * point to (drop_class_expert; NULL where none was recorded) */
} Loaded;

/* The t-SNE worker. */
typedef struct {
    pthread_t th;
    int running;     /* a thread exists (join it) */
    atomic_int done; /* the thread finished */
    volatile int cancel;
    float *X; /* (n, d) input, owned */
    int *expert, *label;
    int n, d, ev, epoch;
    uint64_t seed;
    float *Y; /* (n, 2) result */
    ml_status st;
    char err[256];
    double seconds;
} TsneJob;

typedef struct {
    const char *root; /* what was given (DIR or a sweep.h5) */
    int direct;       /* opened one session directly: q quits from it */
    int screen;
    Theme theme;
    int utf8;
    // list
    BrowseList list;
    int *rows, nrows; /* indexes of the entries shown (filtered) */
    int sel, top;
    int list_h; /* rows of entries in the last frame (from row 2) */
    int sort_col, sort_rev;
    char filter[128];
    int input; /* 0, '/' filter or '#' epoch number being typed */
    char inbuf[64];
    double list_read_at;
    SweepSummary sweep; /* root is a sweep.h5: its summary, shown under the list */
    int have_sweep;
    char msg[512]; /* one-line message in the hint row */
    // session / compare
    Loaded a, b;
    Loaded *multi; /* compare of 3..8 runs: nmulti loaded sessions, their curves in mview */
    int nmulti;
    View mview;
    int ev;     /* cursor: evaluation index of a (-1: none) */
    int follow; /* cursor on the newest evaluation: follows a running session */
    int cmp_epoch;
    int focus, zoom, help_on, tsne_on;
    View help, tsne, diff;
    ViewCtx help_ctx;
    double refresh_at;
    TsneJob job;
    int dirty;
    int mouse;       /* clicks and the wheel are used (not --no-mouse) */
    TermMouse mev;   /* the report behind the last KEY_MOUSE */
    int click_panel; /* the panel of the last left press, and when (double clicks) */
    double click_at;
} Browser;

// ---- browse_session.c
void browse_set_msg(Browser *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void browse_loaded_free(Loaded *L);
void browse_session_cursor(Browser *b);
void browse_compare_cursor(Browser *b);
int browse_open_session(Browser *b, const char *path, const char *name);
int browse_open_compare(Browser *b, const BrowseEntry *ea, const BrowseEntry *eb);
void browse_multi_free(Browser *b);
void browse_multi_cursor(Browser *b);
/* Compare of 3..8 sessions: each loaded with its panels, their curves overlaid in mview. */
int browse_open_multi(Browser *b, const BrowseEntry *const *e, int n);
void browse_leave_to_list(Browser *b);
/* A running session, every REFRESH_SEC: the follower appends what the writer added (only the new
 * rows are read) and the panels are fed those rows; when it cannot (no follower yet, the file
 * replaced, rows dropped by a resume, a read caught mid-write) the whole file is re-read and
 * followed from there. */
void browse_session_refresh(Browser *b);

// ---- browse_tsne.c
void browse_job_stop(TsneJob *j);
/* Starts the t-SNE of evaluation ev of b->a (features read here, on the UI thread). */
void browse_tsne_start(Browser *b, int ev);
void browse_tsne_poll(Browser *b);

// ---- browse_draw.c
void browse_list_rows(Browser *b);
void browse_list_rescan(Browser *b);
void browse_render(Browser *b);

// ---- browse_keys.c
int browse_handle_key(Browser *b, int c);
/* getch, with escape sequences (a mouse report: KEY_MOUSE with *m filled) the terminal description does not know (Home as ESC [ 1 ~ under
 * another TERM, ...) mapped to keys where they are standard and swallowed otherwise, so their
 * ESC is never taken for the Esc key. */
int browse_read_key(TermMouse *m);

#endif
