/* bench.c — `moelab bench`: training and evaluation throughput of the reference model on random
 * data, next to the OpenBLAS SGEMM rate measured in the same run (these machines are noisy: only
 * ratios taken in one run mean anything). Prints medians over --repeat measurements; --scaling
 * adds the 1-thread rate and the speed-up, --profile a per-layer time table. */
#include "app/cli/app.h"
#include "app/cli/options.h"
#include "app/bench/bench.h"
#include "app/run/dist.h"

#include <cblas.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void set_threads(int n) {
    omp_set_num_threads(n);
    openblas_set_num_threads(n);
}

/* The machine's load next to the figures: with more runnable threads than cores, OpenMP's
 * spinning barriers wait for descheduled threads and the figures say little about the code. */
static void print_load(void) {
    double la[1];
    const int cores = omp_get_num_procs();
    if (getloadavg(la, 1) != 1) return;
    printf("load average (1 min) %.2f on %d cores", la[0], cores);
    if (la[0] > cores + 1.0) /* the 1-min average includes this program's own previous rounds */
        printf(": OVERSUBSCRIBED, other work competes for the cores (figures are not representative;\n"
               "  OMP_WAIT_POLICY=passive helps a loaded machine, spinning helps a quiet one)");
    printf("\n");
}

int cmd_bench(int argc, char **argv) {
    AppOptions o;
    app_options_defaults(&o);
    o.train.model.head.bias_mode = BIAS_NONE;
    int r = app_options_parse(&o, argc, argv, "bench");
    if (r) return r > 0 ? 0 : 2;
    dist_init(); /* under mpirun: every rank times its part of each batch (bench_dist_*) */
    dist_no_handshake();
    const int global_B = o.train.model.batch;
    if (bench_dist_prepare(&o.train.model.batch)) {
        dist_finish();
        return 2;
    }
    if (strcmp(o.bench_model, "reference")) { /* app/bench_model.c */
        r = bench_backbone_model(&o);
        dist_finish();
        return r;
    }
    TrainConfig *tc = &o.train;
    set_threads(tc->threads);
    const int B = tc->model.batch, R = dist_size();
    printf("moelab bench: reference model (%s backbone, w=%g, %dx%dx%d, %d classes), batch %d, %d threads,\n"
           "              %d timed steps x %d repeats per head after 3 warm-up steps; medians.\n"
           "              train = forward + backward + update; eval = forward only (running statistics)\n",
           backbone_name(tc->model.backbone), tc->model.width, tc->model.in_h, tc->model.in_w, tc->model.in_c,
           tc->model.classes, global_B, tc->threads, o.steps, o.repeat);
    if (R > 1) printf("              %d ranks (mpirun), each %d threads and %d images of every batch\n", R, tc->threads, B);
    double sg[16];
    int nsg = o.repeat < 16 ? o.repeat : 16;
    for (int i = 0; i < nsg; i++) sg[i] = bench_sgemm_rate(1024, 10);
    const double sgemm = bench_dist_sgemm(bench_median(sg, nsg)); /* the machine's: every rank's at once, summed */
    printf("OpenBLAS SGEMM 1024x1024x1024: %.1f GFLOP/s (%d threads%s)\n", sgemm, tc->threads,
           R > 1 ? " per rank, all ranks at once, summed" : "");
    print_load();
    printf("\n");
    printf("%-10s %9s %9s %11s %9s %8s %10s %10s %6s\n", "head", "train/s", "ms/step", "MFLOP/img", "GFLOP/s", "%SGEMM",
           "eval img/s", "eval/train", "ranks");
    char heads[64];
    snprintf(heads, sizeof heads, "%s", o.heads);
    int rc = 0;
    for (char *save = NULL, *name = strtok_r(heads, ",", &save); name; name = strtok_r(NULL, ",", &save)) {
        ModelConfig mc = tc->model;
        if (moe_parse_head(name, &mc.head.kind) != ML_OK) {
            fprintf(stderr, "moelab bench: unknown head '%s'\n", name);
            rc = 2;
            continue;
        }
        Model m;
        Optimizer opt;
        if (model_init(&m, &mc) != ML_OK || optim_init(&opt, &tc->opt, m.n_param) != ML_OK) {
            fprintf(stderr, "moelab bench: %s\n", ml_last_error());
            return 1;
        }
        bench_dist_model(&m);
        Rng rng;
        rng_seed(&rng, tc->seed + (uint64_t)dist_rank());
        model_init_params(&m, &rng);
        float *x = model_input(&m);
        for (long i = 0; i < (long)mc.in_c * B * mc.in_h * mc.in_w; i++) x[i] = rng_normal(&rng);
        int32_t *labels = ml_alloc(sizeof(int32_t) * B);
        for (int b = 0; b < B; b++) labels[b] = (int32_t)rng_below(&rng, (uint32_t)mc.classes);
        bench_time_steps(&m, &opt, labels, B, 3, &rng, NULL);
        bench_time_eval(&m, B, 2, &rng);
        /* with --scaling, each repeat times T threads then 1 thread, so that load changes hit both */
        double ips[64], eps[64], ips1[64];
        int nrep = o.repeat < 64 ? o.repeat : 64;
        dist_comm_reset();
        for (int i = 0; i < nrep; i++) { /* images per second of the whole run: every rank's part */
            ips[i] = R * o.steps * (double)B / bench_time_steps(&m, &opt, labels, B, o.steps, &rng, NULL);
            eps[i] = R * o.steps * (double)B / bench_time_eval(&m, B, o.steps, &rng);
            if (o.scaling) {
                set_threads(1);
                ips1[i] = o.steps * (double)B / bench_time_steps(&m, &opt, labels, B, o.steps, &rng, NULL);
                set_threads(tc->threads);
            }
        }
        const double img_s = bench_median(ips, nrep), eval_s = bench_median(eps, nrep);
        const double mflop = 3.0 * model_flops(&m) / 1e6;
        const double gflops = img_s * mflop / 1e3;
        printf("%-10s %9.0f %9.2f %11.2f %9.1f %7.1f%% %10.0f %9.2fx %6d\n", name, img_s, 1e3 * global_B / img_s, mflop,
               gflops, 100.0 * gflops / sgemm, eval_s, eval_s / img_s, R);
        char df[160];
        bench_dist_line(1e3 * global_B / img_s, df, sizeof df);
        printf("bench head=%s img_per_s=%.1f gflops=%.2f sgemm_gflops=%.2f sgemm_fraction=%.4f eval_img_per_s=%.1f "
               "eval_ratio=%.3f%s\n",
               name, img_s, gflops, sgemm, gflops / sgemm, eval_s, eval_s / img_s, df);
        if (o.scaling) {
            const double one = bench_median(ips1, nrep);
            printf("%-10s thread scaling: 1 thread %.0f img/s, %d threads %.0f img/s, speed-up %.2fx\n", name, one,
                   tc->threads, img_s, img_s / one);
            printf("scaling head=%s threads=%d img_per_s_1=%.1f img_per_s_n=%.1f speedup=%.3f\n", name, tc->threads,
                   one, img_s, img_s / one);
        }
        if (o.profile) bench_profile_table(&m, &opt, labels, B, o.steps, tc->threads, &rng, "head", name);
        fflush(stdout);
        ml_free(labels);
        optim_free(&opt);
        model_free(&m);
    }
    dist_finish();
    return rc;
}
