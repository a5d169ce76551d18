/* sweep_summary.c — the summary of a sweep, computed from the session folders alone: one row per
 * run, per configuration the mean and sd of the final and best test accuracy and rho, the gap to
 * the matching dense configuration with its Welch confidence interval, Cohen's d and Hedges' g
 * (core/stats.c), the printed table, DIR/summary.csv, DIR/runs.csv and DIR/sweep.h5. */
#include "app/sweep/sweep_internal.h"
#include "app/run/probe.h"
#include "core/stats.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ------------------------------------------------------------------ summary */

void sweep_read_run_row(const Plan *p, int r, SweepRun *row) {
    memset(row, 0, sizeof *row);
    row->index = r;
    row->config = r % p->nconfigs;
    row->seed = (uint64_t)(r / p->nconfigs + p->seed0);
    sweep_run_name(p, r, row->name, sizeof row->name);
    row->final_acc = row->best_acc = row->rho_nominal = row->rho_realized = row->seconds = NAN;
    row->clean_share = row->test_share = NAN;
    row->collapse_step = row->collapse_first = -2;
    row->collapse_views = row->collapse_episodes = -2;
    row->warning_episodes = row->expert_deaths = -2;
    char dir[DIR_N], msg[2048];
    sweep_run_dir(p, r, dir, sizeof dir);
    SessionInfo info;
    /* one child per run reads all the summary reads from its live.h5 (session_probe) */
    const RunState st = sweep_run_state(p, r, dir, &info, msg, sizeof msg, SESSION_PROBE_SWEEP);
    if (st == RS_NEW) {
        snprintf(row->status, sizeof row->status, "missing");
        return;
    }
    if (st == RS_BROKEN || (st == RS_RESTART && msg[0])) {
        /* unreadable (a crash of the HDF5 library included): the other runs are summarised */
        fprintf(stderr, "moelab sweep: %s: unreadable: %s\n", dir, msg);
        snprintf(row->status, sizeof row->status, "unreadable");
        return;
    }
    if (st == RS_MISMATCH) {
        snprintf(row->status, sizeof row->status, "mismatch");
        return;
    }
    snprintf(row->status, sizeof row->status, "%s", info.status[0] ? info.status : "unreadable");
    row->final_acc = info.last_test_acc;
    row->best_acc = info.best_test_acc;
    row->best_epoch = info.best_epoch;
    row->last_epoch = info.last_epoch;
    long esteps = 0;
    if (sweep_h5_read_run(dir, &row->rho_nominal, &row->rho_realized, &row->seconds, &esteps) != ML_OK)
        fprintf(stderr, "moelab sweep: %s: %s\n", dir, ml_last_error());
    row->steps = esteps > info.last_step ? esteps : info.last_step;
    if (sweep_h5_read_routing(dir, row) != ML_OK) fprintf(stderr, "moelab sweep: %s: %s\n", dir, ml_last_error());
}

static void summary_build(const Plan *p, SweepRun *rows, const char *args, SweepSummary *s) {
    memset(s, 0, sizeof *s);
    s->args = (char *)args;
    s->seeds = p->seeds;
    s->ci_level = 0.95;
    s->naxes = p->naxes;
    s->axes = calloc((size_t)p->naxes + 1, sizeof(char *));
    for (int a = 0; a < p->naxes; a++) s->axes[a] = (char *)p->axes[a].key;
    s->nconfigs = p->nconfigs;
    s->values = calloc((size_t)p->nconfigs * (size_t)p->naxes + 1, sizeof(char *));
    for (int c = 0; c < p->nconfigs; c++)
        for (int a = 0; a < p->naxes; a++) s->values[c * p->naxes + a] = p->axes[a].vals[p->vidx[c * p->naxes + a]];
    s->configs = calloc((size_t)p->nconfigs + 1, sizeof(SweepConfig));
    s->nruns = p->nruns;
    s->runs = rows;
    double *fin = calloc((size_t)p->nconfigs * (size_t)p->seeds + 1, sizeof(double));
    double *best = calloc((size_t)p->nconfigs * (size_t)p->seeds + 1, sizeof(double));
    for (int c = 0; c < p->nconfigs; c++) {
        SweepConfig *k = &s->configs[c];
        snprintf(k->label, sizeof k->label, "%s", sweep_config_label(p, c));
        snprintf(k->head, sizeof k->head, "%s", p->head[c]);
        k->n_expected = p->seeds;
        k->baseline = p->baseline[c];
        k->rho_nominal = k->rho_realized = k->seconds = NAN;
        double rr = 0, sec = 0, cs = 0, ts = 0, cstep = 0;
        int n = 0, ncs = 0, nts = 0;
        k->collapsed = 0;
        for (int sd = 0; sd < p->seeds; sd++) {
            const SweepRun *row = &rows[sd * p->nconfigs + c];
            if (isnan(k->rho_nominal) && !isnan(row->rho_nominal)) k->rho_nominal = row->rho_nominal;
            if (strcmp(row->status, "finished") || isnan(row->final_acc)) continue;
            fin[c * p->seeds + n] = row->final_acc;
            best[c * p->seeds + n] = row->best_acc;
            rr += row->rho_realized;
            sec += row->seconds;
            if (!isnan(row->clean_share)) cs += row->clean_share, ncs++;
            if (!isnan(row->test_share)) ts += row->test_share, nts++;
            if (row->collapse_step >= 0) {
                k->collapsed++;
                cstep += (double)row->collapse_step;
            }
            n++;
        }
        k->clean_share = ncs ? cs / ncs : NAN;
        k->test_share = nts ? ts / nts : NAN;
        k->collapse_step = k->collapsed ? cstep / k->collapsed : NAN;
        k->n = n;
        k->final_mean = stats_mean(fin + c * p->seeds, n);
        k->final_sd = stats_sd(fin + c * p->seeds, n);
        k->best_mean = stats_mean(best + c * p->seeds, n);
        k->best_sd = stats_sd(best + c * p->seeds, n);
        if (n) {
            k->rho_realized = rr / n;
            k->seconds = sec / n;
        }
    }
    for (int c = 0; c < p->nconfigs; c++) {
        SweepConfig *k = &s->configs[c];
        k->gap = k->gap_lo = k->gap_hi = k->gap_df = k->cohen_d = k->hedges_g = NAN;
        k->peak_gap = k->peak_gap_lo = k->peak_gap_hi = NAN;
        const int b = k->baseline;
        if (b < 0 || k->n < 1 || s->configs[b].n < 1) continue;
        StatsGap g;
        stats_gap(fin + c * p->seeds, k->n, fin + b * p->seeds, s->configs[b].n, s->ci_level, &g);
        k->gap = g.diff;
        k->gap_lo = g.lo;
        k->gap_hi = g.hi;
        k->gap_df = g.df;
        k->cohen_d = g.d;
        k->hedges_g = g.g;
        stats_gap(best + c * p->seeds, k->n, best + b * p->seeds, s->configs[b].n, s->ci_level, &g);
        k->peak_gap = g.diff;
        k->peak_gap_lo = g.lo;
        k->peak_gap_hi = g.hi;
    }
    free(fin);
    free(best);
}

static void summary_release(SweepSummary *s) {
    free(s->axes);
    free(s->values);
    free(s->configs);
    memset(s, 0, sizeof *s);
}

static int utf8_locale(void) {
    const char *v = getenv("LC_ALL");
    if (!v || !*v) v = getenv("LC_CTYPE");
    if (!v || !*v) v = getenv("LANG");
    return v && (strstr(v, "UTF-8") || strstr(v, "utf8") || strstr(v, "UTF8") || strstr(v, "utf-8"));
}

static void fmt_ms(char *buf, size_t n, double m, double sd, const char *pm) {
    if (isnan(m)) snprintf(buf, n, "-");
    else if (isnan(sd)) snprintf(buf, n, "%.2f", 100 * m);
    else snprintf(buf, n, "%.2f %s %.2f", 100 * m, pm, 100 * sd);
}

static void fmt_num(char *buf, size_t n, const char *fmt, double v) {
    if (isnan(v)) snprintf(buf, n, "-");
    else snprintf(buf, n, fmt, v);
}

void sweep_summary_print(const SweepSummary *s, const char *note) {
    const char *pm = utf8_locale() ? "\xc2\xb1" : "+-";
    int w = 6;
    for (int c = 0; c < s->nconfigs; c++) {
        const int l = (int)strlen(s->configs[c].label);
        if (l > w) w = l;
    }
    printf("\n%-*s %5s  %-15s  %-15s  %7s  %8s  %8s  %-18s  %6s  %6s\n", w, "config", "n", "final acc (%)",
           "best acc (%)", "rho nom", "rho real", "gap (pp)", "95% CI (pp)", "d", "g");
    for (int c = 0; c < s->nconfigs; c++) {
        const SweepConfig *k = &s->configs[c];
        char f[40], b[40], rn[16], rr[16], gap[24], ci[48], d[16], g[16], nn[16];
        fmt_ms(f, sizeof f, k->final_mean, k->final_sd, pm);
        fmt_ms(b, sizeof b, k->best_mean, k->best_sd, pm);
        fmt_num(rn, sizeof rn, "%.3f", k->rho_nominal);
        fmt_num(rr, sizeof rr, "%.3f", k->rho_realized);
        if (k->baseline < 0) snprintf(gap, sizeof gap, "%s", "");
        else fmt_num(gap, sizeof gap, "%+.2f", 100 * k->gap);
        if (k->baseline < 0) ci[0] = 0;
        else if (isnan(k->gap_lo)) snprintf(ci, sizeof ci, "-");
        else snprintf(ci, sizeof ci, "[%+.2f, %+.2f]", 100 * k->gap_lo, 100 * k->gap_hi);
        if (k->baseline < 0) d[0] = g[0] = 0;
        else {
            fmt_num(d, sizeof d, "%+.2f", k->cohen_d);
            fmt_num(g, sizeof g, "%+.2f", k->hedges_g);
        }
        if (k->n == k->n_expected) snprintf(nn, sizeof nn, "%d", k->n);
        else snprintf(nn, sizeof nn, "%d/%d", k->n, k->n_expected);
        /* "±" is two bytes in UTF-8 and one column on screen */
        const int fpad = 15 + (strstr(f, "\xc2\xb1") ? 1 : 0), bpad = 15 + (strstr(b, "\xc2\xb1") ? 1 : 0);
        char line[1024];
        snprintf(line, sizeof line, "%-*s %5s  %-*s  %-*s  %7s  %8s  %8s  %-18s  %6s  %6s", w, k->label, nn, fpad, f,
                 bpad, b, rn, rr, gap, ci, d, g);
        for (size_t l = strlen(line); l > 0 && line[l - 1] == ' ';) line[--l] = 0;
        puts(line);
    }
    int gaps = 0;
    for (int c = 0; c < s->nconfigs; c++) gaps += s->configs[c].baseline >= 0;
    if (gaps)
        printf("gap: mean final test accuracy minus that of the dense configuration with the same other values;\n"
               "95%% CI: Welch; d: Cohen's d (pooled sd); g: Hedges' g. rho real: routed FLOPs actually spent.\n");
    if (note) printf("note: %s\n", note);
    /* routing: the clean router and the test set (evaluation view), collapses and the peak gap */
    int moe = 0;
    for (int c = 0; c < s->nconfigs; c++) moe |= strcmp(s->configs[c].head, "dense") != 0;
    if (!moe) return;
    printf("\n%-*s %10s  %10s  %9s  %14s  %-12s  %9s  %-18s\n", w, "routing", "clean top1", "test top1", "collapsed",
           "collapse onset", "alarms", "peak gap", "95% CI (pp)");
    for (int c = 0; c < s->nconfigs; c++) {
        const SweepConfig *k = &s->configs[c];
        if (!strcmp(k->head, "dense")) continue;
        char cs[16], ts[16], col[24], fs[24], pg[24], ci[48], al[48];
        sweep_config_alarms(s, c, al, sizeof al);
        fmt_num(cs, sizeof cs, "%.2f", k->clean_share);
        fmt_num(ts, sizeof ts, "%.2f", k->test_share);
        if (k->collapsed < 0) snprintf(col, sizeof col, "-");
        else snprintf(col, sizeof col, "%d/%d", k->collapsed, k->n);
        fmt_num(fs, sizeof fs, "%.0f", k->collapse_step);
        if (k->baseline < 0) pg[0] = ci[0] = 0;
        else {
            fmt_num(pg, sizeof pg, "%+.2f", 100 * k->peak_gap);
            if (isnan(k->peak_gap_lo)) snprintf(ci, sizeof ci, "-");
            else snprintf(ci, sizeof ci, "[%+.2f, %+.2f]", 100 * k->peak_gap_lo, 100 * k->peak_gap_hi);
        }
        char line[512];
        snprintf(line, sizeof line, "%-*s %10s  %10s  %9s  %14s  %-12s  %9s  %-18s", w, k->label, cs, ts, col, fs, al, pg,
                 ci);
        for (size_t l = strlen(line); l > 0 && line[l - 1] == ' ';) line[--l] = 0;
        puts(line);
    }
    printf("clean/test top1: largest share of first choices of the noise-free router (last step) and on the test\n"
           "set (last evaluation); collapsed: runs still flagged at the last evaluation on any view (training,\n"
           "clean router, evaluation), onset: mean step of their last collapse event (runs.csv: collapse_first,\n"
           "the first flag at all); alarms: the episodes of its finished runs by severity from their event logs,\n"
           "C collapse, W warning (the clean router alone, an idle router), D expert death (runs.csv:\n"
           "collapse_episodes, warning_episodes, expert_deaths per run); peak gap: best test accuracy minus the\n"
           "dense one's.\n");
}

static void csv_field(FILE *f, const char *s) {
    if (strpbrk(s, ",\"\n\r")) {
        fputc('"', f);
        for (; *s; s++) {
            if (*s == '"') fputc('"', f);
            fputc(*s, f);
        }
        fputc('"', f);
    } else {
        fputs(s, f);
    }
}

static void csv_num(FILE *f, double v) {
    if (isnan(v)) fputs(",", f);
    else fprintf(f, ",%.10g", v);
}

static int summary_write_csv(const SweepSummary *s, const char *dir) {
    char path[DIR_N], tmp[DIR_N + 32];
    /* summary.csv */
    snprintf(path, sizeof path, "%s/summary.csv", dir);
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f) {
        fprintf(stderr, "moelab sweep: %s: %s\n", tmp, strerror(errno));
        return -1;
    }
    fputs("config", f);
    for (int a = 0; a < s->naxes; a++) {
        fputc(',', f);
        csv_field(f, s->axes[a]);
    }
    fputs(
        ",head_kind,n,n_expected,final_mean,final_sd,best_mean,best_sd,rho_nominal,rho_realized,baseline,gap,gap_ci_lo,"
        "gap_ci_hi,gap_df,cohen_d,hedges_g,clean_share,test_share,collapsed,collapse_step,peak_gap,peak_gap_ci_lo,"
        "peak_gap_ci_hi,seconds\n",
        f);
    for (int c = 0; c < s->nconfigs; c++) {
        const SweepConfig *k = &s->configs[c];
        csv_field(f, k->label);
        for (int a = 0; a < s->naxes; a++) {
            fputc(',', f);
            csv_field(f, s->values[c * s->naxes + a]);
        }
        fprintf(f, ",%s,%d,%d", k->head, k->n, k->n_expected);
        csv_num(f, k->final_mean);
        csv_num(f, k->final_sd);
        csv_num(f, k->best_mean);
        csv_num(f, k->best_sd);
        csv_num(f, k->rho_nominal);
        csv_num(f, k->rho_realized);
        fputc(',', f);
        if (k->baseline >= 0) csv_field(f, s->configs[k->baseline].label);
        csv_num(f, k->gap);
        csv_num(f, k->gap_lo);
        csv_num(f, k->gap_hi);
        csv_num(f, k->gap_df);
        csv_num(f, k->cohen_d);
        csv_num(f, k->hedges_g);
        csv_num(f, k->clean_share);
        csv_num(f, k->test_share);
        csv_num(f, k->collapsed < 0 ? NAN : (double)k->collapsed);
        csv_num(f, k->collapse_step);
        csv_num(f, k->peak_gap);
        csv_num(f, k->peak_gap_lo);
        csv_num(f, k->peak_gap_hi);
        csv_num(f, k->seconds);
        fputc('\n', f);
    }
    if (fclose(f) != 0 || rename(tmp, path) != 0) {
        fprintf(stderr, "moelab sweep: %s: cannot write: %s\n", path, strerror(errno));
        unlink(tmp);
        return -1;
    }
    /* runs.csv */
    snprintf(path, sizeof path, "%s/runs.csv", dir);
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    if (!(f = fopen(tmp, "w"))) {
        fprintf(stderr, "moelab sweep: %s: %s\n", tmp, strerror(errno));
        return -1;
    }
    fputs("index,name,config", f);
    for (int a = 0; a < s->naxes; a++) {
        fputc(',', f);
        csv_field(f, s->axes[a]);
    }
    fputs(",seed,status,final_acc,best_acc,best_epoch,last_epoch,steps,rho_nominal,rho_realized,clean_share,test_share,"
          "collapse_step,collapse_first,collapse_views,collapse_episodes,warning_episodes,expert_deaths,seconds\n",
          f);
    for (int r = 0; r < s->nruns; r++) {
        const SweepRun *w = &s->runs[r];
        fprintf(f, "%d,", w->index);
        csv_field(f, w->name);
        fputc(',', f);
        csv_field(f, s->configs[w->config].label);
        for (int a = 0; a < s->naxes; a++) {
            fputc(',', f);
            csv_field(f, s->values[w->config * s->naxes + a]);
        }
        fprintf(f, ",%llu,%s", (unsigned long long)w->seed, w->status);
        csv_num(f, w->final_acc);
        csv_num(f, w->best_acc);
        fprintf(f, ",%d,%d,%ld", w->best_epoch, w->last_epoch, w->steps);
        csv_num(f, w->rho_nominal);
        csv_num(f, w->rho_realized);
        csv_num(f, w->clean_share);
        csv_num(f, w->test_share);
        csv_num(f, w->collapse_step < -1 ? NAN : (double)w->collapse_step);
        csv_num(f, w->collapse_first < -1 ? NAN : (double)w->collapse_first);
        csv_num(f, w->collapse_views < 0 ? NAN : (double)w->collapse_views);
        csv_num(f, w->collapse_episodes < 0 ? NAN : (double)w->collapse_episodes);
        csv_num(f, w->warning_episodes < 0 ? NAN : (double)w->warning_episodes);
        csv_num(f, w->expert_deaths < 0 ? NAN : (double)w->expert_deaths);
        csv_num(f, w->seconds);
        fputc('\n', f);
    }
    if (fclose(f) != 0 || rename(tmp, path) != 0) {
        fprintf(stderr, "moelab sweep: %s: cannot write: %s\n", path, strerror(errno));
        unlink(tmp);
        return -1;
    }
    return 0;
}

/* The softmoe preset (claim 3): the batch-composition probe (moelab probe batch) of each head's
 * first finished seed, at its last checkpoint: how much its predictions depend on batch mates. */
static void summary_probe(const Plan *p, const SweepRun *rows) {
    int printed = 0;
    for (int c = 0; c < p->nconfigs; c++)
        for (int sd = 0; sd < p->seeds; sd++) {
            const SweepRun *row = &rows[sd * p->nconfigs + c];
            if (strcmp(row->status, "finished")) continue;
            if (!printed++)
                printf("          batch-composition probe (moelab probe batch: the test set in file order, shuffled, "
                       "sorted by class, single-class batches; first finished seed, last checkpoint):\n");
            char dir[DIR_N + SWEEP_NAME_MAX + 2], line[320];
            snprintf(dir, sizeof dir, "%s/%s", p->out, row->name);
            BatchProbe bp;
            if (probe_batch_session(dir, 0, &bp, NULL, 0, NULL)) snprintf(line, sizeof line, "not probed: %s", ml_last_error());
            else probe_batch_summary(&bp, line, sizeof line);
            printf("            %-16s seed %llu: %s\n", p->head[c], (unsigned long long)row->seed, line);
            break;
        }
}

/* Builds, prints and writes the summary from rows (all runs of the grid). Returns 0 when every
 * run finished. */
int sweep_summary_emit(const Plan *p, SweepRun *rows, const char *note) {
    char args[8192];
    sweep_plan_args_line(p, args, sizeof args);
    sweep_plan_fill_aliases(p, rows);
    SweepSummary s;
    summary_build(p, rows, args, &s);
    sweep_summary_print(&s, note);
    const Preset *pr = p->preset[0] ? sweep_find_preset(p->preset) : NULL;
    const VerdictKind vk = pr ? pr->verdict : verdict_infer(&s);
    verdict_print(vk, &s, stdout);
    if (vk == VERDICT_SOFTMOE) summary_probe(p, rows);
    int rc = summary_write_csv(&s, p->out);
    char h5[DIR_N];
    snprintf(h5, sizeof h5, "%s/sweep.h5", p->out);
    if (sweep_h5_write(h5, &s) != ML_OK) {
        fprintf(stderr, "moelab sweep: %s\n", ml_last_error());
        rc = -1;
    }
    int done = 0, missing = 0, other = 0, trained = 0;
    for (int r = 0; r < p->nruns; r++) trained += sweep_run_canonical(p, r) == r;
    if (trained < p->nruns)
        printf("shared    %d runs trained for %d summary rows x seeds: configurations with the same model share "
               "their runs\n",
               trained, p->nruns);
    for (int r = 0; r < p->nruns; r++) {
        if (!strcmp(rows[r].status, "finished")) done++;
        else if (!strcmp(rows[r].status, "missing")) missing++;
        else other++;
    }
    printf("summary   %d of %d runs finished%s", done, p->nruns, missing || other ? " (" : "");
    if (missing) printf("%d not started%s", missing, other ? ", " : "");
    if (other) printf("%d unfinished, failed or mismatched: see runs.csv", other);
    printf("%s; written to %s/summary.csv, runs.csv, sweep.h5\n", missing || other ? ")" : "", p->out);
    summary_release(&s);
    return rc == 0 && done == p->nruns ? 0 : 1;
}
