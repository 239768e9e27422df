/* fuzz_features.c - libFuzzer target for vertex data files: the same bytes are read as features,
 * as labels and as an index list. The first byte picks the options: bits 0-1 the feature layout,
 * bit 2 a graph with original ids, bit 3 a graph with plain ids, bit 4 n_cols = 8. */
#include "fuzz_common.h"

static const saga_graph *test_graph(bool with_ids) {
    /* 16 isolated vertices; with ids they are named 0, 3, 6, ..., 45 */
    static saga_graph *g[2];
    if (!g[with_ids]) {
        int64_t ids[16];
        for (int v = 0; v < 16; v++)
            ids[v] = 3 * v;
        if (saga_graph_from_edges(&g[with_ids], 16, 0, NULL, NULL, NULL, with_ids ? ids : NULL,
                                  NULL) != SAGA_OK)
            __builtin_trap();
    }
    return g[with_ids];
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1)
        return 0;
    uint8_t b = data[0];
    const saga_graph *g = (b & 4) ? test_graph(true) : (b & 8) ? test_graph(false) : NULL;
    saga_features_opts o = saga_features_opts_defaults();
    o.layout = (saga_features_layout)((b & 3) % SAGA_FEATURES_LAYOUT_COUNT);
    o.graph = g;
    o.n_cols = (b & 16) ? 8 : 0;
    saga_reader *r = NULL;

    float *x = NULL;
    int64_t rows = 0, cols = 0;
    if (saga_reader_open_mem(&r, "fuzz", data + 1, size - 1) != SAGA_OK)
        return 0;
    if (saga_features_parse(&x, &rows, &cols, r, &o) == SAGA_OK) {
        if (rows < 0 || cols < 0 || (g && rows != 16) || (o.n_cols && cols != 8))
            __builtin_trap();
        for (int64_t k = 0; k < rows * cols; k++)
            if (!isfinite(x[k]))
                __builtin_trap();
        saga_free(x);
    }

    int32_t *lab = NULL;
    int64_t n = 0;
    if (saga_reader_open_mem(&r, "fuzz", data + 1, size - 1) != SAGA_OK)
        return 0;
    if (saga_labels_parse(&lab, &n, r, g) == SAGA_OK) {
        if (n < 0 || (g && n != 16))
            __builtin_trap();
        for (int64_t k = 0; k < n; k++)
            if (lab[k] < -1)
                __builtin_trap();
        saga_free(lab);
    }

    int32_t *idx = NULL;
    if (saga_reader_open_mem(&r, "fuzz", data + 1, size - 1) != SAGA_OK)
        return 0;
    if (saga_index_parse(&idx, &n, r, g) == SAGA_OK) {
        for (int64_t k = 0; k < n; k++)
            if (idx[k] < 0 || (g && idx[k] >= 16))
                __builtin_trap();
        saga_free(idx);
    }
    return 0;
}
