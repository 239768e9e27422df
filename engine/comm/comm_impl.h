/* comm_impl.h - what a communicator implementation provides (a function table and a context, as
 * backends do) and what it may use from libsaga. Internal to saga and to the modules that
 * implement communicators (libsaga_mpi.so, the CUDA module's NCCL), which do not link libsaga. */
#pragma once

#include "saga_comm.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The generic layer (comm.c) checks arguments, handles blocks to the own rank, waits for host
 * communicators' streams and counts bytes; the table only moves data between distinct ranks.
 * Slots of a host communicator get s == NULL; a device communicator's get the stream to queue
 * on (never NULL). */
typedef struct saga_comm_iface {
    int version; /* 1 */
    void (*destroy)(saga_comm *c);
    saga_status (*allreduce)(saga_comm *c, void *buf, size_t count, saga_dtype dt, saga_comm_op op,
                             saga_stream *s);
    saga_status (*bcast)(saga_comm *c, void *buf, size_t bytes, int root, saga_stream *s);
    /* peers differ from the own rank */
    saga_status (*sendrecv)(saga_comm *c, const saga_comm_block *sends, int n_sends,
                            const saga_comm_block *recvs, int n_recvs, saga_stream *s);
    saga_status (*barrier)(saga_comm *c);
    void (*abort)(saga_comm *c, int code);
} saga_comm_iface;

struct saga_comm {
    const saga_comm_iface *iface;
    void *ctx;
    int rank, size, local_rank, local_size;
    bool on_device;   /* buffers are device memory of be (NCCL) */
    saga_backend *be; /* device communicators: the backend */
    saga_comm *host;  /* device communicators over a host one: it (not owned) */
    bool staged;      /* host with every buffer staged through pinned memory */
    bool view;        /* the host communicator itself, seen as a device one (CPU) */
    void *stage;      /* pinned staging buffer (staged) */
    size_t stage_bytes;
    char name[64];
    saga_comm_stats stats;
    bool serial; /* calls must not overlap (MPI below MPI_THREAD_MULTIPLE): saga_comm_threads */
    bool agreed; /* the last call was a saga_comm_agree that failed (saga_comm_failure_agreed) */
    /* saga_comm_allreduce_grads' bucket: every gradient side by side, kept for the next call
     * (device memory of bucket_be, or host memory when bucket_be is NULL) */
    void *bucket;
    size_t bucket_bytes;
    saga_backend *bucket_be;
};

/* The services a communicator module takes from libsaga. Fields are only appended. */
typedef struct saga_comm_module_host {
    int version; /* 1 */
    saga_status (*error)(saga_status st, const char *fmt, ...);
    void (*log)(int level, const char *fmt, ...);
    void *(*alloc)(size_t bytes); /* zeroed */
    void (*free)(void *p);
} saga_comm_module_host;

/* libsaga_mpi.so: fills c (iface, ctx, rank, size, local_rank, local_size, name). */
typedef saga_status (*saga_comm_mpi_init_fn)(saga_comm *c, const saga_comm_module_host *host);
#define SAGA_COMM_MPI_INIT "saga_comm_mpi_init"
#define SAGA_COMM_MPI_MODULE_NAME "libsaga_mpi.so"

/* The CUDA module's NCCL communicator: the unique id of a new clique (rank 0 makes it), and a
 * communicator of the clique on be's device. */
#define SAGA_NCCL_ID_BYTES 128
typedef saga_status (*saga_cuda_nccl_id_fn)(unsigned char id[SAGA_NCCL_ID_BYTES]);
typedef saga_status (*saga_cuda_nccl_init_fn)(saga_comm *c, saga_backend *be,
                                              const unsigned char id[SAGA_NCCL_ID_BYTES]);
#define SAGA_CUDA_NCCL_ID "saga_cuda_nccl_id"
#define SAGA_CUDA_NCCL_INIT "saga_cuda_nccl_init"

#ifdef __cplusplus
}
#endif
