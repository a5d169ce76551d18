/* dataset_h5.h — HDF5 dataset files: what `moelab data import` writes and training reads.
 *
 * Layout (format_version 1; readable with h5py: f["train/images"][i] is one H x W x C image):
 *   /train/images   uint8  (N, H, W, C)  NHWC, chunked (about 1 MiB per chunk), N unlimited
 *   /train/labels   int32  (N)           class index in [0, classes)
 *   /test/images    uint8  (M, H, W, C)
 *   /test/labels    int32  (M)
 *   /class_names    fixed-length UTF-8 strings (classes), NUL-padded
 *   root attributes: format = "moelab-dataset", format_version = 1, layout = "NHWC",
 *     name, source (fixed-length strings), classes (int64), mean, std (float32[C], pixel/255 units), stats_source,
 *     and for folder imports: image_size, skipped_unreadable, non_image_files, empty_classes,
 *     missing_files (int64).
 * The reader transposes to the in-memory (N, C, H, W) layout block by block, validates every
 * dimension, type and label, and checks that the file really stores the bytes its dataspaces
 * declare before allocating (a tiny file cannot ask for terabytes). Files are written to
 * OUT.part and renamed into place only when complete.
 *
 * Files read are untrusted: libhdf5 1.10 itself can crash or hang on corrupted metadata. Both
 * loaders first validate the file in a forked child (ml_run_isolated): it makes every metadata
 * access of the load (attributes, shapes, types, class names, the chunk index, all labels, the
 * first and last image of each split; every image only under an HDF5 filter other than
 * deflate/shuffle/fletcher32) and never reads the pixel data in between. A crash or a hang
 * (30 s) of the child is reported as ML_ERR_FORMAT "FILE: reading it crashed the HDF5 library
 * (signal N): the file is damaged"; a child's ordinary error is passed on unchanged; only a
 * file the child read cleanly is loaded in-process. If fork() fails the load runs unprotected.
 */
#ifndef ML_DATASET_H5_H
#define ML_DATASET_H5_H

#include "datasets/dataset.h"

#define DATASET_H5_FORMAT_VERSION 1

/* Reads an HDF5 dataset file into `ds` (the loader the app registers with
 * dataset_set_h5_loader), after validating it in a child process (above). On failure ds is
 * empty and ml_last_error names the file and object. */
ml_status dataset_h5_load(Dataset *ds, const char *path);

/* The same from a file image in memory (fuzzing), with the same child validation; `what` names
 * it in errors. */
ml_status dataset_h5_load_image(Dataset *ds, const void *buf, size_t len, const char *what);

/* Writes an in-memory dataset to `path` (NCHW -> NHWC). */
ml_status dataset_h5_save(const Dataset *ds, const char *path);

/* Decodes a scanned image folder into `path` (streaming, see imgfolder_import) and records the
 * scan's problem counts as attributes. */
ml_status dataset_h5_import_folder(const ImgScan *scan, const char *path, const ImportOptions *opt, ImportReport *rep);

#endif
