/* h5util.h — private helpers of the sessions module around the HDF5 C API: error messages from
 * the HDF5 error stack, attributes, whole-array datasets with shape checks, file and directory
 * plumbing (mkdir -p, fsync). Only the sessions sources include this header (it includes hdf5.h). */
#ifndef ML_SESSIONS_H5UTIL_H
#define ML_SESSIONS_H5UTIL_H

#include <hdf5.h>
#include <stddef.h>
#include <stdint.h>

#include "core/common.h"

#define H5U_PATH_MAX 4096

/* Switches off HDF5's automatic error printing (every public entry point calls it). */
void h5u_quiet(void);
/* ml_fail(st, "FILE: OBJ: WHAT: <innermost HDF5 reason>") and clears the HDF5 error stack.
 * obj may be NULL or "". */
ml_status h5u_fail(ml_status st, const char *file, const char *obj, const char *what);
/* The innermost reason on the HDF5 error stack, short ("unable to open file: Read-only file
 * system (errno 30)", never the raw "name = ..., o_flags = ..." fields) into buf ("" if none); clears
 * the stack. Returns buf. */
const char *h5u_reason(char *buf, size_t n);
/* Closes any kind of HDF5 id (ignores ids < 0). */
void h5u_close(hid_t id);

/* File access property list with libver bounds (LATEST, LATEST), or -1. */
hid_t h5u_fapl_latest(void);
/* A fixed-length, NUL-terminated string type of `len` bytes, or -1. */
hid_t h5u_str_type(size_t len);

/* ---- attributes (created or overwritten) */
ml_status h5u_attr_str(hid_t loc, const char *name, const char *val, const char *file);
ml_status h5u_attr_i64(hid_t loc, const char *name, int64_t val, const char *file);
ml_status h5u_attr_u64(hid_t loc, const char *name, uint64_t val, const char *file);
ml_status h5u_attr_f64(hid_t loc, const char *name, double val, const char *file);
ml_status h5u_attr_f32v(hid_t loc, const char *name, const float *v, int n, const char *file);
ml_status h5u_attr_strv(hid_t loc, const char *name, const char *const *v, int n, const char *file);
/* Reads a string attribute (fixed or variable length) into buf (truncating; ML_ERR_ARG if it
 * did not fit, ML_ERR_FORMAT if missing or not a string). */
ml_status h5u_read_attr_str(hid_t loc, const char *name, char *buf, size_t n, const char *file);
ml_status h5u_read_attr_i64(hid_t loc, const char *name, int64_t *val, const char *file);
ml_status h5u_read_attr_u64(hid_t loc, const char *name, uint64_t *val, const char *file);
ml_status h5u_read_attr_f64(hid_t loc, const char *name, double *val, const char *file);

/* ---- whole datasets */
/* Creates `path` (contiguous, ndim <= 4; ndim 0 = scalar) under loc and writes data. */
ml_status h5u_write(hid_t loc, const char *path, hid_t file_type, hid_t mem_type, int ndim, const hsize_t *dims,
                    const void *data, const char *file);
/* Opens `path`, checks its shape equals dims (ML_ERR_FORMAT naming the dataset and both shapes
 * otherwise) and reads it into data. hint (may be NULL) is appended to a mismatch message. */
ml_status h5u_read(hid_t loc, const char *path, hid_t mem_type, int ndim, const hsize_t *dims, void *data,
                   const char *file, const char *hint);
/* Only the shape check of h5u_read. */
ml_status h5u_check_shape(hid_t loc, const char *path, int ndim, const hsize_t *dims, const char *file,
                          const char *hint);
/* Current dims of a dataset (refreshing it first when refresh != 0, for SWMR readers). Returns
 * the rank or -1. */
int h5u_dims(hid_t dset, hsize_t *dims, int maxdims, int refresh);

/* ---- checksums: the zlib CRC-32 of a dataset's values in native memory layout, stored in its
 * @crc32 attribute (checkpoints, sweep.h5, imported datasets) */
uint32_t h5u_crc32(uint32_t crc, const void *data, size_t nbytes);
/* Writes @crc32 = crc on the dataset `path` under loc. */
ml_status h5u_set_crc(hid_t loc, const char *path, uint32_t crc, const char *file);
/* Compares crc with the @crc32 of dataset `path` under loc: ML_OK if equal; ML_ERR_FORMAT naming
 * the file and dataset if not ("fails its checksum ... the file is damaged"), or if it has none
 * while `required`; ML_OK with *had = 0 when it has none and is not required. */
ml_status h5u_check_crc(hid_t loc, const char *path, uint32_t crc, int required, int *had, const char *file);

/* ---- file system */
ml_status h5u_mkdirs(const char *dir);
ml_status h5u_fsync_path(const char *path, int is_dir);
/* snprintf into buf, ML_ERR_ARG if the path would be truncated. */
ml_status h5u_path(char *buf, size_t n, const char *dir, const char *name);

/* ISO 8601 local time with offset, e.g. 2024-05-01T12:00:00+0200. */
void h5u_iso_time(char *buf, size_t n);
/* Unix time in seconds (CLOCK_REALTIME). */
double h5u_unix_time(void);

#endif
