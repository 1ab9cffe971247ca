"""The examples/*.harp networks run through `harp run` and match independent
numpy implementations, in fp32 and in fp16 (the same file with f32 -> f16).

fp32: rtol = atol = 1e-3 against numpy in float32 (float64 accumulation).
fp16: numpy computes in float32 from the same fp16 inputs and weights.  The
network stores each layer's output in fp16, as any fp16 framework does: harp's
lowering casts back to fp16 after every contraction / normalization (matmul,
conv2d, attention, layernorm), and the reference rounds at those same points.
Elementwise ops between them are computed in fp32 by harp's reference
interpreter and by numpy alike.  The comparison then is rtol = atol = 1e-3
after rounding the reference to fp16, except where noted per example.

On the interpreter, the fp16 outputs are also compared with numpy computing
entirely in float32, without the intermediate rounding (see STRICT_ATOL).
Every example runs on every backend of harp_test.BACKENDS.

Every example also round-trips through `harp decompile`: the decompiled text
runs and gives bit-identical outputs.
"""
import os
import subprocess
import tempfile

import numpy as np

from fe_ref import cnn_inputs, cnn_ref, conv_block_inputs, conv_block_ref, mlp_inputs, mlp_ref, transformer_inputs, \
    transformer_ref
from harp_test import BACKENDS, HARP, SRC, Suite, close, compiled_only, run
compiled_only()  # the cpu backend's compiled numbers, not tier 0's (harp_test.py)

EX = os.path.join(SRC, "examples")
s = Suite("examples")

# On the reference interpreter (whose only fp16 roundings are the ones the
# lowering writes as CASTs), the fp16 outputs are also compared with numpy
# computing entirely in float32
# (no intermediate rounding), at rtol = atol = 1e-3, except the transformer
# block: its fp16 activations (layernorm outputs, q/k/v, attention output,
# the MLP's hidden layer) are each rounded to fp16, which moves |y| ~ 5 by up
# to 2 fp16 ulps (3.9e-3); there atol = 5e-3.
STRICT_ATOL = {"transformer_block.harp": 5e-3}

EXAMPLES = [
    ("mlp.harp", mlp_inputs, mlp_ref),
    ("conv_block.harp", conv_block_inputs, conv_block_ref),
    ("transformer_block.harp", transformer_inputs, transformer_ref),
    ("cnn.harp", cnn_inputs, cnn_ref),
]

tmp = tempfile.mkdtemp(prefix="harp_examples_")
for name, make, ref in EXAMPLES:
    src = os.path.join(EX, name)
    text = open(src).read()
    for half in (False, True):
        dt = np.float16 if half else np.float32
        model = src
        if half:
            model = os.path.join(tmp, name.replace(".harp", "_f16.harp"))
            with open(model, "w") as f:
                f.write(text.replace("f32[", "f16["))
        t = {k: v.astype(dt) for k, v in make().items()}
        for backend in BACKENDS:
            label = f"[{backend}] {name} {'fp16' if half else 'fp32'}"
            p, d = run(model, t, backend=backend)
            s.check(f"{label} runs", p.returncode == 0, p.stderr)
            if p.returncode:
                continue
            got = np.load(os.path.join(d, "y.npy"))
            s.check(f"{label} dtype", got.dtype == dt, str(got.dtype))
            want = ref({k: v.astype(np.float64) for k, v in t.items()}, half)
            ok, detail = close(got, want)
            s.check(label, ok, detail)
            print(f"{label}: {detail}")
            if half and backend == "interp":  # compiled backends may store intermediates in fp16 too
                f32_ref = ref({k: v.astype(np.float64) for k, v in t.items()}, False)
                ok, detail = close(got, f32_ref, atol=STRICT_ATOL.get(name, 1e-3))
                s.check(f"{label} vs an all-fp32 numpy", ok, detail)
                print(f"{label} vs an all-fp32 numpy: {detail}")
            if backend != BACKENDS[0]:
                continue
            # decompile -> run the text -> the same bits
            q = subprocess.run([HARP, "decompile", model], capture_output=True, text=True, timeout=120)
            s.check(f"{label} decompiles", q.returncode == 0, q.stderr)
            if q.returncode == 0:
                again = os.path.join(tmp, "rt_" + os.path.basename(model))
                with open(again, "w") as f:
                    f.write(q.stdout)
                p2, d2 = run(again, t, backend=backend)
                s.check(f"{label} decompiled text runs", p2.returncode == 0, p2.stderr)
                if p2.returncode == 0:
                    got2 = np.load(os.path.join(d2, "y.npy"))
                    s.check(f"{label} decompiled text gives the same outputs", np.array_equal(got, got2, equal_nan=True))
s.close()
