/* test_tsne.c — core/tsne.c: cluster separation (Barnes-Hut and exact), with negative controls
 * (a map that never moved and a random map must fail the same thresholds); bit-identical maps
 * for one seed and for 1 and 2 threads, different maps for another seed; the Barnes-Hut gradient
 * against the exact one, and the exact one against finite differences of KL; perplexity
 * calibration of every row of P, symmetry and normalisation of the joint P; the SGEMM and PCA
 * neighbour paths against the direct one; bad inputs, duplicate points, cancellation; and,
 * unless MOELAB_QUICK is set (the sanitizer build), a run of 2000 points in 64 dimensions.
 * Prints the run times but asserts none. Plain main: one line per check, exits 1 on failure. */
#include "core/common.h"
#include "core/rng.h"
#include "core/tsne.h"

#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

static int quick;

// ---------------------------------------------------------------- data and measures

// nc Gaussian clusters of `per` points in d dims: unit spread, means ~ N(0, sep^2) per coordinate.
static void make_clusters(float *X, int *labels, int nc, int per, int d, double sep, uint64_t seed) {
    Rng r;
    rng_seed(&r, seed);
    double *mean = malloc(sizeof(double) * (size_t)nc * d);
    for (int t = 0; t < nc * d; t++) mean[t] = sep * rng_normal(&r);
    for (int c = 0; c < nc; c++)
        for (int p = 0; p < per; p++) {
            const int i = c * per + p;
            labels[i] = c;
            for (int t = 0; t < d; t++) X[(size_t)i * d + t] = (float)(mean[c * d + t] + rng_normal(&r));
        }
    free(mean);
}

// Mean distance of a point to its cluster's centroid over the mean distance between centroids.
static double spread_ratio(const float *Y, const int *labels, int n, int nc) {
    double *cen = calloc((size_t)nc * 2, sizeof(double));
    int *cnt = calloc((size_t)nc, sizeof(int));
    for (int i = 0; i < n; i++) {
        cen[2 * labels[i]] += Y[2 * i];
        cen[2 * labels[i] + 1] += Y[2 * i + 1];
        cnt[labels[i]]++;
    }
    for (int c = 0; c < nc; c++) {
        cen[2 * c] /= cnt[c];
        cen[2 * c + 1] /= cnt[c];
    }
    double intra = 0, inter = 0;
    for (int i = 0; i < n; i++) intra += hypot(Y[2 * i] - cen[2 * labels[i]], Y[2 * i + 1] - cen[2 * labels[i] + 1]);
    intra /= n;
    int pairs = 0;
    for (int a = 0; a < nc; a++)
        for (int b = a + 1; b < nc; b++, pairs++)
            inter += hypot(cen[2 * a] - cen[2 * b], cen[2 * a + 1] - cen[2 * b + 1]);
    inter /= pairs;
    free(cen);
    free(cnt);
    return intra / inter;
}

static int all_finite(const float *Y, int n) {
    for (int t = 0; t < 2 * n; t++)
        if (!isfinite(Y[t])) return 0;
    return 1;
}

// |a - b|, or |a| when b is NULL.
static double norm_diff(const double *a, const double *b, int m) {
    double s = 0;
    for (int t = 0; t < m; t++) {
        const double u = a[t] - (b ? b[t] : 0);
        s += u * u;
    }
    return sqrt(s);
}

static double rel_err(const double *a, const double *b, int m) { return norm_diff(a, b, m) / norm_diff(b, NULL, m); }

static int error_has(const char *word) { return strstr(ml_last_error(), word) != NULL; }

// ---------------------------------------------------------------- separation

typedef struct {
    int calls, last_iter;
    double first_kl, last_kl;
    int finite;
} Progress;

static void on_progress(int iter, int iters, double kl, void *user) {
    Progress *p = user;
    if (p->calls++ == 0) p->first_kl = kl;
    p->last_iter = iter;
    p->last_kl = kl;
    p->finite &= isfinite(kl) && iters > 0;
}

#define SEP_AGREE 0.95
#define SEP_RATIO 0.3

static void test_separation(void) {
    enum { NC = 4, PER = 50, N = NC * PER, D = 20 };
    static float X[N * D], Y[N * 2];
    static int labels[N];
    make_clusters(X, labels, NC, PER, D, 3.0, 11);
    const double thetas[2] = {0.5, 0.0};
    for (int k = 0; k < 2; k++) {
        TsneConfig c;
        tsne_default_config(&c);
        c.theta = thetas[k];
        Progress pr = {.finite = 1};
        c.progress = on_progress;
        c.progress_user = &pr;
        const double t0 = ml_now();
        ml_status st = tsne_run(X, N, D, &c, Y, NULL);
        const double dt = ml_now() - t0;
        check(st == ML_OK, "theta %.1f: tsne_run on 4 clusters x 50 in 20-D returns ML_OK", c.theta);
        const double agree = tsne_knn_agreement(Y, N, labels), ratio = spread_ratio(Y, labels, N, NC);
        printf("     theta %.1f: %.3f s, 1-NN agreement %.3f, intra/inter ratio %.3f, KL %.3f -> %.3f\n", c.theta, dt,
               agree, ratio, pr.first_kl, pr.last_kl);
        check(all_finite(Y, N), "theta %.1f: map is finite", c.theta);
        check(agree >= SEP_AGREE, "theta %.1f: 1-NN label agreement %.3f >= %.2f", c.theta, agree, SEP_AGREE);
        check(ratio < SEP_RATIO, "theta %.1f: intra-cluster / inter-centroid %.3f < %.2f", c.theta, ratio, SEP_RATIO);
        check(pr.calls == 20 && pr.last_iter == 1000 && pr.finite,
              "theta %.1f: progress called 20 times up to iteration 1000 with finite KL (%d, %d)", c.theta, pr.calls,
              pr.last_iter);
        check(pr.last_kl < pr.first_kl && pr.last_kl > 0 && pr.last_kl < 2.0, "theta %.1f: KL falls, to %.3f", c.theta,
              pr.last_kl);
    }

    // negative controls: the unmoved initial map and a random map fail both thresholds
    TsneConfig c;
    tsne_default_config(&c);
    c.iters = 0;
    check(tsne_run(X, N, D, &c, Y, NULL) == ML_OK, "iters = 0 returns the initial map");
    double agree = tsne_knn_agreement(Y, N, labels), ratio = spread_ratio(Y, labels, N, NC);
    check(agree < SEP_AGREE && ratio >= SEP_RATIO, "control: unmoved map fails both (agreement %.3f, ratio %.3f)",
          agree, ratio);
    Rng r;
    rng_seed(&r, 99);
    for (int t = 0; t < 2 * N; t++) Y[t] = rng_normal(&r);
    agree = tsne_knn_agreement(Y, N, labels);
    ratio = spread_ratio(Y, labels, N, NC);
    check(agree < SEP_AGREE && ratio >= SEP_RATIO, "control: random map fails both (agreement %.3f, ratio %.3f)", agree,
          ratio);
}

// ---------------------------------------------------------------- determinism

static void test_determinism(void) {
    enum { NC = 5, PER = 60, N = NC * PER, D = 80 };
    static float X[N * D], Y1[N * 2], Y2[N * 2], Y3[N * 2];
    static int labels[N];
    make_clusters(X, labels, NC, PER, D, 1.0, 21);
    TsneConfig c;
    tsne_default_config(&c);
    c.iters = quick ? 300 : 1000;
    c.seed = 7;
    tsne_run(X, N, D, &c, Y1, NULL);
    tsne_run(X, N, D, &c, Y2, NULL);
    check(memcmp(Y1, Y2, sizeof Y1) == 0, "same seed: bit-identical maps");
    c.seed = 8;
    tsne_run(X, N, D, &c, Y3, NULL);
    check(memcmp(Y1, Y3, sizeof Y1) != 0, "another seed: a different map");
    // thread count: with the PCA (d 80 > 50) and with the SGEMM neighbour ranking (PCA off)
    const int saved = omp_get_max_threads();
    for (int pca = 0; pca < 2; pca++) {
        c.seed = 7;
        c.pca_dims = pca ? 50 : 0;
        omp_set_num_threads(1);
        tsne_run(X, N, D, &c, Y1, NULL);
        omp_set_num_threads(2);
        tsne_run(X, N, D, &c, Y2, NULL);
        omp_set_num_threads(3);
        tsne_run(X, N, D, &c, Y3, NULL);
        omp_set_num_threads(saved);
        check(memcmp(Y1, Y2, sizeof Y1) == 0 && memcmp(Y1, Y3, sizeof Y1) == 0,
              "%s: bit-identical maps with 1, 2 and 3 threads", pca ? "PCA 80 -> 50" : "no PCA, d 80 (SGEMM ranking)");
    }
}

// ---------------------------------------------------------------- gradient

static void test_gradient(void) {
    enum { NC = 4, PER = 50, N = NC * PER, D = 20 };
    static float X[N * D], Yf[N * 2];
    static int labels[N];
    static double Y[N * 2], ge[N * 2], gb[N * 2], gt[N * 2], re[N * 2], rb[N * 2];
    make_clusters(X, labels, NC, PER, D, 3.0, 31);
    TsneConfig c;
    tsne_default_config(&c);
    TsneInput in;
    check(tsne_input_similarities(X, N, D, &c, &in) == ML_OK, "input similarities");

    // three maps: a t-SNE-like one (a short exact run), a random Gaussian one, and the latter
    // with coincident points
    c.theta = 0;
    c.iters = 300;
    tsne_run(X, N, D, &c, Yf, NULL);
    Rng r;
    rng_seed(&r, 5);
    for (int m = 0; m < 3; m++) {
        const char *name = m == 0 ? "t-SNE map" : m == 1 ? "random map" : "map with duplicates";
        for (int t = 0; t < 2 * N; t++) Y[t] = m == 0 ? Yf[t] : 5.0 * rng_normal(&r);
        if (m == 2) {
            for (int i = 1; i < 6; i++) { // points 0-5 coincide, and 100-101
                Y[2 * i] = Y[0];
                Y[2 * i + 1] = Y[1];
            }
            Y[202] = Y[200];
            Y[203] = Y[201];
        }
        // Errors are measured against the repulsive force (exaggeration 0 leaves only it): on a
        // converged map attraction and repulsion nearly cancel (there |grad| is ~5% of |rep|),
        // so the total gradient's own norm is no yardstick; on the random maps both are used.
        double kle, klb;
        tsne_gradient(&in.joint, Y, 0.0, 1.0, ge, &kle);
        tsne_gradient(&in.joint, Y, 0.5, 1.0, gb, &klb);
        tsne_gradient(&in.joint, Y, 0.0, 0.0, re, NULL);
        tsne_gradient(&in.joint, Y, 0.5, 0.0, rb, NULL);
        const double eb = norm_diff(gb, ge, 2 * N) / norm_diff(re, NULL, 2 * N);
        const double er = rel_err(rb, re, 2 * N), eg = rel_err(gb, ge, 2 * N);
        check(er < 0.03, "%s: Barnes-Hut (theta 0.5) repulsion within 3%% of exact: %.4f", name, er);
        check(eb < 0.03, "%s: Barnes-Hut gradient error / |repulsion| %.4f < 3%%", name, eb);
        if (m > 0) check(eg < 0.04, "%s: Barnes-Hut gradient within 4%% of exact: %.4f", name, eg);
        tsne_gradient(&in.joint, Y, 1e-9, 1.0, gt, NULL);
        const double et = rel_err(gt, ge, 2 * N);
        check(et < 1e-12, "%s: quadtree with theta 1e-9 equals exact: %.2e", name, et);
        check(fabs(klb - kle) < 0.005 * kle, "%s: KL estimate %.5f vs exact %.5f", name, klb, kle);
        tsne_gradient(&in.joint, Y, 0.2, 1.0, gt, NULL);
        const double e02 = rel_err(gt, ge, 2 * N);
        check(e02 < eg, "%s: theta 0.2 (%.4f) closer than 0.5 (%.4f)", name, e02, eg);

        // exact gradient = dKL/dy / 4 by central differences
        double worst = 0, scale = 0;
        for (int t = 0; t < 2 * N; t++) scale = fmax(scale, fabs(4 * ge[t]));
        for (int t = 0; t < 2 * N; t += 37) {
            const double y0 = Y[t], h = 1e-5;
            double kp, km;
            Y[t] = y0 + h;
            tsne_gradient(&in.joint, Y, 0.0, 1.0, gt, &kp);
            Y[t] = y0 - h;
            tsne_gradient(&in.joint, Y, 0.0, 1.0, gt, &km);
            Y[t] = y0;
            worst = fmax(worst, fabs((kp - km) / (2 * h) - 4 * ge[t]));
        }
        check(worst < 1e-5 * scale,
              "%s: exact gradient x 4 matches finite differences of KL "
              "(worst %.2e, scale %.2e)",
              name, worst, scale);
    }
    tsne_input_free(&in);
}

// ---------------------------------------------------------------- input similarities

static double row_entropy(const TsneSparse *s, int i) {
    double h = 0;
    for (int e = s->row[i]; e < s->row[i + 1]; e++)
        if (s->val[e] > 0) h -= s->val[e] * log(s->val[e]);
    return h;
}

static double lookup(const TsneSparse *s, int i, int j) {
    for (int e = s->row[i]; e < s->row[i + 1]; e++)
        if (s->col[e] == j) return s->val[e];
    return 0;
}

static void check_input(const TsneInput *in, int n, const char *name) {
    double worst_h = 0, worst_sum = 0, total = 0, asym = 0;
    int diag = 0, sorted = 1;
    for (int i = 0; i < n; i++) {
        worst_h = fmax(worst_h, fabs(row_entropy(&in->cond, i) - log(in->perplexity)));
        double s = 0;
        for (int e = in->cond.row[i]; e < in->cond.row[i + 1]; e++) s += in->cond.val[e];
        worst_sum = fmax(worst_sum, fabs(s - 1));
        for (int e = in->joint.row[i]; e < in->joint.row[i + 1]; e++) {
            const int j = in->joint.col[e];
            total += in->joint.val[e];
            diag += j == i;
            if (e > in->joint.row[i] && in->joint.col[e - 1] >= j) sorted = 0;
            asym = fmax(asym, fabs(in->joint.val[e] - lookup(&in->joint, j, i)));
        }
    }
    check(in->cond.row[n] == n * in->k, "%s: %d neighbours per row", name, in->k);
    check(worst_h < 1e-3, "%s: every row's entropy is log(perplexity %.4g) (worst %.2e)", name, in->perplexity,
          worst_h);
    check(worst_sum < 1e-12, "%s: conditional rows sum to 1 (worst %.1e)", name, worst_sum);
    check(fabs(total - 1) < 1e-12 && asym < 1e-18 && diag == 0 && sorted,
          "%s: joint P symmetric (%.1e), sums to 1 (%.15f), no diagonal, sorted columns", name, asym, total);
}

// Fraction of rows with the same neighbour list, and the largest difference of p_{j|i} on them.
static void compare_cond(const TsneInput *a, const TsneInput *b, int n, double *same_rows, double *max_diff) {
    int same = 0;
    *max_diff = 0;
    for (int i = 0; i < n; i++) {
        const int k = a->k, o = i * k;
        if (memcmp(a->cond.col + o, b->cond.col + o, sizeof(int) * k) != 0) continue;
        same++;
        for (int m = 0; m < k; m++) *max_diff = fmax(*max_diff, fabs(a->cond.val[o + m] - b->cond.val[o + m]));
    }
    *same_rows = (double)same / n;
}

static void test_similarities(void) {
    enum { N = 300, D = 10 };
    static float X[N * 200];
    Rng r;
    rng_seed(&r, 41);
    for (int t = 0; t < N * D; t++) X[t] = rng_normal(&r);
    const double perps[3] = {5, 30, 50};
    for (int k = 0; k < 3; k++) {
        TsneConfig c;
        tsne_default_config(&c);
        c.perplexity = perps[k];
        TsneInput in;
        char name[64];
        snprintf(name, sizeof name, "n %d, perplexity %g", N, perps[k]);
        check(tsne_input_similarities(X, N, D, &c, &in) == ML_OK, "%s: computed", name);
        check_input(&in, N, name);
        tsne_input_free(&in);
    }
    { // small n: perplexity clamped to (n - 1) / 3
        TsneConfig c;
        tsne_default_config(&c);
        TsneInput in;
        check(tsne_input_similarities(X, 10, D, &c, &in) == ML_OK && in.perplexity == 3.0 && in.k == 9,
              "n 10: perplexity 30 clamped to 3, 9 neighbours");
        check_input(&in, 10, "n 10");
        tsne_input_free(&in);
    }
    {   // SGEMM ranking (d > 64, PCA off): the same data padded with zero features gives the same
        // neighbours and P (to rounding: the vectorised distance sum fuses different terms)
        static float Xp[N * 100];
        memset(Xp, 0, sizeof Xp);
        for (int i = 0; i < N; i++) memcpy(Xp + i * 100, X + i * D, sizeof(float) * D);
        TsneConfig c;
        tsne_default_config(&c);
        c.pca_dims = 0;
        TsneInput a, b;
        tsne_input_similarities(X, N, D, &c, &a);
        tsne_input_similarities(Xp, N, 100, &c, &b);
        double same, diff;
        compare_cond(&a, &b, N, &same, &diff);
        check(same >= 0.99 && diff < 1e-12,
              "SGEMM ranking: %.1f%% of rows with the direct "
              "path's neighbours, P equal (%.1e)",
              100 * same, diff);
        tsne_input_free(&a);
        tsne_input_free(&b);
    }
    // PCA: data of rank 10 (plus 1e-3 noise) in d dims; the P after PCA to 20 dims matches the P
    // without PCA (up to the calibration tolerance; the scale differs). d 200: subspace iteration;
    // d 30: the full eigendecomposition.
    const int dims[2] = {200, 30};
    for (int k = 0; k < 2; k++) {
        const int d = dims[k];
        double *R = malloc(sizeof(double) * 10 * d);
        for (int t = 0; t < 10 * d; t++) R[t] = rng_normal(&r);
        for (int i = 0; i < N; i++) {
            double z[10];
            for (int a = 0; a < 10; a++) z[a] = rng_normal(&r) * (1.0 + a);
            for (int t = 0; t < d; t++) {
                double s = 1e-3 * rng_normal(&r);
                for (int a = 0; a < 10; a++) s += z[a] * R[a * d + t];
                X[(size_t)i * d + t] = (float)s;
            }
        }
        free(R);
        TsneConfig c;
        tsne_default_config(&c);
        TsneInput a, b;
        c.pca_dims = 20;
        tsne_input_similarities(X, N, d, &c, &a);
        c.pca_dims = 0;
        tsne_input_similarities(X, N, d, &c, &b);
        double same, diff;
        compare_cond(&a, &b, N, &same, &diff);
        check(same >= 0.97 && diff < 1e-3,
              "PCA %d -> 20 dims: %.1f%% of rows with the same "
              "neighbours, P within %.1e",
              d, 100 * same, diff);
        check_input(&a, N, "after PCA");
        tsne_input_free(&a);
        tsne_input_free(&b);
    }
}

// ---------------------------------------------------------------- edge cases

static int cancel_at;
static volatile int cancel_flag;

static void cancel_progress(int iter, int iters, double kl, void *user) {
    if (iter >= cancel_at) cancel_flag = 1;
}

static void test_edges(void) {
    enum { N = 100, D = 8 };
    static float X[N * D], Y[N * 2];
    static int labels[N];
    make_clusters(X, labels, 2, N / 2, D, 3.0, 51);
    TsneConfig c;
    tsne_default_config(&c);
    if (quick) c.iters = 300;

    for (int t = 0; t < 2 * N; t++) Y[t] = 12345.0f;
    ml_status st = tsne_run(X, 3, D, &c, Y, NULL);
    check(st == ML_ERR_ARG && error_has("at least 4"), "n 3: ML_ERR_ARG, \"%s\"", ml_last_error());
    check(Y[0] == 12345.0f, "n 3: output untouched");
    X[7 * D + 3] = NAN;
    st = tsne_run(X, N, D, &c, Y, NULL);
    check(st == ML_ERR_NUMERIC && error_has("point 7, feature 3"),
          "NaN input: ML_ERR_NUMERIC, "
          "\"%s\"",
          ml_last_error());
    X[7 * D + 3] = INFINITY;
    st = tsne_run(X, N, D, &c, Y, NULL);
    check(st == ML_ERR_NUMERIC, "inf input: ML_ERR_NUMERIC");
    X[7 * D + 3] = 0;
    c.dims_out = 3;
    st = tsne_run(X, N, D, &c, Y, NULL);
    check(st == ML_ERR_ARG && error_has("2 output"), "dims_out 3: \"%s\"", ml_last_error());
    c.dims_out = 2;
    c.perplexity = 0;
    check(tsne_run(X, N, D, &c, Y, NULL) == ML_ERR_ARG, "perplexity 0: ML_ERR_ARG");
    c.perplexity = 30;
    check(Y[0] == 12345.0f, "output untouched after the errors");

    // all points identical, then 40 of 100 identical: finite maps (both gradients)
    static float S[N * D];
    for (int t = 0; t < N * D; t++) S[t] = 0.25f;
    for (int th = 0; th < 2; th++) {
        c.theta = th ? 0.5 : 0.0;
        st = tsne_run(S, N, D, &c, Y, NULL);
        check(st == ML_OK && all_finite(Y, N), "theta %.1f: all points identical: finite map", c.theta);
        memcpy(S, X, sizeof S);
        for (int i = 1; i < 40; i++) memcpy(S + i * D, S, sizeof(float) * D);
        st = tsne_run(S, N, D, &c, Y, NULL);
        check(st == ML_OK && all_finite(Y, N), "theta %.1f: 40 duplicates: finite map", c.theta);
        for (int t = 0; t < N * D; t++) S[t] = 0.25f;
    }
    c.theta = 0.5;
    st = tsne_run(X, 4, D, &c, Y, NULL);
    check(st == ML_OK && all_finite(Y, 4), "n 4 runs (perplexity clamped to 1)");

    // cancellation: from the progress callback at iteration 100, and before the start
    c.iters = 1000;
    c.progress = cancel_progress;
    cancel_at = 100;
    cancel_flag = 0;
    st = tsne_run(X, N, D, &c, Y, &cancel_flag);
    check(st == ML_ERR_STATE && error_has("cancelled after 100 of 1000"), "cancel at 100: \"%s\"", ml_last_error());
    check(all_finite(Y, N), "cancelled run leaves a finite map");
    cancel_flag = 1;
    st = tsne_run(X, N, D, &c, Y, &cancel_flag);
    check(st == ML_ERR_STATE && error_has("after 0 of"), "cancel before the start: \"%s\"", ml_last_error());

    // the agreement figure by hand
    const float Yh[8] = {0, 0, 0, 1, 10, 0, 10, 1};
    const int l1[4] = {0, 0, 1, 1}, l2[4] = {0, 1, 0, 1}, l3[4] = {0, 0, 0, 1};
    check(tsne_knn_agreement(Yh, 4, l1) == 1.0 && tsne_knn_agreement(Yh, 4, l2) == 0.0 &&
              tsne_knn_agreement(Yh, 4, l3) == 0.5 && isnan(tsne_knn_agreement(Yh, 1, l1)),
          "knn agreement: 1, 0, 0.5 on hand-made maps, NaN for one point");
}

// ---------------------------------------------------------------- size

static void test_large(void) {
    enum { D = 64, NMAX = 2000 };
    static float X[NMAX * D], Y[NMAX * 2];
    static int labels[NMAX];
    const int ns[2] = {1000, 2000};
    for (int k = 0; k < 2; k++) {
        const int n = ns[k];
        make_clusters(X, labels, 10, n / 10, D, 0.6, 61);
        TsneConfig c;
        tsne_default_config(&c);
        TsneInput in;
        double t0 = ml_now();
        tsne_input_similarities(X, n, D, &c, &in);
        const double tp = ml_now() - t0;
        tsne_input_free(&in);
        t0 = ml_now();
        ml_status st = tsne_run(X, n, D, &c, Y, NULL);
        const double dt = ml_now() - t0;
        printf("     n %d, d %d, %d threads: %.2f s (input similarities %.2f s), 1-NN agreement "
               "%.3f\n",
               n, D, omp_get_max_threads(), dt, tp, tsne_knn_agreement(Y, n, labels));
        check(st == ML_OK && all_finite(Y, n), "n %d, d 64: completes with a finite map", n);
    }
}

int main(void) {
    quick = getenv("MOELAB_QUICK") != NULL;
    test_separation();
    test_determinism();
    test_gradient();
    test_similarities();
    test_edges();
    if (!quick) test_large();
    printf("%d checks, %d failed\n", n_checks, n_failed);
    return n_failed ? 1 : 0;
}
