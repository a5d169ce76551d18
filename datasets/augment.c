/* augment.c — CIFAR-style augmentation fused into the normalising batch copy.
 *
 * For each sample: pad the image by `pad` zero pixels on every side, crop an h x w window at a
 * random offset (oy, ox) in [0, 2*pad], then flip it horizontally with probability 1/2
 * (torchvision RandomCrop(size, padding=pad) followed by RandomHorizontalFlip, as in
 * kuangliu/pytorch-cifar). Output pixel (y, x) of channel ch is
 *     src(y + oy - pad, flip ? w - 1 - x + ox - pad : x + ox - pad)
 * normalised through the per-channel table, or the normalised zero, (0 - mean) / std, outside
 * the image. One rng_below(r, (2p+1)^2 * 2) per sample, drawn in batch order before the
 * parallel copy: the batch depends only on the Rng state, never on the thread count.
 */
#include "dataset.h"

#include <string.h>

int dataset_augment_default(const Dataset *ds) { return ds && ds->c == 3; }

/* One channel of one sample. */
static void augment_plane(float *dst, const uint8_t *src, const float *lut, int h, int w, int oy, int ox, int flip) {
    const float zero = lut[0];
    for (int y = 0; y < h; y++) {
        float *d = dst + (size_t)y * w;
        int sy = y + oy;
        if (sy < 0 || sy >= h) {
            for (int x = 0; x < w; x++) d[x] = zero;
            continue;
        }
        const uint8_t *s = src + (size_t)sy * w;
        /* valid x: 0 <= sx < w, with sx = x + ox (no flip) or w - 1 - x + ox (flip) */
        int lo, hi; /* output x range [lo, hi) that maps inside the image */
        if (!flip) {
            lo = ox < 0 ? -ox : 0;
            hi = ox > 0 ? w - ox : w;
        } else {
            lo = ox > 0 ? ox : 0;
            hi = ox < 0 ? w + ox : w;
        }
        for (int x = 0; x < lo; x++) d[x] = zero;
        if (!flip) {
            const uint8_t *s0 = s + ox;
            for (int x = lo; x < hi; x++) d[x] = lut[s0[x]];
        } else {
            const uint8_t *s0 = s + (w - 1) + ox;
            for (int x = lo; x < hi; x++) d[x] = lut[*(s0 - x)];
        }
        for (int x = hi > lo ? hi : lo; x < w; x++) d[x] = zero;
    }
}

void batch_fill_augment_ex(float *x, int32_t *y, const Dataset *ds, const DatasetSplit *split, const int32_t *idx,
                           int B, Rng *rng, int pad, int flip) {
    if (!rng || (pad <= 0 && !flip)) {
        batch_fill(x, y, ds, split, idx, B);
        return;
    }
    int C = ds->c, H = ds->h, W = ds->w;
    ML_ASSERT(C >= 1 && C <= DATASET_MAX_CHANNELS);
    if (pad < 0) pad = 0;
    if (pad > H / 2) pad = H / 2;
    if (pad > W / 2) pad = W / 2;
    size_t hw = (size_t)H * W;
    float lut[DATASET_MAX_CHANNELS][256];
    for (int ch = 0; ch < C; ch++)
        for (int v = 0; v < 256; v++) lut[ch][v] = ((float)v / 255.0f - ds->mean[ch]) / ds->std[ch];
    /* the draws: sequential, one per sample */
    enum { MAX_STACK = 1024 };
    int16_t stack_oy[MAX_STACK], stack_ox[MAX_STACK];
    uint8_t stack_fl[MAX_STACK];
    int16_t *oy = stack_oy, *ox = stack_ox;
    uint8_t *fl = stack_fl;
    void *heap = NULL;
    if (B > MAX_STACK) {
        heap = ml_alloc((size_t)B * 5);
        ML_ASSERT(heap != NULL);
        oy = heap;
        ox = oy + B;
        fl = (uint8_t *)(ox + B);
    }
    uint32_t span = (uint32_t)(2 * pad + 1);
    uint32_t nflip = flip ? 2u : 1u;
    for (int b = 0; b < B; b++) {
        ML_ASSERT(idx[b] >= 0 && idx[b] < split->n);
        if (y) y[b] = split->labels[idx[b]];
        uint32_t v = rng_below(rng, span * span * nflip);
        oy[b] = (int16_t)((int)(v % span) - pad);
        ox[b] = (int16_t)((int)((v / span) % span) - pad);
        fl[b] = (uint8_t)(v / (span * span));
    }
    long total = (long)C * B;
#pragma omp parallel for schedule(static) if (total * (long)hw > 65536)
    for (long cb = 0; cb < total; cb++) {
        int ch = (int)(cb / B), b = (int)(cb % B);
        const uint8_t *src = split->images + ((size_t)idx[b] * C + ch) * hw;
        augment_plane(x + (size_t)cb * hw, src, lut[ch], H, W, oy[b], ox[b], fl[b]);
    }
    ml_free(heap);
}

void batch_fill_augment(float *x, int32_t *y, const Dataset *ds, const DatasetSplit *split, const int32_t *idx, int B,
                        Rng *rng) {
    batch_fill_augment_ex(x, y, ds, split, idx, B, rng, DATASET_AUGMENT_PAD, 1);
}

static void source_fill(void *ctx, SplitId split, const int32_t *idx, int n, float *x, int32_t *y, Rng *aug) {
    const Dataset *ds = ctx;
    batch_fill_augment(x, y, ds, split == SPLIT_TRAIN ? &ds->train : &ds->test, idx, n, aug);
}

void dataset_batch_source(const Dataset *ds, BatchSource *src) {
    memset(src, 0, sizeof *src);
    src->name = ds->name;
    src->source = ds->source;
    src->mean = ds->mean;
    src->std = ds->std;
    src->c = ds->c;
    src->h = ds->h;
    src->w = ds->w;
    src->classes = ds->classes;
    src->n_train = ds->train.n;
    src->n_test = ds->test.n;
    src->class_names = (const char *const *)ds->class_names;
    src->augment_default = dataset_augment_default(ds);
    src->fill = source_fill;
    src->ctx = (void *)ds;
}
