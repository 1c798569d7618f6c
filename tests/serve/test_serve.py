#!/usr/bin/env python3
"""Tests of `colibri serve` against live servers (started by tests/cli/serve.sh).

Environment:
  SERVE_URL      the main server (4 slots, API key SERVE_KEY, --max-body 64 KiB, DeepSeek-V3's
                 Jinja template from tests/tok/chat by --chat-template)
  SERVE_URL_B    a server with 1 slot, a queue of 1 and a per-step delay, for
                 the queue-full, disconnect and cancellation tests
  SERVE_KEY      the API key of both
  SERVE_MODEL    the model id both serve

The model is a random oracle fixture: the tests check the server's behaviour
(shapes, agreement between paths, limits), never the text itself.
Prints one line per test and "N passed, N failed"; exits 1 on any failure.
"""
import concurrent.futures as cf
import http.client
import json
import math
import os
import re
import socket
import sys
import threading
import time
import traceback
import urllib.error
import urllib.request

import openai

URL = os.environ["SERVE_URL"]
URL_B = os.environ["SERVE_URL_B"]
KEY = os.environ["SERVE_KEY"]
MODEL = os.environ["SERVE_MODEL"]

client = openai.OpenAI(base_url=URL + "/v1", api_key=KEY, max_retries=0, timeout=60)
client_b = openai.OpenAI(base_url=URL_B + "/v1", api_key=KEY, max_retries=0, timeout=60)

PROMPTS = ["Hello, world!", "Say hello", "Count to five", "Write a haiku about the sea",
           "What is the capital of France?", "One two three", "The quick brown fox", "Once upon a time"]


# ------------------------------------------------------------------ helpers

def check(cond, msg):
    if not cond:
        raise AssertionError(msg)


def raw(method, path, body=None, headers=None, url=URL):
    """(status, parsed JSON or text) of one request, auth added unless given."""
    h = {"Authorization": "Bearer " + KEY, "Content-Type": "application/json"}
    h.update(headers or {})
    h = {k: v for k, v in h.items() if v is not None}
    data = body if isinstance(body, (bytes, type(None))) else json.dumps(body).encode()
    req = urllib.request.Request(url + path, data=data, method=method, headers=h)
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            status, text = r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        status, text = e.code, e.read().decode()
    try:
        return status, json.loads(text)
    except ValueError:
        return status, text


def host_port(url):
    m = re.match(r"http://([^:/]+):(\d+)", url)
    return m.group(1), int(m.group(2))


def socket_request(raw_bytes, url=URL, read_all=True):
    """Sends raw bytes, returns (status, response bytes)."""
    s = socket.create_connection(host_port(url), timeout=30)
    try:
        try:
            s.sendall(raw_bytes)
        except (BrokenPipeError, ConnectionResetError):
            pass            # the server may answer and close before reading everything
        out = b""
        while True:
            try:
                chunk = s.recv(65536)
            except ConnectionResetError:
                break
            if not chunk:
                break
            out += chunk
            if not read_all and b"\r\n\r\n" in out:
                break
        status = int(out.split(b" ", 2)[1]) if out.startswith(b"HTTP/") else 0
        return status, out
    finally:
        s.close()


def metrics(url=URL):
    st, text = raw("GET", "/metrics", url=url)
    check(st == 200, f"/metrics status {st}")
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, val = line.rsplit(" ", 1)
            out[name] = float(val)
    return out


def wait_metric(url, name, pred, timeout=20):
    t0 = time.time()
    while time.time() - t0 < timeout:
        v = metrics(url).get(name)
        if v is not None and pred(v):
            return v
        time.sleep(0.02)
    raise AssertionError(f"{name} never satisfied the condition (last {metrics(url).get(name)})")


def complete(prompt, **kw):
    kw.setdefault("max_tokens", 12)
    kw.setdefault("temperature", 0)
    return client.completions.create(model=MODEL, prompt=prompt, **kw)


def chat(content, **kw):
    kw.setdefault("max_tokens", 12)
    kw.setdefault("temperature", 0)
    return client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": content}], **kw)


def stream_completion_text(prompt, **kw):
    kw.setdefault("max_tokens", 12)
    kw.setdefault("temperature", 0)
    text, finish, lps = "", None, []
    for ch in client.completions.create(model=MODEL, prompt=prompt, stream=True, **kw):
        if not ch.choices:
            continue
        c = ch.choices[0]
        text += c.text
        if c.logprobs and c.logprobs.tokens:
            lps += list(zip(c.logprobs.tokens, c.logprobs.token_logprobs))
        if c.finish_reason:
            finish = c.finish_reason
    return text, finish, lps


def stream_chat_text(content, cl=None, **kw):
    kw.setdefault("max_tokens", 12)
    kw.setdefault("temperature", 0)
    text, finish, lps, usage = "", None, [], None
    cl = cl or client
    for ch in cl.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": content}],
                                         stream=True, **kw):
        if ch.usage:
            usage = ch.usage
        if not ch.choices:
            continue
        c = ch.choices[0]
        text += c.delta.content or ""
        if c.logprobs and c.logprobs.content:
            lps += [(t.token, t.logprob, [(a.token, a.logprob) for a in t.top_logprobs]) for t in c.logprobs.content]
        if c.finish_reason:
            finish = c.finish_reason
    return text, finish, lps, usage


def stop_case():
    """(prompt, greedy text, stop string): a 3-character stop string taken from
    inside the greedy continuation, free of U+FFFD (which stands for bytes
    that are not UTF-8 and so can never match a stop string)."""
    for p in PROMPTS:
        text = complete(p, max_tokens=24).choices[0].text
        for i in range(2, len(text) - 3):
            stop = text[i:i + 3]
            if "\ufffd" not in stop and "\ufffd" not in text[:text.index(stop) + 3]:
                return p, text, stop
    raise AssertionError("no prompt gives a usable greedy continuation")


# ------------------------------------------------------------------ API shape

def test_models():
    ms = client.models.list()
    ids = [m.id for m in ms.data]
    check(ids == [MODEL], f"models {ids}")


def test_health_without_key():
    st, body = raw("GET", "/health", headers={"Authorization": None})
    check(st == 200 and body.get("status") == "ok", f"{st} {body}")


def test_completion_basic():
    r = complete("Hello, world!", max_tokens=8)
    c = r.choices[0]
    check(r.object == "text_completion" and r.model == MODEL, f"{r.object} {r.model}")
    check(isinstance(c.text, str) and c.finish_reason in ("stop", "length"), f"{c}")
    u = r.usage
    check(u.prompt_tokens > 0 and 1 <= u.completion_tokens <= 8, f"usage {u}")
    check(u.total_tokens == u.prompt_tokens + u.completion_tokens, f"usage {u}")
    if c.finish_reason == "length":
        check(u.completion_tokens == 8, f"length finish with {u.completion_tokens} tokens")


def test_completion_greedy_is_deterministic_and_reuses_prefix():
    a = complete("The quick brown fox", max_tokens=10)
    b = complete("The quick brown fox", max_tokens=10)
    check(a.choices[0].text == b.choices[0].text, "greedy outputs differ")
    cached = b.usage.prompt_tokens_details.cached_tokens
    check(cached == b.usage.prompt_tokens - 1, f"cached {cached} of {b.usage.prompt_tokens} prompt tokens")


def test_slot_choice_prefers_longest_prefix():
    # A, then two unrelated prompts (each goes to the least recently used slot,
    # never A's), then A again: it must find A's slot, not the LRU one.
    a = list(range(100, 141))
    complete(a, max_tokens=2)
    complete(list(range(200, 241)), max_tokens=2)
    complete(list(range(300, 341)), max_tokens=2)
    r = complete(a + [7, 8], max_tokens=2)
    cached = r.usage.prompt_tokens_details.cached_tokens
    check(cached >= len(a), f"cached {cached}, want at least {len(a)} (A's slot was not chosen)")


def test_completion_stream_equals_nonstream():
    for p in PROMPTS[:3]:
        r = complete(p, max_tokens=12)
        text, finish, _ = stream_completion_text(p, max_tokens=12)
        check(text == r.choices[0].text, f"{p!r}: stream {text!r} vs {r.choices[0].text!r}")
        check(finish == r.choices[0].finish_reason, f"finish {finish} vs {r.choices[0].finish_reason}")


def test_chat_basic_and_stream():
    r = chat("Say hello", max_tokens=10)
    c = r.choices[0]
    check(r.object == "chat.completion" and c.message.role == "assistant", f"{r}")
    check(isinstance(c.message.content, str) and c.finish_reason in ("stop", "length"), f"{c}")
    text, finish, _, usage = stream_chat_text("Say hello", max_tokens=10, stream_options={"include_usage": True})
    check(text == c.message.content, f"stream {text!r} vs {c.message.content!r}")
    check(finish == c.finish_reason, f"{finish} vs {c.finish_reason}")
    check(usage is not None and usage.completion_tokens == r.usage.completion_tokens, f"usage {usage}")
    check(usage.prompt_tokens == r.usage.prompt_tokens, f"usage {usage} vs {r.usage}")


def test_chat_multi_turn_and_content_parts():
    msgs = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": "Hello."},
            {"role": "user", "content": [{"type": "text", "text": "Count "}, {"type": "text", "text": "to five"}]}]
    r = client.chat.completions.create(model=MODEL, messages=msgs, max_tokens=5, temperature=0)
    msgs[3]["content"] = "Count to five"
    r2 = client.chat.completions.create(model=MODEL, messages=msgs, max_tokens=5, temperature=0)
    check(r.choices[0].message.content == r2.choices[0].message.content, "content parts differ from the string")
    check(r.usage.prompt_tokens == r2.usage.prompt_tokens, "prompt tokens differ")


def test_token_id_prompt():
    ids = [10, 20, 30, 40, 50]
    r = complete(ids, max_tokens=4)
    check(r.usage.prompt_tokens == len(ids), f"prompt_tokens {r.usage.prompt_tokens}")
    r2 = complete([ids], max_tokens=4)
    check(r2.choices[0].text == r.choices[0].text, "[[ids]] differs from [ids]")


def test_max_tokens_one():
    r = complete("Once upon a time", max_tokens=1)
    check(r.usage.completion_tokens == 1, f"{r.usage}")


def test_seed_reproducible():
    a = complete("Once upon a time", temperature=1.0, top_p=0.9, seed=1234, max_tokens=12)
    b = complete("Once upon a time", temperature=1.0, top_p=0.9, seed=1234, max_tokens=12)
    check(a.choices[0].text == b.choices[0].text, "same seed, different text")


def test_logprobs_completion():
    r = complete("Hello, world!", max_tokens=8, logprobs=3)
    lp = r.choices[0].logprobs
    n = len(lp.tokens)
    check(n >= 1 and len(lp.token_logprobs) == n and len(lp.top_logprobs) == n and len(lp.text_offset) == n,
          f"lengths {lp}")
    check(n in (r.usage.completion_tokens, r.usage.completion_tokens - 1), f"{n} tokens vs usage {r.usage}")
    check("".join(lp.tokens).replace("\ufffd", "") == r.choices[0].text.replace("\ufffd", "") or
          "\ufffd" in r.choices[0].text, "tokens do not spell the text")
    for tok, l, top in zip(lp.tokens, lp.token_logprobs, lp.top_logprobs):
        check(l <= 0 and 1 <= len(top) <= 3, f"{tok} {l} {top}")
        check(sum(math.exp(v) for v in top.values()) <= 1 + 1e-4, f"top probabilities over 1: {top}")
        # greedy: the chosen token is the most likely one
        check(abs(max(top.values()) - l) < 1e-5, f"greedy token {tok} {l} is not the top {top}")
    check(lp.text_offset == sorted(lp.text_offset) and lp.text_offset[0] == 0, f"offsets {lp.text_offset}")


def test_logprobs_completion_stream_equals_nonstream():
    r = complete("Count to five", max_tokens=8, logprobs=2)
    lp = r.choices[0].logprobs
    _, _, slp = stream_completion_text("Count to five", max_tokens=8, logprobs=2)
    check([t for t, _ in slp] == lp.tokens, f"tokens {slp} vs {lp.tokens}")
    check(all(abs(a - b) < 1e-6 for (_, a), b in zip(slp, lp.token_logprobs)), "logprobs differ")


def test_logprobs_chat():
    r = chat("Say hello", max_tokens=6, logprobs=True, top_logprobs=2)
    content = r.choices[0].logprobs.content
    check(len(content) >= 1, "no logprobs")
    for t in content:
        check(t.logprob <= 0 and len(t.top_logprobs) == 2, f"{t}")
        check(bytes(t.bytes).decode("utf-8", "replace") == t.token, f"bytes vs token {t}")
        check(t.top_logprobs[0].logprob >= t.top_logprobs[1].logprob, "top_logprobs not sorted")
        check(abs(t.top_logprobs[0].logprob - t.logprob) < 1e-5, "greedy token is not the top one")
    _, _, slp, _ = stream_chat_text("Say hello", max_tokens=6, logprobs=True, top_logprobs=2)
    check([(t, round(l, 5)) for t, l, _ in slp] == [(t.token, round(t.logprob, 5)) for t in content],
          "streamed logprobs differ")
    r0 = chat("Say hello", max_tokens=3, logprobs=True)
    check(all(len(t.top_logprobs) == 0 for t in r0.choices[0].logprobs.content), "top_logprobs without asking")


def test_stop_strings():
    p, text, stop = stop_case()
    cut = text[:text.index(stop)]
    r = complete(p, max_tokens=24, stop=[stop])
    check(r.choices[0].text == cut and r.choices[0].finish_reason == "stop",
          f"stop {stop!r}: {r.choices[0].text!r} ({r.choices[0].finish_reason}), want {cut!r}")
    s_text, s_finish, _ = stream_completion_text(p, max_tokens=24, stop=stop)
    check(s_text == cut and s_finish == "stop", f"stream stop: {s_text!r} {s_finish}")
    r = complete(p, max_tokens=24, stop=["\x01never\x02", stop])
    check(r.choices[0].text == cut, "second stop string ignored")


def test_concurrent_streams_equal_sequential():
    reqs = []
    for i in range(16):
        p = PROMPTS[i % len(PROMPTS)] + (" again" * (i // len(PROMPTS)))
        reqs.append((p, 16 if i % 2 else 10))
    seq = [stream_chat_text(p, max_tokens=n)[:2] for p, n in reqs]
    with cf.ThreadPoolExecutor(16) as ex:
        par = list(ex.map(lambda pn: stream_chat_text(pn[0], max_tokens=pn[1])[:2], reqs))
    for i, (a, b) in enumerate(zip(seq, par)):
        check(a == b, f"request {i}: sequential {a!r} vs concurrent {b!r}")


# ------------------------------------------------------------------ errors via the client

def expect(exc, fn, status, param=None, words=()):
    try:
        fn()
    except exc as e:
        check(e.status_code == status, f"status {e.status_code}, want {status}")
        body = e.body if isinstance(e.body, dict) else {}
        err = body.get("error", body)
        if param is not None:
            check(err.get("param") == param, f"param {err.get('param')!r}, want {param!r}: {err}")
        for w in words:
            check(w in err.get("message", ""), f"{w!r} not in {err.get('message')!r}")
        return err
    raise AssertionError(f"no {exc.__name__}")


def test_error_negative_max_tokens():
    expect(openai.BadRequestError, lambda: complete("hi", max_tokens=-1), 400, "max_tokens")


def test_error_huge_max_tokens():
    err = expect(openai.BadRequestError, lambda: complete([1, 2, 3], max_tokens=10**9), 400, "max_tokens",
                 ("256", "3 prompt tokens", str(10**9)))
    check(err.get("code") == "context_length_exceeded", f"{err}")
    long_prompt = list(range(10, 250))      # 240 tokens; the test servers' context is 256
    expect(openai.BadRequestError, lambda: complete(long_prompt, max_tokens=17), 400, "max_tokens", ("257",))
    complete(long_prompt, max_tokens=16)
    expect(openai.BadRequestError, lambda: complete(list(range(10, 266)), max_tokens=1), 400, "prompt", ("256",))


def test_error_wrong_types():
    expect(openai.BadRequestError, lambda: complete("hi", temperature="hot"), 400, "temperature", ("number",))
    expect(openai.BadRequestError, lambda: complete("hi", max_tokens=2.5), 400, "max_tokens", ("integer",))
    expect(openai.BadRequestError, lambda: complete("hi", stop=5), 400, "stop")
    expect(openai.BadRequestError, lambda: complete("hi", top_p=1.5), 400, "top_p")
    expect(openai.BadRequestError, lambda: complete(5), 400, "prompt")
    expect(openai.BadRequestError, lambda: complete([1, 99999]), 400, "prompt", ("prompt[1]",))
    expect(openai.BadRequestError, lambda: complete("hi", stream="yes"), 400, "stream")
    expect(openai.BadRequestError, lambda: chat("hi", logprobs=True, top_logprobs=50), 400, "top_logprobs")


def test_error_missing_messages():
    expect(openai.BadRequestError,
           lambda: client.chat.completions.create(model=MODEL, messages=[], max_tokens=3), 400, "messages")
    st, body = raw("POST", "/v1/chat/completions", {"model": MODEL, "max_tokens": 3})
    check(st == 400 and body["error"]["param"] == "messages", f"{st} {body}")
    st, body = raw("POST", "/v1/chat/completions", {"model": MODEL, "messages": [{"role": "wizard", "content": "x"}]})
    check(st == 400 and "wizard" in body["error"]["message"], f"{st} {body}")
    st, body = raw("POST", "/v1/completions", {"model": MODEL, "max_tokens": 3})
    check(st == 400 and body["error"]["param"] == "prompt", f"{st} {body}")


def test_error_n_beyond_the_slots():
    expect(openai.BadRequestError, lambda: complete("hi", n=5), 400, "n", ("4 slots",))


def test_error_unknown_model():
    expect(openai.NotFoundError, lambda: client.completions.create(model="gpt-17", prompt="hi", max_tokens=2), 404,
           "model", ("gpt-17",))


def test_error_bad_auth():
    bad = openai.OpenAI(base_url=URL + "/v1", api_key="wrong-key", max_retries=0)
    expect(openai.AuthenticationError, lambda: bad.models.list(), 401)
    expect(openai.AuthenticationError,
           lambda: bad.completions.create(model=MODEL, prompt="hi", max_tokens=2), 401)
    st, body = raw("GET", "/v1/models", headers={"Authorization": None})
    check(st == 401 and body["error"]["code"] == "invalid_api_key", f"{st} {body}")
    st, _ = raw("GET", "/metrics", headers={"Authorization": "Basic " + KEY})
    check(st == 401, f"metrics with Basic auth: {st}")


# ------------------------------------------------------------------ malformed HTTP

def test_invalid_json():
    for body in (b"{bad json", b"", b"[1, 2]", b"null", b'{"prompt": "x",}', b"\xff\xfe{}",
                 b'{"prompt": "x"}}', b'{"prompt": "x"}{"prompt": "y"}', b'{"prompt": "x"}\x00junk',
                 b'{"prompt": "x", "model": "' + MODEL.encode() + b'\\u0000evil"}', b'{"prompt": "x\\u0000y"}'):
        st, res = raw("POST", "/v1/completions", body)
        check(st == 400 and "error" in res, f"{body!r}: {st} {res}")


def test_oversized_body():
    big = {"model": MODEL, "prompt": "x" * (70 * 1024), "max_tokens": 1}
    st, res = raw("POST", "/v1/completions", big)
    check(st == 413, f"declared big body: {st} {res}")
    # chunked, so the size is only known while reading
    head = (f"POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\n"
            "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n").encode()
    chunk = b"x" * 8192
    body = b"".join(b"%x\r\n" % len(chunk) + chunk + b"\r\n" for _ in range(10)) + b"0\r\n\r\n"
    st, out = socket_request(head + body)
    check(st == 413, f"chunked big body: {st} {out[:200]!r}")
    # a huge declared length is refused before any body is sent
    st, out = socket_request((f"POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\n"
                              "Content-Length: 99999999999\r\n\r\n").encode(), read_all=False)
    check(st == 413, f"huge Content-Length: {st} {out[:200]!r}")


def test_unknown_path_and_method():
    st, res = raw("GET", "/v1/nothing")
    check(st == 404, f"{st} {res}")
    st, res = raw("GET", "/v1/completions")
    check(st == 405, f"{st} {res}")
    st, res = raw("DELETE", "/v1/models")
    check(st == 405, f"{st} {res}")


def test_garbage_request_line():
    st, out = socket_request(b"HELLO\r\n\r\n")
    check(st in (0, 400, 405, 505), f"garbage: {st} {out[:100]!r}")
    st, res = raw("GET", "/health", headers={"Authorization": None})
    check(st == 200, "server unwell after garbage")


def test_metrics_text():
    before = metrics()
    complete("Hello, world!", max_tokens=3)
    after = metrics()
    for name in ("colibri_queue_depth", "colibri_slots_busy", "colibri_slots", "colibri_kv_bytes",
                 "colibri_prompt_tokens_total", "colibri_generated_tokens_total"):
        check(name in after, f"{name} missing")
    key = 'colibri_requests_total{endpoint="completions"}'
    check(after[key] == before[key] + 1, f"{key}: {before[key]} -> {after[key]}")
    check(after["colibri_generated_tokens_total"] > before["colibri_generated_tokens_total"], "no tokens counted")
    check(after["colibri_slots"] == 4 and after["colibri_kv_bytes"] > 0, f"{after}")


# ------------------------------------------------------------------ queue, disconnect (server B)

def open_stream(url, max_tokens):
    """Starts a streaming completion on a raw socket; returns it after the first data chunk."""
    body = json.dumps({"model": MODEL, "prompt": [5, 6, 7], "max_tokens": max_tokens, "temperature": 0,
                       "stream": True}).encode()
    s = socket.create_connection(host_port(url), timeout=30)
    s.sendall((f"POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\n"
               f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n").encode() + body)
    buf = b""
    while b"data: " not in buf:
        chunk = s.recv(4096)
        check(chunk, "stream closed before the first chunk")
        buf += chunk
    check(buf.startswith(b"HTTP/1.1 200"), f"stream status: {buf[:100]!r}")
    return s


def test_disconnect_cancels_and_frees_slot():
    before = metrics(URL_B)["colibri_requests_cancelled_total"]
    s = open_stream(URL_B, 200)
    check(metrics(URL_B)["colibri_slots_busy"] == 1, "slot not busy during the stream")
    s.close()
    wait_metric(URL_B, "colibri_slots_busy", lambda v: v == 0)
    after = metrics(URL_B)["colibri_requests_cancelled_total"]
    check(after == before + 1, f"cancelled {before} -> {after}")
    # the slot works again
    r = client_b.completions.create(model=MODEL, prompt=[5, 6, 7], max_tokens=2, temperature=0)
    check(r.usage.completion_tokens >= 1, "slot unusable after a disconnect")


def test_queue_full_429_and_nonstream_disconnect():
    s = open_stream(URL_B, 200)                       # holds the only slot
    results = {}

    def queued():
        try:
            results["b"] = client_b.completions.create(model=MODEL, prompt=[8, 9], max_tokens=3, temperature=0)
        except Exception as e:      # noqa: BLE001 - reported below
            results["b"] = e

    t = threading.Thread(target=queued)
    t.start()
    wait_metric(URL_B, "colibri_queue_depth", lambda v: v == 1)
    expect(openai.RateLimitError,
           lambda: client_b.completions.create(model=MODEL, prompt=[8, 9], max_tokens=3), 429)
    s.close()                                          # frees the slot: the queued request runs
    t.join(30)
    check(not t.is_alive(), "queued request never finished")
    check(isinstance(results.get("b"), openai.types.Completion), f"queued request: {results.get('b')!r}")
    # a non-streaming client that leaves while queued or running is cancelled too
    s = open_stream(URL_B, 200)
    body = json.dumps({"model": MODEL, "prompt": [8, 9], "max_tokens": 100}).encode()
    c = socket.create_connection(host_port(URL_B), timeout=30)
    c.sendall((f"POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\n"
               f"Content-Length: {len(body)}\r\n\r\n").encode() + body)
    wait_metric(URL_B, "colibri_queue_depth", lambda v: v == 1)
    before = metrics(URL_B)["colibri_requests_cancelled_total"]
    c.close()
    s.close()
    wait_metric(URL_B, "colibri_requests_cancelled_total", lambda v: v == before + 2)
    wait_metric(URL_B, "colibri_slots_busy", lambda v: v == 0)
    wait_metric(URL_B, "colibri_queue_depth", lambda v: v == 0)


# ------------------------------------------------------------------ sampling extensions

def vocab_size():
    """The served vocabulary, from the range the server names for an id past it."""
    err = expect(openai.BadRequestError, lambda: complete("hi", max_tokens=1, logit_bias={"99999999": 1}), 400,
                 "logit_bias", ("[0, ",))
    return int(re.search(r"\[0, (\d+)\)", err["message"]).group(1))


def first_text(prompt, bias=None, **kw):
    return complete(prompt, max_tokens=1, temperature=0, logit_bias=bias or {}, **kw).choices[0].text


def test_logit_bias_bans_and_forces_the_greedy_token():
    n = vocab_size()
    check(n > 100, f"vocab {n}")
    prompt = next((p for p in PROMPTS if first_text(p)), None)
    check(prompt is not None, "no prompt gives a visible first token")
    g = first_text(prompt)
    # find the greedy token's id by banning halves of the vocabulary (-100 removes a token)
    lo, hi = 0, n
    while hi - lo > 1:
        mid = (lo + hi) // 2
        banned = {str(i): -100 for i in range(lo, mid)}
        if first_text(prompt, banned) != g:
            hi = mid
        else:
            lo = mid
    x = lo
    check(first_text(prompt, {str(x): -100}) != g, f"banning id {x} did not change the greedy token {g!r}")
    check(first_text(prompt, {str((x + 1) % n): -100}) == g, "banning another id changed the greedy token")
    check(first_text(prompt, {str(x): 5}) == g, "a positive bias on the greedy token changed it")
    # +100 forces a token whatever the prompt or the temperature
    y = next(i for i in range(n) if i != x and first_text(prompt, {str(i): 100}))
    forced = first_text(prompt, {str(y): 100})
    other = complete(PROMPTS[-1], max_tokens=3, temperature=1.2, seed=5, logit_bias={str(y): 100}).choices[0].text
    check(other == forced * 3, f"forced id {y}: {other!r} is not 3 x {forced!r}")
    r = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hi"}], max_tokens=2,
                                       temperature=0, logit_bias={str(y): 100})
    check(r.choices[0].message.content == forced * 2, f"chat forced: {r.choices[0].message.content!r}")


def test_top_k_and_min_p_reach_the_sampler():
    for p in PROMPTS[:3]:
        greedy = complete(p, max_tokens=10, temperature=0).choices[0].text
        for seed in (1, 2, 3):
            k1 = complete(p, max_tokens=10, temperature=1.5, seed=seed, extra_body={"top_k": 1}).choices[0].text
            check(k1 == greedy, f"top_k 1 at temperature 1.5 (seed {seed}) gave {k1!r}, greedy {greedy!r}")
            m1 = complete(p, max_tokens=10, temperature=1.5, seed=seed, extra_body={"min_p": 1.0}).choices[0].text
            check(m1 == greedy, f"min_p 1 at temperature 1.5 (seed {seed}) gave {m1!r}, greedy {greedy!r}")
    # without them the same seeds sample something else at least once
    p = PROMPTS[0]
    greedy = complete(p, max_tokens=10, temperature=0).choices[0].text
    free = [complete(p, max_tokens=10, temperature=1.5, seed=s).choices[0].text for s in (1, 2, 3)]
    check(any(f != greedy for f in free), "temperature 1.5 never left the greedy path: the check above proves nothing")
    # the CLI's defaults are reachable: temperature 0.8, top_k 40, top_p 0.95, min_p 0.05
    a = complete(p, max_tokens=8, temperature=0.8, top_p=0.95, seed=9, extra_body={"top_k": 40, "min_p": 0.05})
    b = complete(p, max_tokens=8, temperature=0.8, top_p=0.95, seed=9, extra_body={"top_k": 40, "min_p": 0.05})
    check(a.choices[0].text == b.choices[0].text, "same seed and options, other text")


def test_repetition_penalty():
    # a random model's greedy text repeats tokens; a large penalty changes it
    base = {p: complete(p, max_tokens=24, temperature=0).choices[0].text for p in PROMPTS}
    pen = {p: complete(p, max_tokens=24, temperature=0, extra_body={"repetition_penalty": 50}).choices[0].text
           for p in PROMPTS}
    check(any(base[p] != pen[p] for p in PROMPTS), "repetition_penalty 50 changed no greedy output")
    p = next(p for p in PROMPTS if base[p] != pen[p])
    alias = complete(p, max_tokens=24, temperature=0, extra_body={"repeat_penalty": 50}).choices[0].text
    check(alias == pen[p], "repeat_penalty (llama-server's name) differs from repetition_penalty")
    one = complete(p, max_tokens=24, temperature=0, extra_body={"repetition_penalty": 1}).choices[0].text
    check(one == base[p], "repetition_penalty 1 is not 'off'")


def test_sampling_refusals():
    expect(openai.BadRequestError, lambda: complete("hi", logit_bias={"abc": 1}), 400, "logit_bias", ("'abc'",))
    expect(openai.BadRequestError, lambda: complete("hi", logit_bias={"5": 500}), 400, "logit_bias", ("[-100, 100]",))
    expect(openai.BadRequestError, lambda: complete("hi", extra_body={"top_k": 2.5}), 400, "top_k")
    expect(openai.BadRequestError, lambda: complete("hi", extra_body={"min_p": 2}), 400, "min_p")
    expect(openai.BadRequestError, lambda: complete("hi", extra_body={"repetition_penalty": 0}), 400,
           "repetition_penalty")
    expect(openai.BadRequestError, lambda: complete("hi", extra_body={"repetition_penalty": 1.1, "repeat_penalty": 1.2}),
           400, "repeat_penalty", ("disagree",))
    for name, val in (("typical_p", 0.5), ("mirostat", 2), ("dry_multiplier", 0.8)):
        expect(openai.BadRequestError, lambda: complete("hi", extra_body={name: val}), 400, name, ("not supported",))
    complete("hi", max_tokens=1, extra_body={"typical_p": 1, "mirostat": 0})   # neutral values pass
    expect(openai.BadRequestError, lambda: chat("hi", n=9), 400, "n")


# ------------------------------------------------------------------ structured output

# Bounded schemas: every instance is short, so even this random model finishes
# one within max_tokens; the grammar makes it valid.
PERSON = {"type": "object", "properties": {
    "name": {"type": "string", "maxLength": 8},
    "age": {"type": "integer"},
    "mood": {"enum": ["happy", "sad", "calm"]},
    "tags": {"type": "array", "items": {"type": "string", "enum": ["x", "y"]}, "maxItems": 3},
    "pet": {"anyOf": [{"$ref": "#/$defs/Pet"}, {"type": "null"}]},
    "ok": {"type": "boolean"}},
    "required": ["name", "age", "mood", "tags", "ok"], "additionalProperties": False,
    "$defs": {"Pet": {"type": "object", "properties": {"kind": {"enum": ["cat", "dog"]}, "legs": {"enum": [2, 4]}},
                      "required": ["kind", "legs"], "additionalProperties": False}}}


def check_person(d):
    check(isinstance(d, dict) and set(d) <= set(PERSON["properties"]), f"keys {d}")
    for k in PERSON["required"]:
        check(k in d, f"required {k} missing: {d}")
    check(isinstance(d["name"], str) and len(d["name"]) <= 8, f"name {d}")
    check(isinstance(d["age"], int) and not isinstance(d["age"], bool), f"age {d}")
    check(d["mood"] in ("happy", "sad", "calm"), f"mood {d}")
    check(isinstance(d["tags"], list) and len(d["tags"]) <= 3 and all(t in ("x", "y") for t in d["tags"]), f"tags {d}")
    check(isinstance(d["ok"], bool), f"ok {d}")
    pet = d.get("pet")
    check(pet is None or (pet.get("kind") in ("cat", "dog") and pet.get("legs") in (2, 4)), f"pet {d}")


def test_json_schema_every_time():
    fmt = {"type": "json_schema", "json_schema": {"name": "person", "schema": PERSON, "strict": True}}
    for i in range(30):
        r = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": f"Person {i}"}],
                                           max_tokens=200, temperature=1.0, seed=i, response_format=fmt)
        c = r.choices[0]
        check(c.finish_reason == "stop", f"request {i}: finish {c.finish_reason}: {c.message.content!r}")
        check_person(json.loads(c.message.content))
    # streamed: the concatenated deltas are an instance too
    text = ""
    for ch in client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "stream"}],
                                             max_tokens=200, temperature=1.0, seed=99, response_format=fmt,
                                             stream=True):
        if ch.choices and ch.choices[0].delta.content:
            text += ch.choices[0].delta.content
    check_person(json.loads(text))


def test_pydantic_structured_output():
    from typing import List, Literal, Optional

    import pydantic

    class Pet(pydantic.BaseModel):
        kind: Literal["cat", "dog"]
        legs: Literal[2, 4]

    class Person(pydantic.BaseModel):
        name: str = pydantic.Field(max_length=8)
        age: int
        mood: Literal["happy", "sad", "calm"]
        pets: List[Pet] = pydantic.Field(max_length=2)
        nick: Optional[Literal["al", "bo"]]
    for i in range(10):
        r = client.chat.completions.parse(model=MODEL, messages=[{"role": "user", "content": f"p{i}"}],
                                          response_format=Person, max_tokens=240, temperature=1.0, seed=i)
        p = r.choices[0].message.parsed
        check(isinstance(p, Person), f"request {i}: not parsed: {r.choices[0].message.content!r}")


def test_json_object_and_grammar():
    for i in range(10):
        r = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "json"}], max_tokens=120,
                                           temperature=0.7, seed=i, response_format={"type": "json_object"},
                                           logit_bias={"1": 0})
        c = r.choices[0]
        if c.finish_reason == "stop":
            check(isinstance(json.loads(c.message.content), dict), f"json_object {i}: {c.message.content!r}")
        else:   # cut by max_tokens: still a prefix that starts an object
            check(c.message.content.lstrip().startswith("{"), f"json_object {i}: {c.message.content!r}")
    gbnf = 'root ::= "yes" | "no" | "maybe" ws\nws ::= " "{0,2}'
    for i in range(5):
        t = complete("Answer:", max_tokens=8, temperature=1.0, seed=i, extra_body={"grammar": gbnf}).choices[0].text
        check(t.rstrip(" ") in ("yes", "no", "maybe"), f"grammar {i}: {t!r}")
    t = complete("Digits:", max_tokens=6, temperature=0, extra_body={"grammar": "root ::= [0-9]+"}).choices[0]
    check(re.fullmatch(r"[0-9]+", t.text) and t.finish_reason == "length", f"digits: {t.text!r} {t.finish_reason}")


def test_structured_output_refusals():
    def fmt(schema):
        return {"type": "json_schema", "json_schema": {"name": "x", "schema": schema}}
    expect(openai.BadRequestError, lambda: chat("x", response_format=fmt({"type": "string", "pattern": "(?<=a)b"})), 400,
           "response_format", ("'pattern'", "lookaround"))
    expect(openai.BadRequestError,
           lambda: chat("x", response_format=fmt({"type": "object", "properties": {"n": {"type": "number", "minimum": 0.5}}})),
           400, "response_format", ("properties.n", "not a whole number"))
    loop = {"$ref": "#/$defs/A", "$defs": {"A": {"$ref": "#/$defs/B"}, "B": {"anyOf": [{"$ref": "#/$defs/A"}]}}}
    expect(openai.BadRequestError, lambda: chat("x", response_format=fmt(loop)), 400, "response_format", ("$ref loop",))
    expect(openai.BadRequestError, lambda: chat("x", response_format={"type": "xml"}), 400, "response_format", ("'xml'",))
    expect(openai.BadRequestError, lambda: complete("x", extra_body={"grammar": "root ::= [^\\x00-\\U0010FFFF]"}), 400,
           "grammar", ("cannot be satisfied",))
    expect(openai.BadRequestError, lambda: complete("x", extra_body={"grammar": "root ::= undefined-rule"}), 400,
           "grammar", ("undefined-rule",))
    expect(openai.BadRequestError, lambda: chat("x", response_format={"type": "json_object"},
                                                extra_body={"grammar": "root ::= \"a\""}), 400, "grammar", ("not both",))
    chat("still serving", max_tokens=2)


# ------------------------------------------------------------------ tools

WEATHER_TOOL = {"type": "function", "function": {"name": "get_weather", "description": "Weather in a city",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}


def gbnf_literal(text):
    return "root ::= " + json.dumps(text, ensure_ascii=False)


def forced_reply(text, **kw):
    """A chat reply forced to `text` by a grammar, with tools offered."""
    return client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Weather in Paris?"}],
                                          tools=[WEATHER_TOOL], max_tokens=230, temperature=0,
                                          extra_body={"grammar": gbnf_literal(text)}, **kw)


def test_tool_history_reaches_the_prompt():
    # (the test model's context is 256 tokens and its small vocabulary spells the
    # tool markers byte by byte, so the call and the result are checked apart)
    base = [{"role": "user", "content": "Hi"}]
    call = base + [{"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}]
    result = base + [{"role": "tool", "tool_call_id": "c1", "content": "18"}]
    n = [client.chat.completions.create(model=MODEL, messages=msgs, tools=[WEATHER_TOOL], max_tokens=1,
                                        temperature=0).usage.prompt_tokens for msgs in (base, call, result)]
    check(n[1] > n[0] + 10 and n[2] > n[0] + 10, f"tool call / result not rendered: prompt tokens {n}")


def test_tool_calls_parsed_from_the_reply():
    v3 = ("<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n"
          "{\"city\": \"Paris\"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>")
    v31 = "Ok.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{\"city\": \"Oslo\"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>"
    hermes = ("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Lima\"}}\n</tool_call>\n"
              "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}}\n</tool_call>")
    for text, content, cities in ((v3, None, ["Paris"]), (v31, "Ok.", ["Oslo"]), (hermes, None, ["Lima", "Rome"])):
        r = forced_reply(text)
        c = r.choices[0]
        check(c.finish_reason == "tool_calls", f"finish {c.finish_reason}: {c.message}")
        check(c.message.content == content, f"content {c.message.content!r}")
        calls = c.message.tool_calls or []
        check([t.function.name for t in calls] == ["get_weather"] * len(cities), f"calls {calls}")
        check([json.loads(t.function.arguments)["city"] for t in calls] == cities, f"arguments {calls}")
        check(len({t.id for t in calls}) == len(calls), "tool call ids repeat")
    # a reply that does not parse is returned as content, with finish "stop"
    broken = "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{city: Paris\n```<｜tool▁call▁end｜>"
    c = forced_reply(broken).choices[0]
    check(c.finish_reason == "stop" and c.message.content == broken and not c.message.tool_calls, f"{c}")
    # without tools in the request, the same text is just content
    r = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "x"}], max_tokens=230,
                                       temperature=0, extra_body={"grammar": gbnf_literal(v3)})
    check(r.choices[0].message.content == v3 and not r.choices[0].message.tool_calls, f"{r.choices[0]}")


def test_tool_refusals():
    msgs = [{"role": "user", "content": "x"}]

    def tools_req(tools=(WEATHER_TOOL,), **kw):
        return lambda: client.chat.completions.create(model=MODEL, messages=msgs, tools=list(tools), max_tokens=2, **kw)
    expect(openai.BadRequestError, tools_req([{"type": "function"}]), 400, "tools", ("tools[0]",))
    bad_name = dict(WEATHER_TOOL, function=dict(WEATHER_TOOL["function"], name="get weather"))
    expect(openai.BadRequestError, tools_req([bad_name]), 400, "tools", ("tools[0].function.name",))
    expect(openai.BadRequestError, tools_req([WEATHER_TOOL, WEATHER_TOOL]), 400, "tools", ("tools[1]", "get_weather"))
    expect(openai.BadRequestError, tools_req(tool_choice={"type": "function", "function": {"name": "nope"}}), 400,
           "tool_choice", ("'nope'", "not in 'tools'"))
    expect(openai.BadRequestError, tools_req(tool_choice="always"), 400, "tool_choice", ("required",))
    expect(openai.BadRequestError, tools_req((), tool_choice="required"), 400, "tool_choice", ("'tools'",))
    expect(openai.BadRequestError, tools_req(parallel_tool_calls=False), 400, "parallel_tool_calls")
    expect(openai.BadRequestError, tools_req(tool_choice="required", response_format={"type": "json_object"}), 400,
           "tool_choice", ("not both",))
    expect(openai.BadRequestError, tools_req(stream=True, logprobs=True), 400, "logprobs")
    patterned = dict(WEATHER_TOOL, function=dict(WEATHER_TOOL["function"], parameters={
        "type": "object", "properties": {"city": {"type": "string", "pattern": "^(?=[A-Z])"}}}))
    expect(openai.BadRequestError, tools_req([patterned], tool_choice="required"),
           400, "tools", ("tools[0].function.parameters", "'pattern'"))
    # auto never compiles the schema: the same tool is fine there
    client.chat.completions.create(model=MODEL, messages=msgs, tools=[patterned], max_tokens=2)
    bad_hist = msgs + [{"role": "assistant", "content": None, "tool_calls": [{"id": "1", "type": "function",
                                                                              "function": {"name": "f"}}]}]
    st, body = raw("POST", "/v1/chat/completions", {"model": MODEL, "messages": bad_hist, "max_tokens": 2})
    check(st == 400 and "tool_calls[0]" in body["error"]["message"], f"{st} {body}")
    chat("still serving", max_tokens=2)
    # server B runs the built-in renderer (its model ships no template): tools are refused, not dropped
    expect(openai.BadRequestError, lambda: client_b.chat.completions.create(model=MODEL, messages=msgs,
                                                                              tools=[WEATHER_TOOL], max_tokens=2),
           400, "tools", ("renders no tools",))


CITY_TOOL = {"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string", "maxLength": 12}, "unit": {"enum": ["c", "f"]}},
    "required": ["city", "unit"]}}}
TIME_TOOL = {"type": "function", "function": {"name": "get_time", "parameters": {
    "type": "object", "properties": {"tz": {"type": "integer"}, "dst": {"type": "boolean"}}, "required": ["tz"]}}}


def check_arguments(call):
    """The call's arguments are a JSON object valid for its tool's schema."""
    args = json.loads(call.function.arguments)
    check(isinstance(args, dict), f"arguments {call.function.arguments!r}")
    if call.function.name == "get_weather":
        check(set(args) == {"city", "unit"} and isinstance(args["city"], str) and len(args["city"]) <= 12 and
              args["unit"] in ("c", "f"), f"get_weather arguments {args}")
    else:
        check(call.function.name == "get_time" and "tz" in set(args) <= {"tz", "dst"} and
              isinstance(args["tz"], int) and isinstance(args.get("dst", False), bool), f"get_time arguments {args}")


def test_tool_choice_required_and_named_are_enforced():
    kw = dict(model=MODEL, messages=[{"role": "user", "content": "Hi"}], tools=[CITY_TOOL, TIME_TOOL], max_tokens=220)
    # the test model, left to itself, calls nothing
    free = client.chat.completions.create(temperature=0, **kw).choices[0]
    check(not free.message.tool_calls and free.finish_reason != "tool_calls", f"unprompted call: {free.message}")
    named = {"type": "function", "function": {"name": "get_weather"}}
    timed = {"type": "function", "function": {"name": "get_time"}}
    seen = set()
    for choice, names in (("required", {"get_weather", "get_time"}), (named, {"get_weather"}), (timed, {"get_time"})):
        for temp, seed in ((0, 0), (1.0, 1), (1.0, 2), (1.0, 3)):
            c = client.chat.completions.create(tool_choice=choice, parallel_tool_calls=False, temperature=temp,
                                               seed=seed, **kw).choices[0]
            check(c.finish_reason == "tool_calls", f"{choice} t={temp}: finish {c.finish_reason}: {c.message}")
            calls = c.message.tool_calls or []
            check(len(calls) == 1 and calls[0].function.name in names, f"{choice}: calls {calls}")
            check_arguments(calls[0])
            seen.add(calls[0].function.name)
    check(seen == {"get_weather", "get_time"}, f"names seen {seen}")


def stream_accumulated(**kw):
    """The final completion the openai client's stream accumulator builds, and the chunks."""
    from openai.lib.streaming.chat import ChatCompletionStreamState
    state, chunks = ChatCompletionStreamState(), []
    for ch in client.chat.completions.create(stream=True, **kw):
        state.handle_chunk(ch)
        chunks.append(ch)
    return state.get_final_completion().choices[0], chunks


def check_tool_chunks(chunks):
    """OpenAI's shape: per call index, a first delta with id, type and name (arguments ""), then arguments only."""
    begun = set()
    for ch in chunks:
        for d in (ch.choices[0].delta.tool_calls or []) if ch.choices else []:
            if d.index not in begun:
                check(d.id and d.type == "function" and d.function.name and d.function.arguments == "",
                      f"first delta of call {d.index}: {d}")
                check(d.index == len(begun), f"call index {d.index} after {len(begun)}")
                begun.add(d.index)
            else:
                check(d.id is None and d.function.name is None and d.function.arguments, f"later delta: {d}")
    return len(begun)


def test_tool_calls_streamed():
    v3 = ("Hm.\n<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>f\n```json\n{\"a\": 1}\n```"
          "<｜tool▁call▁end｜><｜tool▁calls▁end｜>")
    v31 = "Ok.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{\"city\": \"Oslo\"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>"
    hermes = ("<tool_call>\n{\"name\": \"f\", \"arguments\": {\"city\": \"Lima\"}}\n</tool_call>\n"
              "<tool_call>\n{\"name\": \"g\", \"arguments\": {}}\n</tool_call>")
    broken = "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{city: Paris\n```<｜tool▁call▁end｜>"
    thinking = "<think>Weather needs a call.</think>\n\n" + hermes
    glm = "Sure.\n<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Oslo</arg_value>\n</tool_call>"
    qwen_coder = "<tool_call>\n<function=get_weather>\n<parameter=city>\n42\n</parameter>\n</function>\n</tool_call>"
    for text, n_calls in ((v3, 1), (v31, 1), (hermes, 2), (thinking, 2), (broken, 0), ("plain <tool", 0),
                          (glm, 1), (qwen_coder, 1)):
        whole = forced_reply(text).choices[0]
        kw = dict(model=MODEL, messages=[{"role": "user", "content": "Weather in Paris?"}], tools=[WEATHER_TOOL],
                  max_tokens=230, temperature=0, extra_body={"grammar": gbnf_literal(text)})
        got, chunks = stream_accumulated(**kw)
        check(got.finish_reason == whole.finish_reason, f"finish {got.finish_reason} vs {whole.finish_reason}")
        check((got.message.content or None) == (whole.message.content or None),
              f"content {got.message.content!r} vs {whole.message.content!r}")
        want = [(t.id, t.function.name, t.function.arguments) for t in whole.message.tool_calls or []]
        check(len(want) == n_calls, f"{text[:20]!r}: {len(want)} calls in the whole reply")
        if text in (glm, qwen_coder):   # the tool's schema types city as a string, even "42"
            check(want[0][1:] == ("get_weather", '{"city":"Oslo"}' if text == glm else '{"city":"42"}'), f"{want}")
        # tool_choice auto: a malformed call never shows up as a (partial) streamed call
        check(len(got.message.tool_calls or []) == n_calls, f"{text[:20]!r}: streamed calls {got.message.tool_calls}")
        if n_calls:
            check([(t.id, t.function.name, t.function.arguments) for t in got.message.tool_calls or []] == want,
                  f"streamed calls {got.message.tool_calls} vs {want}")
            check(check_tool_chunks(chunks) == n_calls, "tool-call chunks")
    # a required call, streamed, equals the same call unstreamed
    kw = dict(model=MODEL, messages=[{"role": "user", "content": "Hi"}], tools=[CITY_TOOL, TIME_TOOL],
              tool_choice={"type": "function", "function": {"name": "get_weather"}}, parallel_tool_calls=False,
              max_tokens=220, temperature=0)
    whole = client.chat.completions.create(**kw).choices[0]
    got, chunks = stream_accumulated(**kw)
    check(got.finish_reason == "tool_calls" == whole.finish_reason and check_tool_chunks(chunks) == 1, f"{got}")
    check(got.message.tool_calls[0].function.arguments == whole.message.tool_calls[0].function.arguments,
          f"{got.message.tool_calls} vs {whole.message.tool_calls}")
    check(sum(1 for ch in chunks if ch.choices and (ch.choices[0].delta.tool_calls or [None])[0] is not None) > 3,
          "the arguments came in one piece, not streamed")


# ------------------------------------------------------------------ reasoning

def test_reasoning_content_split():
    body = {"model": MODEL, "messages": [{"role": "user", "content": "3*7?"}], "max_tokens": 120, "temperature": 0,
            "grammar": gbnf_literal("<think>3*7 is 21.</think>\n\nIt is 21.")}
    st, r = raw("POST", "/v1/chat/completions", body)
    msg = r["choices"][0]["message"]
    check(st == 200 and msg.get("reasoning_content") == "3*7 is 21." and msg["content"] == "It is 21.", f"{st} {msg}")
    # cut off inside the reasoning: all of it is reasoning
    st, r = raw("POST", "/v1/chat/completions", dict(body, max_tokens=12))
    msg = r["choices"][0]["message"]
    check(st == 200 and msg["content"] == "" and msg.get("reasoning_content") and
          r["choices"][0]["finish_reason"] == "length", f"{st} {r}")
    # no <think>: nothing to split
    st, r = raw("POST", "/v1/chat/completions", dict(body, grammar=gbnf_literal("plain")))
    check(st == 200 and "reasoning_content" not in r["choices"][0]["message"], f"{r}")
    # streamed: reasoning_content and content deltas add up to the same split
    for text, want_r, want_c in (("<think>3*7 is 21.</think>\n\nIt is 21.", "3*7 is 21.", "It is 21."),
                                 ("<think>only thinking", "only thinking", ""), ("<thin", None, "<thin"),
                                 ("plain </think> text", None, "plain </think> text")):
        r_txt, c_txt = "", ""
        for ch in client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "3*7?"}],
                                                 max_tokens=120, temperature=0, stream=True,
                                                 extra_body={"grammar": gbnf_literal(text)}):
            if ch.choices:
                d = ch.choices[0].delta
                r_txt += (d.model_extra or {}).get("reasoning_content") or ""
                c_txt += d.content or ""
        st, r = raw("POST", "/v1/chat/completions", dict(body, grammar=gbnf_literal(text)))
        msg = r["choices"][0]["message"]
        check(msg.get("reasoning_content") == want_r and msg["content"] == want_c, f"non-stream {text!r}: {msg}")
        check(r_txt.strip() == (want_r or "") and c_txt == want_c, f"stream {text!r}: {r_txt!r} / {c_txt!r}")
    # server B runs with --reasoning-format none: the text stays content
    st, r = raw("POST", "/v1/chat/completions", body, url=URL_B)
    msg = r["choices"][0]["message"]
    check(st == 200 and "reasoning_content" not in msg and msg["content"].startswith("<think>"), f"{st} {msg}")


# ------------------------------------------------------------------ runner

def main(namespace=None):
    """Runs the test_* functions of namespace (default: this module's)."""
    tests = [(n, f) for n, f in (namespace or globals()).items() if n.startswith("test_") and callable(f)]
    only = sys.argv[1:]
    passed = failed = 0
    for name, fn in tests:
        if only and name not in only:
            continue
        t0 = time.time()
        try:
            fn()
            passed += 1
            print(f"ok   {name} ({time.time() - t0:.2f} s)", flush=True)
        except Exception:  # noqa: BLE001 - every failure is reported
            failed += 1
            print(f"FAIL {name}\n{traceback.format_exc()}", flush=True)
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
