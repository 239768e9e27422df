/* comm.c - the generic communicator layer (saga_comm.h): opening communicators, argument checks,
 * blocks to the own rank, host staging of device buffers, byte counts; the one-rank
 * communicator; loading the MPI module and the CUDA module's NCCL. */
#include "comm_impl.h"

#include "backend_impl.h"
#include "module_impl.h"
#include "saga_log.h"
#include "tensor_impl.h"

#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the one-rank communicator ------------------------------------------------------------ */

static void single_destroy(saga_comm *c) {
    (void)c;
}
static saga_status single_allreduce(saga_comm *c, void *buf, size_t count, saga_dtype dt,
                                    saga_comm_op op, saga_stream *s) {
    return SAGA_OK; /* the own values are the result */
}
static saga_status single_bcast(saga_comm *c, void *buf, size_t bytes, int root, saga_stream *s) {
    return SAGA_OK;
}
static saga_status single_sendrecv(saga_comm *c, const saga_comm_block *sends, int n_sends,
                                   const saga_comm_block *recvs, int n_recvs, saga_stream *s) {
    /* every peer is the own rank: the generic layer has copied them already */
    return saga_error(SAGA_ERR_INTERNAL, "saga_comm: a block to another rank of one");
}
static saga_status single_barrier(saga_comm *c) {
    return SAGA_OK;
}
static void single_abort(saga_comm *c, int code) {
    exit(code);
}

static const saga_comm_iface single_iface = {
    1,           single_destroy, single_allreduce, single_bcast, single_sendrecv, single_barrier,
    single_abort};

/* ---- opening ------------------------------------------------------------------------------ */

/* The launchers' variables: Open MPI, MPICH's and Intel MPI's Hydra (PMI), PMIx (Open MPI 5,
 * Slurm's srun --mpi=pmix), MVAPICH. */
static const char *const launch_size_vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE",
                                               "MV2_COMM_WORLD_SIZE"};

bool saga_comm_launched(void) {
    for (size_t i = 0; i < sizeof launch_size_vars / sizeof *launch_size_vars; i++)
        if (getenv(launch_size_vars[i]))
            return true;
    return getenv("PMIX_RANK") != NULL;
}

static int launched_size(void) {
    for (size_t i = 0; i < sizeof launch_size_vars / sizeof *launch_size_vars; i++) {
        const char *v = getenv(launch_size_vars[i]);
        if (v)
            return atoi(v);
    }
    return 0;
}

static void *comm_alloc(size_t bytes) {
    return saga_calloc(1, bytes);
}

static const saga_comm_module_host comm_module_host = {1, saga_module_error, saga_module_log,
                                                       comm_alloc, saga_free};

static pthread_mutex_t mpi_lock = PTHREAD_MUTEX_INITIALIZER;
static saga_comm_mpi_init_fn mpi_init;

static saga_status load_mpi(saga_comm_mpi_init_fn *out) {
    saga_status st = SAGA_OK;
    pthread_mutex_lock(&mpi_lock);
    if (!mpi_init) {
        void *h = NULL, *fn = NULL;
        char path[PATH_MAX];
        st = saga_module_open(&h, SAGA_COMM_MPI_MODULE_NAME, "SAGA_MPI_MODULE", "the MPI module",
                              NULL, NULL, path, sizeof path);
        if (st == SAGA_OK)
            st = saga_module_sym(h, SAGA_COMM_MPI_INIT, path, &fn);
        if (st == SAGA_OK) {
            memcpy(&mpi_init, &fn, sizeof mpi_init);
            saga_log(SAGA_LOG_DEBUG, "loaded the MPI module %s", path);
        }
    }
    *out = mpi_init;
    pthread_mutex_unlock(&mpi_lock);
    return st;
}

saga_status saga_comm_open(saga_comm **out, const char *spec) {
    saga_status st = SAGA_OK;
    saga_comm *c = NULL;
    SAGA_CHECK(out, SAGA_ERR_INVALID_ARG, "saga_comm_open: out is NULL");
    if (!spec || !*spec)
        spec = "auto";
    bool mpi = strcmp(spec, "mpi") == 0;
    SAGA_CHECK(mpi || strcmp(spec, "single") == 0 || strcmp(spec, "auto") == 0,
               SAGA_ERR_INVALID_ARG,
               "saga_comm_open: unknown communicator '%s' (expected auto, single or mpi)", spec);
    if (strcmp(spec, "auto") == 0)
        mpi = saga_comm_launched();
    SAGA_TRY(saga_alloc_zeroed((void **)&c, 1, sizeof *c, "a communicator"));
    if (!mpi) {
        c->iface = &single_iface;
        c->size = c->local_size = 1;
        snprintf(c->name, sizeof c->name, "single");
    } else {
        saga_comm_mpi_init_fn init = NULL;
        st = load_mpi(&init);
        if (st == SAGA_ERR_UNSUPPORTED) {
            int n = launched_size();
            char ranks[48] = "";
            if (n > 0)
                snprintf(ranks, sizeof ranks, " with %d ranks", n);
            st = saga_error(SAGA_ERR_UNSUPPORTED,
                            "an MPI launcher started saga%s, but this saga was built without MPI "
                            "(%s not found; install an MPI such as Debian's libopenmpi-dev and "
                            "rebuild)",
                            ranks, SAGA_COMM_MPI_MODULE_NAME);
        }
        if (st < 0)
            goto fail;
        SAGA_TRY(init(c, &comm_module_host));
    }
    *out = c;
    return SAGA_OK;
fail:
    saga_free(c);
    return st;
}

saga_status saga_comm_dup(saga_comm **out, saga_comm *c) {
    saga_status st = SAGA_OK;
    SAGA_CHECK(out && c, SAGA_ERR_INVALID_ARG, "saga_comm_dup: out and communicator must be given");
    *out = NULL;
    SAGA_CHECK(!c->host && !c->on_device && !c->view && !c->staged, SAGA_ERR_UNSUPPORTED,
               "saga_comm_dup: %s is a device communicator (duplicate its host one)", c->name);
    /* an MPI communicator of saga's own duplicates MPI_COMM_WORLD: so does another */
    return saga_comm_open(out, c->iface == &single_iface ? "single" : "mpi");
fail:
    return st;
}

saga_status saga_comm_open_device(saga_comm **out, saga_comm *host, saga_backend *be) {
    saga_status st = SAGA_OK;
    saga_comm *c = NULL;
    SAGA_CHECK(out && host && be, SAGA_ERR_INVALID_ARG,
               "saga_comm_open_device: out, host communicator and backend must be given");
    SAGA_CHECK(!host->host && !host->on_device, SAGA_ERR_INVALID_ARG,
               "saga_comm_open_device: %s is a device communicator already", host->name);
    SAGA_TRY(saga_alloc_zeroed((void **)&c, 1, sizeof *c, "a communicator"));
    c->rank = host->rank;
    c->size = host->size;
    c->local_rank = host->local_rank;
    c->local_size = host->local_size;
    c->be = be;
    c->host = host;
    c->on_device = true;
    if (be->kind == SAGA_BACKEND_CPU || host->size == 1) {
        /* the CPU's device memory is host memory; one rank moves nothing between devices */
        c->view = true;
        c->iface = host->iface;
        c->ctx = host->ctx;
        snprintf(c->name, sizeof c->name, "%s", host->name);
        *out = c;
        return SAGA_OK;
    }
    const char *want = getenv("SAGA_COMM");
    void *id_sym = be->module ? dlsym(be->module, SAGA_CUDA_NCCL_ID) : NULL;
    void *init_sym = be->module ? dlsym(be->module, SAGA_CUDA_NCCL_INIT) : NULL;
    if (id_sym && init_sym && !(want && strcmp(want, "mpi") == 0)) {
        saga_cuda_nccl_id_fn id_fn;
        saga_cuda_nccl_init_fn init_fn;
        memcpy(&id_fn, &id_sym, sizeof id_fn);
        memcpy(&init_fn, &init_sym, sizeof init_fn);
        unsigned char id[SAGA_NCCL_ID_BYTES] = {0};
        /* rank 0 makes the clique's id; a failure there reaches every rank before they wait in
         * the initialisation */
        SAGA_TRY(saga_comm_agree(host, host->rank == 0 ? id_fn(id) : SAGA_OK));
        SAGA_TRY(saga_comm_bcast(host, id, sizeof id, 0, NULL));
        SAGA_TRY(saga_comm_agree(host, init_fn(c, be, id)));
    } else {
        c->staged = true;
        c->iface = host->iface;
        c->ctx = host->ctx;
        snprintf(c->name, sizeof c->name, "%.40s, host-staged", host->name);
    }
    *out = c;
    return SAGA_OK;
fail:
    if (c && !c->staged && c->iface && c->iface->destroy)
        c->iface->destroy(c);
    saga_free(c);
    return st;
}

void saga_comm_free(saga_comm **cp) {
    if (!cp || !*cp)
        return;
    saga_comm *c = *cp;
    if (c->stage)
        saga_backend_host_free(c->be, c->stage, c->stage_bytes);
    if (c->bucket_be)
        saga_backend_free(c->bucket_be, c->bucket, c->bucket_bytes);
    else
        saga_free(c->bucket);
    if (!c->view && !c->staged && c->iface)
        c->iface->destroy(c);
    saga_free(c);
    *cp = NULL;
}

int saga_comm_rank(const saga_comm *c) {
    return c ? c->rank : 0;
}
int saga_comm_size(const saga_comm *c) {
    return c ? c->size : 1;
}
int saga_comm_local_rank(const saga_comm *c) {
    return c ? c->local_rank : 0;
}
int saga_comm_local_size(const saga_comm *c) {
    return c ? c->local_size : 1;
}
const char *saga_comm_name(const saga_comm *c) {
    return c ? c->name : "single";
}
bool saga_comm_on_device(const saga_comm *c) {
    return c && c->on_device;
}
bool saga_comm_failure_agreed(const saga_comm *c) {
    return c && (c->agreed || (c->host && c->host->agreed));
}
bool saga_comm_threads(const saga_comm *c) {
    return !c || (!c->serial && saga_comm_threads(c->host));
}

void saga_comm_get_stats(const saga_comm *c, saga_comm_stats *s) {
    *s = c->stats;
}
void saga_comm_reset_stats(saga_comm *c) {
    memset(&c->stats, 0, sizeof c->stats);
}

/* ---- operations --------------------------------------------------------------------------- */

/* Queued natively on a stream (NCCL), or run on the host after the stream's work. */
static bool native(const saga_comm *c) {
    return c->on_device && !c->view && !c->staged;
}

static saga_stream *stream_of(saga_comm *c, saga_stream *s) {
    return s ? s : c->be ? saga_backend_default_stream(c->be) : NULL;
}

/* Before a host operation: the stream's work has run. */
static saga_status host_wait(saga_comm *c, saga_stream *s) {
    saga_stream *q = stream_of(c, s);
    return q ? saga_stream_synchronize(q) : SAGA_OK;
}

/* The staging buffer of a host-staged communicator, at least bytes. */
static saga_status stage_reserve(saga_comm *c, size_t bytes) {
    saga_status st = SAGA_OK;
    if (bytes <= c->stage_bytes)
        return SAGA_OK;
    size_t want = c->stage_bytes * 2 > bytes ? c->stage_bytes * 2 : bytes;
    if (c->stage)
        saga_backend_host_free(c->be, c->stage, c->stage_bytes);
    c->stage = NULL;
    c->stage_bytes = 0;
    SAGA_TRY(saga_backend_host_alloc(c->be, &c->stage, want));
    c->stage_bytes = want;
fail:
    return st;
}

static void account(saga_comm *c, uint64_t sent, uint64_t recv, double t0) {
    c->stats.sent_bytes += sent;
    c->stats.recv_bytes += recv;
    c->stats.calls++;
    c->stats.seconds += saga_now() - t0;
}

/* A collective starts on c: the failure the last agreement reported is behind it. */
static void began(saga_comm *c) {
    c->agreed = false;
    if (c->host)
        c->host->agreed = false;
}

saga_status saga_comm_allreduce(saga_comm *c, void *buf, size_t count, saga_dtype dt,
                                saga_comm_op op, saga_stream *s) {
    saga_status st = SAGA_OK;
    double t0 = saga_now();
    SAGA_CHECK(c && (buf || !count), SAGA_ERR_INVALID_ARG,
               "saga_comm_allreduce: communicator and buffer must be given");
    began(c);
    SAGA_CHECK((unsigned)dt < SAGA_DTYPE_COUNT && (unsigned)op < SAGA_COMM_OP_COUNT,
               SAGA_ERR_INVALID_ARG, "saga_comm_allreduce: dtype %d or operation %d out of range",
               (int)dt, (int)op);
    size_t esz = saga_dtype_size(dt);
    SAGA_CHECK(count <= SIZE_MAX / esz, SAGA_ERR_INVALID_ARG,
               "saga_comm_allreduce: %zu elements overflow", count);
    size_t bytes = count * esz;
    if (c->size == 1 || !count)
        goto done;
    if (native(c)) {
        SAGA_TRY(c->iface->allreduce(c, buf, count, dt, op, stream_of(c, s)));
    } else if (c->staged) {
        saga_stream *q = stream_of(c, s);
        SAGA_TRY(stage_reserve(c, bytes));
        SAGA_TRY(saga_memcpy_d2h_async(q, c->stage, buf, bytes));
        SAGA_TRY(saga_stream_synchronize(q));
        SAGA_TRY(c->iface->allreduce(c, c->stage, count, dt, op, NULL));
        SAGA_TRY(saga_memcpy_h2d_async(q, buf, c->stage, bytes));
        SAGA_TRY(saga_stream_synchronize(q));
    } else {
        SAGA_TRY(host_wait(c, s));
        SAGA_TRY(c->iface->allreduce(c, buf, count, dt, op, NULL));
    }
done:
    account(c, bytes, bytes, t0);
fail:
    return st;
}

saga_status saga_comm_bcast(saga_comm *c, void *buf, size_t bytes, int root, saga_stream *s) {
    saga_status st = SAGA_OK;
    double t0 = saga_now();
    SAGA_CHECK(c && (buf || !bytes), SAGA_ERR_INVALID_ARG,
               "saga_comm_bcast: communicator and buffer must be given");
    began(c);
    SAGA_CHECK(root >= 0 && root < c->size, SAGA_ERR_INVALID_ARG,
               "saga_comm_bcast: root %d out of range (%d ranks)", root, c->size);
    if (c->size == 1 || !bytes)
        goto done;
    if (native(c)) {
        SAGA_TRY(c->iface->bcast(c, buf, bytes, root, stream_of(c, s)));
    } else if (c->staged) {
        saga_stream *q = stream_of(c, s);
        SAGA_TRY(stage_reserve(c, bytes));
        if (c->rank == root) {
            SAGA_TRY(saga_memcpy_d2h_async(q, c->stage, buf, bytes));
            SAGA_TRY(saga_stream_synchronize(q));
        }
        SAGA_TRY(c->iface->bcast(c, c->stage, bytes, root, NULL));
        if (c->rank != root) {
            SAGA_TRY(saga_memcpy_h2d_async(q, buf, c->stage, bytes));
            SAGA_TRY(saga_stream_synchronize(q));
        }
    } else {
        SAGA_TRY(host_wait(c, s));
        SAGA_TRY(c->iface->bcast(c, buf, bytes, root, NULL));
    }
done:
    account(c, c->rank == root ? bytes * (uint64_t)(c->size - 1) : 0, c->rank == root ? 0 : bytes,
            t0);
fail:
    return st;
}

/* Copies the k-th block to the own rank into the k-th block from it. */
static saga_status self_copies(saga_comm *c, const saga_comm_block *sends, int n_sends,
                               const saga_comm_block *recvs, int n_recvs, saga_stream *s) {
    saga_status st = SAGA_OK;
    int j = 0;
    for (int i = 0; i < n_sends; i++) {
        if (sends[i].peer != c->rank)
            continue;
        while (j < n_recvs && recvs[j].peer != c->rank)
            j++;
        SAGA_CHECK(j < n_recvs && recvs[j].bytes == sends[i].bytes, SAGA_ERR_INVALID_ARG,
                   "saga_comm_sendrecv: a %zu-byte block to the own rank has no receive of its "
                   "size",
                   sends[i].bytes);
        if (sends[i].bytes) {
            if (c->on_device && !c->view)
                SAGA_TRY(saga_memcpy_d2d_async(stream_of(c, s), recvs[j].data, sends[i].data,
                                               sends[i].bytes));
            else
                memmove(recvs[j].data, sends[i].data, sends[i].bytes);
        }
        j++;
    }
    while (j < n_recvs && recvs[j].peer != c->rank)
        j++;
    SAGA_CHECK(j == n_recvs, SAGA_ERR_INVALID_ARG,
               "saga_comm_sendrecv: a receive from the own rank has no send");
fail:
    return st;
}

/* The blocks to other ranks (in order), into *out (saga_free'd by the caller; NULL when none). */
static saga_status others(const saga_comm *c, const saga_comm_block *b, int n,
                          saga_comm_block **out, int *n_out) {
    saga_status st = SAGA_OK;
    int k = 0;
    *out = NULL;
    for (int i = 0; i < n; i++)
        k += b[i].peer != c->rank;
    *n_out = k;
    if (!k)
        return SAGA_OK;
    SAGA_TRY(saga_alloc_array((void **)out, (size_t)k, sizeof **out, "communication blocks"));
    k = 0;
    for (int i = 0; i < n; i++)
        if (b[i].peer != c->rank)
            (*out)[k++] = b[i];
fail:
    return st;
}

/* The staged form of a send/receive over device buffers: every send copied into the staging
 * buffer, the exchange between staging areas, every receive copied back. */
static saga_status staged_sendrecv(saga_comm *c, saga_comm_block *so, int ns, saga_comm_block *ro,
                                   int nr, saga_stream *s) {
    saga_status st = SAGA_OK;
    saga_stream *q = stream_of(c, s);
    size_t total = 0;
    for (int i = 0; i < ns; i++)
        total += so[i].bytes;
    size_t send_total = total;
    for (int i = 0; i < nr; i++)
        total += ro[i].bytes;
    SAGA_TRY(stage_reserve(c, total ? total : 1));
    unsigned char *p = c->stage;
    void **dev = NULL;
    SAGA_TRY(saga_alloc_array((void **)&dev, (size_t)(nr ? nr : 1), sizeof *dev, "staging"));
    for (int i = 0; i < ns; i++) {
        if (so[i].bytes)
            SAGA_TRY(saga_memcpy_d2h_async(q, p, so[i].data, so[i].bytes));
        so[i].data = p;
        p += so[i].bytes;
    }
    SAGA_TRY(saga_stream_synchronize(q));
    p = (unsigned char *)c->stage + send_total;
    for (int i = 0; i < nr; i++) {
        dev[i] = ro[i].data;
        ro[i].data = p;
        p += ro[i].bytes;
    }
    SAGA_TRY(c->iface->sendrecv(c, so, ns, ro, nr, NULL));
    for (int i = 0; i < nr; i++)
        if (ro[i].bytes)
            SAGA_TRY(saga_memcpy_h2d_async(q, dev[i], ro[i].data, ro[i].bytes));
    SAGA_TRY(saga_stream_synchronize(q));
fail:
    saga_free(dev);
    return st;
}

saga_status saga_comm_sendrecv(saga_comm *c, const saga_comm_block *sends, int n_sends,
                               const saga_comm_block *recvs, int n_recvs, saga_stream *s) {
    saga_status st = SAGA_OK;
    saga_comm_block *so = NULL, *ro = NULL;
    int ns = 0, nr = 0;
    double t0 = saga_now();
    uint64_t sent = 0, recv = 0;
    SAGA_CHECK(c && n_sends >= 0 && n_recvs >= 0 && (sends || !n_sends) && (recvs || !n_recvs),
               SAGA_ERR_INVALID_ARG, "saga_comm_sendrecv: bad arguments");
    began(c);
    for (int i = 0; i < n_sends; i++) {
        SAGA_CHECK(sends[i].peer >= 0 && sends[i].peer < c->size &&
                       (sends[i].data || !sends[i].bytes),
                   SAGA_ERR_INVALID_ARG, "saga_comm_sendrecv: send %d to rank %d of %d", i,
                   sends[i].peer, c->size);
        sent += sends[i].peer != c->rank ? sends[i].bytes : 0;
    }
    for (int i = 0; i < n_recvs; i++) {
        SAGA_CHECK(recvs[i].peer >= 0 && recvs[i].peer < c->size &&
                       (recvs[i].data || !recvs[i].bytes),
                   SAGA_ERR_INVALID_ARG, "saga_comm_sendrecv: receive %d from rank %d of %d", i,
                   recvs[i].peer, c->size);
        recv += recvs[i].peer != c->rank ? recvs[i].bytes : 0;
    }
    if (!native(c))
        SAGA_TRY(host_wait(c, s));
    SAGA_TRY(self_copies(c, sends, n_sends, recvs, n_recvs, s));
    SAGA_TRY(others(c, sends, n_sends, &so, &ns));
    SAGA_TRY(others(c, recvs, n_recvs, &ro, &nr));
    if (ns || nr) {
        if (native(c))
            SAGA_TRY(c->iface->sendrecv(c, so, ns, ro, nr, stream_of(c, s)));
        else if (c->staged)
            SAGA_TRY(staged_sendrecv(c, so, ns, ro, nr, s));
        else
            SAGA_TRY(c->iface->sendrecv(c, so, ns, ro, nr, NULL));
    }
    account(c, sent, recv, t0);
fail:
    saga_free(so);
    saga_free(ro);
    return st;
}

saga_status saga_comm_alltoallv(saga_comm *c, const void *send, const size_t *send_bytes,
                                const size_t *send_off, void *recv, const size_t *recv_bytes,
                                const size_t *recv_off, saga_stream *s) {
    saga_status st = SAGA_OK;
    saga_comm_block *b = NULL;
    SAGA_CHECK(c && send_bytes && send_off && recv_bytes && recv_off, SAGA_ERR_INVALID_ARG,
               "saga_comm_alltoallv: communicator and size arrays must be given");
    began(c);
    int p = c->size, ns = 0, nr = 0;
    SAGA_TRY(saga_alloc_array((void **)&b, 2 * (size_t)p, sizeof *b, "communication blocks"));
    saga_comm_block *sb = b, *rb = b + p;
    for (int q = 0; q < p; q++) {
        if (send_bytes[q])
            sb[ns++] = (saga_comm_block){q, (unsigned char *)send + send_off[q], send_bytes[q]};
        if (recv_bytes[q])
            rb[nr++] = (saga_comm_block){q, (unsigned char *)recv + recv_off[q], recv_bytes[q]};
    }
    SAGA_TRY(saga_comm_sendrecv(c, sb, ns, rb, nr, s));
fail:
    saga_free(b);
    return st;
}

saga_status saga_comm_barrier(saga_comm *c) {
    if (!c)
        return saga_error(SAGA_ERR_INVALID_ARG, "saga_comm_barrier: communicator is NULL");
    began(c);
    if (c->size == 1)
        return SAGA_OK;
    saga_comm *h = c->host ? c->host : c;
    if (c->be) {
        saga_status st = saga_backend_synchronize(c->be);
        if (st < 0)
            return st;
    }
    return h->iface->barrier(h);
}

saga_status saga_comm_agree(saga_comm *c, saga_status mine) {
    saga_status st = SAGA_OK;
    SAGA_CHECK(c, SAGA_ERR_INVALID_ARG, "saga_comm_agree: communicator is NULL");
    if (c->size == 1)
        return mine;
    saga_comm *h = c->host ? c->host : c;
    /* the lowest failing rank, or size when none failed */
    int32_t first = mine < 0 ? h->rank : h->size;
    /* keep the own message: the reduction below may not touch it, but a failure would */
    char own[1024];
    snprintf(own, sizeof own, "%s", saga_last_error());
    saga_comm_stats keep = h->stats;
    c->agreed = h->agreed = false;
    SAGA_TRY(h->iface->allreduce(h, &first, 1, SAGA_I32, SAGA_COMM_MIN, NULL));
    if (first == h->size) {
        h->stats = keep;
        return mine;
    }
    c->agreed = h->agreed = true;
    struct {
        int32_t code;
        char msg[1000];
    } what = {0, ""};
    if (h->rank == first) {
        what.code = (int32_t)mine;
        snprintf(what.msg, sizeof what.msg, "%.999s", own);
    }
    SAGA_TRY(h->iface->bcast(h, &what, sizeof what, first, NULL));
    h->stats = keep; /* agreement is not the work's communication */
    if (mine < 0)
        return saga_error(mine, "%s", own);
    what.msg[sizeof what.msg - 1] = '\0';
    saga_status code =
        what.code < 0 && what.code > SAGA_ERR_COUNT_ ? (saga_status)what.code : SAGA_ERR_COMM;
    return saga_error(code, "rank %d: %s", (int)first, what.msg);
fail:
    return st;
}

void saga_comm_abort(saga_comm *c, int code) {
    if (!c)
        exit(code);
    saga_comm *h = c->host ? c->host : c;
    fflush(stdout);
    fflush(stderr);
    h->iface->abort(h, code);
    exit(code); /* an abort slot returns only where it cannot stop the job */
}

saga_status saga_comm_stop_unless_agreed(saga_comm *c, saga_status st) {
    if (st >= 0 || saga_comm_size(c) < 2 || saga_comm_failure_agreed(c))
        return st;
    saga_log(SAGA_LOG_ERROR,
             "rank %d of %d: %s (the other ranks cannot be told: stopping every rank)",
             saga_comm_rank(c), saga_comm_size(c), saga_last_error());
    saga_comm_abort(c, 1);
    return st;
}

/* c's bucket of at least bytes, device memory of be (NULL: host memory). */
static saga_status bucket_of(saga_comm *c, saga_backend *be, size_t bytes, void **out) {
    if (c->bucket && c->bucket_be == be && c->bucket_bytes >= bytes) {
        *out = c->bucket;
        return SAGA_OK;
    }
    if (c->bucket_be) {
        /* the last call's reduction may still be queued: its stream ends before the memory goes */
        saga_status st = saga_stream_synchronize(saga_backend_default_stream(c->bucket_be));
        if (st < 0)
            return st;
        saga_backend_free(c->bucket_be, c->bucket, c->bucket_bytes);
    } else {
        saga_free(c->bucket);
    }
    c->bucket = NULL;
    c->bucket_bytes = 0;
    c->bucket_be = NULL;
    saga_status st = be ? saga_backend_alloc(be, &c->bucket, bytes)
                        : saga_alloc_array(&c->bucket, bytes, 1, "a gradient bucket");
    if (st < 0)
        return st;
    c->bucket_bytes = bytes;
    c->bucket_be = be;
    *out = c->bucket;
    return SAGA_OK;
}

saga_status saga_comm_allreduce_grads(saga_comm *c, saga_model *m, double scale) {
    saga_status st = SAGA_OK;
    SAGA_CHECK(m && scale > 0, SAGA_ERR_INVALID_ARG,
               "saga_comm_allreduce_grads: model and a positive scale must be given");
    int size = saga_comm_size(c);
    int np = saga_model_n_params(m);
    size_t total = 0;
    saga_backend *be = NULL;
    for (int i = 0; i < np; i++) {
        saga_tensor *g = saga_model_param_at(m, i)->grad;
        SAGA_CHECK(g && g->dtype == SAGA_F32, SAGA_ERR_INTERNAL,
                   "saga_comm_allreduce_grads: parameter %s has no f32 gradient",
                   saga_model_param_name(m, i));
        SAGA_CHECK(!be || g->be == be, SAGA_ERR_INVALID_ARG,
                   "saga_comm_allreduce_grads: the model's gradients lie on two backends");
        be = g->be;
        total += g->nbytes;
    }
    if (size > 1 && total) {
        /* one all-reduce of every gradient side by side: on the device (NCCL), or in host
         * memory (the CPU's own, or staged) */
        const bool cpu = be->kind == SAGA_BACKEND_CPU, dev = !cpu && c->on_device && c->be == be;
        saga_stream *s = saga_backend_default_stream(be);
        void *buf = NULL;
        SAGA_TRY(bucket_of(c, dev ? be : NULL, total, &buf));
        if (cpu)
            SAGA_TRY(saga_backend_synchronize(be)); /* the gradients' kernels have run */
        size_t at = 0;
        for (int i = 0; i < np; i++) {
            saga_tensor *g = saga_model_param_at(m, i)->grad;
            if (!g->nbytes)
                continue;
            if (cpu)
                memcpy((char *)buf + at, g->data, g->nbytes);
            else if (dev)
                SAGA_TRY(saga_memcpy_d2d_async(s, (char *)buf + at, g->data, g->nbytes));
            else
                SAGA_TRY(saga_memcpy_d2h_async(s, (char *)buf + at, g->data, g->nbytes));
            at += g->nbytes;
        }
        if (!cpu && !dev)
            SAGA_TRY(saga_stream_synchronize(s));
        SAGA_TRY(saga_comm_allreduce(c, buf, total / sizeof(float), SAGA_F32, SAGA_COMM_SUM,
                                     dev ? s : NULL));
        at = 0;
        for (int i = 0; i < np; i++) {
            saga_tensor *g = saga_model_param_at(m, i)->grad;
            if (!g->nbytes)
                continue;
            if (cpu)
                memcpy(g->data, (char *)buf + at, g->nbytes);
            else if (dev)
                SAGA_TRY(saga_memcpy_d2d_async(s, g->data, (char *)buf + at, g->nbytes));
            else
                SAGA_TRY(saga_memcpy_h2d_async(s, g->data, (char *)buf + at, g->nbytes));
            at += g->nbytes;
        }
        if (!cpu && !dev) /* the host buffer is read by the copies */
            SAGA_TRY(saga_stream_synchronize(s));
    }
    for (int i = 0; i < np && scale != 1.0; i++) {
        saga_tensor *g = saga_model_param_at(m, i)->grad;
        size_t count = g->nbytes / sizeof(float);
        if (!count)
            continue;
        if (be->kind == SAGA_BACKEND_CPU) {
            SAGA_TRY(saga_backend_synchronize(be));
            float *x = g->data;
            float f = (float)(1.0 / scale);
            for (size_t k = 0; k < count; k++)
                x[k] *= f;
        } else {
            SAGA_TRY(be->kernels->scale_f32(saga_backend_default_stream(be), (int64_t)count,
                                            (float)(1.0 / scale), g->data, 0.0f, g->data));
        }
    }
fail:
    return st;
}
