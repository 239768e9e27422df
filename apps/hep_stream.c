/* hep_stream.c - a training step of the tracking model streamed through the device budget by
 * chunks of edges and hits (hep.h: hep_stream_step). */
#include "hep.h"

#include "saga_log.h"

#include <string.h>

/* The step's host rows: per round k (0 .. K) the hits' and edges' values, per round 1 .. K the
 * sums of its messages into and out of each hit; the gradients of one round's values and of
 * the one below it; staging for a chunk's gathered rows. */
typedef struct step_rows {
    int64_t nv, m, H, K, chunk;
    float *hs, *es, *ain, *aout;
    float *dh, *dh2, *de, *de2, *dain, *daout;
    float *g1, *g2, *g3;
} step_rows;

static float *hs_at(const step_rows *w, int64_t k) {
    return w->hs + k * w->nv * w->H;
}
static float *es_at(const step_rows *w, int64_t k) {
    return w->es + k * w->m * w->H;
}
static float *ain_at(const step_rows *w, int64_t k) { /* round k >= 1 */
    return w->ain + (k - 1) * w->nv * w->H;
}
static float *aout_at(const step_rows *w, int64_t k) {
    return w->aout + (k - 1) * w->nv * w->H;
}

static void rows_free(step_rows *w) {
    float **all[] = {&w->hs,  &w->es,   &w->ain,   &w->aout, &w->dh, &w->dh2, &w->de,
                     &w->de2, &w->dain, &w->daout, &w->g1,   &w->g2, &w->g3};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        saga_free(*all[i]);
        *all[i] = NULL;
    }
}

static saga_status rows_new(step_rows *w, const hep_rows *r, int64_t H, int64_t K, int64_t chunk) {
    saga_status st = SAGA_OK;
    memset(w, 0, sizeof *w);
    w->nv = r->n_vertices;
    w->m = r->n_edges;
    w->H = H;
    w->K = K;
    w->chunk = chunk;
    const size_t nvh = (size_t)(w->nv ? w->nv : 1) * (size_t)H,
                 mh = (size_t)(w->m ? w->m : 1) * (size_t)H, ch = (size_t)chunk * (size_t)H;
    SAGA_TRY(saga_alloc_array((void **)&w->hs, nvh * (size_t)(K + 1), sizeof(float), "hit rows"));
    SAGA_TRY(saga_alloc_array((void **)&w->es, mh * (size_t)(K + 1), sizeof(float), "edge rows"));
    SAGA_TRY(saga_alloc_array((void **)&w->ain, nvh * (size_t)K, sizeof(float), "message sums"));
    SAGA_TRY(saga_alloc_array((void **)&w->aout, nvh * (size_t)K, sizeof(float), "message sums"));
    float **nvs[] = {&w->dh, &w->dh2, &w->dain, &w->daout};
    for (size_t i = 0; i < 4; i++)
        SAGA_TRY(saga_alloc_array((void **)nvs[i], nvh, sizeof(float), "hit gradients"));
    SAGA_TRY(saga_alloc_array((void **)&w->de, mh, sizeof(float), "edge gradients"));
    SAGA_TRY(saga_alloc_array((void **)&w->de2, mh, sizeof(float), "edge gradients"));
    float **stage[] = {&w->g1, &w->g2, &w->g3};
    for (size_t i = 0; i < 3; i++)
        SAGA_TRY(saga_alloc_array((void **)stage[i], ch, sizeof(float), "chunk rows"));
fail:
    return st;
}

/* out[i] = a[idx[i]] for i < n, rows of H floats. */
static void gather(float *out, const float *a, const int32_t *idx, int64_t n, int64_t H) {
    for (int64_t i = 0; i < n; i++)
        memcpy(out + i * H, a + (int64_t)idx[i] * H, (size_t)H * sizeof(float));
}

/* a[idx[i]] += x[i] for i < n, in order. */
static void scatter_add(float *a, const float *x, const int32_t *idx, int64_t n, int64_t H) {
    for (int64_t i = 0; i < n; i++) {
        float *to = a + (int64_t)idx[i] * H;
        const float *from = x + i * H;
        for (int64_t j = 0; j < H; j++)
            to[j] += from[j];
    }
}

static void add(float *a, const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        a[i] += x[i];
}

/* A chunk's tensor from host rows: an input whose gradient the backward pass keeps, or a plain
 * copy. */
static saga_tensor *up(saga_ctx *c, hep_stream *s, const float *host, int64_t n, int64_t cols,
                       bool input) {
    s->h2d_bytes += (double)n * (double)cols * sizeof(float);
    return input ? saga_ctx_input(c, n, cols, host)
                 : saga_ctx_from_host(c, SAGA_F32, n, cols, host);
}

/* A result's (or an input's gradient's) rows back to the host. */
static saga_status down(saga_ctx *c, hep_stream *s, const saga_tensor *t, float *host) {
    saga_status st = saga_ctx_status(c);
    if (st < 0)
        return st;
    if (!t)
        return saga_error(SAGA_ERR_INTERNAL, "hep: a chunk's gradient was not computed");
    s->d2h_bytes += (double)saga_tensor_nbytes(t);
    return saga_tensor_to_host(t, host);
}

/* The chunk's end: its tensors go, and the chunk count goes up. */
static void chunk_done(saga_ctx *c, hep_stream *s) {
    saga_ctx_clear(c);
    s->chunks++;
}

/* An encoder (tanh of ffn) over count rows of cols features by chunks: without g, its output
 * into out; with g (the output's gradient), its backward pass into the parameters. */
static saga_status encode(hep_stream *s, saga_ctx *c, const saga_ffn *ffn, const float *x,
                          int64_t cols, int64_t count, int64_t C, int64_t H, float *out,
                          const float *g) {
    saga_status st = SAGA_OK;
    for (int64_t a = 0; a < count; a += C) {
        const int64_t n = count - a < C ? count - a : C;
        saga_tensor *y =
            saga_tanh(c, saga_ffn_forward(c, ffn, up(c, s, x + a * cols, n, cols, false)));
        if (g) {
            saga_tensor *gt = up(c, s, g + a * H, n, H, false);
            SAGA_TRY(saga_ctx_status(c));
            SAGA_TRY(saga_backward_from(c, y, gt));
        } else {
            SAGA_TRY(down(c, s, y, out + a * H));
        }
        chunk_done(c, s);
    }
fail:
    return st;
}

/* The forward pass: the encoders and the K rounds, without a tape. */
static saga_status forward(hep_stream *s, saga_ctx *c, hep_net *net, const hep_rows *r,
                           step_rows *w) {
    saga_status st = SAGA_OK;
    const int64_t H = w->H, K = w->K, nv = w->nv, m = w->m, C = w->chunk;
    saga_ctx_train(c, false);
    SAGA_TRY(encode(s, c, &net->node_enc, r->x, HEP_HIT_FEATURES, nv, C, H, hs_at(w, 0), NULL));
    SAGA_TRY(encode(s, c, &net->edge_enc, r->edata, HEP_EDGE_FEATURES, m, C, H, es_at(w, 0), NULL));
    for (int64_t k = 1; k <= K; k++) {
        memset(ain_at(w, k), 0, (size_t)(nv * H) * sizeof(float));
        memset(aout_at(w, k), 0, (size_t)(nv * H) * sizeof(float));
        for (int64_t a = 0; a < m; a += C) {
            const int64_t n = m - a < C ? m - a : C;
            gather(w->g1, hs_at(w, k - 1), r->src + a, n, H);
            gather(w->g2, hs_at(w, k - 1), r->dst + a, n, H);
            saga_tensor *hs = up(c, s, w->g1, n, H, false), *hd = up(c, s, w->g2, n, H, false),
                        *e = up(c, s, es_at(w, k - 1) + a * H, n, H, false);
            float *out = es_at(w, k) + a * H;
            SAGA_TRY(down(c, s, saga_interaction_edges(c, net->in, hs, hd, e), out));
            chunk_done(c, s);
            scatter_add(ain_at(w, k), out, r->dst + a, n, H);
            scatter_add(aout_at(w, k), out, r->src + a, n, H);
        }
        for (int64_t a = 0; a < nv; a += C) {
            const int64_t n = nv - a < C ? nv - a : C;
            saga_tensor *h = up(c, s, hs_at(w, k - 1) + a * H, n, H, false),
                        *in = up(c, s, ain_at(w, k) + a * H, n, H, false),
                        *out = up(c, s, aout_at(w, k) + a * H, n, H, false);
            SAGA_TRY(
                down(c, s, saga_interaction_nodes(c, net->in, h, in, out), hs_at(w, k) + a * H));
            chunk_done(c, s);
        }
    }
fail:
    return st;
}

/* The score's inputs of edges a .. a + n - 1: the last round's rows of their sources and
 * destinations, and their own (inputs whose gradients a backward pass keeps, or plain). */
static void score_inputs(hep_stream *s, saga_ctx *c, const hep_rows *r, step_rows *w, int64_t a,
                         int64_t n, bool input, saga_tensor *in[3]) {
    const int64_t H = w->H;
    gather(w->g1, hs_at(w, w->K), r->src + a, n, H);
    gather(w->g2, hs_at(w, w->K), r->dst + a, n, H);
    in[0] = up(c, s, w->g1, n, H, input);
    in[1] = up(c, s, w->g2, n, H, input);
    in[2] = up(c, s, es_at(w, w->K) + a * H, n, H, input);
}

/* The score and the loss by chunks of edges, each differentiated at once: *loss, the gradients
 * of the last round's hit rows (w->dh) and edge rows (w->de). */
static saga_status score(hep_stream *s, saga_ctx *c, hep_net *net, const hep_rows *r, step_rows *w,
                         float pos_weight, double *loss) {
    saga_status st = SAGA_OK;
    const int64_t H = w->H, m = w->m, C = w->chunk;
    saga_ctx_train(c, true);
    memset(w->dh, 0, (size_t)(w->nv * H) * sizeof(float));
    *loss = 0;
    for (int64_t a = 0; a < m; a += C) {
        const int64_t n = m - a < C ? m - a : C;
        saga_tensor *in[3];
        score_inputs(s, c, r, w, a, n, true, in);
        saga_tensor *y = up(c, s, r->target + a, n, 1, false);
        /* the mean over all edges: this chunk's mean weighted by its share */
        saga_tensor *l = saga_affine(
            c, saga_bce_logits(c, saga_ffn_forward_cat(c, &net->score, in, 3), y, pos_weight),
            (float)((double)n / (double)m), 0.0f);
        SAGA_TRY(saga_ctx_status(c));
        *loss += saga_item(l);
        SAGA_TRY(saga_backward(c, l));
        SAGA_TRY(down(c, s, saga_grad(in[0]), w->g1));
        SAGA_TRY(down(c, s, saga_grad(in[1]), w->g2));
        SAGA_TRY(down(c, s, saga_grad(in[2]), w->de + a * H));
        chunk_done(c, s);
        scatter_add(w->dh, w->g1, r->src + a, n, H);
        scatter_add(w->dh, w->g2, r->dst + a, n, H);
    }
fail:
    return st;
}

/* Round k's backward: from the gradients of its hit rows (w->dh) and edge rows (w->de) to those
 * of round k - 1's (the same arrays, swapped). */
static saga_status round_back(hep_stream *s, saga_ctx *c, hep_net *net, const hep_rows *r,
                              step_rows *w, int64_t k) {
    saga_status st = SAGA_OK;
    const int64_t H = w->H, nv = w->nv, m = w->m, C = w->chunk;
    memset(w->dh2, 0, (size_t)(nv * H) * sizeof(float));
    /* the node block, recomputed: into the hit rows below and the two sums of messages */
    for (int64_t a = 0; a < nv; a += C) {
        const int64_t n = nv - a < C ? nv - a : C;
        saga_tensor *h = up(c, s, hs_at(w, k - 1) + a * H, n, H, true),
                    *in = up(c, s, ain_at(w, k) + a * H, n, H, true),
                    *out = up(c, s, aout_at(w, k) + a * H, n, H, true);
        saga_tensor *y = saga_interaction_nodes(c, net->in, h, in, out);
        saga_tensor *g = up(c, s, w->dh + a * H, n, H, false);
        SAGA_TRY(saga_ctx_status(c));
        SAGA_TRY(saga_backward_from(c, y, g));
        SAGA_TRY(down(c, s, saga_grad(h), w->dh2 + a * H));
        SAGA_TRY(down(c, s, saga_grad(in), w->dain + a * H));
        SAGA_TRY(down(c, s, saga_grad(out), w->daout + a * H));
        chunk_done(c, s);
    }
    /* the edge block, recomputed: its output's gradient is the next round's (or the score's)
     * plus those of the sums it went into at both ends */
    for (int64_t a = 0; a < m; a += C) {
        const int64_t n = m - a < C ? m - a : C;
        memcpy(w->g3, w->de + a * H, (size_t)(n * H) * sizeof(float));
        for (int64_t i = 0; i < n; i++) {
            add(w->g3 + i * H, w->dain + (int64_t)r->dst[a + i] * H, H);
            add(w->g3 + i * H, w->daout + (int64_t)r->src[a + i] * H, H);
        }
        gather(w->g1, hs_at(w, k - 1), r->src + a, n, H);
        gather(w->g2, hs_at(w, k - 1), r->dst + a, n, H);
        saga_tensor *hs = up(c, s, w->g1, n, H, true), *hd = up(c, s, w->g2, n, H, true),
                    *e = up(c, s, es_at(w, k - 1) + a * H, n, H, true);
        saga_tensor *y = saga_interaction_edges(c, net->in, hs, hd, e);
        saga_tensor *g = up(c, s, w->g3, n, H, false);
        SAGA_TRY(saga_ctx_status(c));
        SAGA_TRY(saga_backward_from(c, y, g));
        SAGA_TRY(down(c, s, saga_grad(hs), w->g1));
        SAGA_TRY(down(c, s, saga_grad(hd), w->g2));
        SAGA_TRY(down(c, s, saga_grad(e), w->de2 + a * H));
        chunk_done(c, s);
        scatter_add(w->dh2, w->g1, r->src + a, n, H);
        scatter_add(w->dh2, w->g2, r->dst + a, n, H);
    }
    float *t = w->dh;
    w->dh = w->dh2;
    w->dh2 = t;
    t = w->de;
    w->de = w->de2;
    w->de2 = t;
fail:
    return st;
}

saga_status hep_grads_keep(hep_stream *s, saga_model *m, saga_backend *be, bool put) {
    saga_status st = SAGA_OK;
    const size_t bytes = (size_t)saga_model_n_scalars(m) * sizeof(float);
    if (put && bytes > s->keep_bytes) {
        saga_free(s->keep);
        s->keep = NULL;
        s->keep_bytes = 0;
        SAGA_TRY(saga_alloc_array((void **)&s->keep, bytes / sizeof(float) + 1, sizeof(float),
                                  "hep: gradients kept"));
        s->keep_bytes = bytes;
    }
    SAGA_TRY(saga_model_copy_grads(m, s->keep, !put));
    SAGA_TRY(saga_stream_synchronize(saga_backend_default_stream(be)));
fail:
    return st;
}

/* Rows a chunk of the budget's size holds: a chunk's step keeps, per row, the three gathered
 * inputs and their gradients, the two layers' activations and theirs, and the output's
 * gradient, about 24 rows of H floats (the score's and encoders' fewer), counted twice for the
 * context's buffers of the chunk before. */
static int64_t chunk_rows(saga_backend *be, int64_t H) {
    saga_backend_stats bs;
    saga_backend_get_stats(be, &bs);
    if (!bs.budget_bytes)
        return 1 << 16;
    size_t held =
        bs.in_use_bytes +
        (bs.reserved_bytes > bs.work_reserve_bytes ? bs.reserved_bytes : bs.work_reserve_bytes);
    size_t avail = bs.budget_bytes > held ? bs.budget_bytes - held : 0;
    int64_t n = (int64_t)(avail / (size_t)(2 * 24 * H * (int64_t)sizeof(float)));
    return n > (1 << 20) ? 1 << 20 : n;
}

/* The edges' scores (sigmoid of the logit) after the forward pass, by chunks of edges. */
static saga_status scores(hep_stream *s, saga_ctx *c, hep_net *net, const hep_rows *r, step_rows *w,
                          float *out) {
    saga_status st = SAGA_OK;
    const int64_t m = w->m, C = w->chunk;
    for (int64_t a = 0; a < m; a += C) {
        const int64_t n = m - a < C ? m - a : C;
        saga_tensor *in[3];
        score_inputs(s, c, r, w, a, n, false, in);
        SAGA_TRY(down(c, s, saga_sigmoid(c, saga_ffn_forward_cat(c, &net->score, in, 3)), out + a));
        chunk_done(c, s);
    }
fail:
    return st;
}

/* After the forward pass, the loss and the backward pass: the score, the rounds from the last
 * down, the encoders last (from the gradients of round 0's rows). */
static saga_status train_phases(hep_stream *s, saga_ctx *c, hep_net *net, const hep_rows *r,
                                step_rows *w, float pos_weight, double *loss) {
    saga_status st = SAGA_OK;
    SAGA_TRY(score(s, c, net, r, w, pos_weight, loss));
    for (int64_t k = net->iterations; k >= 1; k--)
        SAGA_TRY(round_back(s, c, net, r, w, k));
    SAGA_TRY(encode(s, c, &net->node_enc, r->x, HEP_HIT_FEATURES, r->n_vertices, w->chunk,
                    net->hidden, NULL, w->dh));
    SAGA_TRY(encode(s, c, &net->edge_enc, r->edata, HEP_EDGE_FEATURES, r->n_edges, w->chunk,
                    net->hidden, NULL, w->de));
fail:
    return st;
}

/* A streamed pass: training (out NULL: *loss, the gradients added) or the scores into out. A
 * chunk that takes more than its estimate halves the chunks and the pass runs again, a training
 * pass with the gradients it had added put back (kept until a training pass ran at this size). */
static saga_status stream_pass(hep_stream *s, saga_ctx *c, hep_net *net, const hep_rows *r,
                               float pos_weight, double *loss, float *out) {
    saga_status st = SAGA_OK;
    step_rows w = {0};
    saga_backend *be = saga_ctx_backend(c);
    const bool train = out == NULL;
    if (s->chunk == 0)
        s->chunk = chunk_rows(be, net->hidden);
    for (int tries = 0;; tries++) {
        SAGA_CHECK(s->chunk >= 64, SAGA_ERR_BUDGET,
                   "hep: the device budget leaves room for chunks of %lld rows at hidden %d; a "
                   "streamed pass needs 64 at least: give it more device memory",
                   (long long)s->chunk, net->hidden);
        if (train && !s->proven)
            SAGA_TRY(hep_grads_keep(s, net->m, be, true));
        s->chunks = 0;
        s->h2d_bytes = s->d2h_bytes = 0;
        st = rows_new(&w, r, net->hidden, net->iterations, s->chunk);
        if (st == SAGA_OK)
            st = forward(s, c, net, r, &w);
        if (st == SAGA_OK)
            st = train ? train_phases(s, c, net, r, &w, pos_weight, loss)
                       : scores(s, c, net, r, &w, out);
        rows_free(&w);
        saga_ctx_clear(c);
        saga_ctx_trim(c); /* the last chunks' buffers, of other sizes than the next pass's */
        if (st == SAGA_OK && train)
            s->proven = true;
        if (st != SAGA_ERR_BUDGET || (train && s->proven) || tries >= 8)
            return st;
        saga_log(SAGA_LOG_WARN,
                 "hep: a chunk of %lld rows took more device memory than planned (%s); streaming "
                 "by %lld",
                 (long long)s->chunk, saga_last_error(), (long long)(s->chunk / 2));
        if (train)
            SAGA_TRY(hep_grads_keep(s, net->m, be, false));
        s->chunk /= 2;
    }
fail:
    rows_free(&w);
    return st;
}

saga_status hep_stream_step(hep_stream *s, saga_ctx *c, hep_net *net, const hep_rows *r,
                            float pos_weight, double *loss) {
    return stream_pass(s, c, net, r, pos_weight, loss, NULL);
}

saga_status hep_stream_scores(hep_stream *s, saga_ctx *c, hep_net *net, const hep_rows *r,
                              float *score) {
    return stream_pass(s, c, net, r, 0, NULL, score);
}

void hep_stream_free(hep_stream *s) {
    if (!s)
        return;
    saga_free(s->keep);
    memset(s, 0, sizeof *s);
}
