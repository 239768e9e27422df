/* saga_comm.h - communicators: several processes (ranks), one per device, computing together.
 *
 *   saga_comm *comm = NULL;
 *   SAGA_TRY(saga_comm_open(&comm, "auto"));    // MPI under mpirun / srun, else one rank
 *   int me = saga_comm_rank(comm), ranks = saga_comm_size(comm);
 *   SAGA_TRY(saga_comm_allreduce(comm, loss, 1, SAGA_F64, SAGA_COMM_SUM, NULL));
 *   saga_comm *dev = NULL;                        // for device memory of backend be
 *   SAGA_TRY(saga_comm_open_device(&dev, comm, be));  // NCCL on CUDA, else comm itself
 *   SAGA_TRY(saga_comm_allreduce(dev, grad, n, SAGA_F32, SAGA_COMM_SUM, stream));
 *   saga_comm_free(&dev);
 *   saga_comm_free(&comm);
 *
 * Implementations: "single" (one rank, no MPI needed), "mpi" (host memory; loaded at run time
 * from the module libsaga_mpi.so, so that a saga run without a launcher never loads MPI), and
 * the device communicators of saga_comm_open_device: NCCL on a CUDA backend whose module has it
 * (the ncclUniqueId goes out over the host communicator), the host communicator itself on the
 * CPU backend (its device memory is host memory), and otherwise the host communicator with
 * every buffer staged through pinned host memory.
 *
 * Every operation is collective over the ranks named in it and must be issued in the same order
 * on all of them. Operations take a stream (NULL: the backend's default stream, or none for a
 * host communicator): the operation comes after the work issued on it before, and work issued
 * after waits for it. NCCL queues the operation on the stream and returns; host communicators
 * wait for the stream and run the operation before returning.
 *
 * A rank that fails must not leave the others waiting in a collective: call saga_comm_agree at
 * points every rank reaches (after loading data, at the end of an epoch) so that all learn of the
 * failure and the failing rank's message, or saga_comm_abort to stop every rank at once.
 */
#pragma once

#include "saga_nn.h"
#include "saga_tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct saga_comm saga_comm;

typedef enum saga_comm_op {
    SAGA_COMM_SUM = 0,
    SAGA_COMM_MAX,
    SAGA_COMM_MIN,
    SAGA_COMM_OP_COUNT
} saga_comm_op;

/* A block of bytes sent to or received from one peer. */
typedef struct saga_comm_block {
    int peer;
    void *data; /* sends only read it */
    size_t bytes;
} saga_comm_block;

typedef struct saga_comm_stats {
    uint64_t sent_bytes, recv_bytes; /* payload: an all-reduce of B bytes counts B each way */
    uint64_t calls;
    double seconds; /* inside the operations (host communicators: all of it; NCCL: issuing) */
} saga_comm_stats;

/* True when the environment says an MPI launcher (mpirun, mpiexec, srun with PMI/PMIx) started
 * this process, whatever the number of ranks. */
SAGA_API bool saga_comm_launched(void);

/* Opens a communicator: "single" (one rank), "mpi" (MPI_Init unless the program initialised MPI
 * itself, then MPI_COMM_WORLD), or "auto" (mpi when saga_comm_launched(), else single).
 * SAGA_ERR_UNSUPPORTED when "mpi" is asked for and this saga was built without MPI (the message
 * says so, and how many ranks the launcher started). MPI is finalised when the process exits,
 * unless the program had initialised it (then finalising it is the program's), so that a
 * communicator may be opened again after the last one was freed. */
SAGA_API saga_status saga_comm_open(saga_comm **out, const char *spec);

/* A communicator for device memory of be among the same ranks as host (which must outlive it):
 * NCCL on CUDA when the CUDA module has it (SAGA_COMM=mpi in the environment asks for host
 * staging instead), host itself on the CPU (not a copy: freeing it leaves host alone), host with
 * pinned staging otherwise. Collective over host's ranks. */
SAGA_API saga_status saga_comm_open_device(saga_comm **out, saga_comm *host, saga_backend *be);

/* Frees the communicator; *c becomes NULL. Accepts NULL. */
SAGA_API void saga_comm_free(saga_comm **c);
/* Another host communicator over the same ranks, whose operations never meet c's: for a second
 * thread that runs collectives of its own beside c's (when saga_comm_threads(c) allows two
 * threads in MPI at once). Collective over c's ranks. SAGA_ERR_UNSUPPORTED for a device
 * communicator. */
SAGA_API saga_status saga_comm_dup(saga_comm **out, saga_comm *c);

SAGA_API int saga_comm_rank(const saga_comm *c);
SAGA_API int saga_comm_size(const saga_comm *c);
/* The rank among those on the same machine, and their number (for picking a GPU). */
SAGA_API int saga_comm_local_rank(const saga_comm *c);
SAGA_API int saga_comm_local_size(const saga_comm *c);
/* "single", "mpi (4 ranks)", "nccl (4 ranks)", "mpi (4 ranks, host-staged)". */
SAGA_API const char *saga_comm_name(const saga_comm *c);
/* true when the buffers of c's operations are device memory of its backend (NCCL, staging). */
SAGA_API bool saga_comm_on_device(const saga_comm *c);
/* true when c's operations may be called from several threads at once: false over MPI that
 * provides less than MPI_THREAD_MULTIPLE (the program initialised it so, or SAGA_MPI_THREAD asked
 * for less), where saga keeps its own calls on the calling thread. */
SAGA_API bool saga_comm_threads(const saga_comm *c);

/* In-place reduction of count elements of buf over all ranks: SAGA_F32, SAGA_F64, SAGA_I32 or
 * SAGA_I64 with SUM, MAX or MIN. Every rank ends with the result. */
SAGA_API saga_status saga_comm_allreduce(saga_comm *c, void *buf, size_t count, saga_dtype dt,
                                         saga_comm_op op, saga_stream *s);
/* root's bytes of buf to every rank. */
SAGA_API saga_status saga_comm_bcast(saga_comm *c, void *buf, size_t bytes, int root,
                                     saga_stream *s);
/* Grouped point-to-point: this rank sends each of sends to its peer and receives each of recvs
 * from its peer; blocks to the same peer arrive in order. Each send must be matched by a receive
 * of the same size on its peer. A block to or from the own rank is a copy. Only the ranks named
 * take part (not collective over all). */
SAGA_API saga_status saga_comm_sendrecv(saga_comm *c, const saga_comm_block *sends, int n_sends,
                                        const saga_comm_block *recvs, int n_recvs, saga_stream *s);
/* All-to-all with sizes per peer: send_bytes[q] bytes from send + send_off[q] go to rank q, and
 * recv_bytes[q] from q land at recv + recv_off[q] (arrays of size() entries; sizes may be 0). */
SAGA_API saga_status saga_comm_alltoallv(saga_comm *c, const void *send, const size_t *send_bytes,
                                         const size_t *send_off, void *recv,
                                         const size_t *recv_bytes, const size_t *recv_off,
                                         saga_stream *s);
SAGA_API saga_status saga_comm_barrier(saga_comm *c);

/* Collective: every rank passes its own status and gets SAGA_OK when all succeeded. Otherwise
 * the failing ranks keep their own status and message, and the others get the status of the
 * lowest failing rank with its message, prefixed "rank R: ". */
SAGA_API saga_status saga_comm_agree(saga_comm *c, saga_status st);
/* Stops every rank of c's job with exit status code (MPI_Abort; exit with one rank). For a
 * failure in the middle of work the others cannot see; print the message first. */
SAGA_API void saga_comm_abort(saga_comm *c, int code);
/* true when the last operation on c was a saga_comm_agree that returned a failure: every rank
 * knows of it. A caller that fails otherwise, where other ranks may already wait in c's next
 * collective, stops them with saga_comm_abort. */
SAGA_API bool saga_comm_failure_agreed(const saga_comm *c);
/* For a failure (st < 0) where the other ranks may be waiting in a collective this rank left: a
 * collective that failed here alone, or a failure after the last point all agreed on. Unless
 * every rank knows of it (saga_comm_failure_agreed) or there is one rank, logs the message with
 * the rank ("... stopping every rank") and stops every rank (saga_comm_abort). Returns st. */
SAGA_API saga_status saga_comm_stop_unless_agreed(saga_comm *c, saga_status st);

/* Sums every gradient of m over the ranks, in place, as one all-reduce of all of them side by
 * side in the model's order (a buffer the communicator keeps for the next call), then divides by
 * scale when scale != 1 (the mean over ranks: scale = size). Every parameter must have an f32
 * gradient (SAGA_ERR_INTERNAL otherwise), all on one backend. On host comms over a GPU backend the
 * gradients are staged through host memory. c may be NULL: one rank (only the division). */
SAGA_API saga_status saga_comm_allreduce_grads(saga_comm *c, saga_model *m, double scale);

SAGA_API void saga_comm_get_stats(const saga_comm *c, saga_comm_stats *s);
SAGA_API void saga_comm_reset_stats(saga_comm *c);

#ifdef __cplusplus
}
#endif
