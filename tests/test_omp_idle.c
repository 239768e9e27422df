/* test_omp_idle.c - the team that keeps libgomp's idle threads from spinning
 * (engine/backend/omp_idle.c): saga_omp_idle_spin ends it and brings it back, without waiting,
 * and the process's threads show it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "test_util.h"

#include "backend_impl.h"

#include <dirent.h>
#include <omp.h>
#include <time.h>

/* The process's threads, from /proc. */
static int n_threads(void) {
    DIR *d = opendir("/proc/self/task");
    assert_non_null(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

static void sleep_ms(int ms) {
    nanosleep(&(struct timespec){0, (long)ms * 1000 * 1000}, NULL);
}

/* Waits up to 5 s for the thread count to come within [lo, hi]; the last count. */
static int wait_threads_within(int lo, int hi) {
    int n = n_threads();
    for (int i = 0; i < 500 && (n < lo || n > hi); i++) {
        sleep_ms(10);
        n = n_threads();
    }
    return n;
}

/* Waits up to 5 s for the thread count to become want; the last count. */
static int wait_threads(int want) {
    return wait_threads_within(want, want);
}

/* A CPU backend (*be) and the sleeping team, with the main thread's own OpenMP team made first so
 * that its threads are in the counts; false (be freed) when saga does not keep the team:
 * OMP_WAIT_POLICY, GOMP_SPINCOUNT or SAGA_OMP_SPIN set, or not libgomp. */
static bool team_up(saga_backend **be) {
    assert_int_equal(saga_backend_cpu_new(be, NULL), SAGA_OK);
    if (saga_omp_idle_init() < 0) {
        saga_backend_free_all(be);
        return false;
    }
    int sum = 0;
#pragma omp parallel for reduction(+ : sum)
    for (int i = 0; i < 1000; i++)
        sum += i;
    assert_int_equal(sum, 499500);
    return true;
}

static void test_omp_idle_spin_toggles_the_team(void **state) {
    (void)state;
    saga_backend *be = NULL;
    if (!team_up(&be))
        skip();
    /* the team: its owner and omp_get_num_procs() more threads */
    const int team = omp_get_num_procs() + 1, n0 = n_threads();
    saga_omp_idle_spin(true);
    assert_int_equal(wait_threads(n0 - team), n0 - team);
    saga_omp_idle_spin(true); /* already lifted: nothing */
    assert_int_equal(wait_threads(n0 - team), n0 - team);
    saga_omp_idle_spin(false);
    assert_int_equal(wait_threads(n0), n0);
    saga_omp_idle_spin(false);
    /* quickly back and forth: one team in the end */
    for (int i = 0; i < 5; i++) {
        saga_omp_idle_spin(true);
        saga_omp_idle_spin(false);
    }
    assert_int_equal(wait_threads(n0), n0);
    /* a parallel region still runs with the team lifted and back */
    saga_omp_idle_spin(true);
    int sum = 0;
#pragma omp parallel for reduction(+ : sum)
    for (int i = 0; i < 1000; i++)
        sum += i;
    assert_int_equal(sum, 499500);
    saga_omp_idle_spin(false);
    assert_int_equal(wait_threads(n0), n0);
    saga_backend_free_all(&be);
}

/* saga_idle_tuner over repetitions whose time the test sets: warm-up and three asleep, three
 * spinning (the team gone while they run), then the faster way, the other at every 32nd; a later
 * change of which is faster is followed once an exploration sees it; finish brings the team
 * back. */
static void test_omp_idle_tuner_picks_the_faster(void **state) {
    (void)state;
    saga_backend *be = NULL;
    if (!team_up(&be))
        skip();
    /* the team's leaving and return are seen as the thread count moving by its size; a
     * sanitizer's own thread may start meanwhile, so by at least its size less one */
    const int team = omp_get_num_procs() + 1;
    int n_up = 0, n_down = 0;
    saga_idle_tuner t = {0};
    int seq[80];
    for (int r = 0; r < 80; r++) {
        saga_idle_tuner_begin(&t, be);
        seq[r] = t.policy;
        if (r == 4) /* asleep: the team is up */
            n_up = n_threads();
        if (r == 6) { /* spinning: the team is gone */
            assert_true(wait_threads_within(0, n_up - (team - 1)) <= n_up - (team - 1));
            n_down = n_threads();
        }
        /* 2 ms asleep and 6 spinning until repetition 40, then 10 asleep and 2 spinning */
        sleep_ms(r < 40 ? (t.policy ? 6 : 2) : (t.policy ? 2 : 10));
        saga_idle_tuner_end(&t, "test repetitions");
    }
    for (int r = 0; r < 5; r++)
        assert_int_equal(seq[r], 0);
    for (int r = 5; r < 8; r++)
        assert_int_equal(seq[r], 1);
    for (int r = 8; r < 40; r++)
        assert_int_equal(seq[r], r % 32 == 0); /* asleep, spinning once at 32 */
    /* from 40 asleep's window fills with 10 ms runs at 42, and spinning's (6 ms: 6, 7 and 32)
     * wins from 43, asleep timed again at 64 */
    for (int r = 40; r < 80; r++)
        assert_int_equal(seq[r], r >= 43 && r != 64);
    assert_true(t.spun);
    const int n_end = n_threads(); /* spinning: the team is gone */
    saga_idle_tuner_finish(&t);
    const int n_back = wait_threads_within(n_end + team - 1, n_end + team + 1); /* and back */
    assert_true(n_back >= n_end + team - 1 && n_back <= n_end + team + 1);
    assert_true(n_down < n_up);
    saga_backend_free_all(&be);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_omp_idle_spin_toggles_the_team),
        cmocka_unit_test(test_omp_idle_tuner_picks_the_faster),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
