/* fuzz_edgelist.c - libFuzzer target for SNAP edge lists, plain or gzip (the reader detects gzip by
 * its magic bytes): the first byte picks the load options, the rest is the file; a graph that is
 * accepted must satisfy every invariant of saga_graph.h. */
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1)
        return 0;
    saga_load_opts o = fuzz_load_opts(data[0]);
    saga_reader *r = NULL;
    if (saga_reader_open_mem(&r, "fuzz", data + 1, size - 1) != SAGA_OK)
        return 0;
    saga_graph *g = NULL;
    if (saga_edgelist_parse(&g, r, &o) == SAGA_OK) {
        fuzz_check_graph(g);
        saga_graph_free(&g);
    } else if (g) {
        __builtin_trap(); /* outputs are written only on success */
    }
    return 0;
}
