/* test_optim.c - SGD (plain, momentum, Nesterov, weight decay), Adam and AdamW against the
 * torch.optim update rules written out in double, over three steps; a model's parameters copied
 * out and back. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "test_util.h"
#include "test_xf.h"

#include "saga_nn.h"

#include <float.h>
#include <math.h>
#include <string.h>

enum { N = 6, STEPS = 3 };

static const float P0[N] = {0.5f, -1.25f, 2.0f, 0.0f, -0.3f, 1.7f};
static const float G[STEPS][N] = {{0.1f, -0.2f, 0.3f, 0.4f, -0.5f, 0.05f},
                                  {-0.3f, 0.1f, 0.0f, 0.2f, 0.6f, -0.1f},
                                  {0.2f, 0.2f, -0.4f, -0.1f, 0.1f, 0.3f}};

/* ---- the reference and its error bound -------------------------------------------------------
 *
 * The f32 update is a short fixed formula per element, not a sum in some order, so its bound comes
 * from following that formula (ops/cpu/nn_dense.c, saga_cpu_sgd_f32 and saga_cpu_adam_f32,
 * operation for operation) in xf (test_xf.h). */

/* STEPS of torch.optim.SGD, and of Adam / AdamW, over G from p (xf_sgd_step, xf_adam_step). */
static void ref_sgd(xf *p, double lr, double mom, double wd, bool nesterov) {
    xf buf[N];
    for (int i = 0; i < N; i++)
        buf[i] = xf_in(0);
    for (int t = 0; t < STEPS; t++)
        for (int i = 0; i < N; i++)
            xf_sgd_step(&p[i], &buf[i], G[t][i], lr, mom, wd, nesterov);
}

static void ref_adam(xf *p, double lr, double b1, double b2, double eps, double wd, bool w) {
    xf m[N], v[N];
    for (int i = 0; i < N; i++)
        m[i] = v[i] = xf_in(0);
    for (int t = 1; t <= STEPS; t++)
        for (int i = 0; i < N; i++)
            xf_adam_step(&p[i], &m[i], &v[i], G[t - 1][i], t, lr, b1, b2, eps, wd, w);
}

/* got within the bound r carries of its value */
static void expect_within(const char *what, int k, const float *got, const xf *r) {
    for (int i = 0; i < N; i++)
        if (!(fabs(got[i] - r[i].v) <= r[i].e))
            fail_msg("%s %d entry %d: got %.9g, expected %.9g (bound %.3g)", what, k, i,
                     (double)got[i], r[i].v, r[i].e);
}

/* A CPU backend and an empty model on it. */
static saga_model *model_on_cpu(saga_backend **be) {
    *be = NULL;
    assert_int_equal(saga_backend_cpu_new(be, NULL), SAGA_OK);
    saga_model *m = NULL;
    assert_int_equal(saga_model_new(&m, *be), SAGA_OK);
    return m;
}

/* Runs the optimizer on two parameters (the second with weight decay wd2) and compares both. */
static void run(const saga_optim_opts *o, float wd2,
                void (*ref)(xf *, const saga_optim_opts *, double wd)) {
    saga_backend *be = NULL;
    saga_model *m = model_on_cpu(&be);
    saga_tensor *p[2] = {saga_model_param(m, "a", 2, 3, SAGA_INIT_ZEROS, 0),
                         saga_model_param(m, "b", 3, 2, SAGA_INIT_ZEROS, 0)};
    saga_optim *opt = NULL;
    assert_int_equal(saga_optim_new(&opt, m, o), SAGA_OK);
    assert_int_equal(saga_optim_set_weight_decay(opt, p[1], wd2), SAGA_OK);
    for (int k = 0; k < 2; k++)
        memcpy(saga_tensor_data(p[k]), P0, sizeof P0);
    for (int t = 0; t < STEPS; t++) {
        for (int k = 0; k < 2; k++)
            memcpy(saga_tensor_data(saga_grad(p[k])), G[t], sizeof G[t]);
        assert_int_equal(saga_optim_step(opt), SAGA_OK);
        for (int k = 0; k < 2; k++) { /* the step zeroes the gradients */
            const float *g = saga_tensor_cdata(saga_grad(p[k]));
            for (int i = 0; i < N; i++)
                assert_true(g[i] == 0.0f);
        }
    }
    assert_int_equal(saga_optim_steps(opt), STEPS);
    for (int k = 0; k < 2; k++) {
        xf r[N];
        for (int i = 0; i < N; i++)
            r[i] = xf_in(P0[i]);
        ref(r, o, k == 0 ? o->weight_decay : wd2);
        expect_within("parameter", k, saga_tensor_cdata(p[k]), r);
    }
    saga_optim_free(&opt);
    saga_optim_free(&opt);
    saga_model_free(&m);
    saga_backend_free_all(&be);
}

static void sgd_ref(xf *p, const saga_optim_opts *o, double wd) {
    ref_sgd(p, o->lr, o->momentum, wd, o->nesterov);
}
static void adam_ref(xf *p, const saga_optim_opts *o, double wd) {
    ref_adam(p, o->lr, o->beta1, o->beta2, o->eps, wd, o->kind == SAGA_OPTIM_ADAMW);
}

static void test_optim_sgd(void **state) {
    (void)state;
    saga_optim_opts o = saga_optim_opts_defaults(SAGA_OPTIM_SGD);
    o.lr = 0.1f;
    run(&o, 0.0f, sgd_ref); /* plain */
    o.weight_decay = 0.05f;
    run(&o, 0.3f, sgd_ref); /* weight decay, per parameter */
    o.momentum = 0.9f;
    run(&o, 0.0f, sgd_ref); /* momentum */
    o.nesterov = true;
    run(&o, 0.2f, sgd_ref); /* Nesterov */
}

static void test_optim_adam(void **state) {
    (void)state;
    saga_optim_opts o = saga_optim_opts_defaults(SAGA_OPTIM_ADAM);
    assert_true(o.lr == 0.01f && o.beta1 == 0.9f && o.beta2 == 0.999f && o.weight_decay == 0.0f);
    run(&o, 0.0f, adam_ref);
    o.weight_decay = 5e-4f;
    o.beta2 = 0.99f;
    run(&o, 0.1f, adam_ref);
}

static void test_optim_adamw(void **state) {
    (void)state;
    saga_optim_opts o = saga_optim_opts_defaults(SAGA_OPTIM_ADAMW);
    assert_true(o.weight_decay == 0.01f);
    o.lr = 0.05f;
    run(&o, 0.0f, adam_ref);
    run(&o, 0.5f, adam_ref);
}

/* A schedule: the learning rate changed before each step, Adam's moments kept across changes
 * (torch's param_group["lr"] assignment). */
static void test_optim_set_lr(void **state) {
    (void)state;
    static const float LR[STEPS] = {0.1f, 0.05f, 0.0125f};
    saga_backend *be = NULL;
    saga_model *m = model_on_cpu(&be);
    saga_tensor *p = saga_model_param(m, "a", 2, 3, SAGA_INIT_ZEROS, 0);
    assert_non_null(p);
    memcpy(saga_tensor_data(p), P0, sizeof P0);
    saga_optim_opts oo = saga_optim_opts_defaults(SAGA_OPTIM_ADAM);
    saga_optim *o = NULL;
    assert_int_equal(saga_optim_new(&o, m, &oo), SAGA_OK);
    assert_true(saga_optim_lr(o) == 0.01f);
    /* the reference with the f32 hyperparameters the kernel reads (0.9f, not 0.9) */
    xf r[N], mo[N], v[N];
    for (int i = 0; i < N; i++) {
        r[i] = xf_in(P0[i]);
        mo[i] = v[i] = xf_in(0);
    }
    for (int t = 0; t < STEPS; t++) {
        assert_int_equal(saga_optim_set_lr(o, LR[t]), SAGA_OK);
        assert_true(saga_optim_lr(o) == LR[t]);
        memcpy(saga_tensor_data(saga_grad(p)), G[t], sizeof G[t]);
        assert_int_equal(saga_optim_step(o), SAGA_OK);
        for (int i = 0; i < N; i++)
            xf_adam_step(&r[i], &mo[i], &v[i], G[t][i], t + 1, LR[t], oo.beta1, oo.beta2, oo.eps, 0,
                         false);
    }
    expect_within("parameter", 0, saga_tensor_cdata(p), r);
    assert_int_equal(saga_optim_set_lr(o, -1.0f), SAGA_ERR_INVALID_ARG);
    assert_int_equal(saga_optim_set_lr(o, NAN), SAGA_ERR_INVALID_ARG);
    assert_int_equal(saga_optim_set_lr(NULL, 0.1f), SAGA_ERR_INVALID_ARG);
    assert_true(saga_optim_lr(o) == LR[STEPS - 1]);
    saga_optim_free(&o);
    saga_model_free(&m);
    saga_backend_free_all(&be);
}

/* The parameters copied to host memory in the model's order, changed by steps, and put back:
 * the copy's values, to the bit (early stopping's snapshot of the best epoch). */
static void test_model_copy_params(void **state) {
    (void)state;
    saga_backend *be = NULL;
    saga_model *m = model_on_cpu(&be);
    saga_tensor *p[2] = {saga_model_param(m, "a", 2, 3, SAGA_INIT_GLOROT, 3),
                         saga_model_param(m, "b", 3, 2, SAGA_INIT_GLOROT, 4)};
    assert_non_null(p[0]);
    assert_non_null(p[1]);
    assert_int_equal(saga_model_n_scalars(m), 2 * N);
    float snap[2 * N], now[2 * N];
    assert_int_equal(saga_model_copy_params(m, snap, false), SAGA_OK);
    assert_int_equal(saga_backend_synchronize(be), SAGA_OK);
    for (int k = 0; k < 2; k++) /* the model's order: a, then b */
        assert_memory_equal(snap + k * N, saga_tensor_cdata(p[k]), sizeof(float) * N);
    saga_optim_opts oo = saga_optim_opts_defaults(SAGA_OPTIM_ADAM);
    saga_optim *o = NULL;
    assert_int_equal(saga_optim_new(&o, m, &oo), SAGA_OK);
    for (int t = 0; t < STEPS; t++) {
        for (int k = 0; k < 2; k++)
            memcpy(saga_tensor_data(saga_grad(p[k])), G[t], sizeof G[t]);
        assert_int_equal(saga_optim_step(o), SAGA_OK);
    }
    assert_int_equal(saga_model_copy_params(m, now, false), SAGA_OK);
    assert_int_equal(saga_backend_synchronize(be), SAGA_OK);
    assert_true(memcmp(now, snap, sizeof snap) != 0); /* the steps moved them */
    assert_int_equal(saga_model_copy_params(m, snap, true), SAGA_OK);
    assert_int_equal(saga_backend_synchronize(be), SAGA_OK);
    for (int k = 0; k < 2; k++)
        assert_memory_equal(saga_tensor_cdata(p[k]), snap + k * N, sizeof(float) * N);
    assert_int_equal(saga_model_copy_params(NULL, snap, false), SAGA_ERR_INVALID_ARG);
    assert_int_equal(saga_model_copy_params(m, NULL, true), SAGA_ERR_INVALID_ARG);
    saga_optim_free(&o);
    saga_model_free(&m);
    saga_backend_free_all(&be);
}

static void test_optim_errors(void **state) {
    (void)state;
    saga_backend *be = NULL;
    saga_model *m = model_on_cpu(&be);
    saga_tensor *p = saga_model_param(m, "p", 2, 2, SAGA_INIT_GLOROT, 1);
    assert_non_null(p);
    assert_null(saga_model_param(m, "p", 1, 1, SAGA_INIT_ZEROS, 0));
    saga_test_assert_error_contains("p", "exists", NULL);
    saga_optim *o = NULL;
    saga_optim_opts oo = saga_optim_opts_defaults(SAGA_OPTIM_SGD);
    oo.nesterov = true;
    assert_int_equal(saga_optim_new(&o, m, &oo), SAGA_ERR_INVALID_ARG);
    oo = saga_optim_opts_defaults(SAGA_OPTIM_ADAM);
    assert_int_equal(saga_optim_new(&o, m, &oo), SAGA_OK);
    saga_tensor *other = NULL;
    assert_int_equal(saga_tensor_new(&other, be, SAGA_F32, 2, 2), SAGA_OK);
    assert_int_equal(saga_optim_set_weight_decay(o, other, 0.1f), SAGA_ERR_INVALID_ARG);
    /* allocation failures while creating leak nothing */
    saga_optim *o2 = NULL;
    for (long k = 1;; k++) {
        saga_test_fail_alloc_after(k);
        saga_status st = saga_optim_new(&o2, m, &oo);
        saga_test_fail_alloc_after(0);
        if (st == SAGA_OK)
            break;
        assert_int_equal(st, SAGA_ERR_OUT_OF_MEMORY);
        assert_null(o2);
    }
    saga_optim_free(&o2);
    saga_tensor_free(&other);
    saga_optim_free(&o);
    saga_model_free(&m);
    saga_backend_free_all(&be);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_optim_sgd),    cmocka_unit_test(test_optim_adam),
        cmocka_unit_test(test_optim_adamw),  cmocka_unit_test(test_optim_set_lr),
        cmocka_unit_test(test_optim_errors), cmocka_unit_test(test_model_copy_params),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
