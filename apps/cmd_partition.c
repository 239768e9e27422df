/* cmd_partition.c - `saga partition FILE --parts K`: cut a graph into K parts, report the edge
 * cut and the balance, and optionally write every vertex's part. */
#include "commands.h"

#include "saga_partition.h"

#include <errno.h>
#include <string.h>

enum { OPT_K, OPT_METHOD, OPT_METHOD_ALIAS_, OPT_SEED, OPT_OUT, OPT_OUT_ALIAS_ };
static const cli_opt partition_opts[] = {
    {"parts", 'k', "K", NULL,
     "Number of parts (required), 1 up to the number of vertices; the same --parts as a streamed "
     "run's."},
    {"partition", 0, "METHOD", "metis",
     "metis, contiguous (equal id ranges) or random (seeded); the same --partition as a streamed "
     "run's."},
    CLI_ALIAS("method"),
    {"seed", 0, "S", "1", "Seed for METIS and for random."},
    {"output", 'o', "FILE", NULL, "Write \"id part\" for every vertex, with the ids of the file."},
    CLI_ALIAS("out"),
    {0}};

static int partition_main(int argc, char **argv);

/* halo[q]: the vertices outside part q with an edge into it (the rows a streamed run loads
 * beside part q's own, each counted once per part). NULL when out of memory. */
static int64_t *halo_sizes(const saga_graph *g, const saga_partition *p) {
    int64_t *halo = NULL;
    int32_t *seen = NULL;
    if (saga_alloc_zeroed((void **)&halo, (size_t)p->n_parts, sizeof *halo, "halo sizes") < 0 ||
        saga_alloc_array((void **)&seen, (size_t)p->n_vertices + 1, sizeof *seen, "halo marks") <
            0) {
        saga_free(halo);
        return NULL;
    }
    for (int32_t u = 0; u < p->n_vertices; u++)
        seen[u] = -1;
    saga_csr in = saga_graph_in(g);
    for (int32_t q = 0; q < p->n_parts; q++)
        for (int64_t i = p->offsets[q]; i < p->offsets[q + 1]; i++) {
            int32_t v = p->perm[i];
            for (int64_t e = in.offsets[v]; e < in.offsets[v + 1]; e++) {
                int32_t u = in.indices[e];
                if (p->part[u] != q && seen[u] != q) {
                    seen[u] = q;
                    halo[q]++;
                }
            }
        }
    saga_free(seen);
    return halo;
}

const cli_cmd cli_cmd_partition = {
    .name = "partition",
    .summary = "Cut a graph into K parts (METIS) and report the edge cut",
    .args = "FILE",
    .min_args = 1,
    .max_args = 1,
    .description =
        "Partitions the graph into K parts: METIS k-way on the symmetrized graph (self-loops and "
        "repeated edges removed), equal ranges of vertex ids (contiguous), or a seeded shuffle "
        "cut into equal ranges (random, a baseline). The edge cut counts the graph's directed "
        "edges whose endpoints lie in different parts (an undirected graph's edge counts once "
        "per direction); the balance is the largest part's size over the mean size. A part's halo "
        "is "
        "the vertices of other parts with an edge into it (the rows a streamed run loads beside "
        "the part's own); --json lists the parts' sizes and halos. Vertices are then renumbered "
        "part by part, which is how saga lays out a graph for streaming.",
    .opts = partition_opts,
    .flags = CLI_GRAPH_OPTS | CLI_THREADS,
    .example = "saga partition ca-GrQc.txt.gz --parts 8\n"
               "saga partition edges.txt --parts 4 --partition random --seed 7 -o parts.txt --json",
    .main = partition_main,
};

static int partition_main(int argc, char **argv) {
    cli_ctx c;
    const char *arg = NULL, *out_path = NULL;
    int64_t k = 0;
    uint64_t seed = 1;
    saga_partition_opts po = saga_partition_opts_defaults();
    int o;
    cli_begin(&c, &cli_cmd_partition, argc, argv);
    while ((o = cli_next(&c, &arg)) >= 0) {
        int bad = 0;
        switch (o) {
        case OPT_K:
            bad = cli_int(&c, "--parts", arg, 1, INT32_MAX, &k);
            break;
        case OPT_METHOD:
            if (strcmp(arg, "metis") == 0)
                po.method = SAGA_PARTITION_METIS;
            else if (strcmp(arg, "contiguous") == 0)
                po.method = SAGA_PARTITION_CONTIGUOUS;
            else if (strcmp(arg, "random") == 0)
                po.method = SAGA_PARTITION_RANDOM;
            else
                bad =
                    cli_usage(&c, "--partition must be metis, contiguous or random, got '%s'", arg);
            break;
        case OPT_SEED:
            bad = cli_u64(&c, "--seed", arg, &seed);
            break;
        case OPT_OUT:
            out_path = arg;
            break;
        }
        if (bad)
            return bad;
    }
    if (o == CLI_EXIT)
        return c.exit_code;
    if (k == 0)
        return cli_usage(&c, "--parts K (or -k K) is required");
    po.seed = seed;

    const char *path = c.args[0];
    saga_graph *g = NULL;
    saga_partition *p = NULL;
    int64_t *halo = NULL;
    double load_s = 0;
    int rc = CLI_ERROR;
    if (cli_load_graph(&c, &g, path, &load_s) < 0)
        goto fail;
    int32_t n = saga_graph_n_vertices(g);
    int64_t m = saga_graph_n_edges(g);
    char b1[32], b2[32];
    cli_say(&c, "graph: %s vertices, %s edges (loaded in %.3f s)\n", cli_count(b1, sizeof b1, n),
            cli_count(b2, sizeof b2, m), load_s);
    if (saga_partition_graph(&p, g, (int32_t)k, &po) < 0)
        goto fail;
    if (!(halo = halo_sizes(g, p)))
        goto fail;
    int64_t smallest = INT64_MAX, largest = 0, halo_min = INT64_MAX, halo_max = 0, halo_sum = 0;
    for (int32_t q = 0; q < p->n_parts; q++) {
        int64_t s = p->offsets[q + 1] - p->offsets[q];
        smallest = s < smallest ? s : smallest;
        largest = s > largest ? s : largest;
        halo_min = halo[q] < halo_min ? halo[q] : halo_min;
        halo_max = halo[q] > halo_max ? halo[q] : halo_max;
        halo_sum += halo[q];
    }
    cli_say(&c, "partition: %s, %d parts of %lld to %lld vertices (%.3f s)\n",
            saga_partition_method_name(po.method), (int)p->n_parts, (long long)smallest,
            (long long)largest, p->seconds);
    cli_say(&c, "edge cut: %s of %s edges (%.2f%%)\nbalance: %.3f\n",
            cli_count(b1, sizeof b1, p->edge_cut), cli_count(b2, sizeof b2, m),
            m ? 100.0 * (double)p->edge_cut / (double)m : 0.0, p->balance);
    cli_say(&c, "halos: %lld to %lld vertices per part, %s in all\n", (long long)halo_min,
            (long long)halo_max, cli_count(b1, sizeof b1, halo_sum));
    if (out_path) {
        if (cli_write_vertex_values(out_path, g, p->part, false) < 0)
            goto fail;
        cli_say(&c, "wrote every vertex's part to %s\n", out_path);
    }
    if (c.json) {
        json j;
        json_init(&j, stdout);
        json_object_begin(&j);
        json_key(&j, "input"), json_str(&j, path);
        json_key(&j, "vertices"), json_int(&j, n);
        json_key(&j, "edges"), json_int(&j, m);
        json_key(&j, "method"), json_str(&j, saga_partition_method_name(po.method));
        json_key(&j, "parts"), json_int(&j, p->n_parts);
        json_key(&j, "seed"), json_int(&j, (int64_t)seed);
        json_key(&j, "edge_cut"), json_int(&j, p->edge_cut);
        json_key(&j, "balance"), json_num(&j, p->balance);
        json_key(&j, "seconds"), json_num(&j, p->seconds);
        json_key(&j, "sizes");
        json_array_begin(&j);
        for (int32_t q = 0; q < p->n_parts; q++)
            json_int(&j, p->offsets[q + 1] - p->offsets[q]);
        json_array_end(&j);
        json_key(&j, "halos");
        json_array_begin(&j);
        for (int32_t q = 0; q < p->n_parts; q++)
            json_int(&j, halo[q]);
        json_array_end(&j);
        json_key(&j, "load_seconds"), json_num(&j, load_s);
        cli_json_device(&j, NULL);
        cli_json_outputs(&j, &out_path, 1);
        json_object_end(&j);
        json_finish(&j);
    }
    rc = CLI_OK;
fail:
    if (rc != CLI_OK)
        cli_fail(&c);
    saga_free(halo);
    saga_partition_free(&p);
    saga_graph_free(&g);
    return rc;
}
