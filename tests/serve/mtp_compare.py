#!/usr/bin/env python3
"""Speculative decoding in the server's batched slots is lossless (run by
tests/cli/serve_mtp.sh). Sends the same set of requests, all at once so that
the slots decode together, to a server without drafts (the first URL) and to
servers with drafts (the others), and requires every response to be the same
bytes once the per-request fields are dropped (id, created, timings, and the
cached-prompt count, which depends on which slot took a request): greedy and
seeded sampling, completions and chat, logprobs, streamed and whole. Streamed
replies must have one chunk per token, as without drafts. Then reads
/metrics: a drafting server counts drafts made and kept per position, one
without drafts shows no mtp series. A server with --mtp auto (named after
--auto) keeps drafting only while its timed forwards say it pays, so how many
of its drafts are kept depends on the machine's load: only that it probed and
that its counts are consistent is required of it.

Usage: mtp_compare.py URL_OFF URL_DRAFTING... [--auto URL_AUTO]   (stdlib only)
Prints one line per check and "N passed, N failed"; exits 1 on any failure.
"""
import json
import sys
import threading
import urllib.request

PROMPTS = [
    "Sir Walter Elliot, of Kellynch Hall, in Somersetshire, was a man who",
    "She had been forced into prudence in her youth, she learned romance as she grew",
    "Captain Wentworth had no fortune. He had been lucky in his profession, but",
    "The Musgroves, like their houses, were in a state of alteration, perhaps of",
    "Anne had not wanted this visit to Uppercross, to learn that",
    "Lady Russell was",
]

passed = failed = 0


def check(ok, what):
    global passed, failed
    print(("ok   " if ok else "FAIL ") + what)
    if ok:
        passed += 1
    else:
        failed += 1


def requests():
    """(path, body) pairs: greedy and sampled, completions and chat, logprobs, streams."""
    out = []
    for i, p in enumerate(PROMPTS):
        body = {"prompt": p, "max_tokens": 70 + 10 * i}
        if i % 3 == 0:
            body["temperature"] = 0
        else:
            body.update(temperature=0.8 if i % 3 == 1 else 1.2, seed=100 + i)
        if i == 1:
            body.update(logprobs=3)
        if i in (2, 4):
            body["stream"] = True
        if i == 3:
            body.update(top_p=0.9, stop=[" the whale"])
        out.append(("/v1/completions", body))
    out.append(("/v1/chat/completions", {"messages": [{"role": "user", "content": "Who is Anne Elliot?"}],
                                         "max_tokens": 60, "temperature": 0}))
    out.append(("/v1/chat/completions", {"messages": [{"role": "user", "content": "Tell me of Bath."}],
                                         "max_tokens": 60, "temperature": 0.9, "seed": 7, "stream": True,
                                         "logprobs": True, "top_logprobs": 2}))
    return out


def strip(obj):
    """The response without what differs between two runs of the same request."""
    if isinstance(obj, dict):
        return {k: strip(v) for k, v in obj.items()
                if k not in ("id", "created", "timings", "prompt_tokens_details", "system_fingerprint")}
    if isinstance(obj, list):
        return [strip(v) for v in obj]
    return obj


def send(url, path, body):
    req = urllib.request.Request(url + path, data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as r:
        raw = r.read().decode()
    if body.get("stream"):
        chunks = [json.loads(line[6:]) for line in raw.splitlines()
                  if line.startswith("data: ") and line != "data: [DONE]"]
        return [strip(c) for c in chunks]
    return strip(json.loads(raw))


def run_all(url):
    reqs = requests()
    res = [None] * len(reqs)

    def one(i):
        try:
            res[i] = send(url, *reqs[i])
        except Exception as e:  # recorded, compared below
            res[i] = "error: %r" % e

    th = [threading.Thread(target=one, args=(i,)) for i in range(len(reqs))]
    for t in th:
        t.start()
    for t in th:
        t.join()
    return reqs, res


def metrics(url):
    with urllib.request.urlopen(url + "/metrics", timeout=30) as r:
        text = r.read().decode()
    vals = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            k, v = line.rsplit(" ", 1)
            vals[k] = float(v)
    return vals


def main():
    args = sys.argv[1:]
    auto = []
    if "--auto" in args:
        i = args.index("--auto")
        auto = args[i + 1:i + 2]
        args = args[:i] + args[i + 2:]
    url_off, urls = args[0], args[1:] + auto
    reqs, ref = run_all(url_off)
    for i, r in enumerate(ref):
        check(not isinstance(r, str), "off: request %d answered" % i)
    for path, body in reqs:
        pass
    for url in urls:
        for rep in range(2):   # twice: the second round reuses the slots' caches and the drafting state
            _, got = run_all(url)
            for i, (req, a, b) in enumerate(zip(reqs, ref, got)):
                what = "%s round %d request %d (%s T=%s%s)" % (url, rep + 1, i, req[0].split("/")[-1],
                                                               req[1].get("temperature"),
                                                               ", stream" if req[1].get("stream") else "")
                if a != b:
                    check(False, what + ": differs:\n  off: %s\n  got: %s" % (json.dumps(a)[:600], json.dumps(b)[:600]))
                else:
                    check(True, what + ": same")
        m = metrics(url)
        drafted = m.get('colibri_mtp_drafted_total{position="1"}', 0)
        kept = m.get('colibri_mtp_accepted_total{position="1"}', 0)
        vf = m.get("colibri_mtp_verify_forwards_total", 0)
        tpv = m.get("colibri_mtp_tokens_per_verify", 0)
        if url in auto:     # probes are counted, not timed; what they keep depends on the timing
            ok = drafted > 0 and 0 <= kept <= drafted and vf > 0 and 1 <= tpv <= 4
        else:
            ok = drafted > 0 and 0 < kept <= drafted and vf > 0 and 1 < tpv <= 4
        check(ok,
              "%s /metrics: drafts at position 1 %d, kept %d, verify forwards %d, tokens per verify %.3f"
              % (url, drafted, kept, vf, tpv))
    m = metrics(url_off)
    check(not any(k.startswith("colibri_mtp_") for k in m), "off /metrics: no mtp series")
    # one chunk per token in the streams (the off server's, which the others equal)
    for i, ((path, body), r) in enumerate(zip(reqs, ref)):
        if body.get("stream") and path == "/v1/completions" and not isinstance(r, str):
            texts = [c["choices"][0]["text"] for c in r if c.get("choices") and c["choices"][0].get("text")]
            check(len(texts) >= 10, "request %d streamed %d text chunks" % (i, len(texts)))
    print("%d passed, %d failed" % (passed, failed))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
