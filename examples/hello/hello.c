/* hello.c - load a graph with saga and print its size and highest in-degree vertex. */
#include <saga/saga.h>

#include <stdio.h>

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: hello GRAPH\n");
        return 2;
    }
    saga_graph *g = NULL;
    if (saga_graph_load(&g, argv[1], NULL) < 0) {
        fprintf(stderr, "hello: %s\n", saga_last_error());
        return 1;
    }
    saga_csr in = saga_graph_in(g);
    int32_t best = 0;
    for (int32_t v = 0; v < in.n_rows; v++)
        if (in.offsets[v + 1] - in.offsets[v] > in.offsets[best + 1] - in.offsets[best])
            best = v;
    printf("%d vertices, %lld edges; most in-edges: vertex %lld\n", saga_graph_n_vertices(g),
           (long long)saga_graph_n_edges(g), (long long)saga_graph_orig_id(g, best));
    saga_graph_free(&g);
    return 0;
}
