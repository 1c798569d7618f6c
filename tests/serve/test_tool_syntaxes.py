#!/usr/bin/env python3
"""tool_choice "required" / named in GLM's and Qwen3-Coder's tool-call syntax,
against the servers tests/cli/serve.sh starts with those templates
(environment as test_serve.py's, plus SERVE_URL_GLM: GLM-4.6's template,
SERVE_URL_QWEN_CODER: Qwen3-Coder's, both by --chat-template).

The model is a random oracle fixture that, left to itself, calls nothing: every
call seen is the grammar's doing. Each request must end in exactly the calls
allowed, parsed back by the server into OpenAI tool_calls whose arguments
validate against the tool's schema (the parser types a tagged value by the
schema, so a string stays text and an integer or array is JSON).

Prints one line per test and "N passed, N failed"; exits 1 on any failure.
"""
import json
import os
import sys

import openai

from test_serve import CITY_TOOL, KEY, MODEL, TIME_TOOL, check, check_arguments, main

CLIENTS = {name: openai.OpenAI(base_url=os.environ[var] + "/v1", api_key=KEY, max_retries=0, timeout=60)
           for name, var in (("glm", "SERVE_URL_GLM"), ("qwen3_coder", "SERVE_URL_QWEN_CODER"))}

# strings bounded (a random model would not end unbounded text), an array, an
# optional integer and boolean
NOTE_TOOL = {"type": "function", "function": {"name": "add_note", "parameters": {
    "type": "object", "properties": {
        "title": {"type": "string", "minLength": 1, "maxLength": 8},
        "tags": {"type": "array", "items": {"type": "string", "maxLength": 4}, "maxItems": 3},
        "priority": {"type": "integer"}, "done": {"type": "boolean"},
        "kind": {"type": "string", "enum": ["todo", "idea"]}},
    "required": ["title", "tags", "kind"]}}}
TOOLS = [CITY_TOOL, TIME_TOOL, NOTE_TOOL]
NAMES = {"get_weather", "get_time", "add_note"}


def check_call(call):
    """One call: an allowed name and arguments valid for its tool's schema."""
    check(call.type == "function" and call.id, f"call {call}")
    if call.function.name != "add_note":
        return check_arguments(call)
    args = json.loads(call.function.arguments)
    check(isinstance(args, dict) and {"title", "tags", "kind"} <= set(args) <=
          {"title", "tags", "priority", "done", "kind"}, f"add_note keys {args}")
    check(isinstance(args["title"], str) and 1 <= len(args["title"]) <= 8, f"title {args}")
    check(isinstance(args["tags"], list) and len(args["tags"]) <= 3 and
          all(isinstance(t, str) and len(t) <= 4 for t in args["tags"]), f"tags {args}")
    check(isinstance(args.get("priority", 0), int) and not isinstance(args.get("priority", 0), bool), f"priority {args}")
    check(isinstance(args.get("done", False), bool) and args["kind"] in ("todo", "idea"), f"done/kind {args}")


def run_choices(syntax):
    cl = CLIENTS[syntax]
    kw = dict(model=MODEL, messages=[{"role": "user", "content": "Hi"}], tools=TOOLS, max_tokens=500)
    free = cl.chat.completions.create(temperature=0, **kw).choices[0]
    check(not free.message.tool_calls, f"{syntax}: unprompted call: {free.message}")
    seen = set()
    choices = [("required", NAMES)] + [({"type": "function", "function": {"name": n}}, {n}) for n in sorted(NAMES)]
    for choice, names in choices:
        for temp, seed in ((0, 0), (1.0, 1)):
            c = cl.chat.completions.create(tool_choice=choice, parallel_tool_calls=False, temperature=temp,
                                           seed=seed, **kw).choices[0]
            check(c.finish_reason == "tool_calls", f"{syntax} {choice} t={temp} s={seed}: finish {c.finish_reason}: "
                  f"{c.message}")
            calls = c.message.tool_calls or []
            check(len(calls) == 1 and calls[0].function.name in names, f"{syntax} {choice}: calls {calls}")
            check_call(calls[0])
            seen.add(calls[0].function.name)
    check(seen == NAMES, f"{syntax}: names seen {seen}")
    # streamed (the call comes whole once complete): the same call as unstreamed
    from openai.lib.streaming.chat import ChatCompletionStreamState
    kw.update(tool_choice="required", parallel_tool_calls=False, temperature=1.0, seed=7)
    whole = cl.chat.completions.create(**kw).choices[0]
    state = ChatCompletionStreamState()
    for ch in cl.chat.completions.create(stream=True, **kw):
        state.handle_chunk(ch)
    got = state.get_final_completion().choices[0]
    want = [(t.function.name, t.function.arguments) for t in whole.message.tool_calls or []]
    check(got.finish_reason == "tool_calls" and len(want) == 1 and
          [(t.function.name, t.function.arguments) for t in got.message.tool_calls or []] == want,
          f"{syntax}: streamed {got.message} vs {whole.message}")


def test_glm_required_and_named_are_enforced():
    run_choices("glm")


def test_qwen3_coder_required_and_named_are_enforced():
    run_choices("qwen3_coder")


if __name__ == "__main__":
    sys.exit(main(globals()))
