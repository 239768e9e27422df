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

/* Waits up to 5 s for the thread count to become want; the last count. */
static int wait_threads(int want) {
    int n = n_threads();
    for (int i = 0; i < 500 && n != want; i++) {
        nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
        n = n_threads();
    }
    return n;
}

static void test_omp_idle_spin_toggles_the_team(void **state) {
    (void)state;
    saga_backend *be = NULL;
    assert_int_equal(saga_backend_cpu_new(&be, NULL), SAGA_OK);
    if (saga_omp_idle_init() < 0) {
        saga_backend_free_all(&be);
        skip(); /* OMP_WAIT_POLICY, GOMP_SPINCOUNT or SAGA_OMP_SPIN set, or not libgomp */
    }
    /* the main thread's own team first, so that its threads are in the count */
    int sum = 0;
#pragma omp parallel for reduction(+ : sum)
    for (int i = 0; i < 1000; i++)
        sum += i;
    assert_int_equal(sum, 499500);
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
    sum = 0;
#pragma omp parallel for reduction(+ : sum)
    for (int i = 0; i < 1000; i++)
        sum += i;
    assert_int_equal(sum, 499500);
    saga_omp_idle_spin(false);
    assert_int_equal(wait_threads(n0), n0);
    saga_backend_free_all(&be);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_omp_idle_spin_toggles_the_team),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
