#!/bin/sh
# Runs every test: the unit-test binaries (build/tests/test_*) and the CLI
# tests (tests/cli/*.sh, one test each, given the colibri binary in $COLIBRI;
# tests/cli/lint.sh is the source lint), TEST_JOBS at a time (default: one
# per CPU). Slowest first, by the times the last run recorded in
# $BUILD/tests/times, so that a long test does not start last. Each test
# prints one line when it ends (its wall time too when over 5 s); the logs of
# the failed ones follow once all have ended. A test that exits 77 could not
# run here (a tool or package it needs is missing): it is counted as skipped,
# never as passed. Ends with the line "N passed, N failed" (", N skipped"
# when any were). Each test gets its own XDG_CACHE_HOME, so that state files
# (a streamed store's hot set) neither reach ~/.cache nor meet another test's.
#   sh tests/run.sh [ENTRY...]   ENTRY: build/tests/test_X or tests/cli/X.sh
BUILD=${BUILD:-build}
COLIBRI=${COLIBRI:-$BUILD/colibri}
# the tests' Python packages live in the venv `make deps` makes
if [ -z "${PYTHON:-}" ]; then
    if [ -x build/venv/bin/python3 ]; then PYTHON=$(pwd)/build/venv/bin/python3; else PYTHON=python3; fi
fi
export COLIBRI BUILD PYTHON
command -v python3 >/dev/null 2>&1 ||
    echo "tests/run.sh: no python3: the tests that read JSON with it will fail (make deps installs it)"

# One entry: runs it, writes "STATUS PASSED FAILED SKIPPED MS" to $log/NAME.res
# and prints its line.
if [ "${1:-}" = --one ]; then
    log=$2; t=$3
    case $t in
        tests/cli/*) name=cli/$(basename "$t" .sh); set -- sh "$t" ;;
        *) name=$(basename "$t"); set -- "$t" ;;
    esac
    file=$(echo "$name" | tr / _)
    XDG_CACHE_HOME="$log/cache/$file"; export XDG_CACHE_HOME
    t0=$(date +%s%N)
    "$@" >"$log/$file.out" 2>&1; status=$?
    ms=$((($(date +%s%N) - t0) / 1000000))
    p=0; f=0; s=0
    case $name in
        test_*)   # a unit binary ends with its own "N passed, N failed[, N skipped]"
            line=$(grep -E '^[0-9]+ passed, [0-9]+ failed(, [0-9]+ skipped)?$' "$log/$file.out" | tail -n 1)
            p=$(echo "$line" | sed -n 's/^\([0-9]*\) passed.*/\1/p'); p=${p:-0}
            f=$(echo "$line" | sed -n 's/.* \([0-9]*\) failed.*/\1/p'); f=${f:-0}
            s=$(echo "$line" | sed -n 's/.* \([0-9]*\) skipped$/\1/p'); s=${s:-0}
            if [ "$status" -eq 77 ]; then p=0; f=0; s=1
            elif [ "$status" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi   # crashed or no summary
            ;;
        *)
            if [ "$status" -eq 0 ]; then p=1; elif [ "$status" -eq 77 ]; then s=1; else f=1; fi ;;
    esac
    echo "$status $p $f $s $ms" >"$log/$file.res"
    took=""
    [ "$ms" -gt 5000 ] && took=$(printf ' %d.%d s' $((ms / 1000)) $((ms % 1000 / 100)))
    if [ "$f" -ne 0 ]; then echo "FAIL $name (exit $status)$took"
    elif [ "$s" -ne 0 ] && [ "$p" -eq 0 ]; then echo "skip $name: $(tail -n 1 "$log/$file.out")$took"
    else
        case $name in
            test_*) if [ "$s" -ne 0 ]; then echo "ok   $name ($p tests, $s skipped)$took"
                    else echo "ok   $name ($p tests)$took"; fi ;;
            *) echo "ok   $name$took" ;;
        esac
    fi
    exit 0
fi

if [ $# -eq 0 ]; then
    for t in "$BUILD"/tests/test_*; do [ -x "$t" ] && set -- "$@" "$t"; done
    for t in tests/cli/*.sh; do [ -f "$t" ] && set -- "$@" "$t"; done
fi
jobs=${TEST_JOBS:-$(nproc 2>/dev/null || echo 2)}
times=$BUILD/tests/times
log=$(mktemp -d)
trap 'rm -rf "$log"' EXIT
trap 'exit 130' INT TERM

# the order: by last time, slowest first; tests without a time keep theirs, first
for t in "$@"; do
    ms=$(awk -v t="$t" '$2 == t { ms = $1 } END { print ms == "" ? 999999999 : ms }' "$times" 2>/dev/null)
    echo "${ms:-999999999} $t"
done | sort -s -k1,1nr | cut -d' ' -f2- >"$log/order"
# xargs runs `sh run.sh --one LOG ENTRY` for each, $jobs at once; every
# line a test prints is short and written at once, so lines do not mix
tr '\n' '\0' <"$log/order" | xargs -0 -n 1 -P "$jobs" sh "$0" --one "$log"

passed=0; failed=0; skipped=0; failed_names=""
: >"$log/times"
while read -r t; do
    case $t in
        tests/cli/*) name=cli/$(basename "$t" .sh) ;;
        *) name=$(basename "$t") ;;
    esac
    file=$(echo "$name" | tr / _)
    if [ -f "$log/$file.res" ]; then read -r status p f s ms <"$log/$file.res"
    else status=-1; p=0; f=1; s=0; ms=""; fi   # never ended (interrupted)
    passed=$((passed + p)); failed=$((failed + f)); skipped=$((skipped + s))
    [ -n "$ms" ] && echo "$ms $t" >>"$log/times"
    if [ "$f" -ne 0 ]; then
        failed_names="$failed_names $name"
        echo "--- $name (exit $status)"; cat "$log/$file.out" 2>/dev/null
    fi
done <"$log/order"
# the tests not run this time keep their last times
[ -f "$times" ] && awk 'NR == FNR { seen[$2] = 1; next } !($2 in seen)' "$log/times" "$times" >>"$log/times"
mkdir -p "$BUILD/tests" && cp "$log/times" "$times" 2>/dev/null

[ -n "$failed_names" ] && echo "failed:$failed_names"
if [ "$skipped" -gt 0 ]; then echo "$passed passed, $failed failed, $skipped skipped"
else echo "$passed passed, $failed failed"; fi
[ "$failed" -eq 0 ]
