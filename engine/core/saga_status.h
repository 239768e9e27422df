/* saga_status.h - status codes, the thread-local error message, and the host allocator hook.
 *
 *   saga_status st = SAGA_OK;
 *   int32_t *buf = NULL;
 *   SAGA_TRY(saga_alloc_array((void **)&buf, n, sizeof *buf, "degree array"));
 *   SAGA_CHECK(n > 0, SAGA_ERR_INVALID_ARG, "n must be positive, got %lld", (long long)n);
 *   ...
 * fail:
 *   saga_free(buf);
 *   return st;
 *
 * When a call fails, saga_last_error() returns a message that names what went wrong with its
 * context (file, line, expected value); the message is per thread.
 */
#pragma once

#include "saga_api.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* 0 is success; every error is negative. Append-only. */
typedef enum saga_status {
    SAGA_OK = 0,
    SAGA_ERR_INVALID_ARG = -1,   /* a caller passed something out of range or inconsistent */
    SAGA_ERR_IO = -2,            /* open/read/write/mmap failed, missing file, a directory */
    SAGA_ERR_PARSE = -3,         /* malformed text input */
    SAGA_ERR_OUT_OF_MEMORY = -4, /* host allocation failed */
    SAGA_ERR_DEVICE = -5,        /* device or driver failure, no device present */
    SAGA_ERR_UNSUPPORTED = -6,   /* valid request this build or backend cannot do */
    SAGA_ERR_CORRUPT = -7,       /* binary input fails its magic, version, sizes or checksum */
    SAGA_ERR_NOT_CONVERGED = -8, /* an iterative method stopped before its tolerance */
    SAGA_ERR_BUDGET = -9,        /* a device allocation would exceed the memory budget */
    SAGA_ERR_INTERNAL = -10,     /* a broken invariant inside saga (a bug) */
    SAGA_ERR_COMM = -11,         /* communication between ranks failed, or another rank did */
    SAGA_ERR_COUNT_ = -12
} saga_status;

/* Short constant name of a status ("SAGA_ERR_PARSE"). Never NULL. */
SAGA_API const char *saga_status_name(saga_status st);

/* The calling thread's last error message, or "" when none was set. The pointer stays valid
 * until the next saga call on this thread that sets or clears the message. */
SAGA_API const char *saga_last_error(void);
/* The status that came with the calling thread's last error message (saga_error and the like),
 * or SAGA_OK when none was set or it was cleared. */
SAGA_API saga_status saga_last_status(void);

/* Sets the thread's error message (printf-style) and returns st, so that
 * `return saga_error(SAGA_ERR_PARSE, "%s:%lld: ...", ...)` reads naturally. */
SAGA_API saga_status saga_error(saga_status st, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
SAGA_API saga_status saga_error_v(saga_status st, const char *fmt, va_list ap);

/* Prepends context to the current message ("loading x.sgr: " + old message). Returns st. */
SAGA_API saga_status saga_error_prefix(saga_status st, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Appends to the current message ("... failed" + " (try --device cpu)"). Returns st. */
SAGA_API saga_status saga_error_append(saga_status st, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

SAGA_API void saga_error_clear(void);

/* Jumps to the function's `fail:` label when expr returns an error; needs `saga_status st`. */
#define SAGA_TRY(expr)                                                                             \
    do {                                                                                           \
        st = (expr);                                                                               \
        if (st < 0)                                                                                \
            goto fail;                                                                             \
    } while (0)

/* Sets the message and jumps to `fail:` when cond is false. */
#define SAGA_CHECK(cond, code, ...)                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            st = saga_error((code), __VA_ARGS__);                                                  \
            goto fail;                                                                             \
        }                                                                                          \
    } while (0)

/* ---- host allocation --------------------------------------------------------------------- */

/* Every host allocation saga makes goes through these, so that tests can fail the N-th one
 * and embedders can route memory. The functions must behave like malloc/realloc/free. */
typedef struct saga_allocator {
    void *(*malloc_fn)(void *ud, size_t size);
    void *(*realloc_fn)(void *ud, void *ptr, size_t size);
    void (*free_fn)(void *ud, void *ptr);
    void *ud;
} saga_allocator;

/* Installs a (copied) allocator; NULL restores the C library's. Not thread-safe: call it
 * before other saga calls. */
SAGA_API void saga_set_allocator(const saga_allocator *a);

SAGA_API void *saga_malloc(size_t size);
SAGA_API void *saga_calloc(size_t count, size_t size);
SAGA_API void *saga_realloc(void *ptr, size_t size);
SAGA_API void saga_free(void *ptr);

/* Allocates count*size bytes into *out (checked for overflow). On failure *out is untouched
 * and SAGA_ERR_OUT_OF_MEMORY is returned with a message naming `what`. zero: clear memory. */
SAGA_API saga_status saga_alloc_array(void **out, size_t count, size_t size, const char *what);
SAGA_API saga_status saga_alloc_zeroed(void **out, size_t count, size_t size, const char *what);
/* Grows *ptr to count*size bytes; on failure *ptr is left valid and unchanged. */
SAGA_API saga_status saga_realloc_array(void **ptr, size_t count, size_t size, const char *what);

/* ---- misc ------------------------------------------------------------------------------ */

/* Version of the library, "MAJOR.MINOR.PATCH". */
SAGA_API const char *saga_version(void);

/* Monotonic wall clock in seconds. */
SAGA_API double saga_now(void);

#ifdef __cplusplus
}
#endif
