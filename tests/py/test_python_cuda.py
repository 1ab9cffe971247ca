#!/usr/bin/env python3
"""test_python_cuda.py — the Python package on CUDA device memory, over the
fake libcuda (tests/fake_cuda, loaded through HARP_LIBCUDA; it executes no
kernel, so values are not checked here): a DLPack input on kDLCUDA runs on
its device pointer with no host copy, the outputs come back as
harp.DeviceArray (DLPack on the device) or go into out= device arrays, the
launches see those pointers and go to the stream given; a CPU session given
a CUDA array, wrong dtypes, shapes, devices and mixed feeds raise clear
exceptions.  Without NVRTC (or the fake) the device part is skipped and
says so; the CPU session's refusal runs always."""
import ctypes
import os
import tempfile

from harp_py import HARP, SRC, Suite, harp, np

s = Suite("python_cuda")
GEMM = os.path.join(SRC, "tests", "models", "seed000_gemm_bias_relu.json")
SYMS = {"M": 8, "K": 16, "N": 24}
PARAMS = {"B": np.zeros((16, 24), np.float16), "bias": np.zeros(24, np.float16)}


def expect(what, cls, fn, text=None):
    try:
        fn()
    except harp.HarpError as ex:
        s.check(what, type(ex).__name__ == cls and (text is None or text in str(ex)), f"got {type(ex).__name__}: {ex}")
        return
    except Exception as ex:  # noqa: BLE001
        s.check(what, False, f"got {type(ex).__name__}: {ex}")
        return
    s.check(what, False, "no exception")


class FakeCudaTensor:
    """A DLPack producer that says it is on cuda:0 (the CPU session must refuse it before reading it)."""

    def __dlpack_device__(self):
        return (2, 0)

    def __dlpack__(self, stream=None):
        raise AssertionError("a CPU session must not read a CUDA tensor")


# ---- a CPU session refuses device arrays clearly ---------------------------------------------
cpu = harp.InferenceSession(GEMM, {"syms": SYMS, "params": PARAMS}, providers=["cpu"])
expect("cpu session, cuda input", "Unsupported", lambda: cpu.run(None, {"A": FakeCudaTensor()}), "CUDA device")
expect("cpu session, a stream", "Unsupported", lambda: cpu.run(None, {"A": np.zeros((8, 16), np.float16)}, stream=7))
y, = cpu.run(None, {"A": np.zeros((8, 16), np.float16)})
s.check("cpu session still runs on host arrays", y.shape == (8, 24))

# ---- a CUDA session on the fake driver -------------------------------------------------------
fake = os.path.join(os.path.dirname(os.path.abspath(HARP)), "tests", "libharp_fake_cuda.so")
nvrtc_ok = True
if not os.path.exists(fake):
    print(f"no fake libcuda at {fake}: the device part skipped")
    s.close()
os.environ["HARP_LIBCUDA"] = fake
lib = ctypes.CDLL(fake)  # the same copy the runtime loads: its counters and launch log
lib.harp_fake_cuda_launch.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_void_p),
                                      ctypes.POINTER(ctypes.c_ulonglong), ctypes.c_int]
lib.cuStreamCreate.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_uint]
lib.cuStreamDestroy_v2.argtypes = [ctypes.c_void_p]
names = ["direct_launches", "captures_begun", "captures_ended", "graphs_instantiated", "graph_launches",
         "graph_kernels", "graph_functions", "exec_updates", "failed_updates", "modules_loaded", "tensor_maps",
         "live_allocs", "live_bytes", "htod_bytes", "dtoh_bytes", "live_modules", "live_graphs", "live_execs",
         "live_streams", "live_events", "ctx_refs", "stream_waits", "last_device"]


def stat(name):
    v = (ctypes.c_long * 64)()
    lib.harp_fake_cuda_stats(v, 64)
    return v[names.index(name)]


def launches():
    """The launch log: (stream, [arguments]) each."""
    out = []
    for i in range(lib.harp_fake_cuda_nlaunches()):
        st, args = ctypes.c_void_p(), (ctypes.c_ulonglong * 16)()
        n = lib.harp_fake_cuda_launch(i, ctypes.byref(st), args, 16)
        out.append((st.value or 0, list(args[:min(n, 16)])))
    return out


try:
    sess = harp.InferenceSession(GEMM, {"syms": SYMS, "params": PARAMS, "cache_dir": tempfile.mkdtemp()},
                                 providers=["cuda"])
except harp.Unsupported as ex:  # no NVRTC here
    print(f"the CUDA session cannot compile ({ex}): the device part skipped")
    s.close()

x = harp.DeviceArray.from_numpy(np.ones((8, 16), np.float16))
s.check("DeviceArray's DLPack device", x.__dlpack_device__() == (2, 0))
y, = sess.run(None, {"A": x})  # the first run: the weights go up
s.check("output is a DeviceArray", isinstance(y, harp.DeviceArray) and y.shape == (8, 24) and y.dtype == np.float16,
        repr(y))
h0, d0 = stat("htod_bytes"), stat("dtoh_bytes")
stream = ctypes.c_void_p()
lib.cuStreamCreate(ctypes.byref(stream), 1)
lib.harp_fake_cuda_record(1)
y2, = sess.run(None, {"A": x}, stream=stream.value)
log = launches()
lib.harp_fake_cuda_record(0)
s.check("no host copy for the run", (stat("htod_bytes"), stat("dtoh_bytes")) == (h0, d0),
        f"htod +{stat('htod_bytes') - h0}, dtoh +{stat('dtoh_bytes') - d0}")
s.check("launches on the stream given", log and all(st == stream.value for st, _ in log), f"{log}")
s.check("a kernel reads the input's pointer", any(x.ptr in a for _, a in log), f"{x.ptr:#x} not in {log}")
s.check("a kernel writes the output's pointer", any(y2.ptr in a for _, a in log), f"{y2.ptr:#x} not in {log}")

# out=: the caller's device buffer, passed by DLPack
buf = harp.DeviceArray((8, 24), np.float16)
lib.harp_fake_cuda_record(1)
r, = sess.run(None, {"A": x}, out=[buf])
log = launches()
lib.harp_fake_cuda_record(0)
s.check("out= returns the caller's buffer", r is buf)
s.check("out= buffer written by a kernel", any(buf.ptr in a for _, a in log))
s.check("stream None: the instance's own", log and all(st not in (0, stream.value) for st, _ in log), f"{log}")
s.check("numpy() copies down", y.numpy().shape == (8, 24) and np.asarray(y).dtype == np.float16)

# DLPack out of a DeviceArray: a consumer sees the same pointer, shape and dtype
from harp import _cuda  # noqa: E402
t = _cuda.Imported(y)
s.check("DLPack export", (t.ptr, t.shape, t.dtype, t.device) == (y.ptr, (8, 24), np.dtype(np.float16), 0))

# bad device feeds
expect("device dtype", "DtypeMismatch", lambda: sess.run(None, {"A": harp.DeviceArray((8, 16), np.float32)}))
expect("device shape", "InputMismatch", lambda: sess.run(None, {"A": harp.DeviceArray((8, 15), np.float16)}))
expect("out= on the host", "InputMismatch", lambda: sess.run(None, {"A": x}, out=[np.zeros((8, 24), np.float16)]))
expect("out= of the wrong shape", "InputMismatch",
       lambda: sess.run(None, {"A": x}, out=[harp.DeviceArray((8, 23), np.float16)]))
lib.cuStreamDestroy_v2(stream)
sess.close()

# device ordinals: an instance on device 1 of 2 (the fake's primary context there); device 2 of 2 refused
os.environ["HARP_FAKE_CUDA_DEVICES"] = "2"
opts = {"syms": SYMS, "params": PARAMS, "cache_dir": tempfile.mkdtemp()}
d1 = harp.InferenceSession(GEMM, {**opts, "device": 1}, providers=["cuda"])
s.check("device 1 of 2", stat("last_device") == 1, f"last_device {stat('last_device')}")
expect("a cuda:0 array for a cuda:1 session", "InputMismatch", lambda: d1.run(None, {"A": x}), "cuda:1")
expect("device 2 of 2", "Unsupported",
       lambda: harp.InferenceSession(GEMM, {**opts, "device": 2}, providers=["cuda"]), "no CUDA device 2 (2 found)")
expect("device 1 on the CPU", "UsageError",
       lambda: harp.InferenceSession(GEMM, {"syms": SYMS, "params": PARAMS, "device": 1}, providers=["cpu"]))
del os.environ["HARP_FAKE_CUDA_DEVICES"]
d1.close()
s.close()
