/* test_config.c — the config file's parser (app/cli/config.c, issue 32 item 4): a good file sets
 * every key; each kind of bad line (unknown key, bad value, no '=', no key, a NUL byte, a line too
 * long) is reported as NAME:LINE and ignored while the other lines still apply; comments, blank
 * lines, CRLF and quotes; the layout hides panels and sizes the log; and a fuzz-ish run: random
 * bytes and mutations of good lines, where every result stays in range and nothing crashes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/cli/config.h"
#include "views/layout.h"

#include "check.h"

static UiConfig parse(const char *text) {
    UiConfig c;
    ui_config_defaults(&c);
    ui_config_parse(&c, text, strlen(text), "cfg");
    return c;
}

/* every setting in its range */
static int in_range(const UiConfig *c) {
    const unsigned panels = ((1u << (PANEL_LOG + 1)) - 1) & ~((1u << PANEL_CURVES) - 1);
    return c->view.theme >= 0 && c->view.theme < THEME_KIND_COUNT && (c->mouse == 0 || c->mouse == 1) &&
           !(c->view.hide & ~panels) && (c->view.log_rows == 0 || (c->view.log_rows >= 3 && c->view.log_rows <= 40)) &&
           (c->view.top_share == 0 || (c->view.top_share >= 20 && c->view.top_share <= 80)) &&
           (c->view.smoothing == -1.0 || (c->view.smoothing >= 0 && c->view.smoothing <= 0.999)) &&
           c->refresh >= 0.02 && c->refresh <= 2 && c->nproblems >= 0;
}

static void test_good(void) {
    UiConfig d = parse("");
    check(d.view.theme == THEME_DARK && d.mouse == 1 && d.view.hide == 0 && d.refresh == 0.1 && d.nproblems == 0,
          "empty file: the defaults (dark, mouse on, every panel, refresh 0.1)");
    UiConfig c = parse("# a comment\n\ntheme = light\nmouse=off   # trailing comment\n  hide = log, temperature\r\n"
                       "log_rows = 8\ntop_share = 60\nsmoothing = 0.75\nrefresh = \"0.25\"\n");
    check(c.nproblems == 0, "a good file: no problem (%d: %s)", c.nproblems, c.nproblems ? c.problem[0] : "");
    check(c.view.theme == THEME_LIGHT, "theme = light");
    check(c.mouse == 0, "mouse=off (no spaces, trailing comment)");
    check(c.view.hide == ((1u << PANEL_LOG) | (1u << PANEL_TEMP)), "hide = log, temperature (CRLF)");
    check(c.view.log_rows == 8 && c.view.top_share == 60, "log_rows 8, top_share 60");
    check(c.view.smoothing == 0.75 && c.refresh == 0.25, "smoothing 0.75, refresh \"0.25\" (quoted)");
    UiConfig h = parse("theme = HIGH-CONTRAST\nmouse = yes\nhide =\n");
    check(h.view.theme == THEME_HIGH_CONTRAST && h.mouse == 1 && h.view.hide == 0 && h.nproblems == 0,
          "case-insensitive theme, mouse = yes, an empty hide shows every panel");
    UiConfig last = parse("theme = light\ntheme = high-contrast\n");
    check(last.view.theme == THEME_HIGH_CONTRAST, "a repeated key: the last one wins");
}

static void test_bad(void) {
    static const struct {
        const char *line, *want;
    } bad[] = {
        {"colour = red", "cfg:2: unknown key 'colour'"}, {"theme = solarized", "cfg:2: theme 'solarized'"},
        {"mouse = maybe", "cfg:2: mouse 'maybe'"},       {"hide = log, sidebar", "cfg:2: hide: no panel 'sidebar'"},
        {"log_rows = 2", "cfg:2: log_rows '2'"},         {"log_rows = 7.5", "cfg:2: log_rows '7.5'"},
        {"top_share = 95", "cfg:2: top_share '95'"},     {"smoothing = 1", "cfg:2: smoothing '1'"},
        {"smoothing = nan", "cfg:2: smoothing 'nan'"},   {"refresh = 0", "cfg:2: refresh '0'"},
        {"refresh = 1e999", "cfg:2: refresh '1e999'"},   {"refresh = 0.5s", "cfg:2: refresh '0.5s'"},
        {"just words", "cfg:2: expected KEY = VALUE"},   {"= dark", "cfg:2: no key before '='"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char text[256];
        snprintf(text, sizeof text, "theme = light\n%s\nmouse = off\n", bad[i].line);
        UiConfig c = parse(text);
        check(c.nproblems == 1 && !strncmp(c.problem[0], bad[i].want, strlen(bad[i].want)) &&
                  c.view.theme == THEME_LIGHT && c.mouse == 0 && in_range(&c),
              "'%s': reported (%s), the lines around it still apply", bad[i].line, c.nproblems ? c.problem[0] : "none");
    }
    UiConfig keep = parse("hide = log\nhide = log, sidebar\n");
    check(keep.view.hide == (1u << PANEL_LOG) && keep.nproblems == 1, "a bad hide line changes nothing");
    /* a NUL byte and an over-long line */
    char nul[] = "theme = light\nmouse = o\0ff\nrefresh = 0.5\n";
    UiConfig c;
    ui_config_defaults(&c);
    ui_config_parse(&c, nul, sizeof nul - 1, "cfg");
    check(c.nproblems == 1 && strstr(c.problem[0], "cfg:2: a NUL byte") && c.mouse == 1 && c.refresh == 0.5,
          "a NUL byte: that line reported and ignored (%s)", c.nproblems ? c.problem[0] : "none");
    char *longl = malloc(5000);
    memset(longl, 'x', 4000);
    snprintf(longl + 4000, 1000, "\ntheme = light\n");
    c = parse(longl);
    check(c.nproblems == 1 && strstr(c.problem[0], "cfg:1: line longer than") && c.view.theme == THEME_LIGHT,
          "a 4000-byte line: reported, the next line applies");
    free(longl);
    /* many problems: counted past the ones kept */
    char many[2048] = "";
    for (int i = 0; i < 20; i++) strcat(many, "nokey\n");
    c = parse(many);
    check(c.nproblems == 20 && strstr(c.problem[CONFIG_PROBLEMS_MAX - 1], "cfg:8:"),
          "20 bad lines: 20 counted, 8 kept");
    /* no final newline, a lone '\r', a line of only '#' */
    c = parse("#\n\r\ntheme=light");
    check(c.nproblems == 0 && c.view.theme == THEME_LIGHT, "no final newline, a lone CR, a bare '#'");
}

static unsigned rng_state = 12345u;
static unsigned rnd(void) {
    rng_state = rng_state * 1103515245u + 12345u;
    return rng_state >> 8;
}

static void test_fuzz(void) {
    static const char *const seeds[] = {"theme = light\n",  "mouse = off\n",     "hide = log, load\n", "log_rows = 9\n",
                                        "top_share = 30\n", "smoothing = 0.5\n", "refresh = 0.2\n",    "# c\n"};
    static const char alphabet[] = "= #,\n\r\t\"abcdefghilmnorstuvwxyz-_0123456789.e+\xff\x80";
    int all_ok = 1, runs = 0;
    char buf[600];
    for (int it = 0; it < 20000; it++) {
        size_t n = 0;
        if (it % 2) { /* random bytes */
            n = rnd() % sizeof buf;
            for (size_t i = 0; i < n; i++)
                buf[i] = it % 4 == 1 ? (char)(rnd() & 0xff) : alphabet[rnd() % (sizeof alphabet - 1)];
        } else { /* good lines, mutated */
            for (int k = rnd() % 6; k >= 0; k--) {
                const char *s = seeds[rnd() % 8];
                const size_t l = strlen(s);
                if (n + l >= sizeof buf) break;
                memcpy(buf + n, s, l);
                n += l;
            }
            for (int m = rnd() % 4; m > 0 && n; m--) {
                const size_t at = rnd() % n;
                switch (rnd() % 3) {
                case 0: buf[at] = alphabet[rnd() % (sizeof alphabet - 1)]; break;
                case 1: buf[at] = (char)(rnd() & 0xff); break;
                default: memmove(buf + at, buf + at + 1, n - at - 1), n--;
                }
            }
        }
        UiConfig c;
        ui_config_defaults(&c);
        ui_config_parse(&c, buf, n, "fuzz");
        runs++;
        if (!in_range(&c)) {
            all_ok = 0;
            fprintf(stderr, "out of range after %d runs\n", runs);
            break;
        }
        for (int i = 0; i < c.nproblems && i < CONFIG_PROBLEMS_MAX; i++)
            if (strncmp(c.problem[i], "fuzz:", 5)) all_ok = 0; /* every problem names the file and line */
    }
    check(all_ok, "fuzz: %d texts (random bytes, mutated good lines): every setting in range, every problem NAME:LINE",
          runs);
}

static void test_layout(void) {
    Layout a, b;
    LayoutOptions o = {.has_moe = 1, .zoom = -1};
    layout_compute(&a, 120, 40, &o);
    o.hide = 1u << PANEL_LOG;
    layout_compute(&b, 120, 40, &o);
    check(!layout_visible(&b, PANEL_LOG) && b.r[PANEL_CURVES].h > a.r[PANEL_CURVES].h,
          "hide log: no log, the panels take its rows (%d > %d)", b.r[PANEL_CURVES].h, a.r[PANEL_CURVES].h);
    o.hide = 1u << PANEL_TEMP;
    layout_compute(&b, 120, 40, &o);
    check(!layout_visible(&b, PANEL_TEMP) && b.r[PANEL_CURVES].w == 120, "hide temperature: curves take the row (%d)",
          b.r[PANEL_CURVES].w);
    o.hide = (1u << PANEL_HEATMAP) | (1u << PANEL_LOAD) | (1u << PANEL_SCALARS);
    layout_compute(&b, 120, 40, &o);
    check(b.r[PANEL_CURVES].h == a.r[PANEL_CURVES].h + a.r[PANEL_HEATMAP].h,
          "a whole row hidden: the other takes its rows");
    o.hide = 0;
    o.log_rows = 9;
    o.top_share = 30;
    layout_compute(&b, 120, 40, &o);
    check(b.r[PANEL_LOG].h == 9 && b.r[PANEL_CURVES].h < b.r[PANEL_HEATMAP].h, "log_rows 9, top_share 30");
    int overlap = 0;
    for (unsigned m = 0; m < 64; m++) {
        o.hide = m << PANEL_CURVES;
        o.log_rows = 0;
        o.top_share = 0;
        for (int W = 80; W <= 200; W += 40) {
            layout_compute(&b, W, 30, &o);
            for (int p = 0; p < PANEL_COUNT; p++)
                for (int q = p + 1; q < PANEL_COUNT; q++) overlap += rect_overlap(b.r[p], b.r[q]);
            for (int p = 0; p < PANEL_COUNT; p++)
                overlap += b.r[p].w > 0 && (b.r[p].x < 0 || b.r[p].x + b.r[p].w > W || b.r[p].y + b.r[p].h > 30);
        }
    }
    check(!overlap, "every combination of hidden panels at 80-200 columns: no overlap, inside the screen");
}

int main(void) {
    test_good();
    test_bad();
    test_fuzz();
    test_layout();
    printf("%d checks, %d failed\n", n_checks, n_failed);
    return n_failed ? 1 : 0;
}
