// nccl.cpp - the CUDA simulator's NCCL stand-in, over MPI. Each process holds one rank of a clique
// on one simulated device; the clique is an MPI communicator. Operations are queued on the
// simulated stream and call MPI on the stream's worker thread, in stream order.
//
// - ncclCommInitRank splits MPI_COMM_WORLD by the id (colour: a hash of its bytes; key: the
//   rank), so every process of MPI_COMM_WORLD must call it together, which is how saga's device
//   communicator opens (every rank of the host communicator, MPI_COMM_WORLD's duplicate, joins).
//   MPI must already be initialised, with MPI_THREAD_MULTIPLE: the stream workers call MPI beside
//   the threads that issue work. The processes then compare what they were given (the id, the
//   number of ranks, the ranks), so a clique that a GPU run would wait for forever stops the
//   program with a diagnostic instead.
// - The operations of one communicator run in the order they were issued, whatever streams they
//   were queued on, as NCCL's do.
// - A collective first compares its kind, count, type and operation or root across the ranks
//   (one small all-reduce); a disagreement, which on a GPU hangs or reduces garbage, fails the
//   operation on every rank with ncclInvalidArgument or ncclInvalidUsage.
// - A group (ncclGroupStart .. ncclGroupEnd) is one queued operation per communicator: it posts
//   every send and receive before it waits for any, so the usual halo exchange (every rank sends
//   to its neighbours, then receives from them) does not deadlock. Each send goes out as a
//   header with its size, then the data; a receive whose size differs from its send's receives
//   the data into a scratch buffer (so the sender completes) and fails with ncclInvalidArgument,
//   naming the peer and both sizes.
// - Failures found while an operation runs are the communicator's asynchronous error
//   (ncclCommGetAsyncError); the communicator then skips the operations after it, as NCCL's
//   takes no more work.
// - Misuse that on a GPU faults, corrupts memory or hangs stops the program: buffers that are not
//   device memory of the communicator's device, a stream of another device, a peer that never
//   posts the matching call (after SAGA_CUDASIM_NCCL_TIMEOUT seconds without progress, default
//   120; 0 waits forever).
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include "cudasim_internal.h"

#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

using cudasim::fatal;

namespace {

// ---- communicators ----------------------------------------------------------------------------

struct comm_state {
    MPI_Comm mpi = MPI_COMM_NULL;
    int rank = 0, nranks = 0, device = 0;
    std::string id; // the clique's id, while the communicator is open
    std::mutex m;
    std::condition_variable cv;
    uint64_t issued = 0, finished = 0; // operations queued, and run, in issue order
    ncclResult_t async = ncclSuccess;
    std::string error; // the message of the last failure
    bool aborted = false;
};

} // namespace

struct ncclComm {
    std::shared_ptr<comm_state> s;
};

namespace {

const char ID_MAGIC[16] = "cudasim nccl id";

std::mutex ids_lock;
std::set<std::string> ids_open; // the cliques this process holds a rank of

thread_local std::string thread_error; // ncclGetLastError(NULL)
thread_local std::string error_copy;   // what ncclGetLastError returns

double timeout_seconds() {
    static const double t = [] {
        const char *s = getenv("SAGA_CUDASIM_NCCL_TIMEOUT");
        if (!s || !*s)
            return 120.0;
        char *end = nullptr;
        const double v = strtod(s, &end);
        if (*end || v < 0)
            fatal("SAGA_CUDASIM_NCCL_TIMEOUT=%s: expected a number of seconds (0: no limit)", s);
        return v;
    }();
    return t;
}

std::string vformat(const char *fmt, va_list ap) {
    char buf[1024];
    vsnprintf(buf, sizeof buf, fmt, ap);
    return buf;
}

// A failure NCCL returns from the call: one line on stderr (NCCL prints such a line with
// NCCL_DEBUG=WARN), kept for ncclGetLastError.
__attribute__((format(printf, 3, 4))) ncclResult_t fail(comm_state *s, ncclResult_t r,
                                                        const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    const std::string msg = vformat(fmt, ap);
    va_end(ap);
    if (s) {
        fprintf(stderr, "cudasim: NCCL WARN rank %d (device %d): %s\n", s->rank, s->device,
                msg.c_str());
        std::lock_guard<std::mutex> guard(s->m);
        s->error = msg;
    } else {
        fprintf(stderr, "cudasim: NCCL WARN %s\n", msg.c_str());
    }
    fflush(stderr);
    thread_error = msg;
    return r;
}

// A failure found while an operation runs: the communicator's asynchronous error.
__attribute__((format(printf, 3, 4))) void fail_async(comm_state &s, ncclResult_t r,
                                                      const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    const std::string msg = vformat(fmt, ap);
    va_end(ap);
    fprintf(stderr, "cudasim: NCCL WARN rank %d (device %d): %s\n", s.rank, s.device, msg.c_str());
    fflush(stderr);
    std::lock_guard<std::mutex> guard(s.m);
    if (s.async == ncclSuccess) {
        s.async = r;
        s.error = msg;
    }
}

uint64_t fnv1a(const char *p, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)p[i]) * 1099511628211ull;
    return h;
}

// ---- types ------------------------------------------------------------------------------------

size_t type_size(ncclDataType_t t) {
    switch (t) {
    case ncclInt8:
    case ncclUint8:
        return 1;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32:
        return 4;
    case ncclInt64:
    case ncclUint64:
    case ncclFloat64:
        return 8;
    }
    return 0;
}

const char *type_name(ncclDataType_t t) {
    switch (t) {
    case ncclInt8:
        return "int8";
    case ncclUint8:
        return "uint8";
    case ncclInt32:
        return "int32";
    case ncclUint32:
        return "uint32";
    case ncclInt64:
        return "int64";
    case ncclUint64:
        return "uint64";
    case ncclFloat32:
        return "float32";
    case ncclFloat64:
        return "float64";
    }
    return "?";
}

MPI_Datatype mpi_type(ncclDataType_t t) {
    switch (t) {
    case ncclInt8:
        return MPI_INT8_T;
    case ncclUint8:
        return MPI_UINT8_T;
    case ncclInt32:
        return MPI_INT32_T;
    case ncclUint32:
        return MPI_UINT32_T;
    case ncclInt64:
        return MPI_INT64_T;
    case ncclUint64:
        return MPI_UINT64_T;
    case ncclFloat32:
        return MPI_FLOAT;
    case ncclFloat64:
        return MPI_DOUBLE;
    }
    return MPI_DATATYPE_NULL;
}

bool valid_op(ncclRedOp_t op) {
    return op == ncclSum || op == ncclProd || op == ncclMax || op == ncclMin;
}

MPI_Op mpi_op(ncclRedOp_t op) {
    return op == ncclSum ? MPI_SUM : op == ncclProd ? MPI_PROD : op == ncclMax ? MPI_MAX : MPI_MIN;
}

// ---- operations -------------------------------------------------------------------------------

enum op_kind { OP_ALLREDUCE = 1, OP_BCAST = 2, OP_SEND = 3, OP_RECV = 4 };

const char *kind_name(int64_t k) {
    switch (k) {
    case OP_ALLREDUCE:
        return "ncclAllReduce";
    case OP_BCAST:
        return "ncclBroadcast";
    case OP_SEND:
        return "ncclSend";
    case OP_RECV:
        return "ncclRecv";
    }
    return "?";
}

struct item {
    op_kind kind;
    const void *send;
    void *recv;
    size_t count;
    ncclDataType_t type;
    ncclRedOp_t op;
    int peer; // the root of a broadcast
    cudaStream_t stream;
    size_t bytes() const { return count * type_size(type); }
};

// MPI counts are int: transfers go in pieces of at most 2^30 elements or bytes.
constexpr size_t PIECE = (size_t)1 << 30;
enum { TAG_HEADER = 1, TAG_DATA = 2 };

// Waits for reqs (MPI progresses them while they are tested), sleeping a little between tries
// once the first ones fail. After the timeout without any completing, stops the program naming
// what is still pending. Returns MPI's error code; sts[i] holds request i's status.
int wait_requests(comm_state &s, const char *op, std::vector<MPI_Request> &reqs,
                  std::vector<MPI_Status> &sts, const std::vector<std::string> &what) {
    sts.resize(reqs.size());
    std::vector<bool> done(reqs.size(), false);
    size_t left = reqs.size();
    auto last = std::chrono::steady_clock::now();
    unsigned idle = 0;
    while (left) {
        bool progress = false;
        for (size_t i = 0; i < reqs.size(); i++) {
            if (done[i])
                continue;
            int flag = 0;
            const int rc = MPI_Test(&reqs[i], &flag, &sts[i]);
            if (rc != MPI_SUCCESS)
                return rc;
            if (flag) {
                done[i] = true;
                left--;
                progress = true;
            }
        }
        if (!left)
            break;
        const auto now = std::chrono::steady_clock::now();
        if (progress) {
            last = now;
            idle = 0;
            continue;
        }
        const double t = timeout_seconds();
        if (t > 0 && std::chrono::duration<double>(now - last).count() > t) {
            std::string pending;
            for (size_t i = 0; i < reqs.size(); i++)
                if (!done[i])
                    pending += (pending.empty() ? "" : "; ") + what[i];
            fatal("%s on rank %d (device %d): no progress for %.0f s; still waiting for: %s. A "
                  "peer never issued the matching call (on a GPU: a hang)",
                  op, s.rank, s.device, t, pending.c_str());
        }
        if (++idle < 200)
            std::this_thread::yield();
        else
            std::this_thread::sleep_for(std::chrono::microseconds(idle < 2000 ? 50 : 500));
    }
    return MPI_SUCCESS;
}

int wait_one(comm_state &s, const char *op, MPI_Request req, const std::string &what) {
    std::vector<MPI_Request> reqs{req};
    std::vector<MPI_Status> sts;
    return wait_requests(s, op, reqs, sts, {what});
}

std::string mpi_text(int rc) {
    char msg[MPI_MAX_ERROR_STRING] = "";
    int len = 0;
    MPI_Error_string(rc, msg, &len);
    return msg;
}

// The kinds, counts, types and operations (or roots) of a collective agree on every rank: one
// all-reduce of each value and its negation gives the largest and the smallest.
bool agree(comm_state &s, const item &it) {
    const int64_t mine[4] = {it.kind, (int64_t)it.count, it.type,
                             it.kind == OP_ALLREDUCE ? (int64_t)it.op : it.peer};
    int64_t v[8];
    for (int i = 0; i < 4; i++) {
        v[i] = mine[i];
        v[4 + i] = -mine[i];
    }
    MPI_Request req;
    int rc = MPI_Iallreduce(MPI_IN_PLACE, v, 8, MPI_INT64_T, MPI_MAX, s.mpi, &req);
    if (rc == MPI_SUCCESS)
        rc = wait_one(s, kind_name(it.kind), req,
                      std::string("the other ranks' ") + kind_name(it.kind));
    if (rc != MPI_SUCCESS) {
        fail_async(s, ncclSystemError, "%s: MPI: %s", kind_name(it.kind), mpi_text(rc).c_str());
        return false;
    }
    const int64_t hi[4] = {v[0], v[1], v[2], v[3]}, lo[4] = {-v[4], -v[5], -v[6], -v[7]};
    if (hi[0] != lo[0]) {
        fail_async(s, ncclInvalidUsage,
                   "collectives do not match: some ranks called %s while others called %s "
                   "(operations must be issued in the same order on every rank)",
                   kind_name(lo[0]), kind_name(hi[0]));
        return false;
    }
    static const char *const field[2][4] = {{"", "count", "datatype", "reduction"},
                                            {"", "count", "datatype", "root"}};
    for (int i = 1; i < 4; i++)
        if (hi[i] != lo[i]) {
            fail_async(s, ncclInvalidArgument,
                       "%s: the ranks disagree on the %s: from %lld to %lld (this rank: %lld)",
                       kind_name(it.kind), field[it.kind == OP_BCAST][i], (long long)lo[i],
                       (long long)hi[i], (long long)mine[i]);
            return false;
        }
    return true;
}

bool run_collective(comm_state &s, const item &it) {
    if (!agree(s, it))
        return false;
    const char *name = kind_name(it.kind);
    const size_t esz = type_size(it.type);
    int rc = MPI_SUCCESS;
    if (it.kind == OP_ALLREDUCE) {
        const bool in_place = it.send == it.recv;
        for (size_t off = 0; off < it.count && rc == MPI_SUCCESS; off += PIECE) {
            const int n = (int)std::min(PIECE, it.count - off);
            MPI_Request req;
            rc = MPI_Iallreduce(in_place ? MPI_IN_PLACE : (const char *)it.send + off * esz,
                                (char *)it.recv + off * esz, n, mpi_type(it.type), mpi_op(it.op),
                                s.mpi, &req);
            if (rc == MPI_SUCCESS)
                rc = wait_one(s, name, req, "the other ranks' ncclAllReduce");
        }
    } else {
        const size_t bytes = it.bytes();
        if (s.rank == it.peer && it.send != it.recv && bytes)
            memmove(it.recv, it.send, bytes);
        for (size_t off = 0; off < bytes && rc == MPI_SUCCESS; off += PIECE) {
            const int n = (int)std::min(PIECE, bytes - off);
            MPI_Request req;
            rc = MPI_Ibcast((char *)it.recv + off, n, MPI_BYTE, it.peer, s.mpi, &req);
            if (rc == MPI_SUCCESS)
                rc = wait_one(s, name, req, "the other ranks' ncclBroadcast");
        }
    }
    if (rc != MPI_SUCCESS) {
        fail_async(s, ncclSystemError, "%s: MPI: %s", name, mpi_text(rc).c_str());
        return false;
    }
    return true;
}

// The items of one communicator in one group: the collectives first, in order (every rank runs
// them before it posts anything else, so they cannot wait on point-to-point traffic); then every
// send (a header with its size, then the data) and every receive's header are posted; then each
// receive, its header in, posts the data's receive into its buffer or, when the sizes differ,
// into a scratch buffer; then everything is waited for.
void run_items(comm_state &s, const std::vector<item> &items) {
    for (const item &it : items)
        if ((it.kind == OP_ALLREDUCE || it.kind == OP_BCAST) && !run_collective(s, it))
            return; // every rank has found the same failure: none posts the rest
    std::vector<MPI_Request> reqs;
    std::vector<MPI_Status> sts;
    std::vector<std::string> what;
    std::vector<uint64_t> out_sizes, in_sizes;
    std::vector<const item *> recvs;
    size_t n_sends = 0;
    for (const item &it : items)
        if (it.kind == OP_SEND)
            n_sends++;
        else if (it.kind == OP_RECV)
            recvs.push_back(&it);
    out_sizes.reserve(n_sends); // the headers' buffers must not move while they are sent
    in_sizes.resize(recvs.size());
    char desc[160];
    int rc = MPI_SUCCESS;
    for (const item &it : items) {
        if (it.kind != OP_SEND || rc != MPI_SUCCESS)
            continue;
        const size_t bytes = it.bytes();
        snprintf(desc, sizeof desc, "ncclSend of %zu bytes to peer %d", bytes, it.peer);
        out_sizes.push_back(bytes);
        reqs.emplace_back();
        what.emplace_back(desc);
        rc =
            MPI_Isend(&out_sizes.back(), 1, MPI_UINT64_T, it.peer, TAG_HEADER, s.mpi, &reqs.back());
        for (size_t off = 0; off < bytes && rc == MPI_SUCCESS; off += PIECE) {
            reqs.emplace_back();
            what.emplace_back(desc);
            rc = MPI_Isend((const char *)it.send + off, (int)std::min(PIECE, bytes - off), MPI_BYTE,
                           it.peer, TAG_DATA, s.mpi, &reqs.back());
        }
    }
    std::vector<MPI_Request> hreqs(recvs.size(), MPI_REQUEST_NULL);
    std::vector<std::string> hwhat;
    for (size_t j = 0; j < recvs.size() && rc == MPI_SUCCESS; j++) {
        snprintf(desc, sizeof desc, "ncclRecv of %zu bytes from peer %d", recvs[j]->bytes(),
                 recvs[j]->peer);
        hwhat.emplace_back(desc);
        rc = MPI_Irecv(&in_sizes[j], 1, MPI_UINT64_T, recvs[j]->peer, TAG_HEADER, s.mpi, &hreqs[j]);
    }
    if (rc == MPI_SUCCESS) {
        std::vector<MPI_Status> hsts;
        rc = wait_requests(s, "ncclGroupEnd", hreqs, hsts, hwhat);
    }
    // receives whose sizes differ still take the data, so that their senders complete
    std::vector<std::unique_ptr<char[]>> scratch;
    for (size_t j = 0; j < recvs.size() && rc == MPI_SUCCESS; j++) {
        const item &it = *recvs[j];
        const size_t want = it.bytes();
        const uint64_t sent = in_sizes[j];
        char *dst = (char *)it.recv;
        if (sent != want) {
            fail_async(s, ncclInvalidArgument,
                       "ncclRecv of %zu x %s (%zu bytes) from peer %d meets an ncclSend of %llu "
                       "bytes: a send and its receive must have the same count and type",
                       it.count, type_name(it.type), want, it.peer, (unsigned long long)sent);
            scratch.emplace_back(new char[sent ? sent : 1]);
            dst = scratch.back().get();
        }
        for (size_t off = 0; off < sent && rc == MPI_SUCCESS; off += PIECE) {
            reqs.emplace_back();
            what.emplace_back(hwhat[j]);
            rc = MPI_Irecv(dst + off, (int)std::min<uint64_t>(PIECE, sent - off), MPI_BYTE, it.peer,
                           TAG_DATA, s.mpi, &reqs.back());
        }
    }
    // what was posted is waited for, whatever failed after it (MPI still owns the buffers)
    if (rc != MPI_SUCCESS)
        fail_async(s, ncclSystemError, "ncclGroupEnd: MPI: %s", mpi_text(rc).c_str());
    rc = wait_requests(s, "ncclGroupEnd", reqs, sts, what);
    if (rc != MPI_SUCCESS)
        fail_async(s, ncclSystemError, "ncclGroupEnd: MPI: %s", mpi_text(rc).c_str());
}

// ---- issuing ----------------------------------------------------------------------------------

// Streams that one group of a communicator uses besides the first wait for it: each arrives at
// the operation's place in its order, then waits until the operation has run.
struct join {
    std::mutex m;
    std::condition_variable cv;
    size_t arrived = 0;
    bool done = false;
};

// The work of one operation of s, issued with ticket: it waits for the streams besides the first
// to arrive (others of them) and for the operations issued before it, runs, and lets them go.
std::function<void()> operation(const std::shared_ptr<comm_state> &s,
                                const std::shared_ptr<join> &j,
                                const std::shared_ptr<std::vector<item>> &body, uint64_t ticket,
                                size_t others) {
    return [s, j, body, ticket, others] {
        {
            std::unique_lock<std::mutex> lk(j->m);
            j->cv.wait(lk, [&] { return j->arrived == others; });
        }
        bool skip;
        {
            std::unique_lock<std::mutex> lk(s->m);
            s->cv.wait(lk, [&] { return s->finished == ticket - 1; });
            skip = s->aborted || s->async != ncclSuccess;
        }
        if (!skip)
            run_items(*s, *body);
        {
            std::lock_guard<std::mutex> guard(s->m);
            s->finished = ticket;
            s->cv.notify_all();
        }
        std::lock_guard<std::mutex> guard(j->m);
        j->done = true;
        j->cv.notify_all();
    };
}

// Queues one operation of a communicator, made of items (all of that communicator): it runs
// after the operations issued on the communicator before it, and after the work queued before
// it on every stream it uses. Returns what the simulated runtime said to the queuing.
cudaError_t issue(const std::shared_ptr<comm_state> &s, std::vector<item> items) {
    std::vector<cudaStream_t> streams;
    for (const item &it : items)
        if (std::find(streams.begin(), streams.end(), it.stream) == streams.end())
            streams.push_back(it.stream);
    auto body = std::make_shared<std::vector<item>>(std::move(items));
    if (streams.size() == 1) {
        // On one stream the operation may be captured into a graph: it takes its place in the
        // communicator's order each time it is issued, at the call or at each launch.
        return cudasim::enqueue_issued(streams[0], [s, body] {
            uint64_t ticket;
            {
                std::lock_guard<std::mutex> guard(s->m);
                ticket = ++s->issued;
            }
            return operation(s, std::make_shared<join>(), body, ticket, 0);
        });
    }
    for (cudaStream_t st : streams)
        if (cudasim::capturing(st))
            fatal("ncclGroupEnd: a group over %zu streams inside a stream capture is not modelled "
                  "by the simulator",
                  streams.size());
    uint64_t ticket;
    {
        std::lock_guard<std::mutex> guard(s->m);
        ticket = ++s->issued;
    }
    auto j = std::make_shared<join>();
    const size_t others = streams.size() - 1;
    for (size_t k = 1; k < streams.size(); k++)
        cudasim::enqueue(streams[k], [j] {
            std::unique_lock<std::mutex> lk(j->m);
            j->arrived++;
            j->cv.notify_all();
            j->cv.wait(lk, [&] { return j->done; });
        });
    return cudasim::enqueue(streams[0], operation(s, j, body, ticket, others));
}

struct group_state {
    int depth = 0;
    std::vector<std::pair<std::shared_ptr<comm_state>, item>> items;
    ncclResult_t error = ncclSuccess;
};
thread_local group_state group;

// The checks of every operation, at the call, as NCCL makes them (a bad argument is an error)
// and as a GPU would meet them (memory it cannot use, a stream of another device: the program
// stops).
ncclResult_t submit(ncclComm_t comm, item it) {
    const char *name = kind_name(it.kind);
    cudasim::api_entry(name);
    ncclResult_t r = ncclSuccess;
    if (!comm) {
        r = fail(nullptr, ncclInvalidArgument, "%s: comm is NULL", name);
    } else {
        comm_state &s = *comm->s;
        {
            std::lock_guard<std::mutex> guard(s.m);
            r = s.async;
        }
        const size_t esz = type_size(it.type);
        if (r != ncclSuccess)
            r = fail(&s, r, "%s: the communicator has failed earlier", name);
        else if (esz == 0)
            r = fail(&s, ncclInvalidArgument, "%s: invalid datatype %d", name, (int)it.type);
        else if (it.kind == OP_ALLREDUCE && !valid_op(it.op))
            r = fail(&s, ncclInvalidArgument, "%s: invalid reduction %d", name, (int)it.op);
        else if (it.peer < 0 || it.peer >= s.nranks)
            r = fail(&s, ncclInvalidArgument, "%s: invalid %s %d (the communicator has %d ranks)",
                     name, it.kind == OP_BCAST ? "root" : "peer", it.peer, s.nranks);
        else if (it.count > SIZE_MAX / esz)
            r = fail(&s, ncclInvalidArgument, "%s: %zu elements overflow", name, it.count);
        if (r == ncclSuccess) {
            // NCCL launches on the communicator's device; a NULL stream is that device's default
            int saved = 0;
            cudaGetDevice(&saved);
            cudaSetDevice(s.device);
            const int sd = cudasim::stream_device(it.stream);
            if (sd != s.device)
                fatal("%s: the stream belongs to device %d, the communicator (rank %d) to device "
                      "%d",
                      name, sd, s.rank, s.device);
            const size_t bytes = it.bytes();
            char who[96];
            snprintf(who, sizeof who, "%s on rank %d", name, s.rank);
            if (bytes) {
                if (it.kind == OP_ALLREDUCE || it.kind == OP_SEND ||
                    (it.kind == OP_BCAST && it.peer == s.rank))
                    cudasim::check_pointer(who, "sendbuff", it.send, bytes, s.device, false);
                if (it.kind != OP_SEND)
                    cudasim::check_pointer(who, "recvbuff", it.recv, bytes, s.device, false);
            }
            if (group.depth > 0)
                group.items.emplace_back(comm->s, it);
            else if (cudaError_t e = issue(comm->s, {it}))
                r = fail(&s, ncclUnhandledCudaError, "%s: %s", name, cudaGetErrorString(e));
            cudaSetDevice(saved);
        }
    }
    if (r != ncclSuccess && group.depth > 0 && group.error == ncclSuccess)
        group.error = r;
    return r;
}

} // namespace

// ---- the API ----------------------------------------------------------------------------------

ncclResult_t ncclGetVersion(int *version) {
    if (!version)
        return fail(nullptr, ncclInvalidArgument, "ncclGetVersion: version is NULL");
    *version = NCCL_VERSION_CODE;
    return ncclSuccess;
}

const char *ncclGetErrorString(ncclResult_t result) {
    switch (result) {
    case ncclSuccess:
        return "no error";
    case ncclUnhandledCudaError:
        return "unhandled cuda error";
    case ncclSystemError:
        return "unhandled system error";
    case ncclInternalError:
        return "internal error";
    case ncclInvalidArgument:
        return "invalid argument";
    case ncclInvalidUsage:
        return "invalid usage";
    case ncclRemoteError:
        return "remote process exited or there was a network error";
    case ncclInProgress:
        return "NCCL operation in progress";
    case ncclNumResults:
        break;
    }
    return "unknown result code";
}

const char *ncclGetLastError(ncclComm_t comm) {
    if (comm) {
        std::lock_guard<std::mutex> guard(comm->s->m);
        error_copy = comm->s->error;
    } else {
        error_copy = thread_error;
    }
    return error_copy.c_str();
}

ncclResult_t ncclGetUniqueId(ncclUniqueId *unique_id) {
    cudasim::api_entry("ncclGetUniqueId");
    if (!unique_id)
        return fail(nullptr, ncclInvalidArgument, "ncclGetUniqueId: uniqueId is NULL");
    static std::mutex lock;
    static std::mt19937_64 rng = [] {
        std::random_device rd;
        std::seed_seq seq{rd(), rd(), rd(), rd(), (unsigned)getpid()};
        return std::mt19937_64(seq);
    }();
    std::lock_guard<std::mutex> guard(lock);
    memcpy(unique_id->internal, ID_MAGIC, sizeof ID_MAGIC);
    for (size_t i = sizeof ID_MAGIC; i < NCCL_UNIQUE_ID_BYTES; i += 8) {
        const uint64_t v = rng();
        memcpy(unique_id->internal + i, &v, std::min<size_t>(8, NCCL_UNIQUE_ID_BYTES - i));
    }
    return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId comm_id, int rank) {
    cudasim::api_entry("ncclCommInitRank");
    int init = 0, fin = 0, level = 0;
    MPI_Initialized(&init);
    MPI_Finalized(&fin);
    if (!init || fin)
        return fail(nullptr, ncclInvalidUsage,
                    "ncclCommInitRank: MPI is %s; the simulator's NCCL runs over MPI, which the "
                    "program must initialise (with MPI_THREAD_MULTIPLE) before it",
                    fin ? "already finalised" : "not initialised");
    MPI_Query_thread(&level);
    if (level < MPI_THREAD_MULTIPLE)
        return fail(nullptr, ncclInvalidUsage,
                    "ncclCommInitRank: MPI provides thread level %d, not MPI_THREAD_MULTIPLE; the "
                    "simulator's NCCL calls MPI from the stream threads",
                    level);
    if (group.depth > 0)
        return fail(nullptr, ncclInvalidUsage,
                    "ncclCommInitRank inside ncclGroupStart/ncclGroupEnd: the simulator holds one "
                    "rank per process, initialised alone");
    // A rank that cannot join still takes part in the split (MPI_UNDEFINED), so that the others
    // find the clique short and say so, rather than wait for it.
    ncclResult_t r = ncclSuccess;
    int device = 0;
    const std::string id(comm_id.internal, NCCL_UNIQUE_ID_BYTES);
    if (!comm)
        r = fail(nullptr, ncclInvalidArgument, "ncclCommInitRank: comm is NULL");
    else if (nranks < 1 || rank < 0 || rank >= nranks)
        r = fail(nullptr, ncclInvalidArgument, "ncclCommInitRank: rank %d of %d ranks", rank,
                 nranks);
    else if (memcmp(comm_id.internal, ID_MAGIC, sizeof ID_MAGIC) != 0)
        r = fail(nullptr, ncclInvalidArgument,
                 "ncclCommInitRank: the id was not made by ncclGetUniqueId");
    else if (cudaGetDevice(&device) != cudaSuccess || cudaSetDevice(device) != cudaSuccess)
        r = fail(nullptr, ncclUnhandledCudaError, "ncclCommInitRank: no current device (%s)",
                 cudaGetErrorString(cudaGetLastError()));
    if (r == ncclSuccess) {
        std::lock_guard<std::mutex> guard(ids_lock);
        if (ids_open.count(id))
            fatal("ncclCommInitRank: this process already holds a rank of this clique; the "
                  "simulator runs one rank of a clique per process");
    }
    const int colour = r == ncclSuccess
                           ? (int)(fnv1a(comm_id.internal, NCCL_UNIQUE_ID_BYTES) & 0x3fffffff)
                           : MPI_UNDEFINED;
    MPI_Comm split = MPI_COMM_NULL;
    int rc = MPI_Comm_split(MPI_COMM_WORLD, colour, rank, &split);
    if (rc != MPI_SUCCESS)
        return fail(nullptr, ncclSystemError, "ncclCommInitRank: MPI_Comm_split: %s",
                    mpi_text(rc).c_str());
    if (r != ncclSuccess)
        return r;
    MPI_Comm_set_errhandler(split, MPI_ERRORS_RETURN);
    int size = 0;
    MPI_Comm_size(split, &size);
    // what every process of the clique was given
    struct joined {
        char id[NCCL_UNIQUE_ID_BYTES];
        int rank, nranks, device;
    } mine, *all = new joined[(size_t)size];
    memcpy(mine.id, comm_id.internal, NCCL_UNIQUE_ID_BYTES);
    mine.rank = rank;
    mine.nranks = nranks;
    mine.device = device;
    rc = MPI_Allgather(&mine, (int)sizeof mine, MPI_BYTE, all, (int)sizeof mine, MPI_BYTE, split);
    if (rc != MPI_SUCCESS) {
        delete[] all;
        MPI_Comm_free(&split);
        return fail(nullptr, ncclSystemError, "ncclCommInitRank: MPI_Allgather: %s",
                    mpi_text(rc).c_str());
    }
    for (int q = 0; q < size; q++) {
        if (memcmp(all[q].id, mine.id, NCCL_UNIQUE_ID_BYTES) != 0)
            fatal("ncclCommInitRank: two cliques initialising at once have ids of one hash; "
                  "initialise them one after the other");
        if (all[q].nranks != nranks || size != nranks)
            fatal("ncclCommInitRank: rank %d was given %d ranks, rank %d %d ranks, and %d "
                  "processes joined the clique (on a GPU: a hang in ncclCommInitRank)",
                  rank, nranks, all[q].rank, all[q].nranks, size);
        // the split ordered the processes by rank: a rank given twice shows as a gap
        if (all[q].rank != q)
            fatal("ncclCommInitRank: rank %d is not given to exactly one process of the clique "
                  "of %d (on a GPU: a hang in ncclCommInitRank)",
                  all[q].rank < q ? all[q].rank : q, nranks);
    }
    delete[] all;
    auto s = std::make_shared<comm_state>();
    s->mpi = split;
    s->rank = rank;
    s->nranks = nranks;
    s->device = device;
    s->id = id;
    {
        std::lock_guard<std::mutex> guard(ids_lock);
        ids_open.insert(id);
    }
    *comm = new ncclComm{s};
    return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
    cudasim::api_entry("ncclCommDestroy");
    if (!comm)
        return fail(nullptr, ncclInvalidArgument, "ncclCommDestroy: comm is NULL");
    comm_state &s = *comm->s;
    {
        // NCCL lets the queued operations finish first
        std::unique_lock<std::mutex> lk(s.m);
        s.cv.wait(lk, [&] { return s.finished == s.issued; });
    }
    int fin = 0;
    MPI_Finalized(&fin);
    if (!fin)
        MPI_Comm_free(&s.mpi);
    {
        std::lock_guard<std::mutex> guard(ids_lock);
        ids_open.erase(s.id);
    }
    delete comm;
    return ncclSuccess;
}

// Queued operations are skipped; one that is running keeps its MPI communicator, which is not
// freed (the program is about to stop).
ncclResult_t ncclCommAbort(ncclComm_t comm) {
    cudasim::api_entry("ncclCommAbort");
    if (!comm)
        return fail(nullptr, ncclInvalidArgument, "ncclCommAbort: comm is NULL");
    {
        std::lock_guard<std::mutex> guard(comm->s->m);
        comm->s->aborted = true;
    }
    {
        std::lock_guard<std::mutex> guard(ids_lock);
        ids_open.erase(comm->s->id);
    }
    delete comm;
    return ncclSuccess;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *async_error) {
    if (!comm || !async_error)
        return fail(nullptr, ncclInvalidArgument, "ncclCommGetAsyncError: %s is NULL",
                    comm ? "asyncError" : "comm");
    std::lock_guard<std::mutex> guard(comm->s->m);
    *async_error = comm->s->async;
    return ncclSuccess;
}

ncclResult_t ncclCommCount(const ncclComm_t comm, int *count) {
    if (!comm || !count)
        return fail(nullptr, ncclInvalidArgument, "ncclCommCount: %s is NULL",
                    comm ? "count" : "comm");
    *count = comm->s->nranks;
    return ncclSuccess;
}

ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int *device) {
    if (!comm || !device)
        return fail(nullptr, ncclInvalidArgument, "ncclCommCuDevice: %s is NULL",
                    comm ? "device" : "comm");
    *device = comm->s->device;
    return ncclSuccess;
}

ncclResult_t ncclCommUserRank(const ncclComm_t comm, int *rank) {
    if (!comm || !rank)
        return fail(nullptr, ncclInvalidArgument, "ncclCommUserRank: %s is NULL",
                    comm ? "rank" : "comm");
    *rank = comm->s->rank;
    return ncclSuccess;
}

ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t stream) {
    return submit(comm, item{OP_ALLREDUCE, sendbuff, recvbuff, count, datatype, op,
                             comm ? comm->s->rank : 0, stream});
}

ncclResult_t ncclBroadcast(const void *sendbuff, void *recvbuff, size_t count,
                           ncclDataType_t datatype, int root, ncclComm_t comm,
                           cudaStream_t stream) {
    return submit(comm, item{OP_BCAST, sendbuff, recvbuff, count, datatype, ncclSum, root, stream});
}

ncclResult_t ncclSend(const void *sendbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream) {
    return submit(comm, item{OP_SEND, sendbuff, nullptr, count, datatype, ncclSum, peer, stream});
}

ncclResult_t ncclRecv(void *recvbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream) {
    return submit(comm, item{OP_RECV, nullptr, recvbuff, count, datatype, ncclSum, peer, stream});
}

ncclResult_t ncclGroupStart(void) {
    cudasim::api_entry("ncclGroupStart");
    group.depth++;
    return ncclSuccess;
}

// The outermost ncclGroupEnd issues the group; a call of the group that failed drops all of it
// and is reported again here.
ncclResult_t ncclGroupEnd(void) {
    cudasim::api_entry("ncclGroupEnd");
    if (group.depth == 0)
        return fail(nullptr, ncclInvalidUsage, "ncclGroupEnd without ncclGroupStart");
    if (--group.depth > 0)
        return ncclSuccess;
    auto items = std::move(group.items);
    group.items.clear();
    const ncclResult_t r = group.error;
    group.error = ncclSuccess;
    if (r != ncclSuccess)
        return fail(nullptr, r,
                    "ncclGroupEnd: a call of the group failed; nothing of it was "
                    "issued");
    // one operation per communicator, in the order they first appear, queued on the streams of
    // its device (a NULL stream: that device's default stream)
    std::vector<std::shared_ptr<comm_state>> comms;
    for (auto &p : items)
        if (std::find(comms.begin(), comms.end(), p.first) == comms.end())
            comms.push_back(p.first);
    int saved = 0;
    cudaGetDevice(&saved);
    ncclResult_t res = ncclSuccess;
    for (auto &c : comms) {
        std::vector<item> mine;
        for (auto &p : items)
            if (p.first == c)
                mine.push_back(p.second);
        cudaSetDevice(c->device);
        if (cudaError_t e = issue(c, std::move(mine)))
            res = fail(c.get(), ncclUnhandledCudaError, "ncclGroupEnd: %s", cudaGetErrorString(e));
    }
    cudaSetDevice(saved);
    return res;
}
