#!/bin/sh
# Runs the libFuzzer harnesses built by `make fuzz` for a fixed time each,
# from the repository root, starting from the committed seeds in
# tests/fuzz/corpus/TARGET and the corpus grown by earlier runs, which is
# kept outside the repository so fuzzing accumulates from session to
# session: FUZZ_CORPUS/TARGET (default $XDG_CACHE_HOME/colibri/fuzz, else
# ~/.cache/colibri/fuzz; FUZZ_KEEP=DIR is the same as FUZZ_CORPUS=DIR;
# FUZZ_CORPUS=none grows a scratch corpus that is dropped).
#   sh tools/fuzz.sh [--merge] [SECONDS] [TARGET...]   default 15 s, every target
# Prints one line per target (runs, coverage, corpus size) and exits 1 when a
# harness finds a crash; the crashing input is kept in build/fuzz/crashes/.
# Each run adds a line to FUZZ_CORPUS/ledger.tsv (date, commit, target,
# seconds, runs, coverage, and the CPU seconds the harness got, user + system,
# where /usr/bin/time exists); the last lines printed give each target's
# total there: wall-clock hours of one process, and CPU hours over the runs
# that measured them (on a shared machine the CPU a run gets is less than its
# wall time). --merge then adds to tests/fuzz/corpus/TARGET the grown
# inputs that reach coverage the committed seeds do not (libFuzzer -merge=1),
# for a commit that grows the seeds.
set -u
merge=0
[ "${1:-}" = "--merge" ] && { merge=1; shift; }
secs=${1:-15}
[ $# -gt 0 ] && shift
keep=${FUZZ_CORPUS:-${FUZZ_KEEP:-${XDG_CACHE_HOME:-$HOME/.cache}/colibri/fuzz}}
[ "$keep" = none ] && keep=""
[ -n "$keep" ] && mkdir -p "$keep"
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
targets=${*:-$(ls tests/fuzz/fuzz_*.c | sed 's/.*fuzz_\(.*\)\.c/\1/')}
mkdir -p build/fuzz/crashes
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
status=0
for t in $targets; do
    bin=build/fuzz/fuzz_$t
    [ -x "$bin" ] || { echo "fuzz: $bin missing (make fuzz)"; status=1; continue; }
    work=${keep:+$keep/$t}
    work=${work:-$scratch/$t}
    mkdir -p "$work"
    log=$scratch/$t.log
    timer=""
    [ -x /usr/bin/time ] && timer="/usr/bin/time -f %U+%S -o $scratch/$t.cpu"
    $timer "$bin" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -max_len=8192 -print_final_stats=1 \
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
        if [ "$merge" -eq 1 ]; then
            n0=$(ls "tests/fuzz/corpus/$t" | wc -l)
            "$bin" -merge=1 -timeout=10 -rss_limit_mb=2048 -max_len=8192 "tests/fuzz/corpus/$t" "$work" \
                >"$scratch/$t.merge.log" 2>&1 || echo "fuzz: merge of $t failed (see $scratch/$t.merge.log)"
            echo "     merged: tests/fuzz/corpus/$t $n0 -> $(ls "tests/fuzz/corpus/$t" | wc -l) inputs"
        fi
    fi
    cpu=$(tail -n 1 "$scratch/$t.cpu" 2>/dev/null | awk -F+ 'NF == 2 { printf "%.0f", $1 + $2 }')
    [ -n "$keep" ] && printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$commit" "$t" "$secs" \
        "${runs:-?}" "${cov:-?}" "${cpu:-?}" >>"$keep/ledger.tsv"
done
if [ -n "$keep" ] && [ -f "$keep/ledger.tsv" ]; then
    awk -F '\t' '{ s[$3] += $4; if ($7 ~ /^[0-9]+$/) c[$3] += $7 }
        END { for (t in s) printf "     total fuzz_%s: %.2f hours (wall, one process), %.2f CPU hours measured, in %s\n", t, s[t] / 3600, c[t] / 3600, FILENAME }' \
        "$keep/ledger.tsv" | sort
fi
exit $status
