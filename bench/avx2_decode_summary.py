"""bench/avx2_decode_summary.py - medians and ranges of bench/avx2_decode.sh's raw output
as markdown tables: matvec share of the probe per format, threads and build; in-model
decode tok/s and share of the bound per model, threads and build.
    python3 bench/avx2_decode_summary.py raw.txt"""
import re
import statistics
import sys
from collections import defaultdict


def med_range(v, fmt="{:.0f}"):
    if not v:
        return "-"
    return (fmt + " ({}-{})").format(statistics.median(v), fmt.format(min(v)), fmt.format(max(v)))


def main(path):
    mv = defaultdict(lambda: defaultdict(list))   # (fmt, t) -> key -> values
    md = defaultdict(lambda: defaultdict(list))   # (model, t) -> key -> values
    for line in open(path):
        m = re.match(r"matvec (old|new) t(\d) r\d+ \| (\w+) \|[^|]+\|[^|]+\| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \| (\d+)% \|", line)
        if m:
            b, t, f = m.group(1), int(m.group(2)), m.group(3)
            mv[(f, t)][b + "_gbs"].append(float(m.group(5)))
            mv[(f, t)][b + "_probe"].append(float(m.group(6)))
            mv[(f, t)][b + "_share"].append(float(m.group(7)))
            continue
        m = re.match(r"model (\w+) (old|new) t(\d) r\d+ model=.* decode=.*\(([\d.]+) tok/s\)", line)
        if m:
            md[(m.group(1), int(m.group(3)))][m.group(2) + "_tok"].append(float(m.group(4)))
            continue
        m = re.match(r"model (\w+) (old|new) t(\d) r\d+ read bandwidth ([\d.]+) GB/s.*reaches (\d+)% of it", line)
        if m:
            k = md[(m.group(1), int(m.group(3)))]
            k[m.group(2) + "_probe"].append(float(m.group(4)))
            k[m.group(2) + "_share"].append(float(m.group(5)))
    print("| format | threads | before GB/s | before of probe | after GB/s | after of probe | probe GB/s (after runs) |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for (f, t), k in sorted(mv.items(), key=lambda x: (x[0][1], x[0][0])):
        print("| {} | {} | {} | {}% | {} | {}% | {} |".format(
            f, t, med_range(k["old_gbs"], "{:.1f}"), med_range(k["old_share"]), med_range(k["new_gbs"], "{:.1f}"),
            med_range(k["new_share"]), med_range(k["new_probe"], "{:.1f}")))
    print()
    print("| model | threads | before tok/s | before of bound | after tok/s | after of bound | probe GB/s (after runs) |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for (m, t), k in sorted(md.items()):
        print("| {} | {} | {} | {}% | {} | {}% | {} |".format(
            m, t, med_range(k["old_tok"], "{:.2f}"), med_range(k["old_share"]), med_range(k["new_tok"], "{:.2f}"),
            med_range(k["new_share"]), med_range(k["new_probe"], "{:.1f}")))


if __name__ == "__main__":
    main(sys.argv[1])
