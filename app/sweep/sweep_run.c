/* sweep_run.c — running the runs of a sweep: the state of a run's session folder (new, finished,
 * failed, to resume, to restart, mismatch), each run as a headless `moelab train` child process
 * (posix_spawn of /proc/self/exe, at most --jobs at once, an exclusive flock on its log while it
 * lives, a clean stop on SIGINT / SIGTERM), and the MPI ranks (start, wait, gather the rows). */
#define _GNU_SOURCE

#include "app/sweep/sweep_internal.h"
#include "app/run/runsession.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifdef MOELAB_HAVE_MPI
#include <mpi.h>
#endif

extern char **environ;

/* ------------------------------------------------------------------ files */

int sweep_mkdirs(const char *dir) {
    char p[DIR_N];
    snprintf(p, sizeof p, "%s", dir);
    for (char *s = p + 1;; s++) {
        const char c = *s;
        if (c == '/' || c == 0) {
            *s = 0;
            if (mkdir(p, 0777) != 0 && errno != EEXIST) {
                fprintf(stderr, "moelab sweep: %s: cannot create directory: %s\n", p, strerror(errno));
                return -1;
            }
            *s = c;
        }
        if (c == 0) break;
    }
    return 0;
}

int sweep_private(const Plan *p) {
    for (int i = 0; i < p->base.n; i++)
        if (!strcmp(p->base.v[i], "--private")) return 1;
    return 0;
}

static int file_exists(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0;
}

/* Writes text to path atomically (path.tmp.<pid>, rename). */
int sweep_write_atomic(const char *path, const char *text) {
    char tmp[DIR_N + 32];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f) {
        fprintf(stderr, "moelab sweep: %s: %s\n", tmp, strerror(errno));
        return -1;
    }
    const int bad = fputs(text, f) < 0;
    if (fclose(f) != 0 || bad || rename(tmp, path) != 0) {
        fprintf(stderr, "moelab sweep: %s: cannot write: %s\n", path, strerror(errno));
        unlink(tmp);
        return -1;
    }
    return 0;
}

/* Drops "--threads X" and "--session X" (the per-machine parts of a run's command line). */
static void normalize_args(StrList *l) {
    int w = 0;
    for (int i = 0; i < l->n; i++) {
        const char *a = l->v[i];
        const int lo = app_option_launch_only(l->n, l->v, i);
        if (lo) { /* --notify: the process's, not the run's */
            for (int j = 0; j < lo; j++) free(l->v[i + j]);
            i += lo - 1;
            continue;
        }
        if ((!strcmp(a, "--threads") || !strcmp(a, "--session")) && i + 1 < l->n) {
            free(l->v[i]);
            free(l->v[i + 1]);
            i++;
            continue;
        }
        if (!strncmp(a, "--threads=", 10) || !strncmp(a, "--session=", 10)) {
            free(l->v[i]);
            continue;
        }
        l->v[w++] = l->v[i];
    }
    l->n = w;
    if (l->v) l->v[w] = NULL;
}

/* Entries of the option at l->v[i]: 1 ("--key=V" or a flag), 2 ("--key V"), 0 if not an option. */
static int option_span(const StrList *l, int i, size_t *klen) {
    const char *a = l->v[i];
    if (strncmp(a, "--", 2)) return 0;
    *klen = strcspn(a + 2, "=");
    if (a[2 + *klen] == '=') return 1;
    return app_option_takes_value(a + 2, *klen) == 1 && i + 1 < l->n ? 2 : 1;
}

/* An option given twice counts once, the last (a sweep before the overrides were folded recorded
 * a preset's `--epochs 4` and the user's `--epochs 1` both: the same run as `--epochs 1` alone). */
static void dedupe_args(StrList *l) {
    int w = 0;
    for (int i = 0; i < l->n;) {
        size_t kl = 0;
        const int span = option_span(l, i, &kl);
        int later = 0;
        for (int j = i + (span ? span : 1); span && j < l->n && !later;) {
            size_t kj = 0;
            const int sj = option_span(l, j, &kj);
            if (sj && kj == kl && !strncmp(l->v[j] + 2, l->v[i] + 2, kl)) later = 1;
            j += sj ? sj : 1;
        }
        const int n = span ? span : 1;
        for (int k = 0; k < n && i + k < l->n; k++) {
            if (later) free(l->v[i + k]);
            else l->v[w++] = l->v[i + k];
        }
        i += n;
    }
    l->n = w;
    if (l->v) l->v[w] = NULL;
}

/* The same command line meant other defaults before issue 33 (selection noise 1, alpha 0.01, tau
 * constant 1): 1 if the session's stored configuration has the noise, alpha and temperature
 * schedule this moelab would give run r, else 0 with why set. */
static int same_router_defaults(const Plan *p, int r, const char *dir, char *why, size_t wn) {
    StrList l = {0};
    AppOptions want, had;
    app_options_defaults(&want);
    if (sweep_run_train_args(p, r % p->nconfigs, r / p->nconfigs + p->seed0, &l) ||
        app_options_parse(&want, l.n, l.v, "train") != 0) {
        sweep_sl_free(&l);
        return 1; /* the text comparison already matched: nothing more to learn */
    }
    sweep_sl_free(&l);
    had = want;
    runsession_stored_config(dir, &had);
    const MoeConfig *hw = &want.train.model.head, *hh = &had.train.model.head;
    const TauSchedule *tw = &want.train.tau, *th = &had.train.tau;
    if (hw->kind == HEAD_DENSE && want.train.model.moe_n == 0) return 1; /* nothing routes */
    if (hw->noise != hh->noise || hw->alpha != hh->alpha || tw->kind != th->kind || tw->tau0 != th->tau0 ||
        tw->tau1 != th->tau1) {
        snprintf(why, wn,
                 "it was trained with selection noise %g, alpha %g and tau %s %g -> %g (the defaults of an older "
                 "moelab), this sweep wants noise %g, alpha %g and tau %s %g -> %g",
                 (double)hh->noise, (double)hh->alpha, tau_kind_name(th->kind), (double)th->tau0, (double)th->tau1,
                 (double)hw->noise, (double)hw->alpha, tau_kind_name(tw->kind), (double)tw->tau0, (double)tw->tau1);
        return 0;
    }
    return 1;
}

/* 1 if the session in dir was started with the training options of run r. */
static int session_matches(const Plan *p, int r, const char *dir, char *why, size_t wn) {
    char line[4096];
    if (session_read_run_attr(dir, "command_line", line, sizeof line) != ML_OK) {
        snprintf(why, wn, "%s", ml_last_error());
        return 0;
    }
    char **av = NULL;
    const int ac = command_line_split(line, &av);
    if (ac < 0) {
        snprintf(why, wn, "cannot parse its stored command line");
        return 0;
    }
    StrList stored = {.n = ac, .cap = ac + 1, .v = av}, want = {0};
    sweep_run_train_args(p, r % p->nconfigs, r / p->nconfigs + p->seed0, &want);
    normalize_args(&stored);
    normalize_args(&want);
    dedupe_args(&stored);
    dedupe_args(&want);
    char a[4096], b[4096];
    command_line_join(a, sizeof a, stored.n, stored.v);
    command_line_join(b, sizeof b, want.n, want.v);
    sweep_sl_free(&stored);
    sweep_sl_free(&want);
    if (strcmp(a, b)) {
        snprintf(why, wn, "it was started as '%.900s', this sweep wants '%.900s'", a, b);
        return 0;
    }
    return same_router_defaults(p, r, dir, why, wn);
}

const char *const sweep_state_names[] = {"to run", "finished", "failed", "to resume", "to restart", "mismatch", "unreadable"};

RunState sweep_run_state(const Plan *p, int r, const char *dir, SessionInfo *info, char *msg, size_t mn, int probe) {
    char live[DIR_N + 16];
    snprintf(live, sizeof live, "%s/live.h5", dir);
    msg[0] = 0;
    memset(info, 0, sizeof *info);
    info->last_test_acc = info->best_test_acc = NAN;
    if (!file_exists(live)) return RS_NEW;
    char ck[DIR_N + 64];
    if (session_probe(dir, probe | RUN_STATE_PROBE) != ML_OK || session_read_info(dir, info) != ML_OK) {
        snprintf(msg, mn, "%s", ml_last_error());
        /* a run killed while it created live.h5 has nothing worth keeping */
        if (ckpt_find_latest(dir, ck, sizeof ck, NULL, 0) != ML_OK) return RS_RESTART;
        return RS_BROKEN;
    }
    if (!session_matches(p, r, dir, msg, mn)) return RS_MISMATCH;
    if (!strcmp(info->status, "finished")) return RS_DONE;
    if (!strcmp(info->status, "failed")) return RS_FAILED;
    return ckpt_find_latest(dir, ck, sizeof ck, NULL, 0) == ML_OK ? RS_RESUME : RS_RESTART;
}

/* ------------------------------------------------------------------ running */

volatile sig_atomic_t g_sweep_stop = 0;
static void sweep_on_signal(int sig) { g_sweep_stop = sig; }

struct Child {
    pid_t pid;
    int run;
    int logfd;
    double t0;
};

int sweep_cores_available(int mpi_local) {
    cpu_set_t set;
    const long online = sysconf(_SC_NPROCESSORS_ONLN);
    int n = (int)(online > 0 ? online : 1);
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        const int a = CPU_COUNT(&set);
        /* ranks bound by the launcher already have their share; unbound ones split the machine */
        if (a > 0 && a < n) return a;
        if (a > 0) n = a;
    }
    if (mpi_local > 1) n /= mpi_local;
    return n > 0 ? n : 1;
}

void sweep_self_exe(char *buf, size_t n, const char *argv0) {
    const ssize_t l = readlink("/proc/self/exe", buf, n - 1);
    if (l > 0) buf[l] = 0;
    else snprintf(buf, n, "%s", argv0);
}

static const char *acc_text(double a, char *buf, size_t n) {
    if (isnan(a)) snprintf(buf, n, "-");
    else snprintf(buf, n, "%.2f%%", 100 * a);
    return buf;
}

/* The last non-empty line of a log (for a failed run's message). */
static void log_tail(const char *path, char *buf, size_t n) {
    buf[0] = 0;
    FILE *f = fopen(path, "r");
    if (!f) return;
    char line[1024];
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        if (line[0]) snprintf(buf, n, "%s", line);
    }
    fclose(f);
}

static void log_path(const Plan *p, int r, char *buf, size_t n) {
    char name[SWEEP_NAME_MAX];
    sweep_run_name(p, r, name, sizeof name);
    snprintf(buf, n, "%s/logs/%s.log", p->out, name);
}

/* Starts run r (or skips it). Returns 1 if a child was started. */
static int runner_start(Runner *R, int r) {
    const Plan *p = R->p;
    char name[SWEEP_NAME_MAX], dir[DIR_N], logp[DIR_N], msg[2048], a1[32], a2[32];
    sweep_run_name(p, r, name, sizeof name);
    sweep_run_dir(p, r, dir, sizeof dir);
    log_path(p, r, logp, sizeof logp);
    const int fd = open(logp, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    /* --private: a log an earlier sweep left readable is made owner-only too */
    if (fd >= 0 && sweep_private(p) && fchmod(fd, 0600) != 0) {
        fprintf(stderr, "moelab sweep: %s: cannot make it private (chmod 600): %s\n", logp, strerror(errno));
        close(fd);
        R->tally.failed++;
        return 0;
    }
    if (fd < 0) {
        fprintf(stderr, "moelab sweep: %s: %s\n", logp, strerror(errno));
        R->tally.failed++;
        return 0;
    }
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        printf("%s[%d/%d] %s: busy (another process is running it), skipped\n", R->who, r + 1, p->nruns, name);
        close(fd);
        R->tally.busy++;
        return 0;
    }
    SessionInfo info;
    const RunState st = sweep_run_state(p, r, dir, &info, msg, sizeof msg, RUN_STATE_PROBE);
    switch (st) {
    case RS_DONE:
        printf("%s[%d/%d] %s: finished before (final %s, best %s), skipped\n", R->who, r + 1, p->nruns, name,
               acc_text(info.last_test_acc, a1, sizeof a1), acc_text(info.best_test_acc, a2, sizeof a2));
        close(fd);
        R->tally.skipped++;
        return 0;
    case RS_FAILED:
        printf("%s[%d/%d] %s: failed before (see %s), skipped: remove %s to run it again\n", R->who, r + 1, p->nruns,
               name, logp, dir);
        close(fd);
        R->tally.failed++;
        return 0;
    case RS_MISMATCH:
    case RS_BROKEN:
        fprintf(stderr, "moelab sweep: %s: %s%s (remove it or use another --out)\n", dir,
                st == RS_MISMATCH ? "holds another configuration: " : "", msg);
        close(fd);
        R->tally.failed++;
        return 0;
    case RS_RESTART: {
        /* a run killed before its first checkpoint: nothing to continue from */
        char live[DIR_N + 16];
        snprintf(live, sizeof live, "%s/live.h5", dir);
        if (unlink(live) != 0) {
            fprintf(stderr, "moelab sweep: %s: %s\n", live, strerror(errno));
            close(fd);
            R->tally.failed++;
            return 0;
        }
        break;
    }
    default: break;
    }
    StrList av = {0};
    sweep_sl_push(&av, R->exe);
    if (st == RS_RESUME) {
        sweep_sl_push(&av, "train");
        sweep_sl_push(&av, "--headless");
        sweep_sl_push(&av, "--resume");
        sweep_sl_push(&av, dir);
    } else {
        sweep_run_child_args(p, r, R->threads, &av);
    }
    char line[4096];
    command_line_join(line, sizeof line, av.n - 1, av.v + 1);
    dprintf(fd, "== moelab sweep: moelab %s\n", line);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, fd, 1);
    posix_spawn_file_actions_adddup2(&fa, fd, 2);
    pid_t pid;
    const int e = posix_spawn(&pid, R->exe, &fa, NULL, av.v, environ);
    posix_spawn_file_actions_destroy(&fa);
    sweep_sl_free(&av);
    if (e != 0) {
        fprintf(stderr, "moelab sweep: cannot start %s: %s\n", R->exe, strerror(e));
        close(fd);
        R->tally.failed++;
        return 0;
    }
    printf("%s[%d/%d] %s: %s (log %s)\n", R->who, r + 1, p->nruns, name,
           st == RS_RESUME    ? "resuming from its checkpoint"
           : st == RS_RESTART ? "restarting (no checkpoint yet)"
                              : "started",
           logp);
    fflush(stdout);
    R->kids[R->nkids++] = (Child){.pid = pid, .run = r, .logfd = fd, .t0 = ml_now()};
    return 1;
}

/* The sweep's ETA in its progress lines: runs still to start or reap (the ones skipped as finished,
 * busy or failed before are not counted), and the mean time of those done. */
static int g_eta_left;
static double g_eta_sec;
static int g_eta_done;

/* " sweep ETA 3m10s (4 runs left)" from the runs finished so far, or "" before the first. */
static void sweep_eta(const Plan *p, char *buf, size_t n) {
    buf[0] = 0;
    if (g_eta_done == 0 || g_eta_left <= 0) return;
    const int par = p->jobs > 0 ? (p->jobs < g_eta_left ? p->jobs : g_eta_left) : 1;
    const long t = lround(g_eta_sec / g_eta_done * g_eta_left / par);
    char d[32];
    if (t >= 3600) snprintf(d, sizeof d, "%ldh%02ldm", t / 3600, t / 60 % 60);
    else if (t >= 60) snprintf(d, sizeof d, "%ldm%02lds", t / 60, t % 60);
    else snprintf(d, sizeof d, "%lds", t);
    snprintf(buf, n, "  (sweep ETA %s, %d run%s left)", d, g_eta_left, g_eta_left == 1 ? "" : "s");
}

static void runner_reap(Runner *R, pid_t pid, int wstatus) {
    const Plan *p = R->p;
    int k = 0;
    while (k < R->nkids && R->kids[k].pid != pid) k++;
    if (k == R->nkids) return;
    const Child c = R->kids[k];
    R->kids[k] = R->kids[--R->nkids];
    close(c.logfd);
    char name[SWEEP_NAME_MAX], dir[DIR_N], logp[DIR_N], a1[32], a2[32];
    sweep_run_name(p, c.run, name, sizeof name);
    sweep_run_dir(p, c.run, dir, sizeof dir);
    log_path(p, c.run, logp, sizeof logp);
    SessionInfo info;
    /* the run's own file, but written by a process that may have died in the middle */
    const int have = session_probe(dir, SESSION_PROBE_INFO) == ML_OK && session_read_info(dir, &info) == ML_OK;
    const int code = WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : 128 + WTERMSIG(wstatus);
    g_eta_left--;
    if (have && !strcmp(info.status, "finished") && code == 0) {
        g_eta_sec += ml_now() - c.t0;
        g_eta_done++;
        char eta[96];
        sweep_eta(p, eta, sizeof eta);
        printf("%s[%d/%d] %s: finished in %.1f s: final test acc %s, best %s%s\n", R->who, c.run + 1, p->nruns, name,
               ml_now() - c.t0, acc_text(info.last_test_acc, a1, sizeof a1),
               acc_text(info.best_test_acc, a2, sizeof a2), eta);
        R->tally.ran++;
    } else if (have && !strcmp(info.status, "interrupted")) {
        char ck[DIR_N + 64];
        const char *b = ckpt_find_latest(dir, ck, sizeof ck, NULL, 0) == ML_OK ? strrchr(ck, '/') : NULL;
        printf("%s[%d/%d] %s: interrupted, checkpoint %s (resumes when the sweep runs again)\n", R->who, c.run + 1,
               p->nruns, name, b ? b + 1 : "none");
        R->tally.interrupted++;
    } else if (g_sweep_stop) {
        printf("%s[%d/%d] %s: stopped (exit %d) before its first checkpoint: starts again when the sweep runs again\n",
               R->who, c.run + 1, p->nruns, name, code);
        R->tally.interrupted++;
    } else {
        char tail[1024];
        log_tail(logp, tail, sizeof tail);
        printf("%s[%d/%d] %s: FAILED (exit %d%s%s): %s (log %s)\n", R->who, c.run + 1, p->nruns, name, code,
               have ? ", status " : "", have ? info.status : "", tail, logp);
        R->tally.failed++;
    }
    fflush(stdout);
}

/* Runs the selected runs, at most p->jobs at a time. */
void sweep_runner_go(Runner *R, const int *sel, int nsel) {
    const Plan *p = R->p;
    struct sigaction sa, old_int, old_term;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = sweep_on_signal;
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    R->kids = calloc((size_t)p->jobs, sizeof(Child));
    g_eta_left = nsel;
    int next = 0, signalled = 0;
    while ((next < nsel && !g_sweep_stop) || R->nkids > 0) {
        while (!g_sweep_stop && next < nsel && R->nkids < p->jobs)
            if (!runner_start(R, sel[next++])) g_eta_left--; /* skipped or refused: nothing to wait for */
        if (R->nkids == 0) continue;
        int ws;
        const pid_t pid = waitpid(-1, &ws, 0);
        if (pid > 0) runner_reap(R, pid, ws);
        else if (errno == ECHILD) R->nkids = 0;
        if (g_sweep_stop && !signalled) {
            /* Ctrl-C reaches the children through the terminal; a SIGTERM to this process alone does not */
            for (int k = 0; k < R->nkids; k++) kill(R->kids[k].pid, SIGTERM);
            signalled = 1;
            printf("%sstopping: waiting for %d running session(s) to checkpoint\n", R->who, R->nkids);
            fflush(stdout);
        }
    }
    free(R->kids);
    R->kids = NULL;
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
}

/* ------------------------------------------------------------------ MPI */

static int env_int(const char *name, int dflt) {
    const char *v = getenv(name);
    return v && *v ? atoi(v) : dflt;
}

int sweep_mpi_start(Mpi *m) {
    memset(m, 0, sizeof *m);
    m->size = 1;
    m->local = 1;
    /* the runs a sweep starts are one-process runs, even when the sweep's ranks came from mpirun
     * (whose variables they inherit): app/run/dist.c */
    setenv("MOELAB_NO_DIST", "1", 1);
    const int launched = getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMI_SIZE") || getenv("PMIX_RANK");
    if (!launched) return 0;
    const int size = env_int("OMPI_COMM_WORLD_SIZE", env_int("PMI_SIZE", 1));
#ifdef MOELAB_HAVE_MPI
    /* runs are child processes: no fork warnings, no CMA single-copy (blocked in containers) */
    setenv("OMPI_MCA_mpi_warn_on_fork", "0", 0);
    setenv("OMPI_MCA_btl_vader_single_copy_mechanism", "none", 0);
    if (MPI_Init(NULL, NULL) != MPI_SUCCESS) {
        fprintf(stderr, "moelab sweep: MPI_Init failed\n");
        return -1;
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &m->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &m->size);
    m->local = env_int("OMPI_COMM_WORLD_LOCAL_SIZE", env_int("MPI_LOCALNRANKS", 1));
    m->active = 1;
    (void)size;
    return 0;
#else
    if (size > 1) {
        fprintf(stderr,
                "moelab sweep: started by an MPI launcher with %d ranks, but this moelab was built without MPI "
                "(install libopenmpi-dev and rebuild, or use --shard I/N)\n",
                size);
        return -1;
    }
    return 0;
#endif
}

/* Waits for every rank without spinning a core, then gathers every rank's rows on rank 0 (rows
 * of runs a rank did not own are left as they were). Returns the worst exit code of all ranks
 * (on rank 0). */
int sweep_mpi_finish(Mpi *m, SweepRun *rows, const int *owned, int nowned, int rc) {
#ifdef MOELAB_HAVE_MPI
    if (!m->active) return rc;
    MPI_Request req;
    MPI_Ibarrier(MPI_COMM_WORLD, &req);
    for (int done = 0; !done;) {
        MPI_Test(&req, &done, MPI_STATUS_IGNORE);
        if (!done) nanosleep(&(struct timespec){0, 50 * 1000 * 1000}, NULL);
    }
    int worst = rc;
    MPI_Reduce(&rc, &worst, 1, MPI_INT, MPI_MAX, 0, MPI_COMM_WORLD);
    if (rows) {
        SweepRun *mine = calloc((size_t)nowned + 1, sizeof(SweepRun));
        for (int i = 0; i < nowned; i++) mine[i] = rows[owned[i]];
        int cnt = nowned * (int)sizeof(SweepRun);
        int *counts = NULL, *displs = NULL;
        char *all = NULL;
        if (m->rank == 0) {
            counts = calloc((size_t)m->size, sizeof(int));
            displs = calloc((size_t)m->size, sizeof(int));
        }
        MPI_Gather(&cnt, 1, MPI_INT, counts, 1, MPI_INT, 0, MPI_COMM_WORLD);
        long total = 0;
        if (m->rank == 0) {
            for (int i = 0; i < m->size; i++) {
                displs[i] = (int)total;
                total += counts[i];
            }
            all = malloc((size_t)total + 1);
        }
        MPI_Gatherv(mine, cnt, MPI_BYTE, all, counts, displs, MPI_BYTE, 0, MPI_COMM_WORLD);
        if (m->rank == 0) {
            const SweepRun *got = (const SweepRun *)all;
            for (long i = 0; i < total / (long)sizeof(SweepRun); i++) rows[got[i].index] = got[i];
        }
        free(all);
        free(counts);
        free(displs);
        free(mine);
    }
    MPI_Finalize();
    m->active = 0;
    return m->rank == 0 ? worst : rc;
#else
    (void)m;
    (void)rows;
    (void)owned;
    (void)nowned;
    return rc;
#endif
}
