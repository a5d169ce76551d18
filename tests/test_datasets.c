/* test_datasets.c — IDX reading (plain and gzip), rejection of malformed files with clear
 * messages, synthetic generation, dataset specs, normalisation statistics and batching.
 *
 * Small IDX sets are written to a fresh directory under /tmp in the exact on-disk format, read
 * back and then corrupted one way at a time. The real Fashion-MNIST is checked when the Debian
 * package dataset-fashion-mnist is installed. Prints one line per check; exits 1 on failure.
 */
#define _GNU_SOURCE

#include "core/common.h"
#include "datasets/dataset.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "check.h"

/* The last error contains every one of the (NULL-terminated) words. */
static int error_has(const char *a, const char *b, const char *c) {
    const char *e = ml_last_error();
    return (!a || strstr(e, a)) && (!b || strstr(e, b)) && (!c || strstr(e, c));
}

/* ---- building IDX files */

static char tmp_root[256];

typedef struct {
    uint8_t *buf;
    size_t len;
} Bytes;

static void be32_put(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

static uint8_t pixel_of(int split, int i, int j) { return (uint8_t)((i * 37 + j * 11 + split * 101) & 255); }

static int32_t label_of(int split, int i, int classes) { return (i * 7 + split) % classes; }

static Bytes idx_images(int split, int n, int rows, int cols) {
    Bytes b;
    b.len = 16 + (size_t)n * rows * cols;
    b.buf = calloc(1, b.len);
    be32_put(b.buf, 0x00000803);
    be32_put(b.buf + 4, (uint32_t)n);
    be32_put(b.buf + 8, (uint32_t)rows);
    be32_put(b.buf + 12, (uint32_t)cols);
    for (int i = 0; i < n; i++)
        for (int j = 0; j < rows * cols; j++) b.buf[16 + (size_t)i * rows * cols + j] = pixel_of(split, i, j);
    return b;
}

static Bytes idx_labels(int split, int n, int classes) {
    Bytes b;
    b.len = 8 + (size_t)n;
    b.buf = calloc(1, b.len);
    be32_put(b.buf, 0x00000801);
    be32_put(b.buf + 4, (uint32_t)n);
    for (int i = 0; i < n; i++) b.buf[8 + i] = (uint8_t)label_of(split, i, classes);
    return b;
}

static void write_file(const char *dir, const char *name, const Bytes *b, int gz) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s%s", dir, name, gz ? ".gz" : "");
    if (gz) {
        gzFile f = gzopen(path, "wb");
        if (!f || (b->len && gzwrite(f, b->buf, (unsigned)b->len) != (int)b->len)) {
            fprintf(stderr, "test setup: cannot write %s\n", path);
            exit(1);
        }
        gzclose(f);
    } else {
        FILE *f = fopen(path, "wb");
        if (!f || fwrite(b->buf, 1, b->len, f) != b->len) {
            fprintf(stderr, "test setup: cannot write %s\n", path);
            exit(1);
        }
        fclose(f);
    }
}

static Bytes read_raw(const char *path) {
    Bytes b = {NULL, 0};
    FILE *f = fopen(path, "rb");
    if (!f) return b;
    fseek(f, 0, SEEK_END);
    b.len = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    b.buf = malloc(b.len + 1);
    if (fread(b.buf, 1, b.len, f) != b.len) b.len = 0;
    fclose(f);
    return b;
}

static void write_raw(const char *path, const uint8_t *buf, size_t len) {
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(buf, 1, len, f) != len) {
        fprintf(stderr, "test setup: cannot write %s\n", path);
        exit(1);
    }
    fclose(f);
}

/* A fresh directory `tmp_root/name`. */
static const char *make_dir(const char *name) {
    static char dir[1024];
    snprintf(dir, sizeof dir, "%s/%s", tmp_root, name);
    if (mkdir(dir, 0755) != 0) {
        fprintf(stderr, "test setup: cannot create %s\n", dir);
        exit(1);
    }
    return dir;
}

#define TR_N 6
#define TE_N 4
#define ROWS 5
#define COLS 7
#define NCLS 3

/* Writes a valid four-file set; `gz_mask` bit i gzips file i. */
static void write_set(const char *dir, int gz_mask) {
    Bytes f[4] = {idx_images(0, TR_N, ROWS, COLS), idx_labels(0, TR_N, NCLS), idx_images(1, TE_N, ROWS, COLS),
                  idx_labels(1, TE_N, NCLS)};
    static const char *names[4] = {"train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte",
                                   "t10k-labels-idx1-ubyte"};
    for (int i = 0; i < 4; i++) {
        write_file(dir, names[i], &f[i], (gz_mask >> i) & 1);
        free(f[i].buf);
    }
}

static int split_matches(const DatasetSplit *s, int split, int n) {
    if (s->n != n || !s->images || !s->labels) return 0;
    for (int i = 0; i < n; i++) {
        if (s->labels[i] != label_of(split, i, NCLS)) return 0;
        for (int j = 0; j < ROWS * COLS; j++)
            if (s->images[(size_t)i * ROWS * COLS + j] != pixel_of(split, i, j)) return 0;
    }
    return 1;
}

static double hand_mean(void) {
    double s = 0;
    for (int i = 0; i < TR_N; i++)
        for (int j = 0; j < ROWS * COLS; j++) s += pixel_of(0, i, j) / 255.0;
    return s / (TR_N * ROWS * COLS);
}

static int is_empty(const Dataset *ds) {
    return ds->train.images == NULL && ds->test.images == NULL && ds->class_names == NULL && ds->train.n == 0 &&
           ds->classes == 0;
}

/* ---- sections */

static void test_common(void) {
    ml_status st = ml_fail(ML_ERR_IO, "file %s at %d", "x.bin", 42);
    check(st == ML_ERR_IO && strcmp(ml_last_error(), "file x.bin at 42") == 0,
          "ml_fail returns the status and sets the message");
    ml_fail(ML_ERR_FORMAT, "outer: %s", ml_last_error());
    check(strcmp(ml_last_error(), "outer: file x.bin at 42") == 0, "ml_fail may quote the previous message");
    ml_fail(ML_ERR_ARG, "line1\nline2");
    check(strchr(ml_last_error(), '\n') == NULL, "ml_fail keeps messages on one line");
    void *p = ml_alloc(100);
    int zero = 1;
    for (int i = 0; p && i < 100; i++) zero &= ((uint8_t *)p)[i] == 0;
    check(p && ((uintptr_t)p % 64) == 0 && zero, "ml_alloc is 64-byte aligned and zeroed");
    ml_free(p);
    void *z = ml_alloc(0);
    check(z != NULL, "ml_alloc(0) returns a valid allocation");
    ml_free(z);
    double t0 = ml_now(), t1 = ml_now();
    check(t0 > 0 && t1 >= t0, "ml_now is monotonic");
}

static char log_seen[256];
static void log_capture(int level, const char *msg, void *user) {
    snprintf(log_seen, sizeof log_seen, "%d:%s:%s", level, msg, (const char *)user);
}

static void test_log(void) {
    ml_log_set(log_capture, "u");
    ml_log(1, "value %d", 7);
    check(strcmp(log_seen, "1:value 7:u") == 0, "ml_log goes to the installed sink");
    ml_log_set(NULL, NULL);
}

static void test_idx_read(void) {
    Dataset ds;
    const char *dir = make_dir("plain");
    write_set(dir, 0);
    ml_status st = idx_load_dir(&ds, dir, "tiny");
    check(st == ML_OK, "plain IDX set loads%s%s", st ? ": " : "", st ? ml_last_error() : "");
    check(ds.train.n == TR_N && ds.test.n == TE_N, "plain: image counts %d/%d", ds.train.n, ds.test.n);
    check(ds.c == 1 && ds.h == ROWS && ds.w == COLS, "plain: shape (1, %d, %d)", ds.h, ds.w);
    check(ds.classes == NCLS, "plain: classes = max label + 1 = %d", ds.classes);
    check(split_matches(&ds.train, 0, TR_N), "plain: train pixels and labels match");
    check(split_matches(&ds.test, 1, TE_N), "plain: test pixels and labels match");
    check(strcmp(ds.name, "tiny") == 0 && strcmp(ds.source, dir) == 0, "plain: name and source");
    check(ds.class_names && strcmp(ds.class_names[0], "0") == 0 && strcmp(ds.class_names[2], "2") == 0,
          "plain: digit class names");
    check(fabs(ds.mean[0] - hand_mean()) < 1e-6, "plain: mean %.6f matches hand-computed %.6f", ds.mean[0],
          hand_mean());
    Dataset plain = ds;

    dir = make_dir("gz");
    write_set(dir, 0xf);
    st = idx_load_dir(&ds, dir, "tiny");
    check(st == ML_OK, "gzipped IDX set loads%s%s", st ? ": " : "", st ? ml_last_error() : "");
    check(st == ML_OK && split_matches(&ds.train, 0, TR_N) && split_matches(&ds.test, 1, TE_N),
          "gz: pixels and labels match");
    check(st == ML_OK && ds.mean[0] == plain.mean[0] && ds.std[0] == plain.std[0], "gz: same statistics as plain");
    dataset_free(&ds);

    dir = make_dir("mixed");
    write_set(dir, 0x5);
    st = idx_load_dir(&ds, dir, "tiny");
    check(st == ML_OK && split_matches(&ds.train, 0, TR_N) && split_matches(&ds.test, 1, TE_N),
          "mixed plain and .gz files load");
    dataset_free(&ds);
    dataset_free(&plain);

    /* all labels 0 still gives a 2-class problem */
    dir = make_dir("onelabel");
    write_set(dir, 0);
    Bytes l = idx_labels(0, TR_N, 1), lt = idx_labels(1, TE_N, 1);
    write_file(dir, "train-labels-idx1-ubyte", &l, 0);
    write_file(dir, "t10k-labels-idx1-ubyte", &lt, 0);
    free(l.buf);
    free(lt.buf);
    st = idx_load_dir(&ds, dir, "x");
    check(st == ML_OK && ds.classes == 2, "all-zero labels give classes = 2");
    dataset_free(&ds);

    /* the Kaggle spelling train-images.idx3-ubyte */
    dir = make_dir("dotted");
    write_set(dir, 0);
    char a[1024], b[1024];
    snprintf(a, sizeof a, "%s/train-images-idx3-ubyte", dir);
    snprintf(b, sizeof b, "%s/train-images.idx3-ubyte", dir);
    rename(a, b);
    st = idx_load_dir(&ds, dir, "x");
    check(st == ML_OK && split_matches(&ds.train, 0, TR_N), "train-images.idx3-ubyte spelling");
    dataset_free(&ds);
}

/* Issue 13 item 11: one corrupted IDX label byte silently added classes (classes = max + 1).
 * Now fashion-mnist / mnist (known by name: 10 classes) refuse a label >= 10, other names
 * refuse a label above a class that has no training sample; the message names the file, the
 * offset and the value. */
static void set_label_byte(const char *dir, const char *file, int i, uint8_t v) {
    char p[1024];
    snprintf(p, sizeof p, "%s/%s", dir, file);
    Bytes b = read_raw(p);
    if (b.buf && 8 + (size_t)i < b.len) b.buf[8 + i] = v;
    write_raw(p, b.buf, b.len);
    free(b.buf);
}

static void test_idx_labels_range(void) {
    Dataset ds;
    /* a known dataset: 10 classes even when the files use fewer; a label of 37 is refused */
    const char *d = make_dir("fm-ok");
    char dir[1024];
    snprintf(dir, sizeof dir, "%s", d);
    write_set(dir, 0);
    ml_status st = idx_load_dir(&ds, dir, "fashion-mnist");
    check(st == ML_OK && ds.classes == 10 && strcmp(ds.class_names[9], "Ankle boot") == 0,
          "fashion-mnist has its 10 classes whatever labels the files use (%d)", st == ML_OK ? ds.classes : -1);
    if (st == ML_OK) dataset_free(&ds);
    set_label_byte(dir, "train-labels-idx1-ubyte", 4, 37);
    memset(&ds, 0xab, sizeof ds);
    st = idx_load_dir(&ds, dir, "fashion-mnist");
    check(st == ML_ERR_FORMAT && error_has("train-labels-idx1-ubyte: label 37 at offset 12", "0..9", "10 classes") &&
              is_empty(&ds),
          "fashion-mnist with a label byte 37: \"%s\"", ml_last_error());
    d = make_dir("mnist-10");
    snprintf(dir, sizeof dir, "%s", d);
    write_set(dir, 0x8);
    char gz[1100];
    snprintf(gz, sizeof gz, "%s/t10k-labels-idx1-ubyte.gz", dir);
    unlink(gz);
    Bytes lt = idx_labels(1, TE_N, NCLS);
    lt.buf[8 + 3] = 10;
    write_file(dir, "t10k-labels-idx1-ubyte", &lt, 1);
    free(lt.buf);
    st = idx_load_dir(&ds, dir, "mnist");
    check(st == ML_ERR_FORMAT && error_has("t10k-labels-idx1-ubyte.gz: label 10 at offset 11", "mnist has 10", NULL),
          "mnist with a test label 10 (gzipped file): \"%s\"", ml_last_error());

    /* an unknown dataset: labels 0..2 and one byte 200 (classes 3..199 never occur) */
    d = make_dir("x-200");
    snprintf(dir, sizeof dir, "%s", d);
    write_set(dir, 0);
    set_label_byte(dir, "train-labels-idx1-ubyte", 5, 200);
    memset(&ds, 0xab, sizeof ds);
    st = idx_load_dir(&ds, dir, "x");
    check(st == ML_ERR_FORMAT &&
              error_has("train-labels-idx1-ubyte: label 200 at offset 13", "class 3 has no training sample", NULL) &&
              is_empty(&ds),
          "unknown IDX set with a label byte 200: \"%s\"", ml_last_error());
    /* a test label beyond every training class */
    d = make_dir("x-test9");
    snprintf(dir, sizeof dir, "%s", d);
    write_set(dir, 0);
    set_label_byte(dir, "t10k-labels-idx1-ubyte", 2, 9);
    st = idx_load_dir(&ds, dir, "x");
    check(st == ML_ERR_FORMAT && error_has("t10k-labels-idx1-ubyte: label 9 at offset 10", "class 3", NULL),
          "unknown IDX set with a test label 9 no training sample has: \"%s\"", ml_last_error());
    /* a next class that does occur in training is a real class */
    d = make_dir("x-4");
    snprintf(dir, sizeof dir, "%s", d);
    write_set(dir, 0);
    set_label_byte(dir, "train-labels-idx1-ubyte", 5, 3);
    st = idx_load_dir(&ds, dir, "x");
    check(st == ML_OK && ds.classes == 4, "unknown IDX set: a label 3 in training makes 4 classes");
    if (st == ML_OK) dataset_free(&ds);
}

/* Builds a valid set in a fresh directory, lets `mutate` damage it, loads and expects failure
 * with an error naming `file` and containing `word`. */
static void expect_reject(const char *name, const char *file, const char *word, void (*mutate)(const char *dir)) {
    const char *d = make_dir(name);
    char dir[1024];
    snprintf(dir, sizeof dir, "%s", d);
    write_set(dir, 0);
    mutate(dir);
    Dataset ds;
    memset(&ds, 0xab, sizeof ds); /* garbage in: must come back empty */
    ml_status st = idx_load_dir(&ds, dir, "x");
    check(st != ML_OK && error_has(file, word, NULL) && is_empty(&ds), "%s rejected: \"%s\"", name, ml_last_error());
}

static void path_in(char *out, const char *dir, const char *file) { snprintf(out, 1024, "%s/%s", dir, file); }

static void mut_magic(const char *dir) {
    char p[1024];
    path_in(p, dir, "train-images-idx3-ubyte");
    Bytes b = read_raw(p);
    be32_put(b.buf, 0x12345678);
    write_raw(p, b.buf, b.len);
    free(b.buf);
}

static void mut_type(const char *dir) {
    char p[1024];
    path_in(p, dir, "t10k-images-idx3-ubyte");
    Bytes b = read_raw(p);
    b.buf[2] = 0x0d; /* float */
    write_raw(p, b.buf, b.len);
    free(b.buf);
}

static void mut_kind(const char *dir) {
    /* a labels file where the images should be */
    Bytes l = idx_labels(0, TR_N, NCLS);
    write_file(dir, "train-images-idx3-ubyte", &l, 0);
    free(l.buf);
}

static void mut_trunc_pixels(const char *dir) {
    char p[1024];
    path_in(p, dir, "train-images-idx3-ubyte");
    Bytes b = read_raw(p);
    write_raw(p, b.buf, b.len - 5);
    free(b.buf);
}

static void mut_trunc_header(const char *dir) {
    char p[1024];
    path_in(p, dir, "t10k-images-idx3-ubyte");
    Bytes b = read_raw(p);
    write_raw(p, b.buf, 10);
    free(b.buf);
}

static void mut_trunc_labels(const char *dir) {
    char p[1024];
    path_in(p, dir, "t10k-labels-idx1-ubyte");
    Bytes b = read_raw(p);
    write_raw(p, b.buf, b.len - 1);
    free(b.buf);
}

static void mut_count(const char *dir) {
    Bytes l = idx_labels(0, TR_N - 1, NCLS);
    write_file(dir, "train-labels-idx1-ubyte", &l, 0);
    free(l.buf);
}

static void mut_shape(const char *dir) {
    Bytes i = idx_images(1, TE_N, ROWS, COLS + 1);
    write_file(dir, "t10k-images-idx3-ubyte", &i, 0);
    free(i.buf);
}

static void mut_missing(const char *dir) {
    char p[1024];
    path_in(p, dir, "t10k-labels-idx1-ubyte");
    unlink(p);
}

static void mut_trailing(const char *dir) {
    char p[1024];
    path_in(p, dir, "train-labels-idx1-ubyte");
    Bytes b = read_raw(p);
    b.buf = realloc(b.buf, b.len + 3);
    memcpy(b.buf + b.len, "xyz", 3);
    write_raw(p, b.buf, b.len + 3);
    free(b.buf);
}

static void mut_zero_rows(const char *dir) {
    char p[1024];
    path_in(p, dir, "train-images-idx3-ubyte");
    Bytes b = read_raw(p);
    be32_put(b.buf + 8, 0);
    write_raw(p, b.buf, b.len);
    free(b.buf);
}

static void mut_huge_count(const char *dir) {
    char p[1024];
    path_in(p, dir, "train-images-idx3-ubyte");
    Bytes b = read_raw(p);
    be32_put(b.buf + 4, 0xffffffffu);
    write_raw(p, b.buf, b.len);
    free(b.buf);
}

/* Replaces train-images by a gzip whose deflate data is damaged. */
static void mut_gzip_corrupt(const char *dir) {
    char p[1024], pg[1024];
    path_in(p, dir, "train-images-idx3-ubyte");
    path_in(pg, dir, "train-images-idx3-ubyte.gz");
    Bytes img = idx_images(0, TR_N, ROWS, COLS);
    unlink(p);
    write_file(dir, "train-images-idx3-ubyte", &img, 1);
    free(img.buf);
    Bytes g = read_raw(pg);
    for (size_t i = 10; i < g.len - 8; i++) g.buf[i] ^= 0x5a;
    write_raw(pg, g.buf, g.len);
    free(g.buf);
}

static void mut_gzip_crc(const char *dir) {
    char p[1024], pg[1024];
    path_in(p, dir, "t10k-labels-idx1-ubyte");
    path_in(pg, dir, "t10k-labels-idx1-ubyte.gz");
    Bytes l = idx_labels(1, TE_N, NCLS);
    unlink(p);
    write_file(dir, "t10k-labels-idx1-ubyte", &l, 1);
    free(l.buf);
    Bytes g = read_raw(pg);
    g.buf[g.len - 6] ^= 0xff; /* CRC32 in the trailer */
    write_raw(pg, g.buf, g.len);
    free(g.buf);
}

static void mut_gzip_truncated(const char *dir) {
    char p[1024], pg[1024];
    path_in(p, dir, "train-labels-idx1-ubyte");
    path_in(pg, dir, "train-labels-idx1-ubyte.gz");
    Bytes l = idx_labels(0, TR_N, NCLS);
    unlink(p);
    write_file(dir, "train-labels-idx1-ubyte", &l, 1);
    free(l.buf);
    Bytes g = read_raw(pg);
    write_raw(pg, g.buf, g.len / 2);
    free(g.buf);
}

static void test_idx_reject(void) {
    expect_reject("bad-magic", "train-images-idx3-ubyte", "magic", mut_magic);
    expect_reject("bad-type", "t10k-images-idx3-ubyte", "element type", mut_type);
    expect_reject("labels-as-images", "train-images-idx3-ubyte", "magic", mut_kind);
    expect_reject("truncated-pixels", "train-images-idx3-ubyte", "truncated", mut_trunc_pixels);
    check(error_has("pixel data", "offset 16", NULL), "truncated pixels message gives what and where");
    expect_reject("truncated-header", "t10k-images-idx3-ubyte", "truncated header", mut_trunc_header);
    expect_reject("truncated-labels", "t10k-labels-idx1-ubyte", "truncated", mut_trunc_labels);
    expect_reject("count-mismatch", "train-labels-idx1-ubyte", "label count", mut_count);
    expect_reject("shape-mismatch", "t10k-images-idx3-ubyte", "shape", mut_shape);
    expect_reject("missing-file", "t10k-labels-idx1-ubyte", "missing", mut_missing);
    expect_reject("trailing-garbage", "train-labels-idx1-ubyte", "trailing", mut_trailing);
    expect_reject("zero-rows", "train-images-idx3-ubyte", "row count", mut_zero_rows);
    expect_reject("huge-count", "train-images-idx3-ubyte", "count", mut_huge_count);
    expect_reject("corrupt-gzip", "train-images-idx3-ubyte.gz", "gzip", mut_gzip_corrupt);
    expect_reject("gzip-bad-crc", "t10k-labels-idx1-ubyte.gz", "gzip", mut_gzip_crc);
    expect_reject("truncated-gzip", "train-labels-idx1-ubyte.gz", "truncated gzip", mut_gzip_truncated);

    Dataset ds;
    char missing[1024];
    snprintf(missing, sizeof missing, "%s/no-such-dir", tmp_root);
    check(idx_load_dir(&ds, missing, "x") == ML_ERR_IO && error_has("no-such-dir", NULL, NULL),
          "missing directory rejected: \"%s\"", ml_last_error());
}

/* idx_parse on every prefix and every one-byte extension of a valid file: only the exact file
 * passes, nothing crashes (run under ASan to prove no out-of-bounds read). */
static void test_idx_parse_prefixes(void) {
    Bytes img = idx_images(0, 3, 4, 5);
    int bad = 0, magic, n, r, c;
    const uint8_t *data;
    for (size_t len = 0; len < img.len; len++) {
        uint8_t *copy = malloc(len ? len : 1); /* exact-size copy so ASan sees overreads */
        memcpy(copy, img.buf, len);
        if (idx_parse(copy, len, "prefix", &magic, &n, &r, &c, &data) == ML_OK) bad++;
        free(copy);
    }
    check(bad == 0, "idx_parse rejects all %zu proper prefixes of an images file", img.len);
    uint8_t *copy = malloc(img.len);
    memcpy(copy, img.buf, img.len);
    ml_status st = idx_parse(copy, img.len, "whole", &magic, &n, &r, &c, &data);
    check(st == ML_OK && magic == 0x803 && n == 3 && r == 4 && c == 5 && data == copy + 16,
          "idx_parse accepts the exact file");
    free(copy);
    free(img.buf);

    Bytes lab = idx_labels(0, 9, 3);
    st = idx_parse(lab.buf, lab.len, "labels", &magic, &n, &r, &c, &data);
    check(st == ML_OK && magic == 0x801 && n == 9 && r == 0 && c == 0 && data == lab.buf + 8,
          "idx_parse reads a labels file");
    lab.buf[3] = 2;
    st = idx_parse(lab.buf, lab.len, "labels", &magic, &n, &r, &c, &data);
    check(st == ML_ERR_FORMAT && error_has("labels", "dimension", NULL), "idx_parse rejects ndim 2: \"%s\"",
          ml_last_error());
    free(lab.buf);
}

static void test_file_read(void) {
    const char *dir = make_dir("files");
    char p[1024];
    uint8_t data[300];
    for (int i = 0; i < 300; i++) data[i] = (uint8_t)(i * 13);
    snprintf(p, sizeof p, "%s/plain.bin", dir);
    write_raw(p, data, sizeof data);
    uint8_t *out = NULL;
    size_t len = 0;
    ml_status st = file_read_all(p, &out, &len);
    check(st == ML_OK && len == 300 && memcmp(out, data, 300) == 0, "file_read_all plain");
    free(out);

    /* two concatenated gzip members */
    Bytes h1 = {data, 100}, h2 = {data + 100, 200};
    write_file(dir, "m1", &h1, 1);
    write_file(dir, "m2", &h2, 1);
    char p1[1024], p2[1024];
    snprintf(p1, sizeof p1, "%s/m1.gz", dir);
    snprintf(p2, sizeof p2, "%s/m2.gz", dir);
    Bytes g1 = read_raw(p1), g2 = read_raw(p2);
    uint8_t *cat = malloc(g1.len + g2.len);
    memcpy(cat, g1.buf, g1.len);
    memcpy(cat + g1.len, g2.buf, g2.len);
    snprintf(p, sizeof p, "%s/multi.gz", dir);
    write_raw(p, cat, g1.len + g2.len);
    st = file_read_all(p, &out, &len);
    check(st == ML_OK && len == 300 && memcmp(out, data, 300) == 0, "file_read_all multi-member gzip");
    free(out);
    /* gzip followed by garbage */
    memcpy(cat + g1.len, "garbage!", 8);
    write_raw(p, cat, g1.len + 8);
    st = file_read_all(p, &out, &len);
    check(st == ML_ERR_FORMAT && error_has("multi.gz", "trailing", NULL), "gzip with trailing garbage rejected: \"%s\"",
          ml_last_error());
    free(cat);
    free(g1.buf);
    free(g2.buf);

    /* a large, highly compressible file grows the output buffer many times */
    size_t big = 5u << 20;
    uint8_t *z = calloc(1, big);
    z[big - 1] = 7;
    Bytes bz = {z, big};
    write_file(dir, "zeros", &bz, 1);
    snprintf(p, sizeof p, "%s/zeros.gz", dir);
    st = file_read_all(p, &out, &len);
    check(st == ML_OK && len == big && out[big - 1] == 7 && out[0] == 0, "file_read_all gunzips a 5 MiB file");
    free(out);
    free(z);

    snprintf(p, sizeof p, "%s/absent.bin", dir);
    st = file_read_all(p, &out, &len);
    check(st == ML_ERR_IO && error_has("absent.bin", "cannot open", NULL) && out == NULL,
          "file_read_all on a missing file: \"%s\"", ml_last_error());
}

static double nearest_centroid_accuracy(const Dataset *ds, int colour_only) {
    int C = ds->c, K = ds->classes;
    size_t hw = (size_t)ds->h * ds->w, f = colour_only ? (size_t)C : C * hw;
    double *cent = calloc((size_t)K * f, sizeof(double));
    int *cnt = calloc((size_t)K, sizeof(int));
    double *feat = malloc(f * sizeof(double));
    for (int pass = 0; pass < 2; pass++) {
        const DatasetSplit *s = pass == 0 ? &ds->train : &ds->test;
        int correct = 0;
        for (int i = 0; i < s->n; i++) {
            const uint8_t *img = s->images + (size_t)i * C * hw;
            for (size_t j = 0; j < f; j++) feat[j] = 0;
            for (int ch = 0; ch < C; ch++)
                for (size_t j = 0; j < hw; j++) {
                    if (colour_only) feat[ch] += img[ch * hw + j] / (double)hw;
                    else feat[ch * hw + j] = img[ch * hw + j];
                }
            if (pass == 0) {
                int k = s->labels[i];
                cnt[k]++;
                for (size_t j = 0; j < f; j++) cent[k * f + j] += feat[j];
            } else {
                int best = 0;
                double bd = 1e300;
                for (int k = 0; k < K; k++) {
                    double d = 0;
                    for (size_t j = 0; j < f; j++) {
                        double e = feat[j] - cent[k * f + j] / (cnt[k] ? cnt[k] : 1);
                        d += e * e;
                    }
                    if (d < bd) {
                        bd = d;
                        best = k;
                    }
                }
                correct += best == s->labels[i];
            }
        }
        if (pass == 1) {
            free(cent);
            free(cnt);
            free(feat);
            return (double)correct / s->n;
        }
    }
    return 0;
}

/* rng_seed_stream: the first and the 1000th output of keyed streams, recorded from the local
 * generator synthetic.c had before it used core/rng.h (the synthetic images depend on them). */
static void test_rng_stream(void) {
    static const uint64_t want[][5] = {
        {1ULL, 1ULL, 0ULL, 0xc9ce968041d66cacULL, 0x36d59203e87cfac9ULL},
        {5ULL, 2ULL, 767ULL, 0x660de17ef7441c57ULL, 0x1cd8dd96951ec067ULL},
        {3ULL, 101ULL, 0ULL, 0xf63e66db9b878c79ULL, 0xc86db2400517fc90ULL},
        {0ULL, 0ULL, 0ULL, 0x8c4986f3f0e565d5ULL, 0x4e28c752151b8a58ULL},
        {18000000000000000001ULL, 100ULL, 12345ULL, 0xb56e4530b371c898ULL, 0xd9c6417e795236f1ULL},
    };
    int ok = 1;
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        Rng r;
        rng_seed_stream(&r, want[i][0], want[i][1], want[i][2]);
        const uint64_t first = rng_u64(&r);
        for (int j = 0; j < 998; j++) rng_u64(&r);
        ok &= first == want[i][3] && rng_u64(&r) == want[i][4];
    }
    Rng a, b;
    rng_seed_stream(&a, 7, 1, 2);
    rng_seed_stream(&b, 7, 2, 1);
    check(ok && rng_u64(&a) != rng_u64(&b), "rng_seed_stream: the recorded streams; (a, b) is ordered");
}

static void test_synthetic(void) {
    SyntheticOptions o;
    synthetic_defaults(&o);
    check(o.h == 32 && o.w == 32 && o.c == 3 && o.classes == 10 && o.n_train == 5000 && o.n_test == 1000 && o.seed == 1,
          "synthetic defaults 32x32x3, 10 classes, 5000/1000, seed 1");
    Dataset a, b;
    double t0 = ml_now();
    ml_status st = synthetic_generate(&a, &o);
    double dt = ml_now() - t0;
    check(st == ML_OK && a.train.n == 5000 && a.test.n == 1000 && a.c == 3 && a.h == 32 && a.w == 32 && a.classes == 10,
          "synthetic default generate (%.2f s)", dt);
    check(strcmp(a.name, "synthetic") == 0 && a.source[0] == 0 && strcmp(a.class_names[0], "class0") == 0 &&
              strcmp(a.class_names[9], "class9") == 0,
          "synthetic name and class names");
    st = synthetic_generate(&b, &o);
    size_t isz = (size_t)3 * 32 * 32;
    check(st == ML_OK && memcmp(a.train.images, b.train.images, 5000 * isz) == 0 &&
              memcmp(a.test.images, b.test.images, 1000 * isz) == 0 &&
              memcmp(a.train.labels, b.train.labels, 5000 * sizeof(int32_t)) == 0 &&
              memcmp(a.test.labels, b.test.labels, 1000 * sizeof(int32_t)) == 0 &&
              memcmp(a.mean, b.mean, sizeof a.mean) == 0,
          "synthetic is deterministic for a seed");
    dataset_free(&b);
    o.seed = 2;
    st = synthetic_generate(&b, &o);
    check(st == ML_OK && memcmp(a.train.images, b.train.images, 5000 * isz) != 0,
          "a different seed gives different images");
    dataset_free(&b);

    int counts[10] = {0}, in_range = 1;
    for (int i = 0; i < a.train.n; i++) {
        int k = a.train.labels[i];
        if (k < 0 || k >= 10) in_range = 0;
        else counts[k]++;
    }
    int balanced = in_range;
    for (int k = 0; k < 10; k++) balanced &= counts[k] == 500;
    check(balanced, "synthetic labels are in range and balanced");
    int saturated = 0;
    for (size_t i = 0; i < 5000 * isz; i++) saturated += a.train.images[i] == 0 || a.train.images[i] == 255;
    check(saturated < (int)(5000 * isz / 50), "synthetic pixels rarely clip (%.2f%%)",
          100.0 * saturated / (5000 * isz));
    check(a.mean[0] > 0.3 && a.mean[0] < 0.7 && a.std[0] > 0.1 && a.std[0] < 0.4,
          "synthetic stats plausible: mean %.3f std %.3f", a.mean[0], a.std[0]);
    double acc_pix = nearest_centroid_accuracy(&a, 0);
    double acc_col = nearest_centroid_accuracy(&a, 1);
    check(acc_pix > 0.5, "synthetic is learnable: nearest centroid on pixels %.1f%%", 100 * acc_pix);
    check(acc_col < 0.5, "synthetic is not solved by mean colour: nearest centroid %.1f%%", 100 * acc_col);
    dataset_free(&a);

    SyntheticOptions s1 = {.h = 28, .w = 28, .c = 1, .classes = 3, .n_train = 60, .n_test = 9, .seed = 5};
    st = synthetic_generate(&a, &s1);
    check(st == ML_OK && a.h == 28 && a.w == 28 && a.c == 1 && a.classes == 3 && a.train.n == 60 && a.test.n == 9 &&
              a.std[1] == 1.0f && a.mean[1] == 0.0f,
          "synthetic 28x28x1 with 3 classes");
    /* the label order is integer arithmetic and one double product per draw: the same on every
     * machine, recorded from the generator synthetic.c had before it used core/rng.h */
    static const int32_t want_train[24] = {1, 1, 1, 0, 0, 2, 0, 2, 0, 2, 1, 2, 0, 1, 2, 0, 2, 2, 1, 1, 2, 0, 1, 0};
    static const int32_t want_test[9] = {2, 1, 2, 1, 1, 0, 0, 2, 0};
    check(st == ML_OK && memcmp(a.train.labels, want_train, sizeof want_train) == 0 &&
              memcmp(a.test.labels, want_test, sizeof want_test) == 0,
          "synthetic seed 5: the recorded label order");
    dataset_free(&a);
    SyntheticOptions s2 = {.h = 8, .w = 12, .c = 4, .classes = 7, .n_train = 50, .n_test = 10, .seed = 9};
    st = synthetic_generate(&a, &s2);
    int ok = st == ML_OK && a.h == 8 && a.w == 12 && a.c == 4 && a.classes == 7;
    for (int i = 0; ok && i < a.test.n; i++) ok = a.test.labels[i] >= 0 && a.test.labels[i] < 7;
    check(ok, "synthetic 8x12x4 with 7 classes");
    dataset_free(&a);
    SyntheticOptions s3 = {.h = 4, .w = 4, .c = 2, .classes = 1000, .n_train = 10, .n_test = 1, .seed = 0};
    st = synthetic_generate(&a, &s3);
    check(st == ML_OK && a.classes == 1000 && strcmp(a.class_names[999], "class999") == 0,
          "synthetic 4x4x2 with 1000 classes");
    dataset_free(&a);

    SyntheticOptions bad = s2;
    bad.c = 5;
    check(synthetic_generate(&a, &bad) == ML_ERR_ARG && error_has("channels", NULL, NULL) && is_empty(&a),
          "synthetic rejects 5 channels: \"%s\"", ml_last_error());
    bad = s2;
    bad.classes = 1;
    check(synthetic_generate(&a, &bad) == ML_ERR_ARG && error_has("classes", NULL, NULL),
          "synthetic rejects 1 class: \"%s\"", ml_last_error());
    bad = s2;
    bad.h = 3;
    check(synthetic_generate(&a, &bad) == ML_ERR_ARG && error_has("size", NULL, NULL),
          "synthetic rejects height 3: \"%s\"", ml_last_error());
    bad = s2;
    bad.n_train = 0;
    check(synthetic_generate(&a, &bad) == ML_ERR_ARG && error_has("count", NULL, NULL),
          "synthetic rejects 0 train images: \"%s\"", ml_last_error());
}

static void test_stats_and_batch(void) {
    /* two 2-channel 1x2 images; channel 0: 0,255 / 255,0 -> mean .5 std .5;
     * channel 1: 51,51 / 102,102 -> .2,.2,.4,.4 -> mean .3 std .1 */
    uint8_t *img = ml_alloc(8);
    int32_t *lab = ml_alloc(2 * sizeof(int32_t));
    const uint8_t px[8] = {0, 255, 51, 51, 255, 0, 102, 102};
    memcpy(img, px, 8);
    lab[0] = 1;
    lab[1] = 0;
    Dataset ds;
    memset(&ds, 0, sizeof ds);
    ds.c = 2;
    ds.h = 1;
    ds.w = 2;
    ds.classes = 2;
    ds.train.n = 2;
    ds.train.images = img;
    ds.train.labels = lab;
    dataset_compute_stats(&ds);
    check(fabs(ds.mean[0] - 0.5) < 1e-6 && fabs(ds.std[0] - 0.5) < 1e-6 && fabs(ds.mean[1] - 0.3) < 1e-6 &&
              fabs(ds.std[1] - 0.1) < 1e-6,
          "dataset_compute_stats hand case: mean %.4f,%.4f std %.4f,%.4f", ds.mean[0], ds.mean[1], ds.std[0],
          ds.std[1]);
    check(ds.mean[2] == 0.0f && ds.std[2] == 1.0f, "unused channels get mean 0, std 1");

    ds.mean[0] = 0.5f;
    ds.std[0] = 0.25f;
    ds.mean[1] = 0.1f;
    ds.std[1] = 2.0f;
    int32_t idx[3] = {1, 0, 1};
    float x[2 * 3 * 2];
    int32_t y[3] = {-1, -1, -1};
    batch_fill(x, y, &ds, &ds.train, idx, 3);
    /* x[((c*B)+b)*HW + i] */
    const double want[12] = {
        (1.0 - 0.5) / 0.25, (0.0 - 0.5) / 0.25, /* c0 b0 = image 1 */
        (0.0 - 0.5) / 0.25, (1.0 - 0.5) / 0.25, /* c0 b1 = image 0 */
        (1.0 - 0.5) / 0.25, (0.0 - 0.5) / 0.25, /* c0 b2 = image 1 */
        (0.4 - 0.1) / 2.0,  (0.4 - 0.1) / 2.0,  /* c1 b0 */
        (0.2 - 0.1) / 2.0,  (0.2 - 0.1) / 2.0,  /* c1 b1 */
        (0.4 - 0.1) / 2.0,  (0.4 - 0.1) / 2.0,  /* c1 b2 */
    };
    int ok = 1;
    for (int i = 0; i < 12; i++) ok &= fabs(x[i] - want[i]) < 1e-5;
    check(ok, "batch_fill writes (C, B, H, W) normalised values");
    check(y[0] == 0 && y[1] == 1 && y[2] == 0, "batch_fill copies labels");
    dataset_free(&ds);
    check(is_empty(&ds), "dataset_free zeroes the struct");
    dataset_free(&ds);
    check(is_empty(&ds), "dataset_free twice is safe");

    /* a larger batch goes through the parallel path and is deterministic */
    Dataset s;
    SyntheticOptions o = {.h = 16, .w = 16, .c = 3, .classes = 4, .n_train = 300, .n_test = 10, .seed = 3};
    if (synthetic_generate(&s, &o) == ML_OK) {
        int B = 256;
        int32_t *ix = malloc(B * sizeof(int32_t)), *yy = malloc(B * sizeof(int32_t));
        float *x1 = malloc((size_t)3 * B * 256 * sizeof(float));
        float *x2 = malloc((size_t)3 * B * 256 * sizeof(float));
        for (int b = 0; b < B; b++) ix[b] = (b * 37) % 300;
        batch_fill(x1, yy, &s, &s.train, ix, B);
        batch_fill(x2, yy, &s, &s.train, ix, B);
        int b = 77, c = 2, i = 100;
        double e = (s.train.images[((size_t)ix[b] * 3 + c) * 256 + i] / 255.0 - s.mean[c]) / s.std[c];
        check(memcmp(x1, x2, (size_t)3 * B * 256 * sizeof(float)) == 0 &&
                  fabs(x1[((size_t)c * B + b) * 256 + i] - e) < 1e-5 && yy[b] == s.train.labels[ix[b]],
              "batch_fill large batch is correct and deterministic");
        /* normalised train batch over everything has mean ~0, std ~1 per channel */
        free(ix);
        free(yy);
        free(x1);
        free(x2);
    } else {
        check(0, "synthetic for batch test: %s", ml_last_error());
    }
    dataset_free(&s);
}

static void test_specs(void) {
    Dataset ds;
    ml_status st = dataset_open(&ds, "synthetic:16x12x1:4:100");
    check(st == ML_OK && ds.h == 16 && ds.w == 12 && ds.c == 1 && ds.classes == 4 && ds.train.n == 100 &&
              ds.test.n == 20,
          "spec synthetic:16x12x1:4:100");
    dataset_free(&ds);
    st = dataset_open(&ds, "synthetic:8x8x2");
    check(st == ML_OK && ds.h == 8 && ds.c == 2 && ds.classes == 10 && ds.train.n == 5000,
          "spec synthetic:8x8x2 keeps other defaults");
    dataset_free(&ds);
    static const char *bad[][2] = {
        {"synthetic:16x16", "shape"},      {"synthetic:16x16x9", "shape"},
        {"synthetic:axbxc", "shape"},      {"synthetic:", "shape"},
        {"synthetic:16x16x1x2", "shape"},  {"synthetic:2x16x1", "shape"},
        {"synthetic:16x16x1:1", "class"},  {"synthetic:16x16x1:4:0", "train image count"},
        {"synthetic:16x16x1:x", "class"},  {"synthetic:16x16x1:4:10:5", "too many"},
        {"synthetic:16x16x1:-3", "class"}, {"synthetic:16x16x1:99999999999", "class"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        memset(&ds, 0x5a, sizeof ds);
        st = dataset_open(&ds, bad[i][0]);
        check(st == ML_ERR_ARG && error_has(bad[i][0], bad[i][1], NULL) && is_empty(&ds), "spec '%s' rejected: \"%s\"",
              bad[i][0], ml_last_error());
    }
    st = dataset_open(&ds, "no-such-dataset");
    check(st == ML_ERR_ARG && error_has("no-such-dataset", "unknown dataset", NULL), "unknown spec rejected: \"%s\"",
          ml_last_error());
    char p[1024];
    snprintf(p, sizeof p, "%s/plain/train-images-idx3-ubyte", tmp_root);
    st = dataset_open(&ds, p);
    check(st == ML_ERR_ARG && error_has(p, "a file that is no dataset", NULL), "file spec rejected: \"%s\"", ml_last_error());

    /* a directory: name = basename */
    snprintf(p, sizeof p, "%s/plain/", tmp_root);
    st = dataset_open(&ds, p);
    check(st == ML_OK && strcmp(ds.name, "plain") == 0 && split_matches(&ds.train, 0, TR_N),
          "directory spec loads with its basename as name");
    dataset_free(&ds);

    /* MOELAB_DATA root holding a small fashion-mnist */
    char root[1024];
    snprintf(root, sizeof root, "%s/root", tmp_root);
    make_dir("root");
    write_set(make_dir("root/fashion-mnist"), 0xf);
    setenv("MOELAB_DATA", root, 1);
    st = dataset_open(&ds, "fashion-mnist");
    check(st == ML_OK && strcmp(ds.name, "fashion-mnist") == 0 && ds.train.n == TR_N &&
              strcmp(ds.class_names[0], "T-shirt/top") == 0 && strcmp(ds.class_names[2], "Pullover") == 0,
          "MOELAB_DATA overrides the root; fashion-mnist class names");
    dataset_free(&ds);
    st = dataset_open(&ds, "default");
    check(st == ML_OK && strcmp(ds.name, "fashion-mnist") == 0 && ds.train.n == TR_N,
          "default picks fashion-mnist when present");
    dataset_free(&ds);
    st = dataset_open(&ds, "mnist");
    check(st == ML_ERR_IO && error_has("mnist", root, "not found"), "missing mnist rejected: \"%s\"", ml_last_error());
    make_dir("empty");
    snprintf(root, sizeof root, "%s/empty", tmp_root);
    setenv("MOELAB_DATA", root, 1);
    st = dataset_open(&ds, "default");
    check(st == ML_OK && strcmp(ds.name, "synthetic") == 0 && ds.h == 32 && ds.c == 3,
          "default falls back to synthetic");
    dataset_free(&ds);
    st = dataset_open(&ds, "fashion-mnist");
    check(st == ML_ERR_IO && error_has("fashion-mnist", "not found", NULL), "missing fashion-mnist rejected: \"%s\"",
          ml_last_error());
    unsetenv("MOELAB_DATA");

    st = dataset_open(&ds, "default");
    check(st == ML_OK && ds.train.n > 0 && ds.classes >= 2, "default spec opens '%s'",
          st == ML_OK ? ds.name : ml_last_error());
    dataset_free(&ds);
}

static void test_fashion_mnist(void) {
    struct stat sb;
    if (stat("/usr/share/datasets/fashion-mnist", &sb) != 0 || !S_ISDIR(sb.st_mode)) {
        printf("skip /usr/share/datasets/fashion-mnist not installed\n");
        return;
    }
    Dataset ds;
    double t0 = ml_now();
    ml_status st = dataset_open(&ds, "fashion-mnist");
    double dt = ml_now() - t0;
    if (!check(st == ML_OK, "fashion-mnist opens (%.2f s)%s", dt, st ? ml_last_error() : "")) return;
    check(ds.train.n == 60000 && ds.test.n == 10000, "fashion-mnist 60000/10000 images");
    check(ds.c == 1 && ds.h == 28 && ds.w == 28 && ds.classes == 10, "fashion-mnist 1x28x28, 10 classes");
    check(strcmp(ds.class_names[9], "Ankle boot") == 0, "fashion-mnist class 9 is Ankle boot");
    check(fabs(ds.mean[0] - 0.2860) < 0.001 && fabs(ds.std[0] - 0.3530) < 0.001,
          "fashion-mnist mean %.4f ~0.286, std %.4f ~0.353", ds.mean[0], ds.std[0]);
    int counts[10] = {0};
    for (int i = 0; i < ds.test.n; i++) counts[ds.test.labels[i]]++;
    int ok = 1;
    for (int k = 0; k < 10; k++) ok &= counts[k] == 1000;
    check(ok, "fashion-mnist test labels: 1000 per class");
    dataset_free(&ds);
}

static int rm_cb(const char *path) {
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", path);
    return system(cmd);
}

int main(void) {
    snprintf(tmp_root, sizeof tmp_root, "/tmp/moelab_test_datasets_XXXXXX");
    if (!mkdtemp(tmp_root)) {
        fprintf(stderr, "cannot create a temporary directory\n");
        return 1;
    }
    unsetenv("MOELAB_DATA");
    test_common();
    test_log();
    test_idx_read();
    test_idx_labels_range();
    test_idx_reject();
    test_idx_parse_prefixes();
    test_file_read();
    test_rng_stream();
    test_synthetic();
    test_stats_and_batch();
    test_specs();
    test_fashion_mnist();
    if (rm_cb(tmp_root) != 0) fprintf(stderr, "warning: could not remove %s\n", tmp_root);
    printf("%d checks, %d failed\n", n_checks, n_failed);
    return n_failed ? 1 : 0;
}
