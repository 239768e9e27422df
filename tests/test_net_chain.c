/* test_net_chain.c - the chains an in-memory net runs (engine/exec/net_chain.h): each stage's
 * block lists the rows the demand pass gives it, a program stage's halo is the previous stage's
 * rows (by position) or every vertex, stage 0's input rows are gathered; a chain too large for
 * its room computes every row from the first stage up, a vertex stage only with the stage before
 * it; the training chain follows the loss rows. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "test_util.h"

#include "net_chain.h"
#include "saga.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { N = 400, M = 1200, F = 6, H = 4 };

static saga_tensor *rows_times_w(saga_ctx *c, const saga_vertex_in *v, void *w) {
    return saga_matmul(c, v->self, (saga_tensor *)w);
}

static saga_tensor *mean_loss(saga_ctx *c, const saga_vertex_in *v, const int32_t *ids, void *u) {
    (void)ids;
    (void)u;
    return saga_affine(c, saga_sum(c, v->self), 1.0f / (float)N, 0.0f);
}

static const saga_program SUM = {
    .scatter = SAGA_SCATTER_SRC, .edge_weight = SAGA_WEIGHT_SYMNORM, .gather = SAGA_GATHER_SUM};

typedef struct fixture {
    saga_backend *be;
    saga_ctx *c;
    saga_model *m;
    saga_graph *g;
    saga_net *net;
    float *x;
} fixture;

/* A random graph and a net of the given stage kinds ('v' vertex, 'p' program), trained once so
 * that it is prepared, with loss rows every 37th vertex. */
static void fixture_new(fixture *f, const char *kinds) {
    memset(f, 0, sizeof *f);
    uint64_t r = 0x243F6A8885A308D3ull;
    int32_t *src = test_malloc(M * sizeof *src), *dst = test_malloc(M * sizeof *dst);
    for (int k = 0; k < M; k++) {
        saga_test_u64(&r);
        src[k] = (int32_t)(r % N);
        dst[k] = (int32_t)((r >> 32) % N);
    }
    assert_int_equal(saga_graph_from_edges(&f->g, N, M, src, dst, NULL, NULL, NULL), SAGA_OK);
    test_free(src);
    test_free(dst);
    assert_int_equal(saga_backend_cpu_new(&f->be, NULL), SAGA_OK);
    assert_int_equal(saga_ctx_new(&f->c, f->be, 1), SAGA_OK);
    assert_int_equal(saga_model_new(&f->m, f->be), SAGA_OK);
    saga_net_opts no = saga_net_opts_defaults();
    no.self_loops = SAGA_DGRAPH_SELF_LOOPS_ADD;
    no.exec = SAGA_EXEC_MEMORY;
    assert_int_equal(saga_net_new(&f->net, f->c, f->g, &no), SAGA_OK);
    int64_t cols = F;
    for (int s = 0; kinds[s]; s++) {
        if (kinds[s] == 'v') {
            char name[16];
            snprintf(name, sizeof name, "W%d", s);
            saga_tensor *w = saga_model_param(f->m, name, cols, H, SAGA_INIT_GLOROT, 5 + s);
            assert_non_null(w);
            assert_int_equal(saga_net_add_vertex(f->net, rows_times_w, w, H), SAGA_OK);
            cols = H;
        } else {
            assert_int_equal(saga_net_add_program(f->net, &SUM, NULL, cols), SAGA_OK);
        }
    }
    f->x = test_malloc((size_t)N * F * sizeof *f->x);
    for (int i = 0; i < N * F; i++)
        f->x[i] = (float)(i % 11) / 11.0f;
    assert_int_equal(saga_net_set_input(f->net, f->x, F), SAGA_OK);
    assert_int_equal(saga_net_set_loss(f->net, mean_loss, NULL), SAGA_OK);
    int32_t rows[N / 37 + 1];
    int32_t R = 0;
    for (int32_t v = 0; v < N; v += 37)
        rows[R++] = v;
    assert_int_equal(saga_net_set_loss_rows(f->net, rows, R), SAGA_OK);
    double loss = 0;
    assert_int_equal(saga_net_train_step(f->net, &loss), SAGA_OK);
}

static void fixture_free(fixture *f) {
    saga_net_free(&f->net);
    saga_model_free(&f->m);
    saga_ctx_free(&f->c);
    saga_backend_free_all(&f->be);
    saga_graph_free(&f->g);
    test_free(f->x);
}

/* The chain's blocks against its demand: stage s >= whole_below lists the demanded rows (or none
 * when every row), a program stage's halo is the previous stage's rows or every vertex, stage 0's
 * input rows are the demand's; below whole_below no block. */
static void check_chain(const saga_net *n, const net_chain *ch) {
    const int S = n->n_stages, w = ch->whole_below;
    for (int s = 0; s < S; s++) {
        const nblock *b = ch->blk[s];
        const int32_t *rows = s >= w ? ch->d.rows[s] : NULL;
        if (!rows) {
            assert_null(b);
            continue;
        }
        assert_non_null(b);
        assert_int_equal(b->v1 - b->v0, ch->d.n_rows[s]);
        const int32_t *prev =
            s == 0 ? (w == 0 ? ch->d.in_rows : NULL) : (s - 1 >= w ? ch->d.rows[s - 1] : NULL);
        int32_t n_prev = s == 0 ? ch->d.n_in : ch->d.n_rows[s - 1];
        if (n->stages[s].kind == STAGE_PROGRAM) {
            assert_int_equal(b->n_halo, prev ? n_prev : n->n);
            for (int32_t i = 0; i < b->v1; i++) /* each row's own position in the halo */
                assert_int_equal(prev ? prev[b->self_pos[i]] : b->self_pos[i], rows[i]);
            assert_int_equal(b->e1 - b->e0, ch->d.n_edges[s]);
        } else {
            for (int32_t i = 0; i < b->v1; i++)
                assert_int_equal(b->uids[i], rows[i]);
        }
        /* a vertex stage past the first runs only on rows its predecessor computed */
        if (s > 0 && n->stages[s].kind == STAGE_VERTEX)
            assert_true(s - 1 >= w);
    }
    if (ch->in) {
        assert_int_equal(w, 0);
        assert_int_equal(ch->in->v1, ch->d.n_in);
        assert_memory_equal(ch->in->rows, ch->d.in_rows, (size_t)ch->d.n_in * sizeof(int32_t));
    }
}

static void test_net_chain_follows_demand(void **state) {
    (void)state;
    const char *models[] = {"vpvp", "pvpv", "vpvpvp", "pp", "vvpv"};
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) {
        fixture f;
        fixture_new(&f, models[i]);
        saga_net *n = f.net;
        assert_non_null(n->plan.tchain);
        check_chain(n, n->plan.tchain);
        assert_int_equal(n->plan.tchain->n_out, n->n_loss_rows);
        /* inference of a few rows, in any room: from none (every row) to all it needs */
        const int32_t want[] = {3, 50, 51, 399};
        net_chain *ch = NULL;
        assert_int_equal(net_chain_build(n, &ch, want, 4, SIZE_MAX, false, false), SAGA_OK);
        check_chain(n, ch);
        assert_int_equal(ch->whole_below, 0);
        const size_t full = ch->bytes;
        net_chain_free(n, &ch);
        int last_w = -1, between = 0;
        for (size_t room = 0; room <= full; room += full / 7 + 1) {
            assert_int_equal(net_chain_build(n, &ch, want, 4, room, false, false), SAGA_OK);
            check_chain(n, ch);
            assert_true(ch->bytes <= room || ch->whole_below == n->n_stages);
            assert_true(last_w < 0 || ch->whole_below <= last_w); /* more room, fewer widened */
            last_w = ch->whole_below;
            between += last_w > 0 && last_w < n->n_stages;
            net_chain_free(n, &ch);
            assert_null(ch);
        }
        print_message("  %s: %d of the rooms widened some stages, not all\n", models[i], between);
        if (!strcmp(models[i], "vpvpvp"))
            assert_true(between > 0);
        assert_int_equal(net_chain_build(n, &ch, want, 4, 0, false, false), SAGA_OK);
        assert_int_equal(ch->whole_below, n->n_stages);
        assert_null(ch->in);
        assert_int_equal(ch->n_out, N);
        net_chain_free(n, &ch);
        fixture_free(&f);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_net_chain_follows_demand),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
