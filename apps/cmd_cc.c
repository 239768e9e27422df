/* cmd_cc.c - `saga cc FILE`: weakly connected components, their count and sizes. */
#include "cc.h"
#include "commands.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

enum {
    OPT_TOP,
    OPT_OUT,
    OPT_OUT_ALIAS_,
    OPT_DEVICE,
    OPT_EXEC /* the CLI_EXEC_N_OPTS options of CLI_EXEC_OPTS */
};
static const cli_opt cc_opts[] = {
    {"top", 0, "K", "10", "Print the K largest components (0: none)."},
    {"output", 'o', "FILE", NULL,
     "Write \"id component\" for every vertex, the component named by its smallest id."},
    CLI_ALIAS("out"),
    {"device", 0, "DEV", NULL, CLI_DEVICE_HELP},
    CLI_EXEC_OPTS,
    {0}};

static int cc_main(int argc, char **argv);

const cli_cmd cli_cmd_cc = {
    .name = "cc",
    .summary = "Find the weakly connected components of a graph",
    .args = "FILE|SHARDS",
    .min_args = 1,
    .max_args = 1,
    .description =
        "Label propagation written as a vertex program: every vertex starts with its own label "
        "and repeatedly takes the largest among its neighbours' (Scatter, Gather max, "
        "ApplyVertex), until nothing changes. Edge direction is ignored: a text file is read as "
        "undirected (as with --undirected), and an .sgr that holds a directed graph is "
        "symmetrized after loading, so the components are the weakly connected ones whatever "
        "the input, and an .sgr gives the same as the file it was made from. A component is "
        "named by the smallest vertex id in it, as written in the file. Up to 2^24 vertices.\n"
        "Under a launcher (mpirun -np R) every rank reads the graph, or, given a directory of R "
        "shards of an undirected graph (saga partition FILE --undirected --shards R), maps its "
        "own shard alone; rank 0 writes every vertex's component.",
    .opts = cc_opts,
    .flags = CLI_GRAPH_OPTS | CLI_THREADS,
    .example = "saga cc email-Eu-core.txt.gz --top 5\n"
               "saga cc edges.txt -o components.txt --json",
    .main = cc_main,
};

static void progress(void *ud, int iteration) {
    cli_progress(ud, "cc: round %d", iteration);
}

/* Components by size, largest first, ties by the smaller name. */
static const int32_t *sort_sizes;
static int by_size(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    if (sort_sizes[x] != sort_sizes[y])
        return sort_sizes[x] > sort_sizes[y] ? -1 : 1;
    return (x > y) - (x < y);
}

/* Over shards: rank 0's components of every vertex of the whole graph, gathered from each rank's
 * own rows (comp, by local row) into *all (by the whole graph's vertex, its smallest vertex) and
 * *ids (every vertex's original id); the others get NULL. */
typedef struct cc_row {
    int32_t vertex, comp;
    int64_t id;
} cc_row;

static saga_status cc_gather(saga_comm *comm, const saga_shard *sh, const int32_t *comp,
                             int64_t n_all, int32_t **all, int64_t **ids) {
    saga_status st = SAGA_OK;
    cc_row *send = NULL, *recv = NULL;
    int64_t got = 0;
    *all = NULL, *ids = NULL;
    SAGA_TRY(saga_alloc_array((void **)&send, (size_t)sh->n_own + 1, sizeof *send, "components"));
    for (int64_t l = 0; l < sh->n_own; l++)
        send[l] = (cc_row){sh->vertex[l], comp[l], sh->orig_id[l]};
    SAGA_TRY(cli_shards_gather(comm, send, sh->n_own, sizeof *send, (void **)&recv, &got));
    if (saga_comm_rank(comm) == 0) {
        SAGA_CHECK(got == n_all, SAGA_ERR_CORRUPT, "cc: the shards hold %lld own rows, not %lld",
                   (long long)got, (long long)n_all);
        SAGA_TRY(saga_alloc_array((void **)all, (size_t)n_all + 1, sizeof **all, "components"));
        SAGA_TRY(saga_alloc_array((void **)ids, (size_t)n_all + 1, sizeof **ids, "ids"));
        for (int64_t i = 0; i < got; i++)
            (*all)[recv[i].vertex] = recv[i].comp, (*ids)[recv[i].vertex] = recv[i].id;
    }
fail:
    saga_free(send);
    saga_free(recv);
    return st;
}

static int cc_main(int argc, char **argv) {
    cli_ctx c;
    const char *arg = NULL, *out_path = NULL, *device = cli_default_device();
    int64_t k = 10;
    cli_exec ex = cli_exec_defaults();
    int o;
    cli_begin(&c, &cli_cmd_cc, argc, argv);
    while ((o = cli_next(&c, &arg)) >= 0) {
        int bad = 0;
        switch (o) {
        case OPT_TOP:
            bad = cli_int(&c, "--top", arg, 0, INT32_MAX, &k);
            break;
        case OPT_OUT:
            out_path = arg;
            break;
        case OPT_DEVICE:
            device = arg;
            break;
        default:
            bad = cli_exec_opt(&c, o - OPT_EXEC, arg, &ex);
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
    int32_t *comp = NULL, *size = NULL, *names = NULL;
    double load_s = 0;
    cc_result r = {0};
    int rc = CLI_ERROR;
    bool agreed = true; /* a failure every rank knows of (cli_fail_ranks) */
    saga_comm *comm = NULL;
    cli_rank_stats rs = {0};
    /* Weak connectivity is that of the undirected graph. A text file is built undirected as it
     * loads, in place; an .sgr holds a graph built already, which cc_run symmetrizes when it is
     * directed (the loader's --undirected would refuse a version 1 file, whose build it cannot
     * know, and cc needs none of it). */
    saga_format fmt = c.load.format;
    if (fmt == SAGA_FORMAT_AUTO && saga_format_detect(path, &fmt) < 0)
        fmt = SAGA_FORMAT_AUTO; /* the loader reports what is wrong with the file */
    if (fmt != SAGA_FORMAT_SGR)
        c.load.graph.undirected = true;
    /* over shards: the manifest, this rank's shard and its local graph; every vertex's original
     * id (rank 0's, gathered) */
    saga_shards_manifest sm = {0};
    saga_shard *sh = NULL;
    saga_graph *lg = NULL;
    saga_net_halo hx = {0};
    int64_t *ids = NULL;
    int32_t *local = NULL;
    const bool shards = cli_is_shards(path);
    /* ranks: the executor over them when a launcher started several; each reads the graph and
     * symmetrizes it the same way, or maps its own shard */
    if (cli_comm_open(&c, &comm) < 0)
        goto fail;
    int32_t n = 0;
    if (shards) {
        double t0 = saga_now();
        saga_status so = cli_shards_open(path, comm, &sm, &sh, &lg, &hx);
        if (so >= 0 && sm.symmetric != 1)
            so = saga_error(SAGA_ERR_UNSUPPORTED,
                            "%s: cc over shards needs the shards of an undirected graph (every "
                            "edge both ways), as each rank holds its rows' in-edges alone: write "
                            "them of the file read with --undirected (saga partition FILE "
                            "--undirected --shards R)",
                            path);
        if (saga_comm_agree(comm, so) < 0)
            goto fail;
        load_s = saga_now() - t0;
        n = (int32_t)sm.n_vertices;
    } else {
        if (saga_comm_agree(comm, cli_load_graph(&c, &g, path, &load_s)) < 0)
            goto fail;
        n = saga_graph_n_vertices(g);
    }
    char b1[32], b2[32];
    saga_backend_params bp = saga_backend_params_defaults();
    bp.budget_bytes = ex.device_mem;
    bool exec = cli_exec_wanted(&ex) || c.ranks > 1 || shards;
    saga_net_opts no = cli_exec_net_opts(&ex);
    no.comm = comm;
    if (shards) { /* a rank's local graph, the halo's labels from their owners */
        no.halo = &hx;
        no.comm = NULL;
    }
    saga_net_stats ns = {0};
    if (saga_comm_agree(comm, cli_backend_open(&c, &be, device, comm, &bp)) < 0)
        goto fail;
    if ((exec ? cc_run_net(shards ? &local : &comp, &r, be, shards ? lg : g, &no,
                           shards ? sh->vertex : NULL, n, &ns, progress, &c)
              : cc_run(&comp, &r, be, g, progress, &c)) < 0 ||
        (exec && cli_rank_stats_of(&rs, comm, &ns) < 0)) {
        agreed = false;
        goto fail;
    }
    if (shards) { /* rank 0 gets every vertex's component; the others count none */
        int64_t e = saga_graph_n_edges(lg);
        if (saga_comm_agree(comm, cc_gather(comm, sh, local, n, &comp, &ids)) < 0 ||
            saga_comm_agree(comm, saga_comm_allreduce(comm, &e, 1, SAGA_I64, SAGA_COMM_SUM, NULL)) <
                0)
            goto fail;
        r.n_edges = e; /* every edge both ways, each held by its destination's shard */
        if (c.rank != 0)
            n = 0;
        /* the counts cc_run_net leaves to the caller: a component is named by its smallest
         * vertex, which is its own */
        int32_t *cnt = NULL;
        if (saga_alloc_zeroed((void **)&cnt, n ? (size_t)n : 1, sizeof *cnt, "sizes") < 0)
            goto fail;
        for (int32_t v = 0; v < n; v++) {
            r.n_components += comp[v] == v;
            if (++cnt[comp[v]] > r.largest)
                r.largest = cnt[comp[v]];
        }
        saga_free(cnt);
    }
    cli_progress_end(&c);
    /* weak connectivity: cc_run symmetrized a graph that did not hold both directions */
    cli_say(&c, "graph: %s vertices, %s edges both ways%s (loaded in %.3f s)\n",
            cli_count(b1, sizeof b1, n), cli_count(b2, sizeof b2, r.n_edges),
            r.symmetrized ? ", symmetrized" : "", load_s);
    cli_say(&c, "cc: %s components in %d rounds (%.3f s); the largest has %s vertices\n",
            cli_count(b1, sizeof b1, r.n_components), r.iterations, r.seconds,
            cli_count(b2, sizeof b2, r.largest));
    if (exec)
        cli_say_net_stats(&c, &ns, " per round");
    if (c.ranks > 1)
        cli_say_rank_stats(&c, &rs, " in the last round");

    /* the components, named by their smallest vertex, largest first */
    if (saga_alloc_zeroed((void **)&size, n ? (size_t)n : 1, sizeof *size, "component sizes") < 0 ||
        saga_alloc_array((void **)&names, r.n_components ? (size_t)r.n_components : 1,
                         sizeof *names, "component list") < 0)
        goto fail;
    int32_t m = 0;
    for (int32_t v = 0; v < n; v++)
        if (size[comp[v]]++ == 0)
            names[m++] = comp[v];
    sort_sizes = size;
    qsort(names, (size_t)m, sizeof *names, by_size);
    if (k > m)
        k = m;
    if (k > 0) {
        cli_say(&c, "%-6s %-12s %s\n", "rank", "component", "vertices");
        for (int64_t i = 0; i < k; i++)
            cli_say(&c, "%-6lld %-12lld %d\n", (long long)i + 1,
                    (long long)cli_orig_id(g, ids, names[i]), size[names[i]]);
    }
    if (out_path && c.rank == 0) {
        if (cli_write_vertex_values_of(out_path, g, ids, n, comp, true) < 0) {
            agreed = false;
            goto fail;
        }
        cli_say(&c, "wrote every vertex's component to %s\n", out_path);
    }
    if (c.json) {
        json j;
        json_init(&j, stdout);
        json_object_begin(&j);
        json_key(&j, "input"), json_str(&j, path);
        json_key(&j, "vertices"), json_int(&j, n);
        json_key(&j, "edges"), json_int(&j, r.n_edges);
        json_key(&j, "symmetrized"), json_bool(&j, r.symmetrized);
        json_key(&j, "components"), json_int(&j, r.n_components);
        json_key(&j, "largest"), json_int(&j, r.largest);
        json_key(&j, "iterations"), json_int(&j, r.iterations);
        json_key(&j, "seconds"), json_num(&j, r.seconds);
        json_key(&j, "load_seconds"), json_num(&j, load_s);
        cli_json_device(&j, be);
        cli_json_outputs(&j, &out_path, 1);
        if (exec) {
            cli_json_net_stats(&j, &ns);
            json_key(&j, "halo_rows"), json_int(&j, rs.halo_rows);
            cli_json_rank_stats(&j, &rs);
        }
        json_key(&j, "top");
        json_array_begin(&j);
        for (int64_t i = 0; i < k; i++) {
            json_object_begin(&j);
            json_key(&j, "component"), json_int(&j, cli_orig_id(g, ids, names[i]));
            json_key(&j, "vertices"), json_int(&j, size[names[i]]);
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
    cli_rank_stats_free(&rs);
    saga_free(ids);
    saga_free(local);
    saga_graph_free(&lg);
    saga_shard_close(&sh);
    saga_shards_manifest_free(&sm);
    saga_free(names);
    saga_free(size);
    saga_free(comp);
    saga_backend_free_all(&be);
    saga_graph_free(&g);
    saga_comm_free(&comm);
    return rc;
}
