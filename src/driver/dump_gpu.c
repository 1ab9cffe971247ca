/* dump_gpu.c — --target for the GPU: sm80 or sm90 (what `harp dump
 * --dump gpu,cu`, `harp run --backend cuda` and `harp compile` accept).
 * The GPU dumps themselves are the compile's stages (cli_stages.c). */
#include <string.h>

#include "cli.h"

harp_status cli_gpu_target(harp_error *e, const cli_opts *o, const char *dflt, const char **target) {
  *target = o->target ? o->target : dflt;
  const char *arch;
  if (*target && rt_target_of_machine(*target, &arch) != &rt_target_cuda)
    return ut_fail(e, HARP_E_USAGE, NULL, "--target %s: the GPU backend takes sm80 or sm90", *target);
  return HARP_OK;
}
