/* fz_dsl.c — the harp DSL fuzzer: the bytes are a .harp program.  What
 * loads must decompile to text that loads to an equal program (docs/dsl.md);
 * then main is lowered (shape variables at their defaults, the rest at
 * FZ_SYM_VALUE), prepared, verified and formed into regions (fz_form).
 * Needs: the DSL loader, decompiler and lowering, fz_common.c.
 * Gives: fz_dsl. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fz.h"
#include "harp/error.h"
#include "harp/frontend.h"

/* load(decompile(p)) equals p */
static void round_trip(const hg_program *p) {
  char *text = hg_decompile(p);
  if (!text) return;
  harp_error e = {0};
  hg_program *q = NULL;
  harp_status st = hg_harp_load_text(&e, text, strlen(text), "decompiled.harp", &q);
  char why[256] = "";
  int same = !st && hg_program_equal(p, q, why, sizeof why);
  if (!same) fprintf(stderr, "decompiled:\n%s\n%s%s\n", text, st ? e.msg : "differs: ", st ? "" : why);
  fz_check(same, "the decompiled program does not load to an equal one");
  hg_program_free(q);
  free(text);
}

int fz_dsl(const uint8_t *data, size_t size) {
  harp_error e = {0};
  hg_program *p = NULL;
  if (hg_harp_load_text(&e, (const char *)data, size, "fuzz.harp", &p)) {
    fz_check(e.code != HARP_OK && e.msg[0], "the DSL load failed without a message");
    return 0;
  }
  round_trip(p);
  tiny_graph *g = NULL;
  tiny_symtab defaults;
  tiny_symtab_init(&defaults);
  if (!hg_lower_or_bind(&e, p, NULL, NULL, &g, &defaults)) fz_form(g, &defaults);
  tiny_graph_free(g);
  tiny_symtab_free(&defaults);
  hg_program_free(p);
  return 0;
}
