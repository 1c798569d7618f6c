#!/bin/sh
# The CUDA backend's one device check (issue 19), for a machine with an NVIDIA
# GPU, in one bounded run (under 8 minutes):
#   1. build the CUDA test and benchmark (make CUDA=1 cuda-tests bench-cuda;
#      they link only base/, quant/, kv/ and src/cuda, so cJSON, PCRE2 and
#      libmicrohttpd need not be installed there);
#   2. run the CUDA tests (every kernel against the CPU kernel);
#   2b. the whole-model decode on the GPU (make CUDA=1 cuda-forward, then
#      tests/cuda/forward_dev.sh: --device cuda against the CPU on
#      colibri-tiny and the oracle fixtures; these link libcolibri.a, so they
#      need cJSON, PCRE2, xxHash and libmicrohttpd: a failed build there is
#      reported as the forward check NOT BUILT and fails the run);
#   3. the same tests, small cases, under compute-sanitizer memcheck and
#      racecheck, when the tool is there and time is left (a sanitizer that
#      cannot attach to the device is reported, not failed);
#   4. the benchmark: device-to-device copy bandwidth, the decode product per
#      weight format against it, attention per KV tier at 32k and 128k
#      against bf16.
# Writes under DIR (default $OUT, else build/cuda/device-check): summary.txt,
# build.log, test_cuda.txt, build_forward.log, forward_dev.txt, memcheck.txt, racecheck.txt, cuda_bench.md,
# gpu.txt. The summary is printed last. Exit status: 0 when the tests passed,
# 1 when the build or a test failed, 77 when there is no GPU.
#   sh tools/cuda_device_check.sh [DIR]
set -u
DIR=${1:-${OUT:-build/cuda/device-check}}
mkdir -p "$DIR"
START=$(date +%s)
BUDGET=${CUDA_CHECK_BUDGET_S:-450}
elapsed() { echo $(( $(date +%s) - START )); }
left() { echo $(( BUDGET - $(elapsed) )); }
S="$DIR/summary.txt"
: >"$S"
note() { echo "$*" | tee -a "$S"; }
# run LIMIT LOG CMD...: CMD with a time limit, its output to LOG; prints its status
run() {
    lim=$1; log=$2; shift 2
    timeout -k 5 "$lim" "$@" >"$log" 2>&1
    echo $?
}

note "cuda_device_check: $(date -u +%Y-%m-%dT%H:%M:%SZ), commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
{ nvidia-smi -L; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv; } >"$DIR/gpu.txt" 2>&1
note "gpu: $(head -n 1 "$DIR/gpu.txt")"
NVCC=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
[ -x "$NVCC" ] || { note "FAIL: no nvcc (looked on PATH and /usr/local/cuda/bin)"; exit 1; }
note "nvcc: $("$NVCC" --version | tail -n 1)"

# 1. build (the static CUDA runtime is looked for beside nvcc)
CHOME=$(dirname "$(dirname "$NVCC")")
CLIB=
for d in "$CHOME/lib64" "$CHOME/lib" "$CHOME/targets/x86_64-linux/lib" "$CHOME/targets/sbsa-linux/lib"; do
    [ -f "$d/libcudart_static.a" ] && { CLIB=$d; break; }
done
[ -n "$CLIB" ] || note "warning: no libcudart_static.a under $CHOME (the link may fail)"
CLIB=${CLIB:-$CHOME/lib64}
JOBS=$(nproc 2>/dev/null || echo 4)
rc=$(run 240 "$DIR/build.log" make -j"$JOBS" CUDA=1 NVCC="$NVCC" CUDA_HOME="$CHOME" CUDA_LIBDIR="$CLIB" cuda-tests bench-cuda)
if [ "$rc" -ne 0 ]; then
    note "FAIL: build (status $rc, $(elapsed) s); last lines of build.log:"
    tail -n 15 "$DIR/build.log" | tee -a "$S"
    exit 1
fi
note "build: ok ($(elapsed) s)"
T=build/cuda/tests/test_cuda
B=build/cuda/bench/cuda_bench

# 2. the tests
rc=$(run 120 "$DIR/test_cuda.txt" "$T")
tests_rc=$rc
case $rc in
    0) note "test_cuda: PASSED ($(tail -n 1 "$DIR/test_cuda.txt"); $(elapsed) s)" ;;
    77) note "test_cuda: NOT RUN: $(head -n 1 "$DIR/test_cuda.txt")"; exit 77 ;;
    124|137) note "test_cuda: FAILED: timed out after 120 s" ;;
    *) note "test_cuda: FAILED (status $rc):"; grep -E "FAIL|CHECK|out of tolerance" "$DIR/test_cuda.txt" | head -n 20 | tee -a "$S" ;;
esac
grep -E "largest error|^device" "$DIR/test_cuda.txt" | tee -a "$S"

# 2b. the whole-model decode on the GPU against the CPU
rc=$(run 150 "$DIR/build_forward.log" make -j"$JOBS" CUDA=1 NVCC="$NVCC" CUDA_HOME="$CHOME" CUDA_LIBDIR="$CLIB" cuda-forward)
if [ "$rc" -ne 0 ]; then
    note "forward_dev: NOT BUILT (status $rc, $(elapsed) s): $(grep -m1 -E 'error|cannot find' "$DIR/build_forward.log")"
    tests_rc=1
else
    rc=$(run 150 "$DIR/forward_dev.txt" sh tests/cuda/forward_dev.sh)
    case $rc in
        0) note "forward_dev: PASSED ($(elapsed) s)" ;;
        124|137) note "forward_dev: FAILED: timed out after 150 s"; tests_rc=1 ;;
        *) note "forward_dev: FAILED (status $rc):"; tests_rc=1 ;;
    esac
    grep -E "max \|dlogit\||tf=|FAIL|CHECK|PASSED|NOT RUN|refused|differs" "$DIR/forward_dev.txt" | head -n 30 | tee -a "$S"
fi

# 3. sanitizers, small cases, while time is left (the benchmark keeps 150 s)
SAN=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null || true)
for tool in memcheck racecheck; do
    lim=$(( $(left) - 150 ))
    [ "$lim" -gt 90 ] && lim=90
    if [ -z "$SAN" ]; then note "$tool: not run (no compute-sanitizer)"; continue; fi
    if [ "$lim" -lt 20 ]; then note "$tool: not run (time budget)"; continue; fi
    rc=$(run "$lim" "$DIR/$tool.txt" "$SAN" --tool "$tool" --error-exitcode 99 "$T" --small)
    case $rc in
        0) note "$tool: clean ($(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$DIR/$tool.txt" | tail -n 1))" ;;
        99) note "$tool: ERRORS FOUND:"; grep -E "=========" "$DIR/$tool.txt" | head -n 12 | tee -a "$S"; tests_rc=1 ;;
        124|137) note "$tool: not finished in $lim s (inconclusive)" ;;
        *) note "$tool: did not run (status $rc): $(grep -m1 -iE 'error|not supported' "$DIR/$tool.txt")" ;;
    esac
done

# 4. the benchmark
lim=$(( $(left) )); [ "$lim" -gt 180 ] && lim=180
[ "$lim" -lt 60 ] && lim=60
rc=$(run "$lim" "$DIR/bench.log" "$B" --out "$DIR/cuda_bench.md")
if [ "$rc" -ne 0 ]; then
    note "bench: FAILED or cut short (status $rc after $(elapsed) s); what it wrote:"
    tail -n 5 "$DIR/bench.log" | tee -a "$S"
fi
[ "$rc" -eq 0 ] && rm -f "$DIR/bench.log"
note "total: $(elapsed) s"
echo
cat "$DIR/cuda_bench.md" 2>/dev/null
echo
cat "$S"
[ "$tests_rc" -eq 0 ] && exit 0
exit 1
