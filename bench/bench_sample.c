/* bench_sample.c - neighbour sampling (saga_sampler): sampled edges per second on 1 .. the
 * available threads, the median of ROUNDS rounds of BATCHES batches each.
 *
 *   bench_sample [SCALE|DIR [FANOUTS [BATCH [BATCHES [ROUNDS]]]]]   default: 20 15,10,5 1024 50 5
 *
 * On an R-MAT graph of 2^SCALE vertices, seeds are drawn without repeats from the whole graph (a
 * fixed shuffle), batch after batch, and the blocks carry GCN's values over the full graph's
 * degrees with one self-loop added (the layout a GCN trains on). On a data set directory in the
 * layout of datasets/cora (DIR), the seeds are its training vertices in a fixed shuffle, BATCHES
 * 0 meaning one pass over them, and the blocks carry no values (GraphSAGE's mean): what
 * `saga gcn --model sage --fanout` samples in an epoch. */
#include "saga.h"
#include "saga_datasets.h"

#include <ctype.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp_dbl(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    const char *dir = argc > 1 && !isdigit((unsigned char)argv[1][0]) ? argv[1] : NULL;
    int scale = argc > 1 && !dir ? atoi(argv[1]) : 20;
    const char *fans = argc > 2 ? argv[2] : "15,10,5";
    int batch = argc > 3 ? atoi(argv[3]) : 1024, batches = argc > 4 ? atoi(argv[4]) : 50,
        rounds = argc > 5 ? atoi(argv[5]) : 5;
    int32_t fan[64];
    int layers = 0;
    for (const char *p = fans; *p && layers < 64; p = strchr(p, ',') ? strchr(p, ',') + 1 : "")
        fan[layers++] = atoi(p);
    if ((!dir && (scale < 4 || scale > 26)) || layers < 1 || batch < 1 || batches < 0 ||
        (!dir && batches < 1) || rounds < 1 || rounds > 101) {
        fprintf(stderr, "usage: bench_sample [SCALE [FANOUTS [BATCH [BATCHES [ROUNDS]]]]]\n");
        return 2;
    }
    saga_graph *g = NULL;
    saga_dataset ds = {0};
    if (dir) {
        saga_dataset_opts dso = saga_dataset_opts_defaults();
        dso.normalize_features = false;
        if (saga_dataset_load(&ds, dir, &dso) < 0) {
            fprintf(stderr, "bench_sample: %s\n", saga_last_error());
            return 1;
        }
        g = ds.graph;
    } else {
        saga_rmat_params rp = saga_rmat_params_defaults();
        rp.scale = scale;
        if (saga_rmat_graph(&g, &rp, NULL) < 0) {
            fprintf(stderr, "bench_sample: %s\n", saga_last_error());
            return 1;
        }
    }
    const int32_t n = saga_graph_n_vertices(g);
    const int32_t pool = dir ? (int32_t)ds.n_train : n; /* the seeds drawn from */
    if (dir && batches == 0)
        batches = (int)((pool + batch - 1) / batch);
    if ((int64_t)batch * (batches - 1) >= pool) {
        fprintf(stderr, "bench_sample: %d batches of %d seeds exceed %d vertices\n", batches, batch,
                (int)n);
        return 2;
    }
    int32_t *order = malloc((size_t)n * sizeof *order);
    if (!order)
        return 1;
    for (int32_t v = 0; v < n; v++)
        order[v] = v;
    uint64_t r = 12345;
    for (int32_t v = n - 1; v > 0; v--) {
        r = r * 6364136223846793005ull + 1442695040888963407ull;
        int32_t j = (int32_t)((r >> 33) % (uint64_t)(v + 1)), t = order[v];
        order[v] = order[j];
        order[j] = t;
    }
    if (dir)
        printf("%s: %d vertices, %lld edges, %d training vertices", dir, (int)n,
               (long long)saga_graph_n_edges(g), (int)pool);
    else
        printf("R-MAT scale %d: %d vertices, %lld edges", scale, (int)n,
               (long long)saga_graph_n_edges(g));
    printf("; fan-outs %s, %d seeds a batch, %d batches\n", fans, batch, batches);
    saga_sampler_opts o = saga_sampler_opts_defaults();
    o.self_loops = dir ? SAGA_DGRAPH_SELF_LOOPS_KEEP : SAGA_DGRAPH_SELF_LOOPS_ADD;
    o.weight = dir ? SAGA_WEIGHT_NONE : SAGA_WEIGHT_SYMNORM;
    const int max_threads = omp_get_max_threads();
    for (int t = 1; t <= max_threads; t *= 2) {
        omp_set_num_threads(t);
        saga_sampler *s = NULL;
        if (saga_sampler_new(&s, g, fan, layers, &o) < 0) {
            fprintf(stderr, "bench_sample: %s\n", saga_last_error());
            return 1;
        }
        double rate[101];
        int64_t edges = 0, rows = 0;
        for (int k = 0; k < rounds; k++) {
            edges = rows = 0;
            double t0 = saga_now();
            for (int b = 0; b < batches; b++) {
                saga_sample *x = NULL;
                const int64_t first = (int64_t)b * batch;
                const int64_t count = pool - first < batch ? pool - first : batch;
                if (saga_sampler_sample(s, order + first, count, (uint64_t)b, &x) < 0) {
                    fprintf(stderr, "bench_sample: %s\n", saga_last_error());
                    return 1;
                }
                edges += x->n_edges;
                rows += x->n_ids;
                saga_sample_free(&x);
            }
            rate[k] = (double)edges / (saga_now() - t0);
        }
        qsort(rate, (size_t)rounds, sizeof *rate, cmp_dbl);
        printf("threads %d: %.2f M sampled edges/s (median of %d; %.1f rows and %.1f edges a "
               "batch)\n",
               t, rate[rounds / 2] / 1e6, rounds, (double)rows / batches, (double)edges / batches);
        saga_sampler_free(&s);
    }
    free(order);
    if (dir)
        saga_dataset_free(&ds);
    else
        saga_graph_free(&g);
    return 0;
}
