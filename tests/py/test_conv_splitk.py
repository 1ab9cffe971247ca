"""CPU split-K for convolutions (issue 27; docs/plan.md §18): `algo_choice
matmul splitk_reduce; splitk N` on a conv runs the implicit GEMM with K cut
into N slices of whole KC blocks, each writing fp32 partials, and a
finishing pass ($P_ksum) that adds them in slice order and applies the
epilogue.

For each case, two --plan overrides that differ only in split-K (or in the
slice count): both run, both are marked applied in plan.json, both match
numpy float64 (fe_ref.conv2d), and the C differs (the split one has the
slices' pass and says its count).  Cases: odd channel counts with a K tail
and bias + relu; stride 2 with padding, batch 2, bias, a residual and relu;
a long K (512 -> 512 3x3 at 7x7: K = 4608) at 2 and 4 slices; a 5x5 window
with pad 2; a grouped conv; a 1x1 conv read as a GEMM (K = 1024); the AVX2 and scalar variants.  Then what cannot run is refused with an error and no output:
more slices than K tiles and more than 64 (located in the plan file),
Winograd with split-K (located)."""
import os
import re
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from fe_ref import conv2d  # noqa: E402
from harp_test import Suite  # noqa: E402
from test_cpu_plan_fields import code_of, harp_run, inputs_of, one_side, tuning_line, write  # noqa: E402

PLAN = "split m 32; split n 64; split k 64; predicate_tail m.i.i n.i.i k.i.i;"
SK = PLAN + " algo_choice matmul splitk_reduce; splitk {};"


def model(x, w, stride=1, pad=1, residual=False, relu=True, groups=1):
    """A one-conv graph: x, w [and bias b, residual r] -> y; its numpy reference spec."""
    n, c, h, wd = x
    oc, kh, kw = w[0], w[2], w[3]
    oh, ow = (h + 2 * pad - kh) // stride + 1, (wd + 2 * pad - kw) // stride + 1
    ins = [f"x: f32[{n}, {c}, {h}, {wd}]", f"w: f32[{oc}, {w[1]}, {kh}, {kw}]", f"b: f32[{oc}]"]
    if residual:
        ins.append(f"r: f32[{n}, {oc}, {oh}, {ow}]")
    expr = f"conv2d(x, w, bias=b, stride={stride}, pad={pad}{f', groups={groups}' if groups > 1 else ''})"
    if residual:
        expr = f"{expr} + r"
    if relu:
        expr = f"relu({expr})"
    text = (f"graph main({', '.join(ins)}) -> (y: f32[{n}, {oc}, {oh}, {ow}]) {{\n"
            f"    y = {expr}\n    return y\n}}\n")
    return text, dict(stride=stride, pad=pad, residual=residual, relu=relu, groups=groups)


def reference(spec, x):
    f = {k: v.astype(np.float64) for k, v in x.items()}
    g, x_, w_ = spec["groups"], f["x"], f["w"]
    ci, co = x_.shape[1] // g, w_.shape[0] // g
    y = np.concatenate([conv2d(x_[:, i * ci:(i + 1) * ci], w_[i * co:(i + 1) * co], f["b"][i * co:(i + 1) * co],
                               stride=spec["stride"], pad=spec["pad"]) for i in range(g)], axis=1)
    if spec["residual"]:
        y = y + f["r"]
    return np.maximum(y, 0) if spec["relu"] else y


def check_pair(s, what, text, spec, a, b, sa, sb):
    """Plans a and b (split sa / sb ways, 0: unsplit): the C differs, each says its count."""
    path, x = write(text, ".harp"), inputs_of(text)
    want = reference(spec, x)
    ca = one_side(s, f"{what} [A]", path, text, x, a, want, atol=1e-3)
    cb = one_side(s, f"{what} [B]", path, text, x, b, want, atol=1e-3)
    if ca is None or cb is None:
        return
    s.check(f"{what}: the C code differs", code_of(ca) != code_of(cb))
    for side, c, k in (("A", ca, sa), ("B", cb, sb)):
        says = f"splitk {k}" in tuning_line(c) and f"the {k} slices' partials" in c and "_ksum(" in code_of(c)
        s.check(f"{what} [{side}]: " + (f"split {k} ways in the C" if k else "unsplit"),
                says if k else "_ksum(" not in code_of(c) and "splitk" not in tuning_line(c), tuning_line(c))
    print(f"{what}: {tuning_line(ca).strip()}  |  {tuning_line(cb).strip()}", flush=True)


def check_refused(s, what, text, plan, want, located):
    path, x = write(text, ".harp"), inputs_of(text)
    p, d = harp_run(path, x, plan)
    loc = re.search(r"\.plan:1:\d+:", p.stderr) if located else "region" in p.stderr
    s.check(f"{what}: refused ({'located in the plan' if located else 'the region named'})",
            p.returncode != 0 and loc and all(w in p.stderr for w in want), p.stderr[-600:])
    s.check(f"{what}: no output, no model.c",
            not os.path.exists(os.path.join(d, "y.npy")) and not os.path.exists(os.path.join(d, "model.c")))


CASES = [
    # 37 input channels: K = 333, a tail in the last slice's last block; 29 output channels
    ("odd channels, K tail, bias+relu", model((1, 37, 7, 7), (29, 37, 3, 3)), PLAN, SK.format(3), 0, 3),
    ("stride 2, pad, batch 2, residual", model((2, 67, 11, 9), (45, 67, 3, 3), stride=2, residual=True),
     PLAN, SK.format(4), 0, 4),
    ("5x5 pad 2, no relu", model((1, 24, 9, 9), (40, 24, 5, 5), pad=2, relu=False), PLAN, SK.format(5), 0, 5),
    ("long K 512->512 @7", model((1, 512, 7, 7), (512, 512, 3, 3)), PLAN, SK.format(2), 0, 2),
    # a 1x1 conv that the kernel layer reads as a GEMM (pixels as M): the conv's split-K all the same
    ("1x1 K 1024 @7", model((1, 1024, 7, 7), (256, 1024, 1, 1), pad=0), PLAN, SK.format(4), 0, 4),
    ("grouped (2 groups)", model((1, 48, 8, 8), (36, 24, 3, 3), groups=2), PLAN, SK.format(3), 0, 3),
    # the AVX2 and the scalar variants (a vector width of 8, of 4) split and sum the same way
    ("AVX2 variant", model((1, 37, 7, 7), (29, 37, 3, 3)), PLAN + " vectorize n.i.i 8;", SK.format(3) + " vectorize n.i.i 8;",
     0, 3),
    ("scalar variant", model((1, 37, 7, 7), (29, 37, 3, 3)), PLAN + " vectorize n.i.i 4;",
     SK.format(3) + " vectorize n.i.i 4;", 0, 3),
    ("slice count", model((1, 512, 7, 7), (512, 512, 3, 3)), SK.format(2), SK.format(4), 2, 4),
]

SMALL = model((1, 37, 7, 7), (29, 37, 3, 3))[0]
REFUSED = [
    ("more slices than K tiles", SMALL, SK.format(7), ["splitk 7", "K tiles"], True),
    ("more than 64 slices", model((1, 512, 7, 7), (64, 512, 3, 3))[0], SK.format(65), ["[1, 64]"], True),
    ("Winograd with split-K", SMALL, PLAN + " algo_choice conv winograd_4x4_3x3; algo_choice matmul splitk_reduce;"
     " splitk 2;", ["algo_choice matmul does not fit", "conv"], True),
]


def main():
    s = Suite("conv_splitk")
    only = os.environ.get("HARP_CONV_SPLITK", "")  # a substring of the case names (debugging)
    for what, (text, spec), a, b, sa, sb in CASES:
        if only in what:
            check_pair(s, what, text, spec, a, b, sa, sb)
    for what, text, plan, want, located in REFUSED:
        if only in what:
            check_refused(s, what, text, plan, want, located)
    s.close()


if __name__ == "__main__":
    main()
