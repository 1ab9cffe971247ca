"""torch_backend.py — harp as a torch.compile backend: torch.compile(model,
backend="harp") (registered through the torch_dynamo_backends entry point
in pyproject.toml).  Each graph dynamo captures goes through ONNX export
(torch.onnx.export, as PyTorch's own "onnxrt" backend does), every dim
exported dynamic, into a harp.InferenceSession that compiles once per
shape binding (so dynamic=True works); a graph harp or the export refuses
runs eagerly (a warning says why), and so does a call with inputs it
cannot take (CUDA tensors, non-tensor arguments).

Tested with torch 2.15 (tests/py/test_python_torch.py, which skips when
torch is not installed; install-deps does not install it).

Needs: torch, harp.session.  Gives: harp_backend(gm, example_inputs),
stats (graphs compiled, calls run by harp, graphs and calls left eager).
"""
import io
import warnings

from .session import InferenceSession
from ._errors import HarpError

stats = {"graphs": 0, "runs": 0, "eager_graphs": 0, "eager_calls": 0}


def _cpu_tensor(t):
    import torch
    return isinstance(t, torch.Tensor) and t.device.type == "cpu"


def _export(gm, args, tensor_pos):
    """gm as ONNX bytes: its tensor arguments as inputs in0, in1 ... (every dim
    dynamic), its int arguments (dynamo's symbolic sizes) fixed at args' values."""
    import torch

    class Bound(torch.nn.Module):
        def forward(self, *tensors):
            full = list(args)
            for k, t in zip(tensor_pos, tensors):
                full[k] = t
            return gm(*full)

    tensors = tuple(args[k] for k in tensor_pos)
    names = [f"in{i}" for i in range(len(tensors))]
    axes = {n: {d: f"{n}_d{d}" for d in range(t.dim())} for n, t in zip(names, tensors)}
    buf = io.BytesIO()
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # the TorchScript exporter's notice
        torch.onnx.export(Bound(), tensors, buf, input_names=names, dynamic_axes=axes, dynamo=False)
    return buf.getvalue()


def harp_backend(gm, example_inputs, **kwargs):
    """torch.compile's backend contract: a callable that runs gm's graph.
    One session per set of values of the graph's int arguments (each such
    binding exported once), each compiling per shape binding."""
    tensor_pos = [k for k, t in enumerate(example_inputs) if _cpu_tensor(t)]
    ints = [k for k in range(len(example_inputs)) if k not in tensor_pos]
    if not tensor_pos or any(not isinstance(example_inputs[k], int) and not hasattr(example_inputs[k], "node")
                             for k in ints):
        stats["eager_graphs"] += 1
        return gm.forward  # CUDA tensors, other arguments: eager
    sessions = {}

    def session(args):
        key = tuple(int(args[k]) for k in ints)
        if key not in sessions:
            try:
                sessions[key] = InferenceSession(_export(gm, args, tensor_pos), {"progress": False})
                stats["graphs"] += 1
            except Exception as ex:  # noqa: BLE001 (harp's refusal, or any failure of torch's export)
                warnings.warn(f"harp: this graph runs eagerly: {type(ex).__name__}: {str(ex).splitlines()[0] if str(ex) else ex}")
                stats["eager_graphs"] += 1
                sessions[key] = None
        return sessions[key]

    if session(list(example_inputs)) is None:
        return gm.forward

    def run(*args):
        sess = session(args) if all(_cpu_tensor(args[k]) for k in tensor_pos) else None
        if sess is None:
            stats["eager_calls"] += 1
            return gm.forward(*args)
        feeds = {f"in{i}": args[k].detach().contiguous().numpy() for i, k in enumerate(tensor_pos)}
        try:
            outs = sess.run(None, feeds)
        except HarpError as ex:
            warnings.warn(f"harp: this call runs eagerly: {ex}")
            stats["eager_calls"] += 1
            return gm.forward(*args)
        stats["runs"] += 1
        return tuple(torch_from(o) for o in outs)

    return run


def torch_from(a):
    import torch
    return torch.from_numpy(a)
