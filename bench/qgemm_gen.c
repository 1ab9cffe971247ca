/* qgemm_gen.c — write the source of harp's int8 GEMM kernels (cgen_qgemm.c)
 * for bench/qgemm.py:
 *   qgemm_gen [--amx | --avx2] OUT.c NAME M N K WA KMAJ XDT YDT ZA ZY LO HI [NAME ...]
 *                   [conv NAME C H W COUT KS STRIDE PAD ...]
 * (--amx, for bench/qamx.py: each NAME without the AMX variant and NAME_amx
 * with it always (spec amx = 2), no float twins)
 * (--vnni, for bench/q1x1_ab.py: each NAME alone, no twins; a GEMM's XDT
 * u8v: x held VNNI-4, spec x_vnni4; YDT u8v: y VNNI-4; --vnni-ws / --vnni-tiles:
 * the same with spec ws 1 / -1, the weight-stationary order forced on / off)
 * (--avx2, for bench/int8_avx2.py: NAME on the AVX2 variant, NAME_sc on the
 * scalar one, NAME_vn on VNNI, each forced, and the fp32 twin NAME_f32 on
 * the AVX2 variant alone; no bf16 twin)
 * (a conv: one u8 NCHW image, KS x KS window, u8 out, zero points 7 / 128)
 * WA 1: the weight is A (NCHW conv form); KMAJ 1: the weight K-major;
 * XDT u8 / i8, YDT u8 / i8 / f32.  Each NAME gives NAME, NAME_pack, NAME_wsize,
 * and harp's float GEMM of the same shape with the weight packed once (as a
 * compiled model runs it) in fp32 (NAME_f32) and bf16 (NAME_b16), each with
 * NAME_x_pack_{a,b}_bytes / NAME_x_pack_{a,b}. */
#include "common.h"
#include "backend/c/cgen_qgemm.h"

static tiny_dtype dt_of(const char *s) { return !strcmp(s, "i8") ? TINY_I8 : !strcmp(s, "f32") ? TINY_FP32 : TINY_U8; }

/* The float twins (fp32, bf16) of gemm g / conv c, weight packed once;
 * avx2: the fp32 one only, its AVX2 variant forced. */
static int twins(harp_error *e, const cgen_qgemm_spec *q, const char *base, bool avx2, ut_str *src) {
  for (int bf = 0; bf < (avx2 ? 1 : 2); bf++) {
    char name[96];
    snprintf(name, sizeof name, "%s_%s", base, bf ? "b16" : "f32");
    harp_status st;
    if (q->conv.kh > 0) {
      cgen_conv_spec c;
      cgen_conv_spec_init(&c, 1, q->conv.c, q->conv.h, q->conv.w, q->m, q->conv.kh, q->conv.kw, TINY_FP32);
      c.stride[0] = q->conv.sh, c.stride[1] = q->conv.sw;
      c.pad[0] = c.pad[2] = q->conv.ph, c.pad[1] = c.pad[3] = q->conv.pw;
      c.prepack_w = true, c.tune.threads = 2, c.tune.bf16 = bf;
      if (avx2) c.tune.isa_mask = 1u << CGEN_ISA_AVX2, c.tune.force_isa = CGEN_ISA_AVX2;
      st = cgen_conv(e, &c, name, src);
    } else {
      cgen_gemm_spec g;
      cgen_gemm_spec_init(&g, q->m, q->n, q->k, TINY_FP32);
      g.prepack_a = q->weight_a, g.prepack_b = !q->weight_a;
      g.tune.threads = 2, g.tune.bf16 = bf;
      if (avx2) g.tune.isa_mask = 1u << CGEN_ISA_AVX2, g.tune.force_isa = CGEN_ISA_AVX2;
      st = cgen_gemm(e, &g, name, src);
    }
    if (st) {
      fprintf(stderr, "%s: %s\n", name, e->msg);
      return 1;
    }
  }
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: qgemm_gen [--amx | --avx2 | --vnni] OUT.c NAME M N K WA KMAJ XDT YDT ZA ZY LO HI [NAME ...] [conv NAME C H W COUT KS S P ...]\n");
    return 2;
  }
  bool amx = !strcmp(argv[1], "--amx"), avx2 = !strcmp(argv[1], "--avx2"), vnni = !strncmp(argv[1], "--vnni", 6);
  int ws = !strcmp(argv[1], "--vnni-ws") ? 1 : !strcmp(argv[1], "--vnni-tiles") ? -1 : 0;
  if (amx || avx2 || vnni) argv++, argc--;
  ut_str src;
  ut_str_init(&src);
  harp_error e;
  memset(&e, 0, sizeof e);
  for (int a = 2; a < argc;) {
    char **v = argv + a;
    cgen_qgemm_spec s;
    bool conv = !strcmp(v[0], "conv");
    if (a + (conv ? 9 : 12) > argc) {
      fprintf(stderr, "qgemm_gen: a group short of arguments at %s\n", v[0]);
      return 2;
    }
    if (conv) {
      v++;
      long c = atol(v[1]), h = atol(v[2]), w = atol(v[3]), co = atol(v[4]), ks = atol(v[5]), st = atol(v[6]), pd = atol(v[7]);
      long oh = (h + 2 * pd - ks) / st + 1, ow = (w + 2 * pd - ks) / st + 1;
      cgen_qgemm_spec_init(&s, co, oh * ow, c * ks * ks);
      s.weight_a = true, s.za = 7, s.zy = 128, s.lo = 0, s.hi = 255;
      s.conv.c = c, s.conv.h = h, s.conv.w = w, s.conv.kh = s.conv.kw = ks;
      s.conv.sh = s.conv.sw = st, s.conv.ph = s.conv.pw = pd, s.conv.dh = s.conv.dw = 1;
      a += 9;
    } else {
      cgen_qgemm_spec_init(&s, atol(v[1]), atol(v[2]), atol(v[3]));
      s.weight_a = atoi(v[4]), s.w_kmajor = atoi(v[5]);
      s.x_dtype = dt_of(v[6]), s.y_dtype = dt_of(v[7]);
      s.x_vnni4 = !strcmp(v[6], "u8v"), s.y_vnni4 = !strcmp(v[7], "u8v");
      s.za = atoi(v[8]), s.zy = atoi(v[9]), s.lo = atoi(v[10]), s.hi = atoi(v[11]);
      a += 12;
    }
    s.ws = ws;
    if (avx2) { /* NAME_sc, NAME_vn: the scalar and VNNI variants; NAME: AVX2 */
      const char *suf[2] = {"_sc", "_vn"};
      for (int i = 0; i < 2; i++) {
        char nm[96];
        snprintf(nm, sizeof nm, "%s%s", v[0], suf[i]);
        s.force_isa = i ? CGEN_ISA_AVX512 : CGEN_ISA_SCALAR;
        if (cgen_qgemm(&e, &s, nm, &src)) return fprintf(stderr, "cgen_qgemm %s: %s\n", nm, e.msg), 1;
      }
      s.force_isa = CGEN_ISA_AVX2;
    }
    if (cgen_qgemm(&e, &s, v[0], &src)) {
      fprintf(stderr, "cgen_qgemm %s: %s\n", v[0], e.msg);
      return 1;
    }
    char name[96];
    snprintf(name, sizeof name, "%s_amx", v[0]);
    s.amx = 2;
    if (amx && cgen_qgemm(&e, &s, name, &src)) {
      fprintf(stderr, "cgen_qgemm %s: %s\n", name, e.msg);
      return 1;
    }
    if (!amx && !vnni && twins(&e, &s, v[0], avx2, &src)) return 1;
  }
  return bn_write_src(argv[1], &src);
}
