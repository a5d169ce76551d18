/* data.c — `moelab data info PATH` and `moelab data import SRC OUT.h5`.
 *
 * info: detects the format, opens the dataset (or scans an image folder without decoding it) and
 * prints splits, counts, image shape, classes, mean/std and the problems found (class
 * imbalance, duplicates, empty class folders, non-image files, ...). Exit 0 when the dataset
 * can be read (1 with --strict when a problem was found), 1 when it cannot, 2 on bad usage.
 * import: decodes an image folder (Tiny-ImageNet-200, train/<class>/ trees) into an HDF5
 * dataset file with a progress bar on stderr (plain periodic lines when stderr is not a
 * terminal); any other dataset dataset_open reads (CIFAR, IDX, synthetic, .h5) is written
 * as it is.
 */
#define _POSIX_C_SOURCE 200809L

#include "app/cli/app.h"
#include "sessions/dataset_h5.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int cmd_data(int argc, char **argv);

static void data_usage(FILE *f) {
    fprintf(f, "usage: moelab data info PATH [--strict]\n"
               "       moelab data import SRC OUT.h5 [--size N] [--strict] [--threads N]\n\n"
               "info    format, splits, counts, image shape, classes, mean/std and problems found\n"
               "        in a dataset: a spec (cifar-10, fashion-mnist, synthetic:...), a directory\n"
               "        (IDX, CIFAR-10/100 binary, Tiny-ImageNet-200, train/<class>/ folders) or an\n"
               "        imported .h5 file. --strict: exit 1 when a problem is found.\n"
               "import  decode an image folder once (JPEG and PNG; grayscale expanded to RGB), resize\n"
               "        every image to N x N (default 64) and write an HDF5 dataset file that training\n"
               "        reads directly (--dataset OUT.h5). Unreadable images are skipped and counted;\n"
               "        --strict makes the first one fatal. Other datasets are written unchanged.\n"
               "        --threads N: decoding threads (default: all cores).\n");
}

/* ---- info */

/* A class (folder) name as printed: control characters (a newline in a folder name) become '?',
 * as the HDF5 reader shows them; four rotating buffers, so one printf may show several. */
static const char *shown(const char *name) {
    static char buf[4][256];
    static int next;
    char *b = buf[next++ & 3];
    size_t i = 0;
    for (; name[i] && i + 1 < sizeof buf[0]; i++) {
        const unsigned char c = (unsigned char)name[i];
        b[i] = c < 0x20 || c == 0x7f ? '?' : (char)c;
    }
    b[i] = 0;
    return b;
}

static void print_names(char *const *names, int n) {
    int show = n < 10 ? n : 10;
    for (int k = 0; k < show; k++) printf("%s%s", k ? ", " : "", shown(names[k]));
    if (n > show) printf(", ... (%d more)", n - show);
    printf("\n");
}

static void print_notes(const DatasetNotes *n) {
    if (n->count == 0) {
        printf("problems   none found\n");
        return;
    }
    for (int i = 0; i < n->count; i++) printf("%s %s\n", i == 0 ? "problems  " : "          ", n->text[i]);
    if (n->dropped) printf("           ... and %d more\n", n->dropped);
}

static void print_counts(const char *what, const long *cnt, int classes, char *const *names) {
    int lo = 0, hi = 0;
    for (int k = 1; k < classes; k++) {
        if (cnt[k] < cnt[lo]) lo = k;
        if (cnt[k] > cnt[hi]) hi = k;
    }
    printf("           %s per class: min %ld (%s), max %ld (%s)\n", what, cnt[lo], shown(names[lo]), cnt[hi],
           shown(names[hi]));
}

static int info_loaded(const char *spec, int strict) {
    Dataset ds;
    if (dataset_open(&ds, spec) != ML_OK) {
        fprintf(stderr, "moelab data: %s\n", ml_last_error());
        return 1;
    }
    printf("dataset    %s\n", ds.name);
    printf("source     %s\n", ds.source[0] ? ds.source : "(generated)");
    printf("format     %s\n", dataset_format_name(ds.format));
    if (ds.format == DATASET_FORMAT_H5)
        printf("checksums  %s\n",
               ds.checksums == 2   ? "crc32 of every dataset verified, and of the root attributes"
               : ds.checksums == 1 ? "crc32 of every dataset verified; note: the root attributes (mean, std, name, "
                                     "...) are not (imported by an older moelab: import it again to add them)"
                                   : "none (imported by an older moelab: the values are not verified; "
                                     "import it again to add them)");
    printf("images     %d x %d x %d (C x H x W), uint8\n", ds.c, ds.h, ds.w);
    printf("splits     train %d, test %d\n", ds.train.n, ds.test.n);
    printf("classes    %d: ", ds.classes);
    print_names(ds.class_names, ds.classes);
    long *cnt = calloc((size_t)ds.classes, sizeof(long));
    if (cnt) {
        dataset_class_counts(&ds.train, ds.classes, cnt);
        print_counts("train", cnt, ds.classes, ds.class_names);
        dataset_class_counts(&ds.test, ds.classes, cnt);
        print_counts("test ", cnt, ds.classes, ds.class_names);
        free(cnt);
    }
    printf("mean       ");
    for (int c = 0; c < ds.c; c++) printf("%.4f%s", ds.mean[c], c + 1 < ds.c ? " " : "\n");
    printf("std        ");
    for (int c = 0; c < ds.c; c++) printf("%.4f%s", ds.std[c], c + 1 < ds.c ? " " : "");
    printf("  (%s)\n", ds.stats_source[0] ? ds.stats_source : "unknown");
    printf("augment    %s\n", dataset_augment_default(&ds) ? "on by default (random crop, 4-pixel zero padding, "
                                                             "horizontal flip); --no-augment turns it off"
                                                           : "off by default (not an RGB dataset)");
    DatasetNotes notes;
    memset(&notes, 0, sizeof notes);
    dataset_check(&ds, &notes);
    print_notes(&notes);
    dataset_free(&ds);
    return strict && notes.count ? 1 : 0;
}

static void scan_notes(const ImgScan *s, DatasetNotes *n) {
    if (s->empty_classes)
        dataset_notes_add(n, "%ld empty class folders (no JPEG or PNG; first: %s)", s->empty_classes,
                          s->first_empty_class);
    if (s->non_image)
        dataset_notes_add(n, "%ld non-image files skipped (JPEG and PNG only; first: %s)", s->non_image,
                          s->first_non_image);
    if (s->missing) dataset_notes_add(n, "%ld files listed but missing (first: %s)", s->missing, s->first_missing);
}

static int info_folder(const char *path, int strict) {
    ImgScan s;
    if (imgfolder_scan(path, &s) != ML_OK) {
        fprintf(stderr, "moelab data: %s\n", ml_last_error());
        return 1;
    }
    printf("dataset    %s\n", s.name);
    printf("source     %s\n", s.root);
    printf("format     %s (not decoded: import with `moelab data import %s OUT.h5`)\n", dataset_format_name(s.format),
           path);
    printf("files      train %ld, %s %ld images (JPEG or PNG)\n", s.n_train,
           s.format == DATASET_FORMAT_TINY_IMAGENET ? "val" : "val/test", s.n_test);
    printf("classes    %d: ", s.classes);
    print_names(s.class_names, s.classes);
    long *cnt = calloc((size_t)s.classes, sizeof(long));
    DatasetNotes notes;
    memset(&notes, 0, sizeof notes);
    scan_notes(&s, &notes);
    if (cnt) {
        for (long i = 0; i < s.n_train; i++) cnt[s.train[i].label]++;
        print_counts("train", cnt, s.classes, s.class_names);
        int lo = 0, hi = 0;
        for (int k = 1; k < s.classes; k++) {
            if (cnt[k] < cnt[lo]) lo = k;
            if (cnt[k] > cnt[hi]) hi = k;
        }
        if (cnt[lo] > 0 && cnt[hi] > 1.5 * cnt[lo])
            dataset_notes_add(&notes,
                              "class imbalance: '%s' has %ld training images, '%s' %ld (ratio "
                              "%.1f)",
                              shown(s.class_names[hi]), cnt[hi], shown(s.class_names[lo]), cnt[lo],
                              (double)cnt[hi] / (double)cnt[lo]);
        free(cnt);
    }
    printf("mean/std   computed from the train split at import\n");
    long groups = 0, extra = 0;
    char first[1100];
    if (imgfolder_find_duplicates(&s, &groups, &extra, first, sizeof first) == ML_OK && extra)
        dataset_notes_add(&notes, "%ld duplicate files in %ld groups (first: %s)", extra, groups, first);
    print_notes(&notes);
    imgfolder_scan_free(&s);
    return strict && notes.count ? 1 : 0;
}

static int data_info(int argc, char **argv) {
    const char *path = NULL;
    int strict = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--strict") == 0) strict = 1;
        else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            data_usage(stdout);
            return 0;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            fprintf(stderr, "moelab data info: unknown option '%s'\n", argv[i]);
            return 2;
        } else if (!path) path = argv[i];
        else {
            fprintf(stderr, "moelab data info: one PATH expected, got '%s' too\n", argv[i]);
            return 2;
        }
    }
    if (!path) {
        fprintf(stderr, "moelab data info: expected a PATH (no arguments given)\n"
                        "usage: moelab data info PATH [--strict]   (moelab data --help)\n");
        return 2;
    }
    DatasetFormat f = dataset_detect(path, NULL, 0);
    if (f == DATASET_FORMAT_TINY_IMAGENET || f == DATASET_FORMAT_IMAGE_FOLDER) return info_folder(path, strict);
    return info_loaded(path, strict);
}

/* ---- import */

typedef struct {
    int tty, open; /* open: a bar line is on screen without its newline */
    double t0, last;
    long last_done;
} Progress;

static void on_progress(void *user, long done, long total) {
    Progress *p = user;
    double now = ml_now(), el = now - p->t0;
    double rate = el > 0 ? done / el : 0;
    double eta = rate > 0 ? (total - done) / rate : 0;
    double frac = total > 0 ? (double)done / total : 1;
    if (p->tty) {
        char bar[31];
        int fill = (int)(frac * 30 + 0.5);
        for (int i = 0; i < 30; i++) bar[i] = i < fill ? '#' : '.';
        bar[30] = 0;
        fprintf(stderr, "\r  [%s] %5.1f%%  %ld/%ld  %.0f img/s  ETA %dm%02ds ", bar, 100 * frac, done, total, rate,
                (int)eta / 60, (int)eta % 60);
        p->open = done < total;
        if (!p->open) fprintf(stderr, "\n");
        fflush(stderr);
    } else if (done >= total || now - p->last >= 15 || (done - p->last_done) * 10 >= total) {
        fprintf(stderr, "import: %ld/%ld images (%.0f%%), %.0f img/s, %.0f s\n", done, total, 100 * frac, rate, el);
        p->last = now;
        p->last_done = done;
    }
}

static int parse_int(const char *opt, const char *v, int lo, int hi, int *out) {
    char *end;
    long x = v ? strtol(v, &end, 10) : 0;
    if (!v || !*v || *end || x < lo || x > hi) {
        fprintf(stderr, "moelab data import: %s '%s': expected an integer in %d..%d\n", opt, v ? v : "", lo, hi);
        return 0;
    }
    *out = (int)x;
    return 1;
}

static int import_folder(const char *src, const char *out, const ImportOptions *o) {
    ImgScan s;
    if (imgfolder_scan(src, &s) != ML_OK) {
        fprintf(stderr, "moelab data: %s\n", ml_last_error());
        return 1;
    }
    fprintf(stderr, "import: %s (%s): %d classes, %ld train + %ld val image files (JPEG, PNG) -> %s at %dx%d\n", s.root,
            dataset_format_name(s.format), s.classes, s.n_train, s.n_test, out, o->size, o->size);
    DatasetNotes notes;
    memset(&notes, 0, sizeof notes);
    scan_notes(&s, &notes);
    for (int i = 0; i < notes.count; i++) fprintf(stderr, "moelab data: warning: %s\n", notes.text[i]);
    Progress p = {.tty = isatty(2), .t0 = ml_now()};
    p.last = p.t0;
    ImportOptions oo = *o;
    oo.progress = on_progress;
    oo.progress_user = &p;
    ImportReport rep;
    ml_status st = dataset_h5_import_folder(&s, out, &oo, &rep);
    if (p.open) fprintf(stderr, "\n");
    int rc = 0;
    if (st != ML_OK) {
        fprintf(stderr, "moelab data: %s\n", ml_last_error());
        rc = 1;
    } else {
        printf("imported %ld train + %ld test images (%d classes, %dx%dx3) into %s in %.1f s\n", rep.n_train,
               rep.n_test, s.classes, o->size, o->size, out, rep.seconds);
        printf("mean %.4f %.4f %.4f  std %.4f %.4f %.4f (train split)\n", rep.mean[0], rep.mean[1], rep.mean[2],
               rep.std[0], rep.std[1], rep.std[2]);
        if (rep.unreadable)
            fprintf(stderr, "moelab data: warning: %ld unreadable images skipped (first: %s)\n", rep.unreadable,
                    rep.first_unreadable);
    }
    imgfolder_scan_free(&s);
    return rc;
}

static int import_dataset(const char *src, const char *out) {
    Dataset ds;
    if (dataset_open(&ds, src) != ML_OK) {
        fprintf(stderr, "moelab data: %s\n", ml_last_error());
        return 1;
    }
    double t0 = ml_now();
    ml_status st = dataset_h5_save(&ds, out);
    int rc = 0;
    if (st != ML_OK) {
        fprintf(stderr, "moelab data: %s\n", ml_last_error());
        rc = 1;
    } else {
        printf("wrote %s (%d train + %d test images, %d classes, %dx%dx%d) to %s in %.1f s\n", ds.name, ds.train.n,
               ds.test.n, ds.classes, ds.h, ds.w, ds.c, out, ml_now() - t0);
    }
    dataset_free(&ds);
    return rc;
}

static int data_import(int argc, char **argv) {
    ImportOptions o;
    import_options_defaults(&o);
    const char *pos[2] = {NULL, NULL};
    int np = 0, size_given = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--strict") == 0) o.strict = 1;
        else if (strcmp(a, "--size") == 0 || strcmp(a, "--threads") == 0 || strcmp(a, "--block") == 0) {
            const char *v = i + 1 < argc ? argv[++i] : NULL;
            int ok = strcmp(a, "--size") == 0      ? parse_int(a, v, 4, 1024, &o.size)
                     : strcmp(a, "--threads") == 0 ? parse_int(a, v, 1, 1024, &o.threads)
                                                   : parse_int(a, v, 1, 1 << 20, &o.block);
            if (!ok) return 2;
            size_given |= strcmp(a, "--size") == 0;
        } else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            data_usage(stdout);
            return 0;
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "moelab data import: unknown option '%s'\n", a);
            return 2;
        } else if (np < 2) pos[np++] = a;
        else {
            fprintf(stderr, "moelab data import: expected SRC OUT.h5, got '%s' too\n", a);
            return 2;
        }
    }
    if (np != 2) {
        fprintf(stderr,
                "moelab data import: expected SRC OUT.h5 (%s)\n"
                "usage: moelab data import SRC OUT.h5 [--size N] [--strict] [--threads N]   (moelab data --help)\n",
                np == 0 ? "no arguments given" : "only SRC given");
        return 2;
    }
    struct stat sb;
    if (stat(pos[1], &sb) == 0 && S_ISDIR(sb.st_mode)) {
        fprintf(stderr, "moelab data: %s: is a directory: expected the output file name (OUT.h5)\n", pos[1]);
        return 1;
    }
    DatasetFormat f = dataset_detect(pos[0], NULL, 0);
    if (f == DATASET_FORMAT_TINY_IMAGENET || f == DATASET_FORMAT_IMAGE_FOLDER) return import_folder(pos[0], pos[1], &o);
    if (size_given)
        fprintf(stderr,
                "moelab data: warning: --size applies to image folders only; %s is written "
                "at its own size\n",
                pos[0]);
    return import_dataset(pos[0], pos[1]);
}

int cmd_data(int argc, char **argv) {
    dataset_set_h5_loader(dataset_h5_load);
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "help") == 0) {
        data_usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (strcmp(argv[1], "info") == 0) return data_info(argc - 1, argv + 1);
    if (strcmp(argv[1], "import") == 0) return data_import(argc - 1, argv + 1);
    fprintf(stderr, "moelab data: unknown command '%s': expected info or import\n", argv[1]);
    data_usage(stderr);
    return 2;
}
