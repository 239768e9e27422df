/* cli.c - option parsing, help text, exit codes and output modes shared by the subcommands. */
#include "cli.h"

#include "saga_log.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <omp.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The options every command takes, then the graph-loading ones. getopt reports each group's
 * options as its base + index (OWN_BASE, COMMON_BASE, GRAPH_BASE), above any one-letter alias. */
enum { OPT_HELP, OPT_QUIET, OPT_JSON, N_COMMON };
static const cli_opt common_opts[] = {
    {"help", 'h', NULL, NULL, "Show this help and exit."},
    {"quiet", 'q', NULL, NULL, "Print nothing but errors (and the JSON object with --json)."},
    {"json", 0, NULL, NULL,
     "End stdout with one JSON object (one line) holding the results, or on failure "
     "{\"error\": ..., \"status\": ..., \"exit_code\": ...}; other text goes to stderr."},
    {0}};

/* The options of the commands that compute (CLI_THREADS). */
enum { OPT_THREADS, N_THREADS_OPTS };
static const cli_opt threads_opts[] = {
    {"threads", 0, "N", NULL, "CPU threads (OpenMP; default: OMP_NUM_THREADS or all cores)."}, {0}};

enum { OPT_FORMAT, OPT_UNDIRECTED, OPT_SELF_LOOPS, OPT_DUPLICATES, OPT_WEIGHTS, N_GRAPH };
static const cli_opt graph_opts[] = {
    {"format", 0, "FMT", "auto",
     "Input format: auto, edgelist, mtx, metis or sgr. auto recognises .sgr and Matrix Market by "
     "their first bytes and METIS by the extension (.graph, .metis). An .sgr holds a graph "
     "built already: the options below are applied to it as to the file it was made from, or "
     "refused when it lost what they need."},
    {"undirected", 0, NULL, NULL, "Add the reverse of every edge (a self-loop is kept once)."},
    {"self-loops", 0, "keep|drop", "keep", "Keep self-loops as listed, or remove them."},
    {"duplicates", 0, "auto|keep|drop|sum", "auto",
     "Parallel edges: auto keeps them in a directed graph and drops them in an undirected one; "
     "drop keeps one, with the smallest weight; sum keeps one with the weights added."},
    {"weights", 0, "auto|ignore|require", "auto",
     "Edge weights: use a weight column when present, read and drop it, or require it."},
    {0}};

enum { OWN_BASE = 256, COMMON_BASE = 512, GRAPH_BASE = 768, THREADS_BASE = 1024, N_GROUPS = 4 };

static int count_opts(const cli_opt *o) {
    int n = 0;
    while (o && o[n].name)
        n++;
    return n;
}

void cli_begin(cli_ctx *c, const cli_cmd *cmd, int argc, char **argv) {
    memset(c, 0, sizeof *c);
    c->cmd = cmd;
    c->argc = argc;
    c->argv = argv;
    c->load = saga_load_opts_defaults();
    c->t_start = saga_now();
    c->ranks = 1;
    c->n_own = count_opts(cmd->opts);
    /* --json anywhere before "--" asks for the error object too, even when parsing stops at an
     * earlier option */
    for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++)
        if (strcmp(argv[i], "--json") == 0)
            c->json = true;
}

/* cli_default_device's "auto" when SAGA_DEVICE is unset: told apart by its address. */
static const char default_auto[] = "auto";

const char *cli_default_device(void) {
    const char *d = getenv("SAGA_DEVICE");
    return d && *d ? d : default_auto;
}

int cli_check_device(cli_ctx *c, const char *device) {
    if (strcmp(device, "auto") != 0 && strcmp(device, "cpu") != 0 &&
        strncmp(device, "cuda", 4) != 0)
        return cli_usage(c, "--device must be auto, cpu, cuda or cuda:N, got '%s'", device);
    return 0;
}

/* ---- messages ------------------------------------------------------------------------------ */

void cli_json_error(cli_ctx *c, const char *msg, const char *status, int exit_code) {
    if (!c->json || c->rank != 0)
        return;
    fflush(stderr);
    json j;
    json_init(&j, stdout);
    json_object_begin(&j);
    json_key(&j, "error"), json_str(&j, msg);
    json_key(&j, "status"), json_str(&j, status);
    json_key(&j, "exit_code"), json_int(&j, exit_code);
    json_object_end(&j);
    json_finish(&j);
}

int cli_threads_of(const saga_backend *be) {
    return !be || saga_backend_get_kind(be) == SAGA_BACKEND_CPU ? omp_get_max_threads() : 0;
}

void cli_json_device(json *j, const saga_backend *be) {
    json_key(j, "device"), json_str(j, be ? saga_backend_name(be) : "cpu");
    json_key(j, "threads"), json_int(j, cli_threads_of(be));
}

void cli_json_outputs(json *j, const char *const *paths, int n) {
    json_key(j, "outputs"), json_array_begin(j);
    for (int i = 0; i < n; i++)
        if (paths[i])
            json_str(j, paths[i]);
    json_array_end(j);
}

int cli_usage(cli_ctx *c, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "saga %s: %s\nsee 'saga %s --help'\n", c->cmd->name, msg, c->cmd->name);
    /* a usage error is an invalid argument; the exit code tells it from a library's */
    cli_json_error(c, msg, saga_status_name(SAGA_ERR_INVALID_ARG), CLI_USAGE);
    c->exit_code = CLI_USAGE;
    return CLI_USAGE;
}

/* The last error's message and status, for cli_fail and cli_fail_ranks. */
static const char *last_message(const char **status) {
    const char *msg = saga_last_error();
    saga_status st = saga_last_status();
    *status = saga_status_name(st < 0 ? st : SAGA_ERR_INTERNAL);
    return msg && *msg ? msg : "unknown error";
}

int cli_fail(cli_ctx *c) {
    cli_progress_end(c);
    const char *status;
    const char *msg = last_message(&status);
    fprintf(stderr, "saga: %s\n", msg);
    cli_json_error(c, msg, status, CLI_ERROR);
    return CLI_ERROR;
}

saga_status cli_comm_open(cli_ctx *c, saga_comm **comm) {
    saga_status st = saga_comm_open(comm, "auto");
    if (st < 0)
        return st;
    c->rank = saga_comm_rank(*comm);
    c->ranks = saga_comm_size(*comm);
    if (c->rank != 0) {
        cli_progress_end(c);
        c->quiet = true;
        c->json = false;
        saga_log_set_level(SAGA_LOG_ERROR);
    }
    return SAGA_OK;
}

saga_status cli_backend_open(cli_ctx *c, saga_backend **be, const char *device,
                             const saga_comm *comm, const saga_backend_params *p) {
    bool shared = comm && saga_comm_local_size(comm) > 1; /* several ranks on this machine */
    int gpu = shared ? saga_comm_local_rank(comm) : 0;
    saga_status st;
    if (strcmp(device, "auto") == 0) {
        st = saga_backend_cuda_new(be, gpu, p);
        if (st == SAGA_OK || st == SAGA_ERR_INVALID_ARG) /* bad params fail the CPU the same way */
            return st;
        /* a warning for a GPU the user asked for; for a default nobody chose, a note */
        if (c->rank == 0) {
            char who[32] = "";
            if (shared)
                snprintf(who, sizeof who, " for rank %d", gpu);
            saga_log(device == default_auto ? SAGA_LOG_INFO : SAGA_LOG_WARN,
                     "no usable GPU%s (%s); running on the CPU", who, saga_last_error());
        }
        saga_error_clear();
        return saga_backend_cpu_new(be, p);
    }
    if (shared && strcmp(device, "cuda") == 0)
        st = saga_backend_cuda_new(be, gpu, p);
    else
        st = saga_backend_open(be, device, p);
    if (st < 0 && st != SAGA_ERR_INVALID_ARG && strncmp(device, "cuda", 4) == 0)
        st = saga_error_append(st,
                               " (--device %s asks for a GPU: run on the CPU with --device "
                               "cpu, or let saga choose with --device auto)",
                               device);
    return st;
}

int cli_fail_ranks(cli_ctx *c, saga_comm *comm, bool agreed) {
    if (!comm || saga_comm_size(comm) <= 1)
        return cli_fail(c);
    cli_progress_end(c);
    const char *status;
    const char *msg = last_message(&status);
    if (agreed) {
        if (saga_comm_rank(comm) == 0) {
            fprintf(stderr, "saga: %s\n", msg);
            cli_json_error(c, msg, status, CLI_ERROR);
        }
        return CLI_ERROR;
    }
    fprintf(stderr, "saga: rank %d of %d: %s\n", saga_comm_rank(comm), saga_comm_size(comm), msg);
    cli_json_error(c, msg, status, CLI_ERROR);
    saga_comm_abort(comm, CLI_ERROR);
    return CLI_ERROR;
}

saga_status cli_rank_stats_of(cli_rank_stats *out, saga_comm *comm, const saga_net_stats *mine) {
    saga_status st = SAGA_OK;
    cli_rank_stats r = {.ranks = saga_comm_size(comm)};
    int me = saga_comm_rank(comm);
    SAGA_TRY(saga_alloc_zeroed((void **)&r.peak_device_bytes, (size_t)r.ranks,
                               sizeof *r.peak_device_bytes, "per-rank peaks"));
    r.peak_device_bytes[me] = mine->peak_device_bytes;
    int64_t sums[4] = {(int64_t)mine->comm_sent_bytes, (int64_t)mine->comm_recv_bytes,
                       mine->halo_rows, mine->remote_rows};
    double secs = mine->comm_seconds;
    double hid[2] = {mine->comm_hidden * mine->comm_seconds, mine->comm_seconds};
    if (r.ranks > 1) {
        SAGA_TRY(saga_comm_allreduce(comm, sums, 4, SAGA_I64, SAGA_COMM_SUM, NULL));
        SAGA_TRY(saga_comm_allreduce(comm, hid, 2, SAGA_F64, SAGA_COMM_SUM, NULL));
        SAGA_TRY(saga_comm_allreduce(comm, &secs, 1, SAGA_F64, SAGA_COMM_MAX, NULL));
        SAGA_TRY(saga_comm_allreduce(comm, r.peak_device_bytes, (size_t)r.ranks, SAGA_I64,
                                     SAGA_COMM_SUM, NULL));
    }
    r.comm_sent_bytes = (uint64_t)sums[0];
    r.comm_recv_bytes = (uint64_t)sums[1];
    r.halo_rows = sums[2];
    r.remote_rows = sums[3];
    r.comm_seconds = secs;
    r.comm_hidden = hid[1] > 0 ? hid[0] / hid[1] : 0.0;
    *out = r;
    return SAGA_OK;
fail:
    saga_free(r.peak_device_bytes);
    return st;
}

void cli_rank_stats_free(cli_rank_stats *r) {
    saga_free(r->peak_device_bytes);
    r->peak_device_bytes = NULL;
}

void cli_say_rank_stats(cli_ctx *c, const cli_rank_stats *r, const char *per) {
    char b1[32], b2[32], b3[32], b4[32];
    size_t lo = SIZE_MAX, hi = 0;
    for (int q = 0; q < r->ranks; q++) {
        lo = r->peak_device_bytes[q] < lo ? r->peak_device_bytes[q] : lo;
        hi = r->peak_device_bytes[q] > hi ? r->peak_device_bytes[q] : hi;
    }
    cli_say(c,
            "ranks     %d: %s sent between them%s (%s halo rows received), %.3f s exchanging "
            "(most of any rank), %.0f%% of it hidden; device peaks %s to %s\n",
            r->ranks, cli_bytes(b1, sizeof b1, (int64_t)r->comm_sent_bytes), per,
            cli_count(b2, sizeof b2, r->remote_rows), r->comm_seconds, 100 * r->comm_hidden,
            cli_bytes(b3, sizeof b3, (int64_t)lo), cli_bytes(b4, sizeof b4, (int64_t)hi));
}

void cli_json_rank_stats(json *j, const cli_rank_stats *r) {
    json_key(j, "ranks"), json_int(j, r->ranks);
    json_key(j, "comm_bytes"), json_object_begin(j);
    json_key(j, "sent"), json_uint(j, r->comm_sent_bytes);
    json_key(j, "received"), json_uint(j, r->comm_recv_bytes);
    json_object_end(j);
    json_key(j, "comm_seconds"), json_num(j, r->comm_seconds);
    json_key(j, "comm_hidden"), json_num(j, r->comm_hidden);
    json_key(j, "remote_rows"), json_int(j, r->remote_rows);
    json_key(j, "rank_peak_device_bytes"), json_array_begin(j);
    for (int q = 0; q < r->ranks; q++)
        json_uint(j, r->peak_device_bytes[q]);
    json_array_end(j);
}

static FILE *human(cli_ctx *c) {
    if (c->quiet)
        return NULL;
    return c->json ? stderr : stdout;
}

void cli_say(cli_ctx *c, const char *fmt, ...) {
    FILE *f = human(c);
    if (!f)
        return;
    cli_progress_end(c);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(f, fmt, ap);
    va_end(ap);
}

void cli_warn(cli_ctx *c, const char *fmt, ...) {
    if (c->quiet)
        return;
    cli_progress_end(c);
    va_list ap;
    va_start(ap, fmt);
    fputs("saga: warning: ", stderr);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

void cli_progress(cli_ctx *c, const char *fmt, ...) {
    if (c->quiet || !isatty(STDERR_FILENO))
        return;
    double now = saga_now();
    if (now - c->t_start < 1.0 || now - c->progress_last < 0.1)
        return;
    c->progress_last = now;
    va_list ap;
    va_start(ap, fmt);
    fputs("\r\033[K", stderr);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fflush(stderr);
    c->progress_shown = true;
}

void cli_progress_end(cli_ctx *c) {
    if (c->progress_shown) {
        fputs("\r\033[K", stderr);
        fflush(stderr);
        c->progress_shown = false;
    }
}

/* ---- help ---------------------------------------------------------------------------------- */

enum { HELP_WIDTH = 96, HELP_COL = 30 };

/* Writes text word-wrapped to HELP_WIDTH, continuation lines indented by `indent`; `col` is
 * where the cursor already is. '\n' in the text starts a new paragraph. */
static void wrap(FILE *f, const char *text, int col, int indent) {
    const char *p = text;
    while (*p) {
        if (*p == '\n') { /* a paragraph break */
            fprintf(f, "\n\n%*s", indent, "");
            col = indent;
            p++;
            continue;
        }
        if (*p == ' ') {
            p++;
            continue;
        }
        size_t w = strcspn(p, " \n");
        if (col > indent && col + 1 + (int)w > HELP_WIDTH) {
            fprintf(f, "\n%*s", indent, "");
            col = indent;
        } else if (col > indent) {
            fputc(' ', f);
            col++;
        }
        fwrite(p, 1, w, f);
        col += (int)w;
        p += w;
    }
}

static void print_opts(FILE *f, const cli_opt *opts) {
    for (int i = 0; opts[i].name; i++) {
        const cli_opt *o = &opts[i];
        if (!o->help)
            continue; /* an alias: named with its option */
        int col = 0;
        if (o->short_name)
            col += fprintf(f, "  -%c, --%s", o->short_name, o->name);
        else
            col += fprintf(f, "      --%s", o->name);
        if (o->arg)
            col += fprintf(f, " %s", o->arg);
        if (col + 2 > HELP_COL) {
            fprintf(f, "\n%*s", HELP_COL, "");
        } else {
            fprintf(f, "%*s", HELP_COL - col, "");
        }
        char text[1024], alias[64] = "";
        if (opts[i + 1].name && !opts[i + 1].help)
            snprintf(alias, sizeof alias, "%s--%s is an older spelling", o->def ? "; " : " (",
                     opts[i + 1].name);
        if (o->def)
            snprintf(text, sizeof text, "%s (default: %s%s)", o->help, o->def, alias);
        else
            snprintf(text, sizeof text, "%s%s%s", o->help, alias, *alias ? ")" : "");
        wrap(f, text, HELP_COL, HELP_COL);
        fputc('\n', f);
    }
}

void cli_print_help(const cli_cmd *cmd, FILE *f) {
    fprintf(f, "usage: saga %s [options]%s%s\n", cmd->name, cmd->args ? " " : "",
            cmd->args ? cmd->args : "");
    if (cmd->alias)
        fprintf(f, "       saga %s: the same command\n", cmd->alias);
    fputc('\n', f);
    wrap(f, cmd->description, 0, 0);
    fputs("\n\noptions:\n", f);
    if (cmd->opts && cmd->opts[0].name)
        print_opts(f, cmd->opts);
    if (cmd->flags & CLI_THREADS)
        print_opts(f, threads_opts);
    print_opts(f, common_opts);
    if (cmd->flags & CLI_GRAPH_OPTS) {
        fputs("\ngraph loading:\n", f);
        print_opts(f, graph_opts);
    }
    if (cmd->example) {
        fputs("\nexample:\n  ", f);
        for (const char *p = cmd->example; *p; p++) {
            fputc(*p, f);
            if (*p == '\n')
                fputs("  ", f);
        }
        fputc('\n', f);
    }
    fputs("\nexit status: 0 success, 1 error (message on stderr), 2 wrong usage.\n", f);
}

/* ---- parsing ------------------------------------------------------------------------------- */

/* The option name behind a getopt value, for messages. */
static const char *opt_name(const cli_ctx *c, int val) {
    if (val >= THREADS_BASE && val < THREADS_BASE + N_THREADS_OPTS)
        return threads_opts[val - THREADS_BASE].name;
    if (val >= GRAPH_BASE && val < GRAPH_BASE + N_GRAPH)
        return graph_opts[val - GRAPH_BASE].name;
    if (val >= COMMON_BASE && val < COMMON_BASE + N_COMMON)
        return common_opts[val - COMMON_BASE].name;
    if (val >= OWN_BASE && val < OWN_BASE + c->n_own)
        return c->cmd->opts[val - OWN_BASE].name;
    return NULL;
}

static int graph_opt(cli_ctx *c, int which, const char *arg) {
    switch (which) {
    case OPT_FORMAT: {
        int f = saga_format_parse(arg);
        if (f < 0)
            return cli_usage(c, "--format must be auto, edgelist, mtx, metis or sgr, got '%s'",
                             arg);
        c->load.format = (saga_format)f;
        return 0;
    }
    case OPT_UNDIRECTED:
        c->load.graph.undirected = true;
        return 0;
    case OPT_SELF_LOOPS:
        if (strcmp(arg, "keep") == 0)
            c->load.graph.self_loops = SAGA_SELF_LOOPS_KEEP;
        else if (strcmp(arg, "drop") == 0)
            c->load.graph.self_loops = SAGA_SELF_LOOPS_DROP;
        else
            return cli_usage(c, "--self-loops must be keep or drop, got '%s'", arg);
        c->load.self_loops_set = true;
        return 0;
    case OPT_DUPLICATES: {
        static const char *const names[] = {"auto", "keep", "drop", "sum"};
        for (int i = 0; i < SAGA_DUPLICATES_COUNT; i++)
            if (strcmp(arg, names[i]) == 0) {
                c->load.graph.duplicates = (saga_duplicates)i;
                return 0;
            }
        return cli_usage(c, "--duplicates must be auto, keep, drop or sum, got '%s'", arg);
    }
    case OPT_WEIGHTS: {
        static const char *const names[] = {"auto", "ignore", "require"};
        for (int i = 0; i < SAGA_WEIGHTS_COUNT; i++)
            if (strcmp(arg, names[i]) == 0) {
                c->load.weights = (saga_weights)i;
                return 0;
            }
        return cli_usage(c, "--weights must be auto, ignore or require, got '%s'", arg);
    }
    default:
        return 0;
    }
}

/* The option groups in getopt order, with the value base of each. */
static const cli_opt *group(const cli_ctx *c, int g, int *base) {
    static const int bases[N_GROUPS] = {OWN_BASE, COMMON_BASE, GRAPH_BASE, THREADS_BASE};
    *base = bases[g];
    if (g == 0)
        return c->cmd->opts;
    if (g == 1)
        return common_opts;
    if (g == 2)
        return (c->cmd->flags & CLI_GRAPH_OPTS) ? graph_opts : NULL;
    return (c->cmd->flags & CLI_THREADS) ? threads_opts : NULL;
}

/* Builds getopt's tables once, and resets getopt (GNU: optind 0 re-initialises). */
static void prepare(cli_ctx *c) {
    int n = 0, ns = 0;
    c->shorts[ns++] = ':'; /* report a missing value as ':' rather than '?' */
    for (int g = 0; g < N_GROUPS; g++) {
        int base;
        const cli_opt *opts = group(c, g, &base);
        for (int i = 0; opts && opts[i].name && n < CLI_MAX_OPTS; i++) {
            int k = i; /* an alias stands for the option before it */
            while (k > 0 && !opts[k].help)
                k--;
            int has_arg = opts[k].arg ? required_argument : no_argument;
            c->longopts[n++] = (struct option){opts[i].name, has_arg, NULL, base + k};
            if (opts[i].short_name) {
                c->shorts[ns++] = opts[i].short_name;
                if (opts[i].arg)
                    c->shorts[ns++] = ':';
            }
        }
    }
    c->longopts[n] = (struct option){0};
    c->shorts[ns] = '\0';
    c->started = true;
    optind = 0;
    opterr = 0; /* messages are ours */
}

/* Parses the next option; handles the shared ones itself and returns the command's own. */
int cli_next(cli_ctx *c, const char **arg) {
    if (!c->started)
        prepare(c);
    for (;;) {
        int idx = -1;
        int r = getopt_long(c->argc, c->argv, c->shorts, c->longopts, &idx);
        if (r == -1)
            break;
        if (r == '?') {
            const char *bad = c->argv[optind - 1];
            if (optopt >= OWN_BASE)
                return cli_usage(c, "option '--%s' takes no value", opt_name(c, optopt)), CLI_EXIT;
            if (optopt)
                return cli_usage(c, "unknown option '-%c'", optopt), CLI_EXIT;
            size_t len = strcspn(bad, "=");
            return cli_usage(c, "unknown option '%.*s'", (int)len, bad), CLI_EXIT;
        }
        if (r == ':') {
            const char *name = opt_name(c, optopt);
            if (name)
                return cli_usage(c, "option '--%s' needs a value", name), CLI_EXIT;
            return cli_usage(c, "option '-%c' needs a value", optopt), CLI_EXIT;
        }
        if (r < OWN_BASE) { /* a one-letter alias: find its option */
            int ch = r;
            for (int g = 0; g < N_GROUPS; g++) {
                int base;
                const cli_opt *opts = group(c, g, &base);
                for (int i = 0; opts && opts[i].name; i++)
                    if (opts[i].short_name == ch)
                        r = base + i;
            }
        }
        if (r >= OWN_BASE && r < OWN_BASE + c->n_own) {
            *arg = optarg;
            return r - OWN_BASE;
        }
        if (r == COMMON_BASE + OPT_HELP) {
            cli_print_help(c->cmd, stdout);
            c->exit_code = CLI_OK;
            return CLI_EXIT;
        }
        if (r == COMMON_BASE + OPT_QUIET) {
            c->quiet = true;
            saga_log_set_level(SAGA_LOG_ERROR); /* nothing but errors */
        } else if (r == COMMON_BASE + OPT_JSON) {
            c->json = true;
        } else if (r >= GRAPH_BASE && r < GRAPH_BASE + N_GRAPH) {
            if (graph_opt(c, r - GRAPH_BASE, optarg) != 0)
                return CLI_EXIT;
        } else if (r == THREADS_BASE + OPT_THREADS) {
            int64_t t = 0;
            if (cli_int(c, "--threads", optarg, 1, 4096, &t) != 0)
                return CLI_EXIT;
            c->threads = (int)t;
            omp_set_num_threads(c->threads); /* every OpenMP region from here on */
        }
    }

    /* GNU getopt moved the operands to the end. */
    c->args = c->argv + optind;
    c->n_args = c->argc - optind;
    if (c->n_args < c->cmd->min_args)
        return cli_usage(c, "missing %s", c->cmd->args ? c->cmd->args : "arguments"), CLI_EXIT;
    if (c->n_args > c->cmd->max_args)
        return cli_usage(c, "unexpected argument '%s'", c->args[c->cmd->max_args]), CLI_EXIT;
    return CLI_DONE;
}

int cli_int(cli_ctx *c, const char *opt, const char *arg, int64_t min, int64_t max, int64_t *out) {
    char *end = NULL;
    errno = 0;
    long long v = strtoll(arg, &end, 10);
    if (end == arg || *end || errno == ERANGE || v < min || v > max)
        return cli_usage(c, "%s must be an integer in %lld..%lld, got '%s'", opt, (long long)min,
                         (long long)max, arg);
    *out = v;
    return 0;
}

int cli_int_range(cli_ctx *c, const char *opt, const char *what, const char *arg, int32_t *a,
                  int32_t *b) {
    char first[24] = "", name[96];
    const char *colon = strchr(arg, ':');
    const size_t len = colon ? (size_t)(colon - arg) : strlen(arg);
    if (len >= sizeof first)
        return cli_usage(c, "%s takes A or A:B, got '%s'", opt, arg);
    memcpy(first, arg, len);
    int64_t x = 0, y = 0;
    snprintf(name, sizeof name, "%s' first %s", opt, what);
    int bad = cli_int(c, name, first, 1, INT32_MAX, &x);
    y = x;
    snprintf(name, sizeof name, "%s' last %s", opt, what);
    if (!bad && colon)
        bad = cli_int(c, name, colon + 1, x, INT32_MAX, &y);
    if (!bad)
        *a = (int32_t)x, *b = (int32_t)y;
    return bad;
}

int cli_u64(cli_ctx *c, const char *opt, const char *arg, uint64_t *out) {
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(arg, &end, 10);
    if (end == arg || *end || errno == ERANGE || arg[strspn(arg, " \t")] == '-')
        return cli_usage(c, "%s must be a non-negative integer, got '%s'", opt, arg);
    *out = v;
    return 0;
}

int cli_double(cli_ctx *c, const char *opt, const char *arg, double min, double max, bool max_open,
               double *out) {
    char *end = NULL;
    errno = 0;
    double v = strtod(arg, &end);
    if (end == arg || *end || !isfinite(v) || v < min || v > max || (max_open && v == max))
        return cli_usage(c, "%s must be a number in [%g, %g%c, got '%s'", opt, min, max,
                         max_open ? ')' : ']', arg);
    *out = v;
    return 0;
}

int cli_size(cli_ctx *c, const char *opt, const char *arg, size_t *out) {
    char *end = NULL;
    errno = 0;
    double v = strtod(arg, &end);
    double scale = 1;
    if (end != arg && *end) {
        switch (*end) {
        case 'k':
        case 'K':
            scale = 1024.0;
            break;
        case 'm':
        case 'M':
            scale = 1024.0 * 1024;
            break;
        case 'g':
        case 'G':
            scale = 1024.0 * 1024 * 1024;
            break;
        case 't':
        case 'T':
            scale = 1024.0 * 1024 * 1024 * 1024;
            break;
        default:
            scale = 0;
        }
        if (scale > 1) {
            end++;
            if (*end == 'i')
                end++;
            if (*end == 'B')
                end++;
        } else if (*end == 'B' && end[1] == '\0') {
            scale = 1, end++;
        }
    }
    if (end == arg || *end || scale == 0 || !isfinite(v) || v <= 0 || v * scale >= 0x1p62)
        return cli_usage(c, "%s must be a size such as 512M, 2G or 1500000 (bytes), got '%s'", opt,
                         arg);
    *out = (size_t)(v * scale);
    return 0;
}

void cli_say_net_stats(cli_ctx *c, const saga_net_stats *ns, const char *per) {
    char b1[32], b2[32], b3[32], b4[48] = "";
    if (ns->budget_bytes) {
        char b5[32];
        snprintf(b4, sizeof b4, " of a %s budget",
                 cli_bytes(b5, sizeof b5, (int64_t)ns->budget_bytes));
    }
    char hidden[96];
    if (ns->copies_inline)
        snprintf(hidden, sizeof hidden, "copies in order with the kernels (these take every core)");
    else
        snprintf(hidden, sizeof hidden, "%.0f%% of copy time hidden", 100 * ns->overlap);
    cli_say(c, "memory: %s, %d part%s; peak device %s%s; %s%s host->device, %s device->host, %s\n",
            ns->streamed ? "streamed" : "in memory", (int)ns->parts, ns->parts == 1 ? "" : "s",
            cli_bytes(b1, sizeof b1, (int64_t)ns->peak_device_bytes), b4,
            cli_bytes(b2, sizeof b2, (int64_t)ns->h2d_bytes), per,
            cli_bytes(b3, sizeof b3, (int64_t)ns->d2h_bytes), hidden);
    if (ns->streamed && ns->h2d_floor_bytes)
        cli_say(
            c,
            "        host->device %.2fx the %s%s that cross when nothing stays on the device "
            "between passes (the input rows and each aggregation's tiles once per pass)%s%s%s\n",
            (double)ns->h2d_bytes / (double)ns->h2d_floor_bytes,
            cli_bytes(b1, sizeof b1, (int64_t)ns->h2d_floor_bytes), per,
            ns->resident_bytes ? "; " : "",
            ns->resident_bytes ? cli_bytes(b2, sizeof b2, (int64_t)ns->resident_bytes) : "",
            ns->resident_bytes ? " of narrow activations resident" : "");
    if (ns->streamed && ns->h2d_seconds > 0)
        cli_say(c,
                "        host->device copies %.2f ms%s at %.1f GB/s (timed on the device): no "
                "streamed pass is faster than its copies\n",
                1e3 * ns->h2d_seconds, per, (double)ns->h2d_bytes / ns->h2d_seconds / 1e9);
}

void cli_json_net_stats(json *j, const saga_net_stats *ns) {
    json_key(j, "streamed"), json_bool(j, ns->streamed);
    json_key(j, "parts"), json_int(j, ns->parts);
    json_key(j, "h2d_bytes"), json_int(j, (int64_t)ns->h2d_bytes);
    json_key(j, "d2h_bytes"), json_int(j, (int64_t)ns->d2h_bytes);
    json_key(j, "peak_device_bytes"), json_int(j, (int64_t)ns->peak_device_bytes);
    json_key(j, "overlap"), json_num(j, ns->overlap);
    json_key(j, "copy_seconds"), json_num(j, ns->copy_seconds);
    json_key(j, "wait_seconds"), json_num(j, ns->wait_seconds);
    json_key(j, "h2d_seconds"), json_num(j, ns->h2d_seconds);
    json_key(j, "copies_inline"), json_bool(j, ns->copies_inline);
    json_key(j, "graph"), json_bool(j, ns->graph);
    json_key(j, "prepare_seconds"), json_num(j, ns->prepare_seconds);
    json_key(j, "resident_bytes"), json_int(j, (int64_t)ns->resident_bytes);
    json_key(j, "h2d_floor_bytes"), json_int(j, (int64_t)ns->h2d_floor_bytes);
    json_key(j, "rows_computed"), json_int(j, ns->rows_computed);
    json_key(j, "stage_rows"), json_array_begin(j);
    for (int s = 0; s < ns->stages && s < SAGA_NET_STAGE_ROWS; s++)
        json_int(j, ns->stage_rows[s]);
    json_array_end(j);
}

cli_exec cli_exec_defaults(void) {
    return (cli_exec){.partition = SAGA_PARTITION_METIS};
}

int cli_exec_opt(cli_ctx *c, int i, const char *arg, cli_exec *e) {
    int64_t v = 0;
    int bad = 0;
    switch (i) {
    case 0:
        return cli_size(c, "--device-mem", arg, &e->device_mem);
    case 1:
        e->stream = true;
        return 0;
    case 2:
        if (!(bad = cli_int(c, "--parts", arg, 1, 1 << 30, &v)))
            e->parts = (int32_t)v;
        return bad;
    case 3:
        for (int m = 0; m < SAGA_PARTITION_METHOD_COUNT; m++)
            if (strcmp(arg, saga_partition_method_name((saga_partition_method)m)) == 0) {
                e->partition = (saga_partition_method)m;
                return 0;
            }
        return cli_usage(c, "--partition must be metis, contiguous, random or fennel, got '%s'",
                         arg);
    case 4:
        e->stats = true;
        return 0;
    default:
        e->host_halos = true;
        return 0;
    }
}

bool cli_exec_wanted(const cli_exec *e) {
    return e->device_mem || e->stream || e->parts || e->stats || e->host_halos;
}

saga_net_opts cli_exec_net_opts(const cli_exec *e) {
    saga_net_opts no = saga_net_opts_defaults();
    no.exec = e->stream ? SAGA_EXEC_STREAM : SAGA_EXEC_AUTO;
    no.parts = e->parts;
    no.partition = e->partition;
    no.host_halos = e->host_halos;
    return no;
}

/* ---- helpers ------------------------------------------------------------------------------- */

saga_status cli_load_graph(cli_ctx *c, saga_graph **g, const char *path, double *seconds) {
    if (!c->quiet && isatty(STDERR_FILENO)) {
        fprintf(stderr, "loading %s ...", path);
        fflush(stderr);
        c->progress_shown = true;
    }
    double t0 = saga_now();
    saga_status st = saga_graph_load(g, path, &c->load);
    *seconds = saga_now() - t0;
    cli_progress_end(c);
    return st;
}

int64_t cli_file_size(const char *path) {
    struct stat sb;
    if (stat(path, &sb) != 0)
        return -1;
    return (int64_t)sb.st_size;
}

const char *cli_count(char *buf, size_t size, int64_t n) {
    char digits[32];
    int len = snprintf(digits, sizeof digits, "%lld", (long long)(n < 0 ? -n : n));
    size_t k = 0;
    if (n < 0 && k + 1 < size)
        buf[k++] = '-';
    for (int i = 0; i < len && k + 1 < size; i++) {
        if (i > 0 && (len - i) % 3 == 0 && k + 2 < size)
            buf[k++] = ',';
        buf[k++] = digits[i];
    }
    buf[k] = '\0';
    return buf;
}

const char *cli_bytes(char *buf, size_t size, int64_t n) {
    if (n < 1000)
        snprintf(buf, size, "%lld B", (long long)n);
    else if (n < 1000 * 1000)
        snprintf(buf, size, "%.1f kB", (double)n / 1e3);
    else if (n < INT64_C(1000) * 1000 * 1000)
        snprintf(buf, size, "%.1f MB", (double)n / 1e6);
    else
        snprintf(buf, size, "%.2f GB", (double)n / 1e9);
    return buf;
}

bool cli_ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

int64_t cli_orig_id(const saga_graph *g, const int64_t *ids, int32_t v) {
    return ids ? ids[v] : saga_graph_orig_id(g, v);
}

saga_status cli_write_vertex_values(const char *path, const saga_graph *g, const int32_t *value,
                                    bool as_vertex) {
    return cli_write_vertex_values_of(path, g, NULL, saga_graph_n_vertices(g), value, as_vertex);
}

saga_status cli_write_vertex_values_of(const char *path, const saga_graph *g, const int64_t *ids,
                                       int32_t n, const int32_t *value, bool as_vertex) {
    saga_status st = SAGA_OK;
    FILE *f = fopen(path, "w");
    SAGA_CHECK(f != NULL, SAGA_ERR_IO, "cannot create '%s': %s", path, strerror(errno));
    for (int32_t v = 0; v < n; v++) {
        long long x = as_vertex ? (long long)cli_orig_id(g, ids, value[v]) : (long long)value[v];
        if (fprintf(f, "%lld %lld\n", (long long)cli_orig_id(g, ids, v), x) < 0)
            break;
    }
    int rc = ferror(f) | fclose(f);
    SAGA_CHECK(rc == 0, SAGA_ERR_IO, "%s: write failed: %s", path, strerror(errno));
fail:
    return st;
}

bool cli_is_shards(const char *path) {
    char manifest[4200];
    snprintf(manifest, sizeof manifest, "%s/manifest.txt", path);
    return access(manifest, F_OK) == 0;
}

saga_status cli_shards_open(const char *dir, saga_comm *comm, saga_shards_manifest *m,
                            saga_shard **sh, saga_graph **lg, saga_net_halo *hx) {
    saga_status st = SAGA_OK;
    SAGA_TRY(saga_shards_manifest_read(m, dir));
    SAGA_TRY(saga_shards_for_ranks(m, dir, saga_comm_size(comm)));
    SAGA_TRY(saga_shard_open(sh, dir, saga_comm_rank(comm), NULL));
    SAGA_TRY(saga_shard_graph(*sh, lg));
    *hx = saga_net_halo_of_shard(*sh, comm);
fail:
    return st;
}

saga_status cli_shards_gather(saga_comm *comm, const void *rec, int64_t n, size_t bytes, void **out,
                              int64_t *n_out) {
    saga_status st = SAGA_OK;
    const int R = saga_comm_size(comm), me = saga_comm_rank(comm);
    int64_t *cnt = NULL, all = 0;
    size_t *sb = NULL;
    *out = NULL;
    *n_out = 0;
    SAGA_TRY(saga_alloc_zeroed((void **)&cnt, (size_t)R, sizeof *cnt, "counts"));
    SAGA_TRY(saga_alloc_zeroed((void **)&sb, 4 * (size_t)R, sizeof *sb, "counts"));
    cnt[me] = n;
    SAGA_TRY(saga_comm_allreduce(comm, cnt, (size_t)R, SAGA_I64, SAGA_COMM_SUM, NULL));
    size_t *sc = sb, *so = sb + R, *rc = sb + 2 * R, *ro = sb + 3 * R;
    sc[0] = (size_t)n * bytes; /* to rank 0 alone */
    for (int q = 0; q < R; q++) {
        if (me == 0) {
            rc[q] = (size_t)cnt[q] * bytes;
            ro[q] = (size_t)all * bytes;
        }
        all += cnt[q];
    }
    if (me == 0)
        SAGA_TRY(saga_alloc_array(out, (size_t)all + 1, bytes, "gathered rows"));
    SAGA_TRY(saga_comm_alltoallv(comm, rec, sc, so, *out, rc, ro, NULL));
    if (me == 0)
        *n_out = all;
fail:
    if (st < 0) {
        saga_free(*out);
        *out = NULL;
    }
    saga_free(cnt);
    saga_free(sb);
    return st;
}
