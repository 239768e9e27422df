// runtime.cpp - the CUDA simulator's runtime: devices, memory, streams, events, host functions,
// copies as CUDA documents them, graphs made by stream capture, and the fiber scheduler that runs
// a kernel's threads.
//
// Configuration (read once, at the first call):
//   SAGA_CUDASIM_DEVICES  number of simulated devices (default 1, at most 16)
//   SAGA_CUDASIM_MEM      bytes of memory per device, with an optional K, M or G (default 4G)
//   SAGA_CUDASIM_CC       compute capability MAJOR.MINOR reported (default 9.0)
//   SAGA_CUDASIM_ORDER    forward | reverse | random[:SEED]: the order in which the threads of a
//                         block, and the blocks of a grid, are run (default forward)
//   SAGA_CUDASIM_STATS    a file to which each device's peak allocated bytes are appended at exit,
//                         and the calls counted between each cudaProfilerStart and
//                         cudaProfilerStop (a window), as one JSON line per window
#include "cudasim_internal.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <string>
#include <sys/mman.h>
#include <thread>
#include <typeinfo>
#include <unistd.h>
#include <vector>

// The fibers switch with a few instructions of assembly on x86-64, with ucontext elsewhere (and
// where CUDASIM_UCONTEXT is defined, to test that path).
#if defined(__x86_64__) && !defined(CUDASIM_UCONTEXT)
#define CUDASIM_ASM_SWITCH 1
#else
#define CUDASIM_ASM_SWITCH 0
#include <ucontext.h>
#endif

// Under AddressSanitizer every switch between stacks is announced, so that the sanitizer tracks
// which stack is live (and a kernel's out-of-bounds access to device memory, a heap block with
// red zones here, is reported).
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#define CUDASIM_ASAN 1
#else
#define CUDASIM_ASAN 0
#endif

namespace cudasim {

thread_local thread_state *current = nullptr;

[[noreturn]] void fatal(const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "cudasim: %s\n", msg);
    fflush(stderr);
    abort();
}

namespace {

// ---- configuration ----------------------------------------------------------------------------

enum order_kind { ORDER_FORWARD, ORDER_REVERSE, ORDER_RANDOM };

struct config {
    int devices = 1;
    size_t mem = (size_t)4 << 30;
    int cc_major = 9, cc_minor = 0;
    order_kind order = ORDER_FORWARD;
    uint64_t seed = 1;
    std::string stats;
};

size_t parse_bytes(const char *name, const char *s) {
    char *end = nullptr;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s)
        fatal("%s=%s: expected a number of bytes (with an optional K, M or G)", name, s);
    int shift = 0;
    if (*end == 'K' || *end == 'k')
        shift = 10;
    else if (*end == 'M' || *end == 'm')
        shift = 20;
    else if (*end == 'G' || *end == 'g')
        shift = 30;
    else if (*end)
        fatal("%s=%s: expected a number of bytes (with an optional K, M or G)", name, s);
    if (shift && end[1])
        fatal("%s=%s: trailing characters after the unit", name, s);
    if (v > (SIZE_MAX >> shift))
        fatal("%s=%s: too large", name, s);
    return (size_t)v << shift;
}

config read_config() {
    config c;
    if (const char *s = getenv("SAGA_CUDASIM_DEVICES"); s && *s) {
        char *end = nullptr;
        long v = strtol(s, &end, 10);
        if (*end || v < 0 || v > 16)
            fatal("SAGA_CUDASIM_DEVICES=%s: expected a count from 0 to 16", s);
        c.devices = (int)v;
    }
    if (const char *s = getenv("SAGA_CUDASIM_MEM"); s && *s)
        c.mem = parse_bytes("SAGA_CUDASIM_MEM", s);
    if (const char *s = getenv("SAGA_CUDASIM_CC"); s && *s) {
        if (sscanf(s, "%d.%d", &c.cc_major, &c.cc_minor) != 2 || c.cc_major < 1)
            fatal("SAGA_CUDASIM_CC=%s: expected MAJOR.MINOR, e.g. 9.0", s);
    }
    if (const char *s = getenv("SAGA_CUDASIM_ORDER"); s && *s) {
        if (strcmp(s, "forward") == 0)
            c.order = ORDER_FORWARD;
        else if (strcmp(s, "reverse") == 0)
            c.order = ORDER_REVERSE;
        else if (strncmp(s, "random", 6) == 0 && (s[6] == '\0' || s[6] == ':')) {
            c.order = ORDER_RANDOM;
            if (s[6] == ':') {
                char *end = nullptr;
                c.seed = strtoull(s + 7, &end, 10);
                if (end == s + 7 || *end)
                    fatal("SAGA_CUDASIM_ORDER=%s: expected random:SEED with a decimal seed", s);
            }
        } else
            fatal("SAGA_CUDASIM_ORDER=%s: expected forward, reverse, random or random:SEED", s);
    }
    if (const char *s = getenv("SAGA_CUDASIM_STATS"); s && *s)
        c.stats = s;
    return c;
}

uint64_t splitmix64(uint64_t *state) {
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

// A permutation of 0..n-1 in the configured order.
void order_indices(std::vector<uint32_t> &v, uint64_t *rng, order_kind order) {
    if (order == ORDER_REVERSE)
        std::reverse(v.begin(), v.end());
    else if (order == ORDER_RANDOM)
        for (size_t i = v.size(); i > 1; i--)
            std::swap(v[i - 1], v[splitmix64(rng) % i]);
}

// ---- global state (never destroyed: worker threads may still run at exit) ---------------------

struct stream_impl;
struct capture_state;

struct device_state {
    size_t used = 0, peak = 0;
    stream_impl *legacy = nullptr;
    std::vector<stream_impl *> streams;
};

struct allocation {
    size_t bytes;
    int device; // -1: pinned host memory
};

struct global_state {
    config cfg;
    std::mutex lock; // devices, allocations, stream lists
    std::vector<device_state> devices;
    std::map<uintptr_t, allocation> allocations;
    std::atomic<uint64_t> launches{0};
    // the open window (cudaProfilerStart .. cudaProfilerStop) and its counts, under count_lock
    std::mutex count_lock;
    bool window = false;
    int windows = 0;
    struct counts {
        std::map<std::string, uint64_t> calls; // the program's own calls, per API entry
        uint64_t kernels = 0, library_ops = 0, sync_copies = 0;
        // cudaEventSynchronize calls whose event's stream had nothing queued after the event
        uint64_t dry_event_waits = 0;
        uint64_t bytes[4] = {}; // copied host->host, host->device, device->host, device->device
        // cudaLaunchHostFunc calls on a capturing stream, host nodes run by graph launches
        uint64_t captured_host_fns = 0, graph_host_fns = 0;
        uint64_t graph_launches = 0, graph_nodes = 0;
    } w;
    // the captures under way (cudaStreamBeginCapture .. cudaStreamEndCapture), with every
    // stream's and event's capture state, under capture_lock
    std::mutex capture_lock;
    std::vector<std::shared_ptr<capture_state>> captures;
    uint64_t capture_ids = 0;
};

global_state *g = nullptr;
std::once_flag g_once;

// The calls that make the host wait for the device, as the simulator runs them (cudaFree waits
// for the device; a copy into pageable memory returns once the data is there).
const char *const host_waits[] = {"cudaDeviceSynchronize",
                                  "cudaStreamSynchronize",
                                  "cudaEventSynchronize",
                                  "cudaMemcpy",
                                  "cudaMemset",
                                  "cudaFree"};

// The waits after which the device has nothing the host queued before them left to run on the
// stream waited for ("drain_waits"): all of the above but cudaEventSynchronize, which counts only
// when nothing was queued on its event's stream after the event (a host one step ahead of the
// device waits for the step before the last it queued, and the device keeps running).
const char *const drain_waits[] = {"cudaDeviceSynchronize", "cudaStreamSynchronize", "cudaMemcpy",
                                   "cudaMemset", "cudaFree"};

// Appends the open window's counts to f as one JSON line. Caller holds g->count_lock.
void write_window(FILE *f) {
    const global_state::counts &w = g->w;
    auto calls = [&w](const char *name) {
        auto it = w.calls.find(name);
        return it == w.calls.end() ? (uint64_t)0 : it->second;
    };
    uint64_t waits = w.sync_copies, drains = w.sync_copies + w.dry_event_waits;
    for (const char *name : host_waits)
        waits += calls(name);
    for (const char *name : drain_waits)
        drains += calls(name);
    // a host function recorded by a capture runs, and counts, with each launch of its graph
    const uint64_t fn_calls = calls("cudaLaunchHostFunc");
    const uint64_t host_fns =
        (fn_calls > w.captured_host_fns ? fn_calls - w.captured_host_fns : 0) + w.graph_host_fns;
    fprintf(f,
            "{\"window\":%d,\"host_waits\":%llu,\"drain_waits\":%llu,\"host_fns\":%llu,"
            "\"device_allocs\":%llu,"
            "\"device_frees\":%llu,\"pinned_allocs\":%llu,\"pinned_frees\":%llu,"
            "\"kernels\":%llu,\"library_ops\":%llu,\"graph_launches\":%llu,"
            "\"graph_nodes\":%llu,\"h2d_bytes\":%llu,\"d2h_bytes\":%llu,\"d2d_bytes\":%llu,"
            "\"h2h_bytes\":%llu,\"calls\":{",
            g->windows, (unsigned long long)waits, (unsigned long long)drains,
            (unsigned long long)host_fns, (unsigned long long)calls("cudaMalloc"),
            (unsigned long long)calls("cudaFree"), (unsigned long long)calls("cudaHostAlloc"),
            (unsigned long long)calls("cudaFreeHost"), (unsigned long long)w.kernels,
            (unsigned long long)w.library_ops, (unsigned long long)w.graph_launches,
            (unsigned long long)w.graph_nodes, (unsigned long long)w.bytes[1],
            (unsigned long long)w.bytes[2], (unsigned long long)w.bytes[3],
            (unsigned long long)w.bytes[0]);
    bool first = true;
    for (const auto &c : w.calls) {
        fprintf(f, "%s\"%s\":%llu", first ? "" : ",", c.first.c_str(),
                (unsigned long long)c.second);
        first = false;
    }
    fprintf(f, "}}\n");
}

void write_stats() {
    FILE *f = fopen(g->cfg.stats.c_str(), "a");
    if (!f)
        return;
    {
        std::lock_guard<std::mutex> guard(g->count_lock);
        if (g->window) // still open at exit
            write_window(f);
    }
    std::lock_guard<std::mutex> guard(g->lock);
    for (size_t d = 0; d < g->devices.size(); d++)
        fprintf(f, "device %zu peak %zu limit %zu\n", d, g->devices[d].peak, g->cfg.mem);
    fclose(f);
}

global_state &state() {
    std::call_once(g_once, [] {
        g = new global_state();
        g->cfg = read_config();
        g->devices.resize((size_t)g->cfg.devices);
        if (!g->cfg.stats.empty())
            atexit(write_stats);
    });
    return *g;
}

thread_local cudaError_t last_error = cudaSuccess;
thread_local int current_device = 0;
thread_local bool in_host_fn = false;

cudaError_t fail(cudaError_t err) {
    last_error = err;
    return err;
}

// Adds to one of the open window's counters.
static void count(uint64_t &counter, uint64_t n = 1) {
    std::lock_guard<std::mutex> guard(g->count_lock);
    if (g->window)
        counter += n;
}

// Every API entry: CUDA forbids runtime calls from a host function queued on a stream.
#define API_ENTRY() api_scope api_scope_(__func__)

// The allocation that holds [p, p + bytes), or nullptr. Caller holds g->lock. A pointer one past
// the end of an allocation, with bytes == 0, counts as inside it.
const std::pair<const uintptr_t, allocation> *find_allocation(const void *p, size_t bytes) {
    const uintptr_t a = (uintptr_t)p;
    auto it = g->allocations.upper_bound(a);
    if (it == g->allocations.begin())
        return nullptr;
    --it;
    const uintptr_t base = it->first, end = base + it->second.bytes;
    if (a < base || a > end || bytes > end - a)
        return nullptr;
    if (a == end && bytes > 0)
        return nullptr;
    return &*it;
}

// -1 pageable host (or unknown), -2 pinned host, else the device that owns the range; -3 when
// the range starts in an allocation and runs past its end.
int classify(const void *p, size_t bytes) {
    std::lock_guard<std::mutex> guard(g->lock);
    const auto *a = find_allocation(p, 0);
    if (!a)
        return -1;
    if (bytes > a->first + a->second.bytes - (uintptr_t)p)
        return -3;
    return a->second.device < 0 ? -2 : a->second.device;
}

// ---- streams ----------------------------------------------------------------------------------

struct stream_impl {
    int device;
    bool legacy;
    bool blocking = true; // not created with cudaStreamNonBlocking
    // the capture this stream records into, if any, and the nodes its next node depends on (in
    // the order they were added); with the arrays cudaStreamGetCaptureInfo hands out. Under
    // g->capture_lock.
    std::shared_ptr<capture_state> cap;
    std::vector<size_t> deps;
    std::vector<cudaGraphNode_t> deps_out;
    std::vector<cudaGraphEdgeData> edges_out;
    std::mutex m;
    std::condition_variable cv;
    std::deque<std::function<void()>> queue;
    uint64_t submitted = 0, done = 0;
    bool stop = false;
    std::thread worker;

    void run() {
        current_device = device;
        std::unique_lock<std::mutex> lk(m);
        for (;;) {
            cv.wait(lk, [&] { return stop || !queue.empty(); });
            if (queue.empty())
                return;
            std::function<void()> task = std::move(queue.front());
            queue.pop_front();
            lk.unlock();
            task();
            lk.lock();
            done++;
            cv.notify_all();
        }
    }
    uint64_t push(std::function<void()> task) {
        std::lock_guard<std::mutex> guard(m);
        queue.push_back(std::move(task));
        cv.notify_all();
        return ++submitted;
    }
    void wait_for(uint64_t ticket) {
        std::unique_lock<std::mutex> lk(m);
        cv.wait(lk, [&] { return done >= ticket; });
    }
    void drain() {
        uint64_t t;
        {
            std::lock_guard<std::mutex> guard(m);
            t = submitted;
        }
        wait_for(t);
    }
    bool idle() {
        std::lock_guard<std::mutex> guard(m);
        return done == submitted;
    }
};

stream_impl *new_stream(int device, bool legacy) {
    stream_impl *s = new stream_impl();
    s->device = device;
    s->legacy = legacy;
    s->worker = std::thread([s] { s->run(); });
    return s;
}

stream_impl *legacy_stream(int device) {
    std::lock_guard<std::mutex> guard(g->lock);
    device_state &d = g->devices[(size_t)device];
    if (!d.legacy) {
        d.legacy = new_stream(device, true);
        d.streams.push_back(d.legacy);
    }
    return d.legacy;
}

// The stream a handle names: NULL is the current device's default (legacy) stream.
stream_impl *resolve(cudaStream_t s) {
    if (!s)
        return legacy_stream(current_device);
    return reinterpret_cast<stream_impl *>(s);
}

// ---- events -----------------------------------------------------------------------------------

struct event_impl {
    int device;
    unsigned flags;
    std::mutex m;
    std::condition_variable cv;
    uint64_t recorded = 0, completed = 0;
    std::chrono::steady_clock::time_point when;
    // the stream of its last record outside a capture, and that record's place in its queue
    stream_impl *last_stream = nullptr;
    uint64_t last_ticket = 0;
    // Last recorded in a capturing stream: the capture (expired once it ended) and the nodes the
    // event stands for. Under g->capture_lock.
    bool captured = false;
    std::weak_ptr<capture_state> cap;
    std::vector<size_t> cap_nodes;
};

struct event_handle {
    std::shared_ptr<event_impl> e;
};

event_impl *ev(cudaEvent_t h) {
    return reinterpret_cast<event_handle *>(h)->e.get();
}

// ---- fibers -----------------------------------------------------------------------------------

constexpr size_t STACK_BYTES = 256 << 10, GUARD_BYTES = 4096;

struct stack {
    char *base; // lowest usable byte (above the guard page)
};

thread_local std::vector<stack> spare_stacks;

stack get_stack() {
    if (!spare_stacks.empty()) {
        stack s = spare_stacks.back();
        spare_stacks.pop_back();
#if CUDASIM_ASAN
        // the frames of the thread that last ran here never returned: forget their red zones
        __asan_unpoison_memory_region(s.base, STACK_BYTES);
#endif
        return s;
    }
    void *p = mmap(nullptr, STACK_BYTES + GUARD_BYTES, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
        fatal("cannot map a fiber stack of %zu bytes", STACK_BYTES);
    mprotect(p, GUARD_BYTES, PROT_NONE); // a stack overflow faults instead of corrupting memory
    return stack{static_cast<char *>(p) + GUARD_BYTES};
}

void put_stack(stack s) {
    spare_stacks.push_back(s);
}

} // namespace
} // namespace cudasim

extern "C" void cudasim_fiber_main(void);

#if CUDASIM_ASM_SWITCH
// cudasim_ctx_switch(&save, to): saves the callee-saved registers, the SSE and x87 control words
// and the stack pointer into *save, then resumes the context whose stack pointer is to. A new
// context starts in cudasim_fiber_start, which calls cudasim_fiber_main on an aligned stack.
extern "C" void cudasim_ctx_switch(void **save, void *to);
extern "C" void cudasim_fiber_start(void);
asm(R"(
    .text
    .p2align 4
    .globl cudasim_ctx_switch
    .hidden cudasim_ctx_switch
    .type cudasim_ctx_switch, @function
cudasim_ctx_switch:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    subq $8, %rsp
    stmxcsr (%rsp)
    fnstcw 4(%rsp)
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    ldmxcsr (%rsp)
    fldcw 4(%rsp)
    addq $8, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
    .size cudasim_ctx_switch, .-cudasim_ctx_switch

    .p2align 4
    .globl cudasim_fiber_start
    .hidden cudasim_fiber_start
    .type cudasim_fiber_start, @function
cudasim_fiber_start:
    call cudasim_fiber_main@PLT
    ud2
    .size cudasim_fiber_start, .-cudasim_fiber_start
)");
#endif

namespace cudasim {
namespace {

struct kernel_job {
    const char *name;
    site at;
    dim3 grid, block;
    std::function<void()> body;
    uint64_t seed;
};

struct fiber {
    thread_state ts;
    int index, warp, lane;
    enum { NEW, READY, WAITING, DONE } state = NEW;
    bool has_stack = false;
    stack stk{};
#if CUDASIM_ASM_SWITCH
    void *sp = nullptr;
#else
    ucontext_t uc;
#endif
    void *asan_fake = nullptr; // the sanitizer's fake stack of this fiber while it is switched out
    // the warp collective this lane waits at
    uint64_t payload = 0, result = 0;
    int param = 0;
};

struct warp_state {
    unsigned exists = 0, live = 0; // lanes of the block, lanes not yet exited
    bool pending = false;          // a collective has begun and not every lane has arrived
    site at{};
    collective_kind kind = COLL_SYNCWARP;
    unsigned mask = 0, arrived = 0;
    int width = 32;
};

struct block_run {
    const kernel_job *job;
    uint3 block_idx;
    std::vector<fiber> threads;
    std::vector<warp_state> warps;
    std::deque<int> ready;
    int live = 0;
    std::vector<int> barrier; // threads waiting at __syncthreads
    site barrier_at{};
    uint64_t rng;
    fiber *running = nullptr;
    // the worker's own stack, as the sanitizer reports it when a fiber first starts
    void *asan_sched_fake = nullptr;
    const void *asan_sched_bottom = nullptr;
    size_t asan_sched_size = 0;
#if CUDASIM_ASM_SWITCH
    void *sched_sp = nullptr;
#else
    ucontext_t sched_uc;
#endif
};

thread_local block_run *cur_block = nullptr;

const char *kind_name(collective_kind k) {
    switch (k) {
    case COLL_SHFL:
        return "__shfl_sync";
    case COLL_SHFL_UP:
        return "__shfl_up_sync";
    case COLL_SHFL_DOWN:
        return "__shfl_down_sync";
    case COLL_SHFL_XOR:
        return "__shfl_xor_sync";
    case COLL_BALLOT:
        return "__ballot_sync";
    case COLL_SYNCWARP:
        return "__syncwarp";
    case COLL_ANY:
        return "__any_sync";
    case COLL_ALL:
        return "__all_sync";
    }
    return "?";
}

// "kernel k (ops/cuda/x.cu:12), block (3,0,0), thread (17,0,0)"
std::string where(const block_run &b, const fiber *f) {
    char buf[512];
    int n = snprintf(buf, sizeof buf, "kernel %s launched at %s:%d, block (%u,%u,%u)", b.job->name,
                     b.job->at.file, b.job->at.line, b.block_idx.x, b.block_idx.y, b.block_idx.z);
    if (f && n > 0 && (size_t)n < sizeof buf)
        snprintf(buf + n, sizeof buf - (size_t)n, ", thread (%u,%u,%u)", f->ts.thread_idx.x,
                 f->ts.thread_idx.y, f->ts.thread_idx.z);
    return buf;
}

// Makes the threads in ids ready, in the configured order.
void make_ready(block_run &b, std::vector<int> &ids) {
    std::sort(ids.begin(), ids.end());
    std::vector<uint32_t> v(ids.begin(), ids.end());
    order_indices(v, &b.rng, g->cfg.order);
    for (uint32_t i : v) {
        b.threads[i].state = fiber::READY;
        b.ready.push_back((int)i);
    }
}

void yield_to_scheduler() {
    block_run &b = *cur_block;
    fiber *f = b.running;
#if CUDASIM_ASAN
    __sanitizer_start_switch_fiber(&f->asan_fake, b.asan_sched_bottom, b.asan_sched_size);
#endif
#if CUDASIM_ASM_SWITCH
    cudasim_ctx_switch(&f->sp, b.sched_sp);
#else
    swapcontext(&f->uc, &b.sched_uc);
#endif
#if CUDASIM_ASAN
    __sanitizer_finish_switch_fiber(f->asan_fake, &b.asan_sched_bottom, &b.asan_sched_size);
#endif
    current = &f->ts;
}

void release_barrier(block_run &b) {
    std::vector<int> ids;
    ids.swap(b.barrier);
    make_ready(b, ids);
}

void complete_collective(block_run &b, warp_state &w, int warp) {
    const int base_of = ~(w.width - 1);
    fiber *lanes = &b.threads[(size_t)warp * 32];
    uint64_t ballot = 0;
    bool any = false, all = true;
    for (int l = 0; l < 32; l++)
        if (w.mask & (1u << l)) {
            ballot |= (lanes[l].payload & 1) << l;
            any |= lanes[l].payload != 0;
            all &= lanes[l].payload != 0;
        }
    std::vector<int> ids;
    for (int l = 0; l < 32; l++) {
        if (!(w.mask & (1u << l)))
            continue;
        fiber &f = lanes[l];
        const int base = l & base_of, p = f.param;
        int src = l;
        switch (w.kind) {
        case COLL_SHFL:
            src = base + (p & (w.width - 1));
            break;
        case COLL_SHFL_UP:
            src = l - base >= p ? l - p : l;
            break;
        case COLL_SHFL_DOWN:
            src = l - base + p < w.width ? l + p : l;
            break;
        case COLL_SHFL_XOR:
            src = l ^ p;
            if ((src & base_of) != base || src > 31)
                src = l;
            break;
        default:
            break;
        }
        if (w.kind <= COLL_SHFL_XOR) {
            if (!(w.mask & (1u << src)))
                fatal("%s at %s:%d: lane %d reads lane %d, which is not in the mask 0x%08x (%s)",
                      kind_name(w.kind), w.at.file, w.at.line, l, src, w.mask,
                      where(b, &f).c_str());
            f.result = lanes[src].payload;
        } else if (w.kind == COLL_BALLOT) {
            f.result = ballot;
        } else if (w.kind == COLL_ANY) {
            f.result = any;
        } else if (w.kind == COLL_ALL) {
            f.result = all;
        } else {
            f.result = 0;
        }
        ids.push_back(f.index);
    }
    w.pending = false;
    w.arrived = 0;
    make_ready(b, ids);
}

std::string describe_waiters(const block_run &b) {
    std::string s;
    char buf[256];
    if (!b.barrier.empty()) {
        snprintf(buf, sizeof buf, "%zu of %d live threads wait at __syncthreads (%s:%d)",
                 b.barrier.size(), b.live, b.barrier_at.file, b.barrier_at.line);
        s += buf;
    }
    for (size_t w = 0; w < b.warps.size(); w++) {
        const warp_state &ws = b.warps[w];
        if (!ws.pending)
            continue;
        snprintf(buf, sizeof buf,
                 "%swarp %zu: lanes 0x%08x of mask 0x%08x wait at %s (%s:%d), live lanes 0x%08x",
                 s.empty() ? "" : "; ", w, ws.arrived, ws.mask, kind_name(ws.kind), ws.at.file,
                 ws.at.line, ws.live);
        s += buf;
    }
    return s;
}

void thread_exited(block_run &b, fiber &f) {
    b.live--;
    warp_state &w = b.warps[(size_t)f.warp];
    w.live &= ~(1u << f.lane);
    if (w.pending && (w.mask & (1u << f.lane)) && !(w.arrived & (1u << f.lane)))
        fatal("%s at %s:%d names lane %d, which exited without reaching it (%s)", kind_name(w.kind),
              w.at.file, w.at.line, f.lane, where(b, &f).c_str());
    if (!b.barrier.empty() && (int)b.barrier.size() == b.live)
        release_barrier(b);
}

void run_block(const kernel_job &job, uint3 bidx, uint64_t seed) {
    block_run b;
    b.job = &job;
    b.block_idx = bidx;
    b.rng = seed;
    const unsigned bx = job.block.x, by = job.block.y, bz = job.block.z;
    const int n = (int)(bx * by * bz);
    b.threads.resize((size_t)n);
    b.warps.resize((size_t)(n + 31) / 32);
    for (int i = 0; i < n; i++) {
        fiber &f = b.threads[(size_t)i];
        f.index = i;
        f.warp = i / 32;
        f.lane = i % 32;
        f.ts.thread_idx = uint3{(unsigned)i % bx, (unsigned)i / bx % by, (unsigned)i / (bx * by)};
        f.ts.block_idx = bidx;
        f.ts.block_dim = job.block;
        f.ts.grid_dim = job.grid;
        b.warps[(size_t)f.warp].exists |= 1u << f.lane;
    }
    for (warp_state &w : b.warps)
        w.live = w.exists;
    b.live = n;
    std::vector<int> all((size_t)n);
    for (int i = 0; i < n; i++)
        all[(size_t)i] = i;
    make_ready(b, all);

    block_run *saved = cur_block;
    cur_block = &b;
    while (!b.ready.empty()) {
        fiber &f = b.threads[(size_t)b.ready.front()];
        b.ready.pop_front();
        if (!f.has_stack) {
            f.stk = get_stack();
            f.has_stack = true;
#if CUDASIM_ASM_SWITCH
            // the frame cudasim_ctx_switch pops: control words, r15..rbp, then the return address
            uint64_t *top = reinterpret_cast<uint64_t *>(f.stk.base + STACK_BYTES);
            uint64_t *sp = top - 8;
            uint32_t mxcsr;
            uint16_t fcw;
            asm volatile("stmxcsr %0" : "=m"(mxcsr));
            asm volatile("fnstcw %0" : "=m"(fcw));
            sp[0] = (uint64_t)mxcsr | ((uint64_t)fcw << 32);
            for (int r = 1; r < 7; r++)
                sp[r] = 0;
            sp[7] = (uint64_t)(uintptr_t)&cudasim_fiber_start;
            f.sp = sp;
#else
            getcontext(&f.uc);
            f.uc.uc_stack.ss_sp = f.stk.base;
            f.uc.uc_stack.ss_size = STACK_BYTES;
            f.uc.uc_link = nullptr;
            makecontext(&f.uc, cudasim_fiber_main, 0);
#endif
        }
        b.running = &f;
        current = &f.ts;
#if CUDASIM_ASAN
        __sanitizer_start_switch_fiber(&b.asan_sched_fake, f.stk.base, STACK_BYTES);
#endif
#if CUDASIM_ASM_SWITCH
        cudasim_ctx_switch(&b.sched_sp, f.sp);
#else
        swapcontext(&b.sched_uc, &f.uc);
#endif
#if CUDASIM_ASAN
        __sanitizer_finish_switch_fiber(b.asan_sched_fake, nullptr, nullptr);
#endif
        if (f.state == fiber::DONE) {
            put_stack(f.stk);
            f.has_stack = false;
            thread_exited(b, f);
        }
    }
    cur_block = saved;
    current = nullptr;
    if (b.live > 0)
        fatal("deadlock in %s: %s", where(b, nullptr).c_str(), describe_waiters(b).c_str());
}

void run_kernel(const kernel_job &job) {
    const uint64_t n = (uint64_t)job.grid.x * job.grid.y * job.grid.z;
    uint64_t rng = job.seed;
    auto coords = [&](uint64_t i) {
        return uint3{(unsigned)(i % job.grid.x), (unsigned)(i / job.grid.x % job.grid.y),
                     (unsigned)(i / ((uint64_t)job.grid.x * job.grid.y))};
    };
    if (g->cfg.order == ORDER_FORWARD || n > ((uint64_t)1 << 26)) {
        for (uint64_t i = 0; i < n; i++)
            run_block(job, coords(i), splitmix64(&rng));
        return;
    }
    std::vector<uint32_t> order((size_t)n);
    for (uint64_t i = 0; i < n; i++)
        order[i] = (uint32_t)i;
    order_indices(order, &rng, g->cfg.order);
    for (uint32_t i : order)
        run_block(job, coords(i), splitmix64(&rng));
}

// ---- stream capture ---------------------------------------------------------------------------

// cudaThreadExchangeStreamCaptureMode's mode of the calling thread
thread_local cudaStreamCaptureMode thread_mode = cudaStreamCaptureModeGlobal;

enum node_kind { NODE_KERNEL, NODE_MEMCPY, NODE_MEMSET, NODE_HOST, NODE_LIBRARY, NODE_EVENT_WAIT };

// What one captured call does each time a launch of its graph runs it. Arguments were taken by
// value at the call, as CUDA records them.
struct graph_node {
    node_kind kind = NODE_KERNEL;
    std::vector<size_t> deps;  // earlier nodes of the graph, in the order capture added them
    std::function<void()> run; // empty for an event wait and an issued library operation
    std::function<std::function<void()>()> make; // an issued library operation's work, per launch
    const void *func = nullptr;                  // a kernel's function
    const std::type_info *op = nullptr;          // a library operation's kind (its closure's type)
    int dir = 0;                                 // a copy's direction, as check_copy gives it
    size_t bytes = 0;                            // a copy's or a memset's
    int dst_dev = -1, src_dev = -1;    // what holds a copy's or memset's operands (classify)
    std::shared_ptr<event_impl> event; // an external event wait's event
};

struct graph_impl {
    int device = 0;
    bool capturing = false;                         // a capture still adds to it
    std::vector<std::unique_ptr<graph_node>> nodes; // a node's handle is its address
};

// A capture sequence: begun on its origin stream, joined by the streams that waited on events
// recorded in it, ended on the origin, which takes every stream out of capture.
struct capture_state {
    uint64_t id = 0;
    cudaStreamCaptureMode mode = cudaStreamCaptureModeGlobal;
    std::thread::id thread; // the one that began it
    stream_impl *origin = nullptr;
    graph_impl *graph = nullptr; // owned until cudaStreamEndCapture hands it out
    bool invalidated = false;
    std::vector<stream_impl *> streams; // the origin first
    ~capture_state() { delete graph; }
};

// Set when a launch of an executable graph has run, for the next launch of the same graph.
struct launch_gate {
    std::mutex m;
    std::condition_variable cv;
    bool done = false;
};

struct exec_impl {
    int device = 0;
    std::mutex m; // nodes, last
    // Replaced whole by cudaGraphExecUpdate: launches already queued keep their parameters.
    std::shared_ptr<const std::vector<graph_node>> nodes;
    std::shared_ptr<launch_gate> last;
};

// The rest of this section: caller holds g->capture_lock, unless it says otherwise.

// Whether a blocking stream of device captures. The legacy stream then may not be used, since its
// work would depend on the capture's; with invalidate, the attempt invalidates those captures.
bool legacy_blocked(int device, bool invalidate) {
    bool blocked = false;
    for (const auto &c : g->captures)
        for (const stream_impl *s : c->streams)
            if (s->blocking && s->device == device) {
                blocked = true;
                if (invalidate)
                    c->invalidated = true;
                break;
            }
    return blocked;
}

// Where work queued on s goes: into s's capture (*cap), onto s's queue (*cap null), or nowhere,
// with the error CUDA returns.
cudaError_t stream_use(stream_impl *s, capture_state **cap) {
    *cap = nullptr;
    if (s->legacy && legacy_blocked(s->device, true))
        return cudaErrorStreamCaptureImplicit;
    if (!s->cap)
        return cudaSuccess;
    if (s->cap->invalidated)
        return cudaErrorStreamCaptureInvalidated;
    *cap = s->cap.get();
    return cudaSuccess;
}

// Appends n to the graph s captures into, after s's dependencies; s's next node follows n.
void add_node(stream_impl *s, graph_node n) {
    graph_impl &gr = *s->cap->graph;
    n.deps = s->deps;
    gr.nodes.push_back(std::make_unique<graph_node>(std::move(n)));
    s->deps.assign(1, gr.nodes.size() - 1);
}

// Queues node's work on s, or records node when s captures (*captured: whether s was capturing,
// even when the call fails). Takes g->capture_lock itself.
cudaError_t queue_or_record(stream_impl *s, graph_node node, bool *captured = nullptr) {
    {
        std::lock_guard<std::mutex> guard(g->capture_lock);
        if (captured)
            *captured = s->cap != nullptr;
        capture_state *cap;
        if (cudaError_t e = stream_use(s, &cap))
            return e;
        if (cap) {
            add_node(s, std::move(node));
            return cudaSuccess;
        }
    }
    s->push(node.make ? node.make() : std::move(node.run));
    return cudaSuccess;
}

// CUDA's rule for potentially unsafe calls during capture (cudaThreadExchangeStreamCaptureMode):
// such a call is refused, and the captures that forbid it are invalidated, when this thread began
// a capture that is not relaxed, or when this thread's mode is global and another thread began a
// global capture. Takes g->capture_lock itself.
cudaError_t unsafe_call() {
    std::lock_guard<std::mutex> guard(g->capture_lock);
    if (thread_mode == cudaStreamCaptureModeRelaxed)
        return cudaSuccess;
    const std::thread::id self = std::this_thread::get_id();
    bool refused = false;
    for (const auto &c : g->captures) {
        const bool forbids = c->thread == self ? c->mode != cudaStreamCaptureModeRelaxed
                                               : thread_mode == cudaStreamCaptureModeGlobal &&
                                                     c->mode == cudaStreamCaptureModeGlobal;
        if (forbids) {
            c->invalidated = true;
            refused = true;
        }
    }
    return refused ? cudaErrorStreamCaptureUnsupported : cudaSuccess;
}

// Whether e was last recorded in a capture. Such an event stands for nodes of a graph, not for
// work queued, so the host may not query or wait for it; the attempt invalidates its capture if
// that is still under way.
bool captured_event(event_impl *e) {
    if (!e->captured)
        return false;
    if (auto c = e->cap.lock())
        c->invalidated = true;
    return true;
}

// Whether every node of c's graph comes before the origin's next node: whatever was forked onto
// other streams has been joined back.
bool joined(const capture_state &c) {
    const auto &nodes = c.graph->nodes;
    std::vector<char> seen(nodes.size(), 0);
    std::vector<size_t> todo = c.origin->deps;
    while (!todo.empty()) {
        const size_t i = todo.back();
        todo.pop_back();
        if (seen[i])
            continue;
        seen[i] = 1;
        todo.insert(todo.end(), nodes[i]->deps.begin(), nodes[i]->deps.end());
    }
    return std::find(seen.begin(), seen.end(), 0) == seen.end();
}

// Takes every stream of c out of capture.
void end_capture(std::shared_ptr<capture_state> c) {
    for (stream_impl *s : c->streams) {
        s->cap.reset();
        s->deps.clear();
    }
    g->captures.erase(std::remove(g->captures.begin(), g->captures.end(), c), g->captures.end());
}

} // namespace

// ---- device-side entries ----------------------------------------------------------------------

void syncthreads(site at) {
    block_run *bp = cur_block;
    if (!bp)
        fatal("__syncthreads at %s:%d called outside a kernel", at.file, at.line);
    block_run &b = *bp;
    fiber &f = *b.running;
    if (b.barrier.empty())
        b.barrier_at = at;
    else if (b.barrier_at.line != at.line || strcmp(b.barrier_at.file, at.file) != 0)
        fatal("__syncthreads at %s:%d meets threads waiting at __syncthreads at %s:%d: a barrier "
              "in divergent code (%s)",
              at.file, at.line, b.barrier_at.file, b.barrier_at.line, where(b, &f).c_str());
    b.barrier.push_back(f.index);
    f.state = fiber::WAITING;
    if ((int)b.barrier.size() == b.live)
        release_barrier(b);
    yield_to_scheduler();
}

uint64_t warp_collective(site at, collective_kind kind, unsigned mask, uint64_t payload, int param,
                         int width) {
    block_run *bp = cur_block;
    if (!bp)
        fatal("%s at %s:%d called outside a kernel", kind_name(kind), at.file, at.line);
    block_run &b = *bp;
    fiber &f = *b.running;
    warp_state &w = b.warps[(size_t)f.warp];
    const unsigned bit = 1u << f.lane;
    if (width < 1 || width > 32 || (width & (width - 1)))
        fatal("%s at %s:%d: width %d is not a power of two up to 32 (%s)", kind_name(kind), at.file,
              at.line, width, where(b, &f).c_str());
    if (!(mask & bit))
        fatal("%s at %s:%d: lane %d calls it with mask 0x%08x, which leaves the lane out (%s)",
              kind_name(kind), at.file, at.line, f.lane, mask, where(b, &f).c_str());
    if (mask & ~w.exists)
        fatal("%s at %s:%d: mask 0x%08x names lanes 0x%08x that the block does not have (%s)",
              kind_name(kind), at.file, at.line, mask, mask & ~w.exists, where(b, &f).c_str());
    if (mask & ~w.live)
        fatal("%s at %s:%d: mask 0x%08x names lanes 0x%08x that have exited (%s)", kind_name(kind),
              at.file, at.line, mask, mask & ~w.live, where(b, &f).c_str());
    if (!w.pending) {
        w.pending = true;
        w.at = at;
        w.kind = kind;
        w.mask = mask;
        w.width = width;
        w.arrived = 0;
    } else if (w.kind != kind || w.mask != mask || w.width != width || w.at.line != at.line ||
               strcmp(w.at.file, at.file) != 0) {
        fatal("mismatched warp collectives in warp %d: lane %d reaches %s (%s:%d, mask 0x%08x) "
              "while lanes 0x%08x wait at %s (%s:%d, mask 0x%08x) (%s)",
              f.warp, f.lane, kind_name(kind), at.file, at.line, mask, w.arrived, kind_name(w.kind),
              w.at.file, w.at.line, w.mask, where(b, &f).c_str());
    }
    f.payload = payload;
    f.param = param;
    f.state = fiber::WAITING;
    w.arrived |= bit;
    if (w.arrived == w.mask)
        complete_collective(b, w, f.warp);
    yield_to_scheduler();
    return f.result;
}

// ---- launches ---------------------------------------------------------------------------------

void submit(const char *name, site at, const void *func, dim3 grid, dim3 block, size_t shmem,
            cudaStream_t stream, std::function<void()> body, const void *const *ptrs, int n_ptrs) {
    state();
    if (in_host_fn)
        fatal("kernel %s launched at %s:%d from a host function", name, at.file, at.line);
    const uint64_t threads = (uint64_t)block.x * block.y * block.z;
    if (grid.x == 0 || grid.y == 0 || grid.z == 0 || grid.x > 0x7fffffffu || grid.y > 65535 ||
        grid.z > 65535 || threads == 0 || threads > 1024 || block.x > 1024 || block.y > 1024 ||
        block.z > 64 || shmem > 48 * 1024) {
        fail(cudaErrorInvalidConfiguration);
        return;
    }
    if (current_device >= g->cfg.devices) {
        fail(cudaErrorNoDevice);
        return;
    }
    stream_impl *s = resolve(stream);
    if (s->device != current_device) {
        fail(cudaErrorInvalidResourceHandle);
        return;
    }
    char who[256];
    snprintf(who, sizeof who, "kernel %s launched at %s:%d", name, at.file, at.line);
    for (int i = 0; i < n_ptrs; i++)
        if (ptrs[i])
            check_pointer(who, "pointer argument", ptrs[i], 0, current_device, true);
    auto job = std::make_shared<kernel_job>();
    job->name = name;
    job->at = at;
    job->grid = grid;
    job->block = block;
    job->body = std::move(body);
    uint64_t seed = g->cfg.seed ^ (g->launches.fetch_add(1) * 0x9e3779b97f4a7c15ull);
    job->seed = splitmix64(&seed);
    graph_node n;
    n.kind = NODE_KERNEL;
    n.func = func;
    n.run = [job] { run_kernel(*job); };
    bool captured = false;
    if (cudaError_t e = queue_or_record(s, std::move(n), &captured)) {
        fail(e);
        return;
    }
    if (!captured) // a captured kernel counts when a launch of its graph runs it
        count(g->w.kernels);
}

void check_pointer(const char *who, const char *arg, const void *p, size_t bytes, int device,
                   bool pinned_ok) {
    state();
    const int c = classify(p, bytes);
    if (c == -3)
        fatal("%s: %s %p (%zu bytes) runs past the end of its allocation", who, arg, p, bytes);
    if (c == -1 && pinned_ok)
        fatal("%s: %s %p is neither device memory nor pinned host memory (a host pointer, or "
              "memory already freed)",
              who, arg, p);
    if (c == -1)
        fatal("%s: %s %p is not device memory (a host pointer, or memory already freed)", who, arg,
              p);
    if (c == -2 && !pinned_ok)
        fatal("%s: %s %p is pinned host memory, not device memory", who, arg, p);
    if (c >= 0 && c != device)
        fatal("%s on device %d: %s %p is memory of device %d", who, device, arg, p, c);
}

int stream_device(cudaStream_t stream) {
    state();
    return resolve(stream)->device;
}

// How deep the calling thread is in API entries: a call the runtime makes to itself (cudaMemcpy
// to cudaMemcpyAsync) is not the program's and is not counted.
thread_local int api_depth = 0;

void api_entry(const char *func) {
    state();
    if (in_host_fn)
        fatal("%s called from a host function queued with cudaLaunchHostFunc (CUDA forbids "
              "runtime calls there)",
              func);
    if (api_depth > 0)
        return;
    std::lock_guard<std::mutex> guard(g->count_lock);
    if (g->window)
        g->w.calls[func]++;
}

api_scope::api_scope(const char *func) {
    api_entry(func);
    api_depth++;
}

api_scope::~api_scope() {
    api_depth--;
}

// A library operation queued on stream, or recorded when it captures (counted when it runs).
static cudaError_t enqueue_library(cudaStream_t stream, graph_node n) {
    bool captured = false;
    if (cudaError_t e = queue_or_record(resolve(stream), std::move(n), &captured))
        return e;
    if (!captured)
        count(g->w.library_ops);
    return cudaSuccess;
}

cudaError_t enqueue(cudaStream_t stream, std::function<void()> fn) {
    state();
    if (current_device >= g->cfg.devices)
        return cudaErrorNoDevice;
    graph_node n;
    n.kind = NODE_LIBRARY;
    n.op = &fn.target_type();
    n.run = std::move(fn);
    return enqueue_library(stream, std::move(n));
}

cudaError_t enqueue_issued(cudaStream_t stream, std::function<std::function<void()>()> make) {
    state();
    if (current_device >= g->cfg.devices)
        return cudaErrorNoDevice;
    graph_node n;
    n.kind = NODE_LIBRARY;
    n.op = &make.target_type();
    n.make = std::move(make);
    return enqueue_library(stream, std::move(n));
}

bool capturing(cudaStream_t stream) {
    state();
    stream_impl *s = resolve(stream);
    std::lock_guard<std::mutex> guard(g->capture_lock);
    return s->cap != nullptr;
}

bool is_device_range(const void *p, size_t bytes) {
    state();
    return classify(p, bytes) >= 0;
}

} // namespace cudasim

using namespace cudasim;

extern "C" void cudasim_fiber_main(void) {
    block_run &b = *cur_block;
    fiber *f = b.running;
#if CUDASIM_ASAN
    __sanitizer_finish_switch_fiber(nullptr, &b.asan_sched_bottom, &b.asan_sched_size);
#endif
    b.job->body();
    f->state = fiber::DONE;
#if CUDASIM_ASAN
    // this stack is left for good: no fake stack to keep
    __sanitizer_start_switch_fiber(nullptr, b.asan_sched_bottom, b.asan_sched_size);
#endif
#if CUDASIM_ASM_SWITCH
    void *dead = nullptr;
    cudasim_ctx_switch(&dead, cur_block->sched_sp);
#else
    setcontext(&cur_block->sched_uc);
#endif
    fatal("a finished CUDA thread was resumed");
}

// ---- devices ----------------------------------------------------------------------------------

cudaError_t cudaGetDeviceCount(int *count) {
    API_ENTRY();
    if (!count)
        return fail(cudaErrorInvalidValue);
    *count = g->cfg.devices;
    if (g->cfg.devices == 0)
        return fail(cudaErrorNoDevice);
    return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
    API_ENTRY();
    if (device < 0 || device >= g->cfg.devices)
        return fail(cudaErrorInvalidDevice);
    current_device = device;
    return cudaSuccess;
}

cudaError_t cudaGetDevice(int *device) {
    API_ENTRY();
    if (!device)
        return fail(cudaErrorInvalidValue);
    *device = current_device;
    return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp *prop, int device) {
    API_ENTRY();
    if (!prop)
        return fail(cudaErrorInvalidValue);
    if (device < 0 || device >= g->cfg.devices)
        return fail(cudaErrorInvalidDevice);
    memset(prop, 0, sizeof *prop);
    snprintf(prop->name, sizeof prop->name, "saga cudasim");
    prop->totalGlobalMem = g->cfg.mem;
    prop->sharedMemPerBlock = 48 * 1024;
    prop->regsPerBlock = 65536;
    prop->warpSize = 32;
    prop->maxThreadsPerBlock = 1024;
    prop->maxThreadsDim[0] = prop->maxThreadsDim[1] = 1024;
    prop->maxThreadsDim[2] = 64;
    prop->maxGridSize[0] = 0x7fffffff;
    prop->maxGridSize[1] = prop->maxGridSize[2] = 65535;
    prop->major = g->cfg.cc_major;
    prop->minor = g->cfg.cc_minor;
    prop->multiProcessorCount = 2;
    prop->unifiedAddressing = 1;
    return cudaSuccess;
}

static cudaError_t check_current_device() {
    if (current_device >= g->cfg.devices)
        return fail(cudaErrorNoDevice);
    return cudaSuccess;
}

// Waits for the work queued on every stream of device (a capturing stream's queue holds only what
// came before its capture).
static void drain_device(int device) {
    std::vector<stream_impl *> streams;
    {
        std::lock_guard<std::mutex> guard(g->lock);
        streams = g->devices[(size_t)device].streams;
    }
    for (stream_impl *s : streams)
        s->drain();
}

cudaError_t cudaDeviceSynchronize(void) {
    API_ENTRY();
    if (cudaError_t e = check_current_device())
        return e;
    if (cudaError_t e = unsafe_call())
        return fail(e);
    {
        // The device encompasses its capturing streams, which stand for no queued work: a
        // synchronization of it conflicts with their capture in any mode.
        std::lock_guard<std::mutex> guard(g->capture_lock);
        bool refused = false;
        for (const auto &c : g->captures)
            for (const stream_impl *s : c->streams)
                if (s->device == current_device) {
                    c->invalidated = true;
                    refused = true;
                }
        if (refused)
            return fail(cudaErrorStreamCaptureUnsupported);
    }
    drain_device(current_device);
    return cudaSuccess;
}

cudaError_t cudaDriverGetVersion(int *version) {
    API_ENTRY();
    if (!version)
        return fail(cudaErrorInvalidValue);
    *version = CUDART_VERSION;
    return cudaSuccess;
}

cudaError_t cudaRuntimeGetVersion(int *version) {
    return cudaDriverGetVersion(version);
}

cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes) {
    API_ENTRY();
    if (cudaError_t e = check_current_device())
        return e;
    std::lock_guard<std::mutex> guard(g->lock);
    const device_state &d = g->devices[(size_t)current_device];
    if (free_bytes)
        *free_bytes = g->cfg.mem - d.used;
    if (total_bytes)
        *total_bytes = g->cfg.mem;
    return cudaSuccess;
}

// ---- errors -----------------------------------------------------------------------------------

cudaError_t cudaGetLastError(void) {
    const cudaError_t e = last_error;
    last_error = cudaSuccess;
    return e;
}

cudaError_t cudaPeekAtLastError(void) {
    return last_error;
}

static const struct {
    cudaError_t err;
    const char *name, *text;
} error_table[] = {
    {cudaSuccess, "cudaSuccess", "no error"},
    {cudaErrorInvalidValue, "cudaErrorInvalidValue", "invalid argument"},
    {cudaErrorMemoryAllocation, "cudaErrorMemoryAllocation", "out of memory"},
    {cudaErrorInitializationError, "cudaErrorInitializationError", "initialization error"},
    {cudaErrorInvalidConfiguration, "cudaErrorInvalidConfiguration",
     "invalid configuration argument"},
    {cudaErrorInvalidDevicePointer, "cudaErrorInvalidDevicePointer", "invalid device pointer"},
    {cudaErrorInvalidMemcpyDirection, "cudaErrorInvalidMemcpyDirection",
     "invalid copy direction for memcpy"},
    {cudaErrorNoDevice, "cudaErrorNoDevice", "no CUDA-capable device is detected"},
    {cudaErrorInvalidDevice, "cudaErrorInvalidDevice", "invalid device ordinal"},
    {cudaErrorInvalidResourceHandle, "cudaErrorInvalidResourceHandle", "invalid resource handle"},
    {cudaErrorIllegalState, "cudaErrorIllegalState",
     "the operation cannot be performed in the present state"},
    {cudaErrorNotReady, "cudaErrorNotReady", "device not ready"},
    {cudaErrorIllegalAddress, "cudaErrorIllegalAddress",
     "an illegal memory access was encountered"},
    {cudaErrorLaunchFailure, "cudaErrorLaunchFailure", "unspecified launch failure"},
    {cudaErrorNotPermitted, "cudaErrorNotPermitted", "operation not permitted"},
    {cudaErrorNotSupported, "cudaErrorNotSupported", "operation not supported"},
    {cudaErrorStreamCaptureUnsupported, "cudaErrorStreamCaptureUnsupported",
     "operation not permitted when stream is capturing"},
    {cudaErrorStreamCaptureInvalidated, "cudaErrorStreamCaptureInvalidated",
     "operation failed due to a previous error during capture"},
    {cudaErrorStreamCaptureMerge, "cudaErrorStreamCaptureMerge",
     "operation would result in a merge of separate capture sequences"},
    {cudaErrorStreamCaptureUnmatched, "cudaErrorStreamCaptureUnmatched",
     "capture was not ended in the same stream as it began"},
    {cudaErrorStreamCaptureUnjoined, "cudaErrorStreamCaptureUnjoined",
     "capturing stream has unjoined work"},
    {cudaErrorStreamCaptureIsolation, "cudaErrorStreamCaptureIsolation",
     "dependency created on uncaptured work in another stream"},
    {cudaErrorStreamCaptureImplicit, "cudaErrorStreamCaptureImplicit",
     "operation would make the legacy stream depend on a capturing blocking stream"},
    {cudaErrorCapturedEvent, "cudaErrorCapturedEvent",
     "operation not permitted on an event last recorded in a capturing stream"},
    {cudaErrorStreamCaptureWrongThread, "cudaErrorStreamCaptureWrongThread",
     "attempt to terminate a thread-local capture sequence from another thread"},
    {cudaErrorGraphExecUpdateFailure, "cudaErrorGraphExecUpdateFailure",
     "the graph update was not performed because it included changes which violated "
     "constraints specific to instantiated graph update"},
    {cudaErrorUnknown, "cudaErrorUnknown", "unknown error"},
};

const char *cudaGetErrorString(cudaError_t err) {
    for (const auto &e : error_table)
        if (e.err == err)
            return e.text;
    return "unrecognized error code";
}

const char *cudaGetErrorName(cudaError_t err) {
    for (const auto &e : error_table)
        if (e.err == err)
            return e.name;
    return "cudaErrorUnknown";
}

// ---- memory -----------------------------------------------------------------------------------

cudaError_t cudaMalloc(void **ptr, size_t bytes) {
    API_ENTRY();
    if (cudaError_t e = unsafe_call())
        return fail(e);
    if (!ptr)
        return fail(cudaErrorInvalidValue);
    if (cudaError_t e = check_current_device())
        return e;
    if (bytes == 0) {
        *ptr = nullptr;
        return cudaSuccess;
    }
    {
        std::lock_guard<std::mutex> guard(g->lock);
        device_state &d = g->devices[(size_t)current_device];
        if (bytes > g->cfg.mem - d.used)
            return fail(cudaErrorMemoryAllocation);
        d.used += bytes;
        d.peak = std::max(d.peak, d.used);
    }
    void *p = nullptr;
    if (posix_memalign(&p, 256, bytes) != 0) {
        std::lock_guard<std::mutex> guard(g->lock);
        g->devices[(size_t)current_device].used -= bytes;
        return fail(cudaErrorMemoryAllocation);
    }
    // Fresh device memory reads as NaN (f32 and f64) or -1: a read of what nothing wrote shows.
    memset(p, 0xff, bytes);
    {
        std::lock_guard<std::mutex> guard(g->lock);
        g->allocations[(uintptr_t)p] = allocation{bytes, current_device};
    }
    *ptr = p;
    return cudaSuccess;
}

cudaError_t cudaFree(void *ptr) {
    API_ENTRY();
    if (cudaError_t e = unsafe_call())
        return fail(e);
    if (!ptr)
        return cudaSuccess;
    int device;
    size_t bytes;
    {
        std::lock_guard<std::mutex> guard(g->lock);
        auto it = g->allocations.find((uintptr_t)ptr);
        if (it == g->allocations.end() || it->second.device < 0)
            return fail(cudaErrorInvalidValue);
        device = it->second.device;
        bytes = it->second.bytes;
    }
    // cudaFree synchronizes with the device: work queued before it that uses the memory ends first.
    drain_device(device);
    {
        std::lock_guard<std::mutex> guard(g->lock);
        g->allocations.erase((uintptr_t)ptr);
        g->devices[(size_t)device].used -= bytes;
    }
    memset(ptr, 0xfd, bytes);
    free(ptr);
    return cudaSuccess;
}

cudaError_t cudaHostAlloc(void **ptr, size_t bytes, unsigned flags) {
    API_ENTRY();
    if (cudaError_t e = unsafe_call())
        return fail(e);
    if (!ptr || (flags & ~0x0fu))
        return fail(cudaErrorInvalidValue);
    void *p = nullptr;
    if (posix_memalign(&p, 4096, bytes ? bytes : 1) != 0)
        return fail(cudaErrorMemoryAllocation);
    memset(p, 0xff, bytes);
    {
        std::lock_guard<std::mutex> guard(g->lock);
        g->allocations[(uintptr_t)p] = allocation{bytes, -1};
    }
    *ptr = p;
    return cudaSuccess;
}

cudaError_t cudaMallocHost(void **ptr, size_t bytes) {
    return cudaHostAlloc(ptr, bytes, cudaHostAllocDefault);
}

cudaError_t cudaFreeHost(void *ptr) {
    API_ENTRY();
    if (cudaError_t e = unsafe_call())
        return fail(e);
    if (!ptr)
        return cudaSuccess;
    {
        std::lock_guard<std::mutex> guard(g->lock);
        auto it = g->allocations.find((uintptr_t)ptr);
        if (it == g->allocations.end() || it->second.device >= 0)
            return fail(cudaErrorInvalidValue);
        g->allocations.erase(it);
    }
    free(ptr);
    return cudaSuccess;
}

// Pinned memory is mapped into every device at the same address, as under unified addressing:
// the device pointer of an address inside a pinned allocation is that address.
cudaError_t cudaHostGetDevicePointer(void **device_ptr, void *host_ptr, unsigned flags) {
    API_ENTRY();
    if (!device_ptr || flags != 0 || classify(host_ptr, 1) != -2)
        return fail(cudaErrorInvalidValue);
    *device_ptr = host_ptr;
    return cudaSuccess;
}

// Checks a copy's pointers against its kind; *pageable says which host side, if any, is
// pageable memory, and *dir which way it copies (0 host->host, 1 host->device, 2 device->host, 3
// device->device).
static cudaError_t check_copy(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind,
                              bool *pageable_src, bool *pageable_dst, int *dir) {
    const int d = classify(dst, bytes), s = classify(src, bytes);
    if (d == -3 || s == -3)
        fatal("cudaMemcpy of %zu bytes from %p to %p runs past the end of an allocation", bytes,
              src, dst);
    const bool d_dev = d >= 0, s_dev = s >= 0;
    switch (kind) {
    case cudaMemcpyHostToDevice:
        if (!d_dev || s_dev)
            return cudaErrorInvalidValue;
        break;
    case cudaMemcpyDeviceToHost:
        if (d_dev || !s_dev)
            return cudaErrorInvalidValue;
        break;
    case cudaMemcpyDeviceToDevice:
        if (!d_dev || !s_dev)
            return cudaErrorInvalidValue;
        break;
    case cudaMemcpyHostToHost:
        if (d_dev || s_dev)
            return cudaErrorInvalidValue;
        break;
    case cudaMemcpyDefault:
        break;
    default:
        return cudaErrorInvalidMemcpyDirection;
    }
    *pageable_src = s == -1;
    *pageable_dst = d == -1;
    *dir = (s_dev ? 2 : 0) + (d_dev ? 1 : 0);
    return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t stream) {
    API_ENTRY();
    if (bytes == 0)
        return cudaSuccess;
    if (!dst || !src)
        return fail(cudaErrorInvalidValue);
    bool pg_src = false, pg_dst = false;
    int dir = 0;
    if (cudaError_t e = check_copy(dst, src, bytes, kind, &pg_src, &pg_dst, &dir))
        return fail(e);
    if (cudaError_t e = check_current_device())
        return e;
    stream_impl *s = resolve(stream);
    const int dst_dev = classify(dst, bytes), src_dev = classify(src, bytes);
    {
        std::lock_guard<std::mutex> guard(g->capture_lock);
        capture_state *cap;
        if (cudaError_t e = stream_use(s, &cap))
            return fail(e);
        if (cap) {
            // A copy with pageable memory is synchronous for the host, or takes its source at the
            // call; neither can be replayed. Refused (see docs/cudasim.md).
            if (pg_src || pg_dst) {
                cap->invalidated = true;
                return fail(cudaErrorStreamCaptureUnsupported);
            }
            graph_node n;
            n.kind = NODE_MEMCPY;
            n.run = [=] { memmove(dst, src, bytes); };
            n.dir = dir;
            n.bytes = bytes;
            n.dst_dev = dst_dev;
            n.src_dev = src_dev;
            add_node(s, std::move(n));
            return cudaSuccess;
        }
    }
    count(g->w.bytes[dir], bytes);
    if (pg_dst) {
        if (api_depth == 1) // the program's own call (cudaMemcpy counts as a call of its own)
            count(g->w.sync_copies);
        // Into pageable memory the copy is synchronous: it returns once the data is there.
        const uint64_t t = s->push([=] { memcpy(dst, src, bytes); });
        s->wait_for(t);
        return cudaSuccess;
    }
    if (pg_src) {
        // From pageable memory the source is staged now, at the call; the transfer follows in
        // stream order. A host function queued ahead that writes the source comes too late.
        std::shared_ptr<char[]> staged(new char[bytes]);
        memcpy(staged.get(), src, bytes);
        s->push([=] { memcpy(dst, staged.get(), bytes); });
        return cudaSuccess;
    }
    s->push([=] { memmove(dst, src, bytes); });
    return cudaSuccess;
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind) {
    API_ENTRY();
    if (cudaError_t e = unsafe_call())
        return fail(e);
    cudaError_t e = cudaMemcpyAsync(dst, src, bytes, kind, nullptr);
    if (e)
        return e;
    if (bytes)
        legacy_stream(current_device)->drain();
    return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void *dst, int value, size_t bytes, cudaStream_t stream) {
    API_ENTRY();
    if (bytes == 0)
        return cudaSuccess;
    const int c = classify(dst, bytes);
    if (c == -3)
        fatal("cudaMemsetAsync of %zu bytes at %p runs past the end of an allocation", bytes, dst);
    if (c < 0)
        return fail(cudaErrorInvalidValue);
    if (cudaError_t e = check_current_device())
        return e;
    graph_node n;
    n.kind = NODE_MEMSET;
    n.run = [=] { memset(dst, value, bytes); };
    n.bytes = bytes;
    n.dst_dev = c;
    if (cudaError_t e = queue_or_record(resolve(stream), std::move(n)))
        return fail(e);
    return cudaSuccess;
}

cudaError_t cudaMemset(void *dst, int value, size_t bytes) {
    API_ENTRY();
    if (cudaError_t e = unsafe_call())
        return fail(e);
    cudaError_t e = cudaMemsetAsync(dst, value, bytes, nullptr);
    if (e)
        return e;
    legacy_stream(current_device)->drain();
    return cudaSuccess;
}

// ---- streams ----------------------------------------------------------------------------------

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *stream, unsigned flags) {
    API_ENTRY();
    if (!stream || (flags & ~1u))
        return fail(cudaErrorInvalidValue);
    if (cudaError_t e = check_current_device())
        return e;
    stream_impl *s = new_stream(current_device, false);
    s->blocking = !(flags & cudaStreamNonBlocking);
    {
        std::lock_guard<std::mutex> guard(g->lock);
        g->devices[(size_t)current_device].streams.push_back(s);
    }
    *stream = reinterpret_cast<cudaStream_t>(s);
    return cudaSuccess;
}

cudaError_t cudaStreamCreate(cudaStream_t *stream) {
    return cudaStreamCreateWithFlags(stream, cudaStreamDefault);
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
    API_ENTRY();
    if (!stream)
        return fail(cudaErrorInvalidResourceHandle);
    stream_impl *s = reinterpret_cast<stream_impl *>(stream);
    {
        // A capture would be left with a stream it cannot end or join: refused, and the capture
        // invalidated (see docs/cudasim.md).
        std::lock_guard<std::mutex> guard(g->capture_lock);
        if (s->cap) {
            s->cap->invalidated = true;
            return fail(cudaErrorStreamCaptureUnsupported);
        }
    }
    // CUDA lets the queued work finish before the stream's resources go.
    s->drain();
    {
        std::lock_guard<std::mutex> guard(g->lock);
        auto &v = g->devices[(size_t)s->device].streams;
        v.erase(std::remove(v.begin(), v.end(), s), v.end());
    }
    {
        std::lock_guard<std::mutex> guard(s->m);
        s->stop = true;
        s->cv.notify_all();
    }
    s->worker.join();
    delete s;
    return cudaSuccess;
}

// A capturing stream stands for no queued work: waiting for it or asking about it is refused, and
// invalidates its capture. So is any use of the legacy stream while a blocking stream of its
// device captures.
static cudaError_t host_looks_at(stream_impl *s) {
    std::lock_guard<std::mutex> guard(g->capture_lock);
    if (s->legacy && legacy_blocked(s->device, true))
        return cudaErrorStreamCaptureImplicit;
    if (s->cap) {
        s->cap->invalidated = true;
        return cudaErrorStreamCaptureUnsupported;
    }
    return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
    API_ENTRY();
    if (cudaError_t e = check_current_device())
        return e;
    stream_impl *s = resolve(stream);
    if (cudaError_t e = host_looks_at(s))
        return fail(e);
    s->drain();
    return cudaSuccess;
}

cudaError_t cudaStreamQuery(cudaStream_t stream) {
    API_ENTRY();
    if (cudaError_t e = check_current_device())
        return e;
    stream_impl *s = resolve(stream);
    if (cudaError_t e = host_looks_at(s))
        return fail(e);
    return s->idle() ? cudaSuccess : fail(cudaErrorNotReady);
}

cudaError_t cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t fn, void *user_data) {
    API_ENTRY();
    if (!fn)
        return fail(cudaErrorInvalidValue);
    if (cudaError_t e = check_current_device())
        return e;
    graph_node n;
    n.kind = NODE_HOST;
    n.run = [fn, user_data] {
        in_host_fn = true;
        fn(user_data);
        in_host_fn = false;
    };
    bool captured = false;
    const cudaError_t e = queue_or_record(resolve(stream), std::move(n), &captured);
    if (captured) // not a host function run: its graph's launches run it
        count(g->w.captured_host_fns);
    return e ? fail(e) : cudaSuccess;
}

// ---- events -----------------------------------------------------------------------------------

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned flags) {
    API_ENTRY();
    if (!event || (flags & ~0x0fu))
        return fail(cudaErrorInvalidValue);
    if (cudaError_t e = check_current_device())
        return e;
    event_handle *h = new event_handle();
    h->e = std::make_shared<event_impl>();
    h->e->device = current_device;
    h->e->flags = flags;
    *event = reinterpret_cast<cudaEvent_t>(h);
    return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t *event) {
    return cudaEventCreateWithFlags(event, cudaEventDefault);
}

cudaError_t cudaEventDestroy(cudaEvent_t event) {
    API_ENTRY();
    if (!event)
        return fail(cudaErrorInvalidResourceHandle);
    // queued records and waits hold their own reference
    delete reinterpret_cast<event_handle *>(event);
    return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
    API_ENTRY();
    if (!event)
        return fail(cudaErrorInvalidResourceHandle);
    if (cudaError_t e = check_current_device())
        return e;
    std::shared_ptr<event_impl> e = reinterpret_cast<event_handle *>(event)->e;
    stream_impl *s = resolve(stream);
    if (s->device != e->device)
        return fail(cudaErrorInvalidResourceHandle);
    {
        // In a capture the event comes to stand for the stream's capture point (its dependencies),
        // which later waits in the same capture depend on; nothing is queued.
        std::lock_guard<std::mutex> guard(g->capture_lock);
        capture_state *cap;
        if (cudaError_t err = stream_use(s, &cap))
            return fail(err);
        e->captured = cap != nullptr;
        e->cap = s->cap;
        e->cap_nodes = cap ? s->deps : std::vector<size_t>();
        if (cap)
            return cudaSuccess;
    }
    uint64_t gen;
    {
        std::lock_guard<std::mutex> guard(e->m);
        gen = ++e->recorded;
    }
    const uint64_t ticket = s->push([e, gen] {
        std::lock_guard<std::mutex> guard(e->m);
        if (gen > e->completed) {
            e->completed = gen;
            e->when = std::chrono::steady_clock::now();
        }
        e->cv.notify_all();
    });
    std::lock_guard<std::mutex> guard(e->m);
    e->last_stream = s;
    e->last_ticket = ticket;
    return cudaSuccess;
}

cudaError_t cudaEventQuery(cudaEvent_t event) {
    API_ENTRY();
    if (!event)
        return fail(cudaErrorInvalidResourceHandle);
    event_impl *e = ev(event);
    {
        std::lock_guard<std::mutex> guard(g->capture_lock);
        if (captured_event(e))
            return fail(cudaErrorCapturedEvent);
    }
    std::lock_guard<std::mutex> guard(e->m);
    return e->completed >= e->recorded ? cudaSuccess : fail(cudaErrorNotReady);
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
    API_ENTRY();
    if (!event)
        return fail(cudaErrorInvalidResourceHandle);
    event_impl *e = ev(event);
    {
        std::lock_guard<std::mutex> guard(g->capture_lock);
        if (captured_event(e))
            return fail(cudaErrorCapturedEvent);
    }
    std::unique_lock<std::mutex> lk(e->m);
    if (stream_impl *s = e->last_stream) { // a wait that leaves its stream with nothing to run
        bool dry;
        {
            std::lock_guard<std::mutex> guard(s->m);
            dry = s->submitted == e->last_ticket;
        }
        if (dry)
            count(g->w.dry_event_waits);
    }
    const uint64_t gen = e->recorded;
    e->cv.wait(lk, [&] { return e->completed >= gen; });
    return cudaSuccess;
}

// A wait that involves a capture: the waiting stream s captures, or e was last recorded in a
// capture. Returns cudaSuccess with *done false when it is an ordinary wait, to be queued.
static cudaError_t capture_wait(stream_impl *s, const std::shared_ptr<event_impl> &e,
                                unsigned flags, bool *done) {
    std::lock_guard<std::mutex> guard(g->capture_lock);
    *done = true;
    if (s->legacy && legacy_blocked(s->device, true))
        return cudaErrorStreamCaptureImplicit;
    const std::shared_ptr<capture_state> mine = s->cap;
    if (mine && mine->invalidated)
        return cudaErrorStreamCaptureInvalidated;
    if (flags & cudaEventWaitExternal) {
        // An event wait node: each launch waits for the event's latest record at that launch.
        if (!mine)
            return cudaErrorInvalidValue; // the flag is for capture only
        graph_node n;
        n.kind = NODE_EVENT_WAIT;
        n.event = e;
        add_node(s, std::move(n));
        return cudaSuccess;
    }
    const std::shared_ptr<capture_state> theirs = e->captured ? e->cap.lock() : nullptr;
    if (mine) {
        if (theirs == mine) { // within the capture: s's next node also follows the event's nodes
            for (size_t i : e->cap_nodes)
                if (std::find(s->deps.begin(), s->deps.end(), i) == s->deps.end())
                    s->deps.push_back(i);
            return cudaSuccess;
        }
        mine->invalidated = true;
        if (theirs) {
            theirs->invalidated = true;
            return cudaErrorStreamCaptureMerge;
        }
        // work that was queued, or recorded by a capture that has ended: CUDA refuses a
        // dependency of captured work on it (cudaEventWaitExternal asks for one explicitly)
        return cudaErrorStreamCaptureIsolation;
    }
    if (e->captured) {
        // The event stands for nodes of a graph: a stream that waits on it joins their capture,
        // its next node depending on them.
        if (!theirs || theirs->invalidated)
            return cudaErrorInvalidValue; // a capture that ended, or that failed
        if (s->device != theirs->origin->device)
            fatal("cudaStreamWaitEvent: a stream of device %d joins a capture of device %d; a "
                  "capture over several devices is not modelled",
                  s->device, theirs->origin->device);
        if (s->legacy) {
            theirs->invalidated = true;
            return cudaErrorStreamCaptureUnsupported; // the legacy stream may not capture
        }
        s->cap = theirs;
        s->deps = e->cap_nodes;
        theirs->streams.push_back(s);
        return cudaSuccess;
    }
    *done = false;
    return cudaSuccess;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned flags) {
    API_ENTRY();
    if (!event)
        return fail(cudaErrorInvalidResourceHandle);
    if (flags & ~(unsigned)cudaEventWaitExternal)
        return fail(cudaErrorInvalidValue);
    if (cudaError_t e = check_current_device())
        return e;
    std::shared_ptr<event_impl> e = reinterpret_cast<event_handle *>(event)->e;
    stream_impl *s = resolve(stream);
    bool done = false;
    if (cudaError_t err = capture_wait(s, e, flags, &done))
        return fail(err);
    if (done)
        return cudaSuccess;
    uint64_t gen;
    {
        std::lock_guard<std::mutex> guard(e->m);
        gen = e->recorded; // the most recent record at the call; none: nothing to wait for
    }
    if (gen == 0)
        return cudaSuccess;
    s->push([e, gen] {
        std::unique_lock<std::mutex> lk(e->m);
        e->cv.wait(lk, [&] { return e->completed >= gen; });
    });
    return cudaSuccess;
}

cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end) {
    API_ENTRY();
    if (!ms)
        return fail(cudaErrorInvalidValue);
    if (!start || !end)
        return fail(cudaErrorInvalidResourceHandle);
    event_impl *a = ev(start), *b = ev(end);
    if ((a->flags | b->flags) & cudaEventDisableTiming)
        return fail(cudaErrorInvalidResourceHandle);
    {
        std::lock_guard<std::mutex> guard(g->capture_lock);
        const bool ca = captured_event(a), cb = captured_event(b);
        if (ca || cb)
            return fail(cudaErrorCapturedEvent);
    }
    std::chrono::steady_clock::time_point t[2];
    event_impl *both[2] = {a, b};
    for (int i = 0; i < 2; i++) {
        event_impl *e = both[i];
        std::lock_guard<std::mutex> guard(e->m);
        if (e->recorded == 0)
            return fail(cudaErrorInvalidResourceHandle);
        if (e->completed < e->recorded)
            return fail(cudaErrorNotReady);
        t[i] = e->when;
    }
    const auto ta = t[0], tb = t[1];
    *ms = (float)std::chrono::duration<double, std::milli>(tb - ta).count();
    return cudaSuccess;
}

// ---- graphs, made by stream capture -----------------------------------------------------------

static graph_impl *graph_of(cudaGraph_t graph) {
    return reinterpret_cast<graph_impl *>(graph);
}

static exec_impl *exec_of(cudaGraphExec_t exec) {
    return reinterpret_cast<exec_impl *>(exec);
}

static cudaGraphNode_t handle_of(const graph_node *n) {
    return reinterpret_cast<cudaGraphNode_t>(const_cast<graph_node *>(n));
}

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, enum cudaStreamCaptureMode mode) {
    API_ENTRY();
    if (mode != cudaStreamCaptureModeGlobal && mode != cudaStreamCaptureModeThreadLocal &&
        mode != cudaStreamCaptureModeRelaxed)
        return fail(cudaErrorInvalidValue);
    if (cudaError_t e = check_current_device())
        return e;
    if (!stream) // the legacy stream cannot capture (see docs/cudasim.md for the code)
        return fail(cudaErrorStreamCaptureUnsupported);
    stream_impl *s = resolve(stream);
    std::lock_guard<std::mutex> guard(g->capture_lock);
    if (s->cap)
        return fail(cudaErrorIllegalState);
    auto c = std::make_shared<capture_state>();
    c->id = ++g->capture_ids;
    c->mode = mode;
    c->thread = std::this_thread::get_id();
    c->origin = s;
    c->graph = new graph_impl();
    c->graph->device = s->device;
    c->graph->capturing = true;
    c->streams.push_back(s);
    s->cap = c;
    s->deps.clear();
    g->captures.push_back(c);
    return cudaSuccess;
}

cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t *pGraph) {
    API_ENTRY();
    if (!pGraph)
        return fail(cudaErrorInvalidValue);
    *pGraph = nullptr;
    if (cudaError_t e = check_current_device())
        return e;
    stream_impl *s = resolve(stream);
    std::lock_guard<std::mutex> guard(g->capture_lock);
    if (s->legacy && legacy_blocked(s->device, true))
        return fail(cudaErrorStreamCaptureImplicit);
    if (!s->cap)
        return fail(cudaErrorIllegalState);
    const std::shared_ptr<capture_state> c = s->cap;
    if (c->origin != s) {
        c->invalidated = true;
        return fail(cudaErrorStreamCaptureUnmatched);
    }
    if (c->mode != cudaStreamCaptureModeRelaxed && c->thread != std::this_thread::get_id())
        return fail(cudaErrorStreamCaptureWrongThread);
    cudaError_t err = cudaSuccess;
    if (c->invalidated)
        err = cudaErrorStreamCaptureInvalidated;
    else if (!joined(*c))
        err = cudaErrorStreamCaptureUnjoined;
    end_capture(c);
    if (err)
        return fail(err); // the graph goes with the capture
    c->graph->capturing = false;
    *pGraph = reinterpret_cast<cudaGraph_t>(c->graph);
    c->graph = nullptr;
    return cudaSuccess;
}

cudaError_t cudaStreamIsCapturing(cudaStream_t stream,
                                  enum cudaStreamCaptureStatus *pCaptureStatus) {
    API_ENTRY();
    return cudaStreamGetCaptureInfo(stream, pCaptureStatus);
}

cudaError_t cudaStreamGetCaptureInfo(cudaStream_t stream,
                                     enum cudaStreamCaptureStatus *captureStatus_out,
                                     unsigned long long *id_out, cudaGraph_t *graph_out,
                                     const cudaGraphNode_t **dependencies_out,
                                     const cudaGraphEdgeData **edgeData_out,
                                     size_t *numDependencies_out) {
    API_ENTRY();
    if (!captureStatus_out || (edgeData_out && !dependencies_out))
        return fail(cudaErrorInvalidValue);
    if (cudaError_t e = check_current_device())
        return e;
    stream_impl *s = resolve(stream);
    std::lock_guard<std::mutex> guard(g->capture_lock);
    // asking does not invalidate the blocking streams' captures, as CUDA documents
    if (s->legacy && legacy_blocked(s->device, false))
        return fail(cudaErrorStreamCaptureImplicit);
    if (!s->cap) {
        *captureStatus_out = cudaStreamCaptureStatusNone;
        return cudaSuccess;
    }
    const capture_state &c = *s->cap;
    *captureStatus_out =
        c.invalidated ? cudaStreamCaptureStatusInvalidated : cudaStreamCaptureStatusActive;
    if (c.invalidated)
        return cudaSuccess;
    if (id_out)
        *id_out = c.id;
    if (graph_out)
        *graph_out = reinterpret_cast<cudaGraph_t>(c.graph);
    // valid until the next call on the stream, as CUDA's arrays are
    s->deps_out.clear();
    for (size_t i : s->deps)
        s->deps_out.push_back(handle_of(c.graph->nodes[i].get()));
    s->edges_out.assign(s->deps.size(), cudaGraphEdgeData{});
    if (dependencies_out)
        *dependencies_out = s->deps_out.data();
    if (edgeData_out)
        *edgeData_out = s->edges_out.data();
    if (numDependencies_out)
        *numDependencies_out = s->deps.size();
    return cudaSuccess;
}

cudaError_t cudaThreadExchangeStreamCaptureMode(enum cudaStreamCaptureMode *mode) {
    API_ENTRY();
    if (!mode ||
        (*mode != cudaStreamCaptureModeGlobal && *mode != cudaStreamCaptureModeThreadLocal &&
         *mode != cudaStreamCaptureModeRelaxed))
        return fail(cudaErrorInvalidValue);
    std::swap(*mode, thread_mode);
    return cudaSuccess;
}

cudaError_t cudaGraphGetNodes(cudaGraph_t graph, cudaGraphNode_t *nodes, size_t *numNodes) {
    API_ENTRY();
    if (!graph || !numNodes)
        return fail(cudaErrorInvalidValue);
    std::lock_guard<std::mutex> guard(g->capture_lock); // a capture may still add to it
    const auto &have = graph_of(graph)->nodes;
    if (!nodes) {
        *numNodes = have.size();
        return cudaSuccess;
    }
    const size_t n = std::min(*numNodes, have.size());
    for (size_t i = 0; i < *numNodes; i++)
        nodes[i] = i < n ? handle_of(have[i].get()) : nullptr;
    *numNodes = n;
    return cudaSuccess;
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
    API_ENTRY();
    if (!graph)
        return fail(cudaErrorInvalidValue);
    {
        std::lock_guard<std::mutex> guard(g->capture_lock);
        if (graph_of(graph)->capturing) // its capture owns it
            return fail(cudaErrorInvalidValue);
    }
    // executable graphs made from it hold their own copies of its nodes
    delete graph_of(graph);
    return cudaSuccess;
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t *pGraphExec, cudaGraph_t graph,
                                 unsigned long long flags) {
    API_ENTRY();
    // Allocation nodes (auto-free) and node priorities do not occur in captured graphs here; a
    // graph for device launch, or an upload at instantiation, is not modelled.
    if (!pGraphExec || !graph ||
        (flags & ~(unsigned long long)(cudaGraphInstantiateFlagAutoFreeOnLaunch |
                                       cudaGraphInstantiateFlagUseNodePriority)))
        return fail(cudaErrorInvalidValue);
    auto nodes = std::make_shared<std::vector<graph_node>>();
    const graph_impl &gr = *graph_of(graph);
    {
        std::lock_guard<std::mutex> guard(g->capture_lock);
        if (gr.capturing)
            return fail(cudaErrorInvalidValue);
    }
    for (const auto &n : gr.nodes)
        nodes->push_back(*n);
    exec_impl *x = new exec_impl();
    x->device = gr.device;
    x->nodes = std::move(nodes);
    *pGraphExec = reinterpret_cast<cudaGraphExec_t>(x);
    return cudaSuccess;
}

// Why hGraph's node i cannot take the place of its paired node in the executable graph, or
// cudaGraphExecUpdateSuccess. *from: the dependency that does not match.
static cudaGraphExecUpdateResult update_check(const graph_node &old, const graph_impl &gr, size_t i,
                                              const graph_node **from) {
    const graph_node &now = *gr.nodes[i];
    if (old.deps.size() != now.deps.size())
        return cudaGraphExecUpdateErrorTopologyChanged;
    for (size_t j = 0; j < now.deps.size(); j++)
        if (old.deps[j] != now.deps[j]) {
            *from = gr.nodes[now.deps[j]].get();
            return cudaGraphExecUpdateErrorTopologyChanged;
        }
    if (old.kind != now.kind)
        return cudaGraphExecUpdateErrorNodeTypeChanged;
    switch (now.kind) {
    case NODE_KERNEL:
        // stricter than CUDA 12, which lets a kernel node change its function within a context
        return old.func == now.func ? cudaGraphExecUpdateSuccess
                                    : cudaGraphExecUpdateErrorUnsupportedFunctionChange;
    case NODE_LIBRARY: // another library operation: other kernels
        return *old.op == *now.op ? cudaGraphExecUpdateSuccess
                                  : cudaGraphExecUpdateErrorUnsupportedFunctionChange;
    case NODE_MEMCPY: // the kind of transfer and the devices of the operands stay
        return old.dir == now.dir && old.dst_dev == now.dst_dev && old.src_dev == now.src_dev
                   ? cudaGraphExecUpdateSuccess
                   : cudaGraphExecUpdateErrorParametersChanged;
    case NODE_MEMSET:
        return old.dst_dev == now.dst_dev ? cudaGraphExecUpdateSuccess
                                          : cudaGraphExecUpdateErrorParametersChanged;
    case NODE_HOST:
    case NODE_EVENT_WAIT:
        return cudaGraphExecUpdateSuccess;
    }
    return cudaGraphExecUpdateError;
}

cudaError_t cudaGraphExecUpdate(cudaGraphExec_t hGraphExec, cudaGraph_t hGraph,
                                cudaGraphExecUpdateResultInfo *resultInfo) {
    API_ENTRY();
    if (resultInfo)
        *resultInfo = cudaGraphExecUpdateResultInfo{cudaGraphExecUpdateError, nullptr, nullptr};
    if (!hGraphExec || !hGraph || !resultInfo)
        return fail(cudaErrorInvalidValue);
    const graph_impl &gr = *graph_of(hGraph);
    {
        std::lock_guard<std::mutex> guard(g->capture_lock);
        if (gr.capturing)
            return fail(cudaErrorInvalidValue);
    }
    exec_impl &x = *exec_of(hGraphExec);
    std::lock_guard<std::mutex> guard(x.m);
    const std::vector<graph_node> &old = *x.nodes;
    cudaGraphExecUpdateResult r = cudaGraphExecUpdateSuccess;
    if (old.size() != gr.nodes.size())
        r = cudaGraphExecUpdateErrorTopologyChanged;
    for (size_t i = 0; r == cudaGraphExecUpdateSuccess && i < old.size(); i++) {
        const graph_node *from = nullptr;
        r = update_check(old[i], gr, i, &from);
        if (r != cudaGraphExecUpdateSuccess) {
            resultInfo->errorNode = handle_of(gr.nodes[i].get());
            resultInfo->errorFromNode = from ? handle_of(from) : nullptr;
        }
    }
    resultInfo->result = r;
    if (r != cudaGraphExecUpdateSuccess)
        return fail(cudaErrorGraphExecUpdateFailure); // the executable graph is unchanged
    auto nodes = std::make_shared<std::vector<graph_node>>();
    for (const auto &n : gr.nodes)
        nodes->push_back(*n);
    x.nodes = std::move(nodes);
    return cudaSuccess;
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t graphExec, cudaStream_t stream) {
    API_ENTRY();
    if (!graphExec)
        return fail(cudaErrorInvalidValue);
    if (cudaError_t e = check_current_device())
        return e;
    exec_impl &x = *exec_of(graphExec);
    stream_impl *s = resolve(stream);
    {
        std::lock_guard<std::mutex> guard(g->capture_lock);
        capture_state *cap;
        if (cudaError_t e = stream_use(s, &cap))
            return fail(e);
        if (cap) { // a launch into a capture is refused (see docs/cudasim.md)
            cap->invalidated = true;
            return fail(cudaErrorStreamCaptureUnsupported);
        }
    }
    if (s->device != x.device)
        return fail(cudaErrorInvalidValue);
    // The lock keeps launches of one executable graph, their issued operations and their places
    // in the streams' queues in one order.
    std::lock_guard<std::mutex> guard(x.m);
    const std::shared_ptr<const std::vector<graph_node>> nodes = x.nodes;
    std::vector<std::function<void()>> work;
    uint64_t kernels = 0, host_fns = 0, library_ops = 0, bytes[4] = {};
    for (const graph_node &n : *nodes) {
        switch (n.kind) {
        case NODE_KERNEL:
            kernels++;
            break;
        case NODE_HOST:
            host_fns++;
            break;
        case NODE_LIBRARY:
            library_ops++;
            break;
        case NODE_MEMCPY:
            bytes[n.dir] += n.bytes;
            break;
        default:
            break;
        }
        if (n.kind == NODE_EVENT_WAIT) {
            std::shared_ptr<event_impl> e = n.event;
            uint64_t gen;
            {
                std::lock_guard<std::mutex> eg(e->m);
                gen = e->recorded;
            }
            work.push_back([e, gen] {
                std::unique_lock<std::mutex> lk(e->m);
                e->cv.wait(lk, [&] { return e->completed >= gen; });
            });
        } else {
            work.push_back(n.make ? n.make() : n.run);
        }
    }
    {
        std::lock_guard<std::mutex> cg(g->count_lock);
        if (g->window) {
            g->w.graph_launches++;
            g->w.graph_nodes += nodes->size();
            g->w.kernels += kernels;
            g->w.graph_host_fns += host_fns;
            g->w.library_ops += library_ops;
            for (int d = 0; d < 4; d++)
                g->w.bytes[d] += bytes[d];
        }
    }
    // Nodes run one after another, in the order they were captured (an order the graph's edges
    // allow), after the launch before and before the next.
    auto gate = std::make_shared<launch_gate>();
    s->push([prev = x.last, gate, work = std::move(work)] {
        if (prev) {
            std::unique_lock<std::mutex> lk(prev->m);
            prev->cv.wait(lk, [&] { return prev->done; });
        }
        for (const auto &w : work)
            w();
        std::lock_guard<std::mutex> lk(gate->m);
        gate->done = true;
        gate->cv.notify_all();
    });
    x.last = gate;
    return cudaSuccess;
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t graphExec) {
    API_ENTRY();
    if (!graphExec)
        return fail(cudaErrorInvalidValue);
    // launches still queued hold what they run
    delete exec_of(graphExec);
    return cudaSuccess;
}

// ---- profiler ranges --------------------------------------------------------------------------

// A window of counts (SAGA_CUDASIM_STATS): from zero at cudaProfilerStart, written at
// cudaProfilerStop. A start inside a window and a stop outside one change nothing, as with CUDA's
// profilers.
cudaError_t cudaProfilerStart(void) {
    API_ENTRY();
    std::lock_guard<std::mutex> guard(g->count_lock);
    if (g->window)
        return cudaSuccess;
    g->window = true;
    g->windows++;
    g->w = {};
    return cudaSuccess;
}

cudaError_t cudaProfilerStop(void) {
    API_ENTRY();
    std::lock_guard<std::mutex> guard(g->count_lock);
    if (!g->window)
        return cudaSuccess;
    g->w.calls.erase("cudaProfilerStop");
    if (FILE *f = g->cfg.stats.empty() ? nullptr : fopen(g->cfg.stats.c_str(), "a")) {
        write_window(f);
        fclose(f);
    }
    g->window = false;
    return cudaSuccess;
}
