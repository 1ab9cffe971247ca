/* fz_tiny.c — the Tiny IR fuzzer: the bytes are a JSON model in either
 * dialect (seed 001 uops, seed 000 ops/values).  What loads must write
 * back canonically and load again to the same text (docs/tiny-ir.md: load
 * -> write -> load is the identity); then it is prepared, verified and
 * formed into regions (fz_form).
 * Needs: the Tiny IR loaders and writer, fz_common.c.  Gives: fz_tiny. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fz.h"
#include "harp/error.h"

/* write(load(write(g))) == write(g) */
static void round_trip(const tiny_graph *g) {
  char *a = tiny_write_json(g);
  if (!a) return;
  harp_error e = {0};
  tiny_graph *g2 = NULL;
  harp_status st = tiny_load_json(&e, a, strlen(a), "written.json", &g2);
  if (st) fprintf(stderr, "%s\n%s\n", a, e.msg);
  fz_check(st == HARP_OK, "the canonical JSON of a loaded graph does not load");
  char *b = tiny_write_json(g2);
  if (b && strcmp(a, b)) fprintf(stderr, "first:\n%s\nsecond:\n%s\n", a, b);
  fz_check(!b || !strcmp(a, b), "load -> write -> load -> write changed the text");
  free(b);
  free(a);
  tiny_graph_free(g2);
}

int fz_tiny(const uint8_t *data, size_t size) {
  harp_error e = {0};
  tiny_graph *g = NULL;
  if (tiny_load_json(&e, (const char *)data, size, "fuzz.json", &g)) {
    fz_check(e.code != HARP_OK && e.msg[0], "tiny_load_json failed without a message");
    return 0;
  }
  round_trip(g);
  fz_form(g, NULL);
  tiny_graph_free(g);
  return 0;
}
