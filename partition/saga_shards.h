/* saga_shards.h - a graph (and its node-classification data) partitioned once, on one machine,
 * into R shards, one per rank, each a file a rank maps and reads without the rest.
 *
 *   saga_shards_input in = {.graph = g, .features = &f, .labels = y, .n_classes = 7};
 *   saga_shards_opts o = saga_shards_opts_defaults();
 *   o.shards = 4;                                                 // METIS, 1 part per shard
 *   SAGA_TRY(saga_shards_write("cora.shards", &in, &o, &info));   // manifest.txt, shard-*.bin
 *   ...
 *   saga_shard *s = NULL;                                         // on rank r
 *   SAGA_TRY(saga_shard_open(&s, "cora.shards", r, NULL));        // checked, mapped read-only
 *   for (int64_t i = 0; i < s->n_own; i++)                        // own rows, interior first
 *       for (int64_t e = s->in_offsets[i]; e < s->in_offsets[i + 1]; e++)
 *           use(s->in_indices[e]);                                // a local id: own or halo
 *   saga_shard_close(&s);
 *
 * A shard's local rows are its own rows (its contiguous range of the partition's renumbering:
 * first those whose in-neighbours are all its own, the interior, then the boundary, each in
 * renumbered order), then its halo: the other shards' rows with an edge into an own row, grouped
 * by owner, each group in renumbered order. Own row i's in-edges keep the graph's in-CSR order
 * (sources of the original graph ascending, parallel edges in place), so a sum over them runs in
 * the same order as over the whole graph. Shard q's send list to r is its own rows in r's halo
 * group of q, in that group's order: rows sent in that order land where r reads them.
 *
 * The directory holds manifest.txt (text, written last, so a directory whose writing stopped
 * has none: format version, counts, options, method, seed, edge cut, each shard's global row
 * range, halo and file size and header checksum, the feature layout, and each source file's
 * size and CRC-32) and shard-R.bin per shard: a header, then sections aligned to 4 KiB (the
 * mapped arrays are aligned), every 1 MiB chunk of every section with its CRC-32. Counts of
 * edges and entries are 64-bit throughout. Little-endian x86-64 layout.
 */
#pragma once

#include "saga_dataset.h"
#include "saga_io.h"
#include "saga_partition.h"

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum { SAGA_SHARDS_VERSION = 1 };

/* What is partitioned. The arrays are the caller's and are only read. */
typedef struct saga_shards_input {
    const saga_graph *graph;       /* required */
    const saga_features *features; /* NULL: none; else graph's vertex count of rows */
    const int32_t *labels;         /* NULL: none; else a class or -1 per vertex */
    int32_t n_classes;             /* with labels */
    const int32_t *split[3];       /* train, val, test vertex ids (NULL: none) */
    int64_t split_n[3];
    const char *const *sources; /* files the input was read from: their sizes and CRC-32s */
    int32_t n_sources;          /* are recorded, so that a directory older than they is
                                 * refused (saga_shards_check) */
    const char *build;          /* one line: how the sources became this input (recorded) */
    int64_t data_edges;         /* the edges as the data set's reader counts them (undirected,
                                 * each once: saga_dataset.n_edges), recorded; 0: none */
} saga_shards_input;

typedef struct saga_shards_opts {
    int32_t shards;          /* R >= 1 */
    int32_t parts_per_shard; /* the partitioner cuts R x this many parts (1), dealt to the
                              * shards as contiguous ranges balanced by rows plus in-edges */
    saga_partition_opts partition;
} saga_shards_opts;

SAGA_API saga_shards_opts saga_shards_opts_defaults(void);

/* What saga_shards_write did. */
typedef struct saga_shards_info {
    saga_partition_method method; /* FENNEL when METIS could not take the graph */
    int64_t edge_cut;             /* the partition's, over the stored directed edges */
    int64_t halo_min, halo_max;   /* halo rows per shard */
    int64_t bytes_min, bytes_max; /* shard file sizes */
    double partition_seconds, write_seconds;
} saga_shards_info;

/* Partitions in->graph and writes the directory dir (made when missing; its manifest and shard
 * files replaced). info may be NULL. Errors: SAGA_ERR_INVALID_ARG (no graph, R < 1 or above the
 * vertex count, a feature, label or split array that does not match the graph), SAGA_ERR_IO
 * (naming the file), SAGA_ERR_OUT_OF_MEMORY. */
SAGA_API saga_status saga_shards_write(const char *dir, const saga_shards_input *in,
                                       const saga_shards_opts *o, saga_shards_info *info);

/* The manifest: what every rank reads before its shard. */
typedef struct saga_shards_manifest {
    int32_t version;
    int64_t n_vertices, n_edges; /* the whole graph's */
    int64_t data_edges;          /* saga_shards_input.data_edges, or 0 when not recorded */
    int32_t symmetric; /* 1: every edge's reverse is an edge too (saga_graph_is_symmetric), 0:
                        * not, -1: not recorded */
    bool weighted;
    int32_t n_shards, parts_per_shard;
    saga_partition_method method;
    uint64_t seed;
    int64_t edge_cut;
    int64_t feature_cols; /* 0: no features */
    int64_t feature_nnz;  /* -1: dense */
    int32_t n_classes;    /* 0: no labels */
    int64_t split_n[3];   /* whole-graph counts */
    int64_t *row0;        /* n_shards + 1: shard r owns renumbered rows [row0[r], row0[r+1]) */
    int64_t *halo;        /* n_shards */
    int64_t *file_bytes;  /* n_shards */
    uint32_t *header_crc; /* n_shards */
    char build[512];
    int32_t n_sources;
    char (*source_path)[4096];
    int64_t *source_bytes;
    uint32_t *source_crc;
} saga_shards_manifest;

/* Reads dir/manifest.txt into *m (saga_shards_manifest_free). Errors: SAGA_ERR_IO (no manifest:
 * not a shard directory, or one whose writing did not finish), SAGA_ERR_PARSE (naming the line,
 * or a version this build does not read), SAGA_ERR_OUT_OF_MEMORY. */
SAGA_API saga_status saga_shards_manifest_read(saga_shards_manifest *m, const char *dir);
SAGA_API void saga_shards_manifest_free(saga_shards_manifest *m);
/* SAGA_OK when m (dir's) holds a shard for each of `ranks` ranks, else SAGA_ERR_INVALID_ARG
 * naming both counts and how to match them. */
SAGA_API saga_status saga_shards_for_ranks(const saga_shards_manifest *m, const char *dir,
                                           int32_t ranks);

/* One rank's shard, mapped read-only. Local ids: own rows 0 .. n_own - 1 (the interior
 * 0 .. n_interior - 1), halo rows n_own .. n_own + n_halo - 1. */
typedef struct saga_shard {
    int32_t rank, n_shards;
    int64_t n_vertices, n_edges; /* the whole graph's */
    int64_t row0;                /* own rows are renumbered rows row0 .. row0 + n_own - 1 */
    int64_t n_own, n_interior, n_halo, n_local;
    int64_t nnz;                    /* in-edges of the own rows */
    const int64_t *in_offsets;      /* n_own + 1 */
    const int32_t *in_indices;      /* nnz local ids */
    const float *in_weights;        /* nnz, or NULL when the graph is unweighted */
    const int64_t *global_id;       /* n_local: the renumbered id (owner r's rows are row0[r]..) */
    const int64_t *orig_id;         /* n_local: the id of the input files */
    const int32_t *vertex;          /* n_local: the vertex's index in the input graph (the
                                     * row one process gives it: dropout's mask rows) */
    const int64_t *out_degree;      /* n_local: out-edges in the whole graph */
    const int64_t *halo_offsets;    /* n_shards + 1: owner q's halo rows are local ids
                                     * n_own + halo_offsets[q] .. n_own + halo_offsets[q+1] - 1 */
    const int64_t *send_offsets;    /* n_shards + 1 */
    const int32_t *send_rows;       /* own local ids sent to q: send_offsets[q] .. [q+1] - 1 */
    int64_t feature_cols;           /* 0: none */
    const float *features;          /* dense: n_own x feature_cols, in local order; else NULL */
    int64_t feature_nnz;            /* sparse: */
    const int64_t *feature_offsets; /* n_own + 1 */
    const int32_t *feature_indices; /* feature_nnz columns */
    const float *feature_values;    /* feature_nnz */
    int32_t n_classes;
    const int32_t *labels;   /* n_own, or NULL */
    const int32_t *split[3]; /* own local ids in train, val, test, in the lists' order */
    int64_t split_n[3];
    void *map; /* the mapping */
    size_t map_bytes;
    char path[4096];
} saga_shard;

typedef struct saga_shard_open_opts {
    bool verify; /* every chunk's CRC-32 read and compared (true) */
} saga_shard_open_opts;

SAGA_API saga_shard_open_opts saga_shard_open_opts_defaults(void);

/* Maps shard `rank` of dir and checks it against the manifest (its size and header), its header,
 * every chunk's CRC-32 (unless opts->verify is false) and its structure (offsets, ids, owners,
 * labels in range), so that a damaged or mixed-up directory is refused, naming the file and what
 * is wrong. A source file of the manifest that still exists with another size makes the
 * directory stale: refused. Errors: SAGA_ERR_IO, SAGA_ERR_PARSE, SAGA_ERR_INVALID_ARG (rank out
 * of range), SAGA_ERR_OUT_OF_MEMORY. */
SAGA_API saga_status saga_shard_open(saga_shard **out, const char *dir, int32_t rank,
                                     const saga_shard_open_opts *opts);
SAGA_API void saga_shard_close(saga_shard **s);

/* Gives back the resident pages of s's mapping, for a caller that has copied what it reads (a net
 * over shards copies the halo layout it is given: saga_net_new): they stop counting in its
 * memory, and a later read faults them in again from the file. Advisory; NULL is ignored. */
SAGA_API void saga_shard_release_pages(const saga_shard *s);

/* Shard s's local graph: n_local vertices (the own rows, then the halo), the own rows' in-edges
 * in the shard's order (duplicates kept; the halo has none), unweighted. Errors:
 * SAGA_ERR_INVALID_ARG, SAGA_ERR_OUT_OF_MEMORY. */
SAGA_API saga_status saga_shard_graph(const saga_shard *s, saga_graph **out);

/* Rank `rank`'s shard of the directory dir (of as many shards as `ranks`, else
 * SAGA_ERR_INVALID_ARG naming both counts) as the data set a rank trains on, in saga_dataset's
 * terms: the local graph (own rows 0 .. n_own - 1 with their in-edges in the shard's order, then
 * the halo without in-edges; n_vertices the local rows, n_edges the in-edges), the features (the
 * halo's rows empty), the labels (the halo's -1), n_classes, and the split (own rows). *shard
 * gets the mapped shard (saga_shard_close after the data set's last use): its halo layout is
 * what a net over shards exchanges (saga_net_halo). Errors: saga_shard_open's,
 * SAGA_ERR_INVALID_ARG for shards without features, labels or training rows. */
SAGA_API saga_status saga_shards_dataset(saga_dataset *out, saga_shard **shard, const char *dir,
                                         int32_t rank, int32_t ranks);

/* Checks a whole directory: the manifest, every shard as saga_shard_open does, the send lists
 * against the halos they fill, and every source file that still exists against its recorded
 * size and CRC-32 (a missing one is skipped and counted). */
SAGA_API saga_status saga_shards_check(const char *dir, int32_t *sources_missing);

#ifdef __cplusplus
}
#endif
