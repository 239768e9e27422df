/* optim.c - SGD (momentum, Nesterov), Adam and AdamW over a model's parameters, with weight decay
 * per parameter. The updates are the backend's kernels (adam_f32, sgd_f32). */
#include "nn_internal.h"

#include <math.h>

saga_optim_opts saga_optim_opts_defaults(saga_optim_kind kind) {
    return (saga_optim_opts){.kind = kind,
                             .lr = 0.01f,
                             .weight_decay = kind == SAGA_OPTIM_ADAMW ? 0.01f : 0.0f,
                             .momentum = 0.0f,
                             .nesterov = false,
                             .beta1 = 0.9f,
                             .beta2 = 0.999f,
                             .eps = 1e-8f};
}

int saga_optim_n_state(const saga_optim_opts *o) {
    if (o->kind == SAGA_OPTIM_SGD)
        return o->momentum != 0.0f ? 1 : 0;
    return 2;
}

void saga_optim_free(saga_optim **op) {
    if (!op || !*op)
        return;
    saga_optim *o = *op;
    for (int i = 0; i < o->n; i++) {
        if (o->buf1)
            saga_tensor_free(&o->buf1[i]);
        if (o->buf2)
            saga_tensor_free(&o->buf2[i]);
    }
    saga_free(o->buf1);
    saga_free(o->buf2);
    saga_free(o->wd);
    saga_free(o);
    *op = NULL;
}

/* State buffers are zero-filled at creation: torch's lazily created buffers start at zero too
 * (SGD's first momentum step, buf = 0 * momentum + g, equals torch's buf = g). */
saga_status saga_optim_new(saga_optim **out, saga_model *m, const saga_optim_opts *oo) {
    saga_status st = SAGA_OK;
    saga_optim *o = NULL;
    SAGA_CHECK(out && m && oo, SAGA_ERR_INVALID_ARG, "saga_optim_new: an argument is NULL");
    SAGA_CHECK((unsigned)oo->kind < SAGA_OPTIM_COUNT, SAGA_ERR_INVALID_ARG,
               "saga_optim_new: unknown optimizer kind %d", (int)oo->kind);
    SAGA_CHECK(oo->lr >= 0.0f && oo->weight_decay >= 0.0f && oo->momentum >= 0.0f,
               SAGA_ERR_INVALID_ARG,
               "saga_optim_new: lr, weight_decay and momentum must be >= 0 (got %g, %g, %g)",
               (double)oo->lr, (double)oo->weight_decay, (double)oo->momentum);
    SAGA_CHECK(oo->kind == SAGA_OPTIM_SGD ||
                   (oo->beta1 >= 0.0f && oo->beta1 < 1.0f && oo->beta2 >= 0.0f &&
                    oo->beta2 < 1.0f && oo->eps >= 0.0f),
               SAGA_ERR_INVALID_ARG, "saga_optim_new: betas must be in [0, 1), eps >= 0");
    SAGA_CHECK(!oo->nesterov || oo->momentum > 0.0f, SAGA_ERR_INVALID_ARG,
               "saga_optim_new: Nesterov momentum needs momentum > 0");
    SAGA_TRY(saga_alloc_zeroed((void **)&o, 1, sizeof *o, "an optimizer"));
    o->m = m;
    o->o = *oo;
    int n_state = saga_optim_n_state(oo);
    if (m->n) {
        SAGA_TRY(saga_alloc_array((void **)&o->wd, (size_t)m->n, sizeof *o->wd, "weight decay"));
        if (n_state >= 1)
            SAGA_TRY(saga_alloc_zeroed((void **)&o->buf1, (size_t)m->n, sizeof *o->buf1,
                                       "optimizer state"));
        if (n_state >= 2)
            SAGA_TRY(saga_alloc_zeroed((void **)&o->buf2, (size_t)m->n, sizeof *o->buf2,
                                       "optimizer state"));
    }
    for (int i = 0; i < m->n; i++) {
        const saga_tensor *p = m->params[i];
        o->n = i + 1; /* so that a failure frees what was made */
        o->wd[i] = oo->weight_decay;
        if (n_state >= 1)
            SAGA_TRY(saga_tensor_new(&o->buf1[i], m->be, SAGA_F32, p->rows, p->cols));
        if (n_state >= 2)
            SAGA_TRY(saga_tensor_new(&o->buf2[i], m->be, SAGA_F32, p->rows, p->cols));
    }
    o->n = m->n;
    *out = o;
    return SAGA_OK;
fail:
    saga_optim_free(&o);
    return st;
}

saga_status saga_optim_set_weight_decay(saga_optim *o, const saga_tensor *param, float wd) {
    saga_status st = SAGA_OK;
    SAGA_CHECK(o && param, SAGA_ERR_INVALID_ARG, "saga_optim_set_weight_decay: %s is NULL",
               o ? "param" : "optimizer");
    SAGA_CHECK(wd >= 0.0f, SAGA_ERR_INVALID_ARG,
               "saga_optim_set_weight_decay: weight decay must be >= 0, got %g", (double)wd);
    for (int i = 0; i < o->n; i++) {
        if (o->m->params[i] == param) {
            o->wd[i] = wd;
            return SAGA_OK;
        }
    }
    SAGA_CHECK(false, SAGA_ERR_INVALID_ARG,
               "saga_optim_set_weight_decay: the tensor is not a parameter of the optimizer's "
               "model");
fail:
    return st;
}

saga_status saga_optim_set_lr(saga_optim *o, float lr) {
    saga_status st = SAGA_OK;
    SAGA_CHECK(o, SAGA_ERR_INVALID_ARG, "saga_optim_set_lr: optimizer is NULL");
    SAGA_CHECK(isfinite(lr) && lr >= 0.0f, SAGA_ERR_INVALID_ARG,
               "saga_optim_set_lr: lr must be finite and >= 0, got %g", (double)lr);
    o->o.lr = lr;
fail:
    return st;
}

float saga_optim_lr(const saga_optim *o) {
    return o ? o->o.lr : NAN;
}

saga_status saga_optim_step(saga_optim *o) {
    saga_status st = SAGA_OK;
    SAGA_CHECK(o, SAGA_ERR_INVALID_ARG, "saga_optim_step: optimizer is NULL");
    saga_backend *be = o->m->be;
    const saga_kernels *k = be->kernels;
    saga_stream *s = saga_backend_default_stream(be);
    bool adam = o->o.kind != SAGA_OPTIM_SGD;
    SAGA_CHECK(adam ? k->adam_f32 != NULL : k->sgd_f32 != NULL, SAGA_ERR_UNSUPPORTED,
               "saga_optim_step: backend %s has no %s kernel", be->name,
               adam ? "adam_f32" : "sgd_f32");
    int64_t step = o->step + 1;
    for (int i = 0; i < o->n; i++) {
        saga_tensor *p = o->m->params[i];
        int64_t n = p->rows * p->cols;
        if (!n)
            continue;
        if (adam)
            SAGA_TRY(k->adam_f32(s, n, o->o.lr, o->o.beta1, o->o.beta2, o->o.eps, o->wd[i],
                                 o->o.kind == SAGA_OPTIM_ADAMW, step, p->data, p->grad->data,
                                 o->buf1[i]->data, o->buf2[i]->data));
        else
            SAGA_TRY(k->sgd_f32(s, n, o->o.lr, o->o.momentum, o->wd[i], o->o.nesterov, p->data,
                                p->grad->data, o->buf1 ? o->buf1[i]->data : NULL));
    }
    o->step = step;
    SAGA_TRY(saga_model_zero_grad(o->m));
fail:
    return st;
}

int64_t saga_optim_steps(const saga_optim *o) {
    return o ? o->step : 0;
}
