/* bench_common.c — what both of `moelab bench`'s models use (bench.h): medians, the SGEMM rate,
 * timed steps, the per-layer profile table and the helpers of a bench under mpirun. */
#include "app/bench/bench.h"
#include "app/cli/app.h"
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

double bench_median(double *v, int n) {
    qsort(v, n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Best-of-reps SGEMM rate for an n x n x n product (GFLOP/s). */
double bench_sgemm_rate(int n, int reps) {
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
 * With m->prof.on set, the loss and the update are timed into *upd (seconds, accumulated). */
double bench_time_steps(Model *m, Optimizer *o, const int32_t *labels, int B, int steps, Rng *rng, double *upd) {
    double t = ml_now();
    for (int s = 0; s < steps; s++) {
        model_forward(m, B, 1, 1.0f, rng);
        const double t0 = m->prof.on ? ml_now() : 0.0;
        model_loss(m, labels, B, NULL);
        const double t1 = m->prof.on ? ml_now() : 0.0;
        bench_dist_step_begin(m);
        model_backward(m, labels, B);
        bench_dist_step_end();
        const double t2 = m->prof.on ? ml_now() : 0.0;
        optim_step(o, m, 0.01f);
        if (m->cfg.head.kind != HEAD_DENSE) moe_update_bias(&m->moe);
        model_backbone_update_bias(m);
        if (m->prof.on) *upd += (t1 - t0) + (ml_now() - t2);
        m->prof.steps++;
    }
    return ml_now() - t;
}

/* Times `steps` evaluation forward passes (running statistics, evaluation capacity). */
double bench_time_eval(Model *m, int B, int steps, Rng *rng) {
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
    m->dist.grad_ready = c->grad_ready;
    m->dist.grad_ctx = c->ctx;
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

/* The per-layer table of `--profile`: one profiled measurement of `steps` steps (separate from
 * the timed ones, whose figures the clock calls would disturb). Rows add up to the step's wall
 * time; the machine-readable line compares the two. A backbone layer (`--moe-after`,
 * `--ffn-after`) has its own row after the unit that closes its stage. kind: "head" (the
 * reference model, one table per head) or "model" (`--model backbone-moe|backbone-ffn`). */
void bench_profile_table(Model *m, Optimizer *opt, const int32_t *labels, int B, int steps, int threads, Rng *rng,
                         const char *kind, const char *name) {
    memset(m->prof.fwd, 0, sizeof m->prof.fwd);
    memset(m->prof.bwd, 0, sizeof m->prof.bwd);
    memset(m->prof.fwd_gemm, 0, sizeof m->prof.fwd_gemm);
    memset(m->prof.bwd_gemm, 0, sizeof m->prof.bwd_gemm);
    m->prof.steps = 0;
    m->prof.on = 1;
    double upd = 0.0;
    const double wall = bench_time_steps(m, opt, labels, B, steps, rng, &upd);
    m->prof.on = 0;
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
        const double f = i >= 0 ? m->prof.fwd[i] * k : 0.0;
        const double b = i >= 0 ? m->prof.bwd[i] * k : upd * k;
        const double g = i >= 0 ? (m->prof.fwd_gemm[i] + m->prof.bwd_gemm[i]) * k : 0.0;
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

