"""The CPU calibration through the CLI (docs/plan.md §19): `harp calibrate`
measures once and then shows the file; a malformed file is reported with its
line and measured again (by `harp calibrate` and by `harp tune`), never a
crash; compiles rank with it (plan.json's estimates change) unless the knob
cpu_calib is off; `harp tune --backend cuda` without a GPU refuses cleanly."""
import glob
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))
from harp_test import HARP, SRC, Suite  # noqa: E402

GEMM = os.path.join(SRC, "bench", "models", "gemm.json")
SYMS = ["--sym", "M=96", "--sym", "K=64", "--sym", "N=100"]

s = Suite("calibrate_cli")
work = tempfile.mkdtemp(prefix="harp_calib_")
# a private cache, the calibration read (the suite's default is off)
env = dict(os.environ, HARP_CACHE_DIR=os.path.join(work, "cache"), HARP_CPU_CALIB="auto")


def harp(*args, extra=None, timeout=300):
    return subprocess.run([HARP, *args], capture_output=True, text=True, timeout=timeout, env=dict(env, **(extra or {})))


def calib_file():
    files = glob.glob(os.path.join(work, "cache", "calib", "cpu-*.txt"))
    return files[0] if len(files) == 1 else None


def estimate(*knobs):
    d = tempfile.mkdtemp(dir=work)
    r = harp("run", GEMM, *SYMS, "--random-inputs", "--dump", "plan", "--dump-dir", d, "--out", os.path.join(d, "o"),
             *knobs)
    if r.returncode:
        return None
    with open(os.path.join(d, "plan.json")) as f:
        plans = json.load(f)
    ests = [p["time_est"] for p in plans.get("plans", []) if p.get("time_est")]
    return ests[0] if ests else json.dumps(plans)


uncal = estimate()
r = harp("calibrate")
s.check("harp calibrate measures", r.returncode == 0 and "measured in" in r.stdout, r.stdout + r.stderr)
path = calib_file()
s.check("the calibration file is in <cache>/calib", path is not None)
text = open(path).read() if path else ""
s.check("it holds the figures", all(k in text for k in ("harp-calibration 1", "machine cpu:", "mem_gbs", "mk ")), text)
r = harp("calibrate")
s.check("a second harp calibrate reads the file", r.returncode == 0 and "read from" in r.stdout, r.stdout)

cal = estimate()
off = estimate("--knob", "cpu_calib=off")
s.check("compiles rank with the calibration", isinstance(cal, float) and cal != uncal, f"{cal} vs {uncal}")
s.check("cpu_calib=off: the uncalibrated model", off == uncal, f"{off} vs {uncal}")

# bad files: a located error, measured again, never a crash
for bad, what in (("harp-calibration 1\nmem_gbs banana\n", ":2:"), ("", "no 'mem_gbs' line"),
                  ("\x00\x01garbage", "NUL"), ("harp-calibration 1\nmachine cpu:another\n", "another machine")):
    with open(path, "w") as f:
        f.write(bad)
    r = harp("calibrate")
    s.check(f"harp calibrate on a bad file ({what}): reported, measured again",
            r.returncode == 0 and "the file was bad" in r.stdout and what in r.stdout and "measured in" in r.stdout,
            r.stdout + r.stderr)
    s.check("the file is good again", "mk " in open(path).read())
with open(path, "w") as f:
    f.write("harp-calibration 1\nmem_gbs -5\n")
s.check("a compile over a bad file uses the uncalibrated model", estimate() == uncal)
r = harp("tune", GEMM, *SYMS, "--budget", "2", "--repeat", "2", "--warmup", "0", "--no-store", "--log",
         os.path.join(work, "t.csv"))
s.check("harp tune over a bad file: reported and measured again",
        r.returncode == 0 and "calibration file was bad" in r.stdout and "calibration measured" in r.stdout,
        r.stdout + r.stderr)
r = harp("tune", GEMM, *SYMS, "--budget", "2", "--repeat", "2", "--warmup", "0", "--no-store", "--log",
         os.path.join(work, "t.csv"), extra={"HARP_CPU_CALIB": "off"})
s.check("harp tune with cpu_calib off says so", r.returncode == 0 and "uncalibrated" in r.stdout, r.stdout + r.stderr)

# a 3x3 conv tuned over both Winograd and the direct/GEMM kernels: the ratio is
# noted in the calibration (a "wino" line), except with --no-store, which leaves
# every stored file alone (the plan cache and the calibration)
CONV = os.path.join(SRC, "tests", "models", "conv_pad_hw.harp")
TUNE_CONV = ("tune", CONV, "--sym", "H=20", "--budget", "6", "--repeat", "1", "--warmup", "0", "--log",
             os.path.join(work, "c.csv"))
with open(calib_file(), "rb") as f:
    before = f.read()
r = harp(*TUNE_CONV, "--no-store")
with open(calib_file(), "rb") as f:
    after = f.read()
s.check("harp tune --no-store of a conv leaves the calibration as it was",
        r.returncode == 0 and "winograd_3x3" in r.stdout and after == before, r.stdout + r.stderr)
s.check("and caches no plan", r.returncode == 0 and not glob.glob(os.path.join(work, "cache", "plans", "*.json")))
r = harp(*TUNE_CONV)
with open(calib_file()) as f:
    wino = [ln for ln in f if ln.startswith("wino ")]
s.check("harp tune of a conv notes Winograd's measured ratio", r.returncode == 0 and len(wino) >= 1, r.stdout + r.stderr)
for p in glob.glob(os.path.join(work, "cache", "plans", "*.json")):
    os.remove(p)

r = harp("calibrate", "extra")
s.check("harp calibrate ARG: a usage error", r.returncode == 1 and "unexpected argument" in r.stderr, r.stderr)

# the GPU tuner without a GPU: a clear error, nothing cached
r = harp("tune", GEMM, *SYMS, "--backend", "cuda", extra={"HARP_LIBCUDA": "/nonexistent/libcuda.so.1"})
s.check("harp tune --backend cuda without a GPU: Unsupported",
        r.returncode == 1 and "Unsupported" in r.stderr and "no GPU" in r.stderr and "Traceback" not in r.stderr,
        r.stderr)
s.check("nothing cached", not glob.glob(os.path.join(work, "cache", "plans", "*.json")))
s.close()
