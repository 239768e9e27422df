#!/usr/bin/env bash
# gpu.sh - the GPU benchmarks, one after another, with the machine they ran on:
#
#   gcn       `saga gcn --device cuda` against PyTorch Geometric's GCNConv (bench/gcn_pyg.py,
#             edge_index and CSR adjacency) on the same generated citation graphs (mean degree
#             20, 128 features, 8 classes; 50,000 and 500,000 vertices: 1M and 10M directed
#             edges once the undirected edge list is made symmetric): median ms per training
#             epoch (forward, backward, Adam step; evaluation excluded), saga with its default
#             SpMM (its own kernel) and again with cuSPARSE's (SAGA_CUDA_SPMM=cusparse)
#   pagerank  `saga pagerank --device cuda` against a bare cuSPARSE SpMV loop (spmv_cusparse, the
#             practical limit) on an R-MAT graph: edges per second over a fixed ITERS iterations,
#             best of RUNS, and the L1 distance between the two score vectors
#   stream    bench/stream.sh with DEVICE=cuda: GCN (and PageRank) streamed through a device
#             budget 4x below the in-memory peak, against in memory
#   h2d       host -> device bandwidth, 1 MiB to 256 MiB: saga's backend API (bench_h2d) against
#             cudaMemcpyAsync from pinned memory (h2d_cuda)
#   dense     bench/dense.sh with DEVICE=cuda: `saga mlp` with its parameters and Adam moments 8x
#             the device budget against the same network in memory, sized for a GPU (4 layers of
#             width 4096, batch 8192 in 8 micro-batches: 605 MB of state, a 76 MB budget), so
#             that each step has compute enough to hide the copies
#
#   bench/gpu.sh [BUILD_DIR]
#     PARTS="gcn pagerank stream h2d dense" EPOCHS=30 GCN_VERTICES="50000 500000" SCALE=22
#     EDGE_FACTOR=16 ITERS=20 RUNS=2 STREAM_N=500000 PYTHON=(a python3 with torch_geometric)
#     STEP_TIMEOUT=300 (seconds any one command may run)
#
# A part whose pieces are missing (no GPU, a build without CUDA, no PyTorch Geometric) is
# skipped with the reason; the script exits non-zero only when a command that should have run
# failed. Generated data goes under bench/out/ and is reused by later runs.
set -uo pipefail
build=$(cd "${1:-build}" 2>/dev/null && pwd) || { echo "gpu.sh: no build directory ${1:-build}" >&2; exit 1; }
here=$(cd "$(dirname "$0")" && pwd)
out=$here/out
bin=$build/bin
saga=$bin/saga
parts=${PARTS:-gcn pagerank stream h2d dense}
epochs=${EPOCHS:-30}
gcn_vertices=${GCN_VERTICES:-50000 500000}
scale=${SCALE:-22} ef=${EDGE_FACTOR:-16} iters=${ITERS:-20} runs=${RUNS:-2}
stream_n=${STREAM_N:-500000}
limit=${STEP_TIMEOUT:-300}
[ -x "$saga" ] || { echo "gpu.sh: $saga not built" >&2; exit 1; }
mkdir -p "$out"

failed=()
summary=()
note() { summary+=("$1"); }
skip() { echo "skipped: $2"; note "$1: skipped ($2)"; }
failure() { echo "FAILED: $2"; note "$1: FAILED ($2)"; failed+=("$1"); }
# A JSON number or string field of saga's --json line on stdin.
jfield() { sed -n "s/.*\"$1\":\"\{0,1\}\([^,\"}]*\).*/\1/p"; }
# A key=value field of a line on stdin.
kv() { tr ' ' '\n' | sed -n "s/^$1=//p" | head -n 1; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.2f", a / b; else printf "-" }'; }

# ---- the machine --------------------------------------------------------------------------------
echo "== machine"
echo "date:    $(date -u '+%Y-%m-%d %H:%M UTC')"
echo "commit:  $(git -C "$here" rev-parse --short HEAD 2>/dev/null || echo unknown)"
if command -v nvidia-smi >/dev/null 2>&1; then
    nvidia-smi -L 2>&1 | sed 's/^/gpu:     /'
    nvidia-smi --query-gpu=driver_version,memory.total,pcie.link.gen.max,pcie.link.width.max \
        --format=csv,noheader 2>/dev/null | head -n 1 |
        awk -F', ' '{ printf "driver:  %s, %s, PCIe gen %s x%s\n", $1, $2, $3, $4 }'
else
    echo "gpu:     nvidia-smi not found"
fi
command -v nvcc >/dev/null 2>&1 && echo "cuda:    $(nvcc --version | tail -n 2 | head -n 1)"
echo "cpu:     $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo)"

# Does saga's CUDA backend open? One tiny training run says it, with saga's own reason if not.
gpu_ok=1
probe=$(timeout "$limit" "$saga" gcn --synthetic 200,4,8,2 --epochs 1 --device cuda --quiet 2>&1) || {
    gpu_ok=0
    gpu_why="saga's CUDA backend does not open: $(echo "$probe" | tail -n 1 | sed 's/^saga: //')"
    echo "saga:    $gpu_why"
}
[ $gpu_ok = 1 ] && echo "saga:    the CUDA backend opens"

# A Python with PyTorch Geometric (or, failing that, with torch, so that gcn_pyg.py says why).
py=${PYTHON:-}
if [ -z "$py" ]; then
    for p in python3 /usr/bin/python3; do
        if command -v "$p" >/dev/null 2>&1 && "$p" -c 'import torch_geometric' 2>/dev/null; then
            py=$p
            break
        fi
    done
fi
if [ -z "$py" ]; then
    for p in python3 /usr/bin/python3; do
        if command -v "$p" >/dev/null 2>&1 && "$p" -c 'import torch' 2>/dev/null; then py=$p; break; fi
    done
fi
if [ -n "$py" ]; then
    echo "python:  $("$py" -c 'import sys, torch
try:
    import torch_geometric as g; v = g.__version__
except Exception as e:
    v = "not importable"
print(sys.executable, "torch", torch.__version__, "(CUDA", str(torch.version.cuda) + ")", "torch_geometric", v)' 2>&1 | tail -n 1)"
else
    echo "python:  no python3 with torch"
fi

# ---- GCN: saga against PyTorch Geometric --------------------------------------------------------
part_gcn() {
    echo
    echo "== gcn: saga gcn --device cuda against PyG GCNConv, $epochs timed epochs"
    [ $gpu_ok = 1 ] || { skip gcn "$gpu_why"; return; }
    local n data s saga_ms cus_ms edges r rc pyg_ei pyg_csr why=''
    [ -n "$py" ] || why="no python3 with torch: only saga runs"
    # "saga ms" runs the default SpMM (saga's own kernel for every product); "cuSPARSE" runs
    # cuSPARSE's for GCN's weighted aggregation (SAGA_CUDA_SPMM=cusparse).
    printf '%-10s %-14s %-10s %-10s %-16s %-12s %s\n' vertices "directed edges" "saga ms" \
        "cuSPARSE" "PyG edge_index" "PyG csr" "PyG edge_index / saga"
    for n in $gcn_vertices; do
        data=$out/citation-$n-20-128-8
        if [ ! -f "$data/labels.txt" ]; then
            timeout "$limit" "$saga" generate citation --vertices "$n" --degree 20 --features 128 \
                --classes 8 --seed 1 -o "$data" --quiet || { failure gcn "generating $data"; return; }
        fi
        s=$(timeout "$limit" "$saga" gcn --data "$data" --device cuda --epochs "$epochs" --json \
            --quiet | tail -n 1)
        saga_ms=$(echo "$s" | jfield epoch_ms_median)
        edges=$(echo "$s" | jfield edges)
        [ -n "$saga_ms" ] || { failure gcn "saga gcn on $data"; return; }
        cus_ms=$(SAGA_CUDA_SPMM=cusparse timeout "$limit" "$saga" gcn --data "$data" --device cuda \
            --epochs "$epochs" --json --quiet | tail -n 1 | jfield epoch_ms_median)
        [ -n "$cus_ms" ] || failure gcn "saga gcn with SAGA_CUDA_SPMM=cusparse on $data"
        pyg_ei=- pyg_csr=-
        if [ -n "$py" ] && [ -z "$why" ]; then
            r=$(timeout "$limit" "$py" "$here/gcn_pyg.py" --data "$data" --device cuda \
                --epochs "$epochs" --adj edge_index,csr 2>&1)
            rc=$?
            # a failure in the second adjacency leaves the first one's RESULT line
            pyg_ei=$(echo "$r" | grep 'RESULT.*adj=edge_index' | kv median_epoch_ms)
            pyg_csr=$(echo "$r" | grep 'RESULT.*adj=csr' | kv median_epoch_ms)
            case $rc in
            0) ;;
            77) why=$(echo "$r" | tail -n 1) ;;
            *)
                echo "$r" | tail -n 5
                failure gcn "gcn_pyg.py on $data (exit status $rc)"
                ;;
            esac
        fi
        printf '%-10s %-14s %-10.3f %-10s %-16s %-12s %s\n' "$n" "$((2 * edges))" "$saga_ms" \
            "${cus_ms:--}" "${pyg_ei:--}" "${pyg_csr:--}" "$(ratio "${pyg_ei:-}" "$saga_ms")"
        note "gcn $n vertices, $((2 * edges)) directed edges: saga $(printf %.3f "$saga_ms") ms/epoch (cuSPARSE SpMM ${cus_ms:--} ms), PyG edge_index ${pyg_ei:--} ms, PyG csr ${pyg_csr:--} ms"
    done
    [ -n "$why" ] && echo "PyG side skipped: $why" && note "gcn: PyG side skipped ($why)"
}

# ---- PageRank: saga against a cuSPARSE SpMV loop ------------------------------------------------
part_pagerank() {
    echo
    echo "== pagerank: saga pagerank --device cuda against cuSPARSE SpMV, R-MAT scale $scale, edge factor $ef, $iters iterations, best of $runs"
    [ $gpu_ok = 1 ] || { skip pagerank "$gpu_why"; return; }
    local graph=$out/rmat${scale}-ef${ef}.sgr j r spi edges best_saga='' alg i rc extra
    if [ ! -s "$graph" ]; then
        if ! timeout "$limit" "$saga" generate rmat --scale "$scale" --edge-factor "$ef" --seed 1 \
            -o "$graph.tmp.sgr" --quiet || ! mv "$graph.tmp.sgr" "$graph"; then
            failure pagerank "generating $graph"
            return
        fi
    fi
    for ((i = 1; i <= runs; i++)); do
        extra=() # the last run writes every score, for the comparison below
        [ $i = "$runs" ] && extra=(--out "$out/pagerank-saga-cuda.txt")
        j=$(timeout "$limit" "$saga" pagerank "$graph" --device cuda --tol 1e-300 --max-iters "$iters" \
            --allow-unconverged --top 0 --json --quiet "${extra[@]}" | tail -n 1)
        spi=$(echo "$j" | jfield seconds_per_iteration)
        edges=$(echo "$j" | jfield edges)
        [ -n "$spi" ] || { failure pagerank "saga pagerank --device cuda"; return; }
        echo "saga run $i: $(echo "$j" | jfield iterations) iterations, $spi s per iteration"
        best_saga=$(awk -v a="$best_saga" -v b="$spi" 'BEGIN { print (a == "" || b < a) ? b : a }')
    done
    printf '%-24s %16s %14s %10s\n' "" "s/iteration" "edges/s" "vs saga"
    printf '%-24s %16.6f %14.4g %10s\n' "saga" "$best_saga" "$(awk -v e="$edges" -v t="$best_saga" 'BEGIN { print e / t }')" 1.00
    note "pagerank R-MAT $scale/$ef ($edges edges): saga $(awk -v e="$edges" -v t="$best_saga" 'BEGIN { printf "%.4g", e / t }') edges/s"
    if [ ! -x "$bin/spmv_cusparse" ]; then
        skip pagerank "$bin/spmv_cusparse not built (configure with SAGA_CUDA on)"
        return
    fi
    for alg in default csr2; do
        local best=''
        for ((i = 1; i <= runs; i++)); do
            extra=()
            [ $i = "$runs" ] && [ $alg = default ] && extra=(--out "$out/pagerank-cusparse.txt")
            r=$(timeout "$limit" "$bin/spmv_cusparse" "$graph" --iters "$iters" --alg "$alg" "${extra[@]}")
            rc=$?
            [ $rc = 77 ] && { skip pagerank "$(echo "$r" | tail -n 1)"; return; }
            spi=$(echo "$r" | tail -n 1 | kv seconds_per_iteration)
            if [ $rc != 0 ] || [ -z "$spi" ]; then
                failure pagerank "spmv_cusparse --alg $alg"
                return
            fi
            best=$(awk -v a="$best" -v b="$spi" 'BEGIN { print (a == "" || b < a) ? b : a }')
        done
        printf '%-24s %16.6f %14.4g %9sx\n' "cuSPARSE ($alg)" "$best" \
            "$(awk -v e="$edges" -v t="$best" 'BEGIN { print e / t }')" "$(ratio "$best_saga" "$best")"
        note "pagerank: cuSPARSE $alg $(awk -v e="$edges" -v t="$best" 'BEGIN { printf "%.4g", e / t }') edges/s (saga time / cuSPARSE time $(ratio "$best_saga" "$best"))"
    done
    # Both files list every vertex as "id score" in the same (original-id) order.
    paste -d' ' "$out/pagerank-saga-cuda.txt" "$out/pagerank-cusparse.txt" | awk '
        $1 != $3 { print "id mismatch at line " NR; exit 1 }
        { d = $2 - $4; d = d < 0 ? -d : d; s += d; if (d > m) m = d }
        END { printf "L1 distance between the saga and cuSPARSE scores: %.3g (max per vertex %.3g)\n", s, m }'
}

# ---- streamed GCN and PageRank on the GPU -------------------------------------------------------
part_stream() {
    echo
    echo "== stream: bench/stream.sh with DEVICE=cuda, N=$stream_n, $epochs epochs"
    [ $gpu_ok = 1 ] || { skip stream "$gpu_why"; return; }
    command -v python3 >/dev/null 2>&1 || { skip stream "stream.sh needs python3 for its JSON fields"; return; }
    if DEVICE=cuda N=$stream_n EPOCHS=$epochs timeout $((4 * limit)) bash "$here/stream.sh" "$build"; then
        note "stream: done (table above)"
    else
        failure stream "bench/stream.sh"
    fi
}

# ---- host -> device bandwidth -------------------------------------------------------------------
part_h2d() {
    echo
    echo "== h2d: host -> device bandwidth, saga's backend API against the CUDA runtime"
    local a b rc
    [ -x "$bin/bench_h2d" ] || { failure h2d "$bin/bench_h2d not built"; return; }
    a=$(timeout "$limit" "$bin/bench_h2d" cuda)
    rc=$?
    [ $rc = 77 ] && { skip h2d "$(echo "$a" | tail -n 1)"; return; }
    [ $rc = 0 ] || { echo "$a"; failure h2d "bench_h2d cuda"; return; }
    echo "$a"
    if [ ! -x "$bin/h2d_cuda" ]; then
        skip h2d "$bin/h2d_cuda not built (configure with SAGA_CUDA on): only saga's side ran"
        return
    fi
    b=$(timeout "$limit" "$bin/h2d_cuda")
    rc=$?
    [ $rc = 77 ] && { skip h2d "h2d_cuda: $(echo "$b" | tail -n 1)"; return; }
    [ $rc = 0 ] || { echo "$b"; failure h2d "h2d_cuda"; return; }
    echo "$b"
    echo
    printf '%10s %12s %12s %12s\n' size_MiB "saga GB/s" "CUDA GB/s" "saga / CUDA"
    # The rows of both tables start with the size in MiB.
    join <(echo "$a" | awk '$1 ~ /^[0-9]+$/ { print $1, $4 }' | sort -k1,1) \
        <(echo "$b" | awk '$1 ~ /^[0-9]+$/ { print $1, $4 }' | sort -k1,1) | sort -n |
        awk '{ printf "%10s %12s %12s %12.2f\n", $1, $2, $3, $2 / $3 }'
    note "h2d 256 MiB: saga $(echo "$a" | awk '$1 == 256 { print $4 }') GB/s, CUDA runtime $(echo "$b" | awk '$1 == 256 { print $4 }') GB/s"
}

# ---- a dense network 8x the device memory --------------------------------------------------------
part_dense() {
    echo
    echo "== dense: bench/dense.sh with DEVICE=cuda"
    [ $gpu_ok = 1 ] || { skip dense "$gpu_why"; return; }
    command -v python3 >/dev/null 2>&1 || { skip dense "dense.sh needs python3 for its JSON fields"; return; }
    if DEVICE=cuda LAYERS=4 WIDTH=4096 OUTPUTS=16 BATCH=8192 MICRO=8 STEPS=10 OVER=8 RUNS=2 \
        POLICIES=passive timeout $((4 * limit)) bash "$here/dense.sh" "$build"; then
        note "dense: done (table above)"
    else
        failure dense "bench/dense.sh"
    fi
}

start=$(date +%s)
for part in $parts; do
    case $part in
    gcn | pagerank | stream | h2d | dense) "part_$part" ;;
    *) echo "gpu.sh: unknown part '$part' (gcn, pagerank, stream, h2d, dense)" >&2; exit 2 ;;
    esac
done

echo
echo "== summary ($(($(date +%s) - start)) s)"
for s in "${summary[@]}"; do echo "$s"; done
[ ${#failed[@]} -eq 0 ] || { echo "gpu.sh: failed: ${failed[*]}"; exit 1; }
