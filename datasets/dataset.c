/* dataset.c — what every reader shares: freeing a dataset, its normalisation statistics, and
 * batching. batch_fill() turns uint8 (N, C, H, W) images into the normalised float (C, B, H, W)
 * layout the core's layers consume. Opening a dataset by spec is open.c.
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

void dataset_free(Dataset *ds) {
    if (!ds) return;
    if (ds->class_names) {
        for (int k = 0; k < ds->classes; k++) free(ds->class_names[k]);
        free(ds->class_names);
    }
    ml_free(ds->train.images);
    ml_free(ds->train.labels);
    ml_free(ds->test.images);
    ml_free(ds->test.labels);
    memset(ds, 0, sizeof *ds);
}

void dataset_compute_stats(Dataset *ds) {
    for (int ch = 0; ch < DATASET_MAX_CHANNELS; ch++) {
        ds->mean[ch] = 0.0f;
        ds->std[ch] = 1.0f;
    }
    const DatasetSplit *s = &ds->train;
    if (s->n <= 0 || !s->images || ds->c < 1 || ds->c > DATASET_MAX_CHANNELS) return;
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
    snprintf(ds->stats_source, sizeof ds->stats_source, "computed: train split");
}

void batch_fill(float *x, int32_t *y, const Dataset *ds, const DatasetSplit *split, const int32_t *idx, int B) {
    int C = ds->c;
    ML_ASSERT(C >= 1 && C <= DATASET_MAX_CHANNELS);
    size_t hw = (size_t)ds->h * ds->w;
    /* One table per channel: every pixel value maps through the same expression. */
    float lut[DATASET_MAX_CHANNELS][256];
    for (int ch = 0; ch < C; ch++)
        for (int v = 0; v < 256; v++) lut[ch][v] = ((float)v / 255.0f - ds->mean[ch]) / ds->std[ch];
    for (int b = 0; b < B; b++) {
        ML_ASSERT(idx[b] >= 0 && idx[b] < split->n);
        if (y) y[b] = split->labels[idx[b]];
    }
    long total = (long)C * B;
#pragma omp parallel for schedule(static) if (total * (long)hw > 65536)
    for (long cb = 0; cb < total; cb++) {
        int ch = (int)(cb / B), b = (int)(cb % B);
        const uint8_t *src = split->images + ((size_t)idx[b] * C + ch) * hw;
        float *dst = x + (size_t)cb * hw;
        const float *t = lut[ch];
        for (size_t i = 0; i < hw; i++) dst[i] = t[src[i]];
    }
}
