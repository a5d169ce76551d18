/* fuzz_session.c — libFuzzer target for the readers of the HDF5 files moelab writes itself (formats in
 * sessions/README.md): a session's live.h5, its checkpoints ckpt-<step>.h5 and a sweep's
 * sweep.h5. The readers take paths, so the input goes to a file in a private temporary folder
 * (/dev/shm when it can, else /tmp), named as the reader expects; the first byte chooses the kind:
 *   0  DIR/live.h5: session_read_info, session_history_load (steps, evaluations, per-layer groups,
 *      events; then the t-SNE rows of the last evaluation, top level and per layer, and one
 *      session_follow_poll), session_read_events, session_read_run_attr_alloc, session_export_csv,
 *      sweep_h5_read_run, sweep_h5_read_routing;
 *   1  DIR/ckpt-6.h5: ckpt_validate (in a forked child: see cov_begin), then, if it passed, as
 *      resume does, ckpt_read_attr and ckpt_read into this process's trainer (the
 *      configuration the seeds were written with, fz_config), ckpt_find_latest,
 *      ckpt_restore_latest;
 *   2  DIR/sweep.h5: sweep_h5_read.
 * A read that succeeds must be self-consistent: counts >= 0, arrays present when counts > 0 (and
 * touched to their last element, so ASan sees a short one), strings terminated inside their
 * buffers, indices in range. A read that fails must leave a non-empty one-line message in
 * ml_last_error(). Every execution must close every HDF5 id it opened (H5Fget_obj_count).
 * Run with -detect_leaks=0 (libhdf5 1.10 leaks internal objects on some malformed files).
 * FUZZ_SESSION_SHOW_ERRORS=1 prints every failing reader's message.
 * Seeds (FUZZ_STANDALONE): a small format-2 session (a MoE head and a routed backbone layer, two
 * evaluations, events), a checkpoint of it, a sweep summary, the version-1 fixture session when the
 * source tree is there, and truncated and bit-flipped copies of each. */
#define _GNU_SOURCE

#ifndef FUZZ_STANDALONE
/* No function of this file is instrumented, the inline ones of the headers included: the coverage
 * pass would add its own declarations of the counter section's symbols (below) to the file, clash
 * with them and register no counters (fuzz_h5.c). The readers in the libraries are what libFuzzer
 * measures. */
#pragma clang attribute push(__attribute__((no_sanitize("coverage"))), apply_to = function)
#endif

#include "core/common.h"
#include "datasets/dataset.h"
#include "sessions/history.h"
#include "sessions/session.h"
#include "sessions/sweep_h5.h"
#include "trainer_util.h"

#include <ftw.h>
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz_driver.h"

#include "fuzz_childcov.h"

enum { FZ_LIVE, FZ_CKPT, FZ_SWEEP, FZ_KINDS };

static char g_tmp[256];                         /* the private folder */
static char g_sess[300], g_csv[300], g_ck[300]; /* the session folder, the export's, the checkpoints' */
static Dataset g_ds;
static Trainer g_tr;
static int g_have_tr;

/* The model of the seeds' session and checkpoint: tiny, a MoE head and a routed layer after
 * stage 2 (format 2's /layers and /backbone rows), AdamW, t-SNE samples. */
static void fz_config(TrainConfig *c) {
    train_config_defaults(c);
    c->model.width = 0.25f;
    c->model.batch = 16;
    c->model.head.kind = HEAD_MOE;
    c->model.head.E = 4;
    c->model.head.k = 2;
    c->model.head.h = 8;
    c->model.moe_n = 1;
    c->model.moe_after[0] = 2;
    c->model.bb_nh = 1;
    c->model.bb_hidden[0] = 8;
    c->model.bb_nE = 1;
    c->model.bb_E[0] = 3;
    c->opt.kind = OPT_ADAMW;
    optim_config_defaults(&c->opt, OPT_ADAMW);
    c->epochs = 2;
    c->threads = 1;
    c->log_every = 1;
    c->tsne_samples = 8;
    c->route.window = 4;
    c->route.min_steps = 2;
}

static void rm_tree_in(const char *dir);

static void cleanup(void) {
    if (!g_tmp[0]) return;
    rm_tree_in(g_tmp);
    rmdir(g_tmp);
}

static void fz_setup(void) {
    static int done;
    if (done) return;
    done = 1;
    snprintf(g_tmp, sizeof g_tmp, "/dev/shm/moelab-fuzz-session-XXXXXX");
    if (!mkdtemp(g_tmp)) {
        snprintf(g_tmp, sizeof g_tmp, "/tmp/moelab-fuzz-session-XXXXXX");
        if (!mkdtemp(g_tmp)) abort();
    }
    atexit(cleanup);
    snprintf(g_sess, sizeof g_sess, "%s/s", g_tmp);
    snprintf(g_csv, sizeof g_csv, "%s/csv", g_tmp);
    snprintf(g_ck, sizeof g_ck, "%s/c", g_tmp);
    if (mkdir(g_sess, 0700) || mkdir(g_ck, 0700)) abort();
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    SyntheticOptions o;
    synthetic_defaults(&o);
    o.h = o.w = 8;
    o.c = 3;
    o.classes = 4;
    o.n_train = 64;
    o.n_test = 16;
    o.seed = 5;
    if (synthetic_generate(&g_ds, &o) != ML_OK) abort();
    TrainConfig c;
    fz_config(&c);
    if (trainer_init_ds(&g_tr, &c, &g_ds) != ML_OK) abort();
    g_have_tr = 1;
}

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb;
    (void)flag;
    if (ftw->level > 0) remove(p);
    return 0;
}

/* Removes everything inside dir (not dir itself). */
static void rm_tree_in(const char *dir) { nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS); }

static void put_file(const char *path, const uint8_t *d, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) abort();
    if (n && fwrite(d, 1, n, f) != n) abort();
    if (fclose(f)) abort();
}

/* ---- the checks */

static void check_str(const char *s, size_t n) {
    if (!memchr(s, 0, n)) abort();
}

static void failed(const char *who) {
    const char *e = ml_last_error();
    if (!e || !e[0] || strchr(e, '\n')) abort();
    if (getenv("FUZZ_SESSION_SHOW_ERRORS")) fprintf(stderr, "fuzz_session: %s: %s\n", who, e);
}

static void check_info(const SessionInfo *i) {
    check_str(i->status, sizeof i->status);
    check_str(i->moelab_version, sizeof i->moelab_version);
    check_str(i->created, sizeof i->created);
    check_str(i->dataset, sizeof i->dataset);
    check_str(i->dataset_spec_out, sizeof i->dataset_spec_out);
    check_str(i->head, sizeof i->head);
    check_str(i->backbone, sizeof i->backbone);
    if (i->steps_logged < 0 || i->evals < 0 || i->events < 0) abort();
}

static volatile long g_sink; /* values touched, so that ASan checks every array to its end */

static void check_tsne(ml_status st, const float *feat, const int *ex, const int *lab, int n, int d, const char *who) {
    if (st == ML_OK) {
        if (n < 1 || d < 1 || !feat || !ex || !lab) abort();
        g_sink += (long)feat[(size_t)n * (size_t)d - 1] + ex[n - 1] + lab[n - 1];
    } else {
        if (feat || ex || lab) abort();
        failed(who);
    }
    ml_free((void *)feat);
    ml_free((void *)ex);
    ml_free((void *)lab);
}

static void check_history(SessionHistory *h) {
    check_info(&h->info);
    check_str(h->path, sizeof h->path);
    check_str(h->command_line, sizeof h->command_line);
    check_str(h->config_json, sizeof h->config_json);
    if (h->K < 1 || !h->class_names || h->E < 0 || h->E > MOE_MAX_EXPERTS) abort();
    for (int c = 0; c < h->K; c++) g_sink += (long)strlen(h->class_names[c]);
    if (h->nsteps < 0 || h->nevals < 0 || h->nevents < 0 || h->nlayers < 0 || h->nlayers > REC_MAX_LAYERS) abort();
    if (h->nsteps > 0 && (!h->steps || !h->step_wall)) abort();
    if (h->nevals > 0 && (!h->evals || !h->eval_wall)) abort();
    if (h->nevents > 0 && !h->events) abort();
    for (long i = 0; i < h->nsteps; i++) g_sink += h->steps[i].step + (long)h->step_wall[i];
    for (long i = 0; i < h->nevents; i++) check_str(h->events[i].text, sizeof h->events[i].text);
    const size_t ke = (size_t)h->K * (size_t)h->E;
    for (int i = 0; i < h->nevals; i++) {
        const EvalRecord *v = &h->evals[i];
        g_sink += v->epoch + (long)h->eval_wall[i];
        if (h->E > 0) {
            if (!v->moe.class_expert || v->moe.classes != h->K || v->moe.experts != h->E) abort();
            g_sink += v->moe.class_expert[0] + v->moe.class_expert[ke - 1];
        }
    }
    for (int l = 0; l < h->nlayers; l++) {
        const LayerInfo *li = &h->layer[l];
        check_str(li->name, sizeof li->name);
        if (li->E < 1 || li->E > MOE_MAX_EXPERTS) abort();
        for (int i = 0; i < h->nevals; i++) {
            const EvalLayer *el = &h->evals[i].layer[l];
            if (!el->class_expert || el->experts != li->E || el->classes != h->K) abort();
            g_sink += el->class_expert[0] + el->class_expert[(size_t)h->K * (size_t)li->E - 1];
        }
    }
    /* the scrubber's look-ups stay in range whatever the rows hold */
    if (h->nsteps > 0) {
        const long s = session_history_step_at(h, h->steps[h->nsteps - 1].step);
        if (s < -1 || s >= h->nsteps) abort();
    }
    if (h->nevals > 0) {
        const int e = session_history_eval_at_epoch(h, h->evals[h->nevals - 1].epoch);
        if (e < -1 || e >= h->nevals) abort();
    }
    long a = 0, b = 0;
    session_history_events_around(h, h->nsteps > 0 ? h->steps[0].step : 0, 3, 3, &a, &b);
    if (a < 0 || b < a || b > h->nevents) abort();
    /* the t-SNE rows, read on demand */
    float *feat;
    int *ex, *lab, n, d;
    if (h->E > 0 && h->nevals > 0) {
        ml_status st = session_history_tsne(h, h->nevals - 1, &feat, &ex, &lab, &n, &d);
        check_tsne(st, feat, ex, lab, n, d, "session_history_tsne");
    }
    for (int l = 0; l < h->nlayers && h->nevals > 0; l++) {
        ml_status st = session_history_layer_tsne(h, l, h->nevals - 1, &feat, &ex, &lab, &n, &d);
        check_tsne(st, feat, ex, lab, n, d, "session_history_layer_tsne");
    }
}

static void fuzz_live(void) {
    SessionInfo info;
    ml_status st = session_read_info(g_sess, &info);
    if (st == ML_OK) check_info(&info);
    else failed("session_read_info");

    SessionHistory h;
    st = session_history_load(g_sess, &h);
    if (st == ML_OK) {
        check_history(&h);
        SessionFollow *f = session_follow_open(&h);
        if (f) {
            long added = -1;
            st = session_follow_poll(f, &h, &added);
            if (st == ML_OK && added != 0) abort(); /* nothing was appended */
            if (st != ML_OK) failed("session_follow_poll");
            session_follow_close(f);
            check_history(&h); /* valid after a poll, failed or not */
        } else {
            failed("session_follow_open");
        }
    } else {
        failed("session_history_load");
        if (h.steps || h.evals || h.events || h.class_names || h.nsteps || h.nevals) abort(); /* left empty */
    }
    session_history_free(&h);

    SessionEventRow *ev = NULL;
    long n = -1;
    st = session_read_events(g_sess, &ev, &n);
    if (st == ML_OK) {
        if (n < 0 || (n > 0 && !ev)) abort();
        for (long i = 0; i < n; i++) check_str(ev[i].text, sizeof ev[i].text);
    } else {
        if (ev || n) abort();
        failed("session_read_events");
    }
    free(ev);

    char *cfg = NULL;
    st = session_read_run_attr_alloc(g_sess, "config_json", &cfg);
    if (st == ML_OK) {
        if (!cfg) abort();
        g_sink += (long)strlen(cfg);
    } else {
        if (cfg) abort();
        failed("session_read_run_attr_alloc");
    }
    free(cfg);

    st = session_export_csv(g_sess, g_csv);
    if (st != ML_OK) failed("session_export_csv");
    rm_tree_in(g_csv);
    rmdir(g_csv);

    double rn = 0, rr = 0, sec = 0;
    long steps = 0;
    st = sweep_h5_read_run(g_sess, &rn, &rr, &sec, &steps);
    if (st != ML_OK) failed("sweep_h5_read_run");
    SweepRun row;
    memset(&row, 0, sizeof row);
    st = sweep_h5_read_routing(g_sess, &row);
    if (st != ML_OK) failed("sweep_h5_read_routing");
}

static void fuzz_ckpt(const char *path) {
    long step = -1;
    cov_begin();
    ml_status st = ckpt_validate(path, &step);
    cov_merge();
    StateView v;
    if (st == ML_OK) { /* as resume does: ckpt_read and ckpt_read_attr only after a validation */
        char buf[256];
        st = ckpt_read_attr(path, "session_id", buf, sizeof buf);
        if (st == ML_OK) check_str(buf, sizeof buf);
        else failed("ckpt_read_attr");
        trainer_state(&g_tr, &v);
        st = ckpt_read(path, &v);
        if (st != ML_OK) failed("ckpt_read");
    } else {
        failed("ckpt_validate");
    }
    char found[1024], report[2048];
    cov_begin();
    st = ckpt_find_latest(g_ck, found, sizeof found, report, sizeof report);
    cov_merge();
    if (st == ML_OK) check_str(found, sizeof found);
    else failed("ckpt_find_latest");
    check_str(report, sizeof report);
    trainer_state(&g_tr, &v);
    cov_begin();
    st = ckpt_restore_latest(g_ck, &v, NULL, found, sizeof found, report, sizeof report);
    cov_merge();
    if (st != ML_OK) failed("ckpt_restore_latest");
    check_str(report, sizeof report);
}

static void fuzz_sweep(const char *path) {
    SweepSummary s;
    ml_status st = sweep_h5_read(path, &s);
    if (st != ML_OK) {
        failed("sweep_h5_read");
        if (s.axes || s.values || s.configs || s.runs || s.args || s.nruns || s.nconfigs || s.naxes) abort();
        return;
    }
    if (s.naxes < 0 || s.nconfigs < 0 || s.nruns < 0 || !s.args) abort();
    if ((s.naxes > 0 && !s.axes) || (s.nconfigs > 0 && !s.configs) || (s.nruns > 0 && !s.runs)) abort();
    if (s.naxes > 0 && s.nconfigs > 0 && !s.values) abort();
    g_sink += (long)strlen(s.args);
    for (int a = 0; a < s.naxes; a++) g_sink += (long)strlen(s.axes[a]);
    for (long i = 0; i < (long)s.nconfigs * s.naxes; i++) g_sink += (long)strlen(s.values[i]);
    for (int c = 0; c < s.nconfigs; c++) {
        const SweepConfig *k = &s.configs[c];
        check_str(k->label, sizeof k->label);
        check_str(k->head, sizeof k->head);
        /* the summary's users index configs with these (app/sweep_summary.c, sweep_agree.c) */
        if (k->baseline < -1 || k->baseline >= s.nconfigs) abort();
    }
    for (int r = 0; r < s.nruns; r++) {
        const SweepRun *w = &s.runs[r];
        check_str(w->name, sizeof w->name);
        check_str(w->status, sizeof w->status);
        if (w->config < 0 || w->config >= s.nconfigs) abort();
    }
    sweep_summary_free(&s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1 || size > (4u << 20)) return 0;
    fz_setup();
    const int kind = data[0] % FZ_KINDS;
    char path[400];
    switch (kind) {
    case FZ_LIVE:
        snprintf(path, sizeof path, "%s/live.h5", g_sess);
        put_file(path, data + 1, size - 1);
        fuzz_live();
        break;
    case FZ_CKPT:
        snprintf(path, sizeof path, "%s/ckpt-6.h5", g_ck);
        put_file(path, data + 1, size - 1);
        fuzz_ckpt(path);
        break;
    default:
        snprintf(path, sizeof path, "%s/sweep.h5", g_tmp);
        put_file(path, data + 1, size - 1);
        fuzz_sweep(path);
        break;
    }
    unlink(path);
    /* every reader closes what it opened, on every path */
    const ssize_t open_ids = H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_ALL);
    if (open_ids != 0) {
        fprintf(stderr, "fuzz_session: %zd HDF5 ids left open (kind %d)\n", open_ids, kind);
        abort();
    }
    return 0;
}

#ifdef FUZZ_STANDALONE
/* ---- seeds: files written by moelab's own writers */

static uint8_t *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    const long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc((size_t)len + 1);
    if (!b || fread(b + 1, 1, (size_t)len, f) != (size_t)len) abort();
    fclose(f);
    *n = (size_t)len + 1;
    return b;
}

/* The file as an input of `kind`, whole, truncated and with bits flipped. */
static void seed_variants(void (*run)(const uint8_t *, size_t), const char *path, int kind) {
    size_t n = 0;
    uint8_t *b = slurp(path, &n);
    if (!b) {
        fprintf(stderr, "fuzz_session: no seed %s\n", path);
        return;
    }
    b[0] = (uint8_t)kind;
    run(b, n);
    for (size_t k = 1; k < 8; k++) run(b, 1 + (n - 1) * k / 8);
    const size_t step = (n - 1) / 24 + 1;
    for (size_t k = 1; k < n; k += step) {
        b[k] ^= 0x08;
        run(b, n);
        b[k] ^= 0x08;
    }
    free(b);
}

static void write_sweep(const char *path) {
    static char *axes[] = {"head", "hidden"};
    static char *values[] = {"dense", "16", "moe", "16", "moe", "32"};
    SweepConfig cf[3];
    memset(cf, 0, sizeof cf);
    SweepRun rn[6];
    memset(rn, 0, sizeof rn);
    for (int c = 0; c < 3; c++) {
        snprintf(cf[c].label, sizeof cf[c].label, "head=%s,hidden=%s", values[2 * c], values[2 * c + 1]);
        snprintf(cf[c].head, sizeof cf[c].head, "%s", values[2 * c]);
        cf[c].n = cf[c].n_expected = 2;
        cf[c].baseline = c == 0 ? -1 : 0;
        cf[c].final_mean = 0.5 + 0.1 * c;
        cf[c].collapse_step = c == 2 ? 40 : NAN;
    }
    for (int r = 0; r < 6; r++) {
        rn[r].index = r;
        rn[r].config = r % 3;
        rn[r].seed = (uint64_t)(r / 3 + 1);
        rn[r].steps = 64;
        snprintf(rn[r].name, sizeof rn[r].name, "c%d-s%d", r % 3, r / 3);
        snprintf(rn[r].status, sizeof rn[r].status, "%s", r == 5 ? "failed" : "finished");
        rn[r].final_acc = rn[r].best_acc = 0.5;
        rn[r].collapse_step = rn[r].collapse_first = -1;
    }
    SweepSummary s = {"--vary head=dense,moe --seeds 2", 2, 0.95, 2, axes, 3, values, cf, 6, rn};
    if (sweep_h5_write(path, &s) != ML_OK) {
        fprintf(stderr, "sweep_h5_write: %s\n", ml_last_error());
        abort();
    }
}

/* A session of two epochs of 4 steps (an evaluation after each, events among them) and a
 * checkpoint in the middle of the second epoch, written with fz_config's trainer. */
static void write_session(const char *dir, const char *ckdir) {
    TrainConfig c;
    fz_config(&c);
    Trainer t;
    if (trainer_init_ds(&t, &c, &g_ds) != ML_OK) abort();
    SessionInfo info;
    memset(&info, 0, sizeof info);
    info.run = test_run(&t);
    info.command_line = "moelab train --dataset synthetic:8x8x3:4:64 --head moe --moe-after 2";
    info.dataset_spec = "synthetic:8x8x3:4:64";
    info.session_id = "0123456789abcdef0123456789abcdef";
    info.commands_text = "at 3 set cf 1.5\n";
    SessionWriter w;
    if (session_create(&w, dir, &info) != ML_OK) abort();
    int bad = 0;
    while (t.epoch < c.epochs && !bad) {
        StepRecord r;
        bad |= trainer_step(&t, &r) != ML_OK;
        bad |= session_append_step(&w, &r) != ML_OK;
        if (t.step == 3) bad |= session_append_event(&w, t.step, 0, "set cf 1.5  # file") != ML_OK;
        if (t.step == 5) bad |= session_append_event(&w, t.step, 0, "collapse at step 5 (training view, x)") != ML_OK;
        if (t.step == 6) {
            bad |= session_sync(&w) != ML_OK;
            StateView v;
            trainer_state(&t, &v);
            bad |= ckpt_write(ckdir, &v, 1) != ML_OK;
            bad |= session_append_event(&w, t.step, 0, "snapshot") != ML_OK;
        }
        if (t.pos == 0) {
            EvalRecord er;
            bad |= trainer_eval_record(&t, &er, 0.5) != ML_OK;
            bad |= session_append_eval(&w, &er) != ML_OK;
        }
    }
    bad |= session_close(&w, "finished") != ML_OK;
    trainer_free(&t);
    if (bad) {
        fprintf(stderr, "writing the seed session: %s\n", ml_last_error());
        abort();
    }
}

static void fuzz_seeds(void (*run)(const uint8_t *, size_t)) {
    fz_setup();
    char dir[400], ck[400], p[500];
    snprintf(dir, sizeof dir, "%s/seed-session", g_tmp);
    snprintf(ck, sizeof ck, "%s/seed-ckpt", g_tmp);
    write_session(dir, ck);
    snprintf(p, sizeof p, "%s/live.h5", dir);
    seed_variants(run, p, FZ_LIVE);
    snprintf(p, sizeof p, "%s/ckpt-6.h5", ck);
    seed_variants(run, p, FZ_CKPT);
    snprintf(p, sizeof p, "%s/sweep.h5", g_tmp);
    write_sweep(p);
    seed_variants(run, p, FZ_SWEEP);
    /* the version-1 fixture (a session written before the per-layer groups) */
    char src[400];
    snprintf(src, sizeof src, "%s", __FILE__);
    char *slash = strrchr(src, '/');
    if (slash) {
        *slash = 0;
        snprintf(p, sizeof p, "%s/fixtures/v1-moe/live.h5", src);
        if (access(p, R_OK) == 0) seed_variants(run, p, FZ_LIVE);
        snprintf(p, sizeof p, "%s/fixtures/v1-moe/ckpt-12.h5", src);
        if (access(p, R_OK) == 0) seed_variants(run, p, FZ_CKPT);
    }
    rm_tree_in(dir);
    rmdir(dir);
    rm_tree_in(ck);
    rmdir(ck);
}
#endif

#ifndef FUZZ_STANDALONE
#pragma clang attribute pop
#endif
