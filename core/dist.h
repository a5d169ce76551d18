/* dist.h — one run on several processes (data parallelism): the collectives the trainer needs,
 * as a table of functions. core/ makes no MPI call; app/run/dist.c implements this table with MPI
 * when moelab is started under mpirun or srun. Without it Trainer.comm is NULL and nothing here
 * is called: the single-process path is the one it always was.
 *
 * Every call is collective: each rank makes it at the same point of the same step with the same
 * sizes. Results are identical on every rank, bit for bit: sums are taken in rank order (0, 1, ...,
 * N-1) by the implementation, never by a reduction tree whose shape MPI may choose per message
 * size, so the same N and seed give the same weights on every rerun. */
#ifndef ML_DIST_H
#define ML_DIST_H

#include <stdlib.h>

typedef struct TrainComm {
    int rank, size; /* this process, and how many train the run */
    void *ctx;
    /* v[0..n) = the sum over ranks of every rank's v, added in rank order (doubles: integer
     * counts up to 2^53 stay exact). */
    void (*sum)(void *ctx, double *v, long n);
    /* bytes from rank 0 to every rank */
    void (*bcast)(void *ctx, void *buf, long bytes);
    /* The gradient of one step, bucketed and overlapped with the backward pass:
     * grad_begin before the backward (grad: the n floats of Model.grad); grad_ready each time the
     * backward has finished grad[off, off+n) (a bucket whose floats are all ready starts its
     * exchange at once, and every call lets the exchanges in flight progress); grad_end after the
     * backward: every bucket is exchanged and grad holds the mean over ranks. A range never
     * reported is exchanged by grad_end. */
    void (*grad_begin)(void *ctx, float *grad, long n);
    void (*grad_ready)(void *ctx, long off, long n);
    void (*grad_end)(void *ctx);
    /* every rank's `bytes` bytes, in rank order, into all (size * bytes) on rank 0 */
    void (*gather)(void *ctx, const void *mine, void *all, long bytes);
    /* rank 0's all (size * bytes): rank r receives part r into mine */
    void (*scatter)(void *ctx, const void *all, void *mine, long bytes);
} TrainComm;

/* A vector of doubles summed over ranks in one call: add values in the same order on every rank,
 * sum, then read them back in that order. Zero-initialise; dist_pack_free when done. */
typedef struct {
    double *v;
    long n, r, cap;
    int overflow; /* out of memory: the pack is incomplete */
    int pad_;
} DistPack;

static inline void dist_put(DistPack *p, double x) {
    if (p->n == p->cap) {
        const long cap = p->cap ? 2 * p->cap : 256;
        double *v = (double *)realloc(p->v, sizeof(double) * (size_t)cap);
        if (!v) {
            p->overflow = 1;
            return;
        }
        p->v = v;
        p->cap = cap;
    }
    p->v[p->n++] = x;
}
static inline double dist_get(DistPack *p) { return p->r < p->n ? p->v[p->r++] : 0.0; }
static inline void dist_pack_free(DistPack *p) {
    free(p->v);
    p->v = NULL;
    p->n = p->r = p->cap = 0;
}

#endif
