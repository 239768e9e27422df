/* cmd_plot.c - `saga plot LOG -o FILE`: draws a run's JSON lines as a PNG or SVG by running
 * python/saga/plot.py (matplotlib) with python3; the C library itself draws nothing. */
#include "commands.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

enum { OPT_OUT, OPT_KIND, OPT_WIDTH, OPT_HEIGHT, OPT_PLANS };
static const cli_opt plot_opts[] = {
    {"output", 'o', "FILE", NULL, "The picture to write: FILE.png or FILE.svg (required)."},
    {"kind", 0, "KIND", "auto",
     "training (gcn --log), timeline (gcn or pagerank --trace), hep (hep eval --log), partition "
     "(partition "
     "--json), or auto: from the log's keys."},
    {"width", 0, "PX", "960", "Width in pixels (an SVG is as large at 100 pixels per inch)."},
    {"height", 0, "PX", "540", "Height in pixels."},
    {"plans", 0, "A:B", NULL,
     "timeline: only the scheduler's plans A to B (one per pass of training, from 1); the other "
     "kinds ignore it."},
    {0}};

static int plot_main(int argc, char **argv);

const cli_cmd cli_cmd_plot = {
    .name = "plot",
    .summary = "Draw a run's --log JSON lines as a PNG or SVG (needs python3 and matplotlib)",
    .args = "LOG",
    .min_args = 1,
    .max_args = 1,
    .description =
        "Draws the JSON lines a command wrote: training curves from `saga gcn --log` (loss, "
        "train/val/test accuracy per epoch); a timeline of the block scheduler's copies against "
        "its computes from `saga gcn --trace` or `saga pagerank --trace` (with the share of copy "
        "time that ran under "
        "compute); efficiency and purity against the threshold and the ROC curve from `saga hep "
        "eval --log`; each part's size and halo from `saga partition --json`. The kind follows "
        "from the log's keys unless --kind names it.\n"
        "The drawing is done by plot.py (matplotlib, Agg backend): installed in share/saga beside "
        "the binary's prefix, else found in the source tree the binary was built from. It runs "
        "with $SAGA_PYTHON when set, else with the first of python3 (on the PATH) and "
        "/usr/bin/python3 that has matplotlib installed (Debian: apt-get install "
        "python3-matplotlib; or pip install matplotlib). It can also be run by itself: python3 "
        "plot.py LOG -o FILE.",
    .opts = plot_opts,
    .flags = 0,
    .example = "saga gcn --data cora --epochs 200 --log cora.jsonl\n"
               "saga plot cora.jsonl -o cora.png\n"
               "saga gcn --synthetic 20000,10,64,8 --device-mem 8M --epochs 2 --trace tr.jsonl\n"
               "saga plot tr.jsonl -o timeline.svg\n"
               "saga partition ca-GrQc.txt.gz --parts 8 --json > parts.jsonl\n"
               "saga plot parts.jsonl -o parts.png --width 800 --height 400",
    .main = plot_main,
};

/* plot.py: installed beside the binary's prefix, else in the source tree it was built from. */
static bool find_script(char *out, size_t size) {
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash) {
            *slash = '\0';
            snprintf(out, size, "%s/%s/plot.py", exe, SAGA_BIN_TO_DATA);
            if (access(out, R_OK) == 0)
                return true;
        }
    }
    snprintf(out, size, "%s", SAGA_SOURCE_PLOT);
    return access(out, R_OK) == 0;
}

/* 0: py finds matplotlib; 1: it runs but does not; 127: it cannot be run. */
static int probe(const char *py) {
    pid_t pid = fork();
    if (pid < 0)
        return 127;
    if (pid == 0) {
        int null = open("/dev/null", O_WRONLY);
        if (null >= 0) {
            dup2(null, STDOUT_FILENO);
            dup2(null, STDERR_FILENO);
        }
        /* found, not imported: an import takes a second or more */
        execlp(py, py, "-c",
               "import importlib.util, sys; sys.exit(importlib.util.find_spec('matplotlib') is "
               "None)",
               (char *)NULL);
        _exit(127);
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return 127;
    if (!WIFEXITED(status))
        return 1;
    return WEXITSTATUS(status) == 0 ? 0 : WEXITSTATUS(status) == 127 ? 127 : 1;
}

static int plot_main(int argc, char **argv) {
    cli_ctx c;
    const char *arg = NULL, *out = NULL, *kind = NULL, *width = NULL, *height = NULL, *plans = NULL;
    int64_t v = 0;
    int o;
    cli_begin(&c, &cli_cmd_plot, argc, argv);
    while ((o = cli_next(&c, &arg)) >= 0) {
        int bad = 0;
        switch (o) {
        case OPT_OUT:
            out = arg;
            break;
        case OPT_KIND:
            if (strcmp(arg, "auto") && strcmp(arg, "training") && strcmp(arg, "timeline") &&
                strcmp(arg, "hep") && strcmp(arg, "partition"))
                bad = cli_usage(&c,
                                "--kind must be auto, training, timeline, hep or partition, got "
                                "'%s'",
                                arg);
            kind = arg;
            break;
        case OPT_WIDTH:
            bad = cli_int(&c, "--width", arg, 50, 20000, &v);
            width = arg;
            break;
        case OPT_HEIGHT:
            bad = cli_int(&c, "--height", arg, 50, 20000, &v);
            height = arg;
            break;
        case OPT_PLANS:
            plans = arg;
            break;
        }
        if (bad)
            return bad;
    }
    if (o == CLI_EXIT)
        return c.exit_code;
    if (!out)
        return cli_usage(&c, "-o FILE.png or -o FILE.svg is required");
    const char *dot = strrchr(out, '.');
    if (!dot || (strcmp(dot, ".png") && strcmp(dot, ".svg")))
        return cli_usage(&c, "-o must name a .png or .svg file, got '%s'", out);

    char script[PATH_MAX + 64];
    if (!find_script(script, sizeof script)) {
        saga_error(SAGA_ERR_IO,
                   "plot.py not found: neither installed (share/saga/plot.py beside the binary's "
                   "prefix) nor at %s",
                   SAGA_SOURCE_PLOT);
        return cli_fail(&c);
    }
    /* the first Python that has matplotlib */
    const char *env = getenv("SAGA_PYTHON");
    const char *cands[2] = {"python3", "/usr/bin/python3"};
    int n_cands = 2;
    if (env && *env) {
        cands[0] = env;
        n_cands = 1;
    }
    const char *py = NULL;
    bool any = false;
    for (int i = 0; i < n_cands && !py; i++) {
        int r = probe(cands[i]);
        any |= r != 127;
        if (r == 0)
            py = cands[i];
    }
    if (!py) {
        if (!any)
            saga_error(SAGA_ERR_UNSUPPORTED,
                       "%s not found: saga plot needs python3 with "
                       "matplotlib (or SAGA_PYTHON naming one)",
                       n_cands == 1 ? cands[0] : "python3");
        else
            saga_error(SAGA_ERR_UNSUPPORTED,
                       "matplotlib is missing for %s%s: install python3-matplotlib (Debian, "
                       "Ubuntu) or run 'pip install matplotlib'",
                       cands[0], n_cands == 2 ? " and /usr/bin/python3" : "");
        return cli_fail(&c);
    }

    const char *args[16];
    int n = 0;
    args[n++] = py;
    args[n++] = script;
    args[n++] = c.args[0];
    args[n++] = "-o";
    args[n++] = out;
    if (kind)
        args[n++] = "--kind", args[n++] = kind;
    if (width)
        args[n++] = "--width", args[n++] = width;
    if (height)
        args[n++] = "--height", args[n++] = height;
    if (plans)
        args[n++] = "--plans", args[n++] = plans;
    if (c.json)
        args[n++] = "--json";
    args[n] = NULL;
    fflush(NULL);
    execvp(py, (char *const *)args);
    saga_error(SAGA_ERR_IO, "cannot run %s: %s", py, strerror(errno));
    return cli_fail(&c);
}
