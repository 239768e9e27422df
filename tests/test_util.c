/* test_util.c - datasets, temporary files, a failing allocator, blocks freed after a failure and
 * the bounds of comparisons in floating point, for the tests. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "test_util.h"

#include "saga_backend.h"
#include "saga_graph.h"
#include "saga_status.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

enum { PATH_SLOTS = 16, PATH_LEN = 4096 };
static char paths[PATH_SLOTS][PATH_LEN];
static int path_next;

static char *next_path(void) {
    char *p = paths[path_next];
    path_next = (path_next + 1) % PATH_SLOTS;
    return p;
}

const char *saga_test_data(const char *relative) {
    const char *dir = getenv("SAGA_DATA_DIR");
    if (!dir || !*dir)
        dir = SAGA_TEST_DATA_DIR;
    char *p = next_path();
    snprintf(p, PATH_LEN, "%s/%s", dir, relative);
    struct stat sb;
    if (stat(p, &sb) != 0) {
        const char *ci = getenv("CI");
        if (ci && strcmp(ci, "true") == 0)
            fail_msg("dataset %s is missing (set SAGA_DATA_DIR)", p);
        print_message("skipping: dataset %s is missing (set SAGA_DATA_DIR)\n", p);
        skip();
    }
    return p;
}

static const char *tmp_dir(void) {
    static char dir[PATH_LEN];
    if (!dir[0]) {
        snprintf(dir, sizeof dir, "%s/tmp-%d", SAGA_TEST_BINARY_DIR, (int)getpid());
        if (mkdir(dir, 0700) != 0 && errno != EEXIST)
            fail_msg("cannot create %s: %s", dir, strerror(errno));
    }
    return dir;
}

const char *saga_test_tmp(const char *name) {
    static int counter;
    char *p = next_path();
    snprintf(p, PATH_LEN, "%s/%d-%s", tmp_dir(), counter++, name);
    return p;
}

const char *saga_test_write(const char *name, const void *data, size_t len) {
    const char *p = saga_test_tmp(name);
    FILE *f = fopen(p, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, len, f), len);
    assert_int_equal(fclose(f), 0);
    return p;
}

const char *saga_test_write_str(const char *name, const char *text) {
    return saga_test_write(name, text, strlen(text));
}

const char *saga_test_write_gz(const char *name, const void *data, size_t len) {
    const char *p = saga_test_tmp(name);
    gzFile f = gzopen(p, "wb");
    assert_non_null(f);
    if (len)
        assert_int_equal(gzwrite(f, data, (unsigned)len), (int)len);
    assert_int_equal(gzclose(f), Z_OK);
    return p;
}

/* ---- failing allocator --------------------------------------------------------------------- */

static long alloc_count;
static long alloc_fail_at;

static void *failing_malloc(void *ud, size_t size) {
    (void)ud;
    if (alloc_fail_at > 0 && ++alloc_count >= alloc_fail_at)
        return NULL;
    return malloc(size);
}
static void *failing_realloc(void *ud, void *ptr, size_t size) {
    (void)ud;
    if (alloc_fail_at > 0 && ++alloc_count >= alloc_fail_at)
        return NULL;
    return realloc(ptr, size);
}
static void failing_free(void *ud, void *ptr) {
    (void)ud;
    free(ptr);
}

long saga_test_fail_alloc_after(long n) {
    long made = alloc_count;
    alloc_count = 0;
    alloc_fail_at = n;
    if (n > 0) {
        saga_allocator a = {failing_malloc, failing_realloc, failing_free, NULL};
        saga_set_allocator(&a);
    } else {
        saga_set_allocator(NULL);
    }
    return made;
}

void saga_test_assert_error_contains(const char *needle, ...) {
    const char *msg = saga_last_error();
    va_list ap;
    va_start(ap, needle);
    for (const char *n = needle; n; n = va_arg(ap, const char *))
        if (!strstr(msg, n))
            fail_msg("error message \"%s\" lacks \"%s\"", msg, n);
    va_end(ap);
}

/* ---- blocks freed when a test fails ---------------------------------------------------------- */

static void **held;
static size_t n_held, cap_held;

static void hold(void *p) {
    if (!p)
        return;
    if (n_held == cap_held) {
        size_t cap = cap_held ? 2 * cap_held : 256;
        void **h = realloc(held, cap * sizeof *h);
        if (!h)
            fail_msg("out of memory tracking test blocks");
        held = h;
        cap_held = cap;
    }
    held[n_held++] = p;
}

static void unhold(void *p) {
    for (size_t i = n_held; i-- > 0;)
        if (held[i] == p) {
            held[i] = held[--n_held];
            return;
        }
}

void *saga_test_malloc_(size_t size, const char *file, int line) {
    void *p = _test_malloc(size, file, line);
    hold(p);
    return p;
}

void *saga_test_calloc_(size_t n, size_t size, const char *file, int line) {
    void *p = _test_calloc(n, size, file, line);
    hold(p);
    return p;
}

void *saga_test_realloc_(void *p, size_t size, const char *file, int line) {
    void *q = _test_realloc(p, size, file, line);
    if (q || size == 0)
        unhold(p);
    hold(q);
    return q;
}

void saga_test_free_(void *p, const char *file, int line) {
    if (!p)
        return;
    unhold(p);
    _test_free(p, file, line);
}

int saga_test_setup(void **state) {
    (void)state;
    return 0;
}

int saga_test_teardown(void **state) {
    (void)state;
    while (n_held)
        _test_free(held[--n_held], __FILE__, __LINE__);
    free(held);
    held = NULL;
    cap_held = 0;
    return 0;
}

/* ---- bounds for results computed in different orders ----------------------------------------- */

double saga_test_gamma(int64_t K, double u) {
    const double ku = (double)K * u;
    return ku < 0.5 ? ku / (1.0 - ku) : INFINITY;
}

void saga_test_chain_add(saga_test_chain *c, int64_t K, int times) {
    c->rel += 2.0 * times * saga_test_gamma(K, c->u > 0 ? c->u : SAGA_TEST_U32);
}

double saga_test_pagerank_bound(const struct saga_graph *g, double d) {
    saga_graph_summary gs;
    saga_graph_summarize(g, &gs);
    saga_test_chain c = {0, SAGA_TEST_U64};
    saga_test_chain_add(&c, (int64_t)gs.in_degree_max + 1, 1);
    saga_test_chain_add(&c, gs.n_vertices, 1);
    return c.rel / (1.0 - d);
}

#define WORST()                                                                                    \
    double worst = 0;                                                                              \
    *at = n > 0 ? 0 : -1;                                                                          \
    for (int64_t i = 0; i < n; i++) {                                                              \
        const double x = (double)a[i], y = (double)b[i];                                           \
        double d = 0;                                                                              \
        if (x != x || y != y)                                                                      \
            d = (x != x && y != y) ? 0 : INFINITY;                                                 \
        else if (x != y)                                                                           \
            d = fabs(x - y) / fmax(fmax(fabs(x), fabs(y)), scale);                                 \
        if (d > worst) {                                                                           \
            worst = d;                                                                             \
            *at = i;                                                                               \
        }                                                                                          \
    }                                                                                              \
    return worst

double saga_test_worst_f32(const float *a, const float *b, int64_t n, double scale, int64_t *at) {
    WORST();
}

double saga_test_worst_f64(const double *a, const double *b, int64_t n, double scale, int64_t *at) {
    WORST();
}
#undef WORST

double saga_test_mean_abs_f32(const float *a, int64_t n) {
    double s = 0;
    for (int64_t i = 0; i < n; i++)
        s += fabs((double)a[i]);
    return n ? s / (double)n : 0;
}

static void assert_close(const char *what, double worst, int64_t at, double x, double y,
                         const void *a, const void *b, size_t bytes, double bound, const char *file,
                         int line) {
    if (bound == 0 && memcmp(a, b, bytes) != 0)
        print_error("ERROR: %s: not the same bits (element %lld: %.9g vs %.9g)\n", what,
                    (long long)at, x, y);
    else if (bound != 0 && !(worst <= bound))
        print_error("ERROR: %s: element %lld: %.9g vs %.9g differ by %.3g relative, %.3g times "
                    "the bound %.3g\n",
                    what, (long long)at, x, y, worst, worst / bound, bound);
    else
        return;
    _fail(file, line);
}

void saga_test_assert_close_f32_(const char *what, const float *a, const float *b, int64_t n,
                                 double bound, double scale, const char *file, int line) {
    int64_t at;
    double worst = saga_test_worst_f32(a, b, n, scale, &at);
    if (bound == 0) /* the element named: the first that differs */
        for (at = 0; at < n && memcmp(&a[at], &b[at], sizeof *a) == 0; at++)
            ;
    const int ok = at >= 0 && at < n;
    assert_close(what, worst, at, ok ? a[at] : 0, ok ? b[at] : 0, a, b, (size_t)n * sizeof *a,
                 bound, file, line);
}

void saga_test_assert_close_f64_(const char *what, const double *a, const double *b, int64_t n,
                                 double bound, double scale, const char *file, int line) {
    int64_t at;
    double worst = saga_test_worst_f64(a, b, n, scale, &at);
    if (bound == 0)
        for (at = 0; at < n && memcmp(&a[at], &b[at], sizeof *a) == 0; at++)
            ;
    const int ok = at >= 0 && at < n;
    assert_close(what, worst, at, ok ? a[at] : 0, ok ? b[at] : 0, a, b, (size_t)n * sizeof *a,
                 bound, file, line);
}

uint64_t saga_test_u64(uint64_t *state) {
    uint64_t x = *state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *state = x;
}

float saga_test_uniform(uint64_t *state, float lo, float hi) {
    return lo + (hi - lo) * (float)((double)(saga_test_u64(state) >> 11) / (double)(1ull << 53));
}

void saga_test_rows_copies(saga_backend *be, saga_stream *s) {
    enum { R = 41, N = 23 };
    int32_t *rows = NULL; /* where the device reads them too */
    assert_int_equal(saga_backend_host_alloc(be, (void **)&rows, N * sizeof(int32_t)), SAGA_OK);
    for (int i = 0; i < N; i++)
        rows[i] = (int32_t)((i * 17 + 5) % R); /* distinct: 17 is prime to 41 */
    const size_t widths[] = {32, 20, 6, 3, 8};
    for (size_t w = 0; w < sizeof widths / sizeof widths[0]; w++) {
        const size_t rb = widths[w];
        unsigned char *host = NULL, *back = NULL, *dev = NULL;
        assert_int_equal(saga_backend_host_alloc(be, (void **)&host, R * rb), SAGA_OK);
        assert_int_equal(saga_backend_host_alloc(be, (void **)&back, N * rb), SAGA_OK);
        assert_int_equal(saga_backend_alloc(be, (void **)&dev, N * rb), SAGA_OK);
        for (size_t i = 0; i < R * rb; i++)
            host[i] = (unsigned char)(i * 131 + w);
        saga_backend_reset_stats(be);
        /* by index, then the contiguous rows 7 .. 7 + N - 1 behind them */
        saga_host_rows hr = {.base = host, .row_bytes = rb, .rows = rows, .n = N};
        assert_int_equal(saga_memcpy_rows_h2d_async(s, dev, &hr), SAGA_OK);
        assert_int_equal(saga_memcpy_d2h_async(s, back, dev, N * rb), SAGA_OK);
        assert_int_equal(saga_stream_synchronize(s), SAGA_OK);
        for (int i = 0; i < N; i++)
            if (memcmp(back + (size_t)i * rb, host + (size_t)rows[i] * rb, rb) != 0)
                fail_msg("%zu-byte rows: row %d (host row %d) differs", rb, i, rows[i]);
        hr = (saga_host_rows){.base = host, .row_bytes = rb, .first = 7, .n = N};
        assert_int_equal(saga_memcpy_rows_h2d_async(s, dev, &hr), SAGA_OK);
        assert_int_equal(saga_memcpy_d2h_async(s, back, dev, N * rb), SAGA_OK);
        assert_int_equal(saga_stream_synchronize(s), SAGA_OK);
        assert_memory_equal(back, host + 7 * rb, N * rb);
        saga_backend_stats st;
        saga_backend_get_stats(be, &st);
        assert_int_equal(st.h2d_bytes, 2 * N * rb);
        saga_backend_free(be, dev, N * rb);
        saga_backend_host_free(be, host, R * rb);
        saga_backend_host_free(be, back, N * rb);
    }

    /* rows of 5 floats added into host rows by index: small integers, so the sums are exact */
    enum { C = 5 };
    float *y = NULL, *x = NULL, *dx = NULL, *dy = NULL;
    assert_int_equal(saga_backend_host_alloc(be, (void **)&y, R * C * sizeof(float)), SAGA_OK);
    assert_int_equal(saga_backend_host_alloc(be, (void **)&x, R * C * sizeof(float)), SAGA_OK);
    assert_int_equal(saga_backend_alloc(be, (void **)&dx, N * C * sizeof(float)), SAGA_OK);
    assert_int_equal(saga_backend_alloc(be, (void **)&dy, R * C * sizeof(float)), SAGA_OK);
    for (int i = 0; i < R * C; i++) {
        y[i] = (float)(i % 13);
        x[i] = (float)(i % 7) - 3.0f;
    }
    saga_backend_reset_stats(be);
    assert_int_equal(saga_memcpy_h2d_async(s, dx, x, N * C * sizeof(float)), SAGA_OK);
    saga_host_rows hr = {.base = y, .row_bytes = C * sizeof(float), .rows = rows, .n = N};
    assert_int_equal(saga_add_rows_d2h_async(s, &hr, dx), SAGA_OK);
    /* a copy queued behind the addition reads the sums */
    assert_int_equal(saga_memcpy_h2d_async(s, dy, y, R * C * sizeof(float)), SAGA_OK);
    assert_int_equal(saga_memcpy_d2h_async(s, x + N * C, dy, (R - N) * C * sizeof(float)), SAGA_OK);
    assert_int_equal(saga_stream_synchronize(s), SAGA_OK);
    saga_backend_stats st;
    saga_backend_get_stats(be, &st);
    assert_int_equal(st.d2h_bytes, (N + (R - N)) * C * sizeof(float));
    bool added[R] = {false};
    for (int i = 0; i < N; i++)
        added[rows[i]] = true;
    int src_of[R];
    for (int i = 0; i < N; i++)
        src_of[rows[i]] = i;
    for (int r = 0; r < R; r++)
        for (int j = 0; j < C; j++) {
            float want = (float)((r * C + j) % 13);
            if (added[r])
                want += (float)((src_of[r] * C + j) % 7) - 3.0f;
            if (y[r * C + j] != want)
                fail_msg("added rows: y[%d][%d] = %g, want %g", r, j, y[r * C + j], want);
            if (r < R - N && x[N * C + r * C + j] != want)
                fail_msg("the copy after the addition read y[%d][%d] = %g, want %g", r, j,
                         x[N * C + r * C + j], want);
        }

    /* refused: an addition of rows that are not floats; a negative count. Nothing to move needs
     * no device pointer */
    hr = (saga_host_rows){.base = y, .row_bytes = 6, .rows = rows, .n = 2};
    assert_int_equal(saga_add_rows_d2h_async(s, &hr, dx), SAGA_ERR_INVALID_ARG);
    saga_test_assert_error_contains("saga_add_rows_d2h_async", "not a valid request", NULL);
    hr = (saga_host_rows){.base = y, .row_bytes = 4, .n = -1};
    assert_int_equal(saga_memcpy_rows_h2d_async(s, dx, &hr), SAGA_ERR_INVALID_ARG);
    hr = (saga_host_rows){.base = y, .row_bytes = 4, .n = 0};
    assert_int_equal(saga_memcpy_rows_h2d_async(s, NULL, &hr), SAGA_OK);
    saga_backend_free(be, dx, N * C * sizeof(float));
    saga_backend_free(be, dy, R * C * sizeof(float));
    saga_backend_host_free(be, x, R * C * sizeof(float));
    saga_backend_host_free(be, y, R * C * sizeof(float));
    saga_backend_host_free(be, rows, N * sizeof(int32_t));
}
