/* fz_common.c — what every input fuzzer shares: the target table, the
 * capped lowering through region formation, the oracle check, and the
 * ONNX target's model directory with its external-data files.
 * Needs: harp_lib (tiny, region).  Gives: fz.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fz.h"
#include "harp/error.h"
#include "harp/region.h"

const fz_target fz_targets[] = {
    {"onnx", fz_onnx},           {"tiny", fz_tiny},         {"dsl", fz_dsl},
    {"plan_json", fz_plan_json}, {"plan_dsl", fz_plan_dsl}, {"npy", fz_npy}, {"calib", fz_calib},
};
const int fz_ntargets = (int)(sizeof fz_targets / sizeof fz_targets[0]);

const fz_target *fz_find(const char *name) {
  for (int i = 0; i < fz_ntargets; i++)
    if (!strcmp(fz_targets[i].name, name)) return &fz_targets[i];
  return NULL;
}

void fz_check(int ok, const char *what) {
  if (ok) return;
  fprintf(stderr, "fuzz oracle failed: %s\n", what);
  abort();
}

char *fz_text(const uint8_t *data, size_t size) {
  char *s = malloc(size + 1);
  if (!s) return NULL;
  memcpy(s, data, size);
  s[size] = 0;
  return s;
}

/* Whether every value of the prepared g fits the caps of fz.h. */
static int within_caps(const tiny_graph *g) {
  if (g->n > FZ_MAX_NODES) return 0;
  for (int i = 0; i < g->n; i++) {
    int64_t n = tiny_shape_numel(&g->nodes[i].shape);
    if (n < 0 || n > FZ_MAX_NUMEL) return 0;
  }
  return 1;
}

void fz_form(tiny_graph *g, const tiny_symtab *defaults) {
  harp_error e = {0};
  tiny_symtab syms;
  tiny_symtab_init(&syms);
  int ok = 1;
  for (int i = 0; defaults && i < defaults->n && ok; i++)
    ok = !tiny_symtab_set(&e, &syms, defaults->names[i], defaults->values[i]);
  for (int i = 0; i < g->n && ok; i++) {
    const tiny_node *n = &g->nodes[i];
    if (n->op != TINY_INPUT) continue;
    for (int d = 0; d < n->a.input.shape.rank && d < TINY_MAX_RANK; d++) {
      const char *s = n->a.input.shape.d[d].sym;
      if (s && !tiny_symtab_get(&syms, s, NULL)) ok = !tiny_symtab_set(&e, &syms, s, FZ_SYM_VALUE);
    }
  }
  if (ok && !tiny_prepare(&e, g, &syms, false) && within_caps(g)) {
    rg_options opt = {.window = 8};
    rg_partition *p = NULL;
    if (!rg_form(&e, g, &syms, &opt, &p)) {
      harp_error ce = {0};
      fz_check(!rg_partition_check(&ce, p), "rg_form gave a partition that fails rg_partition_check");
      rg_partition_free(p);
    } else {
      fz_check(e.code != HARP_OK && e.msg[0], "rg_form failed without a message");
    }
  }
  tiny_symtab_free(&syms);
}

/* ---- the ONNX target's model directory ------------------------------------- */
static char model_dir[64];

static void remove_model_dir(void) {
  static const char *const names[] = {"w.bin", "sub/x.bin", "sub", "up", "big.bin"};
  char path[128];
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    snprintf(path, sizeof path, "%s/%s", model_dir, names[i]);
    if (unlink(path) != 0) rmdir(path);
  }
  rmdir(model_dir);
}

static int write_bytes(const char *name, size_t n) {
  char path[128];
  snprintf(path, sizeof path, "%s/%s", model_dir, name);
  FILE *f = fopen(path, "wb");
  if (!f) return -1;
  for (size_t i = 0; i < n; i++) fputc((int)((i * 37 + 11) & 0xff), f);
  return fclose(f);
}

int fz_setup(void) {
  if (model_dir[0]) return 0;
  const char *tmp = getenv("TMPDIR");
  snprintf(model_dir, sizeof model_dir, "%.40s/harp-fz-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (!mkdtemp(model_dir)) return -1;
  atexit(remove_model_dir);
  char path[128];
  snprintf(path, sizeof path, "%s/sub", model_dir);
  if (mkdir(path, 0700) != 0) return -1;
  snprintf(path, sizeof path, "%s/up", model_dir);
  if (symlink("..", path) != 0) return -1; /* a location through it leads out: refused */
  return write_bytes("w.bin", 4096) || write_bytes("sub/x.bin", 256) || write_bytes("big.bin", 65536);
}

const char *fz_model_dir(void) { return model_dir; }
