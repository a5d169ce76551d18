/* bench.c — `moelab bench`: training and evaluation throughput of the reference model on random
 * data, next to the OpenBLAS SGEMM rate measured in the same run (these machines are noisy: only
 * ratios taken in one run mean anything). Prints medians over --repeat measurements; --scaling
 * adds the 1-thread rate and the speed-up, --profile a per-layer time table. */
#include "app/cli/app.h"
#include "app/cli/options.h"
#include "app/run/dist.h"

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

/* Times `steps` training steps (forward, backward, update) of the model on fixed random data.
 * With m->profile set, the loss and the update are timed into *upd (seconds, accumulated). */
static double time_steps(Model *m, Optimizer *o, const int32_t *labels, int B, int steps, Rng *rng, double *upd) {
    double t = ml_now();
    for (int s = 0; s < steps; s++) {
        model_forward(m, B, 1, 1.0f, rng);
        const double t0 = m->profile ? ml_now() : 0.0;
        model_loss(m, labels, B, NULL);
        const double t1 = m->profile ? ml_now() : 0.0;
        bench_dist_step_begin(m);
        model_backward(m, labels, B);
        bench_dist_step_end();
        const double t2 = m->profile ? ml_now() : 0.0;
        optim_step(o, m, 0.01f);
        if (m->cfg.head.kind != HEAD_DENSE) moe_update_bias(&m->moe);
        model_backbone_update_bias(m);
        if (m->profile) *upd += (t1 - t0) + (ml_now() - t2);
        m->prof_steps++;
    }
    return ml_now() - t;
}

/* Times `steps` evaluation forward passes (running statistics, evaluation capacity). */
static double time_eval(Model *m, int B, int steps, Rng *rng) {
    double t = ml_now();
    for (int s = 0; s < steps; s++) model_forward(m, B, 0, 1.0f, rng);
    return ml_now() - t;
}

// ---- data parallelism (mpirun -np N moelab bench)

int bench_dist_prepare(int *B) {
    const int R = dist_size();
    if (R == 1) return 0;
    if (*B % R) {
        if (dist_rank() == 0)
            fprintf(stderr, "moelab bench: --batch %d is the global batch, split evenly over the %d ranks: they do not "
                            "divide it\n", *B, R);
        return -1;
    }
    *B /= R;
    if (dist_rank() > 0 && !freopen("/dev/null", "w", stdout)) return -1; /* rank 0 reports */
    return 0;
}

void bench_dist_model(Model *m) {
    const TrainComm *c = dist_comm();
    if (!c) return;
    m->grad_ready = c->grad_ready;
    m->grad_ctx = c->ctx;
}

double bench_dist_sgemm(double mine) {
    const TrainComm *c = dist_comm();
    if (!c) return mine;
    c->sum(c->ctx, &mine, 1);
    return mine;
}

void bench_dist_step_begin(Model *m) {
    const TrainComm *c = dist_comm();
    if (c) c->grad_begin(c->ctx, m->grad, m->n_param);
}

void bench_dist_step_end(void) {
    const TrainComm *c = dist_comm();
    if (c) c->grad_end(c->ctx);
}

void bench_dist_line(double step_ms, char *fields, size_t n) {
    double wait = 0, bytes = 0, hidden = 0;
    long steps = 0;
    dist_comm_stats(&wait, &bytes, &hidden, &steps);
    const double comm_ms = steps ? 1e3 * wait / steps : 0.0;
    if (dist_size() > 1)
        printf("ranks %d x %d threads: communication %.3f ms/step (%.1f%% of the step), %.3f MB/step sent per rank, "
               "%.0f%% of the gradient exchange hidden behind the backward%s\n",
               dist_size(), omp_get_max_threads(), comm_ms, 100.0 * comm_ms / step_ms, bytes / 1e6, 100.0 * hidden,
               getenv("MOELAB_DIST_NO_OVERLAP") && atoi(getenv("MOELAB_DIST_NO_OVERLAP")) ? " (overlap off)" : "");
    snprintf(fields, n, " ranks=%d comm_ms=%.4f bytes_per_step=%.0f hidden=%.3f", dist_size(), comm_ms, bytes, hidden);
}

static void set_threads(int n) {
    omp_set_num_threads(n);
    openblas_set_num_threads(n);
}

/* The per-layer table of `--profile`: one profiled measurement of `steps` steps (separate from
 * the timed ones, whose figures the clock calls would disturb). Rows add up to the step's wall
 * time; the machine-readable line compares the two. A backbone layer (`--moe-after`,
 * `--ffn-after`) has its own row after the unit that closes its stage. kind: "head" (the
 * reference model, one table per head) or "model" (`--model backbone-moe|backbone-ffn`). */
void bench_profile_table(Model *m, Optimizer *opt, const int32_t *labels, int B, int steps, int threads, Rng *rng,
                         const char *kind, const char *name) {
    memset(m->prof_fwd, 0, sizeof m->prof_fwd);
    memset(m->prof_bwd, 0, sizeof m->prof_bwd);
    memset(m->prof_fwd_gemm, 0, sizeof m->prof_fwd_gemm);
    memset(m->prof_bwd_gemm, 0, sizeof m->prof_bwd_gemm);
    m->prof_steps = 0;
    m->profile = 1;
    double upd = 0.0;
    const double wall = time_steps(m, opt, labels, B, steps, rng, &upd);
    m->profile = 0;
    ml_gemm_timing = 0;
    const double k = 1e3 / (double)steps, step_ms = wall * k;
    printf("\nprofile, %s %s: ms per training step (mean of %d steps, batch %d, %d threads);\n"
           "GEMM = wall time inside cblas_sgemm, other = the rest of the layer (im2col, depthwise, BN+ReLU, ...)\n",
           name, kind, steps, B, threads);
    printf("  %-16s %8s %8s %8s %7s %8s %8s\n", "layer", "forward", "backward", "total", "%step", "GEMM", "other");
    /* the rows in network order: (profile slot, label); slot -1 is loss+update */
    int slot[MODEL_PROF_SLOTS + 1], n = 0;
    const char *label[MODEL_PROF_SLOTS + 1];
    for (int i = 0; i < m->nunits; i++) {
        slot[n] = i, label[n++] = m->units[i].label;
        const int s = m->unit_stage[i];
        if (s >= 0 && m->stage_moe[s] >= 0) slot[n] = MODEL_PROF_BBL(s), label[n++] = m->moec[m->stage_moe[s]].name;
        else if (s >= 0 && m->stage_ffn[s] >= 0) slot[n] = MODEL_PROF_BBL(s), label[n++] = m->ffnc[m->stage_ffn[s]].name;
    }
    slot[n] = m->nunits, label[n++] = "pool";
    slot[n] = m->nunits + 1, label[n++] = "head";
    slot[n] = m->nunits + 2, label[n++] = "classifier";
    slot[n] = -1, label[n++] = "loss+update";
    double rows = 0.0, gemm = 0.0;
    for (int r = 0; r < n; r++) {
        const int i = slot[r];
        const double f = i >= 0 ? m->prof_fwd[i] * k : 0.0;
        const double b = i >= 0 ? m->prof_bwd[i] * k : upd * k;
        const double g = i >= 0 ? (m->prof_fwd_gemm[i] + m->prof_bwd_gemm[i]) * k : 0.0;
        rows += f + b;
        gemm += g;
        printf("  %-16s %8.2f %8.2f %8.2f %6.1f%% %8.2f %8.2f\n", label[r], f, b, f + b, 100.0 * (f + b) / step_ms, g,
               f + b - g);
    }
    printf("  %-16s %8s %8s %8.2f %6.1f%% %8.2f %8.2f\n", "sum of rows", "", "", rows, 100.0 * rows / step_ms, gemm,
           rows - gemm);
    printf("  %-16s %8s %8s %8.2f (wall clock; GEMM %.1f%% of it)\n", "step", "", "", step_ms, 100.0 * gemm / step_ms);
    printf("profile %s=%s steps=%d rows_ms=%.4f step_ms=%.4f gemm_ms=%.4f\n", kind, name, steps, rows, step_ms, gemm);
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
    for (int i = 0; i < nsg; i++) sg[i] = sgemm_rate(1024, 10);
    const double sgemm = bench_dist_sgemm(median(sg, nsg)); /* the machine's: every rank's at once, summed */
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
        time_steps(&m, &opt, labels, B, 3, &rng, NULL);
        time_eval(&m, B, 2, &rng);
        /* with --scaling, each repeat times T threads then 1 thread, so that load changes hit both */
        double ips[64], eps[64], ips1[64];
        int nrep = o.repeat < 64 ? o.repeat : 64;
        dist_comm_reset();
        for (int i = 0; i < nrep; i++) { /* images per second of the whole run: every rank's part */
            ips[i] = R * o.steps * (double)B / time_steps(&m, &opt, labels, B, o.steps, &rng, NULL);
            eps[i] = R * o.steps * (double)B / time_eval(&m, B, o.steps, &rng);
            if (o.scaling) {
                set_threads(1);
                ips1[i] = o.steps * (double)B / time_steps(&m, &opt, labels, B, o.steps, &rng, NULL);
                set_threads(tc->threads);
            }
        }
        const double img_s = median(ips, nrep), eval_s = median(eps, nrep);
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
            const double one = median(ips1, nrep);
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
