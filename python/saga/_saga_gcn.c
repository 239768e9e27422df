/* _saga_gcn.c - saga.gcn: the bundled GCN (apps/gcn.c, gcn_train) on a data set directory or on
 * arrays, with the options and results of `saga gcn`. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "gcn.h"
#include "saga.h"

#include <math.h>
#include <string.h>

PyObject *saga_py_raise(saga_status st);
PyObject *saga_py_array(void *data, Py_ssize_t n, Py_ssize_t itemsize, const char *format);
saga_status saga_py_backend_open(saga_backend **be, const char *device, long long device_mem);
saga_graph *saga_py_graph(PyObject *o);
PyObject *saga_py_gcn(PyObject *m, PyObject *args, PyObject *kw);

/* A copy of a C-contiguous buffer of n items of itemsize bytes (saga_malloc'd), or NULL with a
 * Python error set. */
static void *copy_buffer(PyObject *o, Py_ssize_t itemsize, Py_ssize_t n, const char *what) {
    Py_buffer b;
    if (PyObject_GetBuffer(o, &b, PyBUF_C_CONTIGUOUS) < 0)
        return NULL;
    void *out = NULL;
    if (b.itemsize != itemsize || (n >= 0 && b.len != n * itemsize)) {
        PyErr_Format(PyExc_ValueError,
                     "saga.gcn: %s: expected %zd items of %zd bytes, got %zd bytes", what, n,
                     itemsize, b.len);
    } else if (saga_alloc_array(&out, b.len ? (size_t)b.len : 1, 1, what) < 0) {
        saga_py_raise(saga_last_status());
    } else {
        memcpy(out, b.buf, (size_t)b.len);
    }
    PyBuffer_Release(&b);
    return out;
}

static Py_ssize_t buffer_items(PyObject *o, Py_ssize_t itemsize) {
    Py_buffer b;
    if (PyObject_GetBuffer(o, &b, PyBUF_C_CONTIGUOUS) < 0)
        return -1;
    Py_ssize_t n = b.len / itemsize;
    PyBuffer_Release(&b);
    return n;
}

#define SET_ITEM(key, val)                                                                         \
    do {                                                                                           \
        PyObject *v_ = (val);                                                                      \
        if (!v_ || PyDict_SetItemString(res, key, v_) < 0) {                                       \
            Py_XDECREF(v_);                                                                        \
            Py_DECREF(res);                                                                        \
            res = NULL;                                                                            \
            goto out;                                                                              \
        }                                                                                          \
        Py_DECREF(v_);                                                                             \
    } while (0)

PyObject *saga_py_gcn(PyObject *m, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"data",
                             "graph",
                             "features",
                             "labels",
                             "n_classes",
                             "train",
                             "val",
                             "test",
                             "normalize",
                             "dense_features",
                             "epochs",
                             "hidden",
                             "lr",
                             "dropout",
                             "weight_decay",
                             "seed",
                             "device",
                             "device_mem",
                             "stream",
                             "parts",
                             "partition",
                             "saved",
                             "transfer",
                             "host_halos",
                             "checkpoint",
                             "checkpoint_every",
                             "resume",
                             "x_offsets",
                             "x_indices",
                             "x_values",
                             "n_features",
                             "sparse_below",
                             "graphs",
                             "model",
                             "heads",
                             "aggr",
                             "fanout",
                             "batch_size",
                             "sample_degrees",
                             "batch_balance",
                             "prefetch",
                             "eval_sampled",
                             "early_stop",
                             NULL};
    PyObject *data_obj = Py_None, *graph_obj = Py_None, *feat_obj = Py_None, *lab_obj = Py_None;
    PyObject *train_obj = Py_None, *val_obj = Py_None, *test_obj = Py_None;
    PyObject *ckpt_obj = Py_None, *resume_obj = Py_None, *fanout_obj = Py_None;
    int sample_degrees = SAGA_SAMPLE_DEGREES_FULL, balance = GCN_BALANCE_MEMORY, eval_sampled = 0;
    PyObject *xo_obj = Py_None, *xi_obj = Py_None, *xv_obj = Py_None;
    long long n_features = 0;
    int n_classes = 0, normalize = 1, dense_features = 0, stream = 0, host_halos = 0, graphs = 0;
    int parts = 0, partition = 0, saved = 0, transfer = 0, checkpoint_every = 0;
    gcn_opts go = gcn_opts_defaults();
    const char *device = "auto";
    long long device_mem = 0;
    unsigned long long seed = go.seed;
    int model = GCN_MODEL_GCN, aggr = SAGA_GATHER_MEAN;
    /* hidden, lr, dropout and weight_decay below 0: the model's own (gcn_opts_model) */
    if (!PyArg_ParseTupleAndKeywords(
            args, kw, "|OOOOiOOOppiifffKsLpiiiipOiOOOOLdpiiiOiiiipi", kwlist, &data_obj, &graph_obj,
            &feat_obj, &lab_obj, &n_classes, &train_obj, &val_obj, &test_obj, &normalize,
            &dense_features, &go.epochs, &go.hidden, &go.lr, &go.dropout, &go.weight_decay, &seed,
            &device, &device_mem, &stream, &parts, &partition, &saved, &transfer, &host_halos,
            &ckpt_obj, &checkpoint_every, &resume_obj, &xo_obj, &xi_obj, &xv_obj, &n_features,
            &go.sparse_below, &graphs, &model, &go.heads, &aggr, &fanout_obj, &go.batch_size,
            &sample_degrees, &balance, &go.prefetch, &eval_sampled, &go.early_stop))
        return NULL;
    if (fanout_obj != Py_None) {
        PyObject *seq = PySequence_Fast(fanout_obj, "saga.gcn: fanout must be a sequence of ints");
        if (!seq)
            return NULL;
        Py_ssize_t k = PySequence_Fast_GET_SIZE(seq);
        for (Py_ssize_t i = 0; i < k && i < GCN_MAX_LAYERS; i++) {
            long f = PyLong_AsLong(PySequence_Fast_GET_ITEM(seq, i));
            go.fanout[i] = (int32_t)f;
            if ((f == -1 && PyErr_Occurred()) || f < -1 || f > (1 << 24) || f == 0) {
                Py_DECREF(seq);
                if (!PyErr_Occurred())
                    PyErr_Format(PyExc_ValueError,
                                 "saga.gcn: fanout %ld: each must be -1 (all) or 1..%d", f,
                                 1 << 24);
                return NULL;
            }
        }
        Py_DECREF(seq);
        if (k != 2) {
            PyErr_Format(PyExc_ValueError,
                         "saga.gcn: the models have 2 layers, so fanout needs 2 entries, got %zd",
                         k);
            return NULL;
        }
        go.n_fanout = (int)k;
    }
    if (go.batch_size < 1 || (unsigned)sample_degrees >= SAGA_SAMPLE_DEGREES_COUNT) {
        PyErr_SetString(PyExc_ValueError,
                        "saga.gcn: batch_size must be >= 1, sample_degrees full or sampled");
        return NULL;
    }
    go.sample_degrees = (saga_sample_degrees)sample_degrees;
    if ((unsigned)balance >= GCN_BALANCE_COUNT) {
        PyErr_SetString(PyExc_ValueError, "saga.gcn: invalid batch_balance");
        return NULL;
    }
    if (go.early_stop < 0) {
        PyErr_SetString(PyExc_ValueError, "saga.gcn: early_stop must be >= 0 (0: off)");
        return NULL;
    }
    if (go.prefetch < 0 || go.prefetch > 64) {
        PyErr_SetString(PyExc_ValueError, "saga.gcn: prefetch must be in 0..64");
        return NULL;
    }
    go.balance = (gcn_balance)balance;
    go.eval_sampled = eval_sampled;
    if (model < 0 || model >= GCN_MODEL_COUNT || aggr < 0 || aggr >= SAGA_GATHER_COUNT ||
        go.heads < 1) {
        PyErr_SetString(PyExc_ValueError, "saga.gcn: invalid model, heads or aggr");
        return NULL;
    }
    go.model = (gcn_model)model;
    go.aggr = (saga_gather)aggr;
    const gcn_opts md = gcn_opts_model(go.model);
    if (go.hidden < 0)
        go.hidden = md.hidden;
    if (go.lr < 0)
        go.lr = md.lr;
    if (go.dropout < 0)
        go.dropout = md.dropout;
    if (go.weight_decay < 0)
        go.weight_decay = md.weight_decay;
    if (!(go.sparse_below >= 0 && go.sparse_below <= 1)) {
        PyErr_SetString(PyExc_ValueError, "saga.gcn: sparse_below must be in [0, 1]");
        return NULL;
    }
    go.seed = seed;
    go.exec = stream ? SAGA_EXEC_STREAM : SAGA_EXEC_AUTO;
    go.parts = parts;
    go.partition = (saga_partition_method)partition;
    go.saved = (saga_saved)saved;
    go.transfer = (saga_transfer)transfer;
    go.host_halos = host_halos;
    go.graphs = graphs;
    go.checkpoint_every = checkpoint_every;
    go.checkpoint = ckpt_obj == Py_None ? NULL : PyUnicode_AsUTF8(ckpt_obj);
    go.resume = resume_obj == Py_None ? NULL : PyUnicode_AsUTF8(resume_obj);
    if ((ckpt_obj != Py_None && !go.checkpoint) || (resume_obj != Py_None && !go.resume))
        return NULL;

    gcn_data d;
    memset(&d, 0, sizeof d);
    gcn_result r;
    memset(&r, 0, sizeof r);
    saga_backend *be = NULL;
    saga_graph *borrowed = NULL; /* the caller's graph: not freed with d */
    saga_comm *comm = NULL;      /* over shards: the ranks a launcher started */
    PyObject *res = NULL;
    saga_status st = SAGA_OK;
    if (data_obj != Py_None) {
        PyObject *path = NULL;
        if (!PyUnicode_FSConverter(data_obj, &path))
            return NULL;
        saga_dataset_opts dso = saga_dataset_opts_defaults();
        dso.normalize_features = normalize;
        const char *dir = PyBytes_AS_STRING(path);
        Py_BEGIN_ALLOW_THREADS;
        if (gcn_data_is_shards(dir)) {
            /* a directory of shards: this process is one rank of the launcher's, training on
             * its own shard (saga gcn --data SHARDS under mpirun) */
            st = saga_comm_open(&comm, "auto");
            if (st == SAGA_OK)
                st = gcn_data_load_shard(&d, dir, saga_comm_rank(comm), saga_comm_size(comm),
                                         normalize);
            /* every rank goes on, or none */
            if (comm)
                st = saga_comm_agree(comm, st);
            go.comm = comm;
        } else {
            st = gcn_data_load(&d, dir, &dso);
        }
        Py_END_ALLOW_THREADS;
        Py_DECREF(path);
        if (st < 0) {
            saga_comm_free(&comm);
            return saga_py_raise(st);
        }
    } else {
        borrowed = saga_py_graph(graph_obj);
        if (!borrowed)
            return NULL;
        d.graph = borrowed;
        d.n_vertices = saga_graph_n_vertices(borrowed);
        d.n_edges = saga_graph_n_edges(borrowed) / 2;
        d.n_classes = n_classes;
        if (feat_obj != Py_None) { /* dense rows */
            Py_ssize_t nf = buffer_items(feat_obj, 4);
            if (nf < 0)
                goto out;
            if (d.n_vertices == 0 || nf % d.n_vertices) {
                PyErr_Format(
                    PyExc_ValueError,
                    "saga.gcn: features: expected %d rows (one per vertex), got %zd values",
                    d.n_vertices, nf);
                goto out;
            }
            d.n_features = nf / d.n_vertices;
            if (!(d.features = copy_buffer(feat_obj, 4, nf, "features")))
                goto out;
        } else { /* CSR: offsets, indices, values */
            Py_ssize_t nnz = buffer_items(xi_obj, 4);
            if (nnz < 0 ||
                !(d.x_offsets =
                      copy_buffer(xo_obj, 8, (Py_ssize_t)d.n_vertices + 1, "feature offsets")) ||
                !(d.x_indices = copy_buffer(xi_obj, 4, nnz, "feature indices")) ||
                !(d.x_values = copy_buffer(xv_obj, 4, nnz, "feature values")))
                goto out;
            d.x_nnz = nnz;
            d.n_features = n_features;
            bool ok = d.x_offsets[0] == 0 && d.x_offsets[d.n_vertices] == nnz;
            for (int32_t v = 0; ok && v < d.n_vertices; v++) {
                ok = d.x_offsets[v] <= d.x_offsets[v + 1];
                for (int64_t k = d.x_offsets[v]; ok && k < d.x_offsets[v + 1]; k++)
                    ok = d.x_indices[k] >= 0 && d.x_indices[k] < n_features &&
                         (k == d.x_offsets[v] || d.x_indices[k] > d.x_indices[k - 1]);
            }
            if (!ok) {
                PyErr_Format(PyExc_ValueError,
                             "saga.gcn: sparse features: expected a CSR of %d rows with increasing "
                             "column indices in 0..%lld",
                             d.n_vertices, n_features - 1);
                goto out;
            }
        }
        /* the check a features file gets (saga_dataset_load): finite values */
        const float *fv = d.features ? d.features : d.x_values;
        int64_t n_fv = d.features ? (int64_t)d.n_vertices * d.n_features : d.x_nnz;
        for (int64_t k = 0; k < n_fv; k++)
            if (!isfinite(fv[k])) {
                PyErr_Format(PyExc_ValueError,
                             "saga.gcn: %s value %lld is %s: expected a finite number",
                             d.features ? "features" : "sparse features", (long long)k,
                             isnan(fv[k]) ? "nan"
                             : fv[k] > 0  ? "inf"
                                          : "-inf");
                goto out;
            }
        if (!(d.labels = copy_buffer(lab_obj, 4, d.n_vertices, "labels")))
            goto out;
        Py_ssize_t nt = buffer_items(train_obj, 4), nv = buffer_items(val_obj, 4),
                   ns = buffer_items(test_obj, 4);
        if (nt < 0 || nv < 0 || ns < 0 || !(d.train = copy_buffer(train_obj, 4, nt, "train")) ||
            !(d.val = copy_buffer(val_obj, 4, nv, "val")) ||
            !(d.test = copy_buffer(test_obj, 4, ns, "test")))
            goto out;
        d.n_train = nt, d.n_val = nv, d.n_test = ns;
        for (int32_t v = 0; v < d.n_vertices; v++)
            if (d.labels[v] < -1 || d.labels[v] >= n_classes) {
                PyErr_Format(PyExc_ValueError,
                             "saga.gcn: labels[%d] is %d: expected -1 (none) or a class in 0..%d",
                             v, d.labels[v], n_classes - 1);
                goto out;
            }
        const int32_t *sets[3] = {d.train, d.val, d.test};
        const int64_t counts[3] = {d.n_train, d.n_val, d.n_test};
        static const char *const set_names[3] = {"train", "val", "test"};
        for (int s = 0; s < 3; s++)
            for (int64_t i = 0; i < counts[s]; i++)
                if (sets[s][i] < 0 || sets[s][i] >= d.n_vertices || d.labels[sets[s][i]] < 0) {
                    PyErr_Format(PyExc_ValueError,
                                 "saga.gcn: %s[%lld] is vertex %d: expected a labelled vertex in "
                                 "0..%d",
                                 set_names[s], (long long)i, sets[s][i], d.n_vertices - 1);
                    goto out;
                }
        if (normalize)
            gcn_data_normalize_features(&d);
    }
    if (dense_features && (st = gcn_data_densify(&d)) < 0) {
        saga_py_raise(st);
        goto out;
    }

    (void)gcn_opts_for_data(&go, &d); /* over shards: batches on the training's path */
    char devname[64] = "";
    Py_BEGIN_ALLOW_THREADS;
    st = saga_py_backend_open(&be, device, device_mem);
    if (st == SAGA_OK) {
        snprintf(devname, sizeof devname, "%s", saga_backend_name(be));
        st = gcn_train(&r, be, &d, &go, NULL, NULL);
    }
    saga_backend_free_all(&be);
    Py_END_ALLOW_THREADS;
    if (st < 0) {
        saga_py_raise(st);
        goto out;
    }
    res = PyDict_New();
    if (!res)
        goto out;
    /* over shards the whole data set's counts; the predictions of this rank's own rows, with
     * their ids in the data set */
    const bool shards = d.shard != NULL;
    SET_ITEM("vertices", PyLong_FromLongLong(shards ? d.all_vertices : d.n_vertices));
    SET_ITEM("edges", PyLong_FromLongLong(shards ? d.all_edges : d.n_edges));
    SET_ITEM("features", PyLong_FromLongLong(d.n_features));
    SET_ITEM("classes", PyLong_FromLong(d.n_classes));
    SET_ITEM("train", PyLong_FromLongLong(shards ? d.all_train : d.n_train));
    SET_ITEM("val", PyLong_FromLongLong(shards ? d.all_val : d.n_val));
    SET_ITEM("test", PyLong_FromLongLong(shards ? d.all_test : d.n_test));
    SET_ITEM("shards", PyBool_FromLong(shards));
    SET_ITEM("rank", PyLong_FromLong(comm ? saga_comm_rank(comm) : 0));
    SET_ITEM("ranks", PyLong_FromLong(comm ? saga_comm_size(comm) : 1));
    SET_ITEM("device", PyUnicode_FromString(devname));
    SET_ITEM("epochs", PyLong_FromLong(r.epochs));
    SET_ITEM("start_epoch", PyLong_FromLong(r.start_epoch));
    SET_ITEM("parameters", PyLong_FromLongLong(r.n_params));
    SET_ITEM("loss", PyFloat_FromDouble(r.loss));
    SET_ITEM("train_accuracy", PyFloat_FromDouble(r.train_acc));
    SET_ITEM("val_accuracy", PyFloat_FromDouble(r.val_acc));
    SET_ITEM("test_accuracy", PyFloat_FromDouble(r.test_acc));
    SET_ITEM("model", PyUnicode_FromString(gcn_model_name(go.model)));
    SET_ITEM("hidden", PyLong_FromLong(go.hidden));
    SET_ITEM("early_stop", PyLong_FromLong(go.early_stop));
    SET_ITEM("stopped", PyBool_FromLong(r.stopped));
    SET_ITEM("model_epoch", PyLong_FromLong(r.model_epoch));
    SET_ITEM("best_epoch", PyLong_FromLong(r.best_epoch));
    SET_ITEM("best_val_accuracy", PyFloat_FromDouble(r.best_val_acc));
    SET_ITEM("test_accuracy_at_best_val", PyFloat_FromDouble(r.test_at_best_val));
    /* the final model's class of every vertex: an int32 Array that owns the buffer from here on
     * (and frees it when it cannot be made) */
    int32_t *pred = r.predictions;
    r.predictions = NULL;
    const Py_ssize_t n_pred = shards ? (Py_ssize_t)d.shard->n_own : (Py_ssize_t)d.n_vertices;
    SET_ITEM("predictions", saga_py_array(pred, n_pred, sizeof *pred, "i"));
    if (shards) { /* the own rows' vertices in the data set (its rows' order, from 0) */
        int32_t *ids = saga_malloc((size_t)n_pred * sizeof *ids + 4);
        if (!ids) {
            PyErr_NoMemory();
            Py_CLEAR(res);
            goto out;
        }
        memcpy(ids, d.shard->vertex, (size_t)n_pred * sizeof *ids);
        SET_ITEM("ids", saga_py_array(ids, n_pred, sizeof *ids, "i"));
    }
    SET_ITEM("epoch_ms_median", PyFloat_FromDouble(gcn_median(r.epoch_ms, r.n_epoch_ms)));
    SET_ITEM("epoch_ms_mean", PyFloat_FromDouble(gcn_mean(r.epoch_ms, r.n_epoch_ms)));
    SET_ITEM("train_seconds", PyFloat_FromDouble(r.seconds));
    SET_ITEM("peak_device_bytes", PyLong_FromUnsignedLongLong(r.peak_device_bytes));
    SET_ITEM("memory", PyUnicode_FromString(r.stats.streamed ? "streamed" : "in-memory"));
    SET_ITEM("parts", PyLong_FromLong(r.stats.parts));
    SET_ITEM("graph", PyBool_FromLong(r.stats.graph));
    SET_ITEM("input_layout", PyUnicode_FromString(r.stats.sparse_input ? "sparse" : "dense"));
    SET_ITEM("input_packed", PyBool_FromLong(r.stats.input_packed));
    SET_ITEM("rows_normalized", PyLong_FromLongLong(d.norm.n_normalized));
    SET_ITEM("rows_signed", PyLong_FromLongLong(d.norm.n_signed));
    if (go.n_fanout) {
        SET_ITEM("batches", PyLong_FromLong(r.batches));
        SET_ITEM("batch_rows", PyFloat_FromDouble(r.batch_rows));
        SET_ITEM("batch_edges", PyFloat_FromDouble(r.batch_edges));
        SET_ITEM("batch_peak_min", PyLong_FromSize_t(r.batch_peak_min));
        SET_ITEM("batch_peak_max", PyLong_FromSize_t(r.batch_peak_max));
    }
out:
    gcn_result_free(&r);
    if (borrowed)
        d.graph = NULL; /* the Graph object's */
    gcn_data_free(&d);
    saga_comm_free(&comm);
    return res;
}
