/* fz_onnx.c — the ONNX fuzzer: the bytes are a ModelProto, imported as a
 * model file in fz_model_dir() (whose w.bin, sub/x.bin, big.bin an
 * initializer's external data may name; "up" is a link to the directory
 * above, which the importer must refuse), then lowered, prepared and formed
 * into regions (fz_form).  Odd-sized inputs are imported with run-time
 * control flow allowed (a host program stops after the import); inputs whose
 * size is a multiple of 8 also go through `harp check` (onnx_check_file).
 * Needs: the ONNX importer's internals (onnx_int.h), fz_common.c.
 * Gives: fz_onnx. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frontend/onnx_int.h"
#include "fz.h"
#include "harp/onnx.h"

/* `harp check` over the same bytes, written as the model's file. */
static void check_report(const uint8_t *data, size_t size) {
  char path[128];
  snprintf(path, sizeof path, "%s/m.onnx", fz_model_dir());
  FILE *f = fopen(path, "wb");
  if (!f) return;
  size_t w = fwrite(data, 1, size, f);
  if (fclose(f) != 0 || w != size) return;
  harp_error e = {0};
  onnx_report r;
  if (!onnx_check_file(&e, path, NULL, &r)) onnx_report_free(&r);
  else fz_check(e.code != HARP_OK && e.msg[0], "onnx_check_file failed without a message");
  remove(path);
}

int fz_onnx(const uint8_t *data, size_t size) {
  if (fz_setup() != 0) return 0;
  if (size % 8 == 0 && size > 0) check_report(data, size);
  Onnx__ModelProto *mp = size ? onnx__model_proto__unpack(NULL, size, data) : NULL;
  if (!mp) return 0;
  if (!mp->graph) {
    onnx__model_proto__free_unpacked(mp, NULL);
    return 0;
  }
  harp_error e = {0};
  onnx_opts o = {.host_flow = (size & 1) != 0};
  onnx_model m;
  memset(&m, 0, sizeof m);
  if (ox_import_model(&e, mp, "fuzz.onnx", fz_model_dir(), &o, NULL, &m)) { /* frees mp */
    fz_check(e.code != HARP_OK && e.msg[0], "the ONNX import failed without a message");
    return 0;
  }
  if (m.program && !m.flow) {
    tiny_graph *g = NULL;
    tiny_symtab defaults;
    tiny_symtab_init(&defaults);
    if (!hg_lower_or_bind(&e, m.program, NULL, NULL, &g, &defaults)) fz_form(g, &defaults);
    tiny_graph_free(g);
    tiny_symtab_free(&defaults);
  }
  onnx_model_free(&m);
  return 0;
}
