"""bf16_ref.py — numpy references for the bf16 tests (test_bf16.py,
test_amx.py): rounding to bf16, and the two bounds a product computed from
bf16 operands with fp32 accumulation must meet."""
import numpy as np

U = 2.0 ** -24


def bf16(a):
    """a rounded to bf16 (nearest even), as float64."""
    u = np.asarray(a, np.float32).view(np.uint32).astype(np.uint64)
    u = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) << 16
    return u.astype(np.uint32).view(np.float32).astype(np.float64)


def check_products(s, name, got, f32, bfr, absum, k):
    """Suite s's checks of got (a product of depth k) against bfr, the
    product of the operands rounded to bf16, within fp32 accumulation's
    bound k * 2^-24 * absum (absum: sum |a b| per element), and against f32,
    the fp32 product, within bf16's (2^-7 + 2^-16 + k * 2^-24) * absum.
    Returns the accumulation bound."""
    got = got.astype(np.float64)
    acc = (k * U) * absum + 1e-30
    e1 = np.abs(got - bfr)
    s.check(f"{name}: = bf16 operands' product (fp32 accumulation, K={k})", bool(np.all(e1 <= acc)),
            f"max err {e1.max():.3g}, worst ratio to the bound {np.max(e1 / acc):.3g}")
    b16 = (2.0 ** -7 + 2.0 ** -16 + k * U) * absum + 1e-30
    e2 = np.abs(got - f32)
    s.check(f"{name}: vs fp32 within bf16's bound", bool(np.all(e2 <= b16)), f"max err {e2.max():.3g}")
    return acc
