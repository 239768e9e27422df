// graphs.cu - the CUDA simulator's graphs made by stream capture, against CUDA's documented rules
// (docs/cudasim.md, "Graphs"): a capture with kernels, copies, a memset, a host function and a fork
// onto a second stream and back records and runs nothing; its graph, instantiated and launched,
// computes the right values each launch, reads its sources when it runs, and two launches of one
// executable graph do not overlap; cudaGraphExecUpdate takes new kernel arguments and refuses
// another topology, node type or kernel, leaving the executable graph as it was; each call CUDA
// forbids during capture returns CUDA's error and invalidates the capture as CUDA does; and the
// simulator's counts (SAGA_CUDASIM_STATS) count graph launches, their nodes, and the kernels and
// host functions a launch runs rather than those captured.
//
//   graphs                         every check; exits 0 when all pass
//   graphs host-fn-calls-runtime   a graph's host function calls the runtime: the simulator must
//                                  stop the program, as it does for host functions
//   graphs nccl                    under MPI, where built with NCCL: an all-reduce captured into
//                                  a graph takes its place in the communicator's order at each
//                                  launch, between all-reduces issued outside the graph
//
// Built for the simulator (rewrite.pl); it is also plain CUDA, for a GPU. Checks of choices the
// simulator makes where CUDA documents nothing (SIM_ONLY) and of its counts run only under it.
#include <cuda_profiler_api.h>
#include <cuda_runtime.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

#ifdef SAGA_CUDA_HAVE_NCCL
#define OMPI_SKIP_MPICXX 1 // MPI's C API alone, as the NCCL stand-in links
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#include <nccl.h>
#endif

#ifdef CUDASIM_SITE
#define SIMULATED 1
#else
#define SIMULATED 0
#endif

static int failures;

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "graphs: %s:%d: ", __FILE__, __LINE__);                                \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fprintf(stderr, "\n");                                                                 \
            failures++;                                                                            \
        }                                                                                          \
    } while (0)

// The call returns want; the thread's last error is cleared after an expected failure.
#define EXPECT(call, want)                                                                         \
    do {                                                                                           \
        const cudaError_t got_ = (call);                                                           \
        CHECK(got_ == (want), "%s returned %s, expected %s", #call, cudaGetErrorName(got_),        \
              cudaGetErrorName(want));                                                             \
        cudaGetLastError();                                                                        \
    } while (0)
#define OK(call) EXPECT(call, cudaSuccess)

constexpr int N = 256;
constexpr size_t BYTES = N * sizeof(float);

__global__ void add_kernel(float *x, float v, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        x[i] += v;
}

__global__ void scale_kernel(float *x, float f, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        x[i] *= f;
}

// What host functions leave: how often they ran, and their entries and exits in order.
struct host_log {
    std::mutex m;
    std::vector<char> trace; // 'e' at entry, 'x' at exit
    std::atomic<int> runs{0};
    int sleep_ms = 0;
};

static void CUDART_CB logged(void *p) {
    host_log &l = *static_cast<host_log *>(p);
    {
        std::lock_guard<std::mutex> guard(l.m);
        l.trace.push_back('e');
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(l.sleep_ms));
    {
        std::lock_guard<std::mutex> guard(l.m);
        l.trace.push_back('x');
    }
    l.runs++;
}

// Holds its stream until released.
static void CUDART_CB hold(void *p) {
    const std::atomic<bool> &released = *static_cast<std::atomic<bool> *>(p);
    while (!released)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

struct flag_pair {
    std::atomic<int> set{0}, seen{-1};
};

static void CUDART_CB set_later(void *p) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    static_cast<flag_pair *>(p)->set = 1;
}

static void CUDART_CB see(void *p) {
    flag_pair &f = *static_cast<flag_pair *>(p);
    f.seen = f.set.load();
}

static void CUDART_CB calls_runtime(void *) {
    int device;
    cudaGetDevice(&device);
}

struct fixture {
    cudaStream_t s1, s2, s3; // non-blocking
    cudaEvent_t fork, join;
    float *h_in, *h_out, *h_first; // pinned
    float *a, *b, *c;              // device
    host_log log;
};

static cudaStreamCaptureStatus status(cudaStream_t s) {
    cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
    OK(cudaStreamIsCapturing(s, &st));
    return st;
}

// Ends the capture on s, expecting want; a failed capture gives no graph.
static cudaGraph_t end_capture(cudaStream_t s, cudaError_t want) {
    cudaGraph_t graph = reinterpret_cast<cudaGraph_t>(&failures); // not NULL
    EXPECT(cudaStreamEndCapture(s, &graph), want);
    if (want != cudaSuccess)
        CHECK(graph == nullptr, "a failed capture returned a graph");
    return want == cudaSuccess ? graph : nullptr;
}

// Variants of the captured pipeline, for cudaGraphExecUpdate.
enum variant { SAME, EXTRA_NODE, NO_FORK, MEMSET_FOR_KERNEL, OTHER_KERNEL };

// h_out = (h_in + add) * 10 and c = 7, in 8 nodes: the copy in and the add on s1, forked onto s2
// for a copy to b and the scaling, while s1 sets c; joined back on s1 for a host function and the
// copy out.
static cudaGraph_t capture_pipeline(fixture &f, float add, variant v = SAME) {
    const dim3 grid(2), block(128);
    OK(cudaStreamBeginCapture(f.s1, cudaStreamCaptureModeGlobal));
    OK(cudaMemcpyAsync(f.a, f.h_in, BYTES, cudaMemcpyHostToDevice, f.s1));
    if (v == MEMSET_FOR_KERNEL)
        OK(cudaMemsetAsync(f.a, 0, BYTES, f.s1));
    else if (v == OTHER_KERNEL)
        scale_kernel<<<grid, block, 0, f.s1>>>(f.a, add, N);
    else
        add_kernel<<<grid, block, 0, f.s1>>>(f.a, add, N);
    cudaStream_t side = f.s1;
    if (v != NO_FORK) {
        OK(cudaEventRecord(f.fork, f.s1));
        OK(cudaStreamWaitEvent(f.s2, f.fork, 0));
        side = f.s2;
    }
    OK(cudaMemcpyAsync(f.b, f.a, BYTES, cudaMemcpyDeviceToDevice, side));
    scale_kernel<<<grid, block, 0, side>>>(f.b, 10.0f, N);
    if (v != NO_FORK)
        OK(cudaEventRecord(f.join, f.s2));
    OK(cudaMemsetAsync(f.c, 0, BYTES, f.s1));
    add_kernel<<<grid, block, 0, f.s1>>>(f.c, 7.0f, N);
    if (v == EXTRA_NODE)
        add_kernel<<<grid, block, 0, f.s1>>>(f.c, 0.0f, N);
    if (v != NO_FORK)
        OK(cudaStreamWaitEvent(f.s1, f.join, 0));
    OK(cudaLaunchHostFunc(f.s1, logged, &f.log));
    OK(cudaMemcpyAsync(f.h_out, f.b, BYTES, cudaMemcpyDeviceToHost, f.s1));
    OK(cudaGetLastError());
    return end_capture(f.s1, cudaSuccess);
}

// Every element of the n floats at p (device or host) is want.
static bool all(const float *p, float want, bool device) {
    std::vector<float> v(N);
    if (device)
        OK(cudaMemcpy(v.data(), p, BYTES, cudaMemcpyDeviceToHost));
    else
        memcpy(v.data(), p, BYTES);
    for (float x : v)
        if (x != want)
            return false;
    return true;
}

static void fill(float *h, float v) {
    for (int i = 0; i < N; i++)
        h[i] = v;
}

static void capture_and_launch(fixture &f, cudaGraphExec_t *exec) {
    OK(cudaMemset(f.a, 0, BYTES));
    OK(cudaMemset(f.b, 0, BYTES));
    OK(cudaMemset(f.c, 0, BYTES));
    fill(f.h_in, 1.0f);
    fill(f.h_out, -1.0f);

    // while capturing, nothing runs
    cudaGraph_t graph = nullptr;
    {
        const dim3 grid(2), block(128);
        OK(cudaStreamBeginCapture(f.s1, cudaStreamCaptureModeGlobal));
        CHECK(status(f.s1) == cudaStreamCaptureStatusActive, "s1 is not capturing");
        CHECK(status(f.s2) == cudaStreamCaptureStatusNone, "s2 captures before its fork");
        OK(cudaMemcpyAsync(f.a, f.h_in, BYTES, cudaMemcpyHostToDevice, f.s1));
        add_kernel<<<grid, block, 0, f.s1>>>(f.a, 2.0f, N);
        OK(cudaGetLastError());
        cudaStreamCaptureStatus st;
        unsigned long long id = 0;
        cudaGraph_t in_capture = nullptr;
        const cudaGraphNode_t *deps = nullptr;
        size_t n_deps = 0;
        OK(cudaStreamGetCaptureInfo(f.s1, &st, &id, &in_capture, &deps, nullptr, &n_deps));
        cudaGraphNode_t nodes[2] = {};
        size_t n_nodes = 2;
        OK(cudaGraphGetNodes(in_capture, nodes, &n_nodes));
        CHECK(st == cudaStreamCaptureStatusActive && id != 0 && n_nodes == 2 && n_deps == 1 &&
                  deps[0] == nodes[1],
              "cudaStreamGetCaptureInfo: status %d, id %llu, %zu nodes, %zu dependencies, the "
              "next node does not follow the kernel",
              (int)st, id, n_nodes, n_deps);
        OK(cudaEventRecord(f.fork, f.s1));
        OK(cudaStreamWaitEvent(f.s2, f.fork, 0));
        CHECK(status(f.s2) == cudaStreamCaptureStatusActive, "s2 did not join the capture");
        OK(cudaMemcpyAsync(f.b, f.a, BYTES, cudaMemcpyDeviceToDevice, f.s2));
        scale_kernel<<<grid, block, 0, f.s2>>>(f.b, 10.0f, N);
        OK(cudaEventRecord(f.join, f.s2));
        OK(cudaMemsetAsync(f.c, 0, BYTES, f.s1));
        add_kernel<<<grid, block, 0, f.s1>>>(f.c, 7.0f, N);
        OK(cudaStreamWaitEvent(f.s1, f.join, 0));
        OK(cudaLaunchHostFunc(f.s1, logged, &f.log));
        OK(cudaMemcpyAsync(f.h_out, f.b, BYTES, cudaMemcpyDeviceToHost, f.s1));
        OK(cudaGetLastError());
        graph = end_capture(f.s1, cudaSuccess);
        CHECK(status(f.s2) == cudaStreamCaptureStatusNone, "s2 still captures after the end");
    }
    OK(cudaStreamSynchronize(f.s2)); // a stream that left capture can be waited for again
    OK(cudaDeviceSynchronize());
    CHECK(f.log.runs == 0, "the host function ran during capture");
    CHECK(all(f.a, 0.0f, true) && all(f.b, 0.0f, true) && all(f.c, 0.0f, true),
          "device memory changed during capture");
    CHECK(all(f.h_out, -1.0f, false), "the copy out ran during capture");

    size_t n = 0;
    OK(cudaGraphGetNodes(graph, nullptr, &n));
    CHECK(n == 8, "the graph has %zu nodes, expected 8", n);
    cudaGraphNode_t nodes[10];
    n = 10;
    OK(cudaGraphGetNodes(graph, nodes, &n));
    CHECK(n == 8 && nodes[7] != nullptr && nodes[8] == nullptr && nodes[9] == nullptr,
          "cudaGraphGetNodes with room for 10: %zu nodes, the rest not NULL", n);

    // each launch reads its source when it runs
    OK(cudaGraphInstantiate(exec, graph, 0));
    OK(cudaGraphDestroy(graph)); // the executable graph does not need it
    OK(cudaGraphLaunch(*exec, f.s1));
    OK(cudaStreamSynchronize(f.s1));
    CHECK(all(f.h_out, 30.0f, false) && all(f.c, 7.0f, true) && f.log.runs == 1,
          "first launch: h_out[0] = %g (expected 30), host function ran %d times", f.h_out[0],
          f.log.runs.load());
    fill(f.h_in, 2.0f);
    OK(cudaGraphLaunch(*exec, f.s1));
    OK(cudaStreamSynchronize(f.s1));
    CHECK(all(f.h_out, 40.0f, false) && f.log.runs == 2,
          "second launch: h_out[0] = %g (expected 40), host function ran %d times", f.h_out[0],
          f.log.runs.load());

    // two launches of one executable graph on two streams run one after the other
    f.log.sleep_ms = 30;
    {
        std::lock_guard<std::mutex> guard(f.log.m);
        f.log.trace.clear();
    }
    OK(cudaGraphLaunch(*exec, f.s1));
    OK(cudaGraphLaunch(*exec, f.s3));
    OK(cudaDeviceSynchronize());
    f.log.sleep_ms = 0;
    CHECK(std::string(f.log.trace.begin(), f.log.trace.end()) == "exex",
          "launches on two streams overlapped: host function trace %s",
          std::string(f.log.trace.begin(), f.log.trace.end()).c_str());
}

static void update(fixture &f, cudaGraphExec_t exec) {
    fill(f.h_in, 1.0f);
    // a launch already queued keeps its parameters; the next takes the new kernel argument
    std::atomic<bool> released{false};
    cudaGraph_t add3 = capture_pipeline(f, 3.0f);
    OK(cudaLaunchHostFunc(f.s1, hold, &released));
    OK(cudaGraphLaunch(exec, f.s1));
    OK(cudaMemcpyAsync(f.h_first, f.h_out, BYTES, cudaMemcpyHostToHost, f.s1));
    cudaGraphExecUpdateResultInfo info;
    OK(cudaGraphExecUpdate(exec, add3, &info));
    CHECK(info.result == cudaGraphExecUpdateSuccess, "update result %d", (int)info.result);
    OK(cudaGraphLaunch(exec, f.s1));
    released = true;
    OK(cudaStreamSynchronize(f.s1));
    CHECK(all(f.h_first, 30.0f, false), "the launch queued before the update saw it: %g",
          f.h_first[0]);
    CHECK(all(f.h_out, 40.0f, false), "the update's kernel argument was not used: %g", f.h_out[0]);

    // what the update refuses: the executable graph keeps add = 3
    struct {
        variant v;
        cudaGraphExecUpdateResult want;
        int error_node, from_node; // indices into the new graph's nodes, -1 for NULL
        bool sim_only;
    } refused[] = {
        {EXTRA_NODE, cudaGraphExecUpdateErrorTopologyChanged, -1, -1, false},
        // s1's memset of c now follows the scaling on s1, not the add
        {NO_FORK, cudaGraphExecUpdateErrorTopologyChanged, 4, 3, false},
        {MEMSET_FOR_KERNEL, cudaGraphExecUpdateErrorNodeTypeChanged, 1, -1, false},
        // CUDA 12 lets a kernel node change its function; the simulator does not
        {OTHER_KERNEL, cudaGraphExecUpdateErrorUnsupportedFunctionChange, 1, -1, true},
    };
    for (const auto &r : refused) {
        if (r.sim_only && !SIMULATED)
            continue;
        cudaGraph_t other = capture_pipeline(f, 5.0f, r.v);
        cudaGraphNode_t nodes[16];
        size_t n = 16;
        OK(cudaGraphGetNodes(other, nodes, &n));
        info = cudaGraphExecUpdateResultInfo{};
        EXPECT(cudaGraphExecUpdate(exec, other, &info), cudaErrorGraphExecUpdateFailure);
        CHECK(info.result == r.want, "variant %d: update result %d, expected %d", (int)r.v,
              (int)info.result, (int)r.want);
        CHECK(info.errorNode == (r.error_node < 0 ? nullptr : nodes[r.error_node]) &&
                  info.errorFromNode == (r.from_node < 0 ? nullptr : nodes[r.from_node]),
              "variant %d: the update names the wrong nodes", (int)r.v);
        OK(cudaGraphDestroy(other));
        OK(cudaGraphLaunch(exec, f.s1));
        OK(cudaStreamSynchronize(f.s1));
        CHECK(all(f.h_out, 40.0f, false), "variant %d: a refused update changed the graph: %g",
              (int)r.v, f.h_out[0]);
    }
    OK(cudaGraphDestroy(add3));
}

// What CUDA forbids during capture, each with its error, and what it does to the capture.
static void misuse(fixture &f, cudaGraphExec_t exec) {
    const dim3 grid(2), block(128);

    // waiting for or asking about a capturing stream
    OK(cudaStreamBeginCapture(f.s1, cudaStreamCaptureModeGlobal));
    add_kernel<<<grid, block, 0, f.s1>>>(f.a, 1.0f, N);
    EXPECT(cudaStreamSynchronize(f.s1), cudaErrorStreamCaptureUnsupported);
    CHECK(status(f.s1) == cudaStreamCaptureStatusInvalidated, "the capture is still active");
    add_kernel<<<grid, block, 0, f.s1>>>(f.a, 1.0f, N);
    EXPECT(cudaGetLastError(), cudaErrorStreamCaptureInvalidated);
    end_capture(f.s1, cudaErrorStreamCaptureInvalidated);
    CHECK(status(f.s1) == cudaStreamCaptureStatusNone, "s1 captures after its end");
    OK(cudaStreamBeginCapture(f.s1, cudaStreamCaptureModeRelaxed));
    EXPECT(cudaStreamQuery(f.s1), cudaErrorStreamCaptureUnsupported);
    end_capture(f.s1, cudaErrorStreamCaptureInvalidated);

    // an event last recorded in a capture, from the host
    cudaEvent_t e0, e1;
    OK(cudaEventCreate(&e0));
    OK(cudaEventCreate(&e1));
    OK(cudaEventRecord(e0, f.s3));
    OK(cudaStreamSynchronize(f.s3));
    for (int call = 0; call < 3; call++) {
        OK(cudaStreamBeginCapture(f.s1, cudaStreamCaptureModeRelaxed));
        OK(cudaEventRecord(e1, f.s1));
        float ms;
        if (call == 0)
            EXPECT(cudaEventQuery(e1), cudaErrorCapturedEvent);
        else if (call == 1)
            EXPECT(cudaEventSynchronize(e1), cudaErrorCapturedEvent);
        else
            EXPECT(cudaEventElapsedTime(&ms, e0, e1), cudaErrorCapturedEvent);
        end_capture(f.s1, cudaErrorStreamCaptureInvalidated);
    }
    if (SIMULATED) {
        // the capture has ended, the event still stands for its nodes, not for work queued
        EXPECT(cudaEventQuery(e1), cudaErrorCapturedEvent);
        EXPECT(cudaStreamWaitEvent(f.s3, e1, 0), cudaErrorInvalidValue);
    }
    OK(cudaEventRecord(e1, f.s3)); // recorded outside capture: usable again
    OK(cudaEventSynchronize(e1));

    // potentially unsafe calls, by capture mode and thread
    void *p = nullptr;
    OK(cudaStreamBeginCapture(f.s1, cudaStreamCaptureModeGlobal));
    EXPECT(cudaMalloc(&p, 64), cudaErrorStreamCaptureUnsupported);
    end_capture(f.s1, cudaErrorStreamCaptureInvalidated);
    std::vector<float> host(N);
    if (SIMULATED) { // CUDA does not list the potentially unsafe calls
        OK(cudaStreamBeginCapture(f.s1, cudaStreamCaptureModeGlobal));
        EXPECT(cudaMemcpy(host.data(), f.a, BYTES, cudaMemcpyDeviceToHost),
               cudaErrorStreamCaptureUnsupported);
        end_capture(f.s1, cudaErrorStreamCaptureInvalidated);
    }
    for (cudaStreamCaptureMode mode :
         {cudaStreamCaptureModeGlobal, cudaStreamCaptureModeThreadLocal}) {
        // another thread: refused under a global capture, unless its own mode is relaxed
        OK(cudaStreamBeginCapture(f.s1, mode));
        cudaError_t global_thread = cudaSuccess, relaxed_thread = cudaSuccess;
        std::thread([&] {
            void *q = nullptr;
            global_thread = cudaMalloc(&q, 64);
            if (global_thread == cudaSuccess)
                cudaFree(q);
            cudaStreamCaptureMode m = cudaStreamCaptureModeRelaxed;
            cudaThreadExchangeStreamCaptureMode(&m);
            relaxed_thread = cudaMalloc(&q, 64);
            if (relaxed_thread == cudaSuccess)
                cudaFree(q);
            cudaThreadExchangeStreamCaptureMode(&m);
            CHECK(m == cudaStreamCaptureModeRelaxed, "the exchange did not give the mode back");
        }).join();
        const cudaError_t want =
            mode == cudaStreamCaptureModeGlobal ? cudaErrorStreamCaptureUnsupported : cudaSuccess;
        CHECK(global_thread == want && relaxed_thread == cudaSuccess,
              "capture mode %d: cudaMalloc on another thread gave %s (expected %s), and in "
              "relaxed mode %s",
              (int)mode, cudaGetErrorName(global_thread), cudaGetErrorName(want),
              cudaGetErrorName(relaxed_thread));
        if (cudaGraph_t gr = end_capture(f.s1, mode == cudaStreamCaptureModeGlobal
                                                   ? cudaErrorStreamCaptureInvalidated
                                                   : cudaSuccess))
            OK(cudaGraphDestroy(gr));
    }
    // a relaxed capture allows them, but not a synchronization of the device it captures on
    OK(cudaStreamBeginCapture(f.s1, cudaStreamCaptureModeRelaxed));
    OK(cudaMalloc(&p, 64));
    OK(cudaFree(p));
    EXPECT(cudaDeviceSynchronize(), cudaErrorStreamCaptureUnsupported);
    end_capture(f.s1, cudaErrorStreamCaptureInvalidated);

    // the legacy stream while a blocking stream captures
    cudaStream_t blocking;
    OK(cudaStreamCreate(&blocking));
    OK(cudaStreamBeginCapture(blocking, cudaStreamCaptureModeRelaxed));
    cudaStreamCaptureStatus st;
    EXPECT(cudaStreamIsCapturing(0, &st), cudaErrorStreamCaptureImplicit);
    CHECK(status(blocking) == cudaStreamCaptureStatusActive, "asking invalidated the capture");
    add_kernel<<<grid, block>>>(f.a, 1.0f, N);
    EXPECT(cudaGetLastError(), cudaErrorStreamCaptureImplicit);
    CHECK(status(blocking) == cudaStreamCaptureStatusInvalidated,
          "the legacy stream's use left the capture valid");
    end_capture(blocking, cudaErrorStreamCaptureInvalidated);
    OK(cudaStreamBeginCapture(blocking, cudaStreamCaptureModeRelaxed));
    EXPECT(cudaMemcpy(host.data(), f.a, BYTES, cudaMemcpyDeviceToHost),
           cudaErrorStreamCaptureImplicit);
    end_capture(blocking, cudaErrorStreamCaptureInvalidated);
    OK(cudaStreamDestroy(blocking));
    // ... but not while only non-blocking streams capture
    OK(cudaMemset(f.a, 0, BYTES));
    OK(cudaStreamBeginCapture(f.s1, cudaStreamCaptureModeGlobal));
    add_kernel<<<grid, block>>>(f.a, 1.0f, N);
    OK(cudaGetLastError());
    OK(cudaGraphDestroy(end_capture(f.s1, cudaSuccess)));
    CHECK(all(f.a, 1.0f, true), "the legacy stream's kernel did not run");

    // copies with pageable memory (SIM_ONLY: refused where CUDA says nothing)
    if (SIMULATED) {
        OK(cudaStreamBeginCapture(f.s1, cudaStreamCaptureModeGlobal));
        EXPECT(cudaMemcpyAsync(f.a, host.data(), BYTES, cudaMemcpyHostToDevice, f.s1),
               cudaErrorStreamCaptureUnsupported);
        end_capture(f.s1, cudaErrorStreamCaptureInvalidated);
    }

    // waits across the capture's boundary
    OK(cudaEventRecord(e0, f.s3));
    OK(cudaStreamBeginCapture(f.s1, cudaStreamCaptureModeGlobal));
    EXPECT(cudaStreamWaitEvent(f.s1, e0, 0), cudaErrorStreamCaptureIsolation);
    end_capture(f.s1, cudaErrorStreamCaptureInvalidated);
    EXPECT(cudaStreamWaitEvent(f.s1, e0, cudaEventWaitExternal), cudaErrorInvalidValue);
    // ... with cudaEventWaitExternal, each launch waits for the event's record before it
    flag_pair flag;
    OK(cudaStreamBeginCapture(f.s1, cudaStreamCaptureModeGlobal));
    OK(cudaStreamWaitEvent(f.s1, e0, cudaEventWaitExternal));
    OK(cudaLaunchHostFunc(f.s1, see, &flag));
    cudaGraph_t waits = end_capture(f.s1, cudaSuccess);
    cudaGraphExec_t waits_exec;
    OK(cudaGraphInstantiate(&waits_exec, waits, 0));
    OK(cudaLaunchHostFunc(f.s3, set_later, &flag));
    OK(cudaEventRecord(e0, f.s3));
    OK(cudaGraphLaunch(waits_exec, f.s1));
    OK(cudaStreamSynchronize(f.s1));
    CHECK(flag.seen == 1, "the external event wait did not wait for the event's record");
    OK(cudaGraphExecDestroy(waits_exec));
    OK(cudaGraphDestroy(waits));
    // ... and between two captures
    OK(cudaStreamBeginCapture(f.s1, cudaStreamCaptureModeGlobal));
    OK(cudaStreamBeginCapture(f.s3, cudaStreamCaptureModeGlobal));
    OK(cudaEventRecord(e1, f.s1));
    EXPECT(cudaStreamWaitEvent(f.s3, e1, 0), cudaErrorStreamCaptureMerge);
    end_capture(f.s3, cudaErrorStreamCaptureInvalidated);
    end_capture(f.s1, cudaErrorStreamCaptureInvalidated);

    // ending: a fork not joined back, the wrong stream, the wrong thread
    OK(cudaStreamBeginCapture(f.s1, cudaStreamCaptureModeGlobal));
    add_kernel<<<grid, block, 0, f.s1>>>(f.a, 1.0f, N);
    OK(cudaEventRecord(f.fork, f.s1));
    OK(cudaStreamWaitEvent(f.s2, f.fork, 0));
    add_kernel<<<grid, block, 0, f.s2>>>(f.b, 1.0f, N);
    OK(cudaGetLastError());
    end_capture(f.s1, cudaErrorStreamCaptureUnjoined);
    CHECK(status(f.s2) == cudaStreamCaptureStatusNone, "the forked stream still captures");
    OK(cudaMemset(f.b, 0, BYTES));
    add_kernel<<<grid, block, 0, f.s2>>>(f.b, 1.0f, N); // queued and run again
    OK(cudaStreamSynchronize(f.s2));
    CHECK(all(f.b, 1.0f, true), "the forked stream does not run work after the capture");
    OK(cudaStreamBeginCapture(f.s1, cudaStreamCaptureModeGlobal));
    OK(cudaEventRecord(f.fork, f.s1));
    OK(cudaStreamWaitEvent(f.s2, f.fork, 0));
    end_capture(f.s2, cudaErrorStreamCaptureUnmatched);
    end_capture(f.s1, cudaErrorStreamCaptureInvalidated);
    OK(cudaStreamBeginCapture(f.s1, cudaStreamCaptureModeGlobal));
    cudaError_t other_thread = cudaSuccess;
    std::thread([&] {
        cudaGraph_t gr;
        other_thread = cudaStreamEndCapture(f.s1, &gr);
    }).join();
    CHECK(other_thread == cudaErrorStreamCaptureWrongThread,
          "another thread ended a global capture: %s", cudaGetErrorName(other_thread));
    OK(cudaGraphDestroy(end_capture(f.s1, cudaSuccess)));

    // SIM_ONLY, the codes CUDA does not name: beginning on the legacy stream or twice, ending
    // without a beginning, a graph launched into a capture, a capturing stream destroyed
    if (SIMULATED) {
        EXPECT(cudaStreamBeginCapture(0, cudaStreamCaptureModeGlobal),
               cudaErrorStreamCaptureUnsupported);
        OK(cudaStreamBeginCapture(f.s1, cudaStreamCaptureModeGlobal));
        EXPECT(cudaStreamBeginCapture(f.s1, cudaStreamCaptureModeGlobal), cudaErrorIllegalState);
        OK(cudaGraphDestroy(end_capture(f.s1, cudaSuccess)));
        end_capture(f.s1, cudaErrorIllegalState);
        OK(cudaStreamBeginCapture(f.s3, cudaStreamCaptureModeGlobal));
        EXPECT(cudaGraphLaunch(exec, f.s3), cudaErrorStreamCaptureUnsupported);
        end_capture(f.s3, cudaErrorStreamCaptureInvalidated);
        cudaStream_t doomed;
        OK(cudaStreamCreateWithFlags(&doomed, cudaStreamNonBlocking));
        OK(cudaStreamBeginCapture(doomed, cudaStreamCaptureModeGlobal));
        EXPECT(cudaStreamDestroy(doomed), cudaErrorStreamCaptureUnsupported);
        end_capture(doomed, cudaErrorStreamCaptureInvalidated);
        OK(cudaStreamDestroy(doomed));
    }
    OK(cudaEventDestroy(e0));
    OK(cudaEventDestroy(e1));
}

// The number after "key": in line, or -1.
static long long field(const char *line, const char *key) {
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *p = strstr(line, pat);
    return p ? strtoll(p + strlen(pat), nullptr, 10) : -1;
}

// The n-th window line (1-based) of the stats file.
static std::string window_line(const char *path, int n) {
    FILE *f = fopen(path, "r");
    if (!f)
        return "";
    char line[8192];
    int seen = 0;
    std::string found;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, "{\"window\":", 10) == 0 && ++seen == n) {
            found = line;
            break;
        }
    fclose(f);
    return found;
}

// A window counts the graph launches in it, their nodes, and the kernels, host functions and
// bytes they run; captured calls are calls, but their kernels and host functions count only when
// a launch runs them.
static void counts(fixture &f, const char *path) {
    const dim3 grid(2), block(128);
    host_log log;
    OK(cudaProfilerStart());
    OK(cudaStreamBeginCapture(f.s1, cudaStreamCaptureModeGlobal));
    OK(cudaMemcpyAsync(f.a, f.h_in, BYTES, cudaMemcpyHostToDevice, f.s1));
    add_kernel<<<grid, block, 0, f.s1>>>(f.a, 1.0f, N);
    scale_kernel<<<grid, block, 0, f.s1>>>(f.a, 2.0f, N);
    OK(cudaLaunchHostFunc(f.s1, logged, &log));
    cudaGraph_t graph = end_capture(f.s1, cudaSuccess);
    cudaGraphExec_t exec;
    OK(cudaGraphInstantiate(&exec, graph, 0));
    OK(cudaGraphLaunch(exec, f.s1));
    OK(cudaGraphLaunch(exec, f.s1));
    add_kernel<<<grid, block, 0, f.s1>>>(f.a, 1.0f, N);
    OK(cudaLaunchHostFunc(f.s1, logged, &log));
    OK(cudaStreamSynchronize(f.s1));
    OK(cudaProfilerStop());
    // a capture without a launch runs nothing
    OK(cudaProfilerStart());
    OK(cudaStreamBeginCapture(f.s1, cudaStreamCaptureModeGlobal));
    add_kernel<<<grid, block, 0, f.s1>>>(f.a, 1.0f, N);
    OK(cudaLaunchHostFunc(f.s1, logged, &log));
    OK(cudaGraphDestroy(end_capture(f.s1, cudaSuccess)));
    OK(cudaProfilerStop());
    OK(cudaGraphExecDestroy(exec));
    OK(cudaGraphDestroy(graph));
    CHECK(log.runs == 3, "host functions ran %d times, expected 3", log.runs.load());

    const std::string w1 = window_line(path, 1), w2 = window_line(path, 2);
    const char *l1 = w1.c_str(), *l2 = w2.c_str();
    CHECK(field(l1, "graph_launches") == 2 && field(l1, "graph_nodes") == 8,
          "window 1: launches and nodes: %s", l1);
    CHECK(field(l1, "kernels") == 5 && field(l1, "host_fns") == 3,
          "window 1: 2 launches of 2 kernels and a host function, 1 more of each: %s", l1);
    CHECK(field(l1, "h2d_bytes") == 2 * (long long)BYTES, "window 1: bytes copied: %s", l1);
    CHECK(field(l1, "cudaLaunchHostFunc") == 2 && field(l1, "cudaGraphLaunch") == 2 &&
              field(l1, "cudaStreamBeginCapture") == 1,
          "window 1: calls: %s", l1);
    CHECK(field(l2, "kernels") == 0 && field(l2, "host_fns") == 0 &&
              field(l2, "graph_nodes") == 0 && field(l2, "graph_launches") == 0 &&
              field(l2, "cudaLaunchHostFunc") == 1,
          "window 2: a capture alone: %s", l2);
}

#ifdef SAGA_CUDA_HAVE_NCCL
static int nccl_in_graph() {
    int provided = 0, rank = 0, ranks = 1;
    MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    OK(cudaSetDevice(rank));
    ncclUniqueId id;
    if (rank == 0)
        CHECK(ncclGetUniqueId(&id) == ncclSuccess, "ncclGetUniqueId failed");
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
    ncclComm_t comm = nullptr;
    CHECK(ncclCommInitRank(&comm, ranks, id, rank) == ncclSuccess, "ncclCommInitRank failed");
    cudaStream_t s;
    OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    float *x;
    OK(cudaMalloc(&x, BYTES));
    std::vector<float> h(N, rank + 1.0f);
    OK(cudaMemcpy(x, h.data(), BYTES, cudaMemcpyHostToDevice));
    auto all_reduce = [&] {
        CHECK(ncclAllReduce(x, x, N, ncclFloat, ncclSum, comm, s) == ncclSuccess,
              "ncclAllReduce failed");
    };
    all_reduce();
    OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    add_kernel<<<dim3(2), dim3(128), 0, s>>>(x, 1.0f, N);
    all_reduce();
    cudaGraph_t graph = end_capture(s, cudaSuccess);
    cudaGraphExec_t exec;
    OK(cudaGraphInstantiate(&exec, graph, 0));
    OK(cudaGraphLaunch(exec, s));
    all_reduce();
    OK(cudaGraphLaunch(exec, s));
    OK(cudaStreamSynchronize(s));
    float want = ranks * (ranks + 1) / 2.0f;
    want = (want + 1) * ranks * ranks;
    want = (want + 1) * ranks;
    CHECK(all(x, want, true), "rank %d: x is not %g", rank, want);
    OK(cudaGraphExecDestroy(exec));
    OK(cudaGraphDestroy(graph));
    OK(cudaFree(x));
    OK(cudaStreamDestroy(s));
    CHECK(ncclCommDestroy(comm) == ncclSuccess, "ncclCommDestroy failed");
    MPI_Finalize();
    if (failures) {
        fprintf(stderr, "graphs: rank %d: %d checks failed\n", rank, failures);
        return 1;
    }
    printf("graphs: rank %d: every check passed\n", rank);
    return 0;
}
#endif

static char stats_path[] = "/tmp/saga-cudasim-graphs-XXXXXX";

// Registered before the simulator's first call, so it runs after the simulator's exit handler,
// which appends the devices' peaks to the file.
static void remove_stats() {
    unlink(stats_path);
}

int main(int argc, char **argv) {
#ifdef SAGA_CUDA_HAVE_NCCL
    if (argc > 1 && strcmp(argv[1], "nccl") == 0)
        return nccl_in_graph();
#endif
    const bool host_fn_calls = argc > 1 && strcmp(argv[1], "host-fn-calls-runtime") == 0;
    if (SIMULATED && !host_fn_calls) { // that mode ends in an abort: no file left behind
        const int fd = mkstemp(stats_path);
        if (fd < 0) {
            perror("graphs: mkstemp");
            return 1;
        }
        close(fd);
        atexit(remove_stats);
        setenv("SAGA_CUDASIM_STATS", stats_path, 1); // read by the simulator at its first call
    }
    fixture f;
    OK(cudaStreamCreateWithFlags(&f.s1, cudaStreamNonBlocking));
    OK(cudaStreamCreateWithFlags(&f.s2, cudaStreamNonBlocking));
    OK(cudaStreamCreateWithFlags(&f.s3, cudaStreamNonBlocking));
    OK(cudaEventCreateWithFlags(&f.fork, cudaEventDisableTiming));
    OK(cudaEventCreateWithFlags(&f.join, cudaEventDisableTiming));
    OK(cudaHostAlloc(&f.h_in, BYTES, cudaHostAllocDefault));
    OK(cudaHostAlloc(&f.h_out, BYTES, cudaHostAllocDefault));
    OK(cudaHostAlloc(&f.h_first, BYTES, cudaHostAllocDefault));
    OK(cudaMalloc(&f.a, BYTES));
    OK(cudaMalloc(&f.b, BYTES));
    OK(cudaMalloc(&f.c, BYTES));

    if (host_fn_calls) {
        OK(cudaStreamBeginCapture(f.s1, cudaStreamCaptureModeGlobal));
        OK(cudaLaunchHostFunc(f.s1, calls_runtime, nullptr));
        cudaGraph_t graph = end_capture(f.s1, cudaSuccess);
        cudaGraphExec_t exec;
        OK(cudaGraphInstantiate(&exec, graph, 0));
        OK(cudaGraphLaunch(exec, f.s1));
        OK(cudaStreamSynchronize(f.s1)); // the simulator stops the program before this returns
        fprintf(stderr, "graphs: the host function's runtime call was not refused\n");
        return 1;
    }

    cudaGraphExec_t exec = nullptr;
    capture_and_launch(f, &exec);
    update(f, exec);
    misuse(f, exec);
    if (SIMULATED)
        counts(f, stats_path);
    OK(cudaGraphExecDestroy(exec));
    OK(cudaStreamDestroy(f.s1));
    OK(cudaStreamDestroy(f.s2));
    OK(cudaStreamDestroy(f.s3));
    OK(cudaFreeHost(f.h_in));
    OK(cudaFreeHost(f.h_out));
    OK(cudaFreeHost(f.h_first));
    OK(cudaFree(f.a));
    OK(cudaFree(f.b));
    OK(cudaFree(f.c));
    if (failures) {
        fprintf(stderr, "graphs: %d checks failed\n", failures);
        return 1;
    }
    printf("graphs: every check passed\n");
    return 0;
}
