#!/bin/sh
# Broken model directories are refused with a message naming what is wrong,
# a non-zero exit and never a crash (exit code >= 128 would be a signal).
set -u
src=tests/oracle/deepseek_v3_tiny
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail=0
expect() {  # expect NAME SUBSTRING: run colibri info on $tmp/NAME
    out=$("$COLIBRI" info -m "$tmp/$1" 2>&1); rc=$?
    if [ $rc -eq 0 ] || [ $rc -ge 128 ]; then echo "FAIL $1: exit $rc"; fail=1; return; fi
    case "$out" in *"$2"*) echo "ok   $1: $out" ;; *) echo "FAIL $1: '$out' lacks '$2'"; fail=1 ;; esac
}
mk() { mkdir -p "$tmp/$1"; cp "$src/config.json" "$src/model.safetensors" "$tmp/$1/"; }

mkdir -p "$tmp/empty"; expect empty "config.json"
mk truncated; size=$(stat -c %s "$tmp/truncated/model.safetensors")
head -c $((size / 2)) "$src/model.safetensors" > "$tmp/truncated/model.safetensors"; expect truncated "model.safetensors"
mk garbled; printf 'garbage!' | dd of="$tmp/garbled/model.safetensors" bs=1 seek=8 conv=notrunc 2>/dev/null
expect garbled "JSON"
mk llama; sed -i 's/"deepseek_v3"/"llama"/' "$tmp/llama/config.json"; expect llama "'llama'"
mk shape; sed -i 's/"hidden_size": *128/"hidden_size": 96/' "$tmp/shape/config.json"; expect shape "shape"
mk noconfig; rm "$tmp/noconfig/config.json"; expect noconfig "config.json"
mk badjson; echo '{"model_type": ' > "$tmp/badjson/config.json"; expect badjson "config.json"
# numbers out of range (1e400 parses as inf) are refused by field name with the range
mk eps; sed -i 's/"rms_norm_eps": *[^,]*/"rms_norm_eps": 1e400/' "$tmp/eps/config.json"
expect eps "'rms_norm_eps' is inf; it must be a finite number in [1.2e-38, 1]"
mk bigsize; sed -i 's/"vocab_size": *[0-9]*/"vocab_size": 5e9/' "$tmp/bigsize/config.json"
expect bigsize "'vocab_size' is 5e+09, outside the range 0..16777216"
mk yarn; sed -i 's/"original_max_position_embeddings": *[0-9]*/"original_max_position_embeddings": -8/' \
    "$tmp/yarn/config.json"
mk betainf; sed -i 's/"beta_fast": *[0-9.]*/"beta_fast": 1e999/' "$tmp/betainf/config.json"
expect betainf "'beta_fast' is inf; it must be a finite number in (0, 1e+06]"
expect yarn "'original_max_position_embeddings' is -8, outside the range 1..16777216"
# config values that select behaviour colibri does not implement: refused naming field and value
mk softmax; sed -i 's/"model_type"/"scoring_func": "softmax", "model_type"/' "$tmp/softmax/config.json"
expect softmax "scoring_func 'softmax' is not supported for deepseek_v3 (sigmoid)"
mk greedy; sed -i 's/"model_type"/"topk_method": "greedy", "model_type"/' "$tmp/greedy/config.json"
expect greedy "topk_method 'greedy' is not supported for deepseek_v3 (noaux_tc)"
mk gelu; sed -i 's/"hidden_act": *"silu"/"hidden_act": "gelu"/' "$tmp/gelu/config.json"
expect gelu "hidden_act 'gelu' is not supported (silu)"
# A reference.json whose generation prompt holds a non-number: refused, no crash.
mkdir -p "$tmp/badref"; cp "$src"/* "$tmp/badref/"
python3 -c "
import json,sys; p=sys.argv[1]; r=json.load(open(p)); r['generation']['prompt'][1]='x'; json.dump(r,open(p,'w'))" "$tmp/badref/reference.json"
out=$("$COLIBRI" oracle "$tmp/badref" 2>&1); rc=$?
if [ $rc -eq 0 ] || [ $rc -ge 128 ]; then echo "FAIL badref: exit $rc"; fail=1
else case "$out" in *"generation.prompt"*) echo "ok   badref: $out" ;; *) echo "FAIL badref: $out"; fail=1 ;; esac; fi
# ids that are not integers in int32 range (1e300 would be undefined behaviour cast to int32)
for v in 1e300 -1 2.5; do
    rm -rf "$tmp/badid"; mkdir -p "$tmp/badid"; cp "$src"/* "$tmp/badid/"
    python3 -c "
import json,sys; p=sys.argv[1]; r=json.load(open(p)); r['generation']['prompt'][1]=float(sys.argv[2]); json.dump(r,open(p,'w'))" \
        "$tmp/badid/reference.json" "$v"
    out=$("$COLIBRI" oracle "$tmp/badid" 2>&1); rc=$?
    if [ $rc -eq 0 ] || [ $rc -ge 128 ]; then echo "FAIL badid $v: exit $rc"; fail=1
    else case "$out" in *"generation.prompt"*) echo "ok   badid $v: $out" ;; *) echo "FAIL badid $v: $out"; fail=1 ;; esac; fi
done
exit $fail
