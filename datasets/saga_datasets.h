/* saga_datasets.h - deterministic synthetic graphs: R-MAT (Graph500 parameters by default) and
 * a citation-like graph with classes, features and a split for node classification.
 *
 *   saga_rmat_params p = saga_rmat_params_defaults();
 *   p.scale = 16;                    // 65,536 vertices
 *   p.edge_factor = 16;              // 1,048,576 edges
 *   saga_graph *g = NULL;
 *   SAGA_TRY(saga_rmat_graph(&g, &p, NULL));
 *
 *   saga_citation_params cp = saga_citation_params_defaults();   // Cora-sized
 *   cp.n_vertices = 20000;
 *   saga_citation *cit = NULL;
 *   SAGA_TRY(saga_citation_generate(&cit, &cp));
 *   SAGA_TRY(saga_citation_write(cit, "datasets/generated/citation-20k"));
 *   saga_citation_free(&cit);
 *
 * The same parameters and seed give the same edges on every machine and thread count.
 */
#pragma once

#include "saga_graph.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct saga_rmat_params {
    int scale;       /* 2^scale vertices, 1..30 */
    int edge_factor; /* edges = edge_factor * 2^scale */
    double a, b, c;  /* quadrant probabilities; d = 1 - a - b - c */
    uint64_t seed;
    bool scramble; /* permute vertex ids so that degree is not correlated with id */
} saga_rmat_params;

/* scale 16, edge factor 16, a=0.57 b=0.19 c=0.19, seed 1, scrambled. */
SAGA_API saga_rmat_params saga_rmat_params_defaults(void);

/* Generates the edge arrays (saga_malloc'd; the caller owns them). Self-loops and duplicate edges
 * are kept as drawn. */
SAGA_API saga_status saga_rmat_edges(int32_t **src, int32_t **dst, int64_t *n_edges,
                                     int32_t *n_vertices, const saga_rmat_params *p);
/* Generates a graph; opts as for saga_graph_from_edges (NULL = defaults). */
SAGA_API saga_status saga_rmat_graph(saga_graph **out, const saga_rmat_params *p,
                                     const saga_graph_opts *opts);
/* Writes the edges as a text edge list ("src dst" per line, a '#' header naming the parameters),
 * gzip-compressed when path ends in ".gz". */
SAGA_API saga_status saga_rmat_write(const char *path, const saga_rmat_params *p);

/* ---- citation graph ----------------------------------------------------------------------- *
 * A degree-corrected stochastic block model with bag-of-words features, shaped like the
 * Planetoid citation graphs (Cora, CiteSeer, PubMed) so that a GCN has something to learn:
 *  - labels: each vertex draws its class from mildly unequal class sizes;
 *  - degrees: each vertex has a propensity drawn from a power law (capped); every vertex first
 *    gets one edge of its own, the rest pick their first end in proportion to the propensity;
 *  - edges: the second end is, with probability `homophily`, a vertex of the same class, else
 *    one of another class, chosen in proportion to the propensity; self-loops and repeated pairs
 *    are redrawn, so the graph is simple and has exactly round(n * avg_degree / 2) edges;
 *  - features: each class owns a share of the vocabulary with Zipf-distributed word weights (its
 *    topic); a vertex draws about words_per_vertex words, a topic_share of them from its class's
 *    topic and the rest from a Zipf background shared by all classes; features are binary;
 *  - split: train_per_class vertices of every class, then n_val and n_test others, disjoint,
 *    chosen in a seeded random order; capped so that small graphs keep vertices for all three.
 * The draws are serial and counter-based, so the result depends only on the parameters. */

typedef struct saga_citation_params {
    int32_t n_vertices;       /* at least 2 * n_classes */
    int32_t n_classes;        /* 2..1024 */
    double avg_degree;        /* mean degree; edges = round(n_vertices * avg_degree / 2) */
    int32_t n_features;       /* vocabulary size, at least n_classes */
    double homophily;         /* fraction of edges inside one class, in [0, 1] */
    double degree_exponent;   /* power-law exponent of the degree propensities, > 1 */
    int32_t words_per_vertex; /* mean number of words drawn per vertex (repeats merge) */
    double topic_share;       /* fraction of the words drawn from the class topic, in [0, 1] */
    int32_t train_per_class;  /* Planetoid: 20 */
    int32_t n_val, n_test;    /* Planetoid: 500, 1000 */
    uint64_t seed;
} saga_citation_params;

/* Cora's shape: 2708 vertices, 7 classes, mean degree 3.9, 1433 words; homophily 0.8, degree
 * exponent 2.5, 20 words per vertex, topic share 0.15, split 20 per class / 500 / 1000, seed 1. */
SAGA_API saga_citation_params saga_citation_params_defaults(void);

/* A generated data set. Plain data, every array saga_malloc'd and owned by the struct. */
typedef struct saga_citation {
    saga_citation_params params; /* as given */
    int32_t n_vertices, n_classes, n_features;
    int64_t n_edges;          /* undirected edges, each once with u < v, sorted by (u, v) */
    int32_t *edge_u, *edge_v; /* n_edges each */
    int64_t *feat_offsets;    /* n_vertices + 1: vertex v's words are feat_index[offsets[v] ..] */
    int32_t *feat_index;      /* ascending within a vertex; every vertex has at least one */
    int32_t *labels;          /* n_vertices, 0..n_classes-1 */
    int32_t *train, *val, *test; /* ascending vertex ids, disjoint */
    int32_t n_train, n_val, n_test;
} saga_citation;

/* Generates a data set; the caller owns *out (saga_citation_free). Errors: SAGA_ERR_INVALID_ARG
 * for parameters out of range (naming the parameter) or more edges than half of all vertex
 * pairs; SAGA_ERR_OUT_OF_MEMORY. */
SAGA_API saga_status saga_citation_generate(saga_citation **out, const saga_citation_params *p);
/* Frees the arrays and *c; *c becomes NULL. Accepts NULL. */
SAGA_API void saga_citation_free(saga_citation **c);
/* The undirected graph (both directions of every edge), vertices 0..n-1; opts' undirected flag
 * is forced on (NULL = defaults). The caller owns *out. */
SAGA_API saga_status saga_citation_graph(saga_graph **out, const saga_citation *c,
                                         const saga_graph_opts *opts);
/* The features as a dense row-major n_vertices x n_features f32 array of 0/1 (saga_malloc'd,
 * owned by the caller). */
SAGA_API saga_status saga_citation_features(float **out, const saga_citation *c);
/* Writes the data set to dir (created when missing; existing files are replaced) in the layout
 * of the bundled Cora: edges.txt.gz ("u v", u < v, sorted), features.txt.gz ("vertex feature"),
 * labels.txt (line i = class of vertex i), classes.txt, train_idx.txt, val_idx.txt,
 * test_idx.txt, and README.md naming the parameters. Each file is written to NAME.tmp and
 * renamed. Same data set, same bytes. Errors: SAGA_ERR_IO naming the file. */
SAGA_API saga_status saga_citation_write(const saga_citation *c, const char *dir);

/* ---- collision events in the layout of the TrackML challenge ----------------------------- *
 * The detector of the TrackML challenge in a 2 T solenoid field along z, 48 sensitive layers:
 * - barrel cylinders: four pixel layers (volume 8, layers 2/4/6/8: radii 32, 72, 116, 172 mm,
 *   half-length 500 mm, smearing 0.05 mm in r-phi and z), four short-strip layers (volume 13:
 *   260, 360, 500, 660 mm, half-length 1100 mm, 0.08 mm in r-phi, 0.5 mm in z) and two
 *   long-strip layers (volume 17: 820, 1020 mm, half-length 1100 mm, 0.08 mm / 1.0 mm);
 * - end-cap disks at negative / positive z: pixel volumes 7 / 9, seven disks each at |z| = 600,
 *   700, 820, 960, 1100, 1300, 1500 mm for r in [30, 176] mm (0.05 mm in r-phi and r); short
 *   strips 12 / 14, six disks at |z| = 1220, 1500, 1800, 2150, 2550, 2950 mm for r in [240, 700]
 *   (0.08 mm in r-phi, 0.5 mm in r); long strips 16 / 18 at the same |z| for r in [750, 1020]
 *   (0.08 mm, 1.0 mm). Disk layer ids are 2, 4, ... in order of increasing z, as in the
 *   challenge's files (volume 7 layer 2 is the disk at z = -1500 mm, volume 9 layer 2 at +600).
 * Material (silicon and its support, X0 = 95.7 mm) at normal incidence: 1.2% of a radiation
 * length per pixel layer or disk, 1.6% per strip layer or disk.
 *
 * An event draws log-uniformly between min_particles and max_particles charged particles
 * (charge +-1 with equal odds, pion mass) from a beam spot (Gaussian: 0.015 mm in x and y, 55 mm
 * in z) with eta flat in |eta| < eta_max, phi flat, and pT from a falling spectrum: with
 * probability 1 - tail_fraction, pt_min plus an exponential of mean soft_pt_mean; otherwise a
 * power law dN/dpT ~ pT^-3 above 1 GeV, capped at 100 GeV. Each particle follows its helix
 * (radius R[m] = pT[GeV] / (0.3 B[T])) outwards from surface to surface for at most half a turn;
 * where it crosses a layer inside the layer's bounds it leaves a hit (with probability
 * hit_efficiency; with probability doubled_fraction a second one on the overlapping module,
 * 2 mm further along its path) and, when material > 0, scatters: its direction turns by two
 * independent Gaussian angles of width theta0 (Highland's formula for the layer's thickness along
 * the path, times material) about two axes normal to it. No energy loss. Noise hits,
 * noise_fraction times the particle hits, fall uniformly over the layers' areas (with endcaps
 * false, on a layer drawn by count). With endcaps false only the barrel's ten layers exist, and
 * with material 0, hit_efficiency 1 and doubled_fraction 0 as well the events are, to the byte,
 * those of the barrel-only generator without these effects. Hits are ordered by layer, module and phi and numbered from 1; noise hits have
 * particle_id 0. The draws of event k depend only on (seed, k). */

enum { SAGA_TRACKML_N_BARREL = 10, SAGA_TRACKML_N_LAYERS = 48 };

typedef struct saga_trackml_params {
    int32_t min_particles, max_particles; /* per event, drawn log-uniformly: 100, 3000 */
    double bfield;                        /* tesla: 2 */
    double eta_max;                       /* 2.5 */
    double pt_min;                        /* GeV, the softest particle: 0.2 */
    double soft_pt_mean;                  /* GeV, mean of the exponential above pt_min: 0.35 */
    double tail_fraction;                 /* share of the power-law tail above 1 GeV: 0.15 */
    double noise_fraction;                /* noise hits per particle hit: 0.1 */
    uint64_t seed;                        /* 1 */
    bool endcaps;                         /* the end-cap disks too (true) or the barrel alone */
    double material;         /* scale of each layer's material for scattering (1; 0: none) */
    double hit_efficiency;   /* chance that a crossing leaves a hit (0.98) */
    double doubled_fraction; /* chance of a second hit on an overlapping module (0.1) */
} saga_trackml_params;

SAGA_API saga_trackml_params saga_trackml_params_defaults(void);

/* One event: the hits, their truth and the particles, as the three TrackML files hold them.
 * Plain data; every array saga_malloc'd and owned by the struct. Columns a file read did not
 * have are NULL (module_id, the truth's t* columns and weight, the particles' v*, q, nhits). */
typedef struct saga_trackml_event {
    int64_t event_id;
    int64_t n_hits;
    int64_t *hit_id;
    float *x, *y, *z; /* mm */
    int32_t *volume_id, *layer_id, *module_id;
    /* truth, per hit (row i is hit i of the hits file, matched by hit_id) */
    int64_t *particle_id;                  /* 0: noise */
    float *tx, *ty, *tz, *tpx, *tpy, *tpz; /* the true position and momentum (GeV) */
    float *weight;
    /* particles */
    int64_t n_particles;
    int64_t *p_id;
    float *vx, *vy, *vz, *px, *py, *pz;
    int32_t *q, *nhits;
} saga_trackml_event;

/* Generates event event_id; the caller owns *out (saga_trackml_event_free). Errors:
 * SAGA_ERR_INVALID_ARG naming a parameter out of range; SAGA_ERR_OUT_OF_MEMORY. */
SAGA_API saga_status saga_trackml_generate(saga_trackml_event **out, const saga_trackml_params *p,
                                           int64_t event_id);
/* Frees the arrays and *e; *e becomes NULL. Accepts NULL. */
SAGA_API void saga_trackml_event_free(saga_trackml_event **e);
/* Writes DIR/eventNNNNNNNNN-hits.csv.gz (hit_id,x,y,z,volume_id,layer_id,module_id),
 * -truth.csv.gz (hit_id,particle_id,tx,ty,tz,tpx,tpy,tpz,weight) and -particles.csv.gz
 * (particle_id,vx,vy,vz,px,py,pz,q,nhits), each through NAME.tmp and a rename; DIR must exist.
 * Same event, same bytes. The event needs every column. Errors: SAGA_ERR_IO naming the file,
 * SAGA_ERR_INVALID_ARG for an event without the truth or particle columns. */
SAGA_API saga_status saga_trackml_write(const saga_trackml_event *e, const char *dir);
/* Reads PREFIX-hits.csv[.gz], PREFIX-truth.csv[.gz] and PREFIX-particles.csv[.gz] (PREFIX e.g.
 * "dir/event000000010"; plain or gzip, told apart by content): columns are found by their
 * header names, extra columns are ignored, so the files of the TrackML challenge read as they
 * are. Needed: hit_id, x, y, z, volume_id, layer_id; hit_id, particle_id; particle_id, px, py,
 * pz. Truth rows may come in any order but must name every hit once. The event id is the number
 * after "event" in the prefix's last component (0 when there is none). Errors: SAGA_ERR_IO
 * naming a missing file; SAGA_ERR_PARSE as "FILE:LINE: expected ..., found ..." for a missing
 * column, a bad number, a wrong field count, an unknown or repeated hit_id; SAGA_ERR_CORRUPT
 * for a truncated or corrupt gzip stream. */
SAGA_API saga_status saga_trackml_read(saga_trackml_event **out, const char *prefix);
/* The event prefixes in dir ("dir/eventNNN" for every eventNNN-hits.csv[.gz]), sorted by name;
 * *prefixes is an array of n strings, all freed by saga_trackml_list_free. No event is not an
 * error (n = 0). Errors: SAGA_ERR_IO naming dir. */
SAGA_API saga_status saga_trackml_list(char ***prefixes, int64_t *n, const char *dir);
SAGA_API void saga_trackml_list_free(char ***prefixes, int64_t n);

/* One sensitive layer of the detector: a barrel cylinder at radius r_min = r_max for z in
 * [z_min, z_max], or an end-cap disk at z_min = z_max for r in [r_min, r_max] (mm). */
typedef struct saga_trackml_layer {
    int32_t volume_id, layer_id; /* the challenge's ids */
    bool disk;
    double r_min, r_max, z_min, z_max;
    double sigma_rphi; /* hit smearing in r-phi (mm) */
    double sigma_long; /* and along the layer's length: z on a cylinder, r on a disk (mm) */
    double x0_frac;    /* material at normal incidence, in radiation lengths */
} saga_trackml_layer;

/* The layer index (0 .. SAGA_TRACKML_N_LAYERS-1) of a TrackML (volume_id, layer_id): the barrel
 * first, innermost first (volume 8 layers 2/4/6/8, 13 layers 2/4/6/8, 17 layers 2/4: 0 .. 9),
 * then the disks of volumes 7, 9, 12, 14, 16, 18 in that order, each by layer id; -1 for any
 * other pair. */
SAGA_API int saga_trackml_layer_index(int32_t volume_id, int32_t layer_id);
/* Layer i, or NULL when i is out of range. */
SAGA_API const saga_trackml_layer *saga_trackml_layer_at(int i);
/* Whether volume_id is one of TrackML's end-caps: 7/9 (pixel), 12/14 (short strips), 16/18
 * (long strips), negative / positive z. */
SAGA_API bool saga_trackml_is_endcap(int32_t volume_id);
/* Of barrel layer i (0 .. SAGA_TRACKML_N_BARREL-1; NAN for any other i): the radius and
 * half-length in z (mm), the hit smearing in r-phi and in z (mm). */
SAGA_API double saga_trackml_layer_radius(int i);
SAGA_API double saga_trackml_layer_half_length(int i);
SAGA_API double saga_trackml_layer_sigma_rphi(int i);
SAGA_API double saga_trackml_layer_sigma_z(int i);

#ifdef __cplusplus
}
#endif
