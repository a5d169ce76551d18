/* trainer.c — mini-batch training loop, evaluation and record publishing (see trainer.h). */
#include "trainer.h"

#include <cblas.h>
#include <math.h>
#include <omp.h>
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

static void shuffle(int32_t *p, int n, Rng *r) {
    for (int i = n - 1; i > 0; i--) {
        int j = (int)rng_below(r, (uint32_t)(i + 1));
        int32_t t = p[i]; p[i] = p[j]; p[j] = t;
    }
}

ml_status trainer_init(Trainer *t, const TrainConfig *cfg, const Dataset *ds) {
    memset(t, 0, sizeof *t);
    t->cfg = *cfg;
    t->ds = ds;
    TrainConfig *c = &t->cfg;
    if (c->epochs < 1) return ml_fail(ML_ERR_ARG, "--epochs must be at least 1");
    if (c->threads < 1) c->threads = 1;
    omp_set_num_threads(c->threads);
    openblas_set_num_threads(c->threads);
    c->model.in_c = ds->c; c->model.in_h = ds->h; c->model.in_w = ds->w;
    c->model.classes = ds->classes;
    const int B = c->model.batch;
    if (ds->train.n < B)
        return ml_fail(ML_ERR_ARG, "dataset %s has %d training images, fewer than one batch of %d",
                       ds->name, ds->train.n, B);
    if (ds->test.n < 1) return ml_fail(ML_ERR_ARG, "dataset %s has no test images", ds->name);
    t->steps_per_epoch = ds->train.n / B;
    t->total_steps = t->steps_per_epoch * c->epochs;
    c->lr.total = t->total_steps;
    c->lr.warmup = (long)(c->warmup_epochs * t->steps_per_epoch);
    c->tau.total = c->tau_epochs > 0 ? (long)(c->tau_epochs * t->steps_per_epoch + 0.5) : t->total_steps;
    if (c->tau.total < 1) c->tau.total = 1;
    ml_status st = tau_validate(&c->tau);
    if (st != ML_OK) return st;
    tau_plan_init(&t->tau, &c->tau);
    if ((st = model_init(&t->model, &c->model)) != ML_OK) return st;
    if ((st = optim_init(&t->opt, &c->opt, t->model.n_param)) != ML_OK) { model_free(&t->model); return st; }
    rng_seed(&t->rng_init, c->seed);
    rng_seed(&t->rng_data, c->seed ^ 0x5851f42d4c957f2dULL);
    rng_seed(&t->rng_noise, c->seed ^ 0x14057b7ef767814fULL);
    rng_seed(&t->rng_aug, c->seed ^ 0x2545f4914f6cdd1dULL);
    if (c->augment < 0) c->augment = dataset_augment_default(ds);
    model_init_params(&t->model, &t->rng_init);
    t->perm = ml_alloc(sizeof(int32_t) * ds->train.n);
    t->labels = ml_alloc(sizeof(int32_t) * B);
    t->eval_idx = ml_alloc(sizeof(int32_t) * B);
    if (!t->perm || !t->labels || !t->eval_idx) { trainer_free(t); return ml_fail(ML_ERR_NOMEM, "out of memory"); }
    for (int i = 0; i < ds->train.n; i++) t->perm[i] = i;
    if (c->model.head.kind != HEAD_DENSE) {
        const int E = c->model.head.E, d = t->model.d;
        if ((st = routewin_init(&t->win, &c->route, E)) != ML_OK) { trainer_free(t); return st; }
        t->tsne_n = c->tsne_samples < ds->test.n ? c->tsne_samples : ds->test.n;
        if (t->tsne_n < 0) t->tsne_n = 0;
        t->class_expert = ml_alloc(sizeof(int) * ds->classes * E);
        t->tsne_feat = ml_alloc(sizeof(float) * (t->tsne_n * (long)d + 1));
        t->tsne_expert = ml_alloc(sizeof(int) * (t->tsne_n + 1));
        t->tsne_label = ml_alloc(sizeof(int32_t) * (t->tsne_n + 1));
        if (!t->class_expert || !t->tsne_feat || !t->tsne_expert || !t->tsne_label) {
            trainer_free(t);
            return ml_fail(ML_ERR_NOMEM, "out of memory");
        }
    }
    t->t_start = t->t_epoch = t->t_rec = ml_now();
    return ML_OK;
}

void trainer_free(Trainer *t) {
    model_free(&t->model);
    optim_free(&t->opt);
    ml_free(t->perm);
    ml_free(t->labels);
    ml_free(t->eval_idx);
    if (t->win.ring) routewin_free(&t->win);
    ml_free(t->class_expert);
    ml_free(t->tsne_feat);
    ml_free(t->tsne_expert);
    ml_free(t->tsne_label);
    memset(t, 0, sizeof *t);
}

ml_status trainer_step(Trainer *t, StepRecord *rec) {
    const int B = t->cfg.model.batch;
    Model *m = &t->model;
    if (t->pos == 0) {
        shuffle(t->perm, t->ds->train.n, &t->rng_data);
        t->ep_loss = t->ep_acc = 0.0;
        t->ep_drop = t->ep_maxvio = t->ep_rho = 0.0;
        t->ep_batches = 0;
        t->t_epoch = ml_now();
    }
    batch_fill_augment(model_input(m), t->labels, t->ds, &t->ds->train, t->perm + (long)t->pos * B, B,
                       t->cfg.augment ? &t->rng_aug : NULL);
    const float tau = tau_plan_value(&t->tau, t->step);
    const float lr = t->lr_override > 0 ? t->lr_override : lr_value(&t->cfg.lr, t->step);
    model_forward(m, B, 1, tau, &t->rng_noise);
    int correct = 0;
    const double loss = model_loss(m, t->labels, B, &correct);
    double total = loss;
    const int is_moe = t->cfg.model.head.kind != HEAD_DENSE;
    if (is_moe) total += t->cfg.model.head.alpha * m->moe.stats.l_aux + t->cfg.model.head.beta * m->moe.stats.l_z;
    if (!isfinite(total))
        return ml_fail(ML_ERR_NUMERIC, "loss is %s at step %ld (epoch %d): training stopped before the update; "
                       "try a lower --lr or a higher --tau-min", isnan(total) ? "NaN" : "infinite",
                       t->step + 1, t->epoch + 1);
    model_backward(m, t->labels, B); /* gradients are zero here: optim_step consumes them */
    optim_step(&t->opt, m, lr);
    double rho_real = 0.0;
    if (is_moe) {
        moe_update_bias(&m->moe);
        routewin_push(&t->win, &m->moe.stats);
        rho_real = moe_rho_realized(&m->cfg.head, m->flops_backbone, m->flops_classifier,
                                    t->cfg.model.batch, m->moe.stats.pairs_per_sample);
        t->ep_drop += m->moe.stats.drop_frac;
        t->ep_maxvio += m->moe.stats.maxvio;
        t->ep_rho += rho_real;
    }
    t->step++;
    t->pos++;
    t->ep_loss += loss;
    t->ep_acc += (double)correct / B;
    t->ep_batches++;
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
        rec->img_per_s = now > t->t_rec ? (t->step - t->rec_step) * (double)B / (now - t->t_rec) : 0.0;
        t->t_rec = now;
        t->rec_step = t->step;
        rec->has_moe = is_moe;
        if (is_moe) {
            rec->moe = m->moe.stats;
            rec->rho_realized = rho_real;
            rec->dead_experts = routewin_dead_count(&t->win, NULL);
            rec->collapsed = routewin_collapsed(&t->win, &rec->collapse_reason);
            rec->window_load_entropy = routewin_load_entropy(&t->win);
        }
    }
    if (t->pos >= t->steps_per_epoch) { t->pos = 0; t->epoch++; }
    return ML_OK;
}

ml_status trainer_evaluate(Trainer *t, double *loss_out, double *acc_out) {
    const int B = t->cfg.model.batch;
    const DatasetSplit *s = &t->ds->test;
    Model *m = &t->model;
    double loss = 0.0;
    long correct = 0;
    const int is_moe = t->cfg.model.head.kind != HEAD_DENSE;
    const int E = t->cfg.model.head.E, d = m->d;
    const int tstride = t->tsne_n > 0 ? s->n / t->tsne_n : 0;
    int tn = 0;
    if (is_moe) memset(t->class_expert, 0, sizeof(int) * t->ds->classes * E);
    for (int i = 0; i < s->n; i += B) {
        const int nb = s->n - i < B ? s->n - i : B;
        for (int j = 0; j < nb; j++) t->eval_idx[j] = i + j;
        batch_fill(model_input(m), t->labels, t->ds, s, t->eval_idx, nb);
        model_forward(m, nb, 0, tau_plan_value(&t->tau, t->step), NULL);
        int c = 0;
        loss += model_loss(m, t->labels, nb, &c) * nb;
        correct += c;
        if (!is_moe) continue;
        classexp_add(t->class_expert, t->labels, m->moe.first_choice, nb, E);
        /* the fixed t-SNE sample: every tstride-th test image */
        for (int j = 0; j < nb && tstride > 0; j++) {
            const int gi = i + j;
            if (gi % tstride || tn >= t->tsne_n) continue;
            memcpy(t->tsne_feat + (long)tn * d, m->act + m->a_feat + (long)j * d, sizeof(float) * d);
            t->tsne_expert[tn] = m->moe.first_choice[j];
            t->tsne_label[tn] = t->labels[j];
            tn++;
        }
    }
    *loss_out = loss / s->n;
    *acc_out = (double)correct / s->n;
    if (!isfinite(*loss_out))
        return ml_fail(ML_ERR_NUMERIC, "test loss is not finite after epoch %d", t->epoch);
    return ML_OK;
}

void trainer_fill_eval_routing(const Trainer *t, EvalRecord *er) {
    if (t->cfg.model.head.kind == HEAD_DENSE) return;
    const Model *m = &t->model;
    const int K = t->ds->classes, E = t->cfg.model.head.E;
    er->has_moe = 1;
    er->rho_nominal = model_rho_nominal(m);
    const double nb = t->ep_batches > 0 ? (double)t->ep_batches : 1.0;
    er->train_drop_frac = t->ep_drop / nb;
    er->train_maxvio = t->ep_maxvio / nb;
    er->train_rho_realized = t->ep_rho / nb;
    er->window_load_entropy = routewin_load_entropy(&t->win);
    er->window_first_share = routewin_max_share(&t->win);
    er->dead_experts = routewin_dead_count(&t->win, NULL);
    er->collapsed = routewin_collapsed(&t->win, &er->collapse_reason);
    er->classes = K;
    er->experts = E;
    er->class_expert = t->class_expert;
    er->mutual_info = classexp_mutual_info(t->class_expert, K, E);
    long load[MOE_MAX_EXPERTS] = {0}, tot = 0;
    for (int c = 0; c < K; c++)
        for (int e = 0; e < E; e++) { load[e] += t->class_expert[c * E + e]; tot += t->class_expert[c * E + e]; }
    double h = 0.0;
    for (int e = 0; e < E; e++) if (load[e] > 0) { double p = (double)load[e] / tot; h -= p * log(p); }
    er->test_load_entropy = E > 1 ? h / log(E) : 1.0;
    er->tsne_n = t->tsne_n;
    er->feat_dim = m->d;
    er->tsne_feat = t->tsne_feat;
    er->tsne_expert = t->tsne_expert;
    er->tsne_label = t->tsne_label;
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

ml_status trainer_apply(Trainer *t, const TrainerCmd *c) {
    MoeConfig *h = &t->model.moe.cfg;
    const int moe = t->cfg.model.head.kind != HEAD_DENSE;
    if (c->kind == CMD_ANNEAL) {
        if (!moe) return ml_fail(ML_ERR_STATE, "anneal: the %s head has no router temperature", moe_head_name(t->cfg.model.head.kind));
        return trainer_tau_apply(&t->tau, c, t->step, t->total_steps);
    }
    if (c->kind != CMD_SET) return ml_fail(ML_ERR_ARG, "not a parameter command");
    const double v = c->value;
    if (!isfinite(v)) return ml_fail(ML_ERR_ARG, "set: value must be finite");
    if (c->param != PARAM_LR && !moe)
        return ml_fail(ML_ERR_STATE, "set: the %s head has no routing parameters", moe_head_name(t->cfg.model.head.kind));
    switch (c->param) {
    case PARAM_TAU: return trainer_tau_apply(&t->tau, c, t->step, t->total_steps);
    case PARAM_LR:
        if (v <= 0 || v > 100) return ml_fail(ML_ERR_ARG, "set lr: %g is outside (0, 100]", v);
        t->lr_override = (float)v;
        return ML_OK;
    case PARAM_CF:
        if (v > 1000) return ml_fail(ML_ERR_ARG, "set cf: %g is too large", v);
        h->cf = (float)v; t->cfg.model.head.cf = (float)v;
        return ML_OK;
    case PARAM_ALPHA:
    case PARAM_BETA:
        if (v < 0 || v > 1e4) return ml_fail(ML_ERR_ARG, "set %s: %g is outside [0, 10000]", c->param == PARAM_ALPHA ? "alpha" : "beta", v);
        if (c->param == PARAM_ALPHA) { h->alpha = (float)v; t->cfg.model.head.alpha = (float)v; }
        else { h->beta = (float)v; t->cfg.model.head.beta = (float)v; }
        return ML_OK;
    case PARAM_NOISE:
        if (v < 0 || v > 100) return ml_fail(ML_ERR_ARG, "set noise: %g is outside [0, 100]", v);
        h->noise = (float)v; t->cfg.model.head.noise = (float)v;
        return ML_OK;
    case PARAM_BIAS_RATE:
        if (v < 0 || v > 100) return ml_fail(ML_ERR_ARG, "set bias-rate: %g is outside [0, 100]", v);
        h->bias_rate = (float)v; t->cfg.model.head.bias_rate = (float)v;
        return ML_OK;
    case PARAM_COUNT: break;
    }
    return ml_fail(ML_ERR_ARG, "set: unknown parameter");
}

ml_status trainer_eval_record(Trainer *t, EvalRecord *er, double train_time) {
    const int B = t->cfg.model.batch;
    memset(er, 0, sizeof *er);
    er->epoch = t->epoch;
    er->step = t->step;
    er->train_loss = t->ep_batches ? t->ep_loss / t->ep_batches : 0.0;
    er->train_acc = t->ep_batches ? t->ep_acc / t->ep_batches : 0.0;
    er->img_per_s = train_time > 0 ? t->ep_batches * (double)B / train_time : 0.0;
    ml_status st = trainer_evaluate(t, &er->test_loss, &er->test_acc);
    if (st != ML_OK) return st;
    trainer_fill_eval_routing(t, er);
    er->elapsed = ml_now() - t->t_start;
    return ML_OK;
}

ml_status trainer_run(Trainer *t, const TrainCallbacks *cb) {
    while (t->epoch < t->cfg.epochs && !t->stop) {
        const double t0 = ml_now();
        double train_time = 0.0;
        const int ep = t->epoch;
        while (t->epoch == ep && !t->stop) {
            if (cb && cb->before_step && cb->before_step(t, cb->user)) { t->stop = 1; break; }
            StepRecord rec;
            const int want = cb && cb->on_step && ((t->step + 1) % t->cfg.log_every == 0);
            const double s0 = ml_now();
            ml_status st = trainer_step(t, want ? &rec : NULL);
            train_time += ml_now() - s0;
            if (st != ML_OK) return st;
            if (want) cb->on_step(&rec, cb->user);
        }
        if (t->epoch == ep) break; /* stopped inside the epoch */
        EvalRecord er;
        ml_status st = trainer_eval_record(t, &er, train_time);
        if (st != ML_OK) return st;
        er.epoch_seconds = ml_now() - t0;
        if (cb && cb->on_eval) cb->on_eval(&er, cb->user);
    }
    return ML_OK;
}
