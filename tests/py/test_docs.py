"""The documentation points at things that exist: every repository path a
page of README.md or docs/ names (docs/..., bench/..., src/..., tests/...,
a Markdown link) is there; every option a command's --help prints is in
docs/cli.md; README.md stays an entrance (docs/contributing.md)."""
import glob
import os
import re
import subprocess

from harp_test import HARP, SRC, Suite

s = Suite("docs")
TOP = ("docs", "bench", "src", "include", "tests", "scripts", "examples")
PAGES = ["README.md"] + sorted(os.path.relpath(p, SRC) for p in glob.glob(os.path.join(SRC, "docs", "*.md")))
PATH = re.compile(r"(?<![\w./-])((?:%s)/[\w./*{},<>-]*[\w*}>])" % "|".join(TOP))
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")
# paths of other repositories a page cites
ELSEWHERE = {"docs/sm90-review.md": {"docs/instructions"}}


def exists(path):
    """A path as the docs write it: plain, a glob (src/**/*.c, cgen_*.c) or a
    {a,b} choice; <name> placeholders and build outputs are not checked."""
    if "<" in path or path.endswith((".npy", ".npz")):
        return True
    path = path.rstrip(".,;:")
    alts = [path]
    m = re.search(r"\{([^}]*)\}", path)
    if m:
        alts = [path[: m.start()] + a + path[m.end():] for a in m.group(1).split(",")]
    return all(glob.glob(os.path.join(SRC, a), recursive=True) for a in alts)


for page in PAGES:
    text = open(os.path.join(SRC, page), encoding="utf-8").read()
    missing = {p for p in PATH.findall(text) if not exists(p)} - ELSEWHERE.get(page, set())
    missing |= {t for t in LINK.findall(text)
                if not re.match(r"[a-z]+:", t) and not os.path.exists(os.path.join(SRC, os.path.dirname(page), t))}
    s.check(f"{page}: every path it names exists", not missing, ", ".join(sorted(missing)))

# every option of every command is in docs/cli.md
cli = open(os.path.join(SRC, "docs", "cli.md"), encoding="utf-8").read()
top = subprocess.run([HARP, "--help"], capture_output=True, text=True).stdout
commands = re.findall(r"^  ([a-z]+)\s{2,}", top, re.M)
s.check("harp --help lists the commands", len(commands) >= 9, top)
for cmd in commands:
    s.check(f"docs/cli.md has harp {cmd}", f"## harp {cmd}" in cli)
    text = subprocess.run([HARP, cmd, "--help"], capture_output=True, text=True).stdout
    opts = set(re.findall(r"(?<![\w-])(--[a-z][a-z-]*|-o)\b", text))
    missing = sorted(o for o in opts if not re.search(r"`%s[ =`]" % re.escape(o), cli))
    s.check(f"docs/cli.md has every option of harp {cmd}", not missing, " ".join(missing))

# docs/options.md's table is harp --help-options' table, row for row (the
# environment that would change a value in effect is left out)
env = {k: v for k, v in os.environ.items() if not (k.startswith("HARP_") or k in ("CC", "TMPDIR"))}
helptext = subprocess.run([HARP, "--help-options"], capture_output=True, text=True, env=env).stdout.splitlines()
head = next((i for i, l in enumerate(helptext) if l.split()[:1] == ["knob"]), len(helptext))
table = []
for row, doc in zip(helptext[head + 1 :: 2], helptext[head + 2 :: 2]):
    t = row.split()  # knob variable type... default now
    table.append((t[0], t[1], " ".join(t[2:-2]), t[-2], doc.strip()))
s.check("harp --help-options prints the knob table", len(table) >= 10, "\n".join(helptext))
options = open(os.path.join(SRC, "docs", "options.md"), encoding="utf-8").read()
rows = [[c.strip().replace("`", "").replace("\\|", "|") for c in l.strip().strip("|").split(" | ")]
        for l in options.splitlines() if re.match(r"\| `[a-z0-9_]+` \| `[A-Z0-9_]+` \|", l)]
s.check("docs/options.md has the knob table's rows, in order", [r[0] for r in rows] == [t[0] for t in table],
        f"docs: {[r[0] for r in rows]}\nhelp: {[t[0] for t in table]}")
for t, r in zip(table, rows):
    s.check(f"docs/options.md: knob {t[0]} as --help-options prints it", tuple(r) == t, f"docs: {r}\nhelp: {list(t)}")

# README.md is an entrance: short, the quick start on the first screen
readme = open(os.path.join(SRC, "README.md"), encoding="utf-8").read().splitlines()
s.check("README.md is at most 200 lines", len(readme) <= 200, str(len(readme)))
first = "\n".join(readme[:40])
s.check("the quick start is on the first screen", "make demo" in first and "make test" in first)
s.close()
