/* sweep_presets.c — the paper's experiments as `moelab sweep --preset NAME` (short budgets) and
 * `--preset NAME --full` (the real budgets): each preset is a list of sweep arguments that the
 * user's own arguments extend or override (see plan_from_argv in sweep.c). */
#include "app/sweep/sweep_internal.h"

#include <string.h>

/* ------------------------------------------------------------------ presets */

/* argument lists as wrapped by hand (clang-format would align them as a table) */
// clang-format off
/* hidden-size: h per backbone so that rho spans ~0.05-0.6 (Fashion-MNIST, w 0.5: dw h 64/256/1024
 * = rho 0.06/0.21/0.51; std h 512/2048 = 0.08/0.25, quick stops there for time; paper: std up to
 * h 8192 = 0.57) */
static const char *const hs_quick[] = {"--width", "0.5", "--epochs", "3", "--vary", "hidden=64,256,1024,512,2048",
                                       "--with", "backbone=dw,dw,dw,std,std", "--vary", "head=moe,dense", "--seeds", "4", NULL};
static const char *const hs_full[] = {"--width", "1", "--epochs", "30", "--vary",
                                      "hidden=32,64,128,256,512,1024,2048,128,256,512,1024,2048,4096,8192", "--with",
                                      "backbone=dw,dw,dw,dw,dw,dw,dw,std,std,std,std,std,std,std", "--vary", "head=moe,dense",
                                      "--seeds", "5", NULL};
/* topk-rho: cf per k so that every k keeps one pair per sample (k = 1 dropless; k = 2, 4: the slot
 * budget E*C = B): realized rho is the same for every k */
static const char *const tk_quick[] = {"--width", "0.5", "--epochs", "3", "--vary", "k=1,2,4", "--with", "cf=0,0.5,0.25",
                                       "--vary", "head=moe,dense", "--seeds", "4", NULL};
static const char *const tk_full[] = {"--width", "1", "--epochs", "30", "--vary", "k=1,2,4", "--with", "cf=0,0.5,0.25",
                                      "--vary", "head=moe,dense", "--seeds", "5", NULL};
static const char *const sm_quick[] = {"--width", "0.5", "--epochs", "3", "--vary", "head=softmoe-sample,softmoe-batch,moe,dense",
                                       "--seeds", "4", NULL};
static const char *const sm_full[] = {"--width", "1", "--epochs", "30", "--vary", "head=softmoe-sample,softmoe-batch,moe,dense",
                                      "--seeds", "5", NULL};
/* temperature (paper Fig. 3): k = 1; constant, linear to 0.1, linear to 0.3, sigmoid to 0.1 */
static const char *const tp_quick[] = {"--width", "0.5", "--epochs", "4", "--k", "1", "--vary", "schedule=const,linear,linear,sigmoid",
                                       "--with", "tau1=1,0.1,0.3,0.1", "--vary", "head=moe,dense", "--seeds", "4", NULL};
static const char *const tp_full[] = {"--width", "1", "--epochs", "30", "--k", "1", "--vary", "schedule=const,linear,linear,sigmoid",
                                      "--with", "tau1=1,0.1,0.3,0.1", "--vary", "head=moe,dense", "--seeds", "5", NULL};
/* imagenet-topk (claim 2, the backbone version): MoE layers after stages 2 and 3 of a 64x64 model
 * (h 50, 100: nominal rho 0.376 at k = 1) against the matched dense layers (hidden k*h), the
 * layers' k = 1, 2, 4 (--moe-k: the dense head keeps k 1, so its width is the same for every k)
 * with cf as in topk-rho (one kept pair per sample): realized rho equal across k */
static const char *const it_quick[] = {"--dataset", "synthetic:64x64x3:100:8000", "--width", "1", "--epochs", "4",
                                       "--head", "dense", "--k", "1", "--moe-hidden", "50,100", "--vary", "moe-k=1,2,4", "--with", "cf=0,0.5,0.25",
                                       "--vary", "moe-after=2+3,none", "--with", "ffn-after=none,2+3", "--seeds", "2", NULL};
static const char *const it_full[] = {"--dataset", "synthetic:64x64x3:100", "--width", "1", "--epochs", "30",
                                      "--head", "dense", "--k", "1", "--moe-hidden", "50,100", "--vary", "moe-k=1,2,4", "--with", "cf=0,0.5,0.25",
                                      "--vary", "moe-after=2+3,none", "--with", "ffn-after=none,2+3", "--seeds", "5", NULL};
/* --budget medium: width 1 (the paper's), 5 seeds, on the quick grids, 10 epochs (softmoe and
 * temperature 20: their models are cheaper; imagenet-topk: 20,000 images, 3 seeds): between quick
 * (w 0.5, 3-4 epochs) and paper (30 epochs); sized for a night on 2 cores at --jobs 2 (README
 * "Budgets": the calibration's estimates) */
static const char *const hs_medium[] = {"--width", "1", "--epochs", "10", "--vary", "hidden=64,256,1024,512,2048",
                                        "--with", "backbone=dw,dw,dw,std,std", "--vary", "head=moe,dense", "--seeds", "5", NULL};
static const char *const tk_medium[] = {"--width", "1", "--epochs", "10", "--vary", "k=1,2,4", "--with", "cf=0,0.5,0.25",
                                        "--vary", "head=moe,dense", "--seeds", "5", NULL};
static const char *const sm_medium[] = {"--width", "1", "--epochs", "20", "--vary", "head=softmoe-sample,softmoe-batch,moe,dense",
                                        "--seeds", "5", NULL};
static const char *const tp_medium[] = {"--width", "1", "--epochs", "20", "--k", "1", "--vary", "schedule=const,linear,linear,sigmoid",
                                        "--with", "tau1=1,0.1,0.3,0.1", "--vary", "head=moe,dense", "--seeds", "5", NULL};
static const char *const it_medium[] = {"--dataset", "synthetic:64x64x3:100:20000", "--width", "1", "--epochs", "10",
                                        "--head", "dense", "--k", "1", "--moe-hidden", "50,100", "--vary", "moe-k=1,2,4", "--with", "cf=0,0.5,0.25",
                                        "--vary", "moe-after=2+3,none", "--with", "ffn-after=none,2+3", "--seeds", "3", NULL};
static const char *const bb_medium[] = {"--width", "1", "--epochs", "10", "--vary", "backbone=dw,std", "--vary", "head=moe,dense",
                                        "--seeds", "5", NULL};
static const char *const bb_quick[] = {"--width", "0.5", "--epochs", "2", "--vary", "backbone=dw,std", "--vary", "head=moe,dense",
                                       "--seeds", "2", NULL};
static const char *const bb_full[] = {"--width", "1", "--epochs", "30", "--vary", "backbone=dw,std", "--vary", "head=moe,dense",
                                      "--seeds", "5", NULL};
// clang-format on

static const Preset presets[] = {
    {"hidden-size", hs_quick, hs_full, hs_medium,
     "the gap's sign as h (hence rho) grows, both backbones; dense has the same k*h active width", VERDICT_HIDDEN,
     "hidden per backbone (rho ~0.05-0.6) x head moe,dense"},
    {"topk-rho", tk_quick, tk_full, tk_medium,
     "cf per k (k=1 dropless, cf=1/k otherwise) keeps one routed pair per sample: realized rho is the same for every k",
     VERDICT_TOPK, "k 1,2,4 with cf 0,1/2,1/4 (realized rho equal) x head moe,dense"},
    {"imagenet-topk", it_quick, it_full, it_medium,
     "64x64, MoE layers after stages 2, 3 (h 50, 100) vs the matched dense layers, k = 1, 2, 4 at one kept pair per "
     "sample (cf 1/k): realized rho held fixed near 0.38; give an ImageNet-64 file with --dataset",
     VERDICT_TOPK, "64x64, MoE layers after stages 2,3 at k 1,2,4 (rho ~0.38) x matched dense layers"},
    {"softmoe", sm_quick, sm_full, sm_medium, "soft MoE per sample (dense over experts) vs over the batch (samples mix)",
     VERDICT_SOFTMOE, "head softmoe-sample,softmoe-batch,moe,dense"},
    {"temperature", tp_quick, tp_full, tp_medium,
     "k = 1: constant tau, linear to 0.1, linear to 0.3, sigmoid to 0.1 (paper Fig. 3)", VERDICT_TEMPERATURE,
     "k 1: tau const, linear to 0.1, linear to 0.3, sigmoid x moe,dense"},
    {"backbone", bb_quick, bb_full, bb_medium, "dw vs std backbone at the reference head (E 8, k 2, h 1024, cf 1.25)",
     VERDICT_NONE, "backbone dw,std x head moe,dense at the reference model"},
};
#define N_PRESETS (int)(sizeof presets / sizeof presets[0])

void sweep_preset_names(char *buf, size_t n, const char *sep) {
    size_t o = 0;
    buf[0] = 0;
    for (int i = 0; i < N_PRESETS && o < n; i++)
        o += (size_t)snprintf(buf + o, n - o, "%s%s", i ? sep : "", presets[i].name);
}

void sweep_preset_help_lines(FILE *f, int indent) {
    for (int i = 0; i < N_PRESETS; i++) fprintf(f, "%*s%-15s%s\n", indent, "", presets[i].name, presets[i].help);
}

const Preset *sweep_find_preset(const char *name) {
    for (int i = 0; i < N_PRESETS; i++)
        if (!strcmp(presets[i].name, name)) return &presets[i];
    return NULL;
}
