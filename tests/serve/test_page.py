#!/usr/bin/env python3
"""The chat page at GET / in a real browser: headless Chromium, driven over
the Chrome DevTools protocol on a pipe (--remote-debugging-pipe: no
websocket, no Python package beyond the standard library).

Started by tests/cli/serve_page.sh against a running `colibri serve`.
Environment:
  PAGE_URL     the server (its API key is PAGE_KEY; the test types it in)
  PAGE_KEY     the API key
  PAGE_SHOT    where to save the screenshot (PNG)
  CHROMIUM     the browser binary (default: chromium, chromium-browser or google-chrome on PATH)

Types a system prompt, settings and a message like a user (key events and
mouse clicks), waits for the streamed reply, and checks that the reply in the
page is the server's greedy reply to the same conversation, that the stats
line shows tokens/s and cached tokens, that the Stop button cancels a
running reply (the server's slot goes idle), and that the screenshot of the
reply shows ink on paper, that a reasoning reply (a canned stream) shows its
reasoning in a fold and its tool calls, and that the chat keeps its width at
390 px (a phone) as at 1280. Without a browser it prints "skipped: ..." and
exits 77, which tests/run.sh counts as skipped, never as passed.
"""
import base64
import fcntl
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import urllib.request
import zlib

URL = os.environ["PAGE_URL"]
KEY = os.environ["PAGE_KEY"]
SHOT = os.environ["PAGE_SHOT"]
SKIP = 77


def find_browser():
    if os.environ.get("CHROMIUM"):
        return shutil.which(os.environ["CHROMIUM"])
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if shutil.which(name):
            return shutil.which(name)
    return None


class Browser:
    """One headless Chromium and a CDP session to one page."""

    def __init__(self, exe, profile):
        r_cmd, w_cmd = os.pipe()       # we write commands, the browser reads fd 3
        r_ev, w_ev = os.pipe()         # the browser writes fd 4, we read
        args = [exe, "--headless=new", "--no-sandbox", "--disable-gpu", "--remote-debugging-pipe",
                "--no-first-run", "--no-default-browser-check", "--disable-extensions", "--mute-audio",
                "--disable-dev-shm-usage", "--hide-scrollbars", "--window-size=1100,760",
                "--user-data-dir=" + profile, "about:blank"]

        def child_fds():
            # through fds above 4 first, so that neither dup2 clobbers the other's source
            hi_cmd, hi_ev = fcntl.fcntl(r_cmd, fcntl.F_DUPFD, 10), fcntl.fcntl(w_ev, fcntl.F_DUPFD, 10)
            os.dup2(hi_cmd, 3)
            os.dup2(hi_ev, 4)

        self.proc = subprocess.Popen(args, pass_fds=(3, 4), preexec_fn=child_fds, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        os.close(r_cmd)
        os.close(w_ev)
        self.w, self.r = w_cmd, r_ev
        self.buf = b""
        self.next_id = 0
        self.events = []
        self.session = None

    def _read_message(self, deadline):
        while b"\0" not in self.buf:
            if time.time() > deadline:
                raise TimeoutError("no answer from the browser")
            chunk = os.read(self.r, 1 << 16)
            if not chunk:
                raise RuntimeError("the browser closed the pipe: " + self.proc.stderr.read().decode()[-2000:])
            self.buf += chunk
        msg, self.buf = self.buf.split(b"\0", 1)
        return json.loads(msg)

    def call(self, method, params=None, session=True, timeout=20):
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params or {}}
        if session and self.session:
            msg["sessionId"] = self.session
        os.write(self.w, json.dumps(msg).encode() + b"\0")
        deadline = time.time() + timeout
        while True:
            m = self._read_message(deadline)
            if m.get("id") == self.next_id:
                if "error" in m:
                    raise RuntimeError(f"{method}: {m['error']}")
                return m.get("result", {})
            self.events.append(m)

    def wait_event(self, method, timeout=20):
        deadline = time.time() + timeout
        while True:
            for i, m in enumerate(self.events):
                if m.get("method") == method:
                    return self.events.pop(i)
            self.events.append(self._read_message(deadline))

    def open(self, url):
        target = self.call("Target.createTarget", {"url": "about:blank"}, session=False)["targetId"]
        self.session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True},
                                 session=False)["sessionId"]
        self.call("Page.enable")
        self.call("Runtime.enable")
        self.call("Emulation.setDeviceMetricsOverride",
                  {"width": 1100, "height": 760, "deviceScaleFactor": 1, "mobile": False})
        self.call("Page.navigate", {"url": url})
        self.wait_event("Page.loadEventFired")

    def js(self, expr):
        r = self.call("Runtime.evaluate", {"expression": expr, "returnByValue": True, "awaitPromise": True})
        if "exceptionDetails" in r:
            raise RuntimeError(f"{expr}: {r['exceptionDetails']}")
        return r["result"].get("value")

    def click(self, selector):
        """A real mouse click at the element's centre."""
        box = self.js(f"(() => {{ const r = document.querySelector({json.dumps(selector)}).getBoundingClientRect();"
                      " return [r.x + r.width / 2, r.y + r.height / 2]; })()")
        for kind in ("mousePressed", "mouseReleased"):
            self.call("Input.dispatchMouseEvent", {"type": kind, "x": box[0], "y": box[1], "button": "left",
                                                   "clickCount": 1})

    def type_into(self, selector, text, replace=True):
        """Focuses the field by clicking it and types text as key input."""
        self.click(selector)
        if replace:
            self.js(f"document.querySelector({json.dumps(selector)}).select()")
        self.call("Input.insertText", {"text": text})
        # fields save on 'change', which typing fires when focus leaves
        self.js(f"document.querySelector({json.dumps(selector)}).dispatchEvent(new Event('change'))")

    def wait_js(self, expr, timeout=20):
        deadline = time.time() + timeout
        while time.time() < deadline:
            v = self.js(expr)
            if v:
                return v
            time.sleep(0.05)
        raise AssertionError(f"timed out waiting for {expr}")

    def close(self):
        try:
            self.call("Browser.close", session=False, timeout=5)
        except Exception:   # noqa: BLE001 - it may be gone already
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self.w)
        os.close(self.r)


def api(path, body=None):
    req = urllib.request.Request(URL + path, data=json.dumps(body).encode() if body is not None else None,
                                 headers={"Authorization": "Bearer " + KEY, "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read())


def png_pixels(data):
    """(width, height, rows of RGB(A) bytes) of an 8-bit, non-interlaced PNG."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, w = 8, b"", 0
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        chunk = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            w, h, depth, color, _, _, interlace = struct.unpack(">IIBBBBB", chunk)
            assert depth == 8 and color in (2, 6) and interlace == 0, f"PNG type {depth}/{color}/{interlace}"
            bpp = 3 if color == 2 else 4
        elif kind == b"IDAT":
            idat += chunk
        pos += 12 + n
    raw = zlib.decompress(idat)
    stride = w * bpp
    rows, prev = [], bytearray(stride)
    for y in range(h):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    return w, h, bpp, rows


def main():
    exe = find_browser()
    if not exe:
        print("skipped: no Chromium on this machine (sh tools/deps.sh --browser installs Debian's)")
        return SKIP
    profile = tempfile.mkdtemp(prefix="colibri-page-")
    b = Browser(exe, profile)
    failed = []
    passed = 0

    def check(cond, msg):
        if not cond:
            raise AssertionError(msg)

    try:
        b.open(URL + "/")
        check(b.js("document.title") == "colibri chat", "page title")
        # the key, then the settings and the message, typed like a user
        b.type_into("#apikey", KEY)
        model = api("/v1/models")["data"][0]["id"]
        b.wait_js(f"document.getElementById('model').textContent.startsWith({json.dumps(model)})")
        system = "You answer briefly."
        b.type_into("#system", system)
        b.type_into("#temperature", "0")
        b.type_into("#max_tokens", "12")
        message = "Say hello"
        b.type_into("#input", message)
        b.click("#send")
        t0 = time.time()
        b.wait_js("document.querySelector('.msg.assistant') && "
                  "document.querySelector('.msg.assistant').dataset.state", timeout=30)
        state = b.js("document.querySelector('.msg.assistant').dataset.state")
        check(state == "done", f"reply state {state}: {b.js('document.body.innerText')}")
        shown = b.js("document.querySelector('.msg.assistant .text').textContent")
        stats = b.js("document.querySelector('.msg.assistant .stats').textContent")
        want = api("/v1/chat/completions", {"messages": [{"role": "system", "content": system},
                                                         {"role": "user", "content": message}],
                                            "temperature": 0, "top_p": 0.95, "max_tokens": 12})
        want_text = want["choices"][0]["message"]["content"]
        check(shown == want_text and shown, f"page shows {shown!r}, the API gives {want_text!r}")
        check("tok/s" in stats and "cached)" in stats and "prompt" in stats, f"stats line {stats!r}")
        user = b.js("document.querySelector('.msg.user .text').textContent")
        check(user == message, f"user message {user!r}")
        print(f"ok   reply streamed into the page ({time.time() - t0:.2f} s): {shown!r} / {stats!r}", flush=True)
        passed += 1

        # the screenshot of the reply holds dark text on a light bubble
        box = b.js("(() => { const r = document.querySelector('.msg.assistant').getBoundingClientRect();"
                   " return {x: r.x, y: r.y, width: r.width, height: r.height, scale: 1}; })()")
        full = base64.b64decode(b.call("Page.captureScreenshot", {"format": "png"})["data"])
        with open(SHOT, "wb") as f:
            f.write(full)
        clip = base64.b64decode(b.call("Page.captureScreenshot", {"format": "png", "clip": box})["data"])
        w, h, bpp, rows = png_pixels(clip)
        lum = [sum(row[i:i + 3]) // 3 for row in rows for i in range(0, w * bpp, bpp)]
        dark = sum(v < 110 for v in lum) / len(lum)
        light = sum(v > 230 for v in lum) / len(lum)
        check(0.003 < dark < 0.5 and light > 0.4, f"reply region {w}x{h}: {dark:.3f} dark, {light:.3f} light")
        print(f"ok   screenshot {SHOT}: reply region {w}x{h}, {dark:.1%} ink, {light:.1%} paper", flush=True)
        passed += 1

        # Stop cancels a running reply: the page says so and the server frees the slot
        b.type_into("#max_tokens", "200")
        b.type_into("#input", "Count to five")
        b.click("#send")
        b.wait_js("document.querySelectorAll('.msg.assistant').length == 2 && "
                  "document.querySelectorAll('.msg.assistant .text')[1].textContent.length > 0")
        check(b.js("document.getElementById('stop').disabled") is False, "Stop disabled while generating")
        b.click("#stop")
        b.wait_js("document.querySelectorAll('.msg.assistant')[1].dataset.state")
        state = b.js("document.querySelectorAll('.msg.assistant')[1].dataset.state")
        check(state == "stopped", f"second reply state {state}")
        deadline = time.time() + 10
        while time.time() < deadline and any(s["is_processing"] for s in api("/slots")):
            time.sleep(0.05)
        check(not any(s["is_processing"] for s in api("/slots")), "the slot still runs after Stop")
        n = b.js("document.querySelectorAll('.msg.assistant .text')[1].textContent.length")
        print(f"ok   Stop cancelled the reply after {n} characters; the slot is idle", flush=True)
        passed += 1
        # a reasoning reply with a tool call (a canned stream, as a DeepSeek-R1 or V3.1 server sends it):
        # the reasoning in a fold, open while it streams and folded once the answer starts, the call shown
        canned = [{"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]},
                  {"choices": [{"index": 0, "delta": {"reasoning_content": "Think "}}]},
                  {"choices": [{"index": 0, "delta": {"reasoning_content": "twice."}}]},
                  {"choices": [{"index": 0, "delta": {"content": "Done."}}]},
                  {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "c", "type": "function",
                                                                      "function": {"name": "f", "arguments": ""}}]}}]},
                  {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": "{\"a\": 1}"}}]},
                                "finish_reason": "tool_calls"}]}]
        sse = "".join("data: " + json.dumps(c) + "\n\n" for c in canned) + "data: [DONE]\n\n"
        b.js("window.realFetch = window.fetch; window.fetch = async () => new Response(" + json.dumps(sse) +
             ", {status: 200, headers: {'Content-Type': 'text/event-stream'}})")
        b.type_into("#input", "Think")
        b.click("#send")
        b.wait_js("document.querySelectorAll('.msg.assistant').length == 3 && "
                  "document.querySelectorAll('.msg.assistant')[2].dataset.state")
        last = "document.querySelectorAll('.msg.assistant')[2]"
        got = b.js("(() => { const m = " + last + "; const d = m.querySelector('details.reasoning');"
                   " return [d && d.querySelector('.thought').textContent, d && d.open,"
                   " m.querySelector('.text').textContent, m.querySelector('.calls').textContent]; })()")
        check(got == ["Think twice.", False, "Done.", "\u2192 f({\"a\": 1})"], f"reasoning reply shown as {got}")
        b.js("window.fetch = window.realFetch")
        print(f"ok   reasoning in a fold, the tool call shown: {got}", flush=True)
        passed += 1

        # usable at phone width: the chat keeps the width, the settings go above it
        widths = {}
        for w in (1280, 390):
            b.call("Emulation.setDeviceMetricsOverride", {"width": w, "height": 800, "deviceScaleFactor": 1,
                                                          "mobile": w < 700})
            widths[w] = b.js("[document.getElementById('chat').getBoundingClientRect().width,"
                             " document.querySelector('aside').getBoundingClientRect().width,"
                             " document.documentElement.scrollWidth]")
        check(widths[1280][0] > 900 and widths[1280][1] >= 250, f"1280 px: chat and settings side by side: {widths}")
        check(widths[390][0] >= 380 and widths[390][2] <= 390, f"390 px: chat {widths[390][0]} px wide, page "
                                                                f"{widths[390][2]} px: {widths}")
        print(f"ok   layout at 1280 and 390 px: {widths}", flush=True)
        passed += 1
    except Exception as e:  # noqa: BLE001 - reported below
        failed.append(repr(e))
        print(f"FAIL {e!r}", flush=True)
        try:
            with open(SHOT, "wb") as f:
                f.write(base64.b64decode(b.call("Page.captureScreenshot", {"format": "png"})["data"]))
        except Exception:   # noqa: BLE001 - the screenshot is a help, not the test
            pass
    finally:
        b.close()
        shutil.rmtree(profile, ignore_errors=True)
    print(f"{passed} passed, {len(failed)} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
