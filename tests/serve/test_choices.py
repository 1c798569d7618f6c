#!/usr/bin/env python3
"""Tests of `n` > 1 (several choices per request) against the servers
tests/cli/serve.sh starts (environment as test_serve.py's): server A has 4
slots, server B 1.

The rule tested: choice i samples with seed + i, so choice 0 is the request
with n = 1 and choice i the request with n = 1 and seed + i; usage counts the
prompt once and the completion tokens of every choice.

Prints one line per test and "N passed, N failed"; exits 1 on any failure.
"""
import sys

import openai

from test_serve import MODEL, check, client, client_b, expect, main, metrics

PROMPT = "Write a haiku about the sea"


def chat_n(cl=None, **kw):
    kw.setdefault("max_tokens", 10)
    return (cl or client).chat.completions.create(model=MODEL, messages=[{"role": "user", "content": PROMPT}], **kw)


def complete_n(**kw):
    kw.setdefault("max_tokens", 10)
    return client.completions.create(model=MODEL, prompt=PROMPT, **kw)


def test_n_sampled_choices_follow_the_seed_rule():
    for endpoint, call, text in (("chat", chat_n, lambda c: c.message.content),
                                 ("completions", complete_n, lambda c: c.text)):
        r = call(n=3, temperature=1, seed=1234)
        check([c.index for c in r.choices] == [0, 1, 2], f"{endpoint}: indices {[c.index for c in r.choices]}")
        got = [text(c) for c in r.choices]
        singles = [call(n=1, temperature=1, seed=1234 + i) for i in range(3)]
        want = [text(s.choices[0]) for s in singles]
        check(got == want, f"{endpoint}: choices {got!r}, want the n=1 replies with seed+i {want!r}")
        check(len(set(got)) > 1, f"{endpoint}: three sampled choices all say {got[0]!r}")
        check(r.usage.prompt_tokens == singles[0].usage.prompt_tokens,
              f"{endpoint}: prompt_tokens {r.usage.prompt_tokens}, want {singles[0].usage.prompt_tokens} (once)")
        want_out = sum(s.usage.completion_tokens for s in singles)
        check(r.usage.completion_tokens == want_out,
              f"{endpoint}: completion_tokens {r.usage.completion_tokens}, want the sum {want_out}")
        check(r.usage.total_tokens == r.usage.prompt_tokens + want_out, f"{endpoint}: total_tokens {r.usage}")
        for c, s in zip(r.choices, singles):
            check(c.finish_reason == s.choices[0].finish_reason, f"{endpoint}: finish {c.finish_reason}")


def test_n_greedy_choices_equal_the_single_reply():
    one = chat_n(temperature=0, max_tokens=16).choices[0].message.content
    r = chat_n(n=3, temperature=0, max_tokens=16)
    got = [c.message.content for c in r.choices]
    check(got == [one] * 3, f"greedy n=3 gave {got!r}, n=1 gave {one!r}")
    one = complete_n(temperature=0, max_tokens=16).choices[0].text
    got = [c.text for c in complete_n(n=4, temperature=0, max_tokens=16).choices]
    check(got == [one] * 4, f"greedy completions n=4 gave {got!r}, n=1 gave {one!r}")


def test_n_streamed_equals_nonstreamed():
    for endpoint in ("chat", "completions"):
        kw = dict(n=2, temperature=1, seed=99, max_tokens=12)
        whole = chat_n(**kw) if endpoint == "chat" else complete_n(**kw)
        texts, finish, roles, usage, order = {}, {}, {}, None, []
        stream = (chat_n(stream=True, stream_options={"include_usage": True}, **kw) if endpoint == "chat"
                  else complete_n(stream=True, stream_options={"include_usage": True}, **kw))
        for ch in stream:
            if ch.usage:
                usage = ch.usage
            for c in ch.choices:
                order.append(c.index)
                if endpoint == "chat":
                    texts[c.index] = texts.get(c.index, "") + (c.delta.content or "")
                    if c.delta.role:
                        roles[c.index] = c.delta.role
                else:
                    texts[c.index] = texts.get(c.index, "") + c.text
                if c.finish_reason:
                    check(c.index not in finish, f"{endpoint}: choice {c.index} finished twice")
                    finish[c.index] = c.finish_reason
        want = {c.index: (c.message.content if endpoint == "chat" else c.text) for c in whole.choices}
        check(texts == want, f"{endpoint}: streamed {texts!r}, whole {want!r}")
        check(finish == {c.index: c.finish_reason for c in whole.choices}, f"{endpoint}: finish {finish}")
        if endpoint == "chat":
            check(roles == {0: "assistant", 1: "assistant"}, f"role chunks {roles}")
        check(set(order) == {0, 1}, f"{endpoint}: chunk indices {set(order)}")
        check(usage is not None and usage.completion_tokens == whole.usage.completion_tokens and
              usage.prompt_tokens == whole.usage.prompt_tokens, f"{endpoint}: usage {usage} vs {whole.usage}")


def test_n_shares_the_prompt_prefill():
    # a prompt no slot holds: choice 0 computes it, choices 1 and 2 copy its rows
    prompt = "Tell me twelve things about " + "lighthouses and the keepers who kept them " * 3
    before = metrics().get("colibri_prompt_tokens_cached_total", 0)
    r = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": prompt}], n=3,
                                       temperature=0, max_tokens=4)
    got = metrics()["colibri_prompt_tokens_cached_total"] - before
    n_prompt = r.usage.prompt_tokens
    check(got >= 2 * (n_prompt - 1), f"{got} prompt tokens reused over 3 choices of {n_prompt}; want >= {2 * (n_prompt - 1)}")
    check(r.usage.prompt_tokens_details.cached_tokens < n_prompt - 1,
          f"choice 0 found the fresh prompt cached: {r.usage.prompt_tokens_details}")


def test_n_beyond_the_slots_is_refused():
    expect(openai.BadRequestError, lambda: chat_n(n=5), 400, "n", ("4 slots",))
    expect(openai.BadRequestError, lambda: complete_n(n=64), 400, "n", ("4 slots",))
    expect(openai.BadRequestError, lambda: chat_n(client_b, n=2), 400, "n", ("1 slot ",))
    expect(openai.BadRequestError, lambda: chat_n(n=0), 400, "n")
    expect(openai.BadRequestError, lambda: complete_n(n=2, best_of=3), 400, "best_of")
    r = chat_n(client_b, n=1, max_tokens=2)                    # the server keeps serving
    check(len(r.choices) == 1, f"{r}")


if __name__ == "__main__":
    sys.exit(main(globals()))
