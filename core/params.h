/* params.h — the parameters of the `set PARAM VALUE` command: one table from which the CmdParam
 * enum, the parser's words, its completion, the help overlay, `--help` and the trainer's range
 * checks are generated.
 *
 *     X(ID, word, lo, lo_open, hi, hi_open, needs_moe, help)
 *
 * A value v is accepted when it is finite and lies in the interval from lo to hi, each end open
 * or closed (-INFINITY / INFINITY: no bound on that side). The command parser rejects a value
 * below lo when it reads the command; the whole interval is checked when the trainer applies it
 * (cmd_param_check). needs_moe: the parameter belongs to the router (a dense head refuses it).
 * Rows are in enum order; the enum value is stored in nothing persistent (commands are logged as
 * text), but append anyway. */
#ifndef ML_PARAMS_H
#define ML_PARAMS_H

#include <math.h>

#include "core/common.h"

#define CMD_PARAMS(X)                                                                                                \
    X(TAU, "tau", 0, 1, INFINITY, 1, 1, "override the temperature from now on (the planned schedule stays visible)") \
    X(LR, "lr", 0, 1, 100, 0, 0, "replace the learning-rate schedule by V")                                          \
    X(CF, "cf", -INFINITY, 1, 1000, 0, 1, "train capacity factor, C = ceil(cf k B / E); <= 0 dropless")              \
    X(ALPHA, "alpha", 0, 0, 1e4, 0, 1, "load-balancing loss weight")                                                 \
    X(BETA, "beta", 0, 0, 1e4, 0, 1, "router z-loss weight")                                                         \
    X(NOISE, "noise", 0, 0, 100, 0, 1, "Gumbel selection noise scale (0: deterministic top-k)")                      \
    X(BIAS_RATE, "bias-rate", 0, 0, 100, 0, 1, "utility-bias update rate")

// clang-format off
typedef enum {
#define CMD_PARAM_ENUM_(ID, ...) PARAM_##ID,
    CMD_PARAMS(CMD_PARAM_ENUM_)
#undef CMD_PARAM_ENUM_
    PARAM_COUNT,
} CmdParam;
// clang-format on

typedef struct {
    const char *word;     /* as typed after `set` */
    double lo, hi;        /* the accepted interval ... */
    int lo_open, hi_open; /* ... and whether its ends are open */
    int needs_moe;        /* 1: a router parameter (MoE heads only) */
    const char *help;     /* one line */
} CmdParamInfo;

/* The words, index = CmdParam, NULL-terminated (completion, messages). */
extern const char *const cmd_param_words[];
/* The row of p, NULL if p is not a parameter. */
const CmdParamInfo *cmd_param_info(CmdParam p);
/* The parameter named `word` (exact, lower case): 0 with *out set, or -1. */
int cmd_param_parse(const char *word, CmdParam *out);
/* ML_OK if v is finite and in p's interval; ML_ERR_ARG with the message otherwise, e.g.
 * "set lr: 200 is outside (0, 100]", "set cf: 2000 is too large", "set tau: -1 is not a positive
 * finite number". */
ml_status cmd_param_check(CmdParam p, double v);
/* 1 if v is not below p's lower end (what the parser checks); then *msg is untouched. Else 0 with
 * "must be > LO" / "must be >= LO" in msg. */
int cmd_param_lower_ok(CmdParam p, double v, char *msg, size_t n);

#endif
