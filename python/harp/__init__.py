"""harp — a deep-learning compiler, from Python (docs/python.md).

    import harp, numpy as np
    sess = harp.InferenceSession("model.onnx")            # as onnxruntime's
    y, = sess.run(None, {"input": np.zeros((1, 3, 224, 224), np.float32)})
    m = harp.compile("model.onnx", shapes={"input": (1, 3, 224, 224)})
    y = m(x)
    report = harp.tune("model.onnx", shapes={"input": (1, 3, 224, 224)})  # plans measured, cached

Errors are exceptions named after harp's error classes (harp.ParseError,
harp.BroadcastMismatch, ..., all harp.HarpError).  `python -m harp` is the
`harp` command.

Needs: harp._harp (libharp.so), numpy.  Gives: the package's API.
"""
from . import _harp
from ._errors import HarpError, ERROR_NAMES, CLASSES as _CLASSES
from .session import CompiledModel, InferenceSession, NodeArg, SessionOptions, compile
from ._cuda import DeviceArray
from .tune import tune

globals().update(_CLASSES)
__version__ = _harp.version()
__all__ = ["InferenceSession", "CompiledModel", "SessionOptions", "NodeArg", "compile", "tune", "HarpError", "DeviceArray",
           "get_available_providers", "__version__"] + list(_CLASSES)


def get_available_providers():
    """The providers a session may name: cpu always, cuda when a driver is there (checked at compile)."""
    return ["CPUExecutionProvider", "CUDAExecutionProvider"]
