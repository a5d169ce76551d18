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

void view_help_size(int *w, int *h) {
    int mw = 0;
    for (int i = 0; i < HELP_N; i++) {
        const int l = utf8_cells(help_lines[i]);
        if (l > mw) mw = l;
    }
    *w = mw + 4;
    *h = HELP_N + 2;
}

static void help_draw(View *v, WINDOW *w, Rect r) {
    const Theme *t = v->ctx->theme;
    for (int i = 0; i < HELP_N && i < r.h; i++) {
        const int heading = help_lines[i][0] != ' ' && help_lines[i][0] != '\0' && help_lines[i][0] != '`';
        draw_text(w, r.y + i, r.x, r.w, heading ? t->role[TH_TITLE] : A_NORMAL, help_lines[i]);
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
