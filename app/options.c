/* options.c — the training option table (see options.h). Every option that sets a number checks
 * that the whole argument is a finite number in range; errors name the option and the value. */
#include "options.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
    O_DATASET = 256, O_BACKBONE, O_WIDTH, O_HEAD, O_HIDDEN, O_EXPERTS, O_K, O_EPOCHS, O_BATCH,
    O_OPTIMIZER, O_LR, O_LR_SCHEDULE, O_WARMUP, O_MOMENTUM, O_NESTEROV, O_WD, O_SEED, O_THREADS,
    O_LOG_EVERY, O_DRY_RUN, O_HEADLESS, O_CF, O_EVAL_CF, O_PRIORITY, O_TAU0, O_TAU1, O_SCHEDULE,
    O_TAU_MIN, O_SIG_S, O_SIG_C, O_NOISE, O_BIAS_MODE, O_BIAS_RATE, O_ALPHA, O_BETA, O_NO_RENORM,
    O_SLOTS, O_SESSION, O_NO_SESSION, O_RESUME, O_CKPT_EVERY, O_CKPT_STEPS, O_KEEP, O_NO_AUGMENT, O_LABELS, O_COMMANDS, O_TAU_EPOCHS, O_STEPS, O_REPEAT, O_HEADS, O_QUIET, O_HELP,
};

static const struct option long_opts[] = {
    {"dataset", required_argument, 0, O_DATASET},
    {"backbone", required_argument, 0, O_BACKBONE},
    {"width", required_argument, 0, O_WIDTH},
    {"head", required_argument, 0, O_HEAD},
    {"hidden", required_argument, 0, O_HIDDEN},
    {"experts", required_argument, 0, O_EXPERTS},
    {"k", required_argument, 0, O_K},
    {"epochs", required_argument, 0, O_EPOCHS},
    {"batch", required_argument, 0, O_BATCH},
    {"optimizer", required_argument, 0, O_OPTIMIZER},
    {"lr", required_argument, 0, O_LR},
    {"lr-schedule", required_argument, 0, O_LR_SCHEDULE},
    {"warmup", required_argument, 0, O_WARMUP},
    {"momentum", required_argument, 0, O_MOMENTUM},
    {"nesterov", no_argument, 0, O_NESTEROV},
    {"wd", required_argument, 0, O_WD},
    {"seed", required_argument, 0, O_SEED},
    {"threads", required_argument, 0, O_THREADS},
    {"log-every", required_argument, 0, O_LOG_EVERY},
    {"dry-run", no_argument, 0, O_DRY_RUN},
    {"headless", no_argument, 0, O_HEADLESS},
    {"cf", required_argument, 0, O_CF},
    {"eval-cf", required_argument, 0, O_EVAL_CF},
    {"priority", required_argument, 0, O_PRIORITY},
    {"tau0", required_argument, 0, O_TAU0},
    {"tau1", required_argument, 0, O_TAU1},
    {"schedule", required_argument, 0, O_SCHEDULE},
    {"tau-min", required_argument, 0, O_TAU_MIN},
    {"sigmoid-s", required_argument, 0, O_SIG_S},
    {"sigmoid-c", required_argument, 0, O_SIG_C},
    {"noise", required_argument, 0, O_NOISE},
    {"bias-mode", required_argument, 0, O_BIAS_MODE},
    {"bias-rate", required_argument, 0, O_BIAS_RATE},
    {"alpha", required_argument, 0, O_ALPHA},
    {"beta", required_argument, 0, O_BETA},
    {"no-renorm", no_argument, 0, O_NO_RENORM},
    {"slots", required_argument, 0, O_SLOTS},
    {"commands", required_argument, 0, O_COMMANDS},
    {"no-augment", no_argument, 0, O_NO_AUGMENT},
    {"session", required_argument, 0, O_SESSION},
    {"no-session", no_argument, 0, O_NO_SESSION},
    {"resume", required_argument, 0, O_RESUME},
    {"ckpt-every", required_argument, 0, O_CKPT_EVERY},
    {"ckpt-steps", required_argument, 0, O_CKPT_STEPS},
    {"keep", required_argument, 0, O_KEEP},
    {"labels", required_argument, 0, O_LABELS},
    {"tau-epochs", required_argument, 0, O_TAU_EPOCHS},
    {"steps", required_argument, 0, O_STEPS},
    {"repeat", required_argument, 0, O_REPEAT},
    {"heads", required_argument, 0, O_HEADS},
    {"quiet", no_argument, 0, O_QUIET},
    {"help", no_argument, 0, O_HELP},
    {0, 0, 0, 0},
};

void app_options_defaults(AppOptions *o) {
    memset(o, 0, sizeof *o);
    train_config_defaults(&o->train);
    snprintf(o->dataset, sizeof o->dataset, "default");
    o->steps = 30;
    o->repeat = 3;
    snprintf(o->heads, sizeof o->heads, "dense,moe");
    o->ckpt_every = 1;
    o->keep = 3;
}

void app_options_help(const char *cmd) {
    printf("usage: moelab %s [options]\n\n", cmd);
    printf(
"Data and run\n"
"  --dataset SPEC       default | fashion-mnist | mnist | cifar-10 | cifar-100 | DIR | FILE.h5\n"
"                       | synthetic[:HxWxC[:K[:N]]]; DIR holds IDX or CIFAR binary files;\n"
"                       suffixes :coarse :stats=known|kuangliu|computed (default: fashion-mnist\n"
"                       when installed, else synthetic)\n"
"  --labels fine|coarse CIFAR-100 label set (fine)\n"
"  --no-augment         no random crop + flip (on by default for RGB datasets)\n"
"  --epochs N           training epochs (10)\n"
"  --batch B            mini-batch size (128)\n"
"  --seed S             seed of every random stream (1)\n"
"  --threads T          OpenMP + OpenBLAS threads (all cores)\n"
"  --log-every N        step records every N steps (10)\n"
"  --headless           plain progress lines instead of the live screen\n"
"  --dry-run            print the model's layers, parameters, FLOPs and rho, then exit\n"
"Session (live.h5 + checkpoints)\n"
"  --session DIR        session folder (sessions/<dataset>-<head>-<time>)\n"
"  --no-session         write nothing to disk\n"
"  --resume DIR         continue DIR from its newest valid checkpoint\n"
"  --ckpt-every N       checkpoint every N epochs, 0 = only at the end (1)\n"
"  --ckpt-steps N       also checkpoint every N steps (off)\n"
"  --keep N             checkpoints kept, 0 = all (3)\n"
"Model\n"
"  --backbone dw|std    depthwise-separable or standard 3x3 blocks (dw)\n"
"  --width W            width multiplier, c0 = round(32 W) (1)\n"
"  --head KIND          dense | moe | softmoe-batch | softmoe-sample (moe)\n"
"  --hidden H           expert hidden width h; the dense MLP has k*h (1024)\n"
"  --experts E          number of experts (8)\n"
"  --k K                experts per sample (2)\n"
"Routing (MoE heads)\n"
"  --cf F               train capacity factor, C = ceil(cf k B / E); <= 0 dropless (1.25)\n"
"  --eval-cf F          evaluation capacity factor; <= 0 dropless (0)\n"
"  --priority batch|gate  order inside one rank when capacity runs out (batch)\n"
"  --noise S            Gumbel selection noise scale in training, 0 = deterministic (1)\n"
"  --bias-mode none|select|logits  utility bias (none)\n"
"  --bias-rate U        bias update b_e += U sign(mean - count_e) (0.001)\n"
"  --alpha A            load-balancing loss weight (0.01)\n"
"  --beta B             router z-loss weight (0)\n"
"  --no-renorm          do not renormalise the k selected gates\n"
"  --slots P            softmoe-batch slots per expert (ceil(k B / E))\n"
"Temperature\n"
"  --schedule KIND      const | linear | cosine | exp | sigmoid | step (const)\n"
"  --tau0 T --tau1 T    start and end temperature (1, 0.1)\n"
"  --tau-min T          floor (0.01)\n"
"  --sigmoid-s S --sigmoid-c C  sigmoid steepness and centre (10, 0.5)\n"
"  --tau-epochs E       length of the schedule in epochs, then tau1 holds (whole run)\n"
"Commands\n"
"  --commands FILE      apply commands from FILE, one per line as 'at STEP COMMAND'\n"
"                       (set tau|lr|cf|alpha|beta|noise|bias-rate V, anneal KIND ..., eval, quit)\n"
"Optimiser\n"
"  --optimizer sgd|adamw  (sgd)\n"
"  --lr LR              peak learning rate (0.05)\n"
"  --lr-schedule const|step|cosine  (cosine; step = x0.1 at 50%% and 75%%)\n"
"  --warmup E           linear warm-up epochs (0)\n"
"  --momentum M         SGD momentum (0.9)\n"
"  --nesterov           Nesterov momentum\n"
"  --wd WD              decoupled weight decay on conv/linear weights (5e-3; adamw 0.05)\n"
"Benchmark (moelab bench)\n"
"  --steps N            timed steps per measurement (30)\n"
"  --repeat R           measurements per head, median reported (3)\n"
"  --heads LIST         comma list of heads to time (dense,moe)\n"
"  --help               this text\n");
}

static int num(const char *opt, const char *s, double lo, double hi, double *out) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !isfinite(v) || v < lo || v > hi) {
        fprintf(stderr, "moelab: --%s: '%s' is not a number in [%g, %g]\n", opt, s, lo, hi);
        return -1;
    }
    *out = v;
    return 0;
}

static int integer(const char *opt, const char *s, long lo, long hi, long *out) {
    double v;
    if (num(opt, s, (double)lo, (double)hi, &v)) return -1;
    if (v != floor(v)) { fprintf(stderr, "moelab: --%s: '%s' is not a whole number\n", opt, s); return -1; }
    *out = (long)v;
    return 0;
}

int app_options_parse(AppOptions *o, int argc, char **argv, const char *cmd) {
    TrainConfig *t = &o->train;
    MoeConfig *h = &t->model.head;
    int wd_set = 0;
    optind = 1;
    opterr = 0;
    for (;;) {
        int idx = 0;
        int c = getopt_long(argc, argv, ":", long_opts, &idx);
        if (c == -1) break;
        const char *a = optarg;
        double v = 0;
        long n = 0;
        int bad = 0;
        switch (c) {
        case O_DATASET: snprintf(o->dataset, sizeof o->dataset, "%s", a); break;
        case O_BACKBONE:
            if (strcmp(a, "dw") == 0) t->model.backbone = BACKBONE_DW;
            else if (strcmp(a, "std") == 0) t->model.backbone = BACKBONE_STD;
            else { fprintf(stderr, "moelab: --backbone: '%s' is not dw or std\n", a); return -1; }
            break;
        case O_WIDTH: bad = num("width", a, 0.01, 16, &v); t->model.width = (float)v; break;
        case O_HEAD:
            if (moe_parse_head(a, &h->kind) != ML_OK) {
                fprintf(stderr, "moelab: --head: '%s' is not dense, moe, softmoe-batch or softmoe-sample\n", a);
                return -1;
            }
            break;
        case O_HIDDEN: bad = integer("hidden", a, 1, 1 << 16, &n); h->h = (int)n; break;
        case O_EXPERTS: bad = integer("experts", a, 1, MOE_MAX_EXPERTS, &n); h->E = (int)n; break;
        case O_K: bad = integer("k", a, 1, MOE_MAX_EXPERTS, &n); h->k = (int)n; break;
        case O_EPOCHS: bad = integer("epochs", a, 1, 100000, &n); t->epochs = (int)n; break;
        case O_BATCH: bad = integer("batch", a, 2, 65536, &n); t->model.batch = (int)n; break;
        case O_OPTIMIZER:
            if (optim_kind_parse(a, &t->opt.kind)) { fprintf(stderr, "moelab: --optimizer: '%s' is not sgd or adamw\n", a); return -1; }
            if (!wd_set) t->opt.wd = t->opt.kind == OPT_ADAMW ? 0.05f : 5e-3f;
            break;
        case O_LR: bad = num("lr", a, 0, 100, &v); t->lr.base = (float)v; break;
        case O_LR_SCHEDULE:
            if (lr_kind_parse(a, &t->lr.kind)) { fprintf(stderr, "moelab: --lr-schedule: '%s' is not const, step or cosine\n", a); return -1; }
            break;
        case O_WARMUP: bad = num("warmup", a, 0, 100000, &v); t->warmup_epochs = (float)v; break;
        case O_MOMENTUM: bad = num("momentum", a, 0, 0.9999, &v); t->opt.momentum = (float)v; break;
        case O_NESTEROV: t->opt.nesterov = 1; break;
        case O_WD: bad = num("wd", a, 0, 10, &v); t->opt.wd = (float)v; wd_set = 1; break;
        case O_SEED: bad = integer("seed", a, 0, 9007199254740991L, &n); t->seed = (uint64_t)n; break;
        case O_THREADS: bad = integer("threads", a, 1, 1024, &n); t->threads = (int)n; break;
        case O_LOG_EVERY: bad = integer("log-every", a, 1, 1000000, &n); t->log_every = (int)n; break;
        case O_DRY_RUN: o->dry_run = 1; break;
        case O_HEADLESS: o->headless = 1; break;
        case O_CF: bad = num("cf", a, -1, 1000, &v); h->cf = (float)v; break;
        case O_EVAL_CF: bad = num("eval-cf", a, -1, 1000, &v); h->eval_cf = (float)v; break;
        case O_PRIORITY:
            if (moe_parse_priority(a, &h->priority) != ML_OK) { fprintf(stderr, "moelab: --priority: '%s' is not batch or gate\n", a); return -1; }
            break;
        case O_TAU0: bad = num("tau0", a, 1e-6, 1e6, &v); t->tau.tau0 = (float)v; break;
        case O_TAU1: bad = num("tau1", a, 1e-6, 1e6, &v); t->tau.tau1 = (float)v; break;
        case O_SCHEDULE:
            if (tau_parse_kind(a, &t->tau.kind) != ML_OK) {
                fprintf(stderr, "moelab: --schedule: '%s' is not const, linear, cosine, exp, sigmoid or step\n", a);
                return -1;
            }
            break;
        case O_TAU_MIN: bad = num("tau-min", a, 1e-6, 1e6, &v); t->tau.tau_min = (float)v; break;
        case O_SIG_S: bad = num("sigmoid-s", a, -1e4, 1e4, &v); t->tau.s = (float)v; break;
        case O_SIG_C: bad = num("sigmoid-c", a, -10, 10, &v); t->tau.c = (float)v; break;
        case O_NOISE: bad = num("noise", a, 0, 100, &v); h->noise = (float)v; break;
        case O_BIAS_MODE:
            if (moe_parse_bias(a, &h->bias_mode) != ML_OK) { fprintf(stderr, "moelab: --bias-mode: '%s' is not none, select or logits\n", a); return -1; }
            break;
        case O_BIAS_RATE: bad = num("bias-rate", a, 0, 100, &v); h->bias_rate = (float)v; break;
        case O_ALPHA: bad = num("alpha", a, 0, 1e4, &v); h->alpha = (float)v; break;
        case O_BETA: bad = num("beta", a, 0, 1e4, &v); h->beta = (float)v; break;
        case O_NO_RENORM: h->renorm = 0; break;
        case O_SESSION: snprintf(o->session, sizeof o->session, "%s", a); break;
        case O_NO_SESSION: o->no_session = 1; break;
        case O_RESUME: snprintf(o->resume, sizeof o->resume, "%s", a); break;
        case O_CKPT_EVERY: bad = integer("ckpt-every", a, 0, 1000000, &n); o->ckpt_every = (int)n; break;
        case O_CKPT_STEPS: bad = integer("ckpt-steps", a, 0, 1000000000, &n); o->ckpt_steps = n; break;
        case O_KEEP: bad = integer("keep", a, 0, 1000000, &n); o->keep = (int)n; break;
        case O_NO_AUGMENT: o->train.augment = 0; break;
        case O_LABELS:
            if (strcmp(a, "fine") && strcmp(a, "coarse")) { fprintf(stderr, "moelab: --labels: '%s' is not fine or coarse\n", a); return -1; }
            o->coarse = !strcmp(a, "coarse");
            break;
        case O_COMMANDS: snprintf(o->commands, sizeof o->commands, "%s", a); break;
        case O_TAU_EPOCHS: bad = num("tau-epochs", a, 0, 1e6, &v); o->train.tau_epochs = (float)v; break;
        case O_SLOTS: bad = integer("slots", a, 1, 1 << 20, &n); h->slots = (int)n; break;
        case O_STEPS: bad = integer("steps", a, 1, 1000000, &n); o->steps = (int)n; break;
        case O_REPEAT: bad = integer("repeat", a, 1, 1000, &n); o->repeat = (int)n; break;
        case O_HEADS: snprintf(o->heads, sizeof o->heads, "%s", a); break;
        case O_QUIET: o->quiet = 1; break;
        case O_HELP: app_options_help(cmd); return 1;
        case ':':
            fprintf(stderr, "moelab %s: option '%s' needs a value (see moelab %s --help)\n", cmd, argv[optind - 1], cmd);
            return -1;
        default:
            fprintf(stderr, "moelab %s: unknown option '%s' (see moelab %s --help)\n", cmd, argv[optind - 1], cmd);
            return -1;
        }
        if (bad) return -1;
    }
    if (optind < argc) {
        fprintf(stderr, "moelab %s: unexpected argument '%s' (see moelab %s --help)\n", cmd, argv[optind], cmd);
        return -1;
    }
    if (h->k > h->E && h->kind != HEAD_DENSE) {
        fprintf(stderr, "moelab: --k %d is larger than --experts %d\n", h->k, h->E);
        return -1;
    }
    return 0;
}
