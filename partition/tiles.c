/* tiles.c - the 2-D edge tiles (source part x destination part) of a renumbered graph that a
 * streaming executor moves to the device one at a time, and the choice of k that makes one
 * step of that stream fit a memory budget. */
#include "saga_partition.h"

#include <stdint.h>
#include <string.h>

/* Frees the tiles, their arrays and the offsets copy; accepts NULL. */
void saga_tiles_free(saga_tiles **t) {
    if (!t || !*t)
        return;
    if ((*t)->tiles)
        for (int64_t i = 0; i < (*t)->n_tiles; i++) {
            saga_free((*t)->tiles[i].offsets);
            saga_free((*t)->tiles[i].indices);
            saga_free((*t)->tiles[i].weights);
        }
    saga_free((*t)->tiles);
    saga_free((*t)->part_offsets);
    saga_free(*t);
    *t = NULL;
}

/* Cuts g's in-CSR into the non-empty tiles, destination part by destination part: one pass to
 * count every tile's edges, then per destination part one pass to fill its tiles. Rows are
 * visited in order and each edge appended to its source part's tile, so every row of every
 * tile keeps the in-CSR order. */
saga_status saga_tiles_build(saga_tiles **out, const saga_graph *g, const int64_t *part_offsets,
                             int32_t n_parts) {
    saga_status st = SAGA_OK;
    saga_tiles *t = NULL;
    int32_t *part = NULL;  /* vertex -> part */
    int64_t *count = NULL; /* n_parts: edges from each source part into the current part */
    int64_t *slot = NULL;  /* n_parts: index of the current part's tile from each source part */

    /* ---- check inputs */
    SAGA_CHECK(out && g && part_offsets, SAGA_ERR_INVALID_ARG,
               "saga_tiles_build: out, graph and part offsets are required");
    SAGA_CHECK(n_parts >= 1, SAGA_ERR_INVALID_ARG,
               "tiles: the number of parts must be at least 1, got %d", (int)n_parts);
    int32_t n = saga_graph_n_vertices(g);
    SAGA_CHECK(part_offsets[0] == 0 && part_offsets[n_parts] == n, SAGA_ERR_INVALID_ARG,
               "tiles: part offsets must run from 0 to %d vertices, got %lld..%lld", (int)n,
               (long long)part_offsets[0], (long long)part_offsets[n_parts]);
    for (int32_t q = 0; q < n_parts; q++)
        SAGA_CHECK(part_offsets[q] <= part_offsets[q + 1], SAGA_ERR_INVALID_ARG,
                   "tiles: part offsets decrease at part %d (%lld > %lld)", (int)q,
                   (long long)part_offsets[q], (long long)part_offsets[q + 1]);
    saga_csr in = saga_graph_in(g);

    /* ---- initialize */
    SAGA_TRY(saga_alloc_zeroed((void **)&t, 1, sizeof *t, "tiles"));
    t->n_parts = n_parts;
    SAGA_TRY(saga_alloc_array((void **)&t->part_offsets, (size_t)n_parts + 1,
                              sizeof *t->part_offsets, "tile part offsets"));
    memcpy(t->part_offsets, part_offsets, ((size_t)n_parts + 1) * sizeof *part_offsets);
    SAGA_TRY(saga_alloc_array((void **)&part, (size_t)n + 1, sizeof *part, "vertex parts"));
    SAGA_TRY(saga_alloc_zeroed((void **)&count, (size_t)n_parts, sizeof *count, "tile counts"));
    SAGA_TRY(saga_alloc_array((void **)&slot, (size_t)n_parts, sizeof *slot, "tile slots"));
    for (int32_t q = 0; q < n_parts; q++)
        for (int64_t v = part_offsets[q]; v < part_offsets[q + 1]; v++)
            part[v] = q;

    /* ---- count the non-empty tiles, to allocate the list once */
    int64_t n_tiles = 0;
    for (int32_t s = 0; s < n_parts; s++)
        slot[s] = -1; /* here: the last destination part that saw source part s */
    for (int32_t d = 0; d < n_parts; d++)
        for (int64_t v = part_offsets[d]; v < part_offsets[d + 1]; v++)
            for (int64_t j = in.offsets[v]; j < in.offsets[v + 1]; j++) {
                int32_t s = part[in.indices[j]];
                if (slot[s] != d) {
                    slot[s] = d;
                    n_tiles++;
                }
            }
    if (n_tiles > 0)
        SAGA_TRY(
            saga_alloc_zeroed((void **)&t->tiles, (size_t)n_tiles, sizeof *t->tiles, "tile list"));

    /* ---- fill, one destination part at a time */
    for (int32_t d = 0; d < n_parts; d++) {
        int64_t lo = part_offsets[d], hi = part_offsets[d + 1];
        int32_t rows = (int32_t)(hi - lo);
        for (int64_t v = lo; v < hi; v++)
            for (int64_t j = in.offsets[v]; j < in.offsets[v + 1]; j++)
                count[part[in.indices[j]]]++;
        int64_t first = t->n_tiles;
        for (int32_t s = 0; s < n_parts; s++) {
            slot[s] = -1;
            if (count[s] == 0)
                continue;
            /* n_tiles grows only once the tile's arrays exist, so saga_tiles_free on failure
             * frees exactly the tiles that were started */
            saga_tile *x = &t->tiles[t->n_tiles];
            *x = (saga_tile){.src_part = s, .dst_part = d, .n_rows = rows, .nnz = count[s]};
            t->n_tiles++;
            SAGA_TRY(saga_alloc_array((void **)&x->offsets, (size_t)rows + 1, sizeof *x->offsets,
                                      "tile offsets"));
            SAGA_TRY(saga_alloc_array((void **)&x->indices, (size_t)x->nnz, sizeof *x->indices,
                                      "tile indices"));
            if (in.weights)
                SAGA_TRY(saga_alloc_array((void **)&x->weights, (size_t)x->nnz, sizeof *x->weights,
                                          "tile weights"));
            x->bytes = ((size_t)rows + 1) * sizeof *x->offsets +
                       (size_t)x->nnz * (sizeof *x->indices + (in.weights ? sizeof(float) : 0));
            x->nnz = 0; /* the fill cursor until the rows are done */
            slot[s] = t->n_tiles - 1;
            count[s] = 0;
        }
        for (int64_t v = lo; v < hi; v++) {
            for (int64_t i = first; i < t->n_tiles; i++)
                t->tiles[i].offsets[v - lo] = t->tiles[i].nnz;
            for (int64_t j = in.offsets[v]; j < in.offsets[v + 1]; j++) {
                saga_tile *x = &t->tiles[slot[part[in.indices[j]]]];
                x->indices[x->nnz] = in.indices[j];
                if (x->weights)
                    x->weights[x->nnz] = in.weights[j];
                x->nnz++;
            }
        }
        for (int64_t i = first; i < t->n_tiles; i++) {
            saga_tile *x = &t->tiles[i];
            x->offsets[rows] = x->nnz;
            t->total_bytes += x->bytes;
            if (x->bytes > t->max_tile_bytes)
                t->max_tile_bytes = x->bytes;
        }
    }
    if (t->n_tiles != n_tiles) {
        st = saga_error(SAGA_ERR_INTERNAL, "tiles: counted %lld tiles, filled %lld",
                        (long long)n_tiles, (long long)t->n_tiles);
        goto fail;
    }
    *out = t;
    t = NULL;

fail:
    saga_tiles_free(&t);
    saga_free(part);
    saga_free(count);
    saga_free(slot);
    return st;
}

/* a * b + c in uint64, saturating */
static uint64_t mul_add_sat(uint64_t a, uint64_t b, uint64_t c) {
    if (b != 0 && a > (UINT64_MAX - c) / b)
        return UINT64_MAX;
    return a * b + c;
}

/* The rule documented in saga_partition.h, in saturating uint64. */
size_t saga_tiles_footprint(const saga_graph *g, int32_t k, int64_t feature_bytes_per_vertex) {
    if (!g || k < 1 || feature_bytes_per_vertex < 0)
        return 0;
    uint64_t n = (uint64_t)saga_graph_n_vertices(g), m = (uint64_t)saga_graph_n_edges(g);
    uint64_t f = (uint64_t)feature_bytes_per_vertex;
    uint64_t rows = (n + (uint64_t)k - 1) / (uint64_t)k;
    uint64_t edges = (m + (uint64_t)k - 1) / (uint64_t)k;
    uint64_t per_edge = sizeof(int32_t) + (saga_graph_has_weights(g) ? sizeof(float) : 0);
    uint64_t tile = mul_add_sat(edges, per_edge, mul_add_sat(rows + 1, sizeof(int64_t), 0));
    uint64_t part_rows = mul_add_sat(rows, f, 0);
    uint64_t dst = mul_add_sat(part_rows, 2, 0);
    uint64_t src = part_rows > UINT64_MAX - tile ? UINT64_MAX : part_rows + tile;
    uint64_t total = mul_add_sat(src, 2, dst);
    return total > SIZE_MAX ? SIZE_MAX : (size_t)total;
}

/* Doubling is enough: the footprint does not increase with k, so the first power of two that
 * fits has a half that does not. n_vertices is the last resort (one vertex per part). */
saga_status saga_tiles_choose_parts(int32_t *k, const saga_graph *g,
                                    int64_t feature_bytes_per_vertex, size_t budget_bytes) {
    saga_status st = SAGA_OK;
    SAGA_CHECK(k && g, SAGA_ERR_INVALID_ARG, "saga_tiles_choose_parts: k and graph are required");
    SAGA_CHECK(feature_bytes_per_vertex >= 0, SAGA_ERR_INVALID_ARG,
               "tiles: feature bytes per vertex must not be negative, got %lld",
               (long long)feature_bytes_per_vertex);
    int32_t n = saga_graph_n_vertices(g);
    int32_t last = n > 1 ? n : 1;
    for (int32_t c = 1; c < last && c <= INT32_MAX / 2; c *= 2)
        if (saga_tiles_footprint(g, c, feature_bytes_per_vertex) <= budget_bytes) {
            *k = c;
            return SAGA_OK;
        }
    size_t need = saga_tiles_footprint(g, last, feature_bytes_per_vertex);
    SAGA_CHECK(need <= budget_bytes, SAGA_ERR_BUDGET,
               "tiles: a budget of %zu bytes is too small for %lld-byte vertex rows even with "
               "%d parts of one vertex; at least %zu bytes are needed",
               budget_bytes, (long long)feature_bytes_per_vertex, (int)last, need);
    *k = last;
fail:
    return st;
}
