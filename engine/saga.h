/* saga.h - the one header a saga user includes.
 *
 *   #include <saga/saga.h>
 *
 *   int main(int argc, char **argv) {
 *       saga_graph *g = NULL;
 *       if (saga_graph_load(&g, argv[1], NULL) < 0) {
 *           fprintf(stderr, "%s\n", saga_last_error());
 *           return 1;
 *       }
 *       printf("%d vertices\n", saga_graph_n_vertices(g));
 *       saga_graph_free(&g);
 *   }
 *
 * Link with -lsaga (pkg-config saga) or target saga::saga (find_package(saga)).
 */
#pragma once

#include "saga_backend.h"
#include "saga_comm.h"
#include "saga_dataset.h"
#include "saga_datasets.h"
#include "saga_dense.h"
#include "saga_graph.h"
#include "saga_io.h"
#include "saga_layers.h"
#include "saga_log.h"
#include "saga_net.h"
#include "saga_nn.h"
#include "saga_partition.h"
#include "saga_program.h"
#include "saga_sample.h"
#include "saga_shards.h"
#include "saga_status.h"
#include "saga_tensor.h"
