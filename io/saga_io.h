/* saga_io.h - reading graphs, features and labels as people find them, and the .sgr cache.
 *
 *   saga_load_opts o = saga_load_opts_defaults();
 *   o.graph.undirected = true;
 *   saga_graph *g = NULL;
 *   if (saga_graph_load(&g, "soc-Slashdot0902.txt.gz", &o) < 0)
 *       fprintf(stderr, "saga: %s\n", saga_last_error()); // "x.txt.gz:17: expected ..."
 *
 * Formats: SNAP-style edge lists (text or gzip, detected by content), Matrix Market coordinate,
 * METIS graph files, and saga's binary .sgr cache (loaded by mmap). Every malformed input fails
 * with SAGA_ERR_PARSE / SAGA_ERR_CORRUPT / SAGA_ERR_IO and a message naming the file, the line
 * where there is one, and what was expected. Nothing is dropped silently.
 */
#pragma once

#include "saga_graph.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum saga_format {
    SAGA_FORMAT_AUTO = 0, /* .sgr by magic, Matrix Market by its banner, METIS by extension
                             (.graph, .metis), otherwise an edge list */
    SAGA_FORMAT_EDGELIST,
    SAGA_FORMAT_MTX,
    SAGA_FORMAT_METIS,
    SAGA_FORMAT_SGR,
    SAGA_FORMAT_COUNT
} saga_format;

/* Lower-case name ("edgelist", "mtx", "metis", "sgr", "auto"); parse returns -1 if unknown. */
SAGA_API const char *saga_format_name(saga_format f);
SAGA_API int saga_format_parse(const char *s);

typedef enum saga_weights {
    SAGA_WEIGHTS_AUTO = 0, /* use a weight column when the file has one */
    SAGA_WEIGHTS_IGNORE,   /* read it, check it, drop it */
    SAGA_WEIGHTS_REQUIRE,  /* every edge must carry one */
    SAGA_WEIGHTS_COUNT
} saga_weights;

typedef struct saga_load_opts {
    saga_format format;
    saga_weights weights;
    saga_graph_opts graph; /* undirected, self-loops, duplicates */
    /* graph.self_loops was chosen rather than left at its default (`--self-loops keep` given):
     * an .sgr built with its self-loops dropped is then refused instead of loaded as it is. */
    bool self_loops_set;
} saga_load_opts;

SAGA_API saga_load_opts saga_load_opts_defaults(void);

/* Loads a graph from path in any supported format. opts may be NULL. The caller owns *out.
 * saga_graph_build_opts(*out) then tells how the graph was built.
 *
 * Text formats are built with the options. An .sgr holds a graph built already, with the options
 * it records; it is loaded as saga_sgr_load does: each option is applied to it so that the result
 * is what loading the original source with these options would give, or the load is refused with
 * SAGA_ERR_UNSUPPORTED and a message naming the file, what it holds and what was asked. An
 * option is never ignored. */
SAGA_API saga_status saga_graph_load(saga_graph **out, const char *path,
                                     const saga_load_opts *opts);

/* Detects the format of path (reads at most its first few KiB). */
SAGA_API saga_status saga_format_detect(const char *path, saga_format *out);

/* Per-format readers; gzip input is recognised by its magic bytes for the text formats.
 *  - edge list: one edge per line "src dst [weight]", separated by spaces or tabs; lines that
 *    are blank or start with '#' or '%' are skipped; CRLF accepted; ids are any non-negative
 *    integers up to 2^63-1 and are renumbered (see saga_graph.h), originals kept.
 *  - Matrix Market: "%%MatrixMarket matrix coordinate pattern|real|integer general|symmetric";
 *    entry (i, j) becomes the edge i -> j (1-based in the file); symmetric adds j -> i.
 *  - METIS: header "n m [fmt [ncon]]", then one line of 1-based neighbours per vertex; fmt
 *    001 adds edge weights; the graph is undirected, as METIS defines it (2m arcs). */
SAGA_API saga_status saga_edgelist_read(saga_graph **out, const char *path,
                                        const saga_load_opts *opts);
SAGA_API saga_status saga_mtx_read(saga_graph **out, const char *path, const saga_load_opts *opts);
SAGA_API saga_status saga_metis_read(saga_graph **out, const char *path,
                                     const saga_load_opts *opts);

/* ---- .sgr binary cache ------------------------------------------------------------------ *
 * Layout (little endian): a 256-byte header (magic "SAGAGRPH", version, flags, counts, the
 * offset and length of each array, how the graph was built, CRC32 of the header and of each
 * array), then the arrays, each 64-byte aligned: in_offsets, in_src, [in_w], out_offsets,
 * out_dst, [out_w], [orig_ids]. Loading maps the file read-only and verifies sizes, checksums
 * and what the build record promises (symmetric when undirected, no self-loops when dropped, no
 * parallel edges when merged) before use. Format version 2 records the build; version 1 files
 * (without it) still load, their build unknown. */

/* Writes g to path (a temporary file renamed into place), with g's build record
 * (saga_graph_build_opts; "not recorded" when g's is unknown). SAGA_ERR_UNSUPPORTED for a
 * renumbered graph (saga_graph_permute), SAGA_ERR_IO. */
SAGA_API saga_status saga_sgr_write(const saga_graph *g, const char *path);
/* Maps path and returns the graph as stored, with its recorded build. SAGA_ERR_CORRUPT for a
 * file that is damaged or inconsistent, SAGA_ERR_IO. */
SAGA_API saga_status saga_sgr_read(saga_graph **out, const char *path);
/* saga_sgr_read, then the loading options applied (opts may be NULL: the graph as stored). An
 * option left at its default keeps what the file holds (graph.self_loops KEEP only counts as
 * asked for with self_loops_set). Asked-for options are applied as building the file's source
 * with them would: --undirected symmetrizes a directed graph (merging the parallel edges it
 * makes unless duplicates is KEEP) and is a no-op on an undirected one; self-loops DROP removes
 * them; duplicates DROP or SUM merges parallel edges; weights IGNORE drops the weights. The result
 * records the options it now satisfies. Refused with SAGA_ERR_UNSUPPORTED and a message naming
 * the file, what it holds and what was asked: what the file lost when it was made (self-loops
 * KEEP after they were dropped, duplicates KEEP after they were merged, SUM after DROP or the
 * reverse on a weighted graph), weights REQUIRE on a file without them, and undirected, an
 * explicit self-loops KEEP or any duplicates policy on a version 1 file (its build unknown).
 * Untouched, the graph stays mapped; applied options make a copy in memory. */
SAGA_API saga_status saga_sgr_load(saga_graph **out, const char *path, const saga_load_opts *opts);

/* ---- vertex data -------------------------------------------------------------------------- */

typedef enum saga_features_layout {
    SAGA_FEATURES_AUTO = 0, /* sparse when every line is "int int [number]", else dense */
    SAGA_FEATURES_DENSE,    /* one row of numbers per vertex, in vertex order */
    SAGA_FEATURES_SPARSE,   /* "vertex feature [value]" per line, value 1 when absent */
    SAGA_FEATURES_LAYOUT_COUNT
} saga_features_layout;

typedef struct saga_features_opts {
    saga_features_layout layout;
    /* The graph whose vertices the rows belong to: sparse lines name vertices by original id
     * and dense rows come in vertex order; NULL means vertex ids 0..rows-1 as written. */
    const saga_graph *graph;
    int64_t n_cols; /* expected feature count; 0 = infer (max feature index + 1, or row width) */
} saga_features_opts;

SAGA_API saga_features_opts saga_features_opts_defaults(void);

/* Reads a features file into a new row-major float array (*out, n_rows x n_cols, saga_malloc'd,
 * owned by the caller). With a graph, n_rows is its vertex count and rows not mentioned by a
 * sparse file are zero. Text or gzip; '#' and '%' lines are comments. */
SAGA_API saga_status saga_features_read(float **out, int64_t *n_rows, int64_t *n_cols,
                                        const char *path, const saga_features_opts *opts);

/* A feature matrix as its file has it: dense rows, or, for a sparse file, CSR (row v's entries
 * are indices[offsets[v] .. offsets[v + 1]), columns increasing, values beside them). */
typedef struct saga_features {
    int64_t n_rows, n_cols;
    float *dense;     /* n_rows x n_cols row-major; NULL when sparse */
    int64_t nnz;      /* sparse: stored entries (values that are 0 in the file included) */
    int64_t *offsets; /* sparse: n_rows + 1, from 0 */
    int32_t *indices; /* sparse: nnz */
    float *values;    /* sparse: nnz */
} saga_features;

/* Reads a features file as saga_features_read does, but a sparse file stays sparse (*out's
 * CSR, n_rows + 1 offsets even when n_rows is 0), so that a 1% dense matrix costs 1% of the
 * memory. The arrays are saga_malloc'd and owned by *out (saga_features_free). Errors as
 * saga_features_read's; *out is written only on success. */
SAGA_API saga_status saga_features_load(saga_features *out, const char *path,
                                        const saga_features_opts *opts);
/* Frees f's arrays and zeroes it; accepts NULL. */
SAGA_API void saga_features_free(saga_features *f);
/* Makes f dense (rows x cols, zeros where the CSR has no entry); nothing when it is dense.
 * SAGA_ERR_OUT_OF_MEMORY leaves f as it was. */
SAGA_API saga_status saga_features_densify(saga_features *f);
/* What saga_features_normalize_rows did: every row is counted once. */
typedef struct saga_features_norm {
    int64_t n_normalized; /* rows divided by their sum: no negative entry, sum > 0 */
    int64_t n_signed;     /* rows with a negative entry, left as they are */
    int64_t n_zero;       /* rows of zeros, left as they are */
} saga_features_norm;

/* Divides each row whose entries are all non-negative by its sum (Kipf & Welling's preprocessing
 * of bag-of-words features), in either layout; the sums are taken in the same order in both, so
 * a sparse matrix and its dense copy give the same bits. A row with a negative entry is left as
 * it is (dividing signed values by their sum, which may be near 0 or negative, destroys them),
 * and so is a row of zeros. Returns how many rows went which way. */
SAGA_API saga_features_norm saga_features_normalize_rows(saga_features *f);

/* Reads labels: either one integer per line (line i is vertex i; -1 or a blank value means no
 * label) or "vertex label" pairs (vertices named by original id when graph is given). Vertices
 * without a label get -1. *out has *n entries (the graph's vertex count when graph != NULL). */
SAGA_API saga_status saga_labels_read(int32_t **out, int64_t *n, const char *path,
                                      const saga_graph *graph);

/* Reads a list of vertex ids, one per line (e.g. a train/val/test split), mapped through the
 * graph's original ids when graph != NULL and checked to be in range. */
SAGA_API saga_status saga_index_read(int32_t **out, int64_t *n, const char *path,
                                     const saga_graph *graph);

#ifdef __cplusplus
}
#endif
