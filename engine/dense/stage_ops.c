/* stage_ops.c - what a stage of the tiled MLP runs, shared by its construction (mlp.c) and its
 * pipeline (pipeline.c): the stage's host arrays, its plan of steps in the 1F1B order, each step
 * recorded with the blocks it uses in the block scheduler's plan, and the forward and backward
 * pass of one tile. See saga_dense.h. */
#include "dense_impl.h"

#include <string.h>

bool dense_two_bw(const saga_mlp *m) {
    return m->p.pipe == SAGA_DENSE_PIPE_2BW;
}

/* ---- host arrays -------------------------------------------------------------------------- */

saga_status dense_host_array(stage *sg, float **out, size_t n) {
    saga_status st = SAGA_OK;
    void *p = NULL;
    *out = NULL;
    if (n == 0) /* a stage of one layer between two others keeps no activation of its own */
        return SAGA_OK;
    SAGA_TRY(saga_backend_host_alloc(sg->be, &p, n * sizeof(float)));
    memset(p, 0, n * sizeof(float));
    sg->host_bytes += n * sizeof(float);
    *out = p;
fail:
    return st;
}

/* ---- the plan of a stage ------------------------------------------------------------------ */

/* One micro-batch's forward or backward pass through the stage, tile by tile. */
static saga_status push_pass(stage *sg, uint8_t kind, int32_t g) {
    saga_status st = SAGA_OK;
    const saga_mlp *m = sg->m;
    for (int32_t i = sg->l0; i < sg->l1; i++) {
        int32_t l = kind == OP_FWD ? i : sg->l1 - 1 - (i - sg->l0);
        for (int32_t j = 0; j < m->layers[l].n_tiles; j++) {
            if (sg->n_ops == sg->cap_ops) {
                int32_t cap = sg->cap_ops ? 2 * sg->cap_ops : 64;
                SAGA_TRY(saga_realloc_array((void **)&sg->ops, (size_t)cap, sizeof *sg->ops,
                                            "dense plan"));
                sg->cap_ops = cap;
            }
            sg->ops[sg->n_ops++] = (op){kind, g, l, j};
        }
    }
fail:
    return st;
}

/* The 1F1B order of n micro-batches at a stage: as many forward passes ahead as stages follow
 * it, then one forward and one backward in turn, then the remaining backward passes. */
saga_status dense_make_ops(stage *sg, int32_t n) {
    saga_status st = SAGA_OK;
    int32_t w = sg->m->S - 1 - sg->idx;
    w = w < n ? w : n;
    sg->n_ops = 0;
    for (int32_t g = 0; g < w; g++)
        SAGA_TRY(push_pass(sg, OP_FWD, g));
    for (int32_t i = 0; i < n - w; i++) {
        SAGA_TRY(push_pass(sg, OP_FWD, w + i));
        SAGA_TRY(push_pass(sg, OP_BWD, i));
    }
    for (int32_t g = n - w; g < n; g++)
        SAGA_TRY(push_pass(sg, OP_BWD, g));
fail:
    return st;
}

saga_blk *dense_h(const stage *sg, int32_t g, int32_t l) {
    return *dense_slot(sg, sg->h, g % sg->m->R, l);
}

saga_blk *dense_d(const stage *sg, int32_t g, int32_t l) {
    return *dense_slot(sg, sg->d, g % sg->m->R, l);
}

/* The training step (counted over the network's life) micro-batch g of the call belongs to. */
static int64_t batch_of(const saga_mlp *m, int32_t g) {
    return m->step + g / m->p.n_micro;
}

/* The weight version a step's micro-batches run on: the only one, or with 2BW the one before
 * the newest (version b - 1 for step b, in slot (b - 1) & 1; step 0 runs on version 0). */
static int32_t version_used(const saga_mlp *m, int64_t b) {
    return dense_two_bw(m) && b > 0 ? (int32_t)((b - 1) & 1) : 0;
}

static bool g_first(const saga_mlp *m, const op *o) {
    return o->g % m->p.n_micro == 0;
}

static bool last_micro(const saga_mlp *m, int32_t g) {
    return g % m->p.n_micro == m->p.n_micro - 1;
}

/* Whether op's backward step updates its tile: every micro-batch folds into the moments with
 * ADAMA; the last one applies the summed gradient with ADAM. */
static bool touches_moments(const saga_mlp *m, const op *o) {
    return m->p.optim == SAGA_DENSE_ADAMA || last_micro(m, o->g);
}

void dense_record(stage *sg, const op *o) {
    const saga_mlp *m = sg->m;
    saga_sched *s = sg->s;
    int t = saga_sched_step(s);
    const layer *y = &m->layers[o->l];
    const tile *tl = &y->tiles[o->j];
    bool first = o->j == 0, last = o->j == y->n_tiles - 1, top = o->l == m->L - 1;
    int64_t b = batch_of(m, o->g);
    int32_t vu = version_used(m, b);
    if (o->kind == OP_FWD) {
        saga_sched_use(s, t, dense_h(sg, o->g, o->l), SAGA_USE_READ, 0);
        saga_sched_use(s, t, tl->p[vu], SAGA_USE_READ, 0);
        unsigned out = 0;
        if (last && top)
            out = SAGA_USE_DISCARD; /* only the loss reads the network's output */
        else if (last && o->l == sg->l1 - 1)
            out = SAGA_USE_WRITEBACK; /* to the next stage */
        saga_sched_use(s, t, dense_h(sg, o->g, o->l + 1), first ? SAGA_USE_WRITE : SAGA_USE_RW,
                       out);
        if (top && last) {
            saga_sched_use(s, t, sg->t[o->g % m->R], SAGA_USE_READ, SAGA_USE_DISCARD);
            saga_sched_use(s, t, dense_d(sg, o->g, m->L), SAGA_USE_WRITE, 0);
        }
        return;
    }
    bool update = touches_moments(m, o), last_k = last_micro(m, o->g);
    /* streamed, a changed tile is most likely evicted before its next use: its copy back starts
     * on the copy stream as soon as the step ends, instead of when room is needed, where the
     * compute would wait for it */
    unsigned wb = sg->streamed ? SAGA_USE_WRITEBACK : 0;
    saga_sched_use(s, t, dense_d(sg, o->g, o->l + 1), first && !top ? SAGA_USE_RW : SAGA_USE_READ,
                   last ? SAGA_USE_DISCARD : 0);
    if (first && !top) /* relu's backward: its last use */
        saga_sched_use(s, t, dense_h(sg, o->g, o->l + 1), SAGA_USE_READ, SAGA_USE_DISCARD);
    saga_sched_use(s, t, dense_h(sg, o->g, o->l), SAGA_USE_READ,
                   last && o->l == sg->l0 ? SAGA_USE_DISCARD : 0);
    if (tl->n_b)
        saga_sched_use(s, t, sg->ones, SAGA_USE_READ, 0);
    if (m->p.optim == SAGA_DENSE_ADAM)
        saga_sched_use(s, t, tl->g, g_first(m, o) ? SAGA_USE_WRITE : SAGA_USE_RW,
                       last_k ? SAGA_USE_DISCARD : wb);
    else
        saga_sched_use(s, t, tl->g, SAGA_USE_WRITE, SAGA_USE_DISCARD);
    if (!dense_two_bw(m)) {
        /* the weights change once per step, in the last micro-batch's pass */
        saga_sched_use(s, t, tl->p[0], last_k ? SAGA_USE_RW : SAGA_USE_READ, last_k ? wb : 0);
    } else {
        saga_sched_use(s, t, tl->p[vu], SAGA_USE_READ, 0);
        if (last_k) { /* version b + 1 = version b, updated; it takes version b - 1's slot */
            saga_sched_use(s, t, tl->p[b & 1], SAGA_USE_READ, 0);
            saga_sched_use(s, t, tl->p[(b + 1) & 1], SAGA_USE_WRITE, wb);
        }
    }
    if (update) {
        saga_sched_use(s, t, tl->m, SAGA_USE_RW, wb);
        saga_sched_use(s, t, tl->v, SAGA_USE_RW, wb);
    }
    if (o->l > 0) {
        unsigned out = last && o->l == sg->l0 ? SAGA_USE_WRITEBACK | SAGA_USE_DISCARD : 0;
        saga_sched_use(s, t, dense_d(sg, o->g, o->l), first ? SAGA_USE_WRITE : SAGA_USE_RW, out);
    }
}

/* ---- the passes of a tile ----------------------------------------------------------------- */

static float *dev(const saga_blk *b) {
    return (float *)saga_blk_dev(b);
}

/* The forward pass of one tile: its columns of the output, or its partial product. */
saga_status dense_run_fwd(stage *sg, const op *o) {
    saga_status st = SAGA_OK;
    saga_mlp *m = sg->m;
    const saga_kernels *kk = sg->be->kernels;
    saga_stream *s = saga_backend_default_stream(sg->be);
    const layer *y = &m->layers[o->l];
    const tile *tl = &y->tiles[o->j];
    int64_t mb = m->mb;
    const float *x = dev(dense_h(sg, o->g, o->l)),
                *P = dev(tl->p[version_used(m, batch_of(m, o->g))]);
    float *z = dev(dense_h(sg, o->g, o->l + 1));
    if (m->p.split == SAGA_DENSE_SPLIT_COLS) {
        /* z[:, cols] = b[cols] broadcast (a source leading dimension of 0), then += x W[:, cols] */
        SAGA_TRY(kk->copy2d_f32(s, mb, tl->n, P + tl->n_w, 0, z + tl->off, y->out, false));
        SAGA_TRY(kk->gemm_f32(s, false, false, mb, tl->n, y->in, 1.0f, x, y->in, P, tl->n, 1.0f,
                              z + tl->off, y->out));
    } else {
        if (o->j == 0)
            SAGA_TRY(kk->copy2d_f32(s, mb, y->out, P + tl->n_w, 0, z, y->out, false));
        SAGA_TRY(kk->gemm_f32(s, false, false, mb, y->out, tl->n, 1.0f, x + tl->off, y->in, P,
                              y->out, 1.0f, z, y->out));
    }
    if (o->j == y->n_tiles - 1) {
        if (o->l < m->L - 1) {
            SAGA_TRY(kk->act_f32(s, SAGA_ACT_RELU, mb * y->out, 0.0f, z, z));
        } else {
            /* the loss: mean over the batch's rows and outputs of (z - target)^2 */
            int64_t n = mb * y->out;
            float *dz = dev(dense_d(sg, o->g, m->L));
            SAGA_TRY(kk->binary_f32(s, SAGA_BINOP_SUB, n, z, dev(sg->t[o->g % m->R]), dz));
            SAGA_TRY(kk->sumsq_pinned_f32(s, n, dz, &m->loss_parts[o->g])); /* read at the end */
            double denom = (double)m->p.batch * (double)y->out;
            SAGA_TRY(kk->scale_f32(s, n, (float)(2.0 / denom), dz, 0.0f, dz));
        }
    }
fail:
    return st;
}

/* The backward pass of one tile: its gradient, its share of the input's gradient, and the
 * optimizer when this micro-batch is the one that updates it. */
saga_status dense_run_bwd(stage *sg, const op *o) {
    saga_status st = SAGA_OK;
    saga_mlp *m = sg->m;
    const saga_kernels *kk = sg->be->kernels;
    saga_stream *s = saga_backend_default_stream(sg->be);
    const layer *y = &m->layers[o->l];
    const tile *tl = &y->tiles[o->j];
    int64_t mb = m->mb, b = batch_of(m, o->g);
    bool adam = m->p.optim == SAGA_DENSE_ADAM, top = o->l == m->L - 1;
    float *dz = dev(dense_d(sg, o->g, o->l + 1));
    const float *x = dev(dense_h(sg, o->g, o->l));
    const float *P = dev(tl->p[version_used(m, b)]);
    float *G = dev(tl->g);
    float *dx = o->l > 0 ? dev(dense_d(sg, o->g, o->l)) : NULL;
    float beta_g = adam && !g_first(m, o) ? 1.0f : 0.0f;
    if (o->j == 0 && !top)
        SAGA_TRY(kk->act_bwd_f32(s, SAGA_ACT_RELU, mb * y->out, 0.0f, NULL,
                                 dev(dense_h(sg, o->g, o->l + 1)), dz, dz));
    if (m->p.split == SAGA_DENSE_SPLIT_COLS) {
        const float *dzc = dz + tl->off; /* this tile's columns, leading dimension out */
        /* dW[:, cols] (+)= x^T dz[:, cols]; db[cols] (+)= 1^T dz[:, cols] */
        SAGA_TRY(kk->gemm_f32(s, true, false, y->in, tl->n, mb, 1.0f, x, y->in, dzc, y->out, beta_g,
                              G, tl->n));
        SAGA_TRY(kk->gemm_f32(s, true, false, 1, tl->n, mb, 1.0f, dev(sg->ones), 1, dzc, y->out,
                              beta_g, G + tl->n_w, tl->n));
        /* dx (+)= dz[:, cols] W[:, cols]^T, summed over the tiles */
        if (dx)
            SAGA_TRY(kk->gemm_f32(s, false, true, mb, y->in, tl->n, 1.0f, dzc, y->out, P, tl->n,
                                  o->j > 0 ? 1.0f : 0.0f, dx, y->in));
    } else {
        /* dW[rows, :] (+)= x[:, rows]^T dz; db (+)= 1^T dz in tile 0 */
        SAGA_TRY(kk->gemm_f32(s, true, false, tl->n, y->out, mb, 1.0f, x + tl->off, y->in, dz,
                              y->out, beta_g, G, y->out));
        if (tl->n_b)
            SAGA_TRY(kk->gemm_f32(s, true, false, 1, y->out, mb, 1.0f, dev(sg->ones), 1, dz, y->out,
                                  beta_g, G + tl->n_w, y->out));
        /* dx[:, rows] = dz W[rows, :]^T */
        if (dx)
            SAGA_TRY(kk->gemm_f32(s, false, true, mb, tl->n, y->out, 1.0f, dz, y->out, P, y->out,
                                  0.0f, dx + tl->off, y->in));
    }
    if (!touches_moments(m, o))
        return SAGA_OK; /* the summed gradient waits for the next micro-batch */
    int64_t n = tl->n_w + tl->n_b;
    float b1 = m->p.beta1, b2 = m->p.beta2, *M = dev(tl->m), *V = dev(tl->v);
    if (!adam && !last_micro(m, o->g)) {
        /* AdamA's fold: adam_f32 below scales m by b1 and v by b2 once, after the last share is
         * in, so the earlier shares go in divided by them: m += (1 - b1) / b1 c,
         * v += (1 - b2) / b2 c^2, and the gradient tile is free when the step ends */
        SAGA_TRY(kk->scale_f32(s, n, (1.0f - b1) / b1, G, 1.0f, M));
        SAGA_TRY(kk->binary_f32(s, SAGA_BINOP_MUL, n, G, G, G));
        SAGA_TRY(kk->scale_f32(s, n, (1.0f - b2) / b2, G, 1.0f, V));
        return SAGA_OK;
    }
    float *W = dev(tl->p[0]);
    if (dense_two_bw(m)) {
        /* version b + 1 starts as a copy of version b, in the slot of version b - 1, whose
         * last reader (this micro-batch's products above) was issued before */
        W = dev(tl->p[(b + 1) & 1]);
        SAGA_TRY(kk->copy2d_f32(s, 1, n, dev(tl->p[b & 1]), n, W, n, false));
    }
    SAGA_TRY(kk->adam_f32(s, n, m->p.lr, b1, b2, m->p.eps, 0.0f, false, b + 1, W, G, M, V));
fail:
    return st;
}
