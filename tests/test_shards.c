/* test_shards.c - shard directories written and read back: every shard's rows, in-edges,
 * halo, send lists, out-degrees, features, labels and split against the whole graph by plain
 * loops; a sparse product computed shard by shard with rows received through the send lists,
 * to the bit; damaged, truncated, mixed and stale directories refused; the streaming
 * partitioner taking over from METIS; failing allocations. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "saga_dataset.h"
#include "saga_log.h"
#include "saga_shards.h"
#include "test_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* A directed multigraph with weights, self-loops and a vertex without edges: n vertices. */
static saga_graph *skewed_graph(int32_t n, uint64_t seed) {
    int64_t m = (int64_t)n * 6;
    int32_t *src = malloc((size_t)m * sizeof *src), *dst = malloc((size_t)m * sizeof *dst);
    float *w = malloc((size_t)m * sizeof *w);
    int64_t *ids = malloc((size_t)n * sizeof *ids);
    assert_non_null(src);
    assert_non_null(dst);
    assert_non_null(w);
    assert_non_null(ids);
    uint64_t s = seed;
    for (int64_t e = 0; e < m; e++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        int32_t a = (int32_t)((s >> 33) % (uint64_t)(n - 1)); /* vertex n-1 has no edges */
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        /* mostly local edges, some far: parts with a halo */
        int32_t b = (s >> 60) < 12 ? (int32_t)((a + (int32_t)((s >> 33) % 7)) % (n - 1))
                                   : (int32_t)((s >> 33) % (uint64_t)(n - 1));
        src[e] = a;
        dst[e] = b;
        w[e] = (float)((s >> 40) % 1000) / 250.0f + 0.5f;
    }
    for (int32_t v = 0; v < n; v++)
        ids[v] = 1000 + 3 * (int64_t)v;
    saga_graph *g = NULL;
    saga_graph_opts o = saga_graph_opts_defaults();
    o.duplicates = SAGA_DUPLICATES_KEEP;
    assert_int_equal(saga_graph_from_edges(&g, n, m, src, dst, w, ids, &o), SAGA_OK);
    free(src);
    free(dst);
    free(w);
    free(ids);
    return g;
}

/* Sparse features: row v has v % 5 entries. */
static void sparse_features(saga_features *f, int32_t n, int64_t cols) {
    memset(f, 0, sizeof *f);
    f->n_rows = n;
    f->n_cols = cols;
    f->offsets = malloc(((size_t)n + 1) * sizeof *f->offsets);
    assert_non_null(f->offsets);
    f->offsets[0] = 0;
    for (int32_t v = 0; v < n; v++)
        f->offsets[v + 1] = f->offsets[v] + v % 5;
    f->nnz = f->offsets[n];
    f->indices = malloc((size_t)(f->nnz ? f->nnz : 1) * sizeof *f->indices);
    f->values = malloc((size_t)(f->nnz ? f->nnz : 1) * sizeof *f->values);
    assert_non_null(f->indices);
    assert_non_null(f->values);
    for (int32_t v = 0; v < n; v++)
        for (int64_t e = f->offsets[v]; e < f->offsets[v + 1]; e++) {
            f->indices[e] = (int32_t)((v * 7 + (e - f->offsets[v]) * 3) % cols);
            f->values[e] = (float)v + 0.25f * (float)(e - f->offsets[v]);
        }
}

static void sparse_free(saga_features *f) {
    free(f->offsets);
    free(f->indices);
    free(f->values);
    memset(f, 0, sizeof *f);
}

/* Checks every shard of dir against the input by plain loops, and returns nothing; also runs a
 * weighted sum over in-edges shard by shard (halo rows taken from their owners through the send
 * lists) against the same sum over the whole graph, bit for bit. */
static void check_against(const char *dir, const saga_shards_input *in, int32_t R) {
    const saga_graph *g = in->graph;
    int32_t n = saga_graph_n_vertices(g);
    saga_csr gin = saga_graph_in(g), gout = saga_graph_out(g);
    saga_shards_manifest m;
    assert_int_equal(saga_shards_manifest_read(&m, dir), SAGA_OK);
    assert_int_equal(m.n_shards, R);
    assert_int_equal(m.n_vertices, n);
    assert_int_equal(m.n_edges, saga_graph_n_edges(g));
    saga_shard **s = calloc((size_t)R, sizeof *s);
    int32_t *owner = malloc((size_t)n * sizeof *owner), *local = malloc((size_t)n * sizeof *local);
    int32_t *vert_of_global = malloc((size_t)n * sizeof *vert_of_global);
    assert_non_null(s);
    assert_non_null(owner);
    assert_non_null(local);
    assert_non_null(vert_of_global);
    for (int32_t v = 0; v < n; v++)
        owner[v] = -1;
    /* original id -> vertex: ids are 1000 + 3v in the skewed graph, v elsewhere */
    for (int32_t r = 0; r < R; r++) {
        assert_int_equal(saga_shard_open(&s[r], dir, r, NULL), SAGA_OK);
        assert_int_equal(s[r]->n_own, m.row0[r + 1] - m.row0[r]);
        for (int64_t i = 0; i < s[r]->n_own; i++) {
            int32_t v = -1;
            assert_int_equal(saga_graph_find_vertex(g, s[r]->orig_id[i], &v), SAGA_OK);
            assert_int_equal(s[r]->vertex[i], v);
            assert_int_equal(owner[v], -1); /* every vertex in exactly one shard */
            owner[v] = r;
            local[v] = (int32_t)i;
            vert_of_global[s[r]->global_id[i]] = v;
        }
    }
    for (int32_t v = 0; v < n; v++)
        assert_true(owner[v] >= 0);
    int64_t cut = 0;
    for (int32_t u = 0; u < n; u++)
        for (int64_t e = gout.offsets[u]; e < gout.offsets[u + 1]; e++)
            cut += owner[u] != owner[gout.indices[e]];
    if (m.parts_per_shard == 1) /* the partition's cut counts its parts: with one a shard, ours */
        assert_int_equal(m.edge_cut, cut);

    double *x = malloc((size_t)n * sizeof *x);
    assert_non_null(x);
    for (int32_t v = 0; v < n; v++)
        x[v] = 1.0 / (double)(v + 3);
    for (int32_t r = 0; r < R; r++) {
        const saga_shard *h = s[r];
        /* halo rows: exactly the other shards' in-neighbours of own rows, grouped by owner */
        char *want = calloc((size_t)n, 1);
        assert_non_null(want);
        int64_t n_want = 0;
        for (int64_t i = 0; i < h->n_own; i++) {
            int32_t v = vert_of_global[h->global_id[i]];
            bool boundary = false;
            for (int64_t e = gin.offsets[v]; e < gin.offsets[v + 1]; e++) {
                int32_t u = gin.indices[e];
                if (owner[u] != r) {
                    boundary = true;
                    n_want += !want[u];
                    want[u] = 1;
                }
            }
            assert_int_equal(boundary, i >= h->n_interior);
            /* in-edges: the graph's order, weights beside them */
            assert_int_equal(h->in_offsets[i + 1] - h->in_offsets[i],
                             gin.offsets[v + 1] - gin.offsets[v]);
            for (int64_t k = 0; k < gin.offsets[v + 1] - gin.offsets[v]; k++) {
                int32_t l = h->in_indices[h->in_offsets[i] + k];
                int32_t u = gin.indices[gin.offsets[v] + k];
                assert_int_equal(h->orig_id[l], saga_graph_orig_id(g, u));
                if (gin.weights)
                    assert_true(h->in_weights[h->in_offsets[i] + k] ==
                                gin.weights[gin.offsets[v] + k]);
            }
            assert_int_equal(h->out_degree[i], gout.offsets[v + 1] - gout.offsets[v]);
            if (in->labels)
                assert_int_equal(h->labels[i], in->labels[v]);
            const saga_features *f = in->features;
            if (f && f->dense)
                assert_memory_equal(h->features + i * f->n_cols, f->dense + (int64_t)v * f->n_cols,
                                    (size_t)f->n_cols * sizeof(float));
            if (f && !f->dense) {
                int64_t a = f->offsets[v], k = f->offsets[v + 1] - a;
                assert_int_equal(h->feature_offsets[i + 1] - h->feature_offsets[i], k);
                if (k) {
                    assert_memory_equal(h->feature_indices + h->feature_offsets[i], f->indices + a,
                                        (size_t)k * sizeof(int32_t));
                    assert_memory_equal(h->feature_values + h->feature_offsets[i], f->values + a,
                                        (size_t)k * sizeof(float));
                }
            }
        }
        assert_int_equal(h->n_halo, n_want);
        for (int64_t j = 0; j < h->n_halo; j++) {
            int32_t u = -1;
            assert_int_equal(saga_graph_find_vertex(g, h->orig_id[h->n_own + j], &u), SAGA_OK);
            assert_true(want[u]);
            assert_int_equal(h->global_id[h->n_own + j], s[owner[u]]->global_id[local[u]]);
            assert_int_equal(h->vertex[h->n_own + j], u);
            assert_int_equal(h->out_degree[h->n_own + j], gout.offsets[u + 1] - gout.offsets[u]);
            assert_true(j >= h->halo_offsets[owner[u]] && j < h->halo_offsets[owner[u] + 1]);
        }
        free(want);
        /* split: the own members of each list, in the list's order */
        for (int k = 0; k < 3; k++) {
            int64_t c = 0;
            for (int64_t i = 0; in->split[k] && i < in->split_n[k]; i++) {
                int32_t v = in->split[k][i];
                if (owner[v] != r)
                    continue;
                assert_true(c < h->split_n[k]);
                assert_int_equal(h->split[k][c++], local[v]);
            }
            assert_int_equal(c, h->split_n[k]);
        }
        /* the sum over in-edges with the halo received through the peers' send lists */
        double *xl = malloc((size_t)(h->n_local ? h->n_local : 1) * sizeof *xl);
        assert_non_null(xl);
        for (int64_t i = 0; i < h->n_own; i++)
            xl[i] = x[vert_of_global[h->global_id[i]]];
        for (int32_t q = 0; q < R; q++) {
            if (q == r)
                continue;
            const saga_shard *p = s[q];
            int64_t cnt = p->send_offsets[r + 1] - p->send_offsets[r];
            assert_int_equal(cnt, h->halo_offsets[q + 1] - h->halo_offsets[q]);
            for (int64_t j = 0; j < cnt; j++) {
                int32_t row = p->send_rows[p->send_offsets[r] + j];
                xl[h->n_own + h->halo_offsets[q] + j] = x[vert_of_global[p->global_id[row]]];
            }
        }
        for (int64_t i = 0; i < h->n_own; i++) {
            int32_t v = vert_of_global[h->global_id[i]];
            double a = 0, b = 0;
            for (int64_t e = gin.offsets[v]; e < gin.offsets[v + 1]; e++)
                a += x[gin.indices[e]] * (gin.weights ? gin.weights[e] : 1.0f);
            for (int64_t e = h->in_offsets[i]; e < h->in_offsets[i + 1]; e++)
                b += xl[h->in_indices[e]] * (h->in_weights ? h->in_weights[e] : 1.0f);
            assert_true(a == b); /* the same terms in the same order */
        }
        free(xl);
    }
    int32_t missing = -1;
    assert_int_equal(saga_shards_check(dir, &missing), SAGA_OK);
    for (int32_t r = 0; r < R; r++)
        saga_shard_close(&s[r]);
    free(s);
    free(owner);
    free(local);
    free(vert_of_global);
    free(x);
    saga_shards_manifest_free(&m);
}

static void test_shards_skewed_graph(void **state) {
    (void)state;
    saga_graph *g = skewed_graph(900, 7);
    saga_features f;
    sparse_features(&f, 900, 40);
    int32_t *labels = malloc(900 * sizeof *labels), train[50], test[30];
    assert_non_null(labels);
    for (int32_t v = 0; v < 900; v++)
        labels[v] = v % 11 == 0 ? -1 : v % 4;
    for (int i = 0; i < 50; i++)
        train[i] = (i * 37) % 900;
    for (int i = 0; i < 30; i++)
        test[i] = 899 - i * 29;
    saga_shards_input in = {.graph = g,
                            .features = &f,
                            .labels = labels,
                            .n_classes = 4,
                            .split = {train, NULL, test},
                            .split_n = {50, 0, 30},
                            .build = "generated for the test"};
    static const saga_partition_method methods[] = {SAGA_PARTITION_METIS, SAGA_PARTITION_RANDOM,
                                                    SAGA_PARTITION_FENNEL,
                                                    SAGA_PARTITION_CONTIGUOUS};
    for (int mi = 0; mi < 4; mi++)
        for (int32_t R = 1; R <= 5; R += 2)
            for (int32_t pps = 1; pps <= 2; pps++) {
                saga_shards_opts o = saga_shards_opts_defaults();
                o.shards = R;
                o.parts_per_shard = pps;
                o.partition.method = methods[mi];
                saga_shards_info info;
                const char *dir = saga_test_tmp("skewed.shards");
                assert_int_equal(saga_shards_write(dir, &in, &o, &info), SAGA_OK);
                assert_int_equal(info.method, methods[mi]);
                check_against(dir, &in, R);
            }
    free(labels);
    sparse_free(&f);
    saga_graph_free(&g);
}

/* Cora as saga gcn reads it: dense and sparse features, labels and the Planetoid split. */
static void test_shards_cora(void **state) {
    (void)state;
    char dir_in[4096];
    snprintf(dir_in, sizeof dir_in, "%s", saga_test_data("cora/labels.txt"));
    *strrchr(dir_in, '/') = '\0';
    saga_dataset d;
    assert_int_equal(saga_dataset_load(&d, dir_in, NULL), SAGA_OK);
    saga_shards_input in = {.graph = d.graph,
                            .features = &d.features,
                            .labels = d.labels,
                            .n_classes = d.n_classes,
                            .split = {d.train, d.val, d.test},
                            .split_n = {d.n_train, d.n_val, d.n_test}};
    for (int32_t R = 2; R <= 4; R += 2) {
        saga_shards_opts o = saga_shards_opts_defaults();
        o.shards = R;
        const char *dir = saga_test_tmp("cora.shards");
        assert_int_equal(saga_shards_write(dir, &in, &o, NULL), SAGA_OK);
        check_against(dir, &in, R);
    }
    assert_int_equal(saga_features_densify(&d.features), SAGA_OK);
    saga_shards_opts o = saga_shards_opts_defaults();
    o.shards = 3;
    const char *dir = saga_test_tmp("cora-dense.shards");
    assert_int_equal(saga_shards_write(dir, &in, &o, NULL), SAGA_OK);
    check_against(dir, &in, 3);
    saga_dataset_free(&d);
}

static long file_size(const char *path) {
    struct stat sb;
    assert_int_equal(stat(path, &sb), 0);
    return (long)sb.st_size;
}

static void flip_byte(const char *path, long at) {
    FILE *f = fopen(path, "r+b");
    assert_non_null(f);
    assert_int_equal(fseek(f, at, SEEK_SET), 0);
    int c = fgetc(f);
    assert_true(c != EOF);
    assert_int_equal(fseek(f, at, SEEK_SET), 0);
    fputc(c ^ 0x10, f);
    fclose(f);
}

static void copy_file(const char *from, const char *to) {
    FILE *a = fopen(from, "rb"), *b = fopen(to, "wb");
    assert_non_null(a);
    assert_non_null(b);
    char buf[65536];
    size_t k;
    while ((k = fread(buf, 1, sizeof buf, a)) > 0)
        assert_int_equal(fwrite(buf, 1, k, b), k);
    fclose(a);
    fclose(b);
}

/* Damage of every kind is refused, naming what is wrong; an unfinished directory too. */
static void test_shards_refuse_damage(void **state) {
    (void)state;
    saga_graph *g = skewed_graph(3000, 11);
    /* a source file, so that the manifest records it */
    const char *src = saga_test_write_str("source.txt", "0 1\n1 2\n");
    const char *const sources[] = {src};
    saga_shards_input in = {.graph = g, .sources = sources, .n_sources = 1};
    saga_shards_opts o = saga_shards_opts_defaults();
    o.shards = 3;
    char dir[4096], other[4096], path[4200], path2[4200];
    snprintf(dir, sizeof dir, "%s", saga_test_tmp("damage.shards"));
    snprintf(other, sizeof other, "%s", saga_test_tmp("other.shards"));
    assert_int_equal(saga_shards_write(dir, &in, &o, NULL), SAGA_OK);
    o.partition.seed = 2;
    assert_int_equal(saga_shards_write(other, &in, &o, NULL), SAGA_OK);
    saga_shard *s = NULL;
    snprintf(path, sizeof path, "%s/shard-1.bin", dir);
    snprintf(path2, sizeof path2, "%s/shard-1.bin.keep", dir);
    copy_file(path, path2);

    /* a flipped byte in the in-edge sources: that section's chunk */
    assert_int_equal(saga_shard_open(&s, dir, 1, NULL), SAGA_OK);
    long at = (long)((const char *)s->in_indices - (const char *)s->map) + 40;
    saga_shard_close(&s);
    flip_byte(path, at);
    assert_int_equal(saga_shard_open(&s, dir, 1, NULL), SAGA_ERR_CORRUPT);
    saga_test_assert_error_contains("shard-1.bin", "in-edge sources", "chunk 0", "checksum", NULL);
    assert_null(s);
    assert_int_equal(saga_shards_check(dir, NULL), SAGA_ERR_CORRUPT);
    /* without the checksums the structure is still checked; this byte made an id out of range
     * or left it in range, so either is allowed, but never a crash */
    saga_shard_open_opts no = saga_shard_open_opts_defaults();
    no.verify = false;
    saga_status st = saga_shard_open(&s, dir, 1, &no);
    assert_true(st == SAGA_OK || st == SAGA_ERR_CORRUPT);
    saga_shard_close(&s);
    copy_file(path2, path);
    assert_int_equal(saga_shard_open(&s, dir, 1, NULL), SAGA_OK);
    saga_shard_close(&s);

    /* the header */
    flip_byte(path, 24);
    assert_int_equal(saga_shard_open(&s, dir, 1, NULL), SAGA_ERR_CORRUPT);
    saga_test_assert_error_contains("shard-1.bin", "header checksum", NULL);
    copy_file(path2, path);

    /* truncated */
    assert_int_equal(truncate(path, file_size(path) - 4096), 0);
    assert_int_equal(saga_shard_open(&s, dir, 1, NULL), SAGA_ERR_CORRUPT);
    saga_test_assert_error_contains("shard-1.bin", NULL);
    copy_file(path2, path);

    /* a shard of another run in its place */
    char from[4200];
    snprintf(from, sizeof from, "%s/shard-1.bin", other);
    copy_file(from, path);
    assert_int_equal(saga_shard_open(&s, dir, 1, NULL), SAGA_ERR_CORRUPT);
    saga_test_assert_error_contains("shard-1.bin", "mixes shards of different runs", NULL);
    copy_file(path2, path);
    assert_int_equal(saga_shards_check(dir, NULL), SAGA_OK);

    /* shard out of range */
    assert_int_equal(saga_shard_open(&s, dir, 3, NULL), SAGA_ERR_INVALID_ARG);
    saga_test_assert_error_contains("shard 3", "3 shards", NULL);

    /* the source changed: stale by size at open, by checksum in the full check */
    FILE *f = fopen(src, "w");
    assert_non_null(f);
    fputs("0 1\n1 3\n", f); /* the same size */
    fclose(f);
    assert_int_equal(saga_shard_open(&s, dir, 0, NULL), SAGA_OK);
    saga_shard_close(&s);
    assert_int_equal(saga_shards_check(dir, NULL), SAGA_ERR_CORRUPT);
    saga_test_assert_error_contains("stale", "source.txt", "CRC-32", NULL);
    f = fopen(src, "w");
    assert_non_null(f);
    fputs("0 1\n1 2\n2 3\n", f);
    fclose(f);
    assert_int_equal(saga_shard_open(&s, dir, 0, NULL), SAGA_ERR_CORRUPT);
    saga_test_assert_error_contains("stale", "source.txt", "bytes", NULL);
    /* a source that is gone is counted, not refused */
    remove(src);
    int32_t missing = 0;
    assert_int_equal(saga_shards_check(dir, &missing), SAGA_OK);
    assert_int_equal(missing, 1);

    /* the manifest: a damaged line, then none (an unfinished directory) */
    snprintf(path, sizeof path, "%s/manifest.txt", dir);
    copy_file(path, path2);
    f = fopen(path, "a");
    assert_non_null(f);
    fputs("bogus 1\n", f);
    fclose(f);
    assert_int_equal(saga_shard_open(&s, dir, 0, NULL), SAGA_ERR_PARSE);
    saga_test_assert_error_contains("manifest.txt", "after \"end\"", NULL);
    remove(path);
    assert_int_equal(saga_shard_open(&s, dir, 0, NULL), SAGA_ERR_IO);
    saga_test_assert_error_contains("manifest.txt", "did not finish", NULL);
    copy_file(path2, path);
    assert_int_equal(saga_shards_check(dir, NULL), SAGA_OK);
    saga_graph_free(&g);
}

/* A limit below the graph's adjacency sends METIS's work to Fennel, with a warning; the shards
 * are as valid, and say which method cut them. */
static void test_shards_streaming_partitioner_fallback(void **state) {
    (void)state;
    saga_graph *g = skewed_graph(2000, 5);
    saga_shards_input in = {.graph = g};
    saga_shards_opts o = saga_shards_opts_defaults();
    o.shards = 4;
    o.partition.metis_max_entries = 1000;
    saga_shards_info info;
    const char *dir = saga_test_tmp("fallback.shards");
    assert_int_equal(saga_shards_write(dir, &in, &o, &info), SAGA_OK);
    assert_int_equal(info.method, SAGA_PARTITION_FENNEL);
    check_against(dir, &in, 4);
    saga_shards_manifest m;
    assert_int_equal(saga_shards_manifest_read(&m, dir), SAGA_OK);
    assert_int_equal(m.method, SAGA_PARTITION_FENNEL);
    saga_shards_manifest_free(&m);
    /* Fennel cuts fewer edges than random parts on a graph of mostly local edges */
    saga_partition *pf = NULL, *pr = NULL;
    saga_partition_opts po = saga_partition_opts_defaults();
    po.method = SAGA_PARTITION_FENNEL;
    assert_int_equal(saga_partition_graph(&pf, g, 8, &po), SAGA_OK);
    po.method = SAGA_PARTITION_RANDOM;
    assert_int_equal(saga_partition_graph(&pr, g, 8, &po), SAGA_OK);
    assert_true(pf->edge_cut * 10 < pr->edge_cut * 9);
    assert_true(pf->balance <= 1.1 + 8.0 / 2000);
    saga_partition_free(&pf);
    saga_partition_free(&pr);
    saga_graph_free(&g);
}

/* The resident kB of the mapping that holds addr (its Rss in /proc/self/smaps), -1 if not found. */
static long mapping_rss_kb(const void *addr) {
    FILE *f = fopen("/proc/self/smaps", "r");
    assert_non_null(f);
    char line[512];
    bool in = false;
    long rss = -1;
    const uintptr_t a = (uintptr_t)addr;
    while (fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' ')) {
            in = a >= lo && a < hi;
            continue;
        }
        long kb;
        if (in && sscanf(line, "Rss: %ld kB", &kb) == 1) {
            rss = kb;
            break;
        }
    }
    fclose(f);
    return rss;
}

/* Sums every array of s a net reads (in-edges, out-degrees, ids, the halo layout). */
static uint64_t shard_sum(const saga_shard *s) {
    uint64_t h = 1469598103934665603ull;
    for (int64_t v = 0; v <= s->n_own; v++)
        h = (h ^ (uint64_t)s->in_offsets[v]) * 1099511628211ull;
    for (int64_t e = 0; e < s->nnz; e++)
        h = (h ^ (uint64_t)s->in_indices[e]) * 1099511628211ull;
    for (int64_t v = 0; v < s->n_local; v++)
        h = (h ^ (uint64_t)s->out_degree[v] ^ ((uint64_t)s->vertex[v] << 32)) * 1099511628211ull;
    for (int64_t j = 0; j < s->send_offsets[s->n_shards]; j++)
        h = (h ^ (uint64_t)s->send_rows[j]) * 1099511628211ull;
    return h;
}

/* saga_shard_release_pages: the mapping's pages stop counting as the process's (its Rss drops to
 * none) and read the same again, faulted in from the file. */
static void test_shards_release_pages(void **state) {
    (void)state;
    saga_graph *g = skewed_graph(20000, 5);
    saga_shards_input in = {.graph = g};
    saga_shards_opts o = saga_shards_opts_defaults();
    o.shards = 2;
    o.partition.method = SAGA_PARTITION_CONTIGUOUS;
    const char *dir = saga_test_tmp("release.shards");
    assert_int_equal(saga_shards_write(dir, &in, &o, NULL), SAGA_OK);
    saga_shard *s = NULL;
    assert_int_equal(saga_shard_open(&s, dir, 1, NULL), SAGA_OK);
    const uint64_t sum = shard_sum(s); /* every page the sums read is resident now */
    const long before = mapping_rss_kb(s->map);
    assert_true(before >= 64); /* 20,000 x 6 edges: the in-edges alone are 240 kB */
    saga_shard_release_pages(s);
    assert_int_equal(mapping_rss_kb(s->map), 0);
    assert_true(shard_sum(s) == sum);
    assert_true(mapping_rss_kb(s->map) >= 64);
    saga_shard_release_pages(NULL);
    saga_shard_close(&s);
    saga_graph_free(&g);
}

static void test_shards_invalid_arguments(void **state) {
    (void)state;
    saga_graph *g = skewed_graph(50, 3);
    saga_shards_input in = {.graph = g};
    saga_shards_opts o = saga_shards_opts_defaults();
    const char *dir = saga_test_tmp("bad.shards");
    o.shards = 0;
    assert_int_equal(saga_shards_write(dir, &in, &o, NULL), SAGA_ERR_INVALID_ARG);
    o.shards = 51;
    assert_int_equal(saga_shards_write(dir, &in, &o, NULL), SAGA_ERR_INVALID_ARG);
    saga_test_assert_error_contains("51 shards", "50 vertices", NULL);
    o.shards = 20;
    o.parts_per_shard = 3;
    assert_int_equal(saga_shards_write(dir, &in, &o, NULL), SAGA_ERR_INVALID_ARG);
    o = saga_shards_opts_defaults();
    int32_t labels[50] = {0};
    labels[7] = 9;
    in.labels = labels;
    in.n_classes = 4;
    assert_int_equal(saga_shards_write(dir, &in, &o, NULL), SAGA_ERR_INVALID_ARG);
    saga_test_assert_error_contains("vertex 7", "label 9", NULL);
    in.labels = NULL;
    int32_t split[1] = {50};
    in.split[0] = split;
    in.split_n[0] = 1;
    assert_int_equal(saga_shards_write(dir, &in, &o, NULL), SAGA_ERR_INVALID_ARG);
    in.split[0] = NULL;
    assert_int_equal(saga_shards_write(NULL, &in, &o, NULL), SAGA_ERR_INVALID_ARG);
    saga_test_assert_error_contains("directory", NULL);
    assert_int_equal(saga_shards_write("/proc/nope/shards", &in, &o, NULL), SAGA_ERR_IO);
    saga_graph_free(&g);
}

static void test_shards_failing_allocations(void **state) {
    (void)state;
    saga_graph *g = skewed_graph(300, 9);
    saga_features f;
    sparse_features(&f, 300, 12);
    int32_t labels[300], train[10];
    for (int v = 0; v < 300; v++)
        labels[v] = v % 3;
    for (int i = 0; i < 10; i++)
        train[i] = i * 29;
    saga_shards_input in = {.graph = g,
                            .features = &f,
                            .labels = labels,
                            .n_classes = 3,
                            .split = {train},
                            .split_n = {10}};
    saga_shards_opts o = saga_shards_opts_defaults();
    o.shards = 3;
    const char *dir = saga_test_tmp("alloc.shards");
    bool wrote = false, opened = false;
    for (long k = 1; k < 400 && !(wrote && opened); k++) {
        if (!wrote) {
            saga_test_fail_alloc_after(k);
            saga_status st = saga_shards_write(dir, &in, &o, NULL);
            saga_test_fail_alloc_after(0);
            if (st != SAGA_OK) {
                assert_int_equal(st, SAGA_ERR_OUT_OF_MEMORY);
                continue;
            }
            wrote = true;
            check_against(dir, &in, 3);
            k = 0;
            continue;
        }
        saga_shard *s = NULL;
        saga_test_fail_alloc_after(k);
        saga_status st = saga_shards_check(dir, NULL);
        if (st == SAGA_OK)
            st = saga_shard_open(&s, dir, 2, NULL);
        saga_test_fail_alloc_after(0);
        if (st == SAGA_OK) {
            opened = true;
            assert_non_null(s);
        } else {
            assert_int_equal(st, SAGA_ERR_OUT_OF_MEMORY);
            assert_null(s);
        }
        saga_shard_close(&s);
    }
    assert_true(wrote && opened);
    sparse_free(&f);
    saga_graph_free(&g);
}

int main(void) {
    saga_log_set_level(SAGA_LOG_ERROR);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shards_skewed_graph),
        cmocka_unit_test(test_shards_cora),
        cmocka_unit_test(test_shards_refuse_damage),
        cmocka_unit_test(test_shards_streaming_partitioner_fallback),
        cmocka_unit_test(test_shards_release_pages),
        cmocka_unit_test(test_shards_invalid_arguments),
        cmocka_unit_test(test_shards_failing_allocations),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
