/* export.c — `moelab export DIR --csv OUTDIR`: the scalar histories, the per-expert load history,
 * the class x expert matrices and the event log of live.h5 as CSV files for pandas / R users
 * (RFC 4180 quoting, one header line, NaN written as an empty field). */
#define _POSIX_C_SOURCE 200809L

#include "session.h"
#include "h5util.h"
#include "schema.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

/* ------------------------------------------------------------------ CSV writing */

typedef struct {
    FILE *f;
    char path[H5U_PATH_MAX];
    int err;
} Csv;

static ml_status csv_open(Csv *c, const char *outdir, const char *name) {
    c->err = 0;
    ml_status st = h5u_path(c->path, sizeof c->path, outdir, name);
    if (st != ML_OK) return st;
    c->f = fopen(c->path, "w");
    if (!c->f) return ml_fail(ML_ERR_IO, "%s: cannot create: %s", c->path, strerror(errno));
    return ML_OK;
}

static ml_status csv_close(Csv *c) {
    if (!c->f) return ML_OK;
    const int bad = ferror(c->f) || c->err;
    const int e = errno;
    const int cl = fclose(c->f);
    c->f = NULL;
    if (bad || cl != 0) return ml_fail(ML_ERR_IO, "%s: write failed: %s", c->path, strerror(bad ? e : errno));
    return ML_OK;
}

/* A text field, quoted when it holds a comma, quote, CR, LF or edge spaces. */
static void csv_text(Csv *c, const char *s) {
    const size_t n = strlen(s);
    const int quote = strpbrk(s, ",\"\r\n") != NULL || (n > 0 && (s[0] == ' ' || s[n - 1] == ' '));
    if (!quote) {
        fputs(s, c->f);
        return;
    }
    fputc('"', c->f);
    for (const char *p = s; *p; p++) {
        if (*p == '"') fputc('"', c->f);
        fputc(*p, c->f);
    }
    fputc('"', c->f);
}

static void csv_sep(Csv *c, int first) {
    if (!first) fputc(',', c->f);
}

static void csv_num(Csv *c, double v, int is_int, int wide) {
    if (!isfinite(v)) return; /* empty field: pandas reads NaN */
    if (is_int) fprintf(c->f, "%.0f", v);
    else fprintf(c->f, wide ? "%.6f" : "%.10g", v);
}

static void csv_eol(Csv *c) {
    if (fputc('\n', c->f) == EOF) c->err = 1;
}

/* ------------------------------------------------------------------ tables */

/* Every column of a scalar table, their common length and their values. An optional column
 * (schema.h) that an older session lacks is left out (vals[c] NULL). A missing group or required
 * column, or one that cannot be looked up (H5Lexists < 0: damaged metadata), is ML_ERR_FORMAT
 * naming it: a damaged /steps must not export as an empty table. On error the columns read so far are in vals (the caller frees). */
static ml_status read_table(hid_t f, const char *path, const char *group, const SessCol *cols, int ncols, double **vals,
                            long *rows) {
    long n = -1;
    char name[96];
    for (int c = 0; c < ncols; c++) vals[c] = NULL;
    *rows = 0;
    const htri_t gx = H5Lexists(f, group, H5P_DEFAULT);
    if (gx < 0) return h5u_fail(ML_ERR_FORMAT, path, group, "cannot read the group (damaged?)");
    if (gx == 0) return ml_fail(ML_ERR_FORMAT, "%s: group %s is missing", path, group);
    for (int c = 0; c < ncols; c++) {
        snprintf(name, sizeof name, "%s/%s", group, cols[c].name);
        const htri_t ex = H5Lexists(f, name, H5P_DEFAULT);
        if (ex < 0) return h5u_fail(ML_ERR_FORMAT, path, name, "cannot look up (damaged?)");
        if (ex == 0 && cols[c].optional) continue; /* a column older sessions lack: not exported */
        if (ex == 0) return ml_fail(ML_ERR_FORMAT, "%s: dataset %s is missing", path, name);
        hid_t d = H5Dopen2(f, name, H5P_DEFAULT);
        const long r = d >= 0 ? sess_rows(d) : -1;
        h5u_close(d);
        if (r < 0) return h5u_fail(ML_ERR_FORMAT, path, name, "cannot read shape");
        if (n < 0 || r < n) n = r;
    }
    if (n < 0) n = 0;
    for (int c = 0; c < ncols; c++) {
        snprintf(name, sizeof name, "%s/%s", group, cols[c].name);
        if (cols[c].optional && H5Lexists(f, name, H5P_DEFAULT) <= 0) {
            H5Eclear2(H5E_DEFAULT);
            continue;
        }
        ml_status st = sess_read_rows(f, name, (hsize_t)n, H5T_NATIVE_DOUBLE, (void **)&vals[c], path);
        if (st != ML_OK) return st;
    }
    *rows = n;
    return ML_OK;
}

static ml_status write_table(const char *outdir, const char *file, const SessCol *cols, int ncols, double **vals,
                             long rows) {
    Csv c;
    ml_status st = csv_open(&c, outdir, file);
    if (st != ML_OK) return st;
    int first = 1;
    for (int k = 0; k < ncols; k++) {
        if (!vals[k]) continue;
        csv_sep(&c, first);
        first = 0;
        csv_text(&c, cols[k].name);
    }
    csv_eol(&c);
    for (long r = 0; r < rows; r++) {
        first = 1;
        for (int k = 0; k < ncols; k++) {
            if (!vals[k]) continue;
            csv_sep(&c, first);
            first = 0;
            csv_num(&c, vals[k][r], cols[k].is_int, strcmp(cols[k].name, "wall_time") == 0);
        }
        csv_eol(&c);
    }
    return csv_close(&c);
}

static ml_status export_scalars(hid_t f, const char *path, const char *outdir, const char *group, const SessCol *cols,
                                int ncols, const char *file, long *rows_out) {
    double *vals[64];
    long rows = 0;
    ml_status st = read_table(f, path, group, cols, ncols, vals, &rows);
    if (st == ML_OK) st = write_table(outdir, file, cols, ncols, vals, rows);
    for (int k = 0; k < ncols; k++) ml_free(vals[k]);
    if (rows_out) *rows_out = rows;
    return st;
}

static ml_status export_expert_load(hid_t f, const char *path, const char *outdir, int E, long rows) {
    Csv c;
    ml_status st = csv_open(&c, outdir, "expert_load.csv");
    if (st != ML_OK) return st;
    double *step = NULL;
    int32_t *kept = NULL;
    fputs("step", c.f);
    for (int e = 0; e < E; e++) fprintf(c.f, ",e%d", e);
    csv_eol(&c);
    if (E > 0 && rows > 0) {
        st = sess_read_rows(f, "/steps/step", (hsize_t)rows, H5T_NATIVE_DOUBLE, (void **)&step, path);
        if (st == ML_OK) {
            /* the [T, E] datasets may be a block behind the scalars while a writer is active */
            hid_t d = H5Dopen2(f, "/steps/kept", H5P_DEFAULT);
            const long r = d >= 0 ? sess_rows(d) : -1;
            h5u_close(d);
            if (r < 0) st = h5u_fail(ML_ERR_FORMAT, path, "/steps/kept", "cannot open");
            else if (r < rows) rows = r;
        }
        if (st == ML_OK) st = sess_read_rows(f, "/steps/kept", (hsize_t)rows, H5T_NATIVE_INT32, (void **)&kept, path);
        for (long t = 0; st == ML_OK && t < rows; t++) {
            csv_num(&c, step[t], 1, 0);
            for (int e = 0; e < E; e++) fprintf(c.f, ",%d", (int)kept[t * E + e]);
            csv_eol(&c);
        }
    }
    ml_free(step);
    ml_free(kept);
    const ml_status cs = csv_close(&c);
    return st != ML_OK ? st : cs;
}

static ml_status export_class_expert(hid_t f, const char *path, const char *outdir, int E, long rows) {
    Csv c;
    ml_status st = csv_open(&c, outdir, "class_expert.csv");
    if (st != ML_OK) return st;
    fputs("eval,epoch,class,class_name", c.f);
    for (int e = 0; e < E; e++) fprintf(c.f, ",e%d", e);
    csv_eol(&c);
    double *epoch = NULL;
    int32_t *ce = NULL;
    char **names = NULL;
    int K = 0;
    if (E > 0 && rows > 0) {
        st = sess_read_strings(f, "/run/class_names", &names, &K, path);
        if (st == ML_OK) {
            hid_t d = H5Dopen2(f, "/evals/class_expert", H5P_DEFAULT);
            hsize_t dims[4];
            const int r = d >= 0 ? h5u_dims(d, dims, 4, 1) : -1;
            h5u_close(d);
            if (r != 3 || dims[1] != (hsize_t)K || dims[2] != (hsize_t)E)
                st = ml_fail(ML_ERR_FORMAT, "%s: /evals/class_expert is not (N, %d, %d)", path, K, E);
            else if ((long)dims[0] < rows) rows = (long)dims[0];
        }
        if (st == ML_OK)
            st = sess_read_rows(f, "/evals/epoch", (hsize_t)rows, H5T_NATIVE_DOUBLE, (void **)&epoch, path);
        if (st == ML_OK)
            st = sess_read_rows(f, "/evals/class_expert", (hsize_t)rows, H5T_NATIVE_INT32, (void **)&ce, path);
        for (long i = 0; st == ML_OK && i < rows; i++) {
            for (int k = 0; k < K; k++) {
                fprintf(c.f, "%ld,", i);
                csv_num(&c, epoch[i], 1, 0);
                fprintf(c.f, ",%d,", k);
                csv_text(&c, names[k]);
                for (int e = 0; e < E; e++) fprintf(c.f, ",%d", (int)ce[((size_t)i * K + k) * E + e]);
                csv_eol(&c);
            }
        }
    }
    ml_free(epoch);
    ml_free(ce);
    ml_free(names);
    const ml_status cs = csv_close(&c);
    return st != ML_OK ? st : cs;
}

static ml_status export_events(hid_t f, const char *path, const char *outdir) {
    Csv c;
    ml_status st = csv_open(&c, outdir, "events.csv");
    if (st != ML_OK) return st;
    fputs("step,wall_time,text", c.f);
    csv_eol(&c);
    hid_t d = H5Dopen2(f, "/events", H5P_DEFAULT);
    const long rows = d >= 0 ? sess_rows(d) : -1;
    h5u_close(d);
    hid_t ty = sess_event_type();
    SessEvent *ev = NULL;
    if (rows < 0) st = h5u_fail(ML_ERR_FORMAT, path, "/events", "cannot open");
    else if (ty < 0) st = h5u_fail(ML_ERR_IO, path, "/events", "cannot make type");
    else st = sess_read_rows(f, "/events", (hsize_t)rows, ty, (void **)&ev, path);
    for (long i = 0; st == ML_OK && i < rows; i++) {
        ev[i].text[SESS_EVENT_TEXT - 1] = 0;
        fprintf(c.f, "%lld,", (long long)ev[i].step);
        csv_num(&c, ev[i].wall_time, 0, 1);
        fputc(',', c.f);
        csv_text(&c, ev[i].text);
        csv_eol(&c);
    }
    h5u_close(ty);
    ml_free(ev);
    const ml_status cs = csv_close(&c);
    return st != ML_OK ? st : cs;
}

ml_status session_export_csv(const char *dir, const char *outdir) {
    h5u_quiet();
    char path[H5U_PATH_MAX];
    hid_t f;
    ml_status st = sess_open_read(dir, &f, path, sizeof path);
    if (st != ML_OK) return st;
    int64_t E = 0;
    hid_t run = H5Gopen2(f, "run", H5P_DEFAULT);
    if (run < 0) st = h5u_fail(ML_ERR_FORMAT, path, "/run", "cannot open group");
    else st = h5u_read_attr_i64(run, "experts", &E, path);
    h5u_close(run);
    if (st == ML_OK && (E < 0 || E > MOE_MAX_EXPERTS))
        st = ml_fail(ML_ERR_FORMAT, "%s: /run@experts = %lld", path, (long long)E);
    if (st == ML_OK) st = h5u_mkdirs(outdir);
    long nsteps = 0, nevals = 0;
    if (st == ML_OK) st = export_scalars(f, path, outdir, "/steps", sess_step_cols, SC_N, "steps.csv", &nsteps);
    if (st == ML_OK) st = export_expert_load(f, path, outdir, (int)E, nsteps);
    if (st == ML_OK) st = export_scalars(f, path, outdir, "/evals", sess_eval_cols, EC_N, "evals.csv", &nevals);
    if (st == ML_OK) st = export_class_expert(f, path, outdir, (int)E, nevals);
    if (st == ML_OK) st = export_events(f, path, outdir);
    H5Fclose(f);
    H5Eclear2(H5E_DEFAULT);
    return st;
}
