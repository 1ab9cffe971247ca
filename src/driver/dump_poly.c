/* dump_poly.c — the `indexbook` and `poly_view` dumps of `harp dump` and
 * `harp run`: DIR/indexbook.json and DIR/poly_view.json (seed 000 §12.2,
 * §12.3; docs/indexbook.md, docs/poly-view.md).  Both need the IndexBook,
 * so it is built once for the two. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "harp/poly.h"
#include "index/indexbook.h"
#include "util/util.h"

harp_status cli_write_poly_dumps(harp_error *e, const cli_opts *o, const cli_model *m) {
  bool ibd = cli_wants_dump(o, "indexbook"), pvd = cli_wants_dump(o, "poly_view");
  if (!ibd && !pvd) return HARP_OK;
  ib_book *ib = NULL;
  poly_view *pv = NULL;
  char *ib_json = NULL, *pv_json = NULL;
  harp_status s = ib_build(e, m->g, &m->syms, NULL, &ib);
  if (!s) s = ib_validate(e, ib);
  if (!s && ibd) s = ib_dump_json(e, ib, &ib_json);
  if (!s && pvd) s = poly_build(e, m->g, ib, NULL, &pv);
  if (!s && pvd) s = poly_dump_json(e, pv, &pv_json);
  /* all or nothing: write only once both are ready */
  if (!s && ibd) s = cli_write_text(e, o->dump_dir, "indexbook.json", ib_json);
  if (!s && pvd) s = cli_write_text(e, o->dump_dir, "poly_view.json", pv_json);
  free(ib_json);
  free(pv_json);
  poly_free(pv);
  ib_free(ib);
  return s;
}
