"""The C side of the binding: finds libcolibri.so, declares the structs of
include/colibri.h this package uses, field for field in the header's order,
and each function's argument and result types. Nothing here allocates
model memory; colibri/__init__.py owns the objects."""

import ctypes
import ctypes.util
import os

from ctypes import (POINTER, Structure, c_char, c_char_p, c_float, c_int, c_int32, c_size_t, c_uint,
                    c_uint64, c_void_p)

ERR_MSG_MAX = 1024
ENCODE_ADD_SPECIAL = 1 << 0
ENCODE_NO_PARSE_SPECIAL = 1 << 1
PHASE_PREFILL, PHASE_SAMPLE, PHASE_FEED, PHASE_DONE = 1, 2, 3, 4


class Err(Structure):
    _fields_ = [("code", c_int), ("msg", c_char * ERR_MSG_MAX)]


class ModelOpts(Structure):
    _fields_ = [("n_threads", c_int), ("experts_fmt", c_char_p), ("dense_fmt", c_char_p),
                ("embed_fmt", c_char_p), ("kv_b_f32", c_int), ("lazy_load", c_int), ("ram", c_char_p),
                ("state_dir", c_char_p), ("mpi", c_void_p), ("bf16_act", c_int), ("device", c_char_p),
                ("mtp_fmt", c_char_p)]


class SessionOpts(Structure):
    _fields_ = [("n_ctx", c_int), ("kv_tier", c_char_p), ("kv_rope", c_char_p), ("kv_int8", c_int),
                ("kv_index", c_char_p), ("kv_snapshot_every", c_int), ("kv_snapshots", c_int)]


class SamplerOpts(Structure):
    _fields_ = [("temperature", c_float), ("top_k", c_int), ("top_p", c_float), ("min_p", c_float),
                ("repeat_penalty", c_float), ("repeat_last_n", c_int), ("presence_penalty", c_float),
                ("frequency_penalty", c_float), ("seed", c_uint64), ("logit_bias", c_void_p),
                ("n_logit_bias", c_size_t), ("grammar", c_void_p)]


class GenOpts(Structure):
    _fields_ = [("sampler", c_void_p), ("n_predict", c_int), ("stops", POINTER(c_char_p)), ("n_stops", c_size_t),
                ("repair_utf8", c_int), ("prompt_in_history", c_int), ("cancel", c_void_p),
                ("cancel_user", c_void_p), ("n_draft", c_int), ("draft_auto", c_int), ("draft_hook", c_void_p),
                ("draft_user", c_void_p)]


class GenStep(Structure):
    _fields_ = [("n_tokens", c_int), ("tokens", POINTER(c_int32)), ("text", c_void_p), ("len", c_size_t),
                ("tail", c_void_p), ("tail_len", c_size_t), ("end", c_int), ("logits", POINTER(c_float))]


def _candidates():
    """Where the library may be: $COLIBRI_LIB, then this checkout's `make
    shared` output, then the system's (make install)."""
    if os.environ.get("COLIBRI_LIB"):
        yield os.environ["COLIBRI_LIB"]
        return
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    for sub in ("build/pic", "build/mpi-pic"):
        yield os.path.join(root, sub, "libcolibri.so.0.2.0")
    found = ctypes.util.find_library("colibri")
    if found:
        yield found


def _open():
    # libgomp reads its wait policy once, when it is loaded: spinning idle
    # workers cost several-fold on a busy machine (include/colibri.h, "Threads")
    os.environ.setdefault("OMP_WAIT_POLICY", "passive")
    os.environ.setdefault("GOMP_SPINCOUNT", "1000")
    tried = []
    for path in _candidates():
        if os.path.sep in path and not os.path.exists(path):
            tried.append(path)
            continue
        return ctypes.CDLL(path)
    raise OSError("libcolibri.so not found (tried %s): build it with `make shared`, install it with "
                  "`make install`, or name it in COLIBRI_LIB" % (", ".join(tried) or "nothing"))


lib = _open()
libc = ctypes.CDLL(None)
libc.free.argtypes = [c_void_p]
libc.free.restype = None

P = c_void_p
E = POINTER(Err)
_PROTOS = {
    "colibri_status_name": (c_char_p, [c_int]),
    "colibri_model_load": (c_int, [c_char_p, POINTER(ModelOpts), POINTER(P), E]),
    "colibri_model_probe": (c_int, [c_char_p, E]),
    "colibri_model_free": (None, [P]),
    "colibri_model_vocab": (c_int, [P]),
    "colibri_session_new": (c_int, [P, POINTER(SessionOpts), POINTER(P), E]),
    "colibri_session_free": (None, [P]),
    "colibri_session_truncate": (c_int, [P, c_int, E]),
    "colibri_session_pos": (c_int, [P]),
    "colibri_session_prefill": (c_int, [P, POINTER(c_int32), c_int, POINTER(c_float), c_int, E]),
    "colibri_tokenizer_load": (c_int, [c_char_p, POINTER(P), E]),
    "colibri_tokenizer_free": (None, [P]),
    "colibri_tokenizer_check_model": (c_int, [P, P, E]),
    "colibri_tokenizer_encode": (c_int, [P, c_char_p, c_size_t, c_uint, POINTER(P), POINTER(c_size_t),
                                         POINTER(c_size_t), E]),
    "colibri_tokenizer_decode": (c_int, [P, POINTER(c_int32), c_size_t, c_int, POINTER(P), POINTER(c_size_t), E]),
    "colibri_chat_render_json": (c_int, [P, c_char_p, c_char_p, c_char_p, c_int, POINTER(P), POINTER(c_size_t), E]),
    "colibri_sampler_default_opts": (SamplerOpts, []),
    "colibri_sampler_new": (c_int, [POINTER(SamplerOpts), c_int32, POINTER(P), E]),
    "colibri_sampler_free": (None, [P]),
    "colibri_grammar_new": (c_int, [P, c_char_p, c_size_t, POINTER(P), E]),
    "colibri_grammar_from_json_schema": (c_int, [P, c_char_p, POINTER(P), E]),
    "colibri_grammar_free": (None, [P]),
    "colibri_gen_new": (c_int, [P, P, P, POINTER(P), E]),
    "colibri_gen_free": (None, [P]),
    "colibri_gen_start": (c_int, [P, POINTER(c_int32), c_int, POINTER(GenOpts), E]),
    "colibri_gen_prefill": (c_int, [P, c_int, E]),
    "colibri_gen_sample": (c_int, [P, POINTER(GenStep), E]),
    "colibri_gen_decode": (c_int, [P, E]),
    "colibri_gen_phase": (c_int, [P]),
    "colibri_gen_end_name": (c_char_p, [c_int]),
    "colibri_kv_file_open": (c_int, [P, c_char_p, POINTER(P), c_void_p, E]),
    "colibri_kv_file_save": (c_int, [P, E]),
    "colibri_kv_file_close": (None, [P]),
}
for _name, (_res, _args) in _PROTOS.items():
    _f = getattr(lib, _name)
    _f.restype, _f.argtypes = _res, _args
