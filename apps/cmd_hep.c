/* cmd_hep.c - `saga hep generate|build|train|eval`: particle tracking with an Interaction Network
 * on collision events in the TrackML layout. */
#include "commands.h"
#include "hep.h"

#include <errno.h>
#include <math.h>
#include <omp.h>
#include <string.h>
#include <sys/stat.h>

enum {
    OPT_OUTPUT,
    OPT_EVENTS,
    OPT_SEED,
    OPT_MIN_PARTICLES,
    OPT_MAX_PARTICLES,
    OPT_NOISE,
    OPT_DETECTOR,
    OPT_MATERIAL,
    OPT_HIT_EFFICIENCY,
    OPT_DOUBLED,
    OPT_IDEAL,
    OPT_DATA,
    OPT_EXPORT,
    OPT_PT_MIN,
    OPT_PHI_SLOPE_MAX,
    OPT_Z0_MAX,
    OPT_MAX_MISSING,
    OPT_BARREL_ONLY,
    OPT_EPOCHS,
    OPT_LR,
    OPT_LR_SCHEDULE,
    OPT_HIDDEN,
    OPT_ITERATIONS,
    OPT_SAMPLER,
    OPT_BATCH_EVENTS,
    OPT_EDGE_BUDGET,
    OPT_HIT_WEIGHT,
    OPT_POS_WEIGHT,
    OPT_EVAL_FRACTION,
    OPT_THRESHOLD,
    OPT_CHECKPOINT,
    OPT_RESUME,
    OPT_DEVICE,
    OPT_ACCUMULATE,
    OPT_LOG,
    OPT_DEVICE_MEM,
    OPT_STREAM,
    OPT_COUNT_
};

/* Which subcommands take each option (bits: generate, build, train, eval). */
enum { GEN = 1, BUILD = 2, TRAIN = 4, EVAL = 8 };
static const unsigned OPT_FOR[OPT_COUNT_] = {
    [OPT_OUTPUT] = GEN | BUILD,
    [OPT_EVENTS] = GEN,
    [OPT_SEED] = GEN | TRAIN,
    [OPT_MIN_PARTICLES] = GEN,
    [OPT_MAX_PARTICLES] = GEN,
    [OPT_NOISE] = GEN,
    [OPT_DETECTOR] = GEN,
    [OPT_MATERIAL] = GEN,
    [OPT_HIT_EFFICIENCY] = GEN,
    [OPT_DOUBLED] = GEN,
    [OPT_IDEAL] = GEN,
    [OPT_DATA] = BUILD | TRAIN | EVAL,
    [OPT_EXPORT] = BUILD,
    [OPT_PT_MIN] = BUILD | TRAIN | EVAL,
    [OPT_PHI_SLOPE_MAX] = BUILD | TRAIN | EVAL,
    [OPT_Z0_MAX] = BUILD | TRAIN | EVAL,
    [OPT_MAX_MISSING] = BUILD | TRAIN | EVAL,
    [OPT_BARREL_ONLY] = BUILD | TRAIN | EVAL,
    [OPT_EPOCHS] = TRAIN,
    [OPT_LR] = TRAIN,
    [OPT_LR_SCHEDULE] = TRAIN,
    [OPT_HIDDEN] = TRAIN | EVAL,
    [OPT_ITERATIONS] = TRAIN | EVAL,
    [OPT_SAMPLER] = TRAIN,
    [OPT_BATCH_EVENTS] = TRAIN,
    [OPT_EDGE_BUDGET] = TRAIN,
    [OPT_HIT_WEIGHT] = TRAIN,
    [OPT_POS_WEIGHT] = TRAIN,
    [OPT_EVAL_FRACTION] = TRAIN,
    [OPT_THRESHOLD] = TRAIN | EVAL,
    [OPT_CHECKPOINT] = TRAIN | EVAL,
    [OPT_RESUME] = TRAIN,
    [OPT_DEVICE] = TRAIN | EVAL,
    [OPT_ACCUMULATE] = TRAIN,
    [OPT_LOG] = EVAL,
    [OPT_DEVICE_MEM] = TRAIN | EVAL,
    [OPT_STREAM] = TRAIN,
};

static const cli_opt hep_opts[] = {
    {"output", 'o', "DIR", NULL,
     "generate: the directory to write (created when missing); build: the same as --export."},
    {"events", 0, "N", "10", "generate: number of events (event000000001 .. N)."},
    {"seed", 0, "S", "1",
     "generate: the seed of the events; train: the seed of the weights and the shuffles."},
    {"min-particles", 0, "N", "100", "generate: fewest particles in an event."},
    {"max-particles", 0, "N", "3000",
     "generate: most particles in an event (drawn log-uniformly in between)."},
    {"noise", 0, "F", "0.1", "generate: noise hits per particle hit."},
    {"detector", 0, "D", "full",
     "generate: full (the barrel's ten layers and the end-caps' 38 disks) or barrel (the ten "
     "layers alone)."},
    {"material", 0, "F", "1",
     "generate: scale of each layer's material (1.2% of a radiation length per pixel layer, 1.6% "
     "per strip layer); particles scatter by Highland's formula; 0: no scattering."},
    {"hit-efficiency", 0, "F", "0.98", "generate: chance that a layer crossed leaves a hit."},
    {"doubled", 0, "F", "0.1",
     "generate: chance that a crossing leaves a second hit on the overlapping module."},
    {"ideal", 0, NULL, NULL,
     "generate: helices without material, every crossing one hit (--material 0 "
     "--hit-efficiency 1 --doubled 0); with --detector barrel, the events of earlier releases."},
    {"data", 0, "DIR", NULL,
     "The events: eventNNN-hits.csv[.gz], -truth.csv[.gz] and -particles.csv[.gz] per event "
     "(generated, or a directory laid out like TrackML's train_sample: columns are found by "
     "name, -cells.csv files are ignored)."},
    {"export", 0, "DIR", NULL,
     "build: write each event's graph to DIR/eventNNNNNNNNN.npz (NumPy arrays x, edge_index, "
     "edge_attr, y, hit_particle, hit_pt, as PyTorch Geometric loads them) and DIR/meta.json "
     "(feature names, build parameters, the events in order); DIR is created when missing."},
    {"pt-min", 0, "GEV", "1",
     "Hits of particles below this pT are dropped from the graphs (noise hits stay)."},
    {"phi-slope-max", 0, "R", "0.0005",
     "Most bending of a segment, |dphi/dr| in rad/mm (0.0005: a track of about 0.6 GeV from the "
     "beam line)."},
    {"z0-max", 0, "MM", "250", "Farthest a segment's line may meet the beam line from z = 0 (mm)."},
    {"max-missing", 0, "K", "1",
     "A segment may cross up to K layers between its hits on which its particle left none (a "
     "missed hit); 0 joins hits on consecutive layers only."},
    {"barrel-only", 0, NULL, NULL,
     "Leave the end-cap hits out of the graphs (they are counted): the barrel's graphs alone."},
    {"epochs", 0, "N", "40", "train: epochs (each covers every training event once)."},
    {"lr", 0, "R", "0.003", "train: Adam's learning rate (of the first epoch)."},
    {"lr-schedule", 0, "S", "cosine",
     "train: cosine (from --lr at the first epoch down to 1% of it at the last, along a half "
     "cosine) or constant."},
    {"hidden", 0, "H", "32", "Width of the hidden states (eval: as the checkpoint was trained)."},
    {"iterations", 0, "K", "4", "Message-passing rounds (eval: as trained)."},
    {"sampler", 0, "S", "random",
     "train: random, sorted, balanced, or all (train three times from the same start, one per "
     "sampler, and report each)."},
    {"batch-events", 0, "B", "1",
     "train: events per micro-batch for random and sorted; balanced makes as many micro-batches."},
    {"edge-budget", 0, "E", NULL,
     "train: the edges of a balanced micro-batch (default: the smallest budget that packs the "
     "events into as many micro-batches as the other samplers make)."},
    {"hit-weight", 0, "W", "1.3",
     "train: sort and pack events by edges + W * hits (0: edges alone). Hits cost memory too: "
     "about 1.3 edges each in this model's training step. The budget is in those units."},
    {"pos-weight", 0, "W", "1", "train: weight of the true edges in the loss."},
    {"eval-fraction", 0, "F", "0.2",
     "train: the last F of the events are held out for the metrics."},
    {"threshold", 0, "T", "0.5", "An edge is kept when its score is above T."},
    {"checkpoint", 0, "FILE", NULL,
     "train: save the model and optimizer after every epoch; eval: the model to evaluate."},
    {"resume", 0, "FILE", NULL, "train: continue from a checkpoint (at its epoch)."},
    {"device", 0, "DEV", NULL, CLI_DEVICE_HELP},
    {"accumulate", 0, "A", "1",
     "train: micro-batches per optimizer step on each rank, their gradients averaged. Under "
     "mpirun with R ranks a step takes R x A micro-batches, A per rank (one process with "
     "--accumulate R computes the same steps)."},
    {"log", 0, "FILE", NULL,
     "eval: write the metrics as JSON lines: first the summary (as in --json: edge_efficiency, "
     "edge_purity, auc, threshold, ...), then one line per threshold 0, 0.01, ..., 1 with "
     "threshold, edge_efficiency (the true positive rate), edge_purity (null when no edge is "
     "kept) and false_positive_rate: efficiency and purity against the threshold, and the ROC "
     "curve (`saga plot` draws them)."},
    {"device-mem", 0, "SIZE", NULL,
     "train, eval: the device's memory budget (e.g. 512M, 2G). A micro-batch whose step does "
     "not fit in it, and every larger one after it, is streamed: its rows stay in host memory "
     "and each phase of the step runs by chunks of edges and hits sized to the budget, with the "
     "same loss and gradients up to float rounding; so is the scoring of an event that does not "
     "fit."},
    {"stream", 0, NULL, NULL,
     "train: stream every micro-batch (as --device-mem does those too "
     "large), with or without a budget."},
    {0}};

static int hep_main(int argc, char **argv);

const cli_cmd cli_cmd_hep = {
    .name = "hep",
    .summary = "Particle tracking: generate collision events, build graphs, train and evaluate "
               "an Interaction Network",
    .args = "generate|build|train|eval",
    .min_args = 1,
    .max_args = 1,
    .description =
        "generate writes collision events in the layout of the TrackML challenge: charged "
        "particles from the beam spot follow helices in a 2 T field through the challenge's "
        "detector (a barrel of ten layers, four pixel and six strip, and 38 end-cap disks), "
        "scatter in each layer's material, leave smeared hits (some missed, some doubled on "
        "overlapping modules); noise hits are added. The number of particles varies "
        "log-uniformly from event to event, so the graphs do too.\n"
        "build turns every event into a graph (a vertex per hit, barrel and end-caps alike; an "
        "edge per segment to a hit further out that passes a bending cut and a beam-line cut and "
        "whose line crosses at most --max-missing layers on the way) and reports the hits read "
        "on the barrel and the end-caps, those of particles below --pt-min (dropped), then the "
        "construction efficiency (true segments kept / all true segments) and purity (true edges "
        "/ edges), overall and for segments on the barrel, crossing from barrel to end-cap, and "
        "on the end-caps; with --export DIR it writes every graph as a NumPy .npz for PyTorch "
        "Geometric.\n"
        "train fits an Interaction Network that scores every edge (encoders, K rounds of edge "
        "and node updates as one saga vertex program with shared weights, an edge-score MLP; "
        "binary cross-entropy, Adam) over micro-batches of events, and reports the edge "
        "efficiency and purity at the threshold, the ROC AUC, and the track efficiency (tracks "
        "as connected components of the kept edges; a particle above 1 GeV with 3 or more hits "
        "is found when 75% of its hits are in one component that is 75% its own) on the held-out "
        "events. Each epoch's peak device memory (the allocator's accounting, reset at the "
        "epoch's start) and time are reported per sampler. With --device-mem, a micro-batch "
        "whose step does not fit the budget (an event bigger than the device) is streamed "
        "through it by chunks of edges and hits, its rows kept in host memory.\n"
        "eval scores every event of --data with a checkpoint and reports the same metrics.",
    .opts = hep_opts,
    .flags = CLI_THREADS,
    .example = "saga hep generate -o events --events 50 --seed 1\n"
               "saga hep build --data events --export events-npz\n"
               "saga hep train --data events --epochs 20 --checkpoint hep.ckpt\n"
               "saga hep train --data events --epochs 3 --sampler all --json\n"
               "saga hep train --data big-events --epochs 5 --device-mem 2G\n"
               "saga hep generate -o test-events --events 10 --seed 2\n"
               "saga hep eval --data test-events --checkpoint hep.ckpt",
    .main = hep_main,
};

/* ---- generate ----------------------------------------------------------------------------- */

static int hep_generate(cli_ctx *c, const char *out, int64_t n, const saga_trackml_params *p) {
    saga_status st = SAGA_OK;
    saga_trackml_event *e = NULL;
    int64_t hits = 0, particles = 0, min_hits = INT64_MAX, max_hits = 0;
    char b1[32], b2[32];
    double t0 = saga_now();
    if (mkdir(out, 0777) != 0 && errno != EEXIST) {
        st = saga_error(SAGA_ERR_IO, "cannot create directory '%s': %s", out, strerror(errno));
        goto fail;
    }
    for (int64_t i = 1; i <= n; i++) {
        SAGA_TRY(saga_trackml_generate(&e, p, i));
        SAGA_TRY(saga_trackml_write(e, out));
        hits += e->n_hits;
        particles += e->n_particles;
        min_hits = e->n_hits < min_hits ? e->n_hits : min_hits;
        max_hits = e->n_hits > max_hits ? e->n_hits : max_hits;
        saga_trackml_event_free(&e);
        cli_progress(c, "generating: event %lld/%lld", (long long)i, (long long)n);
    }
    cli_progress_end(c);
    double secs = saga_now() - t0;
    cli_say(c,
            "wrote %lld events to %s/ in %.2f s: %s particles, %s hits (%lld to %lld per event)\n",
            (long long)n, out, secs, cli_count(b1, sizeof b1, particles),
            cli_count(b2, sizeof b2, hits), (long long)min_hits, (long long)max_hits);
    if (c->json) {
        json j;
        json_init(&j, stdout);
        json_object_begin(&j);
        json_key(&j, "output"), json_str(&j, out);
        json_key(&j, "outputs"), json_array_begin(&j);
        for (int64_t i = 1; i <= n; i++)
            for (int k = 0; k < 3; k++) {
                static const char *const kinds[3] = {"hits", "truth", "particles"};
                char path[4096];
                snprintf(path, sizeof path, "%s/event%09lld-%s.csv.gz", out, (long long)i,
                         kinds[k]);
                json_str(&j, path);
            }
        json_array_end(&j);
        cli_json_device(&j, NULL);
        json_key(&j, "events"), json_int(&j, n);
        json_key(&j, "seed"), json_uint(&j, p->seed);
        json_key(&j, "particles"), json_int(&j, particles);
        json_key(&j, "hits"), json_int(&j, hits);
        json_key(&j, "min_event_hits"), json_int(&j, min_hits);
        json_key(&j, "max_event_hits"), json_int(&j, max_hits);
        json_key(&j, "seconds"), json_num(&j, secs);
        json_object_end(&j);
        json_finish(&j);
    }
    return CLI_OK;
fail:
    cli_progress_end(c);
    saga_trackml_event_free(&e);
    return cli_fail(c);
}

/* ---- loading ------------------------------------------------------------------------------ */

static void load_progress(void *ud, int32_t i, int32_t n) {
    cli_progress(ud, "reading events: %d/%d", (int)i, (int)n);
}

typedef struct construction {
    int64_t hits, edges, true_edges, segments, min_edges, max_edges;
    int64_t read, barrel, endcap, left_out, soft, noise; /* where the hits of the files went */
    int64_t region_hits[HEP_N_HIT_REGIONS];
    int64_t region_segments[HEP_N_SEG_REGIONS], region_true[HEP_N_SEG_REGIONS];
    int64_t region_edges[HEP_N_SEG_REGIONS];
} construction;

static construction construction_of(const hep_data *d) {
    construction k = {.min_edges = INT64_MAX};
    for (int32_t i = 0; i < d->n_events; i++) {
        const hep_event_graph *g = &d->events[i];
        k.hits += g->n_hits;
        k.read += g->n_read;
        k.barrel += g->n_barrel;
        k.endcap += g->n_endcap;
        k.left_out += g->n_left_out;
        k.soft += g->n_soft;
        for (int r = 0; r < HEP_N_HIT_REGIONS; r++)
            k.region_hits[r] += g->region_hits[r];
        for (int r = 0; r < HEP_N_SEG_REGIONS; r++) {
            k.region_segments[r] += g->region_segments[r];
            k.region_true[r] += g->region_true[r];
            k.region_edges[r] += g->region_edges[r];
        }
        k.noise += g->n_noise;
        k.edges += g->n_edges;
        k.true_edges += g->n_true;
        k.segments += g->n_segments;
        k.min_edges = g->n_edges < k.min_edges ? g->n_edges : k.min_edges;
        k.max_edges = g->n_edges > k.max_edges ? g->n_edges : k.max_edges;
    }
    return k;
}

static double ratio(int64_t a, int64_t b) {
    return b ? (double)a / (double)b : 0.0;
}

static void say_construction(cli_ctx *c, const hep_data *d, const construction *k) {
    char b1[32], b2[32], b3[32], b4[32], b5[32], b6[32];
    cli_say(c,
            "hits      %s read: %s on the barrel, %s on the end-caps%s; %s of particles below %g "
            "GeV dropped\n",
            cli_count(b1, sizeof b1, k->read), cli_count(b2, sizeof b2, k->barrel),
            cli_count(b3, sizeof b3, k->endcap), k->left_out ? " (left out: --barrel-only)" : "",
            cli_count(b4, sizeof b4, k->soft), d->graph.pt_min);
    cli_say(c,
            "graphs    %d events, %s hits (%s noise; %s barrel, %s end-cap), %s edges (%lld to "
            "%lld per event), pT > %g GeV\n"
            "          construction efficiency %.4f (true segments kept), purity %.4f\n",
            (int)d->n_events, cli_count(b1, sizeof b1, k->hits), cli_count(b3, sizeof b3, k->noise),
            cli_count(b4, sizeof b4, k->region_hits[HEP_REGION_BARREL]),
            cli_count(b5, sizeof b5, k->region_hits[HEP_REGION_ENDCAP]),
            cli_count(b2, sizeof b2, k->edges), (long long)k->min_edges, (long long)k->max_edges,
            d->graph.pt_min, ratio(k->true_edges, k->segments), ratio(k->true_edges, k->edges));
    for (int r = 0; r < HEP_N_SEG_REGIONS; r++)
        if (k->region_segments[r] || k->region_edges[r])
            cli_say(c,
                    "          %-8s  %s true segments, %s kept (efficiency %.4f), %s edges (purity "
                    "%.4f)\n",
                    HEP_SEG_REGION_NAMES[r], cli_count(b1, sizeof b1, k->region_segments[r]),
                    cli_count(b2, sizeof b2, k->region_true[r]),
                    ratio(k->region_true[r], k->region_segments[r]),
                    cli_count(b6, sizeof b6, k->region_edges[r]),
                    ratio(k->region_true[r], k->region_edges[r]));
}

static void json_construction(json *j, const hep_data *d, const construction *k) {
    json_key(j, "events"), json_int(j, d->n_events);
    json_key(j, "hits_read"), json_int(j, k->read);
    json_key(j, "barrel_hits"), json_int(j, k->barrel);
    json_key(j, "endcap_hits"), json_int(j, k->endcap);
    json_key(j, "endcap_hits_left_out"), json_int(j, k->left_out);
    json_key(j, "soft_hits_dropped"), json_int(j, k->soft);
    json_key(j, "hits"), json_int(j, k->hits);
    json_key(j, "noise_hits"), json_int(j, k->noise);
    json_key(j, "edges"), json_int(j, k->edges);
    json_key(j, "true_edges"), json_int(j, k->true_edges);
    json_key(j, "true_segments"), json_int(j, k->segments);
    json_key(j, "min_event_edges"), json_int(j, k->min_edges);
    json_key(j, "max_event_edges"), json_int(j, k->max_edges);
    json_key(j, "pt_min"), json_num(j, d->graph.pt_min);
    json_key(j, "max_missing"), json_int(j, d->graph.max_missing);
    json_key(j, "construction_efficiency"), json_num(j, ratio(k->true_edges, k->segments));
    json_key(j, "construction_purity"), json_num(j, ratio(k->true_edges, k->edges));
    json_key(j, "regions"), json_object_begin(j);
    for (int r = 0; r < HEP_N_SEG_REGIONS; r++) {
        json_key(j, HEP_SEG_REGION_NAMES[r]), json_object_begin(j);
        if (r != HEP_SEG_CROSSING)
            json_key(j, "hits"),
                json_int(
                    j, k->region_hits[r == HEP_SEG_BARREL ? HEP_REGION_BARREL : HEP_REGION_ENDCAP]);
        json_key(j, "true_segments"), json_int(j, k->region_segments[r]);
        json_key(j, "true_edges"), json_int(j, k->region_true[r]);
        json_key(j, "edges"), json_int(j, k->region_edges[r]);
        json_key(j, "construction_efficiency"),
            json_num(j, ratio(k->region_true[r], k->region_segments[r]));
        json_object_end(j);
    }
    json_object_end(j);
}

static void say_metrics(cli_ctx *c, const char *what, const hep_metrics *m) {
    cli_say(c,
            "%-9s edge efficiency %.4f  purity %.4f  (threshold %.2f)  AUC %.4f  track "
            "efficiency %.4f (%lld tracks; %.4f as plain components)\n",
            what, m->edge_efficiency, m->edge_purity, m->threshold, m->auc, m->track_efficiency,
            (long long)m->n_tracks, m->track_efficiency_cc);
    for (int r = 0; r < HEP_N_SEG_REGIONS; r++) {
        char te[32] = "-";
        if (!m->region_true[r] && !m->region_tracks[r])
            continue;
        if (m->region_tracks[r])
            snprintf(te, sizeof te, "%.4f", m->region_track_efficiency[r]);
        cli_say(c, "  %-8s  edge efficiency %.4f  purity %.4f  track efficiency %s (%lld tracks)\n",
                HEP_SEG_REGION_NAMES[r], m->region_edge_efficiency[r], m->region_edge_purity[r], te,
                (long long)m->region_tracks[r]);
    }
}

static void json_metrics(json *j, const hep_metrics *m) {
    json_key(j, "edge_efficiency"), json_num(j, m->edge_efficiency);
    json_key(j, "edge_purity"), json_num(j, m->edge_purity);
    json_key(j, "auc"), json_num(j, m->auc);
    json_key(j, "track_efficiency"), json_num(j, m->track_efficiency);
    json_key(j, "track_efficiency_cc"), json_num(j, m->track_efficiency_cc);
    json_key(j, "tracks"), json_int(j, m->n_tracks);
    json_key(j, "threshold"), json_num(j, m->threshold);
    json_key(j, "eval_edges"), json_int(j, m->n_edges);
    json_key(j, "regions"), json_object_begin(j);
    for (int r = 0; r < HEP_N_SEG_REGIONS; r++) {
        json_key(j, HEP_SEG_REGION_NAMES[r]), json_object_begin(j);
        json_key(j, "true_edges"), json_int(j, m->region_true[r]);
        json_key(j, "edge_efficiency"), json_num(j, m->region_edge_efficiency[r]);
        json_key(j, "edge_purity"), json_num(j, m->region_edge_purity[r]);
        json_key(j, "tracks"), json_int(j, m->region_tracks[r]);
        json_key(j, "track_efficiency");
        if (m->region_tracks[r])
            json_num(j, m->region_track_efficiency[r]);
        else
            json_null(j);
        json_object_end(j);
    }
    json_object_end(j);
}

/* ---- build --export ----------------------------------------------------------------------- */

static const char *export_path(char *buf, size_t size, const char *dir, const hep_event_graph *g) {
    snprintf(buf, size, "%s/event%09lld.npz", dir, (long long)g->event_id);
    return buf;
}

/* meta.json: what the arrays hold, the build parameters, and the events in the order of --data
 * (the order train's --eval-fraction splits them in). */
static saga_status write_meta(const hep_data *d, const char *data, const char *dir) {
    saga_status st = SAGA_OK;
    char path[4096], name[64];
    snprintf(path, sizeof path, "%s/meta.json", dir);
    FILE *f = fopen(path, "w");
    if (!f)
        return saga_error(SAGA_ERR_IO, "cannot create %s: %s", path, strerror(errno));
    static const char *const arrays[][2] = {
        {"x", "float32, hits x hit_features"},
        {"edge_index", "int64, 2 x edges: inner hit (source), outer hit (target)"},
        {"edge_attr", "float32, edges x edge_features"},
        {"y", "float32, edges: 1 when both hits belong to one particle, else 0"},
        {"hit_particle", "int64, hits: the hit's particle id, 0 for noise"},
        {"hit_pt", "float32, hits: the particle's transverse momentum in GeV, 0 for noise"}};
    construction k = construction_of(d);
    json j;
    json_init(&j, f);
    json_object_begin(&j);
    json_key(&j, "format"), json_str(&j, "saga hep export");
    json_key(&j, "version"), json_int(&j, 1);
    json_key(&j, "input"), json_str(&j, data);
    json_key(&j, "build"), json_object_begin(&j);
    json_key(&j, "pt_min"), json_num(&j, d->graph.pt_min);
    json_key(&j, "phi_slope_max"), json_num(&j, d->graph.phi_slope_max);
    json_key(&j, "z0_max"), json_num(&j, d->graph.z0_max);
    json_key(&j, "max_missing"), json_int(&j, d->graph.max_missing);
    json_key(&j, "barrel_only"), json_bool(&j, d->graph.barrel_only);
    json_object_end(&j);
    json_key(&j, "hit_features"), json_array_begin(&j);
    for (int i = 0; i < HEP_HIT_FEATURES; i++)
        json_str(&j, HEP_HIT_FEATURE_NAMES[i]);
    json_array_end(&j);
    json_key(&j, "edge_features"), json_array_begin(&j);
    for (int i = 0; i < HEP_EDGE_FEATURES; i++)
        json_str(&j, HEP_EDGE_FEATURE_NAMES[i]);
    json_array_end(&j);
    json_key(&j, "arrays"), json_object_begin(&j);
    for (size_t i = 0; i < sizeof arrays / sizeof *arrays; i++)
        json_key(&j, arrays[i][0]), json_str(&j, arrays[i][1]);
    json_object_end(&j);
    json_key(&j, "hits"), json_int(&j, k.hits);
    json_key(&j, "edges"), json_int(&j, k.edges);
    json_key(&j, "true_edges"), json_int(&j, k.true_edges);
    json_key(&j, "true_segments"), json_int(&j, k.segments);
    json_key(&j, "events"), json_array_begin(&j);
    for (int32_t i = 0; i < d->n_events; i++) {
        const hep_event_graph *g = &d->events[i];
        snprintf(name, sizeof name, "event%09lld.npz", (long long)g->event_id);
        json_object_begin(&j);
        json_key(&j, "file"), json_str(&j, name);
        json_key(&j, "event_id"), json_int(&j, g->event_id);
        json_key(&j, "hits"), json_int(&j, g->n_hits);
        json_key(&j, "edges"), json_int(&j, g->n_edges);
        json_key(&j, "true_edges"), json_int(&j, g->n_true);
        json_key(&j, "true_segments"), json_int(&j, g->n_segments);
        json_object_end(&j);
    }
    json_array_end(&j);
    json_object_end(&j);
    json_finish(&j);
    if (ferror(f))
        st = saga_error(SAGA_ERR_IO, "%s: write failed: %s", path, strerror(errno));
    if (fclose(f) != 0 && st == SAGA_OK)
        st = saga_error(SAGA_ERR_IO, "%s: write failed: %s", path, strerror(errno));
    return st;
}

static saga_status hep_export(cli_ctx *c, const hep_data *d, const char *data, const char *dir) {
    saga_status st = SAGA_OK;
    char path[4096];
    double t0 = saga_now();
    if (mkdir(dir, 0777) != 0 && errno != EEXIST)
        return saga_error(SAGA_ERR_IO, "cannot create directory '%s': %s", dir, strerror(errno));
    for (int32_t i = 0; i < d->n_events; i++) {
        SAGA_TRY(
            hep_graph_export(&d->events[i], export_path(path, sizeof path, dir, &d->events[i])));
        cli_progress(c, "exporting: event %d/%d", (int)i + 1, (int)d->n_events);
    }
    cli_progress_end(c);
    SAGA_TRY(write_meta(d, data, dir));
    cli_say(c, "exported  %d events to %s/ (eventNNNNNNNNN.npz, meta.json) in %.2f s\n",
            (int)d->n_events, dir, saga_now() - t0);
fail:
    cli_progress_end(c);
    return st;
}

/* eval --log: the summary, then the metrics at every threshold of the curve. */
static saga_status write_eval_log(const char *path, const hep_metrics *m, const hep_curve *cv) {
    FILE *f = fopen(path, "w");
    if (!f)
        return saga_error(SAGA_ERR_IO, "cannot create '%s': %s", path, strerror(errno));
    json j;
    json_init(&j, f);
    json_object_begin(&j);
    json_metrics(&j, m);
    json_key(&j, "true_edges"), json_int(&j, cv->n_true);
    json_key(&j, "false_edges"), json_int(&j, cv->n_false);
    json_object_end(&j);
    fputc('\n', f);
    for (int i = 0; i < HEP_CURVE_POINTS; i++) {
        json_init(&j, f);
        json_object_begin(&j);
        json_key(&j, "threshold"), json_num(&j, cv->threshold[i]);
        json_key(&j, "edge_efficiency"), json_num(&j, cv->efficiency[i]);
        json_key(&j, "edge_purity");
        isnan(cv->purity[i]) ? json_null(&j) : json_num(&j, cv->purity[i]);
        json_key(&j, "false_positive_rate"), json_num(&j, cv->fpr[i]);
        json_object_end(&j);
        fputc('\n', f);
    }
    int bad = ferror(f);
    if ((fclose(f) != 0) | bad)
        return saga_error(SAGA_ERR_IO, "%s: write failed: %s", path, strerror(errno));
    return SAGA_OK;
}

/* ---- train -------------------------------------------------------------------------------- */

typedef struct epoch_sink {
    cli_ctx *c;
    hep_sampler sampler;
} epoch_sink;

static saga_status on_epoch(const hep_epoch *e, void *user) {
    epoch_sink *s = user;
    char b[32];
    cli_progress(s->c, "[%s] epoch %d/%d  loss %.4f  %.2f s  peak %s", hep_sampler_name(s->sampler),
                 e->epoch, e->epochs, e->loss, e->seconds,
                 cli_bytes(b, sizeof b, (int64_t)e->peak_bytes));
    return SAGA_OK;
}

static int hep_main(int argc, char **argv) {
    cli_ctx c;
    const char *arg = NULL, *out = NULL, *data = NULL, *device = cli_default_device(),
               *sampler = hep_sampler_name(hep_train_opts_defaults().sampler), *log_path = NULL;
    saga_trackml_params gp = saga_trackml_params_defaults();
    hep_graph_opts go = hep_graph_opts_defaults();
    hep_train_opts to = hep_train_opts_defaults();
    bool given[OPT_COUNT_] = {false};
    int64_t v = 0, n_events = 10;
    size_t device_mem = 0;
    double lr = 0.003, pos_weight = 1, eval_fraction = 0.2;
    int o;
    cli_begin(&c, &cli_cmd_hep, argc, argv);
    while ((o = cli_next(&c, &arg)) >= 0) {
        int bad = 0;
        given[o] = true;
        switch (o) {
        case OPT_LOG:
            log_path = arg;
            break;
        case OPT_OUTPUT:
            if (given[OPT_EXPORT] && strcmp(out, arg) != 0)
                return cli_usage(&c, "--export %s and -o %s name two directories", out, arg);
            out = arg;
            break;
        case OPT_EVENTS:
            bad = cli_int(&c, "--events", arg, 1, 1000000000, &n_events);
            break;
        case OPT_SEED:
            bad = cli_u64(&c, "--seed", arg, &gp.seed);
            to.seed = gp.seed;
            break;
        case OPT_MIN_PARTICLES:
            if (!(bad = cli_int(&c, "--min-particles", arg, 1, 1000000, &v)))
                gp.min_particles = (int32_t)v;
            break;
        case OPT_MAX_PARTICLES:
            if (!(bad = cli_int(&c, "--max-particles", arg, 1, 1000000, &v)))
                gp.max_particles = (int32_t)v;
            break;
        case OPT_NOISE:
            bad = cli_double(&c, "--noise", arg, 0, 10, false, &gp.noise_fraction);
            break;
        case OPT_DETECTOR:
            if (strcmp(arg, "full") == 0 || strcmp(arg, "barrel") == 0)
                gp.endcaps = strcmp(arg, "full") == 0;
            else
                bad = cli_usage(&c, "--detector must be full or barrel, got '%s'", arg);
            break;
        case OPT_MATERIAL:
            bad = cli_double(&c, "--material", arg, 0, 100, false, &gp.material);
            break;
        case OPT_HIT_EFFICIENCY:
            if (!(bad = cli_double(&c, "--hit-efficiency", arg, 0, 1, false, &gp.hit_efficiency)) &&
                gp.hit_efficiency <= 0)
                bad = cli_usage(&c, "--hit-efficiency must be in (0, 1], got %s", arg);
            break;
        case OPT_DOUBLED:
            bad = cli_double(&c, "--doubled", arg, 0, 1, false, &gp.doubled_fraction);
            break;
        case OPT_IDEAL:
            break;
        case OPT_DATA:
            data = arg;
            break;
        case OPT_EXPORT:
            if (given[OPT_OUTPUT] && strcmp(out, arg) != 0)
                return cli_usage(&c, "--export %s and -o %s name two directories", arg, out);
            out = arg;
            break;
        case OPT_PT_MIN:
            bad = cli_double(&c, "--pt-min", arg, 0, 1000, false, &go.pt_min);
            break;
        case OPT_PHI_SLOPE_MAX:
            bad = cli_double(&c, "--phi-slope-max", arg, 1e-9, 1, false, &go.phi_slope_max);
            break;
        case OPT_Z0_MAX:
            bad = cli_double(&c, "--z0-max", arg, 1e-3, 1e5, false, &go.z0_max);
            break;
        case OPT_MAX_MISSING:
            if (!(bad = cli_int(&c, "--max-missing", arg, 0, SAGA_TRACKML_N_LAYERS, &v)))
                go.max_missing = (int)v;
            break;
        case OPT_BARREL_ONLY:
            go.barrel_only = true;
            break;
        case OPT_EPOCHS:
            if (!(bad = cli_int(&c, "--epochs", arg, 0, 1000000, &v)))
                to.epochs = (int)v;
            break;
        case OPT_LR:
            if (!(bad = cli_double(&c, "--lr", arg, 1e-12, 1e3, false, &lr)))
                to.lr = (float)lr;
            break;
        case OPT_LR_SCHEDULE:
            to.lr_schedule = HEP_LR_SCHEDULE_COUNT;
            for (int k = 0; k < HEP_LR_SCHEDULE_COUNT; k++)
                if (strcmp(arg, hep_lr_schedule_name((hep_lr_schedule)k)) == 0)
                    to.lr_schedule = (hep_lr_schedule)k;
            if (to.lr_schedule == HEP_LR_SCHEDULE_COUNT)
                bad = cli_usage(&c, "--lr-schedule must be cosine or constant, got '%s'", arg);
            break;
        case OPT_HIDDEN:
            if (!(bad = cli_int(&c, "--hidden", arg, 1, 4096, &v)))
                to.hidden = (int)v;
            break;
        case OPT_ITERATIONS:
            if (!(bad = cli_int(&c, "--iterations", arg, 1, 64, &v)))
                to.iterations = (int)v;
            break;
        case OPT_SAMPLER:
            sampler = arg;
            break;
        case OPT_BATCH_EVENTS:
            if (!(bad = cli_int(&c, "--batch-events", arg, 1, 1000000, &v)))
                to.batch_events = (int32_t)v;
            break;
        case OPT_EDGE_BUDGET:
            bad = cli_int(&c, "--edge-budget", arg, 1, INT64_MAX, &to.edge_budget);
            break;
        case OPT_HIT_WEIGHT:
            bad = cli_double(&c, "--hit-weight", arg, 0, 1e6, false, &to.hit_weight);
            break;
        case OPT_POS_WEIGHT:
            if (!(bad = cli_double(&c, "--pos-weight", arg, 1e-6, 1e6, false, &pos_weight)))
                to.pos_weight = (float)pos_weight;
            break;
        case OPT_EVAL_FRACTION:
            bad = cli_double(&c, "--eval-fraction", arg, 0, 1, true, &eval_fraction);
            break;
        case OPT_THRESHOLD:
            if (!(bad = cli_double(&c, "--threshold", arg, 0, 1, true, &to.threshold)) &&
                to.threshold <= 0)
                bad = cli_usage(&c, "--threshold must be in (0, 1), got %s", arg);
            break;
        case OPT_CHECKPOINT:
            to.checkpoint = arg;
            break;
        case OPT_RESUME:
            to.resume = arg;
            break;
        case OPT_DEVICE:
            device = arg;
            break;
        case OPT_ACCUMULATE:
            if (!(bad = cli_int(&c, "--accumulate", arg, 1, 1000000, &v)))
                to.accumulate = (int32_t)v;
            break;
        case OPT_DEVICE_MEM:
            bad = cli_size(&c, "--device-mem", arg, &device_mem);
            break;
        case OPT_STREAM:
            to.stream = true;
            break;
        }
        if (bad)
            return bad;
    }
    if (o == CLI_EXIT)
        return c.exit_code;
    const char *names[4] = {"generate", "build", "train", "eval"};
    unsigned which = 0;
    for (int k = 0; k < 4; k++)
        if (strcmp(c.args[0], names[k]) == 0)
            which = 1u << k;
    if (!which)
        return cli_usage(&c, "unknown subcommand '%s' (available: generate, build, train, eval)",
                         c.args[0]);
    for (int k = 0; k < OPT_COUNT_; k++)
        if (given[k] && !(OPT_FOR[k] & which))
            return cli_usage(&c, "--%s does not apply to 'hep %s'", hep_opts[k].name, c.args[0]);

    if (which == GEN) {
        if (!out)
            return cli_usage(&c, "generate needs -o DIR");
        if (given[OPT_IDEAL]) {
            if (given[OPT_MATERIAL] || given[OPT_HIT_EFFICIENCY] || given[OPT_DOUBLED])
                return cli_usage(&c, "--ideal sets --material, --hit-efficiency and --doubled: "
                                     "give one or the others");
            gp.material = 0, gp.hit_efficiency = 1, gp.doubled_fraction = 0;
        }
        if (gp.min_particles > gp.max_particles)
            return cli_usage(&c, "--min-particles %d is above --max-particles %d",
                             (int)gp.min_particles, (int)gp.max_particles);
        if (saga_comm_launched()) {
            /* several ranks would write the same files: rank 0 writes them */
            saga_comm *g = NULL;
            if (cli_comm_open(&c, &g) < 0)
                return cli_fail(&c);
            int me = c.rank;
            saga_comm_free(&g);
            if (me != 0)
                return CLI_OK;
        }
        return hep_generate(&c, out, n_events, &gp);
    }
    if (!data)
        return cli_usage(&c, "%s needs --data DIR", c.args[0]);
    hep_sampler samplers[HEP_SAMPLER_COUNT];
    int n_samplers = 0;
    if (which == TRAIN) {
        if (strcmp(sampler, "all") == 0) {
            for (int k = 0; k < HEP_SAMPLER_COUNT; k++)
                samplers[n_samplers++] = (hep_sampler)k;
        } else {
            for (int k = 0; k < HEP_SAMPLER_COUNT; k++)
                if (strcmp(sampler, hep_sampler_name((hep_sampler)k)) == 0)
                    samplers[n_samplers++] = (hep_sampler)k;
            if (!n_samplers)
                return cli_usage(&c, "--sampler must be random, sorted, balanced or all, got '%s'",
                                 sampler);
        }
    }
    if (which == EVAL && !to.checkpoint)
        return cli_usage(&c, "eval needs --checkpoint FILE");
    if ((which & (TRAIN | EVAL)) && cli_check_device(&c, device))
        return CLI_USAGE;

    int rc = CLI_ERROR;
    saga_status st = SAGA_OK;
    bool agreed = true; /* a failure every rank knows of (see cli_fail_ranks) */
    hep_data d = {0};
    saga_comm *comm = NULL, *train_comm = NULL; /* train_comm: the ranks that work together */
    saga_backend *be = NULL;
    size_t *rank_peak = NULL;
    hep_net net = {0};
    hep_run runs[HEP_SAMPLER_COUNT];
    memset(runs, 0, sizeof runs);
    double t0 = saga_now();

    /* ---- ranks: training is data-parallel over them; the other subcommands run on rank 0 */
    if ((st = cli_comm_open(&c, &comm)) < 0)
        goto fail;
    if (c.ranks > 1 && which != TRAIN) {
        if (c.rank != 0) {
            rc = CLI_OK;
            goto fail;
        }
        cli_warn(&c, "'hep %s' runs on rank 0 alone (%d ranks started)", c.args[0], c.ranks);
    }
    if (which == TRAIN)
        train_comm = comm;

    /* ---- the graphs */
    st = hep_data_load(&d, data, &go, which == TRAIN ? eval_fraction : 0.0, load_progress, &c);
    cli_progress_end(&c);
    if (train_comm)
        st = saga_comm_agree(train_comm, st);
    if (st < 0)
        goto fail;
    double t_load = saga_now() - t0;
    construction k = construction_of(&d);
    say_construction(&c, &d, &k);
    if (which == BUILD) {
        if (out && (st = hep_export(&c, &d, data, out)) < 0)
            goto fail;
        if (c.json) {
            json j;
            json_init(&j, stdout);
            json_object_begin(&j);
            json_key(&j, "input"), json_str(&j, data);
            json_construction(&j, &d, &k);
            json_key(&j, "seconds"), json_num(&j, saga_now() - t0);
            json_key(&j, "load_seconds"), json_num(&j, t_load);
            cli_json_device(&j, NULL);
            if (out) {
                char path[4096];
                json_key(&j, "export"), json_str(&j, out);
                json_key(&j, "outputs"), json_array_begin(&j);
                for (int32_t i = 0; i < d.n_events; i++)
                    json_str(&j, export_path(path, sizeof path, out, &d.events[i]));
                snprintf(path, sizeof path, "%s/meta.json", out);
                json_str(&j, path);
                json_array_end(&j);
            } else {
                cli_json_outputs(&j, NULL, 0);
            }
            json_object_end(&j);
            json_finish(&j);
        }
        rc = CLI_OK;
        goto fail;
    }

    /* ---- backend */
    saga_backend_params bp = saga_backend_params_defaults();
    bp.n_threads = c.threads;
    bp.budget_bytes = device_mem;
    st = cli_backend_open(&c, &be, device, comm, &bp);
    if (train_comm)
        st = saga_comm_agree(train_comm, st);
    if (st < 0)
        goto fail;
    int n_threads = cli_threads_of(be);
    cli_say(&c, "device    %s, %d threads\n", saga_backend_name(be), n_threads);

    if (which == EVAL) {
        hep_metrics m;
        hep_curve curve;
        int64_t step = 0;
        uint64_t counter = 0;
        if ((st = hep_net_new(&net, be, to.hidden, to.iterations, 1)) < 0 ||
            (st = saga_checkpoint_load(to.checkpoint, net.m, NULL, &step, &counter)) < 0 ||
            (st = hep_evaluate_curve(&m, log_path ? &curve : NULL, be, &net, d.events, 0,
                                     d.n_events, to.threshold, 1.0)) < 0)
            goto fail;
        say_metrics(&c, "eval", &m);
        if (log_path && (st = write_eval_log(log_path, &m, &curve)) < 0)
            goto fail;
        if (c.json) {
            json j;
            json_init(&j, stdout);
            json_object_begin(&j);
            json_key(&j, "input"), json_str(&j, data);
            json_key(&j, "checkpoint"), json_str(&j, to.checkpoint);
            json_key(&j, "load_seconds"), json_num(&j, t_load);
            cli_json_device(&j, be);
            cli_json_outputs(&j, &log_path, 1);
            json_key(&j, "checkpoint_epoch"), json_int(&j, step);
            json_construction(&j, &d, &k);
            json_metrics(&j, &m);
            json_key(&j, "seconds"), json_num(&j, saga_now() - t0);
            json_object_end(&j);
            json_finish(&j);
        }
        rc = CLI_OK;
        goto fail;
    }

    /* ---- train, once per sampler asked for */
    cli_say(&c,
            "model     Interaction Network: hidden %d, %d rounds; Adam lr %g (%s), pos_weight %g; "
            "%d epochs over %d training events, %d held out\n",
            to.hidden, to.iterations, lr, hep_lr_schedule_name(to.lr_schedule), pos_weight,
            to.epochs, (int)d.n_train, (int)(d.n_events - d.n_train));
    if (c.ranks > 1)
        cli_say(&c, "ranks     %d, data-parallel: %d micro-batch%s per rank and step\n", c.ranks,
                (int)to.accumulate, to.accumulate == 1 ? "" : "es");
    to.comm = comm;
    if ((st = saga_alloc_zeroed((void **)&rank_peak, (size_t)c.ranks * HEP_SAMPLER_COUNT,
                                sizeof *rank_peak, "peaks")) < 0)
        goto fail;
    for (int s = 0; s < n_samplers; s++) {
        epoch_sink sink = {.c = &c, .sampler = samplers[s]};
        to.sampler = samplers[s];
        st = hep_train(&runs[s], be, &d, &to, on_epoch, &sink);
        cli_progress_end(&c);
        if (st < 0) {
            agreed = false;
            goto fail;
        }
        /* every rank's peak, for the balance the sampler gives */
        rank_peak[(size_t)s * (size_t)c.ranks + (size_t)c.rank] = runs[s].peak_bytes;
        if (c.ranks > 1 &&
            (st = saga_comm_allreduce(comm, rank_peak + (size_t)s * (size_t)c.ranks,
                                      (size_t)c.ranks, SAGA_I64, SAGA_COMM_SUM, NULL)) < 0) {
            agreed = false;
            goto fail;
        }
        char b1[32];
        const hep_run *r = &runs[s];
        cli_say(&c,
                "%-9s %d micro-batches (largest %lld edges%s), peak device %s, %.3f s per epoch "
                "(median; fastest %.3f; %.1f GFLOP of matrix products, %.1f GFLOP/s), loss "
                "%.4f\n",
                hep_sampler_name(samplers[s]), (int)r->n_batches, (long long)r->max_batch_edges,
                samplers[s] == HEP_SAMPLER_BALANCED ? ", budget applied" : "",
                cli_bytes(b1, sizeof b1, (int64_t)r->peak_bytes), r->epoch_seconds,
                r->epoch_seconds_min, r->epoch_flops / 1e9,
                r->epoch_seconds > 0 ? r->epoch_flops / r->epoch_seconds / 1e9 : 0.0, r->loss);
        if (r->streamed)
            cli_say(&c,
                    "%-9s %d of them streamed through the device budget, by chunks of %lld "
                    "rows\n",
                    "", (int)r->streamed, (long long)r->chunk);
        say_metrics(&c, "", &r->metrics);
        if (c.ranks > 1) {
            size_t lo = SIZE_MAX, hi = 0;
            for (int q = 0; q < c.ranks; q++) {
                size_t pk = rank_peak[(size_t)s * (size_t)c.ranks + (size_t)q];
                lo = pk < lo ? pk : lo;
                hi = pk > hi ? pk : hi;
            }
            char b2[32], b3[32];
            cli_say(&c, "          peaks over %d ranks: %s to %s (max/min %.2f)\n", c.ranks,
                    cli_bytes(b2, sizeof b2, (int64_t)lo), cli_bytes(b3, sizeof b3, (int64_t)hi),
                    lo ? (double)hi / (double)lo : 0.0);
        }
    }
    const hep_run *last = &runs[n_samplers - 1];
    if (to.checkpoint)
        cli_say(&c, "saved     %s (epoch %d)\n", to.checkpoint, last->epochs);
    if (c.json) {
        json j;
        json_init(&j, stdout);
        json_object_begin(&j);
        json_key(&j, "input"), json_str(&j, data);
        json_construction(&j, &d, &k);
        json_key(&j, "train_events"), json_int(&j, d.n_train);
        json_key(&j, "eval_events"), json_int(&j, d.n_events - d.n_train);
        cli_json_device(&j, be);
        cli_json_outputs(&j, &to.checkpoint, 1);
        json_key(&j, "hidden"), json_int(&j, to.hidden);
        json_key(&j, "iterations"), json_int(&j, to.iterations);
        json_key(&j, "epochs"), json_int(&j, last->epochs);
        json_key(&j, "start_epoch"), json_int(&j, last->start_epoch);
        json_key(&j, "lr"), json_num(&j, lr);
        json_key(&j, "lr_schedule"), json_str(&j, hep_lr_schedule_name(to.lr_schedule));
        json_key(&j, "pos_weight"), json_num(&j, pos_weight);
        json_key(&j, "batch_events"), json_int(&j, to.batch_events);
        json_key(&j, "hit_weight"), json_num(&j, to.hit_weight);
        json_key(&j, "seed"), json_uint(&j, to.seed);
        json_key(&j, "ranks"), json_int(&j, c.ranks);
        json_key(&j, "accumulate"), json_int(&j, to.accumulate);
        json_key(&j, "parameters"), json_int(&j, last->n_params);
        json_key(&j, "sampler"), json_str(&j, hep_sampler_name(to.sampler));
        json_key(&j, "loss"), json_num(&j, last->loss);
        json_metrics(&j, &last->metrics);
        json_key(&j, "peak_device_bytes"), json_uint(&j, last->peak_bytes);
        json_key(&j, "epoch_seconds"), json_num(&j, last->epoch_seconds);
        json_key(&j, "samplers"), json_array_begin(&j);
        for (int s = 0; s < n_samplers; s++) {
            const hep_run *r = &runs[s];
            json_object_begin(&j);
            json_key(&j, "sampler"), json_str(&j, hep_sampler_name(samplers[s]));
            json_key(&j, "micro_batches"), json_int(&j, r->n_batches);
            json_key(&j, "max_batch_edges"), json_int(&j, r->max_batch_edges);
            if (samplers[s] == HEP_SAMPLER_BALANCED)
                json_key(&j, "edge_budget"), json_int(&j, r->budget);
            json_key(&j, "peak_device_bytes"), json_uint(&j, r->peak_bytes);
            json_key(&j, "streamed_batches"), json_int(&j, r->streamed);
            json_key(&j, "chunk_rows"), json_int(&j, r->chunk);
            json_key(&j, "rank_peak_device_bytes"), json_array_begin(&j);
            for (int q = 0; q < c.ranks; q++)
                json_uint(&j, rank_peak[(size_t)s * (size_t)c.ranks + (size_t)q]);
            json_array_end(&j);
            json_key(&j, "epoch_seconds"), json_num(&j, r->epoch_seconds);
            json_key(&j, "epoch_seconds_min"), json_num(&j, r->epoch_seconds_min);
            json_key(&j, "epoch_gflop"), json_num(&j, r->epoch_flops / 1e9);
            json_key(&j, "gflops"),
                json_num(&j, r->epoch_seconds > 0 ? r->epoch_flops / r->epoch_seconds / 1e9 : 0);
            json_key(&j, "loss"), json_num(&j, r->loss);
            json_metrics(&j, &r->metrics);
            json_key(&j, "seconds"), json_num(&j, r->seconds);
            json_object_end(&j);
        }
        json_array_end(&j);
        json_key(&j, "load_seconds"), json_num(&j, t_load);
        json_key(&j, "total_seconds"), json_num(&j, saga_now() - t0);
        json_object_end(&j);
        json_finish(&j);
    }
    rc = CLI_OK;
fail:
    cli_progress_end(&c);
    if (rc != CLI_OK)
        rc = cli_fail_ranks(&c, train_comm, agreed);
    hep_net_free(&net);
    hep_data_free(&d);
    saga_free(rank_peak);
    saga_backend_free_all(&be);
    saga_comm_free(&comm);
    return rc;
}
