/* saga_dataset.h - a node-classification data set read from a directory in the layout of the
 * Planetoid Cora files, checked, with its features optionally row-normalised.
 *
 *   saga_dataset d;
 *   saga_dataset_opts o = saga_dataset_opts_defaults();   // normalise non-negative rows
 *   if (saga_dataset_load(&d, "datasets/cora", &o) < 0)
 *       fprintf(stderr, "saga: %s\n", saga_last_error()); // "cora/labels.txt:12: label 99 ..."
 *   printf("%lld vertices, %d classes, %lld training vertices\n", (long long)d.n_vertices,
 *          d.n_classes, (long long)d.n_train);
 *   saga_dataset_free(&d);
 *
 * The directory holds
 *   edges.txt[.gz]    "u v" per line, 0-based vertex ids, read as undirected (self-loops dropped)
 *   features.txt[.gz] sparse "vertex feature [value]" lines (kept sparse) or one dense row of
 *                     numbers per vertex; '#' and '%' lines are comments
 *   labels.txt        line i = class of vertex i, -1 (or a blank line) for none
 *   classes.txt       optional: "index name" per class, indices 0..C-1 each once
 *   train_idx.txt, val_idx.txt, test_idx.txt   one vertex per line
 * (what `saga generate citation` writes). The number of labels fixes the vertex count; vertices
 * without edges are kept.
 *
 * Checks (errors name the file, and the line where there is one):
 *  - a dense features file has exactly one row per vertex: fewer rows is an error naming both
 *    counts (a sparse file may end before the last vertices: they have no features);
 *  - with classes.txt every label is below its class count, and n_classes is that count;
 *    without it n_classes is the largest label + 1;
 *  - split vertices are vertices with a label; the training list is not empty.
 * Warnings (saga_log, level warn) for classes no vertex has and for vertices listed in more
 * than one of train / val / test; the counts are kept in the result as well.
 *
 * Row normalisation (Kipf & Welling's preprocessing of bag-of-words features) divides a row by
 * its sum only when every entry of the row is non-negative: dividing a signed row (e.g.
 * Gaussian features) by a sum that may be near zero or negative would destroy it, so such rows
 * are left as read and counted.
 */
#pragma once

#include "saga_graph.h"
#include "saga_io.h"

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A node-classification data set on the host, in the layout of the Planetoid Cora files. */
typedef struct saga_dataset {
    saga_graph *graph;           /* undirected, no self-loops; vertex i is row i of the features */
    int64_t n_vertices;          /* the number of labels */
    int64_t n_edges;             /* undirected edges, each counted once */
    saga_features features;      /* n_vertices rows, dense or CSR as read (io/saga_io.h) */
    int32_t *labels;             /* n_vertices; -1 for a vertex without a label */
    int32_t n_classes;           /* classes.txt's count when present, else the largest label + 1 */
    int32_t *train, *val, *test; /* vertex ids, as listed */
    int64_t n_train, n_val, n_test;
    bool has_classes_file;   /* n_classes came from classes.txt */
    int32_t n_empty_classes; /* classes no vertex is labelled with (warned) */
    int64_t n_split_overlap; /* vertices listed in more than one of train/val/test (warned) */
    saga_features_norm norm; /* what the row normalisation did (all 0 when not asked for) */
} saga_dataset;

typedef struct saga_dataset_opts {
    bool normalize_features; /* divide each non-negative feature row by its sum (true) */
} saga_dataset_opts;

SAGA_API saga_dataset_opts saga_dataset_opts_defaults(void);

/* Reads and checks the data set in dir (see the top of this file); opts NULL means the
 * defaults. On success *out holds the data set (saga_dataset_free); on failure *out is zeroed
 * and holds nothing. Errors: SAGA_ERR_IO for a missing directory or file (naming it),
 * SAGA_ERR_PARSE for malformed content, ids out of range, too few dense feature rows or a label
 * beyond classes.txt, SAGA_ERR_OUT_OF_MEMORY, SAGA_ERR_INVALID_ARG for NULL arguments. */
SAGA_API saga_status saga_dataset_load(saga_dataset *out, const char *dir,
                                       const saga_dataset_opts *opts);

/* Frees what d holds and zeroes it; accepts NULL. */
SAGA_API void saga_dataset_free(saga_dataset *d);

#ifdef __cplusplus
}
#endif
