/* _saga.c - the CPython extension under the `saga` package: a thin layer over the public C API
 * (libsaga) and the bundled apps' algorithms (saga_apps), nothing computed twice.
 *
 * Arrays cross in both directions through the buffer protocol, without NumPy's C API (the module
 * builds without NumPy's headers; saga/__init__.py wraps every buffer with numpy.asarray):
 *  - out: an Array object exposes memory saga allocated (a graph's CSR, a result's scores) as a
 *    1-D buffer without a copy; it keeps its owner (the Graph, a partition) alive, or frees the
 *    memory itself (saga_free) when it owns it.
 *  - in: C-contiguous buffers of the item size asked for (the Python layer converts first).
 * Every saga_status < 0 raises saga.Error (a subclass per status) with saga_last_error()'s
 * message, which names the file and line of a parse error. Long calls release the GIL.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "cc.h"
#include "gcn.h"
#include "saga.h"

#include <stdbool.h>
#include <string.h>

/* ---- errors -------------------------------------------------------------------------------- */

static PyObject *saga_error_base;
static PyObject *saga_error_by_status[-SAGA_ERR_COUNT_];

static const char *const error_names[-SAGA_ERR_COUNT_] = {
    NULL,
    "InvalidArgError",
    "FileIOError",
    "ParseError",
    "OutOfMemoryError",
    "DeviceError",
    "UnsupportedError",
    "CorruptError",
    "NotConvergedError",
    "BudgetError",
    "InternalError",
    "CommError",
};

/* Raises the exception of status st with saga's last error message; returns NULL. */
static PyObject *raise_status(saga_status st) {
    PyObject *cls = saga_error_base;
    if (st < 0 && st > SAGA_ERR_COUNT_ && saga_error_by_status[-st])
        cls = saga_error_by_status[-st];
    const char *msg = saga_last_error();
    PyObject *exc = PyObject_CallFunction(cls, "s", msg && *msg ? msg : saga_status_name(st));
    if (exc) {
        PyObject *name = PyUnicode_FromString(saga_status_name(st));
        if (name) {
            PyObject_SetAttrString(exc, "status", name);
            Py_DECREF(name);
        }
        PyErr_SetObject(cls, exc);
        Py_DECREF(exc);
    }
    saga_error_clear();
    return NULL;
}

/* ---- Array: a 1-D buffer over memory saga allocated ---------------------------------------- */

typedef struct {
    PyObject_HEAD PyObject
        *owner; /* keeps data alive when not owned (a Graph, a partition capsule) */
    void *data;
    Py_ssize_t n;
    Py_ssize_t itemsize;
    const char *format; /* struct-module code: q, i, f, d */
    bool owned;         /* data is saga_malloc'd and freed with the Array */
    Py_ssize_t exports;
} ArrayObject;

static PyTypeObject ArrayType;

static void array_dealloc(ArrayObject *a) {
    if (a->owned)
        saga_free(a->data);
    Py_XDECREF(a->owner);
    Py_TYPE(a)->tp_free((PyObject *)a);
}

static int array_getbuffer(ArrayObject *a, Py_buffer *view, int flags) {
    static char empty[16];
    if ((flags & PyBUF_WRITABLE) && !a->owned) {
        PyErr_SetString(PyExc_BufferError, "saga: this array is a read-only view of a graph");
        view->obj = NULL;
        return -1;
    }
    view->buf = a->data ? a->data : empty;
    view->obj = (PyObject *)a;
    Py_INCREF(a);
    view->len = a->n * a->itemsize;
    view->readonly = !a->owned;
    view->itemsize = a->itemsize;
    view->format = (flags & PyBUF_FORMAT) ? (char *)a->format : NULL;
    view->ndim = 1;
    view->shape = (flags & PyBUF_ND) ? &a->n : NULL;
    view->strides = (flags & PyBUF_STRIDES) ? &a->itemsize : NULL;
    view->suboffsets = NULL;
    view->internal = NULL;
    a->exports++;
    return 0;
}

static void array_releasebuffer(ArrayObject *a, Py_buffer *view) {
    a->exports--;
}

static PyBufferProcs array_as_buffer = {
    (getbufferproc)array_getbuffer,
    (releasebufferproc)array_releasebuffer,
};

static Py_ssize_t array_len(ArrayObject *a) {
    return a->n;
}

static PySequenceMethods array_as_sequence = {.sq_length = (lenfunc)array_len};

static PyTypeObject ArrayType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "saga._saga.Array",
    .tp_basicsize = sizeof(ArrayObject),
    .tp_dealloc = (destructor)array_dealloc,
    .tp_as_buffer = &array_as_buffer,
    .tp_as_sequence = &array_as_sequence,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A 1-D buffer over memory saga allocated (wrap it with numpy.asarray).",
};

/* A new Array over data: owned (freed with saga_free) when owner is NULL, else a view that keeps
 * owner alive. On failure an owned data is freed. */
static PyObject *array_new(void *data, Py_ssize_t n, Py_ssize_t itemsize, const char *format,
                           PyObject *owner) {
    ArrayObject *a = PyObject_New(ArrayObject, &ArrayType);
    if (!a) {
        if (!owner)
            saga_free(data);
        return NULL;
    }
    a->data = data;
    a->n = n;
    a->itemsize = itemsize;
    a->format = format;
    a->owned = owner == NULL;
    a->owner = owner;
    Py_XINCREF(owner);
    a->exports = 0;
    return (PyObject *)a;
}

/* ---- Graph --------------------------------------------------------------------------------- */

typedef struct {
    PyObject_HEAD saga_graph *g;
} GraphObject;

static PyTypeObject GraphType;

static void graph_dealloc(GraphObject *self) {
    saga_graph_free(&self->g);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *graph_wrap(saga_graph *g) {
    GraphObject *o = PyObject_New(GraphObject, &GraphType);
    if (!o) {
        saga_graph_free(&g);
        return NULL;
    }
    o->g = g;
    return (PyObject *)o;
}

static PyObject *graph_n_vertices(GraphObject *self, PyObject *unused) {
    return PyLong_FromLong(saga_graph_n_vertices(self->g));
}

static PyObject *graph_n_edges(GraphObject *self, PyObject *unused) {
    return PyLong_FromLongLong(saga_graph_n_edges(self->g));
}

static PyObject *graph_has_weights(GraphObject *self, PyObject *unused) {
    return PyBool_FromLong(saga_graph_has_weights(self->g));
}

static PyObject *graph_is_symmetric(GraphObject *self, PyObject *unused) {
    bool sym;
    Py_BEGIN_ALLOW_THREADS;
    sym = saga_graph_is_symmetric(self->g);
    Py_END_ALLOW_THREADS;
    return PyBool_FromLong(sym);
}

/* csr(out: bool) -> (offsets int64, indices int32, weights float32 or None), views. */
static PyObject *graph_csr(GraphObject *self, PyObject *args) {
    int out = 1;
    if (!PyArg_ParseTuple(args, "p", &out))
        return NULL;
    saga_csr c = out ? saga_graph_out(self->g) : saga_graph_in(self->g);
    PyObject *o = array_new((void *)c.offsets, (Py_ssize_t)c.n_rows + 1, 8, "q", (PyObject *)self);
    PyObject *i = array_new((void *)c.indices, (Py_ssize_t)c.nnz, 4, "i", (PyObject *)self);
    PyObject *w = c.weights
                      ? array_new((void *)c.weights, (Py_ssize_t)c.nnz, 4, "f", (PyObject *)self)
                      : (Py_INCREF(Py_None), Py_None);
    if (!o || !i || !w) {
        Py_XDECREF(o);
        Py_XDECREF(i);
        Py_XDECREF(w);
        return NULL;
    }
    return Py_BuildValue("(NNN)", o, i, w);
}

/* orig_ids() -> int64 view of the id map, or None when the ids are 0..n-1. */
static PyObject *graph_orig_ids(GraphObject *self, PyObject *unused) {
    const int64_t *ids = saga_graph_orig_ids(self->g);
    if (!ids)
        Py_RETURN_NONE;
    return array_new((void *)ids, saga_graph_n_vertices(self->g), 8, "q", (PyObject *)self);
}

static PyObject *graph_save_sgr(GraphObject *self, PyObject *args) {
    PyObject *path_obj = NULL;
    if (!PyArg_ParseTuple(args, "O&", PyUnicode_FSConverter, &path_obj))
        return NULL;
    saga_status st;
    const char *path = PyBytes_AS_STRING(path_obj);
    Py_BEGIN_ALLOW_THREADS;
    st = saga_sgr_write(self->g, path);
    Py_END_ALLOW_THREADS;
    Py_DECREF(path_obj);
    if (st < 0)
        return raise_status(st);
    Py_RETURN_NONE;
}

static PyMethodDef graph_methods[] = {
    {"n_vertices", (PyCFunction)graph_n_vertices, METH_NOARGS, "Vertex count."},
    {"n_edges", (PyCFunction)graph_n_edges, METH_NOARGS, "Directed edge count."},
    {"has_weights", (PyCFunction)graph_has_weights, METH_NOARGS, "Whether edges carry weights."},
    {"is_symmetric", (PyCFunction)graph_is_symmetric, METH_NOARGS,
     "Whether every edge comes with its reverse."},
    {"csr", (PyCFunction)graph_csr, METH_VARARGS,
     "csr(out) -> (offsets, indices, weights|None): the out- (True) or in-CSR, as views."},
    {"orig_ids", (PyCFunction)graph_orig_ids, METH_NOARGS,
     "The original ids (a view), or None when they are 0..n-1."},
    {"save_sgr", (PyCFunction)graph_save_sgr, METH_VARARGS, "Writes the graph as an .sgr file."},
    {NULL, NULL, 0, NULL}};

static PyTypeObject GraphType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "saga._saga.Graph",
    .tp_basicsize = sizeof(GraphObject),
    .tp_dealloc = (destructor)graph_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_methods = graph_methods,
    .tp_doc = "A saga_graph (made by load or from_edges).",
};

static saga_graph *graph_arg(PyObject *o) {
    if (!PyObject_TypeCheck(o, &GraphType)) {
        PyErr_SetString(PyExc_TypeError, "saga: expected a saga._saga.Graph");
        return NULL;
    }
    return ((GraphObject *)o)->g;
}

/* ---- loading and building ------------------------------------------------------------------ */

/* load(path, format, weights, undirected, self_loops, self_loops_set, duplicates) -> Graph */
static PyObject *py_load(PyObject *m, PyObject *args) {
    PyObject *path_obj = NULL;
    int format, weights, undirected, self_loops, self_loops_set, duplicates;
    if (!PyArg_ParseTuple(args, "O&iipipi", PyUnicode_FSConverter, &path_obj, &format, &weights,
                          &undirected, &self_loops, &self_loops_set, &duplicates))
        return NULL;
    saga_load_opts o = saga_load_opts_defaults();
    o.format = (saga_format)format;
    o.weights = (saga_weights)weights;
    o.graph.undirected = undirected;
    o.graph.self_loops = (saga_self_loops)self_loops;
    o.self_loops_set = self_loops_set;
    o.graph.duplicates = (saga_duplicates)duplicates;
    saga_graph *g = NULL;
    saga_status st;
    const char *path = PyBytes_AS_STRING(path_obj);
    Py_BEGIN_ALLOW_THREADS;
    st = saga_graph_load(&g, path, &o);
    Py_END_ALLOW_THREADS;
    Py_DECREF(path_obj);
    if (st < 0)
        return raise_status(st);
    return graph_wrap(g);
}

/* Gets a C-contiguous buffer of n items of itemsize bytes from o (None: buf->buf NULL). */
static int get_buffer(PyObject *o, Py_buffer *buf, Py_ssize_t itemsize, Py_ssize_t n,
                      const char *what) {
    memset(buf, 0, sizeof *buf);
    if (o == Py_None)
        return 0;
    if (PyObject_GetBuffer(o, buf, PyBUF_C_CONTIGUOUS) < 0)
        return -1;
    if (buf->itemsize != itemsize || (n >= 0 && buf->len != n * itemsize)) {
        PyErr_Format(PyExc_ValueError,
                     "saga: %s: expected %zd items of %zd bytes, got %zd bytes in items of %zd",
                     what, n, itemsize, buf->len, buf->itemsize);
        PyBuffer_Release(buf);
        memset(buf, 0, sizeof *buf);
        return -1;
    }
    return 0;
}

/* from_edges(n_vertices, src int32, dst int32, weights f32|None, orig_ids int64|None,
 *            undirected, self_loops, duplicates) -> Graph (the arrays are copied) */
static PyObject *py_from_edges(PyObject *m, PyObject *args) {
    long long n;
    PyObject *so, *dobj, *wo, *io;
    int undirected, self_loops, duplicates;
    if (!PyArg_ParseTuple(args, "LOOOOpii", &n, &so, &dobj, &wo, &io, &undirected, &self_loops,
                          &duplicates))
        return NULL;
    if (n < 0 || n > INT32_MAX) {
        PyErr_Format(PyExc_ValueError, "saga: num_nodes must be in 0..%d, got %lld", INT32_MAX, n);
        return NULL;
    }
    Py_buffer s, d, w, ids;
    memset(&d, 0, sizeof d);
    memset(&w, 0, sizeof w);
    memset(&ids, 0, sizeof ids);
    PyObject *res = NULL;
    if (get_buffer(so, &s, 4, -1, "src") < 0)
        return NULL;
    Py_ssize_t ne = s.len / 4;
    if (get_buffer(dobj, &d, 4, ne, "dst") < 0 || get_buffer(wo, &w, 4, ne, "weights") < 0 ||
        get_buffer(io, &ids, 8, (Py_ssize_t)n, "orig_ids") < 0)
        goto done;
    saga_graph_opts o = saga_graph_opts_defaults();
    o.undirected = undirected;
    o.self_loops = (saga_self_loops)self_loops;
    o.duplicates = (saga_duplicates)duplicates;
    saga_graph *g = NULL;
    saga_status st;
    Py_BEGIN_ALLOW_THREADS;
    st = saga_graph_from_edges(&g, (int32_t)n, (int64_t)ne, s.buf, d.buf, w.buf, ids.buf, &o);
    Py_END_ALLOW_THREADS;
    if (st < 0)
        raise_status(st);
    else
        res = graph_wrap(g);
done:
    PyBuffer_Release(&s);
    if (d.obj)
        PyBuffer_Release(&d);
    if (w.obj)
        PyBuffer_Release(&w);
    if (ids.obj)
        PyBuffer_Release(&ids);
    return res;
}

/* ---- backends and executor options --------------------------------------------------------- */

/* "auto": the first GPU when one is usable, else the CPU (as the command line does). */
static saga_status backend_open(saga_backend **be, const char *device, long long device_mem) {
    saga_backend_params bp = saga_backend_params_defaults();
    bp.budget_bytes = (size_t)device_mem;
    if (strcmp(device, "auto") == 0) {
        saga_status st = saga_backend_cuda_new(be, 0, &bp);
        if (st == SAGA_OK || st == SAGA_ERR_INVALID_ARG)
            return st;
        saga_error_clear();
        return saga_backend_cpu_new(be, &bp);
    }
    return saga_backend_open(be, device, &bp);
}

static saga_net_opts net_opts(int stream, int parts, int partition) {
    saga_net_opts no = saga_net_opts_defaults();
    no.exec = stream ? SAGA_EXEC_STREAM : SAGA_EXEC_AUTO;
    no.parts = parts;
    no.partition = (saga_partition_method)partition;
    return no;
}

/* pagerank(graph, damping, tol, max_iters, device, device_mem, stream, parts, partition)
 *   -> (scores float64, iterations, l1_change, seconds, device name) */
static PyObject *py_pagerank(PyObject *m, PyObject *args) {
    PyObject *go;
    double damping, tol;
    int max_iters, stream, parts, partition;
    const char *device;
    long long device_mem;
    if (!PyArg_ParseTuple(args, "OddisLpii", &go, &damping, &tol, &max_iters, &device, &device_mem,
                          &stream, &parts, &partition))
        return NULL;
    saga_graph *g = graph_arg(go);
    if (!g)
        return NULL;
    saga_status st = SAGA_OK;
    saga_backend *be = NULL;
    saga_ctx *c = NULL;
    saga_net *net = NULL;
    double *x = NULL;
    int iterations = 0;
    double l1 = 0;
    saga_net_stats ns = {0};
    char devname[64] = "";
    Py_BEGIN_ALLOW_THREADS;
    saga_net_opts no = net_opts(stream, parts, partition);
    int32_t n = saga_graph_n_vertices(g);
    SAGA_TRY(backend_open(&be, device, device_mem));
    snprintf(devname, sizeof devname, "%s", saga_backend_name(be));
    SAGA_TRY(saga_ctx_new(&c, be, 0));
    SAGA_TRY(saga_net_new(&net, c, g, &no));
    SAGA_TRY(saga_alloc_array((void **)&x, n ? (size_t)n : 1, sizeof *x, "pagerank scores"));
    SAGA_TRY(saga_net_pagerank(net, damping, tol, max_iters, x, &iterations, &l1));
    saga_net_get_stats(net, &ns);
fail:
    saga_net_free(&net);
    saga_ctx_free(&c);
    saga_backend_free_all(&be);
    Py_END_ALLOW_THREADS;
    if (st < 0) {
        saga_free(x);
        return raise_status(st);
    }
    PyObject *arr = array_new(x, saga_graph_n_vertices(g), 8, "d", NULL);
    if (!arr)
        return NULL;
    return Py_BuildValue("(Nidds)", arr, iterations, l1, ns.iterate_seconds, devname);
}

/* connected_components(graph, device, device_mem, stream, parts, partition)
 *   -> (labels int32: the smallest internal vertex of each vertex's component, n_components,
 *       iterations, largest, symmetrized) */
static PyObject *py_connected_components(PyObject *m, PyObject *args) {
    PyObject *go;
    int stream, parts, partition;
    const char *device;
    long long device_mem;
    if (!PyArg_ParseTuple(args, "OsLpii", &go, &device, &device_mem, &stream, &parts, &partition))
        return NULL;
    saga_graph *g = graph_arg(go);
    if (!g)
        return NULL;
    saga_status st = SAGA_OK;
    saga_backend *be = NULL;
    int32_t *comp = NULL;
    cc_result r = {0};
    Py_BEGIN_ALLOW_THREADS;
    /* as `saga cc`: the executor when streaming is asked for, else the direct rounds */
    bool exec = stream || device_mem > 0 || parts > 0;
    saga_net_opts no = net_opts(stream, parts, partition);
    SAGA_TRY(backend_open(&be, device, device_mem));
    if (exec)
        SAGA_TRY(cc_run_net(&comp, &r, be, g, &no, NULL, 0, NULL, NULL, NULL));
    else
        SAGA_TRY(cc_run(&comp, &r, be, g, NULL, NULL));
fail:
    saga_backend_free_all(&be);
    Py_END_ALLOW_THREADS;
    if (st < 0) {
        saga_free(comp);
        return raise_status(st);
    }
    PyObject *arr = array_new(comp, saga_graph_n_vertices(g), 4, "i", NULL);
    if (!arr)
        return NULL;
    return Py_BuildValue("(NiiiN)", arr, (int)r.n_components, r.iterations, (int)r.largest,
                         PyBool_FromLong(r.symmetrized));
}

/* ---- partitioning -------------------------------------------------------------------------- */

static void partition_capsule_free(PyObject *cap) {
    saga_partition *p = PyCapsule_GetPointer(cap, "saga_partition");
    saga_partition_free(&p);
}

/* partition(graph, k, method, seed, balance_edges)
 *   -> (part int32, perm int32, offsets int64, edge_cut, balance, seconds), views */
static PyObject *py_partition(PyObject *m, PyObject *args) {
    PyObject *go;
    int k, method, balance_edges;
    unsigned long long seed;
    if (!PyArg_ParseTuple(args, "OiiKp", &go, &k, &method, &seed, &balance_edges))
        return NULL;
    saga_graph *g = graph_arg(go);
    if (!g)
        return NULL;
    saga_partition_opts o = saga_partition_opts_defaults();
    o.method = (saga_partition_method)method;
    o.seed = seed;
    o.balance_edges = balance_edges;
    saga_partition *p = NULL;
    saga_status st;
    Py_BEGIN_ALLOW_THREADS;
    st = saga_partition_graph(&p, g, k, &o);
    Py_END_ALLOW_THREADS;
    if (st < 0)
        return raise_status(st);
    PyObject *cap = PyCapsule_New(p, "saga_partition", partition_capsule_free);
    if (!cap) {
        saga_partition_free(&p);
        return NULL;
    }
    PyObject *part = array_new(p->part, p->n_vertices, 4, "i", cap);
    PyObject *perm = array_new(p->perm, p->n_vertices, 4, "i", cap);
    PyObject *offs = array_new(p->offsets, (Py_ssize_t)p->n_parts + 1, 8, "q", cap);
    Py_DECREF(cap);
    if (!part || !perm || !offs) {
        Py_XDECREF(part);
        Py_XDECREF(perm);
        Py_XDECREF(offs);
        return NULL;
    }
    return Py_BuildValue("(NNNLdd)", part, perm, offs, (long long)p->edge_cut, p->balance,
                         p->seconds);
}

/* ---- module -------------------------------------------------------------------------------- */

static PyObject *py_version(PyObject *m, PyObject *unused) {
    return PyUnicode_FromString(saga_version());
}

/* _saga_gcn.c and _saga_hep.c of this module */
PyObject *saga_py_gcn(PyObject *m, PyObject *args, PyObject *kw);
PyObject *saga_py_hep_build(PyObject *m, PyObject *args);
PyObject *saga_py_hep_train(PyObject *m, PyObject *args, PyObject *kw);
PyObject *saga_py_hep_eval(PyObject *m, PyObject *args);

static PyMethodDef module_methods[] = {
    {"load", py_load, METH_VARARGS, "Loads a graph file (saga_graph_load)."},
    {"from_edges", py_from_edges, METH_VARARGS, "Builds a graph from edge arrays."},
    {"pagerank", py_pagerank, METH_VARARGS, "PageRank through the graph executor."},
    {"connected_components", py_connected_components, METH_VARARGS,
     "Weakly connected components (cc_run / cc_run_net)."},
    {"partition", py_partition, METH_VARARGS, "saga_partition_graph."},
    {"gcn", (PyCFunction)(void (*)(void))saga_py_gcn, METH_VARARGS | METH_KEYWORDS,
     "Trains a GCN (gcn_train) and returns its results and predictions."},
    {"hep_build", saga_py_hep_build, METH_VARARGS, "Builds every event's graph (hep_data_load)."},
    {"hep_train", (PyCFunction)(void (*)(void))saga_py_hep_train, METH_VARARGS | METH_KEYWORDS,
     "Trains the Interaction Network (hep_train)."},
    {"hep_eval", saga_py_hep_eval, METH_VARARGS, "Evaluates a checkpoint (hep_evaluate)."},
    {"version", py_version, METH_NOARGS, "libsaga's version."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "_saga", "saga's C library, as the saga package uses it.", -1,
    module_methods,
};

/* For _saga_gcn.c and _saga_hep.c of this module. */
PyObject *saga_py_raise(saga_status st);
PyObject *saga_py_raise(saga_status st) {
    return raise_status(st);
}
PyObject *saga_py_array(void *data, Py_ssize_t n, Py_ssize_t itemsize, const char *format);
PyObject *saga_py_array(void *data, Py_ssize_t n, Py_ssize_t itemsize, const char *format) {
    return array_new(data, n, itemsize, format, NULL);
}
saga_status saga_py_backend_open(saga_backend **be, const char *device, long long device_mem);
saga_status saga_py_backend_open(saga_backend **be, const char *device, long long device_mem) {
    return backend_open(be, device, device_mem);
}
saga_graph *saga_py_graph(PyObject *o);
saga_graph *saga_py_graph(PyObject *o) {
    return graph_arg(o);
}

PyMODINIT_FUNC PyInit__saga(void);
PyMODINIT_FUNC PyInit__saga(void) {
    if (PyType_Ready(&ArrayType) < 0 || PyType_Ready(&GraphType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module_def);
    if (!m)
        return NULL;
    saga_error_base = PyErr_NewExceptionWithDoc(
        "saga.Error",
        "A saga call failed: the message is saga_last_error()'s; .status names the status.", NULL,
        NULL);
    if (!saga_error_base || PyModule_AddObjectRef(m, "Error", saga_error_base) < 0)
        goto fail;
    for (int i = 1; i < -SAGA_ERR_COUNT_; i++) {
        char name[64];
        snprintf(name, sizeof name, "saga.%s", error_names[i]);
        saga_error_by_status[i] = PyErr_NewException(name, saga_error_base, NULL);
        if (!saga_error_by_status[i] ||
            PyModule_AddObjectRef(m, error_names[i], saga_error_by_status[i]) < 0)
            goto fail;
    }
    if (PyModule_AddObjectRef(m, "Graph", (PyObject *)&GraphType) < 0 ||
        PyModule_AddObjectRef(m, "Array", (PyObject *)&ArrayType) < 0)
        goto fail;
    return m;
fail:
    Py_DECREF(m);
    return NULL;
}
