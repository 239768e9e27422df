// comm_nccl.cu - the NCCL communicator of the CUDA module: a saga_comm (engine/comm/comm_impl.h)
// whose operations are NCCL calls queued on the backend's streams. engine/comm/comm.c finds the
// two entry points with dlsym, makes the clique's id on rank 0 (saga_cuda_nccl_id), sends it to
// the other ranks over the host communicator and calls saga_cuda_nccl_init on every rank. The
// generic layer has checked the arguments and handled blocks to the own rank; the slots only
// move data between distinct ranks. Built only when NCCL was found (SAGA_CUDA_HAVE_NCCL).
#include "common.cuh"

#ifdef SAGA_CUDA_HAVE_NCCL

#include "comm_impl.h"

#include <nccl.h>

#include <new>
#include <stdio.h>
#include <string.h>

static_assert(sizeof(ncclUniqueId) == SAGA_NCCL_ID_BYTES, "the id the generic layer broadcasts");

namespace {

struct nccl_ctx {
    ncclComm_t comm = nullptr;
    int device = 0;
    saga_backend *be = nullptr;
};

nccl_ctx *ctx_of(saga_comm *c) {
    return static_cast<nccl_ctx *>(c->ctx);
}

// An NCCL failure as SAGA_ERR_COMM: the call, NCCL's text for the code and, where the
// communicator has one, NCCL's message about the last failure (which names the peer, the sizes,
// the missing resource), e.g. "nccl all-reduce: ncclAllReduce: invalid argument (run with
// NCCL_DEBUG=WARN for details): ..." .
saga_status nccl_error(ncclComm_t comm, ncclResult_t r, const char *slot, const char *what,
                       const char *file, int line) {
    const char *last = ncclGetLastError(comm); // comm may be NULL: the thread's last failure
    return saga_cuda_host->error(SAGA_ERR_COMM, "nccl %s: %s: %s%s%s at %s:%d", slot, what,
                                 ncclGetErrorString(r), last && *last ? ": " : "", last ? last : "",
                                 file, line);
}

#define NCCL_RETURN(comm, slot, expr)                                                              \
    do {                                                                                           \
        const ncclResult_t r_ = (expr);                                                            \
        if (r_ != ncclSuccess)                                                                     \
            return nccl_error((comm), r_, (slot), #expr, __FILE__, __LINE__);                      \
    } while (0)

// Before an operation: the backend's device current (NCCL launches on the current device, and a
// thread may come here first with another one), and no error left by an earlier operation. NCCL
// reports a failure found while an operation runs (a peer that went away, a network error) only
// through ncclCommGetAsyncError; a communicator in error must not take more work, which the
// peers could wait for forever.
saga_status nccl_enter(saga_comm *c, const char *slot) {
    nccl_ctx *x = ctx_of(c);
    SAGA_CUDA_SLOT_RETURN(slot, cudaSetDevice(x->device));
    ncclResult_t async = ncclSuccess;
    NCCL_RETURN(x->comm, slot, ncclCommGetAsyncError(x->comm, &async));
    if (async != ncclSuccess && async != ncclInProgress)
        return nccl_error(x->comm, async, slot, "an earlier operation failed", __FILE__, __LINE__);
    return SAGA_OK;
}

// The CUDA stream of s, which must be one of the backend's: NCCL would queue the operation on
// another device's stream, or find its buffers on the wrong device.
saga_status nccl_stream(saga_comm *c, saga_stream *s, const char *slot, cudaStream_t *out) {
    nccl_ctx *x = ctx_of(c);
    if (s->be != x->be)
        return saga_cuda_host->error(SAGA_ERR_INVALID_ARG,
                                     "nccl %s: the stream belongs to %s, the communicator to %s",
                                     slot, s->be ? s->be->name : "no backend", x->be->name);
    return saga_cuda_slot_stream(s, slot, out);
}

ncclDataType_t type_of(saga_dtype dt) {
    switch (dt) {
    case SAGA_F32:
        return ncclFloat32;
    case SAGA_F64:
        return ncclFloat64;
    case SAGA_I32:
        return ncclInt32;
    default:
        return ncclInt64;
    }
}

ncclRedOp_t op_of(saga_comm_op op) {
    return op == SAGA_COMM_SUM ? ncclSum : op == SAGA_COMM_MAX ? ncclMax : ncclMin;
}

saga_status nccl_allreduce(saga_comm *c, void *buf, size_t count, saga_dtype dt, saga_comm_op op,
                           saga_stream *s) {
    static const char slot[] = "all-reduce";
    nccl_ctx *x = ctx_of(c);
    saga_status st = nccl_enter(c, slot);
    if (st < 0)
        return st;
    cudaStream_t stream;
    st = nccl_stream(c, s, slot, &stream);
    if (st < 0)
        return st;
    NCCL_RETURN(x->comm, slot,
                ncclAllReduce(buf, buf, count, type_of(dt), op_of(op), x->comm, stream));
    return SAGA_OK;
}

saga_status nccl_bcast(saga_comm *c, void *buf, size_t bytes, int root, saga_stream *s) {
    static const char slot[] = "broadcast";
    nccl_ctx *x = ctx_of(c);
    saga_status st = nccl_enter(c, slot);
    if (st < 0)
        return st;
    cudaStream_t stream;
    st = nccl_stream(c, s, slot, &stream);
    if (st < 0)
        return st;
    NCCL_RETURN(x->comm, slot, ncclBroadcast(buf, buf, bytes, ncclInt8, root, x->comm, stream));
    return SAGA_OK;
}

// One group: NCCL starts every send and receive of it together, so that two ranks that send to
// each other before they receive (a halo exchange) do not wait on one another. Blocks to one
// peer are matched in the order they are issued, which is the order of the arrays. Empty blocks
// are left out on both sides (the sizes of a matched pair are equal).
saga_status nccl_sendrecv(saga_comm *c, const saga_comm_block *sends, int n_sends,
                          const saga_comm_block *recvs, int n_recvs, saga_stream *s) {
    static const char slot[] = "send/receive";
    nccl_ctx *x = ctx_of(c);
    saga_status st = nccl_enter(c, slot);
    if (st < 0)
        return st;
    cudaStream_t stream;
    st = nccl_stream(c, s, slot, &stream);
    if (st < 0)
        return st;
    NCCL_RETURN(x->comm, slot, ncclGroupStart());
    // A failed call inside the group still needs the group closed; the first failure is the one
    // reported.
    ncclResult_t r = ncclSuccess;
    const char *what = "";
    for (int i = 0; i < n_sends && r == ncclSuccess; i++)
        if (sends[i].bytes) {
            r = ncclSend(sends[i].data, sends[i].bytes, ncclInt8, sends[i].peer, x->comm, stream);
            what = "ncclSend";
        }
    for (int i = 0; i < n_recvs && r == ncclSuccess; i++)
        if (recvs[i].bytes) {
            r = ncclRecv(recvs[i].data, recvs[i].bytes, ncclInt8, recvs[i].peer, x->comm, stream);
            what = "ncclRecv";
        }
    const ncclResult_t end = ncclGroupEnd();
    if (r != ncclSuccess)
        return nccl_error(x->comm, r, slot, what, __FILE__, __LINE__);
    if (end != ncclSuccess)
        return nccl_error(x->comm, end, slot, "ncclGroupEnd()", __FILE__, __LINE__);
    return SAGA_OK;
}

// Rarely used (the generic layer's barrier goes through the host communicator): a one-element
// all-reduce on the default stream, then a wait for it. The element is the stream's reduction
// partials, which only work in that stream's order touches, so the barrier needs no memory of
// its own.
saga_status nccl_barrier(saga_comm *c) {
    static const char slot[] = "barrier";
    nccl_ctx *x = ctx_of(c);
    saga_status st = nccl_enter(c, slot);
    if (st < 0)
        return st;
    saga_stream *s = &x->be->default_stream;
    cudaStream_t stream;
    saga_cuda_scratch sc;
    st = saga_cuda_slot_scratch(s, slot, 0, &stream, &sc);
    if (st < 0)
        return st;
    NCCL_RETURN(x->comm, slot,
                ncclAllReduce(sc.partials, sc.partials, 1, ncclFloat64, ncclSum, x->comm, stream));
    SAGA_CUDA_SLOT_RETURN(slot, cudaStreamSynchronize(stream));
    // an operation that fails while it runs says so only here
    return nccl_enter(c, slot);
}

// Stops this rank's part at once, queued operations included (ncclCommAbort does not wait for
// them). The generic layer's abort goes through the host communicator, which ends the job.
void nccl_abort(saga_comm *c, int code) {
    nccl_ctx *x = ctx_of(c);
    if (!x)
        return;
    cudaSetDevice(x->device);
    ncclCommAbort(x->comm);
    delete x;
    c->ctx = nullptr;
}

// ncclCommDestroy waits for the operations queued on the communicator, then frees it.
void nccl_destroy(saga_comm *c) {
    nccl_ctx *x = ctx_of(c);
    if (!x)
        return;
    cudaSetDevice(x->device);
    const ncclResult_t r = ncclCommDestroy(x->comm);
    if (r != ncclSuccess)
        saga_cuda_host->log(SAGA_LOG_WARN, "nccl: ncclCommDestroy: %s", ncclGetErrorString(r));
    delete x;
    c->ctx = nullptr;
}

const saga_comm_iface nccl_iface = {
    /* version */ 1,
    /* destroy */ nccl_destroy,
    /* allreduce */ nccl_allreduce,
    /* bcast */ nccl_bcast,
    /* sendrecv */ nccl_sendrecv,
    /* barrier */ nccl_barrier,
    /* abort */ nccl_abort,
};

} // namespace

// Entry points (see comm_impl.h).

extern "C" __attribute__((visibility("default"))) saga_status
saga_cuda_nccl_id(unsigned char id[SAGA_NCCL_ID_BYTES]) {
    ncclUniqueId u;
    NCCL_RETURN(nullptr, "id", ncclGetUniqueId(&u));
    memcpy(id, u.internal, sizeof u.internal);
    return SAGA_OK;
}

// c->rank and c->size are set; the communicator binds to the device current at
// ncclCommInitRank, which must be be's. Every rank of the clique calls it at once (it waits for
// all of them).
extern "C" __attribute__((visibility("default"))) saga_status
saga_cuda_nccl_init(saga_comm *c, saga_backend *be, const unsigned char id[SAGA_NCCL_ID_BYTES]) {
    static const char slot[] = "init";
    const saga_cuda_stream *ds = static_cast<const saga_cuda_stream *>(be->default_stream.impl);
    if (!ds)
        return saga_cuda_host->error(SAGA_ERR_INTERNAL, "nccl init: %s has no default stream",
                                     be->name);
    nccl_ctx *x = new (std::nothrow) nccl_ctx();
    if (!x)
        return saga_cuda_host->error(SAGA_ERR_OUT_OF_MEMORY,
                                     "nccl init: out of memory for a communicator");
    x->device = ds->device;
    x->be = be;
    saga_status st =
        saga_cuda_slot_check(slot, cudaSetDevice(x->device), "cudaSetDevice", __FILE__, __LINE__);
    if (st < 0) {
        delete x;
        return st;
    }
    ncclUniqueId u;
    memcpy(u.internal, id, sizeof u.internal);
    const ncclResult_t r = ncclCommInitRank(&x->comm, c->size, u, c->rank);
    if (r != ncclSuccess) {
        delete x;
        return nccl_error(nullptr, r, slot, "ncclCommInitRank", __FILE__, __LINE__);
    }
    c->iface = &nccl_iface;
    c->ctx = x;
    snprintf(c->name, sizeof c->name, "nccl (%d rank%s)", c->size, c->size == 1 ? "" : "s");
    return SAGA_OK;
}

#endif // SAGA_CUDA_HAVE_NCCL
