/* dataset_h5.c — reading and writing HDF5 dataset files (layout in dataset_h5.h).
 *
 * Writing goes through an ImportSink so that datasets/ (which must not include HDF5) can stream
 * decoded blocks into the file: begin() creates OUT.part with its groups and extendable
 * datasets, append() grows a split and writes one hyperslab, finish() writes mean/std; the file
 * is renamed to OUT only after a successful close. Reading validates before it allocates and
 * reports the innermost HDF5 error message on failure; the HDF5 automatic error printing is
 * switched off for the duration of each call. Files are untrusted input: a forked child reads
 * all their metadata first (see "validation in a child process"), so that a libhdf5 crash on a
 * corrupted file becomes an error message.
 */
#define _POSIX_C_SOURCE 200809L

#include "dataset_h5.h"
#include "h5util.h"
#include "session.h" /* session_isolated_status */

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <hdf5.h>

#define H5DS_MAX_N 100000000LL
#define H5DS_MAX_SIDE 4096
#define H5DS_MAX_CLASSES 100000
#define H5DS_READ_BLOCK 1024
/* compressed data may expand at most this much (deflate's limit is ~1032:1) */
#define H5DS_MAX_RATIO 1100.0
/* how long the validating child may take (metadata, chunk index, labels, two images a split) */
#define H5DS_PROBE_TIMEOUT_MS 30000

/* ---- HDF5 error handling */

typedef struct {
    H5E_auto2_t fn;
    void *data;
} QuietH5;

static void quiet_begin(QuietH5 *q) {
    H5Eget_auto2(H5E_DEFAULT, &q->fn, &q->data);
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
}

static void quiet_end(QuietH5 *q) { H5Eset_auto2(H5E_DEFAULT, q->fn, q->data); }

/* The innermost message on the HDF5 error stack, shortened ("" if none). */
static const char *h5_reason(char buf[160]) { return h5u_reason(buf, 160); }

static ml_status h5_fail(ml_status st, const char *what, const char *action) {
    char r[160];
    h5_reason(r);
    return ml_fail(st, "%s: %s%s%s", what, action, r[0] ? ": " : "", r);
}

/* ---- writer (ImportSink) */

typedef struct {
    char path[4096], part[4096];
    hid_t file;
    hid_t img[2], lab[2];
    hsize_t n[2];
    int c, h, w;
    int begun;
    uint32_t crc_img[2], crc_lab[2]; /* running CRC-32 of what was appended (the datasets' @crc32) */
} H5Writer;

static ml_status attr_str(hid_t loc, const char *name, const char *value) {
    const char *v = value && *value ? value : " ";
    hid_t t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, strlen(v));
    H5Tset_strpad(t, H5T_STR_NULLPAD);
    H5Tset_cset(t, H5T_CSET_UTF8);
    hid_t sp = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(loc, name, t, sp, H5P_DEFAULT, H5P_DEFAULT);
    herr_t r = a < 0 ? -1 : H5Awrite(a, t, v);
    if (a >= 0) H5Aclose(a);
    H5Sclose(sp);
    H5Tclose(t);
    return r < 0 ? ML_ERR_IO : ML_OK;
}

static ml_status attr_i64(hid_t loc, const char *name, long long v) {
    hid_t sp = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(loc, name, H5T_STD_I64LE, sp, H5P_DEFAULT, H5P_DEFAULT);
    herr_t r = a < 0 ? -1 : H5Awrite(a, H5T_NATIVE_LLONG, &v);
    if (a >= 0) H5Aclose(a);
    H5Sclose(sp);
    return r < 0 ? ML_ERR_IO : ML_OK;
}

static ml_status attr_f32v(hid_t loc, const char *name, const float *v, int n) {
    hsize_t d = (hsize_t)n;
    hid_t sp = H5Screate_simple(1, &d, NULL);
    hid_t a = H5Acreate2(loc, name, H5T_IEEE_F32LE, sp, H5P_DEFAULT, H5P_DEFAULT);
    herr_t r = a < 0 ? -1 : H5Awrite(a, H5T_NATIVE_FLOAT, v);
    if (a >= 0) H5Aclose(a);
    H5Sclose(sp);
    return r < 0 ? ML_ERR_IO : ML_OK;
}

static ml_status create_split(H5Writer *w, int split, long n_max) {
    const char *g = split == 0 ? "/train" : "/test";
    hid_t grp = H5Gcreate2(w->file, g, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    if (grp < 0) return h5_fail(ML_ERR_IO, w->part, "cannot create group");
    size_t isize = (size_t)w->c * w->h * w->w;
    hsize_t cn = (hsize_t)((1u << 20) / isize);
    cn = cn < 1 ? 1 : cn > 1024 ? 1024 : cn;
    if (n_max > 0 && (hsize_t)n_max < cn) cn = (hsize_t)n_max; /* small sets: no mostly-empty chunk */
    hsize_t dims[4] = {0, (hsize_t)w->h, (hsize_t)w->w, (hsize_t)w->c};
    hsize_t maxd[4] = {H5S_UNLIMITED, dims[1], dims[2], dims[3]};
    hsize_t chunk[4] = {cn, dims[1], dims[2], dims[3]};
    hid_t sp = H5Screate_simple(4, dims, maxd);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_chunk(dcpl, 4, chunk);
    hid_t dapl = H5Pcreate(H5P_DATASET_ACCESS);
    H5Pset_chunk_cache(dapl, 521, (size_t)32 << 20, 1.0);
    w->img[split] = H5Dcreate2(grp, "images", H5T_STD_U8LE, sp, H5P_DEFAULT, dcpl, dapl);
    H5Sclose(sp);
    H5Pclose(dcpl);
    H5Pclose(dapl);
    hsize_t ld = 0, lmax = H5S_UNLIMITED, lchunk = n_max > 0 && n_max < 4096 ? (hsize_t)n_max : 4096;
    sp = H5Screate_simple(1, &ld, &lmax);
    dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_chunk(dcpl, 1, &lchunk);
    w->lab[split] = H5Dcreate2(grp, "labels", H5T_STD_I32LE, sp, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    H5Sclose(sp);
    H5Pclose(dcpl);
    H5Gclose(grp);
    if (w->img[split] < 0 || w->lab[split] < 0) return h5_fail(ML_ERR_IO, w->part, "cannot create the image datasets");
    return ML_OK;
}

static ml_status sink_begin(void *user, const ImportHeader *h) {
    H5Writer *w = user;
    if (h->c < 1 || h->c > DATASET_MAX_CHANNELS || h->h < 1 || h->w < 1 || h->h > H5DS_MAX_SIDE ||
        h->w > H5DS_MAX_SIDE || h->classes < 1 || h->classes > H5DS_MAX_CLASSES)
        return ml_fail(ML_ERR_ARG, "%s: bad dataset shape %dx%dx%d, %d classes", w->path, h->h, h->w, h->c, h->classes);
    w->c = h->c;
    w->h = h->h;
    w->w = h->w;
    w->file = H5Fcreate(w->part, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    if (w->file < 0) return h5_fail(ML_ERR_IO, w->part, "cannot create");
    w->begun = 1;
    ml_status st = attr_str(w->file, "format", "moelab-dataset");
    if (st == ML_OK) st = attr_i64(w->file, "format_version", DATASET_H5_FORMAT_VERSION);
    if (st == ML_OK) st = attr_str(w->file, "layout", "NHWC");
    if (st == ML_OK) st = attr_str(w->file, "name", h->name);
    if (st == ML_OK) st = attr_str(w->file, "source", h->source);
    if (st == ML_OK) st = attr_i64(w->file, "classes", h->classes);
    if (st != ML_OK) return h5_fail(ML_ERR_IO, w->part, "cannot write attributes");
    /* class names: fixed-length strings (no global heap to trust when reading) */
    size_t width = 1;
    for (int k = 0; k < h->classes; k++) {
        size_t l = h->class_names && h->class_names[k] ? strlen(h->class_names[k]) : 0;
        width = l > width ? l : width;
    }
    hid_t t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, width);
    H5Tset_strpad(t, H5T_STR_NULLPAD);
    H5Tset_cset(t, H5T_CSET_UTF8);
    hsize_t nc = (hsize_t)h->classes;
    hid_t sp = H5Screate_simple(1, &nc, NULL);
    hid_t d = H5Dcreate2(w->file, "class_names", t, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    char *names = calloc((size_t)h->classes, width);
    herr_t r = -1;
    if (d >= 0 && names) {
        for (int k = 0; k < h->classes; k++)
            if (h->class_names && h->class_names[k])
                memcpy(names + (size_t)k * width, h->class_names[k], strlen(h->class_names[k]));
        r = H5Dwrite(d, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, names);
        if (r >= 0 && h5u_attr_i64(d, "crc32", h5u_crc32(h5u_crc32(0, NULL, 0), names, (size_t)h->classes * width),
                                   w->part) != ML_OK)
            r = -1;
    }
    free(names);
    if (d >= 0) H5Dclose(d);
    H5Sclose(sp);
    H5Tclose(t);
    if (r < 0) return h5_fail(ML_ERR_IO, w->part, "cannot write class_names");
    if ((st = create_split(w, 0, h->n_train_max)) != ML_OK) return st;
    return create_split(w, 1, h->n_test_max);
}

static ml_status sink_append(void *user, int split, const uint8_t *nhwc, const int32_t *labels, int n) {
    H5Writer *w = user;
    if (!w->begun || split < 0 || split > 1 || n < 0) return ml_fail(ML_ERR_STATE, "%s: append before begin", w->part);
    if (n == 0) return ML_OK;
    hsize_t at = w->n[split], nn = at + (hsize_t)n;
    hsize_t dims[4] = {nn, (hsize_t)w->h, (hsize_t)w->w, (hsize_t)w->c};
    if (H5Dset_extent(w->img[split], dims) < 0 || H5Dset_extent(w->lab[split], &nn) < 0)
        return h5_fail(ML_ERR_IO, w->part, "cannot extend");
    hsize_t start[4] = {at, 0, 0, 0}, count[4] = {(hsize_t)n, dims[1], dims[2], dims[3]};
    hid_t fs = H5Dget_space(w->img[split]);
    H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, NULL, count, NULL);
    hid_t ms = H5Screate_simple(4, count, NULL);
    herr_t r = H5Dwrite(w->img[split], H5T_NATIVE_UCHAR, ms, fs, H5P_DEFAULT, nhwc);
    H5Sclose(ms);
    H5Sclose(fs);
    if (r >= 0) {
        fs = H5Dget_space(w->lab[split]);
        hsize_t c1 = (hsize_t)n;
        H5Sselect_hyperslab(fs, H5S_SELECT_SET, &at, NULL, &c1, NULL);
        ms = H5Screate_simple(1, &c1, NULL);
        r = H5Dwrite(w->lab[split], H5T_NATIVE_INT32, ms, fs, H5P_DEFAULT, labels);
        H5Sclose(ms);
        H5Sclose(fs);
    }
    if (r < 0) return h5_fail(ML_ERR_IO, w->part, "cannot write images (disk full?)");
    w->n[split] = nn;
    w->crc_img[split] = h5u_crc32(w->crc_img[split], nhwc, (size_t)n * w->c * w->h * w->w);
    w->crc_lab[split] = h5u_crc32(w->crc_lab[split], labels, (size_t)n * sizeof(int32_t));
    return ML_OK;
}

static ml_status sink_finish(void *user, const float *mean, const float *std, const char *stats_source) {
    H5Writer *w = user;
    ml_status st = attr_f32v(w->file, "mean", mean, w->c);
    if (st == ML_OK) st = attr_f32v(w->file, "std", std, w->c);
    if (st == ML_OK) st = attr_str(w->file, "stats_source", stats_source);
    if (st != ML_OK) return h5_fail(ML_ERR_IO, w->part, "cannot write mean/std");
    /* checksums: images and labels of each split, as appended (the file's order) */
    for (int sp = 0; sp < 2 && st == ML_OK; sp++) {
        st = h5u_attr_i64(w->img[sp], "crc32", w->crc_img[sp], w->part);
        if (st == ML_OK) st = h5u_attr_i64(w->lab[sp], "crc32", w->crc_lab[sp], w->part);
    }
    if (st == ML_OK) st = attr_str(w->file, "checksums", "crc32");
    if (st != ML_OK) return h5_fail(ML_ERR_IO, w->part, "cannot write the checksums");
    return ML_OK;
}

static void writer_init(H5Writer *w, ImportSink *sink) {
    memset(w, 0, sizeof *w);
    w->file = -1;
    w->img[0] = w->img[1] = w->lab[0] = w->lab[1] = -1;
    w->crc_img[0] = w->crc_img[1] = w->crc_lab[0] = w->crc_lab[1] = h5u_crc32(0, NULL, 0);
    sink->user = w;
    sink->begin = sink_begin;
    sink->append = sink_append;
    sink->finish = sink_finish;
}

static ml_status writer_paths(H5Writer *w, const char *path) {
    int k1 = snprintf(w->path, sizeof w->path, "%s", path);
    int k2 = snprintf(w->part, sizeof w->part, "%s.part", path);
    if (k1 < 0 || k2 < 0 || (size_t)k2 >= sizeof w->part) return ml_fail(ML_ERR_ARG, "%s: path too long", path);
    return ML_OK;
}

/* Closes everything; on success renames OUT.part to OUT, else removes OUT.part.
 *
 * A failed import (a full disk, most often) must still close its file: when H5Fclose cannot
 * flush, libhdf5 keeps the file open and its exit-time cleanup tries again and crashes. So
 * everything is flushed first; if that (or anything before) failed, the .part file is thrown
 * away anyway, and the library's descriptor is pointed at /dev/null: the final flush then
 * succeeds into nowhere, the file really closes, and OUT.part is removed. */
static int read_attr_int(hid_t loc, const char *name, long long *v);
static uint32_t attrs_crc(hid_t f, int *ok);

static ml_status writer_close(H5Writer *w, ml_status st) {
    /* the root attributes' checksum, last: every attribute is written by now */
    if (w->file >= 0 && st == ML_OK) {
        int ok = 0;
        const uint32_t crc = attrs_crc(w->file, &ok);
        if (!ok || attr_i64(w->file, "attrs_crc32", (long long)crc) != ML_OK)
            st = h5_fail(ML_ERR_IO, w->part, "cannot write the attributes' checksum");
    }
    if (w->file >= 0 && st == ML_OK && H5Fflush(w->file, H5F_SCOPE_GLOBAL) < 0)
        st = h5_fail(ML_ERR_IO, w->part, "cannot write (disk full?)");
    if (w->file >= 0 && st != ML_OK) {
        void *h = NULL;
        const int null = open("/dev/null", O_RDWR | O_CLOEXEC);
        H5Eclear2(H5E_DEFAULT);
        if (null >= 0 && H5Fget_vfd_handle(w->file, H5P_DEFAULT, &h) >= 0 && h) dup2(null, *(int *)h);
        if (null >= 0) close(null);
        H5Eclear2(H5E_DEFAULT);
        /* what is still dirty goes nowhere; without this second flush, libhdf5 1.10 keeps the file
         * half-closed after the failed write and its exit-time cleanup crashes (SIGSEGV) */
        if (H5Fflush(w->file, H5F_SCOPE_GLOBAL) < 0) H5Eclear2(H5E_DEFAULT);
    }
    for (int s = 0; s < 2; s++) {
        if (w->img[s] >= 0) H5Dclose(w->img[s]);
        if (w->lab[s] >= 0) H5Dclose(w->lab[s]);
        w->img[s] = w->lab[s] = -1;
    }
    const herr_t cr = w->file >= 0 ? H5Fclose(w->file) : 0;
    if (cr < 0 && st == ML_OK)
        st = h5_fail(ML_ERR_IO, w->part, "cannot close (disk full?)");
    H5Eclear2(H5E_DEFAULT);
    w->file = -1;
    if (w->begun) {
        if (st == ML_OK && rename(w->part, w->path) != 0)
            st = ml_fail(ML_ERR_IO, "%s: cannot rename %s into place: %s", w->path, w->part, strerror(errno));
        if (st != ML_OK && unlink(w->part) == 0) {
            char msg[1024];
            snprintf(msg, sizeof msg, "%s", ml_last_error());
            st = ml_fail(st, "%s (%s was not written; its partial file is removed)", msg, w->path);
        }
    }
    return st;
}

ml_status dataset_h5_save(const Dataset *ds, const char *path) {
    QuietH5 q;
    quiet_begin(&q);
    H5Writer w;
    ImportSink sink;
    writer_init(&w, &sink);
    ml_status st = writer_paths(&w, path);
    if (st == ML_OK) st = dataset_export(ds, &sink, 1024);
    st = writer_close(&w, st);
    quiet_end(&q);
    return st;
}

ml_status dataset_h5_import_folder(const ImgScan *scan, const char *path, const ImportOptions *opt, ImportReport *rep) {
    QuietH5 q;
    quiet_begin(&q);
    H5Writer w;
    ImportSink sink;
    writer_init(&w, &sink);
    ml_status st = writer_paths(&w, path);
    if (st == ML_OK) st = imgfolder_import(scan, opt, &sink, rep);
    if (st == ML_OK) {
        int size = opt ? opt->size : 64;
        if (attr_i64(w.file, "image_size", size) != ML_OK ||
            attr_i64(w.file, "skipped_unreadable", rep->unreadable) != ML_OK ||
            attr_i64(w.file, "non_image_files", scan->non_image) != ML_OK ||
            attr_i64(w.file, "empty_classes", scan->empty_classes) != ML_OK ||
            attr_i64(w.file, "missing_files", scan->missing) != ML_OK)
            st = h5_fail(ML_ERR_IO, w.part, "cannot write attributes");
    }
    st = writer_close(&w, st);
    quiet_end(&q);
    return st;
}

/* ---- reader */

/* Reads a scalar string attribute (vlen or fixed) into out; 0 when absent or not a string. */
static int read_attr_str(hid_t loc, const char *name, char *out, size_t cap) {
    out[0] = 0;
    if (H5Aexists(loc, name) <= 0) return 0;
    hid_t a = H5Aopen(loc, name, H5P_DEFAULT);
    if (a < 0) return 0;
    hid_t t = H5Aget_type(a), sp = H5Aget_space(a);
    int ok = 0;
    if (t >= 0 && sp >= 0 && H5Tget_class(t) == H5T_STRING && H5Sget_simple_extent_npoints(sp) == 1) {
        hid_t mt = H5Tcopy(H5T_C_S1);
        H5Tset_cset(mt, H5Tget_cset(t)); /* no conversion between character sets */
        /* variable-length strings live in the global heap, which libhdf5 does not validate
         * against corruption: only fixed-length strings are read */
        size_t sz = H5Tis_variable_str(t) == 0 ? H5Tget_size(t) : 0;
        if (sz > 0 && sz < 65536) {
            char *v = calloc(1, sz + 1);
            H5Tset_size(mt, sz);
            H5Tset_strpad(mt, H5Tget_strpad(t));
            if (v && H5Aread(a, mt, v) >= 0) {
                snprintf(out, cap, "%.*s", (int)sz, v);
                ok = 1;
            }
            free(v);
        }
        H5Tclose(mt);
    }
    if (t >= 0) H5Tclose(t);
    if (sp >= 0) H5Sclose(sp);
    H5Aclose(a);
    for (char *p = out; *p; p++)
        if ((unsigned char)*p < 0x20) *p = '?';
    return ok;
}

/* Reads an integer scalar attribute; 0 when absent or not an integer scalar. */
static int read_attr_int(hid_t loc, const char *name, long long *v) {
    if (H5Aexists(loc, name) <= 0) return 0;
    hid_t a = H5Aopen(loc, name, H5P_DEFAULT);
    if (a < 0) return 0;
    hid_t t = H5Aget_type(a), sp = H5Aget_space(a);
    int ok = t >= 0 && sp >= 0 && H5Tget_class(t) == H5T_INTEGER && H5Sget_simple_extent_npoints(sp) == 1 &&
             H5Aread(a, H5T_NATIVE_LLONG, v) >= 0;
    if (t >= 0) H5Tclose(t);
    if (sp >= 0) H5Sclose(sp);
    H5Aclose(a);
    return ok;
}

/* Reads a float attribute of exactly n elements; 0 otherwise. */
static int read_attr_f32v(hid_t loc, const char *name, float *v, int n) {
    if (H5Aexists(loc, name) <= 0) return 0;
    hid_t a = H5Aopen(loc, name, H5P_DEFAULT);
    if (a < 0) return 0;
    hid_t t = H5Aget_type(a), sp = H5Aget_space(a);
    int ok = t >= 0 && sp >= 0 && H5Tget_class(t) == H5T_FLOAT && H5Sget_simple_extent_npoints(sp) == n &&
             H5Aread(a, H5T_NATIVE_FLOAT, v) >= 0;
    if (t >= 0) H5Tclose(t);
    if (sp >= 0) H5Sclose(sp);
    H5Aclose(a);
    return ok;
}

/* The root attributes moelab reads or writes, in the order attrs_crc32 covers them. */
static const char *const covered_attrs[] = {"format",       "format_version",     "layout",          "name",
                                            "source",       "classes",            "mean",            "std",
                                            "stats_source", "checksums",          "image_size",      "skipped_unreadable",
                                            "non_image_files", "empty_classes",   "missing_files"};

static uint32_t crc_bytes(uint32_t crc, const void *p, size_t n) { return h5u_crc32(crc, p, n); }

/* The CRC-32 of the root attributes as the reader sees them (root @attrs_crc32): for each name of
 * covered_attrs, its name with its NUL, then '-' when absent, 'i' and the value as 8 little-endian
 * bytes (an integer scalar), 'f', the count and each value's IEEE bits as 4 little-endian bytes (a
 * float vector of 1-16), 's' and the text with its NUL (a fixed-length string, as read_attr_str
 * gives it), or '?' (anything else). 0 (and *ok = 0) when an attribute cannot be read. */
static uint32_t attrs_crc(hid_t f, int *ok) {
    uint32_t crc = h5u_crc32(0, NULL, 0);
    *ok = 1;
    for (size_t i = 0; i < sizeof covered_attrs / sizeof covered_attrs[0]; i++) {
        const char *name = covered_attrs[i];
        crc = crc_bytes(crc, name, strlen(name) + 1);
        const htri_t ex = H5Aexists(f, name);
        if (ex < 0) {
            *ok = 0;
            return 0;
        }
        if (ex == 0) {
            crc = crc_bytes(crc, "-", 1);
            continue;
        }
        hid_t a = H5Aopen(f, name, H5P_DEFAULT);
        if (a < 0) {
            *ok = 0;
            return 0;
        }
        hid_t t = H5Aget_type(a), sp = H5Aget_space(a);
        const H5T_class_t cl = t >= 0 ? H5Tget_class(t) : H5T_NO_CLASS;
        const hssize_t np = sp >= 0 ? H5Sget_simple_extent_npoints(sp) : -1;
        if (t >= 0) H5Tclose(t);
        if (sp >= 0) H5Sclose(sp);
        H5Aclose(a);
        unsigned char b[1 + 1 + 4 * DATASET_MAX_CHANNELS];
        if (cl == H5T_INTEGER && np == 1) {
            long long v = 0;
            if (!read_attr_int(f, name, &v)) {
                *ok = 0;
                return 0;
            }
            b[0] = 'i';
            for (int k = 0; k < 8; k++) b[1 + k] = (unsigned char)((unsigned long long)v >> (8 * k));
            crc = crc_bytes(crc, b, 9);
        } else if (cl == H5T_FLOAT && np >= 1 && np <= DATASET_MAX_CHANNELS) {
            float v[DATASET_MAX_CHANNELS];
            if (!read_attr_f32v(f, name, v, (int)np)) {
                *ok = 0;
                return 0;
            }
            b[0] = 'f';
            b[1] = (unsigned char)np;
            for (int e = 0; e < (int)np; e++) {
                uint32_t u;
                memcpy(&u, &v[e], 4);
                for (int k = 0; k < 4; k++) b[2 + 4 * e + k] = (unsigned char)(u >> (8 * k));
            }
            crc = crc_bytes(crc, b, 2 + 4 * (size_t)np);
        } else if (cl == H5T_STRING && np == 1) {
            char v[4096];
            if (!read_attr_str(f, name, v, sizeof v)) {
                *ok = 0;
                return 0;
            }
            crc = crc_bytes(crc, "s", 1);
            crc = crc_bytes(crc, v, strlen(v) + 1);
        } else
            crc = crc_bytes(crc, "?", 1);
    }
    return crc;
}

typedef struct {
    hid_t img, lab;
    hsize_t dims[4]; /* N, H, W, C */
    int required;    /* the file says every dataset has @crc32 */
    int verified;    /* datasets whose @crc32 matched */
} SplitH5;

/* Compares crc with dataset d's @crc32 (named `name` in messages). */
static ml_status check_crc(hid_t d, const char *name, uint32_t crc, SplitH5 *s, const char *what) {
    if (H5Aexists(d, "crc32") <= 0) {
        H5Eclear2(H5E_DEFAULT);
        if (s->required)
            return ml_fail(ML_ERR_FORMAT, "%s: %s has no checksum (crc32) though the file says it has: the file is damaged",
                           what, name);
        return ML_OK;
    }
    long long want = 0;
    if (!read_attr_int(d, "crc32", &want))
        return ml_fail(ML_ERR_FORMAT, "%s: %s: its checksum attribute cannot be read: the file is damaged", what, name);
    if ((long long)crc != want)
        return ml_fail(ML_ERR_FORMAT,
                       "%s: %s fails its checksum (crc32 %08x, stored %08llx): the file is damaged; import it again "
                       "(moelab data import)",
                       what, name, crc, (unsigned long long)want);
    s->verified++;
    return ML_OK;
}

static void split_close(SplitH5 *s) {
    if (s->img >= 0) H5Dclose(s->img);
    if (s->lab >= 0) H5Dclose(s->lab);
    s->img = s->lab = -1;
}

/* Whether dataset d really stores `want` bytes (allowing for compression). */
static int storage_covers(hid_t d, double want) {
    if (want <= 0) return 1;
    double have = (double)H5Dget_storage_size(d);
    hid_t dcpl = H5Dget_create_plist(d);
    int nf = dcpl >= 0 ? H5Pget_nfilters(dcpl) : 0;
    if (dcpl >= 0) H5Pclose(dcpl);
    return nf > 0 ? want <= have * H5DS_MAX_RATIO : want <= have;
}

static ml_status split_open(hid_t f, const char *what, const char *g, SplitH5 *s) {
    s->img = s->lab = -1;
    char name[64];
    snprintf(name, sizeof name, "%s/images", g);
    if (H5Lexists(f, g, H5P_DEFAULT) <= 0 || H5Lexists(f, name, H5P_DEFAULT) <= 0)
        return ml_fail(ML_ERR_FORMAT, "%s: missing dataset %s: not a moelab dataset file", what, name);
    s->img = H5Dopen2(f, name, H5P_DEFAULT);
    if (s->img < 0) return h5_fail(ML_ERR_FORMAT, what, "cannot open the images dataset");
    hid_t t = H5Dget_type(s->img), sp = H5Dget_space(s->img);
    int rank = sp >= 0 ? H5Sget_simple_extent_ndims(sp) : -1;
    int type_ok = t >= 0 && H5Tget_class(t) == H5T_INTEGER && H5Tget_size(t) == 1;
    if (rank == 4) H5Sget_simple_extent_dims(sp, s->dims, NULL);
    if (t >= 0) H5Tclose(t);
    if (sp >= 0) H5Sclose(sp);
    if (rank != 4) return ml_fail(ML_ERR_FORMAT, "%s: %s has rank %d: expected 4 (N, H, W, C)", what, name, rank);
    if (!type_ok) return ml_fail(ML_ERR_FORMAT, "%s: %s is not 8-bit integer data", what, name);
    if (s->dims[0] > (hsize_t)H5DS_MAX_N || s->dims[1] < 1 || s->dims[1] > H5DS_MAX_SIDE || s->dims[2] < 1 ||
        s->dims[2] > H5DS_MAX_SIDE || s->dims[3] < 1 || s->dims[3] > DATASET_MAX_CHANNELS)
        return ml_fail(ML_ERR_FORMAT,
                       "%s: %s has shape (%llu, %llu, %llu, %llu): expected N <= %lld, H and W "
                       "in 1..%d, C in 1..%d",
                       what, name, (unsigned long long)s->dims[0], (unsigned long long)s->dims[1],
                       (unsigned long long)s->dims[2], (unsigned long long)s->dims[3], H5DS_MAX_N, H5DS_MAX_SIDE,
                       DATASET_MAX_CHANNELS);
    double bytes = (double)s->dims[0] * s->dims[1] * s->dims[2] * s->dims[3];
    if (!storage_covers(s->img, bytes))
        return ml_fail(ML_ERR_FORMAT,
                       "%s: %s declares %.0f bytes of images but the file stores only %llu "
                       "(truncated or unwritten)",
                       what, name, bytes, (unsigned long long)H5Dget_storage_size(s->img));
    snprintf(name, sizeof name, "%s/labels", g);
    if (H5Lexists(f, name, H5P_DEFAULT) <= 0) return ml_fail(ML_ERR_FORMAT, "%s: missing dataset %s", what, name);
    s->lab = H5Dopen2(f, name, H5P_DEFAULT);
    if (s->lab < 0) return h5_fail(ML_ERR_FORMAT, what, "cannot open the labels dataset");
    t = H5Dget_type(s->lab);
    sp = H5Dget_space(s->lab);
    rank = sp >= 0 ? H5Sget_simple_extent_ndims(sp) : -1;
    hsize_t ln = 0;
    if (rank == 1) H5Sget_simple_extent_dims(sp, &ln, NULL);
    type_ok = t >= 0 && H5Tget_class(t) == H5T_INTEGER && H5Tget_size(t) <= 8;
    size_t lsize = t >= 0 ? H5Tget_size(t) : 0;
    if (t >= 0) H5Tclose(t);
    if (sp >= 0) H5Sclose(sp);
    if (rank != 1 || !type_ok) return ml_fail(ML_ERR_FORMAT, "%s: %s: expected a 1-D integer dataset", what, name);
    if (ln != s->dims[0])
        return ml_fail(ML_ERR_FORMAT, "%s: %s has %llu entries but there are %llu images", what, name,
                       (unsigned long long)ln, (unsigned long long)s->dims[0]);
    if (!storage_covers(s->lab, (double)ln * lsize))
        return ml_fail(ML_ERR_FORMAT, "%s: %s is truncated or unwritten", what, name);
    return ML_OK;
}

/* Reads images [at, at + m) of a split (NHWC) into blk. */
static ml_status read_rows(const SplitH5 *s, hid_t fs, const char *what, const char *g, hsize_t at, hsize_t m,
                           uint8_t *blk) {
    hsize_t start[4] = {at, 0, 0, 0}, count[4] = {m, s->dims[1], s->dims[2], s->dims[3]};
    H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, NULL, count, NULL);
    hid_t ms = H5Screate_simple(4, count, NULL);
    herr_t r = H5Dread(s->img, H5T_NATIVE_UCHAR, ms, fs, H5P_DEFAULT, blk);
    H5Sclose(ms);
    if (r < 0) {
        char why[64];
        snprintf(why, sizeof why, "cannot read %s/images at image %llu", g, (unsigned long long)at);
        return h5_fail(ML_ERR_FORMAT, what, why);
    }
    return ML_OK;
}

/* Reads all labels of a split into labels[N] and checks their range. */
static ml_status read_labels(const SplitH5 *s, const char *what, const char *g, int classes, int32_t *labels) {
    const hsize_t N = s->dims[0];
    if (N > 0 && H5Dread(s->lab, H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, labels) < 0) {
        char why[64];
        snprintf(why, sizeof why, "cannot read %s/labels", g);
        return h5_fail(ML_ERR_FORMAT, what, why);
    }
    for (hsize_t i = 0; i < N; i++)
        if (labels[i] < 0 || labels[i] >= classes)
            return ml_fail(ML_ERR_FORMAT, "%s: %s/labels[%llu] = %d out of range: expected 0..%d", what, g,
                           (unsigned long long)i, labels[i], classes - 1);
    return ML_OK;
}

/* Reads one split into (N, C, H, W), block by block. */
static ml_status split_read(SplitH5 *s, const char *what, const char *g, int classes, DatasetSplit *out) {
    const hsize_t N = s->dims[0], H = s->dims[1], W = s->dims[2], C = s->dims[3];
    const size_t hw = (size_t)H * W, isize = hw * C;
    out->images = ml_alloc((size_t)N * isize);
    out->labels = ml_alloc((size_t)N * sizeof(int32_t));
    uint8_t *blk = ml_alloc((size_t)H5DS_READ_BLOCK * isize);
    ml_status st = ML_OK;
    if (!out->images || !out->labels || !blk)
        st = ml_fail(ML_ERR_NOMEM, "%s: out of memory for %llu images of %llux%llux%llu", what, (unsigned long long)N,
                     (unsigned long long)H, (unsigned long long)W, (unsigned long long)C);
    out->n = (int)N;
    uint32_t crc = h5u_crc32(0, NULL, 0);
    hid_t fs = s->img >= 0 ? H5Dget_space(s->img) : -1;
    for (hsize_t at = 0; st == ML_OK && at < N; at += H5DS_READ_BLOCK) {
        hsize_t m = N - at < H5DS_READ_BLOCK ? N - at : H5DS_READ_BLOCK;
        if ((st = read_rows(s, fs, what, g, at, m, blk)) != ML_OK) break;
        crc = h5u_crc32(crc, blk, (size_t)m * isize);
        long mm = (long)m;
#pragma omp parallel for schedule(static)
        for (long i = 0; i < mm; i++) {
            const uint8_t *src = blk + (size_t)i * isize;
            uint8_t *dst = out->images + (size_t)(at + (hsize_t)i) * isize;
            for (size_t p = 0; p < hw; p++)
                for (size_t ch = 0; ch < C; ch++) dst[ch * hw + p] = src[p * C + ch];
        }
    }
    if (fs >= 0) H5Sclose(fs);
    ml_free(blk);
    char name[64];
    snprintf(name, sizeof name, "%s/images", g);
    if (st == ML_OK) st = check_crc(s->img, name, crc, s, what);
    /* labels: the range check first (its message names the row), then the checksum */
    if (st == ML_OK) st = read_labels(s, what, g, classes, out->labels);
    snprintf(name, sizeof name, "%s/labels", g);
    if (st == ML_OK)
        st = check_crc(s->lab, name, h5u_crc32(h5u_crc32(0, NULL, 0), out->labels, (size_t)N * sizeof(int32_t)), s,
                       what);
    return st;
}

/* ---- validation in a child process (probe mode)
 *
 * libhdf5 1.10 can crash (heap overflow, use after free, allocations of terabytes) or hang on
 * corrupted metadata (tests/fuzz_h5.c finds such files). Before the in-process load, a forked
 * child (ml_run_isolated) opens the file and makes every metadata access the load makes:
 * attributes, dataset shapes, types and layouts, class names, every chunk-index lookup, all
 * labels, and the first and last image of each split through the same read path. The pixel
 * data in between is not read (an ImageNet-64 import is ~15 GB): it is plain bytes, except
 * under a filter; deflate, shuffle and fletcher32 are safe to decode, and with any other filter
 * the child decodes every image too. A crash or hang in the child becomes a "damaged file"
 * error and the parent never touches the file with HDF5. */

/* Checks a split's images chunk by chunk (probe mode): looks up every chunk in the index (the
 * lookups the full read makes, without reading pixels) and refuses a filtered chunk that claims
 * far more than its raw size (the reader allocates what the index claims). *untrusted_filter
 * is set when a filter other than deflate, shuffle and fletcher32 is used. A lookup costs a few
 * microseconds (an ImageNet-64 import has ~16 000 chunks); a file of many millions of chunks
 * would run into the probe's timeout. */
static ml_status chunks_check(const SplitH5 *s, const char *what, const char *g, int *untrusted_filter) {
    *untrusted_filter = 0;
    hid_t dcpl = H5Dget_create_plist(s->img);
    if (dcpl < 0) return h5_fail(ML_ERR_FORMAT, what, "cannot read the images' storage properties");
    hsize_t cd[4] = {0, 0, 0, 0};
    int chunked = H5Pget_layout(dcpl) == H5D_CHUNKED;
    int rank = chunked ? H5Pget_chunk(dcpl, 4, cd) : 0;
    int nf = H5Pget_nfilters(dcpl);
    for (int i = 0; i < nf; i++) {
        unsigned flags = 0, cfg = 0;
        size_t ncd = 0;
        char fname[64];
        H5Z_filter_t id = H5Pget_filter2(dcpl, (unsigned)i, &flags, &ncd, NULL, sizeof fname, fname, &cfg);
        if (id != H5Z_FILTER_DEFLATE && id != H5Z_FILTER_SHUFFLE && id != H5Z_FILTER_FLETCHER32) *untrusted_filter = 1;
    }
    H5Pclose(dcpl);
    if (!chunked) return ML_OK;
    if (rank != 4 || !cd[0] || !cd[1] || !cd[2] || !cd[3])
        return ml_fail(ML_ERR_FORMAT, "%s: %s/images: bad chunk shape", what, g);
    const double raw = (double)cd[0] * cd[1] * cd[2] * cd[3];
    hsize_t n[4], off[4];
    for (int k = 0; k < 4; k++) n[k] = (s->dims[k] + cd[k] - 1) / cd[k];
    for (hsize_t a = 0; a < n[0]; a++)
        for (hsize_t b = 0; b < n[1]; b++)
            for (hsize_t c = 0; c < n[2]; c++)
                for (hsize_t d = 0; d < n[3]; d++) {
                    off[0] = a * cd[0];
                    off[1] = b * cd[1];
                    off[2] = c * cd[2];
                    off[3] = d * cd[3];
                    hsize_t sz = 0;
                    if (H5Dget_chunk_storage_size(s->img, off, &sz) < 0) {
                        char why[96];
                        snprintf(why, sizeof why, "damaged chunk index: cannot look up %s/images at image %llu", g,
                                 (unsigned long long)off[0]);
                        return h5_fail(ML_ERR_FORMAT, what, why);
                    }
                    if (nf > 0 && (double)sz > 2.0 * raw + 65536.0)
                        return ml_fail(ML_ERR_FORMAT,
                                       "%s: %s/images: the chunk at image %llu claims %llu bytes "
                                       "for %.0f bytes of images (damaged chunk index)",
                                       what, g, (unsigned long long)off[0], (unsigned long long)sz, raw);
                }
    return ML_OK;
}

/* The child's stand-in for split_read: the chunk index, the first and the last image (every
 * image under an untrusted filter), all labels. No OpenMP here (not fork-safe). */
static ml_status split_probe(const SplitH5 *s, const char *what, const char *g, int classes) {
    const hsize_t N = s->dims[0];
    const size_t isize = (size_t)s->dims[1] * s->dims[2] * s->dims[3];
    int full = 0;
    ml_status st = chunks_check(s, what, g, &full);
    if (st != ML_OK || N == 0) return st;
    const hsize_t rows = full ? (N < H5DS_READ_BLOCK ? N : H5DS_READ_BLOCK) : 1;
    uint8_t *blk = ml_alloc((size_t)rows * isize);
    int32_t *labels = ml_alloc((size_t)N * sizeof(int32_t));
    if (!blk || !labels) st = ml_fail(ML_ERR_NOMEM, "%s: out of memory for %llu labels", what, (unsigned long long)N);
    hid_t fs = H5Dget_space(s->img);
    if (full) {
        for (hsize_t at = 0; st == ML_OK && at < N; at += rows)
            st = read_rows(s, fs, what, g, at, N - at < rows ? N - at : rows, blk);
    } else {
        if (st == ML_OK) st = read_rows(s, fs, what, g, 0, 1, blk);
        if (st == ML_OK && N > 1) st = read_rows(s, fs, what, g, N - 1, 1, blk);
    }
    if (fs >= 0) H5Sclose(fs);
    if (st == ML_OK) st = read_labels(s, what, g, classes, labels);
    ml_free(blk);
    ml_free(labels);
    return st;
}

/* Reads /class_names (vlen or fixed-length strings). */
static ml_status read_names(hid_t f, const char *what, Dataset *ds, SplitH5 *cs) {
    if (H5Lexists(f, "class_names", H5P_DEFAULT) <= 0)
        return ml_fail(ML_ERR_FORMAT, "%s: missing dataset /class_names", what);
    hid_t d = H5Dopen2(f, "class_names", H5P_DEFAULT);
    if (d < 0) return h5_fail(ML_ERR_FORMAT, what, "cannot open /class_names");
    hid_t t = H5Dget_type(d), sp = H5Dget_space(d);
    ml_status st = ML_OK;
    hsize_t n = 0;
    int rank = sp >= 0 ? H5Sget_simple_extent_ndims(sp) : -1;
    if (rank == 1) H5Sget_simple_extent_dims(sp, &n, NULL);
    if (rank != 1 || t < 0 || H5Tget_class(t) != H5T_STRING)
        st = ml_fail(ML_ERR_FORMAT, "%s: /class_names: expected a 1-D string dataset", what);
    else if (n < 1 || n > H5DS_MAX_CLASSES)
        st = ml_fail(ML_ERR_FORMAT, "%s: /class_names has %llu entries: expected 1..%d", what, (unsigned long long)n,
                     H5DS_MAX_CLASSES);
    char **names = NULL;
    if (st == ML_OK) {
        names = calloc((size_t)n, sizeof *names);
        if (!names) st = ml_fail(ML_ERR_NOMEM, "%s: out of memory", what);
    }
    if (st == ML_OK) {
        hid_t mt = H5Tcopy(H5T_C_S1);
        H5Tset_cset(mt, H5Tget_cset(t)); /* no conversion between character sets */
        if (H5Tis_variable_str(t) != 0) {
            st = ml_fail(ML_ERR_FORMAT,
                         "%s: /class_names holds variable-length strings: expected fixed-length "
                         "strings (h5py: numpy.array(names, dtype='S'))",
                         what);
        } else {
            size_t sz = H5Tget_size(t);
            char *raw = sz > 0 && sz <= 4096 ? calloc((size_t)n, sz) : NULL;
            H5Tset_size(mt, sz > 0 ? sz : 1);
            H5Tset_strpad(mt, H5Tget_strpad(t));
            if (!raw) st = ml_fail(ML_ERR_FORMAT, "%s: /class_names: bad string size %zu", what, sz);
            else if (H5Dread(d, mt, H5S_ALL, H5S_ALL, H5P_DEFAULT, raw) < 0)
                st = h5_fail(ML_ERR_FORMAT, what, "cannot read /class_names");
            else if (cs) /* the checksum of the names as written (fixed width, NUL-padded) */
                st = check_crc(d, "/class_names", h5u_crc32(h5u_crc32(0, NULL, 0), raw, (size_t)n * sz), cs, what);
            for (hsize_t i = 0; st == ML_OK && i < n; i++) {
                const char *v = raw + i * sz;
                size_t l = strnlen(v, sz < 255 ? sz : 255);
                names[i] = malloc(l + 1);
                if (!names[i]) st = ml_fail(ML_ERR_NOMEM, "%s: out of memory", what);
                else {
                    memcpy(names[i], v, l);
                    names[i][l] = 0;
                }
            }
            free(raw);
        }
        H5Tclose(mt);
    }
    for (hsize_t i = 0; st == ML_OK && i < n; i++)
        for (char *p = names[i]; *p; p++)
            if ((unsigned char)*p < 0x20) *p = '?';
    if (t >= 0) H5Tclose(t);
    if (sp >= 0) H5Sclose(sp);
    H5Dclose(d);
    ds->class_names = names;
    ds->classes = (int)n;
    return st;
}

/* Reads the opened file into ds; with `probe`, makes the same metadata accesses without reading
 * the images (see split_probe): ds then gets the class names, shape, name and statistics only. */
static ml_status load_file(Dataset *ds, hid_t f, const char *what, const char *path, int probe) {
    long long ver = 0;
    char s[512];
    if (!read_attr_int(f, "format_version", &ver))
        return ml_fail(ML_ERR_FORMAT,
                       "%s: no format_version attribute: not a dataset file written by `moelab "
                       "data import`",
                       what);
    if (ver < 1 || ver > DATASET_H5_FORMAT_VERSION)
        return ml_fail(ML_ERR_FORMAT, "%s: format_version %lld: this moelab reads version %d", what, ver,
                       DATASET_H5_FORMAT_VERSION);
    /* the root attributes' checksum (files since issue 41): before any of them is trusted */
    int attrs_verified = 0;
    if (H5Aexists(f, "attrs_crc32") > 0) {
        long long want = 0;
        int ok = 0;
        const uint32_t got = attrs_crc(f, &ok);
        if (!read_attr_int(f, "attrs_crc32", &want) || !ok)
            return ml_fail(ML_ERR_FORMAT, "%s: its root attributes cannot be read for their checksum: the file is damaged",
                           what);
        if ((long long)got != want)
            return ml_fail(ML_ERR_FORMAT,
                           "%s: the root attributes (format_version, name, classes, mean, std, stats_source, ...) "
                           "fail their checksum (attrs_crc32 %08x, stored %08llx): the file is damaged; import it "
                           "again (moelab data import)",
                           what, got, (unsigned long long)want);
        attrs_verified = 1;
    }
    if (read_attr_str(f, "layout", s, sizeof s) && strcmp(s, "NHWC") != 0)
        return ml_fail(ML_ERR_FORMAT, "%s: layout '%s': expected NHWC", what, s);
    /* checksums (files since issue 27): the root's @checksums says every dataset has @crc32 */
    SplitH5 cs = {.img = -1, .lab = -1};
    cs.required = read_attr_str(f, "checksums", s, sizeof s) && !strcmp(s, "crc32");
    ml_status st = read_names(f, what, ds, &cs);
    if (st != ML_OK) return st;
    long long k = 0;
    if (read_attr_int(f, "classes", &k) && k != ds->classes)
        return ml_fail(ML_ERR_FORMAT, "%s: classes attribute %lld but /class_names has %d", what, k, ds->classes);
    SplitH5 tr, te;
    st = split_open(f, what, "/train", &tr);
    if (st == ML_OK) st = split_open(f, what, "/test", &te);
    else te.img = te.lab = -1;
    tr.required = te.required = cs.required;
    tr.verified = te.verified = 0;
    if (st == ML_OK && (tr.dims[1] != te.dims[1] || tr.dims[2] != te.dims[2] || tr.dims[3] != te.dims[3]))
        st = ml_fail(ML_ERR_FORMAT,
                     "%s: /test/images shape %llux%llux%llu differs from "
                     "/train/images %llux%llux%llu",
                     what, (unsigned long long)te.dims[1], (unsigned long long)te.dims[2],
                     (unsigned long long)te.dims[3], (unsigned long long)tr.dims[1], (unsigned long long)tr.dims[2],
                     (unsigned long long)tr.dims[3]);
    if (st == ML_OK && tr.dims[0] < 1) st = ml_fail(ML_ERR_FORMAT, "%s: /train/images is empty", what);
    if (st == ML_OK) {
        ds->c = (int)tr.dims[3];
        ds->h = (int)tr.dims[1];
        ds->w = (int)tr.dims[2];
        st = probe ? split_probe(&tr, what, "/train", ds->classes)
                   : split_read(&tr, what, "/train", ds->classes, &ds->train);
    }
    if (st == ML_OK)
        st = probe ? split_probe(&te, what, "/test", ds->classes)
                   : split_read(&te, what, "/test", ds->classes, &ds->test);
    split_close(&tr);
    split_close(&te);
    if (st != ML_OK) return st;
    ds->checksums = !probe && cs.verified + tr.verified + te.verified == 5 /* names, 2 x (images, labels) */
                        ? 1 + attrs_verified
                        : 0;
    if (!read_attr_str(f, "name", ds->name, sizeof ds->name) || !ds->name[0]) {
        const char *b = strrchr(path, '/');
        snprintf(ds->name, sizeof ds->name, "%s", b ? b + 1 : path);
    }
    snprintf(ds->source, sizeof ds->source, "%s", path);
    ds->format = DATASET_FORMAT_H5;
    float mean[DATASET_MAX_CHANNELS], sd[DATASET_MAX_CHANNELS];
    int ok = read_attr_f32v(f, "mean", mean, ds->c) && read_attr_f32v(f, "std", sd, ds->c);
    for (int c = 0; ok && c < ds->c; c++)
        ok = isfinite(mean[c]) && isfinite(sd[c]) && mean[c] >= 0 && mean[c] <= 1 && sd[c] > 0 && sd[c] <= 1;
    if (ok) {
        for (int c = 0; c < DATASET_MAX_CHANNELS; c++) {
            ds->mean[c] = c < ds->c ? mean[c] : 0.0f;
            ds->std[c] = c < ds->c ? sd[c] : 1.0f;
        }
        char src[128];
        if (!read_attr_str(f, "stats_source", src, sizeof src)) snprintf(src, sizeof src, "file attributes");
        snprintf(ds->stats_source, sizeof ds->stats_source, "%.63s", src);
    } else if (!probe) {
        dataset_compute_stats(ds);
        snprintf(ds->stats_source, sizeof ds->stats_source, "computed: train split (file mean/std missing or invalid)");
    }
    return ML_OK;
}

static ml_status load_from(Dataset *ds, hid_t fapl, const char *path, const char *what, int probe) {
    memset(ds, 0, sizeof *ds);
    QuietH5 q;
    quiet_begin(&q);
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, fapl);
    ml_status st;
    if (f < 0) st = h5_fail(ML_ERR_FORMAT, what, "cannot open as HDF5");
    else {
        st = load_file(ds, f, what, path, probe);
        H5Fclose(f);
    }
    H5Eclear2(H5E_DEFAULT);
    quiet_end(&q);
    if (st != ML_OK) dataset_free(ds);
    return st;
}

/* Creates a file-access property list for a file image in memory (core driver). */
static ml_status image_fapl(const void *buf, size_t len, const char *what, hid_t *fapl) {
    QuietH5 q;
    quiet_begin(&q);
    *fapl = H5Pcreate(H5P_FILE_ACCESS);
    herr_t r = *fapl < 0 ? -1 : H5Pset_fapl_core(*fapl, 1 << 16, 0);
    if (r >= 0) r = H5Pset_file_image(*fapl, (void *)buf, len);
    ml_status st = r < 0 ? h5_fail(ML_ERR_NOMEM, what, "cannot set the file image") : ML_OK;
    quiet_end(&q);
    if (st != ML_OK && *fapl >= 0) H5Pclose(*fapl);
    return st;
}

typedef struct {
    const char *path; /* the file, or NULL for the image buf[len] */
    const void *buf;
    size_t len;
    const char *what;
} ProbeArg;

/* Runs in the child. Fault injection for the tests (tests/test_datasets_formats.c):
 * MOELAB_FAULT_DATASET_H5_CRASH=1 (or "segv") makes the validating child crash with SIGSEGV, as
 * libhdf5 does on some corrupted files; "abort" makes it abort(); "hang" makes it sleep past
 * the timeout (MOELAB_DATASET_H5_TIMEOUT_MS shortens the timeout, default 30000). The parent is
 * never affected. */
static ml_status probe_child(void *arg) {
    const ProbeArg *a = arg;
    const char *fault = getenv("MOELAB_FAULT_DATASET_H5_CRASH");
    if (fault && *fault) {
        if (strcmp(fault, "abort") == 0) abort();
        if (strcmp(fault, "hang") == 0)
            for (;;) pause();
        raise(SIGSEGV);
    }
    Dataset ds;
    memset(&ds, 0, sizeof ds);
    hid_t fapl = H5P_DEFAULT;
    ml_status st = a->path ? ML_OK : image_fapl(a->buf, a->len, a->what, &fapl);
    if (st == ML_OK) st = load_from(&ds, fapl, a->path ? a->path : "memory-image.h5", a->what, 1);
    if (fapl != H5P_DEFAULT) H5Pclose(fapl);
    dataset_free(&ds);
    return st;
}

/* Validates the file in a child process; ML_OK when the in-process load may go ahead (also
 * when no child could be started: then the load runs unprotected, as before). */
static ml_status probe(const ProbeArg *a) {
    int timeout_ms = H5DS_PROBE_TIMEOUT_MS;
    const char *t = getenv("MOELAB_DATASET_H5_TIMEOUT_MS");
    if (t && atoi(t) > 0) timeout_ms = atoi(t);
    MlIsolated r;
    if (ml_run_isolated(probe_child, (void *)a, timeout_ms, &r) == ML_ISOLATED_NO_CHILD) {
        ml_log(1, "%s: cannot check the file in a child process (%s): loading it unprotected", a->what, r.msg);
        return ML_OK;
    }
    return session_isolated_status(&r, a->what, timeout_ms); /* the wording of every protected read */
}

ml_status dataset_h5_load(Dataset *ds, const char *path) {
    memset(ds, 0, sizeof *ds);
    if (access(path, R_OK) != 0) return ml_fail(ML_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    ProbeArg a = {path, NULL, 0, path};
    ml_status st = probe(&a);
    if (st != ML_OK) return st;
    return load_from(ds, H5P_DEFAULT, path, path, 0);
}

ml_status dataset_h5_load_image(Dataset *ds, const void *buf, size_t len, const char *what) {
    memset(ds, 0, sizeof *ds);
    if (!buf || len < 8) return ml_fail(ML_ERR_FORMAT, "%s: %zu bytes: too short for an HDF5 file", what, len);
    ProbeArg a = {NULL, buf, len, what};
    hid_t fapl = -1;
    ml_status st = probe(&a);
    if (st == ML_OK) st = image_fapl(buf, len, what, &fapl);
    if (st == ML_OK) {
        st = load_from(ds, fapl, "memory-image.h5", what, 0);
        H5Pclose(fapl);
    }
    return st;
}
