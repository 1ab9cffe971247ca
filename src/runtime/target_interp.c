/* target_interp.c — the interpreter's target of the compile pipeline: one
 * region per node and the Function over them, the parameter layout
 * harp.h gives an interpreted model (the interpreter runs the graph).
 * Needs: pipeline.c.  Gives: rt_target_interp. */
#include "harp/pipeline.h"

static harp_status interp_function(rt_compile *c) { return rt_build_function(c, NULL); }

static harp_status interp_drive(rt_compile *c) {
  rt_stage_run(c, RT_STAGE_NORMALIZE, rt_stage_normalize);
  rt_stage_run(c, RT_STAGE_REGIONS, rt_stage_singleton_regions);
  rt_stage_run(c, RT_STAGE_FUNCTION, interp_function);
  return c->status;
}

const rt_target rt_target_interp = {.name = "interp", .regions_final = RT_STAGE_REGIONS, .drive = interp_drive};
