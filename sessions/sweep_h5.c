/* sweep_h5.c — see sweep_h5.h. The summary file is small (one row per configuration and per
 * run), so it is plain HDF5 (no SWMR, no chunking): a column table under /configs and one under
 * /runs, each column a 1-D dataset with a `description` attribute, written to a temporary file
 * and renamed so that readers never see half a summary. */
#define _POSIX_C_SOURCE 200809L

#include "sweep_h5.h"
#include "h5util.h"
#include "schema.h"
#include "session.h"
#include "core/records.h"
#include "core/routestats.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#define SWEEP_KIND "moelab sweep"

/* ------------------------------------------------------------------ column tables */

typedef enum { COL_INT, COL_LONG, COL_U64, COL_F64 } ColType;
typedef struct {
    const char *name;
    ColType type;
    size_t off;
    const char *desc;
    int optional; /* added after the first release: a file without it reads NaN / -2 */
} Col;

static const Col config_cols[] = {
    {"n", COL_INT, offsetof(SweepConfig, n), "finished runs (seeds) summarised", 0},
    {"n_expected", COL_INT, offsetof(SweepConfig, n_expected), "runs in the grid (--seeds)", 0},
    {"baseline", COL_INT, offsetof(SweepConfig, baseline), "row of the matching dense configuration (-1: none)", 0},
    {"final_mean", COL_F64, offsetof(SweepConfig, final_mean), "mean final test accuracy (fraction)", 0},
    {"final_sd", COL_F64, offsetof(SweepConfig, final_sd), "sample sd of the final test accuracy", 0},
    {"best_mean", COL_F64, offsetof(SweepConfig, best_mean), "mean best test accuracy over evaluations", 0},
    {"best_sd", COL_F64, offsetof(SweepConfig, best_sd), "sample sd of the best test accuracy", 0},
    {"rho_nominal", COL_F64, offsetof(SweepConfig, rho_nominal), "nominal routed-FLOP fraction", 0},
    {"rho_realized", COL_F64, offsetof(SweepConfig, rho_realized), "mean realized rho (kept pairs, last epoch)", 0},
    {"gap", COL_F64, offsetof(SweepConfig, gap), "final_mean - final_mean of the baseline", 0},
    {"gap_ci_lo", COL_F64, offsetof(SweepConfig, gap_lo), "95% Welch confidence interval of gap, low", 0},
    {"gap_ci_hi", COL_F64, offsetof(SweepConfig, gap_hi), "95% Welch confidence interval of gap, high", 0},
    {"gap_df", COL_F64, offsetof(SweepConfig, gap_df), "Welch-Satterthwaite degrees of freedom", 0},
    {"cohen_d", COL_F64, offsetof(SweepConfig, cohen_d), "Cohen's d, pooled sd", 0},
    {"hedges_g", COL_F64, offsetof(SweepConfig, hedges_g), "Hedges' g = d (1 - 3 / (4 (n1 + n2) - 9))", 0},
    {"seconds", COL_F64, offsetof(SweepConfig, seconds), "mean training time of a run (s)", 0},
    {"clean_share", COL_F64, offsetof(SweepConfig, clean_share), "mean clean-router largest first-choice share", 1},
    {"test_share", COL_F64, offsetof(SweepConfig, test_share), "mean test-set largest first-choice share", 1},
    {"collapsed", COL_INT, offsetof(SweepConfig, collapsed), "finished runs collapsed at the end (any view)", 1},
    {"collapse_step", COL_F64, offsetof(SweepConfig, collapse_step), "mean onset of those collapses (step)", 1},
    {"peak_gap", COL_F64, offsetof(SweepConfig, peak_gap), "best_mean - best_mean of the baseline", 1},
    {"peak_gap_ci_lo", COL_F64, offsetof(SweepConfig, peak_gap_lo), "95% Welch CI of peak_gap, low", 1},
    {"peak_gap_ci_hi", COL_F64, offsetof(SweepConfig, peak_gap_hi), "95% Welch CI of peak_gap, high", 1},
};
#define N_CONFIG_COLS (int)(sizeof config_cols / sizeof config_cols[0])

static const Col run_cols[] = {
    {"index", COL_INT, offsetof(SweepRun, index), "position in the run grid", 0},
    {"config", COL_INT, offsetof(SweepRun, config), "row of its configuration in /configs", 0},
    {"seed", COL_U64, offsetof(SweepRun, seed), "--seed of the run", 0},
    {"steps", COL_LONG, offsetof(SweepRun, steps), "steps completed", 0},
    {"last_epoch", COL_INT, offsetof(SweepRun, last_epoch), "epoch of the last evaluation", 0},
    {"best_epoch", COL_INT, offsetof(SweepRun, best_epoch), "epoch of the best evaluation", 0},
    {"final_acc", COL_F64, offsetof(SweepRun, final_acc), "test accuracy of the last evaluation", 0},
    {"best_acc", COL_F64, offsetof(SweepRun, best_acc), "best test accuracy over evaluations", 0},
    {"rho_nominal", COL_F64, offsetof(SweepRun, rho_nominal), "nominal routed-FLOP fraction", 0},
    {"rho_realized", COL_F64, offsetof(SweepRun, rho_realized), "realized rho, mean over the last epoch", 0},
    {"seconds", COL_F64, offsetof(SweepRun, seconds), "training time (s)", 0},
    {"clean_share", COL_F64, offsetof(SweepRun, clean_share), "clean-router largest first-choice share (last step)", 1},
    {"test_share", COL_F64, offsetof(SweepRun, test_share), "test-set largest first-choice share (last evaluation)", 1},
    {"collapse_step", COL_LONG, offsetof(SweepRun, collapse_step),
     "onset of the collapse flagged at the end (-1: none)", 1},
    {"collapse_first", COL_LONG, offsetof(SweepRun, collapse_first),
     "first step a collapse view was flagged (-1: never)", 1},
    {"collapse_views", COL_INT, offsetof(SweepRun, collapse_views), "views ever flagged: 1 training, 2 clean, 4 eval",
     1},
    {"collapse_episodes", COL_INT, offsetof(SweepRun, collapse_episodes), "collapse events in the event log", 1},
    {"warning_episodes", COL_INT, offsetof(SweepRun, warning_episodes),
     "warning events in the event log (the clean router alone concentrates, or an idle router)", 1},
    {"expert_deaths", COL_INT, offsetof(SweepRun, expert_deaths), "expert death events in the event log", 1},
};
#define N_RUN_COLS (int)(sizeof run_cols / sizeof run_cols[0])

/* ------------------------------------------------------------------ per-run reader */

static long rows_or_zero(hid_t f, const char *name) {
    if (H5Lexists(f, name, H5P_DEFAULT) <= 0) {
        H5Eclear2(H5E_DEFAULT);
        return 0;
    }
    hid_t d = H5Dopen2(f, name, H5P_DEFAULT);
    if (d < 0) {
        H5Eclear2(H5E_DEFAULT);
        return 0;
    }
    const long r = sess_rows(d);
    H5Dclose(d);
    return r < 0 ? 0 : r;
}

static double last_row(hid_t f, const char *name, long rows, const char *path, ml_status *st) {
    double *v = NULL, x = NAN;
    if (*st != ML_OK || rows <= 0) return NAN;
    *st = sess_read_rows(f, name, (hsize_t)rows, H5T_NATIVE_DOUBLE, (void **)&v, path);
    if (*st == ML_OK) x = v[rows - 1];
    ml_free(v);
    return x;
}

ml_status sweep_h5_read_run(const char *session_dir, double *rho_nominal, double *rho_realized, double *seconds,
                            long *steps) {
    h5u_quiet();
    *rho_nominal = *rho_realized = *seconds = NAN;
    *steps = 0;
    char path[H5U_PATH_MAX];
    hid_t f;
    ml_status st = sess_open_read(session_dir, &f, path, sizeof path);
    if (st != ML_OK) return st;
    hid_t run = H5Gopen2(f, "run", H5P_DEFAULT);
    if (run < 0) st = h5u_fail(ML_ERR_FORMAT, path, "/run", "cannot open group");
    else st = h5u_read_attr_f64(run, "rho_nominal", rho_nominal, path);
    h5u_close(run);
    long n = rows_or_zero(f, "/evals/epoch");
    const long a = rows_or_zero(f, "/evals/train_rho_realized"), b = rows_or_zero(f, "/evals/elapsed"),
               c = rows_or_zero(f, "/evals/step");
    if (a < n) n = a;
    if (b < n) n = b;
    if (c < n) n = c;
    *rho_realized = last_row(f, "/evals/train_rho_realized", n, path, &st);
    *seconds = last_row(f, "/evals/elapsed", n, path, &st);
    const double sv = last_row(f, "/evals/step", n, path, &st);
    if (!isnan(sv)) *steps = (long)sv;
    H5Fclose(f);
    H5Eclear2(H5E_DEFAULT);
    return st;
}

ml_status sweep_h5_read_routing(const char *session_dir, SweepRun *row) {
    h5u_quiet();
    row->clean_share = row->test_share = NAN;
    row->collapse_step = row->collapse_first = -2;
    row->collapse_views = row->collapse_episodes = -2;
    row->warning_episodes = row->expert_deaths = -2;
    char path[H5U_PATH_MAX];
    hid_t f;
    ml_status st = sess_open_read(session_dir, &f, path, sizeof path);
    if (st != ML_OK) return st;
    const long ns = rows_or_zero(f, "/steps/clean_first_share"), ne = rows_or_zero(f, "/evals/test_first_share");
    const long nev = rows_or_zero(f, "/evals/epoch");
    row->clean_share = last_row(f, "/steps/clean_first_share", ns, path, &st);
    row->test_share = last_row(f, "/evals/test_first_share", ne < nev ? ne : nev, path, &st);
    const long nc = rows_or_zero(f, "/evals/collapsed");
    const double end_collapsed = last_row(f, "/evals/collapsed", nc < nev ? nc : nev, path, &st);
    H5Fclose(f);
    H5Eclear2(H5E_DEFAULT);
    if (st != ML_OK) return st;
    /* the alarm events (core/records.h alarm_count_event): "collapse at step N (VIEW view, ...)",
     * "warning at step N (...)", "expert death at step N (...)" */
    SessionEventRow *ev = NULL;
    long n = 0;
    if ((st = session_read_events(session_dir, &ev, &n)) != ML_OK) return st;
    row->collapse_step = row->collapse_first = -1;
    row->collapse_views = 0;
    long last = -1;
    AlarmCounts counts;
    memset(&counts, 0, sizeof counts);
    static const char *const views[3] = {"(training view", "(clean router view", "(evaluation view"};
    for (long i = 0; i < n; i++) {
        long at;
        if (alarm_count_event(&counts, ev[i].text) != ALARM_COLLAPSE) continue;
        if (sscanf(ev[i].text, "collapse at step %ld", &at) != 1) continue;
        if (row->collapse_first < 0 || at < row->collapse_first) row->collapse_first = at;
        if (at > last) last = at;
        for (int v = 0; v < 3; v++)
            if (strstr(ev[i].text, views[v])) row->collapse_views |= 1 << v;
    }
    free(ev);
    row->collapse_episodes = counts.collapse;
    row->warning_episodes = counts.warning;
    row->expert_deaths = counts.death;
    if (end_collapsed > 0) row->collapse_step = last;
    return ML_OK;
}

/* The alarm episodes of configuration c's finished runs summed by severity: "3C 2W 1D", "-" for none;
 * "?" marks counts that are unknown (a sweep.h5 written before the warning and death columns). */
void sweep_config_alarms(const SweepSummary *s, int c, char *buf, size_t n) {
    AlarmCounts a;
    memset(&a, 0, sizeof a);
    int unknown = 0;
    for (int r = 0; r < s->nruns; r++) {
        const SweepRun *w = &s->runs[r];
        if (w->config != c || strcmp(w->status, "finished")) continue;
        unknown |= w->collapse_episodes < 0 || w->warning_episodes < 0 || w->expert_deaths < 0;
        if (w->collapse_episodes > 0) a.collapse += w->collapse_episodes;
        if (w->warning_episodes > 0) a.warning += w->warning_episodes;
        if (w->expert_deaths > 0) a.death += w->expert_deaths;
    }
    char t[40];
    alarm_counts_text(&a, t, sizeof t);
    if (!unknown) snprintf(buf, n, "%s", t);
    else if (!strcmp(t, "-")) snprintf(buf, n, "?");
    else snprintf(buf, n, "%s ?", t);
}

/* ------------------------------------------------------------------ writer */

static ml_status describe(hid_t loc, const char *name, const char *desc, const char *file) {
    hid_t d = H5Dopen2(loc, name, H5P_DEFAULT);
    if (d < 0) return h5u_fail(ML_ERR_IO, file, name, "cannot reopen dataset");
    const ml_status st = h5u_attr_str(d, "description", desc, file);
    H5Dclose(d);
    return st;
}

/* The checksum of n strings: CRC-32 of each one with its NUL, in order (the same whether they
 * come from pointers, v[i * stride], or as read back). */
static uint32_t strings_crc(const char *const *v, size_t stride, int n) {
    uint32_t c = h5u_crc32(0, NULL, 0);
    for (int i = 0; i < n; i++) c = h5u_crc32(c, v[(size_t)i * stride], strlen(v[(size_t)i * stride]) + 1);
    return c;
}

/* A (n,) fixed-length string dataset from n pointers (length: the longest + 1). */
static ml_status write_strings(hid_t loc, const char *name, const char *const *v, size_t stride_ptrs, int n,
                               const char *desc, const char *file) {
    size_t len = 1;
    for (int i = 0; i < n; i++) {
        const size_t l = strlen(v[(size_t)i * stride_ptrs]) + 1;
        if (l > len) len = l;
    }
    char *buf = calloc(n > 0 ? (size_t)n : 1, len);
    hid_t t = h5u_str_type(len);
    ml_status st = ML_OK;
    if (!buf || t < 0) st = ml_fail(ML_ERR_NOMEM, "%s: %s: out of memory", file, name);
    else {
        for (int i = 0; i < n; i++)
            memcpy(buf + (size_t)i * len, v[(size_t)i * stride_ptrs], strlen(v[(size_t)i * stride_ptrs]));
        const hsize_t dims[1] = {(hsize_t)n};
        st = h5u_write(loc, name, t, t, 1, dims, buf, file);
        if (st == ML_OK && desc) st = describe(loc, name, desc, file);
        if (st == ML_OK) st = h5u_set_crc(loc, name, strings_crc(v, stride_ptrs, n), file);
    }
    h5u_close(t);
    free(buf);
    return st;
}

/* The numeric columns of n records of `size` bytes at `base`. */
static ml_status write_cols(hid_t loc, const char *group, const Col *cols, int ncols, const void *base, size_t size,
                            int n, const char *file) {
    double *dv = malloc(sizeof(double) * (n > 0 ? (size_t)n : 1));
    int64_t *iv = malloc(sizeof(int64_t) * (n > 0 ? (size_t)n : 1));
    ml_status st = (dv && iv) ? ML_OK : ml_fail(ML_ERR_NOMEM, "%s: out of memory", file);
    const hsize_t dims[1] = {(hsize_t)n};
    for (int c = 0; c < ncols && st == ML_OK; c++) {
        char name[128];
        snprintf(name, sizeof name, "%s/%s", group, cols[c].name);
        for (int i = 0; i < n; i++) {
            const char *p = (const char *)base + (size_t)i * size + cols[c].off;
            switch (cols[c].type) {
            case COL_INT: {
                int x;
                memcpy(&x, p, sizeof x);
                iv[i] = x;
                break;
            }
            case COL_LONG: {
                long x;
                memcpy(&x, p, sizeof x);
                iv[i] = x;
                break;
            }
            case COL_U64: {
                uint64_t x;
                memcpy(&x, p, sizeof x);
                iv[i] = (int64_t)x;
                break;
            }
            case COL_F64: memcpy(&dv[i], p, sizeof(double)); break;
            }
        }
        if (cols[c].type == COL_F64) st = h5u_write(loc, name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, 1, dims, dv, file);
        else st = h5u_write(loc, name, H5T_STD_I64LE, H5T_NATIVE_INT64, 1, dims, iv, file);
        if (st == ML_OK) st = describe(loc, name, cols[c].desc, file);
        if (st == ML_OK) /* the values in native layout, as a reader gets them back */
            st = h5u_set_crc(loc, name,
                             h5u_crc32(h5u_crc32(0, NULL, 0), cols[c].type == COL_F64 ? (const void *)dv : (const void *)iv,
                                       (size_t)n * 8),
                             file);
    }
    free(dv);
    free(iv);
    return st;
}

static ml_status write_all(hid_t f, const SweepSummary *s, const char *file) {
    char created[40];
    h5u_iso_time(created, sizeof created);
    ml_status st = h5u_attr_i64(f, "format_version", SWEEP_FORMAT_VERSION, file);
    if (st == ML_OK) st = h5u_attr_str(f, "kind", SWEEP_KIND, file);
    if (st == ML_OK) st = h5u_attr_str(f, "moelab_version", MOELAB_VERSION, file);
    if (st == ML_OK) st = h5u_attr_str(f, "created", created, file);
    if (st == ML_OK) st = h5u_attr_str(f, "args", s->args ? s->args : "", file);
    if (st == ML_OK) st = h5u_attr_i64(f, "seeds", s->seeds, file);
    if (st == ML_OK) st = h5u_attr_f64(f, "ci_level", s->ci_level, file);
    if (st == ML_OK) st = h5u_attr_str(f, "metric", "final test accuracy", file);
    /* every dataset carries @crc32; a reader of a file that says so requires them */
    if (st == ML_OK) st = h5u_attr_str(f, "checksums", "crc32", file);
    if (st == ML_OK)
        st = write_strings(f, "axes", (const char *const *)s->axes, 1, s->naxes, "swept option names, in --vary order",
                           file);
    /* /configs */
    const char **lab = malloc(sizeof(char *) * (size_t)(s->nconfigs + 1) * 2);
    if (!lab) return ml_fail(ML_ERR_NOMEM, "%s: out of memory", file);
    for (int i = 0; i < s->nconfigs; i++) {
        lab[2 * i] = s->configs[i].label;
        lab[2 * i + 1] = s->configs[i].head;
    }
    if (st == ML_OK)
        st = write_strings(f, "configs/label", lab, 2, s->nconfigs, "axis=value list of the configuration", file);
    if (st == ML_OK) st = write_strings(f, "configs/head", lab + 1, 2, s->nconfigs, "head kind", file);
    free(lab);
    for (int a = 0; a < s->naxes && st == ML_OK; a++) {
        char name[160], desc[160];
        snprintf(name, sizeof name, "configs/axis/%s", s->axes[a]);
        snprintf(desc, sizeof desc, "value of --%s", s->axes[a]);
        st = write_strings(f, name, (const char *const *)s->values + a, (size_t)s->naxes, s->nconfigs, desc, file);
    }
    if (st == ML_OK)
        st = write_cols(f, "configs", config_cols, N_CONFIG_COLS, s->configs, sizeof(SweepConfig), s->nconfigs, file);
    /* /runs */
    const char **rn = malloc(sizeof(char *) * (size_t)(s->nruns + 1) * 2);
    if (!rn) return ml_fail(ML_ERR_NOMEM, "%s: out of memory", file);
    for (int i = 0; i < s->nruns; i++) {
        rn[2 * i] = s->runs[i].name;
        rn[2 * i + 1] = s->runs[i].status;
    }
    if (st == ML_OK)
        st = write_strings(f, "runs/name", rn, 2, s->nruns, "session folder, relative to the sweep folder", file);
    if (st == ML_OK)
        st = write_strings(f, "runs/status", rn + 1, 2, s->nruns,
                           "finished, interrupted, failed, running, missing or mismatch", file);
    free(rn);
    if (st == ML_OK) st = write_cols(f, "runs", run_cols, N_RUN_COLS, s->runs, sizeof(SweepRun), s->nruns, file);
    return st;
}

ml_status sweep_h5_write(const char *path, const SweepSummary *s) {
    h5u_quiet();
    char tmp[H5U_PATH_MAX];
    if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp)
        return ml_fail(ML_ERR_ARG, "%s: path too long", path);
    hid_t fapl = h5u_fapl_latest();
    hid_t f = fapl >= 0 ? H5Fcreate(tmp, H5F_ACC_TRUNC, H5P_DEFAULT, fapl) : -1;
    h5u_close(fapl);
    if (f < 0) return h5u_fail(ML_ERR_IO, tmp, "", "cannot create");
    ml_status st = write_all(f, s, tmp);
    if (H5Fclose(f) < 0 && st == ML_OK) st = h5u_fail(ML_ERR_IO, tmp, "", "cannot close");
    H5Eclear2(H5E_DEFAULT);
    if (st == ML_OK) st = h5u_fsync_path(tmp, 0);
    if (st == ML_OK && rename(tmp, path) != 0)
        st = ml_fail(ML_ERR_IO, "%s: cannot rename to %s: %s", tmp, path, strerror(errno));
    if (st != ML_OK) unlink(tmp);
    return st;
}

/* ------------------------------------------------------------------ reader */

void sweep_summary_free(SweepSummary *s) {
    free(s->args);
    for (int i = 0; s->axes && i < s->naxes; i++) free(s->axes[i]);
    free(s->axes);
    for (long i = 0; s->values && i < (long)s->nconfigs * s->naxes; i++) free(s->values[i]);
    free(s->values);
    free(s->configs);
    free(s->runs);
    memset(s, 0, sizeof *s);
}

static long rows_of(hid_t f, const char *name, const char *path, ml_status *st) {
    if (*st != ML_OK) return 0;
    if (H5Lexists(f, name, H5P_DEFAULT) <= 0) {
        H5Eclear2(H5E_DEFAULT);
        *st = ml_fail(ML_ERR_FORMAT, "%s: dataset %s is missing", path, name);
        return 0;
    }
    hid_t d = H5Dopen2(f, name, H5P_DEFAULT);
    hsize_t dims[4];
    const int r = d >= 0 ? h5u_dims(d, dims, 4, 0) : -1;
    h5u_close(d);
    if (r != 1 || dims[0] > 10000000) {
        *st = ml_fail(ML_ERR_FORMAT, "%s: %s is not a column", path, name);
        return 0;
    }
    return (long)dims[0];
}

/* Strings of a (n,) dataset into malloc'd copies in out[i * stride] (n must match). */
/* Checksums of the file being read: required (the file says it has them), and how many datasets
 * had none (a file from before checksums). */
typedef struct {
    int required, missing;
} Crc;

static ml_status crc_check(hid_t f, const char *name, uint32_t crc, Crc *cs, const char *path) {
    int had = 0;
    const ml_status st = h5u_check_crc(f, name, crc, cs->required, &had, path);
    if (st == ML_OK && !had) cs->missing++;
    return st;
}

static ml_status read_strings(hid_t f, const char *name, long n, char **out, size_t stride, char *fixed, size_t fixed_n,
                              Crc *cs, const char *path) {
    char **v = NULL;
    int cnt = 0;
    ml_status st = sess_read_strings(f, name, &v, &cnt, path);
    if (st == ML_OK && cnt != n) st = ml_fail(ML_ERR_FORMAT, "%s: %s has %d rows, expected %ld", path, name, cnt, n);
    if (st == ML_OK) st = crc_check(f, name, strings_crc((const char *const *)v, 1, cnt), cs, path);
    for (long i = 0; st == ML_OK && i < n; i++) {
        if (out) {
            out[i * stride] = strdup(v[i]);
            if (!out[i * stride]) st = ml_fail(ML_ERR_NOMEM, "%s: out of memory", path);
        } else {
            snprintf(fixed + i * stride, fixed_n, "%s", v[i]);
        }
    }
    ml_free(v);
    return st;
}

static ml_status read_cols(hid_t f, const char *group, const Col *cols, int ncols, void *base, size_t size, long n,
                           Crc *cs, const char *path) {
    ml_status st = ML_OK;
    for (int c = 0; c < ncols && st == ML_OK; c++) {
        char name[128];
        snprintf(name, sizeof name, "/%s/%s", group, cols[c].name);
        void *buf = NULL;
        if (cols[c].optional && H5Lexists(f, name, H5P_DEFAULT) <= 0) { /* an older sweep.h5 */
            H5Eclear2(H5E_DEFAULT);
            for (long i = 0; i < n; i++) {
                char *p = (char *)base + (size_t)i * size + cols[c].off;
                const double nan = NAN;
                const int mi = -2;
                const long ml = -2;
                if (cols[c].type == COL_F64) memcpy(p, &nan, sizeof nan);
                else if (cols[c].type == COL_INT) memcpy(p, &mi, sizeof mi);
                else if (cols[c].type == COL_LONG) memcpy(p, &ml, sizeof ml);
            }
            continue;
        }
        const int isf = cols[c].type == COL_F64;
        if (rows_of(f, name, path, &st) != n && st == ML_OK)
            st = ml_fail(ML_ERR_FORMAT, "%s: %s does not have %ld rows", path, name, n);
        if (st == ML_OK && n > 0)
            st = sess_read_rows(f, name, (hsize_t)n, isf ? H5T_NATIVE_DOUBLE : H5T_NATIVE_INT64, &buf, path);
        if (st == ML_OK)
            st = crc_check(f, name, h5u_crc32(h5u_crc32(0, NULL, 0), buf, buf ? (size_t)n * 8 : 0), cs, path);
        for (long i = 0; st == ML_OK && i < n; i++) {
            char *p = (char *)base + (size_t)i * size + cols[c].off;
            const int64_t x = isf ? 0 : ((int64_t *)buf)[i];
            switch (cols[c].type) {
            case COL_INT: {
                if (x < INT_MIN || x > INT_MAX) { /* never written so: a damaged value, not one cut to 32 bits */
                    st = ml_fail(ML_ERR_FORMAT, "%s: %s row %ld is %lld, beyond int (damaged?)", path, name, i,
                                 (long long)x);
                    break;
                }
                int y = (int)x;
                memcpy(p, &y, sizeof y);
                break;
            }
            case COL_LONG: {
                long y = (long)x;
                memcpy(p, &y, sizeof y);
                break;
            }
            case COL_U64: {
                uint64_t y = (uint64_t)x;
                memcpy(p, &y, sizeof y);
                break;
            }
            case COL_F64: memcpy(p, (double *)buf + i, sizeof(double)); break;
            }
        }
        ml_free(buf);
    }
    return st;
}

ml_status sweep_h5_read(const char *path, SweepSummary *s) {
    h5u_quiet();
    memset(s, 0, sizeof *s);
    /* stat first: H5Fis_hdf5 opens the file, which blocks forever on a FIFO with no writer */
    struct stat sb;
    if (stat(path, &sb) != 0) return ml_fail(ML_ERR_IO, "%s: %s", path, strerror(errno));
    if (!S_ISREG(sb.st_mode))
        return ml_fail(ML_ERR_IO, "%s: not a regular file (%s); a sweep summary is an HDF5 file written by moelab sweep",
                       path, S_ISDIR(sb.st_mode) ? "a directory" : S_ISFIFO(sb.st_mode) ? "a FIFO"
                                                 : S_ISSOCK(sb.st_mode) ? "a socket" : "a device");
    if (access(path, R_OK) != 0) return ml_fail(ML_ERR_IO, "%s: %s", path, strerror(errno));
    if (H5Fis_hdf5(path) <= 0) {
        H5Eclear2(H5E_DEFAULT);
        return ml_fail(ML_ERR_FORMAT, "%s: not an HDF5 file", path);
    }
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (f < 0) return h5u_fail(ML_ERR_FORMAT, path, "", "cannot open (damaged or truncated?)");
    char kind[64] = "", args[8192] = "";
    int64_t v = 0;
    ml_status st = h5u_read_attr_str(f, "kind", kind, sizeof kind, path);
    if (st != ML_OK || strcmp(kind, SWEEP_KIND)) st = ml_fail(ML_ERR_FORMAT, "%s: not a moelab sweep summary", path);
    if (st == ML_OK) st = h5u_read_attr_i64(f, "format_version", &v, path);
    if (st == ML_OK && (v < 1 || v > SWEEP_FORMAT_VERSION))
        st = ml_fail(ML_ERR_FORMAT, "%s: format_version %lld, this moelab reads 1..%d", path, (long long)v,
                     SWEEP_FORMAT_VERSION);
    Crc cs = {0, 0};
    char sums[32] = "";
    if (st == ML_OK && H5Aexists(f, "checksums") > 0 && h5u_read_attr_str(f, "checksums", sums, sizeof sums, path) == ML_OK)
        cs.required = !strcmp(sums, "crc32");
    H5Eclear2(H5E_DEFAULT);
    if (st == ML_OK) st = h5u_read_attr_str(f, "args", args, sizeof args, path);
    if (st == ML_OK) st = h5u_read_attr_i64(f, "seeds", &v, path);
    s->seeds = (int)v;
    if (st == ML_OK) st = h5u_read_attr_f64(f, "ci_level", &s->ci_level, path);
    if (st == ML_OK && !(s->args = strdup(args))) st = ml_fail(ML_ERR_NOMEM, "%s: out of memory", path);
    const long na = rows_of(f, "/axes", path, &st), nc = rows_of(f, "/configs/label", path, &st),
               nr = rows_of(f, "/runs/name", path, &st);
    if (st == ML_OK) {
        s->axes = calloc((size_t)na + 1, sizeof(char *));
        s->values = calloc((size_t)(na * nc) + 1, sizeof(char *));
        s->configs = calloc((size_t)nc + 1, sizeof(SweepConfig));
        s->runs = calloc((size_t)nr + 1, sizeof(SweepRun));
        if (!s->axes || !s->values || !s->configs || !s->runs) st = ml_fail(ML_ERR_NOMEM, "%s: out of memory", path);
    }
    if (st == ML_OK && na > 0) st = read_strings(f, "/axes", na, s->axes, 1, NULL, 0, &cs, path);
    if (st == ML_OK) s->naxes = (int)na;
    if (st == ML_OK) s->nconfigs = (int)nc;
    for (long a = 0; a < na && st == ML_OK; a++) {
        char name[160];
        snprintf(name, sizeof name, "/configs/axis/%s", s->axes[a]);
        st = read_strings(f, name, nc, s->values + a, (size_t)na, NULL, 0, &cs, path);
    }
    if (st == ML_OK)
        st = read_strings(f, "/configs/label", nc, NULL, sizeof(SweepConfig), s->configs->label, SWEEP_NAME_MAX, &cs,
                          path);
    if (st == ML_OK)
        st = read_strings(f, "/configs/head", nc, NULL, sizeof(SweepConfig), s->configs->head, sizeof s->configs->head,
                          &cs, path);
    if (st == ML_OK)
        st = read_cols(f, "configs", config_cols, N_CONFIG_COLS, s->configs, sizeof(SweepConfig), nc, &cs, path);
    if (st == ML_OK) s->nruns = (int)nr;
    if (st == ML_OK)
        st = read_strings(f, "/runs/name", nr, NULL, sizeof(SweepRun), s->runs->name, SWEEP_NAME_MAX, &cs, path);
    if (st == ML_OK)
        st = read_strings(f, "/runs/status", nr, NULL, sizeof(SweepRun), s->runs->status, sizeof s->runs->status, &cs,
                          path);
    if (st == ML_OK) st = read_cols(f, "runs", run_cols, N_RUN_COLS, s->runs, sizeof(SweepRun), nr, &cs, path);
    s->checksums = st == ML_OK && cs.missing == 0;
    /* the summary's users index /configs with these (the CSV tables, --agree, the figures) */
    for (long c = 0; st == ML_OK && c < nc; c++)
        if (s->configs[c].baseline < -1 || s->configs[c].baseline >= nc)
            st = ml_fail(ML_ERR_FORMAT, "%s: /configs/baseline row %ld is %d, not a configuration (-1..%ld; damaged?)",
                         path, c, s->configs[c].baseline, nc - 1);
    for (long r = 0; st == ML_OK && r < nr; r++)
        if (s->runs[r].config < 0 || s->runs[r].config >= nc)
            st = ml_fail(ML_ERR_FORMAT, "%s: /runs/config row %ld is %d, not a configuration (0..%ld; damaged?)", path,
                         r, s->runs[r].config, nc - 1);
    H5Fclose(f);
    H5Eclear2(H5E_DEFAULT);
    if (st != ML_OK) {
        /* values may be partly filled: free what is there */
        const ml_status keep = st;
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", ml_last_error());
        if (s->values)
            for (long i = 0; i < na * nc; i++) free(s->values[i]), s->values[i] = NULL;
        s->naxes = (int)na;
        s->nconfigs = 0;
        sweep_summary_free(s);
        return ml_fail(keep, "%s", msg);
    }
    return ML_OK;
}
