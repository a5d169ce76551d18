/* tui_cmdline.c — readline in callback mode inside ncurses (see tui_cmdline.h). */
#include "app/term/tui_cmdline.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <readline/history.h>
#include <readline/readline.h>

#include "app/cli/commands.h"
#include "app/cli/config.h"
#include "core/cmdtab.h"
#include "core/params.h"
#include "core/tau.h"
#include "core/vocab.h"
#include "views/draw.h"

#define HISTORY_MAX 1000
#define POPUP_MAX 64 /* matches kept for the popup (the rest are counted) */

static struct {
    int installed;
    int byte;  /* the byte readline reads next */
    int avail; /* 1 while `byte` is unread */
    cmdline_line_fn on_line;
    cmdline_msg_fn on_msg;
    void *user;
    WINDOW *win;
    const Theme *theme;
    char prompt[64];
    FILE *devnull;
    char hist_path[1024];
    int hist_ok;
    int hist_warned;
    const char *const *comp_words; /* candidates of the completion in progress */
    char layer_buf[8][24];         /* the run's routed layers, for completion after `@` */
    const char *layer_words[9];    /* names (NULL-terminated) */
    const char *layer_at_words[9]; /* "@name" */
    char layer_at_buf[8][26];
    /* the match list of the last ambiguous completion: a popup above the command line until the
     * next key (never the log: it would push real lines out) */
    char popup[POPUP_MAX][48];
    int npopup, popup_total, popup_w; /* shown, matched, widest (cells) */
    int popup_changed;                /* it appeared or went: the screen needs a frame */
    WINDOW *popup_win;
} cl;

void cmdline_set_layers(const char *const *names, int n) {
    if (n > 8) n = 8;
    for (int i = 0; i < n; i++) {
        snprintf(cl.layer_buf[i], sizeof cl.layer_buf[i], "%s", names[i]);
        snprintf(cl.layer_at_buf[i], sizeof cl.layer_at_buf[i], "@%s", names[i]);
        cl.layer_words[i] = cl.layer_buf[i];
        cl.layer_at_words[i] = cl.layer_at_buf[i];
    }
    cl.layer_words[n < 0 ? 0 : n] = NULL;
    cl.layer_at_words[n < 0 ? 0 : n] = NULL;
}

/* Completions after `anneal KIND`: "now" right after the kind, then min= and the keys the kind
 * reads (every key for an unknown kind), from the tables of core/tau.h. */
static const char *const *anneal_words(const char *kind_word, int first) {
    static char keys[TAU_KEY_COUNT][24];
    static const char *list[TAU_KEY_COUNT + 2];
    const TauKindInfo *info = tau_kind_info((TauKind)vocab_find(tau_kind_names, kind_word, 1));
    int n = 0;
    if (first) list[n++] = "now";
    for (int k = 0; k < TAU_KEY_COUNT; k++) {
        if (info && k != TAU_KEY_MIN && !(info->keys & (1u << k))) continue;
        snprintf(keys[k], sizeof keys[k], "%s=", tau_key_info((TauKey)k)->key);
        list[n++] = keys[k];
    }
    list[n] = NULL;
    return list;
}

// ---------------------------------------------------------------------------------------------
// readline callbacks

static int cl_getc(FILE *f) {
    (void)f;
    cl.avail = 0;
    return cl.byte;
}

static int cl_input_available(void) { return cl.avail; }

static void cl_redisplay(void) {
    if (!cl.win) return;
    cmdline_draw(NULL);
    wnoutrefresh(cl.win);
    doupdate();
}

static void cl_line(char *line) {
    if (cl.on_line) cl.on_line(line, cl.user);
    else free(line);
}

static char *cl_generator(const char *text, int state) {
    static int i;
    static size_t len;
    if (!state) {
        i = 0;
        len = strlen(text);
    }
    while (cl.comp_words && cl.comp_words[i]) {
        const char *w = cl.comp_words[i++];
        if (!strncmp(w, text, len)) return strdup(w);
    }
    return NULL;
}

/* Completes the word at [start, end) from the words before it: the command, then its
 * parameter / schedule, then anneal options. */
static char **cl_complete(const char *text, int start, int end) {
    (void)end;
    rl_attempted_completion_over = 1; /* never fall back to file names */
    char before[256];
    const int n = start < (int)sizeof before - 1 ? start : (int)sizeof before - 1;
    memcpy(before, rl_line_buffer, (size_t)n);
    before[n] = '\0';
    char *words[4] = {0};
    int nw = 0;
    for (char *save = NULL, *p = strtok_r(before, " \t", &save); p && nw < 4; p = strtok_r(NULL, " \t", &save))
        words[nw++] = p;
    cl.comp_words = NULL;
    /* a routing knob or anneal (also inside an on-collapse rule): @layer */
    const int k0 = nw >= 1 ? cmd_find(words[0]) : -1, k1 = nw >= 2 ? cmd_find(words[1]) : -1;
    const int knob = nw >= 2 && ((k0 >= 0 && cmd_table[k0].layer) ||
                                 (k0 == CMD_ON_COLLAPSE && k1 >= 0 && cmd_table[k1].layer));
    if (knob && start > 0 && rl_line_buffer[start - 1] == '@' && cl.layer_words[0])
        cl.comp_words = cl.layer_words; /* readline broke the word at the '@' */
    else if (knob && text[0] == '@' && cl.layer_words[0]) cl.comp_words = cl.layer_at_words;
    else if (nw == 0) cl.comp_words = cmd_words;
    else if (k0 == CMD_SET && nw == 1) cl.comp_words = cmd_param_words;
    else if (k0 == CMD_ANNEAL && nw == 1) cl.comp_words = tau_kind_names;
    else if (k0 == CMD_ANNEAL && nw >= 2) cl.comp_words = anneal_words(words[1], nw == 2);
    else if (k0 == CMD_ON_COLLAPSE && nw == 1) cl.comp_words = cmd_rule_words;
    else if (k0 == CMD_ON_COLLAPSE && nw == 2 && k1 == CMD_SET) cl.comp_words = cmd_param_words;
    if (!cl.comp_words) return NULL;
    /* "s=" and friends take a value right after the '=': no space after them */
    int all_eq = 1, any = 0;
    for (int i = 0; cl.comp_words[i]; i++)
        if (!strncmp(cl.comp_words[i], text, strlen(text))) {
            any = 1;
            if (cl.comp_words[i][strlen(cl.comp_words[i]) - 1] != '=') all_eq = 0;
        }
    rl_completion_suppress_append = any && all_eq;
    return rl_completion_matches(text, cl_generator);
}

/* The list of matches goes to the popup (drawn by cmdline_popup_draw with the next frame). */
static void cl_display_matches(char **matches, int num, int max_len) {
    (void)max_len;
    cl.npopup = 0;
    cl.popup_w = 0;
    for (int i = 1; i <= num && cl.npopup < POPUP_MAX; i++) {
        snprintf(cl.popup[cl.npopup], sizeof cl.popup[0], "%s", matches[i]);
        const int len = (int)strlen(cl.popup[cl.npopup++]);
        if (len > cl.popup_w) cl.popup_w = len;
    }
    cl.popup_total = num;
    cl.popup_changed = 1;
    cl_redisplay();
}

static void popup_clear(void) {
    if (cl.npopup) cl.popup_changed = 1;
    cl.npopup = 0;
    if (cl.popup_win) delwin(cl.popup_win);
    cl.popup_win = NULL;
}

int cmdline_popup_changed(void) {
    const int c = cl.popup_changed;
    cl.popup_changed = 0;
    return c;
}

int cmdline_popup_shown(void) { return cl.npopup; }

void cmdline_popup_draw(Rect cmd, int cols) {
    if (cl.popup_win) delwin(cl.popup_win);
    cl.popup_win = NULL;
    if (!cl.npopup || cmd.y < 3 || cols < 12) return;
    const Theme *t = cl.theme;
    /* columns of (widest + 2) cells inside a frame, at most the screen's width and 8 rows */
    const int cw = cl.popup_w + 2, maxw = cols - 2;
    int ncol = (maxw - 2) / cw;
    if (ncol < 1) ncol = 1;
    if (ncol > cl.npopup) ncol = cl.npopup;
    int rows = (cl.npopup + ncol - 1) / ncol;
    const int maxrows = cmd.y - 2 < 8 ? cmd.y - 2 : 8;
    int shown = cl.npopup;
    if (rows > maxrows) {
        rows = maxrows;
        shown = rows * ncol - 1; /* the last cell says how many more */
    }
    const int more = cl.popup_total - shown;
    char title[48];
    snprintf(title, sizeof title, "%d completions", cl.popup_total);
    int w = ncol * cw + 2;
    if (w < (int)strlen(title) + 6) w = (int)strlen(title) + 6;
    if (w > cols) w = cols;
    cl.popup_win = newwin(rows + 2, w, cmd.y - rows - 2, cmd.x);
    if (!cl.popup_win) return;
    WINDOW *pw = cl.popup_win;
    werase(pw);
    draw_frame(pw, t, title, 2);
    for (int i = 0; i < shown && i < cl.npopup; i++)
        draw_text(pw, 1 + i / ncol, 2 + (i % ncol) * cw, cw - 1, A_NORMAL, cl.popup[i]);
    if (more > 0) {
        char m[32];
        snprintf(m, sizeof m, "+%d more", more);
        draw_text(pw, rows, 2 + ((rows * ncol - 1) % ncol) * cw, cw - 1, t ? t->role[TH_DIM] : A_DIM, m);
    }
    wnoutrefresh(pw);
}

// ---------------------------------------------------------------------------------------------
// the keymap: only what a one-line command needs

/* Ctrl-G and a lone Esc: forget the line being typed (readline's own abort longjmps out of the
 * callback and leaves prefix and search states behind). */
static int cl_clear_line(int count, int key) {
    (void)count, (void)key;
    rl_delete_text(0, rl_end);
    rl_point = rl_end = 0;
    rl_mark = 0;
    return 0;
}

/* The longest line the command line takes (bytes): typing and yanking stop there (a repeated
 * yank-and-kill doubles the line each time, to gigabytes in a few dozen keys). */
#define LINE_MAX_BYTES 4096

static int cl_insert(int count, int key) {
    if (rl_end >= LINE_MAX_BYTES) return rl_ding();
    return rl_insert(count, key);
}

static int cl_yank(int count, int key) {
    const int r = rl_yank(count, key);
    if (rl_end > LINE_MAX_BYTES) {
        rl_delete_text(LINE_MAX_BYTES, rl_end);
        /* keep the cut on a UTF-8 character boundary */
        while (rl_end > 0 && ((unsigned char)rl_line_buffer[rl_end - 1] & 0xC0) == 0x80) rl_delete_text(rl_end - 1, rl_end);
        if (rl_end > 0 && ((unsigned char)rl_line_buffer[rl_end - 1] & 0xC0) == 0xC0) rl_delete_text(rl_end - 1, rl_end);
        if (rl_point > rl_end) rl_point = rl_end;
        rl_ding();
    }
    return r;
}

/* A bare keymap with the line-editing commands and nothing else: no incremental or
 * non-incremental search, no Ctrl-X or other prefix commands, no vi mode, no numeric arguments, no
 * keyboard macros, no quoted insert. libreadline 8.2 crashes in callback mode on Ctrl-R Ctrl-X
 * (and Ctrl-S Ctrl-X) followed by any key, and freezes on invalid UTF-8 in vi mode: the default
 * maps offer both. The only prefix is Esc, for the terminal's cursor and editing keys and the
 * Meta word commands; an Esc followed by anything else is ignored together with that key.
 * tests/fuzz_readline.c feeds raw bytes through exactly this set-up. */
static Keymap cl_keymap(void) {
    static Keymap km;
    if (km) return km;
    km = rl_make_bare_keymap();
    if (!km) return NULL;
    for (int c = 32; c < 127; c++) rl_bind_key_in_map(c, cl_insert, km);
    for (int c = 128; c < 256; c++) rl_bind_key_in_map(c, cl_insert, km); /* UTF-8 bytes */
    static const struct {
        int key;
        rl_command_func_t *fn;
    } keys[] = {
        {1, rl_beg_of_line},         /* Ctrl-A */
        {2, rl_backward_char},       /* Ctrl-B */
        {4, rl_delete},              /* Ctrl-D (on an empty line: end of input) */
        {5, rl_end_of_line},         /* Ctrl-E */
        {6, rl_forward_char},        /* Ctrl-F */
        {7, cl_clear_line},          /* Ctrl-G */
        {8, rl_rubout},              /* Ctrl-H */
        {9, rl_complete},            /* Tab */
        {10, rl_newline},            /* Ctrl-J */
        {11, rl_kill_line},          /* Ctrl-K */
        {13, rl_newline},            /* Enter */
        {14, rl_get_next_history},   /* Ctrl-N */
        {16, rl_get_previous_history}, /* Ctrl-P */
        {20, rl_transpose_chars},    /* Ctrl-T */
        {21, rl_unix_line_discard},  /* Ctrl-U */
        {23, rl_unix_word_rubout},   /* Ctrl-W */
        {25, cl_yank},               /* Ctrl-Y */
        {127, rl_rubout},            /* Backspace */
    };
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) rl_bind_key_in_map(keys[i].key, keys[i].fn, km);
    static const struct {
        const char *seq;
        rl_command_func_t *fn;
    } seqs[] = {
        {"\\e[A", rl_get_previous_history}, {"\\eOA", rl_get_previous_history},
        {"\\e[B", rl_get_next_history},     {"\\eOB", rl_get_next_history},
        {"\\e[C", rl_forward_char},         {"\\eOC", rl_forward_char},
        {"\\e[D", rl_backward_char},        {"\\eOD", rl_backward_char},
        {"\\e[H", rl_beg_of_line},          {"\\eOH", rl_beg_of_line},
        {"\\e[1~", rl_beg_of_line},         {"\\e[7~", rl_beg_of_line},
        {"\\e[F", rl_end_of_line},          {"\\eOF", rl_end_of_line},
        {"\\e[4~", rl_end_of_line},         {"\\e[8~", rl_end_of_line},
        {"\\e[3~", rl_delete},              {"\\e[1;5C", rl_forward_word},
        {"\\e[1;5D", rl_backward_word},     {"\\e[1;3C", rl_forward_word},
        {"\\e[1;3D", rl_backward_word},     {"\\eb", rl_backward_word},
        {"\\ef", rl_forward_word},          {"\\ed", rl_kill_word},
        {"\\e\\C-?", rl_backward_kill_word}, {"\\e\\C-h", rl_backward_kill_word},
    };
    for (size_t i = 0; i < sizeof seqs / sizeof *seqs; i++) rl_bind_keyseq_in_map(seqs[i].seq, seqs[i].fn, km);
    return km;
}

// ---------------------------------------------------------------------------------------------
// setup

int cmdline_init(const char *prompt, cmdline_line_fn on_line, cmdline_msg_fn on_msg, void *user) {
    cl.on_line = on_line;
    cl.on_msg = on_msg;
    cl.user = user;
    snprintf(cl.prompt, sizeof cl.prompt, "%s", prompt);
    cl.devnull = fopen("/dev/null", "w");
    /* ncurses owns the terminal and the signals */
    rl_catch_signals = 0;
    rl_catch_sigwinch = 0;
    rl_deprep_term_function = NULL;
    rl_prep_term_function = NULL;
    rl_change_environment = 0;
    rl_readline_name = "moelab";
    if (cl.devnull) rl_outstream = cl.devnull;
    rl_getc_function = cl_getc;
    rl_input_available_hook = cl_input_available;
    rl_redisplay_function = cl_redisplay;
    rl_attempted_completion_function = cl_complete;
    rl_completion_display_matches_hook = cl_display_matches;
    /* readline reads ~/.inputrc once, here; then the settings this screen depends on win over it
     * (emacs mode, 8-bit input for UTF-8) and the line gets its own keymap */
    rl_initialize();
    rl_variable_bind("editing-mode", "emacs");
    rl_variable_bind("bell-style", "none");
    rl_variable_bind("enable-bracketed-paste", "off");
    rl_variable_bind("show-all-if-ambiguous", "on");
    rl_variable_bind("horizontal-scroll-mode", "on");
    rl_variable_bind("input-meta", "on");
    rl_variable_bind("convert-meta", "off");
    rl_variable_bind("enable-keypad", "off");
    rl_variable_bind("enable-meta-key", "off");
    Keymap km = cl_keymap();
    if (!km) return -1;
    rl_set_keymap(km);
    rl_callback_handler_install(cl.prompt, cl_line);
    cl.installed = 1;
    return 0;
}

void cmdline_free(void) {
    if (cl.installed) rl_callback_handler_remove();
    cl.installed = 0;
    rl_set_keymap(emacs_standard_keymap);
    rl_getc_function = rl_getc;
    rl_input_available_hook = NULL;
    rl_redisplay_function = rl_redisplay;
    rl_attempted_completion_function = NULL;
    rl_completion_display_matches_hook = NULL;
    rl_outstream = stdout;
    if (cl.devnull) fclose(cl.devnull);
    cl.devnull = NULL;
    cl.win = NULL;
}

void cmdline_set_window(WINDOW *w, const Theme *t) {
    cl.win = w;
    cl.theme = t;
}

static WINDOW *g_win;
static Rect g_rect;

void cmdline_window_drop(void) {
    if (cl.popup_win) delwin(cl.popup_win);
    cl.popup_win = NULL;
    if (g_win) delwin(g_win);
    if (cl.win == g_win) cl.win = NULL;
    g_win = NULL;
    memset(&g_rect, 0, sizeof g_rect);
}

WINDOW *cmdline_window(Rect r, const Theme *t) {
    if (g_win && !memcmp(&g_rect, &r, sizeof r)) return g_win;
    cmdline_window_drop();
    g_win = newwin(r.h, r.w, r.y, r.x);
    if (!g_win) return NULL;
    g_rect = r;
    leaveok(g_win, FALSE);
    keypad(g_win, FALSE); /* readline gets raw escape sequences */
    nodelay(g_win, TRUE);
    cmdline_set_window(g_win, t);
    return g_win;
}

WINDOW *cmdline_window_get(void) { return g_win; }

void cmdline_feed(int byte) {
    if (!cl.installed) return;
    popup_clear(); /* any key closes the completion popup */
    cl.byte = byte & 0xff;
    cl.avail = 1;
    rl_callback_read_char();
}

int cmdline_idle(void) {
    const unsigned long busy = RL_STATE_MULTIKEY | RL_STATE_METANEXT | RL_STATE_NUMERICARG | RL_STATE_ISEARCH |
                               RL_STATE_NSEARCH | RL_STATE_SEARCH | RL_STATE_CHARSEARCH | RL_STATE_COMPLETING |
                               RL_STATE_VIMOTION | RL_STATE_MOREINPUT;
    return rl_end == 0 && !(rl_readline_state & busy);
}

/* Cells of the first `bytes` bytes of a UTF-8 string (one per code point). */
static int cells_of(const char *s, int bytes) {
    int n = 0;
    for (int i = 0; i < bytes && s[i]; i++)
        if (((unsigned char)s[i] & 0xC0) != 0x80) n++;
    return n;
}

/* Byte offset of cell `cell` in a UTF-8 string. */
static int byte_of_cell(const char *s, int cell) {
    int i = 0, n = 0;
    while (s[i] && n < cell) {
        i++;
        while (s[i] && ((unsigned char)s[i] & 0xC0) == 0x80) i++;
        n++;
    }
    return i;
}

void cmdline_draw(const char *hint) {
    WINDOW *w = cl.win;
    if (!w) return;
    const Theme *t = cl.theme;
    int h, W;
    getmaxyx(w, h, W);
    (void)h;
    werase(w);
    /* rl_display_prompt is the prompt readline wants shown now (e.g. during a search) */
    const char *prompt = rl_display_prompt ? rl_display_prompt : cl.prompt;
    const int pw = draw_text(w, 0, 0, W / 2, t ? t->role[TH_TITLE] : A_BOLD, prompt);
    const char *line = rl_line_buffer ? rl_line_buffer : "";
    const int avail = W - pw - 1;
    if (avail < 1) return;
    const int point_cells = cells_of(line, rl_point);
    int first = 0; /* first cell shown */
    if (point_cells >= avail) first = point_cells - avail + 1;
    const char *shown = line + byte_of_cell(line, first);
    draw_text(w, 0, pw, avail, A_NORMAL, shown);
    if (first > 0) draw_text(w, 0, pw, 1, t ? t->role[TH_DIM] : A_DIM, "<");
    if (rl_end == 0 && hint && *hint) {
        const int hl = (int)strlen(hint);
        if (pw + 2 + hl < W) draw_text(w, 0, W - hl - 1, hl, t ? t->role[TH_DIM] : A_DIM, hint);
    }
    wmove(w, 0, pw + point_cells - first);
}

// ---------------------------------------------------------------------------------------------
// history

int cmdline_history_path(char *buf, size_t n) {
    return xdg_path(buf, n, "XDG_STATE_HOME", ".local/state", "history");
}

/* mkdir -p of the directory part of path. */
static int make_parent_dirs(const char *path) {
    char tmp[1024];
    snprintf(tmp, sizeof tmp, "%s", path);
    char *slash = strrchr(tmp, '/');
    if (!slash || slash == tmp) return 0;
    *slash = '\0';
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        if (mkdir(tmp, 0700) && errno != EEXIST) return -1;
        *p = '/';
    }
    if (mkdir(tmp, 0700) && errno != EEXIST) return -1;
    return 0;
}

int cmdline_history_open(const char *path, char *err, size_t errn) {
    using_history();
    stifle_history(HISTORY_MAX);
    snprintf(cl.hist_path, sizeof cl.hist_path, "%s", path);
    cl.hist_ok = 0;
    if (make_parent_dirs(path)) {
        snprintf(err, errn, "history: cannot create the directory of %s: %s", path, strerror(errno));
        return -1;
    }
    const int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (fd < 0) {
        snprintf(err, errn, "history: cannot open %s: %s", path, strerror(errno));
        return -1;
    }
    close(fd);
    const int rc = read_history(path);
    if (rc) {
        snprintf(err, errn, "history: cannot read %s: %s", path, strerror(rc));
        return -1;
    }
    cl.hist_ok = 1;
    return 0;
}

void cmdline_history_add(const char *line) {
    add_history(line);
    if (!cl.hist_ok) return;
    const int rc = append_history(1, cl.hist_path);
    if (rc && !cl.hist_warned) {
        cl.hist_warned = 1;
        char msg[1200];
        snprintf(msg, sizeof msg, "history: cannot append to %s: %s", cl.hist_path, strerror(rc));
        if (cl.on_msg) cl.on_msg(1, msg, cl.user);
    }
}

void cmdline_history_close(void) {
    if (cl.hist_ok) history_truncate_file(cl.hist_path, HISTORY_MAX);
    clear_history();
}
