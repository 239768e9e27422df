/* sched_impl.h - the block scheduler: moves blocks of bytes between host and device memory under
 * a byte cap, in an order planned ahead, prefetching on a copy stream while the compute stream
 * works. Internal to saga (the streamed executor, engine/exec/net_*.c, drives it).
 *
 *   saga_sched *s = NULL;
 *   SAGA_TRY(saga_sched_new(&s, be, cap_bytes));
 *   saga_blk *x = saga_sched_block(s, bytes, SAGA_BLK_INPUT, "vertex");   // content on the host
 *   saga_blk_set_host(x, host_ptr);
 *   ...
 *   saga_sched_plan_begin(s);                       // the steps, in the order they will run
 *   int t = saga_sched_step(s);
 *   saga_sched_use(s, t, x, SAGA_USE_READ, 0);
 *   saga_sched_use(s, t, y, SAGA_USE_WRITE, SAGA_USE_WRITEBACK);
 *   SAGA_TRY(saga_sched_plan_end(s));
 *   for (t = 0; t < saga_sched_n_steps(s); t++) {
 *       SAGA_TRY(saga_sched_begin(s, t));          // inputs resident; the next step's loading
 *       compute(saga_blk_dev(x), saga_blk_dev(y)); // on the backend's default stream
 *       SAGA_TRY(saga_sched_end(s, t));            // outputs written back, dead blocks freed
 *   }
 *   SAGA_TRY(saga_sched_finish(s));                // waits for the copies still in flight
 *
 * Eviction follows the plan: the resident block whose next use lies furthest ahead goes first
 * (Belady's rule), after being written back when its host copy is stale and it is needed again.
 * Blocks keep their device copy across plans while the cap allows, so a graph that fits is
 * loaded once and then only computed on (the in-memory case is the streamed one without
 * evictions).
 */
#pragma once

#include "backend_impl.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct saga_sched saga_sched;
typedef struct saga_blk saga_blk;

/* How long a block's content means something. */
typedef enum saga_blk_life {
    SAGA_BLK_INPUT = 0, /* given on the host, unchanged across plans (features, edge tiles): a
                         * device copy stays valid until evicted and is never written back */
    SAGA_BLK_TEMP,      /* made by a step and read by later ones of the same plan (activations,
                         * gradients): freed after its last use; written back only when evicted
                         * before a later use, or when a use asks for it */
    SAGA_BLK_STATE,     /* given on the host and changed on the device across plans (a weight
                         * tile, its optimizer moments): a device copy stays valid until evicted,
                         * and an eviction writes it back when it is newer than the host copy,
                         * whether or not the plan uses it again; saga_sched_download brings it
                         * to the host */
} saga_blk_life;

typedef enum saga_use_mode {
    SAGA_USE_READ = 1,  /* the device copy must hold the content: loaded if not resident */
    SAGA_USE_WRITE = 2, /* the step overwrites the whole block: device memory, not loaded */
    SAGA_USE_RW = 3,    /* loaded, then modified */
} saga_use_mode;

enum {
    /* after the step, copy the block to the host (or hand it to its unpack function) at once,
     * on the copy stream: for content the host reads (a halo packed from it, the result) */
    SAGA_USE_WRITEBACK = 1,
    /* the content is dead once the step ends: the device copy is freed without a write-back and
     * the host copy counts as stale, so a later READ of the block (a ring buffer's next
     * occupant) needs saga_blk_host_changed first; prefetching skips it until then */
    SAGA_USE_DISCARD = 2,
};

/* Fills staging (the block's bytes) from host data, or consumes it after a copy back. Run on a
 * host thread in copy-stream order (saga_stream_launch_host_fn): must not touch the backend. */
typedef void (*saga_blk_pack_fn)(void *user, void *staging);
typedef void (*saga_blk_unpack_fn)(void *user, const void *staging);

typedef struct saga_sched_stats {
    uint64_t h2d_bytes, d2h_bytes; /* issued by the scheduler */
    uint64_t loads, writebacks, evictions;
    double wait_seconds; /* compute side blocked on copies (exposed copy time) */
    size_t peak_bytes;   /* most bytes the scheduler's blocks held at once */
    bool copies_inline;  /* the copies ran on the default stream (saga_backend_copies_inline) */
    /* The time the copies took: timed by events on the copy stream (saga_sched_set_timed), up to
     * the last saga_sched_finish, else the backend's own figure (the CPU's copy worker's);
     * h2d_seconds, of it the host -> device copies' when timed (0 otherwise). Timed, wait_seconds
     * is the compute stream's time between reaching a step's waits for its loads and passing
     * them: the copy time the compute did not hide. */
    bool timed;
    double copy_seconds, h2d_seconds;
} saga_sched_stats;

/* A scheduler on be that keeps at most cap bytes of blocks on the device (0: no cap beyond the
 * backend's budget). trim, when not NULL, is called with trim_user when an allocation fails for
 * the budget, to give back memory held elsewhere (a context's buffer cache), before retrying. */
saga_status saga_sched_new(saga_sched **out, saga_backend *be, size_t cap, void (*trim)(void *user),
                           void *trim_user);
/* Waits for the copies in flight, frees every block (device and staging memory) and *s. */
void saga_sched_free(saga_sched **s);
/* Device bytes the blocks hold now. */
size_t saga_sched_resident_bytes(const saga_sched *s);

/* A block of bytes (not yet on the device), owned by the scheduler; NULL when out of memory.
 * kind names it in messages ("features", "tile", ...): a static string. */
saga_blk *saga_sched_block(saga_sched *s, size_t bytes, saga_blk_life life, const char *kind);
/* Frees *b (NULL after) and its device buffer, once its copies are complete; the plan in force,
 * which may use it, is dropped. Between a pass's saga_sched_finish and the next plan. */
saga_status saga_sched_block_free(saga_sched *s, saga_blk **b);
/* The block's content on the host: loads copy from it, write-backs to it. Pinned memory
 * (saga_backend_host_alloc) lets CUDA copies overlap. */
void saga_blk_set_host(saga_blk *b, void *host);
/* Or functions that fill a staging buffer for a load and consume one after a write-back, run on a
 * host thread: for content that only the host can make (rows that arrive from other ranks). */
void saga_blk_set_pack(saga_blk *b, saga_blk_pack_fn pack, saga_blk_unpack_fn unpack, void *user);
/* Or rows of a host array (base from saga_backend_host_alloc; row_bytes times n the block's
 * bytes): gathered from it when loaded, or (add) added into it when written back (rows of
 * floats, distinct). The backend moves them on the copy stream with no host thread
 * (saga_memcpy_rows_h2d_async, saga_add_rows_d2h_async); the row indices are copied here. */
saga_status saga_blk_set_rows(saga_blk *b, const saga_host_rows *hr, bool add);
/* Marks the host copy as newer than the device one (the caller changed it): the next READ
 * loads again. */
void saga_blk_host_changed(saga_blk *b);
/* saga_blk_host_changed for content that is on the host once ev completes (a copy another device
 * issued): the next load waits for ev on the copy stream, not the host. ev must be one the copy
 * stream can wait for (saga_stream_can_wait) and stay recorded at that point until the load is
 * issued. */
void saga_blk_host_changed_after(saga_blk *b, saga_event *ev);
/* The device buffer while a step that uses the block runs (between begin and end), else NULL. */
void *saga_blk_dev(const saga_blk *b);
size_t saga_blk_bytes(const saga_blk *b);

/* ---- plans -------------------------------------------------------------------------------- */

/* Forgets the previous plan (resident blocks stay resident). */
void saga_sched_plan_begin(saga_sched *s);
/* Appends a step; returns its index, or -1 when out of memory (plan_end then fails). */
int saga_sched_step(saga_sched *s);
/* Step t's loads are not issued before step t - 1 has ended: for inputs gathered from host rows
 * that step t - 1 (or an earlier one) writes back, so the copy stream has the write-back first. */
void saga_sched_step_barrier(saga_sched *s, int t);
/* Step t's blocks may hold up to cap bytes at once, above the scheduler's cap (a step whose own
 * tensors leave more room than the largest step's, for which the cap was set); ignored without a
 * cap or below it. */
void saga_sched_step_cap(saga_sched *s, int t, size_t cap);
/* A barrier whose loads are issued only when step t begins: for inputs packed from host content
 * the caller changes between the steps (rows received from other ranks). */
void saga_sched_step_hold(saga_sched *s, int t);
/* Step t uses b in mode with flags. Several uses of a block in one step merge into one (modes
 * and flags or-ed). */
void saga_sched_use(saga_sched *s, int t, saga_blk *b, saga_use_mode mode, unsigned flags);
/* Closes the plan. SAGA_ERR_BUDGET when one step's blocks alone exceed the cap (the message
 * names the step's bytes and the cap); SAGA_ERR_OUT_OF_MEMORY when the plan could not be
 * recorded. */
saga_status saga_sched_plan_end(saga_sched *s);
int saga_sched_n_steps(const saga_sched *s);

/* ---- running ------------------------------------------------------------------------------ */

/* Makes step t's blocks resident (waiting for their loads), allocates its written blocks, and
 * starts loading the next step's inputs on the copy stream. Steps run in order, each once. */
saga_status saga_sched_begin(saga_sched *s, int t);
/* After step t's compute was issued on the default stream: write-backs it asked for, and frees
 * the temporary blocks no later step uses. */
saga_status saga_sched_end(saga_sched *s, int t);
/* Evicts blocks that the running step does not use (furthest next use first) until bytes are
 * freed or none is left; returns whether any was. For memory the compute needs more urgently. */
bool saga_sched_give_back(saga_sched *s, size_t bytes);
/* After a plan was left before its end: makes b's host copy current (writing it back and waiting
 * when only the device has it). No step may be running. */
saga_status saga_sched_download(saga_sched *s, saga_blk *b);
/* Records ev on the copy stream after the copies issued so far (write-backs included), without
 * waiting: ev completes once their content is on the host, for a reader on another stream or
 * device to wait for (saga_blk_host_changed_after). */
saga_status saga_sched_copies_event(saga_sched *s, saga_event *ev);
/* Waits until the copies in flight (write-backs included) have completed: the host copies are
 * then current. */
saga_status saga_sched_finish(saga_sched *s);
/* saga_sched_finish at the end of a pass, in one wait for the whole device (every stream), so
 * that what the compute left for the host (a result, a loss) is complete too. */
saga_status saga_sched_finish_device(saga_sched *s);

/* Writes one JSON line to f per copy and per step's compute, once the streams have run it (at
 * saga_sched_finish and saga_sched_free): {"trace":"copy","stream":"copy","dir":"h2d"|"d2h",
 * "block":KIND,"bytes":N,"plan":P,"step":T,"start":S,"end":E} and {"trace":"compute",
 * "stream":"compute","plan":P,"step":T,"start":S,"end":E}, in seconds from the first traced
 * work, timed by events recorded on the stream that did the work (the device's clock on CUDA;
 * -1 where the backend cannot time two events); plan counts saga_sched_plan_begin calls. A copy's
 * step is the step it serves (a load) or the one that ran when it was issued (a write-back; -1
 * between steps). NULL: no trace (the default; the scheduler then does no tracing work). Tracing
 * synchronizes the device at each flush, so it changes the timings it shows a little. f is not
 * owned and must outlive the scheduler. */
void saga_sched_set_trace(saga_sched *s, FILE *f);

/* Times the copies and the compute's waits with events on the streams (saga_sched_stats): on from
 * saga_sched_new for a backend whose copies run on an engine of their own (CUDA), where the host
 * cannot see when they run. Two events a copy and two a step that waits for its loads, from a
 * pool kept across passes; read back at saga_sched_finish, which waits for the copies anyway. */
saga_status saga_sched_set_timed(saga_sched *s, bool on);

void saga_sched_get_stats(const saga_sched *s, saga_sched_stats *out);
/* Starts the figures of a new pass. A pass reset before it was finished (queued without a wait)
 * keeps its timing pairs apart: once a finish has read them, saga_sched_held_stats gives its
 * timed figures (copy_seconds, h2d_seconds, wait_seconds) and returns true; false before, after
 * the next reset, or when not timed. */
void saga_sched_reset_stats(saga_sched *s);
bool saga_sched_held_stats(const saga_sched *s, saga_sched_stats *out);

#ifdef __cplusplus
}
#endif
