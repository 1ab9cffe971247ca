#!/usr/bin/env python3
"""costrank.py — does the CPU cost model rank plans?  `harp tune` a set of GEMMs and
convolutions and compare its estimates with the measured times of the tuned points.

    python3 bench/costrank.py [--harp build/harp] [--repeat 10] [--budget 10]
                              [--only SUBSTR] [--uncalibrated] [--json F] [--verbose]

Per shape: `harp tune --no-store` (every point of the search the tuner keeps, the
default first, the region's kernel timed alone, all points interleaved; median and
minimum of --repeat rounds), then
  rho_med   Spearman (average ranks for ties) of the estimates vs the medians
  rho_min   the same vs the minima (less sensitive to other users of the cores)
  dflt      the default plan's median over the best median (<= 1.10: "within 10%")
Pooled: Spearman over every point of every shape of (estimate / the shape's default
estimate) vs (median / the shape's default median): ranks within shapes, shape size
divided out.  --verbose prints every point (estimate, median, minimum, plan) under
its shape, the estimates' order next to the measured one.  (The raw pooled Spearman of absolute times is printed too but is
dominated by the shapes' sizes, so it says little about ranking plans.)
The calibration (harp calibrate) is measured at first use, in the cache directory
($HARP_CACHE_DIR); a conv tuned both ways leaves Winograd's measured speed-up in it,
which the next run's estimates use.  --uncalibrated runs with the knob cpu_calib=off
(the uncalibrated §6 formula) instead, for comparison.  About 3 minutes on a quiet
2-core machine with a cold compile cache (13 shapes x 10 points).
Goals (issue 27): Spearman >= 0.6; the default within 10% of the best on >= 90% of
the regions.  Not a test: figures go to bench/RESULTS.md.

    python3 bench/costrank.py --heldout [...]

runs the same on shapes outside the 13 (GEMMS_HELD, CONVS_HELD), so that a change to the
cost model is not judged on the shapes it was tuned on alone.

    python3 bench/costrank.py --models OTHER_HARP [--budget 16] [--only gemm]

compares two cost models on the same measurements: each shape is tuned by --harp
(the timings), and OTHER_HARP estimates the same points (`harp tune --repeat 1`, its
own timings unused); per shape the Spearman of either model's estimates against
--harp's medians and minima, over the points both list (--budget 16: every point
of the CPU search space, so both list the same ones).

    python3 bench/costrank.py --stability 4 [--base OTHER_HARP] [--only "gemm 1000x512x50"]

instead tunes each selected shape RUNS times (with --base: alternating with that
harp, in one process) and prints per point its minimum and median in every run and
the spread of the minima (largest / smallest): measurement that depends on the run
(issue 27: one thread pool per point kept alive for the whole tuning) shows here.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

# (name, model, symbols): GEMMs C[M,N] = A[M,K] B[K,N]; convs NCHW, pad 1 for 3x3.
GEMMS = [(1024, 1024, 1024), (200, 256, 100), (384, 512, 96), (64, 2048, 1000), (1000, 512, 50),
         (96, 768, 3072), (130, 130, 130)]
CONVS = [(3, 64, 56, 64), (3, 128, 28, 128), (3, 256, 14, 256), (3, 512, 7, 512), (1, 256, 56, 64),
         (1, 64, 56, 256)]

# --heldout: shapes the cost model's terms were not looked at on (check a change against
# them, not only against the 13 above)
GEMMS_HELD = [(512, 384, 200), (48, 1024, 640)]
CONVS_HELD = [(3, 96, 20, 48), (3, 48, 40, 80), (3, 192, 10, 160), (3, 32, 64, 64)]

CONV_HARP = """graph<N=1, C={c}, H={h}, W={h}, K={k}> main(x: f32[N, C, H, W], w: f32[K, C, {r}, {r}], b: f32[K]) -> (y: f32[N, K, H, W]) {{
    y = conv2d(x, w, bias=b, pad=[{p}, {p}])
    return y
}}
"""


def shapes(tmp, heldout=False):
    out = []
    for m, k, n in GEMMS_HELD if heldout else GEMMS:
        out.append((f"gemm {m}x{k}x{n}", os.path.join(HERE, "models", "gemm.json"),
                    ["--sym", f"M={m}", "--sym", f"K={k}", "--sym", f"N={n}"]))
    for r, c, h, k in CONVS_HELD if heldout else CONVS:
        path = os.path.join(tmp, f"conv{r}_{c}_{h}_{k}.harp")
        with open(path, "w") as f:
            f.write(CONV_HARP.format(c=c, h=h, k=k, r=r, p=r // 2))
        out.append((f"conv{r}x{r} {c}->{k} {h}x{h}", path, []))
    return out


ROW = re.compile(r"^\s+(\d+)\s+(default\+best|default|best|)\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)\s+(.*)$")


def parse(text):
    """The regions of a `harp tune` report: [(region, [(est, med, min, plan), ...])]."""
    regions, cur = [], None
    for line in text.splitlines():
        if line.startswith("region "):
            cur = (line.split()[1], [])
            regions.append(cur)
            continue
        m = ROW.match(line)
        if cur is not None and m:
            cur[1].append((float(m.group(3)), float(m.group(4)), float(m.group(5)), m.group(6)))
    return regions


def ranks(x):
    order = sorted(range(len(x)), key=lambda i: x[i])
    r = [0.0] * len(x)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and x[order[j + 1]] == x[order[i]]:
            j += 1
        for q in range(i, j + 1):
            r[order[q]] = (i + j) / 2.0
        i = j + 1
    return r


def spearman(x, y):
    if len(x) < 2:
        return None
    rx, ry = ranks(x), ranks(y)
    mx, my = sum(rx) / len(rx), sum(ry) / len(ry)
    sxy = sum((a - mx) * (b - my) for a, b in zip(rx, ry))
    sxx = sum((a - mx) ** 2 for a in rx)
    syy = sum((b - my) ** 2 for b in ry)
    return sxy / (sxx * syy) ** 0.5 if sxx > 0 and syy > 0 else None


def fmt(v):
    return "  n/a" if v is None else f"{v:+.2f}"


def verbose_points(pts):
    """--verbose: a shape's points, each with its rank by estimate and by median (1: fastest)."""
    re_, rm = ranks([q[0] for q in pts]), ranks([q[1] for q in pts])
    print("    #   estimate_ms  median_ms     min_ms  rank_est rank_med  plan")
    for i, (e, med, mn, plan) in enumerate(pts):
        print(f"   {i:2d} {e:12.4f} {med:10.4f} {mn:10.4f} {re_[i] + 1:8.1f} {rm[i] + 1:8.1f}  {plan}")


def tune(a, harp, model, syms, log):
    """One `harp tune --no-store` of model: parse()'s regions, or None when it failed."""
    cmd = [harp, "tune", model, *syms, "--repeat", str(a.repeat), "--budget", str(a.budget), "--no-store", "--log", log]
    if a.uncalibrated:
        cmd += ["--knob", "cpu_calib=off"]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode:
        print(f"{model}: harp tune failed: {p.stderr.strip()[-300:]}", file=sys.stderr)
        return None
    return parse(p.stdout)


def stability(a):
    """--stability: every selected shape tuned a.stability times by each harp, interleaved;
    per point the minimum and median of each run and the spread of the minima."""
    harps = [("branch", a.harp)] + ([("base", a.base)] if a.base else [])
    print(f"load {os.getloadavg()[0]:.1f}, {a.stability} runs, --repeat {a.repeat} --budget {a.budget}")
    with tempfile.TemporaryDirectory() as tmp:
        log = os.path.join(tmp, "tune.csv")
        for name, model, syms in shapes(tmp, a.heldout):
            if a.only and a.only not in name:
                continue
            runs = {h: [] for h, _ in harps}
            for _ in range(a.stability):
                for h, path in harps:
                    regs = tune(a, path, model, syms, log)
                    if regs:
                        runs[h].append(regs[0][1])
            for h, rs in runs.items():
                print(f"{name} ({h}): point  min per run | median per run | spread of the minima")
                for i in range(min(len(r) for r in rs) if rs else 0):
                    mins, meds = [r[i][2] for r in rs], [r[i][1] for r in rs]
                    print(f"  #{i:2d} " + " ".join(f"{x:.3f}" for x in mins) + " | " +
                          " ".join(f"{x:.3f}" for x in meds) + f" | {max(mins) / min(mins):.2f}x", flush=True)


def plan_key(plan):
    """A point's plan without the tuner's '(same kernel as #N)' note."""
    return plan.split(" (same kernel")[0].strip()


def models(a):
    """--models: this harp's and another's estimates against this harp's timings."""
    print(f"load {os.getloadavg()[0]:.1f}, --repeat {a.repeat} --budget {a.budget}; rho vs medians / minima")
    print(f"{'shape':28s} {'pts':>3s}  {'this med':>8s} {'this min':>8s}  {'other med':>9s} {'other min':>9s}")
    sums = {"this": [], "other": []}
    with tempfile.TemporaryDirectory() as tmp:
        log = os.path.join(tmp, "tune.csv")
        for name, model, syms in shapes(tmp, a.heldout):
            if a.only and a.only not in name:
                continue
            mine = tune(a, a.harp, model, syms, log)
            rep = a.repeat
            a.repeat = 1
            other = tune(a, a.models, model, syms, log)
            a.repeat = rep
            if not mine or not other:
                continue
            est_o = {plan_key(q[3]): q[0] for q in other[0][1]}
            pts = [q for q in mine[0][1] if plan_key(q[3]) in est_o]
            med, mn = [q[1] for q in pts], [q[2] for q in pts]
            r = {"this": [q[0] for q in pts], "other": [est_o[plan_key(q[3])] for q in pts]}
            rho = {k: (spearman(v, med), spearman(v, mn)) for k, v in r.items()}
            for k in sums:
                sums[k].append(rho[k])
            print(f"{name:28s} {len(pts):3d}  {fmt(rho['this'][0]):>8s} {fmt(rho['this'][1]):>8s}  "
                  f"{fmt(rho['other'][0]):>9s} {fmt(rho['other'][1]):>9s}", flush=True)
    for k, v in sums.items():
        med = [x[0] for x in v if x[0] is not None]
        mn = [x[1] for x in v if x[1] is not None]
        if med and mn:
            print(f"{k:5s} model: mean rho vs medians {sum(med) / len(med):+.2f}, vs minima {sum(mn) / len(mn):+.2f}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--harp", default=os.path.join(ROOT, "build", "harp"))
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--budget", type=int, default=10)
    ap.add_argument("--only", default="")
    ap.add_argument("--uncalibrated", action="store_true")
    ap.add_argument("--json", default="")
    ap.add_argument("--verbose", action="store_true", help="print every point of every shape")
    ap.add_argument("--stability", type=int, default=0, help="RUNS: tune each shape RUNS times, print the spread")
    ap.add_argument("--base", default="", help="with --stability: another harp, alternated with --harp")
    ap.add_argument("--heldout", action="store_true", help="the held-out shapes (GEMMS_HELD, CONVS_HELD) instead")
    ap.add_argument("--models", default="", help="OTHER_HARP: its estimates of the same points (same timings)")
    a = ap.parse_args()
    if a.models:
        return models(a)
    if a.stability > 0:
        return stability(a)
    load = os.getloadavg()[0]
    rows, pooled_e, pooled_m, raw_e, raw_m = [], [], [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        log = os.path.join(tmp, "tune.csv")
        for name, model, syms in shapes(tmp, a.heldout):
            if a.only and a.only not in name:
                continue
            regs = tune(a, a.harp, model, syms, log)
            for region, pts in regs or []:
                est = [q[0] for q in pts]
                med = [q[1] for q in pts]
                mn = [q[2] for q in pts]
                best = min(med)
                r = {"shape": name, "region": region, "points": len(pts), "rho_med": spearman(est, med),
                     "rho_min": spearman(est, mn), "default_over_best": med[0] / best if best > 0 else None,
                     "default_plan": pts[0][3], "best_plan": pts[med.index(best)][3]}
                rows.append(r)
                for e, m in zip(est, med):
                    pooled_e.append(e / est[0] if est[0] > 0 else 0)
                    pooled_m.append(m / med[0] if med[0] > 0 else 0)
                    raw_e.append(e)
                    raw_m.append(m)
                print(f"{name:28s} {region:10s} pts {len(pts):2d}  rho_med {fmt(r['rho_med'])}  rho_min "
                      f"{fmt(r['rho_min'])}  dflt/best {r['default_over_best']:.3f}", flush=True)
                if a.verbose:
                    verbose_points(pts)
    within = [r for r in rows if r["default_over_best"] is not None and r["default_over_best"] <= 1.10]
    rho = [r["rho_med"] for r in rows if r["rho_med"] is not None]
    summary = {"model": "uncalibrated" if a.uncalibrated else "calibrated", "regions": len(rows),
               "mean_rho_med": sum(rho) / len(rho) if rho else None,
               "pooled_rho_normalised": spearman(pooled_e, pooled_m), "pooled_rho_raw": spearman(raw_e, raw_m),
               "default_within_10pct": len(within), "load": load, "repeat": a.repeat, "budget": a.budget}
    print(f"\n{summary['model']} cost model, {len(rows)} regions, load {load:.1f}:")
    print(f"  mean per-shape Spearman (estimate vs median) {fmt(summary['mean_rho_med'])}")
    print(f"  pooled Spearman, normalised per shape       {fmt(summary['pooled_rho_normalised'])}")
    print(f"  pooled Spearman, raw times (size-dominated) {fmt(summary['pooled_rho_raw'])}")
    print(f"  default within 10% of the best: {len(within)}/{len(rows)}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"summary": summary, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
