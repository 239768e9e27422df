/* test_hep.c - the HEP tracking app: graph construction on hand-made events (one with end-cap
 * hits, left out and counted), the samplers' invariants, ROC AUC and track efficiency against
 * plain references, finite-difference gradients of the Interaction Network, a short training run
 * that must learn, and the export of a graph as a NumPy archive read back byte by byte. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "test_util.h"

/* The app's sources are not in the library; they are compiled into this test. */
#include "../apps/cc.c"
#include "../apps/hep.c"
#include "../apps/hep_stream.c"
#include "../apps/npz.c"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- a hand-made event -------------------------------------------------------------------- */

enum { TINY_HITS = 14 };

/* Hits on the three innermost pixel layers (r = 32, 72, 116 mm). Particles 1, 2 and 4 (pT 2 GeV)
 * go straight out from the origin; 4 crosses phi = +-pi. Particle 3 (pT 0.5 GeV) is below the
 * 1 GeV cut. Hits 9 and 10 are noise on layer 1, hit 11 noise on layer 2. */
static const struct {
    int layer;
    double phi, z;
    int64_t particle;
} TINY[TINY_HITS] = {
    {0, 0.1, 3.2, 1},        {1, 0.1, 7.2, 1},           {2, 0.1, 11.6, 1},    /* 0-2 */
    {0, -0.5, 16, 2},        {1, -0.5, 36, 2},           {2, -0.5, 58, 2},     /* 3-5 */
    {0, 0.102, -20, 3},      {1, 0.104, -45, 3},         {2, 0.106, -72.5, 3}, /* 6-8 */
    {1, 0.11, 107.2, 0},     {1, 0.1, 450, 0},           {2, 0.15, 11.6, 0},   /* 9-11 */
    {0, M_PI - 0.001, 0, 4}, {1, -M_PI + 0.005, 0.5, 4},                       /* 12-13 */
};

/* An event of n hits and n_particles particles with ids 1 .. n_particles, the arrays to fill;
 * the event owns saga_malloc'd arrays, as the reader's. */
static saga_trackml_event *event_new(int64_t n, int64_t n_particles) {
    saga_trackml_event *e = saga_calloc(1, sizeof *e);
    assert_non_null(e);
    e->n_hits = n;
    e->x = saga_malloc(n * sizeof(float));
    e->y = saga_malloc(n * sizeof(float));
    e->z = saga_malloc(n * sizeof(float));
    e->volume_id = saga_malloc(n * sizeof(int32_t));
    e->layer_id = saga_malloc(n * sizeof(int32_t));
    e->particle_id = saga_malloc(n * sizeof(int64_t));
    e->n_particles = n_particles;
    e->p_id = saga_malloc(n_particles * sizeof(int64_t));
    e->px = saga_malloc(n_particles * sizeof(float));
    e->py = saga_malloc(n_particles * sizeof(float));
    e->pz = saga_malloc(n_particles * sizeof(float));
    for (int64_t k = 0; k < n_particles; k++)
        e->p_id[k] = k + 1;
    return e;
}

static saga_trackml_event *tiny_event(void) {
    int64_t n = TINY_HITS + 1;
    saga_trackml_event *e = event_new(n, 4);
    for (int64_t i = 0; i < n; i++) {
        /* the last hit: particle 4 on layer 2 */
        int l = i < TINY_HITS ? TINY[i].layer : 2;
        double phi = i < TINY_HITS ? TINY[i].phi : -M_PI + 0.012;
        double r = saga_trackml_layer_radius(l);
        e->x[i] = (float)(r * cos(phi));
        e->y[i] = (float)(r * sin(phi));
        e->z[i] = (float)(i < TINY_HITS ? TINY[i].z : 1.0);
        e->volume_id[i] = 8;
        e->layer_id[i] = 2 + 2 * l;
        e->particle_id[i] = i < TINY_HITS ? TINY[i].particle : 4;
    }
    const float pt[4] = {2.0f, 2.0f, 0.5f, 2.0f};
    for (int k = 0; k < 4; k++)
        e->px[k] = pt[k] * 0.6f, e->py[k] = pt[k] * 0.8f, e->pz[k] = 0.0f;
    return e;
}

/* The original hit of a graph vertex, found by its features. */
static int hit_of_vertex(const hep_event_graph *g, int32_t v) {
    const float *f = g->hit_feat + v * HEP_HIT_FEATURES;
    for (int i = 0; i <= TINY_HITS; i++) {
        int l = i < TINY_HITS ? TINY[i].layer : 2;
        double z = i < TINY_HITS ? TINY[i].z : 1.0;
        double phi = i < TINY_HITS ? TINY[i].phi : -M_PI + 0.012;
        if (fabs(f[0] - saga_trackml_layer_radius(l) / 1000) < 1e-5 &&
            fabs(f[2] - z / 1000) < 1e-6 && fabs(f[1] - phi / M_PI) < 1e-5)
            return i;
    }
    fail_msg("vertex %d matches no hit", v);
    return -1;
}

static void test_hep_graph_construction_tiny_event(void **state) {
    (void)state;
    saga_trackml_event *e = tiny_event();
    hep_event_graph g;
    hep_graph_opts o = hep_graph_opts_defaults();
    o.phi_slope_max = 0.0006, o.z0_max = 350; /* the cuts the arithmetic below uses */
    o.max_missing = 0;                        /* the segments by hand join consecutive layers */
    assert_int_equal(hep_graph_build(&g, e, &o), SAGA_OK);
    /* particle 3's three hits are dropped */
    assert_int_equal(g.n_hits, TINY_HITS + 1 - 3);
    /* by hand: the three straight particles give 2 true segments each; hit 9 (dphi 0.01 over 40
     * mm, z0 = 3.2 - 32 * 104 / 40 = -80 mm) joins hit 0 and, towards hit 2, z0 = 107.2 + 72 *
     * 95.6 / 44 = 263.6 mm; hit 10 fails z0 both ways (-354 and 1167 mm); hit 11 bends too much
     * (0.05 / 44 and 0.04 / 44 rad/mm); particle 4's segments cross phi = pi */
    const int want[8][2] = {{0, 1}, {1, 2}, {3, 4}, {4, 5}, {12, 13}, {13, 14}, {0, 9}, {9, 2}};
    assert_int_equal(g.n_edges, 8);
    assert_int_equal(g.n_true, 6);
    assert_int_equal(g.n_segments, 6);
    bool seen[8] = {false};
    for (int64_t k = 0; k < g.n_edges; k++) {
        int a = hit_of_vertex(&g, g.src[k]), b = hit_of_vertex(&g, g.dst[k]);
        int w = -1;
        for (int j = 0; j < 8; j++)
            if (want[j][0] == a && want[j][1] == b)
                w = j;
        if (w < 0)
            fail_msg("unexpected edge %d -> %d", a, b);
        assert_false(seen[w]);
        seen[w] = true;
        assert_int_equal(g.truth[k], w < 6);
        /* sorted by (outer, inner): the placed graph's order */
        if (k > 0)
            assert_true(g.dst[k - 1] < g.dst[k] ||
                        (g.dst[k - 1] == g.dst[k] && g.src[k - 1] < g.src[k]));
        const float *f = g.edge_feat + k * HEP_EDGE_FEATURES;
        if (w == 6) { /* 0 -> 9: dphi/dr = 0.01 / 40 rad/mm, z0 = -80 mm, dr = 40 mm */
            assert_true(fabs(f[0] - 0.25) < 1e-3);
            assert_true(fabs(f[1] - (-80.0 / 200)) < 1e-3);
            assert_true(fabs(f[3] - 40.0 / 200) < 1e-4);
            /* the circle through the origin and both hits: the chord subtends 0.01 rad there */
            double chord = sqrt(32.0 * 32 + 72.0 * 72 - 2 * 32.0 * 72 * cos(0.01));
            assert_true(fabs(f[6] - 2 * sin(0.01) / chord * 1000) < 1e-3);
        }
        if (w < 2) /* particle 1 runs straight out: no curvature */
            assert_true(fabs(f[6]) < 1e-3);
        if (w == 0) { /* 0 -> 1: no edge into hit 0; 1 -> 2 continues it exactly */
            assert_true(f[7] == 1.5f && f[8] == 1.5f);
            /* within the float hits' rounding: differences below 3e-6 per m and 3e-4 mm */
            assert_true(fabs(f[9] - -1.0) < 1e-2 && fabs(f[10] - -1.0) < 1e-2);
        }
        if (w == 1) { /* 1 -> 2: 0 -> 1 leads into it exactly (0 -> 9 does not); none out of 2 */
            assert_true(fabs(f[7] - -1.0) < 1e-2 && fabs(f[8] - -1.0) < 1e-2);
            assert_true(f[9] == 1.5f && f[10] == 1.5f);
        }
    }
    hep_graph_free(&g);

    /* a lower cut keeps particle 3: its two segments join the graph */
    o.pt_min = 0.4;
    assert_int_equal(hep_graph_build(&g, e, &o), SAGA_OK);
    assert_int_equal(g.n_hits, TINY_HITS + 1);
    assert_int_equal(g.n_segments, 8);
    assert_int_equal(g.n_true, 8);
    /* and five fakes with its neighbour particle 1 and noise hit 9, by the same arithmetic:
     * 6 -> 1 (z0 -41.8 mm), 6 -> 9 (-121.8), 0 -> 7 (41.8), 7 -> 2 (-137.6), 1 -> 8 (137.6);
     * 9 -> 8 fails z0 (401 mm) */
    assert_int_equal(g.n_edges, 15);
    hep_graph_free(&g);
    saga_trackml_event_free(&e);
}

/* An event as TrackML's train_sample has them: hits on the barrel and on the end-caps (volumes 7/9,
 * 12/14, 16/18, whose hits the graph leaves out and counts), noise, 64-bit particle ids (1 and 3
 * equal in their low 32 bits), large hit ids. Particle 1 (pT 2 GeV) crosses pixel layers 0 and 1
 * at phi 0.1 and then a positive end-cap disk; particle 2 has end-cap hits only; particle 3 (pT
 * 0.5 GeV) is below the cut; noise on a barrel strip layer and on an end-cap. */
enum { TML_HITS = 8 };
static const struct {
    int32_t volume, layer;
    double r, phi, z;
    int p; /* 0 noise, else particle index + 1 */
} TML[TML_HITS] = {
    {8, 2, 32, 0.1, 5, 1},    {8, 4, 72, 0.1, 11.25, 1},   {9, 2, 110, 0.1, 600, 1},
    {7, 14, 40, -2, -600, 2}, {12, 6, 400, 1, -1800, 0},   {13, 2, 260, 2, 100, 0},
    {8, 6, 116, -1, 30, 3},   {18, 4, 900, -2.1, 1500, 2},
};
static const int64_t TML_PID[3] = {4503668346847232LL, 922337203685477580LL,
                                   4503668346847232LL + (1LL << 32)};

static saga_trackml_event *trackml_event(void) {
    saga_trackml_event *e = saga_calloc(1, sizeof *e);
    assert_non_null(e);
    int64_t n = TML_HITS;
    e->event_id = 1000;
    e->n_hits = n;
    e->hit_id = saga_malloc(n * sizeof(int64_t));
    e->x = saga_malloc(n * sizeof(float));
    e->y = saga_malloc(n * sizeof(float));
    e->z = saga_malloc(n * sizeof(float));
    e->volume_id = saga_malloc(n * sizeof(int32_t));
    e->layer_id = saga_malloc(n * sizeof(int32_t));
    e->particle_id = saga_malloc(n * sizeof(int64_t));
    for (int64_t i = 0; i < n; i++) {
        e->hit_id[i] = 100001 + i;
        e->x[i] = (float)(TML[i].r * cos(TML[i].phi));
        e->y[i] = (float)(TML[i].r * sin(TML[i].phi));
        e->z[i] = (float)TML[i].z;
        e->volume_id[i] = TML[i].volume;
        e->layer_id[i] = TML[i].layer;
        e->particle_id[i] = TML[i].p ? TML_PID[TML[i].p - 1] : 0;
    }
    e->n_particles = 3;
    e->p_id = saga_malloc(3 * sizeof(int64_t));
    e->px = saga_malloc(3 * sizeof(float));
    e->py = saga_malloc(3 * sizeof(float));
    e->pz = saga_malloc(3 * sizeof(float));
    const float pt[3] = {2.0f, 3.0f, 0.5f};
    for (int k = 0; k < 3; k++) {
        e->p_id[k] = TML_PID[k];
        e->px[k] = pt[k], e->py[k] = 0.0f, e->pz[k] = 1.0f;
    }
    return e;
}

/* Straight tracks from the origin (z = slope * r) that leave the pixel barrel (half-length 500
 * mm) for the longer strip layers (1100 mm). Particle 1 (slope 3.5) is at z = 602 mm at the last
 * pixel layer (r = 172 mm): no hit there, so its segment from layer 2 skips layer 3 to the first
 * strip layer. Particle 2 (slope 2) crosses every layer up to 4: no skip. Particle 3 (slope 498 /
 * 172) crosses layer 3 at z = 498 mm, inside but within the 5 mm margin: the skip 2 -> 4 is built
 * and is false (the particle has a hit between). The noise hit on layer 4 is joined by a skip from
 * particle 1's layer 2 hit (line at z = 617 mm at r = 172). */
enum { GAP_HITS = 15 };
static const struct {
    int layer;
    double phi, slope;
    int64_t particle;
} GAP[GAP_HITS] = {
    {0, 0.3, 3.5, 1},          {1, 0.3, 3.5, 1},         {2, 0.3, 3.5, 1},
    {4, 0.3, 3.5, 1}, /* 0-3 */
    {0, -1.0, 2.0, 2},         {1, -1.0, 2.0, 2},        {2, -1.0, 2.0, 2},
    {3, -1.0, 2.0, 2},                                                             /* 4-7 */
    {4, -1.0, 2.0, 2},                                                             /* 8 */
    {0, 2.0, 498.0 / 172, 3},  {1, 2.0, 498.0 / 172, 3}, {2, 2.0, 498.0 / 172, 3}, /* 9-11 */
    {3, 2.0, 498.0 / 172, 3},  {4, 2.0, 498.0 / 172, 3},                           /* 12-13 */
    {4, 0.31, 950.0 / 260, 0},                                                     /* 14 */
};

static void test_hep_graph_skips_layers_a_track_leaves(void **state) {
    (void)state;
    saga_trackml_event *e = event_new(GAP_HITS, 3);
    for (int64_t i = 0; i < GAP_HITS; i++) {
        int l = GAP[i].layer;
        double r = saga_trackml_layer_radius(l);
        e->x[i] = (float)(r * cos(GAP[i].phi));
        e->y[i] = (float)(r * sin(GAP[i].phi));
        e->z[i] = (float)(GAP[i].slope * r);
        e->volume_id[i] = l < 4 ? 8 : 13; /* pixel layers 2/4/6/8, then the short strips */
        e->layer_id[i] = 2 + 2 * (l % 4);
        e->particle_id[i] = GAP[i].particle;
    }
    for (int k = 0; k < 3; k++)
        e->px[k] = 2.0f, e->py[k] = 0.0f, e->pz[k] = 1.0f;
    hep_event_graph g;
    hep_graph_opts o = hep_graph_opts_defaults();
    o.phi_slope_max = 0.0006, o.z0_max = 350; /* the cuts the arithmetic below uses */
    o.max_missing = 0;    /* a segment may pass layers it leaves, but cross none */
    o.barrel_only = true; /* the disks at 600 mm and on would be crossed: see ..._endcaps */
    assert_int_equal(hep_graph_build(&g, e, &o), SAGA_OK);
    assert_int_equal(g.n_hits, GAP_HITS);
    /* (inner hit, outer hit, true) by hand */
    const int want[13][3] = {{0, 1, 1},   {1, 2, 1},   {2, 3, 1},  {2, 14, 0}, {4, 5, 1},
                             {5, 6, 1},   {6, 7, 1},   {7, 8, 1},  {9, 10, 1}, {10, 11, 1},
                             {11, 12, 1}, {12, 13, 1}, {11, 13, 0}};
    assert_int_equal(g.n_edges, 13);
    assert_int_equal(g.n_true, 11);
    assert_int_equal(g.n_segments, 11);
    bool seen[13] = {false};
    for (int64_t k = 0; k < g.n_edges; k++) {
        int ab[2] = {-1, -1};
        for (int side = 0; side < 2; side++) {
            const float *f = g.hit_feat + (side ? g.dst[k] : g.src[k]) * HEP_HIT_FEATURES;
            for (int i = 0; i < GAP_HITS; i++)
                if (fabs(f[0] - saga_trackml_layer_radius(GAP[i].layer) / 1000) < 1e-5 &&
                    fabs(f[1] - GAP[i].phi / M_PI) < 1e-5)
                    ab[side] = i;
        }
        int w = -1;
        for (int j = 0; j < 13; j++)
            if (want[j][0] == ab[0] && want[j][1] == ab[1])
                w = j;
        if (w < 0)
            fail_msg("unexpected edge %d -> %d", ab[0], ab[1]);
        assert_false(seen[w]);
        seen[w] = true;
        assert_int_equal(g.truth[k], want[w][2]);
    }
    hep_graph_free(&g);
    saga_trackml_event_free(&e);
}

static void test_hep_graph_counts_endcap_hits_left_out(void **state) {
    (void)state;
    saga_trackml_event *e = trackml_event();
    hep_event_graph g;
    hep_graph_opts o = hep_graph_opts_defaults();
    o.phi_slope_max = 0.0006, o.z0_max = 350; /* the cuts the arithmetic below uses */
    o.barrel_only = true;
    assert_int_equal(hep_graph_build(&g, e, &o), SAGA_OK);
    assert_int_equal(g.event_id, 1000);
    assert_int_equal(g.n_read, TML_HITS);
    assert_int_equal(g.n_endcap, 4); /* hits 2, 3, 4, 7 */
    assert_int_equal(g.n_left_out, 4);
    assert_int_equal(g.n_barrel, 4);
    assert_int_equal(g.n_soft, 1);  /* particle 3 */
    assert_int_equal(g.n_hits, 3);  /* particle 1's two barrel hits and the strip noise */
    assert_int_equal(g.n_noise, 1); /* the end-cap noise hit is not in the graph */
    /* particle 1's pixel segment (z0 = 5 - 32 * 6.25 / 40 = 0) is the only edge */
    assert_int_equal(g.n_edges, 1);
    assert_int_equal(g.n_true, 1);
    assert_int_equal(g.n_segments, 1);
    for (int32_t v = 0; v < g.n_hits; v++)
        assert_true(g.hit_particle[v] == 0 || g.hit_particle[v] == TML_PID[0]);
    hep_graph_free(&g);

    /* a volume TrackML does not have, and a barrel layer it does not have: the hit is named */
    e->volume_id[5] = 5;
    assert_int_equal(hep_graph_build(&g, e, NULL), SAGA_ERR_PARSE);
    saga_test_assert_error_contains("event 1000, hit_id 100006", "found volume_id 5 layer_id 2",
                                    NULL);
    assert_int_equal(g.n_hits, 0);
    e->volume_id[5] = 8, e->layer_id[5] = 10;
    assert_int_equal(hep_graph_build(&g, e, NULL), SAGA_ERR_PARSE);
    saga_test_assert_error_contains("found volume_id 8 layer_id 10", NULL);
    e->volume_id[5] = 17, e->layer_id[5] = 6;
    assert_int_equal(hep_graph_build(&g, e, NULL), SAGA_ERR_PARSE);
    saga_test_assert_error_contains("found volume_id 17 layer_id 6", NULL);
    saga_trackml_event_free(&e);
}

/* One straight particle (pT 10 GeV, z = 4.2 r from the origin) through the whole detector, by
 * hand: pixel barrel layers 0-2 (r 32, 72, 116 mm; at r 172 it is at z 722, beyond the barrel),
 * pixel disks at z 600 and 700 (r 142.9, 166.7), the first short-strip barrel layer (r 260, z
 * 1092), then the short-strip disks at z 1220 .. 2550 (r 290.5 .. 607.1), with a doubled hit on
 * the disk at 1500 (r 358). No hit lies within HEP_EDGE_MARGIN_MM of its layer's edge, so every
 * layer the line meets between two of its hits is crossed. Its 12 true segments: 2 on the barrel,
 * 3 crossing (B2 -> D600, D700 -> B4, B4 -> D1220), 7 on the disks (the doubled hit adds one in
 * and one out). With max_missing 1 each segment over one layer joins too (false): B0 -> B2
 * (barrel); B1 -> D600, B2 -> D700, D600 -> B4, B4 -> D1500 and B4 -> D1500' (crossing); D700 ->
 * D1220, D1220 -> D1800, D1500 -> D2150, D1500' -> D2150, D1800 -> D2550 (end-caps). */
enum { EC_HITS = 12 };
static const struct {
    int32_t volume, layer;
    double r, z;
} EC[EC_HITS] = {
    {8, 2, 32, 4.2 * 32},      {8, 4, 72, 4.2 * 72},      {8, 6, 116, 4.2 * 116},
    {9, 2, 600 / 4.2, 600},    {9, 4, 700 / 4.2, 700},    {13, 2, 260, 4.2 * 260},
    {14, 2, 1220 / 4.2, 1220}, {14, 4, 1500 / 4.2, 1500}, {14, 4, 358, 1500},
    {14, 6, 1800 / 4.2, 1800}, {14, 8, 2150 / 4.2, 2150}, {14, 10, 2550 / 4.2, 2550},
};

static void test_hep_graph_endcaps(void **state) {
    (void)state;
    saga_trackml_event *e = event_new(EC_HITS, 1);
    for (int64_t i = 0; i < EC_HITS; i++) {
        e->x[i] = (float)(EC[i].r * cos(0.7));
        e->y[i] = (float)(EC[i].r * sin(0.7));
        e->z[i] = (float)EC[i].z;
        e->volume_id[i] = EC[i].volume;
        e->layer_id[i] = EC[i].layer;
        e->particle_id[i] = 1;
    }
    e->px[0] = 10.0f, e->py[0] = 0.0f, e->pz[0] = 42.0f;
    hep_event_graph g;
    hep_graph_opts o = hep_graph_opts_defaults();
    const struct {
        int max_missing;
        bool barrel_only;
        int64_t hits, edges, region_edges[3], region_true[3];
    } cases[] = {
        {0, false, 12, 12, {2, 3, 7}, {2, 3, 7}},
        {1, false, 12, 23, {3, 8, 12}, {2, 3, 7}},
        {0, true, 4, 3, {3, 0, 0}, {3, 0, 0}}, /* B2 -> B4 passes the barrel layer it leaves */
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        o.max_missing = cases[c].max_missing;
        o.barrel_only = cases[c].barrel_only;
        assert_int_equal(hep_graph_build(&g, e, &o), SAGA_OK);
        assert_int_equal(g.n_read, EC_HITS);
        assert_int_equal(g.n_endcap, 8);
        assert_int_equal(g.n_left_out, cases[c].barrel_only ? 8 : 0);
        assert_int_equal(g.n_hits, cases[c].hits);
        assert_int_equal(g.region_hits[HEP_REGION_ENDCAP], cases[c].barrel_only ? 0 : 8);
        assert_int_equal(g.n_edges, cases[c].edges);
        int64_t true_edges = 0;
        for (int r = 0; r < HEP_N_SEG_REGIONS; r++) {
            assert_int_equal(g.region_edges[r], cases[c].region_edges[r]);
            assert_int_equal(g.region_true[r], cases[c].region_true[r]);
            assert_int_equal(g.region_segments[r], cases[c].region_true[r]); /* all kept */
            true_edges += cases[c].region_true[r];
        }
        assert_int_equal(g.n_true, true_edges);
        assert_int_equal(g.n_segments, true_edges);
        /* inner to outer */
        for (int64_t k = 0; k < g.n_edges; k++)
            assert_true(g.hit_feat[g.src[k] * HEP_HIT_FEATURES] <
                        g.hit_feat[g.dst[k] * HEP_HIT_FEATURES]);
        /* all of it one track, found when every true edge is kept */
        saga_backend *be = NULL;
        assert_int_equal(saga_backend_cpu_new(&be, NULL), SAGA_OK);
        int64_t found[3], total[3];
        assert_int_equal(hep_track_efficiency_regions(found, total, be, &g, g.truth, NULL, 1.0),
                         SAGA_OK);
        int reg = cases[c].barrel_only ? HEP_SEG_BARREL : HEP_SEG_CROSSING;
        for (int r = 0; r < HEP_N_SEG_REGIONS; r++) {
            assert_int_equal(total[r], r == reg);
            assert_int_equal(found[r], r == reg);
        }
        if (c == 0) {
            /* the doubled hit's two edges in and two out score within HEP_JUNCTION_TOLERANCE of
             * each other, the better ones crosswise (in D1220 -> D1500, out D1500' -> D1800):
             * the junction cut keeps all four. Cutting to the single best would split the track
             * after D1500 (8 of its 12 hits on one side: not found). */
            float score[32];
            for (int64_t k = 0; k < g.n_edges; k++) {
                double ra = g.hit_feat[g.src[k] * HEP_HIT_FEATURES] * 1000.0,
                       rb = g.hit_feat[g.dst[k] * HEP_HIT_FEATURES] * 1000.0;
                bool crosswise = (fabs(ra - 1220 / 4.2) < 0.1 && fabs(rb - 1500 / 4.2) < 0.1) ||
                                 (fabs(ra - 358) < 0.1 && fabs(rb - 1800 / 4.2) < 0.1);
                score[k] = crosswise ? 0.993f : 0.99f;
            }
            assert_int_equal(
                hep_track_efficiency_regions(found, total, be, &g, g.truth, score, 1.0), SAGA_OK);
            assert_int_equal(found[HEP_SEG_CROSSING], 1);
        }
        saga_backend_free_all(&be);
        hep_graph_free(&g);
    }
    saga_trackml_event_free(&e);
}

/* ---- samplers ----------------------------------------------------------------------------- */

static void test_hep_sampler_invariants(void **state) {
    (void)state;
    enum { NE = 37, B = 4 };
    int64_t edges[NE];
    uint64_t s = 5;
    for (int i = 0; i < NE; i++) /* log-uniform sizes, 100 .. 30000 */
        edges[i] = (int64_t)exp(log(100.0) + (log(30000.0) - log(100.0)) *
                                                 (double)(mix64(&s) >> 11) / 9007199254740992.0);
    const int64_t budgets[2] = {0, 20000}; /* the automatic one, and one below the largest */
    for (int smp = 0; smp < HEP_SAMPLER_COUNT; smp++)
        for (int bi = 0; bi < 2; bi++) {
            int32_t first_order[NE];
            bool differs = false;
            for (int epoch = 0; epoch < 3; epoch++) {
                hep_plan p;
                assert_int_equal(
                    hep_plan_epoch(&p, (hep_sampler)smp, edges, NE, B, budgets[bi], 9, epoch),
                    SAGA_OK);
                /* every event exactly once */
                int count[NE] = {0};
                assert_int_equal(p.offsets[0], 0);
                assert_int_equal(p.offsets[p.n_batches], NE);
                for (int i = 0; i < NE; i++)
                    count[p.events[i]]++;
                for (int i = 0; i < NE; i++)
                    assert_int_equal(count[i], 1);
                if (epoch == 0)
                    memcpy(first_order, p.events, sizeof first_order);
                else
                    differs = differs || memcmp(first_order, p.events, sizeof first_order) != 0;
                if (smp != HEP_SAMPLER_BALANCED) {
                    assert_int_equal(p.n_batches, (NE + B - 1) / B);
                    for (int b = 0; b < p.n_batches; b++)
                        assert_true(p.offsets[b + 1] - p.offsets[b] <= B &&
                                    p.offsets[b + 1] > p.offsets[b]);
                }
                if (smp == HEP_SAMPLER_SORTED) {
                    /* each micro-batch is a run of the size order: no event of another batch
                     * lies strictly inside its range */
                    for (int b = 0; b < p.n_batches; b++) {
                        int64_t lo = INT64_MAX, hi = 0;
                        for (int i = p.offsets[b]; i < p.offsets[b + 1]; i++)
                            lo = edges[p.events[i]] < lo ? edges[p.events[i]] : lo,
                            hi = edges[p.events[i]] > hi ? edges[p.events[i]] : hi;
                        for (int i = 0; i < NE; i++)
                            if (i < p.offsets[b] || i >= p.offsets[b + 1])
                                assert_false(edges[p.events[i]] > lo && edges[p.events[i]] < hi);
                    }
                }
                if (smp == HEP_SAMPLER_BALANCED) {
                    if (budgets[bi] == 0)
                        assert_true(p.n_batches <= (NE + B - 1) / B);
                    else
                        assert_int_equal(p.budget, budgets[bi]);
                    for (int b = 0; b < p.n_batches; b++) {
                        int64_t sum = 0;
                        int cnt = p.offsets[b + 1] - p.offsets[b];
                        for (int i = p.offsets[b]; i < p.offsets[b + 1]; i++)
                            sum += edges[p.events[i]];
                        assert_true(cnt >= 1);
                        assert_true(sum <= p.budget || cnt == 1);
                    }
                }
                hep_plan_free(&p);
            }
            assert_true(differs); /* the epochs are shuffled */
        }
    /* the automatic budget is the least one that packs into ceil(n / B) bins ... */
    hep_plan p, q;
    assert_int_equal(hep_plan_epoch(&p, HEP_SAMPLER_BALANCED, edges, NE, B, 0, 1, 0), SAGA_OK);
    assert_int_equal(hep_plan_epoch(&q, HEP_SAMPLER_BALANCED, edges, NE, B, p.budget - 1, 1, 0),
                     SAGA_OK);
    /* ... unless it is already the lower bound: the largest event, or the mean per bin */
    int64_t total = 0, largest = 0;
    for (int i = 0; i < NE; i++)
        total += edges[i], largest = edges[i] > largest ? edges[i] : largest;
    int64_t bound = (total + (NE + B - 1) / B - 1) / ((NE + B - 1) / B);
    bound = bound > largest ? bound : largest;
    assert_true(p.budget >= bound);
    assert_true(q.n_batches > (NE + B - 1) / B || p.budget == bound);
    hep_plan_free(&p);
    hep_plan_free(&q);
    assert_int_equal(hep_plan_epoch(&p, HEP_SAMPLER_RANDOM, edges, 0, B, 0, 1, 0),
                     SAGA_ERR_INVALID_ARG);
}

/* ---- metrics ------------------------------------------------------------------------------ */

static void test_hep_auc_matches_pair_count(void **state) {
    (void)state;
    enum { NS = 300 };
    float score[NS];
    uint8_t label[NS];
    uint64_t s = 3;
    for (int i = 0; i < NS; i++) {
        label[i] = (mix64(&s) & 3) == 0;
        /* coarse scores: many ties, positives shifted up */
        score[i] = (float)((int)(mix64(&s) % 20) + (label[i] ? 6 : 0)) / 30.0f;
    }
    double wins = 0, pairs = 0;
    for (int i = 0; i < NS; i++)
        for (int j = 0; j < NS; j++)
            if (label[i] && !label[j]) {
                pairs++;
                wins += score[i] > score[j] ? 1.0 : score[i] == score[j] ? 0.5 : 0.0;
            }
    /* the positives' rank sum less its least is the count of wins (ties a half): both sides hold
     * the same exact numerator and denominator and round their quotient once, to the same bits */
    assert_true(hep_auc(score, label, NS) == wins / pairs);
    uint8_t none[3] = {0, 0, 0};
    assert_true(hep_auc(score, none, 3) == 0.5);
}

/* The curve at every threshold against a direct count, scores on the thresholds included (an
 * edge is kept when its score is strictly above). */
static void test_hep_curve_matches_direct_count(void **state) {
    (void)state;
    enum { NS = 400 };
    float score[NS];
    uint8_t label[NS];
    uint64_t s = 5;
    for (int i = 0; i < NS; i++) {
        label[i] = (mix64(&s) & 1) == 0;
        int k = (int)(mix64(&s) % 101);
        /* half exactly on a threshold (as a float), half between two */
        score[i] = (i & 1) ? (float)k / 100.0f : (float)(k + 0.5) / 101.0f;
    }
    hep_curve cv;
    hep_curve_of(&cv, score, label, NS);
    int64_t n_true = 0;
    for (int i = 0; i < NS; i++)
        n_true += label[i];
    assert_int_equal(cv.n_true, n_true);
    assert_int_equal(cv.n_false, NS - n_true);
    for (int t = 0; t < HEP_CURVE_POINTS; t++) {
        double th = t / 100.0;
        assert_true(cv.threshold[t] == th);
        int64_t tp = 0, fp = 0;
        for (int i = 0; i < NS; i++)
            if (score[i] > th)
                label[i] ? tp++ : fp++;
        /* ratios of exact counts, each rounded once: the same bits */
        if (cv.efficiency[t] != (double)tp / (double)n_true ||
            cv.fpr[t] != (double)fp / (double)(NS - n_true))
            fail_msg("threshold %g: efficiency %g fpr %g, counted %lld and %lld kept", th,
                     cv.efficiency[t], cv.fpr[t], (long long)tp, (long long)fp);
        if (tp + fp)
            assert_true(cv.purity[t] == (double)tp / (double)(tp + fp));
        else
            assert_true(isnan(cv.purity[t]));
    }
    assert_true(cv.efficiency[0] > 0.9 && cv.efficiency[HEP_CURVE_POINTS - 1] == 0.0);
}

static void test_hep_track_efficiency_by_hand(void **state) {
    (void)state;
    saga_trackml_event *e = tiny_event();
    hep_event_graph g;
    hep_graph_opts o = hep_graph_opts_defaults();
    o.phi_slope_max = 0.0006, o.z0_max = 350; /* the cuts the arithmetic below uses */
    o.max_missing = 0; /* the eight edges of test_hep_graph_construction_tiny_event */
    assert_int_equal(hep_graph_build(&g, e, &o), SAGA_OK);
    saga_backend *be = NULL;
    assert_int_equal(saga_backend_cpu_new(&be, NULL), SAGA_OK);
    uint8_t kept[8];
    int64_t found, total;
    /* the true edges: the three tracks */
    assert_int_equal(hep_track_efficiency(&found, &total, be, &g, g.truth, NULL, 1.0), SAGA_OK);
    assert_int_equal(total, 3);
    assert_int_equal(found, 3);
    /* every edge: particle 1 shares its component with noise hit 9, still 3 of 4 hits */
    memset(kept, 1, sizeof kept);
    assert_int_equal(hep_track_efficiency(&found, &total, be, &g, kept, NULL, 1.0), SAGA_OK);
    assert_int_equal(found, 3);
    /* junctions cut by score: hit 0 has two kept edges out (to 1 and to noise 9) and hit 2 two
     * in (from 1 and from 9); with the true edges ahead particle 1 is the chain 0-1-2 and 9 is
     * alone; with the wrong ones ahead the chain is 0-9-2 and hit 1 alone: 2 of 3 hits */
    float score[8] = {0};
    for (int64_t k = 0; k < g.n_edges; k++)
        score[k] = g.truth[k] ? 0.9f : 0.6f;
    assert_int_equal(hep_track_efficiency(&found, &total, be, &g, kept, score, 1.0), SAGA_OK);
    assert_int_equal(found, 3);
    for (int64_t k = 0; k < g.n_edges; k++)
        score[k] = g.truth[k] ? 0.9f : 0.95f;
    assert_int_equal(hep_track_efficiency(&found, &total, be, &g, kept, score, 1.0), SAGA_OK);
    assert_int_equal(found, 2);
    /* an edge not kept takes no part, whatever its score */
    for (int64_t k = 0; k < g.n_edges; k++)
        kept[k] = g.truth[k];
    assert_int_equal(hep_track_efficiency(&found, &total, be, &g, kept, score, 1.0), SAGA_OK);
    assert_int_equal(found, 3);
    /* nothing kept: every hit alone, 1 of 3 */
    memset(kept, 0, sizeof kept);
    assert_int_equal(hep_track_efficiency(&found, &total, be, &g, kept, NULL, 1.0), SAGA_OK);
    assert_int_equal(found, 0);
    /* the first segment of each track only: 2 of 3 hits, below 75% */
    int n_kept = 0;
    for (int64_t k = 0; k < g.n_edges; k++)
        n_kept += kept[k] = g.truth[k] && g.hit_feat[g.src[k] * HEP_HIT_FEATURES] < 0.05f;
    assert_int_equal(n_kept, 3);
    assert_int_equal(hep_track_efficiency(&found, &total, be, &g, kept, NULL, 1.0), SAGA_OK);
    assert_int_equal(found, 0);
    /* a track cut needs pT above it */
    assert_int_equal(hep_track_efficiency(&found, &total, be, &g, g.truth, NULL, 2.5), SAGA_OK);
    assert_int_equal(total, 0);
    saga_backend_free_all(&be);
    hep_graph_free(&g);
    saga_trackml_event_free(&e);
}

/* The cosine schedule: lr at the first epoch, 1% of it at the last, the mean halfway; constant
 * everywhere lr; and the matrix products' count at a width and depth worked by hand. */
static void test_hep_lr_schedule_and_flops(void **state) {
    (void)state;
    hep_train_opts o = hep_train_opts_defaults();
    assert_int_equal(o.lr_schedule, HEP_LR_COSINE);
    o.lr = 0.01f;
    o.epochs = 21;
    assert_true(fabsf(hep_lr_at(&o, 1) - 0.01f) < 1e-9f);
    assert_true(fabsf(hep_lr_at(&o, 21) - 0.0001f) < 1e-9f);
    assert_true(fabsf(hep_lr_at(&o, 11) - 0.00505f) < 1e-8f);
    for (int e = 2; e <= 21; e++)
        assert_true(hep_lr_at(&o, e) < hep_lr_at(&o, e - 1));
    o.lr_schedule = HEP_LR_CONSTANT;
    assert_true(hep_lr_at(&o, 1) == 0.01f && hep_lr_at(&o, 21) == 0.01f);
    /* H = 2, K = 1, one edge, one hit: per edge 11*2 + 4 + 16 + 12 + 2 = 56, per hit 3*2 + 4 +
     * 16 = 26; forward and backward: 3 x 2 x 82 */
    assert_true(hep_step_flops(2, 1, 1, 1) == 3.0 * 2 * (56 + 26));
    assert_true(hep_step_flops(2, 1, 0, 0) == 0.0);
}

/* ---- the network -------------------------------------------------------------------------- */

static double net_loss(saga_ctx *c, hep_net *net, const hep_batch *b) {
    saga_ctx_train(c, false);
    saga_tensor *l = saga_bce_logits(c, hep_net_forward(c, net, b), b->target, 1.5f);
    assert_non_null(l);
    double v = saga_item(l);
    saga_ctx_clear(c);
    return v;
}

/* The whole Interaction Network (encoders, two rounds of the edge and node updates through
 * saga_program_run_edges, the score) against central differences of its BCE loss. */
static void test_hep_in_layer_gradients_match_finite_differences(void **state) {
    (void)state;
    saga_trackml_event *e = tiny_event();
    hep_event_graph g;
    hep_graph_opts o = hep_graph_opts_defaults();
    o.max_missing = 0; /* the eight edges of test_hep_graph_construction_tiny_event */
    assert_int_equal(hep_graph_build(&g, e, &o), SAGA_OK);
    saga_backend *be = NULL;
    assert_int_equal(saga_backend_cpu_new(&be, NULL), SAGA_OK);
    hep_net net;
    assert_int_equal(hep_net_new(&net, be, 4, 2, 3), SAGA_OK);
    /* non-zero biases, so that every parameter matters */
    uint64_t s = 11;
    for (int i = 0; i < saga_model_n_params(net.m); i++) {
        saga_tensor *p = saga_model_param_at(net.m, i);
        float *v = saga_tensor_data(p);
        for (int64_t j = 0; j < saga_tensor_rows(p) * saga_tensor_cols(p); j++)
            v[j] += (float)(0.3 * ((double)(mix64(&s) >> 11) / 9007199254740992.0 - 0.5));
    }
    hep_batch b;
    int32_t id = 0;
    assert_int_equal(hep_batch_new(&b, be, &g, &id, 1), SAGA_OK);
    saga_ctx *c = NULL;
    assert_int_equal(saga_ctx_new(&c, be, 1), SAGA_OK);
    saga_ctx_train(c, true);
    saga_tensor *loss = saga_bce_logits(c, hep_net_forward(c, &net, &b), b.target, 1.5f);
    assert_non_null(loss);
    assert_int_equal(saga_backward(c, loss), SAGA_OK);
    saga_ctx_clear(c);
    const double eps = 1e-3, tol = 2e-2;
    int checked = 0, kinks = 0;
    double l0 = net_loss(c, &net, &b);
    for (int i = 0; i < saga_model_n_params(net.m); i++) {
        saga_tensor *p = saga_model_param_at(net.m, i);
        const float *gr = saga_tensor_cdata(saga_grad(p));
        float *v = saga_tensor_data(p);
        for (int64_t j = 0; j < saga_tensor_rows(p) * saga_tensor_cols(p); j++) {
            float keep = v[j];
            v[j] = keep + (float)eps;
            double lp = net_loss(c, &net, &b);
            v[j] = keep - (float)eps;
            double lm = net_loss(c, &net, &b);
            v[j] = keep;
            double fd = (lp - lm) / (2 * eps);
            /* a ReLU input within eps of 0 makes the loss bend inside [-eps, eps]: the one-sided
             * differences then disagree and the central one means nothing there */
            if (fabs((lp - l0) - (l0 - lm)) / eps > tol * (fabs(fd) + 1e-2)) {
                kinks++;
                continue;
            }
            if (fabs(fd - gr[j]) > tol * (fabs(fd) + 1e-2)) {
                print_message("d/d %s[%lld]: backward %.6g, finite difference %.6g\n",
                              saga_model_param_name(net.m, i), (long long)j, (double)gr[j], fd);
                fail();
            }
            checked++;
        }
    }
    print_message("%d parameters checked, %d skipped on a ReLU kink\n", checked, kinks);
    if (kinks * 20 > checked)
        fail_msg("%d of %d parameters sit on a ReLU kink: the check means little", kinks, checked);
    assert_true(checked > 200);
    saga_ctx_free(&c);
    hep_batch_free(&b);
    hep_net_free(&net);
    saga_backend_free_all(&be);
    hep_graph_free(&g);
    saga_trackml_event_free(&e);
}

/* ---- training ----------------------------------------------------------------------------- */

typedef struct losses {
    double first, last;
    int n;
} losses;

static saga_status record_loss(const hep_epoch *e, void *user) {
    losses *l = user;
    if (l->n++ == 0)
        l->first = e->loss;
    l->last = e->loss;
    assert_true(e->peak_bytes > 0);
    assert_true(e->n_batches >= 1);
    return SAGA_OK;
}

/* n generated events (min .. max particles, from seed) built with the default cuts, the first
 * n_train for training; every one has true edges. */
static void generated_events(hep_data *d, int32_t n, int32_t n_train, int32_t min, int32_t max,
                             uint64_t seed) {
    saga_trackml_params gp = saga_trackml_params_defaults();
    gp.min_particles = min;
    gp.max_particles = max;
    gp.seed = seed;
    *d = (hep_data){.graph = hep_graph_opts_defaults(), .n_events = n, .n_train = n_train};
    d->events = saga_calloc((size_t)n, sizeof *d->events);
    assert_non_null(d->events);
    for (int32_t i = 0; i < n; i++) {
        saga_trackml_event *e = NULL;
        assert_int_equal(saga_trackml_generate(&e, &gp, i + 1), SAGA_OK);
        assert_int_equal(hep_graph_build(&d->events[i], e, &d->graph), SAGA_OK);
        assert_true(d->events[i].n_true > 0);
        saga_trackml_event_free(&e);
    }
}

/* A few small generated events, trained briefly: the loss falls and the held-out AUC is high. */
static void test_hep_training_learns(void **state) {
    (void)state;
    hep_data d;
    generated_events(&d, 10, 8, 120, 400, 3);
    saga_backend *be = NULL;
    assert_int_equal(saga_backend_cpu_new(&be, NULL), SAGA_OK);
    hep_train_opts o = hep_train_opts_defaults();
    o.epochs = 12;
    o.hidden = 16;
    o.iterations = 3;
    o.lr = 0.005f;
    o.batch_events = 2;
    losses l = {0};
    hep_run r;
    assert_int_equal(hep_train(&r, be, &d, &o, record_loss, &l), SAGA_OK);
    print_message("loss %.4f -> %.4f, AUC %.4f, edge efficiency %.4f, purity %.4f\n", l.first,
                  l.last, r.metrics.auc, r.metrics.edge_efficiency, r.metrics.edge_purity);
    assert_int_equal(l.n, 12);
    assert_true(l.last < 0.7 * l.first);
    assert_true(r.metrics.auc > 0.9);
    assert_true(r.metrics.n_tracks > 0);
    assert_int_equal(r.n_batches, 4);
    saga_backend_free_all(&be);
    hep_data_free(&d);
}

/* ---- streamed through the device budget ---------------------------------------------------- */

/* A training step's loss and every parameter's gradient (host, in the model's order). */
typedef struct step_out {
    double loss;
    float *grads, *scores; /* the parameters' gradients; the edges' scores after the step */
    int64_t n, m;
    size_t peak;
} step_out;

static void step_grads(hep_net *net, step_out *o) {
    o->n = saga_model_n_scalars(net->m);
    o->grads = test_malloc((size_t)o->n * sizeof(float));
    assert_int_equal(saga_model_copy_grads(net->m, o->grads, false), SAGA_OK);
    assert_int_equal(saga_backend_synchronize(saga_tensor_backend(saga_model_param_at(net->m, 0))),
                     SAGA_OK);
}

/* One step of the model (hidden 8, 3 rounds, seed 5) on the events' micro-batch on a CPU
 * backend with budget (0: none), in memory (s NULL) or streamed by s: SAGA_OK or the error. */
static saga_status hep_step_on(const hep_data *d, const int32_t *ids, int32_t n, size_t budget,
                               hep_stream *s, step_out *o) {
    saga_backend_params bp = saga_backend_params_defaults();
    bp.budget_bytes = budget;
    saga_backend *be = NULL;
    assert_int_equal(saga_backend_cpu_new(&be, &bp), SAGA_OK);
    hep_net net;
    assert_int_equal(hep_net_new(&net, be, 8, 3, 5), SAGA_OK);
    saga_ctx *c = NULL;
    assert_int_equal(saga_ctx_new(&c, be, 1), SAGA_OK);
    saga_backend_reset_stats(be);
    saga_status st = SAGA_OK;
    if (s) {
        hep_rows r;
        assert_int_equal(hep_rows_new(&r, d->events, ids, n), SAGA_OK);
        st = hep_stream_step(s, c, &net, &r, 1.5f, &o->loss);
        hep_rows_free(&r);
    } else {
        hep_batch b;
        assert_int_equal(hep_batch_new(&b, be, d->events, ids, n), SAGA_OK);
        saga_ctx_train(c, true);
        saga_tensor *l = saga_bce_logits(c, hep_net_forward(c, &net, &b), b.target, 1.5f);
        st = saga_ctx_status(c);
        if (st == SAGA_OK) {
            o->loss = saga_item(l);
            st = saga_backward(c, l);
        }
        saga_ctx_clear(c);
        hep_batch_free(&b);
    }
    saga_backend_stats bs;
    saga_backend_get_stats(be, &bs);
    o->peak = bs.peak_bytes;
    if (st == SAGA_OK) {
        step_grads(&net, o);
        /* the scores of inference (the same weights), streamed or in memory */
        hep_rows r;
        assert_int_equal(hep_rows_new(&r, d->events, ids, n), SAGA_OK);
        o->m = r.n_edges;
        o->scores = test_malloc((size_t)r.n_edges * sizeof(float));
        if (s) {
            st = hep_stream_scores(s, c, &net, &r, o->scores);
        } else {
            hep_batch b;
            assert_int_equal(hep_batch_new(&b, be, d->events, ids, n), SAGA_OK);
            saga_ctx_train(c, false);
            saga_tensor *p = saga_sigmoid(c, hep_net_forward(c, &net, &b));
            st = saga_ctx_status(c);
            if (st == SAGA_OK)
                st = saga_tensor_to_host(p, o->scores);
            saga_ctx_clear(c);
            hep_batch_free(&b);
        }
        hep_rows_free(&r);
    }
    saga_ctx_free(&c);
    hep_net_free(&net);
    saga_backend_free_all(&be);
    return st;
}

/* The bound on two training steps of that model that add in different orders (the chunks' sums
 * of the messages on the host, the parameters' gradients summed chunk by chunk): a chain of sums
 * (test_util.h) through the encoders, three rounds (each edge block's two products, the sums of
 * messages over the largest degree, the node block's two products), the score and the mean over
 * the m edges, forward and back, and the gradients' sums over the m edges. */
static double hep_step_bound(int64_t m, int64_t degree) {
    saga_test_chain ch = {0, 0};
    saga_test_chain_add(&ch, HEP_EDGE_FEATURES, 2);
    saga_test_chain_add(&ch, 8, 2);
    for (int k = 0; k < 3; k++) {
        saga_test_chain_add(&ch, 24, 4);
        saga_test_chain_add(&ch, 8, 4);
        saga_test_chain_add(&ch, degree, 4);
    }
    saga_test_chain_add(&ch, 24, 2);
    saga_test_chain_add(&ch, 8, 2);
    saga_test_chain_add(&ch, m, 2);
    return ch.rel;
}

/* A training step streamed by chunks of edges and hits gives the in-memory step's loss and every
 * parameter's gradient within the bound on adding in other orders: by chunks of 97 rows (the
 * last ones short), and under a budget of a quarter of the in-memory step's peak, where the
 * chunk is chosen from the budget, the peak stays under it, and the step in memory fails. */
static void test_hep_streamed_step_equals_memory(void **state) {
    (void)state;
    hep_data d;
    generated_events(&d, 2, 2, 150, 300, 7);
    int64_t m = 0, degree = 1;
    for (int i = 0; i < 2; i++) {
        m += d.events[i].n_edges;
        int32_t *deg = test_calloc((size_t)d.events[i].n_hits * 2 + 1, sizeof *deg);
        for (int64_t k = 0; k < d.events[i].n_edges; k++) {
            int32_t a = ++deg[2 * d.events[i].src[k]], b = ++deg[2 * d.events[i].dst[k] + 1];
            degree = a > degree ? a : degree;
            degree = b > degree ? b : degree;
        }
        test_free(deg);
    }
    const int32_t ids[2] = {0, 1};
    step_out mem = {0}, str = {0}, tight = {0};
    assert_int_equal(hep_step_on(&d, ids, 2, 0, NULL, &mem), SAGA_OK);
    const double bound = hep_step_bound(m, degree);
    double scale = saga_test_mean_abs_f32(mem.grads, mem.n);

    hep_stream s = {.chunk = 97};
    assert_int_equal(hep_step_on(&d, ids, 2, 0, &s, &str), SAGA_OK);
    print_message("  %lld edges: loss %.7f in memory, %.7f by %lld chunks of 97 (bound %.2g)\n",
                  (long long)m, mem.loss, str.loss, (long long)s.chunks, bound);
    assert_true(s.chunks > 100);
    saga_test_assert_close_f64("streamed loss", &mem.loss, &str.loss, 1, bound, 0);
    saga_test_assert_close_f32("streamed gradients", mem.grads, str.grads, mem.n, bound, scale);
    saga_test_assert_close_f32("streamed scores", mem.scores, str.scores, mem.m, bound, 0);
    hep_stream_free(&s);

    const size_t budget = mem.peak / 4;
    step_out fail_out = {0};
    assert_int_equal(hep_step_on(&d, ids, 2, budget, NULL, &fail_out), SAGA_ERR_BUDGET);
    hep_stream t = {0};
    saga_status st = hep_step_on(&d, ids, 2, budget, &t, &tight);
    if (st != SAGA_OK)
        fail_msg("streamed under %zu bytes: %s", budget, saga_last_error());
    print_message("  in memory peak %zu; under a quarter, %zu: chunks of %lld, peak %zu\n",
                  mem.peak, budget, (long long)t.chunk, tight.peak);
    assert_true(tight.peak <= budget);
    saga_test_assert_close_f64("loss under the budget", &mem.loss, &tight.loss, 1, bound, 0);
    saga_test_assert_close_f32("gradients under the budget", mem.grads, tight.grads, mem.n, bound,
                               scale);
    saga_test_assert_close_f32("scores under the budget", mem.scores, tight.scores, mem.m, bound,
                               0);
    hep_stream_free(&t);
    /* the evaluation under that budget scores each event streamed where it does not fit: the
     * same edges, and an AUC that only near-ties of scores (equal within the bound) could move */
    hep_metrics em[2];
    size_t eval_budget[2] = {0, budget / 4};
    for (int i = 0; i < 2; i++) {
        saga_backend_params bp = saga_backend_params_defaults();
        bp.budget_bytes = eval_budget[i];
        saga_backend *be = NULL;
        assert_int_equal(saga_backend_cpu_new(&be, &bp), SAGA_OK);
        hep_net net;
        assert_int_equal(hep_net_new(&net, be, 8, 3, 5), SAGA_OK);
        if (eval_budget[i]) { /* an event's scores do not fit in memory there */
            saga_ctx *c = NULL;
            assert_int_equal(saga_ctx_new(&c, be, 0), SAGA_OK);
            hep_batch b = {0};
            float *sc = test_malloc((size_t)d.events[0].n_edges * sizeof *sc);
            assert_int_equal(score_memory(c, &net, be, d.events, 0, &b, sc), SAGA_ERR_BUDGET);
            test_free(sc);
            hep_batch_free(&b);
            saga_ctx_free(&c);
        }
        if (hep_evaluate(&em[i], be, &net, d.events, 0, 2, 0.5, 1.0) != SAGA_OK)
            fail_msg("evaluation under %zu bytes: %s", eval_budget[i], saga_last_error());
        saga_backend_stats bs;
        saga_backend_get_stats(be, &bs);
        assert_true(!eval_budget[i] || bs.peak_bytes <= eval_budget[i]);
        hep_net_free(&net);
        saga_backend_free_all(&be);
    }
    print_message("  evaluation: AUC %.6f in memory, %.6f under %zu bytes\n", em[0].auc, em[1].auc,
                  budget / 4);
    assert_int_equal(em[0].n_edges, em[1].n_edges);
    assert_true(fabs(em[0].auc - em[1].auc) <= 1e-3);
    step_out *outs[3] = {&mem, &str, &tight};
    for (int i = 0; i < 3; i++) {
        test_free(outs[i]->grads);
        test_free(outs[i]->scores);
    }
    hep_data_free(&d);
}

/* ---- export ------------------------------------------------------------------------------- */

/* The .npy entry `name` of the archive b[0 .. len): its header dict in *dict and its data. */
static const unsigned char *npz_entry_data(const unsigned char *b, size_t len, const char *name,
                                           const char **dict) {
    size_t pos = 0, nlen = strlen(name);
    while (pos + 30 <= len && b[pos] == 'P' && b[pos + 1] == 'K' && b[pos + 2] == 3) {
        const unsigned char *l = b + pos;
        uint32_t size = l[18] | l[19] << 8 | (uint32_t)l[20] << 16 | (uint32_t)l[21] << 24;
        size_t fl = (size_t)(l[26] | l[27] << 8);
        const unsigned char *npy = l + 30 + fl;
        if (fl == nlen + 4 && memcmp(l + 30, name, nlen) == 0 &&
            memcmp(l + 30 + nlen, ".npy", 4) == 0) {
            *dict = (const char *)npy + 10;
            return npy + 10 + (npy[8] | npy[9] << 8);
        }
        pos += 30 + fl + size;
    }
    fail_msg("no entry %s.npy in the archive", name);
    return NULL;
}

static void test_hep_export_tiny_event(void **state) {
    (void)state;
    saga_trackml_event *e = tiny_event();
    e->event_id = 7;
    hep_event_graph g;
    hep_graph_opts o = hep_graph_opts_defaults();
    o.phi_slope_max = 0.0006, o.z0_max = 350; /* the cuts the arithmetic below uses */
    o.max_missing = 0; /* the eight edges of test_hep_graph_construction_tiny_event */
    assert_int_equal(hep_graph_build(&g, e, &o), SAGA_OK);
    const char *path = saga_test_tmp("event7.npz");
    assert_int_equal(hep_graph_export(&g, path), SAGA_OK);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    static unsigned char b[1 << 16];
    size_t len = fread(b, 1, sizeof b, f);
    fclose(f);
    assert_true(len > 0 && len < sizeof b);
    const char *dict = NULL;
    char want[128];
    int64_t n = g.n_hits, m = g.n_edges;

    const float *x = (const float *)npz_entry_data(b, len, "x", &dict);
    snprintf(want, sizeof want, "{'descr': '<f4', 'fortran_order': False, 'shape': (%lld, 3), }",
             (long long)n);
    assert_memory_equal(dict, want, strlen(want));
    assert_memory_equal(x, g.hit_feat, (size_t)n * 3 * sizeof(float));

    /* PyG's layout: row 0 the sources (inner hits), row 1 the targets */
    /* an entry's data starts wherever the ZIP puts it: read its values with memcpy */
    const unsigned char *ei = (const unsigned char *)npz_entry_data(b, len, "edge_index", &dict);
    snprintf(want, sizeof want, "{'descr': '<i8', 'fortran_order': False, 'shape': (2, %lld), }",
             (long long)m);
    assert_memory_equal(dict, want, strlen(want));
    const float *ea = (const float *)npz_entry_data(b, len, "edge_attr", &dict);
    assert_non_null(strstr(dict, "'shape': (8, 11), }"));
    const unsigned char *y = (const unsigned char *)npz_entry_data(b, len, "y", &dict);
    assert_non_null(strstr(dict, "{'descr': '<f4', 'fortran_order': False, 'shape': (8,), }"));
    int64_t n_true = 0;
    for (int64_t k = 0; k < m; k++) {
        int64_t src, dst;
        float yk;
        memcpy(&src, ei + k * (int64_t)sizeof src, sizeof src);
        memcpy(&dst, ei + (m + k) * (int64_t)sizeof dst, sizeof dst);
        memcpy(&yk, y + k * (int64_t)sizeof yk, sizeof yk);
        assert_int_equal(src, g.src[k]);
        assert_int_equal(dst, g.dst[k]);
        assert_true(yk == (g.truth[k] ? 1.0f : 0.0f));
        n_true += yk == 1.0f;
    }
    assert_int_equal(n_true, 6);
    assert_memory_equal(ea, g.edge_feat, (size_t)m * HEP_EDGE_FEATURES * sizeof(float));
    const int64_t *hp = (const int64_t *)npz_entry_data(b, len, "hit_particle", &dict);
    assert_non_null(strstr(dict, "'descr': '<i8'"));
    assert_memory_equal(hp, g.hit_particle, (size_t)n * sizeof(int64_t));
    const float *pt = (const float *)npz_entry_data(b, len, "hit_pt", &dict);
    assert_memory_equal(pt, g.hit_pt, (size_t)n * sizeof(float));

    /* a directory that does not exist: the error names the file */
    const char *bad = "/nonexistent-dir-of-the-test/event7.npz";
    assert_int_equal(hep_graph_export(&g, bad), SAGA_ERR_IO);
    saga_test_assert_error_contains(bad, NULL);
    hep_graph_free(&g);
    saga_trackml_event_free(&e);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hep_graph_construction_tiny_event),
        cmocka_unit_test(test_hep_graph_skips_layers_a_track_leaves),
        cmocka_unit_test(test_hep_graph_counts_endcap_hits_left_out),
        cmocka_unit_test(test_hep_graph_endcaps),
        cmocka_unit_test(test_hep_sampler_invariants),
        cmocka_unit_test(test_hep_auc_matches_pair_count),
        cmocka_unit_test(test_hep_curve_matches_direct_count),
        cmocka_unit_test(test_hep_track_efficiency_by_hand),
        cmocka_unit_test(test_hep_lr_schedule_and_flops),
        cmocka_unit_test(test_hep_in_layer_gradients_match_finite_differences),
        cmocka_unit_test(test_hep_training_learns),
        cmocka_unit_test(test_hep_streamed_step_equals_memory),
        cmocka_unit_test(test_hep_export_tiny_event),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
