/* runsession.c — see runsession.h. */
#include "runsession.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

void command_line_join(char *buf, size_t n, int argc, char **argv) {
    size_t len = 0;
    buf[0] = 0;
    for (int i = 0; i < argc && len + 1 < n; i++) {
        const char *a = argv[i];
        int plain = *a != 0;
        for (const char *p = a; *p; p++)
            if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || strchr("-_./=:,+@%", *p)))
                plain = 0;
        if (i) len += snprintf(buf + len, n - len, " ");
        if (len + 1 >= n) break;
        if (plain) { len += snprintf(buf + len, n - len, "%s", a); continue; }
        len += snprintf(buf + len, n - len, "'");
        for (const char *p = a; *p && len + 5 < n; p++) {
            if (*p == '\'') len += snprintf(buf + len, n - len, "'\\''");
            else buf[len++] = *p, buf[len] = 0;
        }
        if (len + 1 < n) len += snprintf(buf + len, n - len, "'");
    }
}

int command_line_split(const char *line, char ***argv_out) {
    int cap = 16, argc = 0;
    char **argv = malloc(sizeof *argv * cap);
    size_t L = strlen(line);
    char *cur = malloc(L + 1);
    if (!argv || !cur) { free(argv); free(cur); return -1; }
    const char *p = line;
    while (*p) {
        while (*p == ' ' || *p == '\t') p++;
        if (!*p) break;
        size_t k = 0;
        while (*p && *p != ' ' && *p != '\t') {
            if (*p == '\'') {
                p++;
                while (*p && *p != '\'') cur[k++] = *p++;
                if (*p != '\'') { free(cur); argv_free(argc, argv); return -1; }
                p++;
            } else if (*p == '\\' && p[1]) { cur[k++] = p[1]; p += 2; }
            else cur[k++] = *p++;
        }
        cur[k] = 0;
        if (argc + 1 >= cap) {
            cap *= 2;
            char **nv = realloc(argv, sizeof *argv * cap);
            if (!nv) { free(cur); argv_free(argc, argv); return -1; }
            argv = nv;
        }
        argv[argc++] = strdup(cur);
    }
    argv[argc] = NULL;
    free(cur);
    *argv_out = argv;
    return argc;
}

void argv_free(int argc, char **argv) {
    if (!argv) return;
    for (int i = 0; i < argc; i++) free(argv[i]);
    free(argv);
}

static void report(RunSession *rs, const char *what) {
    if (rs->failed) return;
    rs->failed = 1;
    ml_log(1, "session %s: %s failed: %s (training continues; later records are not saved)", rs->dir, what, ml_last_error());
}

int runsession_open(RunSession *rs, const AppOptions *o, Trainer *t, const char *cmdline, int resume) {
    memset(rs, 0, sizeof *rs);
    rs->last_ckpt_step = -1;
    if (o->no_session) return 0;
    rs->ckpt_every = o->ckpt_every;
    rs->ckpt_steps = o->ckpt_steps;
    rs->keep = o->keep;
    if (o->session[0]) snprintf(rs->dir, sizeof rs->dir, "%s", o->session);
    else {
        char ts[32];
        time_t now = time(NULL);
        struct tm tmv;
        localtime_r(&now, &tmv);
        strftime(ts, sizeof ts, "%Y%m%d-%H%M%S", &tmv);
        snprintf(rs->dir, sizeof rs->dir, "sessions/%s-%s-%s", t->ds->name, moe_head_name(t->cfg.model.head.kind), ts);
        struct stat sb;
        for (int i = 2; stat(rs->dir, &sb) == 0 && i < 1000; i++)
            snprintf(rs->dir, sizeof rs->dir, "sessions/%s-%s-%s-%d", t->ds->name, moe_head_name(t->cfg.model.head.kind), ts, i);
    }
    if (resume) {
        char path[1024], rep[1024] = "";
        if (ckpt_find_latest(rs->dir, path, sizeof path, rep, sizeof rep) != ML_OK) {
            if (rep[0]) {
                char msg[1024];
                snprintf(msg, sizeof msg, "%s", ml_last_error());
                ml_fail(ML_ERR_FORMAT, "%s (%s)", msg, rep);
            }
            return -1;
        }
        if (rep[0]) ml_log(1, "%s", rep);
        if (ckpt_read(path, t) != ML_OK) return -1;
        rs->last_ckpt_step = t->step;
        if (session_open_append(&rs->w, rs->dir, t->step) != ML_OK) return -1;
        rs->active = 1;
        char ev[1100];
        snprintf(ev, sizeof ev, "resume from %s", strrchr(path, '/') ? strrchr(path, '/') + 1 : path);
        runsession_event(rs, t->step, ev);
    } else {
        SessionInfo info;
        memset(&info, 0, sizeof info);
        info.trainer = t;
        info.command_line = cmdline;
        info.dataset_spec = o->dataset;
        if (session_create(&rs->w, rs->dir, &info) != ML_OK) return -1;
        rs->active = 1;
    }
    rs->last_flush = ml_now();
    return 0;
}

void runsession_step(RunSession *rs, const StepRecord *r) {
    if (!rs->active || rs->failed) return;
    if (session_append_step(&rs->w, r) != ML_OK) { report(rs, "writing a step record"); return; }
    const double now = ml_now();
    if (now - rs->last_flush > 2.0) {
        rs->last_flush = now;
        if (session_flush(&rs->w) != ML_OK) report(rs, "flushing live.h5");
    }
}

void runsession_checkpoint(RunSession *rs, Trainer *t, const char *why) {
    if (!rs->dir[0] || rs->failed) return;
    if (ckpt_write(rs->dir, t, rs->keep) != ML_OK) { report(rs, "writing a checkpoint"); return; }
    rs->last_ckpt_step = t->step;
    if (why) {
        char ev[128];
        snprintf(ev, sizeof ev, "checkpoint ckpt-%ld.h5 (%s)", t->step, why);
        runsession_event(rs, t->step, ev);
    }
}

void runsession_eval(RunSession *rs, Trainer *t, const EvalRecord *r) {
    if (!rs->active || rs->failed) return;
    if (session_append_eval(&rs->w, r) != ML_OK) { report(rs, "writing an evaluation record"); return; }
    rs->last_flush = ml_now();
    if (rs->ckpt_every > 0 && r->epoch > 0 && r->epoch % rs->ckpt_every == 0 && t->pos == 0 && t->step != rs->last_ckpt_step)
        runsession_checkpoint(rs, t, NULL);
}

void runsession_event(RunSession *rs, long step, const char *text) {
    if (!rs->active || rs->failed) return;
    if (session_append_event(&rs->w, step, 0.0, text) != ML_OK) report(rs, "writing the event log");
}

void runsession_finish(RunSession *rs, Trainer *t, const char *status) {
    if (!rs->active) return;
    if (!rs->failed && t->step != rs->last_ckpt_step) runsession_checkpoint(rs, t, NULL);
    if (session_close(&rs->w, status) != ML_OK && !rs->failed)
        ml_log(1, "session %s: closing live.h5: %s", rs->dir, ml_last_error());
    rs->active = 0;
}
