/* cmd_info.c - `saga info FILE`: counts, degrees and load speed of a graph file. */
#include "commands.h"

static const cli_opt info_opts[] = {{0}};

static int info_main(int argc, char **argv);

const cli_cmd cli_cmd_info = {
    .name = "info",
    .summary = "Load a graph and print its counts, degrees and load speed",
    .args = "FILE",
    .min_args = 1,
    .max_args = 1,
    .description =
        "Loads FILE (an edge list, plain or gzip; Matrix Market; METIS; or an .sgr cache) with the "
        "loading options below and prints its format, vertex and edge counts, whether it is "
        "weighted, its self-loops, duplicate edges, isolated vertices (no edges at all), dangling "
        "vertices (no out-edges), the minimum, mean and maximum in- and out-degree, how the "
        "graph was built (directed or undirected, self-loop and duplicate policies: for an .sgr, "
        "as recorded in the file with the loading options applied on top) and how long loading "
        "took. Vertex counts are the distinct ids that appear in the file.",
    .opts = info_opts,
    .flags = CLI_GRAPH_OPTS | CLI_THREADS,
    .example = "saga info --undirected karate/edges.txt\n"
               "saga info --json soc-Slashdot0902.txt.gz",
    .main = info_main,
};

static void degree_json(json *j, const char *key, int32_t min, double mean, int32_t max) {
    json_key(j, key);
    json_object_begin(j);
    json_key(j, "min"), json_int(j, min);
    json_key(j, "mean"), json_num(j, mean);
    json_key(j, "max"), json_int(j, max);
    json_object_end(j);
}

/* "undirected, self-loops kept, duplicates dropped" */
static const char *build_text(char *buf, size_t cap, const saga_graph_opts *b) {
    static const char *const dups[SAGA_DUPLICATES_COUNT] = {"auto", "kept", "dropped", "summed"};
    snprintf(buf, cap, "%s, self-loops %s, duplicates %s",
             b->undirected ? "undirected" : "directed",
             b->self_loops == SAGA_SELF_LOOPS_DROP ? "dropped" : "kept", dups[b->duplicates]);
    return buf;
}

static int info_main(int argc, char **argv) {
    cli_ctx c;
    const char *arg = NULL;
    int o;
    cli_begin(&c, &cli_cmd_info, argc, argv);
    while ((o = cli_next(&c, &arg)) >= 0)
        ;
    if (o == CLI_EXIT)
        return c.exit_code;

    const char *path = c.args[0];
    saga_graph *g = NULL;
    double secs = 0;
    if (cli_load_graph(&c, &g, path, &secs) < 0)
        return cli_fail(&c);
    saga_format fmt = c.load.format;
    if (fmt == SAGA_FORMAT_AUTO && saga_format_detect(path, &fmt) < 0) {
        saga_graph_free(&g);
        return cli_fail(&c);
    }
    saga_graph_summary s;
    saga_graph_summarize(g, &s);
    bool weighted = saga_graph_has_weights(g);
    saga_graph_opts b;
    bool known = saga_graph_build_opts(g, &b);
    saga_graph_free(&g);

    int64_t bytes = cli_file_size(path);
    double mbps = secs > 0 && bytes >= 0 ? (double)bytes / 1e6 / secs : 0.0;
    char b1[32], b2[32], b3[32], built[96];
    cli_say(&c, "file        %s (%s, %s)\n", path, saga_format_name(fmt),
            cli_bytes(b1, sizeof b1, bytes));
    cli_say(&c, "vertices    %s\n", cli_count(b1, sizeof b1, s.n_vertices));
    cli_say(&c, "edges       %s (%s)\n", cli_count(b1, sizeof b1, s.n_edges),
            !known         ? "directed or not: not recorded in the file"
            : b.undirected ? "both directions of each undirected edge"
                           : "directed");
    cli_say(&c, "built       %s\n",
            known ? build_text(built, sizeof built, &b)
                  : "not recorded (an .sgr of format version 1, or made from one: convert the "
                    "source again)");
    cli_say(&c, "weighted    %s\n", weighted ? "yes" : "no");
    cli_say(&c, "self-loops  %s\n", cli_count(b1, sizeof b1, s.n_self_loops));
    cli_say(&c, "duplicates  %s\n", cli_count(b1, sizeof b1, s.n_duplicates));
    cli_say(&c, "isolated    %s (no edges)\n", cli_count(b1, sizeof b1, s.n_isolated));
    cli_say(&c, "dangling    %s (no out-edges)\n", cli_count(b1, sizeof b1, s.n_dangling));
    cli_say(&c, "in-degree   min %s  mean %.2f  max %s\n",
            cli_count(b1, sizeof b1, s.in_degree_min), s.degree_mean,
            cli_count(b2, sizeof b2, s.in_degree_max));
    cli_say(&c, "out-degree  min %s  mean %.2f  max %s\n",
            cli_count(b1, sizeof b1, s.out_degree_min), s.degree_mean,
            cli_count(b3, sizeof b3, s.out_degree_max));
    cli_say(&c, "loaded in   %.3f s (%.1f MB/s)\n", secs, mbps);

    if (c.json) {
        json j;
        json_init(&j, stdout);
        json_object_begin(&j);
        json_key(&j, "input"), json_str(&j, path);
        json_key(&j, "format"), json_str(&j, saga_format_name(fmt));
        json_key(&j, "file_bytes"), json_int(&j, bytes);
        /* how the graph was built; null when the file does not say (a version 1 .sgr) */
        static const char *const dups[SAGA_DUPLICATES_COUNT] = {"auto", "keep", "drop", "sum"};
        if (known) {
            json_key(&j, "undirected"), json_bool(&j, b.undirected);
            json_key(&j, "self_loop_policy");
            json_str(&j, b.self_loops == SAGA_SELF_LOOPS_DROP ? "drop" : "keep");
            json_key(&j, "duplicate_policy"), json_str(&j, dups[b.duplicates]);
        } else {
            json_key(&j, "undirected"), json_null(&j);
            json_key(&j, "self_loop_policy"), json_null(&j);
            json_key(&j, "duplicate_policy"), json_null(&j);
        }
        json_key(&j, "vertices"), json_int(&j, s.n_vertices);
        json_key(&j, "edges"), json_int(&j, s.n_edges);
        json_key(&j, "weighted"), json_bool(&j, weighted);
        json_key(&j, "self_loops"), json_int(&j, s.n_self_loops);
        json_key(&j, "duplicates"), json_int(&j, s.n_duplicates);
        json_key(&j, "isolated"), json_int(&j, s.n_isolated);
        json_key(&j, "dangling"), json_int(&j, s.n_dangling);
        degree_json(&j, "in_degree", s.in_degree_min, s.degree_mean, s.in_degree_max);
        degree_json(&j, "out_degree", s.out_degree_min, s.degree_mean, s.out_degree_max);
        json_key(&j, "load_seconds"), json_num(&j, secs);
        json_key(&j, "load_mb_per_s"), json_num(&j, mbps);
        cli_json_device(&j, NULL);
        cli_json_outputs(&j, NULL, 0);
        json_object_end(&j);
        json_finish(&j);
    }
    return CLI_OK;
}
