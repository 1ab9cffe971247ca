#!/usr/bin/env python3
"""rename_prefixes.py — give every layer its own prefix, mechanically.

`hp_` used to mean the util layer, the frontend builder and the runtime at
once.  This script renames every library name spelled `hp_*` / `HP_*` to the
prefix of the layer that declares it (docs/contributing.md, "Prefixes"):

    declared in                                          becomes
    include/harp.h, harp/status.h, harp/advanced.h       harp_  HARP_
    harp/error.h, harp/tensor.h, src/util/               ut_    UT_
    harp/frontend.h, src/frontend/ (not onnx_*, flow*)   hg_    HG_
    harp/onnx.h, src/frontend/onnx_*                     onnx_  ONNX_
    harp/flow.h, src/frontend/flow*, src/runtime/flow*   flow_  FLOW_
    harp/function.h                                      fn_    FN_
    harp/cpu.h, gpu.h, tune.h, knobs.h, pipeline.h,
      src/runtime/                                       rt_    RT_

`hp_` then means one thing only: the helpers inside generated kernels
(hp_floord, hp_f2h, HP_AT, ...), which this script never touches.

How it decides, so that it can run again on a tree others have added to:
  * A library name is an `hp_`/`HP_` identifier used as code (not inside a
    string or comment) in a .c/.h file under src/ or include/.
  * Its home is where universal-ctags finds it declared (a header before a
    .c file); a name made by token pasting (`HP_OP_##e`) takes the home of
    the pasted prefix.  The home's row above gives the prefix: hp_cpu_run
    -> rt_cpu_run; a prefix the rest already starts with is not doubled
    (hp_onnx_shape -> onnx_shape).  EXACT overrides the rule.
  * Names inside string literals of the code generators (src/backend/,
    src/poly/) are the generated code's and are never renamed in a string.
    A name that is both (hp_max: a builder function, and a helper of the
    generated C) is renamed in code, and in a comment or a Markdown
    paragraph unless that names a generated-only helper too (hp_floord):
    then it speaks of generated code.
  * .c/.h/.cc files under src/ include/ tests/ examples/ bench/ are
    rewritten in code, comments and strings; Markdown (README.md, docs/,
    src/**/README.md) in text.
    bench/RESULTS.md is a record of the past and is left alone; so are
    files marked "@generated" or "DO NOT EDIT".
  * Renaming is by whole identifier; where a line pads before a trailing
    backslash or comment, the padding keeps that column.  Two names
    meeting in one new name, or a new name that already exists, stop the
    script before it writes anything.  A second run finds nothing to do.

Usage:
    scripts/rename_prefixes.py            rewrite the tree (the git work tree)
    scripts/rename_prefixes.py --dry-run  print the mapping and the files it would change
    scripts/rename_prefixes.py --check    exit 1 if anything is left to rename
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
from collections import defaultdict

OLD = re.compile(r"\b(?:hp|HP)_[A-Za-z0-9_]*")
IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
ARTICLE = re.compile(r"\b([Aa])n (`?(?:harp_|HARP_|ut_|UT_|flow_|FLOW_))")

# (path prefix of the declaring file, new prefix): first match wins.
HOMES = [
    ("include/harp.h", "harp_"),
    ("include/harp/status.h", "harp_"),
    ("include/harp/advanced.h", "harp_"),
    ("include/harp/error.h", "ut_"),
    ("include/harp/tensor.h", "ut_"),
    ("src/util/", "ut_"),
    ("include/harp/onnx.h", "onnx_"),
    ("src/frontend/onnx_", "onnx_"),
    ("include/harp/flow.h", "flow_"),
    ("src/frontend/flow", "flow_"),
    ("src/runtime/flow", "flow_"),
    ("include/harp/frontend.h", "hg_"),
    ("src/frontend/", "hg_"),
    ("include/harp/function.h", "fn_"),
    ("include/harp/cpu.h", "rt_"),
    ("include/harp/gpu.h", "rt_"),
    ("include/harp/tune.h", "rt_"),
    ("include/harp/knobs.h", "rt_"),
    ("include/harp/pipeline.h", "rt_"),
    ("src/runtime/", "rt_"),
]
# Where the rule would read badly or collide.
EXACT = {
    "hp_flow": "flow_program",  # the host program (harp/flow.h)
    "HP_X_NAME": "HARP_X_NAME",
    "hp_onnx_name": "onnx_name_entry",  # onnx_name is a parameter's name in the importer  # src/util/error.c's row of HARP_ERRORS
}
# The code generators: identifiers in their string literals are generated code's.
GENERATORS = ("src/backend/", "src/poly/")
C_DIRS = ("src/", "include/", "tests/", "examples/", "bench/")
C_EXT = (".c", ".h", ".cc")
SKIP = ("bench/RESULTS.md", "scripts/rename_prefixes.py")


def die(msg):
    print(f"rename_prefixes: {msg}", file=sys.stderr)
    sys.exit(2)


def home_prefix(path):
    """The new prefix for names declared in path, or None."""
    for where, prefix in HOMES:  # a header by its name, a folder or file stem by its start
        if path == where or (not where.endswith(".h") and path.startswith(where)):
            return prefix
    return None


def target(name, home):
    """The new spelling of name declared in home (a path), or None."""
    if name in EXACT:
        return EXACT[name]
    prefix = home_prefix(home)
    if prefix is None:
        return None
    rest = name[3:]
    if name.startswith("HP_"):
        prefix = prefix.upper()
    if rest.startswith(prefix):  # hp_onnx_shape -> onnx_shape, not onnx_onnx_shape
        return rest
    if rest + "_" == prefix:
        return None  # hp_flow: needs an EXACT entry
    return prefix + rest


# ---- C lexing: code, comments and literals apart ---------------------------------------
SEG = re.compile(
    r"""(?P<comment>//[^\n]*|/\*.*?\*/)
      | (?P<string>"(?:\\.|[^"\\\n])*"?)
      | (?P<char>'(?:\\.|[^'\\\n])*'?)""",
    re.S | re.X,
)


def c_segments(text):
    """Yield (kind, text) with kind code, comment, string or char; their
    concatenation is text."""
    pos = 0
    for m in SEG.finditer(text):
        if m.start() > pos:
            yield "code", text[pos : m.start()]
        yield m.lastgroup, m.group()
        pos = m.end()
    if pos < len(text):
        yield "code", text[pos:]


def tree_files(root):
    out = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=root, capture_output=True, text=True, check=True,
    ).stdout
    files = sorted({f for f in out.split("\0") if f and os.path.isfile(os.path.join(root, f))})
    c_files = [f for f in files if f.endswith(C_EXT) and f.startswith(C_DIRS)]
    md_files = [f for f in files if f.endswith(".md") and (f == "README.md" or f.startswith(("docs/", "src/")))]
    keep = []
    for f in c_files + md_files:
        if f in SKIP:
            continue
        head = open(os.path.join(root, f), encoding="utf-8", errors="surrogateescape").read(2000)
        if "@generated" in head or "DO NOT EDIT" in head:
            print(f"rename_prefixes: skipping generated file {f}")
            continue
        keep.append(f)
    return [f for f in keep if f.endswith(C_EXT)], [f for f in keep if f.endswith(".md")]


def read(root, f):
    with open(os.path.join(root, f), encoding="utf-8", errors="surrogateescape") as fh:
        return fh.read()


def survey(root, c_files):
    """The library names (code tokens under src/ include/), the generated
    code's names (in the generators' strings), every identifier in code, and
    the token-pasting prefixes (name -> files where `name##` appears)."""
    lib, gen, idents, pasted = set(), set(), set(), defaultdict(set)
    for f in c_files:
        text = read(root, f)
        for kind, seg in c_segments(text):
            if kind == "code":
                names = IDENT.findall(seg)
                idents.update(names)
                if f.startswith(("src/", "include/")):
                    lib.update(n for n in names if OLD.fullmatch(n))
                    for m in re.finditer(r"\b((?:hp|HP)_[A-Za-z0-9_]*_)\s*##", seg):
                        pasted[m.group(1)].add(f)
            elif kind == "string" and f.startswith(GENERATORS):
                gen.update(OLD.findall(seg))
    return lib, gen, idents, pasted


def declarations(root, c_files):
    """name -> files where universal-ctags finds it declared."""
    ctags = shutil.which("ctags") or shutil.which("universal-ctags")
    if not ctags:
        die("needs universal-ctags (apt-get install universal-ctags)")
    files = [f for f in c_files if f.startswith(("src/", "include/"))]
    out = subprocess.run(
        [ctags, "-x", "--languages=C,C++", "--langmap=C:+.h", "--kinds-C=+p-l", "--extras=-F", "-L", "-"],
        cwd=root, input="\n".join(files), capture_output=True, text=True, check=True,
    ).stdout
    decl = defaultdict(set)
    for line in out.splitlines():
        parts = line.split(None, 4)
        if len(parts) >= 4 and OLD.fullmatch(parts[0]):
            decl[parts[0]].add(parts[3])
    return decl


def best_home(paths):
    """The declaring file that decides: a public header, another header, a
    .c file; the first of them with a row in HOMES (a name another layer's
    header declares belongs where it is defined)."""
    ranked = sorted(paths, key=lambda p: (not p.startswith("include/"), not p.endswith(".h"), p))
    return next((p for p in ranked if home_prefix(p)), ranked[0])


def build_map(lib, decl, pasted):
    """old name -> new name for every library name; dies listing the names
    it cannot place."""
    mapping, unplaced = {}, []
    for name in sorted(lib):
        home = None
        if name in decl:
            home = best_home(decl[name])
        else:  # made by pasting (HP_OP_##e), or a pasting prefix itself (HP_OP_)
            pre = [p for p in pasted if name.startswith(p)]
            if pre:
                home = best_home(pasted[max(pre, key=len)])
        new = target(name, home) if home else EXACT.get(name)
        if new is None:
            unplaced.append(f"{name} (declared in {home or 'no file ctags found'})")
        else:
            mapping[name] = new
    if unplaced:
        die("no prefix for these names; add a HOMES row or an EXACT entry:\n  " + "\n  ".join(unplaced))
    return mapping


def check_map(mapping, idents):
    olds = defaultdict(list)
    for old, new in mapping.items():
        olds[new].append(old)
    clash = [f"{' and '.join(v)} -> {k}" for k, v in olds.items() if len(v) > 1]
    clash += [f"{old} -> {new}, which already exists" for old, new in mapping.items() if new in idents and new not in mapping]
    if clash:
        die("the renaming would merge names:\n  " + "\n  ".join(sorted(clash)))


def sub_names(text, mapping):
    return OLD.sub(lambda m: mapping.get(m.group(), m.group()), text)


def prose_name(name, mapping, gen_only):
    """In prose, a name the code does not define but spells with a renamed
    prefix: `HP_E_X` (a placeholder) -> HARP_E_X, `hp_gpu_session_*` ->
    rt_gpu_session_*.  None when it is no such name."""
    if name in gen_only:
        return None
    if name.endswith("_"):  # a family: every member renamed alike
        news = {mapping[n][: len(mapping[n]) - len(n) + len(name)] for n in mapping
                if n.startswith(name) and mapping[n].endswith(n[len(name):])}
        members = [n for n in mapping if n.startswith(name)]
        if len(news) == 1 and members and all(mapping[n].endswith(n[len(name):]) for n in members):
            return news.pop()
        return None
    family = prose_name(name + "_", mapping, gen_only)  # hp_onnx_load: the family hp_onnx_load_*
    if family:
        return family[:-1]
    stems = [p for p in mapping if p.endswith("_") and name.startswith(p)]  # pasting prefixes (HP_E_)
    return mapping[max(stems, key=len)] + name[len(max(stems, key=len)):] if stems else None


def sub_prose(text, mapping, plain, gen_only):
    """A comment or a Markdown paragraph: a name that is also the generated
    code's (hp_max) is the library's unless the text speaks of generated
    code, i.e. names one of its helpers (hp_floord)."""
    about_gen = any(n in gen_only for n in OLD.findall(text))
    use = plain if about_gen else mapping

    def one(m):
        n = m.group()
        if n in mapping:
            return use.get(n, n)
        return prose_name(n, mapping, gen_only) or n

    new = OLD.sub(one, text)
    if new != text:  # "an hp_error" -> "a harp_error"
        new = ARTICLE.sub(lambda m: m.group(1) + " " + m.group(2), new)
    return new


def rewrite_c(text, mapping, plain, gen_only):
    """Code: every library name.  Strings: those that are not also the
    generated code's.  Comments: sub_prose."""
    out = []
    for kind, seg in c_segments(text):
        if kind == "code":
            out.append(sub_names(seg, mapping))
        elif kind == "string":
            out.append(sub_names(seg, plain))
        elif kind == "comment":
            out.append(sub_prose(seg, mapping, plain, gen_only))
        else:
            out.append(seg)
    return "".join(out)


PAD = re.compile(r"(?<=\S)( {2,})(\\$|/[*/])")


def realign(old, new):
    """Keep columns: where a renamed line pads before a trailing backslash or
    comment (a macro's continuation, a field's note), pad it to the column
    it had (one space at least)."""
    out = []
    for a, b in zip(old.split("\n"), new.split("\n")):
        ma, mb = list(PAD.finditer(a)), list(PAD.finditer(b))
        if a != b and ma and mb and ma[-1].group(2) == mb[-1].group(2) and ma[-1].start(2) != mb[-1].start(2):
            m = mb[-1]
            pad = max(1, ma[-1].start(2) - m.start(1))
            b = b[: m.start(1)] + " " * pad + b[m.start(2):]
        out.append(b)
    return "\n".join(out)


def rewrite_md(text, mapping, plain, gen_only):
    return "".join(sub_prose(p, mapping, plain, gen_only) for p in re.split(r"(\n\s*\n)", text))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    ap.add_argument("--dry-run", action="store_true", help="print the mapping and the files it would change")
    ap.add_argument("--check", action="store_true", help="exit 1 if anything is left to rename")
    a = ap.parse_args()
    root = os.path.abspath(a.root)
    c_files, md_files = tree_files(root)
    lib, gen, idents, pasted = survey(root, c_files)
    mapping = build_map(lib, declarations(root, c_files), pasted)
    check_map(mapping, idents)
    both = sorted(n for n in mapping if n in gen)
    plain = {k: v for k, v in mapping.items() if k not in gen}
    gen_only = gen - set(mapping)
    changed = {}
    for f in c_files + md_files:
        text = read(root, f)
        if f.endswith(C_EXT):
            new = realign(text, rewrite_c(text, mapping, plain, gen_only))
        else:
            new = rewrite_md(text, mapping, plain, gen_only)
        if new != text:
            changed[f] = new
    if a.dry_run:
        for old, new in sorted(mapping.items()):
            print(f"{old} -> {new}{'   (also generated code: code only)' if old in gen else ''}")
        print(f"{len(mapping)} names, {len(changed)} files would change:")
        for f in sorted(changed):
            print(f"  {f}")
        return 0
    if a.check:
        if changed:
            print(f"{len(mapping)} names left to rename in {len(changed)} files: run scripts/rename_prefixes.py")
            return 1
        print("nothing to rename")
        return 0
    for f, text in changed.items():
        with open(os.path.join(root, f), "w", encoding="utf-8", errors="surrogateescape") as fh:
            fh.write(text)
    print(f"renamed {len(mapping)} names in {len(changed)} files"
          + (f"; kept in generated code and its docs: {', '.join(both)}" if both else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
