/* tsne.h — Barnes-Hut t-SNE (van der Maaten 2014, "Accelerating t-SNE using tree-based
 * algorithms"; the reference bhtsne), for 2-D maps of activations, expert embeddings and the like.
 *
 * Pipeline of tsne_run:
 *   1. the input (n, d) is centred; if pca_dims > 0 and d > pca_dims it is projected onto its top
 *      pca_dims principal directions (subspace iteration + Rayleigh-Ritz on the covariance); then
 *      it is scaled by its largest absolute value (as bhtsne does);
 *   2. input similarities: the k = floor(3 perplexity) exact nearest neighbours of every point
 *      (brute force; ranked by an SGEMM of row blocks when the working dimension exceeds 64, the
 *      kept distances recomputed exactly in double), Gaussian p_{j|i} with a per-point binary
 *      search on the precision so that the entropy of row i is log(perplexity) (natural log, to
 *      1e-5), then P = (p_{j|i} + p_{i|j}) / 2n (sparse, symmetric, sums to 1);
 *   3. gradient descent on KL(P || Q), Q the Student-t (1 degree of freedom) similarities of the
 *      map: attractive forces over the nonzeros of P, repulsive forces by a Barnes-Hut quadtree
 *      with opening angle theta (a cell of side s whose centre of mass is at distance D from the
 *      point is summarised when s / D < theta, the full side as in openTSNE and scikit-learn;
 *      bhtsne's code compares half the side, so its theta t matches our 2t; cells that contain
 *      the point are always opened), or by the exact O(n^2) sum when theta == 0;
 *      delta-bar-delta gains (+0.2 / x0.8, at least 0.01);
 *      momentum 0.5 then 0.8 and early exaggeration (12) for the first 250 iterations; the map is
 *      re-centred after each step. The gradient omits the constant factor 4 of dKL/dy (bhtsne,
 *      FIt-SNE, openTSNE convention), and the automatic learning rate is
 *      max(n / early_exaggeration, 50) for the whole run (Belkina et al. 2019; openTSNE's rule
 *      in its exaggeration phase).
 *
 * Duplicate input points (zero distances) and identical map points are handled without NaN: the
 * quadtree keeps coincident points in one leaf, and a point never repels itself.
 *
 * Determinism: the result depends only on the input, the configuration and the seed, not on the
 * number of OpenMP threads. Per-point work is split over threads but every sum is taken in a
 * fixed order (no racy or thread-order accumulation); the quadtree is built serially; BLAS is
 * called single-threaded on fixed blocks of rows (OpenBLAS's own threading can change rounding
 * with the thread count).
 *
 * Speed (2 vCPU AMD EPYC, otherwise idle, gcc -O3 -march=native, default configuration, 1000
 * iterations, 10 Gaussian clusters in 64 dims; wall clock): n = 1000: 0.8-0.9 s; n = 2000:
 * 1.9-2.3 s (3.0 s on one thread). Of these the input similarities (PCA 64 -> 50, neighbours, P)
 * take 0.05 s and 0.14 s; the rest is the Barnes-Hut repulsion. With the cores busy elsewhere
 * (e.g. a training run) OpenMP threads wait for each other and the time can double or worse.
 *
 * Cost: neighbours by brute force, O(n^2 d') with d' the dimension after PCA (meant for n up to
 * a few 10^4); the PCA forms the d x d covariance, O(n d^2 + 30 (2 pca_dims) d^2) (meant for d up
 * to ~1000); each iteration O(n log n) with Barnes-Hut, O(n^2) exact.
 *
 * Layouts: X is (n, d) row-major float; Y is (n, 2) row-major float (internally double). */
#ifndef ML_TSNE_H
#define ML_TSNE_H

#include "core/common.h" // provides: ml_status, ml_fail

#include <stdint.h>

/* Called every `progress_every` iterations and after the last one, with the iteration count done
 * so far and the KL divergence of the current map (estimated with the same theta as the gradient;
 * with early exaggeration still on, it is the KL of the unexaggerated P). */
typedef void (*tsne_progress_fn)(int iter, int iters, double kl, void *user);

typedef struct {
    int dims_out;              // 2 (the only supported value)
    double perplexity;         // 30; clamped to (n - 1) / 3 for small n
    double theta;              // Barnes-Hut opening angle, 0.5; 0 = exact O(n^2) gradient
    int iters;                 // 1000 gradient steps
    int exaggeration_iters;    // 250: early exaggeration and momentum 0.5 up to here, then 0.8
    double early_exaggeration; // 12
    double learning_rate;      // 0 = automatic: max(n / early_exaggeration, 50)
    uint64_t seed;             // initial map ~ N(0, (1e-4)^2) per coordinate, from this seed
    int pca_dims;              // 50: PCA to this many dims first if d > pca_dims; 0 = off
    tsne_progress_fn progress; // NULL = none
    void *progress_user;       // passed to progress
    int progress_every;        // 50
} TsneConfig;

/* Fills the defaults listed above. */
void tsne_default_config(TsneConfig *c);

/* Embeds the n points of X (n, d) into Y (n, 2). `cancel` may be NULL; when it becomes nonzero
 * (checked once per iteration, e.g. set by another thread or by the progress callback) the run
 * stops, Y receives the current (centred, finite) map and ML_ERR_STATE is returned with the
 * message "tsne: cancelled after I of N iterations".
 * Errors (with an ml_fail message): ML_ERR_ARG for n < 4, d < 1 or a bad configuration,
 * ML_ERR_NUMERIC for a non-finite input value, ML_ERR_NOMEM. Y is untouched on these errors.
 * Memory: O(n k) for P plus O(n) for the map and the tree (the exact gradient allocates nothing
 * quadratic); the input copy is O(n d). */
ml_status tsne_run(const float *X, int n, int d, const TsneConfig *cfg, float *Y, volatile int *cancel);

/* Fraction of points whose nearest other point in the map Y (n, 2) has the same label (ties go to
 * the lowest index). A simple quality figure for labelled data; NaN if n < 2. O(n^2). */
double tsne_knn_agreement(const float *Y, int n, const int *labels);

/* ---- internals, exposed for tests and diagnostics */

/* Sparse n x n matrix in compressed rows. */
typedef struct {
    int n;
    int *row;    // (n + 1) offsets into col / val
    int *col;    // (nnz) column indices
    double *val; // (nnz)
} TsneSparse;

typedef struct {
    double perplexity; // the perplexity used (after clamping)
    int k;             // neighbours per point, floor(3 perplexity), at most n - 1
    TsneSparse cond;   // p_{j|i}: k entries per row by increasing distance; rows sum to 1
    TsneSparse joint;  // P = (p_{j|i} + p_{i|j}) / 2n: symmetric, columns increasing, sums to 1
} TsneInput;

/* Steps 1-2 of tsne_run (same validation and errors). Free with tsne_input_free. */
ml_status tsne_input_similarities(const float *X, int n, int d, const TsneConfig *cfg, TsneInput *out);
void tsne_input_free(TsneInput *in);

/* The gradient used by tsne_run at the map Y (n, 2, double): grad (n, 2) receives
 * sum_j exaggeration P_ij q_ij (y_i - y_j) - sum_j q_ij^2 (y_i - y_j) / Z, q_ij = 1/(1 + |y_i - y_j|^2),
 * Z = sum_{k != l} q_kl, i.e. dKL/dy / 4 at exaggeration 1; the repulsive part by Barnes-Hut with
 * `theta`, or exactly when theta == 0. If kl is not NULL it receives KL(P || Q) (Z estimated the
 * same way). P must be symmetric with a zero diagonal (as TsneInput.joint). */
ml_status tsne_gradient(const TsneSparse *P, const double *Y, double theta, double exaggeration, double *grad,
                        double *kl);

#endif
