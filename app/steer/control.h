/* control.h — a training run's control socket (`DIR/control.sock`) and its line protocol.
 *
 * Every training run with a session folder listens on a Unix-domain stream socket in that folder
 * (mode 0600; the folder must belong to the user). `moelab attach` and `moelab ctl` connect to it.
 *
 * Protocol: one request per line (at most CONTROL_LINE_MAX bytes before the newline), one reply
 * line per request:
 *   a command of the command language (app/commands.h), e.g. `set tau 0.3`:
 *       queued into the same queue as the live screen's commands, applied at the next step
 *       boundary and written to the event log with origin `socket`; the reply comes once the
 *       trainer has taken it: `ok step=N <command as applied>` or `error: <why>`;
 *   `status`  ->  `ok step=N total=T epoch=E epochs=EP state=running|paused tau=.. loss=..
 *                 acc=.. test_acc=.. img_s=.. pid=P session=DIR`;
 *   `detach`  ->  `ok bye`, and the server closes the connection;
 *   `readonly` -> `ok read-only`: from then on this connection is read-only (moelab attach
 *                 --read-only): every command of the command language gets `error: read-only
 *                 connection: ...`; status, help and detach still answer. There is no way back;
 *   `help`    ->  `ok commands: ...`.
 * A line that is not text (NUL or other control bytes), is not a command or fails in the
 * trainer gets `error: ...` and the connection stays open. A line longer than CONTROL_LINE_MAX,
 * a peer with another uid (SO_PEERCRED: refused and logged through ops.log), a client that does
 * not read its replies, a half line at end of file, an incomplete line held CONTROL_PARTIAL_SEC or
 * no complete line for CONTROL_IDLE_SEC: an error where possible, then the connection is closed.
 * When all CONTROL_MAX_CLIENTS slots are taken, a new connection closes the one idle the longest
 * (`error: too many connections` only while every slot has a request in flight), so idle or
 * stalled clients cannot lock the owner out. Nothing a client sends reaches the trainer except a
 * parsed command. The client side checks the listener's uid (SO_PEERCRED) before sending.
 *
 * The server runs on its own thread (poll over the listening socket, the clients and a wake
 * pipe), never on the training thread; the training side only queues, takes and reports
 * (constant work under one mutex). Each client has one request in flight: the next line is read
 * after the reply, so a flood waits in the client's socket buffer (bounded by the kernel). */
#ifndef ML_APP_CONTROL_H
#define ML_APP_CONTROL_H

#include <stddef.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "core/records.h"

#define CONTROL_SOCKET_NAME "control.sock"
#define CONTROL_LINE_MAX 4096  /* bytes of one request line, newline excluded */
#define CONTROL_MAX_CLIENTS 16 /* simultaneous connections (when full, the one idle longest makes room) */
#define CONTROL_IDLE_SEC 60    /* a connection with no complete line for this long is closed */
#define CONTROL_PARTIAL_SEC 10 /* ... and one holding an incomplete line for this long */
#define CONTROL_QUEUE 64       /* headless runs: commands waiting for a step boundary */

typedef enum {
    CTL_LINE_COMMAND, /* *cmd holds a parsed command for the trainer */
    CTL_LINE_STATUS,
    CTL_LINE_DETACH,
    CTL_LINE_HELP,
    CTL_LINE_READONLY, /* `readonly`: the connection refuses commands from now on */
    CTL_LINE_ERROR, /* err holds the reason */
} ControlLineKind;

/* Parses one request line: `len` bytes (the newline removed; a trailing CR is ignored), which may
 * hold any bytes at all. Never reads past line + len. */
ControlLineKind control_line_parse(const char *line, size_t len, TrainerCmd *cmd, char *err, size_t errn);

/* The socket address of DIR/control.sock in *a (*alen its length). A path too long for sun_path
 * goes through /proc/self/fd/N of the folder, opened into *dirfd (close it after bind/connect;
 * -1 when not needed). 0, or -1 (errno set). */
int control_address(const char *dir, struct sockaddr_un *a, socklen_t *alen, int *dirfd);

typedef struct ControlServer ControlServer;

typedef struct {
    /* Queues a parsed command (origin CMD_FROM_SOCKET, tag set) for the next step boundary;
     * 0, or -1 when the queue is full. Called on the server thread. NULL: the server's own queue
     * (control_take), for headless runs. */
    int (*submit)(void *user, const TrainerCmd *c);
    /* A line for the run's log (refused peers, stale sockets); any thread. NULL: stderr. */
    void (*log)(void *user, int level, const char *msg);
    void *user;
} ControlOps;

/* Listens on DIR/control.sock (a stale socket left by a killed run is replaced; a live one, or
 * a file of another kind, is not) and starts the server thread. NULL with a message in err. */
ControlServer *control_start(const char *dir, const ControlOps *ops, char *err, size_t errn);
/* Answers what is still waiting ("error: the run has ended"), closes every connection, removes
 * the socket (if it is still ours) and frees. NULL is a no-op. */
void control_stop(ControlServer *s);

/* ---- the training side (the thread that runs trainer_run) */

/* Headless runs (ops.submit NULL): the next queued command into *c, waiting up to wait_ms for
 * one. 1 if one was taken, 0 if none. */
int control_take(ControlServer *s, TrainerCmd *c, int wait_ms);
/* The command source hands c to the trainer now: if it came from the socket, the next result
 * event (control_event) is its reply. Call for every command handed over. */
void control_handed(ControlServer *s, const TrainerCmd *c);
/* Every event of the loop: an applied / failed / noted command answers the request in flight. */
void control_event(ControlServer *s, const TrainerEvent *e);
/* What `status` reports. */
void control_note_state(ControlServer *s, const TrainerState *st);
void control_note_step(ControlServer *s, const StepRecord *r);
void control_note_eval(ControlServer *s, const EvalRecord *r);
void control_note_run(ControlServer *s, long total_steps, int epochs);
/* The routed layers' names (status adds layers=, tau@NAME= and collapsed@NAME= for each). */
void control_note_layers(ControlServer *s, const RunRecord *r);

/* ---- the client side (moelab attach, moelab ctl) */

/* Connects to DIR/control.sock. The fd, or -1 with errno set (ENOENT / ECONNREFUSED: no run is
 * listening; EACCES: the socket is not this user's; EPERM: the process listening there runs as
 * another uid (SO_PEERCRED), put in *owner when owner is not NULL: nothing was sent to it). */
int control_connect(const char *dir, long *owner);
/* "uid N (NAME)" or "uid N" into buf, for messages about another user. */
const char *control_uid_text(long uid, char *buf, size_t n);
/* Sends one request line (a newline is added) and reads one reply line into reply (without its
 * newline), waiting up to timeout_ms (< 0: forever). 0, or -1 with a message in reply (the
 * connection is then unusable). */
int control_request(int fd, const char *line, char *reply, size_t n, int timeout_ms);

#endif
