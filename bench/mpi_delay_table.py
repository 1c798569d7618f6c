"""Summarizes bench/mpi_delay.sh's log (argument 1) as a markdown table of
medians over its repeats: per one-way delay, the link's ping-pong RTT, the
single-process and the MPI decode time per token (median, and the least
disturbed run: the minimum), rank 0's layer exchanges per token, the bound
(single + exchanges x RTT), and what each added over the smallest delay,
measured and by the bound (exchanges x the RTT added)."""
import re
import statistics
import sys

rows, delay = {}, None
for line in open(sys.argv[1]):
    m = re.match(r"== repeat \d+, one-way delay (\d+) us", line)
    if m:
        delay = int(m[1])
        rows.setdefault(delay, {})
        continue
    for key, pat in (("rtt", r"link rtt us: median (\d+)()"),
                     ("one", r"single process: decode=(\d+) tok in ([\d.]+) s"),
                     ("mpi", r"mpi: decode=(\d+) tok in ([\d.]+) s"),
                     ("x", r"mpi rank 0 per decoded token: .*, ([\d.]+) layer exchanges()")):
        m = re.match(pat, line)
        if m and delay is not None:
            v = float(m[1]) if not m[2] else 1e3 * float(m[2]) / int(m[1])
            rows[delay].setdefault(key, []).append(v)


def med(r, k):
    return statistics.median(r[k]) if r.get(k) else float("nan")


print("| one-way delay us | link RTT us | single ms/token | MPI ms/token, median (min-max) | exchanges/token "
      "| bound ms/token | added over delay %d: MPI median, min | bound |" % min(rows))
print("|---|---|---|---|---|---|---|---|")
base = rows[min(rows)]
for d in sorted(rows):
    r = rows[d]
    rtt, one, mpi, x = med(r, "rtt"), med(r, "one"), med(r, "mpi"), med(r, "x")
    lo, hi = min(r["mpi"]), max(r["mpi"])
    print("| %d | %.0f | %.1f | %.1f (%.1f-%.1f) | %.2f | %.1f | %+.1f, %+.1f | %+.1f |" % (
        d, rtt, one, mpi, lo, hi, x, one + x * rtt / 1e3, mpi - med(base, "mpi"), lo - min(base["mpi"]),
        x * (rtt - med(base, "rtt")) / 1e3))
