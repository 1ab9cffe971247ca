"""A generator of small random harp DSL programs for differential testing.

`generate(seed)` returns a Program: the DSL text of a `main` graph (and any
subgraphs it calls) built from a random mix of elementwise ops with numpy
broadcasting, movement ops, reductions, contractions, normalizations,
convolutions, pools, f32/f16 casts, several outputs and subgraph calls; plus
the specs of its inputs, so `program.feeds()` makes the same inputs every
time.  Shapes stay small (every dim <= MAX_DIM, every tensor <= MAX_ELEMS)
so a case compiles and runs in well under a second.

The generator tracks a rough magnitude per tensor ("scale") and whether it
is bounded away from zero ("pos"), so exp only sees moderate values, log,
sqrt, rsqrt, recip and division only see positive ones, and f16 stays far
from overflow: a disagreement between backends is then a wrong answer, not
rounding noise on an ill-conditioned value.  `features` narrows the ops
(see FEATURES)."""
import math
import re

import numpy as np

MAX_DIM = 24
MAX_ELEMS = 20000
F16_MAX_SCALE = 64.0
FEATURES = ("unary", "binary", "compare", "movement", "reduce", "matmul", "softmax", "layernorm", "conv", "pool",
            "attention", "cast", "subgraph")
NP = {"f32": np.float32, "f16": np.float16, "i32": np.int32, "bool": np.bool_}
FLOAT = ("f32", "f16")
I32_MAX_SCALE = 1e6  # keep i32 products far from overflow


class T:
    """A value of the program being built."""

    def __init__(self, name, shape, dtype, scale=1.0, pos=False):
        self.name, self.shape, self.dtype, self.scale, self.pos = name, tuple(shape), dtype, float(scale), pos

    @property
    def rank(self):
        return len(self.shape)

    @property
    def numel(self):
        return int(np.prod(self.shape, dtype=np.int64))


def ty(t):
    return f"{t.dtype}[{', '.join(str(d) for d in t.shape)}]"


def numel(shape):
    return int(np.prod(shape, dtype=np.int64))


def lit(v):
    """A float literal that the DSL never reads as an axis (always has a point)."""
    s = f"{v:.4g}"
    return s if any(c in s for c in ".e") else s + ".0"


def bcast(a, b):
    r = max(len(a), len(b))
    a, b = (1,) * (r - len(a)) + tuple(a), (1,) * (r - len(b)) + tuple(b)
    out = []
    for x, y in zip(a, b):
        if x != y and 1 not in (x, y):
            return None
        out.append(max(x, y))
    return tuple(out)


class Program:
    def __init__(self, seed, text, inputs, outputs):
        self.seed, self.text, self.inputs, self.outputs = seed, text, inputs, outputs

    def feeds(self):
        """Inputs: uniform in [-1, 1], or [0.5, 1.5] for those that must be positive."""
        rng = np.random.default_rng(self.seed + 7919)
        out = {}
        for name, shape, dtype, pos in self.inputs:
            lo, hi = (0.5, 1.5) if pos else (-1.0, 1.0)
            if dtype == "i32":
                out[name] = rng.integers(-3, 4, shape).astype(np.int32)
            else:
                out[name] = rng.uniform(lo, hi, shape).astype(NP[dtype])
        return out


class Gen:
    def __init__(self, rng, features, prefix="", max_ops=12, depth=0):
        self.rng, self.features, self.prefix, self.depth = rng, features, prefix, depth
        self.max_ops = max_ops
        self.stmts, self.params, self.pool = [], [], []
        self.n, self.subgraphs, self.sub_feeds = 0, [], []

    # ---- helpers
    def r(self, lo, hi):
        """An integer in [lo, hi]."""
        return int(self.rng.integers(lo, hi + 1))

    def p(self, prob):
        return self.rng.random() < prob

    def choice(self, xs):
        return xs[int(self.rng.integers(len(xs)))]

    def fresh(self):
        self.n += 1
        return f"{self.prefix}t{self.n}"

    def param(self, shape, dtype, pos=False):
        name = f"{self.prefix}in{len(self.params)}"
        t = T(name, shape, dtype, 1.5 if pos else 1.0, pos)
        self.params.append((t, pos))
        return t

    def emit(self, expr, shape, dtype, scale, pos=False):
        shape = tuple(int(d) for d in shape)
        if numel(shape) > MAX_ELEMS or any(d > 4 * MAX_DIM for d in shape):
            return None
        t = T(self.fresh(), shape, dtype, min(scale, 1e6), pos)
        self.stmts.append(f"{t.name} = {expr}")
        self.pool.append(t)
        return t

    def pick(self, ok=lambda t: True):
        """An operand, mostly one of the latest values."""
        cands = [t for t in self.pool if ok(t)]
        if not cands:
            return None
        if self.p(0.6):
            return cands[-1]
        return cands[int(self.rng.integers(len(cands)))]

    def rand_shape(self, rank=None, maxd=8):
        rank = self.r(1, 4) if rank is None else rank
        while True:
            s = tuple(self.r(1, maxd) for _ in range(rank))
            if numel(s) <= 4000:
                return s

    def positive(self, t):
        """t, or a positive value made from it (abs(t) + 0.5)."""
        if t.pos:
            return t
        return self.emit(f"abs({t.name}) + {lit(0.5)}", t.shape, t.dtype, t.scale + 0.5, True)

    def bounded(self, t, lim=3.0):
        if t.scale <= lim:
            return t
        return self.emit(f"tanh({t.name})", t.shape, t.dtype, 1.0)

    def partner(self, a, pos=False):
        """A second operand for a with a shape that broadcasts against a's:
        a literal, a value already there, a new input with size-1 or
        missing axes (sometimes expanded), or one that widens a's 1-axes."""
        k = self.rng.random()
        if k < 0.15:
            if a.dtype == "i32":
                v = self.r(-3, 3)
                return str(v), a.shape, abs(v), False
            v = self.rng.uniform(0.5, 1.5) if pos else self.choice([-1, 1]) * self.rng.uniform(0.25, 1.5)
            return lit(v), a.shape, abs(v), pos
        if k < 0.35:
            c = self.pick(lambda t: t is not a and t.dtype == a.dtype and bcast(t.shape, a.shape) is not None and
                          numel(bcast(t.shape, a.shape)) <= MAX_ELEMS and (t.pos or not pos))
            if c is not None:
                return c.name, bcast(c.shape, a.shape), c.scale, c.pos
        s = list(a.shape)
        if self.p(0.4):
            s = [1 if self.p(0.4) else d for d in s]
        if s and self.p(0.3):
            s = s[self.r(1, len(s)):]
        if self.p(0.2):
            s = [self.r(2, 5) if d == 1 else d for d in s]
        full = bcast(tuple(s), a.shape)
        if full is None or numel(full) > MAX_ELEMS:
            s, full = list(a.shape), a.shape
        t = self.param(tuple(s), a.dtype, pos)
        if self.p(0.25) and tuple(s) != tuple(full):
            e = self.emit(f"expand({t.name}, [{', '.join(str(d) for d in full)}])", full, a.dtype, t.scale, pos)
            if e is not None:
                return e.name, full, e.scale, pos
        return t.name, full, t.scale, pos

    # ---- ops
    def op_unary(self):
        x = self.pick(lambda t: t.dtype != "bool")
        if x is None:
            return
        f = self.choice(["relu", "gelu", "silu", "sigmoid", "tanh", "neg", "abs", "exp", "log", "sqrt", "rsqrt", "recip"])
        if x.dtype == "i32":
            f = self.choice(["relu", "neg", "abs"])
        if f == "exp":
            x = self.bounded(x)
            self.emit(f"exp({x.name})", x.shape, x.dtype, math.exp(x.scale), x.scale <= 3)
        elif f in ("log", "sqrt", "rsqrt", "recip"):
            x = self.positive(x)
            sc = {"log": max(3.2, math.log(max(x.scale, 1))), "sqrt": math.sqrt(x.scale), "rsqrt": 5.0, "recip": 25.0}[f]
            self.emit(f"{f}({x.name})", x.shape, x.dtype, sc, f != "log")
        elif f in ("sigmoid", "tanh"):
            self.emit(f"{f}({x.name})", x.shape, x.dtype, 1.0, f == "sigmoid" and x.scale <= 3)
        else:
            self.emit(f"{f}({x.name})", x.shape, x.dtype, x.scale, x.pos and f == "abs")

    def op_binary(self):
        a = self.pick(lambda t: t.dtype != "bool")
        if a is None:
            return
        f = self.choice(["+", "-", "*", "/", "max", "min", "add", "mul"])
        if a.dtype == "i32" and f == "/":
            f = "-"
        b, shape, bsc, bpos = self.partner(a, pos=f == "/")
        if a.dtype == "i32" and f in ("max", "min") and b.lstrip("-").isdigit():
            f = "+"  # max(x, 2) would reduce over axis 2
        if f == "/" and a.dtype == "f16" and a.scale > F16_MAX_SCALE / 4:
            a = self.bounded(a)
        if f in ("max", "min", "add", "mul"):
            e = f"{f}({a.name}, {b})" if self.p(0.5) else f"{f}({b}, {a.name})"
        elif f == "/" or self.p(0.6):
            e = f"{a.name} {f} {b}"
        else:
            e = f"{b} {f} {a.name}"
        sc = {"+": a.scale + bsc, "-": a.scale + bsc, "add": a.scale + bsc, "*": a.scale * bsc, "mul": a.scale * bsc,
              "/": a.scale / 0.5, "max": max(a.scale, bsc), "min": max(a.scale, bsc)}[f]
        pos = (f in ("+", "add", "*", "mul", "/") and a.pos and bpos) or (f == "max" and (a.pos or bpos)) or \
              (f == "min" and a.pos and bpos)
        if (a.dtype == "f16" and sc > F16_MAX_SCALE) or (a.dtype == "i32" and sc > I32_MAX_SCALE):
            return
        self.emit(e, shape, a.dtype, sc, pos)

    def op_compare(self):
        # Not on f16: the compiled backends keep fp32 inside a fused region
        # and round only where they store (docs/tiny-ir.md, the
        # interpreter's rules), so an f16 tie (one in ~2000 elements) can
        # compare differently; an fp32 tie is one in ~10^7.
        a = self.pick(lambda t: t.dtype in ("f32", "i32"))
        if a is None:
            return
        b, shape, bsc, _ = self.partner(a)
        f = self.choice(["<", "<=", ">", ">=", "==", "!="])
        c = self.emit(f"{a.name} {f} {b}", shape, "bool", 1.0)
        if c is None:
            return
        if self.p(0.7):
            x, y = self.pick(lambda t: t.dtype != "bool" and bcast(t.shape, shape) is not None), None
            if x is None:
                return
            y, yshape, ysc, _ = self.partner(x)
            full = bcast(bcast(x.shape, yshape), shape)
            if full is not None:
                self.emit(f"where({c.name}, {x.name}, {y})", full, x.dtype, max(x.scale, ysc))
        elif self.p(0.5):
            d = self.pick(lambda t: t.dtype == "bool" and t is not c and bcast(t.shape, c.shape) is not None)
            if d is not None:
                self.emit(f"{self.choice(['max', 'min'])}({c.name}, {d.name})", bcast(c.shape, d.shape), "bool", 1.0)

    def op_reshape(self, x):
        n = x.numel
        # split n's prime factors over a random number of axes
        fs, m, q = [], n, 2
        while q * q <= m:
            while m % q == 0:
                fs.append(q)
                m //= q
            q += 1
        if m > 1:
            fs.append(m)
        rank = self.r(1, 4)
        dims = [1] * rank
        for f in fs:
            dims[self.r(0, rank - 1)] *= f
        if max(dims) > 4 * MAX_DIM:
            return
        txt = [str(d) for d in dims]
        if self.p(0.3):
            txt[self.r(0, rank - 1)] = "-1"
        self.emit(f"reshape({x.name}, [{', '.join(txt)}])", dims, x.dtype, x.scale, x.pos)

    def op_movement(self):
        x = self.pick()
        if x is None:
            return
        k = self.choice(["reshape", "permute", "slice", "slice", "pad", "flip", "concat", "expand"])
        if k == "reshape":
            return self.op_reshape(x)
        if x.rank == 0:
            return
        if k == "permute" and x.rank >= 2:
            perm = [int(i) for i in self.rng.permutation(x.rank)]
            self.emit(f"permute({x.name}, [{', '.join(map(str, perm))}])", [x.shape[i] for i in perm], x.dtype, x.scale,
                      x.pos)
        elif k == "slice":
            axes = sorted(self.rng.choice(x.rank, size=self.r(1, min(2, x.rank)), replace=False).tolist())
            st, en, sp, shape = [], [], [], list(x.shape)
            for a in axes:
                d = x.shape[a]
                s = self.r(-d, d - 1) if self.p(0.7) else 0
                e = self.choice([self.r(-d, d), d, d + 3, -1])
                step = self.choice([1, 1, 2, 3])
                n = len(range(d)[slice(s, e, step)])
                if n < 1:
                    s, e, n = 0, d, len(range(d)[slice(0, d, step)])
                st.append(s), en.append(e), sp.append(step)
                shape[a] = n
            na = [a - x.rank if self.p(0.3) else a for a in axes]
            e = f"slice({x.name}, {st}, {en}, {na}"
            e += f", {sp})" if any(v != 1 for v in sp) or self.p(0.3) else ")"
            self.emit(e, shape, x.dtype, x.scale, x.pos)
        elif k == "pad" and x.dtype != "bool":
            pads = [[self.r(0, 2), self.r(0, 2)] if self.p(0.6) else [0, 0] for _ in x.shape]
            v = self.choice([None, 0.0, 0.5, -1.0] if x.dtype != "i32" else [None, 0.0, -1.0, 2.0])
            shape = [d + lo + hi for d, (lo, hi) in zip(x.shape, pads)]
            e = f"pad({x.name}, {pads}" + (f", value={lit(v)})" if v is not None else ")")
            self.emit(e, shape, x.dtype, max(x.scale, 1.0), x.pos and v == 0.5)
        elif k == "flip":
            axes = sorted(self.rng.choice(x.rank, size=self.r(1, x.rank), replace=False).tolist())
            self.emit(f"flip({x.name}, {axes})", x.shape, x.dtype, x.scale, x.pos)
        elif k == "concat":
            ax = self.r(0, x.rank - 1)
            parts, shape = [x.name], list(x.shape)
            for _ in range(self.r(1, 2)):
                s = list(x.shape)
                s[ax] = self.r(1, 6)
                if self.p(0.4):
                    parts.append(x.name)
                    shape[ax] += x.shape[ax]
                else:
                    parts.append(self.param(s, x.dtype, x.pos).name)
                    shape[ax] += s[ax]
            axt = ax - x.rank if self.p(0.3) else ax
            self.emit(f"concat([{', '.join(parts)}], axis={axt})", shape, x.dtype, max(x.scale, 1.5), x.pos)
        elif k == "expand":
            shape = [self.r(2, 5) if d == 1 and self.p(0.7) else d for d in x.shape]
            if self.p(0.3) and x.rank < 4:
                shape = [self.r(2, 4)] + shape
            txt = [str(d) if d != x.shape[i - (len(shape) - x.rank)] or self.p(0.5) else "-1"
                   if i >= len(shape) - x.rank else str(d) for i, d in enumerate(shape)]
            self.emit(f"expand({x.name}, [{', '.join(txt)}])", shape, x.dtype, x.scale, x.pos)

    def op_reduce(self):
        x = self.pick(lambda t: t.dtype != "bool" and t.rank >= 1)
        if x is None:
            return
        f = self.choice(["sum", "mean", "max", "min"] if x.dtype != "i32" else ["sum", "max", "min"])
        keep = self.p(0.4)
        if self.p(0.15):
            axes = list(range(x.rank))
            arg = ""
        else:
            axes = sorted(self.rng.choice(x.rank, size=self.r(1, x.rank), replace=False).tolist())
            txt = [a - x.rank if self.p(0.3) else a for a in axes]
            arg = f", {txt[0]}" if len(txt) == 1 and self.p(0.3) and f in ("sum", "mean") else f", {txt}"
        n = numel([x.shape[a] for a in axes])
        shape = [1 if i in axes else d for i, d in enumerate(x.shape)] if keep else \
            [d for i, d in enumerate(x.shape) if i not in axes]
        sc = x.scale * (n if x.pos else 2 * math.sqrt(n)) if f == "sum" else x.scale
        if (x.dtype == "f16" and sc > F16_MAX_SCALE) or (x.dtype == "i32" and sc > I32_MAX_SCALE):
            return
        kd = ", keepdim=true" if keep else (", keepdim=false" if self.p(0.2) else "")
        if not arg and kd:
            arg = f", {list(range(x.rank))}"
        self.emit(f"{f}({x.name}{arg}{kd})", shape, x.dtype, sc, x.pos)

    def op_matmul(self):
        x = self.pick(lambda t: t.dtype in FLOAT and t.rank >= 1)
        if x is None:
            return
        if x.rank == 1:
            x = self.emit(f"reshape({x.name}, [1, {x.shape[0]}])", (1, x.shape[0]), x.dtype, x.scale, x.pos)
            if x is None:
                return
        M, K = x.shape[-2:]
        if x.dtype == "f16" and x.scale * math.sqrt(K) * 2 > F16_MAX_SCALE:
            x = self.bounded(x, 1.0)
        batch = list(x.shape[:-2])
        k = self.rng.random()
        if k < 0.15 and x.rank >= 2:
            # x @ x^T
            perm = list(range(x.rank - 2)) + [x.rank - 1, x.rank - 2]
            xt = self.emit(f"permute({x.name}, {perm})", batch + [K, M], x.dtype, x.scale, x.pos)
            if xt is not None:
                self.emit(f"{x.name} @ {xt.name}", batch + [M, M], x.dtype, x.scale * x.scale * math.sqrt(K) * 2)
            return
        N = self.r(1, 16)
        bb = [1 if self.p(0.3) else d for d in batch]
        if bb and self.p(0.3):
            bb = bb[self.r(1, len(bb)):]
        if not batch and self.p(0.2):
            bb = [self.r(2, 3)]
        w, wname = self.weight(bb, K, N, x.dtype)
        if wname is None:
            return
        out_batch = list(bcast(tuple(batch), tuple(bb)))
        if self.p(0.2) and bb != out_batch:
            full = out_batch + [K, N]
            e = self.emit(f"expand({wname}, {full})", full, x.dtype, 1.0)
            if e is not None:
                wname = e.name
        xname = x.name
        if M == 1 and self.p(0.5):
            # a row broadcast to several rows: an axis that neither operand reads
            Mx = self.r(2, 12)
            e = self.emit(f"expand({x.name}, {list(x.shape[:-2]) + [Mx, K]})", list(x.shape[:-2]) + [Mx, K], x.dtype,
                          x.scale, x.pos)
            if e is not None:
                xname, M = e.name, Mx
        sc = x.scale * math.sqrt(K) * 2
        e = f"matmul({xname}, {wname})" if self.p(0.3) else f"{xname} @ {wname}"
        shape = out_batch + [M, N]
        if numel(shape) > MAX_ELEMS:
            return
        if self.p(0.4):
            b = self.param([N], x.dtype)
            act = self.choice(["", "relu", "gelu", "silu", "tanh"])
            e = f"{act}({e} + {b.name})" if act else f"{e} + {b.name}"
            sc += 1
        self.emit(e, shape, x.dtype, sc)

    def weight(self, bb, K, N, dtype):
        """A [bb.., K, N] operand: a new input, or a strided view of one
        (transposed, every other row, reversed)."""
        k = self.rng.random()
        nb = len(bb)
        if k < 0.6:
            w = self.param(bb + [K, N], dtype)
            return w, w.name
        if k < 0.8:
            w = self.param(bb + [N, K], dtype)
            perm = list(range(nb)) + [nb + 1, nb]
            e = self.emit(f"permute({w.name}, {perm})", bb + [K, N], dtype, 1.0)
        elif k < 0.92:
            w = self.param(bb + [2 * K, N], dtype)
            e = self.emit(f"slice({w.name}, [1], [{2 * K}], [{-2}], [2])", bb + [K, N], dtype, 1.0)
        else:
            w = self.param(bb + [K, N], dtype)
            e = self.emit(f"flip({w.name}, [{nb + self.r(0, 1)}])", bb + [K, N], dtype, 1.0)
        return w, e.name if e is not None else None

    def op_matmul_left(self):
        """w @ x: x is the right operand."""
        x = self.pick(lambda t: t.dtype in FLOAT and t.rank >= 2)
        if x is None:
            return
        K, N = x.shape[-2:]
        if x.dtype == "f16" and x.scale * math.sqrt(K) * 2 > F16_MAX_SCALE:
            x = self.bounded(x, 1.0)
        M = self.r(1, 12)
        bb = [1 if self.p(0.3) else d for d in x.shape[:-2]]
        w = self.param(bb + [M, K], x.dtype)
        shape = list(bcast(tuple(bb), tuple(x.shape[:-2]))) + [M, N]
        self.emit(f"{w.name} @ {x.name}", shape, x.dtype, x.scale * math.sqrt(K) * 2)

    def op_contract(self):
        """sum(x * p, axes): a contraction the detector must find in a
        product of broadcast operands (an einsum, not a matmul)."""
        x = self.pick(lambda t: t.dtype in FLOAT and t.rank >= 2)
        if x is None:
            return
        if x.dtype == "f16":
            x = self.bounded(x, 1.0)
        ps = [1 if self.p(0.4) else d for d in x.shape]
        ps = [self.r(2, 6) if d == 1 and x.shape[i] == 1 and self.p(0.5) else d for i, d in enumerate(ps)]
        if self.p(0.3):
            ps = ps[self.r(1, len(ps) - 1):]
        full = bcast(x.shape, tuple(ps))
        if full is None or numel(full) > MAX_ELEMS:
            return
        pt = self.param(ps, x.dtype)
        pn = pt.name
        if self.p(0.25) and tuple(ps) != full[len(full) - len(ps):]:
            e = self.emit(f"expand({pt.name}, {list(full[len(full) - len(ps):])})", full[len(full) - len(ps):],
                          x.dtype, 1.0)
            pn = e.name if e is not None else pn
        r = len(full)
        axes = sorted(self.rng.choice(r, size=self.r(1, r - 1), replace=False).tolist())
        keep = self.p(0.3)
        shape = [1 if i in axes else d for i, d in enumerate(full)] if keep else [d for i, d in enumerate(full)
                                                                                   if i not in axes]
        n = numel([full[a] for a in axes])
        f = "sum" if self.p(0.8) else "mean"
        e = f"{f}({x.name} * {pn}, {axes}{', keepdim=true' if keep else ''})"
        if self.p(0.3):
            e = f"relu({e})"
        self.emit(e, shape, x.dtype, x.scale * (2 * math.sqrt(n) if f == "sum" else 1))

    def op_softmax(self):
        x = self.pick(lambda t: t.dtype in FLOAT and t.rank >= 1)
        if x is None:
            return
        ax = self.r(-x.rank, x.rank - 1)
        arg = f", axis={ax}" if ax != -1 or self.p(0.3) else ""
        self.emit(f"softmax({x.name}{arg})", x.shape, x.dtype, 1.0)

    def op_layernorm(self):
        x = self.pick(lambda t: t.dtype in FLOAT and t.rank >= 1)
        if x is None:
            return
        ax = self.r(max(-x.rank, -2), -1)
        tail = x.shape[x.rank + ax:]
        if numel(tail) < 2:
            return
        args = [x.name]
        if self.p(0.6):
            args.append(f"gamma={self.param(tail, x.dtype).name}")
        if self.p(0.5):
            args.append(f"beta={self.param(tail, x.dtype).name}")
        if ax != -1 or self.p(0.3):
            args.append(f"axis={ax if self.p(0.5) else x.rank + ax}")
        if self.p(0.3):
            args.append("eps=1e-3")
        self.emit(f"layernorm({', '.join(args)})", x.shape, x.dtype, 6.0)

    def as_nchw(self):
        x = self.pick(lambda t: t.dtype in FLOAT and t.rank == 4 and t.shape[2] >= 2 and t.shape[3] >= 2)
        if x is None:
            shape = (self.r(1, 2), self.r(1, 6), self.r(3, 12), self.r(3, 12))
            x = self.param(shape, self.choice(["f32", "f32", "f16"]))
        return x

    def op_conv(self):
        x = self.as_nchw()
        if self.p(0.2):
            # padding of the program's own under the conv's (zero) padding
            pads = [[0, 0], [0, 0], [self.r(0, 2), self.r(0, 2)], [self.r(0, 2), self.r(0, 2)]]
            v = self.choice([0.0, -1.0, 0.5])
            shape = [d + lo + hi for d, (lo, hi) in zip(x.shape, pads)]
            x = self.emit(f"pad({x.name}, {pads}, value={lit(v)})", shape, x.dtype, max(x.scale, 1.0)) or x
        N, C, H, W = x.shape
        if x.dtype == "f16" and x.scale > 2:
            x = self.bounded(x, 1.0)
        g = self.choice([d for d in range(1, C + 1) if C % d == 0]) if self.p(0.4) else 1
        cout = g * self.r(1, max(1, 8 // g))
        kh, kw = self.r(1, 3), self.r(1, 3)
        s = [self.r(1, 2), self.r(1, 2)]
        dl = [self.r(1, 2), self.r(1, 2)] if self.p(0.3) else [1, 1]
        pd = [self.r(0, 2) for _ in range(4)] if self.p(0.3) else [self.r(0, 1)] * 2 + [self.r(0, 1)] * 2
        oh = (H + pd[0] + pd[1] - dl[0] * (kh - 1) - 1) // s[0] + 1
        ow = (W + pd[2] + pd[3] - dl[1] * (kw - 1) - 1) // s[1] + 1
        if oh < 1 or ow < 1:
            return
        w = self.param([cout, C // g, kh, kw], x.dtype)
        args = [x.name, w.name]
        if self.p(0.5):
            args.append(f"bias={self.param([cout], x.dtype).name}")
        args.append(f"stride={s if s[0] != s[1] or self.p(0.5) else s[0]}")
        if pd[0] == pd[1] and pd[2] == pd[3]:
            args.append(f"pad={[pd[0], pd[2]] if pd[0] != pd[2] or self.p(0.5) else pd[0]}")
        else:
            args.append(f"pad={pd}")
        if dl != [1, 1]:
            args.append(f"dilation={dl}")
        if g > 1 or self.p(0.1):
            args.append(f"groups={g}")
        sc = x.scale * math.sqrt(C // g * kh * kw) * 2 + 1
        self.emit(f"conv2d({', '.join(args)})", (N, cout, oh, ow), x.dtype, sc)

    def op_pool(self):
        x = self.as_nchw()
        N, C, H, W = x.shape
        k = [self.r(1, min(3, H)), self.r(1, min(3, W))]
        f = self.choice(["max_pool2d", "avg_pool2d"])
        st = None if self.p(0.4) else [self.r(1, 3), self.r(1, 3)]
        s = st or k
        oh, ow = (H - k[0]) // s[0] + 1, (W - k[1]) // s[1] + 1
        kt = k[0] if k[0] == k[1] and self.p(0.5) else k
        e = f"{f}({x.name}, kernel={kt}" + (f", stride={st})" if st else ")")
        self.emit(e, (N, C, oh, ow), x.dtype, x.scale, x.pos)

    def op_attention(self):
        x = self.pick(lambda t: t.dtype in FLOAT and t.rank in (3, 4))
        if x is None:
            return
        if x.dtype == "f16":
            x = self.bounded(x, 1.0)
        *batch, M, E = x.shape
        heads = self.choice([h for h in range(1, E + 1) if E % h == 0]) if x.rank == 3 else 1
        N, Ev = self.r(1, 12), self.r(1, 8) * heads
        k = self.param(batch + [N, E], x.dtype)
        v = self.param(batch + [N, Ev], x.dtype)
        args = [x.name, k.name, v.name]
        if heads > 1:
            args.append(f"heads={heads}")
        if self.p(0.4):
            args.append("causal=true")
        self.emit(f"attention({', '.join(args)})", batch + [M, Ev], x.dtype, 1.0)

    def op_cast(self):
        x = self.pick()
        if x is None:
            return
        if x.dtype in ("i32", "bool"):
            self.emit(f"cast({x.name}, f32)", x.shape, "f32", x.scale, x.pos)
        elif x.dtype == "f32":
            if x.scale > F16_MAX_SCALE:
                return
            self.emit(f"cast({x.name}, f16)", x.shape, "f16", x.scale, x.pos)
        else:
            self.emit(f"cast({x.name}, f32)", x.shape, "f32", x.scale, x.pos)

    def op_subgraph(self):
        if self.depth >= 1:
            return
        x = self.pick(lambda t: t.dtype in FLOAT)
        if x is None:
            return
        name = f"sg{len(self.subgraphs)}_{self.prefix or 'm'}"
        sub = Gen(self.rng, [f for f in self.features if f != "subgraph"], prefix="s", max_ops=4, depth=self.depth + 1)
        first = sub.param(x.shape, x.dtype, x.pos)
        first.scale = x.scale
        sub.pool.append(first)
        sub.body(self.r(1, 4))
        outs = sub.pick_outputs()
        if not outs:
            return
        sig = ", ".join(f"{t.name}: {ty(t)}" for t, _ in sub.params)
        osig = ", ".join(f"r{i}: {ty(t)}" for i, t in enumerate(outs))
        body = "".join(f"    {s}\n" for s in sub.stmts)
        self.subgraphs.append(f"graph {name}({sig}) -> ({osig}) {{\n{body}    return {', '.join(t.name for t in outs)}\n}}\n")
        args = [x.name]
        for t, pos in sub.params[1:]:
            args.append(self.param(t.shape, t.dtype, pos).name)
        calls = 2 if self.p(0.2) else 1
        for _ in range(calls):
            names = [self.fresh() for _ in outs]
            lhs = names[0] if len(names) == 1 else f"({', '.join(names)})"
            self.stmts.append(f"{lhs} = {name}({', '.join(args)})")
            for nm, t in zip(names, outs):
                self.pool.append(T(nm, t.shape, t.dtype, t.scale, t.pos))
            # a second call site with another value of the same type, if any
            y = self.pick(lambda t: t.name != x.name and t.shape == x.shape and t.dtype == x.dtype)
            if y is None:
                break
            args[0] = y.name

    OPS = [("unary", 4), ("binary", 6), ("compare", 1), ("movement", 5), ("reduce", 3), ("matmul", 3), ("matmul_left", 1), ("contract", 1.5), ("softmax", 1),
           ("layernorm", 1), ("conv", 1.5), ("pool", 1), ("attention", 0.5), ("cast", 1), ("subgraph", 0.7)]

    def body(self, nops):
        ops = [(n, w) for n, w in self.OPS if n in self.features or (n in ("matmul_left", "contract") and "matmul" in self.features)]
        ws = np.array([w for _, w in ops], dtype=float)
        for _ in range(nops):
            k = ops[int(self.rng.choice(len(ops), p=ws / ws.sum()))][0]
            {"compare": self.op_compare, "conv": self.op_conv}.get(k, getattr(self, f"op_{k}", None))()

    def pick_outputs(self):
        """The last value, and mostly values nothing reads (so little of the
        program is dead code), up to four outputs."""
        made = [t for t in self.pool if not t.name.startswith(f"{self.prefix}in")]
        if not made:
            return []
        text = "\n".join(self.stmts)
        sinks = [t for t in made[:-1] if len(re.findall(rf"\b{t.name}\b", text)) == 1]
        outs = [made[-1]]
        for _ in range(self.r(0 if self.depth else 1, 3)):
            t = self.choice(sinks) if sinks and self.p(0.8) else self.choice(made)
            if all(t.name != o.name for o in outs):
                outs.append(t)
        return outs


def generate(seed, features=FEATURES, nops=None):
    rng = np.random.default_rng(seed)
    g = Gen(rng, features)
    for _ in range(g.r(1, 2)):
        dt = "f16" if "cast" in features and g.p(0.15) else "f32"
        dt = "i32" if "cast" in features and g.p(0.15) else dt
        t = g.param(g.rand_shape(), dt)
        g.pool.append(t)
    g.body(nops or g.r(3, g.max_ops))
    outs = g.pick_outputs()
    if not outs:
        t = g.pool[-1]
        outs = [g.emit(f"relu({t.name})" if t.dtype != "bool" else f"max({t.name}, {t.name})", t.shape, t.dtype, t.scale)]
    sig = ", ".join(f"{t.name}: {ty(t)}" for t, _ in g.params)
    osig = ", ".join(f"o{i}: {ty(t)}" for i, t in enumerate(outs))
    body = "".join(f"    {s}\n" for s in g.stmts)
    text = f"// fuzz seed {seed}\n" + "".join(s + "\n" for s in g.subgraphs)
    text += f"graph main({sig}) -> ({osig}) {{\n{body}    return {', '.join(t.name for t in outs)}\n}}\n"
    inputs = [(t.name, t.shape, t.dtype, pos) for t, pos in g.params]
    return Program(seed, text, inputs, [(f"o{i}", t.dtype, t.shape, t.scale) for i, t in enumerate(outs)])


if __name__ == "__main__":
    import sys
    print(generate(int(sys.argv[1]) if len(sys.argv) > 1 else 0).text)
