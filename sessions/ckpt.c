/* ckpt.c — crash-safe checkpoints DIR/ckpt-<step>.h5 holding everything trainer_step uses, so
 * that a fresh trainer_init + ckpt_read continues bit for bit: the model's tensors (PyTorch
 * state_dict names and shapes, MoE experts split per expert), the optimiser moments, and every row
 * of the trainer's state table (core/state.h: RNG states, schedules, data order and position, the
 * epoch's sums, the MoE knobs, bias and routing window). Written as .tmp, fsync'd, renamed, directory fsync'd; old ones pruned. */
#define _POSIX_C_SOURCE 200809L

#include "session.h"
#include "h5util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

/* the end of the message for a format_version above SESSION_FORMAT_VERSION (search_ckpts tells it from damage) */
#define NEWER_NOTE "written by a newer moelab?"

#define SHAPE_HINT                                                                                                   \
    "(the checkpoint is for a different model or dataset: compare --width, --backbone, "                             \
    "--head, --experts, --k, --hidden, --moe-after, --ffn-after, --moe-hidden, --moe-experts, --moe-k, --batch and " \
    "the dataset)"

/* ------------------------------------------------------------------ tensor entries */

typedef struct {
    char name[112]; /* state_dict key */
    long off, n;    /* floats in the model's flat buffer */
    int ndim;
    hsize_t dims[4];
} Entry;

#define MAX_ENTRIES (MODEL_MAX_TENSORS + 4 * MOE_MAX_EXPERTS)

/* The parameter tensors as state_dict entries; the four stacked expert tensors of a MoE head
 * (E, ...) become E entries head.experts.<e>.<rest>. */
static int param_entries(const Model *m, Entry *out) {
    int n = 0;
    const int moe = m->cfg.head.kind != HEAD_DENSE && m->moe_first >= 0;
    const int E = m->cfg.head.E;
    for (int i = 0; i < m->nparams; i++) {
        const TensorInfo *ti = &m->params[i];
        const char *pre = "head.experts.";
        if (moe && i > m->moe_first && i <= m->moe_first + 4 && strncmp(ti->name, pre, strlen(pre)) == 0 &&
            ti->shape[0] == E) {
            const char *rest = ti->name + strlen(pre);
            const long per = ti->n / E;
            for (int e = 0; e < E; e++) {
                Entry *en = &out[n++];
                snprintf(en->name, sizeof en->name, "%s%d.%s", pre, e, rest);
                en->off = ti->off + e * per;
                en->n = per;
                en->ndim = ti->ndim - 1;
                for (int k = 1; k < ti->ndim; k++) en->dims[k - 1] = (hsize_t)ti->shape[k];
            }
            continue;
        }
        Entry *en = &out[n++];
        snprintf(en->name, sizeof en->name, "%s", ti->name);
        en->off = ti->off;
        en->n = ti->n;
        en->ndim = ti->ndim;
        for (int k = 0; k < ti->ndim; k++) en->dims[k] = (hsize_t)ti->shape[k];
    }
    return n;
}

static int buf_entries(const Model *m, Entry *out) {
    for (int i = 0; i < m->nbufs; i++) {
        const TensorInfo *ti = &m->bufs[i];
        Entry *en = &out[i];
        snprintf(en->name, sizeof en->name, "%s", ti->name);
        en->off = ti->off;
        en->n = ti->n;
        en->ndim = ti->ndim;
        for (int k = 0; k < ti->ndim; k++) en->dims[k] = (hsize_t)ti->shape[k];
    }
    return m->nbufs;
}

/* ------------------------------------------------------------------ compound types */

static hid_t tau_type(void) {
    hid_t t = H5Tcreate(H5T_COMPOUND, sizeof(TauSchedule));
    if (t < 0) return -1;
    if (H5Tinsert(t, "kind", HOFFSET(TauSchedule, kind), H5T_NATIVE_INT) < 0 ||
        H5Tinsert(t, "tau0", HOFFSET(TauSchedule, tau0), H5T_NATIVE_FLOAT) < 0 ||
        H5Tinsert(t, "tau1", HOFFSET(TauSchedule, tau1), H5T_NATIVE_FLOAT) < 0 ||
        H5Tinsert(t, "tau_min", HOFFSET(TauSchedule, tau_min), H5T_NATIVE_FLOAT) < 0 ||
        H5Tinsert(t, "s", HOFFSET(TauSchedule, s), H5T_NATIVE_FLOAT) < 0 ||
        H5Tinsert(t, "c", HOFFSET(TauSchedule, c), H5T_NATIVE_FLOAT) < 0 ||
        H5Tinsert(t, "step_every", HOFFSET(TauSchedule, step_every), H5T_NATIVE_INT) < 0 ||
        H5Tinsert(t, "step_gamma", HOFFSET(TauSchedule, step_gamma), H5T_NATIVE_FLOAT) < 0 ||
        H5Tinsert(t, "start", HOFFSET(TauSchedule, start), H5T_NATIVE_LONG) < 0 ||
        H5Tinsert(t, "total", HOFFSET(TauSchedule, total), H5T_NATIVE_LONG) < 0) {
        H5Tclose(t);
        return -1;
    }
    return t;
}

static hid_t lr_type(void) {
    hid_t t = H5Tcreate(H5T_COMPOUND, sizeof(LrSchedule));
    const hsize_t two = 2;
    hid_t arr = H5Tarray_create2(H5T_NATIVE_FLOAT, 1, &two);
    int ok = t >= 0 && arr >= 0;
    ok = ok && H5Tinsert(t, "kind", HOFFSET(LrSchedule, kind), H5T_NATIVE_INT) >= 0;
    ok = ok && H5Tinsert(t, "base", HOFFSET(LrSchedule, base), H5T_NATIVE_FLOAT) >= 0;
    ok = ok && H5Tinsert(t, "warmup", HOFFSET(LrSchedule, warmup), H5T_NATIVE_LONG) >= 0;
    ok = ok && H5Tinsert(t, "total", HOFFSET(LrSchedule, total), H5T_NATIVE_LONG) >= 0;
    ok = ok && H5Tinsert(t, "gamma", HOFFSET(LrSchedule, gamma), H5T_NATIVE_FLOAT) >= 0;
    ok = ok && H5Tinsert(t, "milestones", HOFFSET(LrSchedule, milestones), arr) >= 0;
    h5u_close(arr);
    if (!ok) {
        h5u_close(t);
        return -1;
    }
    return t;
}

/* ------------------------------------------------------------------ writing */

/* ------------------------------------------------------------------ checksums
 * Every numeric dataset carries @crc32, the zlib CRC-32 of its values in native memory layout;
 * readers (ckpt_read, ckpt_validate) recompute it, so a flipped byte is found. Compound datasets
 * (the schedules) are small and validated by value instead. Checkpoints written before the
 * checksums existed have none and are accepted as they are. */

static uint32_t crc_of(const void *data, size_t nbytes) { return h5u_crc32(h5u_crc32(0, NULL, 0), data, nbytes); }

static ml_status set_crc(hid_t file, const char *path, const void *data, size_t nbytes, const char *f) {
    hid_t d = H5Dopen2(file, path, H5P_DEFAULT);
    if (d < 0) return h5u_fail(ML_ERR_IO, f, path, "cannot reopen to checksum");
    const ml_status st = h5u_attr_i64(d, "crc32", crc_of(data, nbytes), f);
    H5Dclose(d);
    return st;
}

/* ML_OK if the dataset has no @crc32 or it matches data. */
static ml_status check_crc(hid_t obj, const char *path, const void *data, size_t nbytes, const char *f) {
    if (H5Aexists(obj, "crc32") <= 0) {
        H5Eclear2(H5E_DEFAULT);
        return ML_OK;
    }
    int64_t want = 0;
    ml_status st = h5u_read_attr_i64(obj, "crc32", &want, f);
    if (st != ML_OK) return st;
    const uint32_t got = crc_of(data, nbytes);
    if ((int64_t)got != want)
        return ml_fail(ML_ERR_FORMAT, "%s: %s fails its checksum (crc32 %08x, stored %08llx): the file is damaged", f,
                       path, got, (unsigned long long)want);
    return ML_OK;
}

static ml_status check_crc_path(hid_t file, const char *path, const void *data, size_t nbytes, const char *f) {
    hid_t d = H5Dopen2(file, path, H5P_DEFAULT);
    if (d < 0) return h5u_fail(ML_ERR_FORMAT, f, path, "cannot open dataset");
    const ml_status st = check_crc(d, path, data, nbytes, f);
    H5Dclose(d);
    return st;
}

static ml_status write_f32(hid_t loc, const char *path, const float *v, int ndim, const hsize_t *dims, const char *f) {
    ml_status st = h5u_write(loc, path, H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, ndim, dims, v, f);
    size_t n = 1;
    for (int k = 0; k < ndim; k++) n *= (size_t)dims[k];
    if (st == ML_OK) st = set_crc(loc, path, v, n * sizeof(float), f);
    return st;
}

static ml_status write_entries(hid_t file, const char *group, const Entry *en, int n, const float *base,
                               const char *f) {
    char path[160];
    ml_status st = ML_OK;
    for (int i = 0; i < n && st == ML_OK; i++) {
        snprintf(path, sizeof path, "/%s/%s", group, en[i].name);
        st = write_f32(file, path, base + en[i].off, en[i].ndim, en[i].dims, f);
    }
    return st;
}

/* The file and memory HDF5 types of a state row (*owned: close them after use). */
static ml_status var_types(StateType ty, hid_t *file_t, hid_t *mem_t, int *owned) {
    *owned = 0;
    switch (ty) {
    case SV_I32:
        *file_t = H5T_STD_I32LE;
        *mem_t = H5T_NATIVE_INT32;
        return ML_OK;
    case SV_I64:
        *file_t = H5T_STD_I64LE;
        *mem_t = H5T_NATIVE_INT64;
        return ML_OK;
    case SV_U64:
        *file_t = H5T_STD_U64LE;
        *mem_t = H5T_NATIVE_UINT64;
        return ML_OK;
    case SV_F32:
        *file_t = H5T_IEEE_F32LE;
        *mem_t = H5T_NATIVE_FLOAT;
        return ML_OK;
    case SV_F64:
        *file_t = H5T_IEEE_F64LE;
        *mem_t = H5T_NATIVE_DOUBLE;
        return ML_OK;
    case SV_TAU: *file_t = *mem_t = tau_type(); break;
    case SV_LR: *file_t = *mem_t = lr_type(); break;
    }
    if (*mem_t < 0) return ml_fail(ML_ERR_IO, "cannot make an HDF5 compound type");
    *owned = 1;
    return ML_OK;
}

static void var_dims(const StateVar *v, hsize_t *d) {
    d[0] = (hsize_t)v->dims[0];
    d[1] = (hsize_t)v->dims[1];
}

static ml_status write_all(hid_t file, const StateView *v, const char *f) {
    const Model *m = v->model;
    Entry *en = ml_alloc(sizeof(Entry) * MAX_ENTRIES);
    char *json = ml_alloc(65536);
    char created[40];
    ml_status st = (!en || !json) ? ml_fail(ML_ERR_NOMEM, "out of memory") : ML_OK;
    h5u_iso_time(created, sizeof created);
    if (st == ML_OK) st = session_config_json(v->cfg, v->dataset, json, 65536);
    if (st == ML_OK) st = h5u_attr_i64(file, "format_version", SESSION_FORMAT_VERSION, f);
    if (st == ML_OK) st = h5u_attr_str(file, "kind", "moelab checkpoint", f);
    if (st == ML_OK) st = h5u_attr_str(file, "moelab_version", MOELAB_VERSION, f);
    if (st == ML_OK) st = h5u_attr_str(file, "created", created, f);
    if (st == ML_OK) st = h5u_attr_str(file, "config_json", json, f);
    if (st == ML_OK) st = h5u_attr_i64(file, "step", v->step, f);
    if (st == ML_OK) st = h5u_attr_i64(file, "epoch", v->epoch, f);
    /* whose it is: the session that wrote it and the seed (config_json above is the configuration) */
    if (st == ML_OK) st = h5u_attr_str(file, "session_id", v->session_id ? v->session_id : "", f);
    if (st == ML_OK) st = h5u_attr_u64(file, "seed", v->cfg->seed, f);

    /* the model's tensors (its own tables), the optimiser moments with the same names */
    int np = 0, nb = 0;
    if (st == ML_OK) {
        np = param_entries(m, en);
        st = write_entries(file, "weights", en, np, m->param, f);
    }
    if (st == ML_OK) {
        Entry *be = en + np;
        nb = buf_entries(m, be);
        st = write_entries(file, "buffers", be, nb, m->buf, f);
    }
    if (st == ML_OK) st = write_entries(file, "optimizer/m", en, np, v->opt_m, f);
    if (st == ML_OK && v->opt_v) st = write_entries(file, "optimizer/v", en, np, v->opt_v, f);
    /* every other row of the trainer's state table */
    for (int i = 0; i < v->nvars && st == ML_OK; i++) {
        const StateVar *r = &v->vars[i];
        hid_t ft, mt;
        int owned;
        hsize_t d[2];
        var_dims(r, d);
        if ((st = var_types(r->type, &ft, &mt, &owned)) != ML_OK) break;
        st = h5u_write(file, r->path, ft, mt, r->rank, d, r->ptr, f);
        if (owned) h5u_close(mt);
        else if (st == ML_OK)
            st = set_crc(file, r->path, r->ptr, state_type_size(r->type) * (size_t)state_var_count(r), f);
    }
    if (st == ML_OK) {
        hid_t g = H5Gopen2(file, "/optimizer", H5P_DEFAULT);
        if (g < 0) st = h5u_fail(ML_ERR_IO, f, "/optimizer", "cannot open group");
        else st = h5u_attr_str(g, "kind", v->opt_kind, f);
        h5u_close(g);
    }
    ml_free(en);
    ml_free(json);
    return st;
}

/* ------------------------------------------------------------------ listing and pruning */

typedef struct {
    long step;
    char name[64];
} CkptName;

static int parse_ckpt_name(const char *s, long *step) {
    const char *pre = "ckpt-";
    if (strncmp(s, pre, 5) != 0) return 0;
    const char *p = s + 5;
    if (*p < '0' || *p > '9') return 0;
    char *end;
    errno = 0;
    const long v = strtol(p, &end, 10);
    if (errno || strcmp(end, ".h5") != 0) return 0;
    *step = v;
    return 1;
}

static int cmp_desc(const void *a, const void *b) {
    const long x = ((const CkptName *)a)->step, y = ((const CkptName *)b)->step;
    return x < y ? 1 : x > y ? -1 : 0;
}

/* Appends "NAME WHY and was skipped" to report (rn bytes, may be NULL). */
static void add_report(char *report, size_t rn, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Appends "NAME WHY and was skipped" to report (rn bytes, may be NULL). */
static void report_skip(char *report, size_t rn, const char *name, const char *why) {
    add_report(report, rn, "%s %s and was skipped", name, why);
}

static const char *file_kind(mode_t m) {
    return S_ISDIR(m)                 ? "is not a regular file (a directory)"
           : S_ISLNK(m)               ? "is not a regular file (a symbolic link)"
           : S_ISFIFO(m)              ? "is not a regular file (a FIFO)"
           : S_ISSOCK(m)              ? "is not a regular file (a socket)"
           : S_ISCHR(m) || S_ISBLK(m) ? "is not a regular file (a device)"
                                      : "is not a regular file";
}

/* Checkpoints of dir, newest first, into *out (ml_alloc'd). Only regular files count: a FIFO,
 * device, directory or symbolic link named ckpt-<step>.h5 is left out (lstat semantics, so
 * nothing is ever opened here: opening a FIFO for reading blocks until a writer comes) and, with
 * `report`, named there. */
static ml_status list_ckpts_report(const char *dir, CkptName **out, int *n, char *report, size_t rn) {
    *out = NULL;
    *n = 0;
    DIR *d = opendir(dir);
    if (!d) return ml_fail(ML_ERR_IO, "%s: cannot list: %s", dir, strerror(errno));
    int cap = 16, cnt = 0;
    CkptName *v = ml_alloc(sizeof *v * (size_t)cap);
    struct dirent *de;
    while (v && (de = readdir(d)) != NULL) {
        long step;
        if (!parse_ckpt_name(de->d_name, &step) || strlen(de->d_name) >= sizeof v->name) continue;
        struct stat sb;
        if (fstatat(dirfd(d), de->d_name, &sb, AT_SYMLINK_NOFOLLOW) != 0) continue; /* gone since readdir */
        if (!S_ISREG(sb.st_mode)) {
            report_skip(report, rn, de->d_name, file_kind(sb.st_mode));
            continue;
        }
        if (cnt == cap) {
            CkptName *nv = ml_alloc(sizeof *v * (size_t)cap * 2);
            if (nv) memcpy(nv, v, sizeof *v * (size_t)cap);
            ml_free(v);
            v = nv;
            cap *= 2;
            if (!v) break;
        }
        v[cnt].step = step;
        memcpy(v[cnt].name, de->d_name, strlen(de->d_name) + 1); /* length checked above */
        cnt++;
    }
    closedir(d);
    if (!v) return ml_fail(ML_ERR_NOMEM, "out of memory listing %s", dir);
    qsort(v, (size_t)cnt, sizeof *v, cmp_desc);
    *out = v;
    *n = cnt;
    return ML_OK;
}

static ml_status list_ckpts(const char *dir, CkptName **out, int *n) { return list_ckpts_report(dir, out, n, NULL, 0); }

/* Removes checkpoints beyond the newest `keep` (never `just_written`) and stale .tmp files. */
static void prune(const char *dir, int keep, const char *just_written) {
    DIR *d = opendir(dir);
    if (d) {
        struct dirent *de;
        while ((de = readdir(d)) != NULL) {
            const size_t l = strlen(de->d_name);
            if (strncmp(de->d_name, "ckpt-", 5) == 0 && l > 8 && strcmp(de->d_name + l - 7, ".h5.tmp") == 0) {
                char p[H5U_PATH_MAX];
                if (h5u_path(p, sizeof p, dir, de->d_name) == ML_OK && unlink(p) != 0)
                    ml_log(1, "%s: cannot remove stale temporary checkpoint: %s", p, strerror(errno));
            }
        }
        closedir(d);
    }
    if (keep <= 0) return;
    CkptName *v;
    int n;
    if (list_ckpts(dir, &v, &n) != ML_OK) return;
    for (int i = keep; i < n; i++) {
        if (strcmp(v[i].name, just_written) == 0) continue;
        char p[H5U_PATH_MAX];
        if (h5u_path(p, sizeof p, dir, v[i].name) == ML_OK && unlink(p) != 0)
            ml_log(1, "%s: cannot remove old checkpoint: %s", p, strerror(errno));
    }
    ml_free(v);
}

/* Writes n bytes to a new file `path` and fsyncs it (ML_ERR_IO with errno text on failure). */
static ml_status write_file_synced(const char *path, const void *data, size_t n) {
    const int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return ml_fail(ML_ERR_IO, "%s: cannot create: %s", path, strerror(errno));
    const char *p = data;
    size_t done = 0;
    while (done < n) {
        const ssize_t w = write(fd, p + done, n - done);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            const int e = w < 0 ? errno : ENOSPC;
            close(fd);
            return ml_fail(ML_ERR_IO, "%s: write failed after %zu of %zu bytes: %s", path, done, n, strerror(e));
        }
        done += (size_t)w;
    }
    if (fsync(fd) != 0) {
        const int e = errno;
        close(fd);
        return ml_fail(ML_ERR_IO, "%s: fsync failed: %s", path, strerror(e));
    }
    if (close(fd) != 0) return ml_fail(ML_ERR_IO, "%s: close failed: %s", path, strerror(errno));
    return ML_OK;
}

/* The whole checkpoint is built in memory (HDF5 core driver, no backing store) and written with
 * plain write(2) calls: HDF5 never writes to the disk, so a full disk or a file size limit is an
 * ordinary errno here, and HDF5 1.10.8's crash on closing a file whose close failed cannot
 * happen. Costs one checkpoint of memory (two while the image is copied out). */
static ml_status build_image(const StateView *t, const char *name, void **image, size_t *size) {
    *image = NULL;
    *size = 0;
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    if (fapl < 0 || H5Pset_fapl_core(fapl, (size_t)4 << 20, 0) < 0) {
        h5u_close(fapl);
        return h5u_fail(ML_ERR_IO, name, "", "cannot make in-memory file access list");
    }
    hid_t file = H5Fcreate(name, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    if (file < 0) {
        const ml_status st = h5u_fail(ML_ERR_IO, name, "", "cannot create in-memory checkpoint");
        H5Pclose(fapl);
        return st;
    }
    H5Pclose(fapl);
    ml_status st = write_all(file, t, name);
    if (st == ML_OK && H5Fflush(file, H5F_SCOPE_GLOBAL) < 0) st = h5u_fail(ML_ERR_IO, name, "", "cannot flush");
    ssize_t n = -1;
    if (st == ML_OK && (n = H5Fget_file_image(file, NULL, 0)) <= 0)
        st = h5u_fail(ML_ERR_IO, name, "", "cannot get the file image size");
    void *buf = NULL;
    if (st == ML_OK && !(buf = malloc((size_t)n)))
        st = ml_fail(ML_ERR_NOMEM, "%s: out of memory for a %zd-byte checkpoint image", name, n);
    if (st == ML_OK && H5Fget_file_image(file, buf, (size_t)n) != n)
        st = h5u_fail(ML_ERR_IO, name, "", "cannot copy the file image");
    if (H5Fclose(file) < 0 && st == ML_OK) st = h5u_fail(ML_ERR_IO, name, "", "cannot close in-memory file");
    if (st != ML_OK) {
        free(buf);
        return st;
    }
    *image = buf;
    *size = (size_t)n;
    return ML_OK;
}

ml_status ckpt_write(const char *dir, const StateView *t, int keep) {
    h5u_quiet();
    ml_status st = h5u_mkdirs(dir);
    if (st != ML_OK) return st;
    char name[64], final[H5U_PATH_MAX], tmp[H5U_PATH_MAX + 8];
    snprintf(name, sizeof name, "ckpt-%ld.h5", t->step);
    if ((st = h5u_path(final, sizeof final, dir, name)) != ML_OK) return st;
    snprintf(tmp, sizeof tmp, "%s.tmp", final);
    void *image = NULL;
    size_t size = 0;
    st = build_image(t, final, &image, &size);
    if (st == ML_OK) st = write_file_synced(tmp, image, size);
    free(image);
    if (st == ML_OK && rename(tmp, final) != 0)
        st = ml_fail(ML_ERR_IO, "%s: cannot rename to %s: %s", tmp, final, strerror(errno));
    if (st != ML_OK) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", ml_last_error());
        unlink(tmp);
        H5Eclear2(H5E_DEFAULT);
        return ml_fail(st, "checkpoint not written (earlier checkpoints are untouched): %s", msg);
    }
    if ((st = h5u_fsync_path(dir, 1)) != ML_OK) return st;
    prune(dir, keep, name);
    return ML_OK;
}

/* ------------------------------------------------------------------ reading */

static ml_status read_entries(hid_t file, const char *group, const Entry *en, int n, float *base, const char *f) {
    char path[160];
    ml_status st = ML_OK;
    for (int i = 0; i < n && st == ML_OK; i++) {
        snprintf(path, sizeof path, "/%s/%s", group, en[i].name);
        st = h5u_read(file, path, H5T_NATIVE_FLOAT, en[i].ndim, en[i].dims, base + en[i].off, f, SHAPE_HINT);
        if (st == ML_OK) st = check_crc_path(file, path, base + en[i].off, sizeof(float) * (size_t)en[i].n, f);
    }
    return st;
}

/* Everything read from a checkpoint before it is committed: the model's arrays and one staging
 * buffer per state row. */
typedef struct {
    float *param, *buf, *m, *v;
    void *var[STATE_MAX_VARS];
} Stage;

static void stage_free(Stage *s) {
    ml_free(s->param);
    ml_free(s->buf);
    ml_free(s->m);
    ml_free(s->v);
    for (int i = 0; i < STATE_MAX_VARS; i++) ml_free(s->var[i]);
}

static ml_status read_all(hid_t file, const StateView *v, Stage *s, const char *f) {
    const Model *m = v->model;
    const int moe = m->cfg.head.kind != HEAD_DENSE;
    int64_t fv = 0;
    ml_status st = h5u_read_attr_i64(file, "format_version", &fv, f);
    if (st != ML_OK) return st;
    if (fv < 1 || fv > SESSION_FORMAT_VERSION)
        return ml_fail(ML_ERR_FORMAT, "%s: format_version %lld, this moelab reads 1..%d (" NEWER_NOTE ")", f,
                       (long long)fv, SESSION_FORMAT_VERSION);
    Entry *en = ml_alloc(sizeof(Entry) * MAX_ENTRIES);
    if (!en) return ml_fail(ML_ERR_NOMEM, "out of memory");
    const int np = param_entries(m, en);
    Entry *be = en + np;
    const int nb = buf_entries(m, be);
    /* first every shape (clear message naming the dataset before any large read) */
    char path[160];
    for (int i = 0; i < np && st == ML_OK; i++) {
        snprintf(path, sizeof path, "/weights/%s", en[i].name);
        st = h5u_check_shape(file, path, en[i].ndim, en[i].dims, f, SHAPE_HINT);
    }
    for (int i = 0; i < nb && st == ML_OK; i++) {
        snprintf(path, sizeof path, "/buffers/%s", be[i].name);
        st = h5u_check_shape(file, path, be[i].ndim, be[i].dims, f, SHAPE_HINT);
    }
    /* rows added after the checkpoint's format version that it lacks: the restore keeps their
     * current (trainer_init) values */
    char *absent = ml_alloc((size_t)(v->nvars > 0 ? v->nvars : 1));
    if (!absent) {
        ml_free(en);
        return ml_fail(ML_ERR_NOMEM, "out of memory");
    }
    for (int i = 0; i < v->nvars; i++) {
        absent[i] = v->vars[i].since > fv && H5Lexists(file, v->vars[i].path, H5P_DEFAULT) <= 0;
        H5Eclear2(H5E_DEFAULT);
    }
    for (int i = 0; i < v->nvars && st == ML_OK; i++) {
        const StateVar *r = &v->vars[i];
        hsize_t d[2];
        var_dims(r, d);
        if (r->rank > 0 && !absent[i])
            st = h5u_check_shape(file, r->path, r->rank, d, f, r->hint ? r->hint : SHAPE_HINT);
    }
    if (st == ML_OK && !moe && H5Lexists(file, "/moe", H5P_DEFAULT) > 0)
        st =
            ml_fail(ML_ERR_FORMAT, "%s: /moe exists: the checkpoint is for a MoE head, this model has a dense head", f);
    H5Eclear2(H5E_DEFAULT);
    const int adam = v->opt_v != NULL;
    if (st == ML_OK) {
        const htri_t hv = H5Lexists(file, "/optimizer/v", H5P_DEFAULT);
        H5Eclear2(H5E_DEFAULT);
        if ((hv > 0) != adam)
            st = ml_fail(ML_ERR_FORMAT, "%s: the checkpoint's optimiser %s, this trainer uses %s", f,
                         hv > 0 ? "is adamw" : "has no second moment (sgd)", v->opt_kind);
    }
    /* then the data, into the stage */
    if (st == ML_OK) {
        s->param = ml_alloc(sizeof(float) * m->n_param);
        s->buf = ml_alloc(sizeof(float) * (m->n_buf ? m->n_buf : 1));
        s->m = ml_alloc(sizeof(float) * m->n_param);
        s->v = adam ? ml_alloc(sizeof(float) * m->n_param) : NULL;
        int ok = s->param && s->buf && s->m && (!adam || s->v);
        for (int i = 0; i < v->nvars && ok; i++)
            ok =
                (s->var[i] = ml_alloc(state_type_size(v->vars[i].type) * (size_t)state_var_count(&v->vars[i]))) != NULL;
        if (!ok) st = ml_fail(ML_ERR_NOMEM, "out of memory reading %s", f);
    }
    if (st == ML_OK) st = read_entries(file, "weights", en, np, s->param, f);
    if (st == ML_OK) st = read_entries(file, "buffers", be, nb, s->buf, f);
    if (st == ML_OK) st = read_entries(file, "optimizer/m", en, np, s->m, f);
    if (st == ML_OK && adam) st = read_entries(file, "optimizer/v", en, np, s->v, f);
    ml_free(en);
    for (int i = 0; i < v->nvars && st == ML_OK; i++) {
        const StateVar *r = &v->vars[i];
        if (absent[i]) {
            memcpy(s->var[i], r->ptr, state_type_size(r->type) * (size_t)state_var_count(r));
            continue;
        }
        hid_t ft, mt;
        int owned;
        hsize_t d[2];
        var_dims(r, d);
        if ((st = var_types(r->type, &ft, &mt, &owned)) != ML_OK) break;
        st = h5u_read(file, r->path, mt, r->rank, d, s->var[i], f, r->hint ? r->hint : NULL);
        if (owned) h5u_close(mt);
        else if (st == ML_OK)
            st = check_crc_path(file, r->path, s->var[i], state_type_size(r->type) * (size_t)state_var_count(r), f);
    }
    ml_free(absent);
    if (st != ML_OK) return st;
    /* what the values must satisfy (a damaged index must never reach the data source) */
    if (v->check && v->check(v->owner, s->var) != ML_OK) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", ml_last_error());
        return ml_fail(ML_ERR_FORMAT, "%s: %s", f, msg);
    }
    return ML_OK;
}

static ml_status open_ckpt_checked(const char *path, hid_t *out) {
    *out = -1;
    if (access(path, R_OK) != 0) return ml_fail(ML_ERR_IO, "%s: %s", path, strerror(errno));
    if (H5Fis_hdf5(path) <= 0) {
        H5Eclear2(H5E_DEFAULT);
        return ml_fail(ML_ERR_FORMAT, "%s: not an HDF5 file (damaged?)", path);
    }
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    if (fapl < 0 || H5Pset_fclose_degree(fapl, H5F_CLOSE_STRONG) < 0) {
        h5u_close(fapl);
        return h5u_fail(ML_ERR_IO, path, "", "cannot make file access list");
    }
    *out = H5Fopen(path, H5F_ACC_RDONLY, fapl);
    ml_status st = ML_OK;
    if (*out < 0) st = h5u_fail(ML_ERR_FORMAT, path, "", "cannot open (damaged or truncated?)");
    H5Pclose(fapl);
    return st;
}

ml_status ckpt_read(const char *path, StateView *v) {
    h5u_quiet();
    hid_t file;
    ml_status st = open_ckpt_checked(path, &file);
    if (st != ML_OK) return st;
    Stage s;
    memset(&s, 0, sizeof s);
    st = read_all(file, v, &s, path);
    H5Fclose(file);
    H5Eclear2(H5E_DEFAULT);
    if (st != ML_OK) {
        stage_free(&s);
        return st;
    }
    /* commit */
    Model *m = v->model;
    memcpy(m->param, s.param, sizeof(float) * m->n_param);
    if (m->n_buf) memcpy(m->buf, s.buf, sizeof(float) * m->n_buf);
    memcpy(v->opt_m, s.m, sizeof(float) * m->n_param);
    if (v->opt_v) memcpy(v->opt_v, s.v, sizeof(float) * m->n_param);
    for (int i = 0; i < v->nvars; i++)
        memcpy(v->vars[i].ptr, s.var[i], state_type_size(v->vars[i].type) * (size_t)state_var_count(&v->vars[i]));
    if (v->restored) v->restored(v->owner);
    stage_free(&s);
    return ML_OK;
}

/* ------------------------------------------------------------------ validation */

typedef struct {
    const char *path;
    ml_status st;
    void *scratch;
    size_t cap;
} Visit;

static herr_t visit_cb(hid_t g, const char *name, const H5L_info_t *info, void *data) {
    Visit *v = data;
    if (info->type != H5L_TYPE_HARD) return 0;
    hid_t o = H5Oopen(g, name, H5P_DEFAULT);
    if (o < 0) {
        v->st = h5u_fail(ML_ERR_FORMAT, v->path, name, "cannot open object");
        return -1;
    }
    if (H5Iget_type(o) != H5I_DATASET) {
        H5Oclose(o);
        return 0;
    }
    hid_t ft = H5Dget_type(o), sp = H5Dget_space(o), mt = -1;
    herr_t ret = 0;
    const hssize_t np = sp >= 0 ? H5Sget_simple_extent_npoints(sp) : -1;
    if (ft < 0 || np < 0 || (mt = H5Tget_native_type(ft, H5T_DIR_ASCEND)) < 0) {
        v->st = h5u_fail(ML_ERR_FORMAT, v->path, name, "unreadable dataset header");
        ret = -1;
    } else {
        const size_t need = H5Tget_size(mt) * (size_t)np;
        if (need > v->cap) {
            ml_free(v->scratch);
            v->scratch = ml_alloc(need);
            v->cap = v->scratch ? need : 0;
        }
        if (need > 0 && !v->scratch) {
            v->st = ml_fail(ML_ERR_NOMEM, "out of memory validating %s", v->path);
            ret = -1;
        } else if (need > 0 && H5Dread(o, mt, H5S_ALL, H5S_ALL, H5P_DEFAULT, v->scratch) < 0) {
            v->st = h5u_fail(ML_ERR_FORMAT, v->path, name, "cannot read dataset");
            ret = -1;
        } else if (H5Tget_class(ft) != H5T_COMPOUND &&
                   (v->st = check_crc(o, name, v->scratch, need, v->path)) != ML_OK) {
            ret = -1;
        }
    }
    h5u_close(mt);
    h5u_close(ft);
    h5u_close(sp);
    H5Oclose(o);
    return ret;
}

/* The whole validation, in this process: every dataset read, every checksum compared. */
static ml_status validate_here(const char *path, long *step) {
    h5u_quiet();
    hid_t file;
    ml_status st = open_ckpt_checked(path, &file);
    if (st != ML_OK) return st;
    int64_t fv = 0, s = 0;
    st = h5u_read_attr_i64(file, "format_version", &fv, path);
    if (st == ML_OK && (fv < 1 || fv > SESSION_FORMAT_VERSION))
        st = ml_fail(ML_ERR_FORMAT, "%s: format_version %lld, this moelab reads 1..%d (" NEWER_NOTE ")", path,
                     (long long)fv, SESSION_FORMAT_VERSION);
    if (st == ML_OK) st = h5u_read_attr_i64(file, "step", &s, path);
    static const char *required[] = {
        "/weights",           "/buffers",      "/optimizer/m",  "/optimizer/t", "/rng/init",
        "/rng/data",          "/rng/noise",    "/rng/aug",      "/schedule/lr", "/schedule/lr_override",
        "/schedule/tau_base", "/trainer/step", "/trainer/perm", "/trainer/pos"};
    for (size_t i = 0; st == ML_OK && i < sizeof required / sizeof *required; i++)
        if (H5Lexists(file, required[i], H5P_DEFAULT) <= 0)
            st = ml_fail(ML_ERR_FORMAT, "%s: %s is missing", path, required[i]);
    if (st == ML_OK) {
        Visit v = {path, ML_OK, NULL, 0};
        if (H5Lvisit(file, H5_INDEX_NAME, H5_ITER_NATIVE, visit_cb, &v) < 0)
            st = v.st != ML_OK ? v.st : h5u_fail(ML_ERR_FORMAT, path, "", "cannot walk the file");
        ml_free(v.scratch);
    }
    H5Fclose(file);
    H5Eclear2(H5E_DEFAULT);
    if (st == ML_OK && step) *step = (long)s;
    return st;
}

/* ---- validation in a child process
 *
 * libhdf5 1.10 can crash or hang on corrupted metadata (tests/fuzz_session.c: a heap overflow in
 * the attribute decoder behind H5Aexists, reached by a checkpoint whose `crc32` attribute message
 * claims a longer dataspace than it holds). ckpt_validate therefore makes its whole walk (every
 * object, dataset and attribute a restore touches, all the data) in a forked child
 * (ml_run_isolated): a crash or hang there becomes a "damaged" error and this process never reads
 * the file; after the child's OK only the root attributes are read here. Resume and the sweep's
 * checkpoint search validate before anything else (search_ckpts), so ckpt_read and
 * ckpt_read_attr only meet files the child has read cleanly. A fork costs ~1 ms (README,
 * Fuzzing) against the full read of the checkpoint that validation is anyway. */
#define CKPT_PROBE_TIMEOUT_MS 300000 /* the child reads all the data: a large checkpoint on slow storage */

/* Runs in the child. Fault injection for the tests (tests/test_sessions.c):
 * MOELAB_FAULT_CKPT_PROBE=segv (or 1) makes the validating child crash with SIGSEGV, "abort"
 * abort(), "hang" sleep past the timeout (MOELAB_CKPT_PROBE_TIMEOUT_MS shortens it). */
static ml_status validate_child(void *arg) {
    const char *fault = getenv("MOELAB_FAULT_CKPT_PROBE");
    if (fault && *fault) {
        if (strcmp(fault, "abort") == 0) abort();
        if (strcmp(fault, "hang") == 0)
            for (;;) pause();
        raise(SIGSEGV);
    }
    return validate_here(arg, NULL);
}

ml_status ckpt_validate(const char *path, long *step) {
    h5u_quiet();
    if (access(path, R_OK) != 0) return ml_fail(ML_ERR_IO, "%s: %s", path, strerror(errno));
    int timeout_ms = CKPT_PROBE_TIMEOUT_MS;
    const char *t = getenv("MOELAB_CKPT_PROBE_TIMEOUT_MS");
    if (t && atoi(t) > 0) timeout_ms = atoi(t);
    MlIsolated r;
    if (ml_run_isolated(validate_child, (void *)path, timeout_ms, &r) == ML_ISOLATED_NO_CHILD) {
        ml_log(1, "%s: cannot check the checkpoint in a child process (%s): validating it unprotected", path, r.msg);
        return validate_here(path, step);
    }
    ml_status vs = session_isolated_status(&r, path, timeout_ms); /* the wording of every protected read */
    if (vs != ML_OK) return vs;
    if (!step) return ML_OK;
    /* the child read it cleanly: its step, here (the same root attributes the child read) */
    hid_t file;
    ml_status st = open_ckpt_checked(path, &file);
    if (st != ML_OK) return st;
    int64_t s = 0;
    st = h5u_read_attr_i64(file, "step", &s, path);
    H5Fclose(file);
    H5Eclear2(H5E_DEFAULT);
    if (st == ML_OK) *step = (long)s;
    return st;
}

/* 1 if path is (still) a regular file: opened with O_NONBLOCK | O_NOFOLLOW, so a FIFO or device
 * swapped in after the listing neither blocks nor is followed, and checked with fstat. */
static int still_regular(const char *path) {
    const int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return 0;
    struct stat sb;
    const int ok = fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode);
    close(fd);
    return ok;
}

static ml_status search_ckpts(const char *dir, StateView *v, const char *session_id, char *path, size_t n, char *report,
                              size_t rn);

ml_status ckpt_find_latest(const char *dir, char *path, size_t n, char *report, size_t rn) {
    return search_ckpts(dir, NULL, NULL, path, n, report, rn);
}

ml_status ckpt_read_attr(const char *path, const char *name, char *buf, size_t n) {
    h5u_quiet();
    hid_t file;
    ml_status st = open_ckpt_checked(path, &file);
    if (st != ML_OK) return st;
    st = h5u_read_attr_str(file, name, buf, n, path);
    H5Fclose(file);
    H5Eclear2(H5E_DEFAULT);
    return st;
}

/* ------------------------------------------------------------------ resume: the newest checkpoint that is whole and ours */

static void add_report(char *report, size_t rn, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void add_report(char *report, size_t rn, const char *fmt, ...) {
    if (!report || !rn) return;
    const size_t used = strlen(report);
    if (used + 3 >= rn) return;
    if (used) snprintf(report + used, rn - used, "; ");
    const size_t u2 = strlen(report);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(report + u2, rn - u2, fmt, ap);
    va_end(ap);
}

/* Why checkpoint `p` is not this run's (NULL if it is): another session's id, or another seed.
 * (Another model or data set fails the shape checks, another length the position checks.)
 * Checkpoints from before session ids carry neither and are judged by those checks alone. */
static const char *not_ours(const char *p, const StateView *v, const char *session_id, char *why, size_t wn) {
    char id[64] = "";
    if (ckpt_read_attr(p, "session_id", id, sizeof id) != ML_OK) id[0] = 0;
    if (id[0] && session_id && session_id[0] && strcmp(id, session_id)) {
        snprintf(why, wn, "belongs to another run (session id %.12s..., this session is %.12s...)", id, session_id);
        return why;
    }
    hid_t file;
    if (!id[0] || open_ckpt_checked(p, &file) != ML_OK) return NULL;
    uint64_t seed = 0;
    const int have = H5Aexists(file, "seed") > 0 && h5u_read_attr_u64(file, "seed", &seed, p) == ML_OK;
    H5Fclose(file);
    H5Eclear2(H5E_DEFAULT);
    if (have && seed != v->cfg->seed) {
        snprintf(why, wn, "was written by a run with seed %llu, this run has seed %llu", (unsigned long long)seed,
                 (unsigned long long)v->cfg->seed);
        return why;
    }
    return NULL;
}

ml_status ckpt_restore_latest(const char *dir, StateView *v, const char *session_id, char *path, size_t n, char *report,
                              size_t rn) {
    return search_ckpts(dir, v, session_id, path, n, report, rn);
}

/* The newest checkpoint of dir that is a regular file and validates; with v, also this run's and
 * restored into v. Each one skipped is named in report with the reason. */
static ml_status search_ckpts(const char *dir, StateView *v, const char *session_id, char *path, size_t n, char *report,
                              size_t rn) {
    h5u_quiet();
    if (report && rn) report[0] = 0;
    if (n) path[0] = 0;
    CkptName *c;
    int cnt;
    ml_status st = list_ckpts_report(dir, &c, &cnt, report, rn); /* names the non-regular ones */
    if (st != ML_OK) return st;
    for (int i = 0; i < cnt; i++) {
        char p[H5U_PATH_MAX], why[256];
        if (h5u_path(p, sizeof p, dir, c[i].name) != ML_OK) continue;
        if (!still_regular(p)) {
            add_report(report, rn, "%s is not a regular file and was skipped", c[i].name);
            continue;
        }
        long inside = -1;
        if (ckpt_validate(p, &inside) != ML_OK) {
            const int newer = strstr(ml_last_error(), NEWER_NOTE) != NULL; /* not damage: a later format */
            add_report(report, rn,
                       newer ? "%s is a newer format and was skipped: %s" : "%s is damaged and was skipped: %s",
                       c[i].name, ml_last_error());
            continue;
        }
        if (inside != c[i].step) { /* a copy or a rename: its name would make a resume skip or repeat steps */
            add_report(report, rn,
                       "%s holds step %ld, not %ld (copied or renamed?) and was skipped: rename it ckpt-%ld.h5 to use it",
                       c[i].name, inside, c[i].step, inside);
            continue;
        }
        const char *bad = v ? not_ours(p, v, session_id, why, sizeof why) : NULL;
        if (bad) {
            add_report(report, rn, "%s %s and was skipped", c[i].name, bad);
            continue;
        }
        if (v && ckpt_read(p, v) != ML_OK) {
            add_report(report, rn, "%s cannot be restored and was skipped: %s", c[i].name, ml_last_error());
            continue;
        }
        ml_free(c);
        if (snprintf(path, n, "%s", p) >= (int)n) return ml_fail(ML_ERR_ARG, "%s: path too long", p);
        return ML_OK;
    }
    ml_free(c);
    if (cnt == 0) return ml_fail(ML_ERR_IO, "%s: no checkpoint (ckpt-<step>.h5) to resume from", dir);
    return ml_fail(ML_ERR_IO, "%s: none of the %d checkpoints %s", dir, cnt, v ? "can be restored" : "is valid");
}
