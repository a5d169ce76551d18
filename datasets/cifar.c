/* cifar.c — the CIFAR-10 and CIFAR-100 binary versions, read directly into a Dataset.
 *
 * CIFAR-10 (`cifar-10-batches-bin/`): data_batch_1.bin ... data_batch_5.bin, test_batch.bin,
 * batches.meta.txt (10 class names). A record is 1 label byte (0..9) and 3072 pixel bytes: the
 * 32x32 R plane, then G, then B, each row-major, i.e. already the (C, H, W) layout of Dataset.
 * CIFAR-100 (`cifar-100-binary/`): train.bin, test.bin, fine_label_names.txt (100 names),
 * coarse_label_names.txt (20 names); a record is a coarse byte, a fine byte and the 3072 pixels.
 *
 * Every file's size is checked against the record size before it is read; every label against
 * its range. Fewer than five CIFAR-10 training batches are accepted when they are numbered from
 * 1 without a gap (small test sets). Mean/std are the published constants (true pixel std) by
 * default, or computed from the train split, as the options say; Dataset.stats_source records it.
 */
#define _POSIX_C_SOURCE 200809L

#include "dataset.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define CIFAR_SIDE 32
#define CIFAR_PIXELS (3 * CIFAR_SIDE * CIFAR_SIDE)
#define CIFAR_MAX_RECORDS 10000000L
#define CIFAR10_MAX_BATCHES 5
#define NAMES_MAX_BYTES (1 << 20)

/* ---- class-name files */

void dataset_names_free(char **names, int count) {
    if (!names) return;
    for (int i = 0; i < count; i++) free(names[i]);
    free(names);
}

ml_status dataset_parse_names(const char *text, size_t len, const char *what, int expected, char ***names, int *count) {
    *names = NULL;
    if (count) *count = 0;
    if (expected < 0 || expected > 100000)
        return ml_fail(ML_ERR_ARG, "%s: bad expected class count %d", what, expected);
    /* first pass: count non-blank lines */
    int n = 0;
    size_t i = 0;
    long line = 0;
    while (i < len) {
        size_t e = i;
        while (e < len && text[e] != '\n') e++;
        line++;
        int blank = 1;
        for (size_t j = i; j < e && blank; j++) blank = text[j] == ' ' || text[j] == '\t' || text[j] == '\r';
        if (!blank) {
            if (n == 100000) return ml_fail(ML_ERR_FORMAT, "%s: more than 100000 class names (line %ld)", what, line);
            n++;
        }
        i = e + 1;
    }
    if (n == 0)
        return ml_fail(ML_ERR_FORMAT, "%s: no class names: expected %d lines of names", what,
                       expected > 0 ? expected : 1);
    if (expected > 0 && n != expected)
        return ml_fail(ML_ERR_FORMAT, "%s: %d class names (non-blank lines), expected %d", what, n, expected);
    char **out = calloc((size_t)n, sizeof *out);
    if (!out) return ml_fail(ML_ERR_NOMEM, "%s: out of memory", what);
    int k = 0;
    i = 0;
    while (i < len && k < n) {
        size_t e = i;
        while (e < len && text[e] != '\n') e++;
        size_t a = i, b = e;
        while (a < b && (text[a] == ' ' || text[a] == '\t' || text[a] == '\r')) a++;
        while (b > a && (text[b - 1] == ' ' || text[b - 1] == '\t' || text[b - 1] == '\r')) b--;
        if (b > a) {
            size_t l = b - a > 255 ? 255 : b - a;
            out[k] = malloc(l + 1);
            if (!out[k]) {
                dataset_names_free(out, k);
                return ml_fail(ML_ERR_NOMEM, "%s: out of memory", what);
            }
            for (size_t j = 0; j < l; j++) {
                unsigned char ch = (unsigned char)text[a + j];
                out[k][j] = ch < 0x20 || ch == 0x7f ? '?' : (char)ch;
            }
            out[k][l] = 0;
            k++;
        }
        i = e + 1;
    }
    *names = out;
    if (count) *count = n;
    return ML_OK;
}

/* Reads a names file (at most 1 MiB). */
static ml_status read_names_file(const char *path, int expected, char ***names) {
    struct stat st;
    if (stat(path, &st) != 0) return ml_fail(ML_ERR_IO, "%s: missing class-name file: %s", path, strerror(errno));
    if (!S_ISREG(st.st_mode) || st.st_size > NAMES_MAX_BYTES)
        return ml_fail(ML_ERR_FORMAT, "%s: not a class-name text file (%lld bytes)", path, (long long)st.st_size);
    FILE *f = fopen(path, "rb");
    if (!f) return ml_fail(ML_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    char *buf = malloc((size_t)st.st_size + 1);
    if (!buf) {
        fclose(f);
        return ml_fail(ML_ERR_NOMEM, "%s: out of memory", path);
    }
    size_t got = fread(buf, 1, (size_t)st.st_size, f);
    fclose(f);
    ml_status s = dataset_parse_names(buf, got, path, expected, names, NULL);
    free(buf);
    return s;
}

/* ---- batch files */

static int cifar_record(int variant) { return variant == 10 ? CIFAR_PIXELS + 1 : CIFAR_PIXELS + 2; }

/* Checks that a file of `len` bytes holds whole records; sets *n. */
static ml_status cifar_check_size(size_t len, const char *what, int variant, int *n) {
    size_t rec = (size_t)cifar_record(variant);
    size_t other = (size_t)cifar_record(variant == 10 ? 100 : 10);
    if (len == 0)
        return ml_fail(ML_ERR_FORMAT, "%s: empty file: expected %zu-byte CIFAR-%d records", what, rec, variant);
    if (len % rec != 0) {
        size_t whole = len / rec;
        return ml_fail(ML_ERR_FORMAT,
                       "%s: size %zu is not a multiple of the %zu-byte CIFAR-%d record: "
                       "truncated or extra data, %zu stray bytes at offset %zu (record %zu)%s",
                       what, len, rec, variant, len - whole * rec, whole * rec, whole,
                       len % other == 0 ? (variant == 10 ? "; the size fits 3074-byte CIFAR-100 "
                                                           "records"
                                                         : "; the size fits 3073-byte CIFAR-10 "
                                                           "records")
                                        : "");
    }
    if (len / rec > (size_t)CIFAR_MAX_RECORDS)
        return ml_fail(ML_ERR_FORMAT, "%s: %zu records: more than the %ld accepted", what, len / rec,
                       CIFAR_MAX_RECORDS);
    *n = (int)(len / rec);
    return ML_OK;
}

ml_status cifar_parse_batch(const uint8_t *buf, size_t len, const char *what, int variant, int coarse, uint8_t *images,
                            int32_t *labels, int *n) {
    *n = 0;
    if (variant != 10 && variant != 100)
        return ml_fail(ML_ERR_ARG, "%s: CIFAR variant %d: expected 10 or 100", what, variant);
    int cnt = 0;
    ml_status st = cifar_check_size(buf ? len : 0, what, variant, &cnt);
    if (st != ML_OK) return st;
    size_t rec = (size_t)cifar_record(variant);
    for (int i = 0; i < cnt; i++) {
        const uint8_t *r = buf + (size_t)i * rec;
        size_t off = (size_t)i * rec;
        int32_t lab;
        if (variant == 10) {
            if (r[0] > 9)
                return ml_fail(ML_ERR_FORMAT,
                               "%s: label %u at offset %zu (record %d) out of range: expected "
                               "0..9",
                               what, r[0], off, i);
            lab = r[0];
        } else {
            if (r[0] > 19)
                return ml_fail(ML_ERR_FORMAT,
                               "%s: coarse label %u at offset %zu (record %d) out of range: "
                               "expected 0..19",
                               what, r[0], off, i);
            if (r[1] > 99)
                return ml_fail(ML_ERR_FORMAT,
                               "%s: fine label %u at offset %zu (record %d) out of range: "
                               "expected 0..99",
                               what, r[1], off + 1, i);
            lab = coarse ? r[0] : r[1];
        }
        if (labels) labels[i] = lab;
        if (images) memcpy(images + (size_t)i * CIFAR_PIXELS, r + (variant == 10 ? 1 : 2), CIFAR_PIXELS);
    }
    *n = cnt;
    return ML_OK;
}

typedef struct {
    char path[4096];
    size_t len;
    int n;
} BatchFile;

static ml_status batch_path(BatchFile *b, const char *dir, const char *name) {
    int k = snprintf(b->path, sizeof b->path, "%s/%s", dir, name);
    if (k < 0 || (size_t)k >= sizeof b->path) return ml_fail(ML_ERR_ARG, "%s: directory path too long", dir);
    return ML_OK;
}

/* Stats a batch file and validates its size (nothing is read yet). */
static ml_status batch_probe(BatchFile *b, int variant, const char *what_missing) {
    struct stat st;
    if (stat(b->path, &st) != 0)
        return ml_fail(ML_ERR_IO, "%s: missing %s: %s", b->path, what_missing, strerror(errno));
    if (!S_ISREG(st.st_mode)) return ml_fail(ML_ERR_IO, "%s: not a regular file", b->path);
    b->len = (size_t)st.st_size;
    return cifar_check_size(b->len, b->path, variant, &b->n);
}

/* Reads one probed batch into images/labels at the split's position `at`. */
static ml_status batch_read(const BatchFile *b, int variant, int coarse, DatasetSplit *s, int at) {
    FILE *f = fopen(b->path, "rb");
    if (!f) return ml_fail(ML_ERR_IO, "%s: cannot open: %s", b->path, strerror(errno));
    uint8_t *buf = malloc(b->len);
    if (!buf) {
        fclose(f);
        return ml_fail(ML_ERR_NOMEM, "%s: out of memory for %zu bytes", b->path, b->len);
    }
    size_t got = fread(buf, 1, b->len, f);
    int extra = got == b->len && fgetc(f) != EOF;
    fclose(f);
    ml_status st = ML_OK;
    if (got != b->len || extra)
        st = ml_fail(ML_ERR_IO, "%s: file changed size while reading (at offset %zu)", b->path, got);
    int n = 0;
    if (st == ML_OK)
        st = cifar_parse_batch(buf, b->len, b->path, variant, coarse, s->images + (size_t)at * CIFAR_PIXELS,
                               s->labels + at, &n);
    free(buf);
    return st;
}

static ml_status split_alloc(DatasetSplit *s, long n, const char *dir) {
    if (n > CIFAR_MAX_RECORDS)
        return ml_fail(ML_ERR_FORMAT, "%s: %ld records in one split: more than %ld", dir, n, CIFAR_MAX_RECORDS);
    s->images = ml_alloc((size_t)n * CIFAR_PIXELS);
    s->labels = ml_alloc((size_t)n * sizeof(int32_t));
    if (!s->images || !s->labels) return ml_fail(ML_ERR_NOMEM, "%s: out of memory for %ld images", dir, n);
    s->n = (int)n;
    return ML_OK;
}

static ml_status set_stats(Dataset *ds, int variant, DatasetStats stats) {
    static const float m10[3] = {0.4914f, 0.4822f, 0.4465f}, s10[3] = {0.2470f, 0.2435f, 0.2616f};
    static const float k10[3] = {0.2023f, 0.1994f, 0.2010f};
    static const float m100[3] = {0.5071f, 0.4865f, 0.4409f}, s100[3] = {0.2673f, 0.2564f, 0.2762f};
    for (int c = 0; c < DATASET_MAX_CHANNELS; c++) {
        ds->mean[c] = 0.0f;
        ds->std[c] = 1.0f;
    }
    if (stats == DATASET_STATS_COMPUTED) {
        dataset_compute_stats(ds);
        return ML_OK;
    }
    if (stats == DATASET_STATS_KUANGLIU && variant != 10)
        return ml_fail(ML_ERR_ARG,
                       "%s: stats=kuangliu is the CIFAR-10 std of pytorch-cifar: expected "
                       "stats=known or stats=computed for CIFAR-100",
                       ds->source);
    for (int c = 0; c < 3; c++) {
        ds->mean[c] = variant == 10 ? m10[c] : m100[c];
        ds->std[c] = variant == 10 ? (stats == DATASET_STATS_KUANGLIU ? k10[c] : s10[c]) : s100[c];
    }
    snprintf(ds->stats_source, sizeof ds->stats_source, "%s",
             variant == 100                    ? "known: CIFAR-100 published mean/std"
             : stats == DATASET_STATS_KUANGLIU ? "known: CIFAR-10 mean, kuangliu std 0.2023/0.1994/0.2010"
                                               : "known: CIFAR-10 mean, true pixel std");
    return ML_OK;
}

static ml_status load10(Dataset *ds, const char *dir, const DatasetOpenOptions *o) {
    BatchFile tr[CIFAR10_MAX_BATCHES], te;
    int nb = 0;
    ml_status st = ML_OK;
    for (int k = 0; k < CIFAR10_MAX_BATCHES && st == ML_OK; k++) {
        char name[32];
        snprintf(name, sizeof name, "data_batch_%d.bin", k + 1);
        if ((st = batch_path(&tr[k], dir, name)) != ML_OK) return st;
        struct stat sb;
        if (stat(tr[k].path, &sb) != 0) {
            if (k == 0)
                return ml_fail(ML_ERR_IO, "%s: missing CIFAR-10 training batch: %s", tr[k].path, strerror(errno));
            /* a gap: a later batch present while this one is not */
            for (int j = k + 1; j < CIFAR10_MAX_BATCHES; j++) {
                BatchFile later;
                snprintf(name, sizeof name, "data_batch_%d.bin", j + 1);
                batch_path(&later, dir, name);
                if (stat(later.path, &sb) == 0)
                    return ml_fail(ML_ERR_IO,
                                   "%s: missing CIFAR-10 training batch while %s is "
                                   "present",
                                   tr[k].path, name);
            }
            break;
        }
        st = batch_probe(&tr[k], 10, "CIFAR-10 training batch");
        nb++;
    }
    if (st != ML_OK) return st;
    if ((st = batch_path(&te, dir, "test_batch.bin")) != ML_OK ||
        (st = batch_probe(&te, 10, "CIFAR-10 test batch")) != ML_OK)
        return st;
    char meta[4096];
    snprintf(meta, sizeof meta, "%s/batches.meta.txt", dir);
    if ((st = read_names_file(meta, 10, &ds->class_names)) != ML_OK) return st;
    ds->classes = 10;
    long ntr = 0;
    for (int k = 0; k < nb; k++) ntr += tr[k].n;
    if ((st = split_alloc(&ds->train, ntr, dir)) != ML_OK || (st = split_alloc(&ds->test, te.n, dir)) != ML_OK)
        return st;
    int at = 0;
    for (int k = 0; k < nb && st == ML_OK; k++) {
        st = batch_read(&tr[k], 10, 0, &ds->train, at);
        at += tr[k].n;
    }
    if (st == ML_OK) st = batch_read(&te, 10, 0, &ds->test, 0);
    return st;
}

static ml_status load100(Dataset *ds, const char *dir, const DatasetOpenOptions *o) {
    BatchFile tr, te;
    ml_status st;
    if ((st = batch_path(&tr, dir, "train.bin")) != ML_OK ||
        (st = batch_probe(&tr, 100, "CIFAR-100 training file")) != ML_OK)
        return st;
    if ((st = batch_path(&te, dir, "test.bin")) != ML_OK ||
        (st = batch_probe(&te, 100, "CIFAR-100 test file")) != ML_OK)
        return st;
    int k = o->coarse ? 20 : 100;
    char meta[4096];
    snprintf(meta, sizeof meta, "%s/%s", dir, o->coarse ? "coarse_label_names.txt" : "fine_label_names.txt");
    if ((st = read_names_file(meta, k, &ds->class_names)) != ML_OK) return st;
    ds->classes = k;
    if ((st = split_alloc(&ds->train, tr.n, dir)) != ML_OK || (st = split_alloc(&ds->test, te.n, dir)) != ML_OK)
        return st;
    if ((st = batch_read(&tr, 100, o->coarse, &ds->train, 0)) != ML_OK) return st;
    return batch_read(&te, 100, o->coarse, &ds->test, 0);
}

ml_status cifar_load_dir(Dataset *ds, const char *dir, int variant, const DatasetOpenOptions *opt) {
    memset(ds, 0, sizeof *ds);
    DatasetOpenOptions o = {0, DATASET_STATS_KNOWN};
    if (opt) o = *opt;
    if (variant == 0) {
        char p[4096];
        struct stat sb;
        snprintf(p, sizeof p, "%s/train.bin", dir);
        variant = stat(p, &sb) == 0 ? 100 : 10;
    }
    if (variant != 10 && variant != 100)
        return ml_fail(ML_ERR_ARG, "%s: CIFAR variant %d: expected 10 or 100", dir, variant);
    snprintf(ds->source, sizeof ds->source, "%s", dir);
    ml_status st = variant == 10 ? load10(ds, dir, &o) : load100(ds, dir, &o);
    if (st == ML_OK) {
        snprintf(ds->name, sizeof ds->name, "%s",
                 variant == 10 ? "cifar-10"
                 : o.coarse    ? "cifar-100-coarse"
                               : "cifar-100");
        ds->format = variant == 10 ? DATASET_FORMAT_CIFAR10 : DATASET_FORMAT_CIFAR100;
        ds->c = 3;
        ds->h = ds->w = CIFAR_SIDE;
        st = set_stats(ds, variant, o.stats);
    }
    if (st != ML_OK) {
        /* keep the classes count consistent for dataset_free */
        dataset_free(ds);
        return st;
    }
    return ML_OK;
}
