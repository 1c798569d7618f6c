#!/bin/sh
# --chat-template FILE on run and chat: the prompt is the file's rendering
# (its token count is what prefill reports), and a template colibri cannot
# run, a missing file or a template that raises is refused with a message.
# --chat-template-kwargs JSON gives the template its variables.
set -u
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
m=$tmp/model; mkdir "$m"
cp tests/oracle/deepseek_v3_tiny/config.json tests/oracle/deepseek_v3_tiny/model.safetensors tests/tok/tiny/* "$m/"
fail=0
say() { echo "$1"; [ "${1%% *}" = FAIL ] && fail=1; return 0; }

printf '%s' 'T{% for m in messages %}[{{ m.role }}]{{ m.content }}{% endfor %}{% if add_generation_prompt %}>{% endif %}' \
    > "$tmp/t.jinja"
want=$("$COLIBRI" tokenize -m "$m" --no-special --text "T[system]Be brief.[user]Hi>" |
       python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')
"$COLIBRI" run -m "$m" -p "Hi" --system "Be brief." --chat-template "$tmp/t.jinja" -n 2 --temp 0 \
    > /dev/null 2> "$tmp/run.err"; rc=$?
got=$(sed -n 's/^prefill \([0-9]*\) tok.*/\1/p' "$tmp/run.err")
[ $rc -eq 0 ] && [ "$got" = "$want" ] && say "ok   run --chat-template: prefill $got tokens" \
    || say "FAIL run --chat-template: exit $rc, prefill '$got' want '$want': $(cat "$tmp/run.err")"
printf 'Hi\n' | "$COLIBRI" chat -m "$m" --system "Be brief." --chat-template "$tmp/t.jinja" -n 2 --temp 0 \
    > /dev/null 2> "$tmp/chat.err"; rc=$?
got=$(sed -n 's/^prefill \([0-9]*\) tok.*/\1/p' "$tmp/chat.err")
[ $rc -eq 0 ] && [ "$got" = "$want" ] && say "ok   chat --chat-template: prefill $got tokens" \
    || say "FAIL chat --chat-template: exit $rc, prefill '$got' want '$want': $(cat "$tmp/chat.err")"

printf '%s' 'K{{ thinking }}{% for m in messages %}[{{ m.role }}]{{ m.content }}{% endfor %}>' > "$tmp/k.jinja"
q='Say "hi" \ now'    # the messages reach the template as JSON: quotes and backslashes escaped
want=$("$COLIBRI" tokenize -m "$m" --no-special --text "KTrue[user]$q>" |
       python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')
"$COLIBRI" run -m "$m" -p "$q" --chat-template "$tmp/k.jinja" --chat-template-kwargs '{"thinking": true}' -n 2 \
    --temp 0 > /dev/null 2> "$tmp/run.err"; rc=$?
got=$(sed -n 's/^prefill \([0-9]*\) tok.*/\1/p' "$tmp/run.err")
[ $rc -eq 0 ] && [ "$got" = "$want" ] && say "ok   run --chat-template-kwargs: prefill $got tokens" \
    || say "FAIL run --chat-template-kwargs: exit $rc, prefill '$got' want '$want': $(cat "$tmp/run.err")"
printf '%s\n' "$q" | "$COLIBRI" chat -m "$m" --chat-template "$tmp/k.jinja" --chat-template-kwargs '{"thinking": true}' \
    -n 2 --temp 0 > /dev/null 2> "$tmp/chat.err"; rc=$?
got=$(sed -n 's/^prefill \([0-9]*\) tok.*/\1/p' "$tmp/chat.err")
[ $rc -eq 0 ] && [ "$got" = "$want" ] && say "ok   chat --chat-template-kwargs: prefill $got tokens" \
    || say "FAIL chat --chat-template-kwargs: exit $rc, prefill '$got' want '$want': $(cat "$tmp/chat.err")"

expect_fail() {  # expect_fail NAME SUBSTRING ARGS...
    name=$1; want=$2; shift 2
    out=$("$COLIBRI" "$@" 2>&1 >/dev/null </dev/null); rc=$?
    if [ $rc -eq 0 ] || [ $rc -ge 128 ]; then say "FAIL $name: exit $rc"; return; fi
    case "$out" in *"$want"*) say "ok   $name: $out" ;; *) say "FAIL $name: '$out' lacks '$want'" ;; esac
}
printf '%s\n%s' 'line 1' '{% include "other.jinja" %}' > "$tmp/bad.jinja"
expect_fail unsupported "line 2: unsupported statement '{% include %}'" run -m "$m" -p hi --chat --chat-template "$tmp/bad.jinja"
expect_fail chat_unsupported "unsupported statement" chat -m "$m" --chat-template "$tmp/bad.jinja"
expect_fail missing "--chat-template $tmp/none.jinja" run -m "$m" -p hi --chat --chat-template "$tmp/none.jinja"
printf '%s' "{{ raise_exception('System role not supported') }}" > "$tmp/raise.jinja"
expect_fail raises "template error: System role not supported" run -m "$m" -p hi --chat --chat-template "$tmp/raise.jinja"
expect_fail kwargs_not_object "--chat-template-kwargs: chat: template variables are not a JSON object" \
    run -m "$m" -p hi --chat-template "$tmp/k.jinja" --chat-template-kwargs '[1]'
exit $fail
