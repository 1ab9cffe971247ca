"""session.py — harp's Python API: InferenceSession (onnxruntime's shape),
compile() (a callable compiled model), SessionOptions, NodeArg.

A session holds one compiled model per shape binding (a CPU session over
an ONNX model's dynamic dims, given no shapes or ShapeSets, compiles one
ShapeSet object per power-of-two bucket of the dims the feeds set, then
caches it; shapesets="exact": one per new set of feed shapes), and for
each compiled model a pool of instances: a run takes a
free instance (or makes one), runs it with the GIL released and gives it
back, so any number of Python threads may call run() on one session (each
concurrent call has its own instance: its arena and weights; memory grows
with the concurrency, pool_size caps it).  A CPU model's first runs are on
tier 0 while its object builds in the background (docs/python.md, "Tier
0"; wait_compiled() waits for it, knobs={"tier0": "off"} builds it first).

Needs: harp._harp (the extension over libharp.so), numpy.  Gives:
InferenceSession, CompiledModel, compile, SessionOptions, NodeArg.
"""
import os
import sys
import threading
import time

import numpy as np

from . import _harp
from ._errors import CLASSES, HarpError
from . import _onnxmeta
from . import _cuda

# harp_dtype codes (harp.h) -> numpy dtype; bf16 is held as its uint16 bit pattern
HARP_FP16, HARP_BF16, HARP_FP32, HARP_I32, HARP_BOOL, HARP_I8, HARP_U8, HARP_I64 = 0, 1, 2, 3, 4, 5, 6, 32
NP_OF = {HARP_FP16: np.dtype(np.float16), HARP_BF16: np.dtype(np.uint16), HARP_FP32: np.dtype(np.float32),
         HARP_I32: np.dtype(np.int32), HARP_BOOL: np.dtype(np.bool_), HARP_I8: np.dtype(np.int8),
         HARP_U8: np.dtype(np.uint8)}
ORT_TYPE = {HARP_FP16: "tensor(float16)", HARP_BF16: "tensor(bfloat16)", HARP_FP32: "tensor(float)",
            HARP_I32: "tensor(int32)", HARP_BOOL: "tensor(bool)", HARP_I8: "tensor(int8)", HARP_U8: "tensor(uint8)"}
_I64 = np.dtype(np.int64)
_PROVIDERS = {"cpu": "cpu", "cpuexecutionprovider": "cpu", "cuda": "cuda", "cudaexecutionprovider": "cuda",
              "interp": "interp"}
_TARGETS = {"cpu": ("cpu", ""), "sm80": ("cuda", "sm80"), "sm90": ("cuda", "sm90"), "cuda": ("cuda", ""),
            "interp": ("interp", "")}


class NodeArg:
    """An input or output as onnxruntime describes it: name, shape (ints; a str or None for a dynamic dim), type."""

    def __init__(self, name, shape, type):
        self.name, self.shape, self.type = name, shape, type

    def __repr__(self):
        return f"NodeArg(name={self.name!r}, type={self.type!r}, shape={self.shape!r})"


class SessionOptions:
    """A session's settings (all optional).

    intra_op_num_threads  threads per instance, the caller's included (0: $HARP_NUM_THREADS, else every CPU)
    shapes                {input: shape} or ["name=1x3x224x224", ...]: dims to compile for (else the feeds')
    syms                  {"batch": 1} or ["batch=1"]: shape symbols
    knobs                 {"no_dedup": 1} or ["no_dedup=1"]: the library's knobs (docs/options.md)
    cache_dir             where compiled code is kept (None: ~/.cache/harp)
    precision             CUDA fp32 contractions: "tf32" (default), "fp32", "fp16", "bf16"
    max_memory            bytes one instance may take at most (0: no limit but the machine)
    pool_size             instances per compiled model at most (0: as many as concurrent callers)
    params                {name: array}: weights of a .harp / .json model (an ONNX model carries its own)
    progress              True: a progress line (tqdm when installed) for compiles over a second; False: none;
                          a callable(stage, fraction): called after each compile stage, a true return cancels
    device                CUDA device ordinal (0)
    shapesets             {"height": (320, 960)} or ["height=320..960"]: shape symbols (an ONNX dim_param, a shape
                          variable such as "x_d2", or "input:axis") that vary; the model is compiled once for every
                          binding inside (CPU; docs/python.md, "ShapeSets").  None or "auto" (the default): a CPU
                          session over an ONNX model's dynamic dims compiles one object per power-of-two bucket of
                          each dim the feeds set ([2^k, 2^(k+1) - 1]; a dim at 1 stays 1); "exact": one compile per
                          new set of feed shapes
    shapeset_recompile    a feed outside the ShapeSets gets a compile of its own (False: InputMismatch)
    """

    def __init__(self, **kw):
        self.intra_op_num_threads = 0
        self.shapes = None
        self.syms = None
        self.knobs = None
        self.cache_dir = None
        self.precision = None
        self.max_memory = 0
        self.pool_size = 0
        self.params = None
        self.progress = True
        self.device = 0
        self.shapesets = None
        self.shapeset_recompile = False
        for k, v in kw.items():
            if not hasattr(self, k):
                raise CLASSES["UsageError"](f"unknown session option {k!r} (see help(harp.SessionOptions))")
            setattr(self, k, v)


def _options(options):
    if options is None:
        return SessionOptions()
    if isinstance(options, dict):
        return SessionOptions(**options)
    if isinstance(options, SessionOptions):
        return options
    # an onnxruntime SessionOptions: take what maps
    o = SessionOptions()
    o.intra_op_num_threads = getattr(options, "intra_op_num_threads", 0) or 0
    return o


_MODES = ("auto", "exact")  # shapesets as a word: harp chooses the boxes, or none (one compile per feed shape)


def _shapesets(v):
    """{name: (lo, hi)} or ["name=lo..hi"] -> ["name=lo..hi"]; None, "auto" or "exact" -> []."""
    if not v or (isinstance(v, str) and v in _MODES):
        return []
    if isinstance(v, dict):
        out = []
        for k, r in v.items():
            if not isinstance(r, (list, tuple)) or len(r) != 2:
                raise CLASSES["UsageError"](f"shapesets[{k!r}]: a (lo, hi) pair, not {r!r}")
            out.append(f"{k}={int(r[0])}..{int(r[1])}")
        return out
    if isinstance(v, str):
        raise CLASSES["UsageError"]("shapesets: a dict {name: (lo, hi)}, a list of \"NAME=LO..HI\" strings, \"auto\" "
                                    f"or \"exact\", not {v!r}")
    return [str(x) for x in v]


def _assignments(v, what):
    """{name: value} or ["name=value"] -> ["name=value"]; shapes' values may be sequences (1x3x224)."""
    if not v:
        return []
    if isinstance(v, dict):
        out = []
        for k, x in v.items():
            x = "x".join(str(int(d)) for d in x) if isinstance(x, (list, tuple)) else str(x)
            out.append(f"{k}={x}")
        return out
    if isinstance(v, str):
        raise CLASSES["UsageError"](f"{what}: a dict or a list of \"NAME=VALUE\" strings, not a string")
    return [str(x) for x in v]


class _Progress:
    """The compile's progress callback: the caller's, then a line for compiles that take over a second
    (verb: what the line says is happening, "compiling" or "tuning")."""

    def __init__(self, what, setting, verb="compiling"):
        self.what, self.setting, self.t0, self.bar, self.printed = what, setting, time.monotonic(), None, False
        self.verb = verb

    def __call__(self, stage, fraction):
        if callable(self.setting) and self.setting(stage, fraction):
            return True
        if self.setting is not True or time.monotonic() - self.t0 < 1.0:
            return False
        if self.bar is None and sys.stderr.isatty():
            try:
                from tqdm import tqdm
                self.bar = tqdm(total=100, desc=f"harp: {self.verb} {self.what}", unit="%", leave=False)
            except ImportError:
                self.bar = False
        if self.bar:
            self.bar.set_postfix_str(stage)
            self.bar.update(int(fraction * 100) - self.bar.n)
        else:
            print(f"harp: {self.verb} {self.what}: {stage} done ({fraction:.0%}, {time.monotonic() - self.t0:.1f} s)",
                  file=sys.stderr, flush=True)
        return False

    def close(self):
        if self.bar:
            self.bar.close()


class _Compiled:
    """One compiled model (one shape binding) and its pool of instances."""

    def __init__(self, c, threads, device, params, pool_size, shaped=False):
        self.c, self.threads, self.device, self.params, self.pool_size = c, threads, device, params, pool_size
        self.shaped = shaped  # ShapeSets: any feed shape inside them (-1 dims), run with run_shaped
        self.free, self.all, self.made, self.lock = [], [], 0, threading.Lock()
        self.cv = threading.Condition(self.lock)
        self.inputs = [c.input(k) for k in range(c.num_inputs)]    # (id, file name, dtype, shape)
        self.outputs = [c.output(k) for k in range(c.num_outputs)]
        self.in_np = [NP_OF[x[2]] for x in self.inputs]
        self.in_shape = [tuple(x[3]) for x in self.inputs]
        self.in_bytes = [max(int(np.prod(s, dtype=np.int64)), 0) * d.itemsize for s, d in zip(self.in_shape, self.in_np)]
        self.out_np = [NP_OF[x[2]] for x in self.outputs]
        self.out_shape = [tuple(x[3]) for x in self.outputs]
        self.out_dynamic = [any(d < 0 for d in s) for s in self.out_shape]
        self.dynamic_any = any(self.out_dynamic)
        self.out_bytes = [0 if dyn else int(np.prod(s, dtype=np.int64)) * d.itemsize
                          for s, d, dyn in zip(self.out_shape, self.out_np, self.out_dynamic)]
        self.closed = False
        self.release(self.acquire())  # the first instance now: its errors at construction

    def acquire(self):
        with self.lock:
            while True:
                if self.closed:
                    raise CLASSES["UsageError"]("the session is closed")
                if self.free:
                    return self.free.pop()
                if not self.pool_size or self.made < self.pool_size:
                    self.made += 1  # the slot is taken before the instance is made (outside the lock)
                    break
                self.cv.wait()
        try:
            inst = _harp.new_instance(self.c, self.threads, self.device, self.params)
        except BaseException:
            with self.lock:
                self.made -= 1
                self.cv.notify()
            raise
        with self.lock:
            self.all.append(inst)
        return inst

    def release(self, inst):
        with self.lock:
            self.free.append(inst)
            self.cv.notify()

    def close(self):
        with self.lock:
            self.closed = True
            insts, self.all, self.free = self.all, [], []
        for inst in insts:
            inst.close()


def _sanitize(name):
    """harp's identifier for an ONNX name (the importer's ox_sanitize): [A-Za-z0-9_], no leading digit."""
    out = "".join(c if c.isascii() and (c.isalnum() or c == "_") else "_" for c in name[:100])
    return "_" + out if not name or name[0].isdigit() else out


def _detect_format(data):
    head = bytes(data[:64]).lstrip()
    return "json" if head.startswith(b"{") else "onnx"


class InferenceSession:
    """A compiled model to run, as onnxruntime.InferenceSession:

        sess = harp.InferenceSession("model.onnx")
        y, = sess.run(None, {"input": x})

    path_or_bytes: a .onnx, .harp or .json file, or an ONNX model's bytes.
    sess_options: SessionOptions, a dict of its fields, or None.
    providers: ["cpu"] (or "CPUExecutionProvider"), ["cuda"], ["interp"] (the reference interpreter).
    """

    def __init__(self, path_or_bytes, sess_options=None, providers=None, provider_options=None, *, format=None,
                 shapesets=None, _target=None):
        o = _options(sess_options)
        if shapesets is not None:
            o.shapesets = shapesets
        self._o = o
        self._backend, self._target = _TARGETS[_target] if _target else (self._provider(providers), "")
        self._providers = [{"cpu": "CPUExecutionProvider", "cuda": "CUDAExecutionProvider",
                            "interp": "InterpExecutionProvider"}[self._backend]]
        self._lock = threading.Lock()
        self._bindings = {}
        self._last_tier0 = False
        self._closed = False
        self._data = None
        if isinstance(path_or_bytes, (bytes, bytearray, memoryview)):
            self._data, self._path = bytes(path_or_bytes), None
            self._format = format or _detect_format(self._data)
            self._name = "<bytes>"
        else:
            self._path = os.fspath(path_or_bytes)
            self._format = format or os.path.splitext(self._path)[1].lstrip(".")
            self._name = os.path.basename(self._path)
        self._meta = None
        if self._format == "onnx":
            if self._data is None:
                try:
                    with open(self._path, "rb") as f:
                        data = f.read()
                except OSError as ex:
                    raise CLASSES["IoError"](f"cannot read the model: {ex.strerror}", file=self._path) from None
            else:
                data = self._data
            self._meta = _onnxmeta.read(data)
            # a dynamic model compiles later, per binding: from these bytes, so the file may go meanwhile
            if self._meta and not self._meta.external and any(v.dynamic for v in self._meta.inputs):
                self._data = data
        self._boxes = _shapesets(o.shapesets)  # the caller's ShapeSets (a bad value: UsageError now)
        self._fixed = self._given_shapes()
        self._default = None
        self._shapeset_why = None  # an ONNX ShapeSet whose sizes the import needs as numbers: compiled per binding
        self._ncompiles = 0
        # harp chooses the boxes (a bucket per dim the feeds set): a dynamic ONNX model on the CPU, no ShapeSets named
        self._auto = (self._fixed is None and self._backend == "cpu" and not self._boxes
                      and o.shapesets in (None, "auto"))
        self._buckets = {}  # auto: the boxes' key -> the compiled model serving it (None: its feeds compile alone)
        self._met = set()  # auto: the boxes' keys whose first feed shape compiled alone (the box waits for a second)
        self._auto_why = None  # auto: why a box was compiled per feed shape instead
        if self._fixed is not None:
            try:
                self._default = self._compile(self._fixed, self._boxes)
            except (CLASSES["UnboundSymbol"], CLASSES["Unsupported"]) as ex:
                if not (self._boxes and self._meta and any(v.dynamic for v in self._meta.inputs)):
                    raise
                self._shapeset_why, self._fixed = str(ex), None

    @staticmethod
    def _provider(providers):
        if not providers:
            return "cpu"
        for p in providers:
            name = p[0] if isinstance(p, tuple) else p
            b = _PROVIDERS.get(str(name).lower())
            if b:
                return b
        raise CLASSES["UsageError"](f"no provider harp has among {providers!r} (cpu, cuda, interp)")

    def _given_shapes(self):
        """The shapes to compile for now, or None: a dynamic ONNX model without them compiles at run."""
        shapes = _assignments(self._o.shapes, "shapes")
        if self._meta is None or not any(v.dynamic for v in self._meta.inputs) or self._boxes:
            return tuple(shapes)
        given = {s.rsplit("=", 1)[0] for s in shapes}
        if all(not v.dynamic or v.name in given for v in self._meta.inputs) or self._o.syms:
            return tuple(shapes)
        return None

    def _compile(self, shapes, boxes=(), recompile=None):
        """Compile for shapes ("name=1x3x8x8") over the ShapeSets boxes ("NAME=LO..HI"; none: the shapes alone)."""
        o = self._o
        boxes = [] if self._shapeset_why else list(boxes)
        recompile = bool(o.shapeset_recompile) if recompile is None else recompile
        self._ncompiles += 1
        prog = _Progress(self._name, o.progress)
        src = self._data if self._data is not None else self._path
        try:
            c = _harp.compile(src, self._format or "", self._name, self._backend, list(shapes),
                              _assignments(o.syms, "syms"), _assignments(o.knobs, "knobs"),
                              [] if self._format == "onnx" else list(o.params or ()), self._target,
                              os.fspath(o.cache_dir) if o.cache_dir else "", o.precision or "", int(o.max_memory or 0),
                              prog, boxes, recompile, True)
        finally:
            prog.close()
        b = _Compiled(c, int(o.intra_op_num_threads or 0), int(o.device or 0), self._params(c), int(o.pool_size or 0),
                      bool(boxes))
        if self._meta:  # a name the library gives as harp's identifier only (a host program's): the file's
            san = {_sanitize(v.name): v.name for v in self._meta.inputs + self._meta.outputs}
            b.inputs = [(h, san.get(h, n) if n == h else n, d, sh) for h, n, d, sh in b.inputs]
            b.outputs = [(h, san.get(h, n) if n == h else n, d, sh) for h, n, d, sh in b.outputs]
        # an ONNX int64 output harp computes in int32 comes back int64, as onnxruntime gives it
        elem = {v.name: v.elem for v in self._meta.outputs} if self._meta else {}
        b.widen = [k for k, x in enumerate(b.outputs) if x[2] == HARP_I32 and elem.get(x[1]) == 7]
        return b

    def _params(self, c):
        """The parameter block from options.params (a .harp / .json model's weights), or None."""
        if not self._o.params:
            return None
        block = bytearray(c.params_bytes)
        for name, arr in self._o.params.items():
            off = c.param_offset(name)
            if off < 0:
                raise CLASSES["UsageError"](f"params: the model has no weight named {name!r}")
            b = np.ascontiguousarray(arr).tobytes()
            if off + len(b) > len(block):
                raise CLASSES["InputMismatch"](f"params: weight {name!r} is larger than its slot", node=name)
            block[off:off + len(b)] = b
        return bytes(block)

    def _binding_for(self, arrays_by_name):
        """The compiled model for these feeds (compiled now for a new binding of a dynamic model)."""
        if self._default is not None:
            return self._default
        key = tuple((v.name, tuple(np.shape(arrays_by_name[v.name])) if v.name in arrays_by_name else None)
                    for v in self._meta.inputs)
        with self._lock:
            b = self._bindings.get(key)
            if b is None:
                for name, shape in key:
                    if shape is None:
                        raise CLASSES["InputMismatch"](f"input {name!r} is not fed", node=name)
                shapes = _assignments(self._o.shapes, "shapes")
                given = {s.rsplit("=", 1)[0] for s in shapes}
                shapes += [f"{n}={'x'.join(map(str, s))}" for n, s in key if n not in given]
                boxes, ones = self._auto_boxes(key, given) if self._auto and not self._shapeset_why else ([], ())
                b = self._bindings[key] = self._compile_auto(shapes, boxes, ones) if boxes else self._compile(shapes)
        return b

    def _auto_boxes(self, key, given):
        """The boxes harp chooses for the feed shapes key ((input, shape) per input; inputs named in given are
        fixed): per dynamic dim the feeds set to v >= 2 (a dim_param by its name, an unnamed dim as "input:axis"),
        [2^k, 2^(k+1) - 1] around v; dims at 0 or 1 stay constants.  Returns (boxes, the constant dims as
        (symbol, size) pairs); ([], ()) when there is no box, or the feeds disagree on a dim_param (the compile
        then says so)."""
        meta = {v.name: v for v in self._meta.inputs}
        dims_set = []
        for name, shape in key:
            dims = meta[name].dims
            if name in given or dims is None or len(dims) != len(shape):
                continue
            for i, (d, n) in enumerate(zip(dims, shape)):
                if not isinstance(d, int):
                    dims_set.append((d if isinstance(d, str) and d else f"{name}:{i}", int(n)))
        chosen = _harp.auto_box(dims_set)  # the library's rule (harp_auto_box), as harp run and harp.h choose
        if chosen is None:
            return [], ()
        chosen.sort()
        return ([f"{sym}={lo}..{hi}" for sym, lo, hi in chosen if lo < hi],
                tuple((sym, lo) for sym, lo, hi in chosen if lo == hi))

    def _compile_auto(self, shapes, boxes, ones):
        """The compiled model for shapes in the chosen boxes (the dims in ones at their sizes), tiered: the
        boxes' first feed shape compiles alone (an exact object, as fast to its first result as before); their
        second distinct feed shape compiles the boxes' one object, which every later feed in them shares.  A
        box the library cannot compile as one object compiles these shapes alone, and so does every later feed
        in it (the import needing a size as a number: every later feed at all; shapeset_objects() says why)."""
        bkey = (tuple(boxes), ones)
        if bkey not in self._buckets and bkey not in self._met:
            self._met.add(bkey)
            return self._compile(shapes)
        if bkey not in self._buckets:
            try:
                self._buckets[bkey] = self._compile(shapes, boxes, True)
            except (CLASSES["Cancelled"], CLASSES["OutOfMemory"]):
                raise
            except HarpError as ex:
                self._buckets[bkey] = None
                self._auto_why = f"the box {', '.join(boxes)}: {ex}"
                if isinstance(ex, (CLASSES["UnboundSymbol"], CLASSES["Unsupported"])):
                    self._shapeset_why = str(ex)
        return self._buckets[bkey] or self._compile(shapes)

    def _any_binding(self):
        if self._default is not None:
            return self._default
        with self._lock:
            return next(iter(self._bindings.values()), None)

    # ---- onnxruntime's interface ----------------------------------------------------------
    def get_inputs(self):
        if self._meta is not None:
            return [NodeArg(v.name, v.dims, v.type) for v in self._meta.inputs]
        b = self._any_binding()
        return [NodeArg(x[1], list(x[3]), ORT_TYPE[x[2]]) for x in b.inputs]

    def get_outputs(self):
        b = self._any_binding()
        if self._meta is not None and (b is None or len(self._meta.outputs) != len(b.outputs)):
            return [NodeArg(v.name, v.dims, v.type) for v in self._meta.outputs]
        types = {v.name: v.type for v in self._meta.outputs} if self._meta else {}
        return [NodeArg(x[1], [d if d >= 0 else None for d in x[3]], types.get(x[1], ORT_TYPE[x[2]]))
                for x in b.outputs]

    def get_providers(self):
        return list(self._providers)

    def get_modelmeta(self):
        return None

    def run(self, output_names, input_feed, run_options=None, *, out=None, stream=None):
        """Run on input_feed ({name: array}); the outputs named (None: all) as numpy arrays, in order.

        Arrays: numpy arrays, or anything with __dlpack__ on the CPU (torch, jax); C-contiguous, of the
        input's dtype and shape (int64 for an ONNX int64 input, range-checked to int32).  out: {name: array}
        or a list, caller-provided output buffers (C-contiguous, writable) written in place and returned.

        CUDA sessions: feeds on the device (__dlpack_device__ kDLCUDA: torch, cupy, jax) run on their device
        pointers with no host copy; the outputs come back as harp.DeviceArray (DLPack, on the device) or go into
        out= device arrays.  stream: a CUstream as an int (torch: torch.cuda.current_stream().cuda_stream) to
        enqueue on; None: the instance's own, which the legacy default stream waits for.  The run is only
        enqueued: synchronise that stream (or read with .numpy(), which waits) before using the outputs.
        """
        if self._closed:
            raise CLASSES["UsageError"]("the session is closed")
        if not isinstance(input_feed, dict):
            raise CLASSES["UsageError"]("input_feed must be a dict {input name: array}")
        on_gpu = [k for k, v in input_feed.items() if _cuda.is_cuda(v)]
        if on_gpu or stream is not None:
            return self._run_device(output_names, input_feed, on_gpu, out, stream)
        feeds = {k: _as_array(k, v) for k, v in input_feed.items()}
        b = self._binding_for(feeds)
        ins, dtypes = _match_inputs(b, feeds)
        if b.shaped:
            return self._run_shaped(b, output_names, ins, dtypes, out)
        in_bytes = b.in_bytes
        if HARP_I64 in dtypes:  # an int64 feed takes 8 bytes an element where the model's int32 takes 4
            in_bytes = [n * 2 if d == HARP_I64 else n for n, d in zip(in_bytes, dtypes)]
        outs, dyn, given = self._out_buffers(b, output_names, out)
        inst = b.acquire()
        try:
            inst.run(ins, dtypes, in_bytes, outs, b.out_bytes)
            self._last_tier0 = inst.last_tier0
            if dyn:
                for k in dyn:
                    raw, shape = inst.output(k)
                    outs[k] = np.frombuffer(raw, dtype=b.out_np[k]).reshape(shape).copy()
        finally:
            b.release(inst)
        for k in b.widen:
            if k not in given:
                outs[k] = outs[k].astype(np.int64)
        return outs if output_names is None else [outs[k] for k in self._out_index(b, output_names)]

    def _run_shaped(self, b, output_names, ins, dtypes, out):
        """run() of a ShapeSet model: the feeds at their own shapes, the outputs sized by the binding."""
        names = [x[1] for x in b.outputs] if output_names is None else list(output_names)
        index = self._out_index(b, names)
        for k, (a, d) in enumerate(zip(ins, dtypes)):
            if d == HARP_I64:  # int64 feeds to an int32 input: range-checked, narrowed
                if a.size and (a.min() < -2**31 or a.max() >= 2**31):
                    name = b.inputs[k][1]
                    raise CLASSES["InputMismatch"](f"input {name!r}: a value is out of the int32 range harp computes "
                                                   "this input in", node=name)
                ins[k] = a.astype(np.int32)
        inst = b.acquire()
        try:
            inst.run_shaped(ins, [list(a.shape) for a in ins])
            self._last_tier0 = False
            outs = []
            for k in range(len(b.outputs)):
                raw, shape = inst.output(k)
                outs.append(np.frombuffer(raw, dtype=b.out_np[k]).reshape(shape).copy())
        finally:
            b.release(inst)
        for k in b.widen:
            outs[k] = outs[k].astype(np.int64)
        if out is not None:
            pairs = out.items() if isinstance(out, dict) else zip(names, out)
            for n, a in pairs:
                k = self._out_index(b, [n])[0]
                if not isinstance(a, np.ndarray) or a.shape != outs[k].shape or not a.flags.writeable:
                    raise CLASSES["InputMismatch"](f"output buffer {n!r}: a writable array of shape {outs[k].shape}",
                                                   node=str(n))
                a[...] = outs[k]
                outs[k] = a
        return [outs[k] for k in index]

    def shapeset_objects(self):
        """(objects compiled so far, of them built by the C compiler, why a binding compiles on its own or None).
        An ONNX model whose ShapeSet sizes the import needs as numbers (a strided conv) compiles per feed shape, as
        without ShapeSets: (bindings compiled, None: not counted, the reason)."""
        if self._auto:
            return self._auto_objects()
        if self._shapeset_why:
            with self._lock:
                return len(self._bindings), None, self._shapeset_why
        b = self._any_binding()
        return b.c.shapeset_objects() if b is not None else (0, 0, None)

    def _auto_objects(self):
        """shapeset_objects() of a session whose boxes harp chose: summed over the compiled models (one made for
        a feed shape alone counts one object and makes the C compiles None: not counted)."""
        objs, cc, why = 0, 0, self._auto_why
        with self._lock:
            models = list({id(b): b for b in self._bindings.values()}.values())
        for b in models:
            if b.shaped:
                n, k, w = b.c.shapeset_objects()
                objs, cc, why = objs + n, None if cc is None else cc + k, why or w
            else:
                objs, cc = objs + 1, None
        return objs, cc, why

    def compile_count(self):
        """How many compiles this session has asked the library for (each may come from the disk cache): one per
        ShapeSet box, or per new set of feed shapes where the model compiles per binding."""
        return self._ncompiles

    def _run_device(self, output_names, input_feed, on_gpu, out, stream):
        """run() on device pointers (harp_model_run_device): every feed and out= buffer a CUDA DLPack tensor."""
        if self._backend != "cuda":
            name = on_gpu[0] if on_gpu else None
            what = f"input {name!r} is on a CUDA device" if name else "a stream was given"
            raise CLASSES["Unsupported"](f"{what}, but this session runs on the {self._backend} provider: copy it to "
                                         "the host (e.g. .cpu()) or make the session with providers=['cuda']",
                                         node=str(name or ""))
        host = [k for k in input_feed if k not in on_gpu]
        if host:
            raise CLASSES["InputMismatch"](f"input {host[0]!r} is on the host while others are on the device: feed "
                                           "all on the device (or all on the host)", node=str(host[0]))
        feeds = {k: _cuda.Imported(v, stream or None) for k, v in input_feed.items()}
        b = self._binding_for(feeds)
        if b.dynamic_any:
            raise CLASSES["Unsupported"]("an output's shape is known only at run time: run on host arrays")
        dev = int(self._o.device or 0)
        ins = []
        for k, (hid, name, dt, _) in enumerate(b.inputs):
            t = feeds.get(name, feeds.get(hid))
            if t is None:
                raise CLASSES["InputMismatch"](f"input {name!r} is not fed", node=name)
            _check_device(name, t, b.in_np[k], b.in_shape[k], dev, "input")
            ins.append(t.ptr)
        if len(feeds) != len(b.inputs):
            raise CLASSES["InputMismatch"](f"{len(feeds)} feeds for {len(b.inputs)} inputs")
        outs, keep = [], []
        given = dict(out.items()) if isinstance(out, dict) else dict(zip([x[1] for x in b.outputs], out or ()))
        for k, (hid, name, dt, _) in enumerate(b.outputs):
            o = given.get(name, given.get(hid))
            if o is None:
                o = _cuda.DeviceArray(b.out_shape[k], b.out_np[k], dev)
                t = o
            else:
                if not _cuda.is_cuda(o):
                    raise CLASSES["InputMismatch"](f"output buffer {name!r}: a CUDA DLPack array for a run on the "
                                                   "device", node=name)
                t = _cuda.Imported(o, stream or None)
                _check_device(name, t, b.out_np[k], b.out_shape[k], dev, "output buffer")
            keep.append(t)
            outs.append(o)
        inst = b.acquire()
        try:
            inst.run_device(ins, [t.ptr for t in keep], int(stream or 0))
        finally:
            b.release(inst)
        return outs if output_names is None else [outs[k] for k in self._out_index(b, output_names)]

    def _out_index(self, b, output_names):
        if output_names is None:
            return range(len(b.outputs))
        idx = []
        for n in output_names:
            k = next((i for i, x in enumerate(b.outputs) if n in (x[1], x[0])), None)
            if k is None:
                names = ", ".join(x[1] for x in b.outputs)
                raise CLASSES["InputMismatch"](f"the model has no output named {n!r} (its outputs: {names})", node=str(n))
            idx.append(k)
        return idx

    def _out_buffers(self, b, output_names, out):
        """A buffer per output: the caller's (out) where given, else a new array; dyn: outputs read after the run."""
        if out is None and not b.dynamic_any:  # the common case, kept short
            return [np.empty(sh, dt) for sh, dt in zip(b.out_shape, b.out_np)], (), ()
        self._out_index(b, output_names)  # unknown names fail before the run
        given = {}
        if out is not None:
            names = [x[1] for x in b.outputs] if output_names is None else list(output_names)
            pairs = out.items() if isinstance(out, dict) else zip(names, out)
            for n, a in pairs:
                k = self._out_index(b, [n])[0]
                given[k] = _check_out(b, k, a)
        outs, dyn = [], []
        for k in range(len(b.outputs)):
            if k in given:
                outs.append(given[k])
            elif b.out_dynamic[k]:
                outs.append(None)
                dyn.append(k)
            else:
                outs.append(np.empty(b.out_shape[k], dtype=b.out_np[k]))
        return outs, dyn, given

    @property
    def last_run_tier0(self):
        """True when the last run() that returned (on any thread) ran on tier 0: a CPU model's first runs, while
        its object builds in the background (docs/python.md, "Tier 0")."""
        return self._last_tier0

    def wait_compiled(self):
        """Wait for the background builds of the models compiled so far (tier 0), so that the next run() is on
        the compiled object; a build that failed raises its error (the runs then stay on tier 0)."""
        with self._lock:
            models = list({id(b): b for b in [self._default] + list(self._bindings.values()) if b is not None}.values())
        for b in models:
            b.c.wait()

    def close(self):
        """Free the compiled code and instances; run() fails after (UsageError)."""
        self._closed = True
        for b in [self._default] + list(self._bindings.values()):
            if b is not None:
                b.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _as_array(name, v):
    if isinstance(v, np.ndarray):
        return v
    if hasattr(v, "__dlpack__"):
        try:
            return np.from_dlpack(v)
        except (RuntimeError, BufferError, TypeError) as ex:
            raise CLASSES["InputMismatch"](f"input {name!r}: its DLPack tensor is not readable on the CPU ({ex})",
                                           node=str(name)) from None
    if np.isscalar(v) or isinstance(v, (list, tuple)):
        return np.asarray(v)
    raise CLASSES["InputMismatch"](f"input {name!r}: a {type(v).__name__} is not an array (numpy, or __dlpack__)",
                                   node=str(name))


def _check_device(name, t, dtype, shape, device, what):
    """A CUDA DLPack tensor t as the model takes it: dtype, shape, C-contiguous, on the session's device."""
    if t.dtype != dtype:
        raise CLASSES["DtypeMismatch"](f"{what} {name!r} takes {dtype}, the device array is {t.dtype} (no conversion "
                                       "on the device: int64 is narrowed on host feeds only)", node=name)
    if t.shape != tuple(shape):
        raise CLASSES["InputMismatch"](f"{what} {name!r} has shape {tuple(shape)}, the device array {t.shape}", node=name)
    if not t.contiguous:
        raise CLASSES["InputMismatch"](f"{what} {name!r} is not C-contiguous on the device", node=name)
    if t.device != device:
        raise CLASSES["InputMismatch"](f"{what} {name!r} is on cuda:{t.device}, the session on cuda:{device}", node=name)


def _match_inputs(b, feeds):
    """The feeds in the model's input order, checked: name, dtype, shape, contiguity."""
    ins, dtypes, used = [], [], 0
    for k, (hid, name, dt, _) in enumerate(b.inputs):
        a = feeds.get(name)
        if a is None:
            a = feeds.get(hid)
        if a is None:
            raise CLASSES["InputMismatch"](f"input {name!r} is not fed (the inputs: "
                                           f"{', '.join(x[1] for x in b.inputs)})", node=name)
        used += 1
        want = b.in_np[k]
        code = dt
        if a.dtype != want:
            if dt == HARP_I32 and a.dtype == _I64:
                code = HARP_I64
            else:
                raise CLASSES["DtypeMismatch"](f"input {name!r} takes {want} ({ORT_TYPE[dt]}), the feed is {a.dtype}",
                                               node=name)
        if len(a.shape) != len(b.in_shape[k]) or any(w >= 0 and w != d for w, d in zip(b.in_shape[k], a.shape)):
            raise CLASSES["InputMismatch"](f"input {name!r} has shape {b.in_shape[k]}, the feed {a.shape}", node=name)
        if not a.flags.c_contiguous:
            raise CLASSES["InputMismatch"](f"input {name!r} is not C-contiguous (np.ascontiguousarray makes a copy "
                                           "that is)", node=name)
        ins.append(a)
        dtypes.append(code)
    if used != len(feeds):
        known = {x[1] for x in b.inputs} | {x[0] for x in b.inputs}
        extra = [n for n in feeds if n not in known]
        raise CLASSES["InputMismatch"](f"the model has no input named {extra[0]!r} (its inputs: "
                                       f"{', '.join(x[1] for x in b.inputs)})", node=str(extra[0]))
    return ins, dtypes


def _check_out(b, k, a):
    name = b.outputs[k][1]
    if not isinstance(a, np.ndarray):
        raise CLASSES["InputMismatch"](f"output buffer {name!r}: a numpy array, not a {type(a).__name__}", node=name)
    if b.out_dynamic[k]:
        raise CLASSES["Unsupported"](f"output {name!r}: its shape is known only at run time; it cannot be written "
                                     "into a buffer given before", node=name)
    if a.dtype != b.out_np[k] or a.shape != b.out_shape[k]:
        raise CLASSES["InputMismatch"](f"output buffer {name!r} is {a.dtype}{list(a.shape)}, the output "
                                       f"{b.out_np[k]}{list(b.out_shape[k])}", node=name)
    if not a.flags.c_contiguous or not a.flags.writeable:
        raise CLASSES["InputMismatch"](f"output buffer {name!r} must be C-contiguous and writable", node=name)
    return a


class CompiledModel(InferenceSession):
    """harp.compile's result: an InferenceSession that is also callable.

        m = harp.compile("model.onnx", shapes={"x": (1, 3, 224, 224)})
        y = m(x)                  # positional in input order, or m(x=x); one output: the array, else a tuple
    """

    def __call__(self, *args, **kwargs):
        b = self._any_binding()
        names = [v.name for v in self._meta.inputs] if self._meta else [x[1] for x in b.inputs]
        if len(args) > len(names):
            raise CLASSES["InputMismatch"](f"{len(args)} arguments for {len(names)} inputs")
        feeds = dict(zip(names, args))
        feeds.update(kwargs)
        outs = self.run(None, feeds)
        return outs[0] if len(outs) == 1 else tuple(outs)


def compile(model, shapes=None, target="cpu", options=None, **kw):
    """Compile model (a path, or an ONNX model's bytes) for target ("cpu", "sm80", "sm90", "cuda", "interp").

    shapes: {input: shape} (or ["x=1x3x224x224"]) for dynamic dims; options: SessionOptions, a dict of its
    fields, or keyword arguments.  Returns a CompiledModel (callable; also .run, .get_inputs ...).
    """
    o = _options(options)
    for k, v in kw.items():
        if not hasattr(o, k):
            raise CLASSES["UsageError"](f"unknown option {k!r} (see help(harp.SessionOptions))")
        setattr(o, k, v)
    if shapes is not None:
        o.shapes = shapes
    if target not in _TARGETS:
        raise CLASSES["UsageError"](f"unknown target {target!r} (cpu, sm80, sm90, cuda, interp)")
    return CompiledModel(model, o, _target=target)
