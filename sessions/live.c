/* live.c — the live metrics file DIR/live.h5, written in HDF5 single-writer/multiple-reader
 * (SWMR) mode: creation of the whole schema before SWMR starts, buffered block appends of step
 * records, eval and event appends, flushing, status, closing, and reopening for a resume. */
#define _GNU_SOURCE /* memfd_create */

#include "session.h"
#include "h5util.h"
#include "schema.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

/* Every dataset the writer holds, in one table. */
enum {
    DS_STEP0 = 0,
    DS_SVEC0 = DS_STEP0 + SC_N,
    DS_EVAL0 = DS_SVEC0 + SV_N,
    DS_CLASS_EXPERT = DS_EVAL0 + EC_N,
    DS_TSNE_FEAT,
    DS_TSNE_EXPERT,
    DS_TSNE_LABEL,
    DS_DROP_CE, /* optional: sessions from before issue 29 lack it */
    DS_EVENTS,
    DS_STATUS,
    DS_BASE_N
};
/* format 2: the datasets of routed layer l, at LDS(l, LD_*) */
enum {
    LD_STEP0 = 0,
    LD_SVEC0 = LD_STEP0 + LSC_N,
    LD_EVAL0 = LD_SVEC0 + SV_N,
    LD_CLASS_EXPERT = LD_EVAL0 + LEC_N,
    LD_TSNE_FEAT,
    LD_TSNE_EXPERT,
    LD_TSNE_LABEL,
    LD_DROP_CE, /* optional: sessions from before issue 29 lack it */
    LD_N
};
#define DS_N (DS_BASE_N + REC_MAX_LAYERS * LD_N)
#define LDS(l, j) (DS_BASE_N + (l)*LD_N + (j))

#define STEP_CHUNK 512 /* rows per chunk of the /steps scalars (4 KiB) */
#define SVEC_CHUNK 256 /* rows per chunk of the /steps [T, E] datasets */
#define EVAL_CHUNK 64
#define EVENT_CHUNK 64

struct SessionLive {
    char path[H5U_PATH_MAX];
    hid_t file;
    hid_t ds[DS_N];        /* -1 when absent (dense head, no t-SNE sample) */
    char dirty[DS_N];      /* written since the last flush */
    char dspath[DS_N][64]; /* for messages */
    hid_t event_type, status_type;
    int E, K, tsne_n, feat_dim;
    hsize_t n_steps, n_evals, n_events; /* rows in the file */
    hsize_t had_steps, had_evals, had_events; /* a resume: the rows before it cut them (append_plan) */
    int nbuf;                           /* buffered step records */
    double sbuf[SC_N][SESSION_STEP_BLOCK];
    int32_t vbuf_i[2][SESSION_STEP_BLOCK * MOE_MAX_EXPERTS]; /* demand, kept */
    float vbuf_f[2][SESSION_STEP_BLOCK * MOE_MAX_EXPERTS];   /* mean_gate, bias */
    int fd;                                                  /* the file's descriptor for the space guard (-1: none) */
    hsize_t reserved;                                        /* bytes reserved with posix_fallocate */
    int failed;                                              /* sticky: the first write error disables the writer */
    int version;                                             /* format_version of the file (1: no /layers) */
    int nlayers;                                             /* routed layers with datasets under /layers */
    char lname[REC_MAX_LAYERS][REC_LAYER_NAME];
    int lE[REC_MAX_LAYERS], lfeat[REC_MAX_LAYERS]; /* experts, t-SNE feature width of each layer */
    int ltsne_n;                                   /* t-SNE samples of the layers (0: none stored) */
    double lsbuf[REC_MAX_LAYERS][LSC_N][SESSION_STEP_BLOCK];
    int32_t lvi[REC_MAX_LAYERS][2][SESSION_STEP_BLOCK * MOE_MAX_EXPERTS];
    float lvf[REC_MAX_LAYERS][2][SESSION_STEP_BLOCK * MOE_MAX_EXPERTS];
    int hdf5_broken; /* the error happened inside HDF5 (not the space guard) */
    ml_status fail_st;
    char fail_msg[1024];
};

/* ------------------------------------------------------------------ helpers */

static void live_init_table(struct SessionLive *p) {
    p->file = p->event_type = p->status_type = -1;
    p->fd = -1;
    for (int i = 0; i < DS_N; i++) p->ds[i] = -1;
    for (int c = 0; c < SC_N; c++) snprintf(p->dspath[DS_STEP0 + c], 64, "/steps/%s", sess_step_cols[c].name);
    for (int c = 0; c < SV_N; c++) snprintf(p->dspath[DS_SVEC0 + c], 64, "/steps/%s", sess_step_vecs[c].name);
    for (int c = 0; c < EC_N; c++) snprintf(p->dspath[DS_EVAL0 + c], 64, "/evals/%s", sess_eval_cols[c].name);
    snprintf(p->dspath[DS_CLASS_EXPERT], 64, "/evals/class_expert");
    snprintf(p->dspath[DS_TSNE_FEAT], 64, "/evals/tsne_features");
    snprintf(p->dspath[DS_TSNE_EXPERT], 64, "/evals/tsne_expert");
    snprintf(p->dspath[DS_TSNE_LABEL], 64, "/evals/tsne_label");
    snprintf(p->dspath[DS_DROP_CE], 64, "/evals/drop_class_expert");
    snprintf(p->dspath[DS_EVENTS], 64, "/events");
    snprintf(p->dspath[DS_STATUS], 64, "/status");
}

/* The dataset paths of the routed layers p->lname[0..nlayers). */
static void live_layer_paths(struct SessionLive *p) {
    for (int l = 0; l < p->nlayers; l++) {
        char n[REC_LAYER_NAME]; /* a copy: the paths are written into *p */
        memcpy(n, p->lname[l], sizeof n);
        n[sizeof n - 1] = 0;
        for (int c = 0; c < LSC_N; c++)
            snprintf(p->dspath[LDS(l, LD_STEP0 + c)], 64, "/layers/%s/steps/%s", n, sess_layer_step_cols[c].name);
        for (int c = 0; c < SV_N; c++)
            snprintf(p->dspath[LDS(l, LD_SVEC0 + c)], 64, "/layers/%s/steps/%s", n, sess_step_vecs[c].name);
        for (int c = 0; c < LEC_N; c++)
            snprintf(p->dspath[LDS(l, LD_EVAL0 + c)], 64, "/layers/%s/evals/%s", n, sess_layer_eval_cols[c].name);
        snprintf(p->dspath[LDS(l, LD_CLASS_EXPERT)], 64, "/layers/%s/evals/class_expert", n);
        snprintf(p->dspath[LDS(l, LD_TSNE_FEAT)], 64, "/layers/%s/evals/tsne_features", n);
        snprintf(p->dspath[LDS(l, LD_TSNE_EXPERT)], 64, "/layers/%s/evals/tsne_expert", n);
        snprintf(p->dspath[LDS(l, LD_TSNE_LABEL)], 64, "/layers/%s/evals/tsne_label", n);
        snprintf(p->dspath[LDS(l, LD_DROP_CE)], 64, "/layers/%s/evals/drop_class_expert", n);
    }
}

/* Space guard. HDF5 1.10.8 cannot recover from a write error inside a flush: the metadata cache
 * is left with its skip list enabled, every later flush or close of the file fails ("slist
 * already enabled?"), and the library's own close at process exit then crashes (null
 * dereference in H5F__close_cb). So HDF5 must never meet a full disk or a file size limit: before
 * every batch of writes the file is extended with posix_fallocate() to LIVE_MARGIN bytes past
 * HDF5's end of allocation (plus the batch's own size), in steps of LIVE_STEP. HDF5 only writes
 * below its end of allocation, so once that space is reserved its writes cannot fail for lack
 * of space; when the reservation fails, the writer stops before HDF5 writes anything and the
 * file still closes cleanly (the close truncates the unused reserve). */
#define LIVE_MARGIN ((hsize_t)1 << 20)
#define LIVE_STEP ((hsize_t)1 << 20)

static ml_status live_failed(struct SessionLive *p, ml_status st);

static ml_status live_reserve(struct SessionLive *p, hsize_t extra) {
    if (p->fd < 0) return ML_OK;
    haddr_t eoa = 0;
    if (H5Fget_eoa(p->file, &eoa) < 0)
        return live_failed(p, h5u_fail(ML_ERR_IO, p->path, "", "cannot get the end of allocation"));
    const hsize_t need = (hsize_t)eoa + extra + LIVE_MARGIN;
    /* HDF5 truncates the file to its end of allocation whenever it flushes the whole file
     * (H5Fflush, H5Fstart_swmr_write), so the reserve is checked against the real size */
    struct stat sb;
    if (need <= p->reserved && fstat(p->fd, &sb) == 0 && (hsize_t)sb.st_size >= p->reserved) return ML_OK;
    const hsize_t target = need + LIVE_STEP;
    const int r = posix_fallocate(p->fd, 0, (off_t)target);
    if (r == EINVAL || r == EOPNOTSUPP) { /* a file system without fallocate: unguarded */
        p->fd = -1;
        return ML_OK;
    }
    if (r != 0)
        return live_failed(p, ml_fail(ML_ERR_IO,
                                      "%s: cannot reserve space for the next writes (%llu bytes): %s; "
                                      "the session keeps what was written before",
                                      p->path, (unsigned long long)target, strerror(r)));
    p->reserved = target;
    return ML_OK;
}

/* For an unexpected HDF5 write error (not caught by the space guard): the descriptor is switched
 * to an in-memory copy (memfd) so that whatever the close still writes is discarded instead of
 * failing again. (If the error broke the metadata cache, the close fails anyway.) */
static void live_detach(struct SessionLive *p) {
    void *h = NULL;
    if (p->file < 0 || H5Fget_vfd_handle(p->file, H5P_DEFAULT, &h) < 0 || !h) {
        H5Eclear2(H5E_DEFAULT);
        return;
    }
    const int fd = *(const int *)h;
    const size_t bs = (size_t)1 << 16;
    char *buf = ml_alloc(bs);
    const int mfd = buf ? memfd_create("moelab-live-discard", MFD_CLOEXEC) : -1;
    if (mfd < 0) {
        ml_free(buf);
        return;
    }
    off_t off = 0;
    ssize_t r;
    while ((r = pread(fd, buf, bs, off)) > 0) {
        if (pwrite(mfd, buf, (size_t)r, off) != r) {
            r = -1;
            break;
        }
        off += r;
    }
    if (r == 0) dup2(mfd, fd);
    close(mfd);
    ml_free(buf);
}

static void live_release(struct SessionLive *p, int detach) {
    if (detach) live_detach(p);
    for (int i = 0; i < DS_N; i++) h5u_close(p->ds[i]);
    h5u_close(p->event_type);
    h5u_close(p->status_type);
    h5u_close(p->file);
    ml_free(p);
}

/* Records the first failure; every later call reports it. */
static ml_status live_failed(struct SessionLive *p, ml_status st) {
    if (!p->failed) {
        p->failed = 1;
        p->fail_st = st;
        snprintf(p->fail_msg, sizeof p->fail_msg, "%s", ml_last_error());
    }
    return st;
}

/* A write error inside HDF5 (as opposed to the space guard refusing the next batch). */
static ml_status live_h5failed(struct SessionLive *p, ml_status st) {
    if (!p->failed) p->hdf5_broken = 1;
    return live_failed(p, st);
}

static ml_status live_check(const SessionWriter *w) {
    if (!w || !w->p) return ml_fail(ML_ERR_STATE, "session writer is not open");
    if (w->p->failed) return ml_fail(ML_ERR_IO, "%s (session writer disabled after this error)", w->p->fail_msg);
    return ML_OK;
}

/* Grows dataset i along dim 0 to n0 + cnt rows and writes rows [n0, n0 + cnt) from data.
 * inner/ninner: the other dims. */
static ml_status live_append_rows(struct SessionLive *p, int i, hsize_t n0, hsize_t cnt, const hsize_t *inner,
                                  int ninner, hid_t mem_type, const void *data) {
    hsize_t dims[4], start[4] = {0, 0, 0, 0}, count[4];
    dims[0] = n0 + cnt;
    start[0] = n0;
    count[0] = cnt;
    for (int k = 0; k < ninner; k++) dims[k + 1] = count[k + 1] = inner[k];
    const int nd = ninner + 1;
    hid_t fs = -1, ms = -1;
    ml_status st = ML_OK;
    if (H5Dset_extent(p->ds[i], dims) < 0) {
        st = h5u_fail(ML_ERR_IO, p->path, p->dspath[i], "cannot extend dataset");
    } else if ((fs = H5Dget_space(p->ds[i])) < 0 ||
               H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, NULL, count, NULL) < 0 ||
               (ms = H5Screate_simple(nd, count, NULL)) < 0) {
        st = h5u_fail(ML_ERR_IO, p->path, p->dspath[i], "cannot select rows");
    } else if (H5Dwrite(p->ds[i], mem_type, ms, fs, H5P_DEFAULT, data) < 0) {
        st = h5u_fail(ML_ERR_IO, p->path, p->dspath[i], "cannot write rows");
    }
    h5u_close(fs);
    h5u_close(ms);
    if (st == ML_OK) p->dirty[i] = 1;
    return st;
}

static ml_status live_write_steps(struct SessionLive *p) {
    if (p->nbuf == 0) return ML_OK;
    const hsize_t cnt = (hsize_t)p->nbuf, n0 = p->n_steps;
    ml_status st = live_reserve(p, 2 * cnt * (SC_N * 8 + SV_N * 4 * (hsize_t)p->E) * (hsize_t)(1 + p->nlayers));
    if (st != ML_OK) return st;
    for (int c = 0; c < SC_N && st == ML_OK; c++)
        if (p->ds[DS_STEP0 + c] >= 0) /* an optional column a session from an older moelab lacks */
            st = live_append_rows(p, DS_STEP0 + c, n0, cnt, NULL, 0, H5T_NATIVE_DOUBLE, p->sbuf[c]);
    const hsize_t e = (hsize_t)p->E;
    for (int c = 0; c < SV_N && st == ML_OK; c++) {
        if (p->ds[DS_SVEC0 + c] < 0) continue;
        const int is_int = sess_step_vecs[c].is_int;
        const void *src = is_int ? (const void *)p->vbuf_i[c == SV_KEPT] : (const void *)p->vbuf_f[c == SV_BIAS];
        st = live_append_rows(p, DS_SVEC0 + c, n0, cnt, &e, 1, is_int ? H5T_NATIVE_INT32 : H5T_NATIVE_FLOAT, src);
    }
    for (int l = 0; l < p->nlayers && st == ML_OK; l++) {
        for (int c = 0; c < LSC_N && st == ML_OK; c++)
            if (p->ds[LDS(l, LD_STEP0 + c)] >= 0) /* an optional column an older session's layer lacks */
                st = live_append_rows(p, LDS(l, LD_STEP0 + c), n0, cnt, NULL, 0, H5T_NATIVE_DOUBLE, p->lsbuf[l][c]);
        const hsize_t le = (hsize_t)p->lE[l];
        for (int c = 0; c < SV_N && st == ML_OK; c++) {
            const int is_int = sess_step_vecs[c].is_int;
            const void *src = is_int ? (const void *)p->lvi[l][c == SV_KEPT] : (const void *)p->lvf[l][c == SV_BIAS];
            st = live_append_rows(p, LDS(l, LD_SVEC0 + c), n0, cnt, &le, 1,
                                  is_int ? H5T_NATIVE_INT32 : H5T_NATIVE_FLOAT, src);
        }
    }
    if (st != ML_OK) return live_h5failed(p, st);
    p->n_steps += cnt;
    p->nbuf = 0;
    return ML_OK;
}

static ml_status live_flush(struct SessionLive *p) {
    ml_status st = live_write_steps(p);
    if (st == ML_OK) st = live_reserve(p, 0);
    if (st != ML_OK) return st;
    for (int i = 0; i < DS_N; i++) {
        if (!p->dirty[i] || p->ds[i] < 0) continue;
        if (H5Dflush(p->ds[i]) < 0)
            return live_h5failed(p, h5u_fail(ML_ERR_IO, p->path, p->dspath[i], "cannot flush dataset"));
        p->dirty[i] = 0;
    }
    return ML_OK;
}

static ml_status live_write_status(struct SessionLive *p, const char *status) {
    char buf[SESS_STATUS_LEN];
    memset(buf, 0, sizeof buf);
    snprintf(buf, sizeof buf, "%s", status);
    if (H5Dwrite(p->ds[DS_STATUS], p->status_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) < 0)
        return h5u_fail(ML_ERR_IO, p->path, "/status", "cannot write status");
    p->dirty[DS_STATUS] = 1;
    return ML_OK;
}

/* The sec2 descriptor of the open file, for the space guard. */
static void live_get_fd(struct SessionLive *p) {
    void *h = NULL;
    p->fd = -1;
    p->reserved = 0;
    if (H5Fget_vfd_handle(p->file, H5P_DEFAULT, &h) >= 0 && h) p->fd = *(const int *)h;
    H5Eclear2(H5E_DEFAULT);
}

/* ------------------------------------------------------------------ creation */

/* dcpl for an extendable dataset with the given chunk, shuffle + deflate 4 when available. */
static hid_t make_dcpl(int nd, const hsize_t *chunk, hid_t type, const void *fill) {
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    if (dcpl < 0) return -1;
    int ok = H5Pset_chunk(dcpl, nd, chunk) >= 0;
    if (ok && fill) ok = H5Pset_fill_value(dcpl, type, fill) >= 0;
    if (ok && H5Zfilter_avail(H5Z_FILTER_SHUFFLE) > 0) ok = H5Pset_shuffle(dcpl) >= 0;
    if (ok && H5Zfilter_avail(H5Z_FILTER_DEFLATE) > 0) ok = H5Pset_deflate(dcpl, 4) >= 0;
    if (!ok) {
        H5Pclose(dcpl);
        return -1;
    }
    return dcpl;
}

/* Creates dataset i: dims (0, inner...), unlimited first dim, the given chunk. */
static ml_status create_ext(struct SessionLive *p, int i, hid_t type, int ninner, const hsize_t *inner, hsize_t chunk0,
                            const void *fill, const char *desc) {
    hsize_t dims[4] = {0}, maxd[4] = {H5S_UNLIMITED}, chunk[4] = {chunk0};
    for (int k = 0; k < ninner; k++) {
        dims[k + 1] = maxd[k + 1] = inner[k];
        chunk[k + 1] = inner[k] > 0 ? inner[k] : 1;
    }
    const int nd = ninner + 1;
    hid_t s = H5Screate_simple(nd, dims, maxd), dcpl = make_dcpl(nd, chunk, type, fill);
    ml_status st = ML_OK;
    if (s < 0 || dcpl < 0) st = h5u_fail(ML_ERR_IO, p->path, p->dspath[i], "cannot prepare dataset");
    else if ((p->ds[i] = H5Dcreate2(p->file, p->dspath[i], type, s, H5P_DEFAULT, dcpl, H5P_DEFAULT)) < 0)
        st = h5u_fail(ML_ERR_IO, p->path, p->dspath[i], "cannot create dataset");
    else if (desc) st = h5u_attr_str(p->ds[i], "description", desc, p->path);
    h5u_close(s);
    h5u_close(dcpl);
    return st;
}

static ml_status make_group(hid_t file, const char *name, hid_t *g, const char *path) {
    *g = H5Gcreate2(file, name, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    if (*g < 0) return h5u_fail(ML_ERR_IO, path, name, "cannot create group");
    return ML_OK;
}

static ml_status write_run_group(struct SessionLive *p, const SessionInfo *info, const char *spec) {
    const RunRecord *t = info->run;
    const TrainConfig *c = &t->cfg;
    const MoeConfig *h = &c->model.head;
    const char *f = p->path;
    hid_t g = -1;
    ml_status st = make_group(p->file, "run", &g, f);
    char *json = ml_alloc(65536);
    if (st == ML_OK && !json) st = ml_fail(ML_ERR_NOMEM, "out of memory");
    if (st == ML_OK) st = session_config_json(c, spec, json, 65536);
    char created[40];
    h5u_iso_time(created, sizeof created);
    if (st == ML_OK) st = h5u_attr_i64(g, "format_version", SESSION_FORMAT_VERSION, f);
    if (st == ML_OK && t->nlayers > 0) { /* the routed layers, in the order of /layers (format 2) */
        const char *names[REC_MAX_LAYERS];
        for (int l = 0; l < t->nlayers; l++) names[l] = t->layer[l].name;
        st = h5u_attr_strv(g, "layers", names, t->nlayers, f);
    }
    if (st == ML_OK) st = h5u_attr_str(g, "moelab_version", MOELAB_VERSION, f);
    if (st == ML_OK) st = h5u_attr_str(g, "command_line", info->command_line ? info->command_line : "", f);
    if (st == ML_OK) st = h5u_attr_str(g, "config_json", json, f);
    if (st == ML_OK) st = h5u_attr_str(g, "dataset", t->dataset, f);
    if (st == ML_OK) st = h5u_attr_str(g, "dataset_spec", spec, f);
    if (st == ML_OK) st = h5u_attr_str(g, "dataset_source", t->dataset_source, f);
    if (st == ML_OK) st = h5u_attr_str(g, "created", created, f);
    if (st == ML_OK) st = h5u_attr_u64(g, "seed", c->seed, f);
    if (st == ML_OK) st = h5u_attr_str(g, "session_id", info->session_id ? info->session_id : "", f);
    if (st == ML_OK) st = h5u_attr_str(g, "commands", info->commands_text ? info->commands_text : "", f);
    if (st == ML_OK) st = h5u_attr_i64(g, "classes", t->classes, f);
    if (st == ML_OK) st = h5u_attr_i64(g, "image_c", t->c, f);
    if (st == ML_OK) st = h5u_attr_i64(g, "image_h", t->h, f);
    if (st == ML_OK) st = h5u_attr_i64(g, "image_w", t->w, f);
    if (st == ML_OK) st = h5u_attr_i64(g, "n_train", t->n_train, f);
    if (st == ML_OK) st = h5u_attr_i64(g, "n_test", t->n_test, f);
    if (st == ML_OK) st = h5u_attr_f32v(g, "dataset_mean", t->mean, t->c, f);
    if (st == ML_OK) st = h5u_attr_f32v(g, "dataset_std", t->std, t->c, f);
    if (st == ML_OK) st = h5u_attr_str(g, "head", moe_head_name(h->kind), f);
    if (st == ML_OK) st = h5u_attr_str(g, "backbone", backbone_name(c->model.backbone), f);
    if (st == ML_OK) st = h5u_attr_f64(g, "width", c->model.width, f);
    if (st == ML_OK) st = h5u_attr_i64(g, "d", t->d, f);
    if (st == ML_OK) st = h5u_attr_i64(g, "experts", p->E, f);
    if (st == ML_OK) st = h5u_attr_i64(g, "k", h->k, f);
    if (st == ML_OK) st = h5u_attr_i64(g, "hidden", h->h, f);
    if (st == ML_OK) st = h5u_attr_i64(g, "batch", c->model.batch, f);
    if (st == ML_OK) st = h5u_attr_i64(g, "epochs", c->epochs, f);
    if (st == ML_OK) st = h5u_attr_i64(g, "steps_per_epoch", t->steps_per_epoch, f);
    if (st == ML_OK) st = h5u_attr_i64(g, "total_steps", t->total_steps, f);
    if (st == ML_OK) st = h5u_attr_i64(g, "threads", c->threads, f);
    if (st == ML_OK) st = h5u_attr_i64(g, "n_params", t->n_params, f);
    if (st == ML_OK) st = h5u_attr_f64(g, "rho_nominal", t->rho_nominal, f);
    if (st == ML_OK) st = h5u_attr_f64(g, "flops_per_sample", t->flops_per_sample, f);
    if (st == ML_OK) st = h5u_attr_i64(g, "tsne_samples", p->tsne_n, f);
    if (st == ML_OK) {
        /* /run/class_names: (K,) fixed-length strings */
        size_t len = 1;
        for (int k = 0; k < t->classes; k++) {
            const size_t l = strlen(t->class_names[k]) + 1;
            if (l > len) len = l;
        }
        char *names = ml_alloc(len * (size_t)t->classes);
        hid_t ty = h5u_str_type(len);
        if (!names || ty < 0) {
            st = ml_fail(ML_ERR_NOMEM, "%s: cannot store class names", f);
        } else {
            for (int k = 0; k < t->classes; k++)
                memcpy(names + (size_t)k * len, t->class_names[k], strlen(t->class_names[k]) + 1);
            hsize_t d = (hsize_t)t->classes;
            st = h5u_write(g, "class_names", ty, ty, 1, &d, names, f);
        }
        h5u_close(ty);
        ml_free(names);
    }
    ml_free(json);
    h5u_close(g);
    return st;
}

/* The t-SNE datasets of layer l: n samples of fd features. */
static ml_status create_layer_tsne(struct SessionLive *p, int l, int n, int fd) {
    const int32_t ifill32 = -1;
    const float fnan = NAN;
    const hsize_t nd[2] = {(hsize_t)n, (hsize_t)fd}, n1 = (hsize_t)n;
    ml_status st = create_ext(p, LDS(l, LD_TSNE_FEAT), H5T_IEEE_F32LE, 2, nd, 1, &fnan,
                              "(N_eval, n, C) the layer's pooled router input of a fixed test sample");
    if (st == ML_OK)
        st = create_ext(p, LDS(l, LD_TSNE_EXPERT), H5T_STD_I32LE, 1, &n1, 1, &ifill32,
                        "(N_eval, n) first-choice expert of each sample in this layer");
    if (st == ML_OK)
        st = create_ext(p, LDS(l, LD_TSNE_LABEL), H5T_STD_I32LE, 1, &n1, 1, &ifill32,
                        "(N_eval, n) class of each sample");
    if (st == ML_OK) p->lfeat[l] = fd;
    return st;
}

/* The fill row of layer l's per-evaluation arrays (class_expert, t-SNE) at row n0, for a record
 * without per-layer data. */
static ml_status live_pad_layer_eval(struct SessionLive *p, int l, hsize_t n0) {
    ml_status st = ML_OK;
    const int want[5] = {LD_CLASS_EXPERT, LD_TSNE_FEAT, LD_TSNE_EXPERT, LD_TSNE_LABEL, LD_DROP_CE};
    for (int j = 0; j < 5 && st == ML_OK; j++) { /* extend to n0 + 1 rows: the fill value */
        const int i = LDS(l, want[j]);
        if (p->ds[i] < 0) continue;
        hsize_t d[4];
        if (h5u_dims(p->ds[i], d, 4, 0) < 1) return h5u_fail(ML_ERR_IO, p->path, p->dspath[i], "cannot read shape");
        d[0] = n0 + 1;
        if (H5Dset_extent(p->ds[i], d) < 0) return h5u_fail(ML_ERR_IO, p->path, p->dspath[i], "cannot extend dataset");
        p->dirty[i] = 1;
    }
    return st;
}

/* Format 2: /layers/<name> for every routed layer (attributes from its LayerInfo), with steps and
 * evals groups holding its columns. */
static ml_status create_layers(struct SessionLive *p, const RunRecord *t) {
    const char *f = p->path;
    const double nan = NAN;
    const int64_t ifill = -1;
    const int32_t ifill32 = -1;
    const float fnan = NAN;
    hid_t g = -1;
    ml_status st = make_group(p->file, "layers", &g, f);
    if (st == ML_OK) st = h5u_attr_i64(g, "count", t->nlayers, f);
    if (st == ML_OK && t->nlayers > 0) {
        const char *names[REC_MAX_LAYERS];
        for (int l = 0; l < t->nlayers; l++) names[l] = t->layer[l].name;
        st = h5u_attr_strv(g, "names", names, t->nlayers, f);
        for (int l = 0; l < t->nlayers && st == ML_OK; l++) { /* also one scalar each, for C readers */
            char an[24];
            snprintf(an, sizeof an, "name_%d", l);
            st = h5u_attr_str(g, an, names[l], f);
        }
    }
    h5u_close(g);
    p->nlayers = t->nlayers;
    for (int l = 0; l < p->nlayers; l++) {
        snprintf(p->lname[l], sizeof p->lname[l], "%s", t->layer[l].name);
        p->lE[l] = t->layer[l].E;
        p->lfeat[l] = t->layer[l].feat_dim;
    }
    live_layer_paths(p);
    for (int l = 0; l < p->nlayers && st == ML_OK; l++) {
        const LayerInfo *li = &t->layer[l];
        char gp[64];
        snprintf(gp, sizeof gp, "/layers/%s", li->name);
        if ((st = make_group(p->file, gp, &g, f)) != ML_OK) break;
        st = h5u_attr_i64(g, "stage", li->stage, f);
        if (st == ML_OK) st = h5u_attr_str(g, "kind", moe_head_name((HeadKind)li->kind), f);
        if (st == ML_OK) st = h5u_attr_i64(g, "experts", li->E, f);
        if (st == ML_OK) st = h5u_attr_i64(g, "k", li->k, f);
        if (st == ML_OK) st = h5u_attr_i64(g, "hidden", li->h, f);
        if (st == ML_OK) st = h5u_attr_i64(g, "capacity", li->capacity, f);
        if (st == ML_OK) st = h5u_attr_f64(g, "rho_nominal", li->rho_nominal, f);
        h5u_close(g);
        hid_t sg = -1;
        snprintf(gp, sizeof gp, "/layers/%s/steps", li->name);
        if (st == ML_OK) st = make_group(p->file, gp, &sg, f);
        h5u_close(sg);
        snprintf(gp, sizeof gp, "/layers/%s/evals", li->name);
        if (st == ML_OK) st = make_group(p->file, gp, &sg, f);
        h5u_close(sg);
        for (int c = 0; c < LSC_N && st == ML_OK; c++) {
            const int is_int = sess_layer_step_cols[c].is_int;
            st = create_ext(p, LDS(l, LD_STEP0 + c), is_int ? H5T_STD_I64LE : H5T_IEEE_F64LE, 0, NULL, STEP_CHUNK,
                            is_int ? (const void *)&ifill : (const void *)&nan, sess_layer_step_cols[c].desc);
        }
        const hsize_t e = (hsize_t)li->E;
        for (int c = 0; c < SV_N && st == ML_OK; c++) {
            const int is_int = sess_step_vecs[c].is_int;
            st = create_ext(p, LDS(l, LD_SVEC0 + c), is_int ? H5T_STD_I32LE : H5T_IEEE_F32LE, 1, &e, SVEC_CHUNK,
                            is_int ? (const void *)&ifill32 : (const void *)&fnan, sess_step_vecs[c].desc);
        }
        for (int c = 0; c < LEC_N && st == ML_OK; c++) {
            const int is_int = sess_layer_eval_cols[c].is_int;
            st = create_ext(p, LDS(l, LD_EVAL0 + c), is_int ? H5T_STD_I64LE : H5T_IEEE_F64LE, 0, NULL, EVAL_CHUNK,
                            is_int ? (const void *)&ifill : (const void *)&nan, sess_layer_eval_cols[c].desc);
        }
        const hsize_t ke[2] = {(hsize_t)p->K, (hsize_t)li->E};
        if (st == ML_OK)
            st = create_ext(p, LDS(l, LD_CLASS_EXPERT), H5T_STD_I32LE, 2, ke, 1, &ifill32,
                            "(N_eval, classes, experts) test samples of class c whose first choice in this layer is e");
        if (st == ML_OK)
            st = create_ext(p, LDS(l, LD_DROP_CE), H5T_STD_I32LE, 2, ke, 1, &ifill32,
                            "(N_eval, classes, experts) training pairs (sample of class c, expert e) this layer's "
                            "capacity dropped since the epoch's start");
        if (st == ML_OK && t->tsne_n > 0 && p->lfeat[l] > 0) st = create_layer_tsne(p, l, t->tsne_n, p->lfeat[l]);
    }
    p->ltsne_n = t->tsne_n;
    return st;
}

static ml_status create_schema(struct SessionLive *p, const SessionInfo *info, const char *spec) {
    const char *f = p->path;
    const RunRecord *t = info->run;
    ml_status st = ML_OK;
    hid_t root = p->file;
    if ((st = h5u_attr_i64(root, "format_version", SESSION_FORMAT_VERSION, f)) != ML_OK) return st;
    if ((st = h5u_attr_str(root, "moelab_version", MOELAB_VERSION, f)) != ML_OK) return st;
    if ((st = h5u_attr_str(root, "default", "evals", f)) != ML_OK) return st;
    if ((st = write_run_group(p, info, spec)) != ML_OK) return st;

    const double nan = NAN;
    const int64_t ifill = -1;
    const int32_t ifill32 = -1;
    const float fnan = NAN;
    hid_t g = -1;

    /* /steps */
    if ((st = make_group(root, "steps", &g, f)) != ML_OK) return st;
    st = h5u_attr_str(g, "NX_class", "NXdata", f);
    if (st == ML_OK) st = h5u_attr_str(g, "signal", "loss", f);
    if (st == ML_OK) st = h5u_attr_str(g, "axes", "step", f);
    h5u_close(g);
    for (int c = 0; c < SC_N && st == ML_OK; c++) {
        const int is_int = sess_step_cols[c].is_int;
        st = create_ext(p, DS_STEP0 + c, is_int ? H5T_STD_I64LE : H5T_IEEE_F64LE, 0, NULL, STEP_CHUNK,
                        is_int ? (const void *)&ifill : (const void *)&nan, sess_step_cols[c].desc);
    }
    const hsize_t e = (hsize_t)p->E;
    for (int c = 0; c < SV_N && st == ML_OK && p->E > 0; c++) {
        const int is_int = sess_step_vecs[c].is_int;
        st = create_ext(p, DS_SVEC0 + c, is_int ? H5T_STD_I32LE : H5T_IEEE_F32LE, 1, &e, SVEC_CHUNK,
                        is_int ? (const void *)&ifill32 : (const void *)&fnan, sess_step_vecs[c].desc);
    }
    if (st != ML_OK) return st;

    /* /evals */
    if ((st = make_group(root, "evals", &g, f)) != ML_OK) return st;
    if (p->E > 0) {
        const char *axes[3] = {"epoch", "class_index", "expert_index"};
        st = h5u_attr_str(g, "NX_class", "NXdata", f);
        if (st == ML_OK) st = h5u_attr_str(g, "signal", "class_expert", f);
        if (st == ML_OK) st = h5u_attr_strv(g, "axes", axes, 3, f);
        if (st == ML_OK) st = h5u_attr_i64(g, "epoch_indices", 0, f);
        if (st == ML_OK) st = h5u_attr_i64(g, "class_index_indices", 1, f);
        if (st == ML_OK) st = h5u_attr_i64(g, "expert_index_indices", 2, f);
        const int nk = p->K > p->E ? p->K : p->E;
        int32_t *idx = ml_alloc(sizeof(int32_t) * (size_t)nk);
        if (st == ML_OK && !idx) st = ml_fail(ML_ERR_NOMEM, "out of memory");
        for (int k = 0; idx && k < nk; k++) idx[k] = k;
        hsize_t d = (hsize_t)p->K;
        if (st == ML_OK) st = h5u_write(g, "class_index", H5T_STD_I32LE, H5T_NATIVE_INT32, 1, &d, idx, f);
        d = (hsize_t)p->E;
        if (st == ML_OK) st = h5u_write(g, "expert_index", H5T_STD_I32LE, H5T_NATIVE_INT32, 1, &d, idx, f);
        ml_free(idx);
        if (st == ML_OK && H5Lcreate_soft("/run/class_names", g, "class_names", H5P_DEFAULT, H5P_DEFAULT) < 0)
            st = h5u_fail(ML_ERR_IO, f, "/evals/class_names", "cannot create link");
    } else {
        st = h5u_attr_str(g, "NX_class", "NXdata", f);
        if (st == ML_OK) st = h5u_attr_str(g, "signal", "test_acc", f);
        if (st == ML_OK) st = h5u_attr_str(g, "axes", "epoch", f);
    }
    h5u_close(g);
    for (int c = 0; c < EC_N && st == ML_OK; c++) {
        const int is_int = sess_eval_cols[c].is_int;
        st = create_ext(p, DS_EVAL0 + c, is_int ? H5T_STD_I64LE : H5T_IEEE_F64LE, 0, NULL, EVAL_CHUNK,
                        is_int ? (const void *)&ifill : (const void *)&nan, sess_eval_cols[c].desc);
    }
    if (st == ML_OK && p->E > 0) {
        const hsize_t ke[2] = {(hsize_t)p->K, (hsize_t)p->E};
        st = create_ext(p, DS_CLASS_EXPERT, H5T_STD_I32LE, 2, ke, 1, &ifill32,
                        "(N_eval, classes, experts) test samples of class c whose first choice is e");
        hid_t ce = p->ds[DS_CLASS_EXPERT];
        if (st == ML_OK) {
            const char **names = (const char **)t->class_names;
            st = h5u_attr_strv(ce, "class_names", names, t->classes, f);
        }
        if (st == ML_OK) st = h5u_attr_str(ce, "long_name", "class x expert first-choice counts", f);
        if (st == ML_OK) st = h5u_attr_str(ce, "interpretation", "image", f);
        if (st == ML_OK)
            st = create_ext(p, DS_DROP_CE, H5T_STD_I32LE, 2, ke, 1, &ifill32,
                            "(N_eval, classes, experts) training pairs (sample of class c, expert e) capacity dropped "
                            "since the epoch's start");
    }
    if (st == ML_OK && p->E > 0 && p->tsne_n > 0) {
        const hsize_t nd[2] = {(hsize_t)p->tsne_n, (hsize_t)p->feat_dim}, n1 = (hsize_t)p->tsne_n;
        st = create_ext(p, DS_TSNE_FEAT, H5T_IEEE_F32LE, 2, nd, 1, &fnan,
                        "(N_eval, n, d) pooled features of a fixed test sample");
        if (st == ML_OK)
            st = create_ext(p, DS_TSNE_EXPERT, H5T_STD_I32LE, 1, &n1, 1, &ifill32,
                            "(N_eval, n) first-choice expert of each sample");
        if (st == ML_OK)
            st = create_ext(p, DS_TSNE_LABEL, H5T_STD_I32LE, 1, &n1, 1, &ifill32, "(N_eval, n) class of each sample");
    }
    if (st != ML_OK) return st;

    if ((st = create_layers(p, t)) != ML_OK) return st;

    /* /events */
    {
        SessEvent fill;
        memset(&fill, 0, sizeof fill);
        fill.step = -1;
        fill.wall_time = NAN;
        st = create_ext(p, DS_EVENTS, p->event_type, 0, NULL, EVENT_CHUNK, &fill,
                        "(N,) interactive commands and session events: step, Unix time, text");
    }
    if (st != ML_OK) return st;

    /* /status: scalar fixed-length string, space allocated now so that SWMR writes only data */
    hid_t s = H5Screate(H5S_SCALAR), dcpl = H5Pcreate(H5P_DATASET_CREATE);
    if (s < 0 || dcpl < 0 || H5Pset_alloc_time(dcpl, H5D_ALLOC_TIME_EARLY) < 0)
        st = h5u_fail(ML_ERR_IO, f, "/status", "cannot prepare dataset");
    else if ((p->ds[DS_STATUS] = H5Dcreate2(root, "status", p->status_type, s, H5P_DEFAULT, dcpl, H5P_DEFAULT)) < 0)
        st = h5u_fail(ML_ERR_IO, f, "/status", "cannot create dataset");
    h5u_close(s);
    h5u_close(dcpl);
    if (st == ML_OK) st = live_write_status(p, "running");
    return st;
}

static ml_status live_types(struct SessionLive *p) {
    p->event_type = sess_event_type();
    p->status_type = h5u_str_type(SESS_STATUS_LEN);
    if (p->event_type < 0 || p->status_type < 0) return h5u_fail(ML_ERR_IO, p->path, "", "cannot make types");
    return ML_OK;
}

ml_status session_create(SessionWriter *w, const char *dir, const SessionInfo *info) {
    h5u_quiet();
    w->p = NULL;
    if (!info || !info->run) return ml_fail(ML_ERR_ARG, "session_create: no run description");
    const RunRecord *t = info->run;
    ml_status st = h5u_mkdirs(dir);
    if (st != ML_OK) return st;
    struct SessionLive *p = ml_alloc(sizeof *p);
    if (!p) return ml_fail(ML_ERR_NOMEM, "out of memory");
    live_init_table(p);
    if ((st = h5u_path(p->path, sizeof p->path, dir, "live.h5")) != ML_OK) {
        live_release(p, 0);
        return st;
    }
    struct stat sb;
    if (stat(p->path, &sb) == 0) {
        st = ml_fail(ML_ERR_IO, "%s already exists (resume appends to it; choose a new session folder)", p->path);
        live_release(p, 0);
        return st;
    }
    const int moe = t->cfg.model.head.kind != HEAD_DENSE;
    p->E = moe ? t->cfg.model.head.E : 0;
    p->K = t->classes;
    p->tsne_n = moe ? t->tsne_n : 0;
    p->feat_dim = t->d;
    if ((st = live_types(p)) != ML_OK) {
        live_release(p, 0);
        return st;
    }
    hid_t fapl = h5u_fapl_latest();
    if (fapl < 0) {
        live_release(p, 0);
        return h5u_fail(ML_ERR_IO, p->path, "", "cannot make file access list");
    }
    p->file = H5Fcreate(p->path, H5F_ACC_EXCL, H5P_DEFAULT, fapl);
    if (p->file < 0) {
        st = h5u_fail(ML_ERR_IO, p->path, "", "cannot create file"); /* before any other H5 call */
        H5Pclose(fapl);
        live_release(p, 0);
        return st;
    }
    H5Pclose(fapl);
    const char *spec = info->dataset_spec ? info->dataset_spec : t->dataset;
    live_get_fd(p);
    st = live_reserve(p, (hsize_t)1 << 20);
    if (st == ML_OK) st = create_schema(p, info, spec);
    if (st == ML_OK && H5Fstart_swmr_write(p->file) < 0)
        st = h5u_fail(ML_ERR_IO, p->path, "", "cannot start SWMR writing");
    if (st != ML_OK) {
        char msg[1024], path[H5U_PATH_MAX];
        snprintf(msg, sizeof msg, "%s", ml_last_error());
        snprintf(path, sizeof path, "%s", p->path);
        live_release(p, 1);
        unlink(path); /* a half-made live.h5 would block a retry */
        return ml_fail(st, "%s", msg);
    }
    w->p = p;
    return ML_OK;
}

/* ------------------------------------------------------------------ appends */

ml_status session_append_step(SessionWriter *w, const StepRecord *r) {
    ml_status st = live_check(w);
    if (st != ML_OK) return st;
    h5u_quiet();
    struct SessionLive *p = w->p;
    double row[SC_N];
    sess_step_row(r, h5u_unix_time(), row);
    const int b = p->nbuf;
    for (int c = 0; c < SC_N; c++) p->sbuf[c][b] = row[c];
    if (p->E > 0) {
        const int E = p->E;
        for (int e = 0; e < E; e++) {
            const int have = r->has_moe && e < r->moe.E;
            p->vbuf_i[0][b * E + e] = have ? r->moe.demand[e] : 0;
            p->vbuf_i[1][b * E + e] = have ? r->moe.kept[e] : 0;
            p->vbuf_f[0][b * E + e] = have ? r->moe.mean_gate[e] : 0.0f;
            p->vbuf_f[1][b * E + e] = have ? r->moe.bias[e] : 0.0f;
        }
    }
    for (int l = 0; l < p->nlayers; l++) { /* format 2: each routed layer's projection */
        const int have_l = l < r->nlayers;
        const StepLayer *sl = &r->layer[have_l ? l : 0];
        double lrow[LSC_N];
        sess_layer_step_row(sl, r->step, lrow);
        for (int c = 0; c < LSC_N; c++) p->lsbuf[l][c][b] = have_l || c == LSC_STEP ? lrow[c] : NAN;
        const int E = p->lE[l];
        for (int e = 0; e < E; e++) {
            const int have = have_l && e < sl->moe.E;
            p->lvi[l][0][b * E + e] = have ? sl->moe.demand[e] : 0;
            p->lvi[l][1][b * E + e] = have ? sl->moe.kept[e] : 0;
            p->lvf[l][0][b * E + e] = have ? sl->moe.mean_gate[e] : 0.0f;
            p->lvf[l][1][b * E + e] = have ? sl->moe.bias[e] : 0.0f;
        }
    }
    p->nbuf++;
    if (p->nbuf >= SESSION_STEP_BLOCK) return live_write_steps(p);
    return ML_OK;
}

/* One row of a drops-per-class dataset: the counts, or the fill value (-1) for a record without them. */
static ml_status append_drops(struct SessionLive *p, int i, hsize_t n0, const hsize_t ke[2], const int *counts) {
    if (counts) return live_append_rows(p, i, n0, 1, ke, 2, H5T_NATIVE_INT, counts);
    const size_t n = (size_t)ke[0] * (size_t)ke[1];
    int *fill = ml_alloc(sizeof(int) * (n ? n : 1));
    if (!fill) return ml_fail(ML_ERR_NOMEM, "out of memory");
    for (size_t j = 0; j < n; j++) fill[j] = -1;
    const ml_status st = live_append_rows(p, i, n0, 1, ke, 2, H5T_NATIVE_INT, fill);
    ml_free(fill);
    return st;
}

ml_status session_append_eval(SessionWriter *w, const EvalRecord *r) {
    ml_status st = live_check(w);
    if (st != ML_OK) return st;
    h5u_quiet();
    struct SessionLive *p = w->p;
    if (p->E > 0) {
        if (!r->has_moe || r->moe.classes != p->K || r->moe.experts != p->E || !r->moe.class_expert)
            return ml_fail(ML_ERR_ARG, "%s: eval record has a %dx%d class x expert matrix, the session %dx%d", p->path,
                           r->moe.classes, r->moe.experts, p->K, p->E);
        if (p->tsne_n > 0 && (r->moe.tsne_n != p->tsne_n || r->moe.feat_dim != p->feat_dim || !r->moe.tsne_feat ||
                              !r->moe.tsne_expert || !r->tsne_label))
            return ml_fail(ML_ERR_ARG, "%s: eval record has a t-SNE sample of %d x %d, the session %d x %d", p->path,
                           r->moe.tsne_n, r->moe.feat_dim, p->tsne_n, p->feat_dim);
    }
    for (int l = 0; l < p->nlayers && l < r->nlayers; l++) { /* a record without layers: fill rows */
        const EvalLayer *el = &r->layer[l];
        if (el->classes != p->K || el->experts != p->lE[l] || !el->class_expert)
            return ml_fail(ML_ERR_ARG, "%s: eval record has no %dx%d class x expert matrix for layer %s", p->path, p->K,
                           p->lE[l], p->lname[l]);
        if (p->ds[LDS(l, LD_TSNE_FEAT)] >= 0 && (el->tsne_n != p->ltsne_n || el->feat_dim != p->lfeat[l] ||
                                                 !el->tsne_feat || !el->tsne_expert || !r->tsne_label))
            return ml_fail(ML_ERR_ARG,
                           "%s: eval record has a t-SNE sample of %d x %d for layer %s, the session %d x %d", p->path,
                           el->tsne_n, el->feat_dim, p->lname[l], p->ltsne_n, p->lfeat[l]);
    }
    if ((st = live_write_steps(p)) != ML_OK) return st;
    hsize_t lbytes = 0;
    for (int l = 0; l < p->nlayers; l++)
        lbytes += 2 * ((hsize_t)p->ltsne_n * (hsize_t)(p->lfeat[l] + 1) * 4 + 2 * (hsize_t)p->K * p->lE[l] * 4 + LEC_N * 8);
    if ((st = live_reserve(p, lbytes)) != ML_OK) return st;
    const hsize_t bytes =
        2 * ((hsize_t)p->tsne_n * (hsize_t)(p->feat_dim + 2) * 4 + 2 * (hsize_t)p->K * p->E * 4 + EC_N * 8);
    if ((st = live_reserve(p, bytes)) != ML_OK) return st;
    double row[EC_N];
    sess_eval_row(r, h5u_unix_time(), row);
    const hsize_t n0 = p->n_evals;
    for (int c = 0; c < EC_N && st == ML_OK; c++)
        if (p->ds[DS_EVAL0 + c] >= 0) /* an optional column a session from an older moelab lacks */
            st = live_append_rows(p, DS_EVAL0 + c, n0, 1, NULL, 0, H5T_NATIVE_DOUBLE, &row[c]);
    if (st == ML_OK && p->E > 0) {
        const hsize_t ke[2] = {(hsize_t)p->K, (hsize_t)p->E};
        st = live_append_rows(p, DS_CLASS_EXPERT, n0, 1, ke, 2, H5T_NATIVE_INT, r->moe.class_expert);
        if (st == ML_OK && p->ds[DS_DROP_CE] >= 0) st = append_drops(p, DS_DROP_CE, n0, ke, r->moe.drop_class_expert);
        if (st == ML_OK && p->tsne_n > 0) {
            const hsize_t nd[2] = {(hsize_t)p->tsne_n, (hsize_t)p->feat_dim}, n1 = (hsize_t)p->tsne_n;
            st = live_append_rows(p, DS_TSNE_FEAT, n0, 1, nd, 2, H5T_NATIVE_FLOAT, r->moe.tsne_feat);
            if (st == ML_OK) st = live_append_rows(p, DS_TSNE_EXPERT, n0, 1, &n1, 1, H5T_NATIVE_INT, r->moe.tsne_expert);
            if (st == ML_OK) st = live_append_rows(p, DS_TSNE_LABEL, n0, 1, &n1, 1, H5T_NATIVE_INT32, r->tsne_label);
        }
    }
    for (int l = 0; l < p->nlayers && st == ML_OK; l++) {
        double lrow[LEC_N];
        const int have = l < r->nlayers;
        sess_layer_eval_row(&r->layer[have ? l : 0], r->step, lrow);
        if (!have) { /* fill values (NaN, -1) for a record without per-layer data */
            for (int c = 0; c < LEC_N; c++)
                if (sess_layer_eval_cols[c].field != SF_ROW) lrow[c] = sess_layer_eval_cols[c].is_int ? -1.0 : NAN;
        }
        for (int c = 0; c < LEC_N && st == ML_OK; c++)
            if (p->ds[LDS(l, LD_EVAL0 + c)] >= 0) /* an optional column an older session's layer lacks */
                st = live_append_rows(p, LDS(l, LD_EVAL0 + c), n0, 1, NULL, 0, H5T_NATIVE_DOUBLE, &lrow[c]);
        if (!have) {
            if (st == ML_OK) st = live_pad_layer_eval(p, l, n0);
            continue;
        }
        const hsize_t ke[2] = {(hsize_t)p->K, (hsize_t)p->lE[l]};
        if (st == ML_OK)
            st = live_append_rows(p, LDS(l, LD_CLASS_EXPERT), n0, 1, ke, 2, H5T_NATIVE_INT, r->layer[l].class_expert);
        if (st == ML_OK && p->ds[LDS(l, LD_DROP_CE)] >= 0)
            st = append_drops(p, LDS(l, LD_DROP_CE), n0, ke, r->layer[l].drop_class_expert);
        if (st == ML_OK && p->ds[LDS(l, LD_TSNE_FEAT)] >= 0) {
            const hsize_t nd[2] = {(hsize_t)p->ltsne_n, (hsize_t)p->lfeat[l]}, n1 = (hsize_t)p->ltsne_n;
            st = live_append_rows(p, LDS(l, LD_TSNE_FEAT), n0, 1, nd, 2, H5T_NATIVE_FLOAT, r->layer[l].tsne_feat);
            if (st == ML_OK)
                st =
                    live_append_rows(p, LDS(l, LD_TSNE_EXPERT), n0, 1, &n1, 1, H5T_NATIVE_INT, r->layer[l].tsne_expert);
            if (st == ML_OK)
                st = live_append_rows(p, LDS(l, LD_TSNE_LABEL), n0, 1, &n1, 1, H5T_NATIVE_INT32, r->tsne_label);
        }
    }
    if (st != ML_OK) return live_h5failed(p, st);
    p->n_evals++;
    return live_flush(p);
}

ml_status session_append_event(SessionWriter *w, long step, double wall, const char *text) {
    ml_status st = live_check(w);
    if (st != ML_OK) return st;
    h5u_quiet();
    struct SessionLive *p = w->p;
    SessEvent ev;
    memset(&ev, 0, sizeof ev);
    ev.step = step;
    ev.wall_time = wall > 0 ? wall : h5u_unix_time();
    snprintf(ev.text, sizeof ev.text, "%s", text ? text : "");
    if ((st = live_reserve(p, sizeof ev)) != ML_OK) return st;
    st = live_append_rows(p, DS_EVENTS, p->n_events, 1, NULL, 0, p->event_type, &ev);
    if (st != ML_OK) return live_h5failed(p, st);
    p->n_events++;
    if (H5Dflush(p->ds[DS_EVENTS]) < 0)
        return live_h5failed(p, h5u_fail(ML_ERR_IO, p->path, "/events", "cannot flush dataset"));
    p->dirty[DS_EVENTS] = 0;
    return ML_OK;
}

ml_status session_flush(SessionWriter *w) {
    ml_status st = live_check(w);
    if (st != ML_OK) return st;
    h5u_quiet();
    return live_flush(w->p);
}

ml_status session_sync(SessionWriter *w) {
    ml_status st = live_check(w);
    if (st != ML_OK) return st;
    h5u_quiet();
    struct SessionLive *p = w->p;
    /* the buffered step block and every dataset written since the last flush (evals and events
     * are written at once by their appends; their H5Dflush is here or already done) */
    if ((st = live_flush(p)) != ML_OK) return st;
    /* the superblock's end of allocation too, so the file needs no repair after a crash */
    if (H5Fflush(p->file, H5F_SCOPE_LOCAL) < 0)
        return live_h5failed(p, h5u_fail(ML_ERR_IO, p->path, "", "cannot flush file"));
    /* H5Fflush cut the file to its end of allocation: reserve again before the next writes */
    if ((st = live_reserve(p, 0)) != ML_OK) return st;
    /* and out of the page cache, as ckpt_write does with its file before the rename */
    void *h = NULL;
    if (H5Fget_vfd_handle(p->file, H5P_DEFAULT, &h) < 0 || !h) {
        H5Eclear2(H5E_DEFAULT);
        return live_failed(p, ml_fail(ML_ERR_IO, "%s: cannot get the file descriptor to fsync", p->path));
    }
    if (fsync(*(const int *)h) != 0 && errno != EINVAL && errno != EROFS)
        return live_failed(p, ml_fail(ML_ERR_IO, "%s: fsync failed: %s", p->path, strerror(errno)));
    return ML_OK;
}

long session_steps_written(const SessionWriter *w) {
    if (!w || !w->p) return 0;
    return (long)w->p->n_steps + w->p->nbuf;
}

/* Gives back the unused space reserve of a cleanly closed file (cut at HDF5's end of
 * allocation, read back from the closed file). */
static void live_trim(const char *path) {
    hid_t fapl = h5u_fapl_latest();
    hid_t f = fapl >= 0 ? H5Fopen(path, H5F_ACC_RDONLY, fapl) : -1;
    haddr_t eoa = 0;
    const int ok = f >= 0 && H5Fget_eoa(f, &eoa) >= 0 && eoa > 0;
    h5u_close(f);
    h5u_close(fapl);
    H5Eclear2(H5E_DEFAULT);
    struct stat sb;
    if (ok && stat(path, &sb) == 0 && (hsize_t)sb.st_size > (hsize_t)eoa && truncate(path, (off_t)eoa) != 0)
        ml_log(1, "%s: cannot give back the unused space reserve: %s", path, strerror(errno));
}

ml_status session_close(SessionWriter *w, const char *status) {
    if (!w || !w->p) return ml_fail(ML_ERR_STATE, "session writer is not open");
    h5u_quiet();
    struct SessionLive *p = w->p;
    w->p = NULL;
    ml_status st = ML_OK;
    if (p->failed) {
        st = ml_fail(p->fail_st, "%s", p->fail_msg);
    } else {
        st = live_flush(p);
        if (st == ML_OK && status) st = live_write_status(p, status);
        if (st == ML_OK) st = live_flush(p);
        /* everything (superblock included) on disk now, so that the close itself writes nothing
         * that could fail */
        if (st == ML_OK && H5Fflush(p->file, H5F_SCOPE_LOCAL) < 0)
            st = live_h5failed(p, h5u_fail(ML_ERR_IO, p->path, "", "cannot flush file"));
    }
    if (p->failed && !p->hdf5_broken && status) {
        /* the space guard stopped the writer before HDF5 met the full disk: the file is intact
         * and closes normally; the status is a write in place */
        live_write_status(p, status);
        H5Eclear2(H5E_DEFAULT);
    }
    if (p->hdf5_broken) live_detach(p);
    for (int i = 0; i < DS_N; i++) {
        if (p->ds[i] >= 0 && H5Dclose(p->ds[i]) < 0 && st == ML_OK)
            st = h5u_fail(ML_ERR_IO, p->path, p->dspath[i], "cannot close dataset");
        p->ds[i] = -1;
    }
    const herr_t closed = H5Fclose(p->file);
    if (closed < 0 && st == ML_OK) st = h5u_fail(ML_ERR_IO, p->path, "", "cannot close file");
    p->file = -1;
    if (closed >= 0 && !p->hdf5_broken) live_trim(p->path);
    live_release(p, 0);
    return st;
}

/* ------------------------------------------------------------------ resume */

/* Opens dataset i if it exists (required: ML_ERR_FORMAT when missing). */
static ml_status open_ds(struct SessionLive *p, int i, int required) {
    const htri_t ex = H5Lexists(p->file, p->dspath[i], H5P_DEFAULT);
    if (ex <= 0) {
        H5Eclear2(H5E_DEFAULT);
        return required ? ml_fail(ML_ERR_FORMAT, "%s: dataset %s is missing", p->path, p->dspath[i]) : ML_OK;
    }
    p->ds[i] = H5Dopen2(p->file, p->dspath[i], H5P_DEFAULT);
    if (p->ds[i] < 0) return h5u_fail(ML_ERR_FORMAT, p->path, p->dspath[i], "cannot open dataset");
    return ML_OK;
}

/* Rows of dataset i (dim 0), or -1. */
static long ds_rows(struct SessionLive *p, int i) {
    hsize_t d[4];
    return h5u_dims(p->ds[i], d, 4, 0) >= 1 ? (long)d[0] : -1;
}

/* Sets dim 0 of datasets [i0, i1) (those present) to n. */
static ml_status set_rows(struct SessionLive *p, int i0, int i1, hsize_t n) {
    for (int i = i0; i < i1; i++) {
        if (p->ds[i] < 0) continue;
        hsize_t d[4];
        const int r = h5u_dims(p->ds[i], d, 4, 0);
        if (r < 1) return h5u_fail(ML_ERR_FORMAT, p->path, p->dspath[i], "cannot read shape");
        if (d[0] == n) continue;
        d[0] = n;
        if (H5Dset_extent(p->ds[i], d) < 0) return h5u_fail(ML_ERR_IO, p->path, p->dspath[i], "cannot resize");
    }
    return ML_OK;
}

/* Number of leading rows of a step column (int64) with value <= limit. */
static ml_status rows_upto(struct SessionLive *p, int i, hsize_t n, hid_t mem_type, long limit, hsize_t *out) {
    *out = n;
    if (n == 0 || limit < 0) return ML_OK;
    const size_t esz = mem_type == H5T_NATIVE_INT64 ? sizeof(int64_t) : H5Tget_size(mem_type);
    int64_t *v = ml_alloc(esz * n);
    if (!v) return ml_fail(ML_ERR_NOMEM, "out of memory");
    hid_t fs = H5Dget_space(p->ds[i]), ms = -1;
    const hsize_t start = 0, count = n;
    ml_status st = ML_OK;
    if (fs < 0 || H5Sselect_hyperslab(fs, H5S_SELECT_SET, &start, NULL, &count, NULL) < 0 ||
        (ms = H5Screate_simple(1, &count, NULL)) < 0 || H5Dread(p->ds[i], mem_type, ms, fs, H5P_DEFAULT, v) < 0)
        st = h5u_fail(ML_ERR_FORMAT, p->path, p->dspath[i], "cannot read");
    if (st == ML_OK) {
        hsize_t k = 0;
        while (k < n && v[k] <= limit) k++;
        *out = k;
    }
    h5u_close(fs);
    h5u_close(ms);
    ml_free(v);
    return st;
}

/* Reads and checks everything a resume needs, without writing: format version, /run, every
 * dataset and its shape, the common column lengths and the rows to keep (step <= resume_step).
 * Works on a read-only (SWMR-read) handle as well as on the writer's. */
static ml_status append_plan(struct SessionLive *p, long resume_step, hsize_t *keep_s, hsize_t *keep_e,
                             hsize_t *keep_v) {
    const char *f = p->path;
    int64_t v = 0, E = 0, K = 0;
    ml_status st = h5u_read_attr_i64(p->file, "format_version", &v, f);
    if (st != ML_OK) return st;
    if (v < 1 || v > SESSION_FORMAT_VERSION)
        return ml_fail(ML_ERR_FORMAT, "%s: format_version %lld, this moelab reads 1..%d (written by a newer moelab?)",
                       f, (long long)v, SESSION_FORMAT_VERSION);
    p->version = (int)v;
    /* format 2: the routed layers (a version-1 file has none: appends to it stay version 1) */
    p->nlayers = 0;
    if (v >= 2) {
        st = sess_read_layers(p->file, p->lname, &p->nlayers, f);
        if (st != ML_OK) return st;
        live_layer_paths(p);
    }
    hid_t run = H5Gopen2(p->file, "run", H5P_DEFAULT);
    if (run < 0) return h5u_fail(ML_ERR_FORMAT, f, "/run", "cannot open group");
    st = h5u_read_attr_i64(run, "experts", &E, f);
    if (st == ML_OK) st = h5u_read_attr_i64(run, "classes", &K, f);
    H5Gclose(run);
    if (st != ML_OK) return st;
    if (E < 0 || E > MOE_MAX_EXPERTS || K < 1)
        return ml_fail(ML_ERR_FORMAT, "%s: /run has experts = %lld, classes = %lld", f, (long long)E, (long long)K);
    p->E = (int)E;
    p->K = (int)K;
    for (int i = 0; i < DS_BASE_N && st == ML_OK; i++) {
        const int per_expert = (i >= DS_SVEC0 && i < DS_SVEC0 + SV_N) || i == DS_CLASS_EXPERT;
        const int tsne = i == DS_TSNE_FEAT || i == DS_TSNE_EXPERT || i == DS_TSNE_LABEL || i == DS_DROP_CE;
        const int optional = (i >= DS_STEP0 && i < DS_STEP0 + SC_N && sess_step_cols[i - DS_STEP0].optional) ||
                             (i >= DS_EVAL0 && i < DS_EVAL0 + EC_N && sess_eval_cols[i - DS_EVAL0].optional);
        st = open_ds(p, i, !tsne && !optional && (!per_expert || p->E > 0));
    }
    if (st != ML_OK) return st;
    /* shapes of the per-expert datasets must agree with /run */
    for (int i = DS_SVEC0; i < DS_SVEC0 + SV_N && st == ML_OK && p->E > 0; i++) {
        hsize_t d[4];
        if (h5u_dims(p->ds[i], d, 4, 0) != 2 || d[1] != (hsize_t)p->E)
            st = ml_fail(ML_ERR_FORMAT, "%s: %s is not (T, %d)", f, p->dspath[i], p->E);
    }
    if (st == ML_OK && p->ds[DS_CLASS_EXPERT] >= 0) {
        hsize_t d[4];
        if (h5u_dims(p->ds[DS_CLASS_EXPERT], d, 4, 0) != 3 || d[1] != (hsize_t)p->K || d[2] != (hsize_t)p->E)
            st = ml_fail(ML_ERR_FORMAT, "%s: /evals/class_expert is not (N, %d, %d)", f, p->K, p->E);
    }
    if (st == ML_OK && p->ds[DS_TSNE_FEAT] >= 0) {
        hsize_t d[4];
        if (h5u_dims(p->ds[DS_TSNE_FEAT], d, 4, 0) != 3 || p->ds[DS_TSNE_EXPERT] < 0 || p->ds[DS_TSNE_LABEL] < 0)
            st = ml_fail(ML_ERR_FORMAT, "%s: /evals/tsne_* datasets are incomplete", f);
        else {
            p->tsne_n = (int)d[1];
            p->feat_dim = (int)d[2];
        }
    }
    for (int l = 0; l < p->nlayers && st == ML_OK; l++) {
        for (int j = 0; j < LD_N && st == ML_OK; j++) {
            /* optional like the top-level columns: a layer written before a column existed lacks it */
            const int optional = (j >= LD_STEP0 && j < LD_STEP0 + LSC_N && sess_layer_step_cols[j - LD_STEP0].optional) ||
                                 (j >= LD_EVAL0 && j < LD_EVAL0 + LEC_N && sess_layer_eval_cols[j - LD_EVAL0].optional);
            st = open_ds(p, LDS(l, j),
                         !optional && j != LD_TSNE_FEAT && j != LD_TSNE_EXPERT && j != LD_TSNE_LABEL && j != LD_DROP_CE);
        }
        hsize_t d[4];
        if (st == ML_OK && h5u_dims(p->ds[LDS(l, LD_SVEC0)], d, 4, 0) == 2) p->lE[l] = (int)d[1];
        else if (st == ML_OK) st = ml_fail(ML_ERR_FORMAT, "%s: %s is not (T, E)", f, p->dspath[LDS(l, LD_SVEC0)]);
        if (st == ML_OK && (h5u_dims(p->ds[LDS(l, LD_CLASS_EXPERT)], d, 4, 0) != 3 || d[1] != (hsize_t)p->K ||
                            d[2] != (hsize_t)p->lE[l]))
            st = ml_fail(ML_ERR_FORMAT, "%s: %s is not (N, %d, %d)", f, p->dspath[LDS(l, LD_CLASS_EXPERT)], p->K,
                         p->lE[l]);
        if (st == ML_OK && p->lE[l] > MOE_MAX_EXPERTS)
            st = ml_fail(ML_ERR_FORMAT, "%s: layer %s has %d experts", f, p->lname[l], p->lE[l]);
        if (st == ML_OK && p->ds[LDS(l, LD_TSNE_FEAT)] >= 0) {
            if (h5u_dims(p->ds[LDS(l, LD_TSNE_FEAT)], d, 4, 0) != 3 || p->ds[LDS(l, LD_TSNE_EXPERT)] < 0 ||
                p->ds[LDS(l, LD_TSNE_LABEL)] < 0)
                st = ml_fail(ML_ERR_FORMAT, "%s: the t-SNE datasets of layer %s are incomplete", f, p->lname[l]);
            else {
                p->ltsne_n = (int)d[1];
                p->lfeat[l] = (int)d[2];
            }
        }
    }
    if (st != ML_OK) return st;

    /* common lengths (a crash inside a block write can leave the columns ragged) */
    long ns = -1, ne = -1;
    for (int l = 0; l < p->nlayers; l++)
        for (int j = 0; j < LD_N; j++) {
            const int i = LDS(l, j);
            if (p->ds[i] < 0) continue;
            const long r = ds_rows(p, i);
            if (r < 0) return h5u_fail(ML_ERR_FORMAT, f, p->dspath[i], "cannot read shape");
            long *m = j < LD_EVAL0 ? &ns : &ne;
            if (*m < 0 || r < *m) *m = r;
        }
    for (int i = DS_STEP0; i < DS_SVEC0 + SV_N; i++) {
        if (p->ds[i] < 0) continue;
        const long r = ds_rows(p, i);
        if (r < 0) return h5u_fail(ML_ERR_FORMAT, f, p->dspath[i], "cannot read shape");
        if (ns < 0 || r < ns) ns = r;
    }
    for (int i = DS_EVAL0; i < DS_EVENTS; i++) {
        if (p->ds[i] < 0) continue;
        const long r = ds_rows(p, i);
        if (r < 0) return h5u_fail(ML_ERR_FORMAT, f, p->dspath[i], "cannot read shape");
        if (ne < 0 || r < ne) ne = r;
    }
    const long nv = ds_rows(p, DS_EVENTS);
    if (nv < 0) return h5u_fail(ML_ERR_FORMAT, f, "/events", "cannot read shape");
    hsize_t ks = (hsize_t)ns, ke = (hsize_t)ne, kv = (hsize_t)nv;
    if (resume_step >= 0) {
        hid_t evstep = sess_event_step_type();
        if (evstep < 0) return h5u_fail(ML_ERR_IO, f, "/events", "cannot make type");
        st = rows_upto(p, DS_STEP0 + SC_STEP, ks, H5T_NATIVE_INT64, resume_step, &ks);
        if (st == ML_OK) st = rows_upto(p, DS_EVAL0 + EC_STEP, ke, H5T_NATIVE_INT64, resume_step, &ke);
        if (st == ML_OK) st = rows_upto(p, DS_EVENTS, kv, evstep, resume_step, &kv);
        H5Tclose(evstep);
        if (st != ML_OK) return st;
    }
    *keep_s = ks;
    *keep_e = ke;
    *keep_v = kv;
    p->had_steps = (hsize_t)(ns < 0 ? 0 : ns);
    p->had_evals = (hsize_t)(ne < 0 ? 0 : ne);
    p->had_events = (hsize_t)nv;
    return ML_OK;
}

/* `--resume DIR --epochs N`: /run's epochs, total_steps and command_line; the first extension
 * keeps the launch command line. Written to the resume's copy of live.h5 (append_apply), so a
 * refused resume leaves /run as it was. */
static ml_status write_extension(struct SessionLive *p, const SessionExtension *x) {
    hid_t run = H5Gopen2(p->file, "run", H5P_DEFAULT);
    if (run < 0) return h5u_fail(ML_ERR_FORMAT, p->path, "/run", "cannot open group");
    ml_status st = ML_OK;
    if (x->launch_line && H5Aexists(run, "launch_command_line") <= 0)
        st = h5u_attr_str(run, "launch_command_line", x->launch_line, p->path);
    H5Eclear2(H5E_DEFAULT);
    if (st == ML_OK) st = h5u_attr_str(run, "command_line", x->command_line, p->path);
    if (st == ML_OK) st = h5u_attr_i64(run, "epochs", x->epochs, p->path);
    if (st == ML_OK) st = h5u_attr_i64(run, "total_steps", x->total_steps, p->path);
    h5u_close(run);
    return st;
}

int session_fault(const char *stage) {
    const char *f = getenv("MOELAB_FAULT_RESUME");
    return f && !strcmp(f, stage);
}

/* The writes of a resume: cut every column to the rows kept, the extension (x, may be NULL),
 * status "running". */
static ml_status append_apply(struct SessionLive *p, hsize_t ks, hsize_t ke, hsize_t kv, const SessionExtension *x) {
    ml_status st;
    if ((st = set_rows(p, DS_STEP0, DS_SVEC0 + SV_N, ks)) != ML_OK) return st;
    if ((st = set_rows(p, DS_EVAL0, DS_EVENTS, ke)) != ML_OK) return st;
    if ((st = set_rows(p, DS_EVENTS, DS_EVENTS + 1, kv)) != ML_OK) return st;
    for (int l = 0; l < p->nlayers; l++) {
        if ((st = set_rows(p, LDS(l, LD_STEP0), LDS(l, LD_EVAL0), ks)) != ML_OK) return st;
        if ((st = set_rows(p, LDS(l, LD_EVAL0), LDS(l, LD_N), ke)) != ML_OK) return st;
    }
    p->n_steps = ks;
    p->n_evals = ke;
    p->n_events = kv;
    if (x && (st = write_extension(p, x)) != ML_OK) return st;
    return live_write_status(p, "running");
}

/* Closes the datasets and the file of p (not the types), ignoring errors. */
static herr_t live_close_file(struct SessionLive *p) {
    for (int i = 0; i < DS_N; i++) {
        h5u_close(p->ds[i]);
        p->ds[i] = -1;
    }
    herr_t r = 0;
    if (p->file >= 0) r = H5Fclose(p->file);
    p->file = -1;
    p->fd = -1;
    H5Eclear2(H5E_DEFAULT);
    return r;
}

/* Clears the superblock's "open for writing / SWMR writing" flags a writer left, as
 * `h5clear -s` does (the "clear_status_flags" file-access property), and, as
 * `h5clear --increment=0` does, raises the stored end-of-allocation to the end of the file: a
 * SWMR writer flushes datasets without rewriting the superblock, so after a crash the stored EOA
 * can be smaller than the data it wrote. Writes only the superblock. 0 on success. */
static int clear_status_flags(const char *path) {
    hid_t fapl = h5u_fapl_latest();
    hid_t fapl2 = fapl >= 0 ? H5Pcopy(fapl) : -1;
    hbool_t yes = 1;
    hid_t f2 = -1;
    if (fapl2 >= 0 && H5Pset(fapl2, "clear_status_flags", &yes) >= 0) f2 = H5Fopen(path, H5F_ACC_RDWR, fapl2);
    int ok = 0;
    if (f2 >= 0) {
        const herr_t inc = H5Fincrement_filesize(f2, 0);
        ok = H5Fclose(f2) >= 0 && inc >= 0;
    }
    h5u_close(fapl2);
    h5u_close(fapl);
    H5Eclear2(H5E_DEFAULT);
    return ok ? 0 : -1;
}

ml_status session_unflag(const char *dir) {
    char path[H5U_PATH_MAX];
    ml_status st = h5u_path(path, sizeof path, dir, "live.h5");
    if (st != ML_OK) return st;
    struct stat sb;
    if (lstat(path, &sb) != 0 || !S_ISREG(sb.st_mode)) return ml_fail(ML_ERR_IO, "%s: not a regular file", path);
    return clear_status_flags(path) == 0 ? ML_OK : ml_fail(ML_ERR_FORMAT, "%s: cannot clear its status flags", path);
}

/* Opens path read-only for the checks: SWMR-read, so that a file a crashed SWMR writer left
 * flagged opens as it is (nothing written); a file flagged by a writer that was not in SWMR mode
 * (killed between its open and its SWMR start) cannot be opened that way and has its flags
 * cleared first (that write only makes the file openable again). */
static hid_t open_for_checks(const char *path) {
    hid_t fapl = h5u_fapl_latest();
    if (fapl < 0) return -1;
    H5Pset_fclose_degree(fapl, H5F_CLOSE_STRONG);
    H5Pset_metadata_read_attempts(fapl, SESS_READ_ATTEMPTS);
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY | H5F_ACC_SWMR_READ, fapl);
    if (f < 0) {
        H5Eclear2(H5E_DEFAULT);
        if (clear_status_flags(path) == 0) f = H5Fopen(path, H5F_ACC_RDONLY | H5F_ACC_SWMR_READ, fapl);
    }
    H5Pclose(fapl);
    return f;
}

/* Room for the writes of a resume (the copy of the file it writes, and the space guard's first
 * reservation, ~3 MiB past its end), checked without writing: free space of the file system and
 * RLIMIT_FSIZE. */
static ml_status check_room(const char *path, const char *dir, off_t size) {
    const unsigned long long need = (unsigned long long)size + (3ULL << 20);
    struct rlimit rl;
    if (getrlimit(RLIMIT_FSIZE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
        need > (unsigned long long)rl.rlim_cur)
        return ml_fail(ML_ERR_IO,
                       "%s: cannot reserve space for the next writes (%llu bytes): %s (file size limit); "
                       "the file is unchanged",
                       path, need, strerror(EFBIG));
    struct statvfs vs;
    if (statvfs(dir, &vs) == 0) {
        const unsigned long long blocks = geteuid() == 0 ? vs.f_bfree : vs.f_bavail;
        const unsigned long long avail = blocks * (unsigned long long)(vs.f_frsize ? vs.f_frsize : vs.f_bsize);
        if (avail < need)
            return ml_fail(ML_ERR_IO,
                           "%s: cannot reserve space for the next writes (%llu bytes, %llu free): %s; "
                           "the file is unchanged",
                           path, need, avail, strerror(ENOSPC));
    }
    return ML_OK;
}

/* A resume that fails before its copy took live.h5's place: the copy is discarded, live.h5 is
 * untouched. */
static ml_status append_abort_copy(struct SessionLive *p, ml_status st, const char *work) {
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", ml_last_error());
    live_close_file(p);
    live_release(p, 0);
    unlink(work);
    return ml_fail(st, "%s", msg);
}

/* Copies src to dst (created or truncated, src's permission bits), flushed to disk. */
static ml_status copy_file(const char *src, const char *dst) {
    const int in = open(src, O_RDONLY | O_CLOEXEC);
    if (in < 0) return ml_fail(ML_ERR_IO, "%s: cannot read it: %s", src, strerror(errno));
    struct stat sb;
    if (fstat(in, &sb) != 0) {
        close(in);
        return ml_fail(ML_ERR_IO, "%s: %s", src, strerror(errno));
    }
    const int out = open(dst, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, sb.st_mode & 0777);
    if (out < 0) {
        close(in);
        return ml_fail(ML_ERR_IO, "%s: cannot write a copy for the resume: %s", dst, strerror(errno));
    }
    static char buf[1 << 16];
    int err = 0;
    for (;;) {
        const ssize_t n = read(in, buf, sizeof buf);
        if (n == 0) break;
        if (n < 0) {
            if (errno == EINTR) continue;
            err = errno;
            break;
        }
        for (ssize_t o = 0; o < n;) {
            const ssize_t w = write(out, buf + o, (size_t)(n - o));
            if (w < 0 && errno == EINTR) continue;
            if (w <= 0) {
                err = w < 0 ? errno : EIO;
                break;
            }
            o += w;
        }
        if (err) break;
    }
    if (!err && fsync(out) != 0) err = errno;
    close(in);
    if (close(out) != 0 && !err) err = errno;
    if (err) {
        unlink(dst);
        return ml_fail(ML_ERR_IO, "%s: cannot copy it for the resume: %s (nothing was changed)", src, strerror(err));
    }
    return ML_OK;
}

/* fsync of the folder holding path (a rename in it made durable); errors ignored. */
static void sync_dir(const char *path) {
    char d[H5U_PATH_MAX];
    snprintf(d, sizeof d, "%s", path);
    char *slash = strrchr(d, '/');
    if (slash) *slash = 0;
    else snprintf(d, sizeof d, ".");
    const int fd = open(d, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        (void)fsync(fd);
        close(fd);
    }
}

ml_status session_open_append(SessionWriter *w, const char *dir, long resume_step) {
    return session_open_append_ext(w, dir, resume_step, NULL);
}

ml_status session_open_append_ext(SessionWriter *w, const char *dir, long resume_step, const SessionExtension *x) {
    h5u_quiet();
    w->p = NULL;
    struct SessionLive *p = ml_alloc(sizeof *p);
    if (!p) return ml_fail(ML_ERR_NOMEM, "out of memory");
    live_init_table(p);
    ml_status st = h5u_path(p->path, sizeof p->path, dir, "live.h5");
    if (st != ML_OK) {
        live_release(p, 0);
        return st;
    }
    struct stat sb;
    if (lstat(p->path, &sb) != 0) {
        st = ml_fail(ML_ERR_IO, "%s: %s", p->path, strerror(errno));
        live_release(p, 0);
        return st;
    }
    if (!S_ISREG(sb.st_mode)) { /* a FIFO would block the opens below */
        st = ml_fail(ML_ERR_IO, "%s: not a regular file", p->path);
        live_release(p, 0);
        return st;
    }
    if (H5Fis_hdf5(p->path) <= 0) {
        H5Eclear2(H5E_DEFAULT);
        live_release(p, 0);
        return ml_fail(ML_ERR_FORMAT, "%s is not an HDF5 file", dir);
    }
    if ((st = live_types(p)) != ML_OK) {
        live_release(p, 0);
        return st;
    }

    /* 1. every check on a read-only handle: a refused resume writes nothing */
    hsize_t ks = 0, ke = 0, kv = 0;
    p->file = open_for_checks(p->path);
    if (p->file < 0) st = h5u_fail(ML_ERR_FORMAT, p->path, "", "cannot open (damaged or truncated?)");
    else st = append_plan(p, resume_step, &ks, &ke, &kv);
    live_close_file(p);
    if (st == ML_OK && stat(p->path, &sb) == 0) st = check_room(p->path, dir, sb.st_size);
    if (st != ML_OK) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", ml_last_error());
        live_release(p, 0);
        return ml_fail(st, "%s", msg);
    }

    /* 2. the resume's writes (rows cut, the status, the SWMR start) go to a copy of live.h5, renamed
     * over it only once they are flushed and the copy is in SWMR mode: HDF5 writing outside SWMR
     * mode (datasets shrunk, metadata evicted in any order) is not crash-safe, and a kill in that
     * window used to leave a live.h5 whose chunks no longer inflated. A kill before the rename
     * leaves live.h5 as it was (the next resume copies it again), after it the repaired file. */
    char work[H5U_PATH_MAX + 16];
    snprintf(work, sizeof work, "%s.resume", p->path);
    if ((st = copy_file(p->path, work)) == ML_OK && session_fault("copy"))
        st = ml_fail(ML_ERR_IO, "%s: refused after the copy (MOELAB_FAULT_RESUME=copy)", work);
    if (st != ML_OK) {
        unlink(work);
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", ml_last_error());
        live_release(p, 0);
        return ml_fail(st, "%s", msg);
    }
    /* a crashed SWMR writer's flags are cleared first (see clear_status_flags) */
    hid_t fapl = h5u_fapl_latest();
    if (fapl < 0) {
        unlink(work);
        live_release(p, 0);
        return h5u_fail(ML_ERR_IO, p->path, "", "cannot make file access list");
    }
    p->file = H5Fopen(work, H5F_ACC_RDWR, fapl);
    if (p->file < 0) {
        H5Eclear2(H5E_DEFAULT);
        if (clear_status_flags(work) == 0) p->file = H5Fopen(work, H5F_ACC_RDWR, fapl);
    }
    H5Pclose(fapl);
    if (p->file < 0) {
        st = h5u_fail(ML_ERR_FORMAT, p->path, "", "cannot open (a copy of it) for appending");
        unlink(work);
        live_release(p, 0);
        return st;
    }
    /* the checks again on the writer's handle (cheap; the file may have changed in between) */
    st = append_plan(p, resume_step, &ks, &ke, &kv);
    if (st == ML_OK) {
        live_get_fd(p);
        st = live_reserve(p, (hsize_t)1 << 20);
    }
    if (st != ML_OK) return append_abort_copy(p, st, work);
    /* 3. the writes, then the copy takes live.h5's place */
    st = append_apply(p, ks, ke, kv, x);
    if (st == ML_OK && session_fault("apply"))
        st = ml_fail(ML_ERR_IO, "%s: refused after the writes (MOELAB_FAULT_RESUME=apply)", work);
    if (st == ML_OK) st = live_flush(p);
    if (st == ML_OK && H5Fstart_swmr_write(p->file) < 0)
        st = h5u_fail(ML_ERR_IO, p->path, "", "cannot start SWMR writing");
    if (st == ML_OK && session_fault("rename"))
        st = ml_fail(ML_ERR_IO, "%s: cannot move the resumed copy into place: %s (MOELAB_FAULT_RESUME=rename)",
                     p->path, strerror(EIO));
    if (st == ML_OK && (p->fd < 0 || fsync(p->fd) == 0) && rename(work, p->path) != 0)
        st = ml_fail(ML_ERR_IO, "%s: cannot move the resumed copy into place: %s", p->path, strerror(errno));
    if (st != ML_OK) return append_abort_copy(p, st, work);
    sync_dir(p->path);
    /* rows after the checkpoint (the run went on past it before it stopped) are cut: training those
     * steps again writes them again, identically; said so, never silently */
    if (resume_step >= 0 && (ks < p->had_steps || ke < p->had_evals || kv < p->had_events))
        ml_log(1,
               "%s: resuming at step %ld drops what the run recorded after that checkpoint: %llu step rows, %llu "
               "evaluation rows and %llu events (training those steps again writes them again)",
               p->path, resume_step, (unsigned long long)(p->had_steps - ks), (unsigned long long)(p->had_evals - ke),
               (unsigned long long)(p->had_events - kv));
    w->p = p;
    return ML_OK;
}
