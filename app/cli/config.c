/* config.c — the user's config file (see config.h): parsing, the default file of `moelab config
 * --init`, and the `config` subcommand. */
#include "app/cli/config.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "views/layout.h"

#define CONFIG_LINE_MAX 1024
#define CONFIG_FILE_MAX (1 << 20) /* a config file is a few lines: more is not one */

/* The keys: name, what `--init` writes as its comment and default line. */
typedef enum { K_THEME, K_MOUSE, K_HIDE, K_LOG_ROWS, K_TOP_SHARE, K_SMOOTHING, K_REFRESH, K_COUNT } ConfigKey;
static const struct {
    const char *name, *help, *dflt;
} keys[K_COUNT] = {
    [K_THEME] = {"theme",
                 "colours: dark (default), light (for light terminals) or high-contrast;\n"
                 "# NO_COLOR in the environment turns colours off whatever the theme",
                 "dark"},
    [K_MOUSE] = {"mouse", "on (default) or off: clicks and the wheel on the screens", "on"},
    [K_HIDE] = {"hide",
                "panels not shown, comma-separated: curves, temperature, heatmap, load, scalars,\n"
                "# log (their row's other panels take the room); empty: every panel",
                ""},
    [K_LOG_ROWS] = {"log_rows",
                    "rows of the log panel, 3-40 (at most a third of the screen); 0: a fifth\n"
                    "# of the screen, 5-12",
                    "0"},
    [K_TOP_SHARE] = {"top_share",
                     "percent of the panel rows for the first row (curves, temperature), 20-80;\n"
                     "# 0: half",
                     "0"},
    [K_SMOOTHING] = {"smoothing",
                     "the loss curve's EMA weight on the past at start, 0-0.999 (key m cycles\n"
                     "# 0, 0.6, 0.9, 0.99)",
                     "0.9"},
    [K_REFRESH] = {"refresh", "seconds between frames of the live screen at most, 0.02-2", "0.1"},
};

static UiConfig g_cfg;
static int g_loaded;

void ui_config_defaults(UiConfig *c) {
    memset(c, 0, sizeof *c);
    view_prefs_defaults(&c->view);
    c->mouse = 1;
    c->refresh = 0.1;
}

static void problem(UiConfig *c, const char *name, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void problem(UiConfig *c, const char *name, int line, const char *fmt, ...) {
    if (c->nproblems < CONFIG_PROBLEMS_MAX) {
        char *p = c->problem[c->nproblems];
        const int o = line > 0 ? snprintf(p, sizeof c->problem[0], "%s:%d: ", name, line)
                               : snprintf(p, sizeof c->problem[0], "%s: ", name);
        va_list ap;
        va_start(ap, fmt);
        if (o > 0 && o < (int)sizeof c->problem[0]) vsnprintf(p + o, sizeof c->problem[0] - (size_t)o, fmt, ap);
        va_end(ap);
    }
    c->nproblems++;
}

/* A number in [lo, hi]: 0, or -1. */
static int number(const char *v, double lo, double hi, double *out) {
    char *end;
    errno = 0;
    const double d = strtod(v, &end);
    if (errno || end == v || *end || !isfinite(d) || d < lo || d > hi) return -1;
    *out = d;
    return 0;
}

static int panel_named(const char *s) {
    for (int p = PANEL_CURVES; p <= PANEL_LOG; p++)
        if (!strcasecmp(s, layout_panel_name(p))) return p;
    return -1;
}

/* One `key = value` (both trimmed, the value without its comment). */
static void set_key(UiConfig *c, const char *name, int line, const char *key, char *v) {
    int k = 0;
    while (k < K_COUNT && strcmp(keys[k].name, key)) k++;
    double d;
    switch (k) {
    case K_THEME:
        for (int t = 0; t < THEME_KIND_COUNT; t++)
            if (!strcasecmp(v, theme_kind_names[t])) {
                c->view.theme = (ThemeKind)t;
                return;
            }
        problem(c, name, line, "theme '%.40s': one of dark, light, high-contrast (ignored)", v);
        return;
    case K_MOUSE:
        if (!strcasecmp(v, "on") || !strcasecmp(v, "yes") || !strcasecmp(v, "true") || !strcmp(v, "1")) c->mouse = 1;
        else if (!strcasecmp(v, "off") || !strcasecmp(v, "no") || !strcasecmp(v, "false") || !strcmp(v, "0"))
            c->mouse = 0;
        else problem(c, name, line, "mouse '%.40s': on or off (ignored)", v);
        return;
    case K_HIDE: {
        unsigned hide = 0;
        for (char *save = NULL, *w = strtok_r(v, ", \t", &save); w; w = strtok_r(NULL, ", \t", &save)) {
            const int p = panel_named(w);
            if (p < 0) {
                problem(
                    c, name, line,
                    "hide: no panel '%.40s' (curves, temperature, heatmap, load, scalars, log; the line is ignored)",
                    w);
                return;
            }
            hide |= 1u << p;
        }
        c->view.hide = hide;
        return;
    }
    case K_LOG_ROWS:
        if (number(v, 0, 40, &d) || (d != 0 && d < 3) || d != floor(d))
            problem(c, name, line, "log_rows '%.40s': a whole number 3-40, or 0 (ignored)", v);
        else c->view.log_rows = (int)d;
        return;
    case K_TOP_SHARE:
        if (number(v, 0, 80, &d) || (d != 0 && d < 20) || d != floor(d))
            problem(c, name, line, "top_share '%.40s': a whole percent 20-80, or 0 (ignored)", v);
        else c->view.top_share = (int)d;
        return;
    case K_SMOOTHING:
        if (number(v, 0, 0.999, &d)) problem(c, name, line, "smoothing '%.40s': a number 0-0.999 (ignored)", v);
        else c->view.smoothing = d;
        return;
    case K_REFRESH:
        if (number(v, 0.02, 2, &d)) problem(c, name, line, "refresh '%.40s': seconds, 0.02-2 (ignored)", v);
        else c->refresh = d;
        return;
    default:
        problem(c, name, line,
                "unknown key '%.40s' (keys: theme, mouse, hide, log_rows, top_share, smoothing, refresh)", key);
    }
}

static char *trim(char *s) {
    while (*s == ' ' || *s == '\t') s++;
    size_t n = strlen(s);
    while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r')) s[--n] = '\0';
    return s;
}

void ui_config_parse(UiConfig *c, const char *text, size_t len, const char *name) {
    int line = 0;
    size_t i = 0;
    while (i < len) {
        line++;
        size_t j = i;
        while (j < len && text[j] != '\n') j++;
        const size_t n = j - i;
        const char *src = text + i;
        i = j + 1;
        if (memchr(src, '\0', n)) {
            problem(c, name, line, "a NUL byte: not a text line (ignored)");
            continue;
        }
        if (n >= CONFIG_LINE_MAX) {
            problem(c, name, line, "line longer than %d bytes (ignored)", CONFIG_LINE_MAX - 1);
            continue;
        }
        char buf[CONFIG_LINE_MAX];
        memcpy(buf, src, n);
        buf[n] = '\0';
        char *hash = strchr(buf, '#');
        if (hash) *hash = '\0';
        char *s = trim(buf);
        if (!*s) continue;
        char *eq = strchr(s, '=');
        if (!eq) {
            problem(c, name, line, "expected KEY = VALUE, got '%.40s' (ignored)", s);
            continue;
        }
        *eq = '\0';
        char *key = trim(s), *v = trim(eq + 1);
        if (!*key) {
            problem(c, name, line, "no key before '=' (ignored)");
            continue;
        }
        const size_t vl = strlen(v);
        if (vl >= 2 && v[0] == '"' && v[vl - 1] == '"') { /* "quoted" */
            v[vl - 1] = '\0';
            v++;
        }
        set_key(c, name, line, key, v);
    }
}

int xdg_path(char *buf, size_t n, const char *var, const char *home_dir, const char *leaf) {
    const char *xdg = getenv(var);
    if (xdg && xdg[0] == '/') {
        snprintf(buf, n, "%s/moelab/%s", xdg, leaf);
        return 0;
    }
    const char *home = getenv("HOME");
    if (home && *home) {
        snprintf(buf, n, "%s/%s/moelab/%s", home, home_dir, leaf);
        return 0;
    }
    buf[0] = '\0';
    return -1;
}

int ui_config_path(char *buf, size_t n) { return xdg_path(buf, n, "XDG_CONFIG_HOME", ".config", "config"); }

/* Reads path into c: 1 read, 0 no such file, -1 unreadable (a problem). */
static int read_file(UiConfig *c, const char *path) {
    /* O_NONBLOCK: opening a FIFO with no writer would block forever (and a read from one too);
     * anything but a regular file is refused before a byte is read */
    const int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT || errno == ENOTDIR) return 0;
        problem(c, path, 0, "cannot read it: %s", strerror(errno));
        return -1;
    }
    struct stat sb;
    memset(&sb, 0, sizeof sb);
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        problem(c, path, 0, "not a regular file (%s): ignored, the defaults apply",
                S_ISDIR(sb.st_mode)    ? "a directory"
                : S_ISFIFO(sb.st_mode) ? "a FIFO"
                : S_ISCHR(sb.st_mode)  ? "a character device"
                : S_ISSOCK(sb.st_mode) ? "a socket"
                                       : "not a file");
        close(fd);
        return -1;
    }
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        problem(c, path, 0, "cannot read it: %s", strerror(errno));
        close(fd);
        return -1;
    }
    char *text = malloc(CONFIG_FILE_MAX);
    size_t n = text ? fread(text, 1, CONFIG_FILE_MAX, f) : 0;
    const int err = ferror(f), big = n == CONFIG_FILE_MAX;
    fclose(f);
    if (!text || err || big) {
        problem(c, path, 0, "%s", !text ? "out of memory" : err ? "read error" : "larger than 1 MB: not a config file");
        free(text);
        return -1;
    }
    ui_config_parse(c, text, n, path);
    free(text);
    return 1;
}

const UiConfig *ui_config_load(const char *who) {
    if (g_loaded) return &g_cfg;
    g_loaded = 1;
    ui_config_defaults(&g_cfg);
    if (ui_config_path(g_cfg.path, sizeof g_cfg.path) == 0) g_cfg.found = read_file(&g_cfg, g_cfg.path) == 1;
    for (int i = 0; i < g_cfg.nproblems && i < CONFIG_PROBLEMS_MAX; i++)
        fprintf(stderr, "%s: config %s\n", who, g_cfg.problem[i]);
    if (g_cfg.nproblems > CONFIG_PROBLEMS_MAX)
        fprintf(stderr, "%s: config: %d more problems\n", who, g_cfg.nproblems - CONFIG_PROBLEMS_MAX);
    view_prefs_set(&g_cfg.view);
    return &g_cfg;
}

UiConfig *ui_config_mut(void) {
    if (!g_loaded) ui_config_defaults(&g_cfg);
    return &g_cfg;
}

void ui_config_format(const UiConfig *c, char *buf, size_t n) {
    char hide[128] = "";
    size_t o = 0;
    for (int p = PANEL_CURVES; p <= PANEL_LOG; p++)
        if (c->view.hide & (1u << p))
            o += (size_t)snprintf(hide + o, sizeof hide - o, "%s%s", o ? ", " : "", layout_panel_name(p));
    const double sm = c->view.smoothing < 0 ? 0.9 : c->view.smoothing;
    snprintf(buf, n, "theme = %s\nmouse = %s\nhide = %s\nlog_rows = %d\ntop_share = %d\nsmoothing = %g\nrefresh = %g\n",
             theme_kind_names[c->view.theme], c->mouse ? "on" : "off", hide, c->view.log_rows, c->view.top_share, sm,
             c->refresh);
}

// ---------------------------------------------------------------------------------------------
// moelab config

static void config_usage(FILE *f) {
    fprintf(f, "usage: moelab config [--init [--force] | --path]\n\n"
               "The settings of the screens (live, attach, browse) from $XDG_CONFIG_HOME/moelab/config\n"
               "(else ~/.config/moelab/config): key = value lines, # comments. Without options: the file's\n"
               "path and the settings in force, each problem as FILE:LINE (exit 1 when there is one).\n"
               "  --init    write a commented default file (refused when one exists)\n"
               "  --force   with --init: overwrite it\n"
               "  --path    print the file's path only\n"
               "Keys:\n");
    for (int k = 0; k < K_COUNT; k++) {
        fprintf(f, "  %-10s ", keys[k].name);
        for (const char *p = keys[k].help; *p; p++) {
            if (*p == '\n') {
                fputs("\n             ", f);
                p += 2; /* "# " */
                continue;
            }
            fputc(*p, f);
        }
        fputc('\n', f);
    }
}

/* mkdir -p of the directory part of path (0700 for the new ones). */
static int make_parents(const char *path) {
    char tmp[1024];
    snprintf(tmp, sizeof tmp, "%s", path);
    char *slash = strrchr(tmp, '/');
    if (!slash || slash == tmp) return 0;
    *slash = '\0';
    for (char *p = tmp + 1;; p++) {
        if (*p && *p != '/') continue;
        const char save = *p;
        *p = '\0';
        if (mkdir(tmp, 0700) && errno != EEXIST) return -1;
        if (!save) break;
        *p = save;
    }
    return 0;
}

static int config_init(const char *path, int force) {
    struct stat sb;
    if (!force && stat(path, &sb) == 0) {
        fprintf(stderr, "moelab config: %s exists: not overwritten (--init --force replaces it)\n", path);
        return 1;
    }
    if (make_parents(path)) {
        fprintf(stderr, "moelab config: cannot create the folder of %s: %s\n", path, strerror(errno));
        return 1;
    }
    char tmp[1100];
    snprintf(tmp, sizeof tmp, "%s.part", path);
    FILE *f = fopen(tmp, "w");
    if (!f) {
        fprintf(stderr, "moelab config: cannot write %s: %s\n", tmp, strerror(errno));
        return 1;
    }
    fputs("# moelab config: the live screen, `moelab attach` and `moelab browse` read it when they open.\n"
          "# One `key = value` a line; `#` starts a comment. An unknown key or a bad value is reported\n"
          "# with its line and ignored. `moelab config` shows the settings in force.\n",
          f);
    for (int k = 0; k < K_COUNT; k++) fprintf(f, "\n# %s\n%s = %s\n", keys[k].help, keys[k].name, keys[k].dflt);
    const int bad = ferror(f);
    if (fclose(f) || bad || rename(tmp, path)) {
        fprintf(stderr, "moelab config: cannot write %s: %s\n", path, strerror(errno));
        remove(tmp);
        return 1;
    }
    printf("moelab config: wrote %s\n", path);
    return 0;
}

int cmd_config(int argc, char **argv) {
    int init = 0, force = 0, path_only = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--init")) init = 1;
        else if (!strcmp(argv[i], "--force")) force = 1;
        else if (!strcmp(argv[i], "--path")) path_only = 1;
        else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            config_usage(stdout);
            return 0;
        } else {
            fprintf(stderr, "moelab config: unknown argument '%s' (see moelab config --help)\n", argv[i]);
            return 2;
        }
    }
    if (force && !init) {
        fprintf(stderr, "moelab config: --force goes with --init\n");
        return 2;
    }
    char path[1024];
    if (ui_config_path(path, sizeof path)) {
        fprintf(stderr, "moelab config: neither XDG_CONFIG_HOME nor HOME is set: no config file\n");
        return 1;
    }
    if (path_only) {
        printf("%s\n", path);
        return 0;
    }
    if (init) return config_init(path, force);
    UiConfig c;
    ui_config_defaults(&c);
    const int r = read_file(&c, path);
    printf("# %s%s\n", path, r == 1 ? "" : r == 0 ? " (none: the defaults; moelab config --init writes one)" : "");
    char buf[1024];
    ui_config_format(&c, buf, sizeof buf);
    fputs(buf, stdout);
    for (int i = 0; i < c.nproblems && i < CONFIG_PROBLEMS_MAX; i++)
        fprintf(stderr, "moelab config: %s\n", c.problem[i]);
    if (c.nproblems > CONFIG_PROBLEMS_MAX)
        fprintf(stderr, "moelab config: %d more problems\n", c.nproblems - CONFIG_PROBLEMS_MAX);
    return c.nproblems ? 1 : 0;
}
