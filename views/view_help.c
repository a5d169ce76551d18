/* view_help.c — the help overlay (`?` or the `help` command): single keys and the command
 * language. Closed with Esc, `?` or `q`. */
#include "view.h"
#include "draw.h"

#include <stdio.h>
#include <string.h>

#include "core/cmdtab.h"
#include "core/params.h"
#include "core/tau.h"
#include "core/vocab.h"

/* The live screen's help: fixed text around the command-language lines, which are generated
 * from the command table (core/cmdtab.h) and the vocabulary tables (core/params.h, core/tau.h) at
 * first use and wrapped to HELP_W cells. */
#define HELP_W 74
#define HELP_MAX 40
static const char *const help_head[] = {
    "Keys (when the command line is empty)",
    "  space     pause / resume            tab    focus the next panel",
    "  z         zoom the focused panel    ?      this help (Esc ? q close)",
    "  q         quit (asks y/n while training)   Ctrl-L  redraw",
    "  l         curves: log / linear loss axis   m  loss smoothing",
    "  [ ]       previous / next routed layer   { }  scroll heatmap, load, log",
    "  mouse     click: focus a panel   double click: zoom   wheel: scroll it",
    "  /text     filter the log; /!text the others; / clears   n N  matches",
    "  Up/Down   command history           Tab    complete (line not empty)",
    "",
    "Commands (take effect at the next step boundary; logged with their step)",
};
static const char *const help_tail[] = {
    "  examples:  set tau 0.3   anneal exp now 0.05   anneal sigmoid 1 0.1 s=10",
    "             on-collapse set tau 2; set alpha 0.05",
    "",
};
static const char help_note[] = "`set tau` holds until the next `anneal`, which runs from now to the end; `set lr` "
                                "replaces the LR schedule; Ctrl-C or SIGTERM stop cleanly.";
#define NELEM(a) ((int)(sizeof a / sizeof a[0]))

static struct {
    int n;
    const char *line[HELP_MAX];
    char text[HELP_MAX][HELP_W + 1];
} help;

static void help_add(const char *s) {
    if (help.n < HELP_MAX) help.line[help.n++] = s;
}

/* Adds `text` as lines of at most HELP_W bytes (ASCII), broken at spaces: the first line starts
 * with `first`, the others with `next`. */
static void help_wrap(const char *first, const char *next, const char *text) {
    const char *p = text;
    while (*p && help.n < HELP_MAX) {
        char *out = help.text[help.n];
        const char *prefix = p == text ? first : next;
        int len = snprintf(out, HELP_W + 1, "%s", prefix);
        const char *cut = NULL; /* last space that fits */
        const char *q = p;
        for (; *q && len + (q - p) < HELP_W; q++)
            if (*q == ' ') cut = q;
        if (!*q || !cut) cut = q; /* the rest fits, or one word longer than a line */
        snprintf(out + len, HELP_W + 1 - len, "%.*s", (int)(cut - p), p);
        help_add(out);
        p = cut;
        while (*p == ' ') p++;
    }
}

static void help_build(void) {
    if (help.n) return;
    for (int i = 0; i < NELEM(help_head); i++) help_add(help_head[i]);
    static char simple[256];
    char keys[256], usage[320], kinds[256];
    size_t len = 0;
    for (int k = 0; k < CMD_KIND_COUNT; k++) /* the short ones on one line: pause | resume | step [N] | ... */
        if (strlen(cmd_table[k].args) < 8)
            len += (size_t)snprintf(simple + len, sizeof simple - len, "%s%s", len ? " | " : "",
                                    cmd_usage(k, usage, sizeof usage));
    help_wrap("  ", "  ", simple);
    for (int k = 0; k < CMD_KIND_COUNT; k++) { /* the others with their arguments, one each */
        if (strlen(cmd_table[k].args) < 8) continue;
        cmd_usage(k, usage, sizeof usage);
        help_wrap("  ", "      ", usage);
        if (k == CMD_ANNEAL) {
            snprintf(kinds, sizeof kinds, "KIND: %s", vocab_join(keys, sizeof keys, tau_kind_names, " ", NULL));
            help_wrap("      ", "            ", kinds);
        }
    }
    for (int i = 0; i < NELEM(help_tail); i++) help_add(help_tail[i]);
    help_wrap("", "", help_note);
}

/* `moelab browse` (ViewCtx.browse) */
static const char *const browse_lines[] = {
    "Session list",
    "  Up/Down PgUp/PgDn Home/End  move     Enter  open the session",
    "  m or space  mark (2 to 8: c compares them)       c  compare",
    "  s / S     sort by the next column / reverse    /  filter (Esc clears)",
    "  /text     filter: name, dataset, head, schedule, status, E4 k2 h16,",
    "            a config value or KEY=VALUE (seed=7); /!text inverts; n N",
    "  r         rescan the folder                   q  quit",
    "  mouse     click: open an entry               wheel: move",
    "",
    "One session (and compare)",
    "  Left/Right  previous / next evaluation   Home/End  first / last",
    "  0-9 Enter   go to that epoch             Esc/q     back to the list",
    "  t         t-SNE of the cursor's evaluation (c: colour by class/expert)",
    "  tab       focus the next panel           z   zoom the focused panel",
    "  l         curves: log / linear loss axis",
    "  d         class x expert: test first choices / training capacity drops",
    "  p         figures of what is on screen (PDF + PNG, moelab plot)",
    "  [ ]       previous / next routed layer   { }  scroll heatmap, load, log",
    "  mouse     click: focus a panel, or on the status bar's progress bar",
    "            go to that epoch    double click: zoom   wheel: scroll",
    "",
    "A running session is re-read every second (SWMR); the cursor follows",
    "its newest evaluation while it is on the last one.",
};
#define BROWSE_N ((int)(sizeof browse_lines / sizeof browse_lines[0]))

static void lines_of(int browse, const char *const **lines, int *n) {
    if (!browse) help_build();
    *lines = browse ? browse_lines : help.line;
    *n = browse ? BROWSE_N : help.n;
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
        const int heading =
            lines[i][0] != ' ' && lines[i][0] != '\0' && lines[i][0] != '`' && i > 0 && lines[i - 1][0] == '\0';
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
