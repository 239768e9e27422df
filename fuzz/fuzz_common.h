/* fuzz_common.h - shared by the libFuzzer targets: setup, options taken from the first input
 * byte, an allocation cap, and a checker of the invariants every parsed graph must hold. */
#pragma once

#include "parsers.h"
#include "saga_log.h"

#include <math.h>
#include <stdlib.h>

/* Single blocks above this are refused, so that a size declared in a header (a vertex count of
 * two billion) becomes SAGA_ERR_OUT_OF_MEMORY, a path worth exercising, instead of tripping
 * libFuzzer's own malloc limit. */
enum { FUZZ_ALLOC_CAP = 32 << 20 };

static void *fuzz_malloc(void *ud, size_t size) {
    (void)ud;
    return size > FUZZ_ALLOC_CAP ? NULL : malloc(size);
}
static void *fuzz_realloc(void *ud, void *ptr, size_t size) {
    (void)ud;
    return size > FUZZ_ALLOC_CAP ? NULL : realloc(ptr, size);
}
static void fuzz_free(void *ud, void *ptr) {
    (void)ud;
    free(ptr);
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    /* One OpenMP thread: runs stay reproducible and two fuzzers share two cores. */
    setenv("OMP_NUM_THREADS", "1", 0);
    saga_allocator a = {fuzz_malloc, fuzz_realloc, fuzz_free, NULL};
    saga_set_allocator(&a);
    saga_log_set_level(SAGA_LOG_ERROR);
    return 0;
}

/* Loader options from one byte: bits 0-1 weights, bit 2 undirected, bit 3 drop self-loops,
 * bits 4-5 duplicates. */
static inline saga_load_opts fuzz_load_opts(uint8_t b) {
    saga_load_opts o = {0};
    o.format = SAGA_FORMAT_AUTO;
    o.weights = (saga_weights)((b & 3) % SAGA_WEIGHTS_COUNT);
    o.graph = saga_graph_opts_defaults();
    o.graph.undirected = (b >> 2) & 1;
    o.graph.self_loops = ((b >> 3) & 1) ? SAGA_SELF_LOOPS_DROP : SAGA_SELF_LOOPS_KEEP;
    o.graph.duplicates = (saga_duplicates)((b >> 4) & 3);
    return o;
}

static void fuzz_check_csr(saga_csr c, int32_t n, int64_t m) {
    if (c.n_rows != n || c.nnz != m || c.offsets[0] != 0 || c.offsets[n] != m)
        __builtin_trap();
    for (int32_t v = 0; v < n; v++) {
        if (c.offsets[v] > c.offsets[v + 1])
            __builtin_trap();
        for (int64_t k = c.offsets[v]; k < c.offsets[v + 1]; k++) {
            if (c.indices[k] < 0 || c.indices[k] >= n)
                __builtin_trap();
            if (k > c.offsets[v] && c.indices[k - 1] > c.indices[k])
                __builtin_trap();
        }
    }
}

/* Traps when a graph a parser accepted breaks an invariant of saga_graph.h. */
static inline void fuzz_check_graph(const saga_graph *g) {
    int32_t n = saga_graph_n_vertices(g);
    int64_t m = saga_graph_n_edges(g);
    if (n < 0 || m < 0)
        __builtin_trap();
    saga_csr in = saga_graph_in(g), out = saga_graph_out(g);
    if ((in.weights == NULL) != (out.weights == NULL) ||
        saga_graph_has_weights(g) != (in.weights != NULL))
        __builtin_trap();
    fuzz_check_csr(in, n, m);
    fuzz_check_csr(out, n, m);
    const int64_t *ids = saga_graph_orig_ids(g);
    for (int32_t v = 1; ids && v < n; v++)
        if (ids[v - 1] >= ids[v])
            __builtin_trap();
}
