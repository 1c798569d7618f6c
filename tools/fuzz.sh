#!/bin/sh
# Runs the libFuzzer harnesses built by `make fuzz` for a fixed time each,
# from the repository root, starting from the committed seeds in
# tests/fuzz/corpus/TARGET (read only: new inputs go to a scratch corpus).
#   sh tools/fuzz.sh [SECONDS] [TARGET...]     default 15 s, every target
# Prints one line per target (runs, coverage, corpus size) and exits 1 when a
# harness finds a crash; the crashing input is kept in build/fuzz/crashes/.
# FUZZ_KEEP=DIR keeps the grown corpora under DIR/TARGET instead.
set -u
secs=${1:-15}
[ $# -gt 0 ] && shift
targets=${*:-$(ls tests/fuzz/fuzz_*.c | sed 's/.*fuzz_\(.*\)\.c/\1/')}
mkdir -p build/fuzz/crashes
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
status=0
for t in $targets; do
    bin=build/fuzz/fuzz_$t
    [ -x "$bin" ] || { echo "fuzz: $bin missing (make fuzz)"; status=1; continue; }
    work=${FUZZ_KEEP:+$FUZZ_KEEP/$t}
    work=${work:-$scratch/$t}
    mkdir -p "$work"
    log=$scratch/$t.log
    "$bin" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -max_len=8192 -print_final_stats=1 \
        -artifact_prefix=build/fuzz/crashes/"$t"- "$work" "tests/fuzz/corpus/$t" >"$log" 2>&1
    rc=$?
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
    cov=$(grep -o 'cov: [0-9]*' "$log" | tail -n 1)
    ft=$(grep -o 'ft: [0-9]*' "$log" | tail -n 1)
    corp=$(grep -o 'corp: [0-9]*/[0-9]*[a-zA-Z]*' "$log" | tail -n 1)
    if [ "$rc" -ne 0 ]; then
        status=1
        echo "FAIL fuzz_$t (exit $rc): see build/fuzz/crashes/$t-*"
        grep -E "ERROR|runtime error|SUMMARY|deadly signal" "$log" | head -n 5
        cp "$log" "build/fuzz/crashes/$t.log"
    else
        echo "ok   fuzz_$t ${secs}s: ${runs:-?} runs, ${cov:-cov: ?}, ${ft:-ft: ?}, ${corp:-corp: ?}"
    fi
done
exit $status
