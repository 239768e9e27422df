/* net_chain.c - a net's stages over the rows one demand needs (net_chain.h). */
#include "net_chain.h"

#include <stdlib.h>
#include <string.h>

/* Device bytes of stage s's block over r rows (m in-edges, a halo of nh rows of its own or every
 * vertex), and of stage 0's input rows. */
static size_t stage_bytes(const saga_net *n, int s, int32_t r, int64_t m, int32_t nh, bool own) {
    const stage *sg = &n->stages[s];
    if (sg->kind != STAGE_PROGRAM)
        return (size_t)r * sizeof(int32_t);
    size_t b = net_rows_block_bytes(r, m, own ? nh : n->n, own, own, false, 0, 0, 0);
    if (!saga_prog_fused(&sg->p))
        b += (size_t)m * 2 * sizeof(int32_t); /* destinations, edge ids */
    return b;
}

/* Device bytes of the rows (r of them; rows NULL: the first r) of stage s's input gathered into
 * a block: the net's input for s == 0 (dense in the transfer precision, or a CSR), else f32. */
static size_t input_bytes(const saga_net *n, int s, const int32_t *rows, int32_t r) {
    size_t b = (size_t)r * sizeof(int32_t);
    if (s > 0)
        return b + (size_t)r * (size_t)n->stages[s].in_cols * sizeof(float);
    if (!n->sparse)
        return b + (size_t)r * (size_t)n->in_cols *
                       (n->plan.transfer == SAGA_TRANSFER_F32 ? sizeof(float) : sizeof(uint16_t));
    b += ((size_t)r + 1) * sizeof(int64_t);
    for (int32_t i = 0; i < r; i++) {
        int32_t v = rows ? rows[i] : i, g = n->plan.ids ? n->plan.ids[v] : v;
        b += (size_t)(n->xs_off[g + 1] - n->xs_off[g]) * (sizeof(int32_t) + sizeof(float));
    }
    return b;
}

/* The rows level s computes (s == -1: the rows of stage 0's input read) when the chain starts
 * at stage w: NULL for every row (*r = n). In memory the stages below w compute every row inside
 * the chain, so their outputs are whole; streamed they run by parts and the chain reads stage
 * w's input rows from the host, so level w - 1 keeps its demand. */
static const int32_t *rows_of(const saga_net *n, const net_chain *ch, int s, int w, int32_t *r) {
    const int32_t *rows = s < 0 ? ch->d.in_rows : ch->d.rows[s];
    *r = s < 0 ? ch->d.n_in : ch->d.n_rows[s];
    const bool live = s >= w || (s == w - 1 && (w == 0 || ch->streamed));
    if (!live || !rows) {
        *r = n->n;
        return NULL;
    }
    return rows;
}

static bool resident(const saga_net *n, int s) {
    return n->plan.resident && n->plan.resident[s];
}

/* Whether a streamed chain from stage w reads its input rows gathered from the whole copy the
 * parts write on the device (a resident stage, saga_net.full) and, training, adds their gradient
 * into the whole gradient there (gfull), rather than through the host; a head (ch->use_head)
 * writes them in place instead. */
static bool whole_in(const saga_net *n, const net_chain *ch, int w) {
    return ch->streamed && w > 0 && w < n->n_stages && resident(n, w) && !ch->use_head;
}

/* Whether a head's rows go to the first rows of stage w's whole input on the device (resident)
 * rather than to a block of their own. */
static bool head_in_whole(const saga_net *n, const net_chain *ch, int w) {
    return ch->use_head && resident(n, w);
}

/* The chain's bytes when it starts at stage w. */
static size_t chain_bytes(const saga_net *n, const net_chain *ch, int w) {
    size_t total = 0;
    for (int s = w; s < n->n_stages; s++) {
        int32_t r, rp;
        const int32_t *rows = rows_of(n, ch, s, w, &r);
        const int32_t *prev = rows_of(n, ch, s - 1, w, &rp);
        if (rows)
            total += stage_bytes(n, s, r, ch->d.n_edges[s], rp, prev != NULL);
    }
    int32_t ri;
    const int32_t *in = rows_of(n, ch, w - 1, w, &ri);
    if (whole_in(n, ch, w))
        return total + (in ? (size_t)ri * sizeof(int32_t) : 0); /* the rows' ids, to gather */
    if (head_in_whole(n, ch, w))
        return total; /* the rows and their gradient are in the resident blocks */
    if (w < n->n_stages && (in || ch->streamed))
        total += input_bytes(n, w, in, ri);
    if (w > 0 && w < n->n_stages && ch->train) /* the input rows' gradient (b_gin) */
        total += (size_t)ri * (size_t)n->stages[w].in_cols * sizeof(float);
    return total;
}

/* The tensors of a streamed training chain's step from stage w: the tape keeps every stage's
 * until the backward pass, so their sum, each estimated as a part's step estimates a stage's
 * (step_estimate in net_build.c: its rows' input and output with the function's intermediates, a
 * batched stage's messages), and the loss's over the last stage's rows. The input rows
 * themselves, and from a later stage their gradient, are the chain's blocks (chain_bytes). */
static size_t chain_train_work(const saga_net *n, const net_chain *ch, int w) {
    size_t work = 0;
    int32_t r = 0;
    if (whole_in(n, ch, w) && rows_of(n, ch, w - 1, w, &r)) /* rows gathered, their gradient */
        work += 2 * (size_t)r * (size_t)n->stages[w].in_cols * sizeof(float);
    for (int s = w; s < n->n_stages; s++) {
        const stage *sg = &n->stages[s];
        (void)rows_of(n, ch, s, w, &r);
        const size_t fi = (size_t)sg->in_cols * 4, fo = (size_t)sg->out_cols * 4;
        if (sg->kind == STAGE_PROGRAM)
            work += (size_t)r * (fi + fo) * 4 + net_message_bytes(sg, ch->d.n_edges[s]);
        else
            work += (size_t)r * (fi + fo) * 3;
    }
    if (w < n->n_stages)
        work += (size_t)r * (size_t)n->stages[n->n_stages - 1].out_cols * 4 * 3;
    return work;
}

/* Whether a streamed training chain from stage w may have a head: only vertex stages below it,
 * and it reads fewer than every row of their output. */
static bool head_applies(const saga_net *n, const net_chain *ch, int w) {
    if (!ch->train || w <= 0 || w >= n->n_stages || !ch->d.rows[w - 1])
        return false;
    for (int s = 0; s < w; s++)
        if (n->stages[s].kind != STAGE_VERTEX)
            return false;
    return true;
}

/* The device bytes a head's steps need at most (a chain from stage w where head_applies): the
 * chain's input rows (or, in the backward pass, their gradient) held on the device, or stage w's
 * whole input and gradient where it is resident, beside the largest part's blocks (its slice's
 * input rows and ids, the stages' part-sized activation and gradient blocks between them) and
 * tensors (estimated as a part's step estimates a vertex stage's); *work, the largest part's
 * tensors. */
static size_t head_need(const saga_net *n, const net_chain *ch, int w, size_t *work) {
    *work = 0;
    const int32_t *in = ch->d.rows[w - 1], R = ch->d.n_rows[w - 1];
    size_t part = 0;
    int32_t r = 0;
    for (int32_t d = n->plan.d_lo; d < n->plan.d_hi; d++) {
        const nblock *pb = &n->plan.blk[d];
        const int32_t a = net_rows_in_part(pb, in, R, &r);
        const size_t rd = (size_t)(r - a), P = (size_t)(pb->v1 - pb->v0);
        size_t blocks = input_bytes(n, 0, in + a, r - a), tensors = 0;
        for (int s = 0; s < w; s++) {
            const stage *sg = &n->stages[s];
            const size_t t = rd * (size_t)(sg->in_cols + sg->out_cols) * sizeof(float) * 3;
            tensors = t > tensors ? t : tensors;
            if (s > 0)
                blocks += 2 * P * (size_t)sg->in_cols * sizeof(float);
        }
        part = blocks + tensors > part ? blocks + tensors : part;
        *work = tensors > *work ? tensors : *work;
    }
    if (resident(n, w))
        return saga_blk_bytes(n->full[w]) + saga_blk_bytes(n->gfull[w]) + part;
    return (size_t)R * (size_t)n->stages[w].in_cols * sizeof(float) + part;
}

/* Whether a streamed training chain from stage w takes a head: where it applies and its steps
 * fit the room (*work: the largest part's tensors). */
static bool head_fits(const saga_net *n, const net_chain *ch, int w, size_t room, size_t *work) {
    *work = 0;
    return head_applies(n, ch, w) && head_need(n, ch, w, work) <= room;
}

/* Whether the chain cannot start at stage w: in memory, its blocks exceed the room or a vertex
 * stage past the start reads rows its predecessor did not compute; streamed, an inference runs
 * by slices (slices_build) and a training chain holds every stage's tensors from its first on
 * (its blocks and tensors within the room, its step's cap set to match: net_chain.cap); it
 * starts at the first stage or at a program stage, whose input the parts write back to the host
 * (or whole on the device, whole_in) and whose input gradient they read summed from there. */
static bool cannot_start(const saga_net *n, const net_chain *ch, int w, size_t room) {
    if (ch->streamed && ch->train) {
        if (w > 0 && (n->stages[w].kind != STAGE_PROGRAM || n->plan.k < 2))
            return true;
        /* its step's blocks may exceed the parts' cap by what its tensors leave of theirs; of the
         * resident stages, only those up to w are used in its pass (the parts' and its own) */
        if (!ch->d.rows[w])
            return true;
        size_t held = 0;
        for (int s = 1; s <= w && n->full; s++)
            if (n->full[s])
                held += saga_blk_bytes(n->full[s]) + saga_blk_bytes(n->gfull[s]);
        return room != SIZE_MAX && chain_bytes(n, ch, w) + chain_train_work(n, ch, w) + held > room;
    }
    if (ch->streamed) /* an inference runs by slices (slices_build) */
        return true;
    return chain_bytes(n, ch, w) > room || (w > 0 && n->stages[w].kind == STAGE_VERTEX);
}

/* The scheduler blocks of block b, freed. */
static void sched_blocks_free(saga_net *n, nblock *b) {
    saga_sched *sc = n->sched;
    if (b->b_ids == b->b_self)
        b->b_ids = NULL;
    saga_blk **one[] = {&b->b_off,  &b->b_src,  &b->b_edst, &b->b_toff, &b->b_tdst,
                        &b->b_self, &b->b_ids,  &b->b_eids, &b->b_hids, &b->b_xoff,
                        &b->b_xidx, &b->b_xval, &b->b_xrows};
    for (size_t i = 0; i < sizeof one / sizeof one[0]; i++)
        (void)saga_sched_block_free(sc, one[i]);
    for (int k = 0; k < N_KEYS; k++) {
        (void)saga_sched_block_free(sc, &b->b_vin[k]);
        (void)saga_sched_block_free(sc, &b->b_vout[k]);
    }
    for (int i = 0; i < b->n_plans; i++)
        (void)saga_sched_block_free(sc, &b->plans[i].b_off);
}

static void block_drop(saga_net *n, nblock **b) {
    if (!*b)
        return;
    if (n->sched)
        sched_blocks_free(n, *b);
    net_block_free(n, *b);
    saga_free(*b);
    *b = NULL;
}

void net_chain_free(saga_net *n, net_chain **chp) {
    net_chain *ch = chp ? *chp : NULL;
    if (!ch)
        return;
    const int S = n->n_stages;
    for (int s = 0; ch->xp && s < S; s++)
        net_xplan_free(n, &ch->xp[s]);
    saga_free(ch->xp);
    if (head_in_whole(n, ch, ch->whole_below)) { /* the resident stage's blocks, not the chain's */
        ch->b_gin = NULL;
        ch->in->b_xrows = NULL;
    }
    if (n->sched)
        (void)saga_sched_block_free(n->sched, &ch->b_gin);
    for (int32_t d = n->plan.d_lo; ch->head && d < n->plan.d_hi; d++) {
        if (n->sched)
            sched_blocks_free(n, &ch->head[d]);
        net_block_free(n, &ch->head[d]);
    }
    saga_free(ch->head);
    for (int32_t j = 0; j < ch->n_slices; j++) {
        net_slice *sl = &ch->slices[j];
        block_drop(n, &sl->blk);
        block_drop(n, &sl->in);
        if (n->sched) {
            (void)saga_sched_block_free(n->sched, &sl->b_in);
            (void)saga_sched_block_free(n->sched, &sl->b_out);
            (void)saga_sched_block_free(n->sched, &sl->b_gout);
            (void)saga_sched_block_free(n->sched, &sl->b_gin);
        }
    }
    saga_free(ch->slices);
    for (int s = 0; (ch->out_host || ch->gout_host) && s < S - 1; s++) {
        const size_t bytes =
            ((size_t)ch->d.n_rows[s] * (size_t)n->stages[s].out_cols + 1) * sizeof(float);
        if (ch->out_host && ch->out_host[s])
            saga_backend_host_free(n->be, ch->out_host[s], bytes);
        if (ch->gout_host && ch->gout_host[s])
            saga_backend_host_free(n->be, ch->gout_host[s], bytes);
    }
    saga_free(ch->out_host);
    saga_free(ch->gout_host);
    for (int s = 0; ch->blk && s < S; s++)
        if (ch->in == ch->blk[s])
            ch->in = NULL; /* the same block */
    block_drop(n, &ch->in);
    for (int s = 0; ch->blk && s < S; s++)
        block_drop(n, &ch->blk[s]);
    saga_free(ch->blk);
    net_demand_free(&ch->d);
    saga_free(ch->want);
    saga_free(ch);
    *chp = NULL;
}

/* Appends slice [lo, hi) of stage s to ch->slices (*cap entries allocated). */
static saga_status slice_add(net_chain *ch, int32_t *cap, int s, int32_t lo, int32_t hi) {
    saga_status st = SAGA_OK;
    if (ch->n_slices == *cap) {
        int32_t c = *cap ? 2 * *cap : 64;
        SAGA_TRY(saga_realloc_array((void **)&ch->slices, (size_t)c, sizeof *ch->slices,
                                    "a chain's slices"));
        *cap = c;
    }
    ch->slices[ch->n_slices++] = (net_slice){.s = s, .lo = lo, .hi = hi};
fail:
    return st;
}

/* The rows of the demand list rows[i..R) that lie below v1 (a part's end): the index past them,
 * their in-edges added to *e and, of a program stage, the halo rows (the rows and their sources)
 * not yet stamped id, stamped and listed in fresh (*nf of them). */
static int32_t part_rows(const saga_net *n, const int32_t *rows, int32_t R, int32_t i, int32_t v1,
                         bool program, int32_t *stamp, int32_t id, int32_t *fresh, int64_t *e,
                         int32_t *nf) {
    *e = 0;
    *nf = 0;
    for (; i < R && rows[i] < v1; i++) {
        const int32_t v = rows[i];
        if (!program)
            continue;
        *e += n->h_off[v + 1] - n->h_off[v];
        if (stamp[v] != id)
            stamp[v] = id, fresh[(*nf)++] = v;
        for (int64_t k = n->h_off[v]; k < n->h_off[v + 1]; k++)
            if (stamp[n->h_src[k]] != id)
                stamp[n->h_src[k]] = id, fresh[(*nf)++] = n->h_src[k];
    }
    return i;
}

/* The slices of the stages from w on (net_chain.slices): each stage's rows cut where the parts
 * are, consecutive parts' rows joined while their in-edges, rows and halo (the rows and their
 * sources) stay within the largest part's, so that a slice's step holds no more than a part's.
 * stamp: n entries of room. */
static saga_status slices_cut(saga_net *n, net_chain *ch, int w, int32_t *stamp) {
    saga_status st = SAGA_OK;
    int64_t max_e = 1;
    int32_t max_r = 1, max_h = 1, cap = 0, *fresh = NULL, id = 0;
    for (int32_t d = n->plan.d_lo; d < n->plan.d_hi; d++) {
        const nblock *pb = &n->plan.blk[d];
        max_e = pb->e1 - pb->e0 > max_e ? pb->e1 - pb->e0 : max_e;
        max_r = pb->v1 - pb->v0 > max_r ? pb->v1 - pb->v0 : max_r;
        max_h = pb->n_halo > max_h ? pb->n_halo : max_h;
    }
    SAGA_TRY(saga_alloc_array((void **)&fresh, (size_t)n->n + 1, sizeof *fresh, "a chain"));
    for (int32_t v = 0; v < n->n; v++)
        stamp[v] = -1;
    for (int s = w; s < n->n_stages; s++) {
        const int32_t *rows = ch->d.rows[s], R = ch->d.n_rows[s];
        const bool program = n->stages[s].kind == STAGE_PROGRAM;
        int32_t lo = 0, i = 0, h = 0, nf;
        int64_t e = 0, pe;
        id++;
        for (int32_t d = n->plan.d_lo; d < n->plan.d_hi; d++) {
            const int32_t v1 = n->plan.blk[d].v1;
            int32_t j = part_rows(n, rows, R, i, v1, program, stamp, id, fresh, &pe, &nf);
            if (i > lo && (e + pe > max_e || j - lo > max_r || h + nf > max_h)) {
                /* the slice so far is closed; the part starts the next, counted again */
                for (int32_t f = 0; f < nf; f++)
                    stamp[fresh[f]] = -1;
                SAGA_TRY(slice_add(ch, &cap, s, lo, i));
                lo = i;
                e = h = 0;
                j = part_rows(n, rows, R, i, v1, program, stamp, ++id, fresh, &pe, &nf);
            }
            e += pe;
            h += nf;
            i = j;
        }
        if (R > lo)
            SAGA_TRY(slice_add(ch, &cap, s, lo, R));
    }
fail:
    saga_free(fresh);
    return st;
}

/* Slice sl's blocks (net_slice): its rows' block, and its input rows from the net's input
 * (stage 0), the stage's whole input on the device (resident, after the parts), or the host rows
 * of the stage before (its output rows by position, or every row's by id); pos: n entries of
 * room. */
static saga_status slice_blocks(saga_net *n, net_chain *ch, net_slice *sl, int32_t *pos) {
    saga_status st = SAGA_OK;
    int32_t *idx = NULL;
    const int s = sl->s, w = ch->whole_below, S = n->n_stages;
    const stage *sg = &n->stages[s];
    const int32_t *rows = ch->d.rows[s] + sl->lo, P = sl->hi - sl->lo;
    const int32_t *in_ids;
    int32_t count;
    if (sg->kind == STAGE_PROGRAM) {
        int64_t m;
        int32_t NH;
        net_rows_halo(n->h_off, n->h_src, n->n, rows, P, true, pos, &m, &NH);
        SAGA_TRY(net_rows_block(n, &sl->blk, rows, P, true, true, pos, m, NH, sg));
        in_ids = sl->blk->hids;
        count = NH;
    } else {
        SAGA_TRY(saga_alloc_zeroed((void **)&sl->blk, 1, sizeof *sl->blk, "a slice"));
        sl->blk->v1 = P;
        SAGA_TRY(net_rows_ids(n, sl->blk, rows, P));
        in_ids = rows;
        count = P;
    }
    const int64_t cols = sg->in_cols, out_cols = sg->out_cols;
    if (s == 0) {
        SAGA_TRY(saga_alloc_zeroed((void **)&sl->in, 1, sizeof *sl->in, "a slice"));
        sl->in->v1 = sl->in->n_halo = count;
        SAGA_TRY(net_rows_input(n, sl->in, in_ids, count, 0));
        if (n->sparse)
            net_sparse_fill_block(n, sl->in);
    } else if (s == w && resident(n, s)) {
        /* by the halo's ids (net_rows_block's b_hids), into a block of the scheduler's */
        sl->whole = true;
        SAGA_CHECK(sl->b_in =
                       saga_sched_block(n->sched, (size_t)count * (size_t)cols * sizeof(float),
                                        SAGA_BLK_TEMP, "gathered halo"),
                   SAGA_ERR_OUT_OF_MEMORY, "out of memory for a slice of %d rows", (int)count);
    } else {
        /* the stage before ran by slices: its rows by position; else by parts: every row by id */
        const int32_t *prev = s > w ? ch->d.rows[s - 1] : NULL, RP = ch->d.n_rows[s - 1];
        SAGA_TRY(saga_alloc_array((void **)&idx, count ? (size_t)count : 1, sizeof *idx,
                                  "a slice's rows"));
        for (int32_t i = 0, k = 0; i < count; i++) {
            if (!prev) {
                idx[i] = in_ids[i];
                continue;
            }
            while (k < RP && prev[k] < in_ids[i])
                k++; /* in_ids increases: a merge walk */
            SAGA_CHECK(k < RP && prev[k] == in_ids[i], SAGA_ERR_INTERNAL,
                       "saga_net: a slice of stage %d reads row %d, which stage %d does not "
                       "compute",
                       s, (int)in_ids[i], s - 1);
            idx[i] = k;
        }
        SAGA_CHECK(sl->b_in =
                       saga_sched_block(n->sched, (size_t)count * (size_t)cols * sizeof(float),
                                        SAGA_BLK_INPUT, "slice rows"),
                   SAGA_ERR_OUT_OF_MEMORY, "out of memory for a slice of %d rows", (int)count);
        SAGA_TRY(
            saga_blk_set_rows(sl->b_in,
                              &(saga_host_rows){.base = prev ? ch->out_host[s - 1] : n->act_host[s],
                                                .row_bytes = (size_t)cols * sizeof(float),
                                                .rows = idx,
                                                .n = count},
                              false));
    }
    SAGA_CHECK(sl->b_out = saga_sched_block(n->sched, (size_t)P * (size_t)out_cols * sizeof(float),
                                            SAGA_BLK_TEMP, "slice rows"),
               SAGA_ERR_OUT_OF_MEMORY, "out of memory for a slice of %d rows", (int)P);
    if (s < S - 1) /* the last stage's go to the pass's output (net_run.c) */
        saga_blk_set_host(sl->b_out, ch->out_host[s] + (int64_t)sl->lo * out_cols);
    if (ch->train && s < S - 1) {
        SAGA_CHECK(sl->b_gout = saga_sched_block(n->sched, (size_t)P * (size_t)out_cols * 4,
                                                 SAGA_BLK_INPUT, "slice gradients"),
                   SAGA_ERR_OUT_OF_MEMORY, "out of memory for a slice of %d rows", (int)P);
        saga_blk_set_host(sl->b_gout, ch->gout_host[s] + (int64_t)sl->lo * out_cols);
    }
    if (ch->train && s > w) {
        /* added into the stage before's gradient rows where its input rows are (idx) */
        SAGA_CHECK(sl->b_gin = saga_sched_block(n->sched, (size_t)count * (size_t)cols * 4,
                                                SAGA_BLK_TEMP, "slice gradients"),
                   SAGA_ERR_OUT_OF_MEMORY, "out of memory for a slice of %d rows", (int)count);
        SAGA_TRY(saga_blk_set_rows(sl->b_gin,
                                   &(saga_host_rows){.base = ch->gout_host[s - 1],
                                                     .row_bytes = (size_t)cols * sizeof(float),
                                                     .rows = idx,
                                                     .n = count},
                                   true));
    }
fail:
    saga_free(idx);
    return st;
}

/* Streamed inference, or training from the first stage (w 0): the stages from w (every one of
 * which needs fewer than every row) by slices (net_chain.slices). */
static saga_status slices_build(saga_net *n, net_chain *ch, int w) {
    saga_status st = SAGA_OK;
    int32_t *pos = NULL;
    const int S = n->n_stages;
    ch->whole_below = w;
    ch->use_head = false;
    ch->bytes = 0;
    SAGA_TRY(saga_alloc_zeroed((void **)&ch->out_host, (size_t)S, sizeof *ch->out_host,
                               "a chain's rows"));
    if (ch->train)
        SAGA_TRY(saga_alloc_zeroed((void **)&ch->gout_host, (size_t)S, sizeof *ch->gout_host,
                                   "a chain's gradients"));
    for (int s = w; s < S - 1; s++) {
        const size_t count = (size_t)ch->d.n_rows[s] * (size_t)n->stages[s].out_cols + 1;
        SAGA_TRY(
            net_host_array(n, (void **)&ch->out_host[s], count, sizeof(float), "a chain's rows"));
        if (ch->train)
            SAGA_TRY(net_host_array(n, (void **)&ch->gout_host[s], count, sizeof(float),
                                    "a chain's gradients"));
    }
    SAGA_TRY(saga_alloc_array((void **)&pos, (size_t)n->n + 1, sizeof *pos, "a chain"));
    SAGA_TRY(slices_cut(n, ch, w, pos));
    for (int32_t j = 0; j < ch->n_slices; j++)
        SAGA_TRY(slice_blocks(n, ch, &ch->slices[j], pos));
    ch->n_out = ch->d.n_rows[S - 1];
    /* the floor: the input and the tiles as the parts' and the slices' steps read them */
    ch->floor_bytes = w > 0 ? net_parts_floor(n, w) : 0;
    for (int32_t j = 0; j < ch->n_slices; j++) {
        const net_slice *sl = &ch->slices[j];
        if (sl->in)
            ch->floor_bytes += net_block_input_bytes(n, sl->in, sl->in->b_xrows);
        if (n->stages[sl->s].kind == STAGE_PROGRAM)
            ch->floor_bytes += net_tile_bytes(sl->blk, net_stage_key(&n->stages[sl->s]));
    }
fail:
    saga_free(pos);
    return st;
}

typedef struct halo_hook {
    saga_net *n;
    net_chain *ch;
} halo_hook;

static saga_status halo_hook_fn(void *user, int s, const uint8_t *want, uint8_t *next) {
    halo_hook *h = user;
    return net_halo_demand(h->n, &h->ch->xp[s], s, want, next);
}

saga_status net_chain_build(saga_net *n, net_chain **out, const int32_t *rows, int32_t R,
                            size_t room, bool streamed, bool train) {
    saga_status st = SAGA_OK;
    net_chain *ch = NULL;
    int32_t *pos = NULL;
    stage_kind *kinds = NULL;
    const int S = n->n_stages;
    *out = NULL;
    SAGA_TRY(saga_alloc_zeroed((void **)&ch, 1, sizeof *ch, "a chain"));
    ch->serial = ++n->chains;
    SAGA_TRY(saga_alloc_zeroed((void **)&ch->blk, (size_t)S, sizeof *ch->blk, "a chain"));
    SAGA_TRY(saga_alloc_array((void **)&kinds, (size_t)S, sizeof *kinds, "a chain"));
    for (int s = 0; s < S; s++)
        kinds[s] = n->stages[s].kind;
    if (rows) {
        SAGA_TRY(saga_alloc_array((void **)&ch->want, R ? (size_t)R : 1, sizeof(int32_t),
                                  "a chain's rows"));
        memcpy(ch->want, rows, (size_t)R * sizeof(int32_t));
        ch->n_want = R;
    }
    /* over shards, each program stage's exchange is planned with the demand, which it widens
     * by the rows the other ranks read */
    halo_hook hh = {n, ch};
    const net_demand_hook hook = {halo_hook_fn, &hh};
    if (n->hx)
        SAGA_TRY(saga_alloc_zeroed((void **)&ch->xp, (size_t)S, sizeof *ch->xp, "a chain"));
    SAGA_TRY(net_demand_build(&ch->d, kinds, S, n->h_off, n->h_src, n->n, rows, rows ? R : 0,
                              net_demand_cap(n->n), n->hx ? &hook : NULL));
    /* what does not fit computes every row, from the first stage up; in memory a vertex stage
     * only with the stage before it (it reads its own rows of that stage's output) */
    ch->streamed = streamed;
    ch->train = streamed && train;
    /* a streamed inference: the stages from the first that needs fewer than every row by slices,
     * each computing its rows alone, in steps no larger than a part's */
    int w_fewer = 0;
    while (w_fewer < S && !ch->d.rows[w_fewer])
        w_fewer++;
    if (streamed && !train && w_fewer < S) {
        SAGA_TRY(slices_build(n, ch, w_fewer));
        *out = ch;
        ch = NULL;
        goto fail;
    }
    /* streamed, a training chain starts where the parts' steps were planned to leave the stages
     * to it (net_plan.parts_below), unless it fits from the first; with a head where its steps
     * fit the room beside the chain's input rows */
    const int planned = ch->train ? n->plan.parts_below : S;
    size_t hwork = 0;
    int w = 0;
    for (; w < S; w++) {
        ch->use_head = head_fits(n, ch, w, room, &hwork);
        if ((w == planned && ch->d.rows[w]) || !cannot_start(n, ch, w, room))
            break;
    }
    ch->use_head = w < S && ch->use_head;
    if (ch->train && w > 0 && !ch->use_head && ch->d.rows[0]) {
        /* below the chain's start the parts would compute every row of some stage, though
         * every stage needs fewer: the stages by slices instead, each on the rows it needs */
        SAGA_TRY(slices_build(n, ch, 0));
        *out = ch;
        ch = NULL;
        goto fail;
    }
    ch->whole_below = w;
    ch->bytes = w < S ? chain_bytes(n, ch, w) : 0;
    if (ch->train && w < S && n->plan.step_room) {
        const size_t work = chain_train_work(n, ch, w);
        ch->cap = n->plan.step_room > work ? n->plan.step_room - work : 0;
    }
    const bool head = ch->use_head, in_whole = head_in_whole(n, ch, w);
    if (head && room != SIZE_MAX)
        ch->hcap = room > hwork ? room - hwork : 0;
    SAGA_TRY(saga_alloc_array((void **)&pos, (size_t)n->n + 1, sizeof(int32_t), "a chain"));
    for (int s = w; s < S; s++) {
        int32_t r, rp;
        const int32_t *rs = rows_of(n, ch, s, w, &r);
        const int32_t *prev = rows_of(n, ch, s - 1, w, &rp);
        if (!rs)
            continue;
        const stage *sg = &n->stages[s];
        /* the first stage reads its input rows gathered into a block (in memory: at stage 0) */
        const bool first = s == w && (w == 0 || streamed);
        if (sg->kind == STAGE_PROGRAM) {
            /* over the previous stage's rows by position, or every vertex by id; with the
             * graph's ids of its rows where the net's order is not the graph's */
            for (int32_t v = 0; v < n->n; v++)
                pos[v] = -1;
            for (int32_t i = 0; prev && i < rp; i++)
                pos[prev[i]] = i;
            /* over shards the rows received from the halo's owners follow the previous stage's
             * (net_halo_exchange), where that stage computed chosen rows */
            int32_t nh = prev ? rp : n->n;
            const net_xplan *xp = ch->xp ? ch->xp[s] : NULL;
            for (int64_t j = 0; xp && prev && j < xp->recv_off[n->hx->size]; j++)
                pos[xp->recv_ids[j]] = nh++;
            SAGA_TRY(net_rows_block(n, &ch->blk[s], rs, r, prev != NULL, prev || n->plan.ids, pos,
                                    ch->d.n_edges[s], nh, sg));
        } else {
            SAGA_TRY(saga_alloc_zeroed((void **)&ch->blk[s], 1, sizeof *ch->blk[s], "a chain"));
            ch->blk[s]->v1 = r;
            if (first) {
                SAGA_TRY(net_rows_input(n, ch->blk[s], rs, r, s));
                ch->in = ch->blk[s];
            } else {
                SAGA_TRY(net_rows_ids(n, ch->blk[s], rs, r));
            }
        }
    }
    int32_t ri;
    const int32_t *in = w < S ? rows_of(n, ch, w - 1, w, &ri) : NULL;
    if (!ch->in && w < S && (in || streamed)) {
        /* a program stage's input rows: those it reads, or every row (streamed) */
        SAGA_TRY(saga_alloc_zeroed((void **)&ch->in, 1, sizeof *ch->in, "a chain"));
        ch->in->v1 = ch->in->n_halo = in ? ri : n->n;
        if (in_whole) {
            /* the head's last stage writes the rows at the first positions of the whole input
             * on the device, and the step adds their gradient into the whole gradient's */
            ch->in->rows = in;
            ch->in->b_xrows = n->full[w];
            ch->b_gin = n->gfull[w];
        } else if (head) {
            /* the head's last stage writes the rows here on the device; the host array serves
             * only an eviction's write-back */
            const size_t bytes = (size_t)ri * (size_t)n->stages[w].in_cols * sizeof(float);
            ch->in->rows = in;
            SAGA_CHECK(ch->in->b_xrows =
                           saga_sched_block(n->sched, bytes, SAGA_BLK_TEMP, "input rows"),
                       SAGA_ERR_OUT_OF_MEMORY, "out of memory for %d input rows", (int)ri);
            saga_blk_set_host(ch->in->b_xrows, n->act_host[w]);
        } else if (!whole_in(n, ch, w)) {
            SAGA_TRY(net_rows_input(n, ch->in, in, in ? ri : n->n, w));
        } else if (in) {
            /* gathered from the whole input on the device by their positions there */
            ch->in->rows = in;
            SAGA_TRY(net_host_array(n, (void **)&ch->in->hids, (size_t)ri + 1, sizeof(int32_t),
                                    "a chain's rows"));
            memcpy(ch->in->hids, in, (size_t)ri * sizeof(int32_t));
            SAGA_CHECK(ch->in->b_hids = net_input_block(n, ch->in->hids,
                                                        (size_t)ri * sizeof(int32_t), "row ids"),
                       SAGA_ERR_OUT_OF_MEMORY, "out of memory for the ids of %d rows", (int)ri);
        }
    }
    if (ch->in && n->sparse && w == 0)
        net_sparse_fill_block(n, ch->in);
    if (ch->train && w > 0 && w < S && !whole_in(n, ch, w) && !in_whole) {
        /* the input rows' gradient, added into the host's for the parts' backward pass */
        const int64_t cols = n->stages[w].in_cols;
        const int32_t P = ch->in->v1;
        SAGA_CHECK(ch->b_gin = saga_sched_block(n->sched, (size_t)P * (size_t)cols * sizeof(float),
                                                SAGA_BLK_TEMP, "input rows' gradients"),
                   SAGA_ERR_OUT_OF_MEMORY, "out of memory for the gradients of %d rows", (int)P);
        if (head) { /* read by the head's backward steps on the device */
            saga_blk_set_host(ch->b_gin, n->grad_host[w]);
        } else {
            SAGA_TRY(saga_blk_set_rows(ch->b_gin,
                                       &(saga_host_rows){.base = n->grad_host[w],
                                                         .row_bytes = (size_t)cols * sizeof(float),
                                                         .rows = ch->in->rows,
                                                         .n = P},
                                       true));
        }
    }
    if (head)
        SAGA_TRY(net_head_blocks(n, ch->in->rows, ch->in->v1, &ch->head));
    for (int s = 0; ch->xp && s < S; s++) {
        int32_t rp;
        const int32_t *prev = rows_of(n, ch, s - 1, w, &rp);
        if (ch->xp[s])
            SAGA_TRY(net_xplan_place(n, ch->xp[s], prev, rp));
    }
    const nblock *last = w < S ? ch->blk[S - 1] : NULL;
    ch->n_out = last ? last->v1 - last->v0 : n->n;
    ch->out_ids = !last ? NULL : last->uids ? last->uids : last->self_pos;
    *out = ch;
    ch = NULL;
fail:
    if (ch)
        net_chain_free(n, &ch);
    saga_free(pos);
    saga_free(kinds);
    return st;
}

/* The input changed: a block of the chain's own input rows refilled (sparse) and reloaded. */
static void own_input_changed(const saga_net *n, nblock *b) {
    if (n->sparse && b->x_own)
        net_sparse_fill_block(n, b);
    net_block_input_changed(b, b->b_xrows);
}

void net_chain_input_changed(saga_net *n, net_chain *ch) {
    for (int32_t d = n->plan.d_lo; ch->head && d < n->plan.d_hi; d++)
        own_input_changed(n, &ch->head[d]);
    for (int32_t j = 0; j < ch->n_slices; j++)
        if (ch->slices[j].in)
            own_input_changed(n, ch->slices[j].in);
    if (ch->in && ch->whole_below == 0) /* a later stage's rows are reloaded by every pass */
        own_input_changed(n, ch->in);
}

bool net_chain_reads_whole(const saga_net *n, const net_chain *ch) {
    return whole_in(n, ch, ch->whole_below);
}

int32_t net_chain_rows(const saga_net *n, const net_chain *ch, int s) {
    if (ch->slices)
        return s >= ch->whole_below ? ch->d.n_rows[s] : n->n;
    const nblock *b = ch->blk[s];
    return b ? b->v1 - b->v0 : n->n;
}

/* A streamed training pass's host-to-device floor with the training chain ch: the parts' steps
 * of the stages below it, forward and backward, move their input rows (a head's slices of them)
 * and their program stages' tiles twice; the chain's step its blocks' tiles once, and its input
 * rows once (stage 0's, or a later stage's from the host; none where the parts or a head leave
 * them on the device). */
static uint64_t train_floor(const saga_net *n, const net_chain *ch) {
    const int S = n->n_stages, w = ch->whole_below;
    uint64_t f = 0;
    if (ch->slices) /* by slices: the input and the tiles forward and again backward */
        return 2 * ch->floor_bytes;
    for (int32_t d = n->plan.d_lo; d < n->plan.d_hi; d++) {
        const nblock *b = ch->head ? &ch->head[d] : &n->plan.blk[d];
        if (w > 0 && b->v1 > b->v0)
            f += 2 * net_block_input_bytes(n, b, ch->head ? b->b_xrows : n->act[0][d]);
        for (int s = 0; s < w; s++)
            if (n->stages[s].kind == STAGE_PROGRAM)
                f += 2 * net_tile_bytes(&n->plan.blk[d], net_stage_key(&n->stages[s]));
    }
    for (int s = w; s < S; s++) {
        if (n->stages[s].kind != STAGE_PROGRAM)
            continue;
        for (int32_t d = n->plan.d_lo; d < n->plan.d_hi && !ch->blk[s]; d++)
            f += net_tile_bytes(&n->plan.blk[d], net_stage_key(&n->stages[s]));
        if (ch->blk[s])
            f += net_tile_bytes(ch->blk[s], net_stage_key(&n->stages[s]));
    }
    if (w == 0 && ch->in)
        f += net_block_input_bytes(n, ch->in, ch->in->b_xrows);
    else if (w < S && !ch->head && !net_chain_reads_whole(n, ch))
        f += (uint64_t)(ch->in->v1 - ch->in->v0) * (uint64_t)n->stages[w].in_cols * sizeof(float);
    return f;
}

/* Whether prepared net n runs a pass (training or not) on a chain: in memory on one rank, or
 * streamed on one rank an inference of chosen rows, or a training pass with loss rows where saga
 * chose the parts or planned them to leave the later stages to the chain (net_plan.parts_below;
 * net_chain_for then keeps the chain only where it fits from some stage). */
static bool chain_applies(const saga_net *n, bool train) {
    if (!n->ready || n->dist || n->n_stages == 0 || n->pagerank)
        return false;
    return (n->plan.k == 1 && !n->plan.ids) ||
           (n->plan.streamed &&
            (!train || (n->loss_rows && (!n->o.parts || n->plan.parts_below < n->n_stages))));
}

saga_status net_chain_for(saga_net *n, bool train, const int32_t *want, int32_t R,
                          net_chain **out) {
    saga_status st = SAGA_OK;
    *out = NULL;
    /* over shards an inference of every row runs a chain too (want NULL): its exchanges; and
     * where a pass reads every row, it reads the own rows (the halo's are their owners') */
    const bool shards = n->hx != NULL;
    if (shards && ((train && !n->loss_rows) || (!train && !want))) {
        want = n->iota;
        R = n->hx->n_own;
    }
    if (!chain_applies(n, train) || (!train && !want && !shards))
        return SAGA_OK;
    double t0 = saga_now();
    int32_t *rows = NULL;
    net_chain **ch = train ? &n->plan.tchain : &n->plan.echain;
    if (!train) {
        /* a chain of other rows is built anew; over shards when any rank's rows changed, for
         * building plans the exchanges with every rank */
        int32_t other = *ch && ((*ch)->n_want != R || (R && !(*ch)->want) || (!R && (*ch)->want) ||
                                (R && memcmp((*ch)->want, want, (size_t)R * sizeof *want) != 0));
        if (shards)
            SAGA_TRY(saga_comm_allreduce(n->hx->comm, &other, 1, SAGA_I32, SAGA_COMM_MAX, NULL));
        if (other)
            net_chain_free(n, ch);
    }
    if (!*ch && !(train && n->plan.tchain_none)) {
        /* streamed, training's room is the budget's (cannot_start counts the resident stages
         * its pass uses) */
        const bool whole_room = train && n->plan.streamed && n->plan.step_room;
        size_t room = whole_room ? n->plan.step_room : n->plan.chain_room,
               other = train            ? 0
                       : n->plan.tchain ? n->plan.tchain->bytes
                                        : 0;
        room = room == SIZE_MAX ? room : room > other ? room - other : 0;
        if (train && n->plan.part) {
            /* the loss rows in the net's order (the parts renumber a streamed net's) */
            SAGA_TRY(saga_alloc_array((void **)&rows, (size_t)n->n_loss_rows + 1, sizeof *rows,
                                      "a chain's rows"));
            for (int32_t i = 0; i < n->n_loss_rows; i++)
                rows[i] = n->plan.part->inverse[n->loss_rows[i]];
            qsort(rows, (size_t)n->n_loss_rows, sizeof *rows, net_cmp_i32);
        }
        SAGA_TRY(train && n->loss_rows
                     ? net_chain_build(n, ch, rows ? rows : n->loss_rows, n->n_loss_rows, room,
                                       n->plan.streamed, true)
                     : net_chain_build(n, ch, want, R, room, n->plan.streamed, train));
        if (train && n->plan.streamed && (*ch)->whole_below < n->n_stages)
            n->plan.floor_train_bytes = train_floor(n, *ch);
        if (train && n->plan.streamed && (*ch)->whole_below == n->n_stages) {
            /* streamed, training runs by parts where no stage's chain fits */
            net_chain_free(n, ch);
            n->plan.tchain_none = true;
        }
        n->stats.prepare_seconds += saga_now() - t0;
    }
    *out = *ch;
fail:
    saga_free(rows);
    return st;
}
