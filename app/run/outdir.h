/* outdir.h — an output folder filled all or nothing (`moelab export --csv OUTDIR`, `moelab plot
 * --out DIR`): the files are written into a hidden staging folder inside it, and moved into place
 * only when all of them were written; on failure the staging folder, and every folder this call
 * created, are removed, so a failed export or plot leaves no partial output (files that were in the
 * folder before are left as they were). */
#ifndef ML_APP_OUTDIR_H
#define ML_APP_OUTDIR_H

#include <stddef.h>

typedef struct {
    char final[1100];   /* the folder asked for */
    char tmp[1200];     /* final/.moelab-partial-PID: where the files are written */
    char created[1100]; /* the outermost folder this call created ("" if final existed) */
} OutDir;

/* Creates final (mkdir -p) and the staging folder. 0, or -1 with ml_last_error() set. */
int outdir_begin(OutDir *d, const char *final);
/* Moves every file of the staging folder into final (replacing files of the same name) and
 * removes the staging folder. 0, or -1 with ml_last_error() set (outdir_abort then). */
int outdir_commit(OutDir *d);
/* Replaces the staging folder's path in msg (n bytes) by the folder asked for, so a message names
 * the file the user asked for. */
void outdir_unstage(const OutDir *d, char *msg, size_t n);
/* Removes the staging folder with its files, and the folders outdir_begin created. */
void outdir_abort(OutDir *d);

#endif
