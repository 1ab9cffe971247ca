/* qgemm_gen.c — write the source of harp's int8 GEMM kernels (cgen_qgemm.c)
 * for bench/qgemm.py:
 *   qgemm_gen [--amx] OUT.c NAME M N K WA KMAJ XDT YDT ZA ZY LO HI [NAME ...]
 *                   [conv NAME C H W COUT KS STRIDE PAD ...]
 * (--amx, for bench/qamx.py: each NAME without the AMX variant and NAME_amx
 * with it always (spec amx = 2), no float twins)
 * (a conv: one u8 NCHW image, KS x KS window, u8 out, zero points 7 / 128)
 * WA 1: the weight is A (NCHW conv form); KMAJ 1: the weight K-major;
 * XDT u8 / i8, YDT u8 / i8 / f32.  Each NAME gives NAME, NAME_pack, NAME_wsize,
 * and harp's float GEMM of the same shape with the weight packed once (as a
 * compiled model runs it) in fp32 (NAME_f32) and bf16 (NAME_b16), each with
 * NAME_x_pack_{a,b}_bytes / NAME_x_pack_{a,b}. */
#include "common.h"
#include "backend/c/cgen_qgemm.h"

static tiny_dtype dt_of(const char *s) { return !strcmp(s, "i8") ? TINY_I8 : !strcmp(s, "f32") ? TINY_FP32 : TINY_U8; }

/* The float twins (fp32, bf16) of gemm g / conv c, weight packed once. */
static int twins(harp_error *e, const cgen_qgemm_spec *q, const char *base, ut_str *src) {
  for (int bf = 0; bf < 2; bf++) {
    char name[96];
    snprintf(name, sizeof name, "%s_%s", base, bf ? "b16" : "f32");
    harp_status st;
    if (q->conv.kh > 0) {
      cgen_conv_spec c;
      cgen_conv_spec_init(&c, 1, q->conv.c, q->conv.h, q->conv.w, q->m, q->conv.kh, q->conv.kw, TINY_FP32);
      c.stride[0] = q->conv.sh, c.stride[1] = q->conv.sw;
      c.pad[0] = c.pad[2] = q->conv.ph, c.pad[1] = c.pad[3] = q->conv.pw;
      c.prepack_w = true, c.tune.threads = 2, c.tune.bf16 = bf;
      st = cgen_conv(e, &c, name, src);
    } else {
      cgen_gemm_spec g;
      cgen_gemm_spec_init(&g, q->m, q->n, q->k, TINY_FP32);
      g.prepack_a = q->weight_a, g.prepack_b = !q->weight_a;
      g.tune.threads = 2, g.tune.bf16 = bf;
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
    fprintf(stderr, "usage: qgemm_gen OUT.c NAME M N K WA KMAJ XDT YDT ZA ZY LO HI [NAME ...] [conv NAME C H W COUT KS S P ...]\n");
    return 2;
  }
  bool amx = !strcmp(argv[1], "--amx");
  if (amx) argv++, argc--;
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
      s.za = atoi(v[8]), s.zy = atoi(v[9]), s.lo = atoi(v[10]), s.hi = atoi(v[11]);
      a += 12;
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
    if (!amx && twins(&e, &s, v[0], &src)) return 1;
  }
  return bn_write_src(argv[1], &src);
}
