/* train.c — `moelab train`: headless training with per-epoch lines, and --dry-run (layers,
 * parameters, FLOPs, rho). The live screen arrives with the TUI; until then every run is headless. */
#include "app.h"
#include "commands.h"
#include "options.h"

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
    ScheduledCmd *cmds; /* --commands FILE, sorted by step */
    int ncmds, next;
    int failed;
} Printer;

static void on_eval(const EvalRecord *r, void *user);

/* Applies the commands scheduled for this step boundary; returns 1 to stop (quit). */
static int before_step(Trainer *t, void *user) {
    Printer *p = user;
    while (p->next < p->ncmds && p->cmds[p->next].step <= t->step) {
        const TrainerCmd *c = &p->cmds[p->next++].cmd;
        printf("[step %ld] %s\n", t->step, c->text);
        switch (c->kind) {
        case CMD_SET:
        case CMD_ANNEAL:
            if (trainer_apply(t, c) != ML_OK) printf("[step %ld] error: %s\n", t->step, ml_last_error());
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
}

static void on_eval(const EvalRecord *r, void *user) {
    Printer *p = user;
    printf("epoch %3d/%d  step %6ld  train loss %.4f acc %6.2f%%  test loss %.4f acc %6.2f%%  %6.0f img/s  %6.1f s\n",
           r->epoch, p->epochs, r->step, r->train_loss, 100 * r->train_acc, r->test_loss,
           100 * r->test_acc, r->img_per_s, r->elapsed);
    if (r->has_moe) {
        const double tau = p->have_last ? p->last.tau : 0.0, aux = p->have_last ? p->last.moe.l_aux : 0.0;
        printf("  routing  load entropy %.3f  drop %.1f%%  dead %d/%d  MaxVio %.2f  rho %.3f (nominal %.3f)  "
               "I(class;expert) %.3f nats  tau %.3g  aux %.4f  collapse %s%s%s\n",
               r->window_load_entropy, 100 * r->train_drop_frac, r->dead_experts, r->experts, r->train_maxvio,
               r->train_rho_realized, r->rho_nominal, r->mutual_info, tau, aux, r->collapsed ? "YES" : "no",
               r->collapsed ? " " : "", r->collapsed ? routewin_reason_text(r->collapse_reason) : "");
    }
    fflush(stdout);
}

int cmd_train(int argc, char **argv) {
    AppOptions o;
    app_options_defaults(&o);
    int r = app_options_parse(&o, argc, argv, "train");
    if (r) return r > 0 ? 0 : 2;
    Dataset ds;
    DatasetOpenOptions dopt = {0};
    dopt.coarse = o.coarse;
    if (dataset_open_with(&ds, o.dataset, &dopt) != ML_OK) {
        fprintf(stderr, "moelab: %s\n", ml_last_error());
        return 1;
    }
    Trainer t;
    if (trainer_init(&t, &o.train, &ds) != ML_OK) {
        fprintf(stderr, "moelab: %s\n", ml_last_error());
        dataset_free(&ds);
        return 2;
    }
    if (o.dry_run) {
        print_dry_run(&t.model, &ds, &t.cfg);
        trainer_free(&t);
        dataset_free(&ds);
        return 0;
    }
    Printer p = {.epochs = t.cfg.epochs};
    if (o.commands[0]) {
        char err[600];
        if (command_file_read(o.commands, &p.cmds, &p.ncmds, err, sizeof err)) {
            fprintf(stderr, "moelab: %s\n", err);
            trainer_free(&t);
            dataset_free(&ds);
            return 2;
        }
    }
    const ModelConfig *mc = &t.cfg.model;
    printf("moelab %s: %s (%d/%d images, %dx%dx%d), backbone %s w=%g, head %s, %d epochs x %ld steps, "
           "batch %d, %s lr %g %s, augment %s, seed %llu, %d threads\n", MOELAB_VERSION, ds.name, ds.train.n, ds.test.n,
           ds.h, ds.w, ds.c, backbone_name(mc->backbone), mc->width, moe_head_name(mc->head.kind),
           t.cfg.epochs, t.steps_per_epoch, mc->batch, optim_kind_name(t.cfg.opt.kind), t.cfg.lr.base,
           lr_kind_name(t.cfg.lr.kind), t.cfg.augment ? "on" : "off", (unsigned long long)t.cfg.seed, t.cfg.threads);
    fflush(stdout);
    TrainCallbacks cb = {.on_step = on_step, .on_eval = on_eval, .before_step = before_step, .user = &p};
    ml_status st = trainer_run(&t, &cb);
    int rc = 0;
    if (st != ML_OK) {
        fprintf(stderr, "moelab: %s\n", ml_last_error());
        rc = 1;
    }
    free(p.cmds);
    trainer_free(&t);
    dataset_free(&ds);
    return rc;
}
