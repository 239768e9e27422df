/* net_stats.c - a net's figures: the last call's statistics from the backend's, the scheduler's
 * and the communicators' counters, the end of a queued training pass (its losses and timed
 * figures), and its description. Below both the builder (net_build.c) and the executor
 * (net_run.c), which settle a queued pass before they change what it reads. */
#include "net_impl.h"

void net_stats_timed(saga_net_stats *st, const saga_sched_stats *ss) {
    st->copy_seconds = ss->copy_seconds;
    st->h2d_seconds = ss->h2d_seconds;
    st->wait_seconds = ss->wait_seconds;
    double cs = st->copy_seconds, w = st->wait_seconds;
    /* copies in order with the kernels hide nothing */
    st->overlap = cs > 0 && !ss->copies_inline ? 1.0 - (w < cs ? w : cs) / cs : 0.0;
    st->copies_inline = ss->copies_inline;
}

/* The last call's figures from the backend's and the scheduler's counters. */
void net_collect_stats(saga_net *n, double t0) {
    saga_backend_stats bs;
    saga_backend_get_stats(n->be, &bs);
    saga_sched_stats ss = {.copy_seconds = bs.copy_seconds};
    if (n->sched)
        saga_sched_get_stats(n->sched, &ss);
    net_stats_timed(&n->stats, &ss);
    n->stats.h2d_bytes = bs.h2d_bytes;
    n->stats.d2h_bytes = bs.d2h_bytes;
    n->stats.peak_device_bytes = bs.peak_bytes;
    n->stats.budget_bytes = bs.budget_bytes;
    n->stats.seconds = saga_now() - t0;
    if (n->dist) {
        saga_comm_stats cs2;
        saga_comm_get_stats(n->o.comm, &cs2);
        n->stats.comm_sent_bytes = cs2.sent_bytes - n->comm_at.sent_bytes;
        n->stats.comm_recv_bytes = cs2.recv_bytes - n->comm_at.recv_bytes;
        /* the thread's exchanges ran beside the compute, which waited for part of them */
        net_dist *x = n->dist;
        double hidden = x->t_seconds - x->wait_seconds;
        hidden = hidden > 0 ? hidden : 0;
        n->stats.comm_seconds = x->seconds + x->t_seconds;
        n->stats.comm_hidden = n->stats.comm_seconds > 0 ? hidden / n->stats.comm_seconds : 0.0;
        n->stats.remote_rows = (int64_t)n->dist->rows_moved;
        if (n->dcomm && n->dcomm != n->o.comm) {
            saga_comm_get_stats(n->dcomm, &cs2);
            n->stats.comm_sent_bytes += cs2.sent_bytes - n->dcomm_at.sent_bytes;
            n->stats.comm_recv_bytes += cs2.recv_bytes - n->dcomm_at.recv_bytes;
        }
    }
    if (n->hx) {
        const net_halo *x = n->hx;
        saga_comm_stats cs2;
        saga_comm_get_stats(x->comm, &cs2);
        n->stats.comm_sent_bytes = cs2.sent_bytes - n->comm_at.sent_bytes;
        n->stats.comm_recv_bytes = cs2.recv_bytes - n->comm_at.recv_bytes;
        if (x->dcomm != x->comm) {
            saga_comm_get_stats(x->dcomm, &cs2);
            n->stats.comm_sent_bytes += cs2.sent_bytes - n->dcomm_at.sent_bytes;
            n->stats.comm_recv_bytes += cs2.recv_bytes - n->dcomm_at.recv_bytes;
        }
        n->stats.comm_seconds = x->seconds;
        n->stats.comm_hidden = 0; /* every exchange runs inline */
        n->stats.remote_rows = (int64_t)x->rows_moved;
    }
}

/* The sum of the training pass's losses (keep_loss in net_run.c), once it has ended. */
double net_losses_sum(const saga_net *n) {
    double loss = 0;
    for (int32_t i = 0; i < n->loss_used; i++)
        loss += n->loss_host[i];
    return loss;
}

/* The end of the queued training pass (saga_net_train_queue): waits for the device unless waited
 * (a later pass's wait covered it), then adds up its losses and completes its timed figures. */
saga_status net_settle(saga_net *n, bool waited) {
    saga_status st = SAGA_OK;
    if (!n->queued)
        return SAGA_OK;
    saga_sched_stats ss;
    if (!waited && n->train_ev_ok) {
        /* in memory: its end, not the device's (passes queued after it keep it busy); its
         * figures, unless a pass issued since reset the backend's (then those of its issue) */
        SAGA_TRY(saga_event_synchronize(n->train_ev));
        if (!n->issued_since) {
            net_collect_stats(n, n->queued_t0);
            n->train_stats = n->stats;
        }
    } else if (!waited) {
        /* nothing ran since: the pass's figures are the scheduler's and the backend's */
        SAGA_TRY(saga_sched_finish_device(n->sched));
        net_collect_stats(n, n->queued_t0);
        n->train_stats = n->stats;
    } else if (saga_sched_held_stats(n->sched, &ss)) {
        net_stats_timed(&n->train_stats, &ss);
    }
    n->train_loss = net_losses_sum(n);
    n->queued = false;
fail:
    return st;
}

saga_status net_rows_settle(saga_net *n) {
    saga_status st = SAGA_OK;
    if (n->rows_queued)
        st = saga_event_synchronize(n->rows_ev);
    n->rows_queued = false;
    return st;
}

void saga_net_get_stats(const saga_net *n, saga_net_stats *s) {
    *s = n->stats;
}

const char *saga_net_describe(const saga_net *n) {
    return n->ready ? n->desc : "not prepared";
}
