#!/usr/bin/env python3
"""Rebuild the colibri-tiny training corpus from Debian bookworm packages.

No installs: `apt-get download` + `dpkg -x` into a scratch dir, then extract
public-domain English books (see docs/corpus.md "Set A"):

  r-cran-janeaustenr                    Jane Austen's six novels (R lazy-load DB)
  golang-github-colinmarc-hdfs-dev      Moby Dick (testdata/mobydick.txt)
  golang-github-pierrec-lz4-dev         Sherlock Holmes (pg1661.txt), Tom Sawyer
                                        (Mark.Twain-Tom.Sawyer.txt, NOT the _long one)
  golang-github-andybalholm-brotli-dev  Newton's Opticks

Cleaning: Gutenberg header/footer cut at the `*** START OF` / `*** END OF`
lines, BOM removed, CRLF -> LF, leading/trailing blank lines stripped, exactly
one trailing newline.  Persuasion is held out: written as OUT/persuasion.txt,
never into OUT/train/.  Every output's sha256 is checked against the values
recorded below (pass --record to print fresh values instead of failing).

Usage: python3 tools/corpus.py [--out data] [--work /tmp/colibri-corpus-debs]
"""
import argparse
import hashlib
import os
import struct
import subprocess
import sys
import zlib

PACKAGES = [
    "r-cran-janeaustenr",
    "golang-github-colinmarc-hdfs-dev",
    "golang-github-pierrec-lz4-dev",
    "golang-github-andybalholm-brotli-dev",
]

AUSTEN_RDB = "usr/lib/R/site-library/janeaustenr/data/Rdata.rdb"
# record order inside Rdata.rdb (alphabetical object names)
AUSTEN_ORDER = ["emma", "mansfieldpark", "northangerabbey", "persuasion",
                "prideprejudice", "sensesensibility"]
GO = "usr/share/gocode/src/github.com/"
GUTENBERG = {
    "mobydick": GO + "colinmarc/hdfs/testdata/mobydick.txt",
    "sherlockholmes": GO + "pierrec/lz4/testdata/pg1661.txt",
    "tomsawyer": GO + "pierrec/lz4/testdata/Mark.Twain-Tom.Sawyer.txt",
    "opticks": GO + "andybalholm/brotli/testdata/Isaac.Newton-Opticks.txt",
}
HELDOUT = "persuasion"

# sha256 of the cleaned UTF-8 texts (relative to --out)
EXPECTED = {
    "persuasion.txt": "8061549557aebd2fd6e353d18d9197cb707029112bd52d4d8b174583a925848a",
    "train/emma.txt": "7c67b5985c6d0de1efaeb5d342d52cb82c38083c40e2295129e30e87ee690ebe",
    "train/mansfieldpark.txt": "98bc90519cdf4ef663ad7de2734bb529435ef24f7abbde6bb1a50898871dafe9",
    "train/mobydick.txt": "9258eada53511727e46d8b0d27da44e6bfce365780d3945dc797b1e1c259b00a",
    "train/northangerabbey.txt": "51f91bbe0517db8e65cff009b097ce0a1836124c4e0532ac19e6c0cad982abed",
    "train/opticks.txt": "f9e5dc2e2a701c3955eb393e2659c1367567a68a54f8ee1086da156ca7b59769",
    "train/prideprejudice.txt": "dfc684d4f857fa938268f9ab9c5567b64bd0691251eca959644adeabe6287a4d",
    "train/sensesensibility.txt": "105e1651fe93bed7130078578efd31e0c557d68667ba672ddc876f735b30fe09",
    "train/sherlockholmes.txt": "f040f03244ed281fe2332256dfc5ab4b02463516bb10d28e6187c542b85b4247",
    "train/tomsawyer.txt": "461eb7cb2d57d293fc680c836464c9125e4382be3596f7d415093ae9db8fcb0e",
}


# ---------------------------------------------------------------- R lazy-load
class RReader:
    """Minimal reader for R XDR serialization (format 2/3) of a STRSXP."""

    def __init__(self, b):
        self.b = b
        self.p = 0

    def i32(self):
        v = struct.unpack(">i", self.b[self.p:self.p + 4])[0]
        self.p += 4
        return v

    def read_header(self):
        if self.b[:2] != b"X\n":
            raise ValueError("not XDR serialization")
        self.p = 2
        version = self.i32()
        self.i32()  # writer R version
        self.i32()  # minimal reader version
        if version == 3:
            n = self.i32()
            self.p += n  # native encoding name
        elif version != 2:
            raise ValueError("serialization version %d" % version)

    def read_strsxp(self):
        flags = self.i32()
        if flags & 0xFF != 16:
            raise ValueError("expected STRSXP, got type %d" % (flags & 0xFF))
        n = self.i32()
        out = []
        for _ in range(n):
            f = self.i32()
            if f & 0xFF != 9:
                raise ValueError("expected CHARSXP, got type %d" % (f & 0xFF))
            ln = self.i32()
            if ln == -1:
                out.append("")  # NA_character_
                continue
            out.append(self.b[self.p:self.p + ln].decode("utf-8"))
            self.p += ln
        return out


def austen_novels(rdb_path):
    d = open(rdb_path, "rb").read()
    pos = 0
    vectors = []
    while pos < len(d):
        n = struct.unpack(">I", d[pos:pos + 4])[0]
        do = zlib.decompressobj()
        raw = do.decompress(d[pos + 4:])
        if len(raw) != n:
            raise ValueError("record at %d: length %d != %d" % (pos, len(raw), n))
        pos = len(d) - len(do.unused_data)
        r = RReader(raw)
        r.read_header()
        vectors.append(r.read_strsxp())
    if len(vectors) != len(AUSTEN_ORDER):
        raise ValueError("expected 6 records, got %d" % len(vectors))
    return {name: "\n".join(v) for name, v in zip(AUSTEN_ORDER, vectors)}


# ---------------------------------------------------------------- cleaning
def clean(text, gutenberg_cut=True):
    text = text.replace("\ufeff", "").replace("\r\n", "\n").replace("\r", "\n")
    lines = text.split("\n")
    if gutenberg_cut:
        start = [i for i, l in enumerate(lines) if l.startswith("*** START OF")]
        end = [i for i, l in enumerate(lines) if l.startswith("*** END OF")]
        if start:
            lines = lines[start[0] + 1:end[0] if end else None]
        tail = [i for i, l in enumerate(lines)
                if l.startswith(("End of the Project Gutenberg", "End of Project Gutenberg"))]
        if tail:
            lines = lines[:tail[0]]
    lines = [l.rstrip() for l in lines]
    return "\n".join(lines).strip("\n") + "\n"


def sha256(b):
    return hashlib.sha256(b).hexdigest()


def main():
    ap = argparse.ArgumentParser()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap.add_argument("--out", default=os.path.join(root, "data"))
    ap.add_argument("--work", default="/tmp/colibri-corpus-debs")
    ap.add_argument("--record", action="store_true",
                    help="print the sha256 table instead of checking it")
    a = ap.parse_args()

    os.makedirs(a.work, exist_ok=True)
    x = os.path.join(a.work, "x")
    for p in PACKAGES:
        debs = [f for f in os.listdir(a.work) if f.startswith(p + "_") and f.endswith(".deb")]
        if not debs:
            subprocess.run(["apt-get", "download", p], cwd=a.work, check=True)
            debs = [f for f in os.listdir(a.work) if f.startswith(p + "_") and f.endswith(".deb")]
        subprocess.run(["dpkg", "-x", os.path.join(a.work, sorted(debs)[-1]), x], check=True)

    texts = {}
    for name, t in austen_novels(os.path.join(x, AUSTEN_RDB)).items():
        texts[name] = clean(t, gutenberg_cut=False)
    for name, rel in GUTENBERG.items():
        texts[name] = clean(open(os.path.join(x, rel), "rb").read().decode("utf-8"))

    os.makedirs(os.path.join(a.out, "train"), exist_ok=True)
    got = {}
    for name, t in texts.items():
        rel = "persuasion.txt" if name == HELDOUT else "train/%s.txt" % name
        b = t.encode("utf-8")
        with open(os.path.join(a.out, rel), "wb") as f:
            f.write(b)
        got[rel] = (sha256(b), len(b))

    bad = 0
    total = 0
    for rel in sorted(got):
        h, n = got[rel]
        ok = "record" if a.record else ("ok" if EXPECTED.get(rel) == h else "MISMATCH")
        if ok == "MISMATCH":
            bad += 1
        if rel.startswith("train/"):
            total += n
        print("%-28s %9d bytes  %s  %s" % (rel, n, h, ok))
    print("training total %d bytes (%d files); held out: persuasion.txt" %
          (total, sum(r.startswith("train/") for r in got)))
    if a.record:
        print("EXPECTED = {")
        for rel in sorted(got):
            print('    "%s": "%s",' % (rel, got[rel][0]))
        print("}")
    elif bad:
        print("sha256 check FAILED for %d file(s)" % bad, file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
