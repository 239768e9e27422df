/* shards.c - a graph partitioned once into per-rank shard files (saga_shards.h): the writer,
 * the manifest, and the checked read-only mapping of one shard. */
#include "parse_util.h"
#include "saga_log.h"
#include "saga_shards.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

enum { CHUNK = 1 << 20, ALIGN = 4096, HEADER_BYTES = 4096 };

/* The sections of a shard file, in file order; the last holds every other section's chunk
 * CRC-32s, in order. */
enum {
    S_IN_OFF,
    S_IN_IDX,
    S_IN_W,
    S_GLOBAL,
    S_ORIG,
    S_VERTEX,
    S_OUT_DEG,
    S_HALO_OFF,
    S_SEND_OFF,
    S_SEND,
    S_FEAT,
    S_FEAT_OFF,
    S_FEAT_IDX,
    S_FEAT_VAL,
    S_LABELS,
    S_TRAIN,
    S_VAL,
    S_TEST,
    S_CRCS,
    N_SECTIONS
};

static const char *const SECTION_NAMES[N_SECTIONS] = {
    "in-edge offsets", "in-edge sources", "in-edge weights", "global ids", "original ids",
    "out-degrees",     "halo offsets",    "send offsets",    "send lists", "dense features",
    "feature offsets", "feature columns", "feature values",  "labels",     "training rows",
    "validation rows", "test rows",       "chunk checksums"};

enum { FLAG_WEIGHTED = 1, FLAG_LABELS = 2 };

typedef struct shard_section {
    uint64_t offset, bytes;
} shard_section;

typedef struct shard_header {
    char magic[8]; /* "SAGASHRD" */
    uint32_t version, header_bytes;
    int32_t rank, n_shards;
    int64_t n_vertices, n_edges, row0, n_own, n_interior, n_halo, nnz;
    int64_t feature_cols, feature_nnz;
    int32_t n_classes;
    uint32_t flags;
    int64_t split_n[3];
    uint64_t chunk_bytes;
    uint32_t n_sections, crcs_crc; /* crcs_crc: of the chunk checksums section */
    shard_section sec[N_SECTIONS];
    uint32_t crc; /* of every byte above */
} shard_header;

_Static_assert(sizeof(shard_header) <= HEADER_BYTES, "a shard header fits its page");

static const char MAGIC[8] = {'S', 'A', 'G', 'A', 'S', 'H', 'R', 'D'};

saga_shards_opts saga_shards_opts_defaults(void) {
    return (saga_shards_opts){
        .shards = 1, .parts_per_shard = 1, .partition = saga_partition_opts_defaults()};
}

saga_shard_open_opts saga_shard_open_opts_defaults(void) {
    return (saga_shard_open_opts){.verify = true};
}

static uint32_t crc_of(const void *data, uint64_t len) {
    return saga_crc32(data, len);
}

static uint64_t n_chunks(uint64_t bytes) {
    return (bytes + CHUNK - 1) / CHUNK;
}

static uint32_t header_crc(const shard_header *h) {
    return crc_of(h, offsetof(shard_header, crc));
}

static int32_t owner_of(const int64_t *row0, int32_t R, int64_t g) {
    int32_t lo = 0, hi = R - 1;
    while (lo < hi) {
        int32_t mid = (lo + hi + 1) / 2;
        if (row0[mid] <= g)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

/* ---- writing -------------------------------------------------------------------------------- */

/* One shard's arrays while it is written. */
typedef struct shard_build {
    shard_header h;
    const void *data[N_SECTIONS];
    void *owned[N_SECTIONS];
} shard_build;

static void build_free(shard_build *b) {
    for (int s = 0; s < N_SECTIONS; s++)
        saga_free(b->owned[s]);
    memset(b, 0, sizeof *b);
}

static saga_status section_alloc(shard_build *b, int s, int64_t count, size_t item) {
    b->h.sec[s].bytes = (uint64_t)count * item;
    saga_status st =
        saga_alloc_array(&b->owned[s], count ? (size_t)count : 1, item, SECTION_NAMES[s]);
    b->data[s] = b->owned[s];
    return st;
}

static bool write_all(FILE *f, const void *p, uint64_t len) {
    return len == 0 || fwrite(p, 1, (size_t)len, f) == len;
}

/* Writes b's file to path (through a temporary name beside it, renamed at the end). */
static saga_status build_write(shard_build *b, const char *path, int64_t *bytes_out) {
    saga_status st = SAGA_OK;
    char tmp[4300];
    FILE *f = NULL;
    uint32_t *crcs = NULL;
    static const uint8_t zeros[ALIGN];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    uint64_t total_chunks = 0;
    for (int s = 0; s < S_CRCS; s++)
        total_chunks += n_chunks(b->h.sec[s].bytes);
    SAGA_TRY(saga_alloc_array((void **)&crcs, total_chunks ? total_chunks : 1, sizeof *crcs,
                              "chunk checksums"));
    b->h.sec[S_CRCS].bytes = total_chunks * sizeof *crcs;
    b->data[S_CRCS] = crcs;
    uint64_t c = 0;
    for (int s = 0; s < S_CRCS; s++)
        for (uint64_t at = 0; at < b->h.sec[s].bytes; at += CHUNK) {
            uint64_t len = b->h.sec[s].bytes - at < CHUNK ? b->h.sec[s].bytes - at : CHUNK;
            crcs[c++] = crc_of((const uint8_t *)b->data[s] + at, len);
        }
    uint64_t pos = HEADER_BYTES;
    for (int s = 0; s < N_SECTIONS; s++) {
        b->h.sec[s].offset = b->h.sec[s].bytes ? pos : 0;
        pos += (b->h.sec[s].bytes + ALIGN - 1) / ALIGN * ALIGN;
    }
    memcpy(b->h.magic, MAGIC, sizeof MAGIC);
    b->h.version = SAGA_SHARDS_VERSION;
    b->h.header_bytes = HEADER_BYTES;
    b->h.chunk_bytes = CHUNK;
    b->h.n_sections = N_SECTIONS;
    b->h.crcs_crc = crc_of(crcs, b->h.sec[S_CRCS].bytes);
    b->h.crc = header_crc(&b->h);

    f = fopen(tmp, "wb");
    SAGA_CHECK(f, SAGA_ERR_IO, "%s: cannot create: %s", tmp, strerror(errno));
    uint8_t page[HEADER_BYTES] = {0};
    memcpy(page, &b->h, sizeof b->h);
    bool ok = write_all(f, page, sizeof page);
    for (int s = 0; s < N_SECTIONS && ok; s++) {
        uint64_t len = b->h.sec[s].bytes;
        ok = write_all(f, b->data[s], len) && write_all(f, zeros, (ALIGN - len % ALIGN) % ALIGN);
    }
    ok = ok && fflush(f) == 0 && fsync(fileno(f)) == 0;
    int err = errno;
    ok = fclose(f) == 0 && ok;
    f = NULL;
    if (!ok) {
        remove(tmp);
        SAGA_CHECK(false, SAGA_ERR_IO, "%s: cannot write: %s", path, strerror(err ? err : EIO));
    }
    if (rename(tmp, path) != 0) {
        err = errno;
        remove(tmp);
        SAGA_CHECK(false, SAGA_ERR_IO, "%s: cannot rename into place: %s", path, strerror(err));
    }
    *bytes_out = (int64_t)pos;
fail:
    if (f) {
        fclose(f);
        remove(tmp);
    }
    b->data[S_CRCS] = NULL;
    saga_free(crcs);
    return st;
}

/* The writer's state over every shard. */
typedef struct writer {
    const saga_shards_input *in;
    int32_t R, n;
    const saga_partition *p;
    int64_t *row0; /* R + 1, renumbered rows */
    int32_t *lid;  /* n: a vertex's local id in the shard being built, -1 elsewhere */
    int32_t *seen; /* R: the last vertex that marked a peer (send lists) */
} writer;

static int32_t owner(const writer *w, int32_t v) {
    return owner_of(w->row0, w->R, w->p->inverse[v]);
}

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static saga_status build_shard(writer *w, int32_t r, shard_build *b) {
    saga_status st = SAGA_OK;
    const saga_graph *g = w->in->graph;
    saga_csr in = saga_graph_in(g), out = saga_graph_out(g);
    const int32_t *perm = w->p->perm, *inv = w->p->inverse;
    int64_t lo = w->row0[r], hi = w->row0[r + 1], n_own = hi - lo;
    int64_t *halo = NULL, n_halo = 0, cap = 0, nnz = 0, n_interior = 0;
    uint8_t *bnd = NULL;
    memset(b, 0, sizeof *b);
    b->h.rank = r;
    b->h.n_shards = w->R;
    b->h.n_vertices = w->n;
    b->h.n_edges = saga_graph_n_edges(g);
    b->h.row0 = lo;
    b->h.n_own = n_own;

    /* ---- own rows: which read a row of another shard (the boundary); the halo: those rows,
     * each once, by renumbered id */
    SAGA_TRY(saga_alloc_array((void **)&bnd, n_own ? (size_t)n_own : 1, 1, "boundary rows"));
    for (int64_t i = lo; i < hi; i++) {
        int32_t v = perm[i];
        bool boundary = false;
        for (int64_t e = in.offsets[v]; e < in.offsets[v + 1]; e++) {
            int32_t u = in.indices[e];
            if (inv[u] >= lo && inv[u] < hi)
                continue;
            boundary = true;
            if (w->lid[u] == -1) {
                if (n_halo == cap) {
                    int64_t *grown = NULL;
                    cap = cap ? 2 * cap : 1024;
                    SAGA_TRY(
                        saga_alloc_array((void **)&grown, (size_t)cap, sizeof *grown, "halo rows"));
                    if (n_halo)
                        memcpy(grown, halo, (size_t)n_halo * sizeof *halo);
                    saga_free(halo);
                    halo = grown;
                }
                w->lid[u] = -2;
                halo[n_halo++] = inv[u];
            }
        }
        bnd[i - lo] = boundary;
        n_interior += !boundary;
        nnz += in.offsets[v + 1] - in.offsets[v];
    }
    if (n_halo > 1)
        qsort(halo, (size_t)n_halo, sizeof *halo, cmp_i64);
    b->h.n_interior = n_interior;
    b->h.n_halo = n_halo;
    int64_t n_local = n_own + n_halo;
    SAGA_CHECK(n_local <= INT32_MAX, SAGA_ERR_UNSUPPORTED,
               "shard %d: %lld local rows exceed 32-bit local ids", (int)r, (long long)n_local);

    /* ---- local ids: the interior, the boundary, then the halo by owner */
    SAGA_TRY(section_alloc(b, S_GLOBAL, n_local, sizeof(int64_t)));
    int64_t *gid = b->owned[S_GLOBAL];
    int64_t at_int = 0, at_bnd = n_interior;
    for (int64_t i = lo; i < hi; i++) {
        int64_t l = bnd[i - lo] ? at_bnd++ : at_int++;
        gid[l] = i;
        w->lid[perm[i]] = (int32_t)l;
    }
    SAGA_TRY(section_alloc(b, S_HALO_OFF, w->R + 1, sizeof(int64_t)));
    int64_t *hoff = b->owned[S_HALO_OFF];
    memset(hoff, 0, (size_t)(w->R + 1) * sizeof *hoff);
    for (int64_t j = 0; j < n_halo; j++) {
        gid[n_own + j] = halo[j];
        w->lid[perm[halo[j]]] = (int32_t)(n_own + j);
        hoff[owner_of(w->row0, w->R, halo[j]) + 1]++;
    }
    for (int32_t q = 0; q < w->R; q++)
        hoff[q + 1] += hoff[q];

    /* ---- in-edges of the own rows, in local ids */
    b->h.nnz = nnz;
    SAGA_TRY(section_alloc(b, S_IN_OFF, n_own + 1, sizeof(int64_t)));
    SAGA_TRY(section_alloc(b, S_IN_IDX, nnz, sizeof(int32_t)));
    if (in.weights) {
        b->h.flags |= FLAG_WEIGHTED;
        SAGA_TRY(section_alloc(b, S_IN_W, nnz, sizeof(float)));
    }
    int64_t *ioff = b->owned[S_IN_OFF];
    int32_t *iidx = b->owned[S_IN_IDX];
    float *iw = b->owned[S_IN_W];
    ioff[0] = 0;
    for (int64_t l = 0; l < n_own; l++) {
        int32_t v = perm[gid[l]];
        int64_t k = ioff[l];
        for (int64_t e = in.offsets[v]; e < in.offsets[v + 1]; e++, k++) {
            iidx[k] = w->lid[in.indices[e]];
            if (iw)
                iw[k] = in.weights[e];
        }
        ioff[l + 1] = k;
    }

    /* ---- per local row: original id, out-degree */
    SAGA_TRY(section_alloc(b, S_ORIG, n_local, sizeof(int64_t)));
    SAGA_TRY(section_alloc(b, S_VERTEX, n_local, sizeof(int32_t)));
    SAGA_TRY(section_alloc(b, S_OUT_DEG, n_local, sizeof(int64_t)));
    int64_t *orig = b->owned[S_ORIG], *odeg = b->owned[S_OUT_DEG];
    int32_t *vert = b->owned[S_VERTEX];
    for (int64_t l = 0; l < n_local; l++) {
        int32_t v = perm[gid[l]];
        vert[l] = v;
        orig[l] = saga_graph_orig_id(g, v);
        odeg[l] = out.offsets[v + 1] - out.offsets[v];
    }

    /* ---- send lists: own rows with an out-edge into shard q, by renumbered id (the order of
     * q's halo group of this shard) */
    SAGA_TRY(section_alloc(b, S_SEND_OFF, w->R + 1, sizeof(int64_t)));
    int64_t *soff = b->owned[S_SEND_OFF];
    memset(soff, 0, (size_t)(w->R + 1) * sizeof *soff);
    for (int pass = 0; pass < 2; pass++) {
        int64_t *fill = NULL;
        int32_t *send = NULL;
        if (pass == 1) {
            for (int32_t q = 0; q < w->R; q++)
                soff[q + 1] += soff[q];
            SAGA_TRY(section_alloc(b, S_SEND, soff[w->R], sizeof(int32_t)));
            send = b->owned[S_SEND];
            SAGA_TRY(saga_alloc_array((void **)&fill, (size_t)w->R, sizeof *fill, "send cursors"));
            memcpy(fill, soff, (size_t)w->R * sizeof *fill);
        }
        for (int32_t q = 0; q < w->R; q++)
            w->seen[q] = -1;
        for (int64_t i = lo; i < hi; i++) {
            int32_t u = perm[i];
            for (int64_t e = out.offsets[u]; e < out.offsets[u + 1]; e++) {
                int32_t q = owner(w, out.indices[e]);
                if (q == r || w->seen[q] == u)
                    continue;
                w->seen[q] = u;
                if (pass == 0)
                    soff[q + 1]++;
                else
                    send[fill[q]++] = w->lid[u];
            }
        }
        saga_free(fill);
    }

    /* ---- features, labels and split of the own rows, in local order */
    const saga_features *f = w->in->features;
    if (f) {
        b->h.feature_cols = f->n_cols;
        if (f->dense) {
            b->h.feature_nnz = -1;
            SAGA_TRY(section_alloc(b, S_FEAT, n_own * f->n_cols, sizeof(float)));
            float *x = b->owned[S_FEAT];
            for (int64_t l = 0; l < n_own; l++)
                memcpy(x + l * f->n_cols, f->dense + (int64_t)perm[gid[l]] * f->n_cols,
                       (size_t)f->n_cols * sizeof *x);
        } else {
            int64_t fn = 0;
            for (int64_t l = 0; l < n_own; l++) {
                int32_t v = perm[gid[l]];
                fn += f->offsets[v + 1] - f->offsets[v];
            }
            b->h.feature_nnz = fn;
            SAGA_TRY(section_alloc(b, S_FEAT_OFF, n_own + 1, sizeof(int64_t)));
            SAGA_TRY(section_alloc(b, S_FEAT_IDX, fn, sizeof(int32_t)));
            SAGA_TRY(section_alloc(b, S_FEAT_VAL, fn, sizeof(float)));
            int64_t *fo = b->owned[S_FEAT_OFF];
            int32_t *fi = b->owned[S_FEAT_IDX];
            float *fv = b->owned[S_FEAT_VAL];
            fo[0] = 0;
            for (int64_t l = 0; l < n_own; l++) {
                int32_t v = perm[gid[l]];
                int64_t a = f->offsets[v], k = f->offsets[v + 1] - a;
                memcpy(fi + fo[l], f->indices + a, (size_t)k * sizeof *fi);
                memcpy(fv + fo[l], f->values + a, (size_t)k * sizeof *fv);
                fo[l + 1] = fo[l] + k;
            }
        }
    }
    if (w->in->labels) {
        b->h.flags |= FLAG_LABELS;
        b->h.n_classes = w->in->n_classes;
        SAGA_TRY(section_alloc(b, S_LABELS, n_own, sizeof(int32_t)));
        int32_t *y = b->owned[S_LABELS];
        for (int64_t l = 0; l < n_own; l++)
            y[l] = w->in->labels[perm[gid[l]]];
    }
    for (int k = 0; k < 3; k++) {
        const int32_t *list = w->in->split[k];
        int64_t cnt = 0;
        for (int64_t i = 0; list && i < w->in->split_n[k]; i++)
            cnt += inv[list[i]] >= lo && inv[list[i]] < hi;
        b->h.split_n[k] = cnt;
        SAGA_TRY(section_alloc(b, S_TRAIN + k, cnt, sizeof(int32_t)));
        int32_t *o = b->owned[S_TRAIN + k];
        cnt = 0;
        for (int64_t i = 0; list && i < w->in->split_n[k]; i++)
            if (inv[list[i]] >= lo && inv[list[i]] < hi)
                o[cnt++] = w->lid[list[i]];
    }
fail:
    /* local ids back to -1 for the next shard */
    for (int64_t i = lo; i < hi; i++)
        w->lid[perm[i]] = -1;
    for (int64_t j = 0; j < n_halo; j++)
        w->lid[perm[halo[j]]] = -1;
    saga_free(bnd);
    saga_free(halo);
    return st;
}

/* Contiguous ranges of parts, cut where rows plus in-edges pass each shard's share; at least
 * one part each (the rule a net over ranks deals its parts by). */
static saga_status deal(int64_t *row0, const saga_partition *p, const saga_graph *g, int32_t R) {
    saga_status st = SAGA_OK;
    saga_csr in = saga_graph_in(g);
    int32_t k = p->n_parts;
    int64_t *before = NULL; /* rows plus in-edges of parts 0 .. q-1 */
    int32_t *first = NULL;
    SAGA_TRY(saga_alloc_array((void **)&before, (size_t)k + 1, sizeof *before, "part sizes"));
    SAGA_TRY(saga_alloc_array((void **)&first, (size_t)R + 1, sizeof *first, "shard parts"));
    before[0] = 0;
    for (int32_t q = 0; q < k; q++) {
        int64_t s = p->offsets[q + 1] - p->offsets[q];
        for (int64_t i = p->offsets[q]; i < p->offsets[q + 1]; i++)
            s += in.offsets[p->perm[i] + 1] - in.offsets[p->perm[i]];
        before[q + 1] = before[q] + s;
    }
    double total = (double)before[k];
    first[0] = 0;
    int32_t d = 0;
    for (int32_t r = 1; r < R; r++) {
        double want = total * r / R;
        int32_t lo = first[r - 1] + 1, hi = k - (R - r);
        d = d < lo ? lo : d;
        while (d < hi && (double)before[d] < want)
            d++;
        first[r] = d;
    }
    first[R] = k;
    for (int32_t r = 0; r <= R; r++)
        row0[r] = p->offsets[first[r]];
fail:
    saga_free(before);
    saga_free(first);
    return st;
}

static saga_status file_crc(const char *path, int64_t *bytes, uint32_t *crc) {
    saga_status st = SAGA_OK;
    uint8_t *buf = NULL;
    FILE *f = fopen(path, "rb");
    SAGA_CHECK(f, SAGA_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    SAGA_TRY(saga_alloc_array((void **)&buf, CHUNK, 1, "a read buffer"));
    uLong c = crc32(0L, Z_NULL, 0);
    int64_t total = 0;
    size_t k;
    while ((k = fread(buf, 1, CHUNK, f)) > 0) {
        c = crc32(c, buf, (uInt)k);
        total += (int64_t)k;
    }
    SAGA_CHECK(!ferror(f), SAGA_ERR_IO, "%s: cannot read", path);
    *bytes = total;
    *crc = (uint32_t)c;
fail:
    if (f)
        fclose(f);
    saga_free(buf);
    return st;
}

static void shard_name(char *buf, size_t cap, const char *dir, int32_t r) {
    snprintf(buf, cap, "%s/shard-%d.bin", dir, (int)r);
}

saga_status saga_shards_write(const char *dir, const saga_shards_input *in,
                              const saga_shards_opts *opts, saga_shards_info *info) {
    saga_status st = SAGA_OK;
    saga_shards_opts o = opts ? *opts : saga_shards_opts_defaults();
    writer w = {0};
    saga_partition *p = NULL;
    shard_build b = {0};
    int64_t *file_bytes = NULL, *halo = NULL;
    uint32_t *hcrc = NULL;
    FILE *mf = NULL;
    char path[4200], tmp[4300];
    SAGA_CHECK(dir && in && in->graph, SAGA_ERR_INVALID_ARG,
               "saga_shards_write: a directory and a graph are required");
    int32_t n = saga_graph_n_vertices(in->graph);
    SAGA_CHECK(o.shards >= 1 && o.shards <= n, SAGA_ERR_INVALID_ARG,
               "shards: %d shards asked of a graph with %d vertices", (int)o.shards, (int)n);
    SAGA_CHECK(o.parts_per_shard >= 1 && (int64_t)o.shards * o.parts_per_shard <= n,
               SAGA_ERR_INVALID_ARG, "shards: %d parts per shard for %d shards of %d vertices",
               (int)o.parts_per_shard, (int)o.shards, (int)n);
    SAGA_CHECK(!in->features || in->features->n_rows == n, SAGA_ERR_INVALID_ARG,
               "shards: %lld feature rows for %d vertices", (long long)in->features->n_rows,
               (int)n);
    SAGA_CHECK(!in->labels || in->n_classes >= 1, SAGA_ERR_INVALID_ARG,
               "shards: labels need a class count");
    for (int32_t v = 0; in->labels && v < n; v++)
        SAGA_CHECK(in->labels[v] >= -1 && in->labels[v] < in->n_classes, SAGA_ERR_INVALID_ARG,
                   "shards: vertex %d has label %d of %d classes", (int)v, (int)in->labels[v],
                   (int)in->n_classes);
    for (int k = 0; k < 3; k++)
        for (int64_t i = 0; in->split[k] && i < in->split_n[k]; i++)
            SAGA_CHECK(in->split[k][i] >= 0 && in->split[k][i] < n, SAGA_ERR_INVALID_ARG,
                       "shards: split vertex %d of %d", (int)in->split[k][i], (int)n);
    SAGA_CHECK(!in->build || !strchr(in->build, '\n'), SAGA_ERR_INVALID_ARG,
               "shards: the build line holds a newline");
    int32_t R = o.shards;

    /* ---- the directory; an old manifest goes first, so that old and new never mix */
    if (mkdir(dir, 0777) != 0 && errno != EEXIST)
        SAGA_CHECK(false, SAGA_ERR_IO, "%s: cannot create the directory: %s", dir, strerror(errno));
    snprintf(path, sizeof path, "%s/manifest.txt", dir);
    SAGA_CHECK(remove(path) == 0 || errno == ENOENT, SAGA_ERR_IO, "%s: cannot replace: %s", path,
               strerror(errno));

    /* ---- partition and deal */
    double t0 = saga_now();
    SAGA_TRY(saga_partition_graph(&p, in->graph, R * o.parts_per_shard, &o.partition));
    double t1 = saga_now();
    w.in = in;
    w.R = R;
    w.n = n;
    w.p = p;
    SAGA_TRY(saga_alloc_array((void **)&w.row0, (size_t)R + 1, sizeof *w.row0, "shard rows"));
    SAGA_TRY(saga_alloc_array((void **)&w.lid, n ? (size_t)n : 1, sizeof *w.lid, "local ids"));
    SAGA_TRY(saga_alloc_array((void **)&w.seen, (size_t)R, sizeof *w.seen, "peers seen"));
    SAGA_TRY(saga_alloc_zeroed((void **)&file_bytes, (size_t)R, sizeof *file_bytes, "sizes"));
    SAGA_TRY(saga_alloc_zeroed((void **)&halo, (size_t)R, sizeof *halo, "halo sizes"));
    SAGA_TRY(saga_alloc_zeroed((void **)&hcrc, (size_t)R, sizeof *hcrc, "header checksums"));
    for (int32_t v = 0; v < n; v++)
        w.lid[v] = -1;
    SAGA_TRY(deal(w.row0, p, in->graph, R));

    /* ---- the shards, one at a time */
    for (int32_t r = 0; r < R; r++) {
        SAGA_TRY(build_shard(&w, r, &b));
        shard_name(path, sizeof path, dir, r);
        SAGA_TRY(build_write(&b, path, &file_bytes[r]));
        halo[r] = b.h.n_halo;
        hcrc[r] = b.h.crc;
        build_free(&b);
        saga_log(SAGA_LOG_DEBUG, "shards: wrote %s (%lld bytes)", path, (long long)file_bytes[r]);
    }

    /* ---- the manifest, last */
    snprintf(path, sizeof path, "%s/manifest.txt", dir);
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    mf = fopen(tmp, "w");
    SAGA_CHECK(mf, SAGA_ERR_IO, "%s: cannot create: %s", tmp, strerror(errno));
    const saga_features *f = in->features;
    fprintf(mf, "saga-shards %d\n", SAGA_SHARDS_VERSION);
    fprintf(mf, "vertices %d\nedges %lld\nweighted %d\n", (int)n,
            (long long)saga_graph_n_edges(in->graph), saga_graph_has_weights(in->graph) ? 1 : 0);
    if (in->data_edges > 0)
        fprintf(mf, "data_edges %lld\n", (long long)in->data_edges);
    fprintf(mf, "symmetric %d\n", saga_graph_is_symmetric(in->graph) ? 1 : 0);
    fprintf(mf, "shards %d\nparts_per_shard %d\nmethod %s\nseed %" PRIu64 "\nedge_cut %lld\n",
            (int)R, (int)o.parts_per_shard, saga_partition_method_name(p->method), o.partition.seed,
            (long long)p->edge_cut);
    fprintf(mf, "features %lld %lld\n", f ? (long long)f->n_cols : 0LL,
            f ? (f->dense ? -1LL : (long long)f->nnz) : -1LL);
    fprintf(mf, "classes %d\n", in->labels ? (int)in->n_classes : 0);
    fprintf(mf, "split %lld %lld %lld\n", (long long)(in->split[0] ? in->split_n[0] : 0),
            (long long)(in->split[1] ? in->split_n[1] : 0),
            (long long)(in->split[2] ? in->split_n[2] : 0));
    fprintf(mf, "build %s\n", in->build ? in->build : "");
    for (int32_t r = 0; r < R; r++)
        fprintf(mf, "shard %d rows %lld %lld halo %lld bytes %lld header_crc %08x\n", (int)r,
                (long long)w.row0[r], (long long)w.row0[r + 1], (long long)halo[r],
                (long long)file_bytes[r], hcrc[r]);
    for (int32_t s = 0; s < in->n_sources; s++) {
        int64_t bytes = 0;
        uint32_t crc = 0;
        char real[4096];
        SAGA_TRY(file_crc(in->sources[s], &bytes, &crc));
        const char *name = realpath(in->sources[s], real) ? real : in->sources[s];
        SAGA_CHECK(!strchr(name, '\n'), SAGA_ERR_INVALID_ARG,
                   "shards: a source path holds a newline");
        fprintf(mf, "source %lld %08x %s\n", (long long)bytes, crc, name);
    }
    fprintf(mf, "end\n");
    bool ok = fflush(mf) == 0 && fsync(fileno(mf)) == 0 && !ferror(mf);
    ok = fclose(mf) == 0 && ok;
    mf = NULL;
    if (!ok) {
        remove(tmp);
        SAGA_CHECK(false, SAGA_ERR_IO, "%s: cannot write", path);
    }
    SAGA_CHECK(rename(tmp, path) == 0, SAGA_ERR_IO, "%s: cannot rename into place: %s", path,
               strerror(errno));
    /* shards of an earlier, larger R would only mislead */
    for (int32_t r = R;; r++) {
        shard_name(path, sizeof path, dir, r);
        if (remove(path) != 0)
            break;
    }
    if (info) {
        memset(info, 0, sizeof *info);
        info->method = p->method;
        info->edge_cut = p->edge_cut;
        info->halo_min = INT64_MAX;
        info->bytes_min = INT64_MAX;
        for (int32_t r = 0; r < R; r++) {
            info->halo_min = halo[r] < info->halo_min ? halo[r] : info->halo_min;
            info->halo_max = halo[r] > info->halo_max ? halo[r] : info->halo_max;
            info->bytes_min = file_bytes[r] < info->bytes_min ? file_bytes[r] : info->bytes_min;
            info->bytes_max = file_bytes[r] > info->bytes_max ? file_bytes[r] : info->bytes_max;
        }
        info->partition_seconds = t1 - t0;
        info->write_seconds = saga_now() - t1;
    }
fail:
    if (mf) {
        fclose(mf);
        remove(tmp);
    }
    build_free(&b);
    saga_partition_free(&p);
    saga_free(w.row0);
    saga_free(w.lid);
    saga_free(w.seen);
    saga_free(file_bytes);
    saga_free(halo);
    saga_free(hcrc);
    return st;
}

/* ---- the manifest -----------------------------------------------------------------------------
 */

void saga_shards_manifest_free(saga_shards_manifest *m) {
    if (!m)
        return;
    saga_free(m->row0);
    saga_free(m->halo);
    saga_free(m->file_bytes);
    saga_free(m->header_crc);
    saga_free(m->source_path);
    saga_free(m->source_bytes);
    saga_free(m->source_crc);
    memset(m, 0, sizeof *m);
}

static saga_status grow_sources(saga_shards_manifest *m) {
    saga_status st = SAGA_OK;
    int32_t n = m->n_sources + 1;
    char(*path)[4096] = NULL;
    int64_t *bytes = NULL;
    uint32_t *crc = NULL;
    SAGA_TRY(saga_alloc_array((void **)&path, (size_t)n, sizeof *path, "source paths"));
    SAGA_TRY(saga_alloc_array((void **)&bytes, (size_t)n, sizeof *bytes, "source sizes"));
    SAGA_TRY(saga_alloc_array((void **)&crc, (size_t)n, sizeof *crc, "source checksums"));
    if (m->n_sources) {
        memcpy(path, m->source_path, (size_t)m->n_sources * sizeof *path);
        memcpy(bytes, m->source_bytes, (size_t)m->n_sources * sizeof *bytes);
        memcpy(crc, m->source_crc, (size_t)m->n_sources * sizeof *crc);
    }
    saga_free(m->source_path);
    saga_free(m->source_bytes);
    saga_free(m->source_crc);
    m->source_path = path;
    m->source_bytes = bytes;
    m->source_crc = crc;
    return SAGA_OK;
fail:
    saga_free(path);
    saga_free(bytes);
    saga_free(crc);
    return st;
}

saga_status saga_shards_manifest_read(saga_shards_manifest *m, const char *dir) {
    saga_status st = SAGA_OK;
    char path[4200], line[8400], word[64];
    FILE *f = NULL;
    SAGA_CHECK(m && dir, SAGA_ERR_INVALID_ARG, "saga_shards_manifest_read: arguments required");
    memset(m, 0, sizeof *m);
    snprintf(path, sizeof path, "%s/manifest.txt", dir);
    f = fopen(path, "r");
    SAGA_CHECK(f, SAGA_ERR_IO,
               "%s: cannot open: %s (not a shard directory, or its writing did not finish: run "
               "`saga partition --shards R` again)",
               path, strerror(errno));
    long line_no = 0;
    int32_t shards_seen = 0;
    bool ended = false;
    m->n_shards = -1;
    m->symmetric = -1;
    while (fgets(line, sizeof line, f)) {
        line_no++;
        size_t len = strlen(line);
        SAGA_CHECK(len && line[len - 1] == '\n', SAGA_ERR_PARSE, "%s:%ld: line too long or cut",
                   path, line_no);
        line[--len] = '\0';
        SAGA_CHECK(!ended, SAGA_ERR_PARSE, "%s:%ld: text after \"end\"", path, line_no);
        int used = 0;
        if (sscanf(line, "%63s%n", word, &used) != 1)
            continue;
        const char *rest = line + used;
        bool ok = true;
        if (line_no == 1) {
            ok = strcmp(word, "saga-shards") == 0 && sscanf(rest, "%d", &m->version) == 1;
            SAGA_CHECK(ok, SAGA_ERR_PARSE, "%s:1: not a saga shard manifest", path);
            SAGA_CHECK(m->version == SAGA_SHARDS_VERSION, SAGA_ERR_PARSE,
                       "%s: format version %d; this build reads version %d (write the shards "
                       "again with this build)",
                       path, m->version, SAGA_SHARDS_VERSION);
        } else if (strcmp(word, "vertices") == 0) {
            ok = sscanf(rest, "%" SCNd64, &m->n_vertices) == 1 && m->n_vertices >= 1 &&
                 m->n_vertices <= INT32_MAX;
        } else if (strcmp(word, "edges") == 0) {
            ok = sscanf(rest, "%" SCNd64, &m->n_edges) == 1 && m->n_edges >= 0;
        } else if (strcmp(word, "symmetric") == 0) {
            ok = sscanf(rest, "%d", &m->symmetric) == 1 && (m->symmetric == 0 || m->symmetric == 1);
        } else if (strcmp(word, "data_edges") == 0) {
            ok = sscanf(rest, "%" SCNd64, &m->data_edges) == 1 && m->data_edges > 0;
        } else if (strcmp(word, "weighted") == 0) {
            int v = 0;
            ok = sscanf(rest, "%d", &v) == 1 && (v == 0 || v == 1);
            m->weighted = v;
        } else if (strcmp(word, "shards") == 0) {
            ok = m->n_shards < 0 && sscanf(rest, "%d", &m->n_shards) == 1 && m->n_shards >= 1 &&
                 m->n_shards <= m->n_vertices;
            if (ok) {
                size_t R = (size_t)m->n_shards;
                SAGA_TRY(saga_alloc_zeroed((void **)&m->row0, R + 1, sizeof *m->row0, "rows"));
                SAGA_TRY(saga_alloc_zeroed((void **)&m->halo, R, sizeof *m->halo, "halos"));
                SAGA_TRY(saga_alloc_zeroed((void **)&m->file_bytes, R, sizeof *m->file_bytes,
                                           "shard sizes"));
                SAGA_TRY(saga_alloc_zeroed((void **)&m->header_crc, R, sizeof *m->header_crc,
                                           "shard checksums"));
            }
        } else if (strcmp(word, "parts_per_shard") == 0) {
            ok = sscanf(rest, "%d", &m->parts_per_shard) == 1 && m->parts_per_shard >= 1;
        } else if (strcmp(word, "method") == 0) {
            char name[32] = "";
            ok = sscanf(rest, "%31s", name) == 1;
            int k = 0;
            while (k < SAGA_PARTITION_METHOD_COUNT &&
                   strcmp(name, saga_partition_method_name((saga_partition_method)k)) != 0)
                k++;
            ok = ok && k < SAGA_PARTITION_METHOD_COUNT;
            m->method = (saga_partition_method)k;
        } else if (strcmp(word, "seed") == 0) {
            ok = sscanf(rest, "%" SCNu64, &m->seed) == 1;
        } else if (strcmp(word, "edge_cut") == 0) {
            ok = sscanf(rest, "%" SCNd64, &m->edge_cut) == 1 && m->edge_cut >= 0;
        } else if (strcmp(word, "features") == 0) {
            ok = sscanf(rest, "%" SCNd64 " %" SCNd64, &m->feature_cols, &m->feature_nnz) == 2 &&
                 m->feature_cols >= 0 && m->feature_nnz >= -1;
        } else if (strcmp(word, "classes") == 0) {
            ok = sscanf(rest, "%d", &m->n_classes) == 1 && m->n_classes >= 0;
        } else if (strcmp(word, "split") == 0) {
            ok = sscanf(rest, "%" SCNd64 " %" SCNd64 " %" SCNd64, &m->split_n[0], &m->split_n[1],
                        &m->split_n[2]) == 3 &&
                 m->split_n[0] >= 0 && m->split_n[1] >= 0 && m->split_n[2] >= 0;
        } else if (strcmp(word, "build") == 0) {
            snprintf(m->build, sizeof m->build, "%s", *rest == ' ' ? rest + 1 : rest);
        } else if (strcmp(word, "shard") == 0) {
            int r = -1;
            int64_t a = 0, z = 0, h = 0, bytes = 0;
            unsigned crc = 0;
            ok = m->n_shards > 0 &&
                 sscanf(rest,
                        " %d rows %" SCNd64 " %" SCNd64 " halo %" SCNd64 " bytes %" SCNd64
                        " header_crc %x",
                        &r, &a, &z, &h, &bytes, &crc) == 6 &&
                 r == shards_seen && r < m->n_shards && a == m->row0[r] && z > a &&
                 z <= m->n_vertices && h >= 0 && bytes > 0;
            if (ok) {
                m->row0[r + 1] = z;
                m->halo[r] = h;
                m->file_bytes[r] = bytes;
                m->header_crc[r] = (uint32_t)crc;
                shards_seen++;
            }
        } else if (strcmp(word, "source") == 0) {
            int64_t bytes = 0;
            unsigned crc = 0;
            int at = 0;
            ok = sscanf(rest, " %" SCNd64 " %x %n", &bytes, &crc, &at) == 2 && at > 0 &&
                 rest[at] != '\0';
            if (ok) {
                SAGA_TRY(grow_sources(m));
                snprintf(m->source_path[m->n_sources], sizeof m->source_path[0], "%s", rest + at);
                m->source_bytes[m->n_sources] = bytes;
                m->source_crc[m->n_sources] = (uint32_t)crc;
                m->n_sources++;
            }
        } else if (strcmp(word, "end") == 0) {
            ended = true;
        } else {
            ok = false;
        }
        SAGA_CHECK(ok, SAGA_ERR_PARSE, "%s:%ld: cannot read \"%s\"", path, line_no, line);
    }
    SAGA_CHECK(!ferror(f), SAGA_ERR_IO, "%s: cannot read", path);
    SAGA_CHECK(ended && m->version && m->n_shards > 0 && shards_seen == m->n_shards &&
                   m->row0[m->n_shards] == m->n_vertices && m->parts_per_shard >= 1,
               SAGA_ERR_PARSE, "%s: incomplete (%d of %d shards listed, %s)", path,
               (int)shards_seen, (int)m->n_shards, ended ? "ends" : "no \"end\" line");
    fclose(f);
    return SAGA_OK;
fail:
    if (f)
        fclose(f);
    saga_shards_manifest_free(m);
    return st;
}

/* ---- one shard, mapped ---------------------------------------------------------------------- */

void saga_shard_close(saga_shard **s) {
    if (!s || !*s)
        return;
    if ((*s)->map)
        munmap((*s)->map, (*s)->map_bytes);
    saga_free(*s);
    *s = NULL;
}

/* Bytes section s must hold for header h. */
static uint64_t want_bytes(const shard_header *h, int s) {
    int64_t n_local = h->n_own + h->n_halo, R = h->n_shards;
    bool sparse = h->feature_cols > 0 && h->feature_nnz >= 0;
    switch (s) {
    case S_IN_OFF:
        return (uint64_t)(h->n_own + 1) * 8;
    case S_IN_IDX:
        return (uint64_t)h->nnz * 4;
    case S_IN_W:
        return (h->flags & FLAG_WEIGHTED) ? (uint64_t)h->nnz * 4 : 0;
    case S_VERTEX:
        return (uint64_t)n_local * 4;
    case S_GLOBAL:
    case S_ORIG:
    case S_OUT_DEG:
        return (uint64_t)n_local * 8;
    case S_HALO_OFF:
    case S_SEND_OFF:
        return (uint64_t)(R + 1) * 8;
    case S_FEAT:
        return h->feature_cols > 0 && !sparse ? (uint64_t)h->n_own * (uint64_t)h->feature_cols * 4
                                              : 0;
    case S_FEAT_OFF:
        return sparse ? (uint64_t)(h->n_own + 1) * 8 : 0;
    case S_FEAT_IDX:
    case S_FEAT_VAL:
        return sparse ? (uint64_t)h->feature_nnz * 4 : 0;
    case S_LABELS:
        return (h->flags & FLAG_LABELS) ? (uint64_t)h->n_own * 4 : 0;
    case S_TRAIN:
    case S_VAL:
    case S_TEST:
        return (uint64_t)h->split_n[s - S_TRAIN] * 4;
    default:
        return UINT64_MAX; /* S_SEND and S_CRCS: checked where their counts are known */
    }
}

static bool ascending(const int64_t *a, int64_t n, int64_t first, int64_t last) {
    if (a[0] != first || a[n] != last)
        return false;
    for (int64_t i = 0; i < n; i++)
        if (a[i + 1] < a[i])
            return false;
    return true;
}

#define BAD(...) SAGA_CHECK(false, SAGA_ERR_CORRUPT, __VA_ARGS__)

static saga_status check_header(const char *name, const shard_header *h, uint64_t size,
                                int32_t rank, const saga_shards_manifest *m) {
    saga_status st = SAGA_OK;
    SAGA_CHECK(size >= HEADER_BYTES && memcmp(h->magic, MAGIC, sizeof MAGIC) == 0, SAGA_ERR_CORRUPT,
               "%s: not a saga shard file", name);
    SAGA_CHECK(h->version == SAGA_SHARDS_VERSION, SAGA_ERR_CORRUPT,
               "%s: format version %u; this build reads version %d", name, h->version,
               SAGA_SHARDS_VERSION);
    SAGA_CHECK(header_crc(h) == h->crc, SAGA_ERR_CORRUPT,
               "%s: header checksum mismatch (stored %08x, computed %08x)", name, h->crc,
               header_crc(h));
    SAGA_CHECK(h->header_bytes == HEADER_BYTES && h->chunk_bytes == CHUNK &&
                   h->n_sections == N_SECTIONS,
               SAGA_ERR_CORRUPT, "%s: a layout this build does not read", name);
    SAGA_CHECK(h->rank == rank && h->n_shards == m->n_shards, SAGA_ERR_CORRUPT,
               "%s: shard %d of %d, where the manifest expects shard %d of %d", name, (int)h->rank,
               (int)h->n_shards, (int)rank, (int)m->n_shards);
    SAGA_CHECK(h->crc == m->header_crc[rank] && size == (uint64_t)m->file_bytes[rank],
               SAGA_ERR_CORRUPT,
               "%s: not the shard the manifest lists (%llu bytes, header %08x; listed: %lld "
               "bytes, header %08x): the directory mixes shards of different runs",
               name, (unsigned long long)size, h->crc, (long long)m->file_bytes[rank],
               m->header_crc[rank]);
    SAGA_CHECK(h->n_vertices == m->n_vertices && h->n_edges == m->n_edges &&
                   h->row0 == m->row0[rank] && h->n_own == m->row0[rank + 1] - m->row0[rank] &&
                   h->n_halo == m->halo[rank] && h->feature_cols == m->feature_cols &&
                   (h->feature_cols == 0 || h->feature_nnz < 0) ==
                       (m->feature_nnz < 0 || m->feature_cols == 0) &&
                   h->n_classes == m->n_classes && !!(h->flags & FLAG_WEIGHTED) == m->weighted,
               SAGA_ERR_CORRUPT, "%s: its counts differ from the manifest's", name);
    SAGA_CHECK(
        h->n_interior >= 0 && h->n_interior <= h->n_own && h->n_halo >= 0 &&
            h->n_own + h->n_halo <= INT32_MAX && h->nnz >= 0 && h->nnz <= (int64_t)(size / 4) &&
            h->feature_cols >= 0 && h->feature_cols <= INT32_MAX &&
            (h->feature_nnz < 0 || h->feature_nnz <= (int64_t)(size / 4)) && h->split_n[0] >= 0 &&
            h->split_n[1] >= 0 && h->split_n[2] >= 0 && h->split_n[0] <= h->n_own &&
            h->split_n[1] <= h->n_own && h->split_n[2] <= h->n_own,
        SAGA_ERR_CORRUPT, "%s: counts out of range", name);
    uint64_t prev_end = HEADER_BYTES, chunks = 0;
    for (int s = 0; s < N_SECTIONS; s++) {
        const shard_section *x = &h->sec[s];
        uint64_t want = want_bytes(h, s);
        if (s == S_CRCS)
            want = chunks * 4;
        SAGA_CHECK(want == UINT64_MAX || x->bytes == want, SAGA_ERR_CORRUPT,
                   "%s: its %s hold %llu bytes, where its counts make %llu", name, SECTION_NAMES[s],
                   (unsigned long long)x->bytes, (unsigned long long)want);
        SAGA_CHECK(x->bytes % 4 == 0, SAGA_ERR_CORRUPT, "%s: %s of %llu bytes", name,
                   SECTION_NAMES[s], (unsigned long long)x->bytes);
        if (x->bytes) {
            SAGA_CHECK(x->offset % ALIGN == 0 && x->offset >= prev_end && x->offset <= size &&
                           x->bytes <= size - x->offset,
                       SAGA_ERR_CORRUPT, "%s: its %s lie outside the file (%llu bytes at %llu)",
                       name, SECTION_NAMES[s], (unsigned long long)x->bytes,
                       (unsigned long long)x->offset);
            prev_end = x->offset + x->bytes;
        }
        if (s < S_CRCS)
            chunks += n_chunks(x->bytes);
    }
fail:
    return st;
}

static saga_status verify_chunks(const char *name, const shard_header *h, const uint8_t *base) {
    saga_status st = SAGA_OK;
    const uint32_t *crcs = (const uint32_t *)(base + h->sec[S_CRCS].offset);
    uint32_t cc = crc_of(crcs, h->sec[S_CRCS].bytes);
    SAGA_CHECK(cc == h->crcs_crc, SAGA_ERR_CORRUPT,
               "%s: the chunk checksums' checksum mismatches (stored %08x, computed %08x)", name,
               h->crcs_crc, cc);
    uint64_t c = 0;
    for (int s = 0; s < S_CRCS; s++)
        for (uint64_t at = 0; at < h->sec[s].bytes; at += CHUNK, c++) {
            uint64_t len = h->sec[s].bytes - at < CHUNK ? h->sec[s].bytes - at : CHUNK;
            uint32_t got = crc_of(base + h->sec[s].offset + at, len);
            SAGA_CHECK(got == crcs[c], SAGA_ERR_CORRUPT,
                       "%s: %s, chunk %llu (bytes %llu..%llu of the section): checksum mismatch "
                       "(stored %08x, computed %08x)",
                       name, SECTION_NAMES[s], (unsigned long long)(at / CHUNK),
                       (unsigned long long)at, (unsigned long long)(at + len), crcs[c], got);
        }
fail:
    return st;
}

/* The structure: every offset ascending within its array, every id in range, own global ids
 * this shard's range (each once), the interior reading own rows only, halo rows by owner in
 * renumbered order, labels and split in range. */
static saga_status check_structure(const char *name, saga_shard *s, const saga_shards_manifest *m) {
    saga_status st = SAGA_OK;
    uint8_t *seen = NULL;
    int64_t n_own = s->n_own, n_local = s->n_local;
    SAGA_CHECK(ascending(s->in_offsets, n_own, 0, s->nnz), SAGA_ERR_CORRUPT,
               "%s: in-edge offsets not ascending from 0 to %lld", name, (long long)s->nnz);
    for (int64_t i = 0; i < n_own; i++) {
        int32_t limit = i < s->n_interior ? (int32_t)n_own : (int32_t)n_local;
        for (int64_t e = s->in_offsets[i]; e < s->in_offsets[i + 1]; e++)
            if (s->in_indices[e] < 0 || s->in_indices[e] >= limit)
                BAD("%s: row %lld reads local row %d (%s rows: %d)", name, (long long)i,
                    (int)s->in_indices[e], i < s->n_interior ? "interior, own" : "local",
                    (int)limit);
    }
    SAGA_CHECK(ascending(s->halo_offsets, s->n_shards, 0, s->n_halo) &&
                   s->halo_offsets[s->rank + 1] == s->halo_offsets[s->rank],
               SAGA_ERR_CORRUPT, "%s: halo offsets out of order", name);
    SAGA_CHECK(s->send_offsets[0] == 0 && s->send_offsets[s->rank + 1] == s->send_offsets[s->rank],
               SAGA_ERR_CORRUPT, "%s: send offsets out of order", name);
    for (int32_t q = 0; q < s->n_shards; q++)
        SAGA_CHECK(s->send_offsets[q + 1] >= s->send_offsets[q], SAGA_ERR_CORRUPT,
                   "%s: send offsets out of order", name);
    for (int64_t j = 0; j < s->send_offsets[s->n_shards]; j++)
        SAGA_CHECK(s->send_rows[j] >= 0 && s->send_rows[j] < n_own, SAGA_ERR_CORRUPT,
                   "%s: send list entry %lld names local row %d of %lld own", name, (long long)j,
                   (int)s->send_rows[j], (long long)n_own);
    SAGA_TRY(saga_alloc_zeroed((void **)&seen, n_own ? (size_t)n_own : 1, 1, "rows seen"));
    for (int64_t i = 0; i < n_own; i++) {
        int64_t g = s->global_id[i] - s->row0;
        SAGA_CHECK(g >= 0 && g < n_own && !seen[g], SAGA_ERR_CORRUPT,
                   "%s: own row %lld has global id %lld (own: %lld..%lld, each once)", name,
                   (long long)i, (long long)s->global_id[i], (long long)s->row0,
                   (long long)(s->row0 + n_own - 1));
        seen[g] = 1;
    }
    for (int32_t q = 0; q < s->n_shards; q++)
        for (int64_t j = s->halo_offsets[q]; j < s->halo_offsets[q + 1]; j++) {
            int64_t g = s->global_id[n_own + j];
            SAGA_CHECK(g >= m->row0[q] && g < m->row0[q + 1] &&
                           (j == s->halo_offsets[q] || g > s->global_id[n_own + j - 1]),
                       SAGA_ERR_CORRUPT,
                       "%s: halo row %lld (global id %lld) is not in order among shard %d's", name,
                       (long long)j, (long long)g, (int)q);
        }
    for (int64_t l = 0; l < n_local; l++)
        SAGA_CHECK(s->out_degree[l] >= 0 && s->out_degree[l] <= s->n_edges && s->vertex[l] >= 0 &&
                       s->vertex[l] < s->n_vertices,
                   SAGA_ERR_CORRUPT, "%s: local row %lld: out-degree %lld, input vertex %d", name,
                   (long long)l, (long long)s->out_degree[l], (int)s->vertex[l]);
    if (s->feature_offsets) {
        SAGA_CHECK(ascending(s->feature_offsets, n_own, 0, s->feature_nnz), SAGA_ERR_CORRUPT,
                   "%s: feature offsets not ascending", name);
        for (int64_t e = 0; e < s->feature_nnz; e++)
            SAGA_CHECK(s->feature_indices[e] >= 0 && s->feature_indices[e] < s->feature_cols,
                       SAGA_ERR_CORRUPT, "%s: feature column %d of %lld", name,
                       (int)s->feature_indices[e], (long long)s->feature_cols);
    }
    for (int64_t i = 0; s->labels && i < n_own; i++)
        SAGA_CHECK(s->labels[i] >= -1 && s->labels[i] < s->n_classes, SAGA_ERR_CORRUPT,
                   "%s: label %d of %d classes", name, (int)s->labels[i], (int)s->n_classes);
    for (int k = 0; k < 3; k++)
        for (int64_t i = 0; i < s->split_n[k]; i++)
            SAGA_CHECK(s->split[k][i] >= 0 && s->split[k][i] < n_own, SAGA_ERR_CORRUPT,
                       "%s: %s entry %lld names local row %d of %lld own", name,
                       SECTION_NAMES[S_TRAIN + k], (long long)i, (int)s->split[k][i],
                       (long long)n_own);
fail:
    saga_free(seen);
    return st;
}

/* A source that still exists with another size: the directory is older than its input. */
static saga_status check_sources(const char *dir, const saga_shards_manifest *m, bool crcs,
                                 int32_t *missing) {
    saga_status st = SAGA_OK;
    if (missing)
        *missing = 0;
    for (int32_t i = 0; i < m->n_sources; i++) {
        struct stat sb;
        if (stat(m->source_path[i], &sb) != 0) {
            if (missing)
                (*missing)++;
            continue;
        }
        SAGA_CHECK((int64_t)sb.st_size == m->source_bytes[i], SAGA_ERR_CORRUPT,
                   "%s is stale: its source %s is %lld bytes now, %lld when the shards were "
                   "written (run `saga partition --shards` again)",
                   dir, m->source_path[i], (long long)sb.st_size, (long long)m->source_bytes[i]);
        if (crcs) {
            int64_t bytes = 0;
            uint32_t crc = 0;
            SAGA_TRY(file_crc(m->source_path[i], &bytes, &crc));
            SAGA_CHECK(crc == m->source_crc[i], SAGA_ERR_CORRUPT,
                       "%s is stale: its source %s has CRC-32 %08x now, %08x when the shards "
                       "were written (run `saga partition --shards` again)",
                       dir, m->source_path[i], crc, m->source_crc[i]);
        }
    }
fail:
    return st;
}

/* The checks read every page, and a data set copies what it reads: their pages are given back,
 * and what the caller reads after (the halo layout, say) is faulted in again from the file.
 * Advisory: a refusal changes nothing. */
void saga_shard_release_pages(const saga_shard *s) {
    if (s && s->map && madvise(s->map, s->map_bytes, MADV_DONTNEED) != 0)
        saga_log(SAGA_LOG_DEBUG, "%s: madvise(MADV_DONTNEED): %s", s->path, strerror(errno));
}

static saga_status open_with(saga_shard **out, const char *dir, int32_t rank,
                             const saga_shard_open_opts *opts, const saga_shards_manifest *m) {
    saga_status st = SAGA_OK;
    saga_shard *s = NULL;
    int fd = -1;
    saga_shard_open_opts o = opts ? *opts : saga_shard_open_opts_defaults();
    SAGA_CHECK(rank >= 0 && rank < m->n_shards, SAGA_ERR_INVALID_ARG,
               "%s: shard %d asked of %d shards", dir, (int)rank, (int)m->n_shards);
    SAGA_TRY(saga_alloc_zeroed((void **)&s, 1, sizeof *s, "a shard"));
    shard_name(s->path, sizeof s->path, dir, rank);
    const char *name = s->path;
    fd = open(name, O_RDONLY | O_CLOEXEC);
    SAGA_CHECK(fd >= 0, SAGA_ERR_IO, "%s: cannot open: %s", name, strerror(errno));
    struct stat sb;
    SAGA_CHECK(fstat(fd, &sb) == 0, SAGA_ERR_IO, "%s: cannot stat: %s", name, strerror(errno));
    SAGA_CHECK(S_ISREG(sb.st_mode) && sb.st_size >= HEADER_BYTES, SAGA_ERR_CORRUPT,
               "%s: not a saga shard file (%lld bytes)", name, (long long)sb.st_size);
    s->map_bytes = (size_t)sb.st_size;
    s->map = mmap(NULL, s->map_bytes, PROT_READ, MAP_PRIVATE, fd, 0);
    if (s->map == MAP_FAILED) {
        s->map = NULL;
        SAGA_CHECK(false, SAGA_ERR_IO, "%s: cannot map: %s", name, strerror(errno));
    }
    close(fd);
    fd = -1;
    const uint8_t *base = s->map;
    shard_header h;
    memcpy(&h, base, sizeof h);
    SAGA_TRY(check_header(name, &h, s->map_bytes, rank, m));
    if (o.verify)
        SAGA_TRY(verify_chunks(name, &h, base));
#define AT(x) ((const void *)(h.sec[x].bytes ? base + h.sec[x].offset : NULL))
    s->rank = rank;
    s->n_shards = h.n_shards;
    s->n_vertices = h.n_vertices;
    s->n_edges = h.n_edges;
    s->row0 = h.row0;
    s->n_own = h.n_own;
    s->n_interior = h.n_interior;
    s->n_halo = h.n_halo;
    s->n_local = h.n_own + h.n_halo;
    s->nnz = h.nnz;
    s->in_offsets = AT(S_IN_OFF);
    s->in_indices = AT(S_IN_IDX);
    s->in_weights = AT(S_IN_W);
    s->global_id = AT(S_GLOBAL);
    s->orig_id = AT(S_ORIG);
    s->vertex = AT(S_VERTEX);
    s->out_degree = AT(S_OUT_DEG);
    s->halo_offsets = AT(S_HALO_OFF);
    s->send_offsets = AT(S_SEND_OFF);
    s->send_rows = AT(S_SEND);
    s->feature_cols = h.feature_cols;
    s->features = AT(S_FEAT);
    s->feature_nnz = h.feature_cols > 0 && h.feature_nnz >= 0 ? h.feature_nnz : 0;
    s->feature_offsets = AT(S_FEAT_OFF);
    s->feature_indices = AT(S_FEAT_IDX);
    s->feature_values = AT(S_FEAT_VAL);
    s->n_classes = h.n_classes;
    s->labels = AT(S_LABELS);
    for (int k = 0; k < 3; k++) {
        s->split[k] = AT(S_TRAIN + k);
        s->split_n[k] = h.split_n[k];
    }
#undef AT
    SAGA_CHECK(h.sec[S_SEND].bytes == (uint64_t)s->send_offsets[h.n_shards] * 4 &&
                   s->send_offsets[h.n_shards] >= 0,
               SAGA_ERR_CORRUPT, "%s: its send lists hold %llu bytes, where its offsets make %lld",
               name, (unsigned long long)h.sec[S_SEND].bytes,
               (long long)s->send_offsets[h.n_shards] * 4);
    SAGA_TRY(check_structure(name, s, m));
    saga_shard_release_pages(s);
    *out = s;
    return SAGA_OK;
fail:
    if (fd >= 0)
        close(fd);
    saga_shard_close(&s);
    return st;
}

saga_status saga_shard_open(saga_shard **out, const char *dir, int32_t rank,
                            const saga_shard_open_opts *opts) {
    saga_status st = SAGA_OK;
    saga_shards_manifest m = {0};
    SAGA_CHECK(out && dir, SAGA_ERR_INVALID_ARG, "saga_shard_open: arguments required");
    *out = NULL;
    SAGA_TRY(saga_shards_manifest_read(&m, dir));
    SAGA_TRY(check_sources(dir, &m, false, NULL));
    SAGA_TRY(open_with(out, dir, rank, opts, &m));
fail:
    saga_shards_manifest_free(&m);
    return st;
}

saga_status saga_shards_check(const char *dir, int32_t *sources_missing) {
    saga_status st = SAGA_OK;
    saga_shards_manifest m = {0};
    saga_shard **s = NULL;
    SAGA_CHECK(dir, SAGA_ERR_INVALID_ARG, "saga_shards_check: a directory is required");
    SAGA_TRY(saga_shards_manifest_read(&m, dir));
    SAGA_TRY(check_sources(dir, &m, true, sources_missing));
    SAGA_TRY(saga_alloc_zeroed((void **)&s, (size_t)m.n_shards, sizeof *s, "shards"));
    for (int32_t r = 0; r < m.n_shards; r++)
        SAGA_TRY(open_with(&s[r], dir, r, NULL, &m));
    /* every send list is the halo group it fills, row for row */
    for (int32_t q = 0; q < m.n_shards; q++)
        for (int32_t r = 0; r < m.n_shards; r++) {
            if (q == r)
                continue;
            int64_t ns = s[q]->send_offsets[r + 1] - s[q]->send_offsets[r];
            int64_t nh = s[r]->halo_offsets[q + 1] - s[r]->halo_offsets[q];
            SAGA_CHECK(ns == nh, SAGA_ERR_CORRUPT,
                       "%s: shard %d sends %lld rows to shard %d, whose halo holds %lld of them",
                       dir, (int)q, (long long)ns, (int)r, (long long)nh);
            for (int64_t j = 0; j < ns; j++) {
                int64_t sent = s[q]->global_id[s[q]->send_rows[s[q]->send_offsets[r] + j]];
                int64_t want = s[r]->global_id[s[r]->n_own + s[r]->halo_offsets[q] + j];
                SAGA_CHECK(sent == want, SAGA_ERR_CORRUPT,
                           "%s: shard %d's row %lld to shard %d is global row %lld, where its "
                           "halo expects %lld",
                           dir, (int)q, (long long)j, (int)r, (long long)sent, (long long)want);
            }
        }
fail:
    for (int32_t r = 0; s && r < m.n_shards; r++)
        saga_shard_close(&s[r]);
    saga_free(s);
    saga_shards_manifest_free(&m);
    return st;
}

/* ---- a shard as a data set ------------------------------------------------------------------ */

static saga_status copy_i32(int32_t **out, const int32_t *src, int64_t n, const char *what) {
    saga_status st = saga_alloc_array((void **)out, n ? (size_t)n : 1, sizeof **out, what);
    if (st == SAGA_OK && n)
        memcpy(*out, src, (size_t)n * sizeof **out);
    return st;
}

saga_status saga_shards_for_ranks(const saga_shards_manifest *m, const char *dir, int32_t ranks) {
    saga_status st = SAGA_OK;
    SAGA_CHECK(m->n_shards == ranks, SAGA_ERR_INVALID_ARG,
               "%s holds %d shards for %d ranks: run it with %d ranks (mpirun -np %d), or write "
               "%d shards (saga partition --shards %d)",
               dir, (int)m->n_shards, (int)ranks, (int)m->n_shards, (int)m->n_shards, (int)ranks,
               (int)ranks);
fail:
    return st;
}

saga_status saga_shard_graph(const saga_shard *s, saga_graph **out) {
    saga_status st = SAGA_OK;
    int32_t *src = NULL, *dst = NULL;
    SAGA_CHECK(s && out, SAGA_ERR_INVALID_ARG, "saga_shard_graph: NULL argument");
    *out = NULL;
    /* the own rows' in-edges, in the shard's order (a placed graph keeps it) */
    SAGA_TRY(saga_alloc_array((void **)&src, s->nnz ? (size_t)s->nnz : 1, sizeof *src, "edges"));
    SAGA_TRY(saga_alloc_array((void **)&dst, s->nnz ? (size_t)s->nnz : 1, sizeof *dst, "edges"));
    for (int32_t i = 0; i < (int32_t)s->n_own; i++)
        for (int64_t e = s->in_offsets[i]; e < s->in_offsets[i + 1]; e++)
            src[e] = s->in_indices[e], dst[e] = i;
    saga_graph_opts go = saga_graph_opts_defaults();
    go.duplicates = SAGA_DUPLICATES_KEEP;
    SAGA_TRY(
        saga_graph_from_edges_take(out, (int32_t)s->n_local, s->nnz, &src, &dst, NULL, NULL, &go));
fail:
    saga_free(src);
    saga_free(dst);
    return st;
}

saga_status saga_shards_dataset(saga_dataset *d, saga_shard **shard, const char *dir, int32_t rank,
                                int32_t ranks) {
    saga_status st = SAGA_OK;
    saga_shards_manifest m = {0};
    saga_shard *s = NULL;
    SAGA_CHECK(d && shard && dir, SAGA_ERR_INVALID_ARG, "saga_shards_dataset: NULL argument");
    memset(d, 0, sizeof *d);
    *shard = NULL;
    SAGA_TRY(saga_shards_manifest_read(&m, dir));
    SAGA_TRY(saga_shards_for_ranks(&m, dir, ranks));
    SAGA_CHECK(m.feature_cols > 0 && m.n_classes > 0 && m.split_n[0] > 0, SAGA_ERR_INVALID_ARG,
               "%s: its shards hold no features, labels or training rows (write them of a data "
               "set: saga partition --data DIR --shards R)",
               dir);
    SAGA_TRY(saga_shard_open(&s, dir, rank, NULL));
    const int32_t nl = (int32_t)s->n_local, own = (int32_t)s->n_own;
    SAGA_TRY(saga_shard_graph(s, &d->graph));
    d->n_vertices = nl;
    d->n_edges = s->nnz;
    saga_features *f = &d->features;
    f->n_rows = nl;
    f->n_cols = s->feature_cols;
    if (s->features) {
        SAGA_TRY(saga_alloc_zeroed((void **)&f->dense, (size_t)nl * (size_t)f->n_cols + 1,
                                   sizeof(float), "features"));
        memcpy(f->dense, s->features, (size_t)own * (size_t)f->n_cols * sizeof(float));
    } else {
        SAGA_TRY(saga_alloc_array((void **)&f->offsets, (size_t)nl + 1, sizeof(int64_t),
                                  "feature offsets"));
        memcpy(f->offsets, s->feature_offsets, ((size_t)own + 1) * sizeof(int64_t));
        for (int32_t l = own; l < nl; l++)
            f->offsets[l + 1] = s->feature_nnz;
        f->nnz = s->feature_nnz;
        SAGA_TRY(copy_i32(&f->indices, s->feature_indices, f->nnz, "feature columns"));
        SAGA_TRY(saga_alloc_array((void **)&f->values, f->nnz ? (size_t)f->nnz : 1, sizeof(float),
                                  "feature values"));
        if (f->nnz)
            memcpy(f->values, s->feature_values, (size_t)f->nnz * sizeof(float));
    }
    SAGA_TRY(saga_alloc_array((void **)&d->labels, (size_t)nl + 1, sizeof(int32_t), "labels"));
    memcpy(d->labels, s->labels, (size_t)own * sizeof(int32_t));
    for (int32_t l = own; l < nl; l++)
        d->labels[l] = -1;
    d->n_classes = s->n_classes;
    SAGA_TRY(copy_i32(&d->train, s->split[0], s->split_n[0], "training rows"));
    SAGA_TRY(copy_i32(&d->val, s->split[1], s->split_n[1], "validation rows"));
    SAGA_TRY(copy_i32(&d->test, s->split[2], s->split_n[2], "test rows"));
    d->n_train = s->split_n[0], d->n_val = s->split_n[1], d->n_test = s->split_n[2];
    saga_shard_release_pages(s); /* copied: what the net reads of it later is faulted in again */
    *shard = s;
    s = NULL;
fail:
    saga_shard_close(&s);
    saga_shards_manifest_free(&m);
    if (st < 0)
        saga_dataset_free(d);
    return st;
}
