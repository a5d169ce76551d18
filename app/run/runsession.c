/* runsession.c — see runsession.h. */
#include "app/run/runsession.h"

#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

void command_line_join(char *buf, size_t n, int argc, char **argv) {
    size_t len = 0;
    buf[0] = 0;
    for (int i = 0; i < argc && len + 1 < n; i++) {
        const char *a = argv[i];
        int plain = *a != 0;
        for (const char *p = a; *p; p++)
            if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
                  strchr("-_./=:,+@%", *p)))
                plain = 0;
        if (i) len += snprintf(buf + len, n - len, " ");
        if (len + 1 >= n) break;
        if (plain) {
            len += snprintf(buf + len, n - len, "%s", a);
            continue;
        }
        len += snprintf(buf + len, n - len, "'");
        for (const char *p = a; *p && len + 5 < n; p++) {
            if (*p == '\'') len += snprintf(buf + len, n - len, "'\\''");
            else buf[len++] = *p, buf[len] = 0;
        }
        if (len + 1 < n) len += snprintf(buf + len, n - len, "'");
    }
}

char *command_line_join_alloc(int argc, char **argv) {
    size_t n = 16;
    for (int i = 0; i < argc; i++) n += 4 * strlen(argv[i]) + 3; /* every ' becomes '\'' */
    char *buf = malloc(n);
    if (buf) command_line_join(buf, n, argc, argv);
    return buf;
}

int command_line_split(const char *line, char ***argv_out) {
    int cap = 16, argc = 0;
    char **argv = malloc(sizeof *argv * cap);
    size_t L = strlen(line);
    char *cur = malloc(L + 1);
    if (!argv || !cur) {
        free(argv);
        free(cur);
        return -1;
    }
    const char *p = line;
    while (*p) {
        while (*p == ' ' || *p == '\t') p++;
        if (!*p) break;
        size_t k = 0;
        while (*p && *p != ' ' && *p != '\t') {
            if (*p == '\'') {
                p++;
                while (*p && *p != '\'') cur[k++] = *p++;
                if (*p != '\'') {
                    free(cur);
                    argv_free(argc, argv);
                    return -1;
                }
                p++;
            } else if (*p == '\\' && p[1]) {
                cur[k++] = p[1];
                p += 2;
            } else cur[k++] = *p++;
        }
        cur[k] = 0;
        if (argc + 1 >= cap) {
            cap *= 2;
            char **nv = realloc(argv, sizeof *argv * cap);
            if (!nv) {
                free(cur);
                argv_free(argc, argv);
                return -1;
            }
            argv = nv;
        }
        argv[argc++] = strdup(cur);
    }
    argv[argc] = NULL;
    free(cur);
    *argv_out = argv;
    return argc;
}

void runsession_stored_config(const char *dir, AppOptions *o) {
    char *js = NULL;
    if (session_read_run_attr_alloc(dir, "config_json", &js) != ML_OK) return;
    json_t *cfg = session_config_parse(js);
    long v;
    double x;
    char kind[32];
    TauKind tk;
    if (cfg && session_config_long(cfg, "model.head.renorm", MOE_RENORM_OFF, MOE_RENORM_AUTO, &v) == 1)
        o->train.model.head.renorm = (int)v;
    /* the selection noise, balancing-loss weight and temperature schedule the session was launched
     * with: a stored command line that did not give them meant the defaults of its day (issue 33
     * changed them) */
    MoeConfig *h = &o->train.model.head;
    if (cfg && session_config_num(cfg, "model.head.noise", 0, 1e6, &x) == 1) h->noise = (float)x;
    if (cfg && session_config_num(cfg, "model.head.alpha", 0, 1e6, &x) == 1) h->alpha = (float)x;
    TauSchedule *t = &o->train.tau;
    if (cfg && session_config_str(cfg, "tau.kind", kind, sizeof kind) == 1 && tau_parse_kind(kind, &tk) == ML_OK) {
        t->kind = tk;
        if (session_config_num(cfg, "tau.tau0", 1e-9, 1e9, &x) == 1) t->tau0 = (float)x;
        if (session_config_num(cfg, "tau.tau1", 1e-9, 1e9, &x) == 1) t->tau1 = (float)x;
        if (session_config_num(cfg, "tau.tau_min", 1e-9, 1e9, &x) == 1) t->tau_min = (float)x;
        if (session_config_num(cfg, "tau.s", -1e9, 1e9, &x) == 1) t->s = (float)x;
        if (session_config_num(cfg, "tau.c", -1e9, 1e9, &x) == 1) t->c = (float)x;
        if (session_config_long(cfg, "tau.step_every", -1000000000L, 1000000000L, &v) == 1) t->step_every = (int)v;
        if (session_config_num(cfg, "tau.step_gamma", -1e9, 1e9, &x) == 1) t->step_gamma = (float)x;
        if (session_config_num(cfg, "tau_epochs", 0, 1e9, &x) == 1) o->train.tau_epochs = (float)x;
    }
    json_decref(cfg);
    free(js);
}

int runsession_stored_ranks(const char *dir) {
    char *js = NULL;
    if (session_read_run_attr_alloc(dir, "config_json", &js) != ML_OK) return 1;
    json_t *cfg = session_config_parse(js);
    long v = 1;
    if (!cfg || session_config_long(cfg, "ranks", 1, 1000000, &v) != 1) v = 1;
    json_decref(cfg);
    free(js);
    return (int)v;
}

int runsession_interrupted_extension(const char *dir, int epochs) {
    char *launch = NULL;
    if (session_read_run_attr_alloc(dir, "launch_command_line", &launch) != ML_OK) return 0; /* never extended */
    free(launch);
    char path[APP_PATH_MAX + 128];
    if (ckpt_find_latest(dir, path, sizeof path, NULL, 0) != ML_OK) return 0; /* the restore says why */
    char *js = malloc(65536);
    long v = 0;
    if (js && ckpt_read_attr(path, "config_json", js, 65536) == ML_OK) {
        json_t *cfg = session_config_parse(js);
        if (!cfg || session_config_long(cfg, "epochs", 1, 100000, &v) != 1) v = 0;
        json_decref(cfg);
    }
    free(js);
    return v > 0 && v != epochs ? (int)v : 0;
}

void argv_free(int argc, char **argv) {
    if (!argv) return;
    for (int i = 0; i < argc; i++) free(argv[i]);
    free(argv);
}

/* 128 random bits as 32 hex digits (the time and PID if the kernel has no entropy to give). */
static void new_session_id(char *buf, size_t n) {
    unsigned char b[16];
    if (getrandom(b, sizeof b, GRND_NONBLOCK) != (ssize_t)sizeof b) {
        const uint64_t t = (uint64_t)(ml_now() * 1e6), p = (uint64_t)getpid();
        memcpy(b, &t, 8);
        memcpy(b + 8, &p, 8);
    }
    size_t k = 0;
    for (size_t i = 0; i < sizeof b && k + 2 < n; i++) k += (size_t)snprintf(buf + k, n - k, "%02x", b[i]);
}

static void report(RunSession *rs, const char *what) {
    if (rs->failed) return;
    rs->failed = 1;
    ml_log(1, "session %s: %s failed: %s (training continues; later records are not saved)", rs->dir, what,
           ml_last_error());
}

const char *sessions_root(void) {
    const char *e = getenv("MOELAB_SESSIONS");
    return e && e[0] ? e : "runs";
}

/* a notification's outcome in the event log */
static void notify_log(void *user, long step, const char *text) { runsession_event(user, step, text); }

static ml_status on_checkpoint(Trainer *t, const char *why, void *user);

int runsession_open(RunSession *rs, const AppOptions *o, Trainer *t, const char *cmdline, const char *commands_text,
                    int resume) {
    memset(rs, 0, sizeof *rs);
    notify_init(&rs->notify, o->notify, o->notify_timeout, "");
    rs->trainer = t;
    if (o->no_session) return 0;
    rs->ckpt_every = o->ckpt_every;
    rs->ckpt_steps = o->ckpt_steps;
    rs->keep = o->keep;
    rs->ckpt_last_fail = -1;
    if (o->session[0]) snprintf(rs->dir, sizeof rs->dir, "%s", o->session);
    else {
        char ts[32];
        time_t now = time(NULL);
        struct tm tmv;
        localtime_r(&now, &tmv);
        strftime(ts, sizeof ts, "%Y%m%d-%H%M%S", &tmv);
        const char *root = sessions_root();
        snprintf(rs->dir, sizeof rs->dir, "%s/%s-%s-%s", root, t->src.name, moe_head_name(t->cfg.model.head.kind), ts);
        struct stat sb;
        for (int i = 2; stat(rs->dir, &sb) == 0 && i < 1000; i++)
            snprintf(rs->dir, sizeof rs->dir, "%s/%s-%s-%s-%d", root, t->src.name,
                     moe_head_name(t->cfg.model.head.kind), ts, i);
    }
    /* the session lock before anything in the folder is read or written: a second writer (two
     * resumes, a resume of a running session) is refused with the holder's PID, nothing touched */
    if ((resume ? session_lock(rs->dir, &rs->lock) : session_lock_create(rs->dir, &rs->lock)) != ML_OK) return -1;
    /* --private: nobody else may enter the folder (live.h5 and the checkpoints follow the umask) */
    if (o->private_run && chmod(rs->dir, 0700) != 0) {
        ml_fail(ML_ERR_IO, "%s: cannot make the session folder private (chmod 700): %s", rs->dir, strerror(errno));
        session_unlock(&rs->lock);
        return -1;
    }
    if (resume) {
        char path[APP_PATH_MAX + 128], rep[4096] = "";
        if (session_read_run_attr(rs->dir, "session_id", rs->session_id, sizeof rs->session_id) != ML_OK)
            rs->session_id[0] = 0; /* a session from before session ids */
        StateView sv;
        trainer_state(t, &sv);
        if (ckpt_restore_latest(rs->dir, &sv, rs->session_id, path, sizeof path, rep, sizeof rep) != ML_OK) {
            if (rep[0]) {
                char msg[1024];
                snprintf(msg, sizeof msg, "%s", ml_last_error());
                ml_fail(ML_ERR_FORMAT, "%s (%s)", msg, rep);
            }
            return -1;
        }
        if (rep[0]) ml_log(1, "%s", rep);
        if (session_fault("restore")) {
            ml_fail(ML_ERR_IO, "refused after the restore (MOELAB_FAULT_RESUME=restore)");
            return -1;
        }
        const int was = t->cfg.epochs;
        /* --epochs N: the schedules' ends move (trainer_extend) and /run says so, written with the
         * resume's other writes to its copy of live.h5 (a refusal before the copy takes live.h5's
         * place leaves the session as it was) */
        char *launch = NULL;
        SessionExtension ext = {0};
        if (o->extend_epochs > 0) {
            /* fewer epochs than done: refused before anything is said or written (issue 41 item 8) */
            const int done = t->epoch + (t->pos > 0);
            if (o->extend_epochs < done) {
                if (t->pos > 0)
                    ml_fail(ML_ERR_ARG,
                            "%s has run %d epoch%s and part of the next: --epochs %d would shorten it; give %d or more",
                            rs->dir, t->epoch, t->epoch == 1 ? "" : "s", o->extend_epochs, done);
                else
                    ml_fail(ML_ERR_ARG, "%s ran %d epoch%s: --epochs %d would shorten it; give %d or more", rs->dir,
                            t->epoch, t->epoch == 1 ? "" : "s", o->extend_epochs, done);
                return -1;
            }
            if (trainer_extend(t, o->extend_epochs) != ML_OK ||
                session_read_run_attr_alloc(rs->dir, "command_line", &launch) != ML_OK) {
                free(launch);
                return -1;
            }
            ext = (SessionExtension){o->extend_epochs, t->total_steps, cmdline, launch};
            if (session_fault("extend")) {
                free(launch);
                ml_fail(ML_ERR_IO, "refused before the append (MOELAB_FAULT_RESUME=extend)");
                return -1;
            }
        }
        const ml_status ap = session_open_append_ext(&rs->w, rs->dir, t->step, o->extend_epochs > 0 ? &ext : NULL);
        free(launch);
        if (ap != ML_OK) return -1;
        rs->active = 1;
        /* from here live.h5 has the extension: a resume stopped before the checkpoint below is
         * completed by the next resume (resume_session: the checkpoint is of the shorter run) */
        if (session_fault("events")) {
            ml_fail(ML_ERR_IO, "refused before the resume's events (MOELAB_FAULT_RESUME=events)");
            return -1;
        }
        char ev[APP_PATH_MAX + 256];
        snprintf(ev, sizeof ev, RUNSESSION_RESUME_EVENT " %s", strrchr(path, '/') ? strrchr(path, '/') + 1 : path);
        runsession_event(rs, t->step, ev);
        if (o->extend_epochs > 0) {
            /* the event replay reads, and a checkpoint of the extended run at once (a resume of it
             * then never meets a checkpoint of the shorter run) */
            snprintf(ev, sizeof ev, "%s %d (was %d)", RUNSESSION_EXTEND_EVENT, o->extend_epochs, was);
            runsession_event(rs, t->step, ev);
            if (session_fault("ckpt")) {
                ml_fail(ML_ERR_IO, "the extension's checkpoint was refused (MOELAB_FAULT_RESUME=ckpt)");
                return -1;
            }
            if (on_checkpoint(t, "extend", rs) != ML_OK) return -1;
        }
    } else {
        RunRecord run;
        trainer_describe(t, &run);
        SessionInfo info;
        memset(&info, 0, sizeof info);
        info.run = &run;
        new_session_id(rs->session_id, sizeof rs->session_id);
        info.session_id = rs->session_id;
        info.commands_text = commands_text;
        info.command_line = cmdline;
        info.dataset_spec = o->dataset;
        if (session_create(&rs->w, rs->dir, &info) != ML_OK) return -1;
        rs->active = 1;
    }
    rs->last_flush = ml_now();
    rs->notify.session = rs->dir;
    rs->notify.log = notify_log;
    rs->notify.user = rs;
    return 0;
}

static void on_step(const StepRecord *r, void *user) {
    RunSession *rs = user;
    rs->last_step = r->step;
    if (rs->notify.cmd) {
        notify_alarm(&rs->notify, r->alarm);
        if (rs->notify.nkid) notify_poll(&rs->notify, 0);
    }
    if (!rs->active || rs->failed) return;
    if (session_append_step(&rs->w, r) != ML_OK) {
        report(rs, "writing a step record");
        return;
    }
    const double now = ml_now();
    if (now - rs->last_flush > 2.0) {
        rs->last_flush = now;
        if (session_flush(&rs->w) != ML_OK) report(rs, "flushing live.h5");
    }
}

static ml_status on_checkpoint(Trainer *t, const char *why, void *user) {
    RunSession *rs = user;
    /* the session stopped writing after an error, reported once (and again when the run ends) */
    if (rs->failed) return ML_OK;
    /* live.h5 first: a checkpoint renamed into place never refers to steps the history lacks, so a
     * resume from it (which drops the rows after its step) leaves every row exactly once */
    if (rs->active && session_sync(&rs->w) != ML_OK) {
        report(rs, "flushing live.h5 before a checkpoint");
        return ML_ERR_IO;
    }
    rs->last_flush = ml_now();
    StateView sv;
    trainer_state(t, &sv);
    sv.session_id = rs->session_id;
    /* one checkpoint that cannot be written (a directory of its name, a transient I/O error) is
     * reported by the trainer and skipped: live.h5 and the later checkpoints are still written */
    if (ckpt_write(rs->dir, &sv, rs->keep) != ML_OK) {
        rs->ckpt_failed++;
        rs->ckpt_last_fail = t->step;
        rs->ckpt_last_ok = 0;
        return ML_ERR_IO;
    }
    rs->ckpt_last_ok = 1;
    return ML_OK;
}

static void on_eval(const EvalRecord *r, void *user) {
    RunSession *rs = user;
    if (!rs->active || rs->failed) return;
    if (session_append_eval(&rs->w, r) != ML_OK) {
        report(rs, "writing an evaluation record");
        return;
    }
    rs->last_flush = ml_now();
}

static void on_event(const TrainerEvent *e, void *user) {
    RunSession *rs = user;
    if (rs->notify.cmd) notify_trainer_event(&rs->notify, e);
    if (!e->logged) return;
    const char *from = cmd_origin_name(e->origin);
    if (!from[0] || e->kind != TEV_APPLIED || e->origin == CMD_FROM_RULE) { /* a rule says so in its text */
        runsession_event(user, e->step, e->text);
        return;
    }
    char text[sizeof e->text + 32];
    snprintf(text, sizeof text, "%s  # %s", e->text, from); /* command_parse reads past the comment */
    runsession_event(user, e->step, text);
    /* a command can leave the run waiting (pause): what it has done so far reaches the file now,
     * so that attach, browse and export see the step the run waits at (records are otherwise
     * flushed every 2 s of training) */
    if (rs->active && !rs->failed && session_flush(&rs->w) != ML_OK) report(rs, "flushing live.h5");
}

void runsession_hooks(RunSession *rs, TrainHooks *h) {
    h->on_step = on_step;
    h->on_eval = on_eval;
    h->on_event = on_event;
    h->checkpoint = rs->active ? on_checkpoint : NULL;
    h->ckpt_every = rs->ckpt_every;
    h->ckpt_steps = rs->ckpt_steps;
    h->user = rs;
}

void runsession_event(RunSession *rs, long step, const char *text) {
    if (!rs->active || rs->failed) return;
    if (session_append_event(&rs->w, step, 0.0, text) != ML_OK) report(rs, "writing the event log");
}

void runsession_finish(RunSession *rs, const char *status) {
    if (rs->notify.cmd && status) {
        /* the step the run ended at, not that of the latest step record (every --log-every steps) */
        const long step = rs->trainer && rs->trainer->step > rs->last_step ? rs->trainer->step : rs->last_step;
        if (!strcmp(status, "finished"))
            notify_send(&rs->notify, NOTIFY_FINISHED, step, "the run finished");
        else if (!strcmp(status, "failed"))
            notify_send(&rs->notify, NOTIFY_FAILED, step, "the run failed");
        notify_poll(&rs->notify, 1);
    }
    if (rs->active && session_close(&rs->w, status) != ML_OK && !rs->failed)
        ml_log(1, "session %s: closing live.h5: %s", rs->dir, ml_last_error());
    rs->active = 0;
    session_unlock(&rs->lock); /* after the last write (the final checkpoint came before) */
}

int runsession_restart_advice(const char *dir, char *buf, size_t n) {
    if (n) buf[0] = 0;
    DIR *d = opendir(dir);
    if (!d) return 0;
    int found = 0;
    for (struct dirent *de; !found && (de = readdir(d));) {
        const size_t l = strlen(de->d_name);
        found = l > 8 && !strncmp(de->d_name, "ckpt-", 5) && !strcmp(de->d_name + l - 3, ".h5");
    }
    closedir(d);
    if (found) return 0;
    char *line = NULL;
    const int ranks = runsession_stored_ranks(dir);
    char mpi[48] = "";
    if (ranks > 1) snprintf(mpi, sizeof mpi, "mpirun -np %d ", ranks);
    char live[APP_PATH_MAX + 160], q[2 * sizeof live];
    snprintf(live, sizeof live, "%s/live.h5", dir);
    char *lv[1] = {live};
    command_line_join(q, sizeof q, 1, lv); /* shell-quoted; a new run refuses to write over live.h5 */
    if (session_read_run_attr_alloc(dir, "command_line", &line) == ML_OK && line[0])
        snprintf(buf, n, "no checkpoint was written: start it again with `rm %s && %smoelab %s`", q, mpi, line);
    else snprintf(buf, n, "no checkpoint was written: start it again (its command line is not readable)");
    free(line);
    return 1;
}
