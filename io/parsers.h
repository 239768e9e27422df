/* parsers.h - the format parsers on an open reader, behind the path-taking functions of
 * saga_io.h; the fuzz targets call these directly on memory. Internal to saga. */
#pragma once

#include "reader.h"
#include "saga_io.h"

/* Each takes ownership of r (closed on return, success or not). opts may be NULL. */
saga_status saga_edgelist_parse(saga_graph **out, saga_reader *r, const saga_load_opts *opts);
saga_status saga_mtx_parse(saga_graph **out, saga_reader *r, const saga_load_opts *opts);
saga_status saga_metis_parse(saga_graph **out, saga_reader *r, const saga_load_opts *opts);
saga_status saga_features_parse(float **out, int64_t *n_rows, int64_t *n_cols, saga_reader *r,
                                const saga_features_opts *opts);
saga_status saga_features_parse_any(saga_features *out, saga_reader *r,
                                    const saga_features_opts *opts);
saga_status saga_labels_parse(int32_t **out, int64_t *n, saga_reader *r, const saga_graph *graph);
saga_status saga_index_parse(int32_t **out, int64_t *n, saga_reader *r, const saga_graph *graph);

/* Validates and loads an .sgr image held in memory (copied into a fresh graph). */
saga_status saga_sgr_parse_mem(saga_graph **out, const char *name, const void *data, size_t len);
