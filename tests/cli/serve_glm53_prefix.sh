#!/bin/sh
# GLM-5.3 prefix reuse in the server's slots (tests/oracle_glm53's indexed
# fixture: KDA layers, indexed attention with pools of 4; token-id prompts of
# 300, tests/serve/make_v4_test_model.py): with one slot, a prompt sharing
# 270 tokens with the one before resumes from the slot's latest state
# snapshot within the prefix (cached_tokens > 0) and gives what a cold
# server gives, logprobs included, bit for bit as JSON prints them (the
# server's prefill pieces start at the same positions either way, so KDA's
# chunked form sums the same rows); the first prompt again too; n = 2
# choices copy the prompt's state between slots and give the cold text;
# with --kv-dir a restarted server resumes the same prompt from the slot's
# file (all but its last token) with the same result.
. tests/cli/serve_lib.inc

"$PY" tests/serve/make_v4_test_model.py tests/oracle_glm53/glm53_indexed "$tmp/m" || fail "make_v4_test_model"

# req PROMPT_SEED DIVERGE_AT [N]: one greedy completion of 300 token ids
# (seed 0's, from DIVERGE_AT on the seed's), printed as
# "cached=C" then each choice's text and logprobs
req() {
    "$PY" - "$port" "$1" "$2" "${3:-1}" <<'PYEOF' || fail "request $*"
import json, sys, urllib.request
port, seed, at, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
def ids(s):
    return [(i * 37 + s * 11 + i * i * (s + 1)) % 94 + 2 for i in range(300)]
p = ids(0)[:at] + ids(seed)[at:]
body = {"prompt": p, "max_tokens": 8, "temperature": 0, "logprobs": 1, "n": n}
r = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions", json.dumps(body).encode(),
                           {"Content-Type": "application/json"})
o = json.loads(urllib.request.urlopen(r, timeout=120).read())
print("cached=%d" % o["usage"]["prompt_tokens_details"]["cached_tokens"])
for c in o["choices"]:
    print(json.dumps(c["text"]), json.dumps(c["logprobs"]["token_logprobs"]))
PYEOF
}
cached() { sed -n 's/^cached=//p' "$1"; }
body() { sed 1d "$1"; }

serve_start -m "$tmp/m" --threads 1 --slots 1
req 0 300 >"$tmp/a1"            # cold
req 1 270 >"$tmp/b_warm"        # shares 270 with a
req 0 300 >"$tmp/a2"            # a again, the slot holding b
kill -9 "$pid"; pid=""
[ "$(cached "$tmp/a1")" = 0 ] || fail "the first request found a cache: $(cat "$tmp/a1")"
c=$(cached "$tmp/b_warm"); [ "${c:-0}" -gt 0 ] && [ "$c" -le 270 ] || fail "b reused ${c:-?} of its 270 shared tokens"
c=$(cached "$tmp/a2"); [ "${c:-0}" -gt 0 ] && [ "$c" -le 270 ] || fail "a again reused ${c:-?} of 270"

serve_start -m "$tmp/m" --threads 1 --slots 2
req 1 270 >"$tmp/b_cold"
req 0 300 2 >"$tmp/a_n2"
kill -9 "$pid"; pid=""
[ "$(cached "$tmp/b_cold")" = 0 ] || fail "the cold server found a cache"
[ "$(body "$tmp/b_warm")" = "$(body "$tmp/b_cold")" ] || fail "b after a differs from b cold:
$(body "$tmp/b_warm")
$(body "$tmp/b_cold")"
[ "$(body "$tmp/a2")" = "$(body "$tmp/a1")" ] || fail "a after b differs from a cold"
[ "$(body "$tmp/a_n2" | sed -n 1p)" = "$(body "$tmp/a1")" ] && [ "$(body "$tmp/a_n2" | sed -n 2p)" = "$(body "$tmp/a1")" ] \
    || fail "n = 2 choices differ from a cold: $(cat "$tmp/a_n2")"

mkdir "$tmp/kv"
serve_start -m "$tmp/m" --threads 1 --slots 1 --kv-dir "$tmp/kv"
req 0 300 >"$tmp/k1"
kill -TERM "$pid"; wait "$pid" 2>/dev/null; pid=""
serve_start -m "$tmp/m" --threads 1 --slots 1 --kv-dir "$tmp/kv"
req 0 300 >"$tmp/k2"
kill -TERM "$pid"; wait "$pid" 2>/dev/null; pid=""
[ "$(cached "$tmp/k2")" = 299 ] || fail "the restarted server reused $(cached "$tmp/k2") of 300, not 299"
[ "$(body "$tmp/k2")" = "$(body "$tmp/a1")" ] && [ "$(body "$tmp/k1")" = "$(body "$tmp/a1")" ] \
    || fail "the restored slot's completion differs from a cold one"
echo "ok: GLM-5.3 prefix reuse in slots (b cached $(cached "$tmp/b_warm"), a again $(cached "$tmp/a2"), after a restart 299) = cold"
