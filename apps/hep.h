/* hep.h - particle tracking with a graph neural network: collision events become graphs of hits
 * and candidate segments, an Interaction Network written as saga vertex programs classifies the
 * segments, and tracks are the connected components of the segments it keeps.
 *
 *   hep_data d;
 *   SAGA_TRY(hep_data_load(&d, "events/", &go));      // every event's graph, built on the host
 *   hep_train_opts o = hep_train_opts_defaults();
 *   hep_run r;
 *   SAGA_TRY(hep_train(&r, be, &d, &o, NULL, NULL));  // train on d.train, evaluate on d.eval
 *   printf("edge efficiency %.4f purity %.4f\n", r.metrics.edge_efficiency, r.metrics.edge_purity);
 *   hep_data_free(&d);
 *
 * Graph: a vertex per hit, on the barrel's cylinders and the end-caps' disks alike, with
 * features (r / 1000, phi / pi, z / 1000); an edge from a hit to each hit further out in r whose
 * segment passes three cuts: the bending |dphi / dr| below phi_slope_max, the segment's
 * intersection with the beam line |z0| below z0_max, and, of the detector's layers its straight
 * line in (r, z) crosses between the two hits (inside the layer's bounds, more than
 * HEP_EDGE_MARGIN_MM from its edges), at most max_missing (a layer the particle crossed without
 * leaving a hit). A layer the line passes beyond the end of is not crossed: a particle that
 * leaves the pixel barrel's length goes on to the strip layers or the disks, and that segment
 * joins the pieces. The same rule serves cylinders (steps in r) and disks (steps in z): it asks
 * only where the line meets each surface. Each hit scans, on each layer the line from the beam
 * region through it can reach, only the phi window the first cut allows, the layer's hits being
 * sorted by phi. An edge is true when both hits belong to one particle and the outer one is on
 * the next layer of that particle's trajectory (its layers ordered by r, doubled hits on one
 * layer sharing it): they are consecutive hits. Hits of particles below pt_min are dropped from
 * the graph, as if the detector had not seen them; noise hits stay.
 *
 * Model (Interaction Network, Battaglia et al. 2016, as used for tracking by Exa.TrkX): node
 * and edge encoders (two-layer MLPs to `hidden`, tanh), then `iterations` rounds of one vertex
 * program with shared weights: apply_edge e' = tanh(MLP([h_src, h_dst, e])) over SCATTER_BOTH
 * with the edge states as edge data, gather SUM at the outer hit, apply_vertex h' = tanh(MLP([h,
 * sum of e' in, sum of e' out])) (the sum over out-edges reduces the kept edge tensor by
 * source); then a score MLP over [h_src, h_dst, e] gives one logit per edge. tanh bounds the
 * states, so the sums over a hit's edges cannot grow round after round. Loss: binary
 * cross-entropy with logits and pos_weight; Adam.
 */
#pragma once

#include "saga.h"
#include "saga_datasets.h"
#include "saga_nn.h"
#include "saga_program.h"

#include <stdbool.h>
#include <stdint.h>

/* An edge's features: HEP_SEGMENT_FEATURES of its own segment, then 4 of its neighbours'. */
enum { HEP_HIT_FEATURES = 3, HEP_SEGMENT_FEATURES = 7, HEP_EDGE_FEATURES = 11 };
/* A segment's line crosses a layer when it meets the layer's surface more than this far (mm)
 * inside its bounds; nearer the edge it may pass beside it (the hits' smearing). */
#define HEP_EDGE_MARGIN_MM 5.0

/* Where a hit is (barrel or end-cap), and where a segment is: both hits on the barrel, one on
 * each, or both on the end-caps. */
enum { HEP_REGION_BARREL = 0, HEP_REGION_ENDCAP = 1, HEP_N_HIT_REGIONS = 2 };
enum { HEP_SEG_BARREL = 0, HEP_SEG_CROSSING = 1, HEP_SEG_ENDCAP = 2, HEP_N_SEG_REGIONS = 3 };
extern const char *const HEP_SEG_REGION_NAMES[HEP_N_SEG_REGIONS]; /* "barrel", "crossing", ... */

/* ---- graphs ------------------------------------------------------------------------------- */

typedef struct hep_graph_opts {
    double pt_min;        /* GeV: hits of slower particles are dropped (1.0) */
    double phi_slope_max; /* rad/mm: most bending of a segment (0.0005, about pT 0.6 GeV) */
    double z0_max;        /* mm: farthest beam-line intersection of a segment (250) */
    int max_missing;      /* layers a segment may cross without a hit on them (1) */
    bool barrel_only;     /* the barrel alone: end-cap hits left out (counted in n_left_out),
                           * segments may pass the disks (false) */
} hep_graph_opts;

hep_graph_opts hep_graph_opts_defaults(void);

/* One event's graph on the host; arrays saga_malloc'd and owned. Edges are sorted by (outer
 * hit, inner hit): the edge order of a placed saga_dgraph of this graph. */
typedef struct hep_event_graph {
    int64_t event_id;
    int32_t n_hits;
    float *hit_feat;       /* n_hits x HEP_HIT_FEATURES */
    int64_t *hit_particle; /* 0: noise */
    float *hit_pt;         /* the particle's pT in GeV, 0 for noise */
    int64_t n_edges;
    int32_t *src, *dst; /* inner hit, outer hit */
    float *edge_feat;   /* n_edges x HEP_EDGE_FEATURES */
    uint8_t *truth;     /* 1: both hits of one particle */
    int64_t n_true;     /* true edges built */
    int64_t n_segments; /* all true segments: pairs of one particle's hits on consecutive layers
                         * of its trajectory (no hit of it on the layers between) */
    /* where the event's hits went: n_read = n_barrel + n_endcap = n_hits + n_soft + n_left_out */
    int64_t n_read;                         /* rows of the hits file */
    int64_t n_barrel;                       /* read on the barrel layers (volumes 8, 13, 17) */
    int64_t n_endcap;                       /* read on the end-caps (volumes 7/9, 12/14, 16/18) */
    int64_t n_left_out;                     /* end-cap hits left out by barrel_only */
    int64_t n_soft;                         /* hits of particles below pt_min: dropped */
    int64_t n_noise;                        /* noise hits (particle_id 0) in the graph */
    uint8_t *hit_region;                    /* HEP_REGION_* of each hit */
    int64_t region_hits[HEP_N_HIT_REGIONS]; /* hits in the graph */
    int64_t region_segments[HEP_N_SEG_REGIONS]; /* true segments (n_segments by region) */
    int64_t region_true[HEP_N_SEG_REGIONS];     /* true edges built (n_true by region) */
    int64_t region_edges[HEP_N_SEG_REGIONS];    /* edges built */
} hep_event_graph;

/* Builds e's graph with o (NULL: defaults) into *g (zeroed first; on failure it holds
 * nothing). Errors: SAGA_ERR_OUT_OF_MEMORY; SAGA_ERR_INVALID_ARG for an event with
 * more than 2^31 - 1 hits or without its truth; SAGA_ERR_PARSE naming the hit_id for a hit on a
 * (volume_id, layer_id) that is not a layer of TrackML's detector; SAGA_ERR_INVALID_ARG for
 * options out of range. */
saga_status hep_graph_build(hep_event_graph *g, const saga_trackml_event *e,
                            const hep_graph_opts *o);
void hep_graph_free(hep_event_graph *g);

/* What the features are, in column order: hit features "r/1000", "phi/pi", "z/1000"; edge
 * features dphi/dr (x1000), z0 (/200), dz/dr (/3), dr (/200), deta, dz (/100), and the curvature
 * (1/mm, x1000) of the circle through the beam line and both hits; then how well the edge is
 * continued: of the edges into its inner hit, the one closest in curvature and z0, and the
 * differences to it (log-scaled, see best_continuation in hep.c), and the same of the edges out of
 * its outer hit (1.5 where there is no such edge). */
extern const char *const HEP_HIT_FEATURE_NAMES[HEP_HIT_FEATURES];
extern const char *const HEP_EDGE_FEATURE_NAMES[HEP_EDGE_FEATURES];

/* Writes g to path as a NumPy .npz archive (npz.h) laid out for PyTorch Geometric: x (n_hits x
 * HEP_HIT_FEATURES, float32), edge_index (2 x n_edges, int64: inner hits, then outer hits),
 * edge_attr (n_edges x HEP_EDGE_FEATURES, float32), y (n_edges, float32 0/1), and for the
 * metrics hit_particle (n_hits, int64, 0: noise) and hit_pt (n_hits, float32, GeV, 0 for
 * noise); edges in g's order. A failed export removes the file. Errors: SAGA_ERR_IO naming path,
 * SAGA_ERR_OUT_OF_MEMORY, SAGA_ERR_UNSUPPORTED past 4 GiB. */
saga_status hep_graph_export(const hep_event_graph *g, const char *path);

/* Events split for training and evaluation. */
typedef struct hep_data {
    hep_event_graph *events;
    int32_t n_events;
    int32_t n_train; /* events[0 .. n_train) train, the rest evaluate */
    hep_graph_opts graph;
} hep_data;

/* Reads and builds every event of dir (saga_trackml_list order); the last eval_fraction of them
 * (at least one when there are two or more; 0 keeps them all for training) evaluate. Errors:
 * those of the reader naming the file; SAGA_ERR_INVALID_ARG when dir holds no event. progress
 * (may be NULL) is called after each event. */
saga_status hep_data_load(hep_data *d, const char *dir, const hep_graph_opts *o,
                          double eval_fraction, void (*progress)(void *, int32_t, int32_t),
                          void *ud);
void hep_data_free(hep_data *d);

/* ---- sampling ----------------------------------------------------------------------------- */

typedef enum hep_sampler {
    HEP_SAMPLER_RANDOM = 0, /* events shuffled each epoch, batch_events per micro-batch */
    HEP_SAMPLER_SORTED,     /* sorted by edges, cut into runs of batch_events, runs shuffled */
    HEP_SAMPLER_BALANCED,   /* first-fit-decreasing bins under an edge budget, bins shuffled */
    HEP_SAMPLER_COUNT
} hep_sampler;

const char *hep_sampler_name(hep_sampler s);

/* One epoch's micro-batches: batch b holds events[offsets[b] .. offsets[b+1]). */
typedef struct hep_plan {
    int32_t n_batches;
    int32_t *offsets; /* n_batches + 1 */
    int32_t *events;  /* a permutation of the n events */
    int64_t budget;   /* BALANCED: the edge budget of a bin */
} hep_plan;

/* The plan of epoch `epoch` (0-based) for n events with edges[i] edges each, drawn from (seed,
 * epoch). RANDOM and SORTED make ceil(n / batch_events) micro-batches; BALANCED packs events
 * largest first into the first bin with room under budget (an event larger than the budget
 * alone in its bin); budget 0 picks the smallest budget that needs at most ceil(n /
 * batch_events) bins, so every strategy has the same number of micro-batches and the same mean
 * edges per micro-batch. Errors: SAGA_ERR_INVALID_ARG, SAGA_ERR_OUT_OF_MEMORY. */
saga_status hep_plan_epoch(hep_plan *out, hep_sampler s, const int64_t *edges, int32_t n,
                           int32_t batch_events, int64_t budget, uint64_t seed, int epoch);
void hep_plan_free(hep_plan *p);

/* ---- the model ---------------------------------------------------------------------------- */

/* Encoders of the hits and segments, `iterations` rounds of one Interaction Network
 * (saga_layers.h: its edge and node blocks), and a scoring network over each edge's ends and
 * state. */
typedef struct hep_net {
    saga_model *m;
    int hidden, iterations;
    saga_ffn node_enc, edge_enc, score;
    saga_interaction *in;
} hep_net;

/* A network with Kaiming-initialised weights from seed (model owned by net; hep_net_free). */
saga_status hep_net_new(hep_net *net, saga_backend *be, int hidden, int iterations, uint64_t seed);
void hep_net_free(hep_net *net);

/* A micro-batch on the backend: the disjoint union of events. */
typedef struct hep_batch {
    saga_dgraph *dg;
    saga_tensor *x, *edata, *target, *src_idx, *dst_idx;
    int32_t n_vertices;
    int64_t n_edges;
} hep_batch;

/* Concatenates events ids[0 .. n) (vertex ids offset) and places them on be. */
saga_status hep_batch_new(hep_batch *b, saga_backend *be, const hep_event_graph *events,
                          const int32_t *ids, int32_t n);
void hep_batch_free(hep_batch *b);

/* The same micro-batch's rows in host memory: hit features (n_vertices x HEP_HIT_FEATURES),
 * edge features (n_edges x HEP_EDGE_FEATURES), targets, and each edge's source and destination
 * (hep_batch_new's edge order: by destination, the placed graph's). */
typedef struct hep_rows {
    float *x, *edata, *target;
    int32_t *src, *dst;
    int32_t n_vertices;
    int64_t n_edges;
} hep_rows;

saga_status hep_rows_new(hep_rows *r, const hep_event_graph *events, const int32_t *ids, int32_t n);
void hep_rows_free(hep_rows *r);

/* ---- a micro-batch streamed through the device budget (hep_stream.c) ---------------------- */

/* A training step over a micro-batch whose graph and activations do not fit on the device: the
 * rows stay in host memory (each round's hit and edge rows, the sums of its messages at both
 * ends, and their gradients), and every phase runs over chunks of at most `chunk` edges or hits,
 * each copied to the device with the rows it reads, computed and copied back:
 *   forward, without a tape: the encoders; each round's edge block by chunks of edges (the rows
 *   of their sources and destinations gathered on the host) with its messages summed into the
 *   hits' incoming and outgoing sums, then its node block by chunks of hits; then the score and
 *   the loss by chunks of edges, each differentiated at once;
 *   backward, from the last round down: the node block recomputed by chunks of hits and
 *   differentiated with its output's gradient given (saga_backward_from), then the edge block
 *   with its output's gradient plus those of the two sums at the edge's ends; the encoders last.
 * The device holds the model, the optimizer's state and one chunk's tensors; the parameters'
 * gradients add up over the chunks to the in-memory step's (the sums in another order). */
typedef struct hep_stream {
    int64_t chunk;    /* rows a chunk holds: 0 picks them from the device budget at the first
                       * step; halved (and the step run again) when a chunk takes more */
    int64_t chunks;   /* the last step's chunks, over its phases */
    double h2d_bytes; /* the last step's bytes to the device and back */
    double d2h_bytes;
    bool proven; /* a step ran at this chunk size */
    float *keep; /* the gradients at a step's start while not proven */
    size_t keep_bytes;
} hep_stream;

/* One training step of net on the rows r, streamed as above with c (training or not; left
 * training): d loss / d parameter added to the parameters' gradients, *loss the loss
 * (saga_bce_logits's mean over the edges, with pos_weight). Errors: the ops'; SAGA_ERR_BUDGET
 * when not even a chunk of 64 rows fits. */
saga_status hep_stream_step(hep_stream *s, saga_ctx *c, hep_net *net, const hep_rows *r,
                            float pos_weight, double *loss);
/* The forward pass streamed as in hep_stream_step (c left out of training) and each edge's
 * score, the sigmoid of its logit, into score (n_edges). */
saga_status hep_stream_scores(hep_stream *s, saga_ctx *c, hep_net *net, const hep_rows *r,
                              float *score);
void hep_stream_free(hep_stream *s);
/* The model m's gradients into s->keep (put), or back from it onto the device (!put): what a
 * step that did not fit in the budget had added is taken back before it runs again. */
saga_status hep_grads_keep(hep_stream *s, saga_model *m, saga_backend *be, bool put);

/* One logit per edge (n_edges x 1, owned by c), or NULL with the error in c. */
saga_tensor *hep_net_forward(saga_ctx *c, hep_net *net, const hep_batch *b);

/* ---- metrics ------------------------------------------------------------------------------ */

typedef struct hep_metrics {
    int64_t n_edges, n_true;
    double threshold;
    double edge_efficiency;     /* true edges scored above the threshold / true edges */
    double edge_purity;         /* true edges above the threshold / edges above it */
    double auc;                 /* ROC AUC over every edge (exact; ties count one half) */
    int64_t n_tracks;           /* particles with pT > track_pt and >= 3 hits in the graphs */
    double track_efficiency;    /* share of them found, junctions cut (see hep_track_efficiency) */
    double track_efficiency_cc; /* the same with tracks as plain connected components */
    /* by region (HEP_SEG_*): an edge by where its two hits are; a track by where its particle's
     * hits are (all on the barrel, on both, all on the end-caps) */
    double region_edge_efficiency[HEP_N_SEG_REGIONS], region_edge_purity[HEP_N_SEG_REGIONS];
    int64_t region_true[HEP_N_SEG_REGIONS], region_tracks[HEP_N_SEG_REGIONS];
    double region_track_efficiency[HEP_N_SEG_REGIONS];
} hep_metrics;

/* The metrics at thresholds 0, 0.01, ..., 1 (an edge kept when its score is above the
 * threshold): for efficiency and purity against the threshold, and a ROC curve. */
enum { HEP_CURVE_POINTS = 101 };
typedef struct hep_curve {
    int64_t n_true, n_false;
    double threshold[HEP_CURVE_POINTS];
    double efficiency[HEP_CURVE_POINTS]; /* true positive rate: kept true / true */
    double purity[HEP_CURVE_POINTS];     /* kept true / kept; NAN when nothing is kept */
    double fpr[HEP_CURVE_POINTS];        /* false positive rate: kept false / false (0 if none) */
} hep_curve;

/* Fills *out from n scores and their labels (1: a true edge). */
void hep_curve_of(hep_curve *out, const float *score, const uint8_t *label, int64_t n);

/* Exact ROC AUC of scores against labels by sorting (ties get their mean rank); 0.5 when one
 * class is empty. */
double hep_auc(const float *score, const uint8_t *label, int64_t n);

/* Tracks as the connected components (cc_run on be) of the edges kept, symmetrized; a particle
 * with pT > track_pt and at least 3 hits counts as found when >= 75% of its hits lie in one
 * component of which >= 75% are its hits. *found and *total are the counts for this event.
 * With score (the edges' scores; NULL: plain components) the junctions are cut first: of the
 * kept edges out of a hit only those scoring within HEP_JUNCTION_TOLERANCE of the highest stay,
 * and of those into a hit too (an edge stays when it is both), so a wrong edge that passed the
 * threshold can no longer merge two tracks where a better edge continues each, while the two
 * edges into (or out of) a doubled hit, both as good, stay. */
#define HEP_JUNCTION_TOLERANCE 0.005
saga_status hep_track_efficiency(int64_t *found, int64_t *total, saga_backend *be,
                                 const hep_event_graph *g, const uint8_t *kept, const float *score,
                                 double track_pt);
/* hep_track_efficiency by where the particles' hits are (HEP_SEG_*: all on the barrel, on both,
 * all on the end-caps; a graph without hit_region is all barrel): found[r] of total[r]. */
saga_status hep_track_efficiency_regions(int64_t found[HEP_N_SEG_REGIONS],
                                         int64_t total[HEP_N_SEG_REGIONS], saga_backend *be,
                                         const hep_event_graph *g, const uint8_t *kept,
                                         const float *score, double track_pt);

/* Scores every event of events[first .. first + n) one at a time (inference) and measures. */
saga_status hep_evaluate(hep_metrics *out, saga_backend *be, hep_net *net,
                         const hep_event_graph *events, int32_t first, int32_t n, double threshold,
                         double track_pt);
/* hep_evaluate, and *curve (when not NULL) gets the metrics at every threshold (hep_curve_of). */
saga_status hep_evaluate_curve(hep_metrics *out, hep_curve *curve, saga_backend *be, hep_net *net,
                               const hep_event_graph *events, int32_t first, int32_t n,
                               double threshold, double track_pt);

/* ---- training ----------------------------------------------------------------------------- */

typedef enum hep_lr_schedule {
    HEP_LR_CONSTANT = 0, /* lr every epoch */
    HEP_LR_COSINE,       /* from lr at the first epoch to lr x HEP_LR_END at the last, on a
                          * half cosine (SGDR without restarts) */
    HEP_LR_SCHEDULE_COUNT
} hep_lr_schedule;
#define HEP_LR_END 0.01

/* "constant", "cosine" (the --lr-schedule names). */
const char *hep_lr_schedule_name(hep_lr_schedule s);

typedef struct hep_train_opts {
    int epochs;             /* 40 */
    float lr;               /* Adam's learning rate (0.003) */
    int hidden;             /* 32 */
    int iterations;         /* message-passing rounds (4) */
    float pos_weight;       /* BCE weight of the true edges (1) */
    int32_t batch_events;   /* events per micro-batch for RANDOM and SORTED (1) */
    int64_t edge_budget;    /* BALANCED bins (0: as many bins as the others' micro-batches) */
    double hit_weight;      /* an event's size for SORTED and BALANCED: edges + hit_weight * hits
                             * (1.3; 0: edges alone). Hits cost memory too: about 1.3 edges each
                             * in this model's training step */
    hep_sampler sampler;    /* RANDOM */
    double threshold;       /* 0.5 */
    uint64_t seed;          /* weights and the epochs' shuffles (1) */
    const char *checkpoint; /* saved after every epoch (by rank 0), or NULL */
    const char *resume;     /* start from this checkpoint, or NULL */
    int32_t accumulate;     /* micro-batches per optimizer step on each rank (1): their
                             * gradients are averaged */
    hep_lr_schedule lr_schedule; /* COSINE over `epochs` (a resumed run follows the schedule
                                  * of its own `epochs`) */
    saga_comm *comm;             /* data-parallel ranks, or NULL for one (not owned) */
    /* Micro-batches streamed through the device budget (hep_stream_step): every one (true), or
     * (false) those whose step fails in memory for the budget, and every one with as many
     * edges or more after the first such */
    bool stream;
} hep_train_opts;

hep_train_opts hep_train_opts_defaults(void);
/* The floating-point operations of the matrix products of one training step (forward, and the
 * backward's two products per forward one) over `edges` edges and `hits` hits with this width
 * and number of rounds: 3 x 2 x (per edge: the encoder's F H + H^2 with F = HEP_EDGE_FEATURES,
 * 4H^2 per round, the score's 3H^2 + H; per hit: the encoder's 3H + H^2, 4H^2 per round). The
 * rest of the step (activations, gathers and scatters, concatenations) moves memory and is not
 * counted. */
double hep_step_flops(int hidden, int iterations, int64_t edges, int64_t hits);

/* The learning rate of epoch `epoch` (1-based) under o's schedule. */
float hep_lr_at(const hep_train_opts *o, int epoch);

typedef struct hep_epoch {
    int epoch, epochs;
    int32_t n_batches;
    double loss;       /* mean over the epoch's micro-batches */
    double seconds;    /* the epoch's micro-batches: build, upload, step */
    size_t peak_bytes; /* the backend's peak during the epoch (after a trim and reset) */
    int32_t streamed;  /* micro-batches streamed (hep_stream_step), by chunks of chunk rows */
    int64_t chunk;
    int64_t max_batch_edges;
} hep_epoch;

typedef saga_status (*hep_epoch_fn)(const hep_epoch *e, void *user);

typedef struct hep_run {
    int start_epoch, epochs;
    double loss;              /* the last epoch's */
    double epoch_seconds;     /* median over the epochs run here */
    double epoch_seconds_min; /* the fastest: the least disturbed by other work on the machine */
    size_t peak_bytes;        /* largest epoch peak */
    int64_t max_batch_edges;  /* largest micro-batch over the epochs */
    int32_t n_batches;        /* micro-batches per epoch */
    int64_t budget;           /* BALANCED's edge budget */
    int64_t n_params;
    int32_t streamed; /* micro-batches streamed in the last epoch, by chunks of chunk rows */
    int64_t chunk;
    double epoch_flops;  /* hep_step_flops over every training event */
    hep_metrics metrics; /* on the evaluation events (on the training events when none) */
    double seconds;
} hep_run;

/* Trains on d's training events and evaluates on the rest. Errors: those of the ops and the
 * checkpoint files; SAGA_ERR_INVALID_ARG for options out of range.
 *
 * Data-parallel over o->comm's R ranks (each holding all of d and a replica of the weights): an
 * optimizer step takes the epoch plan's next G = R x accumulate micro-batches, rank r the
 * accumulate of them from r x accumulate on; the gradients are summed over the ranks and divided
 * by the number of micro-batches the step had, so every rank applies the same update (a rank
 * without a micro-batch in the last step adds zeros). One process with accumulate = G computes
 * the same steps. With the balanced sampler the micro-batches have even edge counts, so the ranks'
 * memory peaks are even too. The loss is the mean over all micro-batches; peak_bytes and
 * max_batch_edges are this rank's; rank 0 evaluates and sends the metrics to the others. */
saga_status hep_train(hep_run *out, saga_backend *be, const hep_data *d, const hep_train_opts *o,
                      hep_epoch_fn on_epoch, void *user);
