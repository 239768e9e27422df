/* trackml.c - collision events in the layout of the TrackML challenge: a seeded generator that
 * follows charged particles from surface to surface through the barrel and end-cap layers, with
 * multiple scattering, readout inefficiency and overlapping modules; the gzip CSV writer; and a
 * reader that finds columns by their header names (so real TrackML files read too). */
#include "saga_datasets.h"

#include "parse_util.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif

/* ---- geometry ----------------------------------------------------------------------------- */

typedef struct layer_spec {
    saga_trackml_layer g;
    double module_phi_mm; /* module width in r-phi */
    double module_len_mm; /* module length along z (cylinder) or r (disk) */
} layer_spec;

#define PIXEL_X0 0.012
#define STRIP_X0 0.016
#define BARREL(v, l, r, hz, srphi, sz, x0, mw, ml)                                                 \
    { {v, l, false, r, r, -(hz), hz, srphi, sz, x0}, mw, ml }
#define DISK(v, l, z, r0, r1, srphi, sr, x0, mw, ml)                                               \
    { {v, l, true, r0, r1, z, z, srphi, sr, x0}, mw, ml }
#define PIXEL_DISK(v, l, z) DISK(v, l, z, 30, 176, 0.05, 0.05, PIXEL_X0, 16, 72)
#define SS_DISK(v, l, z) DISK(v, l, z, 240, 700, 0.08, 0.5, STRIP_X0, 48, 156)
#define LS_DISK(v, l, z) DISK(v, l, z, 750, 1020, 0.08, 1.0, STRIP_X0, 96, 156)

/* The barrel (innermost first), then the disks of volumes 7, 9, 12, 14, 16, 18, each by layer id
 * (increasing z). */
static const layer_spec LAYERS[SAGA_TRACKML_N_LAYERS] = {
    BARREL(8, 2, 32, 500, 0.05, 0.05, PIXEL_X0, 16, 64),
    BARREL(8, 4, 72, 500, 0.05, 0.05, PIXEL_X0, 16, 64),
    BARREL(8, 6, 116, 500, 0.05, 0.05, PIXEL_X0, 16, 64),
    BARREL(8, 8, 172, 500, 0.05, 0.05, PIXEL_X0, 16, 64),
    BARREL(13, 2, 260, 1100, 0.08, 0.5, STRIP_X0, 48, 110),
    BARREL(13, 4, 360, 1100, 0.08, 0.5, STRIP_X0, 48, 110),
    BARREL(13, 6, 500, 1100, 0.08, 0.5, STRIP_X0, 48, 110),
    BARREL(13, 8, 660, 1100, 0.08, 0.5, STRIP_X0, 48, 110),
    BARREL(17, 2, 820, 1100, 0.08, 1.0, STRIP_X0, 96, 220),
    BARREL(17, 4, 1020, 1100, 0.08, 1.0, STRIP_X0, 96, 220),
    PIXEL_DISK(7, 2, -1500),
    PIXEL_DISK(7, 4, -1300),
    PIXEL_DISK(7, 6, -1100),
    PIXEL_DISK(7, 8, -960),
    PIXEL_DISK(7, 10, -820),
    PIXEL_DISK(7, 12, -700),
    PIXEL_DISK(7, 14, -600),
    PIXEL_DISK(9, 2, 600),
    PIXEL_DISK(9, 4, 700),
    PIXEL_DISK(9, 6, 820),
    PIXEL_DISK(9, 8, 960),
    PIXEL_DISK(9, 10, 1100),
    PIXEL_DISK(9, 12, 1300),
    PIXEL_DISK(9, 14, 1500),
    SS_DISK(12, 2, -2950),
    SS_DISK(12, 4, -2550),
    SS_DISK(12, 6, -2150),
    SS_DISK(12, 8, -1800),
    SS_DISK(12, 10, -1500),
    SS_DISK(12, 12, -1220),
    SS_DISK(14, 2, 1220),
    SS_DISK(14, 4, 1500),
    SS_DISK(14, 6, 1800),
    SS_DISK(14, 8, 2150),
    SS_DISK(14, 10, 2550),
    SS_DISK(14, 12, 2950),
    LS_DISK(16, 2, -2950),
    LS_DISK(16, 4, -2550),
    LS_DISK(16, 6, -2150),
    LS_DISK(16, 8, -1800),
    LS_DISK(16, 10, -1500),
    LS_DISK(16, 12, -1220),
    LS_DISK(18, 2, 1220),
    LS_DISK(18, 4, 1500),
    LS_DISK(18, 6, 1800),
    LS_DISK(18, 8, 2150),
    LS_DISK(18, 10, 2550),
    LS_DISK(18, 12, 2950),
};

int saga_trackml_layer_index(int32_t volume_id, int32_t layer_id) {
    for (int i = 0; i < SAGA_TRACKML_N_LAYERS; i++)
        if (LAYERS[i].g.volume_id == volume_id && LAYERS[i].g.layer_id == layer_id)
            return i;
    return -1;
}

const saga_trackml_layer *saga_trackml_layer_at(int i) {
    return i >= 0 && i < SAGA_TRACKML_N_LAYERS ? &LAYERS[i].g : NULL;
}

bool saga_trackml_is_endcap(int32_t volume_id) {
    return volume_id == 7 || volume_id == 9 || volume_id == 12 || volume_id == 14 ||
           volume_id == 16 || volume_id == 18;
}

static bool barrel_ok(int i) {
    return i >= 0 && i < SAGA_TRACKML_N_BARREL;
}
double saga_trackml_layer_radius(int i) {
    return barrel_ok(i) ? LAYERS[i].g.r_min : NAN;
}
double saga_trackml_layer_half_length(int i) {
    return barrel_ok(i) ? LAYERS[i].g.z_max : NAN;
}
double saga_trackml_layer_sigma_rphi(int i) {
    return barrel_ok(i) ? LAYERS[i].g.sigma_rphi : NAN;
}
double saga_trackml_layer_sigma_z(int i) {
    return barrel_ok(i) ? LAYERS[i].g.sigma_long : NAN;
}

/* Module of a position on layer i: phi sectors times rows along the layer's length (z on a
 * cylinder, r on a disk), numbered from 1. */
static int32_t module_of(int i, double phi, double r, double z) {
    const layer_spec *L = &LAYERS[i];
    const saga_trackml_layer *g = &L->g;
    double len0 = g->disk ? g->r_min : g->z_min, len1 = g->disk ? g->r_max : g->z_max;
    double at = g->disk ? r : z, circ = 2 * M_PI * g->r_max;
    int n_phi = (int)(circ / L->module_phi_mm);
    n_phi = n_phi < 1 ? 1 : n_phi;
    int n_len = (int)ceil((len1 - len0) / L->module_len_mm);
    int ip = (int)((phi + M_PI) / (2 * M_PI) * n_phi);
    int il = (int)((at - len0) / (len1 - len0) * n_len);
    ip = ip < 0 ? 0 : ip >= n_phi ? n_phi - 1 : ip;
    il = il < 0 ? 0 : il >= n_len ? n_len - 1 : il;
    return 1 + il * n_phi + ip;
}

/* ---- the generator ------------------------------------------------------------------------ */

saga_trackml_params saga_trackml_params_defaults(void) {
    return (saga_trackml_params){.min_particles = 100,
                                 .max_particles = 3000,
                                 .bfield = 2.0,
                                 .eta_max = 2.5,
                                 .pt_min = 0.2,
                                 .soft_pt_mean = 0.35,
                                 .tail_fraction = 0.15,
                                 .noise_fraction = 0.1,
                                 .seed = 1,
                                 .endcaps = true,
                                 .material = 1.0,
                                 .hit_efficiency = 0.98,
                                 .doubled_fraction = 0.1};
}

static uint64_t next_u64(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static double uniform(uint64_t *s) { /* in (0, 1) */
    return ((double)(next_u64(s) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

static double gauss(uint64_t *s) { /* Box-Muller, one value per two draws */
    double u = uniform(s), v = uniform(s);
    return sqrt(-2.0 * log(u)) * cos(2 * M_PI * v);
}

static double draw_pt(uint64_t *s, const saga_trackml_params *p) {
    if (uniform(s) >= p->tail_fraction)
        return p->pt_min - p->soft_pt_mean * log(uniform(s));
    /* dN/dpT ~ pT^-3 above 1 GeV: pT = u^(-1/2) by inversion, capped */
    double pt = 1.0 / sqrt(uniform(s));
    return pt > 100.0 ? 100.0 : pt;
}

static double wrap_angle(double a) {
    while (a > M_PI)
        a -= 2 * M_PI;
    while (a <= -M_PI)
        a += 2 * M_PI;
    return a;
}

/* One hit before ordering. */
typedef struct gen_hit {
    int layer;
    int32_t module;
    double phi;
    float x, y, z, tx, ty, tz, tpx, tpy, tpz;
    int64_t particle; /* 0: noise */
} gen_hit;

#define PION_MASS 0.13957 /* GeV */

/* A particle's helix from its base point (the vertex, or the last point where it scattered):
 * centre (cx, cy) and radius R (mm), the base point's angle theta0 about the centre, sense s (+1
 * counter-clockwise), the base point's z0, cot = pz / pT, pT (GeV) and the direction of motion
 * phi_dir at the base point. Turning by alpha along the motion leads to the point at angle
 * theta0 + s alpha about the centre and z0 + R alpha cot, moving along phi_dir + s alpha. */
typedef struct helix {
    double cx, cy, R, theta0, z0, cot, pt, phi_dir;
    int s;
} helix;

/* The helix of a particle at (x, y, z) moving along phi_dir with pT pt, cot = pz / pT and sense
 * s, in the field where a pT of 1 GeV turns on mm_per_gev mm. */
static helix helix_at(double x, double y, double z, double pt, double phi_dir, double cot, int s,
                      double mm_per_gev) {
    helix h = {.R = pt * mm_per_gev, .z0 = z, .cot = cot, .pt = pt, .phi_dir = phi_dir, .s = s};
    h.cx = x - h.R * s * sin(phi_dir);
    h.cy = y + h.R * s * cos(phi_dir);
    h.theta0 = atan2(y - h.cy, x - h.cx);
    return h;
}

/* The turning angles in [0, 2 pi) at which helix h meets the cylinder of radius r (two, equal
 * where it only touches it); 0 when it never does. */
static int cylinder_meets(const helix *h, double r, double al[2]) {
    double d = hypot(h->cx, h->cy);
    if (d + h->R < r || fabs(d - h->R) > r || d == 0)
        return 0;
    double a = (r * r - h->R * h->R + d * d) / (2 * d), h2 = r * r - a * a;
    double w = h2 > 0 ? sqrt(h2) : 0;
    double ux = h->cx / d, uy = h->cy / d;
    for (int k = -1; k <= 1; k += 2) {
        double px = a * ux - k * w * uy, py = a * uy + k * w * ux;
        double th = atan2(py - h->cy, px - h->cx);
        double t = fmod(h->s * (th - h->theta0), 2 * M_PI);
        al[(k + 1) / 2] = t < 0 ? t + 2 * M_PI : t;
    }
    return 2;
}

/* Whether the point (x, y, z) of layer l's surface lies inside the layer's bounds. */
static bool inside_layer(int l, double x, double y, double z) {
    const saga_trackml_layer *g = &LAYERS[l].g;
    if (!g->disk)
        return z >= g->z_min && z <= g->z_max;
    double r = hypot(x, y);
    return r >= g->r_min && r <= g->r_max;
}

/* Whether disk i's sensors cover the point of helix h at turning angle al. */
static bool inside_at(const helix *h, int i, double al) {
    double th = h->theta0 + h->s * al;
    return inside_layer(i, h->cx + h->R * cos(th), h->cy + h->R * sin(th), LAYERS[i].g.z_min);
}

/* The first surface among layers 0 .. n_layers-1 that helix h crosses after the turning angle
 * a_now: its layer in *layer and the turning angle in *alpha; false when none lies ahead. `last`
 * is the surface the particle is on (-1: none): a disk it cannot meet again, and of a cylinder's
 * two crossings the one nearer a_now is where it is, whatever the rounding says. */
static bool next_surface(const helix *h, int n_layers, int last, double a_now, int *layer,
                         double *alpha) {
    /* at most 1e-9 rad, less on the nearly straight tracks of a weak field, where that is long */
    double eps = fmin(1e-9, 1e-6 / h->R);
    double best = INFINITY;
    int which = -1;
    for (int i = 0; i < n_layers; i++) {
        const saga_trackml_layer *g = &LAYERS[i].g;
        double al[2];
        int n = 0;
        if (g->disk) {
            if (i != last && h->cot != 0) {
                al[0] = (g->z_min - h->z0) / (h->R * h->cot);
                n = 1;
            }
        } else {
            n = cylinder_meets(h, g->r_min, al);
            if (n == 2 && i == last) {
                if (fabs(remainder(al[0] - a_now, 2 * M_PI)) <
                    fabs(remainder(al[1] - a_now, 2 * M_PI)))
                    al[0] = al[1];
                n = 1;
            }
        }
        for (int k = 0; k < n; k++) {
            if (!(al[k] > a_now + eps) || al[k] > best)
                continue;
            /* disks of two subsystems share a plane (the short and long strips at each |z|):
             * of two surfaces met at one point, the one whose sensors are there */
            if (al[k] == best && !(g->disk && inside_at(h, i, al[k])))
                continue;
            best = al[k];
            which = i;
        }
    }
    *layer = which;
    *alpha = best;
    return which >= 0;
}

/* The hit that a particle crossing layer l at the true position (tx, ty, tz) with momentum tp
 * leaves: smeared in r-phi by sigma_rphi and along the layer by sigma_long, which is z on a
 * cylinder (the hit keeps to its radius) and r on a disk (the hit keeps to its z). */
static gen_hit smear_hit(int l, double tx, double ty, double tz, const double tp[3],
                         int64_t particle, uint64_t *rs) {
    const saga_trackml_layer *g = &LAYERS[l].g;
    double r, phi, z;
    if (g->disk) {
        double rt = hypot(tx, ty);
        phi = wrap_angle(atan2(ty, tx) + g->sigma_rphi / rt * gauss(rs));
        r = rt + g->sigma_long * gauss(rs);
        z = g->z_min;
    } else {
        r = g->r_min;
        phi = wrap_angle(atan2(ty, tx) + g->sigma_rphi / r * gauss(rs));
        z = tz + g->sigma_long * gauss(rs);
    }
    return (gen_hit){.layer = l,
                     .module = module_of(l, phi, r, z),
                     .phi = phi,
                     .x = (float)(r * cos(phi)),
                     .y = (float)(r * sin(phi)),
                     .z = (float)z,
                     .tx = (float)tx,
                     .ty = (float)ty,
                     .tz = (float)tz,
                     .tpx = (float)tp[0],
                     .tpy = (float)tp[1],
                     .tpz = (float)tp[2],
                     .particle = particle};
}

/* Where the overlapping module of layer l sees a particle that crosses it at (*x, *y, *z) along
 * tp: 2 mm further along its path (a straight step: the module is close), put back on the
 * layer's surface and, at the layer's edge, inside its bounds. */
static void overlap_point(int l, const double tp[3], double *x, double *y, double *z) {
    const saga_trackml_layer *g = &LAYERS[l].g;
    double step = 2.0 / sqrt(tp[0] * tp[0] + tp[1] * tp[1] + tp[2] * tp[2]);
    double ox = *x + step * tp[0], oy = *y + step * tp[1], oz = *z + step * tp[2];
    double r = hypot(ox, oy), to = g->r_min;
    if (g->disk) {
        to = r < g->r_min ? g->r_min : r > g->r_max ? g->r_max : r;
        oz = g->z_min;
    } else {
        oz = oz < g->z_min ? g->z_min : oz > g->z_max ? g->z_max : oz;
    }
    *x = ox * (to / r);
    *y = oy * (to / r);
    *z = oz;
}

/* Multiple scattering of a particle that crosses layer g at (x, y) with transverse momentum *pt
 * along (*phi_dir, *cot): the path through the layer is its thickness over the cosine of the
 * incidence on its normal (radial on a cylinder, z on a disk), at most ten thicknesses where the
 * particle grazes it, and times `material`; the width of the projected angle is Highland's
 * theta0 = 13.6 MeV / (beta p) sqrt(t) (1 + 0.038 ln(t / beta^2)) (PDG, charge 1, t in radiation
 * lengths). The direction turns by the space angle whose projections on two axes normal to it
 * are two independent Gaussian draws of that width; |p| stays. False when the new direction
 * runs along the beam, where no helix is left to follow. */
static bool scatter(const saga_trackml_layer *g, double material, double x, double y, double *pt,
                    double *phi_dir, double *cot, uint64_t *rs) {
    double n = hypot(1.0, *cot), p = *pt * n, cp = cos(*phi_dir), sp = sin(*phi_dir);
    double u[3] = {cp / n, sp / n, *cot / n};
    double c = fabs(g->disk ? u[2] : (u[0] * x + u[1] * y) / hypot(x, y));
    double t = material * (c > 0.1 ? g->x0_frac / c : 10 * g->x0_frac);
    double beta = p / sqrt(p * p + PION_MASS * PION_MASS);
    double width = 0.0136 / (beta * p) * sqrt(t) * (1 + 0.038 * log(t / (beta * beta)));
    width = width > 0 ? width : 0; /* the log's correction turns it negative for t < 4e-12 */
    double a = width * gauss(rs), b = width * gauss(rs), angle = hypot(a, b);
    if (angle == 0)
        return true;
    /* e1 horizontal, e2 = u x e1: with u an orthonormal frame */
    double e1[3] = {-sp, cp, 0}, e2[3] = {-u[2] * cp, -u[2] * sp, 1 / n};
    double cs = cos(angle), sn = sin(angle) / angle, w[3];
    for (int k = 0; k < 3; k++)
        w[k] = cs * u[k] + sn * (a * e1[k] + b * e2[k]);
    double wt = hypot(w[0], w[1]);
    if (wt < 1e-12)
        return false;
    *pt = p * wt;
    *cot = w[2] / wt;
    *phi_dir = atan2(w[1], w[0]);
    return true;
}

/* Appends h to the hits, growing the buffer by half when it is full. */
static saga_status push_hit(gen_hit **hits, int64_t *n, int64_t *cap, gen_hit h) {
    if (*n == *cap) {
        int64_t nc = *cap + *cap / 2;
        saga_status st =
            saga_realloc_array((void **)hits, (size_t)nc, sizeof **hits, "generated hits");
        if (st < 0)
            return st;
        *cap = nc;
    }
    (*hits)[(*n)++] = h;
    return SAGA_OK;
}

static int cmp_hit(const void *a, const void *b) {
    const gen_hit *x = a, *y = b;
    if (x->layer != y->layer)
        return x->layer < y->layer ? -1 : 1;
    if (x->module != y->module)
        return x->module < y->module ? -1 : 1;
    return (x->phi > y->phi) - (x->phi < y->phi);
}

static saga_status check_params(const saga_trackml_params *p) {
    saga_status st = SAGA_OK;
    SAGA_CHECK(p, SAGA_ERR_INVALID_ARG, "TrackML generator: parameters are NULL");
    SAGA_CHECK(p->min_particles >= 1 && p->max_particles >= p->min_particles &&
                   p->max_particles <= 1000000,
               SAGA_ERR_INVALID_ARG,
               "TrackML generator: particles must satisfy 1 <= min <= max <= 1000000, got %d..%d",
               (int)p->min_particles, (int)p->max_particles);
    SAGA_CHECK(isfinite(p->bfield) && p->bfield > 0, SAGA_ERR_INVALID_ARG,
               "TrackML generator: the field must be positive, got %g T", p->bfield);
    SAGA_CHECK(isfinite(p->eta_max) && p->eta_max > 0 && p->eta_max <= 6, SAGA_ERR_INVALID_ARG,
               "TrackML generator: eta_max must be in (0, 6], got %g", p->eta_max);
    SAGA_CHECK(isfinite(p->pt_min) && p->pt_min > 0 && isfinite(p->soft_pt_mean) &&
                   p->soft_pt_mean > 0,
               SAGA_ERR_INVALID_ARG,
               "TrackML generator: pt_min and soft_pt_mean must be positive, got %g and %g",
               p->pt_min, p->soft_pt_mean);
    SAGA_CHECK(p->tail_fraction >= 0 && p->tail_fraction <= 1, SAGA_ERR_INVALID_ARG,
               "TrackML generator: tail_fraction must be in [0, 1], got %g", p->tail_fraction);
    SAGA_CHECK(p->noise_fraction >= 0 && p->noise_fraction <= 10, SAGA_ERR_INVALID_ARG,
               "TrackML generator: noise_fraction must be in [0, 10], got %g", p->noise_fraction);
    SAGA_CHECK(p->material >= 0 && p->material <= 100, SAGA_ERR_INVALID_ARG,
               "TrackML generator: material must be in [0, 100], got %g", p->material);
    SAGA_CHECK(p->hit_efficiency > 0 && p->hit_efficiency <= 1, SAGA_ERR_INVALID_ARG,
               "TrackML generator: hit_efficiency must be in (0, 1], got %g", p->hit_efficiency);
    SAGA_CHECK(p->doubled_fraction >= 0 && p->doubled_fraction <= 1, SAGA_ERR_INVALID_ARG,
               "TrackML generator: doubled_fraction must be in [0, 1], got %g",
               p->doubled_fraction);
fail:
    return st;
}

/* The hit and truth columns of n_hits hits. */
static saga_status event_alloc_hits(saga_trackml_event *e, int64_t n_hits) {
    saga_status st = SAGA_OK;
    size_t nh = n_hits ? (size_t)n_hits : 1;
    e->n_hits = n_hits;
    SAGA_TRY(saga_alloc_array((void **)&e->hit_id, nh, sizeof(int64_t), "hit ids"));
    SAGA_TRY(saga_alloc_array((void **)&e->particle_id, nh, sizeof(int64_t), "hit particles"));
    float **hf[] = {&e->x,  &e->y,   &e->z,   &e->tx,  &e->ty,
                    &e->tz, &e->tpx, &e->tpy, &e->tpz, &e->weight};
    for (size_t i = 0; i < sizeof hf / sizeof hf[0]; i++)
        SAGA_TRY(saga_alloc_array((void **)hf[i], nh, sizeof(float), "hit columns"));
    int32_t **hi[] = {&e->volume_id, &e->layer_id, &e->module_id};
    for (size_t i = 0; i < sizeof hi / sizeof hi[0]; i++)
        SAGA_TRY(saga_alloc_array((void **)hi[i], nh, sizeof(int32_t), "hit columns"));
fail:
    return st;
}

/* The particle columns of n_particles particles (nhits zeroed). */
static saga_status event_alloc_particles(saga_trackml_event *e, int64_t n_particles) {
    saga_status st = SAGA_OK;
    size_t np = n_particles ? (size_t)n_particles : 1;
    e->n_particles = n_particles;
    SAGA_TRY(saga_alloc_array((void **)&e->p_id, np, sizeof(int64_t), "particle ids"));
    float **pf[] = {&e->vx, &e->vy, &e->vz, &e->px, &e->py, &e->pz};
    for (size_t i = 0; i < sizeof pf / sizeof pf[0]; i++)
        SAGA_TRY(saga_alloc_array((void **)pf[i], np, sizeof(float), "particle columns"));
    SAGA_TRY(saga_alloc_array((void **)&e->q, np, sizeof(int32_t), "particle charges"));
    SAGA_TRY(saga_alloc_zeroed((void **)&e->nhits, np, sizeof(int32_t), "particle hit counts"));
fail:
    return st;
}

void saga_trackml_event_free(saga_trackml_event **ep) {
    if (!ep || !*ep)
        return;
    saga_trackml_event *e = *ep;
    void *arrays[] = {e->hit_id,    e->x,           e->y,      e->z,    e->volume_id, e->layer_id,
                      e->module_id, e->particle_id, e->tx,     e->ty,   e->tz,        e->tpx,
                      e->tpy,       e->tpz,         e->weight, e->p_id, e->vx,        e->vy,
                      e->vz,        e->px,          e->py,     e->pz,   e->q,         e->nhits};
    for (size_t i = 0; i < sizeof arrays / sizeof arrays[0]; i++)
        saga_free(arrays[i]);
    saga_free(e);
    *ep = NULL;
}

saga_status saga_trackml_generate(saga_trackml_event **out, const saga_trackml_params *p,
                                  int64_t event_id) {
    saga_status st = SAGA_OK;
    saga_trackml_event *e = NULL;
    gen_hit *hits = NULL;
    int64_t n_hits = 0, cap = 0;
    SAGA_CHECK(out, SAGA_ERR_INVALID_ARG, "TrackML generator: out is NULL");
    SAGA_TRY(check_params(p));
    /* every event has its own stream: (seed, event) mixed, so events can be drawn in any order */
    uint64_t rs = next_u64(&(uint64_t){p->seed ^ 0x7472616b6d6cull}) ^
                  (uint64_t)event_id * 0xD1B54A32D192ED03ull;
    double lmin = log((double)p->min_particles), lmax = log((double)p->max_particles + 1.0);
    int64_t n_part = (int64_t)floor(exp(lmin + (lmax - lmin) * uniform(&rs)));
    if (n_part > p->max_particles)
        n_part = p->max_particles;

    SAGA_TRY(saga_alloc_zeroed((void **)&e, 1, sizeof *e, "an event"));
    e->event_id = event_id;
    SAGA_TRY(event_alloc_particles(e, n_part));
    /* a first guess, grown as needed: a particle may leave two hits on each layer */
    cap = 16 + n_part * SAGA_TRACKML_N_BARREL;
    SAGA_TRY(saga_alloc_array((void **)&hits, (size_t)cap, sizeof *hits, "generated hits"));
    double mm_per_gev = 1000.0 / (0.3 * p->bfield); /* R[mm] = pT[GeV] * mm_per_gev */
    int n_layers = p->endcaps ? SAGA_TRACKML_N_LAYERS : SAGA_TRACKML_N_BARREL;
    for (int64_t i = 0; i < n_part; i++) {
        int q = uniform(&rs) < 0.5 ? -1 : 1;
        double pt = draw_pt(&rs, p);
        double eta = p->eta_max * (2 * uniform(&rs) - 1);
        double phi0 = M_PI * (2 * uniform(&rs) - 1);
        double vx = 0.015 * gauss(&rs), vy = 0.015 * gauss(&rs), vz = 55.0 * gauss(&rs);
        double cot = sinh(eta); /* pz / pT */
        e->p_id[i] = i + 1;
        e->vx[i] = (float)vx;
        e->vy[i] = (float)vy;
        e->vz[i] = (float)vz;
        e->px[i] = (float)(pt * cos(phi0));
        e->py[i] = (float)(pt * sin(phi0));
        e->pz[i] = (float)(pt * cot);
        e->q[i] = q;
        /* the helix: sense s = -q (a positive charge turns clockwise in a field along +z). It is
         * set up again only where the particle scatters: without material every crossing is
         * computed from the vertex, so that the barrel alone without material, inefficiency or
         * doubled hits gives the events of the barrel-only ideal generator to the last bit. */
        helix h = helix_at(vx, vy, vz, pt, phi0, cot, -q, mm_per_gev);
        double turned = 0, a_now = 0; /* turning angle up to the helix's base point, and since */
        int last = -1;
        for (;;) {
            int l;
            double al;
            /* half a turn at most: loopers stop */
            if (!next_surface(&h, n_layers, last, a_now, &l, &al) || turned + al > M_PI)
                break;
            a_now = al;
            last = l;
            const saga_trackml_layer *g = &LAYERS[l].g;
            double tz = g->disk ? g->z_min : h.z0 + h.R * al * h.cot;
            double th = h.theta0 + h.s * al, dir = h.phi_dir + h.s * al;
            double tx = h.cx + h.R * cos(th), ty = h.cy + h.R * sin(th);
            if (!inside_layer(l, tx, ty, tz))
                continue; /* no sensor, no material: the particle passes */
            double tp[3] = {h.pt * cos(dir), h.pt * sin(dir), h.pt * h.cot};
            if (p->hit_efficiency >= 1 || uniform(&rs) < p->hit_efficiency) {
                SAGA_TRY(push_hit(&hits, &n_hits, &cap, smear_hit(l, tx, ty, tz, tp, i + 1, &rs)));
                e->nhits[i]++;
                if (p->doubled_fraction > 0 && uniform(&rs) < p->doubled_fraction) {
                    double ox = tx, oy = ty, oz = tz;
                    overlap_point(l, tp, &ox, &oy, &oz);
                    SAGA_TRY(
                        push_hit(&hits, &n_hits, &cap, smear_hit(l, ox, oy, oz, tp, i + 1, &rs)));
                    e->nhits[i]++;
                }
            }
            /* the material is there whether or not the readout saw the particle */
            if (p->material > 0) {
                double npt = h.pt, ncot = h.cot;
                if (!scatter(g, p->material, tx, ty, &npt, &dir, &ncot, &rs))
                    break;
                h = helix_at(tx, ty, tz, npt, dir, ncot, h.s, mm_per_gev);
                turned += al;
                a_now = 0;
            }
        }
    }
    int64_t n_signal = n_hits;
    int64_t n_noise = (int64_t)llround(p->noise_fraction * (double)n_signal);
    SAGA_TRY(saga_realloc_array((void **)&hits, (size_t)(n_hits + n_noise + 1), sizeof *hits,
                                "generated hits"));
    /* noise falls uniformly over the sensors' area: a layer by its share of it, a point on it */
    double area[SAGA_TRACKML_N_LAYERS], total = 0;
    for (int l = 0; l < n_layers; l++) {
        const saga_trackml_layer *g = &LAYERS[l].g;
        total += g->disk ? M_PI * (g->r_max * g->r_max - g->r_min * g->r_min)
                         : 2 * M_PI * g->r_min * (g->z_max - g->z_min);
        area[l] = total;
    }
    for (int64_t k = 0; k < n_noise; k++) {
        int l = 0;
        if (p->endcaps) {
            double u = uniform(&rs) * total;
            while (l < n_layers - 1 && u >= area[l])
                l++;
        } else {
            /* the barrel alone: a layer by count, as the barrel-only ideal generator drew it */
            l = (int)(uniform(&rs) * SAGA_TRACKML_N_BARREL);
        }
        const saga_trackml_layer *g = &LAYERS[l].g;
        double r = g->r_min, phi = M_PI * (2 * uniform(&rs) - 1), z;
        if (g->disk) {
            r = sqrt(g->r_min * g->r_min +
                     (g->r_max * g->r_max - g->r_min * g->r_min) * uniform(&rs));
            z = g->z_min;
        } else {
            z = g->z_max * (2 * uniform(&rs) - 1);
        }
        float x = (float)(r * cos(phi)), y = (float)(r * sin(phi));
        hits[n_hits++] = (gen_hit){.layer = l,
                                   .module = module_of(l, phi, r, z),
                                   .phi = phi,
                                   .x = x,
                                   .y = y,
                                   .z = (float)z,
                                   .tx = x,
                                   .ty = y,
                                   .tz = (float)z,
                                   .particle = 0};
    }
    /* detector order, as TrackML numbers its hits: the particles' order must not leak */
    qsort(hits, (size_t)n_hits, sizeof *hits, cmp_hit);

    SAGA_TRY(event_alloc_hits(e, n_hits));
    for (int64_t k = 0; k < n_hits; k++) {
        const gen_hit *h = &hits[k];
        e->hit_id[k] = k + 1;
        e->x[k] = h->x;
        e->y[k] = h->y;
        e->z[k] = h->z;
        e->volume_id[k] = LAYERS[h->layer].g.volume_id;
        e->layer_id[k] = LAYERS[h->layer].g.layer_id;
        e->module_id[k] = h->module;
        e->particle_id[k] = h->particle;
        e->tx[k] = h->tx;
        e->ty[k] = h->ty;
        e->tz[k] = h->tz;
        e->tpx[k] = h->tpx;
        e->tpy[k] = h->tpy;
        e->tpz[k] = h->tpz;
        /* as TrackML: the weights of an event's particle hits add up to 1, noise weighs 0 */
        e->weight[k] = h->particle ? (float)(1.0 / (double)n_signal) : 0.0f;
    }
    saga_free(hits);
    *out = e;
    return SAGA_OK;
fail:
    saga_free(hits);
    saga_trackml_event_free(&e);
    return st;
}

/* ---- writing ------------------------------------------------------------------------------ */

typedef enum file_kind { FILE_HITS, FILE_TRUTH, FILE_PARTICLES, FILE_KIND_COUNT } file_kind;
static const char *const FILE_SUFFIX[FILE_KIND_COUNT] = {"hits", "truth", "particles"};

static saga_status write_rows(gzFile f, const saga_trackml_event *e, file_kind k) {
    int ok = 1;
    switch (k) {
    case FILE_HITS:
        ok = gzputs(f, "hit_id,x,y,z,volume_id,layer_id,module_id\n") > 0;
        for (int64_t i = 0; ok && i < e->n_hits; i++)
            ok = gzprintf(f, "%lld,%.4f,%.4f,%.4f,%d,%d,%d\n", (long long)e->hit_id[i],
                          (double)e->x[i], (double)e->y[i], (double)e->z[i], (int)e->volume_id[i],
                          (int)e->layer_id[i], (int)e->module_id[i]) > 0;
        break;
    case FILE_TRUTH:
        ok = gzputs(f, "hit_id,particle_id,tx,ty,tz,tpx,tpy,tpz,weight\n") > 0;
        for (int64_t i = 0; ok && i < e->n_hits; i++)
            ok = gzprintf(f, "%lld,%lld,%.4f,%.4f,%.4f,%.6g,%.6g,%.6g,%.6g\n",
                          (long long)e->hit_id[i], (long long)e->particle_id[i], (double)e->tx[i],
                          (double)e->ty[i], (double)e->tz[i], (double)e->tpx[i], (double)e->tpy[i],
                          (double)e->tpz[i], (double)e->weight[i]) > 0;
        break;
    case FILE_PARTICLES:
        ok = gzputs(f, "particle_id,vx,vy,vz,px,py,pz,q,nhits\n") > 0;
        for (int64_t i = 0; ok && i < e->n_particles; i++)
            ok = gzprintf(f, "%lld,%.5f,%.5f,%.4f,%.6g,%.6g,%.6g,%d,%d\n", (long long)e->p_id[i],
                          (double)e->vx[i], (double)e->vy[i], (double)e->vz[i], (double)e->px[i],
                          (double)e->py[i], (double)e->pz[i], (int)e->q[i], (int)e->nhits[i]) > 0;
        break;
    default:
        break;
    }
    return ok ? SAGA_OK : SAGA_ERR_IO;
}

saga_status saga_trackml_write(const saga_trackml_event *e, const char *dir) {
    saga_status st = SAGA_OK;
    char *path = NULL, *tmp = NULL;
    gzFile f = NULL;
    SAGA_CHECK(e && dir, SAGA_ERR_INVALID_ARG, "TrackML writer: NULL argument");
    SAGA_CHECK(e->hit_id && e->x && e->y && e->z && e->volume_id && e->layer_id && e->module_id &&
                   e->particle_id && e->tx && e->ty && e->tz && e->tpx && e->tpy && e->tpz &&
                   e->weight && e->p_id && e->vx && e->vy && e->vz && e->px && e->py && e->pz &&
                   e->q && e->nhits,
               SAGA_ERR_INVALID_ARG, "TrackML writer: event %lld lacks some of the columns",
               (long long)e->event_id);
    size_t cap = strlen(dir) + 64;
    SAGA_TRY(saga_alloc_array((void **)&path, cap, 1, "event path"));
    SAGA_TRY(saga_alloc_zeroed((void **)&tmp, cap, 1, "event path"));
    for (int k = 0; k < FILE_KIND_COUNT; k++) {
        snprintf(path, cap, "%s/event%09lld-%s.csv.gz", dir, (long long)e->event_id,
                 FILE_SUFFIX[k]);
        snprintf(tmp, cap, "%s.tmp", path);
        /* gzopen writes a header without a time stamp: same event, same bytes */
        f = gzopen(tmp, "wb6");
        SAGA_CHECK(f, SAGA_ERR_IO, "cannot create '%s': %s", tmp,
                   errno ? strerror(errno) : "out of memory");
        st = write_rows(f, e, (file_kind)k);
        int rc = gzclose(f);
        f = NULL;
        SAGA_CHECK(st == SAGA_OK && rc == Z_OK, SAGA_ERR_IO, "%s: write failed: %s", tmp,
                   errno ? strerror(errno) : "zlib error");
        SAGA_CHECK(rename(tmp, path) == 0, SAGA_ERR_IO, "cannot rename '%s' to '%s': %s", tmp, path,
                   strerror(errno));
        tmp[0] = '\0';
    }
fail:
    if (f)
        gzclose(f);
    if (st < 0 && tmp && tmp[0])
        remove(tmp); /* no half-written file left behind */
    saga_free(path);
    saga_free(tmp);
    return st;
}

/* ---- reading ------------------------------------------------------------------------------ */

typedef enum col_kind { COL_I64, COL_I32, COL_F32 } col_kind;

/* A column wanted from a CSV file: its header name, type, whether the file must have it, and
 * where its array goes (saga_malloc'd, n_rows entries; left NULL when an optional column is
 * absent). */
typedef struct col_spec {
    const char *name;
    col_kind kind;
    bool required;
    void **dst;
} col_spec;

enum { CSV_MAX_COLS = 64 };

static size_t col_size(col_kind k) {
    return k == COL_I64 ? sizeof(int64_t) : k == COL_I32 ? sizeof(int32_t) : sizeof(float);
}

/* Parses the field [p, q) as column c's type into row `row` of its array. */
static saga_status parse_field(const saga_lines *l, const col_spec *c, const char *p, const char *q,
                               int64_t row) {
    const char *t = p;
    saga_text_result r;
    int64_t iv = 0;
    double dv = 0;
    saga_text_skip_blank(&t, q);
    if (c->kind == COL_F32) {
        r = saga_text_f64(&t, q, &dv);
        if (r == SAGA_TEXT_OK && fabs(dv) > 3.4e38)
            r = SAGA_TEXT_OVERFLOW;
    } else {
        r = saga_text_i64(&t, q, &iv);
        if (r == SAGA_TEXT_OK && c->kind == COL_I32 && (iv < INT32_MIN || iv > INT32_MAX))
            r = SAGA_TEXT_OVERFLOW;
    }
    if (r == SAGA_TEXT_OK && saga_text_skip_blank(&t, q))
        r = SAGA_TEXT_INVALID; /* "12abc" */
    if (r != SAGA_TEXT_OK) {
        int len = (int)(q - p) > 40 ? 40 : (int)(q - p);
        return saga_parse_error(SAGA_ERR_PARSE, l, "expected %s in column '%s', found \"%.*s\"",
                                c->kind == COL_F32 ? "a finite number" : "an integer", c->name, len,
                                p);
    }
    if (c->kind == COL_F32)
        ((float *)*c->dst)[row] = (float)dv;
    else if (c->kind == COL_I32)
        ((int32_t *)*c->dst)[row] = (int32_t)iv;
    else
        ((int64_t *)*c->dst)[row] = iv;
    return SAGA_OK;
}

/* Reads a CSV file with a header line into the wanted columns; *n_rows data rows, and their
 * line numbers in *line_of (saga_malloc'd) when line_of is not NULL. Blank lines are skipped. On
 * failure every array is freed and NULL. */
static saga_status csv_read(const char *path, col_spec *cols, int n_cols, int64_t *n_rows,
                            int64_t **line_of) {
    saga_status st = SAGA_OK;
    saga_reader *r = NULL;
    saga_lines *l = NULL;
    int64_t *lines = NULL, n = 0, cap = 0;
    int map[CSV_MAX_COLS]; /* header field -> wanted column, or -1 */
    int n_fields = 0;
    const char *line;
    size_t len;
    for (int c = 0; c < n_cols; c++)
        *cols[c].dst = NULL;
    SAGA_TRY(saga_reader_open(&r, path));
    st = saga_lines_open(&l, r); /* takes r, also when it fails */
    r = NULL;
    if (st < 0)
        goto fail;

    /* ---- the header */
    SAGA_TRY(saga_lines_next(l, &line, &len));
    if (!line) {
        st = saga_error(SAGA_ERR_PARSE, "%s:1: expected a CSV header line, found an empty file",
                        path);
        goto fail;
    }
    bool found[CSV_MAX_COLS] = {false};
    for (const char *p = line, *end = line + len; p <= end; n_fields++) {
        const char *q = memchr(p, ',', (size_t)(end - p));
        if (!q)
            q = end;
        if (n_fields == CSV_MAX_COLS) {
            st = saga_parse_error(SAGA_ERR_PARSE, l, "expected at most %d columns, found more",
                                  CSV_MAX_COLS);
            goto fail;
        }
        const char *a = p, *b = q;
        if (n_fields == 0 && b - a >= 3 && memcmp(a, "\xEF\xBB\xBF", 3) == 0)
            a += 3; /* a UTF-8 byte order mark */
        while (a < b && (*a == ' ' || *a == '\t' || *a == '"'))
            a++;
        while (b > a && (b[-1] == ' ' || b[-1] == '\t' || b[-1] == '"' || b[-1] == '\r'))
            b--;
        map[n_fields] = -1;
        for (int c = 0; c < n_cols; c++)
            if (!found[c] && strlen(cols[c].name) == (size_t)(b - a) &&
                memcmp(cols[c].name, a, (size_t)(b - a)) == 0) {
                map[n_fields] = c;
                found[c] = true;
            }
        p = q + 1;
    }
    for (int c = 0; c < n_cols; c++)
        if (cols[c].required && !found[c]) {
            st = saga_parse_error(SAGA_ERR_PARSE, l,
                                  "expected a column named '%s' in the header, found \"%.*s\"",
                                  cols[c].name, len > 200 ? 200 : (int)len, line);
            goto fail;
        }

    /* ---- the rows */
    for (;;) {
        SAGA_TRY(saga_lines_next(l, &line, &len));
        if (!line)
            break;
        if (saga_parse_is_blank(line, line + len))
            continue;
        if (n == cap) {
            int64_t nc = cap ? cap * 2 : 4096;
            for (int c = 0; c < n_cols; c++)
                if (found[c])
                    SAGA_TRY(saga_realloc_array(cols[c].dst, (size_t)nc, col_size(cols[c].kind),
                                                cols[c].name));
            if (line_of)
                SAGA_TRY(
                    saga_realloc_array((void **)&lines, (size_t)nc, sizeof *lines, "line numbers"));
            cap = nc;
        }
        int f = 0;
        const char *p = line, *end = line + len;
        for (;; f++) {
            const char *q = memchr(p, ',', (size_t)(end - p));
            if (!q)
                q = end;
            if (f < n_fields && map[f] >= 0)
                SAGA_TRY(parse_field(l, &cols[map[f]], p, q, n));
            if (q == end)
                break;
            p = q + 1;
        }
        if (f + 1 != n_fields) {
            st = saga_parse_error(SAGA_ERR_PARSE, l,
                                  "expected %d comma-separated fields (as the header), found %d",
                                  n_fields, f + 1);
            goto fail;
        }
        if (line_of)
            lines[n] = saga_lines_number(l);
        n++;
    }
    /* an empty table still gets arrays, so that present columns are never NULL */
    for (int c = 0; c < n_cols; c++)
        if (found[c] && !*cols[c].dst)
            SAGA_TRY(saga_alloc_array(cols[c].dst, 1, col_size(cols[c].kind), cols[c].name));
    saga_lines_close(&l);
    *n_rows = n;
    if (line_of)
        *line_of = lines;
    else
        saga_free(lines);
    return SAGA_OK;
fail:
    saga_reader_close(&r);
    saga_lines_close(&l);
    saga_free(lines);
    for (int c = 0; c < n_cols; c++) {
        saga_free(*cols[c].dst);
        *cols[c].dst = NULL;
    }
    return st;
}

/* PREFIX-what.csv.gz when it exists, else PREFIX-what.csv (whose absence the reader reports). */
static saga_status event_file(char **out, const char *prefix, const char *what) {
    size_t cap = strlen(prefix) + 32;
    char *p = saga_malloc(cap);
    if (!p)
        return saga_error(SAGA_ERR_OUT_OF_MEMORY, "out of memory for a file name");
    snprintf(p, cap, "%s-%s.csv.gz", prefix, what);
    FILE *f = fopen(p, "rb");
    if (f)
        fclose(f);
    else
        snprintf(p, cap, "%s-%s.csv", prefix, what);
    *out = p;
    return SAGA_OK;
}

typedef struct id_row {
    int64_t id;
    int64_t row;
} id_row;

static int cmp_id_row(const void *a, const void *b) {
    const id_row *x = a, *y = b;
    return (x->id > y->id) - (x->id < y->id);
}

/* The row of id in the sorted index, or -1. */
static int64_t find_row(const id_row *ix, int64_t n, int64_t id) {
    int64_t lo = 0, hi = n;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (ix[mid].id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n && ix[lo].id == id ? ix[lo].row : -1;
}

/* Puts the truth column src (truth row order) into hit order: dst[hit_of[j]] = src[j]. */
static saga_status scatter_f32(float **col, const int64_t *hit_of, int64_t n) {
    if (!*col)
        return SAGA_OK;
    float *out = NULL;
    saga_status st = saga_alloc_array((void **)&out, n ? (size_t)n : 1, sizeof *out, "truth");
    if (st < 0)
        return st;
    for (int64_t j = 0; j < n; j++)
        out[hit_of[j]] = (*col)[j];
    saga_free(*col);
    *col = out;
    return SAGA_OK;
}

saga_status saga_trackml_read(saga_trackml_event **out, const char *prefix) {
    saga_status st = SAGA_OK;
    saga_trackml_event *e = NULL;
    char *hits_path = NULL, *truth_path = NULL, *part_path = NULL;
    int64_t *truth_lines = NULL, *hit_lines = NULL, *t_hit = NULL, *t_pid = NULL;
    int64_t *hit_of = NULL;
    id_row *ix = NULL;
    SAGA_CHECK(out && prefix, SAGA_ERR_INVALID_ARG, "TrackML reader: NULL argument");
    SAGA_TRY(saga_alloc_zeroed((void **)&e, 1, sizeof *e, "an event"));
    const char *base = strrchr(prefix, '/');
    base = base ? base + 1 : prefix;
    if (strncmp(base, "event", 5) == 0)
        e->event_id = strtoll(base + 5, NULL, 10);
    SAGA_TRY(event_file(&hits_path, prefix, "hits"));
    SAGA_TRY(event_file(&truth_path, prefix, "truth"));
    SAGA_TRY(event_file(&part_path, prefix, "particles"));

    /* ---- hits */
    col_spec hc[] = {{"hit_id", COL_I64, true, (void **)&e->hit_id},
                     {"x", COL_F32, true, (void **)&e->x},
                     {"y", COL_F32, true, (void **)&e->y},
                     {"z", COL_F32, true, (void **)&e->z},
                     {"volume_id", COL_I32, true, (void **)&e->volume_id},
                     {"layer_id", COL_I32, true, (void **)&e->layer_id},
                     {"module_id", COL_I32, false, (void **)&e->module_id}};
    SAGA_TRY(csv_read(hits_path, hc, (int)(sizeof hc / sizeof hc[0]), &e->n_hits, &hit_lines));
    int64_t nh = e->n_hits;
    SAGA_TRY(saga_alloc_array((void **)&ix, nh ? (size_t)nh : 1, sizeof *ix, "hit index"));
    for (int64_t i = 0; i < nh; i++)
        ix[i] = (id_row){e->hit_id[i], i};
    qsort(ix, (size_t)nh, sizeof *ix, cmp_id_row);
    for (int64_t i = 1; i < nh; i++)
        SAGA_CHECK(ix[i].id != ix[i - 1].id, SAGA_ERR_PARSE,
                   "%s:%lld: expected a new hit_id, found %lld again (line %lld)", hits_path,
                   (long long)hit_lines[ix[i].row > ix[i - 1].row ? ix[i].row : ix[i - 1].row],
                   (long long)ix[i].id,
                   (long long)hit_lines[ix[i].row < ix[i - 1].row ? ix[i].row : ix[i - 1].row]);

    /* ---- truth, matched to the hits by hit_id */
    int64_t nt = 0;
    col_spec tc[] = {{"hit_id", COL_I64, true, (void **)&t_hit},
                     {"particle_id", COL_I64, true, (void **)&t_pid},
                     {"tx", COL_F32, false, (void **)&e->tx},
                     {"ty", COL_F32, false, (void **)&e->ty},
                     {"tz", COL_F32, false, (void **)&e->tz},
                     {"tpx", COL_F32, false, (void **)&e->tpx},
                     {"tpy", COL_F32, false, (void **)&e->tpy},
                     {"tpz", COL_F32, false, (void **)&e->tpz},
                     {"weight", COL_F32, false, (void **)&e->weight}};
    SAGA_TRY(csv_read(truth_path, tc, (int)(sizeof tc / sizeof tc[0]), &nt, &truth_lines));
    SAGA_TRY(saga_alloc_array((void **)&e->particle_id, nh ? (size_t)nh : 1, sizeof(int64_t),
                              "hit particles"));
    SAGA_TRY(saga_alloc_array((void **)&hit_of, nt ? (size_t)nt : 1, sizeof *hit_of, "truth rows"));
    for (int64_t i = 0; i < nh; i++)
        e->particle_id[i] = -1; /* not seen yet */
    for (int64_t j = 0; j < nt; j++) {
        int64_t i = find_row(ix, nh, t_hit[j]);
        SAGA_CHECK(i >= 0, SAGA_ERR_PARSE, "%s:%lld: expected a hit_id of %s, found %lld",
                   truth_path, (long long)truth_lines[j], hits_path, (long long)t_hit[j]);
        SAGA_CHECK(e->particle_id[i] == -1, SAGA_ERR_PARSE,
                   "%s:%lld: expected a new hit_id, found %lld again", truth_path,
                   (long long)truth_lines[j], (long long)t_hit[j]);
        SAGA_CHECK(t_pid[j] >= 0, SAGA_ERR_PARSE,
                   "%s:%lld: expected a particle_id >= 0, found %lld", truth_path,
                   (long long)truth_lines[j], (long long)t_pid[j]);
        e->particle_id[i] = t_pid[j];
        hit_of[j] = i;
    }
    SAGA_CHECK(nt == nh, SAGA_ERR_PARSE, "%s: expected a row for each of the %lld hits, found %lld",
               truth_path, (long long)nh, (long long)nt);
    float **tcols[] = {&e->tx, &e->ty, &e->tz, &e->tpx, &e->tpy, &e->tpz, &e->weight};
    for (size_t k = 0; k < sizeof tcols / sizeof tcols[0]; k++)
        SAGA_TRY(scatter_f32(tcols[k], hit_of, nt));

    /* ---- particles */
    col_spec pc[] = {{"particle_id", COL_I64, true, (void **)&e->p_id},
                     {"vx", COL_F32, false, (void **)&e->vx},
                     {"vy", COL_F32, false, (void **)&e->vy},
                     {"vz", COL_F32, false, (void **)&e->vz},
                     {"px", COL_F32, true, (void **)&e->px},
                     {"py", COL_F32, true, (void **)&e->py},
                     {"pz", COL_F32, true, (void **)&e->pz},
                     {"q", COL_I32, false, (void **)&e->q},
                     {"nhits", COL_I32, false, (void **)&e->nhits}};
    SAGA_TRY(csv_read(part_path, pc, (int)(sizeof pc / sizeof pc[0]), &e->n_particles, NULL));
    *out = e;
    e = NULL;
fail:
    saga_trackml_event_free(&e);
    saga_free(hits_path);
    saga_free(truth_path);
    saga_free(part_path);
    saga_free(truth_lines);
    saga_free(hit_lines);
    saga_free(t_hit);
    saga_free(t_pid);
    saga_free(hit_of);
    saga_free(ix);
    return st;
}

/* ---- listing ------------------------------------------------------------------------------ */

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

void saga_trackml_list_free(char ***prefixes, int64_t n) {
    if (!prefixes || !*prefixes)
        return;
    for (int64_t i = 0; i < n; i++)
        saga_free((*prefixes)[i]);
    saga_free(*prefixes);
    *prefixes = NULL;
}

saga_status saga_trackml_list(char ***prefixes, int64_t *n_out, const char *dir) {
    saga_status st = SAGA_OK;
    char **list = NULL;
    int64_t n = 0, cap = 0;
    DIR *d = NULL;
    SAGA_CHECK(prefixes && n_out && dir, SAGA_ERR_INVALID_ARG, "TrackML list: NULL argument");
    d = opendir(dir);
    SAGA_CHECK(d, SAGA_ERR_IO, "cannot open directory '%s': %s", dir, strerror(errno));
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        const char *name = de->d_name;
        size_t len = strlen(name), stem = 0;
        if (strncmp(name, "event", 5) != 0)
            continue;
        if (len > 12 && strcmp(name + len - 12, "-hits.csv.gz") == 0)
            stem = len - 12;
        else if (len > 9 && strcmp(name + len - 9, "-hits.csv") == 0)
            stem = len - 9;
        else
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 64;
            SAGA_TRY(saga_realloc_array((void **)&list, (size_t)cap, sizeof *list, "event list"));
        }
        size_t sz = strlen(dir) + 1 + stem + 1;
        SAGA_TRY(saga_alloc_array((void **)&list[n], sz, 1, "event name"));
        snprintf(list[n], sz, "%s/%.*s", dir, (int)stem, name);
        n++;
    }
    qsort(list, (size_t)n, sizeof *list, cmp_str);
    /* an event with both a .csv and a .csv.gz is one event */
    int64_t k = 0;
    for (int64_t i = 0; i < n; i++) {
        if (k > 0 && strcmp(list[k - 1], list[i]) == 0)
            saga_free(list[i]);
        else
            list[k++] = list[i];
    }
    *prefixes = list;
    *n_out = k;
    list = NULL;
    n = 0;
fail:
    if (d)
        closedir(d);
    saga_trackml_list_free(&list, n);
    return st;
}
