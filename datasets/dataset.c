/* dataset.c — opening datasets by spec, freeing them, normalisation statistics and batching.
 *
 * dataset_open() maps a spec string ("fashion-mnist", "mnist", "synthetic[:HxWxC[:K[:N]]]",
 * "default" or a directory) to a reader. Named datasets live under /usr/share/datasets, or
 * under $MOELAB_DATA when it is set. batch_fill() turns uint8 (N, C, H, W) images into the
 * normalised float (C, B, H, W) layout the core's layers consume.
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

static const char *data_root(void)
{
    const char *r = getenv("MOELAB_DATA");
    return r && *r ? r : DATASET_ROOT_DEFAULT;
}

static int is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* Opens the named IDX dataset `name` under the data root. */
static ml_status open_named(Dataset *ds, const char *name)
{
    char dir[4096];
    int k = snprintf(dir, sizeof dir, "%s/%s", data_root(), name);
    if (k < 0 || (size_t)k >= sizeof dir)
        return ml_fail(ML_ERR_ARG, "%s: data directory path too long", name);
    if (!is_dir(dir))
        return ml_fail(ML_ERR_IO,
                       "%s: dataset directory %s not found (set MOELAB_DATA to a directory "
                       "holding %s/%s)",
                       name, dir, name,
                       strcmp(name, "fashion-mnist") == 0
                           ? ", or install the Debian package dataset-fashion-mnist"
                           : "");
    return idx_load_dir(ds, dir, name);
}

/* Parses a decimal integer in [lo, hi] from s[0..len). */
static int parse_int(const char *s, size_t len, long lo, long hi, int *out)
{
    if (len == 0 || len > 10)
        return 0;
    long v = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return 0;
        v = v * 10 + (s[i] - '0');
    }
    if (v < lo || v > hi)
        return 0;
    *out = (int)v;
    return 1;
}

/* "synthetic[:HxWxC[:K[:N]]]": N is the train size, the test size is N/5 (at least 1). */
static ml_status open_synthetic(Dataset *ds, const char *spec)
{
    SyntheticOptions o;
    synthetic_defaults(&o);
    const char *p = spec + strlen("synthetic");
    if (*p == 0)
        return synthetic_generate(ds, &o);
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
        if (!e)
            break;
        p = e + 1;
    }
    /* shape */
    int dims[3] = {0, 0, 0};
    const char *q = fields[0], *end = fields[0] + lens[0];
    for (int d = 0; d < 3; d++) {
        const char *x = q;
        while (x < end && *x != 'x' && *x != 'X')
            x++;
        if ((d < 2 && x == end) || (d == 2 && x != end) ||
            !parse_int(q, (size_t)(x - q), d == 2 ? 1 : 4, d == 2 ? DATASET_MAX_CHANNELS : 4096,
                       &dims[d]))
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
static void path_basename(const char *path, char *out, size_t cap)
{
    size_t end = strlen(path);
    while (end > 1 && path[end - 1] == '/')
        end--;
    size_t start = end;
    while (start > 0 && path[start - 1] != '/')
        start--;
    size_t len = end - start;
    if (len >= cap)
        len = cap - 1;
    memcpy(out, path + start, len);
    out[len] = 0;
}

ml_status dataset_open(Dataset *ds, const char *spec)
{
    memset(ds, 0, sizeof *ds);
    if (!spec || !*spec)
        spec = "default";
    if (strcmp(spec, "default") == 0) {
        char dir[4096];
        int k = snprintf(dir, sizeof dir, "%s/fashion-mnist", data_root());
        if (k > 0 && (size_t)k < sizeof dir && is_dir(dir))
            return idx_load_dir(ds, dir, "fashion-mnist");
        return open_synthetic(ds, "synthetic");
    }
    if (strcmp(spec, "fashion-mnist") == 0 || strcmp(spec, "mnist") == 0)
        return open_named(ds, spec);
    if (strncmp(spec, "synthetic", 9) == 0 && (spec[9] == 0 || spec[9] == ':'))
        return open_synthetic(ds, spec);

    struct stat st;
    if (stat(spec, &st) != 0) {
        if (errno == ENOENT)
            return ml_fail(ML_ERR_ARG,
                           "%s: unknown dataset: expected fashion-mnist, mnist, "
                           "synthetic[:HxWxC[:K[:N]]], default or a directory of IDX files",
                           spec);
        return ml_fail(ML_ERR_IO, "%s: cannot access: %s", spec, strerror(errno));
    }
    if (!S_ISDIR(st.st_mode))
        return ml_fail(ML_ERR_ARG,
                       "%s: not a directory: expected a directory holding the four IDX files "
                       "(train-images-idx3-ubyte, ...)",
                       spec);
    char name[64];
    path_basename(spec, name, sizeof name);
    return idx_load_dir(ds, spec, name);
}

void dataset_free(Dataset *ds)
{
    if (!ds)
        return;
    if (ds->class_names) {
        for (int k = 0; k < ds->classes; k++)
            free(ds->class_names[k]);
        free(ds->class_names);
    }
    ml_free(ds->train.images);
    ml_free(ds->train.labels);
    ml_free(ds->test.images);
    ml_free(ds->test.labels);
    memset(ds, 0, sizeof *ds);
}

void dataset_compute_stats(Dataset *ds)
{
    for (int ch = 0; ch < DATASET_MAX_CHANNELS; ch++) {
        ds->mean[ch] = 0.0f;
        ds->std[ch] = 1.0f;
    }
    const DatasetSplit *s = &ds->train;
    if (s->n <= 0 || !s->images || ds->c < 1 || ds->c > DATASET_MAX_CHANNELS)
        return;
    size_t hw = (size_t)ds->h * ds->w;
    size_t isize = (size_t)ds->c * hw;
    for (int ch = 0; ch < ds->c; ch++) {
        /* Exact integer sums (255^2 * 2^44 pixels still fit in 64 bits): deterministic and
         * independent of the number of threads. */
        uint64_t sum = 0, sq = 0;
        long n = s->n;
#pragma omp parallel for reduction(+ : sum, sq) schedule(static)
        for (long i = 0; i < n; i++) {
            const uint8_t *p = s->images + (size_t)i * isize + (size_t)ch * hw;
            uint64_t a = 0, b = 0;
            for (size_t j = 0; j < hw; j++) {
                a += p[j];
                b += (uint32_t)p[j] * p[j];
            }
            sum += a;
            sq += b;
        }
        double cnt = (double)s->n * (double)hw;
        double mean = (double)sum / 255.0 / cnt;
        double var = (double)sq / (255.0 * 255.0) / cnt - mean * mean;
        double sd = var > 0 ? sqrt(var) : 0.0;
        ds->mean[ch] = (float)mean;
        ds->std[ch] = sd > 1e-6 ? (float)sd : 1.0f;
    }
}

void batch_fill(float *x, int32_t *y, const Dataset *ds, const DatasetSplit *split,
                const int32_t *idx, int B)
{
    int C = ds->c;
    ML_ASSERT(C >= 1 && C <= DATASET_MAX_CHANNELS);
    size_t hw = (size_t)ds->h * ds->w;
    /* One table per channel: every pixel value maps through the same expression. */
    float lut[DATASET_MAX_CHANNELS][256];
    for (int ch = 0; ch < C; ch++)
        for (int v = 0; v < 256; v++)
            lut[ch][v] = ((float)v / 255.0f - ds->mean[ch]) / ds->std[ch];
    for (int b = 0; b < B; b++) {
        ML_ASSERT(idx[b] >= 0 && idx[b] < split->n);
        if (y)
            y[b] = split->labels[idx[b]];
    }
    long total = (long)C * B;
#pragma omp parallel for schedule(static) if (total * (long)hw > 65536)
    for (long cb = 0; cb < total; cb++) {
        int ch = (int)(cb / B), b = (int)(cb % B);
        const uint8_t *src = split->images + ((size_t)idx[b] * C + ch) * hw;
        float *dst = x + (size_t)cb * hw;
        const float *t = lut[ch];
        for (size_t i = 0; i < hw; i++)
            dst[i] = t[src[i]];
    }
}
