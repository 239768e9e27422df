// runtime.cpp - the CUDA simulator's runtime: devices, memory, streams, events, host functions,
// copies as CUDA documents them, and the fiber scheduler that runs a kernel's threads.
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
        uint64_t bytes[4] = {}; // copied host->host, host->device, device->host, device->device
    } w;
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

// Appends the open window's counts to f as one JSON line. Caller holds g->count_lock.
void write_window(FILE *f) {
    const global_state::counts &w = g->w;
    auto calls = [&w](const char *name) {
        auto it = w.calls.find(name);
        return it == w.calls.end() ? (uint64_t)0 : it->second;
    };
    uint64_t waits = w.sync_copies;
    for (const char *name : host_waits)
        waits += calls(name);
    fprintf(f,
            "{\"window\":%d,\"host_waits\":%llu,\"host_fns\":%llu,\"device_allocs\":%llu,"
            "\"device_frees\":%llu,\"pinned_allocs\":%llu,\"pinned_frees\":%llu,"
            "\"kernels\":%llu,\"library_ops\":%llu,\"h2d_bytes\":%llu,\"d2h_bytes\":%llu,"
            "\"d2d_bytes\":%llu,\"h2h_bytes\":%llu,\"calls\":{",
            g->windows, (unsigned long long)waits, (unsigned long long)calls("cudaLaunchHostFunc"),
            (unsigned long long)calls("cudaMalloc"), (unsigned long long)calls("cudaFree"),
            (unsigned long long)calls("cudaHostAlloc"), (unsigned long long)calls("cudaFreeHost"),
            (unsigned long long)w.kernels, (unsigned long long)w.library_ops,
            (unsigned long long)w.bytes[1], (unsigned long long)w.bytes[2],
            (unsigned long long)w.bytes[3], (unsigned long long)w.bytes[0]);
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

void submit(const char *name, site at, dim3 grid, dim3 block, size_t shmem, cudaStream_t stream,
            std::function<void()> body, const void *const *ptrs, int n_ptrs) {
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
    count(g->w.kernels);
    job->seed = splitmix64(&seed);
    s->push([job] { run_kernel(*job); });
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

cudaError_t enqueue(cudaStream_t stream, std::function<void()> fn) {
    state();
    if (current_device >= g->cfg.devices)
        return cudaErrorNoDevice;
    count(g->w.library_ops);
    resolve(stream)->push(std::move(fn));
    return cudaSuccess;
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

cudaError_t cudaDeviceSynchronize(void) {
    API_ENTRY();
    if (cudaError_t e = check_current_device())
        return e;
    std::vector<stream_impl *> streams;
    {
        std::lock_guard<std::mutex> guard(g->lock);
        streams = g->devices[(size_t)current_device].streams;
    }
    for (stream_impl *s : streams)
        s->drain();
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
    {cudaErrorNotReady, "cudaErrorNotReady", "device not ready"},
    {cudaErrorIllegalAddress, "cudaErrorIllegalAddress",
     "an illegal memory access was encountered"},
    {cudaErrorLaunchFailure, "cudaErrorLaunchFailure", "unspecified launch failure"},
    {cudaErrorNotPermitted, "cudaErrorNotPermitted", "operation not permitted"},
    {cudaErrorNotSupported, "cudaErrorNotSupported", "operation not supported"},
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
    const int saved = current_device;
    current_device = device;
    cudaDeviceSynchronize();
    current_device = saved;
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
    count(g->w.bytes[dir], bytes);
    stream_impl *s = resolve(stream);
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
    resolve(stream)->push([=] { memset(dst, value, bytes); });
    return cudaSuccess;
}

cudaError_t cudaMemset(void *dst, int value, size_t bytes) {
    API_ENTRY();
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

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
    API_ENTRY();
    if (cudaError_t e = check_current_device())
        return e;
    resolve(stream)->drain();
    return cudaSuccess;
}

cudaError_t cudaStreamQuery(cudaStream_t stream) {
    API_ENTRY();
    if (cudaError_t e = check_current_device())
        return e;
    return resolve(stream)->idle() ? cudaSuccess : fail(cudaErrorNotReady);
}

cudaError_t cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t fn, void *user_data) {
    API_ENTRY();
    if (!fn)
        return fail(cudaErrorInvalidValue);
    if (cudaError_t e = check_current_device())
        return e;
    resolve(stream)->push([fn, user_data] {
        in_host_fn = true;
        fn(user_data);
        in_host_fn = false;
    });
    return cudaSuccess;
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
    uint64_t gen;
    {
        std::lock_guard<std::mutex> guard(e->m);
        gen = ++e->recorded;
    }
    s->push([e, gen] {
        std::lock_guard<std::mutex> guard(e->m);
        if (gen > e->completed) {
            e->completed = gen;
            e->when = std::chrono::steady_clock::now();
        }
        e->cv.notify_all();
    });
    return cudaSuccess;
}

cudaError_t cudaEventQuery(cudaEvent_t event) {
    API_ENTRY();
    if (!event)
        return fail(cudaErrorInvalidResourceHandle);
    event_impl *e = ev(event);
    std::lock_guard<std::mutex> guard(e->m);
    return e->completed >= e->recorded ? cudaSuccess : fail(cudaErrorNotReady);
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
    API_ENTRY();
    if (!event)
        return fail(cudaErrorInvalidResourceHandle);
    event_impl *e = ev(event);
    std::unique_lock<std::mutex> lk(e->m);
    const uint64_t gen = e->recorded;
    e->cv.wait(lk, [&] { return e->completed >= gen; });
    return cudaSuccess;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned flags) {
    API_ENTRY();
    if (!event)
        return fail(cudaErrorInvalidResourceHandle);
    if (flags != 0)
        return fail(cudaErrorInvalidValue);
    if (cudaError_t e = check_current_device())
        return e;
    std::shared_ptr<event_impl> e = reinterpret_cast<event_handle *>(event)->e;
    uint64_t gen;
    {
        std::lock_guard<std::mutex> guard(e->m);
        gen = e->recorded; // the most recent record at the call; none: nothing to wait for
    }
    if (gen == 0)
        return cudaSuccess;
    resolve(stream)->push([e, gen] {
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
