/* omp_idle.c - how OpenMP's idle threads wait between saga's parallel regions, set once when the
 * first backend opens, without the user's environment.
 *
 * libgomp's idle threads spin after every parallel region before they sleep: 300,000 rounds
 * (about 3 ms) unless OMP_WAIT_POLICY or GOMP_SPINCOUNT say otherwise. saga's kernels are short,
 * and between them the calling thread does serial work (tape bookkeeping, halo packing, waiting
 * for a copy stream's worker): a spinning team takes exactly the core that work needs, and a
 * user's GAT on Cora ran 3-10x slower for it on two cores. libgomp reads its settings in its own
 * constructor, before any of saga's code runs, and keeps the spin count in a hidden variable, so
 * neither setenv() nor an API can change it afterwards.
 *
 * What libgomp does read at every wait is whether it manages more threads than the process had
 * CPUs when it started: then it spins only 100 rounds (its "throttled" count, meant for
 * oversubscription) and sleeps on a futex. So the first backend to open starts a thread of saga's
 * that opens one more team of CPUs + 1 threads and keeps it inside its parallel region for the
 * life of the process, all asleep: libgomp's count is then above the CPUs for good. It costs a
 * few sleeping threads and no CPU time. The hot kernels are not slowed: a sleeping thread is woken
 * within microseconds, against regions of milliseconds (bench/README.md, "OpenMP's idle
 * threads", has the figures). This leans on how libgomp decides to spin (team.c and wait.h, the
 * same since GCC 4.4), not on a documented interface: if a libgomp stops doing so, the effect is
 * only that its threads spin as before.
 *
 * A user who sets OMP_WAIT_POLICY or GOMP_SPINCOUNT keeps their choice; so does SAGA_OMP_SPIN=1,
 * which leaves libgomp's default alone (for measuring). Other OpenMP runtimes are left as they
 * are: LLVM's libomp sleeps after 200 ms (KMP_BLOCKTIME) and has no such count. */
#include "backend_impl.h"
#include "saga_log.h"

#include <dlfcn.h>
#include <omp.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static pthread_mutex_t idle_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t idle_cv = PTHREAD_COND_INITIALIZER;
static int idle_state;    /* 0 not started, 1 the team is up, -1 not wanted or failed */
static int idle_threads;  /* the team's size: the CPUs + 1 */
static unsigned idle_gen; /* the team of this generation is wanted; an older one leaves */
static bool idle_lifted;  /* saga_omp_idle_spin(true): no team, libgomp spins its default */

/* The thread that owns the extra team of generation gen (arg). The team stays inside its parallel
 * region while it is wanted: its first thread sleeps on a condition variable, the others wait
 * (asleep, after 100 rounds) at the region's closing barrier, and libgomp counts them all. When a
 * later generation is wanted (or none), the first thread leaves, the team ends and this thread
 * returns: libgomp then frees the team's threads and no longer counts them. */
static void *idle_owner(void *arg) {
    const unsigned gen = (unsigned)(uintptr_t)arg;
#pragma omp parallel num_threads(idle_threads)
    {
        if (omp_get_thread_num() == 0) {
            pthread_mutex_lock(&idle_mu);
            idle_state = 1;
            pthread_cond_broadcast(&idle_cv);
            while (idle_gen == gen)
                pthread_cond_wait(&idle_cv, &idle_mu);
            pthread_mutex_unlock(&idle_mu);
        }
    }
    return NULL;
}

/* Starts the owner of the team of generation idle_gen (idle_mu held); its error number. */
static int idle_start(void) {
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    int rc = pthread_create(&t, &attr, idle_owner, (void *)(uintptr_t)idle_gen);
    pthread_attr_destroy(&attr);
    return rc;
}

static bool libgomp_loaded(void) {
    /* GOMP_parallel is libgomp's entry for `#pragma omp parallel`; libomp exports it too, for
     * GCC-built code, but libomp also has kmp_set_blocktime */
    return dlsym(RTLD_DEFAULT, "GOMP_parallel") && !dlsym(RTLD_DEFAULT, "kmp_set_blocktime");
}

int saga_omp_idle_init(void) {
    pthread_mutex_lock(&idle_mu);
    if (idle_state != 0) {
        int s = idle_state;
        pthread_mutex_unlock(&idle_mu);
        return s;
    }
    const char *keep = getenv("SAGA_OMP_SPIN");
    if (getenv("OMP_WAIT_POLICY") || getenv("GOMP_SPINCOUNT") || (keep && strcmp(keep, "1") == 0) ||
        !libgomp_loaded()) {
        idle_state = -1;
        pthread_mutex_unlock(&idle_mu);
        return -1;
    }
    /* the team must push libgomp's count of threads above the CPUs it saw at start-up, whatever
     * the other teams are: it adds n - 1 threads, and the first team holds at least one */
    idle_threads = omp_get_num_procs() + 1;
    int rc = idle_start();
    if (rc != 0) {
        idle_state = -1;
        pthread_mutex_unlock(&idle_mu);
        saga_log(SAGA_LOG_DEBUG, "OpenMP idle policy: cannot start a thread (%s); libgomp spins",
                 strerror(rc));
        return -1;
    }
    while (idle_state == 0)
        pthread_cond_wait(&idle_cv, &idle_mu);
    pthread_mutex_unlock(&idle_mu);
    saga_log(SAGA_LOG_DEBUG, "OpenMP idle policy: %d sleeping threads keep libgomp's spin short",
             idle_threads - 1);
    return 1;
}

void saga_omp_idle_spin(bool spin) {
    pthread_mutex_lock(&idle_mu);
    if (idle_state == 1 && spin != idle_lifted) {
        idle_gen++; /* the running team, if any, leaves */
        idle_lifted = spin;
        if (spin) {
            pthread_cond_broadcast(&idle_cv);
        } else {
            int rc = idle_start(); /* not waited for: it is up within a fraction of a ms */
            if (rc != 0) {
                idle_lifted = true;
                saga_log(SAGA_LOG_DEBUG,
                         "OpenMP idle policy: cannot start a thread (%s); libgomp spins",
                         strerror(rc));
            }
        }
    }
    pthread_mutex_unlock(&idle_mu);
}

/* ---- the tuner (saga_backend.h) ---------------------------------------------------------- */

/* A policy's time as the machine allows it: the least of its last SAGA_IDLE_KEEP. */
static double tuner_ms(const saga_idle_tuner *t, int policy) {
    const int k = t->runs[policy] < SAGA_IDLE_KEEP ? t->runs[policy] : SAGA_IDLE_KEEP;
    double v = 0.0;
    for (int i = 0; i < k; i++)
        v = i == 0 || t->ms[policy][i] < v ? t->ms[policy][i] : v;
    return v;
}

static int tuner_pick(const saga_idle_tuner *t) {
    if (t->reps < SAGA_IDLE_WARM + 2 * SAGA_IDLE_KEEP) /* asleep, then spinning: one change */
        return t->reps >= SAGA_IDLE_WARM + SAGA_IDLE_KEEP;
    int best = tuner_ms(t, 1) < tuner_ms(t, 0);
    return t->reps % SAGA_IDLE_EXPLORE == 0 ? !best : best;
}

void saga_idle_tuner_begin(saga_idle_tuner *t, saga_backend *be) {
    /* the kind from the struct (backend_impl.h): backend.c calls this file when it opens a
     * backend, and nothing here calls back into it */
    t->active = be && be->kind == SAGA_BACKEND_CPU;
    if (!t->active)
        return;
    t->policy = tuner_pick(t);
    saga_omp_idle_spin(t->policy);
    t->spun = t->spun || t->policy;
    t->t0 = saga_now();
}

void saga_idle_tuner_end(saga_idle_tuner *t, const char *what) {
    if (!t->active)
        return;
    t->active = false;
    const double ms = (saga_now() - t->t0) * 1e3;
    if (t->reps++ < SAGA_IDLE_WARM)
        return; /* the first ones load what later ones find ready */
    t->ms[t->policy][t->runs[t->policy]++ % SAGA_IDLE_KEEP] = ms;
    if (t->reps == SAGA_IDLE_WARM + 2 * SAGA_IDLE_KEEP)
        saga_log(SAGA_LOG_INFO,
                 "%s take %.1f ms with OpenMP's idle threads asleep, %.1f ms with them spinning: "
                 "%s from here (the other every %d)",
                 what ? what : "repetitions", tuner_ms(t, 0), tuner_ms(t, 1),
                 tuner_ms(t, 1) < tuner_ms(t, 0) ? "spinning" : "asleep", SAGA_IDLE_EXPLORE);
}

void saga_idle_tuner_finish(saga_idle_tuner *t) {
    if (t->spun)
        saga_omp_idle_spin(false);
    t->spun = false;
}
