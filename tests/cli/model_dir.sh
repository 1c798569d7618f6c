#!/bin/sh
# A wrong -m is named before anything else is read: a path that does not
# exist, a file, a directory without config.json, a config.json whose
# model_type colibri does not implement. Each directory here has the
# tokenizer files, so a message about tokenizer.json (read first before)
# or the prompt file means the model directory was not checked first.
set -u
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
tiny=models/colibri-tiny
mkdir -p "$tmp/noconfig" "$tmp/llama"
cp "$tiny"/tokenizer*.json "$tmp/noconfig/"; cp "$tiny"/tokenizer*.json "$tmp/llama/"
sed 's/"model_type": *"[a-z_0-9]*"/"model_type": "llama"/' "$tiny/config.json" > "$tmp/llama/config.json"
fail=0
check() {  # check NAME SUBSTRING COMMAND...: fails with SUBSTRING in the message
    name=$1 want=$2; shift 2
    out=$("$@" </dev/null 2>&1); rc=$?
    if [ $rc -eq 0 ] || [ $rc -ge 128 ]; then echo "FAIL $name: exit $rc: $out"; fail=1; return; fi
    case "$out" in *"$want"*) echo "ok   $name: $out" ;; *) echo "FAIL $name: '$out' lacks '$want'"; fail=1 ;; esac
}
for cmd in run trace; do
    check "$cmd missing" "$tmp/none: cannot open the model directory" "$COLIBRI" $cmd -m "$tmp/none" -f "$tmp/nofile"
    check "$cmd file" "$tiny/config.json: not a directory" "$COLIBRI" $cmd -m "$tiny/config.json" -f "$tmp/nofile"
    check "$cmd noconfig" "$tmp/noconfig: no config.json here" "$COLIBRI" $cmd -m "$tmp/noconfig" -f "$tmp/nofile"
    check "$cmd llama" "model_type 'llama' is not supported" "$COLIBRI" $cmd -m "$tmp/llama" -f "$tmp/nofile"
done
check "chat missing" "$tmp/none: cannot open the model directory" "$COLIBRI" chat -m "$tmp/none"
check "chat llama" "model_type 'llama' is not supported" "$COLIBRI" chat -m "$tmp/llama"
check "serve noconfig" "$tmp/noconfig: no config.json here" "$COLIBRI" serve -m "$tmp/noconfig" --port 0
check "info missing" "$tmp/none: cannot open the model directory" "$COLIBRI" info -m "$tmp/none"
exit $fail
