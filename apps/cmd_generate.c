/* cmd_generate.c - `saga generate rmat ... -o FILE`: write a synthetic graph. */
#include "commands.h"

#include "saga_datasets.h"

#include <string.h>

enum { OPT_SCALE, OPT_EDGE_FACTOR, OPT_SEED, OPT_A, OPT_B, OPT_C, OPT_NO_SCRAMBLE, OPT_OUTPUT };
static const cli_opt generate_opts[] = {
    {"scale", 0, "S", "16", "2^S vertices, S in 1..30."},
    {"edge-factor", 0, "E", "16", "E * 2^S edges."},
    {"seed", 0, "N", "1", "The seed; the same seed gives the same file on any machine."},
    {"a", 0, "P", "0.57", "Probability of the top-left quadrant (Graph500 parameters)."},
    {"b", 0, "P", "0.19", "Probability of the top-right quadrant."},
    {"c", 0, "P", "0.19", "Probability of the bottom-left quadrant; d = 1 - a - b - c."},
    {"no-scramble", 0, NULL, NULL,
     "Keep R-MAT's raw ids, where low ids have the highest degrees (by default ids are permuted "
     "by a seeded bijection)."},
    {"output", 'o', "FILE", NULL,
     "Where to write (required). FILE.sgr: the graph as an .sgr cache with all 2^S vertices; "
     "otherwise a text edge list \"src<TAB>dst\" per line, gzip-compressed when FILE ends in "
     ".gz."},
    {0}};

static int generate_main(int argc, char **argv);

const cli_cmd cli_cmd_generate = {
    .name = "generate",
    .summary = "Generate a synthetic graph (R-MAT)",
    .args = "rmat",
    .min_args = 1,
    .max_args = 1,
    .description =
        "Generates an R-MAT graph (Chakrabarti, Zhan, Faloutsos 2004): each edge picks one of four "
        "quadrants of the adjacency matrix with probabilities a, b, c, d, recursively, S times. "
        "Self-loops and duplicate edges are kept as drawn. Edge k depends only on the seed and k, "
        "so the output is the same for any number of threads.\n"
        "A text edge list names only the vertices that have an edge, so loading it back gives "
        "fewer than 2^S vertices; an .sgr file keeps all of them.",
    .opts = generate_opts,
    .flags = 0,
    .example = "saga generate rmat --scale 16 --edge-factor 16 --seed 1 -o rmat16.sgr\n"
               "saga generate rmat --scale 20 --seed 7 -o rmat20.txt.gz",
    .main = generate_main,
};

static int generate_main(int argc, char **argv) {
    cli_ctx c;
    const char *arg = NULL;
    const char *out = NULL;
    saga_rmat_params p = saga_rmat_params_defaults();
    int64_t v = 0;
    int o;
    cli_begin(&c, &cli_cmd_generate, argc, argv);
    while ((o = cli_next(&c, &arg)) >= 0) {
        int bad = 0;
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
        }
        if (bad)
            return bad;
    }
    if (o == CLI_EXIT)
        return c.exit_code;
    if (strcmp(c.args[0], "rmat") != 0)
        return cli_usage(&c, "unknown generator '%s' (available: rmat)", c.args[0]);
    if (!out)
        return cli_usage(&c, "missing -o FILE");
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
        json_key(&j, "seconds"), json_num(&j, secs);
        json_object_end(&j);
        json_finish(&j);
    }
    return CLI_OK;
}
