/* mlp.c - an MLP whose weight matrices are cut into row or column tiles (one operator
 * partitioned, as in Tofu), each tile with its gradient and Adam moments a block of the block
 * scheduler (sched_impl.h), streamed through the device under a byte cap: the planner that
 * chooses the tiles, the layers and activations of a stage, the network's construction and what
 * reads it back. A stage's steps and the passes of one tile are in stage_ops.c; the stages of a
 * pipeline run in pipeline.c. See saga_dense.h. */
#include "dense_impl.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

saga_mlp_params saga_mlp_params_defaults(void) {
    return (saga_mlp_params){.n_layers = 1,
                             .widths = NULL,
                             .batch = 1,
                             .n_micro = 1,
                             .split = SAGA_DENSE_SPLIT_COLS,
                             .optim = SAGA_DENSE_ADAM,
                             .lr = 1e-3f,
                             .beta1 = 0.9f,
                             .beta2 = 0.999f,
                             .eps = 1e-8f,
                             .device_bytes = 0,
                             .max_tile_units = 0,
                             .seed = 1,
                             .n_stages = 1,
                             .stage_backends = NULL,
                             .stage_layers = NULL,
                             .pipe = SAGA_DENSE_PIPE_SYNC,
                             .comm = NULL};
}

/* ---- planning ----------------------------------------------------------------------------- */

/* Parameter floats of a tile of n units of layer y (index j). */
static void tile_shape(const saga_mlp *m, const layer *y, int32_t j, int64_t n, int64_t *n_w,
                       int64_t *n_b) {
    if (m->p.split == SAGA_DENSE_SPLIT_COLS) {
        *n_w = y->in * n;
        *n_b = n;
    } else {
        *n_w = n * y->out;
        *n_b = j == 0 ? y->out : 0;
    }
}

static size_t tile_bytes_of(const saga_mlp *m, const layer *y, int64_t n) {
    int64_t n_w, n_b;
    tile_shape(m, y, 0, n, &n_w, &n_b); /* tile 0 is the largest of its size */
    return (size_t)(n_w + n_b) * sizeof(float);
}

/* Bytes of the activation blocks one step of layer l uses at most (forward or backward). */
static size_t act_step_bytes(const saga_mlp *m, int32_t l) {
    size_t mb = (size_t)m->mb, f = sizeof(float);
    size_t in = (size_t)m->widths[l], out = (size_t)m->widths[l + 1];
    size_t fwd = mb * (in + out) * f;
    if (l == m->L - 1)
        fwd += 2 * mb * out * f;               /* the targets and the loss gradient */
    size_t bwd = mb * f + mb * (in + out) * f; /* ones, h_l, d_{l+1} */
    if (l > 0)
        bwd += mb * in * f; /* d_l */
    if (l < m->L - 1)
        bwd += mb * out * f; /* h_{l+1}, for relu's backward */
    return fwd > bwd ? fwd : bwd;
}

/* Tiles per layer of a stage from its cap: every block at once when it fits, else tiles whose
 * blocks (the weights, one more version of them with 2BW, the gradient and two moments) fit
 * twice beside the step's activations, or once. */
static saga_status plan_tiles(saga_mlp *m, stage *sg) {
    saga_status st = SAGA_OK;
    size_t f = sizeof(float), act_max = 0, params = 0, max_layer = 0, widths_sum = 0;
    size_t cap = sg->cap, n_w = dense_two_bw(m) ? 2 : 1, nb = 3 + n_w;
    for (int32_t l = sg->l0; l < sg->l1; l++) {
        size_t a = act_step_bytes(m, l);
        act_max = a > act_max ? a : act_max;
        params += m->layers[l].n_params * f;
        max_layer = m->layers[l].n_params * f > max_layer ? m->layers[l].n_params * f : max_layer;
    }
    for (int32_t l = sg->l0; l <= sg->l1; l++)
        widths_sum += (size_t)m->widths[l];
    size_t grads = m->p.optim == SAGA_DENSE_ADAM ? params : max_layer;
    /* the micro-batches in flight at this stage each hold their activations and gradients */
    size_t in_flight = (size_t)(m->S - sg->idx < m->R ? m->S - sg->idx : m->R);
    size_t targets = sg->l1 == m->L ? (size_t)m->widths[m->L] : 0;
    size_t acts = in_flight * (size_t)m->mb * (2 * widths_sum + targets) * f + (size_t)m->mb * f;
    size_t footprint = (2 + n_w) * params + grads + acts;
    bool fits = cap == 0 || footprint <= cap;
    size_t avail = cap > act_max ? cap - act_max : 0;
    size_t min_cap = act_max;
    for (int32_t l = sg->l0; l < sg->l1; l++) {
        layer *y = &m->layers[l];
        int64_t units = m->p.split == SAGA_DENSE_SPLIT_COLS ? y->out : y->in;
        int64_t n = units;
        if (!fits) {
            size_t one = tile_bytes_of(m, y, 1), unit = tile_bytes_of(m, y, 2) - one;
            /* tiles take the room the largest step's activations leave */
            min_cap = act_max + nb * one > min_cap ? act_max + nb * one : min_cap;
            size_t base = one - unit; /* the bias share a row tile 0 carries */
            if (avail / (2 * nb) >= one)
                n = (int64_t)((avail / (2 * nb) - base) / unit);
            else if (avail / nb >= one)
                n = (int64_t)((avail / nb - base) / unit);
            else
                n = 0;
            n = n > units ? units : n;
        }
        if (m->p.max_tile_units > 0 && n > m->p.max_tile_units)
            n = m->p.max_tile_units;
        if (n > 0) {
            int64_t T = (units + n - 1) / n;
            y->n_tiles = (int32_t)T;
            y->units = (int32_t)((units + T - 1) / T);
            y->tile_bytes = tile_bytes_of(m, y, y->units);
        }
    }
    if (!fits) {
        for (int32_t l = sg->l0; l < sg->l1; l++)
            SAGA_CHECK(m->layers[l].n_tiles > 0, SAGA_ERR_BUDGET,
                       "dense: a cap of %zu bytes cannot hold one step of layer %d even with "
                       "tiles of one %s (the largest step's activations take %zu bytes); the "
                       "smallest cap that works is %zu bytes",
                       cap, (int)l, m->p.split == SAGA_DENSE_SPLIT_COLS ? "column" : "row", act_max,
                       min_cap);
    }
    sg->streamed = !fits;
    sg->params = params;
    sg->footprint = footprint;
    size_t step_max = 0;
    for (int32_t l = sg->l0; l < sg->l1; l++) {
        size_t sb = act_step_bytes(m, l) + nb * m->layers[l].tile_bytes;
        step_max = sb > step_max ? sb : step_max;
    }
    sg->step_bytes = step_max;
fail:
    return st;
}

/* ---- construction ------------------------------------------------------------------------- */

/* Uniform in [-bound, bound) from the generator's top 24 bits. */
static float uniform(uint64_t *state, float bound) {
    return (float)((double)(saga_splitmix64(state) >> 40) * 0x1p-24 * 2.0 - 1.0) * bound;
}

/* Address of W[r][c] (or of b[c] when r < 0) of layer y in its tiled host array a. */
static float *tiled(const saga_mlp *m, const layer *y, float *a, int64_t r, int64_t c) {
    if (m->p.split == SAGA_DENSE_SPLIT_COLS) {
        const tile *t = &y->tiles[c / y->units];
        int64_t cc = c - t->off;
        return r < 0 ? a + t->pos + t->n_w + cc : a + t->pos + r * t->n + cc;
    }
    if (r < 0)
        return a + y->tiles[0].pos + y->tiles[0].n_w + c;
    const tile *t = &y->tiles[r / y->units];
    return a + t->pos + (r - t->off) * y->out + c;
}

static saga_blk *block(stage *sg, size_t bytes, saga_blk_life life, const char *kind, void *host) {
    saga_blk *b = saga_sched_block(sg->s, bytes, life, kind);
    if (b && host)
        saga_blk_set_host(b, host);
    return b;
}

#define BLOCK(dst, ...)                                                                            \
    do {                                                                                           \
        (dst) = block(__VA_ARGS__);                                                                \
        SAGA_CHECK((dst) != NULL, SAGA_ERR_OUT_OF_MEMORY, "dense: no memory for a block");         \
    } while (0)

static saga_status make_layer(saga_mlp *m, stage *sg, int32_t l) {
    saga_status st = SAGA_OK;
    layer *y = &m->layers[l];
    bool adam = m->p.optim == SAGA_DENSE_ADAM;
    SAGA_TRY(dense_host_array(sg, &y->hp[0], y->n_params));
    if (dense_two_bw(m))
        SAGA_TRY(dense_host_array(sg, &y->hp[1], y->n_params));
    SAGA_TRY(dense_host_array(sg, &y->hm, y->n_params));
    SAGA_TRY(dense_host_array(sg, &y->hv, y->n_params));
    if (adam)
        SAGA_TRY(dense_host_array(sg, &y->hg, y->n_params));
    SAGA_TRY(
        saga_alloc_zeroed((void **)&y->tiles, (size_t)y->n_tiles, sizeof *y->tiles, "dense tiles"));
    int64_t units = m->p.split == SAGA_DENSE_SPLIT_COLS ? y->out : y->in;
    size_t pos = 0;
    for (int32_t j = 0; j < y->n_tiles; j++) {
        tile *t = &y->tiles[j];
        t->off = (int64_t)j * y->units;
        t->n = units - t->off < y->units ? units - t->off : y->units;
        tile_shape(m, y, j, t->n, &t->n_w, &t->n_b);
        t->bytes = (size_t)(t->n_w + t->n_b) * sizeof(float);
        t->pos = pos;
        pos += (size_t)(t->n_w + t->n_b);
        BLOCK(t->p[0], sg, t->bytes, SAGA_BLK_STATE, "weight tile", y->hp[0] + t->pos);
        if (dense_two_bw(m))
            BLOCK(t->p[1], sg, t->bytes, SAGA_BLK_STATE, "weight tile", y->hp[1] + t->pos);
        BLOCK(t->m, sg, t->bytes, SAGA_BLK_STATE, "first moment tile", y->hm + t->pos);
        BLOCK(t->v, sg, t->bytes, SAGA_BLK_STATE, "second moment tile", y->hv + t->pos);
        /* ADAMA's lives for one backward step only, so it never needs a host copy */
        BLOCK(t->g, sg, t->bytes, SAGA_BLK_TEMP, "gradient tile", adam ? y->hg + t->pos : NULL);
    }
    /* torch.nn.Linear's initialization, drawn in the order of W (in x out) then b, so that every
     * tiling starts from the same values */
    uint64_t state = m->p.seed * 0x100000001B3ull + (uint64_t)l;
    float bound = 1.0f / sqrtf((float)y->in);
    for (int64_t r = 0; r < y->in; r++)
        for (int64_t c = 0; c < y->out; c++)
            *tiled(m, y, y->hp[0], r, c) = uniform(&state, bound);
    for (int64_t c = 0; c < y->out; c++)
        *tiled(m, y, y->hp[0], -1, c) = uniform(&state, bound);
fail:
    return st;
}

/* Whether h_l / d_l of a stage lives in a boundary buffer (or, for h_0, the caller's batch). */
static bool at_boundary(const stage *sg, int32_t l) {
    return l == sg->l0 || (l == sg->l1 && sg->idx < sg->m->S - 1);
}

static saga_status make_activations(saga_mlp *m, stage *sg) {
    saga_status st = SAGA_OK;
    int32_t R = m->R, L = m->L, b = sg->idx;
    size_t per_r = 0, mb = (size_t)m->mb, f = sizeof(float);
    for (int32_t l = sg->l0 + 1; l <= sg->l1; l++)
        if (!at_boundary(sg, l))
            per_r += 2 * mb * (size_t)m->widths[l];
    sg->act_floats = per_r * (size_t)R;
    SAGA_TRY(dense_host_array(sg, &sg->act_host, sg->act_floats));
    SAGA_TRY(dense_host_array(sg, &sg->ones_host, mb));
    for (size_t i = 0; i < mb; i++)
        sg->ones_host[i] = 1.0f;
    size_t n = (size_t)R * (size_t)(L + 1);
    SAGA_TRY(saga_alloc_zeroed((void **)&sg->h, n, sizeof *sg->h, "activation blocks"));
    SAGA_TRY(saga_alloc_zeroed((void **)&sg->d, n, sizeof *sg->d, "gradient blocks"));
    if (sg->l1 == L)
        SAGA_TRY(saga_alloc_zeroed((void **)&sg->t, (size_t)R, sizeof *sg->t, "target blocks"));
    float *a = sg->act_host;
    for (int32_t r = 0; r < R; r++) {
        for (int32_t l = sg->l0; l <= sg->l1; l++) {
            size_t bytes = mb * (size_t)m->widths[l] * f;
            float *hh = NULL, *dh = NULL; /* host copies */
            if (l == sg->l0 && b > 0) {
                hh = m->bx[(size_t)(b - 1) * (size_t)R + (size_t)r];
                dh = m->bg[(size_t)(b - 1) * (size_t)R + (size_t)r];
            } else if (l == sg->l1 && b < m->S - 1) {
                hh = m->bx[(size_t)b * (size_t)R + (size_t)r];
                dh = m->bg[(size_t)b * (size_t)R + (size_t)r];
            } else if (l > sg->l0) {
                hh = a;
                dh = a + bytes / f;
                a += 2 * bytes / f;
            }
            /* h_0 takes the caller's batch when its turn comes; nothing needs d_0 */
            BLOCK(*dense_slot(sg, sg->h, r, l), sg, bytes, SAGA_BLK_TEMP, "activation", hh);
            if (l > 0)
                BLOCK(*dense_slot(sg, sg->d, r, l), sg, bytes, SAGA_BLK_TEMP, "activation gradient",
                      dh);
        }
        if (sg->t)
            BLOCK(sg->t[r], sg, mb * (size_t)m->widths[L] * f, SAGA_BLK_TEMP, "targets", NULL);
    }
    BLOCK(sg->ones, sg, mb * f, SAGA_BLK_INPUT, "ones", sg->ones_host);
fail:
    return st;
}

/* "1.50 MB", "12.0 kB": bytes for a message. */
static const char *human(char *buf, size_t size, size_t bytes) {
    if (bytes >= 1000000)
        snprintf(buf, size, "%.2f MB", (double)bytes / 1e6);
    else if (bytes >= 1000)
        snprintf(buf, size, "%.1f kB", (double)bytes / 1e3);
    else
        snprintf(buf, size, "%zu B", bytes);
    return buf;
}

static void describe(saga_mlp *m) {
    char *p = m->desc, *end = m->desc + sizeof m->desc, b1[32], b2[32], b3[32];
    const saga_mlp_stats *s = &m->stats;
    int32_t max_tiles = 0;
    size_t tb = 0;
    for (int32_t l = 0; l < m->L; l++) {
        max_tiles = m->layers[l].n_tiles > max_tiles ? m->layers[l].n_tiles : max_tiles;
        tb = m->layers[l].tile_bytes > tb ? m->layers[l].tile_bytes : tb;
    }
    if (m->S > 1) {
        p += m->comm
                 ? snprintf(p, (size_t)(end - p), "%d stages on %d ranks (", (int)m->S, (int)m->S)
                 : snprintf(p, (size_t)(end - p), "%d stages (", (int)m->S);
        for (int32_t q = 0; q < m->S && p < end; q++) {
            int32_t a = m->stage_layers[q], b = m->stage_layers[q + 1] - 1;
            p += a == b ? snprintf(p, (size_t)(end - p), "%slayer %d", q ? " | " : "", (int)a)
                        : snprintf(p, (size_t)(end - p), "%slayers %d-%d", q ? " | " : "", (int)a,
                                   (int)b);
        }
        if (p < end)
            p += snprintf(p, (size_t)(end - p), "), 1F1B %s; ",
                          dense_two_bw(m) ? "PipeDream-2BW (weights one step stale)"
                                          : "with a flush each step");
    } else if (dense_two_bw(m))
        p += snprintf(p, (size_t)(end - p), "one stage, PipeDream-2BW (weights one step stale); ");
    if (p >= end)
        return;
    if (!s->streamed && max_tiles == 1) {
        snprintf(p, (size_t)(end - p), "in memory: %d layer%s, 1 tile each, %s resident", (int)m->L,
                 m->L > 1 ? "s" : "", human(b1, sizeof b1, s->footprint_bytes));
        return;
    }
    p += snprintf(p, (size_t)(end - p), "%s: %s tiles ", s->streamed ? "streamed" : "in memory",
                  m->p.split == SAGA_DENSE_SPLIT_COLS ? "column" : "row");
    for (int32_t l = 0; l < m->L && p < end; l++)
        p += snprintf(p, (size_t)(end - p), "%s%d", l ? "/" : "", (int)m->layers[l].n_tiles);
    if (p < end && s->cap_bytes)
        snprintf(p, (size_t)(end - p), " of <= %s, steps of %s under a %s cap%s",
                 human(b1, sizeof b1, tb), human(b2, sizeof b2, s->step_bytes),
                 human(b3, sizeof b3, s->cap_bytes), m->S > 1 ? " per stage" : "");
    else if (p < end)
        snprintf(p, (size_t)(end - p), " of <= %s, no cap", human(b1, sizeof b1, tb));
}

/* ranks: of p->comm (1 without one) */
static saga_status check_params(saga_backend *be, const saga_mlp_params *p, int ranks) {
    saga_status st = SAGA_OK;
    SAGA_CHECK(p->n_layers >= 1 && p->widths, SAGA_ERR_INVALID_ARG,
               "saga_mlp_new: need n_layers >= 1 and n_layers + 1 widths (got %d layers%s)",
               (int)p->n_layers, p->widths ? "" : ", no widths");
    for (int32_t l = 0; l <= p->n_layers; l++)
        SAGA_CHECK(p->widths[l] >= 1, SAGA_ERR_INVALID_ARG,
                   "saga_mlp_new: widths[%d] is %d, must be >= 1", (int)l, (int)p->widths[l]);
    SAGA_CHECK(p->n_micro >= 1 && p->batch >= p->n_micro && p->batch % p->n_micro == 0,
               SAGA_ERR_INVALID_ARG,
               "saga_mlp_new: the batch (%d rows) must split into %d micro-batches of equal size",
               (int)p->batch, (int)p->n_micro);
    SAGA_CHECK((unsigned)p->split < SAGA_DENSE_SPLIT_COUNT &&
                   (unsigned)p->optim < SAGA_DENSE_OPTIM_COUNT &&
                   (unsigned)p->pipe < SAGA_DENSE_PIPE_COUNT,
               SAGA_ERR_INVALID_ARG, "saga_mlp_new: unknown split %d, optimizer %d or pipeline %d",
               (int)p->split, (int)p->optim, (int)p->pipe);
    SAGA_CHECK(p->lr >= 0.0f && p->beta1 > 0.0f && p->beta1 < 1.0f && p->beta2 > 0.0f &&
                   p->beta2 < 1.0f && p->eps >= 0.0f && p->max_tile_units >= 0,
               SAGA_ERR_INVALID_ARG,
               "saga_mlp_new: need lr >= 0, betas in (0, 1), eps >= 0, max_tile_units >= 0");
    SAGA_CHECK(p->n_stages >= 1 && p->n_stages <= p->n_layers, SAGA_ERR_INVALID_ARG,
               "saga_mlp_new: %d stages for %d layers (each stage needs a layer)", (int)p->n_stages,
               (int)p->n_layers);
    if (ranks > 1) {
        SAGA_CHECK(p->n_stages == ranks, SAGA_ERR_INVALID_ARG,
                   "saga_mlp_new: %d stages over %d ranks (across ranks each rank runs one stage: "
                   "n_stages must be the communicator's size)",
                   (int)p->n_stages, ranks);
        SAGA_CHECK(be, SAGA_ERR_INVALID_ARG,
                   "saga_mlp_new: across ranks each rank passes its stage's backend as be");
        SAGA_CHECK(!saga_comm_on_device(p->comm), SAGA_ERR_INVALID_ARG,
                   "saga_mlp_new: %s is a device communicator; the stages exchange host buffers "
                   "(pass the host communicator)",
                   saga_comm_name(p->comm));
    }
    SAGA_CHECK(p->n_stages == 1 || ranks > 1 || p->stage_backends, SAGA_ERR_INVALID_ARG,
               "saga_mlp_new: %d stages need stage_backends", (int)p->n_stages);
    SAGA_CHECK(be || p->stage_backends, SAGA_ERR_INVALID_ARG, "saga_mlp_new: no backend given");
    if (p->stage_backends && ranks == 1) {
        SAGA_CHECK(!be || be == p->stage_backends[0], SAGA_ERR_INVALID_ARG,
                   "saga_mlp_new: be must be NULL or stage_backends[0]");
        for (int32_t s = 0; s < p->n_stages; s++) {
            SAGA_CHECK(p->stage_backends[s], SAGA_ERR_INVALID_ARG,
                       "saga_mlp_new: stage_backends[%d] is NULL", (int)s);
            for (int32_t q = 0; q < s; q++)
                SAGA_CHECK(p->stage_backends[q] != p->stage_backends[s], SAGA_ERR_INVALID_ARG,
                           "saga_mlp_new: stages %d and %d share a backend (each stage needs a "
                           "device of its own)",
                           (int)q, (int)s);
        }
    }
    if (p->stage_layers) {
        SAGA_CHECK(p->stage_layers[0] == 0 && p->stage_layers[p->n_stages] == p->n_layers,
                   SAGA_ERR_INVALID_ARG,
                   "saga_mlp_new: stage_layers must run from 0 to n_layers (%d), got %d to %d",
                   (int)p->n_layers, (int)p->stage_layers[0], (int)p->stage_layers[p->n_stages]);
        for (int32_t s = 0; s < p->n_stages; s++)
            SAGA_CHECK(p->stage_layers[s] < p->stage_layers[s + 1], SAGA_ERR_INVALID_ARG,
                       "saga_mlp_new: stage %d of stage_layers has no layer", (int)s);
    }
    SAGA_CHECK(p->pipe != SAGA_DENSE_PIPE_2BW || p->n_micro >= p->n_stages - 1,
               SAGA_ERR_INVALID_ARG,
               "saga_mlp_new: PipeDream-2BW over %d stages needs at least %d micro-batches per "
               "step (got %d): a stage may not start a step's forward passes before its update "
               "of the step before last",
               (int)p->n_stages, (int)p->n_stages - 1, (int)p->n_micro);
    for (int32_t s = 0; s < (ranks > 1 ? 1 : p->n_stages); s++) {
        saga_backend *b = p->stage_backends && ranks == 1 ? p->stage_backends[s] : be;
        const saga_kernels *kk = b->kernels;
        SAGA_CHECK(kk->gemm_f32 && kk->copy2d_f32 && kk->act_f32 && kk->act_bwd_f32 &&
                       kk->binary_f32 && kk->scale_f32 && kk->sumsq_f32 && kk->adam_f32,
                   SAGA_ERR_UNSUPPORTED, "saga_mlp_new: backend %s lacks a kernel dense layers use",
                   b->name);
    }
fail:
    return st;
}

static saga_status make_stage(saga_mlp *m, int32_t q) {
    saga_status st = SAGA_OK;
    stage *sg = &m->stages[q];
    sg->be = m->p.stage_backends && m->me < 0 ? m->p.stage_backends[q] : m->be;
    saga_backend_stats bs;
    saga_backend_get_stats(sg->be, &bs);
    sg->cap = m->p.device_bytes;
    /* the backend keeps part of its budget for its own work (its scratch) */
    size_t own =
        bs.reserved_bytes > bs.work_reserve_bytes ? bs.reserved_bytes : bs.work_reserve_bytes;
    size_t usable = bs.budget_bytes > own ? bs.budget_bytes - own : 1;
    if (bs.budget_bytes && (!sg->cap || usable < sg->cap))
        sg->cap = usable;
    SAGA_TRY(plan_tiles(m, sg));
    SAGA_TRY(saga_sched_new(&sg->s, sg->be, sg->cap, NULL, NULL));
    for (int32_t l = sg->l0; l < sg->l1; l++)
        SAGA_TRY(make_layer(m, sg, l));
fail:
    return st;
}

/* This process's part of the network: every stage, or across ranks its own (comm: the ranks, or
 * NULL). *out gets the network even when this fails, for saga_mlp_free. */
static saga_status build(saga_mlp **out, saga_backend *be, const saga_mlp_params *p,
                         saga_comm *comm) {
    saga_status st = SAGA_OK;
    saga_mlp *m = NULL;
    SAGA_TRY(check_params(be, p, saga_comm_size(comm)));

    SAGA_TRY(saga_alloc_zeroed((void **)&m, 1, sizeof *m, "a dense network"));
    *out = m;
    m->comm = comm;
    m->me = comm ? saga_comm_rank(comm) : -1;
    m->be = p->stage_backends && !comm ? p->stage_backends[0] : be;
    m->p = *p;
    m->L = p->n_layers;
    m->S = p->n_stages;
    m->mb = p->batch / p->n_micro;
    /* ring slots of micro-batches: a step's worth, or with 2BW's steps back to back enough that
     * a slot is free again before the micro-batch after next that takes it arrives */
    m->R = p->n_micro;
    if (dense_two_bw(m))
        m->R = 2 * p->n_micro > m->S + 1 ? 2 * p->n_micro : m->S + 1;
    SAGA_TRY(
        saga_alloc_array((void **)&m->widths, (size_t)m->L + 1, sizeof *m->widths, "dense widths"));
    memcpy(m->widths, p->widths, ((size_t)m->L + 1) * sizeof *m->widths);
    m->p.widths = m->widths;
    SAGA_TRY(
        saga_alloc_zeroed((void **)&m->layers, (size_t)m->L, sizeof *m->layers, "dense layers"));
    for (int32_t l = 0; l < m->L; l++) {
        layer *y = &m->layers[l];
        y->in = m->widths[l];
        y->out = m->widths[l + 1];
        y->n_params = (size_t)(y->in * y->out + y->out);
    }
    SAGA_TRY(saga_alloc_array((void **)&m->stage_layers, (size_t)m->S + 1, sizeof *m->stage_layers,
                              "stage layers"));
    if (p->stage_layers)
        memcpy(m->stage_layers, p->stage_layers, ((size_t)m->S + 1) * sizeof *m->stage_layers);
    else
        SAGA_TRY(dense_balance_stages(m));
    m->p.stage_layers = m->stage_layers;
    SAGA_CHECK(pthread_mutex_init(&m->mu, NULL) == 0, SAGA_ERR_OUT_OF_MEMORY,
               "saga_mlp_new: cannot make a mutex");
    if (pthread_cond_init(&m->cv, NULL) != 0) {
        pthread_mutex_destroy(&m->mu);
        SAGA_CHECK(false, SAGA_ERR_OUT_OF_MEMORY, "saga_mlp_new: cannot make a condition variable");
    }
    m->sync_made = true;
    SAGA_TRY(saga_alloc_zeroed((void **)&m->stages, (size_t)m->S, sizeof *m->stages, "stages"));
    for (int32_t q = 0; q < m->S; q++) {
        stage *sg = &m->stages[q];
        sg->m = m;
        sg->idx = q;
        sg->l0 = m->stage_layers[q];
        sg->l1 = m->stage_layers[q + 1];
    }
    for (int32_t q = 0; q < m->S; q++)
        if (dense_here(m, q))
            SAGA_TRY(make_stage(m, q));
    m->p.stage_backends = NULL; /* not kept: the stages hold their backends */
    m->p.comm = NULL;           /* nor the communicator: m->comm */
    SAGA_TRY(dense_make_boundaries(m));
    for (int32_t q = 0; q < m->S; q++)
        if (dense_here(m, q))
            SAGA_TRY(make_activations(m, &m->stages[q]));
    SAGA_TRY(saga_alloc_array((void **)&m->st_tiles, (size_t)m->L, sizeof *m->st_tiles, "stats"));
    SAGA_TRY(saga_alloc_array((void **)&m->st_units, (size_t)m->L, sizeof *m->st_units, "stats"));
    SAGA_TRY(saga_alloc_array((void **)&m->st_tile_bytes, (size_t)m->L, sizeof *m->st_tile_bytes,
                              "stats"));
    SAGA_TRY(saga_alloc_zeroed((void **)&m->st_peak, (size_t)m->S, sizeof *m->st_peak, "stats"));
    SAGA_TRY(saga_alloc_zeroed((void **)&m->st_idle, (size_t)m->S, sizeof *m->st_idle, "stats"));
    SAGA_TRY(saga_alloc_zeroed((void **)&m->st_h2d, (size_t)m->S, sizeof *m->st_h2d, "stats"));
    if (comm) { /* made here, so that no rank can fail alone when they are gathered */
        SAGA_TRY(saga_alloc_array((void **)&m->gather_i, 4 + 2 * (size_t)m->S, sizeof *m->gather_i,
                                  "stats"));
        SAGA_TRY(saga_alloc_array((void **)&m->gather_d, 2 + (size_t)m->S, sizeof *m->gather_d,
                                  "stats"));
    }
fail:
    return st;
}

/* The plan, for the statistics (across ranks, with every stage's figures gathered). */
static void plan_stats(saga_mlp *m) {
    int32_t per_batch = 0;
    for (int32_t l = 0; l < m->L; l++) {
        m->st_tiles[l] = m->layers[l].n_tiles;
        m->st_units[l] = m->layers[l].units;
        m->st_tile_bytes[l] = m->layers[l].tile_bytes;
        per_batch += 2 * m->layers[l].n_tiles * m->p.n_micro;
    }
    saga_mlp_stats *s = &m->stats;
    s->n_layers = m->L;
    s->tiles = m->st_tiles;
    s->tile_units = m->st_units;
    s->tile_bytes = m->st_tile_bytes;
    s->steps_per_batch = per_batch;
    s->n_stages = m->S;
    s->stage_layers = m->stage_layers;
    s->stage_peak_bytes = m->st_peak;
    s->stage_idle_seconds = m->st_idle;
    s->stage_h2d_bytes = m->st_h2d;
    s->ranks = m->comm ? m->S : 1;
    for (int32_t q = 0; q < m->S; q++) {
        const stage *sg = &m->stages[q];
        s->streamed = s->streamed || sg->streamed;
        s->param_bytes += sg->params;
        s->footprint_bytes += sg->footprint;
        s->step_bytes = sg->step_bytes > s->step_bytes ? sg->step_bytes : s->step_bytes;
        s->cap_bytes = sg->cap > s->cap_bytes ? sg->cap : s->cap_bytes;
        s->resident_bytes += sg->streamed ? 0 : sg->footprint;
        s->host_bytes += sg->host_bytes;
    }
}

saga_status saga_mlp_new(saga_mlp **out, saga_backend *be, const saga_mlp_params *p) {
    saga_status st = SAGA_OK;
    saga_mlp *m = NULL;
    SAGA_CHECK(out && p, SAGA_ERR_INVALID_ARG, "saga_mlp_new: an argument is NULL");
    saga_comm *comm = saga_comm_size(p->comm) > 1 ? p->comm : NULL;
    st = build(&m, be, p, comm);
    if (comm) {
        /* every rank built its stage, or all return the first failure */
        st = saga_comm_agree(comm, st);
        if (st == SAGA_OK)
            st = dense_join_ranks(m);
    }
    if (st < 0)
        goto fail;
    plan_stats(m);
    describe(m);
    *out = m;
    return SAGA_OK;
fail:
    saga_mlp_free(&m);
    return st;
}

void saga_mlp_free(saga_mlp **mp) {
    if (!mp || !*mp)
        return;
    saga_mlp *m = *mp;
    /* first every scheduler: each waits for the copies that still read or write host arrays */
    if (m->stages)
        for (int32_t q = 0; q < m->S; q++)
            saga_sched_free(&m->stages[q].s);
    dense_leave_ranks(m);
    if (m->stages) {
        for (int32_t q = 0; q < m->S; q++) {
            stage *sg = &m->stages[q];
            if (!sg->be)
                continue;
            for (int32_t l = sg->l0; l < sg->l1; l++) {
                layer *y = &m->layers[l];
                size_t bytes = y->n_params * sizeof(float);
                saga_free(y->tiles);
                saga_backend_host_free(sg->be, y->hp[0], bytes);
                saga_backend_host_free(sg->be, y->hp[1], bytes);
                saga_backend_host_free(sg->be, y->hm, bytes);
                saga_backend_host_free(sg->be, y->hv, bytes);
                saga_backend_host_free(sg->be, y->hg, bytes);
            }
            saga_backend_host_free(sg->be, sg->act_host, sg->act_floats * sizeof(float));
            saga_backend_host_free(sg->be, sg->ones_host, (size_t)m->mb * sizeof(float));
            if (q == m->S - 1)
                saga_backend_host_free(sg->be, m->loss_parts, m->loss_parts_bytes);
            saga_free(sg->h);
            saga_free(sg->d);
            saga_free(sg->t);
            saga_free(sg->ops);
        }
    }
    if (m->sync_made) {
        pthread_mutex_destroy(&m->mu);
        pthread_cond_destroy(&m->cv);
    }
    dense_free_boundaries(m);
    saga_free(m->stages);
    saga_free(m->layers);
    saga_free(m->loss_sums);
    saga_free(m->widths);
    saga_free(m->stage_layers);
    saga_free(m->st_tiles);
    saga_free(m->st_units);
    saga_free(m->st_tile_bytes);
    saga_free(m->st_peak);
    saga_free(m->st_idle);
    saga_free(m->st_h2d);
    saga_free(m->gather_i);
    saga_free(m->gather_d);
    saga_free(m);
    *mp = NULL;
}

/* ---- reading the network ------------------------------------------------------------------ */

/* Layer l's newest weights and bias, in the order of W (in x out, row-major) then b, into wb
 * (n_params floats), from the device copies of its tiles on stage sg. */
static saga_status read_layer(saga_mlp *m, stage *sg, int32_t l, float *wb) {
    saga_status st = SAGA_OK;
    layer *y = &m->layers[l];
    /* the newest version: with 2BW, version step in slot step & 1 */
    int32_t v = dense_two_bw(m) ? (int32_t)(m->step & 1) : 0;
    for (int32_t j = 0; j < y->n_tiles; j++)
        SAGA_TRY(saga_sched_download(sg->s, y->tiles[j].p[v]));
    SAGA_TRY(saga_sched_finish(sg->s));
    for (int64_t r = 0; r < y->in; r++)
        for (int64_t c = 0; c < y->out; c++)
            wb[r * y->out + c] = *tiled(m, y, y->hp[v], r, c);
    for (int64_t c = 0; c < y->out; c++)
        wb[y->in * y->out + c] = *tiled(m, y, y->hp[v], -1, c);
fail:
    return st;
}

saga_status saga_mlp_get_layer(saga_mlp *m, int32_t l, float *W, float *b) {
    saga_status st = SAGA_OK;
    float *wb = NULL;
    SAGA_CHECK(m && l >= 0 && l < (m ? m->L : 0), SAGA_ERR_INVALID_ARG,
               "saga_mlp_get_layer: no layer %d", (int)l);
    const layer *y = &m->layers[l];
    int32_t q = 0;
    while (l >= m->stages[q].l1)
        q++;
    st = saga_alloc_array((void **)&wb, y->n_params, sizeof *wb, "a layer's parameters");
    if (st == SAGA_OK && dense_here(m, q))
        st = read_layer(m, &m->stages[q], l, wb);
    if (m->comm) { /* the stage's rank sends the layer to every rank */
        SAGA_TRY(saga_comm_agree(m->comm, st));
        SAGA_TRY(saga_comm_bcast(m->comm, wb, y->n_params * sizeof *wb, q, NULL));
    }
    if (st < 0)
        goto fail;
    if (W)
        memcpy(W, wb, (size_t)(y->in * y->out) * sizeof *W);
    if (b)
        memcpy(b, wb + y->in * y->out, (size_t)y->out * sizeof *b);
fail:
    saga_free(wb);
    return st;
}

void saga_mlp_get_stats(const saga_mlp *m, saga_mlp_stats *s) {
    *s = m->stats;
}

const char *saga_mlp_describe(const saga_mlp *m) {
    return m->desc;
}
