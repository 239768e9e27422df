"""bounds.py - for the test scripts that compare numbers saga prints: the bounds of
tests/test_util.h ("bounds for results computed in different orders"), in Python.

Two computations of a value that add in different orders differ by rounding. In f32 (unit
roundoff u = 2^-24) a sum of K terms computed in any order is within gamma_K * sum|terms| of the
exact sum, gamma_K = K u / (1 - K u); two orders are within twice that of each other. A value
computed through a chain of such sums carries each link's relative error on to first order, so the
bound relative to the magnitude of the terms is the sum of the links'. Where a script does not know
a count (a graph's largest in-degree), it uses one no smaller (the number of vertices).

    import sys; sys.path.insert(0, os.path.join(os.environ["SAGA_SRC_DIR"], "tests"))
    import bounds
    tol = bounds.mlp_losses(widths=[96, 96, 96, 8], batch=32, steps=6)
"""

U32 = 2.0**-24
U64 = 2.0**-53


def gamma(k, u=U32):
    """gamma_K for unit roundoff u."""
    ku = k * u
    return ku / (1 - ku) if ku < 0.5 else float("inf")


def chain(links, u=U32):
    """Two orders of a chain of sums, each link (K, times): the sum of 2 gamma_K per link."""
    return sum(2 * t * gamma(k, u) for k, t in links)


def mlp_losses(widths, batch, steps):
    """The bound on each of `steps` losses of an MLP of these layer widths (input first) trained
    on `batch` rows a step with an optimizer that moves a weight by less than its magnitude (SGD,
    Adam's normalised step), relative to the loss: per step the forward products (K = each
    layer's input width), the loss's mean (K = batch * outputs), the backward products (the weight
    gradients over the batch, the input gradients over each layer's output width); the last step's
    loss follows steps - 1 updates."""
    fwd = [(w, 1) for w in widths[:-1]] + [(batch * widths[-1], 1)]
    bwd = [(batch, len(widths) - 1)] + [(w, 1) for w in widths[1:]]
    step = chain(fwd) + chain(bwd)
    return [k * step + chain(fwd) for k in range(steps)]


def gcn_losses(vertices, features, hidden, classes, epochs, max_degree=None):
    """The bound on each epoch's training loss of a two-layer GCN (net_run_bounds in
    tests/net_models.h), relative to the loss; the aggregations sum at most max_degree + 1 terms
    (default: every vertex)."""
    deg = (max_degree if max_degree is not None else vertices) + 1
    fwd = [(features, 1), (deg, 4), (hidden, 1)]
    step = chain(fwd) + chain([(classes, 2), (deg, 2), (vertices, 2)])
    loss = chain([(classes, 1), (vertices, 1)])
    return [k * step + chain(fwd) + loss for k in range(epochs)]


def gnn_forward_loss(model, vertices, features, hidden, classes, max_degree=None, heads=1):
    """The bound on a two-layer model's training loss before any update (the first epoch's: the
    same parameters, the forward pass's sums in other orders), relative to the loss, for the
    models of `saga gcn --model`. Per layer: GCN its product and aggregation (with the weights'
    square root and division); GAT its product, the scores' dot products, the edge softmax over
    the in-edges (the exponentials, their sum and the division) and the weighted sum; GraphSAGE
    its two products and the aggregation (the mean's division); GIN its first product, the sum
    with (1 + eps) times the vertex's own row, and its second product. Then the log-softmax and
    the mean over the vertices."""
    deg = (max_degree if max_degree is not None else vertices) + 1

    def layer(i, o):
        return {"gcn": [(i, 1), (deg, 4)],
                "gat": [(i, 1), (o, 1), (deg, 8), (deg, 1)],
                "sage": [(2 * i, 1), (deg, 2)],
                "gin": [(i, 1), (deg + 2, 1), (hidden, 1)]}[model]

    fwd = layer(features, hidden) + layer(hidden * heads, classes)
    return chain(fwd) + chain([(classes, 2), (vertices, 1)])


def hep_loss(hidden, iterations, edges, max_degree, edge_features=4):
    """The bound on the loss of a training step of `saga hep train`'s model computed in two
    orders (in memory, and streamed by chunks with the messages summed on the host), relative to
    the loss: the edge encoder's two products, per round the edge block's two products (K = 3
    hidden, hidden), the sums of messages over the largest degree and the node block's two
    products, the score's two products and the mean over the edges; test_hep.c's
    hep_step_bound."""
    links = [(edge_features, 2), (hidden, 2)]
    for _ in range(iterations):
        links += [(3 * hidden, 4), (hidden, 4), (max_degree, 4)]
    links += [(3 * hidden, 2), (hidden, 2), (edges, 2)]
    return chain(links)


def pagerank(vertices, damping=0.85, max_in_degree=None):
    """saga_test_pagerank_bound: two orders of PageRank in f64, relative to each score."""
    deg = (max_in_degree if max_in_degree is not None else vertices) + 1
    return chain([(deg, 1), (vertices, 1)], U64) / (1 - damping)


def pagerank_converged(tol, damping=0.85):
    """How far apart (in L1, so at any vertex too) two runs of PageRank that each stopped when an
    iteration changed the scores by less than tol in L1 may be, whatever their iteration counts:
    the iteration is a contraction by the damping in L1, so each is within
    tol * damping / (1 - damping) of the fixed point."""
    return 2 * tol * damping / (1 - damping)
