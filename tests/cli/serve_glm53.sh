#!/bin/sh
# GLM-5.3 (glm5_next) through run and serve with GLM's prompt and tool-call
# format, on a synth glm53-tiny (its forward is the oracle-checked one) with a
# small tokenizer carrying GLM's special tokens (tests/serve/make_glm_tokenizer.py):
#  - no template shipped: the built-in glm renderer, chosen by model_type even
#    when the tokens would name another (the prompt run and chat prefill is
#    '[gMASK]<sop><|user|>\nHi<|assistant|>'); the server refuses tools by name;
#  - a template shipped in tokenizer_config.json, or given by --chat-template
#    over the built-in (tests/tok/chat/glm_4_7_flash.jinja, the public GLM
#    template with GLM-5's <tool_call>NAME<arg_key>K</arg_key><arg_value>V
#    </arg_value></tool_call> and <think> prompt): a tools round trip through
#    /v1/chat/completions, the call forced by tool_choice "required" and parsed
#    back into OpenAI tool_calls, then the call and its result rendered into the
#    next prompt; with thinking on (the prompt ends in <think>) the reply's
#    text is reasoning_content.
. tests/cli/serve_lib.inc
TPL=tests/tok/chat/glm_4_7_flash.jinja

"$COLIBRI" synth "$tmp/m" --preset glm53-tiny --layers 4 >/dev/null 2>&1 || fail "synth glm53-tiny"
"$PY" tests/serve/make_glm_tokenizer.py "$tmp/m" || fail "make_glm_tokenizer"
mkdir "$tmp/t"
cp "$tmp/m"/* "$tmp/t"/
"$PY" tests/serve/make_glm_tokenizer.py "$tmp/t" "$TPL" || fail "make_glm_tokenizer with a template"

# prefill_of DIR: the prompt tokens `colibri run -p Hi` prefills with the model's chat template
prefill_of() {
    "$COLIBRI" run -m "$1" -p Hi --chat -n 1 --temp 0 >/dev/null 2>"$tmp/run.err" || fail "run on $1: $(cat "$tmp/run.err")"
    sed -n 's/^prefill \([0-9]*\) tok.*/\1/p' "$tmp/run.err"
}
count() { "$COLIBRI" tokenize -m "$1" --text "$2" | "$PY" -c 'import json,sys; print(len(json.load(sys.stdin)))'; }
want=$(count "$tmp/m" "[gMASK]<sop><|user|>
Hi<|assistant|>")
got=$(prefill_of "$tmp/m")
[ "$got" = "$want" ] || fail "built-in glm prompt: prefill $got tokens, want $want"
printf 'Hi\n' | "$COLIBRI" chat -m "$tmp/m" -n 1 --temp 0 >/dev/null 2>"$tmp/chat.err" || fail "chat: $(cat "$tmp/chat.err")"
got=$(sed -n 's/^prefill \([0-9]*\) tok.*/\1/p' "$tmp/chat.err")
[ "$got" = "$want" ] || fail "built-in glm prompt in chat: prefill $got tokens, want $want"
# DeepSeek's tokens (tests/tok/tiny without its template) would choose deepseek_v3: model_type wins
mkdir "$tmp/d"
cp "$tmp/m"/config.json "$tmp/m"/model*.safetensors* tests/tok/tiny/tokenizer.json "$tmp/d"/
want=$(count "$tmp/d" "[gMASK]<sop><|user|>
Hi<|assistant|>")
got=$(prefill_of "$tmp/d")
[ "$got" = "$want" ] || fail "glm5_next with DeepSeek's tokens: prefill $got tokens, want $want (built-in glm)"
echo "ok   built-in glm template for glm5_next"

# post PORT BODY-JSON: the reply's JSON (any status), "HTTP CODE" first
post() {
    "$PY" - "$1" "$2" <<'PYEOF'
import json, sys, urllib.request, urllib.error
r = urllib.request.Request(f"http://127.0.0.1:{sys.argv[1]}/v1/chat/completions", sys.argv[2].encode(),
                           {"Content-Type": "application/json"})
try:
    with urllib.request.urlopen(r, timeout=120) as f:
        print("HTTP", f.status); print(f.read().decode())
except urllib.error.HTTPError as e:
    print("HTTP", e.code); print(e.read().decode())
PYEOF
}
TOOLS='[{"type":"function","function":{"name":"set_mode","parameters":{"type":"object","properties":{"mode":{"enum":["fast","safe"]},"on":{"type":"boolean"}},"required":["mode","on"]}}}]'

serve_start -m "$tmp/m" --threads 1 --slots 1 --ctx 1024
post "$port" '{"messages":[{"role":"user","content":"Hi"}],"max_tokens":3,"temperature":0}' >"$tmp/plain"
grep -q "^HTTP 200" "$tmp/plain" || fail "built-in glm chat: $(cat "$tmp/plain")"
post "$port" '{"messages":[{"role":"user","content":"Hi"}],"tools":'"$TOOLS"',"max_tokens":3}' >"$tmp/tools"
grep -q "^HTTP 400" "$tmp/tools" && grep -q "built-in glm template renders no tools" "$tmp/tools" \
    || fail "tools with the built-in glm template not refused by name: $(cat "$tmp/tools")"
kill -9 "$pid"; pid=""
echo "ok   built-in glm template in the server (tools refused by name)"

# round_trip PORT: a forced call parsed into tool_calls, then the call and its
# result sent back; prints the call's arguments
round_trip() {
    "$PY" - "$1" "$TOOLS" <<'PYEOF' || fail "tools round trip"
import json, sys, urllib.request
port, tools = sys.argv[1], json.loads(sys.argv[2])
def post(body):
    r = urllib.request.Request(f"http://127.0.0.1:{port}/v1/chat/completions", json.dumps(body).encode(),
                               {"Content-Type": "application/json"})
    return json.loads(urllib.request.urlopen(r, timeout=120).read())
user = {"role": "user", "content": "Set the mode"}
o = post({"messages": [user], "tools": tools, "tool_choice": "required", "max_tokens": 200, "temperature": 0,
          "reasoning_effort": "none"})
c = o["choices"][0]
calls = c["message"].get("tool_calls") or []
assert c["finish_reason"] == "tool_calls" and len(calls) >= 1, o
tc = calls[0]
args = json.loads(tc["function"]["arguments"])
assert tc["type"] == "function" and tc["id"] and tc["function"]["name"] == "set_mode", tc
assert set(args) == {"mode", "on"} and args["mode"] in ("fast", "safe") and isinstance(args["on"], bool), args
o = post({"messages": [user, {"role": "assistant", "content": None, "tool_calls": [tc]},
                       {"role": "tool", "tool_call_id": tc["id"], "content": "mode set"}],
          "tools": tools, "max_tokens": 3, "temperature": 0, "reasoning_effort": "none"})
assert o["choices"][0]["message"]["role"] == "assistant", o
# thinking on: the prompt ends in <think>, so what the model writes first is reasoning
o = post({"messages": [user], "max_tokens": 4, "temperature": 0})
m = o["choices"][0]["message"]
assert isinstance(m.get("reasoning_content"), str) and m["reasoning_content"], o
print(json.dumps(args, separators=(",", ":")))
PYEOF
}
check_prompts() {   # the call and its result rendered in GLM's tags into the second prompt
    grep -q "<tool_call>set_mode<arg_key>mode</arg_key><arg_value>$(echo "$1" | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["mode"])')</arg_value>" "$tmp/server.log" \
        && grep -q "<|observation|><tool_response>mode set</tool_response>" "$tmp/server.log" \
        || fail "the second prompt lacks the call or its result in GLM's tags"
}
serve_start -m "$tmp/t" --threads 1 --slots 1 --ctx 1024 --log-prompts
args=$(round_trip "$port")
check_prompts "$args"
kill -9 "$pid"; pid=""
echo "ok   shipped template: tools round trip ($args), thinking as reasoning_content"
serve_start -m "$tmp/m" --threads 1 --slots 1 --ctx 1024 --log-prompts --chat-template "$TPL"
args=$(round_trip "$port")
check_prompts "$args"
kill -9 "$pid"; pid=""
echo "ok   --chat-template over the built-in: tools round trip ($args)"
