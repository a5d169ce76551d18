/* options_internal.h — the rows of the training option table (app/cli/options.c), for
 * tests/test_options.c, which checks every numeric row's range. Nothing else includes it. */
#ifndef ML_APP_OPTIONS_INTERNAL_H
#define ML_APP_OPTIONS_INTERNAL_H

#include <stddef.h>

#include "app/cli/options.h"

typedef enum { T_FLAG, T_F32, T_F64, T_I32, T_I64, T_U64, T_STR, T_FN } OptType;


typedef struct {
    const char *name;    /* without "--" */
    const char *metavar; /* NULL: a flag; for choices NULL means "a|b|c" */
    int group;
    const char *help;
    OptType type;
    size_t off, size; /* the target in AppOptions; T_STR: its buffer size */
    double lo, hi;    /* numbers: the accepted range; T_FLAG: lo is the value stored */
    /* T_FN: stores the value; 0, 1 (stop: --help) or -1 (bad value: "is not CHOICES" is printed) */
    int (*set)(AppOptions *o, const char *arg, const char *cmd);
    const char *const *choices;                                    /* the names a choice option takes */
    int list;                                                      /* 1: the help lists the choices after the text */
    const char *(*current)(const AppOptions *d);                   /* a choice option's value in d */
    const char *(*show)(const AppOptions *d, char *buf, size_t n); /* default text from defaults */
    const char *(*more)(char *buf, size_t n);                      /* help text built from other tables, after `help` */
    const char *dflt;                                              /* fixed default text; "" for none */
    int hidden;                                                    /* accepted, not in --help */
} OptSpec;

extern const OptSpec *const app_opt_rows; /* app_opt_nrows rows, in --help order */
extern const int app_opt_nrows;

#endif
