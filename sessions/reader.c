/* reader.c — reading live.h5 for the browser: opening read-only with SWMR-read (so a running or
 * crashed writer does not matter), the session summary, /run attributes, and the row readers
 * shared with the CSV exporter. Every failure is a message, never a crash: truncated and garbage
 * files give ML_ERR_FORMAT. */
#define _POSIX_C_SOURCE 200809L

#include "session.h"
#include "h5util.h"
#include "schema.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

ml_status sess_read_layers(hid_t file, char names[][REC_LAYER_NAME], int *n, const char *path) {
    *n = 0;
    const htri_t ex = H5Lexists(file, "/layers", H5P_DEFAULT);
    if (ex <= 0) {
        H5Eclear2(H5E_DEFAULT);
        return ML_OK;
    }
    hid_t g = H5Gopen2(file, "/layers", H5P_DEFAULT);
    if (g < 0) return h5u_fail(ML_ERR_FORMAT, path, "/layers", "cannot open group");
    int64_t cnt = 0;
    ml_status st = h5u_read_attr_i64(g, "count", &cnt, path);
    if (st == ML_OK && (cnt < 0 || cnt > REC_MAX_LAYERS))
        st = ml_fail(ML_ERR_FORMAT, "%s: /layers@count is %lld (at most %d)", path, (long long)cnt, REC_MAX_LAYERS);
    for (int l = 0; l < (int)cnt && st == ML_OK; l++) {
        char an[24], buf[64];
        snprintf(an, sizeof an, "name_%d", l);
        st = h5u_read_attr_str(g, an, buf, sizeof buf, path);
        int ok = st == ML_OK && buf[0] && strlen(buf) < REC_LAYER_NAME;
        for (const char *c = buf; ok && *c; c++) ok = isalnum((unsigned char)*c) || *c == '_' || *c == '-';
        if (st == ML_OK && !ok) st = ml_fail(ML_ERR_FORMAT, "%s: /layers@%s is not a layer name", path, an);
        if (st == ML_OK) memcpy(names[l], buf, strlen(buf) + 1); /* shorter than REC_LAYER_NAME: checked above */
    }
    H5Gclose(g);
    if (st == ML_OK) *n = (int)cnt;
    return st;
}

static ml_status open_read(const char *dir, hid_t *file, char *path, size_t n, int nolock);

ml_status sess_open_read(const char *dir, hid_t *file, char *path, size_t n) {
    return open_read(dir, file, path, n, 0);
}

ml_status sess_open_follow(const char *dir, hid_t *file, char *path, size_t n) {
    return open_read(dir, file, path, n, 1);
}

static ml_status open_read(const char *dir, hid_t *file, char *path, size_t n, int nolock) {
    *file = -1;
    struct stat sb;
    if (!dir) return ml_fail(ML_ERR_ARG, "no session folder given");
    if (stat(dir, &sb) == 0 && S_ISREG(sb.st_mode)) {
        if (snprintf(path, n, "%s", dir) >= (int)n) return ml_fail(ML_ERR_ARG, "%s: path too long", dir);
    } else {
        ml_status st = h5u_path(path, n, dir, "live.h5");
        if (st != ML_OK) return st;
    }
    if (stat(path, &sb) != 0) return ml_fail(ML_ERR_IO, "%s: %s", path, strerror(errno));
    if (!S_ISREG(sb.st_mode)) return ml_fail(ML_ERR_IO, "%s: not a regular file", path);
    if (H5Fis_hdf5(path) <= 0) {
        H5Eclear2(H5E_DEFAULT);
        return ml_fail(ML_ERR_FORMAT, "%s: not an HDF5 file (damaged or not a moelab session)", path);
    }
    hid_t fapl = h5u_fapl_latest();
    if (fapl < 0) return h5u_fail(ML_ERR_IO, path, "", "cannot make file access list");
    /* SWMR readers retry a metadata read whose checksum fails (a page caught mid-write) with a
     * growing sleep, 100 times by default: on a corrupted file that is a hang of many seconds.
     * A few attempts cover a writer's torn pages; a real checksum error then fails fast. */
    H5Pset_metadata_read_attempts(fapl, SESS_READ_ATTEMPTS);
    /* a reader that keeps the file open must not hold HDF5's file lock: it would make a resume
     * (session_open_append) fail for as long as it follows */
    if (nolock) H5Pset_file_locking(fapl, 0, 1);
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY | H5F_ACC_SWMR_READ, fapl);
    if (f < 0) {
        const ml_status st = h5u_fail(ML_ERR_FORMAT, path, "", "cannot open (damaged or truncated?)");
        H5Pclose(fapl);
        return st;
    }
    H5Pclose(fapl);
    int64_t v = 0;
    char fmt[64] = "", kind[64] = "";
    /* another moelab file (a dataset, a sweep summary, a checkpoint) given where a session belongs */
    if (H5Aexists(f, "format") > 0 && h5u_read_attr_str(f, "format", fmt, sizeof fmt, path) == ML_OK &&
        !strncmp(fmt, "moelab-datase", 13)) { /* NULLPAD, 14 bytes: read through a NUL-terminated type, it loses its 't' */
        H5Fclose(f);
        return ml_fail(ML_ERR_FORMAT,
                       "%s: an imported dataset file (moelab data import), not a session: `moelab data info %s` "
                       "describes it, `moelab train --dataset %s` trains on it",
                       path, path, path);
    }
    if (H5Aexists(f, "kind") > 0 && h5u_read_attr_str(f, "kind", kind, sizeof kind, path) == ML_OK &&
        (!strcmp(kind, "moelab sweep") || !strcmp(kind, "moelab checkpoint"))) {
        H5Fclose(f);
        return ml_fail(ML_ERR_FORMAT, "%s: a %s file, not a session (a session is a folder holding live.h5)%s", path,
                       !strcmp(kind, "moelab sweep") ? "sweep summary (sweep.h5)" : "checkpoint",
                       !strcmp(kind, "moelab sweep") ? ": `moelab sweep --show` prints it, `moelab plot` draws it"
                                                     : ": give its session folder");
    }
    H5Eclear2(H5E_DEFAULT);
    ml_status st = h5u_read_attr_i64(f, "format_version", &v, path);
    if (st != ML_OK) {
        H5Fclose(f);
        return ml_fail(ML_ERR_FORMAT, "%s: not a moelab session (%s)", path, ml_last_error());
    }
    if (v < 1 || v > SESSION_FORMAT_VERSION) {
        H5Fclose(f);
        return ml_fail(ML_ERR_FORMAT,
                       "%s: format_version %lld, this moelab reads 1..%d (written by a newer moelab? upgrade to "
                       "open it)",
                       path, (long long)v, SESSION_FORMAT_VERSION);
    }
    *file = f;
    return ML_OK;
}

long sess_rows(hid_t dset) {
    hsize_t d[4];
    return h5u_dims(dset, d, 4, 1) >= 1 ? (long)d[0] : -1;
}

/* Rows of dataset `name`, or -1 if missing/unreadable (errors cleared). */
static long rows_of(hid_t file, const char *name) {
    if (H5Lexists(file, name, H5P_DEFAULT) <= 0) {
        H5Eclear2(H5E_DEFAULT);
        return -1;
    }
    hid_t d = H5Dopen2(file, name, H5P_DEFAULT);
    if (d < 0) {
        H5Eclear2(H5E_DEFAULT);
        return -1;
    }
    const long r = sess_rows(d);
    H5Dclose(d);
    H5Eclear2(H5E_DEFAULT);
    return r;
}

ml_status sess_read_rows(hid_t file, const char *name, hsize_t rows, hid_t mem_type, void **out, const char *path) {
    return sess_read_rows_at(file, name, 0, rows, mem_type, out, path);
}

ml_status sess_read_rows_at(hid_t file, const char *name, hsize_t first, hsize_t rows, hid_t mem_type, void **out,
                            const char *path) {
    *out = NULL;
    if (H5Lexists(file, name, H5P_DEFAULT) <= 0) {
        H5Eclear2(H5E_DEFAULT);
        return ml_fail(ML_ERR_FORMAT, "%s: dataset %s is missing", path, name);
    }
    hid_t d = H5Dopen2(file, name, H5P_DEFAULT);
    if (d < 0) return h5u_fail(ML_ERR_FORMAT, path, name, "cannot open dataset");
    hsize_t dims[4], start[4] = {0, 0, 0, 0};
    const int r = h5u_dims(d, dims, 4, 1);
    ml_status st = ML_OK;
    if (r < 1 || dims[0] < first || dims[0] - first < rows) {
        H5Dclose(d);
        H5Eclear2(H5E_DEFAULT);
        return ml_fail(ML_ERR_FORMAT, "%s: dataset %s has fewer than %llu rows", path, name,
                       (unsigned long long)(first + rows));
    }
    start[0] = first;
    dims[0] = rows;
    size_t elems = 1;
    for (int i = 0; i < r; i++) elems *= (size_t)dims[i];
    void *buf = ml_alloc(H5Tget_size(mem_type) * (elems ? elems : 1));
    if (!buf) {
        H5Dclose(d);
        return ml_fail(ML_ERR_NOMEM, "%s: %s: out of memory", path, name);
    }
    if (rows > 0) {
        hid_t fs = H5Dget_space(d), ms = -1;
        if (fs < 0 || H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, NULL, dims, NULL) < 0 ||
            (ms = H5Screate_simple(r, dims, NULL)) < 0 || H5Dread(d, mem_type, ms, fs, H5P_DEFAULT, buf) < 0)
            st = h5u_fail(ML_ERR_FORMAT, path, name, "cannot read dataset");
        h5u_close(fs);
        h5u_close(ms);
    }
    H5Dclose(d);
    if (st != ML_OK) {
        ml_free(buf);
        return st;
    }
    *out = buf;
    return ML_OK;
}

ml_status sess_read_strings(hid_t file, const char *name, char ***out, int *n, const char *path) {
    *out = NULL;
    *n = 0;
    if (H5Lexists(file, name, H5P_DEFAULT) <= 0) {
        H5Eclear2(H5E_DEFAULT);
        return ml_fail(ML_ERR_FORMAT, "%s: dataset %s is missing", path, name);
    }
    hid_t d = H5Dopen2(file, name, H5P_DEFAULT);
    if (d < 0) return h5u_fail(ML_ERR_FORMAT, path, name, "cannot open dataset");
    hid_t ft = H5Dget_type(d);
    hsize_t dims[4];
    const int r = h5u_dims(d, dims, 4, 0);
    ml_status st = ML_OK;
    if (ft < 0 || r != 1 || H5Tget_class(ft) != H5T_STRING || H5Tis_variable_str(ft) > 0 || dims[0] > 1000000) {
        H5Eclear2(H5E_DEFAULT);
        st = ml_fail(ML_ERR_FORMAT, "%s: %s is not a list of fixed-length strings", path, name);
    }
    char **v = NULL;
    if (st == ML_OK) {
        const size_t len = H5Tget_size(ft), cnt = (size_t)dims[0];
        /* one block: cnt pointers, then cnt strings of len + 1 bytes */
        v = ml_alloc(cnt * sizeof(char *) + cnt * (len + 1) + 1);
        char *raw = ml_alloc(cnt * len + 1);
        hid_t mt = h5u_str_type(len);
        if (!v || !raw || mt < 0) {
            st = ml_fail(ML_ERR_NOMEM, "%s: %s: out of memory", path, name);
        } else if (cnt > 0 && H5Dread(d, mt, H5S_ALL, H5S_ALL, H5P_DEFAULT, raw) < 0) {
            st = h5u_fail(ML_ERR_FORMAT, path, name, "cannot read dataset");
        } else {
            char *s = (char *)(v + cnt);
            for (size_t i = 0; i < cnt; i++) {
                v[i] = s + i * (len + 1);
                memcpy(v[i], raw + i * len, len);
                v[i][len] = 0;
            }
            *n = (int)cnt;
        }
        h5u_close(mt);
        ml_free(raw);
        if (st != ML_OK) {
            ml_free(v);
            v = NULL;
        }
    }
    h5u_close(ft);
    H5Dclose(d);
    *out = v;
    return st;
}

/* ------------------------------------------------------------------ summary */

/* A string attribute, silently truncated to the buffer. */
static ml_status attr_str_trunc(hid_t loc, const char *name, char *buf, size_t n, const char *path) {
    const ml_status st = h5u_read_attr_str(loc, name, buf, n, path);
    return st == ML_ERR_ARG ? ML_OK : st;
}

static ml_status read_info(hid_t f, const char *path, SessionInfo *info) {
    int64_t v = 0;
    double x = 0;
    ml_status st = h5u_read_attr_i64(f, "format_version", &v, path);
    if (st != ML_OK) return st;
    info->format_version = (int)v;
    hid_t run = H5Gopen2(f, "run", H5P_DEFAULT);
    if (run < 0) return h5u_fail(ML_ERR_FORMAT, path, "/run", "cannot open group");
    st = attr_str_trunc(run, "moelab_version", info->moelab_version, sizeof info->moelab_version, path);
    if (st == ML_OK) st = attr_str_trunc(run, "created", info->created, sizeof info->created, path);
    if (st == ML_OK) st = attr_str_trunc(run, "dataset", info->dataset, sizeof info->dataset, path);
    if (st == ML_OK)
        st = attr_str_trunc(run, "dataset_spec", info->dataset_spec_out, sizeof info->dataset_spec_out, path);
    if (st == ML_OK) st = attr_str_trunc(run, "head", info->head, sizeof info->head, path);
    if (st == ML_OK) st = attr_str_trunc(run, "backbone", info->backbone, sizeof info->backbone, path);
    if (st == ML_OK) st = h5u_read_attr_f64(run, "width", &x, path);
    info->width = (float)x;
    if (st == ML_OK) st = h5u_read_attr_i64(run, "experts", &v, path);
    info->experts = (int)v;
    if (st == ML_OK) st = h5u_read_attr_i64(run, "k", &v, path);
    info->k = (int)v;
    if (st == ML_OK) st = h5u_read_attr_i64(run, "hidden", &v, path);
    info->hidden = (int)v;
    if (st == ML_OK) st = h5u_read_attr_i64(run, "classes", &v, path);
    info->classes = (int)v;
    if (st == ML_OK) st = h5u_read_attr_i64(run, "epochs", &v, path);
    info->epochs = (int)v;
    if (st == ML_OK) st = h5u_read_attr_u64(run, "seed", &info->seed, path);
    H5Gclose(run);
    if (st != ML_OK) return st;

    /* /status */
    {
        hid_t d = H5Dopen2(f, "status", H5P_DEFAULT);
        hid_t mt = h5u_str_type(SESS_STATUS_LEN), ft = d >= 0 ? H5Dget_type(d) : -1;
        char buf[SESS_STATUS_LEN + 1];
        memset(buf, 0, sizeof buf);
        if (d < 0 || mt < 0 || ft < 0 || H5Tget_class(ft) != H5T_STRING || H5Tget_size(ft) != SESS_STATUS_LEN ||
            H5Dread(d, mt, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) < 0)
            st = h5u_fail(ML_ERR_FORMAT, path, "/status", "cannot read");
        buf[sizeof info->status - 1] = 0;
        memcpy(info->status, buf, sizeof info->status);
        h5u_close(ft);
        h5u_close(mt);
        h5u_close(d);
        if (st != ML_OK) return st;
    }

    /* steps: common length of step and wall_time */
    long ns = rows_of(f, "/steps/step"), nw = rows_of(f, "/steps/wall_time");
    if (ns < 0 || nw < 0)
        return ml_fail(ML_ERR_FORMAT, "%s: /steps/step or /steps/wall_time is missing or unreadable", path);
    if (nw < ns) ns = nw;
    info->steps_logged = ns;
    if (ns > 0) {
        double *sv = NULL, *wv = NULL;
        st = sess_read_rows(f, "/steps/step", (hsize_t)ns, H5T_NATIVE_DOUBLE, (void **)&sv, path);
        if (st == ML_OK) st = sess_read_rows(f, "/steps/wall_time", (hsize_t)ns, H5T_NATIVE_DOUBLE, (void **)&wv, path);
        if (st == ML_OK) {
            info->last_step = (long)sv[ns - 1];
            info->last_wall_time = wv[ns - 1];
        }
        ml_free(sv);
        ml_free(wv);
        if (st != ML_OK) return st;
    }

    /* evals */
    long ne = rows_of(f, "/evals/epoch"), na = rows_of(f, "/evals/test_acc");
    if (ne < 0 || na < 0)
        return ml_fail(ML_ERR_FORMAT, "%s: /evals/epoch or /evals/test_acc is missing or unreadable", path);
    if (na < ne) ne = na;
    info->evals = (int)ne;
    info->last_test_acc = info->best_test_acc = NAN;
    if (ne > 0) {
        double *ev = NULL, *av = NULL;
        st = sess_read_rows(f, "/evals/epoch", (hsize_t)ne, H5T_NATIVE_DOUBLE, (void **)&ev, path);
        if (st == ML_OK) st = sess_read_rows(f, "/evals/test_acc", (hsize_t)ne, H5T_NATIVE_DOUBLE, (void **)&av, path);
        if (st == ML_OK) {
            info->last_epoch = (int)ev[ne - 1];
            info->last_test_acc = av[ne - 1];
            for (long i = 0; i < ne; i++)
                if (isfinite(av[i]) && !(av[i] <= info->best_test_acc)) {
                    info->best_test_acc = av[i];
                    info->best_epoch = (int)ev[i];
                }
        }
        ml_free(ev);
        ml_free(av);
        if (st != ML_OK) return st;
    }
    const long nv = rows_of(f, "/events");
    if (nv < 0) return ml_fail(ML_ERR_FORMAT, "%s: /events is missing or unreadable", path);
    info->events = nv;
    return ML_OK;
}

ml_status session_read_info(const char *dir, SessionInfo *info) {
    h5u_quiet();
    memset(info, 0, sizeof *info);
    info->last_test_acc = info->best_test_acc = NAN;
    char path[H5U_PATH_MAX];
    hid_t f;
    ml_status st = sess_open_read(dir, &f, path, sizeof path);
    if (st != ML_OK) return st;
    st = read_info(f, path, info);
    if (H5Fclose(f) < 0 && st == ML_OK) st = h5u_fail(ML_ERR_FORMAT, path, "", "cannot close");
    H5Eclear2(H5E_DEFAULT);
    if (st != ML_OK) {
        const ml_status keep = st == ML_ERR_NOMEM ? st : ML_ERR_FORMAT;
        memset(info, 0, sizeof *info);
        info->last_test_acc = info->best_test_acc = NAN;
        return keep;
    }
    return ML_OK;
}

ml_status session_read_run_attr(const char *dir, const char *name, char *buf, size_t n) {
    h5u_quiet();
    char path[H5U_PATH_MAX];
    hid_t f;
    if (n) buf[0] = 0;
    ml_status st = sess_open_read(dir, &f, path, sizeof path);
    if (st != ML_OK) return st;
    hid_t run = H5Gopen2(f, "run", H5P_DEFAULT);
    if (run < 0) st = h5u_fail(ML_ERR_FORMAT, path, "/run", "cannot open group");
    else st = h5u_read_attr_str(run, name, buf, n, path);
    h5u_close(run);
    H5Fclose(f);
    H5Eclear2(H5E_DEFAULT);
    return st;
}

ml_status session_read_drops(const char *dir, const char *layer, long row, int K, int E, int *out) {
    h5u_quiet();
    char path[H5U_PATH_MAX], name[96];
    hid_t f;
    ml_status st = sess_open_read(dir, &f, path, sizeof path);
    if (st != ML_OK) return st;
    if (layer && layer[0]) snprintf(name, sizeof name, "/layers/%s/evals/drop_class_expert", layer);
    else snprintf(name, sizeof name, "/evals/drop_class_expert");
    int *buf = NULL;
    if (H5Lexists(f, name, H5P_DEFAULT) <= 0)
        st = ml_fail(ML_ERR_FORMAT, "%s: no %s (a session from before drops per class were recorded)", path, name);
    else {
        hid_t d = H5Dopen2(f, name, H5P_DEFAULT);
        hsize_t dims[4] = {0, 0, 0, 0};
        const int nd = d >= 0 ? h5u_dims(d, dims, 4, 0) : -1;
        h5u_close(d);
        if (nd != 3 || dims[1] != (hsize_t)K || dims[2] != (hsize_t)E || row < 0 || (hsize_t)row >= dims[0])
            st = ml_fail(ML_ERR_FORMAT, "%s: %s has no row %ld of (%d, %d)", path, name, row, K, E);
        else st = sess_read_rows_at(f, name, (hsize_t)row, 1, H5T_NATIVE_INT, (void **)&buf, path);
    }
    if (st == ML_OK) {
        memcpy(out, buf, sizeof(int) * (size_t)K * (size_t)E);
        if (K * E > 0 && out[0] < 0) st = ml_fail(ML_ERR_FORMAT, "%s: %s row %ld holds no counts", path, name, row);
    }
    ml_free(buf);
    H5Fclose(f);
    H5Eclear2(H5E_DEFAULT);
    return st;
}

ml_status session_read_events(const char *dir, SessionEventRow **out, long *n) {
    h5u_quiet();
    *out = NULL;
    *n = 0;
    char path[H5U_PATH_MAX];
    hid_t f;
    ml_status st = sess_open_read(dir, &f, path, sizeof path);
    if (st != ML_OK) return st;
    hid_t d = H5Dopen2(f, "events", H5P_DEFAULT);
    hid_t t = sess_event_type();
    hsize_t dims[1] = {0};
    if (d < 0 || t < 0) st = h5u_fail(ML_ERR_FORMAT, path, "/events", "cannot open");
    else if (h5u_dims(d, dims, 1, 1) != 1) st = h5u_fail(ML_ERR_FORMAT, path, "/events", "not one-dimensional");
    SessEvent *rows = NULL;
    if (st == ML_OK && dims[0] > 0) {
        rows = malloc(sizeof *rows * dims[0]);
        *out = calloc(dims[0], sizeof **out);
        if (!rows || !*out) st = ml_fail(ML_ERR_NOMEM, "%s: out of memory reading /events", path);
        else if (H5Dread(d, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, rows) < 0)
            st = h5u_fail(ML_ERR_FORMAT, path, "/events", "cannot read");
        else {
            for (hsize_t i = 0; i < dims[0]; i++) {
                (*out)[i].step = rows[i].step;
                (*out)[i].wall_time = rows[i].wall_time;
                memcpy((*out)[i].text, rows[i].text, SESS_EVENT_TEXT);
                (*out)[i].text[SESS_EVENT_TEXT - 1] = 0;
            }
            *n = (long)dims[0];
        }
    }
    free(rows);
    if (st != ML_OK) {
        free(*out);
        *out = NULL;
        *n = 0;
    }
    h5u_close(t);
    h5u_close(d);
    H5Fclose(f);
    H5Eclear2(H5E_DEFAULT);
    return st;
}

ml_status session_read_run_attr_alloc(const char *dir, const char *name, char **out) {
    *out = NULL;
    for (size_t n = 4096; n <= ((size_t)64 << 20); n *= 4) {
        char *buf = malloc(n);
        if (!buf) return ml_fail(ML_ERR_NOMEM, "out of memory reading /run@%s", name);
        const ml_status st = session_read_run_attr(dir, name, buf, n);
        if (st == ML_OK) {
            *out = buf;
            return ML_OK;
        }
        free(buf);
        if (st != ML_ERR_ARG) return st; /* ML_ERR_ARG: did not fit */
    }
    return ml_fail(ML_ERR_FORMAT, "%s: /run@%s is longer than 64 MiB", dir, name);
}
