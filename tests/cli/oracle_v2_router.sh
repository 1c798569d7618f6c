#!/bin/sh
# The deepseek_v2 fixtures discriminate between the router variants: the
# group-limited fixture read with topk_method greedy, and the greedy fixture
# with another routed_scaling_factor, both miss the oracle gate (the exact
# configs pass it in oracle.sh).
set -u
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail=0
misses() {  # misses DIR: colibri oracle exits 1 (gate missed, no signal) on DIR
    out=$("$COLIBRI" oracle "$1" 2>&1); rc=$?
    case "$rc:$out" in 1:*FAIL*) echo "ok   misses: $out" ;; *) echo "FAIL expected a missed gate: exit $rc: $out"; fail=1 ;; esac
}
cp -r tests/oracle/deepseek_v2_tiny "$tmp/gl"
sed -i 's/"topk_method": *"group_limited_greedy"/"topk_method": "greedy"/' "$tmp/gl/config.json"
grep -q '"topk_method": "greedy"' "$tmp/gl/config.json" || { echo "FAIL: edit did not apply"; exit 1; }
misses "$tmp/gl"
cp -r tests/oracle/deepseek_v2_lite_tiny "$tmp/gr"
sed -i 's/"routed_scaling_factor": *1.0/"routed_scaling_factor": 1.5/' "$tmp/gr/config.json"
grep -q '"routed_scaling_factor": 1.5' "$tmp/gr/config.json" || { echo "FAIL: edit did not apply"; exit 1; }
misses "$tmp/gr"
exit $fail
