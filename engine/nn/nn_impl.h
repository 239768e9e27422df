/* nn_impl.h - the autograd tape, shared by the ops layer (engine/nn/nn_*.c) and the vertex-program
 * executor (engine/exec/program.c). Internal to saga.
 *
 * Every tensor may carry a gradient (t->grad, same shape, allocated on first accumulation). A
 * tensor "needs a gradient" when it is a parameter, a leaf marked with saga_ctx_leaf, or the
 * output of a recorded op one of whose inputs needs one. Ops record a node only when the context
 * is training and some input needs a gradient.
 *
 * Backward over a range of the tape visits its nodes in reverse; a node whose output has a
 * gradient calls its backward function, which adds the inputs' gradients with
 * saga_node_accumulate. Gradients of parameters persist (saga_grad) until the optimizer zeroes
 * them; gradients of other tensors live as long as the tensor.
 *
 * Regions let the executor recompute a batch instead of keeping it: mark the tape, run ops,
 * run backward over what was recorded after the mark, then release everything made after it.
 *
 *   saga_tape_pos m = saga_tape_mark(c);
 *   saga_tensor *xb = saga_ctx_leaf(c, batch_input);         // d/dxb wanted
 *   saga_tensor *y = user_fn(c, xb);                         // recorded after m
 *   SAGA_TRY(saga_tape_backward_range(c, m, y, dy));         // into xb->grad, params, ...
 *   ... use xb->grad ...
 *   saga_tape_release(c, m);                                 // nodes and tensors after m
 */
#pragma once

#include "backend_impl.h"
#include "saga_nn.h"
#include "tensor_impl.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct saga_node saga_node;

/* Adds the gradients of the node's inputs from grad_out (d loss / d output, the output's shape)
 * with saga_node_accumulate. Must not keep grad_out. */
typedef saga_status (*saga_node_backward_fn)(saga_ctx *c, saga_node *n, saga_tensor *grad_out);
typedef void (*saga_node_free_fn)(void *state);

#define SAGA_NODE_MAX_INPUTS 5

/* Records that out was computed from inputs[0..n_inputs) (NULL entries allowed), with backward
 * bwd and its private state (owned by the node from now on, also on failure: freed with
 * free_state when the node goes). When the context is not training or no input needs a
 * gradient, records nothing and frees state. On error the context's sticky status is set. */
saga_status saga_tape_record(saga_ctx *c, saga_tensor *out, saga_tensor *const *inputs,
                             int n_inputs, saga_node_backward_fn bwd, void *state,
                             saga_node_free_fn free_state);
/* saga_tape_record, but with always the node is recorded (while training) even when no input
 * needs a gradient: for a node whose backward reaches tensors that are not its inputs, such as
 * the parameters a vertex program's apply_edge uses. */
saga_status saga_tape_record_ex(saga_ctx *c, saga_tensor *out, saga_tensor *const *inputs,
                                int n_inputs, bool always, saga_node_backward_fn bwd, void *state,
                                saga_node_free_fn free_state);
saga_tensor *saga_node_input(const saga_node *n, int i);
saga_tensor *saga_node_output(const saga_node *n);
void *saga_node_state(const saga_node *n);
/* Whether input i wants a gradient (a backward function skips the others). */
bool saga_node_needs_grad(const saga_node *n, int i);
/* Adds g (input i's shape) into input i's gradient, allocating it zero-filled on first use. g
 * stays the caller's. */
saga_status saga_node_accumulate(saga_ctx *c, saga_node *n, int i, const saga_tensor *g);
/* Where a backward function writes input i's gradient itself: the gradient's buffer, with *beta
 * = 1 when it already holds a gradient to add to, or a fresh one with *beta = 0 that the caller
 * must overwrite entirely (kernels with a beta argument accumulate in place, without a temporary
 * and a copy). NULL with the context's error set. */
float *saga_node_grad_target(saga_ctx *c, saga_node *n, int i, float *beta);
/* Same for any tensor: t->grad += g. */
saga_status saga_grad_accumulate(saga_ctx *c, saga_tensor *t, const saga_tensor *g);
bool saga_tensor_needs_grad(const saga_tensor *t);

/* ---- regions ------------------------------------------------------------------------------ */

/* Deferred products. While on, a product whose backward pass does not read its output
 * (saga_matmul, saga_spmm) defers its kernel: the next op, a program call, saga_tensor_data,
 * saga_tensor_cdata, saga_tensor_to_host or saga_item runs it first, and a tape release that
 * frees its output drops it. The executor's backward steps, which run a stage's forward pass
 * again for its tape alone, so never compute the stage's output, of which the backward pass
 * needs the gradient alone; its forward steps have the stage's output written straight where it
 * goes (saga_ctx_flush_to). */
void saga_ctx_set_defer(saga_ctx *c, bool on);
/* Runs context c's deferred product, if any; its kernel's error becomes the context's. Nothing
 * for c NULL. */
void saga_ctx_flush(saga_ctx *c);
/* When t is c's deferred product: runs it with its output written to dst (device memory of t's
 * size) instead of t's buffer, which stays unwritten (t must not be read after), and returns 1.
 * 0 when t is not deferred (the caller copies it); the context's error when the kernel fails. */
int saga_ctx_flush_to(saga_ctx *c, saga_tensor *t, void *dst);

typedef struct saga_tape_pos {
    size_t n_nodes;   /* tape length at the mark */
    size_t n_tensors; /* tensors the context owned at the mark */
} saga_tape_pos;

saga_tape_pos saga_tape_mark(const saga_ctx *c);
/* Seeds out's gradient with grad_out (NULL: ones, for a 1 x 1 loss) and runs backward over the
 * nodes recorded after m, newest first. Tensors made before m (parameters, leaves, the outer
 * tape's tensors) receive their gradients; their own producers are not visited. */
saga_status saga_tape_backward_range(saga_ctx *c, saga_tape_pos m, saga_tensor *out,
                                     const saga_tensor *grad_out);
/* Frees the nodes recorded and the tensors the context made after m (their buffers go back to
 * the context's cache). */
void saga_tape_release(saga_ctx *c, saga_tape_pos m);
/* saga_tape_release(c, m), and forgets the sticky error: the work that failed after m is gone, so
 * a later step starts afresh (what saga_ctx_clear does for the whole tape). */
void saga_tape_release_failed(saga_ctx *c, saga_tape_pos m);

/* ---- context services --------------------------------------------------------------------- */

/* A context-owned tensor, uninitialised (saga_ctx_zeros: zero-filled), or NULL with the sticky
 * error set. Buffers come from a cache of those released earlier, so steady-state training does
 * not touch fresh memory. */
/* act(saga_matmul_cat_bias(c, xs, n, w, b)) for an activation whose derivative reads its output
 * alone (SAGA_ACT_RELU, SIGMOID, TANH), applied in place: the values and gradients of the
 * activation op on the product, to the bit, without the product as a tensor of its own. */
saga_tensor *nn_matmul_cat_bias_act(saga_ctx *c, saga_tensor *const *xs, int n, saga_tensor *w,
                                    saga_tensor *b, saga_act act);
saga_tensor *saga_ctx_tensor(saga_ctx *c, saga_dtype dt, int64_t rows, int64_t cols);
saga_tensor *saga_ctx_zeros(saga_ctx *c, saga_dtype dt, int64_t rows, int64_t cols);
/* A context-owned tensor over device memory that stays the caller's (not freed, not cached):
 * a block the executor streamed in. The caller keeps data valid until the tensor is released
 * (saga_tape_release / saga_ctx_clear). Its gradient, if any, is the context's as usual. */
saga_tensor *saga_ctx_wrap(saga_ctx *c, saga_dtype dt, int64_t rows, int64_t cols, void *data);
/* Gives context tensor t (f32, no gradient yet) a gradient over device memory that stays the
 * caller's (t's shape, already holding what the backward pass adds to), released with t: the
 * backward pass then adds into that memory in place. */
saga_status saga_ctx_wrap_grad(saga_ctx *c, saga_tensor *t, void *data);
/* A context-owned copy of t (no tape link) that is a leaf needing a gradient. */
saga_tensor *saga_ctx_leaf(saga_ctx *c, const saga_tensor *t);
/* Makes an existing context-owned tensor a leaf needing a gradient (no copy). */
void saga_ctx_mark_leaf(saga_ctx *c, saga_tensor *t);
/* Sets the sticky error (first one wins) and returns st; the message must already be set with
 * saga_error(). */
saga_status saga_ctx_fail(saga_ctx *c, saga_status st);
/* Recording a pass as a graph (saga_backend_capture_begin): the staging ring of
 * saga_ctx_from_host keeps room for bytes of uploads (started over now if it has to be), and
 * until saga_ctx_record_end a pass that stages more fails with SAGA_ERR_UNSUPPORTED rather than
 * overwrite what the recorded copies will read. record_end after the graph's launch (launched)
 * or after a failed recording. saga_ctx_staged_bytes: the bytes staged since the context was
 * made, for the room a pass needs. */
saga_status saga_ctx_record_begin(saga_ctx *c, size_t bytes);
/* Room in the context's pinned staging for bytes the caller writes at *host at once, then copies
 * to the device (saga_memcpy_h2d_async): on the context's stream, or on another stream that the
 * context's stream waits for (an event) before anything else is staged. */
saga_status saga_ctx_stage(saga_ctx *c, size_t bytes, void **host);
/* bytes of host memory copied to device memory dev in the context's stream order, through its
 * staging (as saga_ctx_from_host: host may change once this returns; the host does not wait). */
saga_status saga_ctx_upload(saga_ctx *c, void *dev, const void *host, size_t bytes);
saga_status saga_ctx_record_end(saga_ctx *c, bool launched);
size_t saga_ctx_staged_bytes(const saga_ctx *c);
/* Device memory of exactly bytes from the context's cache or the backend (with the same
 * fallbacks as tensors: cache flush, pressure); give it back with saga_ctx_buffer_free. */
saga_status saga_ctx_buffer(saga_ctx *c, void **out, size_t bytes);
void saga_ctx_buffer_free(saga_ctx *c, void *p, size_t bytes);
/* When an allocation fails for the budget after the context's cache is given back, fn(user,
 * bytes) is asked to free device memory it holds and returns whether it freed any (then the
 * allocation is tried again). The streamed executor's scheduler gives back blocks this way. */
void saga_ctx_set_pressure(saga_ctx *c, bool (*fn)(void *user, size_t bytes), void *user);
/* Row offset for dropout masks: while it is r, a dropout on an m x k tensor draws rows
 * r .. r + m - 1 of the mask an (r + m) x k tensor would get, so running a computation block by
 * block (rows of vertices or edges, with the same dropout counter for each block) draws the
 * masks of the whole. 0 by default; the executor sets it around each block. */
void saga_ctx_set_row_base(saga_ctx *c, int64_t row);
int64_t saga_ctx_row_base(const saga_ctx *c);
/* Row ids for dropout masks: while set, a dropout on a tensor of exactly n rows draws row ids[r]
 * of the logical tensor's mask for its row r (ids: device memory the caller keeps valid until
 * the backward pass of what it computed has run); other tensors use the row base. NULL clears.
 * The executor sets them for blocks whose rows are not a contiguous range of the graph's. */
void saga_ctx_set_row_ids(saga_ctx *c, const int32_t *ids, int64_t n);
/* The ids that apply to a tensor of rows rows, or NULL. */
const int32_t *saga_ctx_row_ids(const saga_ctx *c, int64_t rows);
/* The stream the context's ops run on. */
saga_stream *saga_ctx_stream(saga_ctx *c);
/* The kernel table, or NULL with SAGA_ERR_UNSUPPORTED recorded when slot is NULL. Use as
 *   if (!saga_ctx_kernel(c, k->spmm_f32 != NULL, "spmm_f32")) return NULL; */
bool saga_ctx_kernel(saga_ctx *c, bool present, const char *slot_name);
const saga_kernels *saga_ctx_kernels(const saga_ctx *c);

#ifdef __cplusplus
}
#endif
