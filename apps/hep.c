/* hep.c - track finding: event graphs, the samplers, the Interaction Network as a vertex
 * program, training and the metrics (edge efficiency and purity, ROC AUC, track efficiency). */
#include "hep.h"

#include "cc.h"
#include "npz.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif

/* ---- graphs ------------------------------------------------------------------------------- */

hep_graph_opts hep_graph_opts_defaults(void) {
    return (hep_graph_opts){
        .pt_min = 1.0, .phi_slope_max = 0.0005, .z0_max = 250.0, .max_missing = 1};
}

void hep_graph_free(hep_event_graph *g) {
    if (!g)
        return;
    saga_free(g->hit_feat);
    saga_free(g->hit_particle);
    saga_free(g->hit_pt);
    saga_free(g->src);
    saga_free(g->dst);
    saga_free(g->edge_feat);
    saga_free(g->truth);
    saga_free(g->hit_region);
    memset(g, 0, sizeof *g);
}

typedef struct id_row {
    int64_t id;
    int64_t row;
} id_row;

static int cmp_id_row(const void *a, const void *b) {
    const id_row *x = a, *y = b;
    if (x->id != y->id)
        return x->id < y->id ? -1 : 1;
    return (x->row > y->row) - (x->row < y->row);
}

/* A kept hit while the graph is built. */
typedef struct khit {
    int layer;
    double r, phi, z;
    int64_t particle;
    float pt;
} khit;

static int cmp_khit(const void *a, const void *b) {
    const khit *x = a, *y = b;
    if (x->layer != y->layer)
        return x->layer < y->layer ? -1 : 1;
    return (x->phi > y->phi) - (x->phi < y->phi);
}

/* First index in [lo, hi) of hits sorted by phi with phi >= v. */
static int32_t lower_phi(const khit *h, int32_t lo, int32_t hi, double v) {
    while (lo < hi) {
        int32_t mid = lo + (hi - lo) / 2;
        if (h[mid].phi < v)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

typedef struct edge_buf {
    int32_t *src, *dst;
    float *feat;
    int64_t n, cap;
    /* the detector's layers, copied once per graph: the crossing count reads them for every
     * candidate segment */
    saga_trackml_layer geo[SAGA_TRACKML_N_LAYERS];
    /* of them, those a segment between the layer pair being scanned may cross (a superset) */
    int between[SAGA_TRACKML_N_LAYERS], n_between;
} edge_buf;

static saga_status edge_push(edge_buf *b, int32_t u, int32_t v, const float *f) {
    saga_status st = SAGA_OK;
    if (b->n == b->cap) {
        int64_t cap = b->cap ? b->cap * 2 : 1024;
        SAGA_TRY(saga_realloc_array((void **)&b->src, (size_t)cap, sizeof *b->src, "edges"));
        SAGA_TRY(saga_realloc_array((void **)&b->dst, (size_t)cap, sizeof *b->dst, "edges"));
        SAGA_TRY(saga_realloc_array((void **)&b->feat, (size_t)cap * HEP_EDGE_FEATURES,
                                    sizeof *b->feat, "edge features"));
        b->cap = cap;
    }
    b->src[b->n] = u;
    b->dst[b->n] = v;
    memcpy(b->feat + b->n * HEP_EDGE_FEATURES, f, HEP_EDGE_FEATURES * sizeof *f);
    b->n++;
fail:
    return st;
}

const char *const HEP_SEG_REGION_NAMES[HEP_N_SEG_REGIONS] = {"barrel", "crossing", "endcap"};

static int hit_region_of(int layer) {
    return layer < SAGA_TRACKML_N_BARREL ? HEP_REGION_BARREL : HEP_REGION_ENDCAP;
}

/* Of the layers eb->between, those that the straight line in (r, z) from hit a to hit b (dr > 0)
 * crosses strictly between them, more than HEP_EDGE_MARGIN_MM inside their bounds. */
static int crossings(const edge_buf *eb, const khit *a, const khit *b, double dr, double dz) {
    int n = 0;
    for (int q = 0; q < eb->n_between; q++) {
        int m = eb->between[q];
        const saga_trackml_layer *L = &eb->geo[m];
        if (!L->disk) {
            if (!(L->r_min > a->r && L->r_min < b->r))
                continue;
            double zm = a->z + (L->r_min - a->r) * dz / dr;
            n += zm > L->z_min + HEP_EDGE_MARGIN_MM && zm < L->z_max - HEP_EDGE_MARGIN_MM;
        } else {
            double zc = L->z_min;
            if (!((zc > a->z && zc < b->z) || (zc < a->z && zc > b->z)))
                continue;
            double rm = a->r + (zc - a->z) * dr / dz; /* dz != 0: zc lies strictly between */
            n += rm > L->r_min + HEP_EDGE_MARGIN_MM && rm < L->r_max - HEP_EDGE_MARGIN_MM;
        }
    }
    return n;
}

/* The segment a -> b if it passes the cuts (see hep.h). */
static saga_status try_segment(edge_buf *eb, const khit *h, int32_t a, int32_t b,
                               const hep_graph_opts *o) {
    double dr = h[b].r - h[a].r;
    double dphi = h[b].phi - h[a].phi;
    if (dphi > M_PI)
        dphi -= 2 * M_PI;
    else if (dphi < -M_PI)
        dphi += 2 * M_PI;
    if (dr <= 0 || fabs(dphi / dr) > o->phi_slope_max)
        return SAGA_OK;
    double dz = h[b].z - h[a].z;
    double z0 = h[a].z - h[a].r * dz / dr;
    if (fabs(z0) > o->z0_max)
        return SAGA_OK;
    if (crossings(eb, &h[a], &h[b], dr, dz) > o->max_missing)
        return SAGA_OK; /* it crosses layers where its particle would have left hits */
    double eta_a = asinh(h[a].z / h[a].r), eta_b = asinh(h[b].z / h[b].r);
    /* the curvature of the circle through the beam line and both hits (the chord between the
     * hits subtends dphi at the origin): the same on every segment of one particle's helix,
     * where dphi/dr changes with r */
    double chord = sqrt(h[a].r * h[a].r + h[b].r * h[b].r - 2 * h[a].r * h[b].r * cos(dphi));
    double curvature = chord > 0 ? 2 * sin(dphi) / chord : 0;
    float f[HEP_EDGE_FEATURES] = {(float)(dphi / dr * 1000.0), (float)(z0 / 200.0),
                                  (float)(dz / dr / 3.0),      (float)(dr / 200.0),
                                  (float)(eta_b - eta_a),      (float)(dz / 100.0),
                                  (float)(curvature * 1000.0)}; /* the rest: neighbour_features */
    return edge_push(eb, a, b, f);
}

/* eb->between: of the first n_layers layers but l and t, those a segment from a hit of layer l
 * (its hits' r from r_a, z in [za0, za1]) to a hit of layer t further out (r up to r_b, z in
 * [zb0, zb1]) may cross: a cylinder whose radius lies in (r_a, r_b), a disk whose z lies within
 * the hull of the two z ranges. A superset: crossings() decides each segment. */
static void between_of(edge_buf *eb, int l, int t, double r_a, double r_b, double za0, double za1,
                       double zb0, double zb1, int n_layers) {
    double z0 = fmin(za0, zb0), z1 = fmax(za1, zb1);
    eb->n_between = 0;
    for (int m = 0; m < n_layers; m++) {
        const saga_trackml_layer *L = &eb->geo[m];
        if (m == l || m == t)
            continue;
        bool maybe = L->disk ? L->z_min > z0 && L->z_min < z1 : L->r_min > r_a && L->r_min < r_b;
        if (maybe)
            eb->between[eb->n_between++] = m;
    }
}

/* Where the straight lines in (r, z) from the beam line within |z0| <= z0_max through hit a meet
 * layer L further out in r: false when none meets it within its bounds (with a margin for the
 * hits' smearing and scattering); else *r_hi bounds the r of the meeting points (a cylinder's
 * radius; on a disk possibly INFINITY). A prune only: the segments' cuts decide. */
static bool reaches(const khit *a, const saga_trackml_layer *L, double z0_max, double *r_hi) {
    const double margin = 4 * HEP_EDGE_MARGIN_MM;
    if (!L->disk) {
        double R = L->r_min;
        if (R <= a->r)
            return false;
        /* z at R along the line from (0, z0) through a, at either end of the z0 range */
        double z1 = -z0_max + (a->z + z0_max) * R / a->r, z2 = z0_max + (a->z - z0_max) * R / a->r;
        *r_hi = R;
        return fmax(z1, z2) >= L->z_min - margin && fmin(z1, z2) <= L->z_max + margin;
    }
    double Z = L->z_min, lo, hi;
    /* r at Z is a->r (Z - z0) / (a->z - z0): growing without bound as z0 nears a->z from the
     * side the line comes from, least at the far end of the z0 range */
    if (Z > a->z) {
        if (-z0_max >= a->z)
            return false;
        lo = a->r * (Z + z0_max) / (a->z + z0_max);
        hi = a->z < z0_max ? INFINITY : a->r * (Z - z0_max) / (a->z - z0_max);
    } else if (Z < a->z) {
        if (z0_max <= a->z)
            return false;
        lo = a->r * (Z - z0_max) / (a->z - z0_max);
        hi = a->z > -z0_max ? INFINITY : a->r * (Z + z0_max) / (a->z + z0_max);
    } else {
        return false;
    }
    *r_hi = fmin(hi, L->r_max + margin);
    return hi >= L->r_min - margin && lo <= L->r_max + margin && *r_hi > a->r;
}

enum { FEAT_Z0 = 1, FEAT_CURVATURE = 6 }; /* columns of HEP_EDGE_FEATURE_NAMES */

/* Of the edges idx[lo .. hi) (idx NULL: lo .. hi; the edges into one hit, or out of one), the one
 * that continues edge k best: the least |dcurvature| / 0.05 per m + |dz0| / 5 mm. Writes to f the
 * two differences of that edge, each as log10(|difference| + floor) shifted and scaled to about
 * [-1, 1] (curvature in 1/m, floor 1e-4: 1e-4 -> -1, 0.01 -> 0, 1 -> 1; z0 in mm, floor 0.01:
 * 0.01 -> -1, 1 -> 0, 100 -> 1), or 1.5 for both when there is none. */
static void best_continuation(float *f, const float *feat, int64_t k, const int64_t *idx,
                              int64_t lo, int64_t hi) {
    const float *fk = feat + k * HEP_EDGE_FEATURES;
    double best = INFINITY, dk = 0, dz = 0;
    for (int64_t i = lo; i < hi; i++) {
        const float *fj = feat + (idx ? idx[i] : i) * HEP_EDGE_FEATURES;
        double ck = fabs((double)fj[FEAT_CURVATURE] - fk[FEAT_CURVATURE]);
        double cz = fabs((double)fj[FEAT_Z0] - fk[FEAT_Z0]) * 200.0;
        double d = ck / 0.05 + cz / 5.0;
        if (d < best)
            best = d, dk = ck, dz = cz;
    }
    if (best == INFINITY) {
        f[0] = f[1] = 1.5f;
        return;
    }
    f[0] = (float)((log10(dk + 1e-4) + 2) / 2);
    f[1] = (float)(log10(dz + 0.01) / 2);
}

/* Scans the hits of [lo, hi) (one layer, sorted by phi) whose phi is in [p0, p1], p0 <= p1
 * possibly outside (-pi, pi]: the window wraps around. */
static saga_status scan_window(edge_buf *eb, const khit *h, int32_t a, int32_t lo, int32_t hi,
                               double p0, double p1, const hep_graph_opts *o) {
    saga_status st = SAGA_OK;
    double ranges[2][2] = {{p0, p1}, {1, 0}}; /* the second empty unless the window wraps */
    if (p0 < -M_PI) {
        ranges[0][0] = -M_PI;
        ranges[1][0] = p0 + 2 * M_PI, ranges[1][1] = M_PI;
    } else if (p1 > M_PI) {
        ranges[0][1] = M_PI;
        ranges[1][0] = -M_PI, ranges[1][1] = p1 - 2 * M_PI;
    }
    for (int k = 0; k < 2; k++) {
        if (ranges[k][0] > ranges[k][1])
            continue;
        for (int32_t b = lower_phi(h, lo, hi, ranges[k][0]); b < hi && h[b].phi <= ranges[k][1];
             b++)
            SAGA_TRY(try_segment(eb, h, a, b, o));
    }
fail:
    return st;
}

/* pT of every hit's particle (GeV): from the particles file, else the truth momentum at the hit,
 * else 0. */
static saga_status hit_pts(float *pt, const saga_trackml_event *e) {
    saga_status st = SAGA_OK;
    id_row *ix = NULL;
    int64_t np = e->n_particles;
    SAGA_TRY(saga_alloc_array((void **)&ix, np ? (size_t)np : 1, sizeof *ix, "particle index"));
    for (int64_t k = 0; k < np; k++)
        ix[k] = (id_row){e->p_id[k], k};
    qsort(ix, (size_t)np, sizeof *ix, cmp_id_row);
    for (int64_t i = 0; i < e->n_hits; i++) {
        int64_t pid = e->particle_id[i];
        pt[i] = 0.0f;
        if (pid == 0)
            continue;
        int64_t lo = 0, hi = np;
        while (lo < hi) {
            int64_t mid = lo + (hi - lo) / 2;
            if (ix[mid].id < pid)
                lo = mid + 1;
            else
                hi = mid;
        }
        if (lo < np && ix[lo].id == pid)
            pt[i] = hypotf(e->px[ix[lo].row], e->py[ix[lo].row]);
        else if (e->tpx && e->tpy)
            pt[i] = hypotf(e->tpx[i], e->tpy[i]);
    }
fail:
    saga_free(ix);
    return st;
}

saga_status hep_graph_build(hep_event_graph *g, const saga_trackml_event *e,
                            const hep_graph_opts *o) {
    saga_status st = SAGA_OK;
    hep_graph_opts def = hep_graph_opts_defaults();
    khit *h = NULL;
    float *pt = NULL;
    int64_t *order = NULL, *out_off = NULL, *out_idx = NULL;
    id_row *by_particle = NULL;
    int32_t *rank = NULL;
    edge_buf eb = {0};
    hep_event_graph r = {0};
    if (!o)
        o = &def;
    memset(g, 0, sizeof *g);
    SAGA_CHECK(e && e->particle_id, SAGA_ERR_INVALID_ARG, "hep: an event without its truth");
    SAGA_CHECK(e->n_hits < INT32_MAX, SAGA_ERR_INVALID_ARG, "hep: event %lld has %lld hits",
               (long long)e->event_id, (long long)e->n_hits);
    r.event_id = e->event_id;
    for (int l = 0; l < SAGA_TRACKML_N_LAYERS; l++)
        eb.geo[l] = *saga_trackml_layer_at(l);

    /* ---- the hits kept: of a fast enough particle or noise; by layer and phi */
    SAGA_CHECK(o->max_missing >= 0 && o->z0_max > 0 && o->phi_slope_max > 0, SAGA_ERR_INVALID_ARG,
               "hep: graph options out of range (max_missing %d, z0_max %g, phi_slope_max %g)",
               o->max_missing, o->z0_max, o->phi_slope_max);
    SAGA_TRY(
        saga_alloc_array((void **)&pt, e->n_hits ? (size_t)e->n_hits : 1, sizeof *pt, "hit pT"));
    SAGA_TRY(hit_pts(pt, e));
    SAGA_TRY(saga_alloc_array((void **)&h, e->n_hits ? (size_t)e->n_hits : 1, sizeof *h, "hits"));
    int32_t n = 0;
    r.n_read = e->n_hits;
    for (int64_t i = 0; i < e->n_hits; i++) {
        int l = saga_trackml_layer_index(e->volume_id[i], e->layer_id[i]);
        SAGA_CHECK(l >= 0, SAGA_ERR_PARSE,
                   "event %lld, hit_id %lld: expected a layer of TrackML's detector (barrel "
                   "volume_id 8 or 13 with layer_id 2, 4, 6, 8; 17 with 2, 4; end-cap volume_id 7 "
                   "or 9 with 2 .. 14; 12, 14, 16 or 18 with 2 .. 12, even), found volume_id %d "
                   "layer_id %d",
                   (long long)e->event_id, (long long)(e->hit_id ? e->hit_id[i] : i + 1),
                   (int)e->volume_id[i], (int)e->layer_id[i]);
        bool endcap = hit_region_of(l) == HEP_REGION_ENDCAP;
        r.n_endcap += endcap;
        r.n_barrel += !endcap;
        if (endcap && o->barrel_only) {
            r.n_left_out++;
            continue;
        }
        if (e->particle_id[i] != 0 && pt[i] < o->pt_min) {
            r.n_soft++;
            continue;
        }
        r.n_noise += e->particle_id[i] == 0;
        h[n++] = (khit){l,       hypot(e->x[i], e->y[i]), atan2(e->y[i], e->x[i]),
                        e->z[i], e->particle_id[i],       pt[i]};
    }
    qsort(h, (size_t)n, sizeof *h, cmp_khit);
    enum { NL = SAGA_TRACKML_N_LAYERS };
    int32_t first[NL + 1] = {0};
    for (int32_t i = 0; i < n; i++)
        first[h[i].layer + 1]++;
    for (int l = 0; l < NL; l++)
        first[l + 1] += first[l];
    /* each layer's hits' least and largest r and z (a disk's spread over its ring, a cylinder's
     * along its length) */
    double r_lo[NL], r_hi[NL], z_lo[NL], z_hi[NL];
    for (int l = 0; l < NL; l++) {
        r_lo[l] = z_lo[l] = INFINITY, r_hi[l] = z_hi[l] = -INFINITY;
        for (int32_t i = first[l]; i < first[l + 1]; i++) {
            r_lo[l] = fmin(r_lo[l], h[i].r), r_hi[l] = fmax(r_hi[l], h[i].r);
            z_lo[l] = fmin(z_lo[l], h[i].z), z_hi[l] = fmax(z_hi[l], h[i].z);
        }
    }

    r.n_hits = n;
    size_t n1 = n ? (size_t)n : 1;
    SAGA_TRY(saga_alloc_array((void **)&r.hit_feat, n1 * HEP_HIT_FEATURES, sizeof(float),
                              "hit features"));
    SAGA_TRY(saga_alloc_array((void **)&r.hit_particle, n1, sizeof(int64_t), "hit particles"));
    SAGA_TRY(saga_alloc_array((void **)&r.hit_pt, n1, sizeof(float), "hit pT"));
    SAGA_TRY(saga_alloc_array((void **)&r.hit_region, n1, sizeof(uint8_t), "hit regions"));
    for (int32_t i = 0; i < n; i++) {
        r.hit_feat[i * 3 + 0] = (float)(h[i].r / 1000.0);
        r.hit_feat[i * 3 + 1] = (float)(h[i].phi / M_PI);
        r.hit_feat[i * 3 + 2] = (float)(h[i].z / 1000.0);
        r.hit_particle[i] = h[i].particle;
        r.hit_pt[i] = h[i].particle ? h[i].pt : 0.0f;
        r.hit_region[i] = (uint8_t)hit_region_of(h[i].layer);
        r.region_hits[r.hit_region[i]]++;
    }

    /* ---- segments inner -> outer: from each hit to every layer that the lines from the beam
     * region through it reach, in the phi window of the bending cut */
    for (int l = 0; l < NL; l++) {
        for (int t = 0; t < NL; t++) {
            if (t == l || first[t] == first[t + 1] || first[l] == first[l + 1] ||
                r_hi[t] <= r_lo[l])
                continue; /* no hit there, or none further out */
            const saga_trackml_layer *T = &eb.geo[t];
            between_of(&eb, l, t, r_lo[l], r_hi[t], z_lo[l], z_hi[l], z_lo[t], z_hi[t],
                       o->barrel_only ? SAGA_TRACKML_N_BARREL : SAGA_TRACKML_N_LAYERS);
            for (int32_t a = first[l]; a < first[l + 1]; a++) {
                double reach;
                if (!reaches(&h[a], T, o->z0_max, &reach))
                    continue;
                double w = o->phi_slope_max * (fmin(reach, r_hi[t]) - h[a].r);
                if (w > 0)
                    SAGA_TRY(scan_window(&eb, h, a, first[t], first[t + 1], h[a].phi - w,
                                         h[a].phi + w, o));
            }
        }
    }

    /* ---- every particle's trajectory: its layers ordered by r (the least r of its hits on
     * each), each hit ranked by its layer's place; its true segments join consecutive layers */
    SAGA_TRY(saga_alloc_array((void **)&by_particle, n1, sizeof *by_particle, "particle hits"));
    SAGA_TRY(saga_alloc_zeroed((void **)&rank, n1, sizeof *rank, "particle layers"));
    int32_t np = 0;
    for (int32_t i = 0; i < n; i++)
        if (h[i].particle)
            by_particle[np++] = (id_row){h[i].particle, i};
    qsort(by_particle, (size_t)np, sizeof *by_particle, cmp_id_row);
    for (int32_t i = 0; i < np;) {
        int32_t j = i;
        int64_t cnt[NL] = {0};
        double at[NL];
        for (; j < np && by_particle[j].id == by_particle[i].id; j++) {
            const khit *k = &h[by_particle[j].row];
            at[k->layer] = cnt[k->layer]++ ? fmin(at[k->layer], k->r) : k->r;
        }
        int seq[NL], nl = 0;
        for (int l = 0; l < NL; l++)
            if (cnt[l]) { /* insertion by r: a particle crosses a few dozen layers at most */
                int q = nl++;
                for (; q > 0 && at[seq[q - 1]] > at[l]; q--)
                    seq[q] = seq[q - 1];
                seq[q] = l;
            }
        int place[NL];
        for (int q = 0; q < nl; q++) {
            place[seq[q]] = q;
            if (q > 0) {
                int64_t s = cnt[seq[q - 1]] * cnt[seq[q]];
                int reg = hit_region_of(seq[q - 1]) + hit_region_of(seq[q]);
                r.n_segments += s;
                r.region_segments[reg] += s;
            }
        }
        for (int32_t k = i; k < j; k++)
            rank[by_particle[k].row] = place[h[by_particle[k].row].layer];
        i = j;
    }

    /* ---- the placed graph's edge order: by outer hit (stable, so inner hits stay ascending) */
    int64_t m = eb.n;
    r.n_edges = m;
    size_t m1 = m ? (size_t)m : 1;
    SAGA_TRY(saga_alloc_array((void **)&r.src, m1, sizeof *r.src, "edges"));
    SAGA_TRY(saga_alloc_array((void **)&r.dst, m1, sizeof *r.dst, "edges"));
    SAGA_TRY(saga_alloc_array((void **)&r.edge_feat, m1 * HEP_EDGE_FEATURES, sizeof(float),
                              "edge features"));
    SAGA_TRY(saga_alloc_array((void **)&r.truth, m1, sizeof *r.truth, "edge truth"));
    SAGA_TRY(saga_alloc_zeroed((void **)&order, (size_t)n + 1, sizeof *order, "edge order"));
    for (int64_t k = 0; k < m; k++)
        order[eb.dst[k] + 1]++;
    for (int32_t v = 0; v < n; v++)
        order[v + 1] += order[v];
    for (int64_t k = 0; k < m; k++) {
        int64_t p = order[eb.dst[k]]++;
        r.src[p] = eb.src[k];
        r.dst[p] = eb.dst[k];
        memcpy(r.edge_feat + p * HEP_EDGE_FEATURES, eb.feat + k * HEP_EDGE_FEATURES,
               HEP_EDGE_FEATURES * sizeof(float));
        const khit *a = &h[eb.src[k]], *b = &h[eb.dst[k]];
        /* consecutive hits: the outer one on the particle's next layer */
        r.truth[p] = a->particle != 0 && a->particle == b->particle &&
                     rank[eb.dst[k]] == rank[eb.src[k]] + 1;
        int reg = hit_region_of(a->layer) + hit_region_of(b->layer);
        r.n_true += r.truth[p];
        r.region_true[reg] += r.truth[p];
        r.region_edges[reg]++;
    }

    /* ---- how well each edge continues: the best edge into its inner hit and out of its outer
     * hit, by curvature and z0 (on one particle's helix both are the same on every segment).
     * order[v] is now the end of the edges into v; the edges out of each hit by a count sort */
    SAGA_TRY(saga_alloc_zeroed((void **)&out_off, (size_t)n + 1, sizeof *out_off, "edges out"));
    SAGA_TRY(saga_alloc_array((void **)&out_idx, m1, sizeof *out_idx, "edges out"));
    for (int64_t k = 0; k < m; k++)
        out_off[r.src[k] + 1]++;
    for (int32_t v = 0; v < n; v++)
        out_off[v + 1] += out_off[v];
    for (int64_t k = 0; k < m; k++)
        out_idx[out_off[r.src[k]]++] = k;
    for (int32_t v = n; v > 0; v--) /* back to the starts */
        out_off[v] = out_off[v - 1];
    out_off[0] = 0;
    for (int64_t k = 0; k < m; k++) {
        float *f = r.edge_feat + k * HEP_EDGE_FEATURES;
        int32_t a = r.src[k], b = r.dst[k];
        best_continuation(f + HEP_SEGMENT_FEATURES, r.edge_feat, k, NULL, a ? order[a - 1] : 0,
                          order[a]);
        best_continuation(f + HEP_SEGMENT_FEATURES + 2, r.edge_feat, k, out_idx, out_off[b],
                          out_off[b + 1]);
    }

    *g = r;
    memset(&r, 0, sizeof r);
fail:
    hep_graph_free(&r);
    saga_free(h);
    saga_free(pt);
    saga_free(order);
    saga_free(out_off);
    saga_free(out_idx);
    saga_free(by_particle);
    saga_free(rank);
    saga_free(eb.src);
    saga_free(eb.dst);
    saga_free(eb.feat);
    return st;
}

const char *const HEP_HIT_FEATURE_NAMES[HEP_HIT_FEATURES] = {"r/1000", "phi/pi", "z/1000"};
const char *const HEP_EDGE_FEATURE_NAMES[HEP_EDGE_FEATURES] = {
    "dphi/dr*1000",   "z0/200",        "dz/dr/3", "dr/200",         "deta",   "dz/100",
    "curvature*1000", "in_dcurvature", "in_dz0",  "out_dcurvature", "out_dz0"};

saga_status hep_graph_export(const hep_event_graph *g, const char *path) {
    saga_status st = SAGA_OK;
    npz_writer *w = NULL;
    int64_t *ei = NULL;
    float *y = NULL;
    int64_t n = g->n_hits, m = g->n_edges;
    size_t m1 = m ? (size_t)m : 1;
    /* PyG's edge_index is int64 and its labels float: widened here, once per event */
    SAGA_TRY(saga_alloc_array((void **)&ei, 2 * m1, sizeof *ei, "edge index"));
    SAGA_TRY(saga_alloc_array((void **)&y, m1, sizeof *y, "edge labels"));
    for (int64_t k = 0; k < m; k++) {
        ei[k] = g->src[k];
        ei[m + k] = g->dst[k];
        y[k] = g->truth[k] ? 1.0f : 0.0f;
    }
    SAGA_TRY(npz_open(&w, path));
    SAGA_TRY(npz_add(w, "x", NPZ_F32, 2, (int64_t[]){n, HEP_HIT_FEATURES}, g->hit_feat));
    SAGA_TRY(npz_add(w, "edge_index", NPZ_I64, 2, (int64_t[]){2, m}, ei));
    SAGA_TRY(npz_add(w, "edge_attr", NPZ_F32, 2, (int64_t[]){m, HEP_EDGE_FEATURES}, g->edge_feat));
    SAGA_TRY(npz_add(w, "y", NPZ_F32, 1, &m, y));
    SAGA_TRY(npz_add(w, "hit_particle", NPZ_I64, 1, &n, g->hit_particle));
    SAGA_TRY(npz_add(w, "hit_pt", NPZ_F32, 1, &n, g->hit_pt));
    SAGA_TRY(npz_finish(w));
fail:
    npz_free(&w);
    saga_free(ei);
    saga_free(y);
    return st;
}

void hep_data_free(hep_data *d) {
    if (!d)
        return;
    for (int32_t i = 0; i < d->n_events; i++)
        hep_graph_free(&d->events[i]);
    saga_free(d->events);
    memset(d, 0, sizeof *d);
}

/* Whether the hits of event prefix are gzip'd (the reader takes PREFIX-hits.csv.gz first). */
static bool hits_file_gz(const char *prefix) {
    char path[4096];
    int len = snprintf(path, sizeof path, "%s-hits.csv.gz", prefix);
    FILE *f = len > 0 && (size_t)len < sizeof path ? fopen(path, "rb") : NULL;
    if (f)
        fclose(f);
    return f != NULL;
}

saga_status hep_data_load(hep_data *d, const char *dir, const hep_graph_opts *o,
                          double eval_fraction, void (*progress)(void *, int32_t, int32_t),
                          void *ud) {
    saga_status st = SAGA_OK;
    char **list = NULL;
    int64_t n = 0;
    saga_trackml_event *e = NULL;
    hep_data r = {0};
    memset(d, 0, sizeof *d);
    r.graph = o ? *o : hep_graph_opts_defaults();
    SAGA_TRY(saga_trackml_list(&list, &n, dir));
    SAGA_CHECK(n > 0, SAGA_ERR_INVALID_ARG,
               "hep: '%s' holds no event (expected files eventNNN-hits.csv[.gz])", dir);
    SAGA_CHECK(n < INT32_MAX, SAGA_ERR_INVALID_ARG, "hep: too many events in '%s'", dir);
    SAGA_TRY(saga_alloc_zeroed((void **)&r.events, (size_t)n, sizeof *r.events, "events"));
    for (int64_t i = 0; i < n; i++) {
        SAGA_TRY(saga_trackml_read(&e, list[i]));
        if ((st = hep_graph_build(&r.events[i], e, &r.graph)) == SAGA_ERR_PARSE) {
            /* a hit the detector does not have: name the hits file */
            st = saga_error_prefix(st, "%s-hits.csv%s: ", list[i],
                                   hits_file_gz(list[i]) ? ".gz" : "");
        }
        if (st < 0)
            goto fail;
        r.n_events++;
        saga_trackml_event_free(&e);
        if (progress)
            progress(ud, (int32_t)i + 1, (int32_t)n);
    }
    int32_t n_eval = 0;
    if (eval_fraction > 0 && n >= 2) {
        n_eval = (int32_t)llround(eval_fraction * (double)n);
        n_eval = n_eval < 1 ? 1 : n_eval >= n ? (int32_t)n - 1 : n_eval;
    }
    r.n_train = (int32_t)n - n_eval;
    *d = r;
    memset(&r, 0, sizeof r);
fail:
    saga_trackml_event_free(&e);
    saga_trackml_list_free(&list, n);
    hep_data_free(&r);
    return st;
}

/* ---- sampling ----------------------------------------------------------------------------- */

const char *hep_lr_schedule_name(hep_lr_schedule s) {
    static const char *const names[HEP_LR_SCHEDULE_COUNT] = {"constant", "cosine"};
    return (unsigned)s < HEP_LR_SCHEDULE_COUNT ? names[s] : "?";
}

const char *hep_sampler_name(hep_sampler s) {
    static const char *const names[HEP_SAMPLER_COUNT] = {"random", "sorted", "balanced"};
    return (unsigned)s < HEP_SAMPLER_COUNT ? names[s] : "?";
}

void hep_plan_free(hep_plan *p) {
    if (!p)
        return;
    saga_free(p->offsets);
    saga_free(p->events);
    memset(p, 0, sizeof *p);
}

static uint64_t mix64(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static void shuffle(int32_t *a, int32_t n, uint64_t *rng) {
    for (int32_t i = n - 1; i > 0; i--) {
        int32_t j = (int32_t)(mix64(rng) % (uint64_t)(i + 1));
        int32_t t = a[i];
        a[i] = a[j];
        a[j] = t;
    }
}

static const int64_t *sort_key; /* qsort has no user pointer; plans are made on one thread */

static int cmp_by_edges_asc(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    if (sort_key[x] != sort_key[y])
        return sort_key[x] < sort_key[y] ? -1 : 1;
    return (x > y) - (x < y);
}

/* First-fit decreasing of events order[0 .. n) (largest first) into bins of budget; bin[i] is
 * event order[i]'s bin. Returns the number of bins. */
static int32_t ffd(const int32_t *order, int32_t n, const int64_t *edges, int64_t budget,
                   int64_t *load, int32_t *bin) {
    int32_t nb = 0;
    for (int32_t i = 0; i < n; i++) {
        int64_t w = edges[order[i]];
        int32_t b = 0;
        while (b < nb && load[b] + w > budget)
            b++;
        if (b == nb)
            load[nb++] = 0;
        load[b] += w;
        bin[i] = b;
    }
    return nb;
}

saga_status hep_plan_epoch(hep_plan *out, hep_sampler s, const int64_t *edges, int32_t n,
                           int32_t batch_events, int64_t budget, uint64_t seed, int epoch) {
    saga_status st = SAGA_OK;
    hep_plan p = {0};
    int32_t *order = NULL, *bin = NULL, *perm = NULL;
    int64_t *load = NULL;
    memset(out, 0, sizeof *out);
    SAGA_CHECK((unsigned)s < HEP_SAMPLER_COUNT && n >= 1 && batch_events >= 1 && budget >= 0 &&
                   edges,
               SAGA_ERR_INVALID_ARG,
               "hep: bad sampler arguments (sampler %d, %d events, %d per batch, budget %lld)",
               (int)s, (int)n, (int)batch_events, (long long)budget);
    uint64_t rng = seed * 0x9E3779B97F4A7C15ull ^ ((uint64_t)epoch + 1) * 0xD1B54A32D192ED03ull;
    int32_t target = (n + batch_events - 1) / batch_events;
    size_t n1 = (size_t)n + 1;
    SAGA_TRY(saga_alloc_array((void **)&p.events, (size_t)n, sizeof *p.events, "plan"));
    SAGA_TRY(saga_alloc_array((void **)&p.offsets, n1, sizeof *p.offsets, "plan"));
    SAGA_TRY(saga_alloc_array((void **)&order, (size_t)n, sizeof *order, "plan"));
    SAGA_TRY(saga_alloc_array((void **)&perm, (size_t)n, sizeof *perm, "plan"));
    for (int32_t i = 0; i < n; i++)
        order[i] = i;
    if (s == HEP_SAMPLER_RANDOM) {
        shuffle(order, n, &rng);
        memcpy(p.events, order, (size_t)n * sizeof *order);
        p.n_batches = target;
        for (int32_t b = 0; b <= target; b++)
            p.offsets[b] = b * batch_events < n ? b * batch_events : n;
    } else if (s == HEP_SAMPLER_SORTED) {
        sort_key = edges;
        qsort(order, (size_t)n, sizeof *order, cmp_by_edges_asc);
        for (int32_t b = 0; b < target; b++)
            perm[b] = b;
        shuffle(perm, target, &rng);
        int32_t k = 0;
        p.n_batches = target;
        for (int32_t b = 0; b < target; b++) {
            p.offsets[b] = k;
            for (int32_t i = perm[b] * batch_events; i < n && i < (perm[b] + 1) * batch_events; i++)
                p.events[k++] = order[i];
        }
        p.offsets[target] = k;
    } else {
        sort_key = edges;
        qsort(order, (size_t)n, sizeof *order, cmp_by_edges_asc);
        for (int32_t i = 0; i < n / 2; i++) { /* largest first */
            int32_t t = order[i];
            order[i] = order[n - 1 - i];
            order[n - 1 - i] = t;
        }
        SAGA_TRY(saga_alloc_array((void **)&load, (size_t)n, sizeof *load, "plan"));
        SAGA_TRY(saga_alloc_array((void **)&bin, (size_t)n, sizeof *bin, "plan"));
        if (budget == 0) {
            /* the smallest budget that packs into as many bins as the others' micro-batches;
             * the high end always fits (one bin), so the search ends on a budget that does */
            int64_t total = 0;
            for (int32_t i = 0; i < n; i++)
                total += edges[i];
            int64_t lo = edges[order[0]], hi = total;
            if ((total + target - 1) / target > lo)
                lo = (total + target - 1) / target;
            if (hi < lo)
                hi = lo;
            while (lo < hi) {
                int64_t mid = lo + (hi - lo) / 2;
                if (ffd(order, n, edges, mid, load, bin) <= target)
                    hi = mid;
                else
                    lo = mid + 1;
            }
            budget = lo > 0 ? lo : 1;
        }
        int32_t nb = ffd(order, n, edges, budget, load, bin);
        for (int32_t b = 0; b < nb; b++)
            perm[b] = b;
        shuffle(perm, nb, &rng);
        /* events of bin perm[0], then perm[1], ...: count, then place */
        int32_t *rank = (int32_t *)load; /* bin -> its place in the epoch; load is done */
        for (int32_t b = 0; b < nb; b++)
            rank[perm[b]] = b;
        memset(p.offsets, 0, n1 * sizeof *p.offsets);
        for (int32_t i = 0; i < n; i++)
            p.offsets[rank[bin[i]] + 1]++;
        for (int32_t b = 0; b < nb; b++)
            p.offsets[b + 1] += p.offsets[b];
        int32_t *fill = perm; /* perm is done too */
        memcpy(fill, p.offsets, (size_t)nb * sizeof *fill);
        for (int32_t i = 0; i < n; i++)
            p.events[fill[rank[bin[i]]]++] = order[i];
        p.n_batches = nb;
        p.budget = budget;
    }
    *out = p;
    memset(&p, 0, sizeof p);
fail:
    hep_plan_free(&p);
    saga_free(order);
    saga_free(perm);
    saga_free(bin);
    saga_free(load);
    return st;
}

/* ---- the model ---------------------------------------------------------------------------- */

saga_status hep_net_new(hep_net *net, saga_backend *be, int hidden, int iterations, uint64_t seed) {
    saga_status st = SAGA_OK;
    memset(net, 0, sizeof *net);
    SAGA_CHECK(
        hidden >= 1 && hidden <= 4096 && iterations >= 1 && iterations <= 64, SAGA_ERR_INVALID_ARG,
        "hep: hidden must be in 1..4096 and iterations in 1..64 (got %d, %d)", hidden, iterations);
    net->hidden = hidden;
    net->iterations = iterations;
    SAGA_TRY(saga_model_new(&net->m, be));
    int64_t H = hidden;
    SAGA_TRY(
        saga_ffn_init(&net->node_enc, net->m, "node_encoder", HEP_HIT_FEATURES, H, H, seed + 1));
    SAGA_TRY(
        saga_ffn_init(&net->edge_enc, net->m, "edge_encoder", HEP_EDGE_FEATURES, H, H, seed + 2));
    SAGA_TRY(saga_interaction_new(&net->in, net->m, "edge_update", "node_update", H, seed + 3));
    SAGA_TRY(saga_ffn_init(&net->score, net->m, "edge_score", 3 * H, H, 1, seed + 5));
    return SAGA_OK;
fail:
    hep_net_free(net);
    return st;
}

void hep_net_free(hep_net *net) {
    if (!net)
        return;
    saga_interaction_free(&net->in);
    saga_model_free(&net->m);
    memset(net, 0, sizeof *net);
}

saga_tensor *hep_net_forward(saga_ctx *c, hep_net *net, const hep_batch *b) {
    saga_tensor *h = saga_tanh(c, saga_ffn_forward(c, &net->node_enc, b->x));
    saga_tensor *e = saga_tanh(c, saga_ffn_forward(c, &net->edge_enc, b->edata));
    for (int k = 0; k < net->iterations && h; k++)
        h = saga_interaction_forward(c, net->in, b->dg, h, e, b->src_idx, &e);
    saga_tensor *in[3] = {saga_gather_rows(c, h, b->src_idx), saga_gather_rows(c, h, b->dst_idx),
                          e};
    return saga_ffn_forward_cat(c, &net->score, in, 3);
}

/* ---- micro-batches ------------------------------------------------------------------------ */

void hep_batch_free(hep_batch *b) {
    if (!b)
        return;
    saga_dgraph_free(&b->dg);
    saga_tensor_free(&b->x);
    saga_tensor_free(&b->edata);
    saga_tensor_free(&b->target);
    saga_tensor_free(&b->src_idx);
    saga_tensor_free(&b->dst_idx);
    memset(b, 0, sizeof *b);
}

void hep_rows_free(hep_rows *r) {
    if (!r)
        return;
    saga_free(r->x);
    saga_free(r->edata);
    saga_free(r->target);
    saga_free(r->src);
    saga_free(r->dst);
    memset(r, 0, sizeof *r);
}

saga_status hep_rows_new(hep_rows *out, const hep_event_graph *events, const int32_t *ids,
                         int32_t n) {
    saga_status st = SAGA_OK;
    hep_rows r = {0};
    memset(out, 0, sizeof *out);
    int64_t nv = 0, m = 0;
    for (int32_t i = 0; i < n; i++) {
        nv += events[ids[i]].n_hits;
        m += events[ids[i]].n_edges;
    }
    SAGA_CHECK(nv < INT32_MAX, SAGA_ERR_INVALID_ARG, "hep: a micro-batch of %lld hits",
               (long long)nv);
    size_t nv1 = nv ? (size_t)nv : 1, m1 = m ? (size_t)m : 1;
    SAGA_TRY(saga_alloc_array((void **)&r.x, nv1 * HEP_HIT_FEATURES, sizeof *r.x, "batch hits"));
    SAGA_TRY(saga_alloc_array((void **)&r.edata, m1 * HEP_EDGE_FEATURES, sizeof *r.edata,
                              "batch edges"));
    SAGA_TRY(saga_alloc_array((void **)&r.target, m1, sizeof *r.target, "batch targets"));
    SAGA_TRY(saga_alloc_array((void **)&r.src, m1, sizeof *r.src, "batch edges"));
    SAGA_TRY(saga_alloc_array((void **)&r.dst, m1, sizeof *r.dst, "batch edges"));
    int64_t v0 = 0, e0 = 0;
    for (int32_t i = 0; i < n; i++) {
        const hep_event_graph *ev = &events[ids[i]];
        memcpy(r.x + v0 * HEP_HIT_FEATURES, ev->hit_feat,
               (size_t)ev->n_hits * HEP_HIT_FEATURES * sizeof *r.x);
        memcpy(r.edata + e0 * HEP_EDGE_FEATURES, ev->edge_feat,
               (size_t)ev->n_edges * HEP_EDGE_FEATURES * sizeof *r.edata);
        for (int64_t k = 0; k < ev->n_edges; k++) {
            r.src[e0 + k] = (int32_t)(ev->src[k] + v0);
            r.dst[e0 + k] = (int32_t)(ev->dst[k] + v0);
            r.target[e0 + k] = ev->truth[k];
        }
        v0 += ev->n_hits;
        e0 += ev->n_edges;
    }
    r.n_vertices = (int32_t)nv;
    r.n_edges = m;
    *out = r;
    return SAGA_OK;
fail:
    hep_rows_free(&r);
    return st;
}

saga_status hep_batch_new(hep_batch *b, saga_backend *be, const hep_event_graph *events,
                          const int32_t *ids, int32_t n) {
    saga_status st = SAGA_OK;
    hep_batch r = {0};
    hep_rows h = {0};
    saga_graph *g = NULL;
    memset(b, 0, sizeof *b);
    SAGA_TRY(hep_rows_new(&h, events, ids, n));
    const int32_t nv = h.n_vertices;
    const int64_t m = h.n_edges;
    const int32_t *src = h.src, *dst = h.dst;
    r.n_vertices = nv;
    r.n_edges = m;
    SAGA_TRY(saga_graph_from_edges(&g, nv, m, src, dst, NULL, NULL, NULL));
    SAGA_TRY(saga_dgraph_new(&r.dg, be, g, NULL));
    /* every event's edges are sorted by (outer, inner) and the events' ids increase, so the
     * placed order is the concatenation: the edge features need no permutation */
    saga_csr ord = saga_dgraph_edge_order(r.dg);
    SAGA_CHECK(ord.nnz == m, SAGA_ERR_INTERNAL, "hep: placed graph has %lld edges, expected %lld",
               (long long)ord.nnz, (long long)m);
    for (int64_t k = 0; k < m; k++)
        SAGA_CHECK(
            ord.indices[k] == src[k] && ord.offsets[dst[k]] <= k && k < ord.offsets[dst[k] + 1],
            SAGA_ERR_INTERNAL, "hep: edge %lld is out of the placed graph's order", (long long)k);
    SAGA_TRY(saga_tensor_from_host(&r.x, be, SAGA_F32, nv, HEP_HIT_FEATURES, h.x));
    SAGA_TRY(saga_tensor_from_host(&r.edata, be, SAGA_F32, m, HEP_EDGE_FEATURES, h.edata));
    SAGA_TRY(saga_tensor_from_host(&r.target, be, SAGA_F32, m, 1, h.target));
    SAGA_TRY(saga_tensor_from_host(&r.src_idx, be, SAGA_I32, m, 1, src));
    SAGA_TRY(saga_tensor_from_host(&r.dst_idx, be, SAGA_I32, m, 1, dst));
    *b = r;
    memset(&r, 0, sizeof r);
fail:
    hep_batch_free(&r);
    hep_rows_free(&h);
    saga_graph_free(&g);
    return st;
}

/* ---- metrics ------------------------------------------------------------------------------ */

typedef struct scored {
    float s;
    uint8_t y;
} scored;

static int cmp_scored(const void *a, const void *b) {
    float x = ((const scored *)a)->s, y = ((const scored *)b)->s;
    return (x > y) - (x < y);
}

double hep_auc(const float *score, const uint8_t *label, int64_t n) {
    scored *v = saga_malloc((n ? (size_t)n : 1) * sizeof *v);
    if (!v)
        return NAN;
    int64_t pos = 0;
    for (int64_t i = 0; i < n; i++) {
        v[i] = (scored){score[i], label[i] ? 1 : 0};
        pos += v[i].y;
    }
    int64_t neg = n - pos;
    if (pos == 0 || neg == 0) {
        saga_free(v);
        return 0.5;
    }
    qsort(v, (size_t)n, sizeof *v, cmp_scored);
    /* Mann-Whitney: the positives' rank sum, ties at their mean rank */
    double rank_sum = 0;
    for (int64_t i = 0; i < n;) {
        int64_t j = i, p = 0;
        while (j < n && v[j].s == v[i].s)
            p += v[j++].y;
        rank_sum += (double)p * 0.5 * (double)(i + 1 + j);
        i = j;
    }
    saga_free(v);
    return (rank_sum - 0.5 * (double)pos * (double)(pos + 1)) / ((double)pos * (double)neg);
}

typedef struct hit_comp {
    int64_t particle;
    int32_t comp;
    int32_t region; /* HEP_REGION_* of the hit */
} hit_comp;

static int cmp_hit_comp(const void *a, const void *b) {
    const hit_comp *x = a, *y = b;
    if (x->particle != y->particle)
        return x->particle < y->particle ? -1 : 1;
    return (x->comp > y->comp) - (x->comp < y->comp);
}

saga_status hep_track_efficiency(int64_t *found, int64_t *total, saga_backend *be,
                                 const hep_event_graph *g, const uint8_t *kept, const float *score,
                                 double track_pt) {
    int64_t f[HEP_N_SEG_REGIONS], t[HEP_N_SEG_REGIONS];
    saga_status st = hep_track_efficiency_regions(f, t, be, g, kept, score, track_pt);
    *found = *total = 0;
    for (int r = 0; r < HEP_N_SEG_REGIONS; r++)
        *found += f[r], *total += t[r];
    return st;
}

saga_status hep_track_efficiency_regions(int64_t found[HEP_N_SEG_REGIONS],
                                         int64_t total[HEP_N_SEG_REGIONS], saga_backend *be,
                                         const hep_event_graph *g, const uint8_t *kept,
                                         const float *score, double track_pt) {
    saga_status st = SAGA_OK;
    int32_t *src = NULL, *dst = NULL, *comp = NULL, *size = NULL;
    int64_t *junction = NULL;
    hit_comp *hc = NULL;
    saga_graph *cg = NULL;
    int32_t n = g->n_hits;
    int64_t nk = 0;
    size_t n1 = n ? (size_t)n : 1;
    for (int r = 0; r < HEP_N_SEG_REGIONS; r++)
        found[r] = total[r] = 0;
    SAGA_TRY(saga_alloc_array((void **)&src, g->n_edges ? (size_t)g->n_edges : 1, sizeof *src,
                              "kept edges"));
    SAGA_TRY(saga_alloc_array((void **)&dst, g->n_edges ? (size_t)g->n_edges : 1, sizeof *dst,
                              "kept edges"));
    if (score) {
        /* junctions: junction[2v] is the highest-scoring kept edge out of hit v, junction[2v + 1]
         * the highest into it (the first of equals); an edge stays when it scores within
         * HEP_JUNCTION_TOLERANCE of both */
        SAGA_TRY(saga_alloc_array((void **)&junction, 2 * n1, sizeof *junction, "junctions"));
        for (size_t i = 0; i < 2 * n1; i++)
            junction[i] = -1;
        for (int64_t k = 0; k < g->n_edges; k++) {
            if (!kept[k])
                continue;
            int64_t *o = &junction[2 * (size_t)g->src[k]],
                    *i = &junction[2 * (size_t)g->dst[k] + 1];
            if (*o < 0 || score[k] > score[*o])
                *o = k;
            if (*i < 0 || score[k] > score[*i])
                *i = k;
        }
    }
    for (int64_t k = 0; k < g->n_edges; k++)
        if (kept[k] &&
            (!junction ||
             (score[k] >= score[junction[2 * (size_t)g->src[k]]] - HEP_JUNCTION_TOLERANCE &&
              score[k] >= score[junction[2 * (size_t)g->dst[k] + 1]] - HEP_JUNCTION_TOLERANCE))) {
            src[nk] = g->src[k];
            dst[nk++] = g->dst[k];
        }
    saga_graph_opts go = saga_graph_opts_defaults();
    go.undirected = true;
    SAGA_TRY(saga_graph_from_edges(&cg, n, nk, src, dst, NULL, NULL, &go));
    cc_result cr;
    SAGA_TRY(cc_run(&comp, &cr, be, cg, NULL, NULL));
    SAGA_TRY(saga_alloc_zeroed((void **)&size, n1, sizeof *size, "component sizes"));
    SAGA_TRY(saga_alloc_array((void **)&hc, n1, sizeof *hc, "track hits"));
    int32_t nh = 0;
    for (int32_t v = 0; v < n; v++) {
        size[comp[v]]++;
        if (g->hit_particle[v] != 0 && g->hit_pt[v] > track_pt)
            hc[nh++] = (hit_comp){g->hit_particle[v], comp[v],
                                  g->hit_region ? g->hit_region[v] : HEP_REGION_BARREL};
    }
    qsort(hc, (size_t)nh, sizeof *hc, cmp_hit_comp);
    for (int32_t i = 0; i < nh;) {
        int32_t j = i, best = 0, best_comp = -1;
        unsigned where = 0; /* bit HEP_REGION_*: the regions of its hits */
        for (; j < nh && hc[j].particle == hc[i].particle; j++)
            where |= 1u << hc[j].region;
        int reg = where == (1u << HEP_REGION_BARREL)   ? HEP_SEG_BARREL
                  : where == (1u << HEP_REGION_ENDCAP) ? HEP_SEG_ENDCAP
                                                       : HEP_SEG_CROSSING;
        for (int32_t a = i; a < j;) { /* runs of one component inside the particle's run */
            int32_t b = a;
            while (b < j && hc[b].comp == hc[a].comp)
                b++;
            if (b - a > best)
                best = b - a, best_comp = hc[a].comp;
            a = b;
        }
        int32_t nhits = j - i;
        if (nhits >= 3) {
            total[reg]++;
            found[reg] += best >= 0.75 * nhits && best >= 0.75 * size[best_comp];
        }
        i = j;
    }
fail:
    saga_graph_free(&cg);
    saga_free(junction);
    saga_free(src);
    saga_free(dst);
    saga_free(comp);
    saga_free(size);
    saga_free(hc);
    return st;
}

void hep_curve_of(hep_curve *out, const float *score, const uint8_t *label, int64_t n) {
    enum { P = HEP_CURVE_POINTS };
    /* kept[i]: edges of each class whose score is above threshold i, counted as the edges
     * whose highest threshold below their score is i, then summed from the top */
    int64_t kept[2][P] = {{0}}, total[2] = {0};
    memset(out, 0, sizeof *out);
    for (int i = 0; i < P; i++)
        out->threshold[i] = (double)i / (P - 1);
    for (int64_t e = 0; e < n; e++) {
        int y = label[e] ? 1 : 0;
        double sc = score[e];
        total[y]++;
        if (!(sc > out->threshold[0]))
            continue; /* below every threshold (or NaN) */
        int i = (int)(sc * (P - 1));
        i = i < 0 ? 0 : i >= P ? P - 1 : i;
        while (i + 1 < P && out->threshold[i + 1] < sc)
            i++;
        while (i > 0 && !(out->threshold[i] < sc))
            i--;
        kept[y][i]++;
    }
    for (int i = P - 2; i >= 0; i--)
        for (int y = 0; y < 2; y++)
            kept[y][i] += kept[y][i + 1];
    out->n_true = total[1];
    out->n_false = total[0];
    for (int i = 0; i < P; i++) {
        int64_t tp = kept[1][i], fp = kept[0][i];
        out->efficiency[i] = total[1] ? (double)tp / (double)total[1] : 0.0;
        out->fpr[i] = total[0] ? (double)fp / (double)total[0] : 0.0;
        out->purity[i] = tp + fp ? (double)tp / (double)(tp + fp) : NAN;
    }
}

/* a / b, 0 when b is 0 */
static double share(int64_t a, int64_t b) {
    return b ? (double)a / (double)b : 0.0;
}

/* Event i's scores in memory (uploaded into *b, which the caller frees). */
static saga_status score_memory(saga_ctx *c, hep_net *net, saga_backend *be,
                                const hep_event_graph *events, int32_t i, hep_batch *b,
                                float *score) {
    saga_status st = SAGA_OK;
    SAGA_TRY(hep_batch_new(b, be, events, &i, 1));
    saga_tensor *p = saga_sigmoid(c, hep_net_forward(c, net, b));
    SAGA_TRY(saga_ctx_status(c));
    SAGA_TRY(saga_tensor_to_host(p, score));
fail:
    return st;
}

saga_status hep_evaluate_curve(hep_metrics *out, hep_curve *curve, saga_backend *be, hep_net *net,
                               const hep_event_graph *events, int32_t first, int32_t n,
                               double threshold, double track_pt) {
    saga_status st = SAGA_OK;
    saga_ctx *c = NULL;
    hep_batch b = {0};
    hep_rows rows = {0};
    hep_stream hs = {0};
    float *score = NULL;
    uint8_t *label = NULL, *kept = NULL;
    /* counts per region (HEP_SEG_*), the last entry all of them */
    enum { ALL = HEP_N_SEG_REGIONS };
    int64_t m = 0, max_m = 1, found_cc = 0;
    int64_t tp[ALL + 1] = {0}, fp[ALL + 1] = {0}, fn[ALL + 1] = {0}, found[ALL + 1] = {0},
                     tracks[ALL + 1] = {0};
    for (int32_t i = first; i < first + n; i++) {
        m += events[i].n_edges;
        if (events[i].n_edges > max_m)
            max_m = events[i].n_edges;
    }
    SAGA_TRY(saga_alloc_array((void **)&score, m ? (size_t)m : 1, sizeof *score, "scores"));
    SAGA_TRY(saga_alloc_array((void **)&label, m ? (size_t)m : 1, sizeof *label, "labels"));
    SAGA_TRY(saga_alloc_array((void **)&kept, (size_t)max_m, sizeof *kept, "kept edges"));
    SAGA_TRY(saga_ctx_new(&c, be, 0));
    saga_ctx_train(c, false);
    saga_backend_stats bs;
    saga_backend_get_stats(be, &bs);
    const size_t budget = bs.budget_bytes;
    int64_t e0 = 0, stream_from = INT64_MAX;
    for (int32_t i = first; i < first + n; i++) {
        const hep_event_graph *g = &events[i];
        /* in memory, or streamed when the event does not fit the budget */
        st = g->n_edges < stream_from ? score_memory(c, net, be, events, i, &b, score + e0)
                                      : SAGA_ERR_BUDGET;
        saga_ctx_clear(c);
        hep_batch_free(&b);
        if (st == SAGA_ERR_BUDGET && budget) {
            st = SAGA_OK;
            stream_from = g->n_edges < stream_from ? g->n_edges : stream_from;
            saga_ctx_trim(c);
            SAGA_TRY(hep_rows_new(&rows, events, &i, 1));
            SAGA_TRY(hep_stream_scores(&hs, c, net, &rows, score + e0));
            hep_rows_free(&rows);
        }
        SAGA_TRY(st);
        for (int64_t k = 0; k < g->n_edges; k++) {
            label[e0 + k] = g->truth[k];
            kept[k] = score[e0 + k] > threshold;
            int reg = g->hit_region ? g->hit_region[g->src[k]] + g->hit_region[g->dst[k]] : 0;
            for (int q = 0; q < 2; q++) {
                int at = q ? ALL : reg;
                tp[at] += kept[k] && g->truth[k];
                fp[at] += kept[k] && !g->truth[k];
                fn[at] += !kept[k] && g->truth[k];
            }
        }
        int64_t f[HEP_N_SEG_REGIONS], t[HEP_N_SEG_REGIONS], fc = 0, tc = 0;
        SAGA_TRY(hep_track_efficiency_regions(f, t, be, g, kept, score + e0, track_pt));
        SAGA_TRY(hep_track_efficiency(&fc, &tc, be, g, kept, NULL, track_pt));
        for (int q = 0; q < HEP_N_SEG_REGIONS; q++) {
            found[q] += f[q], tracks[q] += t[q];
            found[ALL] += f[q], tracks[ALL] += t[q];
        }
        found_cc += fc;
        e0 += g->n_edges;
    }
    hep_metrics r = {.n_edges = m, .n_true = tp[ALL] + fn[ALL], .threshold = threshold};
    r.edge_efficiency = share(tp[ALL], tp[ALL] + fn[ALL]);
    r.edge_purity = share(tp[ALL], tp[ALL] + fp[ALL]);
    r.auc = hep_auc(score, label, m);
    if (curve)
        hep_curve_of(curve, score, label, m);
    r.n_tracks = tracks[ALL];
    r.track_efficiency = share(found[ALL], tracks[ALL]);
    r.track_efficiency_cc = share(found_cc, tracks[ALL]);
    for (int k = 0; k < HEP_N_SEG_REGIONS; k++) {
        r.region_true[k] = tp[k] + fn[k];
        r.region_edge_efficiency[k] = share(tp[k], tp[k] + fn[k]);
        r.region_edge_purity[k] = share(tp[k], tp[k] + fp[k]);
        r.region_tracks[k] = tracks[k];
        r.region_track_efficiency[k] = share(found[k], tracks[k]);
    }
    *out = r;
fail:
    hep_batch_free(&b);
    hep_rows_free(&rows);
    hep_stream_free(&hs);
    saga_ctx_free(&c);
    saga_free(score);
    saga_free(label);
    saga_free(kept);
    return st;
}

saga_status hep_evaluate(hep_metrics *out, saga_backend *be, hep_net *net,
                         const hep_event_graph *events, int32_t first, int32_t n, double threshold,
                         double track_pt) {
    return hep_evaluate_curve(out, NULL, be, net, events, first, n, threshold, track_pt);
}

/* ---- training -----------------------------------------------------------------------------
 */

hep_train_opts hep_train_opts_defaults(void) {
    return (hep_train_opts){.epochs = 40,
                            .lr = 0.003f,
                            .hidden = 32,
                            .iterations = 4,
                            .pos_weight = 1.0f,
                            .batch_events = 1,
                            .edge_budget = 0,
                            .hit_weight = 1.3,
                            .sampler = HEP_SAMPLER_RANDOM,
                            .threshold = 0.5,
                            .seed = 1,
                            .checkpoint = NULL,
                            .resume = NULL,
                            .accumulate = 1,
                            .lr_schedule = HEP_LR_COSINE,
                            .comm = NULL};
}

double hep_step_flops(int hidden, int iterations, int64_t edges, int64_t hits) {
    double H = hidden, K = iterations;
    double per_edge = HEP_EDGE_FEATURES * H + H * H + K * 4 * H * H + 3 * H * H + H;
    double per_hit = HEP_HIT_FEATURES * H + H * H + K * 4 * H * H;
    return 3 * 2 * (per_edge * (double)edges + per_hit * (double)hits);
}

float hep_lr_at(const hep_train_opts *o, int epoch) {
    if (o->lr_schedule != HEP_LR_COSINE || o->epochs <= 1)
        return o->lr;
    double lo = o->lr * HEP_LR_END, t = (double)(epoch - 1) / (double)(o->epochs - 1);
    if (t > 1)
        t = 1;
    return (float)(lo + 0.5 * (o->lr - lo) * (1 + cos(M_PI * t)));
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* A training step in memory on the micro-batch of events ids[0 .. n) (uploaded into *b, which
 * the caller frees with the context's tensors): the loss into *loss, the gradients added. */
static saga_status step_memory(saga_ctx *c, hep_net *net, saga_backend *be, const hep_data *d,
                               const int32_t *ids, int32_t n, float pos_weight, hep_batch *b,
                               double *loss) {
    saga_status st = SAGA_OK;
    SAGA_TRY(hep_batch_new(b, be, d->events, ids, n));
    saga_ctx_train(c, true);
    saga_tensor *logits = hep_net_forward(c, net, b);
    saga_tensor *l = saga_bce_logits(c, logits, b->target, pos_weight);
    SAGA_TRY(saga_ctx_status(c));
    SAGA_TRY(saga_backward(c, l)); /* adds into the parameters' gradients */
    *loss = saga_item(l);
fail:
    return st;
}

saga_status hep_train(hep_run *out, saga_backend *be, const hep_data *d, const hep_train_opts *o,
                      hep_epoch_fn on_epoch, void *user) {
    saga_status st = SAGA_OK;
    double t_start = saga_now();
    hep_net net = {0};
    saga_ctx *c = NULL;
    saga_optim *opt = NULL;
    hep_plan plan = {0};
    hep_batch b = {0};
    hep_rows rows = {0};
    hep_stream hs = {0};
    int64_t *edges = NULL;
    double *secs = NULL;
    hep_run r = {0};
    /* micro-batches of this many edges or more are streamed (the smallest that did not fit) */
    int64_t stream_from = INT64_MAX;
    saga_backend_stats bs0;
    saga_backend_get_stats(be, &bs0);
    const size_t budget = bs0.budget_bytes;
    saga_idle_tuner idle = {0}; /* epochs of many short kernels: sleeping or spinning threads */
    SAGA_CHECK(out && be && d && o, SAGA_ERR_INVALID_ARG, "hep_train: NULL argument");
    SAGA_CHECK(o->epochs >= 0 && isfinite(o->lr) && o->lr > 0 && o->pos_weight > 0 &&
                   o->batch_events >= 1 && o->edge_budget >= 0 && o->hit_weight >= 0 &&
                   o->hit_weight <= 1e6 && (unsigned)o->sampler < HEP_SAMPLER_COUNT &&
                   o->threshold > 0 && o->threshold < 1 && o->accumulate >= 1 &&
                   (unsigned)o->lr_schedule < HEP_LR_SCHEDULE_COUNT,
               SAGA_ERR_INVALID_ARG,
               "hep_train: options out of range (epochs >= 0, lr > 0, pos_weight > 0, "
               "batch_events >= 1, threshold in (0, 1), accumulate >= 1)");
    SAGA_CHECK(d->n_train >= 1, SAGA_ERR_INVALID_ARG, "hep_train: no training event");
    int32_t nt = d->n_train;
    SAGA_TRY(saga_alloc_array((void **)&edges, (size_t)nt, sizeof *edges, "event sizes"));
    for (int32_t i = 0; i < nt; i++) {
        edges[i] = d->events[i].n_edges + llround(o->hit_weight * d->events[i].n_hits);
        r.epoch_flops +=
            hep_step_flops(o->hidden, o->iterations, d->events[i].n_edges, d->events[i].n_hits);
    }

    SAGA_TRY(hep_net_new(&net, be, o->hidden, o->iterations, o->seed));
    r.n_params = saga_model_n_scalars(net.m);
    SAGA_TRY(saga_ctx_new(&c, be, o->seed));
    saga_optim_opts oo = saga_optim_opts_defaults(SAGA_OPTIM_ADAM);
    oo.lr = o->lr;
    SAGA_TRY(saga_optim_new(&opt, net.m, &oo));
    int64_t done = 0;
    if (o->resume) {
        uint64_t counter = 0;
        SAGA_TRY(saga_checkpoint_load(o->resume, net.m, opt, &done, &counter));
        SAGA_CHECK(done >= 0 && done <= INT32_MAX, SAGA_ERR_PARSE,
                   "%s: epoch count %lld out of range", o->resume, (long long)done);
        saga_ctx_set_rng_counter(c, counter);
    }
    r.start_epoch = (int)done;
    r.epochs = (int)done;
    r.loss = NAN;
    int to_run = o->epochs > done ? o->epochs - (int)done : 0;
    SAGA_TRY(
        saga_alloc_array((void **)&secs, to_run ? (size_t)to_run : 1, sizeof *secs, "epoch times"));

    int ranks = saga_comm_size(o->comm), me = saga_comm_rank(o->comm);
    int32_t acc = o->accumulate, group = ranks * acc;
    for (int epoch = (int)done + 1; epoch <= o->epochs; epoch++) {
        SAGA_TRY(saga_optim_set_lr(opt, hep_lr_at(o, epoch)));
        SAGA_TRY(hep_plan_epoch(&plan, o->sampler, edges, nt, o->batch_events, o->edge_budget,
                                o->seed, epoch - 1));
        hep_epoch e = {.epoch = epoch, .epochs = o->epochs, .n_batches = plan.n_batches};
        /* the peak of this epoch alone: nothing cached from the last one */
        saga_ctx_trim(c);
        saga_backend_reset_stats(be);
        saga_idle_tuner_begin(&idle, be);
        double t0 = saga_now(),
               sums[2] = {0, 0}; /* the losses of the micro-batches, and how many */
        for (int32_t step0 = 0; step0 < plan.n_batches; step0 += group) {
            int32_t in_step = plan.n_batches - step0 < group ? plan.n_batches - step0 : group;
            for (int32_t q = 0; q < acc; q++) {
                int32_t k = step0 + me * acc + q;
                if (k >= plan.n_batches)
                    break;
                int32_t cnt = plan.offsets[k + 1] - plan.offsets[k];
                const int32_t *ids = plan.events + plan.offsets[k];
                int64_t m = 0;
                for (int32_t i = 0; i < cnt; i++)
                    m += d->events[ids[i]].n_edges;
                if (m > e.max_batch_edges)
                    e.max_batch_edges = m;
                double loss = 0;
                saga_status ran = SAGA_ERR_BUDGET;
                if (!o->stream && m < stream_from) {
                    /* in memory; under a budget, with the gradients kept to go back to should
                     * the step not fit */
                    if (budget)
                        SAGA_TRY(hep_grads_keep(&hs, net.m, be, true));
                    ran = step_memory(c, &net, be, d, ids, cnt, o->pos_weight, &b, &loss);
                    saga_ctx_clear(c);
                    hep_batch_free(&b);
                    if (ran == SAGA_ERR_BUDGET && budget) {
                        saga_log(SAGA_LOG_WARN,
                                 "hep: a micro-batch of %lld edges does not fit the device budget "
                                 "(%s); streaming it and every one as large",
                                 (long long)m, saga_last_error());
                        SAGA_TRY(hep_grads_keep(&hs, net.m, be, false));
                        stream_from = m;
                    } else {
                        SAGA_TRY(ran);
                    }
                }
                if (ran == SAGA_ERR_BUDGET) {
                    SAGA_TRY(hep_rows_new(&rows, d->events, ids, cnt));
                    saga_ctx_trim(c); /* the budget's room is the chunks' */
                    SAGA_TRY(hep_stream_step(&hs, c, &net, &rows, o->pos_weight, &loss));
                    hep_rows_free(&rows);
                    e.streamed++;
                    e.chunk = hs.chunk;
                }
                sums[0] += loss;
                sums[1] += 1;
                /* micro-batches differ in size: buffers cached for one rarely fit the next */
                saga_ctx_trim(c);
            }
            if (ranks > 1 || in_step > 1)
                SAGA_TRY(saga_comm_allreduce_grads(o->comm, net.m, (double)in_step));
            SAGA_TRY(saga_optim_step(opt));
        }
        if (ranks > 1)
            SAGA_TRY(saga_comm_allreduce(o->comm, sums, 2, SAGA_F64, SAGA_COMM_SUM, NULL));
        saga_backend_stats bs;
        saga_backend_get_stats(be, &bs);
        e.seconds = saga_now() - t0;
        saga_idle_tuner_end(&idle, "hep: training epochs");
        e.peak_bytes = bs.peak_bytes;
        e.loss = sums[0] / sums[1];
        secs[epoch - (int)done - 1] = e.seconds;
        r.loss = e.loss;
        r.epochs = epoch;
        r.n_batches = plan.n_batches;
        r.budget = plan.budget;
        r.streamed = e.streamed;
        r.chunk = e.chunk;
        if (e.peak_bytes > r.peak_bytes)
            r.peak_bytes = e.peak_bytes;
        if (e.max_batch_edges > r.max_batch_edges)
            r.max_batch_edges = e.max_batch_edges;
        hep_plan_free(&plan);
        if (o->checkpoint && me == 0)
            SAGA_TRY(
                saga_checkpoint_save(o->checkpoint, net.m, opt, epoch, saga_ctx_rng_counter(c)));
        if (on_epoch)
            SAGA_TRY(on_epoch(&e, user));
    }
    if (to_run > 0) {
        qsort(secs, (size_t)to_run, sizeof *secs, cmp_double);
        r.epoch_seconds_min = secs[0];
        r.epoch_seconds =
            to_run % 2 ? secs[to_run / 2] : 0.5 * (secs[to_run / 2 - 1] + secs[to_run / 2]);
    }
    /* evaluation: the held-out events, or the training events when there are none */
    int32_t first = d->n_events > d->n_train ? d->n_train : 0;
    int32_t n_eval = d->n_events > d->n_train ? d->n_events - d->n_train : d->n_train;
    saga_status ev = SAGA_OK;
    if (me == 0)
        ev = hep_evaluate(&r.metrics, be, &net, d->events, first, n_eval, o->threshold, 1.0);
    if (ranks > 1) {
        SAGA_TRY(saga_comm_agree(o->comm, ev));
        SAGA_TRY(saga_comm_bcast(o->comm, &r.metrics, sizeof r.metrics, 0, NULL));
    }
    SAGA_TRY(ev);
    r.seconds = saga_now() - t_start;
    *out = r;
fail:
    saga_idle_tuner_finish(&idle);
    hep_batch_free(&b);
    hep_rows_free(&rows);
    hep_stream_free(&hs);
    hep_plan_free(&plan);
    saga_optim_free(&opt);
    saga_ctx_free(&c);
    hep_net_free(&net);
    saga_free(edges);
    saga_free(secs);
    return st;
}
