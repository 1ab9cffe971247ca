"""The ONNX import holds a model's weights about twice at its peak, not
three or four times: the file buffer goes once the protobuf is unpacked,
each initializer's bytes in the proto go once decoded, and a conv weight
folded with its batch norm lets go of the original at once.  A model of
32 MB of weights (two 2048x2048 1x1 convs, one with a batch norm) through
`harp dump --dump tiny` (the import and the lowering, no compile): peak RSS
under 2.3x the weights plus 24 MB (68 MB measured; 118 MB before); through
`harp run` on the cpu backend under 2.6x plus 24 MB (92 MB; 137 before).  Skipped
under the sanitizers (their shadow memory)."""
import os
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
import harp_test as ht  # noqa: E402

ht.onnx_or_skip(runtime=False)
import onnx  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
if os.environ.get("HARP_SANITIZE") == "1":
    print("skipped under the sanitizers")
    sys.exit(77)

S = ht.Suite("onnx_memory")
D = ht.tempfile.mkdtemp()
C = 2048
r = np.random.default_rng(0)
inits = [numpy_helper.from_array(r.standard_normal((C, C, 1, 1), dtype=np.float32) * 0.01, n) for n in ("w", "w2")]
inits += [numpy_helper.from_array(r.uniform(0.5, 1.5, C).astype(np.float32), n) for n in "sbmv"]
nodes = [helper.make_node("Conv", ["x", "w"], ["c"]), helper.make_node("BatchNormalization", ["c", "s", "b", "m", "v"], ["y0"]),
         helper.make_node("Conv", ["y0", "w2"], ["y"])]
g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, C, 2, 2])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
path = os.path.join(D, "big.onnx")
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), path)
weights = 2 * C * C * 4

# The peak RSS of harp alone: a child's high-water mark starts at its parent's
# RSS when forked, so harp is forked from a small python (-S, nothing imported)
# that reports wait4's ru_maxrss, not from this one (numpy and onnx loaded).
WAIT = ("import os, sys\npid = os.fork()\nif pid == 0:\n    os.execv(sys.argv[1], sys.argv[1:])\n"
        "_, st, ru = os.wait4(pid, 0)\nprint(os.waitstatus_to_exitcode(st), ru.ru_maxrss)")
p = subprocess.run([sys.executable, "-S", "-c", WAIT, ht.HARP, "dump", path, "--dump", "tiny", "--dump-dir", os.path.join(D, "t")],
                   capture_output=True, text=True, timeout=300)
rc, kb = (int(v) for v in p.stdout.split()[-2:])
S.check("the import ran", rc == 0, p.stderr[-300:])
peak = kb * 1024
limit = 2.3 * weights + (24 << 20)
S.check(f"peak RSS {peak / 2**20:.0f} MB <= {limit / 2**20:.0f} MB for {weights / 2**20:.0f} MB of weights", peak <= limit)
# the whole run on the cpu backend: the weights' buffers go back to the system
# when freed (mallopt in main), model_init packs the convs' weights straight
# from the parameter block without keeping them as stored, and `harp run`
# frees its copies of the weights once they are in the block: 92 MB measured,
# 137 MB before (each weight four times over)
p = subprocess.run([sys.executable, "-S", "-c", WAIT, ht.HARP, "run", path, "--random-inputs", "--backend", "cpu", "--out",
                    os.path.join(D, "o")], capture_output=True, text=True, timeout=600)
rc, kb = (int(v) for v in p.stdout.split()[-2:])
S.check("the cpu run ran", rc == 0, p.stderr[-300:])
limit = 2.6 * weights + (24 << 20)
S.check(f"cpu run: peak RSS {kb / 1024:.0f} MB <= {limit / 2**20:.0f} MB for {weights / 2**20:.0f} MB of weights", kb * 1024 <= limit)
S.close()
