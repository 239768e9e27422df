/* net_run.c - running a prepared graph network (saga_net.h): the plan of its steps (forward
 * passes, the loss, backward passes, block by block) for the block scheduler (sched.c), the
 * steps themselves, the one step over a chain (net_chain.h) that a pass in memory runs, or a
 * streamed training pass after the parts' forward steps of the stages below the chain, and the
 * slices a streamed inference runs its later stages by. */
#include "net_impl.h"

#include "half_impl.h"
#include "net_chain.h"

#include <stdlib.h>
#include <string.h>

/* ---- running ------------------------------------------------------------------------------ */

/* PH_CHAIN: a streamed training chain's one step after the parts' forward steps (net_chain.h):
 * its stages forward, the loss and their backward pass. PH_SLICE: one slice of a streamed
 * inference's stage, or of a sliced training chain's stage below the last, forward (net_slice;
 * d its index). A sliced training chain's PH_SLAST: a slice of the last stage forward, the loss
 * over its rows and its backward pass; PH_SBWD: a slice of a stage below, backward. */
typedef enum phase { PH_FWD = 0, PH_LOSS, PH_BWD, PH_CHAIN, PH_SLICE, PH_SLAST, PH_SBWD } phase;

/* With several ranks, some steps begin with an exchange of host rows (net_dist.c): before the
 * first block of a program stage, the rows of its input that the rank reads from others; before
 * the first block of a backward pass that reads gradients summed over the halos of the next
 * stage, the sums that belong to others. */
typedef enum xchg { XCHG_NONE = 0, XCHG_ROWS, XCHG_GRADS } xchg;

typedef struct stepdesc {
    phase ph;
    int s;
    int32_t d;
    xchg x;
    bool first; /* PH_FWD: the stage's first step in the pass */
} stepdesc;

static bool needs_writeback(const saga_net *n, int s_out, bool train) {
    if (n->plan.k == 1)
        return s_out == n->n_stages && !train;
    if (s_out == n->n_stages)
        return !train;
    return n->stages[s_out].kind == STAGE_PROGRAM;
}

/* The scheduler uses of stage s's graph blocks for block b. */
static void use_graph(saga_net *n, int t, nblock *b, const stage *sg, bool bwd) {
    saga_sched *S = n->sched;
    bool fused = saga_prog_fused(&sg->p);
    bool mean = fused && sg->p.gather == SAGA_GATHER_MEAN;
    int key = net_key_of(sg->p.edge_weight, mean);
    saga_sched_use(S, t, b->b_off, SAGA_USE_READ, 0);
    bool offload = bwd && fused && n->o.saved == SAGA_SAVED_OFFLOAD;
    if (!offload)
        saga_sched_use(S, t, b->b_src, SAGA_USE_READ, 0);
    if (!fused && b->b_eids)
        saga_sched_use(S, t, b->b_eids, SAGA_USE_READ, 0);
    if (b->b_self)
        saga_sched_use(S, t, b->b_self, SAGA_USE_READ, 0);
    if (!fused) {
        saga_sched_use(S, t, b->b_edst, SAGA_USE_READ, 0);
        const bplan *p = net_plan_of(b, saga_prog_batch_edges(&sg->p));
        if (p && p->b_off)
            saga_sched_use(S, t, p->b_off, SAGA_USE_READ, 0);
    }
    if (b->b_vin[key] && !offload)
        saga_sched_use(S, t, b->b_vin[key], SAGA_USE_READ, 0);
    if (bwd && fused) {
        saga_sched_use(S, t, b->b_toff, SAGA_USE_READ, 0);
        saga_sched_use(S, t, b->b_tdst, SAGA_USE_READ, 0);
        if (b->b_vout[key])
            saga_sched_use(S, t, b->b_vout[key], SAGA_USE_READ, 0);
    }
}

/* The uses of stage s's graph blocks for block b by a step that runs its forward and backward
 * passes on one tape (the transpose and its weights besides the forward's). */
static void use_graph_both(saga_net *n, int t, nblock *b, const stage *sg) {
    use_graph(n, t, b, sg, false);
    if (saga_prog_fused(&sg->p)) {
        int key = net_key_of(sg->p.edge_weight, sg->p.gather == SAGA_GATHER_MEAN);
        saga_sched_use(n->sched, t, b->b_toff, SAGA_USE_READ, 0);
        saga_sched_use(n->sched, t, b->b_tdst, SAGA_USE_READ, 0);
        if (b->b_vout[key])
            saga_sched_use(n->sched, t, b->b_vout[key], SAGA_USE_READ, 0);
    }
}

static bool resident(const saga_net *n, int s) {
    return n->plan.resident && n->plan.resident[s];
}

/* The training chain whose head runs stage s by parts (net_chain.head), or NULL. */
static net_chain *head_chain(const saga_net *n, int s) {
    net_chain *ch = n->plan.tchain;
    return ch && ch->head && s < ch->whole_below ? ch : NULL;
}

/* The block stage s runs part d on: in a training pass, a head's below the training chain, else
 * the part's own. */
static nblock *part_block(saga_net *n, int s, int32_t d, bool train) {
    return train && head_chain(n, s) ? &n->plan.tchain->head[d] : &n->plan.blk[d];
}

/* The block on the device that holds stage s's whole input (the parts write their rows into it at
 * their first row, a head's at its first position), or NULL: a resident stage's (saga_net.full),
 * or in a training pass the chain's input rows after its head. */
static saga_blk *whole_in_blk(const saga_net *n, int s, bool train) {
    if (resident(n, s))
        return n->full[s];
    const net_chain *ch = train && s > 0 ? head_chain(n, s - 1) : NULL;
    return ch && ch->whole_below == s ? ch->in->b_xrows : NULL;
}

/* And the block of its gradient (saga_net.gfull, the chain's b_gin), or NULL. */
static saga_blk *whole_grad_blk(const saga_net *n, int s) {
    if (resident(n, s))
        return n->gfull[s];
    const net_chain *ch = s > 0 ? head_chain(n, s - 1) : NULL;
    return ch && ch->whole_below == s ? ch->b_gin : NULL;
}

/* A head block without rows: the pass has no step for it. */
static bool no_rows(const nblock *b) {
    return b->rows && b->v1 == b->v0;
}

/* The uses of a resident stage's whole block by a part's step: the stage's first step writes it
 * (the others' rows are not there yet), the later ones add their rows or sums to it. */
static void use_whole(saga_net *n, int t, saga_blk *b, bool first) {
    saga_sched_use(n->sched, t, b, first ? SAGA_USE_WRITE : SAGA_USE_RW, 0);
}

/* A resident program stage's step gathers its halo from the whole input on the device. */
static void use_gathered_halo(saga_net *n, int t, int s, int32_t d) {
    saga_sched_use(n->sched, t, n->full[s], SAGA_USE_READ, 0);
    saga_sched_use(n->sched, t, n->plan.blk[d].b_hids, SAGA_USE_READ, 0);
    saga_sched_use(n->sched, t, n->halo[s][d], SAGA_USE_WRITE, SAGA_USE_DISCARD);
}

/* The uses of block b's input rows (stage 0's input; b is part d's or its head's): dense rows,
 * or the CSR's three blocks. */
static void use_input(saga_net *n, int t, const nblock *b, int32_t d) {
    if (!n->sparse) {
        saga_sched_use(n->sched, t, b->b_xrows ? b->b_xrows : n->act[0][d], SAGA_USE_READ, 0);
        return;
    }
    saga_sched_use(n->sched, t, b->b_xoff, SAGA_USE_READ, 0);
    saga_sched_use(n->sched, t, b->b_xidx, SAGA_USE_READ, 0);
    saga_sched_use(n->sched, t, b->b_xval, SAGA_USE_READ, 0);
}

static void chain_uses(saga_net *n, const net_chain *ch, int t, bool train);

/* The scheduler uses of slice sl's step t; the first of its stage waits for the steps before,
 * whose write-backs it reads (the parts', or the slices' of the stage before). taped: a sliced
 * training chain's PH_SLAST or PH_SBWD (see phase), which reads the transposes too and, instead of
 * writing its output rows, reads their gradient (below the last stage) and writes its input rows',
 * added on the host where the stage before keeps them. */
static void slice_uses(saga_net *n, const net_slice *sl, int t, bool first, bool taped) {
    saga_sched *sc = n->sched;
    nblock *b = sl->blk;
    if (first)
        saga_sched_step_barrier(sc, t);
    if (n->stages[sl->s].kind == STAGE_PROGRAM) {
        if (taped)
            use_graph_both(n, t, b, &n->stages[sl->s]);
        else
            use_graph(n, t, b, &n->stages[sl->s], false);
    }
    if (b->b_ids && b->b_ids != b->b_self)
        saga_sched_use(sc, t, b->b_ids, SAGA_USE_READ, 0);
    if (sl->in) {
        use_input(n, t, sl->in, 0);
        if (sl->in->b_ids)
            saga_sched_use(sc, t, sl->in->b_ids, SAGA_USE_READ, 0);
    } else if (sl->whole) {
        saga_sched_use(sc, t, n->full[sl->s], SAGA_USE_READ, 0);
        saga_sched_use(sc, t, b->b_hids, SAGA_USE_READ, 0);
        saga_sched_use(sc, t, sl->b_in, SAGA_USE_WRITE, SAGA_USE_DISCARD);
    } else {
        saga_sched_use(sc, t, sl->b_in, SAGA_USE_READ, 0);
    }
    if (!taped) {
        saga_sched_use(sc, t, sl->b_out, SAGA_USE_WRITE, SAGA_USE_WRITEBACK);
        return;
    }
    if (sl->b_gout)
        saga_sched_use(sc, t, sl->b_gout, SAGA_USE_READ, 0);
    if (sl->b_gin)
        saga_sched_use(sc, t, sl->b_gin, SAGA_USE_WRITE, SAGA_USE_WRITEBACK);
}

/* Records the plan of a forward pass (and, training, the loss and the backward pass). A streamed
 * chain from a later stage (tc, net_chain.h) runs as one step after the parts' forward steps of
 * the stages below it, which write its input back to the host or whole on the device; training,
 * it does the loss, and the parts' backward steps follow. */
static saga_status plan(saga_net *n, bool train, const net_chain *tc, stepdesc **out, int *n_out) {
    saga_status st = SAGA_OK;
    int S = n->n_stages;
    int32_t k = n->plan.k, lo = n->plan.d_lo, hi = n->plan.d_hi;
    int cap = (2 * S + 1) * (hi - lo) + 1 + (tc ? 2 * tc->n_slices : 0), cnt = 0;
    stepdesc *sd = NULL;
    SAGA_TRY(saga_alloc_array((void **)&sd, (size_t)cap, sizeof *sd, "net steps"));
    saga_sched *sc = n->sched;
    saga_sched_plan_begin(sc);
    int S_fwd = tc ? tc->whole_below : S;
    for (int s = 0; s < S_fwd; s++) {
        const stage *sg = &n->stages[s];
        bool first = true;
        for (int32_t d = lo; d < hi; d++) {
            nblock *b = part_block(n, s, d, train);
            if (no_rows(b))
                continue;
            int t = saga_sched_step(sc);
            xchg x = XCHG_NONE;
            const net_chain *hc = train ? head_chain(n, s) : NULL;
            if (hc && hc->hcap)
                saga_sched_step_cap(sc, t, hc->hcap);
            if (b->b_ids)
                saga_sched_use(sc, t, b->b_ids, SAGA_USE_READ, 0);
            if (d == lo && k > 1 && s > 0 && sg->kind == STAGE_PROGRAM && !resident(n, s)) {
                x = n->dist ? XCHG_ROWS : XCHG_NONE;
                if (x)
                    saga_sched_step_hold(sc, t);
                else
                    saga_sched_step_barrier(sc, t);
            }
            if (sg->kind == STAGE_PROGRAM) {
                if (resident(n, s))
                    use_gathered_halo(n, t, s, d);
                else
                    saga_sched_use(sc, t, n->halo[s][d], SAGA_USE_READ, 0);
                use_graph(n, t, &n->plan.blk[d], sg, false);
                if (train && n->saved[s][d])
                    saga_sched_use(sc, t, n->saved[s][d], SAGA_USE_WRITE, 0);
            } else if (s == 0) {
                use_input(n, t, b, d);
            } else {
                saga_sched_use(sc, t, n->act[s][d], SAGA_USE_READ, 0);
            }
            if (whole_in_blk(n, s + 1, train))
                use_whole(n, t, whole_in_blk(n, s + 1, train), first);
            else
                saga_sched_use(
                    sc, t, n->act[s + 1][d], SAGA_USE_WRITE,
                    needs_writeback(n, s + 1, train) || s + 1 == S_fwd ? SAGA_USE_WRITEBACK : 0);
            sd[cnt++] = (stepdesc){PH_FWD, s, d, x, first};
            first = false;
        }
    }
    for (int32_t j = 0; tc && j < tc->n_slices; j++) {
        const net_slice *sl = &tc->slices[j];
        int t = saga_sched_step(sc);
        const bool first = j == 0 || tc->slices[j - 1].s != sl->s;
        if (train && sl->s == S - 1) {
            slice_uses(n, sl, t, first, true);
            sd[cnt++] = (stepdesc){PH_SLAST, sl->s, j, XCHG_NONE, first};
        } else {
            slice_uses(n, sl, t, first, false);
            sd[cnt++] = (stepdesc){PH_SLICE, sl->s, j, XCHG_NONE, first};
        }
    }
    /* a sliced training chain's backward pass: the stages below the last from the top, each by
     * its slices */
    for (int s = S - 2; train && tc && tc->slices && s >= 0; s--) {
        bool first = true;
        for (int32_t j = 0; j < tc->n_slices; j++) {
            if (tc->slices[j].s != s)
                continue;
            int t = saga_sched_step(sc);
            slice_uses(n, &tc->slices[j], t, first, true);
            sd[cnt++] = (stepdesc){PH_SBWD, s, j, XCHG_NONE, first};
            first = false;
        }
    }
    if (tc && !tc->slices) {
        /* it waits for the parts' steps: its input rows are packed from what they wrote back to
         * the host, and its blocks, larger than a part's, load once theirs have gone (without
         * the wait the device arena can be left in pieces too small for them); after a head
         * it reads its rows on the device and does not wait */
        int t = saga_sched_step(sc);
        if (!tc->head)
            saga_sched_step_barrier(sc, t);
        chain_uses(n, tc, t, train);
        sd[cnt++] = (stepdesc){PH_CHAIN, S_fwd, 0, XCHG_NONE, false};
    }
    if (train && !tc) {
        for (int32_t d = lo; d < hi; d++) {
            int t = saga_sched_step(sc);
            if (n->plan.blk[d].b_ids)
                saga_sched_use(sc, t, n->plan.blk[d].b_ids, SAGA_USE_READ, 0);
            saga_sched_use(sc, t, n->act[S][d], SAGA_USE_READ, 0);
            saga_sched_use(sc, t, n->grad[S][d], SAGA_USE_WRITE, 0);
            sd[cnt++] = (stepdesc){PH_LOSS, S, d, XCHG_NONE, false};
        }
    }
    if (train) {
        for (int s = S_fwd - 1; s >= 0; s--) {
            const stage *sg = &n->stages[s];
            bool summed_in = k > 1 && s + 1 < S && n->stages[s + 1].kind == STAGE_PROGRAM &&
                             !whole_grad_blk(n, s + 1);
            for (int32_t d = lo; d < hi; d++) {
                nblock *b = part_block(n, s, d, true);
                if (no_rows(b))
                    continue;
                int t = saga_sched_step(sc);
                xchg x = XCHG_NONE;
                const net_chain *hc = head_chain(n, s);
                if (hc && hc->hcap)
                    saga_sched_step_cap(sc, t, hc->hcap);
                if (b->b_ids)
                    saga_sched_use(sc, t, b->b_ids, SAGA_USE_READ, 0);
                if (d == lo && summed_in) {
                    x = n->dist ? XCHG_GRADS : XCHG_NONE;
                    if (x)
                        saga_sched_step_hold(sc, t);
                    else
                        saga_sched_step_barrier(sc, t);
                }
                saga_blk *gw = whole_grad_blk(n, s + 1);
                saga_sched_use(sc, t, gw ? gw : n->grad[s + 1][d], SAGA_USE_READ, 0);
                if (sg->kind == STAGE_PROGRAM) {
                    bool offload = n->saved[s][d] && saga_prog_fused(&sg->p);
                    if (resident(n, s))
                        use_gathered_halo(n, t, s, d);
                    else
                        saga_sched_use(sc, t, n->halo[s][d], SAGA_USE_READ, 0);
                    use_graph(n, t, &n->plan.blk[d], sg, true);
                    if (offload)
                        saga_sched_use(sc, t, n->saved[s][d], SAGA_USE_READ, 0);
                    if (s > 0) {
                        if (resident(n, s))
                            use_whole(n, t, n->gfull[s], d == lo);
                        else if (k > 1)
                            saga_sched_use(sc, t, n->ghalo[s][d], SAGA_USE_WRITE,
                                           SAGA_USE_WRITEBACK);
                        else
                            saga_sched_use(sc, t, n->grad[s][d], SAGA_USE_WRITE, 0);
                    }
                } else if (s == 0) {
                    use_input(n, t, b, d);
                } else {
                    saga_sched_use(sc, t, n->act[s][d], SAGA_USE_READ, 0);
                    saga_sched_use(sc, t, n->grad[s][d], SAGA_USE_WRITE, 0);
                }
                sd[cnt++] = (stepdesc){PH_BWD, s, d, x, false};
            }
        }
    }
    SAGA_TRY(saga_sched_plan_end(sc));
    *out = sd;
    *n_out = cnt;
    return SAGA_OK;
fail:
    saga_free(sd);
    return st;
}

static saga_tensor *wrap(saga_net *n, saga_blk *b, saga_dtype dt, int64_t rows, int64_t cols) {
    return saga_ctx_wrap(n->c, dt, rows, cols, saga_blk_dev(b));
}

static saga_status ctx_status_or(saga_net *n, const char *what);

/* The device address of tile weights block w as f32: the block itself, or (16-bit transfers) a
 * context tensor it is widened into. */
static saga_status weights_f32(saga_net *n, saga_blk *w, int64_t m, const float **out) {
    *out = w ? saga_blk_dev(w) : NULL;
    if (!w || n->plan.transfer == SAGA_TRANSFER_F32 || m == 0)
        return SAGA_OK;
    saga_tensor *t = saga_ctx_tensor(n->c, SAGA_F32, m, 1);
    if (!t)
        return ctx_status_or(n, "tile weights");
    *out = t->data;
    return n->be->kernels->half_to_f32(saga_backend_default_stream(n->be), m, saga_blk_dev(w),
                                       n->plan.transfer == SAGA_TRANSFER_BF16, t->data);
}

/* What a step does with a block's view: a forward pass (its tape released unused), a backward
 * step (which reruns the stage for its tape, with the transposed weights), or both on one tape
 * (the loss rows' step, in memory): the forward's weights and the transposed ones. */
typedef enum view_kind { VIEW_FWD, VIEW_BWD, VIEW_TAPED } view_kind;

/* The view of block b for stage sg from the blocks now resident. */
static saga_status block_view(saga_net *n, nblock *b, const stage *sg, view_kind kind,
                              saga_prog_view *v) {
    const bool bwd = kind == VIEW_BWD;
    bool fused = saga_prog_fused(&sg->p);
    bool mean = fused && sg->p.gather == SAGA_GATHER_MEAN;
    int key = net_key_of(sg->p.edge_weight, mean);
    memset(v, 0, sizeof *v);
    v->n_dst = b->v1 - b->v0;
    v->n_src = b->n_halo;
    v->m = b->e1 - b->e0;
    v->e0 = b->e0;
    v->h_in_off = b->off; /* from 0: a part's rows or any rows' */
    v->h_off_base = 0;
    v->d_in_off = saga_blk_dev(b->b_off);
    v->d_in_src = b->b_src ? saga_blk_dev(b->b_src) : NULL;
    v->d_edge_dst = b->b_edst ? saga_blk_dev(b->b_edst) : NULL;
    v->d_out_off = b->b_toff ? saga_blk_dev(b->b_toff) : NULL;
    v->d_out_dst = b->b_tdst ? saga_blk_dev(b->b_tdst) : NULL;
    const float *vin = NULL;
    saga_status st = SAGA_OK;
    bool offload = bwd && fused && n->o.saved == SAGA_SAVED_OFFLOAD; /* vin is not loaded */
    if (!offload && (st = weights_f32(n, b->b_vin[key], v->m, &vin)) < 0)
        return st;
    if (fused) {
        v->vals_in = vin;
        v->vals_out = NULL;
        /* the backward pass multiplies by the transpose's weights, widened from 16 bits like the
         * forward's (a forward step's tape is released unused: it needs none) */
        if (kind != VIEW_FWD && (st = weights_f32(n, b->b_vout[key], v->m, &v->vals_out)) < 0)
            return st;
    } else {
        v->weights = vin;
        v->d_edge_ids = b->b_eids ? saga_blk_dev(b->b_eids) : NULL;
        const bplan *p = net_plan_of(b, saga_prog_batch_edges(&sg->p));
        if (p) {
            v->plan.n_batches = p->n_batches;
            v->plan.v0 = p->v0;
            v->plan.d_off = p->b_off ? saga_blk_dev(p->b_off) : v->d_in_off;
        }
    }
    return SAGA_OK;
}

static saga_status ctx_status_or(saga_net *n, const char *what) {
    saga_status st = saga_ctx_status(n->c);
    return st < 0 ? st
                  : saga_error(SAGA_ERR_INTERNAL, "saga_net: %s failed without an error", what);
}

/* Copies a tensor's rows into a block's device buffer (zeros when t is NULL). */
static saga_status to_block(saga_net *n, saga_blk *b, const saga_tensor *t) {
    saga_stream *s = saga_backend_default_stream(n->be);
    void *dst = saga_blk_dev(b);
    size_t bytes = saga_blk_bytes(b);
    if (!bytes)
        return SAGA_OK;
    if (!t)
        return n->be->iface->memset_async(s, dst, 0, bytes);
    /* a head block's rows fill the first rows of its part's block */
    if (t->nbytes > bytes)
        return saga_error(SAGA_ERR_INTERNAL, "saga_net: a %zu-byte result for a %zu-byte block",
                          t->nbytes, bytes);
    return t->nbytes ? saga_memcpy_d2d_async(s, dst, t->data, t->nbytes) : SAGA_OK;
}

/* What the loss function returned: a 1 x 1 f32 tensor. */
static saga_status check_loss(saga_net *n, const saga_tensor *l) {
    if (!l)
        return ctx_status_or(n, "the loss function");
    if (l->rows != 1 || l->cols != 1 || l->dtype != SAGA_F32)
        return saga_error(SAGA_ERR_INVALID_ARG,
                          "saga_net: the loss function returned a %lld x %lld tensor (expected 1 "
                          "x 1)",
                          (long long)l->rows, (long long)l->cols);
    return SAGA_OK;
}

/* Copies loss l (checked) into the pass's pinned loss_host, in stream order after the step that
 * computed it: read at the pass's end, which waits once for everything. */
static saga_status keep_loss(saga_net *n, const saga_tensor *l) {
    saga_status st = SAGA_OK;
    SAGA_TRY(check_loss(n, l));
    SAGA_CHECK((size_t)(n->loss_used + 1) * sizeof(float) <= n->loss_bytes, SAGA_ERR_INTERNAL,
               "saga_net: more loss steps in a pass than planned (%d)", (int)n->loss_used);
    SAGA_TRY(saga_memcpy_d2h_async(saga_backend_default_stream(n->be), n->loss_host + n->loss_used,
                                   l->data, sizeof(float)));
    n->loss_used++;
fail:
    return st;
}

/* The allocations the backend has made (a pass that made none can be recorded as a graph). */
static uint64_t backend_allocs(const saga_backend *be) {
    saga_backend_stats bs;
    saga_backend_get_stats(be, &bs);
    return bs.n_allocs;
}

static saga_status check_width(const saga_tensor *out, const stage *sg, int s) {
    if (out->cols != sg->out_cols)
        return saga_error(SAGA_ERR_INVALID_ARG,
                          "saga_net: stage %d returned %lld columns, it was added with %lld", s,
                          (long long)out->cols, (long long)sg->out_cols);
    return SAGA_OK;
}

/* Stage s's output for block d: the rows of the stage's input (H, n_halo rows, or the block's own
 * rows for a vertex stage) through the user's functions. *gathered gets the program's gathered
 * values. */
static saga_tensor *stage_rows_in(saga_net *n, int s, nblock *b, saga_tensor *H,
                                  const saga_sparse *xs, saga_tensor *gathered_in,
                                  saga_tensor **gathered, view_kind kind) {
    saga_ctx *c = n->c;
    stage *sg = &n->stages[s];
    int32_t P = b->v1 - b->v0;
    saga_tensor *self = H, *g = NULL;
    if (sg->kind == STAGE_PROGRAM) {
        if (b->b_self)
            self = saga_gather_rows(c, H, wrap(n, b->b_self, SAGA_I32, P, 1));
        if (gathered_in) {
            g = gathered_in;
        } else {
            saga_prog_view v;
            saga_status st = block_view(n, b, sg, kind, &v);
            if (st < 0) {
                saga_ctx_fail(c, st);
                return NULL;
            }
            g = saga_prog_gather(c, &sg->p, &v, H, self, NULL, sg->layer);
        }
        if (gathered)
            *gathered = g;
        if (!g || !sg->fn)
            return g;
    }
    if (!self && !xs)
        return NULL; /* the gather of the block's rows failed: the error is in c */
    saga_vertex_in vin = {.first = b->v0, .count = P, .gathered = g, .self = self, .sparse = xs};
    saga_tensor *out = NULL;
    if (saga_prog_apply_vertex(c, sg->fn, &vin, sg->layer, "saga_net", &out) < 0)
        return NULL;
    return out;
}

/* Dropout inside the user's functions draws the mask rows of the graph's own vertex ids. */
static void row_ids_on(saga_net *n, const nblock *b) {
    const int32_t *keys = n->hx && n->hx->d_keys ? n->hx->d_keys + b->v0 : NULL;
    saga_ctx_set_row_ids(n->c, b->b_ids ? saga_blk_dev(b->b_ids) : keys, b->v1 - b->v0);
}

static saga_tensor *stage_rows(saga_net *n, int s, nblock *b, saga_tensor *H, const saga_sparse *xs,
                               saga_tensor *gathered_in, saga_tensor **gathered, view_kind kind) {
    row_ids_on(n, b);
    saga_tensor *out = stage_rows_in(n, s, b, H, xs, gathered_in, gathered, kind);
    saga_ctx_set_row_ids(n->c, NULL, 0);
    return out;
}

/* Stage 0's input block as f32: the block itself, or (rows crossing in 16 bits) a context tensor
 * it is widened into. */
static saga_status input_rows(saga_net *n, saga_blk *b, int64_t rows, int64_t cols,
                              saga_tensor **out) {
    if (n->plan.transfer == SAGA_TRANSFER_F32) {
        *out = wrap(n, b, SAGA_F32, rows, cols);
        return SAGA_OK;
    }
    saga_tensor *t = saga_ctx_tensor(n->c, SAGA_F32, rows, cols);
    *out = t;
    if (!t || !rows || !cols)
        return SAGA_OK; /* NULL: the error is in the context */
    return n->be->kernels->half_to_f32(saga_backend_default_stream(n->be), rows * cols,
                                       saga_blk_dev(b), n->plan.transfer == SAGA_TRANSFER_BF16,
                                       t->data);
}

/* Block b's halo of resident stage s, gathered on the device from the stage's whole input into
 * dst. */
static saga_status gather_whole(saga_net *n, int s, const nblock *b, void *dst) {
    int64_t cols = n->stages[s].in_cols;
    if (!b->n_halo || !cols)
        return SAGA_OK;
    return n->be->kernels->gather_rows_f32(saga_backend_default_stream(n->be), b->n_halo, cols,
                                           saga_blk_dev(b->b_hids), n->n, saga_blk_dev(n->full[s]),
                                           dst);
}

/* Block b's halo gradient (grad, NULL: none) added into resident stage s's whole input gradient
 * on the device, whose first zero_rows rows are zeroed first (by the step that writes it first;
 * 0 in the others). */
static saga_status add_whole_grad(saga_net *n, int s, const nblock *b, const saga_tensor *grad,
                                  int32_t zero_rows) {
    saga_stream *s0 = saga_backend_default_stream(n->be);
    saga_blk *g = n->gfull[s];
    size_t zero = (size_t)zero_rows * (size_t)n->stages[s].in_cols * sizeof(float);
    if (zero) {
        saga_status st = n->be->iface->memset_async(s0, saga_blk_dev(g), 0, zero);
        if (st < 0)
            return st;
    }
    if (!grad || !b->n_halo || !n->stages[s].in_cols)
        return SAGA_OK;
    return n->be->kernels->scatter_add_rows_f32(s0, b->n_halo, n->stages[s].in_cols,
                                                saga_blk_dev(b->b_hids), grad->data, n->n,
                                                saga_blk_dev(g));
}

/* The rows of a resident stage's whole block from row v0 on (a part's first row, or a head
 * block's first position among the chain's input rows). */
static float *whole_rows(saga_net *n, saga_blk *whole, int s, int32_t v0) {
    int64_t cols = s == 0 ? n->in_cols : n->stages[s - 1].out_cols;
    return (float *)saga_blk_dev(whole) + (int64_t)v0 * cols;
}

/* Block b's sparse input rows as a view of its resident blocks; false with the error in c. */
static bool input_sparse(saga_net *n, const nblock *b, saga_sparse *xs) {
    int32_t P = b->v1 - b->v0;
    *xs = (saga_sparse){.rows = P, .cols = n->in_cols, .nnz = b->x_nnz};
    xs->offsets = wrap(n, b->b_xoff, SAGA_I64, (int64_t)P + 1, 1);
    xs->indices = wrap(n, b->b_xidx, SAGA_I32, b->x_nnz, 1);
    xs->values = wrap(n, b->b_xval, SAGA_F32, b->x_nnz, 1);
    return xs->offsets && xs->indices && xs->values;
}

/* Stage s's input for part d (run on block b, the part's or its head's): *xs (pointing into
 * *xs_buf) for stage 0's sparse rows, else *H: the halo of a program stage (gathered on the device
 * first when the stage is resident) or the block's rows of a vertex stage, stage 0's widened from
 * 16 bits when they crossed so. NULL with the error in the context. */
static saga_status stage_input(saga_net *n, int s, int32_t d, const nblock *b, saga_tensor **H,
                               saga_sparse *xs_buf, saga_sparse **xs) {
    const stage *sg = &n->stages[s];
    bool program = sg->kind == STAGE_PROGRAM;
    int64_t rows = program ? b->n_halo : b->v1 - b->v0;
    saga_blk *blk = s == 0 && b->b_xrows ? b->b_xrows : program ? n->halo[s][d] : n->act[s][d];
    *H = NULL;
    *xs = NULL;
    if (s == 0 && n->sparse) {
        *xs = input_sparse(n, b, xs_buf) ? xs_buf : NULL;
        return SAGA_OK;
    }
    if (s == 0)
        return input_rows(n, blk, rows, sg->in_cols, H);
    if (resident(n, s)) {
        saga_status st = gather_whole(n, s, b, saga_blk_dev(n->halo[s][d]));
        if (st < 0)
            return st;
    }
    *H = wrap(n, blk, SAGA_F32, rows, sg->in_cols);
    return SAGA_OK;
}

/* Every step of stage s (a part's or a slice's) draws dropout's masks from the counter its first
 * step found (the rows' ids tell the masks apart). */
static void stage_rng(saga_net *n, int s, bool first) {
    if (first)
        n->stages[s].rng = saga_ctx_rng_counter(n->c);
    else
        saga_ctx_set_rng_counter(n->c, n->stages[s].rng);
}

static saga_status run_fwd(saga_net *n, int s, int32_t d, bool train, bool first) {
    saga_status st = SAGA_OK;
    saga_ctx *c = n->c;
    stage *sg = &n->stages[s];
    nblock *b = part_block(n, s, d, train);
    stage_rng(n, s, first);
    saga_tape_pos mark = saga_tape_mark(c);
    saga_sparse xs_, *xs = NULL;
    saga_tensor *H = NULL;
    SAGA_TRY(stage_input(n, s, d, b, &H, &xs_, &xs));
    saga_tensor *gathered = NULL;
    /* a product that ends the stage writes straight where the output goes, not to a copy */
    saga_ctx_set_defer(c, true);
    saga_tensor *out = H || xs ? stage_rows(n, s, b, H, xs, NULL, &gathered, VIEW_FWD) : NULL;
    saga_ctx_set_defer(c, false);
    if (!out)
        SAGA_TRY(ctx_status_or(n, "a stage"));
    SAGA_TRY(check_width(out, sg, s));
    saga_blk *wb = whole_in_blk(n, s + 1, train);
    const bool whole = wb != NULL;
    void *dst = whole ? whole_rows(n, wb, s + 1, b->v0) : saga_blk_dev(n->act[s + 1][d]);
    int direct = out->nbytes && (whole || saga_blk_bytes(n->act[s + 1][d]) == out->nbytes)
                     ? saga_ctx_flush_to(c, out, dst)
                     : 0;
    if (direct < 0)
        SAGA_TRY(ctx_status_or(n, "a stage"));
    if (!direct) {
        /* out is read below (a product deferred but left unread is dropped with the tape) */
        saga_ctx_flush(c);
        if (!whole)
            SAGA_TRY(to_block(n, n->act[s + 1][d], out));
        else if (out->nbytes)
            SAGA_TRY(saga_memcpy_d2d_async(saga_backend_default_stream(n->be), dst, out->data,
                                           out->nbytes));
    }
    if (train && n->saved[s][d])
        SAGA_TRY(to_block(n, n->saved[s][d], gathered));
fail:
    saga_tape_release(c, mark);
    return st;
}

/* The loss rows among each part's rows, in its lsel / lsel_ids (see nblock), from one mask. */
static saga_status loss_select(saga_net *n) {
    saga_status st = SAGA_OK;
    uint8_t *in = NULL;
    SAGA_TRY(saga_alloc_zeroed((void **)&in, (size_t)n->n, 1, "loss rows"));
    for (int32_t i = 0; i < n->n_loss_rows; i++)
        in[n->loss_rows[i]] = 1;
    for (int32_t d = n->plan.d_lo; d < n->plan.d_hi; d++) {
        nblock *b = &n->plan.blk[d];
        const int32_t P = b->v1 - b->v0, *ids = (n->plan.ids ? n->plan.ids : n->iota) + b->v0;
        int32_t k = 0;
        for (int32_t i = 0; i < P; i++)
            k += in[ids[i]];
        SAGA_TRY(
            saga_alloc_array((void **)&b->lsel, k ? (size_t)k : 1, sizeof(int32_t), "loss rows"));
        SAGA_TRY(saga_alloc_array((void **)&b->lsel_ids, k ? (size_t)k : 1, sizeof(int32_t),
                                  "loss rows"));
        b->n_lsel = 0;
        for (int32_t i = 0; i < P; i++)
            if (in[ids[i]]) {
                b->lsel[b->n_lsel] = i;
                b->lsel_ids[b->n_lsel++] = ids[i];
            }
    }
fail:
    saga_free(in);
    return st;
}

/* A part's loss step: the loss over its rows, or with loss rows over those of them alone (their
 * rows gathered; a part without any gives the last stage a zero gradient and the loss no call),
 * then its gradient into the last stage's output gradient. */
static saga_status run_loss(saga_net *n, int32_t d) {
    saga_status st = SAGA_OK;
    saga_ctx *c = n->c;
    int S = n->n_stages;
    nblock *b = &n->plan.blk[d];
    int32_t P = b->v1 - b->v0;
    saga_tape_pos mark = saga_tape_mark(c);
    if (n->loss_rows && !b->lsel)
        SAGA_TRY(loss_select(n));
    if (n->loss_rows && b->n_lsel == 0) {
        st = to_block(n, n->grad[S][d], NULL);
        goto fail;
    }
    saga_tensor *Y = wrap(n, n->act[S][d], SAGA_F32, P, n->stages[S - 1].out_cols);
    if (!Y)
        SAGA_TRY(ctx_status_or(n, "the loss"));
    saga_ctx_mark_leaf(c, Y);
    saga_vertex_in vin = {.first = b->v0, .count = P, .gathered = NULL, .self = Y};
    const int32_t *ids = (n->plan.ids ? n->plan.ids : n->iota) + b->v0;
    if (n->loss_rows && b->n_lsel < P) {
        saga_tensor *idx = saga_ctx_from_host(c, SAGA_I32, b->n_lsel, 1, b->lsel);
        vin = (saga_vertex_in){.first = 0, .count = b->n_lsel, .self = saga_gather_rows(c, Y, idx)};
        ids = b->lsel_ids;
        if (!vin.self)
            SAGA_TRY(ctx_status_or(n, "the loss"));
    } else {
        row_ids_on(n, b);
    }
    saga_tensor *l = n->loss(c, &vin, ids, n->loss_user);
    saga_ctx_set_row_ids(c, NULL, 0);
    SAGA_TRY(keep_loss(n, l));
    SAGA_TRY(saga_tape_backward_range(c, mark, l, NULL));
    SAGA_TRY(to_block(n, n->grad[S][d], Y->grad));
fail:
    saga_tape_release(c, mark);
    return st;
}

static saga_status run_bwd(saga_net *n, int s, int32_t d) {
    saga_status st = SAGA_OK;
    saga_ctx *c = n->c;
    stage *sg = &n->stages[s];
    nblock *b = part_block(n, s, d, true);
    int32_t P = b->v1 - b->v0;
    bool program = sg->kind == STAGE_PROGRAM;
    bool offload = program && n->saved[s][d] && saga_prog_fused(&sg->p);
    saga_ctx_set_rng_counter(c, sg->rng);
    saga_tape_pos mark = saga_tape_mark(c);
    saga_sparse xs_, *xs = NULL;
    saga_tensor *H = NULL;
    SAGA_TRY(stage_input(n, s, d, b, &H, &xs_, &xs));
    saga_blk *gw = whole_grad_blk(n, s + 1);
    saga_tensor *dout =
        gw ? saga_ctx_wrap(c, SAGA_F32, P, sg->out_cols, whole_rows(n, gw, s + 1, b->v0))
           : wrap(n, n->grad[s + 1][d], SAGA_F32, P, sg->out_cols);
    saga_tensor *saved = offload ? wrap(n, n->saved[s][d], SAGA_F32, P, sg->in_cols) : NULL;
    if (!(H || xs) || !dout || (offload && !saved))
        SAGA_TRY(ctx_status_or(n, "a backward step"));
    if (s > 0)
        saga_ctx_mark_leaf(c, H);
    if (saved)
        saga_ctx_mark_leaf(c, saved);
    saga_tensor *gathered = NULL;
    /* the stage runs again for its tape: its output's value is not needed, only its gradient */
    saga_ctx_set_defer(c, true);
    saga_tensor *out = stage_rows(n, s, b, H, xs, saved, &gathered, VIEW_BWD);
    saga_ctx_set_defer(c, false);
    if (!out)
        SAGA_TRY(ctx_status_or(n, "a stage"));
    SAGA_TRY(check_width(out, sg, s));
    if (out == saved) {
        /* no apply_vertex: the gathered values' gradient is the output's */
        saga_ctx_mark_leaf(c, saved);
        SAGA_TRY(saga_grad_accumulate(c, saved, dout));
    } else {
        SAGA_TRY(saga_tape_backward_range(c, mark, out, dout));
    }
    if (offload && s > 0 && saved->grad) {
        /* the SpMM was not on this tape: its backward by hand, d H += A^T d gathered */
        saga_prog_view v;
        SAGA_TRY(block_view(n, b, sg, VIEW_BWD, &v));
        saga_csr_dev at = {v.n_src, v.n_dst, v.m, v.d_out_off, v.d_out_dst, v.vals_out};
        float beta = 1.0f;
        if (!H->grad) {
            saga_tensor *z = saga_ctx_zeros(c, SAGA_F32, H->rows, H->cols);
            if (!z)
                SAGA_TRY(ctx_status_or(n, "a gradient"));
            SAGA_TRY(saga_grad_accumulate(c, H, z));
        }
        if (H->nbytes)
            SAGA_TRY(saga_ctx_kernels(c)->spmm_f32(saga_ctx_stream(c), &at, H->cols, 1.0f,
                                                   saved->grad->data, beta, H->grad->data));
    }
    if (s > 0 && resident(n, s)) {
        /* the halo's gradient added into the whole one on the device, zeroed by the first part */
        SAGA_TRY(add_whole_grad(n, s, b, H->grad, d == n->plan.d_lo ? n->n : 0));
    } else if (s > 0) {
        saga_blk *dst = program && n->plan.k > 1 ? n->ghalo[s][d] : n->grad[s][d];
        SAGA_TRY(to_block(n, dst, H->grad));
    }
fail:
    saga_tape_release(c, mark);
    return st;
}

/* Stage s computed rows more rows in this call (saga_net_stats.rows_computed, stage_rows). */
static void rows_done(saga_net *n, int s, int64_t rows) {
    n->stats.rows_computed += rows;
    if (s < SAGA_NET_STAGE_ROWS)
        n->stats.stage_rows[s] += rows;
}

/* The scheduler uses of a chain's one step t: its input rows and every stage's blocks; a
 * training chain after the parts' stages also writes its input rows' gradient back (b_gin). */
static void chain_uses(saga_net *n, const net_chain *ch, int t, bool train) {
    saga_sched *sc = n->sched;
    nblock *whole = &n->plan.blk[0];
    const int S = n->n_stages;
    const int s0 = ch->streamed ? ch->whole_below : 0;
    nblock *ib = ch->in ? ch->in : whole;
    if (s0 == 0) {
        use_input(n, t, ib, 0);
    } else if (net_chain_reads_whole(n, ch)) {
        /* the whole input the parts wrote on the device, and its whole gradient (written first
         * here: zeroed) */
        saga_sched_use(sc, t, n->full[s0], SAGA_USE_READ, 0);
        if (ib->b_hids)
            saga_sched_use(sc, t, ib->b_hids, SAGA_USE_READ, 0);
        if (train)
            saga_sched_use(sc, t, n->gfull[s0], SAGA_USE_WRITE, 0);
    } else {
        saga_sched_use(sc, t, ib->b_xrows, SAGA_USE_READ, 0);
    }
    for (int s = s0; s < S; s++) {
        nblock *b = ch->blk[s] ? ch->blk[s] : whole;
        if (n->stages[s].kind == STAGE_PROGRAM) {
            if (train)
                use_graph_both(n, t, b, &n->stages[s]);
            else
                use_graph(n, t, b, &n->stages[s], false);
        }
        if (ch->blk[s] && b->b_ids && b->b_ids != b->b_self)
            saga_sched_use(sc, t, b->b_ids, SAGA_USE_READ, 0);
    }
    if (ch->in && ch->in != ch->blk[s0] && ch->in->b_ids)
        saga_sched_use(sc, t, ch->in->b_ids, SAGA_USE_READ, 0);
    if (train && ch->b_gin) /* back to the host's gradient, or to the head's steps */
        saga_sched_use(sc, t, ch->b_gin, SAGA_USE_WRITE, ch->head ? 0 : SAGA_USE_WRITEBACK);
    if (train && ch->cap)
        saga_sched_step_cap(sc, t, ch->cap);
}

/* A pass over a chain (net_chain.h) is one step: it holds the input rows and every stage's graph
 * blocks, the stages run as a chain of saga_program_run calls would, each on the rows its block
 * lists (every row without one), and a training pass's backward walks the tape instead of
 * recomputing each stage. Training, the loss reads the last stage's rows (kept: keep_loss),
 * and a chain after the parts' stages adds its input rows' gradient where the parts read it
 * (b_gin, or gfull on the device); inference, they go to out (host, n_out rows). */
static saga_status chain_step(saga_net *n, net_chain *ch, bool train, float *out) {
    saga_status st = SAGA_OK;
    saga_ctx *c = n->c;
    nblock *whole = &n->plan.blk[0];
    const int S = n->n_stages;
    /* streamed, the parts ran the stages before the chain's first */
    const int s0 = ch->streamed ? ch->whole_below : 0;
    saga_tape_pos mark = saga_tape_mark(c);
    nblock *ib = ch->in ? ch->in : whole;
    saga_sparse xs_, *xs = NULL;
    saga_tensor *h = NULL, *h_in = NULL;
    const bool whole_in = net_chain_reads_whole(n, ch);
    if (s0 == 0) {
        SAGA_TRY(stage_input(n, 0, 0, ib, &h, &xs_, &xs));
    } else if (whole_in) {
        /* the rows of the whole input on the device (gathered, or all of it), their gradient
         * added into the whole one, zeroed first */
        const int64_t cols = n->stages[s0].in_cols;
        if (ib->b_hids) {
            h = saga_ctx_tensor(c, SAGA_F32, ib->n_halo, cols);
            if (h)
                SAGA_TRY(gather_whole(n, s0, ib, h->data));
        } else {
            h = saga_ctx_wrap(c, SAGA_F32, n->n, cols, saga_blk_dev(n->full[s0]));
        }
        h_in = h;
        if (h && train) {
            SAGA_TRY(add_whole_grad(n, s0, ib, NULL, n->n));
            if (!ib->b_hids)
                SAGA_TRY(saga_ctx_wrap_grad(c, h, saga_blk_dev(n->gfull[s0])));
            saga_ctx_mark_leaf(c, h);
        }
    } else { /* f32 rows from the host, or from the head's steps on the device */
        h = wrap(n, ib->b_xrows, SAGA_F32, ib->v1 - ib->v0, n->stages[s0].in_cols);
        if (h && train && ch->b_gin) {
            /* its gradient goes back to the parts: the backward pass adds it into b_gin */
            const size_t bytes =
                (size_t)(ib->v1 - ib->v0) * (size_t)n->stages[s0].in_cols * sizeof(float);
            SAGA_TRY(n->be->iface->memset_async(saga_backend_default_stream(n->be),
                                                saga_blk_dev(ch->b_gin), 0, bytes));
            SAGA_TRY(saga_ctx_wrap_grad(c, h, saga_blk_dev(ch->b_gin)));
            saga_ctx_mark_leaf(c, h);
        }
    }
    for (int s = s0; s < S && (h || (s == 0 && xs)); s++) {
        n->stages[s].rng = saga_ctx_rng_counter(c);
        nblock *b = ch->blk[s] ? ch->blk[s] : whole;
        if (ch->xp && ch->xp[s] && !(h = net_halo_exchange(n, h, ch->xp[s])))
            break;
        h = stage_rows(n, s, b, h, s == 0 ? xs : NULL, NULL, NULL, train ? VIEW_TAPED : VIEW_FWD);
        if (h)
            SAGA_TRY(check_width(h, &n->stages[s], s));
        rows_done(n, s, net_chain_rows(n, ch, s));
    }
    if (!h)
        SAGA_TRY(ctx_status_or(n, "a stage"));
    if (train) {
        saga_vertex_in vin = {.first = 0, .count = ch->n_out, .self = h};
        if (n->hx && ch->n_out == n->n) {
            /* over shards the loss sees the own rows (the local graph's first), of every row */
            vin.count = n->hx->n_own;
            vin.self =
                saga_gather_rows(c, h, saga_ctx_wrap(c, SAGA_I32, n->hx->n_own, 1, n->hx->d_own));
            if (!vin.self)
                SAGA_TRY(ctx_status_or(n, "the own rows"));
        }
        saga_tensor *l = n->loss(c, &vin, ch->out_ids ? ch->out_ids : n->iota, n->loss_user);
        SAGA_TRY(keep_loss(n, l));
        SAGA_TRY(saga_tape_backward_range(c, mark, l, NULL));
        if (whole_in && ib->b_hids)
            SAGA_TRY(add_whole_grad(n, s0, ib, h_in->grad, 0));
    } else if (out && h->nbytes) {
        SAGA_TRY(
            saga_memcpy_d2h_async(saga_backend_default_stream(n->be), out, h->data, h->nbytes));
    }
fail:
    saga_tape_release(c, mark);
    return st;
}

/* Slice sl's input (net_slice): *xs for stage 0's sparse rows, else *h, its input rows or its
 * halo's (gathered on the device first from a resident stage's whole input). */
static saga_status slice_input(saga_net *n, const net_slice *sl, saga_tensor **h,
                               saga_sparse *xs_buf, saga_sparse **xs) {
    const int s = sl->s;
    nblock *b = sl->blk;
    const bool program = n->stages[s].kind == STAGE_PROGRAM;
    const int64_t cols = n->stages[s].in_cols, rows = program ? b->n_halo : b->v1 - b->v0;
    *h = NULL;
    *xs = NULL;
    if (sl->in)
        return stage_input(n, 0, 0, sl->in, h, xs_buf, xs);
    if (sl->whole) {
        saga_status st = gather_whole(n, s, b, saga_blk_dev(sl->b_in));
        if (st < 0)
            return st;
    }
    *h = wrap(n, sl->b_in, SAGA_F32, rows, cols);
    return SAGA_OK;
}

/* Slice sl of a sliced chain (net_chain.slices): its stage on its rows, from its input rows (or
 * its halo's), into its output block; training, first: the first slice of its stage. */
static saga_status slice_step(saga_net *n, const net_slice *sl, bool train, bool first) {
    saga_status st = SAGA_OK;
    saga_ctx *c = n->c;
    const int s = sl->s;
    nblock *b = sl->blk;
    if (train)
        stage_rng(n, s, first);
    saga_tape_pos mark = saga_tape_mark(c);
    saga_sparse xs_, *xs = NULL;
    saga_tensor *h = NULL;
    SAGA_TRY(slice_input(n, sl, &h, &xs_, &xs));
    if (h || xs)
        h = stage_rows(n, s, b, h, xs, NULL, NULL, VIEW_FWD);
    if (!h)
        SAGA_TRY(ctx_status_or(n, "a stage"));
    SAGA_TRY(check_width(h, &n->stages[s], s));
    SAGA_TRY(to_block(n, sl->b_out, h));
    rows_done(n, s, sl->hi - sl->lo);
fail:
    saga_tape_release(c, mark);
    return st;
}

/* A sliced training chain's slice sl of stage s, on a tape: PH_SLAST (last): the stage forward
 * on the slice's rows, the loss over them and the backward pass; PH_SBWD: the stage again on its
 * rows, backward from its output rows' gradient (b_gout). Either adds its input rows' gradient
 * where the stage before keeps it (b_gin, above the first stage); the model's gradients add up
 * over the steps. */
static saga_status slice_train_step(saga_net *n, const net_slice *sl, bool last, bool first) {
    saga_status st = SAGA_OK;
    saga_ctx *c = n->c;
    const int s = sl->s;
    const stage *sg = &n->stages[s];
    nblock *b = sl->blk;
    const int32_t P = b->v1 - b->v0;
    if (last)
        stage_rng(n, s, first);
    else
        saga_ctx_set_rng_counter(c, sg->rng);
    saga_tape_pos mark = saga_tape_mark(c);
    saga_sparse xs_, *xs = NULL;
    saga_tensor *h = NULL;
    SAGA_TRY(slice_input(n, sl, &h, &xs_, &xs));
    if (!h && !xs)
        SAGA_TRY(ctx_status_or(n, "a slice's input"));
    if (h)
        saga_ctx_mark_leaf(c, h);
    /* backward, the output's value is not needed, only its gradient */
    saga_ctx_set_defer(c, !last);
    saga_tensor *out = stage_rows(n, s, b, h, xs, NULL, NULL, VIEW_TAPED);
    saga_ctx_set_defer(c, false);
    if (!out)
        SAGA_TRY(ctx_status_or(n, "a stage"));
    SAGA_TRY(check_width(out, sg, s));
    if (last) {
        saga_vertex_in vin = {.first = 0, .count = P, .self = out};
        saga_tensor *l = n->loss(c, &vin, b->uids ? b->uids : b->self_pos, n->loss_user);
        SAGA_TRY(keep_loss(n, l));
        SAGA_TRY(saga_tape_backward_range(c, mark, l, NULL));
        rows_done(n, s, P);
    } else {
        saga_tensor *dout = wrap(n, sl->b_gout, SAGA_F32, P, sg->out_cols);
        if (!dout)
            SAGA_TRY(ctx_status_or(n, "a slice's gradient"));
        SAGA_TRY(saga_tape_backward_range(c, mark, out, dout));
    }
    if (sl->b_gin)
        SAGA_TRY(to_block(n, sl->b_gin, h ? h->grad : NULL));
fail:
    saga_tape_release(c, mark);
    return st;
}

/* A pass in memory (one block), or a streamed chain from the first stage: the chain's step as a
 * plan of its own. */
static saga_status run_chain(saga_net *n, net_chain *ch, bool train, float *out) {
    saga_status st = SAGA_OK;
    saga_sched *sc = n->sched;
    saga_sched_plan_begin(sc);
    int t = saga_sched_step(sc);
    chain_uses(n, ch, t, train);
    SAGA_TRY(saga_sched_plan_end(sc));
    SAGA_TRY(saga_sched_begin(sc, t));
    st = chain_step(n, ch, train, out);
    /* a step that began ends (its error stands) */
    saga_status end = saga_sched_end(sc, t);
    st = st < 0 ? st : end;
fail:
    return st;
}

/* With several ranks, after a training pass: the loss and the model's gradients summed over
 * the ranks. */
static saga_status reduce_train(saga_net *n, double *loss) {
    saga_status st = SAGA_OK;
    double t0 = saga_now();
    saga_comm *comm = net_ranks_comm(n);
    SAGA_TRY(saga_comm_allreduce(comm, loss, 1, SAGA_F64, SAGA_COMM_SUM, NULL));
    if (n->model) {
        if (!n->dcomm && !n->hx) {
            SAGA_TRY(saga_comm_open_device(&n->dcomm, comm, n->be));
            saga_comm_get_stats(n->dcomm, &n->dcomm_at);
        }
        SAGA_TRY(saga_comm_allreduce_grads(n->hx ? n->hx->dcomm : n->dcomm, n->model, 1.0));
    }
fail:
    *(n->hx ? &n->hx->seconds : &n->dist->seconds) += saga_now() - t0;
    return st;
}

/* Whether a pass that takes a step over the budget may be planned again (net_replan): the net
 * chose the plan itself, on one rank, under a budget. */
static bool replannable(const saga_net *n) {
    saga_backend_stats bs;
    saga_backend_get_stats(n->be, &bs);
    return !net_ranks_comm(n) && !n->pagerank && n->o.parts == 0 && n->o.exec != SAGA_EXEC_MEMORY &&
           bs.budget_bytes > 0;
}

/* The model's gradients as a training pass begins, copied into host memory the net keeps
 * (grad_keep: the device's budget is the plan's), to be put back if the pass fails. */
static saga_status keep_grads(saga_net *n) {
    saga_status st = SAGA_OK;
    SAGA_TRY(saga_backend_host_room(n->be, &n->grad_keep, &n->grad_keep_bytes,
                                    (size_t)saga_model_n_scalars(n->model) * sizeof(float) + 1));
    SAGA_TRY(saga_model_copy_grads(n->model, n->grad_keep, false));
    n->grads_kept = true;
fail:
    return st;
}

/* Puts the gradients back (a failed pass may have added part of its own). */
static saga_status unkeep_grads(saga_net *n) {
    saga_status st = SAGA_OK;
    SAGA_TRY(saga_model_copy_grads(n->model, n->grad_keep, true));
    SAGA_TRY(saga_stream_synchronize(saga_backend_default_stream(n->be)));
fail:
    return st;
}

/* After a pass failed with st: whether to run it again (at most NET_REPLANS times a call) on a
 * plan made for twice the stages' estimated work, because a step took more of the budget than
 * the plan gave it. run() has put back what the pass changed and dropped the plan. */
enum { NET_REPLANS = 8 };
static bool net_replan(saga_net *n, saga_status st, int *tries) {
    if (st != SAGA_ERR_BUDGET || !n->replan || *tries >= NET_REPLANS)
        return false;
    (*tries)++;
    n->replan = false;
    n->work_scale *= 2;
    saga_log(SAGA_LOG_WARN,
             "saga_net: a step took more device memory than planned (%s); planning again for %g "
             "times the stages' estimated work",
             saga_last_error(), n->work_scale);
    return true;
}

/* A call: invalidations, the plan, its steps, statistics. Training in memory runs on the loss
 * rows' chain, streamed on it from the stage net_chain_for chose (the parts' steps around it
 * below); an inference of chosen rows on theirs (ch, from net_chain_for), their outputs into out;
 * any other pass by parts over every row. */
static saga_status run(saga_net *n, bool train, net_chain *ch, float *out) {
    saga_status st = SAGA_OK;
    stepdesc *sd = NULL;
    int n_sd = 0;
    double t0 = saga_now();
    bool queue = false;
    saga_ctx *c = n->c;
    saga_idle_tuner *tune = NULL;
    bool rec = false, recording = false;
    uint64_t allocs_at = 0; /* the backend's allocations and the bytes staged before the issue */
    size_t staged_at = 0;
    bool again = false, stepping = false;
    saga_tape_pos mark = saga_tape_mark(c);
    uint64_t rng_at = saga_ctx_rng_counter(c);
    n->replan = false;
    n->grads_kept = false; /* this pass's, if it keeps them (a failure puts them back) */
    net_sample_release(n); /* the budget is the graph's again */
    SAGA_CHECK(!train || n->loss, SAGA_ERR_INVALID_ARG,
               "saga_net_train_step: no loss function (saga_net_set_loss)");
    /* over ranks the model's gradients are summed: without it every rank would train a model of
     * its own. Agreed at the first training pass, which every rank makes */
    saga_comm *ranks = net_ranks_comm(n);
    if (train && !n->model_agreed && ranks && saga_comm_size(ranks) > 1) {
        saga_status ok = SAGA_OK;
        if (!n->model)
            ok = saga_error(SAGA_ERR_INVALID_ARG,
                            "saga_net_train_step: over %d ranks each trains on its own rows, and "
                            "the stages' gradients must be summed over them: name their model "
                            "(saga_net_set_model), or every rank trains a model of its own",
                            saga_comm_size(ranks));
        SAGA_TRY(saga_comm_agree(ranks, ok));
        n->model_agreed = true;
    }
    /* a training pass reuses the queued one's loss memory and host gradients; other passes
     * queue behind it */
    if (train || net_ranks_comm(n))
        SAGA_TRY(net_settle(n, false));
    /* what a failed pass puts back before it may run again (net_replan) */
    again = replannable(n);
    mark = saga_tape_mark(c);
    rng_at = saga_ctx_rng_counter(c);
    if (train && again && n->model && (!n->ready || !n->proven))
        SAGA_TRY(keep_grads(n));
    SAGA_TRY(net_prepare(n, train));
    int S = n->n_stages;
    n->stats.rows_computed = 0;
    n->stats.stages = S;
    memset(n->stats.stage_rows, 0, sizeof n->stats.stage_rows);
    if (train) {
        n->loss_used = 0;
        /* a loss per part this rank runs, and one for a chain */
        const size_t losses = (size_t)(n->plan.d_hi - n->plan.d_lo + 1);
        SAGA_TRY(saga_backend_host_room(n->be, (void **)&n->loss_host, &n->loss_bytes,
                                        losses * sizeof(float)));
        SAGA_TRY(net_chain_for(n, true, NULL, 0, &ch));
    }
    saga_backend_reset_stats(n->be);
    saga_sched_reset_stats(n->sched);
    if (n->dist) {
        n->dist->seconds = 0;
        n->dist->rows_moved = 0;
        net_dist_reset(n);
    }
    if (n->hx) {
        n->hx->seconds = 0;
        n->hx->rows_moved = 0;
    }
    if (net_ranks_comm(n)) {
        saga_comm_get_stats(net_ranks_comm(n), &n->comm_at);
        if (n->dcomm)
            saga_comm_get_stats(n->dcomm, &n->dcomm_at);
        if (n->hx)
            saga_comm_get_stats(n->hx->dcomm, &n->dcomm_at);
    }
    /* host content that changed since the last call */
    if (n->x_changed && n->sparse)
        net_sparse_fill(n);
    if (n->x_changed && n->x16) /* no copy reads it: the last pass has been waited for */
        saga_f32_to_half_n(n->x, (int64_t)n->n * n->in_cols, n->plan.transfer == SAGA_TRANSFER_BF16,
                           n->x16);
    for (int32_t d = n->plan.d_lo; d < n->plan.d_hi; d++) {
        if (n->x_changed) {
            net_block_input_changed(&n->plan.blk[d], n->sparse ? NULL : n->act[0][d]);
            if (n->halo[0][d] && !n->sparse)
                saga_blk_host_changed(n->halo[0][d]);
        }
        for (int s = 1; s <= S; s++) {
            if (n->plan.k > 1 && n->halo[s][d] && !resident(n, s))
                saga_blk_host_changed(n->halo[s][d]);
            if (train && n->ghalo[s][d])
                saga_blk_host_changed(n->grad[s][d]);
        }
    }
    /* a streamed chain after the parts' stages reads the rows they write in this pass; a sliced
     * one's stages read the rows of the stages before, and the last writes the pass's output */
    net_chain *tc = ch && ch->streamed && (ch->whole_below > 0 || ch->slices) ? ch : NULL;
    if (tc && !tc->slices && !tc->head && tc->in->b_xrows)
        saga_blk_host_changed(tc->in->b_xrows);
    for (int32_t j = 0; tc && j < tc->n_slices; j++) {
        net_slice *sl = &tc->slices[j];
        if (sl->b_in && !sl->whole)
            saga_blk_host_changed(sl->b_in);
        if (sl->b_gout)
            saga_blk_host_changed(sl->b_gout);
        if (sl->s == S - 1 && !train)
            saga_blk_set_host(sl->b_out, out + (int64_t)sl->lo * n->stages[S - 1].out_cols);
    }
    for (int s = 0; train && tc && tc->gout_host && s < S - 1; s++)
        if (tc->gout_host[s]) /* the slices above add into it (no copy reads it now) */
            memset(tc->gout_host[s], 0,
                   (size_t)tc->d.n_rows[s] * (size_t)n->stages[s].out_cols * sizeof(float));
    if (n->x_changed) {
        if (n->plan.tchain)
            net_chain_input_changed(n, n->plan.tchain);
        if (n->plan.echain)
            net_chain_input_changed(n, n->plan.echain);
    }
    n->x_changed = false;
    if (train)
        for (int s = 1; s <= S; s++)
            if (n->plan.k > 1 && n->ghalo[s][n->plan.d_lo])
                memset(n->grad_host[s], 0,
                       (size_t)n->n * (size_t)n->stages[s - 1].out_cols * sizeof(float));
    saga_ctx_train(c, train);
    /* a pass like the last of its kind, which allocated nothing, is recorded as a graph */
    rec = n->o.graphs && n->steady[train] && n->steady_ch[train] == (ch ? ch->serial : 0) &&
          !net_ranks_comm(n) && !n->plan.streamed && saga_backend_can_capture(n->be);
    if (n->o.graphs) {
        allocs_at = backend_allocs(n->be);
        staged_at = saga_ctx_staged_bytes(c);
    }
    if (rec) {
        SAGA_TRY(saga_ctx_record_begin(c, 2 * n->staged[train] + 4096));
        st = saga_backend_capture_begin(n->be);
        if (st < 0) {
            (void)saga_ctx_record_end(c, false);
            goto fail;
        }
        recording = true;
    }
    stepping = true;
    if (ch && !tc)
        SAGA_TRY(run_chain(n, ch, train, out));
    else
        SAGA_TRY(plan(n, train, tc, &sd, &n_sd));
    uint64_t rng_after = saga_ctx_rng_counter(c);
    /* one kind of pass decides: training once the net trains (its inference passes, an
     * evaluation between epochs, run under what training chose, for a change of state at each
     * pass's start costs more than it saves) */
    tune = n->plan.streamed && !n->dist && (train || n->tune[1].reps == 0) ? &n->tune[train] : NULL;
    if (tune)
        saga_idle_tuner_begin(tune, n->be);
    for (int t = 0; t < n_sd; t++) {
        const bool fwd = sd[t].ph == PH_FWD || sd[t].ph == PH_SLICE;
        if (!fwd && (t == 0 || sd[t - 1].ph == PH_FWD || sd[t - 1].ph == PH_SLICE))
            rng_after = saga_ctx_rng_counter(c); /* where the forward pass left the counter */
        if (sd[t].x != XCHG_NONE) {
            /* the write-backs (and the halo gradients added on the host) have landed */
            SAGA_TRY(net_dist_wait(n));
            SAGA_TRY(saga_sched_finish(n->sched));
            int s = sd[t].s;
            if (sd[t].x == XCHG_ROWS)
                SAGA_TRY(net_dist_rows_start(n, s, n->act_host[s], n->stages[s].in_cols));
            else
                SAGA_TRY(net_dist_grads(n, n->grad_host[s + 1], n->stages[s].out_cols));
        }
        SAGA_TRY(saga_sched_begin(n->sched, t));
        if (sd[t].ph == PH_FWD) {
            const nblock *b = part_block(n, sd[t].s, sd[t].d, train);
            rows_done(n, sd[t].s, b->v1 - b->v0);
        }
        if (sd[t].ph == PH_FWD)
            SAGA_TRY(run_fwd(n, sd[t].s, sd[t].d, train, sd[t].first));
        else if (sd[t].ph == PH_LOSS)
            SAGA_TRY(run_loss(n, sd[t].d));
        else if (sd[t].ph == PH_CHAIN)
            SAGA_TRY(chain_step(n, tc, train, out));
        else if (sd[t].ph == PH_SLICE)
            SAGA_TRY(slice_step(n, &tc->slices[sd[t].d], train, sd[t].first));
        else if (sd[t].ph == PH_SLAST || sd[t].ph == PH_SBWD)
            SAGA_TRY(slice_train_step(n, &tc->slices[sd[t].d], sd[t].ph == PH_SLAST, sd[t].first));
        else
            SAGA_TRY(run_bwd(n, sd[t].s, sd[t].d));
        SAGA_TRY(saga_sched_end(n->sched, t));
        if (sd[t].ph == PH_CHAIN || sd[t].ph == PH_SLAST)
            rng_after = saga_ctx_rng_counter(c); /* its stages end the forward pass */
    }
    if (train)
        saga_ctx_set_rng_counter(c, rng_after);
    if (recording) {
        recording = false;
        st = saga_backend_capture_end(n->be, &n->replay[train]);
        if (st == SAGA_OK)
            st = saga_replay_launch(n->replay[train]);
        saga_status st2 = saga_ctx_record_end(c, st == SAGA_OK);
        SAGA_TRY(st < 0 ? st : st2);
    }
    /* A training pass on one rank is queued, its end waited for later (net_settle); so is an
     * inference of chosen rows in memory on one rank that saga_net_forward_rows_queue asked for
     * (its end waited for by saga_net_forward_rows_take). In memory their ends are events after
     * them, so that a wait for one leaves the passes queued after it running. Any other pass
     * waits here, once, for the whole device, which ends a queued training pass too. */
    const bool rows_later = !train && n->rows_queue_req && !n->plan.streamed && !net_ranks_comm(n);
    queue = (train && !net_ranks_comm(n)) || rows_later;
    if (queue && (rows_later || !n->plan.streamed)) {
        saga_event **ev = train ? &n->train_ev : &n->rows_ev;
        if (!*ev)
            SAGA_TRY(saga_event_new(ev, n->be));
        SAGA_TRY(saga_event_record(*ev, saga_backend_default_stream(n->be)));
    }
    if (rows_later) {
        n->rows_queued = true;
        n->issued_since = n->queued; /* the training pass before it keeps its own figures */
    }
    if (!queue) {
        SAGA_TRY(saga_sched_finish_device(n->sched)); /* the pass's one wait */
        SAGA_TRY(net_settle(n, true));
    }
    if (tune)
        saga_idle_tuner_end(tune, train ? "net: training passes" : "net: inference passes");
    SAGA_TRY(net_dist_wait(n));
    if (net_ranks_comm(n) && train) {
        double loss = net_losses_sum(n);
        SAGA_TRY(reduce_train(n, &loss));
        n->train_loss = loss;
    }
fail:
    if (recording) { /* nothing of it ran */
        (void)saga_backend_capture_end(n->be, NULL);
        (void)saga_ctx_record_end(c, false);
    }
    if (st < 0 && n->sched)
        (void)saga_sched_finish(n->sched);
    if (st < 0)
        (void)net_dist_wait(n);
    if (st < 0 && !net_ranks_comm(n)) {
        /* on one rank the net is left as before the pass: its tape, the context's error, the
         * dropout counter and the gradients put back, the plan dropped (the next pass prepares
         * again); a step over the budget on a plan the net chose may then run again */
        saga_tape_release_failed(c, mark);
        saga_ctx_set_rng_counter(c, rng_at);
        const bool restored = n->grads_kept && unkeep_grads(n) == SAGA_OK;
        n->replan = st == SAGA_ERR_BUDGET && stepping && again && (!train || restored);
        net_unprepare(n);
    }
    st = net_dist_failed(n, st);
    saga_free(sd);
    if (n->o.graphs) { /* whether the next pass of this kind may be recorded */
        n->steady[train] = st == SAGA_OK && backend_allocs(n->be) == allocs_at;
        n->steady_ch[train] = ch ? ch->serial : 0;
        n->staged[train] = saga_ctx_staged_bytes(c) - staged_at;
    }
    net_collect_stats(n, t0);
    n->stats.graph = rec && st == SAGA_OK;
    n->stats.h2d_floor_bytes = train              ? n->plan.floor_train_bytes
                               : ch && ch->slices ? ch->floor_bytes
                                                  : n->plan.floor_pass_bytes;
    if (train && st == SAGA_OK) {
        n->queued = queue;
        n->queued_t0 = t0;
        n->train_ev_ok = queue && !n->plan.streamed;
        n->issued_since = false;
        n->train_stats = n->stats;
        n->proven = true; /* the next passes take the same steps */
    }
    return st;
}

/* Over shards: every local row through the chain of every row, into out (n x C). */
static saga_status forward_every(saga_net *n, float *out) {
    saga_status st = SAGA_OK;
    net_chain *ch = NULL;
    const int64_t C = n->stages[n->n_stages - 1].out_cols;
    SAGA_TRY(net_prepare(n, false));
    SAGA_TRY(net_chain_for(n, false, NULL, 0, &ch));
    /* the own rows (the local graph's first), or every local row where the demand widened */
    SAGA_CHECK(ch && (ch->n_out == n->hx->n_own || ch->n_out == n->n), SAGA_ERR_INTERNAL,
               "saga_net: no chain of the own rows over shards");
    SAGA_TRY(saga_backend_host_room(n->be, (void **)&n->rows_out, &n->rows_out_bytes,
                                    (size_t)n->n * (size_t)C * sizeof(float) + 1));
    SAGA_TRY(run(n, false, ch, n->rows_out));
    if (out) { /* the own rows; the halo's are the owners' to compute */
        const size_t own = (size_t)n->hx->n_own * (size_t)C;
        memcpy(out, n->rows_out, own * sizeof(float));
        memset(out + own, 0, ((size_t)n->n * (size_t)C - own) * sizeof(float));
    }
fail:
    return st;
}

saga_status saga_net_forward(saga_net *n, float *out) {
    saga_status st = SAGA_OK;
    int tries = 0;
    SAGA_CHECK(n, SAGA_ERR_INVALID_ARG, "saga_net_forward: net is NULL");
    if (n->hx)
        return net_dist_failed(n, forward_every(n, out));
    do
        st = run(n, false, NULL, NULL);
    while (net_replan(n, st, &tries));
    SAGA_TRY(st);
    if (n->dist) {
        /* every rank's rows to every rank */
        double t0 = saga_now();
        int64_t C = n->stages[n->n_stages - 1].out_cols;
        SAGA_TRY(net_dist_gather(n, n->act_host[n->n_stages], (size_t)C * sizeof(float)));
        saga_comm_stats cs;
        saga_comm_get_stats(n->o.comm, &cs);
        n->stats.comm_sent_bytes = cs.sent_bytes - n->comm_at.sent_bytes;
        n->stats.comm_recv_bytes = cs.recv_bytes - n->comm_at.recv_bytes;
        n->stats.comm_seconds += saga_now() - t0;
    }
    if (out) {
        int S = n->n_stages;
        int64_t C = n->stages[S - 1].out_cols;
        const float *y = n->act_host[S];
        if (n->plan.ids)
            for (int32_t v = 0; v < n->n; v++)
                memcpy(out + (int64_t)n->plan.ids[v] * C, y + (int64_t)v * C,
                       (size_t)C * sizeof(float));
        else
            memcpy(out, y, (size_t)n->n * (size_t)C * sizeof(float));
    }
fail:
    return net_dist_failed(n, st);
}

/* The pass of an inference of chosen rows (saga_net_forward_rows), queued when asked (queue) and
 * the net can, else waited for; vertices[i]'s output is then row rows_pos[i] of rows_out. */
static saga_status rows_pass(saga_net *n, const int32_t *vertices, int64_t count, bool queue,
                             const char *who) {
    saga_status st = SAGA_OK;
    int32_t *want = NULL;
    float *y = NULL;
    int tries = 0;
    SAGA_CHECK(n && count >= 0 && (vertices || count == 0), SAGA_ERR_INVALID_ARG,
               "%s: net and vertices must be given", who);
    SAGA_CHECK(n->n_stages > 0, SAGA_ERR_INVALID_ARG, "%s: the net has no stages", who);
    for (int64_t i = 0; i < count; i++)
        SAGA_CHECK(vertices[i] >= 0 && vertices[i] < n->n, SAGA_ERR_INVALID_ARG,
                   "%s: vertex %d (entry %lld) is outside 0..%d", who, (int)vertices[i],
                   (long long)i, (int)n->n - 1);
    /* an earlier queued pass ends first (the memory its rows come back into is reused); its rows
     * are dropped */
    SAGA_TRY(net_rows_settle(n));
    n->rows_ready = false;
    saga_free(n->rows_pos);
    n->rows_pos = NULL;
    SAGA_TRY(saga_alloc_array((void **)&n->rows_pos, count ? (size_t)count : 1, sizeof *n->rows_pos,
                              who));
    n->rows_count = count;
    const int64_t C = n->stages[n->n_stages - 1].out_cols;
again: /* a pass planned again (net_replan) has new parts */
    saga_free(want);
    want = NULL;
    SAGA_TRY(net_prepare(n, false));
    /* the rows in the net's order (the parts renumber a streamed net's), distinct, increasing */
    const int32_t *inv = n->plan.part ? n->plan.part->inverse : NULL;
    SAGA_TRY(saga_alloc_array((void **)&want, count ? (size_t)count : 1, sizeof *want, who));
    for (int64_t i = 0; i < count; i++)
        want[i] = inv ? inv[vertices[i]] : vertices[i];
    qsort(want, (size_t)count, sizeof *want, net_cmp_i32);
    int32_t R = 0;
    for (int64_t i = 0; i < count; i++)
        if (R == 0 || want[i] != want[R - 1])
            want[R++] = want[i];
    net_chain *ch = NULL;
    SAGA_TRY(net_chain_for(n, false, want, R, &ch));
    if (!ch || ch->whole_below == n->n_stages) {
        /* every row runs (and is waited for); the rows asked for are picked */
        SAGA_TRY(saga_alloc_array((void **)&y, (size_t)n->n * (size_t)C + 1, sizeof(float), who));
        SAGA_TRY(saga_net_forward(n, y));
        SAGA_TRY(saga_backend_host_room(n->be, (void **)&n->rows_out, &n->rows_out_bytes,
                                        (size_t)count * (size_t)C * sizeof(float) + 1));
        for (int64_t i = 0; i < count; i++) {
            memcpy(n->rows_out + i * C, y + (int64_t)vertices[i] * C, (size_t)C * sizeof(float));
            n->rows_pos[i] = i;
        }
        n->rows_ready = true;
        goto fail;
    }
    /* the chain's outputs come back into pinned memory the net keeps (a copy into the caller's
     * pageable memory would wait for the device), read after the pass's wait: the rows asked
     * for, in want's order, or every row in the net's order where the chain's last stage runs
     * them all (its demand is nearly every row) */
    const bool every = ch->n_out != R;
    SAGA_CHECK(!every || ch->n_out == n->n, SAGA_ERR_INTERNAL,
               "%s: the chain returns %d rows for %d asked", who, (int)ch->n_out, (int)R);
    SAGA_TRY(saga_backend_host_room(n->be, (void **)&n->rows_out, &n->rows_out_bytes,
                                    (size_t)ch->n_out * (size_t)C * sizeof(float) + 1));
    n->rows_queue_req = queue;
    st = run(n, false, ch, n->rows_out);
    n->rows_queue_req = false;
    if (net_replan(n, st, &tries))
        goto again;
    SAGA_TRY(st);
    for (int64_t i = 0; i < count; i++) {
        const int32_t r = inv ? inv[vertices[i]] : vertices[i];
        const int32_t *at = every ? NULL : bsearch(&r, want, (size_t)R, sizeof *want, net_cmp_i32);
        n->rows_pos[i] = every ? r : at - want;
    }
    n->rows_ready = true;
fail:
    saga_free(want);
    saga_free(y);
    return st;
}

saga_status saga_net_forward_rows_take(saga_net *n, float *out) {
    saga_status st = SAGA_OK;
    SAGA_CHECK(n && n->rows_ready, SAGA_ERR_INVALID_ARG,
               "saga_net_forward_rows_take: no rows queued (saga_net_forward_rows_queue)");
    SAGA_CHECK(out || n->rows_count == 0, SAGA_ERR_INVALID_ARG,
               "saga_net_forward_rows_take: out must be given");
    SAGA_TRY(net_rows_settle(n));
    const int64_t C = n->stages[n->n_stages - 1].out_cols;
    for (int64_t i = 0; i < n->rows_count; i++)
        memcpy(out + i * C, n->rows_out + n->rows_pos[i] * C, (size_t)C * sizeof(float));
    n->rows_ready = false;
fail:
    return st;
}

saga_status saga_net_forward_rows_queue(saga_net *n, const int32_t *vertices, int64_t count) {
    return net_dist_failed(n, rows_pass(n, vertices, count, true, "saga_net_forward_rows_queue"));
}

saga_status saga_net_forward_rows(saga_net *n, const int32_t *vertices, int64_t count, float *out) {
    saga_status st = SAGA_OK;
    SAGA_CHECK(out || count == 0, SAGA_ERR_INVALID_ARG,
               "saga_net_forward_rows: net, vertices and out must be given");
    SAGA_TRY(rows_pass(n, vertices, count, false, "saga_net_forward_rows"));
    SAGA_TRY(saga_net_forward_rows_take(n, out));
fail:
    return net_dist_failed(n, st);
}

saga_status saga_net_train_queue(saga_net *n) {
    saga_status st = SAGA_OK;
    int tries = 0;
    SAGA_CHECK(n, SAGA_ERR_INVALID_ARG, "saga_net_train_queue: net is NULL");
    do
        st = run(n, true, NULL, NULL);
    while (net_replan(n, st, &tries));
fail:
    return st;
}

saga_status saga_net_train_result(saga_net *n, double *loss, saga_net_stats *stats) {
    saga_status st = SAGA_OK;
    SAGA_CHECK(n, SAGA_ERR_INVALID_ARG, "saga_net_train_result: net is NULL");
    SAGA_TRY(net_settle(n, false));
    if (loss)
        *loss = n->train_loss;
    if (stats)
        *stats = n->train_stats;
fail:
    return net_dist_failed(n, st);
}

saga_status saga_net_train_step(saga_net *n, double *loss) {
    saga_status st = SAGA_OK;
    SAGA_CHECK(n, SAGA_ERR_INVALID_ARG, "saga_net_train_step: net is NULL");
    SAGA_TRY(saga_net_train_queue(n));
    SAGA_TRY(saga_net_train_result(n, loss, NULL));
fail:
    return st;
}
