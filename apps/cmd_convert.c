/* cmd_convert.c - `saga convert IN OUT.sgr`: load a graph once, save it as an .sgr cache. */
#include "commands.h"

enum { OPT_OUTPUT };
static const cli_opt convert_opts[] = {
    {"output", 'o', "FILE", NULL,
     "The .sgr file to write (or give it as the second argument, OUT.sgr)."},
    {0}};

static int convert_main(int argc, char **argv);

const cli_cmd cli_cmd_convert = {
    .name = "convert",
    .summary = "Convert a graph file to saga's binary .sgr cache",
    .args = "IN -o OUT.sgr",
    .min_args = 1,
    .max_args = 2,
    .description =
        "Loads IN with the loading options below and writes the resulting graph to OUT (-o OUT, "
        "or OUT as a second argument, the older spelling), which "
        "must end in .sgr. The .sgr file holds both CSR directions, the weights and the original "
        "vertex ids, with checksums, and records how the graph was built (directed or "
        "undirected, self-loop and duplicate policies); later commands load it by mapping it "
        "into memory, without parsing. Options such as --undirected are applied once, here: the "
        "later commands get the graph as built. Loading options given to them are applied to "
        "the .sgr as to IN (--undirected symmetrizes a directed .sgr), or refused with a message "
        "when the .sgr lost what they need (--self-loops keep on a file made with --self-loops "
        "drop).",
    .opts = convert_opts,
    .flags = CLI_GRAPH_OPTS | CLI_THREADS,
    .example = "saga convert soc-Slashdot0902.txt.gz -o slashdot.sgr\n"
               "saga convert --undirected karate/edges.txt -o karate.sgr",
    .main = convert_main,
};

static int convert_main(int argc, char **argv) {
    cli_ctx c;
    const char *arg = NULL;
    int o;
    const char *out = NULL;
    cli_begin(&c, &cli_cmd_convert, argc, argv);
    while ((o = cli_next(&c, &arg)) >= 0)
        if (o == OPT_OUTPUT)
            out = arg;
    if (o == CLI_EXIT)
        return c.exit_code;
    const char *in = c.args[0];
    if (c.n_args == 2 && out)
        return cli_usage(&c, "give the output once: -o %s or a second argument '%s'", out,
                         c.args[1]);
    if (c.n_args == 2)
        out = c.args[1];
    if (!out)
        return cli_usage(&c, "missing -o OUT.sgr");
    if (!cli_ends_with(out, ".sgr"))
        return cli_usage(&c, "the output file must end in .sgr, got '%s'", out);

    saga_graph *g = NULL;
    double load_s = 0;
    if (cli_load_graph(&c, &g, in, &load_s) < 0)
        return cli_fail(&c);
    double t0 = saga_now();
    saga_status st = saga_sgr_write(g, out);
    double write_s = saga_now() - t0;
    int32_t n = saga_graph_n_vertices(g);
    int64_t m = saga_graph_n_edges(g);
    saga_graph_free(&g);
    if (st < 0)
        return cli_fail(&c);

    int64_t in_bytes = cli_file_size(in), out_bytes = cli_file_size(out);
    char b1[32], b2[32], b3[32], b4[32];
    cli_say(&c, "read   %s (%s) in %.3f s: %s vertices, %s edges\n", in,
            cli_bytes(b1, sizeof b1, in_bytes), load_s, cli_count(b3, sizeof b3, n),
            cli_count(b4, sizeof b4, m));
    cli_say(&c, "wrote  %s (%s) in %.3f s\n", out, cli_bytes(b2, sizeof b2, out_bytes), write_s);
    if (c.json) {
        json j;
        json_init(&j, stdout);
        json_object_begin(&j);
        json_key(&j, "input"), json_str(&j, in);
        json_key(&j, "output"), json_str(&j, out);
        cli_json_outputs(&j, &out, 1);
        cli_json_device(&j, NULL);
        json_key(&j, "vertices"), json_int(&j, n);
        json_key(&j, "edges"), json_int(&j, m);
        json_key(&j, "input_bytes"), json_int(&j, in_bytes);
        json_key(&j, "output_bytes"), json_int(&j, out_bytes);
        json_key(&j, "load_seconds"), json_num(&j, load_s);
        json_key(&j, "write_seconds"), json_num(&j, write_s);
        json_object_end(&j);
        json_finish(&j);
    }
    return CLI_OK;
}
