/* sweep_presets.c — the paper's experiments as `moelab sweep --preset NAME` (short budgets) and
 * `--preset NAME --full` (the real budgets): each preset is a list of sweep arguments that the
 * user's own arguments extend or override (see plan_from_argv in sweep.c). */
#include "sweep_internal.h"

#include <string.h>

/* ------------------------------------------------------------------ presets */

/* argument lists as wrapped by hand (clang-format would align them as a table) */
// clang-format off
static const char *const hs_quick[] = {"--width", "0.5", "--epochs", "1", "--vary", "backbone=dw,std", "--vary",
                                       "hidden=64,256,1024", "--vary", "head=moe,dense", "--seeds", "2", NULL};
static const char *const hs_full[] = {"--width", "1", "--epochs", "30", "--vary", "backbone=dw,std", "--vary",
                                      "hidden=64,128,256,512,1024,2048,4096", "--vary", "head=moe,dense", "--seeds", "5", NULL};
static const char *const tk_quick[] = {"--width", "0.5", "--epochs", "2", "--vary", "k=1,2,4", "--with", "cf=2.5,1.25,0.625",
                                       "--vary", "head=moe,dense", "--seeds", "2", NULL};
static const char *const tk_full[] = {"--width", "1", "--epochs", "30", "--vary", "k=1,2,4", "--with", "cf=2.5,1.25,0.625",
                                      "--vary", "head=moe,dense", "--seeds", "5", NULL};
static const char *const sm_quick[] = {"--width", "0.5", "--epochs", "2", "--vary", "head=softmoe-sample,softmoe-batch,moe,dense",
                                       "--seeds", "2", NULL};
static const char *const sm_full[] = {"--width", "1", "--epochs", "30", "--vary", "head=softmoe-sample,softmoe-batch,moe,dense",
                                      "--seeds", "5", NULL};
static const char *const bb_quick[] = {"--width", "0.5", "--epochs", "2", "--vary", "backbone=dw,std", "--vary", "head=moe,dense",
                                       "--seeds", "2", NULL};
static const char *const bb_full[] = {"--width", "1", "--epochs", "30", "--vary", "backbone=dw,std", "--vary", "head=moe,dense",
                                      "--seeds", "5", NULL};
// clang-format on

static const Preset presets[] = {
    {"hidden-size", hs_quick, hs_full,
     "the gap's sign as h (hence rho) grows, both backbones; dense has the same k*h active width"},
    {"topk-rho", tk_quick, tk_full,
     "cf = 2.5/k keeps the slot budget E*C = 2.5 B per batch fixed; rho realized counts the pairs that got a slot"},
    {"softmoe", sm_quick, sm_full, "soft MoE per sample (dense over experts) vs over the batch (samples mix)"},
    {"backbone", bb_quick, bb_full, "dw vs std backbone at the reference head (E 8, k 2, h 1024, cf 1.25)"},
};
#define N_PRESETS (int)(sizeof presets / sizeof presets[0])

const Preset *find_preset(const char *name) {
    for (int i = 0; i < N_PRESETS; i++)
        if (!strcmp(presets[i].name, name)) return &presets[i];
    return NULL;
}
