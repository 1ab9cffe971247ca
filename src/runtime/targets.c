/* targets.c — the targets of the compile pipeline, found by what names
 * them: a target's name, a --target machine, a --dump its own stage makes.
 * Needs: the target descriptors (target_interp.c, target_cpu.c,
 * target_cuda.c).  Gives: rt_target_find, rt_target_of_machine,
 * rt_target_of_dump, rt_stage_of_dump. */
#include <string.h>

#include "harp/pipeline.h"

static const rt_target *const targets[] = {&rt_target_interp, &rt_target_cpu, &rt_target_cuda};
#define NTARGETS (sizeof targets / sizeof targets[0])

int rt_stage_of_dump(const char *dump) {
  for (int s = 0; dump && s < RT_NSTAGES; s++)
    for (size_t t = 0; t < NTARGETS; t++) {
      const char *d = rt_stage_dump((rt_stage)s, targets[t]);
      if (d && !strcmp(d, dump)) return s;
    }
  return -1;
}

const rt_target *rt_target_find(const char *name) {
  for (size_t t = 0; name && t < NTARGETS; t++)
    if (!strcmp(targets[t]->name, name)) return targets[t];
  return NULL;
}

const rt_target *rt_target_of_machine(const char *name, const char **arch) {
  for (size_t t = 0; name && t < NTARGETS; t++)
    for (const char *const *m = targets[t]->machines; *m; m++)
      if (!strcmp(*m, name)) {
        *arch = targets[t] == &rt_target_cuda ? *m : NULL;
        return targets[t];
      }
  return NULL;
}

const rt_target *rt_target_of_dump(const char *dump) {
  for (size_t t = 0; dump && t < NTARGETS; t++)
    if ((targets[t]->kernels_dump && !strcmp(targets[t]->kernels_dump, dump)) ||
        (targets[t]->code_dump && !strcmp(targets[t]->code_dump, dump)))
      return targets[t];
  return NULL;
}
