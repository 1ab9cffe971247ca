/* qgemm_gen.c — write the source of harp's int8 GEMM kernels (cgen_qgemm.c)
 * for bench/qgemm.py:
 *   qgemm_gen OUT.c NAME M N K WA KMAJ XDT YDT ZA ZY LO HI [NAME ...]
 * WA 1: the weight is A (NCHW conv form); KMAJ 1: the weight K-major;
 * XDT u8 / i8, YDT u8 / i8 / f32.  Each NAME gives NAME, NAME_pack, NAME_wsize,
 * and harp's float GEMM of the same shape with the weight packed once (as a
 * compiled model runs it) in fp32 (NAME_f32) and bf16 (NAME_b16), each with
 * NAME_x_pack_{a,b}_bytes / NAME_x_pack_{a,b}. */
#include "common.h"
#include "backend/c/cgen_qgemm.h"

static tiny_dtype dt_of(const char *s) { return !strcmp(s, "i8") ? TINY_I8 : !strcmp(s, "f32") ? TINY_FP32 : TINY_U8; }

int main(int argc, char **argv) {
  if (argc < 14 || (argc - 2) % 12) {
    fprintf(stderr, "usage: qgemm_gen OUT.c NAME M N K WA KMAJ XDT YDT ZA ZY LO HI [NAME ...]\n");
    return 2;
  }
  ut_str src;
  ut_str_init(&src);
  harp_error e;
  memset(&e, 0, sizeof e);
  for (int a = 2; a < argc; a += 12) {
    char **v = argv + a;
    cgen_qgemm_spec s;
    cgen_qgemm_spec_init(&s, atol(v[1]), atol(v[2]), atol(v[3]));
    s.weight_a = atoi(v[4]), s.w_kmajor = atoi(v[5]);
    s.x_dtype = dt_of(v[6]), s.y_dtype = dt_of(v[7]);
    s.za = atoi(v[8]), s.zy = atoi(v[9]), s.lo = atoi(v[10]), s.hi = atoi(v[11]);
    if (cgen_qgemm(&e, &s, v[0], &src)) {
      fprintf(stderr, "cgen_qgemm %s: %s\n", v[0], e.msg);
      return 1;
    }
    for (int bf = 0; bf < 2; bf++) {
      cgen_gemm_spec g;
      char name[96];
      cgen_gemm_spec_init(&g, s.m, s.n, s.k, TINY_FP32);
      g.prepack_a = s.weight_a, g.prepack_b = !s.weight_a;
      g.tune.threads = 2, g.tune.bf16 = bf;
      snprintf(name, sizeof name, "%s_%s", v[0], bf ? "b16" : "f32");
      if (cgen_gemm(&e, &g, name, &src)) {
        fprintf(stderr, "cgen_gemm %s: %s\n", name, e.msg);
        return 1;
      }
    }
  }
  FILE *f = fopen(argv[1], "w");
  if (!f || fputs(src.buf, f) < 0 || fclose(f)) {
    fprintf(stderr, "cannot write %s\n", argv[1]);
    return 1;
  }
  ut_str_free(&src);
  return 0;
}
