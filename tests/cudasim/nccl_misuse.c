/* nccl_misuse.c SCENARIO - one use of saga's NCCL communicator on the CUDA simulator, for
 * nccl_misuse.sh: misuse that the NCCL stand-in must report (an error from the next operation, or
 * the program stopped with a diagnostic), and the traffic that a grouped exchange must survive.
 * Run under mpiexec with SAGA_CUDASIM_DEVICES at least the number of ranks; each rank takes
 * cuda:<local rank>. Exits 0 when the scenario went as it must on every rank. */
#include "backend_impl.h"
#include "comm_impl.h"
#include "saga_comm.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static saga_comm *comm, *dcomm;
static saga_backend *be;
static int failures;

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "nccl_misuse: rank %d: %s:%d: ", saga_comm_rank(comm), __FILE__,       \
                    __LINE__);                                                                     \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fprintf(stderr, "\n");                                                                 \
            failures++;                                                                            \
        }                                                                                          \
    } while (0)

/* st is SAGA_ERR_COMM (or want) and the message holds text. */
static void expect_error(saga_status st, saga_status want, const char *text) {
    CHECK(st == want, "status %d, expected %d (%s)", (int)st, (int)want, saga_last_error());
    CHECK(strstr(saga_last_error(), text), "message '%s' lacks '%s'", saga_last_error(), text);
}

static void *dev_alloc(saga_backend *b, size_t bytes) {
    void *d = NULL;
    if (saga_backend_alloc(b, &d, bytes) < 0) {
        fprintf(stderr, "nccl_misuse: %s\n", saga_last_error());
        exit(2);
    }
    return d;
}

static void *dev_fill(size_t bytes, unsigned char v) {
    void *d = dev_alloc(be, bytes);
    unsigned char h[64];
    memset(h, v, sizeof h);
    for (size_t off = 0; off < bytes; off += sizeof h)
        saga_memcpy_h2d_async(saga_backend_default_stream(be), (char *)d + off, h,
                              bytes - off < sizeof h ? bytes - off : sizeof h);
    saga_backend_synchronize(be);
    return d;
}

static int open_all(void) {
    if (saga_comm_open(&comm, "auto") < 0) {
        fprintf(stderr, "nccl_misuse: %s\n", saga_last_error());
        return 2;
    }
    char spec[32];
    snprintf(spec, sizeof spec, "cuda:%d", saga_comm_local_rank(comm));
    if (saga_backend_open(&be, spec, NULL) < 0 || saga_comm_open_device(&dcomm, comm, be) < 0) {
        fprintf(stderr, "nccl_misuse: rank %d: %s\n", saga_comm_rank(comm), saga_last_error());
        saga_comm_abort(comm, 2);
    }
    if (strncmp(saga_comm_name(dcomm), "nccl", 4) != 0) {
        fprintf(stderr, "nccl_misuse: the device communicator is %s, not NCCL\n",
                saga_comm_name(dcomm));
        saga_comm_abort(comm, 2);
    }
    return 0;
}

/* Without MPI the stand-in cannot make a clique: ncclCommInitRank fails with a message that says
 * why (a single process, no launcher: saga never initialises MPI). */
static void no_mpi(void) {
    saga_status st = saga_backend_open(&be, "cuda:0", NULL);
    CHECK(st == SAGA_OK, "%s", saga_last_error());
    if (st < 0)
        return;
    void *id_sym = dlsym(be->module, SAGA_CUDA_NCCL_ID);
    void *init_sym = dlsym(be->module, SAGA_CUDA_NCCL_INIT);
    CHECK(id_sym && init_sym, "the module lacks the NCCL entry points");
    if (id_sym && init_sym) {
        saga_cuda_nccl_id_fn id_fn;
        saga_cuda_nccl_init_fn init_fn;
        memcpy(&id_fn, &id_sym, sizeof id_fn);
        memcpy(&init_fn, &init_sym, sizeof init_fn);
        unsigned char id[SAGA_NCCL_ID_BYTES];
        CHECK(id_fn(id) == SAGA_OK, "%s", saga_last_error());
        saga_comm c;
        memset(&c, 0, sizeof c);
        c.size = 2;
        c.be = be;
        expect_error(init_fn(&c, be, id), SAGA_ERR_COMM, "MPI is not initialised");
        CHECK(c.iface == NULL && c.ctx == NULL, "a failed initialisation filled the communicator");
    }
    saga_backend_free_all(&be);
}

/* Rank 0 sends 12 bytes where rank 1 receives 8: rank 1's next operation fails, naming both. */
static void recv_size(void) {
    int r = saga_comm_rank(comm);
    void *d = dev_fill(16, 1);
    saga_comm_block b = {1 - r, d, r == 0 ? 12 : 8};
    CHECK(saga_comm_sendrecv(dcomm, r == 0 ? &b : NULL, r == 0, r == 1 ? &b : NULL, r == 1, NULL) ==
              SAGA_OK,
          "%s", saga_last_error());
    CHECK(saga_backend_synchronize(be) == SAGA_OK, "%s", saga_last_error());
    if (r == 1)
        expect_error(saga_comm_allreduce(dcomm, d, 1, SAGA_F32, SAGA_COMM_SUM, NULL), SAGA_ERR_COMM,
                     "from peer 0 meets an ncclSend of 12 bytes");
    saga_backend_free(be, d, 16);
}

/* All-reduces of 4 and 5 elements: every rank's next operation fails. */
static void count(void) {
    int r = saga_comm_rank(comm);
    float *d = dev_fill(64, 0);
    CHECK(saga_comm_allreduce(dcomm, d, 4 + (size_t)r, SAGA_F32, SAGA_COMM_SUM, NULL) == SAGA_OK,
          "%s", saga_last_error());
    CHECK(saga_backend_synchronize(be) == SAGA_OK, "%s", saga_last_error());
    expect_error(saga_comm_bcast(dcomm, d, 4, 0, NULL), SAGA_ERR_COMM,
                 "disagree on the count: from 4 to 5");
    saga_backend_free(be, d, 64);
}

/* An all-reduce on rank 0 meets a broadcast on rank 1. */
static void kind(void) {
    int r = saga_comm_rank(comm);
    float *d = dev_fill(64, 0);
    if (r == 0)
        CHECK(saga_comm_allreduce(dcomm, d, 4, SAGA_F32, SAGA_COMM_SUM, NULL) == SAGA_OK, "%s",
              saga_last_error());
    else
        CHECK(saga_comm_bcast(dcomm, d, 16, 0, NULL) == SAGA_OK, "%s", saga_last_error());
    CHECK(saga_backend_synchronize(be) == SAGA_OK, "%s", saga_last_error());
    expect_error(saga_comm_allreduce(dcomm, d, 1, SAGA_F32, SAGA_COMM_MAX, NULL), SAGA_ERR_COMM,
                 "collectives do not match");
    saga_backend_free(be, d, 64);
}

/* A stream of another backend: refused by saga before NCCL sees it. */
static void other_stream(void) {
    saga_backend *other = NULL;
    CHECK(saga_backend_open(&other, "cpu", NULL) == SAGA_OK, "%s", saga_last_error());
    float *d = dev_fill(16, 0);
    expect_error(saga_comm_allreduce(dcomm, d, 4, SAGA_F32, SAGA_COMM_SUM,
                                     saga_backend_default_stream(other)),
                 SAGA_ERR_INVALID_ARG, "the stream belongs to cpu");
    saga_backend_free(be, d, 16);
    saga_backend_free_all(&other);
}

/* Host memory given to NCCL: the program stops (a GPU would fault). */
static void host_ptr(void) {
    float h[4] = {0};
    saga_comm_allreduce(dcomm, h, 4, SAGA_F32, SAGA_COMM_SUM, NULL);
    CHECK(0, "an all-reduce of host memory returned");
}

/* Memory of another device given to the communicator of this one: the program stops. */
static void other_device(void) {
    saga_backend *other = NULL;
    char spec[32];
    snprintf(spec, sizeof spec, "cuda:%d", (saga_comm_local_rank(comm) + 1) % 2);
    CHECK(saga_backend_open(&other, spec, NULL) == SAGA_OK, "%s", saga_last_error());
    void *d = dev_alloc(other, 16);
    saga_comm_allreduce(dcomm, d, 4, SAGA_F32, SAGA_COMM_SUM, NULL);
    CHECK(0, "an all-reduce of another device's memory returned");
}

/* Rank 0 all-reduces, rank 1 never does: rank 0 stops after SAGA_CUDASIM_NCCL_TIMEOUT. */
static void missing_peer(void) {
    float *d = dev_fill(16, 0);
    if (saga_comm_rank(comm) == 0) {
        saga_comm_allreduce(dcomm, d, 4, SAGA_F32, SAGA_COMM_SUM, NULL);
        saga_backend_synchronize(be);
        CHECK(0, "an all-reduce without its peer completed");
    }
    saga_comm_barrier(comm); /* waits until the launcher stops the job */
}

/* Every rank sends 1 MiB blocks (past MPI's eager limit) to both neighbours on a ring and receives
 * theirs, in one group: it must complete, with the data in place. */
static void halo(void) {
    int p = saga_comm_size(comm), r = saga_comm_rank(comm);
    int left = (r + p - 1) % p, right = (r + 1) % p;
    enum { N = 1 << 18 }; /* ints, 1 MiB */
    size_t bytes = (size_t)N * 4;
    int32_t *h = malloc(bytes * 2);
    for (int i = 0; i < N; i++)
        h[i] = r * N + i;
    int32_t *out = dev_alloc(be, bytes), *in = dev_alloc(be, 2 * bytes);
    saga_stream *s = saga_backend_default_stream(be);
    saga_memcpy_h2d_async(s, out, h, bytes);
    saga_comm_block sends[2] = {{right, out, bytes}, {left, out, bytes}};
    saga_comm_block recvs[2] = {{left, in, bytes}, {right, in + N, bytes}};
    CHECK(saga_comm_sendrecv(dcomm, sends, 2, recvs, 2, NULL) == SAGA_OK, "%s", saga_last_error());
    saga_memcpy_d2h_async(s, h, in, 2 * bytes);
    CHECK(saga_backend_synchronize(be) == SAGA_OK, "%s", saga_last_error());
    for (int i = 0; i < N; i++) {
        if (h[i] != left * N + i || h[N + i] != right * N + i) {
            CHECK(0, "element %d: %d and %d, expected %d and %d", i, h[i], h[N + i], left * N + i,
                  right * N + i);
            break;
        }
    }
    saga_backend_free(be, out, bytes);
    saga_backend_free(be, in, 2 * bytes);
    free(h);
}

static const struct {
    const char *name;
    void (*run)(void);
} scenarios[] = {
    {"recv_size", recv_size},       {"count", count},       {"kind", kind},
    {"other_stream", other_stream}, {"host_ptr", host_ptr}, {"other_device", other_device},
    {"missing_peer", missing_peer}, {"halo", halo}};

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: nccl_misuse SCENARIO\n");
        return 2;
    }
    if (strcmp(argv[1], "no_mpi") == 0) {
        no_mpi();
        return failures ? 1 : 0;
    }
    void (*run)(void) = NULL;
    for (size_t i = 0; i < sizeof scenarios / sizeof *scenarios; i++)
        if (strcmp(argv[1], scenarios[i].name) == 0)
            run = scenarios[i].run;
    if (!run) {
        fprintf(stderr, "nccl_misuse: no scenario %s\n", argv[1]);
        return 2;
    }
    if (open_all())
        return 2;
    run();
    /* every rank's verdict, so that the launcher's status covers them all */
    int32_t any = failures;
    if (saga_comm_allreduce(comm, &any, 1, SAGA_I32, SAGA_COMM_MAX, NULL) < 0)
        any = 1;
    saga_comm_free(&dcomm);
    saga_backend_free_all(&be);
    saga_comm_free(&comm);
    return any ? 1 : 0;
}
