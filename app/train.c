/* train.c — `moelab train`: the live screen on a terminal (app/tui.c), headless training with
 * per-epoch lines otherwise (or with --headless), --dry-run (layers, parameters, FLOPs, rho),
 * --resume, and the `replay` and `export` subcommands. */
#include "app.h"
#include "commands.h"
#include "options.h"
#include "runsession.h"
#include "tui.h"

#include <math.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <stdlib.h>

#include <stdio.h>
#include <string.h>

static long tensor_params(const Model *m, int idx) { return idx >= 0 ? m->params[idx].n : 0; }

static void print_dry_run(const Model *m, const Dataset *ds, const TrainConfig *t) {
    const ModelConfig *c = &m->cfg;
    const MoeConfig *h = &c->head;
    printf("dataset   %s: %d train / %d test images, %dx%dx%d, %d classes\n", ds->name, ds->train.n,
           ds->test.n, ds->h, ds->w, ds->c, ds->classes);
    printf("model     backbone %s, width %g (c0 = %d, d = %d), head %s", backbone_name(c->backbone),
           c->width, m->c0, m->d, moe_head_name(h->kind));
    if (h->kind == HEAD_DENSE) printf(" (hidden k*h = %d)\n", h->k * h->h);
    else printf(" (E = %d, k = %d, h = %d, cf = %g)\n", h->E, h->k, h->h, h->cf);
    printf("\n%-22s %-16s %12s %16s\n", "layer", "output (C,H,W)", "params", "FLOPs/sample");
    long total_params = 0;
    for (int i = 0; i < m->nunits; i++) {
        const Unit *u = &m->units[i];
        long np = m->params[u->w].n + m->params[u->gamma].n + m->params[u->beta].n;
        char shape[32];
        snprintf(shape, sizeof shape, "%dx%dx%d", u->OC, u->Ho, u->Wo);
        printf("%-22s %-16s %12ld %16.0f\n", u->label, shape, np, u->flops);
        total_params += np;
    }
    char shape[32];
    snprintf(shape, sizeof shape, "%d", m->d);
    printf("%-22s %-16s %12d %16d\n", "pool", shape, 0, 0);
    if (h->kind == HEAD_DENSE) {
        long np = tensor_params(m, m->fc1_w) + tensor_params(m, m->fc1_b) + tensor_params(m, m->fc2_w) + tensor_params(m, m->fc2_b);
        printf("%-22s %-16s %12ld %16.0f\n", "head.mlp", shape, np, m->flops_expert);
        total_params += np;
    } else {
        long nr = m->params[m->moe_first].n, ne = 0;
        for (int i = 1; i < 5; i++) ne += m->params[m->moe_first + i].n;
        printf("%-22s %-16s %12ld %16.0f\n", "head.router", "", nr, m->flops_router);
        char lab[48];
        snprintf(lab, sizeof lab, "head.experts (%d)", h->E);
        printf("%-22s %-16s %12ld %16.0f  (one expert %.0f, %.3g active per sample)\n", lab, shape, ne,
               m->flops_routed, m->flops_expert, m->flops_routed / m->flops_expert);
        total_params += nr + ne;
    }
    long nc = m->params[m->cls_w].n + m->params[m->cls_b].n;
    snprintf(shape, sizeof shape, "%d", c->classes);
    printf("%-22s %-16s %12ld %16.0f\n", "classifier", shape, nc, m->flops_classifier);
    total_params += nc;
    printf("\nparameters  %ld (%.2f MiB)\n", total_params, total_params * 4.0 / 1048576.0);
    printf("FLOPs       forward %.0f per sample (backbone %.0f, head %.0f, classifier %.0f)\n",
           model_flops(m), m->flops_backbone, m->flops_head_active, m->flops_classifier);
    printf("            training step ~%.1f MFLOP per sample (3x forward)\n", 3.0 * model_flops(m) / 1e6);
    printf("rho         %.3f nominal (routed %.0f / total %.0f FLOPs)\n", model_rho_nominal(m),
           m->flops_routed, model_flops(m));
    printf("schedule    %d epochs x %d steps, batch %d, %s lr %g (%s)\n", t->epochs,
           ds->train.n / c->batch, c->batch, optim_kind_name(t->opt.kind), t->lr.base, lr_kind_name(t->lr.kind));
}

typedef struct {
    int epochs;
    StepRecord last;
    int have_last;
    ScheduledCmd *cmds; /* --commands FILE (or the replayed event log), sorted by step */
    int ncmds, next;
    RunSession *rs;
    int quiet;
} Printer;

static volatile sig_atomic_t g_stop_signal = 0;
static void on_signal(int sig) { g_stop_signal = sig; }

static void on_eval(const EvalRecord *r, void *user);

/* Applies the commands scheduled for this step boundary; returns 1 to stop (quit). */
static int before_step(Trainer *t, void *user) {
    Printer *p = user;
    if (g_stop_signal) {
        printf("[step %ld] %s: stopping cleanly\n", t->step, g_stop_signal == SIGINT ? "interrupt" : "terminated");
        return 1;
    }
    if (p->rs->ckpt_steps > 0 && t->step > 0 && t->step % p->rs->ckpt_steps == 0 && t->step != p->rs->last_ckpt_step)
        runsession_checkpoint(p->rs, t, NULL);
    while (p->next < p->ncmds && p->cmds[p->next].step <= t->step) {
        const TrainerCmd *c = &p->cmds[p->next++].cmd;
        printf("[step %ld] %s\n", t->step, c->text);
        runsession_event(p->rs, t->step, c->text);
        switch (c->kind) {
        case CMD_SET:
        case CMD_ANNEAL:
            if (trainer_apply(t, c) != ML_OK) printf("[step %ld] error: %s\n", t->step, ml_last_error());
            break;
        case CMD_SNAPSHOT:
            runsession_checkpoint(p->rs, t, "snapshot");
            break;
        case CMD_QUIT:
            return 1;
        case CMD_EVAL: {
            EvalRecord er;
            if (trainer_eval_record(t, &er, 0.0) == ML_OK) on_eval(&er, p);
            else printf("[step %ld] error: %s\n", t->step, ml_last_error());
            break;
        }
        default:
            printf("[step %ld] note: '%s' has no effect in a headless run\n", t->step, c->text);
        }
        fflush(stdout);
    }
    return 0;
}

static void on_step(const StepRecord *r, void *user) {
    Printer *p = user;
    p->last = *r;
    p->have_last = 1;
    runsession_step(p->rs, r);
}

static void on_eval_print(const EvalRecord *r, Printer *p);
static Trainer *g_trainer;
static void on_eval(const EvalRecord *r, void *user) {
    Printer *p = user;
    runsession_eval(p->rs, g_trainer, r);
    on_eval_print(r, p);
}

static void on_eval_print(const EvalRecord *r, Printer *p) {
    printf("epoch %3d/%d  step %6ld  train loss %.4f acc %6.2f%%  test loss %.4f acc %6.2f%%  %6.0f img/s  %6.1f s\n",
           r->epoch, p->epochs, r->step, r->train_loss, 100 * r->train_acc, r->test_loss,
           100 * r->test_acc, r->img_per_s, r->elapsed);
    if (r->has_moe) {
        const double tau = p->have_last ? p->last.tau : 0.0, aux = p->have_last ? p->last.moe.l_aux : 0.0;
        printf("  routing  load entropy %.3f  top1 share %.2f  drop %.1f%%  dead %d/%d  MaxVio %.2f  rho %.3f (nominal %.3f)  "
               "I(class;expert) %.3f nats  tau %.3g  aux %.4f  collapse %s%s%s\n",
               r->window_load_entropy, r->window_first_share, 100 * r->train_drop_frac, r->dead_experts, r->experts, r->train_maxvio,
               r->train_rho_realized, r->rho_nominal, r->mutual_info, tau, aux, r->collapsed ? "YES" : "no",
               r->collapsed ? " " : "", r->collapsed ? routewin_reason_text(r->collapse_reason) : "");
    }
    fflush(stdout);
}

/* ---- the live screen: these TuiHooks run on the trainer thread and write the session */
static void tui_on_step(const StepRecord *r, void *user) { runsession_step(user, r); }
static void tui_on_eval(const EvalRecord *r, void *user) { runsession_eval(user, g_trainer, r); }
static void tui_on_event(long step, double wall, const char *text, void *user) {
    (void)wall;
    runsession_event(user, step, text);
}
static ml_status tui_on_snapshot(Trainer *t, void *user) {
    RunSession *rs = user;
    if (!rs->active) return ml_fail(ML_ERR_STATE, "snapshot: this run has no session (--no-session)");
    runsession_checkpoint(rs, t, "snapshot");
    return rs->failed ? ml_fail(ML_ERR_IO, "snapshot failed: see the log") : ML_OK;
}
static void tui_on_finish(Trainer *t, const char *status, void *user) { runsession_finish(user, t, status); }
static int tui_before_step(Trainer *t, void *user) {
    RunSession *rs = user;
    if (rs->ckpt_steps > 0 && t->step > 0 && t->step % rs->ckpt_steps == 0 && t->step != rs->last_ckpt_step)
        runsession_checkpoint(rs, t, NULL);
    return 0;
}

/* Runs a training (or replay) from parsed options. cmdline is stored in the session; resume = 1
 * continues o->session from its newest checkpoint. extra/nextra are scheduled commands (replay). */
static int run_training(AppOptions *o, const char *cmdline, int resume, ScheduledCmd *extra, int nextra,
                        char *session_out, size_t session_n) {
    Dataset ds;
    DatasetOpenOptions dopt = {0};
    dopt.coarse = o->coarse;
    if (dataset_open_with(&ds, o->dataset, &dopt) != ML_OK) {
        fprintf(stderr, "moelab: %s\n", ml_last_error());
        return 1;
    }
    Trainer t;
    if (trainer_init(&t, &o->train, &ds) != ML_OK) {
        fprintf(stderr, "moelab: %s\n", ml_last_error());
        dataset_free(&ds);
        return 2;
    }
    if (o->dry_run) {
        print_dry_run(&t.model, &ds, &t.cfg);
        trainer_free(&t);
        dataset_free(&ds);
        return 0;
    }
    Printer p = {.epochs = t.cfg.epochs, .quiet = o->quiet};
    if (o->commands[0]) {
        char err[600];
        if (command_file_read(o->commands, &p.cmds, &p.ncmds, err, sizeof err)) {
            fprintf(stderr, "moelab: %s\n", err);
            trainer_free(&t);
            dataset_free(&ds);
            return 2;
        }
    }
    if (extra && nextra) { p.cmds = extra; p.ncmds = nextra; }
    RunSession rs;
    if (runsession_open(&rs, o, &t, cmdline, resume) != 0) {
        fprintf(stderr, "moelab: %s\n", ml_last_error());
        if (p.cmds != extra) free(p.cmds);
        trainer_free(&t);
        dataset_free(&ds);
        return 1;
    }
    if (session_out) snprintf(session_out, session_n, "%s", rs.dir);
    p.rs = &rs;
    /* skip scheduled commands that a resumed run has already applied: those before the
     * checkpoint's step, and those at that step which the event log shows as applied */
    while (p.next < p.ncmds && p.cmds[p.next].step < t.step) p.next++;
    if (resume && p.next < p.ncmds) {
        SessionEventRow *ev = NULL;
        long nev = 0;
        if (session_read_events(rs.dir, &ev, &nev) == ML_OK) {
            int w = p.next;
            for (int i = p.next; i < p.ncmds; i++) {
                int applied = 0;
                for (long j = 0; j < nev && p.cmds[i].step == t.step; j++)
                    if (ev[j].step == t.step && !strcmp(ev[j].text, p.cmds[i].cmd.text)) applied = 1;
                if (!applied) p.cmds[w++] = p.cmds[i];
            }
            p.ncmds = w;
            free(ev);
        }
    }
    g_trainer = &t;
    if (!o->headless && !extra && isatty(STDIN_FILENO) && isatty(STDOUT_FILENO)) {
        TuiHooks hooks = {
            .on_step = tui_on_step, .on_eval = tui_on_eval, .on_event = tui_on_event,
            .on_snapshot = tui_on_snapshot, .on_finish = tui_on_finish, .before_step = tui_before_step,
            .user = &rs, .session = rs.active ? rs.dir : "",
            .cmds = p.cmds ? p.cmds + p.next : NULL, .ncmds = p.ncmds - p.next,
        };
        const int trc = tui_run(o, &ds, &t, &hooks);
        if (rs.dir[0] && rs.failed == 0 && !o->no_session) printf("session   %s\n", rs.dir);
        if (p.cmds != extra) free(p.cmds);
        trainer_free(&t);
        dataset_free(&ds);
        return trc;
    }
    const ModelConfig *mc = &t.cfg.model;
    printf("moelab %s: %s (%d/%d images, %dx%dx%d), backbone %s w=%g, head %s, %d epochs x %ld steps, "
           "batch %d, %s lr %g %s, augment %s, seed %llu, %d threads\n", MOELAB_VERSION, ds.name, ds.train.n, ds.test.n,
           ds.h, ds.w, ds.c, backbone_name(mc->backbone), mc->width, moe_head_name(mc->head.kind),
           t.cfg.epochs, t.steps_per_epoch, mc->batch, optim_kind_name(t.cfg.opt.kind), t.cfg.lr.base,
           lr_kind_name(t.cfg.lr.kind), t.cfg.augment ? "on" : "off", (unsigned long long)t.cfg.seed, t.cfg.threads);
    if (rs.active && resume) printf("session   %s (resumed at step %ld, epoch %d)\n", rs.dir, t.step, t.epoch);
    else if (rs.active) printf("session   %s\n", rs.dir);
    fflush(stdout);
    signal(SIGXFSZ, SIG_IGN);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    TrainCallbacks cb = {.on_step = on_step, .on_eval = on_eval, .before_step = before_step, .user = &p};
    ml_status st = trainer_run(&t, &cb);
    int rc = 0;
    const char *status = "finished";
    if (st != ML_OK) {
        fprintf(stderr, "moelab: %s\n", ml_last_error());
        runsession_event(&rs, t.step, ml_last_error());
        rc = 1;
        status = "failed";
    } else if (t.stop) {
        status = "interrupted";
    }
    runsession_finish(&rs, &t, status);
    if (rs.dir[0] && rs.failed == 0 && !o->no_session) printf("session   %s: %s at step %ld\n", rs.dir, status, t.step);
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    if (p.cmds != extra) free(p.cmds);
    trainer_free(&t);
    dataset_free(&ds);
    return rc;
}

int cmd_train(int argc, char **argv) {
    AppOptions o;
    app_options_defaults(&o);
    int r = app_options_parse(&o, argc, argv, "train");
    if (r) return r > 0 ? 0 : 2;
    if (o.resume[0]) {
        /* continue a session: its own command line gives the configuration */
        char line[4096];
        if (session_read_run_attr(o.resume, "command_line", line, sizeof line) != ML_OK) {
            fprintf(stderr, "moelab: --resume %s: %s\n", o.resume, ml_last_error());
            return 1;
        }
        char **av;
        int ac = command_line_split(line, &av);
        AppOptions ro;
        app_options_defaults(&ro);
        if (ac < 1 || app_options_parse(&ro, ac, av, "train") != 0) {
            fprintf(stderr, "moelab: --resume %s: cannot parse the stored command line: %s\n", o.resume, line);
            argv_free(ac > 0 ? ac : 0, av);
            return 1;
        }
        argv_free(ac, av);
        snprintf(ro.session, sizeof ro.session, "%s", o.resume);
        ro.no_session = 0;
        ro.headless = o.headless;
        return run_training(&ro, line, 1, NULL, 0, NULL, 0);
    }
    char line[4096];
    char *av0[argc + 2];
    int ac = 0;
    av0[ac++] = "train";
    for (int i = 1; i < argc; i++) av0[ac++] = argv[i];
    command_line_join(line, sizeof line, ac, av0);
    return run_training(&o, line, 0, NULL, 0, NULL, 0);
}

/* moelab replay DIR [--session NEWDIR]: re-runs a session from its command line and event log. */
int cmd_replay(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "--help")) {
        printf("usage: moelab replay DIR [--session NEWDIR]\n\nRe-runs the session in DIR from its configuration and event log,\n"
               "applying every recorded command at its recorded step, into a new session, and\n"
               "reports whether the final metrics match.\n");
        return argc < 2 ? 2 : 0;
    }
    const char *dir = argv[1];
    char newdir[600] = "";
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--session") && i + 1 < argc) snprintf(newdir, sizeof newdir, "%s", argv[++i]);
        else { fprintf(stderr, "moelab replay: unexpected argument '%s'\n", argv[i]); return 2; }
    }
    SessionInfo orig;
    char line[4096];
    if (session_read_info(dir, &orig) != ML_OK || session_read_run_attr(dir, "command_line", line, sizeof line) != ML_OK) {
        fprintf(stderr, "moelab replay: %s\n", ml_last_error());
        return 1;
    }
    SessionEventRow *ev;
    long nev;
    if (session_read_events(dir, &ev, &nev) != ML_OK) { fprintf(stderr, "moelab replay: %s\n", ml_last_error()); return 1; }
    ScheduledCmd *cmds = calloc(nev + 1, sizeof *cmds);
    int nc = 0;
    for (long i = 0; i < nev; i++) {
        TrainerCmd c;
        char err[256];
        if (command_parse(ev[i].text, &c, err, sizeof err) != 0) continue; /* resume/checkpoint notes */
        if (c.kind == CMD_PAUSE || c.kind == CMD_RESUME || c.kind == CMD_STEP || c.kind == CMD_HELP) continue;
        cmds[nc].step = ev[i].step;
        cmds[nc].cmd = c;
        nc++;
    }
    free(ev);
    char **av;
    int ac = command_line_split(line, &av);
    AppOptions o;
    app_options_defaults(&o);
    if (ac < 1 || app_options_parse(&o, ac, av, "train") != 0) {
        fprintf(stderr, "moelab replay: cannot parse the stored command line: %s\n", line);
        argv_free(ac > 0 ? ac : 0, av);
        free(cmds);
        return 1;
    }
    argv_free(ac, av);
    o.commands[0] = 0;
    o.no_session = 0;
    if (newdir[0]) snprintf(o.session, sizeof o.session, "%s", newdir);
    else {
        snprintf(o.session, sizeof o.session, "%s-replay", dir);
        for (int i = 2; i < 1000; i++) {
            struct stat sb;
            if (stat(o.session, &sb) != 0) break;
            snprintf(o.session, sizeof o.session, "%s-replay%d", dir, i);
        }
    }
    printf("replay    %s: %d recorded commands\n", dir, nc);
    char outdir[600];
    int rc = run_training(&o, line, 0, cmds, nc, outdir, sizeof outdir);
    free(cmds);
    if (rc) return rc;
    SessionInfo rep;
    if (session_read_info(outdir, &rep) != ML_OK) { fprintf(stderr, "moelab replay: %s\n", ml_last_error()); return 1; }
    const int same = rep.last_step == orig.last_step && rep.evals == orig.evals &&
                     ((isnan(rep.last_test_acc) && isnan(orig.last_test_acc)) || rep.last_test_acc == orig.last_test_acc) &&
                     ((isnan(rep.best_test_acc) && isnan(orig.best_test_acc)) || rep.best_test_acc == orig.best_test_acc);
    printf("replay    original: step %ld, %d evals, last test acc %.4f%%, best %.4f%%\n", orig.last_step, orig.evals,
           100 * orig.last_test_acc, 100 * orig.best_test_acc);
    printf("replay    replayed: step %ld, %d evals, last test acc %.4f%%, best %.4f%%\n", rep.last_step, rep.evals,
           100 * rep.last_test_acc, 100 * rep.best_test_acc);
    printf("replay    final metrics %s\n", same ? "MATCH" : "DIFFER");
    return same ? 0 : 3;
}

/* moelab export DIR --csv OUTDIR */
int cmd_export(int argc, char **argv) {
    if (argc == 2 && !strcmp(argv[1], "--help")) {
        printf("usage: moelab export DIR --csv OUTDIR\n\nWrites steps.csv, expert_load.csv, evals.csv, class_expert.csv and events.csv.\n");
        return 0;
    }
    if (argc != 4 || strcmp(argv[2], "--csv")) {
        fprintf(stderr, "usage: moelab export DIR --csv OUTDIR\n");
        return 2;
    }
    if (session_export_csv(argv[1], argv[3]) != ML_OK) {
        fprintf(stderr, "moelab export: %s\n", ml_last_error());
        return 1;
    }
    printf("exported %s to %s\n", argv[1], argv[3]);
    return 0;
}
