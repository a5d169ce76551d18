/* export.c — `moelab export DIR --csv OUTDIR`: the scalar histories, the per-expert routing history
 * (demand, kept, mean gate, bias), the class x expert matrices, the t-SNE samples, the run
 * configuration and the event log of live.h5 as CSV files for pandas / R users (RFC 4180 quoting,
 * one header line, units in the header names, NaN written as an empty field). */
#define _POSIX_C_SOURCE 200809L

#include "session.h"
#include "h5util.h"
#include "schema.h"

#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

/* ------------------------------------------------------------------ CSV writing */

typedef struct {
    FILE *f;
    char path[H5U_PATH_MAX];
    int err;
} Csv;

/* outdir NULL: the table goes to /dev/null (session_probe: the reads without the files). */
static ml_status csv_open(Csv *c, const char *outdir, const char *name) {
    c->err = 0;
    ml_status st = h5u_path(c->path, sizeof c->path, outdir ? outdir : "/dev", outdir ? name : "null");
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

/* The CSV header of a /steps or /evals column: its dataset name, with the unit appended where it
 * has one (accuracies are fractions 0..1, losses nats per image, times seconds). */
static const struct {
    const char *name, *header;
} col_units[] = {
    {"loss", "loss_nats"},
    {"loss_total", "loss_total_nats"},
    {"acc", "acc_frac"},
    {"train_loss", "train_loss_nats"},
    {"train_acc", "train_acc_frac"},
    {"test_loss", "test_loss_nats"},
    {"test_acc", "test_acc_frac"},
    {"mutual_info", "mutual_info_nats"},
    {"elapsed", "elapsed_s"},
    {"epoch_seconds", "epoch_seconds"},
    {"wall_time", "wall_time_unix_s"},
    {"capacity", "capacity_slots"},
};
static const char *col_header(const char *name) {
    for (size_t i = 0; i < sizeof col_units / sizeof col_units[0]; i++)
        if (!strcmp(col_units[i].name, name)) return col_units[i].header;
    return name;
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
        csv_text(&c, col_header(cols[k].name));
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

/* expert_load.csv, one row per (step record, expert): the four (T, E) datasets of /steps (or of
 * a layer's steps group). */
static ml_status export_expert_load(hid_t f, const char *path, const char *outdir, int E, long rows, const char *group,
                                    const char *file) {
    Csv c;
    ml_status st = csv_open(&c, outdir, file);
    if (st != ML_OK) return st;
    double *step = NULL;
    int32_t *demand = NULL, *kept = NULL;
    float *gate = NULL, *bias = NULL;
    fputs("step,expert,demand_pairs,kept_pairs,mean_gate_prob,bias_logit", c.f);
    csv_eol(&c);
    if (E > 0 && rows > 0) {
        char vb[5][96];
        static const char *const vn[5] = {"step", "demand", "kept", "mean_gate", "bias"};
        for (int v = 0; v < 5; v++) snprintf(vb[v], sizeof vb[v], "%s/%s", group, vn[v]);
        st = sess_read_rows(f, vb[0], (hsize_t)rows, H5T_NATIVE_DOUBLE, (void **)&step, path);
        /* the [T, E] datasets may be a block behind the scalars while a writer is active */
        const char *vec[4] = {vb[1], vb[2], vb[3], vb[4]};
        for (int v = 0; st == ML_OK && v < 4; v++) {
            hid_t d = H5Dopen2(f, vec[v], H5P_DEFAULT);
            const long r = d >= 0 ? sess_rows(d) : -1;
            h5u_close(d);
            if (r < 0) st = h5u_fail(ML_ERR_FORMAT, path, vec[v], "cannot open");
            else if (r < rows) rows = r;
        }
        if (st == ML_OK) st = sess_read_rows(f, vec[0], (hsize_t)rows, H5T_NATIVE_INT32, (void **)&demand, path);
        if (st == ML_OK) st = sess_read_rows(f, vec[1], (hsize_t)rows, H5T_NATIVE_INT32, (void **)&kept, path);
        if (st == ML_OK) st = sess_read_rows(f, vec[2], (hsize_t)rows, H5T_NATIVE_FLOAT, (void **)&gate, path);
        if (st == ML_OK) st = sess_read_rows(f, vec[3], (hsize_t)rows, H5T_NATIVE_FLOAT, (void **)&bias, path);
        for (long t = 0; st == ML_OK && t < rows; t++)
            for (int e = 0; e < E; e++) {
                const size_t i = (size_t)t * E + e;
                csv_num(&c, step[t], 1, 0);
                fprintf(c.f, ",%d,%d,%d,", e, (int)demand[i], (int)kept[i]);
                csv_num(&c, gate[i], 0, 0);
                fputc(',', c.f);
                csv_num(&c, bias[i], 0, 0);
                csv_eol(&c);
            }
    }
    ml_free(step);
    ml_free(demand);
    ml_free(kept);
    ml_free(gate);
    ml_free(bias);
    const ml_status cs = csv_close(&c);
    return st != ML_OK ? st : cs;
}

/* tsne.csv, one row per saved test sample and evaluation: its class, first-choice expert and
 * pooled features (absent datasets: header only). */
static ml_status export_tsne(hid_t f, const char *path, const char *outdir, long rows) {
    Csv c;
    ml_status st = csv_open(&c, outdir, "tsne.csv");
    if (st != ML_OK) return st;
    fputs("eval,epoch,sample,class,class_name,expert", c.f);
    const htri_t have = H5Lexists(f, "/evals/tsne_features", H5P_DEFAULT) > 0 &&
                        H5Lexists(f, "/evals/tsne_expert", H5P_DEFAULT) > 0 &&
                        H5Lexists(f, "/evals/tsne_label", H5P_DEFAULT) > 0;
    H5Eclear2(H5E_DEFAULT);
    hsize_t dims[4] = {0, 0, 0, 0};
    if (have) {
        hid_t d = H5Dopen2(f, "/evals/tsne_features", H5P_DEFAULT);
        const int r = d >= 0 ? h5u_dims(d, dims, 4, 1) : -1;
        h5u_close(d);
        if (r != 3 || dims[1] < 1 || dims[2] < 1 || dims[1] > 1000000 || dims[2] > 65536)
            st = ml_fail(ML_ERR_FORMAT, "%s: /evals/tsne_features is not (N, n, d)", path);
        else if ((long)dims[0] < rows) rows = (long)dims[0];
        for (hsize_t j = 0; st == ML_OK && j < dims[2]; j++) fprintf(c.f, ",feature_%llu", (unsigned long long)j);
    }
    csv_eol(&c);
    double *epoch = NULL;
    int32_t *ex = NULL, *lab = NULL;
    float *feat = NULL;
    char **names = NULL;
    int K = 0;
    if (st == ML_OK && have && rows > 0) {
        const long n = (long)dims[1], dd = (long)dims[2];
        st = sess_read_strings(f, "/run/class_names", &names, &K, path);
        if (st == ML_OK)
            st = sess_read_rows(f, "/evals/epoch", (hsize_t)rows, H5T_NATIVE_DOUBLE, (void **)&epoch, path);
        if (st == ML_OK)
            st = sess_read_rows(f, "/evals/tsne_expert", (hsize_t)rows, H5T_NATIVE_INT32, (void **)&ex, path);
        if (st == ML_OK)
            st = sess_read_rows(f, "/evals/tsne_label", (hsize_t)rows, H5T_NATIVE_INT32, (void **)&lab, path);
        if (st == ML_OK)
            st = sess_read_rows(f, "/evals/tsne_features", (hsize_t)rows, H5T_NATIVE_FLOAT, (void **)&feat, path);
        for (long i = 0; st == ML_OK && i < rows; i++)
            for (long j = 0; j < n; j++) {
                const int y = lab[i * n + j];
                fprintf(c.f, "%ld,", i);
                csv_num(&c, epoch[i], 1, 0);
                fprintf(c.f, ",%ld,%d,", j, y);
                csv_text(&c, y >= 0 && y < K ? names[y] : "");
                fprintf(c.f, ",%d", (int)ex[i * n + j]);
                const float *fv = feat + ((size_t)i * n + j) * dd;
                for (long q = 0; q < dd; q++) {
                    fputc(',', c.f);
                    csv_num(&c, fv[q], 0, 0);
                }
                csv_eol(&c);
            }
    }
    ml_free(epoch);
    ml_free(ex);
    ml_free(lab);
    ml_free(feat);
    ml_free(names);
    const ml_status cs = csv_close(&c);
    return st != ML_OK ? st : cs;
}

/* config.csv: key,value rows: every /run attribute (run.<name>; vectors space-separated) and
 * every field of config_json flattened (config.<path>, e.g. config.model.head.d). */
static void flatten_json(Csv *c, const char *prefix, json_t *v) {
    char key[256];
    if (json_is_object(v)) {
        const char *k;
        json_t *x;
        json_object_foreach(v, k, x) {
            snprintf(key, sizeof key, "%s.%s", prefix, k);
            flatten_json(c, key, x);
        }
        return;
    }
    if (json_is_array(v)) {
        size_t i;
        json_t *x;
        json_array_foreach(v, i, x) {
            snprintf(key, sizeof key, "%s.%zu", prefix, i);
            flatten_json(c, key, x);
        }
        return;
    }
    csv_text(c, prefix);
    fputc(',', c->f);
    if (json_is_string(v)) csv_text(c, json_string_value(v));
    else if (json_is_integer(v)) fprintf(c->f, "%lld", (long long)json_integer_value(v));
    else if (json_is_real(v)) { /* the shortest decimal that reads back as the same double */ char b[40];
        const double x = json_real_value(v);
        for (int prec = 6; prec <= 17; prec++) {
            snprintf(b, sizeof b, "%.*g", prec, x);
            if (strtod(b, NULL) == x) break;
        }
        fputs(b, c->f);
    } else if (json_is_true(v) || json_is_false(v)) fputs(json_is_true(v) ? "1" : "0", c->f);
    csv_eol(c); /* null: an empty value */
}

/* A fixed-length string attribute into a malloc'd NUL-terminated buffer (ML_ERR_FORMAT if it is
 * not one). */
static ml_status attr_str_alloc(hid_t loc, const char *name, char **out) {
    *out = NULL;
    ml_status st = ML_ERR_FORMAT;
    hid_t a = H5Aopen(loc, name, H5P_DEFAULT), ty = a >= 0 ? H5Aget_type(a) : -1;
    const size_t n = ty >= 0 && H5Tget_class(ty) == H5T_STRING && H5Tis_variable_str(ty) == 0 ? H5Tget_size(ty) : 0;
    hid_t mt = n > 0 && n < ((size_t)256 << 20) ? H5Tcopy(ty) : -1;
    char *buf = mt >= 0 ? ml_alloc(n + 1) : NULL;
    if (buf && H5Tset_size(mt, n) >= 0 && H5Aread(a, mt, buf) >= 0) {
        buf[n] = 0;
        *out = buf;
        buf = NULL;
        st = ML_OK;
    }
    ml_free(buf);
    if (mt >= 0) H5Tclose(mt);
    if (ty >= 0) H5Tclose(ty);
    if (a >= 0) H5Aclose(a);
    H5Eclear2(H5E_DEFAULT);
    return st;
}

static herr_t run_attr_row(hid_t loc, const char *name, const H5A_info_t *info, void *op) {
    (void)info;
    Csv *c = op;
    if (!strcmp(name, "config_json")) return 0; /* flattened below */
    hid_t a = H5Aopen(loc, name, H5P_DEFAULT);
    hid_t ty = a >= 0 ? H5Aget_type(a) : -1, sp = a >= 0 ? H5Aget_space(a) : -1;
    const hssize_t n = sp >= 0 ? H5Sget_simple_extent_npoints(sp) : -1;
    const H5T_class_t cl = ty >= 0 ? H5Tget_class(ty) : H5T_NO_CLASS;
    char key[160];
    snprintf(key, sizeof key, "run.%s", name);
    if (cl == H5T_STRING && n == 1) {
        char *buf = NULL;
        if (attr_str_alloc(loc, name, &buf) == ML_OK) {
            csv_text(c, key);
            fputc(',', c->f);
            csv_text(c, buf);
            csv_eol(c);
        }
        ml_free(buf);
    } else if ((cl == H5T_INTEGER || cl == H5T_FLOAT) && n >= 1 && n <= 4096) {
        double *v = ml_alloc(sizeof(double) * (size_t)n);
        if (v && H5Aread(a, H5T_NATIVE_DOUBLE, v) >= 0) {
            csv_text(c, key);
            fputc(',', c->f);
            for (hssize_t i = 0; i < n; i++) {
                if (i) fputc(' ', c->f);
                csv_num(c, v[i], cl == H5T_INTEGER, 0);
            }
            csv_eol(c);
        }
        ml_free(v);
    }
    H5Eclear2(H5E_DEFAULT);
    if (sp >= 0) H5Sclose(sp);
    if (ty >= 0) H5Tclose(ty);
    if (a >= 0) H5Aclose(a);
    return 0;
}

static ml_status export_config(hid_t f, const char *path, const char *outdir) {
    Csv c;
    ml_status st = csv_open(&c, outdir, "config.csv");
    if (st != ML_OK) return st;
    fputs("key,value", c.f);
    csv_eol(&c);
    hid_t run = H5Gopen2(f, "run", H5P_DEFAULT);
    if (run < 0) st = h5u_fail(ML_ERR_FORMAT, path, "/run", "cannot open group");
    hsize_t idx = 0;
    if (st == ML_OK && H5Aiterate2(run, H5_INDEX_NAME, H5_ITER_INC, &idx, run_attr_row, &c) < 0)
        st = h5u_fail(ML_ERR_FORMAT, path, "/run", "cannot list the attributes");
    char *js = NULL;
    if (st == ML_OK && attr_str_alloc(run, "config_json", &js) == ML_OK) {
        json_t *root = session_config_parse(js);
        if (root) flatten_json(&c, "config", root);
        json_decref(root);
    }
    H5Eclear2(H5E_DEFAULT);
    ml_free(js);
    h5u_close(run);
    const ml_status cs = csv_close(&c);
    return st != ML_OK ? st : cs;
}

/* class_expert.csv (dsname "class_expert": test first choices) or drops_class_expert.csv
 * (dsname "drop_class_expert": training pairs dropped by capacity since the epoch's start, with
 * the class total in a last column; the file is not written for a session without the dataset). */
static ml_status export_class_matrix(hid_t f, const char *path, const char *outdir, int E, long rows, const char *group,
                                     const char *file, const char *dsname) {
    const int drops = !strcmp(dsname, "drop_class_expert");
    char ds[96];
    snprintf(ds, sizeof ds, "%s/%s", group, dsname);
    if (drops) {
        const htri_t ex = H5Lexists(f, ds, H5P_DEFAULT);
        H5Eclear2(H5E_DEFAULT);
        if (ex <= 0) return ML_OK;
    }
    Csv c;
    ml_status st = csv_open(&c, outdir, file);
    if (st != ML_OK) return st;
    fputs("eval,epoch,class,class_name", c.f);
    for (int e = 0; e < E; e++) fprintf(c.f, drops ? ",e%d_dropped" : ",e%d_first_choices", e);
    if (drops) fputs(",dropped", c.f);
    csv_eol(&c);
    double *epoch = NULL;
    int32_t *ce = NULL;
    char **names = NULL;
    int K = 0;
    if (E > 0 && rows > 0) {
        st = sess_read_strings(f, "/run/class_names", &names, &K, path);
        if (st == ML_OK) {
            hid_t d = H5Dopen2(f, ds, H5P_DEFAULT);
            hsize_t dims[4];
            const int r = d >= 0 ? h5u_dims(d, dims, 4, 1) : -1;
            h5u_close(d);
            if (r != 3 || dims[1] != (hsize_t)K || dims[2] != (hsize_t)E)
                st = ml_fail(ML_ERR_FORMAT, "%s: %s is not (N, %d, %d)", path, ds, K, E);
            else if ((long)dims[0] < rows) rows = (long)dims[0];
        }
        if (st == ML_OK)
            st = sess_read_rows(f, "/evals/epoch", (hsize_t)rows, H5T_NATIVE_DOUBLE, (void **)&epoch, path);
        if (st == ML_OK) st = sess_read_rows(f, ds, (hsize_t)rows, H5T_NATIVE_INT32, (void **)&ce, path);
        for (long i = 0; st == ML_OK && i < rows; i++) {
            for (int k = 0; k < K; k++) {
                fprintf(c.f, "%ld,", i);
                csv_num(&c, epoch[i], 1, 0);
                fprintf(c.f, ",%d,", k);
                csv_text(&c, names[k]);
                long tot = 0;
                for (int e = 0; e < E; e++) {
                    fprintf(c.f, ",%d", (int)ce[((size_t)i * K + k) * E + e]);
                    tot += ce[((size_t)i * K + k) * E + e];
                }
                if (drops) fprintf(c.f, ",%ld", ce[((size_t)i * K + k) * E] < 0 ? -1L : tot); /* -1: no counts */
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

/* Format 2: per routed layer NAME, layer_NAME_steps.csv, layer_NAME_expert_load.csv,
 * layer_NAME_evals.csv, layer_NAME_class_expert.csv and layer_NAME_drops_class_expert.csv, the
 * same tables as the top level's. */
static ml_status export_layers(hid_t f, const char *path, const char *outdir, long nevals) {
    char names[REC_MAX_LAYERS][REC_LAYER_NAME];
    int nl = 0;
    ml_status st = sess_read_layers(f, names, &nl, path);
    for (int l = 0; l < nl && st == ML_OK; l++) {
        char g[64], file[96];
        long ns = 0, ne = 0;
        snprintf(g, sizeof g, "/layers/%s/steps", names[l]);
        snprintf(file, sizeof file, "layer_%s_steps.csv", names[l]);
        st = export_scalars(f, path, outdir, g, sess_layer_step_cols, LSC_N, file, &ns);
        int64_t E = 0;
        char gp[64];
        snprintf(gp, sizeof gp, "/layers/%s", names[l]);
        hid_t lg = st == ML_OK ? H5Gopen2(f, gp, H5P_DEFAULT) : -1;
        if (st == ML_OK && lg < 0) st = h5u_fail(ML_ERR_FORMAT, path, gp, "cannot open group");
        if (st == ML_OK) st = h5u_read_attr_i64(lg, "experts", &E, path);
        h5u_close(lg);
        if (st == ML_OK && (E < 1 || E > MOE_MAX_EXPERTS))
            st = ml_fail(ML_ERR_FORMAT, "%s: %s@experts = %lld", path, gp, (long long)E);
        snprintf(file, sizeof file, "layer_%s_expert_load.csv", names[l]);
        if (st == ML_OK) st = export_expert_load(f, path, outdir, (int)E, ns, g, file);
        snprintf(g, sizeof g, "/layers/%s/evals", names[l]);
        snprintf(file, sizeof file, "layer_%s_evals.csv", names[l]);
        if (st == ML_OK) st = export_scalars(f, path, outdir, g, sess_layer_eval_cols, LEC_N, file, &ne);
        if (ne > nevals) ne = nevals; /* class_expert.csv takes the epoch from /evals/epoch */
        snprintf(file, sizeof file, "layer_%s_class_expert.csv", names[l]);
        if (st == ML_OK) st = export_class_matrix(f, path, outdir, (int)E, ne, g, file, "class_expert");
        snprintf(file, sizeof file, "layer_%s_drops_class_expert.csv", names[l]);
        if (st == ML_OK) st = export_class_matrix(f, path, outdir, (int)E, ne, g, file, "drop_class_expert");
    }
    return st;
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
    if (st == ML_OK && outdir) st = h5u_mkdirs(outdir);
    long nsteps = 0, nevals = 0;
    if (st == ML_OK) st = export_scalars(f, path, outdir, "/steps", sess_step_cols, SC_N, "steps.csv", &nsteps);
    if (st == ML_OK) st = export_expert_load(f, path, outdir, (int)E, nsteps, "/steps", "expert_load.csv");
    if (st == ML_OK) st = export_scalars(f, path, outdir, "/evals", sess_eval_cols, EC_N, "evals.csv", &nevals);
    if (st == ML_OK)
        st = export_class_matrix(f, path, outdir, (int)E, nevals, "/evals", "class_expert.csv", "class_expert");
    if (st == ML_OK)
        st = export_class_matrix(f, path, outdir, (int)E, nevals, "/evals", "drops_class_expert.csv",
                                 "drop_class_expert");
    if (st == ML_OK) st = export_tsne(f, path, outdir, nevals);
    if (st == ML_OK) st = export_config(f, path, outdir);
    if (st == ML_OK) st = export_events(f, path, outdir);
    if (st == ML_OK) st = export_layers(f, path, outdir, nevals);
    H5Fclose(f);
    H5Eclear2(H5E_DEFAULT);
    return st;
}
