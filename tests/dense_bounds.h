/* dense_bounds.h - the bounds (test_util.h) on two trainings of a tiled MLP (saga_dense.h) that
 * add in different orders, for test_dense.c and test_dense_ranks.c. Include after test_util.h. */
#pragma once

#include "saga_dense.h"

#include <stdbool.h>

/* The bounds on two trainings of p that add in different orders, relative to the magnitudes
 * below. A step chains the forward pass's sums (each layer's, over its inputs and the bias), the
 * loss's (over the batch's outputs), the backward pass's (each hidden layer's input gradient,
 * over its outputs; a weight gradient, over the batch's rows, micro-batches included: the longest
 * chain holds one) and Adam's update, which moves a weight by about lr, far less than the
 * weight: it passes its gradient's relative error on at most once, and each run rounds the new
 * weight to f32 once. (Adam divides by the gradient's root mean square: strictly a step passes
 * on lr / |W| times the ratio of the gradient's terms to that root mean square, and "at most
 * once" takes that ratio below |W| / lr, 10 to 30 in these tests; the update's own elementwise
 * rounding, a few u of lr, is far below.) Against the double reference only one side rounds: half
 * of each. */
typedef struct mlp_bounds {
    double fwd, loss, step;
} mlp_bounds;

static inline mlp_bounds mlp_bounds_of(const saga_mlp_params *p, bool reference) {
    const int nl = p->n_layers;
    saga_test_chain fwd = {0, 0}, loss = {0, 0}, step = {0, 0};
    for (int l = 0; l < nl; l++)
        saga_test_chain_add(&fwd, p->widths[l] + 1, 1);
    saga_test_chain_add(&loss, (int64_t)p->batch * p->widths[nl], 1);
    step.rel = fwd.rel + loss.rel;
    for (int l = 1; l < nl; l++)
        saga_test_chain_add(&step, p->widths[l + 1], 1);
    saga_test_chain_add(&step, p->batch, 1);
    saga_test_chain_add(&step, 1, 1);
    const double half = reference ? 0.5 : 1.0;
    return (mlp_bounds){half * fwd.rel, half * loss.rel, half * step.rel};
}
