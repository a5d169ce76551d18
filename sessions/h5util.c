/* h5util.c — private HDF5 and file-system helpers of the sessions module (see h5util.h). */
#define _POSIX_C_SOURCE 200809L

#include "h5util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

void h5u_quiet(void) { H5Eset_auto2(H5E_DEFAULT, NULL, NULL); }

typedef struct {
    char first[256]; /* most specific description */
    char sys[256];   /* a description that quotes errno, if any */
} ErrWalk;

/* "file write failed: time = ..., errno = 27, error message = 'File too large', buf = ..."
 * -> "file write failed: File too large (errno 27)". */
static void short_sys(char *out, size_t n, const char *desc) {
    const char *m = strstr(desc, "error message = '");
    const char *en = strstr(desc, "errno = ");
    const char *colon = strchr(desc, ':');
    if (!m) {
        snprintf(out, n, "%s", desc);
        return;
    }
    m += strlen("error message = '");
    const char *q = strchr(m, '\'');
    const int head = colon ? (int)(colon - desc) : 0;
    const int ml = q ? (int)(q - m) : (int)strlen(m);
    const int eno = en ? atoi(en + strlen("errno = ")) : 0;
    if (eno) snprintf(out, n, "%.*s%s%.*s (errno %d)", head, desc, head ? ": " : "", ml, m, eno);
    else snprintf(out, n, "%.*s%s%.*s", head, desc, head ? ": " : "", ml, m);
}

static herr_t err_walk_cb(unsigned n, const H5E_error2_t *e, void *data) {
    ErrWalk *w = data;
    (void)n;
    if (!e->desc || !e->desc[0]) return 0;
    if (!w->first[0]) snprintf(w->first, sizeof w->first, "%s", e->desc);
    if (!w->sys[0] && strstr(e->desc, "errno")) short_sys(w->sys, sizeof w->sys, e->desc);
    return 0;
}

const char *h5u_reason(char *buf, size_t n) {
    ErrWalk w;
    memset(&w, 0, sizeof w);
    H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, err_walk_cb, &w);
    H5Eclear2(H5E_DEFAULT);
    /* a description with fields but no errno ("... name = 'x', tent_flags = 1"): its head only */
    char *eq = w.first[0] && !w.sys[0] ? strstr(w.first, " = ") : NULL;
    if (eq) {
        char *colon = strchr(w.first, ':');
        if (colon && colon < eq) *colon = 0;
    }
    snprintf(buf, n, "%s", w.sys[0] ? w.sys : w.first);
    return buf;
}

ml_status h5u_fail(ml_status st, const char *file, const char *obj, const char *what) {
    char r[256];
    h5u_reason(r, sizeof r);
    const char *why = r[0] ? r : "HDF5 gave no reason";
    if (obj && obj[0]) return ml_fail(st, "%s: %s: %s: %s", file ? file : "?", obj, what, why);
    return ml_fail(st, "%s: %s: %s", file ? file : "?", what, why);
}

void h5u_close(hid_t id) {
    if (id < 0) return;
    switch (H5Iget_type(id)) {
    case H5I_FILE: H5Fclose(id); break;
    case H5I_GROUP: H5Gclose(id); break;
    case H5I_DATASET: H5Dclose(id); break;
    case H5I_DATASPACE: H5Sclose(id); break;
    case H5I_DATATYPE: H5Tclose(id); break;
    case H5I_ATTR: H5Aclose(id); break;
    case H5I_GENPROP_LST: H5Pclose(id); break;
    default: break;
    }
}

hid_t h5u_fapl_latest(void) {
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    if (fapl < 0) return -1;
    if (H5Pset_libver_bounds(fapl, H5F_LIBVER_LATEST, H5F_LIBVER_LATEST) < 0) {
        H5Pclose(fapl);
        return -1;
    }
    return fapl;
}

hid_t h5u_str_type(size_t len) {
    hid_t t = H5Tcopy(H5T_C_S1);
    if (t < 0) return -1;
    if (H5Tset_size(t, len ? len : 1) < 0 || H5Tset_strpad(t, H5T_STR_NULLTERM) < 0 ||
        H5Tset_cset(t, H5T_CSET_UTF8) < 0) {
        H5Tclose(t);
        return -1;
    }
    return t;
}

/* ------------------------------------------------------------------ attributes */

static ml_status attr_write(hid_t loc, const char *name, hid_t type, hid_t space, const void *buf, const char *file) {
    if (H5Aexists(loc, name) > 0 && H5Adelete(loc, name) < 0)
        return h5u_fail(ML_ERR_IO, file, name, "cannot replace attribute");
    hid_t a = H5Acreate2(loc, name, type, space, H5P_DEFAULT, H5P_DEFAULT);
    if (a < 0) return h5u_fail(ML_ERR_IO, file, name, "cannot create attribute");
    herr_t e = H5Awrite(a, type, buf);
    if (H5Aclose(a) < 0) e = -1;
    if (e < 0) return h5u_fail(ML_ERR_IO, file, name, "cannot write attribute");
    return ML_OK;
}

ml_status h5u_attr_str(hid_t loc, const char *name, const char *val, const char *file) {
    if (!val) val = "";
    const size_t len = strlen(val) + 1;
    hid_t t = h5u_str_type(len), s = H5Screate(H5S_SCALAR);
    ml_status st = (t < 0 || s < 0) ? h5u_fail(ML_ERR_IO, file, name, "cannot make string type")
                                    : attr_write(loc, name, t, s, val, file);
    h5u_close(t);
    h5u_close(s);
    return st;
}

static ml_status attr_scalar(hid_t loc, const char *name, hid_t type, const void *v, const char *file) {
    hid_t s = H5Screate(H5S_SCALAR);
    if (s < 0) return h5u_fail(ML_ERR_IO, file, name, "cannot make dataspace");
    ml_status st = attr_write(loc, name, type, s, v, file);
    H5Sclose(s);
    return st;
}

ml_status h5u_attr_i64(hid_t loc, const char *name, int64_t val, const char *file) {
    return attr_scalar(loc, name, H5T_NATIVE_INT64, &val, file);
}

ml_status h5u_attr_u64(hid_t loc, const char *name, uint64_t val, const char *file) {
    hid_t s = H5Screate(H5S_SCALAR);
    if (s < 0) return h5u_fail(ML_ERR_IO, file, name, "cannot make dataspace");
    hid_t a = -1;
    ml_status st = ML_OK;
    if (H5Aexists(loc, name) > 0 && H5Adelete(loc, name) < 0)
        st = h5u_fail(ML_ERR_IO, file, name, "cannot replace attribute");
    else if ((a = H5Acreate2(loc, name, H5T_STD_U64LE, s, H5P_DEFAULT, H5P_DEFAULT)) < 0)
        st = h5u_fail(ML_ERR_IO, file, name, "cannot create attribute");
    else if (H5Awrite(a, H5T_NATIVE_UINT64, &val) < 0) st = h5u_fail(ML_ERR_IO, file, name, "cannot write attribute");
    h5u_close(a);
    H5Sclose(s);
    return st;
}

ml_status h5u_attr_f64(hid_t loc, const char *name, double val, const char *file) {
    return attr_scalar(loc, name, H5T_NATIVE_DOUBLE, &val, file);
}

ml_status h5u_attr_f32v(hid_t loc, const char *name, const float *v, int n, const char *file) {
    hsize_t d = (hsize_t)(n > 0 ? n : 0);
    hid_t s = n > 0 ? H5Screate_simple(1, &d, NULL) : H5Screate(H5S_NULL);
    if (s < 0) return h5u_fail(ML_ERR_IO, file, name, "cannot make dataspace");
    ml_status st = attr_write(loc, name, H5T_NATIVE_FLOAT, s, v, file);
    H5Sclose(s);
    return st;
}

ml_status h5u_attr_strv(hid_t loc, const char *name, const char *const *v, int n, const char *file) {
    size_t len = 1;
    for (int i = 0; i < n; i++) {
        size_t l = strlen(v[i]) + 1;
        if (l > len) len = l;
    }
    char *buf = ml_alloc(len * (size_t)(n > 0 ? n : 1));
    if (!buf) return ml_fail(ML_ERR_NOMEM, "%s: %s: out of memory", file, name);
    for (int i = 0; i < n; i++) memcpy(buf + (size_t)i * len, v[i], strlen(v[i]) + 1);
    hsize_t d = (hsize_t)n;
    hid_t t = h5u_str_type(len), s = n > 0 ? H5Screate_simple(1, &d, NULL) : H5Screate(H5S_NULL);
    ml_status st = (t < 0 || s < 0) ? h5u_fail(ML_ERR_IO, file, name, "cannot make string type")
                                    : attr_write(loc, name, t, s, buf, file);
    h5u_close(t);
    h5u_close(s);
    ml_free(buf);
    return st;
}

ml_status h5u_read_attr_str(hid_t loc, const char *name, char *buf, size_t n, const char *file) {
    if (n == 0) return ml_fail(ML_ERR_ARG, "%s: %s: empty buffer", file, name);
    buf[0] = 0;
    if (H5Aexists(loc, name) <= 0) {
        H5Eclear2(H5E_DEFAULT);
        return ml_fail(ML_ERR_FORMAT, "%s: attribute %s is missing", file, name);
    }
    hid_t a = H5Aopen(loc, name, H5P_DEFAULT);
    if (a < 0) return h5u_fail(ML_ERR_FORMAT, file, name, "cannot open attribute");
    hid_t ft = H5Aget_type(a), sp = H5Aget_space(a);
    ml_status st = ML_OK;
    if (ft < 0 || sp < 0 || H5Tget_class(ft) != H5T_STRING || H5Sget_simple_extent_npoints(sp) != 1) {
        H5Eclear2(H5E_DEFAULT);
        st = ml_fail(ML_ERR_FORMAT, "%s: attribute %s is not a single string", file, name);
    } else if (H5Tis_variable_str(ft) > 0) {
        hid_t mt = H5Tcopy(H5T_C_S1);
        char *s = NULL;
        if (mt < 0 || H5Tset_size(mt, H5T_VARIABLE) < 0 || H5Aread(a, mt, &s) < 0) {
            st = h5u_fail(ML_ERR_FORMAT, file, name, "cannot read attribute");
        } else {
            const size_t l = s ? strlen(s) : 0;
            snprintf(buf, n, "%s", s ? s : "");
            if (l >= n) st = ml_fail(ML_ERR_ARG, "%s: attribute %s is longer than %zu bytes", file, name, n - 1);
            if (s) H5free_memory(s);
        }
        h5u_close(mt);
    } else {
        const size_t sz = H5Tget_size(ft);
        char *tmp = ml_alloc(sz + 1);
        hid_t mt = h5u_str_type(sz);
        if (!tmp || mt < 0) {
            st = ml_fail(ML_ERR_NOMEM, "%s: %s: out of memory", file, name);
        } else if (H5Aread(a, mt, tmp) < 0) {
            st = h5u_fail(ML_ERR_FORMAT, file, name, "cannot read attribute");
        } else {
            tmp[sz] = 0;
            const size_t l = strlen(tmp);
            snprintf(buf, n, "%s", tmp);
            if (l >= n) st = ml_fail(ML_ERR_ARG, "%s: attribute %s is longer than %zu bytes", file, name, n - 1);
        }
        h5u_close(mt);
        ml_free(tmp);
    }
    h5u_close(ft);
    h5u_close(sp);
    H5Aclose(a);
    return st;
}

static ml_status read_attr_num(hid_t loc, const char *name, hid_t mt, void *val, const char *file) {
    if (H5Aexists(loc, name) <= 0) {
        H5Eclear2(H5E_DEFAULT);
        return ml_fail(ML_ERR_FORMAT, "%s: attribute %s is missing", file, name);
    }
    hid_t a = H5Aopen(loc, name, H5P_DEFAULT);
    if (a < 0) return h5u_fail(ML_ERR_FORMAT, file, name, "cannot open attribute");
    hid_t ft = H5Aget_type(a), sp = H5Aget_space(a);
    ml_status st = ML_OK;
    const H5T_class_t cls = ft >= 0 ? H5Tget_class(ft) : H5T_NO_CLASS;
    if (sp < 0 || H5Sget_simple_extent_npoints(sp) != 1 || (cls != H5T_INTEGER && cls != H5T_FLOAT)) {
        H5Eclear2(H5E_DEFAULT);
        st = ml_fail(ML_ERR_FORMAT, "%s: attribute %s is not a single number", file, name);
    } else if (H5Aread(a, mt, val) < 0) {
        st = h5u_fail(ML_ERR_FORMAT, file, name, "cannot read attribute");
    }
    h5u_close(ft);
    h5u_close(sp);
    H5Aclose(a);
    return st;
}

ml_status h5u_read_attr_i64(hid_t loc, const char *name, int64_t *val, const char *file) {
    return read_attr_num(loc, name, H5T_NATIVE_INT64, val, file);
}

ml_status h5u_read_attr_u64(hid_t loc, const char *name, uint64_t *val, const char *file) {
    return read_attr_num(loc, name, H5T_NATIVE_UINT64, val, file);
}

ml_status h5u_read_attr_f64(hid_t loc, const char *name, double *val, const char *file) {
    return read_attr_num(loc, name, H5T_NATIVE_DOUBLE, val, file);
}

/* ------------------------------------------------------------------ whole datasets */

ml_status h5u_write(hid_t loc, const char *path, hid_t file_type, hid_t mem_type, int ndim, const hsize_t *dims,
                    const void *data, const char *file) {
    hid_t s = ndim > 0 ? H5Screate_simple(ndim, dims, NULL) : H5Screate(H5S_SCALAR);
    hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
    ml_status st = ML_OK;
    hid_t d = -1;
    if (s < 0 || lcpl < 0 || H5Pset_create_intermediate_group(lcpl, 1) < 0) {
        st = h5u_fail(ML_ERR_IO, file, path, "cannot prepare dataset");
    } else if ((d = H5Dcreate2(loc, path, file_type, s, lcpl, H5P_DEFAULT, H5P_DEFAULT)) < 0) {
        st = h5u_fail(ML_ERR_IO, file, path, "cannot create dataset");
    } else if (H5Dwrite(d, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) < 0) {
        st = h5u_fail(ML_ERR_IO, file, path, "cannot write dataset");
    }
    if (d >= 0 && H5Dclose(d) < 0 && st == ML_OK) st = h5u_fail(ML_ERR_IO, file, path, "cannot close dataset");
    h5u_close(s);
    h5u_close(lcpl);
    return st;
}

static void shape_text(char *buf, size_t n, int ndim, const hsize_t *dims) {
    size_t o = 0;
    o += (size_t)snprintf(buf + o, n - o, "(");
    for (int i = 0; i < ndim && o < n; i++)
        o += (size_t)snprintf(buf + o, n - o, "%s%llu", i ? ", " : "", (unsigned long long)dims[i]);
    if (o < n) snprintf(buf + o, n - o, ndim == 1 ? ",)" : ")");
}

static ml_status open_checked(hid_t loc, const char *path, int ndim, const hsize_t *dims, const char *file,
                              const char *hint, hid_t *out) {
    *out = -1;
    if (H5Lexists(loc, path, H5P_DEFAULT) <= 0) {
        H5Eclear2(H5E_DEFAULT);
        return ml_fail(ML_ERR_FORMAT, "%s: dataset %s is missing", file, path);
    }
    hid_t d = H5Dopen2(loc, path, H5P_DEFAULT);
    if (d < 0) return h5u_fail(ML_ERR_FORMAT, file, path, "cannot open dataset");
    hsize_t got[8];
    const int r = h5u_dims(d, got, 8, 0);
    int same = r == ndim;
    for (int i = 0; same && i < ndim; i++) same = got[i] == dims[i];
    if (!same) {
        char a[96], b[96];
        if (r < 0) snprintf(a, sizeof a, "an unreadable shape");
        else shape_text(a, sizeof a, r, got);
        shape_text(b, sizeof b, ndim, dims);
        H5Dclose(d);
        H5Eclear2(H5E_DEFAULT);
        return ml_fail(ML_ERR_FORMAT, "%s: dataset %s has shape %s, expected %s%s%s", file, path, a, b,
                       hint && hint[0] ? " " : "", hint ? hint : "");
    }
    *out = d;
    return ML_OK;
}

ml_status h5u_check_shape(hid_t loc, const char *path, int ndim, const hsize_t *dims, const char *file,
                          const char *hint) {
    hid_t d;
    ml_status st = open_checked(loc, path, ndim, dims, file, hint, &d);
    if (st == ML_OK) H5Dclose(d);
    return st;
}

ml_status h5u_read(hid_t loc, const char *path, hid_t mem_type, int ndim, const hsize_t *dims, void *data,
                   const char *file, const char *hint) {
    hid_t d;
    ml_status st = open_checked(loc, path, ndim, dims, file, hint, &d);
    if (st != ML_OK) return st;
    if (H5Dread(d, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) < 0)
        st = h5u_fail(ML_ERR_FORMAT, file, path, "cannot read dataset");
    H5Dclose(d);
    return st;
}

int h5u_dims(hid_t dset, hsize_t *dims, int maxdims, int refresh) {
    if (refresh && H5Drefresh(dset) < 0) return -1;
    hid_t s = H5Dget_space(dset);
    if (s < 0) return -1;
    int r = H5Sget_simple_extent_ndims(s);
    if (r < 0 || r > maxdims) r = -1;
    else if (r > 0 && H5Sget_simple_extent_dims(s, dims, NULL) < 0) r = -1;
    H5Sclose(s);
    return r;
}

/* ------------------------------------------------------------------ file system */

ml_status h5u_mkdirs(const char *dir) {
    char p[H5U_PATH_MAX];
    if (!dir || !dir[0]) return ml_fail(ML_ERR_ARG, "empty session directory name");
    if (snprintf(p, sizeof p, "%s", dir) >= (int)sizeof p) return ml_fail(ML_ERR_ARG, "%s: path too long", dir);
    for (char *s = p + 1;; s++) {
        const char c = *s;
        if (c == '/' || c == 0) {
            *s = 0;
            if (mkdir(p, 0777) != 0 && errno != EEXIST)
                return ml_fail(ML_ERR_IO, "%s: cannot create directory: %s", p, strerror(errno));
            *s = c;
        }
        if (c == 0) break;
    }
    struct stat sb;
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) return ml_fail(ML_ERR_IO, "%s: not a directory", dir);
    return ML_OK;
}

ml_status h5u_fsync_path(const char *path, int is_dir) {
    int fd = open(path, is_dir ? (O_RDONLY | O_DIRECTORY) : O_RDONLY);
    if (fd < 0) return ml_fail(ML_ERR_IO, "%s: cannot open for fsync: %s", path, strerror(errno));
    if (fsync(fd) != 0 && !(is_dir && (errno == EINVAL || errno == EROFS))) {
        const int e = errno;
        close(fd);
        return ml_fail(ML_ERR_IO, "%s: fsync failed: %s", path, strerror(e));
    }
    close(fd);
    return ML_OK;
}

ml_status h5u_path(char *buf, size_t n, const char *dir, const char *name) {
    const int r = snprintf(buf, n, "%s/%s", dir, name);
    if (r < 0 || (size_t)r >= n) return ml_fail(ML_ERR_ARG, "%s/%s: path too long", dir, name);
    return ML_OK;
}

void h5u_iso_time(char *buf, size_t n) {
    time_t now = time(NULL);
    struct tm tmv;
    if (!localtime_r(&now, &tmv) || strftime(buf, n, "%Y-%m-%dT%H:%M:%S%z", &tmv) == 0) snprintf(buf, n, "unknown");
}

double h5u_unix_time(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

uint32_t h5u_crc32(uint32_t crc, const void *data, size_t nbytes) {
    uLong c = crc;
    const unsigned char *p = data;
    while (nbytes > 0) { /* crc32 takes a uInt length */
        const uInt n = nbytes > (1u << 30) ? (1u << 30) : (uInt)nbytes;
        c = crc32(c, p, n);
        p += n;
        nbytes -= n;
    }
    return (uint32_t)c;
}

ml_status h5u_set_crc(hid_t loc, const char *path, uint32_t crc, const char *file) {
    hid_t d = H5Dopen2(loc, path, H5P_DEFAULT);
    if (d < 0) return h5u_fail(ML_ERR_IO, file, path, "cannot reopen to checksum");
    const ml_status st = h5u_attr_i64(d, "crc32", (int64_t)crc, file);
    H5Dclose(d);
    return st;
}

ml_status h5u_check_crc(hid_t loc, const char *path, uint32_t crc, int required, int *had, const char *file) {
    if (had) *had = 0;
    hid_t d = H5Dopen2(loc, path, H5P_DEFAULT);
    if (d < 0) return h5u_fail(ML_ERR_FORMAT, file, path, "cannot open dataset");
    if (H5Aexists(d, "crc32") <= 0) {
        H5Eclear2(H5E_DEFAULT);
        H5Dclose(d);
        if (required)
            return ml_fail(ML_ERR_FORMAT, "%s: %s has no checksum (crc32) though the file says it has: the file is damaged",
                           file, path);
        return ML_OK;
    }
    int64_t want = 0;
    ml_status st = h5u_read_attr_i64(d, "crc32", &want, file);
    H5Dclose(d);
    if (st != ML_OK) return st;
    if (had) *had = 1;
    if ((int64_t)crc != want)
        return ml_fail(ML_ERR_FORMAT, "%s: %s fails its checksum (crc32 %08x, stored %08llx): the file is damaged", file,
                       path, crc, (unsigned long long)want);
    return ML_OK;
}
