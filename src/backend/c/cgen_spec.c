/* cgen_spec.c — the GEMM and conv templates' spec helpers: default tuning,
 * spec initialisers, a conv's output size.
 * Needs: cgen.h.  Gives: cgen_tuning_default, cgen_gemm_spec_init,
 * cgen_conv_spec_init, cgen_conv_out_hw.
 *
 * Every generator (cgen_gemm.c, cgen_dconv.c, cgen_dwconv.c, cgen_pool.c,
 * ...) and the CPU backend use these; they use nothing of the generators, so
 * the generators do not depend on each other through them. */
#include <string.h>

#include "backend/c/cgen.h"

void cgen_tuning_default(cgen_tuning *t) {
  memset(t, 0, sizeof *t);
  t->threads = 2;
  t->force_isa = -1;
}

void cgen_gemm_spec_init(cgen_gemm_spec *s, int64_t M, int64_t N, int64_t K, tiny_dtype dt) {
  memset(s, 0, sizeof *s);
  s->batch[0] = s->batch[1] = 1;
  s->M = M, s->N = N, s->K = K;
  s->a_dtype = s->b_dtype = s->c_dtype = dt;
  s->a_sm = K, s->a_sk = 1, s->b_sk = N, s->b_sn = 1, s->c_sm = N, s->c_sn = 1;
  cgen_tuning_default(&s->tune);
}

void cgen_conv_spec_init(cgen_conv_spec *s, int64_t n, int64_t c, int64_t h, int64_t w, int64_t oc,
                         int64_t kh, int64_t kw, tiny_dtype dt) {
  memset(s, 0, sizeof *s);
  s->n = n, s->c = c, s->h = h, s->w = w, s->oc = oc, s->kh = kh, s->kw = kw;
  s->stride[0] = s->stride[1] = s->dil[0] = s->dil[1] = s->groups = 1;
  s->x_dtype = s->w_dtype = s->y_dtype = dt;
  cgen_tuning_default(&s->tune);
}

bool cgen_conv_out_hw(const cgen_conv_spec *s, int64_t *oh, int64_t *ow) {
  if (s->stride[0] < 1 || s->stride[1] < 1 || s->dil[0] < 1 || s->dil[1] < 1) return false;
  int64_t eh = s->h + s->pad[0] + s->pad[2] - s->dil[0] * (s->kh - 1) - 1;
  int64_t ew = s->w + s->pad[1] + s->pad[3] - s->dil[1] * (s->kw - 1) - 1;
  if (eh < 0 || ew < 0) return false;
  *oh = eh / s->stride[0] + 1;
  *ow = ew / s->stride[1] + 1;
  return true;
}
