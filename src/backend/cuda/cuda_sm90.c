/* cuda_sm90.c — the SM90 branch of the MMA template (TMA, mbarrier, wgmma).
 * Needs: cuda.h.  Gives: cuda_sm90_gemm, cuda_sm90_prelude.  (stub) */
#include "backend/cuda/cuda.h"

const char *cuda_sm90_prelude(void) { return ""; }

hp_status cuda_sm90_gemm(hp_error *e, cuda_module *m, const cuda_gemm_spec *s, const char *name) {
  (void)m;
  (void)s;
  return hp_fail(e, HP_E_UNSUPPORTED, name, "the SM90 template is not written yet");
}
