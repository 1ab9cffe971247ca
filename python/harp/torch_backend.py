"""torch_backend.py — harp as a torch.compile backend: torch.compile(model,
backend="harp") (registered through the torch_dynamo_backends entry point
in pyproject.toml).  Each graph dynamo captures goes through ONNX export
(torch.onnx.export, as PyTorch's own "onnxrt" backend does), every dim
exported dynamic, into a harp.InferenceSession that compiles once per
shape binding (so dynamic=True works); a graph harp or the export refuses
runs eagerly (a warning says why), and so does a call with inputs it
cannot take (CUDA tensors, non-tensor arguments).

NOT RUN YET: torch is not installed where this was written (its wheels
are too large for the build machine); tests/py/test_python_torch.py runs it
when torch is there and skips otherwise.

Needs: torch, harp.session.  Gives: harp_backend(gm, example_inputs).
"""
import io
import warnings

from .session import InferenceSession
from ._errors import HarpError


def _export(gm, example_inputs):
    import torch
    names = [f"in{i}" for i in range(len(example_inputs))]
    axes = {n: {d: f"{n}_d{d}" for d in range(t.dim())} for n, t in zip(names, example_inputs)}
    buf = io.BytesIO()
    with torch.no_grad():
        torch.onnx.export(gm, tuple(example_inputs), buf, input_names=names, dynamic_axes=axes, dynamo=False)
    return buf.getvalue()


def harp_backend(gm, example_inputs, **kwargs):
    """torch.compile's backend contract: a callable that runs gm's graph."""
    import torch
    if not all(isinstance(t, torch.Tensor) and t.device.type == "cpu" for t in example_inputs):
        return gm.forward  # symbolic ints, CUDA tensors: eager
    try:
        sess = InferenceSession(_export(gm, example_inputs), {"progress": False})
    except (HarpError, Exception) as ex:  # noqa: BLE001 (an export failure is any exception of torch's)
        warnings.warn(f"harp: this graph runs eagerly: {type(ex).__name__}: {ex}")
        return gm.forward
    names = [f"in{i}" for i in range(len(example_inputs))]

    def run(*args):
        if not all(isinstance(t, torch.Tensor) and t.device.type == "cpu" for t in args):
            return gm.forward(*args)
        feeds = {n: t.detach().contiguous().numpy() for n, t in zip(names, args)}
        try:
            outs = sess.run(None, feeds)
        except HarpError as ex:
            warnings.warn(f"harp: this call runs eagerly: {ex}")
            return gm.forward(*args)
        return tuple(torch.from_numpy(o) for o in outs)

    return run
