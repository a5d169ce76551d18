/* test_commands.c — the command language parser (app/cli/commands.c) and the trainer's
 * handling of parameter commands: every command form parses to the right record, nonsense gets a
 * clear message, command files are sorted by step, and set/anneal change what the trainer uses. */
#include "app/cli/commands.h"
#include "core/cmdtab.h"
#include "datasets/dataset.h"
#include "trainer_util.h"
#include "gradcheck.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void ok_parse(const char *line, CmdKind kind, const char *norm) {
    TrainerCmd c;
    char err[256] = "";
    int r = command_parse(line, &c, err, sizeof err);
    CHECK(r == 0 && c.kind == kind && strcmp(c.text, norm) == 0, "'%s' parses as '%s' (got '%s'%s%s)", line, norm,
          c.text, err[0] ? ", " : "", err);
}

static void bad_parse(const char *line, const char *msg) {
    TrainerCmd c;
    char err[256] = "";
    int r = command_parse(line, &c, err, sizeof err);
    CHECK(r == -1 && strstr(err, msg), "'%s' is rejected with \"%s\" (got \"%s\")", line, msg, err);
}

int main(void) {
    /* the command table (core/cmdtab.h): names in CmdKind order, each found and each parsed as its kind */
    for (int k = 0; k < CMD_KIND_COUNT; k++) {
        CHECK(cmd_words[k] && !strcmp(cmd_words[k], cmd_table[k].name) && cmd_find(cmd_table[k].name) == k,
              "cmd_table row %d is '%s', found as its kind", k, cmd_table[k].name);
        if (!cmd_table[k].args[0]) ok_parse(cmd_table[k].name, (CmdKind)k, cmd_table[k].name);
    }
    CHECK(cmd_words[CMD_KIND_COUNT] == NULL && cmd_find("exit") == CMD_QUIT && cmd_find("bogus") == -1,
          "cmd_words ends with NULL; exit is quit; an unknown word is -1");
    bad_parse("on-collapse quit", "cannot be part of a rule (set, anneal, snapshot, eval; or 'pause' alone)");
    bad_parse("eval @moe2", "eval: only set and anneal take an @layer suffix");
    ok_parse("pause", CMD_PAUSE, "pause");
    ok_parse("  RESUME ", CMD_RESUME, "resume");
    ok_parse("step", CMD_STEP, "step 1");
    ok_parse("step 100", CMD_STEP, "step 100");
    ok_parse("set tau 0.5", CMD_SET, "set tau 0.5");
    ok_parse("set lr 1e-2", CMD_SET, "set lr 0.01");
    ok_parse("set bias-rate 0.002", CMD_SET, "set bias-rate 0.002");
    ok_parse("anneal sigmoid 1.0 0.1 s=10 c=0.5", CMD_ANNEAL, "anneal sigmoid 1 0.1 s=10 c=0.5");
    ok_parse("anneal exp now 0.05", CMD_ANNEAL, "anneal exp now 0.05");
    ok_parse("snapshot", CMD_SNAPSHOT, "snapshot");
    ok_parse("eval", CMD_EVAL, "eval");
    ok_parse("quit", CMD_QUIT, "quit");
    ok_parse("help", CMD_HELP, "help");
    TrainerCmd c;
    char err[256];
    /* one routed layer: the @layer suffix is kept in the normalised text (event log, replay) */
    ok_parse("set tau 0.3 @moe2", CMD_SET, "set tau 0.3 @moe2");
    ok_parse("anneal exp now 0.05 @Head", CMD_ANNEAL, "anneal exp now 0.05 @head");
    ok_parse("set cf 2 @moe0  # socket", CMD_SET, "set cf 2 @moe0");
    command_parse("set tau 0.3 @moe2", &c, err, sizeof err);
    CHECK(!strcmp(c.layer, "moe2") && c.param == PARAM_TAU && c.value == 0.3, "set tau 0.3 @moe2: layer '%s'", c.layer);
    command_parse("set tau 0.3", &c, err, sizeof err);
    CHECK(c.layer[0] == 0, "no suffix: every layer (layer '%s')", c.layer);
    bad_parse("set lr 0.1 @moe2", "the learning rate is the whole model's");
    bad_parse("pause @moe2", "only set and anneal take an @layer suffix");
    bad_parse("set tau 1 @", "is not a layer suffix");
    bad_parse("set tau 1 @a/b", "is not a layer suffix");
    bad_parse("set tau @moe2", "usage: set");
    command_parse("set alpha 0.02", &c, err, sizeof err);
    CHECK(c.param == PARAM_ALPHA && c.value == 0.02, "set alpha 0.02 -> PARAM_ALPHA 0.02");
    command_parse("anneal sigmoid 1.0 0.1 s=12 c=0.3 min=0.05", &c, err, sizeof err);
    CHECK(c.sched.kind == TAU_SIGMOID && c.sched.tau0 == 1.0f && fabsf(c.sched.tau1 - 0.1f) < 1e-7f &&
              c.sched.s == 12.0f && fabsf(c.sched.c - 0.3f) < 1e-7f && fabsf(c.sched.tau_min - 0.05f) < 1e-7f,
          "anneal fills the schedule record");
    bad_parse("", "empty command");
    bad_parse("frobnicate", "unknown command 'frobnicate'");
    bad_parse("set", "usage: set");
    bad_parse("set banana 1", "unknown parameter 'banana'");
    bad_parse("set tau abc", "'abc' is not a number");
    bad_parse("set tau 0", "must be > 0");
    bad_parse("set tau nan", "is not a number");
    bad_parse("set alpha -1", "must be >= 0");
    bad_parse("step 0", "usage: step");
    bad_parse("step 2.5", "usage: step");
    bad_parse("pause now", "takes no arguments");
    bad_parse("anneal wiggly", "unknown schedule 'wiggly'");
    bad_parse("anneal exp 1 0.1 0.01", "too many values");
    bad_parse("anneal exp q=3", "bad option q=3");

    /* the vocabulary tables (core/tau.h): every kind parses as `anneal NAME`, every key with a value
     * in its range sets its field, a value outside is rejected */
    for (int k = 0; tau_kind_names[k]; k++) {
        char line[128], want[128];
        snprintf(line, sizeof line, "anneal %s 1 0.2", tau_kind_names[k]);
        snprintf(want, sizeof want, "anneal %s 1 0.2", tau_kind_names[k]);
        int r = command_parse(line, &c, err, sizeof err);
        CHECK(r == 0 && c.kind == CMD_ANNEAL && (int)c.sched.kind == k && !strcmp(c.text, want) &&
                  tau_kind_info((TauKind)k) && !strcmp(tau_kind_name((TauKind)k), tau_kind_names[k]),
              "'%s' parses (kind %d, '%s')", line, k, c.text);
    }
    CHECK(tau_kind_names[TAU_KIND_COUNT] == NULL && tau_kind_info(TAU_KIND_COUNT) == NULL, "one name per kind");
    for (int k = 0; k < TAU_KEY_COUNT; k++) {
        const TauKeyInfo *ki = tau_key_info((TauKey)k);
        const double good = isfinite(ki->lo) ? ki->lo + 1 : 2;
        char line[128];
        snprintf(line, sizeof line, "anneal linear %s=%g", ki->key, good);
        int r = command_parse(line, &c, err, sizeof err);
        CHECK(r == 0 && tau_key_get(&c.sched, (TauKey)k) == (double)(float)good && tau_key_find(ki->key) == k,
              "'%s' sets its field (%s)", line, r ? err : c.text);
        if (!isfinite(ki->lo)) continue;
        snprintf(line, sizeof line, "anneal linear %s=%g", ki->key, ki->lo_open ? ki->lo : ki->lo - 1);
        bad_parse(line, "bad option");
        if (!ki->is_int) continue;
        snprintf(line, sizeof line, "anneal linear %s=%g", ki->key, ki->lo + 1.5);
        bad_parse(line, "bad option");
    }

    /* the `set` parameters (core/params.h): words round-trip, the ends of every interval, and the
     * messages the trainer gives */
    for (int p = 0; cmd_param_words[p]; p++) {
        const CmdParamInfo *pi = cmd_param_info((CmdParam)p);
        CmdParam q = PARAM_COUNT;
        CHECK(pi && !strcmp(pi->word, cmd_param_words[p]) && cmd_param_parse(pi->word, &q) == 0 && (int)q == p,
              "set %s: parameter %d", cmd_param_words[p], p);
        if (isfinite(pi->lo))
            CHECK((cmd_param_check((CmdParam)p, pi->lo) == ML_OK) == !pi->lo_open &&
                      cmd_param_check((CmdParam)p, pi->lo - 1) == ML_ERR_ARG,
                  "set %s: lower end %g %s", pi->word, pi->lo, pi->lo_open ? "excluded" : "included");
        if (isfinite(pi->hi))
            CHECK((cmd_param_check((CmdParam)p, pi->hi) == ML_OK) == !pi->hi_open &&
                      cmd_param_check((CmdParam)p, pi->hi * 2 + 1) == ML_ERR_ARG,
                  "set %s: upper end %g %s", pi->word, pi->hi, pi->hi_open ? "excluded" : "included");
        CHECK(cmd_param_check((CmdParam)p, NAN) == ML_ERR_ARG, "set %s: NaN rejected", pi->word);
    }
    CHECK(cmd_param_words[PARAM_COUNT] == NULL && cmd_param_info(PARAM_COUNT) == NULL &&
              cmd_param_parse("banana", &(CmdParam){0}) == -1,
          "one word per parameter");
    static const struct {
        CmdParam p;
        double v;
        const char *msg;
    } msgs[] = {
        {PARAM_LR, 200, "set lr: 200 is outside (0, 100]"},
        {PARAM_LR, 0, "set lr: 0 is outside (0, 100]"},
        {PARAM_CF, 2000, "set cf: 2000 is too large"},
        {PARAM_ALPHA, -1, "set alpha: -1 is outside [0, 10000]"},
        {PARAM_BETA, 1e5, "set beta: 100000 is outside [0, 10000]"},
        {PARAM_NOISE, 101, "set noise: 101 is outside [0, 100]"},
        {PARAM_BIAS_RATE, -0.5, "set bias-rate: -0.5 is outside [0, 100]"},
        {PARAM_TAU, -1, "set tau: -1 is not a positive finite number"},
    };
    for (size_t i = 0; i < sizeof msgs / sizeof msgs[0]; i++)
        CHECK(cmd_param_check(msgs[i].p, msgs[i].v) == ML_ERR_ARG && !strcmp(ml_last_error(), msgs[i].msg),
              "\"%s\" (got \"%s\")", msgs[i].msg, ml_last_error());
    CHECK(cmd_param_check(PARAM_CF, -1) == ML_OK && cmd_param_check(PARAM_TAU, 1e30) == ML_OK,
          "cf may be negative, tau has no upper end");

    /* command files */
    char path[] = "/tmp/moelab_cmdXXXXXX";
    int fd = mkstemp(path);
    const char *txt = "# a comment\n\nat 20 set tau 0.3\nat 5 set lr 0.1\nat 5 eval\nat 30 quit\n";
    CHECK(write(fd, txt, strlen(txt)) == (ssize_t)strlen(txt), "write command file");
    close(fd);
    ScheduledCmd *v;
    int n;
    int r = command_file_read(path, &v, &n, err, sizeof err);
    CHECK(r == 0 && n == 4 && v[0].step == 5 && v[0].cmd.kind == CMD_SET && v[1].step == 5 &&
              v[1].cmd.kind == CMD_EVAL && v[2].step == 20 && v[3].cmd.kind == CMD_QUIT,
          "command file sorted by step, stable for equal steps");
    free(v);
    FILE *f = fopen(path, "w");
    fputs("at 3 set tau 0.5\nat x quit\n", f);
    fclose(f);
    r = command_file_read(path, &v, &n, err, sizeof err);
    CHECK(r == -1 && strstr(err, ":2: expected 'at STEP COMMAND'"), "bad line is reported with its number: %s", err);
    unlink(path);
    r = command_file_read("/nonexistent/cmds", &v, &n, err, sizeof err);
    CHECK(r == -1 && strstr(err, "/nonexistent/cmds: cannot open"), "missing file: %s", err);

    /* the trainer applies parameter commands */
    Dataset ds;
    SyntheticOptions so;
    synthetic_defaults(&so);
    so.h = so.w = 8;
    so.classes = 3;
    so.n_train = 64;
    so.n_test = 16;
    synthetic_generate(&ds, &so);
    TrainConfig cfg;
    train_config_defaults(&cfg);
    cfg.model.width = 0.125f;
    cfg.model.batch = 16;
    cfg.model.head.E = 4;
    cfg.model.head.h = 8;
    cfg.epochs = 2;
    cfg.threads = 1;
    Trainer t;
    CHECK(trainer_init_ds(&t, &cfg, &ds) == ML_OK, "trainer_init");
    for (int i = 0; i < 3; i++) trainer_step(&t, NULL);
    command_parse("set tau 0.25", &c, err, sizeof err);
    CHECK(trainer_apply(&t, &c) == ML_OK && tau_plan_value(&t.tau, t.step) == 0.25f, "set tau overrides the schedule");
    command_parse("anneal linear 1 0.5", &c, err, sizeof err);
    CHECK(trainer_apply(&t, &c) == ML_OK && tau_plan_value(&t.tau, t.step) == 1.0f &&
              fabsf(tau_plan_value(&t.tau, t.total_steps) - 0.5f) < 1e-6f,
          "anneal runs from now (1.0) to the end of training (0.5)");
    command_parse("set cf 0.5", &c, err, sizeof err);
    trainer_apply(&t, &c);
    StepRecord rec;
    trainer_step(&t, &rec);
    CHECK(rec.moe.capacity == (int)ceil(0.5 * 2 * 16 / 4), "set cf 0.5 -> capacity %d next step", rec.moe.capacity);
    command_parse("set lr 0.125", &c, err, sizeof err);
    trainer_apply(&t, &c);
    trainer_step(&t, &rec);
    CHECK(rec.lr == 0.125f, "set lr replaces the schedule (%g)", rec.lr);
    command_parse("set alpha 0.5", &c, err, sizeof err);
    CHECK(trainer_apply(&t, &c) == ML_OK && t.model.moe.cfg.alpha == 0.5f, "set alpha reaches the head");
    command_parse("set lr 200", &c, err, sizeof err);
    CHECK(trainer_apply(&t, &c) == ML_ERR_ARG && !strcmp(ml_last_error(), "set lr: 200 is outside (0, 100]") &&
              t.lr_override == 0.125f,
          "set lr 200 is refused by the trainer: %s", ml_last_error());
    command_parse("set beta 20000", &c, err, sizeof err);
    CHECK(trainer_apply(&t, &c) == ML_ERR_ARG && !strcmp(ml_last_error(), "set beta: 20000 is outside [0, 10000]"),
          "set beta 20000 is refused by the trainer: %s", ml_last_error());
    trainer_free(&t);
    cfg.model.head.kind = HEAD_DENSE;
    trainer_init_ds(&t, &cfg, &ds);
    command_parse("set tau 0.5", &c, err, sizeof err);
    CHECK(trainer_apply(&t, &c) == ML_ERR_STATE && strstr(ml_last_error(), "dense"), "set tau on a dense head: %s",
          ml_last_error());
    trainer_free(&t);
    /* per-layer knobs: a backbone MoE layer after stage 2 and the moe head */
    cfg.model.head.kind = HEAD_MOE;
    cfg.model.moe_n = 1;
    cfg.model.moe_after[0] = 2;
    CHECK(trainer_init_ds(&t, &cfg, &ds) == ML_OK && trainer_nlayers(&t) == 2 && trainer_layer_find(&t, "moe2") == 0 &&
              trainer_layer_find(&t, "head") == 1,
          "backbone layer + head: two routed layers (moe2, head)");
    const float tau0 = tau_plan_value(&t.tau, t.step);
    command_parse("set tau 0.3 @moe2", &c, err, sizeof err);
    CHECK(trainer_apply(&t, &c) == ML_OK && tau_plan_value(&t.bl[0].tau, t.step) == 0.3f &&
              tau_plan_value(&t.tau, t.step) == tau0,
          "set tau 0.3 @moe2 changes moe2's plan only (moe2 %g, head %g)", tau_plan_value(&t.bl[0].tau, t.step),
          tau_plan_value(&t.tau, t.step));
    command_parse("set cf 2 @head", &c, err, sizeof err);
    const float cf_bb = t.model.moec[0].route.cfg.cf;
    CHECK(trainer_apply(&t, &c) == ML_OK && t.model.moe.cfg.cf == 2.0f && t.model.moec[0].route.cfg.cf == cf_bb,
          "set cf 2 @head leaves moe2's cf (%g)", t.model.moec[0].route.cfg.cf);
    command_parse("set alpha 0.125", &c, err, sizeof err);
    CHECK(trainer_apply(&t, &c) == ML_OK && t.model.moe.cfg.alpha == 0.125f &&
              t.model.moec[0].route.cfg.alpha == 0.125f,
          "set alpha without a suffix reaches every layer");
    trainer_step(&t, &rec);
    CHECK(rec.nlayers == 2 && fabs(rec.layer[0].moe.tau - 0.3) < 1e-6 && fabs(rec.layer[1].moe.tau - tau0) < 1e-6 &&
              rec.tau == tau0,
          "the step record: moe2 ran at tau %g, the head at %g (top level %g)", rec.layer[0].moe.tau,
          rec.layer[1].moe.tau, rec.tau);
    command_parse("anneal linear now 0.5 @moe2", &c, err, sizeof err);
    CHECK(trainer_apply(&t, &c) == ML_OK && fabsf(tau_plan_value(&t.bl[0].tau, t.total_steps) - 0.5f) < 1e-6f &&
              tau_plan_value(&t.tau, t.total_steps) != 0.5f,
          "anneal ... @moe2 replaces moe2's schedule only");
    command_parse("set tau 1 @moe3", &c, err, sizeof err);
    CHECK(trainer_apply(&t, &c) == ML_ERR_ARG && strstr(ml_last_error(), "no routed layer 'moe3'") &&
              strstr(ml_last_error(), "@moe2, @head"),
          "an unknown layer is refused naming the valid ones: %s", ml_last_error());
    trainer_free(&t);
    cfg.model.head.kind = HEAD_DENSE;
    CHECK(trainer_init_ds(&t, &cfg, &ds) == ML_OK && trainer_nlayers(&t) == 1, "dense head + moe2: one routed layer");
    command_parse("set tau 0.5 @head", &c, err, sizeof err);
    CHECK(trainer_apply(&t, &c) == ML_ERR_STATE && strstr(ml_last_error(), "does not route"),
          "a dense-head run refuses @head: %s", ml_last_error());
    command_parse("set tau 0.5", &c, err, sizeof err);
    CHECK(trainer_apply(&t, &c) == ML_OK && tau_plan_value(&t.bl[0].tau, t.step) == 0.5f,
          "set tau (no suffix) reaches the backbone layer of a dense-head run");
    trainer_free(&t);
    dataset_free(&ds);
    printf("%d failure(s)\n", n_failed);
    return n_failed ? 1 : 0;
}
