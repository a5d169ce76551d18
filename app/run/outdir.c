/* outdir.c — see outdir.h. */
#define _GNU_SOURCE

#include "app/run/outdir.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/common.h"

static int is_dir(const char *p) {
    struct stat sb;
    return stat(p, &sb) == 0 && S_ISDIR(sb.st_mode);
}

int outdir_begin(OutDir *d, const char *final) {
    memset(d, 0, sizeof *d);
    if (!final || !final[0]) return ml_fail(ML_ERR_ARG, "no output folder given"), -1;
    if (snprintf(d->final, sizeof d->final, "%s", final) >= (int)sizeof d->final)
        return ml_fail(ML_ERR_ARG, "%s: path too long", final), -1;
    char p[sizeof d->final];
    snprintf(p, sizeof p, "%s", final);
    for (char *s = p + 1;; s++) { /* mkdir -p, remembering the outermost folder it made */
        const char c = *s;
        if (c == '/' || c == 0) {
            *s = 0;
            if (!is_dir(p)) {
                if (mkdir(p, 0777) != 0 && errno != EEXIST) {
                    const int e = errno;
                    outdir_abort(d);
                    return ml_fail(ML_ERR_IO, "%s: cannot create the folder: %s", p, strerror(e)), -1;
                }
                if (!d->created[0]) snprintf(d->created, sizeof d->created, "%s", p);
            }
            *s = c;
        }
        if (c == 0) break;
    }
    if (!is_dir(final)) {
        outdir_abort(d);
        return ml_fail(ML_ERR_IO, "%s: not a folder (a file of that name is in the way)", final), -1;
    }
    snprintf(d->tmp, sizeof d->tmp, "%s/.moelab-partial-%ld", final, (long)getpid());
    if (mkdir(d->tmp, 0700) != 0) {
        const int e = errno;
        d->tmp[0] = 0;
        outdir_abort(d);
        return ml_fail(ML_ERR_IO, "%s: cannot write into it: %s", final, strerror(e)), -1;
    }
    return 0;
}

/* Removes the regular files of the staging folder, then the folder. */
static void remove_tmp(OutDir *d) {
    if (!d->tmp[0]) return;
    DIR *dir = opendir(d->tmp);
    if (dir) {
        struct dirent *e;
        char p[1600];
        while ((e = readdir(dir)))
            if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
                snprintf(p, sizeof p, "%s/%s", d->tmp, e->d_name);
                unlink(p);
            }
        closedir(dir);
    }
    rmdir(d->tmp);
    d->tmp[0] = 0;
}

int outdir_commit(OutDir *d) {
    DIR *dir = opendir(d->tmp);
    if (!dir) return ml_fail(ML_ERR_IO, "%s: %s", d->tmp, strerror(errno)), -1;
    struct dirent *e;
    int rc = 0;
    while (rc == 0 && (e = readdir(dir))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        char from[1600], to[1400];
        snprintf(from, sizeof from, "%s/%s", d->tmp, e->d_name);
        snprintf(to, sizeof to, "%s/%s", d->final, e->d_name);
        if (rename(from, to) != 0) {
            ml_fail(ML_ERR_IO, "%s: cannot move into place: %s", to, strerror(errno));
            rc = -1;
        }
    }
    closedir(dir);
    if (rc == 0) {
        rmdir(d->tmp);
        d->tmp[0] = 0;
        d->created[0] = 0;
    }
    return rc;
}

void outdir_abort(OutDir *d) {
    remove_tmp(d);
    if (!d->created[0]) return;
    /* the folders made by outdir_begin, innermost first, down to the outermost one (each only if empty) */
    char p[sizeof d->final];
    snprintf(p, sizeof p, "%s", d->final);
    const size_t stop = strlen(d->created);
    for (;;) {
        if (rmdir(p) != 0) break;
        if (strlen(p) <= stop) break;
        char *slash = strrchr(p, '/');
        if (!slash || (size_t)(slash - p) < stop) break;
        *slash = 0;
    }
    d->created[0] = 0;
}

void outdir_unstage(const OutDir *d, char *msg, size_t n) {
    char tmp[1200];
    snprintf(tmp, sizeof tmp, "%s", d->tmp[0] ? d->tmp : "");
    if (!tmp[0]) snprintf(tmp, sizeof tmp, "%s/.moelab-partial-%ld", d->final, (long)getpid());
    const size_t tl = strlen(tmp), fl = strlen(d->final);
    for (char *at = strstr(msg, tmp); at; at = strstr(at + fl, tmp)) {
        const size_t rest = strlen(at + tl) + 1;
        if ((size_t)(at - msg) + fl + rest > n) break;
        memmove(at + fl, at + tl, rest);
        memcpy(at, d->final, fl);
    }
}
