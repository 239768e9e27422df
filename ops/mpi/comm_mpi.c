/* comm_mpi.c - the MPI communicator, built as the module libsaga_mpi.so: libsaga loads it only
 * when an MPI launcher started the process (or "mpi" is asked for), so saga builds and runs
 * without MPI. Host memory only; the generic layer (engine/comm/comm.c) stages device buffers. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* nanosleep */
#endif
#include "comm_impl.h"

#include <limits.h>
#include <mpi.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const saga_comm_module_host *H;

/* MPI is initialised by the first communicator unless the program did it, and then finalised
 * when the process exits (MPI cannot be initialised twice in a process: finalised when the last
 * communicator went, a program that opens another later, such as a second saga.gcn over shards
 * in one Python process, could not). */
static int finalised;

typedef struct mpi_ctx {
    MPI_Comm comm;
    double timeout; /* seconds without progress before an operation fails (SAGA_COMM_TIMEOUT) */
} mpi_ctx;

/* The watchdog's default: ten minutes in which no message of an operation completes. */
#define DEFAULT_TIMEOUT 600.0

static MPI_Comm comm_of(const saga_comm *c) {
    return ((const mpi_ctx *)c->ctx)->comm;
}

static saga_status mpi_fail(int rc, const char *what) {
    char msg[MPI_MAX_ERROR_STRING] = "";
    int len = 0;
    MPI_Error_string(rc, msg, &len);
    return H->error(SAGA_ERR_COMM, "MPI: %s: %s", what, msg);
}

#define MPI_TRY(call, what)                                                                        \
    do {                                                                                           \
        int rc_ = (call);                                                                          \
        if (rc_ != MPI_SUCCESS)                                                                    \
            return mpi_fail(rc_, what);                                                            \
    } while (0)

/* Waits for the k requests, failing when none completes for the communicator's timeout (0:
 * never): the message names the ranks still waited on (peer[i] of each open request, receives
 * first; every other rank for a collective's, peer NULL), and the requests are left to the
 * MPI_Abort the caller's failure leads to. Spins a little after each completion, then sleeps
 * between tests, which leaves the core to a rank that shares it. */
static saga_status wait_all(saga_comm *c, int k, MPI_Request *req, const int *peer, int n_recv,
                            const char *what) {
    const double timeout = ((const mpi_ctx *)c->ctx)->timeout;
    /* a few requests (every collective, most exchanges) need no allocation: a rank out of
     * memory can still agree on its failure */
    int small[64];
    int *idx = k <= 64 ? small : H->alloc((size_t)k * sizeof *idx);
    if (!idx)
        return H->error(SAGA_ERR_OUT_OF_MEMORY, "MPI: out of memory to wait for %d requests", k);
    saga_status st = SAGA_OK;
    double last = MPI_Wtime();
    int left = k, spins = 0;
    while (left > 0) {
        int got = 0;
        int rc = MPI_Testsome(k, req, &got, idx, MPI_STATUSES_IGNORE);
        if (rc != MPI_SUCCESS) {
            st = mpi_fail(rc, what);
            break;
        }
        if (got == MPI_UNDEFINED) /* every request done */
            break;
        double now = MPI_Wtime();
        if (got > 0) {
            left -= got, last = now, spins = 0;
            continue;
        }
        if (timeout > 0 && now - last > timeout) {
            char who[160] = "";
            size_t at = 0;
            for (int pass = 0; pass < 2 && !at && peer; pass++) /* receives, else sends */
                for (int i = pass ? n_recv : 0; i < (pass ? k : n_recv); i++) {
                    bool seen = false;
                    for (int j = pass ? n_recv : 0; j < i; j++)
                        seen = seen || (req[j] != MPI_REQUEST_NULL && peer[j] == peer[i]);
                    if (req[i] != MPI_REQUEST_NULL && !seen && at + 16 < sizeof who)
                        at += (size_t)snprintf(who + at, sizeof who - at, "%s%d", at ? ", " : "",
                                               peer[i]);
                }
            st = H->error(SAGA_ERR_COMM,
                          "MPI: %s on rank %d made no progress for %.0f s (SAGA_COMM_TIMEOUT): "
                          "waiting for %s%s, which may have stopped or be waiting elsewhere",
                          what, c->rank, now - last, at ? "rank " : "every other rank",
                          at ? who : "");
            break;
        }
        if (++spins > 2000) {
            struct timespec ts = {0, 50000};
            nanosleep(&ts, NULL);
        }
    }
    if (idx != small)
        H->free(idx);
    return st;
}

static MPI_Datatype type_of(saga_dtype dt) {
    switch (dt) {
    case SAGA_F32:
        return MPI_FLOAT;
    case SAGA_F64:
        return MPI_DOUBLE;
    case SAGA_I32:
        return MPI_INT32_T;
    default:
        return MPI_INT64_T;
    }
}

static MPI_Op op_of(saga_comm_op op) {
    return op == SAGA_COMM_SUM ? MPI_SUM : op == SAGA_COMM_MAX ? MPI_MAX : MPI_MIN;
}

static size_t size_of(saga_dtype dt) {
    return dt == SAGA_F32 || dt == SAGA_I32 ? 4 : 8;
}

/* MPI counts are int: larger operations go in pieces of at most 2^30 elements or bytes. */
enum { PIECE = 1 << 30 };

static saga_status mpi_allreduce(saga_comm *c, void *buf, size_t count, saga_dtype dt,
                                 saga_comm_op op, saga_stream *s) {
    char *p = buf;
    for (size_t done = 0; done < count;) {
        size_t n = count - done < PIECE ? count - done : PIECE;
        MPI_Request r = MPI_REQUEST_NULL;
        MPI_TRY(MPI_Iallreduce(MPI_IN_PLACE, p + done * size_of(dt), (int)n, type_of(dt), op_of(op),
                               comm_of(c), &r),
                "all-reduce");
        saga_status st = wait_all(c, 1, &r, NULL, 0, "an all-reduce");
        if (st < 0)
            return st;
        done += n;
    }
    return SAGA_OK;
}

static saga_status mpi_bcast(saga_comm *c, void *buf, size_t bytes, int root, saga_stream *s) {
    char *p = buf;
    for (size_t done = 0; done < bytes;) {
        size_t n = bytes - done < PIECE ? bytes - done : PIECE;
        MPI_Request r = MPI_REQUEST_NULL;
        MPI_TRY(MPI_Ibcast(p + done, (int)n, MPI_BYTE, root, comm_of(c), &r), "broadcast");
        saga_status st = wait_all(c, 1, &r, NULL, 0, "a broadcast");
        if (st < 0)
            return st;
        done += n;
    }
    return SAGA_OK;
}

static size_t pieces(size_t bytes) {
    return bytes ? (bytes + PIECE - 1) / PIECE : 0;
}

static saga_status mpi_sendrecv(saga_comm *c, const saga_comm_block *sends, int n_sends,
                                const saga_comm_block *recvs, int n_recvs, saga_stream *s) {
    size_t n = 0;
    for (int i = 0; i < n_sends; i++)
        n += pieces(sends[i].bytes);
    for (int i = 0; i < n_recvs; i++)
        n += pieces(recvs[i].bytes);
    if (!n)
        return SAGA_OK;
    MPI_Request *req = H->alloc(n * (sizeof *req + sizeof(int)));
    if (!req)
        return H->error(SAGA_ERR_OUT_OF_MEMORY, "MPI: %zu requests", n);
    int *peer = (int *)(req + n);
    size_t k = 0;
    int rc = MPI_SUCCESS;
    /* receives first, so that sends find them posted; one tag: MPI keeps the order of messages
     * between two ranks, which is the order of the blocks */
    int n_rpieces = 0;
    for (int i = 0; i < n_recvs; i++)
        n_rpieces += (int)pieces(recvs[i].bytes);
    for (int i = 0; i < n_recvs && rc == MPI_SUCCESS; i++)
        for (size_t off = 0; off < recvs[i].bytes && rc == MPI_SUCCESS; off += PIECE) {
            size_t len = recvs[i].bytes - off < PIECE ? recvs[i].bytes - off : PIECE;
            peer[k] = recvs[i].peer;
            rc = MPI_Irecv((char *)recvs[i].data + off, (int)len, MPI_BYTE, recvs[i].peer, 0,
                           comm_of(c), &req[k++]);
        }
    for (int i = 0; i < n_sends && rc == MPI_SUCCESS; i++)
        for (size_t off = 0; off < sends[i].bytes && rc == MPI_SUCCESS; off += PIECE) {
            size_t len = sends[i].bytes - off < PIECE ? sends[i].bytes - off : PIECE;
            peer[k] = sends[i].peer;
            rc = MPI_Isend((const char *)sends[i].data + off, (int)len, MPI_BYTE, sends[i].peer, 0,
                           comm_of(c), &req[k++]);
        }
    saga_status st = rc == MPI_SUCCESS ? wait_all(c, (int)k, req, peer, n_rpieces, "a send/receive")
                                       : mpi_fail(rc, "send/receive");
    H->free(req);
    return st;
}

static saga_status mpi_barrier(saga_comm *c) {
    MPI_Request r = MPI_REQUEST_NULL;
    MPI_TRY(MPI_Ibarrier(comm_of(c), &r), "barrier");
    return wait_all(c, 1, &r, NULL, 0, "a barrier");
}

static void mpi_abort(saga_comm *c, int code) {
    MPI_Abort(MPI_COMM_WORLD, code);
}

static void mpi_destroy(saga_comm *c) {
    mpi_ctx *x = c->ctx;
    if (!x)
        return;
    int fin = 0;
    MPI_Finalized(&fin);
    if (!fin)
        MPI_Comm_free(&x->comm);
    H->free(x);
    c->ctx = NULL;
}

/* At exit, after every communicator of a well-behaved program has gone (the module stays mapped:
 * it is opened RTLD_NODELETE). */
static void finalize_at_exit(void) {
    int fin = 0;
    MPI_Finalized(&fin);
    if (!fin) {
        MPI_Finalize();
        finalised = 1;
    }
}

/* MPI's thread levels by the names SAGA_MPI_THREAD takes */
static const struct {
    const char *name;
    int level;
} thread_levels[4] = {{"single", MPI_THREAD_SINGLE},
                      {"funneled", MPI_THREAD_FUNNELED},
                      {"serialized", MPI_THREAD_SERIALIZED},
                      {"multiple", MPI_THREAD_MULTIPLE}};

static const saga_comm_iface mpi_iface = {
    1, mpi_destroy, mpi_allreduce, mpi_bcast, mpi_sendrecv, mpi_barrier, mpi_abort};

__attribute__((visibility("default"))) saga_status
saga_comm_mpi_init(saga_comm *c, const saga_comm_module_host *host);

__attribute__((visibility("default"))) saga_status
saga_comm_mpi_init(saga_comm *c, const saga_comm_module_host *host) {
    H = host;
    int init = 0, fin = 0;
    MPI_Initialized(&init);
    MPI_Finalized(&fin);
    if (fin || finalised)
        return H->error(SAGA_ERR_UNSUPPORTED,
                        "MPI was finalised in this process; it cannot be started again");
    if (!init) {
        /* threads: saga's exchanges may call MPI beside the caller (MPI_THREAD_MULTIPLE), unless
         * SAGA_MPI_THREAD asks for less (where MULTIPLE is slow or missing) */
        int want = MPI_THREAD_MULTIPLE;
        const char *lv = getenv("SAGA_MPI_THREAD");
        if (lv && *lv) {
            int i = 0;
            while (i < 4 && strcmp(lv, thread_levels[i].name) != 0)
                i++;
            if (i == 4)
                return H->error(SAGA_ERR_INVALID_ARG,
                                "SAGA_MPI_THREAD=%s: single, funneled, serialized or multiple", lv);
            want = thread_levels[i].level;
        }
        int provided = 0;
        int rc = MPI_Init_thread(NULL, NULL, want, &provided);
        if (rc != MPI_SUCCESS)
            return mpi_fail(rc, "initialisation");
        atexit(finalize_at_exit);
    }
    /* the level MPI provides, whoever started it: below MULTIPLE saga's MPI calls stay on the
     * calling thread (saga_comm_threads) */
    int level = MPI_THREAD_MULTIPLE;
    MPI_Query_thread(&level);
    c->serial = level < MPI_THREAD_MULTIPLE;
    if (c->serial) {
        const char *name = "unknown";
        for (int i = 0; i < 4; i++)
            if (thread_levels[i].level == level)
                name = thread_levels[i].name;
        H->log(2,
               "MPI provides thread level %s, not MPI_THREAD_MULTIPLE: saga's MPI calls stay "
               "on the calling thread",
               name);
    }
    double timeout = DEFAULT_TIMEOUT;
    const char *to = getenv("SAGA_COMM_TIMEOUT");
    if (to && *to) {
        char *end = NULL;
        timeout = strtod(to, &end);
        if (end == to || *end || !(timeout >= 0) || timeout > 1e9)
            return H->error(SAGA_ERR_INVALID_ARG,
                            "SAGA_COMM_TIMEOUT=%s: seconds without progress before an exchange "
                            "fails (0: never)",
                            to);
    }
    mpi_ctx *x = H->alloc(sizeof *x);
    if (!x)
        return H->error(SAGA_ERR_OUT_OF_MEMORY, "out of memory for an MPI communicator");
    x->timeout = timeout;
    /* saga's own communicator, so that its messages never meet the program's */
    int rc = MPI_Comm_dup(MPI_COMM_WORLD, &x->comm);
    if (rc != MPI_SUCCESS) {
        H->free(x);
        return mpi_fail(rc, "duplicating MPI_COMM_WORLD");
    }
    MPI_Comm_set_errhandler(x->comm, MPI_ERRORS_RETURN);
    MPI_Comm_rank(x->comm, &c->rank);
    MPI_Comm_size(x->comm, &c->size);
    MPI_Comm local;
    c->local_rank = 0;
    c->local_size = 1;
    if (MPI_Comm_split_type(x->comm, MPI_COMM_TYPE_SHARED, c->rank, MPI_INFO_NULL, &local) ==
        MPI_SUCCESS) {
        MPI_Comm_rank(local, &c->local_rank);
        MPI_Comm_size(local, &c->local_size);
        MPI_Comm_free(&local);
    }
    c->iface = &mpi_iface;
    c->ctx = x;
    snprintf(c->name, sizeof c->name, "mpi (%d rank%s)", c->size, c->size == 1 ? "" : "s");
    return SAGA_OK;
}
