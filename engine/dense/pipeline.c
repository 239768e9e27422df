/* pipeline.c - pipelines of tiled MLP stages (mlp.c) on several devices: the balanced choice of
 * stage boundaries, the pinned buffers activations and gradients cross them through, one thread
 * per stage running micro-batches in the 1F1B order, and the training calls. See saga_dense.h. */
#include "dense_impl.h"

#include <stdio.h>
#include <string.h>

/* Stage boundaries that minimize the largest stage's parameter count (a stage's compute and
 * memory both follow it), each stage at least one layer. */
saga_status dense_balance_stages(saga_mlp *m) {
    saga_status st = SAGA_OK;
    int32_t L = m->L, S = m->S;
    size_t *best = NULL, *pre = NULL;
    int32_t *cut = NULL;
    SAGA_TRY(saga_alloc_array((void **)&pre, (size_t)L + 1, sizeof *pre, "stage split"));
    SAGA_TRY(saga_alloc_array((void **)&best, (size_t)(S + 1) * (size_t)(L + 1), sizeof *best,
                              "stage split"));
    SAGA_TRY(saga_alloc_array((void **)&cut, (size_t)(S + 1) * (size_t)(L + 1), sizeof *cut,
                              "stage split"));
    pre[0] = 0;
    for (int32_t l = 0; l < L; l++)
        pre[l + 1] = pre[l] + m->layers[l].n_params;
    /* best[s * (L + 1) + e]: the least largest stage when layers [0, e) form s stages */
    for (int32_t e = 0; e <= L; e++)
        best[e] = e == 0 ? 0 : SIZE_MAX;
    for (int32_t s = 1; s <= S; s++)
        for (int32_t e = 0; e <= L; e++) {
            size_t b = SIZE_MAX;
            int32_t c = -1;
            for (int32_t q = s - 1; q < e; q++) {
                size_t prev = best[(size_t)(s - 1) * (size_t)(L + 1) + (size_t)q];
                if (prev == SIZE_MAX)
                    continue;
                size_t here = pre[e] - pre[q], v = prev > here ? prev : here;
                if (v < b) {
                    b = v;
                    c = q;
                }
            }
            best[(size_t)s * (size_t)(L + 1) + (size_t)e] = b;
            cut[(size_t)s * (size_t)(L + 1) + (size_t)e] = c;
        }
    m->stage_layers[S] = L;
    for (int32_t s = S; s >= 1; s--)
        m->stage_layers[s - 1] = cut[(size_t)s * (size_t)(L + 1) + (size_t)m->stage_layers[s]];
fail:
    saga_free(pre);
    saga_free(best);
    saga_free(cut);
    return st;
}

/* Floats of one micro-batch's activations (or their gradients) across boundary b: the output of
 * stage b's last layer. */
size_t dense_boundary_floats(const saga_mlp *m, int32_t b) {
    return (size_t)m->mb * (size_t)m->widths[m->stages[b].l1];
}

/* The pinned buffers activations and gradients cross the stage boundaries through. */
saga_status dense_make_boundaries(saga_mlp *m) {
    saga_status st = SAGA_OK;
    int32_t nb = m->S - 1, R = m->R;
    if (nb == 0)
        return SAGA_OK;
    SAGA_TRY(saga_alloc_zeroed((void **)&m->bx, (size_t)nb * (size_t)R, sizeof *m->bx,
                               "boundary buffers"));
    SAGA_TRY(saga_alloc_zeroed((void **)&m->bg, (size_t)nb * (size_t)R, sizeof *m->bg,
                               "boundary buffers"));
    SAGA_TRY(saga_alloc_zeroed((void **)&m->arrivals, 2 * (size_t)nb, sizeof *m->arrivals,
                               "boundary arrivals"));
    SAGA_TRY(saga_alloc_zeroed((void **)&m->arrived, 2 * (size_t)nb, sizeof *m->arrived,
                               "boundary arrivals"));
    for (int32_t b = 0; b < nb; b++) {
        stage *sg = &m->stages[b];
        for (int32_t r = 0; r < R; r++) {
            SAGA_TRY(dense_host_array(sg, &m->bx[(size_t)b * (size_t)R + (size_t)r],
                                      dense_boundary_floats(m, b)));
            SAGA_TRY(dense_host_array(sg, &m->bg[(size_t)b * (size_t)R + (size_t)r],
                                      dense_boundary_floats(m, b)));
        }
        m->arrivals[2 * b] = (arrival){m, b, false};
        m->arrivals[2 * b + 1] = (arrival){m, b, true};
    }
fail:
    return st;
}

/* ---- running a stage ---------------------------------------------------------------------- */

/* Runs on the copy thread of the stage that sent the content, once its copy to the host is
 * complete. */
static void post_arrival(void *user) {
    arrival *a = user;
    saga_mlp *m = a->m;
    pthread_mutex_lock(&m->mu);
    m->arrived[2 * a->b + (a->grad ? 1 : 0)]++;
    pthread_cond_broadcast(&m->cv);
    pthread_mutex_unlock(&m->mu);
}

/* Whether micro-batch g has crossed boundary b (activations, or gradients when grad); with
 * wait, blocks until it has, or until another stage failed (an error; the caller reports the
 * stage that failed first). */
static saga_status arrived(stage *sg, int32_t b, bool grad, int32_t g, bool wait, bool *ok) {
    saga_status st = SAGA_OK;
    saga_mlp *m = sg->m;
    int64_t *count = &m->arrived[2 * b + (grad ? 1 : 0)];
    double t0 = 0;
    pthread_mutex_lock(&m->mu);
    while (*count <= g && !m->failed && wait) {
        if (t0 == 0)
            t0 = saga_now();
        pthread_cond_wait(&m->cv, &m->mu);
    }
    *ok = *count > g;
    bool failed = m->failed && !*ok;
    pthread_mutex_unlock(&m->mu);
    if (t0 != 0)
        sg->idle_seconds += saga_now() - t0;
    if (failed && wait)
        st = saga_error(SAGA_ERR_DEVICE, "dense: stage %d stopped: another stage failed",
                        (int)sg->idx);
    return st;
}

/* Makes the content op o reads from outside the stage known to the scheduler when it is there
 * (*ok false when not yet; with wait, waits for it): the caller's batch and targets, the
 * activations from the stage before, the gradients from the stage after. Each micro-batch's is
 * marked once, in order, when the first step that reads it is next or running: by then the
 * ring slot's previous occupant is dead. */
static saga_status acquire(stage *sg, const op *o, bool wait, bool *ok) {
    saga_status st = SAGA_OK;
    saga_mlp *m = sg->m;
    int32_t g = o->g, k = g % m->p.n_micro, step = g / m->p.n_micro;
    const layer *y = &m->layers[o->l];
    *ok = true;
    if (o->kind == OP_FWD && o->l == sg->l0 && o->j == 0 && g == sg->marked_x) {
        saga_blk *x = dense_h(sg, g, sg->l0);
        if (sg->idx == 0) {
            size_t off = (size_t)k * (size_t)m->mb * (size_t)m->widths[0];
            saga_blk_set_host(x, (void *)(m->xs[step] + off));
        } else {
            SAGA_TRY(arrived(sg, sg->idx - 1, false, g, wait, ok));
            if (!*ok)
                return SAGA_OK;
        }
        saga_blk_host_changed(x);
        sg->marked_x++;
    }
    if (o->kind == OP_FWD && o->l == m->L - 1 && o->j == y->n_tiles - 1 && g == sg->marked_y) {
        saga_blk *t = sg->t[g % m->R];
        size_t off = (size_t)k * (size_t)m->mb * (size_t)m->widths[m->L];
        saga_blk_set_host(t, (void *)(m->ys[step] + off));
        saga_blk_host_changed(t);
        sg->marked_y++;
    }
    if (o->kind == OP_BWD && o->l == sg->l1 - 1 && o->j == 0 && sg->idx < m->S - 1 &&
        g == sg->marked_dy) {
        SAGA_TRY(arrived(sg, sg->idx, true, g, wait, ok));
        if (!*ok)
            return SAGA_OK;
        saga_blk_host_changed(dense_d(sg, g, sg->l1));
        sg->marked_dy++;
    }
fail:
    return st;
}

/* After op o's step: tells the neighbour what it sent, once the copy to the host completes. */
static saga_status send(stage *sg, const op *o) {
    saga_mlp *m = sg->m;
    bool last = o->j == m->layers[o->l].n_tiles - 1;
    if (!last)
        return SAGA_OK;
    if (o->kind == OP_FWD && o->l == sg->l1 - 1 && sg->idx < m->S - 1)
        return saga_sched_after_copies(sg->s, post_arrival, &m->arrivals[2 * sg->idx]);
    if (o->kind == OP_BWD && o->l == sg->l0 && sg->idx > 0)
        return saga_sched_after_copies(sg->s, post_arrival, &m->arrivals[2 * (sg->idx - 1) + 1]);
    return SAGA_OK;
}

static saga_status stage_run(stage *sg) {
    saga_status st = SAGA_OK;
    saga_sched *s = sg->s;
    saga_sched_plan_begin(s);
    for (int32_t i = 0; i < sg->n_ops; i++)
        dense_record(sg, &sg->ops[i]);
    SAGA_TRY(saga_sched_plan_end(s));
    for (int32_t i = 0; i < sg->n_ops; i++) {
        const op *o = &sg->ops[i];
        bool ok;
        SAGA_TRY(acquire(sg, o, true, &ok));
        if (i + 1 < sg->n_ops) /* so that the scheduler can prefetch it */
            SAGA_TRY(acquire(sg, &sg->ops[i + 1], false, &ok));
        SAGA_TRY(saga_sched_begin(s, i));
        SAGA_TRY(o->kind == OP_FWD ? dense_run_fwd(sg, o) : dense_run_bwd(sg, o));
        SAGA_TRY(saga_sched_end(s, i));
        SAGA_TRY(send(sg, o));
    }
    SAGA_TRY(saga_sched_finish(s));
    SAGA_TRY(saga_backend_synchronize(sg->be));
fail:
    return st;
}

static void *stage_thread(void *arg) {
    stage *sg = arg;
    saga_mlp *m = sg->m;
    sg->st = saga_backend_bind_thread(sg->be);
    if (sg->st == SAGA_OK)
        sg->st = stage_run(sg);
    if (sg->st < 0) {
        snprintf(sg->err, sizeof sg->err, "%s", saga_last_error());
        pthread_mutex_lock(&m->mu);
        if (!m->failed) {
            m->failed = true;
            m->first_failed = sg->idx;
        }
        pthread_cond_broadcast(&m->cv);
        pthread_mutex_unlock(&m->mu);
    }
    return NULL;
}

/* Runs n micro-batches (n_steps steps of the call) through the stages: on the calling thread
 * for one stage, else a thread per stage. */
static saga_status run_stages(saga_mlp *m, int32_t n_steps) {
    saga_status st = SAGA_OK;
    int32_t n = n_steps * m->p.n_micro, started = 0;
    m->failed = false;
    for (int32_t b = 0; b < 2 * (m->S - 1); b++)
        m->arrived[b] = 0;
    for (int32_t q = 0; q < m->S; q++) {
        stage *sg = &m->stages[q];
        sg->marked_x = sg->marked_y = sg->marked_dy = 0;
        sg->idle_seconds = 0;
        sg->st = SAGA_OK;
        SAGA_TRY(dense_make_ops(sg, n));
    }
    if (m->S == 1)
        return stage_run(&m->stages[0]);
    for (; started < m->S; started++)
        if (pthread_create(&m->stages[started].thread, NULL, stage_thread, &m->stages[started])) {
            pthread_mutex_lock(&m->mu);
            if (!m->failed) { /* a stage that failed already keeps its error */
                m->failed = true;
                m->first_failed = -1;
            }
            pthread_cond_broadcast(&m->cv);
            pthread_mutex_unlock(&m->mu);
            break;
        }
    for (int32_t q = 0; q < started; q++)
        pthread_join(m->stages[q].thread, NULL);
    if (m->failed) {
        if (m->first_failed < 0)
            return saga_error(SAGA_ERR_OUT_OF_MEMORY, "dense: cannot start a thread for stage %d",
                              (int)started);

        const stage *sg = &m->stages[m->first_failed];
        return saga_error(sg->st, "stage %d (%s): %s", (int)sg->idx, saga_backend_name(sg->be),
                          sg->err);
    }
fail:
    return st;
}

/* Runs n_steps steps as one pass through the pipeline and adds its figures to the stats. */
static saga_status run_call(saga_mlp *m, int32_t n_steps, const float *const *xs,
                            const float *const *ys, double *losses, bool first) {
    saga_status st = SAGA_OK;
    if (n_steps > m->cap_steps) {
        SAGA_TRY(saga_realloc_array((void **)&m->loss_sums, (size_t)n_steps, sizeof *m->loss_sums,
                                    "losses"));
        m->cap_steps = n_steps;
    }
    for (int32_t t = 0; t < n_steps; t++)
        m->loss_sums[t] = 0;
    m->xs = xs;
    m->ys = ys;
    for (int32_t q = 0; q < m->S; q++) {
        saga_backend_reset_stats(m->stages[q].be);
        saga_sched_reset_stats(m->stages[q].s);
    }
    st = run_stages(m, n_steps);
    if (st < 0) {
        for (int32_t q = 0; q < m->S; q++) /* no copy may still read the caller's arrays */
            (void)saga_sched_finish(m->stages[q].s);
        return st;
    }
    m->step += n_steps;
    if (losses)
        memcpy(losses, m->loss_sums, (size_t)n_steps * sizeof *losses);

    saga_mlp_stats *s = &m->stats;
    if (first) {
        s->h2d_bytes = s->d2h_bytes = 0;
        s->peak_device_bytes = s->kept_bytes = 0;
        s->copy_seconds = s->wait_seconds = 0;
        for (int32_t q = 0; q < m->S; q++) {
            m->st_peak[q] = 0;
            m->st_idle[q] = 0;
            m->st_h2d[q] = 0;
        }
    }
    s->kept_bytes = 0;
    for (int32_t q = 0; q < m->S; q++) {
        saga_backend_stats bs;
        saga_sched_stats ss;
        saga_backend_get_stats(m->stages[q].be, &bs);
        saga_sched_get_stats(m->stages[q].s, &ss);
        s->h2d_bytes += bs.h2d_bytes;
        s->d2h_bytes += bs.d2h_bytes;
        s->copy_seconds += bs.copy_seconds;
        s->wait_seconds += ss.wait_seconds;
        s->peak_device_bytes =
            bs.peak_bytes > s->peak_device_bytes ? bs.peak_bytes : s->peak_device_bytes;
        s->kept_bytes += saga_sched_resident_bytes(m->stages[q].s);
        m->st_peak[q] = bs.peak_bytes > m->st_peak[q] ? bs.peak_bytes : m->st_peak[q];
        m->st_idle[q] += m->stages[q].idle_seconds;
        m->st_h2d[q] += bs.h2d_bytes;
    }
    double cs = s->copy_seconds, w = s->wait_seconds;
    s->overlap = cs > 0 ? 1.0 - (w < cs ? w : cs) / cs : 0.0;
fail:
    return st;
}

saga_status saga_mlp_train_steps(saga_mlp *m, int32_t n_steps, const float *const *xs,
                                 const float *const *ys, double *losses) {
    saga_status st = SAGA_OK;
    SAGA_CHECK(m && xs && ys && n_steps >= 1, SAGA_ERR_INVALID_ARG,
               "saga_mlp_train_steps: need a network, n_steps >= 1 and the batches");
    for (int32_t t = 0; t < n_steps; t++)
        SAGA_CHECK(xs[t] && ys[t], SAGA_ERR_INVALID_ARG,
                   "saga_mlp_train_steps: the batch of step %d is NULL", (int)t);
    double t0 = saga_now();
    if (dense_two_bw(m)) {
        SAGA_TRY(run_call(m, n_steps, xs, ys, losses, true));
    } else {
        for (int32_t t = 0; t < n_steps; t++)
            SAGA_TRY(run_call(m, 1, xs + t, ys + t, losses ? losses + t : NULL, t == 0));
    }
    m->stats.seconds = saga_now() - t0;
fail:
    return st;
}

saga_status saga_mlp_train_step(saga_mlp *m, const float *x, const float *y, double *loss) {
    saga_status st = SAGA_OK;
    SAGA_CHECK(m && x && y, SAGA_ERR_INVALID_ARG, "saga_mlp_train_step: an argument is NULL");
    st = saga_mlp_train_steps(m, 1, &x, &y, loss);
fail:
    return st;
}
