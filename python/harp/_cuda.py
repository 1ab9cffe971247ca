"""_cuda.py — CUDA device memory for the Python package, without a CUDA
Python dependency: DLPack tensors read (any __dlpack__ object whose
__dlpack_device__ is kDLCUDA: its device pointer, dtype, shape, strides) and
DeviceArray, harp-owned device memory with __dlpack__ / __dlpack_device__,
for the outputs of a run on device pointers (harp_model_run_device).

The driver is libcuda through ctypes: $HARP_LIBCUDA when set (the library's
own knob: tests point it at tests/fake_cuda), else libcuda.so.1.  Memory is
allocated in the device's primary context, which harp's instances use too.

Needs: ctypes, numpy.  Gives: is_cuda(obj), import_cuda(obj) -> Imported,
DeviceArray, alloc(nbytes, device).
"""
import ctypes
import os

import numpy as np

KDLCPU, KDLCUDA = 1, 2
_c = ctypes


class _DLDevice(_c.Structure):
    _fields_ = [("device_type", _c.c_int), ("device_id", _c.c_int)]


class _DLDataType(_c.Structure):
    _fields_ = [("code", _c.c_uint8), ("bits", _c.c_uint8), ("lanes", _c.c_uint16)]


class _DLTensor(_c.Structure):
    _fields_ = [("data", _c.c_void_p), ("device", _DLDevice), ("ndim", _c.c_int), ("dtype", _DLDataType),
                ("shape", _c.POINTER(_c.c_int64)), ("strides", _c.POINTER(_c.c_int64)), ("byte_offset", _c.c_uint64)]


class _DLManaged(_c.Structure):
    pass


_DELETER = _c.CFUNCTYPE(None, _c.POINTER(_DLManaged))
_DLManaged._fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", _c.c_void_p), ("deleter", _DELETER)]

# DLPack (code, bits) <-> numpy dtype; bf16 is held as uint16 by the package
_NP_OF = {(0, 32): np.int32, (0, 64): np.int64, (2, 16): np.float16, (2, 32): np.float32, (4, 16): np.uint16,
          (6, 8): np.bool_, (1, 16): np.uint16, (1, 8): np.uint8}
_DL_OF = {np.dtype(np.int32): (0, 32), np.dtype(np.int64): (0, 64), np.dtype(np.float16): (2, 16),
          np.dtype(np.float32): (2, 32), np.dtype(np.uint16): (1, 16), np.dtype(np.bool_): (6, 8)}

_api = _c.pythonapi
_api.PyCapsule_GetPointer.restype = _c.c_void_p
_api.PyCapsule_GetPointer.argtypes = [_c.py_object, _c.c_char_p]
_api.PyCapsule_New.restype = _c.py_object
_api.PyCapsule_New.argtypes = [_c.c_void_p, _c.c_char_p, _c.c_void_p]


def is_cuda(obj):
    """Whether obj is a DLPack tensor on a CUDA device (kDLCUDA)."""
    dev = getattr(obj, "__dlpack_device__", None)
    if dev is None:
        return False
    try:
        return int(dev()[0]) == KDLCUDA
    except Exception:
        return False


class Imported:
    """A CUDA DLPack tensor's view: ptr, dtype (numpy), shape, device; holds the capsule while alive."""

    def __init__(self, obj, stream=None):
        # the producer orders its writes before `stream` (the run's; None: the legacy default stream, which the
        # instance's own blocking stream waits for)
        self.capsule = obj.__dlpack__(stream=stream)
        p = _api.PyCapsule_GetPointer(self.capsule, b"dltensor")
        t = _c.cast(p, _c.POINTER(_DLManaged)).contents.dl_tensor
        self.device = int(t.device.device_id)
        self.shape = tuple(int(t.shape[d]) for d in range(t.ndim))
        key = (int(t.dtype.code), int(t.dtype.bits))
        self.dtype = np.dtype(_NP_OF[key]) if key in _NP_OF and t.dtype.lanes == 1 else None
        self.ptr = int(t.data or 0) + int(t.byte_offset)
        self.contiguous = True
        if t.strides:  # C-contiguous strides (in elements), size-1 dims aside
            want = 1
            for d in reversed(range(t.ndim)):
                if self.shape[d] != 1 and int(t.strides[d]) != want:
                    self.contiguous = False
                want *= self.shape[d]


class _Driver:
    """The few libcuda calls the package makes itself: context, allocation, copies for tests and numpy()."""

    def __init__(self):
        path = os.environ.get("HARP_LIBCUDA") or "libcuda.so.1"
        self.lib = _c.CDLL(path)
        for name in ("cuMemAlloc_v2", "cuMemFree_v2", "cuMemcpyHtoD_v2", "cuMemcpyDtoH_v2"):
            getattr(self.lib, name).restype = _c.c_int
        self.lib.cuMemcpyHtoD_v2.argtypes = [_c.c_uint64, _c.c_void_p, _c.c_size_t]
        self.lib.cuMemcpyDtoH_v2.argtypes = [_c.c_void_p, _c.c_uint64, _c.c_size_t]
        self.lib.cuMemFree_v2.argtypes = [_c.c_uint64]
        self.ctx = {}

    def check(self, r, what):
        if r:
            from ._errors import CLASSES
            raise CLASSES["Unsupported"](f"{what} failed: CUDA error {r}")

    def use(self, device):
        """The device's primary context, current on this thread."""
        if device not in self.ctx:
            self.check(self.lib.cuInit(0), "cuInit")
            dev, ctx = _c.c_int(), _c.c_void_p()
            self.check(self.lib.cuDeviceGet(_c.byref(dev), device), f"cuDeviceGet({device})")
            self.check(self.lib.cuDevicePrimaryCtxRetain(_c.byref(ctx), dev), "cuDevicePrimaryCtxRetain")
            self.ctx[device] = ctx
        self.check(self.lib.cuCtxSetCurrent(self.ctx[device]), "cuCtxSetCurrent")


_drv = None


def driver():
    global _drv
    if _drv is None:
        try:
            _drv = _Driver()
        except OSError as ex:
            from ._errors import CLASSES
            raise CLASSES["Unsupported"](f"no CUDA driver library: {ex}") from None
    return _drv


_exports = {}  # id of a _DLManaged handed out -> (its ctypes objects, the array): alive until the consumer's deleter


@_DELETER
def _delete(p):
    _exports.pop(_c.addressof(p.contents), None)


class DeviceArray:
    """Device memory harp allocated (a run's output on device pointers): shape, dtype, device, ptr.

    torch.from_dlpack(a), cupy.from_dlpack(a) take it without a copy; a.numpy() copies it to the host.
    """

    def __init__(self, shape, dtype, device=0):
        self.shape, self.dtype, self.device = tuple(int(d) for d in shape), np.dtype(dtype), int(device)
        self.nbytes = int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize
        d = driver()
        d.use(self.device)
        p = _c.c_uint64()
        d.check(d.lib.cuMemAlloc_v2(_c.byref(p), _c.c_size_t(max(self.nbytes, 1))), f"cuMemAlloc({self.nbytes})")
        self.ptr = int(p.value)

    @classmethod
    def from_numpy(cls, a, device=0):
        """A device copy of the host array a."""
        a = np.ascontiguousarray(a)
        out = cls(a.shape, a.dtype, device)
        d = driver()
        d.check(d.lib.cuMemcpyHtoD_v2(out.ptr, a.ctypes.data, a.nbytes), "cuMemcpyHtoD")
        return out

    def numpy(self):
        """A host copy."""
        a = np.empty(self.shape, self.dtype)
        d = driver()
        d.use(self.device)
        d.check(d.lib.cuMemcpyDtoH_v2(a.ctypes.data, self.ptr, self.nbytes), "cuMemcpyDtoH")
        return a

    def __array__(self, dtype=None, copy=None):
        a = self.numpy()
        return a if dtype is None else a.astype(dtype)

    def __dlpack_device__(self):
        return (KDLCUDA, self.device)

    def __dlpack__(self, stream=None, max_version=None, dl_device=None, copy=None):
        """A DLPack capsule over this memory (the consumer orders its stream after harp's run)."""
        nd = len(self.shape)
        shape = (_c.c_int64 * max(nd, 1))(*self.shape)
        m = _DLManaged()
        code, bits = _DL_OF[self.dtype]
        m.dl_tensor = _DLTensor(_c.c_void_p(self.ptr), _DLDevice(KDLCUDA, self.device), nd, _DLDataType(code, bits, 1),
                                shape, None, 0)
        m.deleter = _delete
        _exports[_c.addressof(m)] = (m, shape, self)
        return _api.PyCapsule_New(_c.addressof(m), b"dltensor", None)

    def __del__(self):
        if getattr(self, "ptr", 0) and _drv is not None:
            try:
                _drv.use(self.device)  # cuMemFree needs the context current on this thread
            except Exception:  # noqa: BLE001 (interpreter shutdown: the driver frees it with the context)
                pass
            _drv.lib.cuMemFree_v2(self.ptr)
            self.ptr = 0

    def __repr__(self):
        return f"DeviceArray(shape={self.shape}, dtype={self.dtype}, device=cuda:{self.device})"
