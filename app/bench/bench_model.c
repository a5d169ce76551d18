/* bench_model.c — `moelab bench --model backbone-moe|backbone-ffn`: training throughput of the
 * 64x64x3 model with routed conv-FFN layers inside the backbone (model_preset_backbone_moe, README
 * "MoE in the backbone"), or of its matched dense baseline, on random data, next to the OpenBLAS
 * SGEMM rate measured in the same run, and its evaluation rate (forward only). Medians over
 * --repeat measurements of --steps steps; --profile adds the per-layer table (bench_common.c).
 * tests/bench_torch_backbone.sh runs it alternately with its PyTorch twin. */
#include "app/cli/app.h"
#include "app/cli/options.h"
#include "app/bench/bench.h"
#include "app/run/dist.h"

#include <cblas.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int bench_backbone_model(const AppOptions *o) {
    const TrainConfig *tc = &o->train;
    const int ffn = !strcmp(o->bench_model, "backbone-ffn");
    ModelConfig mc = tc->model;
    model_preset_backbone_moe(&mc);
    if (ffn) {
        mc.ffn_n = mc.moe_n;
        memcpy(mc.ffn_after, mc.moe_after, sizeof mc.ffn_after);
        mc.moe_n = 0;
    }
    omp_set_num_threads(tc->threads);
    openblas_set_num_threads(tc->threads);
    const int B = mc.batch, R = dist_size(), global_B = B * R; /* B: this rank's part (bench_dist_prepare) */
    Model m;
    Optimizer opt;
    if (model_init(&m, &mc) != ML_OK) {
        fprintf(stderr, "moelab bench: %s\n", ml_last_error());
        return 1;
    }
    if (optim_init(&opt, &tc->opt, m.n_param) != ML_OK) {
        fprintf(stderr, "moelab bench: %s\n", ml_last_error());
        model_free(&m);
        return 1;
    }
    printf("moelab bench: %s (64x64x3, dw w=1, layers after blocks 2,3 h 32,64, E %d, k %d, cf %g, head dense), "
           "batch %d, %d threads,\n              %d timed steps x %d repeats after 3 warm-up steps; medians; "
           "nominal rho %.3f\n",
           o->bench_model, mc.head.E, mc.head.k, (double)mc.head.cf, global_B, tc->threads, o->steps, o->repeat,
           model_rho_nominal(&m));
    if (R > 1) printf("              %d ranks (mpirun), each %d threads and %d images of every batch\n", R, tc->threads, B);
    bench_dist_model(&m);
    double sg[16];
    const int nsg = o->repeat < 16 ? o->repeat : 16;
    for (int i = 0; i < nsg; i++) sg[i] = bench_sgemm_rate(1024, 10);
    const double sgemm = bench_dist_sgemm(bench_median(sg, nsg)); /* every rank's at once, summed */
    printf("OpenBLAS SGEMM 1024x1024x1024: %.1f GFLOP/s%s\n\n", sgemm, R > 1 ? " (all ranks at once, summed)" : "");
    Rng rng;
    rng_seed(&rng, tc->seed + (uint64_t)dist_rank());
    model_init_params(&m, &rng);
    float *x = model_input(&m);
    for (long i = 0; i < (long)mc.in_c * B * mc.in_h * mc.in_w; i++) x[i] = rng_normal(&rng);
    int32_t *labels = ml_alloc(sizeof(int32_t) * B);
    if (!labels) {
        optim_free(&opt);
        model_free(&m);
        return 1;
    }
    for (int b = 0; b < B; b++) labels[b] = (int32_t)rng_below(&rng, (uint32_t)mc.classes);
    bench_time_steps(&m, &opt, labels, B, 3, &rng, NULL);
    bench_time_eval(&m, B, 2, &rng);
    double ips[64], eps[64];
    const int nrep = o->repeat < 64 ? o->repeat : 64;
    dist_comm_reset();
    for (int i = 0; i < nrep; i++) { /* images per second of the whole run: every rank's part */
        ips[i] = R * o->steps * (double)B / bench_time_steps(&m, &opt, labels, B, o->steps, &rng, NULL);
        eps[i] = R * o->steps * (double)B / bench_time_eval(&m, B, o->steps, &rng);
    }
    const double img_s = bench_median(ips, nrep), eval_s = bench_median(eps, nrep);
    const double mflop = 3.0 * model_flops(&m) / 1e6, gflops = img_s * mflop / 1e3;
    printf("%-16s %9s %9s %11s %9s %8s %10s %10s %6s\n", "model", "img/s", "ms/step", "MFLOP/img", "GFLOP/s", "%SGEMM",
           "eval img/s", "eval/train", "ranks");
    printf("%-16s %9.0f %9.2f %11.2f %9.1f %7.1f%% %10.0f %9.2fx %6d\n", o->bench_model, img_s, 1e3 * global_B / img_s,
           mflop, gflops, 100.0 * gflops / sgemm, eval_s, eval_s / img_s, R);
    char df[160];
    bench_dist_line(1e3 * global_B / img_s, df, sizeof df);
    printf("bench model=%s img_per_s=%.1f gflops=%.2f sgemm_gflops=%.2f sgemm_fraction=%.4f rho_nominal=%.4f "
           "eval_img_per_s=%.1f eval_ratio=%.3f%s\n",
           o->bench_model, img_s, gflops, sgemm, gflops / sgemm, model_rho_nominal(&m), eval_s, eval_s / img_s, df);
    if (o->profile) bench_profile_table(&m, &opt, labels, B, o->steps, tc->threads, &rng, "model", o->bench_model);
    ml_free(labels);
    optim_free(&opt);
    model_free(&m);
    return 0;
}
