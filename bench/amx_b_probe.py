#!/usr/bin/env python3
"""amx_b_probe.py — what packing B costs a bf16 AMX GEMM (a 1x1 conv), measured on its generated C.

    python3 bench/amx_b_probe.py MODEL.onnx [--harp build/harp] [--rounds 4] [--repeat 300]
    python3 bench/amx_b_probe.py --shape C,M,SIDE ...   (bf16_1x1.py's 1x1 conv + bias + ReLU)

Needs: a single-Conv ONNX model whose 1x1 conv harp runs on the GEMM template's AMX variant
(cgen_amx.c; B packed per task by $P_packB), gcc, a CPU with AMX-BF16.
Gives: per variant, the least (and the median over rounds of the least) single-thread CPU time of one model_run (CLOCK_THREAD_CPUTIME_ID,
which a loaded machine moves less than wall time), in --rounds alternated rounds:
  base    the C as harp writes it, B's rows converted to bf16 before the timed runs, so that
          $P_packB pairs bf16 rows as it does for a temporary stored in bf16 (a model's 1x1)
  jit     each B panel packed inside the first row panel's micro-kernel, 16 pairs a step during
          the previous step's products (the vector work under the tile unit)
  inplace the bound for a B held in the AMX layout by its producer (no packing): every kernel call
          loads its B tiles from the activation itself, pair row p at byte 4 (p N + n), stride 4 N
          (the same bytes a [K/2][N] pair layout has; the values are not the product's)
  nopack  B never packed (the tiles read a stale panel): the products and the epilogue alone
  nopipe  base with each call's pending tile stored before its products ($P_pflush first): the
          epilogue no longer under the next tile's products (as before bfacc, RESULTS.md)
base, jit and nopipe compute the same bits (checked).  The edits are made on main cf7ff75's text of the
AMX variant (kernel 0): a later generator may need the patterns below updated.
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile

P = "model_k0_gemm_amx_"
AVX = 'static __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma,f16c,avx512bf16"))) '

PACK_BF16 = AVX + """void model_k0_gemm_amx_packB(const model_k0_gemm_ctx *cx, long b0, long b1, long k0, long kc, long n0, long nc, float *restrict Bp) {
  const uint16_t *B = (const uint16_t *)cx->B;
  (void)b0, (void)b1;
  for (long jr = 0; jr < nc; jr += 32) {
    int nr = nc - jr < 32 ? (int)(nc - jr) : 32;
    int *d = (int *)(Bp + jr * kc);
    const uint16_t *s = B + k0 * NL + n0 + jr;
    for (long k = 0; k < kc; k += 2, s += 2 * NL, d += 32) {
      int odd = k + 1 >= kc;
      for (int v = 0; v < 2; v++) {
        int n = nr - 16 * v;
        __mmask16 mk = n >= 16 ? (__mmask16)0xffff : n > 0 ? (__mmask16)((1u << n) - 1u) : 0;
        __m512i w0 = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(mk, s + 16 * v));
        __m512i w1 = odd ? _mm512_setzero_si512() : _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(mk, s + NL + 16 * v));
        _mm512_storeu_si512(d + 16 * v, _mm512_or_si512(w0, _mm512_slli_epi32(w1, 16)));
      }
    }
  }
}
"""

HARNESS = """
  if (getenv("B16")) { /* the input's rows as bf16 (truncated), in place: what $P_packB reads */
    float *x = (float *)in[0]; unsigned short *h = (unsigned short *)in[0]; size_t n = count(model_input_shapes[0]);
    for (size_t i = 0; i < n; i++) { unsigned u; memcpy(&u, &x[i], 4); h[i] = (unsigned short)(u >> 16); } }
  int rc = model_run(m, (const void *const *)in, out);
  { int R = getenv("REP") ? atoi(getenv("REP")) : 0; double best = 1e9;
    for (int r = 0; r < R; r++) { struct timespec t0, t1; clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
      model_run(m, (const void *const *)in, out); clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t1);
      double ms = (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) * 1e-6; if (ms < best) best = ms; }
    if (R) printf("min %.4f ms\\n", best); }
"""


def fn_span(s, head):
    """(start, end) of the function whose text starts with head."""
    i = s.index(head)
    return i, s.index("\n}\n", i) + 3


def variants(s):
    """{name: model.c text} from harp's text s of the conv's model.c."""
    n = int(re.search(r"B \+ k0 \* (\d+)L \+ n0 \+ jr", s).group(1))
    i, j = fn_span(s, AVX + "void " + P + "packB(")
    base = s[:i] + PACK_BF16.replace("NL", "%dL" % n) + s[j:]
    jit = base
    for nv in sorted(set(re.findall(P + r"k32_(\d)\(long kc", base))):
        i, j = fn_span(jit, "static __attribute__((target(\"avx512f,avx512bw,avx512vl,avx512dq,fma,f16c,avx512bf16,amx-tile,amx-bf16\"))) void %sk32_%s(" % (P, nv))
        k = jit[i:j].replace("k32_%s(" % nv, "k32_%sp(" % nv).replace("const float *restrict b,", "float *restrict b,")
        k = k.replace("int first, int last) {", "int first, int last, const model_k0_gemm_ctx *cx, long b0, long b1, long pc) {")
        k = k.replace("  _tile_zero(4);", "  %spackB(cx, b0, b1, pc, kc < 32 ? kc : 32, n, nr, b);\n  _tile_zero(4);" % P, 1)
        k = k.replace("    for (int e = 0; e < rs", "    if (2 * k + 32 < kc) %spackB(cx, b0, b1, pc + 2 * k + 32, kc - 2 * k - 32 < 32 ? "
                      "kc - 2 * k - 32 : 32, n, nr, b + (k + 16) * 32);\n    for (int e = 0; e < rs" % P, 1)
        t = jit.index(AVX.replace('"))) ', ',amx-tile,amx-bf16"))) ') + "void " + P + "task(")
        jit = jit[:t] + k + jit[t:]
        jit = re.sub(r"( +)(%sk32_%s\(kc, a, Bp \+ jr \* kc, &tt, ir, jc \+ jr, nr, first, last\);)" % (P, nv),
                     lambda m: m.group(1) + "{ if (ir == m0) %sk32_%sp(kc, a, Bp + jr * kc, &tt, ir, jc + jr, nr, first, last, "
                     "cx, b0, b1, pc); else " % (P, nv) + m.group(2) + " }", jit)
    jit = jit.replace("      %spackB(cx, b0, b1, pc, kc, jc, nc, Bs);\n      const float *Bp = Bs;" % P, "      float *Bp = Bs;")

    def strip(m, inplace):
        """The packing kernel m without its packing; inplace: its B tiles from the activation."""
        b = re.sub(r"  %spackB\(cx, b0, b1, pc, kc < 32[^\n]*\n" % P, "", m.group(0))
        b = re.sub(r"    if \(2 \* k \+ 32 < kc\)[^\n]*\n", "", b)
        if inplace:
            b = b.replace("_tile_loadd(2, bb + k * 128, 128);", "_tile_loadd(2, (const char *)cx->B + ((pc / 2 + k) * %dL + n) * 4, %d);" % (n, 4 * n))
            b = b.replace("_tile_loadd(3, bb + k * 128 + 64, 128);", "_tile_loadd(3, (const char *)cx->B + ((pc / 2 + k) * %dL + n) * 4 + 64, %d);" % (n, 4 * n))
        return b
    nopipe = re.sub(r"void %sk32_\d\(.*?\n}\n" % P, lambda m: m.group(0).replace(
        "  float *cb = pd->cb[pd->h];\n", "  %spflush(pd);\n  float *cb = pd->cb[pd->h];\n" % P, 1), base, flags=re.S)
    out = {"base": base, "jit": jit, "nopipe": nopipe}
    for name, ip in (("inplace", True), ("nopack", False)):
        t = re.sub(P + r"k32_\dp\(.*?\n}\n", lambda m: strip(m, ip), jit, flags=re.S)
        out[name] = t.replace("{ if (ir == m0) " + P, "{ if (1) " + P)
    return out


def main():
    """Compile the conv, write and build the variants, check base = jit = nopipe, time them alternated."""
    ap = argparse.ArgumentParser()
    ap.add_argument("model", nargs="?")
    ap.add_argument("--shape", help="C,M,SIDE: a 1x1 conv of C -> M channels at SIDE x SIDE (bench/bf16_1x1.py's)")
    ap.add_argument("--harp", default=os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "build", "harp"))
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=300)
    a = ap.parse_args()
    d = tempfile.mkdtemp(prefix="amxb")
    if a.shape:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import bf16_1x1
        a.model = os.path.join(d, "m.onnx")
        bf16_1x1.conv1x1(a.model, *[int(v) for v in a.shape.split(",")])
    if not a.model:
        sys.exit("a MODEL or --shape")
    subprocess.run([a.harp, "compile", a.model, "--target", "cpu", "--precision", "bf16", "-o", os.path.join(d, "c")], check=True,
                   stdout=subprocess.DEVNULL)
    d = os.path.join(d, "c")
    src = open(os.path.join(d, "model.c")).read()
    if P + "packB(" not in src:
        sys.exit("no AMX GEMM variant packing B in kernel 0 (a 1x1 conv on the GEMM template?)")
    main_c = open(os.path.join(d, "main.c")).read()
    main_c = "#include <time.h>\n" + main_c.replace("model_init(weights, pb)", "model_init_threads(weights, pb, 1)")
    main_c = main_c.replace("  int rc = model_run(m, (const void *const *)in, out);", HARNESS, 1)
    open(os.path.join(d, "main_t.c"), "w").write(main_c)
    for name, text in variants(src).items():
        open(os.path.join(d, name + ".c"), "w").write(text)
        subprocess.run(["gcc", "-O3", "-fopenmp-simd", "-fno-math-errno", "-w", "-o", os.path.join(d, name), os.path.join(d, name + ".c"),
                        os.path.join(d, "main_t.c"), "-lm", "-lpthread"], check=True)
    outs = {}
    for name in ("base", "jit", "nopipe"):  # the same bits
        subprocess.run([os.path.join(d, name), d], env=dict(os.environ, B16="1"), check=True, stdout=subprocess.DEVNULL)
        outs[name] = open(os.path.join(d, "outputs", os.listdir(os.path.join(d, "outputs"))[0]), "rb").read()
    print("base, jit and nopipe outputs identical:", outs["base"] == outs["jit"] == outs["nopipe"])
    best, per = {}, {}
    for r in range(a.rounds):
        for name in ("base", "jit", "inplace", "nopack", "nopipe"):
            p = subprocess.run([os.path.join(d, name), d], env=dict(os.environ, B16="1", REP=str(a.repeat)), capture_output=True, text=True)
            ms = float(re.search(r"min ([\d.]+) ms", p.stdout).group(1))
            best[name] = min(best.get(name, 1e9), ms)
            per.setdefault(name, []).append(ms)
            print(f"round {r + 1} {name:8s} {ms:.4f} ms", flush=True)
    print("least of the rounds (single-thread CPU ms): " + ", ".join(f"{k} {v:.4f}" for k, v in best.items()))
    print("base / variant: " + ", ".join(f"{k} {best['base'] / v:.2f}" for k, v in best.items()))
    med = {k: statistics.median(v) for k, v in per.items()}
    print("medians of the rounds: " + ", ".join(f"{k} {v:.4f}" for k, v in med.items()))
    print("base / variant, medians: " + ", ".join(f"{k} {med['base'] / v:.2f}" for k, v in med.items()))


if __name__ == "__main__":
    main()
