#!/bin/sh
# colibri chat: Ctrl-C (SIGINT) while a reply streams stops the reply and
# returns to the prompt, the chat goes on; /help lists the commands; an
# unknown /command is not sent to the model. Bounded: every wait has a limit.
set -eu
python3 - "$COLIBRI" <<'PY'
import os, signal, subprocess, sys, time
p = subprocess.Popen([sys.argv[1], "chat", "-n", "300", "--seed", "1", "-t", "1"], stdin=subprocess.PIPE,
                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)
os.set_blocking(p.stdout.fileno(), False)
p.stdin.write(b"Tell me a long story\n"); p.stdin.flush()
got, t0 = b"", time.time()
while len(got) < 20 and time.time() - t0 < 30:
    try:
        got += p.stdout.read() or b""
    except (BlockingIOError, TypeError):
        pass
    time.sleep(0.02)
assert len(got) >= 20, "no reply streamed"
p.send_signal(signal.SIGINT)
time.sleep(0.3)
p.stdin.write(b"/help\n/bogus\nAnd now?\n/exit\n"); p.stdin.flush(); p.stdin.close()
try:
    rc = p.wait(timeout=60)
except subprocess.TimeoutExpired:
    p.kill(); raise SystemExit("chat did not exit after /exit")
err = p.stderr.read().decode()
assert rc == 0, f"exit {rc}: {err}"
assert "[stopped]" in err, err
assert "/reset   forget the conversation" in err, err
assert "unknown command '/bogus'" in err, err
assert err.count("stopped by") >= 2, "the chat did not go on after the interrupted reply: " + err
print("ok")
PY
