/* test_control.c — which trainer events answer a control-socket client (app/steer/control.c,
 * control_event). A client that sent a command waits for that command's result: an event of no
 * command (the note a run prints when it starts), or the result of a --commands file's or the
 * screen's command, must not be taken as its reply; the socket command's own result is. The
 * server runs in-process, as tests/fuzz_control.c runs it (no sockets, no threads). */
#define _GNU_SOURCE

#include "app/cli/commands.h"
#include "app/steer/control_internal.h"

#include <stdio.h>
#include <string.h>

#include "check.h"

static TrainerEvent event(TrainerEventKind kind, int origin, const char *text) {
    TrainerEvent e;
    memset(&e, 0, sizeof e);
    e.kind = kind;
    e.origin = origin;
    e.step = 3;
    snprintf(e.text, sizeof e.text, "%s", text);
    return e;
}

int main(void) {
    static ControlServer s;
    memset(&s, 0, sizeof s);
    pthread_mutex_init(&s.mu, NULL);
    pthread_cond_init(&s.cv, NULL);
    s.wake[0] = s.wake[1] = -1; /* wake() writes nowhere */
    for (int i = 0; i < CONTROL_MAX_CLIENTS; i++) s.cl[i].fd = -1;
    ControlClient *c = &s.cl[0];
    c->fd = 1000; /* never used for I/O here */
    c->awaiting = 7;
    s.pending = 7; /* the trainer has taken the client's command (control_handed) */

    TrainerEvent e = event(TEV_NOTE, CMD_FROM_NONE, "head: k = 1 with renormalised gates: ...");
    control_event(&s, &e);
    CHECK(c->outlen == 0 && c->awaiting == 7 && s.pending == 7,
          "a note of no command (a run's start) is not the waiting client's reply (reply bytes %zu)", c->outlen);
    e = event(TEV_APPLIED, CMD_FROM_FILE, "set tau 0.9");
    control_event(&s, &e);
    e = event(TEV_APPLIED, CMD_FROM_SCREEN, "set lr 0.01");
    control_event(&s, &e);
    CHECK(c->outlen == 0 && c->awaiting == 7 && s.pending == 7,
          "a --commands file's and the screen's results are not its reply either");
    e = event(TEV_APPLIED, CMD_FROM_SOCKET, "set tau 0.5");
    control_event(&s, &e);
    CHECK(c->outlen == strlen("ok step=3 set tau 0.5\n") && !memcmp(c->out, "ok step=3 set tau 0.5\n", c->outlen) &&
              c->awaiting == 0 && s.pending == 0,
          "the socket command's own result is: \"%.*s\"", (int)(c->outlen ? c->outlen - 1 : 0), c->out);
    c->outlen = 0;
    c->awaiting = 8;
    s.pending = 8;
    e = event(TEV_FAILED, CMD_FROM_SOCKET, "set tau: -1 is out of range");
    control_event(&s, &e);
    CHECK(c->outlen > 0 && !strncmp(c->out, "error: set tau: -1", 18) && c->awaiting == 0,
          "a failed socket command answers with its error");

    /* a read-only connection (moelab attach --read-only): `readonly`, then every command of the
     * command language is refused and nothing reaches the queue; status still answers */
    ControlClient *r = &s.cl[1];
    r->fd = 1001;
    static const char lines[] = "readonly\nset tau 0.3\npause\nquit\neval\nanneal linear 1 0.1\nstatus\n";
    memcpy(r->in, lines, sizeof lines - 1);
    r->inlen = sizeof lines - 1;
    pthread_mutex_lock(&s.mu);
    control_client_lines_locked(&s, r);
    pthread_mutex_unlock(&s.mu);
    r->out[r->outlen < sizeof r->out ? r->outlen : sizeof r->out - 1] = 0;
    int refused = 0;
    for (const char *p = r->out; (p = strstr(p, "error: read-only connection")); p++) refused++;
    CHECK(r->read_only && !strncmp(r->out, "ok read-only\n", 13) && refused == 5 && s.qn == 0 && !r->awaiting &&
              strstr(r->out, "\nok step="),
          "a read-only connection refuses the 5 commands (%d refused, %d queued) and answers status: \"%s\"", refused,
          s.qn, r->out);
    pthread_mutex_destroy(&s.mu);
    pthread_cond_destroy(&s.cv);
    printf("test_control: %d failed\n", n_failed);
    return n_failed ? 1 : 0;
}
