/* cfgvisit.h — a walk over a run's configuration, in the order its record lists it (the session's
 * config_json). Core names the fields, beside their use; sessions/schema.c turns the walk into JSON
 * (core has no JSON library). So a new option's record is one line where its field is used:
 * moe_config_visit (moe.c), model_config_visit (model.c), train_config_visit (trainer.c). */
#ifndef ML_CFGVISIT_H
#define ML_CFGVISIT_H

#include <stdint.h>

typedef struct CfgVisitor CfgVisitor;
struct CfgVisitor {
    void (*open)(CfgVisitor *v, const char *key); /* a nested object, until close */
    void (*close)(CfgVisitor *v);
    void (*i)(CfgVisitor *v, const char *key, long long x);
    void (*f)(CfgVisitor *v, const char *key, float x); /* a float: the shortest decimal that gives it back */
    void (*d)(CfgVisitor *v, const char *key, double x);
    void (*s)(CfgVisitor *v, const char *key, const char *x);
    void (*ints)(CfgVisitor *v, const char *key, const int *x, int n);
    void (*floats)(CfgVisitor *v, const char *key, const float *x, int n);
    void (*u64)(CfgVisitor *v, const char *key, uint64_t x);
};

#endif
