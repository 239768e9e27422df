/* test_trackml.c - the TrackML-style event generator (determinism, hits on the surfaces of the
 * barrel and end-cap layers, helix radii fitted from the hits against pT / (0.3 B), multiple
 * scattering against Highland's formula, the rates of readout inefficiency and doubled hits), the
 * CSV writer, the header-driven reader on good and bad files, the challenge's volume ids and a
 * directory in its train_sample layout. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "test_util.h"

#include "saga_datasets.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

static const char *make_dir(const char *name) {
    const char *d = saga_test_tmp(name);
    assert_int_equal(mkdir(d, 0777), 0);
    return d;
}

/* The whole file in a malloc'd buffer. */
static char *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    assert_non_null(buf);
    assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    *len = (size_t)n;
    return buf;
}

static bool same_file(const char *a, const char *b) {
    size_t la, lb;
    char *x = slurp(a, &la), *y = slurp(b, &lb);
    bool same = la == lb && memcmp(x, y, la) == 0;
    free(x);
    free(y);
    return same;
}

static saga_trackml_params small_params(void) {
    saga_trackml_params p = saga_trackml_params_defaults();
    p.min_particles = 150;
    p.max_particles = 400;
    p.seed = 7;
    return p;
}

/* The barrel alone, without material, inefficiency or doubled hits: ideal helices. */
static saga_trackml_params ideal_barrel(saga_trackml_params p) {
    p.endcaps = false;
    p.material = 0;
    p.hit_efficiency = 1;
    p.doubled_fraction = 0;
    return p;
}

/* With the defaults: the end-caps, material, inefficiency and doubled hits draw too. */
static void test_trackml_same_seed_same_bytes(void **state) {
    (void)state;
    saga_trackml_params p = small_params();
    const char *d1 = make_dir("gen1"), *d2 = make_dir("gen2"), *d3 = make_dir("gen3");
    saga_trackml_event *e = NULL;
    assert_int_equal(saga_trackml_generate(&e, &p, 3), SAGA_OK);
    assert_int_equal(saga_trackml_write(e, d1), SAGA_OK);
    saga_trackml_event_free(&e);
    assert_null(e);
    assert_int_equal(saga_trackml_generate(&e, &p, 3), SAGA_OK);
    assert_int_equal(saga_trackml_write(e, d2), SAGA_OK);
    saga_trackml_event_free(&e);
    p.seed = 8;
    assert_int_equal(saga_trackml_generate(&e, &p, 3), SAGA_OK);
    assert_int_equal(saga_trackml_write(e, d3), SAGA_OK);
    saga_trackml_event_free(&e);
    const char *kinds[3] = {"hits", "truth", "particles"};
    char a[512], b[512], c[512];
    for (int k = 0; k < 3; k++) {
        snprintf(a, sizeof a, "%s/event000000003-%s.csv.gz", d1, kinds[k]);
        snprintf(b, sizeof b, "%s/event000000003-%s.csv.gz", d2, kinds[k]);
        snprintf(c, sizeof c, "%s/event000000003-%s.csv.gz", d3, kinds[k]);
        assert_true(same_file(a, b));
        assert_false(same_file(a, c));
    }
    /* events of one seed differ from each other, in size too */
    saga_trackml_event *e1 = NULL, *e2 = NULL;
    assert_int_equal(saga_trackml_generate(&e1, &p, 1), SAGA_OK);
    assert_int_equal(saga_trackml_generate(&e2, &p, 2), SAGA_OK);
    assert_true(e1->n_particles != e2->n_particles || e1->n_hits != e2->n_hits);
    saga_trackml_event_free(&e1);
    saga_trackml_event_free(&e2);
}

/* Circle through points (x, y) by the algebraic (Kasa) least-squares fit, in double: the
 * reference the generator's helices are checked against. Returns the radius. */
static double fit_circle(const double *x, const double *y, int n) {
    double mx = 0, my = 0;
    for (int i = 0; i < n; i++)
        mx += x[i], my += y[i];
    mx /= n, my /= n;
    double suu = 0, svv = 0, suv = 0, suuu = 0, svvv = 0, suvv = 0, svuu = 0;
    for (int i = 0; i < n; i++) {
        double u = x[i] - mx, v = y[i] - my;
        suu += u * u, svv += v * v, suv += u * v;
        suuu += u * u * u, svvv += v * v * v, suvv += u * v * v, svuu += v * u * u;
    }
    double r1 = 0.5 * (suuu + suvv), r2 = 0.5 * (svvv + svuu), det = suu * svv - suv * suv;
    double uc = (r1 * svv - r2 * suv) / det, vc = (r2 * suu - r1 * suv) / det;
    return sqrt(uc * uc + vc * vc + (suu + svv) / n);
}

static void test_trackml_hits_follow_helices_on_layers(void **state) {
    (void)state;
    saga_trackml_params p = ideal_barrel(small_params());
    p.noise_fraction = 0.2;
    saga_trackml_event *e = NULL;
    assert_int_equal(saga_trackml_generate(&e, &p, 11), SAGA_OK);
    assert_true(e->n_particles >= 150 && e->n_particles <= 400);

    /* every hit on its layer's cylinder, inside its length, ids 1..n in detector order */
    int64_t noise = 0, signal = 0;
    int prev_layer = 0;
    for (int64_t i = 0; i < e->n_hits; i++) {
        int l = saga_trackml_layer_index(e->volume_id[i], e->layer_id[i]);
        assert_true(l >= 0);
        assert_true(l >= prev_layer);
        prev_layer = l;
        assert_int_equal(e->hit_id[i], i + 1);
        double r = hypot(e->x[i], e->y[i]);
        assert_true(fabs(r - saga_trackml_layer_radius(l)) < 0.01);
        double hz = saga_trackml_layer_half_length(l) + 6 * saga_trackml_layer_sigma_z(l);
        assert_true(fabs(e->z[i]) <= hz);
        /* measured and true positions differ by the smearing only */
        if (e->particle_id[i]) {
            double drphi = hypot(e->x[i] - e->tx[i], e->y[i] - e->ty[i]);
            assert_true(drphi < 6 * saga_trackml_layer_sigma_rphi(l) + 1e-3);
            assert_true(fabs(e->z[i] - e->tz[i]) < 6 * saga_trackml_layer_sigma_z(l) + 1e-3);
            signal++;
        } else {
            noise++;
        }
    }
    assert_true(fabs((double)noise - 0.2 * (double)signal) <= 1.0);

    /* helix radius from the hits: R[mm] = 1000 pT / (0.3 B) */
    double *hx = malloc(sizeof(double) * 16), *hy = malloc(sizeof(double) * 16);
    double *tx = malloc(sizeof(double) * 16), *ty = malloc(sizeof(double) * 16);
    int checked = 0, loopers = 0;
    for (int64_t k = 0; k < e->n_particles; k++) {
        double pt = hypot(e->px[k], e->py[k]);
        int n = 0;
        for (int64_t i = 0; i < e->n_hits; i++)
            if (e->particle_id[i] == e->p_id[k]) {
                assert_true(n < 16);
                hx[n] = e->x[i], hy[n] = e->y[i];
                tx[n] = e->tx[i], ty[n] = e->ty[i];
                n++;
            }
        assert_int_equal(n, e->nhits[k]);
        double R = 1000.0 * pt / (0.3 * p.bfield);
        /* a helix whose diameter is below a layer's radius never reaches it */
        if (2 * R < saga_trackml_layer_radius(SAGA_TRACKML_N_BARREL - 1)) {
            loopers++;
            int reach = 0;
            while (reach < SAGA_TRACKML_N_BARREL && saga_trackml_layer_radius(reach) < 2 * R)
                reach++;
            assert_true(n <= reach);
        }
        if (pt > 1.0 && n >= 5) {
            /* the true positions lie on the circle; the measured ones, smeared, fit it within a
             * few percent while the sagitta over the detector is large against the smearing */
            double fit_true = fit_circle(tx, ty, n), fit = fit_circle(hx, hy, n);
            double tol = pt < 3.0 ? 0.03 : 1.0;
            if (fabs(fit_true - R) > 0.002 * R || fabs(fit - R) > tol * R) {
                print_message("particle %lld: pT %.3f GeV, R %.1f mm, fitted %.1f mm from the "
                              "true positions, %.1f mm from the hits (%d hits)\n",
                              (long long)e->p_id[k], pt, R, fit_true, fit, n);
                fail();
            }
            checked += pt < 3.0;
        }
    }
    assert_true(checked >= 20);
    assert_true(loopers >= 10);
    free(hx);
    free(hy);
    free(tx);
    free(ty);
    saga_trackml_event_free(&e);
}

static double wrap(double a) {
    return remainder(a, 2 * M_PI);
}

/* The defaults over a few events. Every hit lies on its layer's surface (the measured radius of a
 * cylinder's hit is the cylinder's, the measured z of a disk's hit the disk's) and inside its
 * bounds, by the smearing at most 6 sigma outside; the measured position is within 6 sigma of the
 * true one (a Gaussian passes 6 sigma about once in 5e8 draws, against some 4e4 here). Hits land
 * on the end-caps (a fifth of them with |eta| < 2.5; at least a tenth asked), a particle's nhits
 * counts its hits, some layers hold two hits of one particle (doubled), and the noise falls on
 * the disks with their share of the sensors' area, within 5 standard deviations
 * sqrt(f (1 - f) / n) of it. */
static void test_trackml_hits_on_barrel_and_endcaps(void **state) {
    (void)state;
    saga_trackml_params p = small_params();
    double area[SAGA_TRACKML_N_LAYERS], total = 0, disk_area = 0;
    for (int l = 0; l < SAGA_TRACKML_N_LAYERS; l++) {
        const saga_trackml_layer *g = saga_trackml_layer_at(l);
        area[l] = g->disk ? M_PI * (g->r_max * g->r_max - g->r_min * g->r_min)
                          : 2 * M_PI * g->r_min * (g->z_max - g->z_min);
        total += area[l];
        disk_area += g->disk ? area[l] : 0;
    }
    int64_t signal = 0, on_endcaps = 0, noise = 0, noise_on_disks = 0, doubled = 0;
    for (int64_t ev = 1; ev <= 6; ev++) {
        saga_trackml_event *e = NULL;
        assert_int_equal(saga_trackml_generate(&e, &p, ev), SAGA_OK);
        /* hits per particle and layer: particle ids are 1 .. n_particles */
        int *per = calloc((size_t)e->n_particles * SAGA_TRACKML_N_LAYERS, sizeof *per);
        int *count = calloc((size_t)e->n_particles, sizeof *count);
        assert_true(per && count);
        for (int64_t i = 0; i < e->n_hits; i++) {
            int l = saga_trackml_layer_index(e->volume_id[i], e->layer_id[i]);
            assert_true(l >= 0);
            const saga_trackml_layer *g = saga_trackml_layer_at(l);
            double r = hypot(e->x[i], e->y[i]), tr = hypot(e->tx[i], e->ty[i]);
            double sl = e->particle_id[i] ? 6 * g->sigma_long : 0;
            if (g->disk) {
                assert_true(fabs(e->z[i] - g->z_min) < 1e-3 && fabs(e->tz[i] - g->z_min) < 1e-3);
                assert_true(r >= g->r_min - sl - 0.01 && r <= g->r_max + sl + 0.01);
                assert_true(tr >= g->r_min - 0.01 && tr <= g->r_max + 0.01);
            } else {
                assert_true(fabs(r - g->r_min) < 0.01 && fabs(tr - g->r_min) < 0.01);
                assert_true(e->z[i] >= g->z_min - sl - 1e-3 && e->z[i] <= g->z_max + sl + 1e-3);
                assert_true(e->tz[i] >= g->z_min - 1e-3 && e->tz[i] <= g->z_max + 1e-3);
            }
            if (!e->particle_id[i]) {
                assert_true(e->x[i] == e->tx[i] && e->y[i] == e->ty[i] && e->z[i] == e->tz[i]);
                noise++;
                noise_on_disks += g->disk;
                continue;
            }
            /* r-phi, and along the layer: z on a cylinder, r on a disk */
            double rphi = tr * fabs(wrap(atan2(e->y[i], e->x[i]) - atan2(e->ty[i], e->tx[i])));
            double along = g->disk ? fabs(r - tr) : fabs(e->z[i] - e->tz[i]);
            assert_true(rphi < 6 * g->sigma_rphi + 1e-3);
            assert_true(along < 6 * g->sigma_long + 1e-3);
            int64_t k = e->particle_id[i] - 1;
            assert_true(k >= 0 && k < e->n_particles && e->p_id[k] == k + 1);
            per[k * SAGA_TRACKML_N_LAYERS + l]++;
            count[k]++;
            signal++;
            on_endcaps += saga_trackml_is_endcap(e->volume_id[i]);
        }
        for (int64_t k = 0; k < e->n_particles; k++) {
            assert_int_equal(count[k], e->nhits[k]);
            for (int l = 0; l < SAGA_TRACKML_N_LAYERS; l++)
                doubled += per[k * SAGA_TRACKML_N_LAYERS + l] == 2;
        }
        free(per);
        free(count);
        saga_trackml_event_free(&e);
    }
    assert_true(on_endcaps >= signal / 10 && on_endcaps < signal);
    assert_true(doubled > 0);
    assert_true(noise > 1000 && fabs((double)noise - 0.1 * (double)signal) <= 6.0);
    double f = disk_area / total, share = (double)noise_on_disks / (double)noise;
    assert_true(fabs(share - f) <= 5 * sqrt(f * (1 - f) / (double)noise));
}

/* Highland's theta0 for a particle of momentum p (GeV) crossing layer g at (x, y) along the unit
 * vector u: the path t in radiation lengths is the layer's over the cosine of the incidence
 * (at most ten layers' worth), times material. */
static double highland(const saga_trackml_layer *g, double material, double x, double y,
                       const double u[3], double p) {
    double c = fabs(g->disk ? u[2] : (u[0] * x + u[1] * y) / hypot(x, y));
    double t = material * (c > 0.1 ? g->x0_frac / c : 10 * g->x0_frac);
    double beta = p / sqrt(p * p + 0.13957 * 0.13957);
    return 0.0136 / (beta * p) * sqrt(t) * (1 + 0.038 * log(t / (beta * beta)));
}

/* The mean of (kink / theta0)^2 over the projections of the kinks between consecutive barrel hits
 * of the particles of n_events straight-track events (see below); *n the projections counted.
 * Where the readout missed layers between two hits, the kink is the sum of those at each layer
 * crossed inside its bounds from the first hit's on, theta0^2 the sum of theirs: the crossings
 * in between lie on the straight line through the two hits, their incidence taken along the
 * first hit's direction (the kinks are too small to matter there). */
static double kink_moment(double material, double efficiency, int n_events, int64_t *n) {
    saga_trackml_params p = ideal_barrel(small_params());
    p.bfield = 1e-6;
    p.material = material;
    p.hit_efficiency = efficiency;
    p.noise_fraction = 0;
    p.min_particles = p.max_particles = 2000;
    double sum = 0;
    *n = 0;
    for (int64_t ev = 1; ev <= n_events; ev++) {
        saga_trackml_event *e = NULL;
        assert_int_equal(saga_trackml_generate(&e, &p, ev), SAGA_OK);
        /* a particle's hits in hit order are in layer order, which is the order along a straight
         * track from the beam: the previous one's row per particle */
        int64_t *prev = malloc(sizeof *prev * (size_t)e->n_particles);
        assert_non_null(prev);
        for (int64_t k = 0; k < e->n_particles; k++)
            prev[k] = -1;
        for (int64_t i = 0; i < e->n_hits; i++) {
            int64_t k = e->particle_id[i] - 1, j = prev[k];
            prev[k] = i;
            if (j < 0)
                continue;
            int lj = saga_trackml_layer_index(e->volume_id[j], e->layer_id[j]);
            int li = saga_trackml_layer_index(e->volume_id[i], e->layer_id[i]);
            assert_true(lj >= 0 && lj < li);
            double a[3] = {e->tpx[j], e->tpy[j], e->tpz[j]},
                   b[3] = {e->tpx[i], e->tpy[i], e->tpz[i]};
            double pa = sqrt(a[0] * a[0] + a[1] * a[1] + a[2] * a[2]);
            double pb = sqrt(b[0] * b[0] + b[1] * b[1] + b[2] * b[2]);
            assert_true(fabs(pb - pa) <= 1e-5 * pa); /* no energy loss */
            double u[3] = {a[0] / pa, a[1] / pa, a[2] / pa}, ut = hypot(u[0], u[1]);
            double e1[3] = {-u[1] / ut, u[0] / ut, 0}; /* horizontal, normal to u */
            double e2[3] = {u[1] * e1[2] - u[2] * e1[1], u[2] * e1[0] - u[0] * e1[2],
                            u[0] * e1[1] - u[1] * e1[0]}; /* u x e1 */
            double along = 0, p1 = 0, p2 = 0;
            for (int c = 0; c < 3; c++) {
                along += b[c] / pb * u[c];
                p1 += b[c] / pb * e1[c];
                p2 += b[c] / pb * e2[c];
            }
            double rj = hypot(e->tx[j], e->ty[j]), ri = hypot(e->tx[i], e->ty[i]), var = 0;
            for (int l = lj; l < li; l++) {
                double f = (saga_trackml_layer_radius(l) - rj) / (ri - rj);
                double x = e->tx[j] + f * (e->tx[i] - e->tx[j]);
                double y = e->ty[j] + f * (e->ty[i] - e->ty[j]);
                double z = e->tz[j] + f * (e->tz[i] - e->tz[j]);
                if (l == lj || fabs(z) <= saga_trackml_layer_half_length(l)) {
                    double t0 = highland(saga_trackml_layer_at(l), material, x, y, u, pa);
                    var += t0 * t0;
                }
            }
            double k1 = atan2(p1, along), k2 = atan2(p2, along);
            sum += (k1 * k1 + k2 * k2) / var;
            *n += 2;
        }
        free(prev);
        saga_trackml_event_free(&e);
    }
    return sum / (double)*n;
}

/* Multiple scattering against Highland's formula, from the truth. In a field of 1e-6 T tracks are
 * straight (R > 600 km: the field turns a track by under 2e-6 rad between layers, against kinks
 * of at least 1e-5 rad at 100 GeV, some 1e-2 at the softest), so with the barrel alone and no
 * doubled hits the true momentum's direction changes between two consecutive hits of a particle
 * by the kink at the first hit's layer alone when every crossing is read out (a layer crossed
 * outside its bounds holds no material), else by those of the layers crossed up to the next hit.
 * Projected on two axes normal to the incoming direction, a kink over Highland's theta0 for its
 * crossing (the quadratic sum of theirs for several) is a standard Gaussian, so the mean of its
 * square over N projections is 1 with a standard deviation of sqrt(2 / N); the check allows 5
 * (N is 5e4 to 7e4 per run: 5 sqrt(2 / N) is 0.026 to 0.032). Leaving out the incidence (up to 6
 * layers' thickness at |eta| = 2.5: the mean falls to 0.67), the velocity beta (0.93), the
 * logarithm (1.36), the material scale's square root (3.6 at material 4), or the scattering
 * where the readout missed the particle (0.86 at hit_efficiency 0.7) fails it, as does t taken
 * for sqrt(t) (0.02). */
static void test_trackml_scattering_follows_highland(void **state) {
    (void)state;
    const double runs[3][2] = {{1.0, 1.0}, {4.0, 1.0}, {1.0, 0.7}}; /* material, efficiency */
    for (int m = 0; m < 3; m++) {
        int64_t n = 0;
        double mean = kink_moment(runs[m][0], runs[m][1], 3, &n);
        double bound = 5 * sqrt(2.0 / (double)n);
        if (n < 20000 || fabs(mean - 1) > bound) {
            print_message("material %g, hit_efficiency %g: mean of (kink / theta0)^2 is %.4f over "
                          "%lld projections, expected 1 +- %.4f\n",
                          runs[m][0], runs[m][1], mean, (long long)n, bound);
            fail();
        }
    }
}

/* The barrel layers the ideal helix of particle k crosses inside their length, as a bit set:
 * turning by 2 asin(r / 2R) takes a circle through the beam line to radius r (the vertex, some
 * 15 um off it, shifts a crossing by about as much, which decides a crossing only within that of
 * a layer's end or the helix's turning point); half a turn at most. */
static unsigned barrel_crossings(const saga_trackml_event *e, int64_t k, double bfield) {
    double pt = hypot(e->px[k], e->py[k]), R = 1000.0 * pt / (0.3 * bfield);
    double cot = e->pz[k] / pt;
    unsigned set = 0;
    for (int l = 0; l < SAGA_TRACKML_N_BARREL; l++) {
        double r = saga_trackml_layer_radius(l);
        if (r > 2 * R)
            break;
        double z = e->vz[k] + R * 2 * asin(r / (2 * R)) * cot;
        if (fabs(z) <= saga_trackml_layer_half_length(l))
            set |= 1u << l;
    }
    return set;
}

/* Per particle and barrel layer, its hits; the particles' rows of n_layers counts (calloc'd). */
static int *hits_per_layer(const saga_trackml_event *e) {
    int *per = calloc((size_t)e->n_particles * SAGA_TRACKML_N_BARREL, sizeof *per);
    assert_non_null(per);
    for (int64_t i = 0; i < e->n_hits; i++)
        if (e->particle_id[i]) {
            int l = saga_trackml_layer_index(e->volume_id[i], e->layer_id[i]);
            assert_true(l >= 0 && l < SAGA_TRACKML_N_BARREL);
            per[(e->particle_id[i] - 1) * SAGA_TRACKML_N_BARREL + l]++;
        }
    return per;
}

/* The rates of readout inefficiency and doubled hits, against the crossings of ideal helices
 * (no material): first with every crossing read out once, where a particle's hits must be its
 * crossings (but for the few the vertex's offset decides, at most 0.5% of the particles); then
 * with hit_efficiency 0.8 and doubled_fraction 0.25, where the share of crossings with a hit is a
 * binomial rate of 0.8 and the share of those with a second hit one of 0.25: each within 5
 * standard deviations sqrt(rate (1 - rate) / N) (N some 4e4 crossings: 0.01). A doubled hit is
 * on the same layer, its true position at most 2 mm from the first's. */
static void test_trackml_inefficiency_and_doubled_hits(void **state) {
    (void)state;
    saga_trackml_params p = ideal_barrel(small_params());
    p.min_particles = p.max_particles = 2000;
    int64_t off = 0, n_part = 0;
    for (int64_t ev = 1; ev <= 2; ev++) {
        saga_trackml_event *e = NULL;
        assert_int_equal(saga_trackml_generate(&e, &p, ev), SAGA_OK);
        int *per = hits_per_layer(e);
        for (int64_t k = 0; k < e->n_particles; k++, n_part++) {
            unsigned set = 0;
            for (int l = 0; l < SAGA_TRACKML_N_BARREL; l++) {
                assert_true(per[k * SAGA_TRACKML_N_BARREL + l] <= 1);
                set |= per[k * SAGA_TRACKML_N_BARREL + l] ? 1u << l : 0;
            }
            off += set != barrel_crossings(e, k, p.bfield);
        }
        free(per);
        saga_trackml_event_free(&e);
    }
    assert_true(off * 200 <= n_part);

    p.hit_efficiency = 0.8;
    p.doubled_fraction = 0.25;
    int64_t crossings = 0, read = 0, twice = 0, outside = 0;
    for (int64_t ev = 1; ev <= 3; ev++) {
        saga_trackml_event *e = NULL;
        assert_int_equal(saga_trackml_generate(&e, &p, ev), SAGA_OK);
        int *per = hits_per_layer(e);
        for (int64_t k = 0; k < e->n_particles; k++) {
            unsigned set = barrel_crossings(e, k, p.bfield);
            int n = 0;
            for (int l = 0; l < SAGA_TRACKML_N_BARREL; l++) {
                int c = per[k * SAGA_TRACKML_N_BARREL + l];
                assert_true(c <= 2);
                n += c;
                crossings += (set >> l) & 1;
                read += c > 0;
                twice += c == 2;
                outside += c > 0 && !((set >> l) & 1);
            }
            assert_int_equal(n, e->nhits[k]);
        }
        /* the two hits of a doubled pair are neighbours in the particle's hits of the layer */
        for (int64_t i = 1; i < e->n_hits; i++)
            for (int64_t j = i - 1;
                 j >= 0 && e->layer_id[j] == e->layer_id[i] && e->volume_id[j] == e->volume_id[i];
                 j--)
                if (e->particle_id[j] && e->particle_id[j] == e->particle_id[i]) {
                    double d = sqrt(pow(e->tx[i] - e->tx[j], 2) + pow(e->ty[i] - e->ty[j], 2) +
                                    pow(e->tz[i] - e->tz[j], 2));
                    assert_true(d <= 2.0 + 1e-3);
                }
        free(per);
        saga_trackml_event_free(&e);
    }
    assert_true(outside * 1000 <= read);
    double eff = (double)read / (double)crossings, dbl = (double)twice / (double)read;
    if (fabs(eff - 0.8) > 5 * sqrt(0.8 * 0.2 / (double)crossings) ||
        fabs(dbl - 0.25) > 5 * sqrt(0.25 * 0.75 / (double)read)) {
        print_message("%lld crossings: %.4f read out (0.8 asked), %.4f of those twice (0.25)\n",
                      (long long)crossings, eff, dbl);
        fail();
    }
}

static void test_trackml_write_read_round_trip(void **state) {
    (void)state;
    saga_trackml_params p = small_params();
    const char *d = make_dir("rt");
    saga_trackml_event *e = NULL, *r = NULL;
    for (int64_t id = 5; id >= 4; id--) {
        assert_int_equal(saga_trackml_generate(&e, &p, id), SAGA_OK);
        assert_int_equal(saga_trackml_write(e, d), SAGA_OK);
        if (id == 4)
            break;
        saga_trackml_event_free(&e);
    }
    char **list = NULL;
    int64_t n = 0;
    assert_int_equal(saga_trackml_list(&list, &n, d), SAGA_OK);
    assert_int_equal(n, 2);
    char want[512];
    snprintf(want, sizeof want, "%s/event000000004", d);
    assert_string_equal(list[0], want);
    assert_int_equal(saga_trackml_read(&r, list[0]), SAGA_OK);
    saga_trackml_list_free(&list, n);
    assert_null(list);
    assert_int_equal(r->event_id, 4);
    assert_int_equal(r->n_hits, e->n_hits);
    assert_int_equal(r->n_particles, e->n_particles);
    for (int64_t i = 0; i < e->n_hits; i++) {
        assert_int_equal(r->hit_id[i], e->hit_id[i]);
        assert_true(fabsf(r->x[i] - e->x[i]) < 1e-3f && fabsf(r->z[i] - e->z[i]) < 1e-3f);
        assert_int_equal(r->volume_id[i], e->volume_id[i]);
        assert_int_equal(r->layer_id[i], e->layer_id[i]);
        assert_int_equal(r->module_id[i], e->module_id[i]);
        assert_int_equal(r->particle_id[i], e->particle_id[i]);
        assert_true(fabsf(r->tpx[i] - e->tpx[i]) <= 1e-5f * (1 + fabsf(e->tpx[i])));
    }
    for (int64_t k = 0; k < e->n_particles; k++) {
        assert_int_equal(r->p_id[k], e->p_id[k]);
        assert_true(fabsf(r->px[k] - e->px[k]) <= 1e-5f * (1 + fabsf(e->px[k])));
        assert_int_equal(r->q[k], e->q[k]);
        assert_int_equal(r->nhits[k], e->nhits[k]);
    }
    saga_trackml_event_free(&e);
    saga_trackml_event_free(&r);
}

/* Writes the three files of an event named PREFIX in dir from text; returns the prefix. */
static const char *write_event(const char *dir, const char *hits, const char *truth,
                               const char *parts) {
    static char prefix[512];
    char path[600];
    snprintf(prefix, sizeof prefix, "%s/event000000042", dir);
    const char *text[3] = {hits, truth, parts}, *kind[3] = {"hits", "truth", "particles"};
    for (int k = 0; k < 3; k++) {
        snprintf(path, sizeof path, "%s-%s.csv", prefix, kind[k]);
        FILE *f = fopen(path, "w");
        assert_non_null(f);
        fputs(text[k], f);
        fclose(f);
    }
    return prefix;
}

static const char *HITS = "hit_id,x,y,z,volume_id,layer_id,module_id\n"
                          "1,31.5,-5.25,10,8,2,7\n"
                          "2,70.0,3.0,22.5,8,4,9\n"
                          "3,-100,50,-300,13,2,1\n";
static const char *TRUTH = "hit_id,particle_id,tx,ty,tz,tpx,tpy,tpz,weight\n"
                           "3,0,-100,50,-300,0,0,0,0\n"
                           "1,77,31.5,-5.25,10,1,0,0.5,0.5\n"
                           "2,77,70,3,22.5,1,0.1,0.5,0.5\n";
static const char *PARTS = "particle_id,vx,vy,vz,px,py,pz,q,nhits\n"
                           "77,0,0,1,1.5,0.25,0.5,1,2\n";

/* Real TrackML files: other columns, other orders, extra columns, CRLF line ends. */
static void test_trackml_reader_finds_columns_by_name(void **state) {
    (void)state;
    const char *d = make_dir("named");
    const char *prefix = write_event(d,
                                     "volume_id,layer_id,hit_id,z,y,x,extra\r\n"
                                     "8,2,1,10,-5.25,31.5,x\r\n"
                                     "13,4,2,-7,2,-300,y\r\n",
                                     "particle_id,hit_id\n4503599644147712,2\n0,1\n",
                                     "particle_id,px,py,pz,extra\n4503599644147712,3,4,0,z\n");
    saga_trackml_event *e = NULL;
    assert_int_equal(saga_trackml_read(&e, prefix), SAGA_OK);
    assert_int_equal(e->event_id, 42);
    assert_int_equal(e->n_hits, 2);
    assert_true(e->x[0] == 31.5f && e->y[0] == -5.25f && e->z[0] == 10.0f);
    assert_true(e->x[1] == -300.0f && e->layer_id[1] == 4 && e->volume_id[1] == 13);
    assert_null(e->module_id);
    assert_null(e->tx);
    assert_int_equal(e->particle_id[0], 0);
    assert_int_equal(e->particle_id[1], 4503599644147712LL);
    assert_int_equal(e->n_particles, 1);
    assert_true(e->px[0] == 3.0f && e->py[0] == 4.0f);
    assert_null(e->q);
    saga_trackml_event_free(&e);

    /* the files of the generator's own layout, plain text, truth in any order */
    d = make_dir("plain");
    prefix = write_event(d, HITS, TRUTH, PARTS);
    assert_int_equal(saga_trackml_read(&e, prefix), SAGA_OK);
    assert_int_equal(e->particle_id[0], 77);
    assert_int_equal(e->particle_id[2], 0);
    assert_true(e->tpy[1] == 0.1f);
    assert_int_equal(e->module_id[1], 9);
    saga_trackml_event_free(&e);
}

/* The volume and layer ids of the challenge: the ten barrel layers in order, then the disks of
 * volumes 7, 9, 12, 14, 16, 18 each by layer id (2, 4, ... in order of increasing z), every
 * end-cap volume known as one, and no other pair taken for a layer. */
static void test_trackml_volume_ids_of_the_challenge(void **state) {
    (void)state;
    const int32_t barrel[SAGA_TRACKML_N_BARREL][2] = {{8, 2},  {8, 4},  {8, 6},  {8, 8},  {13, 2},
                                                      {13, 4}, {13, 6}, {13, 8}, {17, 2}, {17, 4}};
    for (int i = 0; i < SAGA_TRACKML_N_BARREL; i++) {
        assert_int_equal(saga_trackml_layer_index(barrel[i][0], barrel[i][1]), i);
        assert_false(saga_trackml_is_endcap(barrel[i][0]));
        const saga_trackml_layer *g = saga_trackml_layer_at(i);
        assert_non_null(g);
        assert_false(g->disk);
        assert_int_equal(g->volume_id, barrel[i][0]);
        assert_int_equal(g->layer_id, barrel[i][1]);
        assert_true(g->r_min == g->r_max && g->r_min == saga_trackml_layer_radius(i));
        assert_true(g->z_max == saga_trackml_layer_half_length(i) && g->z_min == -g->z_max);
    }
    const int32_t endcap[6] = {7, 9, 12, 14, 16, 18}, n_disks[6] = {7, 7, 6, 6, 6, 6};
    int i = SAGA_TRACKML_N_BARREL;
    for (int k = 0; k < 6; k++) {
        assert_true(saga_trackml_is_endcap(endcap[k]));
        double prev_z = -INFINITY;
        for (int32_t layer = 2; layer <= 2 * n_disks[k]; layer += 2, i++) {
            assert_int_equal(saga_trackml_layer_index(endcap[k], layer), i);
            const saga_trackml_layer *g = saga_trackml_layer_at(i);
            assert_non_null(g);
            assert_true(g->disk);
            assert_int_equal(g->volume_id, endcap[k]);
            assert_int_equal(g->layer_id, layer);
            assert_true(g->z_min == g->z_max && g->z_min > prev_z);
            assert_true(k % 2 ? g->z_min > 0 : g->z_min < 0); /* 7, 12, 16 at negative z */
            prev_z = g->z_min;
            assert_true(isnan(saga_trackml_layer_radius(i)));
            assert_true(isnan(saga_trackml_layer_sigma_z(i)));
            assert_int_equal(saga_trackml_layer_index(endcap[k], layer + 1), -1);
        }
        assert_int_equal(saga_trackml_layer_index(endcap[k], 0), -1);
        assert_int_equal(saga_trackml_layer_index(endcap[k], 2 * n_disks[k] + 2), -1);
    }
    assert_int_equal(i, SAGA_TRACKML_N_LAYERS);
    assert_null(saga_trackml_layer_at(-1));
    assert_null(saga_trackml_layer_at(SAGA_TRACKML_N_LAYERS));

    /* the geometry of a few disks, as the header gives it */
    const saga_trackml_layer *g = saga_trackml_layer_at(saga_trackml_layer_index(7, 2));
    assert_true(g->z_min == -1500 && g->r_min == 30 && g->r_max == 176);
    assert_true(g->sigma_rphi == 0.05 && g->sigma_long == 0.05 && g->x0_frac == 0.012);
    g = saga_trackml_layer_at(saga_trackml_layer_index(9, 2));
    assert_true(g->z_min == 600 && g->r_min == 30 && g->r_max == 176);
    g = saga_trackml_layer_at(saga_trackml_layer_index(12, 12));
    assert_true(g->z_min == -1220 && g->r_min == 240 && g->r_max == 700);
    assert_true(g->sigma_rphi == 0.08 && g->sigma_long == 0.5 && g->x0_frac == 0.016);
    g = saga_trackml_layer_at(saga_trackml_layer_index(18, 12));
    assert_true(g == saga_trackml_layer_at(SAGA_TRACKML_N_LAYERS - 1));
    assert_true(g->z_min == 2950 && g->r_min == 750 && g->r_max == 1020);
    assert_true(g->sigma_rphi == 0.08 && g->sigma_long == 1.0 && g->x0_frac == 0.016);

    for (int32_t v = -1; v <= 20; v++)
        if (v != 7 && v != 9 && v != 12 && v != 14 && v != 16 && v != 18)
            assert_false(saga_trackml_is_endcap(v));
    assert_int_equal(saga_trackml_layer_index(8, 10), -1);
    assert_int_equal(saga_trackml_layer_index(13, 10), -1);
    assert_int_equal(saga_trackml_layer_index(17, 6), -1);
    assert_int_equal(saga_trackml_layer_index(8, 3), -1);
    assert_int_equal(saga_trackml_layer_index(9, 16), -1);
    assert_int_equal(saga_trackml_layer_index(12, 14), -1);
    assert_int_equal(saga_trackml_layer_index(10, 2), -1);
    assert_int_equal(saga_trackml_layer_index(0, 0), -1);
}

/* A directory laid out like the challenge's train_sample: four plain CSV files per event (the
 * cells too, which are not an event of their own), nine-digit event numbers, 64-bit particle ids
 * and end-cap hits, read as they are. */
static void test_trackml_train_sample_layout(void **state) {
    (void)state;
    const char *d = make_dir("train_sample");
    const char *files[4][2] = {
        {"hits", "hit_id,x,y,z,volume_id,layer_id,module_id\n"
                 "1,-64.4099,-7.1637,-1502.5,7,2,1\n"
                 "2,-31.8,3.9,10.25,8,2,114\n"
                 "3,400.5,-10.25,2950,18,12,98\n"},
        {"cells", "hit_id,ch0,ch1,value\n1,209,617,0.0138317\n1,210,617,0.0791794\n"
                  "2,68,446,0.211299\n3,1,200,0.3\n"},
        {"particles", "particle_id,vx,vy,vz,px,py,pz,q,nhits\n"
                      "4503668346847232,-0.00928816,0.00986098,-0.0778789,-0.0552689,0.323272,"
                      "-0.203492,-1,8\n"
                      "922337203685477580,0,0,0,1,2,3,1,1\n"},
        {"truth", "hit_id,particle_id,tx,ty,tz,tpx,tpy,tpz,weight\n"
                  "1,0,-64.4116,-7.16412,-1502.5,250710,-149908,-956385,0\n"
                  "2,4503668346847232,-31.8,3.9,10.25,-0.05,0.32,-0.2,3.8e-06\n"
                  "3,922337203685477580,400.5,-10.25,2950,1,2,3,0.5\n"}};
    char path[600];
    for (int ev = 1000; ev <= 1001; ev++)
        for (int k = 0; k < 4; k++) {
            snprintf(path, sizeof path, "%s/event%09d-%s.csv", d, ev, files[k][0]);
            FILE *f = fopen(path, "w");
            assert_non_null(f);
            fputs(files[k][1], f);
            fclose(f);
        }
    char **list = NULL;
    int64_t n = 0;
    assert_int_equal(saga_trackml_list(&list, &n, d), SAGA_OK);
    assert_int_equal(n, 2);
    snprintf(path, sizeof path, "%s/event000001000", d);
    assert_string_equal(list[0], path);
    saga_trackml_event *e = NULL;
    assert_int_equal(saga_trackml_read(&e, list[1]), SAGA_OK);
    saga_trackml_list_free(&list, n);
    assert_int_equal(e->event_id, 1001);
    assert_int_equal(e->n_hits, 3);
    assert_int_equal(e->volume_id[0], 7);
    assert_true(saga_trackml_is_endcap(e->volume_id[0]) && saga_trackml_is_endcap(e->volume_id[2]));
    assert_int_equal(saga_trackml_layer_index(e->volume_id[1], e->layer_id[1]), 0);
    assert_int_equal(e->particle_id[0], 0);
    assert_int_equal(e->particle_id[1], 4503668346847232LL);
    assert_int_equal(e->particle_id[2], 922337203685477580LL);
    assert_int_equal(e->n_particles, 2);
    assert_int_equal(e->p_id[1], 922337203685477580LL);
    assert_true(e->tpx[0] == 250710.0f && e->weight[1] == 3.8e-06f);
    saga_trackml_event_free(&e);
}

/* Reads the event after replacing one file's text; expects code and a message naming needle. */
static void expect_bad(const char *dir, const char *hits, const char *truth, const char *parts,
                       saga_status code, const char *n1, const char *n2) {
    saga_trackml_event *e = NULL;
    const char *prefix = write_event(dir, hits, truth, parts);
    assert_int_equal(saga_trackml_read(&e, prefix), code);
    assert_null(e);
    saga_test_assert_error_contains(n1, n2, NULL);
}

static void test_trackml_reader_rejects_bad_files(void **state) {
    (void)state;
    const char *d = make_dir("bad");
    expect_bad(d, HITS, "hit_id,tx\n1,0\n", PARTS, SAGA_ERR_PARSE, "truth.csv:1",
               "expected a column named 'particle_id'");
    expect_bad(d, "hit_id,x,y,z,volume_id,layer_id\n1,1,2,3,8,2\n2,1,abc,3,8,2\n", TRUTH, PARTS,
               SAGA_ERR_PARSE, "hits.csv:3",
               "expected a finite number in column 'y', found \"abc\"");
    expect_bad(d, "hit_id,x,y,z,volume_id,layer_id\n1,1,2,3,8.5,2\n", TRUTH, PARTS, SAGA_ERR_PARSE,
               "hits.csv:2", "an integer in column 'volume_id'");
    expect_bad(d, "hit_id,x,y,z,volume_id,layer_id\n1,1,2,3,8\n", TRUTH, PARTS, SAGA_ERR_PARSE,
               "hits.csv:2", "expected 6 comma-separated fields");
    expect_bad(d, HITS, "hit_id,particle_id\n1,5\n9,5\n3,0\n", PARTS, SAGA_ERR_PARSE, "truth.csv:3",
               "expected a hit_id of");
    expect_bad(d, HITS, "hit_id,particle_id\n1,5\n1,5\n3,0\n", PARTS, SAGA_ERR_PARSE, "truth.csv:3",
               "found 1 again");
    expect_bad(d, HITS, "hit_id,particle_id\n1,5\n3,0\n", PARTS, SAGA_ERR_PARSE, "truth.csv",
               "a row for each of the 3 hits");
    expect_bad(d, HITS, TRUTH, "", SAGA_ERR_PARSE, "particles.csv:1", "empty file");
    expect_bad(d, HITS, TRUTH, "particle_id,px,py,pz\n77,1,2,nan\n", SAGA_ERR_PARSE,
               "particles.csv:2", "column 'pz'");

    /* a missing file is named */
    saga_trackml_event *e = NULL;
    char prefix[512];
    snprintf(prefix, sizeof prefix, "%s/event000000001", d);
    assert_int_equal(saga_trackml_read(&e, prefix), SAGA_ERR_IO);
    saga_test_assert_error_contains("event000000001-hits.csv", NULL);

    /* a truncated gzip stream */
    saga_trackml_params p = small_params();
    const char *dz = make_dir("trunc");
    assert_int_equal(saga_trackml_generate(&e, &p, 1), SAGA_OK);
    assert_int_equal(saga_trackml_write(e, dz), SAGA_OK);
    saga_trackml_event_free(&e);
    char path[600];
    snprintf(path, sizeof path, "%s/event000000001-truth.csv.gz", dz);
    size_t len;
    char *buf = slurp(path, &len);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(buf, 1, len / 2, f), len / 2);
    fclose(f);
    free(buf);
    snprintf(prefix, sizeof prefix, "%s/event000000001", dz);
    assert_int_equal(saga_trackml_read(&e, prefix), SAGA_ERR_CORRUPT);
    saga_test_assert_error_contains("event000000001-truth.csv.gz", NULL);
    assert_null(e);

    /* bad parameters */
    p.min_particles = 0;
    assert_int_equal(saga_trackml_generate(&e, &p, 1), SAGA_ERR_INVALID_ARG);
    saga_test_assert_error_contains("particles", NULL);
    const struct {
        double material, efficiency, doubled;
        const char *name;
    } bad[] = {{-0.5, 1, 0, "material"},         {101, 1, 0, "material"},
               {NAN, 1, 0, "material"},          {1, 0, 0, "hit_efficiency"},
               {1, 1.01, 0, "hit_efficiency"},   {1, NAN, 0, "hit_efficiency"},
               {1, 1, -0.1, "doubled_fraction"}, {1, 1, 1.5, "doubled_fraction"}};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        p = small_params();
        p.material = bad[k].material;
        p.hit_efficiency = bad[k].efficiency;
        p.doubled_fraction = bad[k].doubled;
        assert_int_equal(saga_trackml_generate(&e, &p, 1), SAGA_ERR_INVALID_ARG);
        assert_null(e);
        saga_test_assert_error_contains(bad[k].name, NULL);
    }
    /* the edges of the ranges are fine */
    p = small_params();
    p.min_particles = p.max_particles = 10;
    p.material = 100;
    p.hit_efficiency = 1;
    p.doubled_fraction = 1;
    assert_int_equal(saga_trackml_generate(&e, &p, 1), SAGA_OK);
    saga_trackml_event_free(&e);
    p.material = 0;
    p.hit_efficiency = 1e-3;
    p.doubled_fraction = 0;
    assert_int_equal(saga_trackml_generate(&e, &p, 1), SAGA_OK);
    saga_trackml_event_free(&e);
}

/* Every allocation failure is reported and frees what was taken (sanitizer builds check). */
static void test_trackml_allocation_failures(void **state) {
    (void)state;
    const char *d = make_dir("alloc");
    const char *prefix = write_event(d, HITS, TRUTH, PARTS);
    saga_trackml_params p = small_params();
    p.min_particles = p.max_particles = 20;
    p.doubled_fraction = 1; /* two hits a crossing: the hit buffer's first guess must grow */
    for (int what = 0; what < 2; what++) {
        saga_status st = SAGA_ERR_OUT_OF_MEMORY;
        for (long n = 1; st != SAGA_OK; n++) {
            saga_trackml_event *e = NULL;
            saga_test_fail_alloc_after(n);
            st = what ? saga_trackml_read(&e, prefix) : saga_trackml_generate(&e, &p, 1);
            saga_test_fail_alloc_after(0);
            if (st != SAGA_OK) {
                assert_int_equal(st, SAGA_ERR_OUT_OF_MEMORY);
                assert_null(e);
            }
            saga_trackml_event_free(&e);
            assert_true(n < 2000);
        }
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_trackml_same_seed_same_bytes),
        cmocka_unit_test(test_trackml_hits_follow_helices_on_layers),
        cmocka_unit_test(test_trackml_hits_on_barrel_and_endcaps),
        cmocka_unit_test(test_trackml_scattering_follows_highland),
        cmocka_unit_test(test_trackml_inefficiency_and_doubled_hits),
        cmocka_unit_test(test_trackml_write_read_round_trip),
        cmocka_unit_test(test_trackml_reader_finds_columns_by_name),
        cmocka_unit_test(test_trackml_volume_ids_of_the_challenge),
        cmocka_unit_test(test_trackml_train_sample_layout),
        cmocka_unit_test(test_trackml_reader_rejects_bad_files),
        cmocka_unit_test(test_trackml_allocation_failures),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
