/* _saga_hep.c - the HEP pipeline (apps/hep.c) from Python: build every event's graph, train the
 * Interaction Network, evaluate a checkpoint; the options and results of `saga hep`. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "hep.h"
#include "saga.h"

#include <string.h>

PyObject *saga_py_raise(saga_status st);
PyObject *saga_py_array(void *data, Py_ssize_t n, Py_ssize_t itemsize, const char *format);
saga_status saga_py_backend_open(saga_backend **be, const char *device, long long device_mem);
PyObject *saga_py_hep_build(PyObject *m, PyObject *args);
PyObject *saga_py_hep_train(PyObject *m, PyObject *args, PyObject *kw);
PyObject *saga_py_hep_eval(PyObject *m, PyObject *args);

static int set(PyObject *dict, const char *key, PyObject *v) {
    if (!v)
        return -1;
    int rc = PyDict_SetItemString(dict, key, v);
    Py_DECREF(v);
    return rc;
}

/* Moves an owned array of g into an Array (the graph no longer frees it). */
static PyObject *take(void **p, Py_ssize_t n, Py_ssize_t itemsize, const char *format) {
    void *data = *p;
    *p = NULL;
    return saga_py_array(data, n, itemsize, format);
}

static int construction(PyObject *res, const hep_data *d) {
    int64_t hits = 0, edges = 0, true_edges = 0, segments = 0;
    for (int32_t i = 0; i < d->n_events; i++) {
        hits += d->events[i].n_hits;
        edges += d->events[i].n_edges;
        true_edges += d->events[i].n_true;
        segments += d->events[i].n_segments;
    }
    return set(res, "events", PyLong_FromLong(d->n_events)) < 0 ||
                   set(res, "hits", PyLong_FromLongLong(hits)) < 0 ||
                   set(res, "edges", PyLong_FromLongLong(edges)) < 0 ||
                   set(res, "true_edges", PyLong_FromLongLong(true_edges)) < 0 ||
                   set(res, "true_segments", PyLong_FromLongLong(segments)) < 0
               ? -1
               : 0;
}

static int metrics(PyObject *res, const hep_metrics *m) {
    return set(res, "edge_efficiency", PyFloat_FromDouble(m->edge_efficiency)) < 0 ||
                   set(res, "edge_purity", PyFloat_FromDouble(m->edge_purity)) < 0 ||
                   set(res, "auc", PyFloat_FromDouble(m->auc)) < 0 ||
                   set(res, "track_efficiency", PyFloat_FromDouble(m->track_efficiency)) < 0 ||
                   set(res, "track_efficiency_cc", PyFloat_FromDouble(m->track_efficiency_cc)) <
                       0 ||
                   set(res, "tracks", PyLong_FromLongLong(m->n_tracks)) < 0 ||
                   set(res, "threshold", PyFloat_FromDouble(m->threshold)) < 0 ||
                   set(res, "eval_edges", PyLong_FromLongLong(m->n_edges)) < 0
               ? -1
               : 0;
}

static saga_status load(hep_data *d, PyObject *dir, const hep_graph_opts *go,
                        double eval_fraction) {
    saga_status st;
    Py_BEGIN_ALLOW_THREADS;
    st = hep_data_load(d, PyBytes_AS_STRING(dir), go, eval_fraction, NULL, NULL);
    Py_END_ALLOW_THREADS;
    return st;
}

/* hep_build(dir, pt_min, phi_slope_max, z0_max, max_missing, barrel_only) -> [dict per event]
 * (arrays moved, not copied) */
PyObject *saga_py_hep_build(PyObject *m, PyObject *args) {
    PyObject *dir = NULL;
    hep_graph_opts go = hep_graph_opts_defaults();
    int barrel_only = 0;
    if (!PyArg_ParseTuple(args, "O&dddip", PyUnicode_FSConverter, &dir, &go.pt_min,
                          &go.phi_slope_max, &go.z0_max, &go.max_missing, &barrel_only))
        return NULL;
    go.barrel_only = barrel_only;
    hep_data d;
    memset(&d, 0, sizeof d);
    saga_status st = load(&d, dir, &go, 0.0);
    Py_DECREF(dir);
    if (st < 0)
        return saga_py_raise(st);
    PyObject *list = PyList_New(0);
    for (int32_t i = 0; list && i < d.n_events; i++) {
        hep_event_graph *g = &d.events[i];
        PyObject *e = PyDict_New();
        if (!e || PyList_Append(list, e) < 0 ||
            set(e, "event_id", PyLong_FromLongLong(g->event_id)) < 0 ||
            set(e, "hit_features",
                take((void **)&g->hit_feat, (Py_ssize_t)g->n_hits * HEP_HIT_FEATURES, 4, "f")) <
                0 ||
            set(e, "hit_particle", take((void **)&g->hit_particle, g->n_hits, 8, "q")) < 0 ||
            set(e, "hit_pt", take((void **)&g->hit_pt, g->n_hits, 4, "f")) < 0 ||
            set(e, "hit_endcap", take((void **)&g->hit_region, g->n_hits, 1, "B")) < 0 ||
            set(e, "src", take((void **)&g->src, (Py_ssize_t)g->n_edges, 4, "i")) < 0 ||
            set(e, "dst", take((void **)&g->dst, (Py_ssize_t)g->n_edges, 4, "i")) < 0 ||
            set(e, "edge_features",
                take((void **)&g->edge_feat, (Py_ssize_t)g->n_edges * HEP_EDGE_FEATURES, 4, "f")) <
                0 ||
            set(e, "truth", take((void **)&g->truth, (Py_ssize_t)g->n_edges, 1, "B")) < 0 ||
            set(e, "true_edges", PyLong_FromLongLong(g->n_true)) < 0 ||
            set(e, "true_segments", PyLong_FromLongLong(g->n_segments)) < 0) {
            Py_XDECREF(e);
            Py_CLEAR(list);
            break;
        }
        Py_DECREF(e);
    }
    hep_data_free(&d);
    return list;
}

/* hep_train(dir, ...) -> dict: construction, run and metrics, the keys of `saga hep train --json`
 */
PyObject *saga_py_hep_train(PyObject *m, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {
        "data",          "epochs",      "lr",          "hidden",      "iterations",    "sampler",
        "batch_events",  "edge_budget", "hit_weight",  "pos_weight",  "eval_fraction", "threshold",
        "seed",          "checkpoint",  "resume",      "accumulate",  "device",        "pt_min",
        "phi_slope_max", "z0_max",      "lr_schedule", "max_missing", "barrel_only",   "device_mem",
        "stream",        NULL};
    PyObject *dir = NULL, *ckpt = Py_None, *resume = Py_None;
    hep_train_opts to = hep_train_opts_defaults();
    hep_graph_opts go = hep_graph_opts_defaults();
    int sampler = (int)to.sampler, batch_events = to.batch_events, accumulate = to.accumulate,
        lr_schedule = (int)to.lr_schedule;
    long long edge_budget = to.edge_budget;
    unsigned long long seed = to.seed;
    double eval_fraction = 0.2;
    const char *device = "auto";
    int barrel_only = 0, stream = 0;
    unsigned long long device_mem = 0;
    if (!PyArg_ParseTupleAndKeywords(
            args, kw, "O&|ifiiiiLdfddKOOisdddiipKp", kwlist, PyUnicode_FSConverter, &dir,
            &to.epochs, &to.lr, &to.hidden, &to.iterations, &sampler, &batch_events, &edge_budget,
            &to.hit_weight, &to.pos_weight, &eval_fraction, &to.threshold, &seed, &ckpt, &resume,
            &accumulate, &device, &go.pt_min, &go.phi_slope_max, &go.z0_max, &lr_schedule,
            &go.max_missing, &barrel_only, &device_mem, &stream))
        return NULL;
    go.barrel_only = barrel_only;
    to.stream = stream;
    if (lr_schedule < 0 || lr_schedule >= HEP_LR_SCHEDULE_COUNT) {
        Py_DECREF(dir);
        PyErr_Format(PyExc_ValueError, "hep_train: lr_schedule %d is not a schedule", lr_schedule);
        return NULL;
    }
    to.lr_schedule = (hep_lr_schedule)lr_schedule;
    to.sampler = (hep_sampler)sampler;
    to.batch_events = batch_events;
    to.edge_budget = edge_budget;
    to.seed = seed;
    to.accumulate = accumulate;
    to.checkpoint = ckpt == Py_None ? NULL : PyUnicode_AsUTF8(ckpt);
    to.resume = resume == Py_None ? NULL : PyUnicode_AsUTF8(resume);
    if ((ckpt != Py_None && !to.checkpoint) || (resume != Py_None && !to.resume)) {
        Py_DECREF(dir);
        return NULL;
    }
    hep_data d;
    memset(&d, 0, sizeof d);
    saga_status st = load(&d, dir, &go, eval_fraction);
    Py_DECREF(dir);
    if (st < 0)
        return saga_py_raise(st);
    saga_backend *be = NULL;
    hep_run r;
    memset(&r, 0, sizeof r);
    Py_BEGIN_ALLOW_THREADS;
    st = saga_py_backend_open(&be, device, (long long)device_mem);
    if (st == SAGA_OK)
        st = hep_train(&r, be, &d, &to, NULL, NULL);
    saga_backend_free_all(&be);
    Py_END_ALLOW_THREADS;
    PyObject *res = NULL;
    if (st < 0) {
        saga_py_raise(st);
    } else if ((res = PyDict_New()) != NULL &&
               (construction(res, &d) < 0 || metrics(res, &r.metrics) < 0 ||
                set(res, "train_events", PyLong_FromLong(d.n_train)) < 0 ||
                set(res, "epochs", PyLong_FromLong(r.epochs)) < 0 ||
                set(res, "start_epoch", PyLong_FromLong(r.start_epoch)) < 0 ||
                set(res, "loss", PyFloat_FromDouble(r.loss)) < 0 ||
                set(res, "parameters", PyLong_FromLongLong(r.n_params)) < 0 ||
                set(res, "batches", PyLong_FromLong(r.n_batches)) < 0 ||
                set(res, "epoch_seconds", PyFloat_FromDouble(r.epoch_seconds)) < 0 ||
                set(res, "peak_bytes", PyLong_FromSize_t(r.peak_bytes)) < 0 ||
                set(res, "streamed_batches", PyLong_FromLong(r.streamed)) < 0 ||
                set(res, "chunk_rows", PyLong_FromLongLong(r.chunk)) < 0 ||
                set(res, "sampler", PyUnicode_FromString(hep_sampler_name(to.sampler))) < 0 ||
                set(res, "lr_schedule",
                    PyUnicode_FromString(hep_lr_schedule_name(to.lr_schedule))) < 0)) {
        Py_CLEAR(res);
    }
    hep_data_free(&d);
    return res;
}

/* hep_eval(dir, checkpoint, hidden, iterations, threshold, device, pt_min, phi_slope_max,
 *          z0_max, max_missing, barrel_only) -> dict: construction and metrics of every event, as
 * `saga hep eval` */
PyObject *saga_py_hep_eval(PyObject *m, PyObject *args) {
    PyObject *dir = NULL, *ckpt = NULL;
    int hidden, iterations, barrel_only = 0;
    double threshold;
    hep_graph_opts go = hep_graph_opts_defaults();
    const char *device;
    if (!PyArg_ParseTuple(args, "O&O&iidsdddip", PyUnicode_FSConverter, &dir, PyUnicode_FSConverter,
                          &ckpt, &hidden, &iterations, &threshold, &device, &go.pt_min,
                          &go.phi_slope_max, &go.z0_max, &go.max_missing, &barrel_only)) {
        Py_XDECREF(dir);
        return NULL;
    }
    go.barrel_only = barrel_only;
    hep_data d;
    memset(&d, 0, sizeof d);
    saga_status st = load(&d, dir, &go, 0.0);
    Py_DECREF(dir);
    if (st < 0) {
        Py_DECREF(ckpt);
        return saga_py_raise(st);
    }
    saga_backend *be = NULL;
    hep_net net;
    memset(&net, 0, sizeof net);
    hep_metrics mt;
    memset(&mt, 0, sizeof mt);
    const char *path = PyBytes_AS_STRING(ckpt);
    Py_BEGIN_ALLOW_THREADS;
    int64_t step = 0;
    uint64_t counter = 0;
    if ((st = saga_py_backend_open(&be, device, 0)) == SAGA_OK &&
        (st = hep_net_new(&net, be, hidden, iterations, 1)) == SAGA_OK &&
        (st = saga_checkpoint_load(path, net.m, NULL, &step, &counter)) == SAGA_OK)
        st = hep_evaluate(&mt, be, &net, d.events, 0, d.n_events, threshold, 1.0);
    hep_net_free(&net);
    saga_backend_free_all(&be);
    Py_END_ALLOW_THREADS;
    Py_DECREF(ckpt);
    PyObject *res = NULL;
    if (st < 0)
        saga_py_raise(st);
    else if ((res = PyDict_New()) != NULL && (construction(res, &d) < 0 || metrics(res, &mt) < 0))
        Py_CLEAR(res);
    hep_data_free(&d);
    return res;
}
