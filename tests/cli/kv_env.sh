#!/bin/sh
# The KV tier env aliases (KV8=1, KV_TQ=N, KV_TQ_POLAR=1) pick the tier of
# colibri run when --kv is not given; --kv wins. The tier is read back from
# the KV file's header with colibri kv inspect.
set -eu
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
m=$tmp/model; mkdir "$m"
cp tests/oracle/deepseek_v3_tiny/config.json tests/oracle/deepseek_v3_tiny/model.safetensors tests/tok/tiny/* "$m/"
tier_of() {  # tier_of NAME ENV... -- ARGS: the tier recorded in the KV file
    name=$1; shift
    env "$@" "$COLIBRI" run -m "$m" -p "The license" -n 2 --temp 0 --kv-file "$tmp/$name.ckv" >/dev/null 2>&1
    "$COLIBRI" kv inspect "$tmp/$name.ckv" | sed -n 's/^tier: *\([a-z0-9_]*\).*/\1/p'
}
[ "$(tier_of none X=1)" = f32 ]
[ "$(tier_of kv8 KV8=1)" = fp8 ]
[ "$(tier_of tq3 KV_TQ=3)" = tq3 ]
[ "$(tier_of polar KV_TQ_POLAR=1)" = polar4 ]
[ "$(tier_of polar3 KV_TQ_POLAR=1 KV_TQ=3)" = polar3 ]
env KV8=1 "$COLIBRI" run -m "$m" -p "The license" -n 2 --temp 0 --kv int8r --kv-file "$tmp/w.ckv" >/dev/null 2>&1
[ "$("$COLIBRI" kv inspect "$tmp/w.ckv" | sed -n 's/^tier: *\([a-z0-9_]*\).*/\1/p')" = int8r ]
echo ok
