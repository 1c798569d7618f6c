"""The Python binding (python/colibri) against independent answers: the
colibri command's output for the same prompt, seed and options (tokenize,
run, run --chat, run --stop), and transformers' logits for an oracle fixture
(tests/oracle/deepseek_v3_tiny/reference.safetensors). Needs only the
standard library; COLIBRI names the command, COLIBRI_LIB the library.
    python3 tests/python/test_binding.py"""

import json
import os
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import colibri  # noqa: E402

CLI = os.environ.get("COLIBRI", "build/colibri")
TINY = "models/colibri-tiny"
FIXTURE = "tests/oracle/deepseek_v3_tiny"
failed = 0


def check(cond, what):
    global failed
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failed += 1


def cli(*args):
    r = subprocess.run([CLI, *args], capture_output=True, check=True)
    return r.stdout.decode()


def cli_run(*args):
    """run's text: stdout without the newline it adds at the end."""
    out = cli("run", "-m", TINY, "--no-display-prompt", *args)
    assert out.endswith("\n"), out
    return out[:-1]


def fixture_logits(path, name):
    """A tensor of a safetensors file, as rows of floats (F32 only)."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        head = json.loads(f.read(n))
        t = head[name]
        assert t["dtype"] == "F32"
        a, b = t["data_offsets"]
        f.seek(8 + n + a)
        data = struct.unpack("<%df" % ((b - a) // 4), f.read(b - a))
    rows, cols = t["shape"]
    return [list(data[i * cols:(i + 1) * cols]) for i in range(rows)]


PROMPT = "It is a truth universally acknowledged, that a single man"

with colibri.Model(TINY, threads=1) as m:
    # tokenize / detokenize
    text = "Hello, wörld! \u00e9t\u00e9 \U0001f600 <|end|>  two  spaces"
    ids = m.tokenize(text)
    check(ids == json.loads(cli("tokenize", "-m", TINY, "-p", text)), "tokenize equals colibri tokenize")
    check(m.tokenize(text, add_special=False) == json.loads(cli("tokenize", "-m", TINY, "--no-special", "-p", text)),
          "tokenize(add_special=False) equals colibri tokenize --no-special")
    check(m.detokenize(m.tokenize(text, add_special=False)) == text, "detokenize(tokenize(text)) is the text")
    check(m.detokenize(ids) == cli("tokenize", "-m", TINY, "--decode", "-p", json.dumps(ids)),
          "detokenize equals colibri tokenize --decode")

    # greedy and seeded generation, stop strings
    want = cli_run("-p", PROMPT, "-n", "40", "--temp", "0")
    s = m.generate(PROMPT, max_tokens=40, temperature=0)
    pieces = list(s)
    check("".join(pieces) == want and len(pieces) > 1, "greedy generate streams run --temp 0's text (%d pieces)" % len(pieces))
    check(s.end == "limit" and len(s.tokens) == 40, "the stream ends by 'limit' after 40 tokens (%s, %d)" % (s.end, len(s.tokens)))
    want = cli_run("-p", PROMPT, "-n", "40", "--seed", "7")
    check(m.generate(PROMPT, max_tokens=40, seed=7).read() == want, "seed 7 at run's default sampling equals run --seed 7")
    want = cli_run("-p", PROMPT, "-n", "40", "--temp", "1.3", "--top-k", "0", "--top-p", "0.9", "--min-p", "0",
                   "--seed", "3", "--repeat-penalty", "1.2")
    got = m.generate(PROMPT, max_tokens=40, temperature=1.3, top_k=0, top_p=0.9, min_p=0, seed=3,
                     repeat_penalty=1.2).read()
    check(got == want, "temperature/top_k/top_p/min_p/repeat_penalty/seed equal run's options")
    full = cli_run("-p", PROMPT, "-n", "40", "--temp", "0")
    stop = full[10:14]
    s = m.generate(PROMPT, max_tokens=40, temperature=0, stop=[stop])
    check(s.read() == cli_run("-p", PROMPT, "-n", "40", "--temp", "0", "--stop", stop) and s.end == "stop",
          "stop=[%r] equals run --stop (end %s)" % (stop, s.end))

    # chat through the model's template
    msgs = [{"role": "system", "content": "Answer briefly."}, {"role": "user", "content": "Where is Netherfield?"}]
    want = cli_run("-p", msgs[1]["content"], "--system", msgs[0]["content"], "-n", "32", "--temp", "0")
    check(m.chat(msgs, max_tokens=32, temperature=0).read() == want, "chat equals run --chat --system, greedy")

    # logits: their argmax is run's first greedy token
    lg = m.logits(PROMPT)
    first = cli_run("-p", PROMPT, "-n", "1", "--temp", "0")
    check(len(lg) == m.vocab and m.detokenize([max(range(m.vocab), key=lg.__getitem__)]) == first,
          "logits' argmax is run's first greedy token %r" % first)

    # errors carry colibri's message
    try:
        m.detokenize([m.vocab + 5])
        check(False, "an id past the vocabulary raises")
    except colibri.ColibriError as e:
        check(e.status == "ERANGE" and str(m.vocab + 5) in str(e), "an id past the vocabulary: %s: %s" % (e.status, e))
    try:
        m.generate(PROMPT, json_schema={"type": "object", "properties": {"a": {"type": "integer", "bogus": 1}}})
        check(False, "an unsupported schema keyword raises")
    except colibri.ColibriError as e:
        check("bogus" in str(e), "an unsupported schema keyword is named: %s" % e)
    try:
        m.generate(PROMPT, temprature=0)
        check(False, "a misspelt sampling option raises")
    except TypeError as e:
        check("temprature" in str(e), "a misspelt sampling option is named: %s" % e)

    # a JSON-schema-constrained generation parses and fits the schema
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"], "additionalProperties": False}
    out = m.generate("Give a number as JSON: ", max_tokens=64, seed=1, json_schema=schema).read()
    try:
        obj = json.loads(out)
        check(list(obj) == ["n"] and isinstance(obj["n"], int), "json_schema output %r fits the schema" % out)
    except ValueError:
        check(False, "json_schema output %r parses" % out)

try:
    colibri.Model("no/such/model")
    check(False, "a missing model directory raises")
except colibri.ColibriError as e:
    check("no/such/model" in str(e), "a missing model directory is named: %s" % e)

# logits of token ids against transformers (a directory without tokenizer.json)
with colibri.Model(FIXTURE, threads=1) as m:
    ref = json.load(open(os.path.join(FIXTURE, "reference.json")))
    toks = ref["sequences"][0]["tokens"]
    want = fixture_logits(os.path.join(FIXTURE, "reference.safetensors"), "logits.0")
    got = m.logits(toks, all=True)
    d = max(abs(a - b) for ga, wa in zip(got, want) for a, b in zip(ga, wa))
    check(len(got) == len(want) and d < 1e-4, "logits(all=True) of %d tokens within %.1e of transformers" % (len(toks), d))
    check(max(abs(a - b) for a, b in zip(m.logits(toks[:5]), want[4])) < 1e-4,
          "logits() of a prefix is that position's row (after a longer prompt: the cache starts over)")
    try:
        m.tokenize("x")
        check(False, "tokenize without tokenizer.json raises")
    except colibri.ColibriError as e:
        check("tokenizer.json" in str(e), "tokenize without tokenizer.json says so")

# a KV file: the second model restores the first one's cache and goes on the same
with tempfile.TemporaryDirectory() as tmp:
    kv = os.path.join(tmp, "c.kv")
    with colibri.Model(TINY, threads=1, kv_file=kv) as m:
        a = m.generate(PROMPT, max_tokens=16, temperature=0).read()
        m.save()
        kept = m.n_cached
    with colibri.Model(TINY, threads=1, kv_file=kv) as m:
        restored = m.n_cached
        b = m.generate(PROMPT, max_tokens=16, temperature=0).read()
    check(kept > 0 and restored == kept and a == b, "kv_file: %d positions saved, %d restored, same text" % (kept, restored))

print("%d failed" % failed)
sys.exit(1 if failed else 0)
