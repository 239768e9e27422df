/* bench_h2d.c - host-to-device copy bandwidth as saga reaches it, through the public backend API
 * only (engine/backend/saga_backend.h), for copies of 1 MiB to 256 MiB.
 *
 *   bench_h2d [SPEC]      SPEC: cuda (default), cuda:N, cpu or auto, as saga_backend_open takes
 *
 * The host buffer comes from saga_backend_host_alloc (pinned memory on CUDA), the device buffer
 * from saga_backend_alloc; the copies are saga_memcpy_h2d_async on a stream of saga_stream_new,
 * timed by two events (saga_event_record before the first copy and after the last,
 * saga_event_elapsed). For each size, one untimed copy, then TRIALS trials of back-to-back
 * copies of that size, as many as make about 1 GiB (at least MIN_COPIES); the table gives the
 * mean time per copy and the bandwidth of the best trial, in GB/s of 10^9 bytes.
 * bench/h2d_cuda.cu measures the same schedule with the CUDA runtime directly.
 *
 * On the CPU backend the "device" is host memory and a copy is a memcpy run by the stream's
 * worker thread, so the figure is the host's memcpy bandwidth through saga's stream machinery.
 *
 * When SPEC names CUDA and no GPU can be used (no device, no driver, a build without the CUDA
 * backend), prints one line "no CUDA device: ..." and exits with 77.
 */
#include "saga_backend.h"

#include <stdio.h>
#include <string.h>

enum {
    MIN_SHIFT = 20, /* 1 MiB */
    MAX_SHIFT = 28, /* 256 MiB */
    TRIALS = 3,
    MIN_COPIES = 4,
    EXIT_SKIP = 77 /* the test driver's "skipped" */
};
static const double BYTES_PER_TRIAL = 1073741824.0; /* 1 GiB of copies per trial */

static int fail(const char *what) {
    fprintf(stderr, "bench_h2d: %s: %s\n", what, saga_last_error());
    return 1;
}

/* Times `copies` copies of `bytes` from host to dev on s; *seconds is the time between the two
 * events around them. */
static saga_status time_copies(saga_stream *s, saga_event *start, saga_event *end, void *dev,
                               const void *host, size_t bytes, int copies, double *seconds) {
    saga_status st = saga_event_record(start, s);
    for (int i = 0; i < copies && st >= 0; i++)
        st = saga_memcpy_h2d_async(s, dev, host, bytes);
    if (st >= 0)
        st = saga_event_record(end, s);
    if (st >= 0)
        st = saga_event_synchronize(end);
    if (st >= 0)
        st = saga_stream_synchronize(s); /* reports an error a queued copy met */
    if (st >= 0)
        st = saga_event_elapsed(start, end, seconds);
    return st;
}

int main(int argc, char **argv) {
    const char *spec = argc > 1 ? argv[1] : "cuda";
    if (argc > 2 || !strcmp(spec, "-h") || !strcmp(spec, "--help")) {
        fprintf(stderr, "usage: bench_h2d [cuda|cuda:N|cpu|auto]\n");
        return 2;
    }
    saga_backend *be = NULL;
    saga_status st = saga_backend_open(&be, spec, NULL);
    if (st == SAGA_ERR_DEVICE || st == SAGA_ERR_UNSUPPORTED) {
        printf("no CUDA device: %s\n", saga_last_error());
        return EXIT_SKIP;
    }
    if (st < 0)
        return fail(spec);

    const size_t max_bytes = (size_t)1 << MAX_SHIFT;
    void *host = NULL, *dev = NULL;
    saga_stream *s = NULL;
    saga_event *start = NULL, *end = NULL;
    int rc = 1;
    if (saga_backend_host_alloc(be, &host, max_bytes) < 0) {
        fail("saga_backend_host_alloc");
        goto done;
    }
    if (saga_backend_alloc(be, &dev, max_bytes) < 0) {
        fail("saga_backend_alloc");
        goto done;
    }
    if (saga_stream_new(&s, be) < 0 || saga_event_new(&start, be) < 0 ||
        saga_event_new(&end, be) < 0) {
        fail("stream and events");
        goto done;
    }
    /* Touch every host page, so that no copy pays for first-touch faults. */
    memset(host, 0x5a, max_bytes);

    printf("backend: %s\n", saga_backend_name(be));
    printf("host -> device, saga_memcpy_h2d_async from saga_backend_host_alloc memory; best of %d "
           "trials of ~1 GiB each\n",
           TRIALS);
    printf("%10s %8s %12s %10s\n", "size_MiB", "copies", "ms_per_copy", "GB_per_s");
    for (int shift = MIN_SHIFT; shift <= MAX_SHIFT; shift++) {
        const size_t bytes = (size_t)1 << shift;
        int copies = (int)(BYTES_PER_TRIAL / (double)bytes);
        copies = copies < MIN_COPIES ? MIN_COPIES : copies;
        double seconds = 0, best = 1e30;
        if (time_copies(s, start, end, dev, host, bytes, 1, &seconds) < 0) { /* warm-up */
            fail("copy");
            goto done;
        }
        for (int t = 0; t < TRIALS; t++) {
            if (time_copies(s, start, end, dev, host, bytes, copies, &seconds) < 0) {
                fail("copy");
                goto done;
            }
            best = seconds < best ? seconds : best;
        }
        printf("%10zu %8d %12.4f %10.2f\n", bytes >> 20, copies, best / copies * 1e3,
               (double)bytes * copies / best * 1e-9);
        fflush(stdout);
    }
    rc = 0;
done:
    saga_event_free(&start);
    saga_event_free(&end);
    saga_stream_free(&s);
    saga_backend_free(be, dev, dev ? max_bytes : 0);
    saga_backend_host_free(be, host, host ? max_bytes : 0);
    saga_backend_free_all(&be);
    return rc;
}
