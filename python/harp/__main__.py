"""python -m harp ... — the `harp` command (`python -m harp --help`): the
CLI the package carries (harp/bin/harp in a wheel), else $HARP_BIN, else
`harp` on the PATH.  Its arguments, output and exit code are the CLI's.

Needs: the harp CLI.  Gives: main().
"""
import os
import shutil
import sys


def cli_path():
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", "harp")
    for p in (here, os.environ.get("HARP_BIN"), shutil.which("harp")):
        if p and os.path.isfile(p) and os.access(p, os.X_OK):
            return p
    return None


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    p = cli_path()
    if not p:
        print("harp: the harp command is not installed with this package (set HARP_BIN to it)", file=sys.stderr)
        return 2
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(p, [p] + list(argv))


if __name__ == "__main__":
    sys.exit(main())
