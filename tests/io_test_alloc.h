/* io_test_alloc.h - a failing allocator that also counts live blocks, for the parser tests:
 * failing the n-th allocation must give SAGA_ERR_OUT_OF_MEMORY and leave nothing allocated,
 * which this checks without a leak sanitizer. Include after "test_util.h".
 *
 *   IO_OOM_LOOP(st = saga_mtx_read(&g, path, NULL), saga_graph_free(&g));
 */
#pragma once

#include "saga_status.h"

#include <stdlib.h>

static long io_alloc_count, io_alloc_fail_at, io_alloc_live;

static void *io_alloc_malloc(void *ud, size_t size) {
    (void)ud;
    if (io_alloc_fail_at > 0 &&
        __atomic_add_fetch(&io_alloc_count, 1, __ATOMIC_SEQ_CST) >= io_alloc_fail_at)
        return NULL;
    void *p = malloc(size);
    if (p)
        __atomic_add_fetch(&io_alloc_live, 1, __ATOMIC_SEQ_CST);
    return p;
}

static void *io_alloc_realloc(void *ud, void *ptr, size_t size) {
    (void)ud;
    if (io_alloc_fail_at > 0 &&
        __atomic_add_fetch(&io_alloc_count, 1, __ATOMIC_SEQ_CST) >= io_alloc_fail_at)
        return NULL;
    void *p = realloc(ptr, size);
    if (p && !ptr)
        __atomic_add_fetch(&io_alloc_live, 1, __ATOMIC_SEQ_CST);
    return p;
}

static void io_alloc_free(void *ud, void *ptr) {
    (void)ud;
    if (ptr)
        __atomic_sub_fetch(&io_alloc_live, 1, __ATOMIC_SEQ_CST);
    free(ptr);
}

/* Counts live blocks from now on and fails the n-th allocation and all after it (n = 0: none
 * fails). */
static inline void io_alloc_start(long n) {
    io_alloc_count = 0;
    io_alloc_live = 0;
    io_alloc_fail_at = n;
    saga_allocator a = {io_alloc_malloc, io_alloc_realloc, io_alloc_free, NULL};
    saga_set_allocator(&a);
}

/* Restores the normal allocator; returns the number of blocks still live. */
static inline long io_alloc_stop(void) {
    saga_set_allocator(NULL);
    io_alloc_fail_at = 0;
    return io_alloc_live;
}

/* Runs `call` (which assigns saga_status st) with the 1st, 2nd, ... allocation failing until it
 * succeeds; each failure must be SAGA_ERR_OUT_OF_MEMORY with nothing left allocated. On success
 * `release` frees the result, after which nothing may be live either. Needs a variable `st`. */
#define IO_OOM_LOOP(call, release)                                                                 \
    do {                                                                                           \
        long io_n_;                                                                                \
        for (io_n_ = 1; io_n_ < 100000; io_n_++) {                                                 \
            io_alloc_start(io_n_);                                                                 \
            call;                                                                                  \
            if (st == SAGA_OK) {                                                                   \
                release;                                                                           \
                assert_int_equal(io_alloc_stop(), 0);                                              \
                break;                                                                             \
            }                                                                                      \
            long io_live_ = io_alloc_stop();                                                       \
            if (st != SAGA_ERR_OUT_OF_MEMORY)                                                      \
                fail_msg("allocation %ld failing gave %s: %s", io_n_, saga_status_name(st),        \
                         saga_last_error());                                                       \
            if (io_live_ != 0)                                                                     \
                fail_msg("allocation %ld failing leaked %ld blocks", io_n_, io_live_);             \
        }                                                                                          \
        assert_true(io_n_ > 1); /* at least one allocation was failed */                           \
    } while (0)
