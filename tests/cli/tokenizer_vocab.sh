#!/bin/sh
# A tokenizer with more ids than the model's vocab_size (colibri-tiny's 8192
# beside a 512-id oracle model) is refused when the two meet, naming both
# sizes, by every command that pairs them; never at run time with advice
# about the context.
set -u
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
d=$tmp/mixed
mkdir -p "$d"
cp tests/oracle/deepseek_v3_tiny/config.json tests/oracle/deepseek_v3_tiny/model.safetensors "$d/"
cp models/colibri-tiny/tokenizer.json models/colibri-tiny/tokenizer_config.json "$d/"
printf 'It is a truth universally acknowledged, that a single man\n' > "$tmp/text.txt"
want="the tokenizer has 8192 token ids (0..8191) but the model's vocabulary (vocab_size) is 512"
fail=0
check() {  # check NAME COMMAND...
    name=$1; shift
    out=$("$@" </dev/null 2>&1); rc=$?
    if [ $rc -eq 0 ] || [ $rc -ge 128 ]; then echo "FAIL $name: exit $rc: $out"; fail=1; return; fi
    case "$out" in *"$want"*) echo "ok   $name" ;; *) echo "FAIL $name: '$out' lacks '$want'"; fail=1 ;; esac
}
check run "$COLIBRI" run -m "$d" -p "Hello there, my friend" -n 2
check run-short "$COLIBRI" run -m "$d" -p "a" -n 2
check chat "$COLIBRI" chat -m "$d"
check eval "$COLIBRI" eval -m "$d" --text "$tmp/text.txt" --ctx 8
check trace "$COLIBRI" trace -m "$d" -f "$tmp/text.txt"
check serve timeout 30 "$COLIBRI" serve -m "$d" --port 0   # a server that starts would not exit
exit $fail
