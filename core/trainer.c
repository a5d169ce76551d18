/* trainer.c — the trainer (see trainer.h): set-up, one step, evaluation, commands at step
 * boundaries, the records it fills, data parallelism. The loop that drives it is trainer_loop.c,
 * its checkpoint state table trainer_state.c. */
#include "trainer.h"

#include <cblas.h>
#include <limits.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void train_config_defaults(TrainConfig *c) {
    memset(c, 0, sizeof *c);
    model_config_defaults(&c->model);
    optim_config_defaults(&c->opt, OPT_SGD);
    c->lr.kind = LR_COSINE;
    c->lr.base = 0.05f;
    c->lr.gamma = 0.1f;
    c->lr.milestones[0] = 0.5f;
    c->lr.milestones[1] = 0.75f;
    tau_schedule_defaults(&c->tau);
    c->epochs = 10;
    c->seed = 1;
    c->threads = omp_get_num_procs();
    c->log_every = 10;
    routewin_defaults(&c->route);
    c->tsne_samples = 512;
    c->augment = -1;
}

void train_config_visit(const TrainConfig *c, CfgVisitor *v) {
    v->open(v, "model");
    model_config_visit(&c->model, v);
    v->close(v);
    v->open(v, "opt");
    v->s(v, "kind", optim_kind_name(c->opt.kind));
    v->f(v, "momentum", c->opt.momentum);
    v->i(v, "nesterov", c->opt.nesterov);
    v->f(v, "beta1", c->opt.beta1);
    v->f(v, "beta2", c->opt.beta2);
    v->f(v, "eps", c->opt.eps);
    v->f(v, "wd", c->opt.wd);
    v->close(v);
    v->open(v, "lr");
    v->s(v, "kind", lr_kind_name(c->lr.kind));
    v->f(v, "base", c->lr.base);
    v->i(v, "warmup", c->lr.warmup);
    v->i(v, "total", c->lr.total);
    v->f(v, "gamma", c->lr.gamma);
    v->floats(v, "milestones", c->lr.milestones, 2);
    v->close(v);
    v->f(v, "warmup_epochs", c->warmup_epochs);
    v->f(v, "tau_epochs", c->tau_epochs);
    v->open(v, "tau");
    v->s(v, "kind", tau_kind_name(c->tau.kind));
    v->f(v, "tau0", c->tau.tau0);
    v->f(v, "tau1", c->tau.tau1);
    v->f(v, "tau_min", c->tau.tau_min);
    v->f(v, "s", c->tau.s);
    v->f(v, "c", c->tau.c);
    v->i(v, "step_every", c->tau.step_every);
    v->f(v, "step_gamma", c->tau.step_gamma);
    v->i(v, "start", c->tau.start);
    v->i(v, "total", c->tau.total);
    v->close(v);
    v->i(v, "epochs", c->epochs);
    v->u64(v, "seed", c->seed);
    v->i(v, "threads", c->threads);
    v->i(v, "log_every", c->log_every);
    v->open(v, "route");
    v->i(v, "window", c->route.window);
    v->i(v, "min_steps", c->route.min_steps);
    v->d(v, "entropy_min", c->route.entropy_min);
    v->d(v, "max_share", c->route.max_share);
    v->d(v, "dead_frac", c->route.dead_frac);
    v->i(v, "warmup", c->route.warmup);
    v->d(v, "hysteresis", c->route.hysteresis);
    v->i(v, "confirm", c->route.confirm);
    v->close(v);
    v->i(v, "tsne_samples", c->tsne_samples);
    v->i(v, "augment", c->augment);
    if (c->ranks > 1) v->i(v, "ranks", c->ranks);          /* absent: one process */
    if (c->model.sync_bn) v->i(v, "sync_bn", 1);           /* absent: each rank's own statistics */
}

static void shuffle(int32_t *p, int n, Rng *r) {
    for (int i = n - 1; i > 0; i--) {
        int j = (int)rng_below(r, (uint32_t)(i + 1));
        int32_t t = p[i];
        p[i] = p[j];
        p[j] = t;
    }
}

/* The launch configuration completed from the data source, validated, and the model built (with
 * its memory when alloc != 0, else only its layout). */
static ml_status trainer_setup(Trainer *t, const TrainConfig *cfg, const BatchSource *src, int alloc,
                                const TrainComm *comm) {
    memset(t, 0, sizeof *t);
    t->cfg = *cfg;
    t->src = *src;
    t->ckpt_step = -1;
    t->dist.comm = comm; /* one rank with a comm: the data-parallel code path on one process (a reference) */
    t->dist.rank = t->dist.comm ? comm->rank : 0;
    t->dist.nranks = t->dist.comm ? comm->size : 1;
    t->cfg.ranks = t->dist.nranks;
    const BatchSource *ds = &t->src;
    TrainConfig *c = &t->cfg;
    if (c->epochs < 1) return ml_fail(ML_ERR_ARG, "--epochs must be at least 1");
    if (c->threads < 1) c->threads = 1;
    omp_set_num_threads(c->threads);
    openblas_set_num_threads(c->threads);
    c->model.in_c = ds->c;
    c->model.in_h = ds->h;
    c->model.in_w = ds->w;
    c->model.classes = ds->classes;
    const int B = c->model.batch;
    if (ds->n_train < B)
        return ml_fail(ML_ERR_ARG, "dataset %s has %d training images, fewer than one batch of %d", ds->name,
                       ds->n_train, B);
    if (ds->n_test < 1) return ml_fail(ML_ERR_ARG, "dataset %s has no test images", ds->name);
    if (B % t->dist.nranks)
        return ml_fail(ML_ERR_ARG,
                       "--batch %d is the global batch, split evenly over the %d ranks: %d ranks do not divide it "
                       "(try --batch %d)",
                       B, t->dist.nranks, t->dist.nranks, (B / t->dist.nranks + 1) * t->dist.nranks);
    t->dist.Bl = B / t->dist.nranks;
    t->steps_per_epoch = ds->n_train / B;
    t->total_steps = t->steps_per_epoch * c->epochs;
    c->lr.total = t->total_steps;
    c->lr.warmup = (long)(c->warmup_epochs * t->steps_per_epoch);
    c->tau.total = c->tau_epochs > 0 ? (long)(c->tau_epochs * t->steps_per_epoch + 0.5) : t->total_steps;
    if (c->tau.total < 1) c->tau.total = 1;
    ml_status st = tau_validate(&c->tau);
    if (st != ML_OK) return st;
    tau_plan_init(&t->tau, &c->tau);
    ModelConfig mc = c->model; /* each rank's model holds its part of the batch */
    mc.batch = t->dist.Bl;
    if (t->dist.nranks == 1) mc.sync_bn = 0; /* one process: the statistics are the batch's anyway */
    if ((st = alloc ? model_init(&t->model, &mc) : model_layout(&t->model, &mc)) != ML_OK) return st;
    /* the stored configuration (config_json) says what the model is: the real feature width and
     * the effective softmoe-batch slot count, not the option defaults */
    c->model.head.d = t->model.d;
    c->model.head.slots = moe_slots(&c->model.head, t->dist.Bl);
    return ML_OK;
}

ml_status trainer_init_layout(Trainer *t, const TrainConfig *cfg, const BatchSource *src) {
    return trainer_setup(t, cfg, src, 0, NULL);
}

double trainer_memory_bytes(const Trainer *t) {
    const double n = (double)t->model.n_param * sizeof(float);
    return model_memory_bytes(&t->model) + (t->cfg.opt.kind == OPT_ADAMW ? 2.0 : 1.0) * n;
}

ml_status trainer_init(Trainer *t, const TrainConfig *cfg, const BatchSource *src) {
    return trainer_init_dist(t, cfg, src, NULL);
}

ml_status trainer_init_dist(Trainer *t, const TrainConfig *cfg, const BatchSource *src, const TrainComm *comm) {
    ml_status st = trainer_setup(t, cfg, src, 1, comm);
    if (st != ML_OK) return st;
    TrainConfig *c = &t->cfg;
    const BatchSource *ds = &t->src;
    const int B = c->model.batch;
    if ((st = optim_init(&t->opt, &c->opt, t->model.n_param)) != ML_OK) {
        model_free(&t->model);
        return st;
    }
    rng_seed(&t->rng_init, c->seed);
    rng_seed(&t->rng_data, c->seed ^ 0x5851f42d4c957f2dULL);
    /* selection noise and augmentation: a stream of each rank's own (rank 0's is the one-process
     * run's); the data order (rng_data) is the same on every rank, each takes its slice of it */
    const uint64_t rk = (uint64_t)t->dist.rank * 0x9e3779b97f4a7c15ULL;
    rng_seed(&t->rng_noise, c->seed ^ 0x14057b7ef767814fULL ^ rk);
    rng_seed(&t->rng_aug, c->seed ^ 0x2545f4914f6cdd1dULL ^ rk);
    if (c->augment < 0) c->augment = ds->augment_default;
    model_init_params(&t->model, &t->rng_init);
    for (int i = 0; i < c->n_init_bias; i++) { /* --init-bias: starting utility biases (a resume restores its own) */
        const InitBias *ib = &c->init_bias[i];
        int hit = 0; /* routed layers it names that have expert ib->expert */
        if ((ib->stage == -1 || ib->stage == -2) && c->model.head.kind != HEAD_DENSE && ib->expert < c->model.head.E) hit++;
        for (int l = 0; l < t->model.nmoec; l++)
            hit += (ib->stage == -2 || ib->stage == t->model.moec[l].stage) && ib->expert < t->model.moec[l].route.cfg.E;
        if (!hit) { /* the message before trainer_free: c is t's own copy */
            const int stage = ib->stage, e = ib->expert;
            char lay[24];
            snprintf(lay, sizeof lay, stage == -2 ? "of this model" : stage == -1 ? "'head'" : "moe%d", stage);
            trainer_free(t);
            return ml_fail(ML_ERR_ARG, "--init-bias: no routed layer %s has an expert e%d (check --experts and --moe-after)",
                           lay, e);
        }
        if ((ib->stage == -1 || ib->stage == -2) && c->model.head.kind != HEAD_DENSE && ib->expert < c->model.head.E)
            t->model.moe.bias[ib->expert] = ib->value;
        for (int l = 0; l < t->model.nmoec; l++) {
            MoeConv *L = &t->model.moec[l];
            if ((ib->stage == -2 || ib->stage == L->stage) && ib->expert < L->route.cfg.E) L->route.bias[ib->expert] = ib->value;
        }
    }
    if (t->dist.nranks > 1) { /* what a checkpoint gathers from every rank */
        t->dist.rank_rngs = ml_alloc(sizeof(uint64_t) * 8 * t->dist.nranks);
        t->dist.rank_bufs = ml_alloc(sizeof(float) * (t->model.n_buf + 1) * t->dist.nranks);
        if (!t->dist.rank_rngs || !t->dist.rank_bufs) {
            trainer_free(t);
            return ml_fail(ML_ERR_NOMEM, "out of memory");
        }
        memset(t->dist.rank_rngs, 0, sizeof(uint64_t) * 8 * t->dist.nranks);
        memset(t->dist.rank_bufs, 0, sizeof(float) * (t->model.n_buf + 1) * t->dist.nranks);
    }
    if (t->dist.comm) { /* the model's gradient buckets are exchanged as the backward finishes them */
        t->model.dist.grad_ready = t->dist.comm->grad_ready;
        t->model.dist.grad_ctx = t->dist.comm->ctx;
        if (t->model.cfg.sync_bn) {
            t->model.dist.bn_sum = t->dist.comm->sum;
            t->model.dist.bn_ctx = t->dist.comm->ctx;
        }
    }
    t->perm = ml_alloc(sizeof(int32_t) * ds->n_train);
    t->labels = ml_alloc(sizeof(int32_t) * B);
    t->eval_idx = ml_alloc(sizeof(int32_t) * B);
    if (!t->perm || !t->labels || !t->eval_idx) {
        trainer_free(t);
        return ml_fail(ML_ERR_NOMEM, "out of memory");
    }
    for (int i = 0; i < ds->n_train; i++) t->perm[i] = i;
    if (model_has_routing(&t->model)) { /* the t-SNE sample (its labels) is shared by every routed layer */
        t->ev.tsne_n = c->tsne_samples < ds->n_test ? c->tsne_samples : ds->n_test;
        if (t->ev.tsne_n < 0) t->ev.tsne_n = 0;
        t->ev.tsne_label = ml_alloc(sizeof(int32_t) * (t->ev.tsne_n + 1));
        if (!t->ev.tsne_label) {
            trainer_free(t);
            return ml_fail(ML_ERR_NOMEM, "out of memory");
        }
    }
    /* the backbone MoE layers in stage order: their own plans, collapse states and evaluation outputs */
    for (int s = 0; s < MODEL_MAX_BBL; s++) {
        if (t->model.stage_moe[s] < 0) continue;
        TrainerLayer *l = &t->bl[t->nbl];
        l->mi = t->model.stage_moe[s];
        const MoeConv *L = &t->model.moec[l->mi];
        tau_plan_init(&l->tau, &c->tau);
        if ((st = collapse_init(&l->coll, &c->route, L->route.cfg.E, 0)) != ML_OK) {
            trainer_free(t);
            return ml_fail(st, "backbone layer %s: %s", L->name, ml_last_error());
        }
        t->nbl++; /* from here trainer_free frees its collapse state */
        collapse_set_warmup(&l->coll, collapse_warmup(&c->route, t->total_steps));
        l->class_expert = ml_alloc(sizeof(int) * ds->classes * L->route.cfg.E);
        l->drop_ce = ml_alloc(sizeof(int) * ds->classes * L->route.cfg.E);
        if (l->drop_ce) memset(l->drop_ce, 0, sizeof(int) * ds->classes * L->route.cfg.E);
        l->tsne_feat = ml_alloc(sizeof(float) * (t->ev.tsne_n * (long)L->C + 1));
        l->tsne_expert = ml_alloc(sizeof(int) * (t->ev.tsne_n + 1));
        if (!l->class_expert || !l->drop_ce || !l->tsne_feat || !l->tsne_expert) {
            trainer_free(t);
            return ml_fail(ML_ERR_NOMEM, "out of memory");
        }
    }
    if (c->model.head.kind != HEAD_DENSE) {
        const int E = c->model.head.E, d = t->model.d;
        const int soft = c->model.head.kind == HEAD_SOFTMOE_SAMPLE || c->model.head.kind == HEAD_SOFTMOE_BATCH;
        if ((st = collapse_init(&t->coll, &c->route, E, soft)) != ML_OK) {
            trainer_free(t);
            return st;
        }
        collapse_set_warmup(&t->coll, collapse_warmup(&c->route, t->total_steps));
        t->ev.class_expert = ml_alloc(sizeof(int) * ds->classes * E);
        t->drop_ce = ml_alloc(sizeof(int32_t) * ds->classes * E);
        if (t->drop_ce) memset(t->drop_ce, 0, sizeof(int32_t) * ds->classes * E);
        t->ev.tsne_feat = ml_alloc(sizeof(float) * (t->ev.tsne_n * (long)d + 1));
        t->ev.tsne_expert = ml_alloc(sizeof(int) * (t->ev.tsne_n + 1));
        if (!t->ev.class_expert || !t->drop_ce || !t->ev.tsne_feat || !t->ev.tsne_expert) {
            trainer_free(t);
            return ml_fail(ML_ERR_NOMEM, "out of memory");
        }
    }
    t->clock.start = t->clock.epoch = t->clock.rec = ml_now();
    return ML_OK;
}

void trainer_free(Trainer *t) {
    model_free(&t->model);
    optim_free(&t->opt);
    ml_free(t->perm);
    ml_free(t->labels);
    ml_free(t->eval_idx);
    collapse_free(&t->coll);
    ml_free(t->ev.class_expert);
    ml_free(t->drop_ce);
    ml_free(t->ev.tsne_feat);
    ml_free(t->ev.tsne_expert);
    ml_free(t->ev.tsne_label);
    ml_free(t->dist.rank_rngs);
    ml_free(t->dist.rank_bufs);
    dist_pack_free(&t->dist.pack);
    for (int i = 0; i < t->nbl; i++) {
        collapse_free(&t->bl[i].coll);
        ml_free(t->bl[i].class_expert);
        ml_free(t->bl[i].drop_ce);
        ml_free(t->bl[i].tsne_feat);
        ml_free(t->bl[i].tsne_expert);
    }
    memset(t, 0, sizeof *t);
}

/* The collapse fields of a record from the layer's CollapseState: collapsed = a red alarm; the text
 * is THE message (collapse_format) of its most severe open item, the layer named when name != NULL. */
static void trainer_collapse_fill(const CollapseState *cs, const char *name, int *collapsed, int *reason, int *views,
                                  long *first, int *alarm, long *dead_mask, char *text, size_t n) {
    *views = collapse_views(cs, reason);
    *alarm = collapse_alarm(cs);
    *collapsed = *alarm == ALARM_COLLAPSE;
    *first = cs->first_step;
    *dead_mask = (long)collapse_dead_mask(cs);
    if (collapse_dead_count(cs) > 0 && (double)collapse_dead_count(cs) >= cs->cfg.dead_frac * cs->E)
        *reason |= COLLAPSE_DEAD;
    int ex = -1;
    const int item = collapse_top_item(cs, &ex);
    if (text && n) collapse_format_now(cs, item, ex, name, text, n);
}

int trainer_nlayers(const Trainer *t) { return t->nbl + (t->cfg.model.head.kind != HEAD_DENSE); }

int trainer_primary_layer(const Trainer *t) {
    return t->cfg.model.head.kind != HEAD_DENSE ? t->nbl : t->nbl > 0 ? 0 : -1;
}

int trainer_layer_find(const Trainer *t, const char *name) {
    for (int i = 0; i < t->nbl; i++)
        if (!strcmp(t->model.moec[t->bl[i].mi].name, name)) return i;
    return t->cfg.model.head.kind != HEAD_DENSE && !strcmp(name, "head") ? t->nbl : -1;
}

/* Routed layer i's name and collapse state (i == nbl: the head's). */
static const char *layer_name(const Trainer *t, int i) { return i < t->nbl ? t->model.moec[t->bl[i].mi].name : "head"; }

/* The top-level collapse fields: the union over every routed layer; the text is the first flagged
 * layer's description, named ("moe2: ...") when the run has more than one routed layer. */
static void trainer_collapse_union(const Trainer *t, int *collapsed, int *reason, int *views, long *first, int *alarm,
                                   char *text, size_t n) {
    const int nl = trainer_nlayers(t);
    *collapsed = *reason = *views = *alarm = 0;
    *first = -1;
    if (text && n) text[0] = 0;
    for (int i = 0; i < nl; i++) { /* the text: the first layer with the most severe alarm */
        const CollapseState *cs = trainer_layer_collapse(t, i);
        int r = 0, a = 0, c = 0, v = 0;
        long f = -1;
        long dm = 0;
        char tx[192];
        trainer_collapse_fill(cs, nl > 1 ? layer_name(t, i) : NULL, &c, &r, &v, &f, &a, &dm, tx, sizeof tx);
        if (a > *alarm && text && n) snprintf(text, n, "%s", tx);
        if (a > *alarm) *alarm = a;
        *views |= v;
        *reason |= r;
        if (f >= 0 && (*first < 0 || f < *first)) *first = f;
    }
    *collapsed = *alarm == ALARM_COLLAPSE;
}

/* The temperature of every backbone layer at this step (its own plan). */
/* counts[label * E + e] += 1 for every selected (sample, expert) pair of the last training forward
 * of a top-k router that capacity dropped (its row is -1); into dcounts instead when it is given
 * (a data-parallel step's sums, core/dist.h) */
static void drops_add(int *counts, double *dcounts, const MoeHead *r, const int32_t *labels, int B) {
    const int k = r->cfg.k, E = r->cfg.E;
    for (int b = 0; b < B; b++)
        for (int j = 0; j < k; j++)
            if (r->row[(size_t)b * k + j] < 0) {
                const size_t i = (size_t)labels[b] * E + r->sel[(size_t)b * k + j];
                if (dcounts) dcounts[i] += 1.0;
                else counts[i]++;
            }
}

/* A data-parallel step's one exchange of numbers after the backward: the loss, the total loss and
 * the hits, every routed layer's statistics (moe_stats_put/get) and the pairs capacity dropped by
 * class and expert, summed over the ranks. Every rank then holds the whole batch's figures and takes
 * the same decisions (NaN, collapse, the utility-bias update); drop_ce is the whole run's, so rank
 * 0's checkpoint holds it. One sum per step: each sum makes the ranks wait for the slowest. */
static ml_status step_allsum(Trainer *t, double *loss, double *total, int *correct) {
    Model *m = &t->model;
    const int is_moe = t->cfg.model.head.kind != HEAD_DENSE;
    const int head_drops = t->drop_ce && m->moe.cfg.kind == HEAD_MOE;
    const int K = t->src.classes;
    DistPack *p = &t->dist.pack; /* kept across steps: its buffer grows once */
    p->n = p->r = 0;
    dist_put(p, *loss);
    dist_put(p, *total);
    dist_put(p, *correct);
    if (is_moe) moe_stats_put(&m->moe, p);
    for (int i = 0; i < m->nmoec; i++) moe_stats_put(&m->moec[i].route, p);
    for (int l = -1; l < t->nbl; l++) { /* the drops: the head's, then each backbone layer's */
        if (l < 0 && !head_drops) continue;
        const MoeHead *r = l < 0 ? &m->moe : &m->moec[t->bl[l].mi].route;
        const long n = (long)K * r->cfg.E, base = p->n;
        for (long i = 0; i < n; i++) dist_put(p, 0.0);
        if (p->overflow) break;
        drops_add(NULL, p->v + base, r, t->labels, t->dist.Bl);
    }
    if (p->overflow) return ml_fail(ML_ERR_NOMEM, "out of memory for the step's sums over the ranks");
    t->dist.comm->sum(t->dist.comm->ctx, p->v, p->n);
    *loss = dist_get(p) / t->dist.nranks;
    *total = dist_get(p) / t->dist.nranks;
    *correct = (int)dist_get(p);
    if (is_moe) moe_stats_get(&m->moe, p, t->dist.nranks);
    for (int i = 0; i < m->nmoec; i++) moe_stats_get(&m->moec[i].route, p, t->dist.nranks);
    for (int l = -1; l < t->nbl; l++) {
        if (l < 0 && !head_drops) continue;
        int *counts = l < 0 ? t->drop_ce : t->bl[l].drop_ce;
        const long n = (long)K * (l < 0 ? m->moe.cfg.E : m->moec[t->bl[l].mi].route.cfg.E);
        for (long i = 0; i < n; i++) counts[i] += (int)dist_get(p);
    }
    return ML_OK;
}

static void trainer_layer_taus(Trainer *t) {
    for (int i = 0; i < t->nbl; i++) t->model.moec[t->bl[i].mi].tau_own = tau_plan_value(&t->bl[i].tau, t->step);
}

ml_status trainer_step(Trainer *t, StepRecord *rec) {
    const int B = t->cfg.model.batch, Bl = t->dist.Bl; /* the global batch; this rank's part of it */
    Model *m = &t->model;
    if (t->pos == 0) {
        shuffle(t->perm, t->src.n_train, &t->rng_data);
        t->ep.loss = t->ep.acc = 0.0;
        t->ep.drop = t->ep.maxvio = t->ep.rho = 0.0;
        t->ep.tau = t->ep.aux = t->ep.clean = 0.0;
        t->ep.rho_head = 0.0;
        if (t->drop_ce) memset(t->drop_ce, 0, sizeof(int32_t) * t->src.classes * t->cfg.model.head.E);
        for (int i = 0; i < t->nbl; i++) {
            TrainerLayer *l = &t->bl[i];
            l->ep_drop = l->ep_maxvio = l->ep_rho = l->ep_tau = l->ep_aux = l->ep_clean = 0.0;
            memset(l->drop_ce, 0, sizeof(int) * t->src.classes * m->moec[l->mi].route.cfg.E);
        }
        t->ep.batches = 0;
        t->clock.epoch = ml_now();
    }
    t->src.fill(t->src.ctx, SPLIT_TRAIN, t->perm + (long)t->pos * B + (long)t->dist.rank * Bl, Bl, model_input(m),
                t->labels, t->cfg.augment ? &t->rng_aug : NULL);
    const float tau = tau_plan_value(&t->tau, t->step);
    const float lr = t->lr_override > 0 ? t->lr_override : lr_value(&t->cfg.lr, t->step);
    trainer_layer_taus(t);
    model_forward(m, Bl, 1, tau, &t->rng_noise);
    /* the pairs capacity dropped, by the sample's class and the pair's expert (data parallel:
     * counted after the backward, with the step's sums) */
    if (!t->dist.comm && t->drop_ce && m->moe.cfg.kind == HEAD_MOE) drops_add(t->drop_ce, NULL, &m->moe, t->labels, Bl);
    for (int i = 0; i < t->nbl && !t->dist.comm; i++)
        drops_add(t->bl[i].drop_ce, NULL, &m->moec[t->bl[i].mi].route, t->labels, Bl);
    int correct = 0;
    double loss = model_loss(m, t->labels, Bl, &correct);
    double total = loss;
    const int is_moe = t->cfg.model.head.kind != HEAD_DENSE;
    if (is_moe) total += m->moe.cfg.alpha * m->moe.stats.l_aux + m->moe.cfg.beta * m->moe.stats.l_z;
    if (m->nmoec > 0) total += model_backbone_aux_loss(m); /* every backbone MoE layer's losses */
    if (t->dist.comm) { /* the backward first (its gradient exchange overlaps it), then one sum of figures */
        t->dist.comm->grad_begin(t->dist.comm->ctx, m->grad, m->n_param);
        model_backward(m, t->labels, Bl); /* a NaN here is caught below, before the update */
        t->dist.comm->grad_end(t->dist.comm->ctx);  /* the mean gradient of the global batch */
        const ml_status ss = step_allsum(t, &loss, &total, &correct);
        if (ss != ML_OK) return ss;
    }
    if (!isfinite(total))
        return ml_fail(ML_ERR_NUMERIC,
                       "loss is %s at step %ld (epoch %d): training stopped before the update; "
                       "try a lower --lr or a higher --tau-min",
                       isnan(total) ? "NaN" : "infinite", t->step + 1, t->epoch + 1);
    if (!t->dist.comm) model_backward(m, t->labels, B); /* gradients are zero here (optim_step consumes them) or written whole */
    optim_step(&t->opt, m, lr);
    double rho_real = 0.0;
    if (is_moe) {
        moe_update_bias(&m->moe);
        t->coll.noise = m->moe.cfg.noise;
        collapse_push_step(&t->coll, &m->moe.stats, t->step + 1);
        rho_real = model_rho_realized(m); /* the model total: kept pairs of the head and every layer */
        t->ep.drop += m->moe.stats.drop_frac;
        t->ep.maxvio += m->moe.stats.maxvio;
        t->ep.rho += rho_real;
        t->ep.tau += tau;
        t->ep.aux += m->moe.stats.l_aux;
        t->ep.clean += m->moe.stats.clean_first_share;
    } else if (m->nmoec > 0) {
        rho_real = model_rho_realized(m);
        t->ep.rho += rho_real;
    }
    if (is_moe && t->nbl > 0) t->ep.rho_head += model_layer_rho_realized(m, -1);
    for (int i = 0; i < t->nbl; i++) { /* every backbone layer's statistics, as the head's */
        TrainerLayer *l = &t->bl[i];
        const MoeStepStats *ls = &m->moec[l->mi].route.stats;
        l->coll.noise = m->moec[l->mi].route.cfg.noise;
        collapse_push_step(&l->coll, ls, t->step + 1);
        l->fired |= l->coll.fired;
        l->coll.fired = 0;
        l->ep_drop += ls->drop_frac;
        l->ep_maxvio += ls->maxvio;
        l->ep_rho += model_layer_rho_realized(m, l->mi);
        l->ep_tau += ls->tau;
        l->ep_aux += ls->l_aux;
        l->ep_clean += ls->clean_first_share;
    }
    model_backbone_update_bias(m);
    t->step++;
    t->pos++;
    t->ep.loss += loss;
    t->ep.acc += (double)correct / B;
    t->ep.batches++;
    if (rec) {
        memset(rec, 0, sizeof *rec);
        const double now = ml_now();
        rec->step = t->step;
        rec->epoch = t->epoch + 1;
        rec->epoch_progress = (double)t->pos / t->steps_per_epoch;
        rec->loss = loss;
        rec->loss_total = total;
        rec->acc = (double)correct / B;
        rec->lr = lr;
        rec->tau = tau;
        rec->img_per_s = now > t->clock.rec ? (t->step - t->clock.rec_step) * (double)B / (now - t->clock.rec) : 0.0;
        t->clock.rec = now;
        t->clock.rec_step = t->step;
        rec->has_moe = is_moe;
        rec->rho_realized = rho_real; /* also for a dense head after backbone MoE layers */
        rec->collapse_first_step = -1;
        /* every routed layer: the backbone layers, then the head */
        rec->nlayers = trainer_nlayers(t);
        for (int i = 0; i < rec->nlayers; i++) {
            StepLayer *sl = &rec->layer[i];
            const CollapseState *cs = trainer_layer_collapse(t, i);
            sl->moe = i < t->nbl ? m->moec[t->bl[i].mi].route.stats : m->moe.stats;
            sl->rho_realized = model_layer_rho_realized(m, i < t->nbl ? t->bl[i].mi : -1);
            sl->dead_experts = collapse_dead_count(cs);
            sl->window_load_entropy = routewin_load_entropy(&cs->train);
            trainer_collapse_fill(cs, rec->nlayers > 1 ? layer_name(t, i) : NULL, &sl->collapsed, &sl->collapse_reason,
                                  &sl->collapse_views, &sl->collapse_first_step, &sl->alarm, &sl->dead_mask,
                                  sl->collapse_text, sizeof sl->collapse_text);
            sl->forecast = cs->forecast;
            sl->trend = cs->trend;
            collapse_forecast_text(cs, sl->forecast_text, sizeof sl->forecast_text);
        }
        if (is_moe) {
            rec->moe = m->moe.stats;
            rec->rho_realized = rho_real;
            rec->dead_experts = collapse_dead_count(&t->coll);
            rec->window_load_entropy = routewin_load_entropy(&t->coll.train);
        } else if (t->nbl > 0) { /* a dense head: the primary layer is the first backbone layer */
            const StepLayer *pl = &rec->layer[0];
            rec->has_moe = 1;
            rec->moe = pl->moe;
            rec->tau = (float)pl->moe.tau;
            rec->dead_experts = pl->dead_experts;
            rec->window_load_entropy = pl->window_load_entropy;
        }
        if (rec->nlayers > 0) {
            const StepLayer *pl = &rec->layer[trainer_primary_layer(t)];
            rec->dead_mask = pl->dead_mask;
            rec->forecast = pl->forecast;
            rec->trend = pl->trend;
            memcpy(rec->forecast_text, pl->forecast_text, sizeof rec->forecast_text);
            trainer_collapse_union(t, &rec->collapsed, &rec->collapse_reason, &rec->collapse_views,
                                   &rec->collapse_first_step, &rec->alarm, rec->collapse_text,
                                   sizeof rec->collapse_text);
        }
    }
    if (t->pos >= t->steps_per_epoch) {
        t->pos = 0;
        t->epoch++;
    }
    return ML_OK;
}

/* An evaluation's outputs, summed over the ranks (each evaluated its share of the test batches;
 * the t-SNE rows a rank did not see are zero on it, so the sums are exact). */
static void eval_allsum(Trainer *t, double *loss, long *correct) {
    Model *m = &t->model;
    const int K = t->src.classes, is_moe = t->cfg.model.head.kind != HEAD_DENSE;
    const int E = t->cfg.model.head.E, d = m->d, tn = t->ev.tsne_n;
    long n = 2;
    if (is_moe) n += (long)K * E + 2L * E + (long)tn * (d + 1);
    for (int l = 0; l < t->nbl; l++) {
        const MoeConv *L = &m->moec[t->bl[l].mi];
        n += (long)K * L->route.cfg.E + L->route.cfg.E + (long)tn * (L->C + 1);
    }
    if (t->ev.tsne_label) n += tn;
    double *v = malloc(sizeof(double) * (size_t)n);
    ML_ASSERT(v);
    /* one pass packs (dir 0), the other unpacks (dir 1): the same order both ways */
    for (int dir = 0; dir < 2; dir++) {
        long k = 0;
#define DS_(x, T)                                                                                                     \
    do {                                                                                                               \
        if (dir == 0) v[k++] = (double)(x);                                                                            \
        else(x) = (T)v[k++];                                                                                           \
    } while (0)
        DS_(*loss, double);
        DS_(*correct, long);
        if (is_moe) {
            for (long i = 0; i < (long)K * E; i++) DS_(t->ev.class_expert[i], int);
            for (int e = 0; e < E; e++) DS_(t->ev.selected[e], long);
            for (int e = 0; e < E; e++) DS_(t->ev.gate[e], double);
            for (long i = 0; i < (long)tn * d; i++) DS_(t->ev.tsne_feat[i], float);
            for (int i = 0; i < tn; i++) DS_(t->ev.tsne_expert[i], int);
        }
        for (int l = 0; l < t->nbl; l++) {
            TrainerLayer *tl = &t->bl[l];
            const MoeConv *L = &m->moec[tl->mi];
            for (long i = 0; i < (long)K * L->route.cfg.E; i++) DS_(tl->class_expert[i], int);
            for (int e = 0; e < L->route.cfg.E; e++) DS_(tl->eval_selected[e], long);
            for (long i = 0; i < (long)tn * L->C; i++) DS_(tl->tsne_feat[i], float);
            for (int i = 0; i < tn; i++) DS_(tl->tsne_expert[i], int);
        }
        if (t->ev.tsne_label)
            for (int i = 0; i < tn; i++) DS_(t->ev.tsne_label[i], int32_t);
#undef DS_
        if (dir == 0) t->dist.comm->sum(t->dist.comm->ctx, v, n);
    }
    free(v);
}

ml_status trainer_evaluate(Trainer *t, double *loss_out, double *acc_out) {
    const int B = t->dist.Bl; /* test batches of the model's batch; each rank evaluates every N-th */
    const int n_test = t->src.n_test;
    Model *m = &t->model;
    double loss = 0.0;
    long correct = 0;
    const int is_moe = t->cfg.model.head.kind != HEAD_DENSE;
    const int E = t->cfg.model.head.E, d = m->d;
    const int tstride = t->ev.tsne_n > 0 ? n_test / t->ev.tsne_n : 0;
    int tn = 0;
    const int route = model_has_routing(m);
    if (is_moe) memset(t->ev.class_expert, 0, sizeof(int) * t->src.classes * E);
    memset(t->ev.selected, 0, sizeof t->ev.selected);
    memset(t->ev.gate, 0, sizeof t->ev.gate);
    for (int l = 0; l < t->nbl; l++) {
        memset(t->bl[l].class_expert, 0, sizeof(int) * t->src.classes * m->moec[t->bl[l].mi].route.cfg.E);
        memset(t->bl[l].eval_selected, 0, sizeof t->bl[l].eval_selected);
    }
    trainer_layer_taus(t);
    if (t->dist.comm) { /* t-SNE rows this rank does not evaluate stay zero for the sum */
        trainer_dist_sync(t);
        if (is_moe) {
            memset(t->ev.tsne_feat, 0, sizeof(float) * (size_t)t->ev.tsne_n * d);
            memset(t->ev.tsne_expert, 0, sizeof(int) * (size_t)t->ev.tsne_n);
        }
        for (int l = 0; l < t->nbl; l++) {
            memset(t->bl[l].tsne_feat, 0, sizeof(float) * (size_t)t->ev.tsne_n * m->moec[t->bl[l].mi].C);
            memset(t->bl[l].tsne_expert, 0, sizeof(int) * (size_t)t->ev.tsne_n);
        }
        if (t->ev.tsne_label) memset(t->ev.tsne_label, 0, sizeof(int32_t) * (size_t)t->ev.tsne_n);
    }
    for (int i = 0; i < n_test; i += B) {
        const int nb = n_test - i < B ? n_test - i : B;
        if ((i / B) % t->dist.nranks != t->dist.rank) continue;
        for (int j = 0; j < nb; j++) t->eval_idx[j] = i + j;
        t->src.fill(t->src.ctx, SPLIT_TEST, t->eval_idx, nb, model_input(m), t->labels, NULL);
        model_forward(m, nb, 0, tau_plan_value(&t->tau, t->step), NULL);
        int c = 0;
        loss += model_loss(m, t->labels, nb, &c) * nb;
        correct += c;
        if (!route) continue;
        if (is_moe) {
            classexp_add(t->ev.class_expert, t->labels, m->moe.first_choice, nb, E);
            for (int e = 0; e < E; e++) {
                t->ev.selected[e] += m->moe.stats.demand[e]; /* all k, before capacity */
                t->ev.gate[e] += (double)m->moe.stats.mean_gate[e] * nb;
            }
        }
        for (int l = 0; l < t->nbl; l++) {
            TrainerLayer *tl = &t->bl[l];
            const MoeHead *r = &m->moec[tl->mi].route;
            classexp_add(tl->class_expert, t->labels, r->first_choice, nb, r->cfg.E);
            for (int e = 0; e < r->cfg.E; e++) tl->eval_selected[e] += r->stats.demand[e];
        }
        /* the fixed t-SNE sample: every tstride-th test image */
        for (int j = 0; j < nb && tstride > 0; j++) {
            const int gi = i + j;
            tn = gi / tstride; /* the sample's row: every tstride-th test image in order */
            if (gi % tstride || tn >= t->ev.tsne_n) continue;
            if (is_moe) {
                memcpy(t->ev.tsne_feat + (long)tn * d, m->act.buf + m->act.feat + (long)j * d, sizeof(float) * d);
                t->ev.tsne_expert[tn] = m->moe.first_choice[j];
            }
            for (int l = 0; l < t->nbl; l++) { /* each layer's pooled router input */
                TrainerLayer *tl = &t->bl[l];
                const MoeConv *L = &m->moec[tl->mi];
                memcpy(tl->tsne_feat + (long)tn * L->C, L->pool + (long)j * L->C, sizeof(float) * L->C);
                tl->tsne_expert[tn] = L->route.first_choice[j];
            }
            t->ev.tsne_label[tn] = t->labels[j];
        }
    }
    if (t->dist.comm) eval_allsum(t, &loss, &correct);
    *loss_out = loss / n_test;
    *acc_out = (double)correct / n_test;
    if (!isfinite(*loss_out)) return ml_fail(ML_ERR_NUMERIC, "test loss is not finite after epoch %d", t->epoch);
    return ML_OK;
}

ml_status trainer_eval_batches(Trainer *t, const int *idx, const int *bstart, int nb, float *logits, int *first,
                               int32_t *labels) {
    const int B = t->cfg.model.batch, n_test = t->src.n_test, C = t->src.classes;
    Model *m = &t->model;
    const int nl = trainer_nlayers(t);
    trainer_layer_taus(t);
    for (int b = 0; b < nb; b++) {
        const int n = bstart[b + 1] - bstart[b];
        if (n < 1 || n > B) return ml_fail(ML_ERR_ARG, "evaluation batch %d has %d images (1..%d)", b, n, B);
        for (int j = 0; j < n; j++) {
            const int i = idx[bstart[b] + j];
            if (i < 0 || i >= n_test) return ml_fail(ML_ERR_ARG, "test index %d is not in 0..%d", i, n_test - 1);
            t->eval_idx[j] = i;
        }
        t->src.fill(t->src.ctx, SPLIT_TEST, t->eval_idx, n, model_input(m), t->labels, NULL);
        const float *z = model_forward(m, n, 0, tau_plan_value(&t->tau, t->step), NULL);
        for (int j = 0; j < n; j++) {
            const int i = t->eval_idx[j];
            if (logits) memcpy(logits + (size_t)i * C, z + (size_t)j * C, sizeof(float) * C);
            if (labels) labels[i] = t->labels[j];
            for (int l = 0; first && l < nl; l++) {
                const MoeHead *r = l < t->nbl ? &m->moec[t->bl[l].mi].route : &m->moe;
                first[(size_t)l * n_test + i] = r->first_choice[j];
            }
        }
    }
    return ML_OK;
}

const char *trainer_layer_name(const Trainer *t, int i) { return layer_name(t, i); }

/* The test-set statistics of one routed layer's last evaluation (first choices in class_expert,
 * all-k selections, gate mass for soft heads), and its evaluation view judged on them. */
static void eval_layer_fill(Trainer *t, CollapseState *cs, const int *class_expert, const long *selected,
                            const double *gate, int E, EvalLayer *out) {
    const int K = t->src.classes;
    out->window_load_entropy = routewin_load_entropy(&cs->train);
    out->window_first_share = routewin_max_share(&cs->train);
    out->dead_experts = collapse_dead_count(cs);
    out->classes = K;
    out->experts = E;
    out->class_expert = class_expert;
    out->mutual_info = classexp_mutual_info(class_expert, K, E);
    long load[MOE_MAX_EXPERTS] = {0}, tot = 0;
    for (int c = 0; c < K; c++)
        for (int e = 0; e < E; e++) {
            load[e] += class_expert[c * E + e];
            tot += class_expert[c * E + e];
        }
    double h = 0.0;
    long mx = 0;
    int dead_first = 0, dead_topk = 0;
    for (int e = 0; e < E; e++) {
        if (load[e] > 0) {
            double p = (double)load[e] / tot;
            h -= p * log(p);
        }
        if (load[e] > mx) mx = load[e];
        dead_first += load[e] == 0;
        dead_topk += selected[e] == 0;
    }
    out->test_load_entropy = E > 1 ? h / log(E) : 1.0;
    out->test_first_share = tot > 0 ? (double)mx / tot : 0.0;
    out->test_dead_first = dead_first;
    out->test_dead_topk = dead_topk;
    /* the evaluation view: first choices and all-k selections (soft heads: gate mass) */
    CollapseEvalInput ci = {.E = E, .selected_dead = cs->soft ? -1 : dead_topk};
    for (int e = 0; e < E; e++) ci.load[e] = cs->soft ? gate[e] : (double)load[e];
    collapse_push_eval(cs, &ci, t->step);
    trainer_collapse_fill(cs, NULL, &out->collapsed, &out->collapse_reason, &out->collapse_views,
                          &out->collapse_first_step, &out->alarm, &out->dead_mask, NULL, 0);
    out->collapse_first_train = cs->view[CVIEW_TRAIN].first_step;
    out->collapse_first_clean = cs->view[CVIEW_CLEAN].first_step;
    out->collapse_first_eval = cs->view[CVIEW_EVAL].first_step;
}

/* The routing part of an EvalRecord: the last evaluation and the epoch's sums of every routed
 * layer (the evaluation views of their collapse flags are judged here); the top level is the
 * primary layer's (the head when it routes, else the first backbone layer) with the collapse
 * fields the union over the layers. */
static void fill_eval_routing(Trainer *t, EvalRecord *er) {
    const Model *m = &t->model;
    const int nl = trainer_nlayers(t);
    if (nl == 0) return;
    const double nb = t->ep.batches > 0 ? (double)t->ep.batches : 1.0;
    er->nlayers = nl;
    for (int i = 0; i < nl; i++) {
        EvalLayer *el = &er->layer[i];
        if (i < t->nbl) {
            TrainerLayer *l = &t->bl[i];
            const MoeConv *L = &m->moec[l->mi];
            el->train_drop_frac = l->ep_drop / nb;
            el->train_maxvio = l->ep_maxvio / nb;
            el->train_rho_realized = l->ep_rho / nb;
            el->epoch_tau = t->ep.batches == 0 ? tau_plan_value(&l->tau, t->step) : l->ep_tau / nb;
            el->epoch_l_aux = l->ep_aux / nb;
            el->epoch_clean_first_share = l->ep_clean / nb;
            static const double no_gate[MOE_MAX_EXPERTS];
            eval_layer_fill(t, &l->coll, l->class_expert, l->eval_selected, no_gate, L->route.cfg.E, el);
            el->drop_class_expert = l->drop_ce;
            l->fired |= l->coll.fired;
            l->coll.fired = 0;
            el->tsne_n = t->ev.tsne_n;
            el->feat_dim = L->C;
            el->tsne_feat = l->tsne_feat;
            el->tsne_expert = l->tsne_expert;
        } else { /* the head */
            el->train_drop_frac = t->ep.drop / nb;
            el->train_maxvio = t->ep.maxvio / nb;
            el->train_rho_realized = (t->nbl > 0 ? t->ep.rho_head : t->ep.rho) / nb;
            el->epoch_tau = t->ep.batches == 0 ? tau_plan_value(&t->tau, t->step) : t->ep.tau / nb;
            el->epoch_l_aux = t->ep.aux / nb;
            el->epoch_clean_first_share = t->ep.clean / nb;
            eval_layer_fill(t, &t->coll, t->ev.class_expert, t->ev.selected, t->ev.gate, t->cfg.model.head.E, el);
            el->drop_class_expert = t->drop_ce;
            el->tsne_n = t->ev.tsne_n;
            el->feat_dim = m->d;
            el->tsne_feat = t->ev.tsne_feat;
            el->tsne_expert = t->ev.tsne_expert;
        }
    }
    const EvalLayer *p = &er->layer[t->cfg.model.head.kind != HEAD_DENSE ? t->nbl : 0];
    er->has_moe = 1;
    er->rho_nominal = model_rho_nominal(m);
    er->moe = *p; /* the primary layer's statistics */
    er->train_rho_realized = t->ep.rho / nb; /* the model total */
    char text[256];
    trainer_collapse_union(t, &er->collapsed, &er->collapse_reason, &er->collapse_views, &er->collapse_first_step,
                           &er->alarm, text, sizeof text);
    er->collapse_first_train = er->collapse_first_clean = er->collapse_first_eval = -1;
    for (int i = 0; i < nl; i++) {
        long *f[3] = {&er->collapse_first_train, &er->collapse_first_clean, &er->collapse_first_eval};
        const long g[3] = {er->layer[i].collapse_first_train, er->layer[i].collapse_first_clean,
                           er->layer[i].collapse_first_eval};
        for (int v = 0; v < 3; v++)
            if (g[v] >= 0 && (*f[v] < 0 || g[v] < *f[v])) *f[v] = g[v];
    }
    er->tsne_label = t->ev.tsne_label;
}

int trainer_tau_command(const TrainerCmd *c) {
    return c->kind == CMD_ANNEAL || (c->kind == CMD_SET && c->param == PARAM_TAU);
}

ml_status trainer_tau_apply(TauPlan *plan, const TrainerCmd *c, long step, long total_steps) {
    if (c->kind == CMD_ANNEAL) {
        const ml_status st = tau_plan_anneal(plan, step, &c->sched);
        if (st == ML_OK && total_steps > step) plan->repl.total = total_steps; /* to the end of training */
        return st;
    }
    if (c->kind == CMD_SET && c->param == PARAM_TAU) {
        if (!isfinite(c->value)) return ml_fail(ML_ERR_ARG, "set: value must be finite");
        return tau_plan_set(plan, step, (float)c->value);
    }
    return ml_fail(ML_ERR_ARG, "not a temperature command");
}

/* The routed layers a command's "@layer" suffix selects: -1 for all (no suffix), else the index;
 * -2 with the message set (and its status in *st) when the run has no such layer. */
static int cmd_layer(const Trainer *t, const TrainerCmd *c, const char *what, ml_status *st) {
    if (!c->layer[0]) return -1;
    const int i = trainer_layer_find(t, c->layer);
    if (i >= 0) return i;
    char names[128] = "";
    size_t o = 0;
    for (int j = 0; j < trainer_nlayers(t) && o < sizeof names; j++)
        o += (size_t)snprintf(names + o, sizeof names - o, "%s@%s", j ? ", " : "", layer_name(t, j));
    if (!strcmp(c->layer, "head"))
        *st = ml_fail(ML_ERR_STATE, "%s @head: the %s head does not route%s%s", what,
                      moe_head_name(t->cfg.model.head.kind), o ? "; routed layers: " : "", names);
    else
        *st = ml_fail(ML_ERR_ARG, "%s: no routed layer '%s' in this run (%s%s)", what, c->layer,
                      o ? "routed layers: " : "none", names);
    return -2;
}

/* Routed layer i's temperature plan (i == nbl: the head's). */

ml_status trainer_apply(Trainer *t, const TrainerCmd *c) {
    MoeConfig *h = &t->model.moe.cfg;
    const int moe = model_has_routing(&t->model); /* the head or a backbone layer routes */
    const char *what = c->kind == CMD_ANNEAL ? "anneal" : "set";
    if (c->kind == CMD_ANNEAL && !moe)
        return ml_fail(ML_ERR_STATE, "anneal: the %s head has no router temperature",
                       moe_head_name(t->cfg.model.head.kind));
    if (c->kind != CMD_SET && c->kind != CMD_ANNEAL) return ml_fail(ML_ERR_ARG, "not a parameter command");
    const double v = c->value;
    const CmdParamInfo *pi = c->kind == CMD_SET ? cmd_param_info(c->param) : NULL;
    if (c->kind == CMD_SET) {
        if (!isfinite(v)) return ml_fail(ML_ERR_ARG, "set: value must be finite");
        if (!pi) return ml_fail(ML_ERR_ARG, "set: unknown parameter");
        if (pi->needs_moe && !moe) /* the params.h table says which parameters belong to the router */
            return ml_fail(ML_ERR_STATE, "set: the %s head has no routing parameters",
                           moe_head_name(t->cfg.model.head.kind));
        if (c->param == PARAM_LR && c->layer[0])
            return ml_fail(ML_ERR_ARG, "set lr: the learning rate is the whole model's (no @%s)", c->layer);
        const ml_status range = cmd_param_check(c->param, v); /* the bounds of params.h */
        if (range != ML_OK) return range;
    }
    ml_status lst = ML_OK;
    const int li = cmd_layer(t, c, what, &lst);
    if (li == -2) return lst;
    if (trainer_tau_command(c)) {
        /* every plan (the head's one also stands for the model-wide temperature) or one layer's:
         * applied to copies first, so a refused command changes none */
        TauPlan next[MODEL_MAX_BBL + 1];
        const int n = t->nbl + 1;
        for (int i = 0; i < n; i++) {
            next[i] = *trainer_layer_plan(t, i);
            if (li >= 0 && i != li) continue;
            const ml_status st = trainer_tau_apply(&next[i], c, t->step, t->total_steps);
            if (st != ML_OK) return st;
        }
        for (int i = 0; i < n; i++) *trainer_layer_plan(t, i) = next[i];
        return ML_OK;
    }
    if (c->param == PARAM_LR) {
        t->lr_override = (float)v;
        return ML_OK;
    }
    /* the routing knobs: the head's live MoeConfig and every backbone layer's, or one of them */
    float *const knob[PARAM_COUNT] = {[PARAM_CF] = &h->cf,
                                      [PARAM_ALPHA] = &h->alpha,
                                      [PARAM_BETA] = &h->beta,
                                      [PARAM_NOISE] = &h->noise,
                                      [PARAM_BIAS_RATE] = &h->bias_rate};
    if ((int)c->param >= 0 && c->param < PARAM_COUNT && knob[c->param]) {
        if (li < 0 || li == t->nbl) *knob[c->param] = (float)v;
        const size_t off = (size_t)((char *)knob[c->param] - (char *)h);
        for (int i = 0; i < t->nbl; i++)
            if (li < 0 || li == i) *(float *)((char *)&t->model.moec[t->bl[i].mi].route.cfg + off) = (float)v;
        return ML_OK;
    }
    return ml_fail(ML_ERR_ARG, "set: unknown parameter");
}

ml_status trainer_extend(Trainer *t, int epochs) {
    if (epochs < 1 || epochs < t->epoch + (t->pos > 0))
        return ml_fail(ML_ERR_ARG, "--epochs %d: the run has done %d epoch%s%s", epochs, t->epoch, t->epoch == 1 ? "" : "s",
                       t->pos > 0 ? " and part of the next" : "");
    if ((long)epochs > LONG_MAX / (t->steps_per_epoch > 0 ? t->steps_per_epoch : 1))
        return ml_fail(ML_ERR_ARG, "--epochs %d: too many steps", epochs);
    const long old = t->total_steps, total = (long)epochs * t->steps_per_epoch;
    /* the ends that were the end of training move with it; a shorter temperature schedule
     * (--tau-epochs) keeps its length */
    if (t->cfg.lr.total == old) t->cfg.lr.total = total;
    for (int i = 0; i < trainer_nlayers(t); i++) {
        TauPlan *p = trainer_layer_plan(t, i);
        if (p->base.total == old) p->base.total = total;
        if (p->has_replacement && p->repl.total == old) p->repl.total = total;
    }
    if (t->cfg.tau.total == old) t->cfg.tau.total = total;
    t->cfg.epochs = epochs;
    t->total_steps = total;
    return ML_OK;
}

ml_status trainer_eval_record(Trainer *t, EvalRecord *er, double train_time) {
    const int B = t->cfg.model.batch;
    memset(er, 0, sizeof *er);
    er->collapse_first_step = er->collapse_first_train = er->collapse_first_clean = er->collapse_first_eval = -1;
    er->epoch = t->epoch;
    er->step = t->step;
    er->train_loss = t->ep.batches ? t->ep.loss / t->ep.batches : 0.0;
    er->train_acc = t->ep.batches ? t->ep.acc / t->ep.batches : 0.0;
    er->img_per_s = train_time > 0 ? t->ep.batches * (double)B / train_time : 0.0;
    ml_status st = trainer_evaluate(t, &er->test_loss, &er->test_acc);
    if (st != ML_OK) return st;
    fill_eval_routing(t, er);
    er->elapsed = ml_now() - t->clock.start;
    return ML_OK;
}

void trainer_describe(const Trainer *t, RunRecord *r) {
    memset(r, 0, sizeof *r);
    r->cfg = t->cfg;
    r->dataset = t->src.name;
    r->dataset_source = t->src.source ? t->src.source : "";
    r->mean = t->src.mean;
    r->std = t->src.std;
    r->c = t->src.c;
    r->h = t->src.h;
    r->w = t->src.w;
    r->classes = t->src.classes;
    r->n_train = t->src.n_train;
    r->n_test = t->src.n_test;
    r->class_names = t->src.class_names;
    r->d = t->model.d;
    r->n_params = t->model.n_param;
    r->rho_nominal = model_rho_nominal(&t->model);
    r->flops_per_sample = model_flops(&t->model);
    r->steps_per_epoch = t->steps_per_epoch;
    r->total_steps = t->total_steps;
    r->tsne_n = model_has_routing(&t->model) ? t->ev.tsne_n : 0; /* the primary layer's sample */
    const Model *m = &t->model;
    const double total = model_flops(m);
    const int B = t->cfg.model.batch;
    r->nlayers = trainer_nlayers(t);
    for (int i = 0; i < r->nlayers; i++) {
        LayerInfo *li = &r->layer[i];
        const MoeConfig *c = i < t->nbl ? &m->moec[t->bl[i].mi].route.cfg : &m->moe.cfg;
        snprintf(li->name, sizeof li->name, "%s", layer_name(t, i));
        li->stage = i < t->nbl ? m->moec[t->bl[i].mi].stage : -1;
        li->kind = c->kind;
        li->E = c->E;
        li->k = c->k;
        li->h = c->h;
        if (c->kind == HEAD_SOFTMOE_BATCH) li->capacity = moe_slots(c, B);
        else if (c->kind != HEAD_MOE || !(c->cf > 0.0f)) li->capacity = B;
        else { /* moe.c's rule: ceil(cf k B / E), within 1..B */
            long C = (long)ceil((double)c->cf * c->k * B / c->E * (1.0 - 1e-6));
            li->capacity = (int)(C < 1 ? 1 : C > B ? B : C);
        }
        const double routed = i < t->nbl ? c->k * m->moec[t->bl[i].mi].flops_expert : m->flops.routed;
        li->rho_nominal = total > 0 ? routed / total : 0.0;
        li->feat_dim = i < t->nbl ? m->moec[t->bl[i].mi].C : m->d;
    }
}

// ---------------------------------------------------------------------------------------------
// data parallelism (core/dist.h)

void trainer_dist_sync(Trainer *t) {
    Model *m = &t->model;
    if (!t->dist.comm || m->n_buf < 1) return;
    double *v = malloc(sizeof(double) * (size_t)m->n_buf);
    ML_ASSERT(v);
    for (long i = 0; i < m->n_buf; i++) v[i] = m->buf[i];
    t->dist.comm->sum(t->dist.comm->ctx, v, m->n_buf);
    for (long i = 0; i < m->n_buf; i++) m->buf[i] = (float)(v[i] / t->dist.nranks);
    free(v);
}

void trainer_dist_gather(Trainer *t) {
    if (!t->dist.comm || !t->dist.rank_rngs) return;
    uint64_t mine[8];
    memcpy(mine, t->rng_noise.s, sizeof t->rng_noise.s);
    memcpy(mine + 4, t->rng_aug.s, sizeof t->rng_aug.s);
    t->dist.comm->gather(t->dist.comm->ctx, mine, t->dist.rank_rngs, sizeof mine);
    if (t->model.n_buf > 0) t->dist.comm->gather(t->dist.comm->ctx, t->model.buf, t->dist.rank_bufs, (long)sizeof(float) * t->model.n_buf);
}

void trainer_dist_share(Trainer *t) {
    if (!t->dist.comm) return;
    const TrainComm *c = t->dist.comm;
    Model *m = &t->model;
    c->bcast(c->ctx, m->param, (long)sizeof(float) * m->n_param); /* the buffers: each rank's, below */
    if (t->opt.m) c->bcast(c->ctx, t->opt.m, (long)sizeof(float) * m->n_param);
    if (t->opt.v) c->bcast(c->ctx, t->opt.v, (long)sizeof(float) * m->n_param);
    StateView *v = malloc(sizeof *v);
    ML_ASSERT(v);
    trainer_state(t, v);
    for (int i = 0; i < v->nvars; i++) {
        const StateVar *r = &v->vars[i];
        if (r->ptr != t->dist.rank_rngs && r->ptr != t->dist.rank_bufs)
            c->bcast(c->ctx, r->ptr, state_var_count(r) * (long)state_type_size(r->type));
    }
    if (t->dist.rank_bufs) { /* each rank its own running statistics and streams */
        if (m->n_buf > 0) c->scatter(c->ctx, t->dist.rank_bufs, m->buf, (long)sizeof(float) * m->n_buf);
        uint64_t mine[8];
        c->scatter(c->ctx, t->dist.rank_rngs, mine, sizeof mine);
        memcpy(t->rng_noise.s, mine, sizeof t->rng_noise.s);
        memcpy(t->rng_aug.s, mine + 4, sizeof t->rng_aug.s);
    }
    if (t->dist.rank != 0) v->restored(v->owner);
    free(v);
}
