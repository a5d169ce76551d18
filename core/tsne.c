/* tsne.c — Barnes-Hut t-SNE; see tsne.h for the algorithm and its conventions.
 *
 * Sections: configuration and validation; input preparation (centring, PCA, scaling); nearest
 * neighbours and input similarities; the quadtree and the gradient; the optimiser; the
 * agreement figure.
 *
 * Threading: every parallel loop runs over points and writes only that point's outputs (its
 * neighbour list, its row of P, its force and its share of Z and KL); the sums over points are
 * then taken serially in index order, so results do not depend on the number of threads.
 * Allocation happens before the parallel regions (per-thread scratch is indexed by thread id). */
#include "tsne.h"

#include "rng.h" // provides: Rng, rng_seed, rng_normal

#include <cblas.h>
#include <float.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#define TSNE_MAX_DEPTH 50    // quadtree depth cap: points closer than 2^-50 of the map share a leaf
#define TSNE_GEMM_MIN_DIM 64 // rank neighbours with SGEMM blocks above this working dimension
#define TSNE_PCA_ITERS 30    // subspace iterations for the PCA
#define TSNE_BLAS_ROWS 64    // rows per BLAS call (see dgemm_rows_)
#define TSNE_PAR_MIN 256     // fewer points: the gradient runs on one thread

// ---------------------------------------------------------------- configuration and validation

void tsne_default_config(TsneConfig *c) {
    memset(c, 0, sizeof *c);
    c->dims_out = 2;
    c->perplexity = 30.0;
    c->theta = 0.5;
    c->iters = 1000;
    c->exaggeration_iters = 250;
    c->early_exaggeration = 12.0;
    c->learning_rate = 0.0;
    c->seed = 1;
    c->pca_dims = 50;
    c->progress = NULL;
    c->progress_user = NULL;
    c->progress_every = 50;
}

// The perplexity actually used and the neighbour count it implies.
static void effective_perplexity_(int n, double perplexity, double *perp, int *k) {
    double p = perplexity;
    if (p > (n - 1) / 3.0) p = (n - 1) / 3.0;
    int kk = (int)floor(3.0 * p);
    if (kk > n - 1) kk = n - 1;
    if (kk < 1) kk = 1;
    *perp = p;
    *k = kk;
}

static ml_status check_args_(const float *X, int n, int d, const TsneConfig *c) {
    if (!X || !c) return ml_fail(ML_ERR_ARG, "tsne: NULL input or configuration");
    if (n < 4) return ml_fail(ML_ERR_ARG, "tsne: needs at least 4 points (got %d)", n);
    if (d < 1) return ml_fail(ML_ERR_ARG, "tsne: points need at least 1 dimension (got %d)", d);
    if (c->dims_out != 2)
        return ml_fail(ML_ERR_ARG, "tsne: only 2 output dimensions are supported (got %d)", c->dims_out);
    if (!(c->perplexity > 0) || !isfinite(c->perplexity))
        return ml_fail(ML_ERR_ARG, "tsne: perplexity must be positive (got %g)", c->perplexity);
    if (!(c->theta >= 0) || !isfinite(c->theta))
        return ml_fail(ML_ERR_ARG, "tsne: theta must be >= 0 (got %g; 0 = exact gradient)", c->theta);
    if (c->iters < 0 || c->exaggeration_iters < 0)
        return ml_fail(ML_ERR_ARG, "tsne: iteration counts must be >= 0 (got %d and %d)", c->iters,
                       c->exaggeration_iters);
    if (!(c->early_exaggeration > 0) || !isfinite(c->early_exaggeration))
        return ml_fail(ML_ERR_ARG, "tsne: early exaggeration must be positive (got %g)", c->early_exaggeration);
    if (!(c->learning_rate >= 0) || !isfinite(c->learning_rate))
        return ml_fail(ML_ERR_ARG, "tsne: learning rate must be >= 0 (got %g; 0 = automatic)", c->learning_rate);
    if (c->pca_dims < 0) return ml_fail(ML_ERR_ARG, "tsne: pca_dims must be >= 0 (got %d; 0 = no PCA)", c->pca_dims);
    if (c->progress && c->progress_every < 1)
        return ml_fail(ML_ERR_ARG, "tsne: progress_every must be >= 1 (got %d)", c->progress_every);
    double perp;
    int k;
    effective_perplexity_(n, c->perplexity, &perp, &k);
    if ((int64_t)2 * n * k + 1 > INT32_MAX)
        return ml_fail(ML_ERR_ARG, "tsne: too many points (%d) for perplexity %g", n, perp);
    const size_t total = (size_t)n * (size_t)d;
    for (size_t t = 0; t < total; t++)
        if (!isfinite(X[t]))
            return ml_fail(ML_ERR_NUMERIC, "tsne: input value of point %zu, feature %zu is not finite (%g)",
                           t / (size_t)d, t % (size_t)d, (double)X[t]);
    return ML_OK;
}

// ---------------------------------------------------------------- input preparation

// C (m, nn) = op(A) op(B), cut into fixed blocks of TSNE_BLAS_ROWS rows of C, one BLAS call per
// block from inside our own parallel loop (where OpenBLAS runs single-threaded). OpenBLAS's own
// threading can change the rounding with the thread count (seen with dgemm 300 x 50 x 80 on
// 1 vs 2 threads); the blocks depend only on m, so these results do not.
static void dgemm_rows_(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int m, int nn, int kk, const double *A, int lda,
                        const double *B, int ldb, double *C, int ldc) {
    const int nblk = (m + TSNE_BLAS_ROWS - 1) / TSNE_BLAS_ROWS;
#pragma omp parallel for schedule(dynamic, 1)
    for (int b = 0; b < nblk; b++) {
        const int r0 = b * TSNE_BLAS_ROWS;
        const int rows = m - r0 < TSNE_BLAS_ROWS ? m - r0 : TSNE_BLAS_ROWS;
        const double *Ab = ta == CblasNoTrans ? A + (size_t)r0 * lda : A + r0;
        cblas_dgemm(CblasRowMajor, ta, tb, rows, nn, kk, 1.0, Ab, lda, B, ldb, 0.0, C + (size_t)r0 * ldc, ldc);
    }
}

// Orthonormalises the l rows of V (l, d), l <= d, by modified Gram-Schmidt applied twice; a row
// that has (numerically) no component outside the earlier rows is replaced by a random vector.
static void orthonormalise_rows_(double *V, int l, int d, Rng *r) {
    for (int i = 0; i < l; i++) {
        double *v = V + (size_t)i * d;
        for (int attempt = 0;; attempt++) {
            ML_ASSERT(attempt < 100);
            double n0 = 0;
            for (int t = 0; t < d; t++) n0 += v[t] * v[t];
            for (int pass = 0; pass < 2; pass++)
                for (int j = 0; j < i; j++) {
                    const double *u = V + (size_t)j * d;
                    double dot = 0;
                    for (int t = 0; t < d; t++) dot += v[t] * u[t];
                    for (int t = 0; t < d; t++) v[t] -= dot * u[t];
                }
            double n1 = 0;
            for (int t = 0; t < d; t++) n1 += v[t] * v[t];
            if (n1 > 0 && n1 > 1e-20 * n0) {
                const double s = 1.0 / sqrt(n1);
                for (int t = 0; t < d; t++) v[t] *= s;
                break;
            }
            for (int t = 0; t < d; t++) v[t] = rng_normal(r);
        }
    }
}

// Cyclic Jacobi eigendecomposition of the symmetric A (m, m), which is destroyed:
// A = S diag(ev) S^T, eigenvectors in the columns of S (m, m).
static void jacobi_eigen_(double *A, int m, double *ev, double *S) {
    for (int i = 0; i < m; i++)
        for (int j = 0; j < m; j++) S[i * m + j] = i == j ? 1.0 : 0.0;
    for (int sweep = 0; sweep < 100; sweep++) {
        double off = 0, all = 0;
        for (int p = 0; p < m; p++)
            for (int q = 0; q < m; q++) {
                all += A[p * m + q] * A[p * m + q];
                if (p != q) off += A[p * m + q] * A[p * m + q];
            }
        if (off <= 1e-30 * all) break;
        for (int p = 0; p < m - 1; p++)
            for (int q = p + 1; q < m; q++) {
                const double apq = A[p * m + q];
                if (apq == 0) continue;
                const double th = (A[q * m + q] - A[p * m + p]) / (2 * apq);
                const double t = (th >= 0 ? 1.0 : -1.0) / (fabs(th) + sqrt(th * th + 1));
                const double c = 1 / sqrt(t * t + 1), s = t * c;
                for (int k = 0; k < m; k++) { // columns p, q
                    const double akp = A[k * m + p], akq = A[k * m + q];
                    A[k * m + p] = c * akp - s * akq;
                    A[k * m + q] = s * akp + c * akq;
                }
                for (int k = 0; k < m; k++) { // rows p, q
                    const double apk = A[p * m + k], aqk = A[q * m + k];
                    A[p * m + k] = c * apk - s * aqk;
                    A[q * m + k] = s * apk + c * aqk;
                }
                for (int k = 0; k < m; k++) {
                    const double skp = S[k * m + p], skq = S[k * m + q];
                    S[k * m + p] = c * skp - s * skq;
                    S[k * m + q] = s * skp + c * skq;
                }
            }
    }
    for (int i = 0; i < m; i++) ev[i] = A[i * m + i];
}

// Projects the centred A (n, d) onto its top k principal directions: out (n, k). The top
// subspace of C = A^T A comes from subspace iteration with l = min(d, 2k) vectors, then a
// Rayleigh-Ritz step; only the subspace matters to t-SNE (distances are rotation invariant).
static ml_status pca_(const double *A, int n, int d, int k, double *out) {
    const int l = 2 * k < d ? 2 * k : d;
    double *C = ml_alloc(sizeof(double) * (size_t)d * d);
    double *V = ml_alloc(sizeof(double) * (size_t)l * d); // basis, one vector per row
    double *W = ml_alloc(sizeof(double) * (size_t)l * d);
    double *T = ml_alloc(sizeof(double) * (size_t)l * l);
    double *S = ml_alloc(sizeof(double) * (size_t)l * l);
    double *ev = ml_alloc(sizeof(double) * (size_t)l);
    double *U = ml_alloc(sizeof(double) * (size_t)k * d); // top directions, one per row
    int *order = ml_alloc(sizeof(int) * (size_t)l);
    ml_status st = ML_OK;
    if (!C || !V || !W || !T || !S || !ev || !U || !order) {
        st = ml_fail(ML_ERR_NOMEM, "tsne: out of memory for the PCA (%d dims)", d);
        goto done;
    }
    dgemm_rows_(CblasTrans, CblasNoTrans, d, d, n, A, d, A, d, C, d);
    for (int a = 0; a < d; a++) // exactly symmetric
        for (int b = a + 1; b < d; b++) C[b * d + a] = C[a * d + b];
    Rng r;
    rng_seed(&r, 0x7473656e6570ca01ULL);
    for (size_t t = 0; t < (size_t)l * d; t++) V[t] = rng_normal(&r);
    orthonormalise_rows_(V, l, d, &r);
    const int iters = l == d ? 0 : TSNE_PCA_ITERS; // l == d: V already spans everything
    for (int it = 0; it < iters; it++) {
        // W^T = (C V^T)^T = V C (C symmetric)
        dgemm_rows_(CblasNoTrans, CblasNoTrans, l, d, d, V, d, C, d, W, d);
        orthonormalise_rows_(W, l, d, &r);
        double *sw = V;
        V = W;
        W = sw;
    }
    dgemm_rows_(CblasNoTrans, CblasNoTrans, l, d, d, V, d, C, d, W, d);
    dgemm_rows_(CblasNoTrans, CblasTrans, l, l, d, W, d, V, d, T, l);
    for (int a = 0; a < l; a++) // symmetrise away rounding before Jacobi
        for (int b = a + 1; b < l; b++) T[a * l + b] = T[b * l + a] = 0.5 * (T[a * l + b] + T[b * l + a]);
    jacobi_eigen_(T, l, ev, S);
    for (int i = 0; i < l; i++) order[i] = i;
    for (int i = 1; i < l; i++) { // insertion sort by decreasing eigenvalue, ties by index
        const int o = order[i];
        int j = i - 1;
        while (j >= 0 && ev[order[j]] < ev[o]) {
            order[j + 1] = order[j];
            j--;
        }
        order[j + 1] = o;
    }
    for (int c = 0; c < k; c++) {
        double *u = U + (size_t)c * d;
        for (int m = 0; m < l; m++) {
            const double s = S[m * l + order[c]];
            const double *v = V + (size_t)m * d;
            for (int t = 0; t < d; t++) u[t] += s * v[t];
        }
    }
    dgemm_rows_(CblasNoTrans, CblasTrans, n, k, d, A, d, U, d, out, k);
done:
    ml_free(C);
    ml_free(V);
    ml_free(W);
    ml_free(T);
    ml_free(S);
    ml_free(ev);
    ml_free(U);
    ml_free(order);
    return st;
}

// The working copy of X: centred, optionally reduced by PCA, scaled by its largest absolute
// value. *out (n, *dw) is ml_alloc'd.
static ml_status prepare_(const float *X, int n, int d, int pca_dims, double **out, int *dw) {
    double *A = ml_alloc(sizeof(double) * (size_t)n * d);
    double *mean = ml_alloc(sizeof(double) * (size_t)d);
    if (!A || !mean) {
        ml_free(A);
        ml_free(mean);
        return ml_fail(ML_ERR_NOMEM, "tsne: out of memory for a copy of the input (%d x %d)", n, d);
    }
    for (int i = 0; i < n; i++)
        for (int j = 0; j < d; j++) mean[j] += X[(size_t)i * d + j];
    for (int j = 0; j < d; j++) mean[j] /= n;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < d; j++) A[(size_t)i * d + j] = X[(size_t)i * d + j] - mean[j];
    ml_free(mean);
    int w = d;
    if (pca_dims > 0 && d > pca_dims) {
        double *B = ml_alloc(sizeof(double) * (size_t)n * pca_dims);
        if (!B) {
            ml_free(A);
            return ml_fail(ML_ERR_NOMEM, "tsne: out of memory for the PCA output");
        }
        ml_status st = pca_(A, n, d, pca_dims, B);
        ml_free(A);
        if (st != ML_OK) {
            ml_free(B);
            return st;
        }
        A = B;
        w = pca_dims;
    }
    const size_t total = (size_t)n * w;
    double mx = 0;
    for (size_t t = 0; t < total; t++) mx = fmax(mx, fabs(A[t]));
    if (mx > 0)
        for (size_t t = 0; t < total; t++) A[t] /= mx;
    *out = A;
    *dw = w;
    return ML_OK;
}

// ---------------------------------------------------------------- neighbours and similarities

typedef struct {
    double d; // squared distance
    int j;    // point index
} Nb;

static int nb_less_(Nb a, Nb b) { return a.d < b.d || (a.d == b.d && a.j < b.j); }

// Offers x to the max-heap h of the (at most k) smallest seen so far.
static void heap_offer_(Nb *h, int *size, int k, Nb x) {
    int i;
    if (*size < k) {
        i = (*size)++;
        while (i > 0 && nb_less_(h[(i - 1) / 2], x)) {
            h[i] = h[(i - 1) / 2];
            i = (i - 1) / 2;
        }
        h[i] = x;
        return;
    }
    if (!nb_less_(x, h[0])) return;
    i = 0;
    for (;;) {
        int c = 2 * i + 1;
        if (c >= k) break;
        if (c + 1 < k && nb_less_(h[c], h[c + 1])) c++;
        if (!nb_less_(x, h[c])) break;
        h[i] = h[c];
        i = c;
    }
    h[i] = x;
}

// Sorts a few entries ascending (insertion sort: k is small and the order is total).
static void nb_sort_(Nb *a, int k) {
    for (int i = 1; i < k; i++) {
        const Nb x = a[i];
        int j = i - 1;
        while (j >= 0 && nb_less_(x, a[j])) {
            a[j + 1] = a[j];
            j--;
        }
        a[j + 1] = x;
    }
}

static double dist2_(const double *a, const double *b, int d) {
    double s = 0;
    for (int t = 0; t < d; t++) {
        const double u = a[t] - b[t];
        s += u * u;
    }
    return s;
}

// The k nearest neighbours of every point of A (n, d) by exact squared distance: nbr (n, k) and
// dist (n, k), each row by increasing distance (ties by index).
static ml_status knn_(const double *A, int n, int d, int k, int *nbr, double *dist) {
    const int nt = omp_get_max_threads();
    Nb *heaps = ml_alloc(sizeof(Nb) * (size_t)k * nt);
    if (!heaps) return ml_fail(ML_ERR_NOMEM, "tsne: out of memory for the neighbour search");
    if (d <= TSNE_GEMM_MIN_DIM) {
#pragma omp parallel for schedule(dynamic, 16)
        for (int i = 0; i < n; i++) {
            Nb *h = heaps + (size_t)k * omp_get_thread_num();
            int size = 0;
            const double *a = A + (size_t)i * d;
            for (int j = 0; j < n; j++)
                if (j != i) heap_offer_(h, &size, k, (Nb){dist2_(a, A + (size_t)j * d, d), j});
            nb_sort_(h, k);
            for (int m = 0; m < k; m++) {
                nbr[(size_t)i * k + m] = h[m].j;
                dist[(size_t)i * k + m] = h[m].d;
            }
        }
        ml_free(heaps);
        return ML_OK;
    }
    // Large d: rank by |a|^2 + |b|^2 - 2 a.b from SGEMM blocks of TSNE_BLAS_ROWS rows (one
    // single-threaded call per block inside our parallel loop, as in dgemm_rows_), then recompute
    // the kept distances exactly and re-sort them.
    float *F = ml_alloc(sizeof(float) * (size_t)n * d);
    float *G = ml_alloc(sizeof(float) * (size_t)TSNE_BLAS_ROWS * n * nt); // per thread
    double *sq = ml_alloc(sizeof(double) * (size_t)n);
    if (!F || !G || !sq) {
        ml_free(heaps);
        ml_free(F);
        ml_free(G);
        ml_free(sq);
        return ml_fail(ML_ERR_NOMEM, "tsne: out of memory for the neighbour search");
    }
    for (int i = 0; i < n; i++) {
        double s = 0;
        for (int t = 0; t < d; t++) {
            F[(size_t)i * d + t] = (float)A[(size_t)i * d + t];
            s += (double)F[(size_t)i * d + t] * F[(size_t)i * d + t];
        }
        sq[i] = s;
    }
    const int nblk = (n + TSNE_BLAS_ROWS - 1) / TSNE_BLAS_ROWS;
#pragma omp parallel for schedule(dynamic, 1)
    for (int blk = 0; blk < nblk; blk++) {
        const int tid = omp_get_thread_num(), i0 = blk * TSNE_BLAS_ROWS;
        const int b = n - i0 < TSNE_BLAS_ROWS ? n - i0 : TSNE_BLAS_ROWS;
        float *g = G + (size_t)TSNE_BLAS_ROWS * n * tid;
        Nb *h = heaps + (size_t)k * tid;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, b, n, d, 1.0f, F + (size_t)i0 * d, d, F, d, 0.0f, g, n);
        for (int r = 0; r < b; r++) {
            const int i = i0 + r;
            const float *gr = g + (size_t)r * n;
            int size = 0;
            for (int j = 0; j < n; j++)
                if (j != i) heap_offer_(h, &size, k, (Nb){sq[i] + sq[j] - 2.0 * gr[j], j});
            for (int m = 0; m < k; m++) h[m].d = dist2_(A + (size_t)i * d, A + (size_t)h[m].j * d, d);
            nb_sort_(h, k);
            for (int m = 0; m < k; m++) {
                nbr[(size_t)i * k + m] = h[m].j;
                dist[(size_t)i * k + m] = h[m].d;
            }
        }
    }
    ml_free(heaps);
    ml_free(F);
    ml_free(G);
    ml_free(sq);
    return ML_OK;
}

// Gaussian conditional probabilities p (k) over squared distances D (k, ascending) with the
// precision found by binary search so that the entropy is log_perp (to 1e-5, at most 200 steps).
// Distances are shifted by D[0] (so exp never underflows for all of them); duplicates (D = 0)
// are ordinary values.
static void calibrate_row_(const double *D, int k, double log_perp, double *p) {
    double beta = 1.0, lo = 0.0, hi = INFINITY;
    for (int it = 0; it < 200; it++) {
        double sum = 0, sdp = 0;
        for (int m = 0; m < k; m++) {
            const double s = D[m] - D[0];
            p[m] = exp(-beta * s);
            sum += p[m];
            sdp += s * p[m];
        }
        const double h = log(sum) + beta * sdp / sum;
        const double diff = h - log_perp;
        if (fabs(diff) < 1e-5) break;
        if (diff > 0) { // too flat: sharpen
            lo = beta;
            beta = isinf(hi) ? beta * 2 : 0.5 * (beta + hi);
        } else {
            hi = beta;
            beta = 0.5 * (beta + lo);
        }
    }
    double sum = 0;
    for (int m = 0; m < k; m++) {
        p[m] = exp(-beta * (D[m] - D[0]));
        sum += p[m];
    }
    for (int m = 0; m < k; m++) p[m] /= sum;
}

static int col_cmp_(const void *a, const void *b) {
    const int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

typedef struct {
    int col;
    double val;
} Entry;

static void sparse_free_(TsneSparse *s) {
    ml_free(s->row);
    ml_free(s->col);
    ml_free(s->val);
    memset(s, 0, sizeof *s);
}

// joint = (cond + cond^T) / sum: each pair appears at most twice (once per direction), so the
// merged value does not depend on the order of the two terms.
static ml_status symmetrise_(const TsneSparse *cond, TsneSparse *joint) {
    const int n = cond->n;
    int *cnt = ml_alloc(sizeof(int) * (size_t)(n + 1));
    Entry *tmp = ml_alloc(sizeof(Entry) * (size_t)2 * cond->row[n]);
    joint->n = n;
    joint->row = ml_alloc(sizeof(int) * (size_t)(n + 1));
    if (!cnt || !tmp || !joint->row) {
        ml_free(cnt);
        ml_free(tmp);
        sparse_free_(joint);
        return ml_fail(ML_ERR_NOMEM, "tsne: out of memory for P");
    }
    for (int i = 0; i < n; i++)
        for (int e = cond->row[i]; e < cond->row[i + 1]; e++) {
            cnt[i + 1]++;
            cnt[cond->col[e] + 1]++;
        }
    for (int i = 0; i < n; i++) cnt[i + 1] += cnt[i];
    int *fill = joint->row; // used as insertion cursors, rebuilt below
    memcpy(fill, cnt, sizeof(int) * (size_t)(n + 1));
    for (int i = 0; i < n; i++)
        for (int e = cond->row[i]; e < cond->row[i + 1]; e++) {
            const int j = cond->col[e];
            tmp[fill[i]++] = (Entry){j, cond->val[e]};
            tmp[fill[j]++] = (Entry){i, cond->val[e]};
        }
// sort each row by column, merge the pairs, count the merged lengths
#pragma omp parallel for schedule(dynamic, 64)
    for (int i = 0; i < n; i++) {
        Entry *r = tmp + cnt[i];
        const int len = cnt[i + 1] - cnt[i];
        qsort(r, (size_t)len, sizeof(Entry), col_cmp_);
        int w = 0;
        for (int e = 0; e < len; e++) {
            if (w > 0 && r[w - 1].col == r[e].col) r[w - 1].val += r[e].val;
            else r[w++] = r[e];
        }
        fill[i] = w;
    }
    int nnz = 0;
    for (int i = 0; i < n; i++) nnz += fill[i];
    joint->col = ml_alloc(sizeof(int) * (size_t)nnz);
    joint->val = ml_alloc(sizeof(double) * (size_t)nnz);
    if (!joint->col || !joint->val) {
        ml_free(cnt);
        ml_free(tmp);
        sparse_free_(joint);
        return ml_fail(ML_ERR_NOMEM, "tsne: out of memory for P");
    }
    double total = 0;
    int at = 0;
    for (int i = 0; i < n; i++) {
        const int len = fill[i];
        for (int e = 0; e < len; e++) {
            joint->col[at + e] = tmp[cnt[i] + e].col;
            joint->val[at + e] = tmp[cnt[i] + e].val;
            total += tmp[cnt[i] + e].val;
        }
        joint->row[i] = at;
        at += len;
    }
    joint->row[n] = at;
    for (int e = 0; e < nnz; e++) joint->val[e] /= total;
    ml_free(cnt);
    ml_free(tmp);
    return ML_OK;
}

static ml_status input_similarities_(const float *X, int n, int d, const TsneConfig *cfg, TsneInput *out) {
    memset(out, 0, sizeof *out);
    effective_perplexity_(n, cfg->perplexity, &out->perplexity, &out->k);
    const int k = out->k;
    double *A = NULL;
    int dw = 0;
    ml_status st = prepare_(X, n, d, cfg->pca_dims, &A, &dw);
    if (st != ML_OK) return st;
    double *dist = ml_alloc(sizeof(double) * (size_t)n * k);
    TsneSparse *c = &out->cond;
    c->n = n;
    c->row = ml_alloc(sizeof(int) * (size_t)(n + 1));
    c->col = ml_alloc(sizeof(int) * (size_t)n * k);
    c->val = ml_alloc(sizeof(double) * (size_t)n * k);
    if (!dist || !c->row || !c->col || !c->val) {
        st = ml_fail(ML_ERR_NOMEM, "tsne: out of memory for %d x %d neighbours", n, k);
        goto fail;
    }
    st = knn_(A, n, dw, k, c->col, dist);
    if (st != ML_OK) goto fail;
    for (int i = 0; i <= n; i++) c->row[i] = i * k;
    const double log_perp = log(out->perplexity);
#pragma omp parallel for schedule(dynamic, 32)
    for (int i = 0; i < n; i++) calibrate_row_(dist + (size_t)i * k, k, log_perp, c->val + (size_t)i * k);
    st = symmetrise_(c, &out->joint);
    if (st != ML_OK) goto fail;
    ml_free(A);
    ml_free(dist);
    return ML_OK;
fail:
    ml_free(A);
    ml_free(dist);
    tsne_input_free(out);
    return st;
}

ml_status tsne_input_similarities(const float *X, int n, int d, const TsneConfig *cfg, TsneInput *out) {
    if (!out) return ml_fail(ML_ERR_ARG, "tsne: NULL output");
    memset(out, 0, sizeof *out);
    ml_status st = check_args_(X, n, d, cfg);
    if (st != ML_OK) return st;
    return input_similarities_(X, n, d, cfg, out);
}

void tsne_input_free(TsneInput *in) {
    if (!in) return;
    sparse_free_(&in->cond);
    sparse_free_(&in->joint);
}

// ---------------------------------------------------------------- quadtree and gradient

typedef struct {
    double cx, cy, hw; // box centre and half-width
    double sx, sy;     // sums of the coordinates of the points below (centre of mass = s / count)
    int count;         // points below
    int child;         // first of the 4 children (quadrant = (x >= cx) + 2 (y >= cy)), -1: leaf
    int point;         // leaf: one of its points, -1 if empty. A leaf holds one point, or several
                       // at the same place (or closer than the depth cap resolves)
} QNode;

// The traversal view of a node (32 bytes; children stay consecutive).
typedef struct {
    double mx, my; // centre of mass
    double side2;  // squared side of the box, (2 hw)^2
    int count;     // points below
    int child;     // as in QNode
} QCell;

typedef struct {
    int n;
    QNode *nodes; // (cap) grown by doubling, reused across iterations
    QCell *cells; // (cap) filled from nodes after each build
    int cap, used;
    double *pos, *neg; // (n, 2) attractive and repulsive forces
    double *z, *kl;    // (n) per-point shares of Z and of sum P log(P / q)
} Work;

static void work_free_(Work *w) {
    free(w->nodes);
    free(w->cells);
    ml_free(w->pos);
    ml_free(w->neg);
    ml_free(w->z);
    ml_free(w->kl);
    memset(w, 0, sizeof *w);
}

static ml_status work_init_(Work *w, int n) {
    memset(w, 0, sizeof *w);
    w->n = n;
    w->pos = ml_alloc(sizeof(double) * (size_t)n * 2);
    w->neg = ml_alloc(sizeof(double) * (size_t)n * 2);
    w->z = ml_alloc(sizeof(double) * (size_t)n);
    w->kl = ml_alloc(sizeof(double) * (size_t)n);
    if (!w->pos || !w->neg || !w->z || !w->kl) {
        work_free_(w);
        return ml_fail(ML_ERR_NOMEM, "tsne: out of memory for the gradient of %d points", n);
    }
    return ML_OK;
}

static inline int quadrant_(const QNode *q, double x, double y) { return (x >= q->cx) + 2 * (y >= q->cy); }

// Appends 4 empty children of node nd; returns the first one's index, -1 on OOM.
static int tree_split_(Work *w, int nd) {
    if (w->used + 4 > w->cap) {
        const int cap = w->cap * 2 > w->used + 4 ? w->cap * 2 : w->used + 64;
        QNode *nn = realloc(w->nodes, sizeof(QNode) * (size_t)cap);
        if (!nn) return -1;
        w->nodes = nn;
        QCell *nc = realloc(w->cells, sizeof(QCell) * (size_t)cap);
        if (!nc) return -1;
        w->cells = nc;
        w->cap = cap;
    }
    const QNode *q = &w->nodes[nd];
    const double h = 0.5 * q->hw;
    const int first = w->used;
    for (int c = 0; c < 4; c++)
        w->nodes[first + c] = (QNode){
            .cx = q->cx + ((c & 1) ? h : -h), .cy = q->cy + ((c & 2) ? h : -h), .hw = h, .child = -1, .point = -1};
    w->used += 4;
    return first;
}

static ml_status tree_build_(Work *w, const double *Y, int n) {
    double x0 = Y[0], x1 = Y[0], y0 = Y[1], y1 = Y[1];
    for (int i = 1; i < n; i++) {
        x0 = fmin(x0, Y[2 * i]);
        x1 = fmax(x1, Y[2 * i]);
        y0 = fmin(y0, Y[2 * i + 1]);
        y1 = fmax(y1, Y[2 * i + 1]);
    }
    const double hw = 0.5 * fmax(x1 - x0, y1 - y0) * (1 + 1e-9) + 1e-12;
    w->used = 0;
    if (w->cap < 1) {
        w->nodes = malloc(sizeof(QNode) * 1024);
        w->cells = malloc(sizeof(QCell) * 1024);
        if (!w->nodes || !w->cells) return ml_fail(ML_ERR_NOMEM, "tsne: out of memory for the quadtree");
        w->cap = 1024;
    }
    w->nodes[0] = (QNode){.cx = 0.5 * (x0 + x1), .cy = 0.5 * (y0 + y1), .hw = hw, .child = -1, .point = -1};
    w->used = 1;
    for (int p = 0; p < n; p++) {
        const double x = Y[2 * p], y = Y[2 * p + 1];
        int nd = 0;
        for (int depth = 0;; depth++) {
            QNode *q = &w->nodes[nd];
            q->sx += x;
            q->sy += y;
            q->count++;
            if (q->child >= 0) {
                nd = q->child + quadrant_(q, x, y);
                continue;
            }
            if (q->point < 0) {
                q->point = p;
                break;
            }
            const int o = q->point;
            const double ox = Y[2 * o], oy = Y[2 * o + 1];
            if ((ox == x && oy == y) || depth >= TSNE_MAX_DEPTH) break; // shares the leaf
            // split: the leaf's points (all at (ox, oy)) move down, then p goes on down
            const int first = tree_split_(w, nd);
            if (first < 0) return ml_fail(ML_ERR_NOMEM, "tsne: out of memory for the quadtree");
            q = &w->nodes[nd];
            QNode *oc = &w->nodes[first + quadrant_(q, ox, oy)];
            oc->sx = q->sx - x;
            oc->sy = q->sy - y;
            oc->count = q->count - 1;
            oc->point = o;
            q->child = first;
            q->point = -1;
            nd = first + quadrant_(q, x, y);
        }
    }
    for (int t = 0; t < w->used; t++) {
        const QNode *q = &w->nodes[t];
        const double c = q->count > 0 ? q->count : 1;
        w->cells[t] =
            (QCell){.mx = q->sx / c, .my = q->sy / c, .side2 = 4 * q->hw * q->hw, .count = q->count, .child = q->child};
    }
    return ML_OK;
}

// Barnes-Hut repulsion on point i: f (2) = sum_j q_ij^2 (y_i - y_j), *z = sum_j q_ij (j != i).
// A cell is summarised by its centre of mass when its side / distance < theta (the full side, as
// openTSNE and scikit-learn; bhtsne's code compares half the side, i.e. its theta t is our 2t).
// Cells on the point's own path are always opened, and its own leaf excludes the point itself.
static void repulse_bh_(const QNode *nodes, const QCell *cells, const double *Y, int i, double theta2, double *f,
                        double *z) {
    const double x = Y[2 * i], y = Y[2 * i + 1];
    int stack[8 * (TSNE_MAX_DEPTH + 2)];
    int sp = 0;
    double fx = 0, fy = 0, zs = 0;
    // the point's own path: stack the other children of every cell on it, then its leaf, where
    // the point itself is taken out (the others there coincide with it or are below the cap)
    int nd = 0;
    while (cells[nd].child >= 0) {
        const int c0 = cells[nd].child, mine = quadrant_(&nodes[nd], x, y);
        for (int c = 3; c >= 0; c--)
            if (c != mine && cells[c0 + c].count > 0) stack[sp++] = c0 + c;
        nd = c0 + mine;
    }
    if (nodes[nd].count > 1) {
        const double cnt = nodes[nd].count - 1;
        const double dx = x - (nodes[nd].sx - x) / cnt, dy = y - (nodes[nd].sy - y) / cnt;
        const double qv = 1.0 / (1.0 + dx * dx + dy * dy), m = cnt * qv;
        zs += m;
        fx += m * qv * dx;
        fy += m * qv * dy;
    }
    while (sp > 0) {
        const QCell *q = &cells[stack[--sp]];
        const double dx = x - q->mx, dy = y - q->my, d2 = dx * dx + dy * dy;
        if (q->child < 0 || q->side2 < theta2 * d2) {
            const double qv = 1.0 / (1.0 + d2), m = q->count * qv;
            zs += m;
            fx += m * qv * dx;
            fy += m * qv * dy;
            continue;
        }
        for (int c = 3; c >= 0; c--)
            if (cells[q->child + c].count > 0) stack[sp++] = q->child + c;
    }
    f[0] = fx;
    f[1] = fy;
    *z = zs;
}

static void repulse_exact_(const double *Y, int n, int i, double *f, double *z) {
    const double x = Y[2 * i], y = Y[2 * i + 1];
    double fx = 0, fy = 0, zs = 0;
    for (int j = 0; j < n; j++) {
        if (j == i) continue;
        const double dx = x - Y[2 * j], dy = y - Y[2 * j + 1];
        const double qv = 1.0 / (1.0 + dx * dx + dy * dy);
        zs += qv;
        fx += qv * qv * dx;
        fy += qv * qv * dy;
    }
    f[0] = fx;
    f[1] = fy;
    *z = zs;
}

// The gradient (see tsne_gradient) with a reusable workspace.
static ml_status gradient_(Work *w, const TsneSparse *P, const double *Y, double theta, double exaggeration,
                           double *grad, double *kl) {
    const int n = P->n;
    if (theta > 0) {
        ml_status st = tree_build_(w, Y, n);
        if (st != ML_OK) return st;
    }
    const QNode *nodes = w->nodes;
    const double theta2 = theta * theta;
    const int want_kl = kl != NULL;
// below TSNE_PAR_MIN points an iteration is too short to share (and idle OpenMP threads spin
// at the barrier, which costs a lot when the cores are also busy training)
#pragma omp parallel for schedule(dynamic, 32) if (n >= TSNE_PAR_MIN)
    for (int i = 0; i < n; i++) {
        const double x = Y[2 * i], y = Y[2 * i + 1];
        double fx = 0, fy = 0, s = 0;
        for (int e = P->row[i]; e < P->row[i + 1]; e++) {
            const int j = P->col[e];
            const double dx = x - Y[2 * j], dy = y - Y[2 * j + 1];
            const double qv = 1.0 / (1.0 + dx * dx + dy * dy), pq = P->val[e] * qv;
            fx += pq * dx;
            fy += pq * dy;
            if (want_kl && P->val[e] > 0) s += P->val[e] * log(P->val[e] / qv);
        }
        w->pos[2 * i] = exaggeration * fx;
        w->pos[2 * i + 1] = exaggeration * fy;
        w->kl[i] = s;
        if (theta > 0) repulse_bh_(nodes, w->cells, Y, i, theta2, w->neg + 2 * i, w->z + i);
        else repulse_exact_(Y, n, i, w->neg + 2 * i, w->z + i);
    }
    double z = 0, sp = 0;
    for (int i = 0; i < n; i++) z += w->z[i];
    for (int t = 0; t < 2 * n; t++) grad[t] = w->pos[t] - w->neg[t] / z;
    if (want_kl) {
        double psum = 0;
        for (int i = 0; i < n; i++) sp += w->kl[i];
        for (int e = 0; e < P->row[n]; e++) psum += P->val[e];
        *kl = sp + psum * log(z);
    }
    return ML_OK;
}

ml_status tsne_gradient(const TsneSparse *P, const double *Y, double theta, double exaggeration, double *grad,
                        double *kl) {
    if (!P || !Y || !grad || P->n < 2)
        return ml_fail(ML_ERR_ARG, "tsne_gradient: needs P with at least 2 points, Y and grad");
    if (!(theta >= 0) || !isfinite(theta))
        return ml_fail(ML_ERR_ARG, "tsne_gradient: theta must be >= 0 (got %g)", theta);
    Work w;
    ml_status st = work_init_(&w, P->n);
    if (st != ML_OK) return st;
    st = gradient_(&w, P, Y, theta, exaggeration, grad, kl);
    work_free_(&w);
    return st;
}

// ---------------------------------------------------------------- optimiser

static void centre_(double *Y, int n) {
    double mx = 0, my = 0;
    for (int i = 0; i < n; i++) {
        mx += Y[2 * i];
        my += Y[2 * i + 1];
    }
    mx /= n;
    my /= n;
    for (int i = 0; i < n; i++) {
        Y[2 * i] -= mx;
        Y[2 * i + 1] -= my;
    }
}

static ml_status optimise_(const TsneSparse *P, const TsneConfig *cfg, double *Y, volatile int *cancel) {
    const int n = P->n, iters = cfg->iters;
    Rng r;
    rng_seed(&r, cfg->seed);
    for (int t = 0; t < 2 * n; t++) Y[t] = 1e-4 * rng_normal(&r);
    centre_(Y, n);
    Work w;
    ml_status st = work_init_(&w, n);
    if (st != ML_OK) return st;
    double *grad = ml_alloc(sizeof(double) * (size_t)n * 2);
    double *upd = ml_alloc(sizeof(double) * (size_t)n * 2);
    double *gain = ml_alloc(sizeof(double) * (size_t)n * 2);
    if (!grad || !upd || !gain) {
        st = ml_fail(ML_ERR_NOMEM, "tsne: out of memory for the optimiser");
        goto done;
    }
    for (int t = 0; t < 2 * n; t++) gain[t] = 1.0;
    const double lr = cfg->learning_rate > 0 ? cfg->learning_rate : fmax(n / cfg->early_exaggeration, 50.0);
    for (int it = 0; it < iters; it++) {
        if (cancel && *cancel) {
            st = ml_fail(ML_ERR_STATE, "tsne: cancelled after %d of %d iterations", it, iters);
            goto done;
        }
        const int early = it < cfg->exaggeration_iters;
        const double exag = early ? cfg->early_exaggeration : 1.0, mom = early ? 0.5 : 0.8;
        const int report = cfg->progress && ((it + 1) % cfg->progress_every == 0 || it + 1 == iters);
        double kl = 0;
        st = gradient_(&w, P, Y, cfg->theta, exag, grad, report ? &kl : NULL);
        if (st != ML_OK) goto done;
        for (int t = 0; t < 2 * n; t++) {
            const double g = grad[t];
            if (!isfinite(g)) {
                st = ml_fail(ML_ERR_NUMERIC,
                             "tsne: the gradient became non-finite (%g) at "
                             "iteration %d; try a smaller learning rate",
                             g, it);
                goto done;
            }
            const int same = (g > 0) == (upd[t] > 0) && (g < 0) == (upd[t] < 0);
            gain[t] = same ? gain[t] * 0.8 : gain[t] + 0.2;
            if (gain[t] < 0.01) gain[t] = 0.01;
            upd[t] = mom * upd[t] - lr * gain[t] * g;
            Y[t] += upd[t];
        }
        centre_(Y, n);
        if (report) cfg->progress(it + 1, iters, kl, cfg->progress_user);
    }
done:
    work_free_(&w);
    ml_free(grad);
    ml_free(upd);
    ml_free(gain);
    return st;
}

ml_status tsne_run(const float *X, int n, int d, const TsneConfig *cfg, float *Y, volatile int *cancel) {
    ml_status st = check_args_(X, n, d, cfg);
    if (st != ML_OK) return st;
    if (!Y) return ml_fail(ML_ERR_ARG, "tsne: NULL output");
    TsneInput in;
    st = input_similarities_(X, n, d, cfg, &in);
    if (st != ML_OK) return st;
    double *Yd = ml_alloc(sizeof(double) * (size_t)n * 2);
    if (!Yd) {
        tsne_input_free(&in);
        return ml_fail(ML_ERR_NOMEM, "tsne: out of memory for the map");
    }
    st = optimise_(&in.joint, cfg, Yd, cancel);
    if (st == ML_OK || st == ML_ERR_STATE)
        for (int t = 0; t < 2 * n; t++) Y[t] = (float)Yd[t];
    ml_free(Yd);
    tsne_input_free(&in);
    return st;
}

// ---------------------------------------------------------------- agreement

double tsne_knn_agreement(const float *Y, int n, const int *labels) {
    if (!Y || !labels || n < 2) return NAN;
    int agree = 0;
#pragma omp parallel for schedule(dynamic, 64) reduction(+ : agree)
    for (int i = 0; i < n; i++) {
        double best = INFINITY;
        int bj = -1;
        for (int j = 0; j < n; j++) {
            if (j == i) continue;
            const double dx = (double)Y[2 * i] - Y[2 * j], dy = (double)Y[2 * i + 1] - Y[2 * j + 1];
            const double d2 = dx * dx + dy * dy;
            if (d2 < best) {
                best = d2;
                bj = j;
            }
        }
        agree += bj >= 0 && labels[bj] == labels[i];
    }
    return (double)agree / n;
}
