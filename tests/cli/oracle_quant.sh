#!/bin/sh
# Reports (does not gate) teacher-forced and greedy agreement of the oracle
# fixtures with weights quantized at load; random-weight fixtures are chaotic,
# so the numbers only say the quantized paths run end to end. The gate here is
# that every fixture yields a well-formed line and f32 stays exact.
set -eu
for fmt in q8 q4g64; do
    out=$("$COLIBRI" oracle --no-gate --experts $fmt --dense $fmt tests/oracle/*)
    echo "weights $fmt:"; echo "$out"
    [ "$(echo "$out" | grep -cE '^[a-z0-9_]+ tf=[0-9]+/[0-9]+ gen=[0-9]+/[0-9]+ ')" -eq "$(ls -d tests/oracle/*/ | wc -l)" ]
done
"$COLIBRI" oracle --experts f32 --dense f32 --embed f32 tests/oracle/*
