/* dense.c - an MLP whose weight matrices are cut into row or column tiles (one operator
 * partitioned, as in Tofu), each tile with its gradient and Adam moments a block of the block
 * scheduler (sched_impl.h), streamed through the device under a byte cap. See saga_dense.h. */
#include "saga_dense.h"

#include "sched_impl.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* A tile: rows or columns [off, off + n) of W, with its bias share. Its parameters, gradient and
 * moments are laid out alike: the W part (row-major, n_w floats) then the bias part (n_b). */
typedef struct tile {
    int64_t off, n;
    int64_t n_w, n_b;
    size_t bytes;
    float *hp, *hm, *hv, *hg; /* host copies, inside the layer's arrays (hg: ADAM only) */
    saga_blk *p, *m, *v;
    saga_blk *g;   /* ADAM: the summed gradient, alive across the micro-batches */
    saga_blk **gk; /* ADAMA: one gradient block per micro-batch, freed after its step */
} tile;

typedef struct layer {
    int64_t in, out;
    int32_t n_tiles, units; /* units: columns (COLS) or rows (ROWS) per tile */
    size_t tile_bytes;
    tile *tiles;
    float *hp, *hm, *hv, *hg;
    size_t n_params; /* in * out + out */
} layer;

enum { OP_FWD = 0, OP_BWD = 1 };

/* A step of the scheduler's plan: the forward or backward pass of one tile for one
 * micro-batch. */
typedef struct op {
    uint8_t kind;
    int32_t k, l, j;
} op;

struct saga_mlp {
    saga_backend *be;
    saga_mlp_params p;
    int32_t *widths;
    int32_t L, mb;
    layer *layers;
    saga_sched *s;
    saga_blk **h; /* h[k * (L + 1) + l]: micro-batch k's input of layer l (l = L: the output) */
    saga_blk **d; /* d[k * (L + 1) + l]: its gradient (l >= 1) */
    saga_blk **t; /* targets per micro-batch */
    saga_blk *ones;
    float *act_host; /* host copies of h and d, l >= 1 */
    size_t act_host_bytes;
    float *ones_host;
    op *ops;
    int32_t n_ops;
    int64_t step;
    double loss_sum;
    int32_t *st_tiles, *st_units;
    size_t *st_tile_bytes;
    saga_mlp_stats stats;
    char desc[256];
};

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
                             .seed = 1};
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

/* Tiles per layer from the cap: every block at once when it fits, else tiles whose four blocks
 * (parameters, gradient, two moments) fit twice beside the step's activations, or once. */
static saga_status plan_tiles(saga_mlp *m, size_t cap) {
    saga_status st = SAGA_OK;
    size_t f = sizeof(float), act_max = 0, params = 0, max_layer = 0, widths_sum = 0;
    for (int32_t l = 0; l < m->L; l++) {
        size_t a = act_step_bytes(m, l);
        act_max = a > act_max ? a : act_max;
        params += m->layers[l].n_params * f;
        max_layer = m->layers[l].n_params * f > max_layer ? m->layers[l].n_params * f : max_layer;
    }
    for (int32_t l = 0; l <= m->L; l++)
        widths_sum += (size_t)m->widths[l];
    size_t grads = m->p.optim == SAGA_DENSE_ADAM ? params : max_layer;
    size_t acts =
        2 * (size_t)m->mb * widths_sum * f +
        (size_t)m->p.n_micro * (size_t)m->mb * (size_t)(m->widths[0] + m->widths[m->L]) * f +
        (size_t)m->mb * f;
    size_t footprint = 3 * params + grads + acts;
    bool fits = cap == 0 || footprint <= cap;
    size_t avail = cap > act_max ? cap - act_max : 0;
    size_t min_cap = act_max;
    for (int32_t l = 0; l < m->L; l++) {
        layer *y = &m->layers[l];
        int64_t units = m->p.split == SAGA_DENSE_SPLIT_COLS ? y->out : y->in;
        int64_t n = units;
        if (!fits) {
            size_t one = tile_bytes_of(m, y, 1), unit = tile_bytes_of(m, y, 2) - one;
            /* tiles take the room the largest step's activations leave */
            min_cap = act_max + 4 * one > min_cap ? act_max + 4 * one : min_cap;
            size_t base = one - unit; /* the bias share a row tile 0 carries */
            if (avail / 8 >= one)
                n = (int64_t)((avail / 8 - base) / unit);
            else if (avail / 4 >= one)
                n = (int64_t)((avail / 4 - base) / unit);
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
        for (int32_t l = 0; l < m->L; l++)
            SAGA_CHECK(m->layers[l].n_tiles > 0, SAGA_ERR_BUDGET,
                       "dense: a cap of %zu bytes cannot hold one step of layer %d even with "
                       "tiles of one %s (the largest step's activations take %zu bytes); the "
                       "smallest cap that works is %zu bytes",
                       cap, (int)l, m->p.split == SAGA_DENSE_SPLIT_COLS ? "column" : "row", act_max,
                       min_cap);
    }
    m->stats.streamed = !fits;
    m->stats.param_bytes = params;
    m->stats.footprint_bytes = footprint;
    m->stats.cap_bytes = cap;
    m->stats.resident_bytes = fits ? footprint : 0;
    size_t step_max = 0;
    for (int32_t l = 0; l < m->L; l++) {
        size_t sb = act_step_bytes(m, l) + 4 * m->layers[l].tile_bytes;
        step_max = sb > step_max ? sb : step_max;
    }
    m->stats.step_bytes = step_max;
fail:
    return st;
}

/* ---- construction ------------------------------------------------------------------------- */

static uint64_t splitmix(uint64_t *state) {
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Uniform in [-bound, bound) from the generator's top 24 bits. */
static float uniform(uint64_t *state, float bound) {
    return (float)((double)(splitmix(state) >> 40) * 0x1p-24 * 2.0 - 1.0) * bound;
}

/* Address of W[r][c] (or of b[c] when r < 0) of layer y in its tiled host array a. */
static float *tiled(const saga_mlp *m, const layer *y, float *a, int64_t r, int64_t c) {
    if (m->p.split == SAGA_DENSE_SPLIT_COLS) {
        const tile *t = &y->tiles[c / y->units];
        float *base = a + (t->hp - y->hp);
        int64_t cc = c - t->off;
        return r < 0 ? base + t->n_w + cc : base + r * t->n + cc;
    }
    if (r < 0)
        return a + (y->tiles[0].hp - y->hp) + y->tiles[0].n_w + c;
    const tile *t = &y->tiles[r / y->units];
    return a + (t->hp - y->hp) + (r - t->off) * y->out + c;
}

static saga_status host_array(saga_mlp *m, float **out, size_t n) {
    saga_status st = SAGA_OK;
    void *p = NULL;
    SAGA_TRY(saga_backend_host_alloc(m->be, &p, n * sizeof(float)));
    memset(p, 0, n * sizeof(float));
    m->stats.host_bytes += n * sizeof(float);
    *out = p;
fail:
    return st;
}

static saga_blk *block(saga_mlp *m, size_t bytes, saga_blk_life life, const char *kind,
                       void *host) {
    saga_blk *b = saga_sched_block(m->s, bytes, life, kind);
    if (b && host)
        saga_blk_set_host(b, host);
    return b;
}

#define BLOCK(dst, ...)                                                                            \
    do {                                                                                           \
        (dst) = block(__VA_ARGS__);                                                                \
        SAGA_CHECK((dst) != NULL, SAGA_ERR_OUT_OF_MEMORY, "dense: no memory for a block");         \
    } while (0)

static saga_status make_layer(saga_mlp *m, int32_t l) {
    saga_status st = SAGA_OK;
    layer *y = &m->layers[l];
    bool adam = m->p.optim == SAGA_DENSE_ADAM;
    SAGA_TRY(host_array(m, &y->hp, y->n_params));
    SAGA_TRY(host_array(m, &y->hm, y->n_params));
    SAGA_TRY(host_array(m, &y->hv, y->n_params));
    if (adam)
        SAGA_TRY(host_array(m, &y->hg, y->n_params));
    SAGA_TRY(
        saga_alloc_zeroed((void **)&y->tiles, (size_t)y->n_tiles, sizeof *y->tiles, "dense tiles"));
    int64_t units = m->p.split == SAGA_DENSE_SPLIT_COLS ? y->out : y->in, pos = 0;
    for (int32_t j = 0; j < y->n_tiles; j++) {
        tile *t = &y->tiles[j];
        t->off = (int64_t)j * y->units;
        t->n = units - t->off < y->units ? units - t->off : y->units;
        tile_shape(m, y, j, t->n, &t->n_w, &t->n_b);
        t->bytes = (size_t)(t->n_w + t->n_b) * sizeof(float);
        t->hp = y->hp + pos;
        t->hm = y->hm + pos;
        t->hv = y->hv + pos;
        t->hg = adam ? y->hg + pos : NULL;
        pos += t->n_w + t->n_b;
        BLOCK(t->p, m, t->bytes, SAGA_BLK_STATE, "weight tile", t->hp);
        BLOCK(t->m, m, t->bytes, SAGA_BLK_STATE, "first moment tile", t->hm);
        BLOCK(t->v, m, t->bytes, SAGA_BLK_STATE, "second moment tile", t->hv);
        if (adam) {
            BLOCK(t->g, m, t->bytes, SAGA_BLK_TEMP, "gradient tile", t->hg);
        } else {
            SAGA_TRY(saga_alloc_zeroed((void **)&t->gk, (size_t)m->p.n_micro, sizeof *t->gk,
                                       "gradient blocks"));
            /* each lives for one step only, so it never needs a host copy */
            for (int32_t k = 0; k < m->p.n_micro; k++)
                BLOCK(t->gk[k], m, t->bytes, SAGA_BLK_TEMP, "gradient tile", NULL);
        }
    }
    /* torch.nn.Linear's initialization, drawn in the order of W (in x out) then b, so that every
     * tiling starts from the same values */
    uint64_t state = m->p.seed * 0x100000001B3ull + (uint64_t)l;
    float bound = 1.0f / sqrtf((float)y->in);
    for (int64_t r = 0; r < y->in; r++)
        for (int64_t c = 0; c < y->out; c++)
            *tiled(m, y, y->hp, r, c) = uniform(&state, bound);
    for (int64_t c = 0; c < y->out; c++)
        *tiled(m, y, y->hp, -1, c) = uniform(&state, bound);
fail:
    return st;
}

static saga_status make_activations(saga_mlp *m) {
    saga_status st = SAGA_OK;
    int32_t n = m->p.n_micro, L = m->L;
    size_t per_k = 0, mb = (size_t)m->mb;
    for (int32_t l = 1; l <= L; l++)
        per_k += 2 * mb * (size_t)m->widths[l];
    SAGA_TRY(host_array(m, &m->act_host, per_k * (size_t)n));
    SAGA_TRY(host_array(m, &m->ones_host, mb));
    for (size_t i = 0; i < mb; i++)
        m->ones_host[i] = 1.0f;
    SAGA_TRY(saga_alloc_zeroed((void **)&m->h, (size_t)n * (size_t)(L + 1), sizeof *m->h,
                               "activation blocks"));
    SAGA_TRY(saga_alloc_zeroed((void **)&m->d, (size_t)n * (size_t)(L + 1), sizeof *m->d,
                               "gradient blocks"));
    SAGA_TRY(saga_alloc_zeroed((void **)&m->t, (size_t)n, sizeof *m->t, "target blocks"));
    float *a = m->act_host;
    for (int32_t k = 0; k < n; k++) {
        saga_blk **h = m->h + (size_t)k * (size_t)(L + 1), **d = m->d + (size_t)k * (size_t)(L + 1);
        BLOCK(h[0], m, mb * (size_t)m->widths[0] * sizeof(float), SAGA_BLK_INPUT, "input", NULL);
        BLOCK(m->t[k], m, mb * (size_t)m->widths[L] * sizeof(float), SAGA_BLK_INPUT, "targets",
              NULL);
        for (int32_t l = 1; l <= L; l++) {
            size_t nf = mb * (size_t)m->widths[l];
            BLOCK(h[l], m, nf * sizeof(float), SAGA_BLK_TEMP, "activation", a);
            a += nf;
            BLOCK(d[l], m, nf * sizeof(float), SAGA_BLK_TEMP, "activation gradient", a);
            a += nf;
        }
    }
    BLOCK(m->ones, m, mb * sizeof(float), SAGA_BLK_INPUT, "ones", m->ones_host);
fail:
    return st;
}

static saga_status make_ops(saga_mlp *m) {
    saga_status st = SAGA_OK;
    int32_t per_k = 0;
    for (int32_t l = 0; l < m->L; l++)
        per_k += 2 * m->layers[l].n_tiles;
    m->n_ops = per_k * m->p.n_micro;
    SAGA_TRY(saga_alloc_array((void **)&m->ops, (size_t)m->n_ops, sizeof *m->ops, "dense plan"));
    op *o = m->ops;
    for (int32_t k = 0; k < m->p.n_micro; k++) {
        for (int32_t l = 0; l < m->L; l++)
            for (int32_t j = 0; j < m->layers[l].n_tiles; j++)
                *o++ = (op){OP_FWD, k, l, j};
        for (int32_t l = m->L - 1; l >= 0; l--)
            for (int32_t j = 0; j < m->layers[l].n_tiles; j++)
                *o++ = (op){OP_BWD, k, l, j};
    }
    m->stats.steps_per_batch = m->n_ops;
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
        snprintf(p, (size_t)(end - p), " of <= %s, steps of %s under a %s cap",
                 human(b1, sizeof b1, tb), human(b2, sizeof b2, s->step_bytes),
                 human(b3, sizeof b3, s->cap_bytes));
    else if (p < end)
        snprintf(p, (size_t)(end - p), " of <= %s, no cap", human(b1, sizeof b1, tb));
}

saga_status saga_mlp_new(saga_mlp **out, saga_backend *be, const saga_mlp_params *p) {
    saga_status st = SAGA_OK;
    saga_mlp *m = NULL;
    /* check inputs */
    SAGA_CHECK(out && be && p, SAGA_ERR_INVALID_ARG, "saga_mlp_new: an argument is NULL");
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
                   (unsigned)p->optim < SAGA_DENSE_OPTIM_COUNT,
               SAGA_ERR_INVALID_ARG, "saga_mlp_new: unknown split %d or optimizer %d",
               (int)p->split, (int)p->optim);
    SAGA_CHECK(p->lr >= 0.0f && p->beta1 > 0.0f && p->beta1 < 1.0f && p->beta2 > 0.0f &&
                   p->beta2 < 1.0f && p->eps >= 0.0f && p->max_tile_units >= 0,
               SAGA_ERR_INVALID_ARG,
               "saga_mlp_new: need lr >= 0, betas in (0, 1), eps >= 0, max_tile_units >= 0");
    const saga_kernels *kk = be->kernels;
    SAGA_CHECK(kk->gemm_f32 && kk->copy2d_f32 && kk->act_f32 && kk->act_bwd_f32 && kk->binary_f32 &&
                   kk->scale_f32 && kk->sumsq_f32 && kk->adam_f32,
               SAGA_ERR_UNSUPPORTED, "saga_mlp_new: backend %s lacks a kernel dense layers use",
               be->name);

    /* initialize */
    SAGA_TRY(saga_alloc_zeroed((void **)&m, 1, sizeof *m, "a dense network"));
    m->be = be;
    m->p = *p;
    m->L = p->n_layers;
    m->mb = p->batch / p->n_micro;
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
    saga_backend_stats bs;
    saga_backend_get_stats(be, &bs);
    size_t cap = p->device_bytes;
    if (bs.budget_bytes && (!cap || bs.budget_bytes < cap))
        cap = bs.budget_bytes;
    SAGA_TRY(plan_tiles(m, cap));
    SAGA_TRY(saga_sched_new(&m->s, be, cap, NULL, NULL));
    for (int32_t l = 0; l < m->L; l++)
        SAGA_TRY(make_layer(m, l));
    SAGA_TRY(make_activations(m));
    SAGA_TRY(make_ops(m));
    SAGA_TRY(saga_alloc_array((void **)&m->st_tiles, (size_t)m->L, sizeof *m->st_tiles, "stats"));
    SAGA_TRY(saga_alloc_array((void **)&m->st_units, (size_t)m->L, sizeof *m->st_units, "stats"));
    SAGA_TRY(saga_alloc_array((void **)&m->st_tile_bytes, (size_t)m->L, sizeof *m->st_tile_bytes,
                              "stats"));
    for (int32_t l = 0; l < m->L; l++) {
        m->st_tiles[l] = m->layers[l].n_tiles;
        m->st_units[l] = m->layers[l].units;
        m->st_tile_bytes[l] = m->layers[l].tile_bytes;
    }
    m->stats.n_layers = m->L;
    m->stats.tiles = m->st_tiles;
    m->stats.tile_units = m->st_units;
    m->stats.tile_bytes = m->st_tile_bytes;
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
    saga_sched_free(&m->s); /* waits for the copies that still read or write the host arrays */
    if (m->layers) {
        for (int32_t l = 0; l < m->L; l++) {
            layer *y = &m->layers[l];
            if (y->tiles)
                for (int32_t j = 0; j < y->n_tiles; j++)
                    saga_free(y->tiles[j].gk);
            saga_free(y->tiles);
            saga_backend_host_free(m->be, y->hp, y->n_params * sizeof(float));
            saga_backend_host_free(m->be, y->hm, y->n_params * sizeof(float));
            saga_backend_host_free(m->be, y->hv, y->n_params * sizeof(float));
            saga_backend_host_free(m->be, y->hg, y->n_params * sizeof(float));
        }
    }
    if (m->act_host) {
        size_t per_k = 0;
        for (int32_t l = 1; l <= m->L; l++)
            per_k += 2 * (size_t)m->mb * (size_t)m->widths[l];
        saga_backend_host_free(m->be, m->act_host, per_k * (size_t)m->p.n_micro * sizeof(float));
    }
    saga_backend_host_free(m->be, m->ones_host, (size_t)m->mb * sizeof(float));
    saga_free(m->layers);
    saga_free(m->h);
    saga_free(m->d);
    saga_free(m->t);
    saga_free(m->ops);
    saga_free(m->widths);
    saga_free(m->st_tiles);
    saga_free(m->st_units);
    saga_free(m->st_tile_bytes);
    saga_free(m);
    *mp = NULL;
}

/* ---- the plan of a training step ---------------------------------------------------------- */

static saga_blk *H(const saga_mlp *m, int32_t k, int32_t l) {
    return m->h[(size_t)k * (size_t)(m->L + 1) + (size_t)l];
}

static saga_blk *D(const saga_mlp *m, int32_t k, int32_t l) {
    return m->d[(size_t)k * (size_t)(m->L + 1) + (size_t)l];
}

/* Whether op's backward step updates its tile: every micro-batch folds into the moments with
 * ADAMA; the last one applies the summed gradient with ADAM. */
static bool touches_moments(const saga_mlp *m, const op *o) {
    return m->p.optim == SAGA_DENSE_ADAMA || o->k == m->p.n_micro - 1;
}

static void record(saga_mlp *m, const op *o) {
    saga_sched *s = m->s;
    int t = saga_sched_step(s);
    const layer *y = &m->layers[o->l];
    const tile *tl = &y->tiles[o->j];
    bool first = o->j == 0, last = o->j == y->n_tiles - 1, top = o->l == m->L - 1;
    if (o->kind == OP_FWD) {
        saga_sched_use(s, t, H(m, o->k, o->l), SAGA_USE_READ, 0);
        saga_sched_use(s, t, tl->p, SAGA_USE_READ, 0);
        saga_sched_use(s, t, H(m, o->k, o->l + 1), first ? SAGA_USE_WRITE : SAGA_USE_RW, 0);
        if (top && last) {
            saga_sched_use(s, t, m->t[o->k], SAGA_USE_READ, 0);
            saga_sched_use(s, t, D(m, o->k, m->L), SAGA_USE_WRITE, 0);
        }
        return;
    }
    bool update = touches_moments(m, o);
    /* streamed, a changed tile is most likely evicted before its next use: its copy back starts
     * on the copy stream as soon as the step ends, instead of when room is needed, where the
     * compute would wait for it */
    unsigned wb = m->stats.streamed ? SAGA_USE_WRITEBACK : 0;
    bool last_k = o->k == m->p.n_micro - 1;
    saga_sched_use(s, t, D(m, o->k, o->l + 1), first && !top ? SAGA_USE_RW : SAGA_USE_READ, 0);
    if (first && !top)
        saga_sched_use(s, t, H(m, o->k, o->l + 1), SAGA_USE_READ, 0);
    saga_sched_use(s, t, H(m, o->k, o->l), SAGA_USE_READ, 0);
    if (tl->n_b)
        saga_sched_use(s, t, m->ones, SAGA_USE_READ, 0);
    if (m->p.optim == SAGA_DENSE_ADAM)
        saga_sched_use(s, t, tl->g, o->k == 0 ? SAGA_USE_WRITE : SAGA_USE_RW, last_k ? 0 : wb);
    else
        saga_sched_use(s, t, tl->gk[o->k], SAGA_USE_WRITE, 0);
    /* the weights change once per step, in the last micro-batch's pass */
    saga_sched_use(s, t, tl->p, last_k ? SAGA_USE_RW : SAGA_USE_READ, last_k ? wb : 0);
    if (update) {
        saga_sched_use(s, t, tl->m, SAGA_USE_RW, wb);
        saga_sched_use(s, t, tl->v, SAGA_USE_RW, wb);
    }
    if (o->l > 0)
        saga_sched_use(s, t, D(m, o->k, o->l), first ? SAGA_USE_WRITE : SAGA_USE_RW, 0);
}

static float *dev(const saga_blk *b) {
    return (float *)saga_blk_dev(b);
}

/* The forward pass of one tile: its columns of the output, or its partial product. */
static saga_status run_fwd(saga_mlp *m, const op *o) {
    saga_status st = SAGA_OK;
    const saga_kernels *kk = m->be->kernels;
    saga_stream *s = saga_backend_default_stream(m->be);
    const layer *y = &m->layers[o->l];
    const tile *tl = &y->tiles[o->j];
    int64_t mb = m->mb;
    const float *x = dev(H(m, o->k, o->l)), *P = dev(tl->p);
    float *z = dev(H(m, o->k, o->l + 1));
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
            float *dz = dev(D(m, o->k, m->L));
            double ss = 0;
            SAGA_TRY(kk->binary_f32(s, SAGA_BINOP_SUB, n, z, dev(m->t[o->k]), dz));
            SAGA_TRY(kk->sumsq_f32(s, n, dz, &ss));
            double denom = (double)m->p.batch * (double)y->out;
            m->loss_sum += ss / denom;
            SAGA_TRY(kk->scale_f32(s, n, (float)(2.0 / denom), dz, 0.0f, dz));
        }
    }
fail:
    return st;
}

/* The backward pass of one tile: its gradient, its share of the input's gradient, and the
 * optimizer when this micro-batch is the one that updates it. */
static saga_status run_bwd(saga_mlp *m, const op *o) {
    saga_status st = SAGA_OK;
    const saga_kernels *kk = m->be->kernels;
    saga_stream *s = saga_backend_default_stream(m->be);
    const layer *y = &m->layers[o->l];
    const tile *tl = &y->tiles[o->j];
    int64_t mb = m->mb;
    bool adam = m->p.optim == SAGA_DENSE_ADAM, top = o->l == m->L - 1;
    float *dz = dev(D(m, o->k, o->l + 1));
    const float *x = dev(H(m, o->k, o->l));
    float *P = dev(tl->p);
    float *G = dev(adam ? tl->g : tl->gk[o->k]);
    float *dx = o->l > 0 ? dev(D(m, o->k, o->l)) : NULL;
    float beta_g = adam && o->k > 0 ? 1.0f : 0.0f;
    if (o->j == 0 && !top)
        SAGA_TRY(kk->act_bwd_f32(s, SAGA_ACT_RELU, mb * y->out, 0.0f, NULL,
                                 dev(H(m, o->k, o->l + 1)), dz, dz));
    if (m->p.split == SAGA_DENSE_SPLIT_COLS) {
        const float *dzc = dz + tl->off; /* this tile's columns, leading dimension out */
        /* dW[:, cols] (+)= x^T dz[:, cols]; db[cols] (+)= 1^T dz[:, cols] */
        SAGA_TRY(kk->gemm_f32(s, true, false, y->in, tl->n, mb, 1.0f, x, y->in, dzc, y->out, beta_g,
                              G, tl->n));
        SAGA_TRY(kk->gemm_f32(s, true, false, 1, tl->n, mb, 1.0f, dev(m->ones), 1, dzc, y->out,
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
            SAGA_TRY(kk->gemm_f32(s, true, false, 1, y->out, mb, 1.0f, dev(m->ones), 1, dz, y->out,
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
    if (!adam && o->k < m->p.n_micro - 1) {
        /* AdamA's fold: adam_f32 below scales m by b1 and v by b2 once, after the last share is
         * in, so the earlier shares go in divided by them: m += (1 - b1) / b1 c,
         * v += (1 - b2) / b2 c^2, and the gradient tile is free when the step ends */
        SAGA_TRY(kk->scale_f32(s, n, (1.0f - b1) / b1, G, 1.0f, M));
        SAGA_TRY(kk->binary_f32(s, SAGA_BINOP_MUL, n, G, G, G));
        SAGA_TRY(kk->scale_f32(s, n, (1.0f - b2) / b2, G, 1.0f, V));
        return SAGA_OK;
    }
    SAGA_TRY(kk->adam_f32(s, n, m->p.lr, b1, b2, m->p.eps, 0.0f, false, m->step + 1, P, G, M, V));
fail:
    return st;
}

saga_status saga_mlp_train_step(saga_mlp *m, const float *x, const float *y, double *loss) {
    saga_status st = SAGA_OK;
    SAGA_CHECK(m && x && y, SAGA_ERR_INVALID_ARG, "saga_mlp_train_step: an argument is NULL");
    double t0 = saga_now();
    saga_backend_reset_stats(m->be);
    saga_sched_reset_stats(m->s);
    size_t in = (size_t)m->widths[0], out = (size_t)m->widths[m->L], mb = (size_t)m->mb;
    for (int32_t k = 0; k < m->p.n_micro; k++) {
        saga_blk_set_host(H(m, k, 0), (void *)(x + (size_t)k * mb * in));
        saga_blk_host_changed(H(m, k, 0));
        saga_blk_set_host(m->t[k], (void *)(y + (size_t)k * mb * out));
        saga_blk_host_changed(m->t[k]);
    }
    saga_sched_plan_begin(m->s);
    for (int32_t i = 0; i < m->n_ops; i++)
        record(m, &m->ops[i]);
    SAGA_TRY(saga_sched_plan_end(m->s));
    m->loss_sum = 0;
    for (int32_t i = 0; i < m->n_ops; i++) {
        const op *o = &m->ops[i];
        SAGA_TRY(saga_sched_begin(m->s, i));
        SAGA_TRY(o->kind == OP_FWD ? run_fwd(m, o) : run_bwd(m, o));
        SAGA_TRY(saga_sched_end(m->s, i));
    }
    SAGA_TRY(saga_sched_finish(m->s));
    SAGA_TRY(saga_backend_synchronize(m->be));
    m->step++;

    /* statistics */
    saga_backend_stats bs;
    saga_sched_stats ss;
    saga_backend_get_stats(m->be, &bs);
    saga_sched_get_stats(m->s, &ss);
    m->stats.h2d_bytes = bs.h2d_bytes;
    m->stats.d2h_bytes = bs.d2h_bytes;
    m->stats.peak_device_bytes = bs.peak_bytes;
    m->stats.kept_bytes = saga_sched_resident_bytes(m->s);
    m->stats.copy_seconds = bs.copy_seconds;
    m->stats.wait_seconds = ss.wait_seconds;
    double cs = bs.copy_seconds, w = ss.wait_seconds;
    m->stats.overlap = cs > 0 ? 1.0 - (w < cs ? w : cs) / cs : 0.0;
    m->stats.seconds = saga_now() - t0;
    if (loss)
        *loss = m->loss_sum;
    return SAGA_OK;
fail:
    if (m && m->s)
        (void)saga_sched_finish(m->s); /* no copy may still read the caller's arrays */
    return st;
}

saga_status saga_mlp_get_layer(saga_mlp *m, int32_t l, float *W, float *b) {
    saga_status st = SAGA_OK;
    SAGA_CHECK(m && l >= 0 && l < (m ? m->L : 0), SAGA_ERR_INVALID_ARG,
               "saga_mlp_get_layer: no layer %d", (int)l);
    layer *y = &m->layers[l];
    for (int32_t j = 0; j < y->n_tiles; j++)
        SAGA_TRY(saga_sched_download(m->s, y->tiles[j].p));
    SAGA_TRY(saga_sched_finish(m->s));
    if (W)
        for (int64_t r = 0; r < y->in; r++)
            for (int64_t c = 0; c < y->out; c++)
                W[r * y->out + c] = *tiled(m, y, y->hp, r, c);
    if (b)
        for (int64_t c = 0; c < y->out; c++)
            b[c] = *tiled(m, y, y->hp, -1, c);
fail:
    return st;
}

void saga_mlp_get_stats(const saga_mlp *m, saga_mlp_stats *s) {
    *s = m->stats;
}

const char *saga_mlp_describe(const saga_mlp *m) {
    return m->desc;
}
