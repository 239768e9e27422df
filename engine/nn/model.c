/* model.c - named parameters with persistent gradients, initialised reproducibly on the host. */
#include "nn_internal.h"

#include <math.h>
#include <string.h>

saga_status saga_model_new(saga_model **out, saga_backend *be) {
    saga_status st = SAGA_OK;
    saga_model *m = NULL;
    SAGA_CHECK(out && be, SAGA_ERR_INVALID_ARG, "saga_model_new: %s is NULL",
               out ? "backend" : "out");
    SAGA_TRY(saga_alloc_zeroed((void **)&m, 1, sizeof *m, "a model"));
    m->be = be;
    *out = m;
fail:
    return st;
}

void saga_model_free(saga_model **mp) {
    if (!mp || !*mp)
        return;
    saga_model *m = *mp;
    for (int i = 0; i < m->n; i++) {
        saga_tensor_free(&m->params[i]); /* and its gradient */
        saga_free(m->names[i]);
    }
    saga_free(m->params);
    saga_free(m->names);
    saga_free(m);
    *mp = NULL;
}

/* Uniform in [-bound, bound) from splitmix64, drawn on the host so that every backend gets the
 * same bits for the same seed. */
static void init_uniform(float *x, int64_t n, float bound, uint64_t seed) {
    uint64_t s = seed;
    for (int64_t i = 0; i < n; i++) {
        double u = (double)(saga_splitmix64(&s) >> 11) * 0x1.0p-53; /* [0, 1) */
        x[i] = (float)((2.0 * u - 1.0) * bound);
    }
}

saga_tensor *saga_model_param(saga_model *m, const char *name, int64_t rows, int64_t cols,
                              saga_init init, uint64_t seed) {
    saga_status st = SAGA_OK;
    float *host = NULL;
    char *dup = NULL;
    saga_tensor *p = NULL;
    SAGA_CHECK(m && name && *name, SAGA_ERR_INVALID_ARG, "saga_model_param: %s",
               m ? "name is empty" : "model is NULL");
    SAGA_CHECK(rows >= 0 && cols >= 0, SAGA_ERR_INVALID_ARG,
               "saga_model_param: %s: dimensions must be >= 0, got %lld x %lld", name,
               (long long)rows, (long long)cols);
    SAGA_CHECK((unsigned)init < SAGA_INIT_COUNT, SAGA_ERR_INVALID_ARG,
               "saga_model_param: %s: unknown init %d", name, (int)init);
    for (int i = 0; i < m->n; i++)
        SAGA_CHECK(strcmp(m->names[i], name) != 0, SAGA_ERR_INVALID_ARG,
                   "saga_model_param: a parameter named %s exists already", name);
    SAGA_CHECK(m->n < INT32_MAX - 1, SAGA_ERR_INVALID_ARG, "saga_model_param: too many parameters");
    if (m->n == m->cap) {
        int cap = m->cap ? 2 * m->cap : 16;
        SAGA_TRY(saga_realloc_array((void **)&m->params, (size_t)cap, sizeof *m->params,
                                    "parameter list"));
        SAGA_TRY(saga_realloc_array((void **)&m->names, (size_t)cap, sizeof *m->names,
                                    "parameter names"));
        m->cap = cap;
    }
    size_t len = strlen(name);
    SAGA_TRY(saga_alloc_array((void **)&dup, len + 1, 1, "parameter name"));
    memcpy(dup, name, len + 1);
    if (init == SAGA_INIT_ZEROS || rows * cols == 0) {
        SAGA_TRY(saga_tensor_new(&p, m->be, SAGA_F32, rows, cols));
    } else {
        double fan = init == SAGA_INIT_GLOROT ? (double)(rows + cols) : (double)rows;
        float bound = (float)sqrt(6.0 / fan);
        SAGA_TRY(saga_alloc_array((void **)&host, (size_t)(rows * cols), sizeof *host,
                                  "parameter initial values"));
        init_uniform(host, rows * cols, bound, seed);
        SAGA_TRY(saga_tensor_from_host(&p, m->be, SAGA_F32, rows, cols, host));
    }
    SAGA_TRY(saga_tensor_new(&p->grad, m->be, SAGA_F32, rows, cols));
    p->requires_grad = true;
    p->is_param = true;
    m->params[m->n] = p;
    m->names[m->n] = dup;
    m->n++;
    saga_free(host);
    return p;
fail:
    saga_free(host);
    saga_free(dup);
    saga_tensor_free(&p);
    return NULL;
}

int saga_model_n_params(const saga_model *m) {
    return m ? m->n : 0;
}

saga_tensor *saga_model_param_at(const saga_model *m, int i) {
    return m && i >= 0 && i < m->n ? m->params[i] : NULL;
}

const char *saga_model_param_name(const saga_model *m, int i) {
    return m && i >= 0 && i < m->n ? m->names[i] : NULL;
}

saga_tensor *saga_model_find(const saga_model *m, const char *name) {
    for (int i = 0; m && name && i < m->n; i++)
        if (strcmp(m->names[i], name) == 0)
            return m->params[i];
    return NULL;
}

int64_t saga_model_n_scalars(const saga_model *m) {
    int64_t n = 0;
    for (int i = 0; m && i < m->n; i++)
        n += m->params[i]->rows * m->params[i]->cols;
    return n;
}

/* Every parameter's values (grads false) or gradient (true), in the model's order, copied
 * between the device and host memory of saga_model_n_scalars floats, queued on the default
 * stream. */
static saga_status copy_all(saga_model *m, float *host, bool back, bool grads, const char *fn) {
    saga_status st = SAGA_OK;
    SAGA_CHECK(m && host, SAGA_ERR_INVALID_ARG, "%s: model and host memory must be given", fn);
    saga_stream *s = saga_backend_default_stream(m->be);
    for (int i = 0; i < m->n; i++) {
        saga_tensor *t = grads ? m->params[i]->grad : m->params[i];
        if (t->nbytes)
            SAGA_TRY(back ? saga_memcpy_h2d_async(s, t->data, host, t->nbytes)
                          : saga_memcpy_d2h_async(s, host, t->data, t->nbytes));
        host += t->rows * t->cols;
    }
fail:
    return st;
}

saga_status saga_model_copy_grads(saga_model *m, float *host, bool back) {
    return copy_all(m, host, back, true, "saga_model_copy_grads");
}

saga_status saga_model_copy_params(saga_model *m, float *host, bool back) {
    return copy_all(m, host, back, false, "saga_model_copy_params");
}

saga_status saga_model_zero_grad(saga_model *m) {
    saga_status st = SAGA_OK;
    SAGA_CHECK(m, SAGA_ERR_INVALID_ARG, "saga_model_zero_grad: model is NULL");
    for (int i = 0; i < m->n; i++) {
        saga_tensor *g = m->params[i]->grad;
        if (g->nbytes)
            SAGA_TRY(m->be->iface->memset_async(saga_backend_default_stream(m->be), g->data, 0,
                                                g->nbytes));
    }
fail:
    return st;
}
