/* bench.c — `moelab bench`: training throughput of the reference model on random data, next to
 * the OpenBLAS SGEMM rate measured in the same run (these machines are noisy: only ratios taken
 * in one run mean anything). Prints medians over --repeat measurements. */
#include "app.h"
#include "options.h"

#include <cblas.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n) {
    qsort(v, n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Best-of-reps SGEMM rate for an n x n x n product (GFLOP/s). */
static double sgemm_rate(int n, int reps) {
    float *a = ml_alloc(sizeof(float) * n * n), *b = ml_alloc(sizeof(float) * n * n),
          *c = ml_alloc(sizeof(float) * n * n);
    if (!a || !b || !c) {
        ml_free(a);
        ml_free(b);
        ml_free(c);
        return 0;
    }
    for (long i = 0; i < (long)n * n; i++) {
        a[i] = (float)(i % 7) * 0.1f;
        b[i] = (float)(i % 5) * 0.1f;
    }
    double best = 1e30;
    for (int r = 0; r < reps + 1; r++) {
        double t = ml_now();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
        t = ml_now() - t;
        if (r > 0 && t < best) best = t;
    }
    ml_free(a);
    ml_free(b);
    ml_free(c);
    return 2.0 * n * n * n / best / 1e9;
}

/* Times `steps` training steps (forward, backward, update) of the model on fixed random data. */
static double time_steps(Model *m, Optimizer *o, const int32_t *labels, int B, int steps, Rng *rng) {
    double t = ml_now();
    for (int s = 0; s < steps; s++) {
        model_forward(m, B, 1, 1.0f, rng);
        model_loss(m, labels, B, NULL);
        model_backward(m, labels, B);
        optim_step(o, m, 0.01f);
        if (m->cfg.head.kind != HEAD_DENSE) moe_update_bias(&m->moe);
        m->prof_steps++;
    }
    return ml_now() - t;
}

int cmd_bench(int argc, char **argv) {
    AppOptions o;
    app_options_defaults(&o);
    o.train.model.head.bias_mode = BIAS_NONE;
    int r = app_options_parse(&o, argc, argv, "bench");
    if (r) return r > 0 ? 0 : 2;
    if (strcmp(o.bench_model, "reference")) return bench_backbone_model(&o); /* app/bench_model.c */
    TrainConfig *tc = &o.train;
    omp_set_num_threads(tc->threads);
    openblas_set_num_threads(tc->threads);
    const int B = tc->model.batch;
    printf("moelab bench: reference model (%s backbone, w=%g, %dx%dx%d, %d classes), batch %d, %d threads,\n"
           "              %d timed steps x %d repeats per head after 3 warm-up steps; medians\n",
           backbone_name(tc->model.backbone), tc->model.width, tc->model.in_h, tc->model.in_w, tc->model.in_c,
           tc->model.classes, B, tc->threads, o.steps, o.repeat);
    double sg[16];
    int nsg = o.repeat < 16 ? o.repeat : 16;
    for (int i = 0; i < nsg; i++) sg[i] = sgemm_rate(1024, 10);
    const double sgemm = median(sg, nsg);
    printf("OpenBLAS SGEMM 1024x1024x1024: %.1f GFLOP/s\n\n", sgemm);
    printf("%-16s %9s %9s %11s %9s %8s\n", "head", "img/s", "ms/step", "MFLOP/img", "GFLOP/s", "%SGEMM");
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
        Rng rng;
        rng_seed(&rng, tc->seed);
        model_init_params(&m, &rng);
        float *x = model_input(&m);
        for (long i = 0; i < (long)mc.in_c * B * mc.in_h * mc.in_w; i++) x[i] = rng_normal(&rng);
        int32_t *labels = ml_alloc(sizeof(int32_t) * B);
        for (int b = 0; b < B; b++) labels[b] = (int32_t)rng_below(&rng, (uint32_t)mc.classes);
        time_steps(&m, &opt, labels, B, 3, &rng);
        m.profile = getenv("MOELAB_PROFILE") != NULL;
        double ips[64];
        int nrep = o.repeat < 64 ? o.repeat : 64;
        for (int i = 0; i < nrep; i++) ips[i] = o.steps * (double)B / time_steps(&m, &opt, labels, B, o.steps, &rng);
        const double img_s = median(ips, nrep);
        const double mflop = 3.0 * model_flops(&m) / 1e6;
        const double gflops = img_s * mflop / 1e3;
        printf("%-16s %9.0f %9.2f %11.2f %9.1f %7.1f%%\n", name, img_s, 1e3 * B / img_s, mflop, gflops,
               100.0 * gflops / sgemm);
        if (getenv("MOELAB_PROFILE")) {
            double tot = 0;
            for (int i = 0; i < m.nunits + 3; i++) tot += m.prof_fwd[i] + m.prof_bwd[i];
            printf("  profile (ms per step, forward / backward):\n");
            for (int i = 0; i < m.nunits + 3; i++) {
                const char *nm = i < m.nunits        ? m.units[i].label
                                 : i == m.nunits     ? "pool"
                                 : i == m.nunits + 1 ? "head"
                                                     : "classifier+loss";
                const double k = 1e3 / (double)m.prof_steps;
                printf("    %-18s %7.2f %7.2f\n", nm, m.prof_fwd[i] * k, m.prof_bwd[i] * k);
            }
            printf("    %-18s %7.2f (update, zero_grad and the rest: %.2f)\n", "model total", tot * 1e3 / m.prof_steps,
                   1e3 * B / img_s - tot * 1e3 / m.prof_steps);
        }
        printf("bench head=%s img_per_s=%.1f gflops=%.2f sgemm_gflops=%.2f sgemm_fraction=%.4f\n", name, img_s, gflops,
               sgemm, gflops / sgemm);
        fflush(stdout);
        ml_free(labels);
        optim_free(&opt);
        model_free(&m);
    }
    return rc;
}
