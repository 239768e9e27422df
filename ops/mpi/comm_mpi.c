/* comm_mpi.c - the MPI communicator, built as the module libsaga_mpi.so: libsaga loads it only
 * when an MPI launcher started the process (or "mpi" is asked for), so saga builds and runs
 * without MPI. Host memory only; the generic layer (engine/comm/comm.c) stages device buffers. */
#include "comm_impl.h"

#include <limits.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const saga_comm_module_host *H;

/* MPI is initialised by the first communicator unless the program did it, and finalised when
 * the last one made here goes (MPI cannot be initialised twice in a process). */
static int n_open;
static int we_initialised;
static int finalised;

typedef struct mpi_ctx {
    MPI_Comm comm;
} mpi_ctx;

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
        MPI_TRY(MPI_Allreduce(MPI_IN_PLACE, p + done * size_of(dt), (int)n, type_of(dt), op_of(op),
                              comm_of(c)),
                "all-reduce");
        done += n;
    }
    return SAGA_OK;
}

static saga_status mpi_bcast(saga_comm *c, void *buf, size_t bytes, int root, saga_stream *s) {
    char *p = buf;
    for (size_t done = 0; done < bytes;) {
        size_t n = bytes - done < PIECE ? bytes - done : PIECE;
        MPI_TRY(MPI_Bcast(p + done, (int)n, MPI_BYTE, root, comm_of(c)), "broadcast");
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
    MPI_Request *req = H->alloc(n * sizeof *req);
    if (!req)
        return H->error(SAGA_ERR_OUT_OF_MEMORY, "MPI: %zu requests", n);
    size_t k = 0;
    int rc = MPI_SUCCESS;
    /* receives first, so that sends find them posted; one tag: MPI keeps the order of messages
     * between two ranks, which is the order of the blocks */
    for (int i = 0; i < n_recvs && rc == MPI_SUCCESS; i++)
        for (size_t off = 0; off < recvs[i].bytes && rc == MPI_SUCCESS; off += PIECE) {
            size_t len = recvs[i].bytes - off < PIECE ? recvs[i].bytes - off : PIECE;
            rc = MPI_Irecv((char *)recvs[i].data + off, (int)len, MPI_BYTE, recvs[i].peer, 0,
                           comm_of(c), &req[k++]);
        }
    for (int i = 0; i < n_sends && rc == MPI_SUCCESS; i++)
        for (size_t off = 0; off < sends[i].bytes && rc == MPI_SUCCESS; off += PIECE) {
            size_t len = sends[i].bytes - off < PIECE ? sends[i].bytes - off : PIECE;
            rc = MPI_Isend((const char *)sends[i].data + off, (int)len, MPI_BYTE, sends[i].peer, 0,
                           comm_of(c), &req[k++]);
        }
    if (rc == MPI_SUCCESS)
        rc = MPI_Waitall((int)k, req, MPI_STATUSES_IGNORE);
    H->free(req);
    if (rc != MPI_SUCCESS)
        return mpi_fail(rc, "send/receive");
    return SAGA_OK;
}

static saga_status mpi_barrier(saga_comm *c) {
    MPI_TRY(MPI_Barrier(comm_of(c)), "barrier");
    return SAGA_OK;
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
    if (--n_open == 0 && we_initialised && !fin) {
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
        we_initialised = 1;
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
    mpi_ctx *x = H->alloc(sizeof *x);
    if (!x)
        return H->error(SAGA_ERR_OUT_OF_MEMORY, "out of memory for an MPI communicator");
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
    n_open++;
    return SAGA_OK;
}
