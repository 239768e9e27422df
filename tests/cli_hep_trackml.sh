#!/usr/bin/env bash
# cli_hep_trackml.sh - `saga hep build|train|eval` on a directory laid out like the TrackML
# challenge's train_sample: eventNNNNNNNNN-{hits,cells,particles,truth}.csv, plain CSV, helix
# tracks through the barrel (volumes 8, 13, 17) and the end-caps (7/9, 12/14, 16/18), noise hits
# with particle_id 0, 64-bit particle ids (two pairs of them equal in their low 32 bits or in a
# double), a particle with hits on the end-caps only, a soft particle below the pT cut, and a
# particle that left no hit. The counts the commands report are checked against what was
# written: hits read, on the barrel, on the end-caps, dropped below the pT cut, noise, and the
# edges and true edges (by region: barrel, crossing, end-cap) that a brute-force pass over every
# pair of hits finds under the builder's rules (further out in r, the bending and beam-line cuts,
# at most --max-missing layers crossed between the hits), for the whole detector and for
# --barrel-only --max-missing 0.
set -euo pipefail
source "$(dirname "$0")/cli_common.bash"

DATA=$TMP/train_sample
mkdir -p "$DATA"
python3 - "$DATA" >"$TMP/expected.json" <<'EOF'
import json, math, random, struct, sys

out = sys.argv[1]
B = 2.0  # tesla
# barrel: (volume_id, layer_id, r, half-length)
BARREL = [(8, 2, 32, 500), (8, 4, 72, 500), (8, 6, 116, 500), (8, 8, 172, 500),
          (13, 2, 260, 1100), (13, 4, 360, 1100), (13, 6, 500, 1100), (13, 8, 660, 1100),
          (17, 2, 820, 1100), (17, 4, 1020, 1100)]
# end-caps: (volume at negative z, at positive z, |z| of the disks from the barrel out, r range)
ENDCAPS = [(7, 9, [600, 700, 820, 960, 1100, 1300, 1500], (30, 176)),
           (12, 14, [1220, 1500, 1800, 2150, 2550, 2950], (240, 700)),
           (16, 18, [1220, 1500, 1800, 2150, 2550, 2950], (750, 1020))]
ENDCAP_IDS = {7, 9, 12, 14, 16, 18}
PT_MIN, PHI_SLOPE_MAX, Z0_MAX = 1.0, 0.0005, 250.0

def f32(v):
    return struct.unpack('f', struct.pack('f', v))[0]

def disk_layers(neg, pos, zs, zsign):
    """(volume, layer_id, z) of a side's disks; layer_id grows with z, as in TrackML."""
    n = len(zs)
    if zsign < 0:
        return [(neg, 2 + 2 * (n - 1 - k), -zs[k]) for k in range(n)]
    return [(pos, 2 + 2 * k, zs[k]) for k in range(n)]

# particles: (pT GeV, eta, charge); helices from the beam line
DESIGN = [(10.0, 0.2, 1), (5.0, 0.8, -1), (4.0, 1.6, 1), (3.0, -2.0, -1), (2.0, 2.4, 1),
          (1.5, -3.5, 1),  # end-caps only
          (0.6, 0.3, 1),   # below the pT cut: its barrel hits are dropped
          (2.5, -0.5, -1)]
# 64-bit ids as the challenge's: two pairs collide in their low 32 bits or as doubles
IDS = [4503668346847232, 4503668346847232 + (1 << 32), (1 << 60) + 12345, (1 << 60) + 12346,
       22525763437723648, 319933648109985792, 936748859932016651, 4503737066323968]

MARGIN = 5.0  # mm: a line crosses a layer more than this far inside its bounds
# every layer: (volume, layer_id, disk, r_min, r_max, z_min, z_max)
LAYERS = [(v, l, False, r, r, -h, h) for v, l, r, h in BARREL]
for neg, pos, zs, (rmin, rmax) in ENDCAPS:
    for side in (-1, 1):
        LAYERS += [(v, l, True, rmin, rmax, z, z) for v, l, z in disk_layers(neg, pos, zs, side)]
LAYER_OF = {(L[0], L[1]): i for i, L in enumerate(LAYERS)}

def crossed(a, b, n_layers):
    """Of the first n_layers layers, those the line in (r, z) from hit a to hit b crosses
    strictly between them."""
    n = 0
    for m, (v, l, disk, rmin, rmax, zmin, zmax) in enumerate(LAYERS[:n_layers]):
        if m in (a[0], b[0]):
            continue
        if not disk:
            if a[1] < rmin < b[1]:
                zm = a[3] + (rmin - a[1]) * (b[3] - a[3]) / (b[1] - a[1])
                n += zmin + MARGIN < zm < zmax - MARGIN
        elif min(a[3], b[3]) < zmin < max(a[3], b[3]):
            rm = a[1] + (zmin - a[3]) * (b[1] - a[1]) / (b[3] - a[3])
            n += rmin + MARGIN < rm < rmax - MARGIN
    return n

def region(a, b):
    return ('barrel', 'crossing', 'endcap')[(a[0] >= 10) + (b[0] >= 10)]

expect = dict(events=0, read=0, barrel=0, endcap=0, soft=0, hits=0, noise=0, edges=0,
              true_edges=0, tracks=0, particles_endcap_only=0, b_hits=0, b_edges=0,
              b_true_edges=0)
for reg in ('barrel', 'crossing', 'endcap'):
    expect['edges_' + reg] = expect['true_' + reg] = 0
rng = random.Random(7)
for ev in (1000, 1001):
    prefix = '%s/event%09d' % (out, ev)
    hits, particles = [], []  # hits: [x, y, z, vol, layer, pid, tpx, tpy, tpz]
    for k, (pt, eta, q) in enumerate(DESIGN):
        pid = IDS[k] + (ev - 1000) * 2  # another event, other ids
        if ev == 1001:
            eta = -eta  # the mirror image
        phi0 = -math.pi + (k + 0.5) * 2 * math.pi / len(DESIGN) + (ev - 1000) * 0.3
        vz = rng.uniform(-30, 30)
        R = pt / (0.3 * B) * 1000.0  # mm
        pz = pt * math.sinh(eta)
        n0 = len(hits)
        def add(s, vol, lay):
            r = 2 * R * math.sin(s / (2 * R))
            phi = phi0 - q * s / (2 * R)
            d = phi0 - q * s / R  # the direction at the hit
            hits.append([r * math.cos(phi), r * math.sin(phi), vz + s * pz / pt, vol, lay, pid,
                         pt * math.cos(d), pt * math.sin(d), pz])
        for vol, lay, r, half in BARREL:
            if r < 2 * R:
                s = 2 * R * math.asin(r / (2 * R))
                if abs(vz + s * pz / pt) < half:
                    add(s, vol, lay)
        for neg, pos, zs, (rmin, rmax) in ENDCAPS:
            for vol, lay, zd in disk_layers(neg, pos, zs, 1 if pz > 0 else -1):
                s = (zd - vz) * pt / pz
                if 0 < s < math.pi * R and rmin <= 2 * R * math.sin(s / (2 * R)) <= rmax:
                    add(s, vol, lay)
        mine = hits[n0:]
        if mine and all(h[3] in ENDCAP_IDS for h in mine):
            expect['particles_endcap_only'] += 1
        particles.append((pid, 0.0, 0.0, vz, pt * math.cos(phi0), pt * math.sin(phi0), pz, q,
                          len(mine)))
    particles.append((IDS[0] + 977, 0.0, 0.0, 1.0, 0.3, 0.1, 0.2, -1, 0))  # left no hit
    # noise: 40 hits anywhere, 60% on the barrel
    for _ in range(40):
        if rng.random() < 0.6:
            vol, lay, r, half = rng.choice(BARREL)
            z = rng.uniform(-half, half)
        else:
            neg, pos, zs, (rmin, rmax) = rng.choice(ENDCAPS)
            vol, lay, z = rng.choice(disk_layers(neg, pos, zs, rng.choice((-1, 1))))
            r = rng.uniform(rmin, rmax)
        phi = rng.uniform(-math.pi, math.pi)
        hits.append([r * math.cos(phi), r * math.sin(phi), z, vol, lay, 0, 0, 0, 0])
    # ordered as the challenge's: by volume and layer; numbered from 1
    hits.sort(key=lambda h: (h[3], h[4], math.atan2(h[1], h[0])))
    with open(prefix + '-hits.csv', 'w') as f:
        f.write('hit_id,x,y,z,volume_id,layer_id,module_id\n')
        for i, h in enumerate(hits):
            module = 1 + int((math.atan2(h[1], h[0]) + math.pi) * 20)
            f.write('%d,%.4f,%.4f,%.4f,%d,%d,%d\n' % (i + 1, h[0], h[1], h[2], h[3], h[4], module))
            h[0:3] = [float('%.4f' % v) for v in h[0:3]]  # as the file holds them
    with open(prefix + '-cells.csv', 'w') as f:
        f.write('hit_id,ch0,ch1,value\n')
        for i in range(len(hits)):
            for c in range(1 + i % 3):
                f.write('%d,%d,%d,%.6f\n' % (i + 1, 100 + c, 200 + i % 50, 0.1 + 0.01 * c))
    with open(prefix + '-truth.csv', 'w') as f:
        f.write('hit_id,particle_id,tx,ty,tz,tpx,tpy,tpz,weight\n')
        n_particle_hits = sum(1 for h in hits if h[5])
        for i, h in enumerate(hits):
            w = 1.0 / n_particle_hits if h[5] else 0.0
            f.write('%d,%d,%.4f,%.4f,%.4f,%.6f,%.6f,%.6f,%.8f\n' %
                    (i + 1, h[5], h[0], h[1], h[2], h[6], h[7], h[8], w))
    with open(prefix + '-particles.csv', 'w') as f:
        f.write('particle_id,vx,vy,vz,px,py,pz,q,nhits\n')
        for p in particles:
            f.write('%d,%.6f,%.6f,%.6f,%.6f,%.6f,%.6f,%d,%d\n' % p)

    # ---- what the graph builder must make of it
    pt_of = {p[0]: math.hypot(p[4], p[5]) for p in particles}
    expect['events'] += 1
    expect['read'] += len(hits)
    kept = []
    for h in hits:
        expect['endcap' if h[3] in ENDCAP_IDS else 'barrel'] += 1
        if h[5] and pt_of[h[5]] < PT_MIN:
            expect['soft'] += 1
            continue
        x, y, z = f32(h[0]), f32(h[1]), f32(h[2])
        kept.append((LAYER_OF[(h[3], h[4])], math.hypot(x, y), math.atan2(y, x), z, h[5]))
    expect['hits'] += len(kept)
    expect['noise'] += sum(1 for h in kept if h[4] == 0)

    def pairs(hits_, max_missing, n_layers, count):
        # each particle's layers in the order of the least r of its hits on them
        first_r = {}
        for h in hits_:
            if h[4]:
                key = (h[4], h[0])
                first_r[key] = min(first_r.get(key, h[1]), h[1])
        place = {}
        for pid in {h[4] for h in hits_ if h[4]}:
            mine = sorted((r, l) for (p, l), r in first_r.items() if p == pid)
            for k, (_, l) in enumerate(mine):
                place[(pid, l)] = k
        for a in hits_:
            for b in hits_:
                if a[0] == b[0]:
                    continue
                dr = b[1] - a[1]
                dphi = b[2] - a[2]
                dphi -= 2 * math.pi if dphi > math.pi else -2 * math.pi if dphi < -math.pi else 0
                if dr <= 0 or abs(dphi / dr) > PHI_SLOPE_MAX:
                    continue
                if abs(a[3] - a[1] * (b[3] - a[3]) / dr) > Z0_MAX:
                    continue
                if crossed(a, b, n_layers) > max_missing:
                    continue
                true = a[4] != 0 and a[4] == b[4] and place[(b[4], b[0])] == place[(a[4], a[0])] + 1
                count(a, b, true)

    def full(a, b, true):
        expect['edges'] += 1
        expect['true_edges'] += true
        expect['edges_' + region(a, b)] += 1
        expect['true_' + region(a, b)] += true

    def barrel_only(a, b, true):
        expect['b_edges'] += 1
        expect['b_true_edges'] += true

    pairs(kept, 1, len(LAYERS), full)
    on_barrel = [h for h in kept if h[0] < 10]
    expect['b_hits'] += len(on_barrel)
    pairs(on_barrel, 0, len(BARREL), barrel_only)
    per = {}
    for h in kept:
        if h[4] and pt_of[h[4]] > 1.0:
            per[h[4]] = per.get(h[4], 0) + 1
    expect['tracks_%d' % ev] = sum(1 for n in per.values() if n >= 3)
    expect['tracks'] += expect['tracks_%d' % ev]
print(json.dumps(expect))
EOF
X=$(cat "$TMP/expected.json")
# x: a key of the expected counts
x() {
    python3 -c 'import json,sys; print(json.loads(sys.argv[1])[sys.argv[2]])' "$X" "$1"
}
# the layout: four plain CSV files per event, the challenge's names and headers
[ "$(ls "$DATA" | tr '\n' ' ')" = "event000001000-cells.csv event000001000-hits.csv event000001000-particles.csv event000001000-truth.csv event000001001-cells.csv event000001001-hits.csv event000001001-particles.csv event000001001-truth.csv " ] ||
    fail "layout: $(ls "$DATA")"
# what the event must hold for the test to mean anything
[ "$(x particles_endcap_only)" = 2 ] || fail "no particle with end-cap hits alone: $X"
python3 -c 'import json,sys; e=json.loads(sys.argv[1]); sys.exit(not (200 <= e["read"] <= 800 and e["endcap"] >= 40 and e["soft"] >= 10 and e["noise"] >= 10 and e["edges"] > e["true_edges"] >= 20 and e["tracks"] >= 8))' "$X" ||
    fail "the written events are not what the test needs: $X"

# ---- build: every count as written
expect 0 "$SAGA_BIN" hep build --data "$DATA" --json
got=$(json_get 'j["events"], j.get("hits_read"), j.get("barrel_hits"), j.get("endcap_hits"), j.get("soft_hits_dropped"), j["hits"], j.get("noise_hits"), j["edges"], j["true_edges"]')
want="$(x events) $(x read) $(x barrel) $(x endcap) $(x soft) $(x hits) $(x noise) $(x edges) $(x true_edges)"
[ "$got" = "$want" ] || fail "build counts (events, read, barrel, end-cap, soft, hits, noise, edges, true edges): got $got, wrote $want"
got=$(json_get '" ".join("%d %d" % (j["regions"][r]["edges"], j["regions"][r]["true_edges"]) for r in ("barrel", "crossing", "endcap"))')
want="$(x edges_barrel) $(x true_barrel) $(x edges_crossing) $(x true_crossing) $(x edges_endcap) $(x true_endcap)"
[ "$got" = "$want" ] || fail "build counts by region (edges, true edges: barrel, crossing, end-cap): got $got, brute force $want"
# end-cap and crossing segments are in the graphs, not only barrel ones
[ "$(x true_endcap)" -ge 10 ] && [ "$(x true_crossing)" -ge 4 ] || fail "too few end-cap segments to test: $X"
# the true segments are all kept: the tracks are helices of pT >= 1.5 GeV from the beam line
[ "$(json_get 'j["construction_efficiency"] == 1')" = True ] || fail "construction: $(json_last)"
expect_err "hits      $(x read) read: $(x barrel) on the barrel, $(x endcap) on the end-caps; $(x soft) of particles below 1 GeV dropped"
expect_err "crossing "
# the barrel alone, consecutive layers only: the graphs of earlier releases
expect 0 "$SAGA_BIN" hep build --data "$DATA" --barrel-only --max-missing 0 --json
got=$(json_get 'j["endcap_hits_left_out"], j["hits"], j["edges"], j["true_edges"]')
want="$(x endcap) $(x b_hits) $(x b_edges) $(x b_true_edges)"
[ "$got" = "$want" ] || fail "--barrel-only counts (left out, hits, edges, true edges): got $got, brute force $want"
expect_err "on the end-caps (left out: --barrel-only)"

# ---- train two epochs (event 1000 trains, 1001 evaluates), then evaluate both events
expect 0 "$SAGA_BIN" hep train --data "$DATA" --epochs 2 --hidden 8 --iterations 2 \
    --checkpoint "$TMP/trackml.ckpt" --json --quiet
got=$(json_get 'j["train_events"], j["eval_events"], j["epochs"], j.get("endcap_hits"), j["edges"], j["tracks"], 0 <= j["auc"] <= 1, j["loss"] > 0')
[ "$got" = "1 1 2 $(x endcap) $(x edges) $(x tracks_1001) True True" ] ||
    fail "train: $got: $(json_last)"
expect 0 "$SAGA_BIN" hep eval --data "$DATA" --checkpoint "$TMP/trackml.ckpt" --hidden 8 \
    --iterations 2 --json
# every particle above 1 GeV with 3 or more graph hits is a track: 64-bit ids stay apart
got=$(json_get 'j["events"], j["checkpoint_epoch"], j.get("hits_read"), j.get("endcap_hits"), j["eval_edges"], j["tracks"], sum(j["regions"][r]["tracks"] for r in ("barrel", "crossing", "endcap"))')
[ "$got" = "2 2 $(x read) $(x endcap) $(x edges) $(x tracks) $(x tracks)" ] || fail "eval: $got: $(json_last)"
expect_err "$(x endcap) on the end-caps"

# ---- the test_sample layout has no truth: an error naming the missing file
mkdir -p "$TMP/test_sample"
cp "$DATA/event000001000-hits.csv" "$DATA/event000001000-cells.csv" "$TMP/test_sample/"
expect 1 "$SAGA_BIN" hep build --data "$TMP/test_sample"
expect_err "event000001000-truth.csv"

# ---- a hit on a volume that TrackML does not have: the file and the hit named
mkdir -p "$TMP/bad"
cp "$DATA"/event000001000-* "$TMP/bad/"
sed -i '6s/^\(5,[^,]*,[^,]*,[^,]*\),[0-9]*,[0-9]*,/\1,5,2,/' "$TMP/bad/event000001000-hits.csv"
expect 1 "$SAGA_BIN" hep build --data "$TMP/bad"
expect_err "event000001000-hits.csv: event 1000, hit_id 5: expected a layer of TrackML's detector"
expect_err "found volume_id 5 layer_id 2"
sed -i '6s/^\(5,[^,]*,[^,]*,[^,]*\),[0-9]*,[0-9]*,/\1,8,10,/' "$TMP/bad/event000001000-hits.csv"
expect 1 "$SAGA_BIN" hep build --data "$TMP/bad"
expect_err "found volume_id 8 layer_id 10"
finish
