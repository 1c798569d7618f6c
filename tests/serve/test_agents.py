#!/usr/bin/env python3
"""What agents hit first, against `colibri serve` on the bundled colibri-tiny
(started by tests/cli/serve.sh; its own chat template, DeepSeek-V3's call syntax),
in plain HTTP/JSON: tool calls that hold at default settings, the tool round trip,
JSON Schema keywords, thinking switches, /v1/messages (Anthropic), /v1/responses
(OpenAI Responses) and /v1/embeddings.

Environment: SERVE_URL_TINY (the server, started with -n 5 --seed 7), SERVE_KEY (its API key).
The model is a toy: the tests check shapes, grammars and wire formats, never the
text. Prints one line per test and "N passed, N failed"; exits 1 on any failure.
"""
import json
import os
import re
import sys
import traceback
import urllib.error
import urllib.request

URL = os.environ["SERVE_URL_TINY"]
KEY = os.environ["SERVE_KEY"]
MODEL = "colibri-tiny"
MARKUP = "tool▁"    # any DeepSeek tool-call marker

WEATHER = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 24},
                                            "unit": {"type": "string", "enum": ["c", "f"]}}, "required": ["city"]}
CHAT_TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Weather in a city",
                                                "parameters": WEATHER}}]


def check(cond, msg):
    if not cond:
        raise AssertionError(msg)


def post(path, body, headers=None, raw=False):
    """(status, parsed JSON, or the text when raw) of one POST."""
    h = {"Authorization": "Bearer " + KEY, "Content-Type": "application/json"}
    h.update(headers or {})
    h = {k: v for k, v in h.items() if v is not None}
    req = urllib.request.Request(URL + path, data=json.dumps(body).encode(), method="POST", headers=h)
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            status, text = r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        status, text = e.code, e.read().decode()
    return status, text if raw else json.loads(text)


def sse(text):
    """[(event name or None, parsed data)] of an event stream."""
    out = []
    for block in text.split("\n\n"):
        name, data = None, None
        for line in block.split("\n"):
            if line.startswith("event: "):
                name = line[7:]
            elif line.startswith("data: "):
                data = line[6:]
        if data is not None:
            out.append((name, None if data == "[DONE]" else json.loads(data)))
    return out


def chat(**kw):
    body = {"model": MODEL, "messages": [{"role": "user", "content": "What is the weather in Paris?"}]}
    body.update(kw)
    return post("/v1/chat/completions", body)


# ------------------------------------------------------------------ tool calls

def test_required_tool_calls_hold_at_default_settings():
    # the issue's case: tool_choice required, max_tokens 300, temperature 1
    for seed in range(2):
        st, r = chat(tools=CHAT_TOOLS, tool_choice="required", max_tokens=300, temperature=1, seed=seed)
        check(st == 200, f"{st} {r}")
        c = r["choices"][0]
        m = c["message"]
        check(MARKUP not in (m.get("content") or ""), f"seed {seed}: markup leaked into content: {m}")
        calls = m.get("tool_calls") or []
        check(calls, f"seed {seed}: no tool calls ({c['finish_reason']}): {m}")
        for t in calls:
            args = json.loads(t["function"]["arguments"])
            check(isinstance(args.get("city"), str) and len(args["city"]) <= 24, f"arguments {args}")
            check(set(args) <= {"city", "unit"} and args.get("unit", "c") in ("c", "f"), f"arguments {args}")
        check(c["finish_reason"] in ("tool_calls", "length"), f"finish {c['finish_reason']}")
    # one call, then the end of the message
    for seed in range(2):
        st, r = chat(tools=CHAT_TOOLS, tool_choice="required", parallel_tool_calls=False, max_tokens=300,
                     temperature=1, seed=seed)
        c = r["choices"][0]
        check(st == 200 and c["finish_reason"] == "tool_calls" and len(c["message"]["tool_calls"]) == 1, f"{r}")


def test_cut_tool_call_never_leaks_markup():
    # cut inside the first call: nothing complete, no markup, finish length (also streamed)
    st, r = chat(tools=CHAT_TOOLS, tool_choice="required", max_tokens=40, temperature=1, seed=1)
    c = r["choices"][0]
    check(st == 200 and c["finish_reason"] == "length", f"{r}")
    check(MARKUP not in (c["message"].get("content") or "") and not c["message"].get("tool_calls"), f"{c}")
    st, text = post("/v1/chat/completions", {"model": MODEL, "messages": [{"role": "user", "content": "Hi"}],
                                             "tools": CHAT_TOOLS, "max_tokens": 40, "temperature": 1, "seed": 1,
                                             "stream": True,
                                             "grammar": 'root ::= "<｜tool▁calls▁begin｜>" [a-z]*'}, raw=True)
    content = "".join((d["choices"][0]["delta"].get("content") or "") for _, d in sse(text) if d and d["choices"])
    check(st == 200 and MARKUP not in content, f"streamed content {content!r}")


def test_tool_round_trip_content_null_and_empty():
    base = [{"role": "user", "content": "Weather in Paris?"}]
    n_base = chat(messages=base, tools=CHAT_TOOLS, max_tokens=1)[1]["usage"]["prompt_tokens"]
    for content in (None, ""):
        call = {"role": "assistant", "content": content, "tool_calls": [
            {"id": "call_0", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]}
        n_call = chat(messages=base + [call], tools=CHAT_TOOLS, max_tokens=1)
        check(n_call[0] == 200, f"content {content!r}: {n_call}")
        st, r = chat(messages=base + [call, {"role": "tool", "tool_call_id": "call_0", "content": "18 degrees"}],
                     tools=CHAT_TOOLS, max_tokens=1)
        check(st == 200, f"content {content!r}: {st} {r}")
        n = (n_call[1]["usage"]["prompt_tokens"], r["usage"]["prompt_tokens"])
        check(n[0] > n_base + 10 and n[1] > n[0] + 3, f"content {content!r}: call / result not rendered: {n_base} {n}")
    # the tool definitions reach the prompt
    n_plain = chat(messages=base, max_tokens=1)[1]["usage"]["prompt_tokens"]
    check(n_base > n_plain + 20, f"tools not rendered: {n_plain} {n_base}")


# ------------------------------------------------------------------ JSON Schema

PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "pattern": "^[A-Z][a-z]{1,8}$"},
        "age": {"type": "integer", "minimum": 0, "maximum": 150},
        "score": {"type": "number", "exclusiveMinimum": 0, "maximum": 10},
        "email": {"type": "string", "format": "email"},
        "role": {"enum": ["admin", "user"]},
        "nick": {"anyOf": [{"type": "string", "maxLength": 6}, {"type": "null"}]},
        "home": {"$ref": "#/$defs/Place"},
    },
    "required": ["name", "age", "score", "email", "role", "nick", "home"],
    "additionalProperties": False,
    "$defs": {"Place": {"type": "object", "properties": {"zip": {"type": "string", "pattern": "^\\d{5}$"}},
                        "required": ["zip"], "additionalProperties": False}},
}


def valid_person(p):
    """The schema's constraints, checked by hand."""
    return (isinstance(p, dict) and set(p) == set(PERSON["required"])
            and re.fullmatch(r"[A-Z][a-z]{1,8}", p["name"]) is not None
            and isinstance(p["age"], int) and not isinstance(p["age"], bool) and 0 <= p["age"] <= 150
            and isinstance(p["score"], (int, float)) and 0 < p["score"] <= 10
            and re.fullmatch(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)+", p["email"]) is not None
            and p["role"] in ("admin", "user")
            and (p["nick"] is None or (isinstance(p["nick"], str) and len(p["nick"]) <= 6))
            and isinstance(p["home"], dict) and set(p["home"]) == {"zip"}
            and re.fullmatch(r"\d{5}", p["home"]["zip"]) is not None)


def test_json_schema_keywords_at_temperature_1():
    fmt = {"type": "json_schema", "json_schema": {"name": "person", "schema": PERSON, "strict": True}}
    ok = 0
    for seed in range(5):
        st, r = chat(response_format=fmt, max_tokens=400, temperature=1, seed=seed)
        c = r["choices"][0]
        check(st == 200, f"{st} {r}")
        if c["finish_reason"] != "stop":
            continue    # cut by max_tokens: a prefix
        p = json.loads(c["message"]["content"])
        check(valid_person(p), f"seed {seed}: invalid {p}")
        ok += 1
    check(ok >= 3, f"only {ok}/5 finished")


def test_schema_refusals_name_the_keyword():
    for schema, needle in (({"type": "string", "pattern": "(?=a)"}, "lookaround"),
                           ({"type": "integer", "multipleOf": 3}, "'multipleOf' 3"),
                           ({"type": "string", "format": "ipv4"}, "'ipv4'"),
                           ({"type": "object", "not": {}}, "'not'")):
        st, r = chat(response_format={"type": "json_schema", "json_schema": {"name": "x", "schema": schema}}, max_tokens=2)
        check(st == 400 and needle in r["error"]["message"], f"{schema}: {st} {r}")


def test_thinking_switches():
    st, r = chat(chat_template_kwargs={"thinking": True}, max_tokens=2)
    check(st == 400 and "never reads 'thinking'" in r["error"]["message"], f"{st} {r}")
    st, r = chat(reasoning_effort="high", max_tokens=2)
    check(st == 400 and r["error"]["param"] == "reasoning_effort", f"{st} {r}")


# ------------------------------------------------------------------ /v1/messages

ANTH = {"x-api-key": KEY, "Authorization": None, "anthropic-version": "2023-06-01"}
ANTH_TOOLS = [{"name": "get_weather", "description": "Weather in a city", "input_schema": WEATHER}]


def messages(**kw):
    body = {"model": MODEL, "max_tokens": 16, "messages": [{"role": "user", "content": "Hello"}]}
    body.update(kw)
    return post("/v1/messages", body, headers=ANTH, raw=bool(kw.get("stream")))


def test_messages_text_and_errors():
    st, r = messages(system=[{"type": "text", "text": "Be brief."}], stop_sequences=["zzzz"], temperature=0.5)
    check(st == 200 and r["type"] == "message" and r["role"] == "assistant" and r["id"].startswith("msg_"), f"{r}")
    check([b["type"] for b in r["content"]] == ["text"] and r["stop_reason"] in ("end_turn", "max_tokens"), f"{r}")
    check(r["usage"]["input_tokens"] > 0 and r["usage"]["output_tokens"] > 0, f"{r['usage']}")
    for body, needle in (({"messages": [{"role": "user", "content": [{"type": "image", "source": {}}]}]}, "content[0]"),
                         ({"tools": [{"type": "web_search_20250305", "name": "web_search"}]}, "server tools"),
                         ({"thinking": {"type": "enabled", "budget_tokens": 1024}}, "'thinking'"),
                         ({"mcp_servers": []}, "'mcp_servers'")):
        st, r = messages(**body)
        check(st == 400 and r["type"] == "error" and r["error"]["type"] == "invalid_request_error"
              and needle in r["error"]["message"], f"{body}: {st} {r}")
    st, r = post("/v1/messages", {"model": MODEL, "messages": [{"role": "user", "content": "x"}]}, headers=ANTH)
    check(st == 400 and "'max_tokens' is required" in r["error"]["message"], f"{st} {r}")
    st, r = post("/v1/messages", {"model": MODEL, "max_tokens": 2, "messages": []},
                 headers=dict(ANTH, **{"x-api-key": "wrong"}))
    check(st == 401 and r["type"] == "error" and r["error"]["type"] == "authentication_error", f"{st} {r}")


def test_messages_tool_loop():
    st, r = messages(tools=ANTH_TOOLS, tool_choice={"type": "tool", "name": "get_weather", "disable_parallel_tool_use": True},
                     max_tokens=300, temperature=1, messages=[{"role": "user", "content": "Weather in Paris?"}])
    check(st == 200 and r["stop_reason"] == "tool_use", f"{st} {r}")
    uses = [b for b in r["content"] if b["type"] == "tool_use"]
    check(len(uses) == 1 and uses[0]["name"] == "get_weather" and isinstance(uses[0]["input"]["city"], str), f"{r}")
    history = [{"role": "user", "content": "Weather in Paris?"}, {"role": "assistant", "content": r["content"]},
               {"role": "user", "content": [{"type": "tool_result", "tool_use_id": uses[0]["id"], "content": "18 C"}]}]
    st, r2 = messages(tools=ANTH_TOOLS, max_tokens=4, messages=history)
    check(st == 200 and r2["type"] == "message", f"{st} {r2}")
    st, r3 = messages(tools=ANTH_TOOLS, max_tokens=4, messages=history[:2] + [{"role": "user", "content": "ok"}])
    check(r2["usage"]["input_tokens"] > r3["usage"]["input_tokens"], f"the tool result is not in the prompt: {r2} {r3}")


def test_messages_stream_events():
    st, text = messages(stream=True, tools=ANTH_TOOLS, tool_choice={"type": "any", "disable_parallel_tool_use": True},
                        max_tokens=300, temperature=1)
    evs = sse(text)
    names = [n for n, _ in evs]
    check(st == 200 and names[0] == "message_start" and names[-2:] == ["message_delta", "message_stop"], f"{names}")
    check(all(n == d["type"] for n, d in evs), "event names match their data's type")
    starts = [d for n, d in evs if n == "content_block_start"]
    check(len(starts) == 1 and starts[0]["content_block"]["type"] == "tool_use", f"{starts}")
    args = "".join(d["delta"]["partial_json"] for n, d in evs if n == "content_block_delta")
    check(isinstance(json.loads(args)["city"], str), f"input_json_delta pieces {args!r}")
    check(names.count("content_block_stop") == 1, f"{names}")
    end = [d for n, d in evs if n == "message_delta"][0]
    check(end["delta"]["stop_reason"] == "tool_use" and end["usage"]["output_tokens"] > 0, f"{end}")
    st, text = messages(stream=True, max_tokens=6)
    evs = sse(text)
    deltas = [d["delta"] for n, d in evs if n == "content_block_delta"]
    check(deltas and all(x["type"] == "text_delta" for x in deltas), f"{evs}")
    check([d for n, d in evs if n == "message_delta"][0]["delta"]["stop_reason"] == "max_tokens", f"{evs[-2:]}")


# ------------------------------------------------------------------ /v1/responses

RESP_TOOLS = [{"type": "function", "name": "get_weather", "description": "Weather in a city", "parameters": WEATHER}]


def responses(**kw):
    body = {"model": MODEL, "input": "Hello", "max_output_tokens": 16}
    body.update(kw)
    return post("/v1/responses", body, raw=bool(kw.get("stream")))


def test_responses_text_tools_and_errors():
    st, r = responses(instructions="Be brief.", store=False)
    check(st == 200 and r["object"] == "response" and r["status"] in ("completed", "incomplete"), f"{st} {r}")
    check([o["type"] for o in r["output"]] == ["message"] and r["output"][0]["content"][0]["type"] == "output_text", f"{r}")
    check(r["usage"]["total_tokens"] == r["usage"]["input_tokens"] + r["usage"]["output_tokens"], f"{r['usage']}")
    st, r = responses(input="Weather in Paris?", tools=RESP_TOOLS, tool_choice="required", parallel_tool_calls=False,
                      max_output_tokens=300, temperature=1)
    calls = [o for o in r["output"] if o["type"] == "function_call"]
    check(st == 200 and len(calls) == 1 and isinstance(json.loads(calls[0]["arguments"])["city"], str), f"{r}")
    items = [{"role": "user", "content": "Weather in Paris?"}, calls[0],
             {"type": "function_call_output", "call_id": calls[0]["call_id"], "output": "18 C"}]
    st, r2 = responses(input=items, tools=RESP_TOOLS, max_output_tokens=4)
    check(st == 200 and r2["usage"]["input_tokens"] > r["usage"]["input_tokens"], f"{st} {r2}")
    for body, needle in (({"previous_response_id": "resp_x"}, "Previous response with id 'resp_x' not found"),
                         ({"store": "yes"}, "'store' must be true or false"),
                         ({"tools": [{"type": "web_search"}]}, "'web_search'"),
                         ({"input": [{"type": "input_image", "image_url": "x"}]}, "'input_image'"),
                         ({"background": True}, "'background'")):
        st, r = responses(**body)
        check(st == 400 and needle in r["error"]["message"], f"{body}: {st} {r}")


def out_text(r):
    return "".join(c["text"] for o in r["output"] if o["type"] == "message" for c in o["content"])


def test_responses_previous_response_id():
    # a follow-up naming the previous response gets what the whole conversation sent as input gets
    # (greedy: the same prompt gives the same text and token count); the instructions are not inherited
    g = {"temperature": 0, "max_output_tokens": 8}
    st, r1 = responses(input="Hello there", instructions="Be brief.", **g)
    check(st == 200 and r1["store"] is True and r1["previous_response_id"] is None, f"{st} {r1}")
    st, r2 = responses(input="And then?", previous_response_id=r1["id"], **g)
    full = [{"role": "user", "content": "Hello there"}, {"role": "assistant", "content": out_text(r1)},
            {"role": "user", "content": "And then?"}]
    st2, w2 = responses(input=full, store=False, **g)
    check(st == 200 and st2 == 200 and r2["previous_response_id"] == r1["id"], f"{st} {r2}")
    check(r2["usage"]["input_tokens"] == w2["usage"]["input_tokens"] and out_text(r2) == out_text(w2),
          f"follow-up {r2['usage']} {out_text(r2)!r} vs whole input {w2['usage']} {out_text(w2)!r}")
    # a chain of two, the second one streamed: it is kept too
    st, text = responses(input="Why?", previous_response_id=r2["id"], stream=True, **g)
    r3 = sse(text)[-1][1]["response"]
    check(r3["previous_response_id"] == r2["id"] and r3["store"] is True, f"{r3}")
    st, r4 = responses(input="Go on.", previous_response_id=r3["id"], **g)
    full += [{"role": "assistant", "content": out_text(r2)}, {"role": "user", "content": "Why?"},
             {"role": "assistant", "content": out_text(r3)}, {"role": "user", "content": "Go on."}]
    st2, w4 = responses(input=full, **g)
    check(st == 200 and r4["usage"]["input_tokens"] == w4["usage"]["input_tokens"] and out_text(r4) == out_text(w4),
          f"chain: {r4['usage']} {out_text(r4)!r} vs {w4['usage']} {out_text(w4)!r}")
    # w4's prompt is r4's, just computed: its slot reuses all of it but the last token (the Responses usage says so)
    c4 = w4["usage"]["input_tokens_details"]["cached_tokens"]
    check(w4["usage"]["input_tokens"] - 1 <= c4 < w4["usage"]["input_tokens"], f"cached tokens: {w4['usage']}")
    st, text = responses(input=full, stream=True, **g)
    u = sse(text)[-1][1]["response"]["usage"]
    check(u["input_tokens"] - 1 <= u["input_tokens_details"]["cached_tokens"] < u["input_tokens"], f"streamed: {u}")
    # store false: answered, not kept
    st, r5 = responses(input="Hello", store=False, **g)
    check(st == 200 and r5["store"] is False, f"{r5}")
    st, r6 = responses(input="Again", previous_response_id=r5["id"])
    check(st == 400 and r6["error"]["code"] == "previous_response_not_found" and
          r6["error"]["param"] == "previous_response_id" and r5["id"] in r6["error"]["message"], f"{st} {r6}")


def test_responses_stream_events():
    st, text = responses(stream=True, max_output_tokens=6)
    evs = sse(text)
    names = [n for n, _ in evs]
    check(st == 200 and names[:2] == ["response.created", "response.in_progress"], f"{names}")
    check(names[-1] == "response.incomplete" and evs[-1][1]["response"]["incomplete_details"]["reason"] == "max_output_tokens",
          f"{names[-3:]}")
    check([d["sequence_number"] for _, d in evs] == list(range(len(evs))), "sequence numbers")
    text_d = "".join(d["delta"] for n, d in evs if n == "response.output_text.delta")
    done = [d["text"] for n, d in evs if n == "response.output_text.done"]
    check(done == [text_d] and evs[-1][1]["response"]["output"][0]["content"][0]["text"] == text_d, f"{done} {text_d!r}")
    st, text = responses(stream=True, input="Weather?", tools=RESP_TOOLS, tool_choice={"type": "function", "name": "get_weather"},
                         parallel_tool_calls=False, max_output_tokens=300, temperature=1)
    evs = sse(text)
    names = [n for n, _ in evs]
    check(names[-1] == "response.completed", f"{names[-3:]}")
    args = "".join(d["delta"] for n, d in evs if n == "response.function_call_arguments.delta")
    item = evs[-1][1]["response"]["output"][0]
    check(item["type"] == "function_call" and item["arguments"] == args and json.loads(args)["city"], f"{item} {args!r}")


def test_serve_defaults_from_the_command_line():
    # the server runs with -n 5 --seed 7: a request that gives neither gets them
    body = {"model": MODEL, "messages": [{"role": "user", "content": "Tell me a story"}], "temperature": 1}
    a, b = post("/v1/chat/completions", body)[1], post("/v1/chat/completions", body)[1]
    check(a["usage"]["completion_tokens"] <= 5 and a["choices"][0]["finish_reason"] == "length", f"{a}")
    check(a["choices"][0]["message"]["content"] == b["choices"][0]["message"]["content"], f"seed: {a} {b}")
    c = post("/v1/chat/completions", dict(body, max_tokens=9, seed=8))[1]
    check(c["usage"]["completion_tokens"] == 9, f"the request's own max_tokens: {c}")


def test_embeddings_refused_by_name():
    st, r = post("/v1/embeddings", {"model": MODEL, "input": "x"})
    check(st == 501 and "embedding" in r["error"]["message"], f"{st} {r}")


def main():
    tests = [(k, v) for k, v in globals().items() if k.startswith("test_") and callable(v)]
    passed = failed = 0
    for name, fn in tests:
        try:
            fn()
            print(f"ok   {name}")
            passed += 1
        except Exception:
            print(f"FAIL {name}")
            traceback.print_exc()
            failed += 1
    print(f"{passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
