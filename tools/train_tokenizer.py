#!/usr/bin/env python3
"""Train the colibri-tiny tokenizer: byte-level BPE (8192 ids incl. specials)
with the exact DeepSeek-V3 pre-tokenizer, saved in the DeepSeek schema.

  pre_tokenizer: Sequence[Split(\\p{N}{1,3}, Isolated),
                          Split([一-龥぀-ゟ゠-ヿ]+, Isolated),
                          Split(<DeepSeek-V3 word regex>, Isolated),
                          ByteLevel(add_prefix_space=false, use_regex=false)]
  normalizer: none; decoder: ByteLevel; post_processor: ByteLevel
  specials: 0 <｜begin▁of▁sentence｜>, 1 <｜end▁of▁sentence｜>, 2 <｜▁pad▁｜>,
            3 <｜User｜>, 4 <｜Assistant｜>
  BOS is added by tokenizer_config.json (LlamaTokenizerFast, add_bos_token=true),
  not by the post-processor, exactly as DeepSeek-V3 ships it.

Trained on data/train/*.txt only (Persuasion is held out).
Usage: python3 tools/train_tokenizer.py [--data data/train] [--out models/colibri-tiny]
"""
import argparse
import glob
import json
import os

from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, processors, trainers

BOS = "<｜begin▁of▁sentence｜>"
EOS = "<｜end▁of▁sentence｜>"
PAD = "<｜▁pad▁｜>"
USER = "<｜User｜>"
ASSISTANT = "<｜Assistant｜>"
SPECIALS = [BOS, EOS, PAD, USER, ASSISTANT]

# model-spec.md §6 (verified against DeepSeek-V3's tokenizer.json)
RE_DIGITS = r"\p{N}{1,3}"
RE_CJK = "[一-龥぀-ゟ゠-ヿ]+"
RE_WORDS = (r"""[!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+"""
            r"""|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+"""
            r"""| ?[\p{P}\p{S}]+[\r\n]*"""
            r"""|\s*[\r\n]+"""
            r"""|\s+(?!\S)"""
            r"""|\s+""")

MODEL_MAX_LENGTH = 1024

CHAT_TEMPLATE = (
    "{% if not add_generation_prompt is defined %}{% set add_generation_prompt = false %}{% endif %}"
    "{% set ns = namespace(system_prompt='', is_first_sp=true) %}"
    "{%- for message in messages %}{%- if message['role'] == 'system' %}"
    "{%- if ns.is_first_sp %}{% set ns.system_prompt = ns.system_prompt + message['content'] %}"
    "{% set ns.is_first_sp = false %}"
    "{%- else %}{% set ns.system_prompt = ns.system_prompt + '\\n\\n' + message['content'] %}{%- endif %}"
    "{%- endif %}{%- endfor %}"
    "{{ bos_token }}{{ ns.system_prompt }}"
    "{%- for message in messages %}"
    "{%- if message['role'] == 'user' %}{{ '<｜User｜>' + message['content'] }}{%- endif %}"
    "{%- if message['role'] == 'assistant' %}{{ '<｜Assistant｜>' + message['content'] + '<｜end▁of▁sentence｜>' }}{%- endif %}"
    "{%- endfor %}"
    "{% if add_generation_prompt %}{{ '<｜Assistant｜>' }}{% endif %}"
)


def added(content):
    return {"__type": "AddedToken", "content": content, "lstrip": False,
            "normalized": True, "rstrip": False, "single_word": False}


def build_tokenizer():
    tok = Tokenizer(models.BPE(unk_token=None, byte_fallback=False, fuse_unk=False))
    tok.normalizer = None
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(RE_DIGITS), behavior="isolated", invert=False),
        pre_tokenizers.Split(Regex(RE_CJK), behavior="isolated", invert=False),
        pre_tokenizers.Split(Regex(RE_WORDS), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel(add_prefix_space=True, trim_offsets=True, use_regex=True)
    tok.post_processor = processors.ByteLevel(add_prefix_space=True, trim_offsets=False, use_regex=True)
    return tok


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default=os.path.join(root, "data", "train"))
    ap.add_argument("--out", default=os.path.join(root, "models", "colibri-tiny"))
    ap.add_argument("--vocab", type=int, default=8192)
    a = ap.parse_args()

    files = sorted(glob.glob(os.path.join(a.data, "*.txt")))
    assert files and not any("persuasion" in f for f in files), files
    tok = build_tokenizer()
    trainer = trainers.BpeTrainer(
        vocab_size=a.vocab, min_frequency=2, show_progress=False,
        special_tokens=SPECIALS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train(files, trainer)
    assert tok.get_vocab_size() == a.vocab, tok.get_vocab_size()
    for i, s in enumerate(SPECIALS):
        assert tok.token_to_id(s) == i, (s, tok.token_to_id(s))

    os.makedirs(a.out, exist_ok=True)
    path = os.path.join(a.out, "tokenizer.json")
    tok.save(path)
    # DeepSeek-V3 marks BOS/EOS/pad special, the chat role markers not.
    j = json.load(open(path, encoding="utf-8"))
    for t in j["added_tokens"]:
        t["special"] = t["content"] in (BOS, EOS, PAD)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(j, f, ensure_ascii=False, indent=2)
        f.write("\n")

    cfg = {
        "add_bos_token": True,
        "add_eos_token": False,
        "bos_token": added(BOS),
        "clean_up_tokenization_spaces": False,
        "eos_token": added(EOS),
        "legacy": True,
        "model_max_length": MODEL_MAX_LENGTH,
        "pad_token": added(PAD),
        "sp_model_kwargs": {},
        "unk_token": None,
        "tokenizer_class": "LlamaTokenizerFast",
        "chat_template": CHAT_TEMPLATE,
    }
    with open(os.path.join(a.out, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(cfg, f, ensure_ascii=False, indent=2)
        f.write("\n")

    # checks with the raw library
    t2 = Tokenizer.from_file(path)
    sample = "Emma Woodhouse, handsome, clever, and rich, had lived 21 years.\n\n\"Yes!\" said he."
    enc = t2.encode(sample)
    assert t2.decode(enc.ids) == sample, t2.decode(enc.ids)
    print("vocab", t2.get_vocab_size(), "merges", len(j["model"]["merges"]))
    print("sample ids", enc.ids[:24])
    print("sample tokens", enc.tokens[:24])
    total_bytes = total_toks = 0
    for f in files:
        s = open(f, encoding="utf-8").read()
        total_bytes += len(s.encode("utf-8"))
        total_toks += len(t2.encode(s).ids)
    print("training corpus: %d bytes -> %d tokens (%.3f bytes/token)" %
          (total_bytes, total_toks, total_bytes / total_toks))

    # checks with transformers, if present
    try:
        from transformers import AutoTokenizer
    except ImportError:
        print("transformers not installed: skipped the AutoTokenizer check")
        return
    # transformers 5.x: AutoTokenizer picks TokenizersBackend only when the
    # folder's config.json says model_type deepseek_v3 (LlamaTokenizerFast would
    # otherwise be rebuilt with a Metaspace pre-tokenizer), and it drops
    # add_bos_token from tokenizer_config.json whenever tokenizer.json exists --
    # as for the real DeepSeek-V3 files.  So check in a scratch copy with a
    # minimal config.json, passing add_bos_token=True explicitly.
    import shutil
    import tempfile
    tmp = tempfile.mkdtemp()
    for fn in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(a.out, fn), tmp)
    cfgp = os.path.join(a.out, "config.json")
    if os.path.exists(cfgp):
        shutil.copy(cfgp, tmp)
    else:
        json.dump({"model_type": "deepseek_v3"}, open(os.path.join(tmp, "config.json"), "w"))
    plain = AutoTokenizer.from_pretrained(tmp)
    print("AutoTokenizer without add_bos_token kwarg adds BOS:",
          plain("x")["input_ids"][0] == 0, "(transformers 5.x ignores the config key)")
    ht = AutoTokenizer.from_pretrained(tmp, add_bos_token=True)
    shutil.rmtree(tmp)
    ids = ht(sample)["input_ids"]
    assert ids[0] == 0 and ids[1:] == enc.ids, (ids[:10], enc.ids[:10])
    assert ht.bos_token_id == 0 and ht.eos_token_id == 1 and ht.pad_token_id == 2
    assert ht.decode(ids, skip_special_tokens=True) == sample
    chat = ht.apply_chat_template(
        [{"role": "system", "content": "Sys."}, {"role": "user", "content": "Hi"},
         {"role": "assistant", "content": "Hello."}, {"role": "user", "content": "More"}],
        tokenize=False, add_generation_prompt=True)
    want = BOS + "Sys." + USER + "Hi" + ASSISTANT + "Hello." + EOS + USER + "More" + ASSISTANT
    assert chat == want, chat
    cids = ht(chat, add_special_tokens=False)["input_ids"]
    assert cids[0] == 0 and cids.count(0) == 1 and 3 in cids and 4 in cids, cids
    print("AutoTokenizer (%s) ok: BOS prepended, specials 0/1/2, chat template ok" %
          type(ht).__name__)


if __name__ == "__main__":
    main()
