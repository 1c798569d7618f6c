#!/usr/bin/env python3
"""Tests of what `colibri serve` offers its operator and llama.cpp/vLLM users
(started by tests/cli/serve.sh): model id and alias, /v1/models/{id}, HEAD,
CORS and preflights, /tokenize, /detokenize, /props, /slots, the request log
and the Prometheus histograms.

Environment (besides test_serve.py's):
  SERVE_URL_E     a server with --alias my/model-x, --cors '*' and --ctx 192
  SERVE_LOG_A     server A's stderr (no --log-prompts); SERVE_LOG_B server B's (--log-prompts)
  SERVE_MODEL_DIR the model directory all serve
  SERVE_CORS_A    the origins server A allows (comma-separated); B has no --cors

Prints one line per test and "N passed, N failed"; exits 1 on any failure.
"""
import http.client
import json
import os
import re
import sys
import time

import openai
from prometheus_client.parser import text_string_to_metric_families

from test_serve import (KEY, MODEL, URL, URL_B, check, client, client_b, complete, expect, host_port, main,
                        open_stream, raw)

URL_E = os.environ["SERVE_URL_E"]
LOG_A = os.environ["SERVE_LOG_A"]
LOG_B = os.environ["SERVE_LOG_B"]
MODEL_DIR = os.environ["SERVE_MODEL_DIR"]
ORIGINS_A = os.environ["SERVE_CORS_A"].split(",")
ALIAS_E = "my/model-x"
CTX_E = 192

with open(os.path.join(MODEL_DIR, "config.json")) as f:
    MODEL_CTX = json.load(f)["max_position_embeddings"]


def request(method, path, url=URL, headers=None, body=None):
    """(status, headers dict with lower-case names, body bytes) over http.client."""
    conn = http.client.HTTPConnection(*host_port(url), timeout=30)
    try:
        h = {"Authorization": "Bearer " + KEY}
        h.update(headers or {})
        h = {k: v for k, v in h.items() if v is not None}
        conn.request(method, path, body=body, headers=h)
        r = conn.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally:
        conn.close()


def post(path, body, url=URL):
    st, res = raw("POST", path, body, url=url)
    return st, res


# ------------------------------------------------------------------ models

def test_model_retrieve_and_context():
    m = client.models.retrieve(MODEL)
    check(m.id == MODEL and m.object == "model", f"{m}")
    d = m.model_dump()
    check(d.get("context_length") == MODEL_CTX and d.get("max_model_len") == MODEL_CTX, f"{d}")
    listed = client.models.list().data[0].model_dump()
    check(listed == d, f"list {listed} != retrieve {d}")


def test_model_retrieve_unknown_is_404():
    err = expect(openai.NotFoundError, lambda: client.models.retrieve("gpt-17"), 404, "model", ("gpt-17", MODEL))
    check(err.get("code") == "model_not_found", f"{err}")
    st, res = raw("GET", "/v1/models/")          # no id: not the retrieve route
    check(st == 404 and "error" in res, f"{st} {res}")


def test_alias_and_slot_context():
    ce = openai.OpenAI(base_url=URL_E + "/v1", api_key=KEY, max_retries=0, timeout=60)
    ids = [m.id for m in ce.models.list().data]
    check(ids == [ALIAS_E], f"ids {ids}")
    st, res = raw("GET", "/v1/models/" + ALIAS_E, url=URL_E)
    check(st == 200 and res["id"] == ALIAS_E, f"{st} {res}")
    check(res["context_length"] == MODEL_CTX and res["max_model_len"] == CTX_E, f"{res}")
    r = ce.chat.completions.create(model=ALIAS_E, messages=[{"role": "user", "content": "hi"}], max_tokens=2)
    check(r.model == ALIAS_E, f"model {r.model}")
    expect(openai.NotFoundError, lambda: ce.completions.create(model=MODEL, prompt="hi", max_tokens=2), 404,
           "model", (MODEL, ALIAS_E))
    # the slot size bounds requests, not the model's context
    expect(openai.BadRequestError, lambda: ce.completions.create(model=ALIAS_E, prompt=[5] * 150, max_tokens=50),
           400, "max_tokens", (str(CTX_E),))


# ------------------------------------------------------------------ HEAD, OPTIONS, CORS

def test_head_on_every_get_endpoint():
    for path in ("/health", "/v1/models", "/v1/models/" + MODEL, "/metrics", "/props", "/slots"):
        gst, gh, gbody = request("GET", path)
        hst, hh, hbody = request("HEAD", path)
        check(gst == 200 and hst == 200, f"{path}: GET {gst}, HEAD {hst}")
        check(hbody == b"", f"HEAD {path} sent a body: {hbody[:80]!r}")
        check(hh.get("content-type") == gh.get("content-type"), f"{path}: {hh} vs {gh}")
        if path != "/metrics" and path != "/slots":     # these change between two requests
            check(hh.get("content-length") == str(len(gbody)), f"HEAD {path} length {hh.get('content-length')}, "
                  f"GET body {len(gbody)}")
    st, h, _ = request("HEAD", "/v1/completions")
    check(st == 405 and "POST" in h.get("allow", ""), f"HEAD on a POST endpoint: {st} {h}")
    st, h, _ = request("HEAD", "/v1/models", headers={"Authorization": None})
    check(st == 401, f"HEAD needs the key like GET: {st}")


def test_options_without_cors_has_no_cors_headers():
    st, h, body = request("OPTIONS", "/v1/chat/completions", url=URL_B,
                          headers={"Origin": "http://example.test", "Access-Control-Request-Method": "POST",
                                   "Access-Control-Request-Headers": "authorization, content-type",
                                   "Authorization": None})
    check(st == 204 and h.get("allow") == "POST, OPTIONS", f"{st} {h}")
    check(not any(k.startswith("access-control-") for k in h), f"CORS headers without --cors: {h}")
    st, h, _ = request("GET", "/v1/models", url=URL_B, headers={"Origin": "http://example.test"})
    check(st == 200 and not any(k.startswith("access-control-") for k in h), f"{st} {h}")
    st, h, _ = request("OPTIONS", "/nothing", url=URL_B)
    check(st == 404, f"OPTIONS on an unknown path: {st}")


def test_cors_preflight_and_responses():
    origin = ORIGINS_A[0]
    st, h, _ = request("OPTIONS", "/v1/chat/completions",
                       headers={"Origin": origin, "Access-Control-Request-Method": "POST",
                                "Access-Control-Request-Headers": "authorization, content-type",
                                "Authorization": None})
    check(st == 204, f"preflight status {st}")
    check(h.get("access-control-allow-origin") == origin, f"{h}")
    check("POST" in h.get("access-control-allow-methods", ""), f"{h}")
    check(h.get("access-control-allow-headers", "").lower() == "authorization, content-type", f"{h}")
    check("origin" in h.get("vary", "").lower() and int(h.get("access-control-max-age", "0")) > 0, f"{h}")
    st, h, _ = request("OPTIONS", "/v1/models", headers={"Origin": ORIGINS_A[1], "Authorization": None})
    check(st == 204 and h.get("access-control-allow-origin") == ORIGINS_A[1], f"second origin: {st} {h}")
    check(h.get("access-control-allow-methods") == "GET, HEAD, OPTIONS", f"{h}")
    # an origin not listed gets no permission
    st, h, _ = request("OPTIONS", "/v1/chat/completions",
                       headers={"Origin": "http://evil.test", "Access-Control-Request-Method": "POST",
                                "Authorization": None})
    check(st == 204 and "access-control-allow-origin" not in h, f"unlisted origin: {st} {h}")
    # answers, errors and streams carry the header for an allowed origin
    st, h, _ = request("GET", "/v1/models", headers={"Origin": origin})
    check(st == 200 and h.get("access-control-allow-origin") == origin, f"GET: {st} {h}")
    st, h, _ = request("GET", "/v1/models", headers={"Origin": origin, "Authorization": None})
    check(st == 401 and h.get("access-control-allow-origin") == origin, f"401: {st} {h}")
    body = json.dumps({"model": MODEL, "prompt": "hi", "max_tokens": 2, "stream": True})
    st, h, out = request("POST", "/v1/completions", headers={"Origin": origin, "Content-Type": "application/json"},
                         body=body)
    check(st == 200 and h.get("access-control-allow-origin") == origin and out.rstrip().endswith(b"[DONE]"),
          f"stream: {st} {h}")
    st, h, _ = request("GET", "/v1/models", headers={"Origin": "http://evil.test"})
    check(st == 200 and "access-control-allow-origin" not in h, f"unlisted origin GET: {h}")


def test_cors_any_origin():
    st, h, _ = request("OPTIONS", "/v1/chat/completions", url=URL_E,
                       headers={"Origin": "http://anything.test", "Access-Control-Request-Method": "POST",
                                "Authorization": None})
    check(st == 204 and h.get("access-control-allow-origin") == "*", f"{st} {h}")
    st, h, _ = request("GET", "/health", url=URL_E, headers={"Origin": "http://anything.test"})
    check(h.get("access-control-allow-origin") == "*" and "vary" not in h, f"{h}")


# ------------------------------------------------------------------ tokenize / detokenize

def test_tokenize_detokenize_round_trip():
    text = "Hello, world! The quick brown fox."
    st, res = post("/tokenize", {"content": text})
    check(st == 200 and isinstance(res.get("tokens"), list) and res["tokens"], f"{st} {res}")
    ids = res["tokens"]
    check(all(isinstance(t, int) for t in ids), f"{ids}")
    st, res = post("/detokenize", {"tokens": ids})
    check(st == 200 and res == {"content": text}, f"{st} {res}")
    # the ids are the server's own: as a prompt they give what the text gives
    st, res = post("/tokenize", {"content": text, "add_special": True})
    with_bos = res["tokens"]
    r_text = complete(text, max_tokens=6)
    r_ids = complete(with_bos, max_tokens=6)
    check(r_text.usage.prompt_tokens == len(with_bos), f"{r_text.usage.prompt_tokens} vs {len(with_bos)}")
    check(r_text.choices[0].text == r_ids.choices[0].text, f"{r_text.choices[0].text!r} vs {r_ids.choices[0].text!r}")
    check(len(with_bos) >= len(ids), f"add_special gave fewer tokens: {with_bos} vs {ids}")
    st, res = post("/detokenize", {"tokens": []})
    check(st == 200 and res == {"content": ""}, f"empty: {st} {res}")


def test_tokenize_pieces_and_special():
    text = "Say hello <｜User｜> once"
    st, res = post("/tokenize", {"content": text, "with_pieces": True})
    check(st == 200, f"{st} {res}")
    pieces = res["tokens"]
    check(all(set(p) == {"id", "piece"} for p in pieces), f"{pieces}")
    check("".join(p["piece"] for p in pieces) == text, f"pieces {pieces}")
    check(any(p["piece"] == "<｜User｜>" for p in pieces), f"special token not parsed: {pieces}")
    st, plain = post("/tokenize", {"content": text, "parse_special": False})
    special_id = next(p["id"] for p in pieces if p["piece"] == "<｜User｜>")
    check(st == 200 and special_id not in plain["tokens"] and len(plain["tokens"]) > len(pieces),
          f"parse_special false: {plain}")
    # a token that is part of a character shows its bytes
    st, res = post("/tokenize", {"content": "é→", "with_pieces": True})
    joined = b"".join(bytes(p["piece"]) if isinstance(p["piece"], list) else p["piece"].encode()
                      for p in res["tokens"])
    check(st == 200 and joined == "é→".encode(), f"{res}")


def test_tokenize_bad_input():
    for body, words in ((b"{bad", ("not valid JSON",)), (b"[1]", ("JSON object",)),
                        (b'{"content": "a\\u0000b"}', ("NUL",))):
        st, res = raw("POST", "/tokenize", body)
        check(st == 400 and all(w in res["error"]["message"] for w in words), f"{body!r}: {st} {res}")
    for body, param in (({}, "content"), ({"content": 5}, "content"), ({"content": "x", "add_special": "yes"},
                                                                          "add_special"),
                        ({"content": "x", "with_pieces": 1}, "with_pieces")):
        st, res = post("/tokenize", body)
        check(st == 400 and res["error"]["param"] == param, f"{body}: {st} {res}")
    st, res = raw("GET", "/tokenize")
    check(st == 405, f"GET /tokenize: {st}")
    st, res = raw("POST", "/tokenize", {"content": "x"}, headers={"Authorization": None})
    check(st == 401, f"/tokenize without the key: {st}")


def test_detokenize_bad_input():
    st, res = raw("POST", "/detokenize", b"{bad")
    check(st == 400 and "not valid JSON" in res["error"]["message"], f"{st} {res}")
    st, res = post("/tokenize", {"content": "x"})
    for body, words in (({"tokens": [1, 999999]}, ("tokens[1]", "[0, ")), ({"tokens": [1, -1]}, ("tokens[1]",)),
                        ({"tokens": [1.5]}, ("tokens[0]",)), ({"tokens": ["a"]}, ("tokens[0]",)),
                        ({"tokens": "1 2"}, ("array",)), ({}, ("missing",))):
        st, res = post("/detokenize", body)
        err = res.get("error", {}) if isinstance(res, dict) else {}
        check(st == 400 and err.get("param") == "tokens" and all(w in err.get("message", "") for w in words),
              f"{body}: {st} {res}")


# ------------------------------------------------------------------ props, slots

def test_props():
    st, p = raw("GET", "/props")
    check(st == 200, f"{st} {p}")
    check(p["model"] == MODEL and p["total_slots"] == 4 and p["context_length"] == MODEL_CTX, f"{p}")
    check(p["n_ctx"] == MODEL_CTX and p["default_generation_settings"]["n_ctx"] == MODEL_CTX, f"{p}")
    check(p["kv_tier"] == "f32" and p["model_path"] == MODEL_DIR, f"{p}")
    check(p["build_info"].startswith("colibri ") and len(p["build_info"]) > 12, f"{p['build_info']}")
    st, p = raw("GET", "/props", url=URL_B)
    check(p["kv_tier"] == "bf16" and p["total_slots"] == 1, f"{p}")
    st, p = raw("GET", "/props", url=URL_E)
    check(p["model"] == ALIAS_E and p["n_ctx"] == CTX_E and p["context_length"] == MODEL_CTX, f"{p}")
    st, _ = raw("GET", "/props", headers={"Authorization": None})
    check(st == 401, f"/props without the key: {st}")


def test_slots_idle_and_processing():
    st, slots = raw("GET", "/slots")
    check(st == 200 and [s["id"] for s in slots] == [0, 1, 2, 3], f"{st} {slots}")
    check(all(s["n_ctx"] == MODEL_CTX and s["state"] in ("idle", "processing") for s in slots), f"{slots}")
    s = open_stream(URL_B, 200)                  # B has one slot
    try:
        st, slots = raw("GET", "/slots", url=URL_B)
        check(st == 200 and len(slots) == 1, f"{st} {slots}")
        sl = slots[0]
        check(sl["state"] == "processing" and sl["is_processing"] is True, f"{sl}")
        check(sl["n_prompt_tokens"] == 3 and sl["n_decoded"] >= 1 and sl["cached_tokens"] >= 3, f"{sl}")
    finally:
        s.close()
    t0 = time.time()
    while time.time() - t0 < 20:
        st, slots = raw("GET", "/slots", url=URL_B)
        if slots[0]["state"] == "idle":
            break
        time.sleep(0.02)
    sl = slots[0]
    check(sl["state"] == "idle" and sl["is_processing"] is False and "n_decoded" not in sl, f"{sl}")
    check(sl["cached_tokens"] > 3, f"the cache is kept after the request: {sl}")


# ------------------------------------------------------------------ the request log

def log_lines(path, needle, timeout=5):
    """Lines of the log holding needle, waiting for one (the line is written once the answer is sent)."""
    t0 = time.time()
    while True:
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = [ln for ln in f if needle in ln]
        if lines or time.time() - t0 > timeout:
            return lines
        time.sleep(0.02)


def test_request_log_line():
    secret = "Zebra quartz oboe"
    r = complete(secret, max_tokens=5, user="log-test")
    u = r.usage
    line = log_lines(LOG_A, f"POST /v1/completions 200 in={u.prompt_tokens} ")
    check(line, "no log line for the completion")
    ln = line[-1]
    check(f"out={u.completion_tokens} " in ln and "ttft_ms=" in ln and "total_ms=" in ln and "finish=" in ln, ln)
    raw("GET", "/health", headers={"Authorization": None})
    check(log_lines(LOG_A, "GET /health 200 total_ms="), "no log line for /health")
    raw("GET", "/v1/nothing")
    check(log_lines(LOG_A, "GET /v1/nothing 404 "), "no log line for a 404")
    with open(LOG_A, encoding="utf-8", errors="replace") as f:
        text = f.read()
    check("Zebra" not in text, "the prompt text is in the log without --log-prompts")
    # a client cannot forge a log line through the path
    request("GET", "/x%0a%5bserve%5d%20forged")
    check(log_lines(LOG_A, "\\x0a[serve]\\x20forged"), "path not escaped in the log")
    with open(LOG_A, encoding="utf-8", errors="replace") as f:
        check(not any(ln.startswith("[serve] forged") for ln in f), "forged log line")


def test_request_log_with_prompts():
    r = client_b.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Walrus tuba"}],
                                         max_tokens=3, temperature=0)
    line = log_lines(LOG_B, "Walrus tuba")
    check(line and "POST /v1/chat/completions 200 " in line[-1], f"{line}")
    ln = line[-1]
    reply = json.dumps(r.choices[0].message.content or "", ensure_ascii=False)
    check(" prompt=\"" in ln and f" reply={reply}" in ln, ln)


# ------------------------------------------------------------------ the chat page

def test_chat_page_served():
    st, h, body = request("GET", "/", headers={"Authorization": None})
    check(st == 200 and h.get("content-type", "").startswith("text/html"), f"{st} {h}")
    with open(os.path.join(os.path.dirname(__file__), "..", "..", "src", "serve", "chat_page.html"), "rb") as f:
        check(body == f.read(), "the page served is not src/serve/chat_page.html (stale build?)")
    text = body.decode()
    for bad in ("http://", "https://", " src=", "@import", "url("):
        check(bad not in text, f"the page refers to something outside itself: {bad!r}")
    hrefs = re.findall(r'href="([^"]*)"', text)
    check(all(h.startswith("data:") for h in hrefs), f"links out of the page: {hrefs}")
    for needed in ("/v1/chat/completions", "AbortController", "include_usage", "id=\"system\"",
                   "id=\"temperature\"", "id=\"top_p\"", "id=\"max_tokens\"", "id=\"stop\""):
        check(needed in text, f"{needed!r} missing from the page")
    st, h, hb = request("HEAD", "/", headers={"Authorization": None})
    check(st == 200 and hb == b"" and h.get("content-length") == str(len(body)), f"HEAD /: {st} {h}")


# ------------------------------------------------------------------ timings

def test_timings_in_responses():
    body = {"model": MODEL, "prompt": [5, 6, 7, 8, 9], "max_tokens": 6, "temperature": 0}
    raw("POST", "/v1/completions", body)                  # leaves the prompt cached in a slot
    st, r = raw("POST", "/v1/completions", body)
    check(st == 200 and "timings" in r, f"{st} {r}")
    t, u = r["timings"], r["usage"]
    cached = u["prompt_tokens_details"]["cached_tokens"]
    check(cached > 0 and t["cache_n"] == cached and t["prompt_n"] == u["prompt_tokens"] - cached, f"{t} {u}")
    check(t["predicted_n"] == u["completion_tokens"] and t["predicted_ms"] >= 0 and t["prompt_ms"] >= 0, f"{t}")
    if t["predicted_n"] > 1 and t["predicted_ms"] > 0:
        rate = (t["predicted_n"] - 1) * 1e3 / t["predicted_ms"]
        check(abs(t["predicted_per_second"] - rate) <= 1e-6 * rate, f"{t}")
    body.update(stream=True, stream_options={"include_usage": True})
    st, h, out = request("POST", "/v1/completions", headers={"Content-Type": "application/json"},
                         body=json.dumps(body))
    chunks = [json.loads(ln[6:]) for ln in out.decode().splitlines() if ln.startswith("data: {")]
    final = [c for c in chunks if c.get("choices") and c["choices"][0].get("finish_reason")]
    check(len(final) == 1 and "timings" in final[0], f"finish chunk: {final}")
    check(final[0]["timings"]["predicted_n"] == chunks[-1]["usage"]["completion_tokens"], f"{final} {chunks[-1]}")


# ------------------------------------------------------------------ metrics

def families(url=URL):
    st, text = raw("GET", "/metrics", url=url)
    check(st == 200, f"/metrics {st}")
    return text, {f.name: f for f in text_string_to_metric_families(text)}


HISTS = ("colibri_time_to_first_token_seconds", "colibri_time_per_output_token_seconds",
         "colibri_e2e_request_latency_seconds", "colibri_request_queue_time_seconds")


def hist_count(fams, name):
    return next(s.value for s in fams[name].samples if s.name == name + "_count")


def wait_idle(timeout=10.0):
    """Until every slot is idle: an earlier test's cancelled request may still be finishing."""
    end = time.time() + timeout
    while time.time() < end:
        st, slots = raw("GET", "/slots")
        if st == 200 and all(sl["state"] == "idle" for sl in slots):
            return
        time.sleep(0.05)
    check(False, "slots still busy")


def test_metrics_histograms_parse():
    wait_idle()
    _, before = families()
    r = complete([5, 6, 7, 8], max_tokens=6, temperature=0)
    text, after = families()
    for name in HISTS:
        f = after.get(name)
        check(f is not None and f.type == "histogram", f"{name}: {f}")
        buckets = [s for s in f.samples if s.name == name + "_bucket"]
        les = [float(s.labels["le"]) for s in buckets]
        check(les == sorted(les) and les[-1] == float("inf") and len(les) > 5, f"{name} bounds {les}")
        counts = [s.value for s in buckets]
        check(counts == sorted(counts), f"{name} buckets not cumulative: {counts}")
        total = hist_count(after, name)
        check(counts[-1] == total, f"{name} +Inf {counts[-1]} != count {total}")
        check(any(s.name == name + "_sum" for s in f.samples), f"{name} has no _sum")
    n = r.usage.completion_tokens
    for name, want in (("colibri_time_to_first_token_seconds", 1), ("colibri_e2e_request_latency_seconds", 1),
                       ("colibri_request_queue_time_seconds", 1), ("colibri_time_per_output_token_seconds", n - 1)):
        d = hist_count(after, name) - hist_count(before, name)
        check(d == want, f"{name}: count +{d}, want +{want}")
    e2e_sum = next(s.value for s in after["colibri_e2e_request_latency_seconds"].samples
                   if s.name.endswith("_sum"))
    check(e2e_sum > 0, "e2e sum is 0")
    # counters end in _total, gauges never do
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split()
            check(kind != "counter" or name.endswith("_total"), f"counter without _total: {line}")
            check(kind != "gauge" or not name.endswith("_total"), f"gauge with _total: {line}")
    check(after["colibri_slots"].type == "gauge", "colibri_slots gauge")
    check(after["colibri_slots"].samples[0].value == 4, f"{after['colibri_slots'].samples}")


if __name__ == "__main__":
    sys.exit(main(globals()))
