#!/usr/bin/env python3
"""langchain-openai against `colibri serve` on colibri-tiny (started by tests/clients/langchain.sh).

Environment: CLIENTS_URL (the server), CLIENTS_MODEL (the model id it serves).
colibri-tiny writes novel-flavoured English, never a tool call of its own: the tool calls
come from tool_choice, which colibri enforces by constrained decoding, and the structured
output from the JSON-Schema grammar. The tests check what LangChain gets back (parsed
calls, a round trip through a tool result, valid Pydantic objects), not the text.
Prints one line per test and "N passed, N failed"; exits 1 on any failure.
"""
import os
import sys
import time
import traceback
from typing import List, Literal

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from pydantic import BaseModel, Field

URL = os.environ["CLIENTS_URL"]
MODEL = os.environ["CLIENTS_MODEL"]


def llm(**kw):
    return ChatOpenAI(base_url=URL + "/v1", api_key="test-key", model=MODEL, max_retries=0, timeout=60,
                      **{"temperature": 0, "max_tokens": 400, **kw})


def check(cond, msg):
    if not cond:
        raise AssertionError(msg)


class WeatherArgs(BaseModel):
    # bounded, or colibri-tiny (a novel writer) may fill its budget inside the string
    city: str = Field(max_length=16, description="the city")
    unit: Literal["celsius", "fahrenheit"]


@tool(args_schema=WeatherArgs)
def get_weather(city: str, unit: str) -> str:
    """The weather in a city."""
    return f"18 degrees {unit} and sunny in {city}"


@tool
def add(a: int, b: int) -> int:
    """Adds two integers."""
    return a + b


def test_bind_tools_round_trip():
    question = [SystemMessage("You answer questions."), HumanMessage("What is the weather in Paris?")]
    ai = llm().bind_tools([get_weather, add], tool_choice="get_weather", parallel_tool_calls=False).invoke(question)
    check(isinstance(ai, AIMessage) and len(ai.tool_calls) == 1, f"tool calls {ai.tool_calls} {ai}")
    call = ai.tool_calls[0]
    check(call["name"] == "get_weather" and isinstance(call["args"].get("city"), str) and
          call["args"].get("unit") in ("celsius", "fahrenheit"), f"call {call}")
    check(ai.response_metadata.get("finish_reason") == "tool_calls", f"{ai.response_metadata}")
    result = get_weather.invoke(call)
    check(isinstance(result, ToolMessage) and result.tool_call_id == call["id"], f"{result}")
    # the call and its result go back; the model, free to answer, answers in text
    final = llm(max_tokens=24).bind_tools([get_weather, add]).invoke(question + [ai, result])
    check(isinstance(final.content, str) and final.content and not final.tool_calls, f"final {final}")
    check(final.usage_metadata["input_tokens"] > llm().invoke(question).usage_metadata["input_tokens"] + 20,
          "the tool call and result did not reach the prompt")
    # "required" (LangChain's "any"): some tool is called
    ai = llm(temperature=1.0, seed=3).bind_tools([get_weather, add], tool_choice="any",
                                                  parallel_tool_calls=False).invoke(question)
    check(len(ai.tool_calls) == 1 and ai.tool_calls[0]["name"] in ("get_weather", "add"), f"{ai.tool_calls}")
    if ai.tool_calls[0]["name"] == "add":
        check(all(isinstance(ai.tool_calls[0]["args"][k], int) for k in "ab"), f"{ai.tool_calls}")


def test_streamed_tool_call_equals_unstreamed():
    bound = llm().bind_tools([add], tool_choice="add", parallel_tool_calls=False)
    q = [HumanMessage("Add 2 and 3.")]
    whole = bound.invoke(q)
    chunks = list(bound.stream(q))
    check(len(chunks) > 3, f"{len(chunks)} chunks")
    acc = chunks[0]
    for c in chunks[1:]:
        acc = acc + c
    check(acc.tool_calls and [(t["name"], t["args"]) for t in acc.tool_calls] ==
          [(t["name"], t["args"]) for t in whole.tool_calls], f"streamed {acc.tool_calls} vs {whole.tool_calls}")
    check(isinstance(acc.tool_calls[0]["args"]["a"], int), f"{acc.tool_calls}")


class Address(BaseModel):
    city: str = Field(max_length=16)
    country: Literal["fr", "uk", "us", "de"]


class Person(BaseModel):
    name: str = Field(max_length=24)
    age: int
    employed: bool
    address: Address
    tags: List[Literal["reader", "writer", "sailor"]] = Field(max_length=3)


def test_with_structured_output_100_requests():
    t0 = time.time()
    for i in range(100):
        p = llm(temperature=1.0, seed=i, max_tokens=400).with_structured_output(Person, method="json_schema").invoke(
            f"Describe person number {i}.")
        check(isinstance(p, Person), f"request {i}: {p!r}")
        check(len(p.name) <= 24 and len(p.address.city) <= 16 and len(p.tags) <= 3, f"request {i}: {p!r}")
    print(f"     100 structured requests in {time.time() - t0:.1f} s")


def main():
    tests = [(n, f) for n, f in globals().items() if n.startswith("test_") and callable(f)]
    passed = failed = 0
    for name, fn in tests:
        t0 = time.time()
        try:
            fn()
            passed += 1
            print(f"ok   {name} ({time.time() - t0:.2f} s)")
        except Exception:
            failed += 1
            print(f"FAIL {name}")
            traceback.print_exc()
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
