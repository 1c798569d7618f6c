#!/usr/bin/env python3
"""The official `anthropic` and `openai` clients against colibri serve on colibri-tiny
(its own template): Anthropic's Messages API (requests, streams, a tool loop, errors) and
OpenAI's Responses API (requests, streams, a function-call loop, previous_response_id), and structured output
through openai's `parse` helper with a Pydantic model at temperature 1 (20 runs, all valid).

Environment: CLIENTS_URL (the server). Prints one line per test and "N passed, N failed".
The model is a toy: shapes and validity are checked, never the text.
"""
import json
import os
import sys
import traceback
from typing import Literal, Optional

import anthropic
import openai
from pydantic import BaseModel, Field

URL = os.environ["CLIENTS_URL"]
MODEL = "colibri-tiny"
ant = anthropic.Anthropic(base_url=URL, api_key="unused", max_retries=0, timeout=120)
oai = openai.OpenAI(base_url=URL + "/v1", api_key="unused", max_retries=0, timeout=120)
WEATHER = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 24}}, "required": ["city"]}


def check(cond, msg):
    if not cond:
        raise AssertionError(msg)


def test_anthropic_message_and_stream():
    m = ant.messages.create(model=MODEL, max_tokens=12, system="Be brief.",
                            messages=[{"role": "user", "content": "Hello"}])
    check(m.type == "message" and m.content[0].type == "text" and m.stop_reason in ("end_turn", "max_tokens"), f"{m}")
    check(m.usage.input_tokens > 0 and m.usage.output_tokens > 0, f"{m.usage}")
    with ant.messages.stream(model=MODEL, max_tokens=12, messages=[{"role": "user", "content": "Hello"}]) as s:
        text = "".join(s.text_stream)
        final = s.get_final_message()
    check(final.content[0].text == text and final.stop_reason == "max_tokens", f"{final} {text!r}")


def test_anthropic_tool_loop():
    tools = [{"name": "get_weather", "description": "Weather in a city", "input_schema": WEATHER}]
    msgs = [{"role": "user", "content": "Weather in Paris?"}]
    m = ant.messages.create(model=MODEL, max_tokens=300, tools=tools, messages=msgs,
                            tool_choice={"type": "any", "disable_parallel_tool_use": True})
    use = [b for b in m.content if b.type == "tool_use"]
    check(m.stop_reason == "tool_use" and len(use) == 1 and isinstance(use[0].input["city"], str), f"{m}")
    msgs += [{"role": "assistant", "content": m.content},
             {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use[0].id, "content": "18 C"}]}]
    m2 = ant.messages.create(model=MODEL, max_tokens=8, tools=tools, messages=msgs)
    check(m2.type == "message", f"{m2}")
    with ant.messages.stream(model=MODEL, max_tokens=300, tools=tools,
                             tool_choice={"type": "tool", "name": "get_weather", "disable_parallel_tool_use": True},
                             messages=[{"role": "user", "content": "Weather?"}]) as s:
        final = s.get_final_message()
    use = [b for b in final.content if b.type == "tool_use"]
    check(len(use) == 1 and isinstance(use[0].input.get("city"), str), f"streamed tool_use {final}")


def test_anthropic_errors():
    try:
        ant.messages.create(model=MODEL, max_tokens=8, messages=[{"role": "user", "content": "x"}],
                            thinking={"type": "enabled", "budget_tokens": 1024})
        check(False, "thinking accepted by a template without a switch")
    except anthropic.BadRequestError as e:
        check(e.body["error"]["type"] == "invalid_request_error" and "thinking" in e.body["error"]["message"], f"{e.body}")


def test_responses_text_stream_and_tool_loop():
    r = oai.responses.create(model=MODEL, input="Hello", instructions="Be brief.", max_output_tokens=12)
    check(r.status in ("completed", "incomplete") and r.output_text, f"{r}")
    tools = [{"type": "function", "name": "get_weather", "description": "Weather in a city", "parameters": WEATHER}]
    r = oai.responses.create(model=MODEL, input="Weather in Paris?", tools=tools, tool_choice="required",
                             parallel_tool_calls=False, max_output_tokens=300, temperature=1)
    calls = [o for o in r.output if o.type == "function_call"]
    check(len(calls) == 1 and json.loads(calls[0].arguments)["city"], f"{r.output}")
    items = [{"role": "user", "content": "Weather in Paris?"}, calls[0].model_dump(exclude_none=True),
             {"type": "function_call_output", "call_id": calls[0].call_id, "output": "18 C"}]
    r2 = oai.responses.create(model=MODEL, input=items, tools=tools, max_output_tokens=8)
    check(r2.object == "response", f"{r2}")
    with oai.responses.stream(model=MODEL, input="Weather?", tools=tools, parallel_tool_calls=False,
                              tool_choice={"type": "function", "name": "get_weather"}, max_output_tokens=300,
                              temperature=1) as s:
        types = [e.type for e in s]
        final = s.get_final_response()
    check("response.function_call_arguments.delta" in types and final.output[0].type == "function_call", f"{types}")


def test_responses_previous_response_id():
    # the follow-up gets what the whole conversation sent as input gets (greedy: same text, same tokens)
    g = dict(model=MODEL, temperature=0, max_output_tokens=8)
    r1 = oai.responses.create(input="Hello there", instructions="Be brief.", **g)
    r2 = oai.responses.create(input="And then?", previous_response_id=r1.id, **g)
    whole = oai.responses.create(input=[{"role": "user", "content": "Hello there"},
                                        {"role": "assistant", "content": r1.output_text},
                                        {"role": "user", "content": "And then?"}], store=False, **g)
    check(r1.store and r2.previous_response_id == r1.id and whole.store is False, f"{r1} {r2}")
    check(r2.output_text == whole.output_text and r2.usage.input_tokens == whole.usage.input_tokens,
          f"{r2.output_text!r} {r2.usage} vs {whole.output_text!r} {whole.usage}")
    with oai.responses.stream(input="Why?", previous_response_id=r2.id, **g) as s:
        r3 = [e for e in s][-1].response     # response.incomplete at max_output_tokens: no final_response
    r4 = oai.responses.create(input="Go on.", previous_response_id=r3.id, **g)
    check(r3.previous_response_id == r2.id and r4.previous_response_id == r3.id and r4.output_text, f"{r3} {r4}")
    try:
        oai.responses.create(input="Again", previous_response_id=whole.id, **g)
        check(False, "a response made with store false was found")
    except openai.BadRequestError as e:
        check(e.code == "previous_response_not_found" and whole.id in str(e), f"{e}")


class Address(BaseModel):
    zip: str = Field(pattern=r"^\d{5}$")


class Person(BaseModel):
    name: str = Field(pattern=r"^[A-Z][a-z]{1,8}$")
    age: int = Field(ge=0, le=150)
    score: float = Field(gt=0, le=10)
    role: Literal["admin", "user"]
    nick: Optional[str] = Field(max_length=6)
    home: Address


def test_parse_helper_pydantic_20_runs():
    for seed in range(20):
        c = oai.chat.completions.parse(model=MODEL, messages=[{"role": "user", "content": "A person"}],
                                       response_format=Person, max_tokens=300, temperature=1, seed=seed)
        p = c.choices[0].message.parsed
        check(isinstance(p, Person), f"seed {seed}: {c.choices[0]}")


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
