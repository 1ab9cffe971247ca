"""A ShapeSet object's 1x1 conv over a box of image sizes (issue 25): where
the specialised object at the upper corner runs the implicit GEMM (fewer
than 256 input channels, whole vectors of pixels: cg_dconv_plan), the
object's kernel is the GEMM with N = H * W read at run time (contract_c.c,
rt_conv1x1_gemm / gemm_cols_expr), not the direct kernel, whose stores
thrash L1 where a plane is a multiple of 4 KiB (MobileNetV2's 160 x 160);
with 256 input channels it stays the direct kernel.  ONNX Conv 1x1 (+ bias,
+ Clip, + a residual Add for the 16 -> 16 case) over x [1, C, H, W], H and
W dim_params in 8..64, one object for the box: the package's model.c names
the kernel kind; outputs against numpy at three bindings (the upper corner,
whose plane is 16 KiB, and two non-square ones) on one object."""
import os
import re
import subprocess
import tempfile

import numpy as np

from harp_test import HARP, Suite, close, compiled_only, onnx_or_skip, shapeset_run

onnx_or_skip(runtime=False)
import onnx  # noqa: E402
from onnx_models import init, mk, model, vi  # noqa: E402

compiled_only()
s = Suite("shapeset_conv1x1")
rng = np.random.default_rng(251)
work = tempfile.mkdtemp(prefix="harp_ss1x1_")
env = dict(os.environ, HARP_CACHE_DIR=os.path.join(work, "cache"))
BOX = ["--shapeset", "H=8..64", "--shapeset", "W=8..64"]
SIZES = [(64, 64), (37, 50), (8, 61)]
c0 = init("lo", np.array(0, np.float32))
c6 = init("hi", np.array(6, np.float32))


def conv(cin, cout, residual):
    """Conv 1x1 cin -> cout with a bias, ReLU6, and + x where residual; (model, weights)."""
    w = (rng.standard_normal((cout, cin, 1, 1)) * cin ** -0.5).astype(np.float32)
    b = (rng.standard_normal(cout) * 0.1).astype(np.float32)
    nodes = [mk("Conv", ["x", "w", "b"], ["c"]), mk("Clip", ["c", "lo", "hi"], ["r" if residual else "y"])]
    if residual:
        nodes.append(mk("Add", ["r", "x"], ["y"]))
    return model(nodes, [vi("x", [1, cin, "H", "W"])], [vi("y", None)], [init("w", w), init("b", b), c0, c6]), (w, b)


def ref(x, wb, residual):
    w, b = wb
    y = np.clip(np.einsum("ok,bkhw->bohw", w[:, :, 0, 0].astype(np.float64), x) + b[None, :, None, None], 0, 6)
    return y + x if residual else y


# name, cin, cout, residual, the kernel kind the package must have
CASES = [("16 -> 96 (MobileNetV2's block 2)", 16, 96, False, "gemm"),
         ("16 -> 16 + x", 16, 16, True, "gemm"),
         ("256 -> 32 (deep: direct)", 256, 32, False, "conv")]
for name, cin, cout, residual, kind in CASES:
    m, wb = conv(cin, cout, residual)
    path = os.path.join(work, f"c{cin}_{cout}.onnx")
    onnx.save(m, path)
    pkg = os.path.join(work, f"c{cin}_{cout}")
    p = subprocess.run([HARP, "compile", path, "--target", "cpu", "-o", pkg, *BOX], capture_output=True, text=True,
                       env=env, timeout=300)
    if p.returncode:
        s.check(f"{name}: compiles as one object", False, p.stderr[-400:])
        continue
    kinds = set(re.findall(r"/\* ---- model_k\d+_(gemm|conv): ", open(os.path.join(pkg, "model.c")).read()))
    s.check(f"{name}: the {kind} kernel", kinds == {kind}, str(sorted(kinds)))
    for h, w in SIZES:
        x = rng.standard_normal((1, cin, h, w)).astype(np.float32)
        q, out = shapeset_run(path, {"x": x}, BOX, env, work)
        if q.returncode:
            s.check(f"{name} {h}x{w}: runs", False, q.stderr[-400:])
            continue
        s.check(f"{name} {h}x{w}: one object for the box", "one object for the box" in q.stderr, q.stderr[-300:])
        got = np.load(os.path.join(out, "y.npy"))
        s.check(f"{name} {h}x{w}: vs numpy", *close(got, ref(x.astype(np.float64), wb, residual), rtol=1e-5, atol=1e-5))
s.close()
