/* cmd_generate.c - `saga generate rmat|citation ... -o PATH`: write a synthetic graph or data set.
 */
#include "commands.h"

#include "saga_datasets.h"

#include <math.h>
#include <string.h>

enum {
    OPT_SCALE,
    OPT_EDGE_FACTOR,
    OPT_SEED,
    OPT_A,
    OPT_B,
    OPT_C,
    OPT_NO_SCRAMBLE,
    OPT_OUTPUT,
    OPT_VERTICES,
    OPT_CLASSES,
    OPT_DEGREE,
    OPT_FEATURES,
    OPT_HOMOPHILY,
    OPT_WORDS,
    OPT_TOPIC_SHARE,
    OPT_COUNT_
};
/* Which generator each option belongs to: the other one rejects it. */
enum { FOR_BOTH, FOR_RMAT, FOR_CITATION };
static const int OPT_FOR[OPT_COUNT_] = {
    [OPT_SCALE] = FOR_RMAT,
    [OPT_EDGE_FACTOR] = FOR_RMAT,
    [OPT_A] = FOR_RMAT,
    [OPT_B] = FOR_RMAT,
    [OPT_C] = FOR_RMAT,
    [OPT_NO_SCRAMBLE] = FOR_RMAT,
    [OPT_VERTICES] = FOR_CITATION,
    [OPT_CLASSES] = FOR_CITATION,
    [OPT_DEGREE] = FOR_CITATION,
    [OPT_FEATURES] = FOR_CITATION,
    [OPT_HOMOPHILY] = FOR_CITATION,
    [OPT_WORDS] = FOR_CITATION,
    [OPT_TOPIC_SHARE] = FOR_CITATION,
};
static const cli_opt generate_opts[] = {
    {"scale", 0, "S", "16", "rmat: 2^S vertices, S in 1..30."},
    {"edge-factor", 0, "E", "16", "rmat: E * 2^S edges."},
    {"seed", 0, "N", "1", "The seed; the same seed gives the same output on any machine."},
    {"a", 0, "P", "0.57", "rmat: probability of the top-left quadrant (Graph500 parameters)."},
    {"b", 0, "P", "0.19", "rmat: probability of the top-right quadrant."},
    {"c", 0, "P", "0.19", "rmat: probability of the bottom-left quadrant; d = 1 - a - b - c."},
    {"no-scramble", 0, NULL, NULL,
     "rmat: keep R-MAT's raw ids, where low ids have the highest degrees (by default ids are "
     "permuted by a seeded bijection)."},
    {"output", 'o', "PATH", NULL,
     "Where to write (required). rmat: FILE.sgr writes the graph as an .sgr cache with all 2^S "
     "vertices, any other FILE a text edge list \"src<TAB>dst\" per line, gzip-compressed when "
     "FILE ends in .gz. citation: a directory (created when missing) in the layout of the "
     "bundled Cora."},
    {"vertices", 0, "N", "2708", "citation: number of vertices (papers)."},
    {"classes", 0, "C", "7", "citation: number of classes (topics), 2..1024."},
    {"degree", 0, "D", "3.9", "citation: mean degree; the graph has round(N * D / 2) edges."},
    {"features", 0, "F", "1433", "citation: vocabulary size (binary bag-of-words features)."},
    {"homophily", 0, "H", "0.8", "citation: fraction of edges between vertices of one class."},
    {"words", 0, "W", "20", "citation: mean number of words drawn per vertex."},
    {"topic-share", 0, "T", "0.15",
     "citation: fraction of a vertex's words drawn from its class's topic (the rest come from a "
     "background shared by all classes); lower makes the features less telling."},
    {0}};

static int generate_main(int argc, char **argv);

const cli_cmd cli_cmd_generate = {
    .name = "generate",
    .summary = "Generate a synthetic graph (R-MAT) or citation data set",
    .args = "rmat|citation",
    .min_args = 1,
    .max_args = 1,
    .description =
        "Generates an R-MAT graph (Chakrabarti, Zhan, Faloutsos 2004): each edge picks one of four "
        "quadrants of the adjacency matrix with probabilities a, b, c, d, recursively, S times. "
        "Self-loops and duplicate edges are kept as drawn. Edge k depends only on the seed and k, "
        "so the output is the same for any number of threads.\n"
        "A text edge list names only the vertices that have an edge, so loading it back gives "
        "fewer than 2^S vertices; an .sgr file keeps all of them.\n"
        "citation generates a data set for node classification shaped like Cora: a "
        "degree-corrected stochastic block model (power-law degrees, a fraction H of the edges "
        "inside a class, no isolated vertex when D >= 2), binary bag-of-words features where each "
        "class has its own topic over the vocabulary, and a Planetoid split (20 training vertices "
        "per class, 500 validation, 1000 test, fewer on small graphs). It writes edges.txt.gz, "
        "features.txt.gz, labels.txt, classes.txt, train_idx.txt, val_idx.txt, test_idx.txt and "
        "a README.md, ready for `saga gcn --data DIR`.",
    .opts = generate_opts,
    .flags = CLI_THREADS,
    .example = "saga generate rmat --scale 16 --edge-factor 16 --seed 1 -o rmat16.sgr\n"
               "saga generate rmat --scale 20 --seed 7 -o rmat20.txt.gz\n"
               "saga generate citation --vertices 20000 --classes 8 --degree 8 --features 500 "
               "-o citation-20k",
    .main = generate_main,
};

/* What saga_citation_write puts in its directory. */
static const char *const CITATION_FILES[] = {"edges.txt.gz", "features.txt.gz", "labels.txt",
                                             "classes.txt",  "train_idx.txt",   "val_idx.txt",
                                             "test_idx.txt", "README.md"};

static int generate_citation(cli_ctx *c, const saga_citation_params *p, const char *out) {
    char b1[32], b2[32];
    int64_t m = (int64_t)floor((double)p->n_vertices * p->avg_degree / 2 + 0.5);
    cli_say(c,
            "generating a citation graph: %s vertices, %d classes, %s edges, %d features, "
            "seed %llu\n",
            cli_count(b1, sizeof b1, p->n_vertices), p->n_classes, cli_count(b2, sizeof b2, m),
            p->n_features, (unsigned long long)p->seed);
    double t0 = saga_now();
    saga_citation *cit = NULL;
    saga_status st = saga_citation_generate(&cit, p);
    if (st >= 0)
        st = saga_citation_write(cit, out);
    if (st < 0) {
        saga_citation_free(&cit);
        return cli_fail(c);
    }
    double secs = saga_now() - t0;
    int64_t same = 0;
    for (int64_t k = 0; k < cit->n_edges; k++)
        same += cit->labels[cit->edge_u[k]] == cit->labels[cit->edge_v[k]];
    double homophily = cit->n_edges ? (double)same / (double)cit->n_edges : 0.0;
    int64_t nnz = cit->feat_offsets[cit->n_vertices];
    cli_say(c,
            "wrote %s/ in %.2f s: %s edges (homophily %.3f), %s feature non-zeros, split "
            "%d / %d / %d\n",
            out, secs, cli_count(b1, sizeof b1, cit->n_edges), homophily,
            cli_count(b2, sizeof b2, nnz), cit->n_train, cit->n_val, cit->n_test);
    if (c->json) {
        json j;
        json_init(&j, stdout);
        json_object_begin(&j);
        json_key(&j, "generator"), json_str(&j, "citation");
        json_key(&j, "vertices"), json_int(&j, cit->n_vertices);
        json_key(&j, "edges"), json_int(&j, cit->n_edges);
        json_key(&j, "classes"), json_int(&j, cit->n_classes);
        json_key(&j, "features"), json_int(&j, cit->n_features);
        json_key(&j, "feature_nonzeros"), json_int(&j, nnz);
        json_key(&j, "degree"), json_num(&j, p->avg_degree);
        json_key(&j, "homophily_target"), json_num(&j, p->homophily);
        json_key(&j, "homophily"), json_num(&j, homophily);
        json_key(&j, "words"), json_int(&j, p->words_per_vertex);
        json_key(&j, "topic_share"), json_num(&j, p->topic_share);
        json_key(&j, "seed"), json_uint(&j, p->seed);
        json_key(&j, "train"), json_int(&j, cit->n_train);
        json_key(&j, "val"), json_int(&j, cit->n_val);
        json_key(&j, "test"), json_int(&j, cit->n_test);
        json_key(&j, "output"), json_str(&j, out);
        json_key(&j, "outputs"), json_array_begin(&j);
        for (int k = 0; k < (int)(sizeof CITATION_FILES / sizeof *CITATION_FILES); k++) {
            char path[4096];
            snprintf(path, sizeof path, "%s/%s", out, CITATION_FILES[k]);
            json_str(&j, path);
        }
        json_array_end(&j);
        json_key(&j, "seconds"), json_num(&j, secs);
        cli_json_device(&j, NULL);
        json_object_end(&j);
        json_finish(&j);
    }
    saga_citation_free(&cit);
    return CLI_OK;
}

static int generate_main(int argc, char **argv) {
    cli_ctx c;
    const char *arg = NULL;
    const char *out = NULL;
    saga_rmat_params p = saga_rmat_params_defaults();
    saga_citation_params cp = saga_citation_params_defaults();
    bool given[OPT_COUNT_] = {false};
    int64_t v = 0;
    int o;
    cli_begin(&c, &cli_cmd_generate, argc, argv);
    while ((o = cli_next(&c, &arg)) >= 0) {
        int bad = 0;
        given[o] = true;
        switch (o) {
        case OPT_SCALE:
            if (!(bad = cli_int(&c, "--scale", arg, 1, 30, &v)))
                p.scale = (int)v;
            break;
        case OPT_EDGE_FACTOR:
            if (!(bad = cli_int(&c, "--edge-factor", arg, 1, 1 << 20, &v)))
                p.edge_factor = (int)v;
            break;
        case OPT_SEED:
            bad = cli_u64(&c, "--seed", arg, &p.seed);
            cp.seed = p.seed;
            break;
        case OPT_A:
            bad = cli_double(&c, "--a", arg, 0, 1, false, &p.a);
            break;
        case OPT_B:
            bad = cli_double(&c, "--b", arg, 0, 1, false, &p.b);
            break;
        case OPT_C:
            bad = cli_double(&c, "--c", arg, 0, 1, false, &p.c);
            break;
        case OPT_NO_SCRAMBLE:
            p.scramble = false;
            break;
        case OPT_OUTPUT:
            out = arg;
            break;
        case OPT_VERTICES:
            if (!(bad = cli_int(&c, "--vertices", arg, 4, 1 << 30, &v)))
                cp.n_vertices = (int32_t)v;
            break;
        case OPT_CLASSES:
            if (!(bad = cli_int(&c, "--classes", arg, 2, 1024, &v)))
                cp.n_classes = (int32_t)v;
            break;
        case OPT_DEGREE:
            bad = cli_double(&c, "--degree", arg, 1e-9, 1e6, false, &cp.avg_degree);
            break;
        case OPT_FEATURES:
            if (!(bad = cli_int(&c, "--features", arg, 2, 1 << 24, &v)))
                cp.n_features = (int32_t)v;
            break;
        case OPT_HOMOPHILY:
            bad = cli_double(&c, "--homophily", arg, 0, 1, false, &cp.homophily);
            break;
        case OPT_WORDS:
            if (!(bad = cli_int(&c, "--words", arg, 1, 100000, &v)))
                cp.words_per_vertex = (int32_t)v;
            break;
        case OPT_TOPIC_SHARE:
            bad = cli_double(&c, "--topic-share", arg, 0, 1, false, &cp.topic_share);
            break;
        }
        if (bad)
            return bad;
    }
    if (o == CLI_EXIT)
        return c.exit_code;
    bool rmat = strcmp(c.args[0], "rmat") == 0;
    if (!rmat && strcmp(c.args[0], "citation") != 0)
        return cli_usage(&c, "unknown generator '%s' (available: rmat, citation)", c.args[0]);
    for (int k = 0; k < OPT_COUNT_; k++)
        if (given[k] && OPT_FOR[k] == (rmat ? FOR_CITATION : FOR_RMAT))
            return cli_usage(&c, "--%s does not apply to the %s generator", generate_opts[k].name,
                             c.args[0]);
    if (!out)
        return cli_usage(&c, "missing -o %s", rmat ? "FILE" : "DIR");
    if (!rmat) {
        if (cp.n_vertices < 2 * cp.n_classes)
            return cli_usage(&c, "--vertices must be at least twice --classes (%d), got %d",
                             cp.n_classes, cp.n_vertices);
        if (cp.n_features < cp.n_classes)
            return cli_usage(&c, "--features must be at least --classes (%d), got %d", cp.n_classes,
                             cp.n_features);
        return generate_citation(&c, &cp, out);
    }
    if (p.a + p.b + p.c > 1.0 + 1e-12)
        return cli_usage(&c, "--a + --b + --c must not exceed 1, got %g", p.a + p.b + p.c);

    bool sgr = cli_ends_with(out, ".sgr");
    int64_t m = (int64_t)p.edge_factor << p.scale;
    char b1[32], b2[32];
    cli_say(&c, "generating R-MAT scale %d (%s vertices), edge factor %d (%s edges), seed %llu\n",
            p.scale, cli_count(b1, sizeof b1, INT64_C(1) << p.scale), p.edge_factor,
            cli_count(b2, sizeof b2, m), (unsigned long long)p.seed);
    double t0 = saga_now();
    saga_status st = SAGA_OK;
    if (sgr) {
        saga_graph *g = NULL;
        st = saga_rmat_graph(&g, &p, NULL);
        if (st >= 0)
            st = saga_sgr_write(g, out);
        saga_graph_free(&g);
    } else {
        st = saga_rmat_write(out, &p);
    }
    if (st < 0)
        return cli_fail(&c);
    double secs = saga_now() - t0;
    int64_t bytes = cli_file_size(out);
    cli_say(&c, "wrote %s (%s) in %.2f s\n", out, cli_bytes(b1, sizeof b1, bytes), secs);

    if (c.json) {
        json j;
        json_init(&j, stdout);
        json_object_begin(&j);
        json_key(&j, "generator"), json_str(&j, "rmat");
        json_key(&j, "scale"), json_int(&j, p.scale);
        json_key(&j, "edge_factor"), json_int(&j, p.edge_factor);
        json_key(&j, "a"), json_num(&j, p.a);
        json_key(&j, "b"), json_num(&j, p.b);
        json_key(&j, "c"), json_num(&j, p.c);
        json_key(&j, "seed"), json_uint(&j, p.seed);
        json_key(&j, "scramble"), json_bool(&j, p.scramble);
        json_key(&j, "vertices"), json_int(&j, INT64_C(1) << p.scale);
        json_key(&j, "edges"), json_int(&j, m);
        json_key(&j, "output"), json_str(&j, out);
        json_key(&j, "format"), json_str(&j, sgr ? "sgr" : "edgelist");
        json_key(&j, "bytes"), json_int(&j, bytes);
        cli_json_outputs(&j, &out, 1);
        json_key(&j, "seconds"), json_num(&j, secs);
        cli_json_device(&j, NULL);
        json_object_end(&j);
        json_finish(&j);
    }
    return CLI_OK;
}
