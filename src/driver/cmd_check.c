/* cmd_check.c — `harp check MODEL.onnx [--shape NAME=DIMS]...`: what harp
 * will and will not do with an ONNX model, in one go (onnx_check_file):
 * the ops it does not map (nested graphs too), the element types it does
 * not have, the graph inputs' dynamic dims and the shapes they need, and
 * every node the import refuses.  Exit 0 when the model would import. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "harp/onnx.h"
#include "util/util.h"

static const char check_help[] =
    "usage: harp check MODEL.onnx [--shape NAME=DIMS]... [--sym NAME=INT]... [--input NAME=FILE.npy]... [--param NAME=FILE.npy]...\n\n"
    "Say what harp will and will not do with an ONNX model, in one go: the op\n"
    "types (those harp does not map, in nested If / Loop / Scan graphs too),\n"
    "element types harp does not have, each graph input's dims and which are\n"
    "dynamic, the nodes that need a dynamic dim's value (and the --shape that\n"
    "gives it), and every node the import refuses (the import goes on past a\n"
    "failure; the nodes that read a failed node's outputs are counted as\n"
    "skipped).  The options are those of harp run: the import specialises on\n"
    "the shapes given (docs/onnx.md).  Exit code 0 when harp would import the\n"
    "model (and, every dim known, lower it), 1 otherwise.\n";

static void section(const char *title, char **lines, int n, const char *none) {
  printf("%s (%d):%s\n", title, n, n ? "" : none);
  for (int i = 0; i < n; i++) printf("  %s\n", lines[i]);
}

static void print_report(const char *model, const onnx_report *r) {
  printf("%s: opset %lld, %d node%s in %d graph%s\n", model, (long long)r->opset, r->nnodes, r->nnodes == 1 ? "" : "s", r->ngraphs,
         r->ngraphs == 1 ? "" : "s");
  printf("ops (%d types):", r->nops);
  for (int i = 0; i < r->nops; i++) printf("%s %s", i ? "," : "", r->ops[i]);
  printf("\n");
  section("graph inputs", r->inputs, r->ninputs, " none");
  section("ops harp does not have", r->unknown_ops, r->nunknown, " none");
  section("element types harp does not have", r->types, r->ntypes, " none");
  section("nodes that need a dynamic dim's value", r->needs, r->nneeds, " none");
  section("nodes harp refuses", r->refused, r->nrefused, " none");
  if (r->skipped) printf("nodes skipped (an input comes from a node above): %d\n", r->skipped);
  if (r->imports && r->ndynamic)
    printf("verdict: harp imports this model; %d dynamic dim%s must be given to run it (see graph inputs)\n", r->ndynamic,
           r->ndynamic == 1 ? "" : "s");
  else if (r->imports)
    printf("verdict: harp imports this model\n");
  else
    printf("verdict: harp does not import this model\n");
}

int cmd_check(int argc, char **argv) {
  for (int i = 1; i < argc; i++)
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      fputs(check_help, stdout);
      return 0;
    }
  harp_error e = {0};
  cli_opts o;
  int rc = cli_parse(argc, argv, "check", "shape sym input param", &o, &e);
  if (rc) {
    cli_opts_free(&o);
    return rc;
  }
  const char *dot = o.model ? strrchr(o.model, '.') : NULL;
  if (!dot || strcmp(dot, ".onnx") != 0) {
    cli_opts_free(&o);
    return cli_usage_error("check", "harp check takes an .onnx model");
  }
  onnx_shape *shapes = NULL;
  int ns = 0;
  onnx_report r;
  memset(&r, 0, sizeof r);
  harp_status st = cli_given_shapes(&e, &o, &shapes, &ns);
  onnx_opts oo = {.nfixed = o.nparams, .fixed_names = o.params, .read = cli_read_param, .read_ctx = &o,
                     .nshapes = ns, .shapes = shapes, .syms = &o.syms, .knobs = &o.knobs};
  if (!st) st = onnx_check_file(&e, o.model, &oo, &r);
  if (st) {
    rc = cli_report(&e);
  } else {
    print_report(o.model, &r);
    rc = r.imports ? 0 : 1;
  }
  onnx_report_free(&r);
  free(shapes);
  cli_opts_free(&o);
  return rc;
}
