#!/bin/sh
# Expert parallelism over MPI (a colibri built with make MPI=1): under
# `mpirun -np 3 --oversubscribe` on this machine the greedy text of the bundled
# model (run, chat, serve), eval's lines and the oracle lines of every fixture (with a digest of every logit)
# are the single process's, bit for bit, with rank 0 owning a share of the experts or not, with shares
# weighted (given, or by each rank's timed read rate), and with every
# rank streaming its experts under its own --ram; misuse is
# refused by name; a worker that stops answering or dies ends the job within
# a bounded time, naming the rank. Without MPI the test says the MPI tests
# were not run (exit 77: counted as skipped, never as passed).
set -eu
m=models/colibri-tiny
out=$("$COLIBRI" run -m "$m" -p hi -n 1 --mpi 2>&1 || true)
if echo "$out" | grep -q "built without MPI"; then
    echo "$out" | grep -q "make MPI=1"
    echo "MPI tests not run: this colibri was built without MPI (make MPI=1 test runs them)"
    exit 77
fi
command -v mpirun >/dev/null || { echo "colibri is built with MPI but mpirun is missing (apt-get install openmpi-bin)"; exit 1; }
# as root (CI containers) Open MPI needs both variables to run at all
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
MPIRUN="mpirun --oversubscribe"
tmp=$(mktemp -d)
pids=""
cleanup() { for p in $pids; do kill -CONT "$p" 2>/dev/null || true; kill -9 "$p" 2>/dev/null || true; done; rm -rf "$tmp"; }
trap cleanup EXIT

# greedy text: three prompts, and one long prompt (a prefill batch of hundreds of rows)
head -c 1500 README.md >"$tmp/long.txt"
for i in 0 1 2 long; do
    if [ "$i" = long ]; then set -- -f "$tmp/long.txt"
    else set -- -p "$(python3 -c "import json; print(json.load(open('$m/eval.json'))['samples'][$i]['prompt'], end='')")"; fi
    "$COLIBRI" run -m "$m" "$@" -n 48 --temp 0 -t 1 --no-display-prompt >"$tmp/one.txt" 2>/dev/null
    $MPIRUN -np 3 "$COLIBRI" run -m "$m" "$@" -n 48 --temp 0 -t 1 --no-display-prompt --mpi >"$tmp/three.txt" \
        2>"$tmp/three.err"
    $MPIRUN -np 2 "$COLIBRI" run -m "$m" "$@" -n 48 --temp 0 -t 1 --no-display-prompt --mpi --mpi-rank0-experts 0 \
        >"$tmp/two.txt" 2>"$tmp/two.err"
    [ -s "$tmp/one.txt" ]
    cmp "$tmp/one.txt" "$tmp/three.txt" || { echo "prompt $i: -np 3 differs"; cat "$tmp/three.err"; exit 1; }
    cmp "$tmp/one.txt" "$tmp/two.txt" || { echo "prompt $i: -np 2 without rank 0's share differs"; exit 1; }
    # every rank ran experts, and rank 0 none when told so
    for r in 0 1 2; do grep -Eq "^mpi: rank $r ran [1-9][0-9]* experts" "$tmp/three.err"; done
    grep -q "^mpi: rank 0 ran 0 experts" "$tmp/two.err"
    grep -Eq "^mpi: rank 1 ran [1-9][0-9]* experts in [1-9][0-9]* layer requests" "$tmp/two.err"
    echo "ok   prompt $i: same text on 1, 3 and 2 (workers only) ranks"
done

# each rank streams its own experts under its own --ram budget: the same text
$MPIRUN -np 3 "$COLIBRI" run -m "$m" -p "It is a truth" -n 48 --temp 0 -t 1 --no-display-prompt --mpi --ram 18M \
    >"$tmp/three.txt" 2>"$tmp/three.err"
"$COLIBRI" run -m "$m" -p "It is a truth" -n 48 --temp 0 -t 1 --no-display-prompt >"$tmp/one.txt" 2>/dev/null
cmp "$tmp/one.txt" "$tmp/three.txt"
[ "$(grep -c "routed experts streamed" "$tmp/three.err")" -eq 3 ]
grep -Eq "experts: streamed, .* [1-9][0-9.]* MiB read from disk" "$tmp/three.err"
echo "ok   streamed experts on every rank (--ram 18M): same text"
# shares weighted by each rank's timed read rate, or by weights given (rank 2 none, or most):
# the same text, and the experts each rank ran follow the weights
$MPIRUN -np 3 "$COLIBRI" run -m "$m" -p "It is a truth" -n 48 --temp 0 -t 1 --no-display-prompt --mpi --ram 18M \
    --mpi-weights disk >"$tmp/three.txt" 2>"$tmp/three.err"
cmp "$tmp/one.txt" "$tmp/three.txt" || { cat "$tmp/three.err"; exit 1; }
grep -Eq "^mpi: expert shares weighted by each rank's read rate: rank 0 [0-9]+ MB/s rank 1 [0-9]+ MB/s rank 2" \
    "$tmp/three.err"
ran() { sed -n "s/^mpi: rank $1 ran \([0-9]*\) experts.*/\1/p" "$tmp/three.err"; }
for w in 1,0,1 1,1,6; do
    $MPIRUN -np 3 "$COLIBRI" run -m "$m" -p "It is a truth" -n 48 --temp 0 -t 1 --no-display-prompt --mpi \
        --mpi-weights $w >"$tmp/three.txt" 2>"$tmp/three.err"
    cmp "$tmp/one.txt" "$tmp/three.txt" || { echo "--mpi-weights $w differs"; cat "$tmp/three.err"; exit 1; }
done
[ "$(ran 2)" -gt $(( 2 * ($(ran 0) + $(ran 1)) )) ] || { echo "1,1,6: rank 2 ran $(ran 2)"; exit 1; }
if $MPIRUN -np 3 "$COLIBRI" run -m "$m" -p hi -n 1 --mpi --mpi-weights 1,2 >/dev/null 2>"$tmp/err"; then exit 1; fi
grep -q "2 share weights for 3 ranks" "$tmp/err"
if $MPIRUN -np 2 "$COLIBRI" run -m "$m" -p hi -n 1 --mpi --mpi-weights 0,0 >/dev/null 2>"$tmp/err"; then exit 1; fi
grep -q "weight 0: nobody would own an expert" "$tmp/err"
# a rank that cannot time its reads (no weights file there): every rank fails at once, naming it
mkdir "$tmp/empty"
if $MPIRUN -np 2 "$COLIBRI" run -m "$tmp/empty" -p hi -n 1 --mpi --mpi-weights disk >/dev/null 2>"$tmp/err"; then
    exit 1; fi
grep -q "MPI: rank 1: $tmp/empty: no .safetensors file of 4 MiB or more" "$tmp/err"
if "$COLIBRI" run -m "$m" -p hi -n 1 --mpi --mpi-weights 1,fast >/dev/null 2>"$tmp/err"; then exit 1; fi
grep -q "mpi-weights: '1,fast' is neither disk nor a list" "$tmp/err"
echo "ok   weighted shares (timed disk rate; 1,0,1; 1,1,6): same text, experts follow the weights"

# the oracle fixtures: the same lines (argmax, greedy tokens and logit deltas against HF)
# and the same digest of every logit computed: bit-identical logits
# (drafts of an MTP layer are checked by the one-process run only: its line's
# mtp_rows/mtp_dlogit fields are left out of the comparison)
"$COLIBRI" oracle --digest tests/oracle/*/ | sed 's/ mtp_rows=[0-9]* mtp_dlogit=[^ ]*//' >"$tmp/one.txt"
$MPIRUN -np 3 "$COLIBRI" oracle --digest --mpi tests/oracle/*/ >"$tmp/three.txt"
$MPIRUN -np 2 "$COLIBRI" oracle --digest --mpi --mpi-rank0-experts 0 tests/oracle/*/ >"$tmp/two.txt"
$MPIRUN -np 3 "$COLIBRI" oracle --digest --mpi --mpi-weights 3,1,2 tests/oracle/*/ >"$tmp/weighted.txt" 2>/dev/null
grep -c "digest=[0-9a-f]\{16\}$" "$tmp/one.txt"
cmp "$tmp/one.txt" "$tmp/three.txt"
cmp "$tmp/one.txt" "$tmp/two.txt"
cmp "$tmp/one.txt" "$tmp/weighted.txt"
[ "$(wc -l <"$tmp/one.txt")" -eq "$(ls -d tests/oracle/*/ | wc -l)" ]
# a fixture that fails to load on every rank, or only its reference on rank 0, between two good ones
mkdir "$tmp/noref"
cp tests/oracle/deepseek_v3_tiny/config.json tests/oracle/deepseek_v3_tiny/model.safetensors "$tmp/noref/"
if $MPIRUN -np 3 "$COLIBRI" oracle --digest --mpi tests/oracle/kimi_k2_tiny "$tmp/missing" "$tmp/noref" \
    tests/oracle/deepseek_v3_tiny >"$tmp/three.txt" 2>"$tmp/three.err"; then exit 1; fi
grep -q "missing" "$tmp/three.err" && grep -q "noref/reference.json: cannot read" "$tmp/three.err"
grep -q "^kimi_k2_tiny .* digest=$(sed -n 's/^kimi_k2_tiny .* digest=//p' "$tmp/one.txt")$" "$tmp/three.txt"
grep -q "^deepseek_v3_tiny .* digest=$(sed -n 's/^deepseek_v3_tiny .* digest=//p' "$tmp/one.txt")$" "$tmp/three.txt"
echo "ok   oracle lines and logit digests on 1, 3 and 2 ranks, and 3 with weights 3,1,2"

# chat (two turns on stdin, which mpirun gives rank 0) and eval (teacher forcing, prefill and decode
# paths, KV tiers): the single process's output, greedy and sampled
printf 'Hello there\nTell me a story\n' >"$tmp/turns.txt"
for samp in "--temp 0" "--temp 0.9 --seed 7"; do
    # shellcheck disable=SC2086
    "$COLIBRI" chat -m "$m" -n 24 $samp -t 1 <"$tmp/turns.txt" >"$tmp/one.txt" 2>/dev/null
    # shellcheck disable=SC2086
    $MPIRUN -np 3 "$COLIBRI" chat -m "$m" -n 24 $samp -t 1 --mpi <"$tmp/turns.txt" >"$tmp/three.txt" 2>"$tmp/three.err"
    [ "$(grep -c . "$tmp/one.txt")" -ge 2 ]
    cmp "$tmp/one.txt" "$tmp/three.txt" || { echo "chat $samp: -np 3 differs"; cat "$tmp/three.err"; exit 1; }
    for r in 1 2; do grep -Eq "^mpi: rank $r ran [1-9][0-9]* experts" "$tmp/three.err"; done
done
head -c 3000 README.md >"$tmp/text.txt"
ev="eval -m $m --text $tmp/text.txt --ctx 64 --max-windows 3 --kv f32,fp8 --decode --base same -t 1"
"$COLIBRI" $ev >"$tmp/one.txt" 2>/dev/null
$MPIRUN -np 3 "$COLIBRI" $ev --mpi >"$tmp/three.txt" 2>"$tmp/three.err"
$MPIRUN -np 2 "$COLIBRI" $ev --mpi --mpi-rank0-experts 0 >"$tmp/two.txt" 2>/dev/null
[ "$(grep -c "^weights=stored kv=" "$tmp/one.txt")" -eq 3 ]
cmp "$tmp/one.txt" "$tmp/three.txt" || { echo "eval: -np 3 differs"; cat "$tmp/three.err"; exit 1; }
cmp "$tmp/one.txt" "$tmp/two.txt" || { echo "eval: -np 2 without rank 0's share differs"; exit 1; }
grep -Eq "^mpi: rank 2 ran [1-9][0-9]* experts" "$tmp/three.err"
# a reference in other weights is a second model, which the ranks cannot serve beside the first
if "$COLIBRI" eval -m "$m" --text "$tmp/text.txt" --experts q8 --mpi >/dev/null 2>"$tmp/err"; then exit 1; fi
grep -q "mpi runs one model" "$tmp/err"
echo "ok   chat (greedy, sampled) and eval (prefill, decode, fp8) on 1, 3 and 2 ranks: the same output"

# serve: a completion through three ranks is the single process's; SIGTERM drains rank 0,
# which stops the others (they keep serving until then)
serve_text() {   # serve_text LOG ARGS...: starts a server, prints one greedy completion, stops it
    log=$1; shift
    "$@" serve -m "$m" --host 127.0.0.1 --port 0 -t 1 ${MPI_SERVE:-} >"$log" 2>&1 &
    sp=$!
    port=""; i=0
    while [ -z "$port" ] && [ $i -lt 300 ]; do
        sleep 0.1; i=$((i + 1))
        port=$(sed -n 's/.*listening on http:\/\/127\.0\.0\.1:\([0-9]*\).*/\1/p' "$log")
    done
    [ -n "$port" ] || { cat "$log"; kill "$sp"; exit 1; }
    python3 -c "
import json, urllib.request
req = urllib.request.Request('http://127.0.0.1:$port/v1/completions', headers={'content-type': 'application/json'},
    data=json.dumps({'prompt': 'It is a truth universally acknowledged, that', 'max_tokens': 24, 'temperature': 0}).encode())
print(json.load(urllib.request.urlopen(req))['choices'][0]['text'])"
    kill -TERM "$sp"
    wait "$sp" || true
}
serve_text "$tmp/s1.log" "$COLIBRI" >"$tmp/one.txt"
MPI_SERVE=--mpi serve_text "$tmp/s3.log" $MPIRUN -np 3 "$COLIBRI" >"$tmp/three.txt"
[ -s "$tmp/one.txt" ]
cmp "$tmp/one.txt" "$tmp/three.txt" || { cat "$tmp/s3.log"; exit 1; }
grep -q "colibri serve: stopped" "$tmp/s3.log" || { cat "$tmp/s3.log"; exit 1; }
echo "ok   serve: the same completion on 3 ranks, drained and stopped by SIGTERM"

# misuse, refused by name
if "$COLIBRI" run -m "$m" -p hi -n 1 --mpi --mpi-rank0-experts 0 >/dev/null 2>"$tmp/err"; then exit 1; fi
grep -q "rank 0 owns no routed experts" "$tmp/err"
if "$COLIBRI" run -m "$m" -p hi -n 1 --mpi-timeout 3 >/dev/null 2>"$tmp/err"; then exit 1; fi
grep -q "need --mpi" "$tmp/err"
# a failure on every rank before the load, or on rank 0 alone (a fixture has no tokenizer):
# the job ends at once with the error, no rank waits for another
t0=$(date +%s)
if $MPIRUN -np 2 "$COLIBRI" run -m "$m" -p hi -n 1 --mpi --ram bogus >/dev/null 2>"$tmp/err"; then exit 1; fi
grep -q "ram: 'bogus' is not a positive size" "$tmp/err"
if $MPIRUN -np 2 "$COLIBRI" run -m tests/oracle/deepseek_v3_tiny -p hi -n 1 --mpi >/dev/null 2>"$tmp/err"; then
    exit 1; fi
grep -q "tokenizer" "$tmp/err"
[ $(( $(date +%s) - t0 )) -lt 30 ] || { echo "failed runs took $(( $(date +%s) - t0 )) s"; exit 1; }

# faults: rank 2 stopped (SIGSTOP) or killed during a decode benchmark
fault() {   # fault SIGNAL MPIRUN-FLAGS...
    sig=$1; shift
    $MPIRUN -np 3 "$@" "$COLIBRI" bench -m "$m" -p 16 -n 1000 -r 50 -t 1 --mpi --mpi-timeout 2 \
        >"$tmp/f.out" 2>"$tmp/f.err" &
    mp=$!
    sleep 3
    w=""
    for p in $(pgrep -P "$mp"); do
        if tr '\0' '\n' <"/proc/$p/environ" | grep -qx OMPI_COMM_WORLD_RANK=2; then w=$p; fi
    done
    [ -n "$w" ] || { echo "rank 2 of mpirun $mp not found"; kill "$mp"; exit 1; }
    pids="$pids $w"
    t0=$(date +%s)
    kill -"$sig" "$w"
    # bounded: the 2 s answer deadline (or 20 s for a load) plus the job's teardown
    i=0
    while kill -0 "$mp" 2>/dev/null; do
        i=$((i + 1))
        [ $i -lt 600 ] || { echo "SIG$sig: mpirun still running 60 s after"; kill -9 "$mp"; exit 1; }
        sleep 0.1
    done
    rc=0; wait "$mp" || rc=$?
    echo "SIG$sig $*: job ended $(( $(date +%s) - t0 )) s after, mpirun exit $rc"
}
fault STOP
[ "$rc" -ne 0 ]
grep -q "rank 2 did not answer" "$tmp/f.err" || { cat "$tmp/f.err"; exit 1; }
fault KILL
[ "$rc" -ne 0 ]
grep -q "rank 2" "$tmp/f.err" || { cat "$tmp/f.err"; exit 1; }
# with recovery on, mpirun leaves the job running and rank 0 finds the dead rank itself
fault KILL --enable-recovery
grep -q "rank 2 did not answer" "$tmp/f.err" || { cat "$tmp/f.err"; exit 1; }
echo "ok   faults: a stopped or killed rank ends the job, named"

# the device decode is not wired to MPI experts: every rank refuses it by name, none waits
err=$(timeout 60 $MPIRUN -np 2 "$COLIBRI" run -m "$m" --mpi --device host -p hi -n 2 2>&1) && { echo "--mpi --device accepted"; exit 1; }
echo "$err" | grep -q "routed experts over MPI (--mpi) are not wired to the device" || { echo "$err"; exit 1; }
echo "ok   --device with --mpi refused by name"
