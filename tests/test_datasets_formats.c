/* test_datasets_formats.c — CIFAR-10/100 binary, Tiny-ImageNet and ImageNet-style folders
 * imported into HDF5 dataset files, format detection, augmentation and dataset checks.
 *
 * Every dataset is generated here in its exact on-disk format under a fresh /tmp directory
 * (CIFAR records byte by byte, JPEG files with libjpeg's compressor, flat colours so that lossy
 * compression can be checked with a tolerance), read or imported back and compared with what
 * was written, then corrupted one way at a time to check the one-line messages. Prints one line
 * per check; exits 1 on failure.
 */
#define _GNU_SOURCE

#include "core/common.h"
#include "datasets/dataset.h"
#include "sessions/dataset_h5.h"

#include <math.h>
#include <omp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jpeglib.h> /* after stdio.h: it uses FILE */
#include <png.h>
#include <zlib.h>
#include <hdf5.h>

/* paths here are short /tmp paths; the fixed buffers cannot truncate in practice */
#pragma GCC diagnostic ignored "-Wformat-truncation"

#include "check.h"

static int error_has(const char *a, const char *b, const char *c) {
    const char *e = ml_last_error();
    return (!a || strstr(e, a)) && (!b || strstr(e, b)) && (!c || strstr(e, c)) && !strchr(e, '\n');
}

static int is_empty(const Dataset *ds) {
    return ds->train.images == NULL && ds->test.images == NULL && ds->class_names == NULL && ds->train.n == 0 &&
           ds->classes == 0;
}

/* ---- files */

static char tmp_root[256];

static const char *tpath(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static const char *tpath(const char *fmt, ...) {
    static char bufs[8][1024];
    static int k;
    char *b = bufs[k++ & 7];
    int n = snprintf(b, 1024, "%s/", tmp_root);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(b + n, (size_t)(1024 - n), fmt, ap);
    va_end(ap);
    return b;
}

static void mkdirs(const char *path) {
    char p[1024];
    snprintf(p, sizeof p, "%s", path);
    for (char *s = p + 1; *s; s++)
        if (*s == '/') {
            *s = 0;
            mkdir(p, 0755);
            *s = '/';
        }
    mkdir(p, 0755);
}

static void write_bytes(const char *path, const void *buf, size_t len) {
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(buf, 1, len, f) != len) {
        fprintf(stderr, "test setup: cannot write %s\n", path);
        exit(1);
    }
    fclose(f);
}

static void write_text(const char *path, const char *text) { write_bytes(path, text, strlen(text)); }

static uint8_t *read_bytes(const char *path, size_t *len) {
    *len = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    *len = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc(*len + 1);
    if (fread(b, 1, *len, f) != *len) *len = 0;
    fclose(f);
    return b;
}

static int exists(const char *p) {
    struct stat st;
    return stat(p, &st) == 0;
}

/* ---- CIFAR generation */

static uint8_t cifar_pixel(int file, int rec, int j) {
    return (uint8_t)((file * 53 + rec * 29 + j * 7 + (j >> 10) * 13) & 255);
}

/* A batch of n records; variant 10: label, variant 100: coarse, fine. */
static uint8_t *cifar_batch(int variant, int file, int n, size_t *len) {
    size_t rec = variant == 10 ? 3073 : 3074;
    *len = rec * (size_t)n;
    uint8_t *b = malloc(*len);
    for (int i = 0; i < n; i++) {
        uint8_t *r = b + rec * (size_t)i;
        if (variant == 10) {
            r[0] = (uint8_t)((file * 3 + i) % 10);
        } else {
            r[0] = (uint8_t)((file * 5 + i * 3) % 20);
            r[1] = (uint8_t)((file * 17 + i * 11) % 100);
        }
        for (int j = 0; j < 3072; j++) r[rec - 3072 + j] = cifar_pixel(file, i, j);
    }
    return b;
}

static const char *const cifar10_names[10] = {"airplane", "automobile", "bird",  "cat",  "deer",
                                              "dog",      "frog",       "horse", "ship", "truck"};

/* data_batch_1 (3 records), data_batch_2 (2), test_batch (2), batches.meta.txt. */
static void make_cifar10(const char *dir) {
    mkdirs(dir);
    static const int counts[3] = {3, 2, 2};
    static const char *names[3] = {"data_batch_1.bin", "data_batch_2.bin", "test_batch.bin"};
    for (int f = 0; f < 3; f++) {
        size_t len = 0;
        uint8_t *b = cifar_batch(10, f, counts[f], &len);
        char p[1024];
        snprintf(p, sizeof p, "%s/%s", dir, names[f]);
        write_bytes(p, b, len);
        free(b);
    }
    char meta[512] = "";
    for (int k = 0; k < 10; k++) {
        strcat(meta, cifar10_names[k]);
        strcat(meta, k == 4 ? "\r\n" : "\n"); /* one CRLF line */
    }
    strcat(meta, "\n");
    char p[1024];
    snprintf(p, sizeof p, "%s/batches.meta.txt", dir);
    write_text(p, meta);
}

static void make_cifar100(const char *dir) {
    mkdirs(dir);
    size_t len = 0;
    uint8_t *b = cifar_batch(100, 0, 4, &len);
    char p[1024];
    snprintf(p, sizeof p, "%s/train.bin", dir);
    write_bytes(p, b, len);
    free(b);
    b = cifar_batch(100, 1, 2, &len);
    snprintf(p, sizeof p, "%s/test.bin", dir);
    write_bytes(p, b, len);
    free(b);
    char text[4096] = "";
    for (int k = 0; k < 100; k++) sprintf(text + strlen(text), "fine_%02d\n", k);
    snprintf(p, sizeof p, "%s/fine_label_names.txt", dir);
    write_text(p, text);
    text[0] = 0;
    for (int k = 0; k < 20; k++) sprintf(text + strlen(text), "coarse_%02d\n", k);
    snprintf(p, sizeof p, "%s/coarse_label_names.txt", dir);
    write_text(p, text);
}

static int cifar_split_ok(const DatasetSplit *s, int variant, int coarse, const int *files, const int *counts,
                          int nfiles) {
    int at = 0;
    for (int f = 0; f < nfiles; f++)
        for (int i = 0; i < counts[f]; i++, at++) {
            int32_t want = variant == 10 ? (files[f] * 3 + i) % 10
                           : coarse      ? (files[f] * 5 + i * 3) % 20
                                         : (files[f] * 17 + i * 11) % 100;
            if (at >= s->n || s->labels[at] != want) return 0;
            for (int j = 0; j < 3072; j++)
                if (s->images[(size_t)at * 3072 + j] != cifar_pixel(files[f], i, j)) return 0;
        }
    return at == s->n;
}

static void test_cifar10(void) {
    char dir[1024];
    snprintf(dir, sizeof dir, "%s", tpath("c10/cifar-10-batches-bin"));
    make_cifar10(dir);
    check(dataset_detect(dir, NULL, 0) == DATASET_FORMAT_CIFAR10, "CIFAR-10 folder detected");
    Dataset ds;
    ml_status st = dataset_open(&ds, dir);
    if (!check(st == ML_OK, "CIFAR-10 opens%s%s", st ? ": " : "", st ? ml_last_error() : "")) return;
    int files[2] = {0, 1}, counts[2] = {3, 2}, tf[1] = {2}, tc[1] = {2};
    check(ds.train.n == 5 && ds.test.n == 2 && ds.c == 3 && ds.h == 32 && ds.w == 32 && ds.classes == 10,
          "CIFAR-10: 5 train (2 batches) / 2 test, 3x32x32, 10 classes");
    check(cifar_split_ok(&ds.train, 10, 0, files, counts, 2) && cifar_split_ok(&ds.test, 10, 0, tf, tc, 1),
          "CIFAR-10: pixels (R, G, B planes) and labels match, batches in order");
    int names_ok = 1;
    for (int k = 0; k < 10; k++) names_ok &= strcmp(ds.class_names[k], cifar10_names[k]) == 0;
    check(names_ok, "CIFAR-10: class names from batches.meta.txt (CRLF line trimmed)");
    check(strcmp(ds.name, "cifar-10") == 0 && ds.format == DATASET_FORMAT_CIFAR10, "CIFAR-10: name and format");
    check(fabsf(ds.mean[0] - 0.4914f) < 1e-6f && fabsf(ds.std[2] - 0.2616f) < 1e-6f &&
              strstr(ds.stats_source, "known") && strstr(ds.stats_source, "true"),
          "CIFAR-10: known mean/std, true std by default (%s)", ds.stats_source);
    check(dataset_augment_default(&ds), "CIFAR-10: augmentation on by default (RGB)");
    dataset_free(&ds);

    /* options */
    char spec[1100];
    snprintf(spec, sizeof spec, "%s:stats=kuangliu", dir);
    st = dataset_open(&ds, spec);
    check(st == ML_OK && fabsf(ds.std[0] - 0.2023f) < 1e-6f && strstr(ds.stats_source, "kuangliu"),
          "spec suffix :stats=kuangliu gives std 0.2023 (%s)", st ? ml_last_error() : "");
    dataset_free(&ds);
    snprintf(spec, sizeof spec, "%s:stats=computed", dir);
    st = dataset_open(&ds, spec);
    double m = 0;
    for (int i = 0; i < 5; i++)
        for (int j = 0; j < 1024; j++) m += cifar_pixel(i < 3 ? 0 : 1, i < 3 ? i : i - 3, j) / 255.0;
    m /= 5 * 1024;
    check(st == ML_OK && fabs(ds.mean[0] - m) < 1e-5 && strstr(ds.stats_source, "computed"),
          "spec suffix :stats=computed: mean %.5f = hand %.5f", ds.mean[0], m);
    dataset_free(&ds);

    /* the parent directory of the extracted archive */
    st = dataset_open(&ds, tpath("c10"));
    check(st == ML_OK && ds.train.n == 5 && strstr(ds.source, "cifar-10-batches-bin"),
          "the parent of cifar-10-batches-bin opens too");
    dataset_free(&ds);

    /* named, under MOELAB_DATA */
    setenv("MOELAB_DATA", tpath("c10"), 1);
    st = dataset_open(&ds, "cifar-10");
    check(st == ML_OK && ds.train.n == 5, "named spec cifar-10 under MOELAB_DATA%s%s", st ? ": " : "",
          st ? ml_last_error() : "");
    dataset_free(&ds);
    st = dataset_open(&ds, "cifar-100");
    check(st == ML_ERR_IO && error_has("cifar-100-binary", "not found", NULL), "named cifar-100 missing: \"%s\"",
          ml_last_error());
    unsetenv("MOELAB_DATA");
}

static void test_cifar100(void) {
    char dir[1024];
    snprintf(dir, sizeof dir, "%s", tpath("c100/cifar-100-binary"));
    make_cifar100(dir);
    check(dataset_detect(dir, NULL, 0) == DATASET_FORMAT_CIFAR100, "CIFAR-100 folder detected");
    Dataset ds;
    ml_status st = dataset_open(&ds, dir);
    if (!check(st == ML_OK, "CIFAR-100 opens%s%s", st ? ": " : "", st ? ml_last_error() : "")) return;
    int f0[1] = {0}, c0[1] = {4}, f1[1] = {1}, c1[1] = {2};
    check(ds.classes == 100 && strcmp(ds.name, "cifar-100") == 0 && strcmp(ds.class_names[37], "fine_37") == 0,
          "CIFAR-100: fine labels by default, 100 names");
    check(cifar_split_ok(&ds.train, 100, 0, f0, c0, 1) && cifar_split_ok(&ds.test, 100, 0, f1, c1, 1),
          "CIFAR-100: pixels and fine labels match");
    check(fabsf(ds.mean[0] - 0.5071f) < 1e-6f && fabsf(ds.std[1] - 0.2564f) < 1e-6f, "CIFAR-100: known mean/std");
    dataset_free(&ds);
    char spec[1100];
    snprintf(spec, sizeof spec, "%s:coarse", dir);
    st = dataset_open(&ds, spec);
    check(st == ML_OK && ds.classes == 20 && strcmp(ds.name, "cifar-100-coarse") == 0 &&
              strcmp(ds.class_names[19], "coarse_19") == 0 && cifar_split_ok(&ds.train, 100, 1, f0, c0, 1) &&
              cifar_split_ok(&ds.test, 100, 1, f1, c1, 1),
          "CIFAR-100 :coarse: 20 classes, coarse labels and names");
    dataset_free(&ds);
    DatasetOpenOptions o = {.coarse = 1, .stats = DATASET_STATS_KNOWN};
    st = dataset_open_with(&ds, dir, &o);
    check(st == ML_OK && ds.classes == 20, "dataset_open_with coarse = 1");
    dataset_free(&ds);
    snprintf(spec, sizeof spec, "%s:fine", dir);
    st = dataset_open_with(&ds, spec, &o);
    check(st == ML_OK && ds.classes == 100, "spec suffix :fine overrides the coarse option");
    dataset_free(&ds);
    snprintf(spec, sizeof spec, "%s:stats=kuangliu", dir);
    st = dataset_open(&ds, spec);
    check(st == ML_ERR_ARG && error_has("kuangliu", "CIFAR-100", NULL) && is_empty(&ds),
          "stats=kuangliu refused for CIFAR-100: \"%s\"", ml_last_error());
    snprintf(spec, sizeof spec, "%s:bogus", dir);
    st = dataset_open(&ds, spec);
    check(st != ML_OK && error_has("bogus", "unknown dataset", NULL), "unknown suffix rejected: \"%s\"",
          ml_last_error());
}

/* ---- CIFAR rejections */

typedef void (*Mutate)(const char *dir);

static void cifar_reject(int variant, const char *name, Mutate mutate, const char *w1, const char *w2, const char *w3) {
    char dir[1024];
    snprintf(dir, sizeof dir, "%s", tpath("bad-%s", name));
    if (variant == 10) make_cifar10(dir);
    else make_cifar100(dir);
    mutate(dir);
    Dataset ds;
    memset(&ds, 0x5a, sizeof ds);
    ml_status st = cifar_load_dir(&ds, dir, variant, NULL);
    check(st != ML_OK && error_has(w1, w2, w3) && is_empty(&ds), "CIFAR-%d %s rejected: \"%s\"", variant, name,
          ml_last_error());
}

static void truncate_file(const char *path, long delta) {
    size_t len = 0;
    uint8_t *b = read_bytes(path, &len);
    write_bytes(path, b, (size_t)((long)len + delta));
    free(b);
}

static char pbuf[1024];
static const char *in(const char *dir, const char *f) {
    snprintf(pbuf, sizeof pbuf, "%s/%s", dir, f);
    return pbuf;
}

static void m_trunc(const char *d) { truncate_file(in(d, "data_batch_2.bin"), -1); }
static void m_extra(const char *d) {
    size_t len = 0;
    uint8_t *b = read_bytes(in(d, "test_batch.bin"), &len);
    b = realloc(b, len + 7);
    memset(b + len, 1, 7);
    write_bytes(in(d, "test_batch.bin"), b, len + 7);
    free(b);
}
static void m_recsize(const char *d) {
    size_t len = 0;
    uint8_t *b = cifar_batch(100, 0, 3, &len); /* 3074-byte records where 3073 are expected */
    write_bytes(in(d, "data_batch_1.bin"), b, len);
    free(b);
}
static void m_label(const char *d) {
    size_t len = 0;
    uint8_t *b = read_bytes(in(d, "data_batch_2.bin"), &len);
    b[3073] = 10; /* record 1 */
    write_bytes(in(d, "data_batch_2.bin"), b, len);
    free(b);
}
static void m_missing_test(const char *d) { unlink(in(d, "test_batch.bin")); }
static void m_missing_meta(const char *d) { unlink(in(d, "batches.meta.txt")); }
static void m_short_meta(const char *d) { write_text(in(d, "batches.meta.txt"), "a\nb\nc\n"); }
static void m_gap(const char *d) {
    char a[1024], b[1024];
    snprintf(a, sizeof a, "%s/data_batch_2.bin", d);
    snprintf(b, sizeof b, "%s/data_batch_4.bin", d);
    rename(a, b);
}
static void m_empty(const char *d) { write_bytes(in(d, "test_batch.bin"), "", 0); }
static void m_fine(const char *d) {
    size_t len = 0;
    uint8_t *b = read_bytes(in(d, "test.bin"), &len);
    b[3074 + 1] = 100;
    write_bytes(in(d, "test.bin"), b, len);
    free(b);
}
static void m_coarse(const char *d) {
    size_t len = 0;
    uint8_t *b = read_bytes(in(d, "train.bin"), &len);
    b[2 * 3074] = 20;
    write_bytes(in(d, "train.bin"), b, len);
    free(b);
}
static void m_c100_trunc(const char *d) { truncate_file(in(d, "train.bin"), -3000); }
static void m_c100_names(const char *d) { unlink(in(d, "fine_label_names.txt")); }

static void test_cifar_reject(void) {
    cifar_reject(10, "truncated", m_trunc, "data_batch_2.bin", "not a multiple", "offset 3073");
    cifar_reject(10, "extra-bytes", m_extra, "test_batch.bin", "7 stray bytes", "offset 6146");
    cifar_reject(10, "record-size", m_recsize, "data_batch_1.bin", "3073-byte", "3074-byte");
    cifar_reject(10, "label-range", m_label, "data_batch_2.bin", "label 10 at offset 3073", "0..9");
    cifar_reject(10, "missing-test", m_missing_test, "test_batch.bin", "missing", NULL);
    cifar_reject(10, "missing-meta", m_missing_meta, "batches.meta.txt", "missing", NULL);
    cifar_reject(10, "short-meta", m_short_meta, "batches.meta.txt", "3 class names", "expected 10");
    cifar_reject(10, "batch-gap", m_gap, "data_batch_2.bin", "data_batch_4.bin", "missing");
    cifar_reject(10, "empty-file", m_empty, "test_batch.bin", "empty file", NULL);
    cifar_reject(100, "fine-range", m_fine, "test.bin", "fine label 100", "offset 3075");
    cifar_reject(100, "coarse-range", m_coarse, "train.bin", "coarse label 20", "offset 6148");
    cifar_reject(100, "c100-truncated", m_c100_trunc, "train.bin", "not a multiple", "3074");
    cifar_reject(100, "missing-names", m_c100_names, "fine_label_names.txt", "missing", NULL);

    /* in memory */
    size_t len = 0;
    uint8_t *b = cifar_batch(10, 0, 2, &len);
    int n = -1;
    ml_status st = cifar_parse_batch(b, len, "mem", 10, 0, NULL, NULL, &n);
    check(st == ML_OK && n == 2, "cifar_parse_batch counts records without copying");
    st = cifar_parse_batch(b, len - 1, "mem", 10, 0, NULL, NULL, &n);
    check(st == ML_ERR_FORMAT && n == 0 && error_has("mem", "offset 3073", NULL), "cifar_parse_batch truncated: \"%s\"",
          ml_last_error());
    st = cifar_parse_batch(b, len, "mem", 7, 0, NULL, NULL, &n);
    check(st == ML_ERR_ARG, "cifar_parse_batch rejects variant 7");
    free(b);
    char **names = NULL;
    int cnt = 0;
    st = dataset_parse_names("  a b \n\n\tc\x01\r\n", 12, "names", 0, &names, &cnt);
    check(st == ML_OK && cnt == 2 && strcmp(names[0], "a b") == 0 && strcmp(names[1], "c?") == 0,
          "dataset_parse_names trims, skips blank lines, replaces control bytes");
    dataset_names_free(names, cnt);
}

/* ---- JPEG trees */

typedef struct {
    uint8_t r, g, b;
} Rgb;

static void write_jpeg(const char *path, int w, int h, int gray, Rgb c) {
    FILE *f = fopen(path, "wb");
    if (!f) {
        fprintf(stderr, "test setup: cannot write %s\n", path);
        exit(1);
    }
    struct jpeg_compress_struct ci;
    struct jpeg_error_mgr je;
    ci.err = jpeg_std_error(&je);
    jpeg_create_compress(&ci);
    jpeg_stdio_dest(&ci, f);
    ci.image_width = (JDIMENSION)w;
    ci.image_height = (JDIMENSION)h;
    ci.input_components = gray ? 1 : 3;
    ci.in_color_space = gray ? JCS_GRAYSCALE : JCS_RGB;
    jpeg_set_defaults(&ci);
    jpeg_set_quality(&ci, 95, TRUE);
    jpeg_start_compress(&ci, TRUE);
    uint8_t *row = malloc((size_t)w * 3);
    for (int x = 0; x < w; x++) {
        if (gray) row[x] = c.r;
        else {
            row[3 * x] = c.r;
            row[3 * x + 1] = c.g;
            row[3 * x + 2] = c.b;
        }
    }
    while (ci.next_scanline < ci.image_height) {
        JSAMPROW rp = row;
        jpeg_write_scanlines(&ci, &rp, 1);
    }
    jpeg_finish_compress(&ci);
    jpeg_destroy_compress(&ci);
    free(row);
    fclose(f);
}

/* A distinct flat colour per (class, index, split). */
static Rgb colour_of(int k, int i, int split) {
    Rgb c = {(uint8_t)(40 + k * 70), (uint8_t)(30 + i * 25 + split * 9), (uint8_t)(200 - k * 50)};
    return c;
}

static const char *tiny_wnids[3] = {"n01443537", "n01629819", "n01641577"};

#define TINY_PER_CLASS 4
#define TINY_VAL 5

/* wnids.txt (3), words.txt, train/<wnid>/images/<wnid>_<i>.JPEG (64x64; image 1 of class 1 is
 * grayscale), train/<wnid>/<wnid>_boxes.txt, val/images/val_<i>.JPEG + val_annotations.txt. */
static void make_tiny(const char *root) {
    mkdirs(root);
    write_text(in(root, "wnids.txt"), "n01443537\nn01629819\nn01641577\n");
    write_text(in(root, "words.txt"), "n00001740\tentity\nn01443537\tgoldfish, Carassius auratus\n"
                                      "n01629819\tEuropean fire salamander, Salamandra salamandra\n"
                                      "n01641577\tbullfrog, Rana catesbeiana\nn09999999\tunused\n");
    for (int k = 0; k < 3; k++) {
        char d[1024];
        snprintf(d, sizeof d, "%s/train/%s/images", root, tiny_wnids[k]);
        mkdirs(d);
        char p[1100];
        snprintf(p, sizeof p, "%s/train/%s/%s_boxes.txt", root, tiny_wnids[k], tiny_wnids[k]);
        write_text(p, "x\t0\t0\t10\t10\n");
        for (int i = 0; i < TINY_PER_CLASS; i++) {
            snprintf(p, sizeof p, "%s/%s_%d.JPEG", d, tiny_wnids[k], i);
            Rgb c = colour_of(k, i, 0);
            int gray = k == 1 && i == 1;
            if (gray) c.g = c.b = c.r;
            write_jpeg(p, 64, 64, gray, c);
        }
    }
    char d[1024];
    snprintf(d, sizeof d, "%s/val/images", root);
    mkdirs(d);
    char ann[2048] = "";
    for (int i = 0; i < TINY_VAL; i++) {
        int k = (i * 2) % 3;
        char p[1100];
        snprintf(p, sizeof p, "%s/val_%d.JPEG", d, i);
        write_jpeg(p, 64, 64, 0, colour_of(k, i, 1));
        sprintf(ann + strlen(ann), "val_%d.JPEG\t%s\t0\t0\t63\t63\n", i, tiny_wnids[k]);
    }
    write_text(in(root, "val/val_annotations.txt"), ann);
}

static int near_int(int a, int b, int tol) { return abs(a - b) <= tol; }

/* Image i of split s is flat colour c within tol (all pixels). */
static int flat_ok(const Dataset *ds, const DatasetSplit *s, int i, Rgb c, int tol) {
    size_t hw = (size_t)ds->h * ds->w;
    const uint8_t *p = s->images + (size_t)i * 3 * hw;
    for (size_t j = 0; j < hw; j++)
        if (!near_int(p[j], c.r, tol) || !near_int(p[hw + j], c.g, tol) || !near_int(p[2 * hw + j], c.b, tol)) return 0;
    return 1;
}

static void test_tiny(void) {
    char root[1024];
    snprintf(root, sizeof root, "%s", tpath("tiny/tiny-imagenet-200"));
    make_tiny(root);
    check(dataset_detect(root, NULL, 0) == DATASET_FORMAT_TINY_IMAGENET, "Tiny-ImageNet folder detected");
    Dataset ds;
    ml_status st = dataset_open(&ds, root);
    check(st == ML_ERR_ARG && error_has(root, "moelab data import", NULL),
          "opening an image folder says to import it: \"%s\"", ml_last_error());
    ImgScan s;
    st = imgfolder_scan(tpath("tiny"), &s); /* the parent works too */
    if (!check(st == ML_OK, "Tiny-ImageNet scan%s%s", st ? ": " : "", st ? ml_last_error() : "")) return;
    check(s.classes == 3 && s.n_train == 12 && s.n_test == TINY_VAL && s.non_image == 0 && s.empty_classes == 0,
          "scan: 3 classes, 12 train, %d val files, boxes.txt not counted", TINY_VAL);
    check(strcmp(s.class_names[0], "goldfish") == 0 && strcmp(s.class_names[1], "European fire salamander") == 0 &&
              strcmp(s.class_ids[2], "n01641577") == 0,
          "scan: names from words.txt (first synonym), ids in wnids.txt order");
    char out[1024];
    snprintf(out, sizeof out, "%s", tpath("tiny.h5"));
    ImportOptions o;
    import_options_defaults(&o);
    ImportReport rep;
    st = dataset_h5_import_folder(&s, out, &o, &rep);
    check(st == ML_OK && rep.n_train == 12 && rep.n_test == TINY_VAL && rep.unreadable == 0,
          "Tiny-ImageNet imports at 64x64%s%s", st ? ": " : "", st ? ml_last_error() : "");
    imgfolder_scan_free(&s);
    check(!exists(tpath("tiny.h5.part")), "no .part file left after import");
    st = dataset_open(&ds, out);
    if (!check(st == ML_OK, "imported file opens through the loader hook%s%s", st ? ": " : "",
               st ? ml_last_error() : ""))
        return;
    check(ds.format == DATASET_FORMAT_H5 && ds.c == 3 && ds.h == 64 && ds.w == 64 && ds.classes == 3 &&
              ds.train.n == 12 && ds.test.n == TINY_VAL && strcmp(ds.name, "tiny-imagenet-200") == 0,
          "h5: format, 3x64x64, 3 classes, 12/%d images, name", TINY_VAL);
    check(strcmp(ds.class_names[2], "bullfrog") == 0, "h5: class names travel with the file");
    int ok = 1, gray_ok = 1;
    for (int k = 0; k < 3; k++)
        for (int i = 0; i < TINY_PER_CLASS; i++) {
            int at = k * TINY_PER_CLASS + i;
            Rgb c = colour_of(k, i, 0);
            if (k == 1 && i == 1) {
                c.g = c.b = c.r;
                gray_ok = flat_ok(&ds, &ds.train, at, c, 1);
            }
            ok &= ds.train.labels[at] == k && flat_ok(&ds, &ds.train, at, c, 4);
        }
    check(ok, "h5: train pixels within 4 of the flat JPEG colours, labels by class");
    check(gray_ok, "h5: the grayscale JPEG is expanded to three equal channels");
    ok = 1;
    for (int i = 0; i < TINY_VAL; i++)
        ok &= ds.test.labels[i] == (i * 2) % 3 && flat_ok(&ds, &ds.test, i, colour_of((i * 2) % 3, i, 1), 4);
    check(ok, "h5: val images and labels from val_annotations.txt");
    /* mean/std attributes = statistics of the stored train images */
    Dataset copy = ds;
    copy.class_names = NULL;
    dataset_compute_stats(&copy);
    check(fabsf(copy.mean[1] - ds.mean[1]) < 1e-5f && fabsf(copy.std[0] - ds.std[0]) < 1e-5f &&
              strstr(ds.stats_source, "import"),
          "h5: mean/std attributes match the train split (%s)", ds.stats_source);
    dataset_free(&ds);

    /* resized import */
    ImgScan s2;
    imgfolder_scan(root, &s2);
    o.size = 24;
    st = dataset_h5_import_folder(&s2, tpath("tiny24.h5"), &o, &rep);
    imgfolder_scan_free(&s2);
    st = st == ML_OK ? dataset_open(&ds, tpath("tiny24.h5")) : st;
    Rgb g = colour_of(1, 1, 0);
    g.g = g.b = g.r;
    check(st == ML_OK && ds.h == 24 && ds.w == 24 && flat_ok(&ds, &ds.train, 5, g, 1) &&
              flat_ok(&ds, &ds.train, 0, colour_of(0, 0, 0), 4),
          "--size 24: images resized, flat colours kept");
    dataset_free(&ds);

    /* annotation errors */
    write_text(in(root, "val/val_annotations.txt"), "val_0.JPEG\tn00000000\t0\t0\t1\t1\n");
    st = imgfolder_scan(root, &s);
    check(st == ML_ERR_FORMAT && error_has("val_annotations.txt", "line 1", "n00000000"),
          "unknown wnid in val_annotations.txt: \"%s\"", ml_last_error());
    write_text(in(root, "val/val_annotations.txt"),
               "val_0.JPEG\tn01443537\t0\t0\t1\t1\nval_77.JPEG\tn01443537\t0\t0\t1\t1\n");
    st = imgfolder_scan(root, &s);
    check(st == ML_OK && s.missing == 1 && strstr(s.first_missing, "val_77.JPEG") && strstr(s.first_missing, "line 2"),
          "a listed but missing val file is reported: %s", s.first_missing);
    imgfolder_scan_free(&s);
    write_text(in(root, "wnids.txt"), "n01443537\nn01629819\nn01443537\n");
    st = imgfolder_scan(root, &s);
    check(st == ML_ERR_FORMAT && error_has("wnids.txt", "line 3", "repeated"), "repeated wnid: \"%s\"",
          ml_last_error());
    unlink(in(root, "wnids.txt"));
    st = imgfolder_scan(root, &s); /* now an ImageNet-style tree without val/<class>/ */
    check(st != ML_OK && error_has("val", NULL, NULL), "wnids.txt removed: \"%s\"", ml_last_error());
}

/* train/<class>/ and val/<class>/ with non-square JPEGs of several sizes. */
static void make_folder(const char *root, int classes, int per_class, int w, int h) {
    for (int k = 0; k < classes; k++) {
        for (int split = 0; split < 2; split++) {
            char d[1024];
            snprintf(d, sizeof d, "%s/%s/class_%c", root, split ? "val" : "train", 'a' + k);
            mkdirs(d);
            int n = split ? 2 : per_class;
            for (int i = 0; i < n; i++) {
                char p[1100];
                snprintf(p, sizeof p, "%s/img_%03d.jpg", d, i);
                write_jpeg(p, w + i % 3 * 16, h + k * 8, 0, colour_of(k, i % 8, split));
            }
        }
    }
}

static void test_folder(void) {
    char root[1024];
    snprintf(root, sizeof root, "%s", tpath("inet"));
    make_folder(root, 3, 3, 80, 60);
    /* an empty class folder, a text file, a PNG, a stray file in train/ */
    mkdirs(tpath("inet/train/class_z"));
    write_text(tpath("inet/train/class_a/README.txt"), "not an image");
    const uint8_t png[16] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0, 0, 13, 'I', 'H', 'D', 'R'};
    write_bytes(tpath("inet/train/class_b/pic.png"), png, sizeof png);
    write_text(tpath("inet/train/notes.txt"), "x");
    check(dataset_detect(root, NULL, 0) == DATASET_FORMAT_IMAGE_FOLDER, "ImageNet-style detected");
    ImgScan s;
    ml_status st = imgfolder_scan(root, &s);
    if (!check(st == ML_OK, "ImageNet-style scan%s%s", st ? ": " : "", st ? ml_last_error() : "")) return;
    /* pic.png is a PNG now (a truncated one: skipped as unreadable at import) */
    check(s.classes == 4 && strcmp(s.class_ids[3], "class_z") == 0 && s.n_train == 10 && s.n_test == 6,
          "scan: 4 classes (empty one kept), 10 train (9 JPEG + a fake 16-byte PNG), 6 val");
    check(s.empty_classes == 1 && strstr(s.first_empty_class, "class_z"), "empty class folder reported: %s",
          s.first_empty_class);
    check(s.non_image == 2 && s.first_non_image[0], "non-image files counted (2; first %s)", s.first_non_image);
    ImportOptions o;
    import_options_defaults(&o);
    o.size = 32;
    ImportReport rep;
    st = dataset_h5_import_folder(&s, tpath("inet.h5"), &o, &rep);
    imgfolder_scan_free(&s);
    Dataset ds;
    if (st == ML_OK) st = dataset_open(&ds, tpath("inet.h5"));
    if (!check(st == ML_OK, "ImageNet-style import + open%s%s", st ? ": " : "", st ? ml_last_error() : "")) return;
    int ok = ds.classes == 4 && ds.train.n == 9 && ds.test.n == 6 && ds.h == 32;
    for (int k = 0; k < 3; k++)
        for (int i = 0; i < 3; i++)
            ok &= ds.train.labels[k * 3 + i] == k && flat_ok(&ds, &ds.train, k * 3 + i, colour_of(k, i, 0), 4);
    check(ok, "non-square JPEGs resized to 32x32, colours and labels kept");
    DatasetNotes notes;
    memset(&notes, 0, sizeof notes);
    dataset_check(&ds, &notes);
    check(notes.count >= 1 && strstr(notes.text[0], "class_z"), "dataset_check: a class without training images: %s",
          notes.count ? notes.text[0] : "");
    dataset_free(&ds);

    /* unreadable JPEGs: garbage and a truncated file */
    write_text(tpath("inet/train/class_c/broken.jpg"), "this is not a jpeg");
    size_t len = 0;
    uint8_t *b = read_bytes(tpath("inet/train/class_a/img_000.jpg"), &len);
    write_bytes(tpath("inet/train/class_a/img_zz_trunc.jpg"), b, len - 40);
    free(b);
    st = imgfolder_scan(root, &s);
    if (st != ML_OK) printf("scan: %s\n", ml_last_error());
    st = st == ML_OK ? dataset_h5_import_folder(&s, tpath("inet2.h5"), &o, &rep) : st;
    check(st == ML_OK && rep.unreadable == 3 && rep.n_train == 9 && strstr(rep.first_unreadable, "img_zz_trunc.jpg") &&
              strstr(rep.first_unreadable, "truncated"),
          "unreadable JPEGs (and the fake 16-byte PNG) skipped and counted (3; first: %s)", rep.first_unreadable);
    o.strict = 1;
    st = dataset_h5_import_folder(&s, tpath("inet3.h5"), &o, &rep);
    check(st == ML_ERR_FORMAT && error_has("img_zz_trunc.jpg", "--strict", "truncated") && !exists(tpath("inet3.h5")) &&
              !exists(tpath("inet3.h5.part")),
          "--strict: first unreadable JPEG is fatal, no output left: \"%s\"", ml_last_error());
    imgfolder_scan_free(&s);

    long groups, extra;
    char first[2048];
    write_bytes(tpath("inet/train/class_b/copy.jpg"), "", 0);
    b = read_bytes(tpath("inet/train/class_a/img_001.jpg"), &len);
    write_bytes(tpath("inet/train/class_b/copy.jpg"), b, len);
    free(b);
    imgfolder_scan(root, &s);
    st = imgfolder_find_duplicates(&s, &groups, &extra, first, sizeof first);
    check(st == ML_OK && groups == 1 && extra == 1 && strstr(first, "copy.jpg"), "duplicate files found: %s", first);
    imgfolder_scan_free(&s);

    /* a flat val/ */
    char flat[1024];
    snprintf(flat, sizeof flat, "%s", tpath("flat"));
    make_folder(flat, 2, 2, 40, 40);
    write_jpeg(tpath("flat/val/x.jpg"), 8, 8, 0, colour_of(0, 0, 0));
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s/val/class_a' '%s/val/class_b'", flat, flat);
    if (system(cmd) != 0) fprintf(stderr, "warning: %s failed\n", cmd);
    st = imgfolder_scan(flat, &s);
    check(st == ML_ERR_FORMAT && error_has("val", "directly", "<class>"), "flat val/ refused: \"%s\"", ml_last_error());
    mkdirs(tpath("flat/val/class_q"));
    unlink(tpath("flat/val/x.jpg"));
    st = imgfolder_scan(flat, &s);
    check(st == ML_ERR_FORMAT && error_has("class_q", "not found", NULL), "val class missing from train: \"%s\"",
          ml_last_error());
    mkdirs(tpath("nothing/train"));
    st = imgfolder_scan(tpath("nothing"), &s);
    check(st == ML_ERR_FORMAT && error_has("no class folders", NULL, NULL), "train/ without class folders: \"%s\"",
          ml_last_error());
}

static void test_streaming(void) {
    /* 3 classes x 9 + val 6 images, imported with blocks of 4 and of 1024: same file content */
    char root[1024];
    snprintf(root, sizeof root, "%s", tpath("stream"));
    make_folder(root, 3, 9, 24, 24);
    ImgScan s;
    ml_status st = imgfolder_scan(root, &s);
    ImportOptions o;
    import_options_defaults(&o);
    o.size = 16;
    o.block = 4;
    ImportReport rep;
    st = st == ML_OK ? dataset_h5_import_folder(&s, tpath("s4.h5"), &o, &rep) : st;
    o.block = 1024;
    o.threads = 1;
    ml_status st2 = dataset_h5_import_folder(&s, tpath("s1024.h5"), &o, &rep);
    imgfolder_scan_free(&s);
    Dataset a, b;
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    if (st == ML_OK && st2 == ML_OK) {
        st = dataset_open(&a, tpath("s4.h5"));
        st2 = dataset_open(&b, tpath("s1024.h5"));
    }
    check(st == ML_OK && st2 == ML_OK && a.train.n == 27 && b.train.n == 27 &&
              memcmp(a.train.images, b.train.images, (size_t)27 * 3 * 16 * 16) == 0 &&
              memcmp(a.train.labels, b.train.labels, 27 * sizeof(int32_t)) == 0 &&
              memcmp(a.test.images, b.test.images, (size_t)6 * 3 * 16 * 16) == 0 && a.mean[0] == b.mean[0] &&
              a.std[2] == b.std[2],
          "import in blocks of 4 (8 blocks) = one block, 2 threads = 1 thread");
    dataset_free(&a);
    dataset_free(&b);
}

static void progress_count(void *user, long done, long total) {
    long *p = user;
    p[0]++;
    p[1] = done;
    p[2] = total;
}

static void test_progress(void) {
    ImgScan s;
    ml_status st = imgfolder_scan(tpath("stream"), &s);
    ImportOptions o;
    import_options_defaults(&o);
    o.size = 8;
    o.block = 10;
    long pr[3] = {0, 0, 0};
    o.progress = progress_count;
    o.progress_user = pr;
    ImportReport rep;
    st = st == ML_OK ? dataset_h5_import_folder(&s, tpath("p.h5"), &o, &rep) : st;
    imgfolder_scan_free(&s);
    check(st == ML_OK && pr[0] == 4 && pr[1] == 33 && pr[2] == 33,
          "progress called once per block (%ld calls, %ld/%ld)", pr[0], pr[1], pr[2]);
}

/* ---- HDF5 files are validated in a child process first (sessions/dataset_h5.c) */

static ml_status iso_fail(void *arg) { return ml_fail(ML_ERR_NUMERIC, "iso: %s", (const char *)arg); }

static ml_status iso_ok(void *arg) {
    *(int *)arg = 1; /* the child's copy: the parent's stays 0 */
    return ML_OK;
}

static ml_status iso_crash(void *arg) {
    volatile int *p = arg;
    raise(SIGSEGV);
    return *p ? ML_OK : ML_ERR_IO;
}

static ml_status iso_hang(void *arg) {
    for (;;) pause();
    return ML_OK;
}

/* Injected crashes (MOELAB_FAULT_DATASET_H5_CRASH, see probe_child in sessions/dataset_h5.c)
 * in the validating child: a clear error naming the file, an empty dataset, and this process
 * goes on (the same file loads once the fault is gone). */
static void test_h5_isolated(const char *path, const uint8_t *img, size_t len) {
    MlIsolated r;
    int flag = 0;
    /* (outcomes first: the arguments of check() are evaluated in no set order) */
    ml_isolated_outcome o = ml_run_isolated(iso_ok, &flag, 5000, &r);
    check(o == ML_ISOLATED_OK && r.status == ML_OK && flag == 0,
          "ml_run_isolated: fn runs in a child (its writes stay there)");
    o = ml_run_isolated(iso_fail, "bad value", 5000, &r);
    check(o == ML_ISOLATED_FAILED && r.status == ML_ERR_NUMERIC && strcmp(r.msg, "iso: bad value") == 0,
          "ml_run_isolated: the child's status and message come back (\"%s\")", r.msg);
    o = ml_run_isolated(iso_crash, &flag, 5000, &r);
    check(o == ML_ISOLATED_SIGNALED && r.signal == SIGSEGV,
          "ml_run_isolated: a crash in the child is reported (signal %d)", r.signal);
    double t0 = ml_now();
    o = ml_run_isolated(iso_hang, NULL, 200, &r);
    double dt = ml_now() - t0;
    check(o == ML_ISOLATED_TIMEOUT && dt >= 0.19 && dt < 5,
          "ml_run_isolated: a hanging child is killed after the timeout (%.2f s)", dt);

    Dataset m;
    static const char *const faults[] = {"1", "abort"};
    static const int sigs[] = {SIGSEGV, SIGABRT};
    for (int k = 0; k < 2; k++) {
        setenv("MOELAB_FAULT_DATASET_H5_CRASH", faults[k], 1);
        memset(&m, 0x33, sizeof m);
        ml_status st = dataset_open(&m, path);
        char sig[32];
        snprintf(sig, sizeof sig, "(signal %d)", sigs[k]);
        check(st == ML_ERR_FORMAT && is_empty(&m) && error_has(path, ": reading it crashed the HDF5 library ", sig) &&
                  strstr(ml_last_error(), "the file is damaged"),
              "MOELAB_FAULT_DATASET_H5_CRASH=%s: \"%s\"", faults[k], ml_last_error());
        st = dataset_h5_load_image(&m, img, len, "image.h5");
        check(st == ML_ERR_FORMAT && is_empty(&m) && error_has("image.h5: reading it crashed", sig, NULL),
              "... and for a file image in memory: \"%s\"", ml_last_error());
    }
    setenv("MOELAB_FAULT_DATASET_H5_CRASH", "hang", 1);
    setenv("MOELAB_DATASET_H5_TIMEOUT_MS", "300", 1);
    t0 = ml_now();
    ml_status st = dataset_open(&m, path);
    dt = ml_now() - t0;
    check(st == ML_ERR_FORMAT && is_empty(&m) && dt < 10 && error_has(path, "did not finish in 0.3 s", "damaged"),
          "a validating child that hangs is killed: \"%s\"", ml_last_error());
    unsetenv("MOELAB_DATASET_H5_TIMEOUT_MS");
    unsetenv("MOELAB_FAULT_DATASET_H5_CRASH");
    st = dataset_open(&m, path);
    check(st == ML_OK && m.train.n > 0, "the same file loads when the fault is gone");
    dataset_free(&m);
}

/* The validating child reads only the first and last image of each split, so the stored layout
 * matters: a chunked file with filters has its chunk index checked, and under a filter other
 * than deflate/shuffle/fletcher32 (here scale-offset) the child decodes every image. Copies of
 * the file rewritten by h5repack (hdf5-tools) must load identically. */
static void test_h5_layouts(const char *path, const Dataset *c) {
    if (system("command -v h5repack >/dev/null 2>&1") != 0) {
        printf("skip h5repack not installed: stored layouts not tested\n");
        return;
    }
    static const char *const names[] = {"gzip", "shuffle+gzip+fletcher32", "scale-offset", "contiguous"};
    static const char *const opts[] = {"-f /train/images,/test/images:GZIP=6",
                                       "-f /train/images,/test/images:SHUF -f /train/images,/test/images:GZIP=1 "
                                       "-f /train/images,/test/images:FLET",
                                       "-f /train/images,/test/images:SOFF=0,IN",
                                       "-l /train/images,/test/images:CONTI"};
    for (int k = 0; k < 4; k++) {
        char cmd[3000];
        const char *dst = tpath("layout%d.h5", k);
        snprintf(cmd, sizeof cmd, "h5repack %s '%s' '%s' >/dev/null 2>&1", opts[k], path, dst);
        Dataset m;
        ml_status st = system(cmd) == 0 ? dataset_open(&m, dst) : ML_ERR_IO;
        check(st == ML_OK && m.train.n == c->train.n && m.test.n == c->test.n &&
                  memcmp(m.train.images, c->train.images, (size_t)c->train.n * 3072) == 0 &&
                  memcmp(m.test.images, c->test.images, (size_t)c->test.n * 3072) == 0,
              "h5 stored as %s (h5repack) loads identically%s%s", names[k], st ? ": " : "", st ? ml_last_error() : "");
        if (st == ML_OK) dataset_free(&m);
    }
}

/* ---- HDF5 round trip and rejections */

static void test_h5(void) {
    Dataset c, r;
    ml_status st = dataset_open(&c, tpath("c10/cifar-10-batches-bin"));
    char out[1024];
    snprintf(out, sizeof out, "%s", tpath("c10.h5"));
    st = st == ML_OK ? dataset_h5_save(&c, out) : st;
    st = st == ML_OK ? dataset_open(&r, out) : st;
    if (!check(st == ML_OK, "CIFAR-10 saved to HDF5 and read back%s%s", st ? ": " : "", st ? ml_last_error() : ""))
        return;
    int names = 1;
    for (int k = 0; k < 10; k++) names &= strcmp(c.class_names[k], r.class_names[k]) == 0;
    check(r.train.n == c.train.n && r.test.n == c.test.n && r.c == 3 && r.h == 32 &&
              memcmp(r.train.images, c.train.images, (size_t)c.train.n * 3072) == 0 &&
              memcmp(r.test.images, c.test.images, (size_t)c.test.n * 3072) == 0 &&
              memcmp(r.train.labels, c.train.labels, (size_t)c.train.n * 4) == 0 && names && r.mean[0] == c.mean[0] &&
              r.std[2] == c.std[2] && strcmp(r.stats_source, c.stats_source) == 0 && strcmp(r.name, "cifar-10") == 0,
          "h5 round trip: NCHW -> NHWC -> NCHW identical, names, mean/std and source kept");
    dataset_free(&r);
    size_t len = 0;
    uint8_t *img = read_bytes(out, &len);
    Dataset m;
    st = dataset_h5_load_image(&m, img, len, "image");
    check(st == ML_OK && m.train.n == c.train.n &&
              memcmp(m.train.images, c.train.images, (size_t)c.train.n * 3072) == 0,
          "dataset_h5_load_image reads the same file from memory");
    dataset_free(&m);
    /* truncated copies */
    int all = 1;
    for (size_t cut = 8; cut < len; cut += len / 7) {
        write_bytes(tpath("cut.h5"), img, cut);
        memset(&m, 0x33, sizeof m);
        st = dataset_open(&m, tpath("cut.h5"));
        all &= st != ML_OK && is_empty(&m) && strstr(ml_last_error(), "cut.h5") && !strchr(ml_last_error(), '\n');
    }
    check(all, "truncated HDF5 files rejected with one-line messages (last: \"%s\")", ml_last_error());
    /* the validating child passes its ordinary errors on unchanged: a truncated file gets the
     * message it always got, naming the file, not a "crashed" one */
    write_bytes(tpath("cut.h5"), img, len / 2);
    st = dataset_open(&m, tpath("cut.h5"));
    check(st == ML_ERR_FORMAT && is_empty(&m) &&
              error_has(tpath("cut.h5"), ": cannot open as HDF5: truncated file", NULL) &&
              !strstr(ml_last_error(), "crashed"),
          "h5 truncated to half: \"%s\"", ml_last_error());
    /* flipped bytes in the second half (the raw image data stays, metadata may break) */
    all = 1;
    int flips_refused = 0, flips_ok = 0, flips_silent = 0;
    /* (libhdf5 1.10 leaks internal objects when H5Dopen fails on some of these and may print
     * "HDF5: infinite loop closing library" at exit: harmless, not ours to fix) */
    for (int t = 0; t < 20; t++) {
        uint8_t *cp = malloc(len);
        memcpy(cp, img, len);
        for (int j = 0; j < 8; j++) cp[(size_t)(t * 977 + j * 131) % len] ^= (uint8_t)(0x5a + j);
        st = dataset_h5_load_image(&m, cp, len, "flipped");
        if (st == ML_OK) {
            /* a load that passes must be self-consistent, and (issue 27: checksums) exactly the data
             * written: a flipped pixel or label is never accepted silently */
            for (int i = 0; i < m.train.n; i++) all &= m.train.labels[i] >= 0 && m.train.labels[i] < m.classes;
            const int same = m.train.n == c.train.n && m.test.n == c.test.n &&
                             !memcmp(m.train.images, c.train.images, (size_t)c.train.n * 3072) &&
                             !memcmp(m.test.images, c.test.images, (size_t)c.test.n * 3072) &&
                             !memcmp(m.train.labels, c.train.labels, (size_t)c.train.n * 4) &&
                             !memcmp(m.test.labels, c.test.labels, (size_t)c.test.n * 4);
            flips_silent += !same;
            flips_ok += same;
            dataset_free(&m);
        } else {
            all &= is_empty(&m);
            flips_refused++;
        }
        free(cp);
    }
    check(all && flips_silent == 0, "corrupted HDF5 images: %d refused, %d loaded identical, %d loaded changed (want 0)",
          flips_refused, flips_ok, flips_silent);
    /* issue 27 item 3: one pixel, one label and one class name changed through HDF5 itself (so no
     * HDF5 check can see it): each refused by its dataset's crc32, naming it; without checksums
     * (a file from an older moelab) the same file still loads, and says it is unverified */
    {
        static const char *const which[] = {"/train/images", "/test/labels", "/class_names"};
        for (int k = 0; k < 3; k++) {
            write_bytes(tpath("poke.h5"), img, len);
            hid_t f = H5Fopen(tpath("poke.h5"), H5F_ACC_RDWR, H5P_DEFAULT);
            hid_t d = f >= 0 ? H5Dopen2(f, which[k], H5P_DEFAULT) : -1;
            hid_t fs = d >= 0 ? H5Dget_space(d) : -1;
            herr_t w = -1;
            if (fs >= 0 && k == 0) {
                hsize_t start[4] = {1, 7, 9, 1}, cnt[4] = {1, 1, 1, 1}; /* image 1 (of c.train.n >= 2) */
                H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, NULL, cnt, NULL);
                hid_t ms = H5Screate_simple(4, cnt, NULL);
                const uint8_t v = (uint8_t)(c.train.images[(size_t)1 * 3072 + 1 * 1024 + 7 * 32 + 9] ^ 0x10);
                w = H5Dwrite(d, H5T_NATIVE_UINT8, ms, fs, H5P_DEFAULT, &v);
                H5Sclose(ms);
            } else if (fs >= 0 && k == 1) {
                hsize_t start = 0, cnt = 1;
                H5Sselect_hyperslab(fs, H5S_SELECT_SET, &start, NULL, &cnt, NULL);
                hid_t ms = H5Screate_simple(1, &cnt, NULL);
                const int32_t v = (c.test.labels[0] + 1) % 10; /* in range: only the checksum can tell */
                w = H5Dwrite(d, H5T_NATIVE_INT32, ms, fs, H5P_DEFAULT, &v);
                H5Sclose(ms);
            } else if (fs >= 0) {
                hid_t t = H5Dget_type(d);
                const size_t sz = H5Tget_size(t);
                char *raw = calloc(10, sz);
                if (raw && H5Dread(d, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, raw) >= 0) {
                    raw[0] ^= 0x01;
                    w = H5Dwrite(d, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, raw);
                }
                free(raw);
                H5Tclose(t);
            }
            if (fs >= 0) H5Sclose(fs);
            if (d >= 0) H5Dclose(d);
            if (f >= 0) H5Fclose(f);
            st = dataset_open(&m, tpath("poke.h5"));
            char want[64];
            snprintf(want, sizeof want, "%s fails its checksum", which[k]);
            check(c.train.n >= 2 && c.test.n >= 1 && w >= 0 && st == ML_ERR_FORMAT && error_has("poke.h5", want, "the file is damaged"),
                  "one value of %s changed: refused: \"%s\"", which[k], st ? ml_last_error() : "loaded");
            if (st == ML_OK) dataset_free(&m);
            /* the same change in a file without checksums: loads, unverified */
            f = H5Fopen(tpath("poke.h5"), H5F_ACC_RDWR, H5P_DEFAULT);
            int stripped = f >= 0 && H5Adelete(f, "checksums") >= 0 && H5Adelete(f, "attrs_crc32") >= 0;
            static const char *const all_ds[] = {"/class_names", "/train/images", "/train/labels", "/test/images",
                                                 "/test/labels"};
            for (int i = 0; i < 5 && stripped; i++) stripped = H5Adelete_by_name(f, all_ds[i], "crc32", H5P_DEFAULT) >= 0;
            if (f >= 0) H5Fclose(f);
            st = dataset_open(&m, tpath("poke.h5"));
            check(stripped && st == ML_OK && m.checksums == 0, "without checksums (an older import) it loads, unverified: %s",
                  st ? ml_last_error() : "ok");
            if (st == ML_OK) dataset_free(&m);
        }
        st = dataset_open(&m, out);
        check(st == ML_OK && m.checksums == 2, "the undamaged file: every checksum verified, the attributes' too");
        if (st == ML_OK) dataset_free(&m);
        /* issue 41 item 5: a flipped bit in a root attribute moelab reads (/@mean 0.512 -> 0.002,
         * still in range; @classes; @stats_source) is refused by @attrs_crc32; a file from before
         * attrs_crc32 (datasets' checksums only) still loads, marked as such */
        static const char *const attrs[] = {"mean", "stats_source", "name"};
        for (int k = 0; k < 3; k++) {
            write_bytes(tpath("pokea.h5"), img, len);
            hid_t f = H5Fopen(tpath("pokea.h5"), H5F_ACC_RDWR, H5P_DEFAULT);
            hid_t a = f >= 0 ? H5Aopen(f, attrs[k], H5P_DEFAULT) : -1;
            herr_t w = -1;
            if (a >= 0 && k == 0) {
                float v[3] = {0};
                if (H5Aread(a, H5T_NATIVE_FLOAT, v) >= 0) {
                    v[0] = 0.002f; /* the flip: in [0, 1], so the range check passes it */
                    w = H5Awrite(a, H5T_NATIVE_FLOAT, v);
                }
            } else if (a >= 0) {
                hid_t t = H5Aget_type(a);
                const size_t sz = H5Tget_size(t);
                char *raw = calloc(1, sz + 1);
                if (raw && H5Aread(a, t, raw) >= 0) {
                    raw[0] ^= 0x02;
                    w = H5Awrite(a, t, raw);
                }
                free(raw);
                H5Tclose(t);
            }
            if (a >= 0) H5Aclose(a);
            if (f >= 0) H5Fclose(f);
            memset(&m, 0, sizeof m);
            st = dataset_open(&m, tpath("pokea.h5"));
            check(w >= 0 && st == ML_ERR_FORMAT &&
                      error_has("pokea.h5", "root attributes", "fail their checksum (attrs_crc32") &&
                      error_has("pokea.h5", "the file is damaged", NULL),
                  "root attribute @%s changed: refused: \"%s\"", attrs[k], st ? ml_last_error() : "loaded");
            if (st == ML_OK) dataset_free(&m);
        }
        write_bytes(tpath("pokea.h5"), img, len);
        hid_t f = H5Fopen(tpath("pokea.h5"), H5F_ACC_RDWR, H5P_DEFAULT);
        const int stripped = f >= 0 && H5Adelete(f, "attrs_crc32") >= 0;
        if (f >= 0) H5Fclose(f);
        st = dataset_open(&m, tpath("pokea.h5"));
        check(stripped && st == ML_OK && m.checksums == 1 && m.mean[0] == c.mean[0],
              "without attrs_crc32 (imported before it) it loads: datasets verified, attributes not: %s",
              st ? ml_last_error() : "ok");
        if (st == ML_OK) dataset_free(&m);
    }
    /* labels out of range are refused on load */
    c.train.labels[3] = 10;
    st = dataset_h5_save(&c, tpath("badlab.h5"));
    st = st == ML_OK ? dataset_open(&r, tpath("badlab.h5")) : st;
    check(st == ML_ERR_FORMAT && error_has("badlab.h5", "/train/labels[3] = 10", "0..9"),
          "h5 label out of range: \"%s\"", ml_last_error());
    c.train.labels[3] = 0;
    /* not a dataset file: a CIFAR batch renamed .h5, and an HDF5 signature followed by junk */
    st = dataset_open(&r, tpath("c10/cifar-10-batches-bin/test_batch.bin"));
    check(st == ML_ERR_ARG && error_has("test_batch.bin", "a file that is no dataset", "HDF5"), "a non-HDF5 file: \"%s\"",
          ml_last_error());
    uint8_t junk[4096];
    for (size_t i = 0; i < sizeof junk; i++) junk[i] = (uint8_t)(i * 7 + 3);
    memcpy(junk, "\x89HDF\r\n\x1a\n", 8);
    write_bytes(tpath("junk.h5"), junk, sizeof junk);
    st = dataset_open(&r, tpath("junk.h5"));
    check(st == ML_ERR_FORMAT && error_has("junk.h5", NULL, NULL), "HDF5 signature + junk: \"%s\"", ml_last_error());
    /* issue 27: an empty, a damaged .h5 and a FIFO each get their own message, never "not a directory" */
    write_bytes(tpath("empty.h5"), junk, 0);
    st = dataset_open(&r, tpath("empty.h5"));
    check(st == ML_ERR_ARG && error_has("empty.h5", "an empty file (0 bytes)", "moelab data import"),
          "an empty .h5: \"%s\"", ml_last_error());
    memset(junk, 0x5a, sizeof junk);
    write_bytes(tpath("noise.h5"), junk, sizeof junk);
    st = dataset_open(&r, tpath("noise.h5"));
    check(st == ML_ERR_FORMAT && error_has("noise.h5", "not an HDF5 file (no HDF5 signature", "moelab data import"),
          "a .h5 without a signature: \"%s\"", ml_last_error());
    check(mkfifo(tpath("fifo.h5"), 0600) == 0, "mkfifo fifo.h5");
    st = dataset_open(&r, tpath("fifo.h5"));
    check(st == ML_ERR_ARG && error_has("fifo.h5", "not a regular file (a FIFO)", NULL), "a FIFO .h5: \"%s\"",
          ml_last_error());
    test_h5_isolated(out, img, len);
    test_h5_layouts(out, &c);
    dataset_set_h5_loader(NULL);
    st = dataset_open(&r, out);
    check(st == ML_ERR_STATE && error_has("c10.h5", "dataset_set_h5_loader", NULL), "no loader registered: \"%s\"",
          ml_last_error());
    dataset_set_h5_loader(dataset_h5_load);
    st = dataset_h5_save(&c, tpath("no/such/dir/x.h5"));
    check(st == ML_ERR_IO && error_has("no/such/dir/x.h5", NULL, NULL), "unwritable output: \"%s\"", ml_last_error());
    free(img);
    dataset_free(&c);
}

/* ---- augmentation */

/* Reference: explicit padded image, crop at (oy, ox) in [0, 2p], then flip. */
static float ref_pixel(const uint8_t *img, int h, int w, int p, int oy, int ox, int flip, int y, int x,
                       const float *lut) {
    int cx = flip ? w - 1 - x : x;
    int py = y + oy, px = cx + ox; /* padded coordinates */
    int sy = py - p, sx = px - p;
    if (sy < 0 || sy >= h || sx < 0 || sx >= w) return lut[0];
    return lut[img[sy * w + sx]];
}

static void test_augment(void) {
    const int H = 8, W = 6, C = 2, N = 5, B = 64, P = 3;
    Dataset ds;
    memset(&ds, 0, sizeof ds);
    ds.c = C;
    ds.h = H;
    ds.w = W;
    ds.classes = 2;
    ds.train.n = N;
    ds.train.images = ml_alloc((size_t)N * C * H * W);
    ds.train.labels = ml_alloc(N * sizeof(int32_t));
    for (int i = 0; i < N * C * H * W; i++) ds.train.images[i] = (uint8_t)(1 + (i * 37) % 250);
    for (int i = 0; i < N; i++) ds.train.labels[i] = i % 2;
    ds.mean[0] = 0.4f;
    ds.std[0] = 0.2f;
    ds.mean[1] = 0.6f;
    ds.std[1] = 0.5f;
    int32_t idx[64], y1[64], y2[64];
    for (int b = 0; b < B; b++) idx[b] = (b * 3) % N;
    size_t n = (size_t)C * B * H * W;
    float *x1 = malloc(n * sizeof(float)), *x2 = malloc(n * sizeof(float)), *x3 = malloc(n * sizeof(float));
    Rng r1, r2;
    rng_seed(&r1, 42);
    rng_seed(&r2, 42);
    batch_fill_augment_ex(x1, y1, &ds, &ds.train, idx, B, &r1, P, 1);
    omp_set_num_threads(1);
    batch_fill_augment_ex(x2, y2, &ds, &ds.train, idx, B, &r2, P, 1);
    omp_set_num_threads(omp_get_num_procs());
    check(memcmp(x1, x2, n * sizeof(float)) == 0 && memcmp(y1, y2, sizeof y1) == 0 && memcmp(&r1, &r2, sizeof r1) == 0,
          "augmentation deterministic for a seed, independent of the thread count");
    /* the reference with the same draws */
    Rng r3;
    rng_seed(&r3, 42);
    int ok = 1, flips = 0, zero_seen = 0, seen[7][7] = {{0}};
    float lut[2][256];
    for (int c = 0; c < C; c++)
        for (int v = 0; v < 256; v++) lut[c][v] = ((float)v / 255.0f - ds.mean[c]) / ds.std[c];
    for (int b = 0; b < B; b++) {
        uint32_t v = rng_below(&r3, 7 * 7 * 2);
        int oy = (int)(v % 7), ox = (int)((v / 7) % 7), fl = (int)(v / 49);
        flips += fl;
        seen[oy][ox] = 1;
        for (int c = 0; c < C; c++)
            for (int yy = 0; yy < H; yy++)
                for (int xx = 0; xx < W; xx++) {
                    const uint8_t *img = ds.train.images + ((size_t)idx[b] * C + c) * H * W;
                    float want = ref_pixel(img, H, W, P, oy, ox, fl, yy, xx, lut[c]);
                    float got = x1[(((size_t)c * B + b) * H + yy) * W + xx];
                    ok &= got == want;
                    zero_seen |= got == lut[c][0];
                }
        ok &= y1[b] == ds.train.labels[idx[b]];
    }
    int offsets = 0;
    for (int i = 0; i < 7; i++)
        for (int j = 0; j < 7; j++) offsets += seen[i][j];
    check(ok, "crop + flip match an explicit padded-crop-flip reference pixel for pixel");
    check(flips > 10 && flips < B - 10 && offsets > 30, "flip drawn %d/%d times, %d of 49 offsets seen", flips, B,
          offsets);
    check(zero_seen && fabsf(lut[0][0] - (0 - 0.4f) / 0.2f) < 1e-6f,
          "padding is pixel 0 before normalisation: (0 - mean) / std = %.3f", lut[0][0]);
    rng_seed(&r1, 43);
    batch_fill_augment_ex(x3, y1, &ds, &ds.train, idx, B, &r1, P, 1);
    check(memcmp(x1, x3, n * sizeof(float)) != 0, "another seed gives another batch");
    batch_fill_augment(x1, y1, &ds, &ds.train, idx, B, NULL);
    batch_fill(x2, y2, &ds, &ds.train, idx, B);
    check(memcmp(x1, x2, n * sizeof(float)) == 0, "rng NULL is batch_fill");

    /* a hand-made 1x3x3 image, pad 1: every (crop, flip) pattern reached from some seed */
    Dataset h;
    memset(&h, 0, sizeof h);
    h.c = 1;
    h.h = h.w = 3;
    h.classes = 2;
    h.train.n = 1;
    uint8_t pix[9] = {10, 20, 30, 40, 50, 60, 70, 80, 90};
    int32_t lab = 1, i0 = 0, yy;
    h.train.images = pix;
    h.train.labels = &lab;
    h.mean[0] = 0.0f;
    h.std[0] = 1.0f / 255.0f; /* normalised value = pixel value */
    int found_flip_shift = 0, found_identity = 0;
    for (uint64_t seed = 0; seed < 200; seed++) {
        float o[9];
        Rng r;
        rng_seed(&r, seed);
        batch_fill_augment_ex(o, &yy, &h, &h.train, &i0, 1, &r, 1, 1);
        /* crop at (0, 2) (shift up-left by -1 rows, +1 cols) with flip:
         * rows: -1 (pad), 0, 1; flipped columns: x -> 2 - x + 1 - 1 */
        const float want_fs[9] = {0, 0, 0, 0, 30, 20, 0, 60, 50};
        const float want_id[9] = {10, 20, 30, 40, 50, 60, 70, 80, 90};
        int fs = 1, id = 1;
        for (int k = 0; k < 9; k++) {
            fs &= fabsf(o[k] - want_fs[k]) < 1e-3f;
            id &= fabsf(o[k] - want_id[k]) < 1e-3f;
        }
        found_flip_shift |= fs;
        found_identity |= id;
    }
    check(found_flip_shift && found_identity,
          "hand-made 3x3 image, pad 1: flipped shifted crop and the identity both produced");
    check(dataset_augment_default(&h) == 0, "augmentation off by default for 1 channel");
    ml_free(ds.train.images);
    ml_free(ds.train.labels);
    free(x1);
    free(x2);
    free(x3);
}

/* ---- checks, decoder and resize details */

static void test_check_and_resize(void) {
    Dataset ds;
    memset(&ds, 0, sizeof ds);
    ds.c = 1;
    ds.h = ds.w = 2;
    ds.classes = 2;
    char *nm[2] = {"cat", "dog"};
    ds.class_names = nm;
    uint8_t tr[6 * 4] = {1, 2, 3, 4, 1, 2, 3, 4, 5, 6, 7, 8, 9, 9, 9, 9, 1, 1, 1, 2, 3, 3, 3, 4};
    int32_t tl[6] = {0, 1, 0, 0, 0, 0};
    uint8_t te[4] = {5, 6, 7, 8};
    int32_t el[1] = {1};
    ds.train.n = 6;
    ds.train.images = tr;
    ds.train.labels = tl;
    ds.test.n = 1;
    ds.test.images = te;
    ds.test.labels = el;
    dataset_compute_stats(&ds);
    DatasetNotes n;
    memset(&n, 0, sizeof n);
    dataset_check(&ds, &n);
    int imb = 0, dup = 0, conf = 0, leak = 0, flat = 0;
    for (int i = 0; i < n.count; i++) {
        imb |= strstr(n.text[i], "imbalance") && strstr(n.text[i], "'cat' has 5") != NULL;
        dup |= strstr(n.text[i], "1 training images are exact duplicates") != NULL;
        conf |= strstr(n.text[i], "different labels") != NULL;
        leak |= strstr(n.text[i], "1 test images also occur") != NULL;
        flat |= strstr(n.text[i], "single flat value") != NULL;
    }
    check(imb && dup && conf && leak && flat,
          "dataset_check: imbalance, duplicate, label conflict, train/test overlap, flat image "
          "(%d notes)",
          n.count);

    /* resize: exact area average 4x4 -> 2x2, bilinear enlarge of a flat image, copy */
    uint8_t src[16] = {0, 10, 20, 30, 40, 50, 60, 70, 80, 90, 100, 110, 120, 130, 140, 150};
    uint8_t dst[16];
    image_resize_u8(src, 4, 4, 1, dst, 2, 2);
    check(dst[0] == 25 && dst[1] == 45 && dst[2] == 105 && dst[3] == 125,
          "area resize 4x4 -> 2x2 averages blocks (%d %d %d %d)", dst[0], dst[1], dst[2], dst[3]);
    uint8_t flat3[3] = {7, 7, 7}, big[3 * 5 * 7];
    image_resize_u8(flat3, 1, 1, 3, big, 5, 7);
    int ok = 1;
    for (int i = 0; i < 3 * 5 * 7; i++) ok &= big[i] == 7;
    check(ok, "enlarging a flat image keeps it flat");
    uint8_t out[64 * 64 * 3];
    char err[200];
    const uint8_t pngsig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    check(jpeg_decode_resized(pngsig, 8, 8, out, err, sizeof err) != 0 && strstr(err, "PNG"),
          "a PNG given as JPEG: \"%s\"", err);
    const uint8_t soi_only[6] = {0xff, 0xd8, 0xff, 0xe0, 0, 2};
    check(jpeg_decode_resized(soi_only, 6, 8, out, err, sizeof err) != 0 && err[0],
          "a JPEG header without data: \"%s\"", err);
    /* a large JPEG goes through DCT scaling */
    write_jpeg(tpath("big.jpg"), 640, 480, 0, (Rgb){200, 100, 50});
    size_t len = 0;
    uint8_t *b = read_bytes(tpath("big.jpg"), &len);
    int bad = jpeg_decode_resized(b, len, 64, out, err, sizeof err);
    free(b);
    ok = !bad;
    for (int i = 0; i < 64 * 64 && ok; i++)
        ok = near_int(out[3 * i], 200, 4) && near_int(out[3 * i + 1], 100, 4) && near_int(out[3 * i + 2], 50, 4);
    check(ok, "640x480 JPEG decoded (DCT-scaled) and resized to 64x64, colour kept");
}

/* ---- PNG files (datasets/png.c): every colour type, exact pixels, damaged files */

#define PNG_SIDE 8

typedef struct {
    int ctype, depth, interlace;
    int seed;
    int npal, ntrns; /* palette entries; tRNS entries (palette only) */
} PngSpec;

static int png_channels_of(int ctype) {
    return ctype == PNG_COLOR_TYPE_RGB          ? 3
           : ctype == PNG_COLOR_TYPE_RGB_ALPHA  ? 4
           : ctype == PNG_COLOR_TYPE_GRAY_ALPHA ? 2
                                                : 1;
}

/* Sample ch of pixel (x, y) at the spec's bit depth (palette: an index). 16-bit samples are
 * v8 * 257 + d with d < 128 (d = 0 for 255), so rounding to 8 bits gives v8 (dropping the low
 * byte would not always). */
static unsigned png_sample(const PngSpec *p, int x, int y, int ch) {
    int nc = png_channels_of(p->ctype);
    int is_alpha = (nc == 2 && ch == 1) || (nc == 4 && ch == 3);
    unsigned v8 = is_alpha ? (unsigned)((x * 37 + y * 11 + p->seed * 5) % 256)
                           : (unsigned)((x * 29 + y * 53 + ch * 71 + p->seed * 13) % 256);
    if (is_alpha && x == 0) v8 = y % 2 ? 255 : 0; /* fully opaque and fully transparent pixels too */
    if (p->ctype == PNG_COLOR_TYPE_PALETTE) return (unsigned)(x + y * PNG_SIDE) % (unsigned)p->npal;
    if (p->depth == 16) return v8 * 257 + (v8 < 255 ? (unsigned)((x * 7 + y * 13 + ch) % 128) : 0);
    if (p->depth < 8) return v8 >> (8 - p->depth);
    return v8;
}

static png_color png_pal_entry(int i) {
    png_color c = {(png_byte)(i * 17), (png_byte)(255 - i * 9), (png_byte)(i * 101 % 256)};
    return c;
}

static uint8_t png_trns_entry(int i) { return (uint8_t)(i * 40 % 256); }

/* The RGB the importer must produce for pixel (x, y): samples to 8 bits, gray expanded, the
 * palette looked up, alpha composited on black. */
static void png_expected(const PngSpec *p, int x, int y, uint8_t rgb[3]) {
    unsigned c[4], a = 255;
    int nc = png_channels_of(p->ctype);
    if (p->ctype == PNG_COLOR_TYPE_PALETTE) {
        int i = (int)png_sample(p, x, y, 0);
        png_color e = png_pal_entry(i);
        c[0] = e.red;
        c[1] = e.green;
        c[2] = e.blue;
        if (i < p->ntrns) a = png_trns_entry(i);
    } else {
        unsigned v[4];
        for (int ch = 0; ch < nc; ch++) {
            unsigned s = png_sample(p, x, y, ch);
            v[ch] = p->depth == 16 ? (unsigned)lrint(s * 255.0 / 65535.0)
                    : p->depth < 8 ? s * 255 / ((1u << p->depth) - 1)
                                   : s;
        }
        int gray = nc <= 2;
        for (int ch = 0; ch < 3; ch++) c[ch] = gray ? v[0] : v[ch];
        if (nc == 2 || nc == 4) a = v[nc - 1];
    }
    for (int ch = 0; ch < 3; ch++) rgb[ch] = (uint8_t)((c[ch] * a + 127) / 255);
}

/* Writes a PNG_SIDE x PNG_SIDE PNG with libpng's writer. */
static void write_png(const char *path, const PngSpec *p) {
    FILE *f = fopen(path, "wb");
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
    png_infop info = png ? png_create_info_struct(png) : NULL;
    if (!f || !info || setjmp(png_jmpbuf(png))) {
        fprintf(stderr, "test setup: cannot write %s\n", path);
        exit(1);
    }
    png_init_io(png, f);
    png_set_IHDR(png, info, PNG_SIDE, PNG_SIDE, p->depth, p->ctype,
                 p->interlace ? PNG_INTERLACE_ADAM7 : PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT,
                 PNG_FILTER_TYPE_DEFAULT);
    if (p->ctype == PNG_COLOR_TYPE_PALETTE) {
        png_color pal[256];
        png_byte trns[256];
        for (int i = 0; i < p->npal; i++) pal[i] = png_pal_entry(i);
        for (int i = 0; i < p->ntrns; i++) trns[i] = png_trns_entry(i);
        png_set_PLTE(png, info, pal, p->npal);
        if (p->ntrns) png_set_tRNS(png, info, trns, p->ntrns, NULL);
    }
    png_write_info(png, info);
    if (p->depth < 8) png_set_packing(png); /* one sample per byte in, packed out */
    int nc = png_channels_of(p->ctype), bps = p->depth == 16 ? 2 : 1;
    static png_byte img[PNG_SIDE][PNG_SIDE * 4 * 2];
    png_bytep rows[PNG_SIDE];
    for (int y = 0; y < PNG_SIDE; y++) {
        rows[y] = img[y];
        for (int x = 0; x < PNG_SIDE; x++)
            for (int ch = 0; ch < nc; ch++) {
                unsigned v = png_sample(p, x, y, ch);
                png_bytep o = img[y] + ((size_t)x * nc + ch) * bps;
                if (bps == 2) {
                    o[0] = (png_byte)(v >> 8); /* PNG samples are big-endian */
                    o[1] = (png_byte)v;
                } else {
                    o[0] = (png_byte)v;
                }
            }
    }
    png_write_image(png, rows);
    png_write_end(png, NULL);
    png_destroy_write_struct(&png, &info);
    fclose(f);
}

/* Image i of split sp is exactly the spec's expected RGB (CHW in the dataset). */
static int png_pixels_ok(const Dataset *ds, const DatasetSplit *sp, int i, const PngSpec *p) {
    size_t hw = (size_t)PNG_SIDE * PNG_SIDE;
    const uint8_t *im = sp->images + (size_t)i * 3 * hw;
    for (int y = 0; y < PNG_SIDE; y++)
        for (int x = 0; x < PNG_SIDE; x++) {
            uint8_t e[3];
            png_expected(p, x, y, e);
            for (int ch = 0; ch < 3; ch++)
                if (im[(size_t)ch * hw + (size_t)y * PNG_SIDE + x] != e[ch]) return 0;
        }
    return ds->h == PNG_SIDE && ds->w == PNG_SIDE;
}

typedef struct {
    const char *rel; /* under the tree's root */
    int split, label;
    PngSpec spec; /* depth 0: a flat JPEG instead */
} PngCase;

static const PngCase png_cases[] = {
    {"train/class_a/a0_rgb.png", 0, 0, {PNG_COLOR_TYPE_RGB, 8, 0, 1, 0, 0}},
    {"train/class_a/a1_rgba.PNG", 0, 0, {PNG_COLOR_TYPE_RGB_ALPHA, 8, 0, 2, 0, 0}},
    {"train/class_a/a2.jpg", 0, 0, {0, 0, 0, 3, 0, 0}},
    {"train/class_a/a3_png_named.JPEG", 0, 0, {PNG_COLOR_TYPE_GRAY, 8, 0, 4, 0, 0}},
    {"train/class_b/b0_gray.png", 0, 1, {PNG_COLOR_TYPE_GRAY, 8, 0, 5, 0, 0}},
    {"train/class_b/b1_gray_alpha.png", 0, 1, {PNG_COLOR_TYPE_GRAY_ALPHA, 8, 0, 6, 0, 0}},
    {"train/class_b/b2_palette_trns.png", 0, 1, {PNG_COLOR_TYPE_PALETTE, 8, 0, 7, 40, 12}},
    {"train/class_b/b3_gray2bit.png", 0, 1, {PNG_COLOR_TYPE_GRAY, 2, 0, 8, 0, 0}},
    {"train/class_c/c0_rgb16.png", 0, 2, {PNG_COLOR_TYPE_RGB, 16, 0, 9, 0, 0}},
    {"train/class_c/c1_rgba_interlaced.png", 0, 2, {PNG_COLOR_TYPE_RGB_ALPHA, 8, 1, 10, 0, 0}},
    {"train/class_c/c2_ga16_interlaced.png", 0, 2, {PNG_COLOR_TYPE_GRAY_ALPHA, 16, 1, 11, 0, 0}},
    {"train/class_c/c3.jpeg", 0, 2, {0, 0, 0, 12, 0, 0}},
    {"val/class_a/v0_palette4bit.png", 1, 0, {PNG_COLOR_TYPE_PALETTE, 4, 0, 13, 16, 0}},
    {"val/class_b/v1.jpg", 1, 1, {0, 0, 0, 14, 0, 0}},
    {"val/class_c/v2_rgba16_interlaced.png", 1, 2, {PNG_COLOR_TYPE_RGB_ALPHA, 16, 1, 15, 0, 0}},
};
#define N_PNG_CASES ((int)(sizeof png_cases / sizeof png_cases[0]))

static Rgb png_jpeg_colour(int seed) {
    Rgb c = {(uint8_t)(20 + seed * 15), (uint8_t)(200 - seed * 7), (uint8_t)(90 + seed * 3)};
    return c;
}

static void make_png_tree(const char *root) {
    for (int i = 0; i < N_PNG_CASES; i++) {
        const PngCase *c = &png_cases[i];
        char p[1100], d[1100];
        snprintf(p, sizeof p, "%s/%s", root, c->rel);
        snprintf(d, sizeof d, "%s", p);
        *strrchr(d, '/') = 0;
        mkdirs(d);
        if (c->spec.depth == 0) write_jpeg(p, 16, 16, 0, png_jpeg_colour(c->spec.seed));
        else write_png(p, &c->spec);
    }
    write_text(in(root, "words.txt"), "class_a\tapple, pomme\nclass_b\tbanana\nclass_c\tcherry\n");
}

static void test_png_import(void) {
    char root[1024];
    snprintf(root, sizeof root, "%s", tpath("pngtree"));
    make_png_tree(root);
    ImgScan s;
    ml_status st = imgfolder_scan(root, &s);
    if (!check(st == ML_OK, "PNG+JPEG tree scan%s%s", st ? ": " : "", st ? ml_last_error() : "")) return;
    check(s.classes == 3 && s.n_train == 12 && s.n_test == 3 && s.non_image == 0,
          "PNG scan: .png/.PNG files are images (3 classes, 12 train, 3 val, %ld non-image)", s.non_image);
    ImportOptions o;
    import_options_defaults(&o);
    o.size = PNG_SIDE; /* no resizing: PNG pixels must come back exactly */
    o.block = 5;
    ImportReport rep;
    st = dataset_h5_import_folder(&s, tpath("pngtree.h5"), &o, &rep);
    imgfolder_scan_free(&s);
    check(st == ML_OK && rep.n_train == 12 && rep.n_test == 3 && rep.unreadable == 0,
          "PNG+JPEG tree imports (%ld/%ld, %ld unreadable%s%s)", rep.n_train, rep.n_test, rep.unreadable,
          st ? ": " : "", st ? ml_last_error() : "");
    Dataset ds;
    st = st == ML_OK ? dataset_open(&ds, tpath("pngtree.h5")) : st;
    if (!check(st == ML_OK, "PNG import opens%s%s", st ? ": " : "", st ? ml_last_error() : "")) return;
    check(ds.classes == 3 && strcmp(ds.class_names[0], "apple") == 0 && strcmp(ds.class_names[1], "banana") == 0 &&
              strcmp(ds.class_names[2], "cherry") == 0,
          "PNG import: class names from words.txt");
    int at[2] = {0, 0};
    for (int i = 0; i < N_PNG_CASES; i++) {
        const PngCase *c = &png_cases[i];
        const DatasetSplit *sp = c->split ? &ds.test : &ds.train;
        int k = at[c->split]++;
        int ok = k < sp->n && sp->labels[k] == c->label;
        if (ok && c->spec.depth == 0) ok = flat_ok(&ds, sp, k, png_jpeg_colour(c->spec.seed), 4);
        else if (ok) ok = png_pixels_ok(&ds, sp, k, &c->spec);
        check(ok, "%s: label %d, %s", c->rel, c->label, c->spec.depth ? "every pixel exact" : "JPEG colour within 4");
    }
    dataset_free(&ds);
}

static uint8_t *png_bytes(const char *rel, size_t *len) {
    uint8_t *b = read_bytes(tpath("pngtree/%s", rel), len);
    if (!b) {
        fprintf(stderr, "test setup: cannot read %s\n", rel);
        exit(1);
    }
    return b;
}

/* Offset of the first chunk of the given type (its length field), or 0. */
static size_t png_chunk_at(const uint8_t *b, size_t len, const char *type) {
    size_t o = 8;
    while (o + 12 <= len) {
        size_t n = (size_t)b[o] << 24 | (size_t)b[o + 1] << 16 | (size_t)b[o + 2] << 8 | b[o + 3];
        if (memcmp(b + o + 4, type, 4) == 0) return o;
        o += 12 + n;
    }
    return 0;
}

static void put_be32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

/* Signature, an IHDR claiming w x h (valid CRC), an empty IDAT, IEND. */
static size_t png_header_only(uint8_t *b, uint32_t w, uint32_t h) {
    static const uint8_t sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    memcpy(b, sig, 8);
    size_t o = 8;
    put_be32(b + o, 13);
    memcpy(b + o + 4, "IHDR", 4);
    put_be32(b + o + 8, w);
    put_be32(b + o + 12, h);
    b[o + 16] = 8;
    b[o + 17] = PNG_COLOR_TYPE_RGB;
    b[o + 18] = b[o + 19] = b[o + 20] = 0;
    put_be32(b + o + 21, (uint32_t)crc32(0, b + o + 4, 17));
    o += 25;
    static const char *const rest[2] = {"IDAT", "IEND"};
    for (int i = 0; i < 2; i++) {
        put_be32(b + o, 0);
        memcpy(b + o + 4, rest[i], 4);
        put_be32(b + o + 8, (uint32_t)crc32(0, b + o + 4, 4));
        o += 12;
    }
    return o;
}

static void test_png_damaged(void) {
    uint8_t out[PNG_SIDE * PNG_SIDE * 3];
    char err[200];
    size_t len;
    uint8_t *good = png_bytes("train/class_c/c0_rgb16.png", &len);
    check(png_decode_resized(good, len, PNG_SIDE, out, err, sizeof err) == 0 &&
              image_decode_resized(good, len, PNG_SIDE, out, err, sizeof err) == 0,
          "png_decode_resized and image_decode_resized decode a good PNG");
    uint8_t *b = malloc(len + 64);
    /* truncated in the image data, and only IEND missing */
    int bad = png_decode_resized(good, len / 2, PNG_SIDE, out, err, sizeof err);
    check(bad && strstr(err, "truncated") && !strchr(err, '\n'), "PNG cut in half: \"%s\"", err);
    bad = png_decode_resized(good, len - 12, PNG_SIDE, out, err, sizeof err);
    check(bad && strstr(err, "truncated"), "PNG without IEND: \"%s\"", err);
    bad = png_decode_resized(good, 5, PNG_SIDE, out, err, sizeof err);
    check(bad && strstr(err, "truncated"), "PNG cut inside the signature: \"%s\"", err);
    /* CRC errors: IDAT (critical) and IHDR */
    size_t idat = png_chunk_at(good, len, "IDAT");
    memcpy(b, good, len);
    size_t n = (size_t)b[idat] << 24 | (size_t)b[idat + 1] << 16 | (size_t)b[idat + 2] << 8 | b[idat + 3];
    b[idat + 8 + n] ^= 0x55;
    bad = idat && png_decode_resized(b, len, PNG_SIDE, out, err, sizeof err);
    check(bad && strstr(err, "IDAT") && strstr(err, "CRC") && !strchr(err, '\n'), "IDAT with a bad CRC: \"%s\"", err);
    write_bytes(tpath("pngtree/train/class_b/b9_bad_crc.png"), b, len);
    memcpy(b, good, len);
    b[8 + 8 + 3] ^= 1; /* width byte of IHDR: its CRC no longer matches */
    bad = png_decode_resized(b, len, PNG_SIDE, out, err, sizeof err);
    check(bad && strstr(err, "IHDR") && strstr(err, "CRC"), "IHDR with a bad CRC: \"%s\"", err);
    /* absurd dimensions: refused from the header, before any allocation */
    size_t hl = png_header_only(b, 60000, 60000);
    bad = png_decode_resized(b, hl, PNG_SIDE, out, err, sizeof err);
    check(bad && strstr(err, "too large") && strstr(err, "60000x60000"), "60000x60000 PNG refused: \"%s\"", err);
    write_bytes(tpath("pngtree/train/class_b/b9_huge.png"), b, hl);
    hl = png_header_only(b, 100000, 10);
    bad = png_decode_resized(b, hl, PNG_SIDE, out, err, sizeof err);
    check(bad && strstr(err, "IHDR") && strstr(err, "width"), "100000-wide PNG refused: \"%s\"", err);
    hl = png_header_only(b, 0, 10);
    bad = png_decode_resized(b, hl, PNG_SIDE, out, err, sizeof err);
    check(bad && strstr(err, "IHDR"), "zero-width PNG refused: \"%s\"", err);
    hl = png_header_only(b, 4, 4); /* valid header, no image data */
    bad = png_decode_resized(b, hl, PNG_SIDE, out, err, sizeof err);
    check(bad && strstr(err, "bad PNG"), "PNG without image data: \"%s\"", err);
    /* not a PNG */
    bad = png_decode_resized((const uint8_t *)"GIF89a....", 10, PNG_SIDE, out, err, sizeof err);
    check(bad && strstr(err, "not a PNG"), "GIF given to the PNG decoder: \"%s\"", err);
    bad = image_decode_resized((const uint8_t *)"GIF89a....", 10, PNG_SIDE, out, err, sizeof err);
    check(bad && strstr(err, "neither a JPEG nor a PNG"), "GIF given to the importer: \"%s\"", err);
    free(b);

    /* the same files in the tree: skipped and counted like unreadable JPEGs */
    write_bytes(tpath("pngtree/train/class_a/a9_trunc.png"), good, len - 20);
    write_text(tpath("pngtree/train/class_c/c9_text.png"), "not a png at all");
    free(good);
    ImgScan s;
    ml_status st = imgfolder_scan(tpath("pngtree"), &s);
    ImportOptions o;
    import_options_defaults(&o);
    o.size = PNG_SIDE;
    ImportReport rep;
    st = st == ML_OK ? dataset_h5_import_folder(&s, tpath("pngbad.h5"), &o, &rep) : st;
    check(st == ML_OK && rep.unreadable == 4 && rep.n_train == 12 && rep.n_test == 3 &&
              strstr(rep.first_unreadable, "a9_trunc.png: ") && strstr(rep.first_unreadable, "truncated") &&
              !strchr(rep.first_unreadable, '\n'),
          "damaged PNGs skipped and counted (%ld; first: %s)", rep.unreadable, rep.first_unreadable);
    Dataset ds;
    st = st == ML_OK ? dataset_open(&ds, tpath("pngbad.h5")) : st;
    if (st == ML_OK) {
        check(png_pixels_ok(&ds, &ds.train, 0, &png_cases[0].spec) &&
                  png_pixels_ok(&ds, &ds.train, 8, &png_cases[8].spec),
              "good PNGs around the damaged ones unchanged");
        dataset_free(&ds);
    }
    o.strict = 1;
    st = dataset_h5_import_folder(&s, tpath("pngbad2.h5"), &o, &rep);
    check(st == ML_ERR_FORMAT && error_has("a9_trunc.png", "--strict", "truncated") && !exists(tpath("pngbad2.h5")) &&
              !exists(tpath("pngbad2.h5.part")),
          "--strict: the truncated PNG is fatal: \"%s\"", ml_last_error());
    imgfolder_scan_free(&s);
}

static int rm_rf(const char *path) {
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", path);
    return system(cmd);
}

int main(void) {
    snprintf(tmp_root, sizeof tmp_root, "/tmp/moelab_test_formats_XXXXXX");
    if (!mkdtemp(tmp_root)) {
        fprintf(stderr, "cannot create a temporary directory\n");
        return 1;
    }
    unsetenv("MOELAB_DATA");
    dataset_set_h5_loader(dataset_h5_load);
    double t0 = ml_now();
    test_cifar10();
    test_cifar100();
    test_cifar_reject();
    test_tiny();
    test_folder();
    test_streaming();
    test_progress();
    test_h5();
    test_augment();
    test_check_and_resize();
    test_png_import();
    test_png_damaged();
    if (rm_rf(tmp_root) != 0) fprintf(stderr, "warning: could not remove %s\n", tmp_root);
    printf("%d checks, %d failed (%.1f s)\n", n_checks, n_failed, ml_now() - t0);
    return n_failed ? 1 : 0;
}
