"""colibri from Python: a ctypes binding over libcolibri.so (include/colibri.h).

    import colibri
    with colibri.Model("models/colibri-tiny") as m:
        for piece in m.generate("It is a truth", max_tokens=32, temperature=0):
            print(piece, end="", flush=True)
        print(m.chat([{"role": "user", "content": "Hello"}], max_tokens=32).read())

A Model holds the weights, the tokenizer and one session (its KV cache), and
runs one generation at a time from one thread: starting another ends the
one before. Failures raise ColibriError with colibri's own message."""

import ctypes
import json
import os

from . import _ffi
from ._ffi import lib

__all__ = ["ColibriError", "Model", "Stream"]


class ColibriError(Exception):
    """A colibri call failed: code is its negative COLIBRI_E* status, status
    its name ("EINVAL", "EIO", ...), the message colibri's."""

    def __init__(self, code, message):
        self.code = code
        self.status = lib.colibri_status_name(code).decode()
        super().__init__(message)


def _check(rc, err):
    if rc < 0:
        raise ColibriError(rc, err.msg.decode("utf-8", "replace"))
    return rc


def _call(fn, *args):
    """fn(*args, &err), raising on a negative result."""
    err = _ffi.Err()
    return _check(fn(*args, ctypes.byref(err)), err)


def _take_bytes(ptr, n):
    """Copies n bytes from a string colibri malloc'd, then frees it."""
    try:
        return ctypes.string_at(ptr, n) if n else b""
    finally:
        _ffi.libc.free(ptr)


def _bytes(ptr, n):
    return ctypes.string_at(ptr, n) if n else b""


def _ids(tokens):
    return (ctypes.c_int32 * len(tokens))(*tokens)


class Model:
    """A model directory (config.json, *.safetensors, tokenizer.json) loaded
    with one session of n_ctx positions (0: the model's maximum). The other
    keywords are the CLI options of the same names: threads, kv (the cache
    tier), experts/dense/embed (weight formats), ram, device. kv_file keeps
    the cache in a file: its prefix is restored now, save() writes it. A
    directory without tokenizer.json loads too; only logits() of token ids
    work then."""

    def __init__(self, path, *, n_ctx=0, threads=0, kv=None, kv_file=None, experts=None, dense=None,
                 embed=None, ram=None, device=None):
        self._model = self._session = self._tok = self._gen = self._kvf = None
        self._current = None
        enc = lambda s: s.encode() if s is not None else None  # noqa: E731
        model, tok = ctypes.c_void_p(), ctypes.c_void_p()
        _call(lib.colibri_model_probe, path.encode())
        if os.path.exists(os.path.join(path, "tokenizer.json")):
            _call(lib.colibri_tokenizer_load, path.encode(), ctypes.byref(tok))
            self._tok = tok
        mo = _ffi.ModelOpts(n_threads=threads, experts_fmt=enc(experts), dense_fmt=enc(dense),
                            embed_fmt=enc(embed), ram=enc(ram), device=enc(device))
        _call(lib.colibri_model_load, path.encode(), ctypes.byref(mo), ctypes.byref(model))
        self._model = model
        if self._tok:
            _call(lib.colibri_tokenizer_check_model, self._tok, self._model)
        so = _ffi.SessionOpts(n_ctx=n_ctx, kv_tier=enc(kv))
        session = ctypes.c_void_p()
        _call(lib.colibri_session_new, self._model, ctypes.byref(so), ctypes.byref(session))
        self._session = session
        if kv_file is not None:
            kvf = ctypes.c_void_p()
            _call(lib.colibri_kv_file_open, self._session, kv_file.encode(), ctypes.byref(kvf), None)
            self._kvf = kvf
        if self._tok:
            gen = ctypes.c_void_p()
            _call(lib.colibri_gen_new, self._model, self._session, self._tok, ctypes.byref(gen))
            self._gen = gen
        self.vocab = lib.colibri_model_vocab(self._model)

    def close(self):
        """Frees everything (also done when the Model is collected)."""
        self._current = None
        for free, attr in ((lib.colibri_gen_free, "_gen"), (lib.colibri_kv_file_close, "_kvf"),
                           (lib.colibri_session_free, "_session"), (lib.colibri_model_free, "_model"),
                           (lib.colibri_tokenizer_free, "_tok")):
            if getattr(self, attr, None):
                free(getattr(self, attr))
                setattr(self, attr, None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        self.close()

    def _need_tokenizer(self):
        if not self._tok:
            raise ColibriError(-1, "this model directory has no tokenizer.json: only logits() of token ids work")

    @property
    def n_cached(self):
        """Positions in the session's cache."""
        return lib.colibri_session_pos(self._session)

    def tokenize(self, text, *, add_special=True, parse_special=True):
        """The ids of text: BOS/EOS as tokenizer_config.json says with
        add_special; special-token text stays text without parse_special."""
        self._need_tokenizer()
        raw = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else bytes(text)
        flags = (_ffi.ENCODE_ADD_SPECIAL if add_special else 0) | (0 if parse_special else _ffi.ENCODE_NO_PARSE_SPECIAL)
        ptr, n = ctypes.c_void_p(), ctypes.c_size_t()
        _call(lib.colibri_tokenizer_encode, self._tok, raw, len(raw), flags, ctypes.byref(ptr), ctypes.byref(n), None)
        if not n.value:
            return []
        try:
            return list(ctypes.cast(ptr, ctypes.POINTER(ctypes.c_int32))[:n.value])
        finally:
            _ffi.libc.free(ptr)

    def detokenize(self, ids, *, skip_special=False):
        """The text of ids (invalid UTF-8, e.g. half a character, as U+FFFD)."""
        self._need_tokenizer()
        ptr, n = ctypes.c_void_p(), ctypes.c_size_t()
        _call(lib.colibri_tokenizer_decode, self._tok, _ids(ids), len(ids), int(skip_special), ctypes.byref(ptr),
              ctypes.byref(n))
        return _take_bytes(ptr, n.value).decode("utf-8", "replace")

    def render(self, messages, *, tools=None, template_kwargs=None, add_generation_prompt=True):
        """messages (OpenAI-style dicts) through the model's chat template."""
        self._need_tokenizer()
        ptr, n = ctypes.c_void_p(), ctypes.c_size_t()
        dump = lambda v: json.dumps(v).encode() if v is not None else None  # noqa: E731
        _call(lib.colibri_chat_render_json, self._tok, dump(messages), dump(tools), dump(template_kwargs),
              int(add_generation_prompt), ctypes.byref(ptr), ctypes.byref(n))
        return _take_bytes(ptr, n.value).decode("utf-8", "replace")

    def logits(self, prompt, *, all=False):
        """The next-token logits after prompt (text, or a list of ids), a list
        of vocab floats; with all, one such list per prompt position. Runs
        the prompt from an empty cache."""
        ids = self.tokenize(prompt) if isinstance(prompt, str) else list(prompt)
        if not ids:
            raise ColibriError(-1, "logits: the prompt is empty")
        self._current = None
        _call(lib.colibri_session_truncate, self._session, 0)
        rows = len(ids) if all else 1
        out = (ctypes.c_float * (rows * self.vocab))()
        _call(lib.colibri_session_prefill, self._session, _ids(ids), len(ids), out, int(all))
        flat = list(out)
        per = [flat[i * self.vocab:(i + 1) * self.vocab] for i in range(rows)]
        return per if all else per[0]

    def generate(self, prompt, *, max_tokens=128, stop=(), grammar=None, json_schema=None, add_special=True,
                 **sampling):
        """Streams the text after prompt (text, or a list of ids) as a Stream
        of str pieces. sampling: temperature (0: greedy), top_k, top_p, min_p,
        repeat_penalty, repeat_last_n, presence_penalty, frequency_penalty,
        seed; each one left out has the CLI's default. grammar (GBNF text) or
        json_schema (a dict or JSON text) constrain the output. The cache keeps
        what the last generation left: a prompt that extends it prefills only
        the new tokens."""
        ids = self.tokenize(prompt, add_special=add_special) if isinstance(prompt, str) else list(prompt)
        return Stream(self, ids, max_tokens, list(stop), grammar, json_schema, sampling)

    def chat(self, messages, *, tools=None, template_kwargs=None, **kw):
        """generate() after messages rendered with the chat template (which
        holds BOS itself); kw as generate's."""
        text = self.render(messages, tools=tools, template_kwargs=template_kwargs)
        return self.generate(self.tokenize(text, add_special=False), **kw)

    def save(self):
        """Writes the session's cache to the kv_file it was opened with."""
        if not self._kvf:
            raise ColibriError(-1, "save: this Model was opened without kv_file")
        _call(lib.colibri_kv_file_save, self._kvf)


class Stream:
    """One generation: iterate it for the text pieces as they become final
    (each valid UTF-8), or read() the rest at once. Afterwards end says why it
    ended ("eos", "stop", "limit", "context") and tokens holds the ids
    generated."""

    def __init__(self, model, ids, max_tokens, stops, grammar, json_schema, sampling):
        self.end, self.tokens = None, []
        self._model, self._sampler, self._grammar = model, None, None
        model._need_tokenizer()
        so = lib.colibri_sampler_default_opts()
        for name, value in sampling.items():
            if name not in {f[0] for f in _ffi.SamplerOpts._fields_} - {"logit_bias", "n_logit_bias", "grammar"}:
                raise TypeError("generate: unknown sampling option %r" % name)
            setattr(so, name, value)
        try:
            if grammar is not None or json_schema is not None:
                g = ctypes.c_void_p()
                if grammar is not None:
                    raw = grammar.encode()
                    _call(lib.colibri_grammar_new, model._tok, raw, len(raw), ctypes.byref(g))
                else:
                    schema = json_schema if isinstance(json_schema, str) else json.dumps(json_schema)
                    _call(lib.colibri_grammar_from_json_schema, model._tok, schema.encode(), ctypes.byref(g))
                self._grammar = g
                so.grammar = g
            s = ctypes.c_void_p()
            _call(lib.colibri_sampler_new, ctypes.byref(so), model.vocab, ctypes.byref(s))
            self._sampler = s
            self._stops = (ctypes.c_char_p * max(len(stops), 1))(*[x.encode() for x in stops])
            self._opts = _ffi.GenOpts(sampler=s, n_predict=max_tokens, stops=self._stops, n_stops=len(stops),
                                      repair_utf8=1, prompt_in_history=1)
            model._current = self
            _call(lib.colibri_gen_start, model._gen, _ids(ids), len(ids), ctypes.byref(self._opts))
        except BaseException:
            self._release()
            raise

    def _release(self):
        if self._model._current is self:
            self._model._current = None
        if self._sampler:
            lib.colibri_sampler_free(self._sampler)
            self._sampler = None
        if self._grammar:
            lib.colibri_grammar_free(self._grammar)
            self._grammar = None

    def __del__(self):
        self._release()

    def __iter__(self):
        return self

    def __next__(self):
        if self.end is not None:
            raise StopIteration
        if self._model._current is not self:
            raise ColibriError(-1, "this generation was ended by a later call on its Model")
        g = self._model._gen
        step = _ffi.GenStep()
        try:
            while True:
                phase = lib.colibri_gen_phase(g)
                if phase == _ffi.PHASE_PREFILL:
                    _call(lib.colibri_gen_prefill, g, 0)
                elif phase == _ffi.PHASE_FEED:
                    _call(lib.colibri_gen_decode, g)
                elif phase == _ffi.PHASE_SAMPLE:
                    _call(lib.colibri_gen_sample, g, ctypes.byref(step))
                    self.tokens += step.tokens[:step.n_tokens]
                    piece = _bytes(step.text, step.len) + _bytes(step.tail, step.tail_len)
                    if step.end:
                        self.end = lib.colibri_gen_end_name(step.end).decode()
                        self._release()
                    if piece:
                        return piece.decode("utf-8")
                    if self.end is not None:
                        raise StopIteration
                else:
                    raise ColibriError(-1, "generation in phase %d, which cannot go on" % phase)
        except ColibriError:
            self.end = "error"
            self._release()
            raise

    def read(self):
        """The rest of the text."""
        return "".join(self)
