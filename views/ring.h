/* ring.h — fixed-capacity histories for the views (README "Layout"): memory is set at init and
 * never grows during a run.
 *
 * Ring:   the last `cap` values (the oldest is overwritten), for sparklines.
 * Series: the WHOLE history of (x, y[dim]) points in at most `cap` stored points. Each stored
 *         point is the mean of `stride` consecutive raw points; when the store is full, adjacent
 *         pairs are merged (means of means of equal weight) and the stride doubles, so a long run
 *         is decimated into a coarser series instead of reallocating. Raw points that do not yet
 *         fill a stride wait in a pending accumulator, exposed as the last point. */
#ifndef ML_VIEWS_RING_H
#define ML_VIEWS_RING_H

typedef struct {
    double *v;
    int cap;  /* values held at most */
    int n;    /* values held */
    int head; /* slot of the next push */
} Ring;

int ring_init(Ring *r, int cap); /* 0, or -1 if out of memory */
void ring_free(Ring *r);
void ring_clear(Ring *r);
void ring_push(Ring *r, double v);
/* i-th value, 0 = oldest held. */
double ring_get(const Ring *r, int i);
/* The most recent value (NaN when empty). */
double ring_last(const Ring *r);
/* Min and max of the last `last` values (all when last <= 0); non-finite values skipped.
 * Returns how many finite values were seen. */
int ring_minmax(const Ring *r, int last, double *lo, double *hi);

typedef struct {
    int cap;     /* stored points at most (even, >= 2) */
    int dim;     /* y values per point */
    int n;       /* complete stored points */
    long stride; /* raw points per stored point (a power of two) */
    double *x;   /* (cap) */
    double *y;   /* (cap, dim) */
    double px;   /* pending sums and count */
    double *py;  /* (dim) */
    long pn;
    long total; /* raw points pushed */
} Series;

int series_init(Series *s, int cap, int dim); /* 0, or -1 (bad size, out of memory) */
void series_free(Series *s);
void series_clear(Series *s);
/* Adds one raw point (y has dim values). */
void series_push(Series *s, double x, const double *y);
/* Points available, the pending partial one included. */
int series_count(const Series *s);
double series_x(const Series *s, int i);
double series_y(const Series *s, int i, int j);
/* Min / max of y[j] over all points (non-finite skipped); returns the number of finite ones. */
int series_minmax(const Series *s, int j, double *lo, double *hi);
/* Resamples y[j] onto ncols columns covering x in [x0, x1): out[c] = mean of the points whose x
 * falls in column c, NaN for a column with no point (callers may carry the previous value). */
void series_resample(const Series *s, int j, double x0, double x1, int ncols, double *out);

#endif
