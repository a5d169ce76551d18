/* dist.c — data parallelism over MPI (dist.h): core/dist.h's TrainComm, the start-up handshake and
 * the hooks that keep every rank's loop in step with rank 0's.
 *
 * Reproducibility: every sum is an allgather followed by an addition in rank order (0, 1, ..., N-1)
 * done the same way on every rank, so the same N and seed give the same bits on every rerun, on any
 * network, whatever algorithm Open MPI would pick for an MPI_Allreduce of that size. For N = 2 this
 * moves exactly what a ring allreduce moves (each rank sends its gradient once); for larger N an
 * allgather moves (N-1)/N * N = N-1 gradients per rank instead of a ring's 2(N-1)/N, which is the
 * price of the fixed order (README, "One run on many machines"). */
#include "app/run/dist.h"

#include <errno.h>
#include <signal.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "app/cli/commands.h"
#include "core/common.h"
#include "datasets/dataset.h"

#ifdef MOELAB_HAVE_MPI
#include <mpi.h>

/* 1 MiB of gradient per exchange (MOELAB_DIST_BUCKET=FLOATS: the tests use small ones, so that a
 * model of a few thousand weights is exchanged in many buckets) */
static long BUCKET_FLOATS = 1 << 18;

typedef struct {
    long off, n, ready;
    int state; /* 0 waiting for the backward, 1 first exchange in flight, 2 second (rsag), 3 done */
    int pad_;
    double t_start;
    MPI_Request req;
    int *cnt, *displ;   /* rsag: the floats of each rank's slice of the bucket, and where it starts */
    int *rcnt, *rdispl; /* rsag: what this rank receives from each (its own slice's size, packed) */
} Bucket;

/* How a bucket's mean is made, both in rank order, so both give the same bits:
 *   ALGO_ALLGATHER: every rank receives every rank's bucket and adds them (each rank sends its
 *     bucket to N-1 others: 4 n (N-1) bytes; one exchange; the default for 2 ranks, where it moves
 *     what a ring allreduce moves);
 *   ALGO_RSAG: a reduce-scatter of our own (alltoall: rank r receives slice r of every rank's
 *     bucket and adds them in rank order) then an allgather of the summed slices: 8 n (N-1)/N
 *     bytes, a ring allreduce's volume; the default for more than 2 ranks.
 * MOELAB_DIST_ALGO=allgather|rsag overrides (the tests check both give the same weights). */
enum { ALGO_ALLGATHER, ALGO_RSAG };

static struct {
    int on, rank, size;
    int options_sent, start_sent; /* rank 0: the handshake so far */
    TrainComm comm;
    /* the gradient exchange */
    float *grad;
    long n;
    Bucket *b;
    int nb;
    float *recv; /* (size * n) */
    int no_overlap;
    int algo;
    MPI_Comm comm_a, comm_b; /* the buckets' first and second exchanges (each in the same order on
                              * every rank; the blocking sums and broadcasts stay on MPI_COMM_WORLD) */
    int *order, nstarted, nextb; /* buckets in the order their first exchange started */
    int *cd;                     /* (nb, 4 size) the buckets' cnt, displ, rcnt, rdispl */
    double t_end_bwd, step_wait;
    double *sumbuf; /* c_sum's gathered vectors, kept across calls */
    long sumcap;
    /* totals */
    double wait_s, span_s, hidden_s, bytes;
    long steps;
    /* rank 0: the wrapped hooks */
    TrainHooks inner;
    /* every rank's pid and machine (dist_init), to tell which rank died while this one waits */
    struct Peer {
        long pid;
        char host[64];
    } *peers;
    double next_watch;
    int lost_seen; /* a follower saw a rank other than 0 die: rank 0 reports it, this one waits */
    const Trainer *trainer; /* the step a death is reported at */
    DistLostFn lost_fn;
    void *lost_user;
} D;

/* MOELAB_DIST_GRAD_DUMP=FILE: rank 0 writes the first step's mean gradient (raw floats) to FILE, and
 * mpirun -np 1 takes the data-parallel code path too: the reference the tests compare N ranks with */
static const char *grad_dump(void) {
    const char *f = getenv("MOELAB_DIST_GRAD_DUMP");
    return f && f[0] ? f : NULL;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Whether rank r's process is gone: only a rank on this machine can be told (its pid no longer
 * exists, or is a zombie mpirun has not reaped yet); a rank elsewhere is never called gone. */
static int peer_gone(int r) {
    if (!D.peers || r == D.rank || strcmp(D.peers[r].host, D.peers[D.rank].host)) return 0;
    const pid_t pid = (pid_t)D.peers[r].pid;
    if (kill(pid, 0) != 0) return errno == ESRCH;
    char path[64], buf[256];
    snprintf(path, sizeof path, "/proc/%ld/stat", (long)pid);
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    const size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    const char *e = strrchr(buf, ')'); /* "pid (comm) S ...": the state after the command's name */
    return e && e[1] == ' ' && (e[2] == 'Z' || e[2] == 'X');
}

/* A rank died while this one waits for it in an exchange that can now never end (mpirun then
 * kills the job within a second): rank 0 records which rank and at which step in the session
 * (dist_on_rank_lost) and exits; a follower reports rank 0's death (nobody else can); a follower
 * that sees another rank gone leaves the report to rank 0 and waits for mpirun. */
static void watch_peers(double now) {
    if (!D.peers || D.lost_seen || now < D.next_watch) return;
    D.next_watch = now + 0.05;
    int first = -1, n = 0;
    for (int r = 0; r < D.size; r++)
        if (peer_gone(r)) {
            if (first < 0) first = r;
            n++;
        }
    if (first < 0) return;
    const long step = D.trainer ? D.trainer->step : 0;
    if (D.rank != 0 && (first != 0 || n > 1)) { /* rank 0 alive (or gone after reporting it): its report */
        D.lost_seen = 1;
        return;
    }
    char text[256];
    snprintf(text, sizeof text, "rank %d (pid %ld on %s) died at step %ld", first, D.peers[first].pid,
             D.peers[first].host, step);
    if (D.rank == 0 && D.lost_fn) D.lost_fn(text, step, D.lost_user);
    else if (D.rank == 0)
        fprintf(stderr, "moelab train: %s, before the run started: the job ends\n", text);
    else
        fprintf(stderr, "moelab train: rank %d: %s: it wrote the session, which stays as it left it; the job ends\n",
                D.rank, text);
    fflush(stdout);
    fflush(stderr);
    _exit(1);
}

/* Waits for a request; a follower waiting for rank 0 (which may be paused for hours) sleeps between
 * tests instead of spinning a core, and every rank watches for a dead rank (watch_peers). */
static void wait_req(MPI_Request *r) {
    int flag = 0;
    const double t0 = now_s();
    for (;;) {
        MPI_Test(r, &flag, MPI_STATUS_IGNORE);
        if (flag) return;
        const double t = now_s();
        if (t - t0 > 0.005) {
            watch_peers(t);
            const struct timespec ms = {0, 1000000};
            nanosleep(&ms, NULL);
        }
    }
}

static void bcast_bytes(void *buf, long bytes) {
    char *p = buf;
    while (bytes > 0) {
        const int n = bytes > (1L << 30) ? (1 << 30) : (int)bytes;
        MPI_Request r;
        MPI_Ibcast(p, n, MPI_BYTE, 0, MPI_COMM_WORLD, &r);
        wait_req(&r);
        p += n;
        bytes -= n;
    }
}

static void c_bcast(void *ctx, void *buf, long bytes) {
    (void)ctx;
    bcast_bytes(buf, bytes);
}

static void c_sum(void *ctx, double *v, long n) {
    (void)ctx;
    if (n < 1) return;
    const double t0 = now_s();
    if (n * D.size > D.sumcap) { /* grows to the largest sum once (a step's, an evaluation's) */
        free(D.sumbuf);
        D.sumcap = n * D.size;
        D.sumbuf = malloc(sizeof(double) * (size_t)D.sumcap);
        if (!D.sumbuf) {
            fprintf(stderr, "moelab train: rank %d: out of memory in a sum over ranks\n", D.rank);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
    }
    double *all = D.sumbuf;
    MPI_Request req; /* non-blocking, so that a dead rank is noticed (wait_req) */
    MPI_Iallgather(v, (int)n, MPI_DOUBLE, all, (int)n, MPI_DOUBLE, MPI_COMM_WORLD, &req);
    wait_req(&req);
    for (long i = 0; i < n; i++) {
        double s = all[i];
        for (int r = 1; r < D.size; r++) s += all[(size_t)r * n + i];
        v[i] = s;
    }
    D.bytes += 8.0 * n * (D.size - 1);
    D.step_wait += now_s() - t0;
}

static void c_gather(void *ctx, const void *mine, void *all, long bytes) {
    (void)ctx;
    MPI_Request req;
    MPI_Igather(mine, (int)bytes, MPI_BYTE, all, (int)bytes, MPI_BYTE, 0, MPI_COMM_WORLD, &req);
    wait_req(&req);
}

static void c_scatter(void *ctx, const void *all, void *mine, long bytes) {
    (void)ctx;
    MPI_Request req;
    MPI_Iscatter(all, (int)bytes, MPI_BYTE, mine, (int)bytes, MPI_BYTE, 0, MPI_COMM_WORLD, &req);
    wait_req(&req);
}

static void bucket_start(Bucket *k) {
    k->t_start = now_s();
    if (D.algo == ALGO_ALLGATHER) {
        MPI_Iallgather(D.grad + k->off, (int)k->n, MPI_FLOAT, D.recv + (size_t)k->off * D.size, (int)k->n, MPI_FLOAT,
                       D.comm_a, &k->req);
        D.bytes += 4.0 * k->n * (D.size - 1);
    } else {
        const int mine = k->cnt[D.rank]; /* send slice r to rank r; receive my slice from each rank */
        MPI_Ialltoallv(D.grad + k->off, k->cnt, k->displ, MPI_FLOAT, D.recv + (size_t)k->off * D.size, k->rcnt,
                       k->rdispl, MPI_FLOAT, D.comm_a, &k->req);
        D.bytes += 4.0 * (k->n - mine);
    }
    k->state = 1;
    D.order[D.nstarted++] = (int)(k - D.b);
}

/* the bucket's mean once its first exchange is done: all of it (allgather), or this rank's slice,
 * whose allgather then starts (rsag); rank order either way */
static void bucket_reduce(Bucket *k) {
    const float inv = 1.0f / (float)D.size;
    const float *base = D.recv + (size_t)k->off * D.size;
    if (D.algo == ALGO_ALLGATHER) {
        float *restrict g = D.grad + k->off;
        const long n = k->n;
        for (long j = 0; j < n; j++) g[j] = base[j];
        for (int r = 1; r < D.size; r++) {
            const float *restrict p = base + (size_t)r * n;
            for (long j = 0; j < n; j++) g[j] += p[j];
        }
        for (long j = 0; j < n; j++) g[j] *= inv;
        k->state = 3;
        return;
    }
    const long n = k->cnt[D.rank];
    float *restrict g = D.grad + k->off + k->displ[D.rank];
    for (long j = 0; j < n; j++) g[j] = base[j];
    for (int r = 1; r < D.size; r++) {
        const float *restrict p = base + (size_t)r * n;
        for (long j = 0; j < n; j++) g[j] += p[j];
    }
    for (long j = 0; j < n; j++) g[j] *= inv;
    MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_FLOAT, D.grad + k->off, k->cnt, k->displ, MPI_FLOAT, D.comm_b, &k->req);
    D.bytes += 4.0 * n * (D.size - 1);
    k->state = 2;
}

/* Lets the exchanges in flight progress (Open MPI moves non-blocking collectives only inside MPI
 * calls). Buckets leave their first exchange in the order they entered it, so that the second
 * exchanges start in the same order on every rank. */
static void progress(void) {
    while (D.nextb < D.nstarted) {
        Bucket *k = &D.b[D.order[D.nextb]];
        int flag = 0;
        MPI_Test(&k->req, &flag, MPI_STATUS_IGNORE);
        if (!flag) break;
        bucket_reduce(k);
        D.nextb++;
    }
    for (int i = 0; i < D.nextb; i++) {
        Bucket *k = &D.b[D.order[i]];
        if (k->state == 2) {
            int flag = 0;
            MPI_Test(&k->req, &flag, MPI_STATUS_IGNORE);
            if (flag) k->state = 3;
        }
    }
}

static void c_grad_begin(void *ctx, float *grad, long n) {
    (void)ctx;
    if (D.n != n || D.grad != grad) { /* the buckets: fixed ranges of the flat gradient */
        free(D.b);
        free(D.recv);
        D.grad = grad;
        D.n = n;
        free(D.order);
        free(D.cd);
        D.nb = (int)((n + BUCKET_FLOATS - 1) / BUCKET_FLOATS);
        D.b = calloc((size_t)D.nb, sizeof *D.b);
        D.recv = malloc(sizeof(float) * (size_t)n * D.size);
        D.order = malloc(sizeof(int) * (size_t)D.nb);
        D.cd = malloc(sizeof(int) * 4 * (size_t)D.size * D.nb);
        if (!D.b || !D.recv || !D.order || !D.cd) {
            fprintf(stderr, "moelab train: rank %d: out of memory for the gradient exchange\n", D.rank);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        for (int i = 0; i < D.nb; i++) {
            Bucket *k = &D.b[i];
            k->off = (long)i * BUCKET_FLOATS;
            k->n = n - k->off < BUCKET_FLOATS ? n - k->off : BUCKET_FLOATS;
            k->cnt = D.cd + (size_t)i * 4 * D.size;
            k->displ = k->cnt + D.size;
            k->rcnt = k->displ + D.size;
            k->rdispl = k->rcnt + D.size;
            for (int r = 0, at = 0; r < D.size; r++) { /* slice r: n / N floats, the first n % N one more */
                k->cnt[r] = (int)(k->n / D.size + (r < k->n % D.size));
                k->displ[r] = at;
                at += k->cnt[r];
            }
            for (int r = 0; r < D.size; r++) {
                k->rcnt[r] = k->cnt[D.rank];
                k->rdispl[r] = r * k->cnt[D.rank];
            }
        }
    }
    for (int i = 0; i < D.nb; i++) D.b[i].ready = D.b[i].state = 0;
    D.nstarted = D.nextb = 0;
    D.step_wait = 0;
}

static void c_grad_ready(void *ctx, long off, long n) {
    (void)ctx;
    if (D.no_overlap || n < 1) return;
    for (int i = (int)(off / BUCKET_FLOATS); i < D.nb; i++) {
        Bucket *k = &D.b[i];
        if (k->off >= off + n) break;
        const long lo = off > k->off ? off : k->off, hi = off + n < k->off + k->n ? off + n : k->off + k->n;
        if (hi > lo) k->ready += hi - lo;
        if (k->ready >= k->n && !k->state) bucket_start(k);
    }
    progress();
}

static void c_grad_end(void *ctx) {
    (void)ctx;
    D.t_end_bwd = now_s();
    for (int i = 0; i < D.nb; i++) /* the ranges nobody reported, in index order on every rank */
        if (!D.b[i].state) bucket_start(&D.b[i]);
    double first = D.t_end_bwd;
    for (int i = 0; i < D.nb; i++)
        if (D.b[i].t_start < first) first = D.b[i].t_start;
    for (;;) {
        progress();
        int left = 0;
        for (int i = 0; i < D.nb; i++) left += D.b[i].state != 3;
        if (!left) break;
        const double t = now_s();
        if (t - D.t_end_bwd > 0.005) watch_peers(t);
    }
    const double t1 = now_s();
    const char *dump = grad_dump();
    if (D.steps == 0 && D.rank == 0 && dump) {
        FILE *f = fopen(dump, "wb");
        if (!f || fwrite(D.grad, sizeof(float), (size_t)D.n, f) != (size_t)D.n)
            fprintf(stderr, "moelab train: MOELAB_DIST_GRAD_DUMP %s: cannot write it\n", dump);
        if (f) fclose(f);
    }
    D.wait_s += (t1 - D.t_end_bwd) + D.step_wait;
    D.span_s += t1 - first;
    D.hidden_s += D.t_end_bwd - first;
    D.steps++;
}

static int launched_by_mpi(void) {
    if (getenv("MOELAB_NO_DIST")) return 0; /* a run a sweep started: one process (sweep_run.c) */
    return getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMI_SIZE") || getenv("PMIX_RANK");
}

int dist_init(void) {
    if (D.on || !launched_by_mpi()) return D.on ? D.size : 1;
    int provided = 0;
    if (MPI_Init_thread(NULL, NULL, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS) {
        fprintf(stderr, "moelab train: MPI_Init failed: training on one process\n");
        return 1;
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &D.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &D.size);
    D.on = 1;
#ifdef __linux__
    /* mpirun gone (killed, or exited while a rank ran on: seen with Open MPI 4.1 after a SIGTERM):
     * this rank gets SIGTERM and the run stops cleanly instead of training on unseen */
    prctl(PR_SET_PDEATHSIG, SIGTERM);
#endif
    signal(SIGPIPE, SIG_IGN); /* mpirun's output pipe closed: writes fail, the run ends cleanly */
    D.no_overlap = getenv("MOELAB_DIST_NO_OVERLAP") && atoi(getenv("MOELAB_DIST_NO_OVERLAP"));
    const char *bk = getenv("MOELAB_DIST_BUCKET");
    if (bk && atol(bk) >= 16) BUCKET_FLOATS = atol(bk);
    const char *al = getenv("MOELAB_DIST_ALGO");
    D.algo = al && !strcmp(al, "rsag") ? ALGO_RSAG : al && !strcmp(al, "allgather") ? ALGO_ALLGATHER
             : D.size > 2                                                           ? ALGO_RSAG
                                                                                    : ALGO_ALLGATHER;
    D.peers = calloc((size_t)D.size, sizeof *D.peers);
    if (D.peers) { /* every rank's pid and machine, for watch_peers */
        struct Peer me = {.pid = (long)getpid()};
        if (gethostname(me.host, sizeof me.host - 1) != 0) snprintf(me.host, sizeof me.host, "?");
        MPI_Allgather(&me, (int)sizeof me, MPI_BYTE, D.peers, (int)sizeof me, MPI_BYTE, MPI_COMM_WORLD);
    }
    MPI_Comm_dup(MPI_COMM_WORLD, &D.comm_a);
    MPI_Comm_dup(MPI_COMM_WORLD, &D.comm_b);
    D.comm = (TrainComm){.rank = D.rank,
                         .size = D.size,
                         .ctx = NULL,
                         .sum = c_sum,
                         .bcast = c_bcast,
                         .grad_begin = c_grad_begin,
                         .grad_ready = c_grad_ready,
                         .grad_end = c_grad_end,
                         .gather = c_gather,
                         .scatter = c_scatter};
    return D.size;
}

int dist_rank(void) { return D.on ? D.rank : 0; }
int dist_size(void) { return D.on ? D.size : 1; }
const TrainComm *dist_comm(void) { return D.on && (D.size > 1 || grad_dump()) ? &D.comm : NULL; }

void dist_comm_stats(double *wait_s, double *bytes_per_step, double *hidden, long *steps) {
    *wait_s = D.wait_s;
    *bytes_per_step = D.steps ? D.bytes / D.steps : 0.0;
    *hidden = D.span_s > 0 ? D.hidden_s / D.span_s : 0.0;
    *steps = D.steps;
}

void dist_comm_reset(void) { D.wait_s = D.span_s = D.hidden_s = D.bytes = 0.0, D.steps = 0; }

/* ---- the handshake: a header, then the options */
typedef struct {
    int go; /* 1: a run follows; 0: rank 0 stopped before it */
    int pad_;
    AppOptions o;
} OptionsMsg;

typedef struct {
    int ok, resumed;
    /* the hook settings every rank's loop must share */
    int interactive, pausable, has_checkpoint, has_rule_parser;
    int ckpt_every;
    int pad_;
    long ckpt_steps;
} StartMsg;

void dist_send_options(const AppOptions *o) {
    if (!dist_comm() || D.rank != 0 || D.options_sent) return;
    OptionsMsg *m = calloc(1, sizeof *m);
    if (!m) MPI_Abort(MPI_COMM_WORLD, 1);
    m->go = 1;
    m->o = *o;
    bcast_bytes(m, sizeof *m);
    free(m);
    D.options_sent = 1;
}

void dist_on_rank_lost(DistLostFn fn, void *user) {
    D.lost_fn = fn;
    D.lost_user = user;
}

void dist_send_start(Trainer *t, int ok, int resumed) {
    if (!dist_comm() || D.rank != 0 || D.start_sent) return;
    D.trainer = t;
    StartMsg s = {.ok = ok, .resumed = resumed};
    bcast_bytes(&s, sizeof s);
    D.start_sent = 1;
    if (ok && resumed) trainer_dist_share(t);
}

/* ---- the hooks: rank 0's answers, broadcast; followers take them */
typedef struct {
    int has;
    int pad_;
    TrainerCmd c;
} CmdMsg;

/* A follower's SIGINT / SIGTERM (mpirun forwards them to every rank; a rank whose mpirun died gets
 * SIGTERM from the kernel, dist_init): noted, and acted on by every rank at the next boundary. */
static volatile sig_atomic_t g_follower_signal = 0;
static void on_follower_signal(int sig) { g_follower_signal = sig; }

/* Every rank's stop wish, summed: a signal that reached any rank stops them all at this boundary. */
static int any_stop(int mine) {
    double v = mine != 0;
    c_sum(NULL, &v, 1);
    return v > 0;
}

static int w_should_stop(void *user) {
    (void)user;
    const int mine = D.inner.should_stop ? D.inner.should_stop(D.inner.user) : 0;
    const int stop = any_stop(mine);
    if (stop && !mine) printf("another rank was signalled: stopping every rank cleanly\n");
    return stop;
}

static int w_next_cmd(void *user, long step, int wait, TrainerCmd *c) {
    (void)user;
    CmdMsg m;
    memset(&m, 0, sizeof m);
    m.has = D.inner.next_cmd ? D.inner.next_cmd(D.inner.user, step, wait, &m.c) : 0;
    bcast_bytes(&m, sizeof m);
    if (m.has) *c = m.c;
    return m.has;
}

static ml_status w_checkpoint(Trainer *t, const char *why, void *user) {
    (void)user;
    trainer_dist_gather(t); /* every rank's streams and running statistics in the file */
    int st = D.inner.checkpoint(t, why, D.inner.user);
    bcast_bytes(&st, sizeof st); /* every rank counts it written (or not) alike */
    return (ml_status)st;
}

void dist_wrap_hooks(TrainHooks *h) {
    if (!dist_comm() || D.rank != 0) return;
    D.inner = *h;
    StartMsg s = {.interactive = h->interactive,
                  .pausable = h->pausable,
                  .has_checkpoint = h->checkpoint != NULL,
                  .has_rule_parser = h->parse_rule != NULL,
                  .ckpt_every = h->ckpt_every,
                  .ckpt_steps = h->ckpt_steps};
    bcast_bytes(&s, sizeof s);
    h->should_stop = w_should_stop;
    h->next_cmd = w_next_cmd;
    if (h->checkpoint) h->checkpoint = w_checkpoint;
}

static int f_should_stop(void *user) {
    (void)user;
    return any_stop(g_follower_signal);
}

static int f_next_cmd(void *user, long step, int wait, TrainerCmd *c) {
    (void)user;
    (void)step;
    (void)wait;
    CmdMsg m;
    bcast_bytes(&m, sizeof m);
    if (m.has) *c = m.c;
    return m.has;
}

static ml_status f_checkpoint(Trainer *t, const char *why, void *user) {
    (void)why;
    (void)user;
    trainer_dist_gather(t);
    int st = 0;
    bcast_bytes(&st, sizeof st);
    if (st != ML_OK) return ml_fail((ml_status)st, "rank 0 could not write the checkpoint");
    return ML_OK;
}

/* A follower: the whole run (receives the options, trains, returns the exit status). */
static int dist_follow(void) {
    /* Ctrl-C / SIGTERM (mpirun forwards them to every rank) is rank 0's to act on: it stops every
     * rank at the same boundary after the final checkpoint; a follower that died here would take the
     * job down before that */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_follower_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    OptionsMsg *m = calloc(1, sizeof *m);
    if (!m) MPI_Abort(MPI_COMM_WORLD, 1);
    bcast_bytes(m, sizeof *m);
    if (!m->go) { /* rank 0 stopped before the run (and said why) */
        free(m);
        return 1;
    }
    AppOptions *o = &m->o;
    if (o->dry_run) { /* rank 0 printed the layout */
        free(m);
        return 0;
    }
    Dataset ds;
    DatasetOpenOptions dopt = {0};
    dopt.coarse = o->coarse;
    int rc = 0;
    if (dataset_open_with(&ds, o->dataset, &dopt) != ML_OK) {
        fprintf(stderr, "moelab train: rank %d: %s\n", D.rank, ml_last_error());
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    BatchSource src;
    dataset_batch_source(&ds, &src);
    Trainer t;
    const int init_ok = trainer_init_dist(&t, &o->train, &src, dist_comm()) == ML_OK;
    if (init_ok) trainer_set_rule(&t, o->on_collapse);
    StartMsg s; /* rank 0 built the same trainer (or failed alike, and said why) and opened the session */
    bcast_bytes(&s, sizeof s);
    if (s.ok && !init_ok) { /* rank 0 trains: this rank cannot follow, the job stops */
        fprintf(stderr, "moelab train: rank %d: %s\n", D.rank, ml_last_error());
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    if (!s.ok || !init_ok) {
        rc = init_ok ? 1 : 2;
    } else {
        if (s.resumed) trainer_dist_share(&t);
        D.trainer = &t;
        StartMsg h; /* the hook settings (dist_wrap_hooks) */
        bcast_bytes(&h, sizeof h);
        TrainHooks hk = {
            .next_cmd = f_next_cmd,
            .should_stop = f_should_stop,
            .parse_rule = h.has_rule_parser ? command_rule_parse : NULL,
            .checkpoint = h.has_checkpoint ? f_checkpoint : NULL,
            .ckpt_every = h.ckpt_every,
            .ckpt_steps = h.ckpt_steps,
            .interactive = h.interactive,
            .pausable = h.pausable,
        };
        const RunEnd end = trainer_run(&t, &hk);
        rc = end == RUN_FAILED ? 1 : 0;
    }
    D.trainer = NULL;
    if (init_ok) trainer_free(&t);
    dataset_free(&ds);
    free(m);
    return rc;
}

int dist_main(int (*run)(int argc, char **argv), int argc, char **argv) {
    const int rc = dist_init() > 1 && dist_rank() > 0 ? dist_follow() : run(argc, argv);
    dist_finish();
    return rc;
}

void dist_no_handshake(void) { D.options_sent = D.start_sent = 1; }

void dist_finish(void) {
    if (!D.on) return;
    if (D.size > 1 && D.rank == 0 && !D.options_sent) { /* followers wait for options: there is no run */
        OptionsMsg *m = calloc(1, sizeof *m);
        if (m) bcast_bytes(m, sizeof *m);
        free(m);
    } else if (D.size > 1 && D.rank == 0 && !D.start_sent) {
        StartMsg s = {0};
        bcast_bytes(&s, sizeof s);
    }
    MPI_Comm_free(&D.comm_a);
    MPI_Comm_free(&D.comm_b);
    MPI_Finalize();
    free(D.b);
    free(D.recv);
    free(D.order);
    free(D.cd);
    free(D.sumbuf);
    free(D.peers);
    D.peers = NULL;
    D.trainer = NULL;
    D.b = NULL, D.recv = NULL, D.order = NULL, D.cd = NULL, D.sumbuf = NULL, D.nb = 0, D.n = 0, D.sumcap = 0;
    D.on = 0;
}

#else /* no MPI: one process, always */

int dist_init(void) { return 1; }
int dist_rank(void) { return 0; }
int dist_size(void) { return 1; }
const TrainComm *dist_comm(void) { return NULL; }
void dist_send_options(const AppOptions *o) { (void)o; }
void dist_send_start(Trainer *t, int ok, int resumed) {
    (void)t;
    (void)ok;
    (void)resumed;
}
void dist_wrap_hooks(TrainHooks *h) { (void)h; }
void dist_on_rank_lost(DistLostFn fn, void *user) {
    (void)fn;
    (void)user;
}
void dist_comm_stats(double *wait_s, double *bytes_per_step, double *hidden, long *steps) {
    *wait_s = *bytes_per_step = *hidden = 0.0;
    *steps = 0;
}
int dist_main(int (*run)(int argc, char **argv), int argc, char **argv) { return run(argc, argv); }
void dist_no_handshake(void) {}
void dist_comm_reset(void) {}
void dist_finish(void) {}

#endif
