/* test_mouse.c — the SGR (1006) mouse reports of app/term/term.c, without a terminal: the report
 * parser (term_mouse_sgr: buttons, the wheel, modifiers, motion and malformed reports refused) and
 * the byte-stream splitter of the raw-input screens (term_mouse_feed / term_mouse_flush: a report
 * among keys becomes one event, every other byte comes back in order, a lone Esc is given back at
 * the end of the input, a report cut in two waits for its rest). */
#define _GNU_SOURCE

#include "app/term/term.h"

#include <stdio.h>
#include <string.h>

#include "check.h"

/* Feeds s byte by byte (then flushes); the keys given back into keys[] (as chars, 'E' for ESC),
 * the events into ev[]. Returns the number of events. */
static int feed(TermMouseParser *p, const char *s, char *keys, TermMouse *ev, int flush) {
    int nev = 0, nk = 0, out[40], n;
    for (const char *c = s; *c; c++) {
        TermMouse m;
        const int r = term_mouse_feed(p, (unsigned char)*c, &m, out, &n);
        if (r == 1) ev[nev++] = m;
        for (int i = 0; i < n; i++) keys[nk++] = out[i] == 27 ? 'E' : (char)out[i];
    }
    if (flush) {
        term_mouse_flush(p, out, &n);
        for (int i = 0; i < n; i++) keys[nk++] = out[i] == 27 ? 'E' : (char)out[i];
    }
    keys[nk] = 0;
    return nev;
}

int main(void) {
    TermMouse m;
    memset(&m, 0, sizeof m);
    CHECK(term_mouse_sgr("<0;10;5M", &m) && m.button == 0 && m.x == 9 && m.y == 4 && m.press,
          "left press at column 10, row 5 -> cell (9, 4)");
    CHECK(term_mouse_sgr("<0;10;5m", &m) && m.button == 0 && !m.press, "its release");
    CHECK(term_mouse_sgr("<64;3;4M", &m) && m.button == 4 && m.press, "wheel up (64) is button 4");
    CHECK(term_mouse_sgr("<65;3;4M", &m) && m.button == 5, "wheel down (65) is button 5");
    CHECK(!term_mouse_sgr("<64;3;4m", &m), "a wheel 'release' is not an event");
    CHECK(term_mouse_sgr("<16;1;1M", &m) && m.button == 0 && m.x == 0 && m.y == 0, "ctrl+left (16) is a left press");
    CHECK(term_mouse_sgr("<2;200;60M", &m) && m.button == 2 && m.x == 199 && m.y == 59, "right press, wide terminal");
    CHECK(!term_mouse_sgr("<32;5;5M", &m) && !term_mouse_sgr("<35;5;5M", &m), "motion reports are not used");
    const char *bad[] = {"<0;0;5M", "<0;10M", "<0;10;5", "<0;10;5Mx", "0;10;5M", "<a;1;1M", "<0;10;5X", "<", ""};
    int refused = 1;
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) refused &= !term_mouse_sgr(bad[i], &m);
    CHECK(refused, "malformed reports are refused");

    TermMouseParser p;
    memset(&p, 0, sizeof p);
    char keys[128];
    TermMouse ev[8];
    int n = feed(&p, "ab\033[<0;10;5M\033[<0;10;5mc", keys, ev, 1);
    CHECK(n == 2 && ev[0].press && !ev[1].press && ev[0].x == 9 && !strcmp(keys, "abc"),
          "keys around a click: 2 events, keys 'abc' (got %d, '%s')", n, keys);
    n = feed(&p, "\033[A\033OB\033b", keys, ev, 1);
    CHECK(n == 0 && !strcmp(keys, "E[AEOBEb"), "other escape sequences come back whole, in order ('%s')", keys);
    n = feed(&p, "\033", keys, ev, 0);
    CHECK(n == 0 && !keys[0], "a lone Esc is held while more may come");
    term_mouse_flush(&p, (int[40]){0}, &(int){0});
    n = feed(&p, "\033", keys, ev, 1);
    CHECK(n == 0 && !strcmp(keys, "E"), "... and given back when the input stops ('%s')", keys);
    n = feed(&p, "\033[<64;2", keys, ev, 1);
    CHECK(n == 0 && !keys[0], "a report cut in two stays held across the flush");
    n = feed(&p, ";3M", keys, ev, 1);
    CHECK(n == 1 && ev[0].button == 4 && ev[0].x == 1 && ev[0].y == 2 && !keys[0], "... and ends with its rest");
    n = feed(&p, "\033[<35;4;4Mq", keys, ev, 1);
    CHECK(n == 0 && !strcmp(keys, "q"), "a motion report is swallowed ('%s')", keys);
    n = feed(&p, "\033[<1;2x", keys, ev, 1);
    CHECK(n == 0 && !strcmp(keys, "E[<1;2x"), "not a report after all: every byte comes back ('%s')", keys);
    int out[40], nout;
    const int r = term_mouse_feed(&p, KEY_RESIZE, &m, out, &nout);
    CHECK(r == -1 && nout == 1 && out[0] == KEY_RESIZE, "a curses key code passes through");
    printf("test_mouse: %d failed\n", n_failed);
    return n_failed ? 1 : 0;
}
