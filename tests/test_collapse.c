/* test_collapse.c — the collapse flag on its three views (core/routestats.h CollapseState) on real
 * trainers over synthetic data:
 *   - a router biased towards one expert with selection noise 2: the training load looks
 *     balanced (training view not flagged), the clean-router view flags it and the record's
 *     banner text names it ("clean router collapsed: ..% of first choices to e3 (noise hides it
 *     ...)"); the same trainer without the bias (a healthy reference) is flagged by no view;
 *   - an evaluation that routes every test sample to one expert (a test split of one repeated
 *     image: a distribution shift) while the clean training routing is balanced flags the
 *     evaluation view only;
 *   - softmoe-sample judged by gate mass: uniform gates (zero router, whose argmax ties all go to
 *     e0) are not flagged, gates concentrated on one expert are;
 *   - per layer: a collapsed backbone MoE layer next to a healthy head flags that layer only;
 *   - CollapseState alone: first step and episodes per view, thresholds, the on-collapse rule of
 *     the loop (applied once, origin rule, pause in an interactive loop, stop in a headless one). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gradcheck.h"
#include "core/trainer.h"
#include "datasets/dataset.h"
#include "trainer_util.h"

static void config(TrainConfig *c, HeadKind head) {
    train_config_defaults(c);
    c->model.width = 0.25f;
    c->model.batch = 64;
    c->model.head.kind = head;
    c->model.head.E = 8;
    c->model.head.k = 2;
    c->model.head.h = 16;
    c->epochs = 1;
    c->lr.base = 1e-5f; /* the router barely moves: the test sets it */
    c->threads = 1;
    c->log_every = 1;
    c->augment = 0;
    c->route.window = 20;
    c->route.min_steps = 10;
    c->route.warmup = 0;  /* these cases judge from the first steps: no warm-up, */
    c->route.confirm = 1; /* an episode opens at the first judged step over the threshold */
}

/* Router row `e` = scale (all inputs), the others 0: z[b, e] = scale * sum(x_b), others 0. */
static void bias_router(Trainer *t, int e, float scale) {
    const int E = t->cfg.model.head.E, d = t->model.d;
    float *r = t->model.moe_p.router;
    for (int i = 0; i < E * d; i++) r[i] = 0.0f;
    for (int j = 0; j < d; j++) r[(size_t)e * d + j] = scale;
}

/* A healthy router: the random initial rows with their mean over the features removed. Pooled
 * features are non-negative with a large common component, so a random router sends nearly every
 * sample to the row with the largest weight sum (its clean view is collapsed from step 1); without
 * the common mode the first choice follows the features' variation. */
static void healthy_router(Trainer *t, float gain) {
    const int E = t->cfg.model.head.E, d = t->model.d;
    float *r = t->model.moe_p.router;
    for (int e = 0; e < E; e++) {
        double m = 0;
        for (int j = 0; j < d; j++) m += r[(size_t)e * d + j];
        m /= d;
        for (int j = 0; j < d; j++) r[(size_t)e * d + j] = gain * (float)(r[(size_t)e * d + j] - m);
    }
}

/* Mean over the last forward's batch of z[b, e] (the raw logit of expert e). */
static double mean_logit(const Trainer *t, int e) {
    const MoeHead *m = &t->model.moe;
    double s = 0;
    for (int b = 0; b < m->B; b++) s += m->z[(size_t)b * m->S + e];
    return s / m->B;
}

static void steps(Trainer *t, int n, StepRecord *last) {
    for (int i = 0; i < n; i++)
        if (trainer_step(t, last) != ML_OK) {
            CHECK(0, "trainer_step: %s", ml_last_error());
            return;
        }
}

static void test_hidden_by_noise(const Dataset *ds) {
    for (int biased = 0; biased < 2; biased++) {
        TrainConfig c;
        config(&c, HEAD_MOE);
        c.model.head.noise = biased ? 2.0f : 1.0f;
        Trainer t;
        if (trainer_init_ds(&t, &c, ds) != ML_OK) {
            CHECK(0, "trainer_init: %s", ml_last_error());
            return;
        }
        StepRecord r;
        if (biased) { /* calibrate: the mean logit gap of e3 to the others is 2 (noise 2 spreads it) */
            bias_router(&t, 3, 1.0f);
            steps(&t, 1, &r);
            const double z = mean_logit(&t, 3);
            CHECK(z > 0, "pooled features are positive on average (mean logit %g)", z);
            bias_router(&t, 3, (float)(2.0 / z));
        } else healthy_router(&t, 4.0f);
        steps(&t, 30, &r);
        double clean = 0, ent = 0;
        for (int e = 0; e < 8; e++) clean = r.moe.clean_first_share > clean ? r.moe.clean_first_share : clean;
        ent = r.window_load_entropy;
        if (biased) {
            CHECK(ent > 0.8 && t.coll.view[CVIEW_TRAIN].flag == 0,
                  "hidden: the training load looks balanced (window load entropy %.3f, first share %.2f), not flagged",
                  ent, routewin_max_share(&t.coll.train));
            CHECK(clean > 0.9, "hidden: the clean router sends %.0f%% of first choices to one expert", 100 * clean);
            CHECK(!r.collapsed && r.alarm == ALARM_WARNING && (r.collapse_views & CVIEW_BIT_CLEAN) &&
                      !(r.collapse_views & CVIEW_BIT_TRAIN),
                  "hidden: the clean-router view raises a warning (yellow), not a collapse; the training view does "
                  "not (views %d, alarm %d)",
                  r.collapse_views, r.alarm);
            CHECK(!strncmp(r.collapse_text, "WARNING clean router: 100% of first choices to e3", 49) &&
                      strstr(r.collapse_text, "since step 10 ") &&
                      strstr(r.collapse_text, "the selection noise (") &&
                      strstr(r.collapse_text, "is doing the balancing"),
                  "hidden: the banner text names the view, the share and the expert: \"%s\"", r.collapse_text);
            CHECK(t.coll.view[CVIEW_CLEAN].first_step == c.route.min_steps &&
                      r.collapse_first_step == t.coll.view[CVIEW_CLEAN].first_step,
                  "hidden: first flagged at step %ld (the window judges from %d steps)",
                  t.coll.view[CVIEW_CLEAN].first_step, c.route.min_steps);
            EvalRecord er;
            CHECK(trainer_eval_record(&t, &er, 0) == ML_OK, "evaluation");
            CHECK(er.collapse_first_clean == t.coll.view[CVIEW_CLEAN].first_step && er.collapse_first_train == -1,
                  "hidden: the evaluation record keeps the first step per view (clean %ld, training %ld)",
                  er.collapse_first_clean, er.collapse_first_train);
        } else {
            EvalRecord er;
            CHECK(trainer_eval_record(&t, &er, 0) == ML_OK, "evaluation");
            CHECK(!r.collapsed && !er.collapsed && er.collapse_views == 0 && t.coll.first_step == -1,
                  "healthy reference: no view flagged (window entropy %.3f, clean share %.2f, test share %.2f, "
                  "views %d)",
                  ent, clean, er.moe.test_first_share, er.collapse_views);
        }
        trainer_free(&t);
    }
}

/* Per-layer collapse: a backbone MoE layer (after stage 2) whose router sends every sample to e3
 * (no selection noise for it: `set noise 0 @moe2`) next to a healthy head. Only moe2's flag rises;
 * the record's union and banner text name it, the head's own state stays clean, and the loop's
 * collapse event names the layer. */
static StepRecord g_bb_last;
static char g_bb_event[384];
static int g_bb_head_events;
static void bb_step(const StepRecord *r, void *u) {
    (void)u;
    g_bb_last = *r;
}
static void bb_event(const TrainerEvent *e, void *u) {
    (void)u;
    if (e->kind != TEV_COLLAPSE) return;
    if (!g_bb_event[0]) snprintf(g_bb_event, sizeof g_bb_event, "%s", e->text);
    if (strstr(e->text, " head ")) g_bb_head_events++; /* the message names the layer: "COLLAPSE head ..." */
}
static void test_backbone_layer(const Dataset *ds) {
    TrainConfig c;
    config(&c, HEAD_MOE);
    c.model.moe_n = 1;
    c.model.moe_after[0] = 2;
    c.model.bb_nh = 1;
    c.model.bb_hidden[0] = 8;
    Trainer t;
    if (trainer_init_ds(&t, &c, ds) != ML_OK) {
        CHECK(0, "trainer_init: %s", ml_last_error());
        return;
    }
    healthy_router(&t, 4.0f);
    MoeConv *L = &t.model.moec[0];
    const int E = L->route.cfg.E, C = L->C;
    for (int i = 0; i < E * C; i++) L->p.router[i] = 0.0f;
    for (int j = 0; j < C; j++) L->p.router[(size_t)3 * C + j] = 1.0f;
    TrainerCmd cmd;
    memset(&cmd, 0, sizeof cmd);
    cmd.kind = CMD_SET;
    cmd.param = PARAM_NOISE;
    cmd.value = 0.0;
    snprintf(cmd.layer, sizeof cmd.layer, "moe2");
    CHECK(trainer_apply(&t, &cmd) == ML_OK && L->route.cfg.noise == 0.0f && t.model.moe.cfg.noise > 0.0f,
          "set noise 0 @moe2: moe2's noise only");
    TrainHooks h;
    memset(&h, 0, sizeof h);
    h.on_step = bb_step;
    h.on_event = bb_event;
    const RunEnd end = trainer_run(&t, &h);
    const StepRecord *r = &g_bb_last;
    CHECK(end == RUN_FINISHED && r->nlayers == 2, "the run finished with two routed layers (%d)", r->nlayers);
    CHECK(r->layer[0].collapsed && (r->layer[0].collapse_views & CVIEW_BIT_TRAIN) && r->layer[0].moe.first_share > 0.99,
          "moe2 is flagged on its training view (first share %.2f, views %d)", r->layer[0].moe.first_share,
          r->layer[0].collapse_views);
    CHECK(t.bl[0].coll.view[CVIEW_TRAIN].first_step == c.route.min_steps &&
              r->layer[0].collapse_first_step == c.route.min_steps,
          "moe2 first flagged at step %ld (the window judges from %d steps)", r->layer[0].collapse_first_step,
          c.route.min_steps);
    CHECK(!r->layer[1].collapsed && t.coll.first_step == -1 && g_bb_head_events == 0,
          "the healthy head is not flagged (views %d, first step %ld, %d head events)", r->layer[1].collapse_views,
          t.coll.first_step, g_bb_head_events);
    CHECK(r->collapsed && r->collapse_first_step == r->layer[0].collapse_first_step &&
              !strncmp(r->collapse_text, "COLLAPSE moe2 training: 100% of first choices to e3", 51),
          "the record's union flags the run and its text names the layer: \"%.60s\"", r->collapse_text);
    CHECK(strstr(g_bb_event, "collapse at step 10 (training view, episode 1, first): COLLAPSE moe2 training: ") != NULL,
          "the collapse event names the layer: \"%.90s\"", g_bb_event);
    EvalRecord er;
    CHECK(trainer_eval_record(&t, &er, 0) == ML_OK && er.nlayers == 2 && er.layer[0].test_first_share > 0.99 &&
              er.layer[0].test_dead_first == E - 1 && er.layer[0].feat_dim == C && er.layer[1].feat_dim == t.model.d,
          "evaluation: moe2 sends %.0f%% of test first choices to one expert (%d dead), t-SNE of its %d channels",
          100 * er.layer[0].test_first_share, er.layer[0].test_dead_first, er.layer[0].feat_dim);
    long tot = 0, e3 = 0;
    for (int k = 0; k < er.layer[0].classes; k++)
        for (int e = 0; e < E; e++) {
            tot += er.layer[0].class_expert[k * E + e];
            if (e == 3) e3 += er.layer[0].class_expert[k * E + e];
        }
    CHECK(tot == t.src.n_test && e3 == tot && er.layer[0].mutual_info < 1e-9,
          "moe2's class x expert matrix: all %ld test samples in column e3, I(class;expert) = %g", tot,
          er.layer[0].mutual_info);
    trainer_free(&t);
}

/* A test split of one repeated image: every test sample routes to the same first expert. */
static BatchSource g_inner;
static void shift_fill(void *ctx, SplitId sp, const int32_t *idx, int n, float *x, int32_t *y, Rng *aug) {
    if (sp == SPLIT_TEST) {
        int32_t one[4096];
        for (int i = 0; i < n && i < 4096; i++) one[i] = 0;
        g_inner.fill(ctx, sp, one, n, x, y, aug);
        return;
    }
    g_inner.fill(ctx, sp, idx, n, x, y, aug);
}

static void test_eval_view(const Dataset *ds) {
    TrainConfig c;
    config(&c, HEAD_MOE);
    dataset_batch_source(ds, &g_inner);
    BatchSource src = g_inner;
    src.fill = shift_fill;
    Trainer t;
    if (trainer_init(&t, &c, &src) != ML_OK) {
        CHECK(0, "trainer_init: %s", ml_last_error());
        return;
    }
    healthy_router(&t, 4.0f);
    StepRecord r;
    steps(&t, 25, &r);
    const int before = collapse_views(&t.coll, NULL);
    EvalRecord er;
    CHECK(trainer_eval_record(&t, &er, 0) == ML_OK, "evaluation");
    CHECK(before == 0 && er.moe.test_first_share == 1.0 && er.collapsed && er.collapse_views == CVIEW_BIT_EVAL,
          "shifted test split: clean training routing balanced (clean share %.2f, views %d before), the "
          "evaluation sends %.0f%% of first choices to one expert and only the evaluation view flags it (views %d)",
          r.moe.clean_first_share, before, 100 * er.moe.test_first_share, er.collapse_views);
    char d[192];
    collapse_describe(&t.coll, CVIEW_EVAL, d, sizeof d);
    char want[64];
    snprintf(want, sizeof want, "COLLAPSE evaluation: 100%% of test first choices to e");
    CHECK(strstr(d, want) != NULL && er.collapse_first_eval == t.step && er.collapse_first_step == t.step,
          "evaluation view: \"%s\", first step %ld", d, er.collapse_first_eval);
    /* the next step's record carries the evaluation view until the next evaluation */
    steps(&t, 1, &r);
    CHECK(r.collapse_views == CVIEW_BIT_EVAL && r.alarm == ALARM_COLLAPSE && strstr(r.collapse_text, "COLLAPSE evaluation: "),
          "the step after it still shows the evaluation view (views %d, \"%s\")", r.collapse_views, r.collapse_text);
    trainer_free(&t);
}

/* softmoe-sample is judged by gate mass: a zero router gives uniform gates (every argmax ties
 * to e0, which a count of first choices would call total collapse); a router that puts most of
 * the mass on e2 is collapsed. */
static void test_softmoe_gate_mass(const Dataset *ds) {
    for (int conc = 0; conc < 2; conc++) {
        TrainConfig c;
        config(&c, HEAD_SOFTMOE_SAMPLE);
        c.lr.base = 0.0f;
        Trainer t;
        if (trainer_init_ds(&t, &c, ds) != ML_OK) {
            CHECK(0, "trainer_init: %s", ml_last_error());
            return;
        }
        StepRecord r;
        bias_router(&t, 2, 0.0f);
        if (conc) {
            bias_router(&t, 2, 1.0f);
            steps(&t, 1, &r);
            bias_router(&t, 2, (float)(4.0 / mean_logit(&t, 2))); /* gate of e2 ~ e^4 / (e^4 + 7) = 0.89 */
        }
        steps(&t, 25, &r);
        EvalRecord er;
        CHECK(trainer_eval_record(&t, &er, 0) == ML_OK, "evaluation");
        if (!conc)
            CHECK(
                r.moe.first_share == 1.0 && fabs(r.moe.mean_gate[0] - 0.125) < 1e-3 && !r.collapsed && !er.collapsed,
                "softmoe-sample, uniform gates (mean gate e0 %.3f, argmax share %.2f): not flagged (step %d, eval %d)",
                r.moe.mean_gate[0], r.moe.first_share, r.collapsed, er.collapsed);
        else
            CHECK(r.moe.mean_gate[2] > 0.6 && (r.collapse_views & CVIEW_BIT_TRAIN) &&
                      (er.collapse_views & CVIEW_BIT_EVAL) && strstr(r.collapse_text, "of the gate mass on e2"),
                  "softmoe-sample, gate mass %.2f on e2: flagged by training and evaluation (\"%s\")",
                  r.moe.mean_gate[2], r.collapse_text);
        trainer_free(&t);
    }
}

/* CollapseState alone: thresholds, first step and episodes per view, the rising edge. */
static int has(const char *s, const char *sub) { return strstr(s, sub) != NULL; }

static void test_state(void) {
    RouteWinConfig rc;
    routewin_defaults(&rc);
    rc.window = 4;
    rc.min_steps = 2;
    rc.warmup = 0;
    rc.confirm = 1;
    rc.hysteresis = 0;
    CollapseState s;
    CHECK(collapse_init(&s, &rc, 4, 0) == ML_OK, "collapse_init");
    MoeStepStats st;
    memset(&st, 0, sizeof st);
    st.E = 4;
    st.B = 8;
    for (int e = 0; e < 4; e++) st.kept[e] = st.clean_first[e] = 2;
    st.first_share = st.clean_first_share = 0.25;
    long step = 0;
    int rose = 0;
    for (int i = 0; i < 3; i++) rose |= collapse_push_step(&s, &st, ++step);
    CHECK(rose == 0 && collapse_views(&s, NULL) == 0 && s.first_step == -1, "balanced: nothing flagged");
    memset(st.clean_first, 0, sizeof st.clean_first);
    st.clean_first[1] = 8;
    st.clean_first_share = 1.0;
    int first_rise = 0;
    for (int i = 0; i < 4; i++) {
        const int r = collapse_push_step(&s, &st, ++step);
        if (r && !first_rise) first_rise = (int)step;
    }
    /* the window mean of the clean share passes 0.5 once two of its four steps are 1.0 (0.625) */
    CHECK(first_rise == 5 && s.view[CVIEW_CLEAN].first_step == 5 && s.view[CVIEW_CLEAN].episodes == 1 &&
              s.view[CVIEW_CLEAN].expert == 1 && !s.view[CVIEW_TRAIN].flag,
          "clean view rises at step %d (first %ld, episodes %ld, expert %d)", first_rise,
          s.view[CVIEW_CLEAN].first_step, s.view[CVIEW_CLEAN].episodes, s.view[CVIEW_CLEAN].expert);
    for (int e = 0; e < 4; e++) st.clean_first[e] = 2;
    st.clean_first_share = 0.25;
    for (int i = 0; i < 4; i++) collapse_push_step(&s, &st, ++step);
    CHECK(!s.view[CVIEW_CLEAN].flag && s.view[CVIEW_CLEAN].first_step == 5, "recovered; the first step stays");
    memset(st.clean_first, 0, sizeof st.clean_first);
    st.clean_first[2] = 8;
    st.clean_first_share = 1.0;
    for (int i = 0; i < 4; i++) collapse_push_step(&s, &st, ++step);
    CHECK(s.view[CVIEW_CLEAN].flag && s.view[CVIEW_CLEAN].episodes == 2 && s.view[CVIEW_CLEAN].first_step == 5 &&
              s.view[CVIEW_CLEAN].since == 13 && s.view[CVIEW_CLEAN].expert == 2,
          "a second episode on e2 (episodes %ld, onset %ld, first step still 5)", s.view[CVIEW_CLEAN].episodes,
          s.view[CVIEW_CLEAN].since);
    /* the evaluation view with a stricter threshold: 40% on one expert of 4 */
    CollapseEvalInput in = {.E = 4, .load = {40, 20, 20, 20}, .selected_dead = 0};
    CHECK(collapse_push_eval(&s, &in, step) == 0, "evaluation 40%%: not flagged at max share 0.5");
    s.cfg.max_share = 0.35;
    CHECK(collapse_push_eval(&s, &in, step) == CVIEW_BIT_EVAL && s.view[CVIEW_EVAL].reason == COLLAPSE_SHARE,
          "evaluation 40%%: flagged at --collapse-share 0.35");
    in = (CollapseEvalInput){.E = 4, .load = {50, 50, 0, 0}, .selected_dead = 2};
    s.cfg.max_share = 0.9;
    collapse_push_eval(&s, &in, step);
    CHECK(s.view[CVIEW_EVAL].reason == COLLAPSE_DEAD && s.view[CVIEW_EVAL].dead == 2,
          "evaluation: half the experts selected by no sample: dead (reason %d)", s.view[CVIEW_EVAL].reason);
    collapse_free(&s);

    /* one evaluation is one sample: a share hovering at the threshold (0.52 at 0.5, hysteresis 0.1)
     * opens no episode on one evaluation, but two running do (onset: the first); one past the
     * threshold by the hysteresis (0.65) opens it at once */
    RouteWinConfig hc = rc;
    hc.hysteresis = 0.1;
    hc.max_share = 0.5;
    hc.entropy_min = 0.0;
    hc.dead_frac = 1.0;
    CHECK(collapse_init(&s, &hc, 4, 0) == ML_OK, "init (hysteresis 0.1)");
    collapse_set_warmup(&s, 0);
    CollapseEvalInput hov = {.E = 4, .load = {52, 16, 16, 16}, .selected_dead = 0};
    CollapseEvalInput low = {.E = 4, .load = {40, 20, 20, 20}, .selected_dead = 0};
    CHECK(collapse_push_eval(&s, &hov, 100) == 0 && !s.view[CVIEW_EVAL].flag, "one evaluation at 52%%: no episode");
    CHECK(collapse_push_eval(&s, &low, 200) == 0 && !s.view[CVIEW_EVAL].flag, "then 40%%: none");
    CHECK(collapse_push_eval(&s, &hov, 300) == 0 && !s.view[CVIEW_EVAL].flag, "52%% again (not running): none");
    CHECK(collapse_push_eval(&s, &hov, 400) == CVIEW_BIT_EVAL && s.view[CVIEW_EVAL].since == 300,
          "52%% twice running: an episode with its onset at the first (since %ld)", s.view[CVIEW_EVAL].since);
    collapse_free(&s);
    CHECK(collapse_init(&s, &hc, 4, 0) == ML_OK, "init again");
    collapse_set_warmup(&s, 0);
    CollapseEvalInput high = {.E = 4, .load = {65, 15, 10, 10}, .selected_dead = 0};
    CHECK(collapse_push_eval(&s, &high, 100) == CVIEW_BIT_EVAL && s.view[CVIEW_EVAL].since == 100,
          "one evaluation at 65%% (past 0.5 by the hysteresis): an episode at once");
    CHECK(collapse_push_eval(&s, &hov, 200) == 0 && s.view[CVIEW_EVAL].flag, "52%% next: it stays (exit at 0.4)");
    collapse_free(&s);

    /* one episode, one message: the message as the episode opened (the event's) for its whole life,
     * and with the current value said as such ("now ...") where the banner and ctl show it */
    CHECK(collapse_init(&s, &hc, 4, 0) == ML_OK, "init (one message)");
    collapse_set_warmup(&s, 0);
    char ev[256], later[256], now[256];
    CHECK(collapse_push_eval(&s, &high, 100) == CVIEW_BIT_EVAL, "an evaluation episode opens at 65%% on e0");
    collapse_format(&s, CITEM_EVAL, -1, NULL, ev, sizeof ev); /* what the event carries */
    CollapseEvalInput moved = {.E = 4, .load = {10, 15, 45, 30}, .selected_dead = 0};
    CHECK(collapse_push_eval(&s, &moved, 200) == 0 && s.view[CVIEW_EVAL].flag, "45%% on e2: the episode stays open");
    collapse_format(&s, CITEM_EVAL, -1, NULL, later, sizeof later);
    collapse_format_now(&s, CITEM_EVAL, -1, NULL, now, sizeof now);
    CHECK(!strcmp(ev, later) && has(ev, "65% of test first choices to e0"),
          "the message does not drift: \"%s\" then \"%s\"", ev, later);
    CHECK(!strncmp(now, ev, strlen(ev)) && !strcmp(now + strlen(ev), " (now 45% to e2)"),
          "the banner's form is the message and what changed, said as such: \"%s\"", now);
    collapse_free(&s);
}

/* ---- the on-collapse rule in trainer_run: once, origin rule, in the event log */
typedef struct {
    int applied_rule, collapse_events, pauses, notes;
    long rule_step, collapse_step;
    char text[384];
    int interactive_waits;
} RuleLog;

static void rl_event(const TrainerEvent *e, void *user) {
    RuleLog *l = user;
    if (e->kind == TEV_COLLAPSE) {
        if (!l->collapse_events++) l->collapse_step = e->step;
    }
    if (e->kind == TEV_APPLIED && e->origin == CMD_FROM_RULE) {
        if (!l->applied_rule++) {
            l->rule_step = e->step;
            snprintf(l->text, sizeof l->text, "%s", e->text);
        }
        if (e->cmd == CMD_PAUSE) l->pauses++;
    }
    if (e->kind == TEV_NOTE && e->origin == CMD_FROM_RULE) l->notes++;
}

static int rl_parse(const char *text, TrainerCmd *out, int max, char *err, size_t errn) {
    (void)err;
    (void)errn;
    if (strcmp(text, "set tau 2") || max < 1) return -1;
    memset(out, 0, sizeof *out);
    out->kind = CMD_SET;
    out->param = PARAM_TAU;
    out->value = 2.0;
    snprintf(out->text, sizeof out->text, "set tau 2");
    return 1;
}

/* an interactive command source that resumes at once when the run pauses */
static int rl_next(void *user, long step, int wait, TrainerCmd *c) {
    (void)step;
    RuleLog *l = user;
    if (!wait) return 0;
    l->interactive_waits++;
    memset(c, 0, sizeof *c);
    c->kind = CMD_RESUME;
    snprintf(c->text, sizeof c->text, "resume");
    return 1;
}

static void test_rule(const Dataset *ds) {
    for (int mode = 0; mode < 3; mode++) { /* 0 commands, 1 pause interactive, 2 pause headless */
        TrainConfig c;
        config(&c, HEAD_MOE);
        c.route.max_share = 0.05; /* any routing is "collapsed": the flag fires at min_steps */
        c.epochs = 1;
        Trainer t;
        if (trainer_init_ds(&t, &c, ds) != ML_OK) {
            CHECK(0, "trainer_init: %s", ml_last_error());
            return;
        }
        trainer_set_rule(&t, mode == 0 ? "set tau 2" : "pause");
        RuleLog l = {0};
        TrainHooks h = {.on_event = rl_event, .parse_rule = rl_parse, .user = &l};
        if (mode == 1) {
            h.next_cmd = rl_next;
            h.interactive = 1;
        }
        const RunEnd end = trainer_run(&t, &h);
        if (mode == 0)
            CHECK(end == RUN_FINISHED && l.applied_rule == 1 && l.rule_step == c.route.min_steps &&
                      l.collapse_step == c.route.min_steps && !strcmp(l.text, "rule: set tau 2") &&
                      tau_plan_value(&t.tau, t.step) == 2.0f && t.rule.done,
                  "on-collapse 'set tau 2': applied once (%d), at the first flagged step %ld (collapse event at %ld), "
                  "logged as \"%s\", tau now %g",
                  l.applied_rule, l.rule_step, l.collapse_step, l.text, tau_plan_value(&t.tau, t.step));
        else if (mode == 1)
            CHECK(end == RUN_FINISHED && l.pauses == 1 && l.interactive_waits == 1 && l.rule_step == c.route.min_steps,
                  "on-collapse pause (interactive): paused once at step %ld and waited for resume (%d waits)",
                  l.rule_step, l.interactive_waits);
        else
            CHECK(end == RUN_INTERRUPTED && t.step == c.route.min_steps && l.notes == 1,
                  "on-collapse pause (headless): the run stops at the flagged step %ld", t.step);
        trainer_free(&t);
    }
}


/* ---- the alarm a researcher can trust (issue 26): warm-up, hysteresis, confirmation, severities,
 * expert death and revival, one message, the forecast. CollapseState alone, with hand-made steps. */

/* one step: clean first choices with share `cs` on expert `ce` (the rest spread), kept counts from
 * `kept` (NULL: balanced), first share of the noisy selection `ts` */
static int push(CollapseState *s, long step, double cs, int ce, const int *kept, double ts) {
    MoeStepStats st;
    memset(&st, 0, sizeof st);
    st.E = s->E;
    st.B = 100;
    const int top = (int)(cs * 100 + 0.5);
    for (int e = 0; e < s->E; e++) st.clean_first[e] = e == ce ? top : (100 - top) / (s->E - 1);
    st.clean_first_share = cs;
    for (int e = 0; e < s->E; e++) st.kept[e] = st.first[e] = kept ? kept[e] : 25;
    st.first_share = ts;
    st.gate_entropy = 0.5; /* a router that decides (not idle) */
    st.first_agree = 0.9;
    return collapse_push_step(s, &st, step);
}

static void alarm_config(RouteWinConfig *rc) {
    routewin_defaults(rc);
    rc->window = 50;
    rc->min_steps = 50;
}

static void test_alarm(void) {
    /* defaults stated in the README */
    RouteWinConfig d;
    routewin_defaults(&d);
    CHECK(d.warmup == -1 && d.hysteresis == 0.1 && d.confirm == 20 && d.min_steps == d.window,
          "defaults: warm-up auto, hysteresis 0.1, confirm 20, a full window");
    CHECK(collapse_warmup(&d, 936) == 46 && collapse_warmup(&d, 4680) == 200 && collapse_warmup(&d, 100000) == 200,
          "auto warm-up: min(5%% of training, 200) (%ld, %ld)", collapse_warmup(&d, 936), collapse_warmup(&d, 4680));
    d.warmup = 7;
    CHECK(collapse_warmup(&d, 100000) == 7, "an explicit warm-up wins");

    /* 1. warm-up: a router concentrated during its first steps raises nothing; the window must be
     *    full of post-warm-up steps */
    RouteWinConfig rc;
    alarm_config(&rc);
    CollapseState s;
    CHECK(collapse_init(&s, &rc, 8, 0) == ML_OK, "collapse_init");
    collapse_set_warmup(&s, 40);
    long step = 0;
    int rose = 0;
    for (; step < 40;) rose |= push(&s, ++step, 0.9, 3, NULL, 0.2); /* concentrated, inside the warm-up */
    for (int i = 0; i < 60; i++) rose |= push(&s, ++step, 0.2, 3, NULL, 0.2);
    CHECK(rose == 0 && collapse_alarm(&s) == ALARM_NONE && s.first_step == -1,
          "warm-up: a concentrated start inside the warm-up raises nothing (views %d)", collapse_views(&s, NULL));
    collapse_free(&s);

    /* 2. hysteresis + confirmation: a clean share wobbling around 0.5 opens ONE episode, which closes only
     *    once the share is below 0.4 for `confirm` steps */
    CHECK(collapse_init(&s, &rc, 8, 0) == ML_OK, "collapse_init");
    collapse_set_warmup(&s, 0);
    s.noise = 1.0; /* the training selection's noise (the trainer sets it every step) */
    step = 0;
    for (int i = 0; i < 50; i++) push(&s, ++step, 0.3, 5, NULL, 0.2);
    long opened = -1;
    for (int i = 0; i < 400; i++) { /* the share over the window wobbles 0.45..0.58 */
        const double v = 0.515 + 0.07 * sin(i * 0.3) + ((i * 7919) % 13 - 6) * 0.004;
        if (push(&s, ++step, v, 5, NULL, 0.2) & CVIEW_BIT_CLEAN && opened < 0) opened = step;
    }
    CHECK(s.view[CVIEW_CLEAN].episodes == 1 && s.view[CVIEW_CLEAN].flag,
          "hysteresis: a share wobbling around 0.5 is one episode, still open (%ld episodes)",
          s.view[CVIEW_CLEAN].episodes);
    CHECK(opened > 0 && s.view[CVIEW_CLEAN].since == opened - rc.confirm + 1,
          "confirmation: the episode opens after %d steps over the threshold and reports its onset (%ld, opened %ld)",
          rc.confirm, s.view[CVIEW_CLEAN].since, opened);
    CHECK(collapse_alarm(&s) == ALARM_WARNING && collapse_item_alarm(&s, CITEM_CLEAN) == ALARM_WARNING,
          "severity: only the clean router concentrates -> a warning (yellow)");
    char msg[192];
    collapse_format(&s, CITEM_CLEAN, -1, NULL, msg, sizeof msg);
    CHECK(!strncmp(msg, "WARNING clean router: ", 22) && strstr(msg, "of first choices to e5") &&
              strstr(msg, "the selection noise (1) is doing the balancing"),
          "the warning's message names the view, the expert and the share: \"%s\"", msg);
    long closed = -1;
    for (int i = 0; i < 200 && closed < 0; i++) {
        push(&s, ++step, 0.2, 5, NULL, 0.2);
        if (!s.view[CVIEW_CLEAN].flag) closed = step;
    }
    CHECK(closed > 0 && s.view[CVIEW_CLEAN].episodes == 1, "the episode closes once the share is back under 0.4 (step %ld)",
          closed);
    /* a short spike (shorter than confirm) opens nothing */
    for (int i = 0; i < 60; i++) push(&s, ++step, 0.2, 5, NULL, 0.2);
    for (int i = 0; i < 30; i++) push(&s, ++step, i < 12 ? 1.0 : 0.2, 5, NULL, 0.2);
    CHECK(s.view[CVIEW_CLEAN].episodes == 1, "a spike shorter than the confirmation opens no episode (%ld)",
          s.view[CVIEW_CLEAN].episodes);
    /* the training view concentrating too: a red collapse; the message says so */
    int fired = 0;
    const int starve[8] = {2, 2, 90, 2, 1, 1, 1, 1};
    for (int i = 0; i < 120; i++) fired |= push(&s, ++step, 0.9, 2, starve, 0.9);
    CHECK((fired & CVIEW_BIT_TRAIN) && collapse_alarm(&s) == ALARM_COLLAPSE &&
              collapse_item_alarm(&s, CITEM_CLEAN) == ALARM_COLLAPSE,
          "severity: the training selection concentrating -> a collapse (red), the clean view with it");
    collapse_format(&s, CITEM_TRAIN, -1, "moe2", msg, sizeof msg);
    CHECK(!strncmp(msg, "COLLAPSE moe2 training: ", 24) && strstr(msg, "% of first choices to e2") &&
              strstr(msg, "experts starve") && !strstr(msg, "now"),
          "the collapse message (as the episode opened): \"%s\"", msg);
    char msgnow[256];
    collapse_format_now(&s, CITEM_TRAIN, -1, "moe2", msgnow, sizeof msgnow);
    CHECK(!strncmp(msgnow, msg, strlen(msg)) && !strcmp(msgnow + strlen(msg), " (now 90% to e2)"),
          "with the current share said as such: \"%s\"", msgnow);
    int ex = -2;
    CHECK(collapse_top_item(&s, &ex) == CITEM_TRAIN && ex == -1, "the top item is the training view");
    collapse_free(&s);

    /* 3. expert death and revival: one expert without a kept pair for a window dies (one event,
     *    yellow), the load panel's mask has it; it comes back -> one revival; half the experts
     *    dead -> red */
    CHECK(collapse_init(&s, &rc, 8, 0) == ML_OK, "collapse_init");
    collapse_set_warmup(&s, 0);
    int kept[8];
    for (int e = 0; e < 8; e++) kept[e] = 25;
    step = 0;
    for (int i = 0; i < 60; i++) push(&s, ++step, 0.2, 0, kept, 0.2);
    kept[5] = 0;
    long died_at = -1, deaths_seen = 0;
    for (int i = 0; i < 120; i++) {
        push(&s, ++step, 0.2, 0, kept, 0.2);
        if (s.died) {
            deaths_seen++;
            if (died_at < 0) died_at = step;
            s.died = 0;
        }
    }
    CHECK(died_at == 60 + rc.window && deaths_seen == 1 && s.dead[5] && s.dead_since[5] == 61 &&
              collapse_dead_mask(&s) == (1u << 5) && s.deaths == 1,
          "death: e5 dies after a whole window without a kept pair (step %ld, since %ld, %ld event(s), mask %llx)",
          died_at, s.dead_since[5], deaths_seen, (unsigned long long)collapse_dead_mask(&s));
    CHECK(collapse_alarm(&s) == ALARM_WARNING && collapse_item_alarm(&s, CITEM_DEATH) == ALARM_WARNING,
          "one dead expert of 8: a warning (yellow)");
    collapse_format(&s, CITEM_DEATH, 5, NULL, msg, sizeof msg);
    CHECK(!strncmp(msg, "EXPERT DEATH e5: no kept pair for 50 steps, since step 61 (1/8 dead: e5)", 72),
          "the death message: \"%s\"", msg);
    /* sporadic load (one step in 10) is not a revival */
    for (int i = 0; i < 40; i++) {
        kept[5] = i % 10 == 0;
        push(&s, ++step, 0.2, 0, kept, 0.2);
    }
    CHECK(s.dead[5] && s.revivals == 0, "sporadic load does not revive e5 (revivals %ld)", s.revivals);
    kept[5] = 20;
    long back_at = -1;
    for (int i = 0; i < 60 && back_at < 0; i++) {
        push(&s, ++step, 0.2, 0, kept, 0.2);
        if (s.revived) back_at = step;
    }
    CHECK(back_at > 0 && !s.dead[5] && s.revivals == 1 && collapse_dead_mask(&s) == 0 && collapse_alarm(&s) == ALARM_NONE,
          "revival: e5 comes back (step %ld) and the alarm clears", back_at);
    s.revived = 0;
    collapse_format(&s, CITEM_REVIVAL, 5, NULL, msg, sizeof msg);
    CHECK(!strncmp(msg, "EXPERT REVIVAL e5: kept pairs again (0/8 dead)", 46), "the revival message: \"%s\"", msg);
    for (int e = 0; e < 4; e++) kept[e] = 0;
    for (int i = 0; i < 80; i++) push(&s, ++step, 0.2, 7, kept, 0.2);
    CHECK(collapse_dead_count(&s) == 4 && collapse_alarm(&s) == ALARM_COLLAPSE &&
              collapse_item_alarm(&s, CITEM_DEATH) == ALARM_COLLAPSE,
          "half the experts dead: red (%d dead)", collapse_dead_count(&s));
    collapse_format(&s, CITEM_DEATH, 3, NULL, msg, sizeof msg);
    CHECK(!strncmp(msg, "COLLAPSE: EXPERT DEATH e3", 25), "the fourth death is a collapse: \"%s\"", msg);
    collapse_free(&s);

    /* 4. the forecast: a clean share rising linearly 0.2 -> 0.5 over 600 steps is forecast to cross
     *    before it does, within 25% of the true time */
    CHECK(collapse_init(&s, &rc, 8, 0) == ML_OK, "collapse_init");
    collapse_set_warmup(&s, 0);
    step = 0;
    long predicted = -1, asked = 300;
    char ftxt[96] = "";
    for (int i = 0; i < 900; i++) {
        const double v = 0.2 + 0.0005 * i; /* 0.5 at i = 600 */
        push(&s, ++step, v > 1 ? 1 : v, 4, NULL, 0.2);
        if (step == asked) {
            predicted = s.forecast >= 0 ? step + s.forecast : -1;
            collapse_forecast_text(&s, ftxt, sizeof ftxt);
        }
    }
    /* the window mean (50 steps) passes 0.5 about 25 steps after the per-step value does */
    const long truth = s.view[CVIEW_CLEAN].since + rc.confirm - 1 > 0 ? 625 : -1;
    CHECK(predicted > 0 && labs(predicted - truth) < (truth - asked) / 4,
          "forecast at step %ld: crossing at ~%ld, truth ~%ld (%s)", asked, predicted, truth, ftxt);
    CHECK(strstr(ftxt, "rising: threshold in ~") != NULL, "the forecast text: \"%s\"", ftxt);
    collapse_free(&s);
}

/* The idle router (issue 33): large selection noise over a router scaled to almost nothing: gates
 * near uniform, the noisy first choice rarely the clean one -> a yellow "router idle" warning; the
 * same router without noise (first_agree 1) is not flagged. */
static void test_idle(const Dataset *ds) {
    for (int noisy = 1; noisy >= 0; noisy--) {
        TrainConfig c;
        config(&c, HEAD_MOE);
        c.model.head.noise = noisy ? 3.0f : 0.0f;
        c.route.confirm = 5;
        c.lr.base = 1e-6f;
        Trainer t;
        if (trainer_init_ds(&t, &c, ds) != ML_OK) {
            CHECK(0, "trainer_init: %s", ml_last_error());
            return;
        }
        healthy_router(&t, 1e-3f);
        StepRecord r;
        steps(&t, 40, &r);
        if (noisy) {
            CHECK(t.coll.idle.flag && r.alarm == ALARM_WARNING && (r.collapse_views & CVIEW_BIT_IDLE) && !r.collapsed,
                  "idle router: flagged as a warning (gate entropy %.3f, agreement %.2f, views %d, alarm %d)",
                  t.coll.idle_gate_h, t.coll.idle_agree, r.collapse_views, r.alarm);
            CHECK(strstr(r.collapse_text, "router idle: gate entropy") && strstr(r.collapse_text, "the noise is routing"),
                  "idle router: the message says so: \"%s\"", r.collapse_text);
        } else
            CHECK(!t.coll.idle.flag && !(r.collapse_views & CVIEW_BIT_IDLE),
                  "a router without noise is not idle (agreement %.2f)", t.coll.idle_agree);
        trainer_free(&t);
    }
}

/* ---- every cause clause follows from the state it describes (noise scale, views, deaths) */

static void test_causes(void) {
    RouteWinConfig rc;
    routewin_defaults(&rc);
    CollapseState s;
    char m[192];
    CHECK(collapse_init(&s, &rc, 8, 0) == ML_OK, "causes: init");
    s.train.n = 100; /* the training window has been judged */
    /* the clean router's warning: training balanced, the clean router concentrated */
    s.view[CVIEW_CLEAN].flag = 1, s.view[CVIEW_CLEAN].since = 146, s.view[CVIEW_CLEAN].expert = 6;
    s.view[CVIEW_CLEAN].share = 0.67;
    s.noise = 1.0;
    collapse_format(&s, CITEM_CLEAN, -1, NULL, m, sizeof m);
    CHECK(has(m, "WARNING clean router") && has(m, "the selection noise (1) is doing the balancing") &&
              has(m, "evaluation, without noise, will follow it"),
          "clean warning, noise 1, no evaluation yet: noise balances, evaluation will follow: \"%s\"", m);
    s.noise = 0.0;
    collapse_format(&s, CITEM_CLEAN, -1, NULL, m, sizeof m);
    CHECK(has(m, "no noise: capacity is doing the balancing") && !has(m, "noise is doing") && !has(m, "noise ("),
          "clean warning, --noise 0: never blames the noise: \"%s\"", m);
    s.view[CVIEW_EVAL].expert = 2, s.view[CVIEW_EVAL].share = 0.37;
    collapse_format(&s, CITEM_CLEAN, -1, NULL, m, sizeof m);
    CHECK(has(m, "last evaluation 37% to e2") && !has(m, "will"),
          "clean warning, an evaluation that is not concentrated: says its share, predicts nothing: \"%s\"", m);
    s.view[CVIEW_EVAL].flag = 1, s.view[CVIEW_EVAL].since = 128, s.view[CVIEW_EVAL].share = 0.9;
    collapse_format(&s, CITEM_CLEAN, -1, NULL, m, sizeof m);
    CHECK(has(m, "evaluation collapsed since step 128") && !has(m, "will"),
          "clean warning after the evaluation collapsed: says so, no 'will collapse': \"%s\"", m);
    /* the evaluation's clause */
    s.view[CVIEW_CLEAN].flag = 0;
    collapse_format(&s, CITEM_EVAL, -1, NULL, m, sizeof m);
    CHECK(has(m, "COLLAPSE evaluation") && has(m, "(the training batches look balanced)"),
          "evaluation alone, training balanced and no death: 'the training batches look balanced': \"%s\"", m);
    s.view[CVIEW_TRAIN].pending = 5;
    collapse_format(&s, CITEM_EVAL, -1, NULL, m, sizeof m);
    CHECK(has(m, "the training selection concentrating too") && !has(m, "look balanced"),
          "evaluation while the training view is over the threshold, unconfirmed: never 'look balanced': \"%s\"", m);
    s.view[CVIEW_TRAIN].pending = 0;
    s.dead[0] = s.dead[4] = 1, s.dead_since[0] = s.dead_since[4] = 170;
    collapse_format(&s, CITEM_EVAL, -1, NULL, m, sizeof m);
    CHECK(has(m, "2/8 dead in training") && !has(m, "look balanced"),
          "evaluation after two training deaths: names them, never 'look balanced': \"%s\"", m);
    s.dead[0] = s.dead[4] = 0, s.dead_since[0] = s.dead_since[4] = -1;
    s.view[CVIEW_CLEAN].flag = 1;
    collapse_format(&s, CITEM_EVAL, -1, NULL, m, sizeof m);
    CHECK(has(m, "the clean router too, training selection balanced") && !has(m, "look balanced"),
          "evaluation with the clean router concentrated: says so: \"%s\"", m);
    s.view[CVIEW_TRAIN].flag = 1, s.view[CVIEW_TRAIN].since = 131, s.view[CVIEW_TRAIN].expert = 3;
    s.view[CVIEW_TRAIN].share = 0.9;
    collapse_format(&s, CITEM_EVAL, -1, NULL, m, sizeof m);
    CHECK(has(m, "the training selection too") && !has(m, "look balanced"),
          "evaluation with the training view concentrated: 'the training selection too': \"%s\"", m);
    /* the clean router with the training view flagged: a collapse, not the noise's doing */
    collapse_format(&s, CITEM_CLEAN, -1, NULL, m, sizeof m);
    CHECK(has(m, "COLLAPSE clean router") && has(m, "and the training selection too") && !has(m, "balancing"),
          "clean router with training flagged: red, 'and the training selection too': \"%s\"", m);
    /* the training view: experts starve, and the deaths when there are any */
    collapse_format(&s, CITEM_TRAIN, -1, NULL, m, sizeof m);
    CHECK(has(m, "(experts starve)"), "training view, no death: '(experts starve)': \"%s\"", m);
    s.dead[5] = 1, s.dead_since[5] = 150;
    collapse_format(&s, CITEM_TRAIN, -1, NULL, m, sizeof m);
    CHECK(has(m, "experts starve; 1/8 dead in training"), "training view with a death: names it: \"%s\"", m);
    /* the longest: a layer name, dead experts in the view, every clause, fits the record's text */
    s.view[CVIEW_TRAIN].flag = 0, s.dead[1] = s.dead[2] = s.dead[3] = 1;
    s.view[CVIEW_EVAL].reason = COLLAPSE_DEAD | COLLAPSE_SHARE, s.view[CVIEW_EVAL].dead = 8;
    s.view[CVIEW_EVAL].since = 9999999;
    collapse_format(&s, CITEM_EVAL, -1, "moe12", m, sizeof m);
    CHECK(strlen(m) < 190 && m[strlen(m) - 1] == ')', "the longest message is whole (%zu bytes): \"%s\"", strlen(m), m);
    collapse_free(&s);
}

int main(void) {
    Dataset ds;
    SyntheticOptions so;
    synthetic_defaults(&so);
    so.h = 16;
    so.w = 16;
    so.c = 3;
    so.classes = 4;
    so.n_train = 2048;
    so.n_test = 256;
    if (synthetic_generate(&ds, &so) != ML_OK) {
        printf("synthetic: %s\n", ml_last_error());
        return 1;
    }
    test_hidden_by_noise(&ds);
    test_eval_view(&ds);
    test_softmoe_gate_mass(&ds);
    test_state();
    test_causes();
    test_alarm();
    test_idle(&ds);
    test_rule(&ds);
    test_backbone_layer(&ds);
    dataset_free(&ds);
    printf("%d failure(s)\n", n_failed);
    return n_failed ? 1 : 0;
}
