/* idx.c — the IDX file format (MNIST, Fashion-MNIST) and whole-file reading with gunzip.
 *
 * IDX: a big-endian header `00 00 <type> <ndim>` followed by ndim uint32 dimensions and the
 * data. Only unsigned-byte images (0x00000803: count, rows, cols) and labels (0x00000801:
 * count) are accepted. Every size is checked against the bytes actually present before any
 * byte is read, and every error is one line naming the file, the offset and what was expected.
 */
#define _POSIX_C_SOURCE 200809L

#include "dataset.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

#define IDX_MAGIC_IMAGES 0x00000803
#define IDX_MAGIC_LABELS 0x00000801
#define IDX_MAX_COUNT 100000000u
#define IDX_MAX_SIDE 4096u

/* Decompressed files larger than this are refused (a gzip bomb or not an image dataset). */
#define GUNZIP_MAX ((size_t)2 << 30)

static uint32_t be32(const uint8_t *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

ml_status idx_parse(const uint8_t *buf, size_t len, const char *what, int *magic, int *n, int *rows, int *cols,
                    const uint8_t **data) {
    *magic = 0;
    *n = *rows = *cols = 0;
    *data = NULL;
    if (!buf || len < 4)
        return ml_fail(ML_ERR_FORMAT,
                       "%s: truncated header: expected a 4-byte IDX magic at offset 0, "
                       "file is %zu bytes",
                       what, buf ? len : 0);
    if (buf[0] != 0 || buf[1] != 0)
        return ml_fail(ML_ERR_FORMAT,
                       "%s: bad magic 0x%02x%02x%02x%02x at offset 0: expected 0x00000803 "
                       "(IDX images) or 0x00000801 (IDX labels)",
                       what, buf[0], buf[1], buf[2], buf[3]);
    if (buf[2] != 0x08)
        return ml_fail(ML_ERR_FORMAT,
                       "%s: unsupported IDX element type 0x%02x at offset 2: expected 0x08 "
                       "(unsigned byte)",
                       what, buf[2]);
    int ndim = buf[3];
    if (ndim != 1 && ndim != 3)
        return ml_fail(ML_ERR_FORMAT,
                       "%s: unsupported IDX dimension count %d at offset 3: expected 1 "
                       "(labels) or 3 (images)",
                       what, ndim);
    size_t header = 4 + 4 * (size_t)ndim;
    if (len < header)
        return ml_fail(ML_ERR_FORMAT,
                       "%s: truncated header: expected %zu header bytes for %d dimensions, "
                       "file is %zu bytes",
                       what, header, ndim, len);

    uint32_t count = be32(buf + 4);
    if (count == 0 || count > IDX_MAX_COUNT)
        return ml_fail(ML_ERR_FORMAT, "%s: bad item count %u at offset 4: expected 1..%u", what, count, IDX_MAX_COUNT);
    uint64_t item = 1;
    uint32_t r = 0, c = 0;
    if (ndim == 3) {
        r = be32(buf + 8);
        c = be32(buf + 12);
        if (r == 0 || r > IDX_MAX_SIDE)
            return ml_fail(ML_ERR_FORMAT, "%s: bad row count %u at offset 8: expected 1..%u", what, r, IDX_MAX_SIDE);
        if (c == 0 || c > IDX_MAX_SIDE)
            return ml_fail(ML_ERR_FORMAT, "%s: bad column count %u at offset 12: expected 1..%u", what, c,
                           IDX_MAX_SIDE);
        item = (uint64_t)r * c;
    }
    /* At most 1e8 * 4096 * 4096 < 2^51: no overflow in 64 bits. */
    uint64_t want = (uint64_t)count * item;
    uint64_t have = (uint64_t)(len - header);
    const char *kind = ndim == 3 ? "pixel" : "label";
    if (have < want)
        return ml_fail(ML_ERR_FORMAT, "%s: truncated: expected %llu bytes of %s data at offset %zu, found %llu", what,
                       (unsigned long long)want, kind, header, (unsigned long long)have);
    if (have > want)
        return ml_fail(ML_ERR_FORMAT,
                       "%s: unexpected trailing data: %llu extra bytes at offset %llu after "
                       "the %s data (expected file size %llu)",
                       what, (unsigned long long)(have - want), (unsigned long long)(header + want), kind,
                       (unsigned long long)(header + want));

    *magic = ndim == 3 ? IDX_MAGIC_IMAGES : IDX_MAGIC_LABELS;
    *n = (int)count;
    *rows = (int)r;
    *cols = (int)c;
    *data = buf + header;
    return ML_OK;
}

/* Reads all of `f` into a malloc'd buffer with one spare NUL byte after the data. */
static ml_status read_stream(FILE *f, const char *path, uint8_t **out, size_t *len) {
    size_t cap = 1 << 16, n = 0;
    struct stat st;
    if (fstat(fileno(f), &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0 && (uint64_t)st.st_size < SIZE_MAX / 2)
        cap = (size_t)st.st_size + 1;
    uint8_t *buf = malloc(cap);
    if (!buf) return ml_fail(ML_ERR_NOMEM, "%s: out of memory reading %zu bytes", path, cap);
    for (;;) {
        if (n + 1 >= cap) {
            if (cap > SIZE_MAX / 4) {
                free(buf);
                return ml_fail(ML_ERR_IO, "%s: file too large", path);
            }
            uint8_t *nb = realloc(buf, cap * 2);
            if (!nb) {
                free(buf);
                return ml_fail(ML_ERR_NOMEM, "%s: out of memory reading %zu bytes", path, cap * 2);
            }
            buf = nb;
            cap *= 2;
        }
        size_t got = fread(buf + n, 1, cap - 1 - n, f);
        n += got;
        if (got == 0) {
            if (ferror(f)) {
                int e = errno;
                free(buf);
                return ml_fail(ML_ERR_IO, "%s: read error at offset %zu: %s", path, n, strerror(e));
            }
            break;
        }
    }
    buf[n] = 0;
    *out = buf;
    *len = n;
    return ML_OK;
}

/* Gunzips `in` (one or more concatenated gzip members) into a malloc'd buffer. */
static ml_status gunzip(const uint8_t *in, size_t in_len, const char *path, uint8_t **out, size_t *out_len) {
    /* The trailer's ISIZE (size mod 2^32 of the last member) is a good first guess. */
    size_t cap = 0;
    if (in_len >= 18) {
        const uint8_t *t = in + in_len - 4; /* little-endian */
        cap = (size_t)t[0] | (size_t)t[1] << 8 | (size_t)t[2] << 16 | (size_t)t[3] << 24;
    }
    if (cap < in_len) cap = in_len * 4 < GUNZIP_MAX ? in_len * 4 : GUNZIP_MAX;
    /* ISIZE is not to be trusted: deflate expands at most ~1032:1, so a larger claim is a lie
     * (or a corrupt trailer) and must not make a tiny file allocate gigabytes up front */
    if (in_len < GUNZIP_MAX / 1032 && cap > in_len * 1032) cap = in_len * 1032;
    if (cap < 4096) cap = 4096;
    if (cap > GUNZIP_MAX) cap = GUNZIP_MAX;
    cap += 1; /* room for the terminating NUL and to detect "larger than the limit" */

    uint8_t *buf = malloc(cap);
    if (!buf) return ml_fail(ML_ERR_NOMEM, "%s: out of memory decompressing (%zu bytes)", path, cap);

    z_stream zs;
    memset(&zs, 0, sizeof zs);
    if (inflateInit2(&zs, 16 + MAX_WBITS) != Z_OK) {
        free(buf);
        return ml_fail(ML_ERR_NOMEM, "%s: cannot initialise zlib", path);
    }
    size_t in_pos = 0, n = 0;
    ml_status st = ML_OK;
    for (;;) {
        if (n + 1 >= cap) {
            if (cap > GUNZIP_MAX) {
                st = ml_fail(ML_ERR_FORMAT,
                             "%s: decompressed size exceeds the %zu-byte limit (at compressed "
                             "offset %zu)",
                             path, GUNZIP_MAX, in_pos);
                break;
            }
            size_t ncap = cap > GUNZIP_MAX / 2 ? GUNZIP_MAX + 1 : cap * 2;
            uint8_t *nb = realloc(buf, ncap);
            if (!nb) {
                st = ml_fail(ML_ERR_NOMEM, "%s: out of memory decompressing (%zu bytes)", path, ncap);
                break;
            }
            buf = nb;
            cap = ncap;
        }
        size_t in_chunk = in_len - in_pos > UINT32_MAX ? UINT32_MAX : in_len - in_pos;
        size_t out_chunk = cap - 1 - n > UINT32_MAX ? UINT32_MAX : cap - 1 - n;
        zs.next_in = (Bytef *)(in + in_pos);
        zs.avail_in = (uInt)in_chunk;
        zs.next_out = buf + n;
        zs.avail_out = (uInt)out_chunk;
        int rc = inflate(&zs, Z_NO_FLUSH);
        in_pos += in_chunk - zs.avail_in;
        n += out_chunk - zs.avail_out;
        if (rc == Z_STREAM_END) {
            if (in_pos == in_len) break;
            if (in_len - in_pos >= 2 && in[in_pos] == 0x1f && in[in_pos + 1] == 0x8b) {
                inflateReset(&zs); /* another gzip member follows */
                continue;
            }
            size_t k = in_pos;
            while (k < in_len && in[k] == 0) k++;
            if (k == in_len) break; /* trailing zero padding, as gzip(1) tolerates */
            st = ml_fail(ML_ERR_FORMAT,
                         "%s: unexpected trailing data at compressed offset %zu after the end "
                         "of the gzip stream",
                         path, in_pos);
            break;
        }
        if (rc == Z_OK) continue;
        if (rc == Z_BUF_ERROR) {
            if (zs.avail_out == 0) continue; /* output full: grow */
            st = ml_fail(ML_ERR_FORMAT,
                         "%s: truncated gzip stream: input ends at compressed offset %zu "
                         "before the end of the data (%zu bytes decompressed)",
                         path, in_pos, n);
            break;
        }
        st = ml_fail(ML_ERR_FORMAT, "%s: corrupt gzip stream at compressed offset %zu: %s", path, in_pos,
                     zs.msg ? zs.msg : "inflate error");
        break;
    }
    inflateEnd(&zs);
    if (st != ML_OK) {
        free(buf);
        return st;
    }
    buf[n] = 0;
    *out = buf;
    *out_len = n;
    return ML_OK;
}

ml_status file_read_all(const char *path, uint8_t **out, size_t *len) {
    *out = NULL;
    *len = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return ml_fail(ML_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    uint8_t *raw = NULL;
    size_t raw_len = 0;
    ml_status st = read_stream(f, path, &raw, &raw_len);
    fclose(f);
    if (st != ML_OK) return st;
    if (raw_len >= 2 && raw[0] == 0x1f && raw[1] == 0x8b) {
        uint8_t *plain = NULL;
        size_t plain_len = 0;
        st = gunzip(raw, raw_len, path, &plain, &plain_len);
        free(raw);
        if (st != ML_OK) return st;
        raw = plain;
        raw_len = plain_len;
    }
    *out = raw;
    *len = raw_len;
    return ML_OK;
}

/* ---- idx_load_dir */

static const char *const fashion_names[10] = {
    "T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot",
};

static int is_regular_file(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* Finds `dir/base` or `dir/base.gz` (also the `train-images.idx3-ubyte` spelling). */
static ml_status idx_find(const char *dir, const char *base, char *path, size_t cap) {
    char alt[64];
    snprintf(alt, sizeof alt, "%s", base);
    char *dash = strstr(alt, "-idx");
    if (dash) *dash = '.';
    const char *names[2] = {base, alt};
    const char *suffix[2] = {"", ".gz"};
    for (int i = 0; i < 2; i++) {
        for (int j = 0; j < 2; j++) {
            int k = snprintf(path, cap, "%s/%s%s", dir, names[i], suffix[j]);
            if (k < 0 || (size_t)k >= cap) return ml_fail(ML_ERR_ARG, "%s: directory path too long", dir);
            if (is_regular_file(path)) return ML_OK;
        }
    }
    snprintf(path, cap, "%s/%s", dir, base);
    return ml_fail(ML_ERR_IO, "%s: missing IDX file: expected %s or %s.gz", path, base, base);
}

typedef struct {
    char path[4096];
    uint8_t *buf;
    size_t len;
    int n, rows, cols;
    const uint8_t *data;
} IdxFile;

static ml_status idx_read(const char *dir, const char *base, int want_magic, IdxFile *f) {
    ml_status st = idx_find(dir, base, f->path, sizeof f->path);
    if (st != ML_OK) return st;
    st = file_read_all(f->path, &f->buf, &f->len);
    if (st != ML_OK) return st;
    int magic = 0;
    st = idx_parse(f->buf, f->len, f->path, &magic, &f->n, &f->rows, &f->cols, &f->data);
    if (st != ML_OK) return st;
    if (magic != want_magic)
        return ml_fail(ML_ERR_FORMAT,
                       "%s: wrong IDX kind at offset 0: expected magic 0x%08x (%s), found "
                       "0x%08x (%s)",
                       f->path, want_magic, want_magic == IDX_MAGIC_IMAGES ? "images" : "labels", magic,
                       magic == IDX_MAGIC_IMAGES ? "images" : "labels");
    return ML_OK;
}

static ml_status idx_split(DatasetSplit *s, const IdxFile *img, const IdxFile *lab) {
    if (lab->n != img->n)
        return ml_fail(ML_ERR_FORMAT, "%s: label count %d at offset 4 does not match the image count %d of %s",
                       lab->path, lab->n, img->n, img->path);
    size_t pix = (size_t)img->n * img->rows * img->cols;
    s->images = ml_alloc(pix);
    s->labels = ml_alloc((size_t)img->n * sizeof(int32_t));
    if (!s->images || !s->labels) return ml_fail(ML_ERR_NOMEM, "%s: out of memory for %d images", img->path, img->n);
    memcpy(s->images, img->data, pix);
    for (int i = 0; i < lab->n; i++) s->labels[i] = lab->data[i];
    s->n = img->n;
    return ML_OK;
}

/* The class count of a dataset known by name (0: unknown, inferred from the labels). */
static int idx_known_classes(const char *name) {
    return strcmp(name, "mnist") == 0 || strcmp(name, "fashion-mnist") == 0 ? 10 : 0;
}

/* Offset of label i in its (decompressed) IDX file. */
static size_t label_offset(const IdxFile *lab, int i) { return (size_t)(lab->data - lab->buf) + (size_t)i; }

/* IDX files carry no class count, so one corrupted label byte would silently add classes (a
 * 200 among 0..9 makes 201). A dataset known by name must keep its labels in 0..known-1; for
 * another, every class 0..max must have a training sample, and the first label above the
 * first missing class is refused. Errors name the file, the offset and the value. */
static ml_status idx_check_labels(const IdxFile *train, const IdxFile *test, const char *name, int *classes) {
    const int known = idx_known_classes(name);
    const IdxFile *lab[2] = {train, test};
    if (known > 0) {
        for (int f = 0; f < 2; f++)
            for (int i = 0; i < lab[f]->n; i++)
                if (lab[f]->data[i] >= known)
                    return ml_fail(ML_ERR_FORMAT,
                                   "%s: label %d at offset %zu is out of range 0..%d: %s has %d "
                                   "classes (a corrupted label byte?)",
                                   lab[f]->path, lab[f]->data[i], label_offset(lab[f], i), known - 1, name, known);
        *classes = known;
        return ML_OK;
    }
    int count[256] = {0}, max_label = 0;
    for (int f = 0; f < 2; f++)
        for (int i = 0; i < lab[f]->n; i++) {
            if (f == 0) count[lab[f]->data[i]]++;
            if (lab[f]->data[i] > max_label) max_label = lab[f]->data[i];
        }
    int missing = -1;
    for (int k = 0; k <= max_label && missing < 0; k++)
        if (count[k] == 0) missing = k;
    if (missing >= 0)
        for (int f = 0; f < 2; f++)
            for (int i = 0; i < lab[f]->n; i++)
                if (lab[f]->data[i] > missing)
                    return ml_fail(ML_ERR_FORMAT,
                                   "%s: label %d at offset %zu: class %d has no training sample, so "
                                   "the labels above it look corrupted (IDX labels must be 0..K-1 "
                                   "with every class present in %s)",
                                   lab[f]->path, lab[f]->data[i], label_offset(lab[f], i), missing, train->path);
    *classes = max_label + 1 < 2 ? 2 : max_label + 1;
    return ML_OK;
}

ml_status idx_load_dir(Dataset *ds, const char *dir, const char *name) {
    memset(ds, 0, sizeof *ds);
    static const char *const bases[4] = {
        "train-images-idx3-ubyte",
        "train-labels-idx1-ubyte",
        "t10k-images-idx3-ubyte",
        "t10k-labels-idx1-ubyte",
    };
    static const int magics[4] = {IDX_MAGIC_IMAGES, IDX_MAGIC_LABELS, IDX_MAGIC_IMAGES, IDX_MAGIC_LABELS};
    IdxFile *f = calloc(4, sizeof *f);
    if (!f) return ml_fail(ML_ERR_NOMEM, "%s: out of memory", dir);
    ml_status st = ML_OK;
    int classes = 0;
    for (int i = 0; i < 4 && st == ML_OK; i++) st = idx_read(dir, bases[i], magics[i], &f[i]);
    if (st == ML_OK && (f[0].rows != f[2].rows || f[0].cols != f[2].cols))
        st = ml_fail(ML_ERR_FORMAT,
                     "%s: image shape %dx%d at offset 8 does not match the train images' "
                     "%dx%d in %s",
                     f[2].path, f[2].rows, f[2].cols, f[0].rows, f[0].cols, f[0].path);
    if (st == ML_OK) st = idx_split(&ds->train, &f[0], &f[1]);
    if (st == ML_OK) st = idx_split(&ds->test, &f[2], &f[3]);
    if (st == ML_OK) st = idx_check_labels(&f[1], &f[3], name && *name ? name : "idx", &classes);
    if (st == ML_OK) {
        snprintf(ds->name, sizeof ds->name, "%s", name && *name ? name : "idx");
        snprintf(ds->source, sizeof ds->source, "%s", dir);
        ds->format = DATASET_FORMAT_IDX;
        ds->c = 1;
        ds->h = f[0].rows;
        ds->w = f[0].cols;
        ds->classes = classes;
        ds->class_names = calloc((size_t)ds->classes, sizeof(char *));
        if (!ds->class_names) st = ml_fail(ML_ERR_NOMEM, "%s: out of memory", dir);
        int fashion = strcmp(ds->name, "fashion-mnist") == 0;
        for (int k = 0; st == ML_OK && k < ds->classes; k++) {
            char tmp[32];
            if (fashion && k < 10) snprintf(tmp, sizeof tmp, "%s", fashion_names[k]);
            else snprintf(tmp, sizeof tmp, "%d", k);
            ds->class_names[k] = strdup(tmp);
            if (!ds->class_names[k]) st = ml_fail(ML_ERR_NOMEM, "%s: out of memory", dir);
        }
    }
    for (int i = 0; i < 4; i++) free(f[i].buf);
    free(f);
    if (st != ML_OK) {
        dataset_free(ds);
        return st;
    }
    dataset_compute_stats(ds);
    return ML_OK;
}
