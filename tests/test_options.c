/* test_options.c — the option table (app/cli/options.c, its rows through options_internal.h): every numeric row accepts the
 * ends of its range and refuses a value outside it, every flag and choice reaches its field, the
 * temperature options of TAU_KEYS set the fields their anneal keys set, and the weight-decay
 * default follows the optimiser unless --wd is given, in either order. */
#include "app/cli/options_internal.h"

#include <string.h>
#include "app/cli/commands.h"
#include "check.h"

#include <unistd.h>

/* Parses the NULL-terminated arguments after "train" into *o (fresh defaults); stderr muted. */
static int parse(AppOptions *o, const char *const *args) {
    char *argv[32];
    int argc = 0;
    argv[argc++] = "train";
    for (int i = 0; args[i] && argc < 31; i++) argv[argc++] = (char *)args[i];
    argv[argc] = NULL;
    app_options_defaults(o);
    fflush(stderr);
    const int saved = dup(2);
    FILE *null = freopen("/dev/null", "w", stderr);
    const int r = app_options_parse(o, argc, argv, "train");
    fflush(stderr);
    if (null) dup2(saved, 2);
    close(saved);
    return r;
}

#define ARGS(...) ((const char *const[]){__VA_ARGS__, NULL})

int main(void) {
    AppOptions o;
    char lo[64], hi[64], opt[64], out[64];
    int rows = 0;
    for (int i = 0; i < app_opt_nrows; i++) {
        const OptSpec *r = &app_opt_rows[i];
        snprintf(opt, sizeof opt, "--%s", r->name);
        if (r->type == T_F32 || r->type == T_I32 || r->type == T_I64 || r->type == T_U64) {
            snprintf(lo, sizeof lo, "%.17g", r->lo);
            snprintf(hi, sizeof hi, "%.17g", r->hi);
            snprintf(out, sizeof out, "%.17g", r->hi * 2 + 1);
            /* a dense head: --experts 1 or --k 64 alone would fail the k <= E check */
            const int ok = parse(&o, ARGS("--head", "dense", opt, lo)) == 0 &&
                           parse(&o, ARGS("--head", "dense", opt, hi)) == 0 && parse(&o, ARGS(opt, out)) == -1 &&
                           parse(&o, ARGS(opt, "x")) == -1 && parse(&o, ARGS(opt)) == -1;
            check(ok, "%s: accepts %s and %s, refuses %s, 'x' and a missing value", opt, lo, hi, out);
            rows++;
        } else if (r->type == T_FLAG) {
            AppOptions d;
            app_options_defaults(&d);
            const int before = *(const int *)((const char *)&d + r->off);
            check(parse(&o, ARGS(opt)) == 0 && *(const int *)((const char *)&o + r->off) == (int)r->lo &&
                      before != (int)r->lo,
                  "%s: sets its flag to %g (default %d)", opt, r->lo, before);
            rows++;
        } else if (r->choices) {
            int all = 1;
            for (int c = 0; r->choices[c]; c++) all &= parse(&o, ARGS(opt, r->choices[c])) == 0;
            check(all && parse(&o, ARGS(opt, "no-such-choice")) == -1, "%s: takes each of its choices, refuses others",
                  opt);
            rows++;
        }
    }
    check(rows > 40, "%d rows checked", rows);

    /* choices reach their fields */
    check(parse(&o, ARGS("--schedule", "step", "--head", "dense", "--backbone", "std", "--labels", "coarse")) == 0 &&
              o.train.tau.kind == TAU_STEP && o.train.model.head.kind == HEAD_DENSE &&
              o.train.model.backbone == BACKBONE_STD && o.coarse == 1,
          "--schedule step --head dense --backbone std --labels coarse");
    check(parse(&o, ARGS("--lr-schedule", "constant", "--optimizer", "adamw", "--priority", "gate", "--bias-mode",
                         "logits")) == 0 &&
              o.train.lr.kind == LR_CONST && o.train.opt.kind == OPT_ADAMW &&
              o.train.model.head.priority == PRIORITY_GATE && o.train.model.head.bias_mode == BIAS_LOGITS,
          "--lr-schedule constant --optimizer adamw --priority gate --bias-mode logits");
    check(parse(&o, ARGS("--dataset", "synthetic:8x8x1", "--session", "runs/a", "--epochs=3", "--seed",
                         "9007199254740991")) == 0 &&
              !strcmp(o.dataset, "synthetic:8x8x1") && !strcmp(o.session, "runs/a") && o.train.epochs == 3 &&
              o.train.seed == 9007199254740991ULL,
          "strings, --name=value, the largest seed");

    /* the temperature options set the fields their anneal keys set */
    for (int k = 0; k < TAU_KEY_COUNT; k++) {
        const TauKeyInfo *ki = tau_key_info((TauKey)k);
        if (!ki->option) continue;
        const double v = ki->opt_hi > 2 ? 2 : ki->opt_hi;
        snprintf(opt, sizeof opt, "--%s", ki->option);
        snprintf(out, sizeof out, "%g", v);
        check(parse(&o, ARGS(opt, out)) == 0 && tau_key_get(&o.train.tau, (TauKey)k) == (double)(float)v,
              "%s %s sets the field of %s=", opt, out, ki->key);
    }

    /* weight decay: the optimiser's default unless --wd is given, in any order */
    check(parse(&o, ARGS("--epochs", "2")) == 0 && o.train.opt.wd == optim_default_wd(OPT_SGD) &&
              o.train.opt.wd == 5e-3f,
          "sgd: wd %g", (double)o.train.opt.wd);
    check(parse(&o, ARGS("--optimizer", "adamw")) == 0 && o.train.opt.wd == 0.05f, "adamw: wd %g",
          (double)o.train.opt.wd);
    check(parse(&o, ARGS("--wd", "0.1", "--optimizer", "adamw")) == 0 && o.train.opt.wd == 0.1f,
          "--wd before --optimizer wins");
    check(parse(&o, ARGS("--optimizer", "adamw", "--wd", "0.1")) == 0 && o.train.opt.wd == 0.1f,
          "--wd after --optimizer wins");
    check(parse(&o, ARGS("--optimizer", "adamw", "--optimizer", "sgd")) == 0 && o.train.opt.wd == 5e-3f,
          "the last optimiser's default");
    TrainConfig tc;
    train_config_defaults(&tc);
    check(tc.opt.wd == optim_default_wd(tc.opt.kind), "train_config_defaults uses the same default");

    /* the backbone layer lists (--moe-after and friends): values, one value, ends, bad lists */
    check(parse(&o, ARGS("--moe-after", "0,3", "--ffn-after", "1", "--moe-hidden", "8,65536", "--moe-experts", "64",
                         "--moe-k", "1,2")) == 0 &&
              o.train.model.moe_n == 2 && o.train.model.moe_after[0] == 0 && o.train.model.moe_after[1] == 3 &&
              o.train.model.ffn_n == 1 && o.train.model.ffn_after[0] == 1 && o.train.model.bb_nh == 2 &&
              o.train.model.bb_hidden[1] == 65536 && o.train.model.bb_nE == 1 && o.train.model.bb_E[0] == 64 &&
              o.train.model.bb_nk == 2 && o.train.model.bb_k[1] == 2,
          "--moe-after 0,3 --ffn-after 1 --moe-hidden 8,65536 --moe-experts 64 --moe-k 1,2 reach their fields");
    check(parse(&o, ARGS("--moe-after", "0,1,2,3")) == 0 && o.train.model.moe_n == 4, "--moe-after 0,1,2,3");
    const char *const bad_lists[][2] = {
        {"--moe-after", "4"},  {"--moe-after", "-1"},   {"--moe-after", ""},          {"--moe-after", "1,"},
        {"--moe-after", ",1"}, {"--moe-after", "1,,2"}, {"--moe-after", "0,1,2,3,0"}, {"--moe-after", "1.5"},
        {"--ffn-after", "x"},  {"--moe-hidden", "0"},   {"--moe-hidden", "65537"},    {"--moe-experts", "65"},
        {"--moe-k", "0"},      {"--moe-k", "2 3"}};
    for (size_t i = 0; i < sizeof bad_lists / sizeof bad_lists[0]; i++)
        check(parse(&o, ARGS(bad_lists[i][0], bad_lists[i][1])) == -1, "%s '%s' is refused", bad_lists[i][0],
              bad_lists[i][1]);

    /* the rest of the command line */
    check(parse(&o, ARGS("--help")) == 1, "--help returns 1");
    check(parse(&o, ARGS("--frobnicate")) == -1 && parse(&o, ARGS("extra")) == -1 && parse(&o, ARGS("--k", "9")) == -1,
          "unknown option, stray argument, k > E");
    printf("%d checks, %d failed\n", n_checks, n_failed);
    return n_failed ? 1 : 0;
}
