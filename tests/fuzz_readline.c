/* fuzz_readline.c — libFuzzer target for the live screen's command line: raw key bytes through
 * exactly the readline set-up of the live screen and attach (cmdline_init, the layer names, a
 * history, the command window of an ncurses screen written to /dev/null), one byte at a time as
 * the UI feeds them (cmdline_feed), with the lines readline completes parsed as commands. Whatever
 * the bytes (incremental search, prefix keys, vi-mode switches, invalid UTF-8, numeric arguments,
 * completion), the result must be a line, a redraw or nothing: never a crash, a hang (every byte
 * must return), or a read past a buffer. Seeds (FUZZ_STANDALONE): the sequences that crashed
 * libreadline 8.2's default keymap (Ctrl-R Ctrl-X a, Ctrl-S Ctrl-X a, Esc-Enter + invalid UTF-8). */
#define _GNU_SOURCE

#include <locale.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <curses.h>

#include "app/cli/commands.h"
#include "app/term/tui_cmdline.h"
#include "views/theme.h"

#include "fuzz_driver.h"

static int lines_done;

static void on_line(char *line, void *user) {
    (void)user;
    lines_done++;
    if (!line) return;
    TrainerCmd c;
    char err[1200];
    command_parse(line, &c, err, sizeof err);
    cmdline_history_add(line);
    free(line);
}

static void on_msg(int level, const char *text, void *user) {
    (void)level, (void)text, (void)user;
}

static void setup(void) {
    static int done;
    if (done) return;
    done = 1;
    setlocale(LC_ALL, "C.UTF-8");
    FILE *out = fopen("/dev/null", "w"), *in = fopen("/dev/null", "r");
    if (!out || !in || !newterm("xterm-256color", out, in)) {
        if (!newterm("xterm", out, in)) abort();
    }
    static const char *const layers[] = {"moe2", "moe3", "head"};
    cmdline_set_layers(layers, 3);
    char hist[64];
    snprintf(hist, sizeof hist, "/tmp/fuzz_readline_hist.%d", (int)getpid());
    char err[1200];
    cmdline_history_open(hist, err, sizeof err);
    unlink(hist);
    static Theme theme;
    theme_init(&theme, 1, 0);
    (void)cmdline_window((Rect){.y = 23, .x = 0, .h = 1, .w = 80}, &theme);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > 4096) return 0;
    setup();
    cmdline_init("moelab> ", on_line, on_msg, NULL);
    for (size_t i = 0; i < size; i++) {
        cmdline_feed(data[i]);
        cmdline_draw("?: help");
        (void)cmdline_idle();
        if (cmdline_popup_changed() || cmdline_popup_shown()) cmdline_popup_draw((Rect){.y = 23, .x = 0, .h = 1, .w = 80}, 80);
    }
    /* whatever state the bytes left, Ctrl-G, Ctrl-U and Enter bring back an empty line */
    cmdline_feed(7);
    cmdline_feed(21);
    cmdline_feed('\r');
    cmdline_free();
    return 0;
}

#ifdef FUZZ_STANDALONE
static void fuzz_seeds(void (*run)(const uint8_t *, size_t)) {
    static const char *seeds[] = {
        "\x12\x18" "a",
        "\x13\x18" "a",
        "\x1b\r\xc3\x28\xa0\xa1\xe2\x28\xa1\xe2\x82\x28\xf0\x28\x8c\xbc\xf0\x90\x28",
        "set tau 0.5\r",
        "an\t\tsig\t now 0.1 s\t=1\r",
        "set tau 1 @mo\t\t\r",
        "\x1b[A\x1b[B\x1b[C\x1b[D\x1bOH\x1b[3~\x1b" "b\x1b" "f\x1b\x7f",
        "\x1b" "5\x1b" "0\x18\x15\x1b" "1" "2x\x0b\x19\x14",
        "\x18\x28" "abc\x18\x29\x18" "e",
        "\x1b\x1b\x1b\x1b\x1b\x1b\x1b\r",
        "\x18\x16\x18\x0b\x18\x05\x18\x07",
    };
    for (size_t i = 0; i < sizeof seeds / sizeof *seeds; i++) run((const uint8_t *)seeds[i], strlen(seeds[i]));
}
#endif
