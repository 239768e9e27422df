/* net_loss.c - the masked cross-entropy as a net's loss (saga_net_set_loss_cross_entropy): the
 * loss function a node classifier writes, once. */
#include "net_impl.h"

#include "nn_impl.h"

#include <string.h>

typedef struct ce_loss {
    const saga_net *net; /* its owner (saga_net.sampling) */
    int32_t *labels;     /* n: a class for every listed vertex */
    uint8_t *listed;     /* n: 1 for a vertex the loss reads */
    int64_t n_listed;    /* over every rank with a halo (each lists its own rows) */
    int32_t *rows, *lab; /* scratch, n each */
} ce_loss;

/* A block's share of the mean: its listed rows gathered before the log-softmax (row by row, so
 * the same values as over the whole block), the others' gradients zero. On a sample
 * (saga_net_train_sample) the mean is over the batch's listed rows; over shards, where each rank
 * sees its own seeds, over every rank's seeds, which must all be listed. */
static saga_tensor *ce_rows(saga_ctx *c, const saga_vertex_in *v, const int32_t *ids, void *user) {
    ce_loss *L = user;
    int64_t k = 0;
    for (int32_t i = 0; i < v->count; i++)
        if (L->listed[ids[i]]) {
            L->lab[k] = L->labels[ids[i]];
            L->rows[k++] = i;
        }
    const bool shards = L->net->sampling && L->net->hx;
    if (shards && k < v->count) {
        saga_ctx_fail(c, saga_error(SAGA_ERR_INVALID_ARG,
                                    "saga_net: over shards a sample's seeds must all be rows the "
                                    "cross-entropy lists (%lld of %d are)",
                                    (long long)k, (int)v->count));
        return NULL;
    }
    if (k == 0) /* no listed row here: a zero that keeps the block's rows on the tape */
        return saga_affine(c, saga_sum(c, v->self), 0.0f, 0.0f);
    saga_tensor *rows = saga_ctx_from_host(c, SAGA_I32, k, 1, L->rows);
    saga_tensor *lab = saga_ctx_from_host(c, SAGA_I32, k, 1, L->lab);
    saga_tensor *logp = saga_log_softmax(c, saga_gather_rows(c, v->self, rows));
    const float share = shards             ? (float)k / (float)L->net->sample_seeds
                        : L->net->sampling ? 1.0f
                                           : (float)k / (float)L->n_listed;
    return saga_affine(c, saga_nll_loss(c, logp, lab, NULL), share, 0.0f);
}

static void ce_free(void *p) {
    ce_loss *L = p;
    saga_free(L->labels);
    saga_free(L->listed);
    saga_free(L->rows);
}

/* The loss's state on this rank alone: the listed rows checked, counted and marked, the labels
 * copied (only the listed rows' are read). */
static saga_status ce_new(const saga_net *n, const int32_t *labels, const int32_t *rows,
                          int64_t n_rows, ce_loss **out) {
    saga_status st = SAGA_OK;
    ce_loss *L = NULL;
    const int32_t nv = n->n;
    SAGA_CHECK((L = saga_calloc(1, sizeof *L)), SAGA_ERR_OUT_OF_MEMORY,
               "saga_net_set_loss_cross_entropy: no memory");
    SAGA_TRY(saga_alloc_array((void **)&L->labels, (size_t)nv + 1, sizeof *L->labels, "labels"));
    SAGA_TRY(saga_alloc_zeroed((void **)&L->listed, (size_t)nv + 1, 1, "loss rows"));
    SAGA_TRY(saga_alloc_array((void **)&L->rows, 2 * (size_t)nv + 1, sizeof *L->rows, "loss rows"));
    L->lab = L->rows + nv;
    L->net = n;
    for (int64_t i = 0; i < n_rows; i++) {
        SAGA_CHECK(rows[i] >= 0 && rows[i] < nv, SAGA_ERR_INVALID_ARG,
                   "saga_net_set_loss_cross_entropy: row %lld is vertex %d, outside 0..%d",
                   (long long)i, (int)rows[i], (int)nv - 1);
        SAGA_CHECK(labels[rows[i]] >= 0, SAGA_ERR_INVALID_ARG,
                   "saga_net_set_loss_cross_entropy: vertex %d is listed but has no class (%d)",
                   (int)rows[i], (int)labels[rows[i]]);
        L->n_listed += !L->listed[rows[i]];
        L->listed[rows[i]] = 1;
    }
    memcpy(L->labels, labels, (size_t)nv * sizeof *labels);
    *out = L;
    return SAGA_OK;
fail:
    if (L) {
        ce_free(L);
        saga_free(L);
    }
    return st;
}

saga_status saga_net_set_loss_cross_entropy(saga_net *n, const int32_t *labels, const int32_t *rows,
                                            int64_t n_rows) {
    saga_status st = SAGA_OK;
    ce_loss *L = NULL;
    SAGA_CHECK(n && labels && (rows || n_rows == 0) && n_rows >= 0, SAGA_ERR_INVALID_ARG,
               "saga_net_set_loss_cross_entropy: net, labels and rows must be given");
    st = ce_new(n, labels, rows, n_rows, &L);
    if (n->hx) { /* over shards each rank lists its own rows: the mean is over all of them */
        st = saga_comm_agree(n->hx->comm, st); /* no rank waits below for one that failed */
        if (st == SAGA_OK)
            st = saga_comm_allreduce(n->hx->comm, &L->n_listed, 1, SAGA_I64, SAGA_COMM_SUM, NULL);
    }
    if (st < 0)
        goto fail;
    SAGA_CHECK(L->n_listed > 0, SAGA_ERR_INVALID_ARG,
               "saga_net_set_loss_cross_entropy: no row is listed");
    SAGA_TRY(saga_net_set_loss_rows(n, rows, n_rows));
    SAGA_TRY(saga_net_set_loss(n, ce_rows, L));
    return net_keep(n, L, ce_free); /* frees L when it fails */
fail:
    if (L) {
        ce_free(L);
        saga_free(L);
    }
    return st;
}
