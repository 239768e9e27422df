/* net_demand.c - the rows each stage of a net computes (net_demand.h). */
#include "net_demand.h"

#include <string.h>

void net_demand_free(net_demand *d) {
    if (!d)
        return;
    for (int s = 0; d->rows && s < d->n_stages; s++)
        saga_free(d->rows[s]);
    saga_free(d->rows);
    saga_free(d->n_rows);
    saga_free(d->n_edges);
    saga_free(d->in_rows);
    memset(d, 0, sizeof *d);
}

saga_status net_demand_build(net_demand *d, const stage_kind *kinds, int n_stages,
                             const int64_t *off, const int32_t *src, int32_t n,
                             const int32_t *out_rows, int64_t n_out, int32_t cap,
                             const net_demand_hook *hook) {
    saga_status st = SAGA_OK;
    uint8_t *want = NULL, *next = NULL;
    memset(d, 0, sizeof *d);
    SAGA_CHECK(kinds && n_stages >= 1 && n >= 0 && off && (n == 0 || src), SAGA_ERR_INVALID_ARG,
               "net demand: stages and the graph must be given");
    for (int64_t i = 0; out_rows && i < n_out; i++)
        SAGA_CHECK(out_rows[i] >= 0 && out_rows[i] < n, SAGA_ERR_INVALID_ARG,
                   "net demand: row %d of the output is outside [0, %d)", (int)out_rows[i], (int)n);
    d->n_stages = n_stages;
    d->n = n;
    SAGA_TRY(saga_alloc_zeroed((void **)&d->rows, (size_t)n_stages, sizeof *d->rows, "net demand"));
    SAGA_TRY(
        saga_alloc_zeroed((void **)&d->n_rows, (size_t)n_stages, sizeof *d->n_rows, "net demand"));
    SAGA_TRY(saga_alloc_zeroed((void **)&d->n_edges, (size_t)n_stages, sizeof *d->n_edges,
                               "net demand"));
    SAGA_TRY(saga_alloc_zeroed((void **)&want, (size_t)n + 1, 1, "net demand"));
    SAGA_TRY(saga_alloc_zeroed((void **)&next, (size_t)n + 1, 1, "net demand"));
    /* want: the rows the stage computes, from the last stage back; next: the rows it reads */
    int32_t count = 0;
    if (!out_rows) {
        memset(want, 1, (size_t)n);
        count = n;
    } else {
        for (int64_t i = 0; i < n_out; i++) {
            count += !want[out_rows[i]];
            want[out_rows[i]] = 1;
        }
    }
    /* s == -1: the input's rows */
    for (int s = n_stages - 1; s >= -1; s--) {
        if (count > cap && count < n) {
            memset(want, 1, (size_t)n); /* widened: every row, here and below */
            count = n;
        }
        int32_t **rows = s >= 0 ? &d->rows[s] : &d->in_rows;
        if (s >= 0)
            d->n_rows[s] = count;
        else
            d->n_in = count;
        if (count < n) {
            SAGA_TRY(saga_alloc_array((void **)rows, count ? (size_t)count : 1, sizeof(int32_t),
                                      "net demand rows"));
            for (int32_t v = 0, r = 0; v < n; v++)
                if (want[v])
                    (*rows)[r++] = v;
        }
        if (s < 0)
            break;
        memcpy(next, want, (size_t)n);
        if (kinds[s] == STAGE_PROGRAM) {
            int64_t m = 0;
            for (int32_t v = 0; v < n; v++)
                if (want[v]) {
                    m += off[v + 1] - off[v];
                    for (int64_t k = off[v]; k < off[v + 1]; k++)
                        next[src[k]] = 1;
                }
            d->n_edges[s] = m;
            if (hook)
                SAGA_TRY(hook->fn(hook->user, s, want, next));
        }
        count = 0;
        for (int32_t v = 0; v < n; v++)
            count += next[v];
        uint8_t *t = want;
        want = next;
        next = t;
    }
fail:
    saga_free(want);
    saga_free(next);
    if (st < 0)
        net_demand_free(d);
    return st;
}
