/* check.c — looking for problems in a loaded dataset (what `moelab data info` reports).
 *
 * Class balance from the label counts; exact duplicate images by a 64-bit hash of each image's
 * bytes, sorted, with every hash match confirmed by memcmp; test images that also occur in the
 * train split by binary search in the sorted train hashes. Each kind of problem becomes one
 * note with its count and a first example.
 */
#define _POSIX_C_SOURCE 200809L

#include "dataset.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void dataset_notes_add(DatasetNotes *n, const char *fmt, ...) {
    if (n->count >= DATASET_MAX_NOTES) {
        n->dropped++;
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(n->text[n->count], sizeof n->text[0], fmt, ap);
    va_end(ap);
    for (char *p = n->text[n->count]; *p; p++)
        if (*p == '\n' || *p == '\r') *p = ' ';
    n->count++;
}

void dataset_class_counts(const DatasetSplit *s, int classes, long *counts) {
    for (int k = 0; k < classes; k++) counts[k] = 0;
    for (int i = 0; i < s->n; i++)
        if (s->labels[i] >= 0 && s->labels[i] < classes) counts[s->labels[i]]++;
}

/* A fast 64-bit hash of n bytes (8-byte words, multiply-xorshift mixing). */
static uint64_t hash_bytes(const uint8_t *p, size_t n) {
    uint64_t h = 0x9e3779b97f4a7c15ull ^ (n * 0xff51afd7ed558ccdull);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t v;
        memcpy(&v, p + i, 8);
        h ^= v * 0xc4ceb9fe1a85ec53ull;
        h = (h << 29 | h >> 35) * 0x9e3779b97f4a7c15ull;
    }
    for (; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ull;
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    return h;
}

typedef struct {
    uint64_t h;
    int32_t i;
} HashIdx;

static int cmp_hash(const void *a, const void *b) {
    const HashIdx *x = a, *y = b;
    if (x->h != y->h) return x->h < y->h ? -1 : 1;
    return x->i < y->i ? -1 : x->i > y->i;
}

static const char *cname(const Dataset *ds, int k) {
    return ds->class_names && k >= 0 && k < ds->classes && ds->class_names[k] ? ds->class_names[k] : "?";
}

static void check_balance(const Dataset *ds, DatasetNotes *notes) {
    if (ds->classes < 1 || ds->train.n < 1) return;
    long *cnt = calloc((size_t)ds->classes, sizeof(long));
    long *tcnt = calloc((size_t)ds->classes, sizeof(long));
    if (!cnt || !tcnt) {
        free(cnt);
        free(tcnt);
        return;
    }
    dataset_class_counts(&ds->train, ds->classes, cnt);
    dataset_class_counts(&ds->test, ds->classes, tcnt);
    int kmin = 0, kmax = 0, empty = 0, first_empty = -1, tempty = 0;
    for (int k = 0; k < ds->classes; k++) {
        if (cnt[k] < cnt[kmin]) kmin = k;
        if (cnt[k] > cnt[kmax]) kmax = k;
        if (cnt[k] == 0 && empty++ == 0) first_empty = k;
        if (tcnt[k] == 0) tempty++;
    }
    if (empty)
        dataset_notes_add(notes, "%d of %d classes have no training image (first: %d '%s')", empty, ds->classes,
                          first_empty, cname(ds, first_empty));
    else if (cnt[kmax] > 1.5 * cnt[kmin])
        dataset_notes_add(notes,
                          "class imbalance: class %d '%s' has %ld training images, class %d "
                          "'%s' %ld (ratio %.1f)",
                          kmax, cname(ds, kmax), cnt[kmax], kmin, cname(ds, kmin), cnt[kmin],
                          (double)cnt[kmax] / (double)cnt[kmin]);
    if (tempty && ds->test.n >= ds->classes)
        dataset_notes_add(notes, "%d of %d classes have no test image", tempty, ds->classes);
    free(cnt);
    free(tcnt);
}

static HashIdx *hash_split(const Dataset *ds, const DatasetSplit *s, size_t isize) {
    HashIdx *h = malloc((size_t)(s->n > 0 ? s->n : 1) * sizeof *h);
    if (!h) return NULL;
    long n = s->n;
#pragma omp parallel for schedule(static)
    for (long i = 0; i < n; i++) {
        h[i].h = hash_bytes(s->images + (size_t)i * isize, isize);
        h[i].i = (int32_t)i;
    }
    qsort(h, (size_t)s->n, sizeof *h, cmp_hash);
    return h;
}

static void check_duplicates(const Dataset *ds, DatasetNotes *notes) {
    size_t isize = (size_t)ds->c * ds->h * ds->w;
    if (ds->train.n < 1 || isize == 0) return;
    HashIdx *tr = hash_split(ds, &ds->train, isize);
    if (!tr) return;
    const uint8_t *im = ds->train.images;
    long dup = 0, conflict = 0, constant = 0;
    int d0 = -1, d1 = -1, c0 = -1, c1 = -1, k0 = -1;
    int r = 0; /* first index of the current run of equal hashes */
    for (int j = 1; j < ds->train.n; j++) {
        if (tr[j].h != tr[r].h) {
            r = j;
            continue;
        }
        /* compared with the first of its run only: a colliding non-equal first hides nothing
         * in practice (64-bit hash) */
        int a = tr[r].i, b = tr[j].i;
        if (memcmp(im + (size_t)a * isize, im + (size_t)b * isize, isize) != 0) continue;
        if (dup++ == 0) {
            d0 = a;
            d1 = b;
        }
        if (ds->train.labels[a] != ds->train.labels[b] && conflict++ == 0) {
            c0 = a;
            c1 = b;
        }
    }
    for (int i = 0; i < ds->train.n; i++) {
        const uint8_t *p = im + (size_t)i * isize;
        size_t j = 1;
        while (j < isize && p[j] == p[0]) j++;
        if (j == isize && constant++ == 0) k0 = i;
    }
    if (dup)
        dataset_notes_add(notes,
                          "%ld training images are exact duplicates of another training image "
                          "(first: train #%d = train #%d)",
                          dup, d1, d0);
    if (conflict)
        dataset_notes_add(notes,
                          "%ld duplicate training images carry different labels (first: train "
                          "#%d '%s' = train #%d '%s')",
                          conflict, c1, cname(ds, ds->train.labels[c1]), c0, cname(ds, ds->train.labels[c0]));
    if (constant)
        dataset_notes_add(notes, "%ld training images are a single flat value (first: train #%d)", constant, k0);
    /* test images found in train */
    long leak = 0;
    int l0 = -1, l1 = -1;
    for (int i = 0; i < ds->test.n; i++) {
        const uint8_t *p = ds->test.images + (size_t)i * isize;
        uint64_t h = hash_bytes(p, isize);
        size_t lo = 0, hi = (size_t)ds->train.n;
        while (lo < hi) {
            size_t mid = (lo + hi) / 2;
            if (tr[mid].h < h) lo = mid + 1;
            else hi = mid;
        }
        for (size_t j = lo; j < (size_t)ds->train.n && tr[j].h == h; j++)
            if (memcmp(p, im + (size_t)tr[j].i * isize, isize) == 0) {
                if (leak++ == 0) {
                    l0 = i;
                    l1 = tr[j].i;
                }
                break;
            }
    }
    if (leak)
        dataset_notes_add(notes,
                          "%ld test images also occur in the train split (first: test #%d = "
                          "train #%d)",
                          leak, l0, l1);
    free(tr);
}

void dataset_check(const Dataset *ds, DatasetNotes *notes) {
    check_balance(ds, notes);
    check_duplicates(ds, notes);
    int bad = 0;
    for (int ch = 0; ch < ds->c && ch < DATASET_MAX_CHANNELS; ch++)
        bad |= !(ds->std[ch] > 0.0f) || ds->mean[ch] < 0.0f || ds->mean[ch] > 1.0f;
    if (bad)
        dataset_notes_add(notes, "normalisation constants look wrong (mean outside [0,1] or std "
                                 "not positive)");
}
