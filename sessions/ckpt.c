/* ckpt.c — crash-safe checkpoints DIR/ckpt-<step>.h5 holding everything trainer_step uses, so
 * that a fresh trainer_init + ckpt_read continues bit for bit: weights (PyTorch state_dict names
 * and shapes, MoE experts split per expert), BN running statistics, optimiser state, RNG states,
 * schedules, data order and position, the epoch's running sums, the MoE utility bias and the
 * routing window. Written as .tmp, fsync'd, renamed, directory fsync'd; old ones pruned. */
#define _POSIX_C_SOURCE 200809L

#include "session.h"
#include "h5util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

_Static_assert(sizeof(TauKind) == sizeof(int), "enums are stored as int");
_Static_assert(sizeof(LrKind) == sizeof(int), "enums are stored as int");

#define SHAPE_HINT "(the checkpoint is for a different model or dataset: compare --width, --backbone, " \
                   "--head, --experts, --k, --hidden, --batch and the dataset)"

/* ------------------------------------------------------------------ tensor entries */

typedef struct {
    char name[112];  /* state_dict key */
    long off, n;     /* floats in the model's flat buffer */
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

/* The trainer's RNG streams: init, data order, selection noise, augmentation. */
#define CKPT_NRNG 4
static const char *const ckpt_rng_names[CKPT_NRNG] = {"/rng/init", "/rng/data", "/rng/noise", "/rng/aug"};

/* Live-settable MoE knobs saved under /moe (order of the knobs[] arrays below). */
static const char *const ckpt_knob_names[5] = {"cf", "alpha", "beta", "noise", "bias_rate"};

static ml_status write_f32(hid_t loc, const char *path, const float *v, int ndim, const hsize_t *dims, const char *f) {
    return h5u_write(loc, path, H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, ndim, dims, v, f);
}

static ml_status write_i64(hid_t loc, const char *path, int64_t v, const char *f) {
    return h5u_write(loc, path, H5T_STD_I64LE, H5T_NATIVE_INT64, 0, NULL, &v, f);
}

static ml_status write_i32(hid_t loc, const char *path, int32_t v, const char *f) {
    return h5u_write(loc, path, H5T_STD_I32LE, H5T_NATIVE_INT32, 0, NULL, &v, f);
}

static ml_status write_f64(hid_t loc, const char *path, double v, const char *f) {
    return h5u_write(loc, path, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, 0, NULL, &v, f);
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

static ml_status write_all(hid_t file, const Trainer *t, const char *f) {
    const Model *m = &t->model;
    const int moe = t->cfg.model.head.kind != HEAD_DENSE;
    const int E = t->cfg.model.head.E;
    Entry *en = ml_alloc(sizeof(Entry) * MAX_ENTRIES);
    char *json = ml_alloc(65536);
    char created[40];
    ml_status st = (!en || !json) ? ml_fail(ML_ERR_NOMEM, "out of memory") : ML_OK;
    h5u_iso_time(created, sizeof created);
    if (st == ML_OK) st = session_config_json(&t->cfg, t->ds->name, json, 65536);
    if (st == ML_OK) st = h5u_attr_i64(file, "format_version", SESSION_FORMAT_VERSION, f);
    if (st == ML_OK) st = h5u_attr_str(file, "kind", "moelab checkpoint", f);
    if (st == ML_OK) st = h5u_attr_str(file, "moelab_version", MOELAB_VERSION, f);
    if (st == ML_OK) st = h5u_attr_str(file, "created", created, f);
    if (st == ML_OK) st = h5u_attr_str(file, "config_json", json, f);
    if (st == ML_OK) st = h5u_attr_i64(file, "step", t->step, f);
    if (st == ML_OK) st = h5u_attr_i64(file, "epoch", t->epoch, f);

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
    /* optimiser: same names and shapes as the weights */
    if (st == ML_OK) st = write_entries(file, "optimizer/m", en, np, t->opt.m, f);
    if (st == ML_OK && t->opt.v) st = write_entries(file, "optimizer/v", en, np, t->opt.v, f);
    if (st == ML_OK) st = write_i64(file, "/optimizer/t", t->opt.t, f);
    if (st == ML_OK) {
        hid_t g = H5Gopen2(file, "/optimizer", H5P_DEFAULT);
        if (g < 0) st = h5u_fail(ML_ERR_IO, f, "/optimizer", "cannot open group");
        else st = h5u_attr_str(g, "kind", optim_kind_name(t->opt.cfg.kind), f);
        h5u_close(g);
    }
    /* RNG states */
    const hsize_t four = 4;
    const Rng *rngs[CKPT_NRNG] = {&t->rng_init, &t->rng_data, &t->rng_noise, &t->rng_aug};
    for (int i = 0; i < CKPT_NRNG && st == ML_OK; i++)
        st = h5u_write(file, ckpt_rng_names[i], H5T_STD_U64LE, H5T_NATIVE_UINT64, 1, &four, rngs[i]->s, f);
    /* schedules */
    hid_t tt = tau_type(), lt = lr_type();
    if (st == ML_OK && (tt < 0 || lt < 0)) st = h5u_fail(ML_ERR_IO, f, "/schedule", "cannot make types");
    if (st == ML_OK) st = h5u_write(file, "/schedule/tau_base", tt, tt, 0, NULL, &t->tau.base, f);
    if (st == ML_OK) st = h5u_write(file, "/schedule/tau_repl", tt, tt, 0, NULL, &t->tau.repl, f);
    if (st == ML_OK) st = write_i32(file, "/schedule/tau_has_override", t->tau.has_override, f);
    if (st == ML_OK)
        st = h5u_write(file, "/schedule/tau_override", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, 0, NULL, &t->tau.override_tau, f);
    if (st == ML_OK) st = write_i64(file, "/schedule/tau_override_step", t->tau.override_step, f);
    if (st == ML_OK) st = write_i32(file, "/schedule/tau_has_replacement", t->tau.has_replacement, f);
    if (st == ML_OK) st = h5u_write(file, "/schedule/lr", lt, lt, 0, NULL, &t->cfg.lr, f);
    if (st == ML_OK)
        st = h5u_write(file, "/schedule/lr_override", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, 0, NULL, &t->lr_override, f);
    h5u_close(tt);
    h5u_close(lt);
    /* trainer position */
    if (st == ML_OK) st = write_i64(file, "/trainer/step", t->step, f);
    if (st == ML_OK) st = write_i32(file, "/trainer/epoch", t->epoch, f);
    if (st == ML_OK) st = write_i32(file, "/trainer/pos", t->pos, f);
    if (st == ML_OK) st = write_i64(file, "/trainer/steps_per_epoch", t->steps_per_epoch, f);
    if (st == ML_OK) st = write_i64(file, "/trainer/total_steps", t->total_steps, f);
    if (st == ML_OK) {
        const hsize_t n = (hsize_t)t->ds->train.n;
        st = h5u_write(file, "/trainer/perm", H5T_STD_I32LE, H5T_NATIVE_INT32, 1, &n, t->perm, f);
    }
    if (st == ML_OK) st = write_f64(file, "/trainer/ep_loss", t->ep_loss, f);
    if (st == ML_OK) st = write_f64(file, "/trainer/ep_acc", t->ep_acc, f);
    if (st == ML_OK) st = write_i64(file, "/trainer/ep_batches", t->ep_batches, f);
    if (st == ML_OK) st = write_f64(file, "/trainer/ep_drop", t->ep_drop, f);
    if (st == ML_OK) st = write_f64(file, "/trainer/ep_maxvio", t->ep_maxvio, f);
    if (st == ML_OK) st = write_f64(file, "/trainer/ep_rho", t->ep_rho, f);
    if (moe && st == ML_OK) {
        const hsize_t e = (hsize_t)E;
        st = write_f32(file, "/moe/bias", m->moe.bias, 1, &e, f);
        /* head knobs the `set` command changes while training (trainer_apply) */
        const MoeConfig *hc = &m->moe.cfg;
        const float knobs[5] = {hc->cf, hc->alpha, hc->beta, hc->noise, hc->bias_rate};
        for (int i = 0; i < 5 && st == ML_OK; i++) {
            char kp[32];
            snprintf(kp, sizeof kp, "/moe/%s", ckpt_knob_names[i]);
            st = h5u_write(file, kp, H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, 0, NULL, &knobs[i], f);
        }
        const RouteWin *w = &t->win;
        const hsize_t rd[2] = {(hsize_t)w->cfg.window, (hsize_t)E};
        int64_t sum[MOE_MAX_EXPERTS], zr[MOE_MAX_EXPERTS];
        for (int i = 0; i < E; i++) { sum[i] = w->sum[i]; zr[i] = w->zero_run[i]; }
        if (st == ML_OK) st = h5u_write(file, "/trainer/routewin/ring", H5T_STD_I32LE, H5T_NATIVE_INT, 2, rd, w->ring, f);
        if (st == ML_OK) st = write_i32(file, "/trainer/routewin/n", w->n, f);
        if (st == ML_OK) st = write_i32(file, "/trainer/routewin/head", w->head, f);
        if (st == ML_OK) st = write_i64(file, "/trainer/routewin/pushed", w->pushed, f);
        if (st == ML_OK) st = h5u_write(file, "/trainer/routewin/sum", H5T_STD_I64LE, H5T_NATIVE_INT64, 1, &e, sum, f);
        if (st == ML_OK) st = h5u_write(file, "/trainer/routewin/zero_run", H5T_STD_I64LE, H5T_NATIVE_INT64, 1, &e, zr, f);
        const hsize_t wn = (hsize_t)w->cfg.window;
        if (st == ML_OK) st = h5u_write(file, "/trainer/routewin/ent_ring", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, 1, &wn, w->ent_ring, f);
        if (st == ML_OK) st = h5u_write(file, "/trainer/routewin/share_ring", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, 1, &wn, w->share_ring, f);
        if (st == ML_OK) st = write_f64(file, "/trainer/routewin/share_sum", w->share_sum, f);
        if (st == ML_OK) st = write_f64(file, "/trainer/routewin/ent_sum", w->ent_sum, f);
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

/* Checkpoints of dir, newest first, into *out (ml_alloc'd). */
static ml_status list_ckpts(const char *dir, CkptName **out, int *n) {
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
        if (cnt == cap) {
            CkptName *nv = ml_alloc(sizeof *v * (size_t)cap * 2);
            if (nv) memcpy(nv, v, sizeof *v * (size_t)cap);
            ml_free(v);
            v = nv;
            cap *= 2;
            if (!v) break;
        }
        v[cnt].step = step;
        snprintf(v[cnt].name, sizeof v[cnt].name, "%s", de->d_name);
        cnt++;
    }
    closedir(d);
    if (!v) return ml_fail(ML_ERR_NOMEM, "out of memory listing %s", dir);
    qsort(v, (size_t)cnt, sizeof *v, cmp_desc);
    *out = v;
    *n = cnt;
    return ML_OK;
}

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
static ml_status build_image(const Trainer *t, const char *name, void **image, size_t *size) {
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

ml_status ckpt_write(const char *dir, const Trainer *t, int keep) {
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
    }
    return st;
}

static ml_status read_scalar(hid_t file, const char *path, hid_t mt, void *v, const char *f) {
    return h5u_read(file, path, mt, 0, NULL, v, f, NULL);
}

/* Everything read from a checkpoint before it is committed to the trainer. */
typedef struct {
    float *param, *buf, *m, *v;
    int32_t *perm;
    int *ring;
    double *ent_ring, ent_sum;
    double *share_ring, share_sum;
    Rng rng[CKPT_NRNG];
    TauPlan tau;
    LrSchedule lr;
    int64_t opt_t, step, ep_batches, spe, pushed, sum[MOE_MAX_EXPERTS], zero_run[MOE_MAX_EXPERTS];
    int32_t epoch, pos, has_override, has_repl, rw_n, rw_head;
    double ep_loss, ep_acc, ep_drop, ep_maxvio, ep_rho;
    float bias[MOE_MAX_EXPERTS];
    float lr_override, knobs[5];
} Stage;

static void stage_free(Stage *s) {
    ml_free(s->param);
    ml_free(s->buf);
    ml_free(s->m);
    ml_free(s->v);
    ml_free(s->perm);
    ml_free(s->ring);
    ml_free(s->ent_ring);
    ml_free(s->share_ring);
}

static ml_status read_all(hid_t file, const Trainer *t, Stage *s, const char *f) {
    const Model *m = &t->model;
    const int moe = t->cfg.model.head.kind != HEAD_DENSE;
    const int E = t->cfg.model.head.E;
    const int ntrain = t->ds->train.n;
    int64_t fv = 0;
    ml_status st = h5u_read_attr_i64(file, "format_version", &fv, f);
    if (st != ML_OK) return st;
    if (fv != SESSION_FORMAT_VERSION)
        return ml_fail(ML_ERR_FORMAT, "%s: format_version %lld, this moelab reads %d", f, (long long)fv, SESSION_FORMAT_VERSION);
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
    const hsize_t nperm = (hsize_t)ntrain;
    if (st == ML_OK)
        st = h5u_check_shape(file, "/trainer/perm", 1, &nperm, f, "(the checkpoint is for a different training set)");
    if (st == ML_OK && moe) {
        const hsize_t e = (hsize_t)E, rd[2] = {(hsize_t)t->win.cfg.window, (hsize_t)E};
        st = h5u_check_shape(file, "/moe/bias", 1, &e, f, SHAPE_HINT);
        if (st == ML_OK) st = h5u_check_shape(file, "/trainer/routewin/ring", 2, rd, f, "(compare --route-window)");
    }
    if (st == ML_OK && !moe && H5Lexists(file, "/moe", H5P_DEFAULT) > 0)
        st = ml_fail(ML_ERR_FORMAT, "%s: /moe exists: the checkpoint is for a MoE head, this model has a dense head", f);
    H5Eclear2(H5E_DEFAULT);
    const int adam = t->opt.v != NULL;
    if (st == ML_OK) {
        const htri_t hv = H5Lexists(file, "/optimizer/v", H5P_DEFAULT);
        H5Eclear2(H5E_DEFAULT);
        if ((hv > 0) != adam)
            st = ml_fail(ML_ERR_FORMAT, "%s: the checkpoint's optimiser %s, this trainer uses %s", f,
                         hv > 0 ? "is adamw" : "has no second moment (sgd)", optim_kind_name(t->opt.cfg.kind));
    }
    /* then the data, into the stage */
    if (st == ML_OK) {
        s->param = ml_alloc(sizeof(float) * m->n_param);
        s->buf = ml_alloc(sizeof(float) * (m->n_buf ? m->n_buf : 1));
        s->m = ml_alloc(sizeof(float) * m->n_param);
        s->v = adam ? ml_alloc(sizeof(float) * m->n_param) : NULL;
        s->perm = ml_alloc(sizeof(int32_t) * (size_t)(ntrain > 0 ? ntrain : 1));
        s->ring = moe ? ml_alloc(sizeof(int) * (size_t)t->win.cfg.window * (size_t)E) : NULL;
        s->ent_ring = moe ? ml_alloc(sizeof(double) * (size_t)t->win.cfg.window) : NULL;
        s->share_ring = moe ? ml_alloc(sizeof(double) * (size_t)t->win.cfg.window) : NULL;
        if (!s->param || !s->buf || !s->m || (adam && !s->v) || !s->perm || (moe && (!s->ring || !s->ent_ring || !s->share_ring)))
            st = ml_fail(ML_ERR_NOMEM, "out of memory reading %s", f);
    }
    if (st == ML_OK) st = read_entries(file, "weights", en, np, s->param, f);
    if (st == ML_OK) st = read_entries(file, "buffers", be, nb, s->buf, f);
    if (st == ML_OK) st = read_entries(file, "optimizer/m", en, np, s->m, f);
    if (st == ML_OK && adam) st = read_entries(file, "optimizer/v", en, np, s->v, f);
    ml_free(en);
    if (st == ML_OK) st = read_scalar(file, "/optimizer/t", H5T_NATIVE_INT64, &s->opt_t, f);
    const hsize_t four = 4;
    for (int i = 0; i < CKPT_NRNG && st == ML_OK; i++) {
        st = h5u_read(file, ckpt_rng_names[i], H5T_NATIVE_UINT64, 1, &four, s->rng[i].s, f, NULL);
        if (st == ML_OK && (s->rng[i].s[0] | s->rng[i].s[1] | s->rng[i].s[2] | s->rng[i].s[3]) == 0)
            st = ml_fail(ML_ERR_FORMAT, "%s: %s is all zero", f, ckpt_rng_names[i]);
    }
    hid_t tt = tau_type(), lt = lr_type();
    if (st == ML_OK && (tt < 0 || lt < 0)) st = h5u_fail(ML_ERR_IO, f, "/schedule", "cannot make types");
    if (st == ML_OK) st = read_scalar(file, "/schedule/tau_base", tt, &s->tau.base, f);
    if (st == ML_OK) st = read_scalar(file, "/schedule/tau_repl", tt, &s->tau.repl, f);
    if (st == ML_OK) st = read_scalar(file, "/schedule/tau_has_override", H5T_NATIVE_INT32, &s->has_override, f);
    if (st == ML_OK) st = read_scalar(file, "/schedule/tau_override", H5T_NATIVE_FLOAT, &s->tau.override_tau, f);
    if (st == ML_OK) st = read_scalar(file, "/schedule/tau_override_step", H5T_NATIVE_LONG, &s->tau.override_step, f);
    if (st == ML_OK) st = read_scalar(file, "/schedule/tau_has_replacement", H5T_NATIVE_INT32, &s->has_repl, f);
    if (st == ML_OK) st = read_scalar(file, "/schedule/lr", lt, &s->lr, f);
    if (st == ML_OK) st = read_scalar(file, "/schedule/lr_override", H5T_NATIVE_FLOAT, &s->lr_override, f);
    h5u_close(tt);
    h5u_close(lt);
    if (st == ML_OK) st = read_scalar(file, "/trainer/step", H5T_NATIVE_INT64, &s->step, f);
    if (st == ML_OK) st = read_scalar(file, "/trainer/epoch", H5T_NATIVE_INT32, &s->epoch, f);
    if (st == ML_OK) st = read_scalar(file, "/trainer/pos", H5T_NATIVE_INT32, &s->pos, f);
    if (st == ML_OK) st = read_scalar(file, "/trainer/steps_per_epoch", H5T_NATIVE_INT64, &s->spe, f);
    if (st == ML_OK) st = h5u_read(file, "/trainer/perm", H5T_NATIVE_INT32, 1, &nperm, s->perm, f, NULL);
    if (st == ML_OK) st = read_scalar(file, "/trainer/ep_loss", H5T_NATIVE_DOUBLE, &s->ep_loss, f);
    if (st == ML_OK) st = read_scalar(file, "/trainer/ep_acc", H5T_NATIVE_DOUBLE, &s->ep_acc, f);
    if (st == ML_OK) st = read_scalar(file, "/trainer/ep_batches", H5T_NATIVE_INT64, &s->ep_batches, f);
    if (st == ML_OK) st = read_scalar(file, "/trainer/ep_drop", H5T_NATIVE_DOUBLE, &s->ep_drop, f);
    if (st == ML_OK) st = read_scalar(file, "/trainer/ep_maxvio", H5T_NATIVE_DOUBLE, &s->ep_maxvio, f);
    if (st == ML_OK) st = read_scalar(file, "/trainer/ep_rho", H5T_NATIVE_DOUBLE, &s->ep_rho, f);
    if (st == ML_OK && moe) {
        const hsize_t e = (hsize_t)E, rd[2] = {(hsize_t)t->win.cfg.window, (hsize_t)E};
        st = h5u_read(file, "/moe/bias", H5T_NATIVE_FLOAT, 1, &e, s->bias, f, SHAPE_HINT);
        for (int i = 0; i < 5 && st == ML_OK; i++) {
            char kp[32];
            snprintf(kp, sizeof kp, "/moe/%s", ckpt_knob_names[i]);
            st = read_scalar(file, kp, H5T_NATIVE_FLOAT, &s->knobs[i], f);
        }
        if (st == ML_OK) st = h5u_read(file, "/trainer/routewin/ring", H5T_NATIVE_INT, 2, rd, s->ring, f, NULL);
        if (st == ML_OK) st = read_scalar(file, "/trainer/routewin/n", H5T_NATIVE_INT32, &s->rw_n, f);
        if (st == ML_OK) st = read_scalar(file, "/trainer/routewin/head", H5T_NATIVE_INT32, &s->rw_head, f);
        if (st == ML_OK) st = read_scalar(file, "/trainer/routewin/pushed", H5T_NATIVE_INT64, &s->pushed, f);
        if (st == ML_OK) st = h5u_read(file, "/trainer/routewin/sum", H5T_NATIVE_INT64, 1, &e, s->sum, f, NULL);
        if (st == ML_OK) st = h5u_read(file, "/trainer/routewin/zero_run", H5T_NATIVE_INT64, 1, &e, s->zero_run, f, NULL);
        const hsize_t wn = (hsize_t)t->win.cfg.window;
        if (st == ML_OK) st = h5u_read(file, "/trainer/routewin/ent_ring", H5T_NATIVE_DOUBLE, 1, &wn, s->ent_ring, f, NULL);
        if (st == ML_OK) st = h5u_read(file, "/trainer/routewin/share_ring", H5T_NATIVE_DOUBLE, 1, &wn, s->share_ring, f, NULL);
        if (st == ML_OK) st = read_scalar(file, "/trainer/routewin/share_sum", H5T_NATIVE_DOUBLE, &s->share_sum, f);
        if (st == ML_OK) st = read_scalar(file, "/trainer/routewin/ent_sum", H5T_NATIVE_DOUBLE, &s->ent_sum, f);
    }
    if (st != ML_OK) return st;

    /* consistency: a damaged index must never reach batch_fill */
    if (s->spe != t->steps_per_epoch)
        return ml_fail(ML_ERR_FORMAT, "%s: %lld steps per epoch, this trainer has %ld (different --batch or dataset)",
                       f, (long long)s->spe, t->steps_per_epoch);
    if (s->epoch < 0 || s->pos < 0 || s->pos >= t->steps_per_epoch ||
        s->step != (int64_t)s->epoch * t->steps_per_epoch + s->pos)
        return ml_fail(ML_ERR_FORMAT, "%s: inconsistent position (step %lld, epoch %d, pos %d)", f,
                       (long long)s->step, s->epoch, s->pos);
    char *seen = ml_alloc((size_t)(ntrain > 0 ? ntrain : 1));
    if (!seen) return ml_fail(ML_ERR_NOMEM, "out of memory");
    for (int i = 0; i < ntrain && st == ML_OK; i++) {
        const int32_t v = s->perm[i];
        if (v < 0 || v >= ntrain || seen[v]) st = ml_fail(ML_ERR_FORMAT, "%s: /trainer/perm is not a permutation", f);
        else seen[v] = 1;
    }
    ml_free(seen);
    if (st == ML_OK && moe &&
        (s->rw_n < 0 || s->rw_n > t->win.cfg.window || s->rw_head < 0 || s->rw_head >= t->win.cfg.window))
        st = ml_fail(ML_ERR_FORMAT, "%s: inconsistent routing window (n %d, head %d)", f, s->rw_n, s->rw_head);
    s->tau.has_override = s->has_override;
    s->tau.has_replacement = s->has_repl;
    return st;
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

ml_status ckpt_read(const char *path, Trainer *t) {
    h5u_quiet();
    hid_t file;
    ml_status st = open_ckpt_checked(path, &file);
    if (st != ML_OK) return st;
    Stage s;
    memset(&s, 0, sizeof s);
    st = read_all(file, t, &s, path);
    H5Fclose(file);
    H5Eclear2(H5E_DEFAULT);
    if (st != ML_OK) {
        stage_free(&s);
        return st;
    }
    /* commit */
    Model *m = &t->model;
    const int moe = t->cfg.model.head.kind != HEAD_DENSE;
    const int E = t->cfg.model.head.E;
    memcpy(m->param, s.param, sizeof(float) * m->n_param);
    if (m->n_buf) memcpy(m->buf, s.buf, sizeof(float) * m->n_buf);
    memcpy(t->opt.m, s.m, sizeof(float) * m->n_param);
    if (t->opt.v) memcpy(t->opt.v, s.v, sizeof(float) * m->n_param);
    t->opt.t = s.opt_t;
    t->rng_init = s.rng[0];
    t->rng_data = s.rng[1];
    t->rng_noise = s.rng[2];
    t->rng_aug = s.rng[3];
    t->tau = s.tau;
    t->cfg.lr = s.lr;
    t->lr_override = s.lr_override;
    t->step = s.step;
    t->epoch = s.epoch;
    t->pos = s.pos;
    memcpy(t->perm, s.perm, sizeof(int32_t) * (size_t)t->ds->train.n);
    t->ep_loss = s.ep_loss;
    t->ep_acc = s.ep_acc;
    t->ep_batches = s.ep_batches;
    t->ep_drop = s.ep_drop;
    t->ep_maxvio = s.ep_maxvio;
    t->ep_rho = s.ep_rho;
    if (moe) {
        memcpy(m->moe.bias, s.bias, sizeof(float) * E);
        /* as trainer_apply sets them: the head's live config and the trainer's copy */
        MoeConfig *hc = &m->moe.cfg, *tc = &t->cfg.model.head;
        hc->cf = tc->cf = s.knobs[0];
        hc->alpha = tc->alpha = s.knobs[1];
        hc->beta = tc->beta = s.knobs[2];
        hc->noise = tc->noise = s.knobs[3];
        hc->bias_rate = tc->bias_rate = s.knobs[4];
        RouteWin *w = &t->win;
        memcpy(w->ring, s.ring, sizeof(int) * (size_t)w->cfg.window * E);
        w->n = s.rw_n;
        w->head = s.rw_head;
        w->pushed = s.pushed;
        for (int e = 0; e < E; e++) { w->sum[e] = s.sum[e]; w->zero_run[e] = s.zero_run[e]; }
        memcpy(w->ent_ring, s.ent_ring, sizeof(double) * (size_t)w->cfg.window);
        memcpy(w->share_ring, s.share_ring, sizeof(double) * (size_t)w->cfg.window);
        w->share_sum = s.share_sum;
        w->ent_sum = s.ent_sum;
    }
    t->rec_step = t->step;
    t->t_rec = t->t_epoch = ml_now();
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
    if (H5Iget_type(o) != H5I_DATASET) { H5Oclose(o); return 0; }
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
        }
    }
    h5u_close(mt);
    h5u_close(ft);
    h5u_close(sp);
    H5Oclose(o);
    return ret;
}

ml_status ckpt_validate(const char *path, long *step) {
    h5u_quiet();
    hid_t file;
    ml_status st = open_ckpt_checked(path, &file);
    if (st != ML_OK) return st;
    int64_t fv = 0, s = 0;
    st = h5u_read_attr_i64(file, "format_version", &fv, path);
    if (st == ML_OK && fv != SESSION_FORMAT_VERSION)
        st = ml_fail(ML_ERR_FORMAT, "%s: format_version %lld, this moelab reads %d", path, (long long)fv, SESSION_FORMAT_VERSION);
    if (st == ML_OK) st = h5u_read_attr_i64(file, "step", &s, path);
    static const char *required[] = {"/weights", "/buffers", "/optimizer/m", "/optimizer/t", "/rng/init", "/rng/data",
                                      "/rng/noise", "/rng/aug", "/schedule/lr", "/schedule/lr_override", "/schedule/tau_base", "/trainer/step",
                                      "/trainer/perm", "/trainer/pos"};
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

ml_status ckpt_find_latest(const char *dir, char *path, size_t n, char *report, size_t rn) {
    h5u_quiet();
    if (report && rn) report[0] = 0;
    if (n) path[0] = 0;
    CkptName *v;
    int cnt;
    ml_status st = list_ckpts(dir, &v, &cnt);
    if (st != ML_OK) return st;
    size_t used = 0;
    for (int i = 0; i < cnt; i++) {
        char p[H5U_PATH_MAX];
        if (h5u_path(p, sizeof p, dir, v[i].name) != ML_OK) continue;
        if (ckpt_validate(p, NULL) == ML_OK) {
            ml_free(v);
            if (snprintf(path, n, "%s", p) >= (int)n) return ml_fail(ML_ERR_ARG, "%s: path too long", p);
            return ML_OK;
        }
        if (report && rn > used + 1) {
            const int w = snprintf(report + used, rn - used, "%s%s is damaged and was skipped: %s", used ? "; " : "",
                                   v[i].name, ml_last_error());
            if (w > 0) used += (size_t)w < rn - used ? (size_t)w : rn - used - 1;
        }
    }
    ml_free(v);
    if (cnt == 0) return ml_fail(ML_ERR_IO, "%s: no checkpoint (ckpt-<step>.h5) to resume from", dir);
    return ml_fail(ML_ERR_IO, "%s: none of the %d checkpoints is valid", dir, cnt);
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
