/* cli.h - what every `saga` subcommand shares: option parsing, help, exit codes, output modes.
 *
 *   enum { OPT_TOP };
 *   static const cli_opt opts[] = {{"top", 0, "K", "10", "how many to print"}, {0}};
 *   const cli_cmd cli_cmd_x = {.name = "x", .opts = opts, .args = "FILE", .min_args = 1, ...};
 *
 *   static int x_main(int argc, char **argv) {
 *       cli_ctx c;
 *       const char *arg;
 *       int o;
 *       cli_begin(&c, &cli_cmd_x, argc, argv);
 *       while ((o = cli_next(&c, &arg)) >= 0)
 *           if (o == OPT_TOP && cli_int(&c, "--top", arg, 1, 1000, &top))
 *               return CLI_USAGE;
 *       if (o == CLI_EXIT)
 *           return c.exit_code;                 // after --help (0) or a usage error (2)
 *       ...
 *       if (st < 0)
 *           return cli_fail(&c);                // "saga: " + saga_last_error(), exit 1
 *   }
 *
 * Exit codes: 0 success, 1 error, 2 usage. Every command takes --help, --quiet and --json; those
 * that compute also take --threads (CLI_THREADS), those that read graphs the loading options
 * (--format, --undirected, --self-loops, --duplicates, --weights). With --json the last line on
 * stdout is one JSON object and the human text goes to stderr; with --quiet nothing but errors is
 * printed (the JSON object still is). A failure under --json ends stdout with
 * {"error": MESSAGE, "status": "SAGA_ERR_...", "exit_code": 1 or 2} (the message also on stderr).
 *
 * The vocabulary the commands share: -o/--output names the file a command writes, --threads N the
 * OpenMP threads, --device the backend, --parts K and --partition METHOD how a graph is cut. Older
 * spellings stay accepted as an option's alias (CLI_ALIAS).
 */
#pragma once

#include "json.h"

#include "saga_comm.h"
#include "saga_io.h"
#include "saga_net.h"
#include "saga_partition.h"
#include "saga_shards.h"

#include <getopt.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

enum { CLI_OK = 0, CLI_ERROR = 1, CLI_USAGE = 2 };

enum { CLI_MAX_OPTS = 96 }; /* a command's own, the common and the loading options, with aliases */

/* cli_next's results below zero. */
enum { CLI_DONE = -1, CLI_EXIT = -2 };

/* One option: --name [ARG], with an optional one-letter alias. The tables end with {0}.
 *
 * An entry with a name and nothing else, CLI_ALIAS("out"), is a second long name of the entry
 * before it (an older spelling): cli_next returns the index of that entry for it, and help names
 * it there. It takes a slot of its own in the command's option enum, which cli_next never returns.
 */
typedef struct cli_opt {
    const char *name;
    char short_name;
    const char *arg;  /* how help names the value ("FILE"); NULL for a flag */
    const char *def;  /* the default shown by help, or NULL */
    const char *help; /* one sentence; NULL for an alias */
} cli_opt;

#define CLI_ALIAS(old_name)                                                                        \
    { old_name, 0, NULL, NULL, NULL }

enum {
    CLI_GRAPH_OPTS = 1u << 0, /* the command reads a graph: accept the loading options */
    CLI_THREADS = 1u << 1,    /* the command computes: accept --threads N */
};

typedef struct cli_cmd {
    const char *name;
    const char *alias;       /* another name the command answers to, or NULL */
    const char *summary;     /* one line for `saga --help` */
    const char *args;        /* positional arguments for the usage line ("IN OUT.sgr") */
    int min_args, max_args;  /* how many positional arguments are allowed */
    const char *description; /* paragraphs, '\n'-separated, wrapped by help */
    const cli_opt *opts;     /* the command's own options; their index is what cli_next returns */
    unsigned flags;
    const char *example;                /* lines of shell, '\n'-separated */
    int (*main)(int argc, char **argv); /* argv[0] is the command name */
} cli_cmd;

typedef struct cli_ctx {
    const cli_cmd *cmd;
    bool quiet, json;
    int threads;         /* --threads (already applied to OpenMP); 0 when not given */
    saga_load_opts load; /* filled from the loading options */
    char **args;         /* positional arguments, n_args of them (valid after CLI_DONE) */
    int n_args;
    int exit_code;   /* for CLI_EXIT */
    int rank, ranks; /* of the run (cli_comm_open); 0 and 1 until then */
    double t_start;
    /* private */
    int argc;
    char **argv;
    int n_own;
    bool started;
    struct option longopts[CLI_MAX_OPTS + 1];
    char shorts[2 * CLI_MAX_OPTS + 2];
    double progress_last;
    bool progress_shown;
} cli_ctx;

/* Prepares to parse argv (argv[0] = the command's name). */
void cli_begin(cli_ctx *c, const cli_cmd *cmd, int argc, char **argv);
/* The next of the command's own options (its index in cmd->opts, *arg its value or NULL), or
 * CLI_DONE when everything is parsed and the positional count is right, or CLI_EXIT when the
 * command must stop now with c->exit_code (help was printed, or a usage error was reported). */
int cli_next(cli_ctx *c, const char **arg);

/* Reports a usage error ("saga CMD: <message>" and "see 'saga CMD --help'") and returns
 * CLI_USAGE. */
int cli_usage(cli_ctx *c, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* Prints "saga: " + saga_last_error() to stderr and returns CLI_ERROR. Under --json it also ends
 * stdout with the error object (cli_json_error). */
int cli_fail(cli_ctx *c);
/* Under --json (on rank 0): writes {"error": msg, "status": name, "exit_code": code} as one line
 * on stdout. cli_usage and cli_fail call it; a command that fails otherwise calls it itself. */
void cli_json_error(cli_ctx *c, const char *msg, const char *status, int exit_code);
/* The CPU threads a backend computes with (OpenMP's, after --threads), 0 on a GPU; be NULL: the
 * host's, for the commands that run there alone. */
int cli_threads_of(const saga_backend *be);
/* The JSON keys every command's object shares: "device" (the backend's name, "cpu" when be is NULL
 * for the commands that run on the host alone) and "threads" (cli_threads_of). */
void cli_json_device(json *j, const saga_backend *be);
/* "outputs": the files a command wrote, n of them (NULL entries are left out). */
void cli_json_outputs(json *j, const char *const *paths, int n);

/* Strict number parsing for option values: the whole string, in range, else a usage error
 * naming the option (returns CLI_USAGE; 0 on success). */
int cli_int(cli_ctx *c, const char *opt, const char *arg, int64_t min, int64_t max, int64_t *out);
int cli_u64(cli_ctx *c, const char *opt, const char *arg, uint64_t *out);
/* "A" or "A:B" with 1 <= A <= B (what: "epoch", "iteration" in messages); A alone gives B = A. */
int cli_int_range(cli_ctx *c, const char *opt, const char *what, const char *arg, int32_t *a,
                  int32_t *b);
/* A size in bytes: a number with an optional K, M, G or T suffix (powers of 1024; "MiB", "MB"
 * and "M" mean the same). */
int cli_size(cli_ctx *c, const char *opt, const char *arg, size_t *out);
/* The moves of an executor run (saga_net.h): one "memory:" line (and, streamed, the bytes
 * against their floor and on a GPU the copies' time), and JSON keys streamed, parts, h2d_bytes,
 * d2h_bytes, peak_device_bytes, overlap, copy_seconds, wait_seconds, h2d_seconds and the rest of
 * saga_net_stats that a user reads. per: "" or " per round" and the like. */
void cli_say_net_stats(cli_ctx *c, const saga_net_stats *ns, const char *per);
void cli_json_net_stats(json *j, const saga_net_stats *ns);
/* The options of the commands that run through the graph executor (saga_net.h), in this order
 * in their option table (CLI_EXEC_OPTS) and in their option enum (the first named by base). */
typedef struct cli_exec {
    size_t device_mem;               /* --device-mem: the backend's budget; 0: none */
    bool stream;                     /* --stream */
    int32_t parts;                   /* --parts; 0: from the budget */
    saga_partition_method partition; /* --partition */
    bool stats;                      /* --stats */
    bool host_halos;                 /* --host-halos */
} cli_exec;

/* The help of every command's --device option, and its default: $SAGA_DEVICE when set and not
 * empty, else "auto". */
#define CLI_DEVICE_HELP                                                                            \
    "cpu, cuda, cuda:N or auto: a GPU when one works, else the CPU, with a warning saying why "    \
    "when auto was asked for (an info line, SAGA_LOG=info, when auto is only the default). "       \
    "Default: $SAGA_DEVICE when set, else auto."
/* The device a command starts with: $SAGA_DEVICE when set and not empty, else "auto" as a default
 * that nobody asked for (cli_backend_open then notes a missing GPU at the info level only). */
const char *cli_default_device(void);
/* A usage error unless device looks like auto, cpu, cuda or cuda:N (checked before any work;
 * the backend reports what is wrong with a well-formed one); 0 when it does. */
int cli_check_device(cli_ctx *c, const char *device);

#define CLI_EXEC_OPTS                                                                              \
    {"device-mem", 0, "SIZE", NULL,                                                                \
     "Device memory saga may hold (512M, 2G, ...): a graph whose data does not fit is streamed "   \
     "through it part by part."},                                                                  \
        {"stream", 0, NULL, NULL, "Stream even when everything would fit (for comparison)."},      \
        {"parts", 0, "K", NULL,                                                                    \
         "Streamed: cut the graph into K parts (default: the fewest that "                         \
         "fit)."},                                                                                 \
        {"partition", 0, "METHOD", "metis",                                                        \
         "Streamed: metis, contiguous, random or fennel parts."},                                  \
        {"stats", 0, NULL, NULL,                                                                   \
         "Report the bytes moved host->device and device->host, the peak device memory and "       \
         "the share of copy time hidden behind compute (on the CPU with every core computing, "    \
         "the copies run in order with the kernels instead, and the report says so)."},            \
    {                                                                                              \
        "host-halos", 0, NULL, NULL,                                                               \
            "Streamed: send every halo row and halo gradient through the host, even where a "      \
            "stage's input is narrow enough to stay whole on the device (for comparison)."         \
    }
enum { CLI_EXEC_N_OPTS = 6 };

cli_exec cli_exec_defaults(void);
/* Option i (0 .. CLI_EXEC_N_OPTS - 1) of CLI_EXEC_OPTS with its argument; 0, or a usage error. */
int cli_exec_opt(cli_ctx *c, int i, const char *arg, cli_exec *e);
/* Whether any of the options asks for the executor. */
bool cli_exec_wanted(const cli_exec *e);
/* The executor's options they give (the rest saga_net_opts_defaults). */
saga_net_opts cli_exec_net_opts(const cli_exec *e);
/* max_open: max itself is excluded. */
int cli_double(cli_ctx *c, const char *opt, const char *arg, double min, double max, bool max_open,
               double *out);

/* Where human-readable text goes: stdout, stderr under --json, nowhere under --quiet. */
void cli_say(cli_ctx *c, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* A warning on stderr ("saga: warning: ..."), unless --quiet. */
void cli_warn(cli_ctx *c, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* A one-line progress note rewritten in place on stderr, shown only when stderr is a terminal,
 * not --quiet, and the command has run for more than a second. cli_progress_end clears it. */
void cli_progress(cli_ctx *c, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
void cli_progress_end(cli_ctx *c);

/* Loads a graph with the loading options, timing it. */
saga_status cli_load_graph(cli_ctx *c, saga_graph **g, const char *path, double *seconds);

/* Whether path is a directory of shards (saga partition --shards: it holds a manifest). */
bool cli_is_shards(const char *path);
/* Over shards (a directory of saga partition --shards, under a launcher): dir's manifest (*m),
 * this rank's shard (*sh), its local graph (*lg) and what a net over it exchanges (*hx, without
 * row ids); SAGA_ERR_INVALID_ARG when dir holds another number of shards than there are ranks. */
saga_status cli_shards_open(const char *dir, saga_comm *comm, saga_shards_manifest *m,
                            saga_shard **sh, saga_graph **lg, saga_net_halo *hx);
/* Collective: each rank's n records of bytes each (rec) to rank 0, which gets them all in *out
 * (saga_free), rank by rank, *n_out of them; the others get NULL and 0. */
saga_status cli_shards_gather(saga_comm *comm, const void *rec, int64_t n, size_t bytes, void **out,
                              int64_t *n_out);

/* Writes "id value" for every vertex of g to path, ids as the file wrote them: value[v] itself,
 * or, when as_vertex, the original id of vertex value[v]. SAGA_ERR_IO naming the file. */
saga_status cli_write_vertex_values(const char *path, const saga_graph *g, const int32_t *value,
                                    bool as_vertex);
/* The same for n vertices whose original ids are ids[v] (over shards: no graph), or g's when ids
 * is NULL (n then g's vertex count). */
saga_status cli_write_vertex_values_of(const char *path, const saga_graph *g, const int64_t *ids,
                                       int32_t n, const int32_t *value, bool as_vertex);
/* Vertex v's original id: ids[v], or g's when ids is NULL. */
int64_t cli_orig_id(const saga_graph *g, const int64_t *ids, int32_t v);

/* Size of a file in bytes, or -1. */
int64_t cli_file_size(const char *path);
/* Formats n with thousands separators ("1,048,576") into buf; returns buf. */
const char *cli_count(char *buf, size_t size, int64_t n);
/* Formats a byte count ("3.2 MB") into buf; returns buf. */
const char *cli_bytes(char *buf, size_t size, int64_t n);
/* True when s ends with suffix. */
bool cli_ends_with(const char *s, const char *suffix);

/* ---- several ranks: mpirun -np N saga CMD ... ---------------------------------------------- */

/* Opens the run's communicator (saga_comm_open "auto": MPI when a launcher started saga, else
 * one rank) and sets c->rank and c->ranks. Ranks other than 0 print nothing but their own
 * errors: they are quiet, write no JSON object, and log errors only. */
saga_status cli_comm_open(cli_ctx *c, saga_comm **comm);
/* Opens this rank's backend. With several ranks on a machine, "cuda" is the local rank's GPU
 * (cuda:LOCAL_RANK). "auto" tries a GPU and falls back to the CPU with one line from rank 0 saying
 * why: a warning when the user asked for auto (--device auto, SAGA_DEVICE=auto), an info line
 * (SAGA_LOG=info) when auto is only cli_default_device's default. When a GPU was asked for and
 * none works, the error says how to run on the CPU instead. Other specs as saga_backend_open. */
saga_status cli_backend_open(cli_ctx *c, saga_backend **be, const char *device,
                             const saga_comm *comm, const saga_backend_params *p);
/* Reports a failure and returns CLI_ERROR. With one rank: cli_fail. With several: when agreed
 * (every rank learned of it through saga_comm_agree, the message naming the failing rank), rank
 * 0 prints it and the others stay silent; otherwise (the others may be waiting for this rank)
 * this rank prints "saga: rank R of N: message" and stops every rank (saga_comm_abort). */
int cli_fail_ranks(cli_ctx *c, saga_comm *comm, bool agreed);

/* The executor's figures over every rank of a run (cli_rank_stats_of is collective). */
typedef struct cli_rank_stats {
    int ranks;
    uint64_t comm_sent_bytes, comm_recv_bytes; /* summed over the ranks */
    double comm_seconds;                       /* the most any rank spent */
    double comm_hidden;                        /* of all ranks' exchange time, the share hidden */
    int64_t halo_rows, remote_rows;            /* summed over the ranks */
    size_t *peak_device_bytes;                 /* per rank (saga_malloc'd; cli_rank_stats_free) */
} cli_rank_stats;

saga_status cli_rank_stats_of(cli_rank_stats *out, saga_comm *comm, const saga_net_stats *mine);
void cli_rank_stats_free(cli_rank_stats *r);
/* "ranks     4: 12.3 MB exchanged per epoch ..." and its JSON keys: ranks, comm_bytes {sent,
 * received}, comm_seconds, comm_hidden (the share of exchange time hidden behind compute),
 * remote_rows, rank_peak_device_bytes. per: " per epoch" and the like. */
void cli_say_rank_stats(cli_ctx *c, const cli_rank_stats *r, const char *per);
void cli_json_rank_stats(json *j, const cli_rank_stats *r);

/* Prints the command's full help. */
void cli_print_help(const cli_cmd *cmd, FILE *f);
