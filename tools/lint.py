#!/usr/bin/env python3
"""Three house rules that the compiler does not check, over the C sources.

  length   no source file over MAX_LINES lines: the .c, .h and .cu files of
           src/, include/, tests/ and bench/, and the .py and .sh files of
           tools/ and tests/
  state    no mutable state outside a function's arguments in src/: a
           variable defined at file scope, or declared static in a function,
           that is not const (a pointer must be `* const`: one to const
           data can still be pointed elsewhere); `extern` declarations are
           skipped, their definition is what is checked
  getenv   no getenv() in src/ outside src/cli/: the library takes its
           settings as arguments
  layer    no #include of a cuda/ header from src/base, io, quant, kv or
           model: the drivers of the device seam (model/backend.h) sit
           above the model, which reaches them only through that table

Exceptions are lines of tools/lint_allow.txt, `RULE PATH [NAME]  # why`; a
line that no longer matches anything fails too (delete it: the list only
shrinks). Comments, string and character literals and preprocessor lines are
removed before the checks, so a rule's word in a comment does not count.

Usage: python3 tools/lint.py [ROOT [ALLOWLIST]]   (defaults: the repository,
ROOT/tools/lint_allow.txt). Prints one line per violation naming file, line
and rule, then "lint: N files checked, N violations"; exits 1 on any.
"""
import os
import re
import sys

MAX_LINES = 1000
LENGTH_DIRS = {"src": (".c", ".h", ".cu"), "include": (".h",), "bench": (".c", ".h", ".cu"),
               "tests": (".c", ".h", ".py", ".sh"), "tools": (".c", ".py", ".sh")}

# The modules below the device drivers of src/cuda (the layer rule).
LOWER_THAN_CUDA = {"base", "io", "quant", "kv", "model"}
INCLUDE_CUDA = re.compile(r'\s*#\s*include\s*[<"]cuda/')
TOKEN = re.compile(r"[A-Za-z_]\w*|\d[\w.]*|->|\+\+|--|<<=|>>=|[<>=!+\-*/%&|^]=|&&|\|\||<<|>>|\S")
# names before a parenthesis that do not make a declaration a function
NOT_FUNCS = {"sizeof", "_Alignof", "alignof", "_Alignas", "__attribute__", "__typeof__", "typeof", "_Atomic"}


def strip_c(text):
    """The text with comments, literals and preprocessor lines blanked (newlines kept)."""
    out, i, n = [], 0, len(text)
    line_start = True
    while i < n:
        c = text[i]
        if line_start and c == "#":   # a directive, with its continuation lines
            while i < n and text[i] != "\n":
                if text[i] == "\\" and i + 1 < n and text[i + 1] == "\n":
                    out.append("\n")
                    i += 2
                    continue
                i += 1
            continue
        if c == "/" and text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("".join(ch if ch == "\n" else " " for ch in text[i:j]))
            i = j
            continue
        if c == "/" and text.startswith("//", i):
            while i < n and text[i] != "\n":
                i += 1
            continue
        if c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(c + " " + c)   # an empty literal keeps the token count
            i = j + 1
            continue
        if c == "\n":
            line_start = True
        elif not c.isspace():
            line_start = False
        out.append(c)
        i += 1
    return "".join(out)


def tokens(text):
    """(token, line) pairs of stripped C text."""
    for lineno, line in enumerate(text.split("\n"), 1):
        for m in TOKEN.finditer(line):
            yield m.group(), lineno


def skip_group(toks, i):
    """Index after the bracket group opening at toks[i]."""
    pairs = {"(": ")", "[": "]", "{": "}"}
    depth, close = 0, pairs[toks[i][0]]
    opened = toks[i][0]
    while i < len(toks):
        if toks[i][0] == opened:
            depth += 1
        elif toks[i][0] == close:
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return i


def is_const(head):
    """Whether the object declared is const: with pointers, the last one must
    be `* const` (a pointer to const data is itself mutable)."""
    if "*" in head:
        k = len(head) - 1 - head[::-1].index("*")
        return k + 1 < len(head) and head[k + 1] == "const"
    return "const" in head


def declared_name(decl):
    """The variable a file-scope declaration (tokens before ';', bodies
    removed) defines, or None when it defines none (a type, a prototype)."""
    words = [t for t, _ in decl]
    if not words or words[0] in ("typedef", "extern", "_Static_assert", "static_assert"):
        return None
    head = words[: words.index("=")] if "=" in words else words
    if is_const(head):
        return None
    if "{}" in head:   # a struct, union or enum body: the declarator follows it
        head = head[head.index("{}") + 1:]
    elif len(head) <= 2 and head[0] in ("struct", "union", "enum"):
        return None   # a declaration of the tag alone
    for k, w in enumerate(head):
        if w == "(" and k > 0 and re.match(r"[A-Za-z_]", head[k - 1]) and head[k - 1] not in NOT_FUNCS:
            if k + 1 < len(head) and head[k + 1] == "*":   # (*hook)(...): a function pointer
                return next((w for w in head[k + 2:] if re.match(r"[A-Za-z_]\w*$", w) and w != "const"), None)
            return None   # a prototype
    names = [w for w in head if re.match(r"[A-Za-z_]\w*$", w)]
    return names[-1] if names else None


def mutable_state(toks):
    """(name, line) of every mutable file-scope or function-static variable."""
    found, i, decl = [], 0, []
    while i < len(toks):
        t = toks[i][0]
        if t == "__attribute__" and i + 1 < len(toks) and toks[i + 1][0] == "(":
            i = skip_group(toks, i + 1)
            continue
        if t == ";":
            name = declared_name(decl)
            if name:
                found.append((name, decl[0][1]))
            decl = []
            i += 1
            continue
        if t == "{":
            words = [w for w, _ in decl]
            aggregate = any(w in ("struct", "union", "enum") for w in words) and "(" not in words
            if "=" in words or aggregate:   # an initializer or a type's body: the declaration goes on
                i = skip_group(toks, i)
                decl.append(("{}", toks[i - 1][1]))
                continue
            end = skip_group(toks, i)   # a function body: its statics
            found += function_statics(toks[i:end])
            decl = []
            i = end
            continue
        decl.append(toks[i])
        i += 1
    return found


def function_statics(body):
    found, i = [], 0
    while i < len(body):
        if body[i][0] == "static":
            j, decl = i, []
            while j < len(body) and body[j][0] not in (";", "="):
                if body[j][0] == "{":   # a struct's body: its members are not the variable
                    j = skip_group(body, j)
                    decl.append("{}")
                    continue
                decl.append(body[j][0])
                j += 1
            if not is_const(decl):
                names = [w for w in decl if re.match(r"[A-Za-z_]\w*$", w)]
                found.append((names[-1] if names else "?", body[i][1]))
            i = j
        i += 1
    return found


def source_files(root):
    for top, exts in LENGTH_DIRS.items():
        for d, _, files in os.walk(os.path.join(root, top)):
            if "/fuzz/corpus" in d.replace(os.sep, "/"):
                continue
            for f in sorted(files):
                if f.endswith(exts):
                    yield os.path.relpath(os.path.join(d, f), root).replace(os.sep, "/")


def read_allow(path):
    allow = {}
    if not os.path.exists(path):
        return allow
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            words = line.split("#", 1)[0].split()
            if words:
                allow[tuple(words)] = n
    return allow


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    allow_path = sys.argv[2] if len(sys.argv) > 2 else os.path.join(root, "tools", "lint_allow.txt")
    allow = read_allow(allow_path)
    used, bad, n_files = set(), [], 0

    def report(key, msg):
        if key in allow:
            used.add(key)
        else:
            bad.append(msg)

    for rel in sorted(set(source_files(root))):
        n_files += 1
        with open(os.path.join(root, rel), encoding="utf-8", errors="replace") as f:
            text = f.read()
        n = text.count("\n") + (0 if text.endswith("\n") or not text else 1)
        if n > MAX_LINES:
            report(("length", rel), "%s: %d lines, over the limit of %d (split it by concern)" % (rel, n, MAX_LINES))
        if not rel.startswith("src/") or not rel.endswith((".c", ".h")):
            continue
        if rel.split("/")[1] in LOWER_THAN_CUDA:
            for k, line in enumerate(text.split("\n"), 1):
                if INCLUDE_CUDA.match(line):
                    report(("layer", rel), "%s:%d: includes a cuda/ header (%s); the model reaches a device "
                           "through model/backend.h's struct backend_ops" % (rel, k, line.strip()))
        toks = list(tokens(strip_c(text)))
        for name, line in mutable_state(toks):
            report(("state", rel, name), "%s:%d: '%s' is mutable static or file-scope state "
                   "(make it const, pass it in, or keep it in a struct the caller owns)" % (rel, line, name))
        if not rel.startswith("src/cli/"):
            lines = sorted({line for k, (t, line) in enumerate(toks) if t in ("getenv", "secure_getenv")
                            and k + 1 < len(toks) and toks[k + 1][0] == "("})
            for line in lines:
                report(("getenv", rel), "%s:%d: getenv() outside src/cli/ (take the setting as an argument)"
                       % (rel, line))
    for key, n in sorted(allow.items(), key=lambda kv: kv[1]):
        if key not in used:
            bad.append("%s:%d: '%s' matches nothing (delete the line)" % (allow_path, n, " ".join(key)))
    for msg in bad:
        print(msg)
    print("lint: %d files checked, %d violations" % (n_files, len(bad)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
