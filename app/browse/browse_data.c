/* browse_data.c — the data side of `moelab browse` that needs no terminal: finding sessions under
 * a folder, their one-line summaries and status, sorting and filtering the list, reading the
 * configuration JSON a session stores (session_config_parse, jansson), and rebuilding the
 * temperature plan in effect at any step (and the list's last plan in force) from the launch
 * schedule and the logged `set tau` / `anneal` commands. Used by the browser screen (browse.c) and by `moelab browse --list`. */
#define _GNU_SOURCE
#include "app/browse/browse.h"
#include "app/cli/commands.h"
#include "app/run/runsession.h"

#include <dirent.h>
#include <errno.h>
#include <float.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <signal.h>
#include <sys/mman.h>

#include "sessions/sweep_h5.h"

// ---------------------------------------------------------------------------------------------
// temperature plan

/* A float field of tau{} into *f when present: 0, or -1 (wrong type, out of float range). */
static int tau_float(const json_t *cfg, const char *path, float *f) {
    double v;
    const int r = session_config_num(cfg, path, -FLT_MAX, FLT_MAX, &v);
    if (r == 1) *f = (float)v;
    return r < 0 ? -1 : 0;
}

static int tau_long(const json_t *cfg, const char *path, long lo, long hi, long *l) {
    return session_config_long(cfg, path, lo, hi, l) < 0 ? -1 : 0;
}

int browse_tau_schedule(const char *config_json, TauSchedule *s) {
    tau_schedule_defaults(s);
    json_t *cfg = session_config_parse(config_json);
    if (!cfg) return -1;
    char kind[24];
    long step_every = s->step_every;
    int r = session_config_str(cfg, "tau.kind", kind, sizeof kind);
    if (r == 0) ml_fail(ML_ERR_FORMAT, "config_json: no tau.kind");
    int bad = r != 1 || tau_parse_kind(kind, &s->kind) != ML_OK;
    bad = bad || tau_float(cfg, "tau.tau0", &s->tau0) || tau_float(cfg, "tau.tau1", &s->tau1) ||
          tau_float(cfg, "tau.tau_min", &s->tau_min) || tau_float(cfg, "tau.s", &s->s) ||
          tau_float(cfg, "tau.c", &s->c) || tau_long(cfg, "tau.step_every", INT_MIN, INT_MAX, &step_every) ||
          tau_float(cfg, "tau.step_gamma", &s->step_gamma) ||
          tau_long(cfg, "tau.start", LONG_MIN, LONG_MAX, &s->start) ||
          tau_long(cfg, "tau.total", LONG_MIN, LONG_MAX, &s->total);
    json_decref(cfg);
    s->step_every = (int)step_every;
    return !bad && tau_validate(s) == ML_OK ? 0 : -1;
}

/* "extend --epochs N (was M)" (`--resume DIR --epochs N`): 1 with N and M. */
static int extend_event(const char *text, int *n, int *was) {
    const size_t l = strlen(RUNSESSION_EXTEND_EVENT);
    return !strncmp(text, RUNSESSION_EXTEND_EVENT " ", l + 1) && sscanf(text + l + 1, "%d (was %d)", n, was) == 2 &&
           *n > 0 && *was > 0;
}

void browse_plan_at_layer(const SessionHistory *h, const TauSchedule *base, long step, const char *layer,
                          TauPlan *plan) {
    tau_plan_init(plan, base);
    /* the run's length as it was at each event: the launch length until an extension */
    long total = h->total_steps;
    int n, was;
    for (long i = 0; i < h->nevents; i++)
        if (extend_event(h->events[i].text, &n, &was) && h->steps_per_epoch > 0) {
            total = (long)was * h->steps_per_epoch;
            break;
        }
    for (long i = 0; i < h->nevents; i++) {
        const SessionEventRow *e = &h->events[i];
        if (e->step > step) break;
        if (extend_event(e->text, &n, &was) && h->steps_per_epoch > 0) { /* as trainer_extend did */
            const long nt = (long)n * h->steps_per_epoch;
            if (plan->base.total == total) plan->base.total = nt;
            if (plan->has_replacement && plan->repl.total == total) plan->repl.total = nt;
            total = nt;
            continue;
        }
        TrainerCmd c;
        char err[128];
        if (command_parse(e->text, &c, err, sizeof err)) continue;                /* resume, snapshot notes... */
        if (layer && c.layer[0] && strcmp(c.layer, layer)) continue;              /* another layer's */
        if (trainer_tau_command(&c)) trainer_tau_apply(plan, &c, e->step, total); /* as the trainer did */
    }
}

void browse_sched_label(const char *launch_kind, const SessionEventRow *ev, long nev, char *out, size_t n) {
    snprintf(out, n, "%s", launch_kind);
    for (long i = 0; i < nev; i++) {
        TrainerCmd c;
        char err[128];
        if (command_parse(ev[i].text, &c, err, sizeof err) || !trainer_tau_command(&c)) continue;
        if (c.layer[0] && strcmp(c.layer, "head")) continue; /* a backbone layer's own plan */
        if (c.kind == CMD_ANNEAL) snprintf(out, n, "%s*", tau_kind_name(c.sched.kind));
        else snprintf(out, n, "tau=%g", c.value);
    }
}

const char *browse_primary_layer(const SessionHistory *h) {
    /* the head when it routes, else the first backbone layer */
    return h->nlayers == 0 ? "head" : h->E > 0 ? h->layer[h->nlayers - 1].name : h->layer[0].name;
}

void browse_plan_at(const SessionHistory *h, const TauSchedule *base, long step, TauPlan *plan) {
    browse_plan_at_layer(h, base, step, browse_primary_layer(h), plan);
}

// ---------------------------------------------------------------------------------------------
// the list

static int entry_add(BrowseList *l, const char *name, const char *path) {
    if (l->n == l->cap) {
        const int cap = l->cap ? 2 * l->cap : 32;
        BrowseEntry *ne = realloc(l->e, sizeof *ne * cap);
        if (!ne) return -1;
        l->e = ne;
        l->cap = cap;
    }
    BrowseEntry *e = &l->e[l->n++];
    memset(e, 0, sizeof *e);
    snprintf(e->name, sizeof e->name, "%.*s", (int)sizeof e->name - 1, name);
    snprintf(e->path, sizeof e->path, "%.*s", (int)sizeof e->path - 1, path);
    return 0;
}

static int file_exists(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
}

/* Session folders (holding live.h5) under dir, `depth` levels down at most. */
static void scan(BrowseList *l, const char *dir, const char *rel, int depth) {
    char p[2048];
    snprintf(p, sizeof p, "%s/live.h5", dir);
    if (file_exists(p)) {
        entry_add(l, rel[0] ? rel : ".", dir);
        return;
    }
    if (depth <= 0) return;
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *de;
    char **names = NULL;
    int n = 0, cap = 0;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.') continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 32;
            char **nn = realloc(names, sizeof *nn * cap);
            if (!nn) break;
            names = nn;
        }
        names[n] = strdup(de->d_name);
        if (names[n]) n++;
    }
    closedir(d);
    for (int i = 0; i < n; i++) {
        char sub[2048], srel[1024];
        struct stat sb;
        snprintf(sub, sizeof sub, "%s/%s", dir, names[i]);
        if (stat(sub, &sb) == 0 && S_ISDIR(sb.st_mode)) {
            if (rel[0]) snprintf(srel, sizeof srel, "%s/%s", rel, names[i]);
            else snprintf(srel, sizeof srel, "%s", names[i]);
            scan(l, sub, srel, depth - 1);
        }
        free(names[i]);
    }
    free(names);
}

// ---------------------------------------------------------------------------------------------
// reading untrusted files in a child process: libhdf5 1.10 can crash (or, in SWMR-read mode,
// retry for a long time) on some corrupted files (tests/fuzz_h5.c found such inputs), and the
// browser must survive any file it is pointed at. The child does the reading and sends the
// result back through shared memory; a crash or a timeout becomes a "damaged" message, in the
// words and with the timeout of session_probe (sessions/probe.c), which also makes the full load
// of an opened session in a child first (browse_probe_history).

/* Fault injection for the tests: a child reading the list's summary of a path that contains
 * $MOELAB_FAULT_READ_CRASH crashes as libhdf5 would on some corrupted files (t_browse.sh; the
 * full load when a session is opened: $MOELAB_FAULT_OPEN_CRASH, in session_probe). */
static void fault_point(const char *var, const char *path) {
    const char *f = getenv(var);
    if (f && *f && strstr(path, f)) raise(SIGSEGV);
}

typedef struct {
    BrowseEntry *e; /* in a shared mapping: the child's result reaches the parent */
    double now;
} EntryArg;

static void entry_read_here(BrowseEntry *e, double now);

static ml_status entry_work(void *arg) {
    EntryArg *a = arg;
    fault_point("MOELAB_FAULT_READ_CRASH", a->e->path);
    entry_read_here(a->e, a->now);
    return ML_OK;
}

void browse_entry_read(BrowseEntry *e, double now) {
    BrowseEntry *shared = mmap(NULL, sizeof *shared, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (shared == MAP_FAILED) {
        entry_read_here(e, now);
        return;
    }
    *shared = *e;
    EntryArg a = {shared, now};
    MlIsolated r;
    const int timeout_ms = session_probe_timeout_ms();
    const ml_isolated_outcome o = ml_run_isolated(entry_work, &a, timeout_ms, &r);
    if (o == ML_ISOLATED_OK) {
        const int marked = e->marked;
        *e = *shared;
        e->marked = marked;
    } else if (o == ML_ISOLATED_NO_CHILD) {
        entry_read_here(e, now);
    } else {
        memset(&e->info, 0, sizeof e->info);
        e->ok = 0;
        e->sched[0] = 0;
        e->conf[0] = 0;
        snprintf(e->status, sizeof e->status, "damaged");
        session_isolated_status(&r, e->path, timeout_ms);
        snprintf(e->err, sizeof e->err, "%s", ml_last_error());
    }
    munmap(shared, sizeof *shared);
}

int browse_probe_history(const char *path, char *err, size_t n) {
    if (session_probe(path, SESSION_PROBE_HISTORY) == ML_OK) return 0; /* the caller's own load says the rest */
    snprintf(err, n, "%s", ml_last_error());
    return -1;
}

/* The configuration's scalars as "path=value" lines into buf (what does not fit is left out). */
static void flatten(const json_t *j, const char *path, char *buf, size_t n, size_t *o) {
    char sub[256], val[128];
    if (json_is_object(j)) {
        const char *k;
        const json_t *v;
        json_object_foreach((json_t *)j, k, v) {
            snprintf(sub, sizeof sub, "%s%s%s", path, *path ? "." : "", k);
            flatten(v, sub, buf, n, o);
        }
        return;
    }
    if (json_is_array(j)) {
        size_t i;
        const json_t *v;
        json_array_foreach((json_t *)j, i, v) {
            snprintf(sub, sizeof sub, "%s.%zu", path, i);
            flatten(v, sub, buf, n, o);
        }
        return;
    }
    if (json_is_string(j)) snprintf(val, sizeof val, "%s", json_string_value(j));
    else if (json_is_integer(j)) snprintf(val, sizeof val, "%lld", (long long)json_integer_value(j));
    else if (json_is_real(j)) snprintf(val, sizeof val, "%.10g", json_real_value(j));
    else if (json_is_boolean(j)) snprintf(val, sizeof val, "%d", json_is_true(j));
    else return;
    for (char *p = val; *p; p++)
        if (*p == '\n' || *p == '=') *p = ' ';
    const int w = snprintf(buf + *o, n - *o, "%s=%s\n", path, val);
    if (w > 0 && *o + (size_t)w < n) *o += (size_t)w;
    else buf[*o] = '\0';
}

static void entry_read_here(BrowseEntry *e, double now) {
    char file[1200];
    struct stat sb;
    if (file_exists(e->path)) snprintf(file, sizeof file, "%s", e->path);
    else snprintf(file, sizeof file, "%s/live.h5", e->path);
    e->mtime = stat(file, &sb) == 0 ? (double)sb.st_mtime : 0;
    e->sched[0] = 0;
    e->conf[0] = 0;
    e->err[0] = 0;
    const ml_status st = session_read_info(e->path, &e->info);
    e->ok = st == ML_OK;
    if (!e->ok) {
        snprintf(e->err, sizeof e->err, "%s", ml_last_error());
        snprintf(e->status, sizeof e->status, "%s",
                 st == ML_ERR_IO                       ? "missing"
                 : strstr(e->err, "this moelab reads") ? "unsupported"
                                                       : "damaged");
        return;
    }
    snprintf(e->status, sizeof e->status, "%s", e->info.status);
    const int held = !strcmp(e->info.status, "running") ? session_lock_held(e->path) : -1;
    /* the advice must be true: a session killed before its first checkpoint has nothing to resume */
    char adv[400] = "";
    if (held == 0 || (held < 0 && !strcmp(e->info.status, "running") && now - e->mtime > BROWSE_STALE_SEC)) {
        char cont[sizeof adv];
        if (!runsession_restart_advice(e->path, cont, sizeof cont))
            snprintf(cont, sizeof cont, "moelab train --resume %.300s continues it", e->path);
        snprintf(adv, sizeof adv, "%s", cont);
    }
    if (held == 0) { /* no writer holds the session's lock: whatever the status says, nothing runs */
        snprintf(e->status, sizeof e->status, "stale");
        snprintf(e->err, sizeof e->err,
                 "status says running but no process holds the session's lock: the writer was killed or crashed "
                 "(%s)",
                 adv);
    } else if (held < 0 && !strcmp(e->info.status, "running") && now - e->mtime > BROWSE_STALE_SEC) {
        snprintf(e->status, sizeof e->status, "stale");
        snprintf(e->err, sizeof e->err,
                 "status says running but nothing was written for %.0f min: the writer was probably "
                 "killed (%s)",
                 (now - e->mtime) / 60.0, adv);
    }
    char *json = malloc(BROWSE_JSON_MAX);
    char launch[24] = "";
    if (json && session_read_run_attr(e->path, "config_json", json, BROWSE_JSON_MAX) == ML_OK) {
        json_t *cfg = session_config_parse(json);
        session_config_str(cfg, "tau.kind", launch, sizeof launch);
        size_t o = 0;
        flatten(cfg, "", e->conf, sizeof e->conf, &o);
        json_decref(cfg);
    }
    free(json);
    snprintf(e->sched, sizeof e->sched, "%s", launch);
    /* the alarm episodes by severity, and the last temperature plan in force, from the event log */
    memset(&e->alarms, 0, sizeof e->alarms);
    e->alarms_ok = 0;
    SessionEventRow *ev = NULL;
    long nev = 0;
    if (session_read_events(e->path, &ev, &nev) == ML_OK) {
        for (long i = 0; i < nev; i++) alarm_count_event(&e->alarms, ev[i].text);
        e->alarms_ok = 1;
        if (launch[0]) browse_sched_label(launch, ev, nev, e->sched, sizeof e->sched);
    }
    free(ev);
}

int browse_list_scan(BrowseList *l, const char *root) {
    l->n = 0;
    const size_t rl = strlen(root);
    if (rl > 3 && !strcmp(root + rl - 3, ".h5") && file_exists(root)) {
        /* a sweep summary: its runs, relative to the sweep's folder */
        SweepSummary s;
        if (sweep_h5_read(root, &s) != ML_OK) return -1;
        char dir[1024];
        snprintf(dir, sizeof dir, "%s", root);
        char *slash = strrchr(dir, '/');
        if (slash) *slash = 0;
        else snprintf(dir, sizeof dir, ".");
        for (int i = 0; i < s.nruns; i++) {
            char p[2048];
            snprintf(p, sizeof p, "%s/%s", dir, s.runs[i].name);
            entry_add(l, s.runs[i].name, p);
        }
        sweep_summary_free(&s);
    } else {
        struct stat sb;
        errno = 0;
        if (stat(root, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
            ml_fail(ML_ERR_IO, "%s: %s", root, errno ? strerror(errno) : "not a folder");
            return -1;
        }
        scan(l, root, "", 4);
    }
    const double now = (double)time(NULL);
    for (int i = 0; i < l->n; i++) browse_entry_read(&l->e[i], now);
    return 0;
}

void browse_list_free(BrowseList *l) {
    free(l->e);
    memset(l, 0, sizeof *l);
}

static const char *const col_names[BCOL_COUNT] = {"name", "dataset", "head",   "experts", "schedule", "best",
                                                  "last", "epochs",  "status", "alarms",  "created"};

const char *browse_col_name(int c) { return c >= 0 && c < BCOL_COUNT ? col_names[c] : "?"; }

int browse_col_parse(const char *s) {
    for (int c = 0; c < BCOL_COUNT; c++)
        if (!strcasecmp(s, col_names[c])) return c;
    return -1;
}

static int cmp_num(double a, double b) {
    /* NaN (no evaluation) sorts last */
    if (isnan(a) || isnan(b)) return isnan(a) - isnan(b);
    return (a > b) - (a < b);
}

int browse_entry_cmp(const BrowseEntry *a, const BrowseEntry *b, int col) {
    int r = 0;
    switch (col) {
    case BCOL_DATASET: r = strcmp(a->info.dataset, b->info.dataset); break;
    case BCOL_HEAD: r = strcmp(a->info.head, b->info.head); break;
    case BCOL_EXPERTS:
        r = (a->info.experts > b->info.experts) - (a->info.experts < b->info.experts);
        if (!r) r = (a->info.k > b->info.k) - (a->info.k < b->info.k);
        if (!r) r = (a->info.hidden > b->info.hidden) - (a->info.hidden < b->info.hidden);
        break;
    case BCOL_SCHED: r = strcmp(a->sched, b->sched); break;
    case BCOL_BEST: r = cmp_num(a->ok ? a->info.best_test_acc : NAN, b->ok ? b->info.best_test_acc : NAN); break;
    case BCOL_LAST: r = cmp_num(a->ok ? a->info.last_test_acc : NAN, b->ok ? b->info.last_test_acc : NAN); break;
    case BCOL_EPOCHS: r = (a->info.last_epoch > b->info.last_epoch) - (a->info.last_epoch < b->info.last_epoch); break;
    case BCOL_STATUS: r = strcmp(a->status, b->status); break;
    case BCOL_ALARMS: {
        const int x[3] = {a->alarms.collapse, a->alarms.warning, a->alarms.death};
        const int y[3] = {b->alarms.collapse, b->alarms.warning, b->alarms.death};
        for (int i = 0; i < 3 && !r; i++) r = (x[i] > y[i]) - (x[i] < y[i]);
        break;
    }
    case BCOL_CREATED: r = strcmp(a->info.created, b->info.created); break;
    default: break;
    }
    return r ? r : strcmp(a->name, b->name);
}

static int g_sort_col, g_sort_rev;
/* 1 if the entry has no value in the column (unreadable, or no evaluation for accuracies):
 * such entries go last in either direction. */
int browse_missing(const BrowseEntry *e, int col) {
    if (col == BCOL_NAME || col == BCOL_STATUS) return 0;
    if (!e->ok) return 1;
    if (col == BCOL_BEST) return isnan(e->info.best_test_acc);
    if (col == BCOL_LAST) return isnan(e->info.last_test_acc);
    if (col == BCOL_ALARMS) return !e->alarms_ok;
    return 0;
}

static int qcmp(const void *x, const void *y) {
    const int ma = browse_missing(x, g_sort_col), mb = browse_missing(y, g_sort_col);
    if (ma != mb) return ma - mb;
    const int r = browse_entry_cmp(x, y, g_sort_col);
    return g_sort_rev && !ma ? -r : r;
}

void browse_list_sort(BrowseList *l, int col, int reverse) {
    g_sort_col = col;
    g_sort_rev = reverse;
    if (l->n > 1) qsort(l->e, l->n, sizeof *l->e, qcmp);
}

/* Two configuration values: the same text (any case), or the same number. */
static int conf_value_eq(const char *a, size_t an, const char *b) {
    if (strlen(b) == an && !strncasecmp(a, b, an)) return 1;
    char x[128], *ea, *eb;
    if (an == 0 || an >= sizeof x) return 0;
    memcpy(x, a, an);
    x[an] = 0;
    const double va = strtod(x, &ea), vb = strtod(b, &eb);
    return *b && !*ea && !*eb && va == vb;
}

/* The configuration holds value v (key NULL: under any key; else under key or a path ending in ".key"). */
static int conf_has(const char *conf, const char *key, size_t keyn, const char *v) {
    for (const char *line = conf; *line;) {
        const char *eq = strchr(line, '='), *nl = strchr(line, '\n');
        if (!eq || !nl) break;
        if (eq < nl) {
            const size_t pn = (size_t)(eq - line);
            const int key_ok = !key || (pn == keyn && !strncasecmp(line, key, keyn)) ||
                               (pn > keyn && line[pn - keyn - 1] == '.' && !strncasecmp(line + pn - keyn, key, keyn));
            if (key_ok && conf_value_eq(eq + 1, (size_t)(nl - eq - 1), v)) return 1;
        }
        line = nl + 1;
    }
    return 0;
}

int browse_entry_match(const BrowseEntry *e, const char *filter) {
    if (!filter) return 1;
    const int invert = filter[0] == '!';
    filter += invert;
    if (!*filter) return 1;
    char ekh[48];
    snprintf(ekh, sizeof ekh, "E%d k%d h%d", e->info.experts, e->info.k, e->info.hidden);
    const char *fields[] = {e->name, e->info.dataset, e->info.head, e->sched, e->status, ekh};
    int hit = 0;
    for (size_t i = 0; i < sizeof fields / sizeof fields[0] && !hit; i++) hit = strcasestr(fields[i], filter) != NULL;
    const char *eq = strchr(filter, '=');
    if (!hit && eq && eq > filter) hit = conf_has(e->conf, filter, (size_t)(eq - filter), eq + 1);
    else if (!hit && !eq) hit = conf_has(e->conf, NULL, 0, filter);
    return hit != invert;
}

void browse_entry_cells(const BrowseEntry *e, char cells[BCOL_COUNT][64]) {
    for (int c = 0; c < BCOL_COUNT; c++) cells[c][0] = 0;
    snprintf(cells[BCOL_NAME], 64, "%.63s", e->name);
    snprintf(cells[BCOL_STATUS], 64, "%s", e->status);
    if (!e->ok) return;
    const SessionInfo *i = &e->info;
    snprintf(cells[BCOL_DATASET], 64, "%s", i->dataset);
    snprintf(cells[BCOL_HEAD], 64, "%s", i->head);
    if (i->experts > 0) snprintf(cells[BCOL_EXPERTS], 64, "%d/%d/%d", i->experts, i->k, i->hidden);
    else snprintf(cells[BCOL_EXPERTS], 64, "-/%d/%d", i->k, i->hidden);
    snprintf(cells[BCOL_SCHED], 64, "%s", i->experts > 0 ? e->sched : "-");
    if (isfinite(i->best_test_acc)) snprintf(cells[BCOL_BEST], 64, "%.2f", 100.0 * i->best_test_acc);
    else snprintf(cells[BCOL_BEST], 64, "-");
    if (isfinite(i->last_test_acc)) snprintf(cells[BCOL_LAST], 64, "%.2f", 100.0 * i->last_test_acc);
    else snprintf(cells[BCOL_LAST], 64, "-");
    snprintf(cells[BCOL_EPOCHS], 64, "%d/%d", i->last_epoch, i->epochs);
    if (e->alarms_ok) alarm_counts_text(&e->alarms, cells[BCOL_ALARMS], 64);
    else snprintf(cells[BCOL_ALARMS], 64, "?");
    snprintf(cells[BCOL_CREATED], 64, "%.16s", i->created);
    for (char *p = cells[BCOL_CREATED]; *p; p++)
        if (*p == 'T') *p = ' ';
}
