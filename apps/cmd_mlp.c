/* cmd_mlp.c - `saga mlp`: trains a tiled MLP whose parameters and optimizer state are many times
 * the device budget, on a synthetic regression task (a fixed random teacher network). */
#include "commands.h"

#include "saga_dense.h"

#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
    OPT_LAYERS,
    OPT_WIDTH,
    OPT_OUTPUTS,
    OPT_BATCH,
    OPT_MICRO,
    OPT_STEPS,
    OPT_LR,
    OPT_OPTIMIZER,
    OPT_SPLIT,
    OPT_DEVICE,
    OPT_DEVICE_MEM,
    OPT_SEED,
    OPT_STATS,
    OPT_STAGES,
    OPT_PIPELINE,
    OPT_PROFILE_STEPS
};
static const cli_opt mlp_opts[] = {
    {"layers", 0, "N", "4", "Linear layers (relu between them)."},
    {"width", 0, "W", "1024", "Width of the input and of every hidden layer."},
    {"outputs", 0, "K", "16", "Outputs (the teacher's)."},
    {"batch", 0, "ROWS", "256", "Rows per training step."},
    {"micro-batches", 0, "N", "4", "Micro-batches per step (must divide the batch)."},
    {"steps", 0, "N", "20", "Training steps."},
    {"lr", 0, "RATE", "0.0003", "Adam's learning rate."},
    {"optimizer", 0, "NAME", "adam",
     "adam (gradients summed over the micro-batches, then Adam) or adama (each micro-batch's "
     "gradient folded into the moments at once, gradient tiles freed)."},
    {"split", 0, "HOW", "cols", "Tiles of columns (cols) or rows (rows) of each weight matrix."},
    {"device", 0, "DEV", NULL,
     CLI_DEVICE_HELP " With --stages S, stage s runs on cuda:N+s (cuda:s for auto), or on a CPU "
                     "backend of its own with 1/S of the threads; under mpirun each rank's stage "
                     "runs on its own device (for cuda, its local rank's GPU; on the CPU the "
                     "ranks of a machine share its cores)."},
    {"device-mem", 0, "SIZE", NULL,
     "Device memory for the network, per stage (512K, 8M, ...; default: an eighth of the "
     "parameters plus Adam's two moments, shared among the stages, plus what a GPU keeps for its "
     "own scratch)."},
    {"seed", 0, "N", "1", "Seed of the teacher, the data and the initial weights."},
    {"stats", 0, NULL, NULL,
     "Report the plan, the bytes moved per step each way, the peak device memory and the share "
     "of copy time hidden behind compute (and per stage of a pipeline, its peak and idle time)."},
    {"stages", 0, "S", "1",
     "Pipeline stages: the layers are cut into S contiguous stages of balanced parameter counts, "
     "each on its own device and thread; micro-batches flow through them in the 1F1B order. "
     "Under mpirun -np S, one stage per rank (S defaults to the number of ranks there), the "
     "activations and gradients sent between the ranks."},
    {"pipeline", 0, "MODE", "sync",
     "sync (a flush after each step: the same training as one stage) or 2bw (PipeDream-2BW: "
     "steps follow each other without a flush, each trained on the weights before the last "
     "update; needs --micro-batches >= S - 1)."},
    {"profile-steps", 0, "A[:B]", NULL,
     "Run steps A to B inside a profiler's capture range: on CUDA cudaProfilerStart before the "
     "call that trains step A and cudaProfilerStop after the one that trains step B, once the "
     "stages' devices are done, which `nsys profile --capture-range=cudaProfilerApi` follows "
     "(and the CUDA simulator's counts, SAGA_CUDASIM_STATS); nothing on the CPU."},
    {0}};

static int mlp_main(int argc, char **argv);

const cli_cmd cli_cmd_mlp = {
    .name = "mlp",
    .summary = "Train a dense network larger than the device memory",
    .args = "",
    .min_args = 0,
    .max_args = 0,
    .description =
        "Trains an MLP (Linear layers with relu between them, mean squared error) to imitate a "
        "fixed random teacher (width -> 32 tanh units -> outputs) on fresh Gaussian inputs each "
        "step, all drawn from --seed. Each weight matrix is cut into tiles of columns or rows; "
        "each tile, its gradient and its Adam moments are blocks that the block scheduler moves "
        "between host and device under --device-mem, loading the next tile while the current one "
        "computes. The planner sizes the tiles; when everything fits it keeps the whole network "
        "on the device. With --stages the layers are spread over several devices as a pipeline. "
        "Prints the loss as it trains and the throughput at the end.",
    .opts = mlp_opts,
    .flags = CLI_THREADS,
    .example = "saga mlp --stats\n"
               "saga mlp --layers 6 --width 2048 --device-mem 24M --optimizer adama --json\n"
               "saga mlp --stages 4 --pipeline 2bw --micro-batches 8 --stats\n"
               "mpirun -np 2 saga mlp --stages 2 --stats",
    .main = mlp_main,
};

typedef struct rng {
    uint64_t s;
} rng;

static uint64_t next_u64(rng *r) {
    uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* A standard normal draw (Box-Muller). */
static double normal(rng *r) {
    double u = ((double)(next_u64(r) >> 11) + 0.5) * 0x1p-53;
    double v = (double)(next_u64(r) >> 11) * 0x1p-53;
    return sqrt(-2.0 * log(u)) * cos(2.0 * M_PI * v);
}

enum { TEACHER_HIDDEN = 32 };

/* The teacher: y = tanh(x A / sqrt(width)) B / sqrt(32), A width x 32, B 32 x outputs. */
typedef struct teacher {
    int64_t in, out;
    double *A, *B;
} teacher;

static saga_status teacher_new(teacher *t, int64_t in, int64_t out, uint64_t seed) {
    saga_status st = SAGA_OK;
    t->in = in;
    t->out = out;
    SAGA_TRY(saga_alloc_array((void **)&t->A, (size_t)(in * TEACHER_HIDDEN), sizeof *t->A,
                              "the teacher"));
    SAGA_TRY(saga_alloc_array((void **)&t->B, (size_t)(TEACHER_HIDDEN * out), sizeof *t->B,
                              "the teacher"));
    rng r = {seed ^ 0x7EAC4E5ull};
    for (int64_t i = 0; i < in * TEACHER_HIDDEN; i++)
        t->A[i] = normal(&r);
    for (int64_t i = 0; i < TEACHER_HIDDEN * out; i++)
        t->B[i] = normal(&r);
fail:
    return st;
}

static void teacher_free(teacher *t) {
    saga_free(t->A);
    saga_free(t->B);
}

/* A batch of rows: Gaussian inputs and the teacher's outputs. */
static void make_batch(const teacher *t, rng *r, int64_t rows, float *x, float *y) {
    double h[TEACHER_HIDDEN];
    for (int64_t i = 0; i < rows; i++) {
        float *xi = x + i * t->in;
        for (int64_t q = 0; q < t->in; q++)
            xi[q] = (float)normal(r);
        for (int k = 0; k < TEACHER_HIDDEN; k++)
            h[k] = 0;
        for (int64_t q = 0; q < t->in; q++)
            for (int k = 0; k < TEACHER_HIDDEN; k++)
                h[k] += xi[q] * t->A[q * TEACHER_HIDDEN + k];
        for (int k = 0; k < TEACHER_HIDDEN; k++)
            h[k] = tanh(h[k] / sqrt((double)t->in));
        for (int64_t c = 0; c < t->out; c++) {
            double s = 0;
            for (int k = 0; k < TEACHER_HIDDEN; k++)
                s += h[k] * t->B[k * t->out + c];
            y[i * t->out + c] = (float)(s / sqrt((double)TEACHER_HIDDEN));
        }
    }
}

/* Opens a backend per stage: stage s on cuda:N+s for a CUDA spec (auto: when stage 0 got a GPU),
 * else on CPU backends sharing the threads. Across ranks (comm of several), only the rank's own
 * stage's, in bes[0]. */
static saga_status open_stages(cli_ctx *c, const saga_comm *comm, const char *spec, int64_t S,
                               size_t budget, saga_backend **bes) {
    saga_status st = SAGA_OK;
    saga_backend_params bp = saga_backend_params_defaults();
    bp.budget_bytes = budget;
    if (saga_comm_size(comm) > 1) {
        /* CPU ranks on one machine share its cores; the count means nothing to a GPU */
        int t = omp_get_max_threads() / saga_comm_local_size(comm);
        bp.n_threads = t > 0 ? t : 1;
        return cli_backend_open(c, &bes[0], spec, comm, &bp);
    }
    if (S > 1) { /* CPU stages share the cores; the count means nothing to a GPU */
        int t = omp_get_max_threads() / (int)S;
        bp.n_threads = t > 0 ? t : 1;
    }
    SAGA_TRY(cli_backend_open(c, &bes[0], spec, comm, &bp));
    bool cuda = saga_backend_get_kind(bes[0]) == SAGA_BACKEND_CUDA;
    int first = 0;
    if (cuda && strncmp(spec, "cuda:", 5) == 0)
        first = atoi(spec + 5);
    for (int64_t q = 1; q < S; q++) {
        if (cuda) {
            char name[32];
            snprintf(name, sizeof name, "cuda:%d", first + (int)q);
            SAGA_TRY(saga_backend_open(&bes[q], name, &bp));
        } else {
            SAGA_TRY(saga_backend_cpu_new(&bes[q], &bp));
        }
    }
fail:
    return st;
}

static int mlp_main(int argc, char **argv) {
    cli_ctx c;
    const char *arg = NULL, *device = cli_default_device();
    int64_t layers = 4, width = 1024, outputs = 16, batch = 256, micro = 4, steps = 20, stages = 1;
    saga_dense_pipe pipe = SAGA_DENSE_PIPE_SYNC;
    double lr = 3e-4;
    uint64_t seed = 1;
    size_t device_mem = 0;
    bool stats = false, stages_given = false;
    int32_t prof_first = 0, prof_last = 0;
    saga_dense_optim optim = SAGA_DENSE_ADAM;
    saga_dense_split split = SAGA_DENSE_SPLIT_COLS;
    int o;
    cli_begin(&c, &cli_cmd_mlp, argc, argv);
    while ((o = cli_next(&c, &arg)) >= 0) {
        int bad = 0;
        switch (o) {
        case OPT_LAYERS:
            bad = cli_int(&c, "--layers", arg, 1, 64, &layers);
            break;
        case OPT_WIDTH:
            bad = cli_int(&c, "--width", arg, 1, 1 << 20, &width);
            break;
        case OPT_OUTPUTS:
            bad = cli_int(&c, "--outputs", arg, 1, 1 << 20, &outputs);
            break;
        case OPT_BATCH:
            bad = cli_int(&c, "--batch", arg, 1, 1 << 24, &batch);
            break;
        case OPT_MICRO:
            bad = cli_int(&c, "--micro-batches", arg, 1, 1 << 20, &micro);
            break;
        case OPT_STEPS:
            bad = cli_int(&c, "--steps", arg, 1, INT32_MAX, &steps);
            break;
        case OPT_LR:
            bad = cli_double(&c, "--lr", arg, 0.0, 1e3, false, &lr);
            break;
        case OPT_OPTIMIZER:
            if (strcmp(arg, "adam") == 0)
                optim = SAGA_DENSE_ADAM;
            else if (strcmp(arg, "adama") == 0)
                optim = SAGA_DENSE_ADAMA;
            else
                bad = cli_usage(&c, "--optimizer: expected adam or adama, got '%s'", arg);
            break;
        case OPT_SPLIT:
            if (strcmp(arg, "cols") == 0)
                split = SAGA_DENSE_SPLIT_COLS;
            else if (strcmp(arg, "rows") == 0)
                split = SAGA_DENSE_SPLIT_ROWS;
            else
                bad = cli_usage(&c, "--split: expected cols or rows, got '%s'", arg);
            break;
        case OPT_DEVICE:
            device = arg;
            break;
        case OPT_DEVICE_MEM:
            bad = cli_size(&c, "--device-mem", arg, &device_mem);
            break;
        case OPT_SEED:
            bad = cli_u64(&c, "--seed", arg, &seed);
            break;
        case OPT_STATS:
            stats = true;
            break;
        case OPT_STAGES:
            bad = cli_int(&c, "--stages", arg, 1, 64, &stages);
            stages_given = true;
            break;
        case OPT_PIPELINE:
            if (strcmp(arg, "sync") == 0)
                pipe = SAGA_DENSE_PIPE_SYNC;
            else if (strcmp(arg, "2bw") == 0)
                pipe = SAGA_DENSE_PIPE_2BW;
            else
                bad = cli_usage(&c, "--pipeline: expected sync or 2bw, got '%s'", arg);
            break;
        case OPT_PROFILE_STEPS:
            bad = cli_int_range(&c, "--profile-steps", "step", arg, &prof_first, &prof_last);
            break;
        }
        if (bad)
            return bad;
    }
    if (o == CLI_EXIT)
        return c.exit_code;
    if (cli_check_device(&c, device))
        return CLI_USAGE;

    int rc = CLI_ERROR;
    saga_status st = SAGA_OK;
    bool agreed = true; /* a failure every rank knows of (see cli_fail_ranks) */
    saga_comm *comm = NULL;
    /* under mpirun the stages are the ranks */
    if ((st = cli_comm_open(&c, &comm)) < 0) {
        rc = cli_fail(&c);
        saga_comm_free(&comm);
        return rc;
    }
    char why[160] = "";
    if (c.ranks > 1 && !stages_given)
        stages = c.ranks;
    if (batch % micro != 0)
        snprintf(why, sizeof why, "--micro-batches %lld does not divide --batch %lld",
                 (long long)micro, (long long)batch);
    else if (c.ranks > 1 && stages != c.ranks)
        snprintf(why, sizeof why, "--stages %lld under %d ranks: each rank runs one stage",
                 (long long)stages, c.ranks);
    else if (stages > layers)
        snprintf(why, sizeof why, "--stages %lld: more stages than the %lld layers",
                 (long long)stages, (long long)layers);
    else if (pipe == SAGA_DENSE_PIPE_2BW && micro < stages - 1)
        snprintf(why, sizeof why,
                 "--pipeline 2bw over %lld stages needs --micro-batches >= %lld (got %lld)",
                 (long long)stages, (long long)stages - 1, (long long)micro);
    if (*why) { /* every rank finds it; rank 0 says it */
        rc = c.rank == 0 ? cli_usage(&c, "%s", why) : CLI_USAGE;
        saga_comm_free(&comm);
        return rc;
    }

    saga_backend *bes[64] = {0};
    saga_mlp *m = NULL;
    teacher t = {0};
    float *x = NULL, *y = NULL;
    const float **xs = NULL, **ys = NULL;
    int32_t *widths = NULL;
    double *losses = NULL;
    char b1[32], b2[32], b3[32], b4[32], b5[32], b6[32];
    /* 2BW streams several steps through the pipeline per call; synchronous steps go one by one */
    int64_t chunk = pipe == SAGA_DENSE_PIPE_2BW ? 8 : 1;
    if ((st = saga_alloc_array((void **)&widths, (size_t)layers + 1, sizeof *widths, "widths")) ==
        SAGA_OK)
        st = saga_alloc_array((void **)&losses, (size_t)steps, sizeof *losses, "losses");
    if (c.ranks > 1)
        st = saga_comm_agree(comm, st);
    if (st < 0)
        goto fail;
    for (int64_t l = 0; l < layers; l++)
        widths[l] = (int32_t)width;
    widths[layers] = (int32_t)outputs;
    int64_t n_params = 0;
    for (int64_t l = 0; l < layers; l++)
        n_params += (int64_t)widths[l] * widths[l + 1] + widths[l + 1];
    size_t state_bytes = 3 * (size_t)n_params * sizeof(float); /* weights and two moments */
    bool default_mem = !device_mem;
    if (default_mem)
        device_mem = state_bytes / 8 / (size_t)stages;

    saga_mlp_params p = saga_mlp_params_defaults();
    p.n_layers = (int32_t)layers;
    p.widths = widths;
    p.batch = (int32_t)batch;
    p.n_micro = (int32_t)micro;
    p.split = split;
    p.optim = optim;
    p.lr = (float)lr;
    p.seed = seed;
    p.n_stages = (int32_t)stages;
    p.stage_backends = stages > 1 && c.ranks == 1 ? bes : NULL;
    p.pipe = pipe;
    p.comm = comm;
    st = open_stages(&c, comm, device, stages, device_mem, bes);
    if (st == SAGA_OK && default_mem) {
        /* the default budget is the network's share; a device that keeps part of its budget for
         * its own work (a GPU's scratch) gets that on top */
        saga_backend_stats bs;
        saga_backend_get_stats(bes[0], &bs);
        if (bs.work_reserve_bytes) {
            for (int64_t q = 0; q < stages; q++)
                saga_backend_free_all(&bes[q]);
            device_mem += bs.work_reserve_bytes;
            st = open_stages(&c, comm, device, stages, device_mem, bes);
        }
    }
    if (c.ranks > 1)
        st = saga_comm_agree(comm, st);
    if (st < 0 || (st = saga_mlp_new(&m, bes[0], &p)) < 0) /* both agreed over the ranks */
        goto fail;
    size_t total_mem = device_mem * (size_t)stages;
    cli_say(&c,
            "mlp: %lld layers of width %lld -> %lld outputs, %s parameters; with Adam's "
            "moments %s, %.1fx the %s device budget%s\n",
            (long long)layers, (long long)width, (long long)outputs,
            cli_count(b1, sizeof b1, n_params), cli_bytes(b2, sizeof b2, (int64_t)state_bytes),
            (double)state_bytes / (double)total_mem, cli_bytes(b3, sizeof b3, (int64_t)total_mem),
            stages > 1 ? " of all stages" : "");
    cli_say(&c, "plan: %s\n", saga_mlp_describe(m));
    /* every rank draws the same batches: stage 0 reads the inputs, the last stage the targets */
    if ((st = teacher_new(&t, width, outputs, seed)) == SAGA_OK)
        st = saga_alloc_array((void **)&x, (size_t)(chunk * batch * width), sizeof *x, "a batch");
    if (st == SAGA_OK)
        st = saga_alloc_array((void **)&y, (size_t)(chunk * batch * outputs), sizeof *y, "a batch");
    if (st == SAGA_OK)
        st = saga_alloc_array((void **)&xs, (size_t)chunk, sizeof *xs, "batches");
    if (st == SAGA_OK)
        st = saga_alloc_array((void **)&ys, (size_t)chunk, sizeof *ys, "batches");
    if (c.ranks > 1)
        st = saga_comm_agree(comm, st);
    if (st < 0)
        goto fail;
    for (int64_t i = 0; i < chunk; i++) {
        xs[i] = x + i * batch * width;
        ys[i] = y + i * batch * outputs;
    }

    /* train; the first step loads everything and is reported apart */
    rng r = {seed * 0x2545F4914F6CDD1Dull + 1};
    double train_s = 0, data_s = 0, first_s = 0;
    uint64_t h2d = 0, d2h = 0, sent = 0;
    double copy_s = 0, wait_s = 0, idle_s[64] = {0};
    size_t peak = 0, stage_peak[64] = {0};
    bool prof = false; /* inside the profiler's range */
    for (int64_t s = 0; s < steps;) {
        int64_t n = s == 0 ? 1 : (steps - s < chunk ? steps - s : chunk);
        if (!prof && prof_first > s && prof_first <= s + n) {
            if ((st = saga_backend_profile_range(bes[0], true)) < 0)
                goto fail;
            prof = true;
        }
        double t0 = saga_now();
        for (int64_t i = 0; i < n; i++)
            make_batch(&t, &r, batch, (float *)xs[i], (float *)ys[i]);
        double t1 = saga_now();
        data_s += t1 - t0;
        if ((st = saga_mlp_train_steps(m, (int32_t)n, xs, ys, &losses[s])) < 0) {
            /* across ranks a failed transfer leaves the neighbours waiting (saga_dense.h) */
            agreed = st != SAGA_ERR_COMM;
            goto fail;
        }
        double dt = saga_now() - t1;
        saga_mlp_stats ms;
        saga_mlp_get_stats(m, &ms);
        peak = ms.peak_device_bytes > peak ? ms.peak_device_bytes : peak;
        for (int64_t q = 0; q < stages; q++) {
            if (ms.stage_peak_bytes[q] > stage_peak[q])
                stage_peak[q] = ms.stage_peak_bytes[q];
            if (s > 0 || steps == 1)
                idle_s[q] += ms.stage_idle_seconds[q];
        }
        if (s == 0)
            first_s = dt;
        if (s > 0 || steps == 1) { /* one step only: its own figures */
            train_s += dt;
            h2d += ms.h2d_bytes;
            d2h += ms.d2h_bytes;
            sent += ms.sent_bytes;
            copy_s += ms.copy_seconds;
            wait_s += ms.wait_seconds;
        }
        s += n;
        if (prof && (s >= prof_last || s == steps)) { /* the range holds all of their work */
            for (int64_t q = 0; q < stages && st == SAGA_OK; q++)
                if (bes[q])
                    st = saga_backend_synchronize(bes[q]);
            if (st < 0 || (st = saga_backend_profile_range(bes[0], false)) < 0)
                goto fail;
            prof = false;
        }
        cli_progress(&c, "mlp: step %lld/%lld  loss %.5f", (long long)s, (long long)steps,
                     losses[s - 1]);
    }
    cli_progress_end(&c);
    int64_t later = steps - 1;
    double per = later ? (double)later : 1.0; /* steps the byte and time sums cover */
    double per_step = later ? train_s / per : first_s;
    double rows_per_s = (double)batch / per_step;
    double overlap = copy_s > 0 ? 1.0 - (wait_s < copy_s ? wait_s : copy_s) / copy_s : 0.0;
    cli_say(&c, "loss: %.5f at step 1, %.5f at step %lld\n", losses[0], losses[steps - 1],
            (long long)steps);
    cli_say(&c, "time: %.3f s per step (first step %.3f s), %.0f rows/s; data generation %.3f s\n",
            per_step, first_s, rows_per_s, data_s);
    saga_mlp_stats ms;
    saga_mlp_get_stats(m, &ms);
    if (stats) {
        for (int32_t l = 0; l < ms.n_layers; l++)
            cli_say(&c, "  layer %d: %d tile%s of %d %s, %s per tile\n", (int)l, (int)ms.tiles[l],
                    ms.tiles[l] > 1 ? "s" : "", (int)ms.tile_units[l],
                    split == SAGA_DENSE_SPLIT_COLS ? "columns" : "rows",
                    cli_bytes(b1, sizeof b1, (int64_t)ms.tile_bytes[l]));
        cli_say(&c,
                "memory: %s to the device and %s back per step%s, peak %s of "
                "%s%s, %s kept between steps, %.0f%% of copy time hidden; host arrays %s\n",
                cli_bytes(b1, sizeof b1, (int64_t)((double)h2d / per)),
                cli_bytes(b2, sizeof b2, (int64_t)((double)d2h / per)),
                later ? " (after the first)" : "", cli_bytes(b3, sizeof b3, (int64_t)peak),
                cli_bytes(b4, sizeof b4, (int64_t)device_mem), stages > 1 ? " per stage" : "",
                cli_bytes(b6, sizeof b6, (int64_t)ms.kept_bytes), 100.0 * overlap,
                cli_bytes(b5, sizeof b5, (int64_t)ms.host_bytes));
        if (c.ranks > 1)
            cli_say(&c,
                    "ranks: %d, one stage each; %s of activations and gradients sent between "
                    "them per step\n",
                    c.ranks, cli_bytes(b1, sizeof b1, (int64_t)((double)sent / per)));
        for (int64_t q = 0; stages > 1 && q < stages; q++) {
            char lay[48], who[48];
            if (c.ranks > 1) /* each rank knows its own device only */
                snprintf(who, sizeof who, "rank %lld", (long long)q);
            else
                snprintf(who, sizeof who, "%s", saga_backend_name(bes[q]));
            int a = ms.stage_layers[q], b = ms.stage_layers[q + 1] - 1;
            if (a == b)
                snprintf(lay, sizeof lay, "layer %d", a);
            else
                snprintf(lay, sizeof lay, "layers %d-%d", a, b);
            cli_say(
                &c,
                "  stage %lld (%s): %s, peak %s, waiting on its neighbours %.0f%% of the time\n",
                (long long)q, who, lay, cli_bytes(b1, sizeof b1, (int64_t)stage_peak[q]),
                train_s > 0 ? 100.0 * idle_s[q] / train_s : 0.0);
        }
    }
    if (c.json) {
        json j;
        json_init(&j, stdout);
        json_object_begin(&j);
        json_key(&j, "layers"), json_int(&j, layers);
        json_key(&j, "width"), json_int(&j, width);
        json_key(&j, "outputs"), json_int(&j, outputs);
        json_key(&j, "batch"), json_int(&j, batch);
        json_key(&j, "micro_batches"), json_int(&j, micro);
        json_key(&j, "optimizer"), json_str(&j, optim == SAGA_DENSE_ADAM ? "adam" : "adama");
        json_key(&j, "split"), json_str(&j, split == SAGA_DENSE_SPLIT_COLS ? "cols" : "rows");
        json_key(&j, "stages"), json_int(&j, stages);
        json_key(&j, "ranks"), json_int(&j, c.ranks);
        json_key(&j, "pipeline"), json_str(&j, pipe == SAGA_DENSE_PIPE_2BW ? "2bw" : "sync");
        json_key(&j, "stage_layers");
        json_array_begin(&j);
        for (int64_t q = 0; q <= stages; q++)
            json_int(&j, ms.stage_layers[q]);
        json_array_end(&j);
        json_key(&j, "parameters"), json_int(&j, n_params);
        json_key(&j, "state_bytes"), json_uint(&j, state_bytes);
        json_key(&j, "budget_bytes"), json_uint(&j, device_mem);
        json_key(&j, "streamed"), json_bool(&j, ms.streamed);
        json_key(&j, "tiles");
        json_array_begin(&j);
        for (int32_t l = 0; l < ms.n_layers; l++)
            json_int(&j, ms.tiles[l]);
        json_array_end(&j);
        json_key(&j, "steps"), json_int(&j, steps);
        json_key(&j, "first_loss"), json_num(&j, losses[0]);
        json_key(&j, "final_loss"), json_num(&j, losses[steps - 1]);
        json_key(&j, "losses");
        json_array_begin(&j);
        for (int64_t s = 0; s < steps; s++)
            json_num(&j, losses[s]);
        json_array_end(&j);
        json_key(&j, "seconds_per_step"), json_num(&j, per_step);
        json_key(&j, "first_step_seconds"), json_num(&j, first_s);
        json_key(&j, "rows_per_second"), json_num(&j, rows_per_s);
        json_key(&j, "host_bytes"), json_uint(&j, ms.host_bytes);
        cli_json_device(&j, bes[0]);
        cli_json_outputs(&j, NULL, 0);
        if (stats) {
            json_key(&j, "h2d_bytes_per_step"), json_num(&j, (double)h2d / per);
            json_key(&j, "d2h_bytes_per_step"), json_num(&j, (double)d2h / per);
            json_key(&j, "peak_device_bytes"), json_uint(&j, peak);
            json_key(&j, "kept_bytes"), json_uint(&j, ms.kept_bytes);
            json_key(&j, "overlap"), json_num(&j, overlap);
            json_key(&j, "sent_bytes_per_step"), json_num(&j, (double)sent / per);
            json_key(&j, "stage_peak_bytes");
            json_array_begin(&j);
            for (int64_t q = 0; q < stages; q++)
                json_uint(&j, stage_peak[q]);
            json_array_end(&j);
            json_key(&j, "stage_idle_share");
            json_array_begin(&j);
            for (int64_t q = 0; q < stages; q++)
                json_num(&j, train_s > 0 ? idle_s[q] / train_s : 0.0);
            json_array_end(&j);
        }
        json_object_end(&j);
        json_finish(&j);
    }
    rc = CLI_OK;
fail:
    if (rc != CLI_OK)
        rc = cli_fail_ranks(&c, comm, agreed);
    saga_free(x);
    saga_free(y);
    saga_free(xs);
    saga_free(ys);
    saga_free(widths);
    saga_free(losses);
    teacher_free(&t);
    saga_mlp_free(&m);
    for (int64_t q = 0; q < stages; q++)
        saga_backend_free_all(&bes[q]);
    saga_comm_free(&comm);
    return rc;
}
