/* attn_gen.c — write the source of harp's attention kernels for bench/attn.py:
 *   attn_gen OUT.c B H S D   -> functions attn (non-causal) and attn_causal
 * (HARP_BM / HARP_BN / HARP_TASKS / HARP_THREADS override the tiles). */
#include "common.h"

int main(int argc, char **argv) {
  if (argc < 6) {
    fprintf(stderr, "usage: attn_gen OUT.c B H S D\n");
    return 2;
  }
  ut_str src;
  ut_str_init(&src);
  harp_error e;
  memset(&e, 0, sizeof e);
  for (int causal = 0; causal < 2; causal++) {
    cgen_attn_spec s;
    cgen_attn_spec_init(&s, atol(argv[2]), atol(argv[3]), atol(argv[4]), atol(argv[4]), atol(argv[5]), TINY_FP32);
    s.causal = causal;
    s.bm = bn_env_int("HARP_BM", 0), s.bn = bn_env_int("HARP_BN", 0);
    s.tune.tasks = bn_env_int("HARP_TASKS", 0), s.tune.threads = bn_env_int("HARP_THREADS", 2);
    if (cgen_attn(&e, &s, causal ? "attn_causal" : "attn", &src)) {
      fprintf(stderr, "cgen_attn: %s\n", e.msg);
      return 1;
    }
  }
  return bn_write_src(argv[1], &src);
}
