/* test_util.h - helpers shared by the cmocka tests: datasets, temporary files, failing
 * allocators. Include after <cmocka.h>. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Path of a file under the datasets directory ($SAGA_DATA_DIR, else the configured default), in
 * a static buffer. When the file is missing the test is skipped, or fails when $CI is "true". */
const char *saga_test_data(const char *relative);

/* A fresh path in the test's temporary directory (static buffer, unique per call). The file is
 * not created. */
const char *saga_test_tmp(const char *name);

/* Writes len bytes to a fresh temporary file and returns its path (static buffer per call). */
const char *saga_test_write(const char *name, const void *data, size_t len);
/* Same, from a NUL-terminated string. */
const char *saga_test_write_str(const char *name, const char *text);
/* Same, gzip-compressed. */
const char *saga_test_write_gz(const char *name, const void *data, size_t len);

/* Installs an allocator that fails the n-th allocation from now on (1 = the next one) and every
 * one after it; n = 0 restores the normal allocator. Returns how many allocations were made
 * since the last call. */
long saga_test_fail_alloc_after(long n);

/* Asserts that the last error message contains every NULL-terminated needle. */
void saga_test_assert_error_contains(const char *needle, ...);

/* ---- blocks freed when a test fails -------------------------------------------------------------
 * test_malloc, test_calloc and test_realloc record their blocks until test_free; the teardown
 * cmocka_unit_test now carries (saga_test_teardown) frees what a failed test left, so that a
 * failure is reported once and not again as leaked blocks. A test that returns with blocks still
 * allocated fails as before (cmocka checks when the test returns, before the teardown). The setup
 * (saga_test_setup, which does nothing) is what makes cmocka take its count of blocks before the
 * test rather than before the teardown. A test with a teardown of its own uses saga_test_setup
 * and calls saga_test_teardown from it. */
int saga_test_setup(void **state);
void *saga_test_malloc_(size_t size, const char *file, int line);
void *saga_test_calloc_(size_t n, size_t size, const char *file, int line);
void *saga_test_realloc_(void *p, size_t size, const char *file, int line);
void saga_test_free_(void *p, const char *file, int line);
int saga_test_teardown(void **state);

#undef test_malloc
#undef test_calloc
#undef test_realloc
#undef test_free
#define test_malloc(size) saga_test_malloc_(size, __FILE__, __LINE__)
#define test_calloc(n, size) saga_test_calloc_(n, size, __FILE__, __LINE__)
#define test_realloc(p, size) saga_test_realloc_(p, size, __FILE__, __LINE__)
#define test_free(p) saga_test_free_(p, __FILE__, __LINE__)
#undef cmocka_unit_test
#define cmocka_unit_test(f) cmocka_unit_test_setup_teardown(f, saga_test_setup, saga_test_teardown)

/* ---- bounds for results computed in different orders ----------------------------------------
 *
 * Two computations of the same value that add in different orders (streamed and in memory, CUDA
 * and CPU, ranks and one process, another BLAS kernel) differ by rounding, and by how much follows
 * from the arithmetic, not from the machine the suite was written on. In f32 (unit roundoff
 * u = 2^-24) a sum of K terms, computed in any order, is within
 *     gamma_K * sum |terms|,  gamma_K = K u / (1 - K u)
 * of the exact sum (Higham, Accuracy and Stability of Numerical Algorithms, 2nd ed., eq. 3.5 and
 * 4.4: pairwise, blocked or sequential, with or without fused multiply-adds); two orders are within
 * twice that of each other. A value that passes through a chain of such sums (a layer's product,
 * its aggregation, the next layer's; a step's forward pass, its backward pass, the update, the
 * next step) carries each link's relative error into the next to first order, through operations
 * that do not enlarge it relative to the magnitude of their terms (a product by the same weights,
 * ReLU, softmax and log-softmax are 1-Lipschitz): the bound on the difference relative to that
 * magnitude is the sum of the links'. So a wide layer or a long sum gets a wider bound than a
 * narrow one, and results computed by the same kernels in the same order compare bitwise (bound
 * 0). */
#define SAGA_TEST_U32 0x1p-24
/* The unit roundoffs of bfloat16 (8 significant bits) and IEEE binary16 (11). */
#define SAGA_TEST_U_BF16 0x1p-8
#define SAGA_TEST_U_FP16 0x1p-11

/* f64's unit roundoff. */
#define SAGA_TEST_U64 0x1p-53

/* gamma_K (above) for unit roundoff u. */
double saga_test_gamma(int64_t K, double u);

/* A chain of sums (above): saga_test_chain_add(&c, K, times) adds `times` links of K terms each;
 * c.rel is then the bound on two orders' difference relative to the magnitude of the terms. c.u is
 * the unit roundoff, 0 for f32's. */
typedef struct saga_test_chain {
    double rel, u;
} saga_test_chain;
void saga_test_chain_add(saga_test_chain *c, int64_t K, int times);

/* The largest |a[i] - b[i]| / max(|a[i]|, |b[i]|, scale) over n values, and its index. scale is
 * the magnitude below which a difference is taken relative to it rather than to the values
 * (results near zero come from terms of the data's size cancelling). A NaN anywhere gives
 * infinity, unless both hold it at the same place. */
double saga_test_worst_f32(const float *a, const float *b, int64_t n, double scale, int64_t *at);
double saga_test_worst_f64(const double *a, const double *b, int64_t n, double scale, int64_t *at);

/* The mean of |a[i]|: the scale of values whose terms are of the data's size. */
double saga_test_mean_abs_f32(const float *a, int64_t n);

/* Test data from a xorshift64 stream (state: any non-zero value): the next 64 bits, and a float
 * uniform in [lo, hi) from their top 53. */
uint64_t saga_test_u64(uint64_t *state);
float saga_test_uniform(uint64_t *state, float lo, float hi);

/* Fails the test, naming what, the worst element and how far past the bound it is, unless every
 * a[i] and b[i] agree within bound (relative, as in saga_test_worst_f32); bound 0 asks for the
 * same bits. */
#define saga_test_assert_close_f32(what, a, b, n, bound, scale)                                    \
    saga_test_assert_close_f32_(what, a, b, n, bound, scale, __FILE__, __LINE__)
#define saga_test_assert_close_f64(what, a, b, n, bound, scale)                                    \
    saga_test_assert_close_f64_(what, a, b, n, bound, scale, __FILE__, __LINE__)
void saga_test_assert_close_f32_(const char *what, const float *a, const float *b, int64_t n,
                                 double bound, double scale, const char *file, int line);
void saga_test_assert_close_f64_(const char *what, const double *a, const double *b, int64_t n,
                                 double bound, double scale, const char *file, int line);

/* The bound on two computations of PageRank (damping d < 1, f64) on g that add in different
 * orders, or on one against a reference, after any number of iterations, relative to each rank.
 * Every term is non-negative, so the magnitude of a rank's terms is the rank: an iteration sums at
 * most the largest in-degree of contributions, and the n ranks of the dangling mass that every
 * vertex receives a share of; an error carried from the previous iteration is multiplied by d, so
 * the errors of all iterations add up to at most 1 / (1 - d) times one iteration's. */
struct saga_graph;
double saga_test_pagerank_bound(const struct saga_graph *g, double d);

/* Checks saga_memcpy_rows_h2d_async and saga_add_rows_d2h_async on stream s of be: rows gathered
 * by index and contiguous, in every width a backend may move them by (16, 4, 2 and 1 bytes),
 * rows of floats added into a host array, in stream order with plain copies, the bytes counted,
 * and the requests refused. */
struct saga_backend;
struct saga_stream;
void saga_test_rows_copies(struct saga_backend *be, struct saga_stream *s);
