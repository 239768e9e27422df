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
saga_rmat_params saga_rmat_params_defaults(void);

/* Generates the edge arrays (saga_malloc'd; the caller owns them). Self-loops and duplicate edges
 * are kept as drawn. */
saga_status saga_rmat_edges(int32_t **src, int32_t **dst, int64_t *n_edges, int32_t *n_vertices,
                            const saga_rmat_params *p);
/* Generates a graph; opts as for saga_graph_from_edges (NULL = defaults). */
saga_status saga_rmat_graph(saga_graph **out, const saga_rmat_params *p,
                            const saga_graph_opts *opts);
/* Writes the edges as a text edge list ("src dst" per line, a '#' header naming the parameters),
 * gzip-compressed when path ends in ".gz". */
saga_status saga_rmat_write(const char *path, const saga_rmat_params *p);

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
saga_citation_params saga_citation_params_defaults(void);

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
saga_status saga_citation_generate(saga_citation **out, const saga_citation_params *p);
/* Frees the arrays and *c; *c becomes NULL. Accepts NULL. */
void saga_citation_free(saga_citation **c);
/* The undirected graph (both directions of every edge), vertices 0..n-1; opts' undirected flag
 * is forced on (NULL = defaults). The caller owns *out. */
saga_status saga_citation_graph(saga_graph **out, const saga_citation *c,
                                const saga_graph_opts *opts);
/* The features as a dense row-major n_vertices x n_features f32 array of 0/1 (saga_malloc'd,
 * owned by the caller). */
saga_status saga_citation_features(float **out, const saga_citation *c);
/* Writes the data set to dir (created when missing; existing files are replaced) in the layout
 * of the bundled Cora: edges.txt.gz ("u v", u < v, sorted), features.txt.gz ("vertex feature"),
 * labels.txt (line i = class of vertex i), classes.txt, train_idx.txt, val_idx.txt,
 * test_idx.txt, and README.md naming the parameters. Each file is written to NAME.tmp and
 * renamed. Same data set, same bytes. Errors: SAGA_ERR_IO naming the file. */
saga_status saga_citation_write(const saga_citation *c, const char *dir);

#ifdef __cplusplus
}
#endif
