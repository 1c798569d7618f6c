#!/bin/sh
# The whole-model decode on the GPU (issue 19): the checks the host device
# passes in make test, on --device cuda, with make CUDA=1's binaries:
#   1. build/cuda/tests/test_forward_dev on "cuda": colibri-tiny decoded on the
#      GPU and on the CPU from the same CPU prefill, logits within 1e-3 and the
#      same argmax for 48 greedy tokens, on KV tiers bf16/int8r/q4_0/tq3,
#      weights f16/f32 and fp8b/bf16, across a truncation and re-prefill;
#   2. tests/cli/device_decode.sh with build/cuda/colibri: every non-DSA oracle
#      fixture passes colibri oracle's gates against Hugging Face with the
#      decode on the GPU, colibri-tiny's greedy text equals Hugging Face's.
# Exit status: 0 passed, 1 failed, 77 no GPU (nothing was checked).
#   sh tests/cuda/forward_dev.sh   (after make CUDA=1 cuda-forward)
set -u
C=${CUDA_BUILD:-build/cuda}
for f in "$C/colibri" "$C/tests/test_forward_dev"; do
    [ -x "$f" ] || { echo "forward_dev: $f is not built (make CUDA=1 cuda-forward)"; exit 1; }
done
probe=$("$C/colibri" oracle --device cuda tests/oracle/deepseek_v3_tiny 2>&1)
case $probe in
    *"no usable device"*) echo "forward_dev: NOT RUN: $probe"; exit 77 ;;
esac
status=0
log=$(mktemp)
COLIBRI_TEST_DEVICE=cuda "$C/tests/test_forward_dev" >"$log" 2>&1 || status=1
grep -v '^\[warn\]' "$log"
rm -f "$log"
[ $status -eq 0 ] && echo "test_forward_dev on cuda: PASSED" || echo "test_forward_dev on cuda: FAILED"
if COLIBRI="$C/colibri" DEVICE=cuda sh tests/cli/device_decode.sh; then
    echo "device_decode.sh on cuda: PASSED"
else
    echo "device_decode.sh on cuda: FAILED"
    status=1
fi
exit $status
