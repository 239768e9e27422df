/* status.c - status names, the thread-local error message, and the host allocator hook. */
#include "mem_impl.h"
#include "saga_status.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#ifndef SAGA_VERSION_STRING
#define SAGA_VERSION_STRING "0.0.0"
#endif

enum { SAGA_ERROR_MSG_MAX = 1024 };

static _Thread_local char error_msg[SAGA_ERROR_MSG_MAX];
static _Thread_local saga_status error_status = SAGA_OK;

const char *saga_status_name(saga_status st) {
    switch (st) {
    case SAGA_OK:
        return "SAGA_OK";
    case SAGA_ERR_INVALID_ARG:
        return "SAGA_ERR_INVALID_ARG";
    case SAGA_ERR_IO:
        return "SAGA_ERR_IO";
    case SAGA_ERR_PARSE:
        return "SAGA_ERR_PARSE";
    case SAGA_ERR_OUT_OF_MEMORY:
        return "SAGA_ERR_OUT_OF_MEMORY";
    case SAGA_ERR_DEVICE:
        return "SAGA_ERR_DEVICE";
    case SAGA_ERR_UNSUPPORTED:
        return "SAGA_ERR_UNSUPPORTED";
    case SAGA_ERR_CORRUPT:
        return "SAGA_ERR_CORRUPT";
    case SAGA_ERR_NOT_CONVERGED:
        return "SAGA_ERR_NOT_CONVERGED";
    case SAGA_ERR_BUDGET:
        return "SAGA_ERR_BUDGET";
    case SAGA_ERR_COMM:
        return "SAGA_ERR_COMM";
    case SAGA_ERR_INTERNAL:
        return "SAGA_ERR_INTERNAL";
    default:
        return "SAGA_ERR_UNKNOWN";
    }
}

const char *saga_last_error(void) {
    return error_msg;
}

saga_status saga_last_status(void) {
    return error_status;
}

void saga_error_clear(void) {
    error_msg[0] = '\0';
    error_status = SAGA_OK;
}

saga_status saga_error_v(saga_status st, const char *fmt, va_list ap) {
    vsnprintf(error_msg, sizeof error_msg, fmt, ap);
    error_status = st;
    return st;
}

saga_status saga_error(saga_status st, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    saga_error_v(st, fmt, ap);
    va_end(ap);
    return st;
}

saga_status saga_error_prefix(saga_status st, const char *fmt, ...) {
    char prefix[SAGA_ERROR_MSG_MAX];
    char old[SAGA_ERROR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, error_msg, sizeof old);
    /* prefix + old message, cut at the buffer's end */
    size_t np = strlen(prefix), no = strlen(old);
    if (np > sizeof error_msg - 1)
        np = sizeof error_msg - 1;
    if (no > sizeof error_msg - 1 - np)
        no = sizeof error_msg - 1 - np;
    memcpy(error_msg, prefix, np);
    memcpy(error_msg + np, old, no);
    error_msg[np + no] = '\0';
    error_status = st;
    return st;
}

saga_status saga_error_append(saga_status st, const char *fmt, ...) {
    size_t n = strlen(error_msg);
    va_list ap;
    va_start(ap, fmt);
    if (n < sizeof error_msg - 1)
        vsnprintf(error_msg + n, sizeof error_msg - n, fmt, ap);
    va_end(ap);
    error_status = st;
    return st;
}

/* ---- allocator hook ------------------------------------------------------------------------ */

static void *libc_malloc(void *ud, size_t size) {
    (void)ud;
    return malloc(size);
}
static void *libc_realloc(void *ud, void *ptr, size_t size) {
    (void)ud;
    return realloc(ptr, size);
}
static void libc_free(void *ud, void *ptr) {
    (void)ud;
    free(ptr);
}

static saga_allocator allocator = {libc_malloc, libc_realloc, libc_free, NULL};

void saga_set_allocator(const saga_allocator *a) {
    if (a)
        allocator = *a;
    else
        allocator = (saga_allocator){libc_malloc, libc_realloc, libc_free, NULL};
}

void *saga_malloc(size_t size) {
    return allocator.malloc_fn(allocator.ud, size ? size : 1);
}

void *saga_calloc(size_t count, size_t size) {
    if (size && count > SIZE_MAX / size)
        return NULL;
    void *p = saga_malloc(count * size);
    if (p)
        memset(p, 0, count * size);
    return p;
}

void *saga_realloc(void *ptr, size_t size) {
    return allocator.realloc_fn(allocator.ud, ptr, size ? size : 1);
}

void saga_free(void *ptr) {
    if (ptr)
        allocator.free_fn(allocator.ud, ptr);
}

static saga_status oom(size_t count, size_t size, const char *what) {
    return saga_error(SAGA_ERR_OUT_OF_MEMORY, "out of memory: %zu x %zu bytes for %s", count, size,
                      what ? what : "a buffer");
}

saga_status saga_alloc_array(void **out, size_t count, size_t size, const char *what) {
    if (size && count > SIZE_MAX / size)
        return oom(count, size, what);
    void *p = saga_malloc(count * size);
    if (!p)
        return oom(count, size, what);
    *out = p;
    return SAGA_OK;
}

saga_status saga_alloc_zeroed(void **out, size_t count, size_t size, const char *what) {
    void *p = NULL;
    saga_status st = saga_alloc_array(&p, count, size, what);
    if (st < 0)
        return st;
    memset(p, 0, count * size);
    *out = p;
    return SAGA_OK;
}

saga_status saga_realloc_array(void **ptr, size_t count, size_t size, const char *what) {
    if (size && count > SIZE_MAX / size)
        return oom(count, size, what);
    void *p = saga_realloc(*ptr, count * size);
    if (!p)
        return oom(count, size, what);
    *ptr = p;
    return SAGA_OK;
}

const char *saga_version(void) {
    return SAGA_VERSION_STRING;
}

double saga_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void saga_advise_huge(void *p, size_t bytes) {
#ifdef MADV_HUGEPAGE
    if (bytes < (8u << 20))
        return;
    uintptr_t a = ((uintptr_t)p + 4095) & ~(uintptr_t)4095;
    uintptr_t e = ((uintptr_t)p + bytes) & ~(uintptr_t)4095;
    if (e > a)
        (void)madvise((void *)a, e - a, MADV_HUGEPAGE);
#else
    (void)p;
    (void)bytes;
#endif
}
