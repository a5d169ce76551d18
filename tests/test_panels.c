/* test_panels.c — the panel set of the live screen, attach and the browser (views/panels.c) with
 * records built here (two routed layers, nlayers = 2, and one): per-layer panels fed with their
 * layer's projection, `[` / `]` cycling the layer and the layer's name in the titles, the plan of
 * one layer reaching only its temperature panel, the all-layers strip (one line per layer, the
 * one-line summary with "+N layers" when the rows do not hold them) and its place in the layout,
 * titles cut before the layer tag, and a one-layer run laid out and titled as before. Drawn into
 * curses windows of a terminal opened on /dev/null and read back with winnstr; the routing
 * panel's red values follow the run's collapse thresholds. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "views/panels.h"
#include "views/plot.h"

#define CHECK_QUIET /* thousands of checks: only the failures are printed */
#include "check.h"


/* Row y of window w as text (trailing blanks kept). */
static const char *row(WINDOW *w, int y) {
    static char buf[512];
    buf[0] = '\0';
    if (!w) return buf;
    const int n = mvwinnstr(w, y, 0, buf, (int)sizeof buf - 1);
    if (n < 0) buf[0] = '\0';
    return buf;
}

static void ctx_make(ViewCtx *c, const Theme *t, int nlayers) {
    memset(c, 0, sizeof *c);
    c->theme = t;
    snprintf(c->dataset, sizeof c->dataset, "synthetic 16x16x3");
    c->classes = 3;
    c->n_train = c->n_test = 100;
    snprintf(c->model, sizeof c->model, "dw w=0.25 d=64");
    snprintf(c->head, sizeof c->head, "moe E=4 k=2 h=16 cf=1.25");
    c->has_moe = 1;
    c->E = 4;
    c->k = 2;
    c->h = 16;
    c->capacity = 10;
    c->batch = 16;
    c->epochs = 2;
    c->log_every = 1;
    c->steps_per_epoch = 10;
    c->total_steps = 20;
    c->dead_window = 10;
    TauSchedule s;
    tau_schedule_defaults(&s);
    s.total = 20;
    tau_plan_init(&c->plan, &s);
    c->nlayers = nlayers;
    static const char *const names[] = {"moe2", "head", "moe0", "moe1", "moe3"};
    for (int i = 0; i < nlayers; i++) {
        snprintf(c->layer[i].name, sizeof c->layer[i].name, "%s", names[i]);
        c->layer[i].E = i == 1 ? 8 : 4;
        c->layer[i].k = 2;
        c->layer[i].h = 16;
        c->layer[i].capacity = i == 1 ? 5 : 10;
        c->layer[i].stage = i == 1 ? -1 : 2;
    }
}

/* A step with layer i's statistics distinct: layer 1 ("head") collapsed, its entropy low. */
static void step_make(StepRecord *r, long step, int nlayers) {
    memset(r, 0, sizeof *r);
    r->step = step;
    r->epoch = 1;
    r->loss = r->loss_total = 1.0;
    r->acc = 0.5;
    r->tau = 1;
    r->has_moe = 1;
    r->moe.B = 16;
    r->moe.E = 4;
    r->moe.k = 2;
    r->moe.capacity = 10;
    r->collapse_first_step = -1;
    r->nlayers = nlayers;
    for (int i = 0; i < nlayers; i++) {
        StepLayer *l = &r->layer[i];
        l->moe = r->moe;
        l->moe.E = i == 1 ? 8 : 4;
        l->moe.capacity = i == 1 ? 5 : 10;
        l->moe.first_share = i == 1 ? 0.9 : 0.3;
        l->moe.drop_frac = i == 1 ? 0.25 : 0.0;
        l->moe.tau = 1;
        l->window_load_entropy = i == 1 ? 0.125 : 0.875;
        l->dead_experts = i == 1 ? 6 : 0;
        l->collapsed = i == 1;
        l->collapse_first_step = i == 1 ? step : -1;
    }
    r->collapsed = nlayers > 1;
}

static void test_layered(void) {
    Theme t;
    theme_init(&t, 0, 1);
    ViewCtx ctx;
    ctx_make(&ctx, &t, 2);
    Panels ps;
    CHECK(panels_init(&ps, &ctx) == 0, "init");
    CHECK(panels_layered(&ps) && ps.nlayers == 2 && ps.sel == 0, "two layers: layered, layer 0 shown");
    CHECK(ps.have[PANEL_HEATMAP] && ps.v[PANEL_HEATMAP].self == ps.lv[0][PANEL_HEATMAP].self,
          "the heatmap shown is layer 0's");
    CHECK(ps.lv[1][PANEL_LOAD].ctx->E == 8 && ps.lv[0][PANEL_LOAD].ctx->E == 4, "each layer's views know its E");
    CHECK(ps.have_strip, "a strip");
    for (long s = 1; s <= 5; s++) {
        StepRecord r;
        step_make(&r, s, 2);
        const ViewMsg m = {.kind = VIEW_MSG_STEP, .step = &r};
        panels_update(&ps, &m);
    }
    /* an evaluation: layer 0's class x expert puts every class on e1, layer 1's on e6 */
    int ce0[3 * 4] = {0}, ce1[3 * 8] = {0};
    for (int c = 0; c < 3; c++) {
        ce0[c * 4 + 1] = 10;
        ce1[c * 8 + 6] = 10;
    }
    EvalRecord e;
    memset(&e, 0, sizeof e);
    e.epoch = 1;
    e.step = 5;
    e.has_moe = 1;
    e.moe.classes = 3;
    e.moe.experts = 4;
    e.moe.class_expert = ce0;
    e.collapse_first_step = -1;
    e.nlayers = 2;
    for (int i = 0; i < 2; i++) {
        e.layer[i].classes = 3;
        e.layer[i].experts = i ? 8 : 4;
        e.layer[i].class_expert = i ? ce1 : ce0;
        e.layer[i].mutual_info = i ? 0.0 : 0.5;
        e.layer[i].collapse_first_step = -1;
    }
    const ViewMsg em = {.kind = VIEW_MSG_EVAL, .eval = &e};
    panels_update(&ps, &em);

    char title[320];
    panels_title(&ps, PANEL_HEATMAP, 60, 0, title, sizeof title);
    CHECK(strstr(title, "Class x expert") && strstr(title, "moe2 (1/2)"), "heatmap title names layer 1/2: '%s'", title);
    panels_title(&ps, PANEL_CURVES, 60, 0, title, sizeof title);
    CHECK(!strstr(title, "moe2"), "the curves are the run's, no layer tag: '%s'", title);

    /* drawn at 120x40: titles, the heatmap's columns and the strip */
    Layout lay;
    panels_layout(&ps, &lay, 120, 40, -1);
    CHECK(lay.strip.h == 2 && lay.strip.w == 120, "120x40: a two-row strip (%dx%d)", lay.strip.w, lay.strip.h);
    CHECK(lay.strip.y + lay.strip.h == lay.r[PANEL_LOG].y, "the strip sits right above the log");
    CHECK(lay.r[PANEL_HEATMAP].y + lay.r[PANEL_HEATMAP].h == lay.strip.y, "under the panels");
    panels_draw(&ps, &lay, PANEL_HEATMAP, 1);
    WINDOW *hw = ps.win[PANEL_HEATMAP], *sw = ps.win[PANEL_COUNT];
    CHECK(hw && strstr(row(hw, 0), "Class x expert") && strstr(row(hw, 0), " - moe2 "), "heatmap frame title: '%s'", row(hw, 0));
    CHECK(ps.win[PANEL_LOAD] && strstr(row(ps.win[PANEL_LOAD], 0), " - moe2 "), "load title: '%s'",
          row(ps.win[PANEL_LOAD], 0));
    CHECK(ps.win[PANEL_TEMP] && strstr(row(ps.win[PANEL_TEMP], 0), " - moe2"), "temperature title");
    CHECK(ps.win[PANEL_SCALARS] && strstr(row(ps.win[PANEL_SCALARS], 0), " - moe2"), "scalars title");
    CHECK(hw && strstr(row(hw, 1), "e3") && !strstr(row(hw, 1), "e4"), "layer 0's heatmap has 4 experts: '%s'",
          row(hw, 1));
    if (getenv("PANELS_DEBUG")) {
        for (int y = 0; y < lay.r[PANEL_HEATMAP].h; y++) printf("H|%s\n", row(hw, y));
        for (int y = 0; y < 2; y++) printf("S|%s\n", row(sw, y));
    }
    CHECK(sw && strstr(row(sw, 0), "> moe2") && strstr(row(sw, 0), "ok") && strstr(row(sw, 0), "top-1  30%"),
          "strip line 1: '%s'", row(sw, 0));
    CHECK(sw && strstr(row(sw, 1), "head") && strstr(row(sw, 1), "COLLAPSE") && strstr(row(sw, 1), "dead 6/8") &&
              strstr(row(sw, 1), "drop 25.0%") && strstr(row(sw, 1), "load H 0.125"),
          "strip line 2 shows the collapsed unselected layer: '%s'", row(sw, 1));

    /* ] : the other layer */
    CHECK(panels_key(&ps, PANEL_HEATMAP, ']') == 1 && ps.sel == 1, "] selects layer 2");
    CHECK(ps.v[PANEL_HEATMAP].self == ps.lv[1][PANEL_HEATMAP].self, "the heatmap shown is layer 1's");
    panels_draw(&ps, &lay, PANEL_HEATMAP, 1);
    hw = ps.win[PANEL_HEATMAP];
    sw = ps.win[PANEL_COUNT];
    CHECK(hw && strstr(row(hw, 0), " - head ") && !strstr(row(hw, 0), "moe2"), "title after ]: '%s'", row(hw, 0));
    CHECK(hw && strstr(row(hw, 1), "e4"), "layer 1's heatmap has 8 experts: '%s'", row(hw, 1));
    CHECK(sw && strstr(row(sw, 1), "> head") && !strstr(row(sw, 0), "> moe2"), "the strip marks the selection");
    CHECK(panels_key(&ps, PANEL_HEATMAP, ']') == 1 && ps.sel == 0, "] wraps around");
    CHECK(panels_key(&ps, PANEL_HEATMAP, '[') == 1 && ps.sel == 1, "[ goes back");
    CHECK(panels_key(&ps, PANEL_LOG, '[') == 1 && ps.sel == 1, "the focused log scrolls with [, the layer stays");
    CHECK(panels_key(&ps, PANEL_HEATMAP, 'x') == 0, "other keys are not the panels'");

    /* a plan for layer 1 only */
    TauPlan p1 = ctx.plan;
    CHECK(tau_plan_set(&p1, 3, 0.25f) == ML_OK, "plan override");
    panels_plan(&ps, &p1, 3, 1);
    char t0[256], t1[256];
    view_title(&ps.lv[0][PANEL_TEMP], t0, sizeof t0);
    view_title(&ps.lv[1][PANEL_TEMP], t1, sizeof t1);
    CHECK(strstr(t1, "OVERRIDE") && !strstr(t0, "OVERRIDE"), "layer 1's plan only: '%s' / '%s'", t0, t1);
    panels_plan(&ps, &p1, 3, -1);
    view_title(&ps.lv[0][PANEL_TEMP], t0, sizeof t0);
    CHECK(strstr(t0, "OVERRIDE"), "-1: every layer's plan: '%s'", t0);

    /* a narrow frame: the view's title is cut, the tag stays whole */
    panels_title(&ps, PANEL_HEATMAP, 30, 1, title, sizeof title);
    CHECK(strstr(title, " - head") && strstr(title, "~") && utf8_cells(title) <= 30 - 8,
          "cut before the layer's name: '%s' (%d cells)", title, utf8_cells(title));
    panels_title(&ps, PANEL_LOAD, 200, 0, title, sizeof title);
    CHECK(strstr(title, " - head (2/2)") && !strstr(title, "~"), "wide: whole title and tag: '%s'", title);

    /* 80x24: two layers fit in two rows */
    panels_layout(&ps, &lay, 80, 24, -1);
    CHECK(lay.strip.h == 2 && !lay.too_small, "80x24: two strip rows");
    CHECK(lay.r[PANEL_HEATMAP].h >= 6, "80x24: the heatmap keeps %d rows", lay.r[PANEL_HEATMAP].h);
    panels_layout(&ps, &lay, 80, 24, PANEL_HEATMAP);
    CHECK(lay.strip.h == 2 && lay.strip.y + 2 == 23 && lay.r[PANEL_HEATMAP].y + lay.r[PANEL_HEATMAP].h == lay.strip.y,
          "zoomed: the strip stays, over the command line");
    panels_free(&ps);
    panels_free(&ps); /* idempotent */
}

static void test_summary(void) {
    Theme t;
    theme_init(&t, 0, 1);
    ViewCtx ctx;
    ctx_make(&ctx, &t, 5);
    Panels ps;
    CHECK(panels_init(&ps, &ctx) == 0, "init 5 layers");
    CHECK(panels_strip_rows(&ps, 24) == 1 && panels_strip_rows(&ps, 40) == 5, "5 layers: 1 row at 24 lines, 5 at 40");
    StepRecord r;
    step_make(&r, 1, 5);
    r.layer[4].collapsed = 1; /* moe3 too */
    const ViewMsg m = {.kind = VIEW_MSG_STEP, .step = &r};
    panels_update(&ps, &m);
    Layout lay;
    panels_layout(&ps, &lay, 80, 24, -1);
    CHECK(lay.strip.h == 1, "80x24: a one-line summary");
    panels_draw(&ps, &lay, PANEL_CURVES, 1);
    const char *s = row(ps.win[PANEL_COUNT], 0);
    const char *h = strstr(s, "head"), *m3 = strstr(s, "moe3"), *m2 = strstr(s, "moe2");
    if (getenv("PANELS_DEBUG")) printf("S|%s\n", s);
    CHECK(h && m3 && (!m2 || (h < m2 && m3 < m2)), "collapsed layers first: '%s'", s);
    CHECK(strstr(s, "+") && strstr(s, " layers"), "what did not fit is marked '+N layers': '%s'", s);
    int shown = 0;
    for (int i = 0; i < 5; i++) shown += strstr(s, ctx.layer[i].name) != NULL;
    char more[32];
    snprintf(more, sizeof more, "+%d layers", 5 - shown);
    CHECK(shown < 5 && strstr(s, more), "the marker counts the %d hidden layers: '%s'", 5 - shown, s);
    panels_layout(&ps, &lay, 120, 40, -1);
    CHECK(lay.strip.h == 5, "120x40: one line per layer");
    panels_free(&ps);
}

static void test_one_layer(void) {
    Theme t;
    theme_init(&t, 0, 1);
    for (int n = 0; n <= 1; n++) {
        ViewCtx ctx;
        ctx_make(&ctx, &t, n);
        Panels ps;
        CHECK(panels_init(&ps, &ctx) == 0, "init %d layers", n);
        CHECK(!panels_layered(&ps) && !ps.have_strip && panels_strip_rows(&ps, 40) == 0, "%d layers: one set", n);
        Layout a, b;
        panels_layout(&ps, &a, 80, 24, -1);
        const LayoutOptions lo = {.has_moe = 1, .banner = 0, .zoom = -1};
        layout_compute(&b, 80, 24, &lo);
        CHECK(!memcmp(&a, &b, sizeof a), "%d layers: the layout of before", n);
        StepRecord r;
        step_make(&r, 1, n);
        const ViewMsg m = {.kind = VIEW_MSG_STEP, .step = &r};
        panels_update(&ps, &m);
        char title[320], plain[320];
        panels_title(&ps, PANEL_HEATMAP, 60, 0, title, sizeof title);
        view_title(&ps.v[PANEL_HEATMAP], plain, sizeof plain);
        CHECK(!strcmp(title, plain), "%d layers: the view's own title '%s'", n, title);
        CHECK(panels_key(&ps, PANEL_HEATMAP, ']') == 1 && ps.sel == 0, "%d layers: ] scrolls the heatmap", n);
        panels_free(&ps);
    }
}

/* The loss curves mark where and when the run was in alarm (issue 26): a row labelled "alarm" between
 * the plot and the step axis, '-' over the steps of a warning, '#' over those of a collapse (ASCII,
 * no colour), lined up with the canvas' step mapping; an old session's `collapsed` rows (alarm 0)
 * count as collapse; a short panel (5 rows) gives the strip a plot row, never the axis row (issue
 * #40 item 5), and at 4 rows drops the axis labels rather than share their row; no alarm, no row. */
static int curves_with(View *v, const ViewCtx *ctx, int old) {
    if (view_init(v, &view_curves_class, ctx)) return -1;
    for (long s = 1; s <= 100; s++) {
        StepRecord r;
        step_make(&r, s, 0);
        r.loss = 2.0 - s / 100.0;
        r.collapsed = 0;
        const int level = s >= 20 && s < 40 ? 1 : s >= 60 && s < 80 ? 2 : 0;
        if (old) r.collapsed = level == 2; /* an old session: no alarm column, collapsed rows */
        else r.alarm = level, r.collapsed = level == 2;
        const ViewMsg m = {.kind = VIEW_MSG_STEP, .step = &r};
        view_update(v, &m);
    }
    return 0;
}

/* The cell (column in the window) the curves panel maps `step` to: as the view does (6-cell y labels,
 * 4-cell right labels, the canvas' dot mapping). */
static int step_col(int width, long step, long last) {
    const int pw = width - 6 - 4 - 2;
    Axis ax;
    axis_fixed(&ax, 0, (double)last, pw / 8 > 2 ? pw / 8 : 2);
    return 6 + 1 + axis_map(&ax, (double)step, 2 * pw) / 2;
}

static void test_curves_alarm(void) {
    Theme t;
    theme_init(&t, 0, 1);
    ViewCtx ctx;
    ctx_make(&ctx, &t, 0);
    const int W = 60, H = 12;
    WINDOW *w = newwin(H, W, 0, 0);
    for (int old = 0; old <= 1; old++) {
        View v;
        CHECK(curves_with(&v, &ctx, old) == 0, "curves view");
        werase(w);
        view_draw(&v, w, (Rect){0, 0, W, H});
        char strip[512], axis[512];
        snprintf(strip, sizeof strip, "%s", row(w, H - 2));
        snprintf(axis, sizeof axis, "%s", row(w, H - 1));
        if (getenv("PANELS_DEBUG"))
            for (int y = 0; y < H; y++) printf("C%d|%s\n", old, row(w, y));
        CHECK(!strncmp(strip, "alarm", 5) || !strncmp(strip, " alarm", 6), "%s: the strip row is labelled: '%s'",
              old ? "old session" : "alarm column", strip);
        if (!old) {
            int warn = 1, red = 1;
            for (long s = 20; s < 40; s++) warn &= strip[step_col(W, s, 100)] == '-';
            for (long s = 60; s < 80; s++) red &= strip[step_col(W, s, 100)] == '#';
            CHECK(warn, "warning steps 20..39 marked '-' in their columns: '%s'", strip);
            CHECK(red, "collapse steps 60..79 marked '#' in their columns: '%s'", strip);
        } else {
            int red = 1, none = 1;
            for (long s = 60; s < 80; s++) red &= strip[step_col(W, s, 100)] == '#';
            for (long s = 20; s < 40; s++) none &= strip[step_col(W, s, 100)] == ' ';
            CHECK(red && none, "old session: the collapsed rows are red, nothing else: '%s'", strip);
        }
        const long clear[] = {5, 50, 95};
        for (int i = 0; i < 3; i++)
            CHECK(strip[step_col(W, clear[i], 100)] == ' ', "step %ld (no alarm) unmarked: '%s'", clear[i], strip);
        CHECK(strstr(axis, "100") && !strchr(axis, '#') && !strchr(axis, '-'), "the step axis keeps its labels: '%s'",
              axis);
        /* a short panel: the strip keeps a row of its own, the axis labels theirs */
        if (!old) {
            werase(w);
            view_draw(&v, w, (Rect){0, 0, W, 5});
            char st[512], ax5[512];
            snprintf(st, sizeof st, "%s", row(w, 3));
            snprintf(ax5, sizeof ax5, "%s", row(w, 4));
            if (getenv("PANELS_DEBUG"))
                for (int y = 0; y < 5; y++) printf("S5|%s\n", row(w, y));
            CHECK(strstr(st, "alarm") && strchr(st, '#') && strchr(st, '-') && !strstr(st, "100"),
                  "5 rows: the marks on a row of their own, no axis label in it: '%s'", st);
            CHECK(strstr(ax5, "100") && !strchr(ax5, '#') && !strchr(ax5, '-') && !strstr(ax5, "alarm"),
                  "5 rows: the axis row holds only its labels: '%s'", ax5);
            werase(w);
            view_draw(&v, w, (Rect){0, 0, W, 4});
            int labels = 0;
            for (int y = 0; y < 4; y++) labels |= strstr(row(w, y), "100") != NULL && strstr(row(w, y), "alarm") != NULL;
            CHECK(strstr(row(w, 3), "alarm") && strchr(row(w, 3), '#') && !labels,
                  "4 rows: the strip on the last row, no axis labels sharing it: '%s'", row(w, 3));
        }
        view_free(&v);
    }
    /* no alarm: no strip, the axis right under the plot */
    View v;
    CHECK(view_init(&v, &view_curves_class, &ctx) == 0, "curves view");
    for (long s = 1; s <= 50; s++) {
        StepRecord r;
        step_make(&r, s, 0);
        r.collapsed = 0;
        const ViewMsg m = {.kind = VIEW_MSG_STEP, .step = &r};
        view_update(&v, &m);
    }
    werase(w);
    view_draw(&v, w, (Rect){0, 0, W, H});
    int any = 0;
    for (int y = 0; y < H; y++) any |= strstr(row(w, y), "alarm") != NULL;
    CHECK(!any && strstr(row(w, H - 1), "50"), "no alarm: no strip, the axis on the last row: '%s'", row(w, H - 1));
    view_free(&v);
    delwin(w);
}

/* The routing panel paints a value red past the run's own collapse thresholds (ViewCtx
 * collapse_share / collapse_entropy, from --collapse-share / --collapse-entropy), not fixed ones:
 * clean 1st 0.6 is red under share 0.5 and not under 0.7; load H 0.4 is red under entropy 0.5
 * and not under 0.3. */
static int value_red(WINDOW *w, int H, const char *label, const Theme *t) {
    for (int y = 0; y < H; y++) {
        const char *line = row(w, y);
        const char *at = strstr(line, label);
        if (!at) continue;
        /* the value: the first non-blank cell after the label */
        int x = (int)(at - line) + (int)strlen(label);
        while (line[x] == ' ') x++;
        const chtype ch = mvwinch(w, y, x);
        return (ch & A_COLOR) == (t->role[TH_ERROR] & A_COLOR);
    }
    return -1;
}

static void test_scalars_warn(void) {
    Theme t;
    theme_init(&t, 0, 0);
    if (!(t.role[TH_ERROR] & A_COLOR)) {
        printf("test_panels: no colour on this terminal: the warn colours are not checked\n");
        return;
    }
    const int W = 60, H = 24;
    WINDOW *w = newwin(H, W, 0, 0);
    const double share[2] = {0.7, 0.5}, entropy[2] = {0.3, 0.5};
    for (int i = 0; i < 2; i++) {
        ViewCtx ctx;
        ctx_make(&ctx, &t, 0);
        ctx.collapse_share = share[i];
        ctx.collapse_entropy = entropy[i];
        View v;
        CHECK(view_init(&v, &view_scalars_class, &ctx) == 0, "scalars view");
        for (long s = 1; s <= 5; s++) {
            StepRecord r;
            step_make(&r, s, 0);
            r.moe.clean_first_share = 0.6;
            r.window_load_entropy = 0.4;
            const ViewMsg m = {.kind = VIEW_MSG_STEP, .step = &r};
            view_update(&v, &m);
        }
        werase(w);
        view_draw(&v, w, (Rect){0, 0, W, H});
        CHECK(value_red(w, H, "clean 1st", &t) == i, "share threshold %.1f: clean 1st 0.60 %s", share[i],
              i ? "red" : "not red");
        CHECK(value_red(w, H, "load H", &t) == i, "entropy threshold %.1f: load H 0.400 %s", entropy[i],
              i ? "red" : "not red");
        CHECK(value_red(w, H, "rho", &t) == 0, "rho is never red");
        view_free(&v);
    }
    delwin(w);
}

/* Issue #40 item 5. The status bar at 80 columns shows the latest test accuracy (it drops img/s,
 * then the bar, first); wide, the bar and img/s stay; the browser keeps its bar (the scrubber). */
static void status_with_note(View *v, const ViewCtx *ctx, int with_eval, const char *note) {
    view_init(v, &view_status_class, ctx);
    const RunStatus st = {.state = "RUNNING", .state_role = TH_RUNNING, .step = 12345, .epoch = 12,
                          .img_per_s = 10762, .eta = 3725, .elapsed = 1234, .session = "runs/x", .note = note};
    const ViewMsg ms = {.kind = VIEW_MSG_STATUS, .status = &st};
    view_update(v, &ms);
    StepRecord r;
    step_make(&r, 12340, 0);
    const ViewMsg mst = {.kind = VIEW_MSG_STEP, .step = &r};
    view_update(v, &mst);
    if (with_eval) {
        EvalRecord e;
        memset(&e, 0, sizeof e);
        e.epoch = 12;
        e.step = 12000;
        e.test_acc = 0.9780;
        const ViewMsg me = {.kind = VIEW_MSG_EVAL, .eval = &e};
        view_update(v, &me);
    }
}

static void status_with(View *v, const ViewCtx *ctx, int with_eval) { status_with_note(v, ctx, with_eval, ""); }

static void test_status_acc(void) {
    Theme t;
    theme_init(&t, 0, 1);
    ViewCtx ctx;
    ctx_make(&ctx, &t, 0);
    ctx.epochs = 40;
    ctx.total_steps = 40000;
    WINDOW *w = newwin(2, 200, 0, 0);
    const int widths[] = {80, 100, 120, 200};
    for (int i = 0; i < 4; i++) {
        View v;
        status_with(&v, &ctx, 1);
        werase(w);
        view_draw(&v, w, (Rect){0, 0, widths[i], 2});
        const char *r1 = row(w, 1);
        if (getenv("PANELS_DEBUG")) printf("ST%d|%s\n", widths[i], r1);
        CHECK(strstr(r1, "test acc 97.80%") != NULL, "status at %d columns shows the test accuracy: '%s'", widths[i],
              r1);
        CHECK(strstr(r1, "step 12345/40000") && strstr(r1, "30.9%") && strstr(r1, "ETA"),
              "status at %d columns keeps the step, the percentage and the ETA: '%s'", widths[i], r1);
        if (widths[i] >= 120)
            CHECK(strstr(r1, "10762 img/s") && strchr(r1, '['), "status at %d columns keeps the bar and img/s: '%s'",
                  widths[i], r1);
        view_free(&v);
    }
    { /* a note (attach's): both at 120 columns; at 80, where both cannot fit, the accuracy */
        View v;
        status_with_note(&v, &ctx, 1, "attached (pid 12345)");
        werase(w);
        view_draw(&v, w, (Rect){0, 0, 120, 2});
        CHECK(strstr(row(w, 1), "attached (pid 12345)") && strstr(row(w, 1), "test acc 97.80%"),
              "status at 120 columns with a note: the note and the accuracy: '%s'", row(w, 1));
        werase(w);
        view_draw(&v, w, (Rect){0, 0, 80, 2});
        CHECK(strstr(row(w, 1), "test acc 97.80%") != NULL, "status at 80 columns with a note: the accuracy: '%s'",
              row(w, 1));
        view_free(&v);
        status_with_note(&v, &ctx, 1, "q to exit");
        werase(w);
        view_draw(&v, w, (Rect){0, 0, 90, 2});
        CHECK(strstr(row(w, 1), "q to exit") && strstr(row(w, 1), "test acc 97.80%"),
              "status at 90 columns with a short note: both, the bar and img/s giving way: '%s'", row(w, 1));
        view_free(&v);
    }
    { /* no evaluation yet at 80 columns: the bar and img/s as before */
        View v;
        status_with(&v, &ctx, 0);
        werase(w);
        view_draw(&v, w, (Rect){0, 0, 80, 2});
        const char *r1 = row(w, 1);
        CHECK(strchr(r1, '[') && strstr(r1, "img/s") && !strstr(r1, "test acc"),
              "status at 80 columns before an evaluation: the bar and img/s: '%s'", r1);
        view_free(&v);
    }
    { /* the browser at 80 columns: its bar (the epoch scrubber) stays */
        ViewCtx bc = ctx;
        bc.browse = 1;
        View v;
        status_with(&v, &bc, 1);
        werase(w);
        view_draw(&v, w, (Rect){0, 0, 80, 2});
        int bx, bw, by;
        CHECK(view_status_bar(&v, &bx, &bw, &by) && bw >= 6, "browser at 80 columns keeps its bar: '%s'", row(w, 1));
        view_free(&v);
    }
    delwin(w);
}

/* A step record of a run with E experts whose alarm names expert `e` (the banner's message), or none
 * (e < 0). */
static void alarm_step(StepRecord *r, long step, int E, int e) {
    step_make(r, step, 0);
    r->moe.E = E;
    r->moe.capacity = 10;
    for (int i = 0; i < E; i++) r->moe.demand[i] = r->moe.kept[i] = 4;
    if (e >= 0) {
        r->alarm = 2;
        r->collapsed = 1;
        r->collapse_views = 1;
        snprintf(r->collapse_text, sizeof r->collapse_text,
                 "COLLAPSE training: 91%% of first choices to e%d, load entropy 0.31, since step 40 (experts starve)", e);
    }
}

/* The heatmap's expert labels on row y: 2-cell columns from x0 ("3", "12"; a label skipped so as not to
 * touch its neighbour is -1), up to the "+N" note or the panel's end; returns how many columns. */
static int expert_labels(WINDOW *w, int y, int x0, int xend, int *out, int max) {
    const char *line = row(w, y);
    const int len = (int)strlen(line) < xend ? (int)strlen(line) : xend;
    int n = 0;
    for (int x = x0; x + 1 < len && n < max; x += 2) {
        if (line[x] == '+' || line[x + 1] == '+') break;
        char cell[3] = {line[x], line[x + 1], 0};
        char *end;
        const long e = strtol(cell, &end, 10);
        out[n++] = end == cell ? -1 : (int)e;
    }
    while (n > 0 && out[n - 1] < 0) n--; /* blank columns after the last label: past the matrix */
    return n;
}

static int shows(const int *v, int n, int e) {
    for (int i = 0; i < n; i++)
        if (v[i] == e) return 1;
    return 0;
}

/* The heatmap's columns and the load panel's rows move to the expert the alarm names when they do
 * not hold every expert; the load panel stays where the user scrolled by hand until a different
 * expert is named; the named expert's label is in reverse video. */
static void test_alarm_follow(void) {
    Theme t;
    theme_init(&t, 0, 1);
    ViewCtx ctx;
    ctx_make(&ctx, &t, 0);
    ctx.E = 16;
    ctx.classes = 3;
    const int W = 26, H = 9;
    WINDOW *w = newwin(H + 2, W + 2, 0, 0);
    /* heatmap: 16 experts in 24 cells: 7 columns */
    View hv;
    CHECK(view_init(&hv, &view_heatmap_class, &ctx) == 0, "heatmap view");
    const int hx0 = 1 + 4 + 1; /* the panel's x, the class labels' 4 cells, a blank */
    static int ce[3 * 16];
    for (int i = 0; i < 3 * 16; i++) ce[i] = i % 5;
    EvalRecord ev;
    memset(&ev, 0, sizeof ev);
    ev.has_moe = 1;
    ev.epoch = 1;
    ev.moe.classes = 3;
    ev.moe.experts = 16;
    ev.moe.class_expert = ce;
    const ViewMsg me = {.kind = VIEW_MSG_EVAL, .eval = &ev};
    view_update(&hv, &me);
    const int named[] = {-1, 12, 15, 3, -1};
    for (int i = 0; i < 5; i++) {
        StepRecord r;
        alarm_step(&r, 100 + i, 16, named[i]);
        const ViewMsg ms = {.kind = VIEW_MSG_STEP, .step = &r};
        view_update(&hv, &ms);
        werase(w);
        view_draw(&hv, w, (Rect){1, 1, W, H});
        int lab[32];
        const int n = expert_labels(w, 1, hx0, 1 + W, lab, 32);
        if (getenv("PANELS_DEBUG"))
            for (int y = 0; y < H + 2; y++) printf("HM%d|%s\n", named[i], row(w, y));
        CHECK(n >= 4 && n < 16, "heatmap: %d of 16 expert columns shown (some hidden)", n);
        const int first = lab[0] >= 0 ? lab[0] : lab[1] - 1;
        int run = 0, longest = 0;
        for (const char *p = row(w, 1); *p; p++) {
            run = *p >= '0' && *p <= '9' ? run + 1 : 0;
            if (run > longest) longest = run;
        }
        CHECK(longest <= 2, "heatmap: no two expert labels run together ('%s')", row(w, 1));
        if (named[i] >= 0) {
            CHECK(shows(lab, n, named[i]), "heatmap: the alarm's expert e%d is a shown column (first %d, last %d)",
                  named[i], first, lab[n - 1]);
            CHECK(first > 0 ? strstr(row(w, H + 1), "left") != NULL : 1,
                  "heatmap: the columns hidden on the left are named in the border: '%s'", row(w, H + 1));
        } else
            CHECK(first == 0, "heatmap: no alarm: the columns start at e0 (first %d)", first);
    }
    view_free(&hv);
    /* load: 16 experts in 7 rows */
    View lv;
    CHECK(view_init(&lv, &view_load_class, &ctx) == 0, "load view");
    const int H2 = 9, rows = H2 - 2;
    long step = 1;
    int first_row = -1;
#define LOAD_STEP(e)                                                      \
    do {                                                                  \
        StepRecord r_;                                                    \
        alarm_step(&r_, step++, 16, (e));                                 \
        const ViewMsg m_ = {.kind = VIEW_MSG_STEP, .step = &r_};          \
        view_update(&lv, &m_);                                            \
        werase(w);                                                        \
        view_draw(&lv, w, (Rect){1, 1, W, H2});                           \
        first_row = (int)strtol(row(w, 2) + 2, NULL, 10);                 \
    } while (0)
#define LOAD_SHOWS(e) ((e) >= first_row && (e) < first_row + rows)
    LOAD_STEP(-1);
    CHECK(first_row == 0, "load: no alarm: the rows start at e0 ('%s')", row(w, 2));
    LOAD_STEP(12);
    if (getenv("PANELS_DEBUG"))
        for (int y = 0; y < H2 + 2; y++) printf("LD|%s\n", row(w, y));
    CHECK(LOAD_SHOWS(12), "load: the alarm's expert e12 is a shown row (e%d..e%d)", first_row, first_row + rows - 1);
    {
        int y12 = -1;
        for (int y = 2; y < 2 + rows; y++)
            if (!strncmp(row(w, y) + 1, "e12", 3)) y12 = y;
        CHECK(y12 >= 0 && (mvwinch(w, y12, 1) & A_REVERSE), "load: e12's label in reverse video");
    }
    for (int i = 0; i < 12; i++) view_on_key(&lv, '[');
    LOAD_STEP(12);
    CHECK(first_row == 0 && !LOAD_SHOWS(12), "load: scrolled by hand to e0: it stays there while e12 is still named (e%d..)",
          first_row);
    LOAD_STEP(15);
    CHECK(LOAD_SHOWS(15), "load: a different expert named (e15): followed again (e%d..e%d)", first_row,
          first_row + rows - 1);
    LOAD_STEP(2);
    CHECK(LOAD_SHOWS(2), "load: e2 named: followed (e%d..e%d)", first_row, first_row + rows - 1);
#undef LOAD_STEP
#undef LOAD_SHOWS
    view_free(&lv);
    /* the expert of a stored step without the message: the flagged view's largest first-choice count */
    StepRecord r;
    alarm_step(&r, 1, 16, -1);
    r.alarm = 1;
    r.collapse_views = 2; /* clean router */
    r.moe.clean_first[9] = 30;
    r.moe.first[4] = 30;
    CHECK(view_alarm_expert(&r) == 9, "stored step, clean-router warning: its largest clean first choice (e9): %d",
          view_alarm_expert(&r));
    r.collapse_views = 0;
    r.dead_mask = 1L << 7;
    CHECK(view_alarm_expert(&r) == 7, "stored step, expert death: the dead expert (e7): %d", view_alarm_expert(&r));
    snprintf(r.collapse_text, sizeof r.collapse_text, "EXPERT DEATH moe2 e11: no kept pair for 100 steps (1/16 dead: e11)");
    CHECK(view_alarm_expert(&r) == 11, "the message's expert (EXPERT DEATH moe2 e11): %d", view_alarm_expert(&r));
    snprintf(r.collapse_text, sizeof r.collapse_text,
             "COLLAPSE training: 100%% of first choices to e10, load entropy 0.41, since step 228 (experts starve) "
             "(now 100%% to e13)");
    CHECK(view_alarm_expert(&r) == 13, "an episode whose expert changed: the one it is on now (e13): %d",
          view_alarm_expert(&r));
    r.alarm = 0;
    r.collapsed = 0;
    CHECK(view_alarm_expert(&r) == -1, "no alarm: no expert");
    delwin(w);
}

/* Under data parallelism a step's demand and kept counts are the ranks' sums and its capacity is
 * one rank's: the load panel compares demand with C x ranks (18 of 2 x 10 is not over capacity);
 * one rank, 18 of 10 is. */
static void test_load_ranks(void) {
    Theme t;
    theme_init(&t, 0, 0);
    if (!(t.role[TH_OVER] & A_COLOR)) {
        printf("test_panels: no colour on this terminal: the load panel's overflow colour is not checked\n");
        return;
    }
    const int W = 40, H = 8;
    WINDOW *w = newwin(H + 2, W + 2, 0, 0);
    for (int ranks = 1; ranks <= 2; ranks++) {
        ViewCtx ctx;
        ctx_make(&ctx, &t, 0);
        ctx.ranks = ranks;
        View v;
        CHECK(view_init(&v, &view_load_class, &ctx) == 0, "load view");
        StepRecord r;
        step_make(&r, 10, 0);
        r.moe.capacity = 10; /* one rank's */
        for (int e = 0; e < 4; e++) r.moe.demand[e] = r.moe.kept[e] = 18; /* summed over the ranks */
        r.moe.demand[3] = 25;
        r.moe.kept[3] = ranks * 10;
        const ViewMsg m = {.kind = VIEW_MSG_STEP, .step = &r};
        view_update(&v, &m);
        werase(w);
        view_draw(&v, w, (Rect){1, 1, W, H});
        char title[128];
        view_title(&v, title, sizeof title);
        if (getenv("PANELS_DEBUG")) {
            printf("LR%d|%s\n", ranks, title);
            for (int y = 0; y < H + 2; y++) printf("LR%d|%s\n", ranks, row(w, y));
        }
        int red18 = 0, red25 = 0;
        for (int y = 2; y < 2 + 4; y++) {
            const char *line = row(w, y);
            const char *at = strstr(line, ranks == 1 ? "  18" : "  18");
            const char *at25 = strstr(line, "  25");
            if (at && !at25) red18 |= (mvwinch(w, y, (int)(at - line) + 2) & A_COLOR) == (t.role[TH_OVER] & A_COLOR);
            if (at25) red25 |= (mvwinch(w, y, (int)(at25 - line) + 2) & A_COLOR) == (t.role[TH_OVER] & A_COLOR);
        }
        if (ranks == 1) {
            CHECK(strstr(title, "C=10 ") != NULL, "1 rank: the title's C is the step's (10): '%s'", title);
            CHECK(red18, "1 rank: demand 18 over C 10 is in the overflow colour");
        } else {
            CHECK(strstr(title, "C=2x10 ") != NULL, "2 ranks: the title's C is the ranks' total, 2x10: '%s'", title);
            CHECK(!red18, "2 ranks: demand 18 (summed) under C 20 (2 x 10) is not in the overflow colour");
            CHECK(red25, "2 ranks: demand 25 over C 20 is");
        }
        view_free(&v);
    }
    delwin(w);
}

/* The routing panel's forecast keeps its step count when the trainer's text is too long (120x40:
 * 38 cells); wide, the text is the trainer's. */
static void test_forecast_fit(void) {
    Theme t;
    theme_init(&t, 0, 1);
    ViewCtx ctx;
    ctx_make(&ctx, &t, 0);
    const int widths[] = {60, 38, 26, 18};
    WINDOW *w = newwin(12, 62, 0, 0);
    for (int i = 0; i < 4; i++) {
        View v;
        CHECK(view_init(&v, &view_scalars_class, &ctx) == 0, "scalars view");
        StepRecord r;
        step_make(&r, 10, 0);
        r.forecast = 120;
        r.trend = 0.4;
        snprintf(r.forecast_text, sizeof r.forecast_text, "clean share 0.30, rising: threshold in ~120 steps");
        const ViewMsg m = {.kind = VIEW_MSG_STEP, .step = &r};
        view_update(&v, &m);
        werase(w);
        view_draw(&v, w, (Rect){0, 0, widths[i], 10});
        char line[512];
        snprintf(line, sizeof line, "%s", row(w, 0));
        if (getenv("PANELS_DEBUG")) printf("FC%d|%s\n", widths[i], line);
        CHECK(strstr(line, "~120 steps") != NULL, "forecast at %d cells keeps its step count: '%s'", widths[i], line);
        if (widths[i] >= 60)
            CHECK(strstr(line, "clean share 0.30, rising: threshold in ~120 steps") != NULL,
                  "forecast at %d cells: the trainer's text whole", widths[i]);
        else if (widths[i] >= 26)
            CHECK(strstr(line, "0.30") != NULL, "forecast at %d cells keeps the share: '%s'", widths[i], line);
        view_free(&v);
    }
    { /* no count: the verdict stays whole at 80x24's 24 cells */
        View v;
        CHECK(view_init(&v, &view_scalars_class, &ctx) == 0, "scalars view");
        StepRecord r;
        step_make(&r, 10, 0);
        r.forecast = -1;
        snprintf(r.forecast_text, sizeof r.forecast_text, "clean share 1.00: over the threshold");
        const ViewMsg m = {.kind = VIEW_MSG_STEP, .step = &r};
        view_update(&v, &m);
        werase(w);
        view_draw(&v, w, (Rect){0, 0, 24, 10});
        CHECK(strstr(row(w, 0), "clean 1.00 over") != NULL, "over the threshold at 24 cells: '%s'", row(w, 0));
        view_free(&v);
    }
    delwin(w);
}

int main(void) {
    FILE *out = fopen("/dev/null", "w"), *in = fopen("/dev/null", "r");
    SCREEN *scr = out && in ? newterm("xterm", out, in) : NULL;
    if (!scr && out && in) scr = newterm("vt100", out, in);
    if (!scr) {
        printf("test_panels: cannot open a curses terminal on /dev/null (no xterm/vt100 terminfo)\n");
        return 1;
    }
    test_layered();
    test_summary();
    test_one_layer();
    test_curves_alarm();
    test_scalars_warn();
    test_status_acc();
    test_alarm_follow();
    test_load_ranks();
    test_forecast_fit();
    endwin();
    delscreen(scr);
    fclose(out);
    fclose(in);
    printf("test_panels: %d checks, %d failures\n", n_checks, n_failed);
    return n_failed ? 1 : 0;
}
