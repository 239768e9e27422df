/* cmd_partition.c - `saga partition FILE --parts K`: cut a graph into K parts, report the edge
 * cut and the balance, and optionally write every vertex's part; `--shards R -o DIR`: write a
 * shard directory (saga_shards.h) of a graph file or a --data directory; `--check DIR`: verify
 * one. */
#include "commands.h"

#include "saga_dataset.h"
#include "saga_partition.h"
#include "saga_shards.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>

enum {
    OPT_K,
    OPT_METHOD,
    OPT_METHOD_ALIAS_,
    OPT_SEED,
    OPT_OUT,
    OPT_OUT_ALIAS_,
    OPT_SHARDS,
    OPT_PARTS_PER_SHARD,
    OPT_DATA,
    OPT_NO_NORMALIZE,
    OPT_METIS_LIMIT,
    OPT_CHECK,
};
static const cli_opt partition_opts[] = {
    {"parts", 'k', "K", NULL,
     "Number of parts (required without --shards), 1 up to the number of vertices; the same "
     "--parts as a streamed run's."},
    {"partition", 0, "METHOD", "metis",
     "metis, contiguous (equal id ranges), random (seeded) or fennel (one streaming pass, for "
     "graphs METIS cannot take); the same --partition as a streamed run's."},
    CLI_ALIAS("method"),
    {"seed", 0, "S", "1", "Seed for METIS and for random."},
    {"output", 'o', "PATH", NULL,
     "Write \"id part\" for every vertex, with the ids of the file; with --shards, the "
     "directory to write the shards to (required)."},
    CLI_ALIAS("out"),
    {"shards", 0, "R", NULL,
     "Write R shards, one per rank, to the directory -o names: a manifest and one file a rank "
     "maps (its rows' in-edges in local ids, its halo grouped by owner, send lists, out-degrees, "
     "original ids, and with --data its features, labels and split), every 1 MiB chunk "
     "checksummed."},
    {"parts-per-shard", 0, "P", "1",
     "With --shards: cut R x P parts, dealt to the shards as contiguous ranges balanced by rows "
     "plus in-edges."},
    {"data", 0, "DIR", NULL,
     "With --shards, instead of FILE: a data set in the layout `saga gcn --data` reads, loaded "
     "as it loads it (features row-normalised unless --no-normalize-features)."},
    {"no-normalize-features", 0, NULL, NULL,
     "With --data: keep the features as read (as `saga gcn --no-normalize-features`)."},
    {"metis-limit", 0, "N", "0",
     "The most adjacency entries (both directions of every edge) to give METIS; a larger graph, "
     "or one METIS runs out of memory on, is cut by fennel instead, with a warning. 0: as many "
     "as this METIS build's indices hold."},
    {"check", 0, "DIR", NULL,
     "Verify the shard directory DIR instead: its manifest, every shard's checksums and "
     "structure, the send lists against the halos they fill, and the source files that still "
     "exist against their recorded sizes and checksums."},
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
    .args = "[FILE]",
    .min_args = 0,
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
        "part by part, which is how saga lays out a graph for streaming.\n"
        "With --shards R the partition is made once, here, for a run over R ranks: each shard "
        "holds one rank's rows (those whose in-neighbours are all its own first), their in-edges "
        "in local ids in the graph's order, the halo (other shards' rows with an edge into them, "
        "grouped by owner), the rows it sends each other shard, global out-degrees, original "
        "ids, and with --data the features, labels and train/val/test rows of its own rows. "
        "The manifest, written last, records the counts, options, method, edge cut, each "
        "shard's rows, size and header checksum, and the sources' sizes and CRC-32s: a damaged, "
        "mixed or stale directory is refused when a shard is opened, and --check verifies all "
        "of it.",
    .opts = partition_opts,
    .flags = CLI_GRAPH_OPTS | CLI_THREADS,
    .example =
        "saga partition ca-GrQc.txt.gz --parts 8\n"
        "saga partition edges.txt --parts 4 --partition random --seed 7 -o parts.txt --json\n"
        "saga partition --data datasets/cora --shards 4 -o cora.shards\n"
        "saga partition --check cora.shards",
    .main = partition_main,
};

/* The files of a data directory that exist, for the manifest's sources. */
static int data_sources(const char *dir, char paths[][4200], int cap) {
    static const char *const names[] = {"edges.txt",       "edges.txt.gz", "features.txt",
                                        "features.txt.gz", "labels.txt",   "classes.txt",
                                        "train_idx.txt",   "val_idx.txt",  "test_idx.txt"};
    int n = 0;
    for (size_t i = 0; i < sizeof names / sizeof names[0] && n < cap; i++) {
        struct stat sb;
        snprintf(paths[n], 4200, "%s/%s", dir, names[i]);
        if (stat(paths[n], &sb) == 0 && S_ISREG(sb.st_mode))
            n++;
    }
    return n;
}

static int check_main(cli_ctx *c, const char *dir) {
    saga_shards_manifest m = {0};
    int32_t missing = 0;
    double t0 = saga_now();
    if (saga_shards_manifest_read(&m, dir) < 0 || saga_shards_check(dir, &missing) < 0) {
        saga_shards_manifest_free(&m);
        return cli_fail(c);
    }
    double secs = saga_now() - t0;
    char b1[32], b2[32];
    cli_say(c,
            "%s: %d shards of %s vertices and %s edges (%s, %d part%s per shard), all "
            "checksums and structure verified in %.3f s\n",
            dir, (int)m.n_shards, cli_count(b1, sizeof b1, m.n_vertices),
            cli_count(b2, sizeof b2, m.n_edges), saga_partition_method_name(m.method),
            (int)m.parts_per_shard, m.parts_per_shard == 1 ? "" : "s", secs);
    if (m.n_sources)
        cli_say(c, "sources: %d of %d checked against their sizes and CRC-32s%s\n",
                (int)(m.n_sources - missing), (int)m.n_sources,
                missing ? " (the others no longer exist)" : "");
    if (c->json) {
        json j;
        json_init(&j, stdout);
        json_object_begin(&j);
        json_key(&j, "check"), json_str(&j, dir);
        json_key(&j, "ok"), json_bool(&j, true);
        json_key(&j, "shards"), json_int(&j, m.n_shards);
        json_key(&j, "vertices"), json_int(&j, m.n_vertices);
        json_key(&j, "edges"), json_int(&j, m.n_edges);
        json_key(&j, "method"), json_str(&j, saga_partition_method_name(m.method));
        json_key(&j, "sources"), json_int(&j, m.n_sources);
        json_key(&j, "sources_missing"), json_int(&j, missing);
        json_key(&j, "seconds"), json_num(&j, secs);
        json_object_end(&j);
        json_finish(&j);
    }
    saga_shards_manifest_free(&m);
    return CLI_OK;
}

/* --shards: the graph file (graph) or the data directory (data_dir) to out_dir. */
static int shards_main(cli_ctx *c, const char *file, const char *data_dir, const char *out_dir,
                       const saga_shards_opts *so, bool normalize) {
    saga_graph *g = NULL;
    saga_dataset d = {0};
    saga_shards_input in = {0};
    char src[9][4200], build[256];
    const char *srcp[9];
    double load_s = 0;
    int rc = CLI_ERROR;
    if (data_dir) {
        saga_dataset_opts dso = saga_dataset_opts_defaults();
        dso.normalize_features = normalize;
        double t0 = saga_now();
        if (saga_dataset_load(&d, data_dir, &dso) < 0)
            goto fail;
        load_s = saga_now() - t0;
        in.graph = d.graph;
        in.features = &d.features;
        in.labels = d.labels;
        in.n_classes = d.n_classes;
        in.split[0] = d.train, in.split_n[0] = d.n_train;
        in.split[1] = d.val, in.split_n[1] = d.n_val;
        in.split[2] = d.test, in.split_n[2] = d.n_test;
        in.n_sources = data_sources(data_dir, src, 9);
        in.data_edges = d.n_edges;
        snprintf(build, sizeof build, "data set; features %s",
                 normalize ? "row-normalised" : "as read");
    } else {
        if (cli_load_graph(c, &g, file, &load_s) < 0)
            goto fail;
        in.graph = g;
        snprintf(src[0], sizeof src[0], "%s", file);
        in.n_sources = 1;
        saga_graph_opts b;
        if (saga_graph_build_opts(g, &b))
            snprintf(build, sizeof build, "graph file; %s, self-loops %s, duplicates %d",
                     b.undirected ? "undirected" : "directed",
                     b.self_loops == SAGA_SELF_LOOPS_DROP ? "dropped" : "kept", (int)b.duplicates);
        else
            snprintf(build, sizeof build, "graph file");
    }
    for (int i = 0; i < in.n_sources; i++)
        srcp[i] = src[i];
    in.sources = srcp;
    in.build = build;
    char b1[32], b2[32], b3[32];
    cli_say(c, "graph: %s vertices, %s edges (loaded in %.3f s)\n",
            cli_count(b1, sizeof b1, saga_graph_n_vertices(in.graph)),
            cli_count(b2, sizeof b2, saga_graph_n_edges(in.graph)), load_s);
    saga_shards_info info;
    if (saga_shards_write(out_dir, &in, so, &info) < 0)
        goto fail;
    int64_t m = saga_graph_n_edges(in.graph);
    cli_say(c, "partition: %s, %d parts (%.3f s); edge cut %s of %s edges (%.2f%%)\n",
            saga_partition_method_name(info.method), (int)(so->shards * so->parts_per_shard),
            info.partition_seconds, cli_count(b1, sizeof b1, info.edge_cut),
            cli_count(b2, sizeof b2, m), m ? 100.0 * (double)info.edge_cut / (double)m : 0.0);
    cli_say(c, "wrote %d shards to %s in %.3f s: halos of %lld to %lld rows, files of %s to %s\n",
            (int)so->shards, out_dir, info.write_seconds, (long long)info.halo_min,
            (long long)info.halo_max, cli_bytes(b3, sizeof b3, info.bytes_min),
            cli_bytes(b1, sizeof b1, info.bytes_max));
    if (c->json) {
        json j;
        json_init(&j, stdout);
        json_object_begin(&j);
        json_key(&j, "input"), json_str(&j, data_dir ? data_dir : file);
        json_key(&j, "vertices"), json_int(&j, saga_graph_n_vertices(in.graph));
        json_key(&j, "edges"), json_int(&j, m);
        json_key(&j, "shards"), json_int(&j, so->shards);
        json_key(&j, "parts_per_shard"), json_int(&j, so->parts_per_shard);
        json_key(&j, "method"), json_str(&j, saga_partition_method_name(info.method));
        json_key(&j, "seed"), json_int(&j, (int64_t)so->partition.seed);
        json_key(&j, "edge_cut"), json_int(&j, info.edge_cut);
        json_key(&j, "halo_min"), json_int(&j, info.halo_min);
        json_key(&j, "halo_max"), json_int(&j, info.halo_max);
        json_key(&j, "bytes_min"), json_int(&j, info.bytes_min);
        json_key(&j, "bytes_max"), json_int(&j, info.bytes_max);
        json_key(&j, "partition_seconds"), json_num(&j, info.partition_seconds);
        json_key(&j, "write_seconds"), json_num(&j, info.write_seconds);
        json_key(&j, "load_seconds"), json_num(&j, load_s);
        cli_json_outputs(&j, &out_dir, 1);
        json_object_end(&j);
        json_finish(&j);
    }
    rc = CLI_OK;
fail:
    if (rc != CLI_OK)
        cli_fail(c);
    saga_graph_free(&g);
    saga_dataset_free(&d);
    return rc;
}

static int partition_main(int argc, char **argv) {
    cli_ctx c;
    const char *arg = NULL, *out_path = NULL, *data_dir = NULL, *check_dir = NULL;
    int64_t k = 0, shards = 0, pps = 0, limit = 0;
    uint64_t seed = 1;
    bool normalize = true, normalize_given = false;
    saga_partition_opts po = saga_partition_opts_defaults();
    int o;
    cli_begin(&c, &cli_cmd_partition, argc, argv);
    while ((o = cli_next(&c, &arg)) >= 0) {
        int bad = 0;
        switch (o) {
        case OPT_K:
            bad = cli_int(&c, "--parts", arg, 1, INT32_MAX, &k);
            break;
        case OPT_METHOD: {
            int m = 0;
            while (m < SAGA_PARTITION_METHOD_COUNT &&
                   strcmp(arg, saga_partition_method_name((saga_partition_method)m)) != 0)
                m++;
            if (m < SAGA_PARTITION_METHOD_COUNT)
                po.method = (saga_partition_method)m;
            else
                bad = cli_usage(
                    &c, "--partition must be metis, contiguous, random or fennel, got '%s'", arg);
            break;
        }
        case OPT_SEED:
            bad = cli_u64(&c, "--seed", arg, &seed);
            break;
        case OPT_OUT:
            out_path = arg;
            break;
        case OPT_SHARDS:
            bad = cli_int(&c, "--shards", arg, 1, INT32_MAX, &shards);
            break;
        case OPT_PARTS_PER_SHARD:
            bad = cli_int(&c, "--parts-per-shard", arg, 1, INT32_MAX, &pps);
            break;
        case OPT_DATA:
            data_dir = arg;
            break;
        case OPT_NO_NORMALIZE:
            normalize = false;
            normalize_given = true;
            break;
        case OPT_METIS_LIMIT:
            bad = cli_int(&c, "--metis-limit", arg, 0, INT64_MAX, &limit);
            break;
        case OPT_CHECK:
            check_dir = arg;
            break;
        }
        if (bad)
            return bad;
    }
    if (o == CLI_EXIT)
        return c.exit_code;
    po.seed = seed;
    po.metis_max_entries = limit;
    if (check_dir) {
        if (c.n_args || shards || k || data_dir || out_path)
            return cli_usage(&c, "--check DIR takes nothing else (no FILE, --shards, --parts, "
                                 "--data or -o)");
        return check_main(&c, check_dir);
    }
    if (shards) {
        if (k)
            return cli_usage(&c, "--shards cuts R x --parts-per-shard parts: drop --parts");
        if (!out_path)
            return cli_usage(&c, "--shards needs -o DIR, the directory to write the shards to");
        if (!!data_dir == (c.n_args == 1))
            return cli_usage(&c, "--shards needs a graph FILE or --data DIR (one of them)");
        if (normalize_given && !data_dir)
            return cli_usage(&c, "--no-normalize-features goes with --data");
        if (pps && shards * pps > INT32_MAX)
            return cli_usage(&c, "--shards x --parts-per-shard must fit 32 bits");
        saga_shards_opts so = saga_shards_opts_defaults();
        so.shards = (int32_t)shards;
        so.parts_per_shard = pps ? (int32_t)pps : 1;
        so.partition = po;
        return shards_main(&c, c.n_args ? c.args[0] : NULL, data_dir, out_path, &so, normalize);
    }
    if (data_dir || pps || normalize_given)
        return cli_usage(&c, "--data, --parts-per-shard and --no-normalize-features go with "
                             "--shards");
    if (c.n_args != 1)
        return cli_usage(&c, "a graph FILE is required");
    if (k == 0)
        return cli_usage(&c, "--parts K (or -k K) is required");

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
