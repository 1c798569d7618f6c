"""bench/gemm_float_summary.py - medians of bench/gemm_float.sh raw output: per thread count,
old and new prefill GFLOP/s by process CPU time (flops over CPU time / threads) with ranges,
and each as a fraction of the fp32 FMA peak measured in the same run (median of its rounds).
usage: python3 bench/gemm_float_summary.py raw.txt"""
import re,sys,statistics as st
peaks={1:[],2:[]}; res={}
for line in open(sys.argv[1]):
    m=re.match(r'peak r(\d+) t(\d+) \| fp32 FMA.*?\| ([\d.]+) \| ([\d.]+) \|',line)
    if m: peaks[int(m.group(2))].append(float(m.group(3) if m.group(2)=='1' else m.group(4))); continue
    m=re.match(r'prefill (old|new) r(\d+) \S+ (\S+) n=\d+ rows=\d+ threads=(\d+) GFLOP/s wall median ([\d.]+).*?cpu-time median ([\d.]+)',line)
    if m: res.setdefault((int(m.group(4)),m.group(3),m.group(1)),[]).append((float(m.group(6)),float(m.group(5))))
for t in (1,2):
    pk=st.median(peaks[t]); print(f"\n### {t} thread(s): fp32 FMA peak median {pk:.0f} G FLOP/s ({min(peaks[t]):.0f}-{max(peaks[t]):.0f}), per thread {pk/t:.0f}\n")
    print("| format | old GFLOP/s (CPU time) | new GFLOP/s (CPU time) | new / old | old of peak | new of peak | old wall | new wall |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for f in ('f32','bf16','f16','fp8b'):
        o=[x[0] for x in res[(t,f,'old')]]; n=[x[0] for x in res[(t,f,'new')]]
        ow=[x[1] for x in res[(t,f,'old')]]; nw=[x[1] for x in res[(t,f,'new')]]
        # cpu-time rate: flops over (process CPU time / threads)
        mo,mn=st.median(o),st.median(n)
        print(f"| {f} | {mo:.0f} ({min(o):.0f}-{max(o):.0f}) | {mn:.0f} ({min(n):.0f}-{max(n):.0f}) | {mn/mo:.2f}x | {100*mo/pk:.0f}% | {100*mn/pk:.0f}% | {st.median(ow):.0f} | {st.median(nw):.0f} |")
