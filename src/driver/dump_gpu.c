/* dump_gpu.c — the GPU dumps of `harp dump` and `harp run`: DIR/gpu.json
 * (the GPU dialect of every kernel, the launch list and the device memory
 * layout) and DIR/model.cu (the CUDA C translation unit).  Neither needs
 * NVRTC or a GPU.  --target sm80|sm90 picks the architecture (default
 * sm80); regions are formed for that GPU. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "harp/gpu.h"

harp_status cli_gpu_target(harp_error *e, const cli_opts *o, const char *dflt, const char **target) {
  *target = o->target ? o->target : dflt;
  if (*target && strcmp(*target, "sm80") && strcmp(*target, "sm90"))
    return ut_fail(e, HARP_E_USAGE, NULL, "--target %s: the GPU backend takes sm80 or sm90", *target);
  return HARP_OK;
}

harp_status cli_write_gpu_model_dumps(harp_error *e, const cli_opts *o, const rt_gpu_model *gm) {
  bool gd = cli_wants_dump(o, "gpu"), cd = cli_wants_dump(o, "cu");
  char *json = NULL;
  harp_status s = gd ? rt_gpu_dump_json(e, gm, &json) : HARP_OK;
  if (!s && gd) s = cli_write_text(e, o->dump_dir, "gpu.json", json);
  if (!s && cd) s = cli_write_text(e, o->dump_dir, "model.cu", rt_gpu_source(gm));
  free(json);
  return s;
}

harp_status cli_write_gpu_dumps(harp_error *e, const cli_opts *o, const cli_model *m, const cli_plans *pl) {
  if (!cli_wants_dump(o, "gpu") && !cli_wants_dump(o, "cu")) return HARP_OK;
  const char *target;
  if (cli_gpu_target(e, o, "sm80", &target)) return e->code;
  rt_gpu_opts go = {.target = target, .plan_overrides = pl ? pl->ov : NULL, .nplan_overrides = pl ? pl->n : 0,
                    .precision = o->precision};
  rt_gpu_model *gm = NULL;
  harp_status s = rt_gpu_build(e, m->g, &m->syms, &go, &gm);
  if (!s) s = cli_write_gpu_model_dumps(e, o, gm);
  rt_gpu_free(gm);
  return s;
}
