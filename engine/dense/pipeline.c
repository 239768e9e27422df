/* pipeline.c - pipelines of tiled MLP stages (mlp.c) on several devices: the balanced choice of
 * stage boundaries, the pinned buffers activations and gradients cross them through, one thread
 * per stage running micro-batches in the 1F1B order, or one stage per rank with threads that
 * move those buffers between the ranks, and the training calls. See saga_dense.h. */
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

/* The stage whose backend holds boundary b's buffers: stage b in one process; across ranks this
 * rank's, when it is at either end of b (else NULL: no buffer here). */
static stage *boundary_stage(const saga_mlp *m, int32_t b) {
    if (m->me < 0)
        return &m->stages[b];
    return m->me == b || m->me == b + 1 ? &m->stages[m->me] : NULL;
}

/* The stage that sends across boundary b in direction grad (its copy stream records the events),
 * when it runs in this process. */
static stage *sender(const saga_mlp *m, int32_t b, bool grad) {
    int32_t q = grad ? b + 1 : b;
    return dense_here(m, q) ? &m->stages[q] : NULL;
}

saga_status dense_make_boundaries(saga_mlp *m) {
    saga_status st = SAGA_OK;
    int32_t nb = m->S - 1, R = m->R;
    if (nb == 0)
        return SAGA_OK;
    SAGA_TRY(saga_alloc_zeroed((void **)&m->bx, (size_t)nb * (size_t)R, sizeof *m->bx,
                               "boundary buffers"));
    SAGA_TRY(saga_alloc_zeroed((void **)&m->bg, (size_t)nb * (size_t)R, sizeof *m->bg,
                               "boundary buffers"));
    SAGA_TRY(saga_alloc_zeroed((void **)&m->sent, 2 * (size_t)nb * (size_t)R, sizeof *m->sent,
                               "boundary events"));
    SAGA_TRY(saga_alloc_zeroed((void **)&m->arrived, 2 * (size_t)nb, sizeof *m->arrived,
                               "boundary arrivals"));
    for (int32_t b = 0; b < nb; b++) {
        stage *sg = boundary_stage(m, b);
        for (int32_t r = 0; r < R && sg; r++) {
            SAGA_TRY(dense_host_array(sg, &m->bx[(size_t)b * (size_t)R + (size_t)r],
                                      dense_boundary_floats(m, b)));
            SAGA_TRY(dense_host_array(sg, &m->bg[(size_t)b * (size_t)R + (size_t)r],
                                      dense_boundary_floats(m, b)));
        }
        for (int grad = 0; grad < 2; grad++) {
            stage *from = sender(m, b, grad);
            for (int32_t r = 0; r < R && from; r++)
                SAGA_TRY(saga_event_new(&m->sent[(size_t)(2 * b + grad) * (size_t)R + (size_t)r],
                                        from->be));
        }
    }
fail:
    return st;
}

void dense_free_boundaries(saga_mlp *m) {
    if (m->bx && m->bg)
        for (int32_t b = 0; b < m->S - 1; b++) {
            stage *sg = boundary_stage(m, b);
            size_t bytes = dense_boundary_floats(m, b) * sizeof(float);
            for (int32_t r = 0; r < m->R && sg; r++) {
                size_t i = (size_t)b * (size_t)m->R + (size_t)r;
                saga_backend_host_free(sg->be, m->bx[i], bytes);
                saga_backend_host_free(sg->be, m->bg[i], bytes);
            }
        }
    if (m->sent)
        for (size_t i = 0; i < 2 * (size_t)(m->S - 1) * (size_t)m->R; i++)
            saga_event_free(&m->sent[i]);
    saga_free(m->bx);
    saga_free(m->bg);
    saga_free(m->sent);
    saga_free(m->arrived);
}

/* ---- running a stage ---------------------------------------------------------------------- */

/* The event of micro-batch g's copy to the host across boundary b in direction grad (NULL across
 * ranks for a direction this rank receives). */
static saga_event *sent_event(const saga_mlp *m, int32_t b, bool grad, int64_t g) {
    return m->sent[(size_t)(2 * b + (grad ? 1 : 0)) * (size_t)m->R + (size_t)(g % m->R)];
}

/* Whether micro-batch g has crossed boundary b (activations, or gradients when grad) into block
 * x, which is then marked as changed on the host; with wait, blocks until it has, or until
 * something failed (an error; the caller reports what failed first: another stage, or across
 * ranks a transfer). The sender's copy to the host is only issued when it counts as crossed:
 * where this stage's copy stream can wait for its event, the load of x waits on the device;
 * otherwise (a CPU backend, which cannot order one device after another) the host checks or
 * waits for the event here. */
static saga_status arrived(stage *sg, int32_t b, bool grad, int32_t g, bool wait, saga_blk *x,
                           bool *ok) {
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
    saga_event *ev = *ok ? sent_event(m, b, grad, g) : NULL;
    if (ev && !saga_stream_can_wait(saga_backend_default_stream(sg->be), ev)) {
        if (wait) {
            if (t0 == 0)
                t0 = saga_now();
            st = saga_event_synchronize(ev);
        } else {
            *ok = saga_event_done(ev);
        }
        ev = NULL;
    }
    if (t0 != 0)
        sg->idle_seconds += saga_now() - t0;
    SAGA_TRY(st);
    if (failed && wait)
        SAGA_TRY(saga_error(SAGA_ERR_DEVICE, "dense: stage %d stopped: %s", (int)sg->idx,
                            m->comm ? "a transfer failed" : "another stage failed"));
    if (*ok && ev)
        saga_blk_host_changed_after(x, ev);
    else if (*ok)
        saga_blk_host_changed(x);
fail:
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
            saga_blk_host_changed(x);
        } else {
            SAGA_TRY(arrived(sg, sg->idx - 1, false, g, wait, x, ok));
            if (!*ok)
                return SAGA_OK;
        }
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
        SAGA_TRY(arrived(sg, sg->idx, true, g, wait, dense_d(sg, g, sg->l1), ok));
        if (!*ok)
            return SAGA_OK;
        sg->marked_dy++;
    }
fail:
    return st;
}

/* After op o's step: when it ended a micro-batch's activations or gradients for a neighbour,
 * records the event of their copy to the host (which the step's end issued) and tells the
 * neighbour, which orders its load after that event, without a wait here. */
static saga_status send(stage *sg, const op *o) {
    saga_status st = SAGA_OK;
    saga_mlp *m = sg->m;
    bool last = o->j == m->layers[o->l].n_tiles - 1;
    int32_t b;
    bool grad;
    if (last && o->kind == OP_FWD && o->l == sg->l1 - 1 && sg->idx < m->S - 1) {
        b = sg->idx;
        grad = false;
    } else if (last && o->kind == OP_BWD && o->l == sg->l0 && sg->idx > 0) {
        b = sg->idx - 1;
        grad = true;
    } else {
        return SAGA_OK;
    }
    SAGA_TRY(saga_sched_copies_event(sg->s, sent_event(m, b, grad, o->g)));
    pthread_mutex_lock(&m->mu);
    m->arrived[2 * b + (grad ? 1 : 0)]++;
    pthread_cond_broadcast(&m->cv);
    pthread_mutex_unlock(&m->mu);
fail:
    return st;
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
    SAGA_TRY(saga_sched_finish_device(s)); /* the call's one wait: its copies and its losses */
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

/* Prepares stage q for n micro-batches. */
static saga_status stage_reset(saga_mlp *m, int32_t q, int32_t n) {
    stage *sg = &m->stages[q];
    sg->marked_x = sg->marked_y = sg->marked_dy = 0;
    sg->idle_seconds = 0;
    sg->st = SAGA_OK;
    return dense_make_ops(sg, n);
}

/* ---- stages on ranks ---------------------------------------------------------------------- */

/* One direction of one boundary: the call's micro-batches in order, a sent one as soon as its
 * copy to the host is complete, a received one into its ring slot as soon as it comes, while
 * the stage computes. The two ends of a boundary have ring buffers of their own, and a slot is
 * never overwritten too early for the reason that holds in one process: micro-batch g + R can
 * only be computed after a gradient that left its stage's copy stream after the last copy of
 * micro-batch g's content there (R exceeds the micro-batches in flight), and a send returns
 * before the next one of its direction starts. When this rank's stage failed and stopped, the
 * remaining micro-batches go as they are, so that the neighbours finish the call and learn of
 * the failure when all agree at its end. */
static void *xfer_thread(void *arg) {
    xfer *x = arg;
    saga_mlp *m = x->m;
    int32_t i = 2 * x->b + (x->grad ? 1 : 0), R = m->R;
    float **ring = (x->grad ? m->bg : m->bx) + (size_t)x->b * (size_t)R;
    size_t bytes = dense_boundary_floats(m, x->b) * sizeof(float);
    pthread_mutex_lock(&m->mu);
    while (m->gate == 0)
        pthread_cond_wait(&m->cv, &m->mu);
    int64_t n = m->gate > 0 ? m->n_call : 0;
    pthread_mutex_unlock(&m->mu);
    for (int64_t g = 0; g < n; g++) {
        pthread_mutex_lock(&m->mu);
        while (x->send && m->arrived[i] <= g && !(m->failed && m->halted))
            pthread_cond_wait(&m->cv, &m->mu);
        bool issued = m->arrived[i] > g;
        pthread_mutex_unlock(&m->mu);
        saga_comm_block blk = {x->peer, ring[g % R], bytes};
        saga_status st = SAGA_OK;
        if (x->send && issued) /* the copy to the host, on this thread rather than the stage's */
            st = saga_event_synchronize(sent_event(m, x->b, x->grad, g));
        if (st == SAGA_OK)
            st = x->send ? saga_comm_sendrecv(x->comm, &blk, 1, NULL, 0, NULL)
                         : saga_comm_sendrecv(x->comm, NULL, 0, &blk, 1, NULL);
        pthread_mutex_lock(&m->mu);
        if (st < 0) {
            x->st = st;
            snprintf(x->err, sizeof x->err, "%s", saga_last_error());
            m->failed = m->xfer_failed = true;
            pthread_cond_broadcast(&m->cv);
            pthread_mutex_unlock(&m->mu);
            break;
        }
        if (x->send)
            m->sent_bytes += bytes;
        else
            m->arrived[i] = g + 1;
        pthread_cond_broadcast(&m->cv);
        pthread_mutex_unlock(&m->mu);
    }
    return NULL;
}

/* Runs n micro-batches through this rank's stage, on the calling thread, with a thread per
 * direction and neighbour for the transfers. Every rank returns the same status, except after
 * a failed transfer (see saga_dense.h). */
static saga_status run_rank(saga_mlp *m, int32_t n) {
    saga_status st = SAGA_OK;
    stage *sg = &m->stages[m->me];
    int32_t started = 0;
    m->failed = m->halted = m->xfer_failed = false;
    m->gate = 0;
    m->n_call = n;
    for (int32_t b = 0; b < 2 * (m->S - 1); b++)
        m->arrived[b] = 0;
    st = stage_reset(m, m->me, n);
    for (; st == SAGA_OK && started < m->n_xf; started++) {
        xfer *x = &m->xf[started];
        x->st = SAGA_OK;
        if (pthread_create(&x->thread, NULL, xfer_thread, x)) {
            st = saga_error(SAGA_ERR_OUT_OF_MEMORY,
                            "dense: stage %d cannot start a transfer thread", (int)m->me);
            break;
        }
    }
    /* no transfer starts before every rank is ready for the call */
    st = saga_comm_agree(m->comm, st);
    pthread_mutex_lock(&m->mu);
    m->gate = st == SAGA_OK ? 1 : -1;
    pthread_cond_broadcast(&m->cv);
    pthread_mutex_unlock(&m->mu);
    if (st == SAGA_OK) {
        st = stage_run(sg);
        if (st < 0) {
            snprintf(sg->err, sizeof sg->err, "%s", saga_last_error());
            st = saga_error(st, "stage %d (%s): %s", (int)sg->idx, saga_backend_name(sg->be),
                            sg->err);
            /* no copy may still write the ring buffers the transfers go on with */
            (void)saga_sched_finish(sg->s);
        }
        pthread_mutex_lock(&m->mu);
        m->halted = true;
        m->failed = m->failed || st < 0;
        pthread_cond_broadcast(&m->cv);
        pthread_mutex_unlock(&m->mu);
    }
    for (int32_t k = 0; k < started; k++)
        pthread_join(m->xf[k].thread, NULL);
    for (int32_t k = 0; k < started; k++) {
        const xfer *x = &m->xf[k];
        if (x->st < 0) /* the neighbour may be waiting for it: no agreement */
            return saga_error(x->st, "stage %d: %s %s rank %d: %s", (int)m->me,
                              x->grad ? "gradients" : "activations", x->send ? "to" : "from",
                              x->peer, x->err);
    }
    if (m->gate > 0)
        st = saga_comm_agree(m->comm, st);
    return st;
}

/* Runs n micro-batches (n_steps steps of the call) through the stages: on the calling thread
 * for one stage or one stage per rank, else a thread per stage. */
static saga_status run_stages(saga_mlp *m, int32_t n_steps) {
    saga_status st = SAGA_OK;
    int32_t n = n_steps * m->p.n_micro, started = 0;
    if (m->comm)
        return run_rank(m, n);
    m->failed = false;
    for (int32_t b = 0; b < 2 * (m->S - 1); b++)
        m->arrived[b] = 0;
    for (int32_t q = 0; q < m->S; q++)
        SAGA_TRY(stage_reset(m, q, n));
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

/* Runs n_steps steps as one pass through the pipeline and adds its figures to the stats (this
 * process's stages). */
static saga_status run_call(saga_mlp *m, int32_t n_steps, const float *const *xs,
                            const float *const *ys, double *losses, bool first) {
    saga_status st = SAGA_OK;
    if (n_steps > m->cap_steps) {
        st = saga_realloc_array((void **)&m->loss_sums, (size_t)n_steps, sizeof *m->loss_sums,
                                "losses");
        if (st == SAGA_OK)
            m->cap_steps = n_steps;
        if (m->comm)
            st = saga_comm_agree(m->comm, st);
        SAGA_TRY(st);
    }
    if (dense_here(m, m->S - 1))
        st = saga_backend_host_room(m->stages[m->S - 1].be, (void **)&m->loss_parts,
                                    &m->loss_parts_bytes,
                                    (size_t)n_steps * (size_t)m->p.n_micro * sizeof(double));
    if (m->comm)
        st = saga_comm_agree(m->comm, st);
    SAGA_TRY(st);
    m->xs = xs;
    m->ys = ys;
    if (first)
        m->sent_bytes = 0;
    for (int32_t q = 0; q < m->S; q++)
        if (dense_here(m, q)) {
            saga_backend_reset_stats(m->stages[q].be);
            saga_sched_reset_stats(m->stages[q].s);
        }
    st = run_stages(m, n_steps);
    if (st < 0) {
        for (int32_t q = 0; q < m->S; q++) /* no copy may still read the caller's arrays */
            if (dense_here(m, q))
                (void)saga_sched_finish(m->stages[q].s);
        return st;
    }
    for (int32_t t = 0; t < n_steps; t++)
        m->loss_sums[t] = 0;
    if (dense_here(m, m->S - 1)) { /* each stage waited for its device at its end */
        const double denom = (double)m->p.batch * (double)m->widths[m->L];
        for (int64_t g = 0; g < (int64_t)n_steps * m->p.n_micro; g++)
            m->loss_sums[g / m->p.n_micro] += m->loss_parts[g] / denom;
    }
    if (m->comm) /* the last stage computed the losses */
        SAGA_TRY(saga_comm_bcast(m->comm, m->loss_sums, (size_t)n_steps * sizeof *m->loss_sums,
                                 m->S - 1, NULL));
    m->step += n_steps;
    if (losses)
        memcpy(losses, m->loss_sums, (size_t)n_steps * sizeof *losses);

    saga_mlp_stats *s = &m->stats;
    if (first) {
        s->h2d_bytes = s->d2h_bytes = 0;
        s->peak_device_bytes = s->kept_bytes = 0;
        s->copy_seconds = s->wait_seconds = 0;
        s->sent_bytes = 0;
        for (int32_t q = 0; q < m->S; q++) {
            m->st_peak[q] = 0;
            m->st_idle[q] = 0;
            m->st_h2d[q] = 0;
        }
    }
    s->kept_bytes = 0;
    for (int32_t q = 0; q < m->S; q++) {
        if (!dense_here(m, q))
            continue;
        saga_backend_stats bs;
        saga_sched_stats ss;
        saga_backend_get_stats(m->stages[q].be, &bs);
        saga_sched_get_stats(m->stages[q].s, &ss);
        s->h2d_bytes += bs.h2d_bytes;
        s->d2h_bytes += bs.d2h_bytes;
        s->copy_seconds += ss.copy_seconds;
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

/* Across ranks, after a call: every stage's figures on every rank (each rank holds its own
 * stage's, zeros for the others). */
static saga_status gather_stats(saga_mlp *m) {
    saga_status st = SAGA_OK;
    saga_mlp_stats *s = &m->stats;
    int32_t S = m->S;
    int64_t *v = m->gather_i;
    double *d = m->gather_d;
    v[0] = (int64_t)s->h2d_bytes;
    v[1] = (int64_t)s->d2h_bytes;
    v[2] = (int64_t)s->kept_bytes;
    v[3] = (int64_t)m->sent_bytes;
    d[0] = s->copy_seconds;
    d[1] = s->wait_seconds;
    for (int32_t q = 0; q < S; q++) {
        v[4 + q] = (int64_t)m->st_peak[q];
        v[4 + S + q] = (int64_t)m->st_h2d[q];
        d[2 + q] = m->st_idle[q];
    }
    SAGA_TRY(saga_comm_allreduce(m->comm, v, 4 + 2 * (size_t)S, SAGA_I64, SAGA_COMM_SUM, NULL));
    SAGA_TRY(saga_comm_allreduce(m->comm, d, 2 + (size_t)S, SAGA_F64, SAGA_COMM_SUM, NULL));
    s->h2d_bytes = (uint64_t)v[0];
    s->d2h_bytes = (uint64_t)v[1];
    s->kept_bytes = (size_t)v[2];
    s->sent_bytes = (uint64_t)v[3];
    s->copy_seconds = d[0];
    s->wait_seconds = d[1];
    s->peak_device_bytes = 0;
    for (int32_t q = 0; q < S; q++) {
        m->st_peak[q] = (size_t)v[4 + q];
        m->st_h2d[q] = (uint64_t)v[4 + S + q];
        m->st_idle[q] = d[2 + q];
        s->peak_device_bytes =
            m->st_peak[q] > s->peak_device_bytes ? m->st_peak[q] : s->peak_device_bytes;
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
    if (m->comm)
        SAGA_TRY(gather_stats(m));
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

/* ---- joining the ranks -------------------------------------------------------------------- */

saga_status dense_join_ranks(saga_mlp *m) {
    saga_status st = SAGA_OK;
    int32_t me = m->me, S = m->S, L = m->L;
    int64_t *v = NULL;
    /* the transfers run on threads beside the compute, which MPI must allow */
    st = saga_comm_threads(m->comm)
             ? SAGA_OK
             : saga_error(SAGA_ERR_UNSUPPORTED,
                          "saga_mlp_new: the stages over ranks move activations and gradients on "
                          "threads beside the compute, and MPI does not provide "
                          "MPI_THREAD_MULTIPLE (the program started it with less, or "
                          "SAGA_MPI_THREAD asked for less)");
    SAGA_TRY(saga_comm_agree(m->comm, st));
    /* a communicator per direction and parity of the boundary, so that each of a rank's
     * transfer threads has one of its own and both ends of a transfer share it */
    int n_comms = S > 2 ? 4 : 2;
    for (int k = 0; k < n_comms; k++) {
        saga_status o = saga_comm_open(&m->xcomm[k], "mpi");
        if (o == SAGA_OK && (saga_comm_rank(m->xcomm[k]) != saga_comm_rank(m->comm) ||
                             saga_comm_size(m->xcomm[k]) != saga_comm_size(m->comm)))
            o = saga_error(SAGA_ERR_UNSUPPORTED,
                           "saga_mlp_new: the stages' transfers run on duplicates of "
                           "MPI_COMM_WORLD, whose ranks differ from those of %s",
                           saga_comm_name(m->comm));
        st = st < 0 ? st : o;
    }
    SAGA_TRY(saga_comm_agree(m->comm, st));
    m->n_xf = 0;
    for (int32_t b = me - 1; b <= me; b++) {
        if (b < 0 || b >= S - 1)
            continue;
        for (int grad = 0; grad < 2; grad++) {
            xfer *x = &m->xf[m->n_xf++];
            x->m = m;
            x->b = b;
            x->grad = grad == 1;
            /* activations go from stage b to b + 1, gradients back */
            x->send = (b == me) != x->grad;
            x->peer = b == me ? me + 1 : me - 1;
            x->comm = m->xcomm[2 * (b % 2) + grad];
        }
    }

    /* the plan: tiles per layer and each stage's figures */
    size_t n = 3 * (size_t)L + 6 * (size_t)S;
    SAGA_TRY(saga_alloc_zeroed((void **)&v, n, sizeof *v, "the plan"));
    const stage *own = &m->stages[me];
    for (int32_t l = own->l0; l < own->l1; l++) {
        v[l] = m->layers[l].n_tiles;
        v[L + l] = m->layers[l].units;
        v[2 * L + l] = (int64_t)m->layers[l].tile_bytes;
    }
    int64_t *f = v + 3 * L + 6 * me;
    f[0] = own->streamed;
    f[1] = (int64_t)own->params;
    f[2] = (int64_t)own->footprint;
    f[3] = (int64_t)own->step_bytes;
    f[4] = (int64_t)own->cap;
    f[5] = (int64_t)own->host_bytes;
    SAGA_TRY(saga_comm_allreduce(m->comm, v, n, SAGA_I64, SAGA_COMM_SUM, NULL));
    for (int32_t l = 0; l < L; l++) {
        m->layers[l].n_tiles = (int32_t)v[l];
        m->layers[l].units = (int32_t)v[L + l];
        m->layers[l].tile_bytes = (size_t)v[2 * L + l];
    }
    for (int32_t q = 0; q < S; q++) {
        stage *sg = &m->stages[q];
        f = v + 3 * L + 6 * q;
        sg->streamed = f[0] != 0;
        sg->params = (size_t)f[1];
        sg->footprint = (size_t)f[2];
        sg->step_bytes = (size_t)f[3];
        sg->cap = (size_t)f[4];
        sg->host_bytes = (size_t)f[5];
    }
fail:
    saga_free(v);
    return st;
}

void dense_leave_ranks(saga_mlp *m) {
    for (int k = 0; k < DENSE_MAX_XFERS; k++)
        saga_comm_free(&m->xcomm[k]);
}
