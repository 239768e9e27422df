/* bench_comm.c - the cost of saga's host communicator as the partition-parallel executor uses it:
 * saga_comm_alltoallv (the halo exchanges of engine/exec/net_dist.c) and saga_comm_allreduce
 * (the loss and the model's gradients), over MPI between the ranks of a launcher.
 *
 *   mpiexec -n R bench_comm [MAX_BYTES]      MAX_BYTES: the largest message (default 64 MiB)
 *
 * alltoallv: every rank sends the same number of bytes to each other rank (none to itself), from
 * 8 bytes per rank in all up to MAX_BYTES per rank in all, by factors of 4; the bytes a rank
 * sends are split evenly over its R-1 peers. allreduce: SUM over f32 buffers of 8 bytes up to
 * MAX_BYTES. copy: a memcpy of 8 bytes up to MAX_BYTES on every rank at once (what packing and
 * unpacking the rows around an exchange costs). Every call starts after a barrier and is timed
 * on each rank; its time is the largest over the ranks. Each size runs once untimed, then REPS
 * times (as many as make about 256 MiB per rank, 5 to 200); the table gives the median and the
 * fastest.
 *
 * Rank 0 prints one line per size, tab-separated: op, ranks, bytes per rank (the payload each
 * rank hands to the call: the sum over its peers for alltoallv, the buffer for allreduce and
 * copy), bytes per peer, reps, median and minimum in microseconds. Lines starting with '#'
 * describe the run. Without a launcher there is one rank and nothing to measure: it says so and
 * exits with 77.
 */
#include "saga_comm.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MIN_REPS = 5, MAX_REPS = 200, EXIT_SKIP = 77 };
static const double BYTES_PER_SIZE = 268435456.0; /* 256 MiB sent per rank at each size */

static int fail(const char *what) {
    fprintf(stderr, "bench_comm: %s: %s\n", what, saga_last_error());
    return 1;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The per-call times of this rank (t[0..reps)) made the largest over the ranks; then the median
 * and the minimum into *med and *lo. */
static saga_status summarise(saga_comm *c, double *t, int reps, double *med, double *lo) {
    saga_status st = saga_comm_allreduce(c, t, (size_t)reps, SAGA_F64, SAGA_COMM_MAX, NULL);
    if (st < 0)
        return st;
    qsort(t, (size_t)reps, sizeof *t, cmp_double);
    *med = reps % 2 ? t[reps / 2] : 0.5 * (t[reps / 2 - 1] + t[reps / 2]);
    *lo = t[0];
    return SAGA_OK;
}

static int reps_for(size_t bytes) {
    double r = BYTES_PER_SIZE / (double)(bytes ? bytes : 1);
    return r < MIN_REPS ? MIN_REPS : r > MAX_REPS ? MAX_REPS : (int)r;
}

int main(int argc, char **argv) {
    size_t max_bytes = (size_t)64 << 20;
    if (argc > 2 || (argc == 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")))) {
        fprintf(stderr, "usage: mpiexec -n R bench_comm [MAX_BYTES]\n");
        return 2;
    }
    if (argc == 2) {
        char *end = NULL;
        unsigned long long v = strtoull(argv[1], &end, 10);
        if (end == argv[1] || *end || v < 8) {
            fprintf(stderr, "bench_comm: MAX_BYTES must be a number of bytes >= 8\n");
            return 2;
        }
        max_bytes = (size_t)v;
    }
    saga_comm *c = NULL;
    if (saga_comm_open(&c, "auto") < 0)
        return fail("opening the communicator");
    int me = saga_comm_rank(c), R = saga_comm_size(c);
    if (R < 2) {
        printf("bench_comm: one rank, nothing to exchange (run under mpiexec -n R, R >= 2)\n");
        saga_comm_free(&c);
        return EXIT_SKIP;
    }
    size_t p = (size_t)R;
    unsigned char *sbuf = NULL, *rbuf = NULL;
    size_t *cnt = calloc(4 * p, sizeof *cnt);
    double *t = calloc(MAX_REPS, sizeof *t);
    sbuf = malloc(max_bytes);
    rbuf = malloc(max_bytes);
    int rc = 1;
    if (!cnt || !t || !sbuf || !rbuf) {
        fprintf(stderr, "bench_comm: out of memory for %zu-byte buffers\n", max_bytes);
        goto done;
    }
    memset(sbuf, 1, max_bytes);
    memset(rbuf, 0, max_bytes);
    size_t *sb = cnt, *so = cnt + p, *rb = cnt + 2 * p, *ro = cnt + 3 * p;
    if (me == 0) {
        printf("# %s, buffers in host memory (malloc), the largest time over the ranks per call\n",
               saga_comm_name(c));
        printf("op\tranks\tbytes_per_rank\tbytes_per_peer\treps\tus_median\tus_min\n");
    }
    /* ---- alltoallv: the same bytes to every other rank */
    for (size_t total = 8; total <= max_bytes; total *= 4) {
        size_t per = total / (p - 1);
        per = per ? per : 1;
        for (size_t q = 0, at = 0; q < p; q++) {
            size_t b = (int)q == me ? 0 : per;
            sb[q] = rb[q] = b;
            so[q] = ro[q] = at;
            at += b;
        }
        int reps = reps_for(per * (p - 1));
        for (int i = -1; i < reps; i++) {
            if (saga_comm_barrier(c) < 0)
                goto comm_fail;
            double t0 = saga_now();
            if (saga_comm_alltoallv(c, sbuf, sb, so, rbuf, rb, ro, NULL) < 0)
                goto comm_fail;
            if (i >= 0)
                t[i] = saga_now() - t0;
        }
        double med = 0, lo = 0;
        if (summarise(c, t, reps, &med, &lo) < 0)
            goto comm_fail;
        if (me == 0)
            printf("alltoallv\t%d\t%zu\t%zu\t%d\t%.2f\t%.2f\n", R, per * (p - 1), per, reps,
                   med * 1e6, lo * 1e6);
        fflush(stdout);
    }
    /* ---- allreduce: SUM over f32 (zeros: the sums stay zero, never denormal) */
    memset(sbuf, 0, max_bytes);
    for (size_t bytes = 8; bytes <= max_bytes; bytes *= 4) {
        size_t count = bytes / sizeof(float);
        int reps = reps_for(bytes);
        for (int i = -1; i < reps; i++) {
            if (saga_comm_barrier(c) < 0)
                goto comm_fail;
            double t0 = saga_now();
            if (saga_comm_allreduce(c, sbuf, count, SAGA_F32, SAGA_COMM_SUM, NULL) < 0)
                goto comm_fail;
            if (i >= 0)
                t[i] = saga_now() - t0;
        }
        double med = 0, lo = 0;
        if (summarise(c, t, reps, &med, &lo) < 0)
            goto comm_fail;
        if (me == 0)
            printf("allreduce\t%d\t%zu\t%zu\t%d\t%.2f\t%.2f\n", R, count * sizeof(float),
                   count * sizeof(float), reps, med * 1e6, lo * 1e6);
        fflush(stdout);
    }
    /* ---- copy: what packing and unpacking rows around an exchange cost, every rank at once */
    for (size_t bytes = 8; bytes <= max_bytes; bytes *= 4) {
        int reps = reps_for(bytes);
        for (int i = -1; i < reps; i++) {
            if (saga_comm_barrier(c) < 0)
                goto comm_fail;
            double t0 = saga_now();
            memcpy(rbuf, sbuf, bytes);
            if (i >= 0)
                t[i] = saga_now() - t0;
            sbuf[i & 63] ^= rbuf[bytes - 1]; /* the copy is used */
        }
        double med = 0, lo = 0;
        if (summarise(c, t, reps, &med, &lo) < 0)
            goto comm_fail;
        if (me == 0)
            printf("copy\t%d\t%zu\t%zu\t%d\t%.2f\t%.2f\n", R, bytes, bytes, reps, med * 1e6,
                   lo * 1e6);
        fflush(stdout);
    }
    rc = 0;
    goto done;
comm_fail:
    rc = fail("exchange");
done:
    free(cnt);
    free(t);
    free(sbuf);
    free(rbuf);
    saga_comm_free(&c);
    return rc;
}
