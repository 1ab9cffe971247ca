#!/usr/bin/env python3
"""longfn.py — C functions longer than a limit (the developers' guide: ~100 lines).

Needs: nothing but Python; run from anywhere.
Gives: one line per function over the limit, `path:line: name N lines`
(N: the lines from the one with its opening brace to the one with its
closing brace, as earlier checkers counted), longest first.  Braces inside
string and character literals, comments and preprocessor lines do not count
(a generator's `cg_emit(o, "  {\\n")` opens no block: brace matching on the
raw text misread cgen_attn.c's emit_skern as 335 lines).

    scripts/longfn.py                 # every .c under src/, limit 100
    scripts/longfn.py --limit 80 src/backend/c/cgen_attn.c

Exit status 1 when a function is over the limit, so a check can be repeated;
a file whose braces do not balance (one in a single #if branch) is named on
stderr.
"""
import argparse
import os
import re
import sys


def code_only(text):
    """text with every comment, string and character literal and every
    preprocessor line (with its continuations) blanked to spaces, newlines
    kept, so that the braces left are the code's and line numbers hold."""
    out, i, n = [], 0, len(text)
    bol = True  # at the start of a line (only blanks so far)
    while i < n:
        c = text[i]
        if bol and c == "#":
            j = i
            while j < n and (text[j] != "\n" or text[j - 1] == "\\"):
                j += 1
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
            continue
        if c == "/" and text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
        elif c == "/" and text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
        else:
            out.append(c)
            bol = c == "\n" or (bol and c in " \t")
            i += 1
            continue
        out.append(re.sub(r"[^\n]", " ", text[i:j]))
        bol = False
        i = j
    return "".join(out)


def functions(text):
    """(name, first line, last line) of each function definition in C source
    text: a brace at file level whose header (the code since the previous
    `;` or `}` at file level) has a parameter list and no `=` (a struct,
    union or enum has no parameter list); lines from 1."""
    code = code_only(text)
    found, depth, head, open_at = [], 0, 0, None
    for i, c in enumerate(code):
        if c == "{":
            if depth == 0:
                h = code[head:i]
                m = re.search(r"(\w+)\s*\(", h)
                open_at = (m.group(1), code.count("\n", 0, i) + 1) if m and "=" not in h else None
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                if open_at:
                    found.append((open_at[0], open_at[1], code.count("\n", 0, i) + 1))
                open_at, head = None, i + 1
        elif c == ";" and depth == 0:
            head = i + 1
    return found


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("paths", nargs="*", help="C files or folders (default: src)")
    ap.add_argument("--limit", type=int, default=100)
    a = ap.parse_args()
    files = []
    for p in a.paths or ["src"]:
        if os.path.isdir(p):
            files += sorted(os.path.join(d, f) for d, _, fs in os.walk(p) for f in fs if f.endswith(".c"))
        else:
            files.append(p)
    long_ = []
    for p in files:
        text = open(p, errors="replace").read()
        code = code_only(text)
        if code.count("{") != code.count("}"):  # a brace in one branch of an #if only: lengths unreliable
            print(f"{p}: its braces do not balance outside literals, comments and #lines", file=sys.stderr)
        for name, first, last in functions(text):
            if last - first > a.limit:
                long_.append((last - first, p, first, name))
    for n, p, first, name in sorted(long_, reverse=True):
        print(f"{p}:{first}: {name} {n} lines")
    return 1 if long_ else 0


if __name__ == "__main__":
    sys.exit(main())
