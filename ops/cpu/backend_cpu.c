/* backend_cpu.c - the CPU backend: aligned host memory as "device" memory, in-order streams that
 * run on the calling thread, and the OpenMP kernels of kernels.c.
 *
 * Streams and events: a copy or kernel issued on a CPU stream runs to completion before the
 * call that issues it returns. Every stream is therefore trivially in order, an event is
 * complete as soon as it is recorded, and waiting on a stream or event returns at once. This is
 * the semantics a device stream promises (work on one stream in order, events order streams),
 * with no overlap between copies and compute. */
#include "backend_impl.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

enum {
    CPU_ALIGN = 64,                 /* a cache line; what AVX-512 loads want */
    CPU_HUGE = 2 * 1024 * 1024,     /* a transparent huge page */
    CPU_HUGE_MIN = 2 * 1024 * 1024, /* regions this large are aligned to CPU_HUGE */
};

/* Allocates bytes aligned to 64 (to 2 MiB for regions of 2 MiB or more, so that the whole
 * region can be backed by huge pages). The block from saga_malloc is over-allocated and its base
 * pointer is kept just before the aligned pointer. */
static saga_status cpu_aligned_alloc(void **out, size_t bytes, const char *what) {
    size_t align = bytes >= CPU_HUGE_MIN ? CPU_HUGE : CPU_ALIGN;
    size_t extra = align + sizeof(void *);
    if (bytes > SIZE_MAX - extra)
        return saga_error(SAGA_ERR_OUT_OF_MEMORY, "out of memory: %zu bytes of %s", bytes, what);
    char *base = saga_malloc(bytes + extra);
    if (!base)
        return saga_error(SAGA_ERR_OUT_OF_MEMORY, "out of memory: %zu bytes of %s", bytes, what);
    uintptr_t a = ((uintptr_t)base + sizeof(void *) + align - 1) & ~(uintptr_t)(align - 1);
    ((void **)a)[-1] = base;
    if (bytes >= CPU_HUGE_MIN) {
        /* First touch of fresh 4 KiB pages costs about 10 us each on the VMs saga runs on; huge
         * pages cut the number of faults 512-fold. Advice only: failure is harmless. */
        (void)madvise((void *)a, bytes & ~(size_t)(CPU_HUGE - 1), MADV_HUGEPAGE);
    }
    *out = (void *)a;
    return SAGA_OK;
}

static void cpu_aligned_free(void *ptr) {
    if (ptr)
        saga_free(((void **)ptr)[-1]);
}

static void cpu_destroy(saga_backend *be) {
    be->ctx = NULL;
}

static saga_status cpu_alloc(saga_backend *be, void **out, size_t bytes) {
    (void)be;
    return cpu_aligned_alloc(out, bytes, "device memory (cpu)");
}

static void cpu_free(saga_backend *be, void *ptr, size_t bytes) {
    (void)be;
    (void)bytes;
    cpu_aligned_free(ptr);
}

static saga_status cpu_host_alloc(saga_backend *be, void **out, size_t bytes) {
    (void)be;
    return cpu_aligned_alloc(out, bytes, "host staging memory");
}

static void cpu_host_free(saga_backend *be, void *ptr, size_t bytes) {
    (void)be;
    (void)bytes;
    cpu_aligned_free(ptr);
}

/* Streams and events carry no state: work is done when it is issued. */
static saga_status cpu_stream_new(saga_backend *be, saga_stream *s) {
    (void)be;
    s->impl = NULL;
    return SAGA_OK;
}

static void cpu_stream_free(saga_stream *s) {
    s->impl = NULL;
}

static saga_status cpu_stream_sync(saga_stream *s) {
    (void)s;
    return SAGA_OK;
}

static saga_status cpu_stream_wait_event(saga_stream *s, saga_event *e) {
    (void)s;
    (void)e;
    return SAGA_OK;
}

static saga_status cpu_event_new(saga_backend *be, saga_event *e) {
    (void)be;
    e->impl = NULL;
    return SAGA_OK;
}

static void cpu_event_free(saga_event *e) {
    e->impl = NULL;
}

static saga_status cpu_event_record(saga_event *e, saga_stream *s) {
    (void)e;
    (void)s;
    return SAGA_OK;
}

static saga_status cpu_event_sync(saga_event *e) {
    (void)e;
    return SAGA_OK;
}

static bool cpu_event_query(saga_event *e) {
    (void)e;
    return true;
}

static saga_status cpu_memcpy_async(saga_stream *s, void *dst, const void *src, size_t n,
                                    saga_copy_kind kind) {
    (void)s;
    (void)kind;
    memmove(dst, src, n);
    return SAGA_OK;
}

static saga_status cpu_synchronize(saga_backend *be) {
    (void)be;
    return SAGA_OK;
}

static saga_status cpu_memset_async(saga_stream *s, void *dst, int value, size_t n) {
    (void)s;
    memset(dst, value, n);
    return SAGA_OK;
}

static const saga_backend_iface cpu_iface = {
    .version = 1,
    .destroy = cpu_destroy,
    .alloc = cpu_alloc,
    .free = cpu_free,
    .host_alloc = cpu_host_alloc,
    .host_free = cpu_host_free,
    .stream_new = cpu_stream_new,
    .stream_free = cpu_stream_free,
    .stream_sync = cpu_stream_sync,
    .stream_wait_event = cpu_stream_wait_event,
    .event_new = cpu_event_new,
    .event_free = cpu_event_free,
    .event_record = cpu_event_record,
    .event_sync = cpu_event_sync,
    .event_query = cpu_event_query,
    .memcpy_async = cpu_memcpy_async,
    .synchronize = cpu_synchronize,
    .memset_async = cpu_memset_async,
};

saga_status saga_cpu_backend_init(saga_backend *be) {
    long pages = sysconf(_SC_PHYS_PAGES);
    long page_size = sysconf(_SC_PAGESIZE);
    be->iface = &cpu_iface;
    be->kernels = &saga_cpu_kernels;
    be->ctx = NULL;
    be->kind = SAGA_BACKEND_CPU;
    snprintf(be->name, sizeof be->name, "cpu");
    be->device_total = pages > 0 && page_size > 0 ? (size_t)pages * (size_t)page_size : 0;
    return SAGA_OK;
}
