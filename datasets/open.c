/* open.c — opening datasets by spec (dataset_open, dataset_open_with, dataset_detect; declared in
 * dataset.h).
 *
 * A spec string ("fashion-mnist", "mnist", "cifar-10", "cifar-100", "synthetic[:HxWxC[:K[:N]]]",
 * "default", a directory or an HDF5 file, with optional ":" suffixes) maps to a reader (idx.c,
 * cifar.c, imgfolder.c, synthetic.c, or the HDF5 loader sessions/ registers), the format of a
 * directory detected from the files it holds. Named datasets live under /usr/share/datasets, or
 * under $MOELAB_DATA when it is set. The readers use dataset.c (freeing, statistics), never this
 * file: the dispatch sits above them.
 */
#define _POSIX_C_SOURCE 200809L

#include "dataset.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define DATASET_ROOT_DEFAULT "/usr/share/datasets"

static const char *data_root(void) {
    const char *r = getenv("MOELAB_DATA");
    return r && *r ? r : DATASET_ROOT_DEFAULT;
}

static int is_dir(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* Opens the named IDX dataset `name` under the data root. */
static ml_status open_named(Dataset *ds, const char *name) {
    char dir[4096];
    int k = snprintf(dir, sizeof dir, "%s/%s", data_root(), name);
    if (k < 0 || (size_t)k >= sizeof dir) return ml_fail(ML_ERR_ARG, "%s: data directory path too long", name);
    if (!is_dir(dir))
        return ml_fail(ML_ERR_IO,
                       "%s: dataset directory %s not found (set MOELAB_DATA to a directory "
                       "holding %s/%s)",
                       name, dir, name,
                       strcmp(name, "fashion-mnist") == 0 ? ", or install the Debian package dataset-fashion-mnist"
                                                          : "");
    return idx_load_dir(ds, dir, name);
}

/* Parses a decimal integer in [lo, hi] from s[0..len). */
static int parse_int(const char *s, size_t len, long lo, long hi, int *out) {
    if (len == 0 || len > 10) return 0;
    long v = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9') return 0;
        v = v * 10 + (s[i] - '0');
    }
    if (v < lo || v > hi) return 0;
    *out = (int)v;
    return 1;
}

/* "synthetic[:HxWxC[:K[:N]]]": N is the train size, the test size is N/5 (at least 1). */
static ml_status open_synthetic(Dataset *ds, const char *spec) {
    SyntheticOptions o;
    synthetic_defaults(&o);
    const char *p = spec + strlen("synthetic");
    if (*p == 0) return synthetic_generate(ds, &o);
    p++; /* ':' */
    const char *fields[3] = {NULL, NULL, NULL};
    size_t lens[3] = {0, 0, 0};
    int nf = 0;
    for (;;) {
        const char *e = strchr(p, ':');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (nf == 3)
            return ml_fail(ML_ERR_ARG,
                           "dataset spec '%s': too many fields: expected "
                           "synthetic[:HxWxC[:K[:N]]]",
                           spec);
        fields[nf] = p;
        lens[nf] = len;
        nf++;
        if (!e) break;
        p = e + 1;
    }
    /* shape */
    int dims[3] = {0, 0, 0};
    const char *q = fields[0], *end = fields[0] + lens[0];
    for (int d = 0; d < 3; d++) {
        const char *x = q;
        while (x < end && *x != 'x' && *x != 'X') x++;
        if ((d < 2 && x == end) || (d == 2 && x != end) ||
            !parse_int(q, (size_t)(x - q), d == 2 ? 1 : 4, d == 2 ? DATASET_MAX_CHANNELS : 4096, &dims[d]))
            return ml_fail(ML_ERR_ARG,
                           "dataset spec '%s': bad shape '%.*s': expected HxWxC with H, W in "
                           "4..4096 and C in 1..%d (e.g. 32x32x3)",
                           spec, (int)lens[0], fields[0], DATASET_MAX_CHANNELS);
        q = x + 1;
    }
    o.h = dims[0];
    o.w = dims[1];
    o.c = dims[2];
    if (nf >= 2 && !parse_int(fields[1], lens[1], 2, 1000, &o.classes))
        return ml_fail(ML_ERR_ARG,
                       "dataset spec '%s': bad class count '%.*s': expected an integer in "
                       "2..1000",
                       spec, (int)lens[1], fields[1]);
    if (nf >= 3) {
        if (!parse_int(fields[2], lens[2], 1, 100000000, &o.n_train))
            return ml_fail(ML_ERR_ARG,
                           "dataset spec '%s': bad train image count '%.*s': expected an "
                           "integer in 1..100000000",
                           spec, (int)lens[2], fields[2]);
        o.n_test = o.n_train / 5 > 0 ? o.n_train / 5 : 1;
    }
    return synthetic_generate(ds, &o);
}

/* The last component of `path`, without trailing slashes. */
static void path_basename(const char *path, char *out, size_t cap) {
    size_t end = strlen(path);
    while (end > 1 && path[end - 1] == '/') end--;
    size_t start = end;
    while (start > 0 && path[start - 1] != '/') start--;
    size_t len = end - start;
    if (len >= cap) len = cap - 1;
    memcpy(out, path + start, len);
    out[len] = 0;
}

/* ---- format detection */

static dataset_h5_loader_fn h5_loader;

void dataset_set_h5_loader(dataset_h5_loader_fn fn) { h5_loader = fn; }

const char *dataset_format_name(DatasetFormat f) {
    switch (f) {
    case DATASET_FORMAT_IDX: return "IDX (MNIST-style)";
    case DATASET_FORMAT_CIFAR10: return "CIFAR-10 binary";
    case DATASET_FORMAT_CIFAR100: return "CIFAR-100 binary";
    case DATASET_FORMAT_H5: return "HDF5 dataset file";
    case DATASET_FORMAT_TINY_IMAGENET: return "Tiny-ImageNet-200 folder";
    case DATASET_FORMAT_IMAGE_FOLDER: return "image folder (train/<class>/)";
    case DATASET_FORMAT_SYNTHETIC: return "synthetic";
    default: return "unknown";
    }
}

/* dir/name exists (as a regular file when want_dir is 0, as a directory otherwise). */
static int has_entry(const char *dir, const char *name, int want_dir) {
    char p[4096];
    int k = snprintf(p, sizeof p, "%s/%s", dir, name);
    if (k < 0 || (size_t)k >= sizeof p) return 0;
    struct stat st;
    if (stat(p, &st) != 0) return 0;
    return want_dir ? S_ISDIR(st.st_mode) : S_ISREG(st.st_mode);
}

static int has_idx_file(const char *dir) {
    static const char *const names[] = {"train-images-idx3-ubyte", "train-images-idx3-ubyte.gz",
                                        "train-images.idx3-ubyte", "train-images.idx3-ubyte.gz",
                                        "t10k-images-idx3-ubyte",  "t10k-images-idx3-ubyte.gz"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (has_entry(dir, names[i], 0)) return 1;
    return 0;
}

/* HDF5 signature at offset 0 (or at 512, 1024, 2048 after a user block). */
static int is_hdf5_file(const char *path) {
    static const uint8_t sig[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    int found = 0;
    static const long offs[4] = {0, 512, 1024, 2048};
    for (int i = 0; i < 4 && !found; i++) {
        uint8_t b[8];
        if (fseek(f, offs[i], SEEK_SET) != 0 || fread(b, 1, 8, f) != 8) break;
        found = memcmp(b, sig, 8) == 0;
    }
    fclose(f);
    return found;
}

static DatasetFormat detect_dir(const char *dir) {
    if (has_entry(dir, "data_batch_1.bin", 0) || has_entry(dir, "test_batch.bin", 0) ||
        has_entry(dir, "batches.meta.txt", 0))
        return DATASET_FORMAT_CIFAR10;
    if ((has_entry(dir, "train.bin", 0) || has_entry(dir, "test.bin", 0)) &&
        (has_entry(dir, "fine_label_names.txt", 0) || has_entry(dir, "coarse_label_names.txt", 0) ||
         !has_entry(dir, "batches.meta.txt", 0)))
        return DATASET_FORMAT_CIFAR100;
    if (has_idx_file(dir)) return DATASET_FORMAT_IDX;
    if (has_entry(dir, "wnids.txt", 0)) return DATASET_FORMAT_TINY_IMAGENET;
    if (has_entry(dir, "train", 1)) return DATASET_FORMAT_IMAGE_FOLDER;
    return DATASET_FORMAT_UNKNOWN;
}

DatasetFormat dataset_detect(const char *path, char *resolved, size_t cap) {
    if (resolved && cap) snprintf(resolved, cap, "%s", path);
    struct stat st;
    if (!path || stat(path, &st) != 0) return DATASET_FORMAT_UNKNOWN;
    if (S_ISREG(st.st_mode)) return is_hdf5_file(path) ? DATASET_FORMAT_H5 : DATASET_FORMAT_UNKNOWN;
    if (!S_ISDIR(st.st_mode)) return DATASET_FORMAT_UNKNOWN;
    DatasetFormat f = detect_dir(path);
    if (f != DATASET_FORMAT_UNKNOWN) return f;
    /* a parent of the extracted archive */
    static const char *const subs[] = {"cifar-10-batches-bin", "cifar-100-binary", "tiny-imagenet-200"};
    for (size_t i = 0; i < sizeof subs / sizeof subs[0]; i++) {
        if (!has_entry(path, subs[i], 1)) continue;
        char sub[4096];
        int k = snprintf(sub, sizeof sub, "%s/%s", path, subs[i]);
        if (k < 0 || (size_t)k >= sizeof sub) continue;
        f = detect_dir(sub);
        if (f != DATASET_FORMAT_UNKNOWN) {
            if (resolved && cap) snprintf(resolved, cap, "%s", sub);
            return f;
        }
    }
    return DATASET_FORMAT_UNKNOWN;
}

/* ---- spec options */

/* Applies one ":"-suffix option word; returns 0 when it is not an option. */
static int apply_option(const char *w, size_t len, DatasetOpenOptions *o) {
#define IS(s) (len == strlen(s) && memcmp(w, s, len) == 0)
    if (IS("fine")) o->coarse = 0;
    else if (IS("coarse")) o->coarse = 1;
    else if (IS("stats=known")) o->stats = DATASET_STATS_KNOWN;
    else if (IS("stats=computed")) o->stats = DATASET_STATS_COMPUTED;
    else if (IS("stats=kuangliu")) o->stats = DATASET_STATS_KUANGLIU;
    else return 0;
    return 1;
#undef IS
}

static int is_named(const char *s) {
    return strcmp(s, "fashion-mnist") == 0 || strcmp(s, "mnist") == 0 || strcmp(s, "cifar-10") == 0 ||
           strcmp(s, "cifar10") == 0 || strcmp(s, "cifar-100") == 0 || strcmp(s, "cifar100") == 0;
}

/* Splits trailing option words off `spec` into `base` while `spec` itself is neither an
 * existing path nor a named dataset. */
static ml_status split_options(const char *spec, char *base, size_t cap, DatasetOpenOptions *o) {
    int k = snprintf(base, cap, "%s", spec);
    if (k < 0 || (size_t)k >= cap) return ml_fail(ML_ERR_ARG, "dataset spec too long (%zu bytes)", strlen(spec));
    struct stat st;
    DatasetOpenOptions tmp = *o;
    const char *words[8];
    size_t lens[8];
    int nw = 0;
    while (stat(base, &st) != 0 && !is_named(base)) {
        char *colon = strrchr(base, ':');
        if (!colon || nw == 8) break;
        size_t len = strlen(colon + 1);
        DatasetOpenOptions probe = tmp;
        if (!apply_option(colon + 1, len, &probe)) break;
        words[nw] = spec + (colon + 1 - base);
        lens[nw] = len;
        nw++;
        *colon = 0;
    }
    /* apply in written order (a later word wins) */
    for (int i = nw - 1; i >= 0; i--) apply_option(words[i], lens[i], &tmp);
    *o = tmp;
    return ML_OK;
}

/* Opens a path (directory or file) by its detected format. */
static ml_status open_path(Dataset *ds, const char *path, const DatasetOpenOptions *o) {
    struct stat st;
    if (stat(path, &st) != 0) {
        if (errno == ENOENT)
            return ml_fail(ML_ERR_ARG,
                           "%s: unknown dataset: expected fashion-mnist, mnist, cifar-10, "
                           "cifar-100, synthetic[:HxWxC[:K[:N]]], default, a dataset directory "
                           "or an imported .h5 file",
                           path);
        return ml_fail(ML_ERR_IO, "%s: cannot access: %s", path, strerror(errno));
    }
    char dir[4096];
    DatasetFormat f = dataset_detect(path, dir, sizeof dir);
    if (!S_ISDIR(st.st_mode)) {
        if (!S_ISREG(st.st_mode))
            return ml_fail(ML_ERR_ARG,
                           "%s: not a regular file (%s): a dataset is a directory (IDX, CIFAR, image folders) or an "
                           "HDF5 dataset file written by `moelab data import`",
                           path, S_ISFIFO(st.st_mode) ? "a FIFO" : S_ISSOCK(st.st_mode) ? "a socket" : "a device");
        if (f != DATASET_FORMAT_H5 && st.st_size == 0)
            return ml_fail(ML_ERR_ARG,
                           "%s: an empty file (0 bytes), not a dataset: write an HDF5 dataset file with `moelab data "
                           "import SRC %s`, or give a dataset directory",
                           path, path);
        const size_t pl = strlen(path);
        if (f != DATASET_FORMAT_H5 && pl > 3 && !strcmp(path + pl - 3, ".h5"))
            return ml_fail(ML_ERR_FORMAT,
                           "%s: not an HDF5 file (no HDF5 signature: damaged, truncated or not a dataset); write it "
                           "again with `moelab data import SRC %s`",
                           path, path);
        if (f != DATASET_FORMAT_H5)
            return ml_fail(ML_ERR_ARG,
                           "%s: a file that is no dataset: expected a directory holding the four IDX "
                           "files (train-images-idx3-ubyte, ...), a CIFAR directory or an HDF5 "
                           "dataset file (no HDF5 signature found)",
                           path);
        if (!h5_loader)
            return ml_fail(ML_ERR_STATE,
                           "%s: HDF5 dataset files can only be read by the moelab application "
                           "(no HDF5 reader registered with dataset_set_h5_loader)",
                           path);
        memset(ds, 0, sizeof *ds);
        ml_status st5 = h5_loader(ds, path);
        if (st5 == ML_OK && o->stats == DATASET_STATS_COMPUTED) dataset_compute_stats(ds);
        return st5;
    }
    char name[64];
    switch (f) {
    case DATASET_FORMAT_CIFAR10: return cifar_load_dir(ds, dir, 10, o);
    case DATASET_FORMAT_CIFAR100: return cifar_load_dir(ds, dir, 100, o);
    case DATASET_FORMAT_TINY_IMAGENET:
    case DATASET_FORMAT_IMAGE_FOLDER:
        return ml_fail(ML_ERR_ARG,
                       "%s: %s: decode it once with `moelab data import %s OUT.h5 [--size 64]` "
                       "and train on OUT.h5",
                       path, dataset_format_name(f), path);
    default: path_basename(path, name, sizeof name); return idx_load_dir(ds, path, name);
    }
}

/* A named CIFAR set under the data root. */
static ml_status open_named_cifar(Dataset *ds, const char *spec, const DatasetOpenOptions *o) {
    int v = strstr(spec, "100") ? 100 : 10;
    const char *sub = v == 10 ? "cifar-10-batches-bin" : "cifar-100-binary";
    char dir[4096];
    int k = snprintf(dir, sizeof dir, "%s/%s", data_root(), sub);
    if (k < 0 || (size_t)k >= sizeof dir) return ml_fail(ML_ERR_ARG, "%s: data directory path too long", spec);
    if (!is_dir(dir))
        return ml_fail(ML_ERR_IO,
                       "%s: dataset directory %s not found (set MOELAB_DATA to a directory "
                       "holding %s/, extracted from the binary version of the archive)",
                       spec, dir, sub);
    return cifar_load_dir(ds, dir, v, o);
}

ml_status dataset_open(Dataset *ds, const char *spec) { return dataset_open_with(ds, spec, NULL); }

ml_status dataset_open_with(Dataset *ds, const char *spec, const DatasetOpenOptions *opt) {
    memset(ds, 0, sizeof *ds);
    DatasetOpenOptions o = {0, DATASET_STATS_KNOWN};
    if (opt) o = *opt;
    if (!spec || !*spec) spec = "default";
    if (strcmp(spec, "default") == 0) {
        char dir[4096];
        int k = snprintf(dir, sizeof dir, "%s/fashion-mnist", data_root());
        if (k > 0 && (size_t)k < sizeof dir && is_dir(dir)) return idx_load_dir(ds, dir, "fashion-mnist");
        return open_synthetic(ds, "synthetic");
    }
    if (strncmp(spec, "synthetic", 9) == 0 && (spec[9] == 0 || spec[9] == ':')) return open_synthetic(ds, spec);
    char base[4096];
    ml_status st = split_options(spec, base, sizeof base, &o);
    if (st != ML_OK) return st;
    if (strcmp(base, "fashion-mnist") == 0 || strcmp(base, "mnist") == 0) return open_named(ds, base);
    if (strncmp(base, "cifar", 5) == 0 && is_named(base)) return open_named_cifar(ds, base, &o);
    return open_path(ds, base, &o);
}
