/* partition.c - k-way partitions of a graph (METIS, contiguous ranges, random) and the
 * renumbering that makes every part a contiguous range of vertex ids. */
#include "saga_log.h"
#include "saga_partition.h"

#include <math.h>
#include <metis.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

saga_partition_opts saga_partition_opts_defaults(void) {
    return (saga_partition_opts){.method = SAGA_PARTITION_METIS, .seed = 1};
}

const char *saga_partition_method_name(saga_partition_method m) {
    switch (m) {
    case SAGA_PARTITION_METIS:
        return "metis";
    case SAGA_PARTITION_CONTIGUOUS:
        return "contiguous";
    case SAGA_PARTITION_RANDOM:
        return "random";
    case SAGA_PARTITION_FENNEL:
        return "fennel";
    default:
        return "?";
    }
}

/* Frees the result and its arrays; accepts NULL. */
void saga_partition_free(saga_partition **p) {
    if (!p || !*p)
        return;
    saga_free((*p)->part);
    saga_free((*p)->perm);
    saga_free((*p)->inverse);
    saga_free((*p)->offsets);
    saga_free(*p);
    *p = NULL;
}

/* ---- the methods: each fills part[0..n) with values in 0..k-1 ------------------------------- */

/* Part q holds the ids [q n / k, (q + 1) n / k): sizes differ by at most one. */
static void part_contiguous(int32_t *part, int32_t n, int32_t k) {
    for (int32_t q = 0; q < k; q++) {
        int32_t lo = (int32_t)((int64_t)q * n / k), hi = (int32_t)((int64_t)(q + 1) * n / k);
        for (int32_t v = lo; v < hi; v++)
            part[v] = q;
    }
}

static uint64_t splitmix64(uint64_t *state) {
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* A seeded Fisher-Yates shuffle of the ids, cut into the contiguous ranges: parts as balanced
 * as CONTIGUOUS, with no structure at all (the baseline a partitioner must beat). */
static saga_status part_random(int32_t *part, int32_t n, int32_t k, uint64_t seed) {
    saga_status st = SAGA_OK;
    int32_t *order = NULL, *slot = NULL;
    SAGA_TRY(saga_alloc_array((void **)&order, (size_t)n, sizeof *order, "random order"));
    SAGA_TRY(saga_alloc_array((void **)&slot, (size_t)n, sizeof *slot, "random parts"));
    uint64_t s = seed;
    for (int32_t v = 0; v < n; v++)
        order[v] = v;
    for (int32_t i = n - 1; i > 0; i--) {
        /* multiply-shift: an unbiased enough index without a division */
        int32_t j = (int32_t)(((splitmix64(&s) >> 32) * (uint64_t)(i + 1)) >> 32);
        int32_t t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    part_contiguous(slot, n, k);
    for (int32_t i = 0; i < n; i++)
        part[order[i]] = slot[i];
fail:
    saga_free(order);
    saga_free(slot);
    return st;
}

/* ---- Fennel: one pass, each vertex where its placed neighbours are, less a size penalty ----- */

/* The smallest part (lowest index on ties) over a tournament tree of the k sizes: tree[1] is the
 * root, leaves at k .. 2k-1 (part q at k + q). */
static int32_t tour_pick(const int32_t *tree, const int64_t *size, int32_t a, int32_t b) {
    return size[b] < size[a] || (size[b] == size[a] && b < a) ? b : a;
}

static void tour_update(int32_t *tree, const int64_t *size, int32_t k, int32_t q) {
    for (int32_t i = (k + q) / 2; i >= 1; i /= 2)
        tree[i] =
            tour_pick(tree, size, tree[2 * i], 2 * i + 1 < 2 * k ? tree[2 * i + 1] : tree[2 * i]);
}

/* Fennel (Tsourakakis, Gkantsidis, Radunovic, Vojnovic, WSDM 2014) over the vertices in id
 * order: vertex v goes to the part q maximising |N(v) in q| - alpha gamma |q|^(gamma - 1), with
 * gamma = 1.5, alpha = sqrt(k) m / n^1.5 (m the undirected edges, taken as half the stored
 * in- and out-entries) and no part past 1.1 n / k vertices. N(v) is v's in- and out-row, each
 * entry counting (parallel edges weigh more); only parts holding a neighbour or the smallest
 * part can win, so a vertex costs its degree plus log k. Ties go to the smaller part, then the
 * lower index: the result depends on the graph alone. */
static saga_status part_fennel(int32_t *part, const saga_graph *g, int32_t k) {
    saga_status st = SAGA_OK;
    int32_t n = saga_graph_n_vertices(g);
    saga_csr in = saga_graph_in(g), out = saga_graph_out(g);
    int64_t *size = NULL, *hits = NULL;
    int32_t *touched = NULL, *tree = NULL;
    SAGA_TRY(saga_alloc_zeroed((void **)&size, (size_t)k, sizeof *size, "Fennel part sizes"));
    SAGA_TRY(saga_alloc_zeroed((void **)&hits, (size_t)k, sizeof *hits, "Fennel neighbour counts"));
    SAGA_TRY(saga_alloc_array((void **)&touched, (size_t)k, sizeof *touched, "Fennel parts seen"));
    SAGA_TRY(saga_alloc_array((void **)&tree, 2 * (size_t)k, sizeof *tree, "Fennel smallest part"));
    for (int32_t q = 0; q < k; q++)
        tree[k + q] = q;
    for (int32_t i = k - 1; i >= 1; i--)
        tree[i] =
            tour_pick(tree, size, tree[2 * i], 2 * i + 1 < 2 * k ? tree[2 * i + 1] : tree[2 * i]);
    const double gamma = 1.5, m = 0.5 * (double)(in.nnz + out.nnz);
    const double alpha = sqrt((double)k) * m / pow((double)n, gamma);
    const int64_t cap = (int64_t)ceil(1.1 * (double)n / k);
    for (int32_t v = 0; v < n; v++)
        part[v] = -1;
    for (int32_t v = 0; v < n; v++) {
        int32_t n_touched = 0;
        for (int dir = 0; dir < 2; dir++) {
            saga_csr e = dir ? out : in;
            for (int64_t j = e.offsets[v]; j < e.offsets[v + 1]; j++) {
                int32_t q = part[e.indices[j]];
                if (q < 0)
                    continue;
                if (hits[q]++ == 0)
                    touched[n_touched++] = q;
            }
        }
        int32_t best = k == 1 ? 0 : tree[1];
        double best_score = -alpha * gamma * sqrt((double)size[best]);
        for (int32_t t = 0; t < n_touched; t++) {
            int32_t q = touched[t];
            if (size[q] < cap) {
                double score = (double)hits[q] - alpha * gamma * sqrt((double)size[q]);
                if (score > best_score ||
                    (score == best_score &&
                     (size[q] < size[best] || (size[q] == size[best] && q < best)))) {
                    best = q;
                    best_score = score;
                }
            }
            hits[q] = 0;
        }
        part[v] = best;
        size[best]++;
        if (k > 1)
            tour_update(tree, size, k, best);
    }
fail:
    saga_free(size);
    saga_free(hits);
    saga_free(touched);
    saga_free(tree);
    return st;
}

/* ---- METIS's own messages ------------------------------------------------------------------ */

/* METIS reports with printf, on the process's stdout, where a command's --json line and a
 * user's own output belong ("***Cannot bisect a graph with 0 vertices!" when some sub-problem of
 * its recursive bisection has more parts to fill than vertices). Around each call, file
 * descriptor 1 points at a temporary file, and what METIS wrote there comes back through the log,
 * on stderr. The descriptor is the process's: the lock keeps two partitionings from swapping it
 * under each other, and whatever another thread prints meanwhile lands in the log too, late
 * but not lost. Without a temporary file (or without a stdout) METIS runs as it is. */
static pthread_mutex_t metis_lock = PTHREAD_MUTEX_INITIALIZER;

typedef struct stdout_capture {
    FILE *tmp; /* NULL: nothing captured */
    int saved; /* the real stdout, to put back */
} stdout_capture;

static void capture_begin(stdout_capture *c) {
    c->tmp = NULL;
    c->saved = -1;
    fflush(stdout); /* what was printed before goes where it was meant to */
    FILE *tmp = tmpfile();
    if (!tmp)
        return;
    int saved = dup(STDOUT_FILENO);
    if (saved < 0 || dup2(fileno(tmp), STDOUT_FILENO) < 0) {
        if (saved >= 0)
            close(saved);
        fclose(tmp);
        return;
    }
    c->tmp = tmp;
    c->saved = saved;
}

/* Puts stdout back and logs each distinct line METIS printed, once, with how many times. */
static void capture_end(stdout_capture *c, int32_t n, int32_t k) {
    if (!c->tmp)
        return;
    fflush(stdout);
    dup2(c->saved, STDOUT_FILENO);
    close(c->saved);
    enum { MAX_LINES = 8 };
    char lines[MAX_LINES][160];
    int counts[MAX_LINES] = {0}, n_lines = 0;
    char buf[160];
    rewind(c->tmp);
    while (fgets(buf, sizeof buf, c->tmp)) {
        char *b = buf, *e = buf + strlen(buf);
        while (*b == ' ' || *b == '\t' || *b == '*')
            b++;
        while (e > b && (e[-1] == '\n' || e[-1] == '\r' || e[-1] == ' '))
            *--e = '\0';
        if (!*b)
            continue;
        int i = 0;
        while (i < n_lines && strcmp(lines[i], b) != 0)
            i++;
        if (i == n_lines) {
            if (n_lines == MAX_LINES)
                continue;
            snprintf(lines[n_lines++], sizeof lines[0], "%s", b);
        }
        counts[i]++;
    }
    fclose(c->tmp);
    c->tmp = NULL;
    for (int i = 0; i < n_lines; i++)
        saga_log(SAGA_LOG_WARN, "METIS, %d parts of %d vertices: %s%s", (int)k, (int)n, lines[i],
                 counts[i] > 1 ? " (repeated)" : "");
}

/* METIS k-way. METIS wants an undirected graph given with both directions of every edge and
 * neither self-loops nor repeated neighbours; saga's rows are sorted, so the union of a
 * vertex's in-row and out-row is a merge of two sorted lists. */
static saga_status part_metis(int32_t *part, const saga_graph *g, int32_t k, uint64_t seed,
                              bool balance_edges, int refine_iters, int64_t max_entries) {
    saga_status st = SAGA_OK;
    idx_t *xadj = NULL, *adjncy = NULL, *where = NULL, *vwgt = NULL;
    int32_t n = saga_graph_n_vertices(g);
    saga_csr in = saga_graph_in(g), out = saga_graph_out(g);

    /* ---- the symmetrized adjacency, counted then filled */
    SAGA_TRY(saga_alloc_array((void **)&xadj, (size_t)n + 1, sizeof *xadj, "METIS offsets"));
    int64_t total = 0;
    for (int pass = 0; pass < 2; pass++) {
        total = 0;
        for (int32_t v = 0; v < n; v++) {
            if (pass == 1)
                xadj[v] = (idx_t)total;
            int64_t a = in.offsets[v], ae = in.offsets[v + 1];
            int64_t b = out.offsets[v], be = out.offsets[v + 1];
            int32_t last = -1;
            while (a < ae || b < be) {
                int32_t u;
                if (b == be || (a < ae && in.indices[a] <= out.indices[b]))
                    u = in.indices[a++];
                else
                    u = out.indices[b++];
                if (u == v || u == last)
                    continue;
                if (pass == 1)
                    adjncy[total] = (idx_t)u;
                total++;
                last = u;
            }
        }
        if (pass == 0) {
            /* idx_t is 32 or 64 bits depending on how METIS was built */
            SAGA_CHECK(total <= (int64_t)IDX_MAX, SAGA_ERR_UNSUPPORTED,
                       "METIS: %lld adjacency entries exceed this METIS build's %d-bit indices",
                       (long long)total, (int)IDXTYPEWIDTH);
            SAGA_CHECK(!max_entries || total <= max_entries, SAGA_ERR_UNSUPPORTED,
                       "METIS: %lld adjacency entries exceed the limit of %lld", (long long)total,
                       (long long)max_entries);
            SAGA_TRY(saga_alloc_array((void **)&adjncy, total ? (size_t)total : 1, sizeof *adjncy,
                                      "METIS adjacency"));
        }
    }
    xadj[n] = (idx_t)total;
    SAGA_TRY(saga_alloc_array((void **)&where, (size_t)n, sizeof *where, "METIS parts"));
    if (balance_edges) {
        SAGA_TRY(saga_alloc_array((void **)&vwgt, (size_t)n, sizeof *vwgt, "METIS weights"));
        int64_t sum = 0;
        for (int32_t v = 0; v < n; v++)
            sum += vwgt[v] = (idx_t)(1 + in.offsets[v + 1] - in.offsets[v]);
        /* a vertex heavier than a part's share cannot be balanced: METIS's bisections then give
         * it a side of its own with parts still to fill and nothing to fill them with (it prints
         * "Cannot bisect a graph with 0 vertices" and leaves parts empty). No weight above the
         * share: such a vertex makes a part of its own, as it would anyway. */
        idx_t cap = (idx_t)(sum / k > 1 ? sum / k : 1);
        for (int32_t v = 0; v < n; v++)
            vwgt[v] = vwgt[v] < cap ? vwgt[v] : cap;
    }

    /* ---- partition */
    idx_t options[METIS_NOPTIONS];
    METIS_SetDefaultOptions(options);
    options[METIS_OPTION_SEED] = (idx_t)(seed % (uint64_t)IDX_MAX);
    if (refine_iters > 0)
        options[METIS_OPTION_NITER] = (idx_t)refine_iters;
    idx_t nvtxs = n, ncon = 1, nparts = k, objval = 0;
    pthread_mutex_lock(&metis_lock);
    stdout_capture printed;
    capture_begin(&printed);
    int rc = METIS_PartGraphKway(&nvtxs, &ncon, xadj, adjncy, vwgt, NULL, NULL, &nparts, NULL, NULL,
                                 options, &objval, where);
    capture_end(&printed, n, k);
    pthread_mutex_unlock(&metis_lock);
    SAGA_CHECK(rc != METIS_ERROR_INPUT, SAGA_ERR_INVALID_ARG,
               "METIS_PartGraphKway rejected the input (%d vertices, %lld adjacency entries, "
               "%d parts)",
               (int)n, (long long)total, (int)k);
    SAGA_CHECK(rc != METIS_ERROR_MEMORY, SAGA_ERR_OUT_OF_MEMORY,
               "METIS_PartGraphKway ran out of memory (%d vertices, %lld adjacency entries)",
               (int)n, (long long)total);
    SAGA_CHECK(rc == METIS_OK, SAGA_ERR_INTERNAL, "METIS_PartGraphKway failed (status %d)", rc);
    for (int32_t v = 0; v < n; v++) {
        SAGA_CHECK(where[v] >= 0 && where[v] < k, SAGA_ERR_INTERNAL,
                   "METIS put vertex %d in part %lld of %d", (int)v, (long long)where[v], (int)k);
        part[v] = (int32_t)where[v];
    }
fail:
    saga_free(xadj);
    saga_free(adjncy);
    saga_free(where);
    saga_free(vwgt);
    return st;
}

/* ---- the result ------------------------------------------------------------------------------ */

/* Partitions and renumbers; see saga_partition.h. */
saga_status saga_partition_graph(saga_partition **out, const saga_graph *g, int32_t k,
                                 const saga_partition_opts *opts) {
    saga_status st = SAGA_OK;
    saga_partition *p = NULL;
    int64_t *cursor = NULL;
    saga_partition_opts o = opts ? *opts : saga_partition_opts_defaults();

    /* ---- check inputs */
    SAGA_CHECK(out && g, SAGA_ERR_INVALID_ARG, "saga_partition_graph: out and graph are required");
    int32_t n = saga_graph_n_vertices(g);
    SAGA_CHECK((unsigned)o.method < SAGA_PARTITION_METHOD_COUNT, SAGA_ERR_INVALID_ARG,
               "saga_partition_graph: unknown method %d", (int)o.method);
    SAGA_CHECK(k >= 1, SAGA_ERR_INVALID_ARG,
               "partition: the number of parts must be at least 1, "
               "got %d",
               (int)k);
    SAGA_CHECK(k <= n, SAGA_ERR_INVALID_ARG,
               "partition: %d parts asked of a graph with %d vertices", (int)k, (int)n);
    SAGA_CHECK(o.refine_iters >= 0, SAGA_ERR_INVALID_ARG,
               "partition: %d refinement passes (0 is METIS's default)", o.refine_iters);
    SAGA_CHECK(o.metis_max_entries >= 0, SAGA_ERR_INVALID_ARG,
               "partition: a limit of %lld METIS adjacency entries (0: no limit of saga's)",
               (long long)o.metis_max_entries);

    /* ---- initialize */
    SAGA_TRY(saga_alloc_zeroed((void **)&p, 1, sizeof *p, "partition"));
    p->method = o.method;
    p->n_parts = k;
    p->n_vertices = n;
    SAGA_TRY(saga_alloc_zeroed((void **)&p->part, (size_t)n, sizeof *p->part, "vertex parts"));
    SAGA_TRY(saga_alloc_array((void **)&p->perm, (size_t)n, sizeof *p->perm, "permutation"));
    SAGA_TRY(saga_alloc_array((void **)&p->inverse, (size_t)n, sizeof *p->inverse,
                              "inverse permutation"));
    SAGA_TRY(
        saga_alloc_zeroed((void **)&p->offsets, (size_t)k + 1, sizeof *p->offsets, "part offsets"));
    SAGA_TRY(saga_alloc_array((void **)&cursor, (size_t)k, sizeof *cursor, "part cursors"));

    /* ---- partition */
    double t0 = saga_now();
    if (k > 1) { /* k == 1: part[] is already all zeros */
        switch (o.method) {
        case SAGA_PARTITION_METIS:
            st = part_metis(p->part, g, k, o.seed, o.balance_edges, o.refine_iters,
                            o.metis_max_entries);
            if (st == SAGA_ERR_UNSUPPORTED || st == SAGA_ERR_OUT_OF_MEMORY) {
                saga_log(SAGA_LOG_WARN,
                         "partition: %s; cutting %d vertices into %d parts with the one-pass "
                         "streaming partitioner (fennel) instead, whose edge cut is larger",
                         saga_last_error(), (int)n, (int)k);
                saga_error_clear();
                p->method = SAGA_PARTITION_FENNEL;
                st = part_fennel(p->part, g, k);
            }
            if (st < 0)
                goto fail;
            break;
        case SAGA_PARTITION_FENNEL:
            SAGA_TRY(part_fennel(p->part, g, k));
            break;
        case SAGA_PARTITION_CONTIGUOUS:
            part_contiguous(p->part, n, k);
            break;
        case SAGA_PARTITION_RANDOM:
            SAGA_TRY(part_random(p->part, n, k, o.seed));
            break;
        default:
            break;
        }
    }
    p->seconds = saga_now() - t0;

    /* ---- renumber: a stable counting sort of the vertices by part */
    for (int32_t v = 0; v < n; v++)
        p->offsets[p->part[v] + 1]++;
    int64_t largest = 0;
    for (int32_t q = 0; q < k; q++) {
        if (p->offsets[q + 1] > largest)
            largest = p->offsets[q + 1];
        p->offsets[q + 1] += p->offsets[q];
    }
    memcpy(cursor, p->offsets, (size_t)k * sizeof *cursor);
    for (int32_t v = 0; v < n; v++) {
        int32_t i = (int32_t)cursor[p->part[v]]++;
        p->perm[i] = v;
        p->inverse[v] = i;
    }
    p->balance = (double)largest * k / n;

    /* ---- the cut, over the stored directed edges */
    saga_csr e = saga_graph_out(g);
    int64_t cut = 0;
#pragma omp parallel for reduction(+ : cut) schedule(static) if (e.nnz > 65536)
    for (int32_t u = 0; u < n; u++)
        for (int64_t j = e.offsets[u]; j < e.offsets[u + 1]; j++)
            cut += p->part[u] != p->part[e.indices[j]];
    p->edge_cut = cut;
    saga_log(SAGA_LOG_DEBUG, "partition: %s, %d parts, cut %lld of %lld edges, balance %.3f",
             saga_partition_method_name(p->method), (int)k, (long long)cut, (long long)e.nnz,
             p->balance);

    saga_free(cursor);
    *out = p;
    return SAGA_OK;
fail:
    saga_free(cursor);
    saga_partition_free(&p);
    return st;
}
