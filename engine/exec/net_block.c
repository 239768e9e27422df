/* net_block.c - a net's blocks (net_impl.h's nblock): the destinations of a part, or any set of
 * rows, with their in-edges and halo as host arrays, and the scheduler blocks that load them. */
#include "net_impl.h"

#include "half_impl.h"

#include <string.h>

/* An array of count entries of size bytes from the backend's host allocator (pinned on CUDA):
 * the host side of a scheduler block, which its copy stream reads asynchronously. */
saga_status net_host_array(saga_net *n, void **out, size_t count, size_t size, const char *what) {
    if (size && count > SIZE_MAX / size)
        return saga_error(SAGA_ERR_OUT_OF_MEMORY, "saga_net: %s: %zu entries of %zu bytes", what,
                          count, size);
    return saga_backend_host_alloc(n->be, out, count * size);
}

/* Bytes of a host array of one 4-byte value per edge (one more when there are none). */
size_t net_edge_bytes(int64_t m) {
    return (m ? (size_t)m : 1) * 4;
}

size_t net_message_bytes(const stage *sg, int64_t m) {
    if (saga_prog_fused(&sg->p))
        return 0;
    const int64_t mx = saga_prog_batch_edges(&sg->p);
    const size_t eb = (size_t)(m < mx ? m : mx);
    return eb * (2 * (size_t)sg->in_cols + (size_t)sg->out_cols) * 16;
}

int net_key_of(saga_edge_weight w, bool mean) {
    return (int)w * 2 + (mean ? 1 : 0);
}

void net_rows_pack(void *user, void *staging) {
    const rows_io *io = user;
    const int64_t C = io->cols;
    if (io->half == SAGA_TRANSFER_F32) {
        float *out = staging;
        for (int32_t i = 0; i < io->n; i++)
            memcpy(out + (int64_t)i * C,
                   io->src + (int64_t)(io->rows ? io->rows[i] : io->first + i) * C,
                   (size_t)C * sizeof(float));
        return;
    }
    uint16_t *out = staging;
    const bool bf16 = io->half == SAGA_TRANSFER_BF16;
    if (!io->rows) {
        saga_f32_to_half_n(io->src + (int64_t)io->first * C, (int64_t)io->n * C, bf16, out);
        return;
    }
    for (int32_t i = 0; i < io->n; i++)
        saga_f32_to_half_n(io->src + (int64_t)io->rows[i] * C, C, bf16, out + (int64_t)i * C);
}

saga_blk *net_input_block(saga_net *n, void *host, size_t bytes, const char *kind) {
    saga_blk *b = saga_sched_block(n->sched, bytes, SAGA_BLK_INPUT, kind);
    if (b)
        saga_blk_set_host(b, host);
    return b;
}

/* SAGA_ERR_OUT_OF_MEMORY, naming block b. */
static saga_status blocks_oom(const saga_net *n, const nblock *b) {
    if (b < n->plan.blk || b >= n->plan.blk + n->plan.k)
        return saga_error(SAGA_ERR_OUT_OF_MEMORY, "out of memory for the blocks of chosen rows");
    return saga_error(SAGA_ERR_OUT_OF_MEMORY, "out of memory for the blocks of part %d",
                      (int)(b - n->plan.blk));
}

size_t net_block_input_bytes(const saga_net *n, const nblock *b, const saga_blk *rows) {
    return n->sparse
               ? saga_blk_bytes(b->b_xoff) + saga_blk_bytes(b->b_xidx) + saga_blk_bytes(b->b_xval)
               : saga_blk_bytes(rows);
}

int net_stage_key(const stage *sg) {
    return net_key_of(sg->p.edge_weight,
                      saga_prog_fused(&sg->p) && sg->p.gather == SAGA_GATHER_MEAN);
}

uint64_t net_tile_bytes(const nblock *b, int key) {
    return saga_blk_bytes(b->b_off) + saga_blk_bytes(b->b_src) +
           (b->b_vin[key] ? saga_blk_bytes(b->b_vin[key]) : 0);
}

uint64_t net_parts_floor(const saga_net *n, int s_end) {
    uint64_t f = 0;
    for (int32_t d = n->plan.d_lo; d < n->plan.d_hi; d++) {
        f += net_block_input_bytes(n, &n->plan.blk[d], n->act[0][d]);
        for (int s = 0; s < s_end; s++)
            if (n->stages[s].kind == STAGE_PROGRAM)
                f += net_tile_bytes(&n->plan.blk[d], net_stage_key(&n->stages[s]));
    }
    return f;
}

/* Block b's own copy of its rows of the sparse input (b->rows, or v0 .. v1 - 1, in the net's
 * order). */
void net_sparse_fill_block(const saga_net *n, nblock *b) {
    int64_t q = 0;
    b->xoff[0] = 0;
    for (int32_t i = 0; i < b->v1 - b->v0; i++) {
        int32_t r = b->rows ? b->rows[i] : b->v0 + i, v = n->plan.ids ? n->plan.ids[r] : r;
        int64_t k0 = n->xs_off[v], len = n->xs_off[v + 1] - k0;
        memcpy(b->xidx + q, n->xs_idx + k0, (size_t)len * sizeof(int32_t));
        memcpy(b->xval + q, n->xs_val + k0, (size_t)len * sizeof(float));
        b->xoff[i + 1] = q += len;
    }
}

/* Builds block d's host arrays over rows v0 .. v1 - 1; pos is n entries of -1 (restored). */
saga_status net_block_build(saga_net *n, nblock *b, int32_t v0, int32_t v1, bool whole,
                            int32_t *pos) {
    saga_status st = SAGA_OK;
    int32_t P = v1 - v0;
    b->v0 = v0;
    b->v1 = v1;
    b->e0 = n->h_off[v0];
    b->e1 = n->h_off[v1];
    int64_t mb = b->e1 - b->e0;
    size_t m1 = mb ? (size_t)mb : 1;
    SAGA_TRY(net_host_array(n, (void **)&b->off, (size_t)P + 1, sizeof(int64_t), "block offsets"));
    SAGA_TRY(net_host_array(n, (void **)&b->src, m1, sizeof(int32_t), "block sources"));
    SAGA_TRY(net_host_array(n, (void **)&b->edst, m1, sizeof(int32_t), "block destinations"));
    for (int32_t i = 0; i <= P; i++)
        b->off[i] = n->h_off[v0 + i] - b->e0;
    for (int32_t i = 0; i < P; i++)
        for (int64_t k = b->off[i]; k < b->off[i + 1]; k++)
            b->edst[k] = i;
    if (whole) {
        b->n_halo = n->n;
        memcpy(b->src, n->h_src + b->e0, (size_t)mb * sizeof(int32_t));
    } else {
        /* the halo: every source of the block's edges and the block's own rows, sorted */
        int32_t nh = 0;
        int32_t *h = NULL;
        SAGA_TRY(saga_alloc_array((void **)&h, m1 + (size_t)P, sizeof(int32_t), "block halo"));
        for (int32_t v = v0; v < v1; v++)
            if (pos[v] < 0)
                pos[v] = 0, h[nh++] = v;
        for (int64_t k = b->e0; k < b->e1; k++) {
            int32_t u = n->h_src[k];
            if (pos[u] < 0)
                pos[u] = 0, h[nh++] = u;
        }
        /* ids are < n: a counting pass over the marks sorts them */
        int32_t lo = n->n, hi = -1;
        for (int32_t i = 0; i < nh; i++) {
            lo = h[i] < lo ? h[i] : lo;
            hi = h[i] > hi ? h[i] : hi;
        }
        int32_t j = 0;
        for (int32_t u = lo; u <= hi && j < nh; u++)
            if (pos[u] == 0)
                pos[u] = j, h[j++] = u;
        b->halo = h;
        b->n_halo = nh;
        SAGA_TRY(net_host_array(n, (void **)&b->self_pos, P ? (size_t)P : 1, sizeof(int32_t),
                                "block rows"));
        for (int32_t i = 0; i < P; i++)
            b->self_pos[i] = pos[v0 + i];
        for (int64_t k = 0; k < mb; k++)
            b->src[k] = pos[n->h_src[b->e0 + k]];
        for (int32_t i = 0; i < nh; i++)
            pos[h[i]] = -1;
    }
    return SAGA_OK;
fail:
    return st;
}

/* The transpose of block b (for fused backward passes) and its edge values. */
static saga_status block_transpose(saga_net *n, nblock *b) {
    saga_status st = SAGA_OK;
    int64_t mb = b->e1 - b->e0;
    size_t m1 = mb ? (size_t)mb : 1;
    SAGA_TRY(net_host_array(n, (void **)&b->toff, (size_t)b->n_halo + 1, sizeof(int64_t),
                            "block transpose"));
    memset(b->toff, 0, ((size_t)b->n_halo + 1) * sizeof(int64_t));
    SAGA_TRY(net_host_array(n, (void **)&b->tdst, m1, sizeof(int32_t), "block transpose"));
    SAGA_TRY(saga_alloc_array((void **)&b->tperm, m1, sizeof(int64_t), "block transpose"));
    for (int64_t k = 0; k < mb; k++)
        b->toff[b->src[k] + 1]++;
    for (int32_t u = 0; u < b->n_halo; u++)
        b->toff[u + 1] += b->toff[u];
    int64_t *fill = NULL;
    SAGA_TRY(saga_alloc_array((void **)&fill, (size_t)b->n_halo + 1, sizeof(int64_t),
                              "transpose cursor"));
    memcpy(fill, b->toff, ((size_t)b->n_halo + 1) * sizeof(int64_t));
    int32_t P = b->v1 - b->v0;
    for (int32_t i = 0; i < P; i++)
        for (int64_t k = b->off[i]; k < b->off[i + 1]; k++) {
            int64_t p = fill[b->src[k]]++;
            b->tdst[p] = i;
            b->tperm[p] = k;
        }
    saga_free(fill);
fail:
    return st;
}

/* Block b's batch plan for max_edges, or NULL when none was made. */
bplan *net_plan_of(const nblock *b, int64_t max_edges) {
    for (int i = 0; i < b->n_plans; i++)
        if (b->plans[i].max_edges == max_edges)
            return &b->plans[i];
    return NULL;
}

/* The batch plan of block b for max_edges (consecutive destinations, at most max_edges in-edges
 * each, a vertex with more alone), made on first use. */
static saga_status block_plan(saga_net *n, nblock *b, int64_t max_edges, bplan **out) {
    saga_status st = SAGA_OK;
    if ((*out = net_plan_of(b, max_edges)))
        return SAGA_OK;
    SAGA_TRY(saga_realloc_array((void **)&b->plans, (size_t)b->n_plans + 1, sizeof *b->plans,
                                "block plans"));
    bplan *p = &b->plans[b->n_plans++];
    memset(p, 0, sizeof *p);
    p->max_edges = max_edges;
    int32_t P = b->v1 - b->v0;
    SAGA_TRY(saga_alloc_array((void **)&p->v0, (size_t)P + 2, sizeof(int32_t), "batch plan"));
    int64_t nb = saga_prog_cut_batches(P, b->off, max_edges, p->v0);
    p->n_batches = nb;
    if (nb > 1) {
        SAGA_TRY(net_host_array(n, (void **)&p->h_off, (size_t)P + (size_t)nb, sizeof(int64_t),
                                "batch offsets"));
        saga_prog_batch_offsets(b->off, nb, p->v0, p->h_off);
        p->b_off = saga_sched_block(n->sched, ((size_t)P + (size_t)nb) * sizeof(int64_t),
                                    SAGA_BLK_INPUT, "batch plan");
        SAGA_CHECK(p->b_off, SAGA_ERR_OUT_OF_MEMORY, "out of memory for a batch plan block");
        saga_blk_set_host(p->b_off, p->h_off);
    }
    *out = p;
fail:
    return st;
}

/* Block b's tile weights of key as an input block, in the net's transfer precision and in the
 * order perm gives (NULL: the block's own). In f32 and the order of a part's own entries it is
 * the net's vals in place; otherwise a host array of the block's own (*host), packed to 16 bits
 * for 16-bit transfers. */
static saga_status weights_block(saga_net *n, nblock *b, int key, const int64_t *perm, void **host,
                                 saga_blk **out) {
    const size_t mb = (size_t)(b->e1 - b->e0);
    const float *v = n->vals[key];
    const bool half = n->plan.transfer != SAGA_TRANSFER_F32;
    const size_t esz = half ? sizeof(uint16_t) : sizeof(float);
    void *src = (void *)(v + b->e0);
    if (half || perm || b->epos) {
        saga_status st = net_host_array(n, host, mb ? mb : 1, esz, "tile weights");
        if (st < 0)
            return st;
        src = *host;
        for (size_t q = 0; q < mb; q++) {
            const int64_t k = perm ? perm[q] : (int64_t)q;
            const float w = v[b->epos ? b->epos[k] : b->e0 + k];
            if (!half)
                ((float *)src)[q] = w;
            else if (n->plan.transfer == SAGA_TRANSFER_BF16)
                ((uint16_t *)src)[q] = saga_f32_to_bf16(w);
            else
                ((uint16_t *)src)[q] = saga_f32_to_fp16(w);
        }
    }
    if (!(*out = net_input_block(n, src, mb * esz, "tile weights")))
        return blocks_oom(n, b);
    return SAGA_OK;
}

/* The device blocks of block b that stage s needs. */
saga_status net_block_blocks(saga_net *n, nblock *b, const stage *s) {
    saga_status st = SAGA_OK;
    int32_t P = b->v1 - b->v0;
    size_t mb = (size_t)(b->e1 - b->e0);
    bool fused = saga_prog_fused(&s->p);
    if (!b->b_off &&
        !(b->b_off = net_input_block(n, b->off, ((size_t)P + 1) * sizeof(int64_t), "tile offsets")))
        goto oom;
    if (!b->b_src && !(b->b_src = net_input_block(n, b->src, mb * sizeof(int32_t), "tile sources")))
        goto oom;
    if (b->self_pos && !b->b_self &&
        !(b->b_self = net_input_block(n, b->self_pos, (size_t)P * sizeof(int32_t), "tile rows")))
        goto oom;
    if (!fused && !b->b_edst &&
        !(b->b_edst = net_input_block(n, b->edst, mb * sizeof(int32_t), "tile destinations")))
        goto oom;
    if (!fused && (b->reids || n->eids) && !b->b_eids &&
        !(b->b_eids = net_input_block(n, b->reids ? b->reids : n->eids + b->e0,
                                      mb * sizeof(int32_t), "edge ids")))
        goto oom;
    bool mean = fused && s->p.gather == SAGA_GATHER_MEAN;
    int key = net_key_of(s->p.edge_weight, mean);
    bool ones = s->p.edge_weight == SAGA_WEIGHT_NONE && !mean;
    if (!ones && !b->b_vin[key])
        SAGA_TRY(weights_block(n, b, key, NULL, &b->vin_h[key], &b->b_vin[key]));
    if (fused) {
        if (!b->toff)
            SAGA_TRY(block_transpose(n, b));
        if (!b->b_toff &&
            !(b->b_toff = net_input_block(n, b->toff, ((size_t)b->n_halo + 1) * sizeof(int64_t),
                                          "tile transpose")))
            goto oom;
        if (!b->b_tdst &&
            !(b->b_tdst = net_input_block(n, b->tdst, mb * sizeof(int32_t), "tile transpose")))
            goto oom;
        if (!ones && !b->b_vout[key])
            SAGA_TRY(weights_block(n, b, key, b->tperm, &b->vout_h[key], &b->b_vout[key]));
    }
    if (!fused) {
        bplan *p = NULL;
        SAGA_TRY(block_plan(n, b, saga_prog_batch_edges(&s->p), &p));
    }
    return SAGA_OK;
oom:
    st = blocks_oom(n, b);
fail:
    return st;
}

/* The halo of a block of rows over the in-CSR off/src of N vertices, and the rows' in-edge
 * count: with its own halo (own), the rows and their sources, increasing, pos[v] the index of
 * halo vertex v and -1 elsewhere; else every vertex, pos[v] 0 for the rows and -1 elsewhere. */
void net_rows_halo(const int64_t *off, const int32_t *src, int32_t N, const int32_t *rows,
                   int32_t R, bool own, int32_t *pos, int64_t *m, int32_t *n_halo) {
    for (int32_t v = 0; v < N; v++)
        pos[v] = -1;
    int64_t e = 0;
    for (int32_t i = 0; i < R; i++) {
        pos[rows[i]] = 0;
        e += off[rows[i] + 1] - off[rows[i]];
    }
    int32_t H = N;
    if (own) {
        for (int32_t i = 0; i < R; i++)
            for (int64_t k = off[rows[i]]; k < off[rows[i] + 1]; k++)
                pos[src[k]] = 0;
        H = 0;
        for (int32_t v = 0; v < N; v++)
            if (pos[v] == 0)
                pos[v] = H++;
    }
    *m = e;
    *n_halo = H;
}

/* The device blocks of a rows' block (offsets, sources, rows; the transpose; both orders of the
 * weights; with ids, the rows' graph ids, and with its own halo the halo's) and, streamed, the
 * tensors of its step: a gathered halo of g_rows rows and cols columns with its gradient, and
 * stages of out columns in all on its rows, each output with its gradient, with a margin. */
size_t net_rows_block_bytes(int32_t R, int64_t m, int32_t NH, bool own, bool ids, bool streamed,
                            int32_t g_rows, int64_t cols, int64_t out) {
    size_t bytes = ((size_t)R + 1 + (size_t)NH + 1) * sizeof(int64_t) +
                   (size_t)R * sizeof(int32_t) +
                   (size_t)m * (2 * sizeof(int32_t) + 2 * sizeof(float));
    bytes += ((own ? (size_t)NH : 0) + (ids ? (size_t)R : 0)) * sizeof(int32_t);
    if (streamed)
        bytes += (3 * (size_t)g_rows * (size_t)cols + 4 * (size_t)R * (size_t)out) * sizeof(float);
    return bytes;
}

/* A block (*out) of the rows (increasing, in the net's order) with their in-edges for stage sg,
 * over the halo rows_halo gave (pos, m, NH). With its own halo, hids lists the halo (b_hids its
 * block, streamed), uids names the rows by graph id and b_ids is its block; over every vertex
 * the rows' positions are their ids and b_ids is b_self. The transpose lists each source's
 * destinations in increasing order with the whole graph's values (block_blocks), so a backward
 * pass over the block adds the same terms in the same order as over every row, less the zero
 * ones. */
/* b_ids: the block of b's uids (P of them), or over shards with row ids of their keys (kids). */
static saga_status ids_block(saga_net *n, nblock *b, int32_t P) {
    saga_status st = SAGA_OK;
    int32_t *ids = b->uids;
    if (n->hx && n->hx->keys) {
        SAGA_TRY(
            net_host_array(n, (void **)&b->kids, P ? (size_t)P : 1, sizeof(int32_t), "row ids"));
        for (int32_t i = 0; i < P; i++)
            b->kids[i] = n->hx->keys[b->uids[i]];
        ids = b->kids;
    }
    SAGA_CHECK(b->b_ids = net_input_block(n, ids, (size_t)P * sizeof(int32_t), "row ids"),
               SAGA_ERR_OUT_OF_MEMORY, "out of memory for the ids of %d rows", (int)P);
fail:
    return st;
}

saga_status net_rows_block(saga_net *n, nblock **out, const int32_t *rows, int32_t R, bool own,
                           bool ids, const int32_t *pos, int64_t m, int32_t NH, const stage *sg) {
    saga_status st = SAGA_OK;
    SAGA_TRY(saga_alloc_zeroed((void **)out, 1, sizeof **out, "loss rows"));
    nblock *b = *out;
    b->v1 = R;
    b->e1 = m;
    b->n_halo = NH;
    SAGA_TRY(
        net_host_array(n, (void **)&b->self_pos, R ? (size_t)R : 1, sizeof(int32_t), "loss rows"));
    SAGA_TRY(
        net_host_array(n, (void **)&b->off, (size_t)R + 1, sizeof(int64_t), "loss row offsets"));
    SAGA_TRY(net_host_array(n, (void **)&b->src, 1, net_edge_bytes(m), "loss row sources"));
    SAGA_TRY(saga_alloc_array((void **)&b->epos, m ? (size_t)m : 1, sizeof(int64_t), "loss rows"));
    const bool batched = !saga_prog_fused(&sg->p);
    if (batched) {
        SAGA_CHECK(n->m <= INT32_MAX, SAGA_ERR_UNSUPPORTED,
                   "saga_net: a block of rows of a batched stage numbers its edges in 32 bits "
                   "(%lld edges)",
                   (long long)n->m);
        SAGA_TRY(net_host_array(n, (void **)&b->edst, 1, net_edge_bytes(m), "row destinations"));
        SAGA_TRY(net_host_array(n, (void **)&b->reids, 1, net_edge_bytes(m), "row edge ids"));
    }
    b->off[0] = 0;
    for (int32_t i = 0; i < R; i++) {
        const int64_t a = n->h_off[rows[i]], e = n->h_off[rows[i] + 1];
        b->self_pos[i] = own ? pos[rows[i]] : rows[i];
        for (int64_t k = a; k < e; k++) {
            const int64_t q = b->off[i] + k - a;
            b->src[q] = own ? pos[n->h_src[k]] : n->h_src[k];
            b->epos[q] = k;
            if (batched) {
                b->edst[q] = i;
                b->reids[q] = (int32_t)(n->eids ? n->eids[k] : k);
            }
        }
        b->off[i + 1] = b->off[i] + (e - a);
    }
    SAGA_TRY(net_block_blocks(n, b, sg));
    if (own) {
        SAGA_TRY(net_host_array(n, (void **)&b->hids, (size_t)NH + 1, sizeof(int32_t), "halo ids"));
        for (int32_t v = 0; v < n->n; v++)
            if (pos[v] >= 0)
                b->hids[pos[v]] = v;
        if (n->plan.streamed &&
            !(b->b_hids = net_input_block(n, b->hids, (size_t)NH * sizeof(int32_t), "halo ids")))
            SAGA_TRY(blocks_oom(n, b));
    }
    if (!ids && !(n->hx && n->hx->keys)) {
        b->b_ids = b->b_self; /* the rows' positions in the halo are their ids */
        return SAGA_OK;
    }
    SAGA_TRY(net_host_array(n, (void **)&b->uids, R ? (size_t)R : 1, sizeof(int32_t), "loss rows"));
    for (int32_t i = 0; i < R; i++)
        b->uids[i] = n->plan.ids ? n->plan.ids[rows[i]] : rows[i];
    SAGA_TRY(ids_block(n, b, R));
fail:
    return st;
}

/* Frees block b's arrays; the host-allocated ones with the sizes block_build, block_transpose
 * and block_plan gave them. */
void net_block_free(saga_net *n, nblock *b) {
    size_t P = (size_t)(b->v1 - b->v0), m1 = net_edge_bytes(b->e1 - b->e0);
    saga_free(b->halo);
    saga_backend_host_free(n->be, b->self_pos, (P ? P : 1) * sizeof(int32_t));
    saga_backend_host_free(n->be, b->off, (P + 1) * sizeof(int64_t));
    saga_backend_host_free(n->be, b->src, m1);
    saga_backend_host_free(n->be, b->edst, m1);
    saga_backend_host_free(n->be, b->reids, m1);
    saga_backend_host_free(n->be, b->toff, ((size_t)b->n_halo + 1) * sizeof(int64_t));
    saga_backend_host_free(n->be, b->tdst, m1);
    saga_backend_host_free(n->be, b->hids, ((size_t)b->n_halo + 1) * sizeof(int32_t));
    saga_backend_host_free(n->be, b->uids, (P ? P : 1) * sizeof(int32_t));
    saga_backend_host_free(n->be, b->kids, (P ? P : 1) * sizeof(int32_t));
    saga_free(b->tperm);
    saga_free(b->epos);
    saga_free(b->lsel);
    saga_free(b->lsel_ids);
    saga_backend_host_free(n->be, b->xrows_h, b->xrows_bytes + 1);
    size_t wb = n->plan.transfer == SAGA_TRANSFER_F32 ? m1 : m1 / 2; /* see weights_block */
    for (int i = 0; i < N_KEYS; i++) {
        saga_backend_host_free(n->be, b->vin_h[i], wb);
        saga_backend_host_free(n->be, b->vout_h[i], wb);
    }
    for (int i = 0; i < b->n_plans; i++) {
        saga_free(b->plans[i].v0);
        saga_backend_host_free(n->be, b->plans[i].h_off,
                               (P + (size_t)b->plans[i].n_batches) * sizeof(int64_t));
    }
    saga_free(b->plans);
    if (b->x_own) {
        saga_backend_host_free(n->be, b->xoff, (P + 1) * sizeof(int64_t));
        saga_backend_host_free(n->be, b->xidx, ((size_t)b->x_nnz + 1) * sizeof(int32_t));
        saga_backend_host_free(n->be, b->xval, ((size_t)b->x_nnz + 1) * sizeof(float));
    }
}

saga_status net_rows_ids(saga_net *n, nblock *b, const int32_t *rows, int32_t P) {
    saga_status st = SAGA_OK;
    b->rows = rows;
    SAGA_TRY(net_host_array(n, (void **)&b->uids, P ? (size_t)P : 1, sizeof(int32_t), "rows"));
    for (int32_t i = 0; i < P; i++) {
        int32_t r = rows ? rows[i] : i;
        b->uids[i] = n->plan.ids ? n->plan.ids[r] : r;
    }
    SAGA_TRY(ids_block(n, b, P));
fail:
    return st;
}

int32_t net_rows_in_part(const nblock *pb, const int32_t *rows, int32_t R, int32_t *r) {
    while (*r < R && rows[*r] < pb->v0)
        (*r)++;
    const int32_t a = *r;
    while (*r < R && rows[*r] < pb->v1)
        (*r)++;
    return a;
}

saga_status net_head_blocks(saga_net *n, const int32_t *rows, int32_t R, nblock **out) {
    saga_status st = SAGA_OK;
    nblock *h = NULL;
    SAGA_TRY(saga_alloc_zeroed((void **)&h, (size_t)n->plan.k, sizeof *h, "head blocks"));
    int32_t r = 0;
    for (int32_t d = n->plan.d_lo; d < n->plan.d_hi; d++) {
        nblock *b = &h[d];
        b->v0 = net_rows_in_part(&n->plan.blk[d], rows, R, &r);
        b->v1 = r;
        b->rows = rows + b->v0;
        if (b->v1 == b->v0) /* the part holds none: a training pass skips it */
            continue;
        SAGA_TRY(net_rows_input(n, b, rows + b->v0, b->v1 - b->v0, 0));
        if (n->sparse)
            net_sparse_fill_block(n, b);
    }
    *out = h;
    h = NULL;
fail:
    if (h) {
        for (int32_t d = n->plan.d_lo; d < n->plan.d_hi; d++)
            net_block_free(n, &h[d]);
        saga_free(h);
    }
    return st;
}

void net_block_input_changed(nblock *b, saga_blk *rows) {
    if (b->xrows_h)
        net_rows_pack(&b->xio, b->xrows_h);
    saga_blk *x[] = {b->b_xoff, b->b_xidx, b->b_xval, rows};
    for (size_t i = 0; i < sizeof x / sizeof x[0]; i++)
        if (x[i])
            saga_blk_host_changed(x[i]);
}

saga_status net_rows_input(saga_net *n, nblock *b, const int32_t *rows, int32_t P, int s) {
    saga_status st = SAGA_OK;
    /* stage 0's input: the net's (sparse, or dense in the transfer precision); a later stage's:
     * its f32 host rows */
    const bool x = s <= 0;
    const int64_t cols = x ? n->in_cols : n->stages[s].in_cols;
    const saga_transfer half = x ? n->plan.transfer : SAGA_TRANSFER_F32;
    const size_t esz = half == SAGA_TRANSFER_F32 ? 4 : 2;
    SAGA_TRY(net_rows_ids(n, b, rows, P));
    if (x && n->sparse) {
        for (int32_t i = 0; i < P; i++) {
            int32_t g = b->uids[i];
            b->x_nnz += n->xs_off[g + 1] - n->xs_off[g];
        }
        size_t nz1 = (size_t)b->x_nnz + 1, nb = (b->x_nnz ? (size_t)b->x_nnz : 1) * 4;
        b->x_own = true; /* filled by net_sparse_fill_block */
        SAGA_TRY(
            net_host_array(n, (void **)&b->xoff, (size_t)P + 1, sizeof(int64_t), "input rows"));
        SAGA_TRY(net_host_array(n, (void **)&b->xidx, nz1, sizeof(int32_t), "input rows"));
        SAGA_TRY(net_host_array(n, (void **)&b->xval, nz1, sizeof(float), "input rows"));
        if (!(b->b_xoff = net_input_block(n, b->xoff, ((size_t)P + 1) * sizeof(int64_t),
                                          "input offsets")) ||
            !(b->b_xidx = net_input_block(n, b->xidx, nb, "input indices")) ||
            !(b->b_xval = net_input_block(n, b->xval, nb, "input values")))
            goto oom;
    } else if (x) {
        /* the net's input changes only when it is set again: its rows packed once */
        SAGA_CHECK(n->x, SAGA_ERR_INVALID_ARG, "saga_net: no input rows (saga_net_set_input)");
        b->xio = (rows_io){.src = n->x, .rows = rows, .n = P, .cols = cols, .half = half};
        b->xrows_bytes = (size_t)P * (size_t)cols * esz;
        SAGA_TRY(net_host_array(n, &b->xrows_h, b->xrows_bytes + 1, 1, "input rows"));
        net_rows_pack(&b->xio, b->xrows_h);
        if (!(b->b_xrows = net_input_block(n, b->xrows_h, b->xrows_bytes, "input rows")))
            goto oom;
    } else {
        /* a later stage's rows, gathered from its host rows by the backend as they are loaded */
        if (!(b->b_xrows = saga_sched_block(n->sched, (size_t)P * (size_t)cols * esz,
                                            SAGA_BLK_INPUT, "input rows")))
            goto oom;
        SAGA_TRY(saga_blk_set_rows(
            b->b_xrows,
            &(saga_host_rows){
                .base = n->act_host[s], .row_bytes = (size_t)cols * esz, .rows = rows, .n = P},
            false));
    }
    return SAGA_OK;
oom:
    st =
        saga_error(SAGA_ERR_OUT_OF_MEMORY, "out of memory for the blocks of %d input rows", (int)P);
fail:
    return st;
}
