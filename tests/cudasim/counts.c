/* counts.c - the CUDA simulator's counts (SAGA_CUDASIM_STATS) of what a program asks of the
 * device between cudaProfilerStart and cudaProfilerStop, through saga_backend_profile_range:
 * known copies, a kernel, a synchronization and a copy into pageable memory inside a window are
 * counted exactly; what comes before and after it is not; a second window starts from zero. A
 * third shows that under a budget allocations and frees of any mix of sizes, served by the arena
 * the backend took at its first allocation, neither call the device's allocator nor wait.
 * Exits 0 when every count is as it must be. */
#include "backend_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int failures;

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "counts: %s:%d: ", __FILE__, __LINE__);                                \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fprintf(stderr, "\n");                                                                 \
            failures++;                                                                            \
        }                                                                                          \
    } while (0)

#define TRY(call)                                                                                  \
    do {                                                                                           \
        if ((call) < 0) {                                                                          \
            fprintf(stderr, "counts: %s:%d: %s: %s\n", __FILE__, __LINE__, #call,                  \
                    saga_last_error());                                                            \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

/* The number after "key": in line, or -1. */
static long long field(const char *line, const char *key) {
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *p = strstr(line, pat);
    return p ? strtoll(p + strlen(pat), NULL, 10) : -1;
}

/* The n-th window line (1-based) of the stats file, into line; false when there is none. */
static bool window_line(const char *path, int n, char *line, size_t size) {
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    int seen = 0;
    bool found = false;
    while (fgets(line, (int)size, f))
        if (strncmp(line, "{\"window\":", 10) == 0 && ++seen == n) {
            found = true;
            break;
        }
    fclose(f);
    return found;
}

int main(void) {
    char path[] = "/tmp/saga-cudasim-counts-XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) {
        perror("counts: mkstemp");
        return 1;
    }
    close(fd);
    /* read by the simulator at its first call */
    setenv("SAGA_CUDASIM_STATS", path, 1);
    saga_backend *be = NULL;
    TRY(saga_backend_cuda_new(&be, 0, NULL));
    saga_stream *s = saga_backend_default_stream(be);
    enum { N = 4096, M = 1024, K = 512 };
    double *dev = NULL, *dev2 = NULL;
    unsigned char *pinned = NULL;
    unsigned char *pageable = malloc(N);
    TRY(saga_backend_alloc(be, (void **)&dev, N));
    TRY(saga_backend_alloc(be, (void **)&dev2, N));
    TRY(saga_backend_host_alloc(be, (void **)&pinned, N));
    memset(pinned, 1, N);
    /* before the window: not counted */
    TRY(saga_memcpy_h2d_async(s, dev, pinned, N));
    TRY(saga_backend_synchronize(be));

    TRY(saga_backend_profile_range(be, true));
    TRY(saga_memcpy_h2d_async(s, dev, pinned, N));
    TRY(be->kernels->fill_f64(s, dev2, K / 8, 2.0));
    TRY(saga_memcpy_d2d_async(s, dev, dev2, K));
    TRY(saga_memcpy_d2h_async(s, pageable, dev, M)); /* into pageable memory: the host waits */
    TRY(saga_backend_synchronize(be));
    TRY(saga_backend_profile_range(be, false));

    /* after it: not counted; a second window counts from zero */
    TRY(saga_memcpy_h2d_async(s, dev, pinned, N));
    TRY(saga_backend_synchronize(be));
    TRY(saga_backend_profile_range(be, true));
    TRY(saga_memcpy_h2d_async(s, dev, pinned, 8));
    TRY(saga_backend_profile_range(be, false));
    TRY(saga_backend_profile_range(be, false)); /* a stop outside a window changes nothing */

    char line[8192];
    if (!window_line(path, 1, line, sizeof line)) {
        CHECK(false, "no window in %s", path);
    } else {
        printf("window 1: %s", line);
        CHECK(field(line, "window") == 1, "window number %lld", field(line, "window"));
        CHECK(field(line, "h2d_bytes") == N, "h2d_bytes %lld, want %d", field(line, "h2d_bytes"),
              N);
        CHECK(field(line, "d2h_bytes") == M, "d2h_bytes %lld, want %d", field(line, "d2h_bytes"),
              M);
        CHECK(field(line, "d2d_bytes") == K, "d2d_bytes %lld, want %d", field(line, "d2d_bytes"),
              K);
        CHECK(field(line, "kernels") == 1, "kernels %lld, want 1 (the fill)",
              field(line, "kernels"));
        /* the copy into pageable memory, and the synchronization (one call or more) */
        CHECK(field(line, "host_waits") >= 2, "host_waits %lld, want at least 2",
              field(line, "host_waits"));
        CHECK(field(line, "device_allocs") == 0 && field(line, "device_frees") == 0,
              "device allocations %lld and frees %lld inside the window, want none",
              field(line, "device_allocs"), field(line, "device_frees"));
        CHECK(field(line, "host_fns") == 0, "host functions %lld, want none",
              field(line, "host_fns"));
        CHECK(field(line, "cudaMemcpyAsync") == 3, "cudaMemcpyAsync calls %lld, want 3",
              field(line, "cudaMemcpyAsync"));
        CHECK(!strstr(line, "cudaProfilerStart") && !strstr(line, "cudaProfilerStop"),
              "the window counts its own start or stop");
    }
    if (!window_line(path, 2, line, sizeof line)) {
        CHECK(false, "no second window in %s", path);
    } else {
        printf("window 2: %s", line);
        CHECK(field(line, "window") == 2, "window number %lld", field(line, "window"));
        CHECK(field(line, "h2d_bytes") == 8, "h2d_bytes %lld, want 8", field(line, "h2d_bytes"));
        CHECK(field(line, "kernels") == 0 && field(line, "d2h_bytes") == 0,
              "the second window kept the first's counts");
    }
    CHECK(!window_line(path, 3, line, sizeof line), "a stop outside a window wrote one");
    saga_backend_host_free(be, pinned, N);
    saga_backend_free(be, dev, N);
    saga_backend_free(be, dev2, N);
    saga_backend_free_all(&be);

    saga_backend_params bp = saga_backend_params_defaults();
    bp.budget_bytes = (size_t)8 << 20;
    TRY(saga_backend_cuda_new(&be, 0, &bp)); /* the arena: taken before the window */
    static const size_t sizes[] = {100000, 1500000, 700000, 3000, 2000000, 1500000};
    void *p[sizeof sizes / sizeof *sizes] = {0};
    TRY(saga_backend_profile_range(be, true));
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
        TRY(saga_backend_alloc(be, &p[k], sizes[k]));
        if (k % 2) /* free the one before: ranges of other sizes come and go */
            saga_backend_free(be, p[k - 1], sizes[k - 1]), p[k - 1] = NULL;
    }
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++)
        saga_backend_free(be, p[k], sizes[k]);
    TRY(saga_backend_profile_range(be, false));
    saga_backend_free_all(&be);
    if (!window_line(path, 3, line, sizeof line)) {
        CHECK(false, "no third window in %s", path);
    } else {
        printf("window 3: %s", line);
        CHECK(field(line, "device_allocs") == 0 && field(line, "device_frees") == 0,
              "under a budget: device allocations %lld and frees %lld, want none",
              field(line, "device_allocs"), field(line, "device_frees"));
        CHECK(field(line, "host_waits") == 0, "under a budget: host_waits %lld, want none",
              field(line, "host_waits"));
    }
    free(pageable);
    remove(path);
    if (failures)
        fprintf(stderr, "counts: %d check%s failed\n", failures, failures == 1 ? "" : "s");
    return failures ? 1 : 0;
}
