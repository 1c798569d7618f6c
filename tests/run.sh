#!/bin/sh
# Runs every test: the unit-test binaries (build/tests/test_*), the CLI tests
# (tests/cli/*.sh, one test each, given the colibri binary in $COLIBRI) and the
# oracle fixtures. A CLI test that exits 77 could not run here (a tool it needs
# is missing): it is counted as skipped, never as passed; so is a unit-test
# binary that exits 77 (test_noalloc under AddressSanitizer). Ends with the line
# "N passed, N failed" (", N skipped" when any were).
BUILD=${BUILD:-build}
COLIBRI=${COLIBRI:-$BUILD/colibri}
export COLIBRI BUILD
passed=0; failed=0; skipped=0; failed_names=""
log=$(mktemp -d)
# state files (a streamed store's hot set) go to the run's own directory, not ~/.cache
XDG_CACHE_HOME="$log/cache"; export XDG_CACHE_HOME

for t in "$BUILD"/tests/test_*; do
    [ -x "$t" ] || continue
    name=$(basename "$t")
    "$t" >"$log/$name.out" 2>&1; status=$?
    if [ "$status" -eq 77 ]; then
        skipped=$((skipped + 1)); echo "skip $name: $(tail -n 1 "$log/$name.out")"
        continue
    fi
    line=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$log/$name.out" | tail -n 1)
    p=$(echo "$line" | sed -n 's/^\([0-9]*\) passed.*/\1/p'); p=${p:-0}
    f=$(echo "$line" | sed -n 's/.* \([0-9]*\) failed$/\1/p'); f=${f:-0}
    if [ "$status" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi   # crashed or no summary
    passed=$((passed + p)); failed=$((failed + f))
    if [ "$f" -ne 0 ]; then
        failed_names="$failed_names $name"
        echo "--- $name (exit $status)"; cat "$log/$name.out"
    else
        echo "ok   $name ($p tests)"
    fi
done

for t in tests/cli/*.sh; do
    [ -f "$t" ] || continue
    name=$(basename "$t" .sh)
    sh "$t" >"$log/$name.out" 2>&1; status=$?
    if [ "$status" -eq 0 ]; then
        passed=$((passed + 1)); echo "ok   cli/$name"
    elif [ "$status" -eq 77 ]; then
        skipped=$((skipped + 1)); echo "skip cli/$name: $(tail -n 1 "$log/$name.out")"
    else
        failed=$((failed + 1)); failed_names="$failed_names cli/$name"
        echo "--- cli/$name"; cat "$log/$name.out"
    fi
done

rm -rf "$log"
[ -n "$failed_names" ] && echo "failed:$failed_names"
if [ "$skipped" -gt 0 ]; then echo "$passed passed, $failed failed, $skipped skipped"
else echo "$passed passed, $failed failed"; fi
[ "$failed" -eq 0 ]
