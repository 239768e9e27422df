/* fuzz_sgr.c - libFuzzer target for .sgr images loaded from memory; a graph that is accepted must
 * satisfy every invariant of saga_graph.h. Fuzz builds skip the CRC comparisons (see sgr.c), so
 * that mutations reach the structural checks behind them. */
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    saga_graph *g = NULL;
    if (saga_sgr_parse_mem(&g, "fuzz.sgr", data, size) == SAGA_OK) {
        fuzz_check_graph(g);
        saga_graph_free(&g);
    } else if (g) {
        __builtin_trap();
    }
    return 0;
}
