/* view_help.c — the help overlay (`?` or the `help` command): single keys and the command
 * language. Closed with Esc, `?` or `q`. */
#include "view.h"
#include "draw.h"

#include <string.h>

static const char *const help_lines[] = {
    "Keys (when the command line is empty)",
    "  space     pause / resume            tab    focus the next panel",
    "  z         zoom the focused panel    ?      this help (Esc ? q close)",
    "  q         quit (asks y/n while training)   Ctrl-L  redraw",
    "  l         curves: log / linear loss axis",
    "  [ ]       heatmap, load, log: scroll the focused panel",
    "  Up/Down   command history           Tab    complete (line not empty)",
    "",
    "Commands (take effect at the next step boundary; logged with their step)",
    "  pause | resume | step [N]          eval | snapshot | quit | help",
    "  set tau|lr|cf|alpha|beta|noise|bias-rate VALUE",
    "  anneal KIND [TAU0|now [TAU1]] [s=S] [c=C] [min=T] [every=N] [gamma=G]",
    "      KIND: const linear cosine exp sigmoid step; runs from now to the end",
    "  examples:  set tau 0.3   anneal exp now 0.05   anneal sigmoid 1 0.1 s=10",
    "",
    "`set tau` overrides the schedule until the next `anneal`; `set lr` replaces",
    "the LR schedule. Ctrl-C or SIGTERM stop cleanly after the current step.",
};
#define HELP_N ((int)(sizeof help_lines / sizeof help_lines[0]))

/* `moelab browse` (ViewCtx.browse) */
static const char *const browse_lines[] = {
    "Session list",
    "  Up/Down PgUp/PgDn Home/End  move     Enter  open the session",
    "  m or space  mark (two marked: c compares them)   c  compare",
    "  s / S     sort by the next column / reverse    /  filter (Esc clears)",
    "  r         rescan the folder                   q  quit",
    "",
    "One session (and compare)",
    "  Left/Right  previous / next evaluation   Home/End  first / last",
    "  0-9 Enter   go to that epoch             Esc/q     back to the list",
    "  t         t-SNE of the cursor's evaluation (c: colour by class/expert)",
    "  tab       focus the next panel           z   zoom the focused panel",
    "  l         curves: log / linear loss axis",
    "  [ ]       heatmap, load, log: scroll the focused panel",
    "",
    "A running session is re-read every second (SWMR); the cursor follows",
    "its newest evaluation while it is on the last one.",
};
#define BROWSE_N ((int)(sizeof browse_lines / sizeof browse_lines[0]))

static void lines_of(int browse, const char *const **lines, int *n) {
    *lines = browse ? browse_lines : help_lines;
    *n = browse ? BROWSE_N : HELP_N;
}

void view_help_size_for(int browse, int *w, int *h) {
    const char *const *lines;
    int n, mw = 0;
    lines_of(browse, &lines, &n);
    for (int i = 0; i < n; i++) {
        const int l = utf8_cells(lines[i]);
        if (l > mw) mw = l;
    }
    *w = mw + 4;
    *h = n + 2;
}

void view_help_size(int *w, int *h) { view_help_size_for(0, w, h); }

static void help_draw(View *v, WINDOW *w, Rect r) {
    const Theme *t = v->ctx->theme;
    const char *const *lines;
    int n;
    lines_of(v->ctx->browse, &lines, &n);
    for (int i = 0; i < n && i < r.h; i++) {
        const int heading = lines[i][0] != ' ' && lines[i][0] != '\0' && lines[i][0] != '`' && i > 0 &&
                            lines[i - 1][0] == '\0';
        draw_text(w, r.y + i, r.x, r.w, heading || i == 0 ? t->role[TH_TITLE] : A_NORMAL, lines[i]);
    }
}

static void help_title(const View *v, char *buf, size_t n) {
    (void)v;
    snprintf(buf, n, "Help: keys and commands (Esc, ? or q to close)");
}

const ViewClass view_help_class = {
    .name = "Help",
    .draw = help_draw,
    .title = help_title,
};
