/* cmd_pagerank.c - `saga pagerank FILE`: PageRank scores, the top K, optionally all of them; of a
 * graph file, or under a launcher of a shard directory (saga partition --shards), each rank
 * iterating its own rows. */
#include "commands.h"
#include "pagerank.h"
#include "saga_net.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

enum {
    OPT_DAMPING,
    OPT_TOL,
    OPT_MAX_ITERS,
    OPT_TOP,
    OPT_OUT,
    OPT_OUT_ALIAS_,
    OPT_ALLOW_UNCONVERGED,
    OPT_TRACE,
    OPT_EXPLAIN,
    OPT_PROFILE_ITERATIONS,
    OPT_DEVICE,
    OPT_ORDER,
    OPT_EXEC, /* the CLI_EXEC_N_OPTS options of CLI_EXEC_OPTS */
};
static const cli_opt pagerank_opts[] = {
    {"damping", 0, "D", "0.85", "Damping factor d, in [0, 1)."},
    {"tol", 0, "T", "1e-10", "Stop when the L1 change of the scores is below T."},
    {"max-iters", 0, "N", "1000",
     "Give up after N iterations: an error unless --allow-unconverged."},
    {"top", 0, "K", "10", "Print the K highest-ranked vertices (0: none)."},
    {"output", 'o', "FILE", NULL, "Write \"id score\" for every vertex, in original-id order."},
    CLI_ALIAS("out"),
    {"allow-unconverged", 0, NULL, NULL,
     "Report the scores after --max-iters iterations with a warning instead of failing."},
    {"trace", 0, "FILE", NULL,
     "Write one JSON line per copy the block scheduler makes and per step it computes (as "
     "`saga gcn --trace`), for `saga plot`'s timeline; a streamed run has the steps. Rank 0 "
     "only."},
    {"explain", 0, NULL, NULL,
     "Print the net's plan to stderr after the run: in memory or streamed in parts, with the "
     "halo rows an iteration reads. Rank 0 only."},
    {"profile-iterations", 0, "A[:B]", NULL,
     "Run iterations A to B inside a profiler's capture range: on CUDA cudaProfilerStart before "
     "iteration A and cudaProfilerStop after iteration B (or the last one run), which `nsys "
     "profile --capture-range=cudaProfilerApi` follows (and the CUDA simulator's counts, "
     "SAGA_CUDASIM_STATS); nothing on the CPU."},
    {"device", 0, "DEV", NULL,
     CLI_DEVICE_HELP " PageRank runs through the graph executor on every device: in memory "
                     "(rows in the order of --order, one kernel per iteration) or streamed."},
    {"order", 0, "ORDER", "auto",
     "The order of the rows in memory (on one rank, or each rank's own rows over shards); the "
     "scores are the same in any (to rounding) "
     "and stay in the file's ids. degree: rows grouped by in-degree, so that neighbouring rows "
     "run the same loop, and by out-degree within a group, so that the sources most edges read "
     "share the cache; out-degree: by out-degree alone; graph: the file's. auto is degree."},
    CLI_EXEC_OPTS,
    {0}};

static int pagerank_main(int argc, char **argv);

const cli_cmd cli_cmd_pagerank = {
    .name = "pagerank",
    .summary = "Rank the vertices of a graph with PageRank",
    .args = "FILE|SHARDS",
    .min_args = 1,
    .max_args = 1,
    .description =
        "Computes PageRank in double precision: every score starts at 1/N; each iteration sets "
        "x'[v] = (1-d)/N + d * (sum over edges u->v of x[u]/outdeg(u) + dangling/N), where "
        "dangling is the total score of the vertices without out-edges, spread uniformly. A "
        "self-loop is an ordinary out-link and a parallel edge counts once per copy. Edge "
        "weights are ignored. Iterates until the L1 change is below --tol; not converging within "
        "--max-iters is an error. Runs on all cores (or --threads N, or OMP_NUM_THREADS) and gives "
        "the same result for any thread count.\n"
        "Prints the iterations, the time per iteration and the top K vertices as \"rank id "
        "score\" with the ids used in the file, ties broken by the smaller id. For an "
        "undirected edge list, add --undirected.\n"
        "Under a launcher (mpirun -np R) every rank reads the graph, or, given a directory of R "
        "shards (saga partition FILE --shards R), maps its own shard alone and iterates its own "
        "rows, the halo's contributions from their owners each iteration; rank 0 writes every "
        "score.",
    .opts = pagerank_opts,
    .flags = CLI_GRAPH_OPTS | CLI_THREADS,
    .example = "saga pagerank soc-Slashdot0902.txt.gz --top 20 -o scores.txt\n"
               "saga pagerank --undirected karate/edges.txt --tol 1e-12 --json\n"
               "saga partition web-Google.txt.gz --shards 4 -o google.shards && "
               "mpirun -np 4 saga pagerank google.shards",
    .main = pagerank_main,
};

/* ---- top K ----------------------------------------------------------------------------------
 * A min-heap of the K best (score descending, then id ascending). Internal ids are in increasing
 * order of the original ids, so comparing them breaks ties by original id. */

static bool better(const double *x, int32_t a, int32_t b) {
    return x[a] > x[b] || (x[a] == x[b] && a < b);
}

static void sift_down(int32_t *h, int64_t n, int64_t i, const double *x) {
    for (;;) {
        int64_t l = 2 * i + 1, r = l + 1, w = i;
        if (l < n && better(x, h[w], h[l]))
            w = l;
        if (r < n && better(x, h[w], h[r]))
            w = r;
        if (w == i)
            return;
        int32_t t = h[i];
        h[i] = h[w], h[w] = t;
        i = w;
    }
}

/* Fills top[0..k) with the k best vertices, best first. */
static void top_k(int32_t *top, int64_t k, const double *x, int32_t n) {
    int64_t size = 0;
    for (int32_t v = 0; v < n; v++) {
        if (size < k) {
            /* sift up: the heap's root is the worst kept */
            int64_t i = size++;
            top[i] = v;
            while (i > 0 && better(x, top[(i - 1) / 2], top[i])) {
                int32_t t = top[i];
                top[i] = top[(i - 1) / 2], top[(i - 1) / 2] = t;
                i = (i - 1) / 2;
            }
        } else if (k > 0 && better(x, v, top[0])) {
            top[0] = v;
            sift_down(top, size, 0, x);
        }
    }
    /* Pop the worst to the back until sorted best first. */
    for (int64_t end = size - 1; end > 0; end--) {
        int32_t t = top[0];
        top[0] = top[end], top[end] = t;
        sift_down(top, end, 0, x);
    }
}

/* "id score" for each of the n vertices, in order (g's, or ids' over shards). */
static saga_status write_scores(const char *path, const saga_graph *g, const int64_t *ids,
                                int32_t n, const double *x) {
    saga_status st = SAGA_OK;
    enum { BUF = 1 << 16 };
    char *buf = NULL;
    FILE *f = fopen(path, "w");
    SAGA_CHECK(f != NULL, SAGA_ERR_IO, "cannot create '%s': %s", path, strerror(errno));
    SAGA_TRY(saga_alloc_array((void **)&buf, BUF, 1, "score buffer"));
    size_t len = 0;
    for (int32_t v = 0; v < n; v++) {
        char num[40];
        json_format_double(num, sizeof num, x[v]);
        len += (size_t)snprintf(buf + len, BUF - len, "%lld %s\n",
                                (long long)cli_orig_id(g, ids, v), num);
        if (len > BUF - 128 || v == n - 1) {
            SAGA_CHECK(fwrite(buf, 1, len, f) == len, SAGA_ERR_IO, "%s: write failed: %s", path,
                       strerror(errno));
            len = 0;
        }
    }
    int rc = fclose(f);
    f = NULL;
    SAGA_CHECK(rc == 0, SAGA_ERR_IO, "%s: write failed: %s", path, strerror(errno));
fail:
    if (f)
        fclose(f);
    saga_free(buf);
    return st;
}

/* PageRank through saga_net_pagerank on a backend: the same scores as pr_run, in memory or
 * streamed under --device-mem, over the ranks of comm. */
static saga_status pagerank_exec(double **scores, pr_result *r, saga_net_stats *ns,
                                 const saga_graph *g, const saga_net_halo *hx, const pr_opts *po,
                                 saga_vertex_order order, saga_backend *be, const cli_exec *ea,
                                 saga_comm *comm, FILE *trace, bool explain) {
    saga_status st = SAGA_OK;
    saga_ctx *c = NULL;
    saga_net *net = NULL;
    double *x = NULL;
    SAGA_TRY(saga_ctx_new(&c, be, 0));
    saga_net_opts no = cli_exec_net_opts(ea);
    no.comm = comm;
    no.trace = trace;
    no.order = order;
    no.profile_first = po->profile_first;
    no.profile_last = po->profile_last;
    if (hx) { /* over shards: the local graph, the halo's exchanges */
        no.halo = hx;
        no.comm = NULL;
    }
    SAGA_TRY(saga_net_new(&net, c, g, &no));
    int32_t n = saga_graph_n_vertices(g);
    SAGA_TRY(saga_alloc_array((void **)&x, n ? (size_t)n : 1, sizeof *x, "pagerank scores"));
    SAGA_TRY(saga_net_pagerank(net, po->damping, po->tol, po->max_iters, x, &r->iterations,
                               &r->l1_change));
    saga_net_get_stats(net, ns);
    if (explain && saga_comm_rank(comm) == 0)
        SAGA_TRY(saga_net_explain(net, stderr));
    r->seconds = ns->iterate_seconds; /* the iterations alone */
    r->converged = r->l1_change < po->tol;
    *scores = x;
    x = NULL;
fail:
    saga_free(x);
    saga_net_free(&net);
    saga_ctx_free(&c);
    return st;
}

/* One (original id, score) pair of the gather below. */
typedef struct id_score {
    int64_t id;
    double score;
} id_score;

static int cmp_id_score(const void *a, const void *b) {
    const int64_t x = ((const id_score *)a)->id, y = ((const id_score *)b)->id;
    return (x > y) - (x < y);
}

/* Over shards: every rank's own rows' scores (local, their original ids those of sh) to rank 0,
 * which gets them in original-id order in *ids and *x (*n of them; 0 on the other ranks). */
static saga_status shards_gather(saga_comm *comm, const saga_shard *sh, const double *local,
                                 int64_t **ids, double **x, int32_t *n) {
    saga_status st = SAGA_OK;
    id_score *send = NULL, *recv = NULL;
    int64_t all = 0;
    *ids = NULL, *x = NULL, *n = 0;
    SAGA_TRY(saga_alloc_array((void **)&send, (size_t)sh->n_own + 1, sizeof *send, "scores"));
    for (int64_t l = 0; l < sh->n_own; l++)
        send[l] = (id_score){sh->orig_id[l], local[l]};
    SAGA_TRY(cli_shards_gather(comm, send, sh->n_own, sizeof *send, (void **)&recv, &all));
    if (saga_comm_rank(comm) == 0) {
        qsort(recv, (size_t)all, sizeof *recv, cmp_id_score);
        SAGA_TRY(saga_alloc_array((void **)ids, (size_t)all + 1, sizeof **ids, "ids"));
        SAGA_TRY(saga_alloc_array((void **)x, (size_t)all + 1, sizeof **x, "scores"));
        for (int64_t i = 0; i < all; i++)
            (*ids)[i] = recv[i].id, (*x)[i] = recv[i].score;
        *n = (int32_t)all;
    }
fail:
    saga_free(send);
    saga_free(recv);
    return st;
}

static int pagerank_main(int argc, char **argv) {
    cli_ctx c;
    const char *arg = NULL;
    const char *out_path = NULL, *trace_path = NULL;
    FILE *trace = NULL;
    bool allow_unconverged = false, explain = false;
    pr_opts po = pr_opts_defaults();
    int64_t v = 0, k = 10;
    cli_exec ea = cli_exec_defaults();
    const char *device = cli_default_device();
    saga_vertex_order order = SAGA_ORDER_AUTO;
    int o;
    cli_begin(&c, &cli_cmd_pagerank, argc, argv);
    while ((o = cli_next(&c, &arg)) >= 0) {
        int bad = 0;
        switch (o) {
        case OPT_DAMPING:
            bad = cli_double(&c, "--damping", arg, 0, 1, true, &po.damping);
            break;
        case OPT_TOL:
            if (!(bad = cli_double(&c, "--tol", arg, 0, 1, false, &po.tol)) && po.tol <= 0)
                bad = cli_usage(&c, "--tol must be positive, got '%s'", arg);
            break;
        case OPT_MAX_ITERS:
            if (!(bad = cli_int(&c, "--max-iters", arg, 1, 1000000000, &v)))
                po.max_iters = (int)v;
            break;
        case OPT_TOP:
            bad = cli_int(&c, "--top", arg, 0, INT32_MAX, &k);
            break;
        case OPT_OUT:
            out_path = arg;
            break;
        case OPT_TRACE:
            trace_path = arg;
            break;
        case OPT_ALLOW_UNCONVERGED:
            allow_unconverged = true;
            break;
        case OPT_EXPLAIN:
            explain = true;
            break;
        case OPT_PROFILE_ITERATIONS:
            bad = cli_int_range(&c, "--profile-iterations", "iteration", arg, &po.profile_first,
                                &po.profile_last);
            break;
        case OPT_DEVICE:
            device = arg;
            break;
        case OPT_ORDER:
            if (strcmp(arg, "auto") == 0)
                order = SAGA_ORDER_AUTO;
            else if (strcmp(arg, "degree") == 0)
                order = SAGA_ORDER_DEGREE;
            else if (strcmp(arg, "out-degree") == 0)
                order = SAGA_ORDER_OUT_DEGREE;
            else if (strcmp(arg, "graph") == 0)
                order = SAGA_ORDER_GRAPH;
            else
                bad = cli_usage(&c, "--order must be auto, degree, out-degree or graph, got '%s'",
                                arg);
            break;
        default:
            bad = cli_exec_opt(&c, o - OPT_EXEC, arg, &ea);
            break;
        }
        if (bad)
            return bad;
    }
    if (o == CLI_EXIT)
        return c.exit_code;
    if (cli_check_device(&c, device))
        return CLI_USAGE;

    const char *path = c.args[0];
    saga_graph *g = NULL;
    saga_backend *be = NULL;
    double *x = NULL;
    int32_t *top = NULL;
    double load_s = 0;
    pr_result r = {0};
    int rc = CLI_ERROR;
    bool agreed = true; /* a failure every rank knows of (cli_fail_ranks) */
    saga_comm *comm = NULL;
    cli_rank_stats rs = {0};
    /* over shards: the manifest, this rank's shard and its local graph; the scores by original id
     * (rank 0's, gathered) */
    saga_shards_manifest m = {0};
    saga_shard *sh = NULL;
    saga_graph *lg = NULL;
    saga_net_halo hx = {0};
    int64_t *ids = NULL;
    double *local = NULL;
    const bool shards = cli_is_shards(path);
    /* ranks: the executor over them when a launcher started several; each reads the graph, or
     * its own shard of it */
    if (cli_comm_open(&c, &comm) < 0)
        goto fail;
    int32_t n = 0;
    int64_t n_edges = 0;
    char b1[32], b2[32];
    if (shards) {
        double t0 = saga_now();
        if (saga_comm_agree(comm, cli_shards_open(path, comm, &m, &sh, &lg, &hx)) < 0)
            goto fail;
        load_s = saga_now() - t0;
        n = (int32_t)m.n_vertices;
        n_edges = m.data_edges ? m.data_edges : m.n_edges;
        cli_say(&c,
                "graph: %s vertices, %s edges in %d shard%s (rank 0: %lld own rows, %lld "
                "halo rows; mapped in %.3f s)\n",
                cli_count(b1, sizeof b1, n), cli_count(b2, sizeof b2, n_edges), (int)m.n_shards,
                m.n_shards == 1 ? "" : "s", (long long)sh->n_own, (long long)sh->n_halo, load_s);
    } else {
        if (saga_comm_agree(comm, cli_load_graph(&c, &g, path, &load_s)) < 0)
            goto fail;
        n = saga_graph_n_vertices(g);
        n_edges = saga_graph_n_edges(g);
        cli_say(&c, "graph: %s vertices, %s edges%s (loaded in %.3f s)\n",
                cli_count(b1, sizeof b1, n), cli_count(b2, sizeof b2, n_edges),
                saga_graph_has_weights(g) ? ", weights ignored" : "", load_s);
    }
    /* the executor, on the CPU as on a GPU */
    saga_backend_params bp = saga_backend_params_defaults();
    bp.budget_bytes = ea.device_mem;
    if (saga_comm_agree(comm, cli_backend_open(&c, &be, device, comm, &bp)) < 0)
        goto fail;
    saga_net_stats ns = {0};
    if (trace_path && c.rank == 0 && !(trace = fopen(trace_path, "w"))) {
        saga_error(SAGA_ERR_IO, "cannot create '%s': %s", trace_path, strerror(errno));
        agreed = false;
        goto fail;
    }
    if (pagerank_exec(shards ? &local : &x, &r, &ns, shards ? lg : g, shards ? &hx : NULL, &po,
                      order, be, &ea, comm, trace, explain) < 0) {
        agreed = false;
        goto fail;
    }
    if (shards) { /* rank 0 gets every score, by original id; the others none */
        int32_t got = 0;
        if (saga_comm_agree(comm, shards_gather(comm, sh, local, &ids, &x, &got)) < 0)
            goto fail;
        n = got;
    }
    if (trace) {
        int close_rc = ferror(trace) | fclose(trace);
        trace = NULL;
        if (close_rc != 0) {
            saga_error(SAGA_ERR_IO, "%s: write failed: %s", trace_path, strerror(errno));
            agreed = false;
            goto fail;
        }
    }
    if (cli_rank_stats_of(&rs, comm, &ns) < 0) {
        agreed = false;
        goto fail;
    }
    cli_progress_end(&c);
    if (!r.converged) {
        saga_error(SAGA_ERR_NOT_CONVERGED,
                   "pagerank did not converge in %d iterations: L1 change %.3g, tolerance %g "
                   "(raise --max-iters or --tol, or pass --allow-unconverged)",
                   r.iterations, r.l1_change, po.tol);
        if (!allow_unconverged)
            goto fail;
        cli_warn(&c, "%s", saga_last_error());
    }
    double per_iter = r.seconds / r.iterations;
    cli_say(&c, "pagerank: %s in %d iterations (L1 change %.3g), %.3f ms per iteration\n",
            r.converged ? "converged" : "stopped", r.iterations, r.l1_change, per_iter * 1e3);
    cli_say_net_stats(&c, &ns, "");
    if (c.ranks > 1)
        cli_say_rank_stats(&c, &rs, "");

    if (k > n)
        k = n;
    if (saga_alloc_array((void **)&top, (size_t)(k ? k : 1), sizeof *top, "top-k list") < 0)
        goto fail;
    top_k(top, k, x, n);
    if (k > 0) {
        cli_say(&c, "%-6s %-12s %s\n", "rank", "id", "score");
        for (int64_t i = 0; i < k; i++) {
            char num[40];
            json_format_double(num, sizeof num, x[top[i]]);
            cli_say(&c, "%-6lld %-12lld %s\n", (long long)i + 1,
                    (long long)cli_orig_id(g, ids, top[i]), num);
        }
    }
    if (out_path && c.rank == 0) {
        if (write_scores(out_path, g, ids, n, x) < 0) {
            agreed = false;
            goto fail;
        }
        cli_say(&c, "wrote every score to %s\n", out_path);
    }

    if (c.json) {
        json j;
        json_init(&j, stdout);
        json_object_begin(&j);
        json_key(&j, "input"), json_str(&j, path);
        json_key(&j, "vertices"), json_int(&j, n);
        json_key(&j, "edges"), json_int(&j, n_edges);
        json_key(&j, "shards"), json_bool(&j, shards);
        json_key(&j, "damping"), json_num(&j, po.damping);
        json_key(&j, "tol"), json_num(&j, po.tol);
        json_key(&j, "iterations"), json_int(&j, r.iterations);
        json_key(&j, "converged"), json_bool(&j, r.converged);
        json_key(&j, "l1_change"), json_num(&j, r.l1_change);
        json_key(&j, "seconds"), json_num(&j, r.seconds);
        json_key(&j, "seconds_per_iteration"), json_num(&j, per_iter);
        json_key(&j, "load_seconds"), json_num(&j, load_s);
        cli_json_device(&j, be);
        const char *written[2] = {out_path, trace_path};
        cli_json_outputs(&j, written, 2);
        cli_json_net_stats(&j, &ns);
        json_key(&j, "halo_rows"), json_int(&j, rs.halo_rows);
        cli_json_rank_stats(&j, &rs);
        json_key(&j, "top");
        json_array_begin(&j);
        for (int64_t i = 0; i < k; i++) {
            json_object_begin(&j);
            json_key(&j, "rank"), json_int(&j, i + 1);
            json_key(&j, "id"), json_int(&j, cli_orig_id(g, ids, top[i]));
            json_key(&j, "score"), json_num(&j, x[top[i]]);
            json_object_end(&j);
        }
        json_array_end(&j);
        json_object_end(&j);
        json_finish(&j);
    }
    rc = CLI_OK;
fail:
    if (rc != CLI_OK)
        cli_fail_ranks(&c, comm, agreed);
    if (trace)
        fclose(trace);
    cli_rank_stats_free(&rs);
    saga_free(top);
    saga_free(x);
    saga_free(local);
    saga_free(ids);
    saga_graph_free(&g);
    saga_graph_free(&lg);
    saga_shard_close(&sh);
    saga_shards_manifest_free(&m);
    saga_backend_free_all(&be);
    saga_comm_free(&comm);
    return rc;
}
