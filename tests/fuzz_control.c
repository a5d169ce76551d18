/* fuzz_control.c — libFuzzer target for the control socket's protocol (app/steer/control.c): the
 * request framing of one client (bytes arriving in arbitrary chunks, lines split at newlines, the
 * 4 KiB limit, half lines, replies queued) and control_line_parse on every line, with the
 * training side played in-process (control_take / control_handed / control_event). Any input
 * must end in replies and parsed commands, never a crash, a read past the input, an overflow of
 * the client's buffers, or a command that did not parse. Seeds (FUZZ_STANDALONE): every request
 * kind, garbage, an overlong line, CRLF, NUL bytes. */
#define _GNU_SOURCE

#include "app/cli/commands.h"
#include "app/steer/control_internal.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_driver.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > (1 << 20)) return 0;
    /* every line on its own, as the parser sees it */
    for (size_t a = 0; a <= size;) {
        const uint8_t *nl = memchr(data + a, '\n', size - a);
        const size_t len = nl ? (size_t)(nl - (data + a)) : size - a;
        TrainerCmd c;
        char err[512];
        const ControlLineKind k = control_line_parse((const char *)data + a, len, &c, err, sizeof err);
        if (k == CTL_LINE_COMMAND && (c.origin != CMD_FROM_SOCKET || c.kind == CMD_HELP)) abort();
        if (k == CTL_LINE_ERROR && !err[0]) abort();
        for (size_t i = 0; k != CTL_LINE_ERROR && i < len; i++)
            if (data[a + i] == 0 ||
                (data[a + i] < 0x20 && data[a + i] != '\t' && !(i + 1 == len && data[a + i] == '\r')))
                abort(); /* a control byte got through */
        a += len + 1;
        if (!nl) break;
    }
    /* one client of a server with its own queue: chunks sized by the input itself */
    static ControlServer s;
    memset(&s, 0, sizeof s);
    pthread_mutex_init(&s.mu, NULL);
    pthread_cond_init(&s.cv, NULL);
    s.wake[0] = s.wake[1] = -1;
    ControlClient *c = &s.cl[0];
    c->fd = 1000; /* never used for I/O here */
    size_t off = 0;
    while (off < size) {
        size_t chunk = 1 + data[off] % 97u * 53u;
        if (chunk > size - off) chunk = size - off;
        const size_t room = sizeof c->in - c->inlen;
        if (chunk > room) chunk = room;
        memcpy(c->in + c->inlen, data + off, chunk);
        c->inlen += chunk;
        off += chunk;
        control_client_lines_locked(&s, c);
        TrainerCmd cmd;
        while (c->awaiting) { /* the trainer takes the command and reports it */
            if (!control_take(&s, &cmd, 0)) abort();
            if (cmd.tag != c->awaiting || cmd.origin != CMD_FROM_SOCKET) abort();
            s.pending = cmd.tag; /* control_handed without the wake pipe */
            TrainerEvent e;
            memset(&e, 0, sizeof e);
            e.kind = TEV_APPLIED;
            snprintf(e.text, sizeof e.text, "%s", cmd.text);
            const long tag = s.pending;
            s.pending = 0;
            ControlClient *w = control_awaiting_locked(&s, tag);
            if (w != c) abort();
            control_reply_locked(w, "ok step=0 %s", e.text);
            w->awaiting = 0;
            control_client_lines_locked(&s, c);
        }
        if (c->inlen > sizeof c->in || c->outlen > sizeof c->out) abort();
        c->outlen = 0; /* written */
        if (c->closing) {
            c->inlen = 0;
            c->closing = 0;
        }
    }
    pthread_mutex_destroy(&s.mu);
    pthread_cond_destroy(&s.cv);
    return 0;
}

#ifdef FUZZ_STANDALONE
static void fuzz_seeds(void (*run)(const uint8_t *, size_t)) {
    static const char *seeds[] = {
        "status\nset tau 0.3\npause\nresume\nstep 5\nhelp\ndetach\n",
        "anneal sigmoid now 0.05 s=12 c=0.4\r\nset lr 0.01 # a comment\neval\nsnapshot\nquit\n",
        "\x01\x02garbage\n\x7f\n\t\n   \nset\nset tau\nset tau nan\n", "set tau 0.3", /* a half line */
    };
    for (size_t i = 0; i < sizeof seeds / sizeof *seeds; i++) run((const uint8_t *)seeds[i], strlen(seeds[i]));
    static const uint8_t nul[] = {'s', 't', 0, 'a', '\n', 'p', 'a', 'u', 's', 'e', '\n'};
    run(nul, sizeof nul);
    static char big[3 * CONTROL_LINE_MAX];
    memset(big, 'x', sizeof big);
    big[CONTROL_LINE_MAX] = '\n';
    run((const uint8_t *)big, sizeof big);
}
#endif
