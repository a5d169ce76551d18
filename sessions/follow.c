/* follow.c — following a session a writer is appending to (history.h, "following a running
 * session"): the file stays open read-only with SWMR-read, and each poll refreshes the datasets
 * and reads only the rows after those the history holds (session_history_tail in history.c),
 * instead of re-reading the whole file. `moelab attach` polls once a second; a whole re-read of
 * a long run costs the whole history every second, a poll costs the new rows and the refreshed
 * dataset headers. A file that was replaced (another inode) or lost rows (a resume) is an error
 * the caller answers with a whole re-read. */
#define _POSIX_C_SOURCE 200809L

#include "history.h"
#include "h5util.h"
#include "history_tail.h"
#include "schema.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

struct SessionFollow {
    hid_t f;
    char path[H5U_PATH_MAX];
    dev_t dev;
    ino_t ino;
    SessTailCap cap;
    SessionFollowStats stats;
};

SessionFollow *session_follow_open(SessionHistory *h) {
    h5u_quiet();
    if (!h || !h->path[0]) {
        ml_fail(ML_ERR_ARG, "session_follow_open: no loaded history");
        return NULL;
    }
    SessionFollow *w = calloc(1, sizeof *w);
    if (!w) {
        ml_fail(ML_ERR_NOMEM, "%s: out of memory", h->path);
        return NULL;
    }
    struct stat sb;
    if (sess_open_follow(h->path, &w->f, w->path, sizeof w->path) != ML_OK || stat(w->path, &sb) != 0) {
        if (w->f >= 0) H5Fclose(w->f);
        H5Eclear2(H5E_DEFAULT);
        free(w);
        return NULL;
    }
    w->dev = sb.st_dev;
    w->ino = sb.st_ino;
    w->cap = (SessTailCap){h->nsteps, h->nevals, h->nevents, session_config_parse(h->config_json)};
    return w;
}

ml_status session_follow_poll(SessionFollow *w, SessionHistory *h, long *added) {
    if (added) *added = 0;
    if (!w || !h) return ml_fail(ML_ERR_ARG, "session_follow_poll: no follower");
    w->stats.polls++;
    struct stat sb;
    if (stat(w->path, &sb) != 0 || sb.st_dev != w->dev || sb.st_ino != w->ino) {
        w->stats.fails++;
        return ml_fail(ML_ERR_IO, "%s: the file was replaced or removed", w->path);
    }
    const long before = h->nsteps + h->nevals + h->nevents;
    const ml_status st = session_history_tail(w->f, w->path, h, &w->cap);
    const long n = h->nsteps + h->nevals + h->nevents - before;
    w->stats.rows += n;
    if (added) *added = n;
    if (st != ML_OK) w->stats.fails++;
    return st;
}

void session_follow_stats(const SessionFollow *w, SessionFollowStats *out) {
    if (w) *out = w->stats;
    else memset(out, 0, sizeof *out);
}

void session_follow_close(SessionFollow *w) {
    if (!w) return;
    H5Fclose(w->f);
    H5Eclear2(H5E_DEFAULT);
    json_decref(w->cap.cfg);
    free(w);
}
