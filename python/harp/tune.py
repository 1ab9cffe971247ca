"""tune.py — harp.tune(): `harp tune` from Python (docs/python.md, "Tuning").

The tuner measures, on this machine, the best points of the Schedule Plan
search space of every region whose kernel follows a plan, keeps the fastest
in the plan cache (a later compile of the same model, ShapeSet and machine
uses it: a new InferenceSession picks it up) and appends every point to the
CSV log.  The report it returns is the C API's (harp_tune) JSON, as a dict.

Needs: harp._harp (harp_tune), session.py (the compile, the progress line).
Gives: tune.
"""
import json
import os
import sys

from . import _harp
from ._errors import CLASSES
from .session import InferenceSession, _Progress, _assignments, _options


class _TuneProgress:
    """The tuner's events as (stage, fraction) for _Progress: the fraction is the regions done plus
    the share of this one (compiling its points is the first half, measuring the second).  Off a
    terminal only a phase's start and end reach it, so a log gets a few lines, not one per round."""

    def __init__(self, name, setting, callback):
        self.line = _Progress(name, setting if setting is True else False, verb="tuning")
        self.callback, self.last = callback, None

    def __call__(self, region, index, nregions, phase, done, total, best_ms):
        if self.callback is not None and self.callback(region, index, nregions, phase, done, total, best_ms):
            return True
        share = 1.0 if phase == "done" else (0.5 if phase == "measure" else 0.0) + 0.5 * done / max(total, 1)
        fraction = (index + share) / max(nregions, 1)
        key = (region, phase)
        if key != self.last or phase == "done" or done == total or sys.stderr.isatty():
            self.last = key
            what = "compiling points" if phase == "compile" else "measuring" if phase == "measure" else "done"
            best = f", best {best_ms:.3f} ms" if best_ms > 0 else ""
            self.line(f"region {index + 1}/{nregions} {region}: {what} {done}/{total}{best}", fraction)
        return False

    def close(self):
        self.line.close()


def tune(model, shapes=None, options=None, budget=12, repeat=20, warmup=3, regions=None, log=None, store=True,
         seed=1, progress=True, callback=None):
    """Tune model (a path, or an ONNX model's bytes) for the CPU on this machine, as `harp tune` does.

    shapes: {input: shape} for dynamic dims (every one must be given); options: SessionOptions or a
    dict of its fields (cache_dir, knobs, params of a .harp / .json model ...).  budget: plan points per
    region (at most 20); repeat / warmup: timed and untimed rounds; regions: names to tune (None: all);
    log: the CSV log (None: <cache dir>/tune.csv); store=False measures without writing the plan cache;
    seed: the random inputs.  progress: True for a line (tqdm on a terminal) when it takes over a
    second; callback(region, index, nregions, phase, done, total, best_ms) is called as it goes, and
    a true return stops it (harp.Cancelled), as Ctrl-C does.  Returns the report: a dict with the
    model, ShapeSet, binding, machine, log, and per region its points (plan, estimate_ms,
    median_ms, ...), default_ms, best_ms, speedup and the Spearman correlation of the cost model.
    """
    o = _options(options)
    o.progress = False
    if shapes is not None:
        o.shapes = shapes
    if not 1 <= int(budget) <= 20 or int(repeat) < 1 or int(warmup) < 0:
        raise CLASSES["UsageError"](f"tune: budget {budget} (1..20), repeat {repeat} (>= 1), warmup {warmup} (>= 0)")
    sess = InferenceSession(model, o, providers=["cpu"])
    try:
        b = sess._default
        if b is None:
            raise CLASSES["UsageError"]("tune: the model has dynamic dims: give shapes= for every one of them")
        prog = _TuneProgress(sess._name, progress, callback)
        try:
            text = _harp.tune(b.c, b.params, _assignments(o.knobs, "knobs"),
                              os.fspath(o.cache_dir) if o.cache_dir else "", o.precision or "", int(budget),
                              int(repeat), int(warmup) if warmup else -1, int(seed), not store,
                              os.fspath(log) if log else "", [str(r) for r in regions or ()], prog)
        finally:
            prog.close()
    finally:
        sess.close()
    return json.loads(text)
