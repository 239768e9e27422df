/* test_checkpoint.c - checkpoints: round trip, a resumed run equal bit for bit to an uninterrupted
 * one (with dropout), damaged files refused with nothing changed, allocation failures. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "test_util.h"

#include "saga_nn.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { NV = 12, NF = 5, NH = 6, NC = 3, STEPS = 8 };

typedef struct run {
    saga_backend *be;
    saga_model *m;
    saga_optim *o;
    saga_ctx *c;
    saga_tensor *x, *labels;
} run;

static void run_new(run *r, saga_backend *be, uint64_t init_seed, int64_t hidden) {
    memset(r, 0, sizeof *r);
    r->be = be;
    assert_int_equal(saga_model_new(&r->m, be), SAGA_OK);
    assert_non_null(saga_model_param(r->m, "W1", NF, hidden, SAGA_INIT_GLOROT, init_seed));
    assert_non_null(saga_model_param(r->m, "b1", 1, hidden, SAGA_INIT_ZEROS, 0));
    assert_non_null(saga_model_param(r->m, "W2", hidden, NC, SAGA_INIT_KAIMING, init_seed + 1));
    saga_optim_opts oo = saga_optim_opts_defaults(SAGA_OPTIM_ADAM);
    oo.weight_decay = 1e-3f;
    assert_int_equal(saga_optim_new(&r->o, r->m, &oo), SAGA_OK);
    assert_int_equal(saga_ctx_new(&r->c, be, 77), SAGA_OK);
    float x[NV * NF];
    int32_t lab[NV];
    uint64_t s = 5;
    for (int i = 0; i < NV * NF; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        x[i] = (float)((double)(s >> 11) * 0x1.0p-53 * 2 - 1);
    }
    for (int i = 0; i < NV; i++)
        lab[i] = (i * 7) % NC;
    assert_int_equal(saga_tensor_from_host(&r->x, be, SAGA_F32, NV, NF, x), SAGA_OK);
    assert_int_equal(saga_tensor_from_host(&r->labels, be, SAGA_I32, NV, 1, lab), SAGA_OK);
}

static void run_free(run *r) {
    saga_tensor_free(&r->x);
    saga_tensor_free(&r->labels);
    saga_ctx_free(&r->c);
    saga_optim_free(&r->o);
    saga_model_free(&r->m);
}

static void run_steps(run *r, int n) {
    saga_ctx *c = r->c;
    for (int i = 0; i < n; i++) {
        saga_ctx_train(c, true);
        saga_tensor *W1 = saga_model_param_at(r->m, 0), *b1 = saga_model_param_at(r->m, 1);
        saga_tensor *W2 = saga_model_param_at(r->m, 2);
        saga_tensor *h = saga_relu(c, saga_add_bias(c, saga_matmul(c, r->x, W1), b1));
        h = saga_dropout(c, h, 0.5f);
        saga_tensor *loss =
            saga_nll_loss(c, saga_log_softmax(c, saga_matmul(c, h, W2)), r->labels, NULL);
        assert_int_equal(saga_backward(c, loss), SAGA_OK);
        assert_int_equal(saga_optim_step(r->o), SAGA_OK);
        saga_ctx_clear(c);
    }
}

/* All parameter bytes, concatenated (caller frees). */
static float *snapshot(const saga_model *m, size_t *len) {
    size_t n = (size_t)saga_model_n_scalars(m), off = 0;
    float *v = calloc(n, sizeof *v);
    for (int i = 0; i < saga_model_n_params(m); i++) {
        saga_tensor *p = saga_model_param_at(m, i);
        assert_int_equal(saga_tensor_to_host(p, v + off), SAGA_OK);
        off += saga_tensor_nbytes(p) / sizeof *v;
    }
    *len = n * sizeof *v;
    return v;
}

static void test_checkpoint_resume_is_bitwise(void **state) {
    (void)state;
    saga_backend *be = NULL;
    assert_int_equal(saga_backend_cpu_new(&be, NULL), SAGA_OK);
    run a, b, b2;
    run_new(&a, be, 10, NH);
    run_steps(&a, STEPS);
    size_t la = 0, lb = 0;
    float *pa = snapshot(a.m, &la);

    run_new(&b, be, 10, NH);
    run_steps(&b, STEPS / 2);
    const char *path = saga_test_tmp("resume.ckpt");
    assert_int_equal(saga_checkpoint_save(path, b.m, b.o, STEPS / 2, saga_ctx_rng_counter(b.c)),
                     SAGA_OK);
    /* a fresh run, initialised differently, picks up from the file */
    run_new(&b2, be, 999, NH);
    int64_t user_step = -1;
    uint64_t rng = 0;
    assert_int_equal(saga_checkpoint_load(path, b2.m, b2.o, &user_step, &rng), SAGA_OK);
    assert_int_equal(user_step, STEPS / 2);
    assert_int_equal(rng, saga_ctx_rng_counter(b.c));
    assert_int_equal(saga_optim_steps(b2.o), STEPS / 2);
    size_t l1 = 0, l2 = 0;
    float *p1 = snapshot(b.m, &l1), *p2 = snapshot(b2.m, &l2);
    assert_memory_equal(p1, p2, l1); /* round trip */
    saga_ctx_set_rng_counter(b2.c, rng);
    run_steps(&b2, STEPS - STEPS / 2);
    float *pb = snapshot(b2.m, &lb);
    assert_int_equal(la, lb);
    assert_memory_equal(pa, pb, la);
    /* without restoring the counter the masks differ, and so do the parameters */
    run c;
    run_new(&c, be, 10, NH);
    assert_int_equal(saga_checkpoint_load(path, c.m, c.o, NULL, NULL), SAGA_OK);
    run_steps(&c, STEPS - STEPS / 2);
    size_t lc = 0;
    float *pc = snapshot(c.m, &lc);
    assert_true(memcmp(pa, pc, la) != 0);
    free(pa);
    free(pb);
    free(pc);
    free(p1);
    free(p2);
    run_free(&a);
    run_free(&b);
    run_free(&b2);
    run_free(&c);
    saga_backend_free_all(&be);
}

static unsigned char *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    *len = (size_t)ftell(f);
    rewind(f);
    unsigned char *p = malloc(*len);
    assert_int_equal(fread(p, 1, *len, f), *len);
    fclose(f);
    return p;
}

/* A load of path must fail with SAGA_ERR_PARSE naming the file and leave r untouched. */
static void expect_refused(run *r, const char *path, const char *needle) {
    size_t l0 = 0, l1 = 0;
    float *before = snapshot(r->m, &l0);
    int64_t steps = saga_optim_steps(r->o), us = 123;
    uint64_t rng = 456;
    assert_int_equal(saga_checkpoint_load(path, r->m, r->o, &us, &rng), SAGA_ERR_PARSE);
    saga_test_assert_error_contains(path, needle, NULL);
    float *after = snapshot(r->m, &l1);
    assert_memory_equal(before, after, l0);
    assert_int_equal(saga_optim_steps(r->o), steps);
    assert_int_equal(us, 123);
    assert_int_equal(rng, 456);
    free(before);
    free(after);
}

static void test_checkpoint_damaged_files(void **state) {
    (void)state;
    saga_backend *be = NULL;
    assert_int_equal(saga_backend_cpu_new(&be, NULL), SAGA_OK);
    run r, other;
    run_new(&r, be, 1, NH);
    run_steps(&r, 2);
    const char *path = saga_test_tmp("good.ckpt");
    assert_int_equal(saga_checkpoint_save(path, r.m, r.o, 2, 9), SAGA_OK);
    size_t len = 0;
    unsigned char *img = slurp(path, &len);

    run_new(&other, be, 3, NH);
    run_steps(&other, 1);
    for (size_t at = 0; at < len; at += len / 7 + 1) { /* a flipped byte anywhere */
        img[at] ^= 0x40;
        expect_refused(&other, saga_test_write("flip.ckpt", img, len), "");
        img[at] ^= 0x40;
    }
    expect_refused(&other, saga_test_write("trunc.ckpt", img, len / 2), "");
    expect_refused(&other, saga_test_write("short.ckpt", img, 10), "");
    expect_refused(&other, saga_test_write("empty.ckpt", img, 0), "");
    memcpy(img, "NOTACKPT", 8);
    expect_refused(&other, saga_test_write("magic.ckpt", img, len), "magic");
    assert_int_equal(
        saga_checkpoint_load(saga_test_tmp("missing.ckpt"), other.m, other.o, NULL, NULL),
        SAGA_ERR_IO);

    /* a model whose hidden layer has another width */
    run wide;
    run_new(&wide, be, 1, NH + 1);
    expect_refused(&wide, path, "W1");
    saga_test_assert_error_contains("5 x 6", "5 x 7", NULL);
    /* an optimizer of another kind */
    saga_optim *sgd = NULL;
    saga_optim_opts so = saga_optim_opts_defaults(SAGA_OPTIM_SGD);
    assert_int_equal(saga_optim_new(&sgd, other.m, &so), SAGA_OK);
    assert_int_equal(saga_checkpoint_load(path, other.m, sgd, NULL, NULL), SAGA_ERR_PARSE);
    saga_test_assert_error_contains(path, "optimizer", NULL);
    saga_optim_free(&sgd);
    /* parameters only: loads into a model without optimizer */
    assert_int_equal(saga_checkpoint_load(path, other.m, NULL, NULL, NULL), SAGA_OK);
    free(img);
    run_free(&r);
    run_free(&other);
    run_free(&wide);
    saga_backend_free_all(&be);
}

static void test_checkpoint_alloc_failures(void **state) {
    (void)state;
    saga_backend *be = NULL;
    assert_int_equal(saga_backend_cpu_new(&be, NULL), SAGA_OK);
    run r;
    run_new(&r, be, 1, NH);
    run_steps(&r, 1);
    const char *path = saga_test_tmp("alloc.ckpt");
    assert_int_equal(saga_checkpoint_save(path, r.m, r.o, 1, 2), SAGA_OK);
    for (long k = 1;; k++) {
        saga_test_fail_alloc_after(k);
        saga_status st = saga_checkpoint_save(path, r.m, r.o, 1, 2);
        saga_test_fail_alloc_after(0);
        if (st == SAGA_OK)
            break;
        assert_int_equal(st, SAGA_ERR_OUT_OF_MEMORY);
    }
    for (long k = 1;; k++) {
        saga_test_fail_alloc_after(k);
        saga_status st = saga_checkpoint_load(path, r.m, r.o, NULL, NULL);
        saga_test_fail_alloc_after(0);
        if (st == SAGA_OK)
            break;
        assert_int_equal(st, SAGA_ERR_OUT_OF_MEMORY);
    }
    /* creating the model, its parameters, the optimizer and a context */
    for (long k = 1;; k++) {
        saga_model *m = NULL;
        saga_optim *o = NULL;
        saga_ctx *c = NULL;
        saga_test_fail_alloc_after(k);
        bool ok = saga_model_new(&m, be) == SAGA_OK &&
                  saga_model_param(m, "a", 4, 4, SAGA_INIT_GLOROT, 1) &&
                  saga_model_param(m, "b", 1, 4, SAGA_INIT_ZEROS, 0);
        saga_optim_opts oo = saga_optim_opts_defaults(SAGA_OPTIM_ADAMW);
        ok = ok && saga_optim_new(&o, m, &oo) == SAGA_OK && saga_ctx_new(&c, be, 1) == SAGA_OK;
        if (ok) { /* and a training step's allocations */
            saga_ctx_train(c, true);
            saga_tensor *l = saga_sumsq(c, saga_tanh(c, saga_model_param_at(m, 0)));
            ok = saga_backward(c, l) == SAGA_OK && saga_optim_step(o) == SAGA_OK;
        }
        saga_test_fail_alloc_after(0);
        saga_ctx_free(&c);
        saga_optim_free(&o);
        saga_model_free(&m);
        if (ok)
            break;
    }
    run_free(&r);
    saga_backend_free_all(&be);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_checkpoint_resume_is_bitwise),
        cmocka_unit_test(test_checkpoint_damaged_files),
        cmocka_unit_test(test_checkpoint_alloc_failures),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
