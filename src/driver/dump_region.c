/* dump_region.c — regions for the CLI: `--dump region` (DIR/region.json,
 * seed 000 §12.4, docs/regions.md), `--dump function` (DIR/function.json,
 * the compiled Function with its arena), and the partition that `harp run
 * --backend regions` plays back.  `--target cpu|sm80|sm90` picks the
 * machine the cost model forms regions for (default: this CPU). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "harp/function.h"
#include "harp/region.h"
#include "util/util.h"

harp_status cli_form_regions(harp_error *e, const cli_opts *o, const cli_model *m, rg_partition **out) {
  int arch = o->target ? plan_arch_parse(o->target) : PLAN_ARCH_CPU;
  if (arch < 0) return ut_fail(e, HARP_E_USAGE, NULL, "--target expects cpu, sm80 or sm90, got '%s'", o->target);
  plan_machine mach;
  plan_machine_get((plan_arch)arch, &mach);
  rg_options opt = {0};
  opt.machine = &mach;
  return rg_form(e, m->g, &m->syms, &opt, out);
}

harp_status cli_write_region_dumps(harp_error *e, const cli_opts *o, const cli_model *m) {
  bool rd = cli_wants_dump(o, "region"), fd = cli_wants_dump(o, "function");
  if (!rd && !fd) return HARP_OK;
  rg_partition *p = NULL;
  fn_function *f = NULL;
  char *rj = NULL, *fj = NULL;
  harp_status s = cli_form_regions(e, o, m, &p);
  if (!s && rd) s = rg_dump_json(e, p, &rj);
  if (!s && fd) s = fn_build(e, p, "main", &f);
  if (!s && fd && !(fj = fn_dump_json(f))) s = ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  /* all or nothing */
  if (!s && rd) s = cli_write_text(e, o->dump_dir, "region.json", rj);
  if (!s && fd) s = cli_write_text(e, o->dump_dir, "function.json", fj);
  free(rj);
  free(fj);
  fn_free(f);
  rg_partition_free(p);
  return s;
}
