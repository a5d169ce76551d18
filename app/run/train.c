/* train.c — `moelab train`: the live screen on a terminal (app/tui.c), headless training with
 * per-epoch lines otherwise (or with --headless), --dry-run (layers, parameters, FLOPs, rho),
 * --resume, and the `replay` and `export` subcommands. */
#include "app/cli/app.h"
#include "app/cli/commands.h"
#include "app/steer/control.h"
#include "app/cli/options.h"
#include "app/run/dist.h"
#include "app/run/outdir.h"
#include "app/run/runsession.h"
#include "app/live/tui.h"

#include <math.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <stdlib.h>

#include <stdio.h>
#include <string.h>

static long tensor_params(const Model *m, int idx) { return idx >= 0 ? m->params[idx].n : 0; }

/* The routed or dense layer after the stage unit i closes, if any (dry-run table rows). */
static long print_bb_layer(const Model *m, int i) {
    const int s = m->unit_stage[i];
    if (s < 0) return 0;
    char shape[32], lab[48];
    if (m->stage_moe[s] >= 0) {
        const MoeConv *L = &m->moec[m->stage_moe[s]];
        const MoeConfig *rc = &L->route.cfg;
        snprintf(shape, sizeof shape, "%dx%dx%d", L->C, L->H, L->W);
        const long nr = m->params[L->t_router].n;
        long ne = 0;
        for (int t = 1; t <= 4 * rc->E; t++) ne += m->params[L->t_router + t].n;
        snprintf(lab, sizeof lab, "%s.router", L->name);
        printf("%-22s %-16s %12ld %16.0f  (pooled %d -> %d logits)\n", lab, "", nr, L->flops_router, L->C, rc->E);
        snprintf(lab, sizeof lab, "%s.experts (%d)", L->name, rc->E);
        printf("%-22s %-16s %12ld %16.0f  (routed: one expert %.0f = %dx%d px x 4 x %d x %d, k = %d)\n", lab, shape, ne,
               rc->k * L->flops_expert, L->flops_expert, L->H, L->W, L->C, rc->h, rc->k);
        return nr + ne;
    }
    if (m->stage_ffn[s] >= 0) {
        const FfnConv *L = &m->ffnc[m->stage_ffn[s]];
        snprintf(shape, sizeof shape, "%dx%dx%d", L->C, L->H, L->W);
        long np = 0;
        for (int t = 0; t < 4; t++) np += m->params[L->t_w1 + t].n;
        snprintf(lab, sizeof lab, "%s.mlp", L->name);
        printf("%-22s %-16s %12ld %16.0f  (dense, hidden k*h = %d)\n", lab, shape, np, L->flops, L->hidden);
        return np;
    }
    return 0;
}

/* Nominal rho per routed layer and in total. */
static void print_dry_rho(const Model *m) {
    const double total = model_flops(m);
    if (m->nmoec == 0 || total <= 0) return;
    printf("rho/layer  ");
    for (int i = 0; i < m->nmoec; i++) {
        const MoeConv *L = &m->moec[i];
        printf(" %s %.3f (routed %.0f);", L->name, L->route.cfg.k * L->flops_expert / total,
               L->route.cfg.k * L->flops_expert);
    }
    if (m->cfg.head.kind != HEAD_DENSE) printf(" head %.3f (routed %.0f);", m->flops.routed / total, m->flops.routed);
    printf(" total %.3f\n", model_rho_nominal(m));
}

static void print_dry_run(const Model *m, const Dataset *ds, const TrainConfig *t) {
    const ModelConfig *c = &m->cfg;
    const MoeConfig *h = &c->head;
    printf("dataset   %s: %d train / %d test images, %dx%dx%d, %d classes\n", ds->name, ds->train.n, ds->test.n, ds->h,
           ds->w, ds->c, ds->classes);
    printf("model     backbone %s, width %g (c0 = %d, d = %d), head %s", backbone_name(c->backbone), c->width, m->c0,
           m->d, moe_head_name(h->kind));
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
        total_params += print_bb_layer(m, i);
    }
    char shape[32];
    snprintf(shape, sizeof shape, "%d", m->d);
    printf("%-22s %-16s %12d %16d\n", "pool", shape, 0, 0);
    if (h->kind == HEAD_DENSE) {
        long np = tensor_params(m, m->fc1_w) + tensor_params(m, m->fc1_b) + tensor_params(m, m->fc2_w) +
                  tensor_params(m, m->fc2_b);
        printf("%-22s %-16s %12ld %16.0f\n", "head.mlp", shape, np, m->flops.expert);
        total_params += np;
    } else {
        long nr = m->params[m->moe_first].n, ne = 0;
        for (int i = 1; i < 5; i++) ne += m->params[m->moe_first + i].n;
        printf("%-22s %-16s %12ld %16.0f\n", "head.router", "", nr, m->flops.router);
        char lab[48];
        snprintf(lab, sizeof lab, "head.experts (%d)", h->E);
        printf("%-22s %-16s %12ld %16.0f  (one expert %.0f, %.3g active per sample)\n", lab, shape, ne, m->flops.routed,
               m->flops.expert, m->flops.routed / m->flops.expert);
        total_params += nr + ne;
    }
    long nc = m->params[m->cls_w].n + m->params[m->cls_b].n;
    snprintf(shape, sizeof shape, "%d", c->classes);
    printf("%-22s %-16s %12ld %16.0f\n", "classifier", shape, nc, m->flops.classifier);
    total_params += nc;
    printf("\nparameters  %ld (%.2f MiB)\n", total_params, total_params * 4.0 / 1048576.0);
    printf("FLOPs       forward %.0f per sample (backbone %.0f, head %.0f, classifier %.0f)\n", model_flops(m),
           m->flops.backbone, m->flops.head_active, m->flops.classifier);
    if (m->nmoec + m->nffnc > 0)
        printf("            backbone layers %.0f (routed %.0f, routers and dense layers %.0f)\n",
               m->flops.bb_routed + m->flops.bb_extra, m->flops.bb_routed, m->flops.bb_extra);
    printf("            training step ~%.1f MFLOP per sample (3x forward)\n", 3.0 * model_flops(m) / 1e6);
    printf("rho         %.3f nominal (routed %.0f / total %.0f FLOPs)\n", model_rho_nominal(m),
           m->flops.routed + m->flops.bb_routed, model_flops(m));
    print_dry_rho(m);
    printf("schedule    %d epochs x %d steps, batch %d, %s lr %g (%s)\n", t->epochs, ds->train.n / c->batch, c->batch,
           optim_kind_name(t->opt.kind), t->lr.base, lr_kind_name(t->lr.kind));
    for (int i = 0; i <= m->nmoec; i++) { /* the backbone's routed layers, then the head */
        const MoeConfig *mc = i < m->nmoec ? &m->moec[i].route.cfg : c->head.kind != HEAD_DENSE ? &m->moe.cfg : NULL;
        if (mc && moe_k1_blind_router(mc))
            printf("note        %s: k = 1 with renormalised gates: every kept gate is 1, so its router learns from "
                   "L_aux only, not from the task loss (--renorm auto or off: the softmax gate)\n",
                   i < m->nmoec ? m->moec[i].name : "head");
    }
}

/* ---- the headless runner: commands from a --commands file (or a replayed event log), progress
 * lines on stdout, the session writer's hooks underneath */
typedef struct {
    int epochs;
    StepRecord last;
    int have_last;
    char routing[512];  /* the routing line of the last evaluation (MoE heads), "" if none */
    ScheduledCmd *cmds; /* sorted by step */
    int ncmds, next;
    TrainHooks sink;    /* the session's hooks */
    ControlServer *ctl; /* the run's control socket (NULL: none) */
    const char *dir;    /* the session folder (NULL: none) */
} Headless;

static const char *g_sub = "train"; /* `moelab train: ` or `moelab replay: ` in messages */
static volatile sig_atomic_t g_stop_signal = 0;
static void on_signal(int sig) { g_stop_signal = sig; }

/* The --commands file first, then the control socket; while paused (only possible with a socket)
 * it waits a moment for a socket command and returns, so a signal is seen at once. */
static int h_next_cmd(void *user, long step, int wait, TrainerCmd *c) {
    Headless *p = user;
    if (p->next < p->ncmds && p->cmds[p->next].step <= step) {
        *c = p->cmds[p->next++].cmd;
        if (!c->origin) c->origin = CMD_FROM_FILE;
    } else if (!control_take(p->ctl, c, wait && !g_stop_signal ? 200 : 0)) {
        return 0;
    }
    control_handed(p->ctl, c);
    return 1;
}

static void h_on_state(const TrainerState *s, void *user) { control_note_state(((Headless *)user)->ctl, s); }

/* Control-socket log lines (refused peers, stale sockets): the run's output, like its events. */
static void h_ctl_log(void *user, int level, const char *msg) {
    (void)user;
    fprintf(level ? stderr : stdout, "moelab train: %s\n", msg);
    fflush(level ? stderr : stdout);
}

static int h_should_stop(void *user) {
    (void)user;
    return g_stop_signal != 0;
}

static void h_on_step(const StepRecord *r, void *user) {
    Headless *p = user;
    p->last = *r;
    p->have_last = 1;
    control_note_step(p->ctl, r);
    p->sink.on_step(r, p->sink.user);
}

static void h_on_eval(const EvalRecord *r, void *user) {
    Headless *p = user;
    p->sink.on_eval(r, p->sink.user);
    control_note_eval(p->ctl, r);
    p->routing[0] = 0;
    if (r->has_moe) eval_routing_line(r, p->have_last ? &p->last : NULL, p->routing, sizeof p->routing);
}

static void h_on_event(const TrainerEvent *e, void *user) {
    Headless *p = user;
    p->sink.on_event(e, p->sink.user);
    control_event(p->ctl, e);
    switch (e->kind) {
    case TEV_APPLIED:
        printf("[step %ld] %s\n", e->step, e->text);
        /* a pause from the commands file or a rule: whoever reads this output must know how to go on */
        if ((e->cmd == CMD_PAUSE || e->cmd == CMD_STEP) && e->origin != CMD_FROM_SOCKET && p->ctl && p->dir)
            printf("[step %ld] paused: the run waits; continue with `moelab ctl %s resume` (or `moelab attach %s`), "
                   "stop with `moelab ctl %s quit` or Ctrl-C\n",
                   e->step, p->dir, p->dir, p->dir);
        break;
    case TEV_FAILED: printf("[step %ld] error: %s\n", e->step, e->text); break;
    case TEV_NOTE: printf("[step %ld] note: %s\n", e->step, e->text); break;
    case TEV_EPOCH:
        printf("%s\n", e->text);
        if (p->routing[0]) printf("%s\n", p->routing);
        if (dist_size() > 1) { /* the ranks and what talking cost them */
            double wait = 0, bytes = 0, hidden = 0;
            long steps = 0;
            dist_comm_stats(&wait, &bytes, &hidden, &steps);
            printf("  ranks    %d ranks  communication %.2f ms/step  %.2f MB/step sent per rank  %.0f%% of the gradient "
                   "exchange hidden behind the backward\n",
                   dist_size(), steps ? 1e3 * wait / steps : 0.0, bytes / 1e6, 100 * hidden);
        }
        break;
    case TEV_NUMERIC:
    case TEV_ERROR: fprintf(stderr, "moelab %s: %s\n", g_sub, e->text); break;
    case TEV_COLLAPSE: printf("[step %ld] %s\n", e->step, e->text); break;
    case TEV_CHECKPOINT: break;
    }
    fflush(stdout);
}

static ml_status h_checkpoint(Trainer *t, const char *why, void *user) {
    Headless *p = user;
    return p->sink.checkpoint(t, why, p->sink.user);
}

/* A rank died (dist_on_rank_lost; the process exits after this): the session records which and
 * when, its status becomes failed, and the advice is what is true for it. */
static void h_rank_lost(const char *text, long step, void *user) {
    RunSession *rs = user;
    char adv[APP_PATH_MAX + 1024] = "";
    if (rs->active) {
        char ev[APP_PATH_MAX + 400]; /* the event log keeps 255 bytes: the command line only on stderr */
        if (runsession_restart_advice(rs->dir, adv, sizeof adv)) {
            snprintf(ev, sizeof ev, "%s: the job ends; no checkpoint was written: start it again with its command line "
                     "(--resume has nothing to continue from)", text);
        } else {
            snprintf(adv, sizeof adv, "`mpirun -np %d moelab train --resume %s` continues it from its newest checkpoint",
                     dist_size(), rs->dir);
            snprintf(ev, sizeof ev, "%s: the job ends; %s", text, adv);
        }
        runsession_event(rs, step, ev);
        runsession_finish(rs, "failed");
    }
    fprintf(stderr, "moelab %s: %s: the job ends%s%s\n", g_sub, text, adv[0] ? "; " : "", adv);
}

/* Trains t headless to the end; returns the exit status (130 / 143 after SIGINT / SIGTERM, once
 * the final checkpoint is written). control: listen on the session's control socket. */
static int run_headless(Trainer *t, RunSession *rs, ScheduledCmd *cmds, int ncmds, int next, int control) {
    Headless p = {.epochs = t->cfg.epochs, .cmds = cmds, .ncmds = ncmds, .next = next};
    runsession_hooks(rs, &p.sink);
    if (control && rs->active) {
        const ControlOps ops = {.log = h_ctl_log, .user = &p};
        char err[600];
        p.ctl = control_start(rs->dir, &ops, err, sizeof err);
        p.dir = rs->dir;
        if (!p.ctl) h_ctl_log(NULL, 1, err);
        control_note_run(p.ctl, t->total_steps, t->cfg.epochs);
        RunRecord *rr = malloc(sizeof *rr); /* large: the routed layers' names for status */
        if (rr) {
            trainer_describe(t, rr);
            control_note_layers(p.ctl, rr);
            free(rr);
        }
    }
    TrainHooks h = {
        .next_cmd = h_next_cmd,
        .parse_rule = command_rule_parse,
        .should_stop = h_should_stop,
        .on_step = h_on_step,
        .on_eval = h_on_eval,
        .on_event = h_on_event,
        .on_state = h_on_state,
        .pausable = p.ctl != NULL,
        .checkpoint = p.sink.checkpoint ? h_checkpoint : NULL,
        .ckpt_every = p.sink.ckpt_every,
        .ckpt_steps = p.sink.ckpt_steps,
        .user = &p,
    };
    dist_wrap_hooks(&h); /* an MPI run: every rank takes rank 0's commands, stops and checkpoints */
    dist_on_rank_lost(h_rank_lost, rs);
    signal(SIGXFSZ, SIG_IGN);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    const RunEnd end = trainer_run(t, &h);
    dist_on_rank_lost(NULL, NULL);
    control_stop(p.ctl); /* after the final checkpoint */
    if (end == RUN_INTERRUPTED && g_stop_signal)
        printf("[step %ld] %s: stopping cleanly\n", t->step, g_stop_signal == SIGINT ? "interrupt" : "terminated");
    runsession_finish(rs, run_end_name(end));
    if (rs->dir[0] && rs->ckpt_failed > 0 && rs->ckpt_last_ok) /* each was reported when it happened */
        fprintf(stderr,
                "moelab %s: session %s: %d checkpoint%s could not be written (the latest at step %ld, see above); the "
                "later checkpoints were written\n",
                g_sub, rs->dir, rs->ckpt_failed, rs->ckpt_failed == 1 ? "" : "s", rs->ckpt_last_fail);
    else if (rs->dir[0] && rs->ckpt_failed > 0 && !rs->failed)
        fprintf(stderr,
                "moelab %s: session %s: %s with write errors at step %ld: %d checkpoint%s could not be written (the "
                "latest at step %ld, see above): the final state is not saved, a resume starts from the checkpoint "
                "before it\n",
                g_sub, rs->dir, run_end_name(end), t->step, rs->ckpt_failed, rs->ckpt_failed == 1 ? "" : "s",
                rs->ckpt_last_fail);
    if (rs->dir[0] && rs->failed == 0) printf("session   %s: %s at step %ld\n", rs->dir, run_end_name(end), t->step);
    else if (rs->dir[0]) /* the session stopped writing (full disk, I/O error): say so, fail */
        fprintf(stderr,
                "moelab %s: session %s: %s with write errors at step %ld: the session is incomplete after the "
                "first error (see the warning above)\n",
                g_sub, rs->dir, run_end_name(end), t->step);
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    if (end == RUN_FAILED || rs->failed || (rs->ckpt_failed > 0 && !rs->ckpt_last_ok)) return 1;
    return end == RUN_INTERRUPTED && g_stop_signal ? 128 + g_stop_signal : 0;
}

/* The memory the run would hold (trainer_memory_bytes), by part. */
static void print_dry_memory(const Trainer *t) {
    const Model *m = &t->model;
    const double mib = 1048576.0, w = (double)m->n_param * sizeof(float);
    const int adam = t->cfg.opt.kind == OPT_ADAMW;
    printf("memory      %.1f MiB to train: weights %.1f, gradients %.1f, %s state %.1f, activations %.1f at batch "
           "%d, buffers, scratch and routing workspaces %.1f (the dataset not counted)\n",
           trainer_memory_bytes(t) / mib, w / mib, w / mib, optim_kind_name(t->cfg.opt.kind), (adam ? 2 : 1) * w / mib,
           (double)m->act.n * sizeof(float) / mib, t->cfg.model.batch,
           (model_memory_bytes(m) - 2 * w - (double)m->act.n * sizeof(float)) / mib);
}

/* Runs a training (or replay) from parsed options. cmdline is stored in the session; resume = 1
 * continues o->session from its newest checkpoint. extra/nextra are scheduled commands (replay). */
static int run_training(AppOptions *o, const char *cmdline, int resume, ScheduledCmd *extra, int nextra,
                        char *session_out, size_t session_n) {
    Dataset ds;
    DatasetOpenOptions dopt = {0};
    dopt.coarse = o->coarse;
    if (dataset_open_with(&ds, o->dataset, &dopt) != ML_OK) {
        fprintf(stderr, "moelab %s: %s\n", g_sub, ml_last_error());
        return 1;
    }
    dist_send_options(o); /* the other ranks of an MPI run build the same trainer (dist.h) */
    BatchSource src;
    dataset_batch_source(&ds, &src);
    Trainer t;
    if (o->dry_run) { /* the layout only: no weights are allocated, so any size answers at once */
        if (trainer_init_layout(&t, &o->train, &src) != ML_OK) {
            fprintf(stderr, "moelab %s: %s\n", g_sub, ml_last_error());
            dataset_free(&ds);
            return 2;
        }
        print_dry_run(&t.model, &ds, &t.cfg);
        print_dry_memory(&t);
        trainer_free(&t);
        dataset_free(&ds);
        return 0;
    }
    if (trainer_init_dist(&t, &o->train, &src, dist_comm()) != ML_OK) {
        fprintf(stderr, "moelab %s: %s\n", g_sub, ml_last_error());
        dataset_free(&ds);
        return 2;
    }
    trainer_set_rule(&t, o->on_collapse); /* validated by the option parser; a checkpoint's rule wins */
    /* the scheduled commands: a resumed session's own copy (stored at its start), else the file */
    ScheduledCmd *cmds = NULL;
    int ncmds = 0;
    char *ctext = NULL, err[1200];
    const char *cname = o->commands[0] ? o->commands : "the session's stored commands";
    if (resume && session_read_run_attr_alloc(o->session, "commands", &ctext) == ML_OK)
        cname = "the session's stored commands";
    else if (o->commands[0] && command_file_load(o->commands, &ctext, err, sizeof err)) ctext = NULL, cname = NULL;
    if ((o->commands[0] && !cname) || (ctext && command_text_parse(ctext, cname, &cmds, &ncmds, err, sizeof err))) {
        fprintf(stderr, "moelab %s: %s\n", g_sub, err);
        free(ctext);
        trainer_free(&t);
        dataset_free(&ds);
        return 2;
    }
    if (extra && nextra) { /* replay: the recorded commands, stored as a command file's text */
        free(cmds);
        cmds = extra;
        ncmds = nextra;
        free(ctext);
        size_t cap = 64 + (size_t)nextra * (sizeof extra->cmd.text + 32), len = 0;
        ctext = malloc(cap);
        for (int i = 0; ctext && i < nextra; i++)
            len += (size_t)snprintf(ctext + len, cap - len, "at %ld %s\n", extra[i].step, extra[i].cmd.text);
        if (ctext && !nextra) ctext[0] = 0;
    }
    /* a resume on a terminal shows the history so far: read before live.h5 is opened for writing
     * (the rows after the checkpoint's step, which the resume drops, are not shown) */
    const int tui = !o->headless && !extra && dist_size() == 1 && isatty(STDIN_FILENO) && isatty(STDOUT_FILENO);
    SessionHistory hist;
    const int have_hist = resume && tui && session_history_load(o->session, &hist) == ML_OK;
    RunSession rs;
    const int opened = runsession_open(&rs, o, &t, cmdline, ctext, resume);
    free(ctext);
    dist_send_start(&t, opened == 0, resume); /* a resume's state goes to every rank */
    if (opened != 0) {
        fprintf(stderr, "moelab %s: %s\n", g_sub, ml_last_error());
        runsession_finish(&rs, NULL); /* releases the lock */
        if (have_hist) session_history_free(&hist);
        if (cmds != extra) free(cmds);
        trainer_free(&t);
        dataset_free(&ds);
        return 1;
    }
    if (session_out) snprintf(session_out, session_n, "%s", rs.dir);
    if (resume && o->extend_epochs > 0) { /* said once the session accepted it (runsession_open) */
        const int was = o->train.epochs, now = o->extend_epochs;
        if (now == was) printf("moelab %s: %s: the run keeps its %d epochs\n", g_sub, rs.dir, now);
        else
            printf("moelab %s: %s: %s the run from %d to %d epochs\n", g_sub, rs.dir,
                   now > was ? "extending" : "shortening", was, now);
        fflush(stdout);
    }
    /* a resumed run's checkpoint holds the effect of every command due at or before its step
     * (the loop applies a boundary's commands before it checkpoints): skip those */
    int next = 0;
    while (next < ncmds && cmds[next].step <= (resume ? t.step : -1)) next++;
    int rc;
    if (tui) {
        TuiHooks hooks = {.session = rs.active ? rs.dir : "",
                          .history = have_hist ? &hist : NULL,
                          .cmds = cmds ? cmds + next : NULL,
                          .ncmds = ncmds - next,
                          .control_dir = rs.active ? rs.dir : NULL};
        runsession_hooks(&rs, &hooks.sink);
        hooks.rs = &rs;
        rc = tui_run(o, &ds, &t, &hooks);
        if (have_hist) session_history_free(&hist);
        if (rs.dir[0] && rs.failed == 0 && !o->no_session) printf("session   %s\n", rs.dir);
        else if (rs.dir[0] && !o->no_session) {
            fprintf(stderr,
                    "moelab %s: session %s: ended with write errors: the session is incomplete after the first\n",
                    g_sub, rs.dir);
            if (!rc) rc = 1;
        }
    } else {
        const ModelConfig *mc = &t.cfg.model;
        printf("moelab %s: %s (%d/%d images, %dx%dx%d), backbone %s w=%g, head %s, %d epochs x %ld steps, "
               "batch %d, %s lr %g %s, augment %s, seed %llu, %d thread%s\n",
               MOELAB_VERSION, ds.name, ds.train.n, ds.test.n, ds.h, ds.w, ds.c, backbone_name(mc->backbone), mc->width,
               moe_head_name(mc->head.kind), t.cfg.epochs, t.steps_per_epoch, mc->batch,
               optim_kind_name(t.cfg.opt.kind), t.cfg.lr.base, lr_kind_name(t.cfg.lr.kind),
               t.cfg.augment ? "on" : "off", (unsigned long long)t.cfg.seed, t.cfg.threads, t.cfg.threads == 1 ? "" : "s");
        if (rs.active && resume) printf("session   %s (resumed at step %ld, epoch %d)\n", rs.dir, t.step, t.epoch);
        else if (rs.active) printf("session   %s\n", rs.dir);
        fflush(stdout);
        rc = run_headless(&t, &rs, cmds, ncmds, next, !extra);
    }
    if (cmds != extra) free(cmds);
    trainer_free(&t);
    dataset_free(&ds);
    return rc;
}

/* The stored command line with its --epochs set to n (replaced, or added at the end). */
static char *command_line_with_epochs(const char *line, int n) {
    char **av;
    const int ac = command_line_split(line, &av);
    if (ac < 0) return NULL;
    char num[16], eq[32];
    snprintf(num, sizeof num, "%d", n);
    snprintf(eq, sizeof eq, "--epochs=%d", n);
    char **out = calloc((size_t)ac + 3, sizeof *out);
    if (!out) {
        argv_free(ac, av);
        return NULL;
    }
    int m = 0, done = 0;
    for (int i = 0; i < ac; i++) {
        if (!strcmp(av[i], "--epochs") && i + 1 < ac) {
            out[m++] = av[i];
            out[m++] = num;
            i++;
            done = 1;
        } else if (!strncmp(av[i], "--epochs=", 9)) {
            out[m++] = eq;
            done = 1;
        } else out[m++] = av[i];
    }
    if (!done) {
        out[m++] = "--epochs";
        out[m++] = num;
    }
    char *r = command_line_join_alloc(m, out);
    free(out);
    argv_free(ac, av);
    return r;
}

/* --resume continues a session with its stored configuration: any other option (but --headless)
 * would be ignored, so it is refused; so is an empty folder name. 0, or 2 (message printed). */
static int check_resume_args(int argc, char **argv, int *epochs) {
    *epochs = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *dir = NULL, *ep = NULL;
        int lo;
        if (!strcmp(a, "--resume")) dir = i + 1 < argc ? argv[++i] : "";
        else if (!strncmp(a, "--resume=", 9)) dir = a + 9;
        else if (!strcmp(a, "--headless")) continue;
        else if (!strcmp(a, "--epochs")) ep = i + 1 < argc ? argv[++i] : "";
        else if (!strncmp(a, "--epochs=", 9)) ep = a + 9;
        else if ((lo = app_option_launch_only(argc, argv, i))) {
            i += lo - 1;
            continue;
        }
        else {
            fprintf(stderr,
                    "moelab %s: --resume continues a session with the configuration it was started with; '%s' "
                    "cannot be combined with it (only --headless, --notify, --no-mouse and --epochs N can)\n",
                    g_sub, a);
            return 2;
        }
        if (ep) { /* extend (or shorten) the run: checked again against the epochs done */
            char *end;
            const long n = strtol(ep, &end, 10);
            if (!ep[0] || *end || n < 1 || n > 100000) {
                fprintf(stderr, "moelab %s: --epochs '%s': a whole number of epochs, 1-100000\n", g_sub, ep);
                return 2;
            }
            *epochs = (int)n;
            continue;
        }
        if (!dir[0]) {
            fprintf(stderr, "moelab %s: --resume needs a session folder\n", g_sub);
            return 2;
        }
    }
    return 0;
}

/* --resume: continues o->resume with its stored configuration (o gives --headless and --notify),
 * extended to `extend` epochs when > 0. Returns the exit status. */
static int resume_session(const AppOptions *o, int extend) {
    /* continue a session: its own command line gives the configuration */
    char *line = NULL;
    SessionLock lk = {0};
    if (session_lock(o->resume, &lk) != ML_OK) {
        fprintf(stderr, "moelab %s: --resume %s: %s\n", g_sub, o->resume, ml_last_error());
        return 1;
    }
    ml_status rd = session_read_run_attr_alloc(o->resume, "command_line", &line);
    /* a writer killed between opening live.h5 and starting SWMR leaves flags that stop readers;
     * with the lock held no writer is alive: clear them (as h5clear -s) and read again */
    if (rd != ML_OK && session_unflag(o->resume) == ML_OK)
        rd = session_read_run_attr_alloc(o->resume, "command_line", &line);
    session_unlock(&lk); /* taken again, for the whole run, by runsession_open */
    if (rd != ML_OK) {
        fprintf(stderr, "moelab %s: --resume %s: %s\n", g_sub, o->resume, ml_last_error());
        return 1;
    }
    char *adv = malloc(strlen(line) + 200);
    if (adv && runsession_restart_advice(o->resume, adv, strlen(line) + 200)) { /* killed before its first */
        fprintf(stderr, "moelab %s: --resume %s: nothing to continue from: %s\n", g_sub, o->resume, adv);
        free(adv);
        free(line);
        return 1;
    }
    free(adv);
    char **av;
    int ac = command_line_split(line, &av);
    AppOptions ro;
    app_options_defaults(&ro);
    if (ac < 1 || app_options_parse(&ro, ac, av, "train") != 0) {
        fprintf(stderr, "moelab %s: --resume %s: cannot parse the stored command line: %s\n", g_sub, o->resume, line);
        argv_free(ac > 0 ? ac : 0, av);
        free(line);
        return 1;
    }
    argv_free(ac, av);
    /* an extension stopped between live.h5 and its checkpoint (issue 41): the trainer is built for
     * the checkpoint's run and the extension is made again (to --epochs N when given, else to the
     * stored length), as the stopped resume would have */
    const int ck_epochs = runsession_interrupted_extension(o->resume, ro.train.epochs);
    if (ck_epochs > 0) {
        const int stored_epochs = ro.train.epochs;
        char *shorter = command_line_with_epochs(line, ck_epochs);
        av = NULL;
        ac = shorter ? command_line_split(shorter, &av) : -1;
        app_options_defaults(&ro);
        if (ac < 1 || app_options_parse(&ro, ac, av, "train") != 0) {
            fprintf(stderr, "moelab %s: --resume %s: cannot parse the stored command line: %s\n", g_sub, o->resume,
                    shorter ? shorter : line);
            argv_free(ac > 0 ? ac : 0, av);
            free(shorter);
            free(line);
            return 1;
        }
        argv_free(ac, av);
        free(shorter);
        if (!extend) extend = stored_epochs;
        printf("moelab %s: %s: the extension to %d epochs stopped before its checkpoint; the run goes on from its "
               "%d-epoch checkpoint\n",
               g_sub, o->resume, stored_epochs, ck_epochs);
    }
    runsession_stored_config(o->resume, &ro); /* an old session's renorm, noise, alpha and tau stay */
    const int ranks = runsession_stored_ranks(o->resume);
    if (ranks != dist_size()) {
        char how[64] = "moelab train";
        if (ranks > 1) snprintf(how, sizeof how, "mpirun -np %d moelab train", ranks);
        fprintf(stderr,
                "moelab %s: --resume %s: the session trained on %d %s, this is %d: resume it with `%s --resume %s`; "
                "on another number each rank's part of the batch and its noise and augmentation streams differ, so "
                "the run would not continue as it would have\n",
                g_sub, o->resume, ranks, ranks == 1 ? "process" : "ranks", dist_size(), how, o->resume);
        free(line);
        return 1;
    }
    snprintf(ro.session, sizeof ro.session, "%s", o->resume);
    ro.no_session = 0;
    ro.headless = o->headless;
    snprintf(ro.notify, sizeof ro.notify, "%s", o->notify); /* this process's alerts */
    ro.notify_timeout = o->notify_timeout;
    ro.no_mouse = o->no_mouse; /* this process's screen */
    ro.extend_epochs = extend;
    char *stored = line;
    if (extend) { /* the command line a later resume reads: --epochs N (runsession_open stores it) */
        line = command_line_with_epochs(stored, extend);
        if (!line) {
            fprintf(stderr, "moelab %s: out of memory\n", g_sub);
            free(stored);
            return 1;
        }
        free(stored);
    }
    const int rc = run_training(&ro, line, 1, NULL, 0, NULL, 0);
    free(line);
    return rc;
}

static int cmd_train_(int argc, char **argv);

/* Under mpirun / srun with several ranks, rank 0 is the run and the others follow it (dist.h). */
int cmd_train(int argc, char **argv) { return dist_main(cmd_train_, argc, argv); }

static int cmd_train_(int argc, char **argv) {
    int extend = 0; /* --resume DIR --epochs N */
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--resume") || !strncmp(argv[i], "--resume=", 9)) {
            const int bad = check_resume_args(argc, argv, &extend);
            if (bad) return bad;
            break;
        }
    AppOptions o;
    app_options_defaults(&o);
    int r = app_options_parse(&o, argc, argv, "train");
    if (r) return r > 0 ? 0 : 2;
    if (o.resume[0]) return resume_session(&o, extend);
    char *av0[argc + 2];
    int ac = 0;
    av0[ac++] = "train";
    for (int i = 1; i < argc; i++) {
        const int lo = app_option_launch_only(argc, argv, i);
        if (lo) i += lo - 1; /* --notify is this process's, not the session's */
        else av0[ac++] = argv[i];
    }
    char *line = command_line_join_alloc(ac, av0);
    if (!line) {
        fprintf(stderr, "moelab %s: out of memory\n", g_sub);
        return 1;
    }
    const int rc = run_training(&o, line, 0, NULL, 0, NULL, 0);
    free(line);
    return rc;
}

/* moelab replay DIR [--session NEWDIR]: re-runs a session from its command line and event log. */
static int cmd_replay_(int argc, char **argv);

/* A data-parallel session replays on as many ranks as it trained on (mpirun -np N moelab replay). */
int cmd_replay(int argc, char **argv) { return dist_main(cmd_replay_, argc, argv); }

static int cmd_replay_(int argc, char **argv) {
    g_sub = "replay";
    if (argc < 2 || !strcmp(argv[1], "--help")) {
        printf(
            "usage: moelab replay DIR [--session NEWDIR]\n\nRe-runs the session in DIR from its configuration and event log,\n"
            "applying every recorded command at its recorded step, into a new session, and\n"
            "reports whether the final metrics match.\n");
        return argc < 2 ? 2 : 0;
    }
    const char *dir = argv[1];
    char newdir[APP_PATH_MAX] = "";
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--session") && i + 1 < argc) {
            if (strlen(argv[++i]) >= sizeof newdir) {
                fprintf(stderr, "moelab replay: --session: path too long\n");
                return 2;
            }
            snprintf(newdir, sizeof newdir, "%s", argv[i]);
        } else {
            fprintf(stderr, "moelab replay: unexpected argument '%s'\n", argv[i]);
            return 2;
        }
    }
    SessionInfo orig;
    char *line = NULL;
    /* the reads of the original session in a child first (its replay's own file is ours) */
    if (session_probe(dir, SESSION_PROBE_INFO | SESSION_PROBE_ATTRS | SESSION_PROBE_EVENTS) != ML_OK ||
        session_read_info(dir, &orig) != ML_OK || session_read_run_attr_alloc(dir, "command_line", &line) != ML_OK) {
        fprintf(stderr, "moelab replay: %s\n", ml_last_error());
        return 1;
    }
    SessionEventRow *ev;
    long nev;
    if (session_read_events(dir, &ev, &nev) != ML_OK) {
        fprintf(stderr, "moelab replay: %s\n", ml_last_error());
        free(line);
        return 1;
    }
    ScheduledCmd *cmds = calloc(nev + 17, sizeof *cmds);
    /* `--resume DIR --epochs N` extensions: the replay trains to the first one's step with the
     * launch command line, then resumes itself with --epochs N as the run did */
    long ext_step[16];
    int ext_epochs[16], next_ext = 0, nc = 0;
    const size_t el = strlen(RUNSESSION_EXTEND_EVENT);
    for (long i = 0; i < nev; i++)
        if (!strncmp(ev[i].text, RUNSESSION_EXTEND_EVENT " ", el + 1) && next_ext < 16) {
            ext_step[next_ext] = ev[i].step;
            ext_epochs[next_ext++] = atoi(ev[i].text + el + 1);
        }
    if (next_ext) {
        char *launch = NULL;
        if (session_read_run_attr_alloc(dir, "launch_command_line", &launch) == ML_OK) {
            free(line);
            line = launch;
        }
    }
    /* a `quit` that a later resume went on from stopped only that process: not the run */
    long last_resume = -1;
    for (long i = 0; i < nev; i++)
        if (!strncmp(ev[i].text, RUNSESSION_RESUME_EVENT " ", strlen(RUNSESSION_RESUME_EVENT) + 1)) last_resume = i;
    for (long i = 0; i < nev; i++) {
        TrainerCmd c;
        char err[256];
        CmdOrigin origin;
        const char *text = cmd_origin_strip(ev[i].text, &origin);    /* "rule: set tau 2" applies as itself */
        if (command_parse(text, &c, err, sizeof err) != 0) continue; /* resume/checkpoint/collapse notes */
        if (c.kind == CMD_PAUSE || c.kind == CMD_RESUME || c.kind == CMD_STEP || c.kind == CMD_HELP) continue;
        /* the rule's commands are in the log as applied (origin rule): the rule itself is not re-armed */
        if (c.kind == CMD_ON_COLLAPSE) continue;
        if (c.kind == CMD_QUIT && i < last_resume) continue;
        c.origin = origin;
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
        free(line);
        return 1;
    }
    argv_free(ac, av);
    runsession_stored_config(dir, &o); /* an old session's renorm, noise, alpha and tau stay */
    const int ranks = runsession_stored_ranks(dir);
    if (ranks != dist_size()) {
        char how[64] = "moelab replay";
        if (ranks > 1) snprintf(how, sizeof how, "mpirun -np %d moelab replay", ranks);
        fprintf(stderr, "moelab replay: %s trained on %d %s, this is %d: replay it with `%s %s`\n", dir, ranks,
                ranks == 1 ? "process" : "ranks", dist_size(), how, dir);
        free(cmds);
        free(line);
        return 1;
    }
    o.commands[0] = 0;
    o.no_session = 0;
    /* a rule of commands: its effects are the logged commands above (applied at their steps), so
     * the replayed run does not apply it again; a pause rule stays (a headless run stops there) */
    if (strcmp(o.on_collapse, "pause")) o.on_collapse[0] = 0;
    if (newdir[0]) snprintf(o.session, sizeof o.session, "%s", newdir);
    else {
        snprintf(o.session, sizeof o.session, "%s-replay", dir);
        for (int i = 2; i < 1000; i++) {
            struct stat sb;
            if (stat(o.session, &sb) != 0) break;
            snprintf(o.session, sizeof o.session, "%s-replay%d", dir, i);
        }
    }
    /* a `quit` at each extension's step: a no-op where the run ends there anyway (it had
     * finished), else the replay stops where the run was interrupted and resumed */
    int nquit = 0;
    TrainerCmd q;
    char qerr[64];
    for (int e = 0; e < next_ext && command_parse("quit", &q, qerr, sizeof qerr) == 0; e++) {
        int at = nc;
        while (at > 0 && cmds[at - 1].step > ext_step[e]) {
            cmds[at] = cmds[at - 1];
            at--;
        }
        cmds[at].step = ext_step[e];
        cmds[at].cmd = q;
        nc++;
        nquit++;
    }
    printf("replay    %s: %d recorded commands%s\n", dir, nc - nquit,
           next_ext ? ", extended by --resume --epochs" : "");
    char outdir[APP_PATH_MAX + 64];
    int rc = run_training(&o, line, 0, cmds, nc, outdir, sizeof outdir);
    free(cmds);
    free(line);
    for (int e = 0; e < next_ext && rc == 0; e++) {
        /* the run was extended at ext_step[e]: so is the replay (its stored commands go on) */
        AppOptions ro;
        app_options_defaults(&ro);
        if (strlen(outdir) >= sizeof ro.resume) {
            fprintf(stderr, "moelab replay: %.200s...: path too long\n", outdir);
            return 1;
        }
        memcpy(ro.resume, outdir, strlen(outdir) + 1);
        ro.headless = 1;
        printf("replay    extending to %d epochs at step %ld, as the run was\n", ext_epochs[e], ext_step[e]);
        rc = resume_session(&ro, ext_epochs[e]);
    }
    if (rc) return rc;
    SessionInfo rep;
    if (session_read_info(outdir, &rep) != ML_OK) {
        fprintf(stderr, "moelab replay: %s\n", ml_last_error());
        return 1;
    }
    const int same =
        rep.last_step == orig.last_step && rep.evals == orig.evals &&
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
        printf(
            "usage: moelab export DIR --csv OUTDIR\n\nWrites steps.csv, expert_load.csv (demand, kept, mean gate and bias per expert),\n"
            "evals.csv, class_expert.csv, tsne.csv (saved test features), config.csv (the run's\n"
            "configuration) and events.csv; units are in the header names (README: CSV export).\n");
        return 0;
    }
    if (argc != 4 || strcmp(argv[2], "--csv")) {
        fprintf(stderr, "usage: moelab export DIR --csv OUTDIR\n");
        return 2;
    }
    /* every read in a child first: a file that crashes the HDF5 library gives a message */
    if (session_probe(argv[1], SESSION_PROBE_EXPORT) != ML_OK) {
        fprintf(stderr, "moelab export: %s\n", ml_last_error());
        return 1;
    }
    /* all the tables or none: written into a staging folder, moved into OUTDIR at the end */
    OutDir od;
    if (outdir_begin(&od, argv[3]) != 0) {
        fprintf(stderr, "moelab export: %s\n", ml_last_error());
        return 1;
    }
    if (session_export_csv(argv[1], od.tmp) != ML_OK || outdir_commit(&od) != 0) {
        char msg[2048];
        snprintf(msg, sizeof msg, "%s", ml_last_error());
        outdir_unstage(&od, msg, sizeof msg); /* name the files asked for, not the staging folder */
        outdir_abort(&od);
        fprintf(stderr, "moelab export: %s (nothing was written to %s)\n", msg, argv[3]);
        return 1;
    }
    printf("exported %s to %s\n", argv[1], argv[3]);
    return 0;
}
