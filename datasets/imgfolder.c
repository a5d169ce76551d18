/* imgfolder.c — image-folder datasets: scanning, duplicate files, streaming import.
 *
 * Two layouts:
 *   Tiny-ImageNet-200: wnids.txt (class index = line order), words.txt (wnid TAB names; the
 *     first comma-separated name is kept), train/<wnid>/images/NAME.JPEG, val/images/NAME.JPEG
 *     labelled by val/val_annotations.txt (file TAB wnid TAB box). test/ is unlabelled: ignored.
 *   ImageNet style: train/<class>/... and val/<class>/... (or test/<class>/...); classes are the
 *     train/ sub-folders in byte order; names from words.txt or LOC_synset_mapping.txt in the
 *     root when present, else the folder names. A flat val/ (labels in a devkit file) is refused.
 * Files are sorted by name inside each class, so an import is deterministic. A file counts as
 * an image when its extension is .jpg/.jpeg/.jpe/.jfif or .png (any case); everything else is
 * counted as a non-image file and skipped. The decoder is then chosen from the file's first
 * bytes (image_decode_resized), so a PNG named .JPEG decodes too. Empty class folders keep their
 * class index and are reported.
 *
 * imgfolder_import() decodes opt->block files at a time with OpenMP (dynamic schedule over
 * files; JPEG or PNG by content), drops the unreadable ones (or stops on the first with
 * opt->strict), accumulates exact integer per-channel sums over the kept train images, and
 * hands each block to the sink: at most one block of decoded images is held in memory.
 */
#define _DEFAULT_SOURCE

#include "dataset.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#define FOLDER_MAX_CLASSES 100000
#define FILE_MAX_BYTES ((size_t)256 << 20)
#define TEXT_MAX_BYTES ((size_t)64 << 20)

/* ---- small helpers */

static char *xstrdup(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

static char *path_join(const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b);
    char *p = malloc(la + lb + 2);
    if (!p) return NULL;
    memcpy(p, a, la);
    p[la] = '/';
    memcpy(p + la + 1, b, lb + 1);
    return p;
}

static int is_dir(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

static int is_file(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

static int is_image_name(const char *name) {
    const char *dot = strrchr(name, '.');
    if (!dot) return 0;
    return strcasecmp(dot, ".jpg") == 0 || strcasecmp(dot, ".jpeg") == 0 || strcasecmp(dot, ".jpe") == 0 ||
           strcasecmp(dot, ".jfif") == 0 || strcasecmp(dot, ".png") == 0;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Reads a whole text file (at most TEXT_MAX_BYTES) with a NUL after it. */
static ml_status read_text(const char *path, char **out, size_t *len) {
    *out = NULL;
    *len = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return ml_fail(ML_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode) || (size_t)st.st_size > TEXT_MAX_BYTES) {
        fclose(f);
        return ml_fail(ML_ERR_FORMAT, "%s: not a text file of at most %zu bytes", path, TEXT_MAX_BYTES);
    }
    char *buf = malloc((size_t)st.st_size + 1);
    if (!buf) {
        fclose(f);
        return ml_fail(ML_ERR_NOMEM, "%s: out of memory", path);
    }
    size_t got = fread(buf, 1, (size_t)st.st_size, f);
    fclose(f);
    buf[got] = 0;
    *out = buf;
    *len = got;
    return ML_OK;
}

/* ---- growable lists */

typedef struct {
    char **v;
    long n, cap;
} StrList;

static int strlist_push(StrList *l, char *s) {
    if (!s) return 0;
    if (l->n == l->cap) {
        long nc = l->cap ? l->cap * 2 : 64;
        char **nv = realloc(l->v, (size_t)nc * sizeof *nv);
        if (!nv) {
            free(s);
            return 0;
        }
        l->v = nv;
        l->cap = nc;
    }
    l->v[l->n++] = s;
    return 1;
}

static void strlist_free(StrList *l) {
    for (long i = 0; i < l->n; i++) free(l->v[i]);
    free(l->v);
    memset(l, 0, sizeof *l);
}

typedef struct {
    ImgEntry *v;
    long n, cap;
} EntryList;

static int entries_push(EntryList *l, char *path, int32_t label) {
    if (!path) return 0;
    if (l->n == l->cap) {
        long nc = l->cap ? l->cap * 2 : 256;
        ImgEntry *nv = realloc(l->v, (size_t)nc * sizeof *nv);
        if (!nv) {
            free(path);
            return 0;
        }
        l->v = nv;
        l->cap = nc;
    }
    l->v[l->n].path = path;
    l->v[l->n].label = label;
    l->v[l->n].size = -1;
    l->n++;
    return 1;
}

/* Lists `dir` (sorted): sub-directories into dirs (names), regular files into files (names);
 * hidden entries are skipped. Either list may be NULL. */
static ml_status list_dir(const char *dir, StrList *dirs, StrList *files) {
    DIR *d = opendir(dir);
    if (!d) return ml_fail(ML_ERR_IO, "%s: cannot open directory: %s", dir, strerror(errno));
    struct dirent *e;
    ml_status st = ML_OK;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') continue;
        int isd = 0, isf = 0;
        if (e->d_type == DT_DIR) isd = 1;
        else if (e->d_type == DT_REG) isf = 1;
        else {
            char *p = path_join(dir, e->d_name);
            struct stat sb;
            if (p && stat(p, &sb) == 0) {
                isd = S_ISDIR(sb.st_mode);
                isf = S_ISREG(sb.st_mode);
            }
            free(p);
        }
        StrList *l = isd ? dirs : isf ? files : NULL;
        if (l && !strlist_push(l, xstrdup(e->d_name))) {
            st = ml_fail(ML_ERR_NOMEM, "%s: out of memory listing the directory", dir);
            break;
        }
    }
    closedir(d);
    if (dirs && dirs->n > 1) qsort(dirs->v, (size_t)dirs->n, sizeof(char *), cmp_str);
    if (files && files->n > 1) qsort(files->v, (size_t)files->n, sizeof(char *), cmp_str);
    return st;
}

/* ---- scan */

static void note_first(char *dst, size_t cap, const char *what) {
    if (!dst[0]) snprintf(dst, cap, "%s", what);
}

/* Adds the JPEG and PNG files of `dir` with `label`; other files are counted as non-image.
 * Returns the number of images added through *added. */
static ml_status add_class_files(ImgScan *s, EntryList *out, const char *dir, int32_t label, long *added) {
    StrList files = {0};
    ml_status st = list_dir(dir, NULL, &files);
    *added = 0;
    for (long i = 0; st == ML_OK && i < files.n; i++) {
        char *p = path_join(dir, files.v[i]);
        if (!p) {
            st = ml_fail(ML_ERR_NOMEM, "%s: out of memory", dir);
            break;
        }
        if (is_image_name(files.v[i])) {
            if (!entries_push(out, p, label)) st = ml_fail(ML_ERR_NOMEM, "%s: out of memory", dir);
            else (*added)++;
        } else {
            if (s->non_image++ == 0) note_first(s->first_non_image, sizeof s->first_non_image, p);
            free(p);
        }
    }
    strlist_free(&files);
    return st;
}

typedef struct {
    const char *key;
    int index;
} KeyIdx;

static int cmp_key(const void *a, const void *b) { return strcmp(((const KeyIdx *)a)->key, ((const KeyIdx *)b)->key); }

static int find_class(const KeyIdx *sorted, int n, const char *key) {
    KeyIdx k = {key, 0};
    const KeyIdx *r = n > 0 ? bsearch(&k, sorted, (size_t)n, sizeof k, cmp_key) : NULL;
    return r ? r->index : -1;
}

static KeyIdx *class_index(const ImgScan *s) {
    KeyIdx *k = malloc((size_t)(s->classes > 0 ? s->classes : 1) * sizeof *k);
    if (!k) return NULL;
    for (int i = 0; i < s->classes; i++) {
        k[i].key = s->class_ids[i];
        k[i].index = i;
    }
    if (s->classes > 1) qsort(k, (size_t)s->classes, sizeof *k, cmp_key);
    return k;
}

/* Names from words.txt ("wnid TAB name, synonym, ...") or LOC_synset_mapping.txt ("wnid name,
 * ..."): the first comma-separated name is kept. Missing file: folder names stay. */
static ml_status read_words(ImgScan *s, const KeyIdx *idx) {
    static const char *const files[] = {"words.txt", "LOC_synset_mapping.txt"};
    char *path = NULL;
    for (size_t i = 0; i < 2 && !path; i++) {
        char *p = path_join(s->root, files[i]);
        if (p && is_file(p)) path = p;
        else free(p);
    }
    if (!path) return ML_OK;
    char *text;
    size_t len;
    ml_status st = read_text(path, &text, &len);
    free(path);
    if (st != ML_OK) return st;
    char *line = text;
    while (line < text + len) {
        char *eol = memchr(line, '\n', (size_t)(text + len - line));
        if (!eol) eol = text + len;
        *eol = 0;
        char *sep = line;
        while (*sep && *sep != '\t' && *sep != ' ') sep++;
        if (*sep) {
            *sep = 0;
            int k = find_class(idx, s->classes, line);
            if (k >= 0) {
                char *name = sep + 1;
                while (*name == ' ' || *name == '\t') name++;
                size_t n = strcspn(name, ",\r");
                while (n > 0 && name[n - 1] == ' ') n--;
                if (n > 0) {
                    char *copy = malloc(n + 1);
                    if (copy) {
                        for (size_t j = 0; j < n; j++) copy[j] = (unsigned char)name[j] < 0x20 ? '?' : name[j];
                        copy[n] = 0;
                        free(s->class_names[k]);
                        s->class_names[k] = copy;
                    }
                }
            }
        }
        line = eol + 1;
    }
    free(text);
    return ML_OK;
}

static ml_status set_classes(ImgScan *s, char **ids, int n) {
    s->classes = n;
    s->class_ids = ids;
    s->class_names = calloc((size_t)(n > 0 ? n : 1), sizeof(char *));
    if (!s->class_names) return ml_fail(ML_ERR_NOMEM, "%s: out of memory", s->root);
    for (int i = 0; i < n; i++)
        if (!(s->class_names[i] = xstrdup(ids[i]))) return ml_fail(ML_ERR_NOMEM, "%s: out of memory", s->root);
    return ML_OK;
}

static ml_status check_class_id(const char *what, long line, const char *id) {
    if (!*id || strchr(id, '/') || strcmp(id, ".") == 0 || strcmp(id, "..") == 0)
        return ml_fail(ML_ERR_FORMAT, "%s: line %ld: bad class id '%s'", what, line, id);
    return ML_OK;
}

static ml_status scan_tiny(ImgScan *s) {
    char *wn = path_join(s->root, "wnids.txt");
    if (!wn) return ml_fail(ML_ERR_NOMEM, "out of memory");
    char *text;
    size_t len;
    ml_status st = read_text(wn, &text, &len);
    char **ids = NULL;
    int n = 0;
    if (st == ML_OK) {
        st = dataset_parse_names(text, len, wn, 0, &ids, &n);
        free(text);
    }
    for (int i = 0; st == ML_OK && i < n; i++) st = check_class_id(wn, i + 1, ids[i]);
    if (st == ML_OK && n > FOLDER_MAX_CLASSES)
        st = ml_fail(ML_ERR_FORMAT, "%s: %d classes: more than %d", wn, n, FOLDER_MAX_CLASSES);
    if (st != ML_OK) {
        dataset_names_free(ids, n);
        free(wn);
        return st;
    }
    st = set_classes(s, ids, n);
    KeyIdx *idx = st == ML_OK ? class_index(s) : NULL;
    if (st == ML_OK && !idx) st = ml_fail(ML_ERR_NOMEM, "out of memory");
    for (int i = 1; st == ML_OK && i < n; i++)
        if (strcmp(idx[i - 1].key, idx[i].key) == 0)
            st = ml_fail(ML_ERR_FORMAT, "%s: line %d: class id '%s' repeated (first on line %d)", wn,
                         (idx[i - 1].index > idx[i].index ? idx[i - 1].index : idx[i].index) + 1, idx[i].key,
                         (idx[i - 1].index < idx[i].index ? idx[i - 1].index : idx[i].index) + 1);
    free(wn);
    if (st == ML_OK) st = read_words(s, idx);

    /* train */
    EntryList tr = {0}, te = {0};
    for (int k = 0; st == ML_OK && k < n; k++) {
        char rel[1024];
        snprintf(rel, sizeof rel, "train/%s/images", s->class_ids[k]);
        char *dir = path_join(s->root, rel);
        if (dir && !is_dir(dir)) {
            free(dir);
            snprintf(rel, sizeof rel, "train/%s", s->class_ids[k]);
            dir = path_join(s->root, rel);
        }
        if (!dir) {
            st = ml_fail(ML_ERR_NOMEM, "out of memory");
            break;
        }
        long added = 0;
        if (is_dir(dir)) st = add_class_files(s, &tr, dir, k, &added);
        if (st == ML_OK && added == 0 && s->empty_classes++ == 0)
            note_first(s->first_empty_class, sizeof s->first_empty_class, dir);
        free(dir);
    }

    /* val: val_annotations.txt */
    char *ann = path_join(s->root, "val/val_annotations.txt");
    if (st == ML_OK && ann && is_file(ann)) {
        st = read_text(ann, &text, &len);
        char *line = text;
        long ln = 0;
        while (st == ML_OK && line < text + len) {
            char *eol = memchr(line, '\n', (size_t)(text + len - line));
            if (!eol) eol = text + len;
            *eol = 0;
            ln++;
            char *f = line;
            line = eol + 1;
            while (*f == ' ') f++;
            if (!*f || *f == '\r') continue;
            char *t1 = strpbrk(f, "\t ");
            if (!t1) {
                st = ml_fail(ML_ERR_FORMAT, "%s: line %ld: expected 'file TAB wnid TAB x0 y0 x1 y1', got one field",
                             ann, ln);
                break;
            }
            *t1 = 0;
            char *w = t1 + 1;
            while (*w == '\t' || *w == ' ') w++;
            w[strcspn(w, "\t \r")] = 0;
            if (strchr(f, '/') || strcmp(f, "..") == 0) {
                st = ml_fail(ML_ERR_FORMAT, "%s: line %ld: bad file name '%s'", ann, ln, f);
                break;
            }
            int k = find_class(idx, n, w);
            if (k < 0) {
                st = ml_fail(ML_ERR_FORMAT, "%s: line %ld: class '%s' of %s is not in wnids.txt", ann, ln, w, f);
                break;
            }
            char rel[1024];
            snprintf(rel, sizeof rel, "val/images/%s", f);
            char *p = path_join(s->root, rel);
            if (!p) {
                st = ml_fail(ML_ERR_NOMEM, "out of memory");
                break;
            }
            if (!is_file(p)) {
                if (s->missing++ == 0)
                    snprintf(s->first_missing, sizeof s->first_missing, "%s (%s line %ld)", p, ann, ln);
                free(p);
            } else if (!is_image_name(f)) {
                if (s->non_image++ == 0) note_first(s->first_non_image, sizeof s->first_non_image, p);
                free(p);
            } else if (!entries_push(&te, p, k)) {
                st = ml_fail(ML_ERR_NOMEM, "out of memory");
            }
        }
        free(text);
    } else if (st == ML_OK) {
        char *vd = path_join(s->root, "val");
        if (vd && is_dir(vd)) {
            /* val/<wnid>/ folders */
            for (int k = 0; st == ML_OK && k < n; k++) {
                char *dir = path_join(vd, s->class_ids[k]);
                long added = 0;
                if (dir && is_dir(dir)) st = add_class_files(s, &te, dir, k, &added);
                free(dir);
            }
        }
        free(vd);
        if (st == ML_OK && te.n == 0)
            st = ml_fail(ML_ERR_IO,
                         "%s: missing validation labels: expected val/val_annotations.txt (or "
                         "val/<wnid>/ folders)",
                         ann ? ann : s->root);
    }
    free(ann);
    free(idx);
    s->train = tr.v;
    s->n_train = tr.n;
    s->test = te.v;
    s->n_test = te.n;
    return st;
}

static ml_status scan_folder(ImgScan *s) {
    char *trd = path_join(s->root, "train");
    if (!trd) return ml_fail(ML_ERR_NOMEM, "out of memory");
    StrList dirs = {0}, stray = {0};
    ml_status st = list_dir(trd, &dirs, &stray);
    if (st == ML_OK && dirs.n == 0)
        st = ml_fail(ML_ERR_FORMAT, "%s: no class folders: expected train/<class>/ with images", trd);
    if (st == ML_OK && dirs.n > FOLDER_MAX_CLASSES)
        st = ml_fail(ML_ERR_FORMAT, "%s: %ld class folders: more than %d", trd, dirs.n, FOLDER_MAX_CLASSES);
    for (long i = 0; st == ML_OK && i < stray.n; i++) {
        if (s->non_image++ == 0) {
            char *p = path_join(trd, stray.v[i]);
            if (p) note_first(s->first_non_image, sizeof s->first_non_image, p);
            free(p);
        }
    }
    strlist_free(&stray);
    if (st != ML_OK) {
        strlist_free(&dirs);
        free(trd);
        return st;
    }
    /* the class-id array takes the strings over */
    char **ids = dirs.v;
    int n = (int)dirs.n;
    dirs.v = NULL;
    dirs.n = 0;
    st = set_classes(s, ids, n);
    KeyIdx *idx = st == ML_OK ? class_index(s) : NULL;
    if (st == ML_OK && !idx) st = ml_fail(ML_ERR_NOMEM, "out of memory");
    if (st == ML_OK) st = read_words(s, idx);
    EntryList tr = {0}, te = {0};
    for (int k = 0; st == ML_OK && k < n; k++) {
        char *dir = path_join(trd, ids[k]);
        if (!dir) {
            st = ml_fail(ML_ERR_NOMEM, "out of memory");
            break;
        }
        long added = 0;
        st = add_class_files(s, &tr, dir, k, &added);
        if (st == ML_OK && added == 0) {
            /* train/<class>/images/ (Tiny-ImageNet nesting without wnids.txt) */
            char *sub = path_join(dir, "images");
            if (sub && is_dir(sub)) st = add_class_files(s, &tr, sub, k, &added);
            free(sub);
        }
        if (st == ML_OK && added == 0 && s->empty_classes++ == 0)
            note_first(s->first_empty_class, sizeof s->first_empty_class, dir);
        free(dir);
    }
    /* val/<class>/ or test/<class>/ */
    char *vd = path_join(s->root, "val");
    if (vd && !is_dir(vd)) {
        free(vd);
        vd = path_join(s->root, "test");
    }
    if (st == ML_OK && vd && is_dir(vd)) {
        StrList vdirs = {0}, vfiles = {0};
        st = list_dir(vd, &vdirs, &vfiles);
        long images = 0;
        for (long i = 0; i < vfiles.n; i++) images += is_image_name(vfiles.v[i]);
        if (st == ML_OK && images > 0 && vdirs.n == 0)
            st = ml_fail(ML_ERR_FORMAT,
                         "%s: holds %ld images directly: expected one folder per class "
                         "(%s/<class>/), as the labels come from the folder names",
                         vd, images, vd);
        for (long i = 0; st == ML_OK && i < vfiles.n; i++)
            if (s->non_image++ == 0) {
                char *p = path_join(vd, vfiles.v[i]);
                if (p) note_first(s->first_non_image, sizeof s->first_non_image, p);
                free(p);
            }
        for (long i = 0; st == ML_OK && i < vdirs.n; i++) {
            int k = find_class(idx, n, vdirs.v[i]);
            if (k < 0) {
                st = ml_fail(ML_ERR_FORMAT, "%s/%s: class folder not found in %s", vd, vdirs.v[i], trd);
                break;
            }
            char *dir = path_join(vd, vdirs.v[i]);
            long added = 0;
            st = dir ? add_class_files(s, &te, dir, k, &added) : ml_fail(ML_ERR_NOMEM, "out of memory");
            free(dir);
        }
        strlist_free(&vdirs);
        strlist_free(&vfiles);
    } else if (st == ML_OK) {
        st = ml_fail(ML_ERR_IO,
                     "%s/val: missing validation split: expected val/<class>/ (or "
                     "test/<class>/) folders",
                     s->root);
    }
    free(vd);
    free(idx);
    free(trd);
    s->train = tr.v;
    s->n_train = tr.n;
    s->test = te.v;
    s->n_test = te.n;
    return st;
}

void imgfolder_scan_free(ImgScan *s) {
    if (!s) return;
    dataset_names_free(s->class_ids, s->classes);
    dataset_names_free(s->class_names, s->classes);
    for (long i = 0; i < s->n_train; i++) free(s->train[i].path);
    for (long i = 0; i < s->n_test; i++) free(s->test[i].path);
    free(s->train);
    free(s->test);
    memset(s, 0, sizeof *s);
}

ml_status imgfolder_scan(const char *src, ImgScan *s) {
    memset(s, 0, sizeof *s);
    char root[4096];
    DatasetFormat f = dataset_detect(src, root, sizeof root);
    if (f != DATASET_FORMAT_TINY_IMAGENET && f != DATASET_FORMAT_IMAGE_FOLDER) {
        if (!is_dir(src)) return ml_fail(ML_ERR_IO, "%s: not a directory", src);
        return ml_fail(ML_ERR_FORMAT,
                       "%s: not an image folder: expected wnids.txt (Tiny-ImageNet-200) or "
                       "train/<class>/ folders (found: %s)",
                       src, dataset_format_name(f));
    }
    size_t rl = strlen(root);
    while (rl > 1 && root[rl - 1] == '/') root[--rl] = 0;
    snprintf(s->root, sizeof s->root, "%s", root);
    const char *b = strrchr(s->root, '/');
    snprintf(s->name, sizeof s->name, "%.63s", b ? b + 1 : s->root);
    s->format = f;
    ml_status st = f == DATASET_FORMAT_TINY_IMAGENET ? scan_tiny(s) : scan_folder(s);
    if (st == ML_OK && s->n_train == 0)
        st = ml_fail(ML_ERR_FORMAT, "%s: no JPEG or PNG images found under train/", s->root);
    if (st != ML_OK) imgfolder_scan_free(s);
    return st;
}

/* ---- duplicate files */

typedef struct {
    int64_t size;
    uint64_t hash;
    const char *path;
} FileKey;

static int cmp_filekey(const void *a, const void *b) {
    const FileKey *x = a, *y = b;
    if (x->size != y->size) return x->size < y->size ? -1 : 1;
    if (x->hash != y->hash) return x->hash < y->hash ? -1 : 1;
    return strcmp(x->path, y->path);
}

static uint64_t hash_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    uint64_t h = 0xcbf29ce484222325ull;
    uint8_t buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) {
        size_t i = 0;
        for (; i + 8 <= n; i += 8) {
            uint64_t v;
            memcpy(&v, buf + i, 8);
            h = (h ^ v) * 0x9e3779b97f4a7c15ull;
            h ^= h >> 29;
        }
        for (; i < n; i++) h = (h ^ buf[i]) * 0x100000001b3ull;
    }
    fclose(f);
    return h ^ (h >> 31);
}

ml_status imgfolder_find_duplicates(const ImgScan *s, long *groups, long *extra, char *first, size_t cap) {
    *groups = *extra = 0;
    if (first && cap) first[0] = 0;
    long n = s->n_train + s->n_test;
    FileKey *k = malloc((size_t)(n > 0 ? n : 1) * sizeof *k);
    if (!k) return ml_fail(ML_ERR_NOMEM, "%s: out of memory", s->root);
#pragma omp parallel for schedule(dynamic, 64)
    for (long i = 0; i < n; i++) {
        const ImgEntry *e = i < s->n_train ? &s->train[i] : &s->test[i - s->n_train];
        struct stat st;
        k[i].size = e->size >= 0 ? e->size : stat(e->path, &st) == 0 ? (int64_t)st.st_size : -1;
        k[i].hash = 0;
        k[i].path = e->path;
    }
    qsort(k, (size_t)n, sizeof *k, cmp_filekey);
    /* hash only files whose size is shared */
#pragma omp parallel for schedule(dynamic, 16)
    for (long i = 0; i < n; i++)
        if (k[i].size > 0 && ((i > 0 && k[i - 1].size == k[i].size) || (i + 1 < n && k[i + 1].size == k[i].size)))
            k[i].hash = hash_file(k[i].path);
    qsort(k, (size_t)n, sizeof *k, cmp_filekey);
    for (long i = 1; i < n; i++) {
        if (k[i].size <= 0 || k[i].size != k[i - 1].size || k[i].hash != k[i - 1].hash) continue;
        (*extra)++;
        if (i < 2 || k[i - 2].size != k[i].size || k[i - 2].hash != k[i].hash) {
            if ((*groups)++ == 0 && first && cap) snprintf(first, cap, "%s = %s", k[i].path, k[i - 1].path);
        }
    }
    free(k);
    return ML_OK;
}

/* ---- import */

void import_options_defaults(ImportOptions *o) {
    memset(o, 0, sizeof *o);
    o->size = 64;
    o->block = 1024;
}

/* Reads a whole file (at most FILE_MAX_BYTES); returns NULL with a reason in err. */
static uint8_t *slurp(const char *path, size_t *len, char *err, size_t cap) {
    *len = 0;
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, cap, "cannot open: %s", strerror(errno));
        return NULL;
    }
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode) || (size_t)st.st_size > FILE_MAX_BYTES) {
        snprintf(err, cap, "not a regular file of at most %zu bytes", FILE_MAX_BYTES);
        fclose(f);
        return NULL;
    }
    uint8_t *buf = malloc((size_t)st.st_size + 1);
    if (!buf) {
        snprintf(err, cap, "out of memory");
        fclose(f);
        return NULL;
    }
    *len = fread(buf, 1, (size_t)st.st_size, f);
    if (ferror(f)) {
        snprintf(err, cap, "read error: %s", strerror(errno));
        free(buf);
        buf = NULL;
    }
    fclose(f);
    return buf;
}

#define ERR_CAP 200

ml_status imgfolder_import(const ImgScan *s, const ImportOptions *opt, const ImportSink *sink, ImportReport *rep) {
    memset(rep, 0, sizeof *rep);
    ImportOptions o;
    if (opt) o = *opt;
    else import_options_defaults(&o);
    if (o.size < 4 || o.size > 1024) return ml_fail(ML_ERR_ARG, "--size %d out of range: expected 4..1024", o.size);
    if (o.block < 1) o.block = 1024;
    if (s->classes < 1 || s->n_train < 1) return ml_fail(ML_ERR_ARG, "%s: nothing to import", s->root);
    double t0 = ml_now();
    const int S = o.size;
    const size_t isize = (size_t)S * S * 3;
    uint8_t *img = ml_alloc((size_t)o.block * isize);
    int32_t *lab = ml_alloc((size_t)o.block * sizeof(int32_t));
    int *bad = ml_alloc((size_t)o.block * sizeof(int));
    char *errs = ml_alloc((size_t)o.block * ERR_CAP);
    if (!img || !lab || !bad || !errs) {
        ml_free(img);
        ml_free(lab);
        ml_free(bad);
        ml_free(errs);
        return ml_fail(ML_ERR_NOMEM, "out of memory for a block of %d images of %dx%d", o.block, S, S);
    }
    ImportHeader h = {.name = s->name,
                      .source = s->root,
                      .c = 3,
                      .h = S,
                      .w = S,
                      .classes = s->classes,
                      .class_names = s->class_names,
                      .n_train_max = s->n_train,
                      .n_test_max = s->n_test};
    ml_status st = sink->begin(sink->user, &h);
    uint64_t sum[3] = {0, 0, 0}, sq[3] = {0, 0, 0};
    long total = s->n_train + s->n_test, done = 0;
    int threads = o.threads;
    for (int split = 0; split < 2 && st == ML_OK; split++) {
        const ImgEntry *e = split == 0 ? s->train : s->test;
        long n = split == 0 ? s->n_train : s->n_test;
        for (long start = 0; start < n && st == ML_OK; start += o.block) {
            int m = (int)(n - start < o.block ? n - start : o.block);
#ifdef _OPENMP
            int nt = threads > 0 ? threads : omp_get_max_threads();
#pragma omp parallel for schedule(dynamic, 4) num_threads(nt)
#endif
            for (int i = 0; i < m; i++) {
                char *err = errs + (size_t)i * ERR_CAP;
                err[0] = 0;
                size_t len = 0;
                uint8_t *buf = slurp(e[start + i].path, &len, err, ERR_CAP);
                bad[i] = !buf || image_decode_resized(buf, len, S, img + (size_t)i * isize, err, ERR_CAP);
                free(buf);
            }
            /* compact the block, in order */
            int w = 0;
            for (int i = 0; i < m; i++) {
                if (bad[i]) {
                    const char *p = e[start + i].path;
                    const char *why = errs + (size_t)i * ERR_CAP;
                    if (o.strict) {
                        st = ml_fail(ML_ERR_FORMAT, "%s: unreadable image: %s (--strict)", p, why);
                        break;
                    }
                    if (rep->unreadable++ == 0)
                        snprintf(rep->first_unreadable, sizeof rep->first_unreadable, "%s: %s", p, why);
                    continue;
                }
                if (w != i) memmove(img + (size_t)w * isize, img + (size_t)i * isize, isize);
                lab[w] = e[start + i].label;
                w++;
            }
            if (st != ML_OK) break;
            if (split == 0) {
                for (int ch = 0; ch < 3; ch++) {
                    uint64_t a = 0, b = 0;
#pragma omp parallel for reduction(+ : a, b) schedule(static)
                    for (long i = 0; i < (long)w * S * S; i++) {
                        uint32_t v = img[(size_t)i * 3 + ch];
                        a += v;
                        b += v * v;
                    }
                    sum[ch] += a;
                    sq[ch] += b;
                }
            }
            if (w > 0) st = sink->append(sink->user, split, img, lab, w);
            if (split == 0) rep->n_train += w;
            else rep->n_test += w;
            done += m;
            if (st == ML_OK && o.progress) o.progress(o.progress_user, done, total);
        }
    }
    if (st == ML_OK && rep->n_train == 0)
        st = ml_fail(ML_ERR_FORMAT, "%s: no readable training image (%ld unreadable; first: %s)", s->root,
                     rep->unreadable, rep->first_unreadable);
    if (st == ML_OK && rep->n_test == 0) st = ml_fail(ML_ERR_FORMAT, "%s: no readable validation image", s->root);
    if (st == ML_OK) {
        double cnt = (double)rep->n_train * S * S;
        for (int ch = 0; ch < 3; ch++) {
            double mean = (double)sum[ch] / 255.0 / cnt;
            double var = (double)sq[ch] / (255.0 * 255.0) / cnt - mean * mean;
            double sd = var > 0 ? sqrt(var) : 0.0;
            rep->mean[ch] = (float)mean;
            rep->std[ch] = sd > 1e-6 ? (float)sd : 1.0f;
        }
        st = sink->finish(sink->user, rep->mean, rep->std, "computed: train split at import");
    }
    rep->seconds = ml_now() - t0;
    ml_free(img);
    ml_free(lab);
    ml_free(bad);
    ml_free(errs);
    return st;
}

ml_status dataset_export(const Dataset *ds, const ImportSink *sink, int block) {
    if (block < 1) block = 1024;
    const int C = ds->c, H = ds->h, W = ds->w;
    if (C < 1 || C > DATASET_MAX_CHANNELS || H < 1 || W < 1)
        return ml_fail(ML_ERR_ARG, "%s: bad image shape %dx%dx%d", ds->name, H, W, C);
    size_t isize = (size_t)C * H * W;
    ImportHeader h = {.name = ds->name,
                      .source = ds->source,
                      .c = C,
                      .h = H,
                      .w = W,
                      .classes = ds->classes,
                      .class_names = ds->class_names,
                      .n_train_max = ds->train.n,
                      .n_test_max = ds->test.n};
    ml_status st = sink->begin(sink->user, &h);
    uint8_t *buf = st == ML_OK ? ml_alloc((size_t)block * isize) : NULL;
    if (st == ML_OK && !buf) st = ml_fail(ML_ERR_NOMEM, "out of memory");
    for (int split = 0; split < 2 && st == ML_OK; split++) {
        const DatasetSplit *sp = split == 0 ? &ds->train : &ds->test;
        for (int start = 0; start < sp->n && st == ML_OK; start += block) {
            int m = sp->n - start < block ? sp->n - start : block;
            size_t hw = (size_t)H * W;
#pragma omp parallel for schedule(static)
            for (int i = 0; i < m; i++) {
                const uint8_t *src = sp->images + (size_t)(start + i) * isize;
                uint8_t *dst = buf + (size_t)i * isize;
                for (size_t p = 0; p < hw; p++)
                    for (int ch = 0; ch < C; ch++) dst[p * C + ch] = src[(size_t)ch * hw + p];
            }
            st = sink->append(sink->user, split, buf, sp->labels + start, m);
        }
    }
    ml_free(buf);
    if (st == ML_OK)
        st = sink->finish(sink->user, ds->mean, ds->std, ds->stats_source[0] ? ds->stats_source : "unknown");
    return st;
}
