/* net_explain.c - saga_net_explain: what a prepared net runs, stage by stage. */
#include "net_chain.h"

#include <stdio.h>

static const char *kind_name(const stage *sg) {
    if (sg->kind == STAGE_VERTEX)
        return "vertex";
    return saga_prog_fused(&sg->p) ? "program, one SpMM" : "program, batched";
}

static int64_t program_edges(const saga_net *n, const net_chain *ch, int s) {
    if (ch && ch->slices) { /* by slices: theirs */
        int64_t m = 0;
        for (int32_t j = 0; j < ch->n_slices; j++)
            if (ch->slices[j].s == s)
                m += ch->slices[j].blk->e1 - ch->slices[j].blk->e0;
        return m;
    }
    const nblock *b = ch ? ch->blk[s] : NULL;
    return b ? b->e1 - b->e0 : n->m;
}

/* The steps of stage s in sliced chain ch (0 when ch is none or not sliced). */
static int32_t slices_of(const net_chain *ch, int s) {
    int32_t k = 0;
    for (int32_t j = 0; ch && j < ch->n_slices; j++)
        k += ch->slices[j].s == s;
    return k;
}

saga_status saga_net_explain(saga_net *n, FILE *f) {
    saga_status st = SAGA_OK;
    SAGA_CHECK(n && f, SAGA_ERR_INVALID_ARG, "saga_net_explain: net and file must be given");
    SAGA_CHECK(n->n_stages > 0 || n->pagerank, SAGA_ERR_INVALID_ARG,
               "saga_net_explain: the net has no stages");
    SAGA_TRY(net_prepare(n, n->loss != NULL));
    net_chain *tc = NULL, *ec = n->plan.echain;
    if (n->loss)
        SAGA_TRY(net_chain_for(n, true, NULL, 0, &tc));
    saga_backend_stats bs;
    saga_backend_get_stats(n->be, &bs);
    fprintf(f, "net: %s; %d vertices, %lld edges placed, %d stages", n->desc, (int)n->n,
            (long long)n->m, n->n_stages);
    if (bs.budget_bytes)
        fprintf(f, "; device budget %zu bytes", bs.budget_bytes);
    fprintf(f, "\n");
    if (n->pagerank) {
        fprintf(f, "  PageRank in f64 over %d part%s, %lld halo rows read per iteration",
                (int)n->plan.k, n->plan.k == 1 ? "" : "s", (long long)n->stats.halo_rows);
        if (n->plan.ids && n->o.order != SAGA_ORDER_GRAPH)
            fprintf(f, ", %s by %s", n->plan.k == 1 ? "rows" : "each part's rows",
                    n->o.order == SAGA_ORDER_OUT_DEGREE ? "out-degree"
                                                        : "in-degree group, then out-degree");
        fprintf(f, "\n");
        return SAGA_OK;
    }
    if (n->plan.streamed) {
        fprintf(f, "  streamed: host-to-device floor %llu bytes per inference pass",
                (unsigned long long)n->plan.floor_pass_bytes);
        if (ec && ec->slices)
            fprintf(f, " (%llu for the chosen rows)", (unsigned long long)ec->floor_bytes);
        fprintf(f,
                ", %llu per training pass; %llu bytes of stage inputs kept whole on the device\n",
                (unsigned long long)n->plan.floor_train_bytes,
                (unsigned long long)n->stats.resident_bytes);
    }
    if (n->loss_rows)
        fprintf(f, "  training: the loss reads %d rows (saga_net_set_loss_rows)\n",
                (int)n->n_loss_rows);
    if (ec)
        fprintf(f, "  inference of chosen rows: %d rows (saga_net_forward_rows)\n",
                (int)ec->n_want);
    fprintf(f, "  %-5s %-18s %-14s %-22s %-12s %-18s %s\n", "stage", "kind", "columns",
            "training rows", "edges read", "chosen rows", "input");
    for (int s = 0; s < n->n_stages; s++) {
        const stage *sg = &n->stages[s];
        char cols[32], train[48], edges[24], chosen[40];
        const char *input = "on the device";
        snprintf(cols, sizeof cols, "%lld -> %lld", (long long)sg->in_cols,
                 (long long)sg->out_cols);
        if (n->plan.streamed && tc && tc->slices) {
            /* training runs each stage by slices on the rows it needs, forward and backward */
            const int32_t k = slices_of(tc, s);
            snprintf(train, sizeof train, "%d (%d slice%s)", (int)net_chain_rows(n, tc, s), (int)k,
                     k == 1 ? "" : "s");
            input = s == 0                      ? "rows by slice"
                    : sg->kind == STAGE_PROGRAM ? "halos by slice, from the host"
                                                : "rows by slice, from the host";
        } else if (n->plan.streamed && tc && tc->head && s < tc->whole_below) {
            /* the parts run it on the rows the chain reads */
            snprintf(train, sizeof train, "%d (head, parts)", (int)tc->in->v1);
            input = "rows by part";
        } else if (n->plan.streamed && tc && s >= tc->whole_below) {
            /* training runs as one chain step over the rows the loss reads (after the parts'
             * steps of the stages below it) */
            snprintf(train, sizeof train, "%d (one chain step)", (int)net_chain_rows(n, tc, s));
            if (s == tc->whole_below && s > 0)
                input = tc->head                       ? "the head's rows, on the device"
                        : net_chain_reads_whole(n, tc) ? "rows of the whole, on the device"
                                                       : "rows from the host";
        } else if (n->plan.streamed) {
            snprintf(train, sizeof train, "%d (parts)", (int)n->n);
            input = n->plan.resident && n->plan.resident[s] ? "whole on the device"
                    : sg->kind == STAGE_PROGRAM             ? "halos by part"
                                                            : "rows by part";
        } else {
            snprintf(train, sizeof train, "%d", tc ? (int)net_chain_rows(n, tc, s) : (int)n->n);
        }
        if (sg->kind == STAGE_PROGRAM)
            snprintf(edges, sizeof edges, "%lld", (long long)program_edges(n, tc, s));
        else
            snprintf(edges, sizeof edges, "-");
        const int32_t n_sl = slices_of(ec, s); /* a sliced inference's steps of this stage */
        if (n_sl)
            snprintf(chosen, sizeof chosen, "%d (%d slice%s)", (int)net_chain_rows(n, ec, s),
                     (int)n_sl, n_sl == 1 ? "" : "s");
        else
            snprintf(chosen, sizeof chosen, "%d", ec ? (int)net_chain_rows(n, ec, s) : (int)n->n);
        fprintf(f, "  %-5d %-18s %-14s %-22s %-12s %-18s %s\n", s, kind_name(sg), cols, train,
                edges, ec ? chosen : "-", input);
    }
    fprintf(f, "  (of %d rows; a stage demanded more than %d computes every row)\n", (int)n->n,
            (int)net_demand_cap(n->n));
fail:
    return st;
}
