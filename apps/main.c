/* main.c - the `saga` command line: dispatches git-style subcommands. */
#include "commands.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const cli_cmd *const commands[] = {
    &cli_cmd_info, &cli_cmd_convert,   &cli_cmd_generate, &cli_cmd_pagerank, &cli_cmd_cc,
    &cli_cmd_gcn,  &cli_cmd_partition, &cli_cmd_hep,      &cli_cmd_mlp,      &cli_cmd_plot,
};
enum { N_COMMANDS = sizeof commands / sizeof commands[0] };

static const cli_cmd *find(const char *name) {
    for (int i = 0; i < N_COMMANDS; i++)
        if (strcmp(commands[i]->name, name) == 0 ||
            (commands[i]->alias && strcmp(commands[i]->alias, name) == 0))
            return commands[i];
    return NULL;
}

static void print_main_help(FILE *f) {
    fprintf(f, "usage: saga [--help | --version] COMMAND [options] [ARGS]\n\n"
               "saga is a graph processing engine for graph neural networks. Commands:\n\n");
    for (int i = 0; i < N_COMMANDS; i++) {
        char names[32];
        snprintf(names, sizeof names, commands[i]->alias ? "%s, %s" : "%s", commands[i]->name,
                 commands[i]->alias);
        fprintf(f, "  %-12s%s\n", names, commands[i]->summary);
    }
    fprintf(f,
            "\n"
            "Every command takes --help, --quiet and --json (the last line on stdout is then one\n"
            "JSON object with the results, or {\"error\", \"status\", \"exit_code\"} on failure).\n"
            "The commands share one vocabulary: -o/--output FILE for what a command writes,\n"
            "--threads N on those that compute, --device DEV where one applies, --parts K and\n"
            "--partition METHOD for how a graph is cut. 'saga help COMMAND' shows its options.\n"
            "Exit status: 0 success, 1 error (message on stderr), 2 wrong usage.\n\n"
            "environment:\n"
            "  SAGA_DEVICE       default --device (cpu, cuda, cuda:N or auto; unset: auto, and a\n"
            "                    missing GPU is then noted at the info level only)\n"
            "  SAGA_LOG          log level: error, warn (default), info or debug\n"
            "  SAGA_CUDA_MODULE  path of libsaga_cuda.so (default: beside libsaga, then the\n"
            "                    loader's search)\n"
            "  SAGA_CUDA_SPMM    own (default: saga's SpMM kernel, the same bits every run) or\n"
            "                    cusparse (cuSPARSE's SpMM where it applies, CSR_ALG2; faster\n"
            "                    on power-law graphs, its last bits may differ run to run);\n"
            "                    cusparse-alg1, -alg3 pick its other CSR algorithms\n"
            "  SAGA_CUDA_PULL    tiles (default: PageRank's pull takes 32 rows a warp) or\n"
            "                    groups (lanes a row, as many as the mean degree)\n"
            "  SAGA_OMP_SPIN     1: leave OpenMP's idle threads spinning as libgomp does by\n"
            "                    default (saga makes them sleep after a short spin unless\n"
            "                    OMP_WAIT_POLICY or GOMP_SPINCOUNT is set)\n\n"
            "example:\n"
            "  saga generate rmat --scale 16 --edge-factor 16 --seed 1 -o rmat16.sgr\n"
            "  saga info rmat16.sgr\n"
            "  saga pagerank rmat16.sgr --top 10\n"
            "  saga generate citation --vertices 20000 --classes 8 --features 500 -o cit20k\n"
            "  saga gcn --data cit20k\n");
}

/* A usage error before any command parsed its options: the message, and under --json the error
 * object on stdout as the commands write it. */
static int usage_error(int argc, char **argv, const char *fmt, const char *what) {
    char msg[512];
    snprintf(msg, sizeof msg, fmt, what);
    fprintf(stderr, "saga: %s\nsee 'saga --help'\n", msg);
    for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++)
        if (strcmp(argv[i], "--json") == 0) {
            cli_ctx c = {.json = true};
            cli_json_error(&c, msg, saga_status_name(SAGA_ERR_INVALID_ARG), CLI_USAGE);
            break;
        }
    return CLI_USAGE;
}

static int unknown_command(int argc, char **argv, const char *name) {
    return usage_error(argc, argv, "'%s' is not a saga command", name);
}

/* No tuning of OpenMP here: libgomp's idle threads are made to sleep after a short spin by the
 * library when the first backend opens (engine/backend/omp_idle.c), for this command and for a
 * user's program alike. */
int main(int argc, char **argv) {
    if (argc < 2) {
        print_main_help(stderr);
        return CLI_USAGE;
    }
    const char *name = argv[1];
    if (strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0) {
        print_main_help(stdout);
        return CLI_OK;
    }
    if (strcmp(name, "--version") == 0 || strcmp(name, "-V") == 0) {
        printf("saga %s\n", saga_version());
        return CLI_OK;
    }
    if (strcmp(name, "help") == 0) {
        if (argc == 2) {
            print_main_help(stdout);
            return CLI_OK;
        }
        if (argc > 3) {
            fprintf(stderr, "saga help: unexpected argument '%s'\nsee 'saga --help'\n", argv[3]);
            return CLI_USAGE;
        }
        const cli_cmd *cmd = find(argv[2]);
        if (!cmd)
            return unknown_command(argc, argv, argv[2]);
        cli_print_help(cmd, stdout);
        return CLI_OK;
    }
    if (name[0] == '-')
        return usage_error(argc, argv, "unknown option '%s'", name);
    const cli_cmd *cmd = find(name);
    if (!cmd)
        return unknown_command(argc, argv, name);
    return cmd->main(argc - 1, argv + 1);
}
